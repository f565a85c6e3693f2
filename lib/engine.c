/*
 * engine.c: the queue engine every recipe shares: the requests a contender
 * sends, what their answers mean, and what the session's changes mean.
 *
 * Everything here runs with s->mu held and only uses ZooKeeper's
 * asynchronous calls; completions and watches re-enter on ZooKeeper's
 * completion thread. zklock__step() looks at what a contender knows and sends
 * the next request; it is idempotent, so "the connection is back" simply
 * means "step everyone".
 *
 * Every request carries the session generation it was sent in (its
 * ticket, zklock__req). When a ZooKeeper session ends, s->gen moves on and
 * every answer to an older request is ignored. An opened session's old
 * handle is closed (which flushes those answers) before a new one exists;
 * an adopted session's is the application's, which closes it when it
 * likes, and its answers may come after the new handle's requests went
 * out (ZCLOSING, or never: zookeeper_close may drop them): an answer is
 * current only if its own request's ticket is, whatever else the
 * contender sent since.
 *
 * The other files of the engine: contender.c (lifetime, outcomes), judge.c
 * (what a listing means), fastpath.c (acquiring without one), watch.c.
 */
#include "engine.h"

#include <stdio.h>

static void create_done(int rc, const char *name, const struct Stat *st, const void *data);
static void list_done(int rc, const struct String_vector *names, const struct Stat *st,
                      const void *data);
static void sync_done(int rc, const char *value, const void *data);
static void owner_done(int rc, const char *value, int len, const struct Stat *st, const void *data);
static void delete_done(int rc, const void *data);
static void session_op_done(int rc, const void *data);
static void parent_done(int rc, const char *value, const void *data);
static void top_parent_done(int rc, const char *value, const void *data);
static void loss_probe_done(int rc, const struct Stat *st, const void *data);
static void heir_done(int rc, const void *data);

char *zklock__child_path(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    char *p = malloc(dl + 1 + nl + 1);
    if (p) {
        memcpy(p, dir, dl);
        p[dl] = '/';
        memcpy(p + dl + 1, name, nl + 1);
    }
    return p;
}


/* ---- requests ------------------------------------------------------------ */

/* c's ticket for generation gen: the one in use, or one with nothing in
 * flight (zklock__step sends nothing unless there is one: may_send). */
static struct zkl_ticket *current_ticket(zkl_contender_t *c, unsigned gen)
{
    struct zkl_ticket *t = &c->tickets[c->ticket];

    if (t->gen == gen)
        return t;
    for (int k = 0; k < ZKL_TICKETS; k++) {
        if (c->tickets[k].ops == 0) {
            t = &c->tickets[k];
            break;
        }
    }
    t->gen = gen;
    c->ticket = t->index;
    return t;
}

/* Called before each request: counts it and stamps the generation. */
void zklock__op_begin(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    if (c->ops == 0)
        zklock__now(&c->sent_at); /* no later than any request in flight */
    c->ops++;
    current_ticket(c, s->gen)->ops++;
    s->ops++;
    c->gen = s->gen;
    s->stats.requests++;
}

void *zklock__req(zkl_contender_t *c)
{
    return &c->tickets[c->ticket];
}

zkl_contender_t *zklock__req_owner(const void *req)
{
    const struct zkl_ticket *t = req;
    return (zkl_contender_t *)((char *)(t - t->index) - offsetof(zkl_contender_t, tickets));
}

/* Called first in every completion: true if the answer is current. */
bool zklock__op_end(zkl_contender_t *c, const void *req)
{
    zklock_session_t *s = session_of(c);
    struct zkl_ticket *t = &c->tickets[((const struct zkl_ticket *)req)->index];

    c->ops--;
    t->ops--;
    s->ops--;
    if (s->ops == 0)
        pthread_cond_broadcast(&s->cond);
    return t->gen == s->gen;
}

void zklock__op_unsent(zkl_contender_t *c)
{
    zklock__op_end(c, zklock__req(c));
}

