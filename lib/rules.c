/*
 * rules.c: the rules of the engine and its recipes, as pure functions of
 * what they are given: what a listing of a queue means for a contender,
 * the fast path's arithmetic, the semaphore's room, kazoo's number. No
 * ZooKeeper call, no contender touched: the engine gathers the facts and
 * acts on the verdict. Unit-tested with tables (test_unit.c).
 */
#include "rules.h"

#include <stdlib.h>
#include <string.h>

/* ---- a queue's listing ------------------------------------------------------------- */

int zklock__queue_read(const struct zkl_queue_facts *f, const struct String_vector *names,
                       struct zkl_entry *q, int *self)
{
    size_t plen = strlen(f->prefix);
    int n = 0;

    *self = -1;
    for (int i = 0; i < names->count; i++) {
        struct zkl_entry *e = &q[n];
        if (zklock__parse_name(names->data[i], e) != 0 || e->tag == ZKL_TAG_KLEASE)
            continue; /* unrelated children (a uuid alone is no lock node) */
        /* Strays of ours never block us: duplicates a lost reply made, and
         * nodes of a session we gave up that the server has not removed. */
        e->mine = (strncmp(e->name, f->prefix, plen) == 0 &&
                   !(f->own && strcmp(e->name, f->own) == 0)) ||
                  (f->stale && f->stale(f->stale_ctx, e->name));
        n++;
    }
    zklock__sort(q, (size_t)n, f->own ? f->seq : 0);
    for (int i = 0; f->own && i < n; i++)
        if (strcmp(q[i].name, f->own) == 0)
            *self = i;
    return n;
}

/* A listing made after a lost create reply: our node if it has one with our
 * prefix (a stale node of ours has another); if not, the create never
 * happened, and a heir may make it again only beside its writer's node (in a
 * path wiped, and maybe made again, meanwhile, the writer's number means
 * nothing). */
static void recovery(const struct zkl_queue_facts *f, const struct zkl_entry *q, int n,
                     struct zkl_verdict *v)
{
    bool writer_listed = false;

    for (int i = 0; i < n; i++) {
        if (q[i].mine && strncmp(q[i].name, f->prefix, strlen(f->prefix)) == 0) {
            v->kind = ZKL_V_FOUND;
            v->node = &q[i];
            return;
        }
        writer_listed |= f->writer && strcmp(q[i].name, f->writer) == 0;
    }
    v->kind = f->heir && !writer_listed ? ZKL_V_HEIR_ORPHANED : ZKL_V_NOT_FOUND;
}

/* The lock path's counter ran out (design.md, "Sequence numbers run out"):
 * our own number is spent, or the queue has a negative one, which Curator
 * and kazoo sort ahead of every other, so that a peer may hold by it while
 * its predecessors do. No order we keep can make both sides agree. */
static bool counter_spent(const struct zkl_entry *q, int n, int self)
{
    if (zklock__seq_spent(q[self].seq))
        return true;
    for (int i = 0; i < n; i++)
        if (q[i].seq < 0)
            return true;
    return false;
}

/* When the node we watch is the only one ahead of us that blocks us, its
 * deletion means we hold: nodes created later have higher numbers. Not
 * behind a writer's node for an exclusive contender (a downgrade heir, a
 * shared node with the writer's number, may come later and block it), nor
 * in the counter's upper half (a later node may have a spent number, which
 * peers sort first): there we list again. */
static bool sole_blocker(const struct zkl_queue_facts *f, const struct zkl_entry *blocker,
                         int blockers)
{
    bool writer = blocker->tag == ZKL_TAG_WRIT || blocker->tag == ZKL_TAG_KLOCK;
    return blockers == 1 && f->seq < ZKL_SEQ_LATE && !(f->exclusive && writer);
}

void zklock__queue_judge(const struct zkl_queue_facts *f, const struct zkl_entry *q, int n,
                         int self, int64_t creations, struct zkl_verdict *v)
{
    int blockers, w;

    memset(v, 0, sizeof *v);
    if (f->recovering) {
        recovery(f, q, n, v);
        return;
    }
    if (self < 0) {
        v->kind = ZKL_V_NODE_GONE; /* deleted by someone else while we waited */
        return;
    }
    if (counter_spent(q, n, self)) {
        v->kind = ZKL_V_SPENT;
        return;
    }
    w = zklock__blocker(q, (size_t)self, &blockers);
    if (w < 0) {
        v->kind = ZKL_V_HOLDS;
        v->alone = zklock__fast_alone(n, q[self].seq, creations);
    } else if (f->try_once) {
        v->kind = ZKL_V_BUSY;
    } else {
        v->kind = ZKL_V_WATCH;
        v->node = &q[w];
        v->sole = sole_blocker(f, &q[w], blockers);
    }
}

/* ---- acquiring without a listing (fastpath.c, design.md) ---------------------------- */

#define ZKL_FAST_OPS_PER_TXN 64

int64_t zklock__creations(int32_t cversion, int32_t num_children)
{
    int64_t sum = (int64_t)cversion + num_children;
    return sum >= 0 && sum % 2 == 0 ? sum / 2 : -1;
}

bool zklock__fast_alone(int nodes, int32_t seq, int64_t creations)
{
    return nodes == 1 && creations == (int64_t)seq + 1;
}

bool zklock__fast_holds(int32_t seq, int64_t czxid, int32_t prev_seq, int64_t prev_zxid)
{
    int64_t gap = czxid - prev_zxid;

    return (uint32_t)seq == (uint32_t)prev_seq + 1 && seq > 0 && czxid >> 32 == prev_zxid >> 32 &&
           gap > 0 && gap <= 2 + seq / ZKL_FAST_OPS_PER_TXN;
}

/* ---- the semaphore ----------------------------------------------------------------- */

enum zkl_lease_verdict zklock__leases_judge(const struct String_vector *names, const char *own,
                                            int max, bool try_once, bool under_mutex, bool *room)
{
    bool listed = false;

    for (int i = 0; i < names->count && own; i++)
        listed |= strcmp(names->data[i], own) == 0;
    *room = listed && names->count < max;
    if (!listed)
        return ZKL_LEASE_GONE;
    if (names->count <= max)
        return ZKL_LEASE_HOLDS;
    if (try_once)
        return ZKL_LEASE_BUSY;
    return under_mutex ? ZKL_LEASE_WAIT : ZKL_LEASE_START_OVER;
}

const char *zklock__leases_find(const struct String_vector *names, const char *prefix)
{
    for (int i = 0; i < names->count; i++)
        if (strncmp(names->data[i], prefix, strlen(prefix)) == 0)
            return names->data[i];
    return NULL;
}

bool zklock__max_differs(const char *value, int len, int max)
{
    char text[16], *end;
    long v;

    if (!value || len <= 0 || len >= (int)sizeof text)
        return false;
    memcpy(text, value, (size_t)len);
    text[len] = '\0';
    v = strtol(text, &end, 10);
    return end != text && *end == '\0' && v != max;
}
