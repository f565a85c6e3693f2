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
 * contender (its only sub, see engine.h). Under the mutex it makes its lease
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
#include "../lib/engine.h"

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

static struct zklock_semaphore *sem_of(const zklock_t *l)
{
    return l->internal ? (struct zklock_semaphore *)((char *)l - offsetof(struct zklock_semaphore, mutex))
                       : (struct zklock_semaphore *)((char *)l - offsetof(struct zklock_semaphore, lease));
}

/* ---- the acquisition mutex ------------------------------------------------------------- */

/* c no longer wants its mutex: a hold is released, a queuing acquisition
 * canceled, in the background. c finishes only once the mutex's node is
 * gone (engine.h), so a failed acquisition leaves nothing behind. */
static void let_go_of_mutex(zkl_contender_t *c)
{
    if (!c->subs)
        return;
    zklock__let_go(c, c->subs);
    zklock__sub_pending(c); /* lets it go now if nothing of it is left */
}

/* A call on m, the mutex of lease contender m->parent, is decided. Runs in
 * m's events: it may not step or free the parent (engine.h). */
static void mutex_decided(zkl_contender_t *m, int rc)
{
    zkl_contender_t *c = m->parent;

    if (rc == ZKLOCK_OK && !m->let_go)
        return; /* held: the event's end steps c, which makes its lease now */
    zklock__disown(c, m);
    if (!m->let_go && c->phase == ZKL_QUEUING)
        zklock__give_up(c, rc); /* busy (try-once), closed, refused, ... */
}

static bool take_mutex(zkl_contender_t *c)
{
    zkl_contender_t *m = zklock__contender_new(&sem_of(c->l)->mutex);

    if (!m) {
        zklock__give_up(c, ZKLOCK_ENOMEM);
        return false;
    }
    zklock__adopt(c, m, mutex_decided);
    /* Under a new mutex (the last one lost with its session, say), look at
     * the leases afresh: a watch set before may have gone with the session. */
    c->recipe_state = ROOM_UNKNOWN;
    zklock__acquire_start(m, c->try_once ? 0 : -1, NULL, NULL);
    if (c->subs != m)
        zklock__reap(m); /* decided at once */
    return true;
}

/* The mutex's hold ended under its owner (its node deleted by hand, or its
 * lease ran out while the connection was down: its node is deleted when the
 * session is heard from again): a lease node made under it no longer waits
 * its turn, and blocks others. It goes (now, or as the session reconnects);
 * its contender starts over. (Ended with the session: the engine requeues
 * the contender anyway, and remembers its node if it must.) */
static void start_over(zkl_contender_t *c);

static void mutex_ending(zkl_contender_t *m)
{
    zkl_contender_t *c = m->parent;
    zklock_session_t *s = session_of(m);

    if (!c || m->let_go || m->phase != ZKL_LOST || s->state == ZKL_S_EXPIRED ||
        s->state == ZKL_S_CLOSED)
        return;
    if (c->phase == ZKL_QUEUING && c->node)
        start_over(c);
}

/* c's lease node no longer waits its turn (its acquisition lock is gone):
 * it goes, in the background, and c queues for the lock again. */
static void start_over(zkl_contender_t *c)
{
    zklock__stale_add(c);
    zklock__unwatch_queue(c);
    zklock__requeue(c);
    c->recipe_state = ROOM_UNKNOWN;
    zklock__stale_sweep(session_of(c));
}

/* Does c hold the acquisition lock it made its lease under? */
static bool under_mutex(const zkl_contender_t *c)
{
    return c->subs && c->subs->phase == ZKL_HELD && !c->subs->let_go;
}

/* No room: c waits for a lease to go, told by a watch on the leases. Only a
 * waiter sets one (most listings find room: the watch would cost an event
 * for nothing), so the first time it looks again, watching. */
static void wait_for_leases(zkl_contender_t *c)
{
    c->recipe_state = ROOM_NONE;
    if (!c->queue_watch) {
        c->queue_watch = true;
        c->need_list = true;
    }
}

/* ---- kazoo's checks -------------------------------------------------------------------- */

static void max_done(int rc, const char *value, int len, const struct Stat *st, const void *data);
static void room_done(int rc, const struct String_vector *names, const struct Stat *st,
                      const void *data);

/* kazoo stores max_leases in <path>'s data and refuses a peer that asks for
 * another number: so do we, at every acquisition (a peer may have made the
 * path again, with another number, since the last one). */
static bool send_max_check(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->busy++;
    zklock__op_begin(c);
    rc = zoo_aget(s->zh, c->l->path, 0, max_done, zklock__req(c));
    if (rc != ZOK)
        zklock__op_refused(c, rc);
    return rc == ZOK;
}

/* No <path>: make it as kazoo does, persistent with our number in it (the
 * levels above as containers: engine.c), unless the last try was refused. */
static void make_path(zkl_contender_t *c)
{
    if (c->parent_rc != 0) {
        zklock__failed(c, c->parent_rc); /* refused (an ACL, say): a lease would be too */
        return;
    }
    zklock__send_parents(c); /* its answers keep a refusal in c->parent_rc */
}

/* kazoo reads the data as a number, and ignores anything else. */
static bool max_differs(const char *value, int len, int max)
{
    char text[16], *end;
    long v;

    if (!value || len <= 0 || len >= (int)sizeof text)
        return false;
    memcpy(text, value, (size_t)len);
    text[len] = '\0';
    v = strtol(text, &end, 10);
    return end != text && *end == '\0' && v != max;
}

