#!/bin/sh
# Automake's LOG_COMPILER: runs one test program, under a throwaway ZooKeeper
# (test/zk-harness.sh) unless it needs none.
here=$(cd "$(dirname "$0")" && pwd)
case $(basename "$1") in
  test_unit|fuzz_*) exec "$@" ;;
esac
exec "$here/zk-harness.sh" run "$@"
