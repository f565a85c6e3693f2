/*
 * sim_truth.c: what is checked, after every event, against what really
 * happened (the committed log of the simulated ensemble, which the engine
 * cannot see).
 *
 * A process's beliefs are what its application would be told if it asked
 * now: zklock_hold_count() and zklock_fence() of each of its handles, asked
 * after every event of that process (a stopped process is asked when it runs
 * again; a belief of another process is asked again before it is counted in
 * a conflict, since it may only have ended since). Then:
 *  - at most one holder of a mutex, a write side, an election, and at most
 *    max_leases of a semaphore; readers only beside readers. Excused: a
 *    holder whose node the operator deleted or whose session the operator
 *    closed (the window of "Operator deletes a node"), and with
 *    ZKLOCK_LEASE_SESSION a holder whose session expired but who has not been
 *    told yet, until its local expiry (the documented window);
 *  - with the strict lease, nobody believes in a hold of a session that has
 *    ended (the lease ends first), nor in one whose node is gone for any
 *    reason but the operator's;
 *  - fencing tokens: a new exclusive hold's token is larger than every
 *    earlier one on its path, and a token answered is the creation zxid of a
 *    node of the holder's session on that path (never answered outside a
 *    hold: zklock_fence() and zklock_hold_count() agree);
 *  - max_hold_ms: no hold believed longer (a stopped process is excused
 *    until it runs again);
 *  - every started call's done comes exactly once, none for a call that was
 *    refused; blocking calls return;
 *  - with the faults over, every acquisition ends within its deadline;
 *  - at the end, with every handle freed, no node of a current session is
 *    left under a lock path; with every session closed, only what is
 *    documented to stay (containers, kazoo's persistent paths, records).
 */
#include "sim.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- failure ---------------------------------------------------------------------------- */

static struct {
    bool failed;
    char what[512];
    sim_time_t at;
} T;

void truth_fail(const char *fmt, ...)
{
    va_list ap;
    char buf[512];

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    zs_log("TRUTH: %s", buf);
    if (T.failed)
        return;
    T.failed = true;
    T.at = sim_now();
    snprintf(T.what, sizeof T.what, "%s", buf);
}

bool truth_failed(void)
{
    return T.failed;
}

const char *truth_what(void)
{
    return T.what;
}

sim_time_t truth_when(void)
{
    return T.at;
}

/* ---- the nodes that ever were under a lock path ------------------------------------------ */

struct record {
    char *path;
    int64_t czxid, owner;
    sim_time_t created, deleted;  /* deleted: -1 while it stands */
    int64_t deleted_by;           /* the session that deleted it; 0: the operator (or the
                                     reaper); -1: its session's end */
    bool delete_refused;          /* a delete of it was refused (ZNOAUTH: an operator's
                                     ACL): it stays until its session ends, as documented */
    int64_t deleted_zxid;
};

static struct record *recs;
static size_t nrecs, caprecs;
static char operator_pending[256];
static int64_t killed[64];
static int nkilled;
static int64_t ended_now[64];
static int nended_now;

static bool under_lock_paths(const char *path)
{
    return strncmp(path, "/locks/", 7) == 0 || strncmp(path, "/kz/", 4) == 0;
}

static void rec_add(const char *path, int64_t czxid, int64_t owner)
{
    if (nrecs == caprecs) {
        caprecs = caprecs ? 2 * caprecs : 256;
        recs = realloc(recs, caprecs * sizeof *recs);
        if (!recs)
            abort();
    }
    recs[nrecs++] = (struct record){
        .path = strdup(path), .czxid = czxid, .owner = owner, .created = sim_now(), .deleted = -1};
}

static struct record *rec_standing(const char *path)
{
    for (size_t i = nrecs; i-- > 0;)
        if (recs[i].deleted < 0 && strcmp(recs[i].path, path) == 0)
            return &recs[i];
    return NULL;
}

/* The node of czxid under lock path `lock` (a multi-lock's transaction made
 * nodes with one czxid on several paths). */
static struct record *rec_of_token(const char *lock, int64_t czxid)
{
    size_t len = strlen(lock);

    for (size_t i = nrecs; i-- > 0;)
        if (recs[i].czxid == czxid && strncmp(recs[i].path, lock, len) == 0 &&
            recs[i].path[len] == '/')
            return &recs[i];
    return NULL;
}

