/* zklock-ls: who holds a ZooKeeper lock and who waits, in queue order.
 * Reads zklock's, Curator's and kazoo's lock nodes alike. */
#include "config.h"

#include "common.h"
#include "escape.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *tool_name = "zklock-ls";

static const char usage_text[] =
    "Usage: zklock-ls [OPTION]... LOCKPATH...\n"
    "       zklock-ls -R [OPTION]... PATH...\n"
    "Show who holds each ZooKeeper lock and who waits, in the order they are served.\n"
    "Understands zklock's, Curator's and kazoo's lock nodes.\n"
    "\n"
    "  -s, --servers HOSTS      ZooKeeper servers, host:port,... (default $ZKLOCK_SERVERS,\n"
    "                           then 127.0.0.1:2181)\n"
    "  -j, --json               JSON Lines: one JSON object per lock, each on a line of\n"
    "                           its own\n"
    "  -f, --follow             keep running and print a lock again whenever its queue\n"
    "                           changes, until interrupted (also --watch)\n"
    "  -R, --recursive          every lock at or below each PATH ('/': all of them); a lock\n"
    "                           is a node with at least one lock node among its children,\n"
    "                           so a free lock is not shown\n"
    "      --limit N            with -R, look at N nodes at most (default 10000)\n"
    "      --connect-timeout SECONDS  how long to try to reach a server (default 10)\n"
    "      --revoke             ask the holder(s) of each LOCKPATH to let go, as Curator's\n"
    "                           Revoker does (\"__REVOKE__\" written into their nodes, where\n"
    "                           their identity was): a holder that listens (zklock\n"
    "                           --revocable, Curator's makeRevocable) lets go, one that\n"
    "                           does not keeps holding. Prints a line per holder asked:\n"
    "                           \"asked LOCKPATH/NODE IDENTITY\" (--json: {\"path\", \"asked\":\n"
    "                           [nodes]}), or \"nobody holds LOCKPATH\"\n"
    "  -h, --help               show this help and exit\n"
    "  -V, --version            show the version and exit\n"
    "\n"
    TOOL_CREDENTIAL_HELP
    "\n"
    "Columns: POS (place in the queue), STATE (holds or waits), MODE (mutex, read, write,\n"
    "lease, kazoo-lock, kazoo-read, kazoo-lease), SEQ (the node's sequence number), AGE, TOKEN (the fencing\n"
    "token the node holds or will hold), IDENTITY (the node's data: host:pid for zklock,\n"
    "the host address for Curator, the identifier for kazoo; up to its first NUL byte).\n"
    "A counting semaphore (zklock -n N, Curator's InterProcessSemaphoreV2, kazoo's\n"
    "Semaphore) shows its leases taken, then its contenders in line for one, a row each:\n"
    "a node of its acquisition lock, or for the first in line the lease node it made\n"
    "while it waits for a lease to free. --json has every node, and the counts\n"
    "(\"taken\", \"in_line\").\n"
    "Node data cannot forge the output: in the table, control characters and bytes that\n"
    "are not UTF-8 are escaped (\\xNN, \\uXXXX, \\\\ for a backslash) and an identity longer\n"
    "than 80 characters is cut (...); --json is always valid JSON, in ASCII, with bytes\n"
    "that are not UTF-8 replaced by U+FFFD.\n"
    "\n"
    "Exit status: 0 success; 1 -R stopped at --limit (what it found is printed), or with\n"
    "--revoke nobody held a LOCKPATH (nobody was asked); 64 bad usage; 65 invalid lock\n"
    "path; 69 ZooKeeper unreachable or failing; 77 not allowed by an ACL (with --revoke:\n"
    "also a holder's node that may not be written), or the credentials were rejected.\n";

enum { EXIT_LIMIT = 1 };  /* -R looked at --limit nodes before the end */
enum { EXIT_NOBODY = 1 }; /* --revoke: nobody held a lock path */

