/*
 * sim_app.c: what the simulated processes do, and what befalls them.
 *
 * A scenario is made from the seed: 2 to 4 processes, each with one or two
 * zklock sessions (ZKLOCK_DISPATCH_POLL or _THREAD, the strict or the
 * session lease, a timeout), each session with handles of every recipe on a
 * few lock paths shared by all (mutexes, one on kazoo's layout; a
 * read/write lock; a semaphore of two leases; an election; a multi-lock of
 * the two mutexes), handle-owned or thread-owned, some with max_hold_ms or
 * on_revoke. Then a schedule (struct sim_schedule): the application's calls
 * (acquire with a timeout, release, cancel, free, close a session, revoke,
 * proclaim, follow) and the faults (a process cut off from every server or
 * from one, stopped, its host suspended; a server cut off from the quorum,
 * crashed, lagging, throttling; a new leader; an operator deleting a lock
 * node, closing a session, refusing creates and deletes on a path), each at
 * a time. Faults stop at sim_faults_end, new acquisitions at sim_calls_end;
 * then every hold is released, every handle freed, every session closed, and
 * the truth checks what is left.
 *
 * The application: a handle-owned lock is used through the asynchronous
 * calls, their done callbacks run by the dispatch (the event loop's poll of
 * zklock_session_fd, or the callback thread); a thread-owned one through the
 * blocking calls on the process's one application thread (the world runs
 * while it waits: sim_wire.c). A hold granted is released after a while
 * (sometimes at once, inside its done callback); a done callback of a POLL
 * session may take its time (before the faults end: a slow callback is a
 * fault of the application's).
 */
#include "sim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct sim_session sim_sessions[SIM_MAX_SESSIONS];
int sim_nsessions;
struct sim_handle sim_handles[SIM_MAX_HANDLES];
int sim_nhandles;
struct sim_path sim_paths[SIM_PATHS] = {
    {"/locks/m0", K_MUTEX, 0, 0},
    {"/locks/m1", K_MUTEX, 0, 0},
    {"/locks/rw", K_WRITE, 0, 0},
    {"/locks/sem", K_SEM, 2, 0},
    {"/locks/e", K_ELECT, 0, 0},
    {"/kz/m", K_MUTEX, 0, 0}, /* ZKLOCK_WIRE_KAZOO: a persistent lock path */
    {"/locks/t", K_MUTEX, 0, 0}, /* track_previous, some with a lock-delay */
};
sim_time_t sim_faults_end, sim_calls_end;

#define RUN_FAULTS_END SIM_S(24)
#define SIM_MAX_EVENTS 2000000 /* a run that makes more is running away */
#define RUN_CALLS_END SIM_S(32)

static struct sim_rng app_rng; /* the application's own choices (hold times, ...) */
static bool calls_over;

static const char *kind_name(enum sim_kind k)
{
    static const char *names[] = {"mutex", "read", "write", "semaphore", "multi", "election"};
    return names[k];
}

const char *sim_act_name(enum sim_act a)
{
    static const char *names[] = {
        "acquire", "release", "cancel", "free", "revoke", "proclaim", "follow", "close",
        "cut", "cut-from", "stop", "suspend", "isolate", "crash", "elect", "throttle",
        "lag", "operator-delete", "operator-kill", "deny"};
    return a < A_COUNT ? names[a] : "?";
}

/* ---- the scenario: processes, sessions, handles --------------------------------------- */

struct scenario {
    int nprocs;
};

static struct scenario scen;

static int add_session(int proc, struct sim_rng *r)
{
    static const int timeouts[] = {1200, 2000, 3000, 4000};
    struct sim_session *ss = &sim_sessions[sim_nsessions];

    memset(ss, 0, sizeof *ss);
    ss->id = sim_nsessions++;
    ss->proc = proc;
    ss->poll = sim_chance(r, 700);
    ss->lease = sim_chance(r, 700) ? ZKLOCK_LEASE_STRICT : ZKLOCK_LEASE_SESSION;
    ss->timeout_ms = timeouts[sim_below(r, 4)];
    return ss->id;
}

static int add_handle(int session, enum sim_kind kind, int path, struct sim_rng *r)
{
    struct sim_handle *h = &sim_handles[sim_nhandles];

    memset(h, 0, sizeof *h);
    h->id = sim_nhandles++;
    h->session = session;
    h->proc = sim_sessions[session].proc;
    h->kind = kind;
    h->path = path;
    h->partner = h->multi = -1;
    /* thread-owned (blocking calls) only where callbacks run on the callback
     * thread: an event loop (ZKLOCK_DISPATCH_POLL) uses the asynchronous ones */
    h->by_handle = sim_sessions[session].poll || !sim_chance(r, 400);
    h->max_hold_ms = sim_chance(r, 150) ? (int)sim_between(r, 300, 2500) : 0;
    h->wire = path == 5 ? ZKLOCK_WIRE_KAZOO : ZKLOCK_WIRE_CURATOR;
    h->tracks = path == 6;
    h->lock_delay_ms = h->tracks && sim_chance(r, 500) ? (int)sim_between(r, 50, 1500) : 0;
    h->max_leases = sim_paths[path].max_leases;
    return h->id;
}

