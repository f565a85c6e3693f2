/*
 * semaphore.c: at most max_leases holders at once, as Curator's
 * InterProcessSemaphoreV2 does it on the wire (or kazoo's Semaphore, with
 * ZKLOCK_WIRE_KAZOO):
 *
 *   Curator  <path>/locks/_c_<uuid>-lock-<seq>     the acquisition mutex
 *            <path>/leases/_c_<uuid>-lease-<seq>   the leases (data: identity)
 *   kazoo    <path>-__lock__/<hex>__lock__<seq>    the acquisition mutex
 *            <path>/<32 hex>                        the leases; <path>'s data is
 *                                                  max_leases, checked by all
 *
 * A lease contender first takes the acquisition mutex: an ordinary engine
 * contender of the semaphore's internal mutex handle, owned by the lease
 * contender (its only sub, see lib/subs.c). Under the mutex it makes its lease
 * node and lists the leases in one round trip, and holds when they number at
 * most max_leases, its own included; otherwise it waits, node and mutex kept,
 * for the leases to change (Curator's rule), told by a watch on them. kazoo looks
 * first and makes its node only if there is room; with the kazoo layout we do
 * the same, so that a kazoo peer never counts a waiter as a holder. Once it
 * holds, the contender lets the mutex go, in the background.
 *
 * Only the mutex holder watches the leases, so a release wakes at most one
 * waiter; the others wait in the mutex's queue, each on the node just ahead.
 * Safety does not rest on the mutex: a contender holds only if every lease
 * node there was when it looked, its own included, fits within max_leases,
 * so the holders at any moment all existed when the last of them looked.
 * The mutex gives progress (without it, max_leases + 1 contenders with nodes
 * could all wait for ever) and order (first come, first served).
 *
 * Each acquisition passes the mutex on: its delete, the next one's event
 * and lease, one after the other. When the last listing this handle made
 * left room beside its lease, the next acquisition lets the mutex go as it
 * makes its lease, not once the listing has answered (Curator's layout
 * only: kazoo looks before it makes one). Most then hold, and the next
 * contender's turn overlaps this one's round trip. One that finds no room
 * has no mutex to wait under (max + 1 such waiters would wait for ever):
 * its lease goes and it queues again, at the back, and waits under the
 * mutex as above, since it guesses once per acquisition. A wrong guess
 * costs a node made and deleted, a wake-up of the waiter under the mutex,
 * and the guesser's place: those queued behind it while it guessed go
 * first, once (the order documented in zklock(3)).
 */
#include "../lib/recipe.h"

#include <stdio.h>

struct zklock_semaphore {
    zklock_t lease;   /* the user's handle: its contenders are leases */
    zklock_t mutex;   /* the acquisition mutex: contenders owned by leases */
    int max;
    char max_text[16]; /* kazoo: max as <path>'s data says it */
    bool kazoo;
    bool room_seen;   /* the last listing left room beside its lease */
};

/* What a contender's last look at the leases said (kazoo's order only). */
enum { ROOM_UNKNOWN, ROOM_NONE, ROOM_FREE };

/* A lease contender's own state (its recipe data, made by prepare). */
struct lease {
    int room;      /* its last look at the leases: ROOM_* */
    bool guessed;  /* it let the acquisition lock go early once: never twice */
    bool guessing; /* ... just now: its create follows the lock's delete */
};

static struct lease *lease_of(const zkl_contender_t *c)
{
    return zklock__data(c);
}

static struct zklock_semaphore *sem_of(const zklock_t *l)
{
    return l->internal ? (struct zklock_semaphore *)((char *)l - offsetof(struct zklock_semaphore, mutex))
                       : (struct zklock_semaphore *)((char *)l - offsetof(struct zklock_semaphore, lease));
}

/* ---- the acquisition mutex ------------------------------------------------------------- */

/* c no longer wants its mutex: a hold is released, a queuing acquisition
 * canceled, in the background (subs.c). c finishes only once the mutex's
 * node is gone, so a failed acquisition leaves nothing behind. */
static void let_go_of_mutex(zkl_contender_t *c)
{
    zklock__subs_let_go(c);
}

/* The lease's step, first: its mutex's hold ended under it (its node
 * deleted by hand, or its lease ran out while the connection was down: its
 * node is deleted when the session is heard from again): a lease node made
 * under it no longer waits its turn, and blocks others. It goes (now, or as
 * the session reconnects); its contender starts over. (Ended with the
 * session: the engine requeued the contender anyway, and remembered its
 * node if it must.) */
static void start_over(zkl_contender_t *c);

static void lease_step(zkl_contender_t *c)
{
    zkl_contender_t *m = zklock__first_sub(c);

    if (!m || zklock__is_let_go(m) || zklock__phase(m) != ZKL_LOST ||
        zklock__between_sessions(zklock__lock_of(c)->s))
        return;
    if (zklock__wants(c) && zklock__node(c))
        start_over(c);
}

