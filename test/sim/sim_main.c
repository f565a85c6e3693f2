/*
 * sim_main.c: `sim [--seeds N] [--start K] [--jobs J] [--replay SEED]
 * [--trace FILE] [--shrink]`.
 *
 * Runs seeds START .. START+N-1 (each a run of sim_app.c on a fresh world);
 * a failing seed is run again with its trace (the simulator's lines and
 * ZKLOCK_TRACE's, in the order they happened) and printed, and the run
 * stops. --replay SEED runs one seed with its trace on stdout (or FILE).
 * --shrink cuts a failing seed's schedule while it still fails the same way,
 * until no step can go alone (not always the fewest), and prints it.
 */
#include "sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double wall(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One run; with a trace file, ZKLOCK_TRACE appends the engine's lines to it. */
static int run_seed(uint64_t seed, const bool *keep, int nkeep, const char *trace_path,
                    struct sim_result *res)
{
    struct sim_run run = {.seed = seed, .keep = keep, .nkeep = nkeep};
    FILE *f = NULL;
    int rc;

    if (trace_path) {
        f = fopen(trace_path, "a");
        if (!f) {
            perror(trace_path);
            exit(2);
        }
        setvbuf(f, NULL, _IOLBF, 0);
        setenv("ZKLOCK_TRACE", trace_path, 1);
        run.trace = f;
    } else {
        unsetenv("ZKLOCK_TRACE");
    }
    rc = sim_run_one(&run, res);
    if (f)
        fclose(f);
    return rc;
}

static void print_file(const char *path, FILE *to)
{
    char line[4096];
    FILE *f = fopen(path, "r");

    while (f && fgets(line, sizeof line, f))
        fputs(line, to);
    if (f)
        fclose(f);
}

static void report(uint64_t seed, const struct sim_result *res)
{
    printf("seed %llu: FAIL at %lld.%06lld s: %s\n", (unsigned long long)seed,
           (long long)(res->at / SIM_S(1)), (long long)(res->at % SIM_S(1) / 1000), res->what);
}

/* The same failure: the first violation's kind (its text up to the first
 * digit that names a handle, a time or a token is too strict: compare the
 * text with the numbers taken out). */
static void shape_of(const char *what, char *out, size_t size)
{
    size_t n = 0;

    for (; *what && n + 1 < size; what++)
        if (!(*what >= '0' && *what <= '9'))
            out[n++] = *what;
    out[n] = '\0';
}

static bool fails_alike(uint64_t seed, const bool *keep, int n, const char *shape)
{
    struct sim_result r;
    char s[512];

    if (!run_seed(seed, keep, n, NULL, &r))
        return false;
    shape_of(r.what, s, sizeof s);
    return strcmp(s, shape) == 0;
}

/* Delta debugging over the schedule's steps: drop chunks, halving them,
 * while the run still fails alike; then one at a time until none can go. */
static int shrink(uint64_t seed, const struct sim_result *first)
{
    struct sim_schedule sched;
    char shape[512];
    bool *keep;
    int n, kept, chunk;

    sim_schedule_make(seed, &sched);
    n = sched.n;
    keep = malloc((size_t)n + 1);
    for (int i = 0; i < n; i++)
        keep[i] = true;
    shape_of(first->what, shape, sizeof shape);
    for (chunk = n / 2; chunk >= 1; chunk /= 2) {
        bool progress = true;
        while (progress) {
            progress = false;
            for (int start = 0; start < n; start += chunk) {
                bool saved[n];
                int dropped = 0;
                memcpy(saved, keep, (size_t)n);
                for (int i = start; i < start + chunk && i < n; i++)
                    if (keep[i]) {
                        keep[i] = false;
                        dropped++;
                    }
                if (!dropped)
                    continue;
                if (fails_alike(seed, keep, n, shape))
                    progress = true;
                else
                    memcpy(keep, saved, (size_t)n);
            }
        }
    }
    kept = 0;
    for (int i = 0; i < n; i++)
        kept += keep[i];
    printf("shrunk: seed %llu fails alike with %d of its %d steps:\n", (unsigned long long)seed,
           kept, n);
    for (int i = 0; i < n; i++) {
        const struct sim_step *st = &sched.v[i];
        if (!keep[i])
            continue;
        printf("  step %3d  %7.3f s  %-15s proc %d  a %d  timeout %d  for %lld ms\n", i,
               st->at / 1e9, sim_act_name(st->act), st->proc, st->a, st->timeout,
               (long long)(st->dur / SIM_MS(1)));
    }
    printf("replay: test/sim/run %llu --keep ", (unsigned long long)seed);
    for (int i = 0, first_k = 1; i < n; i++)
        if (keep[i]) {
            printf("%s%d", first_k ? "" : ",", i);
            first_k = 0;
        }
    printf("\n");
    free(keep);
    sim_schedule_free(&sched);
    return 0;
}

