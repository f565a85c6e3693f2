/* unit_engine.h: test_unit's cases of the engine on a scripted wire
 * (unit_engine.c). */
#ifndef ZKLOCK_UNIT_ENGINE_H
#define ZKLOCK_UNIT_ENGINE_H

#include "testutil.h"

extern const tu_test_t zklock__unit_engine_tests[];

#endif
