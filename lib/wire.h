/*
 * wire.h: the one seam between zklock and the world (wire.c is the real
 * one): ZooKeeper, the clocks, the waits and the threads.
 *
 * A session talks to ZooKeeper, reads the time, waits and starts threads
 * only through the table of functions it was opened on (s->wire, with
 * s->wire_env): zklock_session_open and zklock_session_adopt use
 * zklock__real_wire, which wraps libzookeeper_mt, clock_gettime,
 * pthread_cond_(timed)wait and pthread_create; a simulator opens sessions
 * on a table of its own (zklock__session_open_on) and links the library's
 * objects statically (libzklock-core.la). Nothing else in lib/ or recipes/
 * names a ZooKeeper call, a clock or a thread (ZooKeeper's op builders
 * aside, zoo_*_op_init, which fill a multi's ops and talk to nobody).
 *
 * THE CONTRACT (what the library does, and what it expects of a table):
 *
 * Requests. Every function from acreate to amulti takes exactly the
 * arguments of libzookeeper_mt's zoo_a* call of the same name, and answers
 * as it does: ZOK if the request is queued, and then its completion is
 * called exactly once, later; any other code if it is refused (nothing is
 * queued, the completion is never called). The library calls them with the
 * session mutex (s->mu) held, so they must not wait for anything that may
 * need s->mu, and must never call a completion or a watcher before they
 * return. The buffers they are given (paths, data, ACLs, a multi's ops) are
 * the caller's only for the call: a table copies what it keeps. A multi's
 * `results` array, and the buffers of its create ops (zoo_create_op_init's
 * path_buffer), are the caller's until the completion, which finds them
 * filled in. Requests of one handle are answered in the order they were
 * queued (ZooKeeper's order per session), and a handle's watch event for a
 * node comes before the answer to any later request that saw the change.
 *
 * Completions and watchers. They are called with no zklock mutex held, on
 * the table's delivery thread (libzookeeper_mt's completion thread; a
 * simulator's own thread), one at a time: each takes s->mu itself, records
 * what it learnt, runs the engine's driver once and returns. They may call
 * any request function of the table (with s->mu held, as always), never a
 * wait. Payloads they are given (a name, a listing, data, a Stat) are
 * borrowed for the call. A watcher registered with a context is called
 * with that context, once per registration, for a node event
 * (ZOO_*_EVENT) and possibly for session events (type ZOO_SESSION_EVENT),
 * which zklock ignores there. The handle's own watcher (the `fn` of init)
 * hears of the session's states (ZOO_CONNECTED_STATE, ZOO_CONNECTING_STATE,
 * ZOO_EXPIRED_SESSION_STATE, ZOO_AUTH_FAILED_STATE) with the `context` init
 * was given. After close(zh) returns, nothing of zh is called any more: it
 * may call the handle's outstanding completions (rc ZCLOSING) on the
 * calling thread before it returns, or drop them (libzookeeper_mt drops
 * those its completion thread has not reached); the library copes with
 * either. close is called without s->mu.
 *
 * The session's life. init and init_ssl are zookeeper_init and
 * zookeeper_init_ssl with the table's env first; init is called with s->mu
 * held (the handle's first events wait for it in the session's watcher), so
 * it must not deliver anything itself. resolve (without s->mu) says whether
 * a name of the host list resolves now (0), before init is tried. state,
 * recv_timeout, client_id, add_auth and set_servers_resolution_delay are
 * libzookeeper's, called with s->mu held. remove_watches is
 * zoo_remove_watches, with `local` set: it takes a registration back at
 * once, or answers ZNOWATCHER if the event is already on its way (then the
 * watcher is still called).
 *
 * Time. clock(env, which, ts) reads ZKLOCK_CLOCK (every deadline, the
 * lease, the timers: it counts the host's sleep) or CLOCK_MONOTONIC (what a
 * condition variable waits on: it does not). A simulator moves them apart
 * to play a host that slept. Nothing in the library reads another clock.
 *
 * Waits. cond_wait(env, cond, mu, at) is pthread_cond_wait (at NULL) or
 * pthread_cond_timedwait on CLOCK_MONOTONIC (at: absolute, on that clock,
 * as the clock hook reads it): mu is held on entry and on return, and the
 * call may return early for no reason (the caller looks again). A
 * simulator on one thread returns after running, with mu released, what
 * the world does next (an answer, an event, a due timer, a callback), so a
 * blocking call made on its thread finds its outcome. ETIMEDOUT once at has
 * passed, else 0.
 *
 * Threads. thread_start(env, t, run, arg) starts run(arg) on a thread of
 * its own (0), or declines (ZKL_WIRE_NO_THREAD): then the table's owner
 * does that work itself, on its own thread, through the turns below; or
 * fails (any other value). thread_join waits for a thread it started. A
 * session starts two: the session thread (its timers, a new handle after an
 * expiry) and, with ZKLOCK_DISPATCH_THREAD, the callback thread.
 *
 * Randomness. seed(env, state), if not NULL, seeds the generator of the
 * session's node names (the uuid in each name: two 64-bit words, not both
 * zero; 0, or ZKLOCK_ESYSTEM): a simulator gives the same names for the
 * same seed. NULL: the system's randomness (getrandom).
 *
 * in_completion(env), if not NULL, says whether the calling thread is
 * delivering one of the table's completions or watchers right now: a
 * blocking call there would wait for itself (ZKLOCK_EDEADLK). NULL: the
 * session learns the delivery thread from its own answers (one thread per
 * handle, libzookeeper_mt's).
 */
