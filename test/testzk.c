/* testzk.c: ZooKeeper helpers for the suites that need a server. */
#include "testutil.h"

#include "detector.h"

#include <arpa/inet.h>
#include <netinet/in.h>
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
    zhandle_t *zh = zookeeper_init(tu_hosts(), NULL, 10000, id, NULL, 0);
    if (!zh || !tu_wait_until(zh_connected, zh, 15000)) {
        fprintf(stderr, "cannot connect to ZooKeeper at %s\n", tu_hosts());
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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **tu_children(const char *path, int *count)
{
    struct String_vector v;
    char **out;

    *count = -1;
    if (zoo_get_children(tu_zk(), path, 0, &v) != ZOK)
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
    return tu_count(path) <= 0;
}

int tu_ephemerals(const char *path)
{
    struct Stat st;
    int n, total = 0;
    char **kids;

    if (zoo_exists(tu_zk(), path, 0, &st) != ZOK)
        return 0;
    if (st.ephemeralOwner != 0)
        return 1;
    kids = tu_children(path, &n);
    for (int i = 0; i < n; i++) {
        char child[1024];
        snprintf(child, sizeof child, "%s/%s", path, kids[i]);
        total += tu_ephemerals(child);
    }
    tu_free_strings(kids);
    return total;
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
