/*
 * watch.h: a contender's watches (watch.c): the node that blocks it, its own, a
 * semaphore's leases; the watchers record what they see for its step.
 */
#ifndef ZKLOCK_WATCH_H
#define ZKLOCK_WATCH_H

#include "contender.h"

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
/* (zklock__queue_listing_sent, zklock__queue_listed, zklock__unwatch_queue:
 * recipe.h.) */
/* A watch's event, for the engine's doors (doors.c), with s->mu held: the
 * registration counted off, and what it means recorded for c's step (the
 * node that blocks c; c's own node; c's queue). */
void zklock__blocker_event(zkl_contender_t *c, zhandle_t *zh, int type, const char *path);
void zklock__own_event(zkl_contender_t *c, zhandle_t *zh, int type, const char *path);
void zklock__queue_event(zkl_contender_t *c, zhandle_t *zh, int type, const char *path);

#endif
