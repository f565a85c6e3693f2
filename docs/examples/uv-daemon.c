/* uv-daemon.c: zklock in a libuv event loop, on one thread.
 *
 *   uv-daemon HOSTS LOCKPATH DATAPATH ROUNDS [TIMEOUT_MS]
 *
 * Each round: take LOCKPATH asynchronously (waiting up to TIMEOUT_MS,
 * default 30000), write "round N" into the node DATAPATH with a multi that
 * zklock_check_op() guards (it commits only while the lock is held),
 * release asynchronously. The loop watches the session's descriptor and
 * runs zklock's callbacks (ZKLOCK_DISPATCH_POLL); no thread waits for a
 * lock.
 *
 * What it needs: ZooKeeper at HOSTS, and the right to create LOCKPATH and
 * DATAPATH (it creates DATAPATH and its missing parents at start, open to
 * all, and leaves them). Credentials, if the ACLs ask for them: the first
 * "scheme:data" line of the file $ZKLOCK_AUTH_FILE (digest:user:password),
 * as zklock(1) reads it.
 *
 * Failures: one that may pass (a timeout, a busy lock, the connection, a
 * hold lost) is tried again after a pause that doubles each time, up to
 * 10 s; one that needs a person (credentials or an ACL that refuse, a bad
 * path) stops the daemon (exit 1) with what to fix. A retry from a done
 * callback without a pause would spin: a wrong password is refused at once,
 * thousands of times a second.
 *
 *   cc uv-daemon.c $(pkg-config --cflags --libs zklock libuv) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>
#include <zklock.h>

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 10000

struct daemon {
    uv_loop_t *loop;
    uv_poll_t zklock_fd;    /* zklock's callbacks are pending */
    uv_async_t written;     /* the multi's answer (on ZooKeeper's thread) */
    uv_timer_t retry;       /* the pause before another try */
    zklock_session_t *s;
    zklock_t *lock;
    const char *data_path;
    int round, rounds, timeout_ms, multi_rc, failed, stopped, backoff_ms;
    char value[32];
    zoo_op_t ops[2];
    zoo_op_result_t results[2];
};

static void take_lock(struct daemon *d);

/* Work only a holder (or a leader) may do: ask zklock, not the last
 * callback. After a pause (SIGSTOP, a slow host) libuv runs its timers
 * before it polls zklock's descriptor, so an on_lost may still wait in the
 * queue while a timer starts such work; zklock_valid_until() answers from
 * zklock's own state. Check it before the work, and in the done of an
 * acquisition that only a leader should make (it may be granted just before
 * the leadership's on_lost runs); in that on_lost, zklock_cancel() such
 * acquisitions. zklock(3), "Leader-only work in an event loop". */
static int still_holds(const zklock_t *l)
{
    struct timespec until, now;

    if (zklock_valid_until(l, &until) != ZKLOCK_OK)
        return 0;
    clock_gettime(ZKLOCK_CLOCK, &now);
    return now.tv_sec < until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec < until.tv_nsec);
}

/* Ends the loop; zklock_free() then releases what is still held. */
static void stop(struct daemon *d, const char *what, const char *why)
{
    if (d->stopped)
        return;
    d->stopped = 1;
    if (why) {
        fprintf(stderr, "uv-daemon: %s: %s\n", what, why);
        d->failed = 1;
    }
    uv_close((uv_handle_t *)&d->zklock_fd, NULL);
    uv_close((uv_handle_t *)&d->written, NULL);
    uv_close((uv_handle_t *)&d->retry, NULL);
}

/* ---- trying again, with a pause ------------------------------------------------ */

/* Worth another try: what the connection, the session or other holders
 * cause passes by itself. The rest (ZNOAUTH: an ACL refuses these
 * credentials; ZAUTHFAILED, ZKLOCK_EINVAL, ...) would fail the same way. */
static int may_pass(int rc)
{
    switch (rc) {
    case ZKLOCK_ETIMEDOUT: case ZKLOCK_EBUSY: case ZKLOCK_ELOST: case ZKLOCK_ENOSERVER:
    case ZCONNECTIONLOSS: case ZOPERATIONTIMEOUT: case ZSESSIONEXPIRED: case ZSESSIONMOVED:
        return 1;
    }
    return 0;
}

static void on_retry(uv_timer_t *t)
{
    take_lock(t->data);
}

