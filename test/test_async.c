/* test_async.c: handle-owned locks, asynchronous calls, dispatch on the
 * caller's thread, what callbacks may call, guarded writes. */
#include "testutil.h"

#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- a session whose callbacks run in our dispatch ---------------------------------- */

static zklock_session_t *poll_session_timeout(int timeout_ms)
{
    zklock_session_opts_t o = {.timeout_ms = timeout_ms, .dispatch = ZKLOCK_DISPATCH_POLL};
    return tu_session_opts(&o);
}

static zklock_session_t *poll_session(void)
{
    return poll_session_timeout(6000);
}

static zklock_t *handle_mutex(zklock_session_t *s, const char *path, const zklock_opts_t *base)
{
    zklock_opts_t o = {0};
    if (base)
        o = *base;
    o.owner = ZKLOCK_OWNER_HANDLE;
    return tu_mutex(s, path, &o);
}

/* One call's outcome, recorded by `done`. */
struct outcome {
    int calls, rc;
    zklock_t *l;
};

static void done(zklock_t *l, int rc, void *ctx)
{
    struct outcome *o = ctx;
    __atomic_store_n(&o->rc, rc, __ATOMIC_SEQ_CST);
    o->l = l;
    __atomic_add_fetch(&o->calls, 1, __ATOMIC_SEQ_CST);
}

static bool called(void *o)
{
    return __atomic_load_n(&((struct outcome *)o)->calls, __ATOMIC_SEQ_CST) > 0;
}

/* The caller's event loop: polls the session's descriptor and dispatches
 * until cond(arg) holds, or ms pass. */
static bool loop_while_not(zklock_session_t *s, bool (*cond)(void *), void *arg, int ms)
{
    return tu_dispatch_until(s, cond, arg, ms);
}

static bool loop_until(zklock_session_t *s, struct outcome *o, int ms)
{
    return loop_while_not(s, called, o, ms);
}

static bool fd_readable(zklock_session_t *s)
{
    struct pollfd p = {zklock_session_fd(s), POLLIN, 0};
    return poll(&p, 1, 0) == 1;
}

/* ---- the basics --------------------------------------------------------------------------- */

