/* background.c: a test helper that opens a session in the background and
 * takes a lock before the session could connect (test/resolve.sh runs it
 * while the server's name does not resolve yet).
 *
 *   background HOSTS PATH TIMEOUT_MS
 *
 * Prints "opened RC" as soon as zklock_session_open() returned (with
 * .background it returns at once), then "acquired RC" with what
 * zklock_acquire(PATH, TIMEOUT_MS) answered, and exits 0 if it was
 * ZKLOCK_OK (after releasing), 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>

#include <zklock.h>

int main(int argc, char **argv)
{
    zklock_session_opts_t so = {.background = 1};
    zklock_session_t *s = NULL;
    zklock_t *l = NULL;
    int rc;

    if (argc != 4) {
        fprintf(stderr, "usage: background HOSTS PATH TIMEOUT_MS\n");
        return 2;
    }
    zoo_set_debug_level(0);
    rc = zklock_session_open(&s, argv[1], &so);
    printf("opened %s\n", zklock_err_name(rc));
    fflush(stdout);
    if (rc != ZKLOCK_OK || (rc = zklock_mutex_new(&l, s, argv[2], NULL)) != ZKLOCK_OK)
        return 1;
    rc = zklock_acquire(l, atoi(argv[3]));
    printf("acquired %s\n", zklock_err_name(rc));
    fflush(stdout);
    if (rc == ZKLOCK_OK)
        zklock_release(l);
    zklock_free(l);
    zklock_session_close(s);
    return rc == ZKLOCK_OK ? 0 : 1;
}
