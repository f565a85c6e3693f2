/* testutil.h: what the CUnit suites share.
 *
 * Suites that need ZooKeeper run under test/zk-harness.sh, which exports
 * ZKLOCK_TEST_HOSTS; without it they skip (exit 77) and say so. */
#ifndef ZKLOCK_TESTUTIL_H
#define ZKLOCK_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <zklock.h>

/* ---- assertions that print both sides ---------------------------------------- */

#define TU_ASSERT_RC(expr, want)                                                   \
    do {                                                                           \
        int tu_got_ = (expr), tu_want_ = (want);                                   \
        char tu_msg_[256];                                                         \
        snprintf(tu_msg_, sizeof tu_msg_, "%s == %s (got %s %d)", #expr, #want,    \
                 zklock_err_name(tu_got_), tu_got_);                               \
        CU_assertImplementation(tu_got_ == tu_want_, __LINE__, tu_msg_, __FILE__,  \
                                "", CU_FALSE);                                     \
    } while (0)

#define TU_ASSERT_INT(a, op, b)                                                    \
    do {                                                                           \
        long long tu_a_ = (long long)(a), tu_b_ = (long long)(b);                  \
        char tu_msg_[256];                                                         \
        snprintf(tu_msg_, sizeof tu_msg_, "%s %s %s (%lld vs %lld)", #a, #op, #b,  \
                 tu_a_, tu_b_);                                                    \
        CU_assertImplementation(tu_a_ op tu_b_, __LINE__, tu_msg_, __FILE__, "",   \
                                CU_FALSE);                                         \
    } while (0)

/* Fatal variant: a test that cannot go on stops here. */
#define TU_REQUIRE_RC(expr, want)                                                  \
    do {                                                                           \
        int tu_got_ = (expr), tu_want_ = (want);                                   \
        char tu_msg_[256];                                                         \
        snprintf(tu_msg_, sizeof tu_msg_, "%s == %s (got %s %d)", #expr, #want,    \
                 zklock_err_name(tu_got_), tu_got_);                               \
        CU_assertImplementation(tu_got_ == tu_want_, __LINE__, tu_msg_, __FILE__,  \
                                "", CU_TRUE);                                      \
    } while (0)

/* ---- running --------------------------------------------------------------------- */

typedef struct {
    const char *name;
    void (*fn)(void);
} tu_test_t;

typedef struct {
    const char *name;
    const tu_test_t *tests; /* ends with {NULL, NULL} */
} tu_suite_t;

/* Runs the suites (ZKLOCK_TEST_ONLY=substring picks tests by name; naming
 * none is a failure); each test runs under a watchdog. Exit status: 0 all
 * passed, 1 failures, 77 skipped (needs_zk and no ZKLOCK_TEST_HOSTS). */
int tu_main(const tu_suite_t *suites, bool needs_zk);

/* Says that part of the running test cannot run here, and why: a line
 * "ok - SUITE/TEST # SKIP why" in the log, which scripts/test.sh counts
 * (a skip CI does not expect fails it). */
void tu_skip(const char *why);

/* ---- ZooKeeper helpers ------------------------------------------------------------ */

const char *tu_hosts(void);

/* A unique path for this test: /zklock-test/<pid>-<n>-<name>. Static buffer
 * rotation: valid until 8 more calls. */
const char *tu_path(const char *name);

/* A session with the test defaults (short timeouts); fails the test if it
 * cannot be opened. */
zklock_session_t *tu_session(void);
zklock_session_t *tu_session_opts(const zklock_session_opts_t *opts);
/* A session (tu_session's) that writes its trace (ZKLOCK_TRACE, read as
 * it opens) to a file of its own: zklock keeps that file open exactly as
 * long as the session lives, and closes it as it frees the session (once
 * zklock_session_close() has returned and its last lock handle is freed).
 * tu_session_freed says whether it is closed, and removes it: a contender
 * never freed keeps its handle, and so the session, alive. */
