/* test_unit.c: the pure parts, no ZooKeeper needed: path checks, node
 * names, queue order, the blocking rule, error names. */
#include "../lib/contender.h"
#include "../lib/rules.h"
#include "../lib/lockstats.h"
#include "../lib/previous.h"
#include "../lib/session.h"
#include "testutil.h"
#include "unit_engine.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- paths ------------------------------------------------------------------ */

/* zklock_lock_stats' histogram (zklock.h): bucket 0 below 1 ms, bucket i
 * from 2^(i-1) ms up to 2^i ms, the last from 2^14 ms on. */
static void test_stats_buckets(void)
{
    static const struct {
        uint64_t us;
        unsigned bucket;
    } table[] = {
        {0, 0},          {999, 0},         {1000, 1},        {1999, 1},
        {2000, 2},       {3999, 2},        {4000, 3},        {300000, 9},
        {511999, 9},     {512000, 10},     {16383999, 14},   {16384000, 15},
        {UINT64_MAX, 15},
    };

    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        TU_ASSERT_INT(zklock__stats_bucket(table[i].us), ==, table[i].bucket);
}

static void test_path_table(void)
{
    static const struct {
        const char *path;
        int rc;
    } table[] = {
        {"/a", 0},
        {"/locks/db-1/leader", 0},
        {"/with space/and_underscore.dot", 0},
        {"/unicode/\xc3\xa9t\xc3\xa9", 0},
        {"/a/.../b", 0},
        {"/.hidden", 0},
        {NULL, ZKLOCK_EINVAL},
        {"", ZKLOCK_EINVAL},
        {"/", ZKLOCK_EINVAL},
        {"relative/path", ZKLOCK_EINVAL},
        {"/trailing/", ZKLOCK_EINVAL},
        {"/double//slash", ZKLOCK_EINVAL},
        {"/./dot", ZKLOCK_EINVAL},
        {"/dot/.", ZKLOCK_EINVAL},
        {"/a/../b", ZKLOCK_EINVAL},
        {"/..", ZKLOCK_EINVAL},
        {"/zookeeper", ZKLOCK_EINVAL},
        {"/zookeeper/quota", ZKLOCK_EINVAL},
        {"/zookeeperish", 0},
        {"/tab\there", ZKLOCK_EINVAL},
        {"/del\x7f", ZKLOCK_EINVAL},
        {"/c1\xc2\x85", ZKLOCK_EINVAL},          /* U+0085, a C1 control */
        {"/bad\xff", ZKLOCK_EINVAL},             /* not UTF-8 */
        {"/overlong\xc0\xaf", ZKLOCK_EINVAL},    /* overlong '/' */
        {"/truncated\xe2\x82", ZKLOCK_EINVAL},
        {"/private\xee\x80\x80", ZKLOCK_EINVAL}, /* U+E000 */
        {"/special\xef\xbf\xbe", ZKLOCK_EINVAL}, /* U+FFFE */
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        char msg[128];
        int rc = zklock__path_check(table[i].path);
        snprintf(msg, sizeof msg, "path #%zu", i);
        CU_assertImplementation(rc == table[i].rc, __LINE__, msg, __FILE__, "", CU_FALSE);
    }
}

/* ---- server lists ------------------------------------------------------------ */

/* What ZooKeeper's client would refuse (a usage error) against what it
 * takes; none of these is looked up. */
static void test_hosts_table(void)
{
    static const struct {
        const char *hosts;
        int rc;
    } table[] = {
        {"127.0.0.1:2181", 0},
        {"zk1:2181,zk2:2182,zk3:2183", 0},
        {"zk1:2181,zk2:2182/app/locks", 0},
        {"zk1:2181/", 0},                /* "/" is no chroot */
        {"zk1:2181, zk2:2181", 0},       /* blanks before a host, as the client skips them */
        {"zk1:2181,,zk2:2181,", 0},      /* empty entries, as the client skips them */
        {"::1:2181", 0},                 /* IPv6, bare: the port follows the last ':' */
        {"zk1:65535", 0},
        {"nonexistent.invalid:1", 0},    /* well formed: resolving it is another matter */
        {NULL, ZKLOCK_EINVAL},
        {"", ZKLOCK_EINVAL},
        {",", ZKLOCK_EINVAL},
        {"/chroot", ZKLOCK_EINVAL},      /* no server */
        {"zk1", ZKLOCK_EINVAL},          /* no port */
        {"zk1:", ZKLOCK_EINVAL},
        {":2181", ZKLOCK_EINVAL},        /* no host */
        {"zk1:0", ZKLOCK_EINVAL},
        {"zk1:65536", ZKLOCK_EINVAL},
        {"zk1:99999999999", ZKLOCK_EINVAL},
        {"zk1:2181x", ZKLOCK_EINVAL},
        {"zk1:-1", ZKLOCK_EINVAL},
        {"zk1:0x50", ZKLOCK_EINVAL},
        {"zk1:2181,zk2", ZKLOCK_EINVAL}, /* one server without a port */
        {"zk 1:2181", ZKLOCK_EINVAL},
        {"zk1 :2181", ZKLOCK_EINVAL},
        {"[::1]:2181", ZKLOCK_EINVAL},   /* brackets: the client would look up "[::1]" */
        {"zk1:2181/bad//chroot", ZKLOCK_EINVAL},
        {"zk1:2181/trailing/", ZKLOCK_EINVAL},
        {"zk1:2181/a/../b", ZKLOCK_EINVAL},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        char msg[160];
        int rc = zklock__hosts_check(table[i].hosts);
        snprintf(msg, sizeof msg, "hosts #%zu '%s': got %d, want %d", i,
                 table[i].hosts ? table[i].hosts : "(null)", rc, table[i].rc);
        CU_assertImplementation(rc == table[i].rc, __LINE__, msg, __FILE__, "", CU_FALSE);
    }
}

/* Names that need no DNS: a numeric address, and /etc/hosts's localhost.
 * (A name that does not resolve is tested where no query can leave the
 * machine: test/resolve.sh.) */
static void test_hosts_resolve(void)
{
    TU_ASSERT_RC(zklock__hosts_resolve("127.0.0.1:2181"), 0);
    TU_ASSERT_RC(zklock__hosts_resolve("localhost:2181/chroot"), 0);
    TU_ASSERT_RC(zklock__hosts_resolve(",127.0.0.1:2181"), 0);
}

static void test_path_length(void)
{
    char p[ZKL_PATH_MAX + 2];
    memset(p, 'a', sizeof p);
    p[0] = '/';
    p[ZKL_PATH_MAX] = '\0';
    TU_ASSERT_RC(zklock__path_check(p), 0);
    p[ZKL_PATH_MAX] = 'a';
    p[ZKL_PATH_MAX + 1] = '\0';
    TU_ASSERT_RC(zklock__path_check(p), ZKLOCK_EINVAL);
}

/* ---- names -------------------------------------------------------------------- */

static void expect_parse(const char *name, int rc, int32_t seq, int tag)
{
    struct zkl_entry e;
    char msg[256];
    int got = zklock__parse_name(name, &e);

    snprintf(msg, sizeof msg, "parse(%s)", name);
    CU_assertImplementation(got == rc, __LINE__, msg, __FILE__, "", CU_FALSE);
    if (rc == 0 && got == 0) {
        snprintf(msg, sizeof msg, "seq(%s) = %d, want %d", name, e.seq, seq);
        CU_assertImplementation(e.seq == seq, __LINE__, msg, __FILE__, "", CU_FALSE);
        snprintf(msg, sizeof msg, "tag(%s) = %d, want %d", name, e.tag, tag);
        CU_assertImplementation(e.tag == tag, __LINE__, msg, __FILE__, "", CU_FALSE);
    }
}

