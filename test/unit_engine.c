/*
 * unit_engine.c (part of test_unit): the engine stepped on a scripted wire,
 * with no server.
 *
 * The session is opened on a wire of this file's (lib/wire.h): every
 * request the engine sends is queued here, and the test answers it, as
 * ZooKeeper would, in order, with what the case says (a grant, a refusal,
 * a lost reply); it delivers watch events and session states; time is a
 * number the test moves; the session thread and the callback thread are
 * declined (the test runs their turns). What a case checks is what the
 * engine did: the requests it sent, the phase of its contender, the
 * outcome its caller heard.
 *
 * The guards that hold in every build (a re-entered driver, a transition
 * outside the table) are forced here too, in a child process each.
 */
#include "../lib/contender.h"
#include "../lib/driver.h"
#include "../lib/session.h"
#include "../lib/wire.h"
#include "testutil.h"
#include "unit_engine.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the scripted wire ------------------------------------------------------------------ */

enum call { C_CREATE, C_CREATE2, C_DELETE, C_EXISTS, C_GET, C_SET, C_CHILDREN, C_CHILDREN2,
            C_SYNC, C_MULTI, C_AUTH };

static const char *const call_names[] = {"create", "create2", "delete", "exists", "get", "set",
                                         "children", "children2", "sync", "multi", "auth"};

struct req {
    enum call call;
    zhandle_t *zh;
    char path[512];
    int flags;
    void (*completion)(void);
    const void *data;
    watcher_fn watcher;
    void *wctx;
};

struct fake_zh {
    watcher_fn fn;
    void *ctx;
    int state;
    clientid_t id;
    bool closed;
};

struct registration {
    zhandle_t *zh;
    char path[512];
    watcher_fn fn;
    void *ctx;
};

#define MAX_REQS 64
#define MAX_ZH 8
#define MAX_WATCHES 32

static struct {
    struct req q[MAX_REQS];
    int n;
    struct fake_zh zh[MAX_ZH];
    int nzh;
    struct registration watches[MAX_WATCHES];
    int nwatches;
    int64_t now_ms;  /* both clocks, from a start far from 0 */
    int refuse;      /* the next request is refused with this, then 0 */
    void (*inside)(void); /* called inside the next request function, then NULL */
    /* While the library waits with nothing else to wake it: the case's next
     * move (NULL: none may come, the wait is a bug). */
    void (*serve)(void);
    bool delivering; /* a completion or a watcher of the wire's runs */
} W;

static struct fake_zh *fake(zhandle_t *zh)
{
    return (struct fake_zh *)zh;
}

/* Queues a request: ZOK, or the refusal the case set. */
static int queue(enum call call, zhandle_t *zh, const char *path, void (*completion)(void),
                 const void *data, watcher_fn watcher, void *wctx)
{
    struct req *r;
    int rc = W.refuse;

    if (W.inside) {
        void (*inside)(void) = W.inside;
        W.inside = NULL;
        inside();
    }
    W.refuse = 0;
    if (rc != ZOK)
        return rc;
    if (W.n == MAX_REQS || fake(zh)->closed)
        return ZINVALIDSTATE;
    r = &W.q[W.n++];
    *r = (struct req){.call = call, .zh = zh, .completion = completion, .data = data,
                      .watcher = watcher, .wctx = wctx};
    snprintf(r->path, sizeof r->path, "%s", path ? path : "");
    return ZOK;
}

static zhandle_t *w_init(void *env, const char *host, watcher_fn fn, int recv_timeout,
                         const clientid_t *clientid, void *context, int flags)
{
    struct fake_zh *z;

    if (W.nzh == MAX_ZH)
        return NULL;
    z = &W.zh[W.nzh++];
    *z = (struct fake_zh){.fn = fn, .ctx = context, .state = ZOO_CONNECTING_STATE};
    z->id.client_id = 0x1000 + W.nzh;
    return (zhandle_t *)z;
}

static int w_resolve(void *env, const char *hosts)
{
    return 0;
}

/* Like libzookeeper_mt's: what its completion thread has not reached is dropped. */
static int w_close(zhandle_t *zh)
{
    int k = 0;

    fake(zh)->closed = true;
    for (int i = 0; i < W.n; i++)
        if (W.q[i].zh != zh)
            W.q[k++] = W.q[i];
    W.n = k;
    k = 0;
    for (int i = 0; i < W.nwatches; i++)
        if (W.watches[i].zh != zh)
            W.watches[k++] = W.watches[i];
    W.nwatches = k;
    return ZOK;
}

static int w_state(zhandle_t *zh)
{
    return fake(zh)->state;
}

static int w_recv_timeout(zhandle_t *zh)
{
    return 10000;
}

static const clientid_t *w_client_id(zhandle_t *zh)
{
    return &fake(zh)->id;
}

