/*
 * zklock.h: ZooKeeper lock recipes for C.
 *
 * A lock is a directory node ("the lock path"); each contender creates an
 * ephemeral-sequential child, the lowest holds, every other contender watches
 * only the node that blocks it. The ZooKeeper session is the lease: when a
 * holder's session ends, its node vanishes and the next contender holds.
 * By default the nodes are named as Curator's InterProcessMutex names them,
 * so a C daemon and a JVM service can share one lock.
 *
 * Conventions used by every function below:
 *  - Return values: 0 (ZKLOCK_OK) on success, a negative code on failure
 *    (except where a function returns something else, e.g. a count).
 *    ZooKeeper's own codes (ZCONNECTIONLOSS, ZNOAUTH, ...) pass through
 *    unchanged; zklock's own codes are all <= ZKLOCK_ERRNO_BASE (-1000), so
 *    they cannot collide. zklock_strerror() describes both kinds.
 *  - Ownership: strings passed in are copied; nothing returned needs to be
 *    freed unless the function says so. Pointers documented as "borrowed"
 *    stay valid as long as the object they came from.
 *  - Threads: every function may be called from any thread, concurrently,
 *    except where noted (zklock_session_close() and zklock_free() must not
 *    race with other calls on the same object). Callbacks (on_state,
 *    on_lost, done, a follower's fn) run one at a time, in order, on the
 *    session's own callback thread (or, with ZKLOCK_DISPATCH_POLL, inside
 *    zklock_session_dispatch()), never with a zklock lock held. A slow
 *    callback delays the callbacks behind it, never the lease's heartbeats
 *    or a deadline (they have a thread of their own). In a
 *    callback the asynchronous calls (zklock_acquire_async,
 *    zklock_release_async, zklock_proclaim_async, zklock_leader_follow,
 *    zklock_follow_stop), zklock_cancel(), zklock_hold_count(),
 *    zklock_fence(), zklock_check_op(), a handle-owned zklock_release()
 *    (which returns at once) and, in on_lost, zklock_lost_token() work; a
 *    timed zklock_acquire() answers
 *    ZKLOCK_EDEADLK and a thread-owned one ZKLOCK_EOWNER; zklock_free()
 *    waits for nothing; zklock_session_close() must not be called
 *    (zklock(3), THREADS AND CALLBACKS). On ZooKeeper's completion thread
 *    (the application's own watchers and completions on the session's
 *    handle), zklock_acquire(), zklock_release() of a thread-owned hold and
 *    zklock_queue_read()/_wait(), which would wait for ZooKeeper's answer
 *    there, answer ZKLOCK_EDEADLK; zklock_free() waits for nothing;
 *    zklock_session_close() must not be called there.
 *  - No global state: every object hangs off a session.
 */
#ifndef ZKLOCK_H
#define ZKLOCK_H

#include <stddef.h>
#include <stdint.h>

/* libzklock is built on ZooKeeper's multi-threaded client (libzookeeper_mt),
 * whose API zookeeper.h declares only when THREADED is defined. */
#ifndef THREADED
#define THREADED 1
#endif
#include <zookeeper/zookeeper.h>

#include <zklock_version.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define ZKLOCK_API __attribute__((visibility("default")))
#else
#define ZKLOCK_API
#endif

/* ------------------------------------------------------------------------
 * Errors
 */

#define ZKLOCK_ERRNO_BASE (-1000)

/* X(name, value, message): the one table behind the codes and their text. */
#define ZKLOCK_ERRNO_MAP(X)                                                   \
    X(EINVAL, -1001, "invalid argument")                                      \
    X(ENOMEM, -1002, "out of memory")                                         \
    X(ETIMEDOUT, -1003, "timed out before the lock was acquired")             \
    X(EBUSY, -1004, "lock is held by another contender")                      \
    X(ENOTHELD, -1005, "lock is not held by the calling thread")              \
    X(ELOST, -1006, "lock was lost (session expired or lock node deleted)")   \
    X(ECANCELED, -1007, "acquire was canceled")                               \
    X(EDEADLK, -1008, "would deadlock: a read holder asked for the write "    \
                      "lock, or a call would wait for its own thread")        \
    X(ECLOSED, -1009, "session is closed")                                    \
    X(ENOSERVER, -1010, "no ZooKeeper server answered in time")               \
    X(ESYSTEM, -1011, "system error (see errno)")                             \
    X(ENOTSUP, -1012, "not supported by this build (e.g. TLS: the ZooKeeper " \
                      "C client was built without OpenSSL)")                  \
    X(EOWNER, -1013, "a thread-owned lock cannot be used asynchronously or "  \
                     "taken in a callback: use a handle-owned lock "          \
                     "(ZKLOCK_OWNER_HANDLE)")                                 \
    X(EUNSURE, -1014, "no word from ZooKeeper for nearly a session timeout: " \
                      "the session may have expired, so the lock may be taken") \
    X(EMISMATCH, -1015, "the semaphore's path holds another number of "       \
                        "leases than asked for (kazoo's check)")               \
    X(EWRAPPED, -1016, "the lock path's sequence counter ran out (2^31 "      \
                       "nodes made under it): delete and re-create the "      \
                       "path, or let an empty container be reaped")          \
    X(EDELETED, -1017, "the lock node was deleted by someone else: the "      \
                       "lock may be taken")                                  \
    X(ERESOLVE, -1018, "no name in the server list resolves (now): check "    \
                       "the names, or DNS")                                  \
    X(EMAXHOLD, -1019, "the hold reached its maximum (max_hold_ms): zklock "   \
                       "released it")

enum {
#define ZKLOCK_ERRNO_ENUM_(name, value, msg) ZKLOCK_##name = (value),
    ZKLOCK_ERRNO_MAP(ZKLOCK_ERRNO_ENUM_)
#undef ZKLOCK_ERRNO_ENUM_
    ZKLOCK_OK = 0 /* last: C89 allows no comma after the last enumerator */
};

/* The version of the library actually linked, e.g. "0.1.0" (compare with
 * ZKLOCK_VERSION, the version of the headers compiled against). Static
 * string: do not free. */
ZKLOCK_API const char *zklock_version(void);

/* A one-line description of rc: any zklock code, any ZooKeeper code
 * (ZOO_ERRORS), 0 ("ok"). Unknown codes give "unknown error". Static
 * string: do not free. Thread-safe. */
ZKLOCK_API const char *zklock_strerror(int rc);

/* The symbolic name of rc: "ZKLOCK_EBUSY", "ZCONNECTIONLOSS", "ZKLOCK_OK",
 * or "UNKNOWN". Static string: do not free. */
ZKLOCK_API const char *zklock_err_name(int rc);

/* ------------------------------------------------------------------------
 * Sessions
 *
 * A session owns one ZooKeeper session at a time. A session opened with
 * zklock_session_open() survives the loss of its ZooKeeper session: after
 * expiry it opens a new one by itself. The states reported to on_state are:
 */
enum {
    ZKLOCK_CONNECTED = 1,   /* a (new) ZooKeeper session is established */
    ZKLOCK_SUSPENDED = 2,   /* connection lost; the session may still be alive.
                               Holders cannot be sure they still hold. */
    ZKLOCK_RECONNECTED = 3, /* the same session is back: locks were kept */
    ZKLOCK_EXPIRED = 4      /* the session is gone and every lock with it;
                               CONNECTED follows when a new one is ready
                               (sessions from zklock_session_open only) */
};

/* "CONNECTED", "SUSPENDED", "RECONNECTED", "EXPIRED" or "UNKNOWN". */
ZKLOCK_API const char *zklock_state_name(int state);

typedef struct zklock_session zklock_session_t;

/* The most data zklock writes into one node (an identity): 1020 KiB. A
 * ZooKeeper server refuses a request larger than its jute.maxbuffer (1 MiB
 * less one byte by default) by dropping the connection, and the request
 * carries the node's path and ACL besides its data. */
#define ZKLOCK_DATA_MAX (1020 * 1024)

/* One credential for the session (ZooKeeper's zoo_add_auth): scheme
 * "digest" with data "user:password", say. data is bytes (len of them),
 * copied. */
typedef struct zklock_auth {
    const char *scheme;
    const void *data;
    size_t len;
} zklock_auth_t;

/* The ACL of the nodes zklock creates (the lock path's missing levels and
 * the lock nodes): zklock_session_opts_t.acl for a session's locks,
 * zklock_opts_t.acl for one lock. See docs/security.md for what an ACL can
 * and cannot protect. */
enum {
    ZKLOCK_ACL_DEFAULT = 0, /* a lock: its session's choice; a session: OPEN */
    ZKLOCK_ACL_OPEN = 1,    /* anyone may do anything (Curator's default) */
    ZKLOCK_ACL_CREATOR = 2, /* the identity that created a node may do
                               anything with it, anyone may read it; needs
                               credentials (auth) */
    ZKLOCK_ACL_CUSTOM = 3   /* acl_custom (copied; at most 2 KiB serialized) */
};

