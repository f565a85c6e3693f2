/*
 * owner.h: who owns a contender, and the calls it makes on it (owner.c): an
 * acquisition or a release, decided in one place, told to a blocked thread
 * or a done callback.
 */
#ifndef ZKLOCK_OWNER_H
#define ZKLOCK_OWNER_H

#include "contender.h"





/* A done callback is allocated before its call starts, so that it can
 * always be queued (zklock__done_new, recipe.h). */
bool zklock__is_done_callback(const struct zkl_callback *cb);
/* Starts an acquisition by c's owner, told to done (asynchronous) or to
 * waiter (a blocked caller, who then calls zklock__call_await), or to
 * nobody (both NULL). */
void zklock__acquire_start(zkl_contender_t *c, int timeout_ms, struct zkl_done *done,
                           struct zkl_waiter *waiter);
/* Starts the release of c's hold (the node's deletion), told likewise. */
void zklock__release_start(zkl_contender_t *c, struct zkl_done *done, struct zkl_waiter *waiter);
/* Tells c's owner, through on_lost, that a hold it had is over (once). */
void zklock__tell_lost(zkl_contender_t *c, int reason);
/* Why c's acquisition gives up now (canceled, a try-once cut off, its
 * deadline), or 0: a fact its step reads. */
int zklock__call_gives_up(const zkl_contender_t *c);
/* c's hold begins (its step grants it): opts.max_hold_ms's clock starts;
 * when it passes, c->max_hold_over is set and c marked. */
void zklock__hold_begins(zkl_contender_t *c);
/* With s->mu held, outside any event of the engine, as the lease's check
 * (lease.h): a maximum hold of s that passed while the session thread did
 * not run (the process stopped, the host asleep) ends now, whoever calls;
 * the caller runs the driver. */
void zklock__max_hold_check(zklock_session_t *s);
/* The driver: decides c's call in progress if its outcome is known. */
void zklock__call_decide(zkl_contender_t *c);
/* Waits, with s->mu, for the outcome of the blocking call that `me` was
 * started with on c, of s (then true: me->rc says it, and c may be gone). False
 * if the call's deadline passed first by the waiter's own clock (c is
 * marked: the caller runs the driver, which gives it up, and waits
 * again). */
bool zklock__call_await(zklock_session_t *s, zkl_contender_t *c, struct zkl_waiter *me);
/* The timers of a contender's call (their doors, doors.c; t is c's
 * deadline_timer, max_hold_timer): c marked, the fact recorded. */
void zklock__deadline_passed(struct zkl_timer *t);
void zklock__max_hold_passed(struct zkl_timer *t, zklock_session_t *s);

#endif