static bool json;
static struct tool_security sec; /* --auth-file, --tls-* */
static pthread_mutex_t print_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- printing ------------------------------------------------------------------------ */

/* Adds key: value to o, taking the reference; dies if out of memory (a
 * NULL value is jansson's out of memory). */
static void set(json_t *o, const char *key, json_t *value)
{
    if (!value || json_object_set_new(o, key, value) != 0)
        tool_die(EXIT_OSERR, "out of memory");
}

/* A string from ZooKeeper (a path, a node's name or data). */
static json_t *json_text(const char *s)
{
    return tool_text_for_json(s, strlen(s));
}

/* What is printed for one path: a lock's queue, or a semaphore's leases
 * (`q`, every one of them taken) and its line (`line`: the contenders
 * queued for a lease, in its acquisition lock). */
struct view {
    const char *path;
    const zklock_queue_t *q, *line;
    /* The session at the head of the line: it holds the acquisition lock,
     * and a lease node of its own is one made while it waits for a lease to
     * free (Curator's order), not a lease taken. 0 if none. */
    int64_t head;
};

static struct view make_view(const char *path, const zklock_queue_t *q, const zklock_queue_t *line)
{
    struct view v = {path, q, line, 0};
    if (line && line->count > 0)
        v.head = line->nodes[0].session;
    return v;
}

/* Does n hold? A lease of the line's head does not yet. */
static bool holds(const struct view *v, const zklock_node_t *n)
{
    return n->holds && !(v->head && n->session == v->head && v->line);
}

/* The table's rows, one per holder or contender, in the order served. */
struct rows {
    const zklock_node_t **node;
    size_t count, holding;
};

static void add_row(struct rows *r, const zklock_node_t *n)
{
    r->node[r->count++] = n;
}

/* A lease node that does not hold yet, and is not in *used: the lease of
 * a contender of session `session`, made while it waits for one to free. */
static const zklock_node_t *waiting_lease(const struct view *v, int64_t session,
                                          const bool *used, size_t *at)
{
    for (size_t i = 0; i < v->q->count; i++) {
        const zklock_node_t *n = &v->q->nodes[i];
        if (!used[i] && !holds(v, n) && n->session == session) {
            *at = i;
            return n;
        }
    }
    return NULL;
}

/* A semaphore: its leases taken, then its contenders, one row each. A
 * contender at the head of the line may have made its lease node already
 * (it waits for a lease to free): that node is its row, not its node in
 * the acquisition lock. A lease node of no contender in line (one that let
 * the acquisition lock go as it made its lease) waits ahead of the line. */
static void semaphore_rows(const struct view *v, struct rows *r, bool *used)
{
    const zklock_node_t **line = calloc(v->line->count + 1, sizeof *line);
    size_t at;

    if (!line)
        tool_die(EXIT_OSERR, "out of memory");
    for (size_t i = 0; i < v->line->count; i++) {
        const zklock_node_t *lease = waiting_lease(v, v->line->nodes[i].session, used, &at);
        if (lease)
            used[at] = true;
        line[i] = lease ? lease : &v->line->nodes[i];
    }
    for (size_t i = 0; i < v->q->count; i++)
        if (holds(v, &v->q->nodes[i]))
            add_row(r, &v->q->nodes[i]);
    r->holding = r->count;
    for (size_t i = 0; i < v->q->count; i++)
        if (!used[i] && !holds(v, &v->q->nodes[i]))
            add_row(r, &v->q->nodes[i]);
    for (size_t i = 0; i < v->line->count; i++)
        add_row(r, line[i]);
    free(line);
}

/* The caller frees r->node. */
static struct rows make_rows(const struct view *v)
{
    size_t most = v->q->count + (v->line ? v->line->count : 0);
    struct rows r = {calloc(most ? most : 1, sizeof *r.node), 0, 0};
    bool *used = calloc(v->q->count ? v->q->count : 1, sizeof *used);

