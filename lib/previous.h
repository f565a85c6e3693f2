/*
 * previous.h: the previous holder's fate and the lock-delay (previous.c),
 * called by lock.c on the caller's thread, without s->mu.
 */
#ifndef ZKLOCK_PREVIOUS_H
#define ZKLOCK_PREVIOUS_H

#include "handle.h"
#include "timer.h"

/* The record's name under the lock path: no lock client parses it as a
 * contender (no tag of Curator's or kazoo's, no sequence, not 32 hex
 * digits), and it sorts after every sequence number in their orders. */
#define ZKL_RECORD_NAME "zklock.previous"
/* The version of the record's data this library writes and reads. */
#define ZKL_RECORD_VERSION 1

/* A record as read. */
struct zkl_record_view {
    bool released;
    int64_t token;   /* its holder's node's czxid */
    int32_t seq;     /* its holder's node's sequence number */
    int64_t created; /* the record node's own czxid (its Stat) */
};

/* What the hold being granted knows of its place in the queue. */
struct zkl_hold_view {
    bool was_blocked;    /* a node blocked it ... */
    int32_t blocker_seq; /* ... this one, last */
    int32_t seq;         /* its own node's */
    int64_t czxid;
};

/* record.c, pure: parses a record's data (0), or -1 for anything else. */
int zklock__record_parse(const char *data, int len, struct zkl_record_view *out);
/* record.c, pure: the fate (ZKLOCK_PREV_*) of the hold before ours, from the record
 * read at our grant (NULL: none) and what our hold knows of the queue. */
int zklock__previous_judge(const struct zkl_record_view *rec, const struct zkl_hold_view *me);
/* <lock path>/zklock.previous, malloc'ed (NULL: no memory). */
char *zklock__record_path(const zklock_t *l);
/* The caller's hold of l (a tracking mutex) was just granted: reads and
 * writes the record, then waits the lock-delay if due, within `until`
 * (NULL: no deadline). 0, or why the acquisition fails (the caller then
 * releases the hold). */
int zklock__previous_granted(zklock_t *l, const struct timespec *until);
/* The caller's last hold of l ends by its release: records it (best effort). */
void zklock__previous_releasing(zklock_t *l);

#endif
