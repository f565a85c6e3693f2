/* test_ensemble.c: server failures in a 3-server ensemble (run-test.sh
 * starts it with zk-harness.sh run -n 3). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "detector.h"

static bool serving(void *p)
{
    char buf[4096];
    int i = *(int *)p;
    return tu_fourlw(i, "srvr", buf, sizeof buf) > 0 && strstr(buf, "Mode:") != NULL;
}

static bool has_leader(void *p)
{
    return tu_leader() != 0;
}

/* Puts server i back and waits until the ensemble is whole again. */
static void bring_back(int i)
{
    TU_ASSERT_INT(tu_harness("restart", i), ==, 0);
    CU_ASSERT(tu_wait_until(serving, &i, 60000));
    CU_ASSERT(tu_wait_until(has_leader, NULL, 60000));
}

/* ---- leader killed under contention --------------------------------------------- */

struct worker {
    zklock_session_t *s;
    zklock_t *l;
    struct detector *d;
    int stop;        /* set by the test once the failover is behind */
    long iterations; /* critical sections it went through */
    pthread_t t;
};

static void *worker_main(void *p)
{
    struct worker *w = p;
    while (!__atomic_load_n(&w->stop, __ATOMIC_SEQ_CST)) {
        int64_t token = 0;
        int rc = zklock_acquire(w->l, 60000);
        if (rc == 0)
            rc = zklock_fence(w->l, &token);
        if (rc != 0) {
            fprintf(stderr, "acquire: %s\n", zklock_err_name(rc));
            DET_ADD(&w->d->errors, 1);
            break;
        }
        detector_enter(w->d, false, token);
        sched_yield();
        detector_leave(w->d, false);
        rc = zklock_release(w->l);
        if (rc != 0) {
            /* A release that the server could not confirm before the session
             * ended is reported, not hidden; it does not happen here since
             * sessions survive the failover. */
            fprintf(stderr, "release: %s\n", zklock_err_name(rc));
            DET_ADD(&w->d->errors, 1);
        }
        w->iterations++;
    }
    return NULL;
}

struct progress {
    struct detector *d;
    long entries; /* critical sections entered in all, at least */
};

static bool progressed(void *p)
{
    struct progress *a = p;
    return DET_LOAD(&a->d->entries) >= a->entries;
}

static bool server_gone(void *p)
{
    char buf[64];
    return tu_fourlw(*(int *)p, "ruok", buf, sizeof buf) <= 0;
}

/* The workers take turns until the test stops them: before the kill, while
 * the leader is dead and through the election, and after it. */
static void test_leader_kill_with_8_contenders(void)
{
    enum { N = 8, ROUND = 40, TIMEOUT_MS = 30000 };
    const char *path = tu_path("leader-kill");
    char file[64];
    struct detector *d = tu_new_detector(file, sizeof file);
    struct worker w[N];
    struct tu_events ev[N];
    struct progress before, after;
    int leader;
    long iterations = 0;
    int64_t killed_at, elected_ms;

    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_FATAL(tu_servers() == 3);
    for (int i = 0; i < N; i++) {
        /* Generous: an election usually takes under 2 s here, but on a
         * loaded two-core machine (make -j2 check beside javac and three more
         * JVMs) one CI run saw every session expire at 15 s. The sessions
         * must outlive the election; a slow one costs no time otherwise. */
        zklock_session_opts_t o = {.timeout_ms = TIMEOUT_MS, .on_state = tu_on_state, .ctx = &ev[i]};
        memset(&ev[i], 0, sizeof ev[i]);
        pthread_mutex_init(&ev[i].mu, NULL);
        w[i] = (struct worker){tu_session_opts(&o), NULL, d, 0, 0, 0};
        w[i].l = tu_mutex(w[i].s, path, NULL);
    }
    for (int i = 0; i < N; i++)
        pthread_create(&w[i].t, NULL, worker_main, &w[i]);
    before = (struct progress){d, ROUND};
    CU_ASSERT(tu_wait_until(progressed, &before, TU_WAIT_MS));
    leader = tu_leader();
    CU_ASSERT_FATAL(leader != 0);
    killed_at = tu_now_ms();
    TU_ASSERT_INT(tu_harness("kill", leader), ==, 0);
    /* The kill landed (the leader answers no more) while the workers ran
     * (they run until stopped), and they carry on: a round more once a new
     * leader serves. */
    CU_ASSERT(tu_wait_until(server_gone, &leader, TU_WAIT_MS));
    CU_ASSERT(tu_wait_until(has_leader, NULL, 3 * TIMEOUT_MS));
    elected_ms = tu_now_ms() - killed_at;
    after = (struct progress){d, DET_LOAD(&d->entries) + ROUND};
    CU_ASSERT(tu_wait_until(progressed, &after, 3 * TIMEOUT_MS));
    for (int i = 0; i < N; i++)
        __atomic_store_n(&w[i].stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < N; i++) {
        pthread_join(w[i].t, NULL);
        iterations += w[i].iterations;
    }
    fprintf(stderr, "leader %d killed; a new leader serving after %lld ms; workers done after %lld ms\n",
            leader, (long long)elected_ms, (long long)(tu_now_ms() - killed_at));
    for (int i = 0; i < N; i++) {
        char who[16];
        snprintf(who, sizeof who, "session %d", i);
        tu_print_states(who, &ev[i], killed_at);
    }
    TU_ASSERT_INT(d->errors, ==, 0);
    TU_ASSERT_INT(d->overlaps, ==, 0);
    TU_ASSERT_INT(d->stale_tokens, ==, 0);
    TU_ASSERT_INT(d->entries, ==, iterations); /* none skipped */
    /* The sessions outlive the failover if the ensemble serves again well
     * within their timeout (it takes about a second here). Once, on a loaded
     * CI machine, it took longer: then zklock must end them (a client cut off
     * for a whole timeout is told its session expired), and the run says so. */
    if (elected_ms > TIMEOUT_MS - 5000)
        fprintf(stderr, "the ensemble took %lld ms to elect: expiries are expected, not checked\n",
                (long long)elected_ms);
    for (int i = 0; i < N; i++) {
        if (elected_ms <= TIMEOUT_MS - 5000)
            CU_ASSERT(!tu_saw_state(&ev[i], ZKLOCK_EXPIRED)); /* failover kept the sessions */
        zklock_free(w[i].l);
        zklock_session_close(w[i].s);
    }
    tu_assert_clean(path);
    /* the lock works again with the ensemble whole */
    bring_back(leader);
    {
        zklock_session_t *s = tu_session();
        zklock_t *l = tu_mutex(s, path, NULL);
        TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
        TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
        zklock_free(l);
        zklock_session_close(s);
    }
    tu_free_detector(d, file);
    tu_assert_clean(path);
}

