/*
 * engine.c: the queue engine every recipe shares.
 *
 * A contender is one thread's place in one lock's queue. Its life:
 *
 *   QUEUING --(lowest / nothing conflicting ahead)--> HELD --release--> LEAVING --> GONE
 *      |  create + list (pipelined: one round trip)     |                  ^
 *      |  watch the nearest conflicting predecessor     +--lost--> LOST    |
 *      +--timeout / cancel / try-once busy / error------------------------+
 *
 * Everything here runs with s->mu held and only uses ZooKeeper's
 * asynchronous calls; completions and watches re-enter through the
 * callbacks at the bottom of this file, on ZooKeeper's completion thread.
 * zkl_step() looks at what a contender knows and sends the next request; it
 * is idempotent, so "the connection is back" simply means "step everyone".
 *
 * Requests carry the session generation (c->gen). When a ZooKeeper session
 * ends, s->gen moves on and every answer to an older request is ignored; the
 * old handle is closed (which flushes those answers) before a new one exists,
 * so a contender never has requests of two generations in flight.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void create_done(int rc, const char *name, const struct Stat *st, const void *data);
static void list_done(int rc, const struct String_vector *names, const struct Stat *st,
                      const void *data);
static void sync_done(int rc, const char *value, const void *data);
static void owner_done(int rc, const char *value, int len, const struct Stat *st, const void *data);
static void watch_done(int rc, const char *value, int len, const struct Stat *st, const void *data);
static void own_done(int rc, const char *value, int len, const struct Stat *st, const void *data);
static void delete_done(int rc, const void *data);
static void session_op_done(int rc, const void *data);
static void parent_done(int rc, const char *value, const void *data);
static void top_parent_done(int rc, const char *value, const void *data);
static void pred_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
static void own_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);

/* ---- small helpers ------------------------------------------------------- */

static zklock_session_t *session_of(const zkl_contender_t *c)
{
    return c->l->s;
}

static bool exclusive(const zkl_contender_t *c)
{
    return !c->l->shared;
}

/* Failures worth retrying once the connection is back: the request may or
 * may not have reached the server. */
static bool transient(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
           rc == ZSESSIONMOVED || rc == ZTHROTTLEDOP;
}

/* Answers that only say the session (or the handle) is going away: the
 * session code deals with those. */
static bool session_ending(int rc)
{
    return rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE ||
           rc == ZAUTHFAILED;
}

char *zkl_child_path(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    char *p = malloc(dl + 1 + nl + 1);
    if (p) {
        memcpy(p, dir, dl);
        p[dl] = '/';
        memcpy(p + dl + 1, name, nl + 1);
    }
    return p;
}

static const char *basename_of(const char *path)
{
    return strrchr(path, '/') + 1;
}

/* Only the owner waits on c->cond. */
static void wake(zkl_contender_t *c)
{
    pthread_cond_signal(&c->cond);
}

/* Called before each request: counts it and stamps the generation. */
static void op_begin(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    c->ops++;
    s->ops++;
    c->gen = s->gen;
    s->stats.requests++;
}

/* Called first in every completion: true if the answer is current. */
static bool op_end(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    c->ops--;
    s->ops--;
    if (s->ops == 0)
        pthread_cond_broadcast(&s->cond);
    return c->gen == s->gen;
}

/* A request that could not even be queued by the client. */
static void op_refused(zkl_contender_t *c, int rc)
{
    op_end(c);
    c->busy--;
    if (transient(rc) || session_ending(rc)) {
        /* the session event that explains it will follow; until then, or
         * until the retry timer, send nothing */
        c->backoff = true;
        zkl_retry_later(session_of(c));
        return;
    }
    zkl_give_up(c, rc);
}

/* ---- the own-node watch's delay ------------------------------------------ */

static void due_remove(zkl_contender_t *c)
{
    zklock_session_t *s = c->l->s;

    if (!c->in_due_queue)
        return;
    if (c->due_prev)
        c->due_prev->due_next = c->due_next;
    else
        s->due_head = c->due_next;
    if (c->due_next)
        c->due_next->due_prev = c->due_prev;
    else
        s->due_tail = c->due_prev;
    c->due_next = c->due_prev = NULL;
    c->in_due_queue = false;
}

/* Every node waits the same delay, so the queue is in due order. */
static void due_add(zkl_contender_t *c)
{
    zklock_session_t *s = c->l->s;

    due_remove(c);
    c->own_due = false;
    zkl_deadline(&c->own_due_at, ZKL_OWN_WATCH_DELAY_MS);
    c->due_prev = s->due_tail;
    if (s->due_tail)
        s->due_tail->due_next = c;
    else
        s->due_head = c;
    s->due_tail = c;
    c->in_due_queue = true;
    zkl_wake_thread_by(s, &c->own_due_at);
}