static int w_add_auth(zhandle_t *zh, const char *scheme, const char *cert, int len,
                      void_completion_t completion, const void *data)
{
    return ZOK;
}

static int w_resolution_delay(zhandle_t *zh, int ms)
{
    return ZOK;
}

#define Q(call, path, fn, data, w, wctx) queue(call, zh, path, (void (*)(void))(fn), data, w, wctx)

static int w_acreate(zhandle_t *zh, const char *path, const char *value, int len,
                     const struct ACL_vector *acl, int mode, string_completion_t fn,
                     const void *data)
{
    int rc = Q(C_CREATE, path, fn, data, NULL, NULL);
    if (rc == ZOK)
        W.q[W.n - 1].flags = mode;
    return rc;
}

static int w_acreate2(zhandle_t *zh, const char *path, const char *value, int len,
                      const struct ACL_vector *acl, int mode, string_stat_completion_t fn,
                      const void *data)
{
    int rc = Q(C_CREATE2, path, fn, data, NULL, NULL);
    if (rc == ZOK)
        W.q[W.n - 1].flags = mode;
    return rc;
}

static int w_adelete(zhandle_t *zh, const char *path, int version, void_completion_t fn,
                     const void *data)
{
    return Q(C_DELETE, path, fn, data, NULL, NULL);
}

static int w_aexists(zhandle_t *zh, const char *path, int watch, stat_completion_t fn,
                     const void *data)
{
    return Q(C_EXISTS, path, fn, data, NULL, NULL);
}

static int w_awexists(zhandle_t *zh, const char *path, watcher_fn w, void *wctx,
                      stat_completion_t fn, const void *data)
{
    return Q(C_EXISTS, path, fn, data, w, wctx);
}

static int w_aget(zhandle_t *zh, const char *path, int watch, data_completion_t fn,
                  const void *data)
{
    return Q(C_GET, path, fn, data, NULL, NULL);
}

static int w_awget(zhandle_t *zh, const char *path, watcher_fn w, void *wctx,
                   data_completion_t fn, const void *data)
{
    return Q(C_GET, path, fn, data, w, wctx);
}

static int w_aset(zhandle_t *zh, const char *path, const char *buf, int len, int version,
                  stat_completion_t fn, const void *data)
{
    return Q(C_SET, path, fn, data, NULL, NULL);
}

static int w_aget_children(zhandle_t *zh, const char *path, int watch, strings_completion_t fn,
                           const void *data)
{
    return Q(C_CHILDREN, path, fn, data, NULL, NULL);
}

static int w_aget_children2(zhandle_t *zh, const char *path, int watch,
                            strings_stat_completion_t fn, const void *data)
{
    return Q(C_CHILDREN2, path, fn, data, NULL, NULL);
}

static int w_awget_children2(zhandle_t *zh, const char *path, watcher_fn w, void *wctx,
                             strings_stat_completion_t fn, const void *data)
{
    return Q(C_CHILDREN2, path, fn, data, w, wctx);
}

static int w_async(zhandle_t *zh, const char *path, string_completion_t fn, const void *data)
{
    return Q(C_SYNC, path, fn, data, NULL, NULL);
}

static int w_amulti(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
                    void_completion_t fn, const void *data)
{
    return Q(C_MULTI, "", fn, data, NULL, NULL);
}

static int w_remove_watches(zhandle_t *zh, const char *path, ZooWatcherType type,
                            watcher_fn fn, void *ctx, int local)
{
    for (int i = 0; i < W.nwatches; i++) {
        struct registration *g = &W.watches[i];
        if (g->zh == zh && strcmp(g->path, path) == 0 && g->fn == fn && g->ctx == ctx) {
            *g = W.watches[--W.nwatches];
            return ZOK;
        }
    }
    return ZNOWATCHER;
}

static void w_clock(void *env, clockid_t which, struct timespec *ts)
{
    ts->tv_sec = (time_t)(W.now_ms / 1000);
    ts->tv_nsec = (long)(W.now_ms % 1000) * 1000000L;
}

/* Nothing here answers while the library waits: a timed wait lets the
 * time pass; an untimed one would wait for ever, which no case may do. */
static int w_cond_wait(void *env, pthread_cond_t *cond, pthread_mutex_t *mu,
                       const struct timespec *at)
{
    int64_t ms;

    if (!at && W.serve) {
        pthread_mutex_unlock(mu); /* the world moves on meanwhile: a case's move */
        W.serve();
        pthread_mutex_lock(mu);
        return 0;
    }
    if (!at) {
        fprintf(stderr, "unit_engine: the library waited with nothing to wake it\n");
        abort();
    }
    ms = (int64_t)at->tv_sec * 1000 + at->tv_nsec / 1000000;
    if (ms > W.now_ms)
        W.now_ms = ms;
    return ETIMEDOUT;
}