/* c's lease node no longer waits its turn (its acquisition lock is gone):
 * it goes, in the background, and c queues for the lock again. */
static void start_over(zkl_contender_t *c)
{
    zklock__stale_add(c);
    zklock__unwatch_queue(c);
    zklock__requeue(c);
    lease_of(c)->room = ROOM_UNKNOWN;
    zklock__stale_sweep(zklock__lock_of(c)->s);
}

/* Does c hold the acquisition lock it made its lease under? */
static bool under_mutex(const zkl_contender_t *c)
{
    const zkl_contender_t *m = zklock__first_sub(c);

    return m && zklock__phase(m) == ZKL_HELD && !zklock__is_let_go(m);
}

/* No room: c waits for a lease to go, told by a watch on the leases. Only a
 * waiter sets one (most listings find room: the watch would cost an event
 * for nothing), so the first time it looks again, watching. */
static void wait_for_leases(zkl_contender_t *c)
{
    lease_of(c)->room = ROOM_NONE;
    if (!zklock__queue_watched(c)) {
        zklock__set_queue_watch(c, true);
        zklock__set_list_wanted(c, true);
    }
}

/* ---- kazoo's checks -------------------------------------------------------------------- */

/* The lease contender's own requests (its answer hook reads them). */
enum { SEM_MAX = ZKL_REQ_RECIPE, SEM_ROOM };

/* kazoo stores max_leases in <path>'s data and refuses a peer that asks for
 * another number: so do we, at every acquisition (a peer may have made the
 * path again, with another number, since the last one). */
static bool send_max_check(zkl_contender_t *c)
{
    return zklock__send(c, &(struct zkl_request){.kind = SEM_MAX, .call = ZKL_CALL_GET,
                                                 .path = zklock__lock_of(c)->path});
}

/* No <path>: make it as kazoo does, persistent with our number in it (the
 * levels above as containers), unless the last try was refused. */
static void make_path(zkl_contender_t *c)
{
    if (zklock__parent_refusal(c) != 0) {
        zklock__failed(c, zklock__parent_refusal(c)); /* refused (an ACL, say): a lease would be too */
        return;
    }
    zklock__send_parents(c); /* its answers keep a refusal (zklock__parent_refusal) */
}

static void on_max(zkl_contender_t *c, const struct zkl_answer *a)
{
    if (zklock__phase(c) != ZKL_QUEUING)
        return;
    if (a->rc == ZOK && zklock__max_differs(a->value, a->len, sem_of(zklock__lock_of(c))->max))
        zklock__give_up(c, ZKLOCK_EMISMATCH);
    else if (a->rc == ZOK)
        zklock__set_parent_refusal(c, 0); /* the path is there */
    else if (a->rc == ZNONODE)
        make_path(c); /* the listing that follows finds none either: look again */
    else
        zklock__failed(c, a->rc);
}

/* kazoo's order: read the number and look at the leases, back to back (one
 * round trip), and make ours only if the number agrees and there is room
 * (watching the leases once there was none). */
static void look_for_room(zkl_contender_t *c)
{
    zklock__set_list_wanted(c, false);
    if (!send_max_check(c))
        return;
    if (zklock__send(c, &(struct zkl_request){
                            .kind = SEM_ROOM, .call = ZKL_CALL_CHILDREN,
                            .path = zklock__lock_of(c)->queue,
                            .watch = zklock__queue_watched(c) ? ZKL_WATCH_QUEUE : ZKL_WATCH_NONE}))
        zklock__queue_listing_sent(c);
}

static void on_room(zkl_contender_t *c, const struct zkl_answer *a)
{
    zklock__queue_listed(c, a->rc);
    if (zklock__phase(c) != ZKL_QUEUING)
        return;
    if (a->rc == ZOK && a->names->count < sem_of(zklock__lock_of(c))->max)
        lease_of(c)->room = ROOM_FREE;
    else if (a->rc == ZOK && zklock__try_once(c))
        zklock__give_up(c, ZKLOCK_EBUSY);
    else if (a->rc == ZOK)
        wait_for_leases(c);
    else if (a->rc != ZNONODE) /* no path: its number's answer makes it */
        zklock__failed(c, a->rc);
    if (a->rc != ZOK)
        lease_of(c)->room = ROOM_UNKNOWN; /* no watch was set: look again */
}

static void lease_answer(zkl_contender_t *c, const struct zkl_answer *a)
{
    if (a->kind == SEM_MAX)
        on_max(c, a);
    else if (a->kind == SEM_ROOM)
        on_room(c, a);
}

/* ---- the engine's hooks ---------------------------------------------------------------- */

/* A lease node is made only under the mutex (and, with kazoo's layout, once
 * a look found the path's max_leases agreeing, and room). */
