/*
 * auth.c: who the session is (credentials) and who may touch what it
 * creates (ACLs).
 *
 * Credentials are added to every handle the session uses, before its first
 * request: the C client sends them ahead of anything queued, and again on
 * every reconnection of that handle; a new handle (a renewed session, a
 * readopt) gets them here again, at once or, if it is between two
 * connection attempts, as it connects (nothing waits for that). A server that rejects them answers so and
 * closes the connection before reading further: the handle ends in
 * ZOO_AUTH_FAILED_STATE, and the session stops there (session.c), it does
 * not retry. A server that accepts them answers the requests after them:
 * a probe sent once connected tells zklock_session_open that verdict.
 *
 * The C client's own answer to a credential is not used: when the
 * connection goes before the server's, it answers "connection loss" (then
 * sends them again, without a word of that verdict), and it calls that
 * answer on its I/O thread inside a lock that every request takes, where
 * taking s->mu would deadlock against a thread sending under it.
 */
#include "session.h"

#include <stdlib.h>
#include <string.h>

/* The most an ACL may take in a request (serialized): what is left of a
 * server's default jute.maxbuffer beside ZKLOCK_DATA_MAX and a node's path. */
#define ZKL_ACL_MAX_BYTES 2048

/* ---- credentials ------------------------------------------------------------ */

/* A probe of the credentials on handle generation gen. */
struct auth_probe {
    zklock_session_t *s;
    unsigned gen;
};

int zklock__auth_copy(zklock_session_t *s, const zklock_auth_t *auth, size_t n)
{
    if (n > 0 && !auth)
        return ZKLOCK_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!auth[i].scheme || !*auth[i].scheme || (auth[i].len > 0 && !auth[i].data) ||
            auth[i].len > ZKLOCK_DATA_MAX)
            return ZKLOCK_EINVAL;
    s->auth = calloc(n + 1, sizeof *s->auth);
    if (!s->auth)
        return ZKLOCK_ENOMEM;
    for (size_t i = 0; i < n; i++, s->nauth++) {
        struct zkl_auth *a = &s->auth[i];
        a->scheme = strdup(auth[i].scheme);
        a->data = malloc(auth[i].len + 1);
        if (!a->scheme || !a->data)
            return ZKLOCK_ENOMEM; /* the caller frees what was copied */
        memcpy(a->data, auth[i].data, auth[i].len);
        a->len = (int)auth[i].len;
    }
    return 0;
}

void zklock__auth_free(zklock_session_t *s)
{
    for (size_t i = 0; s->auth && i <= s->nauth; i++) { /* calloc'd n + 1 */
        free(s->auth[i].scheme);
        /* the data may hold a password: do not leave it in freed memory */
        if (s->auth[i].data)
            memset(s->auth[i].data, 0, (size_t)s->auth[i].len);
        free(s->auth[i].data);
    }
    free(s->auth);
    s->auth = NULL;
    s->nauth = 0;
}

/* What the probe's answer says of the credentials: 0 (accepted: a server
 * answered it), a refusal, or -1 (nothing: the C client's own word on a
 * connection that failed, so the next connection asks again). */
static int probe_verdict(int rc)
{
    switch (rc) {
    case ZOK:
    case ZNONODE:      /* "/" under a chroot */
    case ZNOAUTH:
    case ZTHROTTLEDOP: /* an overloaded server's answer */
        return 0;
    case ZSESSIONCLOSEDREQUIRESASLAUTH: /* enforced authentication: not ours */
        return ZAUTHFAILED;
    default:
        return session_ending(rc) ? rc : -1;
    }
}

static void probe_answered(int rc, const struct Stat *stat, const void *data)
{
    struct auth_probe *p = (struct auth_probe *)data;
    zklock_session_t *s = p->s;
    int verdict = probe_verdict(rc);

    (void)stat;
    pthread_mutex_lock(&s->mu);
    if (p->gen == s->auth_gen) {
        s->auth_probing = false;
        if (verdict != -1) {
            s->auth_pending = false;
            if (verdict != 0 && s->auth_rc == 0)
                s->auth_rc = verdict;
            pthread_cond_broadcast(&s->cond);
        }
    }
    zklock__request_answered(s);
    pthread_mutex_unlock(&s->mu);
    free(p);
}

/* With s->mu held: adds to s->zh the credentials it has not taken yet.
 * zoo_add_auth refuses (ZINVALIDSTATE) while the handle is between two
 * connection attempts (state 0: a server refused, the next try waits a
 * sixtieth of the timeout), though it would send a credential on every
 * connection after. Nothing here waits for that (zklock_session_readopt
 * does not block): what it refuses so is added as the handle connects
 * (zklock__auth_confirm), before anything of ours is sent on it. */
