/*
 * recipe.h: the interface between the engine and the recipes (the files of
 * recipes/, which include this header only).
 *
 * A recipe is a table of hooks (struct zkl_recipe) by which it changes the
 * engine's rules where it differs from the mutex's, and the handles it
 * makes (zklock_t, handle.h: a recipe embeds them). It sees a contender as
 * an opaque zkl_contender_t, through the accessors and the verbs declared
 * here, and calls nothing else of the library (the pure rules of names.h
 * and rules.h aside, and ZooKeeper's op builders for a multi). The engine
 * calls a recipe only through its hooks; a recipe calls down. Everything
 * runs with the session's mutex held, but a recipe's public calls, which
 * take it (zklock__session_lock).
 *
 * The engine's own headers include this one: what is declared here is
 * declared only here.
 */
#ifndef ZKLOCK_RECIPE_H
#define ZKLOCK_RECIPE_H

#include "common.h"
#include "handle.h"
#include "names.h"
#include "rules.h"

/* ---- the vocabulary the engine and the recipes share ---------------------------------------- */

/* A contender's phases; phase.c draws the transitions between them. */
enum zkl_phase {
    ZKL_QUEUING,  /* wants the lock: creating, listing or watching */
    ZKL_GRANTING, /* its turn came on an old lease (heard from more than
                     half a timeout ago, or run out): holds once a
                     heartbeat proves the session lives (lease.c) */
    ZKL_HELD,     /* holds it */
    ZKL_LOST,     /* held it; the session ended or the node was deleted */
    ZKL_LEAVING,  /* giving up or releasing: its node must go */
    ZKL_GONE,     /* finished: no node on the server */
    ZKL_PHASE_COUNT
};

/* What a contender's request is for: its answer is read by kind (step.c;
 * a recipe's own kinds, from ZKL_REQ_RECIPE on, by its answer hook). */
enum zkl_req {
    ZKL_REQ_PARENT,      /* create a level of the lock path */
    ZKL_REQ_TOP_PARENT,  /* ... its top level */
    ZKL_REQ_CREATE,      /* create2 our node */
    ZKL_REQ_LIST,        /* get_children2 the queue (watching it: zklock__watch_queue) */
    ZKL_REQ_SYNC,        /* sync, before a recovery's listing */
    ZKL_REQ_OWNER,       /* get our node: its ephemeralOwner */
    ZKL_REQ_DELETE,      /* delete our node */
    ZKL_REQ_PROBE,       /* exists the lock path: does the session live? */
    ZKL_REQ_WATCH,       /* get the node that blocks us, watching it */
    ZKL_REQ_OWN_WATCH,   /* get our node, watching it (not part of the chain) */
    ZKL_REQ_RECORD_READ, /* get the previous holder's record (previous.c) */
    ZKL_REQ_RECORD_WRITE, /* ... write "held" by us: a multi with a check of our node */
    ZKL_REQ_RECORD_REFRESH, /* ... write it again while we hold (the same multi) */
    ZKL_REQ_RECORD_END,  /* ... delete our node and write what we leave: a multi */
    ZKL_REQ_RECIPE       /* the recipe's own, from here (struct zkl_recipe's kinds) */
};

/* A recipe's own request kinds: ZKL_REQ_RECIPE + 0 .. nkinds - 1, at most
 * this many (the completion's data is a byte per ticket and kind). */
#define ZKL_RECIPE_KINDS_MAX 50

/* The ZooKeeper calls a request may be. */
enum zkl_call {
    ZKL_CALL_CREATE, ZKL_CALL_CREATE2, ZKL_CALL_CHILDREN, ZKL_CALL_SYNC, ZKL_CALL_GET,
    ZKL_CALL_EXISTS, ZKL_CALL_DELETE, ZKL_CALL_MULTI, ZKL_CALL_SET
};

/* The watch a request sets (children, get): its event goes to the
 * contender, through the engine's door of that kind. */
enum zkl_watch { ZKL_WATCH_NONE, ZKL_WATCH_BLOCKER, ZKL_WATCH_OWN, ZKL_WATCH_QUEUE };

