/* dispatch.c: the callbacks a session owes its user, in order.
 *
 * Everything the user hears (on_state, on_lost, ...) is queued here with
 * s->mu held, by whatever noticed it, and run later without the mutex, one at
 * a time and in order, on the session thread. The queue knows nothing of
 * what a callback is about: each entry brings its own operations. */
#include "internal.h"

#include <stdlib.h>

/* The session whose callback the calling thread is running, if any. */
static __thread zklock_session_t *running_callback_of;

bool zklock__in_callback(const zklock_session_t *s)
{
    return running_callback_of == s;
}

void zklock__dispatch_push(zklock_session_t *s, struct zkl_callback *cb)
{
    cb->next = NULL;
    if (s->cb_tail)
        s->cb_tail->next = cb;
    else
        s->cb_head = cb;
    s->cb_tail = cb;
    pthread_cond_signal(&s->thread_cond);
}

static struct zkl_callback *pop(zklock_session_t *s)
{
    struct zkl_callback *cb = s->cb_head;

    if (cb) {
        s->cb_head = cb->next;
        if (!s->cb_head)
            s->cb_tail = NULL;
    }
    return cb;
}

/* With s->mu held: runs the first queued callback (the mutex is dropped
 * meanwhile); false if there was none. */
bool zklock__dispatch_one(zklock_session_t *s)
{
    struct zkl_callback *cb = pop(s);

    if (!cb)
        return false;
    if (cb->ops->begin(cb)) {
        zklock_session_t *outer = running_callback_of;
        pthread_mutex_unlock(&s->mu);
        running_callback_of = s;
        cb->ops->run(cb);
        running_callback_of = outer;
        pthread_mutex_lock(&s->mu);
    }
    cb->ops->end(cb);
    return true;
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
    return taken;
}

/* A session being freed: whatever is still queued is dropped. */
void zklock__dispatch_drop_all(zklock_session_t *s)
{
    struct zkl_callback *cb;

    while ((cb = pop(s)) != NULL)
        cb->ops->end(cb);
}
