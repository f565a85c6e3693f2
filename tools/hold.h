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
    int lease; /* --lease: ZKLOCK_LEASE_* */
    double connect_s, kill_after_s;
    bool stop_on_suspend; /* --on-suspend stop */
    double max_hold_s;    /* --max-hold: 0 = none */
    /* --revocable: a request to let go (zklock_revoke, Curator's Revoker)
     * stops COMMAND as a loss does, then releases; exit EXIT_REVOKED */
    bool revocable;
    /* zklock --track-previous, --lock-delay (a mutex only): COMMAND is told
     * how the previous hold ended (ZKLOCK_PREVIOUS) */
    bool track_previous;
    int lock_delay_ms;
    /* NULL (zklock-elect without COMMAND): once held, print "leader" and
     * hold until a signal, then release and exit 0 */
    char **command;
    struct tool_security sec;
};

/* The options zklock and zklock-elect share: put HOLD_OPTIONS in the
 * getopt_long table (short letters s: t: E: v q), and give what getopt_long
 * returns to hold_option() first. */
enum {
    HOLD_OPT_KAZOO = 900,
    HOLD_OPT_SESSION,
    HOLD_OPT_CONNECT,
    HOLD_OPT_KILL_AFTER,
    HOLD_OPT_ON_SUSPEND,
    HOLD_OPT_LEASE,
    HOLD_OPT_MAX_HOLD,
    HOLD_OPT_REVOCABLE,
};
#define HOLD_OPTIONS                                                            \
    {"servers", required_argument, NULL, 's'},                                  \
    {"kazoo", no_argument, NULL, HOLD_OPT_KAZOO},                               \
    {"timeout", required_argument, NULL, 't'},                                  \
    {"conflict-exit-code", required_argument, NULL, 'E'},                       \
    {"session-timeout", required_argument, NULL, HOLD_OPT_SESSION},             \
    {"connect-timeout", required_argument, NULL, HOLD_OPT_CONNECT},             \
    {"kill-after", required_argument, NULL, HOLD_OPT_KILL_AFTER},               \
    {"on-suspend", required_argument, NULL, HOLD_OPT_ON_SUSPEND},               \
    {"lease", required_argument, NULL, HOLD_OPT_LEASE},                         \
    {"max-hold", required_argument, NULL, HOLD_OPT_MAX_HOLD},                   \
    {"revocable", no_argument, NULL, HOLD_OPT_REVOCABLE},                       \
    {"verbose", no_argument, NULL, 'v'},                                        \
    {"quiet", no_argument, NULL, 'q'}

/* The defaults, for `mode`. */
struct hold_options hold_defaults(char mode);
/* Takes one shared option (false: `option` is none of them); a bad value
 * ends the program with EXIT_USAGE, naming `tool` for its --help. */
bool hold_option(struct hold_options *o, int option, const char *arg, const char *tool);
/* After the options: refuses what does not go together (-v with -q). */
void hold_check_options(const struct hold_options *o, const char *tool);
/* Refuses a COMMAND that looks like an option given after path (the lock
 * path, where options end), unless a "--" came before it. */
void hold_check_command(const char *command, bool after_dashes, const char *tool,
                        const char *path);

/* Runs it all; returns the exit status (see zklock(1)). */
int hold_run(struct hold_options *o);

#endif