/* The handle is closed: none of c's answers will come. */
void zklock__ops_gone(zkl_contender_t *c)
{
    c->ops = 0;
    for (int k = 0; k < ZKL_TICKETS; k++)
        c->tickets[k].ops = 0;
}

/* A request that could not even be queued by the client. */
void zklock__op_refused(zkl_contender_t *c, int rc)
{
    zklock__op_unsent(c);
    c->busy--;
    if (transient(rc) || session_ending(rc)) {
        /* the session event that explains it will follow; until then, or
         * until the retry timer, send nothing */
        c->backoff = true;
        zklock__retry_later(session_of(c));
        return;
    }
    if (c->phase == ZKL_LOST)
        zklock__confirm_loss(c, c->loss_fallback); /* cannot ask: say what we saw */
    else
        zklock__give_up(c, rc);
}


/* ---- sending -------------------------------------------------------------- */

/* Creates every level of the lock path as a container node, top down, in
 * one pipelined burst (the queue's own level persistent where the peer's
 * layout has it so: l->keep_queue); "exists already" answers are fine. A
 * refusal (ACL, an ephemeral ancestor, a missing chroot) is kept in
 * c->parent_rc: our own create then fails with "no node", and the caller
 * must hear the cause, not a retry storm. */
void zklock__send_parents(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    const zklock_t *l = c->l;
    char *p = strdup(l->queue);
    bool top = true;

    if (!p)
        return; /* the create fails with "no node" and we come back here */
    for (char *slash = strchr(p + 1, '/');; slash = strchr(slash + 1, '/')) {
        bool kept = !slash && l->keep_queue;
        const char *data = kept ? l->queue_data : NULL;

        if (slash)
            *slash = '\0';
        c->busy++;
        zklock__op_begin(c);
        if (zoo_acreate(s->zh, p, data, data ? (int)strlen(data) : -1, l->acl,
                        kept ? ZOO_PERSISTENT : ZOO_CONTAINER,
                        top ? top_parent_done : parent_done, zklock__req(c)) != ZOK) {
            zklock__op_unsent(c); /* the create that follows is refused too, and says why */
            c->busy--;
            break;
        }
        if (!slash)
            break;
        *slash = '/';
        top = false;
    }
    free(p);
}

char *zklock__node_name(zkl_contender_t *c)
{
    const char *dir = c->l->queue, *tag = c->l->tag_text;
    size_t len = strlen(dir) + 1 + strlen(c->prefix) + strlen(tag) + 12;
    char *name = malloc(len);

    if (!name)
        return NULL;
    if (c->heir)
        snprintf(name, len, "%s/%s%s%010d", dir, c->prefix, tag, c->heir_seq);
    else
        snprintf(name, len, "%s/%s%s", dir, c->prefix, tag);
    return name;
}

void zklock__send_list(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->need_list = false;
    c->busy++;
    zklock__op_begin(c);
    if (c->queue_watch)
        rc = zoo_awget_children2(s->zh, c->l->queue, zklock__queue_watcher, c, list_done,
                                  zklock__req(c));
    else
        rc = zoo_aget_children2(s->zh, c->l->queue, 0, list_done, zklock__req(c));
    if (rc != ZOK)
        zklock__op_refused(c, rc);
    else
        zklock__queue_listing_sent(c);
}

/* A downgrade heir holds by its writer's place: it is made only beside its
 * writer's live node, the check and the create in one transaction. Had an
 * operator deleted the writer's node (the writer not told yet: its own-node
 * watch waits its delay), a writer elsewhere may hold: the heir must not. */
struct zkl_heir_multi {
    zoo_op_t ops[2];
    zoo_op_result_t results[2];
    char created[ZKL_PATH_MAX + ZKL_PREFIX_MAX + 32];
};

