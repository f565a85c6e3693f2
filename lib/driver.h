/*
 * driver.h: the one driver (driver.c).
 */
#ifndef ZKLOCK_DRIVER_H
#define ZKLOCK_DRIVER_H

#include "session.h"

/* Steps the marked contenders until none is left, decides their owners'
 * calls, then frees those that are finished. Every entry point above the
 * files of the engine (a user's call, a session change) calls it once at
 * its end, with s->mu held; those below end theirs with zklock__entry_done
 * (layers.c). It never runs twice at once. */
void zklock__drive(zklock_session_t *s);
/* The engine as a layer above the session (layers.c's table). */
extern const struct zkl_layer zklock__engine_layer;

#endif
