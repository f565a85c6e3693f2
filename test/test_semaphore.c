/* test_semaphore.c: the counting semaphore against a real ZooKeeper. */
#include "testutil.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "detector.h"
#include "zkproxy.h"

static zklock_t *new_sem(zklock_session_t *s, const char *path, int max, const zklock_opts_t *o)
{
    zklock_t *l = NULL;
    TU_REQUIRE_RC(zklock_semaphore_new(&l, s, path, max, o), ZKLOCK_OK);
    return l;
}

/* "<path>/<child>", in one of a few static buffers. */
static const char *sub(const char *path, const char *child)
{
    static char buf[4][512];
    static int next;
    char *b = buf[next++ % 4];
    if (snprintf(b, sizeof buf[0], "%s/%s", path, child) >= (int)sizeof buf[0])
        abort(); /* the test's own paths are short */
    return b;
}

/* A lease any thread may release: taken by an acquirer thread, released by the test. */
static const zklock_opts_t by_handle = {.owner = ZKLOCK_OWNER_HANDLE};

/* ---- the wire ------------------------------------------------------------------------------ */

static void test_curator_layout(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("sem-names");
    zklock_t *a = new_sem(s, path, 2, NULL);

    TU_REQUIRE_RC(zklock_acquire(a, -1), ZKLOCK_OK);
    TU_ASSERT_INT(tu_children_matching(sub(path, "leases"), "^" TU_CURATOR_PREFIX "lease-[0-9]{10}$"), ==, 1);
    /* The acquisition mutex is let go once the lease is held. */
    CU_ASSERT(tu_wait_no_children(sub(path, "locks")));
    TU_ASSERT_RC(zklock_release(a), ZKLOCK_OK);
    TU_ASSERT_INT(tu_count(sub(path, "leases")), ==, 0);
    zklock_free(a);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static void test_kazoo_layout(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("sem-kazoo");
    zklock_opts_t o = {.wire = ZKLOCK_WIRE_KAZOO};
    zklock_t *a = new_sem(s, path, 3, &o), *other = new_sem(s, path, 4, &o);
    char data[16] = "";
    char lockdir[512];

    TU_REQUIRE_RC(zklock_acquire(a, -1), ZKLOCK_OK);
    TU_ASSERT_INT(tu_children_matching(path, "^[0-9a-f]{32}$"), ==, 1);
    TU_ASSERT_INT(tu_get(path, data, sizeof data), ==, 1);
    CU_ASSERT_STRING_EQUAL(data, "3"); /* kazoo keeps max_leases there */
    snprintf(lockdir, sizeof lockdir, "%s-__lock__", path);
    CU_ASSERT(tu_wait_children(lockdir, 0));
    /* A party that asks for another number is refused, and leaves nothing. */
    TU_ASSERT_RC(zklock_acquire(other, 1000), ZKLOCK_EMISMATCH);
    TU_ASSERT_INT(tu_count(path), ==, 1);
    TU_ASSERT_INT(tu_count(lockdir), ==, 0);
    TU_ASSERT_RC(zklock_release(a), ZKLOCK_OK);
    zklock_free(a);
    zklock_free(other);
    zklock_session_close(s);
    tu_assert_clean(path);
    tu_assert_clean(lockdir);
}

/* ---- the limit ----------------------------------------------------------------------------- */

/* max sessions hold at once; the next one waits (and times out, or is busy
 * at once), leaving nothing behind. */
static void limit_holds(const zklock_opts_t *o)
{
    enum { MAX = 3 };
    zklock_session_t *s[MAX + 1];
    zklock_t *l[MAX + 1];
    const char *path = tu_path(o ? "sem-full-kazoo" : "sem-full");
    const char *leases = o ? path : sub(path, "leases");

    for (int i = 0; i <= MAX; i++) {
        s[i] = tu_session();
        l[i] = new_sem(s[i], path, MAX, o);
    }
    for (int i = 0; i < MAX; i++)
        TU_REQUIRE_RC(zklock_acquire(l[i], 5000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(l[MAX], 0), ZKLOCK_EBUSY);
    TU_ASSERT_RC(zklock_acquire(l[MAX], 300), ZKLOCK_ETIMEDOUT);
    /* Returned: nothing of the refused contender is left. */
    TU_ASSERT_INT(tu_count(leases), ==, MAX);
    TU_ASSERT_INT(tu_ephemerals(path), ==, MAX);
    TU_ASSERT_RC(zklock_release(l[1]), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(l[MAX], 5000), ZKLOCK_OK);
    for (int i = 0; i <= MAX; i++) {
        if (i != 1)
            TU_ASSERT_RC(zklock_release(l[i]), ZKLOCK_OK);
        zklock_free(l[i]);
        zklock_session_close(s[i]);
    }
    tu_assert_clean(path);
}

static void test_limit_holds(void)
{
    limit_holds(NULL);
}

static void test_limit_holds_kazoo(void)
{
    zklock_opts_t o = {.wire = ZKLOCK_WIRE_KAZOO};
    limit_holds(&o);
}

/* 3 processes x 4 threads (each thread its own session) on one semaphore:
 * never more than max inside. */
static void never_exceeded(int max)
{
    char path[256], mode[8], file[64], *helper = getenv("ZKLOCK_TEST_CONTENDER");
    struct detector *d = tu_new_detector(file, sizeof file);
    int pids[3];

    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_PTR_NOT_NULL_FATAL(helper);
    snprintf(path, sizeof path, "%s", tu_path(max == 2 ? "sem-limit2" : "sem-limit3"));
    snprintf(mode, sizeof mode, "s%d", max);
    for (int i = 0; i < 3; i++) {
        char *argv[] = {helper, (char *)tu_hosts(), path, mode, "4", "10", file, NULL};
        pids[i] = tu_spawn(argv);
        CU_ASSERT(pids[i] > 0);
    }
    for (int i = 0; i < 3; i++)
        TU_ASSERT_INT(tu_wait_pid(pids[i]), ==, 0);
    TU_ASSERT_INT(d->errors, ==, 0);
    TU_ASSERT_INT(d->entries, ==, 3 * 4 * 10);
    TU_ASSERT_INT(d->max_shared, <=, max);
    TU_ASSERT_INT(d->max_shared, >=, 1);
    tu_free_detector(d, file);
    tu_assert_clean(path);
}

static void test_never_exceeded_2(void)
{
    never_exceeded(2);
}

static void test_never_exceeded_3(void)
{
    never_exceeded(3);
}

/* ---- order and wake-ups ----------------------------------------------------------------- */

/* One lease: W1, W2, W3 queue in that order and get it in that order; a
 * release wakes only the next one. */
static void test_waiter_order(void)
{
    zklock_session_t *hs = tu_session(), *ws[3];
    const char *path = tu_path("sem-order");
    zklock_t *h = new_sem(hs, path, 1, NULL), *w[3];
    struct tu_acquirer a[3];

    TU_REQUIRE_RC(zklock_acquire(h, -1), ZKLOCK_OK);
    for (int i = 0; i < 3; i++) {
        ws[i] = tu_session();
        w[i] = new_sem(ws[i], path, 1, &by_handle);
        tu_start_acquirer(&a[i], w[i], 30000, false);
        /* W1 holds the acquisition mutex, its lease made, and waits for the
         * leases to change; the others wait in the mutex's queue. */
        CU_ASSERT(tu_wait_children(sub(path, "locks"), i + 1));
    }
    CU_ASSERT(tu_wait_children(sub(path, "leases"), 2));
    CU_ASSERT(tu_wait_listings(ws[0], 1) && tu_wait_listings(ws[1], 1) &&
              tu_wait_listings(ws[2], 1));
    TU_ASSERT_RC(zklock_release(h), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&a[0]), ZKLOCK_OK);
    /* W2 takes the mutex from W1 and waits on the leases, W3 on W2. */
    CU_ASSERT(tu_wait_children(sub(path, "leases"), 2));
    CU_ASSERT(tu_wait_children(sub(path, "locks"), 2));
    /* W2 has read the leases and W3 has heard of W1's going, had it watched it */
    tu_barrier(ws[1]);
    tu_barrier(ws[2]);
    TU_ASSERT_INT(zklock_hold_count(w[1]), ==, 0);
    TU_ASSERT_INT(zklock_hold_count(w[2]), ==, 0);
    TU_ASSERT_INT(tu_acquirer_done(&a[1]), ==, 0);
    TU_ASSERT_INT(tu_acquirer_done(&a[2]), ==, 0);
    TU_ASSERT_INT(TU_STAT(ws[2], wakeups), ==, 0); /* nobody woke W3 */
    TU_ASSERT_RC(zklock_release(w[0]), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&a[1]), ZKLOCK_OK);
    CU_ASSERT(tu_wait_children(sub(path, "leases"), 2)); /* W2's and W3's */
    tu_barrier(ws[2]);
    TU_ASSERT_INT(zklock_hold_count(w[2]), ==, 0);
    TU_ASSERT_INT(tu_acquirer_done(&a[2]), ==, 0);
    TU_ASSERT_RC(zklock_release(w[1]), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&a[2]), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(w[2]), ZKLOCK_OK);
    for (int i = 0; i < 3; i++) {
        zklock_free(w[i]);
        zklock_session_close(ws[i]);
    }
    zklock_free(h);
    zklock_session_close(hs);
    tu_assert_clean(path);
}