static void test_parse_names(void)
{
    const char *u = "_c_9a8b7c6d-1111-4222-8333-444455556666-";
    char buf[128];

    snprintf(buf, sizeof buf, "%slock-0000000042", u);
    expect_parse(buf, 0, 42, ZKL_TAG_LOCK);
    snprintf(buf, sizeof buf, "%s__READ__0000000007", u);
    expect_parse(buf, 0, 7, ZKL_TAG_READ);
    snprintf(buf, sizeof buf, "%s__WRIT__2147483647", u);
    expect_parse(buf, 0, INT32_MAX, ZKL_TAG_WRIT);
    expect_parse("0123456789abcdef0123456789abcdef__lock__0000000003", 0, 3, ZKL_TAG_KLOCK);
    expect_parse("0123456789abcdef0123456789abcdef__rlock__0000000004", 0, 4, ZKL_TAG_KRLOCK);
    /* after the wrap: "%010d" of negative numbers */
    expect_parse("x-lock--000000005", 0, -5, ZKL_TAG_LOCK);
    expect_parse("x-lock--1000000000", 0, -1000000000, ZKL_TAG_LOCK);
    expect_parse("x-lock--2147483648", 0, INT32_MIN, ZKL_TAG_LOCK);
    expect_parse("x-lock-1000000000", 0, 1000000000, ZKL_TAG_LOCK);
    expect_parse("lock-0000000000", 0, 0, ZKL_TAG_LOCK);
    /* unrelated children */
    expect_parse("config", -1, 0, 0);
    expect_parse("lock-", -1, 0, 0);
    expect_parse("lock-123", -1, 0, 0);
    expect_parse("x-lock-2147483648", -1, 0, 0);  /* out of range */
    expect_parse("x-lock-00000000001", -1, 0, 0); /* eleven digits */
    expect_parse("x-lock--0010000000", -1, 0, 0); /* not how the server spells it */
    expect_parse("x-leases-0000000001", -1, 0, 0);
    expect_parse("0000000001", -1, 0, 0);
    expect_parse("", -1, 0, 0);
    expect_parse(NULL, -1, 0, 0);
}

static void test_prefixes(void)
{
    char a[ZKL_PREFIX_MAX], b[ZKL_PREFIX_MAX];
    uint64_t rng[2], other[2];

    TU_ASSERT_RC(zklock__rng_seed(rng), 0);
    TU_ASSERT_RC(zklock__rng_seed(other), 0);
    CU_ASSERT(rng[0] != other[0] || rng[1] != other[1]);
    zklock__make_prefix(a, ZKLOCK_WIRE_CURATOR, rng);
    zklock__make_prefix(b, ZKLOCK_WIRE_CURATOR, rng);
    TU_ASSERT_INT(strlen(a), ==, 40); /* _c_ + 36 + - */
    CU_ASSERT(strncmp(a, "_c_", 3) == 0);
    CU_ASSERT(a[39] == '-' && a[11] == '-' && a[16] == '-' && a[17] == '4');
    CU_ASSERT(strcmp(a, b) != 0);
    zklock__make_prefix(a, ZKLOCK_WIRE_KAZOO, rng);
    TU_ASSERT_INT(strlen(a), ==, 32);
    CU_ASSERT(strspn(a, "0123456789abcdef") == 32);
}

/* ---- order and the rule ------------------------------------------------------------ */

static int index_of(const struct zkl_entry *q, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(q[i].name, name) == 0)
            return i;
    return -1;
}

static int parse_all(const char *const *names, int n, struct zkl_entry *q)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (zklock__parse_name(names[i], &q[m]) == 0)
            m++;
    return m;
}

static void test_sort_mixed_tags(void)
{
    const char *names[] = {
        "_c_b-__READ__0000000005", "cccccccccccccccccccccccccccccccc__lock__0000000002",
        "_c_a-lock-0000000009",    "unrelated",
        "_c_d-__WRIT__0000000001", "_c_e-__READ__0000000001", /* a downgrade heir */
    };
    struct zkl_entry q[6];
    int n = parse_all(names, 6, q);

    TU_ASSERT_INT(n, ==, 5);
    zklock__sort(q, (size_t)n, q[0].seq);
    CU_ASSERT_STRING_EQUAL(q[0].name, "_c_d-__WRIT__0000000001");
    CU_ASSERT_STRING_EQUAL(q[1].name, "_c_e-__READ__0000000001"); /* heir after its writer */
    CU_ASSERT_STRING_EQUAL(q[2].name, "cccccccccccccccccccccccccccccccc__lock__0000000002");
    CU_ASSERT_STRING_EQUAL(q[3].name, "_c_b-__READ__0000000005");
    CU_ASSERT_STRING_EQUAL(q[4].name, "_c_a-lock-0000000009");
}

/* zklock-ls still shows a queue across the wrap in creation order; the
 * engine refuses to queue in one (spent_numbers). */
static void test_sort_across_wrap(void)
{
    /* The queue's order across the wrap of the 32-bit counter... */
    static const char *const sorted[] = {"b-lock-2147483646", "d-lock-2147483647",
                                         "c-lock--2147483648", "a-lock--2147483647"};
    /* ...whatever order the names come in, and with any member's number as
     * the reference: every one a fresh, unsorted listing. */
    static const int32_t refs[] = {2147483646, 2147483647, INT32_MIN, -2147483647};
    static const int listed[][4] = {{3, 0, 2, 1}, {2, 3, 1, 0}, {1, 2, 0, 3}, {0, 1, 2, 3}};

    for (size_t l = 0; l < sizeof listed / sizeof listed[0]; l++) {
        for (size_t r = 0; r < sizeof refs / sizeof refs[0]; r++) {
            const char *names[4];
            struct zkl_entry q[4];
            char msg[96];

            for (int i = 0; i < 4; i++)
                names[i] = sorted[listed[l][i]];
            TU_ASSERT_INT(parse_all(names, 4, q), ==, 4);
            zklock__sort(q, 4, refs[r]);
            for (int i = 0; i < 4; i++) {
                snprintf(msg, sizeof msg, "listing %zu, reference %d: #%d is %s", l, (int)refs[r],
                         i, q[i].name);
                CU_assertImplementation(strcmp(q[i].name, sorted[i]) == 0, __LINE__, msg,
                                        __FILE__, "", CU_FALSE);
            }
        }
    }
}

/* Where Curator's and kazoo's text order stops agreeing with the counter:
 * 2147483647 (ZooKeeper 3.8 gives it again and again) and below 0. */
static void test_spent_numbers(void)
{
    CU_ASSERT(!zklock__seq_spent(0));
    CU_ASSERT(!zklock__seq_spent(ZKL_SEQ_LATE));
    CU_ASSERT(!zklock__seq_spent(2147483646));
    CU_ASSERT(zklock__seq_spent(2147483647));
    CU_ASSERT(zklock__seq_spent(-1));
    CU_ASSERT(zklock__seq_spent(INT32_MIN));
}

