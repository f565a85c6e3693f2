/*
 * request.c: the one way the engine talks to ZooKeeper.
 *
 * zklock__send() sends a contender's request: it counts it (the contender's
 * and the session's requests in flight, the statistics), stamps the
 * session's generation and, for the first in flight, the send time (the
 * lease runs from it), and registers a completion that only records the
 * answer for the contender (c->answer) and marks it: what the answer means is
 * for the contender's step to read (step.c), in the drive that the
 * completion ends with. A request the client refuses to queue is a fact
 * too (c->refused), for the next step: nothing here gives up or steps.
 *
 * The completions are the engine's doors (doors.c, one per ZooKeeper
 * signature, found in s->doors): each takes s->mu, has the answer recorded
 * here (zklock__answer_record), marks the contender and runs the driver.
 * The request's kind and ticket come back through the data pointer, a slot of the contender's
 * (c->slots[ticket * c->kinds + kind]). A ticket is the generation the request was sent
 * in: when a ZooKeeper session ends, s->gen moves on and every answer to an
 * older request is dropped. An opened session's old handle is closed
 * (which flushes those answers) before a new one exists; an adopted
 * session's is the application's, which closes it when it likes, and its
 * answers may come after the new handle's requests went out (ZCLOSING, or
 * never: zookeeper_close may drop them): an answer is current only if its
 * own request's ticket is, whatever else the contender sent since.
 * Payloads (a name, a listing, a Stat) are borrowed from the client: valid
 * until the completion returns, so for the whole drive that reads them.
 *
 * The session's own fire-and-forget requests (a stray node's delete, a
 * stale node's, the lease's heartbeat) are the caller's, with a completion
 * of its own; every request is counted in flight by the session
 * (zklock__request_sent, zklock__request_answered).
 */
#include "recipe.h"
#include "request.h"

_Static_assert(ZKL_TICKETS * (ZKL_REQ_RECIPE + ZKL_RECIPE_KINDS_MAX) <= 256,
               "a slot holds its own index in a byte");

/* Kinds whose answer the contender's chain waits for (c->busy): all but the
 * own-node watch, which is set beside the chain, and a recipe's kinds that
 * its table says are beside it (an election's proclaim). */
static bool chained(const zkl_contender_t *c, int kind)
{
    const struct zkl_recipe *rc = c->l->recipe;

    if (kind == ZKL_REQ_OWN_WATCH)
        return false;
    return kind < ZKL_REQ_RECIPE || !rc->kinds[kind - ZKL_REQ_RECIPE].beside;
}

/* ---- answers ------------------------------------------------------------------------ */

/* The contender whose slot a completion's data is (a slot holds its own
 * index). */
static zkl_contender_t *owner_of(const unsigned char *slot)
{
    return (zkl_contender_t *)((char *)(slot - *slot) - offsetof(zkl_contender_t, slots));
}

/* First in every completion, with s->mu held: counts the request off; false
 * if the answer is of an older generation than its session's (dropped: the
 * session it spoke of is over, and its end reset the contender). */
static bool answered(zkl_contender_t *c, int ticket, int kind)
{
    zklock_session_t *s = session_of(c);
    struct zkl_ticket *t = &c->tickets[ticket];

    c->ops--;
    t->ops--;
    zklock__request_answered(s);
    if (t->gen != s->gen)
        return false;
    zklock__learn_completion_thread(s);
    if (chained(c, kind))
        c->busy--;
    return true;
}

zklock_session_t *zklock__answer_session(const void *slot)
{
    return session_of(owner_of(slot));
}

zkl_contender_t *zklock__answer_record(const void *data, struct zkl_answer *a)
{
    const unsigned char *slot = data;
    zkl_contender_t *c = owner_of(slot);

    a->kind = *slot % c->kinds;
    if (answered(c, *slot / c->kinds, a->kind))
        c->answer = a; /* c's step reads it, and forgets it */
    return c;
}

/* ---- sending ------------------------------------------------------------------------ */

watcher_fn zklock__watcher(const zklock_session_t *s, enum zkl_watch watch)
{
    switch (watch) {
    case ZKL_WATCH_BLOCKER:
        return s->doors->blocker_event;
    case ZKL_WATCH_OWN:
        return s->doors->own_event;
    case ZKL_WATCH_QUEUE:
        return s->doors->queue_event;
    default:
        return NULL;
    }
}

