/*
 * step.c: a contender's step, the one place where what it learnt becomes
 * what it does.
 *
 * The driver (driver.c) steps a contender after something about it was
 * recorded: an answer to one of its requests (c->answer, request.c), a
 * request the client refused (c->refused), a watch event (watch.c), the
 * end of its session, its lease run out, a wish of its owner's (an
 * acquisition, a release, a cancel, a deadline) or of its parent's (let
 * go). A step first reads those facts, in that order, then sends whatever
 * the contender needs next. Nothing here is called from a completion, a
 * watcher or a timer: only from the driver, so nothing here runs twice at
 * once, and nothing frees a contender (the driver's last phase does).
 *
 * zklock__step is idempotent: "the connection is back" simply means "step
 * everyone". Requests carry the session generation; an answer of an older
 * one never reaches a step (request.c drops it).
 */
#include "lease.h"
#include "owner.h"
#include "previous.h"
#include "recipe.h"
#include "request.h"
#include "revoke.h"
#include "rules.h"
#include "stale.h"
#include "step.h"
#include "subs.h"
#include "watch.h"

#include <stdio.h>

static void failed(zkl_contender_t *c, int rc);
static void own_node_gone(zkl_contender_t *c);
static void send_owner_check(zkl_contender_t *c);
static void send_stray_delete(zklock_session_t *s, const char *dir, const char *name);

/* ---- the verbs that need the lease and the watches ------------------------------------- */

/* Starts over with a new node name (the old one is gone or was never ours);
 * a contender that holds by another's place (a downgrade heir) keeps it if
 * `keep_place`, else queues as a plain one (a reader). */
static void start_over(zkl_contender_t *c, bool keep_place)
{
    zklock__forget_blocker(c);
    zklock__track_node_lost(c); /* a node that never held, gone without a word */
    zklock__set_node(c, NULL);
    c->create_unknown = false;
    c->fast = false;
    if (c->phase == ZKL_LEAVING)
        return; /* a contender that gave up never queues again: nothing to delete */
    zklock__set_phase(c, ZKL_QUEUING, keep_place ? "queues again, in its place" : "queues again");
    c->need_list = false;
    if (!keep_place && zklock__inherits(c))
        c->l->recipe->heir->forget_place(c);
    zklock__make_prefix(c->prefix, c->l->opts.wire, session_of(c)->rng);
}

void zklock__requeue(zkl_contender_t *c)
{
    start_over(c, false); /* its writer's place is gone too: queue as a reader */
}

/* Only our own node went (deleted by hand, or not ours after all). A heir
 * whose writer still holds is made again as a heir, its multi's check
 * deciding as the first time: queued as a reader, it would wait behind its
 * own owner's write node for ever (found by the model, model/zklock.pml). */
void zklock__requeue_own(zkl_contender_t *c)
{
    start_over(c, zklock__place_stands(c));
}

