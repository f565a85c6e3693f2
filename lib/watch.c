/*
 * watch.c: the two watches of a contender.
 *
 * A waiter watches the node that blocks it (the nearest conflicting
 * predecessor), with getData and a watch, so a watch never outlives a node
 * that is already gone. Every contender also watches its own node once the
 * node has lived ZKL_OWN_WATCH_DELAY_MS: that tells a waiter its place is
 * gone and a holder its lock is. Watches are taken back locally
 * (zoo_remove_watches, no round trip) when we stop caring.
 */
#include "engine.h"

static void watch_done(int rc, const char *value, int len, const struct Stat *st, const void *data);
static void own_done(int rc, const char *value, int len, const struct Stat *st, const void *data);
static void pred_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
static void own_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
static bool take_back(zkl_contender_t *c, const char *path, watcher_fn fn, int *count);

void zklock__watch_over(zkl_contender_t *c)
{
    free(c->watched);
    c->watched = NULL;
    c->watch_wanted = false;
}

/* ---- the node that blocks us ------------------------------------------------ */

static void send_watch(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->busy++;
    c->watch_pending = true;
    c->watch_wanted = true;
    zklock__op_begin(c);
    rc = zoo_awget(s->zh, c->watched, pred_watcher, c, watch_done, zklock__req(c));
    if (rc != ZOK) {
        c->watch_pending = false;
        zklock__watch_over(c);
        zklock__op_refused(c, rc);
    }
}

/* Watches q[w], the node that blocks us. When it is the only node ahead of
 * us that blocks us, its deletion means we hold: nodes created later have
 * higher sequence numbers. The exceptions: a write holder's downgrade heir
 * (a shared node with the writer's sequence number), which may appear later
 * and blocks exclusive contenders: behind a writer they list again; and the
 * counter's upper half, where a later node may have a spent number, which
 * peers sort first (judge.c): there we list again. */
void zklock__watch_blocker(zkl_contender_t *c, const struct zkl_entry *blocker, int blockers)
{
    char *watched = zklock__child_path(c->l->queue, blocker->name);

    if (!watched) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    if (c->watched) {
        zklock__forget_blocker(c); /* not expected: one watch at a time */
        if (c->watched) {
            free(watched);
            c->need_list = true;
            return;
        }
    }
    c->watched = watched;
    /* A writer's node (Curator's __WRIT__ or kazoo's __lock__) may leave a
     * downgrade heir behind it: after its deletion we must look again. */
    c->sole_blocker = blockers == 1 && c->seq < ZKL_SEQ_LATE &&
                      !(exclusive(c) && (blocker->tag == ZKL_TAG_WRIT ||
                                         blocker->tag == ZKL_TAG_KLOCK));
    send_watch(c);
}

/* A request still in flight finds out when it answers (watch_done). */
void zklock__forget_blocker(zkl_contender_t *c)
{
    c->watch_wanted = false;
    if (c->watch_pending)
        return;
    take_back(c, c->watched, pred_watcher, &c->pred_watches);
    if (c->pred_watches == 0)
        zklock__watch_over(c);
}

/* The node we waited for went (the watch is over). Had our own node gone
 * while its watch was set, the server would have told us first; a node
 * younger than ZKL_OWN_WATCH_DELAY_MS has no such watch yet (design.md,
 * "Operator deletes a node"). */
static void predecessor_gone(zkl_contender_t *c)
{
    session_of(c)->stats.wakeups++;
    if (c->sole_blocker)
        zklock__become_holder(c);
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
            zklock__forget_blocker(c); /* we moved on while it was being set */
        ZKL_COMPLETION_END(c);
        return;
    }
    if (c->watch_wanted && c->phase == ZKL_QUEUING) {
        if (rc == ZNONODE)
            predecessor_gone(c); /* went before the watch was set */
        else if (transient(rc))
            c->need_list = true;
        else
            zklock__failed(c, rc);
    }
    zklock__watch_over(c);
    ZKL_COMPLETION_END(c);
}

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
        zklock__watch_gone(s);
    }
    return c->gen == s->gen && zh == s->zh && expected && strcmp(path, expected) == 0;
}

static void pred_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zkl_contender_t *c = ctx, *up;
    zklock_session_t *s;

    if (type == ZOO_SESSION_EVENT)
        return;
    s = session_of(c);
    pthread_mutex_lock(&s->mu);
    up = c->parent;
    if (watch_event(c, zh, &c->pred_watches, path, c->watched) && c->watch_wanted &&
        c->phase == ZKL_QUEUING && !c->busy) {
        if (type == ZOO_CHANGED_EVENT) {
            send_watch(c); /* only its data changed: watch it again */
        } else {
            zklock__watch_over(c);
            predecessor_gone(c);
        }
    } else if (c->pred_watches == 0 && !c->watch_pending) {
        bool wanted = c->watch_wanted && c->phase == ZKL_QUEUING;
        zklock__watch_over(c);
        if (wanted)
            c->need_list = true; /* look again once the chain in flight is done */
    }
    zklock__event_end(c, up);
    pthread_mutex_unlock(&s->mu);
}

