/*
 * contender.h: a contender, one owner's place in one lock's queue: its
 * phases (phase.c), its struct and lifetime, the marks that make the
 * driver step it, the ways it ends (contender.c), and what its handle knows
 * between two acquisitions without a listing (fastpath.c).
 *
 * Everything here runs with s->mu held.
 */
#ifndef ZKLOCK_CONTENDER_H
#define ZKLOCK_CONTENDER_H

#include "common.h"
#include "handle.h"
#include "names.h"
#include "recipe.h"
#include "session.h"
#include "timer.h"

/* Wants the lock and has not got it: queuing, or its turn granted subject
 * to a heartbeat. */
#define ZKL_WANTS(c) ((c)->phase == ZKL_QUEUING || (c)->phase == ZKL_GRANTING)

/* A request's completion gets as its data one of the contender's slots, a
 * byte that says what the request is for and the generation it was sent in
 * (its ticket): ticket * c->kinds + kind, c->kinds being the engine's kinds
 * and its recipe's (ZKL_REQ_RECIPE + nkinds). Whose: from where the slot is
 * (request.c). */
/* Generations whose requests a contender may have in flight at once. */
#define ZKL_TICKETS 4

/* How a contender's lease ran out (c->lease_run_out, lease.c). */
enum { ZKL_LEASE_RAN_OUT = 1, ZKL_LEASE_RAN_OUT_LATE };

/* One thread's place in one lock's queue. */
struct zkl_contender {
    zklock_t *l;
    unsigned id;           /* the session's count of contenders (the trace's name) */
    int ops;               /* requests in flight (completion pending) */
    pthread_t owner;
    bool attached;         /* the owner still refers to it */
    bool by_handle;        /* the owner is the handle (ZKLOCK_OWNER_HANDLE) */
    /* The owner's call in progress (owner.c): an acquisition (waiting) or
     * a release (releasing), told to a blocked caller (its own record and
     * condition, struct zkl_waiter) or a done callback. */
    bool waiting;          /* an acquisition is in progress */
    bool releasing;        /* a release is, and someone awaits its end */
    bool has_deadline;     /* ... the acquisition's: deadline_timer */
    /* opts.max_hold_ms: max_hold_timer is armed when the owner's hold
     * begins (owner.c); its firing is a fact for the step (max_hold_over),
     * which ends the hold. */
    bool max_hold_over;
    bool max_hold_late; /* fired past the margin: this process did not run */
    struct zkl_waiter *acq_waiter, *rel_waiter; /* blocked callers, told there */
    struct zkl_done *done; /* an asynchronous call's completion, or NULL */
    struct zkl_timer deadline_timer, max_hold_timer;
    char *check_path;      /* zklock_check_op's copy of the held node */
    enum zkl_phase phase;
    int holds;             /* reentrant count while HELD */
    int result;            /* what the owner's call returns */
    int lost_reason;       /* what on_lost was told */
    int lost_why;          /* why the hold was lost (0: unconfirmed, below) */
    int loss_fallback;     /* LOST, and on_lost waits to know why (loss_unconfirmed,
                              below): this, unless the session turns out ended */

    char prefix[ZKL_PREFIX_MAX]; /* name prefix: finds our node after a lost reply */
    char *node;            /* full path of our node; NULL if none */
    int32_t seq;
    /* what the next step must do */
    int busy;              /* requests of the current chain in flight */
    int64_t czxid;         /* fencing token (of our node) */

    bool create_unknown;   /* a create's reply was lost: look for our node */
    bool delete_unknown;   /* a delete's reply was lost: it may have worked */
    bool need_parents;     /* the lock path is missing: create it first */
    int parent_rc;         /* why creating the lock path was refused, or 0 */
    int32_t fast_prev_seq; /* (fast, below) relying on this alone node of the handle */
    bool need_list;
    bool backoff;          /* a request failed for want of a connection: send
                              nothing more until the next resume */
    bool try_once;
    bool canceled;
    bool sole_blocker;     /* the watched node is the only one ahead of us */
    bool alone;            /* we hold, and our node was the only one in the
                              queue with nothing created after it */
    bool fast;             /* our create went out without a listing */
    int pred_watches;      /* registrations of the blocker watch for us (0 or 1) */
    int64_t fast_prev_zxid; /* ... relying on that node (fast_prev_seq) */

