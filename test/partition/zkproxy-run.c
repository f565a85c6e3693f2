/* zkproxy-run.c: test/zkproxy as a program, for the partition rig.
 *
 *   zkproxy-run [-d MIN:MAX] LISTEN=UPSTREAM...
 *
 * Forwards each LISTEN address ("ip:port") to its UPSTREAM ("ip:port"),
 * every message delayed by MIN..MAX ms (-d; default none), until SIGTERM or
 * SIGINT. Prints "ready" on stdout once every listener is up. The rig runs
 * one in each client's network namespace, so that the client's links to
 * the servers are slow and jittery where the kernel has no netem. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../zkproxy.h"

#define MAX_PROXIES 16

static int usage(void)
{
    fprintf(stderr, "usage: zkproxy-run [-d MIN:MAX] LISTEN=UPSTREAM...\n");
    return 2;
}

int main(int argc, char **argv)
{
    zkproxy_t *proxies[MAX_PROXIES];
    int n = 0, min_ms = 0, max_ms = 0, first = 1, sig;
    sigset_t set;

    if (argc > 2 && strcmp(argv[1], "-d") == 0) {
        if (sscanf(argv[2], "%d:%d", &min_ms, &max_ms) != 2 || min_ms < 0 || max_ms < min_ms)
            return usage();
        first = 3;
    }
    if (first >= argc || argc - first > MAX_PROXIES)
        return usage();
    /* blocked before the proxies' threads start, so that they inherit it */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    for (int i = first; i < argc; i++) {
        char listen_at[64];
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof listen_at)
            return usage();
        memcpy(listen_at, argv[i], (size_t)(eq - argv[i]));
        listen_at[eq - argv[i]] = '\0';
        if (!(proxies[n] = zkproxy_start_at(listen_at, eq + 1))) {
            fprintf(stderr, "zkproxy-run: cannot proxy %s\n", argv[i]);
            return 1;
        }
        zkproxy_set_delay(proxies[n++], min_ms, max_ms);
    }
    printf("ready\n");
    fflush(stdout);
    sigwait(&set, &sig);
    for (int i = 0; i < n; i++)
        zkproxy_stop(proxies[i]);
    return 0;
}
