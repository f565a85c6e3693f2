/*
 * inspect.c: reading a lock's queue from outside (zklock_queue_read) and
 * waiting for it to change (zklock_queue_wait), for tools and operators.
 *
 * Like the engine, this uses only asynchronous ZooKeeper calls under the
 * session mutex and waits on a condition variable; the session's handle may
 * be replaced under us at any time, so a synchronous call is never safe.
 * One read is: the children (with the lock path's cversion), then the data
 * and Stat of every lock node, pipelined: two round trips.
 */
#include "inspect.h"

#include <stdlib.h>
#include <string.h>

/* ---- the result ------------------------------------------------------------ */

/* zklock_queue_t is the first member: the caller's pointer is ours. */
struct queue_block {
    zklock_queue_t q;
    char *path;
    zklock_node_t *nodes;
    char **strings; /* names and identities the nodes point into */
    size_t nstrings;
};

void zklock_queue_free(zklock_queue_t *q)
{
    struct queue_block *b = (struct queue_block *)q;

    if (!b)
        return;
    for (size_t i = 0; i < b->nstrings; i++)
        free(b->strings[i]);
    free(b->strings);
    free(b->nodes);
    free(b->path);
    free(b);
}

static const char *kind_of(enum zkl_tag tag)
{
    static const char *const kinds[ZKL_TAG_COUNT] = {
        [ZKL_TAG_LOCK] = "mutex",       [ZKL_TAG_WRIT] = "write",
        [ZKL_TAG_READ] = "read",        [ZKL_TAG_KLOCK] = "kazoo-lock",
        [ZKL_TAG_KRLOCK] = "kazoo-read", [ZKL_TAG_LEASE] = "lease",
        [ZKL_TAG_KLEASE] = "kazoo-lease", [ZKL_TAG_LATCH] = "latch",
    };
    return kinds[tag];
}

/* ---- one read ------------------------------------------------------------------ */

struct answer {
    struct zkl_reading *r;
    int rc;
    struct Stat st;
    char *data;
    int len;
};

/* One read in flight, on its caller's stack; the session lists them
 * (s->readings) so that a closed handle can end them (inspect_handle_closed). */
struct zkl_reading {
    zklock_session_t *s;
    struct zkl_reading *next;
    pthread_cond_t cond;
    int pending;
    int rc;
    bool exists;
    int64_t version;
    char **names; /* children, strdup'ed */
    int nnames;
    struct zkl_entry *q; /* the lock nodes among them */
    struct answer *answers;
    size_t n;
};

static void answered(struct zkl_reading *r)
{
    zklock__request_answered(r->s);
    if (--r->pending == 0)
        pthread_cond_broadcast(&r->cond);
    pthread_cond_broadcast(&r->s->cond);
}

static void children_done(int rc, const struct String_vector *v, const struct Stat *st,
                          const void *data)
{
    struct zkl_reading *r = (struct zkl_reading *)data;

    pthread_mutex_lock(&r->s->mu);
    r->exists = rc != ZNONODE;
    if (rc == ZOK) {
        r->version = st->cversion;
        r->names = calloc((size_t)v->count + 1, sizeof *r->names);
        for (int i = 0; r->names && i < v->count; i++) {
            if ((r->names[r->nnames] = strdup(v->data[i])) == NULL)
                break; /* a queue with a hole would be a wrong answer */
            r->nnames++;
        }
        if (!r->names || r->nnames < v->count)
            r->rc = ZKLOCK_ENOMEM;
    } else if (rc != ZNONODE) {
        r->rc = rc;
    }
    answered(r);
    pthread_mutex_unlock(&r->s->mu);
}

static void node_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
    struct answer *a = (struct answer *)data;
    struct zkl_reading *r = a->r;

    pthread_mutex_lock(&r->s->mu);
    a->rc = rc;
    if (rc == ZOK) {
        a->st = *st;
        a->data = malloc(len > 0 ? (size_t)len + 1 : 1);
        a->len = len > 0 ? len : 0;
        if (a->data) {
            if (len > 0)
                memcpy(a->data, value, (size_t)len);
            a->data[a->len] = '\0';
        } else if (r->rc == 0) {
            r->rc = ZKLOCK_ENOMEM;
        }
    } else if (rc != ZNONODE && r->rc == 0) {
        r->rc = rc; /* a node that went meanwhile is just left out */
    }
    answered(r);
    pthread_mutex_unlock(&r->s->mu);
}

