/* test_loop.c: what an event-loop daemon needs besides acquire and release:
 * proclaiming without blocking (zklock_proclaim_async), following a leader
 * without a thread (zklock_leader_follow), and a session that connects in
 * the background (zklock_session_opts_t.background). Faults come from the
 * proxy (zkproxy.c). */
#include "testutil.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zkproxy.h"

/* ---- the caller's event loop ------------------------------------------------------------ */

static zklock_session_t *poll_session_at(const char *hosts, int timeout_ms)
{
    zklock_session_opts_t o = {.timeout_ms = timeout_ms, .dispatch = ZKLOCK_DISPATCH_POLL};
    zklock_session_t *s = NULL;

    TU_REQUIRE_RC(zklock_session_open(&s, hosts, &o), ZKLOCK_OK);
    return s;
}

static zklock_session_t *poll_session(void)
{
    return poll_session_at(tu_hosts(), 6000);
}

/* One call's outcome, recorded by `done`. */
struct outcome {
    int calls, rc; /* __atomic */
};

static void done(zklock_t *l, int rc, void *ctx)
{
    struct outcome *o = ctx;
    __atomic_store_n(&o->rc, rc, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&o->calls, 1, __ATOMIC_SEQ_CST);
}

static bool called(void *o)
{
    return __atomic_load_n(&((struct outcome *)o)->calls, __ATOMIC_SEQ_CST) > 0;
}

static zklock_t *election(zklock_session_t *s, const char *path, int owner)
{
    zklock_opts_t o = {.owner = owner};
    zklock_t *l = NULL;

    TU_REQUIRE_RC(zklock_election_new(&l, s, path, &o), ZKLOCK_OK);
    return l;
}

/* The leader's value as an observer reads it (caller frees). */
static char *leader_value(const char *path)
{
    zklock_session_t *o = tu_session();
    char *value = NULL;

    TU_ASSERT_RC(zklock_leader(o, path, &value, NULL, NULL), ZKLOCK_OK);
    zklock_session_close(o);
    return value;
}

/* ---- zklock_proclaim_async ----------------------------------------------------------------- */

/* Chained from a done callback: proclaiming is allowed in a callback. */
struct chain {
    zklock_t *l;
    int rc;
    struct outcome second;
};

static void proclaim_again(zklock_t *l, int rc, void *ctx)
{
    struct chain *ch = ctx;
    ch->rc = zklock_proclaim_async(l, "second", 6, done, &ch->second);
}

static void test_proclaim_async(void)
{
    zklock_session_t *s = poll_session();
    const char *path = tu_path("proclaim-async");
    zklock_t *l = election(s, path, ZKLOCK_OWNER_HANDLE);
    struct outcome first = {0};
    struct chain ch = {l, -1, {0}};
    char *value;

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_proclaim_async(l, "10.0.0.9:80", 11, done, &first), ZKLOCK_OK);
    TU_ASSERT_INT(first.calls, ==, 0); /* never from inside the call */
    CU_ASSERT_FATAL(tu_dispatch_until(s, called, &first, TU_WAIT_MS));
    TU_ASSERT_RC(first.rc, ZKLOCK_OK);
    value = leader_value(path);
    CU_ASSERT(value && strcmp(value, "10.0.0.9:80") == 0);
    free(value);
    /* From a done callback. */
    TU_REQUIRE_RC(zklock_proclaim_async(l, "x", 1, proclaim_again, &ch), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_dispatch_until(s, called, &ch.second, TU_WAIT_MS));
    TU_ASSERT_RC(ch.rc, ZKLOCK_OK);
    TU_ASSERT_RC(ch.second.rc, ZKLOCK_OK);
    value = leader_value(path);
    CU_ASSERT(value && strcmp(value, "second") == 0);
    free(value);
    TU_ASSERT_INT(first.calls + ch.second.calls, ==, 2); /* exactly once each */
    TU_ASSERT_INT(zklock_session_dispatch(s), ==, 0);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* What is refused at once (done is not called) and what done is told. */
