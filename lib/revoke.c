/*
 * revoke.c: revocation, Curator's convention. Someone who wants a holder to
 * let go writes "__REVOKE__" into the holder's node (Curator's
 * Revoker.attemptRevoke, zklock_revoke below); a holder whose handle has
 * on_revoke is told, once per such write, and decides: nothing is taken
 * from it.
 *
 * A holder hears of the write through the watch every contender already
 * sets on its own node (watch.c): a getData whose answer carries the data
 * and whose event fires on a data change (the step arms it again). So
 * revocation costs no watch of its own; a revocable holder only sets that
 * watch as soon as it holds, rather than once its node has lived
 * ZKL_OWN_WATCH_DELAY_MS, so that a request is never missed for want of a
 * watch. A write made while the contender still waited is seen by the
 * watch's answer too, and told when the hold begins (as Curator checks the
 * data when a lock is made revocable).
 */
#include "recipe.h"
#include "revoke.h"

#include <stdlib.h>
#include <string.h>

/* Who is told of a request written into c's node: c, or the multi-lock it
 * is a member of (a member's hold is the multi-lock's); NULL for a
 * recipe's own sub (a semaphore's acquisition lock). */
static const zkl_contender_t *told_for(const zkl_contender_t *c)
{
    if (!c->parent)
        return c;
    return c->parent->l->recipe->nodeless ? c->parent : NULL;
}

bool zklock__revocable(const zkl_contender_t *c)
{
    const zkl_contender_t *t = told_for(c);

    return t && t->l->opts.on_revoke && !t->l->internal;
}

/* ---- telling the owner ------------------------------------------------------ */

struct revoke_callback {
    struct zkl_callback cb;
    zklock_t *l;
    unsigned hold; /* the id of the contender whose hold is asked */
    bool ran;
};

/* Is the hold asked still held? A released (or lost) hold is not told. */
static bool still_held(const zklock_t *l, unsigned id)
{
    for (const zkl_contender_t *c = l->contenders; c; c = c->lock_next)
        if (c->id == id)
            return c->phase == ZKL_HELD && c->holds > 0;
    return false;
}

static bool revoke_begin(struct zkl_callback *cb)
{
    struct revoke_callback *rc = (struct revoke_callback *)cb;

    rc->ran = !rc->l->freeing && still_held(rc->l, rc->hold);
    if (rc->ran)
        rc->l->in_callback++;
    return rc->ran;
}

static void revoke_run(struct zkl_callback *cb)
{
    struct revoke_callback *rc = (struct revoke_callback *)cb;

    rc->l->opts.on_revoke(rc->l, rc->l->opts.ctx);
}

static void revoke_end(struct zkl_callback *cb)
{
    struct revoke_callback *rc = (struct revoke_callback *)cb;
    zklock_t *l = rc->l;

    if (rc->ran) {
        l->in_callback--;
        pthread_cond_broadcast(&l->s->cond); /* zklock_free waits for it */
    }
    zklock__lock_unref(l);
    free(rc);
}

static const struct zkl_callback_ops revoke_ops = {revoke_begin, revoke_run, revoke_end};

static void queue_told(const zkl_contender_t *t)
{
    struct revoke_callback *rc = calloc(1, sizeof *rc);

    if (!rc)
        return; /* the request stays in the node: a holder may still read it */
    rc->cb.ops = &revoke_ops;
    rc->cb.owner = t->l;
    rc->l = t->l;
    rc->hold = t->id;
    t->l->refs++;
    t->l->s->stats.revoke_told++;
    zklock__dispatch_push(t->l->s, &rc->cb);
}

/* Tells c's owner of the request c's node holds, if any, not told yet, and
 * the hold it is for is held. */
static void tell_if_asked(zkl_contender_t *c)
{
    const zkl_contender_t *t = told_for(c);

    if (!t || !zklock__revocable(c) || !c->revoke_seen || c->revoke_seen == c->revoke_told)
        return;
    /* (a hold just granted counts its holds once its call is decided) */
    if (c->phase != ZKL_HELD || t->phase != ZKL_HELD || (t->holds <= 0 && !t->waiting))
        return; /* told when it holds (zklock__revoke_granted); not once released */
    c->revoke_told = c->revoke_seen;
    queue_told(t);
}

void zklock__revoke_read(zkl_contender_t *c, const char *value, int len, const struct Stat *stat)
{
    size_t n = sizeof ZKL_REVOKE_MESSAGE - 1;

    if (value && len == (int)n && memcmp(value, ZKL_REVOKE_MESSAGE, n) == 0 && stat)
        c->revoke_seen = (int64_t)stat->version + 1;
    else
        c->revoke_seen = 0;
    tell_if_asked(c);
}