/* A semaphore's path, and the newest lease's sequence number at the start. */
struct sem_look {
    const char *path;
    long newest;
};

static long newest_lease(const char *path)
{
    int n;
    char **kids = tu_children(sub(path, "leases"), &n);
    long newest = -1;

    for (int i = 0; i < n; i++) {
        size_t len = strlen(kids[i]);
        long seq = len > 10 ? strtol(kids[i] + len - 10, NULL, 10) : -1;
        newest = seq > newest ? seq : newest;
    }
    tu_free_strings(kids);
    return newest;
}

/* The waiter's second lease made, and it waits under the mutex. */
static bool made_again_under_mutex(void *arg)
{
    struct sem_look *look = arg;
    return tu_count(sub(look->path, "leases")) == 3 && tu_count(sub(look->path, "locks")) == 1 &&
           newest_lease(look->path) == look->newest + 2;
}

/* A handle whose last listing left room lets the mutex go as it makes its
 * lease. Finding no room after all, that lease goes and it queues again,
 * once: its second lease waits under the mutex like any other, and holds
 * once a lease is released. */
static void test_early_let_go_without_room(void)
{
    zklock_session_t *s = tu_session(), *hs = tu_session();
    const char *path = tu_path("sem-early");
    zklock_t *l = new_sem(s, path, 2, &by_handle), *h[2];
    struct sem_look look = {path, -1};
    struct tu_acquirer a;

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK); /* alone: room beside it */
    TU_REQUIRE_RC(zklock_release(l), ZKLOCK_OK);
    for (int i = 0; i < 2; i++) {
        h[i] = new_sem(hs, path, 2, NULL);
        TU_REQUIRE_RC(zklock_acquire(h[i], -1), ZKLOCK_OK);
    }
    look.newest = newest_lease(path);
    tu_start_acquirer(&a, l, 30000, false);
    CU_ASSERT(tu_wait_until(made_again_under_mutex, &look, TU_WAIT_MS));
    TU_ASSERT_INT(tu_acquirer_done(&a), ==, 0);
    TU_ASSERT_RC(zklock_release(h[0]), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&a), ZKLOCK_OK);
    TU_ASSERT_INT(newest_lease(path), ==, look.newest + 2); /* no third try */
    TU_ASSERT_INT(tu_count(sub(path, "leases")), ==, 2);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(h[1]), ZKLOCK_OK);
    for (int i = 0; i < 2; i++)
        zklock_free(h[i]);
    zklock_free(l);
    zklock_session_close(hs);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* ---- failures ------------------------------------------------------------------------------ */