static void test_blocker_rule(void)
{
    /* W1 R2 R3 W4 R5 M6: readers share, writers and mutexes exclude. */
    const char *names[] = {"w-__WRIT__0000000001", "r-__READ__0000000002",
                           "r-__READ__0000000003", "w-__WRIT__0000000004",
                           "r-__READ__0000000005", "m-lock-0000000006"};
    struct zkl_entry q[6];
    int n = parse_all(names, 6, q), blockers;

    zklock__sort(q, (size_t)n, 1);
    TU_ASSERT_INT(zklock__blocker(q, 0, &blockers), ==, -1); /* W1 holds */
    TU_ASSERT_INT(zklock__blocker(q, 1, &blockers), ==, 0);  /* R2 waits for W1 */
    TU_ASSERT_INT(blockers, ==, 1);
    TU_ASSERT_INT(zklock__blocker(q, 2, &blockers), ==, 0); /* R3 too, not for R2 */
    TU_ASSERT_INT(zklock__blocker(q, 3, &blockers), ==, 2); /* W4 watches R3 */
    TU_ASSERT_INT(blockers, ==, 3);
    TU_ASSERT_INT(zklock__blocker(q, 4, &blockers), ==, 3); /* R5: nearest writer W4 */
    TU_ASSERT_INT(blockers, ==, 2);
    TU_ASSERT_INT(zklock__blocker(q, 5, &blockers), ==, 4); /* the mutex excludes all */
    TU_ASSERT_INT(blockers, ==, 5);

    /* Without W1, R2 and R3 hold together. */
    TU_ASSERT_INT(zklock__blocker(q + 1, 0, &blockers), ==, -1);
    TU_ASSERT_INT(zklock__blocker(q + 1, 1, &blockers), ==, -1);
    TU_ASSERT_INT(blockers, ==, 0);

    /* A stray of our own never blocks us. */
    q[0].mine = true;
    TU_ASSERT_INT(zklock__blocker(q, 1, &blockers), ==, -1);
    TU_ASSERT_INT(index_of(q, n, "m-lock-0000000006"), ==, 5);
}

/* ---- errors and versions --------------------------------------------------------------- */

/* zklock's own codes, written out: a change to the table in zklock.h must
 * show here too. */
static const struct {
    int code, value;
    const char *name, *text;
} own_codes[] = {
    {ZKLOCK_EINVAL, -1001, "ZKLOCK_EINVAL", "invalid argument"},
    {ZKLOCK_ENOMEM, -1002, "ZKLOCK_ENOMEM", "out of memory"},
    {ZKLOCK_ETIMEDOUT, -1003, "ZKLOCK_ETIMEDOUT", "timed out before the lock was acquired"},
    {ZKLOCK_EBUSY, -1004, "ZKLOCK_EBUSY", "lock is held by another contender"},
    {ZKLOCK_ENOTHELD, -1005, "ZKLOCK_ENOTHELD", "lock is not held by the calling thread"},
    {ZKLOCK_ELOST, -1006, "ZKLOCK_ELOST", "lock was lost (session expired or lock node deleted)"},
    {ZKLOCK_ECANCELED, -1007, "ZKLOCK_ECANCELED", "acquire was canceled"},
    {ZKLOCK_EDEADLK, -1008, "ZKLOCK_EDEADLK",
     "would deadlock: a read holder asked for the write lock, or a call would wait for its own "
     "thread"},
    {ZKLOCK_ECLOSED, -1009, "ZKLOCK_ECLOSED", "session is closed"},
    {ZKLOCK_ENOSERVER, -1010, "ZKLOCK_ENOSERVER", "no ZooKeeper server answered in time"},
    {ZKLOCK_ESYSTEM, -1011, "ZKLOCK_ESYSTEM", "system error (see errno)"},
    {ZKLOCK_ENOTSUP, -1012, "ZKLOCK_ENOTSUP",
     "not supported by this build (e.g. TLS: the ZooKeeper C client was built without OpenSSL)"},
    {ZKLOCK_EOWNER, -1013, "ZKLOCK_EOWNER",
     "a thread-owned lock cannot be used asynchronously or taken in a callback: use a "
     "handle-owned lock (ZKLOCK_OWNER_HANDLE)"},
    {ZKLOCK_EUNSURE, -1014, "ZKLOCK_EUNSURE",
     "no word from ZooKeeper for nearly a session timeout: the session may have expired, so the "
     "lock may be taken"},
    {ZKLOCK_EMISMATCH, -1015, "ZKLOCK_EMISMATCH",
     "the semaphore's path holds another number of leases than asked for (kazoo's check)"},
    {ZKLOCK_EWRAPPED, -1016, "ZKLOCK_EWRAPPED",
     "the lock path's sequence counter ran out (2^31 nodes made under it): delete and re-create "
     "the path, or let an empty container be reaped"},
    {ZKLOCK_EDELETED, -1017, "ZKLOCK_EDELETED",
     "the lock node was deleted by someone else: the lock may be taken"},
    {ZKLOCK_ERESOLVE, -1018, "ZKLOCK_ERESOLVE",
     "no name in the server list resolves (now): check the names, or DNS"},
    {ZKLOCK_EMAXHOLD, -1019, "ZKLOCK_EMAXHOLD",
     "the hold reached its maximum (max_hold_ms): zklock released it"},
};

static void test_errors(void)
{
    const size_t n = sizeof own_codes / sizeof own_codes[0];

    CU_ASSERT_STRING_EQUAL(zklock_strerror(0), "ok");
    CU_ASSERT_STRING_EQUAL(zklock_err_name(ZKLOCK_EBUSY), "ZKLOCK_EBUSY");
    CU_ASSERT_STRING_EQUAL(zklock_err_name(ZCONNECTIONLOSS), "ZCONNECTIONLOSS");
    CU_ASSERT_STRING_EQUAL(zklock_err_name(ZKLOCK_OK), "ZKLOCK_OK");
    CU_ASSERT_STRING_EQUAL(zklock_err_name(12345), "UNKNOWN");
    CU_ASSERT_STRING_EQUAL(zklock_strerror(12345), "unknown error");
    CU_ASSERT_STRING_EQUAL(zklock_strerror(ZNONODE), zerror(ZNONODE));
    /* on_lost's reasons read as what happened, not as a ZooKeeper error
     * ("no node" for a deleted lock node, once) */
    CU_ASSERT((int)ZKLOCK_LOST_DELETED != (int)ZNONODE);
    CU_ASSERT_STRING_EQUAL(zklock_strerror(ZKLOCK_LOST_DELETED),
                           "the lock node was deleted by someone else: the lock may be taken");
    CU_ASSERT_STRING_EQUAL(zklock_err_name(ZKLOCK_LOST_DELETED), "ZKLOCK_EDELETED");
    CU_ASSERT_STRING_EQUAL(zklock_strerror(ZKLOCK_ETIMEDOUT),
                           "timed out before the lock was acquired");
    /* zklock's own codes: their values, names and texts, and every one
     * below every ZooKeeper code */
    for (size_t i = 0; i < n; i++) {
        TU_ASSERT_INT(own_codes[i].code, ==, own_codes[i].value);
        TU_ASSERT_INT(own_codes[i].code, <=, ZKLOCK_ERRNO_BASE);
        CU_ASSERT_STRING_EQUAL(zklock_err_name(own_codes[i].code), own_codes[i].name);
        CU_ASSERT_STRING_EQUAL(zklock_strerror(own_codes[i].code), own_codes[i].text);
    }
    TU_ASSERT_INT(ZTHROTTLEDOP, >, ZKLOCK_ERRNO_BASE);
    /* and the table above names them all: a new code needs its line */
#define COUNT_CODE(name, value, msg) +1
    TU_ASSERT_INT(0 ZKLOCK_ERRNO_MAP(COUNT_CODE), ==, n);
#undef COUNT_CODE
    CU_ASSERT_STRING_EQUAL(zklock_err_name(ZKLOCK_ERRNO_BASE - 1 - (int)n), "UNKNOWN");
    CU_ASSERT_STRING_EQUAL(zklock_state_name(ZKLOCK_SUSPENDED), "SUSPENDED");
    CU_ASSERT_STRING_EQUAL(zklock_state_name(99), "UNKNOWN");
}