static void await_answers(struct zkl_reading *r)
{
    while (r->pending > 0)
        zklock__cond_wait(r->s, &r->cond);
}

/* Sends one request; counts it if the client took it. */
static bool sent(struct zkl_reading *r, int rc)
{
    if (!zklock__request_sent(r->s, rc)) {
        if (r->rc == 0)
            r->rc = rc;
        return false;
    }
    r->pending++;
    return true;
}

/* With s->mu held: may we talk to ZooKeeper now, and wait for its answers? */
static int session_rc(zklock_session_t *s)
{
    if (s->closing || s->state == ZKL_S_CLOSED)
        return ZKLOCK_ECLOSED;
    if (zklock__on_completion_thread(s))
        return ZKLOCK_EDEADLK;
    if (zklock__session_refusal(s))
        return zklock__session_refusal(s);
    if (!zklock__connected(s))
        return s->adopted && s->state == ZKL_S_EXPIRED ? ZSESSIONEXPIRED : ZCONNECTIONLOSS;
    return 0;
}

static void read_children(struct zkl_reading *r, const char *path)
{
    sent(r, r->s->wire->aget_children2(r->s->zh, path, 0, children_done, r));
    await_answers(r);
}

static void read_nodes(struct zkl_reading *r, const char *path)
{
    /* The session may have ended while we waited for the listing. */
    if ((r->rc = session_rc(r->s)) != 0)
        return;
    r->q = calloc((size_t)r->nnames + 1, sizeof *r->q);
    r->answers = calloc((size_t)r->nnames + 1, sizeof *r->answers);
    if (!r->q || !r->answers) {
        r->rc = ZKLOCK_ENOMEM;
        return;
    }
    for (int i = 0; i < r->nnames && r->rc == 0; i++) {
        char *full;
        if (zklock__parse_name(r->names[i], &r->q[r->n]) != 0)
            continue;
        full = zklock__child_path(path, r->names[i]);
        if (!full) {
            r->rc = ZKLOCK_ENOMEM;
            break;
        }
        r->answers[r->n].r = r;
        if (sent(r, r->s->wire->aget(r->s->zh, full, 0, node_done, &r->answers[r->n])))
            r->n++;
        free(full); /* the client has serialised the request */
    }
    await_answers(r);
}

static void reading_free(struct zkl_reading *r)
{
    for (int i = 0; i < r->nnames; i++)
        free(r->names[i]);
    free(r->names);
    for (size_t i = 0; r->answers && i < r->n; i++)
        free(r->answers[i].data);
    free(r->answers);
    free(r->q);
    pthread_cond_destroy(&r->cond);
}

/* ---- building the queue ------------------------------------------------------ */

/* Moves a string into the block; NULL if out of memory. */
static const char *keep(struct queue_block *b, char *str)
{
    if (!str)
        return NULL;
    b->strings[b->nstrings++] = str;
    return str;
}

/* False if out of memory. */
static bool fill_node(zklock_node_t *node, struct queue_block *b, const struct zkl_entry *e,
                      struct answer *a, bool holds)
{
    node->name = keep(b, strdup(e->name));
    if (!node->name)
        return false;
    node->identity = keep(b, a->data);
    if (!node->identity)
        node->identity = "";
    a->data = NULL;
    node->kind = kind_of(e->tag);
    node->shared = zklock__tag_shared(e->tag);
    node->holds = holds;
    node->seq = e->seq;
    node->token = a->st.czxid;
    node->session = a->st.ephemeralOwner;
    node->ctime_ms = a->st.ctime;
    return true;
}

/* The nodes read, in queue order, without those that went between the
 * listing and their read; *n of them. NULL if out of memory. */
static struct zkl_entry *live_nodes(const struct zkl_reading *r, size_t *n)
{
    struct zkl_entry *live = calloc(r->n + 1, sizeof *live);

    *n = 0;
    for (size_t i = 0; live && i < r->n; i++) {
        if (r->answers[i].rc != ZOK)
            continue;
        live[*n] = r->q[i];
        live[*n].mine = false;
        live[(*n)++].index = (uint32_t)i;
    }
    if (live)
        zklock__sort(live, *n, *n ? live[0].seq : 0);
    return live;
}

