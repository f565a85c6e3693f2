/*
 * lock.c: the calls every recipe shares (zklock_acquire, zklock_release,
 * their asynchronous forms, ...).
 *
 * A thin layer: it checks what the caller may do where it stands (a thread,
 * a zklock callback, ZooKeeper's completion thread), finds or makes the
 * owner's contender and starts a call on it (owner.c); a blocking call then
 * waits for its verdict. The engine and ZooKeeper's completion thread do
 * the rest.
 *
 * One rule for the asynchronous calls: a call the caller's own state or
 * arguments refuse (a closed session, another call in progress, an upgrade,
 * a multi-lock's held member, not held) starts nothing: it returns the
 * error, as the blocking call does, and done is never called. A call that
 * started tells its outcome through done, even one known at once (a
 * reentrant hold, a try-once while disconnected, a lost hold's release).
 */
#include "contender.h"
#include "driver.h"
#include "lease.h"
#include "lockstats.h"
#include "owner.h"
#include "previous.h"
#include "recipe.h"
#include "timer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool closed(const zklock_t *l)
{
    return l->s->closing || l->s->state == ZKL_S_CLOSED || l->freeing;
}

static bool handle_owned(const zklock_t *l)
{
    return l->opts.owner == ZKLOCK_OWNER_HANDLE;
}

/* Where nothing may wait: the completion thread (ZooKeeper's answers come
 * there), a zklock callback (the callbacks behind it would wait, and
 * zklock_free and zklock_session_close wait for it). */
static bool may_wait(const zklock_session_t *s)
{
    return !zklock__on_completion_thread(s) && !zklock__in_callback(s);
}

void zklock__lapses_caught(zklock_session_t *s)
{
    /* A host that slept past the local expiry: the session is over first
     * (with ZKLOCK_LEASE_SESSION a hold's only end; the strict lease ran
     * out before it). */
    zklock__local_expiry_check(s);
    zklock__lease_check(s);
    zklock__max_hold_check(s); /* a maximum hold is answered by as the lease is */
    zklock__track_leases_check(s); /* ... and a tracking hold's record's lease */
    if (s->marked_head)
        zklock__drive(s); /* an entry of its own: the holds end before the call looks */
}

/* Counts a caller inside a blocking call, so that zklock_free() and
 * zklock_session_close() can wait for it to leave; it keeps a reference,
 * so that a zklock_free() that cannot wait leaves the handle to it. */
static void enter(zklock_t *l)
{
    l->users++;
    l->s->users++;
    l->refs++;
}

static void leave(zklock_t *l)
{
    l->users--;
    l->s->users--;
    pthread_cond_broadcast(&l->s->cond);
    zklock__lock_unref(l);
}

/* Waits for the blocking call `me` was started with on c (the driver ran:
 * the call's start is sent); the caller's own deadline, seen passing by
 * itself, is an entry of its own (the driver gives the acquisition up).
 * Once decided, c is the engine's (it may be freed already). */
static int wait_for(zklock_t *l, zkl_contender_t *c, struct zkl_waiter *me)
{
    enter(l);
    while (!zklock__call_await(l->s, c, me))
        zklock__drive(l->s);
    leave(l);
    return me->rc;
}

/* The outcome of a call that started, known at once: returned (a blocking
 * call), or queued for done. */
static int answer(struct zkl_done *done, int rc)
{
    if (!done)
        return rc;
    zklock__done_queue(done, rc);
    return ZKLOCK_OK;
}

/* ---- acquire ------------------------------------------------------------------ */