/* Our node changes: a new one starts its delay, none ends it. */
static void set_node(zkl_contender_t *c, char *node)
{
    free(c->node);
    c->node = node;
    c->own_due = false;
    c->alone = false;
    if (node)
        due_add(c);
    else
        due_remove(c);
}

/* The predecessor watch is over (fired, removed, refused or forgotten). */
static void watch_over(zkl_contender_t *c)
{
    free(c->watched);
    c->watched = NULL;
    c->watch_wanted = false;
}

/* ---- list membership and lifetime ---------------------------------------- */

zkl_contender_t *zkl_contender_new(zklock_t *l)
{
    zklock_session_t *s = l->s;
    zkl_contender_t *c = calloc(1, sizeof *c);

    if (!c)
        return NULL;
    if (zkl_cond_init(&c->cond) != 0) {
        free(c);
        return NULL;
    }
    zkl_make_prefix(c->prefix, l->opts.wire, s->rng);
    c->l = l;
    c->owner = pthread_self();
    c->attached = true;
    c->phase = ZKL_QUEUING;
    c->gen = s->gen;
    c->lock_next = l->contenders;
    if (l->contenders)
        l->contenders->lock_prev = c;
    l->contenders = c;
    c->sess_next = s->contenders;
    if (s->contenders)
        s->contenders->sess_prev = c;
    s->contenders = c;
    l->refs++;
    return c;
}

static void unlink_contender(zkl_contender_t *c)
{
    zklock_t *l = c->l;
    zklock_session_t *s = l->s;

    if (c->lock_prev)
        c->lock_prev->lock_next = c->lock_next;
    else
        l->contenders = c->lock_next;
    if (c->lock_next)
        c->lock_next->lock_prev = c->lock_prev;
    if (c->sess_prev)
        c->sess_prev->sess_next = c->sess_next;
    else
        s->contenders = c->sess_next;
    if (c->sess_next)
        c->sess_next->sess_prev = c->sess_prev;
}

/* Frees c once nobody can reach it: no owner, no request in flight, no
 * watch that could still fire, and nothing left on the server. */
void zkl_reap(zkl_contender_t *c)
{
    zklock_t *l = c->l;

    if (c->attached || c->ops > 0 || c->pred_watches > 0 || c->own_watches > 0)
        return;
    if (c->phase != ZKL_GONE && c->phase != ZKL_LOST)
        return;
    unlink_contender(c);
    due_remove(c);
    free(c->node);
    free(c->watched);
    pthread_cond_destroy(&c->cond);
    free(c);
    zkl_lock_unref(l);
}

void zkl_detach(zkl_contender_t *c)
{
    c->attached = false;
    zkl_reap(c);
}

zkl_contender_t *zkl_thread_contender(const zklock_t *l)
{
    pthread_t self = pthread_self();
    for (zkl_contender_t *c = l->contenders; c; c = c->lock_next)
        if (c->attached && pthread_equal(c->owner, self))
            return c;
    return NULL;
}

/* ---- outcomes ------------------------------------------------------------- */

static void finish(zkl_contender_t *c)
{
    c->phase = ZKL_GONE;
    wake(c);
    pthread_cond_broadcast(&session_of(c)->cond); /* zklock_free, close */
}

static void forget_blocker(zkl_contender_t *c);

/* Starts over with a new node name (the old one is gone or was never ours). */
static void requeue(zkl_contender_t *c)
{
    set_node(c, NULL);
    forget_blocker(c);
    c->create_unknown = false;
    c->fast = false;
    if (c->phase == ZKL_LEAVING)
        return; /* a contender that gave up never queues again: nothing to delete */
    c->phase = ZKL_QUEUING;
    c->need_list = false;
    c->heir = false; /* its writer's place is gone too: queue as a reader */
    zkl_make_prefix(c->prefix, c->l->opts.wire, session_of(c)->rng);
}

static void arm_own_watch(zkl_contender_t *c);

static void become_holder(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    forget_blocker(c);
    if (c->heir) {
        /* A downgrade heir holds by its writer's place, and so by its token:
         * its own node is newer than a writer queued behind, whose token
         * storage must still accept. */
        c->czxid = c->heir_token;
    }
    c->phase = ZKL_HELD;
    c->result = ZKLOCK_OK;
    s->stats.acquired++;
    arm_own_watch(c); /* if its delay is over */
    wake(c);
}

/* A held lock is gone. If the owner is still inside zklock_acquire() it
 * never saw the hold: it queues again instead of being told. */
static void lose(zkl_contender_t *c, int reason)
{
    zklock_session_t *s = session_of(c);

    if (c->waiting) {
        requeue(c);
        return;
    }
    set_node(c, NULL);
    c->phase = ZKL_LOST;
    c->holds = 0;
    c->lost_reason = reason;
    s->stats.lost++;
    zkl_queue_lost(s, c->l, reason);
    wake(c);
}

void zkl_give_up(zkl_contender_t *c, int rc)
{
    c->result = rc;
    c->phase = ZKL_LEAVING;
    zkl_step(c);
}

