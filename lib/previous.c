/* previous.c: the previous holder's fate and the lock-delay
 * (zklock_opts_t.track_previous, .lock_delay_ms; design.md, "The previous
 * holder's fate").
 *
 * A tracking mutex keeps one persistent child of its lock path, the record
 * "zklock.previous" (a name no lock client parses as a contender). Its data,
 * one line: "1 <state> <token> <seq> <identity>", state "held" or
 * "released", token the holder's node's czxid, seq its sequence number.
 *  - A hold begins (the engine granted it): read the record, then write
 *    "held" by us, in one multi with a check that our node still stands and
 *    with the version read (or create it), so that only a holder writes it.
 *  - A hold ends by its release: write "released" likewise (check of our
 *    node + the version we wrote), then the engine deletes our node.
 * A lost reply is decided by reading the record again: it names our token
 * if our write happened.
 *
 * This runs on the caller's thread, outside s->mu, with ZooKeeper's
 * synchronous calls, after the engine's grant and before its release: the
 * engine itself is unchanged, and only tracking handles pay. */
#include "previous.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contender.h"
#include "owner.h"
#include "session.h"
#include "timer.h"

/* What a hold knows of itself, copied under s->mu. */
struct hold_facts {
    char *node;          /* our node's path */
    int64_t token;
    int32_t seq;
    bool was_blocked;
    int32_t blocker_seq;
    int version;         /* the record's version we wrote (release) */
    bool known;
};

/* The record's text for a hold (malloc'ed; *len its length). */
static char *record_text(bool released, const struct hold_facts *h, const char *identity,
                         int *len)
{
    size_t idlen = identity ? strlen(identity) : 0, room = idlen + 96;
    char *text = malloc(room);

    if (!text)
        return NULL;
    *len = snprintf(text, room, "%d %s %" PRId64 " %" PRId32 " %s", ZKL_RECORD_VERSION,
                    released ? "released" : "held", h->token, h->seq,
                    identity ? identity : "");
    return text;
}

/* Copies what c's hold knows, under s->mu; false if the caller holds nothing. */
static bool hold_facts_get(zklock_t *l, struct hold_facts *h)
{
    zkl_contender_t *c;
    bool ok = false;

    memset(h, 0, sizeof *h);
    pthread_mutex_lock(&l->s->mu);
    c = zklock__owner_contender(l);
    if (c && c->phase == ZKL_HELD && c->node) {
        h->node = strdup(c->node);
        h->token = c->czxid;
        h->seq = c->seq;
        h->was_blocked = c->was_blocked;
        h->blocker_seq = c->blocker_seq;
        h->version = c->prev_version;
        h->known = c->prev_known;
        ok = h->node != NULL;
    }
    pthread_mutex_unlock(&l->s->mu);
    return ok;
}

/* Waits until the session is connected again or `until` (NULL: a session
 * timeout from now) passes; false then. */
static bool wait_connected(zklock_session_t *s, const struct timespec *until)
{
    struct timespec end, tick;
    bool up;

    pthread_mutex_lock(&s->mu);
    if (until)
        end = *until;
    else
        zklock__deadline(s, &end, s->opts.timeout_ms);
    /* The session's state changes broadcast s->cond; the cap looks again
     * every 20 ms in case one is missed. */
    while (!(up = zklock__connected(s)) && s->state != ZKL_S_CLOSED && !zklock__passed(s, &end)) {
        zklock__deadline(s, &tick, 20);
        if (zklock__earlier(&end, &tick))
            tick = end;
        zklock__cond_wait_until(s, &s->cond, &tick, 0);
    }
    pthread_mutex_unlock(&s->mu);
    return up;
}

/* One synchronous call on the session's handle, lent for its duration. */
static zhandle_t *borrow(zklock_session_t *s)
{
    zhandle_t *zh;

    pthread_mutex_lock(&s->mu);
    zh = zklock__zh_borrow(s);
    pthread_mutex_unlock(&s->mu);
    return zh;
}

static void give_back(zklock_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    zklock__zh_return(s);
    pthread_mutex_unlock(&s->mu);
}

/* Reads the record: ZOK (*rec, *version set; *present), ZNONODE (absent),
 * or the error. */
static int record_read(zklock_session_t *s, const char *path, struct zkl_record_view *rec,
                       bool *parsed, int *version, int64_t *writer)
{
    char buf[96];
    int len = sizeof buf, rc;
    struct Stat st;
    zhandle_t *zh = borrow(s);

    if (!zh)
        return ZCONNECTIONLOSS; /* between two handles: wait for the next */
    rc = zoo_get(zh, path, 0, buf, &len, &st);
    give_back(s);
    if (rc != ZOK)
        return rc;
    *version = st.version;
    *parsed = zklock__record_parse(buf, len, rec) == 0;
    *writer = *parsed ? rec->token : 0;
    rec->created = st.czxid;
    return ZOK;
}

