/*
 * zs.h: a simulated ZooKeeper ensemble and the client library that talks to
 * it, in the simulator's one thread, on virtual time (events.h), from one
 * seed (rng.h).
 *
 * The server side (zs_server.c, on the trees of zs_tree.c): three servers,
 * one leader. Every write is validated against the latest committed state
 * and committed at once with the next zxid (failed writes too: ZooKeeper
 * commits them as error transactions); each server applies the log in order
 * at its own pace, so a follower's reads may lag the leader (never behind
 * what its client has seen: a server that is behind refuses the connection,
 * and a session's own write is applied on its server before it is
 * answered). A server answers one connection's requests in order; a watch
 * fires when its server applies the change, into the same stream as the
 * answers, so a client sees the event before any data that follows it.
 * Sessions expire at the leader a timeout after the last touch it knows of
 * (rounded up to the next tick, as ZooKeeper's expiry queue does), and their
 * end deletes their ephemeral nodes; an empty container that had a child is
 * reaped; an operator may delete any node, change what a path allows (the
 * ACL refusals: ZNOAUTH) or close a session; a server may answer
 * ZTHROTTLEDOP, lag, be cut off from the quorum (reads answered, writes
 * stalled, its clients dropped after syncLimit), and the leader may change
 * (every session's timeout restarts).
 *
 * The client side (zs_client.c): libzookeeper_mt's asynchronous API on a
 * fake zhandle_t (zs_a*, with its signatures), as the 3.8 C client behaves:
 * a request's completion is registered when it is made and fails with
 * ZCONNECTIONLOSS (or ZOPERATIONTIMEOUT, ZSESSIONEXPIRED, ZAUTHFAILED) if the
 * connection goes first; the watch of a request is registered when its answer
 * is read; the I/O thread reads answers and events off the connection, the
 * completion thread runs them in order; session events go to the global
 * watcher and to every registered watcher; watches are set again after a
 * reconnection (SetWatches, with ZooKeeper's rules for what changed
 * meanwhile); a connection is declared lost after 2/3 of the timeout without
 * a word (pings every 1/3); requests in flight when it goes may or may not
 * have been applied, and some are applied later by the old server ("limbo")
 * unless the session reconnects first.
 *
 * What it does not model: SASL, TLS, read-only servers, observers, the
 * sequence counter's end (2^31 creations), ACL identities (a refusal is a
 * property of the path, set by the operator), quotas, TTL nodes, reconfig,
 * data larger than jute.maxbuffer, and clocks that run at different rates.
 */
#ifndef SIM_ZS_H
#define SIM_ZS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <zookeeper/zookeeper.h>

#include "rng.h"
#include "events.h"

#define ZS_SERVERS 3
#define ZS_TICK_MS 200     /* tickTime */
#define ZS_SYNC_LIMIT 5    /* ticks a follower waits for a silent leader */

/* ---- the tree (zs_tree.c): pure data, no time, no randomness -------------- */

/* Copies for every part of the simulator, which has no use for a half-made
 * world: they abort when memory runs out. zs_strdup: NULL for NULL;
 * zs_dup_bytes: len bytes and a '\0' (NULL for NULL or len < 0). */
char *zs_strdup(const char *s);
char *zs_dup_bytes(const char *p, int len);

enum zs_kind { ZS_PERSISTENT, ZS_EPHEMERAL, ZS_CONTAINER };

/* What the operator forbids on a node (ACL refusals, answered ZNOAUTH). */
enum {
    ZS_DENY_READ = 1,   /* getData, getChildren, exists, check */
    ZS_DENY_WRITE = 2,  /* setData */
    ZS_DENY_CREATE = 4, /* creating a child */
    ZS_DENY_DELETE = 8  /* deleting a child */
};