/* ---- sending -------------------------------------------------------------- */

/* Creates every level of the lock path as a container node, top down, in
 * one pipelined burst; "exists already" answers are fine. A refusal (ACL,
 * an ephemeral ancestor, a missing chroot) is kept in c->parent_rc: our own
 * create then fails with "no node", and the caller must hear the cause, not
 * a retry storm. */
static void send_parents(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    char *p = strdup(c->l->path);
    bool top = true;

    if (!p)
        return; /* the create fails with "no node" and we come back here */
    for (char *slash = strchr(p + 1, '/');; slash = strchr(slash + 1, '/')) {
        if (slash)
            *slash = '\0';
        c->busy++;
        op_begin(c);
        if (zoo_acreate(s->zh, p, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER,
                        top ? top_parent_done : parent_done, c) != ZOK) {
            op_end(c); /* the create that follows is refused too, and says why */
            c->busy--;
            break;
        }
        if (!slash)
            break;
        *slash = '/';
        top = false;
    }
    free(p);
}

static char *new_node_name(zkl_contender_t *c)
{
    const char *dir = c->l->path, *tag = zkl_tag_text(c->l->tag);
    size_t len = strlen(dir) + 1 + strlen(c->prefix) + strlen(tag) + 12;
    char *name = malloc(len);

    if (!name)
        return NULL;
    if (c->heir)
        snprintf(name, len, "%s/%s%s%010d", dir, c->prefix, tag, c->heir_seq);
    else
        snprintf(name, len, "%s/%s%s", dir, c->prefix, tag);
    return name;
}

static void send_list(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->need_list = false;
    c->busy++;
    op_begin(c);
    rc = zoo_aget_children2(s->zh, c->l->path, 0, list_done, c);
    if (rc != ZOK)
        op_refused(c, rc);
}

/* ---- the fast path: acquiring without a listing ---------------------------- */

/* A lock taken and released again and again by one handle, with nobody else
 * around, need not list the queue every time. ZooKeeper numbers sequential
 * nodes with the lock path's count of child creations (deletions do not
 * count), so:
 *
 *   if our last node was alone in the queue with nothing created after it,
 *   we deleted it, and our new node gets the very next sequence number,
 *   then nobody created a node in between: the queue holds only ours.
 *
 * The catch is a lock path that was deleted and created again meanwhile
 * (an empty container is reaped): its new count starts at 0 and could reach
 * our number S. That takes S + 2 operations (the path's deletion, its
 * creation, S child creations) between our two creates, besides our delete
 * (or a foreign deletion of our node: one more). So the zxids of our two
 * creations, in one leader epoch, may be apart by 2 (our delete between
 * them) plus one transaction per ZKL_FAST_OPS_PER_TXN creations of the path:
 * S + 2 operations in so few transactions take a multi-op of more than 64.
 * On an idle ensemble the gap is exactly 2 and nothing else can have
 * happened. design.md, "Acquiring without a listing", has the argument. */
#define ZKL_FAST_OPS_PER_TXN 64

/* The listing's count of child creations: ZooKeeper reports cversion as
 * creations + deletions = 2 * creations - children. -1 if that does not add
 * up (a server that counts otherwise never gets the fast path). */
static int64_t creations_of(const struct Stat *parent)
{
    int64_t sum = (int64_t)parent->cversion + parent->numChildren;
    return sum >= 0 && sum % 2 == 0 ? sum / 2 : -1;
}

/* A listing made us the holder: was our node the only one (so every older
 * node is gone), with nothing created after it? The second half also checks
 * that the server numbers nodes the way the fast path assumes. */
static bool alone_in(const zkl_contender_t *c, int nodes, const struct Stat *parent)
{
    return nodes == 1 && creations_of(parent) == (int64_t)c->seq + 1;
}

/* Our alone node is deleted: the handle's next create may skip the listing. */
static void remember_alone(zkl_contender_t *c)
{
    zklock_t *l = c->l;

    l->alone_known = true;
    l->alone_seq = c->seq;
    l->alone_zxid = c->czxid;
    l->alone_gen = c->gen;
}

/* Called as a create goes out: one create may use what the handle knows. */
static bool take_alone(zkl_contender_t *c)
{
    zklock_t *l = c->l;
    bool known = l->alone_known && l->alone_gen == session_of(c)->gen;

    l->alone_known = false;
    if (known) {
        c->fast_prev_seq = l->alone_seq;
        c->fast_prev_zxid = l->alone_zxid;
    }
    return known;
}

/* The rule above, for our new node (c->seq, created at czxid). */
static bool alone_again(const zkl_contender_t *c, int64_t czxid)
{
    int64_t gap = czxid - c->fast_prev_zxid;

    return (uint32_t)c->seq == (uint32_t)c->fast_prev_seq + 1 && c->seq > 0 &&
           czxid >> 32 == c->fast_prev_zxid >> 32 && gap > 0 &&
           gap <= 2 + c->seq / ZKL_FAST_OPS_PER_TXN;
}

