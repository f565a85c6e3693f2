/* test_faults.c: lost replies, connection loss and partitions, injected by a
 * proxy (zkproxy.c) between one client and the server. */
#include "testutil.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/proto.h>

#include "zkproxy.h"

/* A session through a fresh proxy, with callbacks recorded in ev. */
struct faulty {
    zkproxy_t *proxy;
    zklock_session_t *s;
    struct tu_events ev;
};

static void faulty_open_lease(struct faulty *f, int timeout_ms, int lease)
{
    zklock_session_opts_t o = {.timeout_ms = timeout_ms, .on_state = tu_on_state, .lease = lease};

    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->ev.mu, NULL);
    f->proxy = zkproxy_start(tu_server(1));
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->proxy);
    o.ctx = &f->ev;
    TU_REQUIRE_RC(zklock_session_open(&f->s, zkproxy_hosts(f->proxy), &o), ZKLOCK_OK);
}

static void faulty_open(struct faulty *f, int timeout_ms)
{
    faulty_open_lease(f, timeout_ms, ZKLOCK_LEASE_STRICT);
}

static void faulty_close(struct faulty *f)
{
    zklock_session_close(f->s);
    zkproxy_stop(f->proxy);
}

/* Cuts the connection and waits until the client knows. */
static void cut(struct faulty *f)
{
    zkproxy_cut(f->proxy);
    CU_ASSERT_FATAL(tu_wait_state(&f->ev, ZKLOCK_SUSPENDED));
}

static void restore(struct faulty *f)
{
    zkproxy_restore(f->proxy);
    CU_ASSERT(tu_wait_state(&f->ev, ZKLOCK_RECONNECTED));
}

/* The only child of path (caller frees), or NULL. */
static char *only_child(const char *path)
{
    int n;
    char **kids = tu_children(path, &n), *one = NULL;
    if (n == 1)
        one = strdup(kids[0]);
    tu_free_strings(kids);
    return one;
}

static int64_t owner_of(const char *path, const char *child)
{
    char full[512];
    struct Stat st;
    snprintf(full, sizeof full, "%s/%s", path, child);
    return zoo_exists(tu_zk(), full, 0, &st) == ZOK ? st.ephemeralOwner : -1;
}

/* ---- lost answers to credentials --------------------------------------------- */

/* Opens a session with one credential through a proxy that swallows the
 * server's answer to it and closes the connection: the C client sends the
 * credential again on its next connection, without telling its verdict. */
static int open_with_lost_auth_answer(zklock_session_t **s, zkproxy_t *proxy, zklock_auth_t *a)
{
    zklock_session_opts_t o = {.timeout_ms = 6000, .auth = a, .nauth = 1};

    zkproxy_drop_reply(proxy, ZOO_SETAUTH_OP);
    return zklock_session_open(s, zkproxy_hosts(proxy), &o);
}

/* Accepted credentials whose answer was lost are accepted: the open waits
 * for a request answered after they were sent again. */
static void test_lost_auth_answer(void)
{
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    zklock_auth_t alice = {"digest", "alice:secret", strlen("alice:secret")};
    const char *path = tu_path("lost-auth");
    zklock_session_t *s = NULL;
    zklock_t *l;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    TU_REQUIRE_RC(open_with_lost_auth_answer(&s, proxy, &alice), ZKLOCK_OK);
    TU_ASSERT_INT(zkproxy_dropped(proxy), ==, 1); /* the fault did happen */
    TU_ASSERT_INT(zkproxy_accepted(proxy), >=, 2);
    tu_make_lock_path(path);
    l = tu_mutex(s, path, NULL);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    zkproxy_stop(proxy);
    tu_assert_clean(path);
    zoo_delete(tu_zk(), path, -1);
}

/* A rejection whose answer was lost is still a rejection (it was once told
 * as the connection loss that overtook it). The server closes the connection
 * as it rejects: the proxy may see that close before the answer, and then
 * has nothing to drop (the next connection's rejection passes): the open is
 * tried again, a few times, until the answer was dropped. */
static void test_lost_auth_rejection(void)
{
    zklock_auth_t bogus = {"bogus", "x", 1};
    int dropped = 0;

    for (int try = 0; try < 5 && dropped == 0; try++) {
        zkproxy_t *proxy = zkproxy_start(tu_server(1));
        zklock_session_t *s = NULL;

        CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
        TU_ASSERT_RC(open_with_lost_auth_answer(&s, proxy, &bogus), ZAUTHFAILED);
        CU_ASSERT_PTR_NULL(s);
        dropped = zkproxy_dropped(proxy);
        zkproxy_stop(proxy);
    }
    TU_ASSERT_INT(dropped, ==, 1); /* the fault did happen */
}

/* ---- lost create replies -------------------------------------------------------- */

