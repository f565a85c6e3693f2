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

void zklock__lease_checked(zklock_session_t *s)
{
    zklock__lease_check(s);
    zklock__drive(s);
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

/* Waits for the blocking call `me` was started with. */
static int wait_for(zkl_contender_t *c, struct zkl_waiter *me)
{
    zklock_t *l = c->l;
    int rc;

    enter(l);
    rc = zklock__call_wait(c, me);
    leave(l);
    return rc;
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

/* A tracking mutex's hold was granted: its record (previous.c), and the
 * lock-delay; a hold that cannot record is released, and the call fails. */
static int previous_granted(zklock_t *l, const struct timespec *until)
{
    int rc = zklock__previous_granted(l, until);

    if (rc != ZKLOCK_OK)
        zklock_release(l); /* ELOST if it was lost: on_lost says so */
    return rc;
}

/* A tracking hold whose last release is writing "released" (previous.c)
 * is ending: a re-entry now would go on under that record, and an unclean
 * end later would read clean. A hold being granted (another thread of a
 * handle-owned lock reads the record, or waits the lock-delay) is not the
 * caller's yet: a re-entry would skip the delay, or judge the record
 * again and read its own write. Either waits, within its own timeout (a
 * try-once: ZKLOCK_EBUSY), and then acquires (re-enters or afresh). */
static int await_record(zklock_t *l, int timeout_ms, const struct timespec *until)
{
    const zkl_contender_t *c;

    while ((c = zklock__owner_contender(l)) && (c->prev_releasing || c->prev_granting)) {
        if (timeout_ms == 0)
            return ZKLOCK_EBUSY;
        if (timeout_ms < 0)
            zklock__cond_wait(l->s, &l->s->cond);
        else if (zklock__cond_wait_until(l->s, &l->s->cond, until, 0) == ETIMEDOUT)
            return ZKLOCK_ETIMEDOUT;
    }
    return 0;
}

/* The caller's hold is being granted (its record, its lock-delay), or no
 * longer: re-entries wait meanwhile (await_record). With s->mu. */
static void granting(zklock_t *l, bool on)
{
    zkl_contender_t *c = zklock__owner_contender(l);

    if (c)
        c->prev_granting = on;
    if (!on)
        pthread_cond_broadcast(&l->s->cond); /* a failed grant let it go: wake them too */
}

/* done: NULL for a blocking call. */
static int acquire_locked(zklock_t *l, int timeout_ms, struct zkl_done *done)
{
    zklock_session_t *s = l->s;
    zkl_contender_t *c;
    struct zkl_waiter me = {false, 0};
    int rc;

    zklock__lease_checked(s); /* no reentrant hold on a lease that ran out */
    c = zklock__owner_contender(l);
    if (c && c->phase == ZKL_HELD) {
        c->holds++; /* reentrant: no round trip */
        zklock__stats_reentered(l);
        return answer(done, ZKLOCK_OK);
    }
    if (c && c->waiting)
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
    if (l->recipe->prepare && (rc = l->recipe->prepare(l, c)) != 0) {
        /* The caller's own state refuses it (an upgrade, another
         * acquisition in progress, a held member): nothing started, and
         * an asynchronous call returns it as the blocking one does. */
        zklock__leave(c, rc); /* never started: nothing to delete */
        zklock__abandon(c);
        return rc;
    }
    zklock__stats_called(c);
    if (done) {
        zklock__acquire_start(c, timeout_ms, done, NULL);
        return ZKLOCK_OK;
    }
    zklock__acquire_start(c, timeout_ms, NULL, &me);
    zklock__drive(s);
    rc = wait_for(c, &me);
    if (rc != ZKLOCK_OK)
        c->attached = false; /* a failed acquisition is over for its owner */
    zklock__mark(c);
    return rc;
}

int zklock_acquire(zklock_t *l, int timeout_ms)
{
    struct timespec until;
    int rc;

    if (!l || timeout_ms < -1)
        return ZKLOCK_EINVAL;
    if (l->tracks)
        zklock__deadline(l->s, &until, timeout_ms);
    pthread_mutex_lock(&l->s->mu);
    rc = acquire_refused(l, timeout_ms, false);
    if (rc == 0 && l->tracks)
        rc = await_record(l, timeout_ms, &until);
    if (rc == 0)
        rc = acquire_locked(l, timeout_ms, NULL);
    zklock__drive(l->s);
    if (rc == ZKLOCK_OK && l->tracks) {
        enter(l); /* the record's calls: zklock_free() waits for them */
        granting(l, true);
    }
    pthread_mutex_unlock(&l->s->mu);
    if (rc == ZKLOCK_OK && l->tracks) {
        zklock_session_t *s = l->s;

        rc = previous_granted(l, timeout_ms < 0 ? NULL : &until);
        pthread_mutex_lock(&s->mu);
        granting(l, false);
        leave(l);
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

int zklock_acquire_async(zklock_t *l, int timeout_ms, zklock_done_fn fn, void *ctx)
{
    struct zkl_done *done;
    int rc;

    if (!l || !fn || timeout_ms < -1 || l->tracks)
        return ZKLOCK_EINVAL; /* a record is written by the blocking call only */
    if (!handle_owned(l))
        return ZKLOCK_EOWNER; /* the likeliest first mistake: say what to set */
    pthread_mutex_lock(&l->s->mu);
    rc = acquire_refused(l, timeout_ms, true);
    if (rc == 0) {
        done = zklock__done_new(l, fn, ctx);
        rc = done ? acquire_locked(l, timeout_ms, done) : ZKLOCK_ENOMEM;
        if (rc != ZKLOCK_OK)
            zklock__done_discard(done);
    }
    zklock__drive(l->s);
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

/* ---- release -------------------------------------------------------------------- */

/* done: NULL for a blocking call (or one that does not wait: background).
 * The hold is over for its owner as the release starts: the contender is
 * let go at once, and a blocked caller keeps it alive until it returns. */
static int release_locked(zklock_t *l, struct zkl_done *done, bool wait)
{
    zkl_contender_t *c;
    struct zkl_waiter me = {false, 0};
    int rc;

    zklock__lease_checked(l->s); /* a hold whose lease ran out was lost */
    c = zklock__owner_contender(l);
    if (closed(l)) {
        if (c)
            zklock__abandon(c);
        return ZKLOCK_ECLOSED;
    }
    if (!c)
        return ZKLOCK_ENOTHELD;
    if (c->phase == ZKL_LOST) {
        zklock__stats_hold_over(c, false); /* a loss nobody reported */
        zklock__abandon(c);
        return answer(done, ZKLOCK_ELOST);
    }
    if (c->phase != ZKL_HELD)
        return ZKLOCK_ENOTHELD;
    if (c->holds > 1) {
        c->holds--;
        return answer(done, ZKLOCK_OK);
    }
    if (c->parent)
        return ZKLOCK_EBUSY; /* held through a multi-lock: released with it */
    if (wait && zklock__on_completion_thread(l->s))
        return ZKLOCK_EDEADLK; /* the delete's answer would come on this thread */
    c->holds = 0;
    c->attached = false;
    zklock__stats_hold_over(c, false); /* over for its owner now */
    zklock__release_start(c, done, wait ? &me : NULL);
    zklock__mark(c);
    if (!wait)
        return ZKLOCK_OK;
    zklock__drive(l->s);
    rc = wait_for(c, &me);
    zklock__mark(c);
    return rc;
}

/* Does the caller hold l once, so that its release ends the hold? And
 * may it wait for ZooKeeper here (not on its completion thread)? */
static bool last_hold(zklock_t *l)
{
    zkl_contender_t *c;
    bool last;

    pthread_mutex_lock(&l->s->mu);
    c = zklock__owner_contender(l);
    last = c && c->phase == ZKL_HELD && c->holds == 1 && !c->parent &&
           !zklock__on_completion_thread(l->s);
    if (last)
        c->prev_releasing = true; /* no re-entry until it is released */
    pthread_mutex_unlock(&l->s->mu);
    return last;
}

/* The record is written (or given up): re-entries may go on, afresh. */
static void release_recorded(zklock_t *l)
{
    zkl_contender_t *c = zklock__owner_contender(l);

    if (c && c->prev_releasing) {
        c->prev_releasing = false;
        pthread_cond_broadcast(&l->s->cond);
    }
}

int zklock_release(zklock_t *l)
{
    int rc;

    if (!l)
        return ZKLOCK_EINVAL;
    if (l->tracks && last_hold(l))
        zklock__previous_releasing(l); /* "released", while we still hold */
    pthread_mutex_lock(&l->s->mu);
    release_recorded(l);
    /* A handle-owned hold released where nothing may wait: in the
     * background, as zklock_release_async() without a callback. */
    rc = release_locked(l, NULL, !handle_owned(l) || may_wait(l->s));
    zklock__drive(l->s);
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

int zklock_release_async(zklock_t *l, zklock_done_fn fn, void *ctx)
{
    struct zkl_done *done = NULL;
    int rc;

    if (!l || l->tracks)
        return ZKLOCK_EINVAL; /* a record is written by the blocking call only */
    if (!handle_owned(l))
        return ZKLOCK_EOWNER;
    pthread_mutex_lock(&l->s->mu);
    if (fn && !(done = zklock__done_new(l, fn, ctx)))
        rc = ZKLOCK_ENOMEM;
    else
        rc = release_locked(l, done, false);
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
    zklock__lease_checked(l->s);
    c = zklock__owner_contender(l);
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
    zklock__lease_checked(l->s);
    c = zklock__owner_contender(l);
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
    zklock__lease_checked(l->s);
    c = zklock__owner_contender(l);
    if (c && c->phase == ZKL_HELD && zklock__belief_until(l->s, deadline))
        rc = ZKLOCK_OK;
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
    zklock__lease_checked(l->s);
    c = l->recipe->nodeless ? NULL : zklock__owner_contender(l);
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

static void cancel_locked(zklock_t *l)
{
    zkl_contender_t *c, *next;

    for (c = l->contenders; c; c = next) {
        next = c->lock_next;
        if (c->waiting) {
            c->canceled = true;
            zklock__mark(c); /* its step gives up */
        }
    }
    zklock__drive(l->s);
}

int zklock_cancel(zklock_t *l)
{
    if (!l)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    cancel_locked(l);
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
struct zkl_callback *zklock__lock_retire(zklock_t *l)
{
    zklock_session_t *s = l->s;
    bool wait = may_wait(s);
    zkl_contender_t *c, *next;
    struct zkl_callback *owed;

    l->freeing = true;
    cancel_locked(l);
    if (l->recipe->retiring)
        l->recipe->retiring(l); /* its own calls (an election's proclaims) */
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

void zklock_free(zklock_t *l)
{
    zklock_session_t *s;
    bool free_session;

    if (!l || l->borrowed)
        return;
    s = l->s;
    pthread_mutex_lock(&s->mu);
    zklock__dispatch_run(s, zklock__lock_retire(l));
    free_session = zklock__session_claim_free(s);
    pthread_mutex_unlock(&s->mu);
    if (free_session)
        zklock__session_free(s);
}
