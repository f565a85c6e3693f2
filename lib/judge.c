/*
 * judge.c: what a listing of the lock path means for a contender.
 *
 * The rule: a child is a lock node if its name ends in a known tag and a
 * sequence number (anything else is ignored); nodes are ordered by sequence
 * number; a contender holds when no conflicting node precedes it (for an
 * exclusive contender every node conflicts, for a shared one only exclusive
 * ones), and otherwise watches the nearest conflicting one. Nobody queues
 * where the counter ran out (a spent number of ours, a negative one in the
 * queue): there the peers' order is not ours. A listing also finds our node
 * after a lost create reply, and duplicates of our own that such a reply
 * left behind. The rules themselves are pure (rules.c): this file gathers
 * what the contender knows and acts on their verdict.
 */
#include "engine.h"

/* A downgrade heir holds by its writer's place: its thread's held node on
 * the write side, by name (NULL: none). */
static const char *writer_node(const zkl_contender_t *c)
{
    const zklock_t *writes = c->l->sibling;

    for (const zkl_contender_t *w = writes ? writes->contenders : NULL; w; w = w->lock_next) {
        bool same_owner = w->by_handle || pthread_equal(w->owner, c->owner);
        if (w->attached && same_owner && w->phase == ZKL_HELD && w->node)
            return basename_of(w->node);
    }
    return NULL;
}

static bool stale(const void *s, const char *name);

/* What c brings to the reading of the listing. */
static void facts_of(const zkl_contender_t *c, struct zkl_queue_facts *f)
{
    *f = (struct zkl_queue_facts){
        .prefix = c->prefix,
        .own = c->node ? basename_of(c->node) : NULL,
        .seq = c->seq,
        .recovering = c->create_unknown,
        .exclusive = exclusive(c),
        .try_once = c->try_once,
        .heir = c->heir,
        .writer = c->heir ? writer_node(c) : NULL,
        .stale = stale,
        .stale_ctx = c,
    };
}

static bool stale(const void *ctx, const char *name)
{
    const zkl_contender_t *c = ctx;
    return zklock__stale_match(session_of(c), c->l->queue, name);
}

/* A lost create reply: the listing found our node (ours only if our session
 * owns it: the owner check), or not (the next step creates it again; a heir
 * whose writer is gone too queues as a plain reader). */
static void recovered(zkl_contender_t *c, const struct zkl_verdict *v)
{
    c->create_unknown = false;
    if (v->kind == ZKL_V_FOUND) {
        zklock__set_node(c, zklock__child_path(c->l->queue, v->node->name));
        c->seq = v->node->seq;
        if (c->node)
            zklock__send_owner_check(c);
    } else if (v->kind == ZKL_V_HEIR_ORPHANED) {
        zklock__requeue(c);
    }
}

/* What the verdict means for a queuing contender. */
static void act_on(zkl_contender_t *c, const struct zkl_verdict *v)
{
    switch (v->kind) {
    case ZKL_V_HOLDS:
        if (zklock__become_holder(c))
            c->alone = v->alone;
        break;
    case ZKL_V_WATCH:
        zklock__watch_blocker(c, v->node, v->sole);
        break;
    case ZKL_V_BUSY:
        zklock__give_up(c, ZKLOCK_EBUSY);
        break;
    case ZKL_V_NODE_GONE:
        zklock__requeue_own(c); /* deleted by someone else: queue again at the back */
        break;
    case ZKL_V_SPENT:
        zklock__give_up(c, ZKLOCK_EWRAPPED); /* and our node goes */
        break;
    default:
        break;
    }
}

void zklock__judge(zkl_contender_t *c, const struct String_vector *names, const struct Stat *parent)
{
    zklock_session_t *s = session_of(c);
    struct zkl_queue_facts f;
    struct zkl_verdict v;
    struct zkl_entry *q = malloc(sizeof *q * (size_t)(names->count > 0 ? names->count : 1));
    int n, self;

    if (!q) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    facts_of(c, &f);
    n = zklock__queue_read(&f, names, q, &self);
    zklock__queue_judge(&f, q, n, self, zklock__creations(parent->cversion, parent->numChildren),
                        &v);
    s->stats.listings++;
    if (c->create_unknown) {
        recovered(c, &v);
        free(q);
        return;
    }
    for (int i = 0; i < n; i++)
        if (q[i].mine)
            zklock__send_stray_delete(s, c->l->queue, q[i].name);
    if (c->phase == ZKL_QUEUING)
        act_on(c, &v);
    free(q);
}
