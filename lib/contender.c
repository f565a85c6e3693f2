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
 * and is freed only when nobody can reach it any more (zklock__reap).
 */
#include "engine.h"

/* ---- on_lost -------------------------------------------------------------- */

struct lost_callback {
    struct zkl_callback cb;
    zklock_t *l;
    int reason;
    int64_t token; /* of the hold it reports (zklock_lost_token) */
    bool ran;
};

/* The on_lost the calling thread is running, if any. */
static __thread const struct lost_callback *reporting;

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
    const struct lost_callback *outer = reporting; /* a callback may run others (zklock_free) */

    reporting = lc;
    lc->l->opts.on_lost(lc->l, lc->reason, lc->l->opts.ctx);
    reporting = outer;
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

static void queue_lost(zklock_t *l, int reason, int64_t token)
{
    struct lost_callback *lc;

    if (!l->opts.on_lost || !(lc = calloc(1, sizeof *lc)))
        return; /* the hold count and ZKLOCK_ELOST still tell the truth */
    lc->cb.ops = &lost_ops;
    lc->cb.owner = l;
    lc->l = l;
    lc->reason = reason;
    lc->token = token;
    l->refs++;
    zklock__dispatch_push(l->s, &lc->cb);
}

/* A blocking acquisition's outcome goes straight to its thread, on_lost
 * through the callback queue: a new hold of l can be granted (and
 * zklock_acquire return) before the on_lost of an older one has run. The
 * token tells the two apart. Reads only what the running callback owns:
 * no lock needed. */