static void test_proclaim_async_errors(void)
{
    zklock_session_t *s = poll_session();
    const char *path = tu_path("proclaim-async-errors");
    zklock_t *l = election(s, path, ZKLOCK_OWNER_HANDLE);
    zklock_t *thread_owned = election(s, path, ZKLOCK_OWNER_THREAD), *m = NULL;
    zklock_opts_t ho = {.owner = ZKLOCK_OWNER_HANDLE};
    struct outcome never = {0}, lost = {0};
    static char big[ZKLOCK_DATA_MAX + 1];

    TU_REQUIRE_RC(zklock_mutex_new(&m, s, path, &ho), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_proclaim_async(l, "v", 1, done, &never), ZKLOCK_ENOTHELD);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_proclaim_async(NULL, "v", 1, done, &never), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_proclaim_async(l, "v", 1, NULL, NULL), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_proclaim_async(l, NULL, 1, done, &never), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_proclaim_async(l, big, sizeof big, done, &never), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_proclaim_async(m, "v", 1, done, &never), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_proclaim_async(thread_owned, "v", 1, done, &never), ZKLOCK_EOWNER);
    /* The leadership ends with the session: told through done. */
    tu_expire(s);
    TU_REQUIRE_RC(zklock_proclaim_async(l, "v", 1, done, &lost), ZKLOCK_OK);
    CU_ASSERT(tu_dispatch_until(s, called, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.rc, ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    TU_ASSERT_INT(never.calls, ==, 0);
    TU_ASSERT_INT(lost.calls, ==, 1);
    zklock_free(l);
    zklock_free(thread_owned);
    zklock_free(m);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* A leader behind a proxy (its session's states in ev), for what happens
 * while a proclaim is in flight. */
struct proxied {
    zkproxy_t *proxy;
    zklock_session_t *s;
    zklock_t *l;
    const char *path;
    struct tu_events ev;
};

static void proxied_leader(struct proxied *p, const char *name, int dispatch)
{
    zklock_session_opts_t o = {.timeout_ms = 6000, .dispatch = dispatch,
                               .on_state = tu_on_state};

    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->ev.mu, NULL);
    o.ctx = &p->ev;
    p->proxy = zkproxy_start(tu_server(1));
    CU_ASSERT_PTR_NOT_NULL_FATAL(p->proxy);
    TU_REQUIRE_RC(zklock_session_open(&p->s, zkproxy_hosts(p->proxy), &o), ZKLOCK_OK);
    p->path = tu_path(name);
    p->l = election(p->s, p->path, ZKLOCK_OWNER_HANDLE);
    TU_REQUIRE_RC(zklock_acquire(p->l, -1), ZKLOCK_OK);
}

/* zklock_free and zklock_session_close with a proclaim in flight: done is
 * told before they return (ZKLOCK_ECANCELED, ZKLOCK_ECLOSED), once. */
static void test_proclaim_in_flight_at_free_and_close(void)
{
    struct proxied p;
    struct outcome freed = {0}, closed = {0};
    zklock_t *l2;

    proxied_leader(&p, "proclaim-in-flight", ZKLOCK_DISPATCH_POLL);
    zkproxy_set_delay(p.proxy, 1000, 1000); /* the answer takes two seconds */
    TU_REQUIRE_RC(zklock_proclaim_async(p.l, "v", 1, done, &freed), ZKLOCK_OK);
    zklock_free(p.l);
    TU_ASSERT_INT(freed.calls, ==, 1);
    TU_ASSERT_RC(freed.rc, ZKLOCK_ECANCELED);
    zkproxy_set_delay(p.proxy, 0, 0);
    l2 = election(p.s, p.path, ZKLOCK_OWNER_HANDLE);
    TU_REQUIRE_RC(zklock_acquire(l2, -1), ZKLOCK_OK);
    zkproxy_set_delay(p.proxy, 1000, 1000);
    TU_REQUIRE_RC(zklock_proclaim_async(l2, "w", 1, done, &closed), ZKLOCK_OK);
    zklock_session_close(p.s);
    TU_ASSERT_INT(closed.calls, ==, 1);
    TU_ASSERT_RC(closed.rc, ZKLOCK_ECLOSED);
    TU_ASSERT_RC(zklock_proclaim_async(l2, "w", 1, done, &closed), ZKLOCK_ECLOSED);
    zklock_free(l2);
    TU_ASSERT_INT(freed.calls + closed.calls, ==, 2);
    zkproxy_stop(p.proxy);
    tu_assert_clean(p.path);
}

/* Cut off: the blocking and the asynchronous form both answer
 * ZCONNECTIONLOSS (the blocking one is the other that waits). */
static void test_proclaim_cut_off(void)
{
    struct proxied p;
    struct outcome cut = {0};

    proxied_leader(&p, "proclaim-cut-off", ZKLOCK_DISPATCH_THREAD);
    zkproxy_cut(p.proxy);
    CU_ASSERT_FATAL(tu_wait_state(&p.ev, ZKLOCK_SUSPENDED));
    TU_ASSERT_RC(zklock_proclaim(p.l, "v", 1), ZCONNECTIONLOSS);
    TU_REQUIRE_RC(zklock_proclaim_async(p.l, "v", 1, done, &cut), ZKLOCK_OK);
    CU_ASSERT(tu_wait_until(called, &cut, TU_WAIT_MS));
    TU_ASSERT_RC(cut.rc, ZCONNECTIONLOSS);
    zkproxy_restore(p.proxy);
    CU_ASSERT(tu_wait_state(&p.ev, ZKLOCK_RECONNECTED)); /* the release is then confirmed */
    zklock_free(p.l);
    zklock_session_close(p.s);
    zkproxy_stop(p.proxy);
    tu_assert_clean(p.path);
}

/* ---- a session that connects in the background ------------------------------------------------ */

/* Opened while no server can be reached (the proxy refuses every
 * connection, as a port where nothing listens yet): open returns OK at
 * once, calls behave as during a reconnection (try-once is refused, a
 * timeout runs), and an acquisition made before the server was reachable
 * holds once it is, within its timeout; on_state tells CONNECTED. */
static void test_background_open(void)
{
    struct tu_events ev = TU_EVENTS_INIT;
    zklock_session_opts_t o = {.timeout_ms = 6000, .background = 1, .on_state = tu_on_state,
                               .ctx = &ev};
    zklock_opts_t ho = {.owner = ZKLOCK_OWNER_HANDLE};
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    const char *path = tu_path("background");
    zklock_session_t *s = NULL;
    struct outcome got = {0};
    zklock_t *l;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    zkproxy_cut(proxy);
    TU_REQUIRE_RC(zklock_session_open(&s, zkproxy_hosts(proxy), &o), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_session_id(s), ==, 0);
    l = tu_mutex(s, path, &ho);
    TU_ASSERT_RC(zklock_acquire(l, 0), ZCONNECTIONLOSS);
    TU_ASSERT_RC(zklock_acquire(l, 300), ZKLOCK_ETIMEDOUT); /* its timeout runs */
    TU_REQUIRE_RC(zklock_acquire_async(l, TU_WAIT_MS, done, &got), ZKLOCK_OK);
    TU_ASSERT_INT(tu_count(path), ==, -1); /* nothing reached the server */
    zkproxy_restore(proxy);
    CU_ASSERT(tu_wait_until(called, &got, TU_WAIT_MS));
    TU_ASSERT_RC(got.rc, ZKLOCK_OK);
    CU_ASSERT(tu_wait_state(&ev, ZKLOCK_CONNECTED));
    CU_ASSERT(zklock_session_id(s) != 0);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    zkproxy_stop(proxy);
    tu_assert_clean(path);
}

/* A session that never connected closes at once: its calls end, nothing
 * is left. Usage errors are still told by open. */
static void test_background_never_connected(void)
{
    zklock_session_opts_t o = {.background = 1}, bad = {.background = 1, .timeout_ms = -1};
    zklock_opts_t ho = {.owner = ZKLOCK_OWNER_HANDLE};
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    const char *path = tu_path("background-never");
    zklock_session_t *s = NULL;
    struct outcome got = {0};
    zklock_t *l;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    TU_ASSERT_RC(zklock_session_open(&s, "zk1", &o), ZKLOCK_EINVAL); /* no port */
    TU_ASSERT_RC(zklock_session_open(&s, tu_hosts(), &bad), ZKLOCK_EINVAL);
    CU_ASSERT_PTR_NULL(s);
    zkproxy_cut(proxy);
    TU_REQUIRE_RC(zklock_session_open(&s, zkproxy_hosts(proxy), &o), ZKLOCK_OK);
    l = tu_mutex(s, path, &ho);
    TU_REQUIRE_RC(zklock_acquire_async(l, -1, done, &got), ZKLOCK_OK);
    zklock_session_close(s);
    TU_ASSERT_INT(got.calls, ==, 1);
    TU_ASSERT_RC(got.rc, ZKLOCK_ECLOSED);
    zklock_free(l);
    zkproxy_stop(proxy);
    TU_ASSERT_INT(tu_count(path), ==, -1);
}

/* ---- following the leader ------------------------------------------------------------------ */

/* What a follower was told, in order. */
struct told {
    int n, stop_at;             /* stop_at: fn stops f at that call (0: never) */
    char values[32][64];        /* "" with null = 1 for nobody */
    bool null[32];
    int64_t tokens[32];
    zklock_follow_t *f;
    pthread_mutex_t mu;
};

static void record(const char *path, const void *value, size_t len, int64_t token, void *ctx)
{
    struct told *t = ctx;

    pthread_mutex_lock(&t->mu);
    if (t->n < 32) {
        snprintf(t->values[t->n], sizeof t->values[0], "%.*s", (int)len,
                 value ? (const char *)value : "");
        t->null[t->n] = value == NULL;
        t->tokens[t->n] = token;
    }
    t->n++;
    pthread_mutex_unlock(&t->mu);
    if (t->stop_at && t->n == t->stop_at)
        zklock_follow_stop(t->f); /* from inside its own fn */
}

static int told_count(struct told *t)
{
    int n;
    pthread_mutex_lock(&t->mu);
    n = t->n;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* The last thing told is value (NULL: nobody leads). */
struct last {
    struct told *t;
    const char *value;
};

static bool last_is(void *arg)
{
    struct last *l = arg;
    struct told *t = l->t;
    bool yes;

    pthread_mutex_lock(&t->mu);
    yes = t->n > 0 && t->n <= 32 &&
          (l->value ? !t->null[t->n - 1] && strcmp(t->values[t->n - 1], l->value) == 0
                    : t->null[t->n - 1] && t->tokens[t->n - 1] == 0);
    pthread_mutex_unlock(&t->mu);
    return yes;
}

static bool told_n(void *arg)
{
    struct last *l = arg;
    return told_count(l->t) >= atoi(l->value);
}

#define TOLD_INIT {0, 0, {{0}}, {0}, {0}, NULL, PTHREAD_MUTEX_INITIALIZER}

/* A follower's session, and a candidate's election (its own session) on a
 * fresh path. */
struct stage {
    zklock_session_t *fs, *a;
    const char *path;
    zklock_t *la;
};

static void stage_open(struct stage *st, const char *name, zklock_session_t *fs)
{
    st->fs = fs;
    st->a = tu_session();
    st->path = tu_path(name);
    st->la = election(st->a, st->path, ZKLOCK_OWNER_THREAD);
}

/* The candidate leads, and proclaims value. */
static void stage_lead(struct stage *st, const char *value)
{
    TU_REQUIRE_RC(zklock_acquire(st->la, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_proclaim(st->la, value, strlen(value)), ZKLOCK_OK);
}

/* Frees all (the follower's session unless already closed: fs NULL); nothing
 * is left under the path. */
static void stage_close(struct stage *st)
{
    zklock_free(st->la);
    zklock_session_close(st->fs);
    zklock_session_close(st->a);
    tu_assert_clean(st->path);
}

/* In an event loop (ZKLOCK_DISPATCH_POLL): nobody (the path does not even
 * exist), a leader with its identity, its proclaimed value, the next
 * leader, nobody again; each told once, in order, tokens growing, and
 * never from inside zklock_leader_follow. */
static void test_follow_leader(void)
{
    zklock_session_t *fs = poll_session(), *a = tu_session(), *b = tu_session();
    const char *path = tu_path("follow");
    zklock_t *la = election(a, path, ZKLOCK_OWNER_THREAD), *lb = election(b, path, ZKLOCK_OWNER_HANDLE);
    struct told t = TOLD_INIT;
    struct last nobody = {&t, NULL}, va = {&t, "alpha"}, vb = {&t, "beta"};
    zklock_follow_t *f = NULL;
    struct tu_acquirer acq;
    int64_t ta = 0, tb = 0;

    TU_REQUIRE_RC(zklock_leader_follow(fs, path, record, &t, &f), ZKLOCK_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    TU_ASSERT_INT(t.n, ==, 0); /* never from inside the call */
    CU_ASSERT_FATAL(tu_dispatch_until(fs, last_is, &nobody, TU_WAIT_MS));
    TU_ASSERT_INT(t.n, ==, 1);
    TU_REQUIRE_RC(zklock_acquire(la, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_fence(la, &ta), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_proclaim(la, "alpha", 5), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_dispatch_until(fs, last_is, &va, TU_WAIT_MS));
    TU_ASSERT_INT(t.tokens[t.n - 1], ==, ta);
    /* Told the identity first if it looked before the proclaim: at most. */
    TU_ASSERT_INT(t.n, <=, 3);
    tu_start_acquirer(&acq, lb, 30000, false);
    CU_ASSERT(tu_wait_children(path, 2));
    TU_ASSERT_RC(zklock_release(la), ZKLOCK_OK); /* resigns: b leads, with its identity */
    TU_ASSERT_RC(tu_join_acquirer(&acq), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_fence(lb, &tb), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_proclaim(lb, "beta", 4), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_dispatch_until(fs, last_is, &vb, TU_WAIT_MS));
    TU_ASSERT_INT(t.tokens[t.n - 1], ==, tb);
    CU_ASSERT(tb > ta);
    TU_ASSERT_RC(zklock_release(lb), ZKLOCK_OK);
    CU_ASSERT(tu_dispatch_until(fs, last_is, &nobody, TU_WAIT_MS));
    for (int i = 1; i < t.n && i < 32; i++) /* each told once: no repeat */
        CU_ASSERT(t.null[i] != t.null[i - 1] || t.tokens[i] != t.tokens[i - 1] ||
                  strcmp(t.values[i], t.values[i - 1]) != 0);
    zklock_follow_stop(f);
    zklock_free(la);
    zklock_free(lb);
    zklock_session_close(fs);
    zklock_session_close(a);
    zklock_session_close(b);
    tu_assert_clean(path);
}

/* The paths that session id watches on the server (wchc), one per line. */
static void watched_by(int64_t id, char *out, size_t len)
{
    static char buf[65536];
    char sid[40], *at, *end;

    out[0] = '\0';
    snprintf(sid, sizeof sid, "0x%llx\n", (unsigned long long)id);
    if (tu_fourlw(1, "wchc", buf, sizeof buf) <= 0 || !(at = strstr(buf, sid)))
        return;
    at += strlen(sid);
    for (end = at; *end == '\t'; end = strchr(end, '\n') ? strchr(end, '\n') + 1 : end + strlen(end))
        ;
    snprintf(out, len, "%.*s", (int)(end - at), at);
}

/* No herd: while somebody leads, a follower watches the leader's node and
 * nothing else, so contenders queuing behind it and leaving wake no
 * follower (not a request, not a call); the leader's going is seen. */
static void test_follow_no_herd(void)
{
    enum { QUEUED = 4 };
    zklock_session_t *fs = poll_session(), *a = tu_session(), *q = tu_session();
    const char *path = tu_path("follow-herd");
    zklock_t *la = election(a, path, ZKLOCK_OWNER_HANDLE), *lq[QUEUED];
    struct told t = TOLD_INIT;
    struct last one = {&t, "1"}, next = {&t, "queued"};
    struct outcome got[QUEUED];
    zklock_follow_t *f = NULL;
    char watched[4096], leader_node[512], expected[600];
    char **kids;
    uint64_t requests;
    int n;

    TU_REQUIRE_RC(zklock_acquire(la, -1), ZKLOCK_OK);
    kids = tu_children(path, &n);
    TU_REQUIRE_RC(n, 1);
    snprintf(leader_node, sizeof leader_node, "%s/%s", path, kids[0]);
    tu_free_strings(kids);
    TU_REQUIRE_RC(zklock_leader_follow(fs, path, record, &t, &f), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_dispatch_until(fs, told_n, &one, TU_WAIT_MS));
    watched_by(zklock_session_id(fs), watched, sizeof watched);
    snprintf(expected, sizeof expected, "\t%s\n", leader_node);
    CU_ASSERT_STRING_EQUAL(watched, expected); /* the leader's node, only */
    requests = TU_STAT(fs, requests);
    memset(got, 0, sizeof got);
    for (int i = 0; i < QUEUED; i++) {
        zklock_opts_t o = {.owner = ZKLOCK_OWNER_HANDLE};
        TU_REQUIRE_RC(zklock_election_new(&lq[i], q, path, &o), ZKLOCK_OK);
        TU_REQUIRE_RC(zklock_acquire_async(lq[i], -1, done, &got[i]), ZKLOCK_OK);
    }
    CU_ASSERT(tu_wait_children(path, 1 + QUEUED));
    for (int i = 1; i < QUEUED; i++) /* all but the first in line leave again */
        zklock_cancel(lq[i]);
    CU_ASSERT(tu_wait_children(path, 2));
    /* The follower's session heard nothing: had it watched the path, each
     * of those would have cost it a listing. */
    TU_ASSERT_INT(TU_STAT(fs, requests), ==, requests);
    TU_ASSERT_INT(zklock_session_dispatch(fs), ==, 0);
    TU_ASSERT_INT(t.n, ==, 1);
    TU_ASSERT_RC(zklock_proclaim(lq[0], "queued", 6), ZKLOCK_ENOTHELD);
    TU_ASSERT_RC(zklock_release(la), ZKLOCK_OK);
    CU_ASSERT(tu_wait_until(called, &got[0], TU_WAIT_MS));
    TU_ASSERT_RC(zklock_proclaim(lq[0], "queued", 6), ZKLOCK_OK);
    CU_ASSERT(tu_dispatch_until(fs, last_is, &next, TU_WAIT_MS));
    TU_ASSERT_RC(zklock_release(lq[0]), ZKLOCK_OK);
    zklock_follow_stop(f);
    zklock_free(la);
    for (int i = 0; i < QUEUED; i++)
        zklock_free(lq[i]);
    zklock_session_close(fs);
    zklock_session_close(a);
    zklock_session_close(q);
    tu_assert_clean(path);
}

/* Stopped from inside its own fn: never called again, freed once fn has
 * returned (valgrind and ASan runs check that). */
static void test_follow_stop_inside_fn(void)
{
    struct stage st;
    struct told t = TOLD_INIT, u = TOLD_INIT;
    struct last one = {&t, "1"}, leads = {&u, "alpha"};
    zklock_follow_t *f = NULL, *g = NULL;

    stage_open(&st, "follow-stop-inside", poll_session());
    t.stop_at = 1;
    TU_REQUIRE_RC(zklock_leader_follow(st.fs, st.path, record, &t, &f), ZKLOCK_OK);
    t.f = f; /* fn runs in our dispatch, not before */
    CU_ASSERT_FATAL(tu_dispatch_until(st.fs, told_n, &one, TU_WAIT_MS));
    /* Another follower on the session sees the change the stopped one does not. */
    TU_REQUIRE_RC(zklock_leader_follow(st.fs, st.path, record, &u, &g), ZKLOCK_OK);
    stage_lead(&st, "alpha");
    CU_ASSERT(tu_dispatch_until(st.fs, last_is, &leads, TU_WAIT_MS));
    TU_ASSERT_INT(t.n, ==, 1);
    TU_ASSERT_RC(zklock_release(st.la), ZKLOCK_OK);
    zklock_follow_stop(g);
    stage_close(&st);
}

/* A deliberately slow fn, to stop its follower while it runs. */
static void slow_fn(const char *path, const void *value, size_t len, int64_t token, void *ctx)
{
    tu_slow_call(ctx); /* zklock_follow_stop must wait for it */
}

/* Stopped from another thread while fn runs on the session's: stop returns
 * after fn did (its ctx may go then), and fn is not called again. */
static void test_follow_stop_while_fn_runs(void)
{
    struct stage st;
    struct tu_slow sl = {0, 0, 0};
    struct told u = TOLD_INIT;
    struct last leads = {&u, "alpha"};
    zklock_follow_t *f = NULL, *g = NULL;

    stage_open(&st, "follow-stop-running", tu_session());
    TU_REQUIRE_RC(zklock_leader_follow(st.fs, st.path, slow_fn, &sl, &f), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_until(tu_slow_started, &sl, TU_WAIT_MS));
    zklock_follow_stop(f);
    TU_ASSERT_INT(__atomic_load_n(&sl.finished, __ATOMIC_SEQ_CST), ==, 1);
    TU_REQUIRE_RC(zklock_leader_follow(st.fs, st.path, record, &u, &g), ZKLOCK_OK);
    stage_lead(&st, "alpha");
    CU_ASSERT(tu_wait_until(last_is, &leads, TU_WAIT_MS));
    TU_ASSERT_INT(__atomic_load_n(&sl.calls, __ATOMIC_SEQ_CST), ==, 1);
    TU_ASSERT_RC(zklock_release(st.la), ZKLOCK_OK);
    zklock_follow_stop(g);
    stage_close(&st);
}

/* The follower's session expires: its watches went with it; it looks again
 * on the new session (the leader is the same: nothing is told), and it
 * follows from there (the leader's resignation is told). */
static void test_follow_across_expiry(void)
{
    struct stage st;
    struct told t = TOLD_INIT;
    struct last leads = {&t, "alpha"}, nobody = {&t, NULL};
    struct tu_requests seen;
    zklock_follow_t *f = NULL;
    int n;

    stage_open(&st, "follow-expiry", poll_session());
    stage_lead(&st, "alpha");
    TU_REQUIRE_RC(zklock_leader_follow(st.fs, st.path, record, &t, &f), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_dispatch_until(st.fs, last_is, &leads, TU_WAIT_MS));
    n = t.n;
    seen = (struct tu_requests){st.fs, TU_STAT(st.fs, requests) + 2}; /* a listing, a get */
    tu_expire(st.fs);
    CU_ASSERT(tu_dispatch_until(st.fs, tu_sent_requests, &seen, TU_WAIT_MS));
    CU_ASSERT(tu_dispatch_until(st.fs, last_is, &leads, TU_WAIT_MS));
    TU_ASSERT_INT(t.n, ==, n); /* the same leader: not told again */
    TU_ASSERT_RC(zklock_release(st.la), ZKLOCK_OK);
    CU_ASSERT(tu_dispatch_until(st.fs, last_is, &nobody, TU_WAIT_MS));
    zklock_follow_stop(f);
    stage_close(&st);
}

/* Cut off while the leader changes: once the connection is back (the same
 * session), the follower is told the new leader. */
static void test_follow_across_reconnection(void)
{
    struct tu_events ev = TU_EVENTS_INIT;
    zklock_session_opts_t o = {.timeout_ms = 8000, .on_state = tu_on_state, .ctx = &ev};
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    zklock_session_t *fs = NULL, *a = tu_session(), *b = tu_session();
    const char *path = tu_path("follow-reconnect");
    zklock_t *la = election(a, path, ZKLOCK_OWNER_THREAD), *lb = election(b, path, ZKLOCK_OWNER_THREAD);
    struct told t = TOLD_INIT;
    struct last alpha = {&t, "alpha"}, beta = {&t, "beta"};
    zklock_follow_t *f = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    TU_REQUIRE_RC(zklock_session_open(&fs, zkproxy_hosts(proxy), &o), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(la, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_proclaim(la, "alpha", 5), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_leader_follow(fs, path, record, &t, &f), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_until(last_is, &alpha, TU_WAIT_MS));
    zkproxy_cut(proxy);
    CU_ASSERT_FATAL(tu_wait_state(&ev, ZKLOCK_SUSPENDED));
    TU_ASSERT_RC(zklock_release(la), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(lb, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_proclaim(lb, "beta", 4), ZKLOCK_OK);
    zkproxy_restore(proxy);
    CU_ASSERT(tu_wait_state(&ev, ZKLOCK_RECONNECTED));
    CU_ASSERT(tu_wait_until(last_is, &beta, TU_WAIT_MS));
    TU_ASSERT_RC(zklock_release(lb), ZKLOCK_OK);
    zklock_follow_stop(f);
    zklock_free(la);
    zklock_free(lb);
    zklock_session_close(fs);
    zklock_session_close(a);
    zklock_session_close(b);
    zkproxy_stop(proxy);
    tu_assert_clean(path);
}

static bool fd_readable(void *s)
{
    struct pollfd p = {zklock_session_fd(s), POLLIN, 0};
    return poll(&p, 1, 0) == 1;
}

/* zklock_session_close stops telling: a report still queued is dropped; the
 * follower is stopped afterwards (the session lives until then). */
static void test_follow_at_close(void)
{
    struct stage st;
    struct told t = TOLD_INIT, u = TOLD_INIT;
    struct last one = {&t, "1"};
    zklock_follow_t *f = NULL, *g = NULL;

    stage_open(&st, "follow-close", poll_session());
    TU_REQUIRE_RC(zklock_leader_follow(st.fs, st.path, record, &t, &f), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_dispatch_until(st.fs, told_n, &one, TU_WAIT_MS)); /* nobody */
    TU_REQUIRE_RC(zklock_acquire(st.la, -1), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_wait_until(fd_readable, st.fs, TU_WAIT_MS)); /* the leader, queued */
    zklock_session_close(st.fs);
    TU_ASSERT_INT(t.n, ==, 1);
    TU_ASSERT_RC(zklock_leader_follow(st.fs, st.path, record, &u, &g), ZKLOCK_ECLOSED);
    CU_ASSERT_PTR_NULL(g);
    zklock_follow_stop(f); /* frees the session too */
    st.fs = NULL;
    TU_ASSERT_RC(zklock_release(st.la), ZKLOCK_OK);
    stage_close(&st);
}

/* A path the follower may not read: told once (token ZNOAUTH), tried again
 * every second; once it may, what it reads is told. Bad arguments start
 * nothing. */
static void test_follow_refused(void)
{
    zklock_session_t *fs = poll_session();
    const char *path = tu_path("follow-refused");
    struct ACL no_read[1] = {{ZOO_PERM_ALL & ~ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE}};
    struct ACL_vector acl = {1, no_read};
    struct told t = TOLD_INIT;
    struct last one = {&t, "1"}, nobody = {&t, NULL};
    struct tu_requests seen;
    zklock_follow_t *f = NULL;

    TU_ASSERT_RC(zklock_leader_follow(NULL, path, record, &t, &f), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_leader_follow(fs, "no/slash", record, &t, &f), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_leader_follow(fs, path, NULL, &t, &f), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_leader_follow(fs, path, record, &t, NULL), ZKLOCK_EINVAL);
    CU_ASSERT_PTR_NULL(f);
    zklock_follow_stop(NULL);
    zoo_create(tu_zk(), "/zklock-test", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0); /* may exist */
    TU_REQUIRE_RC(zoo_create(tu_zk(), path, NULL, -1, &acl, 0, NULL, 0), ZOK);
    TU_REQUIRE_RC(zklock_leader_follow(fs, path, record, &t, &f), ZKLOCK_OK);
    CU_ASSERT_FATAL(tu_dispatch_until(fs, told_n, &one, TU_WAIT_MS));
    CU_ASSERT(t.null[0]);
    TU_ASSERT_RC((int)t.tokens[0], ZNOAUTH);
    seen = (struct tu_requests){fs, TU_STAT(fs, requests) + 1}; /* it tries again */
    CU_ASSERT(tu_dispatch_until(fs, tu_sent_requests, &seen, TU_WAIT_MS));
    TU_ASSERT_INT(zklock_session_dispatch(fs), ==, 0);
    TU_ASSERT_INT(t.n, ==, 1); /* told once while it lasts */
    TU_REQUIRE_RC(zoo_set_acl(tu_zk(), path, -1, &ZOO_OPEN_ACL_UNSAFE), ZOK);
    CU_ASSERT(tu_dispatch_until(fs, last_is, &nobody, TU_WAIT_MS));
    TU_ASSERT_INT(t.n, ==, 2);
    zklock_follow_stop(f);
    zklock_session_close(fs);
    TU_ASSERT_RC(zoo_delete(tu_zk(), path, -1), ZOK);
}

/* ---- leader-only work in a loop (zklock(3), "Leader-only work") ------------------------------- */

/* The pattern zklock(3) documents, as a daemon writes it. */
static bool still_leads(const zklock_t *election)
{
    struct timespec until, now;

    if (zklock_valid_until(election, &until) != ZKLOCK_OK)
        return false;
    clock_gettime(ZKLOCK_CLOCK, &now);
    return now.tv_sec < until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec < until.tv_nsec);
}

struct standby {
    zklock_t *leader_only; /* a semaphore only the leader may take */
    int lost;
};

static void cancel_leader_only(zklock_t *election, int reason, void *ctx)
{
    struct standby *sb = ctx;

    sb->lost++;
    zklock_cancel(sb->leader_only); /* its acquisition would queue again on the next session */
}

/* The election is lost while the loop has not dispatched yet (a pause): the
 * on_lost is still queued, but zklock_valid_until, which answers from
 * zklock's own state, already says so; the leader-only acquisition started
 * before is canceled by on_lost, and is not granted on the renewed session
 * when the lease it waited for frees up. */
static void test_leader_only_work(void)
{
    zklock_session_t *s = poll_session(), *h = tu_session();
    const char *path = tu_path("leader-only"), *sem_path = tu_path("leader-only-sem");
    struct standby sb = {0};
    zklock_opts_t eo = {.owner = ZKLOCK_OWNER_HANDLE, .on_lost = cancel_leader_only, .ctx = &sb};
    zklock_opts_t ho = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_t *election = NULL, *other = NULL;
    struct outcome got = {0};

    TU_REQUIRE_RC(zklock_election_new(&election, s, path, &eo), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_semaphore_new(&sb.leader_only, s, sem_path, 1, &ho), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_semaphore_new(&other, h, sem_path, 1, NULL), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(other, -1), ZKLOCK_OK); /* the one lease is taken */
    TU_REQUIRE_RC(zklock_acquire(election, -1), ZKLOCK_OK);
    CU_ASSERT(still_leads(election));
    TU_REQUIRE_RC(zklock_acquire_async(sb.leader_only, -1, done, &got), ZKLOCK_OK);
    tu_expire(s); /* nothing dispatched meanwhile: on_lost waits in the queue */
    CU_ASSERT(fd_readable(s));
    TU_ASSERT_INT(sb.lost, ==, 0);
    CU_ASSERT(!still_leads(election));
    TU_ASSERT_INT(zklock_session_dispatch(s), >=, 1);
    TU_ASSERT_INT(sb.lost, ==, 1);
    CU_ASSERT(tu_dispatch_until(s, called, &got, TU_WAIT_MS));
    TU_ASSERT_RC(got.rc, ZKLOCK_ECANCELED);
    TU_ASSERT_RC(zklock_release(other), ZKLOCK_OK); /* the lease frees up */
    TU_ASSERT_INT(zklock_hold_count(sb.leader_only), ==, 0);
    TU_ASSERT_INT(got.calls, ==, 1);
    zklock_free(sb.leader_only);
    zklock_free(election);
    zklock_free(other);
    zklock_session_close(s);
    zklock_session_close(h);
    tu_assert_clean(path);
    tu_assert_clean(sem_path);
}

static const tu_test_t loop_tests[] = {
    {"proclaim_async", test_proclaim_async},
    {"proclaim_async_errors", test_proclaim_async_errors},
    {"proclaim_in_flight_at_free_and_close", test_proclaim_in_flight_at_free_and_close},
    {"proclaim_cut_off", test_proclaim_cut_off},
    {"background_open", test_background_open},
    {"background_never_connected", test_background_never_connected},
    {"follow_leader", test_follow_leader},
    {"follow_no_herd", test_follow_no_herd},
    {"follow_stop_inside_fn", test_follow_stop_inside_fn},
    {"follow_stop_while_fn_runs", test_follow_stop_while_fn_runs},
    {"follow_across_expiry", test_follow_across_expiry},
    {"follow_across_reconnection", test_follow_across_reconnection},
    {"follow_at_close", test_follow_at_close},
    {"follow_refused", test_follow_refused},
    {"leader_only_work", test_leader_only_work},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"loop", loop_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
