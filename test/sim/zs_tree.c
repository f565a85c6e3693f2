/*
 * zs_tree.c: a ZooKeeper data tree, and what a committed transaction does to
 * it, as ZooKeeper 3.8's DataTree does it: Stat fields, the parent's count
 * of child creations (sequence numbers; deletions do not count), the
 * cversion clients see (2 * creations - children, DataNode.copyStat), the
 * watches a change fires (NodeCreated and the parent's NodeChildrenChanged,
 * NodeDeleted to both kinds of watches of the path, NodeDataChanged).
 * Pure: no time, no randomness (the transaction carries its zxid and time).
 */
#include "zs.h"

#include <stdlib.h>
#include <string.h>

char *zs_dup_bytes(const char *p, int len)
{
    char *d;

    if (len < 0 || !p)
        return NULL;
    d = malloc((size_t)len + 1);
    if (!d)
        abort();
    memcpy(d, p, (size_t)len);
    d[len] = '\0';
    return d;
}

char *zs_strdup(const char *s)
{
    char *d = s ? strdup(s) : NULL;

    if (s && !d)
        abort();
    return d;
}

bool zs_path_valid(const char *path, bool sequential)
{
    size_t len;

    if (!path || path[0] != '/')
        return false;
    len = strlen(path);
    if (len == 1)
        return true;
    if (path[len - 1] == '/' && !sequential)
        return false;
    for (const char *p = path; *p; p++) {
        if (*p == '/' && p[1] == '/')
            return false;
        if (*p == '/' && p[1] == '.' && (p[2] == '/' || p[2] == '\0'))
            return false;
        if (*p == '/' && p[1] == '.' && p[2] == '.' && (p[3] == '/' || p[3] == '\0'))
            return false;
    }
    return true;
}

const char *zs_parent_of(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    size_t len = (size_t)(slash - path);

    if (len == 0)
        len = 1; /* "/" */
    if (len >= size)
        len = size - 1;
    memcpy(buf, path, len);
    buf[len] = '\0';
    return buf;
}

/* ---- the sorted array ---------------------------------------------------------- */

void zs_tree_init(struct zs_tree *t)
{
    memset(t, 0, sizeof *t);
}

static void node_free(struct zs_node *n)
{
    free(n->path);
    free(n->data);
    free(n);
}

void zs_tree_free(struct zs_tree *t)
{
    for (size_t i = 0; i < t->n; i++)
        node_free(t->v[i]);
    free(t->v);
    memset(t, 0, sizeof *t);
}

static struct zs_node *node_copy(const struct zs_node *n)
{
    struct zs_node *c = malloc(sizeof *c);

    if (!c)
        abort();
    *c = *n;
    c->path = zs_strdup(n->path);
    c->data = zs_dup_bytes(n->data, n->len);
    return c;
}

void zs_tree_copy(struct zs_tree *dst, const struct zs_tree *src)
{
    zs_tree_init(dst);
    dst->cap = src->n ? src->n : 1;
    dst->v = malloc(dst->cap * sizeof *dst->v);
    if (!dst->v)
        abort();
    for (size_t i = 0; i < src->n; i++)
        dst->v[i] = node_copy(src->v[i]);
    dst->n = src->n;
}

/* The index of path, or where it would go. */
static size_t lower_bound(const struct zs_tree *t, const char *path)
{
    size_t lo = 0, hi = t->n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(t->v[mid]->path, path) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct zs_node *zs_tree_get(const struct zs_tree *t, const char *path)
{
    size_t i = lower_bound(t, path);

    return i < t->n && strcmp(t->v[i]->path, path) == 0 ? t->v[i] : NULL;
}

static void insert(struct zs_tree *t, struct zs_node *n)
{
    size_t i = lower_bound(t, n->path);

    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->v = realloc(t->v, t->cap * sizeof *t->v);
        if (!t->v)
            abort();
    }
    memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof *t->v);
    t->v[i] = n;
    t->n++;
}

static void erase(struct zs_tree *t, const char *path)
{
    size_t i = lower_bound(t, path);

    if (i >= t->n || strcmp(t->v[i]->path, path) != 0)
        return;
    node_free(t->v[i]);
    memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof *t->v);
    t->n--;
}

/* ---- reading ------------------------------------------------------------------- */

