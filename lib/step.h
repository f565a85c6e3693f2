/*
 * step.h: a contender's step (step.c): what it learnt, then its next request;
 * and what a recipe's own step uses of it.
 */
#ifndef ZKLOCK_STEP_H
#define ZKLOCK_STEP_H

#include "contender.h"

/* Steps c (the driver's, only): reads what was recorded for it, then
 * sends whatever it needs next. */
void zklock__step(zkl_contender_t *c);
/* c holds (false: not on a lease that ran out; it is GRANTING then, and
 * holds once a heartbeat proves the session). */
bool zklock__become_holder(zkl_contender_t *c);
/* A held lock is gone (reason: ZKLOCK_LOST_*). */
void zklock__lose(zkl_contender_t *c, int reason);
/* ... and we do not know why: a probe asks (fallback: if the session lives). */
void zklock__lose_unconfirmed(zkl_contender_t *c, int fallback);
/* Starts over with a new node name (the old one is gone or was never ours),
 * a downgrade heir as a plain reader (its writer's place is gone). */
void zklock__requeue(zkl_contender_t *c);
/* The same when only our own node went: a heir whose writer still holds
 * stays a heir. */
void zklock__requeue_own(zkl_contender_t *c);
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

#endif
