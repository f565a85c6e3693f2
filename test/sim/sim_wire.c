/*
 * sim_wire.c: the wire table (lib/wire.h) of a simulated process.
 *
 * Requests go to the simulated client library (zs_client.c) as they are.
 * The clocks are the process's (zs_clock: CLOCK_BOOTTIME goes on while its
 * host sleeps, CLOCK_MONOTONIC does not). The session thread and the
 * callback thread are declined: their turns are events of the process
 * (SIM_SESSION: zklock__session_turn, scheduled after anything the process
 * did and at the time of its next timer; SIM_CALLBACK:
 * zklock__session_run_callbacks while callbacks are queued). A wait runs the
 * world one event at a time, the waiting thread's own events held back,
 * until the caller finds what it waits for (or its time passes): a
 * blocking call made on the simulator's one thread thus sees its outcome,
 * as on a thread of its own.
 */
#include "sim.h"

#include "session.h" /* s->cb_head: are callbacks queued (ZKLOCK_DISPATCH_THREAD)? */
#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

static int envs[SIM_MAX_PROCS];

void *sim_env_of(int proc)
{
    envs[proc] = proc;
    return &envs[proc];
}

static int proc_of(void *env)
{
    return *(int *)env;
}

/* ---- the table ------------------------------------------------------------------------ */

static zhandle_t *w_init(void *env, const char *host, watcher_fn fn, int recv_timeout,
                         const clientid_t *clientid, void *context, int flags)
{
    int saved = zs_w->current_proc;
    zhandle_t *zh;

    zs_w->current_proc = proc_of(env);
    zh = zs_init(host, fn, recv_timeout, clientid, context, flags);
    zs_w->current_proc = saved;
    return zh;
}

static int w_resolve(void *env, const char *hosts)
{
    (void)env;
    (void)hosts;
    return 0;
}

static void w_clock(void *env, clockid_t which, struct timespec *ts)
{
    zs_clock(proc_of(env), which, ts);
}

static sim_time_t ns_between(const struct timespec *from, const struct timespec *to)
{
    return (sim_time_t)(to->tv_sec - from->tv_sec) * SIM_S(1) + (to->tv_nsec - from->tv_nsec);
}

static jmp_buf *hang_escape;

/* A wait of a simulated thread that can block: it gives the world its turn
 * until it runs again (after an event of its process, or at `at`: on
 * CLOCK_MONOTONIC of the process, which stops while its host sleeps).
 * Elsewhere (the session thread's turn, which waits only for a handle lent
 * to a synchronous call): one event of the world, then back. */
static int w_cond_wait(void *env, pthread_cond_t *cond, pthread_mutex_t *mu,
                       const struct timespec *at)
{
    int proc = proc_of(env), cp = sim_cur_proc;
    enum sim_thread th = sim_cur_thread;
    sim_time_t until = INT64_MAX;
    struct timespec now;
    int rc = 0;

    (void)cond;
    if (at) {
        zs_clock(proc, CLOCK_MONOTONIC, &now);
        until = sim_now() + ns_between(&now, at);
    }
    pthread_mutex_unlock(mu);
    if (sim_can_block()) {
        sim_block(until);
    } else {
        if (!sim_step(until) && until != INT64_MAX)
            sim_run_until(until);
        if (sim_now() > sim_calls_end + SIM_S(600) && hang_escape) {
            truth_fail("a wait never ended (process %d, thread %d)", cp, th);
            longjmp(*hang_escape, 1);
        }
    }
    sim_cur_proc = cp;
    sim_cur_thread = th;
    pthread_mutex_lock(mu);
    if (at) {
        zs_clock(proc, CLOCK_MONOTONIC, &now);
        rc = ns_between(&now, at) <= 0 ? ETIMEDOUT : 0;
    }
    return rc;
}

static int w_thread_start(void *env, pthread_t *t, void *(*run)(void *), void *arg)
{
    (void)env;
    (void)t;
    (void)run;
    (void)arg;
    return ZKL_WIRE_NO_THREAD;
}

static void w_thread_join(void *env, pthread_t t)
{
    (void)env;
    (void)t;
}

