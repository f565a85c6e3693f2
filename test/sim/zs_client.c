/*
 * zs_client.c: libzookeeper_mt 3.8 as zklock sees it, on the simulated
 * ensemble (zs.h). What it mirrors of the C client (zookeeper.c and
 * zk_hashtable.c, read at release-3.8.0):
 *  - a request's completion is registered when it is made (sent_requests),
 *    also while not connected; it is sent once connected; a connection that
 *    goes (handle_error) first queues the session event (CONNECTING, or the
 *    unrecoverable state), then fails every registered request with the
 *    reason (ZCONNECTIONLOSS, ZOPERATIONTIMEOUT, ZSESSIONEXPIRED), state 0
 *    until the next attempt;
 *  - the I/O thread reads answers in order, activates a request's watch by
 *    its answer (getData: ZOK; exists: ZOK or ZNONODE; children: ZOK) and
 *    queues the completion; an event's watchers are collected when it is
 *    read (one-shot: taken out of the tables), deduplicated by (fn, ctx);
 *    session events go to the global watcher and to every registered one;
 *  - the completion thread runs what was queued, in order;
 *  - a multi's results: value and stat pointers are taken when it is made;
 *    answered, each op's err is written, a created name copied; a failed
 *    multi writes value = NULL, stat = NULL; the completion's rc is the first
 *    code that is neither ZOK nor ZRUNTIMEINCONSISTENCY;
 *  - pings only when nothing is outstanding, every third of the timeout; a
 *    connection with nothing read for two thirds of it is lost
 *    (ZOPERATIONTIMEOUT); after a pass over every server, a pause of 1/60;
 *  - on a new connection: credentials, SetWatches (with the last zxid seen),
 *    then the requests made meanwhile; the CONNECTED event;
 *  - zoo_add_auth refused (ZINVALIDSTATE) between two attempts (state 0);
 *  - zookeeper_close: a connected handle closes its session; completions
 *    still owed may run during the close (those queued, then ZCLOSING for the
 *    rest) or never: a random prefix runs.
 */
#include "zs.h"

#include <stdlib.h>
#include <string.h>

#define W zs_w

enum ctype { C_VOID, C_STAT, C_DATA, C_STRINGS, C_STRINGS_STAT, C_STRING, C_STRING_STAT,
             C_MULTI };
enum wreg { WREG_NONE, WREG_DATA, WREG_EXISTS, WREG_CHILD };

struct pending {
    struct pending *next;
    int xid;
    enum ctype ctype;
    union {
        void_completion_t v;
        stat_completion_t stat;
        data_completion_t data;
        strings_completion_t strs;
        strings_stat_completion_t strs_stat;
        string_completion_t str;
        string_stat_completion_t str_stat;
    } fn;
    const void *data;
    enum wreg wreg;
    watcher_fn wfn;
    void *wctx;
    char *wpath;
    zoo_op_result_t *results; /* a multi's */
    int nresults;
    int *op_types;
    struct zs_msg *unsent;    /* until it goes out */
};

struct wobj {
    struct wobj *next;
    watcher_fn fn;
    void *ctx;
};

struct wentry {
    char *path;
    struct wobj *head;
};

struct wtable {
    struct wentry *v;
    size_t n, cap;
};

struct completion {
    struct completion *next;
    struct pending *p;        /* an answer, or a failure made up */
    bool failed;              /* made up: no payload */
    int rc;
    struct zs_answer ans;
    bool event;               /* else a response */
    int type, state;
    char *path;
    struct wobj *watchers;
};

struct auth_info {
    char *scheme;
    char *cert;
    int len;
    void_completion_t fn;
    const void *data;
};

struct _zhandle {
    int id, proc;
    int state;
    watcher_fn watcher;
    void *context;
    clientid_t cid;
    int recv_timeout;
    int64_t last_zxid;
    int order[ZS_SERVERS], at;  /* the server list, shuffled; the current */
    int tried;                  /* servers tried since the last connection */
    int conn;                   /* -1: none */
    int xid;
    struct pending *head, *tail;/* every registered request, in order */
    struct completion *cq_head, *cq_tail;
    bool cq_scheduled;
    struct wtable node_w, exist_w, child_w;
    struct auth_info *auth;
    int nauth, auth_sent;
    sim_time_t last_recv, last_send;
    uint64_t io_gen;
    bool closed;
    sim_time_t lost_told;       /* the CONNECTING event ran (-1: connected since) */
    bool expiry_told;
};

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);

    if (!p)
        abort();
    return p;
}

static bool unrecoverable(const zhandle_t *zh)
{
    return zh->state == ZOO_EXPIRED_SESSION_STATE || zh->state == ZOO_AUTH_FAILED_STATE;
}

static bool connected(const zhandle_t *zh)
{
    return zh->state == ZOO_CONNECTED_STATE;
}

static zhandle_t *handle_get(int id)
{
    return id >= 0 && (size_t)id < W->nhandles ? W->handles[id] : NULL;
}

int zs_handle_proc(const zhandle_t *zh)
{
    return zh->proc;
}

int zs_handle_id(const zhandle_t *zh)
{
    return zh->id;
}

int zs_handle_server(const zhandle_t *zh)
{
    const struct zs_conn *c = zs_conn_get(zh->conn);

    return connected(zh) && c ? c->server : -1;
}

bool zs_handle_quiet(const zhandle_t *zh)
{
    return !zh->head && !zh->cq_head;
}

zhandle_t *zs_handle_of_session(int64_t session)
{
    for (size_t i = W->nhandles; i-- > 0;)
        if (W->handles[i]->cid.client_id == session)
            return W->handles[i];
    return NULL;
}

