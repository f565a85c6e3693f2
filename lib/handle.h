/*
 * handle.h: the lock handle every recipe shares (handle.c), and the calls
 * on it (lock.c); recipe.h declares their functions.
 */
#ifndef ZKLOCK_HANDLE_H
#define ZKLOCK_HANDLE_H

#include "common.h"
#include "names.h"

struct zkl_recipe;

struct zklock {
    zklock_session_t *s;
    char *path;            /* the lock path the user gave */
    char *queue;           /* where its contenders queue: path, or (semaphore)
                              a child of it; owned if it is not path */
    bool unnumbered;       /* its nodes are not sequential (kazoo's leases) */
    /* The queue's own level is made PERSISTENT, as kazoo's layout has it
     * (kazoo's ensure_path; a kazoo object that once saw the path never
     * looks again), with queue_data (NULL: none) in it; the levels above,
     * and every level of Curator's layout, are CONTAINERs. */
    bool keep_queue;
    const char *queue_data; /* borrowed from the recipe's memory */
    const char *tag_text;  /* in its nodes' names: zklock__tag_text(tag), or
                              a recipe's */
    bool internal;         /* is a recipe's own handle: nobody hears of its losses */
    const struct zkl_recipe *recipe;
    zklock_opts_t opts;
    enum zkl_tag tag;      /* the tag of the nodes this handle creates */
    bool shared;           /* zklock__tag_shared(tag) */
    zklock_t *sibling;     /* read/write lock: the other view */
    const struct ACL_vector *acl; /* of the nodes it creates: own_acl or the session's */
    struct ACL_vector own_acl;    /* a lock's own choice (opts.acl), else empty */
    bool borrowed;         /* a view owned by a read/write lock */
    bool freeing;
    int users;             /* threads inside a call on this handle */
    int refs;              /* 1 for the user + 1 per contender + queued callbacks */
    int in_callback;       /* callbacks running for this handle */
    zkl_contender_t *contenders;
    zklock_lock_stats_t stats; /* lockstats.c: zklock_lock_stats() */
    /* Acquiring without a listing (fastpath.c, "the fast path"): this
     * handle's last node was alone in the queue and we deleted it; if our
     * next node gets the very next sequence number, nobody else came. */
    bool alone_known;
    int32_t alone_seq;     /* that node's sequence number */
    int64_t alone_zxid;    /* ... and the zxid of its creation */
    unsigned alone_gen;    /* the session generation it was learnt in */
    bool tracks;           /* opts.track_previous or a lock-delay (previous.c) */
    zklock_previous_info_t prev; /* ... what its last acquisition that judged the
                              record learnt (zklock_previous_info) */
    bool prev_known;
};

/* handle.c (zklock__lock_init, ...) and lock.c (the calls) declare in
 * recipe.h what recipes use of them. */

#endif