/* ---- our own node ----------------------------------------------------------- */

/* The session thread's timer: the own-node watch's delay is over. */
void zklock__own_watch_due(struct zkl_timer *t, zklock_session_t *s)
{
    zkl_contender_t *c = (zkl_contender_t *)((char *)t - offsetof(zkl_contender_t, own_timer));

    c->own_due = true;
    zklock__settle(c); /* arms it now, or on the next resume if disconnected */
}

void zklock__arm_own_watch(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    if (!c->own_due || c->own_watches > 0 || c->own_pending || !c->node || !zklock__connected(s))
        return;
    c->own_pending = true;
    zklock__op_begin(c);
    rc = zoo_awget(s->zh, c->node, own_watcher, c, own_done, zklock__req(c));
    if (rc != ZOK) {
        zklock__op_unsent(c);
        c->own_pending = false;
    }
}

static void own_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->own_pending = false;
    if (rc == ZOK) {
        c->own_watches++;
        s->watches++;
    } else if (rc == ZNONODE && c->phase == ZKL_HELD) {
        zklock__lose_unconfirmed(c, ZKLOCK_LOST_DELETED);
    } else if (rc == ZNONODE && c->phase == ZKL_QUEUING && c->node) {
        zklock__requeue_own(c); /* our place was deleted before we could watch it */
    }
    ZKL_COMPLETION_END(c);
}

static void own_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zkl_contender_t *c = ctx, *up;
    zklock_session_t *s;

    if (type == ZOO_SESSION_EVENT)
        return;
    s = session_of(c);
    pthread_mutex_lock(&s->mu);
    up = c->parent;
    if (watch_event(c, zh, &c->own_watches, path, c->node) && type == ZOO_DELETED_EVENT) {
        if (c->phase == ZKL_HELD)
            zklock__lose_unconfirmed(c, ZKLOCK_LOST_DELETED);
        else if (c->phase == ZKL_QUEUING)
            zklock__requeue_own(c); /* someone deleted our place in the queue */
    }
    /* a data change: step() arms the watch again */
    zklock__event_end(c, up);
    pthread_mutex_unlock(&s->mu);
}

/* ---- taking watches back ---------------------------------------------------- */

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
    zklock__watch_gone(s);
    return true;
}

void zklock__unwatch_own(zkl_contender_t *c)
{
    take_back(c, c->node, own_watcher, &c->own_watches);
}

void zklock__unwatch_both(zkl_contender_t *c)
{
    take_back(c, c->node, own_watcher, &c->own_watches);
    take_back(c, c->watched, pred_watcher, &c->pred_watches);
    zklock__unwatch_queue(c);
}

/* ---- the whole queue (c->queue_watch: a semaphore's leases) ------------------- */

/* A listing with a watch answered: the watch is registered (once: the
 * client does not register the same watcher twice on a path). */
void zklock__queue_watch_set(zkl_contender_t *c)
{
    if (c->queue_watches == 0) {
        c->queue_watches = 1;
        session_of(c)->watches++;
    }
}

void zklock__queue_listing_sent(zkl_contender_t *c)
{
    c->queue_listing = c->queue_watch;
}

void zklock__queue_listed(zkl_contender_t *c, int rc)
{
    if (!c->queue_listing)
        return;
    c->queue_listing = false;
    if (rc != ZOK)
        return; /* the client registers a child watch only with a listing */
    zklock__queue_watch_set(c);
    if (!c->queue_watch)
        zklock__unwatch_queue(c);
}

void zklock__queue_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    zkl_contender_t *c = ctx, *up;
    zklock_session_t *s;

    if (type == ZOO_SESSION_EVENT)
        return;
    s = session_of(c);
    pthread_mutex_lock(&s->mu);
    up = c->parent;
    s->stats.watch_events++;
    if (c->queue_watches > 0) {
        c->queue_watches--;
        zklock__watch_gone(s);
    }
    if (c->gen == s->gen && zh == s->zh && c->phase == ZKL_QUEUING) {
        s->stats.wakeups++;
        c->need_list = true; /* the queue changed: look again (the recipe, if c has no node) */
    }
    zklock__event_end(c, up);
    pthread_mutex_unlock(&s->mu);
}

void zklock__unwatch_queue(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    c->queue_watch = false;
    if (c->queue_watches > 0 && s->zh &&
        zoo_remove_watches(s->zh, c->l->queue, ZWATCHTYPE_CHILD, zklock__queue_watcher, c, 1) ==
            ZOK) {
        c->queue_watches = 0;
        zklock__watch_gone(s);
    }
}
