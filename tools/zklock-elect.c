/* zklock-elect: campaign in a ZooKeeper leader election and run a command
 * while leading (hold.c, as zklock does for a lock), or follow who leads
 * (-l), as etcdctl elect does. */
#include "config.h"

#include "escape.h"
#include "hold.h"

#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tool_name = "zklock-elect";

static const char usage_text[] =
    "Usage: zklock-elect [OPTION]... PATH VALUE [--] [COMMAND [ARG]...]\n"
    "       zklock-elect -l [OPTION]... PATH\n"
    "Campaign in the leader election PATH with VALUE (an address, say: what the others\n"
    "are told the leader is) and, once leading, run COMMAND; without COMMAND, print\n"
    "\"leader\" and lead until interrupted, then resign. With -l, print the leader's VALUE\n"
    "now and at every change, until interrupted.\n"
    "\n"
    "  -s, --servers HOSTS          ZooKeeper servers, host:port,... (default $ZKLOCK_SERVERS,\n"
    "                               then 127.0.0.1:2181)\n"
    "  -l, --listen                 follow the leader instead of campaigning\n"
    "  -j, --json                   with -l: JSON Lines (one JSON object per line)\n"
    "      --kazoo                  kazoo's Election on the wire (default: Curator's\n"
    "                               LeaderLatch)\n"
    "  -t, --timeout SECONDS        give up if not leading within SECONDS (0: only if nobody\n"
    "                               leads; default: wait forever)\n"
    "  -E, --conflict-exit-code N   exit with N (0-255) when giving up so (default 1)\n"
    "      --session-timeout MS     ZooKeeper session timeout, 1-3600000 (default 10000):\n"
    "                               how long a dead leader keeps the others waiting\n"
    "      --connect-timeout SECONDS  how long to try to reach a server (default 10)\n"
    "      --lease strict|session   strict (default): heartbeat writes keep a lease, and a\n"
    "                               leader cut off is told before anyone else can lead;\n"
    "                               session: no heartbeat writes, but leadership is lost\n"
    "                               only when the session ends, which a leader cut off may\n"
    "                               learn after another leads: check ZKLOCK_FENCE\n"
    "      --kill-after SECONDS     if leadership is lost, SIGKILL what is left of COMMAND's\n"
    "                               process group this long after SIGTERM (default 10)\n"
    "      --on-suspend stop|continue  while the connection to ZooKeeper is lost, stop\n"
    "                               COMMAND's group, and continue it when the session is\n"
    "                               back (default: continue)\n"
    "      --max-hold SECONDS       lead at most SECONDS (fractions allowed): then stop\n"
    "                               COMMAND's group as when leadership is lost, step down\n"
    "                               once it is gone (the next participant leads), and exit\n"
    "                               with 124\n"
    "      --revocable              resign when asked (zklock-ls --revoke, Curator's Revoker\n"
    "                               on the leader's node): COMMAND's group is stopped as on\n"
    "                               a loss, the leader resigns, and zklock-elect exits 79\n"
    "  -v, --verbose                say what happens on stderr\n"
    "  -q, --quiet                  print nothing but usage errors (the exit status tells)\n"
    "  -h, --help                   show this help and exit\n"
    "  -V, --version                show the version and exit\n"
    "\n"
    TOOL_CREDENTIAL_HELP
    TOOL_ACL_HELP
    "\n"
    "COMMAND runs as zklock(1) runs it: with ZKLOCK_PATH and ZKLOCK_FENCE (the leader's\n"
    "token, larger for every new leader) in its environment, in a process group of its\n"
    "own that gets the signals sent to zklock-elect; if leadership is lost (the session\n"
    "expired, the node was deleted, or no word from ZooKeeper for nearly a session\n"
    "timeout: then before anyone else can lead; with --lease session only when the session\n"
    "ends, maybe after), the group gets SIGTERM, then SIGKILL after\n"
    "--kill-after, and zklock-elect exits with 75. If zklock-elect itself dies (kill -9,\n"
    "the OOM killer), its watchdog stops the group before anyone else can lead.\n"
    "\n"
    "Exit status: COMMAND's; 0 when interrupted while leading without COMMAND (or while\n"
    "listening); the conflict code (1) at the timeout; 64 bad usage; 65 invalid path; 69\n"
    "ZooKeeper unreachable or failing; 70 internal error; 71 system error; 75 leadership\n"
    "lost; 77 not allowed by an ACL, or the credentials were rejected; 79 --revocable and\n"
    "asked to resign; 124 --max-hold passed; 126/127 COMMAND cannot run / not found;\n"
    "128+N when signal N arrived before leading.\n"
    "\n"
    "Examples:\n"
    "  zklock-elect /services/billing/leader 10.0.0.7:8080 ./billing --serve\n"
    "  zklock-elect -l /services/billing/leader\n";

