/*
 * session.c: one ZooKeeper session at a time, and the session thread.
 *
 * The session thread does what must not happen on ZooKeeper's completion
 * thread or on a caller's thread:
 *  - after an expiry, closes the dead handle and opens a new session;
 *  - fires the session's timers (timer.c), among them the local expiry: when
 *    the connection has been down for a whole session timeout, the ensemble
 *    has expired the session (or will at any moment), and a partitioned
 *    client never hears so from a server.
 * It runs no user code: the user's callbacks have a thread of their own
 * (dispatch.c), so that a slow one holds up no timer, the lease's above all.
 *
 * The session knows nothing of what sits on it: the layers above (the queue
 * engine, the queue inspector, the followers) hear of connection changes
 * through the table the composition root handed down (s->layers, root.c).
 */
#include "names.h"
#include "lockstats.h"
#include "session.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ZKL_DEFAULT_TIMEOUT_MS 10000
#define ZKL_RETRY_MS 100     /* after an answer that no session event follows */
#define ZKL_REOPEN_MS 1000   /* after zookeeper_init itself failed */

/* ---- the layers above ------------------------------------------------------ */

#define EACH_LAYER(hook, s, ...)                               \
    do {                                                       \
        for (size_t i_ = 0; (s)->layers[i_]; i_++)             \
            if ((s)->layers[i_]->hook)                         \
                (s)->layers[i_]->hook(s, ##__VA_ARGS__);       \
    } while (0)

static bool layers_busy(const zklock_session_t *s)
{
    for (size_t i = 0; s->layers[i]; i++)
        if (s->layers[i]->busy && s->layers[i]->busy(s))
            return true;
    return false;
}

/* The old handle is closed: no watch of the layers is registered any more,
 * and no answer will come. */
static void handle_closed(zklock_session_t *s)
{
    EACH_LAYER(handle_closed, s);
    s->watches = 0;
    s->ops = 0;
}

/* An adopted session's close waits for its last watch to go. */
void zklock__watch_gone(zklock_session_t *s)
{
    if (--s->watches == 0)
        pthread_cond_broadcast(&s->cond);
}

bool zklock__connected(const zklock_session_t *s)
{
    return s->zh != NULL && s->state == ZKL_S_CONNECTED;
}

/* ---- on_state ----------------------------------------------------------------- */

struct state_callback {
    struct zkl_callback cb;
    zklock_session_t *s;
    int state;
};

static bool state_begin(struct zkl_callback *cb)
{
    return true;
}

static void state_run(struct zkl_callback *cb)
{
    struct state_callback *sc = (struct state_callback *)cb;
    sc->s->opts.on_state(sc->s, sc->state, sc->s->opts.ctx);
}

static void state_end(struct zkl_callback *cb)
{
    free(cb);
}

static const struct zkl_callback_ops state_ops = {state_begin, state_run, state_end};

static void queue_state(zklock_session_t *s, int state)
{
    struct state_callback *sc;

    if (!s->opts.on_state || !(sc = calloc(1, sizeof *sc)))
        return; /* out of memory: the user misses a state change, nothing else */
    sc->cb.ops = &state_ops;
    sc->s = s;
    sc->state = state;
    zklock__dispatch_push(s, &sc->cb);
}

/* ---- state changes ------------------------------------------------------------ */

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);

static void kick(zklock_session_t *s)
{
    pthread_cond_signal(&s->thread_cond);
    pthread_cond_broadcast(&s->cond);
}

void zklock__retry_later(zklock_session_t *s)
{
    if (!zklock__timer_armed(&s->retry_timer))
        zklock__timer_arm_in(s, &s->retry_timer, ZKL_RETRY_MS);
}

/* The ZooKeeper session is over (s->gen has moved on). */
static void session_ended(zklock_session_t *s, int reason)
{
    /* The watches of an adopted handle stay registered in the application's
     * handle: take them back while the layers still know their paths. */
    if (s->adopted)
        EACH_LAYER(unwatch_all, s);
    EACH_LAYER(ended, s, reason);
}

/* An adopted handle whose session ended is the application's to close:
 * zklock no longer touches it. */
static void let_go_of_adopted(zklock_session_t *s)
{
    s->zh = NULL;
}