/* Why l cannot be acquired from here, or 0. */
static int acquire_refused(const zklock_t *l, int timeout_ms, bool async)
{
    zklock_session_t *s = l->s;
    int rc;

    if (closed(l))
        return ZKLOCK_ECLOSED;
    if ((rc = zklock__session_refusal(s)) != 0)
        return rc; /* our credentials were rejected: no session to queue on */
    if (async)
        return 0; /* never waits */
    if (zklock__on_completion_thread(s))
        return ZKLOCK_EDEADLK; /* the answers would come on this very thread */
    if (zklock__in_callback(s) && !handle_owned(l))
        return ZKLOCK_EOWNER; /* a hold no thread of the user's could release */
    if (zklock__in_callback(s) && timeout_ms != 0)
        return ZKLOCK_EDEADLK; /* the session's own work waits for us */
    return 0;
}

/* c is a multi-lock's member while the multi-lock's acquisition is in
 * progress: its turn may have come, but the user's hold is the
 * multi-lock's, not begun (the member's token may not even be read). To
 * its owner the member is being acquired, not held (zklock.3, the
 * multi-lock), until the acquisition's outcome is told: while the
 * multi-lock waits (QUEUING, GRANTING) and also once it gave up (LEAVING,
 * its members' nodes being deleted, its caller not told yet). */
static bool multi_still_waits(const zkl_contender_t *c)
{
    return c->parent && c->parent->waiting;
}

bool zklock__acquiring(const zkl_contender_t *c)
{
    return c->waiting || multi_still_waits(c);
}

/* The contender through which l's owner holds l, as the queries answer. */
static const zkl_contender_t *queried_contender(const zklock_t *l)
{
    const zkl_contender_t *c = zklock__owner_contender(l);

    return c && multi_still_waits(c) ? NULL : c;
}

/* Starts an acquisition, told to done, or (done NULL) to the blocked
 * caller's record me: then *waits is the contender to wait on once the
 * driver ran. The caller runs the driver. */
static int acquire_locked(zklock_t *l, int timeout_ms, struct zkl_done *done,
                          struct zkl_waiter *me, zkl_contender_t **waits)
{
    zklock_session_t *s = l->s;
    zkl_contender_t *c;
    int rc;

    *waits = NULL;
    zklock__lapses_caught(s); /* no reentrant hold on a lease that ran out */
    c = zklock__owner_contender(l);
    if (c && c->phase == ZKL_HELD && !multi_still_waits(c)) {
        c->holds++; /* reentrant: no round trip */
        zklock__stats_reentered(l);
        return answer(done, ZKLOCK_OK);
    }
    if (c && zklock__acquiring(c))
        return ZKLOCK_EBUSY; /* a handle-owned lock: one acquisition at a time */
    if (c)
        zklock__abandon(c); /* a lost hold nobody released: start afresh */
    if (!zklock__connected(s) && timeout_ms == 0) {
        rc = s->adopted && s->state == ZKL_S_EXPIRED ? ZSESSIONEXPIRED : ZCONNECTIONLOSS;
        zklock__stats_told(l, rc);
        return answer(done, rc);
    }
    c = zklock__contender_new(l);
    if (!c)
        return ZKLOCK_ENOMEM;
    if (!zklock__track_new(c)) {
        zklock__leave(c, ZKLOCK_ENOMEM); /* never started: nothing to delete */
        zklock__abandon(c);
        return ZKLOCK_ENOMEM;
    }
    if (l->recipe->prepare && (rc = l->recipe->prepare(l, c)) != 0) {
        /* The caller's own state refuses it (an upgrade, another
         * acquisition in progress, a held member): nothing started, and
         * an asynchronous call returns it as the blocking one does. */
        zklock__leave(c, rc); /* never started: nothing to delete */
        zklock__abandon(c);
        return rc;
    }
    zklock__stats_called(c);
    zklock__acquire_start(c, timeout_ms, done, done ? NULL : me);
    if (!done)
        *waits = c;
    return ZKLOCK_OK;
}