typedef struct zklock_session_opts {
    /* ZooKeeper session timeout asked of the server; 0 = 10000 ms. */
    int timeout_ms;
    /* Written into every lock node this session creates (copied);
     * NULL = "<hostname>:<pid>". At most ZKLOCK_DATA_MAX bytes. */
    const char *identity;
    /* Called on every state change (ZKLOCK_CONNECTED, ...), in order, on the
     * session's callback thread. May be NULL. */
    void (*on_state)(zklock_session_t *s, int state, void *ctx);
    void *ctx;
    /* How long zklock_session_open() waits for the first connection;
     * 0 = timeout_ms. */
    int connect_timeout_ms;
    /* Credentials added to every ZooKeeper session zklock opens (again after
     * each expiry) or adopts, before its first request. auth[0..nauth-1]
     * are copied. */
    const zklock_auth_t *auth;
    size_t nauth;
    /* The ACL of what this session's locks create (ZKLOCK_ACL_*) and, for
     * ZKLOCK_ACL_CUSTOM, the ACL itself (copied). */
    int acl;
    const struct ACL_vector *acl_custom;
    /* TLS (ZooKeeper's secure client port): PEM files of the CA, of this
     * client's certificate and of its key (and the key's password, or
     * NULL). All NULL: no TLS. Needs a ZooKeeper C client built with
     * OpenSSL: otherwise zklock_session_open() answers ZKLOCK_ENOTSUP. */
    const char *tls_ca, *tls_cert, *tls_key, *tls_key_password;
    /* Where callbacks run: ZKLOCK_DISPATCH_THREAD or ZKLOCK_DISPATCH_POLL
     * (see zklock_session_dispatch). */
    int dispatch;
    /* Nonzero: zklock_session_open() returns at once, and the session
     * connects in the background, trying again for as long as it lives
     * (also while no name of the server list resolves: every second). Calls
     * made meanwhile behave as during a reconnection: acquisitions wait
     * within their timeout, try-once and queue reads answer
     * ZCONNECTIONLOSS. on_state tells ZKLOCK_CONNECTED when it is up. */
    int background;
    /* What a hold of this session rests on (ZKLOCK_LEASE_*, below):
     * 0 = ZKLOCK_LEASE_STRICT. */
    int lease;
} zklock_session_opts_t;

/* zklock_session_opts_t.lease: what a hold costs the ensemble, and what it
 * promises (docs/design.md, "The two lease modes").
 *  ZKLOCK_LEASE_STRICT (the default): while the session holds, a
 *    heartbeat write every so often (a transaction the ensemble commits; a
 *    session that only waits sends none, its turn one);
 *    a holder cut off is told (on_lost, ZKLOCK_LOST_UNSURE) before the
 *    ensemble may expire its session, so before any other client can hold
 *    (zklock_valid_until()).
 *  ZKLOCK_LEASE_SESSION: no heartbeat writes at all: an idle holder costs
 *    the ensemble nothing but the client's pings, as with Curator and kazoo.
 *    A hold lasts while the client believes its session lives: it ends when
 *    a server says the session expired, or when the connection has been
 *    down for a whole session timeout (zklock's local expiry; on_lost,
 *    ZKLOCK_LOST_EXPIRED). The weaker promise: the ensemble expires a
 *    session a timeout after it last heard from the client, which may be
 *    well before the client notices the silence (ZooKeeper's C client
 *    declares a connection lost only after two thirds of the timeout
 *    without an answer), so a holder cut off MAY LEARN OF ITS LOSS AFTER
 *    ANOTHER CLIENT HOLDS THE LOCK. Protect what the lock guards with
 *    fencing tokens (zklock_fence(), zklock_check_op()). */
enum {
    ZKLOCK_LEASE_STRICT = 0,
    ZKLOCK_LEASE_SESSION = 1
};

/* zklock_session_opts_t.dispatch:
 *  ZKLOCK_DISPATCH_THREAD (the default): callbacks (on_state, on_lost, done)
 *    run on the session's own callback thread, one at a time, in order.
 *  ZKLOCK_DISPATCH_POLL: they are queued, and run only inside
 *    zklock_session_dispatch(), on the caller's thread, in order. Deadlines
 *    need no timer of the caller's: one that passes makes its done pending
 *    like any other outcome. */
enum {
    ZKLOCK_DISPATCH_THREAD = 0,
    ZKLOCK_DISPATCH_POLL = 1
};

/* Opens a session to the ZooKeeper ensemble `hosts` ("host:port,host:port",
 * optionally followed by a chroot "/path"; an IPv6 address bare, as
 * ZooKeeper's C client takes it: "::1:2181") and returns once the ZooKeeper
 * session is established, so that the first acquire never races the
 * connection; with opts->background, at once (the session connects by
 * itself). opts may be NULL (all defaults); it is copied.
 * Errors: ZKLOCK_EINVAL (NULL out, a malformed server list: no server, a
 * port missing or outside 1-65535, a host with blanks or brackets, an
 * invalid chroot; negative timeouts, an identity longer than
 * ZKLOCK_DATA_MAX, a credential without scheme, an unknown or malformed
 * acl, an incomplete set of TLS files, an unknown lease), ZKLOCK_ENOTSUP (TLS asked of a
 * client without it), ZKLOCK_ENOMEM, ZKLOCK_ESYSTEM, and, without
 * background only: ZKLOCK_ERESOLVE (no name of the list resolves now: a
 * wrong name, or DNS down; worth retrying, unlike ZKLOCK_EINVAL),
 * ZAUTHFAILED (the server rejected a credential, even if the connection
 * dropped before its answer), ZKLOCK_ENOSERVER (no server answered, or
 * gave its verdict on the credentials, within connect_timeout_ms). On
 * error *out is NULL and nothing is left behind. */
ZKLOCK_API int zklock_session_open(zklock_session_t **out, const char *hosts,
                                   const zklock_session_opts_t *opts);

/* Wraps a ZooKeeper handle the application already has (opened with
 * libzookeeper_mt). The handle stays the application's: zklock never closes
 * it. The application's global watcher must forward every event to
 * zklock_session_forward(), from the watcher itself.
 *
 * Expiry: like an opened session, an adopted one declares its ZooKeeper
 * session expired by itself when the connection has been down for a whole
 * session timeout (ZKLOCK_EXPIRED; holders get on_lost). Once a server has
 * confirmed the expiry (the handle's expiry event, forwarded), zklock no
 * longer touches the handle: the application may close it, open a new one
 * and hand it over with zklock_session_readopt(); lock handles carry on.
 * Until then waiting acquires keep waiting within their deadline, and a
 * try-once answers ZSESSIONEXPIRED. If the handle instead comes back to the
 * same session after zklock expired it locally, zklock starts afresh on it
 * (ZKLOCK_CONNECTED) and deletes what it had left there.
 *
 * zklock learns which thread is the handle's completion thread (where the
 * watcher runs) from one request it sends: a blocking zklock call made on
 * that thread would wait for itself, and answers ZKLOCK_EDEADLK instead.
 * docs/adopt.c shows the whole pattern.
 * Errors: ZKLOCK_EINVAL (NULL, an identity longer than ZKLOCK_DATA_MAX),
 * ZKLOCK_ENOMEM, ZKLOCK_ESYSTEM. */
ZKLOCK_API int zklock_session_adopt(zklock_session_t **out, zhandle_t *zh,
                                    const zklock_session_opts_t *opts);

/* Hands an adopted session the application's new handle zh (opened after
 * the old one's session expired). If the old session had not ended for
 * zklock yet, it ends now (ZKLOCK_EXPIRED, on_lost for every hold). From
 * this call on zklock never touches the old handle, and it deletes through
 * the new one whatever it may have left on the old session. Waiting acquires
 * queue again on the new session. Non-blocking.
 * Errors: ZKLOCK_EINVAL (NULL, s not adopted), ZKLOCK_ECLOSED. */
ZKLOCK_API int zklock_session_readopt(zklock_session_t *s, zhandle_t *zh);

/* For adopted handles: pass on what the application's global watcher
 * received (its `zh`, `type` and `state` arguments), from the watcher
 * itself. Events of other types are ignored, and so are events of any
 * handle but the one in use (an old handle after zklock_session_readopt()),
 * so it is safe to forward everything. Non-blocking. */
ZKLOCK_API void zklock_session_forward(zklock_session_t *s, zhandle_t *zh, int type,
                                       int state);