sim_time_t zs_handle_lost_told(const zhandle_t *zh)
{
    return zh->lost_told;
}

bool zs_handle_expiry_told(const zhandle_t *zh)
{
    return zh->expiry_told;
}

/* ---- watch tables (zk_hashtable.c) ------------------------------------------------ */

static struct wentry *wfind(struct wtable *t, const char *path)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i].path, path) == 0)
            return &t->v[i];
    return NULL;
}

static bool wlist_has(const struct wobj *l, watcher_fn fn, void *ctx)
{
    for (; l; l = l->next)
        if (l->fn == fn && l->ctx == ctx)
            return true;
    return false;
}

/* add_to_list: prepends, once per (fn, ctx). */
static void wlist_add(struct wobj **l, watcher_fn fn, void *ctx)
{
    struct wobj *o;

    if (wlist_has(*l, fn, ctx))
        return;
    o = xcalloc(1, sizeof *o);
    o->fn = fn;
    o->ctx = ctx;
    o->next = *l;
    *l = o;
}

static void wlist_free(struct wobj *l)
{
    while (l) {
        struct wobj *next = l->next;
        free(l);
        l = next;
    }
}

static void wadd(struct wtable *t, const char *path, watcher_fn fn, void *ctx)
{
    struct wentry *e = wfind(t, path);

    if (!e) {
        if (t->n == t->cap) {
            t->cap = t->cap ? 2 * t->cap : 16;
            t->v = realloc(t->v, t->cap * sizeof *t->v);
            if (!t->v)
                abort();
        }
        e = &t->v[t->n++];
        e->path = zs_strdup(path);
        e->head = NULL;
    }
    wlist_add(&e->head, fn, ctx);
}

static void wentry_remove(struct wtable *t, struct wentry *e)
{
    size_t i = (size_t)(e - t->v);

    free(e->path);
    wlist_free(e->head);
    memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof *t->v);
    t->n--;
}

/* add_for_event: moves the path's watchers onto the delivery list. */
static void wtake(struct wtable *t, const char *path, struct wobj **to)
{
    struct wentry *e = wfind(t, path);

    if (!e)
        return;
    for (struct wobj *o = e->head; o; o = o->next)
        wlist_add(to, o->fn, o->ctx);
    wentry_remove(t, e);
}

static void wcopy_all(const struct wtable *t, struct wobj **to)
{
    for (size_t i = 0; i < t->n; i++)
        for (struct wobj *o = t->v[i].head; o; o = o->next)
            wlist_add(to, o->fn, o->ctx);
}

static void wtable_free(struct wtable *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].path);
        wlist_free(t->v[i].head);
    }
    free(t->v);
    memset(t, 0, sizeof *t);
}

static bool wremove(struct wtable *t, const char *path, watcher_fn fn, void *ctx)
{
    struct wentry *e = wfind(t, path);
    struct wobj **pp;

    if (!e)
        return false;
    if (!fn) {
        wentry_remove(t, e);
        return true;
    }
    for (pp = &e->head; *pp; pp = &(*pp)->next) {
        if ((*pp)->fn == fn && (*pp)->ctx == ctx) {
            struct wobj *o = *pp;
            *pp = o->next;
            free(o);
            if (!e->head)
                wentry_remove(t, e);
            return true;
        }
    }
    return false;
}

static bool whas(struct wtable *t, const char *path, watcher_fn fn, void *ctx)
{
    struct wentry *e = wfind(t, path);

    return e && (!fn || wlist_has(e->head, fn, ctx));
}

/* ---- the completion thread -------------------------------------------------------------- */

static void run_completions(struct sim_event *ev);

static void cq_push(zhandle_t *zh, struct completion *c)
{
    c->next = NULL;
    if (zh->cq_tail)
        zh->cq_tail->next = c;
    else
        zh->cq_head = c;
    zh->cq_tail = c;
    if (!zh->cq_scheduled) {
        zh->cq_scheduled = true;
        sim_at(sim_now() + sim_between(&W->rng, 0, SIM_US(50)), zh->proc, SIM_COMPLETION,
               run_completions, NULL, zh->id, 0);
    }
}

static void session_event(zhandle_t *zh, int state)
{
    struct completion *c = xcalloc(1, sizeof *c);

    c->event = true;
    c->type = ZOO_SESSION_EVENT;
    c->state = state;
    c->path = zs_strdup("");
    /* collectWatchers: the global watcher first (it ends up last: the list
     * is built by prepending), then every registered one, each once. */
    wlist_add(&c->watchers, zh->watcher, zh->context);
    wcopy_all(&zh->node_w, &c->watchers);
    wcopy_all(&zh->exist_w, &c->watchers);
    wcopy_all(&zh->child_w, &c->watchers);
    zs_log("client %d: session event %d", zh->id, state);
    cq_push(zh, c);
}

static void pending_free(struct pending *p)
{
    free(p->wpath);
    free(p->op_types);
    zs_msg_free(p->unsent);
    free(p);
}

static void completion_free(struct completion *c)
{
    if (c->p)
        pending_free(c->p);
    free(c->ans.path);
    free(c->ans.data);
    zs_strings_free(&c->ans.children);
    for (int i = 0; c->ans.created && i < c->ans.nresults; i++)
        free(c->ans.created[i]);
    free(c->ans.created);
    free(c->ans.results);
    free(c->path);
    wlist_free(c->watchers);
    free(c);
}

