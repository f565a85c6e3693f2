/*
 * coro.c: coroutines on ucontext (coro.h). Under AddressSanitizer each
 * switch is announced (__sanitizer_start_switch_fiber) so that it follows
 * the stacks; under ThreadSanitizer each coroutine is a fiber of its own
 * (__tsan_switch_to_fiber).
 */
#include "coro.h"

#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#define SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define SIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIM_TSAN 1
#endif
#endif

#ifdef SIM_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif

#ifdef SIM_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
                                     size_t *size_old);
#endif

#define STACK_SIZE (1024 * 1024)

struct sim_coro {
    ucontext_t ctx, caller;
    char *stack;
    void (*fn)(void *);
    void *arg;
    bool done;
    const void *caller_bottom;
    size_t caller_size;
#ifdef SIM_TSAN
    void *fiber, *caller_fiber;
#endif
};

static struct sim_coro *running;

struct sim_coro *coro_new(void)
{
    struct sim_coro *c = calloc(1, sizeof *c);

    if (!c || !(c->stack = malloc(STACK_SIZE))) {
        fprintf(stderr, "coro: out of memory\n");
        abort();
    }
    c->done = true;
#ifdef SIM_TSAN
    c->fiber = __tsan_create_fiber(0);
#endif
    return c;
}

void coro_free(struct sim_coro *c)
{
    if (c) {
#ifdef SIM_TSAN
        __tsan_destroy_fiber(c->fiber);
#endif
        free(c->stack);
        free(c);
    }
}

struct sim_coro *coro_current(void)
{
    return running;
}

/* Into c, from the scheduler's stack. */
static void switch_in(struct sim_coro *c)
{
    struct sim_coro *outer = running;
#ifdef SIM_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, c->stack, STACK_SIZE);
#endif
    running = c;
#ifdef SIM_TSAN
    c->caller_fiber = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(c->fiber, 0);
#endif
    swapcontext(&c->caller, &c->ctx);
#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
    running = outer;
}

/* Out of the running coroutine, to its caller. */
static void switch_out(struct sim_coro *c)
{
#ifdef SIM_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(c->done ? NULL : &fake, c->caller_bottom, c->caller_size);
#endif
#ifdef SIM_TSAN
    __tsan_switch_to_fiber(c->caller_fiber, 0);
#endif
    swapcontext(&c->ctx, &c->caller);
#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(fake, &c->caller_bottom, &c->caller_size);
#endif
}

static void trampoline(void)
{
    struct sim_coro *c = running;

#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(NULL, &c->caller_bottom, &c->caller_size);
#endif
    c->fn(c->arg);
    c->done = true;
    switch_out(c);
}

bool coro_start(struct sim_coro *c, void (*fn)(void *), void *arg)
{
    if (!c->done) {
        fprintf(stderr, "coro: started while running\n");
        abort();
    }
    getcontext(&c->ctx);
    c->ctx.uc_stack.ss_sp = c->stack;
    c->ctx.uc_stack.ss_size = STACK_SIZE;
    c->ctx.uc_link = NULL;
    makecontext(&c->ctx, trampoline, 0);
    c->fn = fn;
    c->arg = arg;
    c->done = false;
    switch_in(c);
    return c->done;
}

bool coro_resume(struct sim_coro *c)
{
    if (c->done)
        return true;
    switch_in(c);
    return c->done;
}

void coro_yield(void)
{
    struct sim_coro *c = running;

    if (!c) {
        fprintf(stderr, "coro: yield outside a coroutine\n");
        abort();
    }
    switch_out(c);
}
