/* soak_client.c: one process of the chaos soak (test/soak.py drives it)
 * and of the partition rig (test/partition/rig.py).
 *
 *   soak_client [-r RW] [-H MIN:MAX [-l PCT:MIN:MAX]] [-g GAP] [-t TIMEOUT] [-L LEASE]
 *               HOSTS ROOT LOCKS THREADS SESSION_MS STORAGE_SOCKET LOG ID
 *       Each thread has its own session and, until SIGTERM, takes a random
 *       lock, writes to the "storage" with its fencing token (the storage
 *       refuses stale tokens) until it is told the hold is lost or its time
 *       is up, and releases. A write also tells the storage whether it went
 *       out past zklock_valid_until() (and by how much): the checkers judge
 *       such a write by whether the storage accepted it. Locks 0..LOCKS-RW-1 are mutexes /ROOT/lock-<k>;
 *       the last RW (-r, default 0) are read/write locks /ROOT/rw-<k>, taken
 *       on either side at random: a reader sends reads ("R"), which the
 *       storage refuses only behind a newer writer. By default a hold makes
 *       three writes 5-20 ms apart; -H holds MIN..MAX ms, writing every GAP
 *       ms (-g, default 50), and -l PCT:MIN:MAX makes PCT % of the holds
 *       last MIN..MAX ms instead (long holds, for faults to land in).
 *       -t: the acquire timeout (default 3000 ms). -L session: the sessions
 *       keep no lease (ZKLOCK_LEASE_SESSION); -L strict, the default.
 *       Every event goes to LOG with a CLOCK_MONOTONIC timestamp.
 *   soak_client --ephemerals HOSTS ROOT
 *       Prints how many ephemeral nodes are left under ROOT; exit 1 and
 *       nothing printed if some level could not be read.
 *   soak_client --make-paths HOSTS ROOT LOCKS
 *       Creates /ROOT/lock-<k> as persistent nodes.
 *
 * Log lines: <ns> <client> <thread> <EVENT> <lock> <token> <hold> <detail>
 *   ACQ       acquire returned OK (the time it returned; detail: X or S for
 *             exclusive or shared, the session id in hex and how long the
 *             hold is meant to last in ms, ":" between them)
 *   WRITE     detail A (accepted) / R (refused)
 *   LAPSED    about to write with zklock_valid_until() passed and no on_lost
 *             (the first such write of the hold; detail: as the storage's
 *             LATE field below)
 *
 * Storage messages: <W|R> <lock> <token> <client>-<thread> <hold> <LATE>
 *   LATE      "-": the lease runs; "E": zklock has ended the hold and on_lost
 *             is on its way; else how many microseconds past
 *             zklock_valid_until() the write goes out
 *   LOST      on_lost (detail: reason)   REL    release returned (detail: rc name)
 *   RELSTART  about to release
 *   CONN      on_state (token: the session id; detail: STATE@server)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <zklock.h>

static const char *hosts, *root, *storage_path;
static int nlocks, nrw, session_ms, log_fd;
static int hold_min_ms = -1, hold_max_ms = -1, gap_ms = 50, acquire_ms = 3000;
static int long_pct, long_min_ms, long_max_ms;
static int lease = ZKLOCK_LEASE_STRICT;
static const char *client_id;
static volatile sig_atomic_t stopping;

struct lockset {
    zklock_t **mutex;         /* [k] for k < nlocks - nrw */
    zklock_rwlock_t **rw;     /* [k] for the others */
};

