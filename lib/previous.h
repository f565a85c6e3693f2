/*
 * previous.h: the previous holder's fate and the lock-delay
 * (zklock_opts_t.track_previous, .lock_delay_ms; design.md, "The previous
 * holder's fate"): the record's text and the judge (record.c, pure), and
 * the steps of a tracking contender (previous.c), which step.c calls.
 *
 * Everything in previous.c runs in a contender's step, with s->mu held.
 */
#ifndef ZKLOCK_PREVIOUS_H
#define ZKLOCK_PREVIOUS_H

#include "contender.h"

/* The record's name under the lock path: no lock client parses it as a
 * contender (no tag of Curator's or kazoo's, no sequence, not 32 hex
 * digits), and it sorts after every sequence number in their orders. */
#define ZKL_RECORD_NAME "zklock.previous"
/* The version of the record's data this library writes (it reads 1 too). */
#define ZKL_RECORD_VERSION 2
/* At most this many numbers of contenders that never held are kept; a
 * give-up that finds the list full deletes its node without a word (the
 * next holder then reads UNKNOWN: the conservative side). */
#define ZKL_RECORD_NEVER_MAX 64
/* A contender's own earlier nodes of one acquisition that went without a
 * record (its session ended, someone deleted them) while it waited. */
#define ZKL_FORMER_MAX 8

/* ---- record.c: the record, pure ---------------------------------------------------- */

enum zkl_rec_state { ZKL_REC_NONE, ZKL_REC_HELD, ZKL_REC_RELEASED };

/* The record's data, one line:
 *   "2 <state> <token> <seq> <alive> <timeout> <never> <gone> <identity>"
 * state "none" (nobody held yet), "held" or "released"; token and seq the
 * holder's node's czxid and sequence number (0 and -1 for none); alive the
 * server time (ms) of the holder's last write of the record, carried by
 * writers that are not the holder (0: the record's own mtime is it);
 * timeout the holder's session timeout (ms); never the sequence numbers
 * (after the holder's) of tracking contenders that gave up without ever
 * holding, comma-separated, or "-"; gone "<seq>@<ms>": every node numbered
 * below seq was gone by that server time (ms; 0: the record's own mtime),
 * as a turn that read UNKNOWN and gave up saw it, or "-". Version 1
 * ("1 <state> <token> <seq> <identity>") is read too: no refreshes, no
 * give-ups. */
struct zkl_record {
    enum zkl_rec_state state;
    int64_t token;
    int32_t seq;
    int64_t alive_ms;
    int32_t timeout_ms; /* 0: unknown (version 1) */
    int nnever;
    int32_t never[ZKL_RECORD_NEVER_MAX];
    int32_t gone_below;  /* 0: none */
    int64_t gone_by_ms;
};

/* A record as read, with its node's Stat. */
struct zkl_record_view {
    bool present;           /* the node exists */
    bool parsed;            /* ... and holds a record of a version we know */
    struct zkl_record rec;
    int version;            /* the node's data version */
    int64_t czxid, mtime;   /* the node's creation zxid, last write's time */
};

/* What the hold being granted knows of its place in the queue. */
struct zkl_hold_view {
    bool was_blocked;    /* a node blocked it ... */
    int32_t blocker_seq; /* ... this one, last */
    int32_t seq;         /* its own node's */
    int64_t czxid;
    int nformer;         /* its own earlier nodes that never held */
    const int32_t *former;
};

/* 0, or -1 for data that is not a record of a version we know. */
int zklock__record_parse(const char *data, int len, struct zkl_record *out);
/* The record's text (malloc'ed, NUL-terminated; *len its length), or NULL. */
char *zklock__record_format(const struct zkl_record *r, const char *identity, int *len);
/* The fate (ZKLOCK_PREV_*) of the hold before ours. */
int zklock__previous_judge(const struct zkl_record_view *v, const struct zkl_hold_view *me);
/* The end of an unclean hold's lease, server time (ms): the last moment its
 * holder could still believe it held; -1 if the record cannot bound it. */
int64_t zklock__record_end_ms(const struct zkl_record_view *v);
/* For a hold judged UNKNOWN: the server time (ms) by which every node that
 * the record does not account for, between its holder's and ours, was
 * gone (the record's "gone"); -1 if the record cannot say. */
int64_t zklock__unknown_gone_ms(const struct zkl_record_view *v, const struct zkl_hold_view *me);
/* r as its holder writes it: held by (or released by) the hold `me`, its
 * give-ups kept where they come after it. */