/* ---- the holder's own server dies ------------------------------------------------- */

/* A session whose connection is on a follower (sessions land on a random
 * server: open until one does). */
static zklock_session_t *session_on_follower(struct tu_events *ev, int *server)
{
    for (int attempt = 0; attempt < 30; attempt++) {
        zklock_session_opts_t o = {.timeout_ms = 15000, .on_state = tu_on_state, .ctx = ev};
        zklock_session_t *s = tu_session_opts(&o);
        int at = tu_server_of(zklock_session_id(s));
        tu_forget_states(ev); /* the caller watches what happens next */
        if (at != 0 && at != tu_leader()) {
            *server = at;
            return s;
        }
        zklock_session_close(s);
    }
    return NULL;
}

static void test_follower_kill_under_holder(void)
{
    struct tu_events ev = TU_EVENTS_INIT, lost = TU_EVENTS_INIT;
    zklock_opts_t lo = {.on_lost = tu_on_lost, .ctx = &lost};
    const char *path = tu_path("follower-kill");
    zklock_session_t *holder, *waiter = tu_session();
    zklock_t *lh, *lw = tu_mutex(waiter, path, NULL);
    struct tu_acquirer w;
    int server = 0;
    int64_t id;

    holder = session_on_follower(&ev, &server);
    CU_ASSERT_PTR_NOT_NULL_FATAL(holder);
    id = zklock_session_id(holder);
    lh = tu_mutex(holder, path, &lo);
    TU_REQUIRE_RC(zklock_acquire(lh, -1), ZKLOCK_OK);
    tu_start_acquirer(&w, lw, 60000, true);
    CU_ASSERT(tu_wait_children(path, 2));
    TU_ASSERT_INT(tu_harness("kill", server), ==, 0);
    /* The client moves to another server within the session timeout and
     * keeps its session, so the lock stays held. */
    CU_ASSERT(tu_wait_state(&ev, ZKLOCK_RECONNECTED));
    TU_ASSERT_INT(zklock_session_id(holder), ==, id);
    TU_ASSERT_INT(zklock_hold_count(lh), ==, 1);
    CU_ASSERT(!tu_lost_once(&lost));
    TU_ASSERT_INT(tu_acquirer_done(&w), ==, 0);
    TU_ASSERT_INT(tu_count(path), ==, 2);
    /* And the waiter proceeds when it lets go. */
    TU_ASSERT_RC(zklock_release(lh), ZKLOCK_OK);
    TU_ASSERT_RC(tu_join_acquirer(&w), ZKLOCK_OK);
    zklock_free(lh);
    zklock_free(lw);
    zklock_session_close(holder);
    zklock_session_close(waiter);
    tu_assert_clean(path);
    bring_back(server);
}

/* ---- a paused server ---------------------------------------------------------------- */

static void test_paused_server(void)
{
    struct tu_events ev = TU_EVENTS_INIT;
    const char *path = tu_path("pause");
    zklock_session_t *s;
    zklock_t *l;
    int server = 0;

    s = session_on_follower(&ev, &server);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    l = tu_mutex(s, path, NULL);
    TU_REQUIRE_RC(zklock_acquire(l, -1), ZKLOCK_OK);
    TU_ASSERT_INT(tu_harness("pause", server), ==, 0);
    /* The client stops hearing from its server, moves on, keeps the lock. */
    CU_ASSERT(tu_wait_state(&ev, ZKLOCK_SUSPENDED));
    CU_ASSERT(tu_wait_state(&ev, ZKLOCK_RECONNECTED));
    TU_ASSERT_INT(zklock_hold_count(l), ==, 1);
    TU_ASSERT_INT(tu_harness("resume", server), ==, 0);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_acquire(l, 10000), ZKLOCK_OK);
    TU_ASSERT_RC(zklock_release(l), ZKLOCK_OK);
    zklock_free(l);
    zklock_session_close(s);
    tu_assert_clean(path);
}

static const tu_test_t ensemble_tests[] = {
    {"follower_kill_under_holder", test_follower_kill_under_holder},
    {"paused_server", test_paused_server},
    {"leader_kill_with_8_contenders", test_leader_kill_with_8_contenders},
    {NULL, NULL},
};

int main(void)
{
    const tu_suite_t suites[] = {{"ensemble", ensemble_tests}, {NULL, NULL}};
    int rc = tu_main(suites, true);
    tu_zk_close();
    return rc;
}