static long version_hex_1_2_3(void), version_hex_10_0_255(void);

static void test_version(void)
{
    int major = -1, minor = -1, patch = -1;
    char more;

    /* The library's version, as configure wrote it: three numbers, which
     * the header's parts and 0xMMmmpp spell the same. */
    CU_ASSERT_STRING_EQUAL(zklock_version(), ZKLOCK_VERSION);
    TU_ASSERT_INT(sscanf(zklock_version(), "%d.%d.%d%c", &major, &minor, &patch, &more), ==, 3);
    TU_ASSERT_INT(ZKLOCK_VERSION_MAJOR, ==, major);
    TU_ASSERT_INT(ZKLOCK_VERSION_MINOR, ==, minor);
    TU_ASSERT_INT(ZKLOCK_VERSION_PATCH, ==, patch);
    TU_ASSERT_INT(ZKLOCK_VERSION_HEX, ==, major * 0x10000 + minor * 0x100 + patch);
    /* The layout for versions written out (see the end of this file). */
    TU_ASSERT_INT(version_hex_1_2_3(), ==, 0x010203);
    TU_ASSERT_INT(version_hex_10_0_255(), ==, 0x0a00ff);
}

/* ---- the timer heap ---------------------------------------------------------------- */

struct rec_timer {
    struct zkl_timer t;
    int id;
};
static int fired[512], nfired;

static void record_fire(struct zkl_timer *t, zklock_session_t *s)
{
    fired[nfired++] = ((struct rec_timer *)t)->id;
}

/* Timers fire in deadline order, whatever the order of arming, re-arming and
 * cancelling; a cancelled timer never fires. */
static void test_timer_heap(void)
{
    static struct rec_timer timers[400];
    zklock_session_t s;
    struct timespec base;
    bool cancelled[400] = {false};
    unsigned seed = 12345;
    int expect = 0;

    memset(&s, 0, sizeof s);
    s.wire = &zklock__real_wire;
    TU_REQUIRE_RC(zklock__timers_reserve(&s, 400), 0);
    zklock__now(&s, &base);
    base.tv_sec -= 10; /* every deadline below has passed */
    for (int i = 0; i < 400; i++) {
        struct timespec at;
        seed = seed * 1103515245u + 12345u;
        timers[i] = (struct rec_timer){{{0, 0}, 0, record_fire}, i};
        zklock__later(&at, &base, (int64_t)(seed >> 8) % 5000);
        zklock__timer_arm(&s, &timers[i].t, &at);
    }
    for (int i = 0; i < 400; i += 3) { /* re-arm a third at other times */
        struct timespec at;
        seed = seed * 1103515245u + 12345u;
        zklock__later(&at, &base, (int64_t)(seed >> 8) % 5000);
        zklock__timer_arm(&s, &timers[i].t, &at);
    }
    for (int i = 1; i < 400; i += 7) {
        zklock__timer_cancel(&s, &timers[i].t);
        cancelled[i] = true;
    }
    for (int i = 0; i < 400; i++)
        expect += !cancelled[i];
    TU_ASSERT_INT(s.timers.n, ==, expect);
    nfired = 0;
    zklock__timers_fire_due(&s);
    TU_ASSERT_INT(nfired, ==, expect);
    TU_ASSERT_INT(s.timers.n, ==, 0);
    for (int i = 0; i < nfired; i++) {
        TU_ASSERT_INT(cancelled[fired[i]], ==, false);
        TU_ASSERT_INT(zklock__timer_armed(&timers[fired[i]].t), ==, false);
        if (i > 0)
            TU_ASSERT_INT(zklock__earlier(&timers[fired[i]].t.at, &timers[fired[i - 1]].t.at), ==, false);
    }
    zklock__timers_free(&s);
}

/* ---- the rules (rules.c) ----------------------------------------------------------- */

#define A "_c_aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa-" /* us */
#define B "_c_bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb-"
#define C "_c_cccccccc-cccc-4ccc-8ccc-cccccccccccc-"
#define OLD "_c_dddddddd-dddd-4ddd-8ddd-dddddddddddd-" /* a session we gave up */

static bool stale_old(const void *ctx, const char *name)
{
    (void)ctx;
    return strncmp(name, OLD, strlen(OLD)) == 0;
}