/* A session's handles: two to four of them, every recipe likely somewhere. */
static void add_handles(int session, struct sim_rng *r)
{
    int n = (int)sim_between(r, 2, 4);

    for (int i = 0; i < n && sim_nhandles + 3 < SIM_MAX_HANDLES; i++) {
        switch (sim_below(r, 8)) {
        case 0:
        case 1:
            add_handle(session, K_MUTEX, (int)sim_below(r, 2), r);
            break;
        case 7:
            add_handle(session, K_MUTEX, 6, r);
            break;
        case 2: {
            int w = add_handle(session, K_WRITE, 2, r), rd = add_handle(session, K_READ, 2, r);
            sim_handles[rd].by_handle = sim_handles[w].by_handle; /* one opts for both views */
            sim_handles[rd].max_hold_ms = sim_handles[w].max_hold_ms;
            sim_handles[w].partner = rd;
            sim_handles[rd].partner = w;
            break;
        }
        case 3:
            add_handle(session, K_SEM, 3, r);
            break;
        case 4:
            add_handle(session, K_ELECT, 4, r);
            break;
        case 5:
            add_handle(session, K_MUTEX, 5, r);
            break;
        case 6: {
            int m = add_handle(session, K_MULTI, 0, r);
            for (int k = 0; k < 2; k++) {
                int mem = add_handle(session, K_MUTEX, k, r);
                sim_handles[mem].multi = m;
                sim_handles[mem].by_handle = sim_handles[m].by_handle;
                sim_handles[m].members[sim_handles[m].nmembers++] = mem;
            }
            break;
        }
        }
    }
}

static void scenario_make(uint64_t seed)
{
    struct sim_rng r;

    sim_rng_seed(&r, seed, 2);
    sim_nsessions = sim_nhandles = 0;
    scen.nprocs = (int)sim_between(&r, 2, 4);
    for (int p = 0; p < scen.nprocs; p++) {
        int n = sim_chance(&r, 300) ? 2 : 1;
        for (int k = 0; k < n; k++)
            add_handles(add_session(p, &r), &r);
    }
    for (int i = 0; i < SIM_PATHS; i++)
        sim_paths[i].last_token = 0;
}

/* ---- the schedule ------------------------------------------------------------------------ */

static void push_step(struct sim_schedule *s, struct sim_step st)
{
    s->v = realloc(s->v, (size_t)(s->n + 1) * sizeof *s->v);
    if (!s->v)
        abort();
    st.keep = true;
    s->v[s->n++] = st;
}

static int handles_of_proc(int proc, int *out)
{
    int n = 0;

    for (int i = 0; i < sim_nhandles; i++)
        if (sim_handles[i].proc == proc && sim_handles[i].multi < 0)
            out[n++] = i;
    return n;
}

static void make_calls(struct sim_schedule *s, struct sim_rng *r)
{
    int hs[SIM_MAX_HANDLES];

    for (int p = 0; p < scen.nprocs; p++) {
        int nh = handles_of_proc(p, hs), ncalls = (int)sim_between(r, 10, 28);
        for (int k = 0; k < ncalls && nh > 0; k++) {
            struct sim_step st = {0};
            unsigned pick = (unsigned)sim_below(r, 100);
            st.at = sim_between(r, SIM_MS(200), RUN_CALLS_END);
            st.proc = p;
            st.a = hs[sim_below(r, (uint64_t)nh)];
            st.dur = sim_between(r, SIM_MS(10), SIM_MS(1500));
            if (pick < 70) {
                static const int timeouts[] = {0, 200, 1000, 3000, 8000, -1};
                st.act = A_ACQUIRE;
                st.timeout = timeouts[sim_below(r, 6)];
            } else if (pick < 76) {
                st.act = A_RELEASE;
            } else if (pick < 82) {
                st.act = A_CANCEL;
            } else if (pick < 88) {
                st.act = A_FREE;
            } else if (pick < 91) {
                st.act = A_REVOKE;
                st.a = (int)sim_below(r, SIM_PATHS);
            } else if (pick < 95) {
                st.act = A_PROCLAIM;
            } else if (pick < 98) {
                st.act = A_FOLLOW;
                st.a = 4;
            } else {
                st.act = A_CLOSE;
                st.a = (int)sim_below(r, (uint64_t)sim_nsessions);
                st.proc = sim_sessions[st.a].proc;
            }
            push_step(s, st);
        }
    }
}

