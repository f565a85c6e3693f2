/*
 * internal.h: libzklock's private structures. Never installed.
 *
 * Naming: internal functions and variables are zklock__name (two
 * underscores). The shared library exports only the public zklock_ API
 * (-fvisibility=hidden), but a static archive has every global in it: so
 * every global stays in the library's namespace (test/check-exports.sh).
 * Internal types and macros, which are not symbols, are zkl_ and ZKL_.
 *
 * Locking: one mutex per session (s->mu) guards everything reachable from
 * the session: its locks, their contenders, the callback queue, the counters.
 * ZooKeeper's asynchronous calls are issued with s->mu held (they never wait
 * for the completion thread); zookeeper_init/zookeeper_close and user
 * callbacks are called without it.
 */
#ifndef ZKLOCK_INTERNAL_H
#define ZKLOCK_INTERNAL_H

#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "zklock.h"

/* ---- path.c: lock path validation ------------------------------------- */

#define ZKL_PATH_MAX 1024

/* 0 if `path` is a valid lock path, ZKLOCK_EINVAL otherwise. */
int zklock__path_check(const char *path);

/* ---- hosts.c: the server list ------------------------------------------------- */

/* 0 if `hosts` is a server list the ZooKeeper client accepts
 * ("host:port,...[/chroot]"), ZKLOCK_EINVAL if it is malformed. */
int zklock__hosts_check(const char *hosts);
/* For a well-formed list: 0 if at least one of its names resolves now (the
 * client needs no more), ZKLOCK_ERESOLVE if none does, ZKLOCK_ENOMEM.
 * Asks the system's resolver: may take as long as DNS does. */
int zklock__hosts_resolve(const char *hosts);

/* ---- clock.c: time, on ZKLOCK_CLOCK (CLOCK_BOOTTIME on Linux) ------------- */

int zklock__cond_init(pthread_cond_t *cond); /* waits on CLOCK_MONOTONIC */
/* Waits on cond (from zklock__cond_init, with mu held) until at (a
 * zklock__now time) or a wake-up, and at most cap_ms (0: no cap) before
 * the clock is read again; ETIMEDOUT once at has passed, else 0. */
int zklock__cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, const struct timespec *at,
                            int cap_ms);
void zklock__now(struct timespec *ts);
void zklock__later(struct timespec *ts, const struct timespec *base, int64_t ms);
void zklock__deadline(struct timespec *ts, int timeout_ms); /* now + timeout_ms */
bool zklock__earlier(const struct timespec *a, const struct timespec *b);
bool zklock__passed(const struct timespec *ts);
int64_t zklock__ms_between(const struct timespec *from, const struct timespec *to);

/* ---- timer.c: what the session thread sleeps on --------------------------- */

struct zkl_timer {
    struct timespec at;
    size_t slot; /* 1 + its index in the heap while armed, 0 when not */
    /* Called on the session thread with s->mu held, once `at` has passed. */
    void (*fire)(struct zkl_timer *t, zklock_session_t *s);
};

struct zkl_timers {
    struct zkl_timer **heap;
    size_t n, cap, reserved;
    bool asleep, sleep_timed; /* the session thread sleeps (until sleep_until) */
    struct timespec sleep_until;
    int slice_ms; /* while a timer is armed, the longest sleep before the
                     clock is read again: the wait itself does not see the
                     host sleep (clock.c). The lease's margin. */
};

/* The lease's margin (lease.c), a twentieth of the session timeout: also how
 * late, at most, the session thread notices that the host slept. */
#define ZKL_LEASE_MARGIN_DIVISOR 20

