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
 * A proclaim is one set of the leader's node's data, a request of the
 * leader's contender (a kind of the election's own, beside the contender's
 * chain) sent by its step and answered through the engine's doors like
 * every other: the call records it on the contender and runs the driver.
 * Like the lock calls (owner.c), the blocking form is the asynchronous one
 * that waits: one record per call, decided once, by its answer, by the end
 * of the session (the leadership ends with it) or by zklock_free(); whoever
 * waits hears of the decision, a done callback or a blocked caller.
 */
#include "../lib/recipe.h"

#include <stdlib.h>
#include <string.h>

static const struct zkl_recipe election_recipe;

int zklock_election_new(zklock_t **out, zklock_session_t *s, const char *path,
                        const zklock_opts_t *opts)
{
    return zklock__exclusive_new(out, s, path, opts, ZKL_TAG_LATCH, &election_recipe);
}

/* ---- the proclaims of a leader --------------------------------------------------------- */

/* The election's own request kind: the set of the leader's node. */
enum { ELECTION_PROCLAIM = ZKL_REQ_RECIPE };

/* One call, on the leader's contender (its recipe data: a queue, in the
 * order they were sent, which is the order ZooKeeper answers them). */
struct proclaim {
    struct proclaim *next;
    struct zkl_done *done;     /* asynchronous: told there */
    struct zkl_waiter *waiter; /* blocking: told there */
    bool decided;
    bool sent;
    unsigned gen;              /* ... in this session generation */
    int len;
    char value[];              /* until it is sent */
};

struct proclaims {
    struct proclaim *head, **tail;
};

static struct proclaims *proclaims_of(const zkl_contender_t *c)
{
    return zklock__data(c);
}

static void decide(struct proclaim *p, int rc)
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
        pthread_cond_signal(&p->waiter->cond);
        p->waiter = NULL;
    }
}

/* Takes p out of the queue (pp points at it) and frees it. */
static void drop(struct proclaims *q, struct proclaim **pp)
{
    struct proclaim *p = *pp;

    *pp = p->next;
    if (q->tail == &p->next)
        q->tail = pp;
    free(p);
}

/* The leader's step: a proclaim of an ended session is decided (its answer
 * will not count: the leadership ended with the session); one not sent
 * yet goes out, or is decided with the client's refusal, or with ELOST if
 * c leads no more. */
static void election_step(zkl_contender_t *c)
{
    zklock_session_t *s = zklock__lock_of(c)->s;
    struct proclaims *q = proclaims_of(c);
    struct proclaim **pp = q ? &q->head : NULL;

    while (pp && *pp) {
        struct proclaim *p = *pp;
        int rc;
        if (p->sent && p->gen == zklock__generation(s)) {
            pp = &p->next;
            continue;
        }
        if (p->sent) {
            decide(p, zklock__closing(s) ? ZKLOCK_ECLOSED : ZKLOCK_ELOST);
            drop(q, pp);
            continue;
        }
        if (!zklock__may_send(c))
            break; /* an old handle's answers first (an adopted session's): they step c */
        rc = zklock__phase(c) == ZKL_HELD && zklock__node(c) ? ZOK : ZKLOCK_ELOST;
        if (rc == ZOK)
            rc = zklock__send_beside(c, &(struct zkl_request){.kind = ELECTION_PROCLAIM,
                                                             .call = ZKL_CALL_SET,
                                                             .path = zklock__node(c),
                                                             .data = p->value,
                                                             .len = p->len});
        if (rc != ZOK) {
            decide(p, rc);
            drop(q, pp);
            continue;
        }
        p->sent = true;
        p->gen = zklock__generation(s);
        pp = &p->next;
    }
}

/* The answer to the oldest proclaim sent (answers come in order). */
static void election_answer(zkl_contender_t *c, const struct zkl_answer *a)
{
    struct proclaims *q = proclaims_of(c);
    struct proclaim **pp = q ? &q->head : NULL;

    while (pp && *pp && !(*pp)->sent)
        pp = &(*pp)->next;
    if (a->kind != ELECTION_PROCLAIM || !pp || !*pp)
        return;
    decide(*pp, a->rc == ZNONODE ? ZKLOCK_ELOST : a->rc);
    drop(q, pp);
}

/* zklock_free(l): its proclaims in flight end for their callers now (their
 * answers still come, and find them decided). */
