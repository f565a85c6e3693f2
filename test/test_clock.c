/* test_clock.c: the lease on a clock that jumps, as CLOCK_BOOTTIME does when
 * the host sleeps (suspend, hibernation, a virtual machine saved and
 * restored) while CLOCK_MONOTONIC stands still.
 *
 * The seam is this program's own clock_gettime(): it adds a settable offset
 * to CLOCK_BOOTTIME and asks the kernel for every clock itself (so the vDSO
 * is not used). Symbol interposition makes the library call it, linked as a
 * shared library or, as in the sanitizer builds, statically; the library
 * has no hook of its own for it. Condition variables wait on the kernel's
 * CLOCK_MONOTONIC, which the offset does not touch: exactly what a host
 * that slept looks like to a process. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "zkproxy.h"

/* ---- the clock -------------------------------------------------------------------------- */

static int64_t boot_offset_ns; /* __atomic; only grows (BOOTTIME never goes back) */

int clock_gettime(clockid_t clock, struct timespec *ts)
{
    int rc = (int)syscall(SYS_clock_gettime, clock, ts);
    int64_t ns;

    if (rc != 0 || clock != CLOCK_BOOTTIME)
        return rc;
    ns = (int64_t)ts->tv_nsec + __atomic_load_n(&boot_offset_ns, __ATOMIC_SEQ_CST);
    ts->tv_sec += (time_t)(ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
    return 0;
}

/* The host sleeps for ms: CLOCK_BOOTTIME jumps, CLOCK_MONOTONIC does not. */
static void host_sleeps(int64_t ms)
{
    __atomic_add_fetch(&boot_offset_ns, ms * 1000000, __ATOMIC_SEQ_CST);
}

/* ms from now (on ZKLOCK_CLOCK) until t; negative once it passed. */
static int64_t ms_until(const struct timespec *t)
{
    struct timespec now;

    clock_gettime(ZKLOCK_CLOCK, &now);
    return (int64_t)(t->tv_sec - now.tv_sec) * 1000 + (t->tv_nsec - now.tv_nsec) / 1000000;
}

/* The seam works: the library's clock is the one this program moves. */
static void test_the_seam(void)
{
    struct timespec b0, b1, m0, m1;

    CU_ASSERT_FATAL(ZKLOCK_CLOCK == CLOCK_BOOTTIME); /* Linux */
    clock_gettime(CLOCK_BOOTTIME, &b0);
    clock_gettime(CLOCK_MONOTONIC, &m0);
    host_sleeps(60000);
    clock_gettime(CLOCK_BOOTTIME, &b1);
    clock_gettime(CLOCK_MONOTONIC, &m1);
    TU_ASSERT_INT(b1.tv_sec - b0.tv_sec, >=, 60);
    TU_ASSERT_INT(m1.tv_sec - m0.tv_sec, <, 30);
}

/* ---- helpers ----------------------------------------------------------------------------- */

#define TIMEOUT_MS 4000

/* The full path of the only child of path (caller frees), or NULL. */
static char *only_node(const char *path)
{
    int n;
    char **kids = tu_children(path, &n), *one = NULL;

    if (n == 1 && (one = malloc(strlen(path) + strlen(kids[0]) + 2)))
        sprintf(one, "%s/%s", path, kids[0]);
    tu_free_strings(kids);
    return one;
}

/* How long a host sleeps to wake a session timeout (timeout_ms) past l's
 * lease. */
static int64_t past_the_lease(zklock_t *l, int timeout_ms)
{
    struct timespec until;

    TU_REQUIRE_RC(zklock_valid_until(l, &until), ZKLOCK_OK);
    return ms_until(&until) + timeout_ms;
}

/* A session of its own holding a lock at tu_path(name) (max_hold_ms: its
 * opts'), whose node is node, and whose losses are recorded in lost. */
struct holder {
    zklock_session_t *s;
    zklock_t *l;
    struct tu_events lost;
    const char *path;
    char *node;
};

static void hold(struct holder *h, const char *name, int max_hold_ms)
{
    zklock_session_opts_t so = {.timeout_ms = TIMEOUT_MS};
    zklock_opts_t lo = {.on_lost = tu_on_lost, .max_hold_ms = max_hold_ms};

    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->lost.mu, NULL);
    lo.ctx = &h->lost;
    h->path = tu_path(name);
    h->s = tu_session_opts(&so);
    h->l = tu_mutex(h->s, h->path, &lo);
    TU_REQUIRE_RC(zklock_acquire(h->l, -1), ZKLOCK_OK);
    h->node = only_node(h->path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h->node);
}

