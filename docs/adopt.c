/* adopt.c: zklock on the ZooKeeper handle a daemon already has.
 *
 *   adopt HOSTS CONFIG LOCKPATH
 *
 * A daemon that keeps its own zhandle_t (to watch its configuration, say)
 * lends it to zklock instead of opening a second session. Three rules:
 *  - its global watcher forwards every event to zklock_session_forward();
 *  - when its session expires, it opens a new handle and hands it over with
 *    zklock_session_readopt(): the lock handles carry on;
 *  - no blocking zklock call on the watcher's thread (ZooKeeper's completion
 *    thread: the call would wait for itself, and gets ZKLOCK_EDEADLK). The
 *    watcher only notes what happened; the main thread acts on it.
 * This one waits for CONFIG to change, then takes LOCKPATH, says so,
 * releases it and exits. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <zklock.h>

struct daemon {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    const char *hosts, *config;
    zhandle_t *zh;        /* the daemon's own handle */
    zklock_session_t *s;  /* zklock's view of it */
    bool connected, expired, config_changed;
};

/* ZooKeeper's completion thread: note, forward, never block. */
static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    struct daemon *d = ctx;

    pthread_mutex_lock(&d->mu);
    if (d->s)
        zklock_session_forward(d->s, zh, type, state); /* ignores old handles */
    if (zh == d->zh && type == ZOO_SESSION_EVENT) {
        d->connected = state == ZOO_CONNECTED_STATE;
        d->expired |= state == ZOO_EXPIRED_SESSION_STATE;
    } else if (type == ZOO_CREATED_EVENT || type == ZOO_CHANGED_EVENT) {
        d->config_changed = true;
    }
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->mu);
}

/* Opens the daemon's handle and waits (with d->mu held) until it connects. */
static int connect_handle(struct daemon *d)
{
    struct Stat st;

    d->connected = d->expired = false;
    d->zh = zookeeper_init(d->hosts, watcher, 10000, NULL, d, 0);
    if (!d->zh)
        return -1;
    while (!d->connected)
        pthread_cond_wait(&d->cond, &d->mu);
    /* The daemon's own watch, the reason it has a handle at all. */
    zoo_wexists(d->zh, d->config, watcher, d, &st);
    return 0;
}

/* The session expired: a new handle for the daemon, and for zklock. */
static int renew_handle(struct daemon *d)
{
    zhandle_t *old = d->zh;

    if (connect_handle(d) != 0)
        return -1;
    zklock_session_readopt(d->s, d->zh); /* zklock lets go of the old one */
    pthread_mutex_unlock(&d->mu);
    zookeeper_close(old); /* not under d->mu: its last events come to the watcher */
    pthread_mutex_lock(&d->mu);
    return 0;
}

int main(int argc, char **argv)
{
    struct daemon d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL,
                       NULL, NULL, false, false, false};
    zklock_t *lock = NULL;
    int64_t token;
    int rc;

    if (argc != 4) {
        fprintf(stderr, "usage: adopt HOSTS CONFIG LOCKPATH\n");
        return 2;
    }
    d.hosts = argv[1];
    d.config = argv[2];
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    pthread_mutex_lock(&d.mu);
    if (connect_handle(&d) != 0 || zklock_session_adopt(&d.s, d.zh, NULL) != ZKLOCK_OK ||
        zklock_mutex_new(&lock, d.s, argv[3], NULL) != ZKLOCK_OK) {
        fprintf(stderr, "adopt: cannot set up\n");
        return 1;
    }
    printf("watching %s\n", d.config);
    fflush(stdout);
    while (!d.config_changed) {
        if (d.expired && renew_handle(&d) != 0)
            return 1;
        if (!d.config_changed && !d.expired)
            pthread_cond_wait(&d.cond, &d.mu);
    }
    pthread_mutex_unlock(&d.mu);

    /* On the main thread, a blocking acquire is fine. */
    rc = zklock_acquire(lock, 30000);
    if (rc == ZKLOCK_OK && zklock_fence(lock, &token) == ZKLOCK_OK) {
        printf("%s changed: holding %s (token %lld)\n", d.config, argv[3], (long long)token);
        zklock_release(lock);
    } else {
        fprintf(stderr, "adopt: %s: %s\n", argv[3], zklock_strerror(rc));
    }
    zklock_free(lock);
    zklock_session_close(d.s); /* before the handle it borrows */
    zookeeper_close(d.zh);
    return rc == ZKLOCK_OK ? 0 : 1;
}
