/*
 * owner.c: who owns a place in a queue, and the calls it makes on it.
 *
 * A contender belongs to an owner: the thread that acquired it
 * (ZKLOCK_OWNER_THREAD) or the handle (ZKLOCK_OWNER_HANDLE). The owner makes
 * one call at a time on it: an acquisition, or a release. A call is decided
 * here, in one place, whoever waits for it: the driver asks
 * zklock__call_decide() about every contender it stepped, and once the call
 * is decided its outcome goes either to a thread blocked in it (c->cond) or
 * to a done callback (dispatch.c). A blocking call is an asynchronous one
 * that waits: there is no second implementation.
 *
 * An acquisition is decided when the contender holds, or when it gave up
 * (deadline, cancel, try-once busy or cut off, an error) and its node is
 * deleted, or cannot be now (no connection: the engine finishes that in the
 * background). A release is decided when the server confirmed the delete
 * or the session ended.
 */
#include "lease.h"
#include "lockstats.h"
#include "owner.h"

#include <errno.h>

/* ---- owners ---------------------------------------------------------------------- */

zkl_contender_t *zklock__owner_contender(const zklock_t *l)
{
    pthread_t self = pthread_self();
    bool by_handle = l->opts.owner == ZKLOCK_OWNER_HANDLE;

    for (zkl_contender_t *c = l->contenders; c; c = c->lock_next)
        if (c->attached && (by_handle || pthread_equal(c->owner, self)))
            return c;
    return NULL;
}

/* ---- done callbacks ----------------------------------------------------------------- */

struct zkl_done {
    struct zkl_callback cb;
    zklock_t *l;
    zklock_done_fn fn;
    void *ctx;
    int rc;
};

static bool done_begin(struct zkl_callback *cb)
{
    ((struct zkl_done *)cb)->l->in_callback++; /* zklock_free waits for it */
    return true; /* exactly once, even for a handle being freed */
}

static void done_run(struct zkl_callback *cb)
{
    struct zkl_done *d = (struct zkl_done *)cb;
    d->fn(d->l, d->rc, d->ctx);
}

static void done_end(struct zkl_callback *cb)
{
    struct zkl_done *d = (struct zkl_done *)cb;
    zklock__lock_unref(d->l);
    free(d);
}

/* A done that ran (done_begin counted it in): it is over. */
static void done_ran_end(struct zkl_callback *cb)
{
    zklock_t *l = ((struct zkl_done *)cb)->l;

    l->in_callback--;
    pthread_cond_broadcast(&l->s->cond);
    done_end(cb);
}

static const struct zkl_callback_ops done_ops = {done_begin, done_run, done_ran_end};

struct zkl_done *zklock__done_new(zklock_t *l, zklock_done_fn fn, void *ctx)
{
    struct zkl_done *d = calloc(1, sizeof *d);

    if (!d)
        return NULL;
    d->cb.ops = &done_ops;
    d->cb.owner = l;
    d->l = l;
    d->fn = fn;
    d->ctx = ctx;
    l->refs++;
    return d;
}

bool zklock__is_done_callback(const struct zkl_callback *cb)
{
    return cb->ops == &done_ops;
}

void zklock__done_discard(struct zkl_done *d)
{
    if (d)
        done_end(&d->cb); /* never queued: nothing counted in */
}

void zklock__done_queue(struct zkl_done *d, int rc)
{
    d->rc = rc;
    zklock__dispatch_push(d->l->s, &d->cb);
}

/* ---- on_lost ------------------------------------------------------------------------- */

struct lost_callback {
    struct zkl_callback cb;
    zklock_t *l;
    int reason;
    int64_t token; /* of the hold it reports (zklock_lost_token) */
    bool ran;
};

/* The on_lost the calling thread is running, if any. */
static __thread const struct lost_callback *reporting;

static bool lost_begin(struct zkl_callback *cb)
{
    struct lost_callback *lc = (struct lost_callback *)cb;

    lc->ran = !lc->l->freeing;
    if (lc->ran)
        lc->l->in_callback++;
    return lc->ran;
}

static void lost_run(struct zkl_callback *cb)
{
    struct lost_callback *lc = (struct lost_callback *)cb;
    const struct lost_callback *outer = reporting; /* a callback may run others (zklock_free) */

    reporting = lc;
    lc->l->opts.on_lost(lc->l, lc->reason, lc->l->opts.ctx);
    reporting = outer;
}

