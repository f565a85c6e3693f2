/*
 * request.h: the one way the engine talks to ZooKeeper (request.c): a contender's
 * requests, whose answers its step reads; the session's fire-and-forget ones.
 */
#ifndef ZKLOCK_REQUEST_H
#define ZKLOCK_REQUEST_H

#include "contender.h"

/* What a contender's request is for: its answer is read by kind (step.c;
 * a recipe's own kinds, from ZKL_REQ_RECIPE on, by its answer hook). */
enum zkl_req {
    ZKL_REQ_PARENT,      /* create a level of the lock path */
    ZKL_REQ_TOP_PARENT,  /* ... its top level */
    ZKL_REQ_CREATE,      /* create2 our node */
    ZKL_REQ_LIST,        /* get_children2 the queue (watching it: c->queue_watch) */
    ZKL_REQ_SYNC,        /* sync, before a recovery's listing */
    ZKL_REQ_OWNER,       /* get our node: its ephemeralOwner */
    ZKL_REQ_DELETE,      /* delete our node */
    ZKL_REQ_PROBE,       /* exists the lock path: does the session live? */
    ZKL_REQ_WATCH,       /* get the node that blocks us, watching it */
    ZKL_REQ_OWN_WATCH,   /* get our node, watching it (not part of the chain) */
    ZKL_REQ_RECORD_READ, /* get the previous holder's record (previous.c) */
    ZKL_REQ_RECORD_WRITE, /* ... write "held" by us: a multi with a check of our node */
    ZKL_REQ_RECORD_REFRESH, /* ... write it again while we hold (the same multi) */
    ZKL_REQ_RECORD_END,  /* ... delete our node and write what we leave: a multi */
    ZKL_REQ_RECIPE,      /* the recipe's own, from here */
    ZKL_REQ_COUNT = ZKL_REQ_RECIPE + 2 /* (ZKL_SLOTS) */
};

/* The ZooKeeper calls a request may be. */
enum zkl_call {
    ZKL_CALL_CREATE, ZKL_CALL_CREATE2, ZKL_CALL_CHILDREN, ZKL_CALL_SYNC, ZKL_CALL_GET,
    ZKL_CALL_EXISTS, ZKL_CALL_DELETE, ZKL_CALL_MULTI
};

struct zkl_request {
    int kind;                      /* enum zkl_req */
    enum zkl_call call;
    const char *path;
    const char *data;              /* create */
    int len;
    const struct ACL_vector *acl;
    int flags;
    watcher_fn watcher;            /* children, get: with this watcher (context: c) */
    int nops;                      /* multi */
    const zoo_op_t *ops;
    zoo_op_result_t *results;
};

/* Sends r for c: counted (c->ops; c->busy for all but the own watch), the
 * generation stamped, and the completion registered that records its answer
 * in c->answer for c's step. A refusal by the client is recorded
 * (c->refused, for the step) and c marked: false. */
bool zklock__send(zkl_contender_t *c, const struct zkl_request *r);
/* Can c (and its subs, whose requests it may send) send in the current
 * generation: a ticket of it, or one free? Only a contender whose requests
 * of ZKL_TICKETS - 1 older generations are all still unanswered waits (each
 * answer steps it again). */
bool zklock__may_send(const zkl_contender_t *c);
/* The handle is closed: none of c's answers will come. */
void zklock__requests_gone(zkl_contender_t *c);
/* The session's fire-and-forget requests: counted if the client took
 * them (rc: the zoo_a* call's), and off again in their completion. */
bool zklock__detached_sent(zklock_session_t *s, int rc);
void zklock__detached_done(zklock_session_t *s);

#endif
