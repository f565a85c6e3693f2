/* dispatch.c: the callbacks a session owes its user, in order.
 *
 * Everything the user hears (on_state, on_lost, done) is queued here with
 * s->mu held, by whatever noticed it, and run later without the mutex, one at
 * a time and in order: on the session's callback thread
 * (ZKLOCK_DISPATCH_THREAD), or on the user's own thread inside
 * zklock_session_dispatch() (ZKLOCK_DISPATCH_POLL), with an eventfd that is
 * readable while the queue is not empty. The queue knows nothing of what a
 * callback is about: each entry brings its own operations.
 *
 * The callback thread is not the session thread: a callback may take as
 * long as it likes without holding up a timer (the lease's heartbeats and
 * end, deadlines, the local expiry) or a renewal; only the callbacks queued
 * behind it wait. */
#include "session.h"
#include "timer.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* The session whose callback the calling thread is running, if any. */
static __thread zklock_session_t *running_callback_of;

bool zklock__in_callback(const zklock_session_t *s)
{
    return running_callback_of == s;
}

int zklock__dispatch_init(zklock_session_t *s, bool poll)
{
    s->event_fd = -1;
    s->poll_dispatch = poll;
    if (pthread_cond_init(&s->cb_cond, NULL) != 0)
        return ZKLOCK_ESYSTEM;
    s->cb_cond_made = true;
    if (poll && (s->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        return errno == ENOMEM ? ZKLOCK_ENOMEM : ZKLOCK_ESYSTEM;
    return 0;
}

void zklock__dispatch_fini(zklock_session_t *s)
{
    if (s->event_fd >= 0)
        close(s->event_fd);
    s->event_fd = -1;
    if (s->cb_cond_made)
        pthread_cond_destroy(&s->cb_cond);
    s->cb_cond_made = false;
}

/* The descriptor is readable exactly while the queue is not empty. */
static void set_readable(zklock_session_t *s, bool readable)
{
    uint64_t v = 1;

    if (s->event_fd < 0)
        return;
    if (readable)
        (void)!write(s->event_fd, &v, sizeof v);
    else
        (void)!read(s->event_fd, &v, sizeof v);
}

void zklock__dispatch_push(zklock_session_t *s, struct zkl_callback *cb)
{
    cb->next = NULL;
    if (s->cb_tail)
        s->cb_tail->next = cb;
    else {
        s->cb_head = cb;
        set_readable(s, true);
    }
    s->cb_tail = cb;
    pthread_cond_signal(&s->cb_cond);
}

static struct zkl_callback *pop(zklock_session_t *s)
{
    struct zkl_callback *cb = s->cb_head;

    if (cb) {
        s->cb_head = cb->next;
        if (!s->cb_head) {
            s->cb_tail = NULL;
            set_readable(s, false);
        }
    }
    return cb;
}

/* With s->mu held: runs cb, the mutex dropped meanwhile, and ends it. One
 * thread at a time runs a session's callbacks (the callback thread, a
 * dispatching thread, a zklock_free running a handle's last ones): the
 * others wait their turn, except the running thread itself (a callback
 * that frees a handle). */
static void run(zklock_session_t *s, struct zkl_callback *cb)
{
    bool mine = s->cb_running && pthread_equal(s->cb_runner, pthread_self());

    while (s->cb_running && !mine)
        zklock__cond_wait(s, &s->cond);
    s->cb_running = true;
    s->cb_runner = pthread_self();
    if (cb->ops->begin(cb)) {
        zklock_session_t *outer = running_callback_of;
        pthread_mutex_unlock(&s->mu);
        running_callback_of = s;
        cb->ops->run(cb);
        running_callback_of = outer;
        pthread_mutex_lock(&s->mu);
    }
    cb->ops->end(cb);
    if (!mine) {
        s->cb_running = false;
        pthread_cond_broadcast(&s->cond);
    }
}

/* With s->mu held: runs the first queued callback; false if there was none. */
bool zklock__dispatch_one(zklock_session_t *s)
{
    struct zkl_callback *cb = pop(s);

    if (!cb)
        return false;
    run(s, cb);
    return true;
}

void zklock__dispatch_run(zklock_session_t *s, struct zkl_callback *list)
{
    while (list) {
        struct zkl_callback *cb = list;
        list = cb->next;
        run(s, cb);
    }
}

/* ---- ZKLOCK_DISPATCH_THREAD: the callback thread --------------------------------------------- */

/* Runs what is queued, in order, until stopped; what is queued when it is
 * stopped runs first. */
static void *callback_thread(void *arg)
{
    zklock_session_t *s = arg;

    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (zklock__dispatch_one(s))
            continue;
        if (s->cb_stop)
            break;
        zklock__cond_wait(s, &s->cb_cond);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int zklock__dispatch_start(zklock_session_t *s)
{
    if (s->poll_dispatch)
        return 0;
    switch (s->wire->thread_start(s->wire_env, &s->cb_thread, callback_thread, s)) {
    case 0:
        s->cb_thread_started = true;
        return 0;
    case ZKL_WIRE_NO_THREAD:
        return 0; /* the wire's owner runs them (zklock__session_run_callbacks) */
    default:
        return ZKLOCK_ESYSTEM;
    }
}

void zklock__dispatch_stop(zklock_session_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->cb_stop = true;
    pthread_cond_signal(&s->cb_cond);
    pthread_mutex_unlock(&s->mu);
    if (s->cb_thread_started)
        s->wire->thread_join(s->wire_env, s->cb_thread);
    s->cb_thread_started = false;
}

/* ---- ZKLOCK_DISPATCH_POLL ---------------------------------------------------------------- */

int zklock_session_fd(zklock_session_t *s)
{
    return s && s->poll_dispatch ? s->event_fd : ZKLOCK_EINVAL;
}

int zklock_session_dispatch(zklock_session_t *s)
{
    if (!s || !s->poll_dispatch || zklock__in_callback(s))
        return ZKLOCK_EINVAL;
    return zklock__session_run_callbacks(s);
}

int zklock__session_run_callbacks(zklock_session_t *s)
{
    int ran = 0;
    size_t pending = 0;

    pthread_mutex_lock(&s->mu);
    for (struct zkl_callback *cb = s->cb_head; cb; cb = cb->next)
        pending++;
    /* Those queued now: what they queue waits for the next call. */
    for (; pending > 0 && zklock__dispatch_one(s); pending--)
        ran++;
    pthread_mutex_unlock(&s->mu);
    return ran;
}

/* Takes the queued callbacks of `owner` out of the queue, in order, and
 * returns them as a list (linked by next). */
struct zkl_callback *zklock__dispatch_take(zklock_session_t *s, const void *owner)
{
    struct zkl_callback **p = &s->cb_head, *prev = NULL, *taken = NULL, **tail = &taken;

    while (*p) {
        struct zkl_callback *cb = *p;
        if (cb->owner == owner) {
            *p = cb->next;
            if (s->cb_tail == cb)
                s->cb_tail = prev;
            cb->next = NULL;
            *tail = cb;
            tail = &cb->next;
        } else {
            prev = cb;
            p = &cb->next;
        }
    }
    if (!s->cb_head)
        set_readable(s, false); /* level: nothing is pending now */
    return taken;
}

/* A session being freed: whatever is still queued is dropped. */
void zklock__dispatch_drop_all(zklock_session_t *s)
{
    struct zkl_callback *cb;

    while ((cb = pop(s)) != NULL)
        cb->ops->end(cb);
}
