/*
 * follow.c: following an election's leader without a thread
 * (zklock_leader_follow). The follower tells fn who leads now, then at
 * every change: a new leader, a new value proclaimed, nobody leading.
 *
 * It is built on the watch records of zklock_queue_wait (inspect.h), told
 * of their answers and events instead of waiting for them, and it watches
 * only what can change its answer, so that a queue's churn behind its
 * leader wakes no follower:
 *  - somebody leads: the leader's node's data (a get with a watch: its
 *    event says the value changed, or the node went);
 *  - nobody leads: the lock path's children (a listing with a watch), or,
 *    if the path does not exist, its creation (an exists with a watch).
 * A look is one listing, unwatched while a leader is expected, then a get of
 * the first node's data: one request in flight at a time. Its answer is
 * told through the session's callback queue like every other callback
 * (ZKLOCK_DISPATCH_POLL included), and only if it differs from the last one
 * told.
 *
 * The session's end takes the watches with it: the follower looks again on
 * the next session (a layer: the session knows nothing of followers). A
 * refusal (an ACL, say) is told once as it starts (value NULL, token the
 * code) and the follower looks again every second; its end is a change too.
 */
#include "inspect.h"

#include <stdlib.h>
#include <string.h>

#define ZKL_FOLLOW_RETRY_MS 1000 /* after a refusal, or a failed allocation */

struct zklock_follow {
    zklock_session_t *s;
    char *path;
    zklock_leader_fn fn;
    void *ctx;
    int refs;            /* the user's, and one per report queued */
    int in_callback;     /* reports running fn */
    bool stopped;        /* zklock_follow_stop() has begun */
    bool closed;         /* its session closed: nothing more is told */
    struct zkl_qwatch *req;   /* the request of the look in progress */
    struct zkl_qwatch *watch; /* the one watch that can change the answer */
    bool again;          /* something changed while req was out: look again */
    bool owed;           /* a look is owed, for when the session is connected */
    bool expect_leader;  /* the last look found one: list without a watch */
    /* What fn was last told (told_value: a copy, NULL for nobody). */
    bool told;
    char *told_value;
    size_t told_len;
    int64_t told_token;
    struct zkl_timer retry;
    zklock_follow_t *next; /* in s->follows */
};

static void look(zklock_follow_t *f);
static void failed(zklock_follow_t *f, int rc);

/* ---- what fn is told ------------------------------------------------------------------------ */

struct report {
    struct zkl_callback cb;
    zklock_follow_t *f;
    char *value; /* NUL-terminated; NULL: nobody leads, or the error in token */
    size_t len;
    int64_t token;
    bool ran;
};

static void follow_unref(zklock_follow_t *f)
{
    if (--f->refs > 0)
        return;
    free(f->told_value);
    free(f->path);
    free(f);
}

static bool report_begin(struct zkl_callback *cb)
{
    struct report *r = (struct report *)cb;

    if (r->f->stopped || r->f->closed)
        return false; /* fn is never called once stopped, nor once closed */
    r->ran = true;
    r->f->in_callback++;
    return true;
}

static void report_run(struct zkl_callback *cb)
{
    struct report *r = (struct report *)cb;
    zklock_follow_t *f = r->f;

    f->fn(f->path, r->value, r->len, r->token, f->ctx);
}

static void report_end(struct zkl_callback *cb)
{
    struct report *r = (struct report *)cb;
    zklock_follow_t *f = r->f;

    if (r->ran) {
        f->in_callback--;
        pthread_cond_broadcast(&f->s->cond); /* zklock_follow_stop waits for it */
    }
    free(r->value);
    free(r);
    follow_unref(f);
}

static const struct zkl_callback_ops report_ops = {report_begin, report_run, report_end};

static bool same_as_told(const zklock_follow_t *f, const char *value, size_t len,
                         int64_t token)
{
    if (!f->told || token != f->told_token || (value == NULL) != (f->told_value == NULL))
        return false;
    return !value || (len == f->told_len && memcmp(value, f->told_value, len) == 0);
}

