/*
 * sim.h: the simulator of the real engine (issue 32): lib/ and recipes/,
 * linked statically, run on one thread against the simulated ZooKeeper of
 * zs.h through the wire seam (lib/wire.h), by simulated processes whose
 * schedule comes from a seed, with the truth checked after every event.
 *
 *  sim_wire.c   the wire table: requests to zs.h, each process's clocks,
 *               waits that run the world, the session and callback threads
 *               as events of their process
 *  sim_app.c    the scenario (a schedule of actions and faults made from the
 *               seed) and the application each process runs: sessions,
 *               handles of every recipe, calls and callbacks
 *  sim_truth.c  what is checked after every event, and at the end
 *  sim_main.c   seeds, replay, the trace, the shrinker
 */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#include "zs.h"

#include <setjmp.h>

#include "zklock.h"

/* ---- the wire (sim_wire.c) ---------------------------------------------------------- */

struct zkl_wire;
extern const struct zkl_wire sim_wire;
void *sim_env_of(int proc);

/* A session opened on the simulated wire (blocks, running the world). */
int sim_session_open(int proc, zklock_session_t **out, const zklock_session_opts_t *opts);
/* The process ran library code: its session threads and callbacks are due
 * a turn. */
void sim_poke(int proc);
/* Registers / forgets a session whose turns the simulator runs. */
void sim_session_watch(zklock_session_t *s, int proc, bool poll);
void sim_session_forget(zklock_session_t *s);
/* On a thread that can block: it takes `d` (the world runs meanwhile). */
void sim_sleep(int proc, enum sim_thread th, sim_time_t d);
/* Inside a callback of proc: it is slow, holding its thread up for d (taken
 * once the batch of callbacks it runs in is over). */
void sim_callback_is_slow(int proc, sim_time_t d);
/* A new run: no session watched; a wait that never ends jumps to escape. */
void sim_wire_reset(jmp_buf *escape, uint64_t seed);

/* ---- the schedule (sim_app.c) -------------------------------------------------------- */

enum sim_act {
    A_ACQUIRE,   /* h, timeout (ms, -1 forever, 0 try-once) */
    A_RELEASE,   /* h */
    A_CANCEL,    /* h */
    A_FREE,      /* h: freed, made again later */
    A_REVOKE,    /* path index */
    A_PROCLAIM,  /* h */
    A_FOLLOW,    /* path index: start or stop following */
    A_CLOSE,     /* session: closed, opened again later */
    /* faults */
    F_CUT,       /* proc, dur */
    F_CUT_FROM,  /* proc, server, dur */
    F_STOP,      /* proc, dur */
    F_SUSPEND,   /* proc, dur */
    F_ISOLATE,   /* server, dur */
    F_CRASH,     /* server, dur */
    F_ELECT,
    F_THROTTLE,  /* server, dur */
    F_LAG,       /* server, dur */
    F_OPDEL,     /* path index: a node under it, chosen then */
    F_OPKILL,    /* proc: one of its sessions */
    F_DENY,      /* path index, dur */
    A_COUNT
};

struct sim_step {
    sim_time_t at;
    enum sim_act act;
    int proc;
    int a, b;        /* handle / session / path / server, by kind */
    int timeout;
    sim_time_t dur;
    bool keep;       /* the shrinker's choice */
};

struct sim_schedule {
    struct sim_step *v;
    int n;
};

/* What a run was given: the seed, and which steps of its schedule to keep. */
struct sim_run {
    uint64_t seed;
    const bool *keep;   /* NULL: every step */
    int nkeep;
    FILE *trace;        /* the trace (simulator lines and ZKLOCK_TRACE), or NULL */
    const char *mutant_hint;
};

/* The outcome of a run. */
struct sim_result {
    bool failed;
    char what[512];     /* the first violation */
    sim_time_t at;
    uint64_t events, digest; /* digest: sim_events_digest() */
    int steps;          /* of the schedule */
    int acquired, calls;
};

void sim_schedule_make(uint64_t seed, struct sim_schedule *out);
void sim_schedule_free(struct sim_schedule *s);
const char *sim_act_name(enum sim_act a);
int sim_run_one(const struct sim_run *run, struct sim_result *res);