/* The round failed with rc: take the lock again after a pause, or stop. */
static void retry_later(struct daemon *d, const char *what, int rc)
{
    if (d->stopped)
        return;
    if (!may_pass(rc)) {
        stop(d, what, rc == ZNOAUTH ? "not allowed by the ACL: check the credentials in "
                                      "$ZKLOCK_AUTH_FILE (a wrong digest password is "
                                      "another identity) and the ACL of the lock path"
                                    : zklock_strerror(rc));
        return;
    }
    fprintf(stderr, "uv-daemon: %s: %s: trying again in %.1fs\n", what, zklock_strerror(rc),
            d->backoff_ms / 1000.0);
    uv_timer_start(&d->retry, on_retry, (uint64_t)d->backoff_ms, 0);
    d->backoff_ms = d->backoff_ms * 2 < BACKOFF_MAX_MS ? d->backoff_ms * 2 : BACKOFF_MAX_MS;
}

/* ---- a round -------------------------------------------------------------------- */

/* The round's write is in. ZKLOCK_ELOST: the hold was lost after it, and
 * there was nothing left to release. */
static void released(zklock_t *l, int rc, void *ctx)
{
    struct daemon *d = ctx;

    if (rc != ZKLOCK_OK && rc != ZKLOCK_ELOST)
        stop(d, "release", zklock_strerror(rc));
    else if (++d->round < d->rounds)
        take_lock(d);
    else
        stop(d, "done", NULL);
}

/* A guarded write failed and the round starts again: what is left of the
 * hold goes first (a lost one is gone already). */
static void released_after_failure(zklock_t *l, int rc, void *ctx)
{
    struct daemon *d = ctx;
    retry_later(d, "guarded write", d->multi_rc);
}

/* On ZooKeeper's completion thread: hand the answer to the loop. */
static void multi_done(int rc, const void *data)
{
    struct daemon *d = (struct daemon *)data;
    d->multi_rc = rc;
    uv_async_send(&d->written);
}

/* Which op of the multi failed: the check (the hold was lost) or the write. */
static int check_failed(const struct daemon *d)
{
    return d->results[0].err != ZOK && d->results[0].err != ZRUNTIMEINCONSISTENCY;
}

static void on_written(uv_async_t *a)
{
    struct daemon *d = a->data;
    int64_t token = 0;

    zklock_fence(d->lock, &token);
    if (d->multi_rc == ZOK) {
        printf("round %d: wrote %s with the lock held (token %lld)\n", d->round + 1,
               d->data_path, (long long)token);
        fflush(stdout);
        d->backoff_ms = BACKOFF_FIRST_MS;
        zklock_release_async(d->lock, released, d);
        return;
    }
    if (d->multi_rc == ZNONODE && !check_failed(d)) {
        stop(d, "guarded write", "DATAPATH no longer exists (deleted since the start?)");
        return;
    }
    if (check_failed(d))
        d->multi_rc = ZKLOCK_ELOST; /* the hold was lost: nothing written */
    if (zklock_release_async(d->lock, released_after_failure, d) != ZKLOCK_OK)
        retry_later(d, "guarded write", d->multi_rc); /* nothing left to release */
}

static void acquired(zklock_t *l, int rc, void *ctx)
{
    struct daemon *d = ctx;

    if (rc != ZKLOCK_OK) {
        retry_later(d, "acquire", rc);
        return;
    }
    if (!still_holds(l)) {
        /* granted, but the lease ran out before this callback ran: let it go */
        d->multi_rc = ZKLOCK_ELOST;
        if (zklock_release_async(d->lock, released_after_failure, d) != ZKLOCK_OK)
            retry_later(d, "acquire", ZKLOCK_ELOST);
        return;
    }
    if (d->stopped)
        return; /* zklock_free() releases it */
    /* The write and the check that we still hold commit together, or not at all. */
    snprintf(d->value, sizeof d->value, "round %d", d->round + 1);
    if (zklock_check_op(l, &d->ops[0]) != ZKLOCK_OK) {
        retry_later(d, "guarded write", ZKLOCK_ELOST); /* lost already */
        return;
    }
    zoo_set_op_init(&d->ops[1], d->data_path, d->value, (int)strlen(d->value), -1, NULL);
    rc = zoo_amulti(zklock_session_zhandle(d->s), 2, d->ops, d->results, multi_done, d);
    if (rc != ZOK) {
        d->multi_rc = rc;
        if (zklock_release_async(l, released_after_failure, d) != ZKLOCK_OK)
            retry_later(d, "guarded write", rc);
    }
}