/* Owners of timers reserve their slots first; arming then never fails. */
int zklock__timers_reserve(zklock_session_t *s, size_t k);
void zklock__timers_unreserve(zklock_session_t *s, size_t k);
void zklock__timers_free(zklock_session_t *s);
void zklock__timer_arm(zklock_session_t *s, struct zkl_timer *t, const struct timespec *at);
void zklock__timer_arm_in(zklock_session_t *s, struct zkl_timer *t, int ms);
void zklock__timer_cancel(zklock_session_t *s, struct zkl_timer *t);
bool zklock__timer_armed(const struct zkl_timer *t);
/* The session thread: fires what is due; sleeps until the next or a kick. */
void zklock__timers_fire_due(zklock_session_t *s);
void zklock__timers_sleep(zklock_session_t *s);

/* ---- dispatch.c: the user's callbacks, in order ---------------------------- */

struct zkl_callback;
struct zkl_callback_ops {
    bool (*begin)(struct zkl_callback *cb); /* s->mu held: run it after all? */
    void (*run)(struct zkl_callback *cb);   /* s->mu not held: the user's code */
    void (*end)(struct zkl_callback *cb);   /* s->mu held: after run, or dropped;
                                               frees cb */
};
struct zkl_callback {
    struct zkl_callback *next;
    const struct zkl_callback_ops *ops;
    const void *owner; /* what it is about (a lock handle), or NULL */
};

void zklock__dispatch_push(zklock_session_t *s, struct zkl_callback *cb);
/* ZKLOCK_DISPATCH_THREAD: starts the callback thread; stops it (without
 * s->mu) once it ran what is queued. */
int zklock__dispatch_start(zklock_session_t *s);
void zklock__dispatch_stop(zklock_session_t *s);
bool zklock__dispatch_one(zklock_session_t *s);
/* Runs the callbacks of a list (from zklock__dispatch_take), s->mu held on
 * entry and exit, dropped around each. */
void zklock__dispatch_run(zklock_session_t *s, struct zkl_callback *list);
int zklock__dispatch_init(zklock_session_t *s, bool poll);
void zklock__dispatch_fini(zklock_session_t *s);
struct zkl_callback *zklock__dispatch_take(zklock_session_t *s, const void *owner);
void zklock__dispatch_drop_all(zklock_session_t *s);
/* Is the calling thread inside one of s's callbacks? */
bool zklock__in_callback(const zklock_session_t *s);

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

/* ---- the engine ---------------------------------------------------------- */

typedef struct zkl_contender zkl_contender_t;

/* Generations whose requests a contender may have in flight at once. */
#define ZKL_TICKETS 4

enum zkl_phase {
    ZKL_QUEUING, /* wants the lock: creating, listing or watching */
    ZKL_HELD,    /* holds it */
    ZKL_LOST,    /* held it; the session ended or the node was deleted */
    ZKL_LEAVING, /* giving up or releasing: its node must go */
    ZKL_GONE     /* finished: no node on the server */
};

/* One thread's place in one lock's queue. */
struct zkl_contender {
    zklock_t *l;
    pthread_t owner;
    pthread_cond_t cond;   /* the owner waits on it (with s->mu) */
    bool attached;         /* the owner still refers to it */
    bool by_handle;        /* the owner is the handle (ZKLOCK_OWNER_HANDLE) */
    int inside;            /* threads inside a blocking call on it: it is
                              not freed while one is */
    /* The owner's call in progress (owner.c): an acquisition (waiting) or
     * a release (releasing), told through c->cond or a done callback. */
    bool waiting;          /* an acquisition is in progress */
    bool releasing;        /* a release is, and someone awaits its end */
    struct zkl_waiter *acq_waiter, *rel_waiter; /* blocked callers, told there */
    struct zkl_done *done; /* an asynchronous call's completion, or NULL */
    bool checking, recheck;
    bool has_deadline;
    struct zkl_timer deadline_timer;
    char *check_path;      /* zklock_check_op's copy of the held node */
    enum zkl_phase phase;
    int holds;             /* reentrant count while HELD */
    int result;            /* what the owner's call returns */
    int lost_reason;       /* what on_lost was told */
    bool loss_unconfirmed; /* LOST, and on_lost waits to know why: */
    int loss_fallback;     /* ... this, unless the session turns out ended */

