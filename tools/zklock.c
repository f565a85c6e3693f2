/* zklock: run a command while holding a ZooKeeper lock, like flock(1)
 * across machines. The command line is here; hold.c does the rest. */
#include "config.h"

#include "hold.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tool_name = "zklock";

static const char usage_text[] =
    "Usage: zklock [OPTION]... LOCKPATH [--] COMMAND [ARG]...\n"
    "Run COMMAND while holding the ZooKeeper lock LOCKPATH, like flock(1) across machines.\n"
    "Options go before LOCKPATH.\n"
    "\n"
    "  -s, --servers HOSTS          ZooKeeper servers, host:port,... (default $ZKLOCK_SERVERS,\n"
    "                               then 127.0.0.1:2181)\n"
    "  -x, --exclusive              an exclusive lock (the default; Curator's InterProcessMutex)\n"
    "  -r, --read                   the shared side of a read/write lock\n"
    "  -w, --write                  the exclusive side of a read/write lock\n"
    "                               (Curator's InterProcessReadWriteLock; any zklock modes on\n"
    "                               one path exclude each other as they should)\n"
    "  -n, --limit N                hold one of N leases (1-65535) of a counting semaphore:\n"
    "                               at most N commands run at once, as consul lock -n does\n"
    "                               (Curator's InterProcessSemaphoreV2; every party on one\n"
    "                               path must give the same N)\n"
    "      --and PATH               take PATH too, in the same mode, all together or not at\n"
    "                               all (repeatable: a multi-lock, free of deadlock whatever\n"
    "                               the order the paths are given in)\n"
    "      --kazoo                  name the lock node as python kazoo's Lock/ReadLock does\n"
    "                               (with --limit: kazoo's Semaphore)\n"
    "  -t, --timeout SECONDS        give up after SECONDS (0: try once; at most 2000000;\n"
    "                               default: wait forever)\n"
    "  -n, --nonblock               try once: the same as -t 0 (a -n followed by a number is\n"
    "                               --limit)\n"
    "  -E, --conflict-exit-code N   exit with N (0-255) when the lock is busy or the timeout\n"
    "                               passes (default 1)\n"
    "      --identity TEXT          stored in the lock node, at most 1044480 bytes\n"
    "                               (default: host:pid)\n"
    "      --session-timeout MS     ZooKeeper session timeout, 1-3600000 (default 10000;\n"
    "                               the servers bound it)\n"
    "      --connect-timeout SECONDS  how long to try to reach a server (default 10)\n"
    "      --lease strict|session   strict (default): heartbeat writes keep a lease, and a\n"
    "                               holder cut off is told before any other client can\n"
    "                               take the lock; session: no heartbeat writes (an idle\n"
    "                               holder costs the ensemble nothing), but the lock is lost\n"
    "                               only when the session ends, which a holder cut off may\n"
    "                               learn after another client took the lock: let COMMAND's\n"
    "                               storage check ZKLOCK_FENCE\n"
    "      --kill-after SECONDS     if the lock is lost (or revoked, or --max-hold passed),\n"
    "                               SIGKILL what is left of COMMAND's process group this\n"
    "                               long after SIGTERM (default 10)\n"
    "      --revocable              let go when asked: on a request (zklock-ls --revoke,\n"
    "                               Curator's Revoker: __REVOKE__ written into the lock node),\n"
    "                               COMMAND's group gets SIGTERM, then SIGKILL after\n"
    "                               --kill-after, the lock is released, and zklock exits 79\n"
    "      --on-suspend stop|continue  while the connection to ZooKeeper is lost, stop\n"
    "                               COMMAND's group (SIGSTOP) and continue it (SIGCONT) when\n"
    "                               the session is back; default: continue (let it run)\n"
    "      --max-hold SECONDS       let COMMAND run at most SECONDS (fractions allowed) with\n"
    "                               the lock, as timeout(1): then its group is stopped as on\n"
    "                               a loss (SIGTERM, SIGKILL after --kill-after), the lock is\n"
    "                               released once the group is gone, and zklock exits 124\n"
    "      --track-previous         record this hold in LOCKPATH/zklock.previous and tell\n"
    "                               COMMAND how the previous hold ended: ZKLOCK_PREVIOUS=\n"
    "                               none|clean|unclean|unknown (-x only; never unknown when\n"
    "                               every contender tracks; see zklock(1))\n"
    "      --lock-delay SECONDS     after an unclean end, COMMAND starts no sooner than this\n"
    "                               long after it (after an unknown one: after our turn);\n"
    "                               a --timeout that ends first gives up, changing nothing\n"
    "                               (implies --track-previous)\n"
    "  -v, --verbose                say what happens on stderr: place in the queue, holder,\n"
    "                               who holds a busy lock, the connection lost and back,\n"
    "                               at the end how long it waited and held;\n"
    "                               and the ZooKeeper client's warnings\n"
    "  -q, --quiet                  print nothing but usage errors (the exit status tells)\n"
    "  -h, --help                   show this help and exit\n"
    "  -V, --version                show the version and exit\n"
    "\n"
    TOOL_CREDENTIAL_HELP
    TOOL_ACL_HELP
    "\n"
    "COMMAND runs with ZKLOCK_PATH (the lock path) and ZKLOCK_FENCE (the fencing token:\n"
    "pass it to storage that refuses tokens lower than the highest it has seen) in its\n"
    "environment (with --track-previous also ZKLOCK_PREVIOUS, and ZKLOCK_PREVIOUS_TOKEN,\n"
    "the previous holder's token, after a clean or unclean end), in a process group of its own: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent\n"
    "to zklock are passed on to that group. If the lock is lost while it runs (the session\n"
    "expired, the node was deleted, or ZooKeeper was not heard from for nearly a session\n"
    "timeout: then before any other client can take the lock; with --lease session only\n"
    "when the session ends, maybe after), the group gets SIGTERM,\n"
    "then SIGKILL after --kill-after: what COMMAND started is stopped too. If zklock\n"
    "itself dies (kill -9, the OOM killer), its watchdog stops the group before the lock\n"
    "can pass on (SIGKILL after at most a sixth of the session timeout). On a terminal,\n"
    "COMMAND gets the terminal while zklock is in the foreground: Ctrl-C reaches it once,\n"
    "Ctrl-Z stops it and zklock, fg and bg continue both.\n"
    "\n"
    "Exit status: COMMAND's (128+N if it died of signal N); the conflict code (1), silent\n"
    "unless -v, when the lock is busy or the timeout passed; 64 bad usage; 65 invalid lock\n"
    "path; 69 ZooKeeper unreachable or failing; 70 internal error; 71 system error; 75 the\n"
    "lock was lost while COMMAND ran (even if it then ended by itself); 77 not allowed by\n"
    "an ACL, or the credentials were rejected; 79 --revocable and the lock was revoked\n"
    "(asked for: COMMAND was stopped, the lock released); 124 --max-hold passed; 126\n"
    "COMMAND cannot run; 127 COMMAND not found; 128+N when signal N arrived before the\n"
    "lock was acquired.\n"
    "\n"
    "Examples:\n"
    "  zklock -s zk1:2181,zk2:2181 -t 0 /cron/nightly-report /usr/local/bin/report\n"
    "  zklock -w /deploy/web ./deploy.sh v1.2.3\n"
    "  zklock -n 3 /jobs/migrations ./migrate.sh shard-17\n"
    "  zklock --and /db/users /db/orders ./move-orders.sh\n"
    "  zklock -v /services/billing/leader ./run-billing-leader\n";

