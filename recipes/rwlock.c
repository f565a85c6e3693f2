/* rwlock.c: the read/write lock, Curator's InterProcessReadWriteLock on the
 * wire (_c_<uuid>-__READ__<seq>, _c_<uuid>-__WRIT__<seq>).
 *
 * Both sides are ordinary engine handles on the same lock path: the write
 * side creates exclusive nodes, the read side shared ones, and the engine's
 * rule does the rest (readers do not block readers; everyone queues in
 * arrival order, so a waiting writer holds back the readers behind it).
 * What is particular to the pair happens before queuing (rw_prepare):
 *  - a thread holding only the read side that asks for the write side would
 *    wait for itself forever: ZKLOCK_EDEADLK;
 *  - a thread holding the write side that asks for the read side gets it at
 *    once as a downgrade heir: a non-sequential read node carrying the
 *    writer's sequence number, so it keeps the writer's place in the queue
 *    when the write side is released (as Curator 5.5 does). */
#include "../lib/internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct zklock_rwlock {
    zklock_t read;
    zklock_t write;
    int views_gone; /* views whose last reference went */
};

static zklock_rwlock_t *rw_of(zklock_t *view)
{
    return view->shared ? (zklock_rwlock_t *)((char *)view - offsetof(zklock_rwlock_t, read))
                        : (zklock_rwlock_t *)((char *)view - offsetof(zklock_rwlock_t, write));
}

static int rw_prepare(zklock_t *l, zkl_contender_t *c)
{
    const zkl_contender_t *other = zklock__owner_contender(l->sibling);
    bool holds_other = other && other->phase == ZKL_HELD;

    if (other && other->waiting)
        return ZKLOCK_EBUSY; /* handle-owned: the pair's other acquisition is in progress */
    if (!holds_other)
        return 0;
    if (!l->shared)
        return ZKLOCK_EDEADLK; /* read held, write asked: an upgrade */
    c->heir_of = other->node ? strdup(other->node) : NULL;
    if (!c->heir_of)
        return ZKLOCK_ENOMEM;
    c->heir = true;
    c->heir_seq = other->seq;
    c->heir_token = other->czxid;
    return 0;
}

/* The pair is one allocation: freed when both views are gone. */
static void rw_view_gone(zklock_t *view)
{
    zklock_rwlock_t *rw = rw_of(view);
    if (++rw->views_gone == 2)
        free(rw);
}

static const struct zkl_recipe rw_recipe = {
    .prepare = rw_prepare,
    .destroy = rw_view_gone,
};

static void init_view(zklock_t *view, zklock_t *sibling)
{
    view->sibling = sibling;
    view->borrowed = true;
    view->recipe = &rw_recipe;
}

int zklock_rwlock_new(zklock_rwlock_t **out, zklock_session_t *s, const char *path,
                      const zklock_opts_t *opts)
{
    zklock_rwlock_t *rw;
    int rc;

    if (!out)
        return ZKLOCK_EINVAL;
    *out = NULL;
    rw = calloc(1, sizeof *rw);
    if (!rw)
        return ZKLOCK_ENOMEM;
    rc = zklock__lock_init(&rw->read, s, path, opts, ZKL_TAG_READ, ZKL_TAG_KRLOCK);
    if (rc == 0) {
        rc = zklock__lock_init(&rw->write, s, path, opts, ZKL_TAG_WRIT, ZKL_TAG_KLOCK);
        if (rc)
            zklock__lock_fini(&rw->read);
    }
    if (rc) {
        free(rw);
        return rc;
    }
    init_view(&rw->read, &rw->write);
    init_view(&rw->write, &rw->read);
    *out = rw;
    return 0;
}

zklock_t *zklock_rwlock_read(zklock_rwlock_t *rw)
{
    return rw ? &rw->read : NULL;
}

zklock_t *zklock_rwlock_write(zklock_rwlock_t *rw)
{
    return rw ? &rw->write : NULL;
}

void zklock_rwlock_free(zklock_rwlock_t *rw)
{
    zklock_session_t *s;
    bool free_session;

    if (!rw)
        return;
    s = rw->read.s;
    pthread_mutex_lock(&s->mu);
    /* The read side first: a downgraded holder's heir goes before its writer.
     * Each view's owed callbacks run before the next goes. */
    zklock__dispatch_run(s, zklock__lock_retire(&rw->read));
    zklock__dispatch_run(s, zklock__lock_retire(&rw->write)); /* may free rw */
    free_session = zklock__session_claim_free(s);
    pthread_mutex_unlock(&s->mu);
    if (free_session)
        zklock__session_free(s);
}
