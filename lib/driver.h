/*
 * driver.h: the one driver (driver.c).
 */
#ifndef ZKLOCK_DRIVER_H
#define ZKLOCK_DRIVER_H

#include "session.h"

/* zklock__drive (declared in recipe.h) steps the marked contenders until
 * none is left, decides their owners' calls, then frees those that are
 * finished. Called only by the entries above it, once at the end of each,
 * with s->mu held: the engine's doors (doors.c: an answer, a watch event,
 * a timer, a session change) and the user's calls (lock.c, the recipes'
 * calls). Never twice at once: a re-entry is an internal error (design.md,
 * "One driver"). */

#endif