static void test_expiry_frees_the_lease(void)
{
    struct tu_events ev = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &ev};
    zklock_session_t *s = tu_session(), *other = tu_session();
    const char *path = tu_path("sem-expire");
    zklock_t *l = new_sem(s, path, 1, &lo), *w = new_sem(other, path, 1, &by_handle);
    struct tu_acquirer waiter;

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    tu_start_acquirer(&waiter, w, 30000, false);
    CU_ASSERT(tu_wait_children(sub(path, "leases"), 2));
    tu_expire(s);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &ev, TU_WAIT_MS));
    CU_ASSERT(ev.lost_reason == ZKLOCK_LOST_EXPIRED || ev.lost_reason == ZKLOCK_LOST_DELETED);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
    TU_ASSERT_RC(tu_join_acquirer(&waiter), ZKLOCK_OK); /* the lease was freed */
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    /* The expired session's handle queues again in its new session. */
    TU_ASSERT_RC(zklock_acquire(l, 0), ZKLOCK_EBUSY);
    TU_ASSERT_RC(zklock_release(w), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(l, 5000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_free(w);
    zklock_session_close(s);
    zklock_session_close(other);
    tu_assert_clean(path);
}

/* A contender that waits with its lease node made (it holds the mutex) and
 * times out, or is canceled, leaves neither node behind when the call
 * returns. */
static void test_timeout_cancel_leave_nothing(void)
{
    zklock_session_t *a = tu_session(), *b = tu_session();
    const char *path = tu_path("sem-giveup");
    zklock_t *h = new_sem(a, path, 1, NULL), *w = new_sem(b, path, 1, NULL);
    struct tu_acquirer waiter;

    TU_REQUIRE_RC(zklock_acquire(h, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(w, 300), ZKLOCK_ETIMEDOUT);
    TU_ASSERT_INT(tu_count(sub(path, "leases")), ==, 1);
    CU_ASSERT(tu_no_children(sub(path, "locks"))); /* empty, or reaped already */
    tu_start_acquirer(&waiter, w, -1, false);
    CU_ASSERT(tu_wait_children(sub(path, "leases"), 2));
    TU_ASSERT_RC(zklock_cancel(w), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&waiter), ZKLOCK_ECANCELED);
    TU_ASSERT_INT(tu_count(sub(path, "leases")), ==, 1);
    CU_ASSERT(tu_no_children(sub(path, "locks")));
    /* Freed while another thread waits: the waiter is canceled. */
    tu_start_acquirer(&waiter, w, -1, false);
    CU_ASSERT(tu_wait_children(sub(path, "leases"), 2));
    zklock_free(w);
    TU_ASSERT_RC(tu_join_acquirer(&waiter), ZKLOCK_ECANCELED);
    TU_ASSERT_INT(tu_ephemerals(path), ==, 1);
    TU_ASSERT_RC(zklock_release(h), ZKLOCK_OK);
    zklock_free(h);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(path);
}

/* zklock_session_close while a contender waits with its lease node made,
 * holding the acquisition mutex: the acquisition answers ZKLOCK_ECLOSED,
 * the mutex's contender goes with it, and the session is freed once its
 * handle is (its trace file closed; under ASan and valgrind, nothing
 * leaked). The mutex was never let go at the close: the lease contender,
 * its handle and the session were never freed. */
static void test_close_while_waiting_under_mutex(void)
{
    struct tu_traced tb;
    zklock_session_t *a = tu_session(), *b = tu_session_traced(&tb);
    const char *path = tu_path("sem-close");
    zklock_t *h = new_sem(a, path, 1, NULL), *w = new_sem(b, path, 1, NULL);
    struct tu_acquirer waiter;

    TU_REQUIRE_RC(zklock_acquire(h, -1), ZKLOCK_OK);
    tu_start_acquirer(&waiter, w, -1, false);
    CU_ASSERT_FATAL(tu_wait_children(sub(path, "leases"), 2));
    TU_ASSERT_INT(tu_count(sub(path, "locks")), ==, 1); /* it waits under the mutex */
    zklock_session_close(b);
    TU_ASSERT_RC(tu_join_acquirer(&waiter), ZKLOCK_ECLOSED);
    zklock_free(w);
    CU_ASSERT(tu_session_freed(&tb));
    CU_ASSERT(tu_wait_children(sub(path, "leases"), 1)); /* its lease went with its session */
    TU_ASSERT_RC(zklock_release(h), ZKLOCK_OK);
    zklock_free(h);
    zklock_session_close(a);
    tu_assert_clean(path);
}

/* Someone deletes the acquisition mutex's node of a contender W that waits
 * with its lease made. Were that lease to stay, a newcomer X could take the
 * free mutex and make a third lease node: with one lease, W and X would then
 * both wait for ever once the holder left. W's lease goes instead, and W
 * queues for the mutex again. */
static void test_mutex_node_deleted(void)
{
    zklock_session_t *a = tu_session(), *b = tu_session(), *c = tu_session();
    const char *path = tu_path("sem-mutex-gone");
    zklock_t *h = new_sem(a, path, 1, NULL), *w = new_sem(b, path, 1, &by_handle),
             *x = new_sem(c, path, 1, &by_handle);
    struct tu_acquirer aw, ax;
    char **kids, node[600];
    int n;

    TU_REQUIRE_RC(zklock_acquire(h, -1), ZKLOCK_OK);
    tu_start_acquirer(&aw, w, 30000, false);
    CU_ASSERT(tu_wait_children(sub(path, "leases"), 2));
    CU_ASSERT_FATAL(tu_wait_children(sub(path, "locks"), 1));
    kids = tu_children(sub(path, "locks"), &n);
    CU_ASSERT_FATAL(n == 1);
    snprintf(node, sizeof node, "%s/%s", sub(path, "locks"), kids[0]);
    tu_free_strings(kids);
    TU_ASSERT_INT(zoo_delete(tu_zk(), node, -1), ==, ZOK);
    /* W notices (its own-node watch, or setting it) and takes its lease
     * back; it then queues for the mutex again and makes a lease again. */
    tu_start_acquirer(&ax, x, 30000, false);
    CU_ASSERT(tu_wait_children(sub(path, "locks"), 2));
    TU_ASSERT_INT(tu_count(sub(path, "leases")), <=, 2);
    TU_ASSERT_RC(zklock_release(h), ZKLOCK_OK);
    /* Whichever of them is first gets the lease, then the other. */
    CU_ASSERT(tu_wait_until(tu_acquirer_done, &aw, TU_WAIT_MS) ||
              tu_wait_until(tu_acquirer_done, &ax, TU_WAIT_MS));
    if (tu_acquirer_done(&aw)) {
        TU_ASSERT_RC(tu_join_acquirer(&aw), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_release(w), ZKLOCK_OK);
        TU_ASSERT_RC(tu_join_acquirer(&ax), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_release(x), ZKLOCK_OK);
    } else {
        TU_ASSERT_RC(tu_join_acquirer(&ax), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_release(x), ZKLOCK_OK);
        TU_ASSERT_RC(tu_join_acquirer(&aw), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_release(w), ZKLOCK_OK);
    }
    zklock_free(h);
    zklock_free(w);
    zklock_free(x);
    zklock_session_close(a);
    zklock_session_close(b);
    zklock_session_close(c);
    tu_assert_clean(path);
}

/* ---- the calls ------------------------------------------------------------------------------ */

static void test_reentrant_and_fenced(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("sem-reentrant");
    zklock_t *l = new_sem(s, path, 2, NULL);
    int64_t token = 0;
    struct Stat st;
    char **kids, node[600];
    int n;

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(l, 0), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 2);
    TU_ASSERT_INT(tu_count(sub(path, "leases")), ==, 1); /* one lease per thread */
    TU_ASSERT_RC(zklock_fence(l, &token), ZKLOCK_OK);
    kids = tu_children(sub(path, "leases"), &n);
    CU_ASSERT_FATAL(n == 1);
    snprintf(node, sizeof node, "%s/%s", sub(path, "leases"), kids[0]);
    tu_free_strings(kids);
    TU_ASSERT_INT(zoo_exists(tu_zk(), node, 0, &st), ==, ZOK);
    TU_ASSERT_INT(token, ==, st.czxid);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 1);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ENOTHELD);
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static void test_read_leases(void)
{
    zklock_session_t *a = tu_session(), *b = tu_session(), *c = tu_session();
    const char *path = tu_path("sem-read");
    zklock_t *la = new_sem(a, path, 1, NULL), *lb = new_sem(b, path, 1, &by_handle),
             *lc = new_sem(c, path, 1, &by_handle);
    zklock_queue_t *leases = NULL, *waiting = NULL;
    struct tu_acquirer wb, wc;

    TU_REQUIRE_RC(zklock_acquire(la, -1), ZKLOCK_OK);
    tu_start_acquirer(&wb, lb, 30000, false);
    CU_ASSERT(tu_wait_children(sub(path, "leases"), 2));
    tu_start_acquirer(&wc, lc, 30000, false);
    CU_ASSERT(tu_wait_children(sub(path, "locks"), 2));
    TU_REQUIRE_RC(zklock_semaphore_read(la, &leases, &waiting), ZKLOCK_OK);
    TU_ASSERT_INT(leases->count, ==, 2);
    TU_ASSERT_INT(leases->nodes[0].holds, ==, 1);
    TU_ASSERT_INT(leases->nodes[1].holds, ==, 0); /* B's: made, waiting */
    CU_ASSERT_STRING_EQUAL(leases->nodes[0].kind, "lease");
    TU_ASSERT_INT(waiting->count, ==, 2);
    CU_ASSERT_STRING_EQUAL(waiting->nodes[0].kind, "mutex");
    zklock_queue_free(leases);
    zklock_queue_free(waiting);
    TU_ASSERT_RC(zklock_semaphore_read(la, NULL, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_release(la), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&wb), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(lb), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&wc), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(lc), ZKLOCK_OK);
    zklock_free(la);
    zklock_free(lb);
    zklock_free(lc);
    zklock_session_close(a);
    zklock_session_close(b);
    zklock_session_close(c);
    tu_assert_clean(path);
}

