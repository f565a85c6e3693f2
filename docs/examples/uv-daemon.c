/* uv-daemon.c: zklock in a libuv event loop, on one thread.
 *
 *   uv-daemon HOSTS LOCKPATH DATAPATH ROUNDS
 *
 * Each round: take LOCKPATH asynchronously, write "round N" into DATAPATH
 * with a multi that zklock_check_op() guards (it commits only while the lock
 * is held), release asynchronously. The loop watches the session's
 * descriptor and runs zklock's callbacks (ZKLOCK_DISPATCH_POLL); no thread
 * waits for a lock.
 *
 *   cc uv-daemon.c $(pkg-config --cflags --libs zklock libuv) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>
#include <zklock.h>

struct daemon {
    uv_loop_t *loop;
    uv_poll_t zklock_fd;    /* zklock's callbacks are pending */
    uv_async_t written;     /* the multi's answer (on ZooKeeper's thread) */
    zklock_session_t *s;
    zklock_t *lock;
    const char *data_path;
    int round, rounds, multi_rc, failed;
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
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec < until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec < until.tv_nsec);
}

static void stop(struct daemon *d, const char *what, int rc)
{
    if (rc) {
        fprintf(stderr, "uv-daemon: %s: %s\n", what, zklock_strerror(rc));
        d->failed = 1;
    }
    uv_close((uv_handle_t *)&d->zklock_fd, NULL);
    uv_close((uv_handle_t *)&d->written, NULL);
}

static void released(zklock_t *l, int rc, void *ctx)
{
    struct daemon *d = ctx;

    if (rc != ZKLOCK_OK)
        stop(d, "release", rc);
    else if (++d->round < d->rounds)
        take_lock(d);
    else
        stop(d, "done", 0);
}

/* On ZooKeeper's completion thread: hand the answer to the loop. */
static void multi_done(int rc, const void *data)
{
    struct daemon *d = (struct daemon *)data;
    d->multi_rc = rc;
    uv_async_send(&d->written);
}

static void on_written(uv_async_t *a)
{
    struct daemon *d = a->data;
    int64_t token = 0;

    zklock_fence(d->lock, &token);
    if (d->multi_rc != ZOK) {
        stop(d, "guarded write", d->multi_rc); /* the hold was lost: nothing written */
        return;
    }
    printf("round %d: wrote %s with the lock held (token %lld)\n", d->round + 1, d->data_path,
           (long long)token);
    fflush(stdout);
    zklock_release_async(d->lock, released, d);
}

static void acquired(zklock_t *l, int rc, void *ctx)
{
    struct daemon *d = ctx;

    if (rc != ZKLOCK_OK || !still_holds(l)) {
        stop(d, "acquire", rc != ZKLOCK_OK ? rc : ZKLOCK_ELOST);
        return;
    }
    /* The write and the check that we still hold commit together, or not at all. */
    snprintf(d->value, sizeof d->value, "round %d", d->round + 1);
    zklock_check_op(l, &d->ops[0]);
    zoo_set_op_init(&d->ops[1], d->data_path, d->value, (int)strlen(d->value), -1, NULL);
    rc = zoo_amulti(zklock_session_zhandle(d->s), 2, d->ops, d->results, multi_done, d);
    if (rc != ZOK)
        stop(d, "multi", rc);
}

static void take_lock(struct daemon *d)
{
    int rc = zklock_acquire_async(d->lock, 30000, acquired, d);
    if (rc != ZKLOCK_OK)
        stop(d, "acquire", rc);
}

/* zklock's descriptor is readable: run its pending callbacks here. */
static void on_zklock(uv_poll_t *p, int status, int events)
{
    zklock_session_dispatch(((struct daemon *)p->data)->s);
}

int main(int argc, char **argv)
{
    zklock_session_opts_t so = {.dispatch = ZKLOCK_DISPATCH_POLL};
    zklock_opts_t lo = {.owner = ZKLOCK_OWNER_HANDLE}; /* callbacks may release it */
    struct daemon d = {0};
    int rc;

    if (argc != 5) {
        fprintf(stderr, "usage: uv-daemon HOSTS LOCKPATH DATAPATH ROUNDS\n");
        return 2;
    }
    zoo_set_debug_level(0);
    d.loop = uv_default_loop();
    d.data_path = argv[3];
    d.rounds = atoi(argv[4]);
    if ((rc = zklock_session_open(&d.s, argv[1], &so)) != ZKLOCK_OK ||
        (rc = zklock_mutex_new(&d.lock, d.s, argv[2], &lo)) != ZKLOCK_OK) {
        fprintf(stderr, "uv-daemon: %s\n", zklock_strerror(rc));
        return 1;
    }
    uv_poll_init(d.loop, &d.zklock_fd, zklock_session_fd(d.s));
    uv_poll_start(&d.zklock_fd, UV_READABLE, on_zklock);
    uv_async_init(d.loop, &d.written, on_written);
    d.zklock_fd.data = d.written.data = &d;
    take_lock(&d);
    uv_run(d.loop, UV_RUN_DEFAULT);
    zklock_free(d.lock);
    zklock_session_close(d.s);
    uv_loop_close(d.loop);
    return d.failed;
}
