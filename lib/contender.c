/*
 * contender.c: a contender's lifetime and the outcomes of its queuing.
 *
 * A contender is one owner's place in one lock's queue. It goes
 *
 *   QUEUING --(lowest / nothing conflicting ahead)--> HELD --release--> LEAVING --> GONE
 *      |  create + list (pipelined: one round trip)     |                  ^
 *      |  watch the nearest conflicting predecessor     +--lost--> LOST    |
 *      +--timeout / cancel / try-once busy / error------------------------+
 *
 * and is freed only when nobody can reach it any more, by the driver's last
 * phase (zklock__free_if_finished).
 */
#include "engine.h"

#include <assert.h>
#include <inttypes.h>

/* ---- on_lost -------------------------------------------------------------- */

struct lost_callback {
    struct zkl_callback cb;
    zklock_t *l;
    int reason;
    bool ran;
};

static bool lost_begin(struct zkl_callback *cb)
{
    struct lost_callback *lc = (struct lost_callback *)cb;

    lc->ran = !lc->l->freeing;
    if (lc->ran)
        lc->l->in_callback++;
    return lc->ran;
}

static void lost_run(struct zkl_callback *cb)
{
    struct lost_callback *lc = (struct lost_callback *)cb;
    lc->l->opts.on_lost(lc->l, lc->reason, lc->l->opts.ctx);
}

static void lost_end(struct zkl_callback *cb)
{
    struct lost_callback *lc = (struct lost_callback *)cb;
    zklock_t *l = lc->l;

    if (lc->ran) {
        l->in_callback--;
        pthread_cond_broadcast(&l->s->cond); /* zklock_free waits for it */
    }
    zklock__lock_unref(l);
    free(lc);
}

static const struct zkl_callback_ops lost_ops = {lost_begin, lost_run, lost_end};