/* op_result_*_completion and deserialize_multi. A whole request that
 * failed (the connection, ZTHROTTLEDOP: an error in the reply's header) is
 * cleanup_failed_multi: every op gets that code. */
static int multi_results(struct pending *p, const struct completion *c)
{
    bool whole = c->failed || !c->ans.results;
    int whole_rc = c->failed ? c->rc : c->ans.rc, rc = 0;

    for (int i = 0; i < p->nresults; i++) {
        zoo_op_result_t *r = &p->results[i];
        int err = whole ? whole_rc : c->ans.results[i];
        bool op_failed = whole || c->ans.rc != ZOK;
        r->err = err;
        if (p->op_types[i] == ZOO_CREATE_OP || p->op_types[i] == ZOO_CREATE_CONTAINER_OP) {
            const char *v = op_failed ? NULL : c->ans.created[i];
            if (r->value && v) {
                int len = (int)strlen(v) + 1;
                if (len > r->valuelen)
                    len = r->valuelen;
                if (len > 0) {
                    memcpy(r->value, v, (size_t)len - 1);
                    r->value[len - 1] = '\0';
                }
            } else {
                r->value = NULL;
            }
        } else if (p->op_types[i] == ZOO_SETDATA_OP) {
            if (!(r->stat && err == 0 && !op_failed))
                r->stat = NULL;
            /* a successful set's Stat: not modelled (zklock reads none) */
        }
        if (!whole && rc == 0 && op_failed && err != 0 && err != ZRUNTIMEINCONSISTENCY)
            rc = err;
    }
    return whole ? whole_rc : rc;
}

static void run_response(struct completion *c)
{
    struct pending *p = c->p;
    int rc = c->failed ? c->rc : c->ans.rc;
    bool ok = !c->failed && rc == ZOK;
    const struct Stat *st = ok && c->ans.has_stat ? &c->ans.stat : NULL;

    switch (p->ctype) {
    case C_VOID:
        if (p->fn.v)
            p->fn.v(rc, p->data);
        break;
    case C_STAT:
        if (p->fn.stat)
            p->fn.stat(rc, (!c->failed && c->ans.has_stat) ? &c->ans.stat : NULL, p->data);
        break;
    case C_DATA:
        if (p->fn.data)
            p->fn.data(rc, ok ? c->ans.data : NULL, ok ? c->ans.len : 0, st, p->data);
        break;
    case C_STRINGS:
        if (p->fn.strs)
            p->fn.strs(rc, ok ? &c->ans.children : NULL, p->data);
        break;
    case C_STRINGS_STAT:
        if (p->fn.strs_stat)
            p->fn.strs_stat(rc, ok ? &c->ans.children : NULL, st, p->data);
        break;
    case C_STRING:
        if (p->fn.str)
            p->fn.str(rc, ok ? c->ans.path : NULL, p->data);
        break;
    case C_STRING_STAT:
        if (p->fn.str_stat)
            p->fn.str_stat(rc, ok ? c->ans.path : NULL, st, p->data);
        break;
    case C_MULTI:
        rc = multi_results(p, c);
        if (p->fn.v)
            p->fn.v(rc, p->data);
        break;
    }
}

static void run_one(zhandle_t *zh, struct completion *c)
{
    int saved = W->current_proc;
    bool was = W->delivering;
    int was_proc = W->delivering_proc;

    W->current_proc = zh->proc;
    W->delivering = true;
    W->delivering_proc = zh->proc;
    if (c->event) {
        if (c->type == ZOO_SESSION_EVENT && c->state == ZOO_CONNECTING_STATE)
            zh->lost_told = sim_now();
        else if (c->type == ZOO_SESSION_EVENT && c->state == ZOO_CONNECTED_STATE)
            zh->lost_told = -1;
        else if (c->type == ZOO_SESSION_EVENT && c->state == ZOO_EXPIRED_SESSION_STATE)
            zh->expiry_told = true;
        for (struct wobj *o = c->watchers; o; o = o->next)
            o->fn(zh, c->type, c->state, c->path, o->ctx);
    } else {
        run_response(c);
    }
    W->delivering = was;
    W->delivering_proc = was_proc;
    W->current_proc = saved;
}

static void run_completions(struct sim_event *ev)
{
    zhandle_t *zh = handle_get((int)ev->a);
    struct completion *c;

    if (!zh || zh->closed)
        return;
    zh->cq_scheduled = false;
    if (!(c = zh->cq_head))
        return;
    zh->cq_head = c->next;
    if (!zh->cq_head)
        zh->cq_tail = NULL;
    run_one(zh, c);
    completion_free(c);
    if (zh->cq_head && !zh->cq_scheduled && !zh->closed) {
        zh->cq_scheduled = true;
        sim_at(sim_now() + sim_between(&W->rng, 0, SIM_US(50)), zh->proc, SIM_COMPLETION,
               run_completions, NULL, zh->id, 0);
    }
}

/* ---- the connection ------------------------------------------------------------------------ */

static void io_tick(struct sim_event *ev);
static void io_connect(struct sim_event *ev);

static void io_arm(zhandle_t *zh, sim_time_t at)
{
    sim_at(at, zh->proc, SIM_IO, io_tick, NULL, zh->id, (int64_t)++zh->io_gen);
}

static void send_msg(zhandle_t *zh, struct zs_msg *m)
{
    struct zs_conn *c = zs_conn_get(zh->conn);

    zh->last_send = sim_now();
    zs_send_up(c, m);
}

