/*
 * engine.h: what the files of the queue engine share. Private to them
 * (contender.c, step.c, request.c, fastpath.c, watch.c, ...); the rest of the
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
/* Does c hold by another's place (a downgrade heir), and does it stand? */
bool zklock__inherits(const zkl_contender_t *c);
bool zklock__place_stands(const zkl_contender_t *c);
/* c holds (false: not on a lease that ran out; it is GRANTING then, and
 * holds once a heartbeat proves the session). */
bool zklock__become_holder(zkl_contender_t *c);
/* ---- subs.c: sub-acquisitions (a semaphore's acquisition lock, a
 * multi-lock's members) ---------------------------------------------------------- */

/* A new sub of c on handle l, owned by c's owner; `by_parent`: it takes no
 * step of its own until c starts it or makes its node. NULL: no memory. */
zkl_contender_t *zklock__sub_new(zkl_contender_t *c, zklock_t *l, bool by_parent);
/* Starts the acquisition of c's sub m (a try-once if c's is). */
void zklock__sub_start(zkl_contender_t *c, zkl_contender_t *m);
/* Has m's acquisition started (or ended)? */
bool zklock__sub_started(const zkl_contender_t *m);
/* c's sub on handle l, unless let go; or NULL. */
zkl_contender_t *zklock__sub_of(const zkl_contender_t *c, const zklock_t *l);
/* c no longer wants its sub m (its step releases a hold or gives up an
 * acquisition, in the background); or any of them. */
void zklock__let_go(zkl_contender_t *c, zkl_contender_t *m);
void zklock__subs_let_go(zkl_contender_t *c);
/* A sub whose hold or place went (with a session, or by hand) while c still
 * waits: a new sub of the same handle takes its place. False if out of
 * memory (c gave up). */
bool zklock__subs_replace_lost(zkl_contender_t *c);
/* c lets go of its sub m for good (the driver frees it once it can). */
void zklock__disown(zkl_contender_t *c, zkl_contender_t *m);
/* Has c a sub with something left on the server? Those without are
 * disowned. */
bool zklock__sub_pending(zkl_contender_t *c);
/* A sub's step: its parent let it go. */
void zklock__let_go_step(zkl_contender_t *m);
/* c's step: what became of its subs. A sub's failed acquisition gives c
 * up; a sub's hold it now has (the sub's call is decided there); a sub
 * let go is disowned once finished (its failed release counts in c's own
 * if `releases_count`); a held c whose sub's hold was lost loses its own. */
void zklock__subs_collect(zkl_contender_t *c, bool releases_count);

/* Do a and b belong to one owner (a thread, or the handles' owner)? */
bool zklock__same_owner(const zkl_contender_t *a, const zkl_contender_t *b);
/* A held lock is gone (reason: ZKLOCK_LOST_*). */
void zklock__lose(zkl_contender_t *c, int reason);
/* ... and we do not know why: a probe asks (fallback: if the session lives). */
void zklock__lose_unconfirmed(zkl_contender_t *c, int fallback);
void zklock__confirm_loss(zkl_contender_t *c, int reason);
/* A release found its hold already gone (the delete's answer). */
void zklock__release_found_lost(zkl_contender_t *c, int reason);

/* ---- request.c: the one send function, and the answers -------------------- */

/* What a contender's request is for: its answer is read by kind (step.c;
 * a recipe's own kinds, from ZKL_REQ_RECIPE on, by its answer hook). */