static void send_heir_create(zkl_contender_t *c, const char *name)
{
    zklock_session_t *s = session_of(c);
    struct zkl_heir_multi *m = c->heir_multi ? c->heir_multi : malloc(sizeof *m);
    int rc;

    if (!m) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    c->heir_multi = m;
    memset(m, 0, sizeof *m);
    zoo_check_op_init(&m->ops[0], c->heir_of, -1);
    zoo_create_op_init(&m->ops[1], name, s->identity, (int)strlen(s->identity), c->l->acl,
                       ZOO_EPHEMERAL, m->created, (int)sizeof m->created);
    c->busy++;
    zklock__op_begin(c);
    rc = zoo_amulti(s->zh, 2, m->ops, m->results, heir_done, zklock__req(c));
    if (rc != ZOK)
        zklock__op_refused(c, rc);
}

/* The create and the listing go out back to back: ZooKeeper answers a
 * session's requests in order, so the listing already contains our node and
 * a free lock costs one round trip. A downgrade heir needs no listing, nor
 * does a create that may take the fast path (if it turns out it may not,
 * the listing follows). */
static void send_create(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    char *name = zklock__node_name(c);
    int rc;

    if (!name) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    if (c->heir) {
        send_heir_create(c, name);
        free(name);
        return;
    }
    c->parent_rc = 0; /* it speaks of this create's parents only */
    c->fast = !c->need_parents && zklock__fast_take(c);
    if (c->need_parents)
        zklock__send_parents(c);
    c->need_parents = false;
    c->busy++;
    zklock__op_begin(c);
    rc = zoo_acreate2(s->zh, name, s->identity, (int)strlen(s->identity), c->l->acl,
                      c->l->unnumbered ? ZOO_EPHEMERAL : ZOO_EPHEMERAL_SEQUENTIAL, create_done, zklock__req(c));
    free(name);
    if (rc != ZOK) {
        zklock__op_refused(c, rc);
        return;
    }
    if (!c->fast)
        zklock__send_list(c);
}

/* After a lost create reply: make the server we talk to catch up with the
 * leader, then list the children and look for our name prefix. */
static void send_recovery(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->busy++;
    zklock__op_begin(c);
    rc = zoo_async(s->zh, c->l->queue, sync_done, zklock__req(c));
    if (rc != ZOK) {
        zklock__op_refused(c, rc);
        return;
    }
    zklock__send_list(c);
}

void zklock__send_owner_check(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->busy++;
    zklock__op_begin(c);
    rc = zoo_aget(s->zh, c->node, 0, owner_done, zklock__req(c));
    if (rc != ZOK)
        zklock__op_refused(c, rc);
}

static void send_delete(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->busy++;
    zklock__op_begin(c);
    rc = zoo_adelete(s->zh, c->node, -1, delete_done, zklock__req(c));
    if (rc != ZOK)
        zklock__op_refused(c, rc);
}

/* A stray is one of our own nodes that a lost reply made us create twice:
 * delete it without waiting; a later listing finds it again if this fails. */
void zklock__send_stray_delete(zklock_session_t *s, const char *dir, const char *name)
{
    char *path = zklock__child_path(dir, name);

    if (path && zoo_adelete(s->zh, path, -1, session_op_done, s) == ZOK) {
        s->ops++;
        s->stats.requests++;
    }
    free(path);
}

/* A hold ended without our knowing why (our node vanished, or the lease ran
 * out while the process did not run): is our session still alive (then the
 * reason is c->loss_fallback: the node was deleted, or the lease simply ran
 * out), or did it end? Any answer from the server says "alive"; an ending
 * session never answers. */
static void send_loss_probe(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->busy++;
    zklock__op_begin(c);
    rc = zoo_aexists(s->zh, c->l->queue, 0, loss_probe_done, zklock__req(c));
    if (rc != ZOK)
        zklock__op_refused(c, rc);
}

static void step_leaving(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    zklock__forget_blocker(c);
    if (c->busy)
        return; /* the chain in flight decides what is there to delete */
    if (!c->node && !c->create_unknown) {
        if (!zklock__sub_pending(c))
            zklock__finish(c); /* else: its sub's end settles it */
        return;
    }
    if (!zklock__connected(s) || c->backoff)
        return;
    if (c->create_unknown)
        send_recovery(c);
    else if (c->node)
        send_delete(c);
}