void zs_stat_of(const struct zs_node *n, struct Stat *out)
{
    *out = n->st;
    out->cversion = n->creations * 2 - n->st.numChildren;
    out->dataLength = n->len > 0 ? n->len : 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void zs_tree_children(const struct zs_tree *t, const char *path, struct String_vector *out)
{
    size_t plen = strlen(path), i, cap = 8;
    char prefix[1024];

    out->count = 0;
    out->data = malloc(cap * sizeof *out->data);
    if (!out->data)
        abort();
    snprintf(prefix, sizeof prefix, "%s/", plen == 1 ? "" : path);
    plen = strlen(prefix);
    for (i = lower_bound(t, prefix); i < t->n && strncmp(t->v[i]->path, prefix, plen) == 0; i++) {
        const char *name = t->v[i]->path + plen;
        if (strchr(name, '/'))
            continue; /* a grandchild */
        if ((size_t)out->count == cap) {
            cap *= 2;
            out->data = realloc(out->data, cap * sizeof *out->data);
            if (!out->data)
                abort();
        }
        out->data[out->count++] = zs_strdup(name);
    }
    /* '/' sorts before most name characters, so a grandchild can come
     * between two children: the scan skips it; the order is the server's
     * (a hash set's, in ZooKeeper: clients must not rely on it). */
    qsort(out->data, (size_t)out->count, sizeof *out->data, compare_names);
}

void zs_strings_free(struct String_vector *v)
{
    for (int i = 0; i < v->count; i++)
        free(v->data[i]);
    free(v->data);
    v->data = NULL;
    v->count = 0;
}

/* ---- applying a transaction ------------------------------------------------------ */

static void trigger(struct zs_trigger **trig, int *ntrig, int type, bool child, const char *path)
{
    if (!trig)
        return;
    *trig = realloc(*trig, (size_t)(*ntrig + 1) * sizeof **trig);
    if (!*trig)
        abort();
    (*trig)[*ntrig].type = type;
    (*trig)[*ntrig].child = child;
    (*trig)[*ntrig].path = zs_strdup(path);
    (*ntrig)++;
}

void zs_triggers_free(struct zs_trigger *trig, int n)
{
    for (int i = 0; i < n; i++)
        free(trig[i].path);
    free(trig);
}

static void apply_create(struct zs_tree *t, const struct zs_txn *tx, const struct zs_op *op,
                         struct zs_trigger **trig, int *ntrig)
{
    char pbuf[1024];
    struct zs_node *parent = zs_tree_get(t, zs_parent_of(op->path, pbuf, sizeof pbuf));
    struct zs_node *n = calloc(1, sizeof *n);

    if (!n)
        abort();
    n->path = zs_strdup(op->path);
    n->data = zs_dup_bytes(op->data, op->len);
    n->len = op->data ? op->len : -1;
    n->kind = op->kind;
    n->st.czxid = n->st.mzxid = n->st.pzxid = tx->zxid;
    n->st.ctime = n->st.mtime = tx->time_ms;
    n->st.ephemeralOwner = op->kind == ZS_EPHEMERAL ? op->owner : 0;
    insert(t, n);
    if (parent) {
        parent->creations++;
        parent->st.numChildren++;
        parent->st.pzxid = tx->zxid;
    }
    trigger(trig, ntrig, ZOO_CREATED_EVENT, false, op->path);
    trigger(trig, ntrig, ZOO_CHILD_EVENT, true, pbuf);
}

static void apply_delete(struct zs_tree *t, const struct zs_txn *tx, const struct zs_op *op,
                         struct zs_trigger **trig, int *ntrig)
{
    char pbuf[1024];
    struct zs_node *parent = zs_tree_get(t, zs_parent_of(op->path, pbuf, sizeof pbuf));

    if (!zs_tree_get(t, op->path))
        return;
    erase(t, op->path);
    if (parent) {
        parent->st.numChildren--;
        parent->st.pzxid = tx->zxid;
    }
    /* One NodeDeleted per watcher (the data watch's, or else the child
     * watch's), then the parent's children changed. */
    trigger(trig, ntrig, ZOO_DELETED_EVENT, false, op->path);
    trigger(trig, ntrig, ZOO_DELETED_EVENT, true, op->path);
    trigger(trig, ntrig, ZOO_CHILD_EVENT, true, pbuf);
}

static void apply_set(struct zs_tree *t, const struct zs_txn *tx, const struct zs_op *op,
                      struct zs_trigger **trig, int *ntrig)
{
    struct zs_node *n = zs_tree_get(t, op->path);

    if (!n)
        return;
    free(n->data);
    n->data = zs_dup_bytes(op->data, op->len);
    n->len = op->data ? op->len : -1;
    n->st.mzxid = tx->zxid;
    n->st.mtime = tx->time_ms;
    n->st.version++;
    trigger(trig, ntrig, ZOO_CHANGED_EVENT, false, op->path);
}

void zs_tree_apply(struct zs_tree *t, const struct zs_txn *tx, struct zs_trigger **trig,
                   int *ntrig)
{
    for (int i = 0; i < tx->nops; i++) {
        const struct zs_op *op = &tx->ops[i];
        if (op->type == ZS_OP_CREATE)
            apply_create(t, tx, op, trig, ntrig);
        else if (op->type == ZS_OP_DELETE)
            apply_delete(t, tx, op, trig, ntrig);
        else
            apply_set(t, tx, op, trig, ntrig);
    }
}

void zs_txn_free(struct zs_txn *tx)
{
    for (int i = 0; i < tx->nops; i++) {
        free(tx->ops[i].path);
        free(tx->ops[i].data);
    }
    free(tx->ops);
    tx->ops = NULL;
    tx->nops = 0;
}
