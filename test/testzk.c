/* testzk.c: ZooKeeper helpers for the suites that need a server. */
#include "testutil.h"

#include <stdlib.h>
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

static bool zh_connected(void *zh)
{
    return zoo_state((zhandle_t *)zh) == ZOO_CONNECTED_STATE;
}

static zhandle_t *connect_raw(const clientid_t *id)
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
        inspector = connect_raw(NULL);
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

static bool renewed(void *p)
{
    struct renewal *r = p;
    int64_t id = zklock_session_id(r->s);
    return id != r->old_id;
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
        twin = connect_raw(&id);
        CU_ASSERT_PTR_NOT_NULL_FATAL(twin);
        zookeeper_close(twin);
        if (tu_wait_until(renewed, &r, 5000))
            return;
    }
    CU_FAIL_FATAL("could not make the session expire");
}