    if (!r.node || !used)
        tool_die(EXIT_OSERR, "out of memory");
    if (v->line) {
        semaphore_rows(v, &r, used);
    } else {
        for (size_t i = 0; i < v->q->count; i++) {
            add_row(&r, &v->q->nodes[i]);
            r.holding += holds(v, &v->q->nodes[i]);
        }
    }
    free(used);
    return r;
}

/* A semaphore's counts, as the table's header says them: leases taken,
 * contenders in line (one each, whatever nodes it has). */
static void set_semaphore_counts(json_t *o, const struct view *v)
{
    struct rows r = make_rows(v);

    set(o, "taken", json_integer((json_int_t)r.holding));
    set(o, "in_line", json_integer((json_int_t)(r.count - r.holding)));
    free(r.node);
}

static json_t *json_node(const zklock_node_t *n, bool held, size_t position, int64_t now)
{
    json_t *o = json_object();
    char session[32];

    if (!o)
        tool_die(EXIT_OSERR, "out of memory");
    snprintf(session, sizeof session, "0x%llx", (unsigned long long)n->session);
    set(o, "position", json_integer((json_int_t)position));
    set(o, "state", json_string(held ? "holds" : "waits"));
    set(o, "kind", json_string(n->kind));
    set(o, "shared", json_boolean(n->shared));
    set(o, "seq", json_integer(n->seq));
    set(o, "age_ms", json_integer(now - n->ctime_ms));
    set(o, "token", json_integer(n->token));
    set(o, "session", json_string(session));
    set(o, "identity", json_text(n->identity));
    set(o, "name", json_text(n->name));
    return o;
}

/* One line: jansson writes it, so that it is valid JSON whatever the nodes
 * hold. */
static void append_nodes(json_t *nodes, const struct view *v, const zklock_queue_t *q,
                         size_t first, int64_t now)
{
    for (size_t i = 0; q && i < q->count; i++)
        if (json_array_append_new(nodes, json_node(&q->nodes[i], holds(v, &q->nodes[i]),
                                                   first + i, now)) != 0)
            tool_die(EXIT_OSERR, "out of memory");
}

static void print_json(const struct view *v, int64_t now)
{
    const zklock_queue_t *q = v->q;
    json_t *o = json_object(), *nodes = json_array();
    char *line;

    if (!o || !nodes)
        tool_die(EXIT_OSERR, "out of memory");
    set(o, "path", json_text(v->path));
    set(o, "exists", json_boolean(q->exists));
    if (v->line) {
        set(o, "semaphore", json_true());
        set_semaphore_counts(o, v);
    }
    set(o, "ignored", json_integer((json_int_t)(v->line ? 0 : q->ignored)));
    append_nodes(nodes, v, q, 1, now);
    append_nodes(nodes, v, v->line, q->count + 1, now);
    set(o, "nodes", nodes);
    line = tool_json_line(o);
    if (!line)
        tool_die(EXIT_OSERR, "out of memory");
    puts(line);
    free(line);
    json_decref(o);
}

static void print_rows(const struct view *v, const struct rows *r, int64_t now)
{
    for (size_t i = 0; i < r->count; i++) {
        const zklock_node_t *n = r->node[i];
        char age[32], *identity = tool_identity_text(n->identity);
        tool_age(age, sizeof age, now - n->ctime_ms);
        printf("  %-4zu %-6s %-10s %010d  %-7s %-12lld %s\n", i + 1,
               holds(v, n) ? "holds" : "waits", n->kind, n->seq, age, (long long)n->token, identity);
        free(identity);
    }
}

/* The table: one row per holder or contender, whatever the nodes hold
 * (escaped). */