struct tu_traced {
    char file[64];
};
zklock_session_t *tu_session_traced(struct tu_traced *t);
bool tu_session_freed(struct tu_traced *t);

/* A plain ZooKeeper handle for looking at nodes (shared by the test);
 * tu_zk_close() closes it at the end. */
zhandle_t *tu_zk(void);
void tu_zk_close(void);

/* Makes the lock path beforehand, as a plain persistent node (the server
 * never reaps it, unlike the container zklock would make); the caller
 * deletes it. Fails the test if it exists already. */
void tu_make_lock_path(const char *path);

/* What the inspector answers when it cannot look (its connection or session
 * stayed lost for TU_WAIT_MS, or the server refused the read): the test has
 * failed already, and no caller expects this value. */
#define TU_UNREADABLE (-2)

/* Children of path (NULL-terminated, sorted; caller frees with
 * tu_free_strings), with *count their number; NULL with *count -1 if path
 * does not exist, or TU_UNREADABLE if it could not be read. */
char **tu_children(const char *path, int *count);
void tu_free_strings(char **v);

/* Number of children of path; -1 if path does not exist; TU_UNREADABLE. */
int tu_count(const char *path);
/* path has no children or is gone (the server reaps empty containers);
 * false if it could not be read. */
bool tu_no_children(const char *path);
/* How many children of path match the extended regular expression. */
int tu_children_matching(const char *path, const char *pattern);
/* The Curator protection prefix of a node name: _c_<uuid>- */
#define TU_CURATOR_PREFIX "_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-"

/* Ephemeral nodes anywhere under path (0 if path does not exist;
 * TU_UNREADABLE if some level could not be read). */
int tu_ephemerals(const char *path);

/* Data of a node into buf (NUL-terminated); returns its length or -1. */
int tu_get(const char *path, char *buf, int len);

/* A plain handle straight to the servers, connected (NULL if it cannot);
 * with id, it takes over that session (and keeps it alive). Close it with
 * zookeeper_close(). */
zhandle_t *tu_connect_as(const clientid_t *id);
/* The same to other servers than the harness's. */
zhandle_t *tu_connect_to(const char *hosts, const clientid_t *id);

/* Forces s's ZooKeeper session to expire now (another handle with the same
 * session id and password connects and closes) and waits until s has a new
 * one. */
void tu_expire(zklock_session_t *s);

/* Polls cond(arg) every few milliseconds until it holds or ms pass. */
bool tu_wait_until(bool (*cond)(void *), void *arg, int ms);

/* Monotonic milliseconds. */
int64_t tu_now_ms(void);
/* A condition for tu_wait_until: tu_now_ms() has reached *(int64_t *)at_ms
 * (a window of time a test's property is about, not a synchronisation). */
bool tu_past(void *at_ms);
/* n, or n / 10 when the suite runs under valgrind (make check-valgrind):
 * scale tests keep their shape but not their size, which memcheck would
 * stretch past any session timeout. */
int tu_scaled(int n);

/* A deliberately slow callback, for calls that must wait for one that runs:
 * tu_slow_call() counts the call, marks it started, sleeps 300 ms, marks it
 * finished (all __atomic). */
struct tu_slow {
    int started, finished, calls;
};
void tu_slow_call(struct tu_slow *sl);
/* For tu_wait_until: the slow callback (a struct tu_slow) has started. */
bool tu_slow_started(void *sl);

/* Runs argv (argv[0] is a path) and returns its pid. */
int tu_spawn(char *const argv[]);
/* Waits for pid; returns its exit status, or 128+signal. */
int tu_wait_pid(int pid);

/* For a test that found something hung: prints the stack of every thread of
 * this process (gdb's "thread apply all bt", if gdb is installed and may
 * attach; at most a minute) to stderr, into the test's log, so that a hang
 * in CI shows where each thread waits. Says so if it cannot. */
void tu_dump_threads(const char *why);

/* ---- servers -------------------------------------------------------------------- */

/* Number of servers the harness started, and the i-th one's "ip:port"
 * (1-based, into a static buffer). */