/* The create and the listing go out back to back: ZooKeeper answers a
 * session's requests in order, so the listing already contains our node and
 * a free lock costs one round trip. A downgrade heir needs no listing, nor
 * does a create that may take the fast path (if it turns out it may not,
 * the listing follows). */
static void send_create(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    char *name = new_node_name(c);
    int mode = c->heir ? ZOO_EPHEMERAL : ZOO_EPHEMERAL_SEQUENTIAL;
    int rc;

    if (!name) {
        zkl_give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    c->parent_rc = 0; /* it speaks of this create's parents only */
    c->fast = !c->heir && !c->need_parents && take_alone(c);
    if (c->need_parents)
        send_parents(c);
    c->need_parents = false;
    c->busy++;
    op_begin(c);
    rc = zoo_acreate2(s->zh, name, s->identity, (int)strlen(s->identity),
                      &ZOO_OPEN_ACL_UNSAFE, mode, create_done, c);
    free(name);
    if (rc != ZOK) {
        op_refused(c, rc);
        return;
    }
    if (!c->heir && !c->fast)
        send_list(c);
}

/* After a lost create reply: make the server we talk to catch up with the
 * leader, then list the children and look for our name prefix. */
static void send_recovery(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->busy++;
    op_begin(c);
    rc = zoo_async(s->zh, c->l->path, sync_done, c);
    if (rc != ZOK) {
        op_refused(c, rc);
        return;
    }
    send_list(c);
}

static void send_owner_check(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->busy++;
    op_begin(c);
    rc = zoo_aget(s->zh, c->node, 0, owner_done, c);
    if (rc != ZOK)
        op_refused(c, rc);
}

static void send_watch(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->busy++;
    c->watch_pending = true;
    c->watch_wanted = true;
    op_begin(c);
    rc = zoo_awget(s->zh, c->watched, pred_watcher, c, watch_done, c);
    if (rc != ZOK) {
        c->watch_pending = false;
        watch_over(c);
        op_refused(c, rc);
    }
}

static void send_delete(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->busy++;
    op_begin(c);
    rc = zoo_adelete(s->zh, c->node, -1, delete_done, c);
    if (rc != ZOK)
        op_refused(c, rc);
}

/* A stray is one of our own nodes that a lost reply made us create twice:
 * delete it without waiting; a later listing finds it again if this fails. */
static void send_stray_delete(zklock_session_t *s, const char *dir, const char *name)
{
    char *path = zkl_child_path(dir, name);

    if (path && zoo_adelete(s->zh, path, -1, session_op_done, s) == ZOK) {
        s->ops++;
        s->stats.requests++;
    }
    free(path);
}

static void arm_own_watch(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    if (!c->own_due || c->own_watches > 0 || c->own_pending || !c->node || !zkl_connected(s))
        return;
    c->own_pending = true;
    op_begin(c);
    rc = zoo_awget(s->zh, c->node, own_watcher, c, own_done, c);
    if (rc != ZOK) {
        op_end(c);
        c->own_pending = false;
    }
}

/* An adopted session's close waits for its last watch to go. */
void zkl_watch_gone(zklock_session_t *s)
{
    if (--s->watches == 0)
        pthread_cond_broadcast(&s->cond);
}

/* Takes a registered watch back (local bookkeeping in the client, no
 * round trip). False if its event is already on its way to the watcher,
 * which then sees it and counts it off. */
static bool take_back(zkl_contender_t *c, const char *path, watcher_fn fn, int *count)
{
    zklock_session_t *s = session_of(c);

    if (*count == 0 || !path || !s->zh)
        return false;
    if (zoo_remove_watches(s->zh, path, ZWATCHTYPE_DATA, fn, c, 1) != ZOK)
        return false;
    (*count)--;
    zkl_watch_gone(s);
    return true;
}

/* We no longer care about the node we watched. A request still in flight
 * finds that out when it answers (watch_done). */
static void forget_blocker(zkl_contender_t *c)
{
    c->watch_wanted = false;
    if (c->watch_pending)
        return;
    take_back(c, c->watched, pred_watcher, &c->pred_watches);
    if (c->pred_watches == 0)
        watch_over(c);
}

/* ---- the step function ----------------------------------------------------- */

static void step_leaving(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    forget_blocker(c);
    if (c->busy)
        return; /* the chain in flight decides what is there to delete */
    if (!c->node && !c->create_unknown) {
        finish(c);
        return;
    }
    if (!zkl_connected(s) || c->backoff)
        return;
    if (c->create_unknown)
        send_recovery(c);
    else if (c->node)
        send_delete(c);
}

void zkl_step(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    if (c->phase == ZKL_LEAVING) {
        step_leaving(c);
        return;
    }
    if (!zkl_connected(s) || c->backoff)
        return;
    if (c->phase == ZKL_HELD || c->phase == ZKL_QUEUING)
        arm_own_watch(c);
    if (c->busy || c->phase != ZKL_QUEUING)
        return;
    if (c->create_unknown)
        send_recovery(c);
    else if (!c->node)
        send_create(c);
    else if (c->need_list)
        send_list(c);
}

/* ---- judging a listing -------------------------------------------------------- */

/* Watches q[w], the node that blocks us. When it is the only node ahead of
 * us that blocks us, its deletion means we hold: nodes created later have
 * higher sequence numbers. The exception is a write holder's downgrade heir
 * (a shared node with the writer's sequence number), which may appear later
 * and blocks exclusive contenders: behind a writer they list again. */
static void watch_blocker(zkl_contender_t *c, const struct zkl_entry *blocker, int blockers)
{
    char *watched = zkl_child_path(c->l->path, blocker->name);

    if (!watched) {
        zkl_give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    if (c->watched) {
        forget_blocker(c); /* not expected: one watch at a time */
        if (c->watched) {
            free(watched);
            c->need_list = true;
            return;
        }
    }
    c->watched = watched;
    /* A writer's node (Curator's __WRIT__ or kazoo's __lock__) may leave a
     * downgrade heir behind it: after its deletion we must look again. */
    c->sole_blocker = blockers == 1 &&
                      !(exclusive(c) && (blocker->tag == ZKL_TAG_WRIT || blocker->tag == ZKL_TAG_KLOCK));
    send_watch(c);
}

/* Parses the listing; marks our strays; returns the number of lock nodes
 * in *q (caller frees) and our index in *self (-1 if our node is absent). */
static int read_queue(zkl_contender_t *c, const struct String_vector *names,
                      struct zkl_entry **q, int *self)
{
    const char *own = c->node ? basename_of(c->node) : NULL;
    size_t plen = strlen(c->prefix);
    int n = 0;

    *self = -1;
    *q = malloc(sizeof **q * (size_t)(names->count > 0 ? names->count : 1));
    if (!*q)
        return -1;
    for (int i = 0; i < names->count; i++) {
        struct zkl_entry *e = &(*q)[n];
        if (zkl_parse_name(names->data[i], e) != 0)
            continue; /* unrelated children do not take part */
        e->mine = strncmp(e->name, c->prefix, plen) == 0 &&
                  !(own && strcmp(e->name, own) == 0);
        n++;
    }
    zkl_sort(*q, (size_t)n, c->node ? c->seq : 0);
    for (int i = 0; own && i < n; i++)
        if (strcmp((*q)[i].name, own) == 0)
            *self = i;
    return n;
}

/* A downgrade heir holds by its writer's place: is its thread's held node
 * on the write side still in the listing? */
static bool writer_listed(const zkl_contender_t *c, const struct zkl_entry *q, int n)
{
    const zklock_t *writes = c->l->sibling;

    for (const zkl_contender_t *w = writes ? writes->contenders : NULL; w; w = w->lock_next) {
        if (!w->attached || !pthread_equal(w->owner, c->owner) || w->phase != ZKL_HELD || !w->node)
            continue;
        for (int i = 0; i < n; i++)
            if (strcmp(q[i].name, basename_of(w->node)) == 0)
                return true;
    }
    return false;
}

/* After a lost create reply: adopt our node if the listing has it. */
static void recover_from(zkl_contender_t *c, const struct zkl_entry *q, int n)
{
    c->create_unknown = false;
    for (int i = 0; i < n; i++) {
        if (!q[i].mine)
            continue;
        set_node(c, zkl_child_path(c->l->path, q[i].name));
        c->seq = q[i].seq;
        if (c->node)
            send_owner_check(c); /* ours only if our session owns it */
        return;
    }
    /* Not there: the create never happened. A heir may make it again only
     * beside its writer's node: in a path wiped (and maybe made again)
     * meanwhile, the writer's number means nothing. */
    if (c->heir && !writer_listed(c, q, n))
        requeue(c);
}

static void judge(zkl_contender_t *c, const struct String_vector *names, const struct Stat *parent)
{
    zklock_session_t *s = session_of(c);
    struct zkl_entry *q;
    int self, blockers, w;
    int n = read_queue(c, names, &q, &self);

    if (n < 0) {
        zkl_give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    s->stats.listings++;
    if (c->create_unknown) {
        recover_from(c, q, n);
        free(q);
        return;
    }
    for (int i = 0; i < n; i++)
        if (q[i].mine)
            send_stray_delete(s, c->l->path, q[i].name);
    if (c->phase != ZKL_QUEUING) {
        free(q);
        return;
    }
    if (self < 0) {
        /* Our node vanished while we waited (deleted by someone else):
         * queue again at the back. */
        requeue(c);
        free(q);
        return;
    }
    w = zkl_blocker(q, (size_t)self, &blockers);
    if (w < 0) {
        become_holder(c);
        c->alone = alone_in(c, n, parent);
    } else if (c->try_once) {
        zkl_give_up(c, ZKLOCK_EBUSY);
    } else {
        watch_blocker(c, &q[w], blockers);
    }
    free(q);
}

/* ---- completions ------------------------------------------------------------ */

static void settle(zkl_contender_t *c)
{
    zkl_step(c);
    zkl_reap(c);
}

/* Every completion and watcher runs through this: lock, drop stale
 * answers, handle, step, maybe free. */
#define ZKL_COMPLETION_BEGIN(c)                  \
    zkl_contender_t *c = (zkl_contender_t *)data; \
    zklock_session_t *s = session_of(c);          \
    pthread_mutex_lock(&s->mu);                   \
    if (!op_end(c)) {                             \
        zkl_reap(c);                              \
        pthread_mutex_unlock(&s->mu);             \
        return;                                   \
    }                                             \
    back_off(c, rc)
#define ZKL_COMPLETION_END(c)       \
    settle(c);                      \
    pthread_mutex_unlock(&s->mu)

/* A request failed: retry when the connection is back, or give up. */
static void failed(zkl_contender_t *c, int rc)
{
    if (transient(rc)) {
        if (c->try_once && c->phase == ZKL_QUEUING)
            zkl_give_up(c, rc); /* try-once answers at once */
        return;
    }
    if (!session_ending(rc) && c->phase == ZKL_QUEUING)
        zkl_give_up(c, rc);
}

/* A request failed for want of a connection. Retrying at once would spin
 * until the client notices; wait for the resume that follows the
 * reconnection (or, for the rarer answers that no session event follows,
 * such as "throttled", the session thread's retry timer). */
static void back_off(zkl_contender_t *c, int rc)
{
    if (transient(rc)) {
        c->backoff = true;
        zkl_retry_later(session_of(c));
    }
}

/* Our node exists. A heir holds by its writer's place; a create sent
 * without a listing holds if the fast path's rule says so, or lists. */
static void created(zkl_contender_t *c, bool fast, int64_t czxid)
{
    if (c->phase != ZKL_QUEUING)
        return;
    if (c->heir) {
        become_holder(c);
    } else if (fast && alone_again(c, czxid)) {
        c->alone = true;
        session_of(c)->stats.fast_acquired++;
        become_holder(c);
    } else if (fast) {
        c->need_list = true;
    }
}

static void create_done(int rc, const char *name, const struct Stat *st, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    bool fast = c->fast;

    c->fast = false;
    c->busy--;
    if (rc == ZOK) {
        set_node(c, strdup(name));
        if (!c->node) {
            /* We cannot name our node; it goes when the session does. */
            zkl_give_up(c, ZKLOCK_ENOMEM);
        } else {
            struct zkl_entry e;
            c->seq = zkl_parse_name(basename_of(name), &e) == 0 ? e.seq : 0;
            c->czxid = st->czxid;
            created(c, fast, st->czxid);
        }
    } else if (rc == ZNONODE && !c->heir) {
        if (c->parent_rc != 0)
            failed(c, c->parent_rc); /* the lock path cannot be made */
        else
            c->need_parents = true; /* the listing fails too; step starts over */
    } else if (transient(rc)) {
        c->create_unknown = true;
        failed(c, rc);
    } else {
        failed(c, rc);
    }
    ZKL_COMPLETION_END(c);
}

/* Answers arrive in order, top down, every parent's before our own create's.
 * Only the deepest level's answer counts: ZooKeeper checks the permission to
 * create in a level before it checks whether the child exists, so a read-only
 * ancestor refuses even a level that is already there. A level that exists
 * (or was just made) below it clears that refusal. */
static void parent_answer(zkl_contender_t *c, int rc, bool top)
{
    c->busy--;
    if (rc == ZOK || rc == ZNODEEXISTS)
        c->parent_rc = 0;
    else if (transient(rc) || session_ending(rc))
        c->parent_rc = 0; /* the burst straddled a reconnection: try again */
    else if (rc != ZNONODE || top)
        c->parent_rc = rc;
    /* "No node" below the top: the level above went meanwhile (reaped);
     * at the top it can only be the session's chroot that is missing. */
}

static void parent_done(int rc, const char *value, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    parent_answer(c, rc, false);
    ZKL_COMPLETION_END(c);
}

static void top_parent_done(int rc, const char *value, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    parent_answer(c, rc, true);
    ZKL_COMPLETION_END(c);
}

static void list_done(int rc, const struct String_vector *names, const struct Stat *st,
                      const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->busy--;
    if (rc == ZOK) {
        if (c->node || c->create_unknown)
            judge(c, names, st);
    } else if (rc == ZNONODE) {
        /* No lock path: nothing of ours can be under it. A downgrade heir
         * never makes the path: its writer's place is gone with it. */
        if (c->create_unknown && c->heir) {
            requeue(c);
        } else if (c->create_unknown) {
            c->create_unknown = false;
            c->need_parents = true;
        } else if (c->node) {
            requeue(c);
        }
    } else if (transient(rc)) {
        c->need_list = c->node != NULL;
        failed(c, rc);
    } else if (!session_ending(rc)) {
        c->create_unknown = false; /* we cannot look (ACL?): it goes with the session */
        failed(c, rc);
    }
    ZKL_COMPLETION_END(c);
}

static void sync_done(int rc, const char *value, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->busy--; /* the listing that follows does the work */
    ZKL_COMPLETION_END(c);
}

static void owner_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->busy--;
    if (rc == ZOK && st->ephemeralOwner == s->session_id) {
        c->czxid = st->czxid;
        if (c->heir && c->phase == ZKL_QUEUING)
            become_holder(c); /* a heir holds by its writer's place */
        else
            c->need_list = true;
    } else if (transient(rc)) {
        c->create_unknown = true; /* look again */
        set_node(c, NULL);
    } else {
        /* Gone, or not ours after all: never touch it, start afresh. */
        requeue(c);
    }
    ZKL_COMPLETION_END(c);
}

/* The node we waited for went (the watch is over). Had our own node gone
 * while its watch was set, the server would have told us first; a node
 * younger than ZKL_OWN_WATCH_DELAY_MS has no such watch yet (design.md,
 * "Operator deletes a node"). */
static void predecessor_gone(zkl_contender_t *c)
{
    session_of(c)->stats.wakeups++;
    if (c->sole_blocker)
        become_holder(c);
    else
        c->need_list = true;
}

static void watch_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->busy--;
    c->watch_pending = false;
    if (rc == ZOK) {
        c->pred_watches++;
        s->watches++;
        if (!c->watch_wanted)
            forget_blocker(c); /* we moved on while it was being set */
        ZKL_COMPLETION_END(c);
        return;
    }
    if (c->watch_wanted && c->phase == ZKL_QUEUING) {
        if (rc == ZNONODE)
            predecessor_gone(c); /* went before the watch was set */
        else if (transient(rc))
            c->need_list = true;
        else
            failed(c, rc);
    }
    watch_over(c);
    ZKL_COMPLETION_END(c);
}

static void own_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->own_pending = false;
    if (rc == ZOK) {
        c->own_watches++;
        s->watches++;
    } else if (rc == ZNONODE && c->phase == ZKL_HELD) {
        lose(c, ZKLOCK_LOST_DELETED);
    } else if (rc == ZNONODE && c->phase == ZKL_QUEUING && c->node) {
        requeue(c); /* our place was deleted before we could watch it */
    }
    ZKL_COMPLETION_END(c);
}