static void make_faults(struct sim_schedule *s, struct sim_rng *r)
{
    int n = (int)sim_between(r, 0, 12);
    sim_time_t server_free = SIM_MS(500); /* server faults one at a time: a quorum stays */

    for (int k = 0; k < n; k++) {
        struct sim_step st = {0};
        st.at = sim_between(r, SIM_MS(500), RUN_FAULTS_END - SIM_S(1));
        st.act = (enum sim_act)sim_between(r, F_CUT, F_DENY);
        st.proc = (int)sim_below(r, (uint64_t)scen.nprocs);
        st.a = (int)sim_below(r, ZS_SERVERS);
        st.dur = sim_between(r, SIM_MS(100), SIM_MS(6000));
        if (st.at + st.dur > RUN_FAULTS_END)
            st.dur = RUN_FAULTS_END - st.at;
        if (st.act == F_ISOLATE || st.act == F_CRASH || st.act == F_ELECT) {
            if (st.at < server_free)
                st.at = server_free;
            if (st.at >= RUN_FAULTS_END - SIM_MS(100))
                continue;
            if (st.at + st.dur > RUN_FAULTS_END)
                st.dur = RUN_FAULTS_END - st.at;
            server_free = st.at + st.dur + SIM_S(1);
        }
        if (st.act == F_OPDEL || st.act == F_DENY)
            st.a = (int)sim_below(r, SIM_PATHS);
        push_step(s, st);
    }
}

static int step_order(const void *a, const void *b)
{
    const struct sim_step *x = a, *y = b;

    return x->at < y->at ? -1 : x->at > y->at;
}

void sim_schedule_make(uint64_t seed, struct sim_schedule *out)
{
    struct sim_rng r;

    scenario_make(seed);
    sim_rng_seed(&r, seed, 3);
    memset(out, 0, sizeof *out);
    make_calls(out, &r);
    make_faults(out, &r);
    /* stable: the order of making breaks ties */
    for (int i = 0; i < out->n; i++)
        out->v[i].timeout = out->v[i].timeout; /* (keeps the struct's padding quiet) */
    qsort(out->v, (size_t)out->n, sizeof *out->v, step_order);
}

