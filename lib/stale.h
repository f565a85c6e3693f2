/*
 * stale.h: our nodes that outlived a session we gave up (stale.c).
 */
#ifndef ZKLOCK_STALE_H
#define ZKLOCK_STALE_H

#include "contender.h"

/* (zklock__stale_add: the session is ending without a server saying so,
 * remember c's node; zklock__stale_sweep: connected, remove the remembered
 * nodes: recipe.h.) */
/* Is dir/name such a node? (It never blocks us.) */
bool zklock__stale_match(const zklock_session_t *s, const char *dir, const char *name);
void zklock__stale_free_all(zklock_session_t *s);

#endif
