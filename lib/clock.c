/* clock.c: the clock of every deadline, and of the lease.
 *
 * zklock measures time on ZKLOCK_CLOCK (zklock.h): CLOCK_BOOTTIME on Linux,
 * CLOCK_MONOTONIC elsewhere. Both ignore the wall clock (set back, it must
 * not stretch a timeout; set forward, it must not expire a session), and
 * CLOCK_BOOTTIME also counts the time the host slept (suspend, hibernation,
 * a virtual machine saved and restored), which CLOCK_MONOTONIC does not: a
 * holder whose host slept past its session timeout must not wake up
 * believing its lease runs on, the ensemble having expired its session.
 *
 * Both are read through the session's wire (wire.h), as are the waits, so
 * that a simulator can play them. Condition variables wait on CLOCK_MONOTONIC (glibc's
 * pthread_condattr_setclock takes no other but CLOCK_REALTIME): a wait
 * until a time of ours is converted at each wait, and a wait that the host
 * slept through ends late by that sleep. Whoever must notice a sleep at
 * once (the session thread, for the lease) wakes up at least every so often
 * to read the clock again (zklock__cond_wait_until's cap_ms). */
#include "session.h"
#include "timer.h"

#include <errno.h>

int zklock__cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return -1;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

void zklock__now(const zklock_session_t *s, struct timespec *ts)
{
    s->wire->clock(s->wire_env, ZKLOCK_CLOCK, ts);
}

void zklock__later(struct timespec *ts, const struct timespec *base, int64_t ms)
{
    *ts = *base;
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    } else if (ts->tv_nsec < 0) {
        ts->tv_sec--;
        ts->tv_nsec += 1000000000L;
    }
}

void zklock__deadline(const zklock_session_t *s, struct timespec *ts, int timeout_ms)
{
    struct timespec now;

    zklock__now(s, &now);
    zklock__later(ts, &now, timeout_ms);
}

bool zklock__earlier(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

bool zklock__passed(const zklock_session_t *s, const struct timespec *ts)
{
    struct timespec now;

    zklock__now(s, &now);
    return !zklock__earlier(&now, ts);
}

int64_t zklock__ms_between(const struct timespec *from, const struct timespec *to)
{
    return (int64_t)(to->tv_sec - from->tv_sec) * 1000 + (to->tv_nsec - from->tv_nsec) / 1000000;
}

/* The same span from now, on CLOCK_MONOTONIC. */
static void on_monotonic(const zklock_session_t *s, struct timespec *mono,
                         const struct timespec *now, const struct timespec *at)
{
    int64_t ns = (int64_t)(at->tv_sec - now->tv_sec) * 1000000000 + (at->tv_nsec - now->tv_nsec);
    struct timespec base;

    s->wire->clock(s->wire_env, CLOCK_MONOTONIC, &base);
    *mono = base;
    mono->tv_sec += (time_t)(ns / 1000000000);
    mono->tv_nsec += (long)(ns % 1000000000);
    if (mono->tv_nsec >= 1000000000L) {
        mono->tv_sec++;
        mono->tv_nsec -= 1000000000L;
    }
}

int zklock__cond_wait_until(zklock_session_t *s, pthread_cond_t *cond, const struct timespec *at,
                            int cap_ms)
{
    struct timespec now, until = *at, mono;

    zklock__now(s, &now);
    if (!zklock__earlier(&now, at))
        return ETIMEDOUT;
    if (cap_ms > 0 && zklock__ms_between(&now, at) > cap_ms)
        zklock__later(&until, &now, cap_ms);
    on_monotonic(s, &mono, &now, &until);
    s->wire->cond_wait(s->wire_env, cond, &s->mu, &mono);
    return zklock__passed(s, at) ? ETIMEDOUT : 0;
}

void zklock__cond_wait(zklock_session_t *s, pthread_cond_t *cond)
{
    s->wire->cond_wait(s->wire_env, cond, &s->mu, NULL);
}
