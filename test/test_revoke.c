/* test_revoke.c: revocation in Curator's convention (issue 25, item 3):
 * zklock_revoke() writes "__REVOKE__" into the holders' nodes, and a holder
 * with on_revoke is told, once per request, and keeps its hold. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* What on_revoke saw. */
struct told {
    int n;
    zklock_t *last;
};

static void on_revoke(zklock_t *l, void *ctx)
{
    struct told *t = ctx;

    __atomic_store_n(&t->last, l, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&t->n, 1, __ATOMIC_SEQ_CST);
}

static int told_count(struct told *t)
{
    return __atomic_load_n(&t->n, __ATOMIC_SEQ_CST);
}

struct told_at_least {
    struct told *t;
    int n;
};

static bool told_n(void *arg)
{
    struct told_at_least *w = arg;
    return told_count(w->t) >= w->n;
}

static bool wait_told(struct told *t, int n)
{
    struct told_at_least w = {t, n};
    return tu_wait_until(told_n, &w, TU_WAIT_MS);
}

static zklock_opts_t revocable(struct told *t)
{
    return (zklock_opts_t){.on_revoke = on_revoke, .ctx = t};
}

/* The data of the queue's node `i` at path. */
static bool node_data_is(zklock_session_t *s, const char *path, size_t i, const char *want)
{
    zklock_queue_t *q = NULL;
    bool ok = false;

    if (zklock_queue_read(s, path, &q) == ZKLOCK_OK && q->count > i)
        ok = strcmp(q->nodes[i].identity, want) == 0;
    zklock_queue_free(q);
    return ok;
}

