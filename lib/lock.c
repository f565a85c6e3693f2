/*
 * lock.c: the calls every recipe shares (zklock_acquire, zklock_release, ...).
 *
 * These are the thin blocking layer on top of the engine: they start or end
 * a contender and wait on its condition variable; the engine and ZooKeeper's
 * completion thread do the rest.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static bool closed(const zklock_t *l)
{
    return l->s->closing || l->s->state == ZKL_S_CLOSED || l->freeing;
}

/* Counts a caller inside a blocking call, so that zklock_free() and
 * zklock_session_close() can wait for it to leave; it keeps a reference,
 * so that a zklock_free() that cannot wait (on ZooKeeper's completion
 * thread) leaves the handle to it. */
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

/* ---- acquire ------------------------------------------------------------------ */

/* Waits until the engine decides; a deadline, a cancel or a dropped
 * connection during a try-once makes us give up. On failure, waits for the
 * node to be deleted while the connection lasts (one round trip); if it is
 * down, the engine finishes the cleanup in the background. */
static int await_verdict(zkl_contender_t *c, int timeout_ms, const struct timespec *deadline)
{
    zklock_session_t *s = c->l->s;
    int rc;

    while (c->phase == ZKL_QUEUING) {
        if (c->canceled)
            zklock__give_up(c, ZKLOCK_ECANCELED);
        else if (c->try_once && !zklock__connected(s))
            zklock__give_up(c, ZCONNECTIONLOSS);
        else if (timeout_ms > 0 && zklock__passed(deadline))
            zklock__give_up(c, ZKLOCK_ETIMEDOUT);
        else if (timeout_ms > 0)
            pthread_cond_timedwait(&c->cond, &s->mu, deadline);
        else
            pthread_cond_wait(&c->cond, &s->mu); /* forever, or try-once */
    }
    c->waiting = false;
    if (c->phase == ZKL_HELD) {
        c->holds = 1;
        c->owner_inside = false;
        return ZKLOCK_OK;
    }
    while (c->phase == ZKL_LEAVING && zklock__connected(s))
        pthread_cond_wait(&c->cond, &s->mu);
    rc = c->result;
    c->owner_inside = false;
    zklock__detach(c);
    return rc;
}

static int acquire_locked(zklock_t *l, int timeout_ms)
{
    zklock_session_t *s = l->s;
    zkl_contender_t *c = zklock__thread_contender(l);
    struct timespec deadline;
    int rc;

    if (c && c->phase == ZKL_HELD) {
        c->holds++; /* reentrant: no round trip */
        return ZKLOCK_OK;
    }
    if (c)
        zklock__detach(c); /* a lost hold nobody released: start afresh */
    if (!zklock__connected(s) && timeout_ms == 0)
        return s->adopted && s->state == ZKL_S_EXPIRED ? ZSESSIONEXPIRED : ZCONNECTIONLOSS;
    c = zklock__contender_new(l);
    if (!c)
        return ZKLOCK_ENOMEM;
    c->owner_inside = true;
    if (l->prepare && (rc = l->prepare(l, c)) != 0) {
        c->phase = ZKL_GONE;
        zklock__detach(c);
        return rc;
    }
    zklock__deadline(&deadline, timeout_ms > 0 ? timeout_ms : 0);
    c->try_once = timeout_ms == 0;
    c->waiting = true;
    enter(l);
    zklock__step(c);
    rc = await_verdict(c, timeout_ms < 0 ? -1 : timeout_ms, &deadline);
    leave(l);
    return rc;
}

