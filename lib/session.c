/*
 * session.c: one ZooKeeper session at a time, and the session thread.
 *
 * The session thread does what must not happen on ZooKeeper's completion
 * thread or on a caller's thread:
 *  - delivers on_state/on_lost callbacks, in order, without s->mu held;
 *  - after an expiry, closes the dead handle and opens a new session;
 *  - declares the session expired when the connection has been down for a
 *    whole session timeout: by then the ensemble has expired it (or will
 *    at any moment), and a partitioned client never hears so from a server.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ZKL_DEFAULT_TIMEOUT_MS 10000
#define ZKL_RETRY_MS 100     /* after an answer that no session event follows */
#define ZKL_REOPEN_MS 1000   /* after zookeeper_init itself failed */

struct zkl_callback {
    struct zkl_callback *next;
    zklock_t *l; /* NULL: a session state change */
    int value;   /* the state, or the reason a lock was lost */
};

/* ---- time ------------------------------------------------------------------ */

int zkl_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return -1;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

void zkl_deadline(struct timespec *ts, int timeout_ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

bool zkl_passed(const struct timespec *ts)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > ts->tv_sec ||
           (now.tv_sec == ts->tv_sec && now.tv_nsec >= ts->tv_nsec);
}

static void later_of(struct timespec *ts, const struct timespec *base, int ms)
{
    *ts = *base;
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static bool earlier(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

bool zkl_connected(const zklock_session_t *s)
{
    return s->zh != NULL && s->state == ZKL_S_CONNECTED;
}

/* ---- callbacks ------------------------------------------------------------- */

static void enqueue(zklock_session_t *s, zklock_t *l, int value)
{
    struct zkl_callback *cb = calloc(1, sizeof *cb);

    if (!cb)
        return; /* the hold count and ZKLOCK_ELOST still tell the truth */
    cb->l = l;
    cb->value = value;
    if (l)
        l->refs++;
    if (s->cb_tail)
        s->cb_tail->next = cb;
    else
        s->cb_head = cb;
    s->cb_tail = cb;
    pthread_cond_signal(&s->thread_cond);
}

void zkl_queue_lost(zklock_session_t *s, zklock_t *l, int reason)
{
    if (l->opts.on_lost)
        enqueue(s, l, reason);
}

static void queue_state(zklock_session_t *s, int state)
{
    if (s->opts.on_state)
        enqueue(s, NULL, state);
}

/* Drops the queued callbacks of a lock being freed. */
void zkl_forget_callbacks(zklock_session_t *s, zklock_t *l)
{
    struct zkl_callback **p = &s->cb_head, *prev = NULL;

    while (*p) {
        struct zkl_callback *cb = *p;
        if (cb->l == l) {
            *p = cb->next;
            if (s->cb_tail == cb)
                s->cb_tail = prev;
            l->refs--;
            free(cb);
        } else {
            prev = cb;
            p = &cb->next;
        }
    }
}

/* Delivers one queued callback; false if there was none. */
static bool deliver_one(zklock_session_t *s)
{
    struct zkl_callback *cb = s->cb_head;
    zklock_t *l;

    if (!cb)
        return false;
    s->cb_head = cb->next;
    if (!s->cb_head)
        s->cb_tail = NULL;
    l = cb->l;
    if (l && !l->freeing) {
        l->in_callback++;
        pthread_mutex_unlock(&s->mu);
        l->opts.on_lost(l, cb->value, l->opts.ctx);
        pthread_mutex_lock(&s->mu);
        l->in_callback--;
        pthread_cond_broadcast(&s->cond);
    } else if (!l) {
        pthread_mutex_unlock(&s->mu);
        s->opts.on_state(s, cb->value, s->opts.ctx);
        pthread_mutex_lock(&s->mu);
    }
    if (l)
        zkl_lock_unref(l);
    free(cb);
    return true;
}

/* ---- state changes ------------------------------------------------------------ */

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);

static void kick(zklock_session_t *s)
{
    pthread_cond_signal(&s->thread_cond);
    pthread_cond_broadcast(&s->cond);
}

void zkl_retry_later(zklock_session_t *s)
{
    if (!s->retry_pending) {
        s->retry_pending = true;
        zkl_deadline(&s->retry_at, ZKL_RETRY_MS);
        kick(s);
    }
}

static void expired(zklock_session_t *s)
{
    if (s->state == ZKL_S_EXPIRED || s->state == ZKL_S_CLOSED)
        return;
    s->gen++;
    s->state = ZKL_S_EXPIRED;
    queue_state(s, ZKLOCK_EXPIRED);
    zkl_engine_session_ended(s, ZKLOCK_LOST_EXPIRED);
    if (!s->adopted) {
        /* Retired at once, closed by the session thread: a handle we gave up
         * for expired must not come back to life (a long election, and the
         * new leader still knows the session) and carry new nodes. */
        s->retired_zh = s->zh;
        s->zh = NULL;
        s->need_new_handle = true;
    }
    kick(s);
}

static void connected(zklock_session_t *s)
{
    const clientid_t *id = zoo_client_id(s->zh);
    bool resumed = s->state == ZKL_S_SUSPENDED && id->client_id == s->session_id;

    if (s->state == ZKL_S_CONNECTED || (s->adopted && s->state == ZKL_S_EXPIRED))
        return;
    if (s->state == ZKL_S_SUSPENDED && !resumed) {
        expired(s); /* a different session: the old one is gone */
        if (!s->adopted)
            return; /* and its handle is retired: a new one follows */
    }
    s->session_id = id->client_id;
    s->negotiated_ms = zoo_recv_timeout(s->zh);
    s->state = ZKL_S_CONNECTED;
    queue_state(s, resumed ? ZKLOCK_RECONNECTED : ZKLOCK_CONNECTED);
    kick(s);
    zkl_engine_resume(s);
}

static void disconnected(zklock_session_t *s)
{
    if (s->state != ZKL_S_CONNECTED)
        return;
    s->state = ZKL_S_SUSPENDED;
    clock_gettime(CLOCK_MONOTONIC, &s->suspended_at);
    queue_state(s, ZKLOCK_SUSPENDED);
    zkl_engine_wake_all(s);
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
    else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE)
        expired(s);
}

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zklock_session_t *s = ctx;

    if (type != ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&s->mu);
    if (zh == s->zh) /* not a late word from a handle we replaced */
        handle_state(s, state);
    pthread_mutex_unlock(&s->mu);
}

