/*
 * subs.h: sub-acquisitions (subs.c), the one module a semaphore (its
 * acquisition lock) and a multi-lock (its members) share.
 */
#ifndef ZKLOCK_SUBS_H
#define ZKLOCK_SUBS_H

#include "contender.h"

/* (A parent's verbs, zklock__sub_new to zklock__disown: recipe.h.) */
/* A sub's step: its parent let it go. */
void zklock__let_go_step(zkl_contender_t *m);
/* What became of c's subs, read in c's step: the hold of a sub that holds
 * is taken (its call decided there); a sub let go is disowned once
 * finished (its failed release counted in c's own if `releases_count`);
 * and the news: a sub's acquisition failed (rc), a sub's hold was lost
 * (why, or the fallback if unconfirmed). */
struct zkl_subs_news {
    bool failed;
    int rc;
    bool lost, unconfirmed;
    int why;
};
void zklock__subs_read(zkl_contender_t *c, bool releases_count, struct zkl_subs_news *news);

#endif