/* Fails every registered request with rc, in order (free_completions). */
static void fail_all(zhandle_t *zh, int rc)
{
    struct pending *p = zh->head;

    zh->head = zh->tail = NULL;
    while (p) {
        struct pending *next = p->next;
        struct completion *c = xcalloc(1, sizeof *c);
        p->next = NULL;
        c->p = p;
        c->failed = true;
        c->rc = rc;
        cq_push(zh, c);
        p = next;
    }
}

/* handle_error: the connection is over (rc says why). */
static void connection_lost(zhandle_t *zh, int rc)
{
    struct zs_conn *c = zs_conn_get(zh->conn);
    bool was_connected = connected(zh);

    zs_log("client %d: connection %d lost (%d)", zh->id, zh->conn, rc);
    if (c)
        zs_conn_client_gone(c);
    zh->conn = -1;
    if (unrecoverable(zh))
        session_event(zh, zh->state);
    else if (was_connected)
        session_event(zh, ZOO_CONNECTING_STATE);
    fail_all(zh, rc);
    zh->io_gen++;
    if (unrecoverable(zh))
        return;
    zh->state = 0;
    zh->at = (zh->at + 1) % ZS_SERVERS;
    if (++zh->tried >= ZS_SERVERS) {
        zh->tried = 0; /* the end of the list: a pause of recv_timeout / 60 */
        sim_at(sim_now() + SIM_MS(zh->recv_timeout / 60), zh->proc, SIM_IO, io_connect, NULL,
               zh->id, (int64_t)zh->io_gen);
    } else {
        sim_at(sim_now() + sim_between(&W->rng, SIM_US(10), SIM_US(500)), zh->proc, SIM_IO,
               io_connect, NULL, zh->id, (int64_t)zh->io_gen);
    }
}

/* A crashed server refuses the connection at once (a reset). */
static void io_refused(struct sim_event *ev)
{
    zhandle_t *zh = handle_get((int)ev->a);

    if (zh && !zh->closed && (uint64_t)ev->b == zh->io_gen && zh->conn >= 0 &&
        zh->state == ZOO_CONNECTING_STATE)
        connection_lost(zh, ZCONNECTIONLOSS);
}

static void io_connect(struct sim_event *ev)
{
    zhandle_t *zh = handle_get((int)ev->a);
    struct zs_conn *c;
    struct zs_msg *m;

    if (!zh || zh->closed || unrecoverable(zh) || (uint64_t)ev->b != zh->io_gen || zh->conn >= 0)
        return;
    zh->state = ZOO_CONNECTING_STATE;
    c = zs_conn_new(zh->proc, zh->order[zh->at], zh->id);
    zs_log("client %d: connecting to server %d (connection %d)", zh->id, c->server, c->id);
    zh->conn = c->id;
    zh->last_recv = zh->last_send = sim_now();
    m = xcalloc(1, sizeof *m);
    m->kind = ZS_M_CONNECT;
    m->session = zh->cid.client_id;
    m->timeout = zh->recv_timeout;
    m->last_zxid = zh->last_zxid;
    send_msg(zh, m);
    io_arm(zh, sim_now() + SIM_MS(zh->recv_timeout * 2 / 3));
    if (zs_w->servers[c->server].down)
        sim_at(sim_now() + 2 * zs_latency(), zh->proc, SIM_IO, io_refused, NULL, zh->id,
               (int64_t)zh->io_gen);
}

static void io_tick(struct sim_event *ev)
{
    zhandle_t *zh = handle_get((int)ev->a);
    sim_time_t recv_due, ping_due;

    if (!zh || zh->closed || (uint64_t)ev->b != zh->io_gen || zh->conn < 0)
        return;
    recv_due = zh->last_recv + SIM_MS(zh->recv_timeout * 2 / 3);
    if (sim_now() >= recv_due) {
        connection_lost(zh, ZOPERATIONTIMEOUT);
        return;
    }
    ping_due = zh->last_send + SIM_MS(zh->recv_timeout / 3);
    if (connected(zh) && sim_now() >= ping_due) {
        if (!zh->head) {
            struct zs_msg *m = xcalloc(1, sizeof *m);
            m->kind = ZS_M_PING;
            send_msg(zh, m);
        } else {
            zh->last_send = sim_now(); /* send_to resets all the same */
        }
        ping_due = sim_now() + SIM_MS(zh->recv_timeout / 3);
    }
    io_arm(zh, connected(zh) && ping_due < recv_due ? ping_due : recv_due);
}

static char **paths_of(const struct wtable *t, int *n)
{
    char **v = xcalloc(t->n, sizeof *v);

    for (size_t i = 0; i < t->n; i++)
        v[i] = zs_strdup(t->v[i].path);
    *n = (int)t->n;
    return v;
}

static void send_auth(zhandle_t *zh, int i)
{
    struct zs_msg *m = xcalloc(1, sizeof *m);

    m->kind = ZS_M_AUTH;
    m->xid = i;
    send_msg(zh, m);
}

