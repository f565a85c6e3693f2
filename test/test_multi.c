/* test_multi.c: the multi-lock against a real ZooKeeper. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "detector.h"
#include "zkproxy.h"

static zklock_t *new_multi(zklock_t *const *locks, size_t n, const zklock_opts_t *o)
{
    zklock_t *m = NULL;
    TU_REQUIRE_RC(zklock_multi_new(&m, locks, n, o), ZKLOCK_OK);
    return m;
}

/* Lock nodes under path (0 if it does not exist). */
static int nodes(const char *path)
{
    int n = tu_count(path);
    return n < 0 ? 0 : n;
}

static const char *path_n(const char *base, int i)
{
    static char buf[8][256];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s-%d", tu_path(base), i);
    return b;
}

/* ---- the basics ------------------------------------------------------------------------------ */

/* zklock_lock_stats: the multi-lock counts its acquisitions (two, one of
 * them reentered) and holds as a whole; its members, never acquired on
 * their own, count nothing. */
static void check_counted_as_whole(const zklock_t *m, zklock_t *const *members, size_t n)
{
    zklock_lock_stats_t st;

    TU_REQUIRE_RC(zklock_lock_stats(m, &st, sizeof st), ZKLOCK_OK);
    TU_ASSERT_INT(st.acquired, ==, 2);
    TU_ASSERT_INT(st.reentered, ==, 1);
    TU_ASSERT_INT(st.wait.count, ==, 2);
    TU_ASSERT_INT(st.hold.count, ==, 2);
    for (size_t i = 0; i < n; i++) {
        TU_REQUIRE_RC(zklock_lock_stats(members[i], &st, sizeof st), ZKLOCK_OK);
        TU_ASSERT_INT(st.acquired + st.reentered + st.wait.count + st.hold.count, ==, 0);
    }
}

static void test_all_held_one_token(void)
{
    zklock_session_t *s = tu_session();
    char pa[256], pb[256], pc[256];
    zklock_t *a, *b, *c, *m;
    int64_t ta = 0, tb = 0, tc = 0, tm = 0;

    snprintf(pa, sizeof pa, "%s", path_n("multi-basic", 1));
    snprintf(pb, sizeof pb, "%s", path_n("multi-basic", 2));
    snprintf(pc, sizeof pc, "%s", path_n("multi-basic", 3));
    a = tu_mutex(s, pa, NULL);
    b = tu_mutex(s, pb, NULL);
    c = tu_mutex(s, pc, NULL);
    m = new_multi((zklock_t *[]){c, a, b}, 3, NULL);
    TU_REQUIRE_RC(zklock_acquire(m, 10000), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(m), ==, 1);
    TU_ASSERT_INT(zklock_hold_count(a), ==, 1);
    TU_ASSERT_INT(zklock_hold_count(b), ==, 1);
    TU_ASSERT_INT(zklock_hold_count(c), ==, 1);
    TU_ASSERT_INT(nodes(pa) + nodes(pb) + nodes(pc), ==, 3);
    /* One transaction made the three nodes: one creation zxid. */
    TU_ASSERT_RC(zklock_fence(a, &ta), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(b, &tb), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(c, &tc), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(m, &tm), ZKLOCK_OK);
    CU_ASSERT(ta > 0 && ta == tb && tb == tc && tc == tm);
    /* A member held through m is released with it. */
    TU_ASSERT_RC(zklock_release(a), ZKLOCK_EBUSY);
    /* Reentrant, like every zklock_t. */
    TU_ASSERT_RC(zklock_acquire(m, 0), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(m), ==, 2);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(a), ==, 0);
    TU_ASSERT_INT(nodes(pa) + nodes(pb) + nodes(pc), ==, 0);
    /* Again, now that the lock paths exist (the first time made them). */
    TU_REQUIRE_RC(zklock_acquire(m, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK);
    check_counted_as_whole(m, (zklock_t *[]){a, b, c}, 3);
    zklock_free(m);
    zklock_free(a);
    zklock_free(b);
    zklock_free(c);
    zklock_session_close(s);
    tu_assert_clean(pa);
    tu_assert_clean(pb);
    tu_assert_clean(pc);
}

/* ---- no deadlock ------------------------------------------------------------------------------ */

struct looper {
    zklock_t *l;
    struct detector *inside[2]; /* the detectors of the locks it takes */
    int iterations, done, failures;
    pthread_t t;
};

