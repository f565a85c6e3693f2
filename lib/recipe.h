/*
 * recipe.h: what a recipe (the files of recipes/) sees of the library:
 * the hooks by which it changes the engine's rules, and what it may call: a
 * contender's state and verbs, the send function, the sub-acquisitions, the
 * rules, its handle. The engine calls a recipe only through its hooks; a recipe calls
 * down. Everything runs with s->mu held.
 */
#ifndef ZKLOCK_RECIPE_H
#define ZKLOCK_RECIPE_H

#include "contender.h"
#include "driver.h"
#include "handle.h"
#include "inspect.h"
#include "names.h"
#include "owner.h"
#include "request.h"
#include "rules.h"
#include "stale.h"
#include "step.h"
#include "subs.h"
#include "watch.h"

/* A request kind of a recipe's own (from ZKL_REQ_RECIPE, in order). */
struct zkl_request_kind {
    bool beside; /* beside the contender's chain (c->busy): its answer and
                    its refusal are the recipe's alone (an election's proclaim) */
};

/* What a recipe changes in the engine's rules (the files in recipes/). Any hook may
 * be NULL: the default rule (the mutex's). Called with s->mu held. */
struct zkl_recipe {
    /* Before queuing: may refuse (ZKLOCK_EDEADLK), make c a downgrade heir,
     * make c's recipe_data. */
    int (*prepare)(zklock_t *l, zkl_contender_t *c);
    /* May c create its node now? If not, the recipe steps c when it may. */
    bool (*may_create)(zkl_contender_t *c);
    /* What a listing of the queue means for c, instead of the default rule
     * (the listing also set a watch on the queue if c->queue_watch). */
    void (*judge)(zkl_contender_t *c, const struct String_vector *names, const struct Stat *dir);
    /* c holds now: let go of what it took to get there. */
    void (*granted)(zkl_contender_t *c);
    /* c gives up, or its hold ends: end what the recipe started for it
     * (let its subs go: they are marked, never called). */
    void (*ending)(zkl_contender_t *c);
    /* The recipe's part of c's step, before the engine's: reads what became
     * of c's subs. */
    void (*step)(zkl_contender_t *c);
    /* The answer to one of the recipe's own requests (kinds from
     * ZKL_REQ_RECIPE), in c's step. */
    void (*answer)(zkl_contender_t *c, const struct zkl_answer *a);
    /* Frees the memory of l once nothing refers to it. */
    void (*destroy)(zklock_t *l);
    /* Frees c->recipe_data as c is freed (NULL: free() it). */
    void (*free_data)(zkl_contender_t *c);
    /* zklock_free(l): end the recipe's own calls in flight on l (an
     * election's proclaims), their done callbacks ZKLOCK_ECANCELED. */
    void (*retiring)(zklock_t *l);
    /* A contender may hold by another's place (a read/write lock's
     * downgrade heir, rwlock.c): does c? (NULL: none does.) */
    bool (*inherits)(const zkl_contender_t *c);
    /* ... and does that place still stand (its writer holds by it)? */
    bool (*place_stands)(const zkl_contender_t *c);
    /* ... the name of the node that place is (in a listing), or NULL. */
    const char *(*place_node)(const zkl_contender_t *c);
    /* ... c queues as a plain contender from now on. */
    void (*forget_place)(zkl_contender_t *c);
    /* Makes c's node itself (true), instead of the engine's create and
     * listing (a heir's check and create in one multi). */
    bool (*create)(zkl_contender_t *c);
    /* Its own request kinds (from ZKL_REQ_RECIPE), or NULL: all in the chain. */
    const struct zkl_request_kind *kinds;
    bool nodeless; /* its contenders make no node of their own (a multi-lock) */
    bool in_turn;  /* a multi-lock takes it alone, in path order, once it holds
                      every plain lock (a semaphore) */
};

/* ---- mutex.c: a handle whose nodes exclude every other ---------------------- */

/* A mutex or an election; kazoo's naming is its Lock's. recipe: NULL for
 * the default rules. */
int zklock__exclusive_new(zklock_t **out, zklock_session_t *s, const char *path,
                          const zklock_opts_t *opts, enum zkl_tag curator_tag,
                          const struct zkl_recipe *recipe);

#endif
