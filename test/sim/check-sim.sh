#!/bin/sh
# make check's run of the simulator (test/sim): SIM_SEEDS seeds (default
# 3000; 300 in a sanitizer's build, which runs them ten times slower) from
# SIM_START (default 1) on two processes; `make check-sim SEEDS=N START=K`
# runs others. A failing seed prints its trace and how to replay it
# (test/sim/run SEED); the run stops there.
sim=${top_builddir:-.}/test/sim/sim
[ -x "$sim" ] || { echo "check-sim.sh: $sim is not built" >&2; exit 99; }
seeds=3000
grep -q -e __asan_init -e __tsan_init "$sim" && seeds=300
exec "$sim" --seeds "${SIM_SEEDS:-$seeds}" --start "${SIM_START:-1}" --jobs "${SIM_JOBS:-2}"
