/*
 * driver.c: the one loop that moves contenders.
 *
 * Whatever enters the library with s->mu taken (an answer or a watch event
 * from ZooKeeper, a timer, a session change, a user's call) records what it
 * learnt in the contenders it concerns, marks them, and calls
 * zklock__drive() once at its end. The driver then
 *   1. steps the marked contenders, in the order they were marked, until
 *      none is left (a step may mark others: a parent, a sub, itself);
 *   2. decides the owners' calls of the contenders it stepped;
 *   3. frees those of them that are finished: the one place a contender is
 *      freed, so nothing frees what the code above it still walks.
 * The shape of curl's multi interface (events only mark a transfer) and of
 * libuv's loop (handles are freed in one phase of it).
 */
#include "driver.h"
#include "previous.h"
#include "lease.h"
#include "owner.h"
#include "request.h"
#include "stale.h"
#include "step.h"
#include "subs.h"
#include "watch.h"

#include <assert.h>

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
    if (c->attached || c->inside > 0 || c->ops > 0 || c->pred_watches > 0 || c->own_watches > 0 ||
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
    assert(!s->driving);
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

/* ---- the session's changes: the engine as a layer above the session ---------- */

/* The connection is (back) up: every contender takes its next step. */
static void engine_resumed(zklock_session_t *s)
{
    /* First, so that the server removes them before our new creates: a
     * session answers in order. Then the probes of lost holds, so that an
     * on_lost comes before any new hold of the same owner. */
    zklock__stale_sweep(s);
    zklock__lease_resumed(s);
    for (int lost_first = 1; lost_first >= 0; lost_first--) {
        for (zkl_contender_t *c = s->contenders; c; c = c->sess_next) {
            if ((c->phase == ZKL_LOST) != lost_first)
                continue;
            c->backoff = false;
            zklock__mark(c);
        }
    }
    zklock__drive(s);
}

/* Every contender looks at the session state again (a try-once gives up). */
static void engine_suspended(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        zklock__mark(c);
    zklock__drive(s);
}

/* The ZooKeeper session ended (s->gen has moved on): every node is gone, or
 * will be when the server notices (stale.c); the requests of its handle
 * will never be answered. What that means for each contender is its step's
 * (reason: ZKLOCK_LOST_EXPIRED, ZKLOCK_ECLOSED for zklock_session_close, or
 * ZAUTHFAILED). */
static void engine_ended(zklock_session_t *s, int reason)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next) {
        if (s->ended_unconfirmed && reason != ZKLOCK_ECLOSED && c->phase != ZKL_GONE)
            zklock__stale_add(c); /* it may outlive the session we gave up */
        c->busy = 0;
        c->need_list = c->need_parents = c->create_unknown = false;
        c->own_pending = c->watch_pending = c->queue_listing = false;
        c->watch_wanted = false; /* registrations go with the handle */
        c->session_end = reason;
        zklock__mark(c);
    }
    zklock__drive(s);
}

/* The old handle is closed: none of its watches can fire any more, and
 * none of its answers will come (zookeeper_close() may drop completions
 * still queued for its stopped completion thread: without this, a contender
 * with a request in flight then would never be freed). */
static void engine_handle_closed(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next) {
        zklock__requests_gone(c);
        c->pred_watches = c->own_watches = c->queue_watches = 0;
        zklock__watch_over(c);
        zklock__mark(c);
    }
    zklock__lease_handle_closed(s);
    zklock__drive(s);
}

/* Adopted handles: take back every watch we registered on the
 * application's handle. */
static void engine_unwatch_all(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next) {
        zklock__unwatch_both(c);
        zklock__mark(c);
    }
    zklock__drive(s);
}

/* An adopted session closes: our nodes go while the connection lasts. */
static void engine_close_begin(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        zklock__leave(c, ZKLOCK_ECLOSED);
    zklock__drive(s);
}

static void engine_freeing(zklock_session_t *s)
{
    zklock__stale_free_all(s);
}

static bool engine_busy(const zklock_session_t *s)
{
    for (const zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        if (c->phase == ZKL_LEAVING)
            return true;
    return false;
}

const struct zkl_layer zklock__engine_layer = {
    .resumed = engine_resumed,
    .suspended = engine_suspended,
    .ended = engine_ended,
    .handle_closed = engine_handle_closed,
    .unwatch_all = engine_unwatch_all,
    .close_begin = engine_close_begin,
    .busy = engine_busy,
    .freeing = engine_freeing,
};
