/*
 * lease.c: how long a holder may believe it holds without hearing from the
 * ensemble.
 *
 * The server a client talks to touches the session when a request arrives,
 * and the leader expires a session a session timeout after the last touch
 * it knows of; a new leader gives every session a whole timeout from its
 * start. A write (a create, a delete, a multi) is answered only once a
 * quorum accepted it, so its answer proves the session was touched no
 * earlier than the moment it was sent, and that any later leader started
 * after that moment. So, with `heard_at` the send time of the latest write
 * answered, no server can expire the session before heard_at + the
 * negotiated timeout, and no other client can hold our lock before then.
 * A holder's belief is bounded by that, less a margin (LEASE_MARGIN): when
 * it passes with no fresher answer, every hold of the session is reported
 * lost (ZKLOCK_LOST_UNSURE) before any other client can have taken it over.
 * design.md ("Told first") has the argument and its limits.
 *
 * Only writes count: a deposed leader that has not noticed yet that it lost
 * its quorum still answers syncs and revalidates reconnecting sessions, for
 * up to a tick after a new leader restarted every session's timeout (the
 * partition rig saw it). To keep heard_at fresh while the session holds or
 * waits, a heartbeat goes out every sixth of the session timeout unless a
 * write was answered meanwhile: a write of the root's data with a version
 * no node has, refused (never applied) but committed as an error
 * transaction, the cheapest request that needs a quorum. (A multi with one
 * check did the same, but ZooKeeper's C client leaks a multi still pending
 * when its session ends.) A reconnection sends one at once.
 *
 * A session opened with ZKLOCK_LEASE_SESSION keeps no lease: no heartbeat,
 * no belief timer, no hold ended by a run-out lease. Its holds last while
 * the session is believed alive, and end with it (a server's word, or the
 * local expiry, session.c); zklock_valid_until() reports that belief.
 */
#include "lease.h"
#include "request.h"

/* The margin (ZKL_LEASE_MARGIN_DIVISOR): a twentieth of the session
 * timeout, far more than clocks that run at nearly the same rate drift
 * apart over one session timeout (NTP slews at most 0.05%), and enough for
 * the session thread's timer and the delivery of on_lost. */
#define LEASE_MARGIN_DIVISOR ZKL_LEASE_MARGIN_DIVISOR
#define HEARTBEATS_PER_TIMEOUT 6

struct zkl_heartbeat {
    zklock_session_t *s;
    unsigned gen;
    struct timespec sent;
};

/* A version no node has: the write is refused, never applied. */
#define NO_SUCH_VERSION (-2)

