/* layers.c: what sits on a session, in the order it hears of changes.
 *
 * The session (session.c) calls the layers through this table and knows
 * nothing else of them; the engine comes first, so that a session's end has
 * settled every contender before anyone inspecting a queue is woken. */
#include "internal.h"

const struct zkl_layer *const zklock__layers[] = {
    &zklock__engine_layer,
    &zklock__inspect_layer,
    &zklock__election_layer,
    &zklock__follow_layer,
    NULL,
};
