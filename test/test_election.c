/* test_election.c: leader election against a real ZooKeeper. */
#include "testutil.h"

#include <poll.h>
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

/* ---- on_lost names the term it reports ---------------------------------------------------------- */

/* What an election's application knows: the token of the term it acts on
 * (set by the campaigning thread), and what its on_lost saw. */
struct terms {
    pthread_mutex_t mu;
    int64_t current;
    zklock_t *other; /* another handle: zklock_lost_token answers EINVAL for it */
    int lost, reason, token_rc, fence_rc, other_rc;
    int old_terms; /* losses of a term other than `current` */
    int64_t lost_token, fence;
};
#define TERMS_INIT {PTHREAD_MUTEX_INITIALIZER, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0}

static void on_term_lost(zklock_t *l, int reason, void *ctx)
{
    struct terms *t = ctx;
    int64_t token = 0, ignored;
    int rc = zklock_lost_token(l, &token);

    pthread_mutex_lock(&t->mu);
    t->reason = reason;
    t->token_rc = rc;
    t->lost_token = token;
    t->old_terms += rc == ZKLOCK_OK && token != t->current;
    t->fence_rc = zklock_fence(l, &t->fence);
    t->other_rc = zklock_lost_token(t->other, &ignored);
    t->lost++;
    pthread_mutex_unlock(&t->mu);
}