static int w_thread_start(void *env, pthread_t *t, void *(*run)(void *), void *arg)
{
    return ZKL_WIRE_NO_THREAD;
}

static void w_thread_join(void *env, pthread_t t)
{
}

static bool w_in_completion(void *env)
{
    return W.delivering;
}

/* Node names from a seed: the same world names its nodes the same. */
static int w_seed(void *env, uint64_t state[2])
{
    state[0] = 0x5eed;
    state[1] = 31;
    return 0;
}

static const struct zkl_wire script_wire = {
    .init = w_init,
    .resolve = w_resolve,
    .close = w_close,
    .state = w_state,
    .recv_timeout = w_recv_timeout,
    .client_id = w_client_id,
    .add_auth = w_add_auth,
    .set_servers_resolution_delay = w_resolution_delay,
    .acreate = w_acreate,
    .acreate2 = w_acreate2,
    .adelete = w_adelete,
    .aexists = w_aexists,
    .awexists = w_awexists,
    .aget = w_aget,
    .awget = w_awget,
    .aset = w_aset,
    .aget_children = w_aget_children,
    .aget_children2 = w_aget_children2,
    .awget_children2 = w_awget_children2,
    .async = w_async,
    .amulti = w_amulti,
    .remove_watches = w_remove_watches,
    .clock = w_clock,
    .cond_wait = w_cond_wait,
    .thread_start = w_thread_start,
    .thread_join = w_thread_join,
    .in_completion = w_in_completion,
    .seed = w_seed,
};

/* ---- the test's side of the wire ---------------------------------------------------------- */

/* Takes the oldest request (ZooKeeper answers a session's in order), which
 * must be `call` on a path starting with `path`. */
static bool take(enum call call, const char *path, struct req *out)
{
    char msg[700];
    bool ok;

    if (W.n == 0) {
        snprintf(msg, sizeof msg, "expected a %s of %s: nothing was sent", call_names[call], path);
        CU_assertImplementation(false, __LINE__, msg, __FILE__, "", CU_FALSE);
        return false;
    }
    *out = W.q[0];
    memmove(&W.q[0], &W.q[1], sizeof W.q[0] * (size_t)--W.n);
    ok = out->call == call && strncmp(out->path, path, strlen(path)) == 0;
    snprintf(msg, sizeof msg, "expected a %s of %s, got a %s of %s", call_names[call], path,
             call_names[out->call], out->path);
    CU_assertImplementation(ok, __LINE__, msg, __FILE__, "", CU_FALSE);
    return ok;
}

static void registered(const struct req *r)
{
    if (r->watcher && W.nwatches < MAX_WATCHES) {
        struct registration *g = &W.watches[W.nwatches++];
        *g = (struct registration){.zh = r->zh, .fn = r->watcher, .ctx = r->wctx};
        snprintf(g->path, sizeof g->path, "%s", r->path);
    }
}

static struct Stat stat_of(int64_t czxid, int64_t owner, int cversion, int children)
{
    return (struct Stat){.czxid = czxid, .mzxid = czxid, .ephemeralOwner = owner,
                         .cversion = cversion, .numChildren = children};
}

/* The answers, one per completion type, delivered as the wire's delivery
 * thread would (W.delivering). */
#define DELIVER(call)           \
    do {                        \
        W.delivering = true;    \
        call;                   \
        W.delivering = false;   \
    } while (0)

static void reply_string_stat(const struct req *r, int rc, const char *value, struct Stat st)
{
    DELIVER(((string_stat_completion_t)r->completion)(rc, value, rc == ZOK ? &st : NULL,
                                                      r->data));
}

static void reply_string(const struct req *r, int rc, const char *value)
{
    DELIVER(((string_completion_t)r->completion)(rc, value, r->data));
}

static void reply_children(const struct req *r, int rc, const char *const *names, int n,
                           struct Stat st)
{
    struct String_vector v = {n, (char **)names};

    if (rc == ZOK)
        registered(r);
    DELIVER(((strings_stat_completion_t)r->completion)(rc, rc == ZOK ? &v : NULL,
                                                       rc == ZOK ? &st : NULL, r->data));
}

static void reply_data(const struct req *r, int rc, const char *value, struct Stat st)
{
    if (rc == ZOK)
        registered(r);
    DELIVER(((data_completion_t)r->completion)(rc, value, value ? (int)strlen(value) : -1,
                                               rc == ZOK ? &st : NULL, r->data));
}

static void reply_stat(const struct req *r, int rc, struct Stat st)
{
    if (rc == ZOK || rc == ZNONODE)
        registered(r);
    DELIVER(((stat_completion_t)r->completion)(rc, rc == ZOK ? &st : NULL, r->data));
}

static void reply_void(const struct req *r, int rc)
{
    DELIVER(((void_completion_t)r->completion)(rc, r->data));
}