int zklock_acquire(zklock_t *l, int timeout_ms)
{
    int rc;

    if (!l || timeout_ms < -1)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    if (closed(l))
        rc = ZKLOCK_ECLOSED;
    else if ((rc = zklock__session_refusal(l->s)) != 0)
        ; /* our credentials were rejected: no session to queue on */
    else if (zklock__on_completion_thread(l->s))
        rc = ZKLOCK_EDEADLK; /* the answers would come on this very thread */
    else
        rc = acquire_locked(l, timeout_ms);
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

/* ---- release -------------------------------------------------------------------- */

/* Deletes the node and waits for the server's word (or the session's end):
 * local state goes only after that. */
static int release_node(zkl_contender_t *c)
{
    zklock_t *l_of_release = c->l;
    zklock_session_t *s = c->l->s;
    int rc;

    enter(c->l);
    c->owner_inside = true;
    zklock__give_up(c, ZKLOCK_OK);
    while (c->phase == ZKL_LEAVING)
        pthread_cond_wait(&c->cond, &s->mu);
    rc = c->result;
    c->owner_inside = false;
    zklock__detach(c);
    leave(l_of_release);
    return rc;
}

static int release_locked(zklock_t *l)
{
    zkl_contender_t *c = zklock__thread_contender(l);

    if (closed(l)) {
        if (c)
            zklock__detach(c);
        return ZKLOCK_ECLOSED;
    }
    if (!c)
        return ZKLOCK_ENOTHELD;
    if (c->phase == ZKL_LOST) {
        zklock__detach(c);
        return ZKLOCK_ELOST;
    }
    if (c->phase != ZKL_HELD)
        return ZKLOCK_ENOTHELD;
    if (c->holds == 1 && zklock__on_completion_thread(l->s))
        return ZKLOCK_EDEADLK; /* the delete's answer would come on this thread */
    if (--c->holds > 0)
        return ZKLOCK_OK;
    return release_node(c);
}

int zklock_release(zklock_t *l)
{
    int rc;

    if (!l)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    rc = release_locked(l);
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
    c = zklock__thread_contender(l);
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
    c = zklock__thread_contender(l);
    if (c && c->phase == ZKL_HELD) {
        *token = c->czxid;
        rc = ZKLOCK_OK;
    } else if (c && c->phase == ZKL_LOST) {
        rc = ZKLOCK_ELOST;
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
    for (zkl_contender_t *c = l->contenders; c; c = c->lock_next) {
        if (c->waiting) {
            c->canceled = true;
            pthread_cond_broadcast(&c->cond);
        }
    }
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

/* Drops the callbacks still queued for l (on_lost of a hold it ends). */
static void forget_callbacks(zklock_t *l)
{
    struct zkl_callback *cb = zklock__dispatch_take(l->s, l), *next;

    for (; cb; cb = next) {
        next = cb->next;
        cb->ops->end(cb);
    }
}

/* With s->mu held: cancels the waiters, waits for every caller and callback
 * to leave, deletes the nodes still held and drops the user's reference.
 * On ZooKeeper's completion thread, where nothing can be waited for, the
 * deletes go on in the background and callers on their way out (canceled
 * waiters) drop their own contender and reference. */
void zklock__lock_retire(zklock_t *l)
{
    zklock_session_t *s = l->s;
    bool may_wait = !zklock__on_completion_thread(s);
    zkl_contender_t *c, *next;

    l->freeing = true;
    cancel_locked(l);
    while (may_wait && (l->users > 0 || l->in_callback > 0))
        pthread_cond_wait(&s->cond, &s->mu);
    forget_callbacks(l);
    for (c = l->contenders; c; c = next) {
        next = c->lock_next;
        if (c->phase == ZKL_HELD && !c->owner_inside)
            zklock__give_up(c, ZKLOCK_OK); /* in the background if disconnected */
    }
    while (may_wait && any_leaving(l) && zklock__connected(s))
        pthread_cond_wait(&s->cond, &s->mu);
    for (c = l->contenders; c; c = next) {
        next = c->lock_next;
        if (!c->owner_inside)
            zklock__detach(c);
    }
    zklock__lock_unref(l);
}

void zklock_free(zklock_t *l)
{
    zklock_session_t *s;
    bool free_session;

    if (!l || l->borrowed)
        return;
    s = l->s;
    pthread_mutex_lock(&s->mu);
    zklock__lock_retire(l);
    free_session = zklock__session_claim_free(s);
    pthread_mutex_unlock(&s->mu);
    if (free_session)
        zklock__session_free(s);
}