static int add_pending(zklock_session_t *s)
{
    while (s->auth_added < s->nauth) {
        const struct zkl_auth *a = &s->auth[s->auth_added];
        int rc = s->wire->add_auth(s->zh, a->scheme, a->data, a->len, NULL, NULL);
        if (rc == ZINVALIDSTATE && s->wire->state(s->zh) == 0)
            return 0; /* on its connection */
        if (rc != ZOK)
            return rc;
        s->auth_added++;
    }
    return 0;
}

int zklock__auth_send(zklock_session_t *s)
{
    s->auth_gen++;
    s->auth_pending = s->nauth > 0;
    s->auth_probing = false;
    s->auth_rc = 0;
    s->auth_added = 0;
    return add_pending(s);
}

/* No verdict will come: rc is the session's answer. */
static void auth_refused(zklock_session_t *s, int rc)
{
    s->auth_pending = false;
    if (s->auth_rc == 0)
        s->auth_rc = rc;
    pthread_cond_broadcast(&s->cond);
}

void zklock__auth_confirm(zklock_session_t *s)
{
    struct auth_probe *p;
    int rc = add_pending(s); /* those refused between two connection attempts */

    if (rc != 0) {
        auth_refused(s, rc);
        return;
    }
    if (!s->auth_pending || s->auth_probing)
        return;
    p = malloc(sizeof *p);
    if (!p) {
        auth_refused(s, ZKLOCK_ENOMEM);
        return;
    }
    *p = (struct auth_probe){s, s->auth_gen};
    if (!zklock__request_sent(s, s->wire->aexists(s->zh, "/", 0, probe_answered, p))) {
        free(p); /* the handle is ending: the session code tells why */
        return;
    }
    s->auth_probing = true;
}

/* ---- ACLs ------------------------------------------------------------------------- */

static size_t acl_bytes(const struct ACL_vector *v)
{
    size_t n = 4;
    for (int32_t i = 0; i < v->count; i++)
        n += 4 + 4 + strlen(v->data[i].id.scheme) + 4 + strlen(v->data[i].id.id);
    return n;
}

void zklock__acl_free(struct ACL_vector *v)
{
    for (int32_t i = 0; v->data && i < v->count; i++) {
        free(v->data[i].id.scheme);
        free(v->data[i].id.id);
    }
    free(v->data);
    v->data = NULL;
    v->count = 0;
}

/* A deep copy of src into *dst (emptied first). */
static int acl_copy(struct ACL_vector *dst, const struct ACL_vector *src)
{
    zklock__acl_free(dst);
    if (!src || src->count <= 0 || !src->data)
        return ZKLOCK_EINVAL;
    for (int32_t i = 0; i < src->count; i++)
        if (!src->data[i].id.scheme || !src->data[i].id.id)
            return ZKLOCK_EINVAL;
    if (acl_bytes(src) > ZKL_ACL_MAX_BYTES)
        return ZKLOCK_EINVAL; /* the server would drop every create */
    dst->data = calloc((size_t)src->count, sizeof *dst->data);
    if (!dst->data)
        return ZKLOCK_ENOMEM;
    for (dst->count = 0; dst->count < src->count; dst->count++) {
        struct ACL *to = &dst->data[dst->count];
        const struct ACL *from = &src->data[dst->count];
        to->perms = from->perms;
        to->id.scheme = strdup(from->id.scheme);
        to->id.id = strdup(from->id.id);
        if (!to->id.scheme || !to->id.id) {
            dst->count++;
            zklock__acl_free(dst);
            return ZKLOCK_ENOMEM;
        }
    }
    return 0;
}

int zklock__acl_choose(struct ACL_vector *dst, int kind, const struct ACL_vector *custom,
                       const struct ACL_vector *inherited)
{
    struct ACL creator[2];
    struct ACL_vector creator_v = {2, creator};

    switch (kind) {
    case ZKLOCK_ACL_DEFAULT:
        return inherited ? acl_copy(dst, inherited) : acl_copy(dst, &ZOO_OPEN_ACL_UNSAFE);
    case ZKLOCK_ACL_OPEN:
        return acl_copy(dst, &ZOO_OPEN_ACL_UNSAFE);
    case ZKLOCK_ACL_CREATOR:
        /* the creating identity may do everything, anyone may look */
        creator[0] = (struct ACL){ZOO_PERM_ALL, ZOO_AUTH_IDS};
        creator[1] = (struct ACL){ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE};
        return acl_copy(dst, &creator_v);
    case ZKLOCK_ACL_CUSTOM:
        return acl_copy(dst, custom);
    default:
        return ZKLOCK_EINVAL;
    }
}