static void delete_done(int rc, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->busy--;
    if (rc == ZOK || rc == ZNONODE) {
        /* "No node" after a delete whose reply was lost is that delete's
         * success; on a first attempt, the node was gone before we came. */
        if (rc == ZNONODE && !c->delete_unknown && c->result == ZKLOCK_OK)
            c->result = ZKLOCK_ELOST;
        if (rc == ZOK && c->alone)
            remember_alone(c);
        set_node(c, NULL);
        c->delete_unknown = false;
    } else if (transient(rc)) {
        c->delete_unknown = true;
    } else if (!session_ending(rc)) {
        /* Refused for good (the lock path's ACL no longer lets us delete):
         * the node goes with the session, and nobody will tell us. Take its
         * watch back now, while we still know its path; the caller hears
         * the refusal. */
        take_back(c, c->node, own_watcher, &c->own_watches);
        set_node(c, NULL);
        if (c->result == ZKLOCK_OK)
            c->result = rc;
    }
    ZKL_COMPLETION_END(c);
}

static void session_op_done(int rc, const void *data)
{
    zklock_session_t *s = (zklock_session_t *)data;
    pthread_mutex_lock(&s->mu);
    if (--s->ops == 0)
        pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

/* ---- watchers ----------------------------------------------------------------- */

/* Every watcher also receives the session's state changes (type
 * ZOO_SESSION_EVENT); those are the session code's business. A node event
 * ends the registration whatever it is about; it counts only if it is about
 * what we watch now, in this session. */
static bool watch_event(zkl_contender_t *c, zhandle_t *zh, int *count, const char *path,
                        const char *expected)
{
    zklock_session_t *s = session_of(c);

    s->stats.watch_events++;
    if (*count > 0) {
        (*count)--;
        zkl_watch_gone(s);
    }
    return c->gen == s->gen && zh == s->zh && expected && strcmp(path, expected) == 0;
}

static void pred_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zkl_contender_t *c = ctx;
    zklock_session_t *s;

    if (type == ZOO_SESSION_EVENT)
        return;
    s = session_of(c);
    pthread_mutex_lock(&s->mu);
    if (watch_event(c, zh, &c->pred_watches, path, c->watched) && c->watch_wanted &&
        c->phase == ZKL_QUEUING && !c->busy) {
        if (type == ZOO_CHANGED_EVENT) {
            send_watch(c); /* only its data changed: watch it again */
        } else {
            watch_over(c);
            predecessor_gone(c);
        }
    } else if (c->pred_watches == 0 && !c->watch_pending) {
        bool wanted = c->watch_wanted && c->phase == ZKL_QUEUING;
        watch_over(c);
        if (wanted)
            c->need_list = true; /* look again once the chain in flight is done */
    }
    settle(c);
    pthread_mutex_unlock(&s->mu);
}

