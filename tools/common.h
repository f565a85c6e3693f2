/* common.h: what the zklock utilities share. */
#ifndef ZKLOCK_TOOLS_COMMON_H
#define ZKLOCK_TOOLS_COMMON_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
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
    EXIT_NOPERM = 77,      /* EX_NOPERM: an ACL refused, or the server rejected the credentials */
    EXIT_MAX_HOLD = 124,   /* --max-hold passed (timeout(1)'s status) */
    EXIT_REVOKED = 79,     /* --revocable: someone asked for the lock; COMMAND was stopped */
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
/* --lease: "strict" or "session" as ZKLOCK_LEASE_*, or dies with a usage
 * error naming `tool` for its --help. */
int tool_lease(const char *value, const char *tool);

/* ---- credentials, ACLs, TLS ------------------------------------------------------- */

/* Long options of the tools, in their getopt_long tables: every tool takes
 * TOOL_CREDENTIAL_OPTIONS, the tools that create nodes TOOL_ACL_OPTIONS too;
 * tool_security_option() takes what getopt_long returns for them. */
enum {
    TOOL_OPT_AUTH_FILE = 1000,
    TOOL_OPT_TLS_CA,
    TOOL_OPT_TLS_CERT,
    TOOL_OPT_TLS_KEY,
    TOOL_OPT_TLS_KEY_PASSWORD_FILE,
    TOOL_OPT_ACL,
    TOOL_OPT_ACL_FILE
};
#define TOOL_CREDENTIAL_OPTIONS                                                 \
    {"auth-file", required_argument, NULL, TOOL_OPT_AUTH_FILE},                 \
    {"tls-ca", required_argument, NULL, TOOL_OPT_TLS_CA},                       \
    {"tls-cert", required_argument, NULL, TOOL_OPT_TLS_CERT},                   \
    {"tls-key", required_argument, NULL, TOOL_OPT_TLS_KEY},                     \
    {"tls-key-password-file", required_argument, NULL, TOOL_OPT_TLS_KEY_PASSWORD_FILE}
#define TOOL_ACL_OPTIONS                                                        \
    {"acl", required_argument, NULL, TOOL_OPT_ACL},                             \
    {"acl-file", required_argument, NULL, TOOL_OPT_ACL_FILE}

/* Their part of --help, a section of its own in each tool's. */
#define TOOL_CREDENTIAL_HELP                                                                \
    "Credentials and TLS (secrets only in files: a command line shows in ps):\n"            \
    "      --auth-file FILE         credentials, one scheme:data per line, e.g.\n"           \
    "                               digest:deploy:s3cret; # comments (default\n"            \
    "                               $ZKLOCK_AUTH_FILE); keep it readable by its owner only\n" \
    "      --tls-ca FILE, --tls-cert FILE, --tls-key FILE\n"                                \
    "                               connect over TLS with these PEM files (all three);\n"    \
    "                               needs a ZooKeeper client built with OpenSSL\n"          \
    "      --tls-key-password-file FILE  the key's password, read from FILE\n"
#define TOOL_ACL_HELP                                                                       \
    "      --acl open|creator       the ACL of the nodes created: open (anyone may do\n"     \
    "                               anything; the default) or creator (all for the\n"       \
    "                               identities of --auth-file, read for anyone)\n"          \
    "      --acl-file FILE          that ACL from FILE, one scheme:id:perms per line as\n"   \
    "                               zkCli's setAcl (perms from crwda); # comments\n"

/* What the options above asked for, and what was read from their files. */
struct tool_security {
    /* from the command line (and $ZKLOCK_AUTH_FILE) */
    const char *auth_file, *acl_file;
    const char *tls_ca, *tls_cert, *tls_key, *tls_key_password_file;
    int acl; /* ZKLOCK_ACL_DEFAULT unless --acl or --acl-file */
    /* read by tool_security_load(); wiped by tool_security_forget() */
    char *auth_text; /* the auth file's bytes, which auth[] points into */
    size_t auth_text_len;
    zklock_auth_t *auth;
    size_t nauth;
    char *tls_key_password;
    char *acl_text; /* the ACL file's bytes, which acl_custom points into */
    struct ACL_vector acl_custom;
};

/* Takes one of the options above (what getopt_long returned, and optarg);
 * false if `option` is not one of them. Dies with 64 on a bad value. */
bool tool_security_option(struct tool_security *sec, int option, const char *arg);

/* Once the command line is parsed: takes $ZKLOCK_AUTH_FILE if there was no
 * --auth-file, checks that the options go together, reads the files
 * (dying with 64, naming the file and line, if one cannot be read or is
 * malformed; warning if the auth file can be read or written by others than
 * its owner) and points opts at what they hold. */
void tool_security_load(struct tool_security *sec, zklock_session_opts_t *opts);

/* Wipes and frees the secrets: call it as soon as the sessions are open (the
 * library keeps a copy of its own). The names of the files stay. */
void tool_security_forget(struct tool_security *sec);

/* Opens a session or dies with a clear line: 69 when no server answers or
 * no server name resolves (naming them), 64 for a malformed server list or
 * TLS this build lacks, 77 when the server rejected the credentials of
 * sec->auth_file. */
zklock_session_t *tool_open(const char *servers, const zklock_session_opts_t *opts,
                            const struct tool_security *sec);

/* Says why taking the lock at path failed with rc (on the session s,
 * still open) and returns the exit status for it: 77 for an ACL's refusal
 * (naming the node whose ACL refused) or rejected credentials, 64 for an
 * ACL the server found invalid, 69 otherwise. */
int tool_acquire_failed(zklock_session_t *s, const char *path, int rc,
                        const struct tool_security *sec);

/* The same for a read of the queue at path (zklock-ls): 77 when an ACL
 * refused, naming the node whose ACL it is, 69 otherwise. */
int tool_read_failed(zklock_session_t *s, const char *path, int rc,
                     const struct tool_security *sec);

/* Dies with 65 if path is not a valid lock path. */
void tool_check_path(const char *path);

/* A lock node's identity (its data, which whoever created the node chose)
 * as the tools show it in a table or a message: escaped as
 * tool_text_for_terminal() says, cut at TOOL_IDENTITY_SHOWN characters;
 * TOOL_NO_IDENTITY when it is empty (the same in every tool: zklock-ls's
 * table, zklock -v). Dies if out of memory; the caller frees it. */
#define TOOL_IDENTITY_SHOWN 80
#define TOOL_NO_IDENTITY "-"
char *tool_identity_text(const char *identity);

/* "1.5s", "3m07s", "2h05m": a short age. */
void tool_age(char *buf, size_t len, int64_t ms);

/* Milliseconds since the epoch (the wall clock, as ZooKeeper's ctime). */
int64_t tool_wall_ms(void);

/* zklock's quiet default for ZooKeeper's client log; -v shows warnings. */
void tool_zk_log(bool verbose);

#endif