/* zoo_multi(), but through the asynchronous call: the C client's
 * synchronous multi leaks its per-operation entries when the connection is
 * lost before the answer (free_completions() frees a synchronous request's
 * entry only; the asynchronous path answers each operation and frees it).
 * The completion always runs: the handle is borrowed, so it is not closed
 * under us, and a lost connection or expiry answers every request. */
struct multi_wait {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool done;
    int rc;
};

static void multi_answered(int rc, const void *data)
{
    struct multi_wait *w = (struct multi_wait *)data;

    pthread_mutex_lock(&w->mu);
    w->rc = rc;
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
}

static int multi_call(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results)
{
    struct multi_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};
    int rc = zoo_amulti(zh, count, ops, results, multi_answered, &w);

    if (rc == ZOK) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cond, &w.mu);
        rc = w.rc;
        pthread_mutex_unlock(&w.mu);
    }
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cond);
    return rc;
}

/* Writes the record (create if version < 0) in one multi with a check that
 * our node stands. Returns the multi's rc; *written the new version. */
static int record_write(zklock_session_t *s, const char *path, const struct hold_facts *h,
                        const char *text, int len, int version, const struct ACL_vector *acl,
                        int *written)
{
    zoo_op_t ops[2];
    zoo_op_result_t results[2] = {{0}}; /* read below even if the multi never went out */
    struct Stat st;
    int rc;
    zhandle_t *zh = borrow(s);

    if (!zh)
        return ZCONNECTIONLOSS;
    zoo_check_op_init(&ops[0], h->node, -1);
    if (version < 0)
        zoo_create_op_init(&ops[1], path, text, len, acl, ZOO_PERSISTENT, NULL, 0);
    else
        zoo_set_op_init(&ops[1], path, text, len, version, &st);
    rc = multi_call(zh, 2, ops, results);
    give_back(s);
    if (rc == ZOK)
        *written = version < 0 ? 0 : st.version;
    else if (rc != ZOK && !transient(rc) && results[0].err == ZNONODE)
        rc = ZKLOCK_ELOST; /* our node is gone: no longer a holder */
    return rc;
}

/* Records that h holds (or released), deciding lost replies by reading
 * again. On the first read, *how is judged (grant only: how != NULL). */
static int record(zklock_t *l, const struct hold_facts *h, const char *path, bool released,
                  const struct timespec *until, int *how, int64_t *prev_token, int *written)
{
    struct zkl_record_view rec;
    bool parsed = false, judged = how == NULL;
    int len, rc, version = -1;
    int64_t writer = 0;
    char *text = record_text(released, h, l->s->identity, &len);

    if (!text)
        return ZKLOCK_ENOMEM;
    for (int attempt = 0; attempt < 50; attempt++) {
        rc = record_read(l->s, path, &rec, &parsed, &version, &writer);
        if (rc == ZNONODE)
            version = -1;
        else if (transient(rc))
            goto retry;
        else if (rc != ZOK)
            break; /* e.g. ZNOAUTH: the record is not ours to read */
        if (!judged) {
            struct zkl_hold_view me = {.was_blocked = h->was_blocked,
                                       .blocker_seq = h->blocker_seq,
                                       .seq = h->seq,
                                       .czxid = h->token};

            *how = zklock__previous_judge(rc == ZOK && parsed ? &rec : NULL, &me);
            if (rc == ZOK && !parsed)
                *how = ZKLOCK_PREV_UNKNOWN; /* a record of a later version */
            *prev_token = *how == ZKLOCK_PREV_CLEAN || *how == ZKLOCK_PREV_UNCLEAN ?
                              rec.token : 0;
            judged = true;
        } else if (rc == ZOK && parsed && writer == h->token && rec.released == released) {
            *written = version; /* a write whose reply was lost happened */
            rc = ZOK;
            break;
        }
        if (released && (rc == ZNONODE || version != h->version)) {
            rc = ZOK; /* someone removed or rewrote it (zklock-ls --forget):
                         nothing of ours to record against */
            *written = version;
            break;
        }
        rc = record_write(l->s, path, h, text, len, version, l->acl, written);
        /* Our node stands, and the record changed since we read it: it was
         * rewritten, made, or removed (ZNONODE: an operator retired it
         * meanwhile). Read again. */
        if (rc == ZOK ||
            (!transient(rc) && rc != ZBADVERSION && rc != ZNODEEXISTS && rc != ZNONODE))
            break;
    retry:
        if (transient(rc) && !wait_connected(l->s, until))
            break;
    }
    free(text);
    return rc;
}

char *zklock__record_path(const zklock_t *l)
{
    return zklock__child_path(l->path, ZKL_RECORD_NAME);
}

/* Is the caller's hold of l still a hold, its handle not being freed?
 * With s->mu. */
static bool still_held(zklock_t *l)
{
    const zkl_contender_t *c = zklock__owner_contender(l);

    return c && c->phase == ZKL_HELD && !l->freeing;
}

