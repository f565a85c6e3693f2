/* handle.c: the lock handle every recipe shares: its creation, and its
 * references (the user's, one per contender, one per queued callback). */
#include "handle.h"
#include "recipe.h"
#include "session.h"

#include <stdlib.h>
#include <string.h>

/* A plain mutex changes nothing in the engine's rules. */
static const struct zkl_recipe no_recipe;

int zklock__lock_init(zklock_t *l, zklock_session_t *s, const char *path,
                  const zklock_opts_t *opts, enum zkl_tag curator_tag,
                  enum zkl_tag kazoo_tag)
{
    int rc = 0;

    if (!s || zklock__path_check(path) != 0)
        return ZKLOCK_EINVAL;
    if (opts && opts->wire != ZKLOCK_WIRE_CURATOR && opts->wire != ZKLOCK_WIRE_KAZOO)
        return ZKLOCK_EINVAL;
    if (opts && opts->max_hold_ms < 0)
        return ZKLOCK_EINVAL;
    if (opts)
        l->opts = *opts;
    if (l->opts.owner != ZKLOCK_OWNER_THREAD && l->opts.owner != ZKLOCK_OWNER_HANDLE)
        return ZKLOCK_EINVAL;
    if (l->opts.lock_delay_ms < 0)
        return ZKLOCK_EINVAL;
    l->tracks = l->opts.track_previous || l->opts.lock_delay_ms > 0;
    /* Only a mutex records its holds (previous.c): other recipes, and a
     * mutex's kazoo sibling tags, refuse before anything is made. */
    if (l->tracks && curator_tag != ZKL_TAG_LOCK)
        return ZKLOCK_EINVAL;
    /* The record's multis keep their per-operation results in the
     * contender: an adopted session's old handle, the application's to
     * close when it likes, may still write one's while a new handle's is
     * in flight. Not there. */
    if (l->tracks && s->adopted)
        return ZKLOCK_EINVAL;
    l->s = s;
    l->recipe = &no_recipe;
    l->tag = l->opts.wire == ZKLOCK_WIRE_KAZOO ? kazoo_tag : curator_tag;
    l->tag_text = zklock__tag_text(l->tag);
    l->shared = zklock__tag_shared(l->tag);
    l->keep_queue = l->opts.wire == ZKLOCK_WIRE_KAZOO;
    l->refs = 1;
    /* Most locks take the session's ACL: shared, not copied (a handle is
     * small, and an application may have many thousands). */
    l->acl = &s->acl;
    if (l->opts.acl != ZKLOCK_ACL_DEFAULT) {
        rc = zklock__acl_choose(&l->own_acl, l->opts.acl, l->opts.acl_custom, NULL);
        l->acl = &l->own_acl;
    }
    l->opts.acl_custom = NULL; /* copied: nothing of the caller's is kept */
    if (rc)
        return rc;
    l->path = strdup(path);
    if (!l->path) {
        zklock__acl_free(&l->own_acl);
        return ZKLOCK_ENOMEM;
    }
    l->queue = l->path;
    pthread_mutex_lock(&s->mu);
    if (s->closing || s->state == ZKL_S_CLOSED)
        rc = ZKLOCK_ECLOSED;
    else
        s->nlocks++;
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        free(l->path);
        l->path = NULL;
        zklock__acl_free(&l->own_acl);
    }
    return rc;
}

int zklock__lock_queue_in(zklock_t *l, const char *queue)
{
    char *q = strdup(queue);

    if (!q)
        return ZKLOCK_ENOMEM;
    l->queue = q;
    return 0;
}

static void free_paths(zklock_t *l)
{
    if (l->queue != l->path)
        free(l->queue);
    free(l->path);
    l->queue = l->path = NULL;
}

void zklock__lock_fini(zklock_t *l)
{
    pthread_mutex_lock(&l->s->mu);
    l->s->nlocks--;
    pthread_mutex_unlock(&l->s->mu);
    free_paths(l);
    zklock__acl_free(&l->own_acl);
}

/* With s->mu held; the last reference frees the handle. */
void zklock__lock_ref(zklock_t *l)
{
    l->refs++;
}

void zklock__lock_unref(zklock_t *l)
{
    if (--l->refs > 0)
        return;
    l->s->nlocks--;
    free_paths(l);
    zklock__acl_free(&l->own_acl);
    if (l->recipe->destroy)
        l->recipe->destroy(l);
    else
        free(l);
}