static void committed(const struct zs_txn *tx, void *ctx)
{
    (void)ctx;
    for (int i = 0; i < tx->nops; i++) {
        const struct zs_op *op = &tx->ops[i];
        struct record *r;
        if (!under_lock_paths(op->path))
            continue;
        if (op->type == ZS_OP_CREATE && strcmp(op->path, sim_paths[5].path) == 0 &&
            op->kind != ZS_PERSISTENT)
            truth_fail("%s made as a %s: kazoo's layout (ZKLOCK_WIRE_KAZOO) has its lock "
                       "path persistent", op->path,
                       op->kind == ZS_CONTAINER ? "container" : "ephemeral node");
        if (op->type == ZS_OP_CREATE) {
            rec_add(op->path, tx->zxid, op->kind == ZS_EPHEMERAL ? op->owner : 0);
        } else if (op->type == ZS_OP_DELETE && (r = rec_standing(op->path))) {
            r->deleted = sim_now();
            r->deleted_zxid = tx->zxid;
            r->deleted_by = tx->type == ZS_TX_SESSION_CLOSE ? -1 : tx->session;
            if (r->deleted_by == 0 && strcmp(operator_pending, op->path) != 0)
                r->deleted_by = -2; /* the reaper: a container */
        }
    }
}

static void refused(int type, const char *path, int rc, void *ctx)
{
    struct record *r;

    (void)ctx;
    if (type == ZOO_DELETE_OP && rc == ZNOAUTH && (r = rec_standing(path)))
        r->delete_refused = true;
}

/* A path where a node whose delete was refused stands (its queue waits for
 * that node's session). */
static bool blocked_by_refusal(const char *lock)
{
    size_t len = strlen(lock);

    for (size_t i = 0; i < nrecs; i++)
        if (recs[i].delete_refused && recs[i].deleted < 0 &&
            strncmp(recs[i].path, lock, len) == 0 && recs[i].path[len] == '/')
            return true;
    return false;
}

static void session_ended(int64_t session, bool expired, void *ctx)
{
    (void)expired;
    (void)ctx;
    if (nended_now < 64)
        ended_now[nended_now++] = session;
}

void truth_operator_deletes(const char *path)
{
    snprintf(operator_pending, sizeof operator_pending, "%s", path);
}

void truth_operator_kills(int64_t session)
{
    if (nkilled < 64)
        killed[nkilled++] = session;
}

static bool was_killed(int64_t session)
{
    for (int i = 0; i < nkilled; i++)
        if (killed[i] == session)
            return true;
    return false;
}

/* ---- calls ---------------------------------------------------------------------------------- */

struct tcall {
    struct tcall *next;
    int h;
    bool acquire, proclaim, told, blocking;
    int timeout;
    sim_time_t started, deadline;
    int rc;
};

static struct tcall *calls;
static int ncalls, nacquired;

void *truth_call_new(int h, bool acquire, int timeout)
{
    struct tcall *c = calloc(1, sizeof *c);

    if (!c)
        abort();
    c->h = h;
    c->acquire = acquire;
    c->timeout = timeout;
    c->started = sim_now();
    c->deadline = acquire && timeout >= 0 ? sim_now() + SIM_MS(timeout) : INT64_MAX;
    c->next = calls;
    calls = c;
    ncalls++;
    return c;
}

void truth_call_refused(void *call, int rc)
{
    struct tcall *c = call;

    c->told = true; /* never to be told: a done now would be a second */
    c->rc = rc;
    c->blocking = true;
}

void truth_call_is_proclaim(void *call)
{
    ((struct tcall *)call)->proclaim = true;
}

void truth_call_done(void *call, int rc)
{
    struct tcall *c = call;

    if (c->told) {
        truth_fail("handle %d: done called twice (or for a call refused): %d after %d", c->h, rc,
                   c->rc);
        return;
    }
    c->told = true;
    c->rc = rc;
    if (c->acquire && rc == ZKLOCK_OK)
        nacquired++;
}

void truth_call_blocking(void *call, int rc)
{
    struct tcall *c = call;

    c->blocking = true;
    truth_call_done(call, rc);
}

static bool blocked_by_refusal(const char *lock);
static const char *path_of(const struct sim_handle *h);

/* Does h's queue (a multi-lock's: any member's) wait behind a node whose
 * delete the operator's ACL refused (documented: it stays until its
 * session ends)? */
