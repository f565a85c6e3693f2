/* zklock-bench: how fast zklock takes and hands over locks, how many
 * waiters a release wakes, and what a held lock costs in memory.
 *
 * Its first two workloads take the command lines the project's comparison
 * harness gives its Curator, kazoo and bare-ZooKeeper clients, and print
 * one JSON line with the same keys, so that the figures can be set side by
 * side (docs/performance.md). */
#include "config.h"

#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

const char *tool_name = "zklock-bench";

static const char usage_text[] =
    "Usage: zklock-bench [OPTION]... HOSTS WORKLOAD [ARG]...\n"
    "Measure zklock against the ZooKeeper ensemble HOSTS. Each run prints a summary and,\n"
    "last, one JSON line.\n"
    "\n"
    "Workloads:\n"
    "  uncontended N               one session takes and releases one lock N times:\n"
    "                              latency p50/p99/mean, cycles per second, client CPU per cycle\n"
    "  contended CLIENTS SECONDS   CLIENTS threads, each with its own session, on one lock for\n"
    "                              SECONDS, checking mutual exclusion: handoffs per second,\n"
    "                              fewest/most acquisitions per client, overlaps (must be 0)\n"
    "  semaphore CLIENTS LEASES SECONDS\n"
    "                              CLIENTS threads, each with its own session, on one\n"
    "                              semaphore of LEASES leases for SECONDS: acquisitions per\n"
    "                              second, the most holders seen at once (must be <= LEASES)\n"
    "  herd WAITERS                WAITERS queued on one lock, released one after another:\n"
    "                              waiters woken per release (must be 1 whatever WAITERS;\n"
    "                              with --semaphore, at most 2: the head of the line, then\n"
    "                              the next one as the head passes the acquisition lock\n"
    "                              on), watch events per release, release-to-next-holder\n"
    "                              latency\n"
    "  many LOCKS                  one session holds LOCKS distinct locks: acquisitions per\n"
    "                              second and resident memory per held lock\n"
    "  election N                  two participants of one election take turns leading, N\n"
    "                              times: the time from a resign to the next leader\n"
    "  multi LOCKS N               one session takes LOCKS locks and releases them, N times\n"
    "                              through one multi-lock, then N times one lock after\n"
    "                              another: cycles per second, latency, requests per cycle\n"
    "  async-many LOCKS            one thread and one session acquire LOCKS distinct locks at\n"
    "                              once (zklock_acquire_async, dispatched in its own poll\n"
    "                              loop), then release them: acquisitions per second beside\n"
    "                              the same taken one after another, memory per pending and\n"
    "                              per held lock, threads (constant whatever LOCKS)\n"
    "\n"
    "  idle HOLDERS SECONDS        HOLDERS sessions each hold a different lock and do nothing\n"
    "                              for SECONDS: the transactions the ensemble committed\n"
    "                              meanwhile (from its zxid, read with the 4-letter word\n"
    "                              srvr from each server of HOSTS: the leader's, or the\n"
    "                              highest; once all hold, after 2 s of settling, and\n"
    "                              before any release), per second and per session timeout\n"
    "                              per holder. The ensemble must serve nobody else meanwhile\n"
    "  idle-many LOCKS SECONDS     the same with one session holding LOCKS distinct locks\n"
    "\n"
    "  -p, --prefix PATH     where the benchmark's locks go (default /zklock-bench)\n"
    "      --warmup N        uncontended: cycles run before measuring (default 200)\n"
    "      --semaphore       herd: queue for the lease of a semaphore of one lease\n"
    "      --session-timeout MS\n"
    "                        every session's ZooKeeper session timeout, 1-3600000\n"
    "                        (default 10000; the servers bound it)\n"
    "      --lease strict|session\n"
    "                        every session's lease: strict (the default), heartbeat\n"
    "                        writes; session, none (ZKLOCK_LEASE_SESSION): idle then\n"
    "                        shows what a holder costs without them\n"
    "  -h, --help            show this help and exit\n"
    "  -V, --version         show the version and exit\n"
    "\n"
    TOOL_CREDENTIAL_HELP
    TOOL_ACL_HELP
    "\n"
    "The uncontended, contended, semaphore and idle workloads take the same command lines,\n"
    "and print the same JSON keys, as the Curator, kazoo and bare ZooKeeper clients of\n"
    "zklock's comparison harness, so that their figures can be set side by side;\n"
    "docs/performance.md in zklock's sources explains the method and gives the figures.\n"
    "\n"
    "If the connection to ZooKeeper is lost during a run, it stops without figures.\n"
    "\n"
    "Exit status: 0 success; 1 a check failed (an overlap, more than one wake-up per\n"
    "release); 64 bad usage; 65 invalid --prefix; 69 ZooKeeper unreachable, failing or\n"
    "lost during the run (idle: no server told its zxid, or the ensemble elected a leader\n"
    "meanwhile); 70 a lock handle could not be made; 77 not allowed by an ACL, or the\n"
    "credentials were rejected.\n";

static const char *prefix = "/zklock-bench";
static int warmup = 200;
static struct tool_security sec;          /* --auth-file, --acl, --tls-* */
static zklock_session_opts_t session_opts; /* what they give every session */
static int run_over; /* set once the sessions are being closed: __atomic accesses */

/* ---- measuring ------------------------------------------------------------------------- */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(double *sorted, size_t n, double p)
{
    size_t i = (size_t)(p * (double)n);
    return n ? sorted[i < n ? i : n - 1] : 0;
}

static double mean(const double *v, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    return n ? sum / (double)n : 0;
}

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Bytes the heap hands out now (RSS also counts what malloc keeps after a
 * peak of transient buffers). */
static long heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (long)mi.uordblks + (long)mi.hblkhd;
}

static int herd_leases; /* --semaphore: the herd queues for a semaphore's lease */

/* A mutex, or (leases > 0) a semaphore of that many leases. */
static zklock_t *new_lock_of(zklock_session_t *s, const char *name, const zklock_opts_t *o,
                             int leases)
{
    char path[512];
    zklock_t *l;
    int rc;

    snprintf(path, sizeof path, "%s/%s-%d", prefix, name, (int)getpid());
    rc = leases > 0 ? zklock_semaphore_new(&l, s, path, leases, o) : zklock_mutex_new(&l, s, path, o);
    if (rc)
        tool_die(EXIT_INTERNAL, "%s: %s", path, zklock_strerror(rc));
    return l;
}

static zklock_t *new_lock_opts(zklock_session_t *s, const char *name, const zklock_opts_t *o)
{
    return new_lock_of(s, name, o, 0);
}

static zklock_t *new_lock(zklock_session_t *s, const char *name)
{
    return new_lock_opts(s, name, NULL);
}

static void must(int rc, const char *what)
{
    if (rc)
        tool_die(EXIT_UNREACHABLE, "%s: %s", what, zklock_strerror(rc));
}

/* An acquire that fails ends the run at once, saying why (an ACL's
 * refusal names the node whose ACL refused). _exit, as on_state does: the
 * other threads are still running, on sessions nobody will close. */