enum zkl_req {
    ZKL_REQ_NONE = -1,
    ZKL_REQ_PARENT,      /* create a level of the lock path */
    ZKL_REQ_TOP_PARENT,  /* ... its top level */
    ZKL_REQ_CREATE,      /* create2 our node */
    ZKL_REQ_LIST,        /* get_children2 the queue (watching it: c->queue_watch) */
    ZKL_REQ_SYNC,        /* sync, before a recovery's listing */
    ZKL_REQ_OWNER,       /* get our node: its ephemeralOwner */
    ZKL_REQ_DELETE,      /* delete our node */
    ZKL_REQ_PROBE,       /* exists the lock path: does the session live? */
    ZKL_REQ_WATCH,       /* get the node that blocks us, watching it */
    ZKL_REQ_OWN_WATCH,   /* get our node, watching it (not part of the chain) */
    ZKL_REQ_RECIPE,      /* the recipe's own, from here */
    ZKL_REQ_COUNT = ZKL_REQ_RECIPE + 2 /* (ZKL_SLOTS) */
};

/* The ZooKeeper calls a request may be. */
enum zkl_call {
    ZKL_CALL_CREATE, ZKL_CALL_CREATE2, ZKL_CALL_CHILDREN, ZKL_CALL_SYNC, ZKL_CALL_GET,
    ZKL_CALL_EXISTS, ZKL_CALL_DELETE, ZKL_CALL_MULTI
};

struct zkl_request {
    int kind;                      /* enum zkl_req */
    enum zkl_call call;
    const char *path;
    const char *data;              /* create */
    int len;
    const struct ACL_vector *acl;
    int flags;
    watcher_fn watcher;            /* children, get: with this watcher (context: c) */
    int nops;                      /* multi */
    const zoo_op_t *ops;
    zoo_op_result_t *results;
};

/* Sends r for c: counted (c->ops; c->busy for all but the own watch), the
 * generation stamped, and the completion registered that records its answer
 * in c->answer for c's step. A refusal by the client is recorded
 * (c->refused, for the step) and c marked: false. */
bool zklock__send(zkl_contender_t *c, const struct zkl_request *r);
/* The session's fire-and-forget requests: counted if the client took
 * them (rc: the zoo_a* call's), and off again in their completion. */
bool zklock__detached_sent(zklock_session_t *s, int rc);
void zklock__detached_done(zklock_session_t *s);
void zklock__slots_init(zkl_contender_t *c);

/* ---- step.c: a contender's step, and the verbs it needs ------------------------------ */

/* A request failed: retry when the connection is back, or give up. */
void zklock__failed(zkl_contender_t *c, int rc);
/* A write of c's was answered rc: the lease runs from when it was sent. */
void zklock__heard(zkl_contender_t *c, int rc);
/* Requests a recipe sends itself (a multi-lock makes its members' nodes). */
char *zklock__node_name(zkl_contender_t *c);          /* the path to create (malloc'ed) */
void zklock__send_parents(zkl_contender_t *c);        /* makes the queue's missing levels */
bool zklock__send_list(zkl_contender_t *c);           /* lists the queue; judged on answer */
/* After a lost create reply: is the node we found ours (its owner our session)? */
void zklock__send_owner_check(zkl_contender_t *c);
/* Deletes a duplicate of our own node, found in a listing, without waiting. */
void zklock__send_stray_delete(zklock_session_t *s, const char *dir, const char *name);

/* ---- fastpath.c: acquiring without a listing -------------------------------- */

/* c's alone node is deleted: the handle's next create may skip the listing. */
void zklock__fast_remember(zkl_contender_t *c);
/* A create goes out: may it skip the listing? (uses up what the handle knew) */
bool zklock__fast_take(zkl_contender_t *c);

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
/* The handle is closed: forget its heartbeat in flight. */
void zklock__lease_handle_closed(zklock_session_t *s);

/* ---- watch.c: the node that blocks us, and our own ------------------------- */

/* Watches the node that blocks us (sole: the only one that does, whose
 * deletion means we hold: rules.c). */
void zklock__watch_blocker(zkl_contender_t *c, const struct zkl_entry *blocker, bool sole);
/* The node we watch changed (not deleted): watch it again. */
void zklock__watch_again(zkl_contender_t *c);
/* A watch's request answered: it is registered (the blocker's, our node's). */
void zklock__watch_set(zkl_contender_t *c);
void zklock__own_watch_set(zkl_contender_t *c);
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
