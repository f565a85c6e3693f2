/*
 * engine.h: what the files of the queue engine share. Private to them
 * (contender.c, engine.c, judge.c, fastpath.c, watch.c); the rest of the
 * library uses the engine through internal.h.
 *
 * Everything here runs with s->mu held.
 */
#ifndef ZKLOCK_ENGINE_H
#define ZKLOCK_ENGINE_H

#include "internal.h"

#include <stdlib.h>
#include <string.h>

static inline zklock_session_t *session_of(const zkl_contender_t *c)
{
    return c->l->s;
}

static inline bool exclusive(const zkl_contender_t *c)
{
    return !c->l->shared;
}

static inline const char *basename_of(const char *path)
{
    return strrchr(path, '/') + 1;
}

/* Something about c changed: its owner's call in progress may be decided
 * (owner.c). Never frees c. */
static inline void wake(zkl_contender_t *c)
{
    zklock__call_check(c);
}

/* ---- contender.c: lifetime and outcomes ---------------------------------- */

/* Our node changes (NULL: we have none): a new one starts its own-watch delay. */
void zklock__set_node(zkl_contender_t *c, char *node);
/* Finished: nothing of ours is on the server. */
void zklock__finish(zkl_contender_t *c);
/* Starts over with a new node name (the old one is gone or was never ours),
 * a downgrade heir as a plain reader (its writer's place is gone). */
void zklock__requeue(zkl_contender_t *c);
/* The same when only our own node went: a heir whose writer still holds
 * stays a heir. */
void zklock__requeue_own(zkl_contender_t *c);
/* The downgrade heir c's writer still holds by the node c was made beside. */
bool zklock__writer_still_holds(const zkl_contender_t *c);
/* c holds (false: not on a lease that ran out; granted once a heartbeat
 * proves the session, c->lease_wait). */
bool zklock__become_holder(zkl_contender_t *c);
/* Sub-acquisitions (c->subs, contenders of other handles owned by c). The
 * rule that keeps their lifetimes simple: nothing done for a sub's own event
 * steps or frees its parent, except after disowning it; the event's end
 * (zklock__event_end) settles the parent. */
void zklock__adopt(zkl_contender_t *c, zkl_contender_t *m, void (*internal)(zkl_contender_t *, int));
/* Has c a sub with something left on the server? Those without are let go
 * (and freed: never call this with one in use up the stack). */
bool zklock__sub_pending(zkl_contender_t *c);
/* c lets go of its sub m (the caller frees it, or its next event does). */
void zklock__disown(zkl_contender_t *c, zkl_contender_t *m);
/* c no longer wants its sub m: a hold is released, an acquisition canceled,
 * in the background (its decision, through m->internal, disowns it); c
 * finishes only once m's node is gone. */
void zklock__let_go(zkl_contender_t *c, zkl_contender_t *m);
/* A held lock is gone (reason: ZKLOCK_LOST_*). */
void zklock__lose(zkl_contender_t *c, int reason);
/* ... and we do not know why: a probe asks (fallback: if the session lives). */
void zklock__lose_unconfirmed(zkl_contender_t *c, int fallback);
void zklock__confirm_loss(zkl_contender_t *c, int reason);
/* A release found its hold already gone (the delete's answer). */
void zklock__release_found_lost(zkl_contender_t *c, int reason);

/* ---- engine.c: requests and their answers -------------------------------- */

void zklock__op_begin(zkl_contender_t *c);  /* before each request */
void *zklock__req(zkl_contender_t *c);      /* ... then its completion's data */
zkl_contender_t *zklock__req_owner(const void *req); /* the contender of that data */
bool zklock__op_end(zkl_contender_t *c, const void *req); /* first in each answer: is
                                                              it current? */
void zklock__op_unsent(zkl_contender_t *c); /* the client would not take it */
void zklock__op_refused(zkl_contender_t *c, int rc); /* ... and what that means */
void zklock__ops_gone(zkl_contender_t *c);  /* the handle is closed: no answer comes */
void zklock__failed(zkl_contender_t *c, int rc);     /* a request failed: retry or give up */
void zklock__back_off(zkl_contender_t *c, int rc);   /* no connection: wait for it */
void zklock__settle(zkl_contender_t *c);             /* step, and free if finished */
/* Requests a recipe sends itself (a multi-lock makes its members' nodes). */
char *zklock__node_name(zkl_contender_t *c);          /* the path to create (malloc'ed) */
void zklock__send_parents(zkl_contender_t *c);        /* makes the queue's missing levels */
void zklock__send_list(zkl_contender_t *c);           /* lists the queue; judged on answer */
/* The end of an event of c's (an answer, a watch): c settles, and so does
 * `up`, its parent when the event began, which c's news may have changed (a
 * sub's events never step or free its parent before: the parent may be
 * in use up the stack; here nothing of either is). */
