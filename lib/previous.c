/* previous.c: the previous holder's fate and the lock-delay, as steps of a
 * tracking contender (zklock_opts_t.track_previous, .lock_delay_ms;
 * design.md, "The previous holder's fate").
 *
 * A tracking mutex keeps one persistent child of its lock path, the record
 * "zklock.previous" (record.c has its text). A tracking contender:
 *  - whose turn comes (GRANTING: the hold is not its owner's yet) reads the
 *    record, judges how the hold before it ended, waits out the lock-delay
 *    after an unclean or unknown end, then writes "held" by itself in one
 *    multi with a check that its node stands (or creates the record): only
 *    then does it hold for its owner. A give-up before that (a deadline
 *    inside the delay, a cancel, a release or zklock_free) leaves the
 *    record as it was;
 *  - that holds writes the record again every half session timeout (its
 *    last sign of life: the bound of its hold the next holder's delay runs
 *    from), and, in the strict lease mode, loses its hold if a whole lease
 *    passes without one answered;
 *  - that leaves deletes its node in one multi with the record's word:
 *    "released" by a hold its owner had, or its number among those that
 *    never held (so that a waiter giving up leaves no gap the next holder
 *    would read as a hold it cannot vouch for).
 * Every write carries the version read, so a lost race or a lost reply is
 * decided by reading again. All of it runs in the contender's step, with
 * s->mu held, through the engine's requests: nothing waits here.
 */
#include "previous.h"

#include "lease.h"
#include "lockstats.h"
#include "owner.h"
#include "request.h"

/* A tracking contender's timers: the lock-delay's end, the next refresh,
 * the end of the lease its record promises. */
#define TRACK_TIMERS 3

struct zkl_track {
    zkl_contender_t *c;          /* whose */
    struct zkl_record_view view; /* the record as last read or written */
    bool fresh;          /* view is current enough to write against */
    bool write_unknown;  /* a "held" write's reply was lost: a read decides */
    bool broken;         /* the record is not ours to read or write: a plain delete */
    /* the grant */
    bool judged;
    int how;             /* ZKLOCK_PREV_*, once judged */
    int64_t token;       /* ... the previous holder's, where the record names it */
    bool written;        /* our "held" is written ... */
    bool owned;          /* ... and the hold became the owner's: its end says "released" */
    struct zkl_record_view before; /* the record our "held" replaced (a give-up
                              that came as it landed puts it back) */
    struct timespec judged_at, delay_end;
    struct zkl_timer delay_timer;
    /* the hold */
    bool refresh_due;
    struct timespec written_at; /* send time of the last "held" sent */
    struct timespec refreshed; /* ... of the last one known to have landed */
    struct zkl_timer refresh_timer, lease_timer;
    /* our node's creation, on the server's clock and ours */
    int64_t ctime_ms;
    struct timespec ctime_local;
    int32_t former[ZKL_FORMER_MAX]; /* our earlier nodes that never held */
    int nformer;
    /* the multi in flight */
    zoo_op_result_t results[2];
    struct Stat stat;
};

/* ---- lifetime ------------------------------------------------------------------------ */

#define TRACK_OF(timer, field) \
    ((struct zkl_track *)((char *)(timer) - offsetof(struct zkl_track, field)))

/* The record's timers, for their doors (doors.c): the fact recorded, the
 * contender marked (its step reads the time). */
void zklock__track_delay_timer(struct zkl_timer *timer)
{
    zklock__mark(TRACK_OF(timer, delay_timer)->c);
}

void zklock__track_refresh_timer(struct zkl_timer *timer)
{
    struct zkl_track *t = TRACK_OF(timer, refresh_timer);

    t->refresh_due = true;
    zklock__mark(t->c);
}

void zklock__track_lease_timer(struct zkl_timer *timer)
{
    zklock__mark(TRACK_OF(timer, lease_timer)->c); /* its step reads the clock */
}