static void *loop(void *arg)
{
    struct looper *p = arg;
    /* the critical section held open, so that an overlap, if there were
     * one, has time to show */
    struct timespec hold = {0, 200 * 1000};

    for (int i = 0; i < p->iterations; i++) {
        int64_t token = 0;
        int rc = zklock_acquire(p->l, 20000);
        if (rc == ZKLOCK_OK)
            rc = zklock_fence(p->l, &token);
        if (rc != ZKLOCK_OK) {
            p->failures++;
            continue;
        }
        for (int k = 0; k < 2 && p->inside[k]; k++)
            detector_enter(p->inside[k], false, token);
        nanosleep(&hold, NULL);
        for (int k = 0; k < 2 && p->inside[k]; k++)
            detector_leave(p->inside[k], false);
        if (zklock_release(p->l) != ZKLOCK_OK)
            p->failures++;
    }
    __atomic_store_n(&p->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* {A,B}, {B,A}, {A} and {B}, each in a thread with its own session, in a
 * loop: no deadlock (no acquisition times out), no overlap on A or on B,
 * their tokens grow, and every critical section was entered. */
static void test_overlapping_sets_no_deadlock(void)
{
    enum { ITER = 40 };
    zklock_session_t *s[4];
    char pa[256], pb[256];
    struct detector inside_a = {0}, inside_b = {0};
    struct looper p[4];
    zklock_t *a[4], *b[4], *ab, *ba;

    snprintf(pa, sizeof pa, "%s", path_n("multi-cross", 1));
    snprintf(pb, sizeof pb, "%s", path_n("multi-cross", 2));
    for (int i = 0; i < 4; i++) {
        s[i] = tu_session();
        a[i] = tu_mutex(s[i], pa, NULL);
        b[i] = tu_mutex(s[i], pb, NULL);
    }
    ab = new_multi((zklock_t *[]){a[0], b[0]}, 2, NULL);
    ba = new_multi((zklock_t *[]){b[1], a[1]}, 2, NULL);
    p[0] = (struct looper){.l = ab, .inside = {&inside_a, &inside_b}, .iterations = ITER};
    p[1] = (struct looper){.l = ba, .inside = {&inside_b, &inside_a}, .iterations = ITER};
    p[2] = (struct looper){.l = a[2], .inside = {&inside_a, NULL}, .iterations = ITER};
    p[3] = (struct looper){.l = b[3], .inside = {&inside_b, NULL}, .iterations = ITER};
    for (int i = 0; i < 4; i++)
        pthread_create(&p[i].t, NULL, loop, &p[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(p[i].t, NULL);
        TU_ASSERT_INT(p[i].failures, ==, 0);
    }
    TU_ASSERT_INT(inside_a.overlaps, ==, 0);
    TU_ASSERT_INT(inside_b.overlaps, ==, 0);
    TU_ASSERT_INT(inside_a.stale_tokens, ==, 0);
    TU_ASSERT_INT(inside_b.stale_tokens, ==, 0);
    TU_ASSERT_INT(inside_a.entries, ==, 3 * ITER); /* {A,B}, {B,A} and {A} */
    TU_ASSERT_INT(inside_b.entries, ==, 3 * ITER);
    zklock_free(ab);
    zklock_free(ba);
    for (int i = 0; i < 4; i++) {
        zklock_free(a[i]);
        zklock_free(b[i]);
        zklock_session_close(s[i]);
    }
    tu_assert_clean(pa);
    tu_assert_clean(pb);
}

/* ---- giving up -------------------------------------------------------------------------------- */

/* B is held elsewhere: {A,B} times out, is busy at once, is canceled, and
 * each time holds nothing and leaves nothing. */
static void test_timeout_busy_cancel_leave_nothing(void)
{
    zklock_session_t *s = tu_session(), *other = tu_session();
    char pa[256], pb[256];
    zklock_opts_t by_handle = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_t *a, *b, *hb, *m;
    struct tu_acquirer w;

    snprintf(pa, sizeof pa, "%s", path_n("multi-giveup", 1));
    snprintf(pb, sizeof pb, "%s", path_n("multi-giveup", 2));
    a = tu_mutex(s, pa, NULL);
    b = tu_mutex(s, pb, NULL);
    hb = tu_mutex(other, pb, NULL);
    m = new_multi((zklock_t *[]){a, b}, 2, &by_handle);
    TU_REQUIRE_RC(zklock_acquire(hb, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(m, 300), ZKLOCK_ETIMEDOUT);
    TU_ASSERT_INT(zklock_hold_count(a), ==, 0);
    TU_ASSERT_INT(nodes(pa), ==, 0);
    TU_ASSERT_INT(nodes(pb), ==, 1);
    TU_ASSERT_RC(zklock_acquire(m, 0), ZKLOCK_EBUSY);
    TU_ASSERT_INT(nodes(pa), ==, 0);
    TU_ASSERT_INT(nodes(pb), ==, 1);
    tu_start_acquirer(&w, m, -1, false);
    CU_ASSERT(tu_wait_children(pb, 2));
    TU_ASSERT_RC(zklock_cancel(m), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_ECANCELED);
    TU_ASSERT_INT(nodes(pa), ==, 0);
    TU_ASSERT_INT(nodes(pb), ==, 1);
    /* Once B is free, m gets both. */
    tu_start_acquirer(&w, m, 20000, false);
    CU_ASSERT(tu_wait_children(pb, 2));
    TU_ASSERT_RC(zklock_release(hb), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK); /* handle-owned: any thread */
    zklock_free(m);
    zklock_free(a);
    zklock_free(b);
    zklock_free(hb);
    zklock_session_close(s);
    zklock_session_close(other);
    tu_assert_clean(pa);
    tu_assert_clean(pb);
}

/* ---- the rules ------------------------------------------------------------------------------- */

static void test_rules(void)
{
    zklock_session_t *s = tu_session();
    char pa[256], pb[256], pr[256];
    zklock_t *a, *b, *m, *mr, *mw;
    zklock_rwlock_t *rw = NULL;

    snprintf(pa, sizeof pa, "%s", path_n("multi-rules", 1));
    snprintf(pb, sizeof pb, "%s", path_n("multi-rules", 2));
    snprintf(pr, sizeof pr, "%s", path_n("multi-rules", 3));
    a = tu_mutex(s, pa, NULL);
    b = tu_mutex(s, pb, NULL);
    TU_REQUIRE_RC(zklock_rwlock_new(&rw, s, pr, NULL), ZKLOCK_OK);
    m = new_multi((zklock_t *[]){a, b}, 2, NULL);
    /* Holding a member, taking the rest could deadlock: refused. */
    TU_REQUIRE_RC(zklock_acquire(a, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(m, 1000), ZKLOCK_EDEADLK);
    TU_ASSERT_INT(nodes(pb), ==, 0);
    TU_ASSERT_RC(zklock_release(a), ZKLOCK_OK);
    /* An upgrade inside a multi-lock is still an upgrade. */
    mw = new_multi((zklock_t *[]){zklock_rwlock_write(rw), b}, 2, NULL);
    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_read(rw), -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(mw, 1000), ZKLOCK_EDEADLK);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_read(rw)), ZKLOCK_OK);
    /* A downgrade too: the read view held beside the thread's write hold. */
    mr = new_multi((zklock_t *[]){zklock_rwlock_read(rw), b}, 2, NULL);
    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(rw), -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(mr, 5000), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(zklock_rwlock_read(rw)), ==, 1);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(rw)), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(mr), ZKLOCK_OK);
    TU_ASSERT_INT(nodes(pr) + nodes(pb), ==, 0);
    zklock_free(m);
    zklock_free(mr);
    zklock_free(mw);
    zklock_free(a);
    zklock_free(b);
    zklock_rwlock_free(rw);
    zklock_session_close(s);
}

