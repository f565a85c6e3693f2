/*
 * multi.c: several locks, all or none (Curator's InterProcessMultiLock, made
 * deadlock-free).
 *
 * A multi-lock's contender M makes no node of its own: it owns one contender
 * per member (its subs, see lib/subs.c), each an ordinary contender of the
 * member's handle, owned by M's owner, so that while M holds, each member is
 * held by that thread too (zklock_fence(member) works).
 *
 * Deadlock: M puts a node in every lock member's queue with ONE zoo_multi
 * transaction, and the listings follow it (one round trip for all). The
 * transactions of two multi-locks are ordered (one zxid each), so the earlier
 * one's nodes come first in every queue they share: a multi-lock only ever
 * waits for multi-locks that enqueued before it, or for plain holders, which
 * wait for nothing. No cycle, whatever order the caller named the members
 * in. Members are otherwise ordinary nodes, so peers on one member (Curator,
 * kazoo, zklock) still interoperate.
 *
 * Semaphore members take their leases one at a time, in path order, once
 * every lock member is held: a multi-lock that waits for a lease then holds
 * all its locks, so nobody holding a lease waits for it; and leases taken in
 * one global order cannot wait in a cycle.
 *
 * The creates of a zoo_multi return no Stat: the fencing token (the nodes'
 * creation zxid, the transaction's, the same for all of them) is read with
 * one exists on one of them, before M holds.
 *
 * That order holds only while M's nodes are the ones its transaction made.
 * When a member's place goes while M waits (its node deleted by hand, its
 * hold lost to the session's end or the lease), every member lets go of
 * what it has (holds released, places given up) and M queues them all again
 * in one new transaction, once the old nodes are gone: a member queued
 * again alone, at the back, while the others kept their places, made M wait
 * for a later multi-lock on one lock while that one waited for M on
 * another (issue 21). M's step decides it from its members' phases (they
 * never call M); the members let go are its subs until they are gone.
 */
#include "../lib/recipe.h"

#include <stdio.h>

struct zklock_multi {
    zklock_t h;
    size_t n, nlocks;                    /* members; the lock members come first, */
    zklock_t *members[ZKLOCK_MULTI_MAX]; /* then the semaphores, by path */
};

/* M's round (its recipe data, from the first transaction on): the
 * transaction that makes the lock members' nodes, who it is for, the paths
 * made, and the node whose creation zxid is read for the token.
 * The C client writes a multi's results and the names it created into the
 * buffers it was given when its answer comes, whether zklock still wants it
 * or not (an adopted session's old handle after a readopt, the fake
 * failures of an expiry): a round is freed only once no request of M's is
 * in flight (send_enqueue), or with M (multi_free_data). */
#define NAME_MAX_LEN (ZKL_PATH_MAX + ZKL_PREFIX_MAX + 32)
struct enqueue {
    struct enqueue *older; /* the rounds before, kept while they may be written */
    bool sent; /* the transaction went out (its outcome maybe unknown): a
                  lock member without a node since has lost its place */
    char read[NAME_MAX_LEN];
    int n;
    zkl_contender_t *who[ZKLOCK_MULTI_MAX];
    zoo_op_t ops[ZKLOCK_MULTI_MAX];
    zoo_op_result_t results[ZKLOCK_MULTI_MAX];
    char names[][NAME_MAX_LEN];
};

static struct zklock_multi *multi_of(const zklock_t *l)
{
    return (struct zklock_multi *)((char *)l - offsetof(struct zklock_multi, h));
}

static bool in_turn(const zklock_t *member)
{
    return member->recipe->in_turn;
}

/* ---- enqueuing: one transaction for every lock member ------------------------------------ */

/* M's own requests (its answer hook reads them). */
enum { MULTI_ENQUEUE = ZKL_REQ_RECIPE, MULTI_TOKEN };

static bool enqueued_by_m(const zkl_contender_t *m)
{
    return zklock__by_parent(m) && !in_turn(zklock__lock_of(m)) && !zklock__is_let_go(m) &&
           !zklock__inherits(m);
}

