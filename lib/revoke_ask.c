/*
 * revoke_ask.c: asking a lock's holders to let go (zklock_revoke), in
 * Curator's convention: "__REVOKE__" written into each holder's node, as
 * Curator's Revoker.attemptRevoke writes it. The holders are read as an
 * outsider reads them (zklock_queue_read, and for a semaphore as zklock-ls
 * reads it); revoke.c is the holder's side.
 */
#include "inspect.h"
#include "revoke.h"

#include <stdlib.h>
#include <string.h>

/* ---- asking: zklock_revoke -------------------------------------------------- */

/* Does every node of q look like a kazoo semaphore's lease? */
static bool leases_all_kazoo(const zklock_queue_t *q)
{
    if (q->count == 0)
        return false;
    for (size_t i = 0; i < q->count; i++)
        if (strcmp(q->nodes[i].kind, "kazoo-lease") != 0)
            return false;
    return true;
}

static char *child(const char *path, const char *name)
{
    size_t n = strlen(path), m = strlen(name);
    char *p = malloc(n + m + 2);

    if (p) {
        memcpy(p, path, n);
        p[n] = '/';
        memcpy(p + n + 1, name, m + 1);
    }
    return p;
}

/* The holders of path: its queue, or a semaphore's leases (*holders) and,
 * for Curator's layout, its acquisition line (*line), as zklock-ls reads
 * them: a path with no lock node of its own but other children may be a
 * Curator semaphore. */
static int read_holders(zklock_session_t *s, const char *path, zklock_queue_t **holders,
                        zklock_queue_t **line)
{
    zklock_queue_t *leases = NULL;
    char *leases_path, *locks_path;
    const char *base = strcmp(path, "/") ? path : "";
    int rc = zklock_queue_read(s, path, holders);

    *line = NULL;
    if (rc != ZKLOCK_OK || !(*holders)->exists || leases_all_kazoo(*holders) ||
        (*holders)->count > 0 || (*holders)->ignored == 0)
        return rc;
    leases_path = child(base, "leases");
    locks_path = child(base, "locks");
    if (!leases_path || !locks_path) {
        rc = ZKLOCK_ENOMEM;
    } else if ((rc = zklock_queue_read(s, leases_path, &leases)) == ZKLOCK_OK && leases->exists) {
        zklock_queue_free(*holders);
        *holders = leases;
        leases = NULL;
        rc = zklock_queue_read(s, locks_path, line);
    }
    zklock_queue_free(leases);
    free(leases_path);
    free(locks_path);
    return rc;
}

/* Writes the request into one holder's node: 1 if written, 0 if the node
 * is gone (its holder left), or a negative code. The write goes through
 * the session's handle of the moment, asynchronously, and waits for its
 * answer (or for the handle's end: no handle is closed under it). */
static int ask(zklock_session_t *s, const char *queue, const zklock_node_t *n)
{
    char *node = child(queue, n->name);
    int rc;

    if (!node)
        return ZKLOCK_ENOMEM;
    rc = zklock__node_write(s, node, ZKL_REVOKE_MESSAGE, (int)(sizeof ZKL_REVOKE_MESSAGE - 1));
    free(node);
    if (rc == ZNONODE)
        return 0;
    return rc == ZOK ? 1 : rc;
}

/* Keeps in q only its first n nodes, as the caller compacted them (q is
 * ours: zklock_queue_read built it, and zklock_queue_free frees it whole). */
static void keep_first(zklock_queue_t *q, size_t n)
{
    q->count = n;
}

int zklock_revoke_nodes(zklock_session_t *s, const char *lock_path, zklock_queue_t **asked)
{
    zklock_queue_t *q = NULL, *line = NULL;
    zklock_node_t *nodes;
    int64_t waiting = 0; /* a Curator semaphore's line head: its lease waits */
    size_t n = 0;
    int rc;

    if (!asked)
        return ZKLOCK_EINVAL;
    *asked = NULL;
    if (!s || !lock_path)
        return ZKLOCK_EINVAL;
    rc = read_holders(s, lock_path, &q, &line);
    if (rc == ZKLOCK_OK && line && line->count > 0)
        waiting = line->nodes[0].session;
    zklock_queue_free(line);
    if (rc != ZKLOCK_OK) {
        zklock_queue_free(q);
        return rc;
    }
    nodes = (zklock_node_t *)q->nodes; /* ours (keep_first) */
    for (size_t i = 0; i < q->count; i++) {
        int r;
        if (!nodes[i].holds || (waiting && nodes[i].session == waiting))
            continue;
        r = ask(s, q->path, &nodes[i]);
        if (r < 0) {
            rc = r;
            break;
        }
        if (r > 0)
            nodes[n++] = nodes[i]; /* (its strings stay where they are) */
    }
    keep_first(q, n);
    *asked = q;
    return rc;
}

int zklock_revoke(zklock_session_t *s, const char *lock_path, int *asked)
{
    zklock_queue_t *q = NULL;
    int rc = zklock_revoke_nodes(s, lock_path, &q);

    if (asked)
        *asked = q ? (int)q->count : 0;
    zklock_queue_free(q);
    return rc;
}