/* The handshake's answer. */
static void on_connected(zhandle_t *zh, struct zs_msg *m)
{
    if (m->timeout == 0 || (zh->cid.client_id && m->session != zh->cid.client_id)) {
        zh->state = ZOO_EXPIRED_SESSION_STATE;
        zs_log("client %d: session 0x%llx expired (told on reconnection)", zh->id,
               (unsigned long long)zh->cid.client_id);
        connection_lost(zh, ZSESSIONEXPIRED);
        return;
    }
    zh->cid.client_id = m->session;
    zh->recv_timeout = m->timeout;
    zh->state = ZOO_CONNECTED_STATE;
    zh->tried = 0;
    zs_log("client %d: connected to server %d, session 0x%llx, timeout %d", zh->id,
           zs_conn_get(zh->conn)->server, (unsigned long long)m->session, m->timeout);
    /* The credentials, then the watches, then what was asked meanwhile. */
    for (int i = 0; i < zh->nauth; i++)
        send_auth(zh, i);
    if (zh->node_w.n || zh->exist_w.n || zh->child_w.n) {
        struct zs_msg *sw = xcalloc(1, sizeof *sw);
        sw->kind = ZS_M_SETWATCHES;
        sw->last_zxid = zh->last_zxid;
        sw->w_data = paths_of(&zh->node_w, &sw->nw_data);
        sw->w_exist = paths_of(&zh->exist_w, &sw->nw_exist);
        sw->w_child = paths_of(&zh->child_w, &sw->nw_child);
        send_msg(zh, sw);
    }
    for (struct pending *p = zh->head; p; p = p->next) {
        if (p->unsent) {
            send_msg(zh, p->unsent);
            p->unsent = NULL;
        }
    }
    session_event(zh, ZOO_CONNECTED_STATE);
    io_arm(zh, sim_now());
}

static void activate_watch(zhandle_t *zh, const struct pending *p, int rc)
{
    if (p->wreg == WREG_DATA && rc == ZOK)
        wadd(&zh->node_w, p->wpath, p->wfn, p->wctx);
    else if (p->wreg == WREG_EXISTS && rc == ZOK)
        wadd(&zh->node_w, p->wpath, p->wfn, p->wctx);
    else if (p->wreg == WREG_EXISTS && rc == ZNONODE)
        wadd(&zh->exist_w, p->wpath, p->wfn, p->wctx);
    else if (p->wreg == WREG_CHILD && rc == ZOK)
        wadd(&zh->child_w, p->wpath, p->wfn, p->wctx);
}

static void on_response(zhandle_t *zh, struct zs_msg *m)
{
    struct pending *p = zh->head;
    struct completion *c;

    if (!p || p->xid != m->xid) {
        fprintf(stderr, "zs_client: answer xid %d, expected %d\n", m->xid, p ? p->xid : -1);
        abort();
    }
    zh->head = p->next;
    if (!zh->head)
        zh->tail = NULL;
    p->next = NULL;
    zs_log("client %d: xid %d answered %d%s%s", zh->id, m->xid, m->ans.rc,
           m->ans.path ? " " : "", m->ans.path ? m->ans.path : "");
    if (m->ans.zxid > zh->last_zxid)
        zh->last_zxid = m->ans.zxid;
    activate_watch(zh, p, m->ans.rc);
    c = xcalloc(1, sizeof *c);
    c->p = p;
    c->ans = m->ans; /* moved */
    memset(&m->ans, 0, sizeof m->ans);
    cq_push(zh, c);
}

static void on_event(zhandle_t *zh, struct zs_msg *m)
{
    struct completion *c = xcalloc(1, sizeof *c);

    zs_log("client %d: event %d %s", zh->id, m->ev_type, m->ev_path);
    c->event = true;
    c->type = m->ev_type;
    c->state = ZOO_CONNECTED_STATE;
    c->path = zs_strdup(m->ev_path);
    if (m->ev_type == ZOO_CREATED_EVENT || m->ev_type == ZOO_CHANGED_EVENT) {
        wtake(&zh->node_w, m->ev_path, &c->watchers);
        wtake(&zh->exist_w, m->ev_path, &c->watchers);
    } else if (m->ev_type == ZOO_CHILD_EVENT) {
        wtake(&zh->child_w, m->ev_path, &c->watchers);
    } else if (m->ev_type == ZOO_DELETED_EVENT) {
        wtake(&zh->node_w, m->ev_path, &c->watchers);
        wtake(&zh->exist_w, m->ev_path, &c->watchers);
        wtake(&zh->child_w, m->ev_path, &c->watchers);
    }
    cq_push(zh, c);
}

static void on_auth(zhandle_t *zh, struct zs_msg *m)
{
    struct auth_info *a = m->xid >= 0 && m->xid < zh->nauth ? &zh->auth[m->xid] : NULL;

    /* auth_completion_func runs on the I/O thread, once per credential. */
    if (a && a->fn) {
        void_completion_t fn = a->fn;
        int saved = W->current_proc;
        bool was = W->delivering;
        a->fn = NULL;
        W->current_proc = zh->proc;
        W->delivering = true;
        W->delivering_proc = zh->proc;
        fn(m->ans.rc, a->data);
        W->delivering = was;
        W->current_proc = saved;
    }
}

/* The I/O thread reads what came in. */
void zs_client_readable(struct zs_conn *c)
{
    zhandle_t *zh = handle_get(c->handle);

    if (!zh || zh->closed || zh->conn != c->id)
        return;
    while (c->client_open && zh->conn == c->id && c->down.head &&
           c->down.head->at <= sim_now() && zs_reachable(c->proc, c->server)) {
        struct zs_msg *m = zs_queue_pop(&c->down);
        zh->last_recv = sim_now();
        switch (m->kind) {
        case ZS_M_CONNECTED:
            on_connected(zh, m);
            break;
        case ZS_M_RESPONSE:
            on_response(zh, m);
            break;
        case ZS_M_EVENT:
            on_event(zh, m);
            break;
        case ZS_M_AUTH:
            on_auth(zh, m);
            break;
        case ZS_M_EOF:
            zs_msg_free(m);
            connection_lost(zh, ZCONNECTIONLOSS);
            return;
        default:
            break;
        }
        zs_msg_free(m);
    }
}