static bool may_create(zkl_contender_t *c)
{
    struct zklock_semaphore *sem = sem_of(zklock__lock_of(c));
    zkl_contender_t *m;

    if (lease_of(c)->guessing) {
        lease_of(c)->guessing = false;
        return true; /* the lock's delete went out first: its next holder's turn comes sooner */
    }
    if (!zklock__subs_replace_lost(c)) /* lost with a session, or deleted: take it again */
        return false;
    if (zklock__first_sub(c) && zklock__is_let_go(zklock__first_sub(c)))
        return false; /* let go early: taken again once it is gone (subs.c) */
    if (!(m = zklock__sub_of(c, &sem->mutex)) &&
        !(m = zklock__sub_new(c, &sem->mutex, false))) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return false;
    }
    if (!zklock__sub_started(m)) {
        /* Under a new mutex (the last one lost with its session, say), look
         * at the leases afresh: a watch set before may have gone with the
         * session. */
        lease_of(c)->room = ROOM_UNKNOWN;
        zklock__sub_start(c, m);
        return false;
    }
    if (zklock__phase(m) != ZKL_HELD || zklock__is_let_go(m))
        return false;
    if (!sem->kazoo) {
        if (!sem->room_seen || zklock__try_once(c) || lease_of(c)->guessed)
            return true;
        /* Early (the top of the file): the lock's delete goes out ahead of
         * our create, so c steps again after the lock's step sent it. */
        lease_of(c)->guessed = lease_of(c)->guessing = true;
        let_go_of_mutex(c);
        zklock__mark(c);
        return false;
    }
    if (lease_of(c)->room == ROOM_FREE) {
        lease_of(c)->room = ROOM_UNKNOWN;
        return true;
    }
    if (lease_of(c)->room == ROOM_UNKNOWN || zklock__list_wanted(c))
        look_for_room(c);
    return false;
}

/* The leases, listed (and watched) just after our own was made: we hold if
 * they number at most max. */
static void judge(zkl_contender_t *c, const struct String_vector *names, const struct Stat *dir)
{
    struct zklock_semaphore *sem = sem_of(zklock__lock_of(c));
    enum zkl_lease_verdict verdict;
    const char *found, *node = zklock__node(c);
    bool room;

    (void)dir;
    if (zklock__create_unknown(c)) {
        /* A create whose reply was lost: ours if a lease has our name's
         * prefix (and, the owner check says, our session); if none has,
         * it was never made, and the next step makes it. */
        zklock__set_create_unknown(c, false);
        if (!(found = zklock__leases_find(names, zklock__prefix(c))))
            return;
        zklock__set_node(c, zklock__child_path(zklock__lock_of(c)->queue, found));
        if (zklock__node(c))
            zklock__send_owner_check(c);
        else
            zklock__give_up(c, ZKLOCK_ENOMEM);
        return;
    }
    if (zklock__phase(c) != ZKL_QUEUING)
        return;
    verdict = zklock__leases_judge(names, node ? basename_of(node) : NULL, sem->max,
                                   zklock__try_once(c), under_mutex(c), &room);
    if (verdict != ZKL_LEASE_GONE)
        sem->room_seen = room; /* the next acquisition's guess (the top of the file) */
    switch (verdict) {
    case ZKL_LEASE_GONE:
        zklock__unwatch_queue(c);
        zklock__requeue(c); /* our node went (deleted by hand) */
        break;
    case ZKL_LEASE_HOLDS:
        zklock__unwatch_queue(c);
        zklock__become_holder(c); /* and lets go of the mutex (granted) */
        break;
    case ZKL_LEASE_BUSY:
        zklock__give_up(c, ZKLOCK_EBUSY);
        break;
    case ZKL_LEASE_START_OVER:
        start_over(c); /* let go early, or lost while its create was in flight */
        break;
    case ZKL_LEASE_WAIT:
        wait_for_leases(c);
        break;
    }
}

/* Before a lease contender queues: its own state. */
static int lease_prepare(zklock_t *l, zkl_contender_t *c)
{
    struct lease *lease = calloc(1, sizeof *lease);

    (void)l;
    zklock__set_data(c, lease);
    return lease ? 0 : ZKLOCK_ENOMEM;
}

/* c gives up, or its hold ends. */
static void ending(zkl_contender_t *c)
{
    zklock__unwatch_queue(c);
    if (lease_of(c)) /* (none if its prepare failed) */
        lease_of(c)->room = ROOM_UNKNOWN;
    let_go_of_mutex(c);
}

/* The lease handle goes once nothing refers to it, and lets go of the
 * mutex handle, which frees the whole once nothing refers to it either (the
 * contenders it has left are deleting their nodes). */
static void lease_handle_gone(zklock_t *l)
{
    zklock__lock_unref(&sem_of(l)->mutex);
}

