/*
 * lockstats.c: a lock handle's contention figures (zklock_lock_stats).
 *
 * Recorded at the edges of a call, not inside the queue: where an
 * acquisition is called and where its outcome is told (owner.c's decide,
 * the one place a blocked caller or a done callback hears it), where a
 * release starts (lock.c) and where a loss is reported (on_lost). The
 * engine's steps in between know nothing of it. Everything here runs with
 * the session's mutex held, which also makes a reader's copy consistent.
 */
#include "contender.h"
#include "handle.h"
#include "lockstats.h"
#include "timer.h"

#include <string.h>

/* A recipe's own contenders (a semaphore's acquisition mutex, a
 * multi-lock's members) are not the owner's calls: the owner counts its
 * semaphore lease, its multi-lock, as one. */
static bool counted(const zkl_contender_t *c)
{
    return !c->l->internal && !c->parent;
}

static uint64_t us_between(const struct timespec *from, const struct timespec *to)
{
    int64_t us = (int64_t)(to->tv_sec - from->tv_sec) * 1000000 +
                 (to->tv_nsec - from->tv_nsec) / 1000;

    return us > 0 ? (uint64_t)us : 0;
}

/* The bucket of a duration (zklock.h): 0 below 1 ms, then one per power of
 * two of milliseconds, the last open-ended. */
unsigned zklock__stats_bucket(uint64_t us)
{
    uint64_t ms = us / 1000;
    unsigned b = 0;

    while (ms > 0 && b < ZKLOCK_STATS_BUCKETS - 1) {
        ms >>= 1;
        b++;
    }
    return b;
}

static void add_time(const zklock_session_t *s, zklock_time_stats_t *t, const struct timespec *from)
{
    struct timespec now;
    uint64_t us;

    zklock__now(s, &now);
    us = us_between(from, &now);
    t->count++;
    t->sum_us += us;
    if (us > t->max_us)
        t->max_us = us;
    t->buckets[zklock__stats_bucket(us)]++;
}

void zklock__stats_called(zkl_contender_t *c)
{
    zklock__now(session_of(c), &c->stat_since);
    c->stat_held = false;
}

void zklock__stats_told(zklock_t *l, int rc)
{
    zklock_lock_stats_t *st = &l->stats;

    if (rc == ZKLOCK_ETIMEDOUT || rc == ZKLOCK_EBUSY)
        st->timeouts++;
    else if (rc == ZKLOCK_ECANCELED)
        st->canceled++;
    else if (rc != ZKLOCK_OK)
        st->failed++;
}

/* The grant is the moment the hold begins: the wait ends there. */
void zklock__stats_acquired(zkl_contender_t *c, int rc)
{
    if (!counted(c))
        return;
    if (rc != ZKLOCK_OK) {
        zklock__stats_told(c->l, rc);
        return;
    }
    c->l->stats.acquired++;
    add_time(session_of(c), &c->l->stats.wait, &c->stat_since);
    zklock__now(session_of(c), &c->stat_since);
    c->stat_held = true;
}

void zklock__stats_reentered(zklock_t *l)
{
    l->stats.reentered++;
}

/* Once per hold: the release and the loss that may both end it (a release
 * that finds the hold lost) count it once. */
void zklock__stats_hold_over(zkl_contender_t *c, bool lost)
{
    if (!counted(c))
        return;
    if (lost)
        c->l->stats.lost++;
    if (!c->stat_held)
        return;
    c->stat_held = false;
    add_time(session_of(c), &c->l->stats.hold, &c->stat_since);
}

bool zklock__stats_size_ok(size_t size, const size_t *sizes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (size == sizes[i])
            return true;
    return size > sizes[n - 1] && size % sizeof(uint64_t) == 0;
}

/* Every size zklock_lock_stats_t has had, oldest first. */
static const size_t lock_stats_sizes[] = {
    sizeof(zklock_lock_stats_t), /* the first: acquired .. hold */
};

int zklock_lock_stats(const zklock_t *l, zklock_lock_stats_t *out, size_t size)
{
    size_t known = size < sizeof *out ? size : sizeof *out;

    if (!l || !out ||
        !zklock__stats_size_ok(size, lock_stats_sizes,
                               sizeof lock_stats_sizes / sizeof lock_stats_sizes[0]))
        return ZKLOCK_EINVAL;
    pthread_mutex_lock(&l->s->mu);
    memcpy(out, &l->stats, known);
    pthread_mutex_unlock(&l->s->mu);
    memset((char *)out + known, 0, size - known);
    return ZKLOCK_OK;
}