static bool round_sent(const zkl_contender_t *c)
{
    const struct enqueue *e = zklock__data(c);

    return e && e->sent;
}

/* How many lock members wait for M to make their node; *busy if one of
 * them has something in flight (M then waits, to make all in one go). */
static int waiting_for_nodes(const zkl_contender_t *c, bool *busy)
{
    int n = 0;

    *busy = false;
    for (const zkl_contender_t *m = zklock__first_sub(c); m; m = zklock__next_sub(m)) {
        if (!enqueued_by_m(m))
            continue;
        *busy |= zklock__busy(m) > 0 || zklock__create_unknown(m);
        n += !zklock__node(m) && !zklock__create_unknown(m);
    }
    return n;
}

static void rounds_free(struct enqueue *e)
{
    while (e) {
        struct enqueue *older = e->older;
        free(e);
        e = older;
    }
}

/* The rounds before the one about to go out: kept, unless nothing of M's is
 * in flight any more (then none of them can be written). */
static struct enqueue *rounds_kept(zkl_contender_t *c)
{
    if (zklock__in_flight(c) == 0) {
        rounds_free(zklock__data(c));
        zklock__set_data(c, NULL);
    }
    return zklock__data(c);
}

static void send_enqueue(zkl_contender_t *c, int n)
{
    const char *identity = zklock__identity(zklock__lock_of(c)->s);
    struct enqueue *e = calloc(1, sizeof *e + (size_t)n * NAME_MAX_LEN);
    char *paths[ZKLOCK_MULTI_MAX];
    bool sent;

    if (!e) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    for (zkl_contender_t *m = zklock__first_sub(c); m && e->n < n; m = zklock__next_sub(m)) {
        if (!enqueued_by_m(m) || zklock__node(m))
            continue;
        if (!(paths[e->n] = zklock__node_name(m))) {
            for (int i = 0; i < e->n; i++)
                free(paths[i]);
            free(e);
            zklock__give_up(c, ZKLOCK_ENOMEM);
            return;
        }
        zklock__set_parent_refusal(m, 0); /* it speaks of this attempt's parents only */
        if (zklock__parents_wanted(m))
            zklock__send_parents(m); /* ahead of the transaction: answered first */
        zklock__set_parents_wanted(m, false);
        zoo_create_op_init(&e->ops[e->n], paths[e->n], identity, (int)strlen(identity),
                           zklock__lock_of(m)->acl, ZOO_EPHEMERAL_SEQUENTIAL, e->names[e->n],
                           NAME_MAX_LEN);
        e->who[e->n++] = m;
    }
    e->older = rounds_kept(c);
    zklock__set_data(c, e);
    sent = zklock__send(c, &(struct zkl_request){.kind = MULTI_ENQUEUE, .call = ZKL_CALL_MULTI,
                                                 .nops = e->n, .ops = e->ops,
                                                 .results = e->results});
    for (int i = 0; i < e->n; i++)
        free(paths[i]); /* serialised by zoo_amulti */
    if (!sent) {
        e->n = 0; /* refused, made nothing: M's next step says why */
        return;
    }
    e->sent = true;
    for (int i = 0; i < e->n; i++) {
        zklock__chain_begin(e->who[i]); /* its node is being made: nothing else for it meanwhile */
        zklock__send_list(e->who[i]); /* answered after the transaction: it is in */
    }
}

/* The member whose create failed the transaction (-1 if none did), and why. */
static int failed_member(const struct enqueue *e, int rc, int *which)
{
    *which = -1;
    for (int i = 0; i < e->n; i++) {
        int err = e->results[i].err;
        if (err != ZOK && err != ZRUNTIMEINCONSISTENCY) {
            *which = i;
            return err;
        }
    }
    return rc;
}