static void lost_end(struct zkl_callback *cb)
{
    struct lost_callback *lc = (struct lost_callback *)cb;
    zklock_t *l = lc->l;

    if (lc->ran) {
        l->in_callback--;
        pthread_cond_broadcast(&l->s->cond); /* zklock_free waits for it */
    }
    zklock__lock_unref(l);
    free(lc);
}

static const struct zkl_callback_ops lost_ops = {lost_begin, lost_run, lost_end};

static void queue_lost(zklock_t *l, int reason, int64_t token)
{
    struct lost_callback *lc;

    if (!l->opts.on_lost || !(lc = calloc(1, sizeof *lc)))
        return; /* the hold count and ZKLOCK_ELOST still tell the truth */
    lc->cb.ops = &lost_ops;
    lc->cb.owner = l;
    lc->l = l;
    lc->reason = reason;
    lc->token = token;
    l->refs++;
    zklock__dispatch_push(l->s, &lc->cb);
}

void zklock__tell_lost(zkl_contender_t *c, int reason)
{
    if (c->l->internal)
        return; /* a recipe's own hold: its recipe deals with the loss */
    c->lost_reason = reason;
    session_of(c)->stats.lost++;
    zklock__stats_hold_over(c, true);
    queue_lost(c->l, reason, c->czxid);
}

/* A blocking acquisition's outcome goes straight to its thread, on_lost
 * through the callback queue: a new hold of l can be granted (and
 * zklock_acquire return) before the on_lost of an older one has run. The
 * token tells the two apart. Reads only what the running callback owns:
 * no lock needed. */
int zklock_lost_token(const zklock_t *l, int64_t *token)
{
    if (!l || !token || !reporting || reporting->l != l)
        return ZKLOCK_EINVAL;
    *token = reporting->token;
    return ZKLOCK_OK;
}

/* ---- starting calls ------------------------------------------------------------------ */

void zklock__deadline_passed(struct zkl_timer *t)
{
    zkl_contender_t *c = (zkl_contender_t *)((char *)t - offsetof(zkl_contender_t, deadline_timer));

    zklock__mark(c); /* its step gives up (the timer is no longer armed) */
}

void zklock__acquire_start(zkl_contender_t *c, int timeout_ms, struct zkl_done *done,
                           struct zkl_waiter *waiter)
{
    zklock_session_t *s = session_of(c);

    c->waiting = true;
    c->done = done;
    c->acq_waiter = waiter;
    c->try_once = timeout_ms == 0;
    c->has_deadline = timeout_ms > 0;
    if (c->has_deadline)
        zklock__timer_arm_in(s, &c->deadline_timer, timeout_ms);
    zklock__lease_keep(s); /* the lease timers are armed; they heartbeat only for a hold */
    zklock__mark(c);
}

void zklock__release_start(zkl_contender_t *c, struct zkl_done *done, struct zkl_waiter *waiter)
{
    c->releasing = true;
    c->done = done;
    c->rel_waiter = waiter;
    zklock__mark(c); /* its step lets the node go */
}

/* ---- a maximum hold (opts.max_hold_ms) ------------------------------------------------ */

/* c's maximum hold passed (its timer's time): a fact for its step. */
static void max_hold_over(zkl_contender_t *c, zklock_session_t *s)
{
    struct timespec now;

    /* Due with the lease's end, or late past the lease's margin (this
     * process was stopped, the host slept): the session may have ended
     * first. The run-out is read first; a late end is probed, and the
     * answer says why the hold really ended (zklock__lose_unconfirmed). */
    zklock__lease_check(s);
    zklock__now(s, &now);
    c->max_hold_late = zklock__ms_between(&c->max_hold_timer.at, &now) >
                       s->negotiated_ms / ZKL_LEASE_MARGIN_DIVISOR;
    c->max_hold_over = true; /* its step ends the hold, if it still holds */
    zklock__mark(c);
}

/* The maximum hold's timer (its door, doors.c). */
void zklock__max_hold_passed(struct zkl_timer *t, zklock_session_t *s)
{
    max_hold_over((zkl_contender_t *)((char *)t - offsetof(zkl_contender_t, max_hold_timer)), s);
}

void zklock__max_hold_check(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next) {
        if (!zklock__timer_armed(&c->max_hold_timer) || !zklock__passed(s, &c->max_hold_timer.at))
            continue;
        zklock__timer_cancel(s, &c->max_hold_timer); /* due: ours to fire */
        max_hold_over(c, s);
    }
}

