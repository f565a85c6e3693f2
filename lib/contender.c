/*
 * contender.c: a contender, one owner's place in one lock's queue: its
 * struct and lifetime, the marks that make the driver step it, the one
 * function that changes its phase (checked against phase.c's table,
 * traced), and the wishes and verbs below its step (contender.h says which
 * way each one ends it). It is freed only by the driver's last phase, once
 * nobody can reach it any more.
 */
#include "contender.h"
#include "recipe.h"

#include <inttypes.h>

/* ---- marks: the contenders the driver is to step ------------------------------ */

void zklock__mark(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    if (c->marked)
        return;
    c->marked = true;
    c->mark_next = NULL;
    if (s->marked_tail)
        s->marked_tail->mark_next = c;
    else
        s->marked_head = c;
    s->marked_tail = c;
}

void zklock__mark_event(zkl_contender_t *c)
{
    zklock__mark(c);
    if (c->parent)
        zklock__mark(c->parent);
}

/* ---- phases ------------------------------------------------------------------ */

/* One line per transition (ZKLOCK_TRACE): the session, the contender (and
 * its parent, for a sub: c8<c7), its queue, the transition, why (and the
 * outcome it ends with), and its node. */
static void trace(const zkl_contender_t *c, enum zkl_phase to, const char *why)
{
    zklock_session_t *s = session_of(c);
    char parent[24] = "";
    int code = to == ZKL_LOST ? c->lost_why : to == ZKL_LEAVING || to == ZKL_GONE ? c->result : 0;

    if (c->parent)
        snprintf(parent, sizeof parent, "<c%u", c->parent->id);
    fprintf(s->trace, "zklock: session 0x%" PRIx64 " c%u%s %s %s -> %s: %s%s%s node %s\n",
            (uint64_t)s->session_id, c->id, parent, c->l->queue, zklock__phase_name(c->phase),
            zklock__phase_name(to), why, code ? " " : "", code ? zklock_err_name(code) : "",
            c->node ? basename_of(c->node) : "-");
    fflush(s->trace);
}

/* The guards hold in every build: a phase changes only in a step, and only
 * along the table (an internal error otherwise: zklock__internal_error). */
static void check_transition(const zkl_contender_t *c, enum zkl_phase to, const char *why)
{
    zklock_session_t *s = session_of(c);

    if (!s->driving || !zklock__phase_allowed(c->phase, to))
        zklock__internal_error(s, "c%u %s %s -> %s: %s (%s)", c->id, c->l->queue,
                               zklock__phase_name(c->phase), zklock__phase_name(to),
                               s->driving ? "not a transition of the table"
                                          : "a phase changed outside a step",
                               why);
}

void zklock__set_phase(zkl_contender_t *c, enum zkl_phase to, const char *why)
{
    zklock_session_t *s = session_of(c);

    check_transition(c, to, why);
    if (s->trace)
        trace(c, to, why);
    c->phase = to;
    if (to == ZKL_GONE)
        pthread_cond_broadcast(&s->cond); /* zklock_free and close wait for it */
    if (c->parent)
        zklock__mark(c->parent); /* its step reads its subs' phases */
}

/* ---- list membership and lifetime ---------------------------------------- */

/* A contender's timers: the own-node watch's delay, the deadline, the
 * maximum hold. */
#define ZKL_CONTENDER_TIMERS 3

/* Our node changes: a new one starts its own-watch delay, none ends it. */
void zklock__set_node(zkl_contender_t *c, char *node)
{
    free(c->node);
    c->node = node;
    c->own_due = false;
    c->alone = false;
    c->was_blocked = false; /* a new place in the queue: nothing blocked it yet */
    if (node)
        zklock__timer_arm_in(session_of(c), &c->own_timer, ZKL_OWN_WATCH_DELAY_MS);
    else
        zklock__timer_cancel(session_of(c), &c->own_timer);
}


/* The own-watch delay's timer (its door, doors.c): our node has lived
 * ZKL_OWN_WATCH_DELAY_MS, its watch is due (its step sets it now, or on the
 * next resume if the connection is down). */