void zklock__event_end(zkl_contender_t *c, zkl_contender_t *up);
/* After a lost create reply: is the node we found ours (its owner our session)? */
void zklock__send_owner_check(zkl_contender_t *c);
/* Deletes a duplicate of our own node, found in a listing, without waiting. */
void zklock__send_stray_delete(zklock_session_t *s, const char *dir, const char *name);

/* Every completion and watcher runs through this: lock, drop stale
 * answers, handle, step, maybe free. */
#define ZKL_COMPLETION_BEGIN(c)                        \
    zkl_contender_t *c = zklock__req_owner(data);       \
    zklock_session_t *s = session_of(c);                \
    zkl_contender_t *up_;                               \
    pthread_mutex_lock(&s->mu);                         \
    up_ = c->parent;                                    \
    if (!zklock__op_end(c, data)) {                     \
        zklock__event_end(c, up_);                      \
        pthread_mutex_unlock(&s->mu);                   \
        return;                                         \
    }                                                   \
    zklock__learn_completion_thread(s);                 \
    zklock__back_off(c, rc)
#define ZKL_COMPLETION_END(c)    \
    zklock__event_end(c, up_); \
    pthread_mutex_unlock(&s->mu)

/* ---- judge.c: what a listing means for us ---------------------------------- */

void zklock__judge(zkl_contender_t *c, const struct String_vector *names,
                   const struct Stat *parent);

/* ---- fastpath.c: acquiring without a listing -------------------------------- */

/* A listing made c the holder: was its node alone, with nothing created after? */
bool zklock__fast_alone_in(const zkl_contender_t *c, int nodes, const struct Stat *parent);
/* c's alone node is deleted: the handle's next create may skip the listing. */
void zklock__fast_remember(zkl_contender_t *c);
/* A create goes out: may it skip the listing? (uses up what the handle knew) */
bool zklock__fast_take(zkl_contender_t *c);
/* c's create went out without a listing: does it hold? */
bool zklock__fast_holds(const zkl_contender_t *c, int64_t czxid);

/* ---- stale.c: our nodes that outlived a session we gave up ------------------ */

/* The session is ending without a server saying so: remember c's node. */
void zklock__stale_add(zkl_contender_t *c);
/* Connected: remove the remembered nodes. */
void zklock__stale_sweep(zklock_session_t *s);
/* Is dir/name such a node? (It never blocks us.) */
bool zklock__stale_match(const zklock_session_t *s, const char *dir, const char *name);
void zklock__stale_free_all(zklock_session_t *s);

/* ---- lease.c: how long a hold may be believed ------------------------------------ */

/* The leader answered a request of ours sent at *sent. */
void zklock__lease_heard(zklock_session_t *s, const struct timespec *sent);
/* Someone queues or holds: keep the lease fresh, and holds bounded by it. */
void zklock__lease_keep(zklock_session_t *s);
/* Connected again: a heartbeat at once, if anyone queues or holds. */
void zklock__lease_resumed(zklock_session_t *s);
/* A heartbeat now (unless one is in flight). */
void zklock__lease_renew(zklock_session_t *s);
/* rc, the answer to a write of ours, proves the session's lease. */
bool zklock__lease_proves(int rc);
/* The lease is known and ran out. */
bool zklock__lease_over(const zklock_session_t *s);
/* A write of c's was answered rc: the lease runs from when it was sent. */
void zklock__heard(zkl_contender_t *c, int rc);
/* The handle is closed: forget its heartbeat in flight. */
void zklock__lease_handle_closed(zklock_session_t *s);

/* ---- watch.c: the node that blocks us, and our own ------------------------- */

/* Watches the node that blocks us (blockers: how many do). */
void zklock__watch_blocker(zkl_contender_t *c, const struct zkl_entry *blocker, int blockers);
/* We no longer care about the node we watched. */
void zklock__forget_blocker(zkl_contender_t *c);
/* The predecessor watch is over (fired, removed, refused or forgotten). */
void zklock__watch_over(zkl_contender_t *c);
/* Sets the watch on our own node, if its delay is over. */
void zklock__arm_own_watch(zkl_contender_t *c);
/* Takes our own node's watch back (its path is about to be forgotten). */
void zklock__unwatch_own(zkl_contender_t *c);
/* Takes back every watch of c (an adopted handle's close or expiry). */
void zklock__unwatch_both(zkl_contender_t *c);
/* The watch on the whole queue (c->queue_watch): a listing set it; its
 * event makes c list again; taken back (and no longer wanted) once c no
 * longer waits. */
void zklock__queue_watch_set(zkl_contender_t *c);
/* A listing went out (watching the queue if c->queue_watch) ... */
void zklock__queue_listing_sent(zkl_contender_t *c);
/* ... and answered rc: counts the watch it set, taken back at once if c no
 * longer wants it (it gave up meanwhile). */
void zklock__queue_listed(zkl_contender_t *c, int rc);
void zklock__queue_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
void zklock__unwatch_queue(zkl_contender_t *c);
/* The session thread's timer: the own-node watch's delay is over. */
void zklock__own_watch_due(struct zkl_timer *t, zklock_session_t *s);

#endif