static void max_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    (void)st;
    c->busy--;
    if (c->phase == ZKL_QUEUING) {
        if (rc == ZOK && max_differs(value, len, sem_of(c->l)->max))
            zklock__give_up(c, ZKLOCK_EMISMATCH);
        else if (rc == ZOK)
            c->parent_rc = 0; /* the path is there */
        else if (rc == ZNONODE)
            make_path(c); /* the listing that follows finds none either: look again */
        else
            zklock__failed(c, rc);
    }
    ZKL_COMPLETION_END(c);
}

/* kazoo's order: read the number and look at the leases, back to back (one
 * round trip), and make ours only if the number agrees and there is room
 * (watching the leases once there was none). */
static void look_for_room(zkl_contender_t *c)
{
    zklock_session_t *s = session_of(c);
    int rc;

    c->need_list = false;
    if (!send_max_check(c))
        return;
    c->busy++;
    zklock__op_begin(c);
    if (c->queue_watch)
        rc = zoo_awget_children2(s->zh, c->l->queue, zklock__queue_watcher, c, room_done,
                                  zklock__req(c));
    else
        rc = zoo_aget_children2(s->zh, c->l->queue, 0, room_done, zklock__req(c));
    if (rc != ZOK)
        zklock__op_refused(c, rc);
    else
        zklock__queue_listing_sent(c);
}

static void room_done(int rc, const struct String_vector *names, const struct Stat *st,
                      const void *data)
{
    ZKL_COMPLETION_BEGIN(c);
    (void)st;
    c->busy--;
    zklock__queue_listed(c, rc);
    if (c->phase == ZKL_QUEUING) {
        if (rc == ZOK && names->count < sem_of(c->l)->max)
            c->recipe_state = ROOM_FREE;
        else if (rc == ZOK && c->try_once)
            zklock__give_up(c, ZKLOCK_EBUSY);
        else if (rc == ZOK)
            wait_for_leases(c);
        else if (rc != ZNONODE) /* no path: its number's answer makes it */
            zklock__failed(c, rc);
        if (rc != ZOK)
            c->recipe_state = ROOM_UNKNOWN; /* no watch was set: look again */
    }
    ZKL_COMPLETION_END(c);
}

/* ---- the engine's hooks ---------------------------------------------------------------- */

/* A lease node is made only under the mutex (and, with kazoo's layout, once
 * a look found the path's max_leases agreeing, and room). */
static bool may_create(zkl_contender_t *c)
{
    struct zklock_semaphore *sem = sem_of(c->l);
    zkl_contender_t *m = c->subs;

    if (m && (m->phase == ZKL_LOST || m->phase == ZKL_GONE)) {
        let_go_of_mutex(c); /* lost with a session, or deleted: take it again */
        m = c->subs;
    }
    if (!m) {
        take_mutex(c);
        return false;
    }
    if (m->phase != ZKL_HELD || m->let_go)
        return false;
    if (!sem->kazoo) {
        if (sem->room_seen && !c->try_once && !c->guessed) {
            c->guessed = true;
            let_go_of_mutex(c); /* early: see the top of the file */
        }
        return true;
    }
    if (c->recipe_state == ROOM_FREE) {
        c->recipe_state = ROOM_UNKNOWN;
        return true;
    }
    if (c->recipe_state == ROOM_UNKNOWN || c->need_list)
        look_for_room(c);
    return false;
}

/* The leases, listed (and watched) just after our own was made: we hold if
 * they number at most max. */
static void judge(zkl_contender_t *c, const struct String_vector *names, const struct Stat *dir)
{
    const char *own = c->node ? basename_of(c->node) : NULL;
    size_t plen = strlen(c->prefix);
    bool listed = false;

    (void)dir;
    if (c->create_unknown) {
        /* A create whose reply was lost: ours if a lease has our name's
         * prefix (and, the owner check says, our session). */
        c->create_unknown = false;
        for (int i = 0; i < names->count; i++) {
            if (strncmp(names->data[i], c->prefix, plen) != 0)
                continue;
            zklock__set_node(c, zklock__child_path(c->l->queue, names->data[i]));
            if (c->node)
                zklock__send_owner_check(c);
            else
                zklock__give_up(c, ZKLOCK_ENOMEM);
            return;
        }
        return; /* never made: the next step makes it */
    }
    if (c->phase != ZKL_QUEUING)
        return;
    for (int i = 0; i < names->count && own; i++)
        listed |= strcmp(names->data[i], own) == 0;
    if (listed)
        sem_of(c->l)->room_seen = names->count < sem_of(c->l)->max;
    if (!listed) {
        zklock__unwatch_queue(c);
        zklock__requeue(c); /* our node went (deleted by hand) */
    } else if (names->count <= sem_of(c->l)->max) {
        zklock__unwatch_queue(c);
        zklock__become_holder(c); /* and lets go of the mutex (granted) */
    } else if (c->try_once) {
        zklock__give_up(c, ZKLOCK_EBUSY);
    } else if (!under_mutex(c)) {
        start_over(c); /* let go early, or lost while its create was in flight */
    } else {
        wait_for_leases(c);
    }
}

/* c gives up, or its hold ends. */
static void ending(zkl_contender_t *c)
{
    zklock__unwatch_queue(c);
    c->recipe_state = ROOM_UNKNOWN;
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

static const struct zkl_recipe lease_recipe = {
    .may_create = may_create,
    .judge = judge,
    .granted = let_go_of_mutex,
    .ending = ending,
    .destroy = lease_handle_gone,
    .in_turn = true,
};

static const struct zkl_recipe mutex_recipe = {
    .ending = mutex_ending,
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
