/* holder.c: a test helper process that holds one lock and reports.
 *
 *   holder HOSTS PATH SESSION_TIMEOUT_MS OUTFILE [MAX_HOLD_MS [session]]
 *
 * Takes the mutex PATH, writes "held TOKEN" to OUTFILE, then waits for
 * on_lost and writes "lost REASON" (REASON as zklock_err_name names it),
 * releases and writes "release RC", and exits. The test freezes and thaws
 * it with SIGSTOP/SIGCONT around it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <zklock.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int lost_reason, lost_count;
static FILE *out;

static void say(const char *what, const char *detail)
{
    fprintf(out, "%s %s\n", what, detail);
    fflush(out);
}

static void on_lost(zklock_t *l, int reason, void *ctx)
{
    pthread_mutex_lock(&mu);
    lost_reason = reason;
    lost_count++;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv)
{
    zklock_session_opts_t so = {0};
    zklock_opts_t lo = {.on_lost = on_lost};
    zklock_session_t *s;
    zklock_t *l;
    int64_t token;
    char buf[32];
    int rc;

    if (argc < 5 || argc > 7) {
        fprintf(stderr,
                "usage: holder HOSTS PATH SESSION_TIMEOUT_MS OUTFILE [MAX_HOLD_MS [session]]\n");
        return 2;
    }
    out = fopen(argv[4], "w");
    if (!out)
        return 2;
    zoo_set_debug_level(0);
    so.timeout_ms = atoi(argv[3]);
    lo.max_hold_ms = argc >= 6 ? atoi(argv[5]) : 0;
    so.lease = argc == 7 ? ZKLOCK_LEASE_SESSION : ZKLOCK_LEASE_STRICT;
    if ((rc = zklock_session_open(&s, argv[1], &so)) != 0 ||
        (rc = zklock_mutex_new(&l, s, argv[2], &lo)) != 0 || (rc = zklock_acquire(l, 30000)) != 0 ||
        (rc = zklock_fence(l, &token)) != 0) {
        say("error", zklock_err_name(rc));
        return 1;
    }
    snprintf(buf, sizeof buf, "%lld", (long long)token);
    say("held", buf);
    pthread_mutex_lock(&mu);
    while (lost_count == 0)
        pthread_cond_wait(&cond, &mu);
    pthread_mutex_unlock(&mu);
    say("lost", zklock_err_name(lost_reason));
    say("release", zklock_err_name(zklock_release(l)));
    zklock_free(l);
    zklock_session_close(s);
    snprintf(buf, sizeof buf, "%d", lost_count);
    say("lost-calls", buf);
    return 0;
}
