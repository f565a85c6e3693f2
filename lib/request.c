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
 * One completion per ZooKeeper signature; the request's kind and ticket
 * come back through the data pointer, a slot of the contender's
 * (c->slots[ticket * ZKL_SLOTS + kind]). A ticket is the generation the request was sent
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
 * of its own: zklock__detached_sent() and zklock__detached_done() count them.
 */
#include "request.h"

_Static_assert(ZKL_SLOTS == ZKL_REQ_COUNT, "a completion slot per kind of request");
_Static_assert(ZKL_TICKETS * ZKL_SLOTS <= 256, "a slot holds its own index in a byte");

/* Kinds whose answer the contender's chain waits for (c->busy): all but the
 * own-node watch, which is set beside the chain. */
static bool chained(int kind)
{
    return kind != ZKL_REQ_OWN_WATCH;
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
    if (--s->ops == 0)
        pthread_cond_broadcast(&s->cond);
    if (t->gen != s->gen)
        return false;
    zklock__learn_completion_thread(s);
    if (chained(kind))
        c->busy--;
    return true;
}

/* Records a (borrowed) answer for c's step, marks c, ends the event. */
static void record(const void *data, struct zkl_answer *a)
{
    const unsigned char *slot = data;
    zkl_contender_t *c = owner_of(slot);
    zklock_session_t *s = session_of(c);

    pthread_mutex_lock(&s->mu);
    a->kind = *slot % ZKL_SLOTS;
    if (answered(c, *slot / ZKL_SLOTS, a->kind))
        c->answer = a;
    zklock__mark_event(c);
    zklock__entry_done(s); /* c's step reads the answer, and forgets it (c may be freed now) */
    pthread_mutex_unlock(&s->mu);
}

static void string_done(int rc, const char *value, const void *data)
{
    record(data, &(struct zkl_answer){.rc = rc, .value = value});
}

static void string_stat_done(int rc, const char *value, const struct Stat *st, const void *data)
{
    record(data, &(struct zkl_answer){.rc = rc, .value = value, .stat = st});
}

static void strings_stat_done(int rc, const struct String_vector *names, const struct Stat *st,
                              const void *data)
{
    record(data, &(struct zkl_answer){.rc = rc, .names = names, .stat = st});
}

static void data_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
    record(data, &(struct zkl_answer){.rc = rc, .value = value, .len = len, .stat = st});
}

static void stat_done(int rc, const struct Stat *st, const void *data)
{
    record(data, &(struct zkl_answer){.rc = rc, .stat = st});
}

static void void_done(int rc, const void *data)
{
    record(data, &(struct zkl_answer){.rc = rc});
}

/* ---- sending ------------------------------------------------------------------------ */

/* The ZooKeeper call r is, with its completion. */
static int call(zkl_contender_t *c, const struct zkl_request *r, const void *slot)
{
    const struct zkl_wire *wire = session_of(c)->wire;
    zhandle_t *zh = session_of(c)->zh;
    watcher_fn w = r->watcher;

    switch (r->call) {
    case ZKL_CALL_CREATE:
        return wire->acreate(zh, r->path, r->data, r->len, r->acl, r->flags, string_done, slot);
    case ZKL_CALL_CREATE2:
        return wire->acreate2(zh, r->path, r->data, r->len, r->acl, r->flags, string_stat_done,
                              slot);
    case ZKL_CALL_CHILDREN:
        return w ? wire->awget_children2(zh, r->path, w, c, strings_stat_done, slot)
                 : wire->aget_children2(zh, r->path, 0, strings_stat_done, slot);
    case ZKL_CALL_SYNC:
        return wire->async(zh, r->path, string_done, slot);
    case ZKL_CALL_GET:
        return w ? wire->awget(zh, r->path, w, c, data_done, slot)
                 : wire->aget(zh, r->path, 0, data_done, slot);
    case ZKL_CALL_EXISTS:
        return wire->aexists(zh, r->path, 0, stat_done, slot);
    case ZKL_CALL_DELETE:
        return wire->adelete(zh, r->path, -1, void_done, slot);
    case ZKL_CALL_MULTI:
        return wire->amulti(zh, r->nops, r->ops, r->results, void_done, slot);
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

bool zklock__send(zkl_contender_t *c, const struct zkl_request *r)
{
    zklock_session_t *s = session_of(c);
    struct zkl_ticket *t = ticket_for(c, s->gen);
    int rc;

    if (c->ops == 0)
        zklock__now(s, &c->sent_at); /* no later than any request in flight */
    c->ops++;
    t->ops++;
    s->ops++;
    c->gen = s->gen;
    if (chained(r->kind))
        c->busy++;
    rc = call(c, r, &c->slots[c->ticket * ZKL_SLOTS + r->kind]);
    if (rc == ZOK) {
        s->stats.requests++;
        return true;
    }
    /* Not even queued: undone, and a fact for the next step. */
    c->ops--;
    t->ops--;
    if (--s->ops == 0)
        pthread_cond_broadcast(&s->cond);
    if (!chained(r->kind))
        return false; /* the own watch: its next step tries again */
    c->busy--;
    if (!c->refused)
        c->refused = rc; /* the first says why: what follows is refused too */
    zklock__mark(c);
    return false;
}

bool zklock__detached_sent(zklock_session_t *s, int rc)
{
    if (rc != ZOK)
        return false; /* a later sweep, heartbeat or listing tries again */
    s->ops++;
    s->stats.requests++;
    return true;
}

void zklock__detached_done(zklock_session_t *s)
{
    if (--s->ops == 0)
        pthread_cond_broadcast(&s->cond);
}

