/* example.c: the README's example, built by `make check` and by the
 * install test against the installed library.
 *   cc example.c $(pkg-config --cflags --libs zklock) && ./a.out HOSTS */
#include <stdio.h>
#include <zklock.h>

int main(int argc, char **argv)
{
    const char *hosts = argc > 1 ? argv[1] : "127.0.0.1:2181";
    zklock_session_t *session;
    zklock_t *lock;
    int64_t token;
    int rc;

    /* ZooKeeper's C client logs to stderr, even an ERROR line every time a
     * session is closed normally; a program chooses its own level (0 = off). */
    zoo_set_debug_level(0);
    if ((rc = zklock_session_open(&session, hosts, NULL)) != ZKLOCK_OK) {
        fprintf(stderr, "cannot connect: %s\n", zklock_strerror(rc));
        return 1;
    }
    if ((rc = zklock_mutex_new(&lock, session, "/locks/nightly-report", NULL)) != ZKLOCK_OK) {
        fprintf(stderr, "no lock handle: %s\n", zklock_strerror(rc));
        zklock_session_close(session);
        return 1;
    }
    rc = zklock_acquire(lock, 30000); /* wait up to 30 s */
    if (rc == ZKLOCK_OK) {
        zklock_fence(lock, &token); /* pass it to storage with every write */
        printf("holding the lock, fencing token %lld\n", (long long)token);
        /* ELOST here: the lock went (session expired, node deleted) before
         * the release, so the work above may not have been exclusive to the
         * end; storage that checks the token has refused what came late. */
        if ((rc = zklock_release(lock)) != ZKLOCK_OK)
            fprintf(stderr, "release: %s\n", zklock_strerror(rc));
    } else {
        fprintf(stderr, "no lock: %s\n", zklock_strerror(rc));
    }
    zklock_free(lock);
    zklock_session_close(session);
    return rc == ZKLOCK_OK ? 0 : 1;
}
