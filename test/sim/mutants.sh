#!/bin/sh
# test/sim/mutants.sh [PATCH...]: shows the simulator catching each mutant
# (test/sim/mutants/*.patch: one-line defects of lib/ and recipes/, most of
# them defects fixed before, put back). For each: a scratch copy of lib/,
# recipes/, include/ and test/sim/ with the patch applied, the simulator
# built from it, run on SEEDS seeds (default 6000, make check-sim's) from 1
# on two processes until the first that fails; prints the seeds it took and
# what the truth saw. Fails if a patch does not apply, does not
# build, or is not caught. make check-sim-mutants runs it from a build directory
# (top_builddir: config.h, the generated headers; CC, ZOOKEEPER_CFLAGS and
# ZOOKEEPER_LIBS as configure found them).
set -u
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
builddir=$(cd "${top_builddir:-$srcdir/build/plain}" && pwd)
seeds=${SEEDS:-6000}
cc=${CC:-cc}
zk_cflags=${ZOOKEEPER_CFLAGS:--DTHREADED}
zk_libs=${ZOOKEEPER_LIBS:--lzookeeper_mt}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT INT TERM

[ $# -gt 0 ] || set -- "$srcdir"/test/sim/mutants/*.patch
status=0
printf '%-34s %6s  %s\n' mutant seeds "what the simulator saw (its first failing seed's first violation)"
for patch in "$@"; do
  name=$(basename "$patch" .patch)
  patch=$(cd "$(dirname "$patch")" && pwd)/$(basename "$patch") # applied from the copy
  src=$scratch/src
  rm -rf "$src" && mkdir -p "$src/test" &&
    cp -R "$srcdir/lib" "$srcdir/recipes" "$srcdir/include" "$src/" &&
    cp -R "$srcdir/test/sim" "$src/test/"
  if ! (cd "$src" && patch -s -p1 <"$patch"); then
    echo "$name: does not apply"; status=1; continue
  fi
  # shellcheck disable=SC2086 # the flags are lists
  if ! $cc -std=gnu11 -O2 -w -D_GNU_SOURCE -DHAVE_CONFIG_H $zk_cflags -pthread \
      -I"$builddir" -I"$builddir/include" -I"$src/include" -I"$src/lib" \
      -o "$scratch/sim" "$src"/lib/*.c "$src"/recipes/*.c \
      "$src"/test/sim/sim_*.c "$src"/test/sim/zs_*.c "$src"/test/sim/events.c \
      "$src"/test/sim/coro.c $zk_libs -pthread; then
    echo "$name: does not build"; status=1; continue
  fi
  # from seed 1: the first failing seed is how many seeds it took
  out=$("$scratch/sim" --seeds "$seeds" --start 1 --jobs 2 --quiet 2>&1)
  line=$(printf '%s\n' "$out" | grep -m1 '^seed [0-9]*: FAIL')
  if [ -z "$line" ]; then
    printf '%-34s %6s  %s\n' "$name" "-" "NOT CAUGHT in $seeds seeds"; status=1
    continue
  fi
  seed=$(printf '%s\n' "$line" | sed 's/^seed \([0-9]*\):.*/\1/')
  what=$(printf '%s\n' "$line" | sed 's/^seed [0-9]*: FAIL at \([0-9.]*\) s: /at \1 s: /')
  printf '%-34s %6s  %s\n' "$name" "$seed" "$what"
done
exit $status