static void enqueue_failed(zkl_contender_t *c, struct enqueue *e, int rc)
{
    int which, why = failed_member(e, rc, &which);
    zkl_contender_t *m = which >= 0 ? e->who[which] : NULL;

    if (transient(rc)) {
        for (int i = 0; i < e->n; i++) /* each looks for its node by its prefix */
            zklock__set_create_unknown(e->who[i], true);
        return; /* the round stands: made all of them, or none */
    }
    e->sent = false; /* refused: it made nothing */
    if (m && why == ZNONODE && zklock__parent_refusal(m) == 0) {
        /* Its lock path is missing (maybe others' too: only the first
         * failure is told): all of them are made first next time. */
        for (int i = 0; i < e->n; i++)
            zklock__set_parents_wanted(e->who[i], true);
    } else if (zklock__phase(c) == ZKL_QUEUING && !session_ending(rc)) {
        zklock__give_up(c, m && why == ZNONODE ? zklock__parent_refusal(m) : why);
    }
}

/* The creation zxid of one node of the transaction (the transaction's) is
 * every member's fencing token: read with one exists. */
static void send_token_read(zkl_contender_t *c, struct enqueue *e, const char *node)
{
    snprintf(e->read, sizeof e->read, "%s", node);
    zklock__send(c, &(struct zkl_request){.kind = MULTI_TOKEN, .call = ZKL_CALL_EXISTS,
                                          .path = e->read});
}

static void on_enqueued(zkl_contender_t *c, const struct zkl_answer *a)
{
    struct enqueue *e = zklock__data(c);

    zklock__heard(c, a->rc);
    for (int i = 0; i < e->n; i++)
        zklock__chain_end(e->who[i]);
    if (a->rc != ZOK) {
        enqueue_failed(c, e, a->rc);
        if (!e->sent)
            e->n = 0; /* it made nothing (kept: it holds the rounds before) */
        return;
    }
    for (int i = 0; i < e->n; i++) {
        struct zkl_entry entry;
        zkl_contender_t *m = e->who[i];
        zklock__set_node(m, strdup(e->names[i]));
        zklock__set_seq(m, zklock__parse_name(basename_of(e->names[i]), &entry) == 0 ? entry.seq
                                                                                     : 0);
        zklock__set_token(m, 0); /* read next: a transaction's create gives no Stat */
        if (!zklock__node(m))
            zklock__give_up(c, ZKLOCK_ENOMEM); /* it goes with the session */
        zklock__mark(m); /* let go of meanwhile: its step deletes its node now */
    }
    send_token_read(c, e, e->names[0]);
}

static bool made_by(const struct enqueue *e, const char *node)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(node, e->names[i]) == 0)
            return true;
    return false;
}

/* The member whose node was read gets its token; so do those whose nodes
 * the same transaction made, if it was one of the round's (by name, for a
 * member may have gone meanwhile). */
static void on_token(zkl_contender_t *c, const struct zkl_answer *a)
{
    const struct enqueue *e = zklock__data(c);
    bool of_round = e && made_by(e, e->read);

    for (zkl_contender_t *m = zklock__first_sub(c); e && a->rc == ZOK && m;
         m = zklock__next_sub(m)) {
        const char *node = zklock__node(m);
        if (node && (strcmp(node, e->read) == 0 || (of_round && made_by(e, node))))
            zklock__set_token(m, a->stat->czxid);
    }
    /* else: that node went (its member queues again), or no answer came:
     * the next step asks again */
}

static void multi_answer(zkl_contender_t *c, const struct zkl_answer *a)
{
    if (a->kind == MULTI_ENQUEUE)
        on_enqueued(c, a);
    else if (a->kind == MULTI_TOKEN)
        on_token(c, a);
}

/* A held member's token still unknown (the read was lost, or its node was
 * found again after a lost reply): ask again. */
static void read_token(zkl_contender_t *c, zkl_contender_t *m)
{
    if (!zklock__data(c))
        zklock__set_data(c, calloc(1, sizeof(struct enqueue)));
    if (!zklock__data(c)) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    send_token_read(c, zklock__data(c), zklock__node(m));
}

