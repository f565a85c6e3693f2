/* test_rwlock.c: the read/write lock against a real ZooKeeper. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "detector.h"

static zklock_rwlock_t *new_rw(zklock_session_t *s, const char *path, const zklock_opts_t *opts)
{
    zklock_rwlock_t *rw = NULL;
    TU_REQUIRE_RC(zklock_rwlock_new(&rw, s, path, opts), ZKLOCK_OK);
    return rw;
}

static void test_wire_names(void)
{
    zklock_session_t *a = tu_session(), *b = tu_session();
    const char *path = tu_path("rw-names");
    zklock_rwlock_t *ra = new_rw(a, path, NULL), *rb = new_rw(b, path, NULL);

    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_read(ra), -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_read(rb), -1), ZKLOCK_OK);
    TU_ASSERT_INT(tu_children_matching(path, "^" TU_CURATOR_PREFIX "__READ__[0-9]{10}$"), ==, 2);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_read(ra)), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_read(rb)), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(ra), -1), ZKLOCK_OK);
    TU_ASSERT_INT(tu_children_matching(path, "^" TU_CURATOR_PREFIX "__WRIT__[0-9]{10}$"), ==, 1);
    TU_ASSERT_INT(tu_count(path), ==, 1);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(ra)), ZKLOCK_OK);
    zklock_rwlock_free(ra);
    zklock_rwlock_free(rb);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(path);
}

/* ---- readers share ------------------------------------------------------------- */

struct reader_meet {
    zklock_t *l;
    int *inside, want, rc;
    pthread_t t;
};

static bool all_inside(void *p)
{
    struct reader_meet *m = p;
    return __atomic_load_n(m->inside, __ATOMIC_SEQ_CST) >= m->want;
}

static void *reader_main(void *p)
{
    struct reader_meet *m = p;
    m->rc = zklock_acquire(m->l, 20000);
    if (m->rc != 0)
        return NULL;
    __atomic_add_fetch(m->inside, 1, __ATOMIC_SEQ_CST);
    /* Stay inside until every reader is: they must all hold at once. */
    if (!tu_wait_until(all_inside, m, TU_WAIT_MS))
        m->rc = ZKLOCK_ETIMEDOUT;
    zklock_release(m->l);
    return NULL;
}

static void test_readers_overlap(void)
{
    enum { R = 4 };
    zklock_session_t *s[R];
    zklock_rwlock_t *rw[R];
    struct reader_meet m[R];
    const char *path = tu_path("rw-overlap");
    int inside = 0;

    for (int i = 0; i < R; i++) {
        s[i] = tu_session();
        rw[i] = new_rw(s[i], path, NULL);
        m[i] = (struct reader_meet){zklock_rwlock_read(rw[i]), &inside, R, -1, 0};
        pthread_create(&m[i].t, NULL, reader_main, &m[i]);
    }
    for (int i = 0; i < R; i++) {
        pthread_join(m[i].t, NULL);
        TU_ASSERT_RC(m[i].rc, ZKLOCK_OK);
    }
    TU_ASSERT_INT(inside, ==, R);
    for (int i = 0; i < R; i++) {
        zklock_rwlock_free(rw[i]);
        zklock_session_close(s[i]);
    }
    tu_assert_clean(path);
}

/* ---- writers exclude everyone, across threads and processes ---------------------------- */

static void test_mixed_processes_exclusion(void)
{
    const char *path = tu_path("rw-procs");
    char file[64], *helper = getenv("ZKLOCK_TEST_CONTENDER");
    struct detector *d = tu_new_detector(file, sizeof file);
    static const char *modes[] = {"r", "w", "r", "w", "m"};
    int pids[5];

    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_PTR_NOT_NULL_FATAL(helper);
    /* Readers, writers and a mutex on one path: zklock's order reads every tag,
     * so the mutex excludes everyone too. */
    for (int i = 0; i < 5; i++) {
        char *argv[] = {helper, (char *)tu_hosts(), (char *)path, (char *)modes[i], "2", "15",
                        file, NULL};
        pids[i] = tu_spawn(argv);
        CU_ASSERT(pids[i] > 0);
    }
    for (int i = 0; i < 5; i++)
        TU_ASSERT_INT(tu_wait_pid(pids[i]), ==, 0);
    TU_ASSERT_INT(d->errors, ==, 0);
    TU_ASSERT_INT(d->overlaps, ==, 0);
    TU_ASSERT_INT(d->stale_tokens, ==, 0);
    TU_ASSERT_INT(d->entries, ==, 5 * 2 * 15);
    tu_free_detector(d, file);
    tu_assert_clean(path);
}

