/*
 * names.h: lock paths (path.c), node names and a queue's order (node.c),
 * server lists (hosts.c): pure functions (but the one that asks the
 * resolver), fuzzed.
 */
#ifndef ZKLOCK_NAMES_H
#define ZKLOCK_NAMES_H

#include "common.h"

/* ---- path.c: lock path validation ------------------------------------- */

#define ZKL_PATH_MAX 1024

/* 0 if `path` is a valid lock path, ZKLOCK_EINVAL otherwise. */
int zklock__path_check(const char *path);
/* dir + "/" + name, malloc'ed; NULL if out of memory. */
char *zklock__child_path(const char *dir, const char *name);

/* ---- node.c: node names, queue order, the "who blocks me" rule ---------- */

enum zkl_tag {
    ZKL_TAG_LOCK,   /* Curator InterProcessMutex: "lock-"     (exclusive) */
    ZKL_TAG_WRIT,   /* Curator write lock:        "__WRIT__"  (exclusive) */
    ZKL_TAG_READ,   /* Curator read lock:         "__READ__"  (shared)    */
    ZKL_TAG_KLOCK,  /* kazoo Lock / WriteLock:    "__lock__"  (exclusive) */
    ZKL_TAG_KRLOCK, /* kazoo ReadLock:            "__rlock__" (shared)    */
    ZKL_TAG_LEASE,  /* Curator semaphore lease:   "lease-"    (leases share) */
    ZKL_TAG_KLEASE, /* kazoo Semaphore lease:     no tag, no sequence: the
                       name is a 32-digit hex uuid (leases share) */
    ZKL_TAG_LATCH,  /* Curator LeaderLatch:       "latch-"    (exclusive) */
    ZKL_TAG_COUNT
};

/* The text of a tag ("lock-", "__READ__", ...). */
const char *zklock__tag_text(enum zkl_tag tag);
/* Shared (reader) tags never block each other. */
bool zklock__tag_shared(enum zkl_tag tag);

/* One child of a lock path that is a lock node. */
struct zkl_entry {
    const char *name; /* borrowed from the listing */
    int32_t seq;      /* the server's sequence number (may have wrapped) */
    int32_t key;      /* seq relative to a reference: the sort key */
    uint8_t tag;      /* enum zkl_tag */
    bool mine;        /* a stray node of the contender judging the queue */
    uint32_t index;   /* the caller's own: carried through zklock__sort */
};

/* Parses a child name. Returns 0 and fills e (name, seq, tag) for a lock
 * node of any known naming; -1 for anything else (unrelated children). */
int zklock__parse_name(const char *name, struct zkl_entry *e);

/* Sorts a queue into lock order: by sequence number in serial-number
 * arithmetic relative to `ref`, exclusive before shared on a tie (a
 * downgrade heir follows its writer), then by name. Where every number is
 * below ZKL_SEQ_SPENT, as in every queue the engine judges, that is plain
 * numeric order, which is also the text order Curator and kazoo sort by. */
void zklock__sort(struct zkl_entry *q, size_t n, int32_t ref);

/* The end of a lock path's sequence counter (design.md, "Sequence numbers
 * run out"). After 2^31 - 1 creations under one parent ZooKeeper 3.8 keeps
 * numbering 2147483647 (and, for creates in flight together, negative
 * numbers); older servers wrap to negative ones. Curator and kazoo sort the
 * text, where a negative number comes first: such a number is *spent*, and
 * so is 2147483647 itself, the one that repeats. */
#define ZKL_SEQ_SPENT INT32_MAX
bool zklock__seq_spent(int32_t seq);
/* The counter's upper half: a contender numbered there lists the queue
 * before it takes a turn handed over (a spent number may have come since
 * it last looked); below it, 2^30 creations would have to happen first. */
#define ZKL_SEQ_LATE (INT32_C(1) << 30)

/* The index of the entry that blocks q[self] (the nearest conflicting
 * predecessor), or -1 if q[self] may hold. *blockers = how many conflicting
 * predecessors there are. Entries marked `mine` never block. */
int zklock__blocker(const struct zkl_entry *q, size_t self, int *blockers);

/* Node name prefix of a new contender: "_c_<uuid>-" (Curator) or
 * "<32 hex>" (kazoo), NUL-terminated into buf (>= ZKL_PREFIX_MAX), from a
 * generator seeded by zklock__rng_seed (0, or ZKLOCK_ESYSTEM). */
#define ZKL_PREFIX_MAX 48
int zklock__rng_seed(uint64_t state[2]);
void zklock__make_prefix(char *buf, int wire, uint64_t rng[2]);

/* ---- hosts.c: the server list ------------------------------------------------- */

/* 0 if `hosts` is a server list the ZooKeeper client accepts
 * ("host:port,...[/chroot]"), ZKLOCK_EINVAL if it is malformed. */
int zklock__hosts_check(const char *hosts);
/* For a well-formed list: 0 if at least one of its names resolves now (the
 * client needs no more), ZKLOCK_ERESOLVE if none does, ZKLOCK_ENOMEM.
 * Asks the system's resolver: may take as long as DNS does. */
int zklock__hosts_resolve(const char *hosts);

#endif