static int build_queue(struct zkl_reading *r, const char *path, zklock_queue_t **out)
{
    struct queue_block *b = calloc(1, sizeof *b);
    struct zkl_entry *live;
    size_t n = 0;

    if (!b)
        return ZKLOCK_ENOMEM;
    live = live_nodes(r, &n);
    b->nodes = calloc(r->n + 1, sizeof *b->nodes);
    b->strings = calloc(2 * r->n + 1, sizeof *b->strings);
    b->path = strdup(path);
    if (!live || !b->nodes || !b->strings || !b->path) {
        free(live);
        zklock_queue_free(&b->q);
        return ZKLOCK_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        int blockers;
        bool holds = zklock__blocker(live, i, &blockers) < 0;
        if (!fill_node(&b->nodes[i], b, &live[i], &r->answers[live[i].index], holds)) {
            free(live);
            zklock_queue_free(&b->q);
            return ZKLOCK_ENOMEM;
        }
    }
    free(live);
    b->q.path = b->path;
    b->q.exists = r->exists;
    b->q.version = r->version;
    b->q.count = n;
    b->q.nodes = b->nodes;
    b->q.ignored = (size_t)r->nnames - r->n;
    *out = &b->q;
    return 0;
}

void zklock__queue_cap_holders(zklock_queue_t *q, int max)
{
    zklock_node_t *nodes = (zklock_node_t *)q->nodes; /* ours: built above */
    int held = 0;

    for (size_t i = 0; i < q->count; i++) {
        nodes[i].holds = held < max;
        held += nodes[i].holds;
    }
}

/* ---- the calls ----------------------------------------------------------------- */

/* With s->mu held: session_rc, and counts the caller in. */
static int enter(zklock_session_t *s)
{
    int rc = session_rc(s);
    if (rc == 0)
        s->users++;
    return rc;
}

static void leave(zklock_session_t *s)
{
    s->users--;
    pthread_cond_broadcast(&s->cond);
}

static void unlist_reading(struct zkl_reading *r)
{
    struct zkl_reading **p = &r->s->readings;

    while (*p && *p != r)
        p = &(*p)->next;
    if (*p)
        *p = r->next;
}

/* What a call that failed while the session closes answers: the close,
 * not the C client's ZCLOSING. */
static int as_closed(const zklock_session_t *s, int rc)
{
    return rc != 0 && (s->closing || s->state == ZKL_S_CLOSED) ? ZKLOCK_ECLOSED : rc;
}

/* With s->mu held: reads the queue at path into r (reading_free() it). */
static int read_locked(struct zkl_reading *r, zklock_session_t *s, const char *path)
{
    int rc;

    memset(r, 0, sizeof *r);
    r->s = s;
    if (zklock__cond_init(&r->cond) != 0)
        return ZKLOCK_ESYSTEM;
    rc = enter(s);
    if (rc == 0) {
        r->next = s->readings;
        s->readings = r;
        read_children(r, path);
        if (r->rc == 0 && r->exists)
            read_nodes(r, path);
        unlist_reading(r);
        rc = as_closed(s, r->rc);
        leave(s);
    }
    return rc;
}

int zklock_queue_read(zklock_session_t *s, const char *path, zklock_queue_t **out)
{
    struct zkl_reading r;
    int rc;

    if (!out)
        return ZKLOCK_EINVAL;
    *out = NULL;
    if (!s || zklock__path_check(path) != 0)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&s->mu);
    rc = read_locked(&r, s, path);
    if (rc == 0)
        rc = build_queue(&r, path, out);
    pthread_mutex_unlock(&s->mu);
    reading_free(&r);
    return rc;
}

/* ---- writing into a node from outside (zklock_revoke) --------------------------------- */

static void set_done(int rc, const struct Stat *st, const void *data)
{
    struct answer *a = (struct answer *)data;
    struct zkl_reading *r = a->r;

    pthread_mutex_lock(&r->s->mu);
    a->rc = rc;
    answered(r);
    pthread_mutex_unlock(&r->s->mu);
}

/* A write is a reading with one answer: listed in s->readings while it
 * waits, so that a closed handle ends it (inspect_handle_closed) and the
 * handle it went on is never closed under a call that still uses it. */
