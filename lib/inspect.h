/*
 * inspect.h: the watches of those who look at a queue from outside, shared
 * by inspect.c (zklock_queue_wait, which waits for them on s->cond) and
 * follow.c (zklock_leader_follow, which is told of them), and what else
 * those two define. Everything here runs with s->mu held.
 *
 * A record is one request (a listing of the queue, an exists of the lock
 * path, a get of a node's data), usually with a watch, and the watch that
 * its answer registered. It lives in s->qwatches, so that the session's end
 * and the handle's close reach it, and is freed by whoever is last: its
 * owner (zklock__qwatch_retire), or, once retired, its answer, its event or
 * the handle's close.
 */
#ifndef ZKLOCK_INSPECT_H
#define ZKLOCK_INSPECT_H

#include "names.h"
#include "session.h"
#include "timer.h"

enum zkl_qrequest {
    ZKL_Q_CHILDREN, /* the lock path's children (and Stat), watched or not */
    ZKL_Q_EXISTS,   /* zoo_awexists of the lock path: its creation */
    ZKL_Q_GET       /* zoo_awget of a node: its data, or its deletion */
};

struct zkl_qwatch;

/* An owner told of its records' news (follow.c); s->mu held, on ZooKeeper's
 * completion thread. answered: the request's answer (children or data, as
 * asked; borrowed for the call). fired: the watch's event (ZOO_*_EVENT). */
struct zkl_qwatch_ops {
    void (*answered)(struct zkl_qwatch *w, int rc, const struct String_vector *children,
                     const char *data, int len, const struct Stat *st);
    void (*fired)(struct zkl_qwatch *w, int type);
};

struct zkl_qwatch {
    zklock_session_t *s;
    char *path;
    enum zkl_qrequest request;
    int type;        /* the watch's: ZWATCHTYPE_CHILD or ZWATCHTYPE_DATA */
    int registered;  /* 0 or 1 */
    bool in_flight;  /* the request awaits its answer */
    bool answered, fired, ended, abandoned;
    int rc;
    bool exists;
    int64_t version;
    const char *expected; /* a get for zklock_queue_wait: the data `since` showed */
    bool data_differs;    /* ... and the node's data is not that now */
    const struct zkl_qwatch_ops *ops; /* NULL: someone waits on s->cond instead */
    void *owner;
    struct zkl_qwatch *next;
};

/* A record for path (or its child), in s->qwatches; NULL if out of memory. */
struct zkl_qwatch *zklock__qwatch_new(zklock_session_t *s, const char *path, const char *child);
/* Sends w's request, watching if `watch` (a get and an exists always do);
 * the client's refusal, or ZOK. */
int zklock__qwatch_send(struct zkl_qwatch *w, enum zkl_qrequest request, bool watch);
/* The owner is done with w: its watch is taken back (locally) or left to
 * its event, its answer to come is left to its completion. */
void zklock__qwatch_retire(struct zkl_qwatch *w);
/* The watcher every record registers (ctx: the record). */
void zklock__qwatch_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
/* Writes data into the node at path (any version), without s->mu, and
 * waits for the answer: ZOK, ZNONODE, ZooKeeper's refusal, or why the
 * session could not ask (ZKLOCK_ECLOSED, ZKLOCK_EDEADLK, ZCONNECTIONLOSS,
 * ZSESSIONEXPIRED for a handle closed meanwhile). */
int zklock__node_write(zklock_session_t *s, const char *path, const char *data, int len);
/* A semaphore's leases: the first max (in queue order) hold, the rest wait. */
void zklock__queue_cap_holders(zklock_queue_t *q, int max);

/* The queue inspector and the followers, as layers above the session
 * (root.c puts them on every session). */
extern const struct zkl_layer zklock__inspect_layer, zklock__follow_layer;

#endif