int zklock_lost_token(const zklock_t *l, int64_t *token)
{
    if (!l || !token || !reporting || reporting->l != l)
        return ZKLOCK_EINVAL;
    *token = reporting->token;
    return ZKLOCK_OK;
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
    c->owner = pthread_self();
    c->by_handle = l->opts.owner == ZKLOCK_OWNER_HANDLE;
    c->attached = true;
    c->phase = ZKL_QUEUING;
    c->gen = s->gen;
    for (int k = 0; k < ZKL_TICKETS; k++)
        c->tickets[k] = (struct zkl_ticket){s->gen, 0, (unsigned char)k};
    c->lock_next = l->contenders;
    if (l->contenders)
        l->contenders->lock_prev = c;
    l->contenders = c;
    c->sess_next = s->contenders;
    if (s->contenders)
        s->contenders->sess_prev = c;
    s->contenders = c;
    l->refs++;
    zklock__lease_keep(s);
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
void zklock__reap(zkl_contender_t *c)
{
    zklock_t *l = c->l;

    if (c->attached || c->inside > 0 || c->ops > 0 || c->pred_watches > 0 || c->own_watches > 0 ||
        c->queue_watches > 0)
        return;
    if (c->loss_unconfirmed || c->waiting || c->releasing)
        return; /* on_lost, or a call's outcome, is still owed */
    if (c->phase != ZKL_GONE && c->phase != ZKL_LOST)
        return;
    if (zklock__sub_pending(c))
        return; /* its sub's end frees it */
    unlink_contender(c);
    zklock__timer_cancel(l->s, &c->own_timer);
    zklock__timer_cancel(l->s, &c->deadline_timer);
    zklock__timers_unreserve(l->s, 2);
    free(c->check_path);
    free(c->heir_of);
    free(c->heir_multi);
    free(c->recipe_data);
    free(c->node);
    free(c->watched);
    pthread_cond_destroy(&c->cond);
    free(c);
    zklock__lock_unref(l);
}

/* ---- sub-acquisitions ----------------------------------------------------- */

void zklock__adopt(zkl_contender_t *c, zkl_contender_t *m, void (*internal)(zkl_contender_t *, int))
{
    m->parent = c;
    m->internal = internal;
    m->next_sub = c->subs;
    c->subs = m;
}

void zklock__disown(zkl_contender_t *c, zkl_contender_t *m)
{
    zkl_contender_t **p = &c->subs;

    while (*p && *p != m)
        p = &(*p)->next_sub;
    if (*p)
        *p = m->next_sub;
    m->next_sub = NULL;
    m->parent = NULL;
    m->internal = NULL;
    m->attached = false;
}

void zklock__let_go(zkl_contender_t *c, zkl_contender_t *m)
{
    if (m->let_go)
        return;
    m->let_go = true;
    m->by_parent = false; /* a node made for it is its own to delete */
    if (m->phase == ZKL_HELD) {
        m->holds = 0;
        zklock__release_start(m, NULL, NULL);
    } else if (m->waiting) {
        m->canceled = true;
        zklock__call_check(m);
    } else if (m->phase == ZKL_QUEUING) {
        zklock__give_up(m, ZKLOCK_ECANCELED); /* never started */
    }
    if (m->parent != c)
        zklock__reap(m); /* decided at once, and disowned */
    /* else: one with nothing left (lost) is let go by zklock__sub_pending(),
     * not here: m may be in use up the stack (its own loss ends c's hold) */
}

bool zklock__sub_pending(zkl_contender_t *c)
{
    zkl_contender_t *m = c->subs, *next;
    bool pending = false;

    for (; m; m = next) {
        next = m->next_sub;
        if (m->phase != ZKL_LOST && m->phase != ZKL_GONE) {
            pending = true;
            continue;
        }
        zklock__disown(c, m);
        zklock__reap(m);
    }
    return pending;
}

void zklock__detach(zkl_contender_t *c)
{
    c->attached = false;
    zklock__reap(c);
}

/* ---- outcomes ------------------------------------------------------------- */

void zklock__finish(zkl_contender_t *c)
{
    c->phase = ZKL_GONE;
    pthread_cond_broadcast(&session_of(c)->cond); /* zklock_free, close */
    wake(c);
}

static bool same_owner(const zkl_contender_t *a, const zkl_contender_t *b);

/* Starts over with a new node name (the old one is gone or was never ours);
 * a downgrade heir stays one if `keep_heir`, else queues as a reader. */
static void start_over(zkl_contender_t *c, bool keep_heir)
{
    zklock__set_node(c, NULL);
    zklock__forget_blocker(c);
    c->create_unknown = false;
    c->fast = false;
    c->lease_wait = false;
    if (c->phase == ZKL_LEAVING)
        return; /* a contender that gave up never queues again: nothing to delete */
    c->phase = ZKL_QUEUING;
    c->need_list = false;
    if (!keep_heir) {
        c->heir = false;
        free(c->heir_of);
        c->heir_of = NULL;
    }
    zklock__make_prefix(c->prefix, c->l->opts.wire, session_of(c)->rng);
}

void zklock__requeue(zkl_contender_t *c)
{
    start_over(c, false); /* its writer's place is gone too: queue as a reader */
}

/* The downgrade heir c's writer (same owner, the other view) still holds
 * by the node c was made beside. */
bool zklock__writer_still_holds(const zkl_contender_t *c)
{
    const zklock_t *writers = c->l->sibling;

    for (const zkl_contender_t *w = writers ? writers->contenders : NULL; w; w = w->lock_next)
        if (same_owner(w, c) && w->phase == ZKL_HELD && w->node && c->heir_of &&
            strcmp(w->node, c->heir_of) == 0)
            return true;
    return false;
}

/* Only our own node went (deleted by hand, or not ours after all). A heir
 * whose writer still holds is made again as a heir, its multi's check
 * deciding as the first time: queued as a reader, it would wait behind its
 * own owner's write node for ever (found by the model, model/zklock.pml). */
void zklock__requeue_own(zkl_contender_t *c)
{
    start_over(c, c->heir && zklock__writer_still_holds(c));
}

bool zklock__become_holder(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    if (zklock__lease_over(s)) {
        /* The lease ran out while c waited (its process did not run, or a
         * watch event came late): the session may have expired, and
         * another client may hold. Granted once a heartbeat proves the
         * session lives (zklock__lease_regrant): then it never expired,
         * our node never went, and this turn still stands. */
        c->lease_wait = true;
        zklock__lease_renew(s);
        return false;
    }
    c->lease_wait = false;
    zklock__forget_blocker(c);
    if (c->heir) {
        /* A downgrade heir holds by its writer's place, and so by its token:
         * its own node is newer than a writer queued behind, whose token
         * storage must still accept. */
        c->czxid = c->heir_token;
    }
    c->phase = ZKL_HELD;
    c->result = ZKLOCK_OK;
    s->stats.acquired++;
    zklock__lease_keep(s);
    zklock__arm_own_watch(c); /* if its delay is over */
    if (c->l->recipe->granted)
        c->l->recipe->granted(c);
    wake(c);
    return true;
}

/* Tells the owner, through on_lost, that a hold it had is over. */
static void report_lost(zkl_contender_t *c, int reason)
{
    if (c->l->internal)
        return; /* a recipe's own hold: its recipe deals with the loss */
    c->lost_reason = reason;
    session_of(c)->stats.lost++;
    zklock__stats_hold_over(c, true);
    queue_lost(c->l, reason, c->czxid);
}

/* Is the loss of c's hold to be told? A multi-lock's member holds as part
 * of its multi-lock's hold (zklock.h): its loss is told only if the
 * multi-lock held (holds, lost it, is being released). While the
 * multi-lock still waits, or gave up, its owner never had the member's
 * hold: the multi-lock queues again, or is over (recipes/multi.c). */
static bool loss_owed(const zkl_contender_t *c)
{
    const zkl_contender_t *p = c->parent;

    return !p || p->phase == ZKL_HELD || p->phase == ZKL_LOST || p->releasing;
}

static void lose_heirs_of(zkl_contender_t *w, int reason, bool unconfirmed);

/* A sub's hold is part of its parent's (a multi-lock's member): when it is
 * lost, so is the parent's. */
static void lose_parent(zkl_contender_t *c, int reason, bool unconfirmed)
{
    zkl_contender_t *p = c->parent;

    if (!p || p->phase != ZKL_HELD)
        return;
    if (unconfirmed)
        zklock__lose_unconfirmed(p, c->loss_fallback);
    else
        zklock__lose(p, reason);
}

/* A held lock is gone. If the owner is still inside zklock_acquire() it
 * never saw the hold: it queues again instead of being told. */
void zklock__lose(zkl_contender_t *c, int reason)
{
    bool unconfirmed = c->loss_unconfirmed;

    if (c->waiting) {
        zklock__requeue(c);
        return;
    }
    zklock__set_node(c, NULL);
    c->phase = ZKL_LOST;
    c->holds = 0;
    if (c->l->recipe->ending)
        c->l->recipe->ending(c);
    if (reason && loss_owed(c))
        report_lost(c, reason);
    wake(c);
    lose_heirs_of(c, reason, unconfirmed);
    lose_parent(c, reason, unconfirmed);
}

static bool same_owner(const zkl_contender_t *a, const zkl_contender_t *b)
{
    return a->by_handle ? b->by_handle : pthread_equal(a->owner, b->owner);
}

/* A downgrade heir holds by its writer's place, and by its token: when the
 * writer's hold is lost, so is the heir's. */
static void lose_heirs_of(zkl_contender_t *w, int reason, bool unconfirmed)
{
    zklock_t *readers = w->l->sibling;
    zkl_contender_t *c, *next;

    if (!readers || w->l->shared)
        return;
    for (c = readers->contenders; c; c = next) {
        next = c->lock_next;
        if (!c->heir || c->phase != ZKL_HELD || !same_owner(c, w))
            continue;
        zklock__stale_add(c); /* its node goes: it holds by nothing now */
        if (unconfirmed)
            zklock__lose_unconfirmed(c, w->loss_fallback);
        else
            zklock__lose(c, reason);
        zklock__stale_sweep(session_of(c));
    }
}

/* A hold is over, and we do not know why yet: the session may have ended
 * (a process paused past its session timeout sees its node's deletion, or
 * its lease run out, before it hears of the expiry). The engine asks the
 * server before on_lost says which (zklock__confirm_loss): `fallback` if the
 * session lives. The hold is over for the owner at once either way. */
void zklock__lose_unconfirmed(zkl_contender_t *c, int fallback)
{
    c->loss_unconfirmed = !c->waiting && loss_owed(c); /* decided now: the parent moves on */
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
    if (loss_owed(c))
        report_lost(c, reason);
}

void zklock__give_up(zkl_contender_t *c, int rc)
{
    c->result = rc;
    c->phase = ZKL_LEAVING;
    if (c->l->recipe->ending)
        c->l->recipe->ending(c);
    zklock__step(c);
}