static bool handle_blocked_by_refusal(const struct sim_handle *h)
{
    if (h->kind == K_MULTI) {
        for (int k = 0; k < h->nmembers; k++)
            if (blocked_by_refusal(path_of(&sim_handles[h->members[k]])))
                return true;
        return false;
    }
    return blocked_by_refusal(path_of(h));
}

/* Calls not told yet, but for acquisitions blocked by such a node. */
int truth_calls_pending(void)
{
    int n = 0;

    for (struct tcall *c = calls; c; c = c->next)
        n += !c->told && !(c->acquire && handle_blocked_by_refusal(&sim_handles[c->h]));
    return n;
}

void truth_counts(int *acquired, int *ncall)
{
    *acquired = nacquired;
    *ncall = ncalls;
}

void truth_lost(int h, int reason)
{
    (void)h;
    (void)reason;
}

void truth_follower_told(int session, const char *path, bool leads, int64_t token)
{
    if (leads && !rec_of_token(path, token))
        truth_fail("follower of session %d told a leader with token %lld, no node of %s",
                   session, (long long)token, path);
}

/* ---- beliefs --------------------------------------------------------------------------------- */

bool truth_believes(int h)
{
    return sim_handles[h].believed;
}

static const char *const kind_names[] = {"mutex", "read", "write", "semaphore", "multi",
                                         "election"};

static bool exclusive(enum sim_kind k)
{
    return k == K_MUTEX || k == K_WRITE || k == K_ELECT;
}

static const char *path_of(const struct sim_handle *h)
{
    return sim_paths[h->path].path;
}

/* The node a believer's token names (a multi-lock's: among its members'). */
static struct record *node_of(const struct sim_handle *h)
{
    if (h->kind == K_MULTI) {
        for (int k = 0; k < h->nmembers; k++) {
            struct record *r = rec_of_token(path_of(&sim_handles[h->members[k]]), h->token);
            if (r)
                return r;
        }
        return NULL;
    }
    return rec_of_token(path_of(h), h->token);
}

/* Did the operator take this belief away (its node deleted, or its session
 * closed from outside) since it began? */
static sim_time_t resumed_at[SIM_MAX_PROCS];

/* How long a holder may go on believing after the operator deleted its
 * node ("Operator deletes a node"): its own-node watch is armed once the
 * node has lived 50 ms, and the event then comes within a round trip, once
 * its server has applied the delete and while it is connected (and not cut
 * off); a process that just ran again, or whose cut just healed, gets that
 * long too. */
#define OWN_WATCH_DELAY SIM_MS(50)
#define TOLD_WITHIN SIM_MS(100)

static bool not_told_yet(const struct sim_handle *h, const struct record *del)
{
    zhandle_t *zh = zs_handle_of_session(del->owner);
    int server = zh ? zs_handle_server(zh) : -1;
    const struct zs_proc *pr = &zs_w->procs[h->proc];
    sim_time_t due = del->created + OWN_WATCH_DELAY, applied;

    if (server < 0 || (applied = zs_applied_at(server, del->deleted_zxid)) < 0)
        return true; /* not connected, or its server has not applied the delete yet */
    if (pr->cut || pr->cut_from[server] ||
        (pr->healed_at >= 0 && sim_now() <= pr->healed_at + TOLD_WITHIN))
        return true; /* cut off, silently: its server's word waits for the heal */
    if (due < applied)
        due = applied;
    if (sim_now() <= due + TOLD_WITHIN || sim_now() <= resumed_at[h->proc] + TOLD_WITHIN)
        return true;
    /* a throttling server refuses the watch's request now and then: the
     * engine asks again every 100 ms */
    return sim_now() < zs_w->servers[server].throttle_until + SIM_MS(500);
}

static bool operator_took(const struct sim_handle *h, const struct record *r)
{
    if (r && was_killed(r->owner))
        return true;
    for (size_t i = 0; r && i < nrecs; i++)
        if (recs[i].owner == r->owner && recs[i].deleted_by == 0 &&
            recs[i].deleted >= 0 && (recs[i].deleted >= h->hold_seen || &recs[i] == r) &&
            strncmp(recs[i].path, path_of(h), strlen(path_of(h))) == 0 &&
            not_told_yet(h, &recs[i]))
            return true;
    return false;
}

/* ZKLOCK_LEASE_SESSION: a holder whose session expired may believe until it
 * is told: a server's word, or its local expiry (the silence noticed, plus
 * the negotiated timeout). */