static void print_text(const struct view *v, int64_t now)
{
    const zklock_queue_t *q = v->q;
    /* With -R the path comes from the server's node names. */
    char *path = tool_text_for_terminal(v->path, strlen(v->path), 0);
    struct rows r = make_rows(v);
    size_t waiting = r.count - r.holding;

    if (!path)
        tool_die(EXIT_OSERR, "out of memory");
    if (!q->exists)
        printf("%s  (no such lock)\n", path);
    else if (v->line)
        printf("%s  (semaphore: %zu lease%s taken, %zu in line)\n", path, r.holding,
               r.holding == 1 ? "" : "s", waiting);
    else if (q->count == 0)
        printf("%s  (free)\n", path);
    else
        printf("%s  (%zu holding, %zu waiting)\n", path, r.holding, waiting);
    free(path);
    if (r.count > 0)
        printf("  %-4s %-6s %-10s %-11s %-7s %-12s %s\n", "POS", "STATE", "MODE", "SEQ", "AGE",
               "TOKEN", "IDENTITY");
    print_rows(v, &r, now);
    if (q->ignored && !v->line)
        printf("  (%zu other child node%s ignored)\n", q->ignored, q->ignored == 1 ? "" : "s");
    free(r.node);
}

static void print_view(const struct view *v)
{
    pthread_mutex_lock(&print_mu);
    if (json)
        print_json(v, tool_wall_ms());
    else
        print_text(v, tool_wall_ms());
    fflush(stdout);
    pthread_mutex_unlock(&print_mu);
}

/* ---- one lock ------------------------------------------------------------------------------ */

struct lock_view {
    zklock_session_t *s;
    const char *path;
    pthread_t thread;
};

static void print_queue(const zklock_queue_t *q)
{
    struct view v = make_view(q->path, q, NULL);
    print_view(&v);
}

/* A semaphore's path holds its leases: Curator's in a "leases" child (and
 * nothing else that is a lock node), kazoo's as children named by a uuid
 * alone. Its line is its acquisition lock's queue ("locks" beside the
 * leases; kazoo's: "<path>-__lock__"). */
static bool is_kazoo_semaphore(const zklock_queue_t *q)
{
    if (q->count == 0)
        return false;
    for (size_t i = 0; i < q->count; i++)
        if (strcmp(q->nodes[i].kind, "kazoo-lease") != 0)
            return false;
    return true;
}

/* Reads what there is to print of path: its queue, or a semaphore's
 * leases (in *q) and line (in *line). */
static int read_view(zklock_session_t *s, const char *path, zklock_queue_t **q,
                     zklock_queue_t **line)
{
    char *leases = NULL, *locks = NULL;
    int rc = zklock_queue_read(s, path, q);

    *line = NULL;
    if (rc != ZKLOCK_OK || !(*q)->exists)
        return rc;
    if (is_kazoo_semaphore(*q)) {
        if (asprintf(&locks, "%s-__lock__", path) < 0)
            tool_die(EXIT_OSERR, "out of memory");
    } else if ((*q)->count == 0 && (*q)->ignored > 0) {
        zklock_queue_t *held = NULL;
        if (asprintf(&leases, "%s/leases", strcmp(path, "/") ? path : "") < 0 ||
            asprintf(&locks, "%s/locks", strcmp(path, "/") ? path : "") < 0)
            tool_die(EXIT_OSERR, "out of memory");
        rc = zklock_queue_read(s, leases, &held);
        if (rc == ZKLOCK_OK && held->exists) {
            zklock_queue_free(*q);
            *q = held;
        } else {
            zklock_queue_free(held);
            free(locks);
            locks = NULL; /* no semaphore: just a free lock (or none) */
        }
    }
    if (rc == ZKLOCK_OK && locks)
        rc = zklock_queue_read(s, locks, line);
    free(leases);
    free(locks);
    if (rc == ZKLOCK_EINVAL)
        rc = ZKLOCK_OK; /* too long a path for "-__lock__": no kazoo semaphore */
    return rc;
}

static int read_and_print(struct lock_view *v, zklock_queue_t **q, zklock_queue_t **line)
{
    int rc = read_view(v->s, v->path, q, line);
    if (rc == ZKLOCK_OK) {
        struct view view = make_view(v->path, *q, *line);
        print_view(&view);
    }
    return rc;
}