int tu_servers(void);
const char *tu_server(int i);
/* A four-letter word's answer from server i into buf; its length or -1. */
int tu_fourlw(int i, const char *word, char *buf, size_t len);
/* Which server leads (1-based), 0 if none answers as leader. */
int tu_leader(void);
/* Which server holds the connection of session id, 0 if none. */
int tu_server_of(int64_t session_id);
/* The ensemble's zxid (the leader's, or the highest a server gives: srvr);
 * false if no server told it. Every committed transaction advances it by one. */
bool tu_zxid(uint64_t *zxid);
/* Waits (TU_WAIT_MS at most) until the ensemble commits nothing for for_ms:
 * the deletions of what earlier tests left behind (empty containers, which
 * the harness's servers sweep every second) are done. */
bool tu_wait_quiet(int for_ms);
/* Runs "zk-harness.sh CMD DIR I" (kill, pause, resume, restart). */
int tu_harness(const char *cmd, int i);
/* A standalone server of the test's own, started from a snapshot seeded
 * with `seed` ("PATH=COUNT ...": each PATH's next sequential child is
 * numbered COUNT; zk-harness.sh --seed), and a plain handle to it (zh).
 * tu_seeded_start returns false, having said SKIP (tu_skip()), where javac
 * is missing; anything else that goes wrong fails the test. */
struct tu_seeded {
    char dir[256];
    char hosts[256];
    zhandle_t *zh;
};
bool tu_seeded_start(struct tu_seeded *z, const char *seed);
void tu_seeded_stop(struct tu_seeded *z);
/* A session there, with the test defaults. */
zklock_session_t *tu_seeded_session(const struct tu_seeded *z);
/* Children of path there (-1: no such path; TU_UNREADABLE and the test
 * fails if it cannot be read), and a wait for their number. */
int tu_seeded_count(const struct tu_seeded *z, const char *path);
bool tu_seeded_wait_count(const struct tu_seeded *z, const char *path, int n);

/* ---- lock-test helpers ------------------------------------------------------------ */

#define TU_WAIT_MS 20000 /* generous deadline for conditions on a loaded machine */

zklock_t *tu_mutex(zklock_session_t *s, const char *path, const zklock_opts_t *opts);

/* Waits until `path` has exactly `n` children. */
bool tu_wait_children(const char *path, int n);
/* Waits until `path` has no children or is gone: an empty container may be
 * reaped (every second, by the harness's servers) before it is seen empty. */
bool tu_wait_no_children(const char *path);
/* For tu_wait_until: true once the node (a char *) no longer exists (read:
 * not merely unreadable). */
bool tu_gone(void *path);
/* What every test ends with: no ephemeral node left under path. */
void tu_assert_clean(const char *path);

/* A thread that acquires a lock (and maybe releases it) and reports. */
struct tu_acquirer {
    zklock_t *l;
    int timeout_ms;
    bool release_after;
    int rc;
    int64_t took_ms;
    int64_t token; /* its fencing token, when it acquired */
    pthread_t t;
    int done;
};
void tu_start_acquirer(struct tu_acquirer *a, zklock_t *l, int timeout_ms, bool release_after);
bool tu_acquirer_done(void *a);
int tu_join_acquirer(struct tu_acquirer *a); /* its rc */

/* Records callbacks: pass as ctx with tu_on_lost / tu_on_state. */
struct tu_events {
    pthread_mutex_t mu;
    int lost, lost_reason;
    int states[32], nstates;
    int64_t states_at_ms[32]; /* tu_now_ms() when each state arrived */
    int64_t lost_at_ms;       /* tu_now_ms() when on_lost last came */
};
#define TU_EVENTS_INIT {PTHREAD_MUTEX_INITIALIZER, 0, 0, {0}, 0, {0}, 0}
void tu_on_lost(zklock_t *l, int reason, void *ctx);
void tu_on_state(zklock_session_t *s, int state, void *ctx);
bool tu_lost_once(void *events);
bool tu_saw_state(struct tu_events *e, int state);
/* Prints the states seen, with their times relative to t0_ms, to stderr:
 * the timeline a failed failover test needs. */