static bool session_window(const struct sim_handle *h, const struct record *r)
{
    const struct sim_session *ss = &sim_sessions[h->session];
    const struct zs_session *zs = r ? zs_session(r->owner) : NULL;
    zhandle_t *zh = r ? zs_handle_of_session(r->owner) : NULL;
    sim_time_t lost;

    if (ss->lease != ZKLOCK_LEASE_SESSION || !zs || zs->alive || !zh)
        return false;
    if (zs_handle_expiry_told(zh))
        return false;
    lost = zs_handle_lost_told(zh);
    return lost < 0 || sim_now() <= lost + SIM_MS(zs_recv_timeout(zh)) + SIM_MS(1);
}

static bool excused(const struct sim_handle *h)
{
    const struct record *r = node_of(h);

    return operator_took(h, r) || session_window(h, r);
}

static void observe_handle(struct sim_handle *h);

/* ---- holds, one after another, on each path (the previous holder's fate) ------------------ */

struct hold {
    int path, h;
    int64_t token;
    sim_time_t start, last_seen;
    bool released;      /* its owner released it while it held it */
    bool strict;        /* on a strict-lease session */
};

static struct hold *holds;
static size_t nholds, capholds;

static struct hold *hold_of(const struct sim_handle *h)
{
    for (size_t i = nholds; i-- > 0;)
        if (holds[i].h == h->id && holds[i].token == h->token)
            return &holds[i];
    return NULL;
}

static void hold_add(const struct sim_handle *h)
{
    if (nholds == capholds) {
        capholds = capholds ? 2 * capholds : 64;
        holds = realloc(holds, capholds * sizeof *holds);
        if (!holds)
            abort();
    }
    holds[nholds].path = h->path;
    holds[nholds].h = h->id;
    holds[nholds].token = h->token;
    holds[nholds].start = holds[nholds].last_seen = sim_now();
    holds[nholds].released = false;
    holds[nholds].strict = sim_sessions[h->session].lease == ZKLOCK_LEASE_STRICT;
    nholds++;
}

/* The exclusive hold on h's path just before h's (the largest token below). */
static const struct hold *hold_before(const struct sim_handle *h)
{
    const struct hold *best = NULL;

    for (size_t i = 0; i < nholds; i++)
        if (holds[i].path == h->path && holds[i].token < h->token &&
            (!best || holds[i].token > best->token))
            best = &holds[i];
    return best;
}

void truth_releasing(int hi)
{
    struct sim_handle *h = &sim_handles[hi];
    struct hold *k;

    observe_handle(h);
    if (h->believed && (k = hold_of(h)) && zklock_hold_count(h->l) == 1)
        k->released = true; /* the last release of its hold: a clean end */
}

/* A handle is being freed: zklock_free releases what it holds (a clean end
 * of that hold), and what it holds is nobody's belief from now on. */
void truth_freed(int h)
{
    struct hold *k;

    observe_handle(&sim_handles[h]);
    if (sim_handles[h].believed && (k = hold_of(&sim_handles[h])))
        k->released = true;
    sim_handles[h].believed = false;
    for (int i = 0; i < sim_nhandles; i++)
        if (sim_handles[i].partner == h || sim_handles[i].multi == h)
            sim_handles[i].believed = false;
}

void truth_returned_held(int hi)
{
    struct sim_handle *h = &sim_handles[hi];

    observe_handle(h);
    if (!h->believed && !T.failed)
        truth_fail("handle %d (%s, process %d): zklock_acquire returned ZKLOCK_OK, and the "
                   "hold count is already 0", h->id, path_of(h), h->proc);
}

static const char *const prev_names[] = {"?", "NONE", "CLEAN", "UNCLEAN", "UNKNOWN"};

/* A tracking holder is told how the hold before it ended (zklock_previous):
 * CLEAN and NONE only when true, the token of the hold it names, and, after
 * an unclean end of a strict-lease hold, no hold before the lock-delay has
 * passed since that holder last believed it held (its lease's end, which
 * the record bounds, is no earlier). */