struct zkl_request {
    int kind;                      /* enum zkl_req, or a recipe's own */
    enum zkl_call call;
    const char *path;
    const char *data;              /* create, set (any version) */
    int len;
    const struct ACL_vector *acl;
    int flags;
    enum zkl_watch watch;          /* children, get: sets this watch */
    int nops;                      /* multi */
    const zoo_op_t *ops;
    zoo_op_result_t *results;
};

/* An answer to a contender's request, recorded for its step (request.c):
 * it and its payload are the completion's (borrowed from ZooKeeper's
 * client), valid for the drive the completion ends with. */
struct zkl_answer {
    int kind;                 /* enum zkl_req */
    int rc;
    const char *value;        /* create: the name made; get: the data */
    int len;
    const struct Stat *stat;
    const struct String_vector *names;
};

/* A recipe's own request kind (from ZKL_REQ_RECIPE, in order). */
struct zkl_request_kind {
    bool beside; /* beside the contender's chain: its answer and its
                    refusal are the recipe's alone (an election's proclaim) */
};

/* A blocked caller's record of its call's outcome (on its stack), and what
 * it waits on: once the call is decided, the caller never touches the
 * contender again, so the drive that decided it may free it. */
struct zkl_waiter {
    bool decided;
    int rc;
    pthread_cond_t cond;
};

/* An asynchronous call's completion (owner.c). */
struct zkl_done;

/* ---- the hooks ----------------------------------------------------------------------------- */

/* A contender that holds by another's place: a read/write lock's downgrade
 * heir (rwlock.c), made by its writer's node with its writer's number. */
struct zkl_heir_hooks {
    /* Does c hold by another's place, and does that place still stand (its
     * writer holds by it)? */
    bool (*inherits)(const zkl_contender_t *c);
    bool (*place_stands)(const zkl_contender_t *c);
    /* The name of the node that place is (in a listing), or NULL. */
    const char *(*place_node)(const zkl_contender_t *c);
    /* c queues as a plain contender from now on. */
    void (*forget_place)(zkl_contender_t *c);
    /* Makes c's node itself (true), instead of the engine's create and
     * listing (a heir's check and create in one multi). */
    bool (*create)(zkl_contender_t *c);
};

/* What a recipe changes in the engine's rules. Any hook may be NULL: the
 * default rule (the mutex's). Called with s->mu held. */
struct zkl_recipe {
    /* -- taking its turn -- */
    /* Before queuing: may refuse (ZKLOCK_EDEADLK), make c a downgrade heir,
     * make c's recipe data. */
    int (*prepare)(zklock_t *l, zkl_contender_t *c);
    /* May c create its node now? If not, the recipe steps c when it may. */
    bool (*may_create)(zkl_contender_t *c);
    /* What a listing of the queue means for c, instead of the default rule
     * (the listing also set a watch on the queue if c watches it). */
    void (*judge)(zkl_contender_t *c, const struct String_vector *names, const struct Stat *dir);
    const struct zkl_heir_hooks *heir; /* NULL: nobody holds by another's place */
    /* -- its hold -- */
    /* c holds now: let go of what it took to get there. */
    void (*granted)(zkl_contender_t *c);
    /* c gives up, or its hold ends: end what the recipe started for it
     * (let its subs go: they are marked, never called). */
    void (*ending)(zkl_contender_t *c);
    /* -- its own step and requests -- */
    /* The recipe's part of c's step, before the engine's: reads what became
     * of c's subs, sends its own requests. */
    void (*step)(zkl_contender_t *c);
    /* The answer to one of its own requests (kinds from ZKL_REQ_RECIPE). */
    void (*answer)(zkl_contender_t *c, const struct zkl_answer *a);
    const struct zkl_request_kind *kinds; /* its kinds (NULL: none) ... */
    int nkinds;                           /* ... how many (ZKL_RECIPE_KINDS_MAX) */
    /* -- memory and the handle's end -- */
    /* Frees the memory of l once nothing refers to it. */
    void (*destroy)(zklock_t *l);
    /* Frees c's recipe data as c is freed (NULL: free() it). */
    void (*free_data)(zkl_contender_t *c);
    /* zklock_free(l): end the recipe's own calls in flight on l (an
     * election's proclaims), their done callbacks ZKLOCK_ECANCELED. */
    void (*retiring)(zklock_t *l);
    /* -- its shape -- */
    bool nodeless; /* its contenders make no node of their own (a multi-lock) */
    bool in_turn;  /* a multi-lock takes it alone, in path order, once it holds
                      every plain lock (a semaphore) */
};

