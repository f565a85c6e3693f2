/* job.c: zklock's COMMAND as a job of its own (see job.h). */
#include "config.h"

#include "job.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* glibc 2.35 can hand the terminal over in the child, between its setpgid
 * and its exec, so that COMMAND never runs without it. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define TTY_IN_CHILD 1
#endif

void job_init(struct job *j)
{
    *j = (struct job){.pgid = -1, .tty = isatty(STDIN_FILENO) ? STDIN_FILENO : -1};
    /* What the job leaves running when its leader ends becomes ours: we can
     * reap it, and the group cannot hide behind init. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
}

static bool in_foreground(const struct job *j)
{
    return j->tty >= 0 && tcgetpgrp(j->tty) == getpgrp();
}

/* zklock blocks SIGTTOU, so that it may set the terminal's foreground
 * group from the background (after a stop) without being stopped. */
static void give_terminal(const struct job *j, pid_t pgid)
{
    tcsetpgrp(j->tty, pgid);
}

int job_start(struct job *j, char **argv, char **env)
{
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    bool foreground = in_foreground(j);
    sigset_t none, all;
    pid_t pid;
    int rc;

    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0); /* a group of its own */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                        POSIX_SPAWN_SETPGROUP);
    posix_spawn_file_actions_init(&actions);
#ifdef TTY_IN_CHILD
    if (foreground)
        posix_spawn_file_actions_addtcsetpgrp_np(&actions, j->tty);
#endif
    rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv, env);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc)
        return rc;
    j->pgid = pid;
#ifndef TTY_IN_CHILD
    if (foreground)
        give_terminal(j, pid); /* COMMAND may have stopped on it already: job_resume then */
#endif
    return 0;
}

bool job_reap(struct job *j)
{
    bool stopped = false;
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
        if (pid != j->pgid)
            continue; /* left behind by the job, or one of its processes stopped */
        if (WIFSTOPPED(status)) {
            stopped = true;
        } else {
            j->ended = true;
            j->status = status;
        }
    }
    return stopped;
}

void job_signal(const struct job *j, int sig)
{
    if (j->pgid > 0)
        kill(-j->pgid, sig);
}

bool job_empty(const struct job *j)
{
    /* Zombies count as members: job_reap() has reaped ours. */
    return j->pgid <= 0 || (kill(-j->pgid, 0) != 0 && errno == ESRCH);
}

void job_suspend(struct job *j)
{
    if (j->tty < 0)
        return;
    job_untty(j);
    /* Returns once we are continued; at once if the stop is ignored (our
     * group is orphaned, or SIGTSTP ignored), and the job goes on then too,
     * as COMMAND's own Ctrl-Z would have been ignored. */
    kill(0, SIGTSTP);
    job_resume(j);
}

void job_resume(struct job *j)
{
    if (j->pgid <= 0)
        return;
    if (!j->ended && in_foreground(j))
        give_terminal(j, j->pgid);
    job_signal(j, SIGCONT);
}

void job_untty(const struct job *j)
{
    if (j->tty >= 0 && j->pgid > 0 && tcgetpgrp(j->tty) == j->pgid)
        give_terminal(j, getpgrp());
}
