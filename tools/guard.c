/* guard.c: the watchdog that stops COMMAND's process group when zklock
 * dies (see guard.h). */
#include "config.h"

#include "guard.h"
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What zklock tells the guard: the group to stop if zklock dies, and how
 * long SIGTERM may take. A seqpacket socket keeps each message whole, and
 * sending on it with MSG_NOSIGNAL does not kill zklock with SIGPIPE should
 * the guard be gone. */
struct order {
    int32_t pgid;
    int32_t grace_ms;
};

/* While SIGTERM has its grace, how often the guard looks whether the group
 * is empty: it has no other way to learn it (the processes are not its
 * children). */
#define GROUP_POLL_MS 10

/* The guard guard_end() runs for at exit() (one per program). */
static struct guard *at_exit_guard;

/* ---- the guard process ----------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

/* Zombies count as members until their new parent reaps them: at worst
 * the group gets a SIGKILL it no longer needs. */
static bool group_gone(pid_t pgid)
{
    return kill(-pgid, 0) != 0 && errno == ESRCH;
}

/* zklock is gone: stop the group it last named. */
static void stop_group(const struct order *o, pid_t zklock, const char *command)
{
    int64_t deadline;

    if (o->pgid <= 0 || group_gone(o->pgid))
        return;
    if (o->grace_ms <= 0) {
        tool_say("%s (pid %d) ended while %s ran: SIGKILL to its process group",
                 tool_name, (int)zklock, command);
        kill(-o->pgid, SIGKILL);
        return;
    }
    tool_say("%s (pid %d) ended while %s ran: SIGTERM to its process group, SIGKILL after %.1fs",
             tool_name, (int)zklock, command, o->grace_ms / 1000.0);
    kill(-o->pgid, SIGTERM);
    kill(-o->pgid, SIGCONT); /* a stopped process must run to see it */
    deadline = now_ms() + o->grace_ms;
    while (!group_gone(o->pgid) && now_ms() < deadline)
        pause_ms(GROUP_POLL_MS);
    if (!group_gone(o->pgid))
        kill(-o->pgid, SIGKILL);
}

/* Default dispositions and no blocked signal, but SIGPIPE: stderr may be a
 * pipe nobody reads any more. */
static void reset_signals(void)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN};
    sigset_t none;

    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, &dfl, NULL); /* fails for SIGKILL, SIGSTOP and glibc's own: fine */
    sigaction(SIGPIPE, &ign, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* A session of its own (no terminal, no signal to zklock's group), stdin
 * and stdout on /dev/null, stderr kept for its one line, no other
 * descriptor held but the socket, which ends up as 3. */
static int detach(int sock)
{
    int null = open("/dev/null", O_RDWR);
    int keep = fcntl(sock, F_DUPFD, 3);

    setsid();
    prctl(PR_SET_NAME, "zklock-guard");
    if (chdir("/") != 0) {
        /* keeps zklock's directory busy for as long as zklock does */
    }
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
    }
    if (keep < 0)
        _exit(0); /* no descriptor left: it could not hear zklock end */
    if (keep != 3) {
        dup2(keep, 3);
        close(keep);
    }
#ifdef SYS_close_range
    syscall(SYS_close_range, 4U, ~0U, 0U);
#endif
    return 3;
}

/* The one byte the guard sends once it is in place. */
static const char ready = 'R';

static void guard_main(int sock, pid_t zklock, const char *command)
{
    struct order o = {0, 0}, got;
    ssize_t n;

    reset_signals();
    sock = detach(sock);
    /* In place (a session and a name of its own): zklock may go on. */
    send(sock, &ready, 1, MSG_NOSIGNAL);
    /* Until end of file: zklock closed its end, or died. */
    while ((n = recv(sock, &got, sizeof got, 0)) != 0) {
        if (n == (ssize_t)sizeof got)
            o = got;
        else if (n < 0 && errno != EINTR)
            break; /* cannot happen on a socket we hold: take it as the end */
    }
    stop_group(&o, zklock, command);
    _exit(0);
}

/* ---- zklock's side ----------------------------------------------------------------- */

static void end_at_exit(void)
{
    if (at_exit_guard)
        guard_end(at_exit_guard);
}

/* Until the guard has left zklock's process group (and named itself), a
 * kill of that group would kill it too, and COMMAND would run unguarded:
 * zklock goes on only once the guard says it is in place. */
static int await_ready(struct guard *g)
{
    char got = 0;
    ssize_t n;

    while ((n = recv(g->fd, &got, 1, 0)) < 0 && errno == EINTR)
        ;
    if (n == 1 && got == ready)
        return 0;
    guard_end(g); /* it died before it was in place */
    return n < 0 ? errno : ECHILD;
}

int guard_start(struct guard *g, const char *command)
{
    int sv[2];
    pid_t zklock = getpid();

    *g = (struct guard){.pid = -1, .fd = -1};
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return errno;
    g->pid = fork();
    if (g->pid < 0) {
        int err = errno;
        close(sv[0]);
        close(sv[1]);
        return err;
    }
    if (g->pid == 0) {
        close(sv[1]); /* the end that only zklock may hold */
        guard_main(sv[0], zklock, command);
    }
    close(sv[0]);
    g->fd = sv[1];
    at_exit_guard = g;
    atexit(end_at_exit);
    return await_ready(g);
}

void guard_watch(struct guard *g, pid_t pgid, int grace_ms)
{
    struct order o = {(int32_t)pgid, grace_ms < 0 ? 0 : (int32_t)grace_ms};

    if (g->fd < 0 || (pgid == g->pgid && o.grace_ms == g->grace_ms))
        return;
    g->pgid = pgid;
    g->grace_ms = o.grace_ms;
    if (send(g->fd, &o, sizeof o, MSG_NOSIGNAL) == (ssize_t)sizeof o)
        return;
    /* Someone killed it: say so once, as its protection is gone. */
    if (pgid > 0)
        tool_say("warning: the watchdog (pid %d) is gone: if %s dies, nothing stops COMMAND",
                 (int)g->pid, tool_name);
    close(g->fd);
    g->fd = -1;
}

void guard_end(struct guard *g)
{
    if (g->fd >= 0) {
        close(g->fd);
        g->fd = -1;
    }
    if (g->pid > 0) {
        while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        g->pid = -1;
    }
    if (at_exit_guard == g)
        at_exit_guard = NULL; /* g may be gone by exit() */
}