/* A node event: every watch registered on path fires, once. */
static void node_event(int type, const char *path)
{
    for (int i = 0; i < W.nwatches;) {
        struct registration g = W.watches[i];
        if (strcmp(g.path, path) != 0) {
            i++;
            continue;
        }
        W.watches[i] = W.watches[--W.nwatches];
        DELIVER(g.fn(g.zh, type, ZOO_CONNECTED_STATE, path, g.ctx));
    }
}

/* The session's state, as the handle's own watcher hears it. */
static void session_state(int z, int state)
{
    W.zh[z].state = state;
    DELIVER(W.zh[z].fn((zhandle_t *)&W.zh[z], ZOO_SESSION_EVENT, state, NULL, W.zh[z].ctx));
}

/* ---- a case's world ----------------------------------------------------------------------- */

#define LOCK "/t/lock"

struct outcome {
    int calls;
    int rc;
};

static void done(zklock_t *l, int rc, void *ctx)
{
    struct outcome *o = ctx;
    o->calls++;
    o->rc = rc;
}

/* A session on the scripted wire, connected (handle 0), with a
 * handle-owned mutex at LOCK (its options lo). */
static zklock_session_t *open_world_with(zklock_t **l, const zklock_opts_t *lo)
{
    zklock_session_opts_t o = {.background = 1, .dispatch = ZKLOCK_DISPATCH_POLL,
                               .timeout_ms = 10000};
    zklock_session_t *s = NULL;
    struct timespec next;

    memset(&W, 0, sizeof W);
    W.now_ms = 1000000;
    TU_REQUIRE_RC(zklock__session_open_on(&s, "sim:2181", &o, &script_wire, NULL), ZKLOCK_OK);
    zklock__session_turn(s, &next); /* the session thread's turn: the first handle */
    CU_ASSERT_FATAL(W.nzh == 1);
    session_state(0, ZOO_CONNECTED_STATE);
    TU_REQUIRE_RC(zklock_mutex_new(l, s, LOCK, lo), ZKLOCK_OK);
    return s;
}

static zklock_session_t *open_world(zklock_t **l)
{
    return open_world_with(l, &(zklock_opts_t){.owner = ZKLOCK_OWNER_HANDLE});
}

/* What the server says to whatever is left at a case's end: deletes done,
 * everything else gone. */
static void answer_the_rest(void)
{
    struct req r;

    if (W.n == 0) {
        fprintf(stderr, "unit_engine: the library waited at the end with nothing owed\n");
        abort();
    }
    r = W.q[0];
    memmove(&W.q[0], &W.q[1], sizeof W.q[0] * (size_t)--W.n);
    switch (r.call) {
    case C_DELETE:
    case C_MULTI:
        reply_void(&r, r.call == C_DELETE ? ZOK : ZNONODE);
        break;
    case C_SET:
    case C_EXISTS:
        reply_stat(&r, ZNONODE, stat_of(0, 0, 0, 0));
        break;
    case C_GET:
        reply_data(&r, ZNONODE, NULL, stat_of(0, 0, 0, 0));
        break;
    case C_CHILDREN2:
        reply_children(&r, ZNONODE, NULL, 0, stat_of(0, 0, 0, 0));
        break;
    case C_CHILDREN:
        DELIVER(((strings_completion_t)r.completion)(ZNONODE, NULL, r.data));
        break;
    case C_CREATE2:
        reply_string_stat(&r, ZNONODE, NULL, stat_of(0, 0, 0, 0));
        break;
    case C_CREATE:
    case C_SYNC:
    case C_AUTH:
        reply_string(&r, ZNONODE, NULL);
        break;
    }
}

static void close_world(zklock_session_t *s, zklock_t *l)
{
    W.serve = answer_the_rest; /* zklock_free waits for a held node's delete */
    zklock_free(l);
    zklock_session_close(s);
    W.serve = NULL;
}

static zkl_contender_t *contender_of(zklock_t *l)
{
    return l->contenders;
}

static int phase_of(zklock_t *l)
{
    return l->contenders ? (int)l->contenders->phase : -1;
}

/* The create and the listing the engine sends back to back; *node: the
 * name the create asked for (its prefix), to answer with. */
static bool expect_create_and_list(struct req *create, struct req *list)
{
    return take(C_CREATE2, LOCK "/_c_", create) && take(C_CHILDREN2, LOCK, list);
}

/* The name ZooKeeper gives a sequential node: the path asked plus seq. */
static const char *numbered(const struct req *create, int seq, char *buf, size_t size)
{
    snprintf(buf, size, "%s%010d", create->path, seq);
    return buf;
}

/* ---- the cases ---------------------------------------------------------------------------- */

/* A free lock: one create, one listing that shows only our node: held, and
 * the caller told once. A release deletes the node and is told too. */