/* ---- the application's model of its handles (sim_app.c, read by sim_truth.c) --------- */

enum sim_kind { K_MUTEX, K_READ, K_WRITE, K_SEM, K_MULTI, K_ELECT };

#define SIM_PATHS 7
#define SIM_MAX_HANDLES 48
#define SIM_MAX_SESSIONS 12

struct sim_session {
    int id, proc;
    zklock_session_t *s;
    bool poll;
    int lease;
    int timeout_ms;
    bool open;
    bool closing;
};

struct sim_handle {
    int id, proc, session;
    enum sim_kind kind;
    int path;                /* index into sim_paths */
    zklock_t *l;
    zklock_rwlock_t *rw;     /* K_WRITE owns the pair; K_READ borrows it */
    int partner;             /* rwlock: the other view (-1) */
    int members[3], nmembers;/* K_MULTI */
    int multi;               /* a member of that multi-lock (-1) */
    int max_leases;
    bool by_handle;          /* ZKLOCK_OWNER_HANDLE */
    int max_hold_ms;
    bool tracks;             /* track_previous (a mutex on the tracking path) */
    int lock_delay_ms;
    int wire;
    bool live, freeing;
    /* the application's calls */
    int acquire_calls, release_calls;    /* started, not told */
    sim_time_t acquire_deadline;         /* when the pending acquisition must end */
    sim_time_t acquire_started;
    int timeout;
    /* what the checker saw */
    bool believed;
    int64_t token;
    sim_time_t hold_seen;
    sim_time_t valid_until;  /* the last zklock_valid_until() answered, in true time */
    sim_time_t lost_at;
};

struct sim_path {
    const char *path;
    enum sim_kind kind;      /* what queues there: K_MUTEX (also multi members), K_WRITE
                                (rwlock), K_SEM, K_ELECT */
    int max_leases;
    int64_t last_token;      /* the last exclusive hold's token seen */
};

extern struct sim_session sim_sessions[SIM_MAX_SESSIONS];
extern int sim_nsessions;
extern struct sim_handle sim_handles[SIM_MAX_HANDLES];
extern int sim_nhandles;
extern struct sim_path sim_paths[SIM_PATHS];
extern sim_time_t sim_faults_end, sim_calls_end;

/* ---- the truth (sim_truth.c) ----------------------------------------------------------- */

void truth_reset(void);            /* a new run: after zs_world_new */
void truth_check(const struct sim_event *ev); /* after every event */
/* A violation: the run fails (the first one is kept). */
void truth_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool truth_failed(void);
const char *truth_what(void);
sim_time_t truth_when(void);
/* The process runs again: what it believes is asked at once. */
void truth_observe(int proc);
/* The application's calls, as it makes them and hears of them. */
void *truth_call_new(int h, bool acquire, int timeout);
void truth_call_refused(void *call, int rc);   /* not started: no done */
void truth_call_done(void *call, int rc);      /* its done */
void truth_call_blocking(void *call, int rc);  /* a blocking call returned */
void truth_call_is_proclaim(void *call);
int truth_calls_pending(void);
void truth_counts(int *acquired, int *calls);
void truth_lost(int h, int reason);
void truth_freed(int h);
/* The application releases h: if it still holds, that hold ended clean. */
void truth_releasing(int h);
/* A blocking acquisition of h returned ZKLOCK_OK: h holds (the caller wakes
 * as its hold is decided, in the same instant). */
void truth_returned_held(int h);
bool truth_believes(int h);
void truth_follower_told(int session, const char *path, bool leads, int64_t token);
void truth_operator_deletes(const char *path);
void truth_operator_kills(int64_t session);
/* At the end: every call told; with every handle freed, nothing of a
 * current session left; with every session closed, only what may stay. */
void truth_final_calls(void);
/* Fails naming what is still owed: calls not told, holds believed. */
void truth_owed(const char *when);
void truth_final_nodes(bool sessions_closed);
/* The ZooKeeper session handle h's zklock session uses now (0: none). */
int64_t truth_session_of(int h);

#endif