static void must_acquire(zklock_session_t *s, zklock_t *l)
{
    int rc = zklock_acquire(l, -1), code;
    if (rc == ZKLOCK_OK)
        return;
    code = tool_acquire_failed(s, zklock_path(l), rc, &sec);
    fflush(stdout);
    _exit(code);
}

/* A connection lost mid-run makes the figures meaningless, and a waiter
 * would wait for a server that is gone for ever: stop at once. _exit, as
 * this is the session's callback thread and the others are still running. */
static void on_state(zklock_session_t *s, int state, void *ctx)
{
    (void)s;
    (void)ctx;
    if ((state != ZKLOCK_SUSPENDED && state != ZKLOCK_EXPIRED) ||
        __atomic_load_n(&run_over, __ATOMIC_ACQUIRE))
        return;
    tool_say("the connection to ZooKeeper was lost during the run: no figures");
    fflush(stdout);
    _exit(EXIT_UNREACHABLE);
}

static zklock_session_t *open_session(const char *hosts)
{
    zklock_session_opts_t so = session_opts;
    so.on_state = on_state;
    return tool_open(hosts, &so, &sec);
}

/* Once a workload has opened its sessions: they have their own copies. */
static void forget_secrets(void)
{
    tool_security_forget(&sec);
}

static void close_session(zklock_session_t *s)
{
    __atomic_store_n(&run_over, 1, __ATOMIC_RELEASE);
    zklock_session_close(s);
}

/* ---- waits: the benchmark's own samples beside the library's histogram ------------------------ */

/* The acquisitions' waits as the benchmark timed them (around
 * zklock_acquire), grown as they come. */
struct waits {
    double *us;
    size_t n, cap;
};

static void waits_add(struct waits *w, double us)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 256;
        w->us = realloc(w->us, w->cap * sizeof *w->us);
        if (!w->us)
            tool_die(EXIT_INTERNAL, "out of memory");
    }
    w->us[w->n++] = us;
}

/* zklock_lock_stats' bucket of a wait (zklock.h): 0 below 1 ms, then one per
 * power of two of milliseconds, the last open-ended. */
static int wait_bucket(double us)
{
    long ms = (long)(us / 1000);
    int b = 0;

    for (; ms > 0 && b < ZKLOCK_STATS_BUCKETS - 1; ms >>= 1)
        b++;
    return b;
}

/* The bucket that holds the wait of rank floor(p * count), as percentile()
 * picks it from sorted samples. */
static int hist_percentile(const zklock_time_stats_t *t, double p)
{
    uint64_t rank = (uint64_t)(p * (double)t->count), seen = 0;

    if (rank >= t->count && t->count > 0)
        rank = t->count - 1;
    for (int b = 0; b < ZKLOCK_STATS_BUCKETS; b++) {
        seen += t->buckets[b];
        if (seen > rank)
            return b;
    }
    return ZKLOCK_STATS_BUCKETS - 1;
}

/* The most a wait in bucket b took, in milliseconds (its upper end; the
 * last bucket has none: its lower end). */
static double bucket_le_ms(int b)
{
    return (double)(1L << (b < ZKLOCK_STATS_BUCKETS - 1 ? b : b - 1));
}

/* The locks' waits summed, from zklock_lock_stats. */
static void add_wait_stats(zklock_time_stats_t *sum, zklock_t *l)
{
    zklock_lock_stats_t st;

    must(zklock_lock_stats(l, &st, sizeof st), "zklock_lock_stats");
    sum->count += st.wait.count;
    sum->sum_us += st.wait.sum_us;
    sum->max_us = st.wait.max_us > sum->max_us ? st.wait.max_us : sum->max_us;
    for (int b = 0; b < ZKLOCK_STATS_BUCKETS; b++)
        sum->buckets[b] += st.wait.buckets[b];
}

/* p50 and p99 of the waits, from the samples and from the histogram: they
 * agree if each sample percentile lies in, or next to, the histogram's
 * bucket (the two clocks start and stop a call's overhead apart). */
struct wait_figures {
    double p50_us, p99_us;       /* the samples' */
    double p50_le_ms, p99_le_ms; /* the histogram's bucket ends */
    bool agree;
};

static struct wait_figures wait_figures(struct waits *w, const zklock_time_stats_t *hist)
{
    struct wait_figures f;
    int h50 = hist_percentile(hist, .5), h99 = hist_percentile(hist, .99);

    qsort(w->us, w->n, sizeof *w->us, cmp_double);
    f.p50_us = percentile(w->us, w->n, .5);
    f.p99_us = percentile(w->us, w->n, .99);
    f.p50_le_ms = bucket_le_ms(h50);
    f.p99_le_ms = bucket_le_ms(h99);
    f.agree = hist->count == w->n && abs(wait_bucket(f.p50_us) - h50) <= 1 &&
              abs(wait_bucket(f.p99_us) - h99) <= 1;
    return f;
}

static void say_waits(const struct wait_figures *f)
{
    printf("waits: p50 %.0f us, p99 %.0f us; zklock_lock_stats: p50 < %.0f ms, p99 < %.0f ms (%s)\n",
           f->p50_us, f->p99_us, f->p50_le_ms, f->p99_le_ms,
           f->agree ? "agree within a bucket" : "DISAGREE");
}

/* Ends a JSON line with the waits' keys. */
static void end_json_with_waits(const struct wait_figures *f)
{
    printf(",\"wait_p50_us\":%.1f,\"wait_p99_us\":%.1f,\"wait_p50_le_ms\":%.0f,"
           "\"wait_p99_le_ms\":%.0f,\"wait_hist_agrees\":%s}\n",
           f->p50_us, f->p99_us, f->p50_le_ms, f->p99_le_ms, f->agree ? "true" : "false");
}

/* ---- uncontended -------------------------------------------------------------------------- */