void zklock_session_event(zklock_session_t *s, int type, int state)
{
    if (!s || type != ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->adopted)
        handle_state(s, state);
    pthread_mutex_unlock(&s->mu);
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
    errno = 0;
    s->zh = zookeeper_init(s->hosts, session_watcher, s->opts.timeout_ms, NULL, s, 0);
    if (!s->zh)
        return errno == ENOMEM ? ZKLOCK_ENOMEM : ZKLOCK_EINVAL;
    zoo_set_servers_resolution_delay(s->zh, ZKL_RESOLVE_EVERY_MS);
    s->state = ZKL_S_CONNECTING;
    return 0;
}

/* Closes the dead handle (its late answers are stale by generation) and
 * opens a new session. */
static void replace_handle(zklock_session_t *s)
{
    zhandle_t *old = s->retired_zh ? s->retired_zh : s->zh;

    s->need_new_handle = false;
    s->zh = s->retired_zh = NULL;
    if (old) {
        pthread_mutex_unlock(&s->mu);
        zookeeper_close(old);
        pthread_mutex_lock(&s->mu);
    }
    zkl_engine_forget_watches(s);
    if (s->thread_stop || s->state == ZKL_S_CLOSED)
        return;
    if (open_handle(s) != 0) {
        s->need_new_handle = true; /* try again shortly */
        s->retry_pending = true;
        zkl_deadline(&s->retry_at, ZKL_REOPEN_MS);
    }
}

static bool suspended_too_long(const zklock_session_t *s, struct timespec *deadline)
{
    if (s->state != ZKL_S_SUSPENDED || s->adopted)
        return false;
    later_of(deadline, &s->suspended_at, s->negotiated_ms);
    return zkl_passed(deadline);
}

/* Sleeps until the earliest of: a retry, the end of a suspension's grace,
 * an own-node watch falling due; or until kicked. */
