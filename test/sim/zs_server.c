/*
 * zs_server.c: the simulated ensemble (zs.h): the log and its commits, the
 * servers that apply it, sessions and their expiry, the connections' message
 * streams, the requests as a server answers them, watches, the faults.
 */
#include "zs.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct zs_world *zs_w;
#define W zs_w

void zs_log(const char *fmt, ...)
{
    va_list ap;
    sim_time_t t = sim_now();

    if (!W || !W->log_to)
        return;
    fprintf(W->log_to, "sim: %4lld.%06lld ", (long long)(t / SIM_S(1)),
            (long long)(t % SIM_S(1) / 1000));
    va_start(ap, fmt);
    vfprintf(W->log_to, fmt, ap);
    va_end(ap);
    fputc('\n', W->log_to);
    fflush(W->log_to);
}

sim_time_t zs_latency(void)
{
    return sim_between(&W->rng, W->latency_min, W->latency_max);
}

int64_t zs_server_ms(void)
{
    return W->epoch_ms + sim_now() / SIM_MS(1);
}

void zs_clock(int proc, clockid_t which, struct timespec *ts)
{
    const struct zs_proc *p = &W->procs[proc];
    sim_time_t t = sim_now(), slept = p->slept;

    if (p->suspended_at >= 0)
        slept += t - p->suspended_at;
    if (which == CLOCK_MONOTONIC || which == CLOCK_MONOTONIC_RAW ||
        which == CLOCK_MONOTONIC_COARSE)
        t = t - slept + p->mono_offset;
    else if (which == CLOCK_REALTIME || which == CLOCK_REALTIME_COARSE)
        t = t + W->epoch_ms * SIM_MS(1);
    else
        t = t + p->boot_offset; /* CLOCK_BOOTTIME */
    ts->tv_sec = (time_t)(t / SIM_S(1));
    ts->tv_nsec = (long)(t % SIM_S(1));
}

/* ---- messages ------------------------------------------------------------------ */

static void request_free(struct zs_request *r)
{
    free(r->path);
    free(r->data);
    for (int i = 0; i < r->nmops; i++) {
        free(r->mops[i].path);
        free(r->mops[i].data);
    }
    free(r->mops);
}

static void answer_free(struct zs_answer *a)
{
    free(a->path);
    free(a->data);
    zs_strings_free(&a->children);
    for (int i = 0; i < a->nresults; i++)
        free(a->created ? a->created[i] : NULL);
    free(a->created);
    free(a->results);
}