/* The ZooKeeper call r is, with its completion. */
static int call(zkl_contender_t *c, const struct zkl_request *r, const void *slot)
{
    const zklock_session_t *s = session_of(c);
    const struct zkl_wire *wire = s->wire;
    const struct zkl_doors *d = s->doors;
    zhandle_t *zh = s->zh;
    watcher_fn w = zklock__watcher(s, r->watch);

    switch (r->call) {
    case ZKL_CALL_CREATE:
        return wire->acreate(zh, r->path, r->data, r->len, r->acl, r->flags, d->answer_string,
                             slot);
    case ZKL_CALL_CREATE2:
        return wire->acreate2(zh, r->path, r->data, r->len, r->acl, r->flags,
                              d->answer_string_stat, slot);
    case ZKL_CALL_CHILDREN:
        return w ? wire->awget_children2(zh, r->path, w, c, d->answer_strings_stat, slot)
                 : wire->aget_children2(zh, r->path, 0, d->answer_strings_stat, slot);
    case ZKL_CALL_SYNC:
        return wire->async(zh, r->path, d->answer_string, slot);
    case ZKL_CALL_GET:
        return w ? wire->awget(zh, r->path, w, c, d->answer_data, slot)
                 : wire->aget(zh, r->path, 0, d->answer_data, slot);
    case ZKL_CALL_EXISTS:
        return wire->aexists(zh, r->path, 0, d->answer_stat, slot);
    case ZKL_CALL_DELETE:
        return wire->adelete(zh, r->path, -1, d->answer_void, slot);
    case ZKL_CALL_MULTI:
        return wire->amulti(zh, r->nops, r->ops, r->results, d->answer_void, slot);
    case ZKL_CALL_SET:
        return wire->aset(zh, r->path, r->data, r->len, -1, d->answer_stat, slot);
    }
    return ZBADARGUMENTS;
}

/* c's ticket for generation gen: the one in use, or one with nothing in
 * flight (a step sends nothing unless there is one: zklock__may_send). */
static struct zkl_ticket *ticket_for(zkl_contender_t *c, unsigned gen)
{
    if (c->tickets[c->ticket].gen != gen) {
        for (int t = 0; t < ZKL_TICKETS; t++) {
            if (c->tickets[t].ops == 0) {
                c->ticket = (unsigned char)t;
                c->tickets[t].gen = gen;
                break;
            }
        }
    }
    return &c->tickets[c->ticket];
}

static bool ticket_free(const zkl_contender_t *c, unsigned gen)
{
    for (int t = 0; t < ZKL_TICKETS; t++)
        if (c->tickets[t].gen == gen || c->tickets[t].ops == 0)
            return true;
    return false;
}

bool zklock__may_send(const zkl_contender_t *c)
{
    unsigned gen = session_of(c)->gen;

    if (!ticket_free(c, gen))
        return false;
    for (const zkl_contender_t *m = c->subs; m; m = m->next_sub)
        if (!ticket_free(m, gen))
            return false;
    return true;
}

void zklock__requests_gone(zkl_contender_t *c)
{
    c->ops = 0;
    for (int t = 0; t < ZKL_TICKETS; t++)
        c->tickets[t].ops = 0;
}

/* Sends r for c, counted; the client's code (ZOK: it took it). */
static int send_request(zkl_contender_t *c, const struct zkl_request *r)
{
    zklock_session_t *s = session_of(c);
    struct zkl_ticket *t = ticket_for(c, s->gen);
    struct timespec now;
    bool first = c->ops == 0;
    int rc;

    if (first)
        zklock__now(s, &now); /* before it goes: the lease runs from no later */
    /* (Its answer never comes before the call returns: wire.h.) */
    rc = call(c, r, &c->slots[c->ticket * c->kinds + r->kind]);
    if (zklock__request_sent(s, rc)) {
        if (first)
            c->sent_at = now; /* no later than any request in flight */
        c->ops++;
        t->ops++;
        c->gen = s->gen;
        if (chained(c, r->kind))
            c->busy++;
    }
    return rc;
}

bool zklock__send(zkl_contender_t *c, const struct zkl_request *r)
{
    int rc = send_request(c, r);

    if (rc == ZOK)
        return true;
    /* Not even queued: a fact for the next step. */
    if (!chained(c, r->kind))
        return false; /* the own watch: its next step tries again */
    if (!c->refused)
        c->refused = rc; /* the first says why: what follows is refused too */
    zklock__mark(c);
    return false;
}

int zklock__send_beside(zkl_contender_t *c, const struct zkl_request *r)
{
    return send_request(c, r);
}