/* ---- reading a contender ------------------------------------------------------------------- */

zklock_t *zklock__lock_of(const zkl_contender_t *c);
enum zkl_phase zklock__phase(const zkl_contender_t *c);
/* Wants the lock and has not got it: QUEUING, or GRANTING. */
bool zklock__wants(const zkl_contender_t *c);
const char *zklock__node(const zkl_contender_t *c); /* its node's path, or NULL */
int32_t zklock__seq(const zkl_contender_t *c);
int64_t zklock__token(const zkl_contender_t *c);    /* its node's czxid */
const char *zklock__prefix(const zkl_contender_t *c); /* its nodes' names start so */
bool zklock__waiting(const zkl_contender_t *c);     /* its owner's acquisition is on */
/* ... or its multi-lock's, c a member whose turn may have come: either way
 * its owner does not hold c's lock yet (zklock.h, the multi-lock) */
bool zklock__acquiring(const zkl_contender_t *c);
bool zklock__attached(const zkl_contender_t *c);    /* its owner still refers to it */
bool zklock__try_once(const zkl_contender_t *c);
/* A create's reply was lost: its node is looked for by its prefix. */
bool zklock__create_unknown(const zkl_contender_t *c);
/* Requests of its chain in flight; all its requests in flight. */
int zklock__busy(const zkl_contender_t *c);
int zklock__in_flight(const zkl_contender_t *c);
/* Its lost hold: why (0 while a probe asks), and whether a probe asks. */
int zklock__lost_why(const zkl_contender_t *c, bool *unconfirmed);
/* Why creating the lock path was refused (0: it was not); is it to be made? */
int zklock__parent_refusal(const zkl_contender_t *c);
bool zklock__parents_wanted(const zkl_contender_t *c);
bool zklock__list_wanted(const zkl_contender_t *c);
bool zklock__queue_watched(const zkl_contender_t *c);
void *zklock__data(const zkl_contender_t *c);       /* the recipe's own */
/* The contenders of l; its subs (a parent's own contenders of other
 * handles), and a sub's parent (or NULL). */
zkl_contender_t *zklock__first(const zklock_t *l);
zkl_contender_t *zklock__next(const zkl_contender_t *c);
zkl_contender_t *zklock__first_sub(const zkl_contender_t *c);
zkl_contender_t *zklock__next_sub(const zkl_contender_t *m);
zkl_contender_t *zklock__parent_of(const zkl_contender_t *m);
bool zklock__is_let_go(const zkl_contender_t *m);     /* its parent no longer wants it */
bool zklock__by_parent(const zkl_contender_t *m);     /* its parent starts it, or makes its node */
/* Do a and b belong to one owner (a thread, or the handles' owner)? */
bool zklock__same_owner(const zkl_contender_t *a, const zkl_contender_t *b);
/* Does c hold by another's place (a downgrade heir)? */
bool zklock__inherits(const zkl_contender_t *c);

/* ---- writing it ---------------------------------------------------------------------------- */