int zklock__node_write(zklock_session_t *s, const char *path, const char *data, int len)
{
    struct zkl_reading r;
    struct answer a = {.r = &r};
    int rc;

    memset(&r, 0, sizeof r);
    r.s = s;
    if (zklock__cond_init(&r.cond) != 0)
        return ZKLOCK_ESYSTEM;
    pthread_mutex_lock(&s->mu);
    rc = enter(s);
    if (rc == 0) {
        r.next = s->readings;
        s->readings = &r;
        if (sent(&r, s->wire->aset(s->zh, path, data, len, -1, set_done, &a)))
            await_answers(&r);
        unlist_reading(&r);
        rc = as_closed(s, r.rc ? r.rc : a.rc);
        leave(s);
    }
    pthread_mutex_unlock(&s->mu);
    pthread_cond_destroy(&r.cond);
    return rc;
}

/* The first node of the queue holds: the leader of an election. */
static void take_leader(struct zkl_reading *r, char **value, size_t *len, int64_t *token)
{
    size_t n;
    struct zkl_entry *live = live_nodes(r, &n);
    struct answer *a = live && n > 0 ? &r->answers[live[0].index] : NULL;

    if (a) {
        *value = a->data; /* taken from the reading */
        a->data = NULL;
        *len = (size_t)a->len;
        *token = a->st.czxid;
    }
    free(live);
}

int zklock_leader(zklock_session_t *s, const char *path, char **value, size_t *len,
                  int64_t *token)
{
    struct zkl_reading r;
    char *v = NULL;
    size_t l = 0;
    int64_t t = 0;
    int rc;

    if (value)
        *value = NULL;
    if (!s || zklock__path_check(path) != 0 || !value)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&s->mu);
    rc = read_locked(&r, s, path);
    if (rc == 0)
        take_leader(&r, &v, &l, &t);
    pthread_mutex_unlock(&s->mu);
    reading_free(&r);
    *value = v;
    if (len)
        *len = rc == 0 ? l : 0;
    if (token)
        *token = rc == 0 ? t : 0;
    return rc;
}

/* ---- the watch records (inspect.h) --------------------------------------------------- */

static void unlink_qwatch(struct zkl_qwatch *w)
{
    struct zkl_qwatch **p = &w->s->qwatches;
    while (*p && *p != w)
        p = &(*p)->next;
    if (*p)
        *p = w->next;
    free(w->path);
    free(w);
}

/* A retired record goes once the client holds nothing of it. */
static void settle(struct zkl_qwatch *w)
{
    if (w->abandoned && !w->registered && !w->in_flight)
        unlink_qwatch(w);
}

/* Takes w's watch back, locally (no round trip). */
static void take_back(struct zkl_qwatch *w)
{
    zklock_session_t *s = w->s;

    if (w->registered && s->zh &&
        s->wire->remove_watches(s->zh, w->path, w->type, zklock__qwatch_watcher, w, 1) ==
            ZOK) {
        w->registered = 0;
        zklock__watch_gone(s);
    }
}

void zklock__qwatch_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    struct zkl_qwatch *w = ctx;
    zklock_session_t *s;

    if (type == ZOO_SESSION_EVENT)
        return;
    s = w->s;
    pthread_mutex_lock(&s->mu);
    if (w->registered) {
        w->registered = 0;
        zklock__watch_gone(s);
    }
    w->fired = true;
    if (w->abandoned)
        settle(w);
    else if (w->ops)
        w->ops->fired(w, type);
    else
        pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

static void qwatch_answer(struct zkl_qwatch *w, int rc, bool registered, const struct Stat *st)
{
    zklock_session_t *s = w->s;

    w->in_flight = false;
    w->answered = true;
    w->rc = rc == ZNONODE ? ZOK : rc;
    w->exists = rc == ZOK;
    w->version = rc == ZOK && st ? st->cversion : 0;
    if (registered) {
        w->registered = 1;
        s->watches++;
    }
    zklock__request_answered(s);
    pthread_cond_broadcast(&s->cond);
}

/* After the answer: a retired record's watch is not wanted (taken back at
 * once); an owner hears of it. */
static void after_answer(struct zkl_qwatch *w, int rc, const struct String_vector *children,
                         const char *data, int len, const struct Stat *st)
{
    if (w->abandoned) {
        take_back(w);
        settle(w);
    } else if (w->ops) {
        w->ops->answered(w, rc, children, data, len, st);
    }
}