static void names_free(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void zs_msg_free(struct zs_msg *m)
{
    if (!m)
        return;
    request_free(&m->req);
    answer_free(&m->ans);
    free(m->ev_path);
    names_free(m->w_data, m->nw_data);
    names_free(m->w_exist, m->nw_exist);
    names_free(m->w_child, m->nw_child);
    free(m);
}

void zs_queue_push(struct zs_queue *q, struct zs_msg *m)
{
    m->next = NULL;
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
}

struct zs_msg *zs_queue_pop(struct zs_queue *q)
{
    struct zs_msg *m = q->head;

    if (m) {
        q->head = m->next;
        if (!q->head)
            q->tail = NULL;
        m->next = NULL;
    }
    return m;
}

void zs_queue_clear(struct zs_queue *q)
{
    struct zs_msg *m;

    while ((m = zs_queue_pop(q)))
        zs_msg_free(m);
}

bool zs_reachable(int proc, int server)
{
    const struct zs_proc *p = &W->procs[proc];

    return !p->cut && !p->cut_from[server];
}

/* ---- the world ----------------------------------------------------------------- */

/* A tree with its root alone (no data, persistent, zxid 0). */
static void root_of(struct zs_tree *t)
{
    struct zs_node *root = calloc(1, sizeof *root);

    zs_tree_init(t);
    if (!root)
        abort();
    root->path = zs_strdup("/");
    root->len = -1;
    root->kind = ZS_PERSISTENT;
    t->cap = 16;
    t->v = malloc(t->cap * sizeof *t->v);
    if (!t->v)
        abort();
    t->v[0] = root;
    t->n = 1;
}

static void reaper_pass(struct sim_event *ev);
static void lag_pass(struct sim_event *ev);

struct zs_world *zs_world_new(uint64_t seed, int nprocs)
{
    struct zs_world *w = calloc(1, sizeof *w);

    if (!w)
        abort();
    zs_w = w;
    sim_rng_seed(&w->rng, seed, 1);
    w->nprocs = nprocs;
    w->next_zxid = 0x100000001LL; /* epoch 1 */
    w->epoch_ms = 1700000000000LL;
    w->latency_min = SIM_US(100);
    w->latency_max = SIM_MS(2);
    w->reaper_every = SIM_MS(500);
    w->current_proc = -1;
    root_of(&w->committed);
    for (int i = 0; i < ZS_SERVERS; i++) {
        w->servers[i].id = i;
        root_of(&w->servers[i].tree);
    }
    for (int p = 0; p < nprocs; p++) {
        w->procs[p].id = p;
        w->procs[p].suspended_at = -1;
        w->procs[p].healed_at = -1;
        /* the two clocks agree until the host sleeps (then MONOTONIC lags) */
        w->procs[p].boot_offset = w->procs[p].mono_offset = SIM_S(1000 + 17 * p);
    }
    sim_at(w->reaper_every, -1, SIM_WORLD, reaper_pass, NULL, 0, 0);
    sim_at(SIM_MS(1), -1, SIM_WORLD, lag_pass, NULL, 0, 0);
    return w;
}

void zs_world_free(struct zs_world *w)
{
    if (!w)
        return;
    zs_client_free_all();
    for (size_t i = 0; i < w->nconns; i++) {
        struct zs_conn *c = w->conns[i];
        zs_queue_clear(&c->up);
        zs_queue_clear(&c->at_server);
        zs_queue_clear(&c->down);
        free(c);
    }
    free(w->conns);
    for (int i = 0; i < ZS_SERVERS; i++) {
        struct zs_server *s = &w->servers[i];
        zs_tree_free(&s->tree);
        for (size_t k = 0; k < s->nwatches; k++)
            free(s->watches[k].path);
        free(s->watches);
        free(s->applied_at);
    }
    zs_tree_free(&w->committed);
    for (size_t i = 0; i < w->nlog; i++)
        zs_txn_free(&w->log[i]);
    free(w->log);
    free(w->sessions);
    if (zs_w == w)
        zs_w = NULL;
    free(w);
}

/* ---- sessions ---------------------------------------------------------------------- */

static struct zs_session *session_get(int64_t id)
{
    for (size_t i = 0; i < W->nsessions; i++)
        if (W->sessions[i].id == id)
            return &W->sessions[i];
    return NULL;
}

const struct zs_session *zs_session(int64_t id)
{
    return session_get(id);
}

bool zs_session_alive(int64_t id)
{
    const struct zs_session *s = session_get(id);

    return s && s->alive;
}

/* ZooKeeper's ExpiryQueue rounds expiry times up to the next tick. */
static sim_time_t expiry_of(const struct zs_session *s)
{
    sim_time_t at = s->touched + SIM_MS(s->timeout_ms), tick = SIM_MS(ZS_TICK_MS);

    return (at / tick + 1) * tick;
}

static bool quorum_up(void);

static void touch_at_leader(int64_t id)
{
    struct zs_session *s = session_get(id);

    if (s && s->alive && s->touched < sim_now())
        s->touched = sim_now();
}

static void touch_arrives(struct sim_event *ev)
{
    int server = (int)ev->b;

    /* A follower passes its touches on with its answer to the leader's
     * ping; one cut off from the leader passes on nothing. */
    if (!W->servers[server].isolated && !W->servers[server].down && !W->electing)
        touch_at_leader(ev->a);
}

static void touch(int64_t id, int server)
{
    if (server == W->leader && !W->electing)
        touch_at_leader(id);
    else
        sim_at(sim_now() + sim_between(&W->rng, 0, SIM_MS(ZS_TICK_MS / 2)), -1, SIM_WORLD,
               touch_arrives, NULL, id, server);
}

static void commit(struct zs_txn *tx);
static void server_closes(struct zs_conn *c, const char *why);

/* The session is over: its ephemeral nodes go in one transaction (in the
 * order of a hash set: any), its connections are closed. */
static void session_end(struct zs_session *s, bool expired)
{
    struct zs_txn tx = {0};
    size_t n = 0;

    for (size_t i = 0; i < W->committed.n; i++)
        if (W->committed.v[i]->st.ephemeralOwner == s->id)
            n++;
    tx.type = ZS_TX_SESSION_CLOSE;
    tx.session = s->id;
    tx.ops = calloc(n ? n : 1, sizeof *tx.ops);
    if (!tx.ops)
        abort();
    for (size_t i = 0; i < W->committed.n; i++) {
        const struct zs_node *node = W->committed.v[i];
        if (node->st.ephemeralOwner == s->id) {
            tx.ops[tx.nops].type = ZS_OP_DELETE;
            tx.ops[tx.nops].path = zs_strdup(node->path);
            tx.nops++;
        }
    }
    for (int i = tx.nops - 1; i > 0; i--) {
        int j = (int)sim_below(&W->rng, (uint64_t)i + 1);
        struct zs_op t = tx.ops[i];
        tx.ops[i] = tx.ops[j];
        tx.ops[j] = t;
    }
    s->alive = false;
    s->expired = expired;
    s->ended_at = sim_now();
    s->limbo_conn = -1;
    zs_log("leader: session 0x%llx %s (%d nodes)", (unsigned long long)s->id,
           expired ? "expired" : "closed", tx.nops);
    commit(&tx);
    for (size_t i = 0; i < W->nconns; i++) {
        struct zs_conn *c = W->conns[i];
        if (c->session == s->id && c->server_open)
            server_closes(c, expired ? "session expired" : "session closed");
    }
    if (W->obs.session_ended)
        W->obs.session_ended(s->id, expired, W->obs.ctx);
}

static void expiry_check(struct sim_event *ev)
{
    struct zs_session *s = session_get(ev->a);

    if (!s || !s->alive)
        return;
    if (W->electing || sim_now() < expiry_of(s)) {
        sim_at(W->electing ? sim_now() + SIM_MS(ZS_TICK_MS) : expiry_of(s), -1, SIM_WORLD,
               expiry_check, NULL, ev->a, 0);
        return;
    }
    session_end(s, true);
}

static struct zs_session *session_new(int timeout_ms)
{
    struct zs_session *s;
    struct zs_txn tx = {0};

    if (W->nsessions == W->capsessions) {
        W->capsessions = W->capsessions ? 2 * W->capsessions : 16;
        W->sessions = realloc(W->sessions, W->capsessions * sizeof *W->sessions);
        if (!W->sessions)
            abort();
    }
    s = &W->sessions[W->nsessions++];
    memset(s, 0, sizeof *s);
    s->id = 0x1000000000000LL * 256 + (int64_t)W->nsessions - 1; /* 0x1000000..00, ..01 */
    s->timeout_ms = timeout_ms;
    s->touched = sim_now();
    s->alive = true;
    s->limbo_conn = -1;
    tx.type = ZS_TX_SESSION_OPEN;
    tx.session = s->id;
    commit(&tx);
    sim_at(expiry_of(s), -1, SIM_WORLD, expiry_check, NULL, s->id, 0);
    return s;
}

/* ---- the log ------------------------------------------------------------------------- */

static void server_apply_to(struct zs_server *s, size_t upto);

static bool can_apply(const struct zs_server *s)
{
    return !s->down && !s->isolated;
}

/* Commits tx (its zxid and time are set here) and applies it on the servers
 * that keep up; the others catch up later (lag_pass). */
static void commit(struct zs_txn *tx)
{
    if (W->nlog == W->caplog) {
        W->caplog = W->caplog ? 2 * W->caplog : 256;
        W->log = realloc(W->log, W->caplog * sizeof *W->log);
        if (!W->log)
            abort();
    }
    tx->zxid = W->next_zxid++;
    tx->time_ms = zs_server_ms();
    W->log[W->nlog++] = *tx;
    zs_tree_apply(&W->committed, tx, NULL, NULL);
    if (W->obs.committed)
        W->obs.committed(tx, W->obs.ctx);
    for (int i = 0; i < ZS_SERVERS; i++) {
        struct zs_server *s = &W->servers[i];
        if (can_apply(s) && (i == W->leader || !sim_chance(&W->rng, s->lag_per_mille)))
            server_apply_to(s, W->nlog);
    }
}

static void lag_pass(struct sim_event *ev)
{
    for (int i = 0; i < ZS_SERVERS; i++) {
        struct zs_server *s = &W->servers[i];
        if (can_apply(s) && s->applied < W->nlog && !sim_chance(&W->rng, s->lag_per_mille))
            server_apply_to(s, s->applied + 1 + sim_below(&W->rng, W->nlog - s->applied));
    }
    sim_at(sim_now() + sim_between(&W->rng, SIM_MS(1), SIM_MS(50)), -1, SIM_WORLD, lag_pass,
           NULL, 0, 0);
}

sim_time_t zs_applied_at(int server, int64_t zxid)
{
    const struct zs_server *s = &W->servers[server];

    for (size_t i = 0; i < s->applied; i++)
        if (W->log[i].zxid == zxid)
            return s->applied_at[i];
    return -1;
}

void zs_catch_up_all(void)
{
    for (int i = 0; i < ZS_SERVERS; i++)
        if (can_apply(&W->servers[i]))
            server_apply_to(&W->servers[i], W->nlog);
}

static int64_t applied_zxid(const struct zs_server *s)
{
    return s->applied ? W->log[s->applied - 1].zxid : 0;
}

/* ---- watches --------------------------------------------------------------------------- */

static void watch_add(struct zs_server *s, const char *path, bool child, int conn)
{
    for (size_t i = 0; i < s->nwatches; i++)
        if (s->watches[i].conn == conn && s->watches[i].child == child &&
            strcmp(s->watches[i].path, path) == 0)
            return;
    if (s->nwatches == s->capwatches) {
        s->capwatches = s->capwatches ? 2 * s->capwatches : 32;
        s->watches = realloc(s->watches, s->capwatches * sizeof *s->watches);
        if (!s->watches)
            abort();
    }
    s->watches[s->nwatches].path = zs_strdup(path);
    s->watches[s->nwatches].child = child;
    s->watches[s->nwatches].conn = conn;
    s->nwatches++;
}

static void watch_remove_at(struct zs_server *s, size_t i)
{
    free(s->watches[i].path);
    s->watches[i] = s->watches[--s->nwatches];
}

static void watches_drop_conn(struct zs_server *s, int conn)
{
    for (size_t i = s->nwatches; i-- > 0;)
        if (s->watches[i].conn == conn)
            watch_remove_at(s, i);
}

static void send_event(struct zs_conn *c, int type, const char *path)
{
    struct zs_msg *m = calloc(1, sizeof *m);

    if (!m)
        abort();
    m->kind = ZS_M_EVENT;
    m->ev_type = type;
    m->ev_state = ZOO_CONNECTED_STATE;
    m->ev_path = zs_strdup(path);
    W->stat_events++;
    zs_send_down(c, m);
}

/* The watches a change fires on server s. A deletion fires the path's data
 * watches, then its child watches, and a connection told by the first is
 * not told again by the second (ZooKeeper's `processed` set). */
static void fire(struct zs_server *s, const struct zs_trigger *trig, int ntrig)
{
    int told[64], ntold = 0;

    for (int k = 0; k < ntrig; k++) {
        const struct zs_trigger *t = &trig[k];
        bool after_data_delete = t->type == ZOO_DELETED_EVENT && t->child && k > 0 &&
                                 trig[k - 1].type == ZOO_DELETED_EVENT && !trig[k - 1].child &&
                                 strcmp(trig[k - 1].path, t->path) == 0;
        if (!after_data_delete)
            ntold = 0;
        for (size_t i = 0; i < s->nwatches;) {
            const struct zs_watch *w = &s->watches[i];
            int conn = w->conn;
            bool dup = false;
            if (w->child != t->child || strcmp(w->path, t->path) != 0) {
                i++;
                continue;
            }
            watch_remove_at(s, i);
            for (int j = 0; after_data_delete && j < ntold; j++)
                dup = dup || told[j] == conn;
            struct zs_conn *c = zs_conn_get(conn);
            if (!dup && c && c->server_open)
                send_event(c, t->type, t->path);
            else if (!dup)
                zs_log("server %d: watch of connection %d on %s fires, the connection closed",
                       s->id, conn, t->path);
            if (t->type == ZOO_DELETED_EVENT && !t->child && ntold < 64)
                told[ntold++] = conn;
        }
    }
}

static void server_apply_to(struct zs_server *s, size_t upto)
{
    while (s->applied < upto) {
        struct zs_trigger *trig = NULL;
        int ntrig = 0;
        if (s->applied == s->capapplied) {
            s->capapplied = s->capapplied ? 2 * s->capapplied : 256;
            s->applied_at = realloc(s->applied_at, s->capapplied * sizeof *s->applied_at);
            if (!s->applied_at)
                abort();
        }
        s->applied_at[s->applied] = sim_now();
        zs_tree_apply(&s->tree, &W->log[s->applied], &trig, &ntrig);
        s->applied++;
        fire(s, trig, ntrig);
        zs_triggers_free(trig, ntrig);
    }
}

/* ---- connections ------------------------------------------------------------------------ */

struct zs_conn *zs_conn_new(int proc, int server, int handle)
{
    struct zs_conn *c = calloc(1, sizeof *c);

    if (!c)
        abort();
    if (W->nconns == W->capconns) {
        W->capconns = W->capconns ? 2 * W->capconns : 32;
        W->conns = realloc(W->conns, W->capconns * sizeof *W->conns);
        if (!W->conns)
            abort();
    }
    c->id = (int)W->nconns;
    c->server = server;
    c->proc = proc;
    c->handle = handle;
    c->client_open = c->server_open = true;
    W->conns[W->nconns++] = c;
    return c;
}

struct zs_conn *zs_conn_get(int id)
{
    return id >= 0 && (size_t)id < W->nconns ? W->conns[id] : NULL;
}

static void up_arrives(struct sim_event *ev);
static void down_arrives(struct sim_event *ev);

void zs_send_up(struct zs_conn *c, struct zs_msg *m)
{
    sim_time_t at = sim_now() + zs_latency();

    if (at < c->up_last)
        at = c->up_last;
    m->at = c->up_last = at;
    zs_queue_push(&c->up, m);
    sim_at(at, -1, SIM_WORLD, up_arrives, NULL, c->id, 0);
}

void zs_send_down(struct zs_conn *c, struct zs_msg *m)
{
    sim_time_t at = sim_now() + zs_latency();

    if (!c->client_open) {
        zs_msg_free(m); /* nobody reads it */
        return;
    }
    if (at < c->down_last)
        at = c->down_last;
    m->at = c->down_last = at;
    zs_queue_push(&c->down, m);
    sim_at(at, c->proc, SIM_IO, down_arrives, NULL, c->id, 0);
}

static void down_arrives(struct sim_event *ev)
{
    struct zs_conn *c = zs_conn_get((int)ev->a);

    if (c && c->client_open)
        zs_client_readable(c);
}

static void process_queue(struct zs_conn *c);

static void up_arrives(struct sim_event *ev)
{
    struct zs_conn *c = zs_conn_get((int)ev->a);

    if (!c)
        return;
    while (c->up.head && c->up.head->at <= sim_now() && zs_reachable(c->proc, c->server)) {
        struct zs_msg *m = zs_queue_pop(&c->up);
        if (c->server_open && !W->servers[c->server].down)
            zs_queue_push(&c->at_server, m);
        else
            zs_msg_free(m);
    }
    process_queue(c);
}

void zs_links_changed(int proc)
{
    W->procs[proc].healed_at = sim_now();
    for (size_t i = 0; i < W->nconns; i++) {
        struct zs_conn *c = W->conns[i];
        if (c->proc != proc)
            continue;
        if (c->up.head)
            sim_at(sim_now(), -1, SIM_WORLD, up_arrives, NULL, c->id, 0);
        if (c->down.head && c->client_open)
            sim_at(sim_now(), c->proc, SIM_IO, down_arrives, NULL, c->id, 0);
    }
}

/* The server closes the connection: its watches go, what waits is never
 * served, the client reads end of file after what was already sent. */
static void server_closes(struct zs_conn *c, const char *why)
{
    struct zs_msg *m;

    if (!c->server_open)
        return;
    zs_log("server %d: closes connection %d (session 0x%llx): %s", c->server, c->id,
           (unsigned long long)c->session, why);
    c->server_open = false;
    watches_drop_conn(&W->servers[c->server], c->id);
    zs_queue_clear(&c->at_server);
    m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->kind = ZS_M_EOF;
    zs_send_down(c, m);
}

/* ---- answering a request ------------------------------------------------------------------ */

static struct zs_msg *response_to(const struct zs_msg *req, int rc)
{
    struct zs_msg *m = calloc(1, sizeof *m);

    if (!m)
        abort();
    m->kind = ZS_M_RESPONSE;
    m->xid = req->xid;
    m->ans.rc = rc;
    return m;
}

/* Checks a create of path (mode as zoo_acreate's) on t: ZOK and the name the
 * node gets, or the refusal, in ZooKeeper's order (PrepRequestProcessor). */
static int check_create(const struct zs_tree *t, const char *path, int mode, char *name,
                        size_t size)
{
    char pbuf[1024];
    const struct zs_node *parent;
    bool seq = (mode & ZOO_SEQUENCE) != 0;

    if (!zs_path_valid(path, seq) || strcmp(path, "/") == 0)
        return ZBADARGUMENTS;
    parent = zs_tree_get(t, zs_parent_of(path, pbuf, sizeof pbuf));
    if (!parent)
        return ZNONODE;
    if (parent->deny & ZS_DENY_CREATE)
        return ZNOAUTH;
    if (seq)
        snprintf(name, size, "%s%010d", path, parent->creations);
    else
        snprintf(name, size, "%s", path);
    if (zs_tree_get(t, name))
        return ZNODEEXISTS;
    if (parent->kind == ZS_EPHEMERAL)
        return ZNOCHILDRENFOREPHEMERALS;
    return ZOK;
}

static int check_delete(const struct zs_tree *t, const char *path, int version)
{
    char pbuf[1024];
    const struct zs_node *n = zs_tree_get(t, path), *parent;

    if (!zs_path_valid(path, false) || strcmp(path, "/") == 0)
        return ZBADARGUMENTS;
    if (!n)
        return ZNONODE;
    parent = zs_tree_get(t, zs_parent_of(path, pbuf, sizeof pbuf));
    if (parent && (parent->deny & ZS_DENY_DELETE))
        return ZNOAUTH;
    if (version != -1 && version != n->st.version)
        return ZBADVERSION;
    if (n->st.numChildren > 0)
        return ZNOTEMPTY;
    return ZOK;
}

static int check_set(const struct zs_tree *t, const char *path, int version)
{
    const struct zs_node *n = zs_tree_get(t, path);

    if (!zs_path_valid(path, false))
        return ZBADARGUMENTS;
    if (!n)
        return ZNONODE;
    if (n->deny & ZS_DENY_WRITE)
        return ZNOAUTH;
    if (version != -1 && version != n->st.version)
        return ZBADVERSION;
    return ZOK;
}

static int check_check(const struct zs_tree *t, const char *path, int version)
{
    const struct zs_node *n = zs_tree_get(t, path);

    if (!n)
        return ZNONODE;
    if (n->deny & ZS_DENY_READ)
        return ZNOAUTH;
    if (version != -1 && version != n->st.version)
        return ZBADVERSION;
    return ZOK;
}

static enum zs_kind kind_of(int mode)
{
    if (mode & ZOO_EPHEMERAL)
        return ZS_EPHEMERAL;
    if (mode == ZOO_CONTAINER)
        return ZS_CONTAINER;
    return ZS_PERSISTENT;
}

static void op_push(struct zs_txn *tx, enum zs_opk type, const char *path, const char *data,
                    int len, enum zs_kind kind, int64_t owner)
{
    struct zs_op *op;

    tx->ops = realloc(tx->ops, (size_t)(tx->nops + 1) * sizeof *tx->ops);
    if (!tx->ops)
        abort();
    op = &tx->ops[tx->nops++];
    op->type = type;
    op->path = zs_strdup(path);
    op->data = zs_dup_bytes(data, len);
    op->len = data ? len : -1;
    op->kind = kind;
    op->owner = owner;
}

/* One op of a multi (or a single write) checked on t and, if it passes,
 * applied to t and added to tx. */
static int stage(struct zs_tree *t, struct zs_txn *tx, const struct zs_mop *op, int64_t session,
                 char **created)
{
    char name[1024];
    struct zs_txn one = {0};
    int rc;

    switch (op->type) {
    case ZOO_CREATE_OP:
    case ZOO_CREATE_CONTAINER_OP:
        if ((rc = check_create(t, op->path, op->mode, name, sizeof name)) != ZOK)
            return rc;
        op_push(&one, ZS_OP_CREATE, name, op->data, op->len, kind_of(op->mode), session);
        if (created)
            *created = zs_strdup(name);
        break;
    case ZOO_DELETE_OP:
        if ((rc = check_delete(t, op->path, op->version)) != ZOK)
            return rc;
        op_push(&one, ZS_OP_DELETE, op->path, NULL, -1, ZS_PERSISTENT, 0);
        break;
    case ZOO_SETDATA_OP:
        if ((rc = check_set(t, op->path, op->version)) != ZOK)
            return rc;
        op_push(&one, ZS_OP_SET, op->path, op->data, op->len, ZS_PERSISTENT, 0);
        break;
    case ZOO_CHECK_OP:
        return check_check(t, op->path, op->version);
    default:
        return ZUNIMPLEMENTED;
    }
    one.zxid = W->next_zxid;
    one.time_ms = zs_server_ms();
    zs_tree_apply(t, &one, NULL, NULL);
    tx->ops = realloc(tx->ops, (size_t)(tx->nops + 1) * sizeof *tx->ops);
    if (!tx->ops)
        abort();
    tx->ops[tx->nops++] = one.ops[0]; /* one op each: moved, not copied */
    free(one.ops);
    return ZOK;
}

/* A write at the leader: the ops checked on a copy of the latest state, then
 * committed: the change, or an error transaction. Per-op codes go to
 * results (as ZooKeeper's multi answers: ZOK before the failed op, its code,
 * ZRUNTIMEINCONSISTENCY after it). */
static int leader_write(const struct zs_mop *ops, int n, int64_t session, int *results,
                        char **created)
{
    struct zs_tree scratch;
    struct zs_txn tx = {0};
    int rc = ZOK, failed = -1;

    zs_tree_copy(&scratch, &W->committed);
    for (int i = 0; i < n; i++) {
        int r = stage(&scratch, &tx, &ops[i], session, created ? &created[i] : NULL);
        if (r != ZOK) {
            rc = r;
            failed = i;
            break;
        }
    }
    zs_tree_free(&scratch);
    for (int i = 0; results && i < n; i++)
        results[i] = failed < 0 || i < failed ? ZOK : i == failed ? rc : ZRUNTIMEINCONSISTENCY;
    if (failed >= 0 && W->obs.refused)
        W->obs.refused(ops[failed].type, ops[failed].path, rc, W->obs.ctx);
    if (failed >= 0) {
        zs_txn_free(&tx);
        for (int i = 0; created && i < n; i++) {
            free(created[i]);
            created[i] = NULL;
        }
        tx.type = ZS_TX_ERROR;
    } else {
        tx.type = ZS_TX_CHANGE;
    }
    tx.session = session;
    touch_at_leader(session);
    commit(&tx);
    return rc;
}


static void single_op(const struct zs_request *r, struct zs_mop *op)
{
    memset(op, 0, sizeof *op);
    op->path = r->path;
    op->data = r->data;
    op->len = r->len;
    op->mode = r->mode;
    op->version = r->version;
    if (r->kind == ZS_R_CREATE)
        op->type = r->mode == ZOO_CONTAINER ? ZOO_CREATE_CONTAINER_OP : ZOO_CREATE_OP;
    else if (r->kind == ZS_R_DELETE)
        op->type = ZOO_DELETE_OP;
    else
        op->type = ZOO_SETDATA_OP;
}

/* A write, answered once its server applied it. */
static void answer_write(struct zs_conn *c, const struct zs_msg *req, struct zs_msg *res)
{
    struct zs_server *s = &W->servers[c->server];
    const struct zs_request *r = &req->req;

    if (r->kind == ZS_R_MULTI) {
        res->ans.nresults = r->nmops;
        res->ans.results = calloc((size_t)r->nmops + 1, sizeof *res->ans.results);
        res->ans.created = calloc((size_t)r->nmops + 1, sizeof *res->ans.created);
        if (!res->ans.results || !res->ans.created)
            abort();
        res->ans.rc = leader_write(r->mops, r->nmops, c->session, res->ans.results,
                                   res->ans.created);
        server_apply_to(s, W->nlog);
        return;
    }
    struct zs_mop op;
    char *created = NULL;
    single_op(r, &op);
    res->ans.rc = leader_write(&op, 1, c->session, NULL, &created);
    server_apply_to(s, W->nlog);
    if (res->ans.rc != ZOK) {
        free(created);
        return;
    }
    if (r->kind == ZS_R_CREATE) {
        const struct zs_node *n = zs_tree_get(&s->tree, created);
        res->ans.path = created;
        if (n) {
            zs_stat_of(n, &res->ans.stat);
            res->ans.has_stat = true;
        }
    } else if (r->kind == ZS_R_SET) {
        const struct zs_node *n = zs_tree_get(&s->tree, r->path);
        if (n) {
            zs_stat_of(n, &res->ans.stat);
            res->ans.has_stat = true;
        }
    }
}

/* A read, from the server's own (perhaps lagging) tree. */
static void answer_read(struct zs_conn *c, const struct zs_msg *req, struct zs_msg *res)
{
    struct zs_server *s = &W->servers[c->server];
    const struct zs_request *r = &req->req;
    const struct zs_node *n = zs_tree_get(&s->tree, r->path);

    if (!zs_path_valid(r->path, false)) {
        res->ans.rc = ZBADARGUMENTS;
        return;
    }
    if (r->kind == ZS_R_EXISTS) {
        /* exists checks no ACL, and watches a missing node too */
        if (r->watch)
            watch_add(s, r->path, false, c->id);
        res->ans.rc = n ? ZOK : ZNONODE;
    } else if (!n) {
        res->ans.rc = ZNONODE;
    } else if (n->deny & ZS_DENY_READ) {
        res->ans.rc = ZNOAUTH;
    } else {
        if (r->watch)
            watch_add(s, r->path, r->kind == ZS_R_CHILDREN, c->id);
        res->ans.rc = ZOK;
        if (r->kind == ZS_R_GET) {
            res->ans.data = zs_dup_bytes(n->data, n->len);
            res->ans.len = n->len;
        } else {
            zs_tree_children(&s->tree, r->path, &res->ans.children);
        }
    }
    if (n && res->ans.rc == ZOK) {
        zs_stat_of(n, &res->ans.stat);
        res->ans.has_stat = true;
    }
}

static bool is_write(const struct zs_request *r)
{
    return r->kind == ZS_R_CREATE || r->kind == ZS_R_DELETE || r->kind == ZS_R_SET ||
           r->kind == ZS_R_MULTI;
}

/* Can server s reach a working leader now (writes, syncs, sessions)? */
static bool reaches_leader(const struct zs_server *s)
{
    return !s->down && !s->isolated && !W->electing;
}

static bool quorum_up(void)
{
    int up = 0;

    for (int i = 0; i < ZS_SERVERS; i++)
        up += !W->servers[i].down && !W->servers[i].isolated;
    return up * 2 > ZS_SERVERS && !W->electing;
}

static bool throttled(const struct zs_server *s)
{
    return sim_now() < s->throttle_until && sim_chance(&W->rng, s->throttle_per_mille);
}

/* Serves one request; false if it must wait (a write with no quorum). */
static bool serve_request(struct zs_conn *c, struct zs_msg *m)
{
    struct zs_server *s = &W->servers[c->server];
    struct zs_msg *res;

    if ((is_write(&m->req) || m->req.kind == ZS_R_SYNC) && !(reaches_leader(s) && quorum_up()))
        return false;
    W->stat_requests++;
    touch(c->session, c->server);
    if (throttled(s)) {
        res = response_to(m, ZTHROTTLEDOP);
    } else {
        res = response_to(m, ZOK);
        if (is_write(&m->req)) {
            answer_write(c, m, res);
        } else if (m->req.kind == ZS_R_SYNC) {
            server_apply_to(s, W->nlog);
            res->ans.path = zs_strdup(m->req.path);
        } else {
            answer_read(c, m, res);
        }
    }
    res->ans.zxid = applied_zxid(s);
    zs_send_down(c, res);
    return true;
}

static void serve_setwatches(struct zs_conn *c, const struct zs_msg *m)
{
    struct zs_server *s = &W->servers[c->server];

    /* ZooKeeper's DataTree.setWatches: what changed since the client's zxid
     * is told at once, the rest is watched. */
    for (int i = 0; i < m->nw_data; i++) {
        const struct zs_node *n = zs_tree_get(&s->tree, m->w_data[i]);
        if (!n)
            send_event(c, ZOO_DELETED_EVENT, m->w_data[i]);
        else if (n->st.mzxid > m->last_zxid)
            send_event(c, ZOO_CHANGED_EVENT, m->w_data[i]);
        else
            watch_add(s, m->w_data[i], false, c->id);
    }
    for (int i = 0; i < m->nw_exist; i++) {
        if (zs_tree_get(&s->tree, m->w_exist[i]))
            send_event(c, ZOO_CREATED_EVENT, m->w_exist[i]);
        else
            watch_add(s, m->w_exist[i], false, c->id);
    }
    for (int i = 0; i < m->nw_child; i++) {
        const struct zs_node *n = zs_tree_get(&s->tree, m->w_child[i]);
        if (!n)
            send_event(c, ZOO_DELETED_EVENT, m->w_child[i]);
        else if (n->st.pzxid > m->last_zxid)
            send_event(c, ZOO_CHILD_EVENT, m->w_child[i]);
        else
            watch_add(s, m->w_child[i], true, c->id);
    }
}

static void resolve_limbo(struct zs_session *ss, bool apply);

/* The handshake: a new session, or an old one renewed here. */
static void serve_connect(struct zs_conn *c, const struct zs_msg *m)
{
    struct zs_server *s = &W->servers[c->server];
    struct zs_session *ss = NULL;
    struct zs_msg *res;

    if (!reaches_leader(s) || !quorum_up()) {
        server_closes(c, "no leader");
        return;
    }
    if (applied_zxid(s) < m->last_zxid) {
        server_closes(c, "client has seen a later zxid");
        return;
    }
    if (m->session) {
        ss = session_get(m->session);
        if (ss && ss->alive) {
            resolve_limbo(ss, true);
            touch_at_leader(ss->id);
        }
    } else {
        int t = m->timeout;
        if (t < 2 * ZS_TICK_MS)
            t = 2 * ZS_TICK_MS;
        if (t > 20 * ZS_TICK_MS)
            t = 20 * ZS_TICK_MS;
        ss = session_new(t);
        server_apply_to(s, W->nlog);
    }
    res = calloc(1, sizeof *res);
    if (!res)
        abort();
    res->kind = ZS_M_CONNECTED;
    if (ss && ss->alive) {
        c->session = ss->id;
        res->session = ss->id;
        res->timeout = ss->timeout_ms;
        /* The session moved here: its other connections are closed. */
        for (size_t i = 0; i < W->nconns; i++) {
            struct zs_conn *o = W->conns[i];
            if (o != c && o->session == ss->id && o->server_open)
                server_closes(o, "session moved");
        }
    } else {
        res->session = m->session;
        res->timeout = 0; /* expired */
    }
    zs_send_down(c, res);
    if (!ss || !ss->alive)
        server_closes(c, "session expired");
}

static void serve_close_session(struct zs_conn *c)
{
    struct zs_session *ss = session_get(c->session);

    if (ss && ss->alive)
        session_end(ss, false);
}

/* Serves what waits on the connection, in order, while it can. */
static void process_queue(struct zs_conn *c)
{
    struct zs_server *s = &W->servers[c->server];

    while (c->server_open && c->at_server.head) {
        struct zs_msg *m = c->at_server.head;
        if (s->down)
            return;
        if ((m->kind == ZS_M_REQUEST || m->kind == ZS_M_CLOSE_SESSION) &&
            !(reaches_leader(s) && quorum_up()) &&
            (m->kind == ZS_M_CLOSE_SESSION || is_write(&m->req) || m->req.kind == ZS_R_SYNC))
            return; /* stalled until the quorum is back, or the server gives up */
        m = zs_queue_pop(&c->at_server);
        switch (m->kind) {
        case ZS_M_CONNECT:
            serve_connect(c, m);
            break;
        case ZS_M_REQUEST:
            if (!c->client_open && !c->client_closed_session)
                break; /* the client went: nobody reads the answer (limbo) */
            serve_request(c, m);
            break;
        case ZS_M_PING: {
            struct zs_msg *pong = calloc(1, sizeof *pong);
            if (!pong)
                abort();
            touch(c->session, c->server);
            pong->kind = ZS_M_PING;
            zs_send_down(c, pong);
            break;
        }
        case ZS_M_SETWATCHES:
            serve_setwatches(c, m);
            break;
        case ZS_M_AUTH: {
            struct zs_msg *res = calloc(1, sizeof *res);
            if (!res)
                abort();
            res->kind = ZS_M_AUTH;
            res->xid = m->xid;
            res->ans.rc = ZOK;
            zs_send_down(c, res);
            break;
        }
        case ZS_M_CLOSE_SESSION:
            serve_close_session(c);
            break;
        default:
            break;
        }
        zs_msg_free(m);
    }
}

/* ---- a client that goes away with requests in flight ------------------------------------ */

/* A request of a connection its client gave up is applied by the server as
 * if nothing happened (its answer goes nowhere): the write reaches the leader,
 * a read is harmless. */
static void apply_orphan(struct zs_conn *c, struct zs_msg *m)
{
    struct zs_server *s = &W->servers[c->server];
    struct zs_session *ss = session_get(c->session);

    if (m->kind == ZS_M_CLOSE_SESSION) {
        if (ss && ss->alive)
            session_end(ss, false);
        return;
    }
    if (m->kind != ZS_M_REQUEST || !is_write(&m->req) || !ss || !ss->alive ||
        !reaches_leader(s) || !quorum_up())
        return;
    zs_log("server %d: applies a request of connection %d its client gave up", c->server, c->id);
    if (m->req.kind == ZS_R_MULTI) {
        leader_write(m->req.mops, m->req.nmops, c->session, NULL, NULL);
    } else {
        struct zs_mop op;
        single_op(&m->req, &op);
        leader_write(&op, 1, c->session, NULL, NULL);
    }
    server_apply_to(s, W->nlog);
}

static void resolve_limbo(struct zs_session *ss, bool apply)
{
    struct zs_conn *c = zs_conn_get(ss->limbo_conn);
    struct zs_msg *m;

    ss->limbo_conn = -1;
    if (!c)
        return;
    while ((m = zs_queue_pop(&c->at_server))) {
        if (apply && ss->alive)
            apply_orphan(c, m);
        zs_msg_free(m);
    }
}

static void limbo_due(struct sim_event *ev)
{
    struct zs_session *ss = session_get(ev->a);

    if (ss && ss->alive && ss->limbo_conn == (int)ev->b)
        resolve_limbo(ss, true);
}

void zs_conn_client_gone(struct zs_conn *c)
{
    struct zs_queue pending = {0};
    struct zs_msg *m;
    struct zs_session *ss = session_get(c->session);
    bool limbo = false;
    int reached, n = 0;

    c->client_open = false;
    zs_queue_clear(&c->down);
    if (c->client_closed_session)
        return; /* zookeeper_close(): its close request goes on */
    /* What the server has not served, in order: a prefix of it reached the
     * server (or will: bytes in flight through a cut) and is applied, now
     * or, if the server cannot be reached now, later (limbo: not after a new
     * connection of the session is made, and only while it lives); the rest
     * is never applied. */
    while ((m = zs_queue_pop(&c->at_server)))
        zs_queue_push(&pending, m), n++;
    while ((m = zs_queue_pop(&c->up)))
        zs_queue_push(&pending, m), n++;
    reached = n ? (int)sim_below(&W->rng, (uint64_t)n + 1) : 0;
    for (int i = 0; (m = zs_queue_pop(&pending)); i++) {
        bool now = zs_reachable(c->proc, c->server) && c->server_open &&
                   !W->servers[c->server].down;
        if (i < reached && now) {
            apply_orphan(c, m);
        } else if (i < reached && ss && ss->alive && !W->servers[c->server].down) {
            zs_queue_push(&c->at_server, m);
            limbo = true;
            continue;
        }
        zs_msg_free(m);
    }
    if (limbo) {
        ss->limbo_conn = c->id;
        zs_log("server %d: request(s) of connection %d in limbo", c->server, c->id);
        sim_at(sim_now() + sim_between(&W->rng, SIM_MS(1), SIM_MS(ss->timeout_ms)), -1,
               SIM_WORLD, limbo_due, NULL, ss->id, c->id);
    }
    if (c->server_open) {
        c->server_open = false; /* the server is done with it */
        watches_drop_conn(&W->servers[c->server], c->id);
    }
}

/* ---- faults ------------------------------------------------------------------------------- */

void zs_cut(int proc, bool cut)
{
    zs_log("proc %d: %s", proc, cut ? "cut off from every server" : "reachable again");
    W->procs[proc].cut = cut;
    if (!cut)
        zs_links_changed(proc);
}

void zs_cut_from(int proc, int server, bool cut)
{
    zs_log("proc %d: %s server %d", proc, cut ? "cut off from" : "reaches", server);
    W->procs[proc].cut_from[server] = cut;
    if (!cut)
        zs_links_changed(proc);
}

void zs_stop(int proc)
{
    zs_log("proc %d: stopped", proc);
    sim_proc_stop(proc);
}

void zs_resume(int proc)
{
    zs_log("proc %d: runs again", proc);
    sim_proc_resume(proc);
}

void zs_suspend(int proc)
{
    zs_log("proc %d: host suspended", proc);
    W->procs[proc].suspended_at = sim_now();
    sim_proc_stop(proc);
}

void zs_wake(int proc)
{
    struct zs_proc *p = &W->procs[proc];

    zs_log("proc %d: host wakes", proc);
    if (p->suspended_at >= 0)
        p->slept += sim_now() - p->suspended_at;
    p->suspended_at = -1;
    sim_proc_resume(proc);
}

static void drop_clients(int server, const char *why)
{
    for (size_t i = 0; i < W->nconns; i++) {
        struct zs_conn *c = W->conns[i];
        if (c->server == server && c->server_open)
            server_closes(c, why);
    }
}

static void isolated_too_long(struct sim_event *ev)
{
    struct zs_server *s = &W->servers[ev->a];

    if (s->isolated && s->isolated_at == ev->b) {
        s->dropped_clients = true;
        drop_clients(s->id, "lost the leader (syncLimit)");
    }
}

static void election_over(struct sim_event *ev)
{
    int best = -1;

    for (int i = 0; i < ZS_SERVERS; i++) {
        int k = (W->leader + 1 + i) % ZS_SERVERS;
        if (!W->servers[k].down && !W->servers[k].isolated) {
            best = k;
            break;
        }
    }
    if (best < 0) {
        sim_at(sim_now() + SIM_MS(ZS_TICK_MS), -1, SIM_WORLD, election_over, NULL, 0, 0);
        return;
    }
    W->leader = best;
    W->electing = false;
    /* A new leader gives every session a whole timeout from its start. */
    for (size_t i = 0; i < W->nsessions; i++)
        if (W->sessions[i].alive)
            W->sessions[i].touched = sim_now();
    zs_catch_up_all();
    zs_log("leader: server %d leads", best);
}

static void start_election(const char *why)
{
    if (W->electing)
        return;
    zs_log("leader: election (%s)", why);
    W->electing = true;
    for (int i = 0; i < ZS_SERVERS; i++)
        if (!W->servers[i].isolated)
            drop_clients(i, "leader election");
    sim_at(sim_now() + sim_between(&W->rng, SIM_MS(ZS_TICK_MS), SIM_MS(ZS_TICK_MS * ZS_SYNC_LIMIT)),
           -1, SIM_WORLD, election_over, NULL, 0, 0);
}

void zs_isolate(int server, bool isolated)
{
    struct zs_server *s = &W->servers[server];

    zs_log("server %d: %s", server, isolated ? "cut off from the quorum" : "rejoins the quorum");
    s->isolated = isolated;
    if (isolated) {
        s->isolated_at = sim_now();
        s->dropped_clients = false;
        sim_at(sim_now() + SIM_MS(ZS_TICK_MS * ZS_SYNC_LIMIT), -1, SIM_WORLD, isolated_too_long,
               NULL, server, s->isolated_at);
        if (server == W->leader)
            start_election("the leader is cut off");
    } else {
        s->dropped_clients = false;
        if (!W->electing)
            server_apply_to(s, W->nlog);
        for (size_t i = 0; i < W->nconns; i++)
            if (W->conns[i]->server == server)
                process_queue(W->conns[i]);
    }
}

void zs_crash(int server)
{
    struct zs_server *s = &W->servers[server];

    zs_log("server %d: crashes", server);
    for (size_t i = 0; i < W->nconns; i++) {
        struct zs_conn *c = W->conns[i];
        if (c->server != server || !c->server_open)
            continue;
        zs_queue_clear(&c->up);
        server_closes(c, "server crashed");
    }
    s->down = true;
    if (server == W->leader)
        start_election("the leader crashed");
}

void zs_restart(int server)
{
    struct zs_server *s = &W->servers[server];

    zs_log("server %d: restarts", server);
    s->down = false;
    if (!W->electing)
        server_apply_to(s, W->nlog);
}

void zs_elect(void)
{
    start_election("forced");
}

void zs_throttle(int server, sim_time_t until, unsigned per_mille)
{
    zs_log("server %d: throttles %u/1000 until %lld ms", server, per_mille,
           (long long)(until / SIM_MS(1)));
    W->servers[server].throttle_until = until;
    W->servers[server].throttle_per_mille = per_mille;
}

void zs_lag(int server, unsigned per_mille)
{
    W->servers[server].lag_per_mille = per_mille;
}

bool zs_op_delete(const char *path)
{
    struct zs_mop op = {.type = ZOO_DELETE_OP, .path = (char *)path, .version = -1};

    if (!quorum_up() || check_delete(&W->committed, path, -1) != ZOK)
        return false;
    zs_log("operator: deletes %s", path);
    leader_write(&op, 1, 0, NULL, NULL);
    return true;
}

bool zs_op_set(const char *path, const char *data, int len)
{
    struct zs_mop op = {.type = ZOO_SETDATA_OP, .path = (char *)path, .data = (char *)data,
                        .len = len, .version = -1};

    if (!quorum_up() || !zs_tree_get(&W->committed, path))
        return false;
    zs_log("operator: sets %s", path);
    leader_write(&op, 1, 0, NULL, NULL);
    return true;
}

/* ACLs are not transactions here (setACL is one in ZooKeeper, but nothing the
 * simulation checks reads its zxid): every tree gets the refusal at once. */
void zs_op_deny(const char *path, unsigned deny)
{
    struct zs_node *n;

    zs_log("operator: %s on %s now refuses 0x%x", "acl", path, deny);
    if ((n = zs_tree_get(&W->committed, path)))
        n->deny = deny;
    for (int i = 0; i < ZS_SERVERS; i++)
        if ((n = zs_tree_get(&W->servers[i].tree, path)))
            n->deny = deny;
}

bool zs_op_close_session(int64_t id)
{
    struct zs_session *s = session_get(id);

    if (!s || !s->alive || !quorum_up())
        return false;
    zs_log("operator: closes session 0x%llx", (unsigned long long)id);
    s->killed = true;
    session_end(s, true);
    return true;
}

/* ZooKeeper's ContainerManager: an empty container that had a child goes,
 * by a deleteContainer request that no ACL refuses. */
void zs_reap_containers(void)
{
    if (!quorum_up())
        return;
    for (size_t i = 0; i < W->committed.n;) {
        const struct zs_node *n = W->committed.v[i];
        struct zs_txn tx = {0};
        if (n->kind != ZS_CONTAINER || n->st.numChildren != 0 || n->creations == 0) {
            i++;
            continue;
        }
        zs_log("reaper: deletes container %s", n->path);
        tx.type = ZS_TX_CHANGE;
        op_push(&tx, ZS_OP_DELETE, n->path, NULL, -1, ZS_PERSISTENT, 0);
        commit(&tx);
        i = 0; /* its parent may be empty now */
    }
}

static void reaper_pass(struct sim_event *ev)
{
    if (W->reaper_every <= 0)
        return;
    zs_reap_containers();
    sim_at(sim_now() + W->reaper_every / 2 + (sim_time_t)sim_below(&W->rng, (uint64_t)W->reaper_every),
           -1, SIM_WORLD, reaper_pass, NULL, 0, 0);
}
