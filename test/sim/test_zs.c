/*
 * test_zs.c: the simulated ZooKeeper (zs.h) against what ZooKeeper 3.8 and
 * its C client do, one behaviour per test: sequence numbers, Stat fields,
 * ephemeral and container nodes, ACL refusals, one-shot watches and their
 * order against answers, multi (all or nothing, the C client's results),
 * session expiry, connection loss with requests in flight (applied or not),
 * a lagging follower (behind, never behind its client), operator deletes,
 * throttled answers, watches set again after a reconnection.
 * Each test runs a fresh world; `test_zs NAME` runs one.
 */
#include "zs.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static const char *current;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, current, \
                    #cond);                                                                \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)
#define CHECK_INT(a, b)                                                                    \
    do {                                                                                   \
        long long a_ = (long long)(a), b_ = (long long)(b);                                \
        if (a_ != b_) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s = %lld, expected %s = %lld\n", __FILE__,       \
                    __LINE__, current, #a, a_, #b, b_);                                    \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)
#define CHECK_STR(a, b)                                                                    \
    do {                                                                                   \
        const char *a_ = (a), *b_ = (b);                                                   \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                           \
            fprintf(stderr, "%s:%d: %s: %s = \"%s\", expected \"%s\"\n", __FILE__,         \
                    __LINE__, current, #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)");        \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

/* ---- a scripted client: what it heard, in order -------------------------------------- */

#define LOG_MAX 512
static char heard[LOG_MAX][300];
static int nheard;

static void note(const char *fmt, ...)
{
    va_list ap;

    if (nheard >= LOG_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(heard[nheard++], sizeof heard[0], fmt, ap);
    va_end(ap);
}

/* The index of the first line starting with prefix, or -1. */
static int heard_at(const char *prefix)
{
    for (int i = 0; i < nheard; i++)
        if (strncmp(heard[i], prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}

static int heard_count(const char *prefix)
{
    int n = 0;

    for (int i = 0; i < nheard; i++)
        n += strncmp(heard[i], prefix, strlen(prefix)) == 0;
    return n;
}

static void global_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    note("global %d type %d state %d path %s", zs_handle_id(zh), type, state, path);
}

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    note("watch %s type %d state %d path %s", (const char *)ctx, type, state, path);
}

static void created(int rc, const char *value, const struct Stat *st, const void *data)
{
    note("create %s rc %d %s czxid %lld", (const char *)data, rc, value ? value : "-",
         st ? (long long)st->czxid : -1LL);
}

static void voided(int rc, const void *data)
{
    note("void %s rc %d", (const char *)data, rc);
}

static struct Stat last_stat;

static void statted(int rc, const struct Stat *st, const void *data)
{
    if (st)
        last_stat = *st;
    note("stat %s rc %d", (const char *)data, rc);
}

static void got(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
    if (st)
        last_stat = *st;
    note("get %s rc %d %.*s", (const char *)data, rc, value && len > 0 ? len : 1,
         value && len > 0 ? value : "-");
}

static void listed(int rc, const struct String_vector *v, const struct Stat *st, const void *data)
{
    char line[250] = "";

    if (st)
        last_stat = *st;
    for (int i = 0; v && i < v->count; i++) {
        strncat(line, " ", sizeof line - strlen(line) - 1);
        strncat(line, v->data[i], sizeof line - strlen(line) - 1);
    }
    note("children %s rc %d%s", (const char *)data, rc, line);
}

/* ---- the world ------------------------------------------------------------------------ */

static void run_for(int ms)
{
    sim_run_until(sim_now() + SIM_MS(ms));
}

static void world(uint64_t seed, int nprocs)
{
    sim_sched_init();
    zs_world_new(seed, nprocs);
    if (getenv("ZS_LOG"))
        zs_w->log_to = stderr;
    nheard = 0;
}

static void world_end(void)
{
    zs_world_free(zs_w);
    sim_sched_fini();
}

/* A client of proc, connected (to `server` if >= 0: the others cut). */
static zhandle_t *client(int proc, int timeout_ms, int server)
{
    zhandle_t *zh;

    for (int i = 0; server >= 0 && i < ZS_SERVERS; i++)
        zs_w->procs[proc].cut_from[i] = i != server;
    zs_w->current_proc = proc;
    zh = zs_init("sim", global_watcher, timeout_ms, NULL, NULL, 0);
    zs_w->current_proc = -1;
    for (int i = 0; i < 2000 && zs_state(zh) != ZOO_CONNECTED_STATE; i++)
        run_for(10);
    CHECK_INT(zs_state(zh), ZOO_CONNECTED_STATE);
    return zh;
}

static const struct zs_node *node(const char *path)
{
    return zs_tree_get(&zs_w->committed, path);
}

static void make(zhandle_t *zh, const char *path, int mode, const char *tag)
{
    CHECK_INT(zs_acreate2(zh, path, "x", 1, &ZOO_OPEN_ACL_UNSAFE, mode, created, tag), ZOK);
}

/* ---- the tests -------------------------------------------------------------------------- */

static void sequence_numbers_count_creations(void)
{
    world(1, 1);
    zhandle_t *zh = client(0, 4000, -1);

    make(zh, "/l", ZOO_CONTAINER, "l");
    make(zh, "/l/n-", ZOO_EPHEMERAL_SEQUENTIAL, "a");
    make(zh, "/l/n-", ZOO_EPHEMERAL_SEQUENTIAL, "b");
    run_for(50);
    CHECK(heard_at("create a rc 0 /l/n-0000000000") >= 0);
    CHECK(heard_at("create b rc 0 /l/n-0000000001") >= 0);
    /* deletions, failed creates, setData, a failed multi, a grandchild:
     * none counts */
    zs_adelete(zh, "/l/n-0000000000", -1, voided, "del");
    make(zh, "/l/n-0000000001", ZOO_EPHEMERAL, "exists");
    zs_aset(zh, "/l", "v", 1, -1, statted, "set");
    {
        zoo_op_t ops[2];
        zoo_op_result_t res[2];
        char buf[64];
        zoo_create_op_init(&ops[0], "/l/m-", "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, buf,
                           sizeof buf);
        zoo_check_op_init(&ops[1], "/nonesuch", -1);
        zs_amulti(zh, 2, ops, res, voided, "multi");
        make(zh, "/l/p", ZOO_PERSISTENT, "p");
        make(zh, "/l/p/q", ZOO_PERSISTENT, "grandchild");
        make(zh, "/l/n-", ZOO_EPHEMERAL_SEQUENTIAL, "c");
        run_for(50);
    }
    CHECK(heard_at("void del rc 0") >= 0);
    CHECK(heard_at("create exists rc -110") >= 0);
    CHECK(heard_at("void multi rc -101") >= 0);
    /* creations: n-0, n-1, p: the next is 3 */
    CHECK(heard_at("create c rc 0 /l/n-0000000003") >= 0);
    world_end();
}

static void stat_fields(void)
{
    world(2, 2);
    zhandle_t *zh = client(0, 4000, -1);
    const struct zs_node *l, *a;
    struct Stat st;

    make(zh, "/l", ZOO_CONTAINER, "l");
    make(zh, "/l/a", ZOO_EPHEMERAL, "a");
    make(zh, "/l/b", ZOO_EPHEMERAL, "b");
    run_for(50);
    zs_adelete(zh, "/l/b", -1, voided, "del");
    zs_aset(zh, "/l/a", "yy", 2, 0, statted, "set");
    zs_aset(zh, "/l/a", "zz", 2, 0, statted, "stale");
    run_for(50);
    CHECK(heard_at("stat set rc 0") >= 0);
    CHECK(heard_at("stat stale rc -103") >= 0); /* ZBADVERSION */
    l = node("/l");
    a = node("/l/a");
    CHECK(l && a);
    if (!l || !a)
        return world_end();
    zs_stat_of(l, &st);
    CHECK_INT(st.numChildren, 1);
    CHECK_INT(st.cversion, 2 * 2 - 1); /* two creations, one deletion */
    CHECK_INT(l->creations, 2);
    zs_stat_of(a, &st);
    CHECK_INT(st.version, 1);
    CHECK_INT(st.ephemeralOwner, zs_client_id(zh)->client_id);
    CHECK(st.mzxid > st.czxid);
    CHECK_INT(st.dataLength, 2);
    CHECK(st.ctime >= zs_w->epoch_ms && st.ctime <= zs_server_ms());
    /* the parent's pzxid: the last change of its children (b's delete) */
    zs_stat_of(l, &st);
    CHECK(st.pzxid > a->st.czxid);
    /* the create's answer carries the node's Stat */
    CHECK(heard_at("create a rc 0 /l/a czxid ") >= 0);
    world_end();
}

static void ephemerals_and_containers(void)
{
    world(3, 2);
    zhandle_t *zh = client(0, 4000, -1);

    make(zh, "/c", ZOO_CONTAINER, "c");
    make(zh, "/never", ZOO_CONTAINER, "never");
    make(zh, "/c/e", ZOO_EPHEMERAL, "e");
    make(zh, "/c/e/child", ZOO_PERSISTENT, "under-ephemeral");
    run_for(50);
    CHECK(heard_at("create under-ephemeral rc -108") >= 0); /* ZNOCHILDRENFOREPHEMERALS */
    zs_reap_containers();
    CHECK(node("/c") != NULL); /* not empty */
    CHECK(node("/never") != NULL);
    zs_close(zh);
    run_for(50);
    CHECK(node("/c/e") == NULL); /* the closed session's node */
    zs_reap_containers();
    CHECK(node("/c") == NULL);      /* empty after having had a child */
    CHECK(node("/never") != NULL);  /* never had one */
    world_end();
}

static void acl_refusals(void)
{
    world(4, 1);
    zhandle_t *zh = client(0, 4000, -1);

    make(zh, "/p", ZOO_PERSISTENT, "p");
    make(zh, "/p/x", ZOO_PERSISTENT, "x");
    run_for(50);
    zs_op_deny("/p", ZS_DENY_CREATE | ZS_DENY_DELETE);
    make(zh, "/p/y", ZOO_PERSISTENT, "y");
    zs_adelete(zh, "/p/x", -1, voided, "del");
    zs_aget(zh, "/p/x", 0, got, "read");
    run_for(50);
    CHECK(heard_at("create y rc -102") >= 0); /* ZNOAUTH */
    CHECK(heard_at("void del rc -102") >= 0);
    CHECK(heard_at("get read rc 0 x") >= 0);
    CHECK(node("/p/x") != NULL);
    world_end();
}

static void watches_are_one_shot_and_come_before_later_data(void)
{
    world(5, 2);
    zhandle_t *a = client(0, 4000, -1), *b = client(1, 4000, -1);

    make(a, "/w", ZOO_PERSISTENT, "w");
    run_for(50);
    zs_awget(a, "/w", watcher, "data", got, "first");
    zs_awget_children2(a, "/w", watcher, "kids", listed, "kids");
    zs_awexists(a, "/w/new", watcher, "exists", statted, "missing");
    run_for(50);
    CHECK(heard_at("stat missing rc -101") >= 0);
    zs_aset(b, "/w", "2", 1, -1, statted, "b-set");
    zs_aset(b, "/w", "3", 1, -1, statted, "b-set2");
    make(b, "/w/new", ZOO_PERSISTENT, "b-new");
    run_for(50);
    /* each watch fired once, though the node changed twice */
    CHECK_INT(heard_count("watch data type 3"), 1);          /* ZOO_CHANGED_EVENT */
    CHECK_INT(heard_count("watch exists type 1 "), 1);       /* ZOO_CREATED_EVENT */
    CHECK_INT(heard_count("watch kids type 4 "), 1);         /* ZOO_CHILD_EVENT */
    /* a read issued after the change sees it, after the event */
    zs_awget(a, "/w", watcher, "data2", got, "second");
    zs_aset(b, "/w", "4", 1, -1, statted, "b-set3");
    zs_aget(a, "/w", 0, got, "third");
    run_for(50);
    {
        int ev = heard_at("watch data2 type 3"), second = heard_at("get second rc 0 3"),
            third = heard_at("get third rc 0 4");
        /* the set may land before either read; if the watch was set on "3"
         * and the later read saw "4", the event came first */
        if (second >= 0 && third >= 0)
            CHECK(ev >= 0 && ev < third);
    }
    world_end();
}

static void event_precedes_data_on_the_same_session(void)
{
    /* Over many seeds: whenever the answer of a read shows the change, the
     * event of the watch set before it came first. */
    int shown = 0;

    for (uint64_t seed = 100; seed < 160; seed++) {
        world(seed, 2);
        zhandle_t *a = client(0, 4000, -1), *b = client(1, 4000, -1);
        make(a, "/o", ZOO_PERSISTENT, "o");
        run_for(20);
        nheard = 0;
        zs_awget(a, "/o", watcher, "o", got, "watching");
        run_for(5);
        zs_aset(b, "/o", "NEW", 3, -1, statted, "b");
        for (int i = 0; i < 6; i++) {
            zs_aget(a, "/o", 0, got, "read");
            run_for(1);
        }
        run_for(20);
        for (int i = 0; i < nheard; i++) {
            if (strncmp(heard[i], "get read rc 0 NEW", 17) == 0) {
                int ev = heard_at("watch o type 3");
                CHECK(ev >= 0 && ev < i);
                shown++;
                break;
            }
        }
        world_end();
    }
    CHECK(shown > 0);
}

static void multi_is_all_or_nothing(void)
{
    world(6, 1);
    zhandle_t *zh = client(0, 4000, -1);
    zoo_op_t ops[3];
    zoo_op_result_t res[3];
    char b0[64], b2[64];

    make(zh, "/m", ZOO_PERSISTENT, "m");
    run_for(50);
    zoo_create_op_init(&ops[0], "/m/a", "1", 1, &ZOO_OPEN_ACL_UNSAFE, 0, b0, sizeof b0);
    zoo_check_op_init(&ops[1], "/m/none", -1);
    zoo_create_op_init(&ops[2], "/m/b", "1", 1, &ZOO_OPEN_ACL_UNSAFE, 0, b2, sizeof b2);
    memset(res, 0x55, sizeof res);
    zs_amulti(zh, 3, ops, res, voided, "bad");
    run_for(50);
    CHECK(heard_at("void bad rc -101") >= 0);
    CHECK_INT(res[0].err, ZOK);
    CHECK_INT(res[1].err, ZNONODE);
    CHECK_INT(res[2].err, ZRUNTIMEINCONSISTENCY);
    CHECK(res[0].value == NULL && res[2].value == NULL); /* deserialize_multi on failure */
    CHECK(node("/m/a") == NULL && node("/m/b") == NULL);
    zoo_create_op_init(&ops[0], "/m/s-", "1", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, b0,
                       sizeof b0);
    zoo_check_op_init(&ops[1], "/m", -1);
    zoo_create_op_init(&ops[2], "/m/s-", "1", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE, b2,
                       sizeof b2);
    zs_amulti(zh, 3, ops, res, voided, "good");
    run_for(50);
    CHECK(heard_at("void good rc 0") >= 0);
    CHECK(res[0].value == b0 && res[2].value == b2);
    CHECK_STR(b0, "/m/s-0000000000");
    CHECK_STR(b2, "/m/s-0000000001");
    CHECK(node("/m/s-0000000001") && node("/m/s-0000000000") &&
          node("/m/s-0000000000")->st.czxid == node("/m/s-0000000001")->st.czxid);
    world_end();
}

static void session_expires_when_cut_off(void)
{
    world(7, 2);
    zhandle_t *zh = client(0, 2000, -1);
    int64_t id = zs_client_id(zh)->client_id;

    make(zh, "/e", ZOO_EPHEMERAL, "e");
    run_for(50);
    zs_cut(0, true);
    zs_aget(zh, "/e", 0, got, "cut");
    run_for(1500);
    /* told of the silence after 2/3 of the timeout, requests failed */
    CHECK(heard_at("global 0 type -1 state 1 ") >= 0); /* ZOO_CONNECTING_STATE */
    CHECK(heard_at("get cut rc -7") >= 0 || heard_at("get cut rc -4") >= 0);
    CHECK(zs_session_alive(id));
    run_for(1000);
    CHECK(!zs_session_alive(id));
    CHECK(node("/e") == NULL);
    zs_cut(0, false);
    run_for(1000);
    CHECK(heard_at("global 0 type -1 state -112 ") >= 0); /* expired, on reconnection */
    CHECK_INT(zs_state(zh), ZOO_EXPIRED_SESSION_STATE);
    CHECK_INT(zs_aget(zh, "/e", 0, got, "after"), ZINVALIDSTATE);
    world_end();
}

static void lost_requests_may_or_may_not_apply(void)
{
    int applied = 0, not_applied = 0;

    for (uint64_t seed = 200; seed < 300; seed++) {
        world(seed, 1);
        zhandle_t *zh = client(0, 3000, 0);
        make(zh, "/r", ZOO_PERSISTENT, "r");
        run_for(20);
        nheard = 0;
        make(zh, "/r/x", ZOO_PERSISTENT, "x");
        zs_crash(0); /* the connection goes with the request in flight */
        run_for(2);
        zs_restart(0);
        run_for(3000);
        CHECK(heard_at("create x rc -4") >= 0); /* ZCONNECTIONLOSS */
        if (node("/r/x"))
            applied++;
        else
            not_applied++;
        world_end();
    }
    /* a crash loses what the server had not served; what it had is applied:
     * across seeds, both */
    (void)applied;
    (void)not_applied;
    {
        int a2 = 0, n2 = 0;
        for (uint64_t seed = 300; seed < 400; seed++) {
            world(seed, 1);
            zhandle_t *zh = client(0, 3000, -1);
            make(zh, "/r", ZOO_PERSISTENT, "r");
            run_for(20);
            zs_cut(0, true);
            make(zh, "/r/x", ZOO_PERSISTENT, "x");
            run_for(2500); /* the client gives the connection up meanwhile */
            zs_cut(0, false);
            run_for(3000);
            if (node("/r/x"))
                a2++;
            else
                n2++;
            world_end();
        }
        CHECK(a2 > 0);
        CHECK(n2 > 0);
    }
}

static void lagging_follower_reads_behind_but_not_behind_its_client(void)
{
    world(8, 2);
    zs_lag(1, 1000); /* server 1 applies nothing unless made to */
    zhandle_t *f = client(0, 4000, 1), *l = client(1, 4000, 0);

    make(l, "/lag", ZOO_PERSISTENT, "leader-side");
    run_for(50);
    zs_aget(f, "/lag", 0, got, "stale");
    run_for(50);
    CHECK(heard_at("get stale rc -101") >= 0); /* not there yet, for the follower */
    make(f, "/own", ZOO_PERSISTENT, "own");
    zs_aget(f, "/own", 0, got, "own");
    zs_aget(f, "/lag", 0, got, "caught-up");
    run_for(50);
    CHECK(heard_at("get own rc 0 x") >= 0);        /* its own write */
    CHECK(heard_at("get caught-up rc 0 x") >= 0);  /* applied up to it, in order */
    /* A server behind what the client has seen refuses it. */
    zs_lag(2, 1000);
    make(f, "/later", ZOO_PERSISTENT, "later");
    run_for(50);
    zs_w->procs[0].cut_from[2] = false;
    zs_w->procs[0].cut_from[0] = true;
    zs_crash(1);
    run_for(300);
    CHECK(zs_state(f) != ZOO_CONNECTED_STATE); /* only server 2 reachable, and it lags */
    zs_lag(2, 0);
    zs_restart(1);
    run_for(6000);
    CHECK_INT(zs_state(f), ZOO_CONNECTED_STATE);
    world_end();
}

static void operator_delete_fires_watches(void)
{
    world(9, 1);
    zhandle_t *zh = client(0, 4000, -1);

    make(zh, "/d", ZOO_EPHEMERAL, "d");
    run_for(50);
    zs_awget(zh, "/d", watcher, "d", got, "d");
    run_for(50);
    CHECK(zs_op_delete("/d"));
    run_for(50);
    CHECK_INT(heard_count("watch d type 2 "), 1); /* ZOO_DELETED_EVENT */
    world_end();
}

static void throttled_answers_do_nothing(void)
{
    world(10, 1);
    zhandle_t *zh = client(0, 4000, 0);

    zs_throttle(0, sim_now() + SIM_MS(100), 1000);
    make(zh, "/t", ZOO_PERSISTENT, "t");
    run_for(50);
    CHECK(heard_at("create t rc -127") >= 0); /* ZTHROTTLEDOP */
    CHECK(node("/t") == NULL);
    run_for(100);
    make(zh, "/t", ZOO_PERSISTENT, "t2");
    run_for(50);
    CHECK(heard_at("create t2 rc 0") >= 0);
    world_end();
}

static void watches_set_again_after_reconnection(void)
{
    world(11, 2);
    zhandle_t *a = client(0, 4000, 0), *b = client(1, 4000, 1);

    make(b, "/s", ZOO_PERSISTENT, "s");
    make(b, "/s/k", ZOO_PERSISTENT, "k");
    run_for(50);
    zs_awget(a, "/s", watcher, "s-data", got, "s");
    zs_awget_children2(a, "/s", watcher, "s-kids", listed, "s");
    zs_awexists(a, "/s/new", watcher, "s-new", statted, "new");
    run_for(50);
    zs_cut_from(0, 0, true); /* a moves to another server */
    zs_cut_from(0, 1, false);
    zs_cut_from(0, 2, false);
    zs_aset(b, "/s", "changed", 7, -1, statted, "b");
    make(b, "/s/new", ZOO_PERSISTENT, "b-new");
    run_for(4000);
    CHECK_INT(zs_state(a), ZOO_CONNECTED_STATE);
    CHECK(zs_handle_server(a) != 0);
    /* what changed while it was away is told as the watches are set again */
    CHECK_INT(heard_count("watch s-data type 3 "), 1);
    CHECK_INT(heard_count("watch s-kids type 4 "), 1);
    CHECK_INT(heard_count("watch s-new type 1 "), 1);
    CHECK(heard_at("global 0 type -1 state 3 ") >= 0);
    world_end();
}

static void remove_watches_locally(void)
{
    world(12, 2);
    zhandle_t *a = client(0, 4000, -1), *b = client(1, 4000, -1);

    make(a, "/rw", ZOO_PERSISTENT, "rw");
    run_for(50);
    zs_awget(a, "/rw", watcher, "rw", got, "rw");
    run_for(50);
    CHECK_INT(zs_remove_watches(a, "/rw", ZWATCHTYPE_DATA, watcher, "other", 1), ZNOWATCHER);
    CHECK_INT(zs_remove_watches(a, "/rw", ZWATCHTYPE_DATA, watcher, "rw", 1), ZOK);
    CHECK_INT(zs_remove_watches(a, "/rw", ZWATCHTYPE_DATA, watcher, "rw", 1), ZNOWATCHER);
    zs_aset(b, "/rw", "z", 1, -1, statted, "b");
    run_for(50);
    CHECK_INT(heard_count("watch rw "), 0); /* the server's event finds no watcher */
    world_end();
}

static void leader_change_restarts_sessions(void)
{
    world(13, 1);
    zhandle_t *zh = client(0, 2000, -1);
    int64_t id = zs_client_id(zh)->client_id;

    zs_isolate(zs_w->leader, true);
    run_for(1500);
    CHECK(zs_session_alive(id));
    zs_isolate(0, false);
    zs_isolate(1, false);
    zs_isolate(2, false);
    run_for(3000);
    CHECK(zs_session_alive(id));
    CHECK_INT(zs_state(zh), ZOO_CONNECTED_STATE);
    world_end();
}

static const struct {
    const char *name;
    void (*fn)(void);
} tests[] = {
#define T(f) {#f, f}
    T(sequence_numbers_count_creations),
    T(stat_fields),
    T(ephemerals_and_containers),
    T(acl_refusals),
    T(watches_are_one_shot_and_come_before_later_data),
    T(event_precedes_data_on_the_same_session),
    T(multi_is_all_or_nothing),
    T(session_expires_when_cut_off),
    T(lost_requests_may_or_may_not_apply),
    T(lagging_follower_reads_behind_but_not_behind_its_client),
    T(operator_delete_fires_watches),
    T(throttled_answers_do_nothing),
    T(watches_set_again_after_reconnection),
    T(remove_watches_locally),
    T(leader_change_restarts_sessions),
#undef T
};

int main(int argc, char **argv)
{
    int ran = 0;

    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name) != 0)
            continue;
        current = tests[i].name;
        int before = failures;
        tests[i].fn();
        printf("%s: %s\n", failures == before ? "PASS" : "FAIL", current);
        ran++;
    }
    if (ran == 0) {
        fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    return failures ? 1 : 0;
}