static char *copy_value(const char *value, size_t len)
{
    char *v = malloc(len + 1);

    if (v) {
        memcpy(v, value, len);
        v[len] = '\0';
    }
    return v;
}

/* Queues fn's call with what the follower sees now, unless it was the last
 * thing told. Out of memory: a look again, later, tells it. */
static void tell(zklock_follow_t *f, const char *value, size_t len, int64_t token)
{
    struct report *r;
    char *kept = NULL;

    if (f->closed || f->stopped || same_as_told(f, value, len, token))
        return;
    r = calloc(1, sizeof *r);
    if (r && value && (!(r->value = copy_value(value, len)) || !(kept = copy_value(value, len)))) {
        free(r->value);
        free(r);
        r = NULL;
    }
    if (!r) {
        zklock__timer_arm_in(f->s, &f->retry, ZKL_FOLLOW_RETRY_MS);
        return;
    }
    r->cb.ops = &report_ops;
    r->cb.owner = f;
    r->f = f;
    r->len = len;
    r->token = token;
    f->refs++;
    free(f->told_value);
    f->told_value = kept;
    f->told_len = len;
    f->told_token = token;
    f->told = true;
    zklock__dispatch_push(f->s, &r->cb);
}

/* ---- the watches ------------------------------------------------------------------------------ */

static const struct zkl_qwatch_ops follow_ops;

/* Sends a request of f's look (for child, or the path itself): once
 * connected (else a look is owed), never once stopped or closing. One the
 * client refuses fails as its answer would. */
static void ask(zklock_follow_t *f, const char *child, enum zkl_qrequest request, bool watch)
{
    struct zkl_qwatch *w;
    int rc;

    if (f->stopped || f->closed || f->s->closing)
        return;
    if (!zklock__connected(f->s)) {
        f->owed = true; /* the session's resumption looks */
        return;
    }
    w = zklock__qwatch_new(f->s, f->path, child);
    rc = w ? zklock__qwatch_send(w, request, watch) : ZKLOCK_ENOMEM;
    if (rc != ZOK) {
        if (w)
            zklock__qwatch_retire(w);
        failed(f, rc);
        return;
    }
    w->ops = &follow_ops;
    w->owner = f;
    f->req = w;
}

/* w is now the watch that can change the answer; the one before is not. */
static void watch_with(zklock_follow_t *f, struct zkl_qwatch *w)
{
    if (f->watch && f->watch != w)
        zklock__qwatch_retire(f->watch);
    f->watch = w;
}

static void forget_watches(zklock_follow_t *f)
{
    if (f->req)
        zklock__qwatch_retire(f->req);
    if (f->watch)
        zklock__qwatch_retire(f->watch);
    f->req = f->watch = NULL;
    f->again = false;
}

/* A request failed (rc): a connection that comes back, or a session that
 * ends, brings a look; a refusal is told, and tried again later. */
static void failed(zklock_follow_t *f, int rc)
{
    f->owed = true;
    if (transient(rc) || session_ending(rc)) {
        if (zklock__session_refusal(f->s))
            tell(f, NULL, 0, zklock__session_refusal(f->s)); /* no session follows */
        else
            zklock__timer_arm_in(f->s, &f->retry, ZKL_FOLLOW_RETRY_MS); /* no event may come */
        return;
    }
    tell(f, NULL, 0, rc);
    zklock__timer_arm_in(f->s, &f->retry, ZKL_FOLLOW_RETRY_MS);
}

/* The first lock node of a listing, in queue order (inspect.c's rule), or
 * NULL if there is none. */
static const char *first_node(const struct String_vector *names)
{
    struct zkl_entry first, e;
    bool found = false;

    for (int i = 0; i < names->count; i++) {
        struct zkl_entry pair[2];
        if (zklock__parse_name(names->data[i], &e) != 0)
            continue;
        if (found) {
            pair[0] = first;
            pair[1] = e;
            zklock__sort(pair, 2, first.seq);
            e = pair[0];
        }
        first = e;
        found = true;
    }
    return found ? first.name : NULL;
}

