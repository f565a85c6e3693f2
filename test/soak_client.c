/* soak_client.c: one process of the chaos soak (test/soak.py drives it).
 *
 *   soak_client HOSTS ROOT LOCKS THREADS SESSION_MS STORAGE_SOCKET LOG ID
 *       Each thread has its own session and, until SIGTERM, takes a random
 *       lock /ROOT/lock-<k>, writes to the "storage" three times with its
 *       fencing token (the storage refuses stale tokens), and releases.
 *       Every event goes to LOG with a CLOCK_MONOTONIC timestamp.
 *   soak_client --ephemerals HOSTS ROOT
 *       Prints how many ephemeral nodes are left under ROOT.
 *
 * Log lines: <ns> <client> <thread> <EVENT> <lock> <token> <hold> <detail>
 *   ACQ       acquire returned OK        WRITE  detail A (accepted) / R (refused)
 *   LOST      on_lost (detail: reason)   REL    release returned (detail: rc name)
 *   RELSTART  about to release
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
static int nlocks, session_ms, log_fd;
static const char *client_id;
static volatile sig_atomic_t stopping;

struct worker {
    int index;
    pthread_t t;
    pthread_mutex_t mu; /* guards the hold seen by on_lost */
    pthread_cond_t told;
    int lock, hold, lost_hold;
    int64_t token;
    bool holding;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void log_event(const struct worker *w, const char *event, int lock, int64_t token,
                      int hold, const char *detail)
{
    char line[256];
    int n = snprintf(line, sizeof line, "%lld %s %d %s %d %lld %d %s\n", (long long)now_ns(),
                     client_id, w->index, event, lock, (long long)token, hold, detail);
    /* one write(2) per line on an O_APPEND file: lines never interleave */
    if (write(log_fd, line, (size_t)n) < 0)
        perror("log");
}

static void on_lost(zklock_t *l, int reason, void *ctx)
{
    struct worker *w = ctx;
    pthread_mutex_lock(&w->mu);
    if (w->holding || w->lost_hold != w->hold)
        log_event(w, "LOST", w->lock, w->token, w->hold, zklock_err_name(reason));
    w->lost_hold = w->hold;
    pthread_cond_broadcast(&w->told);
    pthread_mutex_unlock(&w->mu);
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

/* One write to the storage: true if accepted. */
static bool storage_write(int fd, const struct worker *w)
{
    char msg[128], reply[8] = "";
    int n = snprintf(msg, sizeof msg, "W %d %lld %s-%d %d", w->lock, (long long)w->token,
                     client_id, w->index, w->hold);
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

static void hold_once(struct worker *w, zklock_t *lock, int k, int fd)
{
    int64_t token = 0;
    int rc = zklock_acquire(lock, 3000);

    if (rc != ZKLOCK_OK)
        return; /* busy lock or a session in trouble: try again */
    zklock_fence(lock, &token);
    pthread_mutex_lock(&w->mu);
    w->lock = k;
    w->token = token;
    w->hold++;
    w->holding = true;
    log_event(w, "ACQ", k, token, w->hold, "-");
    pthread_mutex_unlock(&w->mu);
    /* Three writes with gaps: a pause can land in the middle. */
    for (int i = 0; i < 3; i++) {
        bool ok = storage_write(fd, w);
        log_event(w, "WRITE", k, token, w->hold, ok ? "A" : "R");
        if (i < 2)
            pause_ms(5 + rand() % 15);
    }
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
    zklock_session_opts_t so = {.timeout_ms = session_ms};
    zklock_opts_t lo = {.on_lost = on_lost, .ctx = w};
    zklock_session_t *s = NULL;
    zklock_t **locks = calloc((size_t)nlocks, sizeof *locks);
    int fd = storage_connect();

    if (fd < 0 || zklock_session_open(&s, hosts, &so) != ZKLOCK_OK) {
        fprintf(stderr, "soak_client %s/%d: cannot start\n", client_id, w->index);
        exit(1);
    }
    for (int k = 0; k < nlocks; k++) {
        char path[256];
        snprintf(path, sizeof path, "%s/lock-%d", root, k);
        zklock_mutex_new(&locks[k], s, path, &lo);
    }
    while (!stopping) {
        int k = rand() % nlocks;
        hold_once(w, locks[k], k, fd);
    }
    log_stats(w, s);
    for (int k = 0; k < nlocks; k++)
        zklock_free(locks[k]);
    zklock_session_close(s);
    free(locks);
    close(fd);
    return NULL;
}

static void on_term(int sig)
{
    stopping = 1;
}

static int count_ephemerals(zhandle_t *zh, const char *path)
{
    struct Stat st;
    struct String_vector kids;
    int total = 0;

    if (zoo_exists(zh, path, 0, &st) != ZOK)
        return 0;
    if (st.ephemeralOwner != 0)
        return 1;
    if (zoo_get_children(zh, path, 0, &kids) != ZOK)
        return 0;
    for (int i = 0; i < kids.count; i++) {
        char child[1024];
        snprintf(child, sizeof child, "%s/%s", path, kids.data[i]);
        total += count_ephemerals(zh, child);
    }
    deallocate_String_vector(&kids);
    return total;
}

static int ephemerals_main(const char *h, const char *r)
{
    zklock_session_t *s;
    if (zklock_session_open(&s, h, NULL) != ZKLOCK_OK)
        return 1;
    printf("%d\n", count_ephemerals(zklock_session_zhandle(s), r));
    zklock_session_close(s);
    return 0;
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

int main(int argc, char **argv)
{
    struct worker *w;
    int threads;

    zoo_set_debug_level(0);
    if (argc == 4 && strcmp(argv[1], "--ephemerals") == 0)
        return ephemerals_main(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "--make-paths") == 0)
        return make_paths_main(argv[2], argv[3], atoi(argv[4]));
    if (argc != 9) {
        fprintf(stderr, "usage: soak_client HOSTS ROOT LOCKS THREADS SESSION_MS STORAGE LOG ID\n"
                        "       soak_client --ephemerals HOSTS ROOT\n"
                        "       soak_client --make-paths HOSTS ROOT LOCKS\n");
        return 2;
    }
    hosts = argv[1];
    root = argv[2];
    nlocks = atoi(argv[3]);
    threads = atoi(argv[4]);
    session_ms = atoi(argv[5]);
    storage_path = argv[6];
    client_id = argv[8];
    log_fd = open(argv[7], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0 || nlocks <= 0 || threads <= 0) {
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
    for (int i = 0; i < threads; i++)
        pthread_join(w[i].t, NULL);
    free(w);
    return 0;
}