/* ---- members ------------------------------------------------------------------------------ */

/* A new member of M on handle `member` (M makes its node, a heir its own,
 * or starts it in its turn), with the member's own rules: a read/write view
 * refuses an upgrade or makes a downgrade heir (again, in a new round,
 * while its writer holds), a semaphore its lease's state. 0, or why not. */
static int new_member(zkl_contender_t *c, zklock_t *member)
{
    zkl_contender_t *m = zklock__sub_new(c, member, true);

    if (!m)
        return ZKLOCK_ENOMEM;
    return member->recipe->prepare ? member->recipe->prepare(member, m) : 0;
}

/* ---- a member's place goes while M waits: all queue again ------------------------------- */

/* Has member m lost the place M's round gave it? Its hold went (its node
 * deleted, the session's end, the lease), or its node did while it waited,
 * once the round's transaction was sent. A heir holds by its writer's
 * place (its own step makes it again while the writer holds); a semaphore's
 * lease is taken in its own turn. */
static bool lost_place(const zkl_contender_t *c, const zkl_contender_t *m)
{
    if (zklock__phase(m) == ZKL_LOST || zklock__phase(m) == ZKL_GONE)
        return true;
    if (in_turn(zklock__lock_of(m)) || zklock__inherits(m))
        return false;
    return round_sent(c) && !zklock__node(m);
}

/* Has a member lost its place? Not known while one still looks for its
 * node after a lost reply (the transaction made all of them, or none). */
static bool place_lost(const zkl_contender_t *c)
{
    bool lost = false;

    for (const zkl_contender_t *m = zklock__first_sub(c); m; m = zklock__next_sub(m)) {
        if (zklock__is_let_go(m))
            continue;
        if (zklock__create_unknown(m))
            return false;
        lost |= lost_place(c, m);
    }
    return lost;
}

/* Has member m anything on the server: a hold, a node, maybe one (a lost
 * reply), a lease being taken? */
static bool has_place(const zkl_contender_t *m)
{
    return zklock__phase(m) == ZKL_HELD || zklock__node(m) || zklock__create_unknown(m) ||
           (in_turn(zklock__lock_of(m)) && zklock__waiting(m));
}

/* Every member with a place is let go (its own step releases a hold or
 * gives up a place: its node deleted in the background) and a new member
 * takes over; so does one whose hold or place is gone. Those with nothing
 * on the server stay. The next transaction queues them all (multi_step:
 * once the old members are gone). A member that keeps vanishing costs one
 * round per loss: the new round is fresh until its transaction goes out. */
static bool requeue_all(zkl_contender_t *c)
{
    struct enqueue *e = zklock__data(c);
    int rc;

    for (zkl_contender_t *m = zklock__first_sub(c), *next; m; m = next) {
        bool gone = zklock__phase(m) == ZKL_LOST || zklock__phase(m) == ZKL_GONE;
        next = zklock__next_sub(m); /* (new members go in front) */
        if (zklock__is_let_go(m) || (!gone && !has_place(m)))
            continue;
        if ((rc = new_member(c, zklock__lock_of(m))) != 0) {
            zklock__give_up(c, rc); /* its ending lets every member go */
            return false;
        }
        if (gone)
            zklock__disown(c, m); /* the driver frees it */
        else
            zklock__let_go(c, m);
    }
    if (e)
        e->sent = false;
    return true;
}

/* Members let go by requeue_all that are not gone yet (a sub let go is
 * disowned in M's step once gone: zklock__subs_read): the new round's
 * nodes must not queue behind their old ones. M is marked as each goes. */
static bool old_round_pending(const zkl_contender_t *c)
{
    for (const zkl_contender_t *m = zklock__first_sub(c); m; m = zklock__next_sub(m))
        if (zklock__is_let_go(m))
            return true;
    return false;
}

/* ---- M's steps ---------------------------------------------------------------------------- */

/* Starts what has not started: every lock member at once (the transaction
 * makes their nodes; a downgrade heir makes its own), each semaphore member
 * in its turn, once every member before it holds. */
