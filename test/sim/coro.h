/*
 * coro.h: a simulated thread that can block: a coroutine with a stack of its
 * own (ucontext), run and resumed by the scheduler on the simulator's one
 * operating-system thread. A wait inside it yields back to the scheduler,
 * which runs the world and resumes it later: a blocking call made by a
 * simulated process waits as on a thread of its own, and nothing nests.
 */
#ifndef SIM_CORO_H
#define SIM_CORO_H

#include <stdbool.h>

struct sim_coro;

struct sim_coro *coro_new(void);
void coro_free(struct sim_coro *c);
/* Starts fn(arg) on c (which must be idle): true once fn returned, false if
 * it yielded (coro_resume continues it). */
bool coro_start(struct sim_coro *c, void (*fn)(void *), void *arg);
bool coro_resume(struct sim_coro *c);
/* Inside a coroutine: back to whoever started or resumed it. */
void coro_yield(void);
/* The coroutine running now, NULL on the scheduler's own stack. */
struct sim_coro *coro_current(void);

#endif
