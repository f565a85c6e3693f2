/* rwlock.c: the read/write lock, Curator's InterProcessReadWriteLock on the
 * wire (_c_<uuid>-__READ__<seq>, _c_<uuid>-__WRIT__<seq>).
 *
 * Both sides are ordinary engine handles on the same lock path: the write
 * side creates exclusive nodes, the read side shared ones, and the engine's
 * rule does the rest (readers do not block readers; everyone queues in
 * arrival order, so a waiting writer holds back the readers behind it).
 * What is particular to the pair happens before queuing (rw_prepare):
 *  - a thread holding only the read side that asks for the write side would
 *    wait for itself forever: ZKLOCK_EDEADLK;
 *  - a thread holding the write side that asks for the read side gets it at
 *    once as a downgrade heir: a non-sequential read node carrying the
 *    writer's sequence number, so it keeps the writer's place in the queue
 *    when the write side is released (as Curator 5.5 does). */
#include "../lib/recipe.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct zklock_rwlock {
    zklock_t read;
    zklock_t write;
    int views_gone; /* views whose last reference went */
};

static zklock_rwlock_t *rw_of(zklock_t *view)
{
    return view->shared ? (zklock_rwlock_t *)((char *)view - offsetof(zklock_rwlock_t, read))
                        : (zklock_rwlock_t *)((char *)view - offsetof(zklock_rwlock_t, write));
}

/* ---- the downgrade heir ------------------------------------------------------------ */

/* A heir's own state (its recipe data, made by rw_prepare; a read-view
 * contender that is no heir has none). It holds by its writer's place: its
 * node carries the writer's number and it keeps the writer's token.
 * It lives as long as c, even once c queues as a plain reader (`forgotten`):
 * the C client writes its multi's results and created name when the answer
 * comes, whether zklock still wants it or not (an adopted session's old
 * handle after a readopt, the fake failures of an expiry), and c is freed
 * only once none of its requests is in flight. */
struct heir {
    bool forgotten;             /* c queues as a plain reader now */
    int32_t seq;                /* its writer's sequence number, its node's */
    int64_t token;              /* its writer's fencing token, its own */
    struct {                    /* the check of its writer's node and its create, */
        zoo_op_t ops[2];        /* in one multi, in flight */
        zoo_op_result_t results[2];
        char created[ZKL_PATH_MAX + ZKL_PREFIX_MAX + 32];
    } multi;
    bool writer_lost, writer_loss_unconfirmed; /* its writer's hold was lost, */
    int writer_lost_why;                       /* ... and why: so is its own */
    char writer[];              /* its writer's node, checked as it is made */
};

/* The heir's own request (its answer hook reads it). */
enum { RW_HEIR = ZKL_REQ_RECIPE };

static struct heir *heir_of(const zkl_contender_t *c)
{
    struct heir *h = zklock__lock_of(c)->shared ? zklock__data(c) : NULL;

    return h && !h->forgotten ? h : NULL;
}

static bool inherits(const zkl_contender_t *c)
{
    return heir_of(c) != NULL;
}

/* The heir's writer (same owner, the write view) still holds by the node
 * the heir was made beside: its place stands. */
static bool place_stands(const zkl_contender_t *c)
{
    const struct heir *h = heir_of(c);

    for (const zkl_contender_t *w = h ? zklock__first(zklock__lock_of(c)->sibling) : NULL; w;
         w = zklock__next(w))
        if (zklock__same_owner(w, c) && zklock__phase(w) == ZKL_HELD && zklock__node(w) &&
            strcmp(zklock__node(w), h->writer) == 0)
            return true;
    return false;
}

/* The name of the heir's writer's held node, for a recovery's listing
 * (NULL: none). */
static const char *place_node(const zkl_contender_t *c)
{
    for (const zkl_contender_t *w = zklock__first(zklock__lock_of(c)->sibling); w;
         w = zklock__next(w))
        if (zklock__attached(w) && zklock__same_owner(w, c) && zklock__phase(w) == ZKL_HELD &&
            zklock__node(w))
            return basename_of(zklock__node(w));
    return NULL;
}

/* Queues as a plain reader from now on (its heir's state stays, freed with
 * c: its multi may still be answered). */
static void forget_place(zkl_contender_t *c)
{
    struct heir *h = heir_of(c);

    if (h)
        h->forgotten = true;
}

