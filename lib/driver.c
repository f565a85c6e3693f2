/*
 * driver.c: the one loop that moves contenders.
 *
 * Whatever enters the engine with s->mu taken (an answer or a watch event
 * from ZooKeeper, a timer, a session change: doors.c; a user's call:
 * lock.c) records what it learnt in the contenders it concerns, marks them,
 * and calls zklock__drive() once at its end. The driver then
 *   1. steps the marked contenders, in the order they were marked, until
 *      none is left (a step may mark others: a parent, a sub, itself);
 *   2. decides the owners' calls of the contenders it stepped;
 *   3. frees those of them that are finished: the one place a contender is
 *      freed, so nothing frees what the code above it still walks.
 * The shape of curl's multi interface (events only mark a transfer) and of
 * libuv's loop (handles are freed in one phase of it).
 */
#include "driver.h"
#include "owner.h"
#include "previous.h"
#include "step.h"

/* The next marked contender (NULL: none), now on the visited list. */
static zkl_contender_t *next_marked(zklock_session_t *s)
{
    zkl_contender_t *c = s->marked_head;

    if (!c)
        return NULL;
    s->marked_head = c->mark_next;
    if (!s->marked_head)
        s->marked_tail = NULL;
    c->marked = false;
    if (!c->visited) {
        c->visited = true;
        c->visit_next = s->visited;
        s->visited = c;
    }
    return c;
}

static void step_marked(zklock_session_t *s)
{
    zkl_contender_t *c;

    while ((c = next_marked(s)) != NULL)
        zklock__step(c);
}

/* The owners' calls of the contenders stepped: a blocked thread woken, a
 * done callback queued. */
static void decide_calls(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->visited; c; c = c->visit_next)
        zklock__call_decide(c);
}

/* Nobody can reach c any more: no owner, no request in flight, no watch
 * that could still fire, no outcome owed, and nothing left on the server,
 * its subs' included (its step disowns them as they finish). */
static bool finished(zkl_contender_t *c)
{
    if (c->attached || c->ops > 0 || c->pred_watches > 0 || c->own_watches > 0 ||
        c->queue_watches > 0)
        return false;
    if (c->loss_unconfirmed || c->waiting || c->releasing)
        return false; /* on_lost, or a call's outcome, is still owed */
    return (c->phase == ZKL_GONE || c->phase == ZKL_LOST) && !c->subs;
}

/* Frees the visited contenders that are finished; a parent's subs, let go
 * meanwhile, are marked (the next round frees them). The one place a
 * contender is freed. */
static void free_finished(zklock_session_t *s)
{
    while (s->visited) {
        zkl_contender_t *c = s->visited;
        s->visited = c->visit_next;
        c->visited = false;
        if (!c->marked && finished(c)) {
            zklock__track_free(c);
            zklock__contender_free(c);
        }
    }
}

void zklock__drive(zklock_session_t *s)
{
    if (s->driving)
        zklock__internal_error(s, "the driver was entered while it ran (from a step)");
    s->driving = true;
    do {
        do {
            step_marked(s);
            decide_calls(s);
        } while (s->marked_head);
        free_finished(s);
    } while (s->marked_head);
    s->driving = false;
}
