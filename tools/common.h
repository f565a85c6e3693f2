/* common.h: what the zklock utilities share. */
#ifndef ZKLOCK_TOOLS_COMMON_H
#define ZKLOCK_TOOLS_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include <zklock.h>

/* sysexits-style codes (sysexits.h), spelled out so the man pages can. */
enum {
    EXIT_USAGE = 64,       /* EX_USAGE: bad command line */
    EXIT_BADPATH = 65,     /* EX_DATAERR: the lock path is not valid */
    EXIT_UNREACHABLE = 69, /* EX_UNAVAILABLE: no server answered, or ZooKeeper failed */
    EXIT_INTERNAL = 70,    /* EX_SOFTWARE: an internal error */
    EXIT_OSERR = 71,       /* EX_OSERR: the system refused (fork, threads) */
    EXIT_LOST = 75,        /* EX_TEMPFAIL: the lock was lost while the command ran */
    EXIT_CANNOT_RUN = 126, /* the command exists but cannot run */
    EXIT_NOT_FOUND = 127   /* the command was not found */
};

extern const char *tool_name;
/* -q: tool_say() prints nothing, tool_die() only usage errors (64, 65). */
extern bool tool_quiet;

/* Prints "NAME: message" on stderr and exits with code. */
void tool_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* "NAME: message" on stderr. */
void tool_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Dies with a usage error for what getopt_long() returned as c ('?' or
 * ':'), in one line of ours: run getopt with opterr = 0 and a ':' leading
 * the option string (after any '+'). tool is the command to ask for --help. */
void tool_bad_option(int c, char **argv, const char *tool) __attribute__((noreturn));

/* The servers: the option, else $ZKLOCK_SERVERS, else 127.0.0.1:2181. */
const char *tool_servers(const char *option);

/* Parses a non-negative number (seconds may have a fraction) or dies with
 * a usage error naming the option. */
/* About 23 days: the most that fits the library's int milliseconds. */
#define TOOL_MAX_SECONDS 2000000
double tool_seconds(const char *option, const char *value);
long tool_integer(const char *option, const char *value, long min, long max);

/* Opens a session or dies with a clear line (exit 69 when no server answers,
 * 64 for an unusable server list). */
zklock_session_t *tool_open(const char *servers, const zklock_session_opts_t *opts);

/* Dies with 65 if path is not a valid lock path. */
void tool_check_path(const char *path);

/* A lock node's identity (its data, which whoever created the node chose)
 * as the tools show it in a table or a message: escaped as
 * tool_text_for_terminal() says, cut at TOOL_IDENTITY_SHOWN characters;
 * if_empty when it is empty. Dies if out of memory; the caller frees it. */
#define TOOL_IDENTITY_SHOWN 80
char *tool_identity_text(const char *identity, const char *if_empty);

/* "1.5s", "3m07s", "2h05m": a short age. */
void tool_age(char *buf, size_t len, int64_t ms);

/* Milliseconds since the epoch (the wall clock, as ZooKeeper's ctime). */
int64_t tool_wall_ms(void);

/* zklock's quiet default for ZooKeeper's client log; -v shows warnings. */
void tool_zk_log(bool verbose);

#endif