    /* The watch on the node that blocks us. `watched` stays set while the
     * request that sets it is in flight or the watch is registered. */
    char *watched;
    bool watch_wanted;     /* we still care about `watched` */
    bool watch_pending;    /* the request setting the watch is in flight (its
                              registrations: pred_watches, above) */
    bool queue_watch;      /* its listings also watch the whole queue (a
                              semaphore's head, waiting for a lease) */
    bool queue_listing;    /* a listing that sets it is in flight: its
                              answer registers the watch, wanted or not */
    int queue_watches;     /* ... registrations of that watch (0 or 1) */
    /* A recipe's sub-acquisitions (a semaphore's acquisition mutex, a
     * multi-lock's members): contenders of other handles whose owner is
     * this contender (their parent). A sub never calls its parent: its
     * phase changes mark the parent, whose step reads them. A parent is neither finished nor freed while it has a sub:
     * what it started on the server is gone before it is. */
    zkl_contender_t *subs, *next_sub, *parent;
    bool let_go;           /* (a sub) its parent no longer wants it: its
                              step releases it, or gives it up */
    bool by_parent;        /* (a sub) takes no step of its own until its
                              parent starts it, or makes its node (in one
                              multi with its siblings') */
    bool loss_unconfirmed; /* (loss_fallback, above) */
    /* lockstats.c: when the owner's acquisition was called, then (once
     * granted: stat_held) when its hold began. */
    struct timespec stat_since;
    bool stat_held;
    /* previous.c (zklock_opts_t.track_previous): the last node that
     * blocked it (its sequence number), and, for a tracking handle's
     * contender, what it read and wrote of the record (NULL otherwise). */
    bool was_blocked;
    int32_t blocker_seq;
    struct zkl_track *track;
    void *recipe_data;     /* a recipe's own allocation for c (free()d with c,
                              or by its recipe's free_data hook):
                              a lease's room and guess, a multi-lock's
                              transaction in flight, a heir's place */
    /* The watch on our own node: tells a waiter its place is gone and a
     * holder its lock is. It costs a request and an event per node, so it
     * is set only once the node has lived ZKL_OWN_WATCH_DELAY_MS (most
     * nodes of a busy lock live less); see the design note. */
    int own_watches;       /* registrations of the own-node watch (0 or 1) */
    bool own_pending;      /* the request setting it is in flight */
    bool own_due;          /* the delay is over: set it when possible */
    struct zkl_timer own_timer; /* ... ends the delay */
    /* Revocation (revoke.c): the data version + 1 of the last own-watch
     * answer that found "__REVOKE__" in our node (0: none seen), and of the
     * last request told to the owner: each request (a write) is told once. */
    int64_t revoke_seen, revoke_told;
    struct timespec sent_at; /* when the oldest of them went out */
    unsigned gen;          /* session generation of the last request/watch */
    /* The same requests by the generation they were sent in: an answer
     * names its request's ticket, not just its contender, so that answers
     * an adopted session's old handle still gives after a readopt are told
     * from the new handle's. */
    struct zkl_ticket {
        unsigned gen;
        int ops;
    } tickets[ZKL_TICKETS];
    unsigned char ticket;  /* the one requests are sent with now */
    unsigned char kinds;   /* kinds of request: the engine's and its recipe's */

