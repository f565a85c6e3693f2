/*
 * common.h: what every file of libzklock includes first. Never installed.
 *
 * Naming: internal functions and variables are zklock__name (two
 * underscores). The shared library exports only the public zklock_ API
 * (-fvisibility=hidden), but a static archive has every global in it: so
 * every global stays in the library's namespace (test/check-exports.sh).
 * Internal types and macros, which are not symbols, are zkl_ and ZKL_.
 *
 * Locking: one mutex per session (s->mu) guards everything reachable from
 * the session: its locks, their contenders, the callback queue, the counters.
 * ZooKeeper's asynchronous calls are issued with s->mu held (they never wait
 * for the completion thread); zookeeper_init/zookeeper_close and user
 * callbacks are called without it.
 *
 * The private headers go by subject (design.md, "Layout"): wire.h, names.h,
 * rules.h, timer.h, session.h, handle.h, contender.h, request.h, watch.h, lease.h,
 * stale.h, owner.h, subs.h, step.h, driver.h, lockstats.h; recipes include
 * recipe.h.
 * Each declares what the files of its subject define.
 */
#ifndef ZKLOCK_COMMON_H
#define ZKLOCK_COMMON_H

#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zklock.h"

typedef struct zkl_contender zkl_contender_t;

/* ---- what a ZooKeeper answer says --------------------------------------------- */

/* Failures worth retrying once the connection is back: the request may or
 * may not have reached the server. */
static inline bool transient(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED ||
           rc == ZTHROTTLEDOP;
}

/* Answers that only say the session (or the handle) is going away: the
 * session code deals with those. */
static inline bool session_ending(int rc)
{
    return rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE || rc == ZAUTHFAILED;
}

/* The last component of a path. */
static inline const char *basename_of(const char *path)
{
    return strrchr(path, '/') + 1;
}

#endif