struct zs_node {
    char *path;
    char *data;       /* NULL when len < 0 (no data) */
    int len;
    struct Stat st;   /* cversion as clients see it is computed on reading */
    int32_t creations;/* the internal cversion: children ever created */
    enum zs_kind kind;
    unsigned deny;
};

struct zs_tree {
    struct zs_node **v; /* sorted by path */
    size_t n, cap;
};

/* One change as the log records it (a transaction's effect). */
enum zs_opk { ZS_OP_CREATE, ZS_OP_DELETE, ZS_OP_SET };
struct zs_op {
    enum zs_opk type;
    char *path;
    char *data;
    int len;
    enum zs_kind kind;
    int64_t owner;
};

enum zs_txk {
    ZS_TX_ERROR,         /* a refused write: a zxid, no change */
    ZS_TX_CHANGE,        /* create, delete, setData or a multi: ops in order */
    ZS_TX_SESSION_OPEN,
    ZS_TX_SESSION_CLOSE  /* ops: the deletes of its ephemeral nodes */
};
struct zs_txn {
    int64_t zxid;
    int64_t time_ms;     /* the server clock, ms since the epoch */
    enum zs_txk type;
    int64_t session;
    int nops;
    struct zs_op *ops;
};

/* A watch trigger: an event of `type` (ZOO_*_EVENT) for path, to the data
 * (`child` false) or child watches of path. */
struct zs_trigger {
    int type;
    bool child;
    char *path;
};

void zs_tree_init(struct zs_tree *t);
void zs_tree_free(struct zs_tree *t);
void zs_tree_copy(struct zs_tree *dst, const struct zs_tree *src);
struct zs_node *zs_tree_get(const struct zs_tree *t, const char *path);
/* The children of path (names, sorted), malloc'ed vector the caller frees
 * with zs_strings_free. */
void zs_tree_children(const struct zs_tree *t, const char *path, struct String_vector *out);
void zs_strings_free(struct String_vector *v);
/* The node's Stat as a client reads it. */
void zs_stat_of(const struct zs_node *n, struct Stat *out);
/* Applies a transaction; the watch triggers it fires are appended to *trig
 * (may be NULL). */
void zs_tree_apply(struct zs_tree *t, const struct zs_txn *tx, struct zs_trigger **trig,
                   int *ntrig);
void zs_triggers_free(struct zs_trigger *trig, int n);
void zs_txn_free(struct zs_txn *tx);
/* Is path a valid ZooKeeper path (sequential: may end in '/')? */
bool zs_path_valid(const char *path, bool sequential);
const char *zs_parent_of(const char *path, char *buf, size_t size);

/* ---- the world ---------------------------------------------------------------- */

struct zs_conn;
struct zs_msg;

/* A simulated host with one process on it: its clocks, its network. */
struct zs_proc {
    int id;
    bool cut;                    /* cut off from every server (silent) */
    bool cut_from[ZS_SERVERS];   /* ... from some */
    sim_time_t healed_at;        /* a cut of it last healed (-1: never) */
    sim_time_t boot_offset;      /* CLOCK_BOOTTIME = true time + this */
    sim_time_t mono_offset;      /* CLOCK_MONOTONIC = true time - slept + this */
    sim_time_t slept;            /* total time the host was suspended */
    sim_time_t suspended_at;     /* while suspended, when it began; else -1 */
};

/* A session as the leader knows it. */
struct zs_session {
    int64_t id;
    int timeout_ms;
    sim_time_t touched;          /* the last touch the leader knows of */
    bool alive;
    sim_time_t ended_at;         /* when it expired or was closed */
    bool expired;                /* ended by expiry (not a close) */
    bool killed;                 /* ... by the operator (closed from outside) */
    int limbo_conn;              /* a connection whose requests may still be
                                    applied late (-1: none) */
};

struct zs_watch {
    char *path;
    bool child;
    int conn;
};

