#!/bin/bash
# examples.sh: the programs in docs/ do what they say, against a throwaway
# ZooKeeper (started here unless ZKLOCK_TEST_HOSTS is set).
set -u
source "${srcdir:-$(dirname "$0")/..}/test/testlib.sh"
P=/zklock-test/examples-$$
"$PY" -c 'import kazoo' 2>/dev/null || { echo "SKIP: python3-kazoo is needed to change a node"; exit 77; }

# ---- docs/example.c ----------------------------------------------------------------------
expect_status 0 "docs/example takes and releases a lock" "$B/docs/example" "$ZKLOCK_TEST_HOSTS"
check "...and says so" grep -q "holding the lock" "$T/out"

# ---- docs/adopt.c: an adopted handle, acting on its own watch ------------------------------
"$B/docs/adopt" "$ZKLOCK_TEST_HOSTS" $P-config $P/lock >"$T/adopt" 2>&1 & adopt=$!
check "adopt watches its configuration node" wait_for 20 grep -q "^watching $P-config" "$T/adopt"
"$PY" - "$ZKLOCK_TEST_HOSTS" $P-config <<'PY'
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start()
zk.create(sys.argv[2], b"v2", makepath=True)
zk.stop()
PY
wait $adopt; st=$?
check "adopt exits 0 (exit $st)" [ $st = 0 ]
check "...after taking the lock on the change" grep -q "changed: holding $P/lock (token [0-9]*)" "$T/adopt"
check "no node left under $P/lock" wait_for 10 queued $P/lock 0
"$PY" -c "
from kazoo.client import KazooClient
zk = KazooClient(hosts='$ZKLOCK_TEST_HOSTS'); zk.start(); zk.delete('$P-config'); zk.stop()"
# ---- docs/examples/uv-daemon.c: one thread, a libuv loop, guarded writes ------------------
if [ -x "$B/docs/examples/uv-daemon" ]; then
  "$PY" - "$ZKLOCK_TEST_HOSTS" $P-data <<'PY'
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start()
zk.create(sys.argv[2], b"empty", makepath=True)
zk.stop()
PY
  expect_status 0 "uv-daemon runs 3 rounds in a libuv loop" "$B/docs/examples/uv-daemon" "$ZKLOCK_TEST_HOSTS" $P/uv $P-data 3
  check "...each writing with the lock held" [ "$(grep -c "^round [123]: wrote $P-data with the lock held (token [0-9]*)" "$T/out")" = 3 ]
  check "...the last write is in place" [ "$("$PY" -c "
from kazoo.client import KazooClient
zk = KazooClient(hosts='$ZKLOCK_TEST_HOSTS'); zk.start(); print(zk.get('$P-data')[0].decode()); zk.delete('$P-data'); zk.stop()")" = "round 3" ]
  check "no node left under $P/uv" wait_for 10 queued $P/uv 0
else
  skip "docs/examples/uv-daemon: libuv was not found at configure time, so it was not built"
fi
done_testing
