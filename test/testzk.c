/* testzk.c: ZooKeeper helpers for the suites that need a server. */
#include "testutil.h"

#include "detector.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <regex.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>

/* ---- ZooKeeper ---------------------------------------------------------------------- */

static zhandle_t *inspector;

void tu_zk_close(void)
{
    if (inspector)
        zookeeper_close(inspector);
    inspector = NULL;
}

const char *tu_hosts(void)
{
    const char *h = getenv("ZKLOCK_TEST_HOSTS");
    return h ? h : "127.0.0.1:2181";
}

const char *tu_path(const char *name)
{
    static char bufs[8][256];
    static int next, counter;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "/zklock-test/%d-%d-%s", (int)getpid(), ++counter, name);
    return b;
}

void tu_make_lock_path(const char *path)
{
    char parent[512];
    snprintf(parent, sizeof parent, "%s", path);
    *strrchr(parent, '/') = '\0';
    zoo_create(tu_zk(), parent, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    TU_REQUIRE_RC(zoo_create(tu_zk(), path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
}

static bool zh_connected(void *zh)
{
    return zoo_state((zhandle_t *)zh) == ZOO_CONNECTED_STATE;
}

zhandle_t *tu_connect_as(const clientid_t *id)
{
    return tu_connect_to(tu_hosts(), id);
}

zhandle_t *tu_connect_to(const char *hosts, const clientid_t *id)
{
    zhandle_t *zh = zookeeper_init(hosts, NULL, 10000, id, NULL, 0);
    if (!zh || !tu_wait_until(zh_connected, zh, 15000)) {
        fprintf(stderr, "cannot connect to ZooKeeper at %s\n", hosts);
        if (zh)
            zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

zhandle_t *tu_zk(void)
{
    if (!inspector)
        inspector = tu_connect_as(NULL);
    return inspector;
}

zklock_session_t *tu_session_opts(const zklock_session_opts_t *opts)
{
    zklock_session_t *s = NULL;
    int rc = zklock_session_open(&s, tu_hosts(), opts);
    TU_REQUIRE_RC(rc, ZKLOCK_OK);
    return s;
}

zklock_session_t *tu_session(void)
{
    zklock_session_opts_t o = {.timeout_ms = 6000};
    return tu_session_opts(&o);
}

zklock_session_t *tu_session_traced(struct tu_traced *t)
{
    zklock_session_t *s;
    int fd;

    snprintf(t->file, sizeof t->file, "/tmp/zklock-trace-XXXXXX");
    fd = mkstemp(t->file);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    setenv("ZKLOCK_TRACE", t->file, 1); /* read once, as the session opens */
    s = tu_session();
    unsetenv("ZKLOCK_TRACE");
    return s;
}

/* Is `file` open in this process (a descriptor of /proc/self/fd names it)? */
static bool file_open_here(const char *file)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char target[PATH_MAX];
    bool open = false;
    ssize_t n;

    CU_ASSERT_FATAL(d != NULL);
    while (!open && (e = readdir(d)) != NULL) {
        if ((n = readlinkat(dirfd(d), e->d_name, target, sizeof target - 1)) > 0) {
            target[n] = '\0';
            open = strcmp(target, file) == 0;
        }
    }
    closedir(d);
    return open;
}

bool tu_session_freed(struct tu_traced *t)
{
    bool freed = !file_open_here(t->file);

    unlink(t->file);
    return freed;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* An answer that says nothing about the node: the inspector lost its
 * connection or its session (a server was just killed, say). */
static bool inspector_in_trouble(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED ||
           rc == ZINVALIDSTATE || rc == ZCLOSING;
}

/* The read of path's children and Stat, by `by` or by the inspector if it
 * is NULL: ZOK or ZNONODE. Any
 * other answer is no answer: asked again while the inspector reconnects (a
 * new one if its session is over: the suites use the inspector from their
 * main thread only), and if it still cannot look within TU_WAIT_MS the test
 * fails, rather than taking "could not look" for "nothing there". */
static int inspect_children_by(zhandle_t *by, const char *path, struct String_vector *v,
                               struct Stat *st)
{
    int64_t deadline = tu_now_ms() + TU_WAIT_MS;
    struct timespec pause = {0, 50 * 1000 * 1000};
    int rc;

    for (;;) {
        zhandle_t *zh = by ? by : tu_zk();
        rc = zh ? zoo_get_children2(zh, path, 0, v, st) : ZCONNECTIONLOSS;
        if (rc == ZOK || rc == ZNONODE || !inspector_in_trouble(rc) || tu_now_ms() >= deadline)
            break;
        if (!by && zh && zoo_state(zh) == ZOO_EXPIRED_SESSION_STATE)
            tu_zk_close(); /* the next tu_zk() connects afresh */
        nanosleep(&pause, NULL); /* the client reconnects in the background */
    }
    if (rc != ZOK && rc != ZNONODE) {
        char msg[512];
        snprintf(msg, sizeof msg, "the inspector could not read the children of %s: %s", path,
                 zerror(rc));
        fprintf(stderr, "%s\n", msg);
        CU_assertImplementation(CU_FALSE, __LINE__, msg, __FILE__, "", CU_FALSE);
    }
    return rc;
}

static int inspect_children(const char *path, struct String_vector *v, struct Stat *st)
{
    return inspect_children_by(NULL, path, v, st);
}

char **tu_children(const char *path, int *count)
{
    struct String_vector v;
    struct Stat st;
    char **out;
    int rc = inspect_children(path, &v, &st);

    *count = rc == ZNONODE ? -1 : TU_UNREADABLE;
    if (rc != ZOK)
        return NULL;
    out = calloc((size_t)v.count + 1, sizeof *out);
    for (int i = 0; i < v.count; i++)
        out[i] = strdup(v.data[i]);
    qsort(out, (size_t)v.count, sizeof *out, cmp_str);
    *count = v.count;
    deallocate_String_vector(&v);
    return out;
}

void tu_free_strings(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

int tu_count(const char *path)
{
    int n;
    tu_free_strings(tu_children(path, &n));
    return n;
}

int tu_children_matching(const char *path, const char *pattern)
{
    regex_t re;
    char **kids;
    int n, matched = 0;

    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
        return -1;
    kids = tu_children(path, &n);
    for (int i = 0; i < n; i++)
        matched += regexec(&re, kids[i], 0, NULL, 0) == 0;
    tu_free_strings(kids);
    regfree(&re);
    return matched;
}

bool tu_no_children(const char *path)
{
    int n = tu_count(path);
    return n == 0 || n == -1;
}

/* Ephemeral nodes at and under path; *unreadable is set if some level
 * could not be read (the test has failed then). */
static int count_ephemerals(const char *path, bool *unreadable)
{
    struct String_vector v;
    struct Stat st = {0};
    int total = 0, rc = inspect_children(path, &v, &st);

    if (rc != ZOK) {
        *unreadable |= rc != ZNONODE;
        return 0;
    }
    if (st.ephemeralOwner != 0)
        total = 1; /* an ephemeral node has no children */
    for (int i = 0; st.ephemeralOwner == 0 && i < v.count; i++) {
        char child[1024];
        snprintf(child, sizeof child, "%s/%s", path, v.data[i]);
        total += count_ephemerals(child, unreadable);
    }
    deallocate_String_vector(&v);
    return total;
}

int tu_ephemerals(const char *path)
{
    bool unreadable = false;
    int n = count_ephemerals(path, &unreadable);
    return unreadable ? TU_UNREADABLE : n;
}

int tu_get(const char *path, char *buf, int len)
{
    int n = len - 1;
    if (zoo_get(tu_zk(), path, 0, buf, &n, NULL) != ZOK)
        return -1;
    buf[n < 0 ? 0 : n] = '\0';
    return n;
}

struct renewal {
    zklock_session_t *s;
    int64_t old_id;
};

/* A new session is up (its id is 0 while zklock sets it up). */
static bool renewed(void *p)
{
    struct renewal *r = p;
    int64_t id = zklock_session_id(r->s);
    return id != r->old_id && id != 0;
}

/* The twin's close can lose a race: if the original client reconnects
 * between the twin's connect and its close, the session moves back and the
 * close is refused. So: until the session id changes, try again. */
void tu_expire(zklock_session_t *s)
{
    for (int attempt = 0; attempt < 10; attempt++) {
        zhandle_t *zh = zklock_session_zhandle(s), *twin;
        struct renewal r = {s, zklock_session_id(s)};
        clientid_t id;

        CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
        id = *zoo_client_id(zh);
        twin = tu_connect_as(&id);
        CU_ASSERT_PTR_NOT_NULL_FATAL(twin);
        zookeeper_close(twin);
        if (tu_wait_until(renewed, &r, 5000))
            return;
    }
    CU_FAIL_FATAL("could not make the session expire");
}


/* ---- the events a session has seen ----------------------------------------------------- */

struct barrier {
    int done, rc;
};

static void barrier_done(int rc, const struct Stat *st, const void *data)
{
    struct barrier *b = (struct barrier *)data;
    __atomic_store_n(&b->rc, rc, __ATOMIC_SEQ_CST);
    __atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
}

static bool barrier_passed(void *b)
{
    return __atomic_load_n(&((struct barrier *)b)->done, __ATOMIC_SEQ_CST) != 0;
}

static void callbacks_passed(const char *path, const void *value, size_t len, int64_t token,
                             void *ctx)
{
    (void)path, (void)value, (void)len, (void)token;
    __atomic_store_n(&((struct barrier *)ctx)->done, 1, __ATOMIC_SEQ_CST);
}

/* zklock runs a session's callbacks one at a time, in the order they were
 * queued, on its callback thread: a follower's first report, queued once
 * its look is answered (after everything the session had heard), runs
 * after every callback queued before it has returned. The path is never
 * made: nobody leads there, and the follower's watch waits on it harmlessly
 * until the session ends. A session that dispatches on the caller's loop
 * (ZKLOCK_DISPATCH_POLL) has no callback thread: its caller runs them. */
static void wait_for_callbacks(zklock_session_t *s)
{
    struct barrier b = {0, 0};
    zklock_follow_t *f = NULL;

    if (zklock_session_fd(s) >= 0)
        return;
    TU_REQUIRE_RC(zklock_leader_follow(s, "/zklock-test-barrier/never-made", callbacks_passed, &b,
                                       &f),
                  ZKLOCK_OK);
    if (!tu_wait_until(barrier_passed, &b, TU_WAIT_MS))
        CU_FAIL("the session's callbacks did not pass the barrier");
    zklock_follow_stop(f);
}

/* A write of the root's data with a version no node has: refused
 * (ZBADVERSION), never applied, but ordered with every other write, so its
 * answer comes after every event of an earlier write; and zklock handles a
 * session's watch events and answers on the ZooKeeper client's completion
 * thread, in the order they came, as this answer is. What they queued for
 * the user (on_lost, on_revoke, done) has run too when this returns. */
void tu_barrier(zklock_session_t *s)
{
    zhandle_t *zh = zklock_session_zhandle(s);
    struct barrier *b = calloc(1, sizeof *b);

    CU_ASSERT_PTR_NOT_NULL_FATAL(zh);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    TU_REQUIRE_RC(zoo_aset(zh, "/", "", 0, -2, barrier_done, b), ZOK);
    if (!tu_wait_until(barrier_passed, b, TU_WAIT_MS))
        CU_FAIL_FATAL("the session's barrier write was not answered"); /* b stays: it may still be */
    TU_ASSERT_RC(b->rc, ZBADVERSION);
    free(b);
    wait_for_callbacks(s);
}

/* ---- servers ------------------------------------------------------------------------ */

int tu_servers(void)
{
    int n = 1;
    for (const char *p = tu_hosts(); *p; p++)
        n += *p == ',';
    return n;
}

const char *tu_server(int i)
{
    static char buf[64];
    const char *p = tu_hosts();
    size_t len;

    for (int k = 1; k < i && p; k++) {
        p = strchr(p, ',');
        if (p)
            p++;
    }
    if (!p)
        return "";
    len = strcspn(p, ",");
    snprintf(buf, sizeof buf, "%.*s", (int)len, p);
    return buf;
}

int tu_fourlw(int i, const char *word, char *buf, size_t len)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    char host[64];
    const char *hp = tu_server(i), *colon = strrchr(hp, ':');
    size_t got = 0;
    ssize_t n;
    int fd;

    if (!colon || len == 0)
        return -1;
    snprintf(host, sizeof host, "%.*s", (int)(colon - hp), hp);
    a.sin_port = htons((uint16_t)atoi(colon + 1));
    inet_pton(AF_INET, host, &a.sin_addr);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        write(fd, word, strlen(word)) != (ssize_t)strlen(word)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    close(fd);
    return (int)got;
}

int tu_leader(void)
{
    char buf[4096];
    for (int i = 1; i <= tu_servers(); i++)
        if (tu_fourlw(i, "srvr", buf, sizeof buf) > 0 && strstr(buf, "Mode: leader"))
            return i;
    return 0;
}

bool tu_zxid(uint64_t *zxid)
{
    char buf[4096];
    const char *z;
    bool found = false;

    /* srvr's answer: "Zookeeper version: ...\n...Zxid: 0x...\n...Mode: leader\n" */
    for (int i = 1; i <= tu_servers(); i++) {
        uint64_t v;
        if (tu_fourlw(i, "srvr", buf, sizeof buf) <= 0 || !(z = strstr(buf, "\nZxid: ")))
            continue;
        v = strtoull(z + strlen("\nZxid: "), NULL, 16);
        if (strstr(buf, "\nMode: leader\n")) {
            *zxid = v; /* the leader's is the ensemble's */
            return true;
        }
        if (!found || v > *zxid)
            *zxid = v;
        found = true;
    }
    return found;
}

struct quiet {
    uint64_t zxid;
    int64_t since_ms, asked_ms;
    int for_ms;
};

/* Asks at most every 100 ms: a 4-letter word is a connection of its own. */
static bool stayed_quiet(void *p)
{
    struct quiet *q = p;
    int64_t now = tu_now_ms();
    uint64_t z;

    if (now - q->asked_ms < 100)
        return false;
    q->asked_ms = now;
    if (!tu_zxid(&z))
        return false;
    if (z != q->zxid || q->since_ms < 0) {
        q->zxid = z;
        q->since_ms = now;
    }
    return now - q->since_ms >= q->for_ms;
}

bool tu_wait_quiet(int for_ms)
{
    struct quiet q = {0, -1, -1000, for_ms};
    return tu_wait_until(stayed_quiet, &q, TU_WAIT_MS);
}

int tu_server_of(int64_t session_id)
{
    char buf[65536], sid[40];

    snprintf(sid, sizeof sid, "sid=0x%llx,", (unsigned long long)session_id);
    for (int i = 1; i <= tu_servers(); i++)
        if (tu_fourlw(i, "cons", buf, sizeof buf) > 0 && strstr(buf, sid))
            return i;
    return 0;
}

int tu_harness(const char *cmd, int i)
{
    char *script = getenv("ZKLOCK_TEST_HARNESS"), *dir = getenv("ZKLOCK_TEST_ZKDIR");
    char idx[16];

    if (!script || !dir)
        return -1;
    snprintf(idx, sizeof idx, "%d", i);
    {
        char *argv[] = {"/bin/bash", script, (char *)cmd, dir, idx, NULL};
        int pid = tu_spawn(argv);
        return pid < 0 ? -1 : tu_wait_pid(pid);
    }
}

static int run_harness(char *const argv[])
{
    int pid = tu_spawn(argv);
    return pid < 0 ? -1 : tu_wait_pid(pid);
}

bool tu_seeded_start(struct tu_seeded *z, const char *seed)
{
    char *script = getenv("ZKLOCK_TEST_HARNESS"), file[300];
    char *has_javac[] = {"/bin/sh", "-c", "command -v javac >/dev/null", NULL};
    const char *tmp = getenv("TMPDIR");
    FILE *f;
    int rc;

    memset(z, 0, sizeof *z);
    if (run_harness(has_javac) != 0) {
        tu_skip("a seeded server needs javac (apt-get install default-jdk-headless)");
        return false;
    }
    CU_ASSERT_FATAL(script != NULL);
    snprintf(z->dir, sizeof z->dir, "%s/zklock-seeded.XXXXXX", tmp ? tmp : "/tmp");
    CU_ASSERT_FATAL(mkdtemp(z->dir) != NULL);
    {
        /* the harness prints the connect string: it is in DIR/hosts too */
        char *argv[] = {"/bin/sh", "-c", "exec /bin/bash \"$0\" start \"$1\" 1 \"$2\" >/dev/null",
                        script, z->dir, (char *)seed, NULL};
        rc = run_harness(argv);
    }
    snprintf(file, sizeof file, "%s/hosts", z->dir);
    f = rc == 0 ? fopen(file, "r") : NULL;
    if (!f || !fgets(z->hosts, sizeof z->hosts, f)) {
        if (f)
            fclose(f);
        tu_seeded_stop(z);
        CU_FAIL_FATAL("the seeded server did not start");
    }
    fclose(f);
    z->hosts[strcspn(z->hosts, "\n")] = '\0';
    z->zh = tu_connect_to(z->hosts, NULL);
    if (!z->zh) {
        tu_seeded_stop(z);
        CU_FAIL_FATAL("cannot connect to the seeded server");
    }
    return true;
}

void tu_seeded_stop(struct tu_seeded *z)
{
    char *script = getenv("ZKLOCK_TEST_HARNESS");

    if (z->zh)
        zookeeper_close(z->zh);
    z->zh = NULL;
    if (script && *z->dir) {
        char *argv[] = {"/bin/bash", script, "stop", z->dir, NULL};
        run_harness(argv);
    }
    *z->dir = '\0';
}

zklock_session_t *tu_seeded_session(const struct tu_seeded *z)
{
    zklock_session_opts_t o = {.timeout_ms = 6000};
    zklock_session_t *s = NULL;

    TU_REQUIRE_RC(zklock_session_open(&s, z->hosts, &o), ZKLOCK_OK);
    return s;
}

int tu_seeded_count(const struct tu_seeded *z, const char *path)
{
    struct String_vector v;
    struct Stat st;
    int n, rc = inspect_children_by(z->zh, path, &v, &st);

    if (rc != ZOK)
        return rc == ZNONODE ? -1 : TU_UNREADABLE; /* the test has failed then */
    n = v.count;
    deallocate_String_vector(&v);
    return n;
}

struct seeded_count_arg {
    const struct tu_seeded *z;
    const char *path;
    int n;
};

static bool seeded_has(void *p)
{
    struct seeded_count_arg *a = p;
    return tu_seeded_count(a->z, a->path) == a->n;
}

bool tu_seeded_wait_count(const struct tu_seeded *z, const char *path, int n)
{
    struct seeded_count_arg a = {z, path, n};
    return tu_wait_until(seeded_has, &a, TU_WAIT_MS);
}

/* ---- lock-test helpers ------------------------------------------------------------ */

zklock_t *tu_mutex(zklock_session_t *s, const char *path, const zklock_opts_t *opts)
{
    zklock_t *l = NULL;
    TU_REQUIRE_RC(zklock_mutex_new(&l, s, path, opts), ZKLOCK_OK);
    return l;
}

struct count_arg {
    const char *path;
    int want;
};

static bool has_count(void *p)
{
    struct count_arg *a = p;
    return tu_count(a->path) == a->want;
}

bool tu_wait_children(const char *path, int n)
{
    struct count_arg a = {path, n};
    return tu_wait_until(has_count, &a, TU_WAIT_MS);
}

static bool no_children(void *path)
{
    return tu_no_children(path);
}

bool tu_wait_no_children(const char *path)
{
    return tu_wait_until(no_children, (void *)path, TU_WAIT_MS);
}

bool tu_gone(void *path)
{
    return tu_count(path) == -1;
}

void tu_assert_clean(const char *path)
{
    TU_ASSERT_INT(tu_ephemerals(path), ==, 0);
}

static void *acquirer_main(void *p)
{
    struct tu_acquirer *a = p;
    int64_t t0 = tu_now_ms();
    a->rc = zklock_acquire(a->l, a->timeout_ms);
    a->took_ms = tu_now_ms() - t0;
    if (a->rc == 0)
        zklock_fence(a->l, &a->token);
    if (a->rc == 0 && a->release_after)
        zklock_release(a->l);
    __atomic_store_n(&a->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

void tu_start_acquirer(struct tu_acquirer *a, zklock_t *l, int timeout_ms, bool release_after)
{
    memset(a, 0, sizeof *a);
    a->l = l;
    a->timeout_ms = timeout_ms;
    a->release_after = release_after;
    pthread_create(&a->t, NULL, acquirer_main, a);
}

bool tu_acquirer_done(void *p)
{
    return __atomic_load_n(&((struct tu_acquirer *)p)->done, __ATOMIC_SEQ_CST) != 0;
}

int tu_join_acquirer(struct tu_acquirer *a)
{
    pthread_join(a->t, NULL);
    return a->rc;
}

void tu_on_lost(zklock_t *l, int reason, void *ctx)
{
    struct tu_events *e = ctx;
    pthread_mutex_lock(&e->mu);
    e->lost++;
    e->lost_reason = reason;
    e->lost_at_ms = tu_now_ms();
    pthread_mutex_unlock(&e->mu);
}

void tu_on_state(zklock_session_t *s, int state, void *ctx)
{
    struct tu_events *e = ctx;
    pthread_mutex_lock(&e->mu);
    if (e->nstates < 32) {
        e->states_at_ms[e->nstates] = tu_now_ms();
        e->states[e->nstates++] = state;
    }
    pthread_mutex_unlock(&e->mu);
}

void tu_print_states(const char *who, struct tu_events *e, int64_t t0_ms)
{
    pthread_mutex_lock(&e->mu);
    fprintf(stderr, "%s:", who);
    for (int i = 0; i < e->nstates; i++)
        fprintf(stderr, " %s@%+lldms", zklock_state_name(e->states[i]),
                (long long)(e->states_at_ms[i] - t0_ms));
    fprintf(stderr, "\n");
    pthread_mutex_unlock(&e->mu);
}

bool tu_lost_once(void *p)
{
    struct tu_events *e = p;
    bool r;
    pthread_mutex_lock(&e->mu);
    r = e->lost >= 1;
    pthread_mutex_unlock(&e->mu);
    return r;
}

struct lost_arg {
    struct tu_events *e;
    int n;
};

static bool lost_n(void *p)
{
    struct lost_arg *a = p;
    bool r;

    pthread_mutex_lock(&a->e->mu);
    r = a->e->lost >= a->n;
    pthread_mutex_unlock(&a->e->mu);
    return r;
}

bool tu_wait_lost(struct tu_events *e, int n)
{
    struct lost_arg a = {e, n};
    return tu_wait_until(lost_n, &a, TU_WAIT_MS);
}

int tu_lost_within(struct tu_events *e, int ms)
{
    struct lost_arg a = {e, 0};
    int n;

    pthread_mutex_lock(&e->mu);
    a.n = e->lost + 1;
    pthread_mutex_unlock(&e->mu);
    tu_wait_until(lost_n, &a, ms);
    pthread_mutex_lock(&e->mu);
    n = e->lost;
    pthread_mutex_unlock(&e->mu);
    return n;
}

void tu_max_hold_hands_over(struct tu_events *e, int n, zklock_t *holder,
                            struct tu_acquirer *w)
{
    CU_ASSERT_FATAL(tu_wait_lost(e, n));
    TU_ASSERT_RC(e->lost_reason, ZKLOCK_LOST_MAX_HOLD);
    TU_ASSERT_INT(zklock_hold_count(holder), ==, 0);
    CU_ASSERT(tu_wait_until(tu_acquirer_done, w, TU_WAIT_MS)); /* the node went */
    TU_ASSERT_RC(tu_join_acquirer(w), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(holder), ZKLOCK_ELOST);
}

bool tu_saw_state(struct tu_events *e, int state)
{
    bool r = false;
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->nstates; i++)
        r |= e->states[i] == state;
    pthread_mutex_unlock(&e->mu);
    return r;
}

struct state_arg {
    struct tu_events *e;
    int state;
};

static bool state_seen(void *p)
{
    struct state_arg *a = p;
    return tu_saw_state(a->e, a->state);
}

bool tu_wait_state(struct tu_events *e, int state)
{
    struct state_arg a = {e, state};
    return tu_wait_until(state_seen, &a, TU_WAIT_MS);
}

void tu_forget_states(struct tu_events *e)
{
    CU_ASSERT(tu_wait_state(e, ZKLOCK_CONNECTED));
    pthread_mutex_lock(&e->mu);
    e->nstates = 0;
    pthread_mutex_unlock(&e->mu);
}

struct detector *tu_new_detector(char *file, size_t len)
{
    struct detector *d;
    int fd;

    snprintf(file, len, "/tmp/zklock-detector-XXXXXX");
    fd = mkstemp(file);
    if (fd < 0 || ftruncate(fd, sizeof *d) != 0)
        return NULL;
    d = mmap(NULL, sizeof *d, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return d == MAP_FAILED ? NULL : d;
}

void tu_free_detector(struct detector *d, const char *file)
{
    munmap(d, sizeof *d);
    unlink(file);
}

uint64_t tu_stat(zklock_session_t *s, size_t offset)
{
    zklock_stats_t st;
    zklock_session_stats(s, &st, sizeof st);
    return *(uint64_t *)((char *)&st + offset);
}

struct listings_arg {
    zklock_session_t *s;
    uint64_t n;
};

static bool listings_seen(void *p)
{
    struct listings_arg *a = p;
    return TU_STAT(a->s, listings) >= a->n;
}

bool tu_wait_listings(zklock_session_t *s, uint64_t n)
{
    struct listings_arg a = {s, n};
    return tu_wait_until(listings_seen, &a, TU_WAIT_MS);
}

bool tu_dispatch_until(zklock_session_t *s, bool (*cond)(void *), void *arg, int ms)
{
    int64_t end = tu_now_ms() + ms;
    struct pollfd p = {zklock_session_fd(s), POLLIN, 0};

    while (!cond(arg) && tu_now_ms() < end) {
        if (poll(&p, 1, (int)(end - tu_now_ms())) > 0)
            zklock_session_dispatch(s);
    }
    return cond(arg);
}

bool tu_sent_requests(void *requests)
{
    struct tu_requests *r = requests;
    return TU_STAT(r->s, requests) >= r->at_least;
}

int tu_scaled(int n)
{
    const char *vg = getenv("ZKLOCK_TEST_VALGRIND");
    return vg && *vg ? n / 10 : n;
}

char *tu_node_of(const char *path, zklock_session_t *s)
{
    int n;
    char **kids = tu_children(path, &n), *mine = NULL, full[512];
    struct Stat st;

    for (int i = 0; kids && i < n && !mine; i++) {
        snprintf(full, sizeof full, "%s/%s", path, kids[i]);
        if (zoo_exists(tu_zk(), full, 0, &st) == ZOK && st.ephemeralOwner == zklock_session_id(s))
            mine = strdup(full);
    }
    tu_free_strings(kids);
    return mine;
}

static zklock_t *multi_of(zklock_t *a, zklock_t *b)
{
    zklock_t *m = NULL;
    TU_REQUIRE_RC(zklock_multi_new(&m, (zklock_t *[]){a, b}, 2, NULL), ZKLOCK_OK);
    return m;
}

void tu_crossed_start(struct tu_crossed *x, zklock_session_t *sp, zklock_session_t *s1,
                      zklock_session_t *s2, const char *pa, const char *pb, int timeout_ms)
{
    x->p = tu_mutex(sp, pb, NULL);
    x->a1 = tu_mutex(s1, pa, NULL);
    x->b1 = tu_mutex(s1, pb, NULL);
    x->a2 = tu_mutex(s2, pa, NULL);
    x->b2 = tu_mutex(s2, pb, NULL);
    x->m1 = multi_of(x->a1, x->b1);
    x->m2 = multi_of(x->b2, x->a2); /* any order: one transaction */
    TU_REQUIRE_RC(zklock_acquire(x->p, -1), ZKLOCK_OK);
    tu_start_acquirer(&x->w1, x->m1, timeout_ms, true);
    CU_ASSERT_FATAL(tu_wait_children(pa, 1) && tu_wait_children(pb, 2));
    tu_start_acquirer(&x->w2, x->m2, timeout_ms, true);
    CU_ASSERT_FATAL(tu_wait_children(pa, 2) && tu_wait_children(pb, 3));
}

void tu_crossed_finish(struct tu_crossed *x)
{
    TU_ASSERT_RC(zklock_release(x->p), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&x->w2), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&x->w1), ZKLOCK_OK);
    zklock_free(x->m1);
    zklock_free(x->m2);
    zklock_free(x->a1);
    zklock_free(x->b1);
    zklock_free(x->a2);
    zklock_free(x->b2);
    zklock_free(x->p);
}