static bool w_in_completion(void *env)
{
    return zs_w->delivering && zs_w->delivering_proc == proc_of(env);
}

/* The node names' generator (their uuids are in the trace): from the seed. */
static struct sim_rng names_rng;

static int w_seed(void *env, uint64_t state[2])
{
    (void)env;
    do {
        state[0] = sim_rng_next(&names_rng);
        state[1] = sim_rng_next(&names_rng);
    } while (state[0] == 0 && state[1] == 0);
    return 0;
}

const struct zkl_wire sim_wire = {
    .init = w_init,
    .init_ssl = NULL,
    .resolve = w_resolve,
    .close = zs_close,
    .state = zs_state,
    .recv_timeout = zs_recv_timeout,
    .client_id = zs_client_id,
    .add_auth = zs_add_auth,
    .set_servers_resolution_delay = zs_set_servers_resolution_delay,
    .acreate = zs_acreate,
    .acreate2 = zs_acreate2,
    .adelete = zs_adelete,
    .aexists = zs_aexists,
    .awexists = zs_awexists,
    .aget = zs_aget,
    .awget = zs_awget,
    .aset = zs_aset,
    .aget_children = zs_aget_children,
    .aget_children2 = zs_aget_children2,
    .awget_children2 = zs_awget_children2,
    .async = zs_async,
    .amulti = zs_amulti,
    .remove_watches = zs_remove_watches,
    .clock = w_clock,
    .cond_wait = w_cond_wait,
    .thread_start = w_thread_start,
    .thread_join = w_thread_join,
    .in_completion = w_in_completion,
    .seed = w_seed,
};

/* ---- the sessions' threads, as events ---------------------------------------------------- */

#define SIM_WATCHED 64

static struct watched {
    zklock_session_t *s;
    int proc;
    bool poll, live;
    uint64_t turn_gen;
    sim_time_t turn_at;
    bool callbacks_due;
} watched[SIM_WATCHED];
static int nwatched;

/* How long a thread takes to run once it is woken: a few microseconds to a
 * few hundred (the order of threads waking at once is the seed's). */
static sim_time_t jitter(sim_time_t max)
{
    return sim_between(&zs_w->rng, SIM_US(1), max);
}

static void turn_event(struct sim_event *ev);

static void schedule_turn(struct watched *w, sim_time_t at)
{
    if (at < sim_now())
        at = sim_now();
    if (at >= w->turn_at)
        return;
    w->turn_at = at;
    sim_at(at, w->proc, SIM_SESSION, turn_event, NULL, w - watched, (int64_t)++w->turn_gen);
}

/* A time of the session's timers, in true time: as the session thread
 * waits for it, the span from the library's own reading of its clock
 * (ZKLOCK_CLOCK, unless the library reads another: the simulator's clocks
 * differ only once a host has slept). */
static sim_time_t true_time_of(const zklock_session_t *s, const struct timespec *at)
{
    struct timespec now;

    zklock__now(s, &now);
    return sim_now() + ns_between(&now, at);
}

static void turn_event(struct sim_event *ev)
{
    struct watched *w = &watched[ev->a];
    struct timespec next;

    if (!w->live || (uint64_t)ev->b != w->turn_gen)
        return;
    w->turn_at = INT64_MAX;
    sim_cur_proc = w->proc;
    sim_cur_thread = SIM_SESSION;
    if (zklock__session_turn(w->s, &next))
        schedule_turn(w, true_time_of(w->s, &next) + jitter(SIM_US(100)));
}

static bool callbacks_queued(const struct watched *w)
{
    struct pollfd pfd;

    if (w->poll) {
        pfd.fd = zklock_session_fd(w->s);
        pfd.events = POLLIN;
        return pfd.fd >= 0 && poll(&pfd, 1, 0) == 1;
    }
    return w->s->cb_head != NULL;
}

static sim_time_t slow_for[SIM_MAX_PROCS];

void sim_callback_is_slow(int proc, sim_time_t d)
{
    if (d > slow_for[proc])
        slow_for[proc] = d;
}