static bool anyone_in_queue(const zklock_session_t *s, bool held_only)
{
    for (const zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        if (c->phase == ZKL_HELD || (!held_only && ZKL_WANTS(c)))
            return true;
    return false;
}

/* ZKLOCK_LEASE_SESSION: the fleet chose the peers' cost, and their promise. */
static bool needs_heartbeats(const zklock_session_t *s)
{
    return s->opts.lease != ZKLOCK_LEASE_SESSION;
}

static int lease_ms(const zklock_session_t *s)
{
    return s->negotiated_ms - s->negotiated_ms / LEASE_MARGIN_DIVISOR;
}

bool zklock__lease_valid_until(const zklock_session_t *s, struct timespec *until)
{
    if (!needs_heartbeats(s) || !s->heard_known || s->negotiated_ms <= 0)
        return false;
    zklock__later(until, &s->heard_at, lease_ms(s));
    return true;
}

/* ZKLOCK_LEASE_SESSION: connected, the hold lasts at least a session
 * timeout from now (were the connection lost this instant, the local
 * expiry would come no sooner); cut off, until the local expiry. */
static bool session_believed_until(const zklock_session_t *s, struct timespec *until)
{
    if (s->negotiated_ms <= 0)
        return false;
    if (zklock__connected(s)) {
        zklock__now(until);
        zklock__later(until, until, s->negotiated_ms);
        return true;
    }
    return zklock__local_expiry_at(s, until);
}

bool zklock__belief_until(const zklock_session_t *s, struct timespec *until)
{
    if (!needs_heartbeats(s))
        return session_believed_until(s, until);
    return zklock__lease_valid_until(s, until);
}

/* Arms the belief timer at the end of the lease, if anyone holds. */
static void arm_belief(zklock_session_t *s)
{
    struct timespec until;

    if (anyone_in_queue(s, true) && zklock__lease_valid_until(s, &until))
        zklock__timer_arm(s, &s->belief_timer, &until);
}

/* The answers a write gets only once the leader has proposed it (with a
 * quorum behind it): success, or the errors ZooKeeper's PrepRequestProcessor
 * turns into an error transaction. Not a read-only server's refusal, nor
 * the client's own errors. */
bool zklock__lease_proves(int rc)
{
    switch (rc) {
    case ZOK: case ZNONODE: case ZNOAUTH: case ZBADVERSION: case ZNODEEXISTS:
    case ZNOTEMPTY: case ZNOCHILDRENFOREPHEMERALS: case ZRUNTIMEINCONSISTENCY:
    case ZINVALIDACL: case ZBADARGUMENTS:
        return true;
    default:
        return false;
    }
}

bool zklock__lease_over(const zklock_session_t *s)
{
    struct timespec until;
    return zklock__lease_valid_until(s, &until) && zklock__passed(&until);
}

/* Holds that rest on a lease that ran out (whether anyone noticed yet). */
static bool holds_past_lease(const zklock_session_t *s)
{
    return anyone_in_queue(s, true) && zklock__lease_over(s);
}

static void regrant(zklock_session_t *s);

/* The lease ran out (at `until`): every hold of the session ends (each
 * holder's step: reported, and its node deleted as soon as the session is
 * heard from again, for it may live). Late by more than the margin, this
 * process did not run (stopped, swapped out) or the host slept while its
 * lease ran out: nothing could be told in time anyway, and a probe then
 * finds the real reason (the session most likely expired meanwhile). */
static void lease_ran_out(zklock_session_t *s, const struct timespec *until)
{
    struct timespec now;
    bool late;

    zklock__now(&now);
    late = zklock__ms_between(until, &now) > s->negotiated_ms / LEASE_MARGIN_DIVISOR;
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next) {
        if (c->phase != ZKL_HELD)
            continue;
        c->lease_run_out = late ? ZKL_LEASE_RAN_OUT_LATE : ZKL_LEASE_RAN_OUT;
        zklock__mark_event(c);
    }
}

void zklock__lease_heard(zklock_session_t *s, const struct timespec *sent)
{
    struct timespec until;

    if (s->heard_known && zklock__earlier(sent, &s->heard_at))
        return;
    if (holds_past_lease(s) && zklock__lease_valid_until(s, &until)) {
        /* The lease ran out before this answer came, and nobody noticed
         * yet (the host slept, say): its holds end on it (their steps, in
         * this drive), a later answer does not revive them; the waiters
         * whose turn came meanwhile hold on the new one. */
        lease_ran_out(s, &until);
        regrant(s);
    }
    s->heard_at = *sent;
    s->heard_known = true;
    arm_belief(s); /* later now, or at last (a hold granted before any write was heard) */
}

/* The belief timer: the lease's end, unless heard from meanwhile. */
static void belief_over(struct zkl_timer *t, zklock_session_t *s)
{
    struct timespec until;

    if (!zklock__lease_valid_until(s, &until)) {
        until = t->at; /* none known (a new session): nothing backs a hold */
    } else if (!zklock__passed(&until)) {
        zklock__timer_arm(s, t, &until); /* heard from meanwhile */
        return;
    }
    lease_ran_out(s, &until);
    zklock__entry_done(s);
}

void zklock__lease_check(zklock_session_t *s)
{
    struct timespec until;

    if (holds_past_lease(s) && zklock__lease_valid_until(s, &until))
        lease_ran_out(s, &until);
}

/* ---- the heartbeat -------------------------------------------------------------- */

/* The session is heard from again: the contenders whose turn came while
 * their lease had run out hold now (their step decides: a heir only if its
 * writer still does; a multi-lock looks at its members again). */
