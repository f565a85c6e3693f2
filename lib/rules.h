/*
 * rules.h: the rules of the engine and its recipes, pure (rules.c).
 */
#ifndef ZKLOCK_RULES_H
#define ZKLOCK_RULES_H

#include "names.h"

/* What a contender brings to the reading of a listing of its queue. */
struct zkl_queue_facts {
    const char *prefix;    /* its node names' prefix */
    const char *own;       /* its node's name, or NULL */
    int32_t seq;           /* ... and that node's number */
    bool recovering;       /* a create's reply was lost: it looks for its node */
    bool exclusive;        /* its nodes exclude every other */
    bool try_once;
    bool heir;             /* a downgrade heir (read/write lock) */
    const char *writer;    /* ... its writer's held node's name, or NULL */
    /* Nodes of a session we gave up (stale.c), which never block us. */
    bool (*stale)(const void *ctx, const char *name);
    const void *stale_ctx;
};

/* What the listing means. */
enum zkl_verdict_kind {
    ZKL_V_HOLDS,          /* nothing conflicting ahead */
    ZKL_V_WATCH,          /* node blocks it: watch it */
    ZKL_V_BUSY,           /* a try-once, blocked */
    ZKL_V_NODE_GONE,      /* its node is not there: queue again */
    ZKL_V_SPENT,          /* the path's counter ran out (ZKLOCK_EWRAPPED) */
    ZKL_V_FOUND,          /* recovering: node is its own (if its session owns it) */
    ZKL_V_NOT_FOUND,      /* recovering: the create never happened */
    ZKL_V_HEIR_ORPHANED   /* recovering: neither the heir nor its writer is there */
};
struct zkl_verdict {
    enum zkl_verdict_kind kind;
    const struct zkl_entry *node; /* WATCH: the blocker; FOUND: ours */
    bool sole;             /* WATCH: the only blocker: its deletion means we hold */
    bool alone;            /* HOLDS: the only node, nothing created after (fast path) */
};

/* Parses a listing into q (room for names->count), marks the strays of the
 * contender (`mine`), sorts; returns how many lock nodes, and *self, the
 * index of its own (-1: absent). */
int zklock__queue_read(const struct zkl_queue_facts *f, const struct String_vector *names,
                       struct zkl_entry *q, int *self);
/* What the queue q[0..n) (from zklock__queue_read) means for the contender;
 * creations: the lock path's count of child creations (zklock__creations). */
void zklock__queue_judge(const struct zkl_queue_facts *f, const struct zkl_entry *q, int n,
                         int self, int64_t creations, struct zkl_verdict *v);
/* A listing's count of child creations, from its cversion (creations +
 * deletions = 2 * creations - children); -1 if that does not add up. */
int64_t zklock__creations(int32_t cversion, int32_t num_children);
/* The fast path (fastpath.c): was the holder's node alone, nothing created
 * after it? And does a node made without a listing hold? */
bool zklock__fast_alone(int nodes, int32_t seq, int64_t creations);
bool zklock__fast_holds(int32_t seq, int64_t czxid, int32_t prev_seq, int64_t prev_zxid);

/* A semaphore's leases, listed after its own was made (room: the listing
 * left room beside it). */
enum zkl_lease_verdict {
    ZKL_LEASE_HOLDS,      /* at most max, its own included */
    ZKL_LEASE_GONE,       /* its own is not there */
    ZKL_LEASE_BUSY,       /* no room, try-once */
    ZKL_LEASE_WAIT,       /* no room: wait, under the acquisition lock */
    ZKL_LEASE_START_OVER  /* no room, and no acquisition lock to wait under */
};
enum zkl_lease_verdict zklock__leases_judge(const struct String_vector *names, const char *own,
                                            int max, bool try_once, bool under_mutex, bool *room);
/* A lease with this prefix (after a lost create reply), or NULL. */
const char *zklock__leases_find(const struct String_vector *names, const char *prefix);
/* kazoo's number of leases in <path>'s data: another than max? (kazoo reads
 * it as a number, and ignores anything else.) */
bool zklock__max_differs(const char *value, int len, int max);

#endif
