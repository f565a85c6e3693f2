/*
 * election.c: leader election. The engine's mutex is already an election:
 * the participants queue, the first one leads, each watches the one just
 * ahead, and when the leader resigns or its session ends, the next one leads
 * without anybody else waking. On the wire it is Curator's LeaderLatch
 * (_c_<uuid>-latch-<seq>), or kazoo's Election (a kazoo Lock) with
 * ZKLOCK_WIRE_KAZOO. What is particular to an election: the leader may
 * publish a value in its node (zklock_proclaim), which observers read with
 * zklock_leader() and are told of through zklock_queue_wait().
 */
#include "../lib/internal.h"

#include <stdlib.h>

static const struct zkl_recipe election_recipe;

int zklock_election_new(zklock_t **out, zklock_session_t *s, const char *path,
                        const zklock_opts_t *opts)
{
    return zklock__exclusive_new(out, s, path, opts, ZKL_TAG_LATCH, &election_recipe);
}

/* A set of the leader's node in flight; freed by whoever is last: the
 * caller, or the completion if the caller left (its session ended). */
struct proclaim {
    zklock_session_t *s;
    bool done, abandoned;
    int rc;
};

static void proclaimed(int rc, const struct Stat *st, const void *data)
{
    struct proclaim *p = (struct proclaim *)data;
    zklock_session_t *s = p->s;

    (void)st;
    pthread_mutex_lock(&s->mu);
    s->ops--;
    if (p->abandoned) {
        free(p);
    } else {
        p->rc = rc;
        p->done = true;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

/* With s->mu held: sets the data of the node c leads by, and waits for the
 * answer (or for the end of the session, which ends the leadership). */
static int set_value(zkl_contender_t *c, const void *value, size_t len)
{
    zklock_session_t *s = c->l->s;
    struct proclaim *p = calloc(1, sizeof *p);
    unsigned gen = s->gen;
    int rc;

    if (!p)
        return ZKLOCK_ENOMEM;
    p->s = s;
    rc = zoo_aset(s->zh, c->node, value, (int)len, -1, proclaimed, p);
    if (rc != ZOK) {
        free(p);
        return rc;
    }
    s->ops++;
    s->stats.requests++;
    while (!p->done && s->gen == gen && !s->closing)
        pthread_cond_wait(&s->cond, &s->mu);
    if (!p->done) {
        p->abandoned = true; /* the answer frees it, if one comes */
        return ZKLOCK_ELOST;
    }
    rc = p->rc == ZNONODE ? ZKLOCK_ELOST : p->rc;
    free(p);
    return rc;
}

int zklock_proclaim(zklock_t *l, const void *value, size_t len)
{
    zkl_contender_t *c;
    int rc;

    if (!l || l->recipe != &election_recipe || (!value && len > 0) || len > ZKLOCK_DATA_MAX)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    zklock__lease_check(l->s); /* no proclaiming on a lease that ran out */
    c = zklock__owner_contender(l);
    if (!c || c->phase != ZKL_HELD || !c->node)
        rc = c && c->phase == ZKL_LOST ? ZKLOCK_ELOST : ZKLOCK_ENOTHELD;
    else if (zklock__on_completion_thread(l->s))
        rc = ZKLOCK_EDEADLK; /* the answer would come on this very thread */
    else if (!zklock__connected(l->s))
        rc = ZCONNECTIONLOSS;
    else
        rc = set_value(c, value, len);
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}