/* ---- the API --------------------------------------------------------------------------------- */

zhandle_t *zs_init(const char *host, watcher_fn fn, int recv_timeout, const clientid_t *clientid,
                   void *context, int flags)
{
    zhandle_t *zh = xcalloc(1, sizeof *zh);

    (void)host;
    (void)flags;
    if (W->nhandles == W->caphandles) {
        W->caphandles = W->caphandles ? 2 * W->caphandles : 16;
        W->handles = realloc(W->handles, W->caphandles * sizeof *W->handles);
        if (!W->handles)
            abort();
    }
    zh->id = (int)W->nhandles;
    W->handles[W->nhandles++] = zh;
    zh->proc = W->current_proc;
    if (zh->proc < 0) {
        fprintf(stderr, "zs_init: no current process\n");
        abort();
    }
    zh->state = ZOO_NOTCONNECTED_STATE;
    zh->lost_told = -1;
    zh->watcher = fn;
    zh->context = context;
    zh->recv_timeout = recv_timeout;
    zh->conn = -1;
    zh->xid = 1;
    if (clientid)
        zh->cid = *clientid;
    for (int i = 0; i < ZS_SERVERS; i++)
        zh->order[i] = i;
    for (int i = ZS_SERVERS - 1; i > 0; i--) {
        int j = (int)sim_below(&W->rng, (uint64_t)i + 1), t = zh->order[i];
        zh->order[i] = zh->order[j];
        zh->order[j] = t;
    }
    zs_log("client %d: zookeeper_init (proc %d, timeout %d)", zh->id, zh->proc, recv_timeout);
    sim_at(sim_now() + SIM_US(50), zh->proc, SIM_IO, io_connect, NULL, zh->id,
           (int64_t)zh->io_gen);
    return zh;
}

/* What the handle still owes when it is closed: a random prefix runs now
 * (what was read, then ZCLOSING for what was not answered), the rest never. */
static void close_now_or_never(zhandle_t *zh)
{
    struct completion *c;
    int total = 0, run;

    fail_all(zh, ZCLOSING);
    for (c = zh->cq_head; c; c = c->next)
        total++;
    run = total ? (int)sim_below(&W->rng, (uint64_t)total + 1) : 0;
    while ((c = zh->cq_head)) {
        zh->cq_head = c->next;
        if (run-- > 0)
            run_one(zh, c);
        completion_free(c);
    }
    zh->cq_tail = NULL;
}

int zs_close(zhandle_t *zh)
{
    struct zs_conn *c;

    if (!zh || zh->closed)
        return ZBADARGUMENTS;
    zs_log("client %d: zookeeper_close", zh->id);
    c = zs_conn_get(zh->conn);
    if (c && connected(zh)) {
        struct zs_msg *m = xcalloc(1, sizeof *m);
        m->kind = ZS_M_CLOSE_SESSION;
        send_msg(zh, m);
        c->client_closed_session = true;
    }
    if (c)
        zs_conn_client_gone(c);
    zh->conn = -1;
    zh->io_gen++;
    close_now_or_never(zh);
    zh->closed = true;
    zh->state = ZOO_EXPIRED_SESSION_STATE; /* nothing more may be asked of it */
    return ZOK;
}

void zs_client_free_all(void)
{
    for (size_t i = 0; i < W->nhandles; i++) {
        zhandle_t *zh = W->handles[i];
        struct completion *c;
        struct pending *p;
        while ((c = zh->cq_head)) {
            zh->cq_head = c->next;
            completion_free(c);
        }
        while ((p = zh->head)) {
            zh->head = p->next;
            pending_free(p);
        }
        wtable_free(&zh->node_w);
        wtable_free(&zh->exist_w);
        wtable_free(&zh->child_w);
        for (int k = 0; k < zh->nauth; k++) {
            free(zh->auth[k].scheme);
            free(zh->auth[k].cert);
        }
        free(zh->auth);
        free(zh);
    }
    free(W->handles);
    W->handles = NULL;
    W->nhandles = 0;
}

int zs_state(zhandle_t *zh)
{
    return zh ? zh->state : 0;
}

int zs_recv_timeout(zhandle_t *zh)
{
    return zh->recv_timeout;
}

const clientid_t *zs_client_id(zhandle_t *zh)
{
    return &zh->cid;
}

int zs_set_servers_resolution_delay(zhandle_t *zh, int delay_ms)
{
    (void)zh;
    (void)delay_ms;
    return ZOK;
}

int zs_add_auth(zhandle_t *zh, const char *scheme, const char *cert, int certLen,
                void_completion_t completion, const void *data)
{
    struct auth_info *a;

    if (!scheme || !zh)
        return ZBADARGUMENTS;
    if (unrecoverable(zh) || zh->closed || zh->state == 0)
        return ZINVALIDSTATE;
    zh->auth = realloc(zh->auth, (size_t)(zh->nauth + 1) * sizeof *zh->auth);
    if (!zh->auth)
        abort();
    a = &zh->auth[zh->nauth++];
    a->scheme = zs_strdup(scheme);
    a->cert = zs_dup_bytes(cert, certLen);
    a->len = certLen;
    a->fn = completion;
    a->data = data;
    if (connected(zh))
        send_auth(zh, zh->nauth - 1);
    return ZOK;
}