/* The heir's node: non-sequential, with its writer's number (malloc'ed). */
static char *heir_name(zkl_contender_t *c)
{
    const zklock_t *l = zklock__lock_of(c);
    const char *prefix = zklock__prefix(c);
    size_t len = strlen(l->queue) + 1 + strlen(prefix) + strlen(l->tag_text) + 12;
    char *name = malloc(len);

    if (name)
        snprintf(name, len, "%s/%s%s%010d", l->queue, prefix, l->tag_text, heir_of(c)->seq);
    return name;
}

/* A heir is made only beside its writer's live node: the check and the
 * create in one transaction. Had an operator deleted the writer's node (the
 * writer not told yet: its own-node watch waits its delay), a writer
 * elsewhere may hold: the heir must not. True if c is a heir (its create
 * is this one). */
static bool heir_create(zkl_contender_t *c)
{
    const zklock_t *l = zklock__lock_of(c);
    const char *identity = zklock__identity(l->s);
    struct heir *h = heir_of(c);
    char *name;

    if (!h)
        return false;
    if (!(name = heir_name(c))) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return true;
    }
    memset(&h->multi, 0, sizeof h->multi);
    zoo_check_op_init(&h->multi.ops[0], h->writer, -1);
    zoo_create_op_init(&h->multi.ops[1], name, identity, (int)strlen(identity), l->acl,
                       ZOO_EPHEMERAL, h->multi.created, (int)sizeof h->multi.created);
    zklock__send(c, &(struct zkl_request){.kind = RW_HEIR, .call = ZKL_CALL_MULTI, .nops = 2,
                                          .ops = h->multi.ops, .results = h->multi.results});
    free(name); /* serialised by zoo_amulti */
    return true;
}

static void on_heir_made(zkl_contender_t *c, const struct zkl_answer *a)
{
    struct heir *h = heir_of(c);
    int check = h->multi.results[0].err, create = h->multi.results[1].err;

    zklock__heard(c, a->rc);
    if (a->rc == ZOK) {
        zklock__set_node(c, strdup(h->multi.created));
        if (!zklock__node(c)) {
            zklock__give_up(c, ZKLOCK_ENOMEM); /* it goes with the session */
            return;
        }
        zklock__set_seq(c, h->seq);
        if (zklock__phase(c) == ZKL_QUEUING)
            zklock__become_holder(c); /* by its writer's place: no listing */
    } else if (check == ZNONODE) {
        /* Its writer's node is gone (the writer learns it from its own
         * watch): no place to inherit. Queue as a plain reader, wherever
         * the lock path now is. */
        zklock__requeue(c);
    } else if (create == ZNODEEXISTS) {
        /* An earlier create of ours whose reply was lost: ours only if our
         * session owns it. */
        zklock__set_node(c, heir_name(c));
        if (zklock__node(c))
            zklock__send_owner_check(c);
        else
            zklock__give_up(c, ZKLOCK_ENOMEM);
    } else {
        if (transient(a->rc))
            zklock__set_create_unknown(c, true);
        zklock__failed(c, a->rc);
    }
}

static void rw_answer(zkl_contender_t *c, const struct zkl_answer *a)
{
    if (a->kind == RW_HEIR && heir_of(c))
        on_heir_made(c, a);
}

/* A heir holds by its writer's token: its own node is newer than a writer
 * queued behind, whose token storage must still accept. */
static void rw_granted(zkl_contender_t *c)
{
    if (heir_of(c))
        zklock__set_token(c, heir_of(c)->token);
}

/* A writer's hold is lost: so are its heirs' (their steps lose them). */
static void rw_ending(zkl_contender_t *w)
{
    const zklock_t *l = zklock__lock_of(w);

    if (l->shared || zklock__phase(w) != ZKL_LOST)
        return;
    for (zkl_contender_t *c = zklock__first(l->sibling); c; c = zklock__next(c)) {
        struct heir *h = heir_of(c);
        if (!h || zklock__phase(c) != ZKL_HELD || !zklock__same_owner(c, w))
            continue;
        h->writer_lost = true;
        h->writer_lost_why = zklock__lost_why(w, &h->writer_loss_unconfirmed);
        zklock__mark(c);
    }
}

/* A heir's step: its writer's hold was lost, so is its own, and its node
 * goes (it holds by nothing now). */
