#!/bin/sh
# Automake's LOG_COMPILER: runs one test program, under a throwaway ZooKeeper
# (test/zk-harness.sh) unless it needs none. With ZKLOCK_TEST_VALGRIND set
# (make check-valgrind) the program runs under valgrind's memcheck, and any
# error or leak fails it.
here=$(cd "$(dirname "$0")" && pwd)
name=$(basename "$1")
if [ -n "${ZKLOCK_TEST_VALGRIND:-}" ]; then
  set -- "${LIBTOOL:-libtool}" --mode=execute valgrind -q --error-exitcode=9 \
    --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --num-callers=30 \
    --suppressions="$here/valgrind.supp" "$@"
fi
case $name in
  test_unit|fuzz_*) exec "$@" ;;
  test_ensemble) exec "$here/zk-harness.sh" run -n 3 "$@" ;;
esac
exec "$here/zk-harness.sh" run "$@"