/* Waits, holding, for the lock-delay (until `delay_end`), within the
 * acquisition's deadline (`until`, NULL: none): ZKLOCK_ETIMEDOUT if that
 * comes first, ZKLOCK_ELOST if the hold ends meanwhile (looked at on the
 * session's state changes, and every 20 ms in case one is missed). */
static int lock_delay(zklock_t *l, const struct timespec *delay_end, const struct timespec *until)
{
    zklock_session_t *s = l->s;
    struct timespec tick;
    bool held;

    if (until && zklock__earlier(until, delay_end))
        return ZKLOCK_ETIMEDOUT; /* it would end inside the delay */
    pthread_mutex_lock(&s->mu);
    while ((held = still_held(l)) && !zklock__passed(s, delay_end)) {
        zklock__deadline(s, &tick, 20);
        if (zklock__earlier(delay_end, &tick))
            tick = *delay_end;
        zklock__cond_wait_until(s, &s->cond, &tick, 0);
    }
    pthread_mutex_unlock(&s->mu);
    return held ? ZKLOCK_OK : ZKLOCK_ELOST;
}

/* Stores what the hold learnt, under s->mu; false if the hold is gone. */
static bool hold_facts_put(zklock_t *l, int how, int64_t token, int version)
{
    zkl_contender_t *c;
    bool held = false;

    pthread_mutex_lock(&l->s->mu);
    c = zklock__owner_contender(l);
    if (c && c->phase == ZKL_HELD) {
        c->prev_known = true;
        c->prev_how = how;
        c->prev_token = token;
        c->prev_version = version;
        held = true;
    }
    pthread_mutex_unlock(&l->s->mu);
    return held;
}

/* The hold's record is not to be written "released" by its release. */
static void hold_facts_forget(zklock_t *l)
{
    zkl_contender_t *c;

    pthread_mutex_lock(&l->s->mu);
    c = zklock__owner_contender(l);
    if (c)
        c->prev_known = false;
    pthread_mutex_unlock(&l->s->mu);
}

int zklock__previous_granted(zklock_t *l, const struct timespec *until)
{
    struct hold_facts h;
    struct timespec delay_end;
    int how = ZKLOCK_PREV_UNKNOWN, version = -1, rc;
    int64_t token = 0;
    char *path;

    if (!hold_facts_get(l, &h))
        return ZKLOCK_ELOST;
    if (h.known) {
        free(h.node);
        return ZKLOCK_OK; /* reentrant: recorded when the hold began */
    }
    zklock__deadline(l->s, &delay_end, l->opts.lock_delay_ms);
    path = zklock__record_path(l);
    rc = path ? record(l, &h, path, false, until, &how, &token, &version) : ZKLOCK_ENOMEM;
    free(path);
    free(h.node);
    if (rc == ZOK && !hold_facts_put(l, how, token, version))
        rc = ZKLOCK_ELOST;
    if (rc == ZOK && l->opts.lock_delay_ms > 0 &&
        (how == ZKLOCK_PREV_UNCLEAN || how == ZKLOCK_PREV_UNKNOWN)) {
        rc = lock_delay(l, &delay_end, until);
        /* Never the caller's hold: its release leaves "held", so that the
         * unclean end it did not repair stays unclean to the next. */
        if (rc != ZKLOCK_OK)
            hold_facts_forget(l);
    }
    return rc;
}

/* May the record's calls wait here? Not in a callback while disconnected:
 * the callbacks queued behind it (another hold's on_lost, told first) would
 * wait for the connection as long as it does. */
static bool may_record_here(zklock_session_t *s)
{
    bool ok;

    pthread_mutex_lock(&s->mu);
    ok = !zklock__in_callback(s) || zklock__connected(s);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

void zklock__previous_releasing(zklock_t *l)
{
    struct hold_facts h;
    struct timespec now, *until = NULL;
    int version;
    char *path;

    if (!hold_facts_get(l, &h))
        return;
    if (zklock__in_callback(l->s)) {
        zklock__deadline(l->s, &now, 0); /* and no wait for the connection */
        until = &now;
    }
    if (h.known && may_record_here(l->s) && (path = zklock__record_path(l))) {
        /* Best effort: a release that cannot record (the connection stays
         * down past a session timeout) leaves "held", which the next holder
         * reads as unclean: the safe side. */
        record(l, &h, path, true, until, NULL, NULL, &version);
        free(path);
    }
    free(h.node);
}

int zklock_previous(const zklock_t *l, int *how, int64_t *token)
{
    const zkl_contender_t *c;
    int rc = ZKLOCK_ENOTHELD;

    if (!l || !how || !l->tracks)
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    c = zklock__owner_contender(l);
    if (c && c->phase == ZKL_HELD && c->prev_known) {
        *how = c->prev_how;
        if (token)
            *token = c->prev_token;
        rc = ZKLOCK_OK;
    } else if (c && c->phase == ZKL_LOST) {
        rc = ZKLOCK_ELOST;
    }
    pthread_mutex_unlock(&l->s->mu);
    return rc;
}
