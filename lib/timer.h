/*
 * timer.h: time and the session thread's work: monotonic deadlines
 * (clock.c), the heap of timers it sleeps on (timer.c), the user's
 * callbacks it runs in order (dispatch.c).
 */
#ifndef ZKLOCK_TIMER_H
#define ZKLOCK_TIMER_H

#include "common.h"
#include "recipe.h"

/* ---- clock.c: time, on ZKLOCK_CLOCK (CLOCK_BOOTTIME on Linux) ------------- */

/* The clock and the waits are s's wire's (wire.h). */
int zklock__cond_init(pthread_cond_t *cond); /* waits on CLOCK_MONOTONIC */
/* Waits on cond (from zklock__cond_init, with s->mu held) until at (a
 * zklock__now time) or a wake-up, and at most cap_ms (0: no cap) before
 * the clock is read again; ETIMEDOUT once at has passed, else 0. */
int zklock__cond_wait_until(zklock_session_t *s, pthread_cond_t *cond, const struct timespec *at,
                            int cap_ms);
/* (zklock__cond_wait: waits on cond for a wake-up, or none: recipe.h.) */
void zklock__now(const zklock_session_t *s, struct timespec *ts);
void zklock__later(struct timespec *ts, const struct timespec *base, int64_t ms);
/* now + timeout_ms */
void zklock__deadline(const zklock_session_t *s, struct timespec *ts, int timeout_ms);
bool zklock__earlier(const struct timespec *a, const struct timespec *b);
bool zklock__passed(const zklock_session_t *s, const struct timespec *ts);
int64_t zklock__ms_between(const struct timespec *from, const struct timespec *to);

/* ---- timer.c: what the session thread sleeps on --------------------------- */

struct zkl_timer {
    struct timespec at;
    size_t slot; /* 1 + its index in the heap while armed, 0 when not */
    /* Called on the session thread with s->mu held, once `at` has passed. */
    void (*fire)(struct zkl_timer *t, zklock_session_t *s);
};

struct zkl_timers {
    struct zkl_timer **heap;
    size_t n, cap, reserved;
    bool asleep, sleep_timed; /* the session thread sleeps (until sleep_until) */
    struct timespec sleep_until;
    int slice_ms; /* while a timer is armed, the longest sleep before the
                     clock is read again: the wait itself does not see the
                     host sleep (clock.c). The lease's margin. */
};

/* The lease's margin (lease.c), a twentieth of the session timeout: also how
 * late, at most, the session thread notices that the host slept. */
#define ZKL_LEASE_MARGIN_DIVISOR 20

/* Owners of timers reserve their slots first; arming then never fails. */
int zklock__timers_reserve(zklock_session_t *s, size_t k);
void zklock__timers_unreserve(zklock_session_t *s, size_t k);
void zklock__timers_free(zklock_session_t *s);
void zklock__timer_arm(zklock_session_t *s, struct zkl_timer *t, const struct timespec *at);
void zklock__timer_arm_in(zklock_session_t *s, struct zkl_timer *t, int ms);
void zklock__timer_cancel(zklock_session_t *s, struct zkl_timer *t);
bool zklock__timer_armed(const struct zkl_timer *t);
/* The session thread: fires what is due; sleeps until the next or a kick. */
void zklock__timers_fire_due(zklock_session_t *s);
void zklock__timers_sleep(zklock_session_t *s);

/* ---- dispatch.c: the user's callbacks, in order ---------------------------- */

struct zkl_callback;
struct zkl_callback_ops {
    bool (*begin)(struct zkl_callback *cb); /* s->mu held: run it after all? */
    void (*run)(struct zkl_callback *cb);   /* s->mu not held: the user's code */
    void (*end)(struct zkl_callback *cb);   /* s->mu held: after run, or dropped;
                                               frees cb */
};
struct zkl_callback {
    struct zkl_callback *next;
    const struct zkl_callback_ops *ops;
    const void *owner; /* what it is about (a lock handle), or NULL */
};

void zklock__dispatch_push(zklock_session_t *s, struct zkl_callback *cb);
/* ZKLOCK_DISPATCH_THREAD: starts the callback thread; stops it (without
 * s->mu) once it ran what is queued. */
int zklock__dispatch_start(zklock_session_t *s);
void zklock__dispatch_stop(zklock_session_t *s);
bool zklock__dispatch_one(zklock_session_t *s);
/* Runs the callbacks of a list (from zklock__dispatch_take), s->mu held on
 * entry and exit, dropped around each. */
void zklock__dispatch_run(zklock_session_t *s, struct zkl_callback *list);
int zklock__dispatch_init(zklock_session_t *s, bool poll);
void zklock__dispatch_fini(zklock_session_t *s);
struct zkl_callback *zklock__dispatch_take(zklock_session_t *s, const void *owner);
void zklock__dispatch_drop_all(zklock_session_t *s);
/* Is the calling thread inside one of s's callbacks? */
bool zklock__in_callback(const zklock_session_t *s);

#endif