static int terms_lost(struct terms *t)
{
    pthread_mutex_lock(&t->mu);
    int n = t->lost;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* Leads (a new term) and makes its token the one the application acts on. */
static int64_t lead(zklock_t *e, struct terms *t)
{
    int64_t token = 0;

    TU_REQUIRE_RC(zklock_acquire(e, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(e, &token), ZKLOCK_OK);
    pthread_mutex_lock(&t->mu);
    t->current = token;
    pthread_mutex_unlock(&t->mu);
    return token;
}

/* Some watch is set on the node (its own watch: the engine sets it once the
 * node is 50 ms old, from the session thread). */
static bool node_watched(void *node)
{
    char buf[8192];
    return tu_fourlw(1, "wchp", buf, sizeof buf) > 0 && strstr(buf, (const char *)node) != NULL;
}

/* The leader's node (full path into buf), once its own watch is set. */
static void watched_leader_node(const char *path, char *buf, size_t len)
{
    int n;
    char **kids = tu_children(path, &n);

    CU_ASSERT_FATAL(kids && n == 1);
    snprintf(buf, len, "%s/%s", path, kids[0]);
    tu_free_strings(kids);
    CU_ASSERT_FATAL(tu_wait_until(node_watched, buf, TU_WAIT_MS));
}

static bool leads_not(void *e)
{
    return zklock_hold_count(e) == 0; /* on the owner's thread: tu_wait_until's */
}

/* An operator deletes the leader's node: its term is over. */
static void depose(zklock_t *e, const char *node)
{
    TU_ASSERT_RC(zoo_delete(tu_zk(), node, -1), ZOK);
    CU_ASSERT_FATAL(tu_wait_until(leads_not, e, TU_WAIT_MS));
}

static bool one_lost(void *t)
{
    return terms_lost(t) >= 1;
}

static bool two_lost(void *t)
{
    return terms_lost(t) >= 2;
}

/* An event loop: polls the session's descriptor and dispatches until
 * cond(arg) holds, or TU_WAIT_MS pass. */
static bool dispatch_until(zklock_session_t *s, bool (*cond)(void *), void *arg)
{
    int64_t end = tu_now_ms() + TU_WAIT_MS;
    struct pollfd p = {zklock_session_fd(s), POLLIN, 0};

    while (!cond(arg) && tu_now_ms() < end)
        if (poll(&p, 1, (int)(end - tu_now_ms())) > 0)
            zklock_session_dispatch(s);
    return cond(arg);
}

/* Issue 21, item 5 (b), ZKLOCK_DISPATCH_POLL: the leader is deposed and
 * campaigns again before its event loop dispatches; the new term's
 * zklock_acquire returns first, the old term's on_lost only runs in the next
 * dispatch. zklock_lost_token tells which term it reports: the old one, not
 * the one now led (zklock_fence in the callback, on the loop's thread). A
 * loss of the current term then names the current term. */
static void test_lost_token_names_the_term_poll(void)
{
    zklock_session_opts_t so = {.timeout_ms = 6000, .dispatch = ZKLOCK_DISPATCH_POLL};
    struct terms t = TERMS_INIT;
    zklock_opts_t lo = {.on_lost = on_term_lost, .ctx = &t};
    zklock_session_t *s = tu_session_opts(&so);
    const char *path = tu_path("elect-term-poll");
    zklock_t *e = new_election(s, path, &lo);
    char node[512];
    int64_t t1, t2, token;

    t.other = tu_mutex(s, tu_path("elect-term-poll-other"), NULL);
    TU_ASSERT_RC(zklock_lost_token(e, &token), ZKLOCK_EINVAL); /* not inside on_lost */
    TU_ASSERT_RC(zklock_lost_token(NULL, &token), ZKLOCK_EINVAL);
    t1 = lead(e, &t);
    watched_leader_node(path, node, sizeof node);
    depose(e, node);
    t2 = lead(e, &t);
    CU_ASSERT(t2 > t1);
    TU_ASSERT_INT(terms_lost(&t), ==, 0); /* queued, not dispatched */
    /* Queued before the new term was granted: the next dispatch runs it. */
    TU_ASSERT_INT(zklock_session_dispatch(s), >=, 1);
    TU_ASSERT_INT(t.lost, ==, 1);
    TU_ASSERT_RC(t.reason, ZKLOCK_LOST_DELETED);
    TU_ASSERT_RC(t.token_rc, ZKLOCK_OK);
    TU_ASSERT_INT(t.lost_token, ==, t1);
    TU_ASSERT_INT(t.old_terms, ==, 1);
    TU_ASSERT_RC(t.fence_rc, ZKLOCK_OK); /* this thread leads, in the new term */
    TU_ASSERT_INT(t.fence, ==, t2);
    TU_ASSERT_RC(t.other_rc, ZKLOCK_EINVAL);
    TU_ASSERT_INT(zklock_hold_count(e), ==, 1);
    /* The current term's loss. */
    watched_leader_node(path, node, sizeof node);
    depose(e, node);
    CU_ASSERT(dispatch_until(s, two_lost, &t));
    TU_ASSERT_INT(t.lost, ==, 2);
    TU_ASSERT_INT(t.lost_token, ==, t2);
    TU_ASSERT_INT(t.old_terms, ==, 1);
    TU_ASSERT_RC(t.fence_rc, ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_release(e), ZKLOCK_ELOST);
    zklock_free(t.other);
    zklock_free(e);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* A callback that holds the session's callback thread until opened. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int entered, open;
};

static void gate_done(zklock_t *l, int rc, void *ctx)
{
    struct gate *g = ctx;

    (void)l;
    (void)rc;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static bool gate_entered(void *ctx)
{
    struct gate *g = ctx;
    pthread_mutex_lock(&g->mu);
    int in = g->entered;
    pthread_mutex_unlock(&g->mu);
    return in;
}

static void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
}

/* The same with ZKLOCK_DISPATCH_THREAD: a slow callback ahead in the queue
 * (held by a gate) keeps the old term's on_lost waiting while the new term's
 * blocking zklock_acquire returns, which it does without the callback
 * thread. The handler, on that thread, holds nothing itself (zklock_fence:
 * ZKLOCK_ENOTHELD): it compares the token with the term the application
 * acts on. */
static void test_lost_token_names_the_term_thread(void)
{
    struct terms t = TERMS_INIT;
    struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    zklock_opts_t lo = {.on_lost = on_term_lost, .ctx = &t};
    zklock_opts_t by_handle = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *s = tu_session();
    const char *path = tu_path("elect-term-thread");
    zklock_t *e = new_election(s, path, &lo);
    zklock_t *slow = tu_mutex(s, tu_path("elect-term-slow"), &by_handle);
    char node[512];
    int64_t t1, t2;

    t.other = slow;
    t1 = lead(e, &t);
    watched_leader_node(path, node, sizeof node); /* before the gate: the session thread sets it */
    TU_REQUIRE_RC(zklock_acquire_async(slow, -1, gate_done, &g), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_until(gate_entered, &g, TU_WAIT_MS));
    depose(e, node);
    t2 = lead(e, &t);
    CU_ASSERT(t2 > t1);
    TU_ASSERT_INT(terms_lost(&t), ==, 0); /* behind the gate */
    gate_open(&g);
    CU_ASSERT_FATAL(tu_wait_until(one_lost, &t, TU_WAIT_MS));
    TU_ASSERT_RC(t.reason, ZKLOCK_LOST_DELETED);
    TU_ASSERT_RC(t.token_rc, ZKLOCK_OK);
    TU_ASSERT_INT(t.lost_token, ==, t1);
    TU_ASSERT_INT(t.old_terms, ==, 1);
    TU_ASSERT_RC(t.fence_rc, ZKLOCK_ENOTHELD); /* a thread-owned hold is its thread's */
    TU_ASSERT_RC(t.other_rc, ZKLOCK_EINVAL);
    TU_ASSERT_INT(zklock_hold_count(e), ==, 1);
    /* The current term's loss. */
    watched_leader_node(path, node, sizeof node);
    depose(e, node);
    CU_ASSERT_FATAL(tu_wait_until(two_lost, &t, TU_WAIT_MS));
    TU_ASSERT_INT(t.lost_token, ==, t2);
    TU_ASSERT_INT(t.old_terms, ==, 1);
    TU_ASSERT_RC(zklock_release(e), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_release(slow), ZKLOCK_OK);
    zklock_free(slow);
    zklock_free(e);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* ---- a maximum hold (opts.max_hold_ms, issue 25, item 4) ---------------------------------- */

/* A leader past its limit resigns: its node goes, the next participant
 * leads, it is told MAX_HOLD; it may campaign again (a new term, a new
 * clock). */
static void test_max_hold_resigns(void)
{
    enum { LIMIT = 300 };
    struct tu_events ev = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &ev, .max_hold_ms = LIMIT,
                        .owner = ZKLOCK_OWNER_HANDLE};
    zklock_opts_t other = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *a = tu_session(), *b = tu_session();
    const char *path = tu_path("elect-max-hold");
    zklock_t *e1 = new_election(a, path, &lo), *e2 = new_election(b, path, &other);
    struct tu_acquirer w;
    int64_t t1, t2;

    TU_REQUIRE_RC(zklock_acquire(e1, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(e1, &t1), ZKLOCK_OK);
    tu_start_acquirer(&w, e2, TU_WAIT_MS, false);
    tu_max_hold_hands_over(&ev, 1, e1, &w); /* e2 leads */
    TU_ASSERT_RC(zklock_fence(e2, &t2), ZKLOCK_OK);
    TU_ASSERT_INT(t2, >, t1);
    TU_ASSERT_INT(tu_count(path), ==, 1);
    /* e1 campaigns again, and leads once e2 resigns; its new term ends too. */
    tu_start_acquirer(&w, e1, TU_WAIT_MS, false);
    CU_ASSERT(tu_wait_children(path, 2));
    TU_ASSERT_RC(zklock_release(e2), ZKLOCK_OK);
    CU_ASSERT(tu_wait_until(tu_acquirer_done, &w, TU_WAIT_MS));
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_lost(&ev, 2));
    CU_ASSERT(tu_wait_no_children(path));
    TU_ASSERT_RC(zklock_release(e1), ZKLOCK_ELOST);
    zklock_free(e1);
    zklock_free(e2);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(path);
}

static const tu_test_t election_tests[] = {
    {"wire_names", test_wire_names},
    {"one_leader_at_a_time", test_one_leader_at_a_time},
    {"expiry_hands_over", test_expiry_hands_over},
    {"proclaim_observed", test_proclaim_observed},
    {"nobody_leads", test_nobody_leads},
    {"bad_input", test_bad_input},
    {"lost_token_names_the_term_poll", test_lost_token_names_the_term_poll},
    {"lost_token_names_the_term_thread", test_lost_token_names_the_term_thread},
    {"max_hold_resigns", test_max_hold_resigns},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"election", election_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