static void check_previous(struct sim_handle *h)
{
    const struct hold *prev = hold_before(h);
    int how = 0, rc;
    int64_t token = 0;

    rc = zklock_previous(h->l, &how, &token);
    if (rc != ZKLOCK_OK) {
        truth_fail("handle %d (%s): zklock_previous says %s for a hold", h->id, path_of(h),
                   zklock_strerror(rc));
        return;
    }
    zs_log("truth: handle %d (%s) holds with token %lld: previous %s, token %lld", h->id,
           path_of(h), (long long)h->token, how >= 1 && how <= 4 ? prev_names[how] : "?",
           (long long)token);
    if (how == ZKLOCK_PREV_NONE && prev)
        truth_fail("handle %d (%s): previous NONE, but handle %d held it before (token %lld)",
                   h->id, path_of(h), prev->h, (long long)prev->token);
    else if (how == ZKLOCK_PREV_CLEAN && (!prev || !prev->released))
        truth_fail("handle %d (%s): previous CLEAN, but %s", h->id, path_of(h),
                   prev ? "the hold before it was never released" : "nobody held before");
    else if (how == ZKLOCK_PREV_CLEAN && token != prev->token)
        truth_fail("handle %d (%s): previous CLEAN with token %lld, but the hold before had %lld",
                   h->id, path_of(h), (long long)token, (long long)prev->token);
    /* UNCLEAN may name a hold its owner never heard of: a "held" written
     * whose answer its contender never read (its host slept, its session
     * expired meanwhile): the record's holder, the conservative side. It
     * names a node of the path, and none older than the last hold. */
    else if (how == ZKLOCK_PREV_UNCLEAN && (!rec_of_token(path_of(h), token) ||
                                           (prev && token < prev->token)))
        truth_fail("handle %d (%s): previous UNCLEAN with token %lld, but the hold before had "
                   "%lld", h->id, path_of(h), (long long)token,
                   prev ? (long long)prev->token : 0LL);
    else if (how == ZKLOCK_PREV_UNCLEAN && h->lock_delay_ms > 0 && prev && prev->strict &&
             sim_now() < prev->last_seen + SIM_MS(h->lock_delay_ms))
        truth_fail("handle %d (%s): holds %lld ms after the unclean end of token %lld, "
                   "lock_delay_ms %d",
                   h->id, path_of(h), (long long)((sim_now() - prev->last_seen) / SIM_MS(1)),
                   (long long)prev->token, h->lock_delay_ms);
}

static bool excused(const struct sim_handle *h);

/* A new hold of an exclusive kind: its token beats every earlier one. Not
 * one the documented windows excuse (a session-lease holder granted on a
 * session that expired unknown to it: fencing tokens are then what refuses
 * its writes, its token being the lower). */
static void new_hold(struct sim_handle *h)
{
    struct sim_path *p = &sim_paths[h->path];

    if (h->kind == K_MULTI || h->kind == K_READ || h->kind == K_SEM || excused(h))
        return;
    if (h->tracks)
        check_previous(h);
    hold_add(h);
    if (h->token <= p->last_token)
        truth_fail("%s: a new hold (handle %d, process %d) has token %lld, not above %lld",
                   p->path, h->id, h->proc, (long long)h->token, (long long)p->last_token);
    p->last_token = h->token;
}

/* What handle h's application would be told now. */
static void observe_handle(struct sim_handle *h)
{
    int n;
    int64_t token = 0;
    int frc;
    bool was = h->believed;

    if (!h->live || h->freeing || !h->l)
        return;
    /* Either call may be the first to see a lapse (the lease, the maximum
     * hold): each answers by the clock as it is, so the order must not
     * matter; it alternates. */
    if ((sim_events_run() + (uint64_t)h->id) % 2) {
        n = zklock_hold_count(h->l);
        frc = zklock_fence(h->l, &token);
    } else {
        frc = zklock_fence(h->l, &token);
        n = zklock_hold_count(h->l);
    }
    if ((n > 0) != (frc == ZKLOCK_OK)) {
        truth_fail("handle %d (%s): hold count %d but fence %s", h->id, path_of(h), n,
                   zklock_strerror(frc));
        return;
    }
    h->believed = n > 0;
    if (h->believed && h->kind != K_READ) {
        struct timespec until, now;
        if (zklock_valid_until(h->l, &until) == ZKLOCK_OK) {
            zs_clock(h->proc, ZKLOCK_CLOCK, &now);
            h->valid_until = sim_now() + (sim_time_t)(until.tv_sec - now.tv_sec) * SIM_S(1) +
                             (until.tv_nsec - now.tv_nsec);
        }
    }
    /* A member holds for its multi-lock only once the multi-lock holds
     * (zklock.3): its turn that came while the multi-lock still waits is no
     * hold of the user's (its token may not be read yet). The multi-lock is
     * asked now, as the member was. */
    if (h->believed && h->multi >= 0) {
        observe_handle(&sim_handles[h->multi]);
        if (!sim_handles[h->multi].believed) {
            truth_fail("handle %d (%s, process %d): a member answers held (token %lld) while "
                       "its multi-lock (handle %d) does not",
                       h->id, path_of(h), h->proc, (long long)token, h->multi);
            return;
        }
    }
    if (!h->believed)
        return;
    if (!was || token != h->token) {
        h->token = token;
        h->hold_seen = sim_now();
        new_hold(h);
    } else {
        struct hold *k = hold_of(h);
        if (k)
            k->last_seen = sim_now();
    }
}