/* ---- fairness ---------------------------------------------------------------------------- */

/* W1 holds; R2, W3, R4 queue in that order. R2 reads as soon as W1 is done,
 * R4 waits for W3 although only a reader holds: no writer starvation. */
static void test_arrival_order_fairness(void)
{
    zklock_session_t *s = tu_session(), *r2s = tu_session(), *w3s = tu_session(),
                     *r4s = tu_session();
    const char *path = tu_path("rw-fair");
    zklock_rwlock_t *w1 = new_rw(s, path, NULL), *r2 = new_rw(r2s, path, NULL),
                    *w3 = new_rw(w3s, path, NULL), *r4 = new_rw(r4s, path, NULL);
    struct tu_acquirer a2, a3, a4;

    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(w1), -1), ZKLOCK_OK);
    tu_start_acquirer(&a2, zklock_rwlock_read(r2), 30000, false);
    CU_ASSERT(tu_wait_children(path, 2));
    tu_start_acquirer(&a3, zklock_rwlock_write(w3), 30000, false);
    CU_ASSERT(tu_wait_children(path, 3));
    tu_start_acquirer(&a4, zklock_rwlock_read(r4), 30000, false);
    CU_ASSERT(tu_wait_children(path, 4));
    /* Each has read the queue before the release (else it rightly holds or
     * waits without the wake-up this test counts). */
    CU_ASSERT(tu_wait_listings(r2s, 1) && tu_wait_listings(w3s, 1) && tu_wait_listings(r4s, 1));

    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(w1)), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&a2), ZKLOCK_OK); /* R2 reads */
    /* R4 evaluated its place when it queued and has not been woken since:
     * it waits on W3, not on the reader. W1's going has reached W3 and R4
     * by now, had they watched it. */
    tu_barrier(w3s);
    tu_barrier(r4s);
    TU_ASSERT_INT(TU_STAT(r4s, listings), ==, 1);
    TU_ASSERT_INT(TU_STAT(r4s, wakeups), ==, 0);
    TU_ASSERT_INT(TU_STAT(r4s, acquired), ==, 0);
    TU_ASSERT_INT(TU_STAT(w3s, acquired), ==, 0);
    TU_ASSERT_INT(tu_acquirer_done(&a3), ==, 0);
    TU_ASSERT_INT(tu_acquirer_done(&a4), ==, 0);
    zklock_rwlock_free(r2); /* releases R2's read hold, whichever thread took it */
    TU_ASSERT_RC(tu_join_acquirer(&a3), ZKLOCK_OK); /* then W3 */
    tu_barrier(r4s); /* R2's going has reached R4, had it watched R2 */
    TU_ASSERT_INT(TU_STAT(r4s, acquired), ==, 0);
    TU_ASSERT_INT(tu_acquirer_done(&a4), ==, 0);
    zklock_rwlock_free(w3); /* releases W3 */
    TU_ASSERT_RC(tu_join_acquirer(&a4), ZKLOCK_OK); /* then R4 */
    zklock_rwlock_free(r4);
    zklock_rwlock_free(w1);
    zklock_session_close(s);
    zklock_session_close(r2s);
    zklock_session_close(w3s);
    zklock_session_close(r4s);
    tu_assert_clean(path);
}

/* ---- downgrade and upgrade ------------------------------------------------------------- */

static bool relisted(void *s)
{
    return TU_STAT(s, listings) >= 2;
}

