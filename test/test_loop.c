/* test_loop.c: what an event-loop daemon needs besides acquire and release:
 * proclaiming without blocking (zklock_proclaim_async), following a leader
 * without a thread (zklock_leader_follow), and a session that connects in
 * the background (zklock_session_opts_t.background). Faults come from the
 * proxy (zkproxy.c). */
#include "testutil.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>

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

/* Polls the session's descriptor and dispatches until cond(arg) holds or
 * ms pass. */
static bool loop_until(zklock_session_t *s, bool (*cond)(void *), void *arg, int ms)
{
    int64_t end = tu_now_ms() + ms;
    struct pollfd p = {zklock_session_fd(s), POLLIN, 0};

    while (!cond(arg) && tu_now_ms() < end) {
        if (poll(&p, 1, (int)(end - tu_now_ms())) > 0)
            zklock_session_dispatch(s);
    }
    return cond(arg);
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
    CU_ASSERT_FATAL(loop_until(s, called, &first, TU_WAIT_MS));
    TU_ASSERT_RC(first.rc, ZKLOCK_OK);
    value = leader_value(path);
    CU_ASSERT(value && strcmp(value, "10.0.0.9:80") == 0);
    free(value);
    /* From a done callback. */
    TU_REQUIRE_RC(zklock_proclaim_async(l, "x", 1, proclaim_again, &ch), ZKLOCK_OK);
    CU_ASSERT_FATAL(loop_until(s, called, &ch.second, TU_WAIT_MS));
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
    CU_ASSERT(loop_until(s, called, &lost, TU_WAIT_MS));
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

static const tu_test_t loop_tests[] = {
    {"proclaim_async", test_proclaim_async},
    {"proclaim_async_errors", test_proclaim_async_errors},
    {"proclaim_in_flight_at_free_and_close", test_proclaim_in_flight_at_free_and_close},
    {"proclaim_cut_off", test_proclaim_cut_off},
    {"background_open", test_background_open},
    {"background_never_connected", test_background_never_connected},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"loop", loop_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