static void start_members(zkl_contender_t *c, const struct zklock_multi *mu)
{
    bool before_held = true;

    for (size_t i = 0; i < mu->n && zklock__phase(c) == ZKL_QUEUING; i++) {
        zkl_contender_t *m = zklock__sub_of(c, mu->members[i]);
        if (!m) {
            before_held = false;
            continue;
        }
        if (!zklock__sub_started(m) && (i < mu->nlocks || before_held)) {
            if (i >= mu->nlocks)
                zklock__set_by_parent(m, false); /* its turn: it takes its own steps */
            zklock__sub_start(c, m);
        }
        before_held &= zklock__phase(m) == ZKL_HELD && zklock__token(m) != 0;
    }
}

/* Every member held, with its token: M holds, with the largest token. */
static bool all_held(zkl_contender_t *c, const struct zklock_multi *mu, int64_t *token)
{
    *token = 0;
    for (size_t i = 0; i < mu->n; i++) {
        zkl_contender_t *m = zklock__sub_of(c, mu->members[i]);
        if (!m || zklock__phase(m) != ZKL_HELD || zklock__token(m) == 0)
            return false;
        *token = zklock__token(m) > *token ? zklock__token(m) : *token;
    }
    return true;
}

/* The engine's may_create hook is M's step: M never makes a node. */
static bool multi_step(zkl_contender_t *c)
{
    const struct zklock_multi *mu = multi_of(zklock__lock_of(c));
    bool busy;
    int n;
    int64_t token;

    if (place_lost(c) && !requeue_all(c)) /* a member's place gone: all queue again */
        return false;
    if (old_round_pending(c))
        return false;
    start_members(c, mu);
    if (zklock__phase(c) != ZKL_QUEUING)
        return false;
    if ((n = waiting_for_nodes(c, &busy)) > 0) {
        if (!busy)
            send_enqueue(c, n);
        return false;
    }
    for (zkl_contender_t *m = zklock__first_sub(c); m; m = zklock__next_sub(m)) {
        if (zklock__phase(m) == ZKL_HELD && zklock__token(m) == 0) {
            read_token(c, m);
            return false;
        }
    }
    if (all_held(c, mu, &token)) {
        zklock__set_token(c, token);
        zklock__become_holder(c);
    }
    return false;
}

/* M is freed: so are its rounds (none can be written any more). */
static void multi_free_data(zkl_contender_t *c)
{
    rounds_free(zklock__data(c));
    zklock__set_data(c, NULL);
}

/* M gives up, is released or lost: so is every member. */
static void multi_ending(zkl_contender_t *c)
{
    zklock__subs_let_go(c);
}

/* Before M queues (on the caller's thread): a contender per member, with
 * the member's own rules (a read/write view refuses an upgrade, makes a
 * downgrade heir). A member the owner holds already is refused: holding it
 * while waiting for the others could deadlock. */
static int multi_prepare(zklock_t *l, zkl_contender_t *c)
{
    const struct zklock_multi *mu = multi_of(l);
    int rc = 0;

    for (size_t i = 0; i < mu->n && rc == 0; i++) {
        zklock_t *member = mu->members[i];
        zkl_contender_t *own = zklock__owner_contender(member);
        if (own && zklock__phase(own) == ZKL_LOST && !zklock__parent_of(own)) {
            zklock__abandon(own); /* a lost hold nobody released */
            own = NULL;
        }
        if (member->freeing)
            rc = ZKLOCK_ECLOSED;
        else if (own && zklock__acquiring(own))
            rc = ZKLOCK_EBUSY; /* a handle-owned member's acquisition is in progress
                                  (another multi-lock's, too: its turn is no hold yet) */
        else if (own && (zklock__phase(own) == ZKL_HELD || zklock__phase(own) == ZKL_LEAVING))
            rc = ZKLOCK_EDEADLK;
        else
            rc = new_member(c, member);
    }
    if (rc)
        multi_ending(c); /* nothing started: the members go at once */
    return rc;
}