static void let_go(struct holder *h)
{
    free(h->node);
    zklock_free(h->l);
    zklock_session_close(h->s);
    tu_assert_clean(h->path);
}

/* The calls that answer by the hold as it is when they are called (the
 * lease, the maximum hold), whoever noticed first. */
enum query { Q_HOLD_COUNT, Q_FENCE, Q_VALID_UNTIL, Q_CHECK_OP, Q_RELEASE, Q_COUNT };

/* Asks q first, of a hold that has just lapsed while nothing else could
 * notice: it must answer that the hold is over. Each query is asked first
 * on a lapse of its own: the first to notice ends the hold for every
 * other. */
static void assert_over(zklock_t *l, enum query q)
{
    struct timespec until;
    int64_t token;
    zoo_op_t op;

    switch (q) {
    case Q_HOLD_COUNT: TU_ASSERT_INT(zklock_hold_count(l), ==, 0); break;
    case Q_FENCE: TU_ASSERT_RC(zklock_fence(l, &token), ZKLOCK_ELOST); break;
    case Q_VALID_UNTIL: TU_ASSERT_RC(zklock_valid_until(l, &until), ZKLOCK_ENOTHELD); break;
    case Q_CHECK_OP: TU_ASSERT_RC(zklock_check_op(l, &op), ZKLOCK_ENOTHELD); break;
    case Q_RELEASE: TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST); break;
    case Q_COUNT: break;
    }
}

/* ... and every other query says so too, then: the hold is over for all
 * (once released, nothing is held: no hold to tell of). */
static void assert_over_for_all(zklock_t *l, enum query asked)
{
    int64_t token;

    if (asked == Q_RELEASE) {
        TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
        TU_ASSERT_RC(zklock_fence(l, &token), ZKLOCK_ENOTHELD);
        return;
    }
    for (enum query q = Q_HOLD_COUNT; q < Q_COUNT; q++)
        if (q != asked && q != Q_RELEASE)
            assert_over(l, q);
}

/* h's hold has just lapsed (reason: what on_lost will say) while nothing
 * else could notice: q, asked first, says it is over, and so does every
 * other query then; on_lost follows, once, and the node goes (the session
 * lives: zklock deletes it); the owner's release answers ELOST. */
static void lapsed_asking(struct holder *h, enum query q, int reason)
{
    assert_over(h->l, q);
    assert_over_for_all(h->l, q);
    CU_ASSERT(tu_wait_until(tu_lost_once, &h->lost, TU_WAIT_MS));
    TU_ASSERT_RC(h->lost.lost_reason, reason);
    CU_ASSERT(tu_wait_until(tu_gone, h->node, TU_WAIT_MS));
    if (q != Q_RELEASE)
        TU_ASSERT_RC(zklock_release(h->l), ZKLOCK_ELOST);
    TU_ASSERT_INT(h->lost.lost, ==, 1);
}

/* ---- the tests ------------------------------------------------------------------------------ */

/* The host sleeps past the lease; the session lives on (nothing happened on
 * the ensemble meanwhile). The hold ends the moment the clock passed
 * valid_until: asked right after the wake-up, before anything else
 * noticed, query q says so. on_lost follows (UNSURE: zklock cannot know
 * the session lives until the server answers), and the node goes once the
 * session is heard from. The session is the same, and a new hold has a new
 * lease. */
