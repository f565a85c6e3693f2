/*
 * driver.c: the one loop that moves contenders.
 *
 * Whatever enters the library with s->mu taken (an answer or a watch event
 * from ZooKeeper, a timer, a session change, a user's call) records what it
 * learnt in the contenders it concerns, marks them, and calls
 * zklock__drive() once at its end. The driver then
 *   1. steps the marked contenders, in the order they were marked, until
 *      none is left (a step may mark others: a parent, a sub, itself);
 *   2. decides the owners' calls of the contenders it stepped;
 *   3. frees those of them that are finished: the one place a contender is
 *      freed, so nothing frees what the code above it still walks.
 * The shape of curl's multi interface (events only mark a transfer) and of
 * libuv's loop (handles are freed in one phase of it).
 */
#include "engine.h"

#include <assert.h>

void zklock__mark(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);

    if (c->marked)
        return;
    c->marked = true;
    c->mark_next = NULL;
    if (s->marked_tail)
        s->marked_tail->mark_next = c;
    else
        s->marked_head = c;
    s->marked_tail = c;
}

void zklock__mark_event(zkl_contender_t *c)
{
    zklock__mark(c);
    if (c->parent)
        zklock__mark(c->parent);
}

/* The next marked contender (NULL: none), now on the visited list. */
static zkl_contender_t *next_marked(zklock_session_t *s)
{
    zkl_contender_t *c = s->marked_head;

    if (!c)
        return NULL;
    s->marked_head = c->mark_next;
    if (!s->marked_head)
        s->marked_tail = NULL;
    c->marked = false;
    if (!c->visited) {
        c->visited = true;
        c->visit_next = s->visited;
        s->visited = c;
    }
    return c;
}

static void step_marked(zklock_session_t *s)
{
    zkl_contender_t *c;

    while ((c = next_marked(s)) != NULL)
        zklock__step(c);
}

/* The owners' calls of the contenders stepped: a blocked thread woken, a
 * done callback queued. */
static void decide_calls(zklock_session_t *s)
{
    for (zkl_contender_t *c = s->visited; c; c = c->visit_next)
        zklock__call_decide(c);
}

/* Frees the visited contenders that are finished; a parent's subs, let go
 * meanwhile, are marked (the next round frees them). */
static void free_finished(zklock_session_t *s)
{
    while (s->visited) {
        zkl_contender_t *c = s->visited;
        s->visited = c->visit_next;
        c->visited = false;
        if (!c->marked)
            zklock__free_if_finished(c);
    }
}

void zklock__drive(zklock_session_t *s)
{
    assert(!s->driving);
    s->driving = true;
    do {
        do {
            step_marked(s);
            decide_calls(s);
        } while (s->marked_head);
        free_finished(s);
    } while (s->marked_head);
    s->driving = false;
}