static void downgrade_keeps_place(int wire, const char *read_tag)
{
    zklock_opts_t o = {.wire = wire};
    zklock_session_t *s = tu_session(), *other = tu_session(), *third = tu_session();
    const char *path = tu_path(wire == ZKLOCK_WIRE_KAZOO ? "rw-downgrade-kazoo" : "rw-downgrade");
    zklock_rwlock_t *rw = new_rw(s, path, &o), *rw2 = new_rw(other, path, &o),
                    *rw3 = new_rw(third, path, &o);
    struct tu_acquirer writer;
    int64_t wtoken, rtoken;

    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(rw), -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(zklock_rwlock_write(rw), &wtoken), ZKLOCK_OK);
    tu_start_acquirer(&writer, zklock_rwlock_write(rw2), 30000, true);
    CU_ASSERT(tu_wait_children(path, 2));
    CU_ASSERT(tu_wait_listings(other, 1)); /* so the write release wakes it */

    /* Downgrade: the read side at once, although a writer is queued. */
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_read(rw), 0), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(zklock_rwlock_read(rw)), ==, 1);
    TU_ASSERT_RC(zklock_fence(zklock_rwlock_read(rw), &rtoken), ZKLOCK_OK);
    TU_ASSERT_INT(rtoken, ==, wtoken); /* the heir holds by its writer's place */
    TU_ASSERT_INT(tu_children_matching(path, read_tag), ==, 1);

    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(rw)), ZKLOCK_OK);
    /* The queued writer was woken by the write release and looked again:
     * the heir keeps the place, so it must still be waiting. */
    CU_ASSERT(tu_wait_until(relisted, other, TU_WAIT_MS));
    TU_ASSERT_INT(TU_STAT(other, acquired), ==, 0);
    TU_ASSERT_INT(tu_acquirer_done(&writer), ==, 0);
    /* Everyone else sees a reader holding: a writer cannot get in... */
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_write(rw3), 0), ZKLOCK_EBUSY);
    /* ...and after the downgraded read ends, the queued writer goes. */
    TU_ASSERT_RC(zklock_release(zklock_rwlock_read(rw)), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&writer), ZKLOCK_OK);
    /* Storage that saw the heir's token must accept the next writer's. */
    TU_ASSERT_INT(writer.token, >, rtoken);
    zklock_rwlock_free(rw);
    zklock_rwlock_free(rw2);
    zklock_rwlock_free(rw3);
    zklock_session_close(s);
    zklock_session_close(other);
    zklock_session_close(third);
    tu_assert_clean(path);
}

static void test_downgrade_keeps_place(void)
{
    downgrade_keeps_place(ZKLOCK_WIRE_CURATOR, "__READ__");
}

/* kazoo's writers are __lock__ nodes: they too may leave an heir behind. */
static void test_downgrade_keeps_place_kazoo(void)
{
    downgrade_keeps_place(ZKLOCK_WIRE_KAZOO, "__rlock__");
}

/* The write node of session s on path (into buf). */
static void writer_node(zklock_session_t *s, const char *path, char *buf, size_t len)
{
    char **kids, full[512];
    struct Stat st;
    int n;

    kids = tu_children(path, &n);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        snprintf(full, sizeof full, "%s/%s", path, kids[i]);
        if (strstr(kids[i], "__WRIT__") && zoo_exists(tu_zk(), full, 0, &st) == ZOK &&
            st.ephemeralOwner == zklock_session_id(s))
            snprintf(buf, len, "%s", full);
    }
    tu_free_strings(kids);
}

/* An operator deletes a writer's node before the writer's own-node watch is
 * armed, and a writer elsewhere takes the lock: the first writer's thread
 * must not become a downgrade heir beside it (its writer's place is gone),
 * and its write hold is reported lost. */