/* The owner's hold begins (hold count 0 -> 1): its clock starts. A sub
 * (a multi-lock's member, a semaphore's acquisition mutex) holds for its
 * parent, whose clock counts. */
void zklock__hold_begins(zkl_contender_t *c)
{
    int ms = c->l->opts.max_hold_ms;

    if (ms <= 0 || c->parent || c->l->internal)
        return;
    c->max_hold_over = false;
    zklock__timer_arm_in(session_of(c), &c->max_hold_timer, ms);
}

/* ---- deciding ------------------------------------------------------------------------- */

/* The call's outcome goes to whoever waits for it: a blocked caller (its
 * own record: a release may be waited for while the acquisition's caller has
 * not woken yet), or a done callback. An owner keeps only a hold: a
 * contender that failed is let go (the engine frees it once its node is
 * gone: a blocked caller never touches it again). */
static void decide(zkl_contender_t *c, int rc, bool release, bool holds)
{
    struct zkl_waiter **w = release ? &c->rel_waiter : &c->acq_waiter;

    if (!release)
        zklock__stats_acquired(c, holds ? ZKLOCK_OK : rc);
    if (c->done) {
        zklock__done_queue(c->done, rc);
        c->done = NULL;
    } else if (*w) {
        (*w)->decided = true;
        (*w)->rc = rc;
        pthread_cond_signal(&(*w)->cond);
        *w = NULL;
    }
    if (!holds)
        c->attached = false;
    pthread_cond_broadcast(&session_of(c)->cond); /* zklock_free waits for calls */
}

bool zklock__waiter_init(struct zkl_waiter *w)
{
    w->decided = false;
    w->rc = 0;
    return zklock__cond_init(&w->cond) == 0;
}

void zklock__waiter_fini(struct zkl_waiter *w)
{
    pthread_cond_destroy(&w->cond);
}

static bool deadline_over(const zkl_contender_t *c)
{
    return c->has_deadline && !zklock__timer_armed(&c->deadline_timer);
}

/* Why the owner's acquisition gives up now (0: it does not): canceled, a
 * try-once cut off, a deadline passed. Read by the contender's step. */
int zklock__call_gives_up(const zkl_contender_t *c)
{
    if (!c->waiting || !ZKL_WANTS(c))
        return 0;
    if (c->canceled)
        return ZKLOCK_ECANCELED;
    if (c->try_once && !zklock__connected(session_of(c)))
        return ZCONNECTIONLOSS;
    if (deadline_over(c))
        return ZKLOCK_ETIMEDOUT;
    return 0;
}

/* The driver, once the marked contenders are stepped: decides c's call in
 * progress if its outcome is known. Never frees c, never steps it. */
void zklock__call_decide(zkl_contender_t *c)
{
    bool connected = zklock__connected(session_of(c));

    if (c->parent)
        return; /* a sub: its parent's step reads it (zklock__subs_read) */
    if (c->waiting && c->phase == ZKL_HELD) {
        c->waiting = false;
        c->holds = 1;
        zklock__timer_cancel(session_of(c), &c->deadline_timer);
        decide(c, ZKLOCK_OK, false, true);
    } else if (c->waiting &&
               (c->phase == ZKL_GONE || (c->phase == ZKL_LEAVING && !connected))) {
        c->waiting = false;
        zklock__timer_cancel(session_of(c), &c->deadline_timer);
        decide(c, c->result, false, false);
    }
    /* Not chained to the acquisition's: a contender with both in progress
     * gets both decided (else `releasing` stayed set, and it was never
     * finished). */
    if (c->releasing && c->phase == ZKL_GONE) {
        c->releasing = false;
        decide(c, c->result, true, false);
    }
}

bool zklock__call_await(zklock_session_t *s, zkl_contender_t *c, struct zkl_waiter *me)
{
    /* The session thread fires the deadline; should it be held up (a
     * renewal closing a handle), the waiter sees it pass by itself. c is
     * read only while the call is undecided (it lives until then). */
    while (!me->decided) {
        struct timespec at; /* c may be gone when the wait returns */
        bool timed = me == c->acq_waiter && zklock__timer_armed(&c->deadline_timer);
        if (timed)
            at = c->deadline_timer.at;
        if (!timed) {
            zklock__cond_wait(s, &me->cond);
        } else if (zklock__cond_wait_until(s, &me->cond, &at, 0) == ETIMEDOUT && !me->decided) {
            zklock__timer_cancel(s, &c->deadline_timer);
            zklock__mark(c); /* its step gives up */
            return false;
        }
    }
    return true;
}