/* ---- command line --------------------------------------------------------------- */

static void usage_error(const char *msg)
{
    tool_die(EXIT_USAGE, "%s (try 'zklock --help')", msg);
}

static bool is_number(const char *arg)
{
    return arg[0] && strspn(arg, "0123456789") == strlen(arg);
}

static void set_limit(struct hold_options *o, const char *arg, int *modes)
{
    o->limit = (int)tool_integer("--limit", arg, 1, ZKLOCK_SEMAPHORE_MAX);
    o->mode = 's';
    ++*modes;
}

static void parse(int argc, char **argv, struct hold_options *o)
{
    enum { OPT_IDENTITY = 256, OPT_LIMIT, OPT_AND, OPT_TRACK_PREVIOUS, OPT_LOCK_DELAY };
    static const struct option longs[] = {
        HOLD_OPTIONS,
        {"exclusive", no_argument, NULL, 'x'},
        {"read", no_argument, NULL, 'r'},
        {"write", no_argument, NULL, 'w'},
        {"nonblock", no_argument, NULL, 'n'},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"and", required_argument, NULL, OPT_AND},
        {"identity", required_argument, NULL, OPT_IDENTITY},
        {"track-previous", no_argument, NULL, OPT_TRACK_PREVIOUS},
        {"lock-delay", required_argument, NULL, OPT_LOCK_DELAY},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        TOOL_CREDENTIAL_OPTIONS,
        TOOL_ACL_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    int c, modes = 0;
    bool dashes;

    *o = hold_defaults('x');
    /* '+': options end at the lock path; what follows is the command's.
     * ':' and opterr = 0: tool_bad_option() says what is wrong. */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:s:xrwt:n::E:vqhV", longs, NULL)) != -1) {
        if (hold_option(o, c, optarg, "zklock"))
            continue;
        switch (c) {
        case 'x': case 'r': case 'w': o->mode = (char)c; modes++; break;
        case 'n':
            /* flock's -n (try once), or consul's -n N (a limit): a lock path
             * starts with '/', so a number after -n can only be a limit. */
            if (!optarg && optind < argc && is_number(argv[optind]))
                optarg = argv[optind++];
            if (optarg)
                set_limit(o, optarg, &modes);
            else
                o->timeout_s = 0;
            break;
        case OPT_LIMIT: set_limit(o, optarg, &modes); break;
        case OPT_AND:
            if (o->nand == ZKLOCK_MULTI_MAX - 1)
                tool_die(EXIT_USAGE, "--and: at most %d paths with LOCKPATH (try 'zklock --help')",
                         ZKLOCK_MULTI_MAX - 1);
            tool_check_path(optarg);
            o->and_paths[o->nand++] = optarg;
            break;
        case OPT_IDENTITY: o->identity = optarg; break;
        case OPT_TRACK_PREVIOUS: o->track_previous = true; break;
        case OPT_LOCK_DELAY:
            o->lock_delay_ms = (int)(tool_seconds("--lock-delay", optarg) * 1000);
            o->track_previous = true;
            break;
        case 'h': fputs(usage_text, stdout); exit(0);
        case 'V': printf("zklock %s\n", zklock_version()); exit(0);
        default:
            if (!tool_security_option(&o->sec, c, optarg))
                tool_bad_option(c, argv, "zklock");
        }
    }
    if (modes > 1)
        usage_error("choose one of -x, -r, -w, --limit");
    if (o->track_previous && (o->mode != 'x' || o->nand > 0))
        usage_error("--track-previous and --lock-delay work with an exclusive lock (-x) of one "
                    "path only");
    hold_check_options(o, "zklock");
    /* Checked here: the library refuses it with ZKLOCK_EINVAL, which
     * tool_open() can only take for a bad server list. */
    if (o->identity && strlen(o->identity) > ZKLOCK_DATA_MAX)
        tool_die(EXIT_USAGE, "--identity: %zu bytes, more than the %d a lock node holds (try 'zklock --help')",
                 strlen(o->identity), ZKLOCK_DATA_MAX);
    if (optind >= argc)
        usage_error("missing LOCKPATH and COMMAND");
    o->path = argv[optind++];
    /* Options end at LOCKPATH ('+' above), so getopt leaves a "--" after it
     * alone; whoever writes one means it as getopt's. */
    dashes = optind < argc && strcmp(argv[optind], "--") == 0;
    optind += dashes;
    if (optind >= argc)
        usage_error("missing COMMAND");
    hold_check_command(argv[optind], dashes, "zklock", "LOCKPATH");
    o->command = argv + optind;
    o->servers = tool_servers(o->servers);
}

int main(int argc, char **argv)
{
    struct hold_options o;

    parse(argc, argv, &o);
    return hold_run(&o);
}
