/*
 * root.c: the composition root. What sits on a session, and in what order
 * it hears of the session's changes: the engine first (a session's end
 * settles every contender before anyone inspecting a queue is woken), then
 * the queue inspector, then the followers. The session (session.c) gets
 * the layers and the engine's doors as data and knows nothing else of
 * them: the one file that names them all is this one, at the top, so that
 * calls go one way everywhere below (design.md, "Layout").
 */
#include "doors.h"
#include "inspect.h"
#include "session.h"

static const struct zkl_layer *const layers[] = {
    &zklock__engine_layer,
    &zklock__inspect_layer,
    &zklock__follow_layer,
    NULL,
};

static const struct zkl_above above = {layers, &zklock__engine_doors};

int zklock__session_open_on(zklock_session_t **out, const char *hosts,
                            const zklock_session_opts_t *opts, const struct zkl_wire *wire,
                            void *env)
{
    return zklock__session_open_with(out, hosts, opts, wire, env, &above);
}

int zklock_session_open(zklock_session_t **out, const char *hosts,
                        const zklock_session_opts_t *opts)
{
    return zklock__session_open_on(out, hosts, opts, &zklock__real_wire, NULL);
}

int zklock_session_adopt(zklock_session_t **out, zhandle_t *zh, const zklock_session_opts_t *opts)
{
    return zklock__session_adopt_with(out, zh, opts, &above);
}