static void test_lost_create_reply(void)
{
    struct faulty f;
    const char *path = tu_path("lost-create");
    zklock_t *l;
    char *node;

    faulty_open(&f, 4000);
    tu_make_lock_path(path);
    l = tu_mutex(f.s, path, NULL);
    zkproxy_drop_reply(f.proxy, ZOO_CREATE2_OP);
    TU_ASSERT_RC(zklock_acquire(l, 20000), ZKLOCK_OK);
    TU_ASSERT_INT(zkproxy_dropped(f.proxy), ==, 1); /* the fault did happen */
    /* on_state runs on the session thread, so the acquire may return first. */
    CU_ASSERT(tu_wait_state(&f.ev, ZKLOCK_RECONNECTED));
    CU_ASSERT(!tu_saw_state(&f.ev, ZKLOCK_EXPIRED));
    /* One node, the one the lost create made, owned by our session. */
    node = only_child(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(node);
    TU_ASSERT_INT(owner_of(path, node), ==, zklock_session_id(f.s));
    free(node);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    CU_ASSERT(tu_no_children(path));
    zklock_free(l);
    faulty_close(&f);
    tu_assert_clean(path);
    zoo_delete(tu_zk(), path, -1);
}

static void test_lost_create_reply_while_waiting(void)
{
    struct faulty f;
    zklock_session_t *h = tu_session();
    const char *path = tu_path("lost-create-wait");
    zklock_t *lh = tu_mutex(h, path, NULL), *lw;
    struct tu_acquirer w;

    tu_make_lock_path(path);
    TU_REQUIRE_RC(zklock_acquire(lh, -1), ZKLOCK_OK);
    faulty_open(&f, 4000);
    lw = tu_mutex(f.s, path, NULL);
    zkproxy_drop_reply(f.proxy, ZOO_CREATE2_OP);
    tu_start_acquirer(&w, lw, 30000, true);
    /* The waiter finds its node again and waits in its place: no orphan. */
    CU_ASSERT(tu_wait_listings(f.s, 1));
    TU_ASSERT_INT(zkproxy_dropped(f.proxy), ==, 1);
    TU_ASSERT_INT(tu_count(path), ==, 2);
    TU_ASSERT_INT(tu_acquirer_done(&w), ==, 0);
    TU_ASSERT_RC(zklock_release(lh), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    CU_ASSERT(tu_no_children(path));
    zklock_free(lw);
    zklock_free(lh);
    faulty_close(&f);
    zklock_session_close(h);
    tu_assert_clean(path);
    zoo_delete(tu_zk(), path, -1);
}

static void test_lost_delete_reply(void)
{
    struct faulty f;
    const char *path = tu_path("lost-delete");
    zklock_t *l;

    faulty_open(&f, 4000);
    l = tu_mutex(f.s, path, NULL);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    zkproxy_drop_reply(f.proxy, ZOO_DELETE_OP);
    /* The delete happened; its answer is lost; the retry finds the node
     * gone, which is that delete's success. */
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    TU_ASSERT_INT(zkproxy_dropped(f.proxy), ==, 1);
    CU_ASSERT(tu_no_children(path));
    TU_ASSERT_RC(zklock_acquire(l, 5000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    faulty_close(&f);
    tu_assert_clean(path);
}

/* l, tracking, acquires and is told how the hold before it ended, and by
 * whom (token); then releases. */
static void next_reads(zklock_t *l, const char *how_name, int64_t token)
{
    int how = -1;
    int64_t told = -1;

    TU_REQUIRE_RC(zklock_acquire(l, 20000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_previous(l, &how, &told), ZKLOCK_OK);
    CU_ASSERT_STRING_EQUAL(zklock_previous_name(how), how_name);
    TU_ASSERT_INT(told, ==, token);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
}

/* A tracking test's end: nothing of ours left under path but the record,
 * which goes, and the path. */
static void forget_record(const char *path)
{
    char rec[512];

    tu_assert_clean(path);
    snprintf(rec, sizeof rec, "%s/zklock.previous", path);
    TU_ASSERT_INT(zoo_delete(tu_zk(), rec, -1), ==, ZOK);
    zoo_delete(tu_zk(), path, -1);
}

/* The previous holder's record (track_previous) across lost replies: the
 * reply to the grant's write (check + create/set, one multi) and to the
 * release's are swallowed; the client reconnects, reads the record again,
 * and finds its write there. The next holder learns a clean end, with the
 * token of the hold that lost both replies. */
static void test_lost_record_replies(void)
{
    struct faulty f;
    const char *path = tu_path("lost-record");
    zklock_opts_t o = {.track_previous = 1};
    zklock_session_t *other = tu_session();
    zklock_t *l, *next;
    char rec[512], data[256], want[64];
    int64_t token = 0;
    int how = -1;

    snprintf(rec, sizeof rec, "%s/zklock.previous", path);
    faulty_open(&f, 4000);
    l = tu_mutex(f.s, path, &o);
    next = tu_mutex(other, path, &o);
    zkproxy_drop_reply(f.proxy, ZOO_MULTI_OP);
    TU_REQUIRE_RC(zklock_acquire(l, 20000), ZKLOCK_OK);
    TU_ASSERT_INT(zkproxy_dropped(f.proxy), ==, 1); /* the fault did happen */
    TU_ASSERT_RC(zklock_fence(l, &token), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_previous(l, &how, NULL), ZKLOCK_OK);
    CU_ASSERT_STRING_EQUAL(zklock_previous_name(how), "none");
    snprintf(want, sizeof want, "2 held %lld ", (long long)token);
    TU_ASSERT_INT(tu_get(rec, data, sizeof data), >, 0);
    CU_ASSERT(strncmp(data, want, strlen(want)) == 0);
    zkproxy_drop_reply(f.proxy, ZOO_MULTI_OP);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    TU_ASSERT_INT(zkproxy_dropped(f.proxy), ==, 2);
    snprintf(want, sizeof want, "2 released %lld ", (long long)token);
    TU_ASSERT_INT(tu_get(rec, data, sizeof data), >, 0);
    CU_ASSERT(strncmp(data, want, strlen(want)) == 0);
    next_reads(next, "clean", token);
    zklock_free(l);
    zklock_free(next);
    zklock_session_close(other);
    faulty_close(&f);
    forget_record(path);
}

struct multi_sent {
    zkproxy_t *proxy;
    int before;
};

static bool multi_sent(void *arg)
{
    struct multi_sent *m = arg;
    return zkproxy_sent(m->proxy, ZOO_MULTI_OP) > m->before;
}

/* Review (issue 25): the record is removed (an operator retiring it,
 * zkCli's delete) after a grant read it and before its write: the write's
 * setData answers "no node". That is not a failed acquisition: the grant
 * reads again and creates the record. Every message through the proxy
 * takes a second, so the delete, sent straight to the server once the
 * write has left the client, lands between the two. */
static void test_record_removed_before_its_write(void)
{
    struct faulty f;
    const char *path = tu_path("record-removed");
    zklock_opts_t o = {.track_previous = 1, .owner = ZKLOCK_OWNER_HANDLE};
    zklock_t *l;
    struct tu_acquirer a;
    struct multi_sent m;
    char rec[512], data[256], want[64];
    int64_t token = 0;

    snprintf(rec, sizeof rec, "%s/zklock.previous", path);
    faulty_open(&f, 20000);
    l = tu_mutex(f.s, path, &o);
    TU_REQUIRE_RC(zklock_acquire(l, 20000), ZKLOCK_OK); /* the record exists */
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    m = (struct multi_sent){f.proxy, zkproxy_sent(f.proxy, ZOO_MULTI_OP)};
    zkproxy_set_delay(f.proxy, 1000, 1000);
    tu_start_acquirer(&a, l, 60000, false);
    CU_ASSERT_FATAL(tu_wait_until(multi_sent, &m, 60000)); /* the write is on its way */
    TU_ASSERT_INT(zoo_delete(tu_zk(), rec, -1), ==, ZOK);
    TU_ASSERT_RC(tu_join_acquirer(&a), ZKLOCK_OK);
    zkproxy_set_delay(f.proxy, 0, 0);
    TU_ASSERT_RC(zklock_fence(l, &token), ZKLOCK_OK);
    snprintf(want, sizeof want, "2 held %lld ", (long long)token);
    TU_ASSERT_INT(tu_get(rec, data, sizeof data), >, 0);
    CU_ASSERT(strncmp(data, want, strlen(want)) == 0);
    zklock_release(l);
    zklock_free(l);
    faulty_close(&f);
    tu_assert_clean(path);
    zoo_delete(tu_zk(), rec, -1);
    zoo_delete(tu_zk(), path, -1);
}

/* Review (issue 30): a tracking acquisition given up (canceled) while its
 * "held" write is on its way (every message through the proxy takes a
 * second): the write lands after the give-up, yet the hold was never the
 * caller's (ECANCELED). Its end must leave the record as it was before
 * that write (the dead holder's unclean end; its own number among those
 * that never held), so the next holder is told UNCLEAN with the dead
 * holder's token. (Its end wrote "released" in its own name: the next
 * holder read CLEAN, and would have skipped the recovery that an unclean
 * end asks for.) */
static void test_give_up_while_held_is_written(void)
{
    struct faulty f;
    const char *path = tu_path("give-up-held-write");
    zklock_opts_t o = {.track_previous = 1, .owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *w = tu_session(), *other = tu_session();
    zklock_t *l, *dying, *next;
    struct tu_acquirer a;
    struct multi_sent m;
    int64_t dead = 0;

    faulty_open(&f, 20000);
    l = tu_mutex(f.s, path, &o);
    dying = tu_mutex(w, path, &o);
    next = tu_mutex(other, path, &o);
    TU_REQUIRE_RC(zklock_acquire(dying, 20000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(dying, &dead), ZKLOCK_OK);
    tu_expire(w); /* dies holding: the record says "held" by it */
    TU_ASSERT_RC(zklock_release(dying), ZKLOCK_ELOST);
    m = (struct multi_sent){f.proxy, zkproxy_sent(f.proxy, ZOO_MULTI_OP)};
    zkproxy_set_delay(f.proxy, 1000, 1000);
    tu_start_acquirer(&a, l, 60000, false);
    CU_ASSERT_FATAL(tu_wait_until(multi_sent, &m, 60000)); /* "held" is on its way */
    TU_ASSERT_RC(zklock_cancel(l), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&a), ZKLOCK_ECANCELED);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
    zkproxy_set_delay(f.proxy, 0, 0);
    next_reads(next, "unclean", dead);
    zklock_free(l);
    zklock_free(dying);
    zklock_free(next);
    zklock_session_close(w);
    zklock_session_close(other);
    faulty_close(&f);
    forget_record(path);
}

static bool dropped_once(void *proxy)
{
    return zkproxy_dropped(proxy) >= 1;
}

/* Review (issue 30): the reply to the grant's "held" is lost, and the
 * connection stays down for 0.6 of the session timeout; back, the grant
 * reads the record, finds its write, and holds. The record promises the
 * next holder that this hold ends by its last write of it (the record's
 * mtime) plus a session timeout (design.md: the unclean end the lock-delay
 * runs from). The hold's own end (valid_until, which its record's lease
 * bounds) must not be later. (Its record's lease ran from the read's send
 * time, 0.6 T after the write: the hold outlived the promise by half a
 * session timeout.) And since that write is old by then, it is made again
 * before the hold begins, so that the hold starts on a fresh lease. */
static void test_lost_held_reply_keeps_the_bound(void)
{
    const int timeout = 8000; /* the cut, 0.6 T, leaves room to reconnect */
    struct faulty f;
    const char *path = tu_path("lost-held-bound");
    zklock_opts_t o = {.track_previous = 1, .owner = ZKLOCK_OWNER_HANDLE};
    zklock_t *l;
    struct tu_acquirer a;
    struct timespec until, boot, wall;
    struct Stat st;
    char rec[512];
    int64_t back, until_wall_ms;

    snprintf(rec, sizeof rec, "%s/zklock.previous", path);
    faulty_open(&f, timeout);
    l = tu_mutex(f.s, path, &o);
    zkproxy_drop_reply_and_cut(f.proxy, ZOO_MULTI_OP);
    tu_start_acquirer(&a, l, 30000, false);
    CU_ASSERT_FATAL(tu_wait_until(dropped_once, f.proxy, TU_WAIT_MS)); /* "held" landed */
    back = tu_now_ms() + timeout * 6 / 10;
    CU_ASSERT(tu_wait_until(tu_past, &back, timeout));
    zkproxy_restore(f.proxy);
    TU_REQUIRE_RC(tu_join_acquirer(&a), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_valid_until(l, &until), ZKLOCK_OK);
    clock_gettime(ZKLOCK_CLOCK, &boot);
    clock_gettime(CLOCK_REALTIME, &wall);
    until_wall_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000 +
                    (int64_t)(until.tv_sec - boot.tv_sec) * 1000 +
                    (until.tv_nsec - boot.tv_nsec) / 1000000;
    TU_REQUIRE_RC(zoo_exists(tu_zk(), rec, 0, &st), ZOK);
    TU_ASSERT_INT(until_wall_ms, <=, st.mtime + timeout + 20 /* the clocks' grain */);
    /* ... and it begins on a fresh one: "held" is written again first, not
     * granted with a lease that has less than half left. */
    TU_ASSERT_INT((int64_t)(until.tv_sec - boot.tv_sec) * 1000 +
                      (until.tv_nsec - boot.tv_nsec) / 1000000, >, timeout / 2);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    faulty_close(&f);
    forget_record(path);
}

/* A tracking holder A whose hold ends between its grant and its record's
 * write (its connection cut as its read of the record goes out, its node
 * deleted meanwhile): the record still says the hold before A released.
 * B, queued behind A, must not read that as CLEAN: A's node was the last to
 * block it, and A is not the record's holder: UNKNOWN. A's acquisition
 * fails and leaves no node. */
static void test_hold_ends_before_its_record(void)
{
    struct faulty f;
    const char *path = tu_path("record-race");
    zklock_opts_t o = {.track_previous = 1, .owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *other = tu_session();
    zklock_t *la, *lb;
    struct tu_acquirer a, b;
    char full[512], **kids;
    int n, how = -1;
    int64_t token = -1;

    faulty_open(&f, 4000);
    la = tu_mutex(f.s, path, &o);
    lb = tu_mutex(other, path, &o);
    TU_REQUIRE_RC(zklock_acquire(lb, 20000), ZKLOCK_OK); /* the record: "released" by B */
    TU_REQUIRE_RC(zklock_release(lb), ZKLOCK_OK);
    zkproxy_drop_reply_and_cut(f.proxy, ZOO_GETDATA_OP);
    tu_start_acquirer(&a, la, 20000, false);
    CU_ASSERT_FATAL(tu_wait_until(dropped_once, f.proxy, TU_WAIT_MS));
    tu_start_acquirer(&b, lb, 30000, false);
    CU_ASSERT_FATAL(tu_wait_children(path, 3)); /* the record, A's node, B's */
    kids = tu_children(path, &n);
    CU_ASSERT_FATAL(kids != NULL && n == 3);
    /* A's node sorts first among the lock nodes (after the names' prefixes:
     * pick by sequence, the lower one). */
    {
        const char *first = NULL;
        for (int i = 0; i < n; i++)
            if (strcmp(kids[i], "zklock.previous") != 0 &&
                (!first || strcmp(kids[i] + strlen(kids[i]) - 10, first + strlen(first) - 10) < 0))
                first = kids[i];
        snprintf(full, sizeof full, "%s/%s", path, first);
    }
    tu_free_strings(kids);
    TU_ASSERT_INT(zoo_delete(tu_zk(), full, -1), ==, ZOK); /* A's hold ends, unrecorded */
    TU_ASSERT_RC(tu_join_acquirer(&b), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_previous(lb, &how, &token), ZKLOCK_OK);
    CU_ASSERT_STRING_EQUAL(zklock_previous_name(how), "unknown"); /* never "clean" */
    TU_ASSERT_INT(token, ==, 0);
    zkproxy_restore(f.proxy);
    CU_ASSERT(tu_join_acquirer(&a) != ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(lb), ZKLOCK_OK);
    zklock_free(la);
    zklock_free(lb);
    zklock_session_close(other);
    faulty_close(&f);
    tu_assert_clean(path);
    snprintf(full, sizeof full, "%s/zklock.previous", path);
    TU_ASSERT_INT(zoo_delete(tu_zk(), full, -1), ==, ZOK);
    zoo_delete(tu_zk(), path, -1);
}

struct blocked_release {
    zklock_t *l;
    int rc, done; /* done: __atomic */
};

static void *blocked_release_main(void *arg)
{
    struct blocked_release *r = arg;
    r->rc = zklock_release(r->l);
    __atomic_store_n(&r->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static bool no_ephemerals(void *path)
{
    return tu_ephemerals(path) == 0;
}

/* Review (issue 25): zklock_free() while a tracking acquisition's turn
 * reads the record (its read dropped, the connection cut): the caller
 * inside zklock_acquire() returns (ECANCELED), nothing touches the freed
 * handle, and once the connection is back the engine deletes the node (the
 * free could not: it left it to the engine), well before the session could
 * expire. */
static void test_free_during_record(void)
{
    struct faulty f;
    const char *path = tu_path("free-record");
    zklock_opts_t o = {.track_previous = 1, .owner = ZKLOCK_OWNER_HANDLE};
    zklock_t *la;
    struct tu_acquirer a;
    char full[512];
    int64_t t0;

    faulty_open(&f, 30000);
    la = tu_mutex(f.s, path, &o);
    zkproxy_drop_reply_and_cut(f.proxy, ZOO_GETDATA_OP);
    tu_start_acquirer(&a, la, 20000, false);
    CU_ASSERT_FATAL(tu_wait_until(dropped_once, f.proxy, TU_WAIT_MS));
    zklock_free(la); /* A is inside zklock_acquire(la) */
    TU_ASSERT_RC(tu_join_acquirer(&a), ZKLOCK_ECANCELED);
    TU_ASSERT_INT(tu_ephemerals(path), ==, 1); /* disconnected: the engine's to delete */
    t0 = tu_now_ms();
    zkproxy_restore(f.proxy);
    CU_ASSERT(tu_wait_until(no_ephemerals, (void *)path, TU_WAIT_MS));
    TU_ASSERT_INT(tu_now_ms() - t0, <, 30000 / 2); /* not the session's expiry */
    faulty_close(&f);
    tu_assert_clean(path);
    snprintf(full, sizeof full, "%s/zklock.previous", path);
    zoo_delete(tu_zk(), full, -1);
    zoo_delete(tu_zk(), path, -1);
}

/* Review (issue 25): a handle-owned tracking hold, released by one thread
 * while another re-enters it. The release is one multi (the node's delete
 * and "released"; its reply dropped and the connection cut: it waits). A
 * re-entry meanwhile is not a hold (it used to be: holds 2, and the hold
 * went on under a record that said "released", so its unclean end read
 * clean); a blocking acquisition queues afresh, holds after the release,
 * and writes its own record. That new hold ends unclean (the session
 * closes, nobody releases): the next holder must be told UNCLEAN. */
static void test_reenter_during_release_record(void)
{
    struct faulty f;
    const char *path = tu_path("reenter-record");
    zklock_opts_t o = {.track_previous = 1, .owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *other = tu_session();
    struct blocked_release r = {NULL, -1, 0};
    struct tu_acquirer again;
    zklock_t *l, *next;
    pthread_t t;
    char full[512];
    int how = -1;

    faulty_open(&f, 8000);
    l = tu_mutex(f.s, path, &o);
    next = tu_mutex(other, path, &o);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    zkproxy_drop_reply_and_cut(f.proxy, ZOO_MULTI_OP);
    r.l = l;
    pthread_create(&t, NULL, blocked_release_main, &r);
    CU_ASSERT_FATAL(tu_wait_until(dropped_once, f.proxy, TU_WAIT_MS)); /* "released" sent */
    /* The hold is ending: a try-once is no hold (disconnected, it says
     * so at once), a blocking re-entry acquires afresh (a new hold, a new
     * record). */
    TU_ASSERT_RC(zklock_acquire(l, 0), ZCONNECTIONLOSS);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
    tu_start_acquirer(&again, l, 20000, false);
    zkproxy_restore(f.proxy);
    pthread_join(t, NULL);
    TU_ASSERT_RC(r.rc, ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&again), ZKLOCK_OK);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 1); /* the new hold */
    zklock_session_close(f.s); /* ... ends unclean: no release */
    TU_REQUIRE_RC(zklock_acquire(next, 20000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_previous(next, &how, NULL), ZKLOCK_OK);
    CU_ASSERT_STRING_EQUAL(zklock_previous_name(how), "unclean");
    TU_ASSERT_RC(zklock_release(next), ZKLOCK_OK);
    zklock_free(l);
    zklock_free(next);
    zklock_session_close(other);
    zkproxy_stop(f.proxy); /* f.s is closed (above) and freed with l */
    tu_assert_clean(path);
    snprintf(full, sizeof full, "%s/zklock.previous", path);
    TU_ASSERT_INT(zoo_delete(tu_zk(), full, -1), ==, ZOK);
    zoo_delete(tu_zk(), path, -1);
}

struct release_on_suspend {
    zklock_t *tracked; /* __atomic: set while callbacks may run */
    int rc;            /* __atomic */
};

static void release_on_suspend_state(zklock_session_t *s, int state, void *ctx)
{
    struct release_on_suspend *r = ctx;
    zklock_t *tracked = __atomic_load_n(&r->tracked, __ATOMIC_SEQ_CST);

    (void)s;
    if (state == ZKLOCK_SUSPENDED && tracked)
        __atomic_store_n(&r->rc, zklock_release(tracked), __ATOMIC_SEQ_CST);
}

/* Review (issue 25): the told-first promise across a tracking release made
 * in a callback. An application releases its tracking lock l1 when its
 * session is suspended (on_state, on the callback thread); its release
 * writes the record with ZooKeeper's synchronous calls, and waits for the
 * connection up to a session timeout. Another hold of the same session, l2,
 * must still be told its loss (on_lost, queued behind) before the session
 * timeout has passed since the cut: the server may expire it then. */
static void test_tracking_release_in_callback_told_first(void)
{
    const int timeout = 6000;
    const char *p1 = tu_path("cb-release-tracked"), *p2 = tu_path("cb-release-other");
    struct release_on_suspend r = {NULL, -1};
    zklock_session_opts_t so = {.timeout_ms = timeout, .on_state = release_on_suspend_state,
                                .ctx = &r, .lease = ZKLOCK_LEASE_STRICT};
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t o1 = {.track_previous = 1, .owner = ZKLOCK_OWNER_HANDLE};
    zklock_opts_t o2 = {.on_lost = tu_on_lost, .ctx = &lost};
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    zklock_session_t *s;
    zklock_t *l1, *l2;
    int64_t t0;
    char full[512];

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    TU_REQUIRE_RC(zklock_session_open(&s, zkproxy_hosts(proxy), &so), ZKLOCK_OK);
    l1 = tu_mutex(s, p1, &o1);
    l2 = tu_mutex(s, p2, &o2);
    TU_REQUIRE_RC(zklock_acquire(l1, 20000), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(l2, 20000), ZKLOCK_OK);
    __atomic_store_n(&r.tracked, l1, __ATOMIC_SEQ_CST);
    t0 = tu_now_ms();
    zkproxy_cut(proxy);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, 3 * timeout));
    pthread_mutex_lock(&lost.mu);
    TU_ASSERT_INT(lost.lost_at_ms - t0, <, timeout); /* told first */
    pthread_mutex_unlock(&lost.mu);
    zkproxy_restore(proxy);
    zklock_release(l2);
    zklock_free(l1);
    zklock_free(l2);
    zklock_session_close(s);
    zkproxy_stop(proxy);
    /* The session's close may not reach the server through the cut: its
     * nodes go at its expiry. */
    CU_ASSERT(tu_wait_children(p1, 1)); /* the record */
    CU_ASSERT(tu_wait_no_children(p2)); /* empty, or already reaped (a container) */
    tu_assert_clean(p1);
    tu_assert_clean(p2);
    snprintf(full, sizeof full, "%s/zklock.previous", p1);
    zoo_delete(tu_zk(), full, -1);
    zoo_delete(tu_zk(), p1, -1);
    zoo_delete(tu_zk(), p2, -1);
}

/* ---- connection loss, session alive ---------------------------------------------- */

static void test_hold_through_connection_loss(void)
{
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    const char *path = tu_path("hold-cut");
    zklock_t *l;
    char *before, *after;

    faulty_open(&f, 6000);
    l = tu_mutex(f.s, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    before = only_child(path);
    cut(&f);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 1); /* suspended, not lost */
    restore(&f);
    after = only_child(path);
    CU_ASSERT(before && after && strcmp(before, after) == 0);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 1);
    CU_ASSERT(!tu_lost_once(&lost));
    CU_ASSERT(!tu_saw_state(&f.ev, ZKLOCK_EXPIRED));
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    CU_ASSERT(tu_no_children(path));
    free(before);
    free(after);
    zklock_free(l);
    faulty_close(&f);
    tu_assert_clean(path);
}

static void test_wait_through_connection_loss(void)
{
    struct faulty f;
    zklock_session_t *h = tu_session();
    const char *path = tu_path("wait-cut");
    zklock_t *lh = tu_mutex(h, path, NULL), *lw;
    struct tu_acquirer w;
    char **kids, *mine = NULL, *now;
    int n;

    TU_REQUIRE_RC(zklock_acquire(lh, -1), ZKLOCK_OK);
    faulty_open(&f, 6000);
    lw = tu_mutex(f.s, path, NULL);
    tu_start_acquirer(&w, lw, 30000, false);
    CU_ASSERT(tu_wait_children(path, 2));
    kids = tu_children(path, &n);
    for (int i = 0; i < n; i++)
        if (owner_of(path, kids[i]) == zklock_session_id(f.s))
            mine = strdup(kids[i]);
    tu_free_strings(kids);
    cut(&f);
    TU_ASSERT_RC(zklock_release(lh), ZKLOCK_OK); /* while the waiter is away */
    restore(&f);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    now = only_child(path);
    CU_ASSERT(mine && now && strcmp(mine, now) == 0); /* same node: kept its place */
    free(mine);
    free(now);
    zklock_free(lw); /* releases the waiter's hold */
    CU_ASSERT(tu_no_children(path));
    zklock_free(lh);
    faulty_close(&f);
    zklock_session_close(h);
    tu_assert_clean(path);
}

struct releaser {
    zklock_t *l;
    int rc, done;
    pthread_t t;
};

static void *release_main(void *p)
{
    struct releaser *r = p;
    r->rc = zklock_release(r->l);
    __atomic_store_n(&r->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static bool released(void *p)
{
    return __atomic_load_n(&((struct releaser *)p)->done, __ATOMIC_SEQ_CST) != 0;
}

static void *acquire_then_release_later(void *p)
{
    struct releaser *r = p;
    r->rc = zklock_acquire(r->l, -1);
    return NULL;
}

static void test_release_during_connection_loss(void)
{
    struct faulty f;
    const char *path = tu_path("release-cut");
    zklock_t *l;
    struct releaser r = {0};

    faulty_open(&f, 8000);
    l = tu_mutex(f.s, path, NULL);
    /* The hold belongs to a thread: take it in the thread that releases. */
    r.l = l;
    pthread_create(&r.t, NULL, acquire_then_release_later, &r);
    pthread_join(r.t, NULL);
    TU_REQUIRE_RC(r.rc, ZKLOCK_OK);
    cut(&f);
    pthread_create(&r.t, NULL, release_main, &r);
    /* Deliberate fault window: the release must not return while the server
     * cannot confirm the delete, and the node must still be there. */
    CU_ASSERT(!tu_wait_until(released, &r, 1500));
    TU_ASSERT_INT(tu_count(path), ==, 1);
    restore(&f);
    pthread_join(r.t, NULL);
    TU_ASSERT_RC(r.rc, ZKLOCK_OK);
    CU_ASSERT(tu_no_children(path));
    zklock_free(l);
    faulty_close(&f);
    tu_assert_clean(path);
}

struct try_once {
    zklock_t *l;
    int timeout_ms, rc, done;
};

static void *try_main(void *p)
{
    struct try_once *t = p;
    t->rc = zklock_acquire(t->l, t->timeout_ms);
    __atomic_store_n(&t->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static bool tried(void *p)
{
    return __atomic_load_n(&((struct try_once *)p)->done, __ATOMIC_SEQ_CST) != 0;
}

static void test_acquire_while_disconnected(void)
{
    struct faulty f;
    const char *path = tu_path("acquire-cut");
    zklock_t *l;
    struct try_once t;
    pthread_t th;

    faulty_open(&f, 8000);
    l = tu_mutex(f.s, path, NULL);
    cut(&f);
    /* try-once answers at once (the proxy stays cut: it cannot wait for it) */
    t = (struct try_once){l, 0, 0, 0};
    pthread_create(&th, NULL, try_main, &t);
    CU_ASSERT(tu_wait_until(tried, &t, TU_WAIT_MS));
    pthread_join(th, NULL);
    TU_ASSERT_RC(t.rc, ZCONNECTIONLOSS);
    /* a waiting acquire waits for the connection within its deadline */
    TU_ASSERT_RC(zklock_acquire(l, 300), ZKLOCK_ETIMEDOUT);
    t = (struct try_once){l, 30000, 0, 0};
    pthread_create(&th, NULL, try_main, &t);
    zkproxy_restore(f.proxy);
    pthread_join(th, NULL);
    TU_ASSERT_RC(t.rc, ZKLOCK_OK);
    TU_ASSERT_INT(tu_count(path), ==, 1);
    zklock_free(l);
    CU_ASSERT(tu_no_children(path));
    faulty_close(&f);
    tu_assert_clean(path);
}

static void test_give_up_during_connection_loss(void)
{
    struct faulty f;
    zklock_session_t *h = tu_session();
    const char *path = tu_path("giveup-cut");
    zklock_t *lh = tu_mutex(h, path, NULL), *lw;
    struct tu_acquirer w;

    TU_REQUIRE_RC(zklock_acquire(lh, -1), ZKLOCK_OK);
    faulty_open(&f, 8000);
    lw = tu_mutex(f.s, path, NULL);
    tu_start_acquirer(&w, lw, 2500, false);
    CU_ASSERT(tu_wait_children(path, 2));
    cut(&f);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_ETIMEDOUT); /* the deadline holds */
    TU_ASSERT_INT(tu_count(path), ==, 2); /* its node cannot go yet */
    zkproxy_restore(f.proxy);
    CU_ASSERT(tu_wait_children(path, 1)); /* ...and goes once it can */
    TU_ASSERT_RC(zklock_release(lh), ZKLOCK_OK);
    zklock_free(lw);
    zklock_free(lh);
    faulty_close(&f);
    zklock_session_close(h);
    tu_assert_clean(path);
}

/* ---- partition longer than the session ------------------------------------------------ */

/* l's hold (token) was lost with its session, cut off: the lock moves on
 * to lo2 with a larger token; once the cut heals, l's release says it was
 * lost, and l takes the lock again on the new session. */
static void lock_moves_on(struct faulty *f, zklock_t *l, zklock_t *lo2, int64_t token)
{
    int64_t token2;

    TU_ASSERT_RC(zklock_acquire(lo2, 20000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(lo2, &token2), ZKLOCK_OK);
    TU_ASSERT_INT(token2, >, token);
    zkproxy_restore(f->proxy);
    CU_ASSERT(tu_wait_state(&f->ev, ZKLOCK_CONNECTED));
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_release(lo2), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(l, 20000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
}

static void test_partition_expires_locally(void)
{
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_session_t *other = tu_session();
    const char *path = tu_path("partition");
    zklock_t *l, *lo2 = tu_mutex(other, path, NULL);
    int64_t token;

    faulty_open(&f, 2000);
    l = tu_mutex(f.s, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(l, &token), ZKLOCK_OK);
    cut(&f);
    /* No server can tell the client. The holder is told first, when its
     * lease runs out (before the ensemble may expire the session); after a
     * whole session timeout cut off, the session expires too. */
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_UNSURE);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
    CU_ASSERT(tu_wait_state(&f.ev, ZKLOCK_EXPIRED));
    /* Meanwhile the ensemble expires the session and the lock moves on. */
    lock_moves_on(&f, l, lo2, token);
    zklock_free(l);
    zklock_free(lo2);
    faulty_close(&f);
    zklock_session_close(other);
    tu_assert_clean(path);
}

/* ---- the session lease (ZKLOCK_LEASE_SESSION) ------------------------------------ */

static int64_t ms_of(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000 + t->tv_nsec / 1000000;
}

static int64_t clock_ms(void)
{
    struct timespec now;
    clock_gettime(ZKLOCK_CLOCK, &now);
    return ms_of(&now);
}

/* No lease, so nothing ends the hold early: cut off, it lasts until zklock's
 * local expiry, a whole session timeout after the connection went, and
 * on_lost then says the session expired (the strict lease would have told
 * ZKLOCK_LOST_UNSURE a twentieth earlier than the ensemble may expire it).
 * zklock_valid_until() says so: connected, a timeout from now; cut off, the
 * local expiry, which no longer moves. */
#define SESSION_LEASE_CUT_MS 4000

static void test_session_lease_expires_locally(void)
{
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_session_t *other = tu_session();
    const char *path = tu_path("session-lease-cut");
    zklock_t *l, *lo2 = tu_mutex(other, path, NULL);
    struct timespec until, again;
    int64_t token, asked;

    faulty_open_lease(&f, SESSION_LEASE_CUT_MS, ZKLOCK_LEASE_SESSION);
    l = tu_mutex(f.s, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(l, &token), ZKLOCK_OK);
    asked = clock_ms();
    TU_ASSERT_RC(zklock_valid_until(l, &until), ZKLOCK_OK);
    TU_ASSERT_INT(ms_of(&until) - asked, >=, SESSION_LEASE_CUT_MS);
    TU_ASSERT_INT(ms_of(&until) - clock_ms(), <=, SESSION_LEASE_CUT_MS);
    cut(&f);
    asked = clock_ms();
    TU_ASSERT_RC(zklock_valid_until(l, &until), ZKLOCK_OK);
    TU_ASSERT_INT(ms_of(&until) - asked, <=, SESSION_LEASE_CUT_MS);
    TU_ASSERT_RC(zklock_valid_until(l, &again), ZKLOCK_OK);
    TU_ASSERT_INT(ms_of(&again), ==, ms_of(&until));
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_INT(clock_ms(), >=, ms_of(&until)); /* not before the local expiry */
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_EXPIRED);
    CU_ASSERT(tu_saw_state(&f.ev, ZKLOCK_EXPIRED));
    TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
    TU_ASSERT_RC(zklock_valid_until(l, &until), ZKLOCK_ENOTHELD);
    /* The ensemble expires the session too, and the lock moves on, with a
     * larger token. */
    lock_moves_on(&f, l, lo2, token);
    zklock_free(l);
    zklock_free(lo2);
    faulty_close(&f);
    zklock_session_close(other);
    tu_assert_clean(path);
}

/* A server says the session expired: its holds end, on_lost says so, and
 * the next session's acquisitions work as before. */
static void test_session_lease_server_expiry(void)
{
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_session_opts_t o = {.timeout_ms = SESSION_LEASE_CUT_MS, .lease = ZKLOCK_LEASE_SESSION};
    zklock_session_t *s = tu_session_opts(&o);
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    const char *path = tu_path("session-lease-expiry");
    zklock_t *l = tu_mutex(s, path, &lo);
    int64_t token;

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    tu_expire(s);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_EXPIRED);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
    TU_ASSERT_RC(zklock_fence(l, &token), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_acquire(l, 20000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* The lease runs out while cut off, but the session lives on (the cut ends
 * before the ensemble expires it): the hold reported lost never comes back,
 * its node is deleted as the session reconnects. */
static void test_lease_lost_session_lives(void)
{
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    const char *path = tu_path("lease-lives");
    struct timespec until, now;
    int64_t id;
    zklock_t *l;
    char *node, full[512];

    faulty_open(&f, 10000);
    l = tu_mutex(f.s, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_valid_until(l, &until), ZKLOCK_OK);
    clock_gettime(ZKLOCK_CLOCK, &now);
    TU_ASSERT_INT(until.tv_sec - now.tv_sec, >=, 8); /* about 0.95 x 10 s ahead */
    id = zklock_session_id(f.s);
    node = only_child(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(node);
    snprintf(full, sizeof full, "%s/%s", path, node);
    free(node);
    cut(&f);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_UNSURE);
    TU_ASSERT_RC(zklock_valid_until(l, &until), ZKLOCK_ENOTHELD);
    zkproxy_restore(f.proxy); /* within the last twentieth of the session timeout */
    CU_ASSERT(tu_wait_state(&f.ev, ZKLOCK_RECONNECTED));
    TU_ASSERT_INT(zklock_session_id(f.s), ==, id); /* the same session, alive */
    CU_ASSERT(tu_wait_until(tu_gone, full, TU_WAIT_MS)); /* ... without our old node */
    CU_ASSERT(!tu_saw_state(&f.ev, ZKLOCK_EXPIRED));
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    faulty_close(&f);
    tu_assert_clean(path);
}

/* A waiter cut off past its lease (not its session): its predecessor goes
 * meanwhile, and the watch event comes as it reconnects. The hold must not
 * be granted on the run-out lease (then lost at once, or acted on in the
 * past: the partition rig saw a holder return from zklock_acquire with
 * zklock_valid_until behind it); it is granted once a heartbeat answered. */
static void test_no_grant_on_a_run_out_lease(void)
{
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT, wlost = TU_EVENTS_INIT;
    zklock_opts_t po = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_opts_t wo = {.on_lost = tu_on_lost, .ctx = &wlost, .owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *h = tu_session();
    const char *path = tu_path("no-grant-run-out");
    zklock_t *lh = tu_mutex(h, path, NULL), *lw, *probe;
    struct tu_acquirer w;
    struct timespec until, now;
    uint64_t acquired;

    faulty_open(&f, 10000);
    lw = tu_mutex(f.s, path, &wo);
    /* A hold of the waiter's session whose on_lost says when its lease ran out. */
    probe = tu_mutex(f.s, tu_path("no-grant-probe"), &po);
    TU_REQUIRE_RC(zklock_acquire(probe, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(lh, -1), ZKLOCK_OK);
    tu_start_acquirer(&w, lw, 60000, false);
    CU_ASSERT_FATAL(tu_wait_children(path, 2));
    acquired = TU_STAT(f.s, acquired);
    cut(&f);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(zklock_release(lh), ZKLOCK_OK);
    zkproxy_restore(f.proxy); /* within the last twentieth of the session timeout */
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_valid_until(lw, &until), ZKLOCK_OK);
    clock_gettime(ZKLOCK_CLOCK, &now);
    CU_ASSERT(until.tv_sec > now.tv_sec + 5); /* a fresh lease: about 9.5 s ahead */
    TU_ASSERT_INT(TU_STAT(f.s, acquired), ==, acquired + 1); /* granted once */
    CU_ASSERT(!tu_lost_once(&wlost));
    CU_ASSERT(!tu_saw_state(&f.ev, ZKLOCK_EXPIRED));
    TU_ASSERT_RC(zklock_release(lw), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(probe), ZKLOCK_ELOST);
    zklock_free(probe);
    zklock_free(lw);
    zklock_free(lh);
    faulty_close(&f);
    zklock_session_close(h);
    tu_assert_clean(path);
}

/* A waiter's turn that comes on an old lease (its create answered more than
 * half a timeout ago) is granted once a heartbeat proves the session. The
 * server may answer that heartbeat without proof and keep the connection
 * (ZTHROTTLEDOP, an overloaded server's refusal): no reconnection follows
 * to send another, so the turn must try again by itself (lease.c: "looked
 * at again every T/6"), not wait for its deadline. */
#define GRANTING_RETRY_TIMEOUT_MS 4000

static bool ms_reached(void *at)
{
    return clock_ms() >= *(int64_t *)at;
}

static void test_granting_heartbeat_refused(void)
{
    struct faulty f;
    zklock_opts_t wo = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *h = tu_session();
    const char *path = tu_path("granting-refused");
    zklock_t *lh = tu_mutex(h, path, NULL), *lw;
    struct tu_acquirer w;
    int64_t old_at;

    faulty_open(&f, GRANTING_RETRY_TIMEOUT_MS);
    lw = tu_mutex(f.s, path, &wo);
    TU_REQUIRE_RC(zklock_acquire(lh, -1), ZKLOCK_OK);
    tu_start_acquirer(&w, lw, 6 * GRANTING_RETRY_TIMEOUT_MS, false);
    CU_ASSERT_FATAL(tu_wait_children(path, 2));
    /* Its create's answer is the last word of its session: half a timeout
     * later (and some), its lease is too old to grant on. */
    old_at = clock_ms() + GRANTING_RETRY_TIMEOUT_MS / 2 + 500;
    CU_ASSERT_FATAL(tu_wait_until(ms_reached, &old_at, TU_WAIT_MS));
    zkproxy_fail_reply(f.proxy, ZOO_SETDATA_OP, ZTHROTTLEDOP); /* the heartbeat's */
    TU_ASSERT_RC(zklock_release(lh), ZKLOCK_OK);
    /* The first heartbeat refused, a second one within T/6 proves the
     * session: held well within a session timeout, not at the deadline. */
    CU_ASSERT(tu_wait_until(tu_acquirer_done, &w, GRANTING_RETRY_TIMEOUT_MS));
    TU_ASSERT_INT(zkproxy_failed(f.proxy), ==, 1);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(lw), ZKLOCK_OK);
    zklock_free(lw);
    zklock_free(lh);
    faulty_close(&f);
    zklock_session_close(h);
    tu_assert_clean(path);
}

/* A holding session's heartbeat goes at heard_at + T/2, and a reconnection
 * sends one at once: a lease fresh from a write answered just now needs
 * none. An answer that no session event follows (ZTHROTTLEDOP: the server
 * is overloaded) makes the session retry every ZKL_RETRY_MS through the
 * layers' "resumed", as if it had reconnected: it must not cost a
 * heartbeat each time (up to ten a second, on the overloaded server). */
#define THROTTLED_TIMEOUT_MS 10000

struct sent_count {
    zkproxy_t *proxy;
    int type, at_least;
};

static bool sent_at_least(void *arg)
{
    struct sent_count *sc = arg;
    return zkproxy_sent(sc->proxy, sc->type) >= sc->at_least;
}

static void test_throttled_answer_sends_no_heartbeat(void)
{
    struct faulty f;
    zklock_opts_t wo = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *h = tu_session();
    const char *held = tu_path("throttled-held"), *path = tu_path("throttled-wanted");
    zklock_t *la, *lh = tu_mutex(h, path, NULL), *lb;
    struct tu_acquirer w;
    struct sent_count relisted;
    int heartbeats;

    faulty_open(&f, THROTTLED_TIMEOUT_MS);
    la = tu_mutex(f.s, held, NULL);
    lb = tu_mutex(f.s, path, &wo);
    TU_REQUIRE_RC(zklock_acquire(lh, -1), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(la, -1), ZKLOCK_OK); /* f holds: its lease is kept */
    heartbeats = zkproxy_sent(f.proxy, ZOO_SETDATA_OP);
    relisted = (struct sent_count){f.proxy, ZOO_GETCHILDREN2_OP,
                                   zkproxy_sent(f.proxy, ZOO_GETCHILDREN2_OP) + 2};
    zkproxy_fail_reply(f.proxy, ZOO_GETCHILDREN2_OP, ZTHROTTLEDOP); /* B's listing */
    tu_start_acquirer(&w, lb, -1, false);
    /* Listed again after the throttled answer: B's create was answered a
     * moment ago, its heartbeat is due half a timeout (5 s) after it. */
    CU_ASSERT_FATAL(tu_wait_until(sent_at_least, &relisted, TU_WAIT_MS));
    TU_ASSERT_INT(zkproxy_failed(f.proxy), ==, 1);
    TU_ASSERT_INT(zkproxy_sent(f.proxy, ZOO_SETDATA_OP), ==, heartbeats);
    TU_ASSERT_RC(zklock_release(lh), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(lb), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(la), ZKLOCK_OK);
    zklock_free(lb);
    zklock_free(la);
    zklock_free(lh);
    faulty_close(&f);
    zklock_session_close(h);
    tu_assert_clean(path);
    tu_assert_clean(held);
}

/* The czxid of a node made now: the ensemble's last committed zxid + 1. */
static int64_t next_zxid(const char *path)
{
    char probe[512];
    struct Stat st;

    snprintf(probe, sizeof probe, "%s-probe", path);
    if (zoo_create2(tu_zk(), probe, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0, &st) != ZOK)
        return -1;
    zoo_delete(tu_zk(), probe, -1);
    return st.czxid;
}

/* Commits seen between the probes that were not the probes' own. */
struct foreign_commits {
    const char *path;
    int64_t last;
    int seen;
};

static bool two_foreign_commits(void *arg)
{
    struct foreign_commits *fc = arg;
    int64_t z = next_zxid(fc->path);

    if (fc->last > 0 && z - fc->last > 2) /* more than our create and delete */
        fc->seen++;
    fc->last = z;
    return fc->seen >= 2;
}

/* An idle holder's heartbeats are writes (each commits a transaction): a
 * sync or a revalidation is answered by a deposed leader too, for up to a
 * tick after a new leader restarted the session's timeout. */
static void test_heartbeat_needs_a_quorum(void)
{
    zklock_session_opts_t so = {.timeout_ms = 3000};
    zklock_session_t *s = NULL;
    const char *path = tu_path("heartbeat");
    struct foreign_commits fc = {path, 0, 0};
    zklock_t *l;

    TU_REQUIRE_RC(zklock_session_open(&s, tu_hosts(), &so), ZKLOCK_OK);
    l = tu_mutex(s, path, NULL);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    /* Nothing else writes meanwhile: the holder is idle. */
    CU_ASSERT(tu_wait_until(two_foreign_commits, &fc, TU_WAIT_MS));
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
}

/* A downgrade heir's create (a multi with its writer's check) loses its
 * reply: the heir finds its node again, owned by its session, and holds by
 * its writer's place. */
static void test_lost_heir_reply(void)
{
    struct faulty f;
    const char *path = tu_path("lost-heir");
    zklock_rwlock_t *rw = NULL;
    int64_t wtoken, rtoken;

    faulty_open(&f, 8000);
    TU_REQUIRE_RC(zklock_rwlock_new(&rw, f.s, path, NULL), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(rw), -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(zklock_rwlock_write(rw), &wtoken), ZKLOCK_OK);
    zkproxy_drop_reply(f.proxy, ZOO_MULTI_OP);
    TU_ASSERT_RC(zklock_acquire(zklock_rwlock_read(rw), 20000), ZKLOCK_OK);
    TU_ASSERT_INT(zkproxy_dropped(f.proxy), ==, 1);
    TU_ASSERT_RC(zklock_fence(zklock_rwlock_read(rw), &rtoken), ZKLOCK_OK);
    TU_ASSERT_INT(rtoken, ==, wtoken); /* an heir, not a plain reader */
    TU_ASSERT_INT(tu_count(path), ==, 2); /* the writer's node and the heir: no duplicate */
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(rw)), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_read(rw)), ZKLOCK_OK);
    zklock_rwlock_free(rw);
    faulty_close(&f);
    tu_assert_clean(path);
}

/* The full path of the child of path other than `writer` (caller frees). */
static char *other_child(const char *path, const char *writer)
{
    int n;
    char **kids = tu_children(path, &n), *other = NULL;

    for (int i = 0; i < n && !other; i++) {
        if (strcmp(kids[i], writer) != 0 && (other = malloc(strlen(path) + strlen(kids[i]) + 2)))
            sprintf(other, "%s/%s", path, kids[i]);
    }
    tu_free_strings(kids);
    return other;
}

/* A downgrade heir's create loses its reply, and while its client is cut
 * off an operator replaces the heir's node (deleted, a node of that name
 * made by another session). The owner check says "not ours" while its
 * writer still holds: it must be made again as a heir. Queued as a plain
 * reader, it waited behind its own thread's write node for ever (found by
 * the model: design.md, "A model of the protocol"). */
static void test_heir_node_replaced(void)
{
    struct faulty f;
    const char *path = tu_path("heir-replaced");
    zklock_rwlock_t *rw = NULL;
    int64_t wtoken, rtoken = 0;
    char *writer, *heir;
    struct tu_acquirer a; /* the handle's owner, on another thread */
    zklock_opts_t by_handle = {.owner = ZKLOCK_OWNER_HANDLE};

    faulty_open(&f, 8000);
    TU_REQUIRE_RC(zklock_rwlock_new(&rw, f.s, path, &by_handle), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(zklock_rwlock_write(rw), -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(zklock_rwlock_write(rw), &wtoken), ZKLOCK_OK);
    writer = only_child(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(writer);
    zkproxy_drop_reply_and_cut(f.proxy, ZOO_MULTI_OP);
    tu_start_acquirer(&a, zklock_rwlock_read(rw), 20000, false);
    CU_ASSERT_FATAL(tu_wait_state(&f.ev, ZKLOCK_SUSPENDED));
    heir = other_child(path, writer);
    CU_ASSERT_PTR_NOT_NULL_FATAL(heir);
    TU_REQUIRE_RC(zoo_delete(tu_zk(), heir, -1), ZOK);
    TU_REQUIRE_RC(zoo_create(tu_zk(), heir, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                  ZOK);
    restore(&f);
    TU_ASSERT_RC(tu_join_acquirer(&a), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(zklock_rwlock_read(rw), &rtoken), ZKLOCK_OK);
    TU_ASSERT_INT(rtoken, ==, wtoken); /* a heir again, not a reader behind itself */
    TU_ASSERT_INT(owner_of(path, strrchr(heir, '/') + 1), ==, zoo_client_id(tu_zk())->client_id);
    TU_REQUIRE_RC(zoo_delete(tu_zk(), heir, -1), ZOK); /* the operator's node */
    TU_ASSERT_RC(zklock_release(zklock_rwlock_write(rw)), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(zklock_rwlock_read(rw)), ZKLOCK_OK);
    free(writer);
    free(heir);
    zklock_rwlock_free(rw);
    faulty_close(&f);
    tu_assert_clean(path);
}

/* ---- someone else's hand ----------------------------------------------------------------- */

static void test_waiter_node_deleted(void)
{
    zklock_session_t *h = tu_session(), *w = tu_session();
    const char *path = tu_path("waiter-deleted");
    zklock_t *lh = tu_mutex(h, path, NULL), *lw = tu_mutex(w, path, NULL);
    struct tu_acquirer a;
    char **kids, node[512];
    int n;

    TU_REQUIRE_RC(zklock_acquire(lh, -1), ZKLOCK_OK);
    tu_start_acquirer(&a, lw, 30000, true);
    CU_ASSERT(tu_wait_children(path, 2));
    kids = tu_children(path, &n);
    for (int i = 0; i < n; i++)
        if (owner_of(path, kids[i]) == zklock_session_id(w))
            snprintf(node, sizeof node, "%s/%s", path, kids[i]);
    tu_free_strings(kids);
    /* The waiter's node is deleted: it is not told (it held nothing) but it
     * only learns when it looks again; the holder's release makes it look. */
    TU_REQUIRE_RC(zoo_delete(tu_zk(), node, -1), ZOK);
    TU_ASSERT_RC(zklock_release(lh), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&a), ZKLOCK_OK);
    zklock_free(lh);
    zklock_free(lw);
    zklock_session_close(h);
    zklock_session_close(w);
    tu_assert_clean(path);
}

/* ---- what on_lost says -------------------------------------------------------------------- */

static bool file_has(void *arg)
{
    char **want = arg, buf[512];
    FILE *f = fopen(want[0], "r");
    bool found = false;

    while (f && fgets(buf, sizeof buf, f))
        found |= strstr(buf, want[1]) != NULL;
    if (f)
        fclose(f);
    return found;
}

/* Some watch is set on a child of path (the server's watches by path). */
static bool node_watched(void *path)
{
    char buf[8192];
    return tu_fourlw(1, "wchp", buf, sizeof buf) > 0 && strstr(buf, (const char *)path) != NULL;
}

/* The frozen holder `pid`: another client (l) takes the lock once the
 * ensemble expired the holder's session; thawed, the holder must say it was
 * told so, once, and that its release found the hold lost. */
static void other_takes_over_then_thaw(zklock_t *l, int pid, char *out)
{
    TU_ASSERT_RC(zklock_acquire(l, TU_WAIT_MS), ZKLOCK_OK); /* the ensemble expired it */
    kill(pid, SIGCONT);
    TU_ASSERT_INT(tu_wait_pid(pid), ==, 0);
    CU_ASSERT(file_has((char *[]){out, "lost ZSESSIONEXPIRED"}));
    CU_ASSERT(file_has((char *[]){out, "release ZKLOCK_ELOST"}));
    CU_ASSERT(file_has((char *[]){out, "lost-calls "}) && file_has((char *[]){out, "lost-calls 1"}));
}

/* A holder frozen past its session timeout (a stopped process, a long GC
 * pause) sees its node's deletion before it hears that the session expired:
 * it must still be told the real reason, once. */
static void test_paused_holder_told_expired(void)
{
    const char *path = tu_path("paused"), *helper = getenv("ZKLOCK_TEST_HOLDER");
    zklock_session_t *other = tu_session();
    zklock_t *l = tu_mutex(other, path, NULL);
    char out[] = "/tmp/zklock-holder-XXXXXX";
    char *held[] = {out, "held "};
    int fd = mkstemp(out), pid;

    CU_ASSERT_PTR_NOT_NULL_FATAL(helper);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    {
        char *argv[] = {(char *)helper, (char *)tu_hosts(), (char *)path, "2000", out, NULL};
        pid = tu_spawn(argv);
    }
    CU_ASSERT_FATAL(tu_wait_until(file_has, held, TU_WAIT_MS));
    /* Once the holder watches its own node, the server tells it of the
     * node's deletion before it closes the expired session's connection. */
    CU_ASSERT_FATAL(tu_wait_until(node_watched, (void *)path, TU_WAIT_MS));
    kill(pid, SIGSTOP); /* deliberate fault: frozen past its session timeout */
    other_takes_over_then_thaw(l, pid, out);
    unlink(out);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(other);
    tu_assert_clean(path);
}

/* The same frozen holder with a maximum hold that passes while it is frozen,
 * before its lease would run out: when it runs again, both are due, the
 * session has expired and another client has held meanwhile. The hold ended
 * with the session, not by the limit: it must be told ZSESSIONEXPIRED, as
 * without a limit (design.md, "Maximum hold": "until the process runs again
 * or until the session expires, whichever comes first"), not
 * ZKLOCK_LOST_MAX_HOLD ("zklock deleted its node"). Timing: session 4000
 * (lease 3800, a heartbeat every 667), limit 3000: stopped within 3 s of
 * "held", the limit falls before the lease's end. */
static void paused_holder_max_hold(const char *name, bool session_lease)
{
    const char *path = tu_path(name), *helper = getenv("ZKLOCK_TEST_HOLDER");
    zklock_session_t *other = tu_session();
    zklock_t *l = tu_mutex(other, path, NULL);
    char out[] = "/tmp/zklock-holder-XXXXXX";
    char *held[] = {out, "held "}, *lost[] = {out, "lost "};
    int fd = mkstemp(out), pid;

    CU_ASSERT_PTR_NOT_NULL_FATAL(helper);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    {
        char *argv[] = {(char *)helper, (char *)tu_hosts(), (char *)path, "4000", out, "3000",
                        session_lease ? "session" : NULL, NULL};
        pid = tu_spawn(argv);
    }
    CU_ASSERT_FATAL(tu_wait_until(file_has, held, TU_WAIT_MS));
    kill(pid, SIGSTOP); /* deliberate fault: frozen past its limit and its session */
    if (file_has(lost)) {
        /* The limit came before the stop (3 s after "held"): nothing to judge. */
        kill(pid, SIGKILL);
        tu_wait_pid(pid);
        unlink(out);
        CU_FAIL_FATAL("the holder was not frozen within its limit: too slow to judge");
    }
    other_takes_over_then_thaw(l, pid, out);
    if (!file_has((char *[]){out, "lost ZSESSIONEXPIRED"})) {
        char buf[512];
        FILE *f = fopen(out, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        buf[n] = 0;
        if (f)
            fclose(f);
        fprintf(stderr, "%s: the holder said:\n%s", name, buf);
    }
    unlink(out);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(other);
    tu_assert_clean(path);
}

static void test_paused_holder_max_hold_told_expired(void)
{
    paused_holder_max_hold("paused-max-hold", false);
}

/* The same with ZKLOCK_LEASE_SESSION: no lease to run out, the local
 * expiry (or the server's word) ends the hold; the limit must not claim it. */
static void test_paused_holder_max_hold_told_expired_session_lease(void)
{
    paused_holder_max_hold("paused-max-hold-session", true);
}

/* A release that finds its node deleted answers ZKLOCK_ELOST, and on_lost is
 * told once all the same (whether the own-node watch saw it first or not). */
static void test_release_finds_node_deleted(void)
{
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_session_t *s = tu_session();
    const char *path = tu_path("release-deleted");
    zklock_t *l = tu_mutex(s, path, &lo);
    char *node, full[512];

    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    node = only_child(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(node);
    snprintf(full, sizeof full, "%s/%s", path, node);
    free(node);
    TU_REQUIRE_RC(zoo_delete(tu_zk(), full, -1), ZOK); /* an operator's hand */
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    CU_ASSERT(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_DELETED);
    /* The next hold is a new one; nothing more is said of the old. */
    TU_ASSERT_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    TU_ASSERT_INT(lost.lost, ==, 1);
    tu_assert_clean(path);
}

/* ---- our own nodes of a session we gave up ------------------------------------------------ */

/* After zklock expires a session by itself, the server may keep it (here a
 * second connection keeps it alive) with our node in the queue: our next
 * acquisition must not wait behind it. */
static void test_stale_node_after_local_expiry(void)
{
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    const char *path = tu_path("stale");
    zklock_t *l;
    zhandle_t *twin;
    clientid_t id;
    char *old, full[512];

    faulty_open(&f, 2000);
    l = tu_mutex(f.s, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    id = *zoo_client_id(zklock_session_zhandle(f.s));
    old = only_child(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(old);
    snprintf(full, sizeof full, "%s/%s", path, old);
    free(old);
    cut(&f);
    twin = tu_connect_as(&id); /* the old session lives on, node and all */
    CU_ASSERT_PTR_NOT_NULL_FATAL(twin);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_UNSURE); /* its lease ran out */
    CU_ASSERT(tu_wait_state(&f.ev, ZKLOCK_EXPIRED));
    zkproxy_restore(f.proxy);
    CU_ASSERT(tu_wait_state(&f.ev, ZKLOCK_CONNECTED));
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_acquire(l, 5000), ZKLOCK_OK); /* not behind our old node */
    CU_ASSERT(tu_gone(full));
    TU_ASSERT_INT(tu_count(path), ==, 1);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zookeeper_close(twin);
    zklock_free(l);
    faulty_close(&f);
    tu_assert_clean(path);
}

/* An election's leader cut off until its lease runs out, while its old
 * session lives on on the server (node and all): it is told it lost, the
 * next participant leads once that node is gone, and the old leader, back
 * on a new session, does not lead beside it (its old node is not its own). */
static void test_election_re_session_one_leader(void)
{
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_opts_t by_handle = {.owner = ZKLOCK_OWNER_HANDLE};
    const char *path = tu_path("elect-resession");
    zklock_session_t *other = tu_session();
    zklock_t *a, *b = NULL;
    struct tu_acquirer next;
    zhandle_t *twin;
    clientid_t id;
    int64_t old_token = 0, new_token = 0;

    faulty_open(&f, 2000);
    TU_REQUIRE_RC(zklock_election_new(&a, f.s, path, &lo), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_election_new(&b, other, path, &by_handle), ZKLOCK_OK);
    TU_REQUIRE_RC(zklock_acquire(a, -1), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(a, &old_token), ZKLOCK_OK);
    tu_start_acquirer(&next, b, 30000, false);
    CU_ASSERT(tu_wait_children(path, 2));
    id = *zoo_client_id(zklock_session_zhandle(f.s));
    cut(&f);
    twin = tu_connect_as(&id); /* the old session lives on, node and all */
    CU_ASSERT_PTR_NOT_NULL_FATAL(twin);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS)); /* told first */
    TU_ASSERT_INT(tu_acquirer_done(&next), ==, 0); /* the old node still leads */
    CU_ASSERT(tu_wait_state(&f.ev, ZKLOCK_EXPIRED));
    zkproxy_restore(f.proxy);
    CU_ASSERT(tu_wait_state(&f.ev, ZKLOCK_CONNECTED));
    /* The new session removes the old node: the next participant leads. */
    TU_ASSERT_RC(tu_join_acquirer(&next), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_fence(b, &new_token), ZKLOCK_OK);
    CU_ASSERT(new_token > old_token);
    TU_ASSERT_RC(zklock_release(a), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_acquire(a, 500), ZKLOCK_ETIMEDOUT); /* one leader: b */
    TU_ASSERT_RC(zklock_release(b), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(a, 5000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(a), ZKLOCK_OK);
    zookeeper_close(twin);
    zklock_free(a);
    zklock_free(b);
    zklock_session_close(other);
    faulty_close(&f);
    tu_assert_clean(path);
}

/* ---- a slow callback -------------------------------------------------------------------------- */

/* The application's work in a done callback: it takes most of a session
 * timeout (a sleep stands for it). */
struct slow_work {
    int ms;
    int done; /* __atomic */
};

static void slow_done(zklock_t *l, int rc, void *ctx)
{
    struct slow_work *w = ctx;
    struct timespec ts = {w->ms / 1000, (long)(w->ms % 1000) * 1000000L};

    (void)l;
    (void)rc;
    while (nanosleep(&ts, &ts) != 0)
        ;
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
}

/* What the hold of l says meanwhile; false once the work is over. */
struct hold_watch {
    zklock_t *l;
    struct slow_work *work;
    int untruthful; /* held, by hold_count or fence, past valid_until */
    int polls;
};

static bool lease_passed(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(ZKLOCK_CLOCK, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static bool work_over_watching(void *arg)
{
    struct hold_watch *h = arg;
    struct timespec until;
    int64_t token;
    bool lease = zklock_valid_until(h->l, &until) == ZKLOCK_OK && !lease_passed(&until);

    if (!lease && (zklock_hold_count(h->l) > 0 || zklock_fence(h->l, &token) == ZKLOCK_OK))
        h->untruthful++;
    h->polls++;
    return __atomic_load_n(&h->work->done, __ATOMIC_SEQ_CST) != 0;
}

/* A callback that works for 0.8 of a session timeout while another lock of
 * the session is held: the lease's heartbeats do not wait for it, so the
 * hold survives, and hold_count and fence tell the truth all along. (They
 * ran on the thread that ran the callbacks: behind a slow one, every hold
 * of the session ended UNSURE although the connection was fine.) The proxy
 * delays every message by 0.1 T each way: an answer is always 0.2 T old
 * when it arrives, so any callback of 0.8 T outlasts the lease without
 * heartbeats (0.95 T). */
static void test_slow_callback_keeps_holds(void)
{
    const int timeout = 4000;
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_opts_t ho = {.owner = ZKLOCK_OWNER_HANDLE};
    const char *path = tu_path("slow-cb-held"), *path2 = tu_path("slow-cb-work");
    struct slow_work work = {timeout * 8 / 10, 0};
    struct hold_watch watch = {NULL, &work, 0, 0};
    zklock_t *held, *worker;
    int64_t token;

    faulty_open(&f, timeout);
    held = tu_mutex(f.s, path, &lo);
    worker = tu_mutex(f.s, path2, &ho);
    TU_REQUIRE_RC(zklock_acquire(held, -1), ZKLOCK_OK);
    zkproxy_set_delay(f.proxy, timeout / 10, timeout / 10);
    TU_REQUIRE_RC(zklock_acquire_async(worker, TU_WAIT_MS, slow_done, &work), ZKLOCK_OK);
    watch.l = held;
    CU_ASSERT(tu_wait_until(work_over_watching, &watch, TU_WAIT_MS));
    TU_ASSERT_INT(watch.untruthful, ==, 0);
    TU_ASSERT_INT(zklock_hold_count(held), ==, 1);
    TU_ASSERT_RC(zklock_fence(held, &token), ZKLOCK_OK);
    zkproxy_set_delay(f.proxy, 0, 0);
    /* the lease's end, had it run out, would be told by now */
    TU_ASSERT_RC(zklock_release(held), ZKLOCK_OK);
    TU_ASSERT_INT(lost.lost, ==, 0);
    TU_ASSERT_RC(zklock_release(worker), ZKLOCK_OK);
    zklock_free(held);
    zklock_free(worker);
    faulty_close(&f);
    tu_assert_clean(path);
    tu_assert_clean(path2);
}

/* ---- adopted handles ------------------------------------------------------------------------ */

/* The application's handle, its global watcher forwarding to zklock. */
struct app {
    zhandle_t *zh;
    zklock_session_t *s; /* set once adopted: __atomic accesses */
    struct tu_events ev;
};

static void app_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    struct app *a = ctx;
    zklock_session_t *s = __atomic_load_n(&a->s, __ATOMIC_SEQ_CST);

    if (s)
        zklock_session_forward(s, zh, type, state);
}

static bool app_connected(void *arg)
{
    return zoo_state(((struct app *)arg)->zh) == ZOO_CONNECTED_STATE;
}

/* The application opens its handle at hosts (through a proxy, say) and
 * hands it to zklock, with the session options `base` (may be NULL). */
static void app_adopt_with(struct app *a, const char *hosts, int timeout_ms,
                           const zklock_session_opts_t *base)
{
    zklock_session_opts_t o = {.on_state = tu_on_state};
    zklock_session_t *s = NULL;

    if (base) {
        o = *base;
        o.on_state = tu_on_state;
    }

    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->ev.mu, NULL);
    o.ctx = &a->ev;
    a->zh = zookeeper_init(hosts, app_watcher, timeout_ms, NULL, a, 0);
    CU_ASSERT_FATAL(a->zh && tu_wait_until(app_connected, a, TU_WAIT_MS));
    TU_REQUIRE_RC(zklock_session_adopt(&s, a->zh, &o), ZKLOCK_OK);
    __atomic_store_n(&a->s, s, __ATOMIC_SEQ_CST); /* the watcher reads it */
}

static void app_adopt(struct app *a, const char *hosts, int timeout_ms)
{
    app_adopt_with(a, hosts, timeout_ms, NULL);
}

/* The old handle is back: to its session (the server had not expired it
 * yet: zklock's local expiry is early on purpose) or to the news that it
 * expired. */
static bool handle_heard_back(void *zh)
{
    int state = zoo_state(zh);
    return state == ZOO_CONNECTED_STATE || state == ZOO_EXPIRED_SESSION_STATE;
}

static bool connected_after_expiry(void *arg)
{
    struct tu_events *e = arg;
    bool expired = false, after = false;

    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->nstates; i++) {
        expired |= e->states[i] == ZKLOCK_EXPIRED;
        after |= expired && e->states[i] == ZKLOCK_CONNECTED;
    }
    pthread_mutex_unlock(&e->mu);
    return after;
}

/* An adopted session expires by itself during a partition, like an opened
 * one; the application hands it a new handle and the lock handles go on. */
static void test_adopted_local_expiry_and_readopt(void)
{
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    const char *path = tu_path("adopt-expiry"), *path2 = tu_path("adopt-waiter");
    struct app a;
    zklock_t *l, *l2;
    struct tu_acquirer w;
    zhandle_t *fresh;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    app_adopt(&a, zkproxy_hosts(proxy), 2000);
    l = tu_mutex(a.s, path, &lo);
    l2 = tu_mutex(a.s, path2, NULL);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    zkproxy_cut(proxy);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_UNSURE); /* its lease ran out first */
    CU_ASSERT(tu_wait_state(&a.ev, ZKLOCK_EXPIRED));
    TU_ASSERT_RC(zklock_acquire(l2, 0), ZSESSIONEXPIRED);
    tu_start_acquirer(&w, l2, 60000, true); /* waits for the new handle */
    /* The application gives up its handle and opens another. */
    fresh = tu_connect_as(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh);
    TU_ASSERT_RC(zklock_session_readopt(a.s, fresh), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    TU_ASSERT_INT(tu_count(path), ==, 1); /* only the new session's node */
    /* The old handle reconnects; the watcher forwards what it hears too, and
     * that must not touch the new session. */
    zkproxy_restore(proxy);
    CU_ASSERT(tu_wait_until(handle_heard_back, a.zh, TU_WAIT_MS));
    CU_ASSERT(zklock_session_zhandle(a.s) == fresh);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 1);
    TU_ASSERT_INT(lost.lost, ==, 1);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_free(l2);
    /* the old handle first: its watcher forwards to a.s, which must outlive it */
    zookeeper_close(a.zh);
    zklock_session_close(a.s);
    zookeeper_close(fresh);
    zkproxy_stop(proxy);
    TU_ASSERT_RC(zklock_session_readopt(NULL, fresh), ZKLOCK_EINVAL);
    tu_assert_clean(path);
    tu_assert_clean(path2);
}

/* After a local expiry the adopted handle comes back to the very same
 * session (it was alive all along): zklock starts afresh on it and removes
 * the node it had left there. */
static void test_adopted_session_revived(void)
{
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    const char *path = tu_path("adopt-revived");
    struct app a;
    zklock_t *l;
    zhandle_t *twin;
    char *old, full[512];

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    app_adopt(&a, zkproxy_hosts(proxy), 2000);
    l = tu_mutex(a.s, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    old = only_child(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(old);
    snprintf(full, sizeof full, "%s/%s", path, old);
    free(old);
    zkproxy_cut(proxy);
    twin = tu_connect_as(zoo_client_id(a.zh)); /* keeps the session alive */
    CU_ASSERT_PTR_NOT_NULL_FATAL(twin);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS));
    CU_ASSERT(tu_wait_state(&a.ev, ZKLOCK_EXPIRED)); /* and then expired, locally */
    zkproxy_restore(proxy); /* the application's handle takes its session back */
    CU_ASSERT(tu_wait_until(connected_after_expiry, &a.ev, TU_WAIT_MS));
    CU_ASSERT(tu_wait_until(tu_gone, full, TU_WAIT_MS));
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(a.s);
    zookeeper_close(twin);
    zookeeper_close(a.zh);
    zkproxy_stop(proxy);
    tu_assert_clean(path);
}

/* ZooKeeper's C client between two connection attempts (state 0): it
 * waits a sixtieth of the session timeout before the next. */
static bool between_attempts(void *zh)
{
    return zoo_state(zh) == 0;
}

/* zklock_session_readopt does not wait for the new handle: one between two
 * connection attempts, where zoo_add_auth refuses the credentials, gets
 * them as it connects (it used to be asked again and again, for up to a
 * thirtieth of the timeout and 200 ms, inside the call). */
static void test_readopt_does_not_wait(void)
{
    zkproxy_t *p1 = zkproxy_start(tu_server(1)), *p2 = zkproxy_start(tu_server(1));
    zklock_auth_t alice = {"digest", "alice:secret", strlen("alice:secret")};
    zklock_session_opts_t so = {.timeout_ms = 30000, .auth = &alice, .nauth = 1};
    zklock_opts_t lo = {.acl = ZKLOCK_ACL_CREATOR}; /* needs the credentials */
    const char *path = tu_path("readopt-auth");
    struct app a;
    zhandle_t *fresh;
    zklock_t *l;
    int64_t t0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(p1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p2);
    app_adopt_with(&a, zkproxy_hosts(p1), 6000, &so);
    zkproxy_cut(p2); /* accepts and closes: the new handle cannot connect yet */
    /* 60 s asked for: a second between two attempts */
    fresh = zookeeper_init(zkproxy_hosts(p2), app_watcher, 60000, NULL, &a, 0);
    CU_ASSERT_FATAL(fresh != NULL && tu_wait_until(between_attempts, fresh, TU_WAIT_MS));
    t0 = tu_now_ms();
    TU_ASSERT_RC(zklock_session_readopt(a.s, fresh), ZKLOCK_OK);
    TU_ASSERT_INT(tu_now_ms() - t0, <, 300); /* it waited for the next attempt: ~1.2 s */
    zkproxy_restore(p2);
    CU_ASSERT(tu_wait_until(connected_after_expiry, &a.ev, TU_WAIT_MS));
    l = tu_mutex(a.s, path, &lo);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_OK); /* the credentials went out */
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(a.s);
    zookeeper_close(fresh);
    zookeeper_close(a.zh);
    zkproxy_stop(p1);
    zkproxy_stop(p2);
    tu_assert_clean(path);
}

/* ---- several threads on one handle-owned lock --------------------------------------------- */

static bool not_held(void *l)
{
    return zklock_hold_count(l) == 0;
}

/* A blocked release waits for the connection; another thread's acquire
 * meanwhile starts afresh, and the release still gets its own outcome. */
static void test_acquire_while_release_waits(void)
{
    struct faulty f;
    const char *path = tu_path("release-acquire");
    zklock_opts_t o = {.owner = ZKLOCK_OWNER_HANDLE};
    struct blocked_release r = {NULL, -1, 0};
    zklock_t *l;
    pthread_t t;

    faulty_open(&f, 8000);
    l = tu_mutex(f.s, path, &o);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    cut(&f);
    r.l = l;
    pthread_create(&t, NULL, blocked_release_main, &r);
    CU_ASSERT(tu_wait_until(not_held, l, TU_WAIT_MS)); /* the release started */
    TU_ASSERT_RC(zklock_acquire(l, 0), ZCONNECTIONLOSS);
    TU_ASSERT_INT(__atomic_load_n(&r.done, __ATOMIC_SEQ_CST), ==, 0);
    restore(&f);
    pthread_join(t, NULL);
    TU_ASSERT_RC(r.rc, ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    faulty_close(&f);
    tu_assert_clean(path);
}

/* ---- a multi-lock whose member is dropped as unsure ------------------------------------------ */

/* Issue 21, item 3, as the network does it. P holds B; M1 = {A,B} queues
 * (it holds A, waits for B behind P), M2 = {A,B} queues behind M1 on both.
 * M1's client is cut off for most of its session timeout: its lease runs
 * out, its member on A is dropped as unsure, and when the session comes
 * back (alive) that node is swept and M2 takes A. M1 used to queue A again
 * alone, behind M2, while its node on B kept its place ahead of M2's: once
 * P released, M1 held B and waited for M2, which waited for M1. Now M1
 * drops B too and queues both again, behind M2: M2 holds, then M1. */
static void test_multi_member_dropped_unsure(void)
{
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t po = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_session_t *sp = tu_session(), *s2 = tu_session();
    char pa[256], pb[256], *m1a;
    struct tu_crossed x;
    zklock_t *probe;

    snprintf(pa, sizeof pa, "%s", tu_path("multi-unsure-a"));
    snprintf(pb, sizeof pb, "%s", tu_path("multi-unsure-b"));
    faulty_open(&f, 10000); /* M1's session */
    /* A hold of M1's session whose on_lost says when its lease ran out. */
    probe = tu_mutex(f.s, tu_path("multi-unsure-probe"), &po);
    TU_REQUIRE_RC(zklock_acquire(probe, -1), ZKLOCK_OK);
    tu_crossed_start(&x, sp, f.s, s2, pa, pb, 25000);
    m1a = tu_node_of(pa, f.s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m1a);
    cut(&f);
    CU_ASSERT_FATAL(tu_wait_until(tu_lost_once, &lost, TU_WAIT_MS)); /* the lease ran out */
    zkproxy_restore(f.proxy); /* within the last twentieth of the session timeout */
    CU_ASSERT(tu_wait_state(&f.ev, ZKLOCK_RECONNECTED));
    CU_ASSERT(!tu_saw_state(&f.ev, ZKLOCK_EXPIRED)); /* the session lives */
    CU_ASSERT(tu_wait_until(tu_gone, m1a, TU_WAIT_MS)); /* M1's dropped node swept */
    CU_ASSERT(tu_wait_children(pa, 2)); /* M2's, and M1's again */
    CU_ASSERT(tu_wait_children(pb, 3));
    tu_crossed_finish(&x);
    TU_ASSERT_RC(zklock_release(probe), ZKLOCK_ELOST);
    free(m1a);
    zklock_free(probe);
    faulty_close(&f);
    zklock_session_close(sp);
    zklock_session_close(s2);
    tu_assert_clean(pa);
    tu_assert_clean(pb);
}

/* ---- what an old handle still owes after a readopt ------------------------------------ */

struct requests_of {
    zklock_session_t *s;
    uint64_t at_least;
};

static bool requests_sent(void *arg)
{
    struct requests_of *r = arg;
    return TU_STAT(r->s, requests) >= r->at_least;
}

static bool release_returned(void *arg)
{
    return __atomic_load_n(&((struct blocked_release *)arg)->done, __ATOMIC_SEQ_CST) != 0;
}

/* A readopt while the old handle still owes answers (here: a create and a
 * listing held up by the proxy): when that handle's connection goes, the C
 * client answers them (ZCONNECTIONLOSS; ZCLOSING when the application
 * closes it). They are the old handle's: they must not count against what
 * the lock sent on the new handle meanwhile (a contender compared only its
 * last request's generation, so they were taken for the new requests'
 * answers, and its release then waited for ever for answers already
 * counted). */
static void test_readopt_old_answers_stay_old(void)
{
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    const char *path = tu_path("readopt-old-answers");
    zklock_opts_t o = {.owner = ZKLOCK_OWNER_HANDLE}; /* released by another thread */
    struct blocked_release r = {NULL, -1, 0};
    struct requests_of sent;
    struct tu_acquirer w;
    struct app a;
    zhandle_t *fresh;
    pthread_t t;
    zklock_t *l;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    app_adopt(&a, zkproxy_hosts(proxy), 10000);
    l = tu_mutex(a.s, path, &o);
    zkproxy_set_delay(proxy, 5000, 5000);
    sent = (struct requests_of){a.s, TU_STAT(a.s, requests) + 2}; /* the create, the listing */
    tu_start_acquirer(&w, l, TU_WAIT_MS, false);
    CU_ASSERT_FATAL(tu_wait_until(requests_sent, &sent, TU_WAIT_MS));
    fresh = tu_connect_as(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh);
    TU_ASSERT_RC(zklock_session_readopt(a.s, fresh), ZKLOCK_OK);
    /* The old handle's connection goes (a close could drop the answers:
     * zookeeper_close's own race, inspect.c) */
    zkproxy_cut(proxy);
    CU_ASSERT(tu_wait_until(tu_acquirer_done, &w, TU_WAIT_MS));
    TU_ASSERT_INT(tu_count(path), ==, 1);
    r.l = l;
    pthread_create(&t, NULL, blocked_release_main, &r);
    CU_ASSERT(tu_wait_until(release_returned, &r, TU_WAIT_MS));
    zklock_session_close(a.s); /* (whatever still waits returns ECLOSED) */
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    pthread_join(t, NULL);
    TU_ASSERT_RC(r.rc, ZKLOCK_OK);
    zklock_free(l);
    zookeeper_close(fresh);
    zookeeper_close(a.zh);
    zkproxy_stop(proxy);
    tu_assert_clean(path);
}

/* The old handle answered everything asked before (a completion of its own). */
static void old_answers_flushed(int rc, const struct Stat *st, const void *data)
{
    (void)rc;
    (void)st;
    __atomic_store_n((int *)data, 1, __ATOMIC_SEQ_CST);
}

static bool flag_is_set(void *flag)
{
    return __atomic_load_n((int *)flag, __ATOMIC_SEQ_CST) != 0;
}

/* A readopt while a multi-lock's transaction is in flight on the old handle
 * (held up by the proxy): the multi-lock enqueues again through the new
 * handle, and holds; the old handle's answer comes later. The C client
 * writes a multi's results and the names it created into the buffers it was
 * given, whether zklock still wants the answer or not: they must still be
 * the multi-lock's then. (They were freed as the next round went out: under
 * ASan, a heap-use-after-free in the client's copy of a created name; under
 * valgrind, invalid writes. A plain build cannot see it.) */
static void test_readopt_multi_in_flight(void)
{
    zkproxy_t *proxy = zkproxy_start(tu_server(1));
    char pa[256], pb[256];
    zklock_opts_t o = {.owner = ZKLOCK_OWNER_HANDLE}; /* released by the test's thread */
    struct requests_of sent;
    struct tu_acquirer w;
    struct app a;
    zhandle_t *fresh;
    zklock_t *la, *lb, *m = NULL;
    int flushed = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(proxy);
    snprintf(pa, sizeof pa, "%s", tu_path("readopt-multi-a"));
    snprintf(pb, sizeof pb, "%s", tu_path("readopt-multi-b"));
    tu_make_lock_path(pa); /* the first transaction needs no parents made */
    tu_make_lock_path(pb);
    app_adopt(&a, zkproxy_hosts(proxy), 10000);
    la = tu_mutex(a.s, pa, NULL);
    lb = tu_mutex(a.s, pb, NULL);
    TU_REQUIRE_RC(zklock_multi_new(&m, (zklock_t *[]){la, lb}, 2, &o), ZKLOCK_OK);
    zkproxy_set_delay(proxy, 2000, 2000);
    sent = (struct requests_of){a.s, TU_STAT(a.s, requests) + 3}; /* the transaction, 2 listings */
    tu_start_acquirer(&w, m, TU_WAIT_MS, false);
    CU_ASSERT_FATAL(tu_wait_until(requests_sent, &sent, TU_WAIT_MS));
    fresh = tu_connect_as(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh);
    TU_ASSERT_RC(zklock_session_readopt(a.s, fresh), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK); /* a new round, through the new handle */
    /* The old handle's answers come in order, one completion after the
     * other: once this one has run, so has the transaction's. */
    TU_REQUIRE_RC(zoo_aexists(a.zh, pa, 0, old_answers_flushed, &flushed), ZOK);
    CU_ASSERT(tu_wait_until(flag_is_set, &flushed, TU_WAIT_MS));
    zkproxy_set_delay(proxy, 0, 0); /* the old handle's close goes through at once */
    TU_ASSERT_RC(zklock_release(m), ZKLOCK_OK);
    zklock_free(m);
    zklock_free(la);
    zklock_free(lb);
    zklock_session_close(a.s);
    zookeeper_close(fresh);
    zookeeper_close(a.zh); /* the old session's nodes go with it (or once it expires) */
    zkproxy_stop(proxy);
    CU_ASSERT(tu_wait_no_children(pa) && tu_wait_no_children(pb));
    tu_assert_clean(pa);
    tu_assert_clean(pb);
    TU_ASSERT_RC(zoo_delete(tu_zk(), pa, -1), ZOK);
    TU_ASSERT_RC(zoo_delete(tu_zk(), pb, -1), ZOK);
}

/* ---- readers of a queue while the session closes ------------------------------------- */

/* zookeeper_close() drops answers it owes when its completion thread ends
 * first (libzookeeper_mt 3.8: it queues them ZCLOSING, and nothing runs them
 * once that thread is gone): a reader in flight must not wait for them. */
/* Where a reader or the closer is, for the report of a hang. */
enum at { AT_START, AT_READ, AT_WAIT, AT_FREE, AT_CLOSE, AT_RETURNED };

static const char *at_name(int at)
{
    static const char *const names[] = {"not started", "in zklock_queue_read",
                                        "in zklock_queue_wait", "in zklock_queue_free",
                                        "in zklock_session_close", "returned"};
    return names[at];
}

struct reader {
    zklock_session_t *s;
    const char *path;
    bool waits; /* sets a watch after each read (zklock_queue_wait) */
    pthread_t t;
    /* __atomic: reads and waits made, where it is, the last read's and
     * wait's answers, its thread id (gdb's LWP) */
    int rc, reads, nwaits, at, read_rc, wait_rc, tid;
    int64_t returned_ms; /* __atomic: tu_now_ms() as it returned */
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    zklock_queue_t *q = NULL;

    __atomic_store_n(&r->tid, (int)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
    for (;;) {
        __atomic_store_n(&r->at, AT_READ, __ATOMIC_SEQ_CST);
        r->rc = zklock_queue_read(r->s, r->path, &q);
        __atomic_store_n(&r->read_rc, r->rc, __ATOMIC_SEQ_CST);
        if (r->rc != ZKLOCK_OK)
            break;
        __atomic_add_fetch(&r->reads, 1, __ATOMIC_SEQ_CST);
        /* Nothing changes: it returns once the watch is set (or the
         * session ended: a change too, and the next read says why). */
        if (r->waits) {
            __atomic_store_n(&r->at, AT_WAIT, __ATOMIC_SEQ_CST);
            r->rc = zklock_queue_wait(r->s, q, 0);
            __atomic_store_n(&r->wait_rc, r->rc, __ATOMIC_SEQ_CST);
            __atomic_add_fetch(&r->nwaits, 1, __ATOMIC_SEQ_CST);
        }
        __atomic_store_n(&r->at, AT_FREE, __ATOMIC_SEQ_CST);
        zklock_queue_free(q);
        if (r->waits && r->rc != ZKLOCK_ETIMEDOUT && r->rc != ZKLOCK_OK)
            break;
    }
    __atomic_store_n(&r->returned_ms, tu_now_ms(), __ATOMIC_SEQ_CST);
    __atomic_store_n(&r->at, AT_RETURNED, __ATOMIC_SEQ_CST);
    return NULL;
}

struct closer {
    zklock_session_t *s;
    pthread_t t;
    int at, tid;                      /* __atomic */
    int64_t started_ms, returned_ms; /* __atomic: tu_now_ms() */
};

static void *closer_main(void *arg)
{
    struct closer *c = arg;
    __atomic_store_n(&c->tid, (int)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
    __atomic_store_n(&c->started_ms, tu_now_ms(), __ATOMIC_SEQ_CST);
    __atomic_store_n(&c->at, AT_CLOSE, __ATOMIC_SEQ_CST);
    zklock_session_close(c->s);
    __atomic_store_n(&c->returned_ms, tu_now_ms(), __ATOMIC_SEQ_CST);
    __atomic_store_n(&c->at, AT_RETURNED, __ATOMIC_SEQ_CST);
    return NULL;
}

#define READERS 4

struct readers {
    struct reader r[READERS];
    struct closer c;
};

static bool all_read_twice(void *arg)
{
    struct readers *rs = arg;
    for (int i = 0; i < READERS; i++)
        if (__atomic_load_n(&rs->r[i].reads, __ATOMIC_SEQ_CST) < 2)
            return false;
    return true;
}

static bool all_returned(void *arg)
{
    struct readers *rs = arg;
    for (int i = 0; i < READERS; i++)
        if (__atomic_load_n(&rs->r[i].at, __ATOMIC_SEQ_CST) != AT_RETURNED)
            return false;
    return __atomic_load_n(&rs->c.at, __ATOMIC_SEQ_CST) == AT_RETURNED;
}

/* Polls all_returned for ms; *stall: the longest the poll loop itself
 * went unscheduled (a stalled machine, not a hang, if near ms). */
static bool wait_all_returned(struct readers *rs, int ms, int64_t *stall)
{
    int64_t deadline = tu_now_ms() + ms, last = tu_now_ms();
    struct timespec tick = {0, 5 * 1000 * 1000};

    *stall = 0;
    for (;;) {
        int64_t now = tu_now_ms();
        if (now - last > *stall)
            *stall = now - last;
        last = now;
        if (all_returned(rs))
            return true;
        if (now >= deadline)
            return false;
        nanosleep(&tick, NULL); /* polls the condition until the deadline */
    }
}

/* "returned N ms after the close began", or where it still is. */
static void say_where(const char *who, int at, int64_t returned_ms, int64_t close_ms)
{
    if (at == AT_RETURNED && close_ms == 0)
        fprintf(stderr, "%s: returned, before the close\n", who);
    else if (at == AT_RETURNED)
        fprintf(stderr, "%s: returned %lld ms after the close began\n", who,
                (long long)(returned_ms - close_ms));
    else
        fprintf(stderr, "%s: %s\n", who, at_name(at));
}

static void report_state(struct readers *rs)
{
    int64_t close_ms = __atomic_load_n(&rs->c.started_ms, __ATOMIC_SEQ_CST);
    char who[200];

    for (int i = 0; i < READERS; i++) {
        struct reader *r = &rs->r[i];
        snprintf(who, sizeof who,
                 "  reader %d (LWP %d%s; %d reads, the last %s; %d waits, the last %s)", i,
                 __atomic_load_n(&r->tid, __ATOMIC_SEQ_CST), r->waits ? ", waits" : "",
                 __atomic_load_n(&r->reads, __ATOMIC_SEQ_CST),
                 zklock_err_name(__atomic_load_n(&r->read_rc, __ATOMIC_SEQ_CST)),
                 __atomic_load_n(&r->nwaits, __ATOMIC_SEQ_CST),
                 zklock_err_name(__atomic_load_n(&r->wait_rc, __ATOMIC_SEQ_CST)));
        say_where(who, __atomic_load_n(&r->at, __ATOMIC_SEQ_CST),
                  __atomic_load_n(&r->returned_ms, __ATOMIC_SEQ_CST), close_ms);
    }
    snprintf(who, sizeof who, "  closer (LWP %d)", __atomic_load_n(&rs->c.tid, __ATOMIC_SEQ_CST));
    say_where(who, __atomic_load_n(&rs->c.at, __ATOMIC_SEQ_CST),
              __atomic_load_n(&rs->c.returned_ms, __ATOMIC_SEQ_CST), close_ms);
}

/* What hangs: where each reader and the closer are, what they last got,
 * every thread's stack; then whether they return late (a slow or stalled
 * machine) or not at all (a hang). */
static void report_hang(struct readers *rs, int round, int64_t stall)
{
    char msg[200];
    bool late;

    fprintf(stderr, "\nqueue_readers_at_close, round %d: not all returned within %d ms of the "
            "close (the test's own poll loop stalled for up to %lld ms)\n",
            round, TU_WAIT_MS, (long long)stall);
    report_state(rs);
    tu_dump_threads("queue_readers_at_close hangs");
    late = wait_all_returned(rs, TU_WAIT_MS, &stall);
    fprintf(stderr, "%d ms later (stalled up to %lld ms): %s\n", TU_WAIT_MS, (long long)stall,
            late ? "all returned, late" : "still not all returned: a hang");
    report_state(rs);
    snprintf(msg, sizeof msg, "round %d: a reader, or the close, %s (see the log)", round,
             late ? "returned only after the deadline" : "hangs");
    /* (threads left behind) */
    CU_assertImplementation(CU_FALSE, __LINE__, msg, __FILE__, "", CU_TRUE);
}

/* Four threads read a queue of 200 nodes (a listing and 200 reads each
 * time, pipelined; two of them set a watch after each read) while the
 * session closes under them, 20 times: every reader returns
 * ZKLOCK_ECLOSED, and the close returns. */
static void test_queue_readers_at_close(void)
{
    const char *path = tu_path("readers-at-close");
    char node[512];
    int nodes = tu_scaled(200), rounds = tu_scaled(20);

    tu_make_lock_path(path);
    snprintf(node, sizeof node, "%s/x-lock-", path);
    for (int i = 0; i < nodes; i++)
        TU_REQUIRE_RC(zoo_create(tu_zk(), node, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_SEQUENCE,
                                 NULL, 0), ZOK);
    for (int round = 0; round < rounds; round++) {
        struct readers rs;
        int64_t stall;
        zklock_session_t *s = tu_session();
        /* A lock handle keeps s allocated after the close (a reader may
         * still start a read then: it answers ZKLOCK_ECLOSED). */
        zklock_t *keep = tu_mutex(s, path, NULL);

        memset(&rs, 0, sizeof rs);
        for (int i = 0; i < READERS; i++) {
            rs.r[i] = (struct reader){.s = s, .path = path, .waits = i % 2 == 1};
            CU_ASSERT_EQUAL_FATAL(pthread_create(&rs.r[i].t, NULL, reader_main, &rs.r[i]), 0);
        }
        if (!tu_wait_until(all_read_twice, &rs, TU_WAIT_MS)) {
            /* A reader stuck before any close: a lost answer? */
            fprintf(stderr, "\nqueue_readers_at_close, round %d: not all read twice in %d ms\n",
                    round, TU_WAIT_MS);
            report_state(&rs);
            tu_dump_threads("queue_readers_at_close: a reader does not read");
            CU_FAIL("a reader did not read twice before the close (see the log)");
        }
        rs.c.s = s;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&rs.c.t, NULL, closer_main, &rs.c), 0);
        if (!wait_all_returned(&rs, TU_WAIT_MS, &stall))
            report_hang(&rs, round, stall);
        for (int i = 0; i < READERS; i++) {
            pthread_join(rs.r[i].t, NULL);
            TU_ASSERT_RC(rs.r[i].rc, ZKLOCK_ECLOSED);
        }
        pthread_join(rs.c.t, NULL);
        zklock_free(keep);
    }
    {
        int n;
        char **kids = tu_children(path, &n), full[600];
        for (int i = 0; kids && i < n; i++) {
            snprintf(full, sizeof full, "%s/%s", path, kids[i]);
            zoo_delete(tu_zk(), full, -1);
        }
        tu_free_strings(kids);
    }
    zoo_delete(tu_zk(), path, -1);
}

/* ---- a maximum hold across a connection loss (opts.max_hold_ms, issue 25) ------------------- */

/* The limit passes while the connection is down: the holder is told at once
 * (its node cannot go yet), the handle may even be freed, and the node is
 * deleted as soon as the connection is back: nothing is orphaned. */
static void test_max_hold_while_disconnected(void)
{
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost, .max_hold_ms = 1000,
                        .owner = ZKLOCK_OWNER_HANDLE};
    const char *path = tu_path("max-hold-cut");
    zklock_t *l;

    faulty_open(&f, 8000);
    l = tu_mutex(f.s, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    cut(&f);
    CU_ASSERT_FATAL(tu_wait_lost(&lost, 1));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_MAX_HOLD);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 0);
    TU_ASSERT_INT(tu_count(path), ==, 1); /* the server still has it: we are cut off */
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    zklock_free(l); /* while disconnected: the session still deletes the node */
    restore(&f);
    CU_ASSERT(tu_wait_no_children(path));
    CU_ASSERT(!tu_saw_state(&f.ev, ZKLOCK_EXPIRED));
    faulty_close(&f);
    tu_assert_clean(path);
}

struct async_rc {
    int rc, done;
};

static void async_done(zklock_t *l, int rc, void *ctx)
{
    struct async_rc *a = ctx;
    (void)l;
    a->rc = rc;
    __atomic_store_n(&a->done, 1, __ATOMIC_SEQ_CST);
}

static bool async_finished(void *p)
{
    return __atomic_load_n(&((struct async_rc *)p)->done, __ATOMIC_SEQ_CST) != 0;
}

/* The limit passes while a release waits for the connection: the release
 * wins (it answers ZKLOCK_OK once the delete is confirmed), and no on_lost
 * comes. */
static void test_max_hold_during_release(void)
{
    enum { LIMIT = 800 };
    struct faulty f;
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost, .max_hold_ms = LIMIT,
                        .owner = ZKLOCK_OWNER_HANDLE};
    const char *path = tu_path("max-hold-release-cut");
    struct async_rc r = {0, 0};
    zklock_t *l;

    faulty_open(&f, 8000);
    l = tu_mutex(f.s, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    cut(&f);
    TU_REQUIRE_RC(zklock_release_async(l, async_done, &r), ZKLOCK_OK);
    TU_ASSERT_INT(tu_lost_within(&lost, 2 * LIMIT), ==, 0); /* the limit passes meanwhile */
    CU_ASSERT(!async_finished(&r));
    restore(&f);
    CU_ASSERT(tu_wait_until(async_finished, &r, TU_WAIT_MS));
    TU_ASSERT_RC(r.rc, ZKLOCK_OK);
    CU_ASSERT(tu_no_children(path));
    TU_ASSERT_INT(tu_lost_within(&lost, 200), ==, 0);
    zklock_free(l);
    faulty_close(&f);
    tu_assert_clean(path);
}

static const tu_test_t fault_tests[] = {
    {"lost_auth_answer", test_lost_auth_answer},
    {"lost_auth_rejection", test_lost_auth_rejection},
    {"lost_create_reply", test_lost_create_reply},
    {"lost_record_replies", test_lost_record_replies},
    {"record_removed_before_its_write", test_record_removed_before_its_write},
    {"give_up_while_held_is_written", test_give_up_while_held_is_written},
    {"lost_held_reply_keeps_the_bound", test_lost_held_reply_keeps_the_bound},
    {"hold_ends_before_its_record", test_hold_ends_before_its_record},
    {"lost_create_reply_while_waiting", test_lost_create_reply_while_waiting},
    {"lost_delete_reply", test_lost_delete_reply},
    {"lost_heir_reply", test_lost_heir_reply},
    {"heir_node_replaced", test_heir_node_replaced},
    {"hold_through_connection_loss", test_hold_through_connection_loss},
    {"wait_through_connection_loss", test_wait_through_connection_loss},
    {"release_during_connection_loss", test_release_during_connection_loss},
    {"max_hold_while_disconnected", test_max_hold_while_disconnected},
    {"max_hold_during_release", test_max_hold_during_release},
    {"acquire_while_disconnected", test_acquire_while_disconnected},
    {"give_up_during_connection_loss", test_give_up_during_connection_loss},
    {"partition_expires_locally", test_partition_expires_locally},
    {"lease_lost_session_lives", test_lease_lost_session_lives},
    {"session_lease_expires_locally", test_session_lease_expires_locally},
    {"session_lease_server_expiry", test_session_lease_server_expiry},
    {"heartbeat_needs_a_quorum", test_heartbeat_needs_a_quorum},
    {"slow_callback_keeps_holds", test_slow_callback_keeps_holds},
    {"no_grant_on_a_run_out_lease", test_no_grant_on_a_run_out_lease},
    {"granting_heartbeat_refused", test_granting_heartbeat_refused},
    {"throttled_answer_sends_no_heartbeat", test_throttled_answer_sends_no_heartbeat},
    {"waiter_node_deleted", test_waiter_node_deleted},
    {"paused_holder_told_expired", test_paused_holder_told_expired},
    {"paused_holder_max_hold_told_expired", test_paused_holder_max_hold_told_expired},
    {"paused_holder_max_hold_told_expired_session_lease",
     test_paused_holder_max_hold_told_expired_session_lease},
    {"release_finds_node_deleted", test_release_finds_node_deleted},
    {"stale_node_after_local_expiry", test_stale_node_after_local_expiry},
    {"election_re_session_one_leader", test_election_re_session_one_leader},
    {"adopted_local_expiry_and_readopt", test_adopted_local_expiry_and_readopt},
    {"adopted_session_revived", test_adopted_session_revived},
    {"readopt_does_not_wait", test_readopt_does_not_wait},
    {"acquire_while_release_waits", test_acquire_while_release_waits},
    {"multi_member_dropped_unsure", test_multi_member_dropped_unsure},
    {"readopt_old_answers_stay_old", test_readopt_old_answers_stay_old},
    {"readopt_multi_in_flight", test_readopt_multi_in_flight},
    {"queue_readers_at_close", test_queue_readers_at_close},
    {"free_during_record", test_free_during_record},
    {"reenter_during_release_record", test_reenter_during_release_record},
    {"tracking_release_in_callback_told_first", test_tracking_release_in_callback_told_first},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"faults", fault_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
