/*
 * watch.c: the watches of a contender.
 *
 * A waiter watches the node that blocks it (the nearest conflicting
 * predecessor), with getData and a watch, so a watch never outlives a node
 * that is already gone. Every contender also watches its own node once the
 * node has lived ZKL_OWN_WATCH_DELAY_MS: that tells a waiter its place is
 * gone and a holder its lock is. A semaphore's head watches the leases.
 * Watches are taken back locally (zoo_remove_watches, no round trip) when
 * we stop caring.
 *
 * The watchers are the engine's doors (doors.c): each takes s->mu, has the
 * event recorded here (it counts the registration off and records what it
 * means for the contender's step, step.c), marks the contender and runs
 * the driver. Here they are only pointers in s->doors.
 */
#include "request.h"
#include "watch.h"

static bool take_back(zkl_contender_t *c, const char *path, enum zkl_watch kind, int *count);

void zklock__watch_over(zkl_contender_t *c)
{
    free(c->watched);
    c->watched = NULL;
    c->watch_wanted = false;
}

/* ---- the node that blocks us ------------------------------------------------ */

static void send_watch(zkl_contender_t *c)
{
    c->watch_pending = true;
    c->watch_wanted = true;
    if (!zklock__send(c, &(struct zkl_request){.kind = ZKL_REQ_WATCH, .call = ZKL_CALL_GET,
                                               .path = c->watched, .watch = ZKL_WATCH_BLOCKER})) {
        c->watch_pending = false;
        zklock__watch_over(c);
    }
}

/* The node we watch changed: watch it again. */
void zklock__watch_again(zkl_contender_t *c)
{
    send_watch(c);
}

/* The watch's request answered: it is registered. */
void zklock__watch_set(zkl_contender_t *c)
{
    c->pred_watches++;
    session_of(c)->watches++;
}

/* Watches the node that blocks us; `sole`: its deletion means we hold
 * (rules.c says when). */
void zklock__watch_blocker(zkl_contender_t *c, const struct zkl_entry *blocker, bool sole)
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
    c->sole_blocker = sole;
    c->was_blocked = true;  /* previous.c: who held before us */
    c->blocker_seq = blocker->seq;
    send_watch(c);
}

/* A request still in flight finds out when it answers (watch_done). */
void zklock__forget_blocker(zkl_contender_t *c)
{
    c->watch_wanted = false;
    if (c->watch_pending)
        return;
    take_back(c, c->watched, ZKL_WATCH_BLOCKER, &c->pred_watches);
    if (c->pred_watches == 0)
        zklock__watch_over(c);
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

void zklock__blocker_event(zkl_contender_t *c, zhandle_t *zh, int type, const char *path)
{
    c->pred_relevant = watch_event(c, zh, &c->pred_watches, path, c->watched);
    c->pred_type = type;
    c->pred_fired = true;
}

/* ---- our own node ----------------------------------------------------------- */

void zklock__arm_own_watch(zkl_contender_t *c)
{
    if (!c->own_due || c->own_watches > 0 || c->own_pending || !c->node ||
        !zklock__connected(session_of(c)))
        return;
    c->own_pending = true;
    if (!zklock__send(c, &(struct zkl_request){.kind = ZKL_REQ_OWN_WATCH, .call = ZKL_CALL_GET,
                                               .path = c->node, .watch = ZKL_WATCH_OWN}))
        c->own_pending = false; /* the next step tries again */
}

/* The own watch's request answered: it is registered. */
void zklock__own_watch_set(zkl_contender_t *c)
{
    c->own_watches++;
    session_of(c)->watches++;
}

/* Its deletion; a data change: the step arms the watch again. */
void zklock__own_event(zkl_contender_t *c, zhandle_t *zh, int type, const char *path)
{
    if (watch_event(c, zh, &c->own_watches, path, c->node) && type == ZOO_DELETED_EVENT)
        c->own_deleted = true;
}

/* ---- taking watches back ---------------------------------------------------- */

/* Takes a registered watch back (local bookkeeping in the client, no
 * round trip). False if its event is already on its way to the watcher,
 * which then sees it and counts it off. */
static bool take_back(zkl_contender_t *c, const char *path, enum zkl_watch kind, int *count)
{
    zklock_session_t *s = session_of(c);

    if (*count == 0 || !path || !s->zh)
        return false;
    if (s->wire->remove_watches(s->zh, path, ZWATCHTYPE_DATA, zklock__watcher(s, kind), c, 1) !=
        ZOK)
        return false;
    (*count)--;
    zklock__watch_gone(s);
    return true;
}

void zklock__unwatch_own(zkl_contender_t *c)
{
    take_back(c, c->node, ZKL_WATCH_OWN, &c->own_watches);
}

void zklock__unwatch_both(zkl_contender_t *c)
{
    take_back(c, c->node, ZKL_WATCH_OWN, &c->own_watches);
    take_back(c, c->watched, ZKL_WATCH_BLOCKER, &c->pred_watches);
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

void zklock__queue_event(zkl_contender_t *c, zhandle_t *zh, int type, const char *path)
{
    if (watch_event(c, zh, &c->queue_watches, path, c->l->queue))
        c->queue_changed = true;
}

void zklock__unwatch_queue(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    c->queue_watch = false;
    if (c->queue_watches > 0 && s->zh &&
        s->wire->remove_watches(s->zh, c->l->queue, ZWATCHTYPE_CHILD,
                                zklock__watcher(s, ZKL_WATCH_QUEUE), c, 1) == ZOK) {
        c->queue_watches = 0;
        zklock__watch_gone(s);
    }
}