static void test_acquire_release_async(void)
{
    zklock_session_t *s = poll_session();
    const char *path = tu_path("async-basic");
    zklock_t *l = handle_mutex(s, path, NULL);
    struct outcome a = {0}, r = {0}, again = {0};
    int64_t token;
    zklock_lock_stats_t st;

    TU_ASSERT_INT(zklock_session_fd(s), >=, 0);
    CU_ASSERT(!fd_readable(s));
    TU_REQUIRE_RC(zklock_acquire_async(l, 10000, done, &a), ZKLOCK_OK);
    TU_ASSERT_INT(a.calls, ==, 0); /* never from inside the call */
    CU_ASSERT_FATAL(loop_until(s, &a, TU_WAIT_MS));
    TU_ASSERT_RC(a.rc, ZKLOCK_OK);
    CU_ASSERT(a.l == l);
    CU_ASSERT(!fd_readable(s)); /* level: nothing pending any more */
    TU_ASSERT_INT(zklock_hold_count(l), ==, 1);
    TU_ASSERT_RC(zklock_fence(l, &token), ZKLOCK_OK);
    /* Reentrant: counts up at once (still through done). */
    TU_REQUIRE_RC(zklock_acquire_async(l, 0, done, &again), ZKLOCK_OK);
    CU_ASSERT(loop_until(s, &again, TU_WAIT_MS));
    TU_ASSERT_RC(again.rc, ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 2);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK); /* any thread, here ours */
    TU_REQUIRE_RC(zklock_release_async(l, done, &r), ZKLOCK_OK);
    CU_ASSERT(loop_until(s, &r, TU_WAIT_MS));
    TU_ASSERT_RC(r.rc, ZKLOCK_OK);
    CU_ASSERT(tu_no_children(path)); /* done came after the server confirmed */
    TU_ASSERT_RC(zklock_release_async(l, done, &r), ZKLOCK_ENOTHELD);
    TU_ASSERT_INT(a.calls + again.calls + r.calls, ==, 3);
    /* zklock_lock_stats: the asynchronous calls count as the blocking ones. */
    TU_REQUIRE_RC(zklock_lock_stats(l, &st, sizeof st), ZKLOCK_OK);
    TU_ASSERT_INT(st.acquired, ==, 1);
    TU_ASSERT_INT(st.reentered, ==, 1);
    TU_ASSERT_INT(st.wait.count, ==, 1);
    TU_ASSERT_INT(st.hold.count, ==, 1);
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static void test_async_refusals(void)
{
    zklock_session_t *s = poll_session(), *ts = tu_session();
    const char *path = tu_path("async-refused");
    zklock_t *thread_owned = tu_mutex(s, path, NULL), *l = handle_mutex(s, path, NULL);
    zklock_t *holder = tu_mutex(ts, path, NULL);
    struct outcome a = {0}, b = {0};

    /* The likeliest first mistake gets the code whose text says what to set. */
    TU_ASSERT_RC(zklock_acquire_async(thread_owned, -1, done, &a), ZKLOCK_EOWNER);
    TU_ASSERT_RC(zklock_release_async(thread_owned, done, &a), ZKLOCK_EOWNER);
    CU_ASSERT(strstr(zklock_strerror(ZKLOCK_EOWNER), "ZKLOCK_OWNER_HANDLE") != NULL);
    TU_ASSERT_RC(zklock_acquire_async(l, -1, NULL, &a), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_acquire_async(l, -2, done, &a), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_acquire_async(NULL, -1, done, &a), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_session_fd(ts), ZKLOCK_EINVAL); /* it dispatches itself */
    TU_ASSERT_RC(zklock_session_dispatch(ts), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_session_dispatch(NULL), ZKLOCK_EINVAL);
    /* Held elsewhere, so that l's acquisition stays pending (it could be
     * over before the next line on a slow machine, and the next acquire
     * would then count up). */
    TU_REQUIRE_RC(zklock_acquire(holder, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire_async(l, TU_WAIT_MS, done, &a), ZKLOCK_OK);
    /* One acquisition at a time per handle, blocking or not. */
    TU_ASSERT_RC(zklock_acquire_async(l, 10000, done, &b), ZKLOCK_EBUSY);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_EBUSY);
    TU_ASSERT_RC(zklock_release(holder), ZKLOCK_OK);
    CU_ASSERT(loop_until(s, &a, TU_WAIT_MS));
    TU_ASSERT_RC(a.rc, ZKLOCK_OK);
    TU_ASSERT_INT(b.calls, ==, 0);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_free(thread_owned);
    zklock_free(holder);
    zklock_session_close(s);
    zklock_session_close(ts);
    tu_assert_clean(path);
}

/* ---- outcomes other than OK ------------------------------------------------------------- */

