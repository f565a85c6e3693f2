/*
 * subs.h: sub-acquisitions (subs.c), the one module a semaphore (its
 * acquisition lock) and a multi-lock (its members) share.
 */
#ifndef ZKLOCK_SUBS_H
#define ZKLOCK_SUBS_H

#include "contender.h"

/* A new sub of c on handle l, owned by c's owner; `by_parent`: it takes no
 * step of its own until c starts it or makes its node. NULL: no memory. */
zkl_contender_t *zklock__sub_new(zkl_contender_t *c, zklock_t *l, bool by_parent);
/* Starts the acquisition of c's sub m (a try-once if c's is). */
void zklock__sub_start(zkl_contender_t *c, zkl_contender_t *m);
/* Has m's acquisition started (or ended)? */
bool zklock__sub_started(const zkl_contender_t *m);
/* c's sub on handle l, unless let go; or NULL. */
zkl_contender_t *zklock__sub_of(const zkl_contender_t *c, const zklock_t *l);
/* c no longer wants its sub m (its step releases a hold or gives up an
 * acquisition, in the background); or any of them. */
void zklock__let_go(zkl_contender_t *c, zkl_contender_t *m);
void zklock__subs_let_go(zkl_contender_t *c);
/* A sub whose hold or place went (with a session, or by hand) while c still
 * waits: a new sub of the same handle takes its place. False if out of
 * memory (c gave up). */
bool zklock__subs_replace_lost(zkl_contender_t *c);
/* c lets go of its sub m for good (abandoned: the driver frees it once it can). */
void zklock__disown(zkl_contender_t *c, zkl_contender_t *m);
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