void tu_print_states(const char *who, struct tu_events *e, int64_t t0_ms);
/* Waits until on_state reported `state`. */
bool tu_wait_state(struct tu_events *e, int state);
/* Forgets the states seen so far, once the session's first CONNECTED has
 * been delivered (it is asynchronous and could otherwise arrive afterwards). */
void tu_forget_states(struct tu_events *e);

/* A detector in a MAP_SHARED temp file (its name in file) for helper
 * processes to share; tu_free_detector unmaps and removes it. */
struct detector;
struct detector *tu_new_detector(char *file, size_t len);
void tu_free_detector(struct detector *d, const char *file);

/* The child of path that session s owns (full path, caller frees), or NULL. */
char *tu_node_of(const char *path, zklock_session_t *s);

/* Issue 21's crossing: a plain mutex P on lock path b (session sp), and two
 * multi-locks on a and b, M1 (session s1) and M2 (session s2). */
struct tu_crossed {
    zklock_t *p, *a1, *b1, *a2, *b2, *m1, *m2;
    struct tu_acquirer w1, w2;
};
/* Makes them: P holds b; M1 queues (it holds a, waits for b behind P), then
 * M2, behind M1 on both. Each multi-lock's acquirer (timeout_ms) releases
 * once it holds. */
void tu_crossed_start(struct tu_crossed *x, zklock_session_t *sp, zklock_session_t *s1,
                      zklock_session_t *s2, const char *pa, const char *pb, int timeout_ms);
/* P releases: both multi-locks must hold (M2, then M1) and release; frees
 * the handles (not the sessions). */
void tu_crossed_finish(struct tu_crossed *x);

/* Maximum hold (opts.max_hold_ms, issue 25). Waits (TU_WAIT_MS at most)
 * until on_lost has come n times in all. */
bool tu_wait_lost(struct tu_events *e, int n);
/* Watches for ms that no further on_lost comes (a "nothing happens" check
 * must give the time for it to happen): returns e->lost at the end, or as
 * soon as one came. */
int tu_lost_within(struct tu_events *e, int ms);
/* A hold of `holder` (recorded in e) ends by its maximum hold while w's
 * acquisition waits: the n-th on_lost says ZKLOCK_LOST_MAX_HOLD, the
 * holder's count is 0, w gets the lock, the holder's release answers
 * ZKLOCK_ELOST. */
void tu_max_hold_hands_over(struct tu_events *e, int n, zklock_t *holder,
                            struct tu_acquirer *w);

/* One counter of zklock_session_stats, e.g. TU_STAT(s, wakeups). */
uint64_t tu_stat(zklock_session_t *s, size_t offset);
#define TU_STAT(s, field) tu_stat((s), offsetof(zklock_stats_t, field))
/* Waits until s has evaluated n listings of lock paths in all: a waiter
 * that has listed knows its predecessor, so a release after that wakes it. */
bool tu_wait_listings(zklock_session_t *s, uint64_t n);
/* Waits until zklock has handled every watch event and answer the servers
 * sent s for what happened before this call, and (unless s dispatches with
 * ZKLOCK_DISPATCH_POLL) its callback thread has run every callback that
 * queued: a negative check ("not woken", "not held", "told once") made after
 * it cannot be made before the event, or the callback, that would make it
 * fail. */
void tu_barrier(zklock_session_t *s);
/* The caller's event loop, for a ZKLOCK_DISPATCH_POLL session: polls its
 * descriptor and dispatches until cond(arg) holds or ms pass; cond(arg). */
bool tu_dispatch_until(zklock_session_t *s, bool (*cond)(void *), void *arg, int ms);
/* For tu_wait_until: the session has sent at least at_least requests in all. */
struct tu_requests {
    zklock_session_t *s;
    uint64_t at_least;
};
bool tu_sent_requests(void *requests);

#endif