static void listed(zklock_follow_t *f, struct zkl_qwatch *w, int rc,
                   const struct String_vector *names)
{
    const char *leader = rc == ZOK ? first_node(names) : NULL;

    if (rc == ZNONODE) { /* no lock path: watch for its creation */
        zklock__qwatch_retire(w);
        ask(f, NULL, ZKL_Q_EXISTS, true);
    } else if (rc != ZOK) {
        zklock__qwatch_retire(w);
        failed(f, rc);
    } else if (leader) {
        zklock__qwatch_retire(w); /* its watch, if any, would be the herd's */
        ask(f, leader, ZKL_Q_GET, true);
    } else if (w->registered) { /* nobody leads, and we watch for someone */
        f->expect_leader = false;
        watch_with(f, w);
        tell(f, NULL, 0, 0);
    } else { /* nobody leads: list again, watching */
        zklock__qwatch_retire(w);
        f->expect_leader = false;
        ask(f, NULL, ZKL_Q_CHILDREN, true);
    }
}

static void existed(zklock_follow_t *f, struct zkl_qwatch *w, int rc)
{
    if (rc == ZNONODE && w->registered) { /* nobody leads; we watch for the path */
        f->expect_leader = false;
        watch_with(f, w);
        tell(f, NULL, 0, 0);
        return;
    }
    zklock__qwatch_retire(w);
    if (rc == ZOK) /* made meanwhile: list it */
        ask(f, NULL, ZKL_Q_CHILDREN, !f->expect_leader);
    else
        failed(f, rc);
}

static void got(zklock_follow_t *f, struct zkl_qwatch *w, int rc, const char *data, int len,
                const struct Stat *st)
{
    if (rc == ZOK) {
        f->expect_leader = true;
        watch_with(f, w);
        tell(f, data ? data : "", data && len > 0 ? (size_t)len : 0, st->czxid);
        return;
    }
    zklock__qwatch_retire(w);
    if (rc == ZNONODE) /* the leader went as we looked: look again */
        look(f);
    else
        failed(f, rc);
}

static void follow_answered(struct zkl_qwatch *w, int rc, const struct String_vector *names,
                            const char *data, int len, const struct Stat *st)
{
    zklock_follow_t *f = w->owner;

    if (w != f->req) { /* cannot be: one request at a time, retired when replaced */
        zklock__qwatch_retire(w);
        return;
    }
    f->req = NULL;
    if (f->again) { /* what it says is already old */
        f->again = false;
        zklock__qwatch_retire(w);
        look(f);
    } else if (w->request == ZKL_Q_CHILDREN) {
        listed(f, w, rc, names);
    } else if (w->request == ZKL_Q_EXISTS) {
        existed(f, w, rc);
    } else {
        got(f, w, rc, data, len, st);
    }
}

static void follow_fired(struct zkl_qwatch *w, int type)
{
    zklock_follow_t *f = w->owner;
    bool new_value = w == f->watch && w->request == ZKL_Q_GET && type == ZOO_CHANGED_EVENT;
    char *leader = new_value ? strdup(strrchr(w->path, '/') + 1) : NULL;

    if (w == f->watch)
        f->watch = NULL;
    zklock__qwatch_retire(w);
    if (f->req)
        f->again = true;
    else if (leader) /* the same leader proclaimed: its data again, one round trip */
        ask(f, leader, ZKL_Q_GET, true);
    else
        look(f);
    free(leader);
}

static const struct zkl_qwatch_ops follow_ops = {follow_answered, follow_fired};

/* ---- looking ------------------------------------------------------------------------------------ */

static void look(zklock_follow_t *f)
{
    if (f->req) {
        f->again = true;
        return;
    }
    if (zklock__session_refusal(f->s)) {
        tell(f, NULL, 0, zklock__session_refusal(f->s)); /* no session will come */
        return;
    }
    f->owed = false;
    zklock__timer_cancel(f->s, &f->retry);
    ask(f, NULL, ZKL_Q_CHILDREN, !f->expect_leader);
}

