/* layers.c: what sits on a session, in the order it hears of changes, and
 * the one hook by which the engine's lower files end an event.
 *
 * The session (session.c) calls the layers through this table and knows
 * nothing else of them; the engine comes first, so that a session's end has
 * settled every contender before anyone inspecting a queue is woken. The
 * completions, watchers and timers of the files below the driver record
 * what they learnt and end with zklock__entry_done: the driver, which they
 * never name (design.md, "Layout": calls go one way). Left out of the
 * call-graph check (../shared/tools/callcycles.py) for that reason. */
#include "driver.h"
#include "inspect.h"
#include "recipe.h"
#include "session.h"

const struct zkl_layer *const zklock__layers[] = {
    &zklock__engine_layer,
    &zklock__inspect_layer,
    &zklock__election_layer,
    &zklock__follow_layer,
    NULL,
};

void zklock__entry_done(zklock_session_t *s)
{
    zklock__drive(s);
}