/* A semaphore has two queues to watch: its line (where most changes
 * show), and its leases, looked at every second. */
static void wait_for_change(zklock_session_t *s, zklock_queue_t *q, zklock_queue_t *line)
{
    if (!line) {
        zklock_queue_wait(s, q, -1);
        return;
    }
    while (zklock_queue_wait(s, line, 1000) == ZKLOCK_ETIMEDOUT)
        if (zklock_queue_wait(s, q, 0) != ZKLOCK_ETIMEDOUT)
            return;
}

/* --follow: print, wait for a change, print again. A failure is said once,
 * not at every retry while ZooKeeper is away. */
static void *follow_thread(void *arg)
{
    struct lock_view *v = arg;
    zklock_queue_t *q = NULL, *line = NULL;
    int said = ZKLOCK_OK;

    for (;;) {
        int rc = read_and_print(v, &q, &line);
        if (rc == ZNOAUTH) /* asking again would not change the ACL */
            exit(tool_read_failed(v->s, v->path, rc, &sec));
        if (rc != ZKLOCK_OK) {
            struct timespec pause = {0, 500 * 1000 * 1000};
            if (rc != said)
                tool_say("%s: %s (trying again)", v->path, zklock_strerror(rc));
            said = rc;
            nanosleep(&pause, NULL); /* the session reconnects by itself */
            continue;
        }
        said = ZKLOCK_OK;
        wait_for_change(v->s, q, line);
        zklock_queue_free(q);
        zklock_queue_free(line);
        q = line = NULL;
    }
    return NULL;
}

/* ---- -R: every lock below a path ------------------------------------------------------------ */

/* A lock is a node with at least one lock node among its children; lock
 * nodes are ephemeral, so they have no children and are not descended
 * into. Each node looked at costs a queue read, and a listing of its
 * children when some are not lock nodes: at most `budget` nodes are looked
 * at, so that a huge subtree cannot keep us forever. A node whose ACL
 * refuses to be read (another service's, on a shared ensemble) is said and
 * skipped. */
struct walk {
    zklock_session_t *s;
    long budget, looked;
    int status;   /* the exit status so far; the walk stops at the first failure */
    bool refused; /* an ACL refused a read: the exit status will say it */
};

/* Says why path could not be read; a refusal skips it, anything else
 * stops the walk. */
static void walk_failed(struct walk *w, const char *path, int rc)
{
    int code = tool_read_failed(w->s, path, rc, &sec);

    if (code == EXIT_NOPERM)
        w->refused = true;
    else
        w->status = code;
}

static bool is_root(const char *path)
{
    return strcmp(path, "/") == 0;
}

