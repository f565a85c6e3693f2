/*
 * fastpath.c: acquiring without a listing.
 *
 * A lock taken and released again and again by one handle, with nobody else
 * around, need not list the queue every time. ZooKeeper numbers sequential
 * nodes with the lock path's count of child creations (deletions do not
 * count), so:
 *
 *   if our last node was alone in the queue with nothing created after it,
 *   we deleted it, and our new node gets the very next sequence number,
 *   then nobody created a node in between: the queue holds only ours.
 *
 * The catch is a lock path that was deleted and created again meanwhile
 * (an empty container is reaped): its new count starts at 0 and could reach
 * our number S. That takes S + 2 operations (the path's deletion, its
 * creation, S child creations) between our two creates, besides our delete
 * (or a foreign deletion of our node: one more). So the zxids of our two
 * creations, in one leader epoch, may be apart by 2 (our delete between
 * them) plus one transaction per ZKL_FAST_OPS_PER_TXN creations of the path:
 * S + 2 operations in so few transactions take a multi-op of more than 64.
 * On an idle ensemble the gap is exactly 2 and nothing else can have
 * happened. design.md, "Acquiring without a listing", has the argument;
 * the arithmetic is in rules.c (zklock__fast_alone, zklock__fast_holds),
 * what the handle knows between two acquisitions here.
 */
#include "contender.h"

/* Our alone node is deleted: the handle's next create may skip the listing. */
void zklock__fast_remember(zkl_contender_t *c)
{
    zklock_t *l = c->l;

    l->alone_known = true;
    l->alone_seq = c->seq;
    l->alone_zxid = c->czxid;
    l->alone_gen = c->gen;
}

/* Called as a create goes out: one create may use what the handle knows. */
bool zklock__fast_take(zkl_contender_t *c)
{
    zklock_t *l = c->l;
    bool known = l->alone_known && l->alone_gen == session_of(c)->gen;

    l->alone_known = false;
    if (known) {
        c->fast_prev_seq = l->alone_seq;
        c->fast_prev_zxid = l->alone_zxid;
    }
    return known;
}
