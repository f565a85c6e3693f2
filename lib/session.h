/*
 * session.h: one ZooKeeper session at a time (session.c), its servers
 * (hosts.c), its credentials and ACLs (auth.c), and what sits on it (the
 * layers and the engine's doors, handed down by the composition root,
 * root.c).
 */
#ifndef ZKLOCK_SESSION_H
#define ZKLOCK_SESSION_H

#include "common.h"
#include "recipe.h"
#include "timer.h"
#include "wire.h"

/* States of a session (s->state). */
enum zkl_sstate {
    ZKL_S_CONNECTING, /* a handle exists, not yet connected */
    ZKL_S_CONNECTED,
    ZKL_S_SUSPENDED,  /* connection lost, session maybe alive */
    ZKL_S_EXPIRED,    /* session gone; a new handle is being set up */
    ZKL_S_CLOSED
};

struct zkl_qwatch;
struct zkl_reading;
struct zkl_stale;
struct zkl_heartbeat;

/* A credential of the session (auth.c). */
struct zkl_auth {
    char *scheme;
    char *data;
    int len;
};

struct zklock_session {
    pthread_mutex_t mu;
    pthread_cond_t cond;        /* state changes, lock/user counts */
    pthread_cond_t thread_cond; /* wakes the session thread (timers, renewal) */
    pthread_t thread;
    bool thread_started, thread_stop;
    const struct zkl_wire *wire; /* ZooKeeper, the clocks, waits, threads (wire.h) */
    void *wire_env;             /* ... its first argument where it takes one */
    const struct zkl_layer *const *layers; /* what sits on it, in the order */
    const struct zkl_doors *doors;         /* ... it hears; the engine's entries */
    struct zkl_timers timers;

    zhandle_t *zh;
    zhandle_t *retired_zh;      /* an expired session's handle, to close */
    bool adopted;
    pthread_t cthread;          /* the completion thread of cthread_zh */
    zhandle_t *cthread_zh;
    zhandle_t *probe_zh;        /* an adopted handle we asked to tell it */
    bool ended_unconfirmed;     /* the session ended without a server saying
                                   so: it may live on for a while, nodes and all */
    char *hosts;
    char *identity;
    zklock_session_opts_t opts;
    struct zkl_auth *auth;      /* credentials, copied from opts */
    size_t nauth;
    unsigned auth_gen;          /* bumped for each handle they are sent on */
    bool auth_pending;          /* ... and the server's verdict is still to come */
    size_t auth_added;          /* ... how many of them the handle took so far */
    bool auth_probing;          /* ... a request after them asks for it */
    int auth_rc;                /* ... the first refusal */
    bool auth_failed;           /* a server rejected them: no retry */
    struct ACL_vector acl;      /* what the session's locks create by default */
    char *tls;                  /* zookeeper_init_ssl's "ca,cert,key[,password]" */
    int negotiated_ms;          /* session timeout the server granted */

    enum zkl_sstate state;
    unsigned gen;               /* bumped whenever the ZooKeeper session ends */
    int64_t session_id;
    struct timespec suspended_at;
    struct zkl_timer suspend_timer; /* the local expiry */
    /* The lease (lease.c): the send time of the latest request of ours the
     * leader answered; a sync keeps it fresh; past it, holds are unsure. */
    struct timespec heard_at;
    bool heard_known;
    struct zkl_heartbeat *heartbeat; /* the sync in flight, if any */
    struct zkl_timer heartbeat_timer, belief_timer;
    struct zkl_timer retry_timer;   /* resume the layers, or reopen */
    bool need_new_handle;
    bool reopen_now;                /* ... the retry timer says: now */