static int uncontended(const char *hosts, long n)
{
    zklock_session_t *s = open_session(hosts);
    zklock_t *l = new_lock(s, "u");
    double *lat = calloc((size_t)n, sizeof *lat), t0, wall, cpu0, cpu;
    zklock_stats_t st0, st;
    zklock_lock_stats_t lst0;
    zklock_time_stats_t hist = {0};
    struct waits w = {0};
    struct wait_figures wf;

    forget_secrets();
    for (int i = 0; i < warmup; i++) {
        must_acquire(s, l);
        must(zklock_release(l), "release");
    }
    zklock_session_stats(s, &st0, sizeof st0);
    must(zklock_lock_stats(l, &lst0, sizeof lst0), "zklock_lock_stats");
    cpu0 = cpu_us();
    t0 = now_us();
    for (long i = 0; i < n; i++) {
        double start = now_us();
        must_acquire(s, l);
        waits_add(&w, now_us() - start);
        must(zklock_release(l), "release");
        lat[i] = now_us() - start;
    }
    wall = (now_us() - t0) / 1e6;
    cpu = cpu_us() - cpu0;
    zklock_session_stats(s, &st, sizeof st);
    add_wait_stats(&hist, l);
    hist.count -= lst0.wait.count; /* not the warm-up's */
    for (int b = 0; b < ZKLOCK_STATS_BUCKETS; b++)
        hist.buckets[b] -= lst0.wait.buckets[b];
    wf = wait_figures(&w, &hist);
    qsort(lat, (size_t)n, sizeof *lat, cmp_double);
    printf("uncontended: %ld cycles in %.2f s: %.0f/s, p50 %.0f us, p99 %.0f us, "
           "client CPU %.1f us per cycle, %.2f requests and %.2f listings per cycle\n",
           n, wall, (double)n / wall, percentile(lat, (size_t)n, .5), percentile(lat, (size_t)n, .99),
           cpu / (double)n, (double)(st.requests - st0.requests) / (double)n,
           (double)(st.listings - st0.listings) / (double)n);
    say_waits(&wf);
    printf("{\"peer\":\"zklock\",\"workload\":\"uncontended\",\"n\":%ld,\"ops_per_s\":%.1f,"
           "\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f,\"cpu_us_per_op\":%.1f",
           n, (double)n / wall, percentile(lat, (size_t)n, .5), percentile(lat, (size_t)n, .99),
           mean(lat, (size_t)n), cpu / (double)n);
    end_json_with_waits(&wf);
    free(lat);
    free(w.us);
    zklock_free(l);
    close_session(s);
    return 0;
}

/* ---- contended ---------------------------------------------------------------------------- */

struct contender {
    zklock_session_t *s;
    zklock_t *l;
    double stop_at;
    long count;
    struct waits waits; /* each acquisition's, as timed here */
    pthread_t t;
};

/* An acquisition, timed. */
static void timed_acquire(struct contender *c)
{
    double start = now_us();

    must_acquire(c->s, c->l);
    waits_add(&c->waits, now_us() - start);
}

/* Every client's waits, timed here and as the library measured them. */
static struct wait_figures clients_waits(struct contender *c, long clients)
{
    struct waits all = {0};
    zklock_time_stats_t hist = {0};
    struct wait_figures f;

    for (long i = 0; i < clients; i++) {
        for (size_t k = 0; k < c[i].waits.n; k++)
            waits_add(&all, c[i].waits.us[k]);
        add_wait_stats(&hist, c[i].l);
    }
    f = wait_figures(&all, &hist);
    free(all.us);
    return f;
}

static int inside;
static long overlaps;

static void *contend(void *arg)
{
    struct contender *c = arg;

    while (now_us() < c->stop_at) {
        timed_acquire(c);
        /* the detector: nobody else may be inside */
        if (__atomic_add_fetch(&inside, 1, __ATOMIC_SEQ_CST) != 1)
            __atomic_add_fetch(&overlaps, 1, __ATOMIC_SEQ_CST);
        c->count++;
        __atomic_sub_fetch(&inside, 1, __ATOMIC_SEQ_CST);
        must(zklock_release(c->l), "release");
    }
    return NULL;
}

/* What a timed run of clients, each a thread with its own session, gave. */
struct run {
    double wall, cpu; /* seconds; client CPU in microseconds */
    long total, lo, hi; /* acquisitions: in all, fewest and most by one client */
};

/* Runs `worker` on every client for `seconds`, and sums up. */
static struct run run_clients(struct contender *c, long clients, double seconds,
                              void *(*worker)(void *))
{
    struct run r = {.lo = -1};
    double t0, cpu0;

    forget_secrets();
    cpu0 = cpu_us();
    t0 = now_us();
    for (long i = 0; i < clients; i++) {
        c[i].stop_at = t0 + seconds * 1e6;
        pthread_create(&c[i].t, NULL, worker, &c[i]);
    }
    for (long i = 0; i < clients; i++)
        pthread_join(c[i].t, NULL);
    r.wall = (now_us() - t0) / 1e6;
    r.cpu = cpu_us() - cpu0;
    for (long i = 0; i < clients; i++) {
        r.total += c[i].count;
        r.lo = r.lo < 0 || c[i].count < r.lo ? c[i].count : r.lo;
        r.hi = c[i].count > r.hi ? c[i].count : r.hi;
    }
    return r;
}

static void free_clients(struct contender *c, long clients)
{
    for (long i = 0; i < clients; i++) {
        zklock_free(c[i].l);
        close_session(c[i].s);
        free(c[i].waits.us);
    }
    free(c);
}

static int contended(const char *hosts, long clients, double seconds)
{
    struct contender *c = calloc((size_t)clients, sizeof *c);
    char name[32];
    struct run r;
    struct wait_figures wf;

    snprintf(name, sizeof name, "c");
    for (long i = 0; i < clients; i++) {
        c[i].s = open_session(hosts);
        c[i].l = new_lock(c[i].s, name);
    }
    r = run_clients(c, clients, seconds, contend);
    wf = clients_waits(c, clients);
    printf("contended: %ld clients, %ld handoffs in %.2f s: %.0f/s, per client %ld..%ld "
           "(max/min %.3f), overlaps %ld, client CPU %.1f us per handoff\n",
           clients, r.total, r.wall, (double)r.total / r.wall, r.lo, r.hi,
           r.lo ? (double)r.hi / (double)r.lo : 0, overlaps, r.total ? r.cpu / (double)r.total : 0);
    say_waits(&wf);
    printf("{\"peer\":\"zklock\",\"workload\":\"contended\",\"clients\":%ld,\"seconds\":%.2f,"
           "\"acquisitions\":%ld,\"ops_per_s\":%.1f,\"min_per_client\":%ld,\"max_per_client\":%ld,"
           "\"overlaps\":%ld,\"cpu_us_per_op\":%.1f",
           clients, r.wall, r.total, (double)r.total / r.wall, r.lo, r.hi, overlaps,
           r.total ? r.cpu / (double)r.total : 0);
    end_json_with_waits(&wf);
    free_clients(c, clients);
    return overlaps ? 1 : 0;
}

/* ---- semaphore ---------------------------------------------------------------------------------- */

static int leases_max, leases_inside, leases_most;
static long lease_overlaps;

