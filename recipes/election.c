/*
 * election.c: leader election. The engine's mutex is already an election:
 * the participants queue, the first one leads, each watches the one just
 * ahead, and when the leader resigns or its session ends, the next one leads
 * without anybody else waking. On the wire it is Curator's LeaderLatch
 * (_c_<uuid>-latch-<seq>), or kazoo's Election (a kazoo Lock) with
 * ZKLOCK_WIRE_KAZOO. What is particular to an election: the leader may
 * publish a value in its node (zklock_proclaim, zklock_proclaim_async),
 * which observers read with zklock_leader() and follow with
 * zklock_leader_follow() (lib/follow.c).
 *
 * A proclaim is one set of the leader's node's data. Like the lock calls
 * (owner.c), the blocking form is the asynchronous one that waits: one
 * record per call, decided once, by its answer, by the end of the session
 * (the leadership ends with it) or by zklock_free(); whoever waits hears of
 * the decision, a done callback or a blocked caller.
 */
#include "../lib/recipe.h"

#include <stdlib.h>

static const struct zkl_recipe election_recipe;

int zklock_election_new(zklock_t **out, zklock_session_t *s, const char *path,
                        const zklock_opts_t *opts)
{
    return zklock__exclusive_new(out, s, path, opts, ZKL_TAG_LATCH, &election_recipe);
}

/* ---- a proclaim in flight -------------------------------------------------------------- */

/* In s->proclaims from its start until it is both decided and answered (or
 * its handle is closed: no answer comes then). */
struct zkl_proclaim {
    zklock_session_t *s;
    zklock_t *l;
    struct zkl_done *done;     /* asynchronous: told there */
    struct zkl_waiter *waiter; /* blocking: told there (s->cond) */
    bool decided, answered;
    struct zkl_proclaim *next;
};

static void forget(struct zkl_proclaim *p)
{
    struct zkl_proclaim **at = &p->s->proclaims;

    while (*at && *at != p)
        at = &(*at)->next;
    if (*at)
        *at = p->next;
    free(p);
}

/* Frees p once nothing more can happen to it. */
static void settle(struct zkl_proclaim *p)
{
    if (p->decided && p->answered)
        forget(p);
}

static void decide(struct zkl_proclaim *p, int rc)
{
    if (p->decided)
        return;
    p->decided = true;
    if (p->done) {
        zklock__done_queue(p->done, rc);
        p->done = NULL;
    } else {
        p->waiter->decided = true;
        p->waiter->rc = rc;
        p->waiter = NULL;
        pthread_cond_broadcast(&p->s->cond);
    }
}

static void proclaimed(int rc, const struct Stat *st, const void *data)
{
    struct zkl_proclaim *p = (struct zkl_proclaim *)data;
    zklock_session_t *s = p->s;

    (void)st;
    pthread_mutex_lock(&s->mu);
    if (--s->ops == 0)
        pthread_cond_broadcast(&s->cond); /* an adopted session's close waits for it */
    p->answered = true;
    /* Decided already if the session ended meanwhile: then the leadership
     * ended too, whatever this answer says. */
    decide(p, rc == ZNONODE ? ZKLOCK_ELOST : rc);
    settle(p);
    pthread_mutex_unlock(&s->mu);
}

/* An outcome known at once: returned to a blocked caller, queued for done. */
static int tell(struct zkl_done *done, int rc)
{
    if (!done)
        return rc;
    zklock__done_queue(done, rc);
    return ZKLOCK_OK;
}

/* With s->mu held: starts setting the data of the node c leads by. *started
 * says whether the outcome is still to come (to done or to waiter). */
static int send_value(zkl_contender_t *c, const void *value, size_t len, struct zkl_done *done,
                      struct zkl_waiter *waiter, bool *started)
{
    zklock_session_t *s = c->l->s;
    struct zkl_proclaim *p = calloc(1, sizeof *p);
    int rc;