static void test_mutex_told_once_hold_kept(void)
{
    zklock_session_t *s = tu_session(), *asker = tu_session();
    const char *path = tu_path("revoke-mutex");
    struct told t = {0};
    zklock_opts_t o = revocable(&t);
    zklock_t *l = tu_mutex(s, path, &o);
    int asked = -1;

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_revoke(asker, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 1);
    CU_ASSERT(node_data_is(asker, path, 0, "__REVOKE__"));
    CU_ASSERT_FATAL(wait_told(&t, 1));
    CU_ASSERT(t.last == l);
    tu_barrier(s);
    TU_ASSERT_INT(told_count(&t), ==, 1); /* once per request */
    TU_ASSERT_INT(zklock_hold_count(l), ==, 1); /* nothing taken */
    TU_ASSERT_INT((int)TU_STAT(s, revoke_told), ==, 1);
    /* a second request is told again */
    TU_ASSERT_RC(zklock_revoke(asker, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 1);
    CU_ASSERT_FATAL(wait_told(&t, 2));
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    /* released: nobody to ask, nobody told */
    TU_ASSERT_RC(zklock_revoke(asker, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 0);
    tu_barrier(s);
    TU_ASSERT_INT(told_count(&t), ==, 2);
    zklock_free(l);
    zklock_session_close(s);
    zklock_session_close(asker);
    tu_assert_clean(path);
}

/* A holder without on_revoke is asked (the data is written) but not told,
 * and keeps holding; a waiter behind it is not asked. */
static void test_not_revocable_not_told(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("revoke-plain");
    struct told t = {0};
    zklock_opts_t o = revocable(&t);
    zklock_t *plain = tu_mutex(s, path, NULL), *waiter = tu_mutex(s, path, &o);
    struct tu_acquirer a;
    int asked = -1;

    TU_REQUIRE_RC(zklock_acquire(plain, -1), ZKLOCK_OK);
    tu_start_acquirer(&a, waiter, -1, false);
    CU_ASSERT_FATAL(tu_wait_children(path, 2));
    TU_ASSERT_RC(zklock_revoke(s, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 1); /* the holder only */
    CU_ASSERT(node_data_is(s, path, 0, "__REVOKE__"));
    CU_ASSERT(!node_data_is(s, path, 1, "__REVOKE__"));
    tu_barrier(s);
    TU_ASSERT_INT(zklock_hold_count(plain), ==, 1);
    TU_ASSERT_INT((int)TU_STAT(s, revoke_told), ==, 0);
    TU_ASSERT_RC(zklock_release(plain), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&a), ZKLOCK_OK);
    tu_barrier(s);
    TU_ASSERT_INT(told_count(&t), ==, 0); /* the request was the old holder's */
    /* the new holder is asked now */
    TU_ASSERT_RC(zklock_revoke(s, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 1);
    CU_ASSERT(wait_told(&t, 1));
    zklock_free(waiter); /* (thread-owned: freeing releases) */
    zklock_free(plain);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* Does a server list a watch on the node (a char *)? (wchp: watches by path) */
static bool watched_on_server(void *node)
{
    static char buf[1 << 16];
    int n = tu_fourlw(0, "wchp", buf, sizeof buf - 1);

    if (n < 0)
        return false;
    buf[n] = 0;
    for (char *p = strstr(buf, node); p; p = strstr(p + 1, node))
        if ((p == buf || p[-1] == '\n') && (p[strlen(node)] == '\n' || !p[strlen(node)]))
            return true;
    return false;
}

/* A request written into a waiter's node (Curator's Revoker asks any node
 * it is given) is told as soon as the waiter holds. */
static void test_request_while_waiting_told_on_grant(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("revoke-early");
    struct told t = {0};
    zklock_opts_t o = revocable(&t);
    zklock_t *first = tu_mutex(s, path, NULL), *waiter = tu_mutex(s, path, &o);
    struct tu_acquirer a;
    zklock_queue_t *q = NULL;
    char node[512];

    TU_REQUIRE_RC(zklock_acquire(first, -1), ZKLOCK_OK);
    tu_start_acquirer(&a, waiter, -1, false);
    CU_ASSERT_FATAL(tu_wait_children(path, 2));
    TU_REQUIRE_RC(zklock_queue_read(s, path, &q), ZKLOCK_OK);
    snprintf(node, sizeof node, "%s/%s", path, q->nodes[1].name);
    zklock_queue_free(q);
    /* the waiter watches its own node already (the watch every contender
     * sets once its node has lived 50 ms): the request's event comes while
     * it waits, and must not be forgotten by the grant */
    CU_ASSERT_FATAL(tu_wait_until(watched_on_server, node, TU_WAIT_MS));
    TU_REQUIRE_RC(zoo_set(tu_zk(), node, "__REVOKE__", 10, -1), ZOK);
    tu_barrier(s);
    TU_ASSERT_INT(told_count(&t), ==, 0); /* it does not hold yet */
    TU_ASSERT_RC(zklock_release(first), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&a), ZKLOCK_OK);
    CU_ASSERT(wait_told(&t, 1));
    tu_barrier(s);
    TU_ASSERT_INT(told_count(&t), ==, 1);
    zklock_free(waiter);
    zklock_free(first);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* tu_barrier() waits for the callbacks queued before it, not only for the
 * events behind them: a holder told slowly has been told when it returns
 * (a negative check after a barrier, "told once", "not told", could
 * otherwise run before the callback it is about). */
static void on_revoke_slowly(zklock_t *l, void *ctx)
{
    (void)l;
    tu_slow_call(ctx);
}

static void test_barrier_waits_for_callbacks(void)
{
    zklock_session_t *s = tu_session(), *asker = tu_session();
    const char *path = tu_path("revoke-barrier");
    struct tu_slow slow = {0, 0, 0};
    zklock_opts_t o = {.on_revoke = on_revoke_slowly, .ctx = &slow};
    zklock_t *l = tu_mutex(s, path, &o);
    int asked = -1;

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_revoke(asker, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 1);
    tu_barrier(s);
    TU_ASSERT_INT(__atomic_load_n(&slow.finished, __ATOMIC_SEQ_CST), ==, 1);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    zklock_session_close(asker);
    tu_assert_clean(path);
}

static void test_bad_input_and_no_holder(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("revoke-none");
    int asked = -1;

    TU_ASSERT_RC(zklock_revoke(NULL, path, &asked), ZKLOCK_EINVAL);
    TU_ASSERT_INT(asked, ==, 0);
    TU_ASSERT_RC(zklock_revoke(s, NULL, &asked), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_revoke(s, "no-slash", &asked), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_revoke(s, "/a//b", NULL), ZKLOCK_EINVAL);
    asked = -1;
    TU_ASSERT_RC(zklock_revoke(s, path, &asked), ZKLOCK_OK); /* no such path */
    TU_ASSERT_INT(asked, ==, 0);
    CU_ASSERT(tu_count(path) == -1); /* nothing made */
    zklock_session_close(s);
}

/* Every reader is asked, and each is told once: one told twice and the
 * other never would add up to the same count. */
static void test_rwlock_both_sides(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("revoke-rw");
    struct told tr1 = {0}, tr2 = {0}, tw = {0};
    zklock_opts_t or1 = revocable(&tr1), or2 = revocable(&tr2), ow = revocable(&tw);
    zklock_rwlock_t *rw1 = NULL, *rw2 = NULL;
    zklock_t *r1 = NULL, *r2 = NULL;
    int asked = -1;

    or1.owner = or2.owner = ZKLOCK_OWNER_HANDLE;
    ow.owner = ZKLOCK_OWNER_HANDLE;
    TU_REQUIRE_RC(zklock_rwlock_new(&rw1, s, path, &or1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_rwlock_new(&rw2, s, path, &or2), ZKLOCK_OK);
    r1 = zklock_rwlock_read(rw1);
    r2 = zklock_rwlock_read(rw2);
    TU_REQUIRE_RC(zklock_acquire(r1, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(r2, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_revoke(s, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 2); /* every reader */
    CU_ASSERT(wait_told(&tr1, 1));
    CU_ASSERT(wait_told(&tr2, 1));
    tu_barrier(s);
    TU_ASSERT_INT(told_count(&tr1), ==, 1);
    TU_ASSERT_INT(told_count(&tr2), ==, 1);
    CU_ASSERT(tr1.last == r1);
    CU_ASSERT(tr2.last == r2);
    TU_ASSERT_RC(zklock_release(r1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(r2), ZKLOCK_OK);
    zklock_rwlock_free(rw1);
    zklock_rwlock_free(rw2);
    /* the write side */
    TU_REQUIRE_RC(zklock_rwlock_new(&rw1, s, path, &ow), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(rw1), -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_revoke(s, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 1);
    CU_ASSERT(wait_told(&tw, 1));
    CU_ASSERT(tw.last == zklock_rwlock_write(rw1));
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(rw1)), ZKLOCK_OK);
    zklock_rwlock_free(rw1);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static void test_semaphore_per_lease(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("revoke-sem");
    struct told t1 = {0}, t2 = {0};
    zklock_opts_t o1 = revocable(&t1), o2 = revocable(&t2);
    zklock_t *a = NULL, *b = NULL;
    char leases[512];
    int asked = -1;

    TU_REQUIRE_RC(zklock_semaphore_new(&a, s, path, 3, &o1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_semaphore_new(&b, s, path, 3, &o2), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(a, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(b, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_revoke(s, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 2); /* a lease each */
    CU_ASSERT(wait_told(&t1, 1));
    CU_ASSERT(wait_told(&t2, 1));
    TU_ASSERT_RC(zklock_release(a), ZKLOCK_OK);
    tu_barrier(s);
    TU_ASSERT_RC(zklock_revoke(s, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 1);
    CU_ASSERT(wait_told(&t2, 2));
    tu_barrier(s);
    TU_ASSERT_INT(told_count(&t1), ==, 1); /* released: not told */
    TU_ASSERT_RC(zklock_release(b), ZKLOCK_OK);
    zklock_free(a);
    zklock_free(b);
    zklock_session_close(s);
    snprintf(leases, sizeof leases, "%s/leases", path);
    tu_assert_clean(leases);
    tu_assert_clean(path);
}

static void test_multi_told_once(void)
{
    zklock_session_t *s = tu_session();
    char p1[256], p2[256];
    struct told tm = {0}, tmember = {0};
    zklock_opts_t om = revocable(&tm), omember = revocable(&tmember);
    zklock_t *m1, *m2, *m = NULL;
    int asked = -1;

    snprintf(p1, sizeof p1, "%s", tu_path("revoke-multi-1"));
    snprintf(p2, sizeof p2, "%s", tu_path("revoke-multi-2"));
    m1 = tu_mutex(s, p1, &omember);
    m2 = tu_mutex(s, p2, NULL);
    TU_REQUIRE_RC(zklock_multi_new(&m, (zklock_t *const[]){m1, m2}, 2, &om), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(m, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_revoke(s, p2, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 1);
    CU_ASSERT(wait_told(&tm, 1));
    CU_ASSERT(tm.last == m);
    tu_barrier(s);
    TU_ASSERT_INT(told_count(&tm), ==, 1);
    TU_ASSERT_RC(zklock_revoke(s, p1, &asked), ZKLOCK_OK);
    CU_ASSERT(wait_told(&tm, 2));
    tu_barrier(s);
    TU_ASSERT_INT(told_count(&tmember), ==, 0); /* held through m: m is told */
    TU_ASSERT_INT(zklock_hold_count(m), ==, 1);
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK);
    zklock_free(m);
    zklock_free(m1);
    zklock_free(m2);
    zklock_session_close(s);
    tu_assert_clean(p1);
    tu_assert_clean(p2);
}

/* Revoking a leader asks it to resign; the application resigns (here, on
 * being told) and the next participant leads. */
struct resigner {
    struct told t;
    zklock_t *e;
};

static void resign_on_revoke(zklock_t *l, void *ctx)
{
    struct resigner *r = ctx;
    on_revoke(l, &r->t);
    zklock_release(l); /* handle-owned: in the background */
}

static void test_election_leader_resigns(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("revoke-elect");
    struct resigner r = {{0}, NULL};
    zklock_opts_t o = {.on_revoke = resign_on_revoke, .ctx = &r, .owner = ZKLOCK_OWNER_HANDLE};
    zklock_t *leader = NULL, *next = NULL;
    struct tu_acquirer a;
    int asked = -1;

    TU_REQUIRE_RC(zklock_election_new(&leader, s, path, &o), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_election_new(&next, s, path, NULL), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(leader, -1), ZKLOCK_OK);
    tu_start_acquirer(&a, next, TU_WAIT_MS, true); /* leads, then resigns */
    CU_ASSERT_FATAL(tu_wait_children(path, 2));
    TU_ASSERT_RC(zklock_revoke(s, path, &asked), ZKLOCK_OK);
    TU_ASSERT_INT(asked, ==, 1); /* the leader only */
    TU_ASSERT_RC(tu_join_acquirer(&a), ZKLOCK_OK);
    TU_ASSERT_INT(told_count(&r.t), ==, 1);
    TU_ASSERT_INT(zklock_hold_count(leader), ==, 0);
    zklock_free(next);
    zklock_free(leader);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static const tu_test_t revoke_tests[] = {
    {"mutex_told_once_hold_kept", test_mutex_told_once_hold_kept},
    {"not_revocable_not_told", test_not_revocable_not_told},
    {"request_while_waiting_told_on_grant", test_request_while_waiting_told_on_grant},
    {"barrier_waits_for_callbacks", test_barrier_waits_for_callbacks},
    {"bad_input_and_no_holder", test_bad_input_and_no_holder},
    {"rwlock_both_sides", test_rwlock_both_sides},
    {"semaphore_per_lease", test_semaphore_per_lease},
    {"multi_told_once", test_multi_told_once},
    {"election_leader_resigns", test_election_leader_resigns},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"revoke", revoke_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