    char prefix[ZKL_PREFIX_MAX]; /* name prefix: finds our node after a lost reply */
    char *node;            /* full path of our node; NULL if none */
    int32_t seq;
    int64_t czxid;         /* fencing token */
    int32_t heir_seq;      /* downgrade heir: non-sequential, this sequence */
    int64_t heir_token;    /* ... and its writer's fencing token */
    char *heir_of;         /* ... and its writer's node, checked as it is made */
    struct zkl_heir_multi *heir_multi; /* that check and create in flight */
    bool heir;
    bool lease_wait;       /* its turn came on a lease that ran out: granted
                              once a heartbeat proves the session (lease.c) */
    /* lockstats.c: when the owner's acquisition was called, then (once
     * granted: stat_held) when its hold began. */
    struct timespec stat_since;
    bool stat_held;

    /* what the next step must do */
    int busy;              /* requests of the current chain in flight */
    bool create_unknown;   /* a create's reply was lost: look for our node */
    bool delete_unknown;   /* a delete's reply was lost: it may have worked */
    bool need_parents;     /* the lock path is missing: create it first */
    int parent_rc;         /* why creating the lock path was refused, or 0 */
    bool need_list;
    bool backoff;          /* a request failed for want of a connection: send
                              nothing more until the next resume */
    bool try_once;
    bool canceled;
    bool sole_blocker;     /* the watched node is the only one ahead of us */
    bool alone;            /* we hold, and our node was the only one in the
                              queue with nothing created after it */
    bool fast;             /* our create went out without a listing */
    int32_t fast_prev_seq; /* ... relying on this alone node of the handle */
    int64_t fast_prev_zxid;

    /* The watch on the node that blocks us. `watched` stays set while the
     * request that sets it is in flight or the watch is registered. */
    char *watched;
    bool watch_wanted;     /* we still care about `watched` */
    bool watch_pending;    /* the request setting the watch is in flight */
    int pred_watches;      /* registrations of pred_watcher for us (0 or 1) */
    bool queue_watch;      /* its listings also watch the whole queue (a
                              semaphore's head, waiting for a lease) */
    int queue_watches;     /* ... registrations of queue_watcher (0 or 1) */
    bool queue_listing;    /* a listing that sets it is in flight: its
                              answer registers the watch, wanted or not */
    /* A recipe's sub-acquisitions (a semaphore's acquisition mutex, a
     * multi-lock's members): contenders of other handles whose owner is
     * this contender (their parent), told through `internal` when a call
     * on them is decided. A parent is neither finished nor freed while it
     * has a sub: what it started on the server is gone before it is. */
    zkl_contender_t *subs, *next_sub, *parent;
    void (*internal)(zkl_contender_t *c, int rc);
    bool let_go;           /* (a sub) its parent no longer wants it */
    bool by_parent;        /* (a sub) takes no step of its own until its
                              parent starts it, or makes its node (in one
                              multi with its siblings') */
    int recipe_state;      /* a recipe's own word about c (the semaphore's
                              last look at its leases) */
    bool guessed;          /* (a semaphore's lease) it let the acquisition
                              lock go early once: never twice */
    void *recipe_data;     /* a recipe's own allocation for c (one free()) */
    /* The watch on our own node: tells a waiter its place is gone and a
     * holder its lock is. It costs a request and an event per node, so it
     * is set only once the node has lived ZKL_OWN_WATCH_DELAY_MS (most
     * nodes of a busy lock live less); see the design note. */
    int own_watches;       /* registrations of own_watcher for us (0 or 1) */
    bool own_pending;      /* the request setting it is in flight */
    bool own_due;          /* the delay is over: set it when possible */
    struct zkl_timer own_timer; /* ... ends the delay */
    int ops;               /* requests in flight (completion pending) */
    struct timespec sent_at; /* when the oldest of them went out */
    unsigned gen;          /* session generation of the last request/watch */
    /* The same requests by the generation they were sent in: an answer
     * names its request's ticket (zklock__req), not just its contender, so
     * that answers an adopted session's old handle still gives after a
     * readopt are told from the new handle's. */
    struct zkl_ticket {
        unsigned gen;
        int ops;
        unsigned char index; /* in tickets[] */
    } tickets[ZKL_TICKETS];
    unsigned char ticket;  /* the one requests are sent with now */