    bool closing;               /* zklock_session_close() has begun */
    bool close_running;         /* ... and has not returned: s is its too */
    bool free_claimed;          /* someone is freeing this struct */
    int users;                  /* threads inside a lock call */
    zkl_contender_t *contenders;
    /* The driver (driver.c): contenders marked to be stepped, in order, and
     * those stepped in this drive; `driving` while it runs (never twice). */
    zkl_contender_t *marked_head, *marked_tail, *visited;
    bool driving;
    FILE *trace;                /* ZKLOCK_TRACE: one line per transition, or NULL */
    bool trace_owned;           /* ... a file the session opened */
    unsigned contenders_made;   /* numbers contenders for the trace */
    int nlocks;                 /* live lock handles and followers */
    int ops;                    /* requests in flight, all contenders */
    int watches;                /* watches registered, all contenders */
    struct zkl_callback *cb_head, *cb_tail;
    bool poll_dispatch;         /* ZKLOCK_DISPATCH_POLL: the user runs them */
    pthread_t cb_thread;        /* else the callback thread runs them */
    bool cb_thread_started, cb_stop;
    pthread_cond_t cb_cond;     /* wakes the callback thread */
    bool cb_cond_made;
    bool cb_running;            /* cb_runner is running one of them */
    pthread_t cb_runner;
    int event_fd;               /* ... readable while some are queued */
    struct zkl_qwatch *qwatches; /* zklock_queue_wait's watches (inspect.c) */
    zklock_follow_t *follows;   /* zklock_leader_follow's followers (follow.c) */
    struct zkl_reading *readings; /* zklock_queue_read's reads in flight (inspect.c) */
    struct zkl_stale *stale;    /* nodes of given-up sessions (stale.c) */
    uint64_t rng[2];            /* node name uuids */
    zklock_stats_t stats;
};

/* ---- what sits on a session ------------------------------------------------------ */

/* What a layer above the session (the engine, the queue inspector, the
 * followers) hears of the session. Called with s->mu held; any hook may be
 * NULL. */
struct zkl_layer {
    void (*resumed)(zklock_session_t *s);           /* connected (again): go on */
    void (*suspended)(zklock_session_t *s);         /* the connection is lost */
    void (*ended)(zklock_session_t *s, int reason); /* the ZooKeeper session is over:
                                                       ZKLOCK_LOST_EXPIRED or ZKLOCK_ECLOSED */
    void (*handle_closed)(zklock_session_t *s);     /* the old handle is closed: its
                                                       watches can fire no more */
    void (*unwatch_all)(zklock_session_t *s);       /* an adopted handle: take every
                                                       watch back from it */
    void (*close_begin)(zklock_session_t *s);       /* an adopted handle is let go:
                                                       remove what is ours on the server */
    bool (*busy)(const zklock_session_t *s);        /* ... and still removing it */
    void (*freeing)(zklock_session_t *s);           /* s is being freed */
};

/* The engine's doors: every entry into the engine from below it (an answer
 * or a watch event of ZooKeeper's, a timer of the session thread) is one of
 * these functions of the engine's top (doors.c), which takes s->mu (a
 * timer has it already), calls down to record the fact, marks the
 * contenders it concerns, runs the driver once and lets s->mu go. The files
 * below the top reach them only through this table, which the composition
 * root installs on the session (s->doors): never by name. */
struct zkl_doors {
    /* Answers to a contender's requests (data: the request's slot, request.c). */
    string_completion_t answer_string;
    string_stat_completion_t answer_string_stat;
    strings_stat_completion_t answer_strings_stat;
    data_completion_t answer_data;
    stat_completion_t answer_stat;
    void_completion_t answer_void;
    /* A contender's watch events (context: the contender, watch.c): the node
     * that blocks it, its own node, its queue. */
    watcher_fn blocker_event, own_event, queue_event;
    /* The engine's timers (the session thread, s->mu held): a contender's
     * own-watch delay, deadline and maximum hold (contender.c, owner.c); the
     * lease's heartbeat and end (lease.c). */
    void (*own_watch_due)(struct zkl_timer *t, zklock_session_t *s);
    void (*deadline_passed)(struct zkl_timer *t, zklock_session_t *s);
    void (*max_hold_passed)(struct zkl_timer *t, zklock_session_t *s);
    void (*heartbeat_due)(struct zkl_timer *t, zklock_session_t *s);
    void (*lease_ends)(struct zkl_timer *t, zklock_session_t *s);
    /* A tracking contender's: the lock-delay's end, the record's next
     * refresh, the end of the lease the record promises (previous.c). */
    void (*track_delay_over)(struct zkl_timer *t, zklock_session_t *s);
    void (*track_refresh_due)(struct zkl_timer *t, zklock_session_t *s);
    void (*track_lease_over)(struct zkl_timer *t, zklock_session_t *s);
    /* The heartbeat's answer (data: the heartbeat, lease.c). */
    stat_completion_t heartbeat_answered;
};