static void test_async_busy_timeout_cancel(void)
{
    zklock_session_t *s = poll_session(), *h = tu_session();
    const char *path = tu_path("async-fail");
    zklock_t *holder = tu_mutex(h, path, NULL), *l = handle_mutex(s, path, NULL);
    struct outcome busy = {0}, late = {0}, canceled = {0};
    int64_t t0;
    zklock_lock_stats_t st;

    TU_REQUIRE_RC(zklock_acquire(holder, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire_async(l, 0, done, &busy), ZKLOCK_OK);
    CU_ASSERT(loop_until(s, &busy, TU_WAIT_MS));
    TU_ASSERT_RC(busy.rc, ZKLOCK_EBUSY);
    /* A deadline needs no timer of ours: polling is enough. */
    t0 = tu_now_ms();
    TU_REQUIRE_RC(zklock_acquire_async(l, 300, done, &late), ZKLOCK_OK);
    CU_ASSERT(loop_until(s, &late, TU_WAIT_MS));
    TU_ASSERT_RC(late.rc, ZKLOCK_ETIMEDOUT);
    TU_ASSERT_INT(tu_now_ms() - t0, >=, 300);
    TU_REQUIRE_RC(zklock_acquire_async(l, -1, done, &canceled), ZKLOCK_OK);
    CU_ASSERT(tu_wait_children(path, 2));
    TU_ASSERT_RC(zklock_cancel(l), ZKLOCK_OK);
    CU_ASSERT(loop_until(s, &canceled, TU_WAIT_MS));
    TU_ASSERT_RC(canceled.rc, ZKLOCK_ECANCELED);
    CU_ASSERT(tu_wait_children(path, 1)); /* nothing of ours left */
    TU_ASSERT_INT(busy.calls + late.calls + canceled.calls, ==, 3);
    TU_REQUIRE_RC(zklock_lock_stats(l, &st, sizeof st), ZKLOCK_OK);
    TU_ASSERT_INT(st.timeouts, ==, 2); /* the try-once and the deadline */
    TU_ASSERT_INT(st.canceled, ==, 1);
    TU_ASSERT_INT(st.acquired + st.failed + st.wait.count, ==, 0);
    TU_ASSERT_RC(zklock_release(holder), ZKLOCK_OK);
    zklock_free(l);
    zklock_free(holder);
    zklock_session_close(s);
    zklock_session_close(h);
    tu_assert_clean(path);
}

/* zklock_free and zklock_session_close with calls pending: each done once,
 * before the call returns; nothing left on the server. */
static void test_pending_calls_at_free_and_close(void)
{
    zklock_session_t *s = poll_session(), *h = tu_session();
    const char *path = tu_path("async-pending");
    zklock_t *holder = tu_mutex(h, path, NULL), *l = handle_mutex(s, path, NULL), *l2;
    struct outcome freed = {0}, closed = {0};

    TU_REQUIRE_RC(zklock_acquire(holder, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire_async(l, -1, done, &freed), ZKLOCK_OK);
    CU_ASSERT(tu_wait_children(path, 2));
    zklock_free(l);
    TU_ASSERT_INT(freed.calls, ==, 1);
    TU_ASSERT_RC(freed.rc, ZKLOCK_ECANCELED);
    CU_ASSERT(tu_wait_children(path, 1));
    l2 = handle_mutex(s, path, NULL);
    TU_REQUIRE_RC(zklock_acquire_async(l2, -1, done, &closed), ZKLOCK_OK);
    CU_ASSERT(tu_wait_children(path, 2));
    zklock_session_close(s);
    TU_ASSERT_INT(closed.calls, ==, 1);
    TU_ASSERT_RC(closed.rc, ZKLOCK_ECLOSED);
    zklock_free(l2);
    CU_ASSERT(tu_wait_children(path, 1));
    TU_ASSERT_RC(zklock_release(holder), ZKLOCK_OK);
    zklock_free(holder);
    zklock_session_close(h);
    tu_assert_clean(path);
}

/* ---- what a callback may call ----------------------------------------------------------------- */

struct inside {
    zklock_t *handle_owned, *thread_owned, *other;
    int timed_rc, thread_try_rc, try_rc, count, fence_rc, check_rc, release_rc, async_rc;
    struct outcome chained;
    int ran; /* __atomic */
};

static void in_callback(zklock_t *l, int rc, void *ctx)
{
    struct inside *in = ctx;
    int64_t token;
    zoo_op_t op;

    in->timed_rc = zklock_acquire(in->other, 5000);      /* would wait: refused */
    in->thread_try_rc = zklock_acquire(in->thread_owned, 0); /* nobody could release */
    in->count = zklock_hold_count(l);
    in->fence_rc = zklock_fence(l, &token);
    in->check_rc = zklock_check_op(l, &op);
    in->try_rc = zklock_acquire(in->other, 0);           /* one round trip: fine */
    if (in->try_rc == ZKLOCK_OK)
        zklock_release(in->other);                       /* handle-owned: at once */
    in->release_rc = zklock_release(l);                  /* handle-owned: at once */
    in->async_rc = zklock_acquire_async(l, 10000, done, &in->chained);
    __atomic_store_n(&in->ran, 1, __ATOMIC_SEQ_CST);
}

static bool inside_ran(void *in)
{
    return __atomic_load_n(&((struct inside *)in)->ran, __ATOMIC_SEQ_CST) != 0;
}

static void check_callback_rules(zklock_session_t *s, bool poll_mode)
{
    const char *path = tu_path("in-callback"), *path2 = tu_path("in-callback-2");
    struct inside in = {0};
    zklock_t *l = handle_mutex(s, path, NULL);

    in.handle_owned = l;
    in.thread_owned = tu_mutex(s, path2, NULL);
    in.other = handle_mutex(s, path2, NULL);
    TU_REQUIRE_RC(zklock_acquire_async(l, 10000, in_callback, &in), ZKLOCK_OK);
    if (poll_mode)
        CU_ASSERT_FATAL(loop_while_not(s, inside_ran, &in, TU_WAIT_MS));
    CU_ASSERT_FATAL(tu_wait_until(inside_ran, &in, TU_WAIT_MS));
    TU_ASSERT_RC(in.timed_rc, ZKLOCK_EDEADLK);
    TU_ASSERT_RC(in.thread_try_rc, ZKLOCK_EOWNER);
    TU_ASSERT_INT(in.count, ==, 1);
    TU_ASSERT_RC(in.fence_rc, ZKLOCK_OK);
    TU_ASSERT_RC(in.check_rc, ZKLOCK_OK);
    TU_ASSERT_RC(in.try_rc, ZKLOCK_OK);
    TU_ASSERT_RC(in.release_rc, ZKLOCK_OK);
    TU_ASSERT_RC(in.async_rc, ZKLOCK_OK);
    if (poll_mode)
        CU_ASSERT(loop_until(s, &in.chained, TU_WAIT_MS));
    CU_ASSERT(tu_wait_until(called, &in.chained, TU_WAIT_MS));
    TU_ASSERT_RC(in.chained.rc, ZKLOCK_OK); /* the background release went first */
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_free(in.thread_owned);
    zklock_free(in.other);
    tu_assert_clean(path);
    tu_assert_clean(path2);
}

static void test_callback_rules_thread_dispatch(void)
{
    zklock_session_t *s = tu_session();
    check_callback_rules(s, false);
    zklock_session_close(s);
}

static void test_callback_rules_poll_dispatch(void)
{
    zklock_session_t *s = poll_session();
    check_callback_rules(s, true);
    TU_ASSERT_INT(zklock_session_dispatch(s), ==, 0);
    zklock_session_close(s);
}

/* ---- lost holds ---------------------------------------------------------------------------------- */

struct lost_release {
    zklock_t *l;
    int rc1, rc2;
};

static void *release_twice(void *arg)
{
    struct lost_release *lr = arg;
    lr->rc1 = zklock_release(lr->l);
    lr->rc2 = zklock_release(lr->l);
    return NULL;
}

/* A handle-owned hold that is lost: on_lost says so, and a release from any
 * thread answers ZKLOCK_ELOST, once. */
static void test_handle_owned_hold_lost(void)
{
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_session_t *s = tu_session();
    const char *path = tu_path("async-lost");
    zklock_t *l = handle_mutex(s, path, &lo);
    struct lost_release lr = {l, 0, 0};
    pthread_t t;

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    tu_expire(s);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_EXPIRED);
    pthread_create(&t, NULL, release_twice, &lr);
    pthread_join(t, NULL);
    TU_ASSERT_RC(lr.rc1, ZKLOCK_ELOST);
    TU_ASSERT_RC(lr.rc2, ZKLOCK_ENOTHELD);
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* ---- guarded writes ---------------------------------------------------------------------------- */

/* A multi guarded by zklock_check_op commits while the lock is held, and
 * writes nothing once the hold is lost. */
static void test_check_op_guards_a_multi(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("guarded"), *data_path = tu_path("guarded-data");
    zklock_t *l = handle_mutex(s, path, NULL);
    zoo_op_t ops[2];
    zoo_op_result_t results[2];
    char buf[16], node[512], **kids;
    int n;

    zoo_create(tu_zk(), "/zklock-test", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0); /* may exist */
    TU_REQUIRE_RC(zoo_create(tu_zk(), data_path, "v0", 2, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    TU_ASSERT_RC(zklock_check_op(l, &ops[0]), ZKLOCK_ENOTHELD);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_check_op(l, &ops[0]), ZKLOCK_OK);
    zoo_set_op_init(&ops[1], data_path, "v1", 2, -1, NULL);
    TU_ASSERT_RC(zoo_multi(zklock_session_zhandle(s), 2, ops, results), ZOK);
    TU_ASSERT_INT(tu_get(data_path, buf, sizeof buf), ==, 2);
    CU_ASSERT(strncmp(buf, "v1", 2) == 0);
    /* An operator deletes the holder's node: the guard fails, nothing is written. */
    kids = tu_children(path, &n);
    TU_REQUIRE_RC(n, 1);
    snprintf(node, sizeof node, "%s/%s", path, kids[0]);
    tu_free_strings(kids);
    TU_REQUIRE_RC(zoo_delete(tu_zk(), node, -1), ZOK);
    zoo_set_op_init(&ops[1], data_path, "v2", 2, -1, NULL);
    TU_ASSERT_RC(zoo_multi(zklock_session_zhandle(s), 2, ops, results), ZNONODE);
    TU_ASSERT_INT(tu_get(data_path, buf, sizeof buf), ==, 2);
    CU_ASSERT(strncmp(buf, "v1", 2) == 0);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_check_op(l, &ops[0]), ZKLOCK_ENOTHELD);
    /* Again after a session expiry. */
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_check_op(l, &ops[0]), ZKLOCK_OK);
    tu_expire(s);
    zoo_set_op_init(&ops[1], data_path, "v3", 2, -1, NULL);
    TU_ASSERT_RC(zoo_multi(zklock_session_zhandle(s), 2, ops, results), ZNONODE);
    TU_ASSERT_INT(tu_get(data_path, buf, sizeof buf), ==, 2);
    CU_ASSERT(strncmp(buf, "v1", 2) == 0);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    zklock_free(l);
    zklock_session_close(s);
    TU_ASSERT_RC(zoo_delete(tu_zk(), data_path, -1), ZOK);
    tu_assert_clean(path);
}

/* ---- a handle-owned read/write lock ----------------------------------------------------------- */

static void test_handle_owned_rwlock(void)
{
    zklock_session_t *s = poll_session();
    const char *path = tu_path("async-rw");
    zklock_opts_t o = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_rwlock_t *rw = NULL;
    zklock_t *r, *w;
    struct outcome got_w = {0}, got_r = {0};

    TU_REQUIRE_RC(zklock_rwlock_new(&rw, s, path, &o), ZKLOCK_OK);
    r = zklock_rwlock_read(rw);
    w = zklock_rwlock_write(rw);
    TU_REQUIRE_RC(zklock_acquire_async(w, 10000, done, &got_w), ZKLOCK_OK);
    CU_ASSERT(loop_until(s, &got_w, TU_WAIT_MS));
    TU_ASSERT_RC(got_w.rc, ZKLOCK_OK);
    /* The pair is one owner: the read side is a downgrade, held at once. */
    TU_REQUIRE_RC(zklock_acquire_async(r, 0, done, &got_r), ZKLOCK_OK);
    CU_ASSERT(loop_until(s, &got_r, TU_WAIT_MS));
    TU_ASSERT_RC(got_r.rc, ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(w), ZKLOCK_OK);
    /* ... and asking for the write side while reading is an upgrade. */
    TU_ASSERT_RC(zklock_acquire(w, 0), ZKLOCK_EDEADLK);
    TU_ASSERT_RC(zklock_release(r), ZKLOCK_OK);
    zklock_rwlock_free(rw);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* What a recipe refuses before queuing (an upgrade, another acquisition of
 * the pair or of a member in progress, a multi-lock whose member is held)
 * is refused as the blocking call refuses it: returned, and done is never
 * called. */
static void test_async_refusals_of_recipes(void)
{
    zklock_session_t *s = poll_session(), *h = tu_session();
    const char *path = tu_path("async-rw-refused"), *mpath = tu_path("async-multi-refused");
    zklock_opts_t o = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_rwlock_t *rw = NULL, *other = NULL;
    zklock_t *r, *w, *member, *m = NULL;
    struct outcome got_r = {0}, upgrade = {0}, pair_busy = {0}, multi = {0};

    TU_REQUIRE_RC(zklock_rwlock_new(&rw, s, path, &o), ZKLOCK_OK);
    r = zklock_rwlock_read(rw);
    w = zklock_rwlock_write(rw);
    /* The read side waits behind a writer: its acquisition is in progress. */
    TU_REQUIRE_RC(zklock_rwlock_new(&other, h, path, NULL), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(other), -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire_async(r, TU_WAIT_MS, done, &got_r), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire_async(w, 10000, done, &pair_busy), ZKLOCK_EBUSY);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(other)), ZKLOCK_OK);
    CU_ASSERT(loop_until(s, &got_r, TU_WAIT_MS));
    TU_ASSERT_RC(got_r.rc, ZKLOCK_OK);
    /* Reading, the write side is an upgrade. */
    TU_ASSERT_RC(zklock_acquire_async(w, 0, done, &upgrade), ZKLOCK_EDEADLK);
    /* A multi-lock whose member its owner holds. */
    member = handle_mutex(s, mpath, NULL);
    TU_REQUIRE_RC(zklock_multi_new(&m, &member, 1, &o), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(member, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire_async(m, 10000, done, &multi), ZKLOCK_EDEADLK);
    TU_ASSERT_RC(zklock_release(member), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(r), ZKLOCK_OK);
    /* Whatever is still to run has run: none of the refused calls' done. */
    zklock_session_dispatch(s);
    TU_ASSERT_INT(upgrade.calls + pair_busy.calls + multi.calls, ==, 0);
    zklock_free(m);
    zklock_free(member);
    zklock_rwlock_free(rw);
    zklock_rwlock_free(other);
    zklock_session_close(s);
    zklock_session_close(h);
    tu_assert_clean(path);
    tu_assert_clean(mpath);
}

/* ---- scale on one thread ------------------------------------------------------------------------ */

static int threads_now(void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");

    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

struct tally {
    int pending, failures;
};

static void count_down(zklock_t *l, int rc, void *ctx)
{
    struct tally *t = ctx;
    t->pending--;
    t->failures += rc != ZKLOCK_OK;
}

static bool tally_done(void *t)
{
    return ((struct tally *)t)->pending == 0;
}

/* One thread, one session: 10,000 acquisitions of 10,000 locks at once,
 * and no thread more than the session's own. */
static void test_ten_thousand_locks(void)
{
    const int LOCKS = tu_scaled(10000);
    /* A long session timeout: 20,000 requests queue up in the client at
     * once, and a lease counts from when a request was queued (a slow,
     * sanitized build takes seconds to drain them). */
    zklock_session_t *s = poll_session_timeout(60000);
    zklock_t **l = calloc(LOCKS, sizeof *l);
    char prefix[256], path[300];
    struct tally t = {LOCKS, 0};
    int threads;

    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    snprintf(prefix, sizeof prefix, "%s", tu_path("ten-thousand"));
    for (int i = 0; i < LOCKS; i++) {
        snprintf(path, sizeof path, "%s/%d", prefix, i);
        l[i] = handle_mutex(s, path, NULL);
    }
    threads = threads_now();
    for (int i = 0; i < LOCKS; i++)
        TU_REQUIRE_RC(zklock_acquire_async(l[i], -1, count_down, &t), ZKLOCK_OK);
    TU_ASSERT_INT(threads_now(), ==, threads);
    CU_ASSERT(loop_while_not(s, tally_done, &t, 120000));
    TU_ASSERT_INT(t.failures, ==, 0);
    TU_ASSERT_INT(threads_now(), ==, threads);
    TU_ASSERT_INT(tu_ephemerals(prefix), ==, LOCKS);
    t = (struct tally){LOCKS, 0};
    for (int i = 0; i < LOCKS; i++)
        TU_REQUIRE_RC(zklock_release_async(l[i], count_down, &t), ZKLOCK_OK);
    CU_ASSERT(loop_while_not(s, tally_done, &t, 120000));
    TU_ASSERT_INT(t.failures, ==, 0);
    TU_ASSERT_INT(tu_ephemerals(prefix), ==, 0);
    for (int i = 0; i < LOCKS; i++)
        zklock_free(l[i]);
    free(l);
    zklock_session_close(s);
}

/* 1,000 waiters on one lock, each a handle of one session on one thread:
 * each holds in its turn (its done releases it, which lets the next in). */
struct turn {
    struct tally t;
    int order_errors, next;
    zklock_t **l;
};

static void take_turn(zklock_t *l, int rc, void *ctx)
{
    struct turn *tn = ctx;
    tn->t.pending--;
    tn->t.failures += rc != ZKLOCK_OK;
    tn->order_errors += tn->l[tn->next++] != l; /* served in arrival order */
    zklock_release_async(l, NULL, NULL);
}

static void test_thousand_waiters(void)
{
    const int WAITERS = tu_scaled(1000);
    zklock_session_t *s = poll_session_timeout(60000), *h = tu_session();
    const char *path = tu_path("thousand");
    zklock_t *holder = tu_mutex(h, path, NULL);
    struct turn tn = {{WAITERS, 0}, 0, 0, calloc(WAITERS, sizeof(zklock_t *))};
    int threads;

    CU_ASSERT_PTR_NOT_NULL_FATAL(tn.l);
    TU_REQUIRE_RC(zklock_acquire(holder, -1), ZKLOCK_OK);
    for (int i = 0; i < WAITERS; i++)
        tn.l[i] = handle_mutex(s, path, NULL);
    threads = threads_now();
    for (int i = 0; i < WAITERS; i++) {
        TU_REQUIRE_RC(zklock_acquire_async(tn.l[i], -1, take_turn, &tn), ZKLOCK_OK);
        CU_ASSERT_FATAL(tu_wait_children(path, i + 2)); /* arrival order is known */
    }
    TU_ASSERT_INT(threads_now(), ==, threads);
    TU_ASSERT_RC(zklock_release(holder), ZKLOCK_OK);
    CU_ASSERT(loop_while_not(s, tally_done, &tn.t, 120000));
    TU_ASSERT_INT(tn.t.failures, ==, 0);
    TU_ASSERT_INT(tn.order_errors, ==, 0);
    TU_ASSERT_INT(threads_now(), ==, threads);
    for (int i = 0; i < WAITERS; i++)
        zklock_free(tn.l[i]);
    free(tn.l);
    zklock_free(holder);
    zklock_session_close(s);
    zklock_session_close(h);
    tu_assert_clean(path);
}

/* ---- calls of several threads on one handle (review findings) ---------------------------- */

static void slow_done(zklock_t *l, int rc, void *ctx)
{
    tu_slow_call(ctx); /* zklock_free must wait for it */
}

/* zklock_free while one of l's done callbacks runs: it has returned before
 * zklock_free does (its ctx may go then). */
static void test_free_waits_for_a_running_done(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("free-running-done");
    zklock_t *l = handle_mutex(s, path, NULL);
    struct tu_slow sd = {0, 0, 0};

    TU_REQUIRE_RC(zklock_acquire_async(l, -1, slow_done, &sd), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_until(tu_slow_started, &sd, TU_WAIT_MS));
    zklock_free(l);
    TU_ASSERT_INT(__atomic_load_n(&sd.finished, __ATOMIC_SEQ_CST), ==, 1);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* zklock_free takes l's pending done out of the queue: the descriptor does
 * not stay readable with nothing pending. */
static void test_fd_level_after_free(void)
{
    zklock_session_t *s = poll_session();
    const char *path = tu_path("fd-after-free");
    zklock_t *l = handle_mutex(s, path, NULL);
    struct outcome a = {0};
    struct pollfd p = {zklock_session_fd(s), POLLIN, 0};

    TU_REQUIRE_RC(zklock_acquire_async(l, -1, done, &a), ZKLOCK_OK);
    CU_ASSERT_FATAL(poll(&p, 1, TU_WAIT_MS) == 1); /* its done is pending */
    zklock_free(l);
    TU_ASSERT_INT(a.calls, ==, 1);
    CU_ASSERT(!fd_readable(s));
    TU_ASSERT_INT(zklock_session_dispatch(s), ==, 0);
    zklock_session_close(s);
    tu_assert_clean(path);
}

struct blocked_acquire {
    zklock_t *l;
    int rc;
};

static void *acquire_main(void *arg)
{
    struct blocked_acquire *a = arg;
    a->rc = zklock_acquire(a->l, -1);
    return NULL;
}

/* A blocked acquirer decided but not yet awake, and another thread releasing
 * the handle's hold: each gets its own call's outcome (the release only once
 * the server confirmed the delete). */
static void test_release_while_acquirer_wakes(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("two-threads");
    zklock_t *l = handle_mutex(s, path, NULL);
    int early = 0, failed = 0;

    for (int i = 0; i < 100; i++) {
        struct blocked_acquire a = {l, -1};
        pthread_t t;
        int64_t end = tu_now_ms() + TU_WAIT_MS;

        pthread_create(&t, NULL, acquire_main, &a);
        while (zklock_hold_count(l) != 1 && tu_now_ms() < end)
            sched_yield(); /* spin: the window is the acquirer's wake-up */
        CU_ASSERT_FATAL(zklock_hold_count(l) == 1);
        if (zklock_release(l) == ZKLOCK_OK && tu_count(path) > 0)
            early++;
        pthread_join(t, NULL);
        failed += a.rc != ZKLOCK_OK;
    }
    TU_ASSERT_INT(early, ==, 0);
    TU_ASSERT_INT(failed, ==, 0);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static const tu_test_t async_tests[] = {
    {"acquire_release_async", test_acquire_release_async},
    {"async_refusals", test_async_refusals},
    {"async_busy_timeout_cancel", test_async_busy_timeout_cancel},
    {"pending_calls_at_free_and_close", test_pending_calls_at_free_and_close},
    {"callback_rules_thread_dispatch", test_callback_rules_thread_dispatch},
    {"callback_rules_poll_dispatch", test_callback_rules_poll_dispatch},
    {"handle_owned_hold_lost", test_handle_owned_hold_lost},
    {"check_op_guards_a_multi", test_check_op_guards_a_multi},
    {"handle_owned_rwlock", test_handle_owned_rwlock},
    {"async_refusals_of_recipes", test_async_refusals_of_recipes},
    {"free_waits_for_a_running_done", test_free_waits_for_a_running_done},
    {"fd_level_after_free", test_fd_level_after_free},
    {"release_while_acquirer_wakes", test_release_while_acquirer_wakes},
    {"ten_thousand_locks", test_ten_thousand_locks},
    {"thousand_waiters", test_thousand_waiters},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"async", async_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