    zkl_contender_t *lock_next, *lock_prev;  /* in l->contenders */
    zkl_contender_t *sess_next, *sess_prev;  /* in s->contenders */
};

/* What a recipe changes in the engine's rules (the files in recipes/). Any hook may
 * be NULL: the default rule (the mutex's). Called with s->mu held. */
struct zkl_recipe {
    /* Before queuing: may refuse (ZKLOCK_EDEADLK) or make c a downgrade heir. */
    int (*prepare)(zklock_t *l, zkl_contender_t *c);
    /* May c create its node now? If not, the recipe steps c when it may. */
    bool (*may_create)(zkl_contender_t *c);
    /* What a listing of the queue means for c, instead of the default rule
     * (the listing also set a watch on the queue if c->queue_watch). */
    void (*judge)(zkl_contender_t *c, const struct String_vector *names, const struct Stat *dir);
    /* c holds now: let go of what it took to get there. */
    void (*granted)(zkl_contender_t *c);
    /* c gives up, or its hold ends: end what the recipe started for it. */
    void (*ending)(zkl_contender_t *c);
    /* Frees the memory of l once nothing refers to it. */
    void (*destroy)(zklock_t *l);
    /* zklock_free(l): end the recipe's own calls in flight on l (an
     * election's proclaims), their done callbacks ZKLOCK_ECANCELED. */
    void (*retiring)(zklock_t *l);
    bool nodeless; /* its contenders make no node of their own (a multi-lock) */
    bool in_turn;  /* a multi-lock takes it alone, in path order, once it holds
                      every plain lock (a semaphore) */
};

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
    /* Acquiring without a listing (engine.c, "the fast path"): this
     * handle's last node was alone in the queue and we deleted it; if our
     * next node gets the very next sequence number, nobody else came. */
    bool alone_known;
    int32_t alone_seq;     /* that node's sequence number */
    int64_t alone_zxid;    /* ... and the zxid of its creation */
    unsigned alone_gen;    /* the session generation it was learnt in */
};

/* lockstats.c: a lock handle's contention figures (zklock_lock_stats),
 * recorded where calls begin and where their outcomes are told; s->mu held.
 * Only the owner's own calls count: a recipe's internal contenders (a
 * semaphore's acquisition mutex, a multi-lock's members) never do. */
void zklock__stats_called(zkl_contender_t *c);             /* an acquisition starts */
void zklock__stats_acquired(zkl_contender_t *c, int rc);   /* ... and is decided */
void zklock__stats_told(zklock_t *l, int rc);              /* ... decided at once */
void zklock__stats_reentered(zklock_t *l);
void zklock__stats_hold_over(zkl_contender_t *c, bool lost); /* released or lost */
/* The histogram bucket of a duration (zklock.h, ZKLOCK_STATS_BUCKETS). */
unsigned zklock__stats_bucket(uint64_t us);
/* Is `size` one a versioned struct of these sizes (oldest first, the last
 * ours) ever had, or that of a newer one (larger, whole uint64_t)? */
bool zklock__stats_size_ok(size_t size, const size_t *sizes, size_t n);

/* States of a session (s->state). */
enum zkl_sstate {
    ZKL_S_CONNECTING, /* a handle exists, not yet connected */
    ZKL_S_CONNECTED,
    ZKL_S_SUSPENDED,  /* connection lost, session maybe alive */
    ZKL_S_EXPIRED,    /* session gone; a new handle is being set up */
    ZKL_S_CLOSED
};

