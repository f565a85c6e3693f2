/*
 * lease.h: how long a hold may be believed without a word from the ensemble
 * (lease.c): the lease, its heartbeat, the holds that end with it.
 */
#ifndef ZKLOCK_LEASE_H
#define ZKLOCK_LEASE_H

#include "contender.h"

/* With s->mu held: if the lease ran out unnoticed (the host slept: the
 * session thread has not seen it yet), its end is recorded for the
 * holders' steps (marked: the caller runs the driver) and true. */
bool zklock__lease_check(zklock_session_t *s);
/* The leader answered a request of ours sent at *sent. */
void zklock__lease_heard(zklock_session_t *s, const struct timespec *sent);
/* Someone queues or holds: keep the lease fresh, and holds bounded by it. */
void zklock__lease_keep(zklock_session_t *s);
/* Connected again: a heartbeat at once, if anyone holds (or is granted)
 * and the lease is past its first half. */
void zklock__lease_resumed(zklock_session_t *s);
/* A heartbeat now (unless one is in flight). */
void zklock__lease_renew(zklock_session_t *s);
/* rc, the answer to a write of ours, proves the session's lease. */
bool zklock__lease_proves(int rc);
/* The lease is in its first half (heard within half a session timeout):
 * a hold granted on it has the whole reserve for its first heartbeat. */
bool zklock__lease_fresh(const zklock_session_t *s);
/* The lease is known and ran out. */
bool zklock__lease_over(const zklock_session_t *s);
/* The handle is closed: forget its heartbeat in flight. */
void zklock__lease_handle_closed(zklock_session_t *s);

/* The lease's timers and its heartbeat's answer, for their doors (doors.c),
 * with s->mu held: a heartbeat sent if due; the lease's end recorded for
 * the holders' steps (marked); the answer recorded (its session: read
 * without s->mu, the heartbeat lives until its answer). */
void zklock__heartbeat_due(struct zkl_timer *t, zklock_session_t *s);
void zklock__lease_end_due(struct zkl_timer *t, zklock_session_t *s);
zklock_session_t *zklock__heartbeat_session(const void *data);
void zklock__heartbeat_answered(const void *data, int rc);

/* The end of the session's lease (lease.c); false if none is known (or the
 * session keeps none: ZKLOCK_LEASE_SESSION). */
bool zklock__lease_valid_until(const zklock_session_t *s, struct timespec *until);
/* How long a hold may be believed, as zklock_valid_until() reports it: the
 * lease's end, or with ZKLOCK_LEASE_SESSION the session's believed life. */
bool zklock__belief_until(const zklock_session_t *s, struct timespec *until);

#endif