static void *take_leases(void *arg)
{
    struct contender *c = arg;

    while (now_us() < c->stop_at) {
        int now, most;
        timed_acquire(c);
        /* the detector: at most leases_max inside */
        now = __atomic_add_fetch(&leases_inside, 1, __ATOMIC_SEQ_CST);
        if (now > leases_max)
            __atomic_add_fetch(&lease_overlaps, 1, __ATOMIC_SEQ_CST);
        most = __atomic_load_n(&leases_most, __ATOMIC_SEQ_CST);
        while (now > most && !__atomic_compare_exchange_n(&leases_most, &most, now, false,
                                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
        c->count++;
        __atomic_sub_fetch(&leases_inside, 1, __ATOMIC_SEQ_CST);
        must(zklock_release(c->l), "release");
    }
    return NULL;
}

static int semaphore(const char *hosts, long clients, int leases, double seconds)
{
    struct contender *c = calloc((size_t)clients, sizeof *c);
    struct run r;
    struct wait_figures wf;

    leases_max = leases;
    for (long i = 0; i < clients; i++) {
        c[i].s = open_session(hosts);
        c[i].l = new_lock_of(c[i].s, "s", NULL, leases);
    }
    r = run_clients(c, clients, seconds, take_leases);
    wf = clients_waits(c, clients);
    printf("semaphore: %ld clients, %d leases, %ld acquisitions in %.2f s: %.0f/s, per client "
           "%ld..%ld, most inside at once %d, over the limit %ld, client CPU %.1f us per "
           "acquisition\n",
           clients, leases, r.total, r.wall, (double)r.total / r.wall, r.lo, r.hi, leases_most,
           lease_overlaps, r.total ? r.cpu / (double)r.total : 0);
    say_waits(&wf);
    printf("{\"peer\":\"zklock\",\"workload\":\"semaphore\",\"clients\":%ld,\"leases\":%d,"
           "\"seconds\":%.2f,\"acquisitions\":%ld,\"ops_per_s\":%.1f,\"min_per_client\":%ld,"
           "\"max_per_client\":%ld,\"max_inside\":%d,\"overlaps\":%ld,\"cpu_us_per_op\":%.1f",
           clients, leases, r.wall, r.total, (double)r.total / r.wall, r.lo, r.hi, leases_most,
           lease_overlaps, r.total ? r.cpu / (double)r.total : 0);
    end_json_with_waits(&wf);
    free_clients(c, clients);
    return lease_overlaps ? 1 : 0;
}

/* ---- herd ----------------------------------------------------------------------------------- */

#define WAITERS_PER_SESSION 50

struct herd {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    double released_at; /* when the previous holder called release */
    double *handoff;    /* release -> next holder, per handoff */
    long handoffs;
};

struct waiter {
    struct herd *h;
    zklock_session_t *s;
    zklock_t *l;
    pthread_t t;
};

static void *wait_in_line(void *arg)
{
    struct waiter *w = arg;
    struct herd *h = w->h;

    must_acquire(w->s, w->l);
    pthread_mutex_lock(&h->mu);
    h->handoff[h->handoffs++] = now_us() - h->released_at;
    h->released_at = now_us();
    pthread_mutex_unlock(&h->mu);
    must(zklock_release(w->l), "release");
    return NULL;
}

static uint64_t total_stat(zklock_session_t **s, long n, size_t offset)
{
    uint64_t sum = 0;
    for (long i = 0; i < n; i++) {
        zklock_stats_t st;
        zklock_session_stats(s[i], &st, sizeof st);
        sum += *(uint64_t *)((char *)&st + offset);
    }
    return sum;
}

/* Waits until `want` waiters are in line for l: in its queue, or in a
 * semaphore's (its acquisition lock's queue). */
static void wait_queued(zklock_session_t *s, zklock_t *l, size_t want)
{
    for (;;) {
        zklock_queue_t *q = NULL;
        size_t n;
        if (herd_leases) {
            must(zklock_semaphore_read(l, NULL, &q), "read the line");
            n = q->count;
        } else {
            must(zklock_queue_read(s, zklock_path(l), &q), "read the queue");
            n = q->count - 1; /* the holder */
        }
        if (n >= want) {
            zklock_queue_free(q);
            return;
        }
        zklock_queue_wait(s, q, 1000);
        zklock_queue_free(q);
    }
}

static int herd(const char *hosts, long waiters)
{
    long nsessions = (waiters + WAITERS_PER_SESSION - 1) / WAITERS_PER_SESSION + 1;
    zklock_session_t **s = calloc((size_t)nsessions, sizeof *s);
    zklock_t **l = calloc((size_t)nsessions, sizeof *l);
    struct waiter *w = calloc((size_t)waiters, sizeof *w);
    struct herd h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, 0};
    uint64_t wake0, events0, wakeups, events;

    h.handoff = calloc((size_t)waiters, sizeof *h.handoff);
    for (long i = 0; i < nsessions; i++) {
        s[i] = open_session(hosts);
        l[i] = new_lock_of(s[i], "herd", NULL, herd_leases);
    }
    forget_secrets();
    must_acquire(s[0], l[0]); /* session 0 holds first */
    for (long i = 0; i < waiters; i++) {
        long k = 1 + i / WAITERS_PER_SESSION;
        w[i] = (struct waiter){&h, s[k], l[k], 0};
        pthread_create(&w[i].t, NULL, wait_in_line, &w[i]);
        if ((i + 1) % 100 == 0 || i + 1 == waiters)
            wait_queued(s[0], l[0], (size_t)i + 1); /* arrival order, in batches */
    }
    wake0 = total_stat(s, nsessions, offsetof(zklock_stats_t, wakeups));
    events0 = total_stat(s, nsessions, offsetof(zklock_stats_t, watch_events));
    h.released_at = now_us();
    must(zklock_release(l[0]), "release");
    for (long i = 0; i < waiters; i++)
        pthread_join(w[i].t, NULL);
    wakeups = total_stat(s, nsessions, offsetof(zklock_stats_t, wakeups)) - wake0;
    events = total_stat(s, nsessions, offsetof(zklock_stats_t, watch_events)) - events0;
    qsort(h.handoff, (size_t)h.handoffs, sizeof *h.handoff, cmp_double);
    printf("herd (%s): %ld waiters, %ld releases: %.3f waiters woken and %.3f watch events per "
           "release; release to next holder p50 %.0f us, p99 %.0f us\n",
           herd_leases ? "a semaphore's lease" : "a mutex", waiters, h.handoffs, (double)wakeups / (double)waiters, (double)events / (double)waiters,
           percentile(h.handoff, (size_t)h.handoffs, .5), percentile(h.handoff, (size_t)h.handoffs, .99));
    printf("{\"peer\":\"zklock\",\"workload\":\"herd\",\"lock\":\"%s\",\"waiters\":%ld,\"releases\":%ld,"
           "\"wakeups_per_release\":%.3f,\"watch_events_per_release\":%.3f,"
           "\"handoff_p50_us\":%.1f,\"handoff_p99_us\":%.1f,\"handoff_mean_us\":%.1f}\n",
           herd_leases ? "semaphore" : "mutex", waiters, h.handoffs, (double)wakeups / (double)waiters, (double)events / (double)waiters,
           percentile(h.handoff, (size_t)h.handoffs, .5), percentile(h.handoff, (size_t)h.handoffs, .99),
           mean(h.handoff, (size_t)h.handoffs));
    for (long i = 0; i < nsessions; i++) {
        zklock_free(l[i]);
        close_session(s[i]);
    }
    free(h.handoff);
    free(w);
    free(l);
    free(s);
    /* A mutex: each release wakes the next waiter, once. A semaphore: a
     * release wakes the head of the line if it waits for a lease (its node
     * made, holding the acquisition lock); taking its lease, the head
     * passes that lock on, which wakes the next in line: at most 2 per
     * release (1 when the head finds a lease free, as here, where each
     * holder gives its lease back at once), whatever the number waiting. */
    if (herd_leases)
        return wakeups <= (uint64_t)(2 * waiters) ? 0 : 1;
    return wakeups == (uint64_t)waiters ? 0 : 1;
}

/* ---- many ------------------------------------------------------------------------------------ */

static int many(const char *hosts, long k)
{
    zklock_session_t *s = open_session(hosts);
    zklock_t **l = calloc((size_t)k, sizeof *l);
    long rss0, rss_handles, rss_held;
    double t0, wall;

    forget_secrets();
    rss0 = rss_kib();
    for (long i = 0; i < k; i++) {
        char name[64];
        snprintf(name, sizeof name, "many/%ld", i);
        l[i] = new_lock(s, name);
    }
    rss_handles = rss_kib();
    t0 = now_us();
    for (long i = 0; i < k; i++)
        must_acquire(s, l[i]);
    wall = (now_us() - t0) / 1e6;
    rss_held = rss_kib();
    printf("many: one session holds %ld locks, taken at %.0f/s; resident memory per lock: "
           "%.0f B for the handle, %.0f B more while held\n",
           k, (double)k / wall, (double)(rss_handles - rss0) * 1024 / (double)k,
           (double)(rss_held - rss_handles) * 1024 / (double)k);
    printf("{\"peer\":\"zklock\",\"workload\":\"many\",\"locks\":%ld,\"ops_per_s\":%.1f,"
           "\"handle_bytes_per_lock\":%.0f,\"held_bytes_per_lock\":%.0f}\n",
           k, (double)k / wall, (double)(rss_handles - rss0) * 1024 / (double)k,
           (double)(rss_held - rss_handles) * 1024 / (double)k);
    for (long i = 0; i < k; i++) {
        must(zklock_release(l[i]), "release");
        zklock_free(l[i]);
    }
    free(l);
    close_session(s);
    return 0;
}

/* ---- election: resign to new leader --------------------------------------------------------------- */

struct term_chain {
    pthread_mutex_t mu;
    double resigned_at; /* when the last leader called release; 0 before */
    double *handover;   /* resign -> next leader, per handover */
    long handovers, max;
};

struct participant {
    struct term_chain *chain;
    zklock_session_t *s;
    zklock_t *l;
    pthread_t t;
};

/* Campaigns, leads, resigns, again: with two participants they take turns,
 * each resign handing over to the other, waiting in line. */
static void *take_terms(void *arg)
{
    struct participant *p = arg;
    struct term_chain *c = p->chain;

    for (;;) {
        must_acquire(p->s, p->l);
        pthread_mutex_lock(&c->mu);
        if (c->resigned_at > 0 && c->handovers < c->max)
            c->handover[c->handovers++] = now_us() - c->resigned_at;
        if (c->handovers >= c->max) {
            c->resigned_at = now_us();
            pthread_mutex_unlock(&c->mu);
            must(zklock_release(p->l), "resign");
            return NULL;
        }
        c->resigned_at = now_us();
        pthread_mutex_unlock(&c->mu);
        must(zklock_release(p->l), "resign");
    }
}

static int election(const char *hosts, long n)
{
    struct term_chain c = {PTHREAD_MUTEX_INITIALIZER, 0, calloc((size_t)n, sizeof(double)), 0, n};
    struct participant p[2];
    char path[512];

    snprintf(path, sizeof path, "%s/election-%d", prefix, (int)getpid());
    for (int i = 0; i < 2; i++) {
        int rc;
        p[i] = (struct participant){&c, open_session(hosts), NULL, 0};
        if ((rc = zklock_election_new(&p[i].l, p[i].s, path, NULL)) != 0)
            tool_die(EXIT_INTERNAL, "%s: %s", path, zklock_strerror(rc));
    }
    forget_secrets();
    for (int i = 0; i < 2; i++)
        pthread_create(&p[i].t, NULL, take_terms, &p[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(p[i].t, NULL);
    qsort(c.handover, (size_t)c.handovers, sizeof *c.handover, cmp_double);
    printf("election: %ld handovers between two participants: resign to new leader p50 %.0f us, "
           "p99 %.0f us, mean %.0f us\n",
           c.handovers, percentile(c.handover, (size_t)c.handovers, .5),
           percentile(c.handover, (size_t)c.handovers, .99), mean(c.handover, (size_t)c.handovers));
    printf("{\"peer\":\"zklock\",\"workload\":\"election\",\"handovers\":%ld,"
           "\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f}\n",
           c.handovers, percentile(c.handover, (size_t)c.handovers, .5),
           percentile(c.handover, (size_t)c.handovers, .99), mean(c.handover, (size_t)c.handovers));
    for (int i = 0; i < 2; i++) {
        zklock_free(p[i].l);
        close_session(p[i].s);
    }
    free(c.handover);
    return 0;
}

/* ---- multi: several locks at once, against one by one ------------------------------------------- */

struct cycles {
    double *lat;
    double ops_per_s;
    double requests; /* per cycle */
};

/* n cycles of take-all, release-all: through the multi-lock m, or (m NULL)
 * taking the members one after another, in one order. */
static void run_cycles(zklock_session_t *s, zklock_t *m, zklock_t **l, long members, long n,
                       struct cycles *out)
{
    zklock_stats_t st0, st;
    double t0;

    zklock_session_stats(s, &st0, sizeof st0);
    t0 = now_us();
    for (long i = 0; i < n; i++) {
        double start = now_us();
        if (m) {
            must_acquire(s, m);
            must(zklock_release(m), "release");
        } else {
            for (long k = 0; k < members; k++)
                must_acquire(s, l[k]);
            for (long k = 0; k < members; k++)
                must(zklock_release(l[k]), "release");
        }
        out->lat[i] = now_us() - start;
    }
    out->ops_per_s = (double)n / ((now_us() - t0) / 1e6);
    zklock_session_stats(s, &st, sizeof st);
    out->requests = (double)(st.requests - st0.requests) / (double)n;
    qsort(out->lat, (size_t)n, sizeof *out->lat, cmp_double);
}

static int multi(const char *hosts, long members, long n)
{
    zklock_session_t *s = open_session(hosts);
    zklock_t **l = calloc((size_t)members, sizeof *l), *m;
    struct cycles all = {calloc((size_t)n, sizeof(double)), 0, 0},
                  one = {calloc((size_t)n, sizeof(double)), 0, 0};
    int rc;

    forget_secrets();
    for (long k = 0; k < members; k++) {
        char name[64];
        snprintf(name, sizeof name, "multi/%ld", k);
        l[k] = new_lock(s, name);
    }
    if ((rc = zklock_multi_new(&m, l, (size_t)members, NULL)) != 0)
        tool_die(EXIT_INTERNAL, "a multi-lock: %s", zklock_strerror(rc));
    run_cycles(s, m, l, members, warmup < n ? warmup : n, &all); /* paths made, caches warm */
    run_cycles(s, NULL, l, members, warmup < n ? warmup : n, &one);
    run_cycles(s, m, l, members, n, &all);
    run_cycles(s, NULL, l, members, n, &one);
    printf("multi: %ld locks, %ld cycles each way. The multi-lock: %.0f/s, p50 %.0f us, p99 %.0f "
           "us, %.1f requests per cycle. One by one: %.0f/s, p50 %.0f us, p99 %.0f us, %.1f "
           "requests per cycle\n",
           members, n, all.ops_per_s, percentile(all.lat, (size_t)n, .5),
           percentile(all.lat, (size_t)n, .99), all.requests, one.ops_per_s,
           percentile(one.lat, (size_t)n, .5), percentile(one.lat, (size_t)n, .99), one.requests);
    printf("{\"peer\":\"zklock\",\"workload\":\"multi\",\"locks\":%ld,\"n\":%ld,"
           "\"ops_per_s\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"requests_per_op\":%.2f,"
           "\"one_by_one_ops_per_s\":%.1f,\"one_by_one_p50_us\":%.1f,\"one_by_one_p99_us\":%.1f,"
           "\"one_by_one_requests_per_op\":%.2f}\n",
           members, n, all.ops_per_s, percentile(all.lat, (size_t)n, .5),
           percentile(all.lat, (size_t)n, .99), all.requests, one.ops_per_s,
           percentile(one.lat, (size_t)n, .5), percentile(one.lat, (size_t)n, .99), one.requests);
    zklock_free(m);
    for (long k = 0; k < members; k++)
        zklock_free(l[k]);
    free(l);
    free(all.lat);
    free(one.lat);
    close_session(s);
    return 0;
}

/* ---- async-many: one thread, many locks at once ------------------------------------------------- */

/* The threads of this process (the session's own: a constant number,
 * whatever the number of locks). */
static int threads_now(void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");

    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

struct batch {
    long pending;
    int failures, first_rc;
};

static void batch_done(zklock_t *l, int rc, void *ctx)
{
    struct batch *b = ctx;
    (void)l;
    b->pending--;
    if (rc != ZKLOCK_OK && b->failures++ == 0)
        b->first_rc = rc;
}

/* The event loop of one thread: waits on the session's descriptor and
 * dispatches until the batch is done. */
static void run_batch(zklock_session_t *s, struct batch *b, const char *what)
{
    struct pollfd p = {zklock_session_fd(s), POLLIN, 0};

    while (b->pending > 0)
        if (poll(&p, 1, -1) > 0)
            zklock_session_dispatch(s);
    if (b->failures)
        tool_die(EXIT_UNREACHABLE, "%s: %d failed, the first with %s", what, b->failures,
                 zklock_strerror(b->first_rc));
}

static int async_many(const char *hosts, long k)
{
    zklock_session_opts_t so = session_opts;
    zklock_opts_t lo = {.owner = ZKLOCK_OWNER_HANDLE};
    zklock_session_t *s;
    zklock_t **l = calloc((size_t)k, sizeof *l);
    struct batch b = {k, 0, 0};
    long rss0, rss_started, rss_held, heap0, heap_held;
    int threads0, threads_peak;
    double t0, wall_async, blocking_rate;

    so.on_state = on_state;
    so.dispatch = ZKLOCK_DISPATCH_POLL;
    s = tool_open(hosts, &so, &sec);

    /* The blocking baseline: the same number of locks, one after another. */
    for (long i = 0; i < k; i++) {
        char name[64];
        snprintf(name, sizeof name, "async-many/%ld", i);
        l[i] = new_lock_opts(s, name, &lo);
    }
    t0 = now_us();
    for (long i = 0; i < k; i++)
        must(zklock_acquire(l[i], -1), "acquire");
    blocking_rate = (double)k / ((now_us() - t0) / 1e6);
    for (long i = 0; i < k; i++)
        must(zklock_release(l[i]), "release");

    threads0 = threads_now();
    rss0 = rss_kib();
    heap0 = heap_bytes();
    t0 = now_us();
    for (long i = 0; i < k; i++)
        must(zklock_acquire_async(l[i], -1, batch_done, &b), "acquire_async");
    rss_started = rss_kib();
    threads_peak = threads_now();
    run_batch(s, &b, "acquire_async");
    wall_async = (now_us() - t0) / 1e6;
    rss_held = rss_kib();
    heap_held = heap_bytes();
    if (threads_now() > threads_peak)
        threads_peak = threads_now();
    b = (struct batch){k, 0, 0};
    for (long i = 0; i < k; i++)
        must(zklock_release_async(l[i], batch_done, &b), "release_async");
    run_batch(s, &b, "release_async");

    printf("async-many: one thread acquired %ld locks at once at %.0f/s (one after another: "
           "%.0f/s, %.1fx); memory per lock: %.0f B of heap while held (resident: %.0f B "
           "while pending, %.0f B while held); threads: %d before, %d at the peak\n",
           k, (double)k / wall_async, blocking_rate, (double)k / wall_async / blocking_rate,
           (double)(heap_held - heap0) / (double)k, (double)(rss_started - rss0) * 1024 / (double)k,
           (double)(rss_held - rss0) * 1024 / (double)k, threads0, threads_peak);
    printf("{\"peer\":\"zklock\",\"workload\":\"async-many\",\"locks\":%ld,\"ops_per_s\":%.1f,"
           "\"blocking_ops_per_s\":%.1f,\"speedup\":%.2f,\"heap_bytes_per_held_lock\":%.0f,"
           "\"rss_bytes_per_pending_lock\":%.0f,\"rss_bytes_per_held_lock\":%.0f,"
           "\"threads_before\":%d,\"threads_peak\":%d}\n",
           k, (double)k / wall_async, blocking_rate, (double)k / wall_async / blocking_rate,
           (double)(heap_held - heap0) / (double)k, (double)(rss_started - rss0) * 1024 / (double)k,
           (double)(rss_held - rss0) * 1024 / (double)k, threads0, threads_peak);
    for (long i = 0; i < k; i++)
        zklock_free(l[i]);
    free(l);
    close_session(s);
    return threads_peak == threads0 ? 0 : 1;
}

/* ---- idle: what a holder that does nothing costs the ensemble ------------------------------ */

/* A committed transaction advances the ensemble's zxid by one (its lower
 * 32 bits; the upper 32 are the leader's epoch), and a server tells its
 * zxid to the 4-letter word srvr: the difference between two readings is
 * what the ensemble committed meanwhile, whoever asked for it. Pings and
 * reads commit nothing. */
#define SRVR_TIMEOUT_S 5
#define SRVR_ANSWER_MAX 4096
#define ZK_DEFAULT_PORT "2181"

/* The value after `key` at the start of a line of text, or NULL. */
static const char *line_value(const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = text; p; p = strchr(p, '\n')) {
        p += *p == '\n';
        if (strncmp(p, key, n) == 0)
            return p + n;
    }
    return NULL;
}

/* srvr's answer, read from one server (up to SRVR_ANSWER_MAX - 1 bytes,
 * SRVR_TIMEOUT_S for each step); "" if it did not answer. */
static void ask_srvr(const char *host, const char *port, char *buf)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    struct timeval limit = {SRVR_TIMEOUT_S, 0};
    size_t got = 0;
    ssize_t n;
    int fd = -1;

    buf[0] = '\0';
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        /* on Linux, the send limit bounds connect() too */
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return;
    if (write(fd, "srvr", 4) == 4)
        while (got + 1 < SRVR_ANSWER_MAX &&
               (n = read(fd, buf + got, SRVR_ANSWER_MAX - 1 - got)) > 0)
            got += (size_t)n;
    buf[got] = '\0';
    close(fd);
}

/* One "host:port" (or "[v6]:port", or a host alone on ZooKeeper's port)
 * of a connect string, split in place. */
static void split_host_port(char *item, char **host, const char **port)
{
    char *colon;

    if (*item == '[' && (colon = strchr(item, ']')) != NULL) {
        *colon = '\0';
        *host = item + 1;
        *port = colon[1] == ':' ? colon + 2 : ZK_DEFAULT_PORT;
        return;
    }
    *host = item;
    colon = strrchr(item, ':');
    *port = colon ? colon + 1 : ZK_DEFAULT_PORT;
    if (colon)
        *colon = '\0';
}

/* The ensemble's zxid: the leader's, or (a standalone server; no server
 * that says it leads) the highest any server of HOSTS gave. False if none
 * answered srvr with a zxid. */
static bool ensemble_zxid(const char *hosts, uint64_t *zxid)
{
    char *list = strdup(hosts), *save = NULL, *item, *host, buf[SRVR_ANSWER_MAX];
    const char *port, *z, *mode;
    bool found = false, leader_found = false;

    if (!list)
        tool_die(EXIT_INTERNAL, "out of memory");
    list[strcspn(list, "/")] = '\0'; /* a chroot: not a server */
    for (item = strtok_r(list, ",", &save); item && !leader_found;
         item = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        split_host_port(item, &host, &port);
        ask_srvr(host, port, buf);
        if (!(z = line_value(buf, "Zxid: ")))
            continue;
        v = strtoull(z, NULL, 16);
        mode = line_value(buf, "Mode: ");
        leader_found = mode && strncmp(mode, "leader", 6) == 0;
        if (!found || leader_found || v > *zxid)
            *zxid = v;
        found = true;
    }
    free(list);
    return found;
}

static void no_zxid(const char *hosts)
{
    tool_die(EXIT_UNREACHABLE,
             "no server of %s told its zxid (the 4-letter word srvr, over plain TCP: is it "
             "in 4lw.commands.whitelist?)",
             hosts);
}

static uint64_t must_read_zxid(const char *hosts)
{
    uint64_t z = 0;
    if (!ensemble_zxid(hosts, &z))
        no_zxid(hosts);
    return z;
}

/* The peers' benchmarks let their holders settle this long before the
 * first reading: so does this one, so that the figures compare. */
#define IDLE_SETTLE_S 2

static void idle_for(double seconds)
{
    double until = now_us() + seconds * 1e6, left;
    while ((left = until - now_us()) > 0) {
        long long ns = (long long)(left * 1e3);
        struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
        nanosleep(&ts, NULL); /* the measurement window itself: nothing to wait for */
    }
}

static uint64_t total_requests(zklock_session_t **s, long n)
{
    return total_stat(s, n, offsetof(zklock_stats_t, requests));
}

/* `holders` sessions, each holding `each` distinct locks, idle for
 * `seconds`: the transactions the ensemble committed meanwhile. Setup and
 * teardown commit too (sessions, lock paths, nodes, their deletion): the
 * readings are taken once every lock is held, and before the first release. */
struct idle_run {
    const char *workload;
    long holders, each;
    double seconds;
    zklock_session_t **s; /* holders */
    zklock_t **l;         /* holders * each: session i's are l[i * each ...] */
    int timeout_ms;       /* as the server granted it */
    uint64_t txns;        /* what the ensemble committed in the window */
    uint64_t requests;    /* what our sessions sent in it */
};

static void idle_hold(const char *hosts, struct idle_run *r)
{
    uint64_t z;

    r->s = calloc((size_t)r->holders, sizeof *r->s);
    r->l = calloc((size_t)(r->holders * r->each), sizeof *r->l);
    if (!r->s || !r->l)
        tool_die(EXIT_INTERNAL, "out of memory");
    for (long i = 0; i < r->holders; i++)
        r->s[i] = open_session(hosts);
    /* Once a server serves (a fresh one refuses srvr until then), and
     * before any lock is made: says at once if the zxid cannot be read. */
    if (!ensemble_zxid(hosts, &z)) {
        for (long i = 0; i < r->holders; i++)
            close_session(r->s[i]);
        no_zxid(hosts);
    }
    for (long i = 0; i < r->holders; i++) {
        for (long k = 0; k < r->each; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s/%ld-%ld", r->workload, i, k);
            r->l[i * r->each + k] = new_lock(r->s[i], name);
            must_acquire(r->s[i], r->l[i * r->each + k]);
        }
    }
    forget_secrets();
    r->timeout_ms = zoo_recv_timeout(zklock_session_zhandle(r->s[0]));
}

static void idle_measure(const char *hosts, struct idle_run *r)
{
    uint64_t z0, z1, req0, req1;

    idle_for(IDLE_SETTLE_S);
    /* Our requests are counted around the zxid's readings: a heartbeat in
     * flight at the start (one per session at most) is then the only one
     * of ours that the transactions can count and the requests not. */
    req0 = total_requests(r->s, r->holders);
    z0 = must_read_zxid(hosts);
    idle_for(r->seconds);
    z1 = must_read_zxid(hosts);
    req1 = total_requests(r->s, r->holders);
    if (z1 >> 32 != z0 >> 32)
        tool_die(EXIT_UNREACHABLE, "the ensemble elected a leader during the run (zxid 0x%llx, "
                 "then 0x%llx): no figures", (unsigned long long)z0, (unsigned long long)z1);
    r->txns = z1 - z0;
    r->requests = req1 - req0;
}

static void idle_report(const struct idle_run *r)
{
    double per_holder = (double)r->txns / r->seconds / (double)r->holders;
    double per_timeout = per_holder * r->timeout_ms / 1000;

    printf("%s: %ld session%s holding %ld lock%s each, idle for %.1f s (session timeout %d ms): "
           "the ensemble committed %llu transactions, %.4f per second and %.2f per session "
           "timeout per holding session; these sessions sent %llu requests meanwhile\n",
           r->workload, r->holders, r->holders == 1 ? "" : "s", r->each, r->each == 1 ? "" : "s",
           r->seconds, r->timeout_ms, (unsigned long long)r->txns, per_holder, per_timeout,
           (unsigned long long)r->requests);
    if (r->txns > r->requests + (uint64_t)r->holders)
        tool_say("the ensemble committed %llu transactions more than these sessions asked for: "
                 "someone else wrote meanwhile, and the figures count it",
                 (unsigned long long)(r->txns - r->requests));
    printf("{\"peer\":\"zklock\",\"workload\":\"%s\",\"holders\":%ld,\"locks_per_holder\":%ld,"
           "\"seconds\":%.1f,\"session_timeout_ms\":%d,\"txns\":%llu,\"txn_per_s_per_holder\":%.4f,"
           "\"txn_per_timeout_per_holder\":%.2f,\"requests\":%llu,\"lease\":\"%s\"}\n",
           r->workload, r->holders, r->each, r->seconds, r->timeout_ms,
           (unsigned long long)r->txns, per_holder, per_timeout, (unsigned long long)r->requests,
           session_opts.lease == ZKLOCK_LEASE_SESSION ? "session" : "strict");
}

static void idle_let_go(struct idle_run *r)
{
    for (long i = 0; i < r->holders; i++) {
        for (long k = 0; k < r->each; k++) {
            must(zklock_release(r->l[i * r->each + k]), "release");
            zklock_free(r->l[i * r->each + k]);
        }
        close_session(r->s[i]);
    }
    free(r->l);
    free(r->s);
}

static int idle(const char *hosts, const char *workload, long holders, long each, double seconds)
{
    struct idle_run r = {.workload = workload, .holders = holders, .each = each, .seconds = seconds};

    idle_hold(hosts, &r);
    idle_measure(hosts, &r);
    idle_report(&r);
    idle_let_go(&r);
    return 0;
}

/* ---- main -------------------------------------------------------------------------------------- */

static int run_uncontended(const char *hosts, char **args)
{
    return uncontended(hosts, tool_integer("N", args[0], 1, 100000000));
}

static int run_contended(const char *hosts, char **args)
{
    return contended(hosts, tool_integer("CLIENTS", args[0], 1, 10000),
                     tool_seconds("SECONDS", args[1]));
}

static int run_herd(const char *hosts, char **args)
{
    return herd(hosts, tool_integer("WAITERS", args[0], 1, 100000));
}

static int run_semaphore(const char *hosts, char **args)
{
    return semaphore(hosts, tool_integer("CLIENTS", args[0], 1, 10000),
                     (int)tool_integer("LEASES", args[1], 1, ZKLOCK_SEMAPHORE_MAX),
                     tool_seconds("SECONDS", args[2]));
}

static int run_election(const char *hosts, char **args)
{
    return election(hosts, tool_integer("N", args[0], 1, 10000000));
}

static int run_multi(const char *hosts, char **args)
{
    return multi(hosts, tool_integer("LOCKS", args[0], 1, ZKLOCK_MULTI_MAX),
                 tool_integer("N", args[1], 1, 10000000));
}

static int run_many(const char *hosts, char **args)
{
    return many(hosts, tool_integer("LOCKS", args[0], 1, 1000000));
}

static int run_async_many(const char *hosts, char **args)
{
    /* One arena, so that the heap's count includes what ZooKeeper's own
     * threads allocate for us (their watches, say). */
    mallopt(M_ARENA_MAX, 1);
    return async_many(hosts, tool_integer("LOCKS", args[0], 1, 1000000));
}

static int run_idle(const char *hosts, char **args)
{
    return idle(hosts, "idle", tool_integer("HOLDERS", args[0], 1, 10000), 1,
                tool_seconds("SECONDS", args[1]));
}

static int run_idle_many(const char *hosts, char **args)
{
    return idle(hosts, "idle-many", 1, tool_integer("LOCKS", args[0], 1, 1000000),
                tool_seconds("SECONDS", args[1]));
}

static const struct workload {
    const char *name, *args; /* the arguments, as a usage error names them */
    int nargs;
    int (*run)(const char *hosts, char **args);
} workloads[] = {
    {"uncontended", "N", 1, run_uncontended},
    {"contended", "CLIENTS and SECONDS", 2, run_contended},
    {"semaphore", "CLIENTS, LEASES and SECONDS", 3, run_semaphore},
    {"herd", "WAITERS", 1, run_herd},
    {"many", "LOCKS", 1, run_many},
    {"multi", "LOCKS and N", 2, run_multi},
    {"election", "N", 1, run_election},
    {"async-many", "LOCKS", 1, run_async_many},
    {"idle", "HOLDERS and SECONDS", 2, run_idle},
    {"idle-many", "LOCKS and SECONDS", 2, run_idle_many},
};
#define WORKLOAD_NAMES                                                                          \
    "uncontended, contended, semaphore, herd, many, multi, election, async-many, idle or "     \
    "idle-many"
#define TRY_HELP " (try 'zklock-bench --help')"

/* The workload argv names, with its arguments checked, or a usage error. */
static const struct workload *workload_of(int argc, char **argv)
{
    const struct workload *w = NULL;

    if (argc < 1)
        tool_die(EXIT_USAGE, "missing HOSTS and WORKLOAD" TRY_HELP);
    if (argc < 2)
        tool_die(EXIT_USAGE, "missing WORKLOAD after HOSTS: " WORKLOAD_NAMES TRY_HELP);
    for (size_t i = 0; i < sizeof workloads / sizeof *workloads && !w; i++)
        if (strcmp(argv[1], workloads[i].name) == 0)
            w = &workloads[i];
    if (!w)
        tool_die(EXIT_USAGE, "unknown workload '%s': " WORKLOAD_NAMES TRY_HELP, argv[1]);
    if (argc - 2 < w->nargs)
        tool_die(EXIT_USAGE, "%s needs %s" TRY_HELP, w->name, w->args);
    if (argc - 2 > w->nargs)
        tool_die(EXIT_USAGE, "%s takes %s only, not '%s'" TRY_HELP, w->name, w->args,
                 argv[2 + w->nargs]);
    return w;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"prefix", required_argument, NULL, 'p'}, {"warmup", required_argument, NULL, 'W'},
        {"semaphore", no_argument, NULL, 'S'},
        {"session-timeout", required_argument, NULL, 'T'},
        {"lease", required_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},         {"version", no_argument, NULL, 'V'},
        TOOL_CREDENTIAL_OPTIONS,                  TOOL_ACL_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    const struct workload *w;
    int c;

    opterr = 0; /* tool_bad_option() says what is wrong */
    while ((c = getopt_long(argc, argv, ":p:hV", longs, NULL)) != -1) {
        switch (c) {
        case 'p': prefix = optarg; break;
        case 'W': warmup = (int)tool_integer("--warmup", optarg, 0, 1000000); break;
        case 'S': herd_leases = 1; break;
        case 'T':
            session_opts.timeout_ms = (int)tool_integer("--session-timeout", optarg, 1, 3600000);
            break;
        case 'L': session_opts.lease = tool_lease(optarg, "zklock-bench"); break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V': printf("zklock-bench %s\n", zklock_version()); return 0;
        default:
            if (!tool_security_option(&sec, c, optarg))
                tool_bad_option(c, argv, "zklock-bench");
        }
    }
    w = workload_of(argc - optind, argv + optind);
    tool_check_path(prefix);
    tool_security_load(&sec, &session_opts);
    tool_zk_log(false);
    return w->run(argv[optind], argv + optind + 2);
}