struct zkl_qwatch;
struct zkl_reading;
struct zkl_proclaim;
struct zkl_stale;
struct zkl_heartbeat;
struct zkl_heir_multi;
struct zkl_done;

/* A blocked caller's record of its call's outcome (on its stack). */
struct zkl_waiter {
    bool decided;
    int rc;
};

/* A credential of the session (auth.c). */
struct zkl_auth {
    char *scheme;
    char *data;
    int len;
};

struct zklock_session {
    pthread_mutex_t mu;
    pthread_cond_t cond;        /* state changes, lock/user counts */
    pthread_cond_t thread_cond; /* wakes the session thread (timers, renewal) */
    pthread_t thread;
    bool thread_started, thread_stop;
    struct zkl_timers timers;

    zhandle_t *zh;
    zhandle_t *retired_zh;      /* an expired session's handle, to close */
    bool adopted;
    pthread_t cthread;          /* the completion thread of cthread_zh */
    zhandle_t *cthread_zh;
    zhandle_t *probe_zh;        /* an adopted handle we asked to tell it */
    bool ended_unconfirmed;     /* the session ended without a server saying
                                   so: it may live on for a while, nodes and all */
    char *hosts;
    char *identity;
    zklock_session_opts_t opts;
    struct zkl_auth *auth;      /* credentials, copied from opts */
    size_t nauth;
    unsigned auth_gen;          /* bumped for each handle they are sent on */
    bool auth_pending;          /* ... and the server's verdict is still to come */
    size_t auth_added;          /* ... how many of them the handle took so far */
    bool auth_probing;          /* ... a request after them asks for it */
    int auth_rc;                /* ... the first refusal */
    bool auth_failed;           /* a server rejected them: no retry */
    struct ACL_vector acl;      /* what the session's locks create by default */
    char *tls;                  /* zookeeper_init_ssl's "ca,cert,key[,password]" */
    int negotiated_ms;          /* session timeout the server granted */

    enum zkl_sstate state;
    unsigned gen;               /* bumped whenever the ZooKeeper session ends */
    int64_t session_id;
    struct timespec suspended_at;
    struct zkl_timer suspend_timer; /* the local expiry */
    /* The lease (lease.c): the send time of the latest request of ours the
     * leader answered; a sync keeps it fresh; past it, holds are unsure. */
    struct timespec heard_at;
    bool heard_known;
    struct timespec heard_later; /* an answer that came after the lease ran
                                    out, counted once its holds ended */
    bool heard_later_known;
    struct zkl_heartbeat *heartbeat; /* the sync in flight, if any */
    struct zkl_timer heartbeat_timer, belief_timer;
    struct zkl_timer retry_timer;   /* resume the layers, or reopen */
    bool need_new_handle;
    bool reopen_now;                /* ... the retry timer says: now */

    bool closing;               /* zklock_session_close() has begun */
    bool close_running;         /* ... and has not returned: s is its too */
    bool free_claimed;          /* someone is freeing this struct */
    int users;                  /* threads inside a lock call */
    zkl_contender_t *contenders;
    int nlocks;                 /* live lock handles and followers */
    int ops;                    /* requests in flight, all contenders */
    int watches;                /* watches registered, all contenders */
    struct zkl_callback *cb_head, *cb_tail;
    bool poll_dispatch;         /* ZKLOCK_DISPATCH_POLL: the user runs them */
    pthread_t cb_thread;        /* else the callback thread runs them */
    bool cb_thread_started, cb_stop;
    pthread_cond_t cb_cond;     /* wakes the callback thread */
    bool cb_cond_made;
    bool cb_running;            /* cb_runner is running one of them */
    pthread_t cb_runner;
    int event_fd;               /* ... readable while some are queued */
    struct zkl_qwatch *qwatches; /* zklock_queue_wait's watches (inspect.c) */
    struct zkl_proclaim *proclaims; /* an election's sets in flight (election.c) */
    zklock_follow_t *follows;   /* zklock_leader_follow's followers (follow.c) */
    struct zkl_reading *readings; /* zklock_queue_read's reads in flight (inspect.c) */
    struct zkl_stale *stale;    /* nodes of given-up sessions (stale.c) */
    uint64_t rng[2];            /* node name uuids */
    zklock_stats_t stats;
};