static void election_retiring(zklock_t *l)
{
    for (zkl_contender_t *c = zklock__first(l); c; c = zklock__next(c))
        for (struct proclaim *p = proclaims_of(c) ? proclaims_of(c)->head : NULL; p; p = p->next)
            decide(p, ZKLOCK_ECANCELED);
}

/* c is freed: nothing of it is in flight, nothing owed. */
static void election_free_data(zkl_contender_t *c)
{
    struct proclaims *q = proclaims_of(c);

    while (q && q->head)
        drop(q, &q->head);
    free(q);
    zklock__set_data(c, NULL);
}

/* ---- the calls ------------------------------------------------------------------------------- */

/* An outcome known at once: returned to a blocked caller, queued for done. */
static int tell(struct zkl_done *done, int rc)
{
    if (!done)
        return rc;
    zklock__done_queue(done, rc);
    return ZKLOCK_OK;
}

/* Records a proclaim of value on c, to be sent by its step. */
static int record(zkl_contender_t *c, const void *value, size_t len, struct zkl_done *done,
                  struct zkl_waiter *waiter)
{
    struct proclaims *q = proclaims_of(c);
    struct proclaim *p;

    if (!q && (q = calloc(1, sizeof *q)) != NULL) {
        q->tail = &q->head;
        zklock__set_data(c, q);
    }
    if (!q || !(p = calloc(1, sizeof *p + len)))
        return ZKLOCK_ENOMEM;
    p->done = done;
    p->waiter = waiter;
    p->len = (int)len;
    if (len > 0)
        memcpy(p->value, value, len);
    *q->tail = p;
    q->tail = &p->next;
    zklock__mark(c);
    return ZKLOCK_OK;
}

/* With s->mu held: what both forms share. Returns what the call returns
 * (done, if not NULL, then owns the outcome); *started: a blocking caller
 * must wait for waiter once the driver ran. */
static int proclaim_locked(zklock_t *l, const void *value, size_t len, struct zkl_done *done,
                           struct zkl_waiter *waiter, bool *started)
{
    zklock_session_t *s = l->s;
    zkl_contender_t *c;
    int rc;

    *started = false;
    if (zklock__closing(s) || l->freeing)
        return ZKLOCK_ECLOSED;
    zklock__lapses_caught(s); /* no proclaiming on a lease that ran out */
    c = zklock__owner_contender(l);
    if (c && zklock__phase(c) == ZKL_LOST)
        return tell(done, ZKLOCK_ELOST);
    if (!c || zklock__phase(c) != ZKL_HELD || !zklock__node(c))
        return ZKLOCK_ENOTHELD;
    if (!done && zklock__on_completion_thread(s))
        return ZKLOCK_EDEADLK; /* the answer would come on this very thread */
    if (!zklock__connected(s))
        return tell(done, ZCONNECTIONLOSS);
    rc = record(c, value, len, done, waiter);
    *started = rc == ZKLOCK_OK;
    return rc;
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
    zklock__session_lock(l->s);
    done = zklock__done_new(l, fn, ctx);
    rc = done ? proclaim_locked(l, value, len, done, NULL, &started) : ZKLOCK_ENOMEM;
    if (rc != ZKLOCK_OK)
        zklock__done_discard(done); /* not started: done is not called */
    zklock__drive(l->s); /* the call's one drive: the step sends it */
    zklock__session_unlock(l->s);
    return rc;
}

int zklock_proclaim(zklock_t *l, const void *value, size_t len)
{
    struct zkl_waiter me;
    bool started;
    int rc;

    if (bad_value(l, value, len))
        return ZKLOCK_EINVAL;
    if (!zklock__waiter_init(&me))
        return ZKLOCK_ESYSTEM;
    zklock__session_lock(l->s);
    rc = proclaim_locked(l, value, len, NULL, &me, &started);
    zklock__drive(l->s); /* the call's one drive: the step sends it */
    while (started && !me.decided)
        zklock__cond_wait(l->s, &me.cond);
    if (started)
        rc = me.rc;
    zklock__session_unlock(l->s);
    zklock__waiter_fini(&me);
    return rc;
}

static const struct zkl_request_kind election_kinds[] = {
    [ELECTION_PROCLAIM - ZKL_REQ_RECIPE] = {.beside = true},
};

static const struct zkl_recipe election_recipe = {
    .step = election_step,
    .answer = election_answer,
    .kinds = election_kinds,
    .nkinds = 1,
    .retiring = election_retiring,
    .free_data = election_free_data,
};