bool zklock__track_new(zkl_contender_t *c)
{
    struct zkl_track *t;

    if (!c->l->tracks)
        return true;
    if (!(t = calloc(1, sizeof *t)))
        return false;
    if (zklock__timers_reserve(session_of(c), TRACK_TIMERS) != 0) {
        free(t);
        return false;
    }
    t->c = c;
    t->delay_timer.fire = session_of(c)->doors->track_delay_over;
    t->refresh_timer.fire = session_of(c)->doors->track_refresh_due;
    t->lease_timer.fire = session_of(c)->doors->track_lease_over;
    c->track = t;
    return true;
}

void zklock__track_free(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    struct zkl_track *t = c->track;

    if (!t)
        return;
    zklock__timer_cancel(s, &t->delay_timer);
    zklock__timer_cancel(s, &t->refresh_timer);
    zklock__timer_cancel(s, &t->lease_timer);
    zklock__timers_unreserve(s, TRACK_TIMERS);
    free(t);
    c->track = NULL;
}

/* Has half a session timeout passed since the "held" the record's lease
 * runs from was sent? (It landed long before the turn could be granted: its
 * reply was lost and found by a read after a reconnection, or the grant
 * waited for the session's lease.) Then it is written again first, so that
 * the hold does not begin on a lease about to run out. */
static bool written_long_ago(const zkl_contender_t *c)
{
    struct timespec due;
    int T = session_of(c)->negotiated_ms;

    if (T <= 0)
        return false;
    zklock__later(&due, &c->track->refreshed, T / 2);
    return zklock__passed(session_of(c), &due);
}

bool zklock__track_granted(const zkl_contender_t *c)
{
    return !c->track || (c->track->written && !written_long_ago(c));
}

void zklock__track_hold_begins(zkl_contender_t *c)
{
    if (!c->track)
        return;
    c->track->owned = true;
    c->l->prev.waited_ms = c->l->prev.delay_ms;
}

char *zklock__record_path(const zklock_t *l)
{
    return zklock__child_path(l->path, ZKL_RECORD_NAME);
}

void zklock__track_created(zkl_contender_t *c, const struct Stat *st)
{
    if (!c->track)
        return;
    c->track->ctime_ms = st->ctime;
    zklock__now(session_of(c), &c->track->ctime_local);
}

void zklock__track_node_lost(zkl_contender_t *c)
{
    struct zkl_track *t = c->track;
    zklock_session_t *s = session_of(c);

    if (!t)
        return;
    if (!t->written && c->node && t->nformer < ZKL_FORMER_MAX)
        t->former[t->nformer++] = c->seq; /* (a full list leaves a gap: UNKNOWN) */
    /* A new node, a new turn: read, judged and written again. */
    t->judged = t->fresh = t->written = t->owned = t->write_unknown = t->refresh_due = false;
    zklock__timer_cancel(s, &t->delay_timer);
    zklock__timer_cancel(s, &t->refresh_timer);
    zklock__timer_cancel(s, &t->lease_timer);
}

/* ---- requests ------------------------------------------------------------------------ */

static void send_read(zkl_contender_t *c)
{
    char *path = zklock__record_path(c->l);

    if (!path)
        return; /* no memory: the next step tries again */
    zklock__send(c, &(struct zkl_request){.kind = ZKL_REQ_RECORD_READ, .call = ZKL_CALL_GET,
                                          .path = path});
    free(path);
}

/* The record op of a multi: set with the version read, or create. */
static void record_op(zkl_contender_t *c, zoo_op_t *op, const char *path, const char *text,
                      int len)
{
    struct zkl_track *t = c->track;

    if (t->view.present)
        zoo_set_op_init(op, path, text, len, t->view.version, &t->stat);
    else
        zoo_create_op_init(op, path, text, len, c->l->acl, ZOO_PERSISTENT, NULL, 0);
}

