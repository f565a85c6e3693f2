/*
 * revoke.h: revocation, Curator's convention (revoke.c): a holder whose
 * handle has on_revoke is told when its node's data becomes "__REVOKE__"
 * (what Curator's Revoker.attemptRevoke writes); zklock_revoke()
 * (revoke_ask.c) writes it into the nodes of a lock's holders.
 *
 * Everything here runs with s->mu held.
 */
#ifndef ZKLOCK_REVOKE_H
#define ZKLOCK_REVOKE_H

#include "contender.h"

/* Curator's LockInternals.REVOKE_MESSAGE. */
#define ZKL_REVOKE_MESSAGE "__REVOKE__"

/* Is c's hold one whose owner asked to be told of requests (its handle's
 * on_revoke, or, for a multi-lock's member, the multi-lock's)? */
bool zklock__revocable(const zkl_contender_t *c);
/* c's own-node watch answered with the node's data (value, len, stat):
 * records whether it asks c to let go, and tells the owner if c holds. */
void zklock__revoke_read(zkl_contender_t *c, const char *value, int len,
                         const struct Stat *stat);
/* c was just granted: a request written while it waited is told now; a
 * revocable holder's own-node watch is due at once (not after its delay). */
void zklock__revoke_granted(zkl_contender_t *c);

#endif