static void test_no_heir_without_its_writer(void)
{
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_opts_t handle_owned = {.owner = ZKLOCK_OWNER_HANDLE}; /* released from here */
    zklock_session_t *s = tu_session(), *other = tu_session();
    const char *path = tu_path("rw-no-heir");
    zklock_rwlock_t *rw = new_rw(s, path, &lo), *rw2 = new_rw(other, path, &handle_owned);
    struct tu_acquirer writer2;
    char node[512];

    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(rw), -1), ZKLOCK_OK);
    tu_start_acquirer(&writer2, zklock_rwlock_write(rw2), 30000, false);
    CU_ASSERT(tu_wait_children(path, 2));
    writer_node(s, path, node, sizeof node);
    TU_REQUIRE_RC(zoo_delete(tu_zk(), node, -1), ZOK); /* an operator's hand */
    TU_ASSERT_RC(tu_join_acquirer(&writer2), ZKLOCK_OK); /* the other writer holds */
    /* The downgrade: refused as an heir (no live writer node), it queues as
     * a plain reader behind the other writer. */
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_read(rw), 0), ZKLOCK_EBUSY);
    CU_ASSERT(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_DELETED);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(rw)), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(rw2)), ZKLOCK_OK);
    zklock_rwlock_free(rw);
    zklock_rwlock_free(rw2);
    zklock_session_close(s);
    zklock_session_close(other);
    tu_assert_clean(path);
}

/* The writer's node and the lock path itself are gone: the read side then
 * queues again as a plain reader (making the path anew), and holds. */
static void test_heir_when_the_path_is_gone(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("rw-heir-path");
    zklock_rwlock_t *rw = new_rw(s, path, NULL);
    char node[512];
    int64_t wtoken, rtoken;

    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(rw), -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(zklock_rwlock_write(rw), &wtoken), ZKLOCK_OK);
    writer_node(s, path, node, sizeof node);
    TU_REQUIRE_RC(zoo_delete(tu_zk(), node, -1), ZOK);
    TU_REQUIRE_RC(zoo_delete(tu_zk(), path, -1), ZOK);
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_read(rw), 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(zklock_rwlock_read(rw), &rtoken), ZKLOCK_OK);
    TU_ASSERT_INT(rtoken, >, wtoken); /* its own node's: not an heir's */
    TU_ASSERT_RC(zklock_release(zklock_rwlock_read(rw)), ZKLOCK_OK);
    zklock_release(zklock_rwlock_write(rw)); /* lost meanwhile, or not yet known */
    zklock_rwlock_free(rw);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static void test_upgrade_is_edeadlk(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("rw-upgrade");
    zklock_rwlock_t *rw = new_rw(s, path, NULL);

    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_read(rw), -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_write(rw), -1), ZKLOCK_EDEADLK);
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_write(rw), 0), ZKLOCK_EDEADLK);
    TU_ASSERT_INT(tu_count(path), ==, 1); /* nothing was queued */
    TU_ASSERT_INT(zklock_hold_count(zklock_rwlock_write(rw)), ==, 0);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_read(rw)), ZKLOCK_OK);
    /* Without the read hold, the write side is fine. */
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_write(rw), 0), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(rw)), ZKLOCK_OK);
    zklock_rwlock_free(rw);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static void test_reentrancy_both_sides(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("rw-reentrant");
    zklock_rwlock_t *rw = new_rw(s, path, NULL);
    zklock_t *r = zklock_rwlock_read(rw), *w = zklock_rwlock_write(rw);

    for (int i = 1; i <= 3; i++) {
        TU_REQUIRE_RC(zklock_acquire(w, -1), ZKLOCK_OK);
        TU_ASSERT_INT(zklock_hold_count(w), ==, i);
    }
    for (int i = 1; i <= 2; i++) {
        TU_REQUIRE_RC(zklock_acquire(r, -1), ZKLOCK_OK); /* downgrade, then reentrant */
        TU_ASSERT_INT(zklock_hold_count(r), ==, i);
    }
    TU_ASSERT_INT(tu_count(path), ==, 2); /* one writer node, one heir */
    for (int i = 2; i >= 0; i--) {
        TU_ASSERT_RC(zklock_release(w), ZKLOCK_OK);
        TU_ASSERT_INT(zklock_hold_count(w), ==, i);
    }
    TU_ASSERT_INT(zklock_hold_count(r), ==, 2);
    TU_ASSERT_RC(zklock_acquire(w, 0), ZKLOCK_EDEADLK); /* now only a reader */
    TU_ASSERT_RC(zklock_release(r), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(r), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(r), ZKLOCK_ENOTHELD);
    CU_ASSERT(tu_no_children(path));
    zklock_free(r); /* a borrowed view: ignored */
    zklock_rwlock_free(rw);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* ---- wake-ups -------------------------------------------------------------------------------- */

struct holder {
    zklock_t *l;
    pthread_t t;
    int holding, go, rc;
};

static void *holder_main(void *p)
{
    struct holder *h = p;
    h->rc = zklock_acquire(h->l, 60000);
    if (h->rc != 0)
        return NULL;
    __atomic_store_n(&h->holding, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&h->go, __ATOMIC_SEQ_CST))
        sched_yield(); /* the test tells us when to let go */
    h->rc = zklock_release(h->l);
    return NULL;
}