    /* Facts recorded for the next step (step.c reads them, in this order),
     * by the completions (request.c), the watchers (watch.c), the timers
     * and the session's changes (driver.c, lease.c), the owner's calls. */
    const struct zkl_answer *answer; /* an answer to one of its requests, or
                                   NULL (the completion's, for its drive) */
    int refused;                /* a request the client refused, why */
    bool pred_fired, pred_relevant; /* the blocker's watch fired (about the */
    int pred_type;              /* ... node we watch now, in this session), how */
    bool own_deleted;           /* our node's watch: it was deleted */
    bool queue_changed;         /* the queue's watch fired */
    int session_end;            /* the session ended (ZKLOCK_LOST_EXPIRED, ...) */
    int lease_run_out;          /* ZKL_LEASE_RAN_OUT(_LATE) */
    bool leave_wanted;          /* its node must go (the handle or session goes, */
    /* The driver's lists (driver.c): marked, to be stepped; visited, stepped
     * in this drive (its calls are decided, and it is freed if finished). */
    bool marked, visited;
    int leave_rc;               /* ... or it never started), with this outcome */

    zkl_contender_t *lock_next, *lock_prev;  /* in l->contenders */
    zkl_contender_t *sess_next, *sess_prev;  /* in s->contenders */
    zkl_contender_t *mark_next, *visit_next; /* (the driver's lists) */
    /* Its requests' completions' data: ZKL_TICKETS * kinds slots, each
     * holding its own index (request.c). */
    unsigned char slots[];
};

static inline zklock_session_t *session_of(const zkl_contender_t *c)
{
    return c->l->s;
}

/* ---- contender.c: lifetime, marks, phase, outcomes ------------------------------ */

#define ZKL_OWN_WATCH_DELAY_MS 50

/* A new contender of l's caller (queuing, not started); NULL: no memory. */
zkl_contender_t *zklock__contender_new(zklock_t *l);
/* Frees c: the driver's last phase, once nobody can reach it. */
void zklock__contender_free(zkl_contender_t *c);
/* An event of c's (an answer, a watch event, a timer) is recorded: c is
 * marked, and so is its parent, whose step reads its subs. */
void zklock__mark_event(zkl_contender_t *c);
/* The one way c's phase changes, in a step: checked against phase.c's table
 * (in every build: outside a step or the table, an internal error,
 * zklock__internal_error), traced (ZKLOCK_TRACE, `why` says what
 * made it), and a sub's change marks its parent. */
void zklock__set_phase(zkl_contender_t *c, enum zkl_phase to, const char *why);
/* The own-watch delay's timer (t is c->own_timer), for its door: the watch
 * is due, c marked. */
void zklock__own_watch_due(struct zkl_timer *t);
/* Does c's place (a downgrade heir's: zklock__inherits) stand? */
bool zklock__place_stands(const zkl_contender_t *c);

/* The ways a contender ends, each said once (the verbs are its step's, in
 * step.c, unless noted; wishes are marks its step reads):
 *  - it gives up (zklock__give_up, here): its acquisition is over (a
 *    deadline, a cancel, a try-once busy or cut off, an error) or its hold
 *    released (rc ZKLOCK_OK): LEAVING while its node goes, then GONE;
 *  - it loses (zklock__lose, _lose_unconfirmed): a hold gone with its node,
 *    its lease or its session: LOST, and on_lost told once (owner.c), or it
 *    queues again if its owner never heard of the hold;
 *  - it queues again (zklock__requeue, _requeue_own): its place went while
 *    it waited; not an end, a new start;
 *  - its session ends: a fact its step reads (one of the above);
 *  - its owner wishes it gone (zklock__leave, here; a release, owner.c; a
 *    parent lets a sub go, subs.c): its step gives it up;
 *  - its owner abandons it (zklock__abandon, here; a parent disowns a sub,
 *    subs.c): the driver frees it once nothing else refers to it. */
/* Its owner no longer wants c (the handle or the session goes, or it never
 * started): its step gives it up, outcome rc. */
void zklock__leave(zkl_contender_t *c, int rc);

/* ---- phase.c: the transitions a contender may make ------------------------ */

const char *zklock__phase_name(enum zkl_phase p);
bool zklock__phase_allowed(enum zkl_phase from, enum zkl_phase to);

/* ---- fastpath.c: acquiring without a listing -------------------------------- */

/* c's alone node is deleted: the handle's next create may skip the listing. */
void zklock__fast_remember(zkl_contender_t *c);
/* A create goes out: may it skip the listing? (uses up what the handle knew) */
bool zklock__fast_take(zkl_contender_t *c);

#endif
