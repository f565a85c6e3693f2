/* hold.h: what zklock and zklock-elect share: take a lock (or lead an
 * election), run COMMAND while it is held, stop COMMAND if the hold is lost,
 * release it when COMMAND ends. */
#ifndef ZKLOCK_TOOLS_HOLD_H
#define ZKLOCK_TOOLS_HOLD_H

#include "common.h"

#include <stdbool.h>

struct hold_options {
    const char *servers, *path, *identity;
    /* 'x', 'r', 'w', 's' (a semaphore of `limit` leases) or 'e' (an election) */
    char mode;
    int limit;
    const char *and_paths[ZKLOCK_MULTI_MAX - 1]; /* --and: taken with path */
    int nand;
    bool kazoo, verbose, quiet;
    double timeout_s; /* < 0: forever */
    int conflict_code, session_ms;
    double connect_s, kill_after_s;
    bool stop_on_suspend; /* --on-suspend stop */
    /* NULL (zklock-elect without COMMAND): once held, print "leader" and
     * hold until a signal, then release and exit 0 */
    char **command;
    struct tool_security sec;
};

/* Runs it all; returns the exit status (see zklock(1)). */
int hold_run(struct hold_options *o);

#endif
