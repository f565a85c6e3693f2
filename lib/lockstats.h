/* lockstats.h: a lock handle's contention figures (zklock_lock_stats),
 * recorded where calls begin and where their outcomes are told; s->mu held.
 * Only the owner's own calls count: a recipe's sub-acquisitions (a
 * semaphore's acquisition mutex, a multi-lock's members) never do. */
#ifndef ZKLOCK_LOCKSTATS_H
#define ZKLOCK_LOCKSTATS_H

#include "common.h"

void zklock__stats_called(zkl_contender_t *c);               /* an acquisition starts */
void zklock__stats_acquired(zkl_contender_t *c, int rc);     /* ... and is decided */
void zklock__stats_told(zklock_t *l, int rc);                /* ... decided at once */
void zklock__stats_reentered(zklock_t *l);
void zklock__stats_hold_over(zkl_contender_t *c, bool lost); /* released or lost */
/* The histogram bucket of a duration (zklock.h, ZKLOCK_STATS_BUCKETS). */
unsigned zklock__stats_bucket(uint64_t us);
/* Is `size` one a versioned struct of these sizes (oldest first, the last
 * ours) ever had, or that of a newer one (larger, whole uint64_t)? */
bool zklock__stats_size_ok(size_t size, const size_t *sizes, size_t n);

#endif