/* A listing and what it means for us: a table. */
static void test_queue_rules(void)
{
    static const struct {
        const char *what;
        const char *names[6];  /* the listing, NULL-terminated */
        const char *own;       /* our node (NULL: none) */
        bool shared, recovering, try_once, heir, late;
        const char *writer;    /* a heir's writer's node */
        enum zkl_verdict_kind kind;
        const char *node;      /* the verdict's node (WATCH, FOUND) */
        bool sole, alone;
        int strays;
    } t[] = {
        {"free", {A "lock-0000000003"}, A "lock-0000000003", .kind = ZKL_V_HOLDS, .alone = true},
        {"first of two", {B "lock-0000000004", A "lock-0000000003"}, A "lock-0000000003",
         .kind = ZKL_V_HOLDS},
        {"behind one", {B "lock-0000000002", A "lock-0000000003"}, A "lock-0000000003",
         .kind = ZKL_V_WATCH, .node = B "lock-0000000002", .sole = true},
        {"behind two: the nearest", {C "lock-0000000001", B "lock-0000000002", A "lock-0000000003"},
         A "lock-0000000003", .kind = ZKL_V_WATCH, .node = B "lock-0000000002"},
        {"try-once, blocked", {B "lock-0000000002", A "lock-0000000003"}, A "lock-0000000003",
         .try_once = true, .kind = ZKL_V_BUSY},
        {"a writer behind a writer lists again", {B "__WRIT__0000000002", A "__WRIT__0000000003"},
         A "__WRIT__0000000003", .kind = ZKL_V_WATCH, .node = B "__WRIT__0000000002"},
        {"a reader behind a writer does not", {B "__WRIT__0000000002", A "__READ__0000000003"},
         A "__READ__0000000003", .shared = true, .kind = ZKL_V_WATCH,
         .node = B "__WRIT__0000000002", .sole = true},
        {"readers do not block a reader",
         {C "__READ__0000000001", B "__WRIT__0000000002", A "__READ__0000000004",
          C "__READ__0000000003"},
         A "__READ__0000000004", .shared = true, .kind = ZKL_V_WATCH,
         .node = B "__WRIT__0000000002", .sole = true},
        {"two writers ahead of a reader", {C "__WRIT__0000000001", B "__WRIT__0000000002",
         A "__READ__0000000003"}, A "__READ__0000000003", .shared = true, .kind = ZKL_V_WATCH,
         .node = B "__WRIT__0000000002"},
        {"readers only", {C "__READ__0000000001", A "__READ__0000000002"}, A "__READ__0000000002",
         .shared = true, .kind = ZKL_V_HOLDS},
        {"a kazoo writer", {"0123456789abcdef0123456789abcdef__lock__0000000002", A "__lock__0000000003"},
         A "__lock__0000000003", .kind = ZKL_V_WATCH,
         .node = "0123456789abcdef0123456789abcdef__lock__0000000002"},
        {"the counter's upper half lists again",
         {B "lock-1073741830", A "lock-1073741831"}, A "lock-1073741831", .late = true,
         .kind = ZKL_V_WATCH, .node = B "lock-1073741830"},
        {"our node is gone", {B "lock-0000000002"}, A "lock-0000000003", .kind = ZKL_V_NODE_GONE},
        {"our number is spent", {A "lock-2147483647"}, A "lock-2147483647", .kind = ZKL_V_SPENT},
        {"a negative number ahead", {B "lock--2147483646", A "lock-0000000003"},
         A "lock-0000000003", .kind = ZKL_V_SPENT},
        {"a stray of ours never blocks", {A "lock-0000000002", A "lock-0000000003"},
         A "lock-0000000003", .kind = ZKL_V_HOLDS, .strays = 1},
        {"nor a node of a session we gave up", {OLD "lock-0000000001", A "lock-0000000003"},
         A "lock-0000000003", .kind = ZKL_V_HOLDS, .strays = 1},
        {"unrelated children, and a kazoo lease, ignored",
         {"config", "0123456789abcdef0123456789abcdef", A "lock-0000000003", "lock-"},
         A "lock-0000000003", .kind = ZKL_V_HOLDS, .alone = true},
        {"recovering: found", {B "lock-0000000002", A "lock-0000000003"}, NULL, .recovering = true,
         .kind = ZKL_V_FOUND, .node = A "lock-0000000003", .strays = 1},
        {"recovering: a stale node is not ours", {OLD "lock-0000000002"}, NULL, .recovering = true,
         .kind = ZKL_V_NOT_FOUND, .strays = 1},
        {"recovering: never made", {B "lock-0000000002"}, NULL, .recovering = true,
         .kind = ZKL_V_NOT_FOUND},
        {"recovering heir, its writer there", {C "__WRIT__0000000002"}, NULL, .shared = true,
         .recovering = true, .heir = true, .writer = C "__WRIT__0000000002",
         .kind = ZKL_V_NOT_FOUND},
        {"recovering heir, its writer gone", {B "__WRIT__0000000005"}, NULL, .shared = true,
         .recovering = true, .heir = true, .writer = C "__WRIT__0000000002",
         .kind = ZKL_V_HEIR_ORPHANED},
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct String_vector names = {0, (char **)t[i].names};
        struct zkl_entry q[6];
        struct zkl_entry own;
        struct zkl_queue_facts f = {.prefix = A, .own = t[i].own, .recovering = t[i].recovering,
                                    .exclusive = !t[i].shared, .try_once = t[i].try_once,
                                    .heir = t[i].heir, .writer = t[i].writer,
                                    .stale = stale_old};
        struct zkl_verdict v;
        int n, self, strays = 0;
        char msg[160];

        while (names.count < 6 && t[i].names[names.count])
            names.count++;
        if (t[i].own && zklock__parse_name(t[i].own, &own) == 0)
            f.seq = own.seq;
        n = zklock__queue_read(&f, &names, q, &self);
        /* creations: one more than our number, as when nothing came after us */
        zklock__queue_judge(&f, q, n, self, (int64_t)f.seq + 1, &v);
        for (int k = 0; k < n; k++)
            strays += q[k].mine;
        snprintf(msg, sizeof msg, "%s: kind %d (want %d)", t[i].what, v.kind, t[i].kind);
        CU_assertImplementation(v.kind == t[i].kind, __LINE__, msg, __FILE__, "", CU_FALSE);
        snprintf(msg, sizeof msg, "%s: node %s", t[i].what, v.node ? v.node->name : "-");
        CU_assertImplementation((!t[i].node && !v.node) ||
                                    (t[i].node && v.node && strcmp(v.node->name, t[i].node) == 0),
                                __LINE__, msg, __FILE__, "", CU_FALSE);
        snprintf(msg, sizeof msg, "%s: sole %d alone %d strays %d", t[i].what, v.sole, v.alone,
                 strays);
        CU_assertImplementation(v.sole == t[i].sole && v.alone == t[i].alone &&
                                    strays == t[i].strays,
                                __LINE__, msg, __FILE__, "", CU_FALSE);
        CU_ASSERT(!t[i].late || f.seq >= ZKL_SEQ_LATE);
    }
}

/* The fast path's arithmetic: the listing's count of creations, "alone",
 * and a node made without a listing. */
static void test_fast_path_rules(void)
{
    /* cversion = creations + deletions = 2 * creations - children */
    TU_ASSERT_INT(zklock__creations(2 * 10 - 1, 1), ==, 10);
    TU_ASSERT_INT(zklock__creations(2 * 10 - 3, 2), ==, -1); /* does not add up */
    TU_ASSERT_INT(zklock__creations(-5, 1), ==, -1);
    CU_ASSERT(zklock__fast_alone(1, 9, 10));
    CU_ASSERT(!zklock__fast_alone(1, 9, 11)); /* something was made after us */
    CU_ASSERT(!zklock__fast_alone(2, 9, 10));
    /* our next number, our delete between our two creates */
    CU_ASSERT(zklock__fast_holds(10, 0x500000102, 9, 0x500000100));
    CU_ASSERT(!zklock__fast_holds(11, 0x500000102, 9, 0x500000100)); /* someone came */
    CU_ASSERT(!zklock__fast_holds(10, 0x500000103, 9, 0x500000100)); /* one foreign txn */
    CU_ASSERT(zklock__fast_holds(640, 0x500000100 + 12, 639, 0x500000100)); /* 2 + 640 / 64 */
    CU_ASSERT(!zklock__fast_holds(640, 0x500000100 + 13, 639, 0x500000100));
    CU_ASSERT(!zklock__fast_holds(10, 0x600000002, 9, 0x500000100)); /* another epoch */
    CU_ASSERT(!zklock__fast_holds(0, 0x500000102, -1, 0x500000100)); /* a path made again */
}

/* The semaphore's leases and kazoo's number. */
static void test_lease_rules(void)
{
    static const struct {
        const char *names[4];
        const char *own;
        int max;
        bool try_once, under_mutex;
        enum zkl_lease_verdict want;
        bool room;
    } t[] = {
        {{"a", "b"}, "a", 2, .want = ZKL_LEASE_HOLDS},
        {{"a"}, "a", 2, .want = ZKL_LEASE_HOLDS, .room = true},
        {{"a", "b", "c"}, "c", 2, .under_mutex = true, .want = ZKL_LEASE_WAIT},
        {{"a", "b", "c"}, "c", 2, .want = ZKL_LEASE_START_OVER},
        {{"a", "b", "c"}, "c", 2, .try_once = true, .under_mutex = true, .want = ZKL_LEASE_BUSY},
        {{"a", "b"}, "c", 2, .under_mutex = true, .want = ZKL_LEASE_GONE},
        {{"a"}, NULL, 2, .want = ZKL_LEASE_GONE},
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct String_vector names = {0, (char **)t[i].names};
        bool room;
        while (names.count < 4 && t[i].names[names.count])
            names.count++;
        TU_ASSERT_INT(zklock__leases_judge(&names, t[i].own, t[i].max, t[i].try_once,
                                           t[i].under_mutex, &room), ==, t[i].want);
        TU_ASSERT_INT(room, ==, t[i].room);
    }
    {
        char *leases[] = {"x", A "lease-0000000001", B "lease-0000000002"};
        struct String_vector names = {3, leases};
        CU_ASSERT_STRING_EQUAL(zklock__leases_find(&names, A), A "lease-0000000001");
        CU_ASSERT_PTR_NULL(zklock__leases_find(&names, C));
    }
    CU_ASSERT(!zklock__max_differs("3", 1, 3));
    CU_ASSERT(zklock__max_differs("4", 1, 3));
    CU_ASSERT(!zklock__max_differs("three", 5, 3)); /* kazoo ignores what is not a number */
    CU_ASSERT(!zklock__max_differs("4 ", 2, 3)); /* nor a number with a tail */
    CU_ASSERT(!zklock__max_differs(NULL, 0, 3));
    CU_ASSERT(!zklock__max_differs("12345678901234567890", 20, 3));
}

