#!/bin/bash
# scripts/demo.sh: sets up everything (Debian packages, build), starts a
# throwaway local ZooKeeper, shows zklock at work, and stops ZooKeeper.
set -euo pipefail
source "$(dirname "$0")/common.sh"

B=$ZKLOCK_TOP/build/plain
ensure_packages
build "$B"
make -C "$B" -s docs/example >/dev/null

say "starting a throwaway ZooKeeper on loopback"
exec "$ZKLOCK_TOP/test/zk-harness.sh" run bash -c '
  example=$1
  echo "ZooKeeper is at $ZKLOCK_TEST_HOSTS"
  echo
  echo "Three processes start at once and each takes /locks/nightly-report:"
  for i in 1 2 3; do
    ( out=$("$example" "$ZKLOCK_TEST_HOSTS") && echo "  process $i: $out" ) &
  done
  wait
  echo
  echo "Each held the lock in turn; the fencing tokens grow with every new holder."
  echo "Next: README.md (usage), man 3 zklock (the API), docs/design.md (how it works)."
' demo "$B/docs/example"
