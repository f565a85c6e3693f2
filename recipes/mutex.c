/* mutex.c: the exclusive lock, Curator's InterProcessMutex on the wire.
 *
 * The engine's default rule is already a mutex: every node ahead of an
 * exclusive contender blocks it, and it watches the one just ahead. */
#include <stdlib.h>

#include "../lib/recipe.h"

int zklock__exclusive_new(zklock_t **out, zklock_session_t *s, const char *path,
                          const zklock_opts_t *opts, enum zkl_tag curator_tag,
                          const struct zkl_recipe *recipe)
{
    zklock_t *l;
    int rc;

    if (!out)
        return ZKLOCK_EINVAL;
    *out = NULL;
    l = calloc(1, sizeof *l);
    if (!l)
        return ZKLOCK_ENOMEM;
    rc = zklock__lock_init(l, s, path, opts, curator_tag, ZKL_TAG_KLOCK);
    if (rc) {
        free(l);
        return rc;
    }
    if (recipe)
        l->recipe = recipe;
    *out = l;
    return 0;
}

int zklock_mutex_new(zklock_t **out, zklock_session_t *s, const char *path,
                     const zklock_opts_t *opts)
{
    return zklock__exclusive_new(out, s, path, opts, ZKL_TAG_LOCK, NULL);
}
