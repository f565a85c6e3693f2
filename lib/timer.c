/* timer.c: the deadlines the session thread sleeps on, in one binary heap,
 * on ZKLOCK_CLOCK (clock.c).
 *
 * Every delayed action of a session is a timer: an own-node watch falling
 * due, a retry, a suspension lasting too long. The
 * session thread sleeps until the earliest one (or until kicked) and fires
 * what is due, with s->mu held, as the rest of the library runs.
 *
 * Arming never fails: whoever owns timers reserves their heap slots first
 * (zklock__timers_reserve), so that no error path has to cope with a timer that
 * could not be armed. */
#include "session.h"
#include "timer.h"

#include <stdlib.h>

static struct zkl_timer **slot_of(zklock_session_t *s, size_t i)
{
    return &s->timers.heap[i];
}

static void place(zklock_session_t *s, size_t i, struct zkl_timer *t)
{
    *slot_of(s, i) = t;
    t->slot = i + 1;
}

static bool before(const struct zkl_timer *a, const struct zkl_timer *b)
{
    return zklock__earlier(&a->at, &b->at);
}

static void sift_up(zklock_session_t *s, size_t i)
{
    struct zkl_timer *t = *slot_of(s, i);

    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(t, *slot_of(s, parent)))
            break;
        place(s, i, *slot_of(s, parent));
        i = parent;
    }
    place(s, i, t);
}

static void sift_down(zklock_session_t *s, size_t i)
{
    struct zkl_timer *t = *slot_of(s, i);
    size_t n = s->timers.n;

    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && before(*slot_of(s, child + 1), *slot_of(s, child)))
            child++;
        if (!before(*slot_of(s, child), t))
            break;
        place(s, i, *slot_of(s, child));
        i = child;
    }
    place(s, i, t);
}

int zklock__timers_reserve(zklock_session_t *s, size_t k)
{
    struct zkl_timers *ts = &s->timers;
    size_t want = ts->reserved + k;

    if (want > ts->cap) {
        size_t cap = ts->cap ? ts->cap : 16;
        struct zkl_timer **heap;
        while (cap < want)
            cap *= 2;
        heap = realloc(ts->heap, cap * sizeof *heap);
        if (!heap)
            return ZKLOCK_ENOMEM;
        ts->heap = heap;
        ts->cap = cap;
    }
    ts->reserved = want;
    return 0;
}

void zklock__timers_unreserve(zklock_session_t *s, size_t k)
{
    s->timers.reserved -= k;
}

void zklock__timers_free(zklock_session_t *s)
{
    free(s->timers.heap);
    s->timers.heap = NULL;
    s->timers.n = s->timers.cap = s->timers.reserved = 0;
}

/* Wakes the session thread if it sleeps past this timer. */
static void wake_for(zklock_session_t *s, const struct zkl_timer *t)
{
    struct zkl_timers *ts = &s->timers;

    if (ts->asleep && (!ts->sleep_timed || zklock__earlier(&t->at, &ts->sleep_until)))
        pthread_cond_signal(&s->thread_cond);
}

void zklock__timer_cancel(zklock_session_t *s, struct zkl_timer *t)
{
    struct zkl_timers *ts = &s->timers;
    struct zkl_timer *moved;
    size_t i;

    if (!t->slot)
        return;
    i = t->slot - 1;
    t->slot = 0;
    if (--ts->n == i)
        return; /* it was the last */
    moved = ts->heap[ts->n];
    place(s, i, moved);
    sift_up(s, i);
    sift_down(s, moved->slot - 1);
}

void zklock__timer_arm(zklock_session_t *s, struct zkl_timer *t, const struct timespec *at)
{
    zklock__timer_cancel(s, t);
    t->at = *at;
    place(s, s->timers.n++, t);
    sift_up(s, t->slot - 1);
    wake_for(s, t);
}

void zklock__timer_arm_in(zklock_session_t *s, struct zkl_timer *t, int ms)
{
    struct timespec at;

    zklock__deadline(s, &at, ms);
    zklock__timer_arm(s, t, &at);
}

void zklock__timers_fire_due(zklock_session_t *s)
{
    while (s->timers.n > 0 && zklock__passed(s, &s->timers.heap[0]->at)) {
        struct zkl_timer *t = s->timers.heap[0];
        zklock__timer_cancel(s, t);
        t->fire(t, s); /* may arm timers, this one too */
    }
}

/* Sleeps until the first timer is due, or a kick; while a timer is armed,
 * at most slice_ms at a time: after the host slept, the timers it made due
 * (the lease's end above all) fire within that. */
void zklock__timers_sleep(zklock_session_t *s)
{
    struct zkl_timers *ts = &s->timers;

    ts->asleep = true;
    ts->sleep_timed = ts->n > 0;
    if (ts->sleep_timed) {
        ts->sleep_until = ts->heap[0]->at;
        zklock__cond_wait_until(s, &s->thread_cond, &ts->sleep_until, ts->slice_ms);
    } else {
        zklock__cond_wait(s, &s->thread_cond);
    }
    ts->asleep = false;
}

bool zklock__timer_armed(const struct zkl_timer *t)
{
    return t->slot != 0;
}
