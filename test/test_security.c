/* test_security.c: credentials, ACLs, and what they refuse, against a
 * server whose superuser (ZKLOCK_TEST_SUPER, zk-harness.sh) sets up a
 * protected lock root for alice and bob.
 *
 * Digest ids are "user:base64(sha1(user:password))", as ZooKeeper's
 * DigestAuthenticationProvider makes them; the passwords are user-pw. */
#include "config.h" /* HAVE_ZOOKEEPER_TLS */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define ALICE_ID "alice:SQICbGEP3vUd4FffsXSLZ8/1XtI="
#define BOB_ID "bob:EXcpcQQk6JBIDFnxSqkpDLIhkxw="
#define CAROL_ID "carol:FgAEo0XbSJ9SvGzfo0BjUHgQ1Rk="

static zklock_auth_t cred(const char *user_password)
{
    return (zklock_auth_t){"digest", user_password, strlen(user_password)};
}

static zklock_session_t *session_as(const char *user_password, int acl,
                                    const struct ACL_vector *custom)
{
    zklock_auth_t a = cred(user_password);
    zklock_session_opts_t o = {.timeout_ms = 6000, .auth = &a, .nauth = user_password ? 1 : 0,
                               .acl = acl, .acl_custom = custom};
    return tu_session_opts(&o);
}

