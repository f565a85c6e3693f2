/* guard.h: the watchdog that stops COMMAND's process group when zklock
 * (or zklock-elect) dies, however it dies.
 *
 * zklock holds the lock for COMMAND through its own ZooKeeper session. If
 * zklock dies (SIGKILL, the OOM killer, a crash), the session expires a
 * session timeout later and another host takes the lock, while COMMAND, in
 * a process group of its own, would run on without it: two active workers.
 * PR_SET_PDEATHSIG would reach COMMAND's first process only, not what it
 * started.
 *
 * The guard is a small process that zklock forks before it starts any
 * thread. It reads a pipe whose write end zklock alone holds (close-on-
 * exec: COMMAND never has it), so the pipe's end of file says that zklock
 * is gone, whatever ended it. zklock tells it through the pipe which
 * process group to stop then and how long SIGTERM may take before SIGKILL
 * (the grace); the guard stops that group and exits. It lives in a session
 * of its own, so that neither a signal to zklock's process group (kill -9
 * -PGID, a shell's kill %1) nor the terminal reaches it, and it is not in
 * COMMAND's group either (it would stop itself first).
 *
 * What it cannot do: stop a process that left COMMAND's group (setsid,
 * setpgid: a daemon), survive a SIGKILL sent to it by its own pid, or act
 * while zklock is stopped (SIGSTOP) rather than dead. */
#ifndef ZKLOCK_TOOLS_GUARD_H
#define ZKLOCK_TOOLS_GUARD_H

#include <sys/types.h>

struct guard {
    pid_t pid;    /* the guard process; -1 when there is none */
    int fd;       /* the pipe's write end; -1 once closed */
    pid_t pgid;   /* what it was last told: the group to stop (0: none) */
    int grace_ms; /* ... and SIGKILL this long after SIGTERM (0: SIGKILL at once) */
};

/* Forks the guard; command names COMMAND in what it says. Returns once the
 * guard is in place (a session of its own, named zklock-guard), so that
 * nothing zklock does after can run unguarded. Must run before the
 * program starts any thread (the child only reads, signals and exits, but
 * a fork copies the memory of locks other threads may hold). Returns 0, or
 * the errno of the failure (ECHILD: the guard died before it was in place). */
int guard_start(struct guard *g, const char *command);

/* If zklock dies from now on, the guard stops process group pgid
 * (SIGTERM and SIGCONT, SIGKILL grace_ms later if anything is left; with
 * grace_ms 0, SIGKILL at once). pgid 0: nothing to stop. Says it only when
 * it changes. */
void guard_watch(struct guard *g, pid_t pgid, int grace_ms);

/* Closes the pipe and waits for the guard to exit, so that no process is
 * left: at once if it has nothing to stop (guard_watch(g, 0, 0) first when
 * zklock ends normally), else once it has stopped the group. Idempotent;
 * also runs at exit(), so that a tool_die() stops COMMAND too. */
void guard_end(struct guard *g);

#endif