static void wait_for_work(zklock_session_t *s)
{
    struct timespec deadline = {0, 0}, t;
    bool timed = false;

    if (s->retry_pending) {
        deadline = s->retry_at;
        timed = true;
    }
    if (s->state == ZKL_S_SUSPENDED && !s->adopted) {
        later_of(&t, &s->suspended_at, s->negotiated_ms);
        if (!timed || earlier(&t, &deadline))
            deadline = t;
        timed = true;
    }
    if (zkl_engine_arm_due(s, &t)) {
        if (!timed || earlier(&t, &deadline))
            deadline = t;
        timed = true;
    }
    s->thread_asleep = true;
    s->thread_timed = timed;
    s->thread_until = deadline;
    if (timed)
        pthread_cond_timedwait(&s->thread_cond, &s->mu, &deadline);
    else
        pthread_cond_wait(&s->thread_cond, &s->mu);
    s->thread_asleep = false;
}

/* Most calls come with a deadline the thread already wakes for: a lock
 * cycle then costs no wake-up of this thread. */
void zkl_wake_thread_by(zklock_session_t *s, const struct timespec *when)
{
    if (s->thread_asleep && (!s->thread_timed || earlier(when, &s->thread_until)))
        pthread_cond_signal(&s->thread_cond);
}

static void *session_thread(void *arg)
{
    zklock_session_t *s = arg;
    struct timespec deadline;

    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (deliver_one(s))
            continue;
        if (s->thread_stop)
            break;
        if (s->retry_pending && zkl_passed(&s->retry_at)) {
            s->retry_pending = false;
            if (s->need_new_handle)
                replace_handle(s);
            else
                zkl_engine_resume(s);
        } else if (s->need_new_handle && !s->retry_pending) {
            replace_handle(s);
        } else if (suspended_too_long(s, &deadline)) {
            expired(s);
        } else {
            wait_for_work(s);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
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

void zkl_session_free(zklock_session_t *s)
{
    zkl_inspect_forget_watches(s); /* nothing is left by now; be sure */
    while (s->cb_head) {
        struct zkl_callback *cb = s->cb_head;
        s->cb_head = cb->next;
        free(cb);
    }
    pthread_cond_destroy(&s->thread_cond);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    free(s->hosts);
    free(s->identity);
    free(s);
}

static int session_new(zklock_session_t **out, const zklock_session_opts_t *opts)
{
    zklock_session_t *s;

    if (opts && (opts->timeout_ms < 0 || opts->connect_timeout_ms < 0))
        return ZKLOCK_EINVAL;
    if (opts && opts->identity && strlen(opts->identity) > ZKLOCK_DATA_MAX)
        return ZKLOCK_EINVAL; /* the server would drop every create */
    s = calloc(1, sizeof *s);
    if (!s)
        return ZKLOCK_ENOMEM;
    if (opts)
        s->opts = *opts;
    if (s->opts.timeout_ms == 0)
        s->opts.timeout_ms = ZKL_DEFAULT_TIMEOUT_MS;
    if (s->opts.connect_timeout_ms == 0)
        s->opts.connect_timeout_ms = s->opts.timeout_ms;
    s->identity = s->opts.identity ? strdup(s->opts.identity) : default_identity();
    s->opts.identity = s->identity;
    if (!s->identity) {
        free(s);
        return ZKLOCK_ENOMEM;
    }
    if (zkl_rng_seed(s->rng) != 0 || pthread_mutex_init(&s->mu, NULL) != 0 ||
        zkl_cond_init(&s->cond) != 0 || zkl_cond_init(&s->thread_cond) != 0) {
        free(s->identity);
        free(s);
        return ZKLOCK_ESYSTEM;
    }
    *out = s;
    return 0;
}

static int start_thread(zklock_session_t *s)
{
    if (pthread_create(&s->thread, NULL, session_thread, s) != 0)
        return ZKLOCK_ESYSTEM;
    s->thread_started = true;
    return 0;
}

static void stop_thread(zklock_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->thread_stop = true;
    kick(s);
    pthread_mutex_unlock(&s->mu);
    if (s->thread_started)
        pthread_join(s->thread, NULL);
    s->thread_started = false;
}

int zklock_session_open(zklock_session_t **out, const char *hosts,
                        const zklock_session_opts_t *opts)
{
    zklock_session_t *s;
    struct timespec deadline;
    int rc;

    if (!out)
        return ZKLOCK_EINVAL;
    *out = NULL;
    if (!hosts || !*hosts)
        return ZKLOCK_EINVAL;
    rc = session_new(&s, opts);
    if (rc)
        return rc;
    s->hosts = strdup(hosts);
    if (!s->hosts) {
        zkl_session_free(s);
        return ZKLOCK_ENOMEM;
    }
    pthread_mutex_lock(&s->mu);
    rc = open_handle(s);
    if (rc == 0)
        rc = start_thread(s);
    zkl_deadline(&deadline, s->opts.connect_timeout_ms);
    while (rc == 0 && s->state != ZKL_S_CONNECTED && !zkl_passed(&deadline))
        pthread_cond_timedwait(&s->cond, &s->mu, &deadline);
    if (rc == 0 && s->state != ZKL_S_CONNECTED)
        rc = ZKLOCK_ENOSERVER;
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        zklock_session_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int zklock_session_adopt(zklock_session_t **out, zhandle_t *zh,
                         const zklock_session_opts_t *opts)
{
    zklock_session_t *s;
    int rc, state;

    if (!out)
        return ZKLOCK_EINVAL;
    *out = NULL;
    if (!zh)
        return ZKLOCK_EINVAL;
    rc = session_new(&s, opts);
    if (rc)
        return rc;
    s->zh = zh;
    s->adopted = true;
    pthread_mutex_lock(&s->mu);
    state = zoo_state(zh);
    if (state == ZOO_CONNECTED_STATE) {
        s->state = ZKL_S_CONNECTING;
        connected(s);
    } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
        s->state = ZKL_S_EXPIRED;
    } else {
        s->state = ZKL_S_CONNECTING;
    }
    rc = start_thread(s);
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        zkl_session_free(s);
        return rc;
    }
    *out = s;
    return 0;
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

int zklock_session_stats(zklock_session_t *s, zklock_stats_t *out, size_t size)
{
    if (!s || !out || size == 0)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&s->mu);
    memcpy(out, &s->stats, size < sizeof s->stats ? size : sizeof s->stats);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* An adopted session leaves the application's handle as it found it: our
 * nodes deleted (while the connection lasts, at most one session timeout),
 * our watches taken back, no request of ours in flight. */
static void drain_adopted(zklock_session_t *s)
{
    struct timespec deadline;
    bool leaving;

    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        if (c->phase == ZKL_QUEUING || c->phase == ZKL_HELD)
            zkl_give_up(c, ZKLOCK_ECLOSED);
    zkl_deadline(&deadline, s->negotiated_ms > 0 ? s->negotiated_ms : s->opts.timeout_ms);
    do {
        leaving = false;
        for (zkl_contender_t *c = s->contenders; c; c = c->sess_next)
            leaving |= c->phase == ZKL_LEAVING;
    } while (leaving && zkl_connected(s) && !zkl_passed(&deadline) &&
             pthread_cond_timedwait(&s->cond, &s->mu, &deadline) != ETIMEDOUT);
    zkl_engine_unwatch_all(s);
    while (s->ops > 0 || s->watches > 0)
        pthread_cond_wait(&s->cond, &s->mu);
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
    zkl_engine_session_ended(s, ZKLOCK_ECLOSED);
    /* Nobody may touch a handle while we close it (a waiter on its way out
     * would take its watch back): from here on there is none. */
    zh = s->adopted ? NULL : s->zh;
    retired = s->retired_zh;
    s->zh = s->retired_zh = NULL;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);

    stop_thread(s);
    if (zh)
        zookeeper_close(zh); /* flushes our requests in flight */
    if (retired)
        zookeeper_close(retired);

    pthread_mutex_lock(&s->mu);
    if (!s->adopted)
        zkl_engine_forget_watches(s);
    while (s->users > 0) /* callers on their way out with ZKLOCK_ECLOSED */
        pthread_cond_wait(&s->cond, &s->mu);
    s->close_running = false;
    free_now = zkl_session_claim_free(s);
    pthread_mutex_unlock(&s->mu);
    if (free_now)
        zkl_session_free(s);
}

/* With s->mu held: true for exactly one caller, once the session is closed
 * (zklock_session_close() has finished) and its last lock handle is gone.
 * That caller frees s after unlocking. */
bool zkl_session_claim_free(zklock_session_t *s)
{
    if (s->state != ZKL_S_CLOSED || s->close_running || s->nlocks > 0 || s->users > 0 ||
        s->free_claimed)
        return false;
    s->free_claimed = true;
    return true;
}
