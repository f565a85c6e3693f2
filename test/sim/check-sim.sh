#!/bin/sh
# make check's run of the simulator (test/sim): SIM_SEEDS seeds (default
# 6000; 300 in AddressSanitizer's build, ten times slower, 40 in
# ThreadSanitizer's, a hundred times: one thread has nothing for it to find,
# the run shows the coroutines' switches pass its checks) from SIM_START
# (default 1) on two processes; `make check-sim SEEDS=N START=K` runs
# others. A failing seed prints its trace and how to replay it
# (test/sim/run SEED); the run stops there.
sim=${top_builddir:-.}/test/sim/sim
[ -x "$sim" ] || { echo "check-sim.sh: $sim is not built" >&2; exit 99; }
seeds=6000
grep -q __asan_init "$sim" && seeds=300
grep -q __tsan_init "$sim" && seeds=40
exec "$sim" --seeds "${SIM_SEEDS:-$seeds}" --start "${SIM_START:-1}" --jobs "${SIM_JOBS:-2}"