/* Sends {op on our node, the record's write} as one multi of `kind`. */
static void send_multi(zkl_contender_t *c, int kind, const struct zkl_record *r)
{
    struct zkl_track *t = c->track;
    char *path = zklock__record_path(c->l), *text;
    zoo_op_t ops[2];
    int len;

    if (!path)
        return;
    if ((text = zklock__record_format(r, session_of(c)->identity, &len))) {
        if (kind == ZKL_REQ_RECORD_END)
            zoo_delete_op_init(&ops[0], c->node, -1);
        else
            zoo_check_op_init(&ops[0], c->node, -1); /* only a holder writes "held" */
        record_op(c, &ops[1], path, text, len);
        memset(t->results, 0, sizeof t->results); /* read even if it never went out */
        zklock__send(c, &(struct zkl_request){.kind = kind, .call = ZKL_CALL_MULTI, .nops = 2,
                                              .ops = ops, .results = t->results});
        t->view.rec = *r; /* what we write; a failure reads it again */
        if (kind != ZKL_REQ_RECORD_END)
            t->written_at = c->sent_at; /* no later than this write */
    }
    free(text); /* serialised by zoo_amulti */
    free(path);
}

static int32_t timeout_of(const zkl_contender_t *c)
{
    return (int32_t)session_of(c)->negotiated_ms;
}

/* ---- the grant --------------------------------------------------------------------- */

/* What c's turn knows of its place in the queue, for the judge. */
static struct zkl_hold_view hold_view(const zkl_contender_t *c)
{
    return (struct zkl_hold_view){.was_blocked = c->was_blocked, .blocker_seq = c->blocker_seq,
                                  .seq = c->seq, .czxid = c->czxid, .nformer = c->track->nformer,
                                  .former = c->track->former};
}

/* The delay's end moves to `end_ms` (server time) + delay, if later. Our
 * node's creation is the latest moment of the server's clock we know, and
 * our clock has run since (no earlier than the server's stamp: the wait is
 * no shorter). Without that stamp, or an end: from our turn. */
static void delay_after(struct zkl_track *t, int64_t end_ms, int delay)
{
    struct timespec at;

    if (end_ms >= 0 && t->ctime_ms > 0)
        zklock__later(&at, &t->ctime_local, end_ms + delay - t->ctime_ms);
    else
        zklock__later(&at, &t->judged_at, delay);
    if (zklock__earlier(&t->delay_end, &at))
        t->delay_end = at;
}

static void judge(zkl_contender_t *c)
{
    struct zkl_track *t = c->track;
    const zklock_t *l = c->l;
    struct zkl_hold_view me = hold_view(c);
    int how = zklock__previous_judge(&t->view, &me);
    int64_t unclean_end = zklock__record_end_ms(&t->view); /* -1 unless "held" */
    int delay = l->opts.lock_delay_ms;

    t->judged = true;
    zklock__now(session_of(c), &t->judged_at);
    t->delay_end = t->judged_at; /* after CLEAN, NONE: nothing to wait for */
    if (delay > 0 && how == ZKLOCK_PREV_UNCLEAN)
        delay_after(t, unclean_end, delay); /* the dead holder's lease */
    if (delay > 0 && how == ZKLOCK_PREV_UNKNOWN) {
        /* Someone may have held and ended just before our turn, or by the
         * time a turn before us saw the nodes nobody accounts for gone (its
         * give-up wrote it); and the record's holder may have been the
         * last: if it died holding, no less than after UNCLEAN. */
        delay_after(t, zklock__unknown_gone_ms(&t->view, &me), delay);
        if (unclean_end >= 0)
            delay_after(t, unclean_end, delay);
    }
    t->how = how;
    t->token = how == ZKLOCK_PREV_CLEAN || how == ZKLOCK_PREV_UNCLEAN ? t->view.rec.token : 0;
    c->l->prev = (zklock_previous_info_t){
        .how = how, .token = t->token,
        .delay_ms = zklock__ms_between(&t->judged_at, &t->delay_end)};
    c->l->prev_known = true;
}

/* May the owner's acquisition wait until the delay's end? */
static bool may_wait_until(const zkl_contender_t *c, const struct timespec *end)
{
    if (c->try_once)
        return false;
    return !c->has_deadline || !zklock__earlier(&c->deadline_timer.at, end);
}