void zklock__set_data(zkl_contender_t *c, void *data);
/* Our node changes (NULL: we have none; malloc'ed, c's from now on). */
void zklock__set_node(zkl_contender_t *c, char *node);
void zklock__set_seq(zkl_contender_t *c, int32_t seq);
void zklock__set_token(zkl_contender_t *c, int64_t token);
void zklock__set_create_unknown(zkl_contender_t *c, bool unknown);
void zklock__set_parent_refusal(zkl_contender_t *c, int rc);
void zklock__set_parents_wanted(zkl_contender_t *c, bool wanted);
/* Its listings watch the whole queue (a semaphore's waiter), or not. */
void zklock__set_queue_watch(zkl_contender_t *c, bool watch);
void zklock__set_list_wanted(zkl_contender_t *c, bool wanted); /* its step lists the queue */
void zklock__set_by_parent(zkl_contender_t *m, bool by_parent);
/* m's node is being made by its parent (in the parent's multi): its chain
 * waits for that answer (begin), which came (end). */
void zklock__chain_begin(zkl_contender_t *m);
void zklock__chain_end(zkl_contender_t *m);

/* ---- the verbs ----------------------------------------------------------------------------- */

/* Something about c changed: the driver steps it (O(1), idempotent). */
void zklock__mark(zkl_contender_t *c);
/* c gives up (its acquisition is over, or its hold released: rc
 * ZKLOCK_OK): LEAVING while its node goes, then GONE. */
void zklock__give_up(zkl_contender_t *c, int rc);
/* Its owner lets go of c (the driver frees it once nothing else refers to it). */
void zklock__abandon(zkl_contender_t *c);
/* c holds (false: not on a lease that ran out; it is GRANTING then, and
 * holds once a heartbeat proves the session). */
bool zklock__become_holder(zkl_contender_t *c);
/* A held lock is gone (reason: ZKLOCK_LOST_*) ... */
void zklock__lose(zkl_contender_t *c, int reason);
/* ... and we do not know why: a probe asks (fallback: if the session lives). */
void zklock__lose_unconfirmed(zkl_contender_t *c, int fallback);
/* Starts over with a new node name, as a plain contender. */
void zklock__requeue(zkl_contender_t *c);
/* A request failed: retry when the connection is back, or give up. */
void zklock__failed(zkl_contender_t *c, int rc);
/* A write of c's was answered rc: the lease runs from when it was sent. */
void zklock__heard(zkl_contender_t *c, int rc);
/* Sends r for c: counted, its answer recorded for c's step (the answer
 * hook for a recipe's own kind); a refusal by the client is a fact for
 * c's next step: false. */
bool zklock__send(zkl_contender_t *c, const struct zkl_request *r);
/* Sends r, of a kind beside c's chain: the client's code (ZOK: sent). */
int zklock__send_beside(zkl_contender_t *c, const struct zkl_request *r);
/* May c (and its subs) send in this session generation? */
bool zklock__may_send(const zkl_contender_t *c);
/* The path c creates its node at (malloc'ed); the requests of its own that a
 * recipe sends (the queue's missing levels, a listing that is judged, the
 * owner check after a lost create reply). */
char *zklock__node_name(zkl_contender_t *c);
void zklock__send_parents(zkl_contender_t *c);
bool zklock__send_list(zkl_contender_t *c);
void zklock__send_owner_check(zkl_contender_t *c);
/* A listing that watches the queue went out, and was answered rc (the
 * watch registered, and taken back if c no longer wants it). */
void zklock__queue_listing_sent(zkl_contender_t *c);
void zklock__queue_listed(zkl_contender_t *c, int rc);
/* The queue's watch is taken back (and no longer wanted). */
void zklock__unwatch_queue(zkl_contender_t *c);
/* c's node may outlive what it is for: the session removes it (now, if
 * connected: sweep). */
void zklock__stale_add(zkl_contender_t *c);
void zklock__stale_sweep(zklock_session_t *s);

/* ---- sub-acquisitions (a semaphore's acquisition lock, a multi-lock's members) ------------ */

/* A new sub of c on handle l, owned by c's owner; `by_parent`: it takes no
 * step of its own until c starts it or makes its node. NULL: no memory. */
zkl_contender_t *zklock__sub_new(zkl_contender_t *c, zklock_t *l, bool by_parent);
/* Starts the acquisition of c's sub m (a try-once if c's is). */
void zklock__sub_start(zkl_contender_t *c, zkl_contender_t *m);
/* Has m's acquisition started (or ended)? */
bool zklock__sub_started(const zkl_contender_t *m);
/* c's sub on handle l, unless let go; or NULL. */
zkl_contender_t *zklock__sub_of(const zkl_contender_t *c, const zklock_t *l);
/* c no longer wants its sub m (its step releases a hold or gives up an
 * acquisition, in the background); or any of them. */
