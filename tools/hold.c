/* hold.c: take a lock (or lead an election), run COMMAND while it is held,
 * stop COMMAND if the hold is lost, release it when COMMAND ends: the heart
 * of zklock and zklock-elect.
 *
 * Threads: the main thread waits for everything in one poll loop (signals
 * through a signalfd, the lock thread's answers and on_lost through pipes);
 * the lock thread acquires and later releases (a hold belongs to a thread);
 * with -v a monitor thread prints the queue while we wait. */
#include "config.h"

#include "guard.h"
#include "hold.h"
#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


/* ---- the shared options ------------------------------------------------------ */

struct hold_options hold_defaults(char mode)
{
    return (struct hold_options){.mode = mode, .timeout_s = -1, .conflict_code = 1,
                                 .connect_s = 10, .kill_after_s = 10};
}

bool hold_option(struct hold_options *o, int option, const char *arg, const char *tool)
{
    switch (option) {
    case 's': o->servers = arg; break;
    case HOLD_OPT_KAZOO: o->kazoo = true; break;
    case 't': o->timeout_s = tool_seconds("--timeout", arg); break;
    case 'E': o->conflict_code = (int)tool_integer("--conflict-exit-code", arg, 0, 255); break;
    case HOLD_OPT_SESSION: o->session_ms = (int)tool_integer("--session-timeout", arg, 1, 3600000); break;
    case HOLD_OPT_CONNECT: o->connect_s = tool_seconds("--connect-timeout", arg); break;
    case HOLD_OPT_KILL_AFTER: o->kill_after_s = tool_seconds("--kill-after", arg); break;
    case HOLD_OPT_REVOCABLE: o->revocable = true; break;
    case HOLD_OPT_ON_SUSPEND:
        if (strcmp(arg, "stop") != 0 && strcmp(arg, "continue") != 0)
            tool_die(EXIT_USAGE, "--on-suspend takes stop or continue (try '%s --help')", tool);
        o->stop_on_suspend = strcmp(arg, "stop") == 0;
        break;
    case HOLD_OPT_LEASE: o->lease = tool_lease(arg, tool); break;
    case HOLD_OPT_MAX_HOLD:
        o->max_hold_s = tool_seconds("--max-hold", arg);
        if (o->max_hold_s * 1000 < 1) /* the library counts milliseconds; 0 would mean none */
            tool_die(EXIT_USAGE, "--max-hold: '%s' is less than a millisecond (try '%s --help')",
                     arg, tool);
        break;
    case 'v': o->verbose = true; break;
    case 'q': o->quiet = true; break;
    default: return false;
    }
    return true;
}

void hold_check_options(const struct hold_options *o, const char *tool)
{
    if (o->verbose && o->quiet)
        tool_die(EXIT_USAGE, "choose -v or -q (try '%s --help')", tool);
}

void hold_check_command(const char *command, bool after_dashes, const char *tool,
                        const char *path)
{
    /* "zklock /p --and /q cmd" would run "--and": nobody names a program
     * so, and getopt stopped at the path ('+'). A "--" before COMMAND says
     * the name is meant. */
    if (!after_dashes && command[0] == '-')
        tool_die(EXIT_USAGE, "options go before %s: '%s' comes after it, where COMMAND goes "
                 "(put '--' before a COMMAND whose name starts with '-'; try '%s --help')",
                 path, command, tool);
}

/* ---- the lock thread --------------------------------------------------------------- */

struct holder {
    zklock_t *lock;
    int timeout_ms;
    int acquired_rc, released_rc;
    int64_t token;
    int prev_how;       /* --track-previous: ZKLOCK_PREV_*, 0: not asked */
    int64_t prev_token;
    int answers; /* write end: the thread reports here */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool release_now;
    pthread_t thread;
};

/* One message on a pipe to the main loop; up to PIPE_BUF, so one write. */
static void report(int fd, const void *msg, size_t len)
{
    while (write(fd, msg, len) < 0 && errno == EINTR)
        ;
}

static void *lock_thread(void *arg)
{
    struct holder *h = arg;

    h->acquired_rc = zklock_acquire(h->lock, h->timeout_ms);
    if (h->acquired_rc == ZKLOCK_OK)
        zklock_fence(h->lock, &h->token); /* the hold, and its token, are this thread's */
    if (h->acquired_rc == ZKLOCK_OK &&
        zklock_previous(h->lock, &h->prev_how, &h->prev_token) != ZKLOCK_OK)
        h->prev_how = 0; /* not a tracking lock */
    report(h->answers, "A", 1);
    if (h->acquired_rc != ZKLOCK_OK)
        return NULL;
    pthread_mutex_lock(&h->mu);
    while (!h->release_now)
        pthread_cond_wait(&h->cond, &h->mu);
    pthread_mutex_unlock(&h->mu);
    h->released_rc = zklock_release(h->lock);
    report(h->answers, "R", 1);
    return NULL;
}

static void ask_release(struct holder *h)
{
    pthread_mutex_lock(&h->mu);
    h->release_now = true;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->mu);
}

/* ---- -v: the queue while we wait ------------------------------------------------------ */

struct monitor {
    zklock_session_t *s;
    const char *path;
    zklock_t *sem; /* a semaphore's lease, or NULL */
    int stop; /* set by the main thread: __atomic accesses only */
    pthread_t thread;
};

/* "waiting for ...: place 2 of 3, ...", or NULL when there is nothing to
 * say (we hold, or our node is not there yet). The caller frees it. */
