/*
 * events.h: virtual time and the one queue of events the simulation runs.
 *
 * Time is a number (nanoseconds since the run began), never the wall clock.
 * An event is a function with a few words of payload, due at a time; events
 * due at the same time run in the order they were scheduled, so a seed names
 * one order. An event may belong to a thread of a simulated process: while
 * that process is stopped (SIGSTOP, its host asleep) its events wait, and
 * run, in their order, once it runs again; while its application thread is
 * inside a slow callback, that thread's own events wait for it to return.
 */
#ifndef SIM_SCHED_H
#define SIM_SCHED_H

#include <stdbool.h>
#include <stdint.h>

typedef int64_t sim_time_t; /* nanoseconds of true time */

#define SIM_US(x) ((sim_time_t)(x) * 1000)
#define SIM_MS(x) ((sim_time_t)(x) * 1000000)
#define SIM_S(x) ((sim_time_t)(x) * 1000000000)

/* Which thread of a process an event runs on (what a stop holds up). */
enum sim_thread {
    SIM_WORLD = 0, /* the servers and the network: never stopped */
    SIM_IO,        /* a ZooKeeper handle's I/O thread */
    SIM_COMPLETION,/* a ZooKeeper handle's completion thread */
    SIM_SESSION,   /* zklock's session thread (its timers) */
    SIM_CALLBACK,  /* zklock's callback thread (ZKLOCK_DISPATCH_THREAD) */
    SIM_APP,       /* the application's thread: its calls and its dispatch */
    SIM_WAKE,      /* a blocked thread's deadline: wakes it */
    SIM_WORKER,    /* the application's other threads: SIM_WORKER + k, k < 8 */
    SIM_THREADS = SIM_WORKER + 8
};

/* The application's threads and the callback thread run their events on
 * coroutines (coro.h): they may block (a blocking call's wait, a slow
 * callback), and are resumed after every event of their process (what they
 * wait for comes from their own process's answers, events and timers) and
 * at their deadline (sim_wake_at). */

struct sim_event;
typedef void (*sim_fn)(struct sim_event *ev);

struct sim_event {
    sim_time_t at;
    uint64_t seq;
    sim_fn fn;
    void *p;
    int64_t a, b;
    int proc;            /* owning process, or -1 */
    enum sim_thread thread;
    struct sim_event *next; /* on a waiting list */
};

#define SIM_MAX_PROCS 8

/* The process and thread of the event running now (-1, SIM_WORLD: none). */
extern int sim_cur_proc;
extern enum sim_thread sim_cur_thread;

void sim_sched_init(void);
void sim_sched_fini(void);
sim_time_t sim_now(void);
/* Schedules fn at `at` (not before now) for a thread of proc (-1: world). */
struct sim_event *sim_at(sim_time_t at, int proc, enum sim_thread th, sim_fn fn, void *p,
                         int64_t a, int64_t b);
/* Runs the next event due at or before `until`; false if there is none. */
bool sim_step(sim_time_t until);
/* Runs every event due up to `until`, then moves time on to it. */
void sim_run_until(sim_time_t until);
/* When the next event is due (INT64_MAX if none). */
sim_time_t sim_next_at(void);
uint64_t sim_events_run(void);
/* A digest of the events run, their times and order: a seed's runs agree. */
uint64_t sim_events_digest(void);

/* A process stops (every thread of it) / runs again. */
void sim_proc_stop(int proc);
void sim_proc_resume(int proc);
bool sim_proc_stopped(int proc);
/* A thread of the process is busy: it runs an event (perhaps blocked in a
 * wait that runs the world, or in a callback that takes time), and its other
 * events wait until it is free again. sim_step marks it for each event. */
void sim_thread_busy(int proc, enum sim_thread th, bool busy);
bool sim_thread_is_busy(int proc, enum sim_thread th);
/* Called after every event that ran, and after a blocked thread ran again
 * (the simulator's checks). */
void sim_after_each(void (*fn)(const struct sim_event *ev));
/* Inside a blocked thread's coroutine: give the world its turn until the
 * thread is resumed (after an event of its process, or at `at`, true time;
 * INT64_MAX: no deadline). */
void sim_block(sim_time_t at);
/* Is the caller on a simulated thread that can block? */
bool sim_can_block(void);
/* Forgets every thread (a run's end; blocked ones are abandoned). */
void sim_threads_reset(void);

#endif
