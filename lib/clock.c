/* clock.c: monotonic deadlines.
 *
 * Every wait in zklock is against CLOCK_MONOTONIC: a wall clock set back
 * must not stretch a timeout, nor one set forward expire a session. */
#include "timer.h"

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

void zklock__now(struct timespec *ts)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
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

void zklock__deadline(struct timespec *ts, int timeout_ms)
{
    struct timespec now;

    zklock__now(&now);
    zklock__later(ts, &now, timeout_ms);
}

bool zklock__earlier(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

bool zklock__passed(const struct timespec *ts)
{
    struct timespec now;

    zklock__now(&now);
    return !zklock__earlier(&now, ts);
}

int64_t zklock__ms_between(const struct timespec *from, const struct timespec *to)
{
    return (int64_t)(to->tv_sec - from->tv_sec) * 1000 + (to->tv_nsec - from->tv_nsec) / 1000000;
}