void truth_observe(int proc)
{
    if (proc < 0 || sim_proc_stopped(proc))
        return;
    resumed_at[proc] = sim_now();
    for (int i = 0; i < sim_nhandles; i++)
        if (sim_handles[i].proc == proc)
            observe_handle(&sim_handles[i]);
}

/* Why a believer's hold cannot be, against the server (its node, its
 * session), or NULL. */
static const char *ungrounded(const struct sim_handle *h, const struct record **rp,
                              const struct zs_session **zp)
{
    const struct record *r = node_of(h);
    const struct zs_session *zs = r ? zs_session(r->owner) : NULL;

    *rp = r;
    *zp = zs;
    if (!r)
        return "token";
    if (zs && !zs->alive && !operator_took(h, r) && !session_window(h, r))
        return "session";
    if (r->deleted >= 0 && zs && zs->alive && !operator_took(h, r))
        return "node";
    return NULL;
}

/* A believer's hold against the server; a cached belief is asked again
 * before it counts. */
static void check_grounded(struct sim_handle *h)
{
    const struct record *r;
    const struct zs_session *zs;
    const char *why;

    if (!h->believed || h->freeing || h->kind == K_READ || sim_proc_stopped(h->proc))
        return;
    if (!ungrounded(h, &r, &zs))
        return;
    observe_handle(h);
    if (!h->believed || !(why = ungrounded(h, &r, &zs)))
        return;
    if (strcmp(why, "token") == 0)
        truth_fail("handle %d (%s, process %d): token %lld is no node of its path", h->id,
                   path_of(h), h->proc, (long long)h->token);
    else if (strcmp(why, "session") == 0)
        truth_fail("handle %d (%s, process %d, %s lease): believes a hold of session 0x%llx, "
                   "which %s %lld ms ago",
                   h->id, path_of(h), h->proc,
                   sim_sessions[h->session].lease == ZKLOCK_LEASE_STRICT ? "strict" : "session",
                   (unsigned long long)r->owner, zs->expired ? "expired" : "was closed",
                   (long long)((sim_now() - zs->ended_at) / SIM_MS(1)));
    else
        truth_fail("handle %d (%s, process %d): believes a hold whose node %s was deleted "
                   "%lld ms ago (by session 0x%llx)",
                   h->id, path_of(h), h->proc, r->path,
                   (long long)((sim_now() - r->deleted) / SIM_MS(1)),
                   (unsigned long long)r->deleted_by);
}

static void check_max_hold(struct sim_handle *h)
{
    sim_time_t limit;

    if (!h->believed || h->freeing || h->max_hold_ms <= 0 || sim_proc_stopped(h->proc))
        return;
    if (h->multi >= 0)
        return; /* held through its multi-lock: the multi-lock's clock counts */
    limit = h->hold_seen + SIM_MS(h->max_hold_ms) + SIM_MS(1);
    if (sim_now() <= limit)
        return;
    observe_handle(h);
    if (!h->believed || sim_now() <= h->hold_seen + SIM_MS(h->max_hold_ms) + SIM_MS(1))
        return;
    if (resumed_at[h->proc] >= limit - SIM_MS(1) && sim_now() <= resumed_at[h->proc] + SIM_MS(1))
        return; /* stopped when it fell due: it ends once the process runs */
    truth_fail("handle %d (%s, process %d): held %lld ms, max_hold_ms %d", h->id, path_of(h),
               h->proc, (long long)((sim_now() - h->hold_seen) / SIM_MS(1)), h->max_hold_ms);
}

/* Two beliefs that cannot both be true: asked again (one may have ended
 * since it was seen), then excused or failed. */