/* A plain handle authenticated as `who` (the superuser by default). */
static zhandle_t *zk_as(const char *user_password)
{
    zhandle_t *zh = tu_connect_as(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    TU_REQUIRE_RC(zoo_add_auth(zh, "digest", user_password, (int)strlen(user_password), NULL, NULL),
                  ZOK);
    return zh;
}

/* The root alice and bob may lock under; carol and everyone else may read. */
static struct ACL root_acl_entries[3];
static struct ACL_vector root_acl = {3, root_acl_entries};

static void make_root(zhandle_t *super, const char *root)
{
    root_acl_entries[0] = (struct ACL){ZOO_PERM_ALL, {"digest", ALICE_ID}};
    root_acl_entries[1] = (struct ACL){ZOO_PERM_ALL, {"digest", BOB_ID}};
    root_acl_entries[2] = (struct ACL){ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE};
    zoo_create(super, "/zklock-test", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    TU_REQUIRE_RC(zoo_create(super, root, NULL, -1, &root_acl, 0, NULL, 0), ZOK);
}

static void remove_tree(zhandle_t *super, const char *path)
{
    struct String_vector kids;
    char child[512];

    if (zoo_get_children(super, path, 0, &kids) != ZOK)
        return;
    for (int i = 0; i < kids.count; i++) {
        snprintf(child, sizeof child, "%s/%s", path, kids.data[i]);
        remove_tree(super, child);
    }
    deallocate_String_vector(&kids);
    zoo_delete(super, path, -1);
}

/* Without credentials: refused at once, with a message about the ACL, and
 * nothing left behind; no retry loop (a handful of requests). */
static void test_unauthenticated_refused(void)
{
    zhandle_t *super = zk_as(getenv("ZKLOCK_TEST_SUPER"));
    const char *root = tu_path("sec-anon");
    char path[512];
    zklock_session_t *s = tu_session();
    zklock_t *l;
    int64_t t0;

    make_root(super, root);
    snprintf(path, sizeof path, "%s/jobs/nightly", root);
    l = tu_mutex(s, path, NULL);
    t0 = tu_now_ms();
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZNOAUTH);
    TU_ASSERT_INT(tu_now_ms() - t0, <, 5000);
    TU_ASSERT_INT(TU_STAT(s, requests), <, 10);
    CU_ASSERT(strstr(zklock_strerror(ZNOAUTH), "not allowed by the ACL") != NULL);
    TU_ASSERT_INT(tu_count(root), ==, 0);
    zklock_free(l);
    zklock_session_close(s);
    remove_tree(super, root);
    zookeeper_close(super);
}

/* alice and bob, each with credentials and an ACL naming both: one lock
 * between them. carol can see the queue, and change nothing. */
static void test_two_identities_and_a_reader(void)
{
    zhandle_t *super = zk_as(getenv("ZKLOCK_TEST_SUPER")), *carol = zk_as("carol:carol-pw");
    const char *root = tu_path("sec-share");
    char path[512], node[600];
    zklock_session_t *a, *b;
    zklock_t *la, *lb;
    zklock_queue_t *q = NULL;
    char **kids;
    int n;

    make_root(super, root);
    snprintf(path, sizeof path, "%s/deploy", root);
    a = session_as("alice:alice-pw", ZKLOCK_ACL_CUSTOM, &root_acl);
    b = session_as("bob:bob-pw", ZKLOCK_ACL_CUSTOM, &root_acl);
    la = tu_mutex(a, path, NULL);
    lb = tu_mutex(b, path, NULL);
    TU_REQUIRE_RC(zklock_acquire(la, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(lb, 0), ZKLOCK_EBUSY);
    /* carol reads the queue ... */
    {
        zklock_session_t *c = session_as("carol:carol-pw", ZKLOCK_ACL_DEFAULT, NULL);
        TU_ASSERT_RC(zklock_queue_read(c, path, &q), ZKLOCK_OK);
        TU_ASSERT_INT(q ? q->count : 0, ==, 1);
        zklock_queue_free(q);
        zklock_session_close(c);
    }
    /* ... and can neither delete alice's node nor touch the lock path. */
    kids = tu_children(path, &n);
    TU_REQUIRE_RC(n, 1);
    snprintf(node, sizeof node, "%s/%s", path, kids[0]);
    tu_free_strings(kids);
    TU_ASSERT_RC(zoo_delete(carol, node, -1), ZNOAUTH);
    TU_ASSERT_RC(zoo_set(carol, path, "x", 1, -1), ZNOAUTH);
    TU_ASSERT_RC(zoo_set_acl(carol, path, -1, &ZOO_OPEN_ACL_UNSAFE), ZNOAUTH);
    TU_ASSERT_RC(zklock_release(la), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(lb, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(lb), ZKLOCK_OK);
    zklock_free(la);
    zklock_free(lb);
    zklock_session_close(a);
    zklock_session_close(b);
    remove_tree(super, root);
    zookeeper_close(carol);
    zookeeper_close(super);
}

/* With the creator ACL, what alice creates is hers: others may read it. */
static void test_creator_acl(void)
{
    zhandle_t *super = zk_as(getenv("ZKLOCK_TEST_SUPER")), *bob = zk_as("bob:bob-pw");
    const char *root = tu_path("sec-creator");
    char path[512];
    zklock_session_t *a;
    zklock_t *l;
    struct ACL_vector acl;
    struct Stat st;

    make_root(super, root);
    snprintf(path, sizeof path, "%s/x/y", root);
    a = session_as("alice:alice-pw", ZKLOCK_ACL_CREATOR, NULL);
    l = tu_mutex(a, path, NULL);
    TU_REQUIRE_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    /* Every level zklock made, and the lock node, carry alice's ACL. */
    TU_REQUIRE_RC(zoo_get_acl(super, path, &acl, &st), ZOK);
    TU_ASSERT_INT(acl.count, ==, 2);
    CU_ASSERT(acl.data[0].perms == ZOO_PERM_ALL && strcmp(acl.data[0].id.id, ALICE_ID) == 0);
    CU_ASSERT(acl.data[1].perms == ZOO_PERM_READ && strcmp(acl.data[1].id.scheme, "world") == 0);
    deallocate_ACL_vector(&acl);
    /* bob, with rights on the root, cannot even queue under alice's path. */
    {
        char node[600];
        snprintf(node, sizeof node, "%s/intruder", path);
        TU_ASSERT_RC(zoo_create(bob, node, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZNOAUTH);
    }
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(a);
    remove_tree(super, root);
    zookeeper_close(bob);
    zookeeper_close(super);
}

/* A session renewed after an expiry presents its credentials again: its
 * next lock on the protected root works. */
static void test_renewed_session_keeps_identity(void)
{
    zhandle_t *super = zk_as(getenv("ZKLOCK_TEST_SUPER"));
    const char *root = tu_path("sec-renew");
    char path[512];
    zklock_session_t *a;
    zklock_t *l;
    int64_t before;

    make_root(super, root);
    snprintf(path, sizeof path, "%s/job", root);
    a = session_as("alice:alice-pw", ZKLOCK_ACL_CUSTOM, &root_acl);
    l = tu_mutex(a, path, NULL);
    TU_REQUIRE_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    before = zklock_session_id(a);
    tu_expire(a);
    TU_ASSERT_INT(zklock_session_id(a), !=, before);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(a);
    remove_tree(super, root);
    zookeeper_close(super);
}

/* Wrong credentials: digest takes any password (it is a different identity),
 * so the ACL refuses; a scheme the server does not know is rejected at open,
 * once. */
static void test_wrong_credentials(void)
{
    zhandle_t *super = zk_as(getenv("ZKLOCK_TEST_SUPER"));
    const char *root = tu_path("sec-wrong");
    char path[512];
    zklock_session_t *a, *s = NULL;
    zklock_t *l;
    zklock_auth_t bogus = {"bogus", "x", 1};
    zklock_session_opts_t o = {.timeout_ms = 6000, .auth = &bogus, .nauth = 1};

    make_root(super, root);
    snprintf(path, sizeof path, "%s/job", root);
    a = session_as("alice:not-her-password", ZKLOCK_ACL_DEFAULT, NULL);
    l = tu_mutex(a, path, NULL);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZNOAUTH);
    TU_ASSERT_INT(tu_count(root), ==, 0);
    zklock_free(l);
    zklock_session_close(a);
    TU_ASSERT_RC(zklock_session_open(&s, tu_hosts(), &o), ZAUTHFAILED);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT(strstr(zklock_strerror(ZAUTHFAILED), "rejected") != NULL);
    remove_tree(super, root);
    zookeeper_close(super);
}

/* The lease's heartbeat needs no ACL: it writes a child of the holder's own
 * node, which cannot exist (an ephemeral node has no children), and the
 * leader's "no node" is committed by a quorum, with eager ACL checks too.
 * Here the chroot's ACL lets the session write nothing in it, and a write
 * of the chroot's own data (the first heartbeat's target) is refused with
 * ZNOAUTH, which proves nothing (an eager check answers it without a
 * quorum): an idle hold is kept for three session timeouts, heartbeats
 * going out, with no loss. */
#define HEARTBEAT_TIMEOUT_MS 4000

static void test_heartbeat_needs_no_acl(void)
{
    zhandle_t *super = zk_as(getenv("ZKLOCK_TEST_SUPER"));
    const char *root = tu_path("sec-heartbeat");
    struct ACL no_write_entries[1] = {{ZOO_PERM_ALL & ~ZOO_PERM_WRITE, ZOO_ANYONE_ID_UNSAFE}};
    struct ACL_vector no_write = {1, no_write_entries};
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    zklock_session_opts_t so = {.timeout_ms = HEARTBEAT_TIMEOUT_MS};
    zklock_session_t *s = NULL;
    char hosts[512];
    zklock_t *l;
    uint64_t sent;
    int64_t idle_until;

    zoo_create(super, "/zklock-test", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    TU_REQUIRE_RC(zoo_create(super, root, NULL, -1, &no_write, 0, NULL, 0), ZOK);
    snprintf(hosts, sizeof hosts, "%s%s", tu_hosts(), root);
    TU_REQUIRE_RC(zklock_session_open(&s, hosts, &so), ZKLOCK_OK);
    TU_ASSERT_RC(zoo_set(zklock_session_zhandle(s), "/", NULL, -1, -2), ZNOAUTH); /* the old target */
    l = tu_mutex(s, "/job", &lo);
    TU_REQUIRE_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    sent = TU_STAT(s, requests);
    idle_until = tu_now_ms() + 3 * HEARTBEAT_TIMEOUT_MS; /* the hold, idle */
    CU_ASSERT(tu_wait_until(tu_past, &idle_until, 4 * HEARTBEAT_TIMEOUT_MS));
    TU_ASSERT_INT(lost.lost, ==, 0);
    TU_ASSERT_INT(zklock_hold_count(l), ==, 1);
    TU_ASSERT_INT(TU_STAT(s, requests) - sent, >=, 4); /* heartbeats */
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    remove_tree(super, root);
    zookeeper_close(super);
}

/* A tracking hold whose record cannot be written (an operator made it
 * read-only) ends when the lease its record promises runs out: the next
 * holder's lock-delay runs from the holder's last write of the record plus
 * its session timeout, so the holder must not believe past that, though its
 * session's lease is kept (design.md, "The previous holder's fate"). */
static void test_record_refused_ends_hold(void)
{
    zhandle_t *super = zk_as(getenv("ZKLOCK_TEST_SUPER"));
    const char *path = tu_path("sec-record");
    struct ACL read_entries[1] = {{ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE}};
    struct ACL_vector read_only = {1, read_entries};
    struct tu_events lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost, .track_previous = 1};
    zklock_session_opts_t so = {.timeout_ms = HEARTBEAT_TIMEOUT_MS};
    zklock_session_t *s = NULL;
    char record[512];
    zklock_t *l;
    int64_t refused_at;

    snprintf(record, sizeof record, "%s/zklock.previous", path);
    TU_REQUIRE_RC(zklock_session_open(&s, tu_hosts(), &so), ZKLOCK_OK);
    l = tu_mutex(s, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    TU_REQUIRE_RC(zoo_set_acl(super, record, -1, &read_only), ZOK);
    refused_at = tu_now_ms();
    CU_ASSERT(tu_wait_until(tu_lost_once, &lost, 3 * HEARTBEAT_TIMEOUT_MS));
    TU_ASSERT_RC(lost.lost_reason, ZKLOCK_LOST_UNSURE);
    TU_ASSERT_INT(lost.lost_at_ms - refused_at, <, HEARTBEAT_TIMEOUT_MS + 500);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_ELOST);
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
    TU_ASSERT_INT(zoo_delete(super, record, -1), ==, ZOK);
    zoo_delete(super, path, -1);
    zookeeper_close(super);
}

/* Options that cannot work are refused before anything is sent. */
static void test_bad_security_options(void)
{
    zklock_session_t *s = tu_session(), *s2 = NULL;
    struct ACL big_entries[200];
    struct ACL_vector big = {200, big_entries}, empty = {0, NULL};
    zklock_opts_t o = {.acl = ZKLOCK_ACL_CUSTOM, .acl_custom = &big};
    zklock_auth_t noscheme = {NULL, "a:b", 3};
    zklock_session_opts_t so = {.auth = &noscheme, .nauth = 1};
    zklock_session_opts_t tls_half = {.tls_cert = "/nonexistent/cert.pem"};
    zklock_session_opts_t tls = {.tls_ca = "ca.pem", .tls_cert = "c.pem", .tls_key = "k.pem"};
    zklock_t *l = NULL;
    const char *path = tu_path("sec-bad");

    for (int i = 0; i < 200; i++)
        big_entries[i] = (struct ACL){ZOO_PERM_ALL, {"digest", ALICE_ID}};
    TU_ASSERT_RC(zklock_mutex_new(&l, s, path, &o), ZKLOCK_EINVAL); /* too big to send */
    o.acl_custom = &empty;
    TU_ASSERT_RC(zklock_mutex_new(&l, s, path, &o), ZKLOCK_EINVAL);
    o.acl_custom = NULL;
    TU_ASSERT_RC(zklock_mutex_new(&l, s, path, &o), ZKLOCK_EINVAL);
    o.acl = 99;
    TU_ASSERT_RC(zklock_mutex_new(&l, s, path, &o), ZKLOCK_EINVAL);
    CU_ASSERT_PTR_NULL(l);
    TU_ASSERT_RC(zklock_session_open(&s2, tu_hosts(), &so), ZKLOCK_EINVAL);
    TU_ASSERT_RC(zklock_session_open(&s2, tu_hosts(), &tls_half), ZKLOCK_EINVAL);
#ifdef HAVE_ZOOKEEPER_TLS
    tu_skip("a TLS session: this ZooKeeper client has TLS, and no TLS server is here");
#else
    TU_ASSERT_RC(zklock_session_open(&s2, tu_hosts(), &tls), ZKLOCK_ENOTSUP);
#endif
    TU_ASSERT_RC(zklock_session_adopt(&s2, tu_zk(), &tls), ZKLOCK_EINVAL);
    CU_ASSERT_PTR_NULL(s2);
    /* The creator ACL without credentials: the server says which is wrong. */
    {
        zklock_opts_t co = {.acl = ZKLOCK_ACL_CREATOR};
        l = tu_mutex(s, path, &co);
        TU_ASSERT_RC(zklock_acquire(l, 10000), ZINVALIDACL);
        CU_ASSERT(strstr(zklock_strerror(ZINVALIDACL), "credentials") != NULL);
        zklock_free(l);
    }
    zklock_session_close(s);
    tu_assert_clean(path);
}

static const tu_test_t security_tests[] = {
    {"unauthenticated_refused", test_unauthenticated_refused},
    {"two_identities_and_a_reader", test_two_identities_and_a_reader},
    {"creator_acl", test_creator_acl},
    {"renewed_session_keeps_identity", test_renewed_session_keeps_identity},
    {"wrong_credentials", test_wrong_credentials},
    {"bad_security_options", test_bad_security_options},
    {"heartbeat_needs_no_acl", test_heartbeat_needs_no_acl},
    {"record_refused_ends_hold", test_record_refused_ends_hold},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"security", security_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