void zklock__revoke_granted(zkl_contender_t *c)
{
    if (c->l->recipe->nodeless) {
        /* a multi-lock: its members held first, and kept what they saw */
        for (zkl_contender_t *m = c->subs; m; m = m->next_sub)
            tell_if_asked(m);
        return;
    }
    if (!zklock__revocable(c))
        return;
    if (c->node && !c->own_due) {
        c->own_due = true; /* its answer tells what the node holds now */
        zklock__mark(c);
    }
    tell_if_asked(c);
}

/* ---- asking: zklock_revoke -------------------------------------------------- */

/* Does every node of q look like a kazoo semaphore's lease? */
static bool kazoo_leases(const zklock_queue_t *q)
{
    if (q->count == 0)
        return false;
    for (size_t i = 0; i < q->count; i++)
        if (strcmp(q->nodes[i].kind, "kazoo-lease") != 0)
            return false;
    return true;
}

static char *child(const char *path, const char *name)
{
    size_t n = strlen(path), m = strlen(name);
    char *p = malloc(n + m + 2);

    if (p) {
        memcpy(p, path, n);
        p[n] = '/';
        memcpy(p + n + 1, name, m + 1);
    }
    return p;
}

/* The holders of path: its queue, or a semaphore's leases (*holders) and,
 * for Curator's layout, its acquisition line (*line), as zklock-ls reads
 * them: a path with no lock node of its own but other children may be a
 * Curator semaphore. */
static int read_holders(zklock_session_t *s, const char *path, zklock_queue_t **holders,
                        zklock_queue_t **line)
{
    zklock_queue_t *leases = NULL;
    char *leases_path, *locks_path;
    const char *base = strcmp(path, "/") ? path : "";
    int rc = zklock_queue_read(s, path, holders);

    *line = NULL;
    if (rc != ZKLOCK_OK || !(*holders)->exists || kazoo_leases(*holders) ||
        (*holders)->count > 0 || (*holders)->ignored == 0)
        return rc;
    leases_path = child(base, "leases");
    locks_path = child(base, "locks");
    if (!leases_path || !locks_path) {
        rc = ZKLOCK_ENOMEM;
    } else if ((rc = zklock_queue_read(s, leases_path, &leases)) == ZKLOCK_OK && leases->exists) {
        zklock_queue_free(*holders);
        *holders = leases;
        leases = NULL;
        rc = zklock_queue_read(s, locks_path, line);
    }
    zklock_queue_free(leases);
    free(leases_path);
    free(locks_path);
    return rc;
}

/* Writes the request into one holder's node: 1 if written, 0 if the node
 * is gone (its holder left), or a negative code. */
static int ask(zklock_session_t *s, const char *queue, const zklock_node_t *n)
{
    zhandle_t *zh = zklock_session_zhandle(s);
    char *node = child(queue, n->name);
    int rc;

    if (!node)
        return ZKLOCK_ENOMEM;
    if (!zh)
        rc = zklock_session_id(s) ? ZCONNECTIONLOSS : ZKLOCK_ECLOSED;
    else
        rc = zoo_set(zh, node, ZKL_REVOKE_MESSAGE, (int)(sizeof ZKL_REVOKE_MESSAGE - 1), -1);
    free(node);
    if (rc == ZNONODE)
        return 0;
    return rc == ZOK ? 1 : rc;
}

int zklock_revoke(zklock_session_t *s, const char *lock_path, int *asked)
{
    zklock_queue_t *q = NULL, *line = NULL;
    int64_t waiting = 0; /* a Curator semaphore's line head: its lease waits */
    int rc, n = 0;

    if (asked)
        *asked = 0;
    if (!s || !lock_path)
        return ZKLOCK_EINVAL;
    rc = read_holders(s, lock_path, &q, &line);
    if (rc == ZKLOCK_OK && line && line->count > 0)
        waiting = line->nodes[0].session;
    for (size_t i = 0; rc == ZKLOCK_OK && i < q->count; i++) {
        const zklock_node_t *node = &q->nodes[i];
        int r;
        if (!node->holds || (waiting && node->session == waiting))
            continue;
        r = ask(s, q->path, node);
        if (r < 0)
            rc = r;
        else
            n += r;
    }
    zklock_queue_free(q);
    zklock_queue_free(line);
    if (asked)
        *asked = n;
    return rc;
}