/* Nothing of ours is on the server any more. */
static void gone(zkl_contender_t *c)
{
    zklock__set_phase(c, ZKL_GONE, "its node is gone");
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

/* A held lock is gone. If the owner is still inside zklock_acquire() it
 * never saw the hold: it queues again instead of being told. */
void zklock__lose(zkl_contender_t *c, int reason)
{
    bool owed = loss_owed(c);

    if (c->waiting) {
        start_over(c, false);
        return;
    }
    c->lost_why = reason;
    zklock__set_phase(c, ZKL_LOST, reason && owed        ? "lost"
                                   : c->loss_unconfirmed ? "lost, why to be asked"
                                                         : "lost, not told: its multi-lock waits");
    zklock__set_node(c, NULL);
    c->holds = 0;
    if (c->l->recipe->ending)
        c->l->recipe->ending(c); /* (a writer's heirs are lost with it: rwlock.c) */
    if (reason && owed)
        zklock__tell_lost(c, reason);
}

/* A hold is over, and we do not know why yet: the session may have ended
 * (a process paused past its session timeout sees its node's deletion, or
 * its lease run out, before it hears of the expiry). The engine asks the
 * server before on_lost says which (confirm_loss): `fallback` if the
 * session lives. The hold is over for the owner at once either way. */
void zklock__lose_unconfirmed(zkl_contender_t *c, int fallback)
{
    c->loss_unconfirmed = !c->waiting && loss_owed(c); /* decided now: the parent moves on */
    c->loss_fallback = fallback;
    zklock__lose(c, 0);
}

static void confirm_loss(zkl_contender_t *c, int reason)
{
    if (!c->loss_unconfirmed)
        return;
    c->loss_unconfirmed = false;
    zklock__tell_lost(c, reason);
}

/* A release found its hold already gone: zklock_release() answers
 * ZKLOCK_ELOST, and on_lost is still told, once, like for any lost hold. */
static void release_found_lost(zkl_contender_t *c, int reason)
{
    c->result = ZKLOCK_ELOST;
    if (loss_owed(c))
        zklock__tell_lost(c, reason);
}

bool zklock__become_holder(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    zklock__forget_blocker(c);
    if (!zklock__lease_fresh(s)) {
        /* A waiter keeps no lease (lease.c): its last write was answered
         * more than half a session timeout ago, or the lease even ran out
         * (its process did not run, a watch event came late) and the
         * session may have expired, another client may hold. Granted once
         * a heartbeat proves the session lives (step_granting): then it
         * never expired, our node never went, and this turn still stands;
         * and the hold starts with the whole reserve before its first
         * heartbeat must be answered. */
        if (c->phase != ZKL_GRANTING)
            zklock__set_phase(c, ZKL_GRANTING, zklock__lease_over(s)
                                                   ? "its turn, on a run-out lease"
                                                   : "its turn, on an old lease");
        zklock__lease_renew(s);
        zklock__lease_keep(s); /* a heartbeat refused or lost is sent again (T/6) */
        return false;
    }
    if (!zklock__track_granted(c)) {
        /* A tracking mutex: the record is read and "held" written, and the
         * lock-delay waited, before the hold is the owner's (step_granting). */
        if (c->phase != ZKL_GRANTING)
            zklock__set_phase(c, ZKL_GRANTING, "its turn: reads the record");
        zklock__lease_keep(s);
        return false;
    }
    zklock__set_phase(c, ZKL_HELD, "its turn");
    c->result = ZKLOCK_OK;
    s->stats.acquired++;
    zklock__lease_keep(s);
    zklock__hold_begins(c); /* a maximum hold's clock */
    zklock__track_hold_begins(c); /* its release writes "released" */
    zklock__revoke_granted(c); /* a revocable holder watches its node at once */
    zklock__arm_own_watch(c); /* if its delay is over */
    if (c->l->recipe->granted)
        c->l->recipe->granted(c); /* (a heir takes its writer's token: rwlock.c) */
    return true;
}

/* ---- what an answer means -------------------------------------------------------------- */

/* A write's answer (it went through the leader): the lease runs from when
 * it was sent. */
void zklock__heard(zkl_contender_t *c, int rc)
{
    if (zklock__lease_proves(rc))
        zklock__lease_heard(session_of(c), &c->sent_at);
}

/* Our node exists. A create sent without a listing holds if the fast
 * path's rule says so, or lists. */
static void created(zkl_contender_t *c, bool fast, int64_t czxid)
{
    if (c->phase != ZKL_QUEUING)
        return;
    if (fast && zklock__fast_holds(c->seq, czxid, c->fast_prev_seq, c->fast_prev_zxid)) {
        c->alone = true; /* known now, whenever the hold begins */
        if (zklock__become_holder(c))
            session_of(c)->stats.fast_acquired++;
    } else if (fast) {
        c->need_list = true;
    }
}

static void on_create(zkl_contender_t *c, const struct zkl_answer *a)
{
    bool fast = c->fast;
    struct zkl_entry e;

    zklock__heard(c, a->rc);
    c->fast = false;
    if (a->rc == ZOK) {
        zklock__set_node(c, strdup(a->value));
        if (!c->node) {
            zklock__give_up(c, ZKLOCK_ENOMEM); /* we cannot name our node; it goes with the session */
            return;
        }
        c->seq = zklock__parse_name(basename_of(a->value), &e) == 0 ? e.seq : 0;
        c->czxid = a->stat->czxid;
        zklock__track_created(c, a->stat);
        created(c, fast, a->stat->czxid);
    } else if (a->rc == ZNONODE) {
        if (c->parent_rc != 0)
            failed(c, c->parent_rc); /* the lock path cannot be made */
        else
            c->need_parents = true; /* the listing fails too; the step starts over */
    } else {
        c->create_unknown |= transient(a->rc);
        failed(c, a->rc);
    }
}

/* Answers arrive in order, top down, every parent's before our own create's.
 * Only the deepest level's answer counts: ZooKeeper checks the permission to
 * create in a level before it checks whether the child exists, so a read-only
 * ancestor refuses even a level that is already there. A level that exists
 * (or was just made) below it clears that refusal. */
static void on_parent(zkl_contender_t *c, int rc, bool top)
{
    if (rc == ZOK || rc == ZNODEEXISTS)
        c->parent_rc = 0;
    else if (transient(rc) || session_ending(rc))
        c->parent_rc = 0; /* the burst straddled a reconnection: try again */
    else if (rc != ZNONODE || top)
        c->parent_rc = rc;
    /* "No node" below the top: the level above went meanwhile (reaped);
     * at the top it can only be the session's chroot that is missing. */
}

/* What a listing of the queue means for c: the rules are rules.c's, pure;
 * here what c knows goes in and their verdict is acted on. */

static bool stale(const void *ctx, const char *name)
{
    const zkl_contender_t *c = ctx;
    return zklock__stale_match(session_of(c), c->l->queue, name);
}

static void facts_of(const zkl_contender_t *c, struct zkl_queue_facts *f)
{
    *f = (struct zkl_queue_facts){
        .prefix = c->prefix,
        .own = c->node ? basename_of(c->node) : NULL,
        .seq = c->seq,
        .recovering = c->create_unknown,
        .exclusive = !c->l->shared,
        .try_once = c->try_once,
        .heir = zklock__inherits(c),
        .writer = zklock__inherits(c) ? c->l->recipe->heir->place_node(c) : NULL,
        .stale = stale,
        .stale_ctx = c,
    };
}

/* A lost create reply: the listing found our node (ours only if our session
 * owns it: the owner check), or not (the next step creates it again; a heir
 * whose writer is gone too queues as a plain reader). */
static void recovered(zkl_contender_t *c, const struct zkl_verdict *v)
{
    c->create_unknown = false;
    if (v->kind == ZKL_V_FOUND) {
        zklock__set_node(c, zklock__child_path(c->l->queue, v->node->name));
        c->seq = v->node->seq;
        if (c->node)
            send_owner_check(c);
    } else if (v->kind == ZKL_V_HEIR_ORPHANED) {
        zklock__requeue(c);
    }
}

static void act_on(zkl_contender_t *c, const struct zkl_verdict *v)
{
    switch (v->kind) {
    case ZKL_V_HOLDS:
        c->alone = v->alone; /* known now, whenever the hold begins */
        zklock__become_holder(c);
        break;
    case ZKL_V_WATCH:
        zklock__watch_blocker(c, v->node, v->sole);
        break;
    case ZKL_V_BUSY:
        zklock__give_up(c, ZKLOCK_EBUSY);
        break;
    case ZKL_V_NODE_GONE:
        zklock__requeue_own(c); /* deleted by someone else: queue again at the back */
        break;
    case ZKL_V_SPENT:
        zklock__give_up(c, ZKLOCK_EWRAPPED); /* and our node goes */
        break;
    default:
        break;
    }
}

static void judge(zkl_contender_t *c, const struct String_vector *names, const struct Stat *dir)
{
    zklock_session_t *s = session_of(c);
    struct zkl_queue_facts f;
    struct zkl_verdict v;
    struct zkl_entry *q = malloc(sizeof *q * (size_t)(names->count > 0 ? names->count : 1));
    int n, self;

    if (!q) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    facts_of(c, &f);
    n = zklock__queue_read(&f, names, q, &self);
    zklock__queue_judge(&f, q, n, self, zklock__creations(dir->cversion, dir->numChildren), &v);
    s->stats.listings++;
    if (c->create_unknown) {
        recovered(c, &v);
        free(q);
        return;
    }
    for (int i = 0; i < n; i++)
        if (q[i].mine)
            send_stray_delete(s, c->l->queue, q[i].name);
    if (c->phase == ZKL_QUEUING)
        act_on(c, &v);
    free(q);
}

static void on_list(zkl_contender_t *c, const struct zkl_answer *a)
{
    zklock__queue_listed(c, a->rc);
    if (a->rc == ZOK) {
        if (c->l->recipe->judge && (c->node || c->create_unknown))
            c->l->recipe->judge(c, a->names, a->stat);
        else if (c->node || c->create_unknown)
            judge(c, a->names, a->stat);
    } else if (a->rc == ZNONODE) {
        /* No lock path: nothing of ours can be under it. A downgrade heir
         * never makes the path: its writer's place is gone with it. */
        if (c->create_unknown && zklock__inherits(c)) {
            zklock__requeue(c);
        } else if (c->create_unknown) {
            c->create_unknown = false;
            c->need_parents = true;
        } else if (c->node) {
            zklock__requeue(c);
        }
    } else if (transient(a->rc)) {
        c->need_list = c->node != NULL;
        failed(c, a->rc);
    } else if (!session_ending(a->rc)) {
        c->create_unknown = false; /* we cannot look (ACL?): it goes with the session */
        failed(c, a->rc);
    }
}

static void on_owner(zkl_contender_t *c, const struct zkl_answer *a)
{
    if (a->rc == ZOK && a->stat->ephemeralOwner == session_of(c)->session_id) {
        c->czxid = a->stat->czxid;
        zklock__track_created(c, a->stat);
        if (zklock__inherits(c) && c->phase == ZKL_QUEUING)
            zklock__become_holder(c); /* a heir holds by its writer's place */
        else
            c->need_list = true;
    } else if (transient(a->rc)) {
        c->create_unknown = true; /* look again */
        zklock__set_node(c, NULL);
    } else {
        /* Gone, or not ours after all: never touch it, start afresh. */
        if (a->rc == ZOK)
            zklock__set_node(c, NULL); /* someone else's: not a node of ours that went */
        zklock__requeue_own(c);
    }
}

/* Our node's delete: refused for good (the lock path's ACL no longer lets
 * us delete), it goes with the session, and nobody will tell us. Its watch
 * is taken back now, while we still know its path; the caller hears why. */
static void node_abandoned(zkl_contender_t *c, int rc)
{
    zklock__unwatch_own(c);
    zklock__set_node(c, NULL);
    if (c->result == ZKLOCK_OK)
        c->result = rc;
}

/* Our node's delete was answered (or the multi that deleted it with the
 * record's word): gone, or it may still be there (a lost reply). */
static void node_deleted(zkl_contender_t *c, int rc)
{
    if (rc == ZOK || rc == ZNONODE) {
        /* "No node" after a delete whose reply was lost is that delete's
         * success; on a first attempt, the node was gone before we came. */
        if (rc == ZNONODE && !c->delete_unknown && c->result == ZKLOCK_OK)
            release_found_lost(c, ZKLOCK_LOST_DELETED); /* the session answered: alive */
        if (rc == ZOK && c->alone)
            zklock__fast_remember(c);
        zklock__set_node(c, NULL);
        c->delete_unknown = false;
    } else if (transient(rc)) {
        c->delete_unknown = true;
    } else if (!session_ending(rc)) {
        node_abandoned(c, rc);
    }
}

static void on_delete(zkl_contender_t *c, const struct zkl_answer *a)
{
    zklock__heard(c, a->rc);
    node_deleted(c, a->rc);
}

/* The previous holder's record (previous.c): what its answer means here. */
static void on_record(zkl_contender_t *c, const struct zkl_answer *a)
{
    int rc;

    switch (zklock__track_answer(c, a, &rc)) {
    case ZKL_RECORD_DELETED:
        node_deleted(c, ZOK);
        break;
    case ZKL_RECORD_NODE_GONE:
        if (c->phase == ZKL_LEAVING)
            node_deleted(c, ZNONODE);
        else
            own_node_gone(c);
        break;
    case ZKL_RECORD_REFUSED:
        if (ZKL_WANTS(c))
            failed(c, rc); /* the record is not ours to read or write */
        break;
    case ZKL_RECORD_NOTHING:
        if (a->kind == ZKL_REQ_RECORD_END && transient(rc))
            c->delete_unknown = true; /* it may have deleted our node */
        break;
    }
}

static void on_probe(zkl_contender_t *c, const struct zkl_answer *a)
{
    if (!transient(a->rc) && !session_ending(a->rc))
        confirm_loss(c, c->loss_fallback); /* the session lives */
    /* else: retried after the reconnection, or the session's end says why */
}

/* The node that blocks us went (the watch is over). Had our own node gone
 * while its watch was set, the server would have told us first; a node
 * younger than ZKL_OWN_WATCH_DELAY_MS has no such watch yet (design.md,
 * "Operator deletes a node"). */
static void predecessor_gone(zkl_contender_t *c)
{
    session_of(c)->stats.wakeups++;
    if (c->sole_blocker)
        zklock__become_holder(c);
    else
        c->need_list = true;
}

static void on_watch(zkl_contender_t *c, const struct zkl_answer *a)
{
    c->watch_pending = false;
    if (a->rc == ZOK) {
        zklock__watch_set(c);
        if (!c->watch_wanted)
            zklock__forget_blocker(c); /* we moved on while it was being set */
        return;
    }
    if (c->watch_wanted && c->phase == ZKL_QUEUING) {
        if (a->rc == ZNONODE)
            predecessor_gone(c); /* went before the watch was set */
        else if (transient(a->rc))
            c->need_list = true;
        else
            failed(c, a->rc);
    }
    zklock__watch_over(c);
}

/* Our own node's loss: a holder's hold is over (on_lost, once a probe says
 * why); a waiter's place is gone: it queues again. */
static void own_node_gone(zkl_contender_t *c)
{
    if (c->phase == ZKL_HELD)
        zklock__lose_unconfirmed(c, ZKLOCK_LOST_DELETED);
    else if (ZKL_WANTS(c) && c->node)
        zklock__requeue_own(c);
}

static void on_own_watch(zkl_contender_t *c, const struct zkl_answer *a)
{
    c->own_pending = false;
    if (a->rc == ZOK) {
        zklock__own_watch_set(c);
        zklock__revoke_read(c, a->value, a->len, a->stat); /* a request to let go? */
    }
    else if (a->rc == ZNONODE)
        own_node_gone(c); /* deleted before we could watch it */
}

/* A transient answer: retrying at once would spin until the client notices;
 * wait for the resume that follows the reconnection (or, for the rarer
 * answers no session event follows, such as "throttled", the session
 * thread's retry timer). */
static void back_off(zkl_contender_t *c)
{
    c->backoff = true;
    zklock__retry_later(session_of(c));
}

static void read_answer(zkl_contender_t *c)
{
    const struct zkl_answer *a = c->answer;

    if (!a)
        return;
    if (transient(a->rc))
        back_off(c);
    switch (a->kind) {
    case ZKL_REQ_PARENT:
    case ZKL_REQ_TOP_PARENT:
        on_parent(c, a->rc, a->kind == ZKL_REQ_TOP_PARENT);
        break;
    case ZKL_REQ_CREATE:
        on_create(c, a);
        break;
    case ZKL_REQ_LIST:
        on_list(c, a);
        break;
    case ZKL_REQ_SYNC:
        break; /* the listing that follows does the work */
    case ZKL_REQ_OWNER:
        on_owner(c, a);
        break;
    case ZKL_REQ_DELETE:
        on_delete(c, a);
        break;
    case ZKL_REQ_PROBE:
        on_probe(c, a);
        break;
    case ZKL_REQ_WATCH:
        on_watch(c, a);
        break;
    case ZKL_REQ_OWN_WATCH:
        on_own_watch(c, a);
        break;
    case ZKL_REQ_RECORD_READ:
    case ZKL_REQ_RECORD_WRITE:
    case ZKL_REQ_RECORD_REFRESH:
    case ZKL_REQ_RECORD_END:
        on_record(c, a);
        break;
    default:
        c->l->recipe->answer(c, a); /* a recipe's own request */
        break;
    }
    c->answer = NULL; /* the completion's: gone with it */
}

/* A request failed: retry when the connection is back, or give up. */
static void failed(zkl_contender_t *c, int rc)
{
    if (transient(rc)) {
        if (c->try_once && ZKL_WANTS(c))
            zklock__give_up(c, rc); /* try-once answers at once */
        return;
    }
    if (!session_ending(rc) && ZKL_WANTS(c))
        zklock__give_up(c, rc);
}

void zklock__failed(zkl_contender_t *c, int rc)
{
    failed(c, rc);
}

/* A request the client would not even queue. */
static void read_refusal(zkl_contender_t *c)
{
    int rc = c->refused;

    if (!rc)
        return;
    c->refused = 0;
    if (transient(rc) || session_ending(rc)) {
        /* the session event that explains it will follow; until then, or
         * until the retry timer, send nothing */
        back_off(c);
    } else if (c->phase == ZKL_LOST) {
        confirm_loss(c, c->loss_fallback); /* cannot ask: say what we saw */
    } else if (c->phase == ZKL_LEAVING) {
        node_abandoned(c, rc); /* we cannot delete it: it goes with the session */
        c->create_unknown = false;
    } else {
        zklock__give_up(c, rc);
    }
}

/* ---- what an event means ---------------------------------------------------------------- */

static void read_watch_events(zkl_contender_t *c)
{
    if (c->pred_fired) {
        /* The node we watch went, or changed (watch it again); an event of a
         * watch we no longer care about makes us look again once the chain
         * in flight is done. */
        c->pred_fired = false;
        if (c->pred_relevant && c->watch_wanted && c->phase == ZKL_QUEUING && !c->busy) {
            if (c->pred_type == ZOO_CHANGED_EVENT) {
                zklock__watch_again(c); /* only its data changed */
            } else {
                zklock__watch_over(c);
                predecessor_gone(c);
            }
        } else if (c->pred_watches == 0 && !c->watch_pending) {
            bool wanted = c->watch_wanted && c->phase == ZKL_QUEUING;
            zklock__watch_over(c);
            c->need_list |= wanted;
        }
    }
    if (c->own_deleted) {
        c->own_deleted = false;
        own_node_gone(c); /* someone deleted our node */
    }
    if (c->queue_changed) {
        /* the leases changed: look again (the recipe, if c has no node) */
        c->queue_changed = false;
        if (c->phase == ZKL_QUEUING) {
            session_of(c)->stats.wakeups++;
            c->need_list = true;
        }
    }
}

/* The session ended for good under c (closed, or no session follows), its
 * hold or its acquisition with it: what its recipe started for it ends too
 * (a multi-lock's members, a semaphore's acquisition mutex are let go, and
 * disowned as they finish). Without it, its subs would keep c, its handle
 * and the session from ever being freed. */
static void session_ended_for_good(zkl_contender_t *c)
{
    if (c->l->recipe->ending)
        c->l->recipe->ending(c);
}

/* What the end of the session means for c, by its phase. reason:
 * ZKLOCK_LOST_EXPIRED, ZKLOCK_ECLOSED (zklock_session_close) or ZAUTHFAILED
 * (no session will follow). */
static void read_session_end(zkl_contender_t *c)
{
    int reason = c->session_end;
    bool closing = reason == ZKLOCK_ECLOSED;

    if (!reason)
        return;
    c->session_end = 0;
    switch (c->phase) {
    case ZKL_HELD:
        if (closing && !c->waiting) {
            zklock__set_phase(c, ZKL_LOST, "the session is closed"); /* not a loss */
            zklock__set_node(c, NULL);
            session_ended_for_good(c);
        } else {
            zklock__lose(c, ZKLOCK_LOST_EXPIRED);
        }
        break;
    case ZKL_QUEUING:
    case ZKL_GRANTING:
        zklock__requeue(c); /* on the next session, if one follows */
        break;
    case ZKL_LEAVING:
        zklock__set_node(c, NULL);
        if (c->result == ZKLOCK_OK && closing)
            c->result = ZKLOCK_ECLOSED;
        else if (c->result == ZKLOCK_OK)
            release_found_lost(c, ZKLOCK_LOST_EXPIRED); /* a release, too late */
        gone(c);
        break;
    case ZKL_LOST:
        /* A vanished node whose cause a probe was asking: the end of the
         * session is the answer (when we close it, the node's deletion is
         * all we know). */
        confirm_loss(c, closing ? c->loss_fallback : ZKLOCK_LOST_EXPIRED);
        break;
    default:
        break;
    }
    if (reason != ZKLOCK_LOST_EXPIRED && c->phase == ZKL_QUEUING) {
        c->result = reason; /* no session follows to queue again on */
        gone(c);
        session_ended_for_good(c);
    }
}

/* The lease ran out (lease.c): the hold ends, reported (unsure), and its
 * node is deleted as soon as the session is heard from again (it may
 * live). Late by more than the margin, this process did not run meanwhile:
 * a probe then finds the real reason (most likely the session expired). */
static void read_lease_run_out(zkl_contender_t *c)
{
    int run_out = c->lease_run_out;

    if (!run_out)
        return;
    c->lease_run_out = 0;
    if (c->phase != ZKL_HELD)
        return;
    zklock__stale_add(c);
    if (run_out == ZKL_LEASE_RAN_OUT_LATE)
        zklock__lose_unconfirmed(c, ZKLOCK_LOST_UNSURE);
    else
        zklock__lose(c, ZKLOCK_LOST_UNSURE);
    zklock__stale_sweep(session_of(c)); /* sent now if the connection is up after all */
}

/* A tracking hold's record was not written for a lease (previous.c): the
 * next holder's lock-delay runs from its last write, so the hold ends as
 * when the session's lease runs out. */
static void read_record_lease(zkl_contender_t *c)
{
    if (c->phase != ZKL_HELD || !zklock__track_lease_over(c))
        return;
    zklock__stale_add(c);
    zklock__lose(c, ZKLOCK_LOST_UNSURE);
    zklock__stale_sweep(session_of(c));
}

/* What became of its subs (a semaphore's acquisition lock, a multi-lock's
 * members): a failed acquisition gives c up; a lost hold is c's own
 * (a multi-lock holds by its members, whose releases it answers for too). */
static void read_subs(zkl_contender_t *c)
{
    struct zkl_subs_news news;

    if (!c->subs)
        return;
    zklock__subs_read(c, c->l->recipe->nodeless, &news);
    if (news.failed && ZKL_WANTS(c))
        zklock__give_up(c, news.rc); /* busy (try-once), refused, closed, ... */
    if (news.lost && c->phase == ZKL_HELD) {
        if (news.unconfirmed)
            zklock__lose_unconfirmed(c, news.why);
        else
            zklock__lose(c, news.why);
    }
}

/* What its owner wants: an acquisition given up (canceled, a try-once cut
 * off, a deadline), a hold released, or left as the handle or the session
 * goes. */
static void read_owner(zkl_contender_t *c)
{
    int why = zklock__call_gives_up(c);

    if (why)
        zklock__give_up(c, why);
    if (c->releasing && c->phase == ZKL_HELD)
        zklock__give_up(c, ZKLOCK_OK);
    if (c->leave_wanted) {
        c->leave_wanted = false;
        if (ZKL_WANTS(c) || c->phase == ZKL_HELD)
            zklock__give_up(c, c->leave_rc);
    }
}

/* Its maximum hold passed (opts.max_hold_ms): the hold ends for its owner
 * now (on_lost, ZKLOCK_LOST_MAX_HOLD; a release answers ZKLOCK_ELOST), and
 * its node goes as the lease's run-out's does: deleted now if connected,
 * else on the resume, by a record of the session's that outlives c.
 * A release already under way, or a hold already over, wins. */
static void read_max_hold(zkl_contender_t *c)
{
    if (!c->max_hold_over)
        return;
    c->max_hold_over = false;
    if (c->phase != ZKL_HELD || c->releasing || c->waiting)
        return;
    zklock__stale_add(c);
    if (c->max_hold_late) /* stopped past it: the session may have ended first */
        zklock__lose_unconfirmed(c, ZKLOCK_LOST_MAX_HOLD);
    else
        zklock__lose(c, ZKLOCK_LOST_MAX_HOLD);
    zklock__stale_sweep(session_of(c));
}

/* ---- what to send next ------------------------------------------------------------------ */

/* Creates every level of the lock path as a container node, top down, in
 * one pipelined burst (the queue's own level persistent where the peer's
 * layout has it so: l->keep_queue); "exists already" answers are fine. A
 * refusal (ACL, an ephemeral ancestor, a missing chroot) is kept in
 * c->parent_rc: our own create then fails with "no node", and the caller
 * must hear the cause, not a retry storm. */
void zklock__send_parents(zkl_contender_t *c)
{
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
        if (!zklock__send(c, &(struct zkl_request){
                                 .kind = top ? ZKL_REQ_TOP_PARENT : ZKL_REQ_PARENT,
                                 .call = ZKL_CALL_CREATE, .path = p, .data = data,
                                 .len = data ? (int)strlen(data) : -1, .acl = l->acl,
                                 .flags = kept ? ZOO_PERSISTENT : ZOO_CONTAINER}))
            break; /* the create that follows is refused too */
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

    if (name)
        snprintf(name, len, "%s/%s%s", dir, c->prefix, tag);
    return name;
}

/* Lists the queue (watching it if c->queue_watch: a semaphore's head,
 * waiting for a lease); the answer is judged. */
bool zklock__send_list(zkl_contender_t *c)
{
    c->need_list = false;
    if (!zklock__send(c, &(struct zkl_request){
                             .kind = ZKL_REQ_LIST, .call = ZKL_CALL_CHILDREN, .path = c->l->queue,
                             .watch = c->queue_watch ? ZKL_WATCH_QUEUE : ZKL_WATCH_NONE}))
        return false;
    zklock__queue_listing_sent(c);
    return true;
}

/* The create and the listing go out back to back: ZooKeeper answers a
 * session's requests in order, so the listing already contains our node and
 * a free lock costs one round trip. A create that may take the fast path
 * needs no listing (if it turns out it may not, the listing follows), nor
 * does a heir's, which its recipe makes. */
static void send_create(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    char *name;
    bool sent;

    if (c->l->recipe->heir && c->l->recipe->heir->create(c))
        return; /* a heir's check and create in one multi (rwlock.c) */
    if (!(name = zklock__node_name(c))) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    c->parent_rc = 0; /* it speaks of this create's parents only */
    c->fast = !c->need_parents && zklock__fast_take(c);
    if (c->need_parents)
        zklock__send_parents(c);
    c->need_parents = false;
    sent = zklock__send(c, &(struct zkl_request){
                               .kind = ZKL_REQ_CREATE, .call = ZKL_CALL_CREATE2, .path = name,
                               .data = s->identity, .len = (int)strlen(s->identity),
                               .acl = c->l->acl,
                               .flags = c->l->unnumbered ? ZOO_EPHEMERAL : ZOO_EPHEMERAL_SEQUENTIAL});
    free(name);
    if (sent && !c->fast)
        zklock__send_list(c);
}

/* After a lost create reply: make the server we talk to catch up with the
 * leader, then list the children and look for our name prefix. */
static void send_recovery(zkl_contender_t *c)
{
    if (zklock__send(c, &(struct zkl_request){.kind = ZKL_REQ_SYNC, .call = ZKL_CALL_SYNC,
                                              .path = c->l->queue}))
        zklock__send_list(c);
}

/* After a lost create reply: is the node we found ours (its owner our
 * session)? */
static void send_owner_check(zkl_contender_t *c)
{
    zklock__send(c, &(struct zkl_request){.kind = ZKL_REQ_OWNER, .call = ZKL_CALL_GET,
                                          .path = c->node});
}

void zklock__send_owner_check(zkl_contender_t *c)
{
    send_owner_check(c);
}

static void send_delete(zkl_contender_t *c)
{
    zklock__send(c, &(struct zkl_request){.kind = ZKL_REQ_DELETE, .call = ZKL_CALL_DELETE,
                                          .path = c->node});
}

static void stray_deleted(int rc, const void *data)
{
    zklock_session_t *s = (zklock_session_t *)data;

    pthread_mutex_lock(&s->mu);
    zklock__request_answered(s);
    pthread_mutex_unlock(&s->mu);
}

/* A stray is one of our own nodes that a lost reply made us create twice:
 * delete it without waiting; a later listing finds it again if this fails. */
static void send_stray_delete(zklock_session_t *s, const char *dir, const char *name)
{
    char *path = zklock__child_path(dir, name);

    if (path)
        zklock__request_sent(s, s->wire->adelete(s->zh, path, -1, stray_deleted, s));
    free(path);
}

/* A hold ended without our knowing why (our node vanished, or the lease ran
 * out while the process did not run): is our session still alive (then the
 * reason is c->loss_fallback: the node was deleted, or the lease simply ran
 * out), or did it end? Any answer from the server says "alive"; an ending
 * session never answers. */
static void send_loss_probe(zkl_contender_t *c)
{
    zklock__send(c, &(struct zkl_request){.kind = ZKL_REQ_PROBE, .call = ZKL_CALL_EXISTS,
                                          .path = c->l->queue});
}

/* ---- the phases ------------------------------------------------------------------------- */

static void step_leaving(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    zklock__forget_blocker(c);
    if (c->busy)
        return; /* the chain in flight decides what is there to delete */
    if (!c->node && !c->create_unknown) {
        if (!c->subs)
            gone(c); /* else: its subs' ends mark it (they were let go) */
        return;
    }
    if (!zklock__connected(s) || c->backoff)
        return;
    if (c->create_unknown)
        send_recovery(c);
    else if (c->node && !zklock__track_end(c))
        send_delete(c); /* (a tracking contender's goes with the record's word) */
}

/* A tracking contender's turn: the record, the lock-delay (previous.c). */
static void step_record(zkl_contender_t *c)
{
    int rc = 0;

    switch (zklock__track_grant(c, &rc)) {
    case ZKL_GRANT_HOLD:
        zklock__become_holder(c);
        break;
    case ZKL_GRANT_GIVE_UP:
        zklock__give_up(c, rc);
        break;
    case ZKL_GRANT_WAIT:
        break;
    }
}

/* Its turn came on a lease that ran out, or is old: once the session is
 * heard from (a heartbeat's answer marks c), it never expired, its node
 * never went, and the turn stands: a heir's only if its writer still
 * holds; a multi-lock looks at its members again. */
static void step_granting(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    if (!zklock__lease_fresh(s)) {
        zklock__lease_renew(s); /* unless one is in flight */
        return;
    }
    if (c->l->recipe->nodeless)
        zklock__set_phase(c, ZKL_QUEUING, "lease proved: looks at its members again");
    else if (zklock__inherits(c) && !zklock__place_stands(c))
        zklock__requeue(c);
    else if (!zklock__track_granted(c))
        step_record(c);
    else
        zklock__become_holder(c);
}

/* Wants the lock: the next request of its chain. */
static void step_queuing(zkl_contender_t *c)
{
    if (c->busy || c->phase != ZKL_QUEUING)
        return;
    if (c->by_parent && !zklock__inherits(c) && !c->node && !c->create_unknown)
        return; /* its parent starts it, or makes its node (a heir makes its own) */
    if (c->create_unknown)
        send_recovery(c);
    else if (!c->node && c->l->recipe->may_create && !c->l->recipe->may_create(c))
        return; /* the recipe's step decides when */
    else if (!c->node)
        send_create(c);
    else if (c->need_list)
        zklock__send_list(c);
}

void zklock__step(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    /* What it learnt. */
    read_answer(c);
    read_refusal(c);
    read_watch_events(c);
    read_session_end(c);
    read_lease_run_out(c);
    read_record_lease(c);
    zklock__let_go_step(c);
    read_subs(c);
    if (c->l->recipe->step)
        c->l->recipe->step(c);
    read_owner(c);
    read_max_hold(c);
    /* What it does. */
    if (!zklock__may_send(c))
        return; /* an old handle's answers first (an adopted session's) */
    if (c->phase == ZKL_LEAVING) {
        step_leaving(c);
        return;
    }
    if (!zklock__connected(s) || c->backoff)
        return;
    if (c->phase == ZKL_LOST && c->loss_unconfirmed && !c->busy)
        send_loss_probe(c);
    if (c->phase == ZKL_HELD || ZKL_WANTS(c))
        zklock__arm_own_watch(c);
    if (c->phase == ZKL_HELD)
        zklock__track_held(c); /* a tracking holder's record, again when due */
    if (c->phase == ZKL_GRANTING)
        step_granting(c);
    step_queuing(c);
}