static void own_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zkl_contender_t *c = ctx;
    zklock_session_t *s;

    if (type == ZOO_SESSION_EVENT)
        return;
    s = session_of(c);
    pthread_mutex_lock(&s->mu);
    if (watch_event(c, zh, &c->own_watches, path, c->node) && type == ZOO_DELETED_EVENT) {
        if (c->phase == ZKL_HELD)
            lose(c, ZKLOCK_LOST_DELETED);
        else if (c->phase == ZKL_QUEUING)
            requeue(c); /* someone deleted our place in the queue */
    }
    /* a data change: step() arms the watch again */
    settle(c);
    pthread_mutex_unlock(&s->mu);
}

/* ---- session events ----------------------------------------------------------- */

/* The connection is (back) up: every contender takes its next step. */
void zkl_engine_resume(zklock_session_t *s)
{
    zkl_contender_t *c = s->contenders, *next;
    for (; c; c = next) {
        next = c->sess_next;
        c->backoff = false;
        wake(c);
        settle(c);
    }
}

bool zkl_engine_arm_due(zklock_session_t *s, struct timespec *next)
{
    while (s->due_head && zkl_passed(&s->due_head->own_due_at)) {
        zkl_contender_t *c = s->due_head;
        due_remove(c);
        c->own_due = true;
        settle(c); /* arms it now, or on the next resume if disconnected */
    }
    if (s->due_head)
        *next = s->due_head->own_due_at;
    return s->due_head != NULL;
}