static void test_bad_input(void)
{
    zklock_session_t *s = tu_session(), *s2 = tu_session();
    zklock_t *a = tu_mutex(s, "/x/a", NULL), *a2 = tu_mutex(s, "/x/a", NULL),
             *b = tu_mutex(s, "/x/b", NULL), *c = tu_mutex(s2, "/x/c", NULL), *m = NULL, *mm;
    zklock_t *many[ZKLOCK_MULTI_MAX + 1];
    zklock_rwlock_t *rw = NULL;
    zoo_op_t op;

    TU_REQUIRE_RC(zklock_rwlock_new(&rw, s, "/x/rw", NULL), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_multi_new(NULL, (zklock_t *[]){a}, 1, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_multi_new(&m, NULL, 1, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_multi_new(&m, (zklock_t *[]){a}, 0, NULL), ZKLOCK_EINVAL);
    for (int i = 0; i <= ZKLOCK_MULTI_MAX; i++)
        many[i] = a;
    TU_ASSERT_RC(zklock_multi_new(&m, many, ZKLOCK_MULTI_MAX + 1, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_multi_new(&m, (zklock_t *[]){a, NULL}, 2, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_multi_new(&m, (zklock_t *[]){a, c}, 2, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_multi_new(&m, (zklock_t *[]){a, b, a}, 3, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_multi_new(&m, (zklock_t *[]){a, a2}, 2, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_multi_new(&m, (zklock_t *[]){zklock_rwlock_read(rw), zklock_rwlock_write(rw)},
                                  2, NULL), ZKLOCK_EINVAL);
    CU_ASSERT_PTR_NULL(m);
    mm = new_multi((zklock_t *[]){a, b}, 2, NULL);
    TU_ASSERT_RC(zklock_multi_new(&m, (zklock_t *[]){mm, c}, 2, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_check_op(mm, &op), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_release(mm), ZKLOCK_ENOTHELD);
    zklock_free(mm);
    zklock_rwlock_free(rw);
    zklock_free(a);
    zklock_free(a2);
    zklock_free(b);
    zklock_free(c);
    zklock_session_close(s);
    zklock_session_close(s2);
}

/* ---- failures -------------------------------------------------------------------------------- */

static void test_expiry_loses_all(void)
{
    struct tu_events ev = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &ev};
    zklock_session_t *s = tu_session();
    char pa[256], pb[256];
    zklock_t *a, *b, *m;

    snprintf(pa, sizeof pa, "%s", path_n("multi-expire", 1));
    snprintf(pb, sizeof pb, "%s", path_n("multi-expire", 2));
    a = tu_mutex(s, pa, NULL);
    b = tu_mutex(s, pb, NULL);
    m = new_multi((zklock_t *[]){a, b}, 2, &lo);
    TU_REQUIRE_RC(zklock_acquire(m, 10000), ZKLOCK_OK);
    tu_expire(s);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &ev, TU_WAIT_MS));
    TU_ASSERT_INT(ev.lost, ==, 1); /* once for m, whichever member went first */
    TU_ASSERT_INT(zklock_hold_count(m), ==, 0);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_ELOST);
    /* The new session takes them again. */
    TU_ASSERT_RC(zklock_acquire(m, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK);
    zklock_free(m);
    zklock_free(a);
    zklock_free(b);
    zklock_session_close(s);
    tu_assert_clean(pa);
    tu_assert_clean(pb);
}

/* A lock A and a semaphore S of one lease on session s, M = {S, A}, and
 * another handle of S on session o (to take the lease elsewhere). */
struct sem_multi {
    zklock_session_t *s, *o;
    char pa[256], ps[256], leases[300];
    zklock_t *a, *sem, *full, *m;
};

static void sem_multi_new(struct sem_multi *x, const char *name)
{
    x->s = tu_session();
    x->o = tu_session();
    snprintf(x->pa, sizeof x->pa, "%s", path_n(name, 1));
    snprintf(x->ps, sizeof x->ps, "%s", path_n(name, 2));
    snprintf(x->leases, sizeof x->leases, "%s/leases", x->ps);
    x->a = tu_mutex(x->s, x->pa, NULL);
    TU_REQUIRE_RC(zklock_semaphore_new(&x->sem, x->s, x->ps, 1, NULL), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_semaphore_new(&x->full, x->o, x->ps, 1, NULL), ZKLOCK_OK);
    x->m = new_multi((zklock_t *[]){x->sem, x->a}, 2, NULL);
}

static void sem_multi_free(struct sem_multi *x)
{
    zklock_free(x->m);
    zklock_free(x->a);
    zklock_free(x->sem);
    zklock_free(x->full);
    zklock_session_close(x->s);
    zklock_session_close(x->o);
    tu_assert_clean(x->pa);
    tu_assert_clean(x->ps);
}

/* A semaphore member: its lease is taken once the locks are held. */
static void test_with_semaphore(void)
{
    struct sem_multi x;
    zklock_lock_stats_t st;

    sem_multi_new(&x, "multi-sem");
    TU_REQUIRE_RC(zklock_acquire(x.m, 10000), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(x.sem), ==, 1);
    TU_ASSERT_INT(nodes(x.leases), ==, 1);
    TU_ASSERT_RC(zklock_release(x.m), ZKLOCK_OK);
    /* The lease taken elsewhere: m times out, holding nothing, A included. */
    TU_REQUIRE_RC(zklock_acquire(x.full, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(x.m, 500), ZKLOCK_ETIMEDOUT);
    TU_ASSERT_INT(nodes(x.pa), ==, 0);
    TU_ASSERT_INT(nodes(x.leases), ==, 1);
    TU_ASSERT_RC(zklock_release(x.full), ZKLOCK_OK);
    /* zklock_lock_stats: a semaphore counts its leases (the acquisition
     * lock it takes on the way is its own); the multi-lock its tries. */
    TU_REQUIRE_RC(zklock_lock_stats(x.full, &st, sizeof st), ZKLOCK_OK);
    TU_ASSERT_INT(st.acquired, ==, 1);
    TU_ASSERT_INT(st.hold.count, ==, 1);
    TU_REQUIRE_RC(zklock_lock_stats(x.m, &st, sizeof st), ZKLOCK_OK);
    TU_ASSERT_INT(st.acquired, ==, 1);
    TU_ASSERT_INT(st.timeouts, ==, 1);
    TU_ASSERT_INT(st.hold.count, ==, 1);
    TU_REQUIRE_RC(zklock_lock_stats(x.sem, &st, sizeof st), ZKLOCK_OK);
    TU_ASSERT_INT(st.acquired + st.timeouts + st.hold.count, ==, 0); /* only through m */
    sem_multi_free(&x);
}

/* How far ahead a zklock_valid_until() time is (it is on ZKLOCK_CLOCK). */
static int64_t lease_left_ms(const struct timespec *until)
{
    struct timespec now;
    clock_gettime(ZKLOCK_CLOCK, &now);
    return ((int64_t)until->tv_sec - now.tv_sec) * 1000 + (until->tv_nsec - now.tv_nsec) / 1000000;
}

/* The first hold of a new session is a multi-lock's: its lease is known
 * (the transaction is a write) and bounds the hold from the start. It was
 * not counted, and the belief timer was never armed: cut off, the holder
 * was told only when the session expired. Through a proxy that cuts the
 * connection: the lease ends no later than a session timeout from now, and
 * the holder is told when it runs out, before any server could expire the
 * session (its lease plus the margin), not by the session's end. */
static void test_lease_from_the_first_hold(void)
{
    enum { TIMEOUT_MS = 10000 }; /* its twentieth, the margin, covers a slow on_lost */
    struct tu_events ev = TU_EVENTS_INIT, lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_session_opts_t so = {.timeout_ms = TIMEOUT_MS, .on_state = tu_on_state, .ctx = &ev};
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    zklock_session_t *s = NULL;
    zklock_t *a, *b, *m;
    struct timespec until;
    int64_t until_ms;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    TU_REQUIRE_RC(zklock_session_open(&s, zkproxy_hosts(proxy), &so), ZKLOCK_OK);
    a = tu_mutex(s, path_n("multi-lease", 0), NULL);
    b = tu_mutex(s, path_n("multi-lease", 1), NULL);
    m = new_multi((zklock_t *[]){a, b}, 2, &lo);
    TU_REQUIRE_RC(zklock_acquire(m, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_valid_until(m, &until), ZKLOCK_OK);
    /* heard from as it sent the transaction: 0.95 x the timeout ahead */
    TU_ASSERT_INT(lease_left_ms(&until), <=, TIMEOUT_MS);
    TU_ASSERT_INT(lease_left_ms(&until), >, TIMEOUT_MS / 2);
    TU_ASSERT_RC(zklock_valid_until(a, &until), ZKLOCK_OK);
    zkproxy_cut(proxy);
    CU_ASSERT_FATAL(tu_wait_state(&ev, ZKLOCK_SUSPENDED));
    /* nothing is heard any more: this is the lease's end (on tu_now_ms()'s
     * clock, which on_lost's time is taken on) */
    TU_REQUIRE_RC(zklock_valid_until(m, &until), ZKLOCK_OK);
    until_ms = tu_now_ms() + lease_left_ms(&until);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_UNSURE); /* not the session's end */
    TU_ASSERT_INT(lost.lost_at_ms, <=, until_ms + TIMEOUT_MS / 20);
    TU_ASSERT_INT(lost.lost, ==, 1);
    zkproxy_restore(proxy);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_ELOST);
    zklock_free(m);
    zklock_free(a);
    zklock_free(b);
    zklock_session_close(s);
    zkproxy_stop(proxy);
    tu_assert_clean(path_n("multi-lease", 0));
    tu_assert_clean(path_n("multi-lease", 1));
}

/* ---- a member's place goes while the multi-lock waits ------------------------------------------ */

/* The child of path whose name has `part` (full path, caller frees), or NULL. */
static char *child_with(const char *path, const char *part)
{
    int n;
    char **kids = tu_children(path, &n), *found = NULL, full[512];

    for (int i = 0; kids && i < n && !found; i++) {
        snprintf(full, sizeof full, "%s/%s", path, kids[i]);
        if (strstr(kids[i], part))
            found = strdup(full);
    }
    tu_free_strings(kids);
    return found;
}

/* Deletes session s's node in path, as an operator would. */
static void operator_deletes(const char *path, zklock_session_t *s)
{
    char *node = tu_node_of(path, s);

    CU_ASSERT_PTR_NOT_NULL_FATAL(node);
    TU_ASSERT_RC(zoo_delete(tu_zk(), node, -1), ZOK);
    free(node);
}

/* Issue 21, item 3. P holds B; M1 = {A,B} queues (it holds A, waits for B
 * behind P), M2 = {A,B} queues behind M1 on both. An operator deletes one
 * of M1's nodes. M1 used to queue that member alone, at the back, while the
 * other kept its place: M1 then waited for M2 on one lock and M2 for M1 on
 * the other, for ever. Now M1 drops both nodes and queues both again in one
 * transaction, behind M2 on both: once P releases, M2 holds, then M1. */
static void member_deleted_no_deadlock(const char *name, bool held_one)
{
    zklock_session_t *sp = tu_session(), *s1 = tu_session(), *s2 = tu_session();
    char pa[256], pb[256];
    const char *victim = held_one ? pa : pb;
    struct tu_crossed x;

    snprintf(pa, sizeof pa, "%s", path_n(name, 1));
    snprintf(pb, sizeof pb, "%s", path_n(name, 2));
    tu_crossed_start(&x, sp, s1, s2, pa, pb, 10000);
    operator_deletes(victim, s1);
    /* M1 queues again: its node is back in the path it lost it in (and,
     * fixed, in the other one too, behind M2's). */
    CU_ASSERT(tu_wait_children(victim, held_one ? 2 : 3));
    tu_crossed_finish(&x);
    zklock_session_close(sp);
    zklock_session_close(s1);
    zklock_session_close(s2);
    tu_assert_clean(pa);
    tu_assert_clean(pb);
}

static void test_held_member_deleted_no_deadlock(void)
{
    member_deleted_no_deadlock("multi-del-held", true);
}

static void test_waiting_member_deleted_no_deadlock(void)
{
    member_deleted_no_deadlock("multi-del-wait", false);
}

/* The same with a semaphore member, which takes its lease once the locks
 * are held: while M waits for the lease, its node on A is deleted. M lets
 * go of the lease it was taking too (waiting for it while A is not held
 * would be waiting in a cycle's reach), queues A again, then takes the
 * lease in its turn. */
static void test_semaphore_member_given_back(void)
{
    struct sem_multi x;
    struct tu_acquirer w;
    char *lease;

    sem_multi_new(&x, "multi-sem-back");
    TU_REQUIRE_RC(zklock_acquire(x.full, -1), ZKLOCK_OK);
    tu_start_acquirer(&w, x.m, 10000, true);
    CU_ASSERT_FATAL(tu_wait_children(x.pa, 1) && tu_wait_children(x.leases, 2)); /* waits for the lease */
    lease = tu_node_of(x.leases, x.s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lease);
    operator_deletes(x.pa, x.s);
    CU_ASSERT(tu_wait_until(tu_gone, lease, TU_WAIT_MS)); /* the lease given back */
    CU_ASSERT(tu_wait_children(x.pa, 1)); /* A queued again */
    CU_ASSERT(tu_wait_children(x.leases, 2)); /* ... and the lease taken again in its turn */
    free(lease);
    TU_ASSERT_RC(zklock_release(x.full), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    sem_multi_free(&x);
}

/* And with a downgrade heir as a member: the owner holds the write side, M
 * = {its read side, B} holds the read side at once (a heir) and waits for
 * B. Its node on B is deleted: M releases the heir too, makes it again
 * beside the write hold (which still holds), and queues B again. */
static void test_heir_member_made_again(void)
{
    zklock_session_t *s = tu_session(), *sp = tu_session();
    zklock_opts_t by_handle = {.owner = ZKLOCK_OWNER_HANDLE};
    char pr[256], pb[256];
    zklock_rwlock_t *rw = NULL;
    zklock_t *b, *p, *m;
    struct tu_acquirer w;
    char *heir;

    snprintf(pr, sizeof pr, "%s", path_n("multi-heir-again", 1));
    snprintf(pb, sizeof pb, "%s", path_n("multi-heir-again", 2));
    TU_REQUIRE_RC(zklock_rwlock_new(&rw, s, pr, &by_handle), ZKLOCK_OK);
    b = tu_mutex(s, pb, &by_handle);
    p = tu_mutex(sp, pb, NULL);
    m = new_multi((zklock_t *[]){zklock_rwlock_read(rw), b}, 2, &by_handle);
    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(rw), -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(p, -1), ZKLOCK_OK);
    tu_start_acquirer(&w, m, 10000, false);
    CU_ASSERT_FATAL(tu_wait_children(pr, 2) && tu_wait_children(pb, 2)); /* writer + heir; P + M */
    heir = child_with(pr, "__READ__");
    CU_ASSERT_PTR_NOT_NULL_FATAL(heir);
    operator_deletes(pb, s);
    CU_ASSERT(tu_wait_until(tu_gone, heir, TU_WAIT_MS)); /* the heir let go ... */
    CU_ASSERT(tu_wait_children(pr, 2)); /* ... and made again */
    CU_ASSERT(tu_wait_children(pb, 2)); /* B queued again */
    TU_ASSERT_RC(zklock_release(p), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(zklock_rwlock_read(rw)), ==, 1);
    TU_ASSERT_INT(tu_children_matching(pr, "__READ__"), ==, 1); /* one heir, beside its writer */
    free(heir);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(rw)), ZKLOCK_OK);
    TU_ASSERT_INT(nodes(pr), ==, 0);
    zklock_free(m);
    zklock_free(b);
    zklock_free(p);
    zklock_rwlock_free(rw);
    zklock_session_close(s);
    zklock_session_close(sp);
    tu_assert_clean(pr);
    tu_assert_clean(pb);
}

static void done_flag(zklock_t *l, int rc, void *ctx)
{
    (void)l;
    __atomic_store_n((int *)ctx, rc == ZKLOCK_OK ? 1 : -1, __ATOMIC_SEQ_CST);
}

static bool flag_set(void *flag)
{
    return __atomic_load_n((int *)flag, __ATOMIC_SEQ_CST) != 0;
}

/* Runs a callback through s's queue and waits for it: every callback
 * queued before has run by then (they run in order). */
static void callback_barrier(zklock_session_t *s)
{
    zklock_opts_t by_handle = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_t *l = tu_mutex(s, tu_path("multi-barrier"), &by_handle);
    int flag = 0;

    TU_REQUIRE_RC(zklock_acquire_async(l, -1, done_flag, &flag), ZKLOCK_OK);
    CU_ASSERT(tu_wait_until(flag_set, &flag, TU_WAIT_MS));
    TU_ASSERT_INT(flag, ==, 1);
    zklock_free(l);
}

/* M = {A, B} of session s, B held by P of another session: M, once
 * started, waits for B. */
struct b_held {
    zklock_session_t *s, *sp;
    char pa[256], pb[256];
    zklock_t *a, *b, *p, *m;
};

static void b_held_new(struct b_held *x, const char *name, zklock_session_t *s,
                       const zklock_opts_t *oa, const zklock_opts_t *ob, const zklock_opts_t *om)
{
    x->s = s;
    x->sp = tu_session();
    snprintf(x->pa, sizeof x->pa, "%s", path_n(name, 1));
    snprintf(x->pb, sizeof x->pb, "%s", path_n(name, 2));
    x->a = tu_mutex(s, x->pa, oa);
    x->b = tu_mutex(s, x->pb, ob);
    x->p = tu_mutex(x->sp, x->pb, NULL);
    x->m = new_multi((zklock_t *[]){x->a, x->b}, 2, om);
    TU_REQUIRE_RC(zklock_acquire(x->p, -1), ZKLOCK_OK);
}

/* Frees the handles, closes both sessions: nothing is left on the server. */
static void b_held_free(struct b_held *x)
{
    zklock_free(x->m);
    zklock_free(x->a);
    zklock_free(x->b);
    zklock_free(x->p);
    zklock_session_close(x->s);
    zklock_session_close(x->sp);
    tu_assert_clean(x->pa);
    tu_assert_clean(x->pb);
}

/* Issue 21, item 5 (a). A member's on_lost is for a lost multi-lock hold
 * (zklock.h): a member that held while M still waited, and lost that hold,
 * was reported to the member's on_lost although M's acquisition had not
 * returned. M queues again and holds; nobody is told of a loss. */
static void test_member_lost_while_waiting_not_told(void)
{
    struct tu_events ev_a = TU_EVENTS_INIT, ev_b = TU_EVENTS_INIT, ev_m = TU_EVENTS_INIT;
    zklock_opts_t lo_a = {.on_lost = tu_on_lost, .ctx = &ev_a};
    zklock_opts_t lo_b = {.on_lost = tu_on_lost, .ctx = &ev_b};
    zklock_opts_t lo_m = {.on_lost = tu_on_lost, .ctx = &ev_m};
    struct b_held x;
    struct tu_acquirer w;

    b_held_new(&x, "multi-lost-waiting", tu_session(), &lo_a, &lo_b, &lo_m);
    tu_start_acquirer(&w, x.m, 10000, true);
    CU_ASSERT_FATAL(tu_wait_children(x.pa, 1) && tu_wait_children(x.pb, 2));
    operator_deletes(x.pa, x.s); /* the hold of M's member on A, while M waits for B */
    CU_ASSERT(tu_wait_children(x.pa, 1)); /* M queued again */
    TU_ASSERT_RC(zklock_release(x.p), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK); /* held both, released both */
    callback_barrier(x.s); /* an on_lost queued before has run by now */
    TU_ASSERT_INT(ev_a.lost, ==, 0);
    TU_ASSERT_INT(ev_b.lost, ==, 0);
    TU_ASSERT_INT(ev_m.lost, ==, 0);
    TU_ASSERT_INT(TU_STAT(x.s, lost), ==, 0);
    b_held_free(&x);
}

/* For tu_wait_until: s has granted at least at_least holds in all (its
 * members' turns count too). */
struct granted {
    zklock_session_t *s;
    uint64_t at_least;
};

static bool granted_at_least(void *arg)
{
    const struct granted *g = arg;
    return TU_STAT(g->s, acquired) >= g->at_least;
}

/* M = {W, A} waits for A (P holds it) once W's turn came: the owner does
 * not hold W (zklock.h), its acquisition is in progress. So taking W's read
 * view is no downgrade (it was: a heir of a write hold the owner did not
 * have, with W's token, maybe still 0), and M2 = {W, C} no multi-lock
 * taken while holding a member (ZKLOCK_EDEADLK): both answer ZKLOCK_EBUSY,
 * as beside any acquisition in progress, and make nothing. Once M holds,
 * both rules are back. */
static void test_waiting_member_lends_no_hold(void)
{
    zklock_session_t *s = tu_session(), *sp = tu_session();
    zklock_opts_t by_handle = {.owner = ZKLOCK_OWNER_HANDLE};
    char pr[256], pa[256], pc[256];
    zklock_rwlock_t *rw = NULL;
    zklock_t *w, *r, *a, *c, *p, *m, *m2;
    struct granted g = {s, 0};
    int flag = 0, rc;

    snprintf(pr, sizeof pr, "%s", path_n("multi-lends-no-hold", 1));
    snprintf(pa, sizeof pa, "%s", path_n("multi-lends-no-hold", 2));
    snprintf(pc, sizeof pc, "%s", path_n("multi-lends-no-hold", 3));
    TU_REQUIRE_RC(zklock_rwlock_new(&rw, s, pr, &by_handle), ZKLOCK_OK);
    w = zklock_rwlock_write(rw);
    r = zklock_rwlock_read(rw);
    a = tu_mutex(s, pa, &by_handle);
    c = tu_mutex(s, pc, &by_handle);
    p = tu_mutex(sp, pa, NULL);
    m = new_multi((zklock_t *[]){w, a}, 2, &by_handle);
    m2 = new_multi((zklock_t *[]){w, c}, 2, &by_handle);
    TU_REQUIRE_RC(zklock_acquire(p, -1), ZKLOCK_OK);
    g.at_least = TU_STAT(s, acquired) + 1;
    TU_REQUIRE_RC(zklock_acquire_async(m, -1, done_flag, &flag), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_until(granted_at_least, &g, TU_WAIT_MS)); /* W's turn */
    TU_ASSERT_INT(zklock_hold_count(w), ==, 0);
    rc = zklock_acquire(r, 0);
    TU_ASSERT_RC(rc, ZKLOCK_EBUSY);
    if (rc == ZKLOCK_OK)
        TU_ASSERT_RC(zklock_release(r), ZKLOCK_OK);
    rc = zklock_acquire(m2, 0);
    TU_ASSERT_RC(rc, ZKLOCK_EBUSY);
    if (rc == ZKLOCK_OK)
        TU_ASSERT_RC(zklock_release(m2), ZKLOCK_OK);
    TU_ASSERT_INT(tu_children_matching(pr, "__READ__"), ==, 0);
    TU_ASSERT_INT(nodes(pc), ==, 0);
    TU_ASSERT_INT(flag, ==, 0); /* M still waits */
    TU_ASSERT_RC(zklock_release(p), ZKLOCK_OK);
    CU_ASSERT(tu_wait_until(flag_set, &flag, TU_WAIT_MS));
    TU_ASSERT_INT(flag, ==, 1);
    TU_ASSERT_RC(zklock_acquire(m2, 0), ZKLOCK_EDEADLK); /* W is held now */
    TU_ASSERT_RC(zklock_acquire(r, 0), ZKLOCK_OK);       /* a downgrade */
    TU_ASSERT_RC(zklock_release(r), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK);
    zklock_free(m2);
    zklock_free(m);
    zklock_free(a);
    zklock_free(c);
    zklock_free(p);
    zklock_rwlock_free(rw);
    zklock_session_close(s);
    zklock_session_close(sp);
    tu_assert_clean(pr);
    tu_assert_clean(pa);
    tu_assert_clean(pc);
}

/* M's acquisition is in progress until its caller is told, also once it
 * gave up: M = {A, B} waits for B (P holds it) once A's turn came, and is
 * canceled; A's node is being deleted (every message delayed 1.5 s), M's
 * outcome not told yet. The owner does not hold A, and acquiring it is
 * ZKLOCK_EBUSY, as while M waited (it started a new acquisition of A,
 * beside M's still undecided one). */
static void test_member_busy_until_giving_up_told(void)
{
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    zklock_session_opts_t so = {.timeout_ms = 10000};
    zklock_session_t *s = NULL;
    zklock_opts_t by_handle = {.owner = ZKLOCK_OWNER_HANDLE};
    struct b_held x;
    struct granted g;
    int flag = 0, flag_a = 0, rc;
    int64_t token;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    TU_REQUIRE_RC(zklock_session_open(&s, zkproxy_hosts(proxy), &so), ZKLOCK_OK);
    b_held_new(&x, "multi-busy-giving-up", s, &by_handle, &by_handle, &by_handle);
    g = (struct granted){s, TU_STAT(s, acquired) + 1};
    TU_REQUIRE_RC(zklock_acquire_async(x.m, -1, done_flag, &flag), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_until(granted_at_least, &g, TU_WAIT_MS)); /* A's turn */
    zkproxy_set_delay(proxy, 1500, 1500);
    TU_ASSERT_RC(zklock_cancel(x.m), ZKLOCK_OK); /* A's delete: answered in 3 s */
    TU_ASSERT_INT(zklock_hold_count(x.a), ==, 0);
    TU_ASSERT_RC(zklock_fence(x.a, &token), ZKLOCK_ENOTHELD);
    TU_ASSERT_RC(zklock_release(x.a), ZKLOCK_ENOTHELD);
    rc = zklock_acquire_async(x.a, -1, done_flag, &flag_a);
    TU_ASSERT_RC(rc, ZKLOCK_EBUSY);
    /* (M's acquisition was still undecided: it still is) */
    TU_ASSERT_RC(zklock_acquire_async(x.m, -1, done_flag, &flag), ZKLOCK_EBUSY);
    zkproxy_set_delay(proxy, 0, 0);
    CU_ASSERT(tu_wait_until(flag_set, &flag, TU_WAIT_MS));
    TU_ASSERT_INT(flag, ==, -1); /* ZKLOCK_ECANCELED */
    if (rc == ZKLOCK_OK) {
        CU_ASSERT(tu_wait_until(flag_set, &flag_a, TU_WAIT_MS));
        if (flag_a == 1)
            TU_ASSERT_RC(zklock_release(x.a), ZKLOCK_OK);
    }
    TU_ASSERT_RC(zklock_release(x.p), ZKLOCK_OK);
    b_held_free(&x);
    zkproxy_stop(proxy);
}

/* zklock_session_close ends a multi-lock's hold, and a waiting one's
 * acquisition (ZKLOCK_ECLOSED): its members go with it, and the session is
 * freed once its handles are (its trace file closed; under ASan and
 * valgrind, nothing leaked). A multi-lock whose members were never let go
 * at the close was never freed, nor were its handles and session. */
static void test_close_ends_members(void)
{
    struct tu_traced th, tw;
    zklock_session_t *sh = tu_session_traced(&th), *sw = tu_session_traced(&tw);
    char pa[256], pb[256];
    zklock_t *ha, *hb, *hm, *wa, *wb, *wm;
    struct tu_acquirer w;

    snprintf(pa, sizeof pa, "%s", path_n("multi-close", 1));
    snprintf(pb, sizeof pb, "%s", path_n("multi-close", 2));
    ha = tu_mutex(sh, pa, NULL);
    hb = tu_mutex(sh, pb, NULL);
    hm = new_multi((zklock_t *[]){ha, hb}, 2, NULL);
    wa = tu_mutex(sw, pa, NULL);
    wb = tu_mutex(sw, pb, NULL);
    wm = new_multi((zklock_t *[]){wa, wb}, 2, NULL);
    TU_REQUIRE_RC(zklock_acquire(hm, -1), ZKLOCK_OK);
    tu_start_acquirer(&w, wm, -1, false);
    CU_ASSERT_FATAL(tu_wait_children(pa, 2) && tu_wait_children(pb, 2)); /* wm waits */
    zklock_session_close(sw);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_ECLOSED);
    zklock_session_close(sh); /* while hm holds */
    TU_ASSERT_INT(zklock_hold_count(hm), ==, 0);
    zklock_free(wm);
    zklock_free(wa);
    zklock_free(wb);
    CU_ASSERT(tu_session_freed(&tw));
    zklock_free(hm);
    zklock_free(ha);
    zklock_free(hb);
    CU_ASSERT(tu_session_freed(&th));
    tu_assert_clean(pa);
    tu_assert_clean(pb);
}

/* ---- a maximum hold (opts.max_hold_ms, issue 25, item 4) ---------------------------------- */

/* A multi-lock's clock runs from the moment all its members are held (not
 * while it waits for one), and its end releases every member at once. */
static void test_max_hold_as_a_whole(void)
{
    enum { LIMIT = 300 };
    struct tu_events ev = TU_EVENTS_INIT;
    zklock_opts_t mo = {.on_lost = tu_on_lost, .ctx = &ev, .max_hold_ms = LIMIT,
                        .owner = ZKLOCK_OWNER_HANDLE};
    zklock_opts_t other = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *a = tu_session(), *b = tu_session();
    const char *pa = path_n("multi-max-hold", 0), *pb = path_n("multi-max-hold", 1);
    zklock_t *ma = tu_mutex(a, pa, NULL), *mb = tu_mutex(a, pb, NULL);
    zklock_t *members[] = {ma, mb};
    zklock_t *m = new_multi(members, 2, &mo), *blocker = tu_mutex(b, pb, &other);
    struct tu_acquirer w;
    int64_t freed;

    TU_REQUIRE_RC(zklock_acquire(blocker, -1), ZKLOCK_OK);
    tu_start_acquirer(&w, m, TU_WAIT_MS, false);
    CU_ASSERT(tu_wait_children(pb, 2));
    TU_ASSERT_INT(tu_lost_within(&ev, 2 * LIMIT), ==, 0); /* waiting: no clock */
    freed = tu_now_ms();
    TU_ASSERT_RC(zklock_release(blocker), ZKLOCK_OK);
    CU_ASSERT(tu_wait_until(tu_acquirer_done, &w, TU_WAIT_MS));
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_lost(&ev, 1));
    TU_ASSERT_RC(ev.lost_reason, ZKLOCK_LOST_MAX_HOLD);
    TU_ASSERT_INT(ev.lost_at_ms - freed, >=, LIMIT - 50);
    CU_ASSERT(tu_wait_no_children(pa));
    CU_ASSERT(tu_wait_no_children(pb));
    TU_ASSERT_INT(zklock_hold_count(ma), ==, 0);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_acquire(blocker, 5000), ZKLOCK_OK); /* free for others */
    TU_ASSERT_RC(zklock_release(blocker), ZKLOCK_OK);
    zklock_free(m);
    zklock_free(ma);
    zklock_free(mb);
    zklock_free(blocker);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(pa);
    tu_assert_clean(pb);
}

static const tu_test_t multi_tests[] = {
    {"all_held_one_token", test_all_held_one_token},
    {"overlapping_sets_no_deadlock", test_overlapping_sets_no_deadlock},
    {"timeout_busy_cancel_leave_nothing", test_timeout_busy_cancel_leave_nothing},
    {"rules", test_rules},
    {"bad_input", test_bad_input},
    {"expiry_loses_all", test_expiry_loses_all},
    {"with_semaphore", test_with_semaphore},
    {"lease_from_the_first_hold", test_lease_from_the_first_hold},
    {"held_member_deleted_no_deadlock", test_held_member_deleted_no_deadlock},
    {"waiting_member_deleted_no_deadlock", test_waiting_member_deleted_no_deadlock},
    {"member_lost_while_waiting_not_told", test_member_lost_while_waiting_not_told},
    {"waiting_member_lends_no_hold", test_waiting_member_lends_no_hold},
    {"member_busy_until_giving_up_told", test_member_busy_until_giving_up_told},
    {"semaphore_member_given_back", test_semaphore_member_given_back},
    {"heir_member_made_again", test_heir_member_made_again},
    {"close_ends_members", test_close_ends_members},
    {"max_hold_as_a_whole", test_max_hold_as_a_whole},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"multi", multi_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