void zklock__own_watch_due(struct zkl_timer *t)
{
    zkl_contender_t *c = (zkl_contender_t *)((char *)t - offsetof(zkl_contender_t, own_timer));

    c->own_due = true;
    zklock__mark(c);
}

zkl_contender_t *zklock__contender_new(zklock_t *l)
{
    zklock_session_t *s = l->s;
    int kinds = ZKL_REQ_RECIPE + l->recipe->nkinds;
    zkl_contender_t *c;

    if (l->recipe->nkinds > ZKL_RECIPE_KINDS_MAX)
        return NULL; /* (a recipe of more kinds than a slot can name) */
    c = calloc(1, sizeof *c + (size_t)(ZKL_TICKETS * kinds));
    if (!c)
        return NULL;
    c->kinds = (unsigned char)kinds;
    if (zklock__timers_reserve(s, ZKL_CONTENDER_TIMERS) != 0) {
        free(c);
        return NULL;
    }
    c->own_timer.fire = s->doors->own_watch_due;
    c->deadline_timer.fire = s->doors->deadline_passed;
    c->max_hold_timer.fire = s->doors->max_hold_passed;
    zklock__make_prefix(c->prefix, l->opts.wire, s->rng);
    c->l = l;
    c->id = ++s->contenders_made;
    c->owner = pthread_self();
    c->by_handle = l->opts.owner == ZKLOCK_OWNER_HANDLE;
    c->attached = true;
    c->phase = ZKL_QUEUING; /* its first phase: no transition */
    c->gen = s->gen;
    c->lock_next = l->contenders;
    if (l->contenders)
        l->contenders->lock_prev = c;
    l->contenders = c;
    c->sess_next = s->contenders;
    if (s->contenders)
        s->contenders->sess_prev = c;
    s->contenders = c;
    for (int t = 0; t < ZKL_TICKETS; t++)
        c->tickets[t].gen = s->gen;
    for (int k = 0; k < ZKL_TICKETS * kinds; k++)
        c->slots[k] = (unsigned char)k;
    l->refs++;
    return c;
}

static void unlink_contender(zkl_contender_t *c)
{
    zklock_t *l = c->l;
    zklock_session_t *s = l->s;

    if (c->lock_prev)
        c->lock_prev->lock_next = c->lock_next;
    else
        l->contenders = c->lock_next;
    if (c->lock_next)
        c->lock_next->lock_prev = c->lock_prev;
    if (c->sess_prev)
        c->sess_prev->sess_next = c->sess_next;
    else
        s->contenders = c->sess_next;
    if (c->sess_next)
        c->sess_next->sess_prev = c->sess_prev;
}

/* Frees c (the driver, once nobody can reach it: zklock__drive). */
void zklock__contender_free(zkl_contender_t *c)
{
    zklock_t *l = c->l;

    unlink_contender(c);
    zklock__timer_cancel(l->s, &c->own_timer);
    zklock__timer_cancel(l->s, &c->deadline_timer);
    zklock__timer_cancel(l->s, &c->max_hold_timer);
    zklock__timers_unreserve(l->s, ZKL_CONTENDER_TIMERS);
    free(c->check_path);
    if (l->recipe->free_data)
        l->recipe->free_data(c);
    else
        free(c->recipe_data);
    free(c->node);
    free(c->watched);
    free(c);
    zklock__lock_unref(l);
}

bool zklock__inherits(const zkl_contender_t *c)
{
    return c->l->recipe->heir && c->l->recipe->heir->inherits(c);
}

bool zklock__place_stands(const zkl_contender_t *c)
{
    return zklock__inherits(c) && c->l->recipe->heir->place_stands(c);
}

void zklock__leave(zkl_contender_t *c, int rc)
{
    c->leave_wanted = true;
    c->leave_rc = rc;
    zklock__mark(c);
}

void zklock__abandon(zkl_contender_t *c)
{
    c->attached = false;
    zklock__mark(c);
}

/* ---- the ways a contender ends (contender.h) --------------------------------- */

bool zklock__same_owner(const zkl_contender_t *a, const zkl_contender_t *b)
{
    return a->by_handle ? b->by_handle : pthread_equal(a->owner, b->owner);
}

