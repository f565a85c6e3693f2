/* testutil.c: CUnit runner with a watchdog, and ZooKeeper helpers. */
#include "testutil.h"

#include <CUnit/Basic.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define TU_WATCHDOG_S 180

/* ---- time and polling ------------------------------------------------------------ */

int64_t tu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool tu_past(void *at_ms)
{
    return tu_now_ms() >= *(int64_t *)at_ms;
}

bool tu_wait_until(bool (*cond)(void *), void *arg, int ms)
{
    int64_t deadline = tu_now_ms() + ms;
    struct timespec poll_interval = {0, 5 * 1000 * 1000};

    for (;;) {
        if (cond(arg))
            return true;
        if (tu_now_ms() >= deadline)
            return false;
        nanosleep(&poll_interval, NULL); /* poll the condition until the deadline */
    }
}

void tu_slow_call(struct tu_slow *sl)
{
    struct timespec pause = {0, 300 * 1000 * 1000};

    __atomic_add_fetch(&sl->calls, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&sl->started, 1, __ATOMIC_SEQ_CST);
    nanosleep(&pause, NULL); /* deliberately slow: the call under test must wait for it */
    __atomic_store_n(&sl->finished, 1, __ATOMIC_SEQ_CST);
}

bool tu_slow_started(void *sl)
{
    return __atomic_load_n(&((struct tu_slow *)sl)->started, __ATOMIC_SEQ_CST) != 0;
}

/* ---- runner --------------------------------------------------------------------------- */

static const tu_suite_t *all_suites;
static const char *running = "?";

static void on_alarm(int sig)
{
    char msg[256];
    int n = snprintf(msg, sizeof msg, "\nWATCHDOG: test '%s' ran for more than %d s\n",
                     running, TU_WATCHDOG_S);
    if (write(STDERR_FILENO, msg, (size_t)n) < 0)
        _exit(3);
    signal(sig, SIG_DFL);
    abort();
}

void tu_skip(const char *why)
{
    printf("\nok - %s/%s # SKIP %s\n", CU_get_current_suite()->pName, running, why);
}

/* Every test runs through this: it finds the test by its CUnit name. */
static void trampoline(void)
{
    const char *suite = CU_get_current_suite()->pName;
    const char *test = CU_get_current_test()->pName;

    for (const tu_suite_t *s = all_suites; s->name; s++) {
        if (strcmp(s->name, suite) != 0)
            continue;
        for (const tu_test_t *t = s->tests; t->name; t++) {
            if (strcmp(t->name, test) == 0) {
                running = t->name;
                alarm(TU_WATCHDOG_S);
                t->fn();
                alarm(0);
                return;
            }
        }
    }
}

static bool selected(const char *suite, const char *test)
{
    const char *only = getenv("ZKLOCK_TEST_ONLY");
    char full[256];

    if (!only || !*only)
        return true;
    snprintf(full, sizeof full, "%s/%s", suite, test);
    return strstr(full, only) != NULL;
}

int tu_main(const tu_suite_t *suites, bool needs_zk)
{
    unsigned failures, chosen = 0;

    setvbuf(stdout, NULL, _IONBF, 0);
    if (needs_zk && !getenv("ZKLOCK_TEST_HOSTS")) {
        printf("SKIP: ZKLOCK_TEST_HOSTS is not set; run under test/zk-harness.sh run\n");
        return 77;
    }
    /* ZooKeeper's client logs every closed socket at ERROR level. */
    zoo_set_debug_level(getenv("ZKLOCK_TEST_ZKLOG") ? ZOO_LOG_LEVEL_INFO : 0);
    signal(SIGALRM, on_alarm);
    signal(SIGPIPE, SIG_IGN);
    all_suites = suites;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    for (const tu_suite_t *s = suites; s->name; s++) {
        CU_pSuite cs = CU_add_suite(s->name, NULL, NULL);
        for (const tu_test_t *t = s->tests; t->name; t++)
            if (selected(s->name, t->name) && CU_add_test(cs, t->name, trampoline))
                chosen++;
    }
    if (chosen == 0) {
        /* a misspelt name would otherwise run nothing, and pass */
        const char *only = getenv("ZKLOCK_TEST_ONLY");
        printf("FAIL: no test to run (ZKLOCK_TEST_ONLY=%s names none of this program's)\n",
               only ? only : "");
        CU_cleanup_registry();
        return 1;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}

/* ---- processes ------------------------------------------------------------------------ */

int tu_spawn(char *const argv[])
{
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
    if (rc != 0) {
        fprintf(stderr, "spawn %s: %s\n", argv[0], strerror(rc));
        return -1;
    }
    return (int)pid;
}

/* Waits up to ms for pid; its status, or -1 (then it is killed). */
static int wait_pid_for(pid_t pid, int ms)
{
    int64_t deadline = tu_now_ms() + ms;
    struct timespec tick = {0, 50 * 1000 * 1000};
    int status;

    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (got < 0 && errno != EINTR)
            return -1;
        if (tu_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&tick, NULL); /* polls the child until its deadline */
    }
}

void tu_dump_threads(const char *why)
{
    char pid[32];
    char *argv[] = {"gdb", "-p", pid, "-batch", "-nx", "-ex", "set pagination off",
                    "-ex", "thread apply all bt", NULL};
    posix_spawn_file_actions_t fa;
    pid_t child;
    int rc;

    fprintf(stderr, "\n==== %s: the stacks of every thread (pid %d) ====\n", why, (int)getpid());
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    /* Yama's ptrace_scope 1 lets only a process's ancestors attach to it. */
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    rc = posix_spawnp(&child, "gdb", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "(no stacks: cannot run gdb: %s)\n", strerror(rc));
        return;
    }
    if (wait_pid_for(child, 60000) != 0)
        fprintf(stderr, "(gdb failed or took more than a minute)\n");
    fprintf(stderr, "==== end of the stacks ====\n");
}

int tu_wait_pid(int pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}
