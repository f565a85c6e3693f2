/*
 * events.c: the event queue (a binary heap ordered by time, then by the order
 * of scheduling) and the waiting lists of stopped processes.
 */
#include "events.h"

#include "coro.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sim_cur_proc = -1;
enum sim_thread sim_cur_thread = SIM_WORLD;

static struct {
    struct sim_event **heap;
    size_t n, cap;
    sim_time_t now;
    uint64_t seq, ran, digest;
    bool stopped[SIM_MAX_PROCS], busy[SIM_MAX_PROCS][SIM_THREADS];
    /* Events that came due while their thread could not run, in order. */
    struct sim_event *waiting_head[SIM_MAX_PROCS], *waiting_tail[SIM_MAX_PROCS];
    struct sim_event *busy_head[SIM_MAX_PROCS][SIM_THREADS], *busy_tail[SIM_MAX_PROCS][SIM_THREADS];
    void (*after)(const struct sim_event *ev);
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
        for (int t = 0; t < SIM_THREADS; t++)
            free_list(Q.busy_head[p][t]);
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

uint64_t sim_events_digest(void)
{
    return Q.digest;
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

/* ---- the threads that can block ----------------------------------------------------- */

static struct runner {
    struct sim_coro *co;
    struct sim_event *ev;   /* the event it runs (blocked in it: not freed yet) */
    bool blocked;
    sim_time_t wake_at;     /* a wake-up is scheduled for then (0: none) */
} runners[SIM_MAX_PROCS][SIM_THREADS];

static bool on_coroutine(enum sim_thread th)
{
    return th == SIM_APP || th == SIM_CALLBACK || th >= SIM_WORKER;
}

static void run_on_coroutine(void *arg)
{
    struct sim_event *ev = arg;

    ev->fn(ev);
}

/* An event is over: its thread takes the next, the checks run. */
static void event_over(struct sim_event *ev)
{
    if (ev->proc >= 0)
        sim_thread_busy(ev->proc, ev->thread, false);
    if (Q.after)
        Q.after(ev);
    free(ev);
}

/* Runs ev (on its thread's coroutine, if it has one): false if it blocked. */
static bool run_event(struct sim_event *ev)
{
    struct runner *r;

    sim_cur_proc = ev->proc;
    sim_cur_thread = ev->thread;
    if (ev->proc < 0 || !on_coroutine(ev->thread)) {
        ev->fn(ev);
        return true;
    }
    r = &runners[ev->proc][ev->thread];
    if (!r->co)
        r->co = coro_new();
    r->ev = ev;
    if (coro_start(r->co, run_on_coroutine, ev)) {
        r->ev = NULL;
        return true;
    }
    r->blocked = true;
    return false;
}

/* The blocked threads of proc run again (what they wait for may be there). */
static void resume_blocked(int proc, const struct runner *just_ran)
{
    for (int t = 0; t < SIM_THREADS; t++) {
        struct runner *r = &runners[proc][t];
        struct sim_event *ev = r->ev;
        if (!r->blocked || r == just_ran || Q.stopped[proc])
            continue;
        sim_cur_proc = proc;
        sim_cur_thread = (enum sim_thread)t;
        if (coro_resume(r->co)) {
            r->blocked = false;
            r->ev = NULL;
            event_over(ev);
        } else if (Q.after) {
            Q.after(ev);
        }
    }
}

void sim_block(sim_time_t at)
{
    struct runner *r = &runners[sim_cur_proc][sim_cur_thread];

    if (at != INT64_MAX && r->wake_at != at) {
        r->wake_at = at; /* one wake-up per deadline, however often it waits */
        sim_at(at, sim_cur_proc, SIM_WAKE, NULL, NULL, 0, 0);
    }
    coro_yield();
}

bool sim_can_block(void)
{
    return coro_current() != NULL;
}

void sim_threads_reset(void)
{
    for (int p = 0; p < SIM_MAX_PROCS; p++)
        for (int t = 0; t < SIM_THREADS; t++) {
            struct runner *r = &runners[p][t];
            coro_free(r->co);
            free(r->ev);
            memset(r, 0, sizeof *r);
        }
}

/* ---- stepping --------------------------------------------------------------------------- */

/* Runs the next event that can run, due at or before `until`: events of a
 * stopped process, or of a thread busy with an event already (blocked in a
 * wait, or in a slow callback), wait their turn; a thread runs one event at
 * a time. Then the process's blocked threads run again. */
bool sim_step(sim_time_t until)
{
    struct sim_event *ev;
    const struct runner *ran;
    int proc;

    for (;;) {
        if (Q.n == 0 || Q.heap[0]->at > until)
            return false;
        ev = heap_pop();
        Q.now = ev->at;
        if (ev->proc >= 0 && Q.stopped[ev->proc]) {
            append(&Q.waiting_head[ev->proc], &Q.waiting_tail[ev->proc], ev);
            continue;
        }
        if (ev->proc >= 0 && Q.busy[ev->proc][ev->thread]) {
            append(&Q.busy_head[ev->proc][ev->thread], &Q.busy_tail[ev->proc][ev->thread], ev);
            continue;
        }
        break;
    }
    Q.ran++;
    /* what ran when, in which order (FNV-1a over the words): two runs of a
     * seed agree on it, or something outside the seed steered one */
    Q.digest = (Q.digest ^ (uint64_t)ev->at) * 0x100000001b3ULL;
    Q.digest = (Q.digest ^ ev->seq) * 0x100000001b3ULL;
    Q.digest = (Q.digest ^ (uint64_t)(ev->proc * 8 + (int)ev->thread)) * 0x100000001b3ULL;
    proc = ev->proc;
    ran = proc >= 0 ? &runners[proc][ev->thread] : NULL;
    if (proc >= 0 && ev->thread != SIM_WAKE)
        Q.busy[proc][ev->thread] = true;
    if (!ev->fn) { /* a wake-up: nothing but what follows */
        if (Q.after)
            Q.after(ev);
        free(ev);
    } else if (run_event(ev)) {
        event_over(ev);
    } else if (Q.after) {
        Q.after(ev);
    }
    if (proc >= 0)
        resume_blocked(proc, ran);
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

void sim_thread_busy(int proc, enum sim_thread th, bool busy)
{
    Q.busy[proc][th] = busy;
    if (!busy)
        requeue(&Q.busy_head[proc][th], &Q.busy_tail[proc][th]);
}

bool sim_thread_is_busy(int proc, enum sim_thread th)
{
    return Q.busy[proc][th];
}

void sim_after_each(void (*fn)(const struct sim_event *ev))
{
    Q.after = fn;
}