enum zkl_grant_step zklock__track_grant(zkl_contender_t *c, int *rc)
{
    struct zkl_track *t = c->track;
    zklock_session_t *s = session_of(c);

    if (t->written && !written_long_ago(c))
        return ZKL_GRANT_HOLD;
    if (c->busy)
        return ZKL_GRANT_WAIT; /* its answer steps it again */
    if (!t->fresh) {
        send_read(c);
        return ZKL_GRANT_WAIT;
    }
    if (!t->judged)
        judge(c);
    if (!t->written && !zklock__passed(s, &t->delay_end)) {
        if (!may_wait_until(c, &t->delay_end)) {
            *rc = ZKLOCK_ETIMEDOUT; /* holding on past its deadline is not its wish */
            c->l->prev.left_ms = zklock__ms_between(&t->judged_at, &t->delay_end);
            return ZKL_GRANT_GIVE_UP;
        }
        if (!zklock__timer_armed(&t->delay_timer))
            zklock__timer_arm(s, &t->delay_timer, &t->delay_end);
        return ZKL_GRANT_WAIT;
    }
    {
        struct zkl_record r = t->view.parsed ? t->view.rec : (struct zkl_record){0};

        zklock__record_hold(&r, false, c->czxid, c->seq, timeout_of(c));
        if (!t->written)
            t->before = t->view; /* (else the view is our own "held") */
        send_multi(c, ZKL_REQ_RECORD_WRITE, &r);
    }
    return ZKL_GRANT_WAIT;
}

/* ---- the hold ----------------------------------------------------------------------- */

static bool keeps_record_lease(const zklock_session_t *s)
{
    return s->opts.lease != ZKLOCK_LEASE_SESSION;
}

/* A "held" of ours landed: the record vouches for us until a session
 * timeout after it was sent (its mtime is no earlier). */
static void refreshed(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    struct zkl_track *t = c->track;
    int T = s->negotiated_ms;

    t->refreshed = t->written_at; /* not a later read's: the write's own */
    t->refresh_due = false;
    zklock__timer_cancel(s, &t->refresh_timer);
    zklock__timer_cancel(s, &t->lease_timer);
    if (T <= 0)
        return;
    {
        struct timespec at;

        zklock__later(&at, &t->refreshed, T / 2);
        zklock__timer_arm(s, &t->refresh_timer, &at);
        if (keeps_record_lease(s)) {
            zklock__later(&at, &t->refreshed, T - T / ZKL_LEASE_MARGIN_DIVISOR);
            zklock__timer_arm(s, &t->lease_timer, &at);
        }
    }
}

void zklock__track_held(zkl_contender_t *c)
{
    struct zkl_track *t = c->track;
    struct zkl_record r;

    if (!t || t->broken || !t->refresh_due || c->busy || c->phase != ZKL_HELD)
        return; /* (broken: its record's lease ends the hold) */
    if (!t->fresh) {
        send_read(c);
        return;
    }
    r = t->view.rec;
    zklock__record_hold(&r, false, c->czxid, c->seq, timeout_of(c));
    t->refresh_due = false; /* again if it fails */
    send_multi(c, ZKL_REQ_RECORD_REFRESH, &r);
}

/* The end of the lease c's last write of the record gives its hold (the
 * bound the record promises the next holder); false: none bounds it. */
static bool record_lease_end(const zkl_contender_t *c, struct timespec *end)
{
    const struct zkl_track *t = c->track;
    const zklock_session_t *s = session_of(c);

    if (!t || !t->written || !keeps_record_lease(s) || s->negotiated_ms <= 0)
        return false;
    zklock__later(end, &t->refreshed, s->negotiated_ms - s->negotiated_ms / ZKL_LEASE_MARGIN_DIVISOR);
    return true;
}

void zklock__track_until(const zkl_contender_t *c, struct timespec *until)
{
    struct timespec end;

    if (record_lease_end(c, &end) && zklock__earlier(&end, until))
        *until = end;
}