/* ---- session.c: one ZooKeeper session at a time ------------------------------ */

/* What a layer above the session (the engine, the queue inspector) hears of
 * the session. Called with s->mu held; any hook may be NULL. */
struct zkl_layer {
    void (*resumed)(zklock_session_t *s);           /* connected (again): go on */
    void (*suspended)(zklock_session_t *s);         /* the connection is lost */
    void (*ended)(zklock_session_t *s, int reason); /* the ZooKeeper session is over:
                                                       ZKLOCK_LOST_EXPIRED or ZKLOCK_ECLOSED */
    void (*handle_closed)(zklock_session_t *s);     /* the old handle is closed: its
                                                       watches can fire no more */
    void (*unwatch_all)(zklock_session_t *s);       /* an adopted handle: take every
                                                       watch back from it */
    void (*close_begin)(zklock_session_t *s);       /* an adopted handle is let go:
                                                       remove what is ours on the server */
    bool (*busy)(const zklock_session_t *s);        /* ... and still removing it */
    void (*freeing)(zklock_session_t *s);           /* s is being freed */
};
/* layers.c: every layer, NULL-terminated. */
extern const struct zkl_layer *const zklock__layers[];
extern const struct zkl_layer zklock__engine_layer, zklock__inspect_layer,
    zklock__election_layer, zklock__follow_layer;

bool zklock__connected(const zklock_session_t *s);
/* Resume the layers shortly (after an answer no session event follows). */
void zklock__retry_later(zklock_session_t *s);
bool zklock__session_claim_free(zklock_session_t *s);
void zklock__session_free(zklock_session_t *s);
/* With s->mu held: one watch fewer is registered (wakes a close that waits). */
void zklock__watch_gone(zklock_session_t *s);
/* With s->mu held, in an answer or event of s->zh: this is its completion
 * thread. */
void zklock__learn_completion_thread(zklock_session_t *s);
/* ZAUTHFAILED once a server rejected the session's credentials, else 0. */
int zklock__session_refusal(const zklock_session_t *s);
/* The end of the session's lease (lease.c); false if none is known. */
bool zklock__lease_valid_until(const zklock_session_t *s, struct timespec *until);
/* With s->mu held, outside any event of the engine: if the lease ran out,
 * its holds end now (before the session thread notices: the host slept). */
void zklock__lease_check(zklock_session_t *s);
/* Would waiting for s's answers wait for the calling thread itself? */
bool zklock__on_completion_thread(const zklock_session_t *s);

/* ---- the engine (engine.c, contender.c, judge.c, fastpath.c, watch.c) ---------- */

#define ZKL_OWN_WATCH_DELAY_MS 50
zkl_contender_t *zklock__contender_new(zklock_t *l);
void zklock__step(zkl_contender_t *c);
void zklock__give_up(zkl_contender_t *c, int rc);
void zklock__detach(zkl_contender_t *c);
void zklock__reap(zkl_contender_t *c);
/* The contender of l's owner that is the caller (its thread, or the handle). */
zkl_contender_t *zklock__owner_contender(const zklock_t *l);

/* ---- owner.c: the owner's calls, blocking or asynchronous ------------------------ */

/* A done callback, allocated before its call starts so that it can always
 * be queued. */
struct zkl_done *zklock__done_new(zklock_t *l, zklock_done_fn fn, void *ctx);
void zklock__done_discard(struct zkl_done *d);
bool zklock__is_done_callback(const struct zkl_callback *cb);
/* Queues d with rc (an outcome known at once, or a call's). */
void zklock__done_queue(struct zkl_done *d, int rc);
/* Starts an acquisition by c's owner, told to done (asynchronous) or to
 * waiter (a blocked caller, who then calls zklock__call_wait), or to
 * nobody (both NULL). */