static void rw_step(zkl_contender_t *c)
{
    struct heir *h = heir_of(c);

    if (!h || !h->writer_lost)
        return;
    h->writer_lost = false;
    if (zklock__phase(c) != ZKL_HELD)
        return;
    zklock__stale_add(c);
    if (h->writer_loss_unconfirmed)
        zklock__lose_unconfirmed(c, h->writer_lost_why);
    else
        zklock__lose(c, h->writer_lost_why);
    zklock__stale_sweep(zklock__lock_of(c)->s);
}

/* ---- before queuing ------------------------------------------------------------------ */

/* A thread holding only the read side that asks for the write side would
 * wait for itself: ZKLOCK_EDEADLK. One holding the write side that asks
 * for the read side gets a heir. */
static int rw_prepare(zklock_t *l, zkl_contender_t *c)
{
    const zkl_contender_t *other = zklock__owner_contender(l->sibling);
    struct heir *h;

    if (other && zklock__acquiring(other))
        return ZKLOCK_EBUSY; /* handle-owned: the pair's other acquisition is in progress
                                (a multi-lock's, too: no downgrade of a hold not begun) */
    if (!other || zklock__phase(other) != ZKL_HELD)
        return 0;
    if (!l->shared)
        return ZKLOCK_EDEADLK; /* read held, write asked: an upgrade */
    if (!zklock__node(other) || !(h = calloc(1, sizeof *h + strlen(zklock__node(other)) + 1)))
        return ZKLOCK_ENOMEM;
    strcpy(h->writer, zklock__node(other));
    h->seq = zklock__seq(other);
    h->token = zklock__token(other);
    zklock__set_data(c, h);
    return 0;
}

/* The pair is one allocation: freed when both views are gone. */
static void rw_view_gone(zklock_t *view)
{
    zklock_rwlock_t *rw = rw_of(view);
    if (++rw->views_gone == 2)
        free(rw);
}

static const struct zkl_heir_hooks rw_heirs = {
    .inherits = inherits,
    .place_stands = place_stands,
    .place_node = place_node,
    .forget_place = forget_place,
    .create = heir_create,
};

static const struct zkl_request_kind rw_kinds[] = {
    [RW_HEIR - ZKL_REQ_RECIPE] = {.beside = false},
};

static const struct zkl_recipe rw_recipe = {
    .prepare = rw_prepare,
    .heir = &rw_heirs,
    .granted = rw_granted,
    .ending = rw_ending,
    .step = rw_step,
    .answer = rw_answer,
    .kinds = rw_kinds,
    .nkinds = 1,
    .destroy = rw_view_gone,
};

static void init_view(zklock_t *view, zklock_t *sibling)
{
    view->sibling = sibling;
    view->borrowed = true;
    view->recipe = &rw_recipe;
}

int zklock_rwlock_new(zklock_rwlock_t **out, zklock_session_t *s, const char *path,
                      const zklock_opts_t *opts)
{
    zklock_rwlock_t *rw;
    int rc;

    if (!out)
        return ZKLOCK_EINVAL;
    *out = NULL;
    rw = calloc(1, sizeof *rw);
    if (!rw)
        return ZKLOCK_ENOMEM;
    rc = zklock__lock_init(&rw->read, s, path, opts, ZKL_TAG_READ, ZKL_TAG_KRLOCK);
    if (rc == 0) {
        rc = zklock__lock_init(&rw->write, s, path, opts, ZKL_TAG_WRIT, ZKL_TAG_KLOCK);
        if (rc)
            zklock__lock_fini(&rw->read);
    }
    if (rc) {
        free(rw);
        return rc;
    }
    init_view(&rw->read, &rw->write);
    init_view(&rw->write, &rw->read);
    *out = rw;
    return 0;
}

zklock_t *zklock_rwlock_read(zklock_rwlock_t *rw)
{
    return rw ? &rw->read : NULL;
}

zklock_t *zklock_rwlock_write(zklock_rwlock_t *rw)
{
    return rw ? &rw->write : NULL;
}

void zklock_rwlock_free(zklock_rwlock_t *rw)
{
    if (!rw)
        return;
    /* The read side first: a downgraded holder's heir goes before its writer.
     * Each view's owed callbacks run before the next goes (the last may free
     * rw). */
    zklock__locks_free((zklock_t *const[]){&rw->read, &rw->write}, 2);
}
