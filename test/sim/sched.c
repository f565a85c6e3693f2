/*
 * sched.c: the event queue (a binary heap ordered by time, then by the order
 * of scheduling) and the waiting lists of stopped processes.
 */
#include "sched.h"

#include <stdio.h>
#include <stdlib.h>

static struct {
    struct sim_event **heap;
    size_t n, cap;
    sim_time_t now;
    uint64_t seq, ran;
    bool stopped[SIM_MAX_PROCS], app_busy[SIM_MAX_PROCS];
    /* Events that came due while their thread could not run, in order. */
    struct sim_event *waiting_head[SIM_MAX_PROCS], *waiting_tail[SIM_MAX_PROCS];
    struct sim_event *app_head[SIM_MAX_PROCS], *app_tail[SIM_MAX_PROCS];
} Q;

static bool before(const struct sim_event *x, const struct sim_event *y)
{
    return x->at < y->at || (x->at == y->at && x->seq < y->seq);
}

static void heap_push(struct sim_event *ev)
{
    size_t i;

    if (Q.n == Q.cap) {
        Q.cap = Q.cap ? 2 * Q.cap : 256;
        Q.heap = realloc(Q.heap, Q.cap * sizeof *Q.heap);
        if (!Q.heap)
            abort();
    }
    for (i = Q.n++; i > 0; i = (i - 1) / 2) {
        struct sim_event *parent = Q.heap[(i - 1) / 2];
        if (!before(ev, parent))
            break;
        Q.heap[i] = parent;
    }
    Q.heap[i] = ev;
}

static struct sim_event *heap_pop(void)
{
    struct sim_event *top = Q.heap[0], *last = Q.heap[--Q.n];
    size_t i = 0;

    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= Q.n)
            break;
        if (c + 1 < Q.n && before(Q.heap[c + 1], Q.heap[c]))
            c++;
        if (!before(Q.heap[c], last))
            break;
        Q.heap[i] = Q.heap[c];
        i = c;
    }
    if (Q.n > 0)
        Q.heap[i] = last;
    return top;
}

void sim_sched_init(void)
{
    sim_sched_fini();
}

static void free_list(struct sim_event *ev)
{
    while (ev) {
        struct sim_event *next = ev->next;
        free(ev);
        ev = next;
    }
}

void sim_sched_fini(void)
{
    for (size_t i = 0; i < Q.n; i++)
        free(Q.heap[i]);
    free(Q.heap);
    for (int p = 0; p < SIM_MAX_PROCS; p++) {
        free_list(Q.waiting_head[p]);
        free_list(Q.app_head[p]);
    }
    Q = (typeof(Q)){0};
}

sim_time_t sim_now(void)
{
    return Q.now;
}

uint64_t sim_events_run(void)
{
    return Q.ran;
}

struct sim_event *sim_at(sim_time_t at, int proc, enum sim_thread th, sim_fn fn, void *p,
                         int64_t a, int64_t b)
{
    struct sim_event *ev = calloc(1, sizeof *ev);

    if (!ev)
        abort();
    ev->at = at < Q.now ? Q.now : at;
    ev->seq = Q.seq++;
    ev->fn = fn;
    ev->p = p;
    ev->a = a;
    ev->b = b;
    ev->proc = proc;
    ev->thread = th;
    heap_push(ev);
    return ev;
}

sim_time_t sim_next_at(void)
{
    return Q.n ? Q.heap[0]->at : INT64_MAX;
}

static void append(struct sim_event **head, struct sim_event **tail, struct sim_event *ev)
{
    ev->next = NULL;
    if (*tail)
        (*tail)->next = ev;
    else
        *head = ev;
    *tail = ev;
}

/* Puts a waiting list back into the queue, due now, in its order. */
static void requeue(struct sim_event **head, struct sim_event **tail)
{
    struct sim_event *ev = *head;

    *head = *tail = NULL;
    while (ev) {
        struct sim_event *next = ev->next;
        ev->at = Q.now;
        ev->seq = Q.seq++;
        heap_push(ev);
        ev = next;
    }
}

bool sim_step(sim_time_t until)
{
    struct sim_event *ev;

    if (Q.n == 0 || Q.heap[0]->at > until)
        return false;
    ev = heap_pop();
    Q.now = ev->at;
    if (ev->proc >= 0 && Q.stopped[ev->proc]) {
        append(&Q.waiting_head[ev->proc], &Q.waiting_tail[ev->proc], ev);
        return true;
    }
    if (ev->proc >= 0 && ev->thread == SIM_APP && Q.app_busy[ev->proc]) {
        append(&Q.app_head[ev->proc], &Q.app_tail[ev->proc], ev);
        return true;
    }
    Q.ran++;
    ev->fn(ev);
    free(ev);
    return true;
}

void sim_run_until(sim_time_t until)
{
    while (sim_step(until))
        ;
    if (until > Q.now)
        Q.now = until;
}

void sim_proc_stop(int proc)
{
    Q.stopped[proc] = true;
}

void sim_proc_resume(int proc)
{
    Q.stopped[proc] = false;
    requeue(&Q.waiting_head[proc], &Q.waiting_tail[proc]);
}

bool sim_proc_stopped(int proc)
{
    return Q.stopped[proc];
}

void sim_app_busy(int proc, bool busy)
{
    Q.app_busy[proc] = busy;
    if (!busy)
        requeue(&Q.app_head[proc], &Q.app_tail[proc]);
}

bool sim_app_is_busy(int proc)
{
    return Q.app_busy[proc];
}