/* Registers a request (and sends it if connected). */
static int request(zhandle_t *zh, struct zs_msg *m, struct pending *p)
{
    if (!zh || zh->closed) {
        fprintf(stderr, "zs_client: a request on a closed handle\n");
        abort();
    }
    if (unrecoverable(zh)) {
        zs_msg_free(m);
        pending_free(p);
        return ZINVALIDSTATE;
    }
    m->kind = ZS_M_REQUEST;
    m->xid = p->xid = zh->xid++;
    if (W->log_to) {
        static const char *kinds[] = {"create", "delete", "exists", "get", "children",
                                      "set", "multi", "sync"};
        zs_log("client %d: xid %d %s %s%s%s", zh->id, m->xid, kinds[m->req.kind], m->req.path,
               m->req.watch ? " (watch)" : "", connected(zh) ? "" : " (queued: not connected)");
    }
    if (zh->tail)
        zh->tail->next = p;
    else
        zh->head = p;
    zh->tail = p;
    if (connected(zh))
        send_msg(zh, m);
    else
        p->unsent = m;
    return ZOK;
}

static struct zs_msg *msg_for(enum zs_reqk kind, const char *path)
{
    struct zs_msg *m = xcalloc(1, sizeof *m);

    m->req.kind = kind;
    m->req.path = zs_strdup(path);
    m->req.len = -1;
    return m;
}

static struct pending *pending_for(enum ctype t, const void *data)
{
    struct pending *p = xcalloc(1, sizeof *p);

    p->ctype = t;
    p->data = data;
    return p;
}

static void watch_on(struct pending *p, struct zs_msg *m, enum wreg reg, watcher_fn fn,
                     void *ctx)
{
    if (!fn)
        return;
    p->wreg = reg;
    p->wfn = fn;
    p->wctx = ctx;
    p->wpath = zs_strdup(m->req.path);
    m->req.watch = true;
}

/* A create (zoo_acreate, zoo_acreate2), its completion fn of type t. */
static int create(zhandle_t *zh, const char *path, const char *value, int valuelen, int mode,
                  enum ctype t, void *fn, const void *data)
{
    struct zs_msg *m;
    struct pending *p;

    if (!zs_path_valid(path, (mode & ZOO_SEQUENCE) != 0))
        return ZBADARGUMENTS;
    m = msg_for(ZS_R_CREATE, path);
    m->req.data = zs_dup_bytes(value, valuelen);
    m->req.len = value ? valuelen : -1;
    m->req.mode = mode;
    p = pending_for(t, data);
    if (t == C_STRING)
        p->fn.str = (string_completion_t)fn;
    else
        p->fn.str_stat = (string_stat_completion_t)fn;
    return request(zh, m, p);
}

int zs_acreate(zhandle_t *zh, const char *path, const char *value, int valuelen,
               const struct ACL_vector *acl, int mode, string_completion_t completion,
               const void *data)
{
    (void)acl; /* the operator's refusals stand for ACLs */
    return create(zh, path, value, valuelen, mode, C_STRING, (void *)completion, data);
}

int zs_acreate2(zhandle_t *zh, const char *path, const char *value, int valuelen,
                const struct ACL_vector *acl, int mode, string_stat_completion_t completion,
                const void *data)
{
    (void)acl;
    return create(zh, path, value, valuelen, mode, C_STRING_STAT, (void *)completion, data);
}

int zs_adelete(zhandle_t *zh, const char *path, int version, void_completion_t completion,
               const void *data)
{
    struct zs_msg *m;
    struct pending *p;

    if (!zs_path_valid(path, false))
        return ZBADARGUMENTS;
    m = msg_for(ZS_R_DELETE, path);
    m->req.version = version;
    p = pending_for(C_VOID, data);
    p->fn.v = completion;
    return request(zh, m, p);
}

/* A read (exists, getData, getChildren), its watch (w NULL: none) and its
 * completion fn, of type t. */
static int watched_read(zhandle_t *zh, enum zs_reqk kind, const char *path, watcher_fn w,
                        void *wctx, enum ctype t, void *fn, const void *data)
{
    struct zs_msg *m;
    struct pending *p;

    if (!zs_path_valid(path, false))
        return ZBADARGUMENTS;
    m = msg_for(kind, path);
    p = pending_for(t, data);
    if (t == C_STAT)
        p->fn.stat = (stat_completion_t)fn;
    else if (t == C_DATA)
        p->fn.data = (data_completion_t)fn;
    else if (t == C_STRINGS)
        p->fn.strs = (strings_completion_t)fn;
    else
        p->fn.strs_stat = (strings_stat_completion_t)fn;
    watch_on(p, m, kind == ZS_R_EXISTS ? WREG_EXISTS : kind == ZS_R_GET ? WREG_DATA : WREG_CHILD,
             w, wctx);
    return request(zh, m, p);
}

int zs_aexists(zhandle_t *zh, const char *path, int watch, stat_completion_t completion,
               const void *data)
{
    return watched_read(zh, ZS_R_EXISTS, path, watch ? zh->watcher : NULL,
                        watch ? zh->context : NULL, C_STAT, (void *)completion, data);
}

int zs_awexists(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcherCtx,
                stat_completion_t completion, const void *data)
{
    return watched_read(zh, ZS_R_EXISTS, path, watcher, watcherCtx, C_STAT, (void *)completion,
                        data);
}

int zs_aget(zhandle_t *zh, const char *path, int watch, data_completion_t completion,
            const void *data)
{
    return watched_read(zh, ZS_R_GET, path, watch ? zh->watcher : NULL,
                        watch ? zh->context : NULL, C_DATA, (void *)completion, data);
}

int zs_awget(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcherCtx,
             data_completion_t completion, const void *data)
{
    return watched_read(zh, ZS_R_GET, path, watcher, watcherCtx, C_DATA, (void *)completion,
                        data);
}