#ifndef ZKLOCK_WIRE_H
#define ZKLOCK_WIRE_H

#include "common.h"

/* thread_start's answer when the table runs that work itself. */
#define ZKL_WIRE_NO_THREAD 1

struct zkl_wire {
    /* ---- the session's life ---------------------------------------------------- */
    zhandle_t *(*init)(void *env, const char *host, watcher_fn fn, int recv_timeout,
                       const clientid_t *clientid, void *context, int flags);
    /* NULL: no TLS (zklock_session_open answers ZKLOCK_ENOTSUP). */
    zhandle_t *(*init_ssl)(void *env, const char *host, const char *cert, watcher_fn fn,
                           int recv_timeout, const clientid_t *clientid, void *context,
                           int flags);
    int (*resolve)(void *env, const char *hosts);
    int (*close)(zhandle_t *zh);
    int (*state)(zhandle_t *zh);
    int (*recv_timeout)(zhandle_t *zh);
    const clientid_t *(*client_id)(zhandle_t *zh);
    int (*add_auth)(zhandle_t *zh, const char *scheme, const char *cert, int cert_len,
                    void_completion_t completion, const void *data);
    int (*set_servers_resolution_delay)(zhandle_t *zh, int delay_ms);

    /* ---- requests (zoo_a*: the same arguments, the same answers) ---------------- */
    int (*acreate)(zhandle_t *zh, const char *path, const char *value, int valuelen,
                   const struct ACL_vector *acl, int mode, string_completion_t completion,
                   const void *data);
    int (*acreate2)(zhandle_t *zh, const char *path, const char *value, int valuelen,
                    const struct ACL_vector *acl, int mode,
                    string_stat_completion_t completion, const void *data);
    int (*adelete)(zhandle_t *zh, const char *path, int version, void_completion_t completion,
                   const void *data);
    int (*aexists)(zhandle_t *zh, const char *path, int watch, stat_completion_t completion,
                   const void *data);
    int (*awexists)(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcher_ctx,
                    stat_completion_t completion, const void *data);
    int (*aget)(zhandle_t *zh, const char *path, int watch, data_completion_t completion,
                const void *data);
    int (*awget)(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcher_ctx,
                 data_completion_t completion, const void *data);
    int (*aset)(zhandle_t *zh, const char *path, const char *buffer, int buflen, int version,
                stat_completion_t completion, const void *data);
    int (*aget_children)(zhandle_t *zh, const char *path, int watch,
                         strings_completion_t completion, const void *data);
    int (*aget_children2)(zhandle_t *zh, const char *path, int watch,
                          strings_stat_completion_t completion, const void *data);
    int (*awget_children2)(zhandle_t *zh, const char *path, watcher_fn watcher,
                           void *watcher_ctx, strings_stat_completion_t completion,
                           const void *data);
    int (*async)(zhandle_t *zh, const char *path, string_completion_t completion,
                 const void *data);
    int (*amulti)(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
                  void_completion_t completion, const void *data);
    int (*remove_watches)(zhandle_t *zh, const char *path, ZooWatcherType wtype,
                          watcher_fn watcher, void *watcher_ctx, int local);

    /* ---- time, waits, threads --------------------------------------------------- */
    void (*clock)(void *env, clockid_t which, struct timespec *ts);
    int (*cond_wait)(void *env, pthread_cond_t *cond, pthread_mutex_t *mu,
                     const struct timespec *at);
    int (*thread_start)(void *env, pthread_t *t, void *(*run)(void *), void *arg);
    void (*thread_join)(void *env, pthread_t t);
    bool (*in_completion)(void *env);
    int (*seed)(void *env, uint64_t state[2]);
};

/* libzookeeper_mt, clock_gettime, pthreads (wire.c). */
extern const struct zkl_wire zklock__real_wire;

/* ---- what a simulator calls (besides the public API) ------------------------------- */

/* zklock_session_open, on another table: hosts is handed to its init as it
 * is (it must still be a well-formed list: "host:port[,host:port...]"). */
int zklock__session_open_on(zklock_session_t **out, const char *hosts,
                            const zklock_session_opts_t *opts, const struct zkl_wire *wire,
                            void *env);
/* One turn of the session thread (for a table that declined to start it):
 * fires the timers that are due, and opens a new handle if one is due.
 * Takes s->mu. True, with *next, if a timer is armed: when it is due (on
 * ZKLOCK_CLOCK). */
bool zklock__session_turn(zklock_session_t *s, struct timespec *next);
/* The callbacks queued now, run on the calling thread (for a table that
 * declined to start the callback thread; with ZKLOCK_DISPATCH_POLL,
 * zklock_session_dispatch does the same): how many ran. */
int zklock__session_run_callbacks(zklock_session_t *s);

#endif