struct options {
    struct hold_options hold;
    bool listen, json;
};

static void usage_error(const char *msg) __attribute__((noreturn));
static void usage_error(const char *msg)
{
    tool_die(EXIT_USAGE, "%s (try 'zklock-elect --help')", msg);
}

static void parse(int argc, char **argv, struct options *o)
{
    static const struct option longs[] = {
        HOLD_OPTIONS,
        {"listen", no_argument, NULL, 'l'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        TOOL_CREDENTIAL_OPTIONS,
        TOOL_ACL_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    struct hold_options *h = &o->hold;
    int c;
    bool dashes;

    *o = (struct options){.hold = hold_defaults('e')};
    opterr = 0;
    /* '+': options end at PATH; what follows VALUE is the command's */
    while ((c = getopt_long(argc, argv, "+:s:ljt:E:vqhV", longs, NULL)) != -1) {
        if (hold_option(h, c, optarg, "zklock-elect"))
            continue;
        switch (c) {
        case 'l': o->listen = true; break;
        case 'j': o->json = true; break;
        case 'h': fputs(usage_text, stdout); exit(0);
        case 'V': printf("zklock-elect %s\n", zklock_version()); exit(0);
        default:
            if (!tool_security_option(&h->sec, c, optarg))
                tool_bad_option(c, argv, "zklock-elect");
        }
    }
    hold_check_options(h, "zklock-elect");
    if (o->json && !o->listen)
        usage_error("--json goes with -l (--listen)");
    if (optind >= argc)
        usage_error(o->listen ? "missing PATH" : "missing PATH and VALUE");
    h->path = argv[optind++];
    h->servers = tool_servers(h->servers);
    if (o->listen) {
        if (optind < argc)
            usage_error("-l takes PATH only");
        return;
    }
    if (optind >= argc)
        usage_error("missing VALUE");
    h->identity = argv[optind++];
    if (strlen(h->identity) > ZKLOCK_DATA_MAX)
        tool_die(EXIT_USAGE, "VALUE: %zu bytes, more than the %d a node holds (try 'zklock-elect --help')",
                 strlen(h->identity), ZKLOCK_DATA_MAX);
    dashes = optind < argc && strcmp(argv[optind], "--") == 0;
    optind += dashes;
    if (optind < argc)
        hold_check_command(argv[optind], dashes, "zklock-elect", "PATH");
    h->command = optind < argc ? argv + optind : NULL;
}

/* ---- -l: following the leader ------------------------------------------------------------ */

/* One line: the leader's value (escaped), or that nobody leads. */
static void print_leader(const char *path, const char *value, size_t len, int64_t token,
                         bool json)
{
    if (json) {
        json_t *o = json_object();
        char *line;
        if (!o || json_object_set_new(o, "path", tool_text_for_json(path, strlen(path))) != 0 ||
            json_object_set_new(o, "leader", value ? tool_text_for_json(value, len) : json_null()) != 0 ||
            json_object_set_new(o, "token", json_integer(token)) != 0 || !(line = tool_json_line(o)))
            tool_die(EXIT_OSERR, "out of memory");
        puts(line);
        free(line);
        json_decref(o);
    } else if (value) {
        char *text = tool_text_for_terminal(value, len, 0);
        if (!text)
            tool_die(EXIT_OSERR, "out of memory");
        puts(text);
        free(text);
    } else {
        puts("(no leader)");
    }
    fflush(stdout);
}

/* What the listener has printed, and what ends it. */
struct listener {
    bool json;
    bool printed;
    char *shown; /* the value printed last (NULL: nobody) */
    size_t shown_len;
    int64_t shown_token;
    int said;    /* the failure said last, while it lasts */
    int refused; /* an ACL's refusal: the end, said by tool_read_failed */
};

static bool same_leader(const struct listener *ln, const char *value, size_t len, int64_t token)
{
    if (!ln->printed || token != ln->shown_token || (value == NULL) != (ln->shown == NULL))
        return false;
    return !value || (len == ln->shown_len && memcmp(value, ln->shown, len) == 0);
}

/* The follower's news: a leader, nobody, or why it cannot tell (a failure is
 * said once while it lasts; the follower tries again by itself). Runs inside
 * zklock_session_dispatch(), on the main thread. */
static void on_leader(const char *path, const void *value, size_t len, int64_t token, void *ctx)
{
    struct listener *ln = ctx;

    if (!value && token < 0) {
        if (token == ZNOAUTH)
            ln->refused = ZNOAUTH;
        else if (token != ln->said)
            tool_say("%s: %s (trying again)", path, zklock_strerror((int)token));
        ln->said = (int)token;
        return;
    }
    ln->said = ZKLOCK_OK;
    if (same_leader(ln, value, len, token))
        return;
    print_leader(path, value, len, token, ln->json);
    free(ln->shown);
    ln->shown = value ? malloc(len + 1) : NULL;
    if (value && !ln->shown)
        tool_die(EXIT_OSERR, "out of memory");
    if (value)
        memcpy(ln->shown, value, len + 1); /* value[len] is a NUL */
    ln->shown_len = len;
    ln->shown_token = token;
    ln->printed = true;
}

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    interrupted = sig;
}

/* -l ends with a signal (exit 0). They are blocked from before the session
 * opens, so that no thread of zklock's or ZooKeeper's takes them, and let in
 * only while the main thread waits (ppoll), so that none is missed between
 * a look at the flag and the wait. *waiting: the mask to wait with. */
static void catch_interrupts(sigset_t *waiting)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa = {.sa_handler = on_interrupt}; /* no SA_RESTART: ppoll returns */
    sigset_t block;

    sigemptyset(&block);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        sigaction(sigs[i], &sa, NULL);
        sigaddset(&block, sigs[i]);
    }
    pthread_sigmask(SIG_BLOCK, &block, waiting);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigdelset(waiting, sigs[i]);
}