static bool is_holding(void *p)
{
    return __atomic_load_n(&((struct holder *)p)->holding, __ATOMIC_SEQ_CST) != 0;
}

/* Starts a thread that takes l (of session s) and returns once its node is
 * the queued-th child and it has read the queue (so it knows whom to watch). */
static void start_holder(struct holder *h, zklock_session_t *s, zklock_t *l, const char *path,
                         int queued)
{
    memset(h, 0, sizeof *h);
    h->l = l;
    pthread_create(&h->t, NULL, holder_main, h);
    CU_ASSERT(tu_wait_children(path, queued));
    CU_ASSERT(tu_wait_listings(s, 1));
}

static void let_go(struct holder *h)
{
    __atomic_store_n(&h->go, 1, __ATOMIC_SEQ_CST);
    pthread_join(h->t, NULL);
    TU_ASSERT_RC(h->rc, ZKLOCK_OK);
}

/* Queue W1 R2 R3 W4 R5, each in its own session; count who wakes. */
static void test_release_wakes_only_who_can_proceed(void)
{
    enum { N = 5 };
    const char *path = tu_path("rw-wakeups");
    const bool writer[N] = {true, false, false, true, false};
    zklock_session_t *s[N];
    zklock_rwlock_t *rw[N];
    struct holder h[N];

    for (int i = 0; i < N; i++) {
        s[i] = tu_session();
        rw[i] = new_rw(s[i], path, NULL);
        start_holder(&h[i], s[i], writer[i] ? zklock_rwlock_write(rw[i]) : zklock_rwlock_read(rw[i]),
                     path, i + 1);
    }
    CU_ASSERT(tu_wait_until(is_holding, &h[0], TU_WAIT_MS));
    let_go(&h[0]); /* W1 goes: R2 and R3 may read, nobody else may move */
    CU_ASSERT(tu_wait_until(is_holding, &h[1], TU_WAIT_MS));
    CU_ASSERT(tu_wait_until(is_holding, &h[2], TU_WAIT_MS));
    TU_ASSERT_INT(TU_STAT(s[1], wakeups), ==, 1);
    TU_ASSERT_INT(TU_STAT(s[2], wakeups), ==, 1);
    TU_ASSERT_INT(TU_STAT(s[3], wakeups), ==, 0);
    TU_ASSERT_INT(TU_STAT(s[4], wakeups), ==, 0);
    let_go(&h[1]); /* R2 goes: W4 watches R3, so nobody wakes */
    TU_ASSERT_INT(TU_STAT(s[3], wakeups), ==, 0);
    TU_ASSERT_INT(TU_STAT(s[4], wakeups), ==, 0);
    let_go(&h[2]); /* R3 goes: W4 holds, R5 still sleeps */
    CU_ASSERT(tu_wait_until(is_holding, &h[3], TU_WAIT_MS));
    TU_ASSERT_INT(TU_STAT(s[3], wakeups), ==, 1);
    TU_ASSERT_INT(TU_STAT(s[4], wakeups), ==, 0);
    let_go(&h[3]); /* W4 goes: R5 reads */
    CU_ASSERT(tu_wait_until(is_holding, &h[4], TU_WAIT_MS));
    TU_ASSERT_INT(TU_STAT(s[4], wakeups), ==, 1);
    let_go(&h[4]);
    for (int i = 0; i < N; i++) {
        zklock_rwlock_free(rw[i]);
        zklock_session_close(s[i]);
    }
    tu_assert_clean(path);
}

/* ---- fencing and expiry ---------------------------------------------------------------------- */