/* Can c (and its subs, whose requests it may send) send in the current
 * generation: a ticket of it, or one free? Only a contender whose requests
 * of ZKL_TICKETS - 1 older generations are all still unanswered waits (each
 * answer steps it again). */
static bool ticket_free(const zkl_contender_t *c, unsigned gen)
{
    for (int k = 0; k < ZKL_TICKETS; k++)
        if (c->tickets[k].gen == gen || c->tickets[k].ops == 0)
            return true;
    return false;
}

static bool may_send(const zkl_contender_t *c)
{
    unsigned gen = session_of(c)->gen;

    if (!ticket_free(c, gen))
        return false;
    for (const zkl_contender_t *m = c->subs; m; m = m->next_sub)
        if (!ticket_free(m, gen))
            return false;
    return true;
}

void zklock__step(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    if (!may_send(c))
        return;
    if (c->phase == ZKL_LEAVING) {
        step_leaving(c);
        return;
    }
    if (!zklock__connected(s) || c->backoff)
        return;
    if (c->phase == ZKL_LOST && c->loss_unconfirmed && !c->busy)
        send_loss_probe(c);
    if (c->phase == ZKL_HELD || c->phase == ZKL_QUEUING)
        zklock__arm_own_watch(c);
    if (c->busy || c->phase != ZKL_QUEUING)
        return;
    if (c->by_parent && !c->heir && !c->node && !c->create_unknown)
        return; /* its parent starts it, or makes its node (a heir makes its own) */
    if (c->create_unknown)
        send_recovery(c);
    else if (!c->node && c->l->recipe->may_create && !c->l->recipe->may_create(c))
        return; /* the recipe steps it again when it may */
    else if (!c->node)
        send_create(c);
    else if (c->need_list)
        zklock__send_list(c);
}


/* ---- answers -------------------------------------------------------------- */

void zklock__settle(zkl_contender_t *c)
{
    zklock__step(c);
    zklock__reap(c);
}

void zklock__event_end(zkl_contender_t *c, zkl_contender_t *up)
{
    zklock__settle(c);
    if (up)
        zklock__settle(up);
}

/* A request failed: retry when the connection is back, or give up. */
void zklock__failed(zkl_contender_t *c, int rc)
{
    if (transient(rc)) {
        if (c->try_once && c->phase == ZKL_QUEUING)
            zklock__give_up(c, rc); /* try-once answers at once */
        return;
    }
    if (!session_ending(rc) && c->phase == ZKL_QUEUING)
        zklock__give_up(c, rc);
}

/* A request failed for want of a connection. Retrying at once would spin
 * until the client notices; wait for the resume that follows the
 * reconnection (or, for the rarer answers that no session event follows,
 * such as "throttled", the session thread's retry timer). */
void zklock__back_off(zkl_contender_t *c, int rc)
{
    if (transient(rc)) {
        c->backoff = true;
        zklock__retry_later(session_of(c));
    }
}

/* Our node exists. A heir holds by its writer's place; a create sent
 * without a listing holds if the fast path's rule says so, or lists. */
static void created(zkl_contender_t *c, bool fast, int64_t czxid)
{
    if (c->phase != ZKL_QUEUING)
        return;
    if (c->heir) {
        zklock__become_holder(c);
    } else if (fast && zklock__fast_holds(c, czxid)) {
        if (zklock__become_holder(c)) {
            c->alone = true;
            session_of(c)->stats.fast_acquired++;
        }
    } else if (fast) {
        c->need_list = true;
    }
}

/* A write's answer (it went through the leader): the lease runs from when
 * it was sent. */
void zklock__heard(zkl_contender_t *c, int rc)
{
    if (zklock__lease_proves(rc))
        zklock__lease_heard(session_of(c), &c->sent_at);
}