/* The ZooKeeper session is over, for `reason` (ZKLOCK_LOST_EXPIRED, or
 * ZAUTHFAILED: a server rejected our credentials, and no new session would
 * fare better). `unconfirmed`: no server said so (zklock decided it, after a
 * whole session timeout without a connection, or the application handed
 * over a new handle): the session may still live on the server for a while,
 * with nodes of ours that the layers must remove. */
static void ended_because(zklock_session_t *s, int reason, bool unconfirmed)
{
    if (s->state == ZKL_S_EXPIRED && s->adopted && s->zh && !unconfirmed) {
        let_go_of_adopted(s); /* a server confirms the local expiry */
        return;
    }
    if (s->state == ZKL_S_EXPIRED || s->state == ZKL_S_CLOSED)
        return;
    zklock__timer_cancel(s, &s->suspend_timer);
    s->gen++;
    s->state = ZKL_S_EXPIRED;
    s->ended_unconfirmed = unconfirmed;
    queue_state(s, ZKLOCK_EXPIRED);
    session_ended(s, reason);
    if (!s->adopted) {
        /* Retired at once, closed by the session thread: a handle we gave up
         * for expired must not come back to life (a long election, and the
         * new leader still knows the session) and carry new nodes. */
        s->retired_zh = s->zh;
        s->zh = NULL;
        s->need_new_handle = true;
    } else if (!unconfirmed) {
        let_go_of_adopted(s);
    }
    kick(s);
}

static void expired(zklock_session_t *s, bool unconfirmed)
{
    ended_because(s, ZKLOCK_LOST_EXPIRED, unconfirmed);
}

/* A server rejected our credentials: the session stops here, it does not
 * open another that would be rejected too (an adopted one waits for a
 * readopt). */
static void auth_rejected(zklock_session_t *s)
{
    s->auth_failed = true;
    if (s->auth_rc == 0)
        s->auth_rc = ZAUTHFAILED;
    pthread_cond_broadcast(&s->cond);
    ended_because(s, ZAUTHFAILED, false);
}

int zklock__session_refusal(const zklock_session_t *s)
{
    return s->auth_failed ? ZAUTHFAILED : 0;
}

/* The handle's completion thread: answers to our requests arrive there, so
 * a blocking call made on it would wait for itself. zklock learns it from its
 * own answers and events, never from what the application forwards. */
void zklock__learn_completion_thread(zklock_session_t *s)
{
    s->cthread = pthread_self();
    s->cthread_zh = s->zh;
}

bool zklock__on_completion_thread(const zklock_session_t *s)
{
    if (s->wire->in_completion)
        return s->wire->in_completion(s->wire_env);
    return s->zh && s->cthread_zh == s->zh && pthread_equal(s->cthread, pthread_self());
}

static void probe_done(int rc, const struct Stat *st, const void *data)
{
    zklock_session_t *s = (zklock_session_t *)data;

    pthread_mutex_lock(&s->mu);
    if (s->zh == s->probe_zh)
        zklock__learn_completion_thread(s);
    zklock__request_answered(s);
    pthread_mutex_unlock(&s->mu);
}

/* An adopted handle gives zklock no event of its own: one cheap request
 * teaches it which thread the handle's answers come on. */
static void probe_completion_thread(zklock_session_t *s)
{
    if (s->cthread_zh == s->zh || s->probe_zh == s->zh)
        return;
    if (zklock__request_sent(s, s->wire->aexists(s->zh, "/", 0, probe_done, s)))
        s->probe_zh = s->zh;
}

static void connected(zklock_session_t *s)
{
    const clientid_t *id = s->wire->client_id(s->zh);
    bool resumed = s->state == ZKL_S_SUSPENDED && id->client_id == s->session_id;

    if (s->state == ZKL_S_CONNECTED)
        return;
    if (s->state == ZKL_S_SUSPENDED && !resumed) {
        expired(s, false); /* a different session: the old one is gone */
        if (!s->adopted)
            return; /* and its handle is retired: a new one follows */
    }
    /* An adopted handle may also come back after zklock expired its session
     * locally: the session lived on. Every hold was reported lost, so it is a
     * new start (CONNECTED); the layers remove what was left on the server. */
    zklock__timer_cancel(s, &s->suspend_timer);
    if (!resumed) /* a new session: its first write will tell */
        s->heard_known = false;
    s->session_id = id->client_id;
    s->negotiated_ms = s->wire->recv_timeout(s->zh);
    s->timers.slice_ms = s->negotiated_ms / ZKL_LEASE_MARGIN_DIVISOR;
    s->state = ZKL_S_CONNECTED;
    zklock__auth_confirm(s);
    if (s->adopted)
        probe_completion_thread(s);
    queue_state(s, resumed ? ZKLOCK_RECONNECTED : ZKLOCK_CONNECTED);
    kick(s);
    EACH_LAYER(resumed, s);
}