static void conflict(struct sim_handle *a, struct sim_handle *b, const char *what)
{
    observe_handle(a);
    observe_handle(b);
    if (!a->believed || !b->believed || a->token == b->token)
        return;
    if (excused(a) || excused(b))
        return;
    truth_fail("%s: %s: handle %d (process %d, token %lld) and handle %d (process %d, token "
               "%lld) both hold",
               path_of(a), what, a->id, a->proc, (long long)a->token, b->id, b->proc,
               (long long)b->token);
}

static bool running_believer(const struct sim_handle *h)
{
    return h->live && !h->freeing && h->believed && !sim_proc_stopped(h->proc) &&
           h->kind != K_MULTI;
}

static void check_exclusion(void)
{
    for (int i = 0; i < sim_nhandles && !T.failed; i++) {
        struct sim_handle *a = &sim_handles[i];
        if (!running_believer(a))
            continue;
        for (int j = i + 1; j < sim_nhandles && !T.failed; j++) {
            struct sim_handle *b = &sim_handles[j];
            if (!running_believer(b) || a->path != b->path)
                continue;
            if (a->kind == K_SEM || b->kind == K_SEM)
                continue;
            if (exclusive(a->kind) || exclusive(b->kind))
                conflict(a, b, "mutual exclusion");
        }
    }
}

static void check_semaphores(void)
{
    for (int p = 0; p < SIM_PATHS && !T.failed; p++) {
        int n = 0;
        if (sim_paths[p].kind != K_SEM)
            continue;
        for (int i = 0; i < sim_nhandles; i++) {
            struct sim_handle *h = &sim_handles[i];
            if (h->path == p && running_believer(h) && !excused(h))
                n++;
        }
        if (n > sim_paths[p].max_leases) {
            for (int i = 0; i < sim_nhandles; i++)
                if (sim_handles[i].path == p && running_believer(&sim_handles[i]))
                    observe_handle(&sim_handles[i]);
            n = 0;
            for (int i = 0; i < sim_nhandles; i++) {
                struct sim_handle *h = &sim_handles[i];
                if (h->path == p && running_believer(h) && !excused(h))
                    n++;
            }
            if (n > sim_paths[p].max_leases)
                truth_fail("%s: %d leases held, max_leases %d", sim_paths[p].path, n,
                           sim_paths[p].max_leases);
        }
    }
}

/* With the faults over (and the sessions settled), an acquisition ends
 * within its deadline. */
static void check_deadlines(void)
{
    sim_time_t settle = sim_faults_end + SIM_S(8);

    for (struct tcall *c = calls; c && !T.failed; c = c->next) {
        sim_time_t slack = c->blocking ? SIM_S(5) : SIM_S(1);
        if (c->told || !c->acquire || c->deadline == INT64_MAX || c->deadline < settle ||
            handle_blocked_by_refusal(&sim_handles[c->h]))
            continue;
        if (sim_now() > c->deadline + slack)
            truth_fail("handle %d (%s, process %d): an acquisition with a %d ms timeout, "
                       "started %lld ms ago, has not ended",
                       c->h, path_of(&sim_handles[c->h]), sim_handles[c->h].proc, c->timeout,
                       (long long)((sim_now() - c->started) / SIM_MS(1)));
    }
}

void truth_check(const struct sim_event *ev)
{
    if (T.failed)
        return;
    if (ev->proc >= 0 && !sim_proc_stopped(ev->proc))
        for (int i = 0; i < sim_nhandles; i++)
            if (sim_handles[i].proc == ev->proc)
                observe_handle(&sim_handles[i]);
    if (nended_now > 0) {
        /* a session ended on the server: its believers are asked now, and
         * with the strict lease none was promised a time past it */
        for (int i = 0; i < sim_nhandles; i++) {
            struct sim_handle *h = &sim_handles[i];
            const struct record *r = h->believed ? node_of(h) : NULL;
            for (int k = 0; r && k < nended_now && !T.failed; k++) {
                if (r->owner != ended_now[k])
                    continue;
                if (sim_sessions[h->session].lease == ZKLOCK_LEASE_STRICT &&
                    !was_killed(r->owner) && h->valid_until > sim_now())
                    truth_fail("handle %d (%s, process %d): its session expired with "
                               "zklock_valid_until() %lld ms ahead (a promise, strict lease)",
                               h->id, path_of(h), h->proc,
                               (long long)((h->valid_until - sim_now()) / SIM_MS(1)));
                if (!sim_proc_stopped(h->proc))
                    observe_handle(h);
            }
        }
        nended_now = 0;
    }
    for (int i = 0; i < sim_nhandles && !T.failed; i++) {
        check_grounded(&sim_handles[i]);
        check_max_hold(&sim_handles[i]);
    }
    check_exclusion();
    check_semaphores();
    check_deadlines();
}