/* The members are referred to until the multi-lock goes. */
static void multi_gone(zklock_t *l)
{
    struct zklock_multi *mu = multi_of(l);

    for (size_t i = 0; i < mu->n; i++)
        zklock__lock_unref(mu->members[i]);
    free(mu);
}

static const struct zkl_request_kind multi_kinds[] = {
    [MULTI_ENQUEUE - ZKL_REQ_RECIPE] = {.beside = false},
    [MULTI_TOKEN - ZKL_REQ_RECIPE] = {.beside = false},
};

static const struct zkl_recipe multi_recipe = {
    .prepare = multi_prepare,
    .may_create = multi_step,
    .ending = multi_ending,
    .answer = multi_answer,
    .kinds = multi_kinds,
    .nkinds = 2,
    .destroy = multi_gone,
    .free_data = multi_free_data,
    .nodeless = true,
};

/* ---- creation ----------------------------------------------------------------------------- */

static int by_queue(const void *a, const void *b)
{
    const zklock_t *x = *(zklock_t *const *)a, *y = *(zklock_t *const *)b;

    if (in_turn(x) != in_turn(y))
        return in_turn(x) ? 1 : -1;
    return strcmp(x->queue, y->queue);
}

/* EINVAL unless the members are 1..ZKLOCK_MULTI_MAX handles of s, none a
 * multi-lock, no two in one queue (the same handle twice, both views of one
 * read/write lock, a mutex and a view on one path: its own nodes would wait
 * for each other). */
static int check_members(zklock_t *const locks[], size_t n, zklock_session_t **s)
{
    zklock_t *sorted[ZKLOCK_MULTI_MAX];

    if (!locks || n < 1 || n > ZKLOCK_MULTI_MAX || !locks[0])
        return ZKLOCK_EINVAL;
    *s = locks[0]->s;
    for (size_t i = 0; i < n; i++) {
        if (!locks[i] || locks[i]->s != *s || locks[i]->recipe->nodeless)
            return ZKLOCK_EINVAL;
        /* A member held through the multi-lock writes no record
         * (previous.c works on a mutex's own acquisition): refused rather
         * than silently untracked. */
        if (locks[i]->tracks)
            return ZKLOCK_EINVAL;
        sorted[i] = locks[i];
    }
    qsort(sorted, n, sizeof *sorted, by_queue);
    for (size_t i = 1; i < n; i++)
        if (strcmp(sorted[i - 1]->queue, sorted[i]->queue) == 0)
            return ZKLOCK_EINVAL;
    return 0;
}

int zklock_multi_new(zklock_t **out, zklock_t *const locks[], size_t n, const zklock_opts_t *opts)
{
    struct zklock_multi *mu;
    zklock_session_t *s;
    int rc;

    if (!out)
        return ZKLOCK_EINVAL;
    *out = NULL;
    if ((rc = check_members(locks, n, &s)) != 0)
        return rc;
    if (opts && (opts->track_previous || opts->lock_delay_ms != 0))
        return ZKLOCK_EINVAL; /* no record of a whole multi-lock (design.md) */
    mu = calloc(1, sizeof *mu);
    if (!mu)
        return ZKLOCK_ENOMEM;
    rc = zklock__lock_init(&mu->h, s, locks[0]->path, opts, ZKL_TAG_LOCK, ZKL_TAG_KLOCK);
    if (rc) {
        free(mu);
        return rc;
    }
    zklock__session_lock(s);
    for (size_t i = 0; i < n; i++) {
        mu->members[i] = locks[i];
        zklock__lock_ref(locks[i]);
        mu->nlocks += !in_turn(locks[i]);
    }
    zklock__session_unlock(s);
    mu->n = n;
    qsort(mu->members, n, sizeof *mu->members, by_queue);
    mu->h.recipe = &multi_recipe;
    *out = &mu->h;
    return ZKLOCK_OK;
}
