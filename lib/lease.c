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
 * partition rig saw it). Only a session that holds (or whose contender's
 * turn came: GRANTING) needs the lease; a waiter needs none until its
 * turn, which is granted only on a lease in its first half, or once a
 * heartbeat proves the session (step.c). A holding session renews it as
 * late as it can with room to spare: half a session timeout after
 * heard_at, unless a write was answered meanwhile (the engine's writes
 * count), so that it commits at most two heartbeats per timeout and the
 * answer has T/2 - T/20 (0.45 T) before the lease's end: a round trip, a
 * reconnection, a blip (design.md, "Told first", has the figures). The
 * heartbeat is a write of a child of a holder's own node, which cannot
 * exist (heartbeat_path), refused (never applied) but committed as an error
 * transaction, the cheapest request that needs a quorum, whatever the ACLs. (A multi with one check did the
 * same, but ZooKeeper's C client leaks a multi still pending when its
 * session ends.) A reconnection sends one at once
 * if the lease is past its first half.
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
/* A holder's heartbeat goes out HEARTBEAT_AFTER_DIVISOR-th of the session
 * timeout after heard_at (at most two per timeout); one unanswered (in
 * flight, or refused without proof) is looked at again, and sent again if
 * it failed, every HEARTBEAT_RETRY_DIVISOR-th. */
#define HEARTBEAT_AFTER_DIVISOR 2
#define HEARTBEAT_RETRY_DIVISOR 6

struct zkl_heartbeat {
    zklock_session_t *s;
    unsigned gen;
    struct timespec sent;
};

/* A version no node has: the write is refused, never applied. */
#define NO_SUCH_VERSION (-2)