void zklock__acquire_start(zkl_contender_t *c, int timeout_ms, struct zkl_done *done,
                           struct zkl_waiter *waiter);
/* Starts the release of c's hold (the node's deletion), told likewise. */
void zklock__release_start(zkl_contender_t *c, struct zkl_done *done, struct zkl_waiter *waiter);
/* The engine: something about c changed; decides its call if it can. */
void zklock__call_check(zkl_contender_t *c);
/* Waits, with s->mu, for the outcome of the blocking call that `me` was
 * started with, and returns it. c may be freed once this returns (unless
 * the caller holds it otherwise): reap it. */
int zklock__call_wait(zkl_contender_t *c, struct zkl_waiter *me);
/* dir + "/" + name, malloc'ed; NULL if out of memory. */
char *zklock__child_path(const char *dir, const char *name);

/* ---- what a ZooKeeper answer says --------------------------------------------- */

/* Failures worth retrying once the connection is back: the request may or
 * may not have reached the server. */
static inline bool transient(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED ||
           rc == ZTHROTTLEDOP;
}

/* Answers that only say the session (or the handle) is going away: the
 * session code deals with those. */
static inline bool session_ending(int rc)
{
    return rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE || rc == ZAUTHFAILED;
}

/* ---- auth.c: credentials and ACLs -------------------------------------------- */

int zklock__auth_copy(zklock_session_t *s, const zklock_auth_t *auth, size_t n);
void zklock__auth_free(zklock_session_t *s);
/* Adds the credentials to s->zh (their verdict: s->auth_pending, auth_rc),
 * without waiting: a handle between two connection attempts takes them as
 * it connects (zklock__auth_confirm). */
int zklock__auth_send(zklock_session_t *s);
/* On each connection, with s->mu held: adds what the handle did not take
 * yet, and asks for the verdict if it is still to come (a refusal ends the
 * handle: ZOO_AUTH_FAILED_STATE). */
void zklock__auth_confirm(zklock_session_t *s);
/* *dst (a deep copy, freed with zklock__acl_free) for a ZKLOCK_ACL_* kind;
 * ZKLOCK_ACL_DEFAULT copies `inherited` (NULL: open). */
int zklock__acl_choose(struct ACL_vector *dst, int kind, const struct ACL_vector *custom,
                       const struct ACL_vector *inherited);
void zklock__acl_free(struct ACL_vector *v);

/* ---- handle.c: the lock handle every recipe shares ------------------------------ */

int zklock__lock_init(zklock_t *l, zklock_session_t *s, const char *path,
                  const zklock_opts_t *opts, enum zkl_tag curator_tag,
                  enum zkl_tag kazoo_tag);
/* A semaphore's leases: the first max (in queue order) hold, the rest wait. */
void zklock__queue_cap_holders(zklock_queue_t *q, int max);
/* A handle whose nodes exclude every other (a mutex, an election); kazoo's
 * naming is its Lock's. recipe: NULL for the default rules. */
int zklock__exclusive_new(zklock_t **out, zklock_session_t *s, const char *path,
                          const zklock_opts_t *opts, enum zkl_tag curator_tag,
                          const struct zkl_recipe *recipe);
/* Makes l's contenders queue in `queue` (copied), not in its path. */
int zklock__lock_queue_in(zklock_t *l, const char *queue);
/* Undoes zklock__lock_init for a handle that was never used. */
void zklock__lock_fini(zklock_t *l);
/* With s->mu held; the last reference frees the handle. */
void zklock__lock_unref(zklock_t *l);

/* ---- lock.c: the calls every recipe shares ------------------------------------- */

/* Releases what l holds, ends its calls and drops the user's reference
 * (zklock_free); returns the done callbacks to run before returning. */
struct zkl_callback *zklock__lock_retire(zklock_t *l);

#endif
