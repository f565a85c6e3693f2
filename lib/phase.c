/*
 * phase.c: a contender's phases and the transitions between them.
 *
 *            +------------------ requeued (its node or its place went) ----+
 *            v                                                             |
 *   QUEUING ---- its turn, lease fresh ------------------------------> HELD ----> LOST
 *      |  \                                                            ^  |   lost (node deleted,
 *      |   +-- its turn on an old lease -----> GRANTING -- proved -----+  |   session ended, lease)
 *      |                                          |                       |
 *      +------ gives up (deadline, cancel, -------+-----------------------+--> LEAVING --> GONE
 *              try-once, error) / released                                  (its node goes)
 *
 * QUEUING and GRANTING may also end in GONE at once (the session closed, or
 * nothing was started), and a HELD contender whose owner never heard of the
 * hold queues again when the hold is lost. LOST and GONE are the ends.
 * Pure: the table, unit-tested (test_unit.c); contender.c's
 * zklock__set_phase is the one function that changes a phase, and refuses
 * (an internal error, in every build) a transition the table lacks.
 */
#include "contender.h"

#define T(from, to) (UINT64_C(1) << ((from) * ZKL_PHASE_COUNT + (to)))

static const uint64_t allowed =
    T(ZKL_QUEUING, ZKL_QUEUING) | T(ZKL_QUEUING, ZKL_GRANTING) | T(ZKL_QUEUING, ZKL_HELD) |
    T(ZKL_QUEUING, ZKL_LEAVING) | T(ZKL_QUEUING, ZKL_GONE) |
    T(ZKL_GRANTING, ZKL_QUEUING) | T(ZKL_GRANTING, ZKL_HELD) | T(ZKL_GRANTING, ZKL_LEAVING) |
    T(ZKL_GRANTING, ZKL_GONE) |
    T(ZKL_HELD, ZKL_QUEUING) | T(ZKL_HELD, ZKL_LOST) | T(ZKL_HELD, ZKL_LEAVING) |
    T(ZKL_LEAVING, ZKL_LEAVING) | T(ZKL_LEAVING, ZKL_GONE);

static const char *const names[ZKL_PHASE_COUNT] = {
    [ZKL_QUEUING] = "QUEUING", [ZKL_GRANTING] = "GRANTING", [ZKL_HELD] = "HELD",
    [ZKL_LOST] = "LOST",       [ZKL_LEAVING] = "LEAVING",   [ZKL_GONE] = "GONE",
};

const char *zklock__phase_name(enum zkl_phase p)
{
    return (unsigned)p < ZKL_PHASE_COUNT ? names[p] : "?";
}

bool zklock__phase_allowed(enum zkl_phase from, enum zkl_phase to)
{
    return (unsigned)from < ZKL_PHASE_COUNT && (unsigned)to < ZKL_PHASE_COUNT &&
           (allowed & T(from, to)) != 0;
}
