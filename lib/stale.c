/*
 * stale.c: nodes of ours that outlived the session we gave up.
 *
 * When zklock ends a session without a server saying so (the connection was
 * down for a whole session timeout, or the application handed an adopted
 * session a new handle), the old session may live on for a while on the
 * server, and our nodes with it: a lost hold would then block our own next
 * acquisition until the server expires the session. So the engine remembers
 * them here, and the next session removes them: a delete for a node whose
 * name we know, a listing for one a lost create reply left unknown (found by
 * its name prefix). Until then the listing's rules (rules.c) never let them
 * block us.
 */
#include "recipe.h"
#include "request.h"
#include "stale.h"

#include <stdio.h>

struct zkl_stale {
    struct zkl_stale *next;
    zklock_session_t *s;
    char *dir;                   /* the lock path */
    char prefix[ZKL_PREFIX_MAX]; /* the names of its nodes start so */
    char *node;                  /* the node; NULL: unknown, list dir */
    int ops;                     /* requests about it in flight */
    unsigned gen;                /* ... sent in this generation */
    bool gone;                   /* removed (or beyond our reach) */
};

static void stale_delete_done(int rc, const void *data);
static void stale_list_done(int rc, const struct String_vector *names, const void *data);

static struct zkl_stale *stale_new(zklock_session_t *s, const char *dir, const char *prefix,
                                   const char *node)
{
    struct zkl_stale *e = calloc(1, sizeof *e);

    if (!e)
        return NULL;
    e->s = s;
    e->dir = strdup(dir);
    e->node = node ? strdup(node) : NULL;
    if (!e->dir || (node && !e->node)) {
        free(e->dir);
        free(e->node);
        free(e);
        return NULL;
    }
    snprintf(e->prefix, sizeof e->prefix, "%s", prefix);
    e->next = s->stale;
    s->stale = e;
    return e;
}

static void stale_free(struct zkl_stale *e)
{
    free(e->dir);
    free(e->node);
    free(e);
}

/* Frees the entries that are gone and have no request in flight. */
static void stale_prune(zklock_session_t *s)
{
    struct zkl_stale **p = &s->stale;

    while (*p) {
        struct zkl_stale *e = *p;
        if (e->gone && e->ops == 0) {
            *p = e->next;
            stale_free(e);
        } else {
            p = &e->next;
        }
    }
}

void zklock__stale_add(zkl_contender_t *c)
{
    /* A create in flight, or one whose reply was lost, may have made a node
     * we cannot name: its prefix finds it. (Out of memory, it goes with the
     * old session, as it did before zklock remembered such nodes.) */
    bool unknown = c->create_unknown || c->busy > 0;

    if ((!c->node && !unknown) || c->l->recipe->nodeless)
        return;
    stale_new(session_of(c), c->l->queue, c->prefix, unknown ? NULL : c->node);
}

bool zklock__stale_match(const zklock_session_t *s, const char *dir, const char *name)
{
    for (const struct zkl_stale *e = s->stale; e; e = e->next)
        if (!e->gone && strcmp(e->dir, dir) == 0 &&
            strncmp(name, e->prefix, strlen(e->prefix)) == 0)
            return true;
    return false;
}

static bool sent(struct zkl_stale *e, int rc)
{
    if (!zklock__request_sent(e->s, rc))
        return false; /* the next resume tries again */
    e->ops++;
    e->gen = e->s->gen;
    return true;
}

void zklock__stale_sweep(zklock_session_t *s)
{
    for (struct zkl_stale *e = s->stale; e; e = e->next) {
        if (e->gone || e->ops > 0)
            continue;
        if (e->node)
            sent(e, s->wire->adelete(s->zh, e->node, -1, stale_delete_done, e));
        else
            sent(e, s->wire->aget_children(s->zh, e->dir, 0, stale_list_done, e));
    }
}

/* With s->mu held, first in every answer: false if it belongs to an older
 * generation (the entry stays for the next session's sweep). */
static bool answered(struct zkl_stale *e)
{
    zklock_session_t *s = e->s;

    e->ops--;
    zklock__request_answered(s);
    return e->gen == s->gen;
}

/* Anything but "no connection" or "the session is ending" settles it: gone,
 * or refused for good (an ACL changed), and then it goes with its session. */
static bool settled(int rc)
{
    return !transient(rc) && !session_ending(rc);
}

/* A transient answer that no session event follows (a throttled one, the
 * connection standing): no resume will sweep again, the session's retry
 * timer does. Left to the next reconnection, a lost hold's node stayed for
 * the session's life, in everyone else's way. */
static void retry_unsettled(struct zkl_stale *e, int rc)
{
    if (transient(rc) && zklock__connected(e->s))
        zklock__retry_later(e->s);
}

static void stale_delete_done(int rc, const void *data)
{
    struct zkl_stale *e = (struct zkl_stale *)data;
    zklock_session_t *s = e->s;

    pthread_mutex_lock(&s->mu);
    if (answered(e)) {
        if (settled(rc))
            e->gone = true;
        else
            retry_unsettled(e, rc);
    }
    stale_prune(s);
    pthread_mutex_unlock(&s->mu);
}

/* The listing names the nodes a lost reply left unknown: delete each. */
static void stale_list_done(int rc, const struct String_vector *names, const void *data)
{
    struct zkl_stale *e = (struct zkl_stale *)data;
    zklock_session_t *s = e->s;
    bool current;

    pthread_mutex_lock(&s->mu);
    current = answered(e);
    if (current && !settled(rc))
        retry_unsettled(e, rc);
    if (current && settled(rc)) {
        e->gone = true;
        for (int i = 0; rc == ZOK && i < names->count; i++) {
            const char *name = names->data[i];
            char *node;
            struct zkl_stale *found;
            if (strncmp(name, e->prefix, strlen(e->prefix)) != 0)
                continue;
            node = zklock__child_path(e->dir, name);
            found = node ? stale_new(s, e->dir, e->prefix, node) : NULL;
            if (found && zklock__connected(s))
                sent(found, s->wire->adelete(s->zh, found->node, -1, stale_delete_done, found));
            free(node);
        }
    }
    stale_prune(s);
    pthread_mutex_unlock(&s->mu);
}

void zklock__stale_free_all(zklock_session_t *s)
{
    while (s->stale) {
        struct zkl_stale *e = s->stale;
        s->stale = e->next;
        stale_free(e);
    }
}