static bool is_lock_node(const zklock_queue_t *q, const char *name)
{
    for (size_t i = 0; q && i < q->count; i++)
        if (strcmp(q->nodes[i].name, name) == 0)
            return true;
    return false;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The children of path, sorted. The session's handle: a synchronous call
 * on it is safe here because the walk stops at its first failure, and the
 * handle is replaced only after an expiry, which takes a failure to see. */
static int list_children(struct walk *w, const char *path, struct String_vector *names)
{
    zhandle_t *zh = zklock_session_zhandle(w->s);
    int rc = zh ? zoo_get_children(zh, path, 0, names) : ZCONNECTIONLOSS;

    if (rc == ZOK && names->count > 1)
        qsort(names->data, (size_t)names->count, sizeof *names->data, by_name);
    return rc;
}

static void walk(struct walk *w, const char *path);

static void walk_children(struct walk *w, const char *path, const zklock_queue_t *q)
{
    struct String_vector names = {0, NULL};
    int rc = list_children(w, path, &names);

    if (rc != ZOK && rc != ZNONODE) /* ZNONODE: it went away meanwhile */
        walk_failed(w, path, rc);
    for (int32_t i = 0; i < names.count && w->status == 0; i++) {
        char *child;
        if (is_lock_node(q, names.data[i]))
            continue;
        if (asprintf(&child, "%s/%s", is_root(path) ? "" : path, names.data[i]) < 0)
            tool_die(EXIT_OSERR, "out of memory");
        if (strcmp(child, "/zookeeper") != 0) /* the server's own nodes */
            walk(w, child);
        free(child);
    }
    deallocate_String_vector(&names);
}

static void walk(struct walk *w, const char *path)
{
    zklock_queue_t *q = NULL, *line = NULL;
    int rc;

    if (w->looked++ == w->budget) {
        tool_say("stopped after looking at %ld nodes, before %s (raise --limit to see more)",
                 w->budget, path);
        w->status = EXIT_LIMIT;
        return;
    }
    rc = is_root(path) ? ZKLOCK_OK : read_view(w->s, path, &q, &line);
    if (rc == ZKLOCK_EINVAL)
        return; /* a node no lock path can name (too long): no lock there */
    if (rc != ZKLOCK_OK) {
        walk_failed(w, path, rc);
        return;
    }
    if (line) {
        struct view v = make_view(path, q, line);
        print_view(&v); /* a semaphore: its leases and line are not locks of their own */
    } else if (q && q->count > 0) {
        print_queue(q);
    }
    if (!line && (!q || q->ignored > 0)) /* children that are not lock nodes: there may be locks below */
        walk_children(w, path, q);
    zklock_queue_free(q);
    zklock_queue_free(line);
}

/* ---- main -------------------------------------------------------------------------------------- */

struct options {
    const char *servers;
    bool follow, recursive, revoke;
    long limit;
    double connect_s;
};

static void usage_error(const char *msg) __attribute__((noreturn));
static void usage_error(const char *msg)
{
    tool_die(EXIT_USAGE, "%s (try 'zklock-ls --help')", msg);
}

static int parse(int argc, char **argv, struct options *o)
{
    enum { OPT_LIMIT = 256, OPT_CONNECT, OPT_REVOKE };
    static const struct option longs[] = {
        {"servers", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"follow", no_argument, NULL, 'f'},
        {"watch", no_argument, NULL, 'f'}, /* its first name */
        {"recursive", no_argument, NULL, 'R'},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"connect-timeout", required_argument, NULL, OPT_CONNECT},
        {"revoke", no_argument, NULL, OPT_REVOKE},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        TOOL_CREDENTIAL_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    int c;

    *o = (struct options){.limit = 10000, .connect_s = 10};
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:jfRwhV", longs, NULL)) != -1) {
        switch (c) {
        case 's': o->servers = optarg; break;
        case 'j': json = true; break;
        case 'f': o->follow = true; break;
        case 'R': o->recursive = true; break;
        case OPT_LIMIT: o->limit = tool_integer("--limit", optarg, 1, 100000000); break;
        case OPT_CONNECT: o->connect_s = tool_seconds("--connect-timeout", optarg); break;
        case OPT_REVOKE: o->revoke = true; break;
        case 'h': fputs(usage_text, stdout); exit(0);
        case 'V': printf("zklock-ls %s\n", zklock_version()); exit(0);
        /* -w was --watch once, and is --write in zklock: neither, to be clear */
        case 'w': usage_error("-w is not an option of zklock-ls; -f (--follow) prints a queue as it changes");
        default:
            if (!tool_security_option(&sec, c, optarg))
                tool_bad_option(c, argv, "zklock-ls");
        }
    }
    if (o->follow && o->recursive)
        usage_error("-f (--follow) and -R (--recursive) do not go together");
    if (o->revoke && (o->follow || o->recursive))
        usage_error("--revoke goes with neither -f (--follow) nor -R (--recursive)");
    if (optind >= argc)
        usage_error(o->recursive ? "missing PATH" : "missing LOCKPATH");
    for (int i = optind; i < argc; i++)
        if (!(o->recursive && is_root(argv[i])))
            tool_check_path(argv[i]);
    return optind;
}