static void disconnected(zklock_session_t *s)
{
    struct timespec at;

    if (s->state != ZKL_S_CONNECTED)
        return;
    s->state = ZKL_S_SUSPENDED;
    zklock__now(s, &s->suspended_at);
    zklock__local_expiry_at(s, &at);
    zklock__timer_arm(s, &s->suspend_timer, &at);
    queue_state(s, ZKLOCK_SUSPENDED);
    EACH_LAYER(suspended, s);
    kick(s);
}

static void handle_state(zklock_session_t *s, int state)
{
    if (s->state == ZKL_S_CLOSED)
        return;
    if (state == ZOO_CONNECTED_STATE)
        connected(s);
    else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE)
        disconnected(s);
    else if (state == ZOO_EXPIRED_SESSION_STATE)
        expired(s, false);
    else if (state == ZOO_AUTH_FAILED_STATE)
        auth_rejected(s);
}

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zklock_session_t *s = ctx;

    if (type != ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&s->mu);
    if (zh == s->zh) { /* not a late word from a handle we replaced */
        zklock__learn_completion_thread(s);
        handle_state(s, state);
    }
    pthread_mutex_unlock(&s->mu);
}

void zklock_session_forward(zklock_session_t *s, zhandle_t *zh, int type, int state)
{
    if (!s || type != ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&s->mu);
    /* Only the handle in use speaks for the session: none after a confirmed
     * expiry, and never an old handle after a readopt. */
    if (s->adopted && s->zh && (!zh || zh == s->zh))
        handle_state(s, state);
    pthread_mutex_unlock(&s->mu);
}

void zklock_session_event(zklock_session_t *s, int type, int state)
{
    zklock_session_forward(s, NULL, type, state);
}

/* ---- timers ---------------------------------------------------------------------- */

bool zklock__local_expiry_at(const zklock_session_t *s, struct timespec *at)
{
    if (s->state != ZKL_S_SUSPENDED)
        return false;
    zklock__later(at, &s->suspended_at, s->negotiated_ms);
    return true;
}

/* The connection has been down for a whole session timeout: by now the
 * ensemble has expired the session, or will at any moment. */
static void suspended_too_long(struct zkl_timer *t, zklock_session_t *s)
{
    if (s->state == ZKL_S_SUSPENDED)
        expired(s, true);
}

void zklock__local_expiry_check(zklock_session_t *s)
{
    struct timespec at;

    if (zklock__local_expiry_at(s, &at) && zklock__passed(s, &at))
        expired(s, true);
}

/* After an answer that no session event follows ("throttled"), or a failed
 * zookeeper_init: try again. */
static void retry_now(struct zkl_timer *t, zklock_session_t *s)
{
    if (s->need_new_handle)
        s->reopen_now = true; /* the session thread's loop does it, unlocked */
    else
        EACH_LAYER(resumed, s);
}

/* ---- the session thread ---------------------------------------------------------- */

/* How often a connected client looks the server names up again. By default
 * libzookeeper_mt does it at every turn of its I/O loop: a getaddrinfo(),
 * with its netlink round trips, per request, which was a third of zklock's
 * CPU time per lock cycle. A lost connection still resolves at once. */
#define ZKL_RESOLVE_EVERY_MS 60000

/* Called with s->mu held, on purpose: the new handle's first events block
 * in session_watcher until s->zh is set, so none is taken for a stranger's.
 * zookeeper_init() resolves the host names meanwhile; a slow resolver after
 * an expiry thus delays other calls on this session, which could not do
 * anything before the new session is up anyway. */