struct async_result {
    pthread_mutex_t mu;
    int rc, calls;
};

static void async_done(zklock_t *l, int rc, void *ctx)
{
    struct async_result *r = ctx;
    (void)l;
    pthread_mutex_lock(&r->mu);
    r->rc = rc;
    r->calls++;
    pthread_mutex_unlock(&r->mu);
}

static bool async_called(void *ctx)
{
    struct async_result *r = ctx;
    int calls;
    pthread_mutex_lock(&r->mu);
    calls = r->calls;
    pthread_mutex_unlock(&r->mu);
    return calls > 0;
}

static void test_async_lease(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("sem-async");
    zklock_opts_t o = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_t *l = new_sem(s, path, 1, &o);
    struct async_result r = {PTHREAD_MUTEX_INITIALIZER, -1, 0};

    TU_REQUIRE_RC(zklock_acquire_async(l, 5000, async_done, &r), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_until(async_called, &r, TU_WAIT_MS));
    TU_ASSERT_RC(r.rc, ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 1);
    r.calls = 0;
    TU_REQUIRE_RC(zklock_release_async(l, async_done, &r), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_until(async_called, &r, TU_WAIT_MS));
    TU_ASSERT_RC(r.rc, ZKLOCK_OK);
    TU_ASSERT_INT(tu_count(sub(path, "leases")), ==, 0);
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static void test_bad_input(void)
{
    zklock_session_t *s = tu_session();
    zklock_t *l = NULL, *m = tu_mutex(s, tu_path("sem-bad"), NULL);
    zklock_queue_t *q = NULL;

    TU_ASSERT_RC(zklock_semaphore_new(NULL, s, "/x", 1, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_semaphore_new(&l, s, "/x", 0, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_semaphore_new(&l, s, "/x", ZKLOCK_SEMAPHORE_MAX + 1, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_semaphore_new(&l, s, "/x", -1, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_semaphore_new(&l, NULL, "/x", 1, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_semaphore_new(&l, s, "x/", 1, NULL), ZKLOCK_EINVAL);
    CU_ASSERT_PTR_NULL(l);
    TU_ASSERT_RC(zklock_semaphore_read(NULL, &q, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_semaphore_read(m, &q, NULL), ZKLOCK_EINVAL); /* not a semaphore */
    CU_ASSERT_PTR_NULL(q);
    TU_ASSERT_RC(zklock_semaphore_new(&l, s, "/x", ZKLOCK_SEMAPHORE_MAX, NULL), ZKLOCK_OK);
    zklock_free(l);
    zklock_free(m);
    zklock_session_close(s);
}


/* ---- the end of the sequence counters ------------------------------------------------ */

/* design.md, "Sequence numbers run out", on a server started with the
 * counters near their end (zk-harness.sh --seed): leases are counted, not
 * ordered, so a spent number there changes nothing (Curator counts them
 * too); the acquisition lock is a mutex, and refuses where its counter ran
 * out, leaving nothing. */
static void test_spent_counters(void)
{
    struct tu_seeded z;
    zklock_session_t *s;
    zklock_t *a, *b, *c, *d;
    struct String_vector v = {0, NULL};

    if (!tu_seeded_start(&z, "/wrap/s/leases=2147483647 /wrap/t/locks=2147483647"))
        return;
    s = tu_seeded_session(&z);
    a = new_sem(s, "/wrap/s", 2, NULL);
    b = new_sem(s, "/wrap/s", 2, NULL);
    c = new_sem(s, "/wrap/s", 2, NULL);
    d = new_sem(s, "/wrap/t", 2, NULL);
    TU_ASSERT_RC(zklock_acquire(a, 5000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(b, 5000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(c, 0), ZKLOCK_EBUSY);
    TU_REQUIRE_RC(zoo_get_children(z.zh, "/wrap/s/leases", 0, &v), ZOK);
    TU_ASSERT_INT(v.count, ==, 2);
    for (int i = 0; i < v.count; i++) /* the server's counter stuck at its end */
        CU_ASSERT(strstr(v.data[i], "-lease-2147483647") != NULL);
    deallocate_String_vector(&v);
    TU_ASSERT_RC(zklock_release(a), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(b), ZKLOCK_OK);

    TU_ASSERT_RC(zklock_acquire(d, 5000), ZKLOCK_EWRAPPED);
    TU_ASSERT_INT(tu_seeded_count(&z, "/wrap/t/locks"), ==, 0);
    TU_ASSERT_INT(tu_seeded_count(&z, "/wrap/t/leases"), <=, 0);
    zklock_free(a);
    zklock_free(b);
    zklock_free(c);
    zklock_free(d);
    zklock_session_close(s);
    tu_seeded_stop(&z);
}

/* ---- kazoo's paths ----------------------------------------------------------------------- */

/* Two passes of the server's container reaper (the harness runs one every
 * second) after now: an empty container made under dir is reaped, and once
 * a second one made after that is, the pass that reaped the first is over. */
static void container_passes(zklock_session_t *s, const char *dir)
{
    for (int i = 0; i < 2; i++) {
        char path[400];
        zklock_t *m;

        snprintf(path, sizeof path, "%s/sentinel-%d", dir, i);
        m = tu_mutex(s, path, NULL);
        TU_REQUIRE_RC(zklock_acquire(m, 5000), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK);
        zklock_free(m);
        CU_ASSERT(tu_wait_until(tu_gone, path, TU_WAIT_MS));
    }
}

/* kazoo makes <path> and <path>-__lock__ persistent (ensure_path), and a
 * kazoo Semaphore that once saw <path> never looks for it again: a
 * container the server reaped once it stood empty broke it (NoNodeError).
 * So do we; the levels above stay containers. */
static void test_kazoo_paths_persist(void)
{
    zklock_session_t *s = tu_session();
    char top[256], path[300], lockdir[320];
    zklock_opts_t o = {.wire = ZKLOCK_WIRE_KAZOO};
    zklock_t *l;

    snprintf(top, sizeof top, "%s", tu_path("sem-kazoo-kept"));
    snprintf(path, sizeof path, "%s/sem", top);
    snprintf(lockdir, sizeof lockdir, "%s-__lock__", path);
    l = new_sem(s, path, 2, &o);
    TU_REQUIRE_RC(zklock_acquire(l, 5000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    CU_ASSERT(tu_wait_children(lockdir, 0));
    container_passes(s, top);
    TU_ASSERT_INT(tu_count(path), ==, 0); /* there, and empty */
    TU_ASSERT_INT(tu_count(lockdir), ==, 0);
    /* The level above is a container: once they are gone, it goes. */
    TU_ASSERT_RC(zoo_delete(tu_zk(), path, -1), ZOK);
    TU_ASSERT_RC(zoo_delete(tu_zk(), lockdir, -1), ZOK);
    CU_ASSERT(tu_wait_until(tu_gone, top, TU_WAIT_MS));
    zklock_session_close(s);
}

/* A kazoo semaphore's <path> that cannot be made is an answer, not a retry
 * loop (it is made by the engine's burst of parents now, persistent). */
static void test_kazoo_path_refused(void)
{
    zklock_session_t *s = tu_session();
    zklock_opts_t o = {.wire = ZKLOCK_WIRE_KAZOO};
    char top[256], path[300], lockdir[320];
    struct ACL anyone = {ZOO_PERM_READ | ZOO_PERM_DELETE, {"world", "anyone"}};
    struct ACL_vector no_create = {1, &anyone};
    zklock_t *l;

    snprintf(top, sizeof top, "%s", tu_path("sem-kazoo-ro"));
    snprintf(path, sizeof path, "%s/sem", top);
    snprintf(lockdir, sizeof lockdir, "%s-__lock__", path);
    zoo_create(tu_zk(), "/zklock-test", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    TU_REQUIRE_RC(zoo_create(tu_zk(), top, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    /* the acquisition lock can be taken; <path> cannot be made */
    TU_REQUIRE_RC(zoo_create(tu_zk(), lockdir, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    TU_REQUIRE_RC(zoo_set_acl(tu_zk(), top, -1, &no_create), ZOK);
    l = new_sem(s, path, 2, &o);
    for (int i = 0; i < 2; i++) {
        uint64_t before = TU_STAT(s, requests);
        TU_ASSERT_RC(zklock_acquire(l, i ? 2000 : 0), ZNOAUTH);
        /* the lock (create, listing), the number and the leases, three
         * levels, the number and the leases again, the lock's delete */
        TU_ASSERT_INT(TU_STAT(s, requests) - before, <=, 12);
    }
    TU_ASSERT_INT(tu_count(top), ==, 1); /* the lock's path alone */
    TU_ASSERT_INT(tu_count(lockdir), ==, 0);
    zklock_free(l);
    zklock_session_close(s);
    TU_ASSERT_RC(zoo_delete(tu_zk(), lockdir, -1), ZOK);
    TU_ASSERT_RC(zoo_delete(tu_zk(), top, -1), ZOK);
}

/* A peer re-made <path> with another number (after it was deleted, or
 * reaped where an older zklock had made it a container) between two
 * acquisitions of one handle: the second is refused as the first would
 * have been. The number rides the look at the leases: a request more, no
 * round trip more. */
static void test_kazoo_max_checked_each_time(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("sem-kazoo-recheck");
    char lockdir[512], data[16] = "";
    zklock_opts_t o = {.wire = ZKLOCK_WIRE_KAZOO};
    zklock_t *l = new_sem(s, path, 2, &o);
    uint64_t requests;

    snprintf(lockdir, sizeof lockdir, "%s-__lock__", path);
    TU_REQUIRE_RC(zklock_acquire(l, 5000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    requests = TU_STAT(s, requests);
    TU_REQUIRE_RC(zklock_acquire(l, 5000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    /* the lock's create + listing, the number + the leases, the lease,
     * its listing, the lock's delete, the lease's delete */
    TU_ASSERT_INT(TU_STAT(s, requests) - requests, <=, 8);
    TU_REQUIRE_RC(zoo_delete(tu_zk(), path, -1), ZOK);
    TU_REQUIRE_RC(zoo_create(tu_zk(), path, "3", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    TU_ASSERT_RC(zklock_acquire(l, 5000), ZKLOCK_EMISMATCH);
    TU_ASSERT_INT(tu_count(path), ==, 0);
    TU_ASSERT_INT(tu_count(lockdir), ==, 0);
    TU_ASSERT_INT(tu_get(path, data, sizeof data), ==, 1);
    CU_ASSERT_STRING_EQUAL(data, "3"); /* the peer's number stands */
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
    tu_assert_clean(lockdir);
}

/* ---- review: kazoo waiters ------------------------------------------------------------ */

/* A change of a semaphore's leases: has it woken a waiter of s's? (kazoo:
 * only a waiter for room watches the leases.) */
struct poke {
    const char *path;
    zklock_session_t *s;
};

static bool poke_woke(void *arg)
{
    struct poke *p = arg;
    char node[600];

    snprintf(node, sizeof node, "%s/poke", p->path);
    if (zoo_create(tu_zk(), node, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0) == ZOK)
        zoo_delete(tu_zk(), node, -1);
    return TU_STAT(p->s, wakeups) > 0;
}

/* kazoo's layout: W waits for room (no lease node of its own, the leases
 * watched) when its session expires. In its new session it takes the
 * acquisition lock again, and must look at the leases again: once H lets
 * its lease go, W gets it. */
static void test_kazoo_waiter_expired(void)
{
    zklock_opts_t ho = {.wire = ZKLOCK_WIRE_KAZOO},
                  wo = {.wire = ZKLOCK_WIRE_KAZOO, .owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *a = tu_session(), *b = tu_session();
    const char *path = tu_path("sem-kazoo-expired");
    char lockdir[512], pathcopy[512];
    zklock_t *h = new_sem(a, path, 1, &ho), *w = new_sem(b, path, 1, &wo);
    struct tu_acquirer aw;
    struct poke pk = {pathcopy, b};

    snprintf(lockdir, sizeof lockdir, "%s-__lock__", path);
    snprintf(pathcopy, sizeof pathcopy, "%s", path);
    TU_REQUIRE_RC(zklock_acquire(h, -1), ZKLOCK_OK);
    tu_start_acquirer(&aw, w, TU_WAIT_MS + 10000, false);
    CU_ASSERT(tu_wait_children(lockdir, 1));
    CU_ASSERT_FATAL(tu_wait_until(poke_woke, &pk, TU_WAIT_MS)); /* W waits for room */
    tu_expire(b);
    /* W queues again for the acquisition lock in its new session. */
    CU_ASSERT(tu_wait_children(lockdir, 1));
    TU_ASSERT_RC(zklock_release(h), ZKLOCK_OK);
    CU_ASSERT(tu_wait_until(tu_acquirer_done, &aw, TU_WAIT_MS));
    TU_ASSERT_RC(tu_join_acquirer(&aw), ZKLOCK_OK);
    zklock_release(w);
    zklock_free(h);
    zklock_free(w);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(path);
    tu_assert_clean(lockdir);
}

/* Changes the leases (a child made and deleted) until told to stop. */
struct churn {
    const char *path;
    pthread_t t;
    atomic_int stop;
    atomic_int changes;
    int goal; /* for churned_enough */
};

static void *churn_main(void *arg)
{
    struct churn *ch = arg;
    char node[600];

    snprintf(node, sizeof node, "%s/churn", ch->path);
    while (!atomic_load(&ch->stop)) {
        if (zoo_create(tu_zk(), node, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0) == ZOK &&
            zoo_delete(tu_zk(), node, -1) == ZOK)
            atomic_fetch_add(&ch->changes, 1);
    }
    return NULL;
}

static bool churned_enough(void *arg)
{
    struct churn *ch = arg;
    return atomic_load(&ch->changes) >= ch->goal;
}

/* kazoo's layout: a waiter for room that gives up (timeout) while its look
 * at the leases, which sets a watch on them, is in flight. The watch is
 * registered all the same: it must be counted and taken back, else it
 * fires, on the next change of the leases, for a contender that is freed
 * (heap-use-after-free under ASan). The leases change all the time here, so
 * that a look is in flight when the deadline passes. */
static void test_kazoo_waiter_gives_up_watch(void)
{
    zklock_opts_t o = {.wire = ZKLOCK_WIRE_KAZOO};
    zklock_session_t *a = tu_session(), *b = tu_session();
    const char *path = tu_path("sem-kazoo-giveup-watch");
    char lockdir[512], pathcopy[512];
    zklock_t *h = new_sem(a, path, 1, &o), *w = new_sem(b, path, 1, &o);
    struct churn ch = {.path = pathcopy};

    snprintf(lockdir, sizeof lockdir, "%s-__lock__", path);
    snprintf(pathcopy, sizeof pathcopy, "%s", path);
    TU_REQUIRE_RC(zklock_acquire(h, -1), ZKLOCK_OK);
    pthread_create(&ch.t, NULL, churn_main, &ch);
    for (int i = 0; i < 40; i++)
        TU_ASSERT_RC(zklock_acquire(w, 60 + 7 * (i % 10)), ZKLOCK_ETIMEDOUT);
    /* Any watch left behind fires now. */
    ch.goal = atomic_load(&ch.changes) + 50;
    CU_ASSERT(tu_wait_until(churned_enough, &ch, TU_WAIT_MS));
    atomic_store(&ch.stop, 1);
    pthread_join(ch.t, NULL);
    TU_ASSERT_INT(TU_STAT(b, wakeups), >, 0); /* the waiter did watch */
    TU_ASSERT_RC(zklock_release(h), ZKLOCK_OK);
    zklock_free(h);
    zklock_free(w);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(path);
    tu_assert_clean(lockdir);
}

/* Leases and acquisition lock nodes: 4 (H, W, X each made a lease, X holds
 * the lock; or W's lease went, and W and X queue for the lock again). */
static bool four_nodes(void *path)
{
    return tu_count(sub(path, "leases")) + tu_count(sub(path, "locks")) == 4;
}

/* A waiter W holds the acquisition lock, its lease node made, when its
 * connection is cut for longer than its lease (but not its session): every
 * hold of the session ends, the acquisition lock's included, and its node is
 * deleted as the session reconnects. W's lease node must go too (as when
 * that node is deleted by hand): else a newcomer X takes the free lock and
 * makes a lease node as well, and with one lease W and X wait for each
 * other for ever once the holder H is gone. */
static void test_lease_ran_out_waiter(void)
{
    struct tu_events ev = TU_EVENTS_INIT, lost = TU_EVENTS_INIT;
    zklock_session_opts_t so = {.timeout_ms = 10000, .on_state = tu_on_state, .ctx = &ev};
    zklock_opts_t po = {.on_lost = tu_on_lost, .ctx = &lost};
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    zklock_session_t *a = tu_session(), *b = NULL, *c = tu_session();
    const char *path = tu_path("sem-lease-ran-out");
    char pathcopy[512];
    zklock_t *h, *w, *x, *probe;
    struct tu_acquirer aw, ax;
    int64_t id;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    TU_REQUIRE_RC(zklock_session_open(&b, zkproxy_hosts(proxy), &so), ZKLOCK_OK);
    snprintf(pathcopy, sizeof pathcopy, "%s", path);
    h = new_sem(a, path, 1, NULL);
    w = new_sem(b, path, 1, &by_handle);
    x = new_sem(c, path, 1, &by_handle);
    /* A hold of W's session whose on_lost says when its lease ran out. */
    probe = tu_mutex(b, tu_path("sem-lease-probe"), &po);
    TU_REQUIRE_RC(zklock_acquire(probe, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(h, -1), ZKLOCK_OK);
    tu_start_acquirer(&aw, w, 60000, false);
    CU_ASSERT_FATAL(tu_wait_children(sub(pathcopy, "leases"), 2));
    CU_ASSERT_FATAL(tu_wait_children(sub(pathcopy, "locks"), 1));
    id = zklock_session_id(b);
    zkproxy_cut(proxy);
    CU_ASSERT_FATAL(tu_wait_state(&ev, ZKLOCK_SUSPENDED));
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    zkproxy_restore(proxy); /* within the last twentieth of the session timeout */
    CU_ASSERT(tu_wait_state(&ev, ZKLOCK_RECONNECTED));
    TU_ASSERT_INT(zklock_session_id(b), ==, id);
    /* A write answered: W's session is heard from again (else a hold it
     * takes now would be told lost at once: its lease counts from the cut). */
    TU_ASSERT_RC(zklock_release(probe), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_acquire(probe, 5000), ZKLOCK_OK);
    /* X comes, and makes its lease node, or queues for the lock behind W. */
    tu_start_acquirer(&ax, x, 60000, false);
    CU_ASSERT(tu_wait_until(four_nodes, pathcopy, TU_WAIT_MS));
    TU_ASSERT_RC(zklock_release(h), ZKLOCK_OK);
    CU_ASSERT(tu_wait_until(tu_acquirer_done, &aw, TU_WAIT_MS) ||
              tu_wait_until(tu_acquirer_done, &ax, 1000));
    if (tu_acquirer_done(&aw)) {
        TU_ASSERT_RC(tu_join_acquirer(&aw), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_release(w), ZKLOCK_OK);
        TU_ASSERT_RC(tu_join_acquirer(&ax), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_release(x), ZKLOCK_OK);
    } else if (tu_acquirer_done(&ax)) {
        TU_ASSERT_RC(tu_join_acquirer(&ax), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_release(x), ZKLOCK_OK);
        TU_ASSERT_RC(tu_join_acquirer(&aw), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_release(w), ZKLOCK_OK);
    } else {
        fprintf(stderr, "W and X both wait: leases %d, locks %d\n",
                tu_count(sub(pathcopy, "leases")), tu_count(sub(pathcopy, "locks")));
        zklock_cancel(w);
        zklock_cancel(x);
        tu_join_acquirer(&aw);
        tu_join_acquirer(&ax);
    }
    TU_ASSERT_RC(zklock_release(probe), ZKLOCK_OK);
    zklock_free(probe);
    zklock_free(h);
    zklock_free(w);
    zklock_free(x);
    zklock_session_close(a);
    zklock_session_close(b);
    zklock_session_close(c);
    zkproxy_stop(proxy);
    tu_assert_clean(path);
}

/* ---- a maximum hold (opts.max_hold_ms, issue 25, item 4) ---------------------------------- */

/* Each lease has its own clock: l1's hold ends LIMIT after l1 took it (a
 * waiter of another session gets the lease), l2's LIMIT after l2 took it. */
static void test_max_hold_per_lease(void)
{
    enum { LIMIT = 600, SECOND_AT = 400 };
    struct tu_events ev1 = TU_EVENTS_INIT, ev2 = TU_EVENTS_INIT;
    zklock_opts_t o1 = {.on_lost = tu_on_lost, .ctx = &ev1, .max_hold_ms = LIMIT,
                        .owner = ZKLOCK_OWNER_HANDLE};
    zklock_opts_t o2 = {.on_lost = tu_on_lost, .ctx = &ev2, .max_hold_ms = LIMIT,
                        .owner = ZKLOCK_OWNER_HANDLE};
    zklock_opts_t other = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *a = tu_session(), *b = tu_session();
    const char *path = tu_path("sem-max-hold");
    zklock_t *l1 = new_sem(a, path, 2, &o1), *l2 = new_sem(a, path, 2, &o2);
    zklock_t *l3 = new_sem(b, path, 2, &other);
    struct tu_acquirer w;
    int64_t t2;

    TU_REQUIRE_RC(zklock_acquire(l1, -1), ZKLOCK_OK);
    TU_ASSERT_INT(tu_lost_within(&ev1, SECOND_AT), ==, 0);
    TU_REQUIRE_RC(zklock_acquire(l2, -1), ZKLOCK_OK);
    t2 = tu_now_ms();
    tu_start_acquirer(&w, l3, TU_WAIT_MS, false);
    tu_max_hold_hands_over(&ev1, 1, l1, &w); /* l1's lease went */
    CU_ASSERT_FATAL(tu_wait_lost(&ev2, 1));
    TU_ASSERT_RC(ev2.lost_reason, ZKLOCK_LOST_MAX_HOLD);
    TU_ASSERT_INT(ev2.lost_at_ms - t2, >=, LIMIT - 50); /* its own clock, not l1's */
    CU_ASSERT(tu_wait_children(sub(path, "leases"), 1)); /* l3's */
    TU_ASSERT_RC(zklock_release(l2), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_release(l3), ZKLOCK_OK);
    TU_ASSERT_INT(tu_count(sub(path, "leases")), ==, 0);
    TU_ASSERT_INT(ev1.lost, ==, 1);
    zklock_free(l1);
    zklock_free(l2);
    zklock_free(l3);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(path);
}

static const tu_test_t sem_tests[] = {
    {"curator_layout", test_curator_layout},
    {"kazoo_layout", test_kazoo_layout},
    {"kazoo_paths_persist", test_kazoo_paths_persist},
    {"kazoo_max_checked_each_time", test_kazoo_max_checked_each_time},
    {"kazoo_path_refused", test_kazoo_path_refused},
    {"spent_counters", test_spent_counters},
    {"limit_holds", test_limit_holds},
    {"limit_holds_kazoo", test_limit_holds_kazoo},
    {"never_exceeded_2", test_never_exceeded_2},
    {"never_exceeded_3", test_never_exceeded_3},
    {"waiter_order", test_waiter_order},
    {"early_let_go_without_room", test_early_let_go_without_room},
    {"expiry_frees_the_lease", test_expiry_frees_the_lease},
    {"timeout_cancel_leave_nothing", test_timeout_cancel_leave_nothing},
    {"close_while_waiting_under_mutex", test_close_while_waiting_under_mutex},
    {"mutex_node_deleted", test_mutex_node_deleted},
    {"reentrant_and_fenced", test_reentrant_and_fenced},
    {"read_leases", test_read_leases},
    {"async_lease", test_async_lease},
    {"bad_input", test_bad_input},
    {"kazoo_waiter_expired", test_kazoo_waiter_expired},
    {"kazoo_waiter_gives_up_watch", test_kazoo_waiter_gives_up_watch},
    {"lease_ran_out_waiter", test_lease_ran_out_waiter},
    {"max_hold_per_lease", test_max_hold_per_lease},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"semaphore", sem_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
