/* test_election.c: leader election against a real ZooKeeper. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static zklock_t *new_election(zklock_session_t *s, const char *path, const zklock_opts_t *o)
{
    zklock_t *l = NULL;
    TU_REQUIRE_RC(zklock_election_new(&l, s, path, o), ZKLOCK_OK);
    return l;
}

static void test_wire_names(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("elect-names");
    zklock_opts_t kz = {.wire = ZKLOCK_WIRE_KAZOO};
    zklock_t *c = new_election(s, path, NULL), *k = new_election(s, path, &kz);
    zklock_queue_t *q = NULL;

    TU_REQUIRE_RC(zklock_acquire(c, -1), ZKLOCK_OK);
    TU_ASSERT_INT(tu_children_matching(path, "^" TU_CURATOR_PREFIX "latch-[0-9]{10}$"), ==, 1);
    TU_REQUIRE_RC(zklock_queue_read(s, path, &q), ZKLOCK_OK);
    CU_ASSERT_STRING_EQUAL(q->nodes[0].kind, "latch");
    zklock_queue_free(q);
    TU_ASSERT_RC(zklock_release(c), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(k, -1), ZKLOCK_OK);
    TU_ASSERT_INT(tu_children_matching(path, "^[0-9a-f]{32}__lock__[0-9]{10}$"), ==, 1);
    TU_ASSERT_RC(zklock_release(k), ZKLOCK_OK);
    zklock_free(c);
    zklock_free(k);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* ---- one leader at a time --------------------------------------------------------------------- */

struct candidate {
    zklock_session_t *s;
    zklock_t *l;
    int *leaders; /* how many lead now: the detector */
    int64_t *last_token;
    int terms, failures, overlaps, stale_tokens;
    pthread_t t;
};

static void *campaign(void *arg)
{
    struct candidate *c = arg;

    for (int i = 0; i < c->terms; i++) {
        int64_t token = 0;
        if (zklock_acquire(c->l, 20000) != ZKLOCK_OK || zklock_fence(c->l, &token) != ZKLOCK_OK) {
            c->failures++;
            continue;
        }
        if (__atomic_add_fetch(c->leaders, 1, __ATOMIC_SEQ_CST) != 1)
            c->overlaps++;
        if (token <= __atomic_load_n(c->last_token, __ATOMIC_SEQ_CST))
            c->stale_tokens++;
        __atomic_store_n(c->last_token, token, __ATOMIC_SEQ_CST);
        usleep(2000); /* a short term, for the others to queue behind */
        __atomic_sub_fetch(c->leaders, 1, __ATOMIC_SEQ_CST);
        if (zklock_release(c->l) != ZKLOCK_OK) /* resign */
            c->failures++;
    }
    return NULL;
}

/* Five participants, four terms each, handing over by resigning: never two
 * leaders, and every new leader's token is larger. */
static void test_one_leader_at_a_time(void)
{
    enum { N = 5, TERMS = 4 };
    const char *path = tu_path("elect-five");
    struct candidate c[N];
    int leaders = 0;
    int64_t last = 0;

    for (int i = 0; i < N; i++) {
        c[i] = (struct candidate){.s = tu_session(), .leaders = &leaders, .last_token = &last,
                                  .terms = TERMS};
        c[i].l = new_election(c[i].s, path, NULL);
    }
    for (int i = 0; i < N; i++)
        pthread_create(&c[i].t, NULL, campaign, &c[i]);
    for (int i = 0; i < N; i++) {
        pthread_join(c[i].t, NULL);
        TU_ASSERT_INT(c[i].failures, ==, 0);
        TU_ASSERT_INT(c[i].overlaps, ==, 0);
        TU_ASSERT_INT(c[i].stale_tokens, ==, 0);
    }
    for (int i = 0; i < N; i++) {
        zklock_free(c[i].l);
        zklock_session_close(c[i].s);
    }
    tu_assert_clean(path);
}

/* The leader's session expires: it is told, a follower leads, and the old
 * leader campaigns again as a follower of the new one. */
static void test_expiry_hands_over(void)
{
    struct tu_events ev = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &ev};
    zklock_opts_t by_handle = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *s = tu_session(), *f = tu_session();
    const char *path = tu_path("elect-expire");
    zklock_t *leader = new_election(s, path, &lo), *follower = new_election(f, path, &by_handle);
    struct tu_acquirer a;
    int64_t t1 = 0, t2 = 0;
    char *value = NULL;

    TU_REQUIRE_RC(zklock_acquire(leader, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(leader, &t1), ZKLOCK_OK);
    tu_start_acquirer(&a, follower, 30000, false);
    CU_ASSERT(tu_wait_children(path, 2));
    tu_expire(s);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &ev, TU_WAIT_MS));
    TU_ASSERT_RC(tu_join_acquirer(&a), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(follower, &t2), ZKLOCK_OK);
    CU_ASSERT(t2 > t1);
    TU_ASSERT_RC(zklock_release(leader), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_acquire(leader, 0), ZKLOCK_EBUSY); /* the new leader leads */
    TU_REQUIRE_RC(zklock_leader(f, path, &value, NULL, &t1), ZKLOCK_OK);
    TU_ASSERT_INT(t1, ==, t2);
    free(value);
    TU_ASSERT_RC(zklock_release(follower), ZKLOCK_OK);
    zklock_free(leader);
    zklock_free(follower);
    zklock_session_close(s);
    zklock_session_close(f);
    tu_assert_clean(path);
}