/* zklock_session_forward() without the handle: every event is taken to be
 * about the handle in use. Enough for an application that never readopts;
 * one that does must use zklock_session_forward() (or forward only events
 * of zklock_session_zhandle(s)). */
ZKLOCK_API void zklock_session_event(zklock_session_t *s, int type, int state);

/* The ZooKeeper handle in use (borrowed). For an opened session it changes
 * after ZKLOCK_EXPIRED, and is NULL while a new one is being set up; do not
 * close it. NULL if s is NULL or closed (see zklock_session_close() for how
 * long a closed s may be used). */
ZKLOCK_API zhandle_t *zklock_session_zhandle(zklock_session_t *s);

/* The id of the ZooKeeper session in use (as in a node's ephemeralOwner),
 * 0 while there is none (connecting, or renewing after an expiry) or if s
 * is NULL or closed (see zklock_session_close()). Non-blocking. */
ZKLOCK_API int64_t zklock_session_id(zklock_session_t *s);

/* Ends the session: threads waiting in zklock_acquire() on its locks return
 * ZKLOCK_ECLOSED, held locks end (their nodes are deleted), and for an
 * opened session the ZooKeeper handle is closed. Blocks until callbacks in
 * progress have returned. Must not be called from a zklock callback, nor
 * twice. s may be NULL.
 *
 * Lock handles created on s stay valid until zklock_free(), and may be freed
 * from other threads while this runs. On them, zklock_acquire() and
 * zklock_release() answer ZKLOCK_ECLOSED, zklock_fence() ZKLOCK_ELOST for a
 * lock that was held (else ZKLOCK_ENOTHELD), zklock_hold_count() 0 and
 * zklock_cancel() ZKLOCK_OK. s itself is freed when this has returned and the
 * last lock handle on it is freed: until then zklock_session_id() answers 0
 * and zklock_session_zhandle() NULL; afterwards s must not be used. */
ZKLOCK_API void zklock_session_close(zklock_session_t *s);

/* Counters for diagnostics and tests (monotonic since the session opened). */
typedef struct zklock_stats {
    uint64_t requests;      /* ZooKeeper requests sent */
    uint64_t watch_events;  /* node events received on zklock's watches */
    uint64_t wakeups;       /* waiting contenders woken by a watch event */
    uint64_t listings;      /* children listings of a lock path evaluated */
    uint64_t acquired;      /* successful first acquisitions (not reentrant) */
    uint64_t lost;          /* held locks reported through on_lost */
    uint64_t fast_acquired; /* acquisitions that needed no listing: the
                               handle had last held the lock alone */
    uint64_t revoke_told;   /* requests to let go told to an on_revoke */
} zklock_stats_t;

/* Copies the counters into *out. size must be sizeof(zklock_stats_t) of the
 * caller's header: the struct grows at its end, and a caller compiled
 * against an older header gets the counters it knows (against a newer one,
 * the counters this library does not have read 0). Errors: ZKLOCK_EINVAL
 * (NULL, or a size no version of the struct ever had). */
ZKLOCK_API int zklock_session_stats(zklock_session_t *s, zklock_stats_t *out,
                                    size_t size);

/* ------------------------------------------------------------------------
 * Locks
 *
 * zklock_t is the one handle type of every recipe. Each thread that acquires
 * it is a separate contender with its own node, except that a thread that
 * already holds it gets it again at once (reentrancy) and must release it
 * as often.
 */
typedef struct zklock zklock_t;

/* Who owns a hold (zklock_opts_t.owner).
 *  ZKLOCK_OWNER_THREAD (the default): each thread that acquires the handle
 *    is a contender of its own; a hold is its thread's: only that thread
 *    may release it, and only it sees it (hold count, fence).
 *  ZKLOCK_OWNER_HANDLE: the handle is one contender. Any thread, and any
 *    callback, may release its hold; acquiring it again while it is held
 *    counts up (the handle's hold count); an acquisition in progress makes
 *    another one answer ZKLOCK_EBUSY. The blocking calls work on it too,
 *    and the asynchronous ones (zklock_acquire_async, ...) only on it. A
 *    read/write lock's two views are then one owner (the downgrade and
 *    EDEADLK rules apply to the pair). */
enum {
    ZKLOCK_OWNER_THREAD = 0,
    ZKLOCK_OWNER_HANDLE = 1
};

/* Naming of the nodes a lock creates (zklock_opts_t.wire). Whatever the
 * choice, zklock orders every name it knows by its sequence number. */
enum {
    ZKLOCK_WIRE_CURATOR = 0, /* _c_<uuid>-lock-<seq>, _c_<uuid>-__READ__<seq>, -__WRIT__ */
    ZKLOCK_WIRE_KAZOO = 1    /* <hex uuid>__lock__<seq>, __rlock__ */
};

/* Why on_lost was called. */
enum {
    ZKLOCK_LOST_EXPIRED = ZSESSIONEXPIRED, /* the session ended */
    ZKLOCK_LOST_DELETED = ZKLOCK_EDELETED, /* someone deleted the lock node */
    ZKLOCK_LOST_UNSURE = ZKLOCK_EUNSURE,   /* the hold's lease ran out: the
                                              ensemble was not heard from for
                                              nearly a session timeout, and
                                              may now expire the session */
    ZKLOCK_LOST_MAX_HOLD = ZKLOCK_EMAXHOLD /* the hold lasted max_hold_ms:
                                              zklock deleted its node */
};

