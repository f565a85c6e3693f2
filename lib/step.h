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
/* The same when only our own node went: a heir whose writer still holds
 * stays a heir. */
void zklock__requeue_own(zkl_contender_t *c);
/* (The verbs a recipe uses, zklock__become_holder to zklock__send_owner_check:
 * recipe.h.) */

#endif