static void sleep_past_the_lease_asking(enum query q)
{
    struct holder h;
    struct timespec until;
    int64_t id;

    hold(&h, "slept", 0);
    id = zklock_session_id(h.s);
    host_sleeps(past_the_lease(h.l, TIMEOUT_MS));
    lapsed_asking(&h, q, ZKLOCK_LOST_UNSURE);
    TU_ASSERT_INT(zklock_session_id(h.s), ==, id);
    /* A new lease for a new hold. */
    TU_ASSERT_RC(zklock_acquire(h.l, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_valid_until(h.l, &until), ZKLOCK_OK);
    TU_ASSERT_INT(ms_until(&until), >, TIMEOUT_MS / 2);
    TU_ASSERT_RC(zklock_release(h.l), ZKLOCK_OK);
    TU_ASSERT_INT(h.lost.lost, ==, 1);
    let_go(&h);
}

static void test_sleep_past_the_lease(void)
{
    for (enum query q = Q_HOLD_COUNT; q < Q_COUNT; q++)
        sleep_past_the_lease_asking(q);
}

/* A maximum hold passes while this process does not run (here the host
 * sleeps; a process stopped past it is the same to the library: nothing
 * ran when it fell due). As for the lease, the hold ends the moment the
 * clock passed it: asked right after the wake-up, before the session
 * thread noticed, query q says so. on_lost says MAX_HOLD, and the node
 * goes. */
#define MAX_HOLD_MS 1000

static void max_hold_passed_asking(enum query q)
{
    struct holder h;

    hold(&h, "max-hold-slept", MAX_HOLD_MS);
    host_sleeps(MAX_HOLD_MS + 20); /* well within the lease, and late by less than its margin */
    lapsed_asking(&h, q, ZKLOCK_LOST_MAX_HOLD);
    let_go(&h);
}

static void test_max_hold_passed_unseen(void)
{
    for (enum query q = Q_HOLD_COUNT; q < Q_COUNT; q++)
        max_hold_passed_asking(q);
}

/* The same, and nobody asks: the session thread notices by itself, within
 * the lease's margin (its sleep is capped at it while a timer is armed, and
 * it reads the clock again at every wake-up). */
static void test_sleep_noticed_unasked(void)
{
    struct holder h;

    hold(&h, "slept-unasked", 0);
    host_sleeps(past_the_lease(h.l, TIMEOUT_MS));
    CU_ASSERT(tu_wait_until(tu_lost_once, &h.lost, TU_WAIT_MS));
    TU_ASSERT_RC(h.lost.lost_reason, ZKLOCK_LOST_UNSURE);
    TU_ASSERT_INT(zklock_hold_count(h.l), ==, 0);
    CU_ASSERT(tu_wait_until(tu_gone, h.node, TU_WAIT_MS));
    TU_ASSERT_RC(zklock_release(h.l), ZKLOCK_ELOST);
    let_go(&h);
}

/* A tracking hold (track_previous) whose record can no longer be written
 * (an operator made it read-only) ends a lease after its last write of it,
 * while heartbeats renew the session's lease for the session's other
 * hold. The host sleeps past the first end and not the second: asked at
 * once, the tracking hold is over (by its record's lease, as by the
 * session's: valid_until gave that end), the other one holds. */
struct two_ends {
    zklock_t *tracked, *plain;
    struct timespec tracked_end, plain_end;
};

/* The session's lease now outlives the tracking hold's by a quarter of
 * the timeout: a heartbeat or a refused refresh renewed it, no refresh of
 * the record. */
static bool session_outlives_record(void *arg)
{
    struct two_ends *e = arg;

    if (zklock_valid_until(e->tracked, &e->tracked_end) != ZKLOCK_OK ||
        zklock_valid_until(e->plain, &e->plain_end) != ZKLOCK_OK)
        return false;
    return ms_until(&e->plain_end) - ms_until(&e->tracked_end) > TIMEOUT_MS / 4;
}

static void test_sleep_past_the_record_lease(void)
{
    zklock_session_opts_t so = {.timeout_ms = TIMEOUT_MS};
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t to = {.track_previous = 1, .on_lost = tu_on_lost, .ctx = &lost};
    const char *tp = tu_path("slept-record"), *pp = tu_path("slept-record-plain");
    zklock_session_t *s = tu_session_opts(&so);
    struct two_ends e = {.tracked = tu_mutex(s, tp, &to), .plain = tu_mutex(s, pp, NULL)};
    char rec[512];
    int64_t token;

    snprintf(rec, sizeof rec, "%s/zklock.previous", tp);
    TU_REQUIRE_RC(zklock_acquire(e.tracked, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(e.plain, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zoo_set_acl(tu_zk(), rec, -1, &ZOO_READ_ACL_UNSAFE), ZOK);
    CU_ASSERT_FATAL(tu_wait_until(session_outlives_record, &e, 2 * TIMEOUT_MS));
    host_sleeps(ms_until(&e.tracked_end) + TIMEOUT_MS / 16);
    TU_ASSERT_RC(zklock_fence(e.tracked, &token), ZKLOCK_ELOST);
    TU_ASSERT_INT(zklock_hold_count(e.tracked), ==, 0);
    TU_ASSERT_RC(zklock_fence(e.plain, &token), ZKLOCK_OK);
    CU_ASSERT(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_UNSURE);
    TU_ASSERT_RC(zklock_release(e.plain), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(e.tracked), ZKLOCK_ELOST);
    zklock_free(e.tracked);
    zklock_free(e.plain);
    zklock_session_close(s);
    tu_assert_clean(tp);
    tu_assert_clean(pp);
    TU_ASSERT_INT(zoo_delete(tu_zk(), rec, -1), ==, ZOK);
    zoo_delete(tu_zk(), tp, -1);
}

static bool no_nodes(void *path)
{
    return tu_no_children(path);
}

/* The host sleeps while cut off, and the ensemble expires the session
 * meanwhile (here: at once, closed through a twin handle). The hold ends at
 * the wake-up; on_lost says EXPIRED (the local expiry, a session timeout
 * after the connection went, is due by then too), and a new session
 * follows once the network is back.
 *
 * The twin connects only once the client is cut off: a second connection
 * of a session takes it from the first, and the client, reconnecting,
 * would take it back, each knocking the other off and the lease left
 * unrenewed (the lease ran out before the sleep, on a loaded machine or
 * under valgrind). And all of it must fit in the lease that is left after
 * the cut (at least 0.78 T): T is long enough for that. */
#define EXPIRED_TIMEOUT_MS 8000

static void test_sleep_session_expired(void)
{
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    zklock_session_opts_t so = {.timeout_ms = EXPIRED_TIMEOUT_MS, .on_state = tu_on_state};
    struct tu_events ev = TU_EVENTS_INIT, lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    const char *path = tu_path("slept-expired");
    zklock_session_t *s = NULL;
    zhandle_t *twin;
    zklock_t *l;
    int64_t token;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    so.ctx = &ev;
    TU_REQUIRE_RC(zklock_session_open(&s, zkproxy_hosts(proxy), &so), ZKLOCK_OK);
    l = tu_mutex(s, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    zkproxy_cut(proxy);
    CU_ASSERT_FATAL(tu_wait_state(&ev, ZKLOCK_SUSPENDED));
    twin = tu_connect_as(zoo_client_id(zklock_session_zhandle(s)));
    CU_ASSERT_PTR_NOT_NULL_FATAL(twin);
    zookeeper_close(twin); /* the session ends on the ensemble */
    CU_ASSERT(tu_wait_until(no_nodes, (void *)path, TU_WAIT_MS));
    host_sleeps(past_the_lease(l, EXPIRED_TIMEOUT_MS));
    TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
    TU_ASSERT_RC(zklock_fence(l, &token), ZKLOCK_ELOST);
    CU_ASSERT(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_EXPIRED);
    CU_ASSERT(tu_wait_state(&ev, ZKLOCK_EXPIRED));
    zkproxy_restore(proxy);
    CU_ASSERT(tu_wait_state(&ev, ZKLOCK_CONNECTED));
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    zkproxy_stop(proxy);
    tu_assert_clean(path);
}

static const tu_test_t clock_tests[] = {
    {"the_seam", test_the_seam},
    {"sleep_past_the_lease", test_sleep_past_the_lease},
    {"sleep_noticed_unasked", test_sleep_noticed_unasked},
    {"max_hold_passed_unseen", test_max_hold_passed_unseen},
    {"sleep_session_expired", test_sleep_session_expired},
    {"sleep_past_the_record_lease", test_sleep_past_the_record_lease},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"clock", clock_tests}, {NULL, NULL}};
    return tu_main(suites, true);
}