    if (!p)
        return ZKLOCK_ENOMEM;
    p->s = s;
    p->l = c->l;
    rc = s->wire->aset(s->zh, c->node, value, (int)len, -1, proclaimed, p);
    if (rc != ZOK) {
        free(p);
        return tell(done, rc);
    }
    s->ops++;
    s->stats.requests++;
    p->done = done;
    p->waiter = waiter;
    p->next = s->proclaims;
    s->proclaims = p;
    *started = true;
    return ZKLOCK_OK;
}

/* With s->mu held: what both forms share. Returns what the call returns
 * (done, if not NULL, then owns the outcome); *started: a blocking caller
 * must wait for waiter. */
static int proclaim_locked(zklock_t *l, const void *value, size_t len, struct zkl_done *done,
                           struct zkl_waiter *waiter, bool *started)
{
    zklock_session_t *s = l->s;
    zkl_contender_t *c;

    *started = false;
    if (s->closing || s->state == ZKL_S_CLOSED || l->freeing)
        return ZKLOCK_ECLOSED;
    zklock__lease_checked(s); /* no proclaiming on a lease that ran out */
    c = zklock__owner_contender(l);
    if (c && c->phase == ZKL_LOST)
        return tell(done, ZKLOCK_ELOST);
    if (!c || c->phase != ZKL_HELD || !c->node)
        return ZKLOCK_ENOTHELD;
    if (!done && zklock__on_completion_thread(s))
        return ZKLOCK_EDEADLK; /* the answer would come on this very thread */
    if (!zklock__connected(s))
        return tell(done, ZCONNECTIONLOSS);
    return send_value(c, value, len, done, waiter, started);
}

static bool bad_value(const zklock_t *l, const void *value, size_t len)
{
    return !l || l->recipe != &election_recipe || (!value && len > 0) || len > ZKLOCK_DATA_MAX;
}

int zklock_proclaim_async(zklock_t *l, const void *value, size_t len, zklock_done_fn fn,
                          void *ctx)
{
    struct zkl_done *done;
    bool started;
    int rc;

    if (bad_value(l, value, len) || !fn)
        return ZKLOCK_EINVAL;
    if (l->opts.owner != ZKLOCK_OWNER_HANDLE)
        return ZKLOCK_EOWNER;
    pthread_mutex_lock(&l->s->mu);
    done = zklock__done_new(l, fn, ctx);
    rc = done ? proclaim_locked(l, value, len, done, NULL, &started) : ZKLOCK_ENOMEM;
    if (rc != ZKLOCK_OK)
        zklock__done_discard(done); /* not started: done is not called */
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

int zklock_proclaim(zklock_t *l, const void *value, size_t len)
{
    struct zkl_waiter me = {false, 0};
    bool started;
    int rc;

    if (bad_value(l, value, len))
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    rc = proclaim_locked(l, value, len, NULL, &me, &started);
    while (started && !me.decided)
        zklock__cond_wait(l->s, &l->s->cond);
    if (started)
        rc = me.rc;
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

/* ---- what ends a proclaim before its answer ----------------------------------------------- */

/* zklock_free(l): its proclaims in flight end for their callers now. */
static void election_retiring(zklock_t *l)
{
    for (struct zkl_proclaim *p = l->s->proclaims; p; p = p->next)
        if (p->l == l)
            decide(p, ZKLOCK_ECANCELED);
}

/* The ZooKeeper session ended, and every leadership with it. */
static void proclaims_ended(zklock_session_t *s, int reason)
{
    for (struct zkl_proclaim *p = s->proclaims; p; p = p->next)
        decide(p, reason == ZKLOCK_ECLOSED ? ZKLOCK_ECLOSED : ZKLOCK_ELOST);
}

/* The handle is closed: no answer will come. */
static void proclaims_handle_closed(zklock_session_t *s)
{
    while (s->proclaims) {
        struct zkl_proclaim *p = s->proclaims;
        decide(p, ZKLOCK_ELOST); /* (decided already: the session ended first) */
        p->answered = true;
        settle(p);
    }
}

const struct zkl_layer zklock__election_layer = {
    .ended = proclaims_ended,
    .handle_closed = proclaims_handle_closed,
};

static const struct zkl_recipe election_recipe = {
    .retiring = election_retiring,
};