void zklock__track_leases_check(zklock_session_t *s)
{
    struct timespec end;

    for (zkl_contender_t *c = s->contenders; c; c = c->sess_next)
        if (c->phase == ZKL_HELD && record_lease_end(c, &end) && zklock__passed(s, &end))
            zklock__mark(c); /* its step ends the hold (read_record_lease) */
}

bool zklock__track_lease_over(zkl_contender_t *c)
{
    struct zkl_track *t = c->track;
    zklock_session_t *s = session_of(c);
    struct timespec end;

    /* By the clock, not by a flag the timer set: a flag set while the turn
     * waited (its "held" old, written again since) ended the new hold. And
     * asked by a call too (zklock__track_leases_check): the timer may not
     * have run yet (a host that slept). */
    if (!record_lease_end(c, &end) || !zklock__passed(s, &end))
        return false;
    zklock__timer_cancel(s, &t->lease_timer);
    zklock__timer_cancel(s, &t->refresh_timer);
    return true;
}

/* ---- the end ------------------------------------------------------------------------ */

/* The record c leaves, having never held for its owner: what it says now
 * with c's number among those that never held; false: a plain delete. */
static bool never_held(zkl_contender_t *c, struct zkl_record *r)
{
    struct zkl_track *t = c->track;
    const struct zkl_record_view *judged = t->written ? &t->before : &t->view;
    struct zkl_hold_view me = hold_view(c);

    if (t->view.present && !t->view.parsed)
        return false; /* a later version's record: not ours to rewrite */
    *r = t->view.parsed ? t->view.rec : (struct zkl_record){.state = ZKL_REC_NONE, .seq = -1};
    if (t->written) {
        /* Our "held" landed as we gave up (a deadline, a cancel, a free
         * while it was on its way): the hold was never the owner's, so the
         * record goes back to the hold before ours; left saying "released"
         * in our name, it read CLEAN after an unclean end. Should that not
         * be possible, it keeps saying "held": UNCLEAN, the safe side. */
        if ((t->before.present && !t->before.parsed) ||
            !zklock__record_undo(r, t->before.present ? &t->before.rec : NULL))
            return false;
    }
    /* (false: the list is full: a gap, read as UNKNOWN) */
    if (!zklock__record_give_up(r, judged->mtime, c->seq, t->former, t->nformer))
        return false;
    /* A turn that read UNKNOWN says when it saw the nodes before it gone, so
     * that the next turn's delay runs from then, not from its own: a
     * try-once inside the delay would otherwise never hold again. */
    if (t->judged && t->how == ZKLOCK_PREV_UNKNOWN)
        zklock__record_saw_gone(r, judged, &me);
    return true;
}

bool zklock__track_end(zkl_contender_t *c)
{
    struct zkl_track *t = c->track;
    struct zkl_record r;

    if (!t || t->broken || !c->node)
        return false;
    if (!t->fresh) {
        send_read(c); /* what is there now: a give-up adds to it, a write needs its version */
        return true;
    }
    if (t->owned) {
        r = t->view.rec;
        zklock__record_hold(&r, true, c->czxid, c->seq, timeout_of(c));
    } else if (!never_held(c, &r)) {
        return false;
    }
    send_multi(c, ZKL_REQ_RECORD_END, &r);
    return true;
}

/* ---- answers ------------------------------------------------------------------------ */

static void on_read(zkl_contender_t *c, const struct zkl_answer *a)
{
    struct zkl_track *t = c->track;
    struct zkl_record_view *v = &t->view;

    if (c->phase == ZKL_QUEUING)
        return; /* read for a turn that is over (its node went): no view for
                   the next, which reads again (the model's BROKEN_STALE_READ) */
    memset(v, 0, sizeof *v);
    v->present = a->rc == ZOK;
    if (v->present) {
        v->parsed = zklock__record_parse(a->value, a->len, &v->rec) == 0;
        v->version = a->stat->version;
        v->czxid = a->stat->czxid;
        v->mtime = a->stat->mtime;
    }
    t->fresh = true;
    if (t->write_unknown && v->parsed && v->rec.state == ZKL_REC_HELD && v->rec.token == c->czxid) {
        t->written = true; /* our "held" landed; its reply was lost */
        refreshed(c);
    }
    t->write_unknown = false;
}