static int show(zklock_session_t *s, const char *path)
{
    zklock_queue_t *q = NULL, *line = NULL;
    struct lock_view v = {s, path, 0};
    int rc = read_and_print(&v, &q, &line);

    zklock_queue_free(q);
    zklock_queue_free(line);
    return rc == ZKLOCK_OK ? 0 : tool_read_failed(s, path, rc, &sec);
}

/* --revoke: asks path's holders to let go and says whom it asked. */
static void print_asked(const char *path, const zklock_queue_t *asked)
{
    if (json) {
        json_t *o = json_object(), *nodes = json_array();
        char *line;
        if (!o || !nodes)
            tool_die(EXIT_OSERR, "out of memory");
        set(o, "path", json_text(path));
        for (size_t i = 0; i < asked->count; i++)
            if (json_array_append_new(nodes, json_node(&asked->nodes[i], true, i + 1, tool_wall_ms())) != 0)
                tool_die(EXIT_OSERR, "out of memory");
        set(o, "asked", nodes);
        if (!(line = tool_json_line(o)))
            tool_die(EXIT_OSERR, "out of memory");
        puts(line);
        free(line);
        json_decref(o);
        return;
    }
    if (asked->count == 0)
        printf("nobody holds %s\n", path);
    for (size_t i = 0; i < asked->count; i++) {
        const zklock_node_t *n = &asked->nodes[i];
        char *name = tool_identity_text(n->name), *identity = tool_identity_text(n->identity);
        printf("asked %s/%s %s\n", strcmp(asked->path, "/") ? asked->path : "", name, identity);
        free(name);
        free(identity);
    }
}

static int revoke_holders(zklock_session_t *s, const char *path)
{
    zklock_queue_t *asked = NULL;
    int rc = zklock_revoke_nodes(s, path, &asked), status;

    if (asked && (rc == ZKLOCK_OK || asked->count > 0))
        print_asked(path, asked);
    status = rc != ZKLOCK_OK ? tool_read_failed(s, path, rc, &sec)
             : asked->count == 0 ? EXIT_NOBODY : 0;
    zklock_queue_free(asked);
    return status;
}

static void follow(zklock_session_t *s, char **paths, int npaths)
{
    struct lock_view *views = calloc((size_t)npaths, sizeof *views);

    if (!views)
        tool_die(EXIT_OSERR, "out of memory");
    for (int i = 0; i < npaths; i++) {
        views[i] = (struct lock_view){s, paths[i], 0};
        if (pthread_create(&views[i].thread, NULL, follow_thread, &views[i]) != 0)
            tool_die(EXIT_OSERR, "cannot start a thread");
    }
    for (;;)
        pause(); /* until a signal ends us */
}

int main(int argc, char **argv)
{
    struct options o;
    zklock_session_opts_t so = {0};
    zklock_session_t *s;
    int first = parse(argc, argv, &o), status = 0;

    tool_security_load(&sec, &so);
    tool_zk_log(false);
    so.connect_timeout_ms = o.connect_s > 0 ? (int)(o.connect_s * 1000) : 1;
    s = tool_open(tool_servers(o.servers), &so, &sec);
    tool_security_forget(&sec); /* the session has its own copy */
    if (o.follow)
        follow(s, argv + first, argc - first);
    for (int i = first; i < argc && status != EXIT_UNREACHABLE; i++) {
        if (o.recursive) {
            struct walk w = {s, o.limit, 0, 0, false};
            walk(&w, argv[i]);
            status = w.status ? w.status : w.refused ? EXIT_NOPERM : status;
        } else {
            int rc = o.revoke ? revoke_holders(s, argv[i]) : show(s, argv[i]);
            status = rc ? rc : status;
        }
    }
    zklock_session_close(s);
    return status;
}