/* ---- the end ------------------------------------------------------------------------------------- */

int64_t truth_session_of(int h)
{
    const struct sim_session *ss = &sim_sessions[sim_handles[h].session];

    return ss->open && ss->s ? zklock_session_id(ss->s) : 0;
}

void truth_final_calls(void)
{
    for (struct tcall *c = calls; c && !T.failed; c = c->next)
        if (!c->told)
            truth_fail("handle %d (%s): a %s started %lld ms ago was never told", c->h,
                       path_of(&sim_handles[c->h]), c->acquire ? "acquisition" : "release",
                       (long long)((sim_now() - c->started) / SIM_MS(1)));
}

void truth_owed(const char *when)
{
    char what[400] = "";
    size_t n = 0;

    for (struct tcall *c = calls; c && n < sizeof what - 80; c = c->next)
        if (!c->told && !(c->acquire && handle_blocked_by_refusal(&sim_handles[c->h])))
            n += (size_t)snprintf(what + n, sizeof what - n, " [%s of handle %d (%s, process %d), "
                                  "started at %lld ms]",
                                  c->acquire ? "acquisition" : "release", c->h,
                                  kind_names[sim_handles[c->h].kind], sim_handles[c->h].proc,
                                  (long long)(c->started / SIM_MS(1)));
    for (int i = 0; i < sim_nhandles && n < sizeof what - 80; i++)
        if (sim_handles[i].believed && sim_handles[i].live)
            n += (size_t)snprintf(what + n, sizeof what - n, " [handle %d (%s %s, process %d) "
                                  "holds]", i, kind_names[sim_handles[i].kind],
                                  path_of(&sim_handles[i]), sim_handles[i].proc);
    truth_fail("%s, still owed:%s", when, what);
}

static bool current_session(int64_t owner)
{
    for (int i = 0; i < sim_nsessions; i++)
        if (sim_sessions[i].open && sim_sessions[i].s && zklock_session_id(sim_sessions[i].s) == owner)
            return true;
    return false;
}

/* What may stay once nobody uses a lock: containers (the server reaps them
 * once empty), kazoo's persistent lock paths, the previous-holder records. */
static bool may_stay(const struct zs_node *n)
{
    const char *base = strrchr(n->path, '/') + 1;

    if (n->kind == ZS_CONTAINER)
        return true;
    if (strcmp(base, "zklock.previous") == 0)
        return true;
    return n->kind == ZS_PERSISTENT && strncmp(n->path, "/kz/", 4) == 0;
}

void truth_final_nodes(bool sessions_closed)
{
    const struct zs_tree *t = &zs_w->committed;

    for (size_t i = 0; i < t->n && !T.failed; i++) {
        const struct zs_node *n = t->v[i];
        if (!under_lock_paths(n->path))
            continue;
        const struct record *r = rec_standing(n->path);
        if (r && r->delete_refused)
            continue; /* documented: it stays until its session ends */
        if (!sessions_closed && n->kind == ZS_EPHEMERAL && current_session(n->st.ephemeralOwner))
            truth_fail("every handle freed: %s (session 0x%llx, open) is left", n->path,
                       (unsigned long long)n->st.ephemeralOwner);
        if (sessions_closed && n->kind != ZS_EPHEMERAL && !may_stay(n))
            truth_fail("every session closed: %s is left (persistent)", n->path);
    }
}

void truth_reset(void)
{
    for (size_t i = 0; i < nrecs; i++)
        free(recs[i].path);
    free(recs);
    recs = NULL;
    nrecs = caprecs = 0;
    while (calls) {
        struct tcall *next = calls->next;
        free(calls);
        calls = next;
    }
    ncalls = nacquired = 0;
    nkilled = nended_now = 0;
    operator_pending[0] = '\0';
    memset(resumed_at, 0, sizeof resumed_at);
    free(holds);
    holds = NULL;
    nholds = capholds = 0;
    memset(&T, 0, sizeof T);
    zs_w->obs.committed = committed;
    zs_w->obs.session_ended = session_ended;
    zs_w->obs.refused = refused;
    zs_w->obs.ctx = NULL;
}