static void test_writer_tokens_increase(void)
{
    zklock_session_t *a = tu_session(), *b = tu_session();
    const char *path = tu_path("rw-fence");
    zklock_rwlock_t *ra = new_rw(a, path, NULL), *rb = new_rw(b, path, NULL);
    int64_t last = 0, token;

    for (int i = 0; i < 6; i++) {
        zklock_t *w = zklock_rwlock_write(i % 2 ? ra : rb);
        zklock_t *r = zklock_rwlock_read(i % 2 ? rb : ra);
        TU_REQUIRE_RC(zklock_acquire(w, -1), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_fence(w, &token), ZKLOCK_OK);
        TU_ASSERT_INT(token, >, last);
        last = token;
        TU_ASSERT_RC(zklock_release(w), ZKLOCK_OK);
        TU_REQUIRE_RC(zklock_acquire(r, -1), ZKLOCK_OK); /* a reader in between */
        TU_ASSERT_RC(zklock_release(r), ZKLOCK_OK);
    }
    zklock_rwlock_free(ra);
    zklock_rwlock_free(rb);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(path);
}

static void expire_while(bool writing)
{
    struct tu_events ev = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &ev};
    zklock_session_t *s = tu_session(), *other = tu_session();
    const char *path = tu_path(writing ? "rw-expire-w" : "rw-expire-r");
    zklock_rwlock_t *rw = new_rw(s, path, &lo), *rw2 = new_rw(other, path, NULL);
    zklock_t *l = writing ? zklock_rwlock_write(rw) : zklock_rwlock_read(rw);
    struct tu_acquirer waiter;

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    tu_start_acquirer(&waiter, zklock_rwlock_write(rw2), 30000, true);
    CU_ASSERT(tu_wait_children(path, 2));
    tu_expire(s);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &ev, TU_WAIT_MS));
    /* Closing the session from the twin handle deletes our node first; the
     * client may hear of the deletion before it hears of the expiry. */
    CU_ASSERT(ev.lost_reason == ZKLOCK_LOST_EXPIRED || ev.lost_reason == ZKLOCK_LOST_DELETED);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
    TU_ASSERT_RC(tu_join_acquirer(&waiter), ZKLOCK_OK); /* the writer got in */
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    zklock_rwlock_free(rw);
    zklock_rwlock_free(rw2);
    zklock_session_close(s);
    zklock_session_close(other);
    tu_assert_clean(path);
}

static void test_expiry_while_reading(void)
{
    expire_while(false);
}

static void test_expiry_while_writing(void)
{
    expire_while(true);
}

static void test_timeout_and_cancel_leave_nothing(void)
{
    zklock_session_t *a = tu_session(), *b = tu_session();
    const char *path = tu_path("rw-giveup");
    zklock_rwlock_t *ra = new_rw(a, path, NULL), *rb = new_rw(b, path, NULL);
    struct tu_acquirer reader;

    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(ra), -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_read(rb), 200), ZKLOCK_ETIMEDOUT);
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_read(rb), 0), ZKLOCK_EBUSY);
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_write(rb), 0), ZKLOCK_EBUSY);
    tu_start_acquirer(&reader, zklock_rwlock_read(rb), -1, false);
    CU_ASSERT(tu_wait_children(path, 2));
    TU_ASSERT_RC(zklock_cancel(zklock_rwlock_read(rb)), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&reader), ZKLOCK_ECANCELED);
    TU_ASSERT_INT(tu_count(path), ==, 1);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(ra)), ZKLOCK_OK);
    zklock_rwlock_free(ra);
    zklock_rwlock_free(rb);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(path);
}