/* (In the completions, w may be gone after after_answer: s is kept.) */
static void qwatch_children_done(int rc, const struct String_vector *v, const struct Stat *st,
                                 const void *data)
{
    struct zkl_qwatch *w = (struct zkl_qwatch *)data;
    zklock_session_t *s = w->s;

    pthread_mutex_lock(&s->mu);
    qwatch_answer(w, rc, rc == ZOK && w->type == ZWATCHTYPE_CHILD, st);
    after_answer(w, rc, v, NULL, 0, st);
    pthread_mutex_unlock(&s->mu);
}

static void qwatch_exists_done(int rc, const struct Stat *st, const void *data)
{
    struct zkl_qwatch *w = (struct zkl_qwatch *)data;
    zklock_session_t *s = w->s;

    pthread_mutex_lock(&s->mu);
    /* an exists watch is set whether the node exists or not */
    qwatch_answer(w, rc, rc == ZOK || rc == ZNONODE, NULL);
    w->version = 0;
    after_answer(w, rc, NULL, NULL, 0, st);
    pthread_mutex_unlock(&s->mu);
}

static void qwatch_get_done(int rc, const char *value, int len, const struct Stat *st,
                            const void *data)
{
    struct zkl_qwatch *w = (struct zkl_qwatch *)data;
    zklock_session_t *s = w->s;

    pthread_mutex_lock(&s->mu);
    if (w->expected) {
        /* `since` has the data up to its first NUL: the same if that is all
         * of it or is followed by a NUL. */
        size_t n = strlen(w->expected);
        w->data_differs = rc != ZOK || len < (int)n || memcmp(value, w->expected, n) != 0 ||
                          (len > (int)n && value[n] != '\0');
    }
    qwatch_answer(w, rc == ZNONODE ? ZOK : rc, rc == ZOK, st);
    after_answer(w, rc, NULL, value, len, st);
    pthread_mutex_unlock(&s->mu);
}

struct zkl_qwatch *zklock__qwatch_new(zklock_session_t *s, const char *path, const char *child)
{
    struct zkl_qwatch *w = calloc(1, sizeof *w);

    if (!w || !(w->path = child ? zklock__child_path(path, child) : strdup(path))) {
        free(w);
        return NULL;
    }
    w->s = s;
    w->next = s->qwatches;
    s->qwatches = w;
    return w;
}

int zklock__qwatch_send(struct zkl_qwatch *w, enum zkl_qrequest request, bool watch)
{
    zklock_session_t *s = w->s;
    int rc;

    w->request = request;
    w->type = request == ZKL_Q_CHILDREN ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA;
    if (request == ZKL_Q_CHILDREN && !watch) {
        w->type = 0; /* no watch to register */
        rc = s->wire->aget_children2(s->zh, w->path, 0, qwatch_children_done, w);
    } else if (request == ZKL_Q_CHILDREN) {
        rc = s->wire->awget_children2(s->zh, w->path, zklock__qwatch_watcher, w,
                                     qwatch_children_done, w);
    } else if (request == ZKL_Q_EXISTS) {
        rc = s->wire->awexists(s->zh, w->path, zklock__qwatch_watcher, w, qwatch_exists_done, w);
    } else {
        rc = s->wire->awget(s->zh, w->path, zklock__qwatch_watcher, w, qwatch_get_done, w);
    }
    if (zklock__request_sent(s, rc))
        w->in_flight = true;
    return rc;
}

void zklock__qwatch_retire(struct zkl_qwatch *w)
{
    w->ops = NULL;
    w->owner = NULL;
    take_back(w);
    w->abandoned = true;
    settle(w);
}

/* ---- waiting for a change ----------------------------------------------------------- */

/* Sends w's request and waits for its answer. */
static int send_and_wait(struct zkl_qwatch *w, enum zkl_qrequest request)
{
    int rc = zklock__qwatch_send(w, request, true);

    if (rc == ZOK) {
        while (!w->answered)
            zklock__cond_wait(w->s, &w->s->cond);
        rc = w->rc;
    }
    return rc;
}

/* The queue's children, or the lock path's creation if it does not exist. */
static int send_qwatch(struct zkl_qwatch *w, const zklock_queue_t *since)
{
    return send_and_wait(w, since->exists ? ZKL_Q_CHILDREN : ZKL_Q_EXISTS);
}

/* The holder's data (a leader's proclaimed value): watched too, so that
 * an election's observer hears of a new value. */
