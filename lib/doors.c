/*
 * doors.c: the engine's top: every entry into it from below.
 *
 * An entry is a ZooKeeper answer or watch event (on the wire's delivery
 * thread), a timer of the session thread, or a change of the session. Each
 * is a function here, which takes s->mu (a timer and a session change have
 * it already), calls down to record the fact (request.c, watch.c,
 * contender.c, owner.c, lease.c), marks the contenders it concerns, runs the
 * driver once and lets s->mu go. The files below reach these functions only
 * through the pointers the composition root installs on the session
 * (s->doors, s->layers: root.c), never by name, so that calls go one way
 * (design.md, "Layout"): libuv's loop calls w->cb, a pointer the handle
 * installed. The user's calls are the other entries, from above (lock.c).
 */
#include "doors.h"
#include "driver.h"
#include "lease.h"
#include "owner.h"
#include "previous.h"
#include "request.h"
#include "stale.h"
#include "watch.h"

/* ---- answers: one door per ZooKeeper signature ------------------------------------- */

/* The answer is borrowed from the client: valid for the drive below, which
 * reads it (the contender's step forgets it). */
static void answered(const void *slot, struct zkl_answer *a)
{
    zklock_session_t *s = zklock__answer_session(slot);

    pthread_mutex_lock(&s->mu);
    zklock__mark_event(zklock__answer_record(slot, a));
    zklock__drive(s);
    pthread_mutex_unlock(&s->mu);
}

static void answer_string(int rc, const char *value, const void *data)
{
    answered(data, &(struct zkl_answer){.rc = rc, .value = value});
}

static void answer_string_stat(int rc, const char *value, const struct Stat *st, const void *data)
{
    answered(data, &(struct zkl_answer){.rc = rc, .value = value, .stat = st});
}

static void answer_strings_stat(int rc, const struct String_vector *names, const struct Stat *st,
                                const void *data)
{
    answered(data, &(struct zkl_answer){.rc = rc, .names = names, .stat = st});
}

static void answer_data(int rc, const char *value, int len, const struct Stat *st,
                        const void *data)
{
    answered(data, &(struct zkl_answer){.rc = rc, .value = value, .len = len, .stat = st});
}

static void answer_stat(int rc, const struct Stat *st, const void *data)
{
    answered(data, &(struct zkl_answer){.rc = rc, .stat = st});
}

static void answer_void(int rc, const void *data)
{
    answered(data, &(struct zkl_answer){.rc = rc});
}

static void heartbeat_answered(int rc, const struct Stat *st, const void *data)
{
    zklock_session_t *s = zklock__heartbeat_session(data);

    (void)st;
    pthread_mutex_lock(&s->mu);
    zklock__heartbeat_answered(data, rc); /* marks those granted on it */
    zklock__drive(s);
    pthread_mutex_unlock(&s->mu);
}

/* ---- watch events --------------------------------------------------------------------- */

/* Every watcher also receives the session's state changes (type
 * ZOO_SESSION_EVENT): those are the session's business (its own watcher). */
static void watched(zhandle_t *zh, int type, const char *path, void *ctx,
                    void (*record)(zkl_contender_t *c, zhandle_t *zh, int type, const char *path))
{
    zkl_contender_t *c = ctx;
    zklock_session_t *s;

    if (type == ZOO_SESSION_EVENT)
        return;
    s = session_of(c);
    pthread_mutex_lock(&s->mu);
    record(c, zh, type, path);
    zklock__mark_event(c);
    zklock__drive(s);
    pthread_mutex_unlock(&s->mu);
}

static void blocker_event(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    watched(zh, type, path, ctx, zklock__blocker_event);
}

static void own_event(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    watched(zh, type, path, ctx, zklock__own_event);
}

static void queue_event(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    watched(zh, type, path, ctx, zklock__queue_event);
}

/* ---- timers (the session thread, s->mu held) -------------------------------------------- */

static void own_watch_due(struct zkl_timer *t, zklock_session_t *s)
{
    zklock__own_watch_due(t);
    zklock__drive(s);
}

static void deadline_passed(struct zkl_timer *t, zklock_session_t *s)
{
    zklock__deadline_passed(t);
    zklock__drive(s);
}

static void max_hold_passed(struct zkl_timer *t, zklock_session_t *s)
{
    zklock__max_hold_passed(t, s);
    zklock__drive(s);
}

static void heartbeat_due(struct zkl_timer *t, zklock_session_t *s)
{
    zklock__heartbeat_due(t, s);
    zklock__drive(s);
}

static void lease_ends(struct zkl_timer *t, zklock_session_t *s)
{
    zklock__lease_end_due(t, s);
    zklock__drive(s);
}

static void track_delay_over(struct zkl_timer *t, zklock_session_t *s)
{
    zklock__track_delay_timer(t);
    zklock__drive(s);
}

static void track_refresh_due(struct zkl_timer *t, zklock_session_t *s)
{
    zklock__track_refresh_timer(t);
    zklock__drive(s);
}

static void track_lease_over(struct zkl_timer *t, zklock_session_t *s)
{
    zklock__track_lease_timer(t);
    zklock__drive(s);
}

const struct zkl_doors zklock__engine_doors = {
    .answer_string = answer_string,
    .answer_string_stat = answer_string_stat,
    .answer_strings_stat = answer_strings_stat,
    .answer_data = answer_data,
    .answer_stat = answer_stat,
    .answer_void = answer_void,
    .blocker_event = blocker_event,
    .own_event = own_event,
    .queue_event = queue_event,
    .own_watch_due = own_watch_due,
    .deadline_passed = deadline_passed,
    .max_hold_passed = max_hold_passed,
    .heartbeat_due = heartbeat_due,
    .lease_ends = lease_ends,
    .track_delay_over = track_delay_over,
    .track_refresh_due = track_refresh_due,
    .track_lease_over = track_lease_over,
    .heartbeat_answered = heartbeat_answered,
};

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