void zklock__give_up(zkl_contender_t *c, int rc)
{
    c->result = rc;
    zklock__set_phase(c, ZKL_LEAVING, rc == ZKLOCK_OK ? "released" : "gives up");
    if (c->l->recipe->ending)
        c->l->recipe->ending(c);
    zklock__mark(c);
}


/* ---- what a recipe reads and writes of a contender (recipe.h) ------------------------- */

zklock_t *zklock__lock_of(const zkl_contender_t *c)
{
    return c->l;
}

enum zkl_phase zklock__phase(const zkl_contender_t *c)
{
    return c->phase;
}

bool zklock__wants(const zkl_contender_t *c)
{
    return ZKL_WANTS(c);
}

const char *zklock__node(const zkl_contender_t *c)
{
    return c->node;
}

int32_t zklock__seq(const zkl_contender_t *c)
{
    return c->seq;
}

int64_t zklock__token(const zkl_contender_t *c)
{
    return c->czxid;
}

const char *zklock__prefix(const zkl_contender_t *c)
{
    return c->prefix;
}

bool zklock__waiting(const zkl_contender_t *c)
{
    return c->waiting;
}

bool zklock__attached(const zkl_contender_t *c)
{
    return c->attached;
}

bool zklock__try_once(const zkl_contender_t *c)
{
    return c->try_once;
}

bool zklock__create_unknown(const zkl_contender_t *c)
{
    return c->create_unknown;
}

int zklock__busy(const zkl_contender_t *c)
{
    return c->busy;
}

int zklock__in_flight(const zkl_contender_t *c)
{
    return c->ops;
}

int zklock__lost_why(const zkl_contender_t *c, bool *unconfirmed)
{
    *unconfirmed = c->loss_unconfirmed;
    return c->loss_unconfirmed ? c->loss_fallback : c->lost_why;
}

int zklock__parent_refusal(const zkl_contender_t *c)
{
    return c->parent_rc;
}

bool zklock__parents_wanted(const zkl_contender_t *c)
{
    return c->need_parents;
}

bool zklock__list_wanted(const zkl_contender_t *c)
{
    return c->need_list;
}

bool zklock__queue_watched(const zkl_contender_t *c)
{
    return c->queue_watch;
}

void *zklock__data(const zkl_contender_t *c)
{
    return c->recipe_data;
}

zkl_contender_t *zklock__first(const zklock_t *l)
{
    return l->contenders;
}

zkl_contender_t *zklock__next(const zkl_contender_t *c)
{
    return c->lock_next;
}

zkl_contender_t *zklock__first_sub(const zkl_contender_t *c)
{
    return c->subs;
}

zkl_contender_t *zklock__next_sub(const zkl_contender_t *m)
{
    return m->next_sub;
}

zkl_contender_t *zklock__parent_of(const zkl_contender_t *m)
{
    return m->parent;
}

bool zklock__is_let_go(const zkl_contender_t *m)
{
    return m->let_go;
}

bool zklock__by_parent(const zkl_contender_t *m)
{
    return m->by_parent;
}

void zklock__set_data(zkl_contender_t *c, void *data)
{
    c->recipe_data = data;
}

void zklock__set_seq(zkl_contender_t *c, int32_t seq)
{
    c->seq = seq;
}

void zklock__set_token(zkl_contender_t *c, int64_t token)
{
    c->czxid = token;
}

void zklock__set_create_unknown(zkl_contender_t *c, bool unknown)
{
    c->create_unknown = unknown;
}

void zklock__set_parent_refusal(zkl_contender_t *c, int rc)
{
    c->parent_rc = rc;
}

void zklock__set_parents_wanted(zkl_contender_t *c, bool wanted)
{
    c->need_parents = wanted;
}

void zklock__set_queue_watch(zkl_contender_t *c, bool watch)
{
    c->queue_watch = watch;
}

void zklock__set_list_wanted(zkl_contender_t *c, bool wanted)
{
    c->need_list = wanted;
}

void zklock__set_by_parent(zkl_contender_t *m, bool by_parent)
{
    m->by_parent = by_parent;
}

void zklock__chain_begin(zkl_contender_t *m)
{
    m->busy++;
}

void zklock__chain_end(zkl_contender_t *m)
{
    m->busy--;
}