/* ---- proclaim and observe ---------------------------------------------------------------------- */

struct observer {
    zklock_session_t *s;
    const char *path;
    int rc, changed;
    pthread_t t;
};

static void *observe(void *arg)
{
    struct observer *o = arg;
    zklock_queue_t *q = NULL;

    o->rc = zklock_queue_read(o->s, o->path, &q);
    if (o->rc == 0)
        o->rc = zklock_queue_wait(o->s, q, 20000);
    zklock_queue_free(q);
    __atomic_store_n(&o->changed, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static bool observed(void *arg)
{
    return __atomic_load_n(&((struct observer *)arg)->changed, __ATOMIC_SEQ_CST) != 0;
}

static void test_proclaim_observed(void)
{
    zklock_session_t *s = tu_session(), *o = tu_session();
    const char *path = tu_path("elect-proclaim");
    zklock_t *l = new_election(s, path, NULL);
    struct observer ob = {o, path, -1, 0, 0};
    char *value = NULL;
    size_t len = 0;
    int64_t token = 0, mine = 0;
    struct tu_requests seen;

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(l, &mine), ZKLOCK_OK);
    /* The value is the identity until proclaimed. */
    TU_REQUIRE_RC(zklock_leader(o, path, &value, &len, &token), ZKLOCK_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(value);
    CU_ASSERT(strchr(value, ':') != NULL); /* host:pid */
    TU_ASSERT_INT(token, ==, mine);
    free(value);
    /* An observer waiting on the queue hears of the new value. */
    /* It has read the queue (2 requests) and sent its two watches (2). */
    seen = (struct tu_requests){o, TU_STAT(o, requests) + 4};
    pthread_create(&ob.t, NULL, observe, &ob);
    CU_ASSERT(tu_wait_until(tu_sent_requests, &seen, TU_WAIT_MS));
    TU_ASSERT_INT(observed(&ob), ==, 0);
    TU_ASSERT_RC(zklock_proclaim(l, "10.0.0.7:8080", 13), ZKLOCK_OK);
    CU_ASSERT(tu_wait_until(observed, &ob, TU_WAIT_MS));
    pthread_join(ob.t, NULL);
    TU_ASSERT_RC(ob.rc, ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_leader(o, path, &value, &len, &token), ZKLOCK_OK);
    CU_ASSERT_STRING_EQUAL(value, "10.0.0.7:8080");
    TU_ASSERT_INT(len, ==, 13);
    free(value);
    /* Binary values keep their length. */
    TU_ASSERT_RC(zklock_proclaim(l, "a\0b", 3), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_leader(o, path, &value, &len, NULL), ZKLOCK_OK);
    TU_ASSERT_INT(len, ==, 3);
    CU_ASSERT(memcmp(value, "a\0b", 3) == 0);
    free(value);
    /* A new term starts with the identity again. */
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_leader(o, path, &value, NULL, NULL), ZKLOCK_OK);
    CU_ASSERT(value && strchr(value, ':') != NULL);
    free(value);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    zklock_session_close(o);
    tu_assert_clean(path);
}

static void test_nobody_leads(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("elect-nobody");
    char *value = (char *)"x";
    size_t len = 9;
    int64_t token = 9;

    TU_ASSERT_RC(zklock_leader(s, path, &value, &len, &token), ZKLOCK_OK);
    CU_ASSERT_PTR_NULL(value);
    TU_ASSERT_INT(len, ==, 0);
    TU_ASSERT_INT(token, ==, 0);
    TU_ASSERT_INT(tu_count(path), ==, -1); /* created nothing */
    tu_make_lock_path(path);
    TU_ASSERT_RC(zklock_leader(s, path, &value, &len, &token), ZKLOCK_OK);
    CU_ASSERT_PTR_NULL(value);
    zklock_session_close(s);
}

static void test_bad_input(void)
{
    zklock_session_t *s = tu_session();
    const char *path = tu_path("elect-bad");
    zklock_t *l = new_election(s, path, NULL), *m = tu_mutex(s, path, NULL), *e = NULL;
    char *value = NULL;
    static char big[ZKLOCK_DATA_MAX + 1];

    TU_ASSERT_RC(zklock_election_new(NULL, s, path, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_election_new(&e, NULL, path, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_election_new(&e, s, "x/", NULL), ZKLOCK_EINVAL);
    CU_ASSERT_PTR_NULL(e);
    TU_ASSERT_RC(zklock_proclaim(l, "v", 1), ZKLOCK_ENOTHELD);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_proclaim(NULL, "v", 1), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_proclaim(l, NULL, 1), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_proclaim(l, big, sizeof big), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_proclaim(l, big, ZKLOCK_DATA_MAX), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_proclaim(l, NULL, 0), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(m, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_proclaim(m, "v", 1), ZKLOCK_EINVAL); /* a mutex proclaims nothing */
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_leader(NULL, path, &value, NULL, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_leader(s, "x/", &value, NULL, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_leader(s, path, NULL, NULL, NULL), ZKLOCK_EINVAL);
    zklock_free(l);
    zklock_free(m);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static const tu_test_t election_tests[] = {
    {"wire_names", test_wire_names},
    {"one_leader_at_a_time", test_one_leader_at_a_time},
    {"expiry_hands_over", test_expiry_hands_over},
    {"proclaim_observed", test_proclaim_observed},
    {"nobody_leads", test_nobody_leads},
    {"bad_input", test_bad_input},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"election", election_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