static void case_grant(void)
{
    zklock_t *l;
    zklock_session_t *s = open_world(&l);
    struct outcome acq = {0}, rel = {0};
    struct req create, list, del;
    char name[600];

    TU_ASSERT_RC(zklock_acquire_async(l, -1, done, &acq), ZKLOCK_OK);
    TU_ASSERT_INT(phase_of(l), ==, ZKL_QUEUING);
    if (!expect_create_and_list(&create, &list))
        return;
    TU_ASSERT_INT(create.flags, ==, ZOO_EPHEMERAL_SEQUENTIAL);
    numbered(&create, 0, name, sizeof name);
    reply_string_stat(&create, ZOK, name, stat_of(100, 0x1001, 0, 0));
    TU_ASSERT_INT(phase_of(l), ==, ZKL_QUEUING); /* the listing decides */
    const char *kids[] = {basename_of(name)};
    reply_children(&list, ZOK, kids, 1, stat_of(90, 0, 1, 1));
    TU_ASSERT_INT(phase_of(l), ==, ZKL_HELD);
    TU_ASSERT_INT(acq.calls, ==, 0); /* told through the callback queue */
    TU_ASSERT_INT(zklock_session_dispatch(s), ==, 1);
    TU_ASSERT_INT(acq.calls, ==, 1);
    TU_ASSERT_RC(acq.rc, ZKLOCK_OK);
    TU_ASSERT_INT(contender_of(l)->czxid, ==, 100);

    TU_ASSERT_RC(zklock_release_async(l, done, &rel), ZKLOCK_OK);
    if (!take(C_DELETE, name, &del))
        return;
    reply_void(&del, ZOK);
    zklock_session_dispatch(s);
    TU_ASSERT_INT(rel.calls, ==, 1);
    TU_ASSERT_RC(rel.rc, ZKLOCK_OK);
    TU_ASSERT_INT(W.n, ==, 0); /* nothing else was sent */
    close_world(s, l);
}

/* Refusals: a create the server refuses (no permission) fails the
 * acquisition with that code, with nothing left to delete; a try-once
 * behind a holder gives up (busy) and deletes its node first. */
static void case_refusals(void)
{
    zklock_t *l;
    zklock_session_t *s = open_world(&l);
    struct outcome acq = {0}, busy = {0};
    struct req create, list, del;
    char name[600];

    TU_ASSERT_RC(zklock_acquire_async(l, -1, done, &acq), ZKLOCK_OK);
    if (!expect_create_and_list(&create, &list))
        return;
    reply_string_stat(&create, ZNOAUTH, NULL, stat_of(0, 0, 0, 0));
    reply_children(&list, ZOK, NULL, 0, stat_of(90, 0, 0, 0));
    zklock_session_dispatch(s);
    TU_ASSERT_INT(acq.calls, ==, 1);
    TU_ASSERT_RC(acq.rc, ZNOAUTH);
    TU_ASSERT_INT(W.n, ==, 0);

    TU_ASSERT_RC(zklock_acquire_async(l, 0, done, &busy), ZKLOCK_OK);
    if (!expect_create_and_list(&create, &list))
        return;
    numbered(&create, 7, name, sizeof name);
    reply_string_stat(&create, ZOK, name, stat_of(100, 0x1001, 0, 0));
    const char *kids[] = {"_c_00000000-0000-4000-8000-000000000000-lock-0000000006",
                          basename_of(name)};
    reply_children(&list, ZOK, kids, 2, stat_of(90, 0, 14, 2));
    TU_ASSERT_INT(phase_of(l), ==, ZKL_LEAVING);
    TU_ASSERT_INT(busy.calls, ==, 0); /* not before its node is gone */
    if (!take(C_DELETE, name, &del))
        return;
    reply_void(&del, ZOK);
    zklock_session_dispatch(s);
    TU_ASSERT_INT(busy.calls, ==, 1);
    TU_ASSERT_RC(busy.rc, ZKLOCK_EBUSY);
    close_world(s, l);
}

/* A lost reply: the create's answer is lost with the connection; back on
 * the same session, the engine syncs and lists to look for its node by
 * its prefix, asks whose it is, and holds by it (no second node), once a
 * heartbeat proved the session (no write of it was answered yet). */