static char *describe(const zklock_queue_t *q, int64_t self)
{
    size_t ahead = 0, me = q->count;
    const zklock_node_t *holder = NULL;
    char *line = NULL, *who;

    for (size_t i = 0; i < q->count; i++) {
        if (q->nodes[i].session == self && me == q->count)
            me = i;
        if (q->nodes[i].holds && !holder)
            holder = &q->nodes[i];
    }
    if (me == q->count)
        return NULL; /* our node is not there (yet) */
    for (size_t i = 0; i < me; i++)
        ahead += !(q->nodes[me].shared && q->nodes[i].shared);
    if (!holder || holder->session == self)
        return NULL;
    who = tool_identity_text(holder->identity);
    if (asprintf(&line, "waiting for %s: place %zu of %zu, %zu ahead of us; held by %s (%s, token %lld)",
                 q->path, me + 1, q->count, ahead, who, holder->kind, (long long)holder->token) < 0)
        line = NULL;
    free(who);
    return line;
}

/* A semaphore: "waiting for a lease of ...: all 3 taken (by web-1:4121, token
 * ..., and 2 others); place 2 of 4 in line", or NULL when we hold or are not
 * queued yet. line: its acquisition lock's queue. */
static char *describe_lease(const zklock_queue_t *leases, const zklock_queue_t *line,
                            int64_t self)
{
    size_t taken = 0, me = line->count;
    const zklock_node_t *first = NULL;
    char *text = NULL, *who, place[64];

    for (size_t i = 0; i < leases->count; i++) {
        if (!leases->nodes[i].holds)
            continue;
        if (leases->nodes[i].session == self)
            return NULL; /* ours */
        first = first ? first : &leases->nodes[i];
        taken++;
    }
    for (size_t i = 0; i < line->count && me == line->count; i++)
        if (line->nodes[i].session == self)
            me = i;
    if (me < line->count)
        snprintf(place, sizeof place, "place %zu of %zu in line", me + 1, line->count);
    else if (leases->count > taken)
        snprintf(place, sizeof place, "next in line");
    else
        return NULL; /* not queued yet */
    who = tool_identity_text(first ? first->identity : "");
    if (asprintf(&text, "waiting for a lease of %s: %zu taken (%s%s, token %lld%s); %s",
                 leases->path, taken, first ? "by " : "", first ? who : "none",
                 first ? (long long)first->token : 0LL, taken > 1 ? ", and others" : "",
                 place) < 0)
        text = NULL;
    free(who);
    return text;
}

/* Says line if it differs from the last one said, which it then replaces:
 * a change elsewhere in the lock path (a node behind us that came and
 * went, a non-lock child) wakes us but changes nothing to say. */
static void say_if_new(char **last, char *line)
{
    if (!line || (*last && strcmp(line, *last) == 0)) {
        free(line);
        return;
    }
    tool_say("%s", line);
    free(*last);
    *last = line;
}

static bool stopping(struct monitor *m)
{
    return __atomic_load_n(&m->stop, __ATOMIC_ACQUIRE) != 0;
}

static void stop_monitor(struct monitor *m)
{
    __atomic_store_n(&m->stop, 1, __ATOMIC_RELEASE);
}

static void *monitor_thread(void *arg)
{
    struct monitor *m = arg;
    zklock_queue_t *q = NULL;
    char *said = NULL;

    while (!stopping(m)) {
        zklock_queue_t *leases = NULL;
        int rc = m->sem ? zklock_semaphore_read(m->sem, &leases, &q)
                        : zklock_queue_read(m->s, m->path, &q);
        if (rc == ZNOAUTH) {
            /* for good: asking again would not change the ACL */
            tool_say("cannot show the queue of %s: not allowed by its ACL (reading needs READ)",
                     m->path);
            break;
        }
        if (rc != ZKLOCK_OK) {
            struct timespec pause = {0, 200 * 1000 * 1000};
            nanosleep(&pause, NULL); /* not connected: look again shortly */
            continue;
        }
        if (stopping(m)) {
            zklock_queue_free(leases);
            break;
        }
        say_if_new(&said, leases ? describe_lease(leases, q, zklock_session_id(m->s))
                                 : describe(q, zklock_session_id(m->s)));
        zklock_queue_free(leases);
        /* Wake at least every 250 ms to notice we should stop. */
        while (!stopping(m) && zklock_queue_wait(m->s, q, 250) == ZKLOCK_ETIMEDOUT)
            ;
        zklock_queue_free(q);
        q = NULL;
    }
    zklock_queue_free(q);
    free(said);
    return NULL;
}

/* ---- the command ------------------------------------------------------------------------ */