static void regrant(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        if (c->phase == ZKL_GRANTING)
            zklock__mark_event(c);
}

static void heartbeat_done(int rc, const struct Stat *st, const void *data)
{
    struct zkl_heartbeat *hb = (struct zkl_heartbeat *)data;
    zklock_session_t *s = hb->s;

    pthread_mutex_lock(&s->mu);
    /* Refused (as it always is: no node has that version), it proves the
     * lease all the same: a refused write is committed as an error
     * transaction. */
    bool proved = hb->gen == s->gen && zklock__lease_proves(rc);

    if (proved)
        zklock__lease_heard(s, &hb->sent);
    if (s->heartbeat == hb)
        s->heartbeat = NULL;
    if (proved)
        regrant(s);
    zklock__detached_done(s);
    zklock__entry_done(s);
    pthread_mutex_unlock(&s->mu);
    free(hb);
}

void zklock__lease_renew(zklock_session_t *s)
{
    struct zkl_heartbeat *hb;

    if (s->heartbeat && s->heartbeat->gen != s->gen)
        s->heartbeat = NULL; /* an old handle's: its answer, if any, frees it */
    if (s->heartbeat || !needs_heartbeats(s) || !zklock__connected(s) ||
        !(hb = malloc(sizeof *hb)))
        return;
    hb->s = s;
    hb->gen = s->gen;
    zklock__now(&hb->sent);
    if (!zklock__detached_sent(s, zoo_aset(s->zh, "/", NULL, -1, NO_SUCH_VERSION, heartbeat_done,
                                           hb))) {
        free(hb);
        return;
    }
    s->heartbeat = hb;
}

static int heartbeat_ms(const zklock_session_t *s)
{
    return s->negotiated_ms / HEARTBEATS_PER_TIMEOUT;
}

/* A write of ours was answered within the last heartbeat interval. */
static bool heard_lately(const zklock_session_t *s)
{
    struct timespec now;

    zklock__now(&now);
    return s->heard_known && zklock__ms_between(&s->heard_at, &now) < heartbeat_ms(s);
}

static void heartbeat_due(struct zkl_timer *t, zklock_session_t *s)
{
    struct timespec next;

    if (!anyone_in_queue(s, false))
        return; /* nobody to keep a lease for: the next contender restarts it */
    if (heard_lately(s)) {
        /* An interval after that write, not after now: heard_at then never
         * ages past one interval and a round trip. */
        zklock__later(&next, &s->heard_at, heartbeat_ms(s));
        zklock__timer_arm(s, t, &next);
        return;
    }
    zklock__lease_renew(s);
    zklock__timer_arm_in(s, t, heartbeat_ms(s));
}

/* Connected again: only a write answered on this connection proves the
 * session lives on (a deposed leader revalidates sessions too). */
void zklock__lease_resumed(zklock_session_t *s)
{
    if (!needs_heartbeats(s) || !anyone_in_queue(s, false))
        return;
    zklock__lease_renew(s);
    zklock__lease_keep(s); /* the first connection of an adopted handle, say */
}

/* A handle is closed: a heartbeat of an older handle will not be answered
 * (one of the current handle, an adopted session's new one, still may:
 * its answer frees it). */
void zklock__lease_handle_closed(zklock_session_t *s)
{
    if (s->heartbeat && s->heartbeat->gen != s->gen)
        free(s->heartbeat);
    s->heartbeat = NULL;
}

/* A contender queues or holds: keep the lease fresh, and bounded. */
void zklock__lease_keep(zklock_session_t *s)
{
    s->heartbeat_timer.fire = heartbeat_due; /* timers the session reserved */
    s->belief_timer.fire = belief_over;
    if (s->negotiated_ms <= 0 || !needs_heartbeats(s))
        return;
    if (!zklock__timer_armed(&s->heartbeat_timer))
        zklock__timer_arm_in(s, &s->heartbeat_timer, heartbeat_ms(s));
    if (!zklock__timer_armed(&s->belief_timer))
        arm_belief(s);
}