static void create_done(int rc, const char *name, const struct Stat *st, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    bool fast = c->fast;

    zklock__heard(c, rc);
    c->fast = false;
    c->busy--;
    if (rc == ZOK) {
        zklock__set_node(c, strdup(name));
        if (!c->node) {
            /* We cannot name our node; it goes when the session does. */
            zklock__give_up(c, ZKLOCK_ENOMEM);
        } else {
            struct zkl_entry e;
            c->seq = zklock__parse_name(basename_of(name), &e) == 0 ? e.seq : 0;
            c->czxid = st->czxid;
            created(c, fast, st->czxid);
        }
    } else if (rc == ZNONODE && !c->heir) {
        if (c->parent_rc != 0)
            zklock__failed(c, c->parent_rc); /* the lock path cannot be made */
        else
            c->need_parents = true; /* the listing fails too; step starts over */
    } else if (transient(rc)) {
        c->create_unknown = true;
        zklock__failed(c, rc);
    } else {
        zklock__failed(c, rc);
    }
    ZKL_COMPLETION_END(c);
}

static void heir_done(int rc, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    struct zkl_heir_multi *m = c->heir_multi;
    int check = m->results[0].err, create = m->results[1].err;

    zklock__heard(c, rc);
    c->busy--;
    if (rc == ZOK) {
        zklock__set_node(c, strdup(m->created));
        if (!c->node) {
            zklock__give_up(c, ZKLOCK_ENOMEM); /* it goes with the session */
        } else {
            c->seq = c->heir_seq;
            created(c, false, 0); /* its token is its writer's */
        }
    } else if (check == ZNONODE) {
        /* Its writer's node is gone (the writer learns it from its own
         * watch): no place to inherit. Queue as a plain reader, wherever
         * the lock path now is. */
        zklock__requeue(c);
    } else if (create == ZNODEEXISTS) {
        /* An earlier create of ours whose reply was lost: ours only if our
         * session owns it. */
        zklock__set_node(c, zklock__node_name(c));
        if (c->node)
            zklock__send_owner_check(c);
        else
            zklock__give_up(c, ZKLOCK_ENOMEM);
    } else if (transient(rc)) {
        c->create_unknown = true;
        zklock__failed(c, rc);
    } else {
        zklock__failed(c, rc);
    }
    ZKL_COMPLETION_END(c);
}

/* Answers arrive in order, top down, every parent's before our own create's.
 * Only the deepest level's answer counts: ZooKeeper checks the permission to
 * create in a level before it checks whether the child exists, so a read-only
 * ancestor refuses even a level that is already there. A level that exists
 * (or was just made) below it clears that refusal. */
static void parent_answer(zkl_contender_t *c, int rc, bool top)
{
    c->busy--;
    if (rc == ZOK || rc == ZNODEEXISTS)
        c->parent_rc = 0;
    else if (transient(rc) || session_ending(rc))
        c->parent_rc = 0; /* the burst straddled a reconnection: try again */
    else if (rc != ZNONODE || top)
        c->parent_rc = rc;
    /* "No node" below the top: the level above went meanwhile (reaped);
     * at the top it can only be the session's chroot that is missing. */
}

static void parent_done(int rc, const char *value, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    parent_answer(c, rc, false);
    ZKL_COMPLETION_END(c);
}

static void top_parent_done(int rc, const char *value, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    parent_answer(c, rc, true);
    ZKL_COMPLETION_END(c);
}

static void list_done(int rc, const struct String_vector *names, const struct Stat *st,
                      const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->busy--;
    zklock__queue_listed(c, rc);
    if (rc == ZOK) {
        if (c->node || c->create_unknown)
            (c->l->recipe->judge ? c->l->recipe->judge : zklock__judge)(c, names, st);
    } else if (rc == ZNONODE) {
        /* No lock path: nothing of ours can be under it. A downgrade heir
         * never makes the path: its writer's place is gone with it. */
        if (c->create_unknown && c->heir) {
            zklock__requeue(c);
        } else if (c->create_unknown) {
            c->create_unknown = false;
            c->need_parents = true;
        } else if (c->node) {
            zklock__requeue(c);
        }
    } else if (transient(rc)) {
        c->need_list = c->node != NULL;
        zklock__failed(c, rc);
    } else if (!session_ending(rc)) {
        c->create_unknown = false; /* we cannot look (ACL?): it goes with the session */
        zklock__failed(c, rc);
    }
    ZKL_COMPLETION_END(c);
}