static void case_lost_reply(void)
{
    zklock_t *l;
    zklock_session_t *s = open_world(&l);
    struct outcome acq = {0};
    struct req create, list, sync, relist, owner, list3, heartbeat;
    char name[600];

    TU_ASSERT_RC(zklock_acquire_async(l, -1, done, &acq), ZKLOCK_OK);
    if (!expect_create_and_list(&create, &list))
        return;
    numbered(&create, 3, name, sizeof name); /* made, but nobody hears it */
    session_state(0, ZOO_CONNECTING_STATE);
    reply_string_stat(&create, ZCONNECTIONLOSS, NULL, stat_of(0, 0, 0, 0));
    reply_children(&list, ZCONNECTIONLOSS, NULL, 0, stat_of(0, 0, 0, 0));
    TU_ASSERT_INT(W.n, ==, 0); /* nothing while disconnected */
    TU_ASSERT_INT(contender_of(l)->create_unknown, ==, true);
    session_state(0, ZOO_CONNECTED_STATE); /* the same session */
    if (!take(C_SYNC, LOCK, &sync) || !take(C_CHILDREN2, LOCK, &relist))
        return;
    reply_string(&sync, ZOK, LOCK);
    const char *kids[] = {basename_of(name)};
    reply_children(&relist, ZOK, kids, 1, stat_of(90, 0, 7, 1));
    if (!take(C_GET, name, &owner))
        return;
    reply_data(&owner, ZOK, "me", stat_of(120, 0x1001, 0, 0));
    if (!take(C_CHILDREN2, LOCK, &list3))
        return;
    reply_children(&list3, ZOK, kids, 1, stat_of(90, 0, 7, 1));
    /* Its turn, but no write of this session was answered yet (the create's
     * answer was lost): a heartbeat proves the session first. */
    TU_ASSERT_INT(phase_of(l), ==, ZKL_GRANTING);
    if (!take(C_SET, "/", &heartbeat))
        return;
    reply_stat(&heartbeat, ZBADVERSION, stat_of(0, 0, 0, 0)); /* refused, committed */
    TU_ASSERT_INT(phase_of(l), ==, ZKL_HELD);
    zklock_session_dispatch(s);
    TU_ASSERT_RC(acq.rc, ZKLOCK_OK);
    TU_ASSERT_INT(contender_of(l)->czxid, ==, 120);
    TU_ASSERT_INT(W.n, ==, 0); /* no create again */
    close_world(s, l);
}

/* A predecessor: the listing shows a node ahead of ours; the engine
 * watches it (one get with a watch, nothing else), and its delete makes
 * ours the turn without another listing (it was the only one ahead). */
static void case_predecessor_deleted(void)
{
    zklock_t *l;
    zklock_session_t *s = open_world(&l);
    struct outcome acq = {0};
    struct req create, list, watch;
    char name[600], ahead[600];
    const char *other = "_c_00000000-0000-4000-8000-000000000000-lock-0000000004";

    TU_ASSERT_RC(zklock_acquire_async(l, -1, done, &acq), ZKLOCK_OK);
    if (!expect_create_and_list(&create, &list))
        return;
    numbered(&create, 5, name, sizeof name);
    reply_string_stat(&create, ZOK, name, stat_of(100, 0x1001, 0, 0));
    const char *kids[] = {basename_of(name), other};
    reply_children(&list, ZOK, kids, 2, stat_of(90, 0, 10, 2));
    snprintf(ahead, sizeof ahead, LOCK "/%s", other);
    if (!take(C_GET, ahead, &watch))
        return;
    CU_ASSERT(watch.watcher != NULL);
    reply_data(&watch, ZOK, "peer", stat_of(80, 0x2002, 0, 0));
    TU_ASSERT_INT(phase_of(l), ==, ZKL_QUEUING);
    TU_ASSERT_INT(W.n, ==, 0);
    node_event(ZOO_DELETED_EVENT, ahead);
    TU_ASSERT_INT(phase_of(l), ==, ZKL_HELD);
    TU_ASSERT_INT(W.n, ==, 0); /* no listing: it was the only one ahead */
    zklock_session_dispatch(s);
    TU_ASSERT_RC(acq.rc, ZKLOCK_OK);
    close_world(s, l);
}

/* A tracking turn whose node an operator deletes while its read of the
 * record is in flight queues again; the read's answer, served for the turn
 * that is over, is no view for the next: the new node's turn reads the
 * record again. (Judged on the old view, it named a holder that had
 * released since as UNCLEAN, and waited a lock-delay for nothing: found by
 * the model, BROKEN_STALE_READ.) */
