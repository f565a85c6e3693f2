/* common.c: what the zklock utilities share. */
#include "config.h"

#include "common.h"
#include "escape.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool tool_quiet;

static void say(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", tool_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void tool_say(const char *fmt, ...)
{
    va_list ap;
    if (tool_quiet)
        return;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
}

void tool_die(int code, const char *fmt, ...)
{
    va_list ap;
    /* Even -q tells a mistyped command line: nothing ran. */
    if (!tool_quiet || code == EXIT_USAGE || code == EXIT_BADPATH) {
        va_start(ap, fmt);
        say(fmt, ap);
        va_end(ap);
    }
    exit(code);
}

void tool_bad_option(int c, char **argv, const char *tool)
{
    char shortopt[3] = {'-', (char)optopt, '\0'};
    const char *last = argv[optind - 1];

    /* An option missing its argument ends the word just passed; an unknown
     * long option is that word, an unknown short one is optopt. */
    if (c == ':')
        tool_die(EXIT_USAGE, "option '%s' needs an argument (try '%s --help')",
                 strncmp(last, "--", 2) == 0 ? last : shortopt, tool);
    tool_die(EXIT_USAGE, "unknown option '%s' (try '%s --help')", optopt ? shortopt : last, tool);
}

const char *tool_servers(const char *option)
{
    const char *env = getenv("ZKLOCK_SERVERS");
    if (option)
        return option;
    return env && *env ? env : "127.0.0.1:2181";
}

double tool_seconds(const char *option, const char *value)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(value, &end);
    /* At most TOOL_MAX_SECONDS: the library takes milliseconds in an int.
     * Written so that "nan" fails too. */
    if (errno || end == value || *end || !(v >= 0 && v <= TOOL_MAX_SECONDS))
        tool_die(EXIT_USAGE, "%s: '%s' is not a number of seconds from 0 to %d (try --help)",
                 option, value, TOOL_MAX_SECONDS);
    return v;
}

long tool_integer(const char *option, const char *value, long min, long max)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(value, &end, 10);
    if (errno || end == value || *end || v < min || v > max)
        tool_die(EXIT_USAGE, "%s: '%s' is not a number from %ld to %ld (try --help)", option,
                 value, min, max);
    return v;
}

zklock_session_t *tool_open(const char *servers, const zklock_session_opts_t *opts)
{
    zklock_session_t *s;
    int rc = zklock_session_open(&s, servers, opts);

    if (rc == ZKLOCK_ENOSERVER)
        tool_die(EXIT_UNREACHABLE, "no ZooKeeper server answered at %s", servers);
    if (rc == ZKLOCK_EINVAL)
        tool_die(EXIT_USAGE, "cannot use the server list '%s' (host:port,host:port...)", servers);
    if (rc)
        tool_die(EXIT_UNREACHABLE, "cannot open a session at %s: %s", servers,
                 zklock_strerror(rc));
    return s;
}

void tool_check_path(const char *path)
{
    if (zklock_path_check(path) != ZKLOCK_OK)
        tool_die(EXIT_BADPATH,
                 "'%s' is not a lock path (absolute, no '.', '..', empty or trailing "
                 "components, not under /zookeeper)",
                 path);
}

char *tool_identity_text(const char *identity, const char *if_empty)
{
    char *text = *identity ? tool_text_for_terminal(identity, strlen(identity), TOOL_IDENTITY_SHOWN)
                           : strdup(if_empty);
    if (!text)
        tool_die(EXIT_OSERR, "out of memory");
    return text;
}

void tool_age(char *buf, size_t len, int64_t ms)
{
    if (ms < 0)
        ms = 0;
    if (ms < 60000)
        snprintf(buf, len, "%.1fs", (double)ms / 1000);
    else if (ms < 3600000)
        snprintf(buf, len, "%lldm%02llds", (long long)(ms / 60000), (long long)(ms / 1000 % 60));
    else
        snprintf(buf, len, "%lldh%02lldm", (long long)(ms / 3600000),
                 (long long)(ms / 60000 % 60));
}

int64_t tool_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tool_zk_log(bool verbose)
{
    /* The C client logs to stderr, even an ERROR line for every session
     * closed normally: off unless asked for. */
    zoo_set_debug_level(verbose ? ZOO_LOG_LEVEL_WARN : 0);
}