static void sync_done(int rc, const char *value, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->busy--; /* the listing that follows does the work */
    ZKL_COMPLETION_END(c);
}

static void owner_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->busy--;
    if (rc == ZOK && st->ephemeralOwner == s->session_id) {
        c->czxid = st->czxid;
        if (c->heir && c->phase == ZKL_QUEUING)
            zklock__become_holder(c); /* a heir holds by its writer's place */
        else
            c->need_list = true;
    } else if (transient(rc)) {
        c->create_unknown = true; /* look again */
        zklock__set_node(c, NULL);
    } else {
        /* Gone, or not ours after all: never touch it, start afresh. */
        zklock__requeue_own(c);
    }
    ZKL_COMPLETION_END(c);
}

static void delete_done(int rc, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    zklock__heard(c, rc);
    c->busy--;
    if (rc == ZOK || rc == ZNONODE) {
        /* "No node" after a delete whose reply was lost is that delete's
         * success; on a first attempt, the node was gone before we came. */
        if (rc == ZNONODE && !c->delete_unknown && c->result == ZKLOCK_OK)
            zklock__release_found_lost(c, ZKLOCK_LOST_DELETED); /* the session answered: alive */
        if (rc == ZOK && c->alone)
            zklock__fast_remember(c);
        zklock__set_node(c, NULL);
        c->delete_unknown = false;
    } else if (transient(rc)) {
        c->delete_unknown = true;
    } else if (!session_ending(rc)) {
        /* Refused for good (the lock path's ACL no longer lets us delete):
         * the node goes with the session, and nobody will tell us. Take its
         * watch back now, while we still know its path; the caller hears
         * the refusal. */
        zklock__unwatch_own(c);
        zklock__set_node(c, NULL);
        if (c->result == ZKLOCK_OK)
            c->result = rc;
    }
    ZKL_COMPLETION_END(c);
}

static void loss_probe_done(int rc, const struct Stat *st, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    c->busy--;
    if (!transient(rc) && !session_ending(rc))
        zklock__confirm_loss(c, c->loss_fallback); /* the session lives */
    /* else: retried after the reconnection, or the session's end says why */
    ZKL_COMPLETION_END(c);
}

static void session_op_done(int rc, const void *data)
{
    zklock_session_t *s = (zklock_session_t *)data;
    pthread_mutex_lock(&s->mu);
    if (--s->ops == 0)
        pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}


/* ---- the session's changes: the engine as a layer above the session ------- */

/* The connection is (back) up: every contender takes its next step. */
static void engine_resumed(zklock_session_t *s)
{
    zkl_contender_t *c, *next;

    /* First, so that the server removes them before our new creates: a
     * session answers in order. Then the probes of lost holds, so that an
     * on_lost comes before any new hold of the same owner. */
    zklock__stale_sweep(s);
    zklock__lease_resumed(s);
    for (int lost_first = 1; lost_first >= 0; lost_first--) {
        for (c = s->contenders; c; c = next) {
            next = c->sess_next;
            if ((c->phase == ZKL_LOST) != lost_first)
                continue;
            c->backoff = false;
            wake(c);
            zklock__settle(c);
        }
    }
}

/* Wakes every owner so that it can look at the session state again. */
static void engine_suspended(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        wake(c);
}

/* What the end of the session means for c, by its phase. reason:
 * ZKLOCK_LOST_EXPIRED, ZKLOCK_ECLOSED (zklock_session_close) or ZAUTHFAILED
 * (no session will follow). */
