/* contender.c: a test helper process that takes a lock many times.
 *
 *   contender HOSTS PATH MODE THREADS ITERATIONS SHMFILE
 *
 * MODE is m (mutex), r (read side) or w (write side of a read/write lock),
 * or sN (a semaphore of N leases). Each thread has its own session. Inside
 * every critical section it updates a detector in SHMFILE (shared with the
 * test and the other processes): writers and mutex holders must be alone,
 * readers must see no writer, every exclusive holder's fencing token must
 * exceed the previous one, and the semaphore's holders are counted as
 * readers (the test checks the most seen at once against N). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zklock.h>

#include "detector.h"

static const char *hosts, *path;
static char mode;
static int leases; /* mode s */
static int iterations;
static struct detector *det;

static zklock_t *make_lock(zklock_session_t *s, zklock_rwlock_t **rw)
{
    zklock_t *l = NULL;

    *rw = NULL;
    if (mode == 'm')
        return zklock_mutex_new(&l, s, path, NULL) == 0 ? l : NULL;
    if (mode == 's')
        return zklock_semaphore_new(&l, s, path, leases, NULL) == 0 ? l : NULL;
    if (zklock_rwlock_new(rw, s, path, NULL) != 0)
        return NULL;
    return mode == 'r' ? zklock_rwlock_read(*rw) : zklock_rwlock_write(*rw);
}

static bool shared(void)
{
    return mode == 'r' || mode == 's';
}

static void *worker(void *arg)
{
    zklock_session_t *s;
    zklock_rwlock_t *rw;
    zklock_t *l;
    int rc;

    (void)arg;
    rc = zklock_session_open(&s, hosts, NULL);
    if (rc) {
        fprintf(stderr, "contender: open: %s\n", zklock_strerror(rc));
        __atomic_add_fetch(&det->errors, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    l = make_lock(s, &rw);
    for (int i = 0; l && i < iterations; i++) {
        int64_t token = 0;
        rc = zklock_acquire(l, -1);
        if (rc == 0)
            rc = zklock_fence(l, &token);
        if (rc) {
            fprintf(stderr, "contender: acquire: %s\n", zklock_strerror(rc));
            __atomic_add_fetch(&det->errors, 1, __ATOMIC_SEQ_CST);
            break;
        }
        detector_enter(det, shared(), token);
        /* Give an overlap, if there were one, the chance to show; readers
         * stay a little longer so that they meet each other. */
        for (int k = 0; k < (shared() ? 50 : 1); k++)
            sched_yield();
        detector_leave(det, shared());
        rc = zklock_release(l);
        if (rc) {
            fprintf(stderr, "contender: release: %s\n", zklock_strerror(rc));
            __atomic_add_fetch(&det->errors, 1, __ATOMIC_SEQ_CST);
        }
    }
    if (rw)
        zklock_rwlock_free(rw);
    else
        zklock_free(l);
    zklock_session_close(s);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads, fd;
    pthread_t *t;

    if (argc != 7) {
        fprintf(stderr, "usage: contender HOSTS PATH m|r|w|sN THREADS ITERATIONS SHMFILE\n");
        return 2;
    }
    hosts = argv[1];
    path = argv[2];
    mode = argv[3][0];
    leases = mode == 's' ? atoi(argv[3] + 1) : 0;
    threads = atoi(argv[4]);
    iterations = atoi(argv[5]);
    fd = open(argv[6], O_RDWR);
    if (fd < 0) {
        perror(argv[6]);
        return 2;
    }
    det = mmap(NULL, sizeof *det, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (det == MAP_FAILED)
        return 2;
    zoo_set_debug_level(0);
    t = calloc((size_t)threads, sizeof *t);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    free(t);
    return det->errors ? 1 : 0;
}