static void test_bad_input(void)
{
    zklock_session_t *s = tu_session();
    zklock_rwlock_t *rw = NULL;

    TU_ASSERT_RC(zklock_rwlock_new(NULL, s, "/x", NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_rwlock_new(&rw, NULL, "/x", NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_rwlock_new(&rw, s, "x/", NULL), ZKLOCK_EINVAL);
    CU_ASSERT_PTR_NULL(rw);
    CU_ASSERT_PTR_NULL(zklock_rwlock_read(NULL));
    CU_ASSERT_PTR_NULL(zklock_rwlock_write(NULL));
    zklock_rwlock_free(NULL);
    zklock_session_close(s);
}

/* ---- a maximum hold (opts.max_hold_ms, issue 25, item 4) ---------------------------------- */

#define MAX_HOLD_MS 300

/* One side of rw holds past its limit while the other side of rw2 (another
 * session) waits: the hold ends (MAX_HOLD), the waiter gets it, the late
 * release answers ZKLOCK_ELOST. */
static void max_hold_side(bool write, const char *name)
{
    struct tu_events ev = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &ev, .max_hold_ms = MAX_HOLD_MS,
                        .owner = ZKLOCK_OWNER_HANDLE};
    zklock_opts_t other = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *a = tu_session(), *b = tu_session();
    const char *path = tu_path(name);
    zklock_rwlock_t *rw = new_rw(a, path, &lo), *rw2 = new_rw(b, path, &other);
    zklock_t *mine = write ? zklock_rwlock_write(rw) : zklock_rwlock_read(rw);
    zklock_t *theirs = write ? zklock_rwlock_read(rw2) : zklock_rwlock_write(rw2);
    struct tu_acquirer w;

    TU_REQUIRE_RC(zklock_acquire(mine, -1), ZKLOCK_OK);
    tu_start_acquirer(&w, theirs, TU_WAIT_MS, false);
    tu_max_hold_hands_over(&ev, 1, mine, &w);
    TU_ASSERT_INT(tu_count(path), ==, 1);
    TU_ASSERT_RC(zklock_release(theirs), ZKLOCK_OK);
    zklock_rwlock_free(rw);
    zklock_rwlock_free(rw2);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(path);
}

static void test_max_hold_write(void)
{
    max_hold_side(true, "rw-max-hold-write");
}

static void test_max_hold_read(void)
{
    max_hold_side(false, "rw-max-hold-read");
}

/* A downgrade (write, then read) past the write hold's limit: the read hold
 * by the writer's place ends with it; nothing is left behind. */
static void test_max_hold_downgrade(void)
{
    struct tu_events ev = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &ev, .max_hold_ms = MAX_HOLD_MS,
                        .owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *s = tu_session();
    const char *path = tu_path("rw-max-hold-downgrade");
    zklock_rwlock_t *rw = new_rw(s, path, &lo);

    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(rw), -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_read(rw), -1), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_lost(&ev, 2));
    TU_ASSERT_RC(ev.lost_reason, ZKLOCK_LOST_MAX_HOLD);
    CU_ASSERT(tu_wait_no_children(path));
    TU_ASSERT_RC(zklock_release(zklock_rwlock_read(rw)), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(rw)), ZKLOCK_ELOST);
    zklock_rwlock_free(rw);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static const tu_test_t rw_tests[] = {
    {"wire_names", test_wire_names},
    {"readers_overlap", test_readers_overlap},
    {"mixed_processes_exclusion", test_mixed_processes_exclusion},
    {"arrival_order_fairness", test_arrival_order_fairness},
    {"downgrade_keeps_place", test_downgrade_keeps_place},
    {"downgrade_keeps_place_kazoo", test_downgrade_keeps_place_kazoo},
    {"no_heir_without_its_writer", test_no_heir_without_its_writer},
    {"heir_when_the_path_is_gone", test_heir_when_the_path_is_gone},
    {"upgrade_is_edeadlk", test_upgrade_is_edeadlk},
    {"reentrancy_both_sides", test_reentrancy_both_sides},
    {"release_wakes_only_who_can_proceed", test_release_wakes_only_who_can_proceed},
    {"writer_tokens_increase", test_writer_tokens_increase},
    {"expiry_while_reading", test_expiry_while_reading},
    {"expiry_while_writing", test_expiry_while_writing},
    {"timeout_and_cancel_leave_nothing", test_timeout_and_cancel_leave_nothing},
    {"bad_input", test_bad_input},
    {"max_hold_write", test_max_hold_write},
    {"max_hold_read", test_max_hold_read},
    {"max_hold_downgrade", test_max_hold_downgrade},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"rwlock", rw_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