static bool anyone_holds(const zklock_session_t *s, bool or_granting)
{
    for (const zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        if (c->phase == ZKL_HELD || (or_granting && c->phase == ZKL_GRANTING))
            return true;
    return false;
}

/* ZKLOCK_LEASE_SESSION: the fleet chose the peers' cost, and their promise. */
static bool needs_heartbeats(const zklock_session_t *s)
{
    return s->opts.lease != ZKLOCK_LEASE_SESSION;
}

/* Who needs the lease kept: holders, and contenders whose turn came on a
 * lease too old to grant on (GRANTING). A waiter does not, nor a session
 * that keeps no lease. */
static bool lease_needed(const zklock_session_t *s)
{
    return needs_heartbeats(s) && anyone_holds(s, true);
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
        zklock__now(s, until);
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

    if (anyone_holds(s, false) && zklock__lease_valid_until(s, &until))
        zklock__timer_arm(s, &s->belief_timer, &until);
}

/* The answers a write gets only once the leader has proposed it (with a
 * quorum behind it): success, or the errors ZooKeeper's PrepRequestProcessor
 * turns into an error transaction. Not a read-only server's refusal, nor
 * the client's own errors, nor ZNOAUTH: a server that checks ACLs eagerly
 * (zookeeper.enableEagerACLCheck) answers it alone, before any quorum, and
 * the answer does not say which server refused (a false proof would
 * stretch the lease past the session's life; a missed one only ends a hold
 * early). */
bool zklock__lease_proves(int rc)
{
    switch (rc) {
    case ZOK: case ZNONODE: case ZBADVERSION: case ZNODEEXISTS:
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
    return zklock__lease_valid_until(s, &until) && zklock__passed(s, &until);
}

/* Holds that rest on a lease that ran out (whether anyone noticed yet). */
static bool holds_past_lease(const zklock_session_t *s)
{
    return anyone_holds(s, false) && zklock__lease_over(s);
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

    zklock__now(s, &now);
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

/* The belief timer (its door, doors.c): the lease's end, unless heard from
 * meanwhile. */
void zklock__lease_end_due(struct zkl_timer *t, zklock_session_t *s)
{
    struct timespec until;

    if (!zklock__lease_valid_until(s, &until)) {
        until = t->at; /* none known (a new session): nothing backs a hold */
    } else if (!zklock__passed(s, &until)) {
        zklock__timer_arm(s, t, &until); /* heard from meanwhile */
        return;
    }
    lease_ran_out(s, &until);
}

bool zklock__lease_check(zklock_session_t *s)
{
    struct timespec until;

    if (!holds_past_lease(s) || !zklock__lease_valid_until(s, &until))
        return false;
    lease_ran_out(s, &until);
    return true;
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

zklock_session_t *zklock__heartbeat_session(const void *data)
{
    return ((const struct zkl_heartbeat *)data)->s;
}

void zklock__heartbeat_answered(const void *data, int rc)
{
    struct zkl_heartbeat *hb = (struct zkl_heartbeat *)data;
    zklock_session_t *s = hb->s;

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
    zklock__request_answered(s);
    free(hb);
}

/* What a heartbeat writes (malloc'ed): a child of one of our own nodes.
 * Our nodes are ephemeral, and an ephemeral node has no children, so the
 * leader refuses the write with "no node" (an error transaction the quorum
 * commits) whatever the ACLs: a server that checks ACLs eagerly lets a write
 * of a node that does not exist through to the leader. Only with no node of
 * ours known, "/" with a version it never has, which an ACL on "/" may refuse
 * at the server we talk to (ZNOAUTH, proving nothing). */
static char *heartbeat_path(const zklock_session_t *s)
{
    for (const zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        if (c->node && (c->phase == ZKL_HELD || c->phase == ZKL_GRANTING))
            return zklock__child_path(c->node, "zklock.heartbeat");
    return strdup("/");
}

void zklock__lease_renew(zklock_session_t *s)
{
    struct zkl_heartbeat *hb;
    char *path;

    if (s->heartbeat && s->heartbeat->gen != s->gen)
        s->heartbeat = NULL; /* an old handle's: its answer, if any, frees it */
    if (s->heartbeat || !needs_heartbeats(s) || !zklock__connected(s) ||
        !(hb = malloc(sizeof *hb)))
        return;
    if (!(path = heartbeat_path(s))) {
        free(hb);
        return;
    }
    hb->s = s;
    hb->gen = s->gen;
    zklock__now(s, &hb->sent);
    if (!zklock__request_sent(s, s->wire->aset(s->zh, path, NULL, -1, NO_SUCH_VERSION,
                                                s->doors->heartbeat_answered, hb)))
        free(hb);
    else
        s->heartbeat = hb;
    free(path); /* serialised by zoo_aset */
}

/* When the lease is to be renewed: half a timeout after heard_at. False if
 * nothing was heard yet (renew now). */
static bool renewal_due(const zklock_session_t *s, struct timespec *due)
{
    if (!s->heard_known || s->negotiated_ms <= 0)
        return false;
    zklock__later(due, &s->heard_at, s->negotiated_ms / HEARTBEAT_AFTER_DIVISOR);
    return true;
}

/* A session that keeps no lease grants on its belief alone: no heartbeat
 * would come to prove it (GRANTING would wait for ever). */
bool zklock__lease_fresh(const zklock_session_t *s)
{
    struct timespec due;

    return !needs_heartbeats(s) || (renewal_due(s, &due) && !zklock__passed(s, &due));
}

void zklock__heartbeat_due(struct zkl_timer *t, zklock_session_t *s)
{
    struct timespec due;

    if (!lease_needed(s))
        return; /* nobody holds: the next holder restarts it (lease_keep) */
    if (renewal_due(s, &due) && !zklock__passed(s, &due)) {
        zklock__timer_arm(s, t, &due); /* a write answered meanwhile postpones it */
        return;
    }
    zklock__lease_renew(s); /* unless one is in flight */
    /* Answered, the next is due half a timeout after its send; if not (lost
     * with its connection, refused without proof), look again then. */
    zklock__timer_arm_in(s, t, s->negotiated_ms / HEARTBEAT_RETRY_DIVISOR);
}

/* Connected again (or retrying after a throttled answer): only a write
 * answered on this connection proves the session lives on (a deposed
 * leader revalidates sessions too). A lease still in its first half needs
 * none yet: the timer sends it when due, with the whole reserve ahead. */
void zklock__lease_resumed(zklock_session_t *s)
{
    if (!lease_needed(s))
        return; /* a waiter's turn proves the session if need be */
    if (!zklock__lease_fresh(s))
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

/* A contender queues or holds: keep the lease fresh (if it holds: the
 * timer finds out when it fires), and bounded. */
void zklock__lease_keep(zklock_session_t *s)
{
    struct timespec due;

    s->heartbeat_timer.fire = s->doors->heartbeat_due; /* timers the session reserved */
    s->belief_timer.fire = s->doors->lease_ends;
    if (s->negotiated_ms <= 0 || !needs_heartbeats(s))
        return;
    if (!zklock__timer_armed(&s->heartbeat_timer)) {
        if (renewal_due(s, &due))
            zklock__timer_arm(s, &s->heartbeat_timer, &due);
        else
            zklock__timer_arm_in(s, &s->heartbeat_timer, 0); /* nothing heard yet */
    }
    if (!zklock__timer_armed(&s->belief_timer))
        arm_belief(s);
}