static int open_handle(zklock_session_t *s)
{
    int rc;

    errno = 0;
    if (s->tls)
        s->zh = s->wire->init_ssl(s->wire_env, s->hosts, s->tls, session_watcher,
                                  s->opts.timeout_ms, NULL, s, 0);
    else
        s->zh = s->wire->init(s->wire_env, s->hosts, session_watcher, s->opts.timeout_ms, NULL,
                              s, 0);
    if (!s->zh) /* the list is well formed (hosts.c): its names failed */
        return errno == ENOMEM ? ZKLOCK_ENOMEM : ZKLOCK_ERESOLVE;
    s->wire->set_servers_resolution_delay(s->zh, ZKL_RESOLVE_EVERY_MS);
    s->state = ZKL_S_CONNECTING;
    /* Queued now, sent ahead of anything else once connected. */
    rc = zklock__auth_send(s);
    if (rc) {
        zhandle_t *zh = s->zh;
        s->zh = NULL; /* its events are a stranger's from now on */
        pthread_mutex_unlock(&s->mu);
        s->wire->close(zh);
        pthread_mutex_lock(&s->mu);
    }
    return rc;
}

/* open_handle(), once a name of the list resolves. The lookup, which may
 * wait for DNS, is made without s->mu, so that it holds up no caller; a
 * list that does not resolve is not given to zookeeper_init() (which would
 * wait as long, with s->mu). ZKLOCK_ECLOSED if the session closed meanwhile. */
static int open_handle_when_resolved(zklock_session_t *s)
{
    int rc;

    pthread_mutex_unlock(&s->mu);
    rc = s->wire->resolve(s->wire_env, s->hosts);
    pthread_mutex_lock(&s->mu);
    if (s->thread_stop || s->state == ZKL_S_CLOSED)
        return ZKLOCK_ECLOSED;
    return rc ? rc : open_handle(s);
}

/* Closes the dead handle (its late answers are stale by generation) and
 * opens a new session (the first one, for a session opened in the
 * background). */
static void replace_handle(zklock_session_t *s)
{
    int rc;

    zhandle_t *old = s->retired_zh ? s->retired_zh : s->zh;

    s->need_new_handle = false;
    s->reopen_now = false;
    s->zh = s->retired_zh = NULL;
    if (old) {
        pthread_mutex_unlock(&s->mu);
        s->wire->close(old);
        pthread_mutex_lock(&s->mu);
    }
    handle_closed(s);
    if (s->thread_stop || s->state == ZKL_S_CLOSED || s->auth_failed)
        return;
    rc = open_handle_when_resolved(s);
    if (rc != 0 && rc != ZKLOCK_ECLOSED) {
        s->need_new_handle = true; /* try again shortly */
        zklock__timer_arm_in(s, &s->retry_timer, ZKL_REOPEN_MS);
    }
}

static bool may_reopen(const zklock_session_t *s)
{
    return s->need_new_handle && s->state != ZKL_S_CLOSED &&
           (s->reopen_now || !zklock__timer_armed(&s->retry_timer));
}

/* One turn of the session thread, with s->mu held: the timers that are
 * due, then a new handle if one is due. False once the thread is stopped
 * (also while the new handle was made: s->mu is let go meanwhile, and the
 * stop's wake-up found nobody asleep). */
static bool turn(zklock_session_t *s)
{
    zklock__timers_fire_due(s);
    if (s->thread_stop)
        return false;
    if (may_reopen(s))
        replace_handle(s);
    return !s->thread_stop;
}