static void mutex_handle_gone(zklock_t *l)
{
    free(sem_of(l));
}

static const struct zkl_request_kind lease_kinds[] = {
    [SEM_MAX - ZKL_REQ_RECIPE] = {.beside = false},
    [SEM_ROOM - ZKL_REQ_RECIPE] = {.beside = false},
};

static const struct zkl_recipe lease_recipe = {
    .prepare = lease_prepare,
    .may_create = may_create,
    .judge = judge,
    .granted = let_go_of_mutex,
    .ending = ending,
    .step = lease_step,
    .answer = lease_answer,
    .kinds = lease_kinds,
    .nkinds = 2,
    .destroy = lease_handle_gone,
    .in_turn = true,
};

static const struct zkl_recipe mutex_recipe = {
    .destroy = mutex_handle_gone,
};

/* ---- creation -------------------------------------------------------------------------- */

/* Where the leases and the mutex's nodes go, as the wire has it. */
static int place_queues(struct zklock_semaphore *sem, const char *path)
{
    char *leases, *locks;
    int rc;

    if (sem->kazoo) {
        leases = strdup(path);
        locks = malloc(strlen(path) + sizeof "-__lock__");
        if (locks)
            sprintf(locks, "%s-__lock__", path);
    } else {
        leases = zklock__child_path(path, "leases");
        locks = zklock__child_path(path, "locks");
    }
    rc = leases && locks ? 0 : ZKLOCK_ENOMEM;
    if (rc == 0)
        rc = zklock__lock_queue_in(&sem->lease, leases);
    if (rc == 0)
        rc = zklock__lock_queue_in(&sem->mutex, locks);
    free(leases);
    free(locks);
    return rc;
}

int zklock_semaphore_new(zklock_t **out, zklock_session_t *s, const char *path, int max_leases,
                         const zklock_opts_t *opts)
{
    struct zklock_semaphore *sem;
    zklock_opts_t mutex_opts = {0};
    int rc;

    if (!out)
        return ZKLOCK_EINVAL;
    *out = NULL;
    if (max_leases < 1 || max_leases > ZKLOCK_SEMAPHORE_MAX)
        return ZKLOCK_EINVAL;
    sem = calloc(1, sizeof *sem);
    if (!sem)
        return ZKLOCK_ENOMEM;
    sem->max = max_leases;
    sem->kazoo = opts && opts->wire == ZKLOCK_WIRE_KAZOO;
    if (opts)
        mutex_opts = *opts; /* the wire, the ACL */
    mutex_opts.on_lost = NULL;
    mutex_opts.max_hold_ms = 0; /* held only while a lease is taken */
    mutex_opts.owner = ZKLOCK_OWNER_THREAD; /* its owners are lease contenders */
    rc = zklock__lock_init(&sem->lease, s, path, opts, ZKL_TAG_LEASE, ZKL_TAG_KLEASE);
    if (rc) {
        free(sem);
        return rc;
    }
    rc = zklock__lock_init(&sem->mutex, s, path, &mutex_opts, ZKL_TAG_LOCK, ZKL_TAG_KLOCK);
    if (rc == 0)
        rc = place_queues(sem, path);
    if (rc) {
        if (sem->mutex.path)
            zklock__lock_fini(&sem->mutex);
        zklock__lock_fini(&sem->lease);
        free(sem);
        return rc;
    }
    sem->lease.recipe = &lease_recipe;
    sem->lease.unnumbered = sem->kazoo; /* <path>/<32 hex> */
    snprintf(sem->max_text, sizeof sem->max_text, "%d", max_leases);
    if (sem->kazoo)
        sem->lease.queue_data = sem->max_text; /* <path>, made with its number */
    sem->mutex.recipe = &mutex_recipe;
    sem->mutex.internal = true;
    *out = &sem->lease;
    return ZKLOCK_OK;
}

/* ---- reading --------------------------------------------------------------------------- */

int zklock_semaphore_read(zklock_t *l, zklock_queue_t **leases, zklock_queue_t **waiting)
{
    struct zklock_semaphore *sem;
    zklock_queue_t *q = NULL;
    int rc;

    if (leases)
        *leases = NULL;
    if (waiting)
        *waiting = NULL;
    if (!l || l->recipe != &lease_recipe || (!leases && !waiting))
        return ZKLOCK_EINVAL;
    sem = sem_of(l);
    if (leases) {
        rc = zklock_queue_read(l->s, sem->lease.queue, &q);
        if (rc)
            return rc;
        zklock__queue_cap_holders(q, sem->max);
    }
    if (waiting && (rc = zklock_queue_read(l->s, sem->mutex.queue, waiting)) != 0) {
        zklock_queue_free(q);
        return rc;
    }
    if (leases)
        *leases = q;
    return ZKLOCK_OK;
}
