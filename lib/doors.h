/*
 * doors.h: the engine's top (doors.c): every entry into the engine from
 * below it, and the engine as a layer above the session; the composition
 * root (root.c) installs them on each session.
 */
#ifndef ZKLOCK_DOORS_H
#define ZKLOCK_DOORS_H

#include "session.h"

/* The answers, watch events and timers of the engine (session.h, struct
 * zkl_doors). */
extern const struct zkl_doors zklock__engine_doors;
/* What the engine hears of the session's changes. */
extern const struct zkl_layer zklock__engine_layer;

#endif