typedef struct zklock_opts {
    /* A hold is over without its owner's release: the session ended
     * (reason ZKLOCK_LOST_EXPIRED), someone else deleted the lock node
     * (ZKLOCK_LOST_DELETED), the lease ran out (ZKLOCK_LOST_UNSURE) or the
     * hold lasted max_hold_ms (ZKLOCK_LOST_MAX_HOLD, below). Called once
     * per lost hold, on the session's
     * callback thread, also when the owner's zklock_release() found the
     * loss first (it answers ZKLOCK_ELOST). When the node vanishes, zklock
     * asks the server whether the session is still alive before it says
     * which, so the reason is the real one (a process paused past its
     * session timeout sees its node deleted before it hears of the
     * expiry): the call can come one round trip after the hold count
     * dropped to 0. Not called for holds that zklock_session_close() or
     * zklock_free() end. May be NULL.
     * Terms: a blocking zklock_acquire() returns on its own thread, on_lost
     * runs among the session's callbacks, so an acquisition can return a
     * new hold of l (a new term) before the on_lost of an earlier hold of
     * l has run (with ZKLOCK_DISPATCH_POLL, always, until the loop
     * dispatches). That on_lost is queued before the later hold is
     * granted: it runs before the later acquisition's done callback, and
     * in the first zklock_session_dispatch() after the blocking call
     * returned. Inside on_lost, zklock_lost_token() gives the token of the
     * hold being reported: compare it with the token of the hold the
     * application acts on (zklock_fence() after the acquisition; for a
     * thread-owned l the callback's thread holds nothing, so keep that
     * token where the callback can read it). */
    void (*on_lost)(zklock_t *l, int reason, void *ctx);
    void *ctx;
    /* ZKLOCK_WIRE_CURATOR (default) or ZKLOCK_WIRE_KAZOO. */
    int wire;
    /* The ACL of what this lock creates: ZKLOCK_ACL_DEFAULT (the session's)
     * or another ZKLOCK_ACL_*, with acl_custom for ZKLOCK_ACL_CUSTOM. */
    int acl;
    const struct ACL_vector *acl_custom;
    /* Who holds: ZKLOCK_OWNER_THREAD or ZKLOCK_OWNER_HANDLE (below). */
    int owner;
    /* A maximum hold: 0 = none; negative: ZKLOCK_EINVAL at
     * creation. A hold that has lasted max_hold_ms, counted from its first
     * acquisition (hold count 0 -> 1; a reentrant acquisition does not
     * restart it), ends: the hold is over for its owner at once, zklock
     * deletes its node as a release would (at once if connected, else as
     * soon as the connection is back; nothing is left behind), and on_lost
     * runs with ZKLOCK_LOST_MAX_HOLD, on the session's callback thread,
     * as for any loss. The owner's later zklock_release() answers
     * ZKLOCK_ELOST (as after any loss); the next acquisition of the handle
     * is a new hold with a new clock. A hold released first, or ended by
     * zklock_free() or zklock_session_close(), gets no on_lost. Timed by
     * the session's own thread (no thread per lock), on ZKLOCK_CLOCK, and
     * answered by as the lease is: hold_count, fence, valid_until, check_op
     * and release look at it when called, whether that thread ran or not; the
     * node is deleted by this client, so a process that is stopped cannot
     * enforce it: its session timeout still bounds that case (design.md,
     * "Maximum hold"). Per recipe: each semaphore lease has its own clock;
     * a multi-lock's runs from the moment all its members are held, and
     * ends them all (a member's own max_hold_ms does not count while it is
     * held through the multi-lock); an election's leader resigns (its node
     * is deleted, the next participant leads), and may campaign again. */
    int max_hold_ms;
    /* Revocation, Curator's convention: someone asked this
     * lock's holder to let go (zklock_revoke(), Curator's
     * Revoker.attemptRevoke: "__REVOKE__" written into the holder's node).
     * Called once per request, with ctx, on the session's callback thread
     * like on_lost, only while the hold it is about is still held (a hold
     * released before the call runs is not told). Nothing is taken from
     * the holder: it decides (release, or not). A request written while l
     * still waited is told as the hold begins. A multi-lock is told (its
     * own on_revoke) of a request to any of its members; a semaphore's
     * lease as a mutex; an election's leader is asked to resign. NULL (the
     * default): requests are not listened to. Cost: none beyond the watch
     * every contender keeps on its own node, which a revocable holder sets
     * as its hold begins rather than once its node has lived 50 ms
     * (design.md, "Revocation").
     * A request written into the node is its data: it replaces the
     * holder's identity (zklock-ls shows __REVOKE__). */
    void (*on_revoke)(zklock_t *l, void *ctx);
    /* ---- the previous holder's fate (zklock_previous below) ---------------- */
    /* Nonzero: every hold records itself in the lock path's child
     * "zklock.previous" (a persistent node: design.md, "The previous
     * holder's fate"), so that the next holder learns how the previous one
     * left (zklock_previous): released, or not. When a turn comes, the
     * record is read and "held" written before the hold is the caller's;
     * a holder writes it again every half session timeout (its last sign
     * of life, which bounds an unclean end for the next holder's
     * lock-delay; in the strict lease mode a hold whose record cannot be
     * written for a lease is lost, ZKLOCK_LOST_UNSURE, and
     * zklock_valid_until() gives that end if it comes first); its release
     * deletes its node and writes "released" in one transaction; a waiter
     * that gives up deletes its node and writes that it never held, in one
     * transaction, so that when every contender tracks, the next holder's
     * answer is never ZKLOCK_PREV_UNKNOWN. Costs a read and a write when a
     * turn comes, two writes per session timeout while holding, a read
     * more when a waiter gives up. Mutexes only (other recipes answer
     * ZKLOCK_EINVAL), on a session that zklock opened (an adopted one:
     * ZKLOCK_EINVAL). */
    int track_previous;
    /* Milliseconds (>= 0; implies track_previous when > 0): after a
     * previous hold that ended unclean (ZKLOCK_PREV_UNCLEAN), nobody holds
     * before this long after that unclean end (the end of the dead holder's
     * lease, from its record); after an end of unknown fate
     * (ZKLOCK_PREV_UNKNOWN), this long after the first turn that read it
     * (an acquisition that gave up inside the delay recorded when), else
     * after the caller's turn, and never before the end an unclean one
     * would wait for, if the record names a holder that died holding. None
     * after a clean end or the first hold.
     * The turn waits, its node first in the
     * queue, but the hold is not the caller's during the delay: the
     * acquisition has not returned, zklock_hold_count() is 0, and a
     * zklock_release() or zklock_free() meanwhile gives the turn up (the
     * acquisition answers ZKLOCK_ECANCELED) and leaves the record as it
     * was. If the acquisition's timeout ends first (a try-once too), it
     * gives up at once with ZKLOCK_ETIMEDOUT, leaving the record as it was:
     * the next acquisition reads the same fate, the same token, the same
     * end of the delay (zklock_previous_info() says how long was left). A
     * max_hold_ms counts from the hold's start, after the delay. */
    int lock_delay_ms;
} zklock_opts_t;

/* A mutual-exclusion lock on `path` (absolute, no trailing or double slash,
 * no "." or ".." components, not under /zookeeper). The path's missing
 * levels are created as container nodes on first use, so the server removes
 * them once they are empty; with ZKLOCK_WIRE_KAZOO the path itself is made
 * persistent, as kazoo makes it. opts may be NULL; it is copied.
 * Errors: ZKLOCK_EINVAL (NULL, malformed path, unknown wire or acl), ZKLOCK_ECLOSED,
 * ZKLOCK_ENOMEM. Does not talk to ZooKeeper. */
ZKLOCK_API int zklock_mutex_new(zklock_t **out, zklock_session_t *s,
                                const char *path, const zklock_opts_t *opts);

/* Inside on_lost for l: *token = the fencing token of the hold being
 * reported (what zklock_fence() gave for it; for a multi-lock, the largest
 * of its members'), so that the callback can tell the loss of an earlier
 * hold from the loss of the one held now (see on_lost: "Terms").
 * Errors: ZKLOCK_EINVAL (NULL, or not called from inside an on_lost of l).
 * Non-blocking. */
ZKLOCK_API int zklock_lost_token(const zklock_t *l, int64_t *token);

/* ------------------------------------------------------------------------
 * The previous holder's fate (zklock_opts_t.track_previous)
 */

/* How the hold before the caller's ended (zklock_previous). */
enum {
    ZKLOCK_PREV_NONE = 1,    /* no record: no tracking holder held before,
                                nothing was seen ahead in the queue, and
                                the caller's node is the lock path's first */
    ZKLOCK_PREV_CLEAN = 2,   /* the previous holder released */
    ZKLOCK_PREV_UNCLEAN = 3, /* the previous holder's hold ended without a
                                release: its session expired, its node was
                                deleted, its process was killed */
    ZKLOCK_PREV_UNKNOWN = 4  /* a contender that writes no record (a Curator
                                or kazoo peer, a zklock one without
                                track_previous, or one that died between its
                                grant and its record) was seen ahead in the
                                queue, or a node was created between the
                                record's holder's and ours: someone may have
                                held in between without a record */
};

/* "none", "clean", "unclean", "unknown", or "?" for any other value.
 * Static string. */
ZKLOCK_API const char *zklock_previous_name(int how);

/* For the caller's current hold of l (a mutex made with track_previous or
 * lock_delay_ms): *how = ZKLOCK_PREV_*, and, if token is not NULL, *token =
 * the previous holder's fencing token (its node's czxid) where the record
 * names it (CLEAN, UNCLEAN), else 0. What it cannot know: a hold by a
 * contender that writes no record, begun and ended while no tracking
 * contender was queued (design.md). Errors: ZKLOCK_EINVAL (NULL, l does not
 * track), ZKLOCK_ENOTHELD (the caller holds nothing), ZKLOCK_ELOST.
 * Non-blocking. */
ZKLOCK_API int zklock_previous(const zklock_t *l, int *how, int64_t *token);

/* What an acquisition of a tracking mutex learnt when its turn came. */
typedef struct zklock_previous_info {
    int how;           /* ZKLOCK_PREV_*: how the hold before it ended */
    int64_t token;     /* that holder's fencing token (CLEAN, UNCLEAN), else 0 */
    int64_t delay_ms;  /* the lock-delay it still owed when its turn came (0: none) */
    int64_t waited_ms; /* ... how much of it it waited before it held */
    int64_t left_ms;   /* ... how much was left when it gave up inside it
                          (ZKLOCK_ETIMEDOUT; 0: it did not) */
} zklock_previous_info_t;

/* Copies into *info what the last acquisition of l (by any caller) whose
 * turn came learnt: the previous holder's fate and the lock-delay, whether
 * it went on to hold or gave up inside the delay (what `zklock -v` reports).
 * size is sizeof *info as the caller was compiled with: the struct only grows
 * at its end, as zklock_lock_stats_t. Errors: ZKLOCK_EINVAL
 * (NULL, a size this library never had, l does not track), ZKLOCK_ENOTHELD
 * (no acquisition of l has had its turn yet). Non-blocking, thread-safe. */
ZKLOCK_API int zklock_previous_info(const zklock_t *l, zklock_previous_info_t *info, size_t size);

/* ------------------------------------------------------------------------
 * Event loops: asynchronous calls (handle-owned locks)
 *
 * One rule for all of them (zklock_acquire_async, zklock_release_async,
 * zklock_proclaim_async): a call that its caller's own state or arguments
 * refuse (NULL, a thread-owned lock, a closed session, another call in
 * progress, an upgrade, a held member of a multi-lock, a hold it does not
 * have) starts nothing: it returns the error, as the blocking call would,
 * and done is never called. A call that started returns ZKLOCK_OK, and done
 * tells its outcome, also one known at once (a reentrant hold, a try-once
 * while disconnected, the release of a lost hold).
 */

/* What an asynchronous call ends with: l, and what the blocking call would
 * have returned. Called exactly once per started call, as a callback (see
 * the session's dispatch), never from inside the call that started it. */
typedef void (*zklock_done_fn)(zklock_t *l, int rc, void *ctx);