static bool *parse_keep(const char *list, int *n)
{
    bool *keep = calloc(4096, 1);
    const char *p = list;

    *n = 4096;
    while (*p) {
        int i = (int)strtol(p, (char **)&p, 10);
        if (i >= 0 && i < 4096)
            keep[i] = true;
        if (*p == ',')
            p++;
        else if (*p)
            break;
    }
    return keep;
}

/* The lowest seed any worker saw fail (shared by the workers): seeds above
 * it need not run. */
static uint64_t *lowest_bad;

/* Seeds from..to (step `stride`), in this process: the first failure ends
 * it (its seed in *failed), or another's lower one. The last seed run, and
 * its digest, in *last. */
static int run_range(uint64_t from, uint64_t count, uint64_t stride, uint64_t *failed,
                     uint64_t *events, uint64_t *ran, uint64_t last[2])
{
    for (uint64_t s = from; s < from + count; s += stride) {
        struct sim_result res;
        if (s > __atomic_load_n(lowest_bad, __ATOMIC_RELAXED))
            break;
        int bad = run_seed(s, NULL, 0, NULL, &res);
        last[0] = s;
        last[1] = res.digest;
        if (bad) {
            uint64_t low = __atomic_load_n(lowest_bad, __ATOMIC_RELAXED);
            while (s < low && !__atomic_compare_exchange_n(lowest_bad, &low, s, false,
                                                           __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                ;
            *failed = s;
            return 1;
        }
        *events += res.events;
        (*ran)++;
    }
    return 0;
}

/* Seed `seed` run again (after others, in another process, traced or not)
 * runs the same events at the same times in the same order. */
static bool same_again(uint64_t seed, uint64_t digest, const struct sim_result *again)
{
    if (again->digest == digest)
        return true;
    printf("sim: seed %llu ran differently the second time (digest %016llx, then %016llx): "
           "something outside the seed steers the simulation\n",
           (unsigned long long)seed, (unsigned long long)digest,
           (unsigned long long)again->digest);
    return false;
}

int main(int argc, char **argv)
{
    uint64_t seeds = 100, start = 1, replay = 0, failed = 0, events = 0, ran = 0;
    int jobs = 1, nkeep = 0;
    bool do_replay = false, do_shrink = false, quiet = false;
    const char *trace = NULL;
    bool *keep = NULL;
    struct sim_result res;
    double t0 = wall();

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
            seeds = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--start") == 0 && i + 1 < argc)
            start = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--replay") == 0 && i + 1 < argc)
            do_replay = true, replay = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc)
            trace = argv[++i];
        else if (strcmp(argv[i], "--keep") == 0 && i + 1 < argc)
            keep = parse_keep(argv[++i], &nkeep);
        else if (strcmp(argv[i], "--shrink") == 0)
            do_shrink = true;
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = true;
        else {
            fprintf(stderr, "usage: %s [--seeds N] [--start K] [--jobs J] [--quiet]\n"
                            "       %s --replay SEED [--keep I,J,...] [--trace FILE] [--shrink]\n",
                    argv[0], argv[0]);
            return 2;
        }
    }
    if (do_replay) {
        char tmp[] = "/tmp/zklock-sim-XXXXXX";
        int fd = trace ? -1 : mkstemp(tmp);
        const char *path = trace ? trace : tmp;
        if (fd >= 0)
            close(fd);
        if (trace)
            truncate(trace, 0);
        run_seed(replay, keep, nkeep, path, &res);
        if (!trace)
            print_file(tmp, stdout);
        if (fd >= 0)
            unlink(tmp);
        printf("seed %llu: %s (%llu events, %d steps, %d acquisitions of %d calls; digest "
               "%016llx)\n",
               (unsigned long long)replay, res.failed ? "FAIL" : "ok",
               (unsigned long long)res.events, res.steps, res.acquired, res.calls,
               (unsigned long long)res.digest);
        if (res.failed)
            report(replay, &res);
        if (res.failed && do_shrink)
            shrink(replay, &res);
        return res.failed ? 1 : 0;
    }
    /* Several processes of this program, each every jobs-th seed. */
    int fds[64][2], pids[64];
    lowest_bad = mmap(NULL, sizeof *lowest_bad, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (lowest_bad == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    *lowest_bad = UINT64_MAX;
    for (int j = 0; j < jobs && j < 64; j++) {
        if (pipe(fds[j]) != 0 || (pids[j] = fork()) < 0) {
            perror("fork");
            return 2;
        }
        if (pids[j] == 0) {
            uint64_t f = 0, ev = 0, n = 0, last[2] = {0, 0};
            int bad;
            close(fds[j][0]);
            bad = run_range(start + (uint64_t)j, seeds > (uint64_t)j ? seeds - (uint64_t)j : 0,
                            (uint64_t)jobs, &f, &ev, &n, last);
            dprintf(fds[j][1], "%d %llu %llu %llu %llu %llu\n", bad, (unsigned long long)f,
                    (unsigned long long)ev, (unsigned long long)n,
                    (unsigned long long)last[0], (unsigned long long)last[1]);
            _exit(0);
        }
        close(fds[j][1]);
    }
    uint64_t first_bad = UINT64_MAX, lasts[64][2];
    int nlasts = 0;
    for (int j = 0; j < jobs && j < 64; j++) {
        FILE *f = fdopen(fds[j][0], "r");
        int bad = 0;
        unsigned long long fs = 0, ev = 0, n = 0, ls = 0, ld = 0;
        if (f && fscanf(f, "%d %llu %llu %llu %llu %llu", &bad, &fs, &ev, &n, &ls, &ld) == 6) {
            events += ev;
            ran += n;
            if (bad && fs < first_bad)
                first_bad = fs;
            if (ls != 0) {
                lasts[nlasts][0] = ls;
                lasts[nlasts++][1] = ld;
            }
        } else {
            fprintf(stderr, "sim: a worker died (seeds %llu + %d mod %d)\n",
                    (unsigned long long)start, j, jobs);
            first_bad = first_bad == UINT64_MAX ? 0 : first_bad;
        }
        if (f)
            fclose(f);
        waitpid(pids[j], NULL, 0);
    }
    double secs = wall() - t0;
    if (first_bad != UINT64_MAX) {
        char tmp[] = "/tmp/zklock-sim-XXXXXX";
        int fd = mkstemp(tmp);
        failed = first_bad;
        close(fd);
        run_seed(failed, NULL, 0, tmp, &res);
        if (!quiet)
            print_file(tmp, stdout);
        unlink(tmp);
        report(failed, &res);
        for (int i = 0; i < nlasts; i++)
            if (lasts[i][0] == failed)
                same_again(failed, lasts[i][1], &res);
        printf("replay: test/sim/run %llu\n", (unsigned long long)failed);
        printf("seeds: %llu ran before it, %.1f s\n", (unsigned long long)ran, secs);
        return 1;
    }
    /* each worker's last seed again, here: a run that depends on the runs
     * before it in its process (state left over) fails this */
    for (int i = 0; i < nlasts; i++) {
        run_seed(lasts[i][0], NULL, 0, NULL, &res);
        if (!same_again(lasts[i][0], lasts[i][1], &res))
            return 1;
    }
    printf("sim: %llu seeds (%llu..%llu) passed in %.1f s: %.0f seeds/s, %.0f events/seed\n",
           (unsigned long long)ran, (unsigned long long)start,
           (unsigned long long)(start + seeds - 1), secs, ran / secs,
           ran ? (double)events / (double)ran : 0.0);
    return 0;
}