/* ---- a contender's phases (phase.c) ------------------------------------------------- */

static void test_phase_table(void)
{
    /* Every pair, against the diagram in phase.c. */
    static const struct {
        enum zkl_phase from;
        const char *to; /* the phases it may go to, by initial */
    } table[] = {
        {ZKL_QUEUING, "QRHVG"}, /* Q(ueuing) R (granting) H(eld) V (leaving) G(one) */
        {ZKL_GRANTING, "QHVG"},
        {ZKL_HELD, "QLV"},      /* L(ost) */
        {ZKL_LOST, ""},
        {ZKL_LEAVING, "VG"},
        {ZKL_GONE, ""},
    };
    static const char initial[ZKL_PHASE_COUNT] = {
        [ZKL_QUEUING] = 'Q', [ZKL_GRANTING] = 'R', [ZKL_HELD] = 'H',
        [ZKL_LOST] = 'L',    [ZKL_LEAVING] = 'V',  [ZKL_GONE] = 'G',
    };

    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        for (int to = 0; to < ZKL_PHASE_COUNT; to++) {
            bool want = strchr(table[i].to, initial[to]) != NULL;
            char msg[128];
            snprintf(msg, sizeof msg, "%s -> %s", zklock__phase_name(table[i].from),
                     zklock__phase_name((enum zkl_phase)to));
            CU_assertImplementation(zklock__phase_allowed(table[i].from, (enum zkl_phase)to) == want,
                                    __LINE__, msg, __FILE__, "", CU_FALSE);
        }
    }
    CU_ASSERT(!zklock__phase_allowed(ZKL_PHASE_COUNT, ZKL_QUEUING));
    CU_ASSERT(!zklock__phase_allowed(ZKL_QUEUING, (enum zkl_phase)-1));
    CU_ASSERT_STRING_EQUAL(zklock__phase_name(ZKL_GRANTING), "GRANTING");
    CU_ASSERT_STRING_EQUAL(zklock__phase_name(ZKL_PHASE_COUNT), "?");
}

/* "11,12" into out[]: how many. */
static int numbers(const char *list, int32_t *out)
{
    int n = 0;

    for (const char *p = list; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0))
        out[n++] = (int32_t)atoi(p);
    return n;
}

/* The previous holder's fate (record.c): the record speaks for the hold
 * before ours only when nobody else can have held in between. The record's
 * holder T has sequence number 10 and czxid 100; ours is czxid 200. */
static void test_previous_judge(void)
{
    enum { NO, NONE, HELD, REL, LATER } ;
    static const struct {
        const char *what;
        int record;          /* NO: absent; LATER: a version we do not know */
        int64_t created;     /* the record node's czxid */
        const char *never;   /* its give-ups */
        bool blocked;
        int32_t blocker, seq;
        const char *former;  /* our own earlier nodes that never held */
        int how;
    } t[] = {
        {"no record, the path's first node", NO, 0, "", false, 0, 0, "", ZKLOCK_PREV_NONE},
        {"no record, our own earlier node first", NO, 0, "", false, 0, 1, "0", ZKLOCK_PREV_NONE},
        {"no record, nodes created before ours", NO, 0, "", false, 0, 5, "", ZKLOCK_PREV_UNKNOWN},
        {"no record, blocked by somebody", NO, 0, "", true, 4, 5, "", ZKLOCK_PREV_UNKNOWN},
        {"no holder yet, every node before ours gave up", NONE, 60, "0,1", false, 0, 3, "",
         ZKLOCK_PREV_NONE},
        {"no holder yet, one node unaccounted for", NONE, 60, "0", false, 0, 3, "",
         ZKLOCK_PREV_UNKNOWN},
        {"blocked by T: released", REL, 90, "", true, 10, 14, "", ZKLOCK_PREV_CLEAN},
        {"blocked by T: held", HELD, 90, "", true, 10, 14, "", ZKLOCK_PREV_UNCLEAN},
        {"blocked by another", REL, 90, "", true, 12, 14, "", ZKLOCK_PREV_UNKNOWN},
        {"blocked by another that gave up", REL, 90, "11,12,13", true, 12, 14, "",
         ZKLOCK_PREV_CLEAN},
        {"not blocked, right after T", REL, 90, "", false, 0, 11, "", ZKLOCK_PREV_CLEAN},
        {"not blocked, right after T, T died", HELD, 90, "", false, 0, 11, "",
         ZKLOCK_PREV_UNCLEAN},
        {"not blocked, T made the record between", REL, 150, "", false, 0, 12, "",
         ZKLOCK_PREV_CLEAN},
        {"not blocked, one more node between", REL, 90, "", false, 0, 12, "",
         ZKLOCK_PREV_UNKNOWN},
        {"not blocked, the nodes between gave up", HELD, 90, "11,12", false, 0, 13, "",
         ZKLOCK_PREV_UNCLEAN},
        {"not blocked, gave up and our own former node", REL, 90, "11", false, 0, 13, "12",
         ZKLOCK_PREV_CLEAN},
        {"not blocked, give-ups but one gap", REL, 90, "11,13", false, 0, 14, "",
         ZKLOCK_PREV_UNKNOWN},
        {"not blocked, give-ups after ours do not count", REL, 90, "11,15", false, 0, 13, "",
         ZKLOCK_PREV_UNKNOWN},
        {"not blocked, record made between and one more node", REL, 150, "", false, 0, 13, "",
         ZKLOCK_PREV_UNKNOWN},
        {"not blocked, record made after our node", REL, 250, "", false, 0, 12, "",
         ZKLOCK_PREV_UNKNOWN},
        {"not blocked, a number below T's (path made again)", REL, 90, "", false, 0, 3, "",
         ZKLOCK_PREV_UNKNOWN},
        {"a record of a later version", LATER, 90, "", true, 10, 11, "", ZKLOCK_PREV_UNKNOWN},
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct zkl_record_view v = {.present = t[i].record != NO, .parsed = t[i].record != LATER,
                                    .czxid = t[i].created};
        int32_t former[ZKL_FORMER_MAX];
        struct zkl_hold_view me = {.was_blocked = t[i].blocked, .blocker_seq = t[i].blocker,
                                   .seq = t[i].seq, .czxid = 200, .former = former};
        int how;

        v.rec = (struct zkl_record){.state = t[i].record == NONE ? ZKL_REC_NONE
                                             : t[i].record == REL ? ZKL_REC_RELEASED
                                                                  : ZKL_REC_HELD,
                                    .token = t[i].record == NONE ? 0 : 100,
                                    .seq = t[i].record == NONE ? -1 : 10};
        v.rec.nnever = numbers(t[i].never, v.rec.never);
        me.nformer = numbers(t[i].former, former);
        how = zklock__previous_judge(&v, &me);
        if (how != t[i].how)
            fprintf(stderr, "  %s: %s, expected %s\n", t[i].what, zklock_previous_name(how),
                    zklock_previous_name(t[i].how));
        CU_ASSERT_EQUAL(how, t[i].how);
    }
}

