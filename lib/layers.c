/* layers.c: what sits on a session, in the order it hears of changes.
 *
 * The session (session.c) calls the layers through this table and knows
 * nothing else of them; the engine comes first, so that a session's end has
 * settled every contender before anyone inspecting a queue is woken. */
#include "internal.h"

const struct zkl_layer *const zkl_layers[] = {
    &zkl_engine_layer,
    &zkl_inspect_layer,
    NULL,
};
