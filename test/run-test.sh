#!/bin/sh
# Automake's LOG_COMPILER (test programs) and SH_LOG_COMPILER (shell suites,
# called as "run-test.sh $SHELL suite.sh").
#
# A test program runs under a throwaway ZooKeeper (test/zk-harness.sh) unless
# it needs none. With ZKLOCK_TEST_VALGRIND set (make check-valgrind) it runs
# under valgrind's memcheck, and any error or leak fails it. Not with
# glibc's own clean-up at exit (--run-libc-freeres=no): it takes locks a
# ZooKeeper client thread may have held at the exit (a getaddrinfo() while
# reconnecting), and then waits forever (seen in test_clock, 1 run in 6:
# __libc_freeres -> __free_in6ai -> futex_wait).
#
# Either kind is stopped after ZKLOCK_TEST_TIMEOUT seconds (default 900; the
# longest suite takes about 3 minutes under a sanitizer): a hang fails that
# suite and says so, instead of holding up the whole run until CI's own limit
# ends it without saying where. timeout(1) signals the suite's whole process
# group; the harness and testlib.sh stop their servers on SIGTERM.
here=$(cd "$(dirname "$0")" && pwd)
limit=${ZKLOCK_TEST_TIMEOUT:-900}

timed() { # name command...: runs the command, bounded by $limit
  name=$1; shift
  timeout -k 30 "$limit" "$@"
  rc=$?
  [ $rc -eq 124 ] && echo "run-test.sh: $name did not finish within $limit s (ZKLOCK_TEST_TIMEOUT): stopped" >&2
  exit $rc
}

case $(basename "$1") in
  sh|bash|dash) timed "$(basename "$2")" "$@" ;;
esac

name=$(basename "$1")
if [ -n "${ZKLOCK_TEST_VALGRIND:-}" ]; then
  set -- "${LIBTOOL:-libtool}" --mode=execute valgrind -q --error-exitcode=9 --run-libc-freeres=no \
    --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --num-callers=30 \
    --suppressions="$here/valgrind.supp" "$@"
fi
case $name in
  test_unit|fuzz_*|test_zs) timed "$name" "$@" ;; # no server: their own (test/sim)
  test_ensemble) timed "$name" "$here/zk-harness.sh" run -n 3 "$@" ;;
esac
timed "$name" "$here/zk-harness.sh" run "$@"