static void retry_due(struct zkl_timer *t, zklock_session_t *s)
{
    zklock_follow_t *f = (zklock_follow_t *)((char *)t - offsetof(zklock_follow_t, retry));

    if (!f->req)
        look(f);
}

/* ---- the calls ---------------------------------------------------------------------------------- */

int zklock_leader_follow(zklock_session_t *s, const char *path, zklock_leader_fn fn, void *ctx,
                         zklock_follow_t **out)
{
    zklock_follow_t *f;
    int rc = 0;

    if (out)
        *out = NULL;
    if (!s || !fn || !out || zklock__path_check(path) != 0)
        return ZKLOCK_EINVAL;
    f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return ZKLOCK_ENOMEM;
    }
    f->s = s;
    f->fn = fn;
    f->ctx = ctx;
    f->refs = 1;
    f->retry.fire = retry_due;
    f->expect_leader = true; /* a follower usually follows someone */
    pthread_mutex_lock(&s->mu);
    if (s->closing || s->state == ZKL_S_CLOSED)
        rc = ZKLOCK_ECLOSED;
    else
        rc = zklock__timers_reserve(s, 1);
    if (rc == 0) {
        s->nlocks++; /* the session outlives its followers, as its locks */
        f->next = s->follows;
        s->follows = f;
        look(f);
        *out = f;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc)
        follow_unref(f);
    return rc;
}

static void unlink_follow(zklock_follow_t *f)
{
    zklock_follow_t **p = &f->s->follows;

    while (*p && *p != f)
        p = &(*p)->next;
    if (*p)
        *p = f->next;
}

/* Drops f's reports still queued: they end without running. */
static void drop_reports(zklock_follow_t *f)
{
    struct zkl_callback *cb = zklock__dispatch_take(f->s, f), *next;

    for (; cb; cb = next) {
        next = cb->next;
        cb->ops->end(cb);
    }
}

void zklock_follow_stop(zklock_follow_t *f)
{
    zklock_session_t *s;
    bool free_session;

    if (!f)
        return;
    s = f->s;
    pthread_mutex_lock(&s->mu);
    f->stopped = true;
    forget_watches(f);
    zklock__timer_cancel(s, &f->retry);
    zklock__timers_unreserve(s, 1);
    unlink_follow(f);
    drop_reports(f);
    /* A call of fn in progress elsewhere returns first; in a callback of s
     * it can only be the caller's own (callbacks run one at a time), and on
     * ZooKeeper's completion thread waiting could wait for itself. */
    while (f->in_callback > 0 && !zklock__in_callback(s) && !zklock__on_completion_thread(s))
        zklock__cond_wait(s, &s->cond);
    s->nlocks--;
    follow_unref(f); /* a report running now holds its own reference */
    free_session = zklock__session_claim_free(s);
    pthread_mutex_unlock(&s->mu);
    if (free_session)
        zklock__session_free(s);
}

/* ---- the session's side ---------------------------------------------------------------------------- */

static void follow_resumed(zklock_session_t *s)
{
    for (zklock_follow_t *f = s->follows; f; f = f->next)
        if (f->owed)
            look(f);
}

/* The ZooKeeper session ended, and every watch with it: the followers look
 * again on the next session; after a close, nothing more is told. */
static void follow_ended(zklock_session_t *s, int reason)
{
    for (zklock_follow_t *f = s->follows; f; f = f->next) {
        forget_watches(f);
        zklock__timer_cancel(s, &f->retry);
        if (reason == ZKLOCK_ECLOSED) {
            f->closed = true;
        } else if (reason == ZAUTHFAILED) {
            tell(f, NULL, 0, ZAUTHFAILED); /* no session follows */
        } else {
            f->owed = true;
        }
    }
}

const struct zkl_layer zklock__follow_layer = {
    .resumed = follow_resumed,
    .ended = follow_ended,
};