/* Starts acquiring l and returns at once: ZKLOCK_OK means started, and
 * done(l, rc, ctx) follows exactly once with what zklock_acquire(l,
 * timeout_ms) would have returned (ZKLOCK_OK, ZKLOCK_ETIMEDOUT, ZKLOCK_EBUSY
 * for a try-once, ZKLOCK_ECANCELED after zklock_cancel, ZKLOCK_ECLOSED,
 * ZCONNECTIONLOSS, ...). Any other return means not started: done is not
 * called. Errors: ZKLOCK_EINVAL (NULL l or done, timeout_ms < -1),
 * ZKLOCK_EOWNER (a thread-owned lock: set .owner = ZKLOCK_OWNER_HANDLE in
 * its zklock_opts_t), ZKLOCK_EBUSY (an acquisition of l is in progress, or
 * of the other view of its read/write lock, or of a member of the
 * multi-lock l), ZKLOCK_EDEADLK (l is the write view of a read/write lock
 * whose read view the handle holds; a multi-lock one of whose members is
 * held), ZKLOCK_ECLOSED (also: a member of the multi-lock l is being
 * freed), ZKLOCK_ENOMEM, ZAUTHFAILED. Non-blocking. */
ZKLOCK_API int zklock_acquire_async(zklock_t *l, int timeout_ms, zklock_done_fn done,
                                    void *ctx);

/* Releases one hold of the handle and returns at once (ZKLOCK_OK: started).
 * done (may be NULL) follows exactly once: ZKLOCK_OK once the server
 * confirmed the node's deletion (or at once for a hold that counts down),
 * ZKLOCK_ELOST if the hold was lost, ZKLOCK_ECLOSED, or, if l is freed
 * before the server answered, ZKLOCK_ECANCELED (the deletion goes on).
 * Errors: ZKLOCK_EINVAL (NULL), ZKLOCK_EOWNER (a thread-owned lock),
 * ZKLOCK_ENOTHELD, ZKLOCK_EBUSY (l is a member held through a multi-lock:
 * release that), ZKLOCK_ECLOSED, ZKLOCK_ENOMEM. Non-blocking. */
ZKLOCK_API int zklock_release_async(zklock_t *l, zklock_done_fn done, void *ctx);

/* With ZKLOCK_DISPATCH_POLL: a descriptor that is readable while callbacks
 * are pending (level-triggered: it stays readable until they have run).
 * Poll it for reading in the event loop and call zklock_session_dispatch().
 * Owned by s: do not close it. Errors: ZKLOCK_EINVAL (NULL, or a session
 * that dispatches on its own thread). */
ZKLOCK_API int zklock_session_fd(zklock_session_t *s);

/* With ZKLOCK_DISPATCH_POLL: runs the callbacks pending now, in order, on
 * the calling thread, and returns how many ran (0 if none). Callbacks they
 * queue wait for the next call. Must not be called from a callback.
 * Errors: ZKLOCK_EINVAL (NULL, a session that dispatches on its own
 * thread, or a call from inside a callback). */
ZKLOCK_API int zklock_session_dispatch(zklock_session_t *s);

/* Fills *op (ZooKeeper's zoo_op_t) with a check that the caller's hold of
 * l is still in place on the server (its node exists), for the caller's own
 * zoo_multi()/zoo_amulti(): the transaction commits only while the lock is
 * held, and fails with the server's error (ZNONODE) once the hold is lost.
 * The op points at a string owned by the hold: valid until the hold ends
 * (its release). Errors: ZKLOCK_EINVAL (NULL), ZKLOCK_ENOTHELD (the caller
 * does not hold l, also once the hold was lost). Non-blocking. */
ZKLOCK_API int zklock_check_op(zklock_t *l, zoo_op_t *op);

/* ZKLOCK_OK if path is a valid lock path (the rules above), ZKLOCK_EINVAL
 * otherwise. Does not talk to ZooKeeper. */
ZKLOCK_API int zklock_path_check(const char *path);

/* Acquires l for the calling thread (the handle, for a handle-owned lock),
 * waiting up to timeout_ms milliseconds
 * (-1 = forever, 0 = try once: one round trip, no waiting).
 * Returns 0 when held. Errors:
 *   ZKLOCK_EBUSY       try-once and someone else holds it; or (handle-owned)
 *                      an acquisition of l is already in progress
 *   ZKLOCK_EOWNER      a thread-owned lock, in a zklock callback
 *   ZKLOCK_ETIMEDOUT   the deadline passed
 *   ZKLOCK_ECANCELED   zklock_cancel() was called while waiting
 *   ZKLOCK_EDEADLK     (read/write lock) the thread holds only the read side
 *                      and asked for the write side; or the call was made on
 *                      ZooKeeper's completion thread (see zklock_session_adopt),
 *                      or with a timeout in a zklock callback
 *   ZKLOCK_ECLOSED     the session was closed
 *   ZKLOCK_EWRAPPED    the lock path's sequence counter ran out (2^31 - 1
 *                      nodes made under it), where Curator's and kazoo's
 *                      order is not zklock's (zklock(3), ON THE WIRE)
 *   ZKLOCK_EINVAL      l is NULL or timeout_ms < -1
 *   ZCONNECTIONLOSS    try-once while the connection is down
 *   ZSESSIONEXPIRED    try-once on an adopted session that expired and has
 *                      no new handle yet
 *   other ZooKeeper codes (e.g. ZNOAUTH) as the server answered; ZNONODE
 *                      when the session's chroot does not exist
 * Every failure leaves no node behind: the contender's node is deleted
 * before returning, or, if the connection is down at that moment, as soon
 * as it is back (or the session ends). While the connection is down a
 * waiting acquire waits for it within its deadline; after a session expiry
 * it queues again on the new session within its deadline. */
ZKLOCK_API int zklock_acquire(zklock_t *l, int timeout_ms);

/* Releases one hold of the calling thread (of the handle, for a
 * handle-owned lock: from any thread). The last release deletes the node and
 * returns once the server confirmed it; under connection loss it keeps
 * retrying until the server confirms or the session ends. A handle-owned
 * release made in a callback or on ZooKeeper's completion thread returns at
 * once: the hold is over, the node is deleted in the background.
 * Returns 0, or ZKLOCK_ENOTHELD (the thread does not hold l; nothing
 * changes), ZKLOCK_ELOST (the hold was lost before or during the release:
 * the session ended or the node was deleted by someone else; on_lost is
 * told too), ZKLOCK_EDEADLK (the last release, on ZooKeeper's completion
 * thread: nothing changes),
 * ZKLOCK_ECLOSED, ZKLOCK_EINVAL, or a ZooKeeper code such as ZNOAUTH when
 * the server refused the delete for good (the lock path's ACL changed): the
 * hold is over for this thread, but its node, and so the lock, stays until
 * the session ends. */
ZKLOCK_API int zklock_release(zklock_t *l);

/* How many times the calling thread holds l; 0 when it does not (or lost
 * it, also when its lease ran out: see zklock_valid_until()), negative on
 * error (ZKLOCK_EINVAL). Non-blocking. With ZKLOCK_LEASE_SESSION it counts
 * what the client believes: a hold lasts until the session is known to have
 * ended, which a holder cut off may learn after another client holds. */
ZKLOCK_API int zklock_hold_count(const zklock_t *l);

/* The clock zklock measures its leases and deadlines on, and the clock of
 * zklock_valid_until()'s time: CLOCK_BOOTTIME on Linux, CLOCK_MONOTONIC
 * elsewhere (<time.h>). CLOCK_BOOTTIME goes on while the host sleeps
 * (suspend, hibernation, a virtual machine saved and restored);
 * CLOCK_MONOTONIC stops, so a lease measured on it would outlive a sleep
 * longer than the session timeout. Compare zklock_valid_until() with
 * clock_gettime(ZKLOCK_CLOCK, &now), never with CLOCK_MONOTONIC (earlier
 * versions gave a CLOCK_MONOTONIC time). */
#if defined(__linux__)
#define ZKLOCK_CLOCK CLOCK_BOOTTIME
#else
#define ZKLOCK_CLOCK CLOCK_MONOTONIC
#endif