static void *session_thread(void *arg)
{
    zklock_session_t *s = arg;

    pthread_mutex_lock(&s->mu);
    while (turn(s))
        if (!may_reopen(s))
            zklock__timers_sleep(s);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

bool zklock__session_turn(zklock_session_t *s, struct timespec *next)
{
    bool armed;

    pthread_mutex_lock(&s->mu);
    turn(s);
    armed = s->timers.n > 0;
    if (armed)
        *next = s->timers.heap[0]->at;
    pthread_mutex_unlock(&s->mu);
    return armed;
}

/* ---- creation and destruction ------------------------------------------------------ */

static char *default_identity(void)
{
    char host[256], buf[300];

    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    snprintf(buf, sizeof buf, "%s:%ld", host, (long)getpid());
    return strdup(buf);
}

/* ZKLOCK_TRACE, read once per session: "1" (or "stderr") traces every
 * contender's transitions to stderr, a path appends them to that file. */
static void trace_open(zklock_session_t *s)
{
    const char *to = getenv("ZKLOCK_TRACE");

    if (!to || !*to || strcmp(to, "0") == 0)
        return;
    if (strcmp(to, "1") == 0 || strcmp(to, "stderr") == 0) {
        s->trace = stderr;
        return;
    }
    s->trace = fopen(to, "ae");
    s->trace_owned = s->trace != NULL;
}

void zklock__internal_error(const zklock_session_t *s, const char *fmt, ...)
{
    char what[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (s->trace && s->trace != stderr) {
        fprintf(s->trace, "zklock: internal error: session 0x%" PRIx64 " %s\n",
                (uint64_t)s->session_id, what);
        fflush(s->trace);
    }
    fprintf(stderr, "zklock: internal error: session 0x%" PRIx64 " %s\n", (uint64_t)s->session_id,
            what);
    abort();
}

static void trace_close(zklock_session_t *s)
{
    if (s->trace_owned)
        fclose(s->trace);
    s->trace = NULL;
}

void zklock__session_free(zklock_session_t *s)
{
    handle_closed(s); /* nothing is left by now; be sure */
    EACH_LAYER(freeing, s);
    zklock__dispatch_drop_all(s);
    zklock__dispatch_fini(s);
    zklock__timers_free(s);
    pthread_cond_destroy(&s->thread_cond);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    zklock__auth_free(s);
    zklock__acl_free(&s->acl);
    free(s->tls);
    free(s->hosts);
    free(s->identity);
    trace_close(s);
    free(s);
}

/* zookeeper_init_ssl()'s certificate argument: "ca,cert,key[,password]". */
static int tls_of(zklock_session_t *s, const zklock_session_opts_t *o)
{
    if (!o->tls_ca && !o->tls_cert && !o->tls_key && !o->tls_key_password)
        return 0;
    if (!o->tls_ca || !o->tls_cert || !o->tls_key)
        return ZKLOCK_EINVAL;
    if (!s->wire->init_ssl)
        return ZKLOCK_ENOTSUP;
    size_t len = strlen(o->tls_ca) + strlen(o->tls_cert) + strlen(o->tls_key) +
          (o->tls_key_password ? strlen(o->tls_key_password) : 0) + 4;
    s->tls = malloc(len);
    if (!s->tls)
        return ZKLOCK_ENOMEM;
    snprintf(s->tls, len, "%s,%s,%s%s%s", o->tls_ca, o->tls_cert, o->tls_key,
             o->tls_key_password ? "," : "", o->tls_key_password ? o->tls_key_password : "");
    return 0;
}

/* Copies what the options point to; the copy of the options points to
 * nothing of the caller's. */
static int take_options(zklock_session_t *s, const zklock_session_opts_t *opts)
{
    int rc;

    if (opts)
        s->opts = *opts;
    if (s->opts.timeout_ms == 0)
        s->opts.timeout_ms = ZKL_DEFAULT_TIMEOUT_MS;
    if (s->opts.connect_timeout_ms == 0)
        s->opts.connect_timeout_ms = s->opts.timeout_ms;
    s->identity = s->opts.identity ? strdup(s->opts.identity) : default_identity();
    s->opts.identity = s->identity;
    if (!s->identity)
        return ZKLOCK_ENOMEM;
    if ((rc = zklock__auth_copy(s, s->opts.auth, s->opts.nauth)) != 0 ||
        (rc = zklock__acl_choose(&s->acl, s->opts.acl, s->opts.acl_custom, NULL)) != 0 ||
        (rc = tls_of(s, &s->opts)) != 0)
        return rc;
    s->opts.auth = NULL;
    s->opts.nauth = 0;
    s->opts.acl_custom = NULL;
    s->opts.tls_ca = s->opts.tls_cert = s->opts.tls_key = s->opts.tls_key_password = NULL;
    return 0;
}

static int session_new(zklock_session_t **out, const zklock_session_opts_t *opts,
                       const struct zkl_wire *wire, void *env, const struct zkl_above *above)
{
    zklock_session_t *s;
    int rc;

    if (opts && (opts->timeout_ms < 0 || opts->connect_timeout_ms < 0))
        return ZKLOCK_EINVAL;
    if (opts && opts->dispatch != ZKLOCK_DISPATCH_THREAD && opts->dispatch != ZKLOCK_DISPATCH_POLL)
        return ZKLOCK_EINVAL;
    if (opts && opts->lease != ZKLOCK_LEASE_STRICT && opts->lease != ZKLOCK_LEASE_SESSION)
        return ZKLOCK_EINVAL;
    if (opts && opts->identity && strlen(opts->identity) > ZKLOCK_DATA_MAX)
        return ZKLOCK_EINVAL; /* the server would drop every create */
    s = calloc(1, sizeof *s);
    if (!s)
        return ZKLOCK_ENOMEM;
    s->wire = wire;
    s->wire_env = env;
    s->layers = above->layers;
    s->doors = above->doors;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        return ZKLOCK_ESYSTEM;
    }
    if (zklock__cond_init(&s->cond) != 0 || zklock__cond_init(&s->thread_cond) != 0) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        return ZKLOCK_ESYSTEM;
    }
    s->retry_timer.fire = retry_now;
    s->suspend_timer.fire = suspended_too_long;
    rc = zklock__dispatch_init(s, opts && opts->dispatch == ZKLOCK_DISPATCH_POLL);
    if (rc == 0)
        rc = take_options(s, opts);
    if (rc == 0) /* retry, local expiry, the lease's heartbeat and end */
        rc = zklock__timers_reserve(s, 4);
    s->timers.slice_ms = s->opts.timeout_ms / ZKL_LEASE_MARGIN_DIVISOR;
    if (rc == 0 && (s->wire->seed ? s->wire->seed(s->wire_env, s->rng)
                                  : zklock__rng_seed(s->rng)) != 0)
        rc = ZKLOCK_ESYSTEM;
    trace_open(s);
    if (rc) {
        zklock__session_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* With s->mu held (let go meanwhile, if the first fails): the session
 * thread and the callback thread. */
static int start_threads(zklock_session_t *s)
{
    if (zklock__dispatch_start(s) != 0)
        return ZKLOCK_ESYSTEM;
    switch (s->wire->thread_start(s->wire_env, &s->thread, session_thread, s)) {
    case 0:
        s->thread_started = true;
        return 0;
    case ZKL_WIRE_NO_THREAD:
        return 0; /* the wire's owner runs its turns (zklock__session_turn) */
    default:
        pthread_mutex_unlock(&s->mu);
        zklock__dispatch_stop(s);
        pthread_mutex_lock(&s->mu);
        return ZKLOCK_ESYSTEM;
    }
}

/* Without s->mu: the session thread, then the callback thread once it ran
 * what is queued. */
static void stop_threads(zklock_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->thread_stop = true;
    kick(s);
    pthread_mutex_unlock(&s->mu);
    if (s->thread_started)
        s->wire->thread_join(s->wire_env, s->thread);
    s->thread_started = false;
    zklock__dispatch_stop(s);
}

/* opts.background: the session thread makes the first handle as it makes
 * every later one (replace_handle), and retries until it has one: the ZooKeeper
 * client then retries the servers by itself. Calls wait meanwhile as during a
 * reconnection. */
static int open_in_background(zklock_session_t *s)
{
    s->need_new_handle = true;
    s->reopen_now = true;
    return start_threads(s);
}

static int finish_open(zklock_session_t **out, zklock_session_t *s, int rc)
{
    if (rc) {
        zklock_session_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int zklock__session_open_with(zklock_session_t **out, const char *hosts,
                              const zklock_session_opts_t *opts, const struct zkl_wire *wire,
                              void *env, const struct zkl_above *above)
{
    zklock_session_t *s;
    struct timespec deadline;
    int rc;

    if (!out)
        return ZKLOCK_EINVAL;
    *out = NULL;
    if (zklock__hosts_check(hosts) != 0)
        return ZKLOCK_EINVAL; /* malformed: no retry would help */
    rc = session_new(&s, opts, wire, env, above);
    if (rc)
        return rc;
    s->hosts = strdup(hosts);
    if (!s->hosts) {
        zklock__session_free(s);
        return ZKLOCK_ENOMEM;
    }
    pthread_mutex_lock(&s->mu);
    if (s->opts.background) {
        rc = open_in_background(s);
        pthread_mutex_unlock(&s->mu);
        return finish_open(out, s, rc);
    }
    rc = open_handle(s);
    if (rc == 0)
        rc = start_threads(s);
    zklock__deadline(s, &deadline, s->opts.connect_timeout_ms);
    /* Connected, and the credentials answered: a rejection is told here. */
    while (rc == 0 && !s->auth_failed && s->auth_rc == 0 &&
           (s->state != ZKL_S_CONNECTED || s->auth_pending) && !zklock__passed(s, &deadline))
        zklock__cond_wait_until(s, &s->cond, &deadline, 0);
    if (rc == 0 && s->auth_rc != 0)
        rc = s->auth_rc;
    else if (rc == 0 && (s->state != ZKL_S_CONNECTED || s->auth_pending))
        rc = ZKLOCK_ENOSERVER; /* no server, or no verdict on the credentials */
    pthread_mutex_unlock(&s->mu);
    return finish_open(out, s, rc);
}

/* With s->mu held: starts using the application's handle zh. */
static void take_handle(zklock_session_t *s, zhandle_t *zh)
{
    int state = s->wire->state(zh);

    s->zh = zh;
    if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
        s->state = ZKL_S_EXPIRED;
        let_go_of_adopted(s);
        return;
    }
    s->state = ZKL_S_CONNECTING;
    s->auth_failed = false;
    zklock__auth_send(s); /* a refusal shows as ZOO_AUTH_FAILED_STATE */
    if (state == ZOO_CONNECTED_STATE)
        connected(s);
}

int zklock__session_adopt_with(zklock_session_t **out, zhandle_t *zh,
                               const zklock_session_opts_t *opts, const struct zkl_above *above)
{
    zklock_session_t *s;
    int rc;

    if (!out)
        return ZKLOCK_EINVAL;
    *out = NULL;
    if (!zh || (opts && (opts->tls_ca || opts->tls_cert || opts->tls_key)))
        return ZKLOCK_EINVAL; /* the handle's TLS is the application's */
    rc = session_new(&s, opts, &zklock__real_wire, NULL, above);
    if (rc)
        return rc;
    s->adopted = true;
    pthread_mutex_lock(&s->mu);
    rc = start_threads(s); /* first: nothing is sent unless they run */
    if (rc == 0)
        take_handle(s, zh);
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        zklock__session_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int zklock_session_readopt(zklock_session_t *s, zhandle_t *zh)
{
    int rc = 0;

    if (!s || !zh)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&s->mu);
    if (!s->adopted) {
        rc = ZKLOCK_EINVAL;
    } else if (s->closing || s->state == ZKL_S_CLOSED) {
        rc = ZKLOCK_ECLOSED;
    } else if (zh != s->zh) {
        /* The old handle's session ends for zklock, whatever the server
         * thinks: what it left there is removed through the new one. */
        if (s->state != ZKL_S_EXPIRED)
            expired(s, true);
        let_go_of_adopted(s);
        take_handle(s, zh);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

zhandle_t *zklock_session_zhandle(zklock_session_t *s)
{
    zhandle_t *zh;

    if (!s)
        return NULL;
    pthread_mutex_lock(&s->mu);
    zh = s->state == ZKL_S_CLOSED ? NULL : s->zh;
    pthread_mutex_unlock(&s->mu);
    return zh;
}

int64_t zklock_session_id(zklock_session_t *s)
{
    int64_t id = 0;

    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    if (s->state == ZKL_S_CONNECTED || s->state == ZKL_S_SUSPENDED)
        id = s->session_id;
    pthread_mutex_unlock(&s->mu);
    return id;
}

/* Every size zklock_stats_t has had, oldest first: a caller compiled against
 * an older header gets the counters it knows, and nothing past them. */
static const size_t stats_sizes[] = {
    6 * sizeof(uint64_t), /* 0.1.0: requests .. lost */
    7 * sizeof(uint64_t), /* .. fast_acquired */
    sizeof(zklock_stats_t),
};

/* A size from a newer header (more counters than we know) is filled with
 * ours and zeros. A size that was never a zklock_stats_t is refused rather
 * than filled with a torn counter. */
static bool stats_size_ok(size_t size)
{
    return zklock__stats_size_ok(size, stats_sizes, sizeof stats_sizes / sizeof stats_sizes[0]);
}

int zklock_session_stats(zklock_session_t *s, zklock_stats_t *out, size_t size)
{
    size_t known = size < sizeof(zklock_stats_t) ? size : sizeof(zklock_stats_t);

    if (!s || !out || !stats_size_ok(size))
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&s->mu);
    memcpy(out, &s->stats, known);
    pthread_mutex_unlock(&s->mu);
    memset((char *)out + known, 0, size - known);
    return 0;
}

/* An adopted session leaves the application's handle as it found it: our
 * nodes deleted (while the connection lasts, at most one session timeout),
 * our watches taken back, no request of ours in flight. */
static void drain_adopted(zklock_session_t *s)
{
    struct timespec deadline;

    EACH_LAYER(close_begin, s);
    zklock__deadline(s, &deadline, s->negotiated_ms > 0 ? s->negotiated_ms : s->opts.timeout_ms);
    while (layers_busy(s) && zklock__connected(s) &&
           zklock__cond_wait_until(s, &s->cond, &deadline, 0) != ETIMEDOUT)
        ;
    EACH_LAYER(unwatch_all, s);
    while (s->ops > 0 || s->watches > 0)
        zklock__cond_wait(s, &s->cond);
}

void zklock_session_close(zklock_session_t *s)
{
    zhandle_t *zh, *retired;
    bool free_now;

    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->state == ZKL_S_CLOSED) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->closing = true;
    s->close_running = true; /* a zklock_free() meanwhile must not free s */
    if (s->adopted)
        drain_adopted(s);
    s->state = ZKL_S_CLOSED;
    s->gen++;
    zklock__timer_cancel(s, &s->suspend_timer);
    zklock__timer_cancel(s, &s->retry_timer);
    session_ended(s, ZKLOCK_ECLOSED);
    /* Nobody may touch a handle while we close it (a waiter on its way out
     * would take its watch back): from here on there is none. */
    zh = s->adopted ? NULL : s->zh;
    retired = s->retired_zh;
    s->zh = s->retired_zh = NULL;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);

    stop_threads(s);
    if (zh)
        s->wire->close(zh); /* flushes our requests in flight */
    if (retired)
        s->wire->close(retired);

    pthread_mutex_lock(&s->mu);
    if (!s->adopted)
        handle_closed(s);
    /* What is still owed (done callbacks of calls the close ended, and all
     * of them with ZKLOCK_DISPATCH_POLL) runs here, before we return. */
    while (zklock__dispatch_one(s))
        ;
    while (s->users > 0) /* callers on their way out with ZKLOCK_ECLOSED */
        zklock__cond_wait(s, &s->cond);
    s->close_running = false;
    free_now = zklock__session_claim_free(s);
    pthread_mutex_unlock(&s->mu);
    if (free_now)
        zklock__session_free(s);
}

/* With s->mu held: true for exactly one caller, once the session is closed
 * (zklock_session_close() has finished) and its last lock handle is gone.
 * That caller frees s after unlocking. */
bool zklock__session_claim_free(zklock_session_t *s)
{
    if (s->state != ZKL_S_CLOSED || s->close_running || s->nlocks > 0 || s->users > 0 ||
        s->free_claimed)
        return false;
    s->free_claimed = true;
    return true;
}

/* ---- what a recipe reads of the session (recipe.h) ------------------------------------ */

void zklock__session_lock(zklock_session_t *s)
{
    pthread_mutex_lock(&s->mu);
}

void zklock__session_unlock(zklock_session_t *s)
{
    pthread_mutex_unlock(&s->mu);
}

const char *zklock__identity(const zklock_session_t *s)
{
    return s->identity;
}

unsigned zklock__generation(const zklock_session_t *s)
{
    return s->gen;
}

bool zklock__closing(const zklock_session_t *s)
{
    return s->closing || s->state == ZKL_S_CLOSED;
}

bool zklock__between_sessions(const zklock_session_t *s)
{
    return s->state == ZKL_S_EXPIRED || s->state == ZKL_S_CLOSED;
}