/* Wakes every owner so that it can look at the session state again. */
void zkl_engine_wake_all(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        wake(c);
}

/* The ZooKeeper session ended (s->gen has moved on): every node is gone.
 * reason: ZKLOCK_LOST_EXPIRED, or ZKLOCK_ECLOSED for zklock_session_close. */
void zkl_engine_session_ended(zklock_session_t *s, int reason)
{
    zkl_contender_t *c, *next;
    bool dead = s->adopted || reason == ZKLOCK_ECLOSED;

    /* The watches of an adopted handle stay registered in the application's
     * handle: take them back while we still know their paths. */
    if (s->adopted)
        zkl_engine_unwatch_all(s);
    zkl_inspect_session_ended(s);
    for (c = s->contenders; c; c = next) {
        next = c->sess_next;
        c->busy = 0;
        c->need_list = c->need_parents = c->create_unknown = false;
        c->own_pending = c->watch_pending = false;
        c->watch_wanted = false; /* registrations go with the handle */
        switch (c->phase) {
        case ZKL_HELD:
            if (reason == ZKLOCK_ECLOSED && !c->waiting) {
                set_node(c, NULL);
                c->phase = ZKL_LOST;
                c->lost_reason = reason;
            } else {
                lose(c, ZKLOCK_LOST_EXPIRED);
            }
            break;
        case ZKL_QUEUING:
            requeue(c);
            break;
        case ZKL_LEAVING:
            set_node(c, NULL);
            if (c->result == ZKLOCK_OK)
                c->result = reason == ZKLOCK_ECLOSED ? ZKLOCK_ECLOSED : ZKLOCK_ELOST;
            finish(c);
            break;
        default:
            break;
        }
        if (dead && c->phase == ZKL_QUEUING) {
            c->result = reason == ZKLOCK_ECLOSED ? ZKLOCK_ECLOSED : ZSESSIONEXPIRED;
            finish(c);
        }
        wake(c);
        zkl_reap(c);
    }
}

/* The old handle is closed: none of its watches can fire any more. */
void zkl_engine_forget_watches(zklock_session_t *s)
{
    zkl_contender_t *c = s->contenders, *next;
    for (; c; c = next) {
        next = c->sess_next;
        c->pred_watches = c->own_watches = 0;
        watch_over(c);
        zkl_reap(c);
    }
    zkl_inspect_forget_watches(s);
    s->watches = 0;
}

/* Adopted sessions at close: take back every watch we registered on the
 * application's handle. Returns how many are still on their way to us. */
int zkl_engine_unwatch_all(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next) {
        take_back(c, c->node, own_watcher, &c->own_watches);
        take_back(c, c->watched, pred_watcher, &c->pred_watches);
    }
    zkl_inspect_unwatch_all(s);
    return s->watches;
}