void sim_schedule_free(struct sim_schedule *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* ---- the application's callbacks ------------------------------------------------------------ */

/* The thread a handle's calls are made on: the application's main thread
 * (its event loop) for a handle-owned lock, a thread of its own for a
 * thread-owned one (a blocking call there waits without holding up the
 * loop, nor the releases of the process's other holds). */
static enum sim_thread thread_of(int h)
{
    return sim_handles[h].by_handle ? SIM_APP : (enum sim_thread)(SIM_WORKER + h % 8);
}

/* The application's own count of the holds it was granted and has not
 * released (a release is started). */
static int app_holds[SIM_MAX_HANDLES];

struct call {
    int h;
    bool acquire;
    void *truth;    /* sim_truth.c's record of the call */
};

static void schedule_release(int h, sim_time_t after);
static void release_now(int h);
static void acquire(int hi, int timeout);

static struct call *call_new(int h, bool acquire, int timeout)
{
    struct call *c = calloc(1, sizeof *c);

    if (!c)
        abort();
    c->h = h;
    c->acquire = acquire;
    c->truth = truth_call_new(h, acquire, timeout);
    return c;
}

/* A call its caller's state refused: no done will come. */
static void call_refused(struct call *c, int rc)
{
    truth_call_refused(c->truth, rc);
    free(c);
}

/* A slow callback is a fault of the application's: none once the faults
 * are over (the deadlines checked then are the engine's, not the app's). */
static bool may_dawdle(void)
{
    return sim_now() < sim_faults_end;
}

static void done_cb(zklock_t *l, int rc, void *ctx)
{
    struct call *c = ctx;
    struct sim_handle *h = &sim_handles[c->h];

    truth_call_done(c->truth, rc);
    zs_log("app %d: %s %s %s -> %d", h->proc, c->acquire ? "acquired" : "released",
           kind_name(h->kind), sim_paths[h->path].path, rc);
    if (c->acquire && rc == ZKLOCK_OK)
        app_holds[c->h]++;
    if (c->acquire && rc == ZKLOCK_OK && h->kind == K_WRITE && !h->freeing && !calls_over &&
        sim_chance(&app_rng, 300))
        acquire(h->partner, 1000); /* a downgrade: the read side while the write is held */
    if (c->acquire && rc == ZKLOCK_OK && !h->freeing && !calls_over &&
        sim_chance(&app_rng, 100))
        release_now(c->h); /* at once, inside the callback */
    else if (c->acquire && rc == ZKLOCK_OK && !h->freeing)
        schedule_release(c->h, sim_between(&app_rng, SIM_MS(1), SIM_MS(1500)));
    if (may_dawdle() && sim_chance(&app_rng, 40)) {
        const struct sim_session *ss = &sim_sessions[h->session];
        sim_time_t d = sim_between(&app_rng, SIM_MS(10), SIM_MS(ss->timeout_ms * 8 / 10));
        zs_log("app %d: a callback takes %lld ms", h->proc, (long long)(d / SIM_MS(1)));
        sim_callback_is_slow(h->proc, d);
    }
    (void)l;
    free(c);
}

static void lost_cb(zklock_t *l, int reason, void *ctx)
{
    int h = (int)(intptr_t)ctx;

    zs_log("app %d: on_lost %s %s (%d)", sim_handles[h].proc, kind_name(sim_handles[h].kind),
           sim_paths[sim_handles[h].path].path, reason);
    truth_lost(h, reason);
    (void)l;
}

static void revoke_cb(zklock_t *l, void *ctx)
{
    int h = (int)(intptr_t)ctx;

    zs_log("app %d: asked to let go of %s", sim_handles[h].proc, sim_paths[sim_handles[h].path].path);
    schedule_release(h, SIM_US(10));
    (void)l;
}

static void state_cb(zklock_session_t *s, int state, void *ctx)
{
    zs_log("app %d: session %d %s", sim_sessions[(intptr_t)ctx].proc, (int)(intptr_t)ctx,
           zklock_state_name(state));
    (void)s;
}

/* ---- the application's calls ------------------------------------------------------------------- */

static bool usable(const struct sim_handle *h)
{
    return h->live && !h->freeing && sim_sessions[h->session].open &&
           !sim_sessions[h->session].closing;
}

static void acquire(int hi, int timeout)
{
    struct sim_handle *h = &sim_handles[hi];
    struct call *c;
    int rc;

    if (!usable(h) || calls_over || h->multi >= 0)
        return;
    zs_log("app %d: acquires %s %s (handle %d, %s, timeout %d)", h->proc, kind_name(h->kind),
           sim_paths[h->path].path, hi, h->by_handle ? "async" : "blocking", timeout);
    c = call_new(hi, true, timeout);
    if (h->by_handle) {
        rc = zklock_acquire_async(h->l, timeout, done_cb, c);
        if (rc != ZKLOCK_OK)
            call_refused(c, rc);
        return;
    }
    /* thread-owned: the blocking call, on the application's thread */
    rc = zklock_acquire(h->l, timeout);
    zs_log("app %d: acquire of handle %d returned %d", h->proc, hi, rc);
    truth_call_blocking(c->truth, rc);
    if (rc == ZKLOCK_OK)
        truth_returned_held(hi);
    if (rc == ZKLOCK_OK)
        app_holds[hi]++;
    if (rc == ZKLOCK_OK && !h->freeing)
        schedule_release(hi, sim_between(&app_rng, SIM_MS(1), SIM_MS(1500)));
    free(c);
}

static void release_now(int hi)
{
    struct sim_handle *h = &sim_handles[hi];
    struct call *c;
    int rc;

    if (!h->live || h->freeing || h->multi >= 0 || app_holds[hi] <= 0)
        return;
    app_holds[hi]--;
    c = call_new(hi, false, 0);
    truth_releasing(hi);
    if (h->by_handle) {
        zs_log("app %d: releases handle %d", h->proc, hi);
        rc = zklock_release_async(h->l, done_cb, c);
        if (rc != ZKLOCK_OK)
            call_refused(c, rc);
        return;
    }
    if (sim_cur_thread != thread_of(hi)) {
        call_refused(c, ZKLOCK_EOWNER); /* a thread-owned hold: its thread releases */
        return;
    }
    zs_log("app %d: releases handle %d (blocking)", h->proc, hi);
    rc = zklock_release(h->l);
    zs_log("app %d: release of handle %d returned %d", h->proc, hi, rc);
    truth_call_blocking(c->truth, rc);
    free(c);
}

static void release_event(struct sim_event *ev)
{
    release_now((int)ev->a);
}

static void schedule_release(int h, sim_time_t after)
{
    sim_at(sim_now() + after, sim_handles[h].proc, thread_of(h), release_event, NULL, h, 0);
}

static zklock_opts_t opts_of(const struct sim_handle *h)
{
    zklock_opts_t o;

    memset(&o, 0, sizeof o);
    o.on_lost = lost_cb;
    o.ctx = (void *)(intptr_t)h->id;
    o.owner = h->by_handle ? ZKLOCK_OWNER_HANDLE : ZKLOCK_OWNER_THREAD;
    o.wire = h->wire;
    o.max_hold_ms = h->max_hold_ms;
    o.track_previous = h->tracks;
    o.lock_delay_ms = h->lock_delay_ms;
    if (h->id % 3 == 0)
        o.on_revoke = revoke_cb;
    return o;
}

/* Makes the zklock objects of handle hi (and of its group: a read/write
 * lock's other view, a multi-lock's members). */
static void make_handle(int hi)
{
    struct sim_handle *h = &sim_handles[hi];
    zklock_session_t *s = sim_sessions[h->session].s;
    zklock_opts_t o = opts_of(h);
    const char *path = sim_paths[h->path].path;
    int rc = ZKLOCK_OK;

    if (h->live || h->kind == K_READ)
        return;
    switch (h->kind) {
    case K_MUTEX:
        if (h->multi >= 0)
            return; /* made with its multi-lock */
        rc = zklock_mutex_new(&h->l, s, path, &o);
        break;
    case K_WRITE: {
        struct sim_handle *rd = &sim_handles[h->partner];
        rc = zklock_rwlock_new(&h->rw, s, path, &o);
        if (rc == ZKLOCK_OK) {
            h->l = zklock_rwlock_write(h->rw);
            rd->rw = h->rw;
            rd->l = zklock_rwlock_read(h->rw);
            rd->live = true;
            rd->freeing = false;
        }
        break;
    }
    case K_SEM:
        rc = zklock_semaphore_new(&h->l, s, path, h->max_leases, &o);
        break;
    case K_ELECT:
        rc = zklock_election_new(&h->l, s, path, &o);
        break;
    case K_MULTI: {
        zklock_t *ls[3];
        for (int k = 0; k < h->nmembers; k++) {
            struct sim_handle *m = &sim_handles[h->members[k]];
            zklock_opts_t mo = opts_of(m);
            if (zklock_mutex_new(&m->l, s, sim_paths[m->path].path, &mo) != ZKLOCK_OK)
                abort();
            m->live = true;
            m->freeing = false;
            ls[k] = m->l;
        }
        rc = zklock_multi_new(&h->l, ls, (size_t)h->nmembers, &o);
        break;
    }
    default:
        break;
    }
    if (rc != ZKLOCK_OK) {
        truth_fail("making a %s handle on %s: %s", kind_name(h->kind), path,
                   zklock_strerror(rc));
        return;
    }
    h->live = true;
    h->freeing = false;
    app_holds[hi] = 0;
}

/* Frees handle hi with its group. */
static void free_handle(int hi)
{
    struct sim_handle *h = &sim_handles[hi];

    if (h->kind == K_READ)
        h = &sim_handles[h->partner];
    if (h->multi >= 0)
        h = &sim_handles[h->multi];
    if (!h->live || h->freeing)
        return;
    h->freeing = true;
    zs_log("app %d: frees handle %d", h->proc, h->id);
    truth_freed(h->id); /* what a handle being freed holds is nobody's belief */
    if (h->kind == K_WRITE) {
        sim_handles[h->partner].freeing = true;
        zklock_rwlock_free(h->rw);
        sim_handles[h->partner].live = false;
        sim_handles[h->partner].l = NULL;
        h->rw = sim_handles[h->partner].rw = NULL;
    } else if (h->kind == K_MULTI) {
        for (int k = 0; k < h->nmembers; k++)
            sim_handles[h->members[k]].freeing = true;
        zklock_free(h->l);
        for (int k = 0; k < h->nmembers; k++) {
            struct sim_handle *m = &sim_handles[h->members[k]];
            zklock_free(m->l);
            m->l = NULL;
            m->live = false;
        }
    } else {
        zklock_free(h->l);
    }
    h->l = NULL;
    h->live = false;
}

static void remake_event(struct sim_event *ev)
{
    struct sim_handle *h = &sim_handles[ev->a];

    if (!sim_sessions[h->session].open || calls_over)
        return;
    make_handle((int)ev->a);
}

/* ---- sessions ---------------------------------------------------------------------------------- */

static int open_session(int si)
{
    struct sim_session *ss = &sim_sessions[si];
    zklock_session_opts_t o;
    char identity[32];
    int rc;

    memset(&o, 0, sizeof o);
    snprintf(identity, sizeof identity, "proc%d-s%d", ss->proc, si);
    o.timeout_ms = ss->timeout_ms;
    o.identity = identity;
    o.on_state = state_cb;
    o.ctx = (void *)(intptr_t)si;
    o.dispatch = ss->poll ? ZKLOCK_DISPATCH_POLL : ZKLOCK_DISPATCH_THREAD;
    o.lease = ss->lease;
    o.connect_timeout_ms = 60000;
    zs_log("app %d: opens session %d (%s lease, %s dispatch, timeout %d ms)", ss->proc, si,
           ss->lease == ZKLOCK_LEASE_STRICT ? "strict" : "session", ss->poll ? "poll" : "thread",
           ss->timeout_ms);
    rc = sim_session_open(ss->proc, &ss->s, &o);
    if (rc != ZKLOCK_OK) {
        truth_fail("opening session %d: %s", si, zklock_strerror(rc));
        return rc;
    }
    ss->open = true;
    ss->closing = false;
    for (int i = 0; i < sim_nhandles; i++)
        if (sim_handles[i].session == si && sim_handles[i].multi < 0)
            make_handle(i);
    return 0;
}

static void close_session(int si)
{
    struct sim_session *ss = &sim_sessions[si];

    if (!ss->open || ss->closing)
        return;
    ss->closing = true;
    zs_log("app %d: closes session %d", ss->proc, si);
    zklock_session_close(ss->s);
    sim_session_forget(ss->s);
    for (int i = 0; i < sim_nhandles; i++)
        if (sim_handles[i].session == si && sim_handles[i].live)
            free_handle(i);
    ss->open = false;
    ss->s = NULL;
}

static void open_event(struct sim_event *ev)
{
    open_session((int)ev->a);
}

static void reopen_event(struct sim_event *ev)
{
    if (!calls_over && !sim_sessions[ev->a].open)
        open_session((int)ev->a);
}

/* ---- followers and other calls ----------------------------------------------------------------- */

static zklock_follow_t *followers[SIM_MAX_SESSIONS];

static void leader_cb(const char *path, const void *value, size_t len, int64_t token, void *ctx)
{
    zs_log("app: follower of session %d: %s leads (token %lld)", (int)(intptr_t)ctx,
           value ? (const char *)value : "nobody", (long long)token);
    truth_follower_told((int)(intptr_t)ctx, path, value != NULL, token);
    (void)len;
}

static int session_of_proc(int proc)
{
    for (int i = 0; i < sim_nsessions; i++)
        if (sim_sessions[i].proc == proc && sim_sessions[i].open && !sim_sessions[i].closing)
            return i;
    return -1;
}

static void follow_toggle(int proc)
{
    int si = session_of_proc(proc);

    if (si < 0)
        return;
    if (followers[si]) {
        zklock_follow_stop(followers[si]);
        followers[si] = NULL;
    } else if (zklock_leader_follow(sim_sessions[si].s, sim_paths[4].path, leader_cb,
                                    (void *)(intptr_t)si, &followers[si]) != ZKLOCK_OK) {
        followers[si] = NULL;
    }
}

static void revoke(int proc, int path)
{
    int si = session_of_proc(proc), asked = 0, rc;

    if (si < 0)
        return;
    rc = zklock_revoke(sim_sessions[si].s, sim_paths[path].path, &asked);
    zs_log("app %d: revoke %s -> %d (%d asked)", proc, sim_paths[path].path, rc, asked);
}

static void proclaim(int hi)
{
    struct sim_handle *h = &sim_handles[hi];
    struct call *c;
    int rc;

    if (h->kind != K_ELECT || !usable(h) || !h->by_handle)
        return;
    c = call_new(hi, false, 0);
    rc = zklock_proclaim_async(h->l, "leader!", 7, done_cb, c);
    if (rc != ZKLOCK_OK)
        call_refused(c, rc);
    else
        truth_call_is_proclaim(c->truth);
}

/* ---- steps ---------------------------------------------------------------------------------------- */

static void heal_event(struct sim_event *ev);

static void fault_end_later(const struct sim_step *st)
{
    sim_at(sim_now() + st->dur, -1, SIM_WORLD, heal_event, (void *)st, 0, 0);
}

static int any_session_of(int proc)
{
    for (int i = 0; i < sim_nsessions; i++)
        if (sim_sessions[i].proc == proc && sim_sessions[i].open)
            return i;
    return -1;
}

/* The child with the highest sequence number (the last ten characters). */
static int newest(const struct String_vector *v)
{
    int best = 0;

    for (int i = 1; i < v->count; i++) {
        size_t a = strlen(v->data[i]), b = strlen(v->data[best]);
        if (a >= 10 && (b < 10 || strcmp(v->data[i] + a - 10, v->data[best] + b - 10) > 0))
            best = i;
    }
    return best;
}

/* An operator deletes a node under the path (a lock node, or the path). */
static void operator_delete(int path)
{
    struct String_vector v;
    char full[256];
    const char *base = sim_paths[path].path;

    if (!zs_tree_get(&zs_w->committed, base))
        return;
    zs_tree_children(&zs_w->committed, base, &v);
    if (v.count > 0) {
        /* any node, or (half the time) the newest: a young node's deletion
         * comes before its own-node watch */
        const char *name = v.data[sim_chance(&zs_w->rng, 500) ? newest(&v)
                                                               : (int)sim_below(&zs_w->rng, (uint64_t)v.count)];
        if (strcmp(name, "zklock.previous") == 0) {
            zs_strings_free(&v); /* retiring a record is not modelled */
            return;
        }
        snprintf(full, sizeof full, "%s/%s", base, name);
        if (strcmp(name, "leases") == 0 || strcmp(name, "locks") == 0) {
            struct String_vector w;
            zs_tree_children(&zs_w->committed, full, &w);
            if (w.count > 0) {
                size_t len = strlen(full);
                snprintf(full + len, sizeof full - len, "/%.200s", w.data[0]);
            }
            zs_strings_free(&w);
        }
        truth_operator_deletes(full);
        zs_op_delete(full);
    }
    zs_strings_free(&v);
}

static void step_event(struct sim_event *ev)
{
    const struct sim_step *st = ev->p;
    int si;

    switch (st->act) {
    case A_ACQUIRE:
        acquire(st->a, st->timeout);
        break;
    case A_RELEASE:
        release_now(st->a);
        break;
    case A_CANCEL:
        if (usable(&sim_handles[st->a])) {
            zs_log("app %d: cancels handle %d", st->proc, st->a);
            zklock_cancel(sim_handles[st->a].l);
        }
        break;
    case A_FREE:
        free_handle(st->a);
        sim_at(sim_now() + st->dur, st->proc, SIM_APP, remake_event, NULL,
               sim_handles[st->a].kind == K_READ ? sim_handles[st->a].partner : st->a, 0);
        break;
    case A_REVOKE:
        revoke(st->proc, st->a);
        break;
    case A_PROCLAIM:
        proclaim(st->a);
        break;
    case A_FOLLOW:
        follow_toggle(st->proc);
        break;
    case A_CLOSE:
        if (followers[st->a]) {
            zklock_follow_stop(followers[st->a]);
            followers[st->a] = NULL;
        }
        close_session(st->a);
        sim_at(sim_now() + st->dur, st->proc, SIM_APP, reopen_event, NULL, st->a, 0);
        break;
    case F_CUT:
        zs_cut(st->proc, true);
        fault_end_later(st);
        break;
    case F_CUT_FROM:
        zs_cut_from(st->proc, st->a, true);
        fault_end_later(st);
        break;
    case F_STOP:
        zs_stop(st->proc);
        fault_end_later(st);
        break;
    case F_SUSPEND:
        zs_suspend(st->proc);
        fault_end_later(st);
        break;
    case F_ISOLATE:
        zs_isolate(st->a, true);
        fault_end_later(st);
        break;
    case F_CRASH:
        zs_crash(st->a);
        fault_end_later(st);
        break;
    case F_ELECT:
        zs_elect();
        break;
    case F_THROTTLE:
        zs_throttle(st->a, sim_now() + st->dur, 300);
        break;
    case F_LAG:
        zs_lag(st->a, 950);
        fault_end_later(st);
        break;
    case F_OPDEL:
        operator_delete(st->a);
        break;
    case F_OPKILL:
        if ((si = any_session_of(st->proc)) >= 0 && sim_sessions[si].s) {
            int64_t id = zklock_session_id(sim_sessions[si].s);
            if (id && zs_op_close_session(id))
                truth_operator_kills(id);
        }
        break;
    case F_DENY:
        if (zs_tree_get(&zs_w->committed, sim_paths[st->a].path)) {
            /* creates refused. Not deletes: a delete refused for good
             * leaves its node until its session ends (documented), and the
             * queue behind it waits as long, which no deadline outlives */
            zs_op_deny(sim_paths[st->a].path, ZS_DENY_CREATE);
            fault_end_later(st);
        }
        break;
    default:
        break;
    }
}

static void heal_event(struct sim_event *ev)
{
    const struct sim_step *st = ev->p;

    switch (st->act) {
    case F_CUT:
        zs_cut(st->proc, false);
        break;
    case F_CUT_FROM:
        zs_cut_from(st->proc, st->a, false);
        break;
    case F_STOP:
        zs_resume(st->proc);
        truth_observe(st->proc);
        break;
    case F_SUSPEND:
        zs_wake(st->proc);
        truth_observe(st->proc);
        break;
    case F_ISOLATE:
        zs_isolate(st->a, false);
        break;
    case F_CRASH:
        zs_restart(st->a);
        break;
    case F_LAG:
        zs_lag(st->a, 0);
        break;
    case F_DENY:
        zs_op_deny(sim_paths[st->a].path, 0);
        break;
    default:
        break;
    }
}

/* ---- a run ------------------------------------------------------------------------------------------- */

static void after_event(const struct sim_event *ev)
{
    if (ev->proc >= 0)
        sim_poke(ev->proc);
    truth_check(ev);
}

static bool everything_told(void)
{
    return truth_calls_pending() == 0;
}

/* Runs the world until cond() holds or `limit` (true time) passes. */
static bool run_while(bool (*cond)(void), sim_time_t limit)
{
    while (!cond() && !truth_failed() && sim_now() < limit) {
        if (!sim_step(limit))
            sim_run_until(limit);
        if (sim_events_run() > SIM_MAX_EVENTS)
            truth_fail("runaway: more than %d events", SIM_MAX_EVENTS);
    }
    return cond();
}

static bool app_holds_nothing(void)
{
    for (int i = 0; i < sim_nhandles; i++)
        if (sim_handles[i].live && truth_believes(i))
            return false;
    return everything_told();
}

static void end_event(struct sim_event *ev)
{
    (void)ev;
    calls_over = true;
}

static void free_all_event(struct sim_event *ev)
{
    int proc = (int)ev->a;

    for (int i = 0; i < sim_nhandles; i++)
        if (sim_handles[i].proc == proc && sim_handles[i].live)
            free_handle(i);
    for (int i = 0; i < sim_nsessions; i++) {
        if (sim_sessions[i].proc == proc && followers[i]) {
            zklock_follow_stop(followers[i]);
            followers[i] = NULL;
        }
    }
}

static int freed_procs;

static void count_freed(struct sim_event *ev)
{
    (void)ev;
    freed_procs++;
}

static bool all_freed(void)
{
    return freed_procs >= scen.nprocs;
}

static void close_all_event(struct sim_event *ev)
{
    int proc = (int)ev->a;

    for (int i = 0; i < sim_nsessions; i++)
        if (sim_sessions[i].proc == proc)
            close_session(i);
    freed_procs++;
}

int sim_run_one(const struct sim_run *run, struct sim_result *res)
{
    struct sim_schedule sched;
    jmp_buf escape;
    volatile int max_timeout = 0;

    memset(res, 0, sizeof *res);
    sim_sched_init();
    sim_schedule_make(run->seed, &sched);
    zs_world_new(run->seed, scen.nprocs);
    zs_w->log_to = run->trace;
    sim_rng_seed(&app_rng, run->seed, 4);
    calls_over = false;
    freed_procs = 0;
    memset(followers, 0, sizeof followers);
    sim_faults_end = RUN_FAULTS_END;
    sim_calls_end = RUN_CALLS_END;
    truth_reset();
    sim_wire_reset(&escape, run->seed);
    sim_after_each(after_event);
    for (int i = 0; i < sim_nsessions; i++)
        if (sim_sessions[i].timeout_ms > max_timeout)
            max_timeout = sim_sessions[i].timeout_ms;
    if (setjmp(escape) != 0)
        goto out;
    for (int i = 0; i < sim_nsessions; i++)
        sim_at(0, sim_sessions[i].proc, SIM_APP, open_event, NULL, i, 0);
    for (int i = 0; i < sched.n; i++) {
        const struct sim_step *st = &sched.v[i];
        if (run->keep && (i >= run->nkeep || !run->keep[i]))
            continue;
        enum sim_thread th = st->act >= F_CUT ? SIM_WORLD
                             : (st->act == A_ACQUIRE || st->act == A_RELEASE) ? thread_of(st->a)
                                                                              : SIM_APP;
        sim_at(st->at, st->act < F_CUT ? st->proc : -1, th, step_event, (void *)st, 0, 0);
    }
    sim_at(sim_calls_end, -1, SIM_WORLD, end_event, NULL, 0, 0);
    /* The faults, the calls; then every hold released, every call told. */
    run_while(truth_failed, sim_calls_end);
    run_while(app_holds_nothing, sim_calls_end + SIM_S(60));
    if (!truth_failed() && !app_holds_nothing())
        truth_owed("60 s after the last call");
    /* Every handle freed: nothing of theirs is left on the server. */
    for (int p = 0; p < scen.nprocs && !truth_failed(); p++) {
        sim_at(sim_now(), p, SIM_APP, free_all_event, NULL, p, 0);
        sim_at(sim_now(), p, SIM_APP, count_freed, NULL, p, 0);
    }
    run_while(all_freed, sim_now() + SIM_S(60));
    run_while(truth_failed, sim_now() + SIM_MS(3 * max_timeout));
    if (!truth_failed())
        truth_final_nodes(false);
    /* Every session closed: the calls told, nothing left but what is
     * documented to stay. */
    freed_procs = 0;
    for (int p = 0; p < scen.nprocs && !truth_failed(); p++)
        sim_at(sim_now(), p, SIM_APP, close_all_event, NULL, p, 0);
    run_while(all_freed, sim_now() + SIM_S(60));
    run_while(truth_failed, sim_now() + SIM_MS(3 * max_timeout));
    zs_reap_containers();
    if (!truth_failed()) {
        truth_final_calls();
        truth_final_nodes(true);
    }
out:
    res->failed = truth_failed();
    if (res->failed) {
        snprintf(res->what, sizeof res->what, "%s", truth_what());
        res->at = truth_when();
    }
    res->events = sim_events_run();
    res->digest = sim_events_digest();
    sim_threads_reset();
    res->steps = sched.n;
    truth_counts(&res->acquired, &res->calls);
    sim_after_each(NULL);
    zs_w->log_to = NULL;
    if (!res->failed) {
        zs_world_free(zs_w);
        sim_sched_fini();
    } else {
        zs_world_free(zs_w); /* zklock's objects of a failed run are left as they are */
        sim_sched_fini();
    }
    sim_schedule_free(&sched);
    return res->failed;
}