static void case_stale_record_read(void)
{
    zklock_t *l;
    zklock_session_t *s = open_world_with(
        &l, &(zklock_opts_t){.owner = ZKLOCK_OWNER_HANDLE, .track_previous = 1});
    struct outcome acq = {0};
    struct req create, list, own, read, create2, list2, read2;
    struct timespec next;
    char name[600], name2[600];

    TU_ASSERT_RC(zklock_acquire_async(l, -1, done, &acq), ZKLOCK_OK);
    if (!expect_create_and_list(&create, &list))
        return;
    numbered(&create, 0, name, sizeof name);
    reply_string_stat(&create, ZOK, name, stat_of(100, 0x1001, 0, 0));
    W.now_ms += 60; /* its node old enough for the own-node watch */
    zklock__session_turn(s, &next);
    if (!take(C_GET, name, &own))
        return;
    CU_ASSERT(own.watcher != NULL);
    reply_data(&own, ZOK, "me", stat_of(100, 0x1001, 0, 0));
    const char *kids[] = {basename_of(name)};
    reply_children(&list, ZOK, kids, 1, stat_of(90, 0, 1, 1));
    TU_ASSERT_INT(phase_of(l), ==, ZKL_GRANTING);
    if (!take(C_GET, LOCK "/zklock.previous", &read))
        return;
    node_event(ZOO_DELETED_EVENT, name); /* the operator: its turn is over */
    reply_data(&read, ZOK, "2 held 150 1 0 10000 - peer", stat_of(150, 0, 0, 0));
    TU_ASSERT_INT(phase_of(l), ==, ZKL_QUEUING);
    if (!expect_create_and_list(&create2, &list2))
        return;
    numbered(&create2, 3, name2, sizeof name2);
    reply_string_stat(&create2, ZOK, name2, stat_of(300, 0x1001, 0, 0));
    const char *kids2[] = {"zklock.previous", basename_of(name2)};
    reply_children(&list2, ZOK, kids2, 2, stat_of(90, 0, 6, 2));
    TU_ASSERT_INT(phase_of(l), ==, ZKL_GRANTING);
    if (!take(C_GET, LOCK "/zklock.previous", &read2))
        return; /* (before: the multi that writes "held", on the old view) */
    reply_data(&read2, ZOK, "2 released 150 1 0 10000 - peer", stat_of(150, 0, 1, 0));
    close_world(s, l);
}

/* Expiry mid-step: the session expires with the create and the listing
 * in flight; their answers come late, from the old handle, and would grant
 * the lock: they count for nothing. On the next session the client
 * refuses the first create (its connection just went): the step backs
 * off, and the session thread's retry timer starts it again; it holds by a
 * new node. */
static void case_expiry_mid_step(void)
{
    zklock_t *l;
    zklock_session_t *s = open_world(&l);
    struct outcome acq = {0};
    struct req create, list, create2, list2;
    char name[600], name2[600];
    struct timespec next;

    TU_ASSERT_RC(zklock_acquire_async(l, -1, done, &acq), ZKLOCK_OK);
    if (!expect_create_and_list(&create, &list))
        return;
    session_state(0, ZOO_EXPIRED_SESSION_STATE);
    numbered(&create, 1, name, sizeof name);
    reply_string_stat(&create, ZOK, name, stat_of(100, 0x1001, 0, 0));
    const char *kids1[] = {basename_of(name)};
    reply_children(&list, ZOK, kids1, 1, stat_of(90, 0, 2, 1));
    TU_ASSERT_INT(phase_of(l), ==, ZKL_QUEUING); /* not granted by an old answer */
    zklock_session_dispatch(s);
    TU_ASSERT_INT(acq.calls, ==, 0); /* a waiter is not told: it queues again */
    TU_ASSERT_INT(W.n, ==, 0);

    W.refuse = ZCONNECTIONLOSS; /* the next session's first create */
    zklock__session_turn(s, &next); /* the old handle closed, a new one opened */
    TU_REQUIRE_RC(W.nzh, 2);
    TU_ASSERT_INT(W.zh[0].closed, ==, true);
    session_state(1, ZOO_CONNECTED_STATE);
    TU_ASSERT_INT(W.n, ==, 0); /* refused, and backing off */
    W.now_ms += 100;           /* the retry timer (ZKL_RETRY_MS) */
    zklock__session_turn(s, &next);
    if (!expect_create_and_list(&create2, &list2))
        return;
    CU_ASSERT(strncmp(create2.path, create.path, strlen(create.path)) != 0); /* a new name */
    numbered(&create2, 2, name2, sizeof name2);
    reply_string_stat(&create2, ZOK, name2, stat_of(200, 0x1002, 0, 0));
    const char *kids2[] = {basename_of(name2)};
    reply_children(&list2, ZOK, kids2, 1, stat_of(90, 0, 6, 1));
    TU_ASSERT_INT(phase_of(l), ==, ZKL_HELD);
    zklock_session_dispatch(s);
    TU_ASSERT_INT(acq.calls, ==, 1);
    TU_ASSERT_RC(acq.rc, ZKLOCK_OK);
    TU_ASSERT_INT(contender_of(l)->czxid, ==, 200);
    close_world(s, l);
}

/* A revocation's write waits for its answer while the session expires and
 * the session thread replaces the handle: the write, made asynchronously
 * on the handle of the moment, ends with the handle's close (the session
 * expired), and nothing touches the closed handle. (Before, zklock_revoke
 * called zoo_set on a handle it had not borrowed: an expiry meanwhile
 * closed it under the call; here, the old code's zoo_set on this wire's
 * handle crashes the case.) */
static int revoke_moves;
static zklock_session_t *revoke_session;

