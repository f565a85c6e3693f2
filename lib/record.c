/* record.c: the previous holder's record, read (pure: test_unit runs it).
 *
 * The record's data is one versioned line, "1 <state> <token> <seq>
 * <identity>" (previous.c writes it); the judge says what it tells the
 * hold being granted, given what that hold saw of the queue. design.md,
 * "The previous holder's fate", has the argument. */
#include "previous.h"

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

/* 0, or -1 for data that is not a record of a version we know (then the
 * previous holder's fate is unknown). */
int zklock__record_parse(const char *data, int len, struct zkl_record_view *out)
{
    char buf[96], state[16];
    int version, n = len < (int)sizeof buf - 1 ? len : (int)sizeof buf - 1;
    long long token;
    long seq;

    if (!data || len <= 0)
        return -1;
    memcpy(buf, data, (size_t)n);
    buf[n] = '\0';
    if (sscanf(buf, "%d %15s %lld %ld", &version, state, &token, &seq) != 4 ||
        version != ZKL_RECORD_VERSION)
        return -1;
    if (strcmp(state, "held") == 0)
        out->released = false;
    else if (strcmp(state, "released") == 0)
        out->released = true;
    else
        return -1;
    out->token = token;
    out->seq = (int32_t)seq;
    return 0;
}

/* Was no node created between the record's holder's and ours, besides the
 * record itself? Sequence numbers count the lock path's child creations
 * (node.c), so ours is the holder's + 1, + 1 more if the record was made
 * between the two (by that holder, which alone may write it). Any other
 * hold after the record's holder had a node created in that span. */
static bool nothing_created_between(const struct zkl_record_view *rec,
                                    const struct zkl_hold_view *me)
{
    int64_t expected = (int64_t)rec->seq + 1;

    if (rec->created > rec->token && rec->created < me->czxid)
        expected++;
    return me->seq == expected;
}

/* The answer for a hold that read `rec` (NULL: none). The record speaks
 * for the hold before ours only if nobody else can have held in between:
 * we were blocked last by the record's holder, or, never blocked (our
 * first listing came after it left), no node was created between its node
 * and ours. No record: we are the first holder only if ours is the lock
 * path's first node (a hold that wrote none, a Curator peer's, had its
 * node created before ours). Otherwise someone may have held without a
 * record: unknown. */
int zklock__previous_judge(const struct zkl_record_view *rec, const struct zkl_hold_view *me)
{
    bool vouched = me->was_blocked ? rec && me->blocker_seq == rec->seq
                   : rec           ? nothing_created_between(rec, me)
                                   : me->seq == 0;

    if (!vouched)
        return ZKLOCK_PREV_UNKNOWN;
    if (!rec)
        return ZKLOCK_PREV_NONE;
    return rec->released ? ZKLOCK_PREV_CLEAN : ZKLOCK_PREV_UNCLEAN;
}