/* The variables zklock sets: an inherited one of these names is dropped. */
static bool ours(const char *var)
{
    static const char *const names[] = {"ZKLOCK_FENCE=", "ZKLOCK_PATH=", "ZKLOCK_PREVIOUS=",
                                        "ZKLOCK_PREVIOUS_TOKEN="};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(var, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

/* COMMAND's environment: ours after the inherited ones, from index *mine on. */
static char **command_env(const char *path, const struct holder *h, size_t *mine)
{
    extern char **environ;
    size_t n = 0, k = 0;
    char **env;
    bool failed = false;

    while (environ[n])
        n++;
    env = calloc(n + 5, sizeof *env);
    if (!env)
        tool_die(EXIT_OSERR, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!ours(environ[i]))
            env[k++] = environ[i];
    *mine = k;
    failed |= asprintf(&env[k++], "ZKLOCK_FENCE=%lld", (long long)h->token) < 0;
    failed |= asprintf(&env[k++], "ZKLOCK_PATH=%s", path) < 0;
    if (h->prev_how) /* --track-previous: how the hold before ours ended */
        failed |= asprintf(&env[k++], "ZKLOCK_PREVIOUS=%s", zklock_previous_name(h->prev_how)) < 0;
    if (h->prev_how == ZKLOCK_PREV_CLEAN || h->prev_how == ZKLOCK_PREV_UNCLEAN)
        failed |= asprintf(&env[k++], "ZKLOCK_PREVIOUS_TOKEN=%lld", (long long)h->prev_token) < 0;
    if (failed)
        tool_die(EXIT_OSERR, "out of memory");
    return env;
}

/* The entries from `mine` on are the ones command_env() made. */
static void free_command_env(char **env, size_t mine)
{
    for (size_t i = mine; env[i]; i++)
        free(env[i]);
    free(env);
}

static int status_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

/* ---- the main loop ------------------------------------------------------------------------ */

struct locks {
    zklock_t *held;                     /* what the lock thread takes */
    int n;                              /* LOCKPATH and the --and paths */
    zklock_t *one[ZKLOCK_MULTI_MAX];
    zklock_rwlock_t *rw[ZKLOCK_MULTI_MAX];
};

struct run {
    struct hold_options *o;
    struct locks locks;
    zklock_session_t *s;
    struct holder h;
    struct monitor mon;
    int sigfd, answers[2], lost[2];
    int revoked[2];  /* on_revoke's pipe (--revocable) */
    bool revoke_asked; /* a request to let go came: stopping, then releasing */
    struct job job;
    int exit_code;
    bool started;    /* COMMAND runs, or ran */
    bool releasing;  /* the lock thread was asked to release */
    bool released;   /* ... and did (or found the lock lost) */
    bool lost_lock;  /* on_lost came */
    bool stopping;   /* SIGTERM went to the job (a loss, a revocation, --max-hold);
                        SIGKILL at kill_at_ms; released once the group is gone */
    bool suspended;  /* --on-suspend stop: we stopped the job for a lost connection */
    bool idle;       /* held, with no COMMAND to run (zklock-elect): until a signal */
    int states[2];   /* on_state's pipe: the session's states, for --on-suspend and -v */
    bool connected;  /* the session is connected (the last state told) */
    bool expired;    /* ... and it expired since it was opened */
    bool killed;
    bool ended_told;      /* job_ended() ran */
    bool max_hold_passed; /* --max-hold: COMMAND ran that long, and is stopped */
    int64_t kill_at_ms, started_ms;
    int64_t max_hold_at_ms; /* --max-hold: when COMMAND is stopped (0: not armed) */
    struct guard guard; /* stops the job should we die (guard.h) */
    int grace_ms;       /* the guard's SIGTERM grace while connected */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_lost(zklock_t *l, int reason, void *ctx)
{
    struct run *r = ctx;
    (void)l;
    report(r->lost[1], &reason, sizeof reason);
}

static void on_revoke(zklock_t *l, void *ctx)
{
    struct run *r = ctx;
    char one = 1;
    (void)l;
    report(r->revoked[1], &one, sizeof one);
}

static void on_state(zklock_session_t *s, int state, void *ctx)
{
    struct run *r = ctx;
    (void)s;
    report(r->states[1], &state, sizeof state);
}

static void release(struct run *r)
{
    if (!r->releasing)
        ask_release(&r->h);
    r->releasing = true;
}

/* How long the guard lets SIGTERM work should we die now, before SIGKILL:
 * --kill-after, but at most a sixth of the negotiated session timeout.
 * The session expires no sooner than a timeout after the servers last
 * heard from it. While we believe we are connected, they heard from us
 * less than two thirds of a timeout ago (the client says the connection
 * lost after that long without a reply, and pings every third of it when
 * it sends nothing else): so at least a third of a timeout passes between our
 * death and the expiry, and SIGKILL at a sixth leaves the other half for
 * it to land before another client can take the lock. Without the
 * connection, or once the lock is lost, there is no such margin: SIGKILL
 * at once. */
static int guard_grace(const struct run *r)
{
    return r->connected && !r->lost_lock ? r->grace_ms : 0;
}

static void set_grace(struct run *r, int64_t kill_after_ms, int negotiated_ms)
{
    int64_t sixth = negotiated_ms / 6;
    r->grace_ms = (int)(kill_after_ms < sixth ? kill_after_ms : sixth);
}

/* Tells the guard again what to do should we die, if the job runs. */
static void update_guard(struct run *r)
{
    if (r->guard.pgid > 0)
        guard_watch(&r->guard, r->guard.pgid, guard_grace(r));
}

static void start_job(struct run *r)
{
    size_t mine;
    char **env = command_env(r->o->path, &r->h, &mine);
    int rc = job_start(&r->job, r->o->command, env);

    free_command_env(env, mine);
    if (rc) {
        tool_say("cannot run %s: %s", r->o->command[0], strerror(rc));
        r->exit_code = rc == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
        release(r);
        return;
    }
    r->started = true;
    guard_watch(&r->guard, r->job.pgid, guard_grace(r));
}

/* -v, --track-previous: "previous holder: unclean (token 17); waited 3.0 s
 * of lock-delay", as the acquisition's turn learnt it. */
static void say_previous(const struct run *r)
{
    zklock_previous_info_t p;
    char token[48] = "", waited[64] = "";

    if (!r->o->verbose || !r->o->track_previous ||
        zklock_previous_info(r->h.lock, &p, sizeof p) != ZKLOCK_OK)
        return;
    if (p.how == ZKLOCK_PREV_CLEAN || p.how == ZKLOCK_PREV_UNCLEAN)
        snprintf(token, sizeof token, " (token %lld)", (long long)p.token);
    if (p.waited_ms > 0)
        snprintf(waited, sizeof waited, "; waited %.1f s of lock-delay", (double)p.waited_ms / 1000);
    tool_say("previous holder: %s%s%s", zklock_previous_name(p.how), token, waited);
}

/* -v: an acquisition that gave up inside its lock-delay: "lock-delay: 1.8 s
 * left after the unclean end of token 17". False if it did not. */
static bool say_delay_left(const struct run *r)
{
    zklock_previous_info_t p;

    if (!r->o->track_previous || zklock_previous_info(r->h.lock, &p, sizeof p) != ZKLOCK_OK ||
        p.left_ms <= 0)
        return false;
    if (!r->o->verbose)
        return true;
    if (p.how == ZKLOCK_PREV_UNCLEAN)
        tool_say("lock-delay: %.1f s left after the unclean end of token %lld",
                 (double)p.left_ms / 1000, (long long)p.token);
    else
        tool_say("lock-delay: %.1f s left after an end of unknown fate (a holder that keeps "
                 "no record may have held)", (double)p.left_ms / 1000);
    return true;
}

static void lock_acquired(struct run *r)
{
    stop_monitor(&r->mon);
    if (r->exit_code >= 0 || r->lost_lock) {
        release(r); /* a signal or the loss came first: COMMAND must not start */
        return;
    }
    if (r->o->max_hold_s > 0) /* COMMAND's time, as timeout(1) counts it */
        r->max_hold_at_ms = mono_ms() + (int64_t)(r->o->max_hold_s * 1000);
    if (!r->o->command) {
        /* zklock-elect without COMMAND: say so, and hold until a signal */
        if (r->o->verbose)
            tool_say("leading %s after %.2fs (token %lld)", r->o->path,
                     (double)(mono_ms() - r->started_ms) / 1000, (long long)r->h.token);
        printf("leader\n");
        fflush(stdout);
        r->idle = true;
        return;
    }
    say_previous(r);
    if (r->o->verbose)
        tool_say("acquired %s after %.2fs (token %lld); running %s", r->o->path,
                 (double)(mono_ms() - r->started_ms) / 1000, (long long)r->h.token,
                 r->o->command[0]);
    start_job(r);
}

/* -v, a semaphore: "... is locked: 3 of 3 leases taken (the oldest by
 * web-1:4121, held for 3.2s, token 4294967313)". */
static void say_leases_taken(struct run *r, const char *why)
{
    zklock_queue_t *q = NULL;
    const zklock_node_t *oldest = NULL;
    size_t taken = 0;
    char age[32];

    if (zklock_semaphore_read(r->h.lock, &q, NULL) == ZKLOCK_OK) {
        for (size_t i = 0; i < q->count; i++) {
            if (!q->nodes[i].holds)
                continue;
            taken++;
            if (!oldest || q->nodes[i].ctime_ms < oldest->ctime_ms)
                oldest = &q->nodes[i];
        }
    }
    if (oldest) {
        char *who = tool_identity_text(oldest->identity);
        tool_age(age, sizeof age, tool_wall_ms() - oldest->ctime_ms);
        tool_say("%s %s: %zu of %d leases taken (the oldest by %s, held for %s, token %lld)",
                 r->o->path, why, taken, r->o->limit, who, age, (long long)oldest->token);
        free(who);
    } else {
        tool_say("%s %s: all %d leases taken", r->o->path, why, r->o->limit);
    }
    zklock_queue_free(q);
}

/* -v: "... is locked by web-1:4121 (write, held for 3.2s, token 4294967313)",
 * naming the holder if it is still there. Silent otherwise, as flock -n is:
 * the exit status says it, and cron mails nothing. */
static void say_busy(struct run *r)
{
    const char *why = r->h.acquired_rc == ZKLOCK_EBUSY ? "is locked" : "was still locked at the timeout";
    zklock_queue_t *q = NULL;
    const zklock_node_t *holder = NULL;
    char age[32];

    if (!r->o->verbose)
        return;
    if (r->o->mode == 's') {
        say_leases_taken(r, why);
        return;
    }
    if (zklock_queue_read(r->s, r->o->path, &q) == ZKLOCK_OK)
        for (size_t i = 0; i < q->count && !holder; i++)
            if (q->nodes[i].holds)
                holder = &q->nodes[i];
    if (holder) {
        char *who = tool_identity_text(holder->identity);
        tool_age(age, sizeof age, tool_wall_ms() - holder->ctime_ms);
        tool_say("%s %s by %s (%s, held for %s, token %lld)", r->o->path, why, who, holder->kind,
                 age, (long long)holder->token);
        free(who);
    } else {
        tool_say("%s %s", r->o->path, why);
    }
    zklock_queue_free(q);
}

/* The lock thread answered: acquired (or not), or released. */
static void on_answer(struct run *r)
{
    char what;
    if (read(r->answers[0], &what, 1) != 1)
        return;
    if (what == 'R') {
        r->released = true;
        return;
    }
    if (r->h.acquired_rc == ZKLOCK_OK) {
        lock_acquired(r);
        return;
    }
    stop_monitor(&r->mon);
    r->released = true; /* nothing to release */
    switch (r->h.acquired_rc) {
    case ZKLOCK_EBUSY:
    case ZKLOCK_ETIMEDOUT:
        if (!say_delay_left(r))
            say_busy(r);
        r->exit_code = r->o->conflict_code;
        break;
    case ZKLOCK_ECANCELED:
        break; /* a signal came first; its code is set */
    default:
        r->exit_code = tool_acquire_failed(r->s, r->o->path, r->h.acquired_rc, &r->o->sec);
    }
}

/* After SIGKILL, how long what is left of the group may take to be gone
 * before the lock goes all the same: a process in uninterruptible sleep dies
 * only once it wakes, but runs none of COMMAND's code meanwhile. */
#define KILLED_GRACE_MS 1000
/* While a stopped group outlives its leader, or SIGKILL went out, how often
 * we look whether it is gone (its last processes are our children, as we
 * are their subreaper: SIGCHLD says it first, this only in case), or its
 * grace after SIGKILL is over. */
#define GROUP_POLL_MS 50

/* The job was stopped (a loss, a revocation, --max-hold): the lock goes
 * once nothing of its group is left, so that the next holder's command
 * never runs beside what is left of it (SIGKILL at kill_at_ms sees to it). */
static bool stopped_job_gone(const struct run *r)
{
    return job_empty(&r->job) || (r->killed && mono_ms() >= r->kill_at_ms + KILLED_GRACE_MS);
}

static void release_once_stopped(struct run *r)
{
    if (r->started && r->stopping && !r->releasing && stopped_job_gone(r))
        release(r);
}

/* COMMAND's leader ended (told once). */
static void job_ended(struct run *r)
{
    int code = status_code(r->job.status);

    job_untty(&r->job);
    if (r->exit_code < 0)
        r->exit_code = code;
    if (r->stopping) {
        /* what is left of the group is stopped still; then the release */
        if (r->o->verbose)
            tool_say("%s ended (%d)", r->o->command[0], code);
        release_once_stopped(r);
        return;
    }
    if (r->lost_lock) {
        if (r->o->verbose)
            tool_say("%s ended (%d)", r->o->command[0], code);
    } else {
        /* What COMMAND left running is no longer covered by the lock, as
         * zklock(1) says: the guard leaves it alone from now on. */
        guard_watch(&r->guard, 0, 0);
        if (r->o->verbose)
            tool_say("%s ended (%d); releasing %s", r->o->command[0], code, r->o->path);
    }
    release(r);
}

static void on_child(struct run *r)
{
    if (!r->started)
        return;
    if (job_reap(&r->job))
        job_suspend(&r->job); /* Ctrl-Z: we stop too, so that the shell takes over */
    if (r->job.ended && !r->ended_told) {
        r->ended_told = true;
        job_ended(r);
    }
    release_once_stopped(r);
}

static void on_signal(struct run *r)
{
    struct signalfd_siginfo si;
    int sig;

    if (read(r->sigfd, &si, sizeof si) != (ssize_t)sizeof si)
        return;
    sig = (int)si.ssi_signo;
    if (sig == SIGCHLD) {
        on_child(r);
    } else if (sig == SIGCONT) {
        job_resume(&r->job); /* fg or bg after a Ctrl-Z */
    } else if (r->started) {
        job_signal(&r->job, sig); /* pass it on, to the whole job */
    } else if (r->idle) {
        if (r->exit_code < 0)
            r->exit_code = 0; /* asked to stop leading: resign */
        release(r);
    } else if (!r->releasing && r->exit_code < 0) {
        r->exit_code = 128 + sig; /* before COMMAND runs: stop waiting for the lock */
        zklock_cancel(r->h.lock);
    }
}

/* A loss, a revocation, --max-hold: SIGTERM to the whole job now, SIGKILL
 * to what is left of it --kill-after later (kill_if_due); the lock is
 * released once the group is gone (release_once_stopped). */
static void stop_job(struct run *r)
{
    job_signal(&r->job, SIGTERM);
    job_signal(&r->job, SIGCONT); /* a stopped job must run to see it */
    r->stopping = true;
    r->kill_at_ms = mono_ms() + (int64_t)(r->o->kill_after_s * 1000);
}

static const char *loss_reason(int reason)
{
    switch (reason) {
    case ZKLOCK_LOST_EXPIRED: return "the ZooKeeper session expired";
    case ZKLOCK_LOST_DELETED: return "its lock node was deleted";
    case ZKLOCK_LOST_UNSURE:
        return "no word from ZooKeeper for nearly a session timeout: it may expire the "
               "session, and another client take the lock";
    case ZKLOCK_LOST_MAX_HOLD: return "--max-hold passed: released";
    default: return zklock_strerror(reason); /* a reason newer than this program */
    }
}

static void on_lost_lock(struct run *r)
{
    int reason;

    if (read(r->lost[0], &reason, sizeof reason) != (ssize_t)sizeof reason || r->lost_lock)
        return;
    r->lost_lock = true;
    /* The library's max_hold_ms is --max-hold's backstop (make_locks): we
     * exit as timeout(1) does. A loss and the limit at once: the first told
     * wins. */
    if (!r->max_hold_passed)
        r->exit_code = reason == ZKLOCK_LOST_MAX_HOLD ? EXIT_MAX_HOLD : EXIT_LOST;
    update_guard(r); /* the lease may be over: should we die, SIGKILL at once */
    if (!r->started || job_empty(&r->job) || r->stopping) {
        tool_say("lost %s (%s)", r->o->path, loss_reason(reason));
        if (r->idle)
            release(r); /* nothing runs: done */
        return;
    }
    tool_say("lost %s (%s); stopping %s", r->o->path, loss_reason(reason), r->o->command[0]);
    stop_job(r);
}

/* --revocable: someone asked for the lock. COMMAND's group is stopped as
 * on a loss (SIGTERM, SIGKILL after --kill-after), and the lock is released
 * once it ended: the asker gets it in turn. */
static void on_revoke_asked(struct run *r)
{
    char one;

    if (read(r->revoked[0], &one, sizeof one) != (ssize_t)sizeof one || r->revoke_asked ||
        r->lost_lock || r->releasing)
        return;
    r->revoke_asked = true;
    if (r->exit_code < 0)
        r->exit_code = EXIT_REVOKED;
    if (!r->started || job_empty(&r->job)) {
        tool_say("%s: asked to let go (revoked); releasing", r->o->path);
        if (r->idle || !r->started)
            release(r);
        return;
    }
    tool_say("%s: asked to let go (revoked); stopping %s", r->o->path, r->o->command[0]);
    stop_job(r);
}

/* --max-hold: COMMAND ran that long (or, without COMMAND, zklock-elect led
 * that long). It is stopped as on a loss while we still hold, and the lock
 * goes once its group is gone; the library's max_hold_ms, set later
 * (make_locks), is only the backstop. */
static void max_hold_if_due(struct run *r)
{
    if (!r->max_hold_at_ms || mono_ms() < r->max_hold_at_ms)
        return;
    r->max_hold_at_ms = 0;
    if (r->releasing || r->lost_lock || r->stopping)
        return; /* over, or being stopped already */
    r->max_hold_passed = true;
    r->exit_code = EXIT_MAX_HOLD;
    if (!r->started || job_empty(&r->job)) {
        tool_say("%s: --max-hold passed: releasing", r->o->path);
        release(r);
        return;
    }
    tool_say("%s: --max-hold passed: stopping %s, then releasing", r->o->path,
             r->o->command[0]);
    stop_job(r);
}

/* --on-suspend stop: while the connection is lost, the job waits (the hold
 * may be lost: if the lease runs out, on_lost stops the job for good).
 * Returns true if it said something. */
static bool suspend_job(struct run *r, int state)
{
    if (!r->o->stop_on_suspend || !r->started || r->lost_lock || job_empty(&r->job))
        return false;
    if (state == ZKLOCK_SUSPENDED && !r->suspended) {
        tool_say("connection to ZooKeeper lost: stopping %s until it is back",
                 r->o->command[0]);
        job_signal(&r->job, SIGSTOP);
        r->suspended = true;
        return true;
    }
    if (state == ZKLOCK_RECONNECTED && r->suspended) {
        tool_say("connection back, %s still holds: continuing %s", r->o->path, r->o->command[0]);
        job_signal(&r->job, SIGCONT);
        r->suspended = false;
        return true;
    }
    return false;
}

/* -v: what happens to the session, in zklock's own words (the ZooKeeper
 * client's lines say it in its own). */
static void say_state(struct run *r, int state)
{
    switch (state) {
    case ZKLOCK_SUSPENDED:
        tool_say("connection to ZooKeeper lost: reconnecting (the session lasts a session "
                 "timeout without it)");
        break;
    case ZKLOCK_RECONNECTED:
        tool_say("reconnected to ZooKeeper: the same session, its locks kept");
        break;
    case ZKLOCK_EXPIRED:
        tool_say("ZooKeeper session expired: its locks are lost");
        break;
    case ZKLOCK_CONNECTED:
        if (r->expired)
            tool_say("connected to ZooKeeper: a new session");
        break;
    }
}

static void on_session_state(struct run *r)
{
    int state;
    bool said;

    if (read(r->states[0], &state, sizeof state) != (ssize_t)sizeof state)
        return;
    r->connected = state == ZKLOCK_CONNECTED || state == ZKLOCK_RECONNECTED;
    update_guard(r);
    said = suspend_job(r, state);
    if (r->o->verbose && !said)
        say_state(r, state);
    r->expired = r->expired || state == ZKLOCK_EXPIRED;
}

/* After a loss, the whole job must be gone before we exit: SIGKILL for
 * what is left at the deadline, even if the leader has ended. */
static void kill_if_due(struct run *r)
{
    if (!r->stopping || r->killed || mono_ms() < r->kill_at_ms || job_empty(&r->job))
        return;
    tool_say("%s did not stop after SIGTERM: SIGKILL", r->o->command[0]);
    job_signal(&r->job, SIGKILL);
    r->killed = true;
}

static int64_t earliest(int64_t a, int64_t b)
{
    return a < 0 || b < a ? b : a;
}

/* Until the next deadline of ours: --max-hold, SIGKILL, a look whether a
 * stopped group is gone; -1: none. */
static int poll_timeout(const struct run *r)
{
    int64_t now = mono_ms(), at = -1;

    if (r->max_hold_at_ms)
        at = r->max_hold_at_ms;
    if (r->stopping && !r->killed)
        at = earliest(at, r->kill_at_ms);
    if (r->stopping && !r->releasing && (r->job.ended || r->killed))
        at = earliest(at, now + GROUP_POLL_MS); /* release_once_stopped */
    if (at < 0)
        return -1;
    return at <= now ? 0 : (int)(at - now);
}

static bool finished(const struct run *r)
{
    if (!r->released)
        return false;
    /* Once SIGKILLed, what is left of the job cannot hold on. */
    return !r->stopping || r->killed || job_empty(&r->job);
}

static void loop(struct run *r)
{
    while (!finished(r)) {
        struct pollfd fds[5] = {{r->sigfd, POLLIN, 0}, {r->answers[0], POLLIN, 0},
                                {r->lost[0], POLLIN, 0}, {r->states[0], POLLIN, 0},
                                {r->revoked[0], POLLIN, 0}};
        int n = poll(fds, 5, poll_timeout(r));

        if (n < 0 && errno != EINTR)
            tool_die(EXIT_OSERR, "poll: %s", strerror(errno));
        if (n > 0 && fds[0].revents)
            on_signal(r);
        if (n > 0 && fds[2].revents)
            on_lost_lock(r);
        if (n > 0 && fds[3].revents)
            on_session_state(r);
        if (n > 0 && fds[4].revents)
            on_revoke_asked(r);
        if (n > 0 && fds[1].revents)
            on_answer(r);
        max_hold_if_due(r);
        kill_if_due(r);
        release_once_stopped(r);
    }
}

/* ---- setting up ---------------------------------------------------------------------------- */

/* The lock of one path, in the mode asked for. */
static zklock_t *make_one(struct run *r, const char *path, const zklock_opts_t *lo,
                          zklock_rwlock_t **rw)
{
    zklock_t *l = NULL;
    int rc;

    *rw = NULL;
    if (r->o->mode == 'x') {
        rc = zklock_mutex_new(&l, r->s, path, lo);
    } else if (r->o->mode == 'e') {
        rc = zklock_election_new(&l, r->s, path, lo);
    } else if (r->o->mode == 's') {
        rc = zklock_semaphore_new(&l, r->s, path, r->o->limit, lo);
    } else {
        rc = zklock_rwlock_new(rw, r->s, path, lo);
        if (rc == 0)
            l = r->o->mode == 'r' ? zklock_rwlock_read(*rw) : zklock_rwlock_write(*rw);
    }
    if (rc)
        tool_die(EXIT_INTERNAL, "cannot make the lock %s: %s", path, zklock_strerror(rc));
    return l;
}

/* LOCKPATH's lock, or with --and a multi-lock of all the paths (told of a
 * loss once, as a whole). */
/* -v, at the end: how long we waited for the lock and held it, as the
 * library measured them (zklock_lock_stats); nothing for a wait that gave
 * up, a hold that never was. */
static void say_times(const struct run *r)
{
    zklock_lock_stats_t st;

    if (!r->o->verbose || zklock_lock_stats(r->h.lock, &st, sizeof st) != ZKLOCK_OK)
        return;
    if (st.wait.count > 0)
        tool_say("waited %.3fs for %s", (double)st.wait.sum_us / 1e6, r->o->path);
    if (st.hold.count > 0)
        tool_say("held %s for %.3fs%s", r->o->path, (double)st.hold.sum_us / 1e6,
                 st.lost > 0 ? " until it was lost" : "");
}

/* --max-hold's backstop, past the limit, --kill-after and the time a
 * killed group has to be gone (the library's clock runs from the moment the
 * hold is ours, a little before COMMAND's start): the library ends the hold
 * itself only should we fail to (max_hold_if_due). */
#define MAX_HOLD_BACKSTOP_MARGIN_MS (KILLED_GRACE_MS + 1000)

static int max_hold_backstop_ms(const struct hold_options *o)
{
    int64_t ms;

    if (o->max_hold_s <= 0)
        return 0;
    ms = (int64_t)(o->max_hold_s * 1000) + (int64_t)(o->kill_after_s * 1000) +
         MAX_HOLD_BACKSTOP_MARGIN_MS;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

static void make_locks(struct run *r)
{
    zklock_opts_t lo = {.on_lost = on_lost, .ctx = r,
                        .wire = r->o->kazoo ? ZKLOCK_WIRE_KAZOO : ZKLOCK_WIRE_CURATOR,
                        .max_hold_ms = max_hold_backstop_ms(r->o),
                        .on_revoke = r->o->revocable ? on_revoke : NULL,
                        .track_previous = r->o->track_previous,
                        .lock_delay_ms = r->o->lock_delay_ms};
    zklock_opts_t member = lo;
    struct locks *k = &r->locks;
    int rc;

    member.on_lost = NULL;
    member.max_hold_ms = 0; /* the multi-lock's clock counts, for all of them */
    member.on_revoke = NULL; /* a multi-lock is told of its members' requests */
    k->n = 1 + r->o->nand;
    for (int i = 0; i < k->n; i++)
        k->one[i] = make_one(r, i ? r->o->and_paths[i - 1] : r->o->path, k->n > 1 ? &member : &lo,
                             &k->rw[i]);
    k->held = k->one[0];
    if (k->n > 1 && (rc = zklock_multi_new(&k->held, k->one, (size_t)k->n, &lo)) != 0)
        tool_die(rc == ZKLOCK_EINVAL ? EXIT_USAGE : EXIT_INTERNAL, "cannot take %s and the --and paths together: %s",
                 r->o->path, rc == ZKLOCK_EINVAL ? "a path is given twice" : zklock_strerror(rc));
}

static void free_locks(struct locks *k)
{
    if (k->n > 1)
        zklock_free(k->held); /* the multi-lock first: it refers to the others */
    for (int i = 0; i < k->n; i++) {
        if (k->rw[i])
            zklock_rwlock_free(k->rw[i]);
        else
            zklock_free(k->one[i]);
    }
}

/* Fills set with the signals the main loop reads from its signalfd, and
 * blocks them in every thread. */
static void block_signals(sigset_t *set)
{
    sigset_t blocked;

    sigemptyset(set);
    sigaddset(set, SIGINT);  /* these four are passed on to COMMAND */
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGQUIT);
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGCONT); /* continues us even blocked; then we continue COMMAND */
    blocked = *set;
    /* Blocked, never read: we may then hand the terminal over from the
     * background, and write to it while COMMAND has it (stty tostop). */
    sigaddset(&blocked, SIGTTOU);
    /* before any thread exists, so that all of them inherit the mask */
    pthread_sigmask(SIG_BLOCK, &blocked, NULL);
}

/* The guard is forked now, before any thread starts, and before the
 * credentials are read (it need not hold a copy). zklock-elect without
 * COMMAND runs nothing to guard. */
static void start_guard(struct run *r, const struct hold_options *o)
{
    int err;

    r->guard = (struct guard){.pid = -1, .fd = -1};
    if (o->command && (err = guard_start(&r->guard, o->command[0])) != 0)
        tool_die(EXIT_OSERR, "cannot start the watchdog: %s", strerror(err));
}

/* The session timeout the server granted (it bounds what is asked for);
 * read once, just after the session opened: the handle changes only after
 * an expiry. */
static int negotiated_ms(zklock_session_t *s, int asked_ms)
{
    zhandle_t *zh = zklock_session_zhandle(s);
    int ms = zh ? zoo_recv_timeout(zh) : 0;

    return ms > 0 ? ms : asked_ms > 0 ? asked_ms : 10000;
}

int hold_run(struct hold_options *op)
{
    struct hold_options o = *op;
    struct run r;
    zklock_session_opts_t so = {0};
    sigset_t set;

    tool_quiet = o.quiet;
    tool_check_path(o.path);
    memset(&r, 0, sizeof r);
    start_guard(&r, &o);
    tool_security_load(&o.sec, &so); /* its usage errors before anything starts */
    tool_zk_log(o.verbose);
    r.o = &o;
    r.exit_code = -1;
    r.started_ms = mono_ms();
    job_init(&r.job);
    block_signals(&set);
    r.sigfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (r.sigfd < 0 || pipe2(r.answers, O_CLOEXEC) != 0 || pipe2(r.lost, O_CLOEXEC) != 0 ||
        pipe2(r.states, O_CLOEXEC) != 0 || pipe2(r.revoked, O_CLOEXEC) != 0)
        tool_die(EXIT_OSERR, "cannot set up: %s", strerror(errno));

    so.timeout_ms = o.session_ms;
    so.lease = o.lease;
    so.identity = o.identity;
    so.connect_timeout_ms = o.connect_s > 0 ? (int)(o.connect_s * 1000) : 1;
    so.on_state = on_state;
    so.ctx = &r;
    if (o.verbose)
        tool_say("connecting to %s", o.servers);
    r.s = tool_open(o.servers, &so, &o.sec);
    tool_security_forget(&o.sec); /* the session has its own copy */
    r.connected = true;
    set_grace(&r, (int64_t)(o.kill_after_s * 1000), negotiated_ms(r.s, o.session_ms));
    make_locks(&r);
    r.h.lock = r.locks.held;
    r.h.timeout_ms = o.timeout_s < 0 ? -1 : (int)(o.timeout_s * 1000);
    r.h.answers = r.answers[1];
    pthread_mutex_init(&r.h.mu, NULL);
    pthread_cond_init(&r.h.cond, NULL);
    if (o.verbose) {
        r.mon = (struct monitor){r.s, o.path, o.mode == 's' ? r.h.lock : NULL, 0, 0};
        pthread_create(&r.mon.thread, NULL, monitor_thread, &r.mon);
    }
    if (pthread_create(&r.h.thread, NULL, lock_thread, &r.h) != 0)
        tool_die(EXIT_OSERR, "cannot start a thread");
    loop(&r);
    pthread_join(r.h.thread, NULL);
    if (o.verbose)
        pthread_join(r.mon.thread, NULL);
    if (r.h.acquired_rc == ZKLOCK_OK && r.h.released_rc != ZKLOCK_OK && !r.lost_lock) {
        tool_say("releasing %s: %s", o.path, zklock_strerror(r.h.released_rc));
        if (r.h.released_rc == ZKLOCK_ELOST)
            r.exit_code = EXIT_LOST;
    } else if (o.verbose && r.h.acquired_rc == ZKLOCK_OK && !r.lost_lock) {
        tool_say("released %s", o.path);
    }
    say_times(&r);
    free_locks(&r.locks);
    zklock_session_close(r.s);
    guard_watch(&r.guard, 0, 0); /* the job ended, or is empty or SIGKILLed */
    guard_end(&r.guard);
    return r.exit_code < 0 ? EXIT_INTERNAL : r.exit_code;
}
