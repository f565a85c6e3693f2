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
 * data when a lock is made revocable). The asking side is revoke_ask.c.
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
