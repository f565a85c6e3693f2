/*
 * sched.h: virtual time and the one queue of events the simulation runs.
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
    SIM_APP        /* the application's thread: its calls and its dispatch */
};

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

/* A process stops (every thread of it) / runs again. */
void sim_proc_stop(int proc);
void sim_proc_resume(int proc);
bool sim_proc_stopped(int proc);
/* The process's application thread is busy (inside a callback that takes
 * time): its own events wait until it is free again. */
void sim_app_busy(int proc, bool busy);
bool sim_app_is_busy(int proc);

#endif
