/* record.c: the previous holder's record, its text and its judge (pure:
 * test_unit runs it). design.md, "The previous holder's fate", has the
 * argument; previous.h the format. */
#include "previous.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char *zklock_previous_name(int how)
{
    switch (how) {
    case ZKLOCK_PREV_NONE: return "none";
    case ZKLOCK_PREV_CLEAN: return "clean";
    case ZKLOCK_PREV_UNCLEAN: return "unclean";
    case ZKLOCK_PREV_UNKNOWN: return "unknown";
    default: return "?";
    }
}

/* ---- the text ---------------------------------------------------------------------- */

static const char *const state_names[] = {
    [ZKL_REC_NONE] = "none", [ZKL_REC_HELD] = "held", [ZKL_REC_RELEASED] = "released"};

static int state_of(const char *word)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(word, state_names[i]) == 0)
            return i;
    return -1;
}

/* "-" or "12,13,20": ascending, each after the holder's number. */
static int parse_never(const char *list, struct zkl_record *r)
{
    r->nnever = 0;
    if (strcmp(list, "-") == 0)
        return 0;
    for (const char *p = list; *p;) {
        char *end;
        long seq = strtol(p, &end, 10);

        if (end == p || seq < 0 || seq > INT32_MAX || r->nnever == ZKL_RECORD_NEVER_MAX ||
            (*end != ',' && *end != '\0'))
            return -1;
        r->never[r->nnever++] = (int32_t)seq;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* "-" or "<seq>@<ms>". */
static int parse_gone(const char *text, struct zkl_record *r)
{
    long long seq, ms;
    char end;

    if (strcmp(text, "-") == 0)
        return 0;
    if (sscanf(text, "%lld@%lld%c", &seq, &ms, &end) != 2 || seq <= 0 || seq > INT32_MAX ||
        ms < 0)
        return -1;
    r->gone_below = (int32_t)seq;
    r->gone_by_ms = ms;
    return 0;
}

int zklock__record_parse(const char *data, int len, struct zkl_record *out)
{
    char buf[1024], state[16], never[960], gone[48];
    int version, n = len < (int)sizeof buf - 1 ? len : (int)sizeof buf - 1;
    long long token, alive;
    long seq, timeout;

    if (!data || len <= 0)
        return -1;
    memcpy(buf, data, (size_t)n);
    buf[n] = '\0';
    memset(out, 0, sizeof *out);
    if (sscanf(buf, "%d", &version) != 1)
        return -1;
    if (version == 1) {
        if (sscanf(buf, "%d %15s %lld %ld", &version, state, &token, &seq) != 4)
            return -1;
        alive = timeout = 0;
    } else if (version == ZKL_RECORD_VERSION) {
        if (sscanf(buf, "%d %15s %lld %ld %lld %ld %959s %47s", &version, state, &token, &seq,
                   &alive, &timeout, never, gone) != 8 ||
            parse_never(never, out) != 0 || parse_gone(gone, out) != 0 || alive < 0 ||
            timeout < 0 || timeout > INT32_MAX)
            return -1;
    } else {
        return -1; /* a later version */
    }
    if (state_of(state) < 0 || (version == 1 && state_of(state) == ZKL_REC_NONE))
        return -1;
    out->state = (enum zkl_rec_state)state_of(state);
    out->token = token;
    out->seq = (int32_t)seq;
    out->alive_ms = alive;
    out->timeout_ms = (int32_t)timeout;
    return 0;
}

char *zklock__record_format(const struct zkl_record *r, const char *identity, int *len)
{
    size_t room = 128 + (size_t)r->nnever * 12 + (identity ? strlen(identity) : 0);
    char *text = malloc(room), *p;

    if (!text)
        return NULL;
    p = text + snprintf(text, room, "%d %s %" PRId64 " %" PRId32 " %" PRId64 " %" PRId32 " ",
                        ZKL_RECORD_VERSION, state_names[r->state], r->token, r->seq, r->alive_ms,
                        r->timeout_ms);
    if (r->nnever == 0)
        *p++ = '-';
    for (int i = 0; i < r->nnever; i++)
        p += snprintf(p, room - (size_t)(p - text), "%s%" PRId32, i ? "," : "", r->never[i]);
    if (r->gone_below > 0)
        p += snprintf(p, room - (size_t)(p - text), " %" PRId32 "@%" PRId64, r->gone_below,
                      r->gone_by_ms);
    else
        p += snprintf(p, room - (size_t)(p - text), " -");
    *len = (int)(p - text) + snprintf(p, room - (size_t)(p - text), " %s", identity ? identity : "");
    return text;
}

/* ---- the writers ------------------------------------------------------------------- */

/* Keeps only the give-ups after `seq`: the others speak of holds before
 * the record's holder, which nobody asks about any more. */
static void keep_never_after(struct zkl_record *r, int32_t seq)
{
    int k = 0;

    for (int i = 0; i < r->nnever; i++)
        if (r->never[i] > seq)
            r->never[k++] = r->never[i];
    r->nnever = k;
}

void zklock__record_hold(struct zkl_record *r, bool released, int64_t token, int32_t seq,
                         int32_t timeout_ms)
{
    r->state = released ? ZKL_REC_RELEASED : ZKL_REC_HELD;
    r->token = token;
    r->seq = seq;
    r->alive_ms = 0; /* this write's own mtime is the holder's sign of life */
    r->timeout_ms = timeout_ms;
    r->gone_below = 0; /* a hold: nobody asks about the nodes before it any more */
    r->gone_by_ms = 0;
    keep_never_after(r, seq);
}

static bool has_never(const struct zkl_record *r, int32_t seq)
{
    for (int i = 0; i < r->nnever; i++)
        if (r->never[i] == seq)
            return true;
    return false;
}

/* Adds seq in order; false if there is no room. */
static bool add_never(struct zkl_record *r, int32_t seq)
{
    int i;

    if (seq <= r->seq || has_never(r, seq))
        return true; /* before the holder's, or there already */
    if (r->nnever == ZKL_RECORD_NEVER_MAX)
        return false;
    for (i = r->nnever; i > 0 && r->never[i - 1] > seq; i--)
        r->never[i] = r->never[i - 1];
    r->never[i] = seq;
    r->nnever++;
    return true;
}

bool zklock__record_undo(struct zkl_record *r, const struct zkl_record *before)
{
    struct zkl_record next =
        before ? *before : (struct zkl_record){.state = ZKL_REC_NONE, .seq = -1};

    for (int i = 0; i < r->nnever; i++)
        if (!add_never(&next, r->never[i]))
            return false;
    *r = next;
    return true;
}

bool zklock__record_give_up(struct zkl_record *r, int64_t mtime, int32_t seq,
                            const int32_t *former, int nformer)
{
    struct zkl_record next = *r;

    if (next.state == ZKL_REC_NONE)
        next.seq = -1;
    else if (next.alive_ms == 0)
        next.alive_ms = mtime; /* the holder's last write, kept past ours */
    if (next.gone_below > 0 && next.gone_by_ms == 0)
        next.gone_by_ms = mtime; /* the write that said so, kept past ours */
    for (int i = 0; i < nformer; i++)
        if (!add_never(&next, former[i]))
            return false;
    if (!add_never(&next, seq))
        return false;
    *r = next;
    return true;
}

/* ---- the judge --------------------------------------------------------------------- */

static int seq_order(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* How many distinct numbers after `from` and before ours the lists name
 * (the record's give-ups, our own former nodes). Counted from the lists,
 * not by walking the numbers between: there may be 2^31 of them, and this
 * runs under the session's mutex. */
static int64_t named_between(const struct zkl_record *r, const struct zkl_hold_view *me,
                             int32_t from)
{
    int32_t named[ZKL_RECORD_NEVER_MAX + ZKL_FORMER_MAX];
    int n = 0;
    int64_t distinct = 0;

    for (int i = 0; r && i < r->nnever && i < ZKL_RECORD_NEVER_MAX; i++)
        if (r->never[i] > from && r->never[i] < me->seq)
            named[n++] = r->never[i];
    for (int i = 0; i < me->nformer && i < ZKL_FORMER_MAX; i++)
        if (me->former[i] > from && me->former[i] < me->seq)
            named[n++] = me->former[i];
    qsort(named, (size_t)n, sizeof named[0], seq_order);
    for (int i = 0; i < n; i++)
        distinct += i == 0 || named[i] != named[i - 1];
    return distinct;
}

/* Sequence numbers count the lock path's child creations (node.c), so the
 * numbers after `from` and before ours are exactly the nodes created
 * between. Is each of them a contender that never held (its give-up said
 * so, in the multi that deleted its node), or the record's own creation
 * (it alone may be made between without a number of its own in the list)?
 * Then nobody held between `from` and us. */
static bool all_accounted(const struct zkl_record_view *v, const struct zkl_hold_view *me,
                          int32_t from, int64_t after_czxid)
{
    int64_t gaps = (int64_t)me->seq - from - 1;
    int64_t known = named_between(v && v->parsed ? &v->rec : NULL, me, from);

    if (gaps < 0)
        return false; /* a number below the holder's: the path was made again */
    if (v && v->present && v->czxid > after_czxid && v->czxid < me->czxid)
        known++;
    return known == gaps;
}

/* The record speaks for the hold before ours only if nobody else can have
 * held in between: we were blocked last by the record's holder (nobody
 * after it could hold while its node stood, and its node went just before
 * our turn), or every node created between its node and ours never held.
 * No holder yet: every node created before ours never held. */
int zklock__previous_judge(const struct zkl_record_view *v, const struct zkl_hold_view *me)
{
    const struct zkl_record *r = v && v->present && v->parsed ? &v->rec : NULL;
    bool vouched;

    if (v && v->present && !v->parsed)
        return ZKLOCK_PREV_UNKNOWN; /* a record of a later version */
    if (!r || r->state == ZKL_REC_NONE)
        vouched = all_accounted(v, me, -1, 0);
    else
        vouched = (me->was_blocked && me->blocker_seq == r->seq) ||
                  all_accounted(v, me, r->seq, r->token);
    if (!vouched)
        return ZKLOCK_PREV_UNKNOWN;
    if (!r || r->state == ZKL_REC_NONE)
        return ZKLOCK_PREV_NONE;
    return r->state == ZKL_REC_RELEASED ? ZKLOCK_PREV_CLEAN : ZKLOCK_PREV_UNCLEAN;
}

static bool named(const struct zkl_record *r, const struct zkl_hold_view *me, int64_t seq)
{
    if (r && has_never(r, (int32_t)seq))
        return true;
    for (int i = 0; i < me->nformer && i < ZKL_FORMER_MAX; i++)
        if (me->former[i] == seq)
            return true;
    return false;
}

int64_t zklock__unknown_gone_ms(const struct zkl_record_view *v, const struct zkl_hold_view *me)
{
    const struct zkl_record *r = v && v->present && v->parsed ? &v->rec : NULL;
    int32_t from = r && r->state != ZKL_REC_NONE ? r->seq : -1;
    int64_t seq = (int64_t)me->seq - 1;

    if (!r || r->gone_below <= 0)
        return -1;
    /* The highest number between that the lists do not name (the record's
     * own creation among them, unplaced: the safe side). The walk takes at
     * most as many steps as the lists are long. */
    while (seq > from && named(r, me, seq))
        seq--;
    if (seq >= r->gone_below)
        return -1; /* a node made after the turn that saw the others gone */
    return r->gone_by_ms ? r->gone_by_ms : v->mtime;
}

void zklock__record_saw_gone(struct zkl_record *r, const struct zkl_record_view *v,
                             const struct zkl_hold_view *me)
{
    if (zklock__unknown_gone_ms(v, me) >= 0)
        return; /* said already: the earlier time stays, the delay's end with it */
    r->gone_below = me->seq;
    r->gone_by_ms = 0; /* this write's own mtime: after our turn, when they were gone */
}

int64_t zklock__record_end_ms(const struct zkl_record_view *v)
{
    const struct zkl_record *r = &v->rec;

    if (!v->present || !v->parsed || r->state != ZKL_REC_HELD || r->timeout_ms <= 0)
        return -1; /* version 1: no refreshes, nothing bounds its holder */
    return (r->alive_ms ? r->alive_ms : v->mtime) + r->timeout_ms;
}