int zs_aget_children(zhandle_t *zh, const char *path, int watch,
                     strings_completion_t completion, const void *data)
{
    return watched_read(zh, ZS_R_CHILDREN, path, watch ? zh->watcher : NULL,
                        watch ? zh->context : NULL, C_STRINGS, (void *)completion, data);
}

int zs_aget_children2(zhandle_t *zh, const char *path, int watch,
                      strings_stat_completion_t completion, const void *data)
{
    return watched_read(zh, ZS_R_CHILDREN, path, watch ? zh->watcher : NULL,
                        watch ? zh->context : NULL, C_STRINGS_STAT, (void *)completion, data);
}

int zs_awget_children2(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcherCtx,
                       strings_stat_completion_t completion, const void *data)
{
    return watched_read(zh, ZS_R_CHILDREN, path, watcher, watcherCtx, C_STRINGS_STAT,
                        (void *)completion, data);
}

int zs_aset(zhandle_t *zh, const char *path, const char *buffer, int buflen, int version,
            stat_completion_t completion, const void *data)
{
    struct zs_msg *m;
    struct pending *p;

    if (!zs_path_valid(path, false))
        return ZBADARGUMENTS;
    m = msg_for(ZS_R_SET, path);
    m->req.data = zs_dup_bytes(buffer, buflen);
    m->req.len = buffer ? buflen : -1;
    m->req.version = version;
    p = pending_for(C_STAT, data);
    p->fn.stat = completion;
    return request(zh, m, p);
}

int zs_async(zhandle_t *zh, const char *path, string_completion_t completion, const void *data)
{
    struct zs_msg *m;
    struct pending *p;

    if (!zs_path_valid(path, false))
        return ZBADARGUMENTS;
    m = msg_for(ZS_R_SYNC, path);
    p = pending_for(C_STRING, data);
    p->fn.str = completion;
    return request(zh, m, p);
}

int zs_amulti(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
              void_completion_t completion, const void *data)
{
    struct zs_msg *m = xcalloc(1, sizeof *m);
    struct pending *p = pending_for(C_MULTI, data);

    m->req.kind = ZS_R_MULTI;
    m->req.path = zs_strdup("/");
    m->req.mops = xcalloc((size_t)count, sizeof *m->req.mops);
    m->req.nmops = count;
    p->fn.v = completion;
    p->results = results;
    p->nresults = count;
    p->op_types = xcalloc((size_t)count, sizeof *p->op_types);
    for (int i = 0; i < count; i++) {
        const zoo_op_t *op = &ops[i];
        struct zs_mop *mo = &m->req.mops[i];
        mo->type = op->type;
        p->op_types[i] = op->type;
        switch (op->type) {
        case ZOO_CREATE_OP:
        case ZOO_CREATE_CONTAINER_OP:
            mo->path = zs_strdup(op->create_op.path);
            mo->data = zs_dup_bytes(op->create_op.data, op->create_op.datalen);
            mo->len = op->create_op.data ? op->create_op.datalen : -1;
            mo->mode = op->create_op.flags;
            results[i].value = op->create_op.buf;
            results[i].valuelen = op->create_op.buflen;
            break;
        case ZOO_DELETE_OP:
            mo->path = zs_strdup(op->delete_op.path);
            mo->version = op->delete_op.version;
            break;
        case ZOO_SETDATA_OP:
            mo->path = zs_strdup(op->set_op.path);
            mo->data = zs_dup_bytes(op->set_op.data, op->set_op.datalen);
            mo->len = op->set_op.data ? op->set_op.datalen : -1;
            mo->version = op->set_op.version;
            results[i].stat = op->set_op.stat;
            break;
        case ZOO_CHECK_OP:
            mo->path = zs_strdup(op->check_op.path);
            mo->version = op->check_op.version;
            break;
        default:
            /* zoo_amulti's answer to a create2 op, say */
            zs_msg_free(m);
            pending_free(p);
            return ZUNIMPLEMENTED;
        }
    }
    return request(zh, m, p);
}

int zs_remove_watches(zhandle_t *zh, const char *path, ZooWatcherType wtype, watcher_fn watcher,
                      void *watcherCtx, int local)
{
    bool found = false;

    if (!zh || !zs_path_valid(path, false))
        return ZBADARGUMENTS;
    if (!local) {
        fprintf(stderr, "zs_client: zoo_remove_watches with local = 0 is not modelled\n");
        abort();
    }
    switch (wtype) {
    case ZWATCHTYPE_CHILD:
        found = whas(&zh->child_w, path, watcher, watcherCtx);
        break;
    case ZWATCHTYPE_DATA:
        found = whas(&zh->node_w, path, watcher, watcherCtx) ||
                whas(&zh->exist_w, path, watcher, watcherCtx);
        break;
    case ZWATCHTYPE_ANY:
        found = whas(&zh->child_w, path, watcher, watcherCtx) ||
                whas(&zh->node_w, path, watcher, watcherCtx) ||
                whas(&zh->exist_w, path, watcher, watcherCtx);
        break;
    }
    if (!found)
        return ZNOWATCHER;
    if (wtype == ZWATCHTYPE_CHILD || wtype == ZWATCHTYPE_ANY)
        wremove(&zh->child_w, path, watcher, watcherCtx);
    if (wtype == ZWATCHTYPE_DATA || wtype == ZWATCHTYPE_ANY) {
        wremove(&zh->node_w, path, watcher, watcherCtx);
        wremove(&zh->exist_w, path, watcher, watcherCtx);
    }
    return ZOK;
}