struct worker {
    int index;
    pthread_t t;
    pthread_mutex_t mu; /* guards the hold seen by on_lost */
    pthread_cond_t told;
    int lock, hold, lost_hold;
    int64_t token;
    bool holding, shared;
    int64_t early_lost_ns; /* on_lost before the hold was recorded */
    int early_reason;
    zklock_session_t *s;
    struct lockset *ls; /* while the worker runs: its locks, for stop_workers() */
    bool done;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void log_event_at(int64_t ns, const struct worker *w, const char *event, int lock,
                         int64_t token, int hold, const char *detail)
{
    char line[256];
    int n = snprintf(line, sizeof line, "%lld %s %d %s %d %lld %d %s\n", (long long)ns,
                     client_id, w->index, event, lock, (long long)token, hold, detail);
    /* one write(2) per line on an O_APPEND file: lines never interleave */
    if (write(log_fd, line, (size_t)n) < 0)
        perror("log");
}

static void log_event(const struct worker *w, const char *event, int lock, int64_t token,
                      int hold, const char *detail)
{
    log_event_at(now_ns(), w, event, lock, token, hold, detail);
}

static void on_lost(zklock_t *l, int reason, void *ctx)
{
    struct worker *w = ctx;
    int64_t ns = now_ns();

    pthread_mutex_lock(&w->mu);
    if (w->holding || w->lost_hold != w->hold) {
        log_event_at(ns, w, "LOST", w->lock, w->token, w->hold, zklock_err_name(reason));
        w->lost_hold = w->hold;
    } else {
        /* the acquire that this hold came from has returned, and its
         * thread has not recorded the hold yet: it logs this after ACQ */
        w->early_lost_ns = ns;
        w->early_reason = reason;
    }
    pthread_cond_broadcast(&w->told);
    pthread_mutex_unlock(&w->mu);
}

/* The session's state and the server it talks to, for the rig's faults
 * aimed at one link. */
static void on_state(zklock_session_t *s, int state, void *ctx)
{
    struct worker *w = ctx;
    zhandle_t *zh = zklock_session_zhandle(s);
    const char *server = zh ? zoo_get_current_server(zh) : NULL;
    char detail[128];

    snprintf(detail, sizeof detail, "%s@%s", zklock_state_name(state), server ? server : "-");
    log_event(w, "CONN", -1, zklock_session_id(s), w->hold, detail);
}

static int storage_connect(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

    snprintf(a.sun_path, sizeof a.sun_path, "%s", storage_path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* One write (a read for a reader) to the storage: true if accepted. late:
 * the LATE field (see the top). */
static bool storage_write(int fd, const struct worker *w, const char *late)
{
    char msg[160], reply[8] = "";
    int n = snprintf(msg, sizeof msg, "%c %d %lld %s-%d %d %s", w->shared ? 'R' : 'W', w->lock,
                     (long long)w->token, client_id, w->index, w->hold, late);
    if (send(fd, msg, (size_t)n, 0) != n || recv(fd, reply, sizeof reply, 0) <= 0)
        return false;
    return reply[0] == 'A';
}

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stopping)
        ;
}

/* The lock handle a hold of lock k goes through, and whether it is shared. */
static zklock_t *pick(const struct lockset *ls, int k, bool *shared)
{
    *shared = false;
    if (k < nlocks - nrw)
        return ls->mutex[k];
    *shared = rand() % 2 == 0;
    return *shared ? zklock_rwlock_read(ls->rw[k]) : zklock_rwlock_write(ls->rw[k]);
}

static bool told_lost(struct worker *w)
{
    pthread_mutex_lock(&w->mu);
    bool lost = w->lost_hold == w->hold;
    pthread_mutex_unlock(&w->mu);
    return lost;
}

/* Before a write: has the lease run out while on_lost has not come? Puts
 * the LATE field in late (see the top) and logs the hold's first LAPSED. */
static void check_lease(struct worker *w, zklock_t *lock, bool *lapsed, char *late, size_t len)
{
    struct timespec until, now;
    int64_t past;

    snprintf(late, len, "-");
    if (told_lost(w))
        return;
    clock_gettime(ZKLOCK_CLOCK, &now); /* valid_until's clock, not the log's */
    if (zklock_valid_until(lock, &until) != ZKLOCK_OK) {
        snprintf(late, len, "E"); /* ended, and on_lost not delivered yet */
    } else {
        past = ((int64_t)now.tv_sec - until.tv_sec) * 1000000000 + (now.tv_nsec - until.tv_nsec);
        if (past < 0)
            return;
        snprintf(late, len, "%lld", (long long)(past / 1000));
    }
    if (!*lapsed)
        log_event(w, "LAPSED", w->lock, w->token, w->hold, late);
    *lapsed = true;
}

/* How long the next hold lasts (-H, -l), in ms; 0: three quick writes. */
static int plan_hold(void)
{
    if (hold_max_ms < 0)
        return 0;
    if (long_pct > 0 && rand() % 100 < long_pct)
        return long_min_ms + rand() % (long_max_ms - long_min_ms + 1);
    return hold_min_ms + rand() % (hold_max_ms - hold_min_ms + 1);
}

/* The writes of one hold: three quick ones by default (a pause can land in
 * the middle), or every gap_ms for plan_ms. No write once on_lost said the
 * hold is over. */
static void write_while_held(struct worker *w, zklock_t *lock, int fd, int64_t acq_ns, int plan_ms)
{
    bool timed = hold_max_ms >= 0, lapsed = false;
    int64_t end = acq_ns + (int64_t)plan_ms * 1000000;

    for (int i = 0; timed ? now_ns() < end && !stopping : i < 3; i++) {
        if (told_lost(w))
            break;
        char late[32];
        check_lease(w, lock, &lapsed, late, sizeof late);
        bool ok = storage_write(fd, w, late);
        log_event(w, "WRITE", w->lock, w->token, w->hold, ok ? "A" : "R");
        if (timed)
            pause_ms(gap_ms);
        else if (i < 2)
            pause_ms(5 + rand() % 15);
    }
}

static void hold_once(struct worker *w, const struct lockset *ls, int k, int fd)
{
    int64_t token = 0, acq_ns;
    bool shared;
    zklock_t *lock = pick(ls, k, &shared);
    int rc = zklock_acquire(lock, acquire_ms), plan_ms;
    char detail[64];

    acq_ns = now_ns(); /* the holder believes it holds from here on */
    if (rc != ZKLOCK_OK)
        return; /* busy lock or a session in trouble: try again */
    zklock_fence(lock, &token);
    plan_ms = plan_hold();
    snprintf(detail, sizeof detail, "%c:%llx:%d", shared ? 'S' : 'X',
             (unsigned long long)zklock_session_id(w->s), plan_ms);
    pthread_mutex_lock(&w->mu);
    w->lock = k;
    w->token = token;
    w->shared = shared;
    w->hold++;
    w->holding = true;
    log_event_at(acq_ns, w, "ACQ", k, token, w->hold, detail);
    if (w->early_lost_ns) {
        log_event_at(w->early_lost_ns, w, "LOST", k, token, w->hold,
                     zklock_err_name(w->early_reason));
        w->lost_hold = w->hold;
        w->early_lost_ns = 0;
    }
    pthread_mutex_unlock(&w->mu);
    write_while_held(w, lock, fd, acq_ns, plan_ms);
    log_event(w, "RELSTART", k, token, w->hold, "-");
    rc = zklock_release(lock);
    pthread_mutex_lock(&w->mu);
    w->holding = false;
    log_event(w, "REL", k, token, w->hold, zklock_err_name(rc));
    if (rc == ZKLOCK_ELOST) {
        /* on_lost for this hold may still be on its way: let it be logged
         * against this hold before starting the next one */
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += 3;
        while (w->lost_hold != w->hold &&
               pthread_cond_timedwait(&w->told, &w->mu, &deadline) == 0)
            ;
    }
    pthread_mutex_unlock(&w->mu);
}

/* "STATS -1 <acquisitions> <of which without a listing> -": how often the
 * fast path was taken under the faults (a client killed never says). */
static void log_stats(struct worker *w, zklock_session_t *s)
{
    zklock_stats_t st;
    char fast[32];

    zklock_session_stats(s, &st, sizeof st);
    snprintf(fast, sizeof fast, "%llu", (unsigned long long)st.fast_acquired);
    log_event(w, "STATS", -1, (int64_t)st.acquired, 0, fast);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    zklock_session_opts_t so = {.timeout_ms = session_ms, .on_state = on_state, .ctx = w,
                                .lease = lease};
    zklock_opts_t lo = {.on_lost = on_lost, .ctx = w};
    zklock_session_t *s = NULL;
    struct lockset ls = {calloc((size_t)nlocks, sizeof *ls.mutex),
                         calloc((size_t)nlocks, sizeof *ls.rw)};
    int fd = storage_connect();

    if (fd < 0 || !ls.mutex || !ls.rw || zklock_session_open(&s, hosts, &so) != ZKLOCK_OK) {
        fprintf(stderr, "soak_client %s/%d: cannot start\n", client_id, w->index);
        exit(1);
    }
    w->s = s;
    for (int k = 0; k < nlocks; k++) {
        char path[256];
        if (k < nlocks - nrw) {
            snprintf(path, sizeof path, "%s/lock-%d", root, k);
            zklock_mutex_new(&ls.mutex[k], s, path, &lo);
        } else {
            snprintf(path, sizeof path, "%s/rw-%d", root, k);
            zklock_rwlock_new(&ls.rw[k], s, path, &lo);
        }
    }
    pthread_mutex_lock(&w->mu);
    w->ls = &ls;
    pthread_mutex_unlock(&w->mu);
    while (!stopping) {
        int k = rand() % nlocks;
        hold_once(w, &ls, k, fd);
    }
    pthread_mutex_lock(&w->mu);
    w->ls = NULL;
    pthread_mutex_unlock(&w->mu);
    log_stats(w, s);
    for (int k = 0; k < nlocks; k++) {
        zklock_free(ls.mutex[k]);
        zklock_rwlock_free(ls.rw[k]);
    }
    zklock_session_close(s);
    free(ls.mutex);
    free(ls.rw);
    close(fd);
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void on_term(int sig)
{
    stopping = 1;
}

/* After SIGTERM: a worker waiting in zklock_acquire would see `stopping`
 * only when its timeout is up; cancel its waits until it has stopped. */
static void stop_workers(struct worker *w, int threads)
{
    for (;;) {
        int running = 0;
        for (int i = 0; i < threads; i++) {
            pthread_mutex_lock(&w[i].mu);
            running += !w[i].done;
            for (int k = 0; w[i].ls && k < nlocks; k++) {
                if (k < nlocks - nrw) {
                    zklock_cancel(w[i].ls->mutex[k]);
                } else {
                    zklock_cancel(zklock_rwlock_read(w[i].ls->rw[k]));
                    zklock_cancel(zklock_rwlock_write(w[i].ls->rw[k]));
                }
            }
            pthread_mutex_unlock(&w[i].mu);
        }
        if (running == 0)
            return;
        pause_ms(50);
    }
}

/* Ephemeral nodes at and under path, or -1 if some level could not be read
 * (a lost connection is no answer: "none" only from the server's word). */
static int count_ephemerals(zhandle_t *zh, const char *path)
{
    struct Stat st;
    struct String_vector kids;
    int total = 0, rc = zoo_get_children2(zh, path, 0, &kids, &st);

    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK) {
        fprintf(stderr, "soak_client: cannot read %s: %s\n", path, zerror(rc));
        return -1;
    }
    if (st.ephemeralOwner != 0)
        total = 1; /* an ephemeral node has no children */
    for (int i = 0; total >= 0 && st.ephemeralOwner == 0 && i < kids.count; i++) {
        char child[1024];
        int n;
        snprintf(child, sizeof child, "%s/%s", path, kids.data[i]);
        n = count_ephemerals(zh, child);
        total = n < 0 ? -1 : total + n;
    }
    deallocate_String_vector(&kids);
    return total;
}

/* Prints the count; exit 1 (and nothing on stdout) if it could not be made. */
static int ephemerals_main(const char *h, const char *r)
{
    zklock_session_t *s;
    int n;

    if (zklock_session_open(&s, h, NULL) != ZKLOCK_OK)
        return 1;
    n = count_ephemerals(zklock_session_zhandle(s), r);
    if (n >= 0)
        printf("%d\n", n);
    zklock_session_close(s);
    return n >= 0 ? 0 : 1;
}

/* The lock paths as plain persistent nodes: never reaped when empty, so
 * their sequence numbers only grow (the fast path tolerates one foreign
 * write per 64 creations of the path, so a path that is never reaped
 * lets it fire next to the other clients' writes). */
static int make_paths_main(const char *h, const char *r, int n)
{
    zklock_session_t *s;
    zhandle_t *zh;
    char path[256];
    int rc = 0;

    if (zklock_session_open(&s, h, NULL) != ZKLOCK_OK)
        return 1;
    zh = zklock_session_zhandle(s);
    zoo_create(zh, r, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    for (int k = 0; k < n; k++) {
        snprintf(path, sizeof path, "%s/lock-%d", r, k);
        int z = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
        if (z != ZOK && z != ZNODEEXISTS)
            rc = 1;
    }
    zklock_session_close(s);
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: soak_client [-r RW] [-H MIN:MAX [-l PCT:MIN:MAX]] [-g GAP] [-t TIMEOUT]\n"
                    "                   [-L strict|session]\n"
                    "                   HOSTS ROOT LOCKS THREADS SESSION_MS STORAGE LOG ID\n"
                    "       soak_client --ephemerals HOSTS ROOT\n"
                    "       soak_client --make-paths HOSTS ROOT LOCKS\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct worker *w;
    int threads, opt;

    zoo_set_debug_level(0);
    if (argc == 4 && strcmp(argv[1], "--ephemerals") == 0)
        return ephemerals_main(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "--make-paths") == 0)
        return make_paths_main(argv[2], argv[3], atoi(argv[4]));
    while ((opt = getopt(argc, argv, "r:H:l:g:t:L:")) != -1) {
        switch (opt) {
        case 'r': nrw = atoi(optarg); break;
        case 'H':
            if (sscanf(optarg, "%d:%d", &hold_min_ms, &hold_max_ms) != 2 || hold_min_ms < 0 ||
                hold_max_ms < hold_min_ms)
                return usage();
            break;
        case 'l':
            if (sscanf(optarg, "%d:%d:%d", &long_pct, &long_min_ms, &long_max_ms) != 3 ||
                long_pct < 0 || long_pct > 100 || long_min_ms < 0 || long_max_ms < long_min_ms)
                return usage();
            break;
        case 'g': gap_ms = atoi(optarg); break;
        case 't': acquire_ms = atoi(optarg); break;
        case 'L':
            if (strcmp(optarg, "strict") != 0 && strcmp(optarg, "session") != 0)
                return usage();
            lease = strcmp(optarg, "session") == 0 ? ZKLOCK_LEASE_SESSION : ZKLOCK_LEASE_STRICT;
            break;
        default: return usage();
        }
    }
    if (argc - optind != 8)
        return usage();
    argv += optind - 1;
    hosts = argv[1];
    root = argv[2];
    nlocks = atoi(argv[3]);
    threads = atoi(argv[4]);
    session_ms = atoi(argv[5]);
    storage_path = argv[6];
    client_id = argv[8];
    log_fd = open(argv[7], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0 || nlocks <= 0 || threads <= 0 || nrw < 0 || nrw > nlocks || gap_ms < 0) {
        perror(argv[7]);
        return 2;
    }
    srand((unsigned)getpid());
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    w = calloc((size_t)threads, sizeof *w);
    for (int i = 0; i < threads; i++) {
        w[i].index = i;
        pthread_mutex_init(&w[i].mu, NULL);
        {
            pthread_condattr_t a;
            pthread_condattr_init(&a);
            pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
            pthread_cond_init(&w[i].told, &a);
            pthread_condattr_destroy(&a);
        }
        pthread_create(&w[i].t, NULL, worker_main, &w[i]);
    }
    while (!stopping)
        pause_ms(100);
    stop_workers(w, threads);
    for (int i = 0; i < threads; i++)
        pthread_join(w[i].t, NULL);
    free(w);
    return 0;
}