void zklock__record_hold(struct zkl_record *r, bool released, int64_t token, int32_t seq,
                         int32_t timeout_ms);
/* r, which says "held" by a contender whose owner never had the hold (it
 * gave up as that write landed), as it was before that write (`before`;
 * NULL: there was no record), with the give-ups written since; false if
 * they do not all fit. */
bool zklock__record_undo(struct zkl_record *r, const struct zkl_record *before);
/* r with `seq` (and the contender's former nodes) added to its give-ups,
 * and the holder's last sign of life kept (`mtime`: the record's, as read);
 * false if the list is full. */
bool zklock__record_give_up(struct zkl_record *r, int64_t mtime, int32_t seq,
                            const int32_t *former, int nformer);
/* r (as read: `v`) told by a turn that judged UNKNOWN and gives up (`me`)
 * that every node below its own was gone by now, unless r says so already
 * of every node `me` could not account for. */
void zklock__record_saw_gone(struct zkl_record *r, const struct zkl_record_view *v,
                             const struct zkl_hold_view *me);

/* ---- previous.c: a tracking contender's steps ----------------------------------------- */

/* What a tracking contender's turn needs before it holds for its owner. */
enum zkl_grant_step {
    ZKL_GRANT_WAIT,    /* a request in flight, or the lock-delay runs */
    ZKL_GRANT_HOLD,    /* the record says "held" by us: the hold is the owner's */
    ZKL_GRANT_GIVE_UP  /* the lock-delay outlasts the acquisition (ETIMEDOUT), or
                          the record cannot be read (*rc) */
};

/* What an answer to a record request means for the contender's step. */
enum zkl_record_news {
    ZKL_RECORD_NOTHING,  /* recorded; the step goes on */
    ZKL_RECORD_NODE_GONE, /* our node is gone (the write's check, the end's delete) */
    ZKL_RECORD_DELETED,  /* the end's multi deleted our node */
    ZKL_RECORD_REFUSED   /* the record is not ours to read or write (*rc) */
};

/* Makes c's tracking state (l->tracks); false: no memory. */
bool zklock__track_new(zkl_contender_t *c);
/* The record's timers (the lock-delay's end, the next refresh, the end of
 * the lease the record promises), for their doors (doors.c): the fact
 * recorded, the contender marked. */
void zklock__track_delay_timer(struct zkl_timer *timer);
void zklock__track_refresh_timer(struct zkl_timer *timer);
void zklock__track_lease_timer(struct zkl_timer *timer);
void zklock__track_free(zkl_contender_t *c);
/* Does c hold for its owner (its "held" is written)? Always for a
 * contender that does not track. */
bool zklock__track_granted(const zkl_contender_t *c);
/* c holds for its owner now (its "held" is written): its end writes
 * "released". */
void zklock__track_hold_begins(zkl_contender_t *c);
/* c's node was created: the server's clock then (its ctime). */
void zklock__track_created(zkl_contender_t *c, const struct Stat *st);
/* c's node goes without a word while c never held (its session ended,
 * someone deleted it): its number is kept for c's next judge. */
void zklock__track_node_lost(zkl_contender_t *c);
/* c's turn: reads the record, judges, waits the lock-delay, writes "held". */
enum zkl_grant_step zklock__track_grant(zkl_contender_t *c, int *rc);
/* c holds: refreshes the record when due. */
void zklock__track_held(zkl_contender_t *c);
/* Has c's hold outlived its last refresh of the record by a lease (the
 * bound its record promises the next holder)? */
bool zklock__track_lease_over(zkl_contender_t *c);
/* *until, or the end of that lease if it comes first (zklock_valid_until). */
void zklock__track_until(const zkl_contender_t *c, struct timespec *until);
/* Before a call reads a hold: marks the holders whose record's lease passed
 * (a host that slept: the timer has not run yet); the caller drives. */
void zklock__track_leases_check(zklock_session_t *s);
/* c leaves with its node: sends what removes it with the record's word
 * ("released", or "never held"); false: a plain delete will do. */
bool zklock__track_end(zkl_contender_t *c);
/* An answer to one of the record's requests. */
enum zkl_record_news zklock__track_answer(zkl_contender_t *c, const struct zkl_answer *a, int *rc);
/* <lock path>/zklock.previous, malloc'ed (NULL: no memory). */
char *zklock__record_path(const zklock_t *l);

#endif