struct zs_server {
    int id;
    struct zs_tree tree;
    size_t applied;              /* log entries applied */
    bool isolated;               /* cut off from the quorum */
    bool down;                   /* crashed */
    sim_time_t isolated_at;
    bool dropped_clients;        /* ... and has since closed its connections */
    sim_time_t throttle_until;   /* answers ZTHROTTLEDOP until then */
    unsigned throttle_per_mille;
    unsigned lag_per_mille;      /* how likely a commit waits to be applied here */
    struct zs_watch *watches;
    size_t nwatches, capwatches;
    sim_time_t *applied_at;      /* when it applied each log entry */
    size_t capapplied;
};

/* Notifications to whoever runs the world (the simulator's checker). */
struct zs_observer {
    void (*committed)(const struct zs_txn *tx, void *ctx);
    void (*session_ended)(int64_t session, bool expired, void *ctx);
    /* A write refused: the first failing op's type (ZOO_*_OP), path, code. */
    void (*refused)(int type, const char *path, int rc, void *ctx);
    void *ctx;
};

struct zs_world {
    struct sim_rng rng;
    struct zs_server servers[ZS_SERVERS];
    int leader;
    bool electing;               /* a leader election is under way */
    struct zs_tree committed;    /* the state at the log's end */
    struct zs_txn *log;
    size_t nlog, caplog;
    int64_t next_zxid;
    int64_t epoch_ms;            /* the server clock at true time 0 */
    struct zs_session *sessions;
    size_t nsessions, capsessions;
    struct zs_conn **conns;
    size_t nconns, capconns;
    struct _zhandle **handles;
    size_t nhandles, caphandles;
    struct zs_proc procs[SIM_MAX_PROCS];
    int nprocs;
    int current_proc;            /* the process whose code runs now */
    sim_time_t latency_min, latency_max; /* one way, per message */
    sim_time_t reaper_every;     /* the container reaper's period (0: off) */
    struct zs_observer obs;
    FILE *log_to;                /* the simulator's event lines, or NULL */
    bool delivering;             /* a completion thread runs a completion or watcher */
    int delivering_proc;
    uint64_t stat_requests, stat_events;
};

extern struct zs_world *zs_w;

/* A new world on seed (servers, no sessions, the root node), current. */
struct zs_world *zs_world_new(uint64_t seed, int nprocs);
void zs_world_free(struct zs_world *w);
/* A line of the simulator's trace (when log_to is set). */
void zs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The clocks of a process, as its clock_gettime() reads them. */
void zs_clock(int proc, clockid_t which, struct timespec *ts);
int64_t zs_server_ms(void); /* the servers' clock (ctime, mtime) */

/* ---- faults and the operator -------------------------------------------------- */

void zs_cut(int proc, bool cut);                 /* silent, both ways */
void zs_cut_from(int proc, int server, bool cut);
void zs_stop(int proc);                          /* SIGSTOP */
void zs_resume(int proc);                        /* SIGCONT */
void zs_suspend(int proc);                       /* the host sleeps */
void zs_wake(int proc);
void zs_isolate(int server, bool isolated);      /* from the quorum */
void zs_crash(int server);
void zs_restart(int server);
void zs_elect(void);                             /* a new leader now */
void zs_throttle(int server, sim_time_t until, unsigned per_mille);
void zs_lag(int server, unsigned per_mille);
/* The operator's writes (committed at the leader; false if nothing done). */
bool zs_op_delete(const char *path);
bool zs_op_set(const char *path, const char *data, int len);
void zs_op_deny(const char *path, unsigned deny);
bool zs_op_close_session(int64_t session);
/* The reaper's pass now: empty containers that had a child are deleted. */
void zs_reap_containers(void);

/* ---- what really happened (for the checker and the tests) --------------------- */

const struct zs_session *zs_session(int64_t id);
bool zs_session_alive(int64_t id);
/* Applies every committed transaction on every server that can. */
void zs_catch_up_all(void);
/* When server applied the transaction zxid (-1: not yet). */
sim_time_t zs_applied_at(int server, int64_t zxid);