/* The callbacks queued, run on their thread; a callback that was slow holds
 * that thread up afterwards (the world runs meanwhile). The lag is taken
 * once the batch has run, outside any callback: zklock keeps who runs a
 * callback in thread-local variables, which the simulator's threads (one
 * operating-system thread) would share if one of them paused inside one. */
static void callbacks_event(struct sim_event *ev)
{
    struct watched *w = &watched[ev->a];
    int proc = w->proc;
    sim_time_t d;

    if (!w->live)
        return;
    w->callbacks_due = false;
    sim_cur_proc = proc;
    sim_cur_thread = (enum sim_thread)ev->thread;
    if (w->poll)
        zklock_session_dispatch(w->s);
    else
        zklock__session_run_callbacks(w->s);
    if ((d = slow_for[proc]) > 0) {
        slow_for[proc] = 0;
        sim_sleep(proc, (enum sim_thread)ev->thread, d);
    }
}

/* When the session thread would wake next: at its first timer, or now if
 * it was kicked to open a new handle (read from the session: the thread's
 * own wait, timer.c's zklock__timers_sleep, sleeps on exactly this). */
static sim_time_t thread_due(const struct watched *w)
{
    const zklock_session_t *s = w->s;

    if (s->need_new_handle)
        return sim_now();
    if (s->timers.n > 0)
        return true_time_of(s, &s->timers.heap[0]->at);
    return INT64_MAX;
}

void sim_poke(int proc)
{
    for (int i = 0; i < nwatched; i++) {
        struct watched *w = &watched[i];
        sim_time_t due;
        if (!w->live || w->proc != proc)
            continue;
        if ((due = thread_due(w)) != INT64_MAX)
            schedule_turn(w, due + jitter(SIM_US(100)));
        if (!w->callbacks_due && callbacks_queued(w)) {
            w->callbacks_due = true;
            /* an event loop polls its descriptor now and then; the callback
             * thread wakes at once */
            sim_at(sim_now() + jitter(w->poll ? SIM_MS(3) : SIM_US(100)), proc,
                   w->poll ? SIM_APP : SIM_CALLBACK, callbacks_event, NULL, i, 0);
        }
    }
}

void sim_session_watch(zklock_session_t *s, int proc, bool poll)
{
    struct watched *w;

    if (nwatched == SIM_WATCHED)
        abort();
    w = &watched[nwatched++];
    memset(w, 0, sizeof *w);
    w->s = s;
    w->proc = proc;
    w->poll = poll;
    w->live = true;
    w->turn_at = INT64_MAX;
}

void sim_session_forget(zklock_session_t *s)
{
    for (int i = 0; i < nwatched; i++)
        if (watched[i].s == s)
            watched[i].live = false;
}

void sim_wire_reset(jmp_buf *escape, uint64_t seed)
{
    sim_rng_seed(&names_rng, seed, 5);
    nwatched = 0;
    memset(slow_for, 0, sizeof slow_for);
    hang_escape = escape;
    sim_cur_proc = -1;
    sim_cur_thread = SIM_WORLD;
}

int sim_session_open(int proc, zklock_session_t **out, const zklock_session_opts_t *opts)
{
    int rc, cp = sim_cur_proc;
    enum sim_thread th = sim_cur_thread;

    sim_cur_proc = proc;
    sim_cur_thread = SIM_APP;
    rc = zklock__session_open_on(out, "zk1:2181,zk2:2181,zk3:2181", opts, &sim_wire,
                                 sim_env_of(proc));
    if (rc == 0) {
        sim_session_watch(*out, proc, opts && opts->dispatch == ZKLOCK_DISPATCH_POLL);
        sim_poke(proc); /* what the open queued (on_state) */
    }
    sim_cur_proc = cp;
    sim_cur_thread = th;
    return rc;
}

/* A callback that takes d: its thread blocks, the world runs. */
void sim_sleep(int proc, enum sim_thread th, sim_time_t d)
{
    sim_time_t until = sim_now() + d;
    int cp = sim_cur_proc;
    enum sim_thread ct = sim_cur_thread;

    (void)proc;
    (void)th;
    while (sim_can_block() && sim_now() < until) {
        sim_block(until);
        sim_cur_proc = cp;
        sim_cur_thread = ct;
    }
}