static void ended_for(zkl_contender_t *c, int reason)
{
    bool closing = reason == ZKLOCK_ECLOSED;

    switch (c->phase) {
    case ZKL_HELD:
        if (closing && !c->waiting) {
            zklock__set_node(c, NULL); /* ended by the user: not a loss */
            c->phase = ZKL_LOST;
        } else {
            zklock__lose(c, ZKLOCK_LOST_EXPIRED);
        }
        break;
    case ZKL_QUEUING:
        zklock__requeue(c); /* on the next session, if one follows */
        break;
    case ZKL_LEAVING:
        zklock__set_node(c, NULL);
        if (c->result == ZKLOCK_OK && closing)
            c->result = ZKLOCK_ECLOSED;
        else if (c->result == ZKLOCK_OK)
            zklock__release_found_lost(c, ZKLOCK_LOST_EXPIRED); /* a release, too late */
        zklock__finish(c);
        break;
    case ZKL_LOST:
        /* A vanished node whose cause a probe was asking: the end of the
         * session is the answer (when we close it, the node's deletion is
         * all we know). */
        zklock__confirm_loss(c, closing ? c->loss_fallback : ZKLOCK_LOST_EXPIRED);
        break;
    default:
        break;
    }
    if (reason != ZKLOCK_LOST_EXPIRED && c->phase == ZKL_QUEUING) {
        c->result = reason; /* no session follows to queue again on */
        zklock__finish(c);
    }
}

/* The ZooKeeper session ended (s->gen has moved on): every node is gone, or
 * will be when the server notices (stale.c). reason: ZKLOCK_LOST_EXPIRED, or
 * ZKLOCK_ECLOSED for zklock_session_close. */
static void engine_ended(zklock_session_t *s, int reason)
{
    zkl_contender_t *c, *next;

    for (c = s->contenders; c; c = next) {
        next = c->sess_next;
        if (s->ended_unconfirmed && reason != ZKLOCK_ECLOSED && c->phase != ZKL_GONE)
            zklock__stale_add(c); /* it may outlive the session we gave up */
        c->busy = 0;
        c->need_list = c->need_parents = c->create_unknown = false;
        c->own_pending = c->watch_pending = c->queue_listing = false;
        c->watch_wanted = false; /* registrations go with the handle */
        ended_for(c, reason);
        wake(c);
        zklock__reap(c);
    }
}

/* The old handle is closed: none of its watches can fire any more, and
 * none of its answers will come (zookeeper_close() may drop completions
 * still queued for its stopped completion thread: without this, a contender
 * with a request in flight then would never be freed). */
static void engine_handle_closed(zklock_session_t *s)
{
    zkl_contender_t *c = s->contenders, *next;
    for (; c; c = next) {
        next = c->sess_next;
        zklock__ops_gone(c);
        c->pred_watches = c->own_watches = c->queue_watches = 0;
        zklock__watch_over(c);
        zklock__reap(c);
    }
    zklock__lease_handle_closed(s);
}

/* Adopted handles: take back every watch we registered on the
 * application's handle. */
static void engine_unwatch_all(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        zklock__unwatch_both(c);
}

/* An adopted session closes: our nodes go while the connection lasts. */
static void engine_close_begin(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        if (c->phase == ZKL_QUEUING || c->phase == ZKL_HELD)
            zklock__give_up(c, ZKLOCK_ECLOSED);
}

static void engine_freeing(zklock_session_t *s)
{
    zklock__stale_free_all(s);
}

static bool engine_busy(const zklock_session_t *s)
{
    for (const zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        if (c->phase == ZKL_LEAVING)
            return true;
    return false;
}

const struct zkl_layer zklock__engine_layer = {
    .resumed = engine_resumed,
    .suspended = engine_suspended,
    .ended = engine_ended,
    .handle_closed = engine_handle_closed,
    .unwatch_all = engine_unwatch_all,
    .close_begin = engine_close_begin,
    .busy = engine_busy,
    .freeing = engine_freeing,
};