/* The record op of a multi failed because the record changed since we
 * read it (someone else's give-up, an operator): read it again. */
static bool record_changed(int err)
{
    return err == ZBADVERSION || err == ZNODEEXISTS || err == ZNONODE;
}

/* A write of ours landed: the version it made, and for "held" (a grant or
 * a refresh) the lease it gives. */
static void on_written(zkl_contender_t *c, int kind)
{
    struct zkl_track *t = c->track;

    t->view.version = t->view.present ? t->stat.version : 0; /* a set, or a create */
    t->view.present = t->view.parsed = true;
    if (kind == ZKL_REQ_RECORD_END)
        return;
    t->written = true;
    refreshed(c);
}

enum zkl_record_news zklock__track_answer(zkl_contender_t *c, const struct zkl_answer *a, int *rc)
{
    struct zkl_track *t = c->track;

    *rc = a->rc;
    if (a->kind == ZKL_REQ_RECORD_READ) {
        if (a->rc == ZOK || a->rc == ZNONODE) {
            on_read(c, a);
        } else if (!transient(a->rc) && !session_ending(a->rc)) {
            t->broken = true; /* e.g. ZNOAUTH: read again, refused again, for ever */
            return ZKL_RECORD_REFUSED;
        }
        return ZKL_RECORD_NOTHING;
    }
    if (zklock__lease_proves(a->rc))
        zklock__lease_heard(session_of(c), &c->sent_at); /* a write: the leader answered */
    if (a->rc == ZOK) {
        on_written(c, a->kind);
        return a->kind == ZKL_REQ_RECORD_END ? ZKL_RECORD_DELETED : ZKL_RECORD_NOTHING;
    }
    t->fresh = false; /* whatever went wrong, read again before the next write */
    if (transient(a->rc) || session_ending(a->rc)) {
        t->write_unknown = a->kind == ZKL_REQ_RECORD_WRITE;
        t->refresh_due |= a->kind == ZKL_REQ_RECORD_REFRESH;
        return ZKL_RECORD_NOTHING; /* the step backs off; a read decides */
    }
    if (t->results[0].err == ZNONODE)
        return ZKL_RECORD_NODE_GONE;
    if (record_changed(t->results[1].err)) {
        t->refresh_due |= a->kind == ZKL_REQ_RECORD_REFRESH;
        return ZKL_RECORD_NOTHING;
    }
    *rc = t->results[1].err != ZOK ? t->results[1].err : a->rc;
    t->broken = true; /* e.g. ZNOAUTH: its ends are plain deletes */
    return ZKL_RECORD_REFUSED;
}

/* ---- what the owner asks ------------------------------------------------------------- */

int zklock_previous(const zklock_t *l, int *how, int64_t *token)
{
    const zkl_contender_t *c;
    int rc = ZKLOCK_ENOTHELD;

    if (!l || !how || !l->tracks)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    c = zklock__owner_contender(l);
    if (c && c->phase == ZKL_HELD && c->track && c->track->written) {
        *how = c->track->how;
        if (token)
            *token = c->track->token;
        rc = ZKLOCK_OK;
    } else if (c && c->phase == ZKL_LOST) {
        rc = ZKLOCK_ELOST;
    }
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}

/* Every size zklock_previous_info_t has had, oldest first. */
static const size_t info_sizes[] = {sizeof(zklock_previous_info_t)};

int zklock_previous_info(const zklock_t *l, zklock_previous_info_t *out, size_t size)
{
    size_t known = size < sizeof *out ? size : sizeof *out;
    int rc = ZKLOCK_ENOTHELD;

    if (!l || !out || !l->tracks ||
        !zklock__stats_size_ok(size, info_sizes, sizeof info_sizes / sizeof info_sizes[0]))
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    if (l->prev_known) {
        memcpy(out, &l->prev, known);
        memset((char *)out + known, 0, size - known);
        rc = ZKLOCK_OK;
    }
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}