static int send_holder_watch(struct zkl_qwatch *w, const zklock_queue_t *since)
{
    w->expected = since->nodes[0].identity;
    return send_and_wait(w, ZKL_Q_GET);
}

static bool differs(const struct zkl_qwatch *w, const zklock_queue_t *since)
{
    /* an exists answer says nothing of the children: creation is the change */
    if (w->exists != (bool)since->exists)
        return true;
    return since->exists && w->version != since->version;
}

static bool holder_changed(const struct zkl_qwatch *h)
{
    return h && (h->fired || h->data_differs || h->ended);
}

int zklock_queue_wait(zklock_session_t *s, const zklock_queue_t *since, int timeout_ms)
{
    struct zkl_qwatch *w, *h = NULL;
    struct timespec deadline;
    int rc;

    if (!s || !since || !since->path || timeout_ms < -1)
        return ZKLOCK_EINVAL;
    zklock__deadline(s, &deadline, timeout_ms > 0 ? timeout_ms : 0);
    pthread_mutex_lock(&s->mu);
    w = zklock__qwatch_new(s, since->path, NULL);
    if (w && since->count > 0 && !(h = zklock__qwatch_new(s, since->path, since->nodes[0].name))) {
        zklock__qwatch_retire(w);
        w = NULL;
    }
    if (!w) {
        pthread_mutex_unlock(&s->mu);
        return ZKLOCK_ENOMEM;
    }
    rc = enter(s);
    if (rc == 0) {
        rc = send_qwatch(w, since);
        if (rc == 0 && h && !differs(w, since) && !w->fired)
            rc = send_holder_watch(h, since);
        while (rc == 0 && !differs(w, since) && !w->fired && !w->ended && !holder_changed(h)) {
            if (timeout_ms >= 0 && zklock__passed(s, &deadline)) {
                rc = ZKLOCK_ETIMEDOUT;
            } else if (timeout_ms < 0) {
                zklock__cond_wait(s, &s->cond);
            } else {
                zklock__cond_wait_until(s, &s->cond, &deadline, 0);
            }
        }
        rc = as_closed(s, rc);
        leave(s);
    }
    zklock__qwatch_retire(w);
    if (h)
        zklock__qwatch_retire(h);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- the session's side --------------------------------------------------------------- */

/* The ZooKeeper session ended: waiters return (the queue did change). */
static void inspect_ended(zklock_session_t *s, int reason)
{
    for (struct zkl_qwatch *w = s->qwatches; w; w = w->next)
        w->ended = true;
    pthread_cond_broadcast(&s->cond);
}

/* Why a request of a closed handle will never be answered. */
static int unanswered_rc(const zklock_session_t *s)
{
    return s->closing || s->state == ZKL_S_CLOSED ? ZKLOCK_ECLOSED : ZSESSIONEXPIRED;
}

/* The old handle is closed: its watches cannot fire, and what it had not
 * answered will not be answered. zookeeper_close() runs what it still owes
 * (ZCLOSING) only if its completion thread is still in its loop: in
 * libzookeeper_mt 3.8 nothing else runs them (its destroy() does not in
 * the multi-threaded client). So the reads and the watch requests that a
 * caller waits for end here; the retired records are freed. */
static void inspect_handle_closed(zklock_session_t *s)
{
    struct zkl_qwatch *w = s->qwatches, *next;
    for (; w; w = next) {
        next = w->next;
        w->registered = 0;
        if (w->in_flight && !w->ops) { /* its caller waits on s->cond */
            w->answered = true;
            w->rc = unanswered_rc(s);
        }
        w->in_flight = false;
        settle(w);
    }
    for (struct zkl_reading *r = s->readings; r; r = r->next) {
        if (r->pending > 0 && r->rc == 0)
            r->rc = unanswered_rc(s);
        r->pending = 0;
        pthread_cond_broadcast(&r->cond);
    }
    pthread_cond_broadcast(&s->cond);
}

/* Adopted handles: take back what is left on the handle. */
static void inspect_unwatch_all(zklock_session_t *s)
{
    struct zkl_qwatch *w = s->qwatches, *next;
    for (; w; w = next) {
        next = w->next;
        take_back(w);
        settle(w);
    }
}

const struct zkl_layer zklock__inspect_layer = {
    .ended = inspect_ended,
    .handle_closed = inspect_handle_closed,
    .unwatch_all = inspect_unwatch_all,
};