/* Prints the leader, then again at every change (a new leader, a new value,
 * nobody), until a signal ends us. Nothing polls ZooKeeper and no thread
 * waits: a follower (zklock_leader_follow) watches the election, and its news
 * is dispatched here, in the loop. */
static int listen_to(zklock_session_t *s, const char *path, bool json,
                     const struct tool_security *sec, const sigset_t *waiting)
{
    struct listener ln = {.json = json};
    struct pollfd p = {zklock_session_fd(s), POLLIN, 0};
    zklock_follow_t *f;
    int rc = zklock_leader_follow(s, path, on_leader, &ln, &f);

    if (rc != ZKLOCK_OK)
        tool_die(EXIT_OSERR, "cannot follow %s: %s", path, zklock_strerror(rc));
    while (!interrupted && !ln.refused) {
        if (ppoll(&p, 1, NULL, waiting) > 0)
            zklock_session_dispatch(s);
    }
    zklock_follow_stop(f);
    free(ln.shown);
    if (ln.refused)
        return tool_read_failed(s, path, ln.refused, sec);
    zklock_session_close(s);
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    zklock_session_opts_t so = {0};
    zklock_session_t *s;
    sigset_t waiting;

    parse(argc, argv, &o);
    if (!o.listen)
        return hold_run(&o.hold);
    tool_quiet = o.hold.quiet;
    tool_check_path(o.hold.path);
    tool_security_load(&o.hold.sec, &so);
    tool_zk_log(o.hold.verbose);
    so.connect_timeout_ms = o.hold.connect_s > 0 ? (int)(o.hold.connect_s * 1000) : 1;
    so.timeout_ms = o.hold.session_ms;
    so.lease = o.hold.lease;
    so.dispatch = ZKLOCK_DISPATCH_POLL; /* the follower's news comes in our loop */
    catch_interrupts(&waiting);
    s = tool_open(o.hold.servers, &so, &o.hold.sec);
    tool_security_forget(&o.hold.sec);
    return listen_to(s, o.hold.path, o.json, &o.hold.sec, &waiting);
}
