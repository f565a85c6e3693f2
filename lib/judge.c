/*
 * judge.c: what a listing of the lock path means for a contender.
 *
 * The rule: a child is a lock node if its name ends in a known tag and a
 * sequence number (anything else is ignored); nodes are ordered by sequence
 * number; a contender holds when no conflicting node precedes it (for an
 * exclusive contender every node conflicts, for a shared one only exclusive
 * ones), and otherwise watches the nearest conflicting one. Nobody queues
 * where the counter ran out (a spent number of ours, a negative one in the
 * queue): there the peers' order is not ours (counter_spent). A listing also
 * finds our node after a lost create reply, and duplicates of our own that
 * such a reply left behind.
 */
#include "engine.h"

/* Parses the listing; marks our strays; returns the number of lock nodes
 * in *q (caller frees) and our index in *self (-1 if our node is absent). */
static int read_queue(zkl_contender_t *c, const struct String_vector *names,
                      struct zkl_entry **q, int *self)
{
    const char *own = c->node ? basename_of(c->node) : NULL;
    size_t plen = strlen(c->prefix);
    int n = 0;

    *self = -1;
    *q = malloc(sizeof **q * (size_t)(names->count > 0 ? names->count : 1));
    if (!*q)
        return -1;
    for (int i = 0; i < names->count; i++) {
        struct zkl_entry *e = &(*q)[n];
        if (zklock__parse_name(names->data[i], e) != 0 || e->tag == ZKL_TAG_KLEASE)
            continue; /* unrelated children (a uuid alone is no lock node) */
        /* Strays of ours never block us: duplicates a lost reply made, and
         * nodes of a session we gave up that the server has not removed. */
        e->mine = (strncmp(e->name, c->prefix, plen) == 0 &&
                   !(own && strcmp(e->name, own) == 0)) ||
                  zklock__stale_match(session_of(c), c->l->queue, e->name);
        n++;
    }
    zklock__sort(*q, (size_t)n, c->node ? c->seq : 0);
    for (int i = 0; own && i < n; i++)
        if (strcmp((*q)[i].name, own) == 0)
            *self = i;
    return n;
}

/* A downgrade heir holds by its writer's place: is its thread's held node
 * on the write side still in the listing? */
static bool writer_listed(const zkl_contender_t *c, const struct zkl_entry *q, int n)
{
    const zklock_t *writes = c->l->sibling;

    for (const zkl_contender_t *w = writes ? writes->contenders : NULL; w; w = w->lock_next) {
        bool same_owner = w->by_handle || pthread_equal(w->owner, c->owner);
        if (!w->attached || !same_owner || w->phase != ZKL_HELD || !w->node)
            continue;
        for (int i = 0; i < n; i++)
            if (strcmp(q[i].name, basename_of(w->node)) == 0)
                return true;
    }
    return false;
}

/* After a lost create reply: adopt our node if the listing has it. */
static void recover_from(zkl_contender_t *c, const struct zkl_entry *q, int n)
{
    c->create_unknown = false;
    for (int i = 0; i < n; i++) {
        if (!q[i].mine || strncmp(q[i].name, c->prefix, strlen(c->prefix)) != 0)
            continue; /* not this contender's (a stale node of ours) */
        zklock__set_node(c, zklock__child_path(c->l->queue, q[i].name));
        c->seq = q[i].seq;
        if (c->node)
            zklock__send_owner_check(c); /* ours only if our session owns it */
        return;
    }
    /* Not there: the create never happened. A heir may make it again only
     * beside its writer's node: in a path wiped (and maybe made again)
     * meanwhile, the writer's number means nothing. */
    if (c->heir && !writer_listed(c, q, n))
        zklock__requeue(c);
}

/* The lock path's counter ran out (design.md, "Sequence numbers run out"):
 * our own number is spent, or the queue has a negative one, which Curator
 * and kazoo sort ahead of every other, so that a peer may hold by it while
 * its predecessors do. No order we keep can make both sides agree: we leave. */
static bool counter_spent(const struct zkl_entry *q, int n, int self)
{
    if (zklock__seq_spent(q[self].seq))
        return true;
    for (int i = 0; i < n; i++)
        if (q[i].seq < 0)
            return true;
    return false;
}

void zklock__judge(zkl_contender_t *c, const struct String_vector *names, const struct Stat *parent)
{
    zklock_session_t *s = session_of(c);
    struct zkl_entry *q;
    int self, blockers, w;
    int n = read_queue(c, names, &q, &self);

    if (n < 0) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    s->stats.listings++;
    if (c->create_unknown) {
        recover_from(c, q, n);
        free(q);
        return;
    }
    for (int i = 0; i < n; i++)
        if (q[i].mine)
            zklock__send_stray_delete(s, c->l->queue, q[i].name);
    if (c->phase != ZKL_QUEUING) {
        free(q);
        return;
    }
    if (self < 0) {
        /* Our node vanished while we waited (deleted by someone else):
         * queue again at the back. */
        zklock__requeue_own(c);
        free(q);
        return;
    }
    if (counter_spent(q, n, self)) {
        zklock__give_up(c, ZKLOCK_EWRAPPED); /* and our node goes */
        free(q);
        return;
    }
    w = zklock__blocker(q, (size_t)self, &blockers);
    if (w < 0) {
        if (zklock__become_holder(c))
            c->alone = zklock__fast_alone_in(c, n, parent);
    } else if (c->try_once) {
        zklock__give_up(c, ZKLOCK_EBUSY);
    } else {
        zklock__watch_blocker(c, &q[w], blockers);
    }
    free(q);
}