/* ---- the client library: libzookeeper_mt's API on a fake zhandle_t ------------ */

zhandle_t *zs_init(const char *host, watcher_fn fn, int recv_timeout, const clientid_t *clientid,
                   void *context, int flags);
int zs_close(zhandle_t *zh);
int zs_state(zhandle_t *zh);
int zs_recv_timeout(zhandle_t *zh);
const clientid_t *zs_client_id(zhandle_t *zh);
int zs_add_auth(zhandle_t *zh, const char *scheme, const char *cert, int certLen,
                void_completion_t completion, const void *data);
int zs_acreate(zhandle_t *zh, const char *path, const char *value, int valuelen,
               const struct ACL_vector *acl, int mode, string_completion_t completion,
               const void *data);
int zs_acreate2(zhandle_t *zh, const char *path, const char *value, int valuelen,
                const struct ACL_vector *acl, int mode, string_stat_completion_t completion,
                const void *data);
int zs_adelete(zhandle_t *zh, const char *path, int version, void_completion_t completion,
               const void *data);
int zs_aexists(zhandle_t *zh, const char *path, int watch, stat_completion_t completion,
               const void *data);
int zs_awexists(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcherCtx,
                stat_completion_t completion, const void *data);
int zs_aget(zhandle_t *zh, const char *path, int watch, data_completion_t completion,
            const void *data);
int zs_awget(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcherCtx,
             data_completion_t completion, const void *data);
int zs_aget_children(zhandle_t *zh, const char *path, int watch,
                     strings_completion_t completion, const void *data);
int zs_aget_children2(zhandle_t *zh, const char *path, int watch,
                      strings_stat_completion_t completion, const void *data);
int zs_awget_children2(zhandle_t *zh, const char *path, watcher_fn watcher, void *watcherCtx,
                       strings_stat_completion_t completion, const void *data);
int zs_aset(zhandle_t *zh, const char *path, const char *buffer, int buflen, int version,
            stat_completion_t completion, const void *data);
int zs_amulti(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
              void_completion_t completion, const void *data);
int zs_async(zhandle_t *zh, const char *path, string_completion_t completion, const void *data);
int zs_remove_watches(zhandle_t *zh, const char *path, ZooWatcherType wtype, watcher_fn watcher,
                      void *watcherCtx, int local);
int zs_set_servers_resolution_delay(zhandle_t *zh, int delay_ms);

/* For the simulator: the process a handle belongs to, its id, its
 * connection's server (-1 when not connected), and when its global watcher
 * was last told the connection went (-1: it is connected, or never was). */
int zs_handle_proc(const zhandle_t *zh);
int zs_handle_id(const zhandle_t *zh);
int zs_handle_server(const zhandle_t *zh);
bool zs_handle_quiet(const zhandle_t *zh); /* nothing in flight, nothing queued */
/* The handle whose session is `session` (the last one made for it), or NULL. */
zhandle_t *zs_handle_of_session(int64_t session);
/* When its global watcher was last told the connection went (CONNECTING),
 * -1 if it is connected or was told nothing since; and whether it was told
 * the session expired. */
sim_time_t zs_handle_lost_told(const zhandle_t *zh);
bool zs_handle_expiry_told(const zhandle_t *zh);

/* ---- internals shared by zs_server.c and zs_client.c --------------------------- */

enum zs_msgk {
    ZS_M_CONNECT,    /* up: the handshake (session id, timeout, last zxid) */
    ZS_M_REQUEST,    /* up */
    ZS_M_PING,       /* up and down */
    ZS_M_SETWATCHES, /* up */
    ZS_M_AUTH,       /* up and down */
    ZS_M_CLOSE_SESSION, /* up: zookeeper_close() of a connected handle */
    ZS_M_CONNECTED,  /* down: the handshake's answer (timeout 0: expired) */
    ZS_M_RESPONSE,   /* down */
    ZS_M_EVENT,      /* down */
    ZS_M_EOF         /* down: the server closed the connection */
};