static void revoke_world(void)
{
    struct req r;
    struct timespec next;
    const char *holder = "_c_00000000-0000-4000-8000-000000000000-lock-0000000001";

    switch (revoke_moves++) {
    case 0: /* the queue read: its listing, then the holder's data */
        if (take(C_CHILDREN2, LOCK, &r)) {
            const char *kids[] = {holder};
            reply_children(&r, ZOK, kids, 1, stat_of(90, 0, 2, 1));
        }
        break;
    case 1:
        if (take(C_GET, LOCK "/_c_", &r))
            reply_data(&r, ZOK, "peer", stat_of(80, 0x2002, 0, 0));
        break;
    case 2: /* the write went out: the session expires before its answer */
        CU_ASSERT(W.n == 1 && W.q[0].call == C_SET);
        session_state(0, ZOO_EXPIRED_SESSION_STATE);
        zklock__session_turn(revoke_session, &next); /* closes handle 0, opens 1 */
        break;
    default:
        CU_FAIL("zklock_revoke waited on after its handle was closed");
        W.serve = NULL;
        break;
    }
}

static void case_revoke_through_expiry(void)
{
    zklock_t *l;
    zklock_session_t *s = open_world(&l);
    int asked = -1, rc;

    revoke_session = s;
    revoke_moves = 0;
    W.serve = revoke_world;
    rc = zklock_revoke(s, LOCK, &asked);
    W.serve = NULL;
    CU_ASSERT(rc == ZSESSIONEXPIRED || rc == ZCONNECTIONLOSS);
    TU_ASSERT_INT(asked, ==, 0);
    TU_ASSERT_INT(revoke_moves, ==, 3);
    TU_ASSERT_INT(W.zh[0].closed, ==, true);
    close_world(s, l);
}

/* The wire seeds the node names: two sessions on it make the same names
 * (a simulator replays a run from its seed). */
static void case_seeded_names(void)
{
    char first[512] = "";

    for (int run = 0; run < 2; run++) {
        zklock_t *l;
        zklock_session_t *s = open_world(&l);
        struct outcome acq = {0};
        TU_ASSERT_RC(zklock_acquire_async(l, -1, done, &acq), ZKLOCK_OK);
        CU_ASSERT_FATAL(W.n >= 1 && W.q[0].call == C_CREATE2); /* (left to close_world) */
        if (run == 0)
            snprintf(first, sizeof first, "%s", W.q[0].path);
        else
            CU_ASSERT_STRING_EQUAL(W.q[0].path, first);
        close_world(s, l);
    }
}

/* ---- the guards, in every build --------------------------------------------------------- */

static zklock_session_t *guard_session;

/* Inside a step (the engine's create, sent from the driver): an entry. */
static void enter_driver(void)
{
    zklock__drive(guard_session);
}

/* Inside a step: a transition the table does not have (QUEUING -> LOST). */
static void bad_transition(void)
{
    for (zkl_contender_t *c = guard_session->contenders; c; c = c->sess_next)
        zklock__set_phase(c, ZKL_LOST, "forced by the test");
}

/* Runs an acquisition whose first request runs `inside` from the step, in
 * a child process: it must abort with an internal error on stderr. */
static void expect_internal_error(void (*inside)(void), const char *what)
{
    int fds[2], status;
    char out[2048] = "";
    ssize_t n, got = 0;
    pid_t pid;

    CU_ASSERT_FATAL(pipe(fds) == 0);
    fflush(NULL);
    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        zklock_t *l;
        struct outcome acq = {0};
        close(fds[0]);
        dup2(fds[1], 2);
        guard_session = open_world(&l);
        W.inside = inside;
        zklock_acquire_async(l, -1, done, &acq);
        _exit(0); /* not refused: the test fails */
    }
    close(fds[1]);
    while ((n = read(fds[0], out + got, sizeof out - 1 - (size_t)got)) > 0)
        got += n;
    close(fds[0]);
    CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
    CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CU_ASSERT(strstr(out, "zklock: internal error: ") != NULL);
    CU_ASSERT(strstr(out, what) != NULL);
}

static void case_guard_reentry(void)
{
    expect_internal_error(enter_driver, "the driver was entered while it ran");
}

static void case_guard_transition(void)
{
    expect_internal_error(bad_transition, "QUEUING -> LOST: not a transition of the table");
}

const tu_test_t zklock__unit_engine_tests[] = {
    {"engine_grant", case_grant},
    {"engine_refusals", case_refusals},
    {"engine_lost_reply", case_lost_reply},
    {"engine_predecessor_deleted", case_predecessor_deleted},
    {"engine_stale_record_read", case_stale_record_read},
    {"engine_expiry_mid_step", case_expiry_mid_step},
    {"revoke_through_expiry", case_revoke_through_expiry},
    {"seeded_names", case_seeded_names},
    {"guard_driver_reentry", case_guard_reentry},
    {"guard_invalid_transition", case_guard_transition},
    {NULL, NULL},
};
