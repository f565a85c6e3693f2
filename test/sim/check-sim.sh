#!/bin/sh
# make check's run of the simulator (test/sim): SIM_SEEDS seeds (default
# 3000) from SIM_START (default 1) on two processes; `make check-sim SEEDS=N
# START=K` runs others. A failing seed prints its trace and how to replay it
# (test/sim/run SEED); the run stops there. Skipped (77) in a build whose
# sanitizer cannot follow the simulator's coroutines (ThreadSanitizer).
sim=${top_builddir:-.}/test/sim/sim
[ -x "$sim" ] || { echo "check-sim.sh: $sim is not built" >&2; exit 99; }
exec "$sim" --seeds "${SIM_SEEDS:-3000}" --start "${SIM_START:-1}" --jobs "${SIM_JOBS:-2}"