/* How long the caller's hold may still be acted on without hearing from the
 * ensemble: a ZKLOCK_CLOCK time (CLOCK_BOOTTIME on Linux: not
 * CLOCK_MONOTONIC, see above). zklock keeps the lease fresh while the
 * session holds (a write that needs a quorum half a session timeout after
 * the last one of its own answered: at most two per timeout); it is the
 * send time of the latest of its writes (creates, deletes, multis)
 * answered, plus the negotiated session timeout, minus a margin (a
 * twentieth of it) for clock-rate drift and delivery. A waiter keeps none:
 * its turn is granted at once on a lease heard from within half a timeout,
 * else once such a write has been answered (never on one that ran out). No server expires the session before then, so no other
 * client can hold the lock; when it passes without a fresher answer, the
 * hold is lost (on_lost, ZKLOCK_LOST_UNSURE) and its node is deleted as soon
 * as the session is heard from again. It is lost the moment the time
 * passes, whoever notices first: this call, zklock_hold_count(),
 * zklock_fence(), zklock_check_op() and zklock_release() answer by the
 * lease as it is when they are called (not held, ZKLOCK_ELOST), also right
 * after the host slept, before on_lost is told. docs/design.md has the
 * argument.
 * With ZKLOCK_LEASE_SESSION there is no lease, and the time is a belief,
 * not a promise: while connected, a session timeout from now (were the
 * connection lost this instant, zklock would end the hold no sooner);
 * while disconnected, zklock's local expiry (the moment the connection went,
 * plus the negotiated session timeout), when the hold ends unless the
 * session came back. The ensemble may have expired the session, and another
 * client taken the lock, before either: only fencing tokens protect what
 * the lock guards then.
 * Errors: ZKLOCK_EINVAL, ZKLOCK_ENOTHELD (not held, or lost). Non-blocking. */
struct timespec; /* <time.h>; declared here too for strict C89 users */
ZKLOCK_API int zklock_valid_until(const zklock_t *l, struct timespec *deadline);

/* The fencing token of the calling thread's hold: the creation zxid of its
 * node (a read hold taken by downgrade keeps the write hold's token), which
 * strictly increases with every new holder of the same lock
 * path. Pass it to storage that rejects a token lower than the highest it
 * has seen, so a holder that lost its lock without noticing is refused
 * (with ZKLOCK_LEASE_SESSION the only protection for a holder cut off: it
 * may be told after another client holds).
 * Errors: ZKLOCK_ENOTHELD, ZKLOCK_ELOST, ZKLOCK_EINVAL. Non-blocking. */
ZKLOCK_API int zklock_fence(const zklock_t *l, int64_t *token);

/* Makes every thread now waiting in zklock_acquire(l) return
 * ZKLOCK_ECANCELED (after removing its node). Later acquires are not
 * affected. Non-blocking; safe from callbacks. Errors: ZKLOCK_EINVAL. */
ZKLOCK_API int zklock_cancel(zklock_t *l);

/* The lock path given at creation (borrowed; valid until zklock_free). */
ZKLOCK_API const char *zklock_path(const zklock_t *l);

/* Frees l: cancels its waiters, waits for them to leave, releases every
 * hold still on it (deleting the nodes; waits for the server's confirmation
 * while connected) and frees the handle. l may be NULL. On ZooKeeper's
 * completion thread it waits for nothing: the deletes finish in the
 * background. Must not be called
 * while another thread may still start a call on l, nor on a borrowed view
 * of a read/write lock (free the read/write lock instead; this is ignored). */
ZKLOCK_API void zklock_free(zklock_t *l);

/* Contention on one lock handle, for operators and benchmarks: how often it
 * was acquired, gave up or was lost, how long its callers waited and how
 * long they held. Counted since the handle was made, on ZKLOCK_CLOCK, for
 * the calls that started (a call its caller's own state refuses, such as
 * ZKLOCK_EINVAL or ZKLOCK_EDEADLK, counts nowhere). */

/* Log-scale histogram buckets of a duration d, in milliseconds: bucket 0 is
 * d < 1 ms; bucket i (1 <= i <= 14) is 2^(i-1) ms <= d < 2^i ms; bucket 15
 * is d >= 2^14 ms (16.384 s). */
#define ZKLOCK_STATS_BUCKETS 16

typedef struct zklock_time_stats {
    uint64_t count;  /* durations measured */
    uint64_t sum_us; /* their sum, microseconds */
    uint64_t max_us; /* the longest, microseconds (0 if count is 0) */
    uint64_t buckets[ZKLOCK_STATS_BUCKETS]; /* sum of buckets[] = count */
} zklock_time_stats_t;

typedef struct zklock_lock_stats {
    /* A new hold granted: zklock_acquire() returned ZKLOCK_OK, or an
     * asynchronous acquisition's done was queued with it. An acquisition
     * of a hold the owner already has (hold count > 1) is not one: it
     * counts in reentered, and in no time. */
    uint64_t acquired;
    uint64_t reentered;
    uint64_t timeouts; /* gave up: ZKLOCK_ETIMEDOUT, or a try-once that
                          found the lock held (ZKLOCK_EBUSY) */
    uint64_t canceled; /* ZKLOCK_ECANCELED (zklock_cancel) */
    uint64_t failed;   /* ended with any other error (ZCONNECTIONLOSS,
                          ZKLOCK_ECLOSED, ZNOAUTH, ...) */
    uint64_t lost;     /* holds lost: each on_lost (also without an on_lost
                          set), as zklock_stats_t.lost counts them */
    /* From the call to the grant, for each acquisition. */
    zklock_time_stats_t wait;
    /* From the grant to the release that ended the hold (the last one of a
     * reentrant hold, when it starts) or to the loss, for each hold that
     * ended so; a hold in progress, or one ended by
     * zklock_session_close(), is not in it. */
    zklock_time_stats_t hold;
} zklock_lock_stats_t;

/* Copies l's statistics into *out. size must be sizeof(zklock_lock_stats_t)
 * of the caller's header: the struct grows at its end, as zklock_stats_t
 * does (a caller compiled against an older header gets the fields it knows;
 * against a newer one, the fields this library lacks read 0).
 * What counts, per kind of handle: a mutex, an election (a hold is a term
 * as leader), each view of a read/write lock (its own figures; a downgrade
 * is an acquisition of the read view), a semaphore (each lease is a hold),
 * a multi-lock as a whole (one acquisition, wait and hold for all its
 * members; the member handles count only what is acquired on them
 * directly). With ZKLOCK_OWNER_THREAD the figures are the sum over the
 * threads that use l.
 * Thread-safe: may be called from any thread, also while others acquire
 * and release l and in a callback; takes l's session mutex briefly. The
 * figures are one consistent snapshot. l stays the caller's; valid until
 * zklock_free(l), also after zklock_session_close().
 * Errors: ZKLOCK_EINVAL (NULL, or a size no version of the struct ever had). */
ZKLOCK_API int zklock_lock_stats(const zklock_t *l, zklock_lock_stats_t *out, size_t size);

/* ------------------------------------------------------------------------
 * Read/write locks
 *
 * Two views of one lock path: any number of threads (anywhere) may hold the
 * read side together; the write side excludes everyone. Contenders are
 * served in arrival order: a queued writer holds back the readers that
 * arrive after it (no writer starvation), while the readers that arrived
 * before it keep reading. A release wakes only the contenders it lets in.
 * Both views work with every zklock_t call (acquire, release, hold_count,
 * fence, cancel, on_lost); each side is reentrant per thread.
 *  - Downgrade: a thread holding the write side may take the read side at
 *    once; when it then releases the write side, no writer queued behind it
 *    gets in before its read hold ends. The read hold is made only beside
 *    the write hold's live node (else the read side queues as a plain
 *    reader), and is lost with it if the write hold is lost.
 *  - Upgrade is refused: a thread holding only the read side that asks for
 *    the write side gets ZKLOCK_EDEADLK at once.
 * On the wire: Curator's InterProcessReadWriteLock (_c_<uuid>-__READ__<seq>,
 * _c_<uuid>-__WRIT__<seq>), or kazoo's ReadLock/WriteLock with
 * ZKLOCK_WIRE_KAZOO.
 */
typedef struct zklock_rwlock zklock_rwlock_t;

/* Same arguments and errors as zklock_mutex_new(); opts (on_lost, wire)
 * apply to both views. */
ZKLOCK_API int zklock_rwlock_new(zklock_rwlock_t **out, zklock_session_t *s,
                                 const char *path, const zklock_opts_t *opts);

/* The read (shared) view. Borrowed: valid as long as rw; never pass it to
 * zklock_free(). NULL if rw is NULL. */
ZKLOCK_API zklock_t *zklock_rwlock_read(zklock_rwlock_t *rw);

/* The write (exclusive) view. Borrowed, like the read view. */
ZKLOCK_API zklock_t *zklock_rwlock_write(zklock_rwlock_t *rw);

/* Frees both views as zklock_free() frees a handle (waiters canceled, holds
 * released: the read side first). rw may be NULL. */
ZKLOCK_API void zklock_rwlock_free(zklock_rwlock_t *rw);