/* The judge's cost does not grow with the numbers between the record's
 * holder and us (a lock path's count of creations: up to 2^31 on a
 * long-lived path with untracked peers), only with the lists it reads: it
 * runs under the session's mutex. It walked every number between, each
 * against the whole list: 2^25 numbers took seconds (2^31, minutes). */
static void test_previous_judge_cost(void)
{
    struct zkl_record_view v = {.present = true, .parsed = true, .czxid = 90,
                                .rec = {.state = ZKL_REC_RELEASED, .token = 100, .seq = 10}};
    int32_t former[ZKL_FORMER_MAX];
    struct zkl_hold_view me = {.seq = 10 + (1 << 25), .czxid = 200, .former = former};
    struct timespec t0, t1;
    int how;

    for (int i = 0; i < ZKL_RECORD_NEVER_MAX; i++)
        v.rec.never[v.rec.nnever++] = 11 + i;
    for (int i = 0; i < ZKL_FORMER_MAX; i++)
        former[me.nformer++] = 11 + ZKL_RECORD_NEVER_MAX + i;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    how = zklock__previous_judge(&v, &me);
    v.rec.state = ZKL_REC_NONE; /* no holder yet: every number before ours */
    v.rec.seq = -1;
    CU_ASSERT_EQUAL(zklock__previous_judge(&v, &me), ZKLOCK_PREV_UNKNOWN);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CU_ASSERT_EQUAL(how, ZKLOCK_PREV_UNKNOWN);
    TU_ASSERT_INT((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, <, 100);
    /* and every number between accounted for: vouched */
    v.rec = (struct zkl_record){.state = ZKL_REC_RELEASED, .token = 100, .seq = 10};
    for (int i = 0; i < ZKL_RECORD_NEVER_MAX; i++)
        v.rec.never[v.rec.nnever++] = 11 + i;
    me.seq = 11 + ZKL_RECORD_NEVER_MAX + ZKL_FORMER_MAX;
    CU_ASSERT_EQUAL(zklock__previous_judge(&v, &me), ZKLOCK_PREV_CLEAN);
    former[0] = former[1]; /* the same number twice counts once */
    CU_ASSERT_EQUAL(zklock__previous_judge(&v, &me), ZKLOCK_PREV_UNKNOWN);
}

/* The record's data: the versions and states it knows, nothing else; what
 * it writes it reads back. */
static void test_record_parse(void)
{
    struct zkl_record r, back;
    const char *v1 = "1 released 4294967301 42 host:123";
    const char *v2 = "2 held 4294967301 42 1700000000123 6000 43,45 47@1700000000456 host:1 more";
    char *text;
    int len;

    CU_ASSERT_EQUAL(zklock__record_parse(v1, (int)strlen(v1), &r), 0);
    CU_ASSERT_EQUAL(r.state, ZKL_REC_RELEASED);
    CU_ASSERT_EQUAL(r.token, 4294967301LL);
    CU_ASSERT_EQUAL(r.seq, 42);
    TU_ASSERT_INT(r.timeout_ms, ==, 0); /* version 1: nothing bounds its holder */
    CU_ASSERT_EQUAL(zklock__record_parse("1 held 7 3 ", 11, &r), 0);
    CU_ASSERT_EQUAL(r.state, ZKL_REC_HELD);
    CU_ASSERT_EQUAL(zklock__record_parse(v2, (int)strlen(v2), &r), 0);
    CU_ASSERT_EQUAL(r.state, ZKL_REC_HELD);
    TU_ASSERT_INT(r.alive_ms, ==, 1700000000123LL);
    TU_ASSERT_INT(r.timeout_ms, ==, 6000);
    TU_ASSERT_INT(r.nnever, ==, 2);
    TU_ASSERT_INT(r.never[1], ==, 45);
    TU_ASSERT_INT(r.gone_below, ==, 47);
    TU_ASSERT_INT(r.gone_by_ms, ==, 1700000000456LL);
    text = zklock__record_format(&r, "host:123", &len);
    CU_ASSERT_FATAL(text != NULL);
    TU_ASSERT_INT(len, ==, (int)strlen(text));
    CU_ASSERT_EQUAL(zklock__record_parse(text, len, &back), 0);
    CU_ASSERT(memcmp(&r, &back, sizeof r) == 0);
    free(text);
    r.nnever = 0;
    r.gone_below = 0;
    text = zklock__record_format(&r, "", &len);
    CU_ASSERT_STRING_EQUAL(text, "2 held 4294967301 42 1700000000123 6000 - - ");
    free(text);
    CU_ASSERT_EQUAL(zklock__record_parse("3 held 7 3 0 0 - x", 18, &r), -1); /* a later version */
    CU_ASSERT_EQUAL(zklock__record_parse("1 gone 7 3 x", 12, &r), -1);       /* no such state */
    CU_ASSERT_EQUAL(zklock__record_parse("1 none 7 3 x", 12, &r), -1);       /* not in version 1 */
    CU_ASSERT_EQUAL(zklock__record_parse("1 held 7", 8, &r), -1);            /* cut short */
    CU_ASSERT_EQUAL(zklock__record_parse("2 held 7 3 0 0 -", 16, &r), -1);
    CU_ASSERT_EQUAL(zklock__record_parse("2 held 7 3 0 0 1,x - y", 22, &r), -1);
    CU_ASSERT_EQUAL(zklock__record_parse("2 held 7 3 -5 0 - - y", 21, &r), -1);
    CU_ASSERT_EQUAL(zklock__record_parse("2 held 7 3 0 0 - 5@x y", 22, &r), -1);
    CU_ASSERT_EQUAL(zklock__record_parse("2 held 7 3 0 0 - 5@-1 y", 23, &r), -1);
    CU_ASSERT_EQUAL(zklock__record_parse("__REVOKE__", 10, &r), -1);
    CU_ASSERT_EQUAL(zklock__record_parse(NULL, 0, &r), -1);
}

/* What each writer makes of the record: a holder keeps only the give-ups
 * after its own number; a give-up adds its numbers in order, keeps the
 * holder's last sign of life, and finds a full list full; the end of an
 * unclean hold is its last write plus its session timeout. */
static void test_record_writers(void)
{
    struct zkl_record r = {.state = ZKL_REC_HELD, .token = 100, .seq = 10, .timeout_ms = 6000,
                           .nnever = 3, .never = {11, 12, 14}};
    struct zkl_record_view v = {.present = true, .parsed = true, .mtime = 5000};
    int32_t former[] = {13};

    CU_ASSERT(zklock__record_give_up(&r, 5000, 16, former, 1));
    TU_ASSERT_INT(r.nnever, ==, 5);
    TU_ASSERT_INT(r.never[2], ==, 13);
    TU_ASSERT_INT(r.never[4], ==, 16);
    TU_ASSERT_INT(r.alive_ms, ==, 5000); /* the holder's write, not ours */
    CU_ASSERT(zklock__record_give_up(&r, 9000, 15, NULL, 0));
    TU_ASSERT_INT(r.alive_ms, ==, 5000);
    v.rec = r;
    TU_ASSERT_INT(zklock__record_end_ms(&v), ==, 11000);
    zklock__record_hold(&r, false, 200, 14, 4000);
    TU_ASSERT_INT(r.nnever, ==, 2); /* 15, 16 */
    TU_ASSERT_INT(r.never[0], ==, 15);
    TU_ASSERT_INT(r.alive_ms, ==, 0);
    v.rec = r;
    TU_ASSERT_INT(zklock__record_end_ms(&v), ==, 9000); /* its own write's mtime */
    zklock__record_hold(&r, true, 200, 14, 4000);
    v.rec = r;
    TU_ASSERT_INT(zklock__record_end_ms(&v), ==, -1); /* released: no unclean end */
    r = (struct zkl_record){.state = ZKL_REC_NONE, .seq = -1};
    for (int i = 0; i < ZKL_RECORD_NEVER_MAX; i++)
        CU_ASSERT(zklock__record_give_up(&r, 0, i, NULL, 0));
    CU_ASSERT(!zklock__record_give_up(&r, 0, ZKL_RECORD_NEVER_MAX, NULL, 0));
    TU_ASSERT_INT(r.nnever, ==, ZKL_RECORD_NEVER_MAX);
}

/* A "held" that landed as its contender gave up is undone: the record the
 * write replaced (its holder, its give-ups, including those before the
 * writer's number), with the give-ups written since. */
static void test_record_undo(void)
{
    const struct zkl_record before = {.state = ZKL_REC_HELD, .token = 100, .seq = 10,
                                      .alive_ms = 0, .timeout_ms = 6000, .nnever = 1,
                                      .never = {11}};
    struct zkl_record r = before;

    zklock__record_hold(&r, false, 200, 12, 4000); /* forgets 11 */
    CU_ASSERT(zklock__record_give_up(&r, 9000, 13, NULL, 0));
    CU_ASSERT(zklock__record_undo(&r, &before));
    CU_ASSERT(r.state == ZKL_REC_HELD && r.token == 100 && r.seq == 10 && r.timeout_ms == 6000);
    TU_ASSERT_INT(r.alive_ms, ==, 0); /* its holder's own write: the caller gives its mtime */
    TU_ASSERT_INT(r.nnever, ==, 2);
    TU_ASSERT_INT(r.never[0], ==, 11);
    TU_ASSERT_INT(r.never[1], ==, 13);
    r = (struct zkl_record){.state = ZKL_REC_HELD, .token = 200, .seq = 12, .nnever = 1,
                            .never = {13}};
    CU_ASSERT(zklock__record_undo(&r, NULL)); /* there was no record */
    CU_ASSERT(r.state == ZKL_REC_NONE && r.seq == -1 && r.nnever == 1 && r.never[0] == 13);
}

/* After UNKNOWN, the delay runs from the time the first turn that read it
 * saw the nodes before it gone (its give-up writes "gone"), for as long as
 * every node the record does not account for lies below that turn's; the
 * next give-up keeps that time; a hold forgets it. */
static void test_record_gone(void)
{
    struct zkl_record_view v = {.present = true, .parsed = true, .mtime = 7000,
                                .rec = {.state = ZKL_REC_RELEASED, .token = 100, .seq = 10}};
    struct zkl_hold_view first = {.seq = 13, .czxid = 200}, next = {.seq = 15, .czxid = 300},
                         later = {.seq = 17, .czxid = 400};
    struct zkl_record r;

    /* 11 and 12 are nobody's: the first turn, 13, reads UNKNOWN and gives up */
    TU_ASSERT_INT(zklock__previous_judge(&v, &first), ==, ZKLOCK_PREV_UNKNOWN);
    TU_ASSERT_INT(zklock__unknown_gone_ms(&v, &first), ==, -1); /* from its own turn */
    r = v.rec;
    CU_ASSERT(zklock__record_give_up(&r, v.mtime, first.seq, NULL, 0));
    zklock__record_saw_gone(&r, &v, &first);
    TU_ASSERT_INT(r.gone_below, ==, 13);
    TU_ASSERT_INT(r.gone_by_ms, ==, 0); /* its write's mtime */
    v.rec = r;
    v.mtime = 8000;
    /* 15 (14 gave up too, as 13 did): the same unknown nodes, the same time */
    CU_ASSERT(zklock__record_give_up(&v.rec, 8000, 14, NULL, 0));
    TU_ASSERT_INT(v.rec.gone_by_ms, ==, 8000); /* carried past 14's write */
    TU_ASSERT_INT(zklock__previous_judge(&v, &next), ==, ZKLOCK_PREV_UNKNOWN);
    TU_ASSERT_INT(zklock__unknown_gone_ms(&v, &next), ==, 8000);
    r = v.rec;
    zklock__record_saw_gone(&r, &v, &next);
    TU_ASSERT_INT(r.gone_below, ==, 13); /* kept: the earlier time stays */
    /* 17: 15 and 16 are nobody's, made after 13's turn: from its own turn */
    TU_ASSERT_INT(zklock__unknown_gone_ms(&v, &later), ==, -1);
    zklock__record_saw_gone(&r, &v, &later);
    TU_ASSERT_INT(r.gone_below, ==, 17);
    TU_ASSERT_INT(r.gone_by_ms, ==, 0);
    /* a hold: nothing before it is asked about any more */
    zklock__record_hold(&r, true, 500, 18, 4000);
    TU_ASSERT_INT(r.gone_below, ==, 0);
}

static const tu_test_t unit_tests[] = {
    {"stats_buckets", test_stats_buckets},
    {"path_table", test_path_table},
    {"path_length", test_path_length},
    {"hosts_table", test_hosts_table},
    {"hosts_resolve", test_hosts_resolve},
    {"parse_names", test_parse_names},
    {"prefixes", test_prefixes},
    {"sort_mixed_tags", test_sort_mixed_tags},
    {"sort_across_wrap", test_sort_across_wrap},
    {"spent_numbers", test_spent_numbers},
    {"blocker_rule", test_blocker_rule},
    {"errors", test_errors},
    {"version", test_version},
    {"timer_heap", test_timer_heap},
    {"queue_rules", test_queue_rules},
    {"fast_path_rules", test_fast_path_rules},
    {"lease_rules", test_lease_rules},
    {"phase_table", test_phase_table},
    {"previous_judge", test_previous_judge},
    {"previous_judge_cost", test_previous_judge_cost},
    {"record_parse", test_record_parse},
    {"record_writers", test_record_writers},
    {"record_undo", test_record_undo},
    {"record_gone", test_record_gone},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {
        {"unit", unit_tests}, {"engine", zklock__unit_engine_tests}, {NULL, NULL}};
    return tu_main(suites, false);
}

/* ZKLOCK_VERSION_HEX of versions other than this one: the macro reads the
 * parts where it is expanded. Last in the file, since these redefine them. */
static long version_hex_1_2_3(void)
{
#undef ZKLOCK_VERSION_MAJOR
#undef ZKLOCK_VERSION_MINOR
#undef ZKLOCK_VERSION_PATCH
#define ZKLOCK_VERSION_MAJOR 1
#define ZKLOCK_VERSION_MINOR 2
#define ZKLOCK_VERSION_PATCH 3
    return ZKLOCK_VERSION_HEX;
}

static long version_hex_10_0_255(void)
{
#undef ZKLOCK_VERSION_MAJOR
#undef ZKLOCK_VERSION_MINOR
#undef ZKLOCK_VERSION_PATCH
#define ZKLOCK_VERSION_MAJOR 10
#define ZKLOCK_VERSION_MINOR 0
#define ZKLOCK_VERSION_PATCH 255
    return ZKLOCK_VERSION_HEX;
}