static void queue_lost(zklock_t *l, int reason)
{
    struct lost_callback *lc;

    if (!l->opts.on_lost || !(lc = calloc(1, sizeof *lc)))
        return; /* the hold count and ZKLOCK_ELOST still tell the truth */
    lc->cb.ops = &lost_ops;
    lc->cb.owner = l;
    lc->l = l;
    lc->reason = reason;
    l->refs++;
    zklock__dispatch_push(l->s, &lc->cb);
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

void zklock__set_phase(zkl_contender_t *c, enum zkl_phase to, const char *why)
{
    zklock_session_t *s = session_of(c);

    assert(s->driving && "a phase changes only in a step");
    zklock__phase_check(c->phase, to);
    if (s->trace)
        trace(c, to, why);
    c->phase = to;
    if (to == ZKL_GONE)
        pthread_cond_broadcast(&s->cond); /* zklock_free and close wait for it */
    if (c->parent)
        zklock__mark(c->parent); /* its step reads its subs' phases */
}

/* ---- list membership and lifetime ---------------------------------------- */

/* Our node changes: a new one starts its own-watch delay, none ends it. */
void zklock__set_node(zkl_contender_t *c, char *node)
{
    free(c->node);
    c->node = node;
    c->own_due = false;
    c->alone = false;
    if (node)
        zklock__timer_arm_in(session_of(c), &c->own_timer, ZKL_OWN_WATCH_DELAY_MS);
    else
        zklock__timer_cancel(session_of(c), &c->own_timer);
}


zkl_contender_t *zklock__contender_new(zklock_t *l)
{
    zklock_session_t *s = l->s;
    zkl_contender_t *c = calloc(1, sizeof *c);

    if (!c)
        return NULL;
    if (zklock__timers_reserve(s, 2) != 0) { /* the own-node watch's, the deadline */
        free(c);
        return NULL;
    }
    if (zklock__cond_init(&c->cond) != 0) {
        zklock__timers_unreserve(s, 2);
        free(c);
        return NULL;
    }
    c->own_timer.fire = zklock__own_watch_due;
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
    zklock__slots_init(c);
    c->answer.kind = ZKL_REQ_NONE;
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

/* Frees c once nobody can reach it: no owner, no request in flight, no
 * watch that could still fire, and nothing left on the server. */
bool zklock__free_if_finished(zkl_contender_t *c)
{
    zklock_t *l = c->l;

    if (c->attached || c->inside > 0 || c->ops > 0 || c->pred_watches > 0 || c->own_watches > 0 ||
        c->queue_watches > 0)
        return false;
    if (c->loss_unconfirmed || c->waiting || c->releasing)
        return false; /* on_lost, or a call's outcome, is still owed */
    if (c->phase != ZKL_GONE && c->phase != ZKL_LOST)
        return false;
    if (zklock__sub_pending(c))
        return false; /* its sub's end frees it */
    unlink_contender(c);
    zklock__timer_cancel(l->s, &c->own_timer);
    zklock__timer_cancel(l->s, &c->deadline_timer);
    zklock__timers_unreserve(l->s, 2);
    free(c->check_path);
    free(c->recipe_data);
    free(c->node);
    free(c->watched);
    pthread_cond_destroy(&c->cond);
    free(c);
    zklock__lock_unref(l);
    return true;
}

void zklock__leave(zkl_contender_t *c, int rc)
{
    c->leave_wanted = true;
    c->leave_rc = rc;
    zklock__mark(c);
}

void zklock__detach(zkl_contender_t *c)
{
    c->attached = false;
    zklock__mark(c);
}

/* ---- outcomes ------------------------------------------------------------- */

void zklock__finish(zkl_contender_t *c)
{
    zklock__set_phase(c, ZKL_GONE, "its node is gone");
    zklock__mark(c);
}

/* Tells the owner, through on_lost, that a hold it had is over. */
static void report_lost(zkl_contender_t *c, int reason)
{
    if (c->l->internal)
        return; /* a recipe's own hold: its recipe deals with the loss */
    c->lost_reason = reason;
    session_of(c)->stats.lost++;
    queue_lost(c->l, reason);
}

/* A held lock is gone. If the owner is still inside zklock_acquire() it
 * never saw the hold: it queues again instead of being told. */
void zklock__lose(zkl_contender_t *c, int reason)
{
    if (c->waiting) {
        zklock__requeue(c);
        return;
    }
    c->lost_why = reason;
    zklock__set_phase(c, ZKL_LOST, reason ? "lost" : "lost, why to be asked");
    /* (a sub's parent sees it: zklock__subs_collect) */
    zklock__set_node(c, NULL);
    c->holds = 0;
    if (c->l->recipe->ending)
        c->l->recipe->ending(c); /* (a writer's heirs are lost with it: rwlock.c) */
    if (reason)
        report_lost(c, reason);
    zklock__mark(c);
}

bool zklock__same_owner(const zkl_contender_t *a, const zkl_contender_t *b)
{
    return a->by_handle ? b->by_handle : pthread_equal(a->owner, b->owner);
}

/* A hold is over, and we do not know why yet: the session may have ended
 * (a process paused past its session timeout sees its node's deletion, or
 * its lease run out, before it hears of the expiry). The engine asks the
 * server before on_lost says which (zklock__confirm_loss): `fallback` if the
 * session lives. The hold is over for the owner at once either way. */
void zklock__lose_unconfirmed(zkl_contender_t *c, int fallback)
{
    c->loss_unconfirmed = !c->waiting;
    c->loss_fallback = fallback;
    zklock__lose(c, 0);
}

void zklock__confirm_loss(zkl_contender_t *c, int reason)
{
    if (!c->loss_unconfirmed)
        return;
    c->loss_unconfirmed = false;
    report_lost(c, reason);
}

/* A release found its hold already gone: zklock_release() answers
 * ZKLOCK_ELOST, and on_lost is still told, once, like for any lost hold. */
void zklock__release_found_lost(zkl_contender_t *c, int reason)
{
    c->result = ZKLOCK_ELOST;
    report_lost(c, reason);
}

void zklock__give_up(zkl_contender_t *c, int rc)
{
    c->result = rc;
    zklock__set_phase(c, ZKL_LEAVING, rc == ZKLOCK_OK ? "released" : "gives up");
    if (c->l->recipe->ending)
        c->l->recipe->ending(c);
    zklock__mark(c);
}