/* What a request asks (a copy: the caller's buffers may go at once). */
enum zs_reqk {
    ZS_R_CREATE, ZS_R_DELETE, ZS_R_EXISTS, ZS_R_GET, ZS_R_CHILDREN, ZS_R_SET,
    ZS_R_MULTI, ZS_R_SYNC
};
struct zs_mop { /* one op of a multi */
    int type;    /* ZOO_CREATE_OP, ZOO_DELETE_OP, ZOO_SETDATA_OP, ZOO_CHECK_OP */
    char *path;
    char *data;
    int len;
    int mode;    /* create */
    int version; /* delete, set, check */
};
struct zs_request {
    enum zs_reqk kind;
    char *path;
    char *data;
    int len;
    int mode;
    int version;
    bool watch;         /* the server sets a watch (getData/exists/children) */
    struct zs_mop *mops;
    int nmops;
};

/* What a server answers. */
struct zs_answer {
    int rc;
    char *path;                 /* create, sync */
    char *data;                 /* getData (NULL: no data) */
    int len;
    struct Stat stat;
    bool has_stat;
    struct String_vector children;
    int nresults;               /* multi: per-op codes and created paths */
    int *results;
    char **created;
    int64_t zxid;               /* the server's last applied zxid */
};

struct zs_msg {
    struct zs_msg *next;
    sim_time_t at;              /* when it reaches the other end */
    enum zs_msgk kind;
    int xid;
    struct zs_request req;      /* up */
    struct zs_answer ans;       /* down */
    int ev_type, ev_state;      /* an event */
    char *ev_path;
    int64_t session;            /* connect: asked; connected: granted */
    int timeout;
    int64_t last_zxid;
    /* setWatches */
    char **w_data, **w_exist, **w_child;
    int nw_data, nw_exist, nw_child;
};

struct zs_queue {
    struct zs_msg *head, *tail;
};

struct zs_conn {
    int id;
    int server;
    int proc;
    int handle;                 /* the client's handle id */
    int64_t session;            /* once the handshake is answered */
    bool client_open;           /* the client still reads it */
    bool server_open;           /* the server still serves it */
    bool client_closed_session; /* zookeeper_close(): its last requests go on */
    struct zs_queue up;         /* client -> server, in flight */
    struct zs_queue at_server;  /* arrived, waiting their turn */
    struct zs_queue down;       /* server -> client, in flight or unread */
    sim_time_t up_last, down_last;
};

void zs_msg_free(struct zs_msg *m);
void zs_queue_push(struct zs_queue *q, struct zs_msg *m);
struct zs_msg *zs_queue_pop(struct zs_queue *q);
void zs_queue_clear(struct zs_queue *q);
sim_time_t zs_latency(void);
/* Does the network carry messages between proc and server (a crashed
 * server's end answers nothing, but its resets still arrive)? */
bool zs_reachable(int proc, int server);

/* zs_server.c, for zs_client.c */
struct zs_conn *zs_conn_new(int proc, int server, int handle);
struct zs_conn *zs_conn_get(int id);
/* A message leaves the client (up) or the server (down). */
void zs_send_up(struct zs_conn *c, struct zs_msg *m);
void zs_send_down(struct zs_conn *c, struct zs_msg *m);
/* The client gives the connection up: what it sent and the server has not
 * served is applied now, later (limbo) or never. */
void zs_conn_client_gone(struct zs_conn *c);
/* The process's links changed (a cut healed): messages held move on. */
void zs_links_changed(int proc);

/* zs_client.c, for zs_server.c: the process's I/O thread reads what came;
 * every handle freed (the world's end). */
void zs_client_readable(struct zs_conn *c);
void zs_client_free_all(void);

#endif