int zklock_acquire(zklock_t *l, int timeout_ms)
{
    struct zkl_waiter me;
    zkl_contender_t *c = NULL;
    int rc;

    if (!l || timeout_ms < -1)
        return ZKLOCK_EINVAL;
    if (!zklock__waiter_init(&me))
        return ZKLOCK_ESYSTEM;
    pthread_mutex_lock(&l->s->mu);
    rc = acquire_refused(l, timeout_ms, false);
    if (rc == 0)
        rc = acquire_locked(l, timeout_ms, NULL, &me, &c);
    zklock__drive(l->s); /* the call's one drive */
    if (c)
        rc = wait_for(l, c, &me);
    pthread_mutex_unlock(&l->s->mu);
    zklock__waiter_fini(&me);
    return rc;
}

int zklock_acquire_async(zklock_t *l, int timeout_ms, zklock_done_fn fn, void *ctx)
{
    struct zkl_done *done;
    zkl_contender_t *c;
    int rc;

    if (!l || !fn || timeout_ms < -1)
        return ZKLOCK_EINVAL;
    if (!handle_owned(l))
        return ZKLOCK_EOWNER; /* the likeliest first mistake: say what to set */
    pthread_mutex_lock(&l->s->mu);
    rc = acquire_refused(l, timeout_ms, true);
    if (rc == 0) {
        done = zklock__done_new(l, fn, ctx);
        rc = done ? acquire_locked(l, timeout_ms, done, NULL, &c) : ZKLOCK_ENOMEM;
        if (rc != ZKLOCK_OK)
            zklock__done_discard(done);
    }
    zklock__drive(l->s);
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

/* ---- release -------------------------------------------------------------------- */

/* Starts the release, told to done, or to the blocked caller's record me
 * (then *waits is the contender to wait on once the driver ran), or to
 * nobody (both NULL: in the background). The hold is over for its owner
 * as the release starts: the contender is let go at once. The caller runs
 * the driver. */
static int release_locked(zklock_t *l, struct zkl_done *done, struct zkl_waiter *me,
                          zkl_contender_t **waits)
{
    zkl_contender_t *c;

    *waits = NULL;
    zklock__lapses_caught(l->s); /* a hold whose lease ran out was lost */
    c = zklock__owner_contender(l);
    if (closed(l)) {
        if (c)
            zklock__abandon(c);
        return ZKLOCK_ECLOSED;
    }
    if (!c || multi_still_waits(c))
        return ZKLOCK_ENOTHELD;
    if (c->phase == ZKL_LOST) {
        zklock__stats_hold_over(c, false); /* a loss nobody reported */
        zklock__abandon(c);
        return answer(done, ZKLOCK_ELOST);
    }
    if (c->phase == ZKL_GRANTING && c->waiting && !zklock__track_granted(c)) {
        /* Its turn, not yet its owner's hold (the record, the lock-delay):
         * given up, the record left as it was (the acquisition: canceled). */
        c->canceled = true;
        zklock__mark(c);
        return answer(done, ZKLOCK_OK);
    }
    if (c->phase != ZKL_HELD)
        return ZKLOCK_ENOTHELD;
    if (c->holds > 1) {
        c->holds--;
        return answer(done, ZKLOCK_OK);
    }
    if (c->parent)
        return ZKLOCK_EBUSY; /* held through a multi-lock: released with it */
    if (me && zklock__on_completion_thread(l->s))
        return ZKLOCK_EDEADLK; /* the delete's answer would come on this thread */
    c->holds = 0;
    c->attached = false;
    zklock__stats_hold_over(c, false); /* over for its owner now */
    zklock__release_start(c, done, me);
    *waits = me ? c : NULL;
    return ZKLOCK_OK;
}

int zklock_release(zklock_t *l)
{
    struct zkl_waiter me;
    zkl_contender_t *c;
    int rc;

    if (!l)
        return ZKLOCK_EINVAL;
    if (!zklock__waiter_init(&me))
        return ZKLOCK_ESYSTEM;
    pthread_mutex_lock(&l->s->mu);
    /* A handle-owned hold released where nothing may wait: in the
     * background, as zklock_release_async() without a callback. */
    rc = release_locked(l, NULL, !handle_owned(l) || may_wait(l->s) ? &me : NULL, &c);
    zklock__drive(l->s); /* the call's one drive */
    if (c)
        rc = wait_for(l, c, &me);
    pthread_mutex_unlock(&l->s->mu);
    zklock__waiter_fini(&me);
    return rc;
}

int zklock_release_async(zklock_t *l, zklock_done_fn fn, void *ctx)
{
    struct zkl_done *done = NULL;
    zkl_contender_t *c;
    int rc;

    if (!l)
        return ZKLOCK_EINVAL;
    if (!handle_owned(l))
        return ZKLOCK_EOWNER;
    pthread_mutex_lock(&l->s->mu);
    if (fn && !(done = zklock__done_new(l, fn, ctx)))
        rc = ZKLOCK_ENOMEM;
    else
        rc = release_locked(l, done, NULL, &c);
    if (rc != ZKLOCK_OK)
        zklock__done_discard(done);
    zklock__drive(l->s);
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

/* ---- queries ---------------------------------------------------------------------- */

int zklock_hold_count(const zklock_t *l)
{
    const zkl_contender_t *c;
    int n;

    if (!l)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    zklock__lapses_caught(l->s);
    c = queried_contender(l);
    n = c && c->phase == ZKL_HELD ? c->holds : 0;
    pthread_mutex_unlock(&l->s->mu);
    return n;
}

int zklock_fence(const zklock_t *l, int64_t *token)
{
    const zkl_contender_t *c;
    int rc = ZKLOCK_ENOTHELD;

    if (!l || !token)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    zklock__lapses_caught(l->s);
    c = queried_contender(l);
    if (c && c->phase == ZKL_HELD) {
        *token = c->czxid;
        rc = ZKLOCK_OK;
    } else if (c && c->phase == ZKL_LOST) {
        rc = ZKLOCK_ELOST;
    }
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

int zklock_valid_until(const zklock_t *l, struct timespec *deadline)
{
    const zkl_contender_t *c;
    int rc = ZKLOCK_ENOTHELD;

    if (!l || !deadline)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    zklock__lapses_caught(l->s);
    c = queried_contender(l);
    if (c && c->phase == ZKL_HELD && zklock__belief_until(l->s, deadline)) {
        zklock__track_until(c, deadline); /* its record's lease may end first */
        rc = ZKLOCK_OK;
    }
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

int zklock_check_op(zklock_t *l, zoo_op_t *op)
{
    zkl_contender_t *c;
    int rc = ZKLOCK_ENOTHELD;

    if (!l || !op)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    zklock__lapses_caught(l->s);
    c = l->recipe->nodeless ? NULL : zklock__owner_contender(l);
    if (c && multi_still_waits(c))
        c = NULL;
    if (l->recipe->nodeless)
        rc = ZKLOCK_EINVAL; /* a multi-lock: check its members */
    if (c && c->phase == ZKL_HELD && c->node) {
        /* A copy the hold owns: c->node goes as soon as the hold is lost,
         * maybe while the caller is still sending its multi. */
        if (!c->check_path)
            c->check_path = strdup(c->node);
        rc = c->check_path ? ZKLOCK_OK : ZKLOCK_ENOMEM;
        if (rc == ZKLOCK_OK)
            zoo_check_op_init(op, c->check_path, -1);
    }
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

const char *zklock_path(const zklock_t *l)
{
    return l ? l->path : NULL;
}

/* Marks l's acquisitions in progress canceled (the caller runs the driver). */
static void cancel_locked(zklock_t *l)
{
    for (zkl_contender_t *c = l->contenders; c; c = c->lock_next) {
        if (c->waiting) {
            c->canceled = true;
            zklock__mark(c); /* its step gives up */
        }
    }
}

int zklock_cancel(zklock_t *l)
{
    if (!l)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    cancel_locked(l);
    zklock__drive(l->s);
    pthread_mutex_unlock(&l->s->mu);
    return ZKLOCK_OK;
}

/* ---- free ------------------------------------------------------------------------- */

static bool any_leaving(const zklock_t *l)
{
    for (const zkl_contender_t *c = l->contenders; c; c = c->lock_next)
        if (c->phase == ZKL_LEAVING)
            return true;
    return false;
}

static bool any_call_owed(const zklock_t *l)
{
    for (const zkl_contender_t *c = l->contenders; c; c = c->lock_next)
        if (c->done)
            return true;
    return false;
}

/* Calls still undecided when the handle goes end for their callers now:
 * ZKLOCK_ECANCELED (a release's delete goes on in the background). */
static void cancel_calls_owed(zklock_t *l)
{
    for (zkl_contender_t *c = l->contenders; c; c = c->lock_next) {
        if (c->done) {
            zklock__done_queue(c->done, ZKLOCK_ECANCELED);
            c->done = NULL;
            c->waiting = c->releasing = false;
            c->attached = false;
        }
    }
}

/* The callbacks still queued for l: its done callbacks, to run before the
 * handle goes (returned); its on_lost ones, dropped. */
static struct zkl_callback *take_callbacks(zklock_t *l)
{
    struct zkl_callback *cb = zklock__dispatch_take(l->s, l), *next, *keep = NULL, **tail = &keep;

    for (; cb; cb = next) {
        next = cb->next;
        cb->next = NULL;
        if (zklock__is_done_callback(cb)) {
            *tail = cb;
            tail = &cb->next;
        } else {
            cb->ops->end(cb);
        }
    }
    return keep;
}

/* With s->mu held: cancels the waiters and waits for every caller and
 * callback to leave, deletes the nodes still held, ends every call still
 * owed, drops the user's reference and returns the done callbacks that the
 * caller must run before it returns. Where nothing may wait (a callback,
 * ZooKeeper's completion thread), the deletes go on in the background and
 * blocked callers on their way out drop their own contender and reference. */
static struct zkl_callback *lock_retire(zklock_t *l)
{
    zklock_session_t *s = l->s;
    bool wait = may_wait(s);
    zkl_contender_t *c, *next;
    struct zkl_callback *owed;

    l->freeing = true;
    cancel_locked(l);
    if (l->recipe->retiring)
        l->recipe->retiring(l); /* its own calls (an election's proclaims) */
    zklock__drive(s);
    while (wait && (l->users > 0 || l->in_callback > 0))
        zklock__cond_wait(s, &s->cond);
    for (c = l->contenders; c; c = next) {
        next = c->lock_next;
        if (c->phase == ZKL_HELD && c->attached && !c->parent) {
            c->holds = 0;
            zklock__leave(c, ZKLOCK_OK); /* in the background if disconnected */
        }
    }
    zklock__drive(s);
    while (wait && (any_leaving(l) || any_call_owed(l)) && zklock__connected(s))
        zklock__cond_wait(s, &s->cond);
    cancel_calls_owed(l);
    owed = take_callbacks(l);
    for (c = l->contenders; c; c = next) {
        next = c->lock_next;
        if (!c->parent) /* a multi-lock's member is its multi-lock's to let go */
            zklock__abandon(c); /* one a blocked caller is in is freed when it leaves */
    }
    zklock__drive(s);
    zklock__lock_unref(l);
    return owed;
}

void zklock__locks_free(zklock_t *const locks[], size_t n)
{
    zklock_session_t *s = locks[0]->s;
    bool free_session;

    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++) /* (retiring the last may free what held them) */
        zklock__dispatch_run(s, lock_retire(locks[i]));
    free_session = zklock__session_claim_free(s);
    pthread_mutex_unlock(&s->mu);
    if (free_session)
        zklock__session_free(s);
}

void zklock_free(zklock_t *l)
{
    if (!l || l->borrowed)
        return;
    zklock__locks_free(&l, 1);
}