/* ------------------------------------------------------------------------
 * Counting semaphore
 *
 * At most max_leases holders at once, anywhere. A lease is an ordinary
 * zklock_t: one per thread (or per handle, ZKLOCK_OWNER_HANDLE), reentrant
 * (a thread holding it gets it again at once, with a hold count);
 * zklock_acquire, zklock_release, their asynchronous forms, hold_count,
 * fence (the lease node's creation zxid), valid_until, check_op, cancel,
 * on_lost and zklock_free behave as for the mutex. To hold two leases, use
 * two handles. Waiters are served in arrival order, and a release wakes one
 * of them. A holder whose session expires loses its lease (on_lost) and the
 * server frees it; a timed-out, canceled or refused acquisition leaves no
 * node behind.
 * On the wire: Curator's InterProcessSemaphoreV2 (<path>/leases/
 * _c_<uuid>-lease-<seq>, taken under the InterProcessMutex <path>/locks), or
 * kazoo's Semaphore with ZKLOCK_WIRE_KAZOO (<path>/<uuid hex>, under the
 * kazoo Lock <path>-__lock__; <path>'s data holds max_leases). Every party
 * on one path must use the same max_leases: kazoo's layout checks it,
 * Curator's has nowhere to keep it.
 */
#define ZKLOCK_SEMAPHORE_MAX 65535

/* Errors as zklock_mutex_new(), and ZKLOCK_EINVAL for max_leases outside
 * 1..ZKLOCK_SEMAPHORE_MAX. With ZKLOCK_WIRE_KAZOO, an acquisition fails with
 * ZKLOCK_EMISMATCH if the path says another number of leases (read at
 * every acquisition). */
ZKLOCK_API int zklock_semaphore_new(zklock_t **out, zklock_session_t *s, const char *path,
                                    int max_leases, const zklock_opts_t *opts);

/* ------------------------------------------------------------------------
 * Leader election
 *
 * An election on path is an ordinary zklock_t: zklock_acquire campaigns (it
 * returns once this participant leads, within the timeout), zklock_release
 * resigns (the next participant leads at once: it was watching this one's
 * node), on_lost says the leadership was lost (session expired, node
 * deleted), zklock_fence gives the leader's token (it grows with every new
 * leader), cancel, the asynchronous calls and ownership work as for the
 * mutex. The participants are served in arrival order. The leader's node
 * holds the session identity until it proclaims something else; every new
 * term starts with the identity again. Leadership is granted only on a node
 * of the current ZooKeeper session (never on one of an old session, nor on
 * one a lost reply may have made for someone else), and a participant whose
 * session expired is told (on_lost) before a later term of its handle is
 * granted; a blocking campaign can return before that on_lost has run, and
 * zklock_lost_token() in on_lost says which term it reports.
 * On the wire: Curator's LeaderLatch (<path>/_c_<uuid>-latch-<seq>), or
 * kazoo's Election (a kazoo Lock: <path>/<hex>__lock__<seq>) with
 * ZKLOCK_WIRE_KAZOO. Curator's LeaderSelector is an InterProcessMutex: a
 * zklock mutex on its path takes part in it.
 */

/* Same arguments and errors as zklock_mutex_new(). */
ZKLOCK_API int zklock_election_new(zklock_t **out, zklock_session_t *s, const char *path,
                                   const zklock_opts_t *opts);

/* The leader publishes value[0..len) (its address, say) in its node, for
 * observers (zklock_leader, zklock_queue_wait), without a new election.
 * value is copied. Blocks for one round trip: it is
 * zklock_proclaim_async() that waits. Errors: ZKLOCK_EINVAL (l not an
 * election, value NULL with len > 0, len > ZKLOCK_DATA_MAX),
 * ZKLOCK_ENOTHELD (the caller does not lead), ZKLOCK_ELOST (its leadership
 * was lost, also while proclaiming), ZKLOCK_EDEADLK (on ZooKeeper's
 * completion thread), ZCONNECTIONLOSS (not connected now, or the connection
 * dropped before the answer: the value may or may not be set),
 * ZKLOCK_ECLOSED (the session is closed, also while proclaiming),
 * ZooKeeper's codes (ZNOAUTH). */
ZKLOCK_API int zklock_proclaim(zklock_t *l, const void *value, size_t len);

/* zklock_proclaim() without waiting, for a handle-owned election
 * (ZKLOCK_OWNER_HANDLE): returns at once. ZKLOCK_OK means started, and
 * done(l, rc, ctx) follows exactly once, as a callback (see the session's
 * dispatch), never from inside this call, with what zklock_proclaim()
 * would have returned: ZKLOCK_OK (the server has the value), ZKLOCK_ELOST
 * (the leadership was lost, before the call or while proclaiming),
 * ZCONNECTIONLOSS (not connected now, or dropped before the answer),
 * ZooKeeper's codes (ZNOAUTH), ZKLOCK_ECLOSED (the session was closed
 * first), or ZKLOCK_ECANCELED (l was freed first: zklock_free() runs done
 * before it returns). Any other return means not started, and done is not
 * called: ZKLOCK_EINVAL (as zklock_proclaim(), or done NULL), ZKLOCK_EOWNER
 * (a thread-owned election), ZKLOCK_ENOTHELD (l does not lead),
 * ZKLOCK_ECLOSED, ZKLOCK_ENOMEM. value is copied before it returns.
 * Non-blocking: may be called anywhere, in a callback and on ZooKeeper's
 * completion thread too. */
ZKLOCK_API int zklock_proclaim_async(zklock_t *l, const void *value, size_t len,
                                     zklock_done_fn done, void *ctx);

/* The leader of the election at path, as any client sees it (zklock's,
 * Curator's LeaderLatch or LeaderSelector, kazoo's Election): *value its
 * node's data (malloc'ed and NUL-terminated, the caller frees it; NULL if
 * nobody leads, also when path does not exist), *len its length and *token
 * the leader's token (len and token may be NULL). Creates nothing; two
 * pipelined round trips. Errors as zklock_queue_read(), and ZKLOCK_EINVAL
 * for a NULL value. To follow the leader without polling or blocking:
 * zklock_leader_follow() below (a thread may also wait with
 * zklock_queue_wait(), which returns when the first node's data changes). */
ZKLOCK_API int zklock_leader(zklock_session_t *s, const char *path, char **value, size_t *len,
                             int64_t *token);

/* Following the leader without a thread (an event loop's standby): fn is
 * called with the leader now, then at every change: a new leader, a new
 * value proclaimed, nobody leading. */
typedef struct zklock_follow zklock_follow_t;

/* What a follower is told, as a callback of its session (on the session's
 * thread, or inside zklock_session_dispatch() with ZKLOCK_DISPATCH_POLL),
 * in order with the others. path: the election's (borrowed). value, len:
 * the leader's node's data as zklock_leader() gives it (borrowed for the
 * call; value[len] is a NUL), token its token. value NULL: nobody leads
 * (token 0, also while the path does not exist), or the follower cannot
 * read the election: token is then why, a negative code (ZNOAUTH: the
 * path's ACL; ZAUTHFAILED: the session's credentials were rejected, and
 * nothing more follows); it is told once, the follower tries again every
 * second, and what it then reads is told as a change. */
typedef void (*zklock_leader_fn)(const char *path, const void *value, size_t len,
                                 int64_t token, void *ctx);

/* Starts following the leader of the election at path (any client's, as
 * zklock_leader() reads it) and returns at once with *out: fn(path, ...,
 * ctx) follows as soon as the leader is read (once the session is
 * connected), then at every change, never from inside this call. A change
 * is told only once seen: a leader that comes and goes between two looks may
 * not be. The follower watches only what can change its answer (the
 * leader's node, or, while nobody leads, the path), so a queue's churn behind
 * its leader wakes no follower; it looks again after a reconnection and on
 * the next ZooKeeper session after an expiry, telling fn only what changed.
 * A closed session is freed only once its last follower is stopped (as
 * once its last lock handle is freed). Non-blocking: may be called
 * anywhere, in a callback too. Errors: ZKLOCK_EINVAL (NULL s, fn or out, a
 * malformed path), ZKLOCK_ECLOSED, ZKLOCK_ENOMEM. */
ZKLOCK_API int zklock_leader_follow(zklock_session_t *s, const char *path, zklock_leader_fn fn,
                                    void *ctx, zklock_follow_t **out);

/* Stops following and frees f: fn is never called after this returns, and a
 * call of fn running on another thread has returned by then (in a callback,
 * fn may stop its own follower, or another: nothing is waited for; on
 * ZooKeeper's completion thread, a call running elsewhere is not waited
 * for). zklock_session_close() stops telling fn (a call running then is
 * waited for, as every callback), but f must still be stopped, also after
 * the close. f may be NULL. Must not race with another stop of f. */
ZKLOCK_API void zklock_follow_stop(zklock_follow_t *f);