void zklock__let_go(zkl_contender_t *c, zkl_contender_t *m);
void zklock__subs_let_go(zkl_contender_t *c);
/* A sub whose hold or place went while c still waits: a new sub of the
 * same handle takes its place. False if out of memory (c gave up). */
bool zklock__subs_replace_lost(zkl_contender_t *c);
/* c lets go of its sub m for good (the driver frees it once it can). */
void zklock__disown(zkl_contender_t *c, zkl_contender_t *m);

/* ---- the session, the handles, the calls -------------------------------------------------- */

/* The session's mutex, for a recipe's public calls. */
void zklock__session_lock(zklock_session_t *s);
void zklock__session_unlock(zklock_session_t *s);
const char *zklock__identity(const zklock_session_t *s); /* its nodes' data */
unsigned zklock__generation(const zklock_session_t *s);  /* moves on as a session ends */
bool zklock__closing(const zklock_session_t *s);         /* zklock_session_close began */
bool zklock__between_sessions(const zklock_session_t *s); /* expired, or closed */
bool zklock__connected(const zklock_session_t *s);
/* Would waiting for s's answers wait for the calling thread itself? */
bool zklock__on_completion_thread(const zklock_session_t *s);
/* Runs the driver: once at the end of a recipe's public call. */
void zklock__drive(zklock_session_t *s);
/* Before a call reads a hold: a lapse the session thread has not seen yet
 * (the lease's end, a maximum hold, a record's lease: the host slept) ends
 * its holds now, an entry of its own that runs the driver; nothing is
 * driven while none passed. */
void zklock__lapses_caught(zklock_session_t *s);
/* The contender of l's owner that is the caller (its thread, or the handle). */
zkl_contender_t *zklock__owner_contender(const zklock_t *l);
/* A done callback, allocated before its call starts; queued with rc. */
struct zkl_done *zklock__done_new(zklock_t *l, zklock_done_fn fn, void *ctx);
void zklock__done_discard(struct zkl_done *d);
void zklock__done_queue(struct zkl_done *d, int rc);
/* With s->mu held: a blocked caller's record, made and undone (false: no
 * condition variable); waits on it (or returns early: look again). */
bool zklock__waiter_init(struct zkl_waiter *w);
void zklock__waiter_fini(struct zkl_waiter *w);
void zklock__cond_wait(zklock_session_t *s, pthread_cond_t *cond);

/* A handle (handle.c): made with the wire's tags, queuing in another
 * path than its own, undone unused, unreferenced (the last reference
 * frees it, its recipe's destroy hook then). */
int zklock__lock_init(zklock_t *l, zklock_session_t *s, const char *path,
                      const zklock_opts_t *opts, enum zkl_tag curator_tag, enum zkl_tag kazoo_tag);
int zklock__lock_queue_in(zklock_t *l, const char *queue);
void zklock__lock_fini(zklock_t *l);
void zklock__lock_ref(zklock_t *l);
void zklock__lock_unref(zklock_t *l);
/* zklock_free of n handles, in order (each one's owed callbacks run before
 * the next goes), and of the session if it was the last (lock.c). */
void zklock__locks_free(zklock_t *const locks[], size_t n);
/* A semaphore's leases, read from outside: the first max hold (inspect.c). */
void zklock__queue_cap_holders(zklock_queue_t *q, int max);

/* ---- mutex.c: a handle whose nodes exclude every other --------------------------------------- */

/* A mutex or an election; kazoo's naming is its Lock's. recipe: NULL for
 * the default rules. */
int zklock__exclusive_new(zklock_t **out, zklock_session_t *s, const char *path,
                          const zklock_opts_t *opts, enum zkl_tag curator_tag,
                          const struct zkl_recipe *recipe);

#endif
