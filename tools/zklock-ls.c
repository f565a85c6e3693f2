/* zklock-ls: who holds a ZooKeeper lock and who waits, in queue order.
 * Reads zklock's, Curator's and kazoo's lock nodes alike. */
#include "config.h"

#include "common.h"

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
    "Show who holds each ZooKeeper lock and who waits, in the order they are served.\n"
    "Understands zklock's, Curator's and kazoo's lock nodes.\n"
    "\n"
    "  -s, --servers HOSTS   ZooKeeper servers, host:port,... (default $ZKLOCK_SERVERS,\n"
    "                        then 127.0.0.1:2181)\n"
    "  -j, --json            one JSON object per lock, on one line\n"
    "  -w, --watch           keep running and print a lock again whenever its queue changes\n"
    "                        (until interrupted)\n"
    "  -h, --help            show this help and exit\n"
    "  -V, --version         show the version and exit\n"
    "\n"
    "Columns: POS (place in the queue), STATE (holds or waits), MODE (mutex, read, write,\n"
    "kazoo-lock, kazoo-read), SEQ (the node's sequence number), AGE, TOKEN (the fencing\n"
    "token the node holds or will hold), IDENTITY (the node's data: host:pid for zklock,\n"
    "the host address for Curator, the identifier for kazoo).\n"
    "\n"
    "Exit status: 0 success; 64 bad usage; 65 invalid lock path; 69 ZooKeeper unreachable\n"
    "or failing.\n";

static bool json, watching;
static pthread_mutex_t print_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- printing ------------------------------------------------------------------------ */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void print_json(const zklock_queue_t *q, int64_t now)
{
    printf("{\"path\":");
    json_string(stdout, q->path);
    printf(",\"exists\":%s,\"ignored\":%zu,\"nodes\":[", q->exists ? "true" : "false", q->ignored);
    for (size_t i = 0; i < q->count; i++) {
        const zklock_node_t *n = &q->nodes[i];
        printf("%s{\"position\":%zu,\"state\":\"%s\",\"kind\":\"%s\",\"shared\":%s,\"seq\":%d,"
               "\"age_ms\":%lld,\"token\":%lld,\"session\":\"0x%llx\",\"identity\":",
               i ? "," : "", i + 1, n->holds ? "holds" : "waits", n->kind,
               n->shared ? "true" : "false", n->seq, (long long)(now - n->ctime_ms),
               (long long)n->token, (unsigned long long)n->session);
        json_string(stdout, n->identity);
        printf(",\"name\":");
        json_string(stdout, n->name);
        printf("}");
    }
    printf("]}\n");
}

static void print_text(const zklock_queue_t *q, int64_t now)
{
    size_t holding = 0;

    for (size_t i = 0; i < q->count; i++)
        holding += q->nodes[i].holds;
    if (!q->exists)
        printf("%s  (no such lock)\n", q->path);
    else if (q->count == 0)
        printf("%s  (free)\n", q->path);
    else
        printf("%s  (%zu holding, %zu waiting)\n", q->path, holding, q->count - holding);
    if (q->count > 0)
        printf("  %-4s %-6s %-10s %-11s %-7s %-12s %s\n", "POS", "STATE", "MODE", "SEQ", "AGE",
               "TOKEN", "IDENTITY");
    for (size_t i = 0; i < q->count; i++) {
        const zklock_node_t *n = &q->nodes[i];
        char age[32];
        tool_age(age, sizeof age, now - n->ctime_ms);
        printf("  %-4zu %-6s %-10s %010d  %-7s %-12lld %s\n", i + 1, n->holds ? "holds" : "waits",
               n->kind, n->seq, age, (long long)n->token, *n->identity ? n->identity : "-");
    }
    if (q->ignored)
        printf("  (%zu other child node%s ignored)\n", q->ignored, q->ignored == 1 ? "" : "s");
}

static void print_queue(const zklock_queue_t *q)
{
    pthread_mutex_lock(&print_mu);
    if (json)
        print_json(q, tool_wall_ms());
    else
        print_text(q, tool_wall_ms());
    fflush(stdout);
    pthread_mutex_unlock(&print_mu);
}

/* ---- one lock ------------------------------------------------------------------------------ */

struct lock_view {
    zklock_session_t *s;
    const char *path;
    int rc;
    pthread_t thread;
};

static int read_and_print(struct lock_view *v, zklock_queue_t **q)
{
    int rc = zklock_queue_read(v->s, v->path, q);
    if (rc == ZKLOCK_OK)
        print_queue(*q);
    return rc;
}

/* --watch: print, wait for a change, print again. */
static void *watch_thread(void *arg)
{
    struct lock_view *v = arg;
    zklock_queue_t *q = NULL;

    for (;;) {
        int rc = read_and_print(v, &q);
        if (rc != ZKLOCK_OK) {
            struct timespec pause = {0, 500 * 1000 * 1000};
            tool_say("%s: %s (trying again)", v->path, zklock_strerror(rc));
            nanosleep(&pause, NULL); /* the session reconnects by itself */
            continue;
        }
        zklock_queue_wait(v->s, q, -1);
        zklock_queue_free(q);
        q = NULL;
    }
    return NULL;
}

/* ---- main -------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"servers", required_argument, NULL, 's'}, {"json", no_argument, NULL, 'j'},
        {"watch", no_argument, NULL, 'w'},         {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0},
    };
    const char *servers = NULL;
    struct lock_view *views;
    zklock_session_t *s;
    int c, npaths, status = 0;

    while ((c = getopt_long(argc, argv, "s:jwhV", longs, NULL)) != -1) {
        switch (c) {
        case 's': servers = optarg; break;
        case 'j': json = true; break;
        case 'w': watching = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V': printf("zklock-ls %s\n", zklock_version()); return 0;
        default: tool_die(EXIT_USAGE, "unknown option (try 'zklock-ls --help')");
        }
    }
    npaths = argc - optind;
    if (npaths < 1)
        tool_die(EXIT_USAGE, "missing LOCKPATH (try 'zklock-ls --help')");
    for (int i = optind; i < argc; i++)
        tool_check_path(argv[i]);
    tool_zk_log(false);
    s = tool_open(tool_servers(servers), NULL);
    views = calloc((size_t)npaths, sizeof *views);
    for (int i = 0; i < npaths; i++)
        views[i] = (struct lock_view){s, argv[optind + i], 0, 0};
    if (watching) {
        for (int i = 0; i < npaths; i++)
            pthread_create(&views[i].thread, NULL, watch_thread, &views[i]);
        pause(); /* until a signal ends us */
    }
    for (int i = 0; i < npaths; i++) {
        zklock_queue_t *q = NULL;
        int rc = read_and_print(&views[i], &q);
        if (rc != ZKLOCK_OK) {
            tool_say("%s: %s", views[i].path, zklock_strerror(rc));
            status = EXIT_UNREACHABLE;
        }
        zklock_queue_free(q);
    }
    free(views);
    zklock_session_close(s);
    return status;
}