/* ------------------------------------------------------------------------
 * Multi-lock: several locks, all or none
 *
 * zklock_acquire(m, timeout_ms) takes every member within one deadline, or
 * returns an error with none of them held and nothing of the attempt left
 * on the server (when connected; else removed in the background).
 * zklock_release(m) releases them all. While m is held by a thread (or, for
 * a handle-owned m, by the handle), each member is held by that thread too
 * (hold count 1; handle-owned members by their handle), so zklock_fence(
 * member) gives that member's token; zklock_release(member) answers
 * ZKLOCK_EBUSY then (release m). While m is being acquired, a member is not
 * held by its owner, even once its own turn came: hold count 0,
 * zklock_fence, _valid_until, _check_op and _release answer
 * ZKLOCK_ENOTHELD, zklock_acquire by that owner ZKLOCK_EBUSY (also of the
 * other view of a member's read/write lock: no downgrade of a hold not
 * begun; and of another multi-lock with that member).
 * zklock_fence(m) gives the largest token of the members;
 * zklock_check_op(m) answers ZKLOCK_EINVAL (check the members).
 * hold_count, valid_until, cancel, the asynchronous calls and on_lost work on
 * m as on any zklock_t; if a member's hold is lost, m's is (on_lost of m, and
 * of the member), and the other members are released. A member's on_lost
 * tells only of a hold that was part of m's: a member that held while m
 * still waited, and lost that hold, is not reported (m queues it again).
 *
 * Deadlock-free: m puts a node in every member's queue with one ZooKeeper
 * transaction, so two multi-locks are queued in the same order in every queue
 * they share, whatever order their members were named in; semaphore members
 * take their lease afterwards, one at a time in path order. Acquiring m while
 * holding one of its members is refused (ZKLOCK_EDEADLK): waiting for the
 * rest while holding it could deadlock. The read/write lock's rules hold for
 * views inside m (an upgrade is ZKLOCK_EDEADLK; a write hold then its read
 * view is a downgrade).
 */
#define ZKLOCK_MULTI_MAX 64

/* locks[0..n-1]: 1..ZKLOCK_MULTI_MAX handles of one session (mutexes,
 * semaphores, read or write views; not multi-locks), in any order. m does
 * not own them: free m first, then them (a member freed first stays
 * referred to, and held if m holds it, until m is freed). opts: on_lost,
 * ctx and owner apply to m; the members keep their own. Errors:
 * ZKLOCK_EINVAL (out NULL, n out of range, a NULL member, members of
 * different sessions, two members on one queue: the same handle twice, both
 * views of one read/write lock, a mutex and a view on one path),
 * ZKLOCK_ENOMEM, ZKLOCK_ECLOSED. */
ZKLOCK_API int zklock_multi_new(zklock_t **out, zklock_t *const locks[], size_t n,
                                const zklock_opts_t *opts);

/* ------------------------------------------------------------------------
 * Inspecting a lock: who holds it, who waits (any recipe, any client)
 */

/* One lock node of a queue. Strings are borrowed from the queue. */
typedef struct zklock_node {
    const char *name;     /* the child's name */
    const char *kind;     /* "mutex", "read", "write", "lease", "latch"
                             (Curator's names), "kazoo-lock", "kazoo-read",
                             "kazoo-lease" (kazoo's) */
    int shared;           /* 1 for readers */
    int holds;            /* 1 if it holds the lock now, 0 if it waits */
    int32_t seq;          /* the server's sequence number */
    int64_t token;        /* fencing token: the node's creation zxid */
    int64_t session;      /* the session that owns it (ephemeralOwner) */
    int64_t ctime_ms;     /* creation time, ms since the epoch (server clock) */
    const char *identity; /* the node's data as text ("" if none) */
} zklock_node_t;

typedef struct zklock_queue {
    const char *path;           /* the lock path */
    int exists;                 /* 0 if the lock path does not exist */
    int64_t version;            /* the lock path's child version */
    size_t count;               /* lock nodes, in queue order */
    const zklock_node_t *nodes;
    size_t ignored;             /* children that are not lock nodes */
} zklock_queue_t;

/* Reads the queue of the lock at path (two pipelined round trips) into a
 * new *out, which the caller frees with zklock_queue_free(). Nodes are in
 * the order zklock serves them; `holds` applies zklock's rule (readers
 * share, everything else excludes). A missing lock path gives an empty
 * queue with exists = 0. Errors: ZKLOCK_EINVAL, ZKLOCK_ECLOSED,
 * ZKLOCK_ENOMEM, ZCONNECTIONLOSS (not connected now), ZKLOCK_EDEADLK (on
 * ZooKeeper's completion thread), ZooKeeper's codes. */
ZKLOCK_API int zklock_queue_read(zklock_session_t *s, const char *path, zklock_queue_t **out);

/* Waits until the queue differs from `since` (a node came or went, or the
 * lock path appeared or vanished, or the data of its first node changed: an
 * election's leader proclaimed a value), the session's ZooKeeper session
 * ends, or timeout_ms passes (-1: no limit). Returns 0 when something changed (read
 * it again), ZKLOCK_ETIMEDOUT, or the errors of zklock_queue_read(). */
ZKLOCK_API int zklock_queue_wait(zklock_session_t *s, const zklock_queue_t *since,
                                 int timeout_ms);

/* Frees a queue from zklock_queue_read(). q may be NULL. */
ZKLOCK_API void zklock_queue_free(zklock_queue_t *q);

/* Reads a semaphore's leases and the contenders waiting for one, as
 * zklock_queue_read() does (same errors; the caller frees both). *leases:
 * a node per lease (kind "lease" or "kazoo-lease"), with holds = 1 for the
 * first max_leases of them: a newer one is a contender that made its node
 * and waits for a lease to free (Curator's order; there is at most one such
 * contender at a time); count the nodes that hold to know how many leases
 * are taken. *waiting: the semaphore's acquisition lock's queue (kind
 * "mutex" or "kazoo-lock"): its first node belongs to the contender taking
 * a lease now, every other to a contender waiting its turn. Either out may be
 * NULL (not both); sem must come from zklock_semaphore_new() (else
 * ZKLOCK_EINVAL). Blocks for up to four round trips. */
ZKLOCK_API int zklock_semaphore_read(zklock_t *sem, zklock_queue_t **leases,
                                     zklock_queue_t **waiting);

/* ------------------------------------------------------------------------
 * Revocation: asking a lock's holder to let go (Curator's convention)
 */

/* Asks the current holder(s) of the lock at lock_path to let go, by
 * writing "__REVOKE__" into their nodes (any version), as Curator's
 * Revoker.attemptRevoke does: a zklock holder with on_revoke is told, and
 * so is a Curator holder that called makeRevocable(). It is a request:
 * nothing is taken, a holder that does not listen keeps holding, and the
 * request stays in the node (its data, where the holder's identity was)
 * until the node goes. Who is asked: the first node of a mutex's queue or
 * a write holder, every read holder of a read/write lock, the leader of
 * an election (zklock's, Curator's LeaderLatch/LeaderSelector, kazoo's),
 * every lease taken of a semaphore at lock_path (Curator's layout:
 * <lock_path>/leases, less a lease node of the contender at the head of
 * its acquisition line, which still waits; kazoo's: the leases under
 * lock_path), as zklock-ls shows them. *asked (may be NULL) is how many
 * nodes were written; 0 when nobody holds (also when lock_path does not
 * exist): not an error. A holder that leaves between the read and the
 * write is not counted. Blocking: a queue read (two round trips, four for
 * a semaphore) then one write per holder; no asynchronous variant. Errors:
 * ZKLOCK_EINVAL (NULL s, a malformed lock_path), ZKLOCK_ECLOSED,
 * ZKLOCK_EDEADLK (on ZooKeeper's completion thread), ZKLOCK_ENOMEM,
 * ZCONNECTIONLOSS (not connected, or the connection dropped: some holders
 * may have been asked, *asked counts those known), ZooKeeper's codes
 * (ZNOAUTH: a node's ACL forbids the write). Thread-safe. */
ZKLOCK_API int zklock_revoke(zklock_session_t *s, const char *lock_path, int *asked);

/* zklock_revoke() that says whom it asked: *asked (never NULL; the caller
 * frees it with zklock_queue_free(), also after an error) is a queue of
 * the nodes written, in queue order, each with the data it held before
 * (its holder's identity) and holds = 1; count 0 if nobody held. On an
 * error it has the nodes asked before it (NULL if the queue could not be
 * read). Same errors as zklock_revoke(),
 * and ZKLOCK_EINVAL for a NULL asked. Blocking. */
ZKLOCK_API int zklock_revoke_nodes(zklock_session_t *s, const char *lock_path,
                                   zklock_queue_t **asked);

#ifdef __cplusplus
}
#endif

#endif /* ZKLOCK_H */
