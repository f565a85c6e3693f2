/* job.h: zklock's COMMAND as a job of its own, as shells and timeout(1)
 * run one.
 *
 * COMMAND runs in a process group of its own, so that zklock can stop the
 * whole job (a shell script and everything it started) when the lock is
 * lost, and so that a terminal's Ctrl-C reaches it once, not once from the
 * terminal and again through zklock. zklock is a child subreaper: what the
 * job leaves running when its leader ends becomes zklock's child, and
 * zklock reaps it.
 *
 * On a terminal, COMMAND's group is the terminal's foreground group while
 * zklock is in the foreground; when COMMAND is stopped (Ctrl-Z), zklock
 * stops too, so that the shell gets control back, and continues COMMAND
 * when it is continued itself (fg, bg). */
#ifndef ZKLOCK_TOOLS_JOB_H
#define ZKLOCK_TOOLS_JOB_H

#include <stdbool.h>
#include <sys/types.h>

struct job {
    pid_t pgid;  /* the leader's pid, which is also its group's id */
    int tty;     /* zklock's standard input if it is a terminal, else -1 */
    bool ended;  /* the leader ended; status is its wait status */
    int status;
};

/* Makes zklock a subreaper and notes the terminal. Before job_start. */
void job_init(struct job *j);

/* Starts argv in a new process group with default signal dispositions and
 * mask, giving it the terminal if zklock is in the terminal's foreground.
 * Returns 0, or the errno of the failure (ENOENT: not found). */
int job_start(struct job *j, char **argv, char **env);

/* Reaps every child that changed state: the leader (its status is kept)
 * and what the job left behind. Returns true if the leader was stopped. */
bool job_reap(struct job *j);

/* Sends sig to the whole group; nothing once the group is empty. */
void job_signal(const struct job *j, int sig);

/* True when no process of the group is left. */
bool job_empty(const struct job *j);

/* The leader was stopped: stop zklock's own group as the terminal would
 * have, and once continued, continue the job (job_resume). Without a
 * terminal there is no job control: whoever stopped COMMAND continues it. */
void job_suspend(struct job *j);

/* zklock was continued: give the job the terminal if zklock is in the
 * foreground, and continue its group. */
void job_resume(struct job *j);

/* Takes the terminal back from the job's group if it has it (the job
 * ended or stopped). */
void job_untty(const struct job *j);

#endif