/* What the composition root (root.c) puts on a session. */
struct zkl_above {
    const struct zkl_layer *const *layers; /* NULL-terminated */
    const struct zkl_doors *doors;
};

/* ---- session.c: one ZooKeeper session at a time ------------------------------ */

/* zklock_session_open and zklock_session_adopt, with what sits on the
 * session (the composition root's). */
int zklock__session_open_with(zklock_session_t **out, const char *hosts,
                              const zklock_session_opts_t *opts, const struct zkl_wire *wire,
                              void *env, const struct zkl_above *above);
int zklock__session_adopt_with(zklock_session_t **out, zhandle_t *zh,
                               const zklock_session_opts_t *opts, const struct zkl_above *above);

/* While the connection is down: when zklock declares the session expired
 * by itself (the local expiry, a whole session timeout after it went). */
bool zklock__local_expiry_at(const zklock_session_t *s, struct timespec *at);
/* The local expiry, if it has passed before its timer fired (the host
 * slept, the session thread has not run since): the session ends now. */
void zklock__local_expiry_check(zklock_session_t *s);
/* Resume the layers shortly (after an answer no session event follows). */
void zklock__retry_later(zklock_session_t *s);
bool zklock__session_claim_free(zklock_session_t *s);
/* zklock's own state broke a rule no caller can break (the driver entered
 * while it runs, a transition outside the table): says so on stderr (and in
 * the ZKLOCK_TRACE file) and aborts, in every build (design.md, "One
 * driver": a lock whose engine is lost may no longer promise exclusion;
 * its ephemeral nodes go with the process's session). */
void zklock__internal_error(const zklock_session_t *s, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));
void zklock__session_free(zklock_session_t *s);
/* Every request of the session (the engine's, the inspector's, the
 * session's own) is counted in flight here, and only here (s->ops), with
 * s->mu held: out once the client took it (rc ZOK; false otherwise,
 * nothing counted), in with its answer. An adopted session's close waits
 * for none to be left; a closed handle answers none (handle_closed). */
static inline bool zklock__request_sent(zklock_session_t *s, int rc)
{
    if (rc != ZOK)
        return false;
    s->ops++;
    s->stats.requests++;
    return true;
}

static inline void zklock__request_answered(zklock_session_t *s)
{
    if (--s->ops == 0)
        pthread_cond_broadcast(&s->cond);
}
/* With s->mu held: one watch fewer is registered (wakes a close that waits). */
void zklock__watch_gone(zklock_session_t *s);
/* With s->mu held, in an answer or event of s->zh: this is its completion
 * thread. */
void zklock__learn_completion_thread(zklock_session_t *s);
/* ZAUTHFAILED once a server rejected the session's credentials, else 0. */
int zklock__session_refusal(const zklock_session_t *s);

/* ---- auth.c: credentials and ACLs -------------------------------------------- */

int zklock__auth_copy(zklock_session_t *s, const zklock_auth_t *auth, size_t n);
void zklock__auth_free(zklock_session_t *s);
/* Adds the credentials to s->zh (their verdict: s->auth_pending, auth_rc),
 * without waiting: a handle between two connection attempts takes them as
 * it connects (zklock__auth_confirm). */
int zklock__auth_send(zklock_session_t *s);
/* On each connection, with s->mu held: adds what the handle did not take
 * yet, and asks for the verdict if it is still to come (a refusal ends the
 * handle: ZOO_AUTH_FAILED_STATE). */
void zklock__auth_confirm(zklock_session_t *s);
/* *dst (a deep copy, freed with zklock__acl_free) for a ZKLOCK_ACL_* kind;
 * ZKLOCK_ACL_DEFAULT copies `inherited` (NULL: open). */
int zklock__acl_choose(struct ACL_vector *dst, int kind, const struct ACL_vector *custom,
                       const struct ACL_vector *inherited);
void zklock__acl_free(struct ACL_vector *v);

#endif
