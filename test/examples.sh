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
  UV=$B/docs/examples/uv-daemon
  read_node() { # PATH: its data
    "$PY" - "$ZKLOCK_TEST_HOSTS" "$1" <<'PY'
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(); print(zk.get(sys.argv[2])[0].decode()); zk.stop()
PY
  }
  # As shipped: nothing prepared, DATAPATH and its parents do not exist yet.
  expect_status 0 "uv-daemon runs 3 rounds in a libuv loop, as shipped" "$UV" "$ZKLOCK_TEST_HOSTS" $P/uv $P-data/a/b 3
  check "...each writing with the lock held" [ "$(grep -c "^round [123]: wrote $P-data/a/b with the lock held (token [0-9]*)" "$T/out")" = 3 ]
  check "...the last write is in place" [ "$(read_node $P-data/a/b)" = "round 3" ]
  check "no node left under $P/uv" wait_for 10 queued $P/uv 0

  # A busy lock, tried once each time (TIMEOUT_MS 0): tried again after
  # pauses that double, not at once (a retry from a done callback spins).
  rm -f "$T/uv-in" "$T/uv-go"
  "$ZKLOCK" $P/uv-busy sh -c "touch $T/uv-in; while [ ! -e $T/uv-go ]; do sleep 0.02; done" & uv_holder=$!
  check "another process holds the lock" wait_for 20 test -e "$T/uv-in"
  start=$(date +%s%N)
  "$UV" "$ZKLOCK_TEST_HOSTS" $P/uv-busy $P-data/busy 1 0 >"$T/uv-busy" 2>"$T/uv-busy-err" & uv=$!
  tries() { [ "$(grep -c "trying again" "$T/uv-busy-err")" -ge "$1" ]; }
  check "a busy lock: uv-daemon tries again" wait_for 20 tries 4
  waited_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  check "...after pauses that double (0.1s 0.2s 0.4s 0.8s)" \
    [ "$(grep -o "held by another contender: trying again in [0-9.]*s" "$T/uv-busy-err" | head -4 | awk '{print $NF}' | tr '\n' ' ')" = "0.1s 0.2s 0.4s 0.8s " ]
  check "...waited for, not only said: $waited_ms ms >= 700 for the first three" [ "$waited_ms" -ge 700 ]
  touch "$T/uv-go"; wait $uv_holder
  wait $uv; st=$?
  check "...and ends well once the lock is free (exit $st)" [ $st = 0 ]
  check "...having written once the lock was free" grep -q "^round 1: wrote $P-data/busy" "$T/uv-busy"

  # A rejected password (digest: another identity, which the ACL refuses)
  # must not spin either: the daemon stops at once, saying what to fix.
  if "$PY" "$TESTDIR/zkadmin.py" root $P-secure alice; then
    printf 'digest:alice:not-her-password\n' >"$T/wrong.auth"; chmod 600 "$T/wrong.auth"
    printf 'digest:alice:alice-pw\n' >"$T/alice.auth"; chmod 600 "$T/alice.auth"
    start=$(date +%s%N)
    expect_status 1 "uv-daemon with a wrong password stops" \
      env ZKLOCK_AUTH_FILE="$T/wrong.auth" "$UV" "$ZKLOCK_TEST_HOSTS" $P-secure/uv $P-data/secure 3
    took=$(( ($(date +%s%N) - start) / 1000000 ))
    check "...at once: in less than 5 s, far from its acquisition's 30 s timeout (took $took ms)" \
      [ "$took" -lt 5000 ]
    check "...after one try: one line on stderr, no retry loop" [ "$(wc -l <"$T/err")" = 1 ]
    check "...and nothing on stdout" [ ! -s "$T/out" ]
    check "...saying what to fix" grep -q "^uv-daemon: acquire: not allowed by the ACL: check the credentials in \$ZKLOCK_AUTH_FILE" "$T/err"
    expect_status 0 "uv-daemon with the right password" \
      env ZKLOCK_AUTH_FILE="$T/alice.auth" "$UV" "$ZKLOCK_TEST_HOSTS" $P-secure/uv $P-data/secure 1
  else
    fail "the superuser sets up $P-secure"
  fi
  "$PY" -c "
from kazoo.client import KazooClient
zk = KazooClient(hosts='$ZKLOCK_TEST_HOSTS'); zk.start(); zk.delete('$P-data', recursive=True); zk.stop()"
else
  skip "docs/examples/uv-daemon: libuv was not found at configure time, so it was not built"
fi
done_testing