static void take_lock(struct daemon *d)
{
    int rc;

    if (d->stopped)
        return;
    rc = zklock_acquire_async(d->lock, d->timeout_ms, acquired, d);
    if (rc != ZKLOCK_OK)
        retry_later(d, "acquire", rc);
}

/* zklock's descriptor is readable: run its pending callbacks here. */
static void on_zklock(uv_poll_t *p, int status, int events)
{
    zklock_session_dispatch(((struct daemon *)p->data)->s);
}

/* ---- starting ------------------------------------------------------------------ */

/* path, and its missing parents, as empty nodes open to all (at start,
 * before the loop runs: a blocking call is fine here). */
static int make_path(zhandle_t *zh, const char *path)
{
    int rc = zoo_create(zh, path, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    char *parent, *slash;

    if (rc != ZNONODE)
        return rc == ZNODEEXISTS ? ZOK : rc;
    if (!(parent = strdup(path)))
        return ZKLOCK_ENOMEM;
    slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        rc = make_path(zh, parent);
    }
    free(parent);
    return rc == ZOK ? make_path(zh, path) : rc;
}

/* The first "scheme:data" line of $ZKLOCK_AUTH_FILE, if set, into auth
 * (line is its storage). Returns 0, or -1 if the file cannot be used. */
static int read_credentials(zklock_auth_t *auth, char *line, size_t size, size_t *n)
{
    const char *file = getenv("ZKLOCK_AUTH_FILE");
    FILE *f;
    char *colon;

    *n = 0;
    if (!file)
        return 0;
    if (!(f = fopen(file, "r")))
        return -1;
    while (fgets(line, (int)size, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        if (!(colon = strchr(line, ':')))
            break;
        *colon = '\0';
        *auth = (zklock_auth_t){line, colon + 1, strlen(colon + 1)};
        *n = 1;
        break;
    }
    fclose(f);
    return *n ? 0 : -1;
}

int main(int argc, char **argv)
{
    zklock_session_opts_t so = {.dispatch = ZKLOCK_DISPATCH_POLL};
    zklock_opts_t lo = {.owner = ZKLOCK_OWNER_HANDLE}; /* callbacks may release it */
    struct daemon d = {0};
    zklock_auth_t auth;
    char line[1024];
    int rc;

    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: uv-daemon HOSTS LOCKPATH DATAPATH ROUNDS [TIMEOUT_MS]\n");
        return 2;
    }
    zoo_set_debug_level(0);
    d.loop = uv_default_loop();
    d.data_path = argv[3];
    d.rounds = atoi(argv[4]);
    d.timeout_ms = argc == 6 ? atoi(argv[5]) : 30000;
    d.backoff_ms = BACKOFF_FIRST_MS;
    if (read_credentials(&auth, line, sizeof line, &so.nauth) != 0) {
        fprintf(stderr, "uv-daemon: $ZKLOCK_AUTH_FILE: no scheme:data line to read\n");
        return 1;
    }
    so.auth = &auth;
    if ((rc = zklock_session_open(&d.s, argv[1], &so)) != ZKLOCK_OK ||
        (rc = zklock_mutex_new(&d.lock, d.s, argv[2], &lo)) != ZKLOCK_OK) {
        fprintf(stderr, "uv-daemon: %s\n", zklock_strerror(rc));
        return 1;
    }
    if ((rc = make_path(zklock_session_zhandle(d.s), d.data_path)) != ZOK) {
        fprintf(stderr, "uv-daemon: cannot create DATAPATH %s: %s\n", d.data_path,
                zklock_strerror(rc));
        zklock_free(d.lock);
        zklock_session_close(d.s);
        return 1;
    }
    uv_poll_init(d.loop, &d.zklock_fd, zklock_session_fd(d.s));
    uv_poll_start(&d.zklock_fd, UV_READABLE, on_zklock);
    uv_async_init(d.loop, &d.written, on_written);
    uv_timer_init(d.loop, &d.retry);
    d.zklock_fd.data = d.written.data = d.retry.data = &d;
    take_lock(&d);
    uv_run(d.loop, UV_RUN_DEFAULT);
    zklock_free(d.lock);
    zklock_session_close(d.s);
    uv_loop_close(d.loop);
    return d.failed;
}
