# testlib.sh: what the shell tests share (sourced by bash). Starts a
# throwaway ZooKeeper around the sourcing script unless ZKLOCK_TEST_HOSTS is
# set (pass HARNESS_SERVERS=3 for an ensemble), and gives TAP-style helpers.
if [ -z "${ZKLOCK_TEST_HOSTS:-}" ]; then
  exec "${srcdir:-$(dirname "$0")/..}/test/zk-harness.sh" run -n "${HARNESS_SERVERS:-1}" bash "$0" "$@"
fi
B=${top_builddir:-.}
TESTDIR=${srcdir:-$(dirname "$0")/..}/test
ZKLOCK=$B/tools/zklock
ZKLS=$B/tools/zklock-ls
ZKBENCH=$B/tools/zklock-bench
export ZKLOCK_SERVERS=$ZKLOCK_TEST_HOSTS
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
[ -n "$PY" ] || { echo "SKIP: python3 is needed to read JSON"; exit 77; }
T=$(mktemp -d) && trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; stop_private_zk; rm -rf "$T"' EXIT
failures=0 n=0

ok() { n=$((n + 1)); echo "ok $n - $*"; }
fail() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $*"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $*"; }
check() { # description, then a command that must succeed
  local what=$1; shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}
expect_status() { # want description command...
  local want=$1 what=$2 got; shift 2
  "$@" >"$T/out" 2>"$T/err"; got=$?
  if [ "$got" = "$want" ]; then ok "$what (exit $got)"; else
    fail "$what: exit $got, want $want"; sed 's/^/    /' "$T/err"; fi
}
# Polls a condition (a command) until it holds or SECONDS pass.
wait_for() { # seconds command...
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep 0.05 # poll the condition until the deadline
  done
}
queued() { # path count: the queue has exactly count nodes
  [ "$("$ZKLS" --json "$1" 2>/dev/null | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["nodes"]))')" = "$2" ]
}
json_field() { # path python-expression-on-q
  "$ZKLS" --json "$1" | "$PY" -c "import json,sys; q=json.load(sys.stdin); print($2)"
}
started() { [ -s "$1" ]; }
# A server of the test's own, to kill: private_zk prints its connect string.
# private_zk SEED starts it from a snapshot seeded so (zk-harness.sh --seed).
private_zk() { "$ZKLOCK_TEST_HARNESS" start "$T/zk-private" 1 "${1:-}"; }
# An empty container made under DIR was reaped, twice (the second made after
# the first went): a pass of the server's reaper (every second under the
# harness) began after the call and ended.
reaper_passed() { # DIR
  local i
  for i in 1 2; do
    "$ZKLOCK" "$1/sentinel-$i" true || return 1
    wait_for 20 lock_gone "$1/sentinel-$i" || return 1
  done
}
lock_gone() { [ "$(json_field "$1" 'q["exists"]')" = False ]; } # PATH
private_zk_kill() { "$ZKLOCK_TEST_HARNESS" kill "$T/zk-private" 1; }
stop_private_zk() { [ ! -d "$T/zk-private" ] || "$ZKLOCK_TEST_HARNESS" stop "$T/zk-private"; }
# One zklock critical section that logs its enter and leave (ns, wall clock):
# zk_section LOG ID MODE HOLD_S [zklock options...] PATH
zk_section() {
  local log=$1 id=$2 mode=$3 hold=$4; shift 4
  "$ZKLOCK" "$@" sh -c "echo \"\$(date +%s%N) enter $id $mode\" >>$log; sleep $hold; echo \"\$(date +%s%N) leave $id $mode\" >>$log"
}
# Like zk_section, but holds until the file GO exists.
zk_hold_until() { # LOG ID MODE GO [zklock options...] PATH
  local log=$1 id=$2 mode=$3 go=$4; shift 4
  "$ZKLOCK" "$@" sh -c "echo \"\$(date +%s%N) enter $id $mode\" >>$log; while [ ! -e $go ]; do sleep 0.02; done; echo \"\$(date +%s%N) leave $id $mode\" >>$log"
}
# Past the end of the sequence counter (design.md, "Sequence numbers run
# out"), on the server $WH (private_zk seeded with /wrap/p and /wrap/z
# counting from -2^31): two PEERs hold at once (they sort the numbers' text),
# zklock refuses (exit 69) leaving no node, and a zklock there first never
# holds beside a PEER that came after it.
past_the_end() { # PEER_FN NAME MODE [zklock options...]
  local peer=$1 name=$2 mode=$3 L p1 p2 z zst; shift 3
  L=$T/wrap-peers.log
  "$peer" /wrap/p "$mode" 1 "$L" P1 0 "$T/go-p1" & p1=$!
  check "past the wrap, a $name holds" wait_for 30 entered "$L" P1
  "$peer" /wrap/p "$mode" 1 "$L" P2 0 & p2=$!
  check "...and a second walks in beside it (the peer's defect zklock steers clear of)" wait_for 30 entered "$L" P2
  touch "$T/go-p1"; wait $p1 $p2
  expect_status 69 "zklock refuses a lock path whose counter ran out" "$ZKLOCK" "$@" -s "$WH" -t 10 /wrap/z true
  check "...saying why" grep -q "sequence counter ran out" "$T/err"
  check "...and leaves no node" [ "$(ZKLOCK_SERVERS=$WH json_field /wrap/z 'len(q["nodes"])')" = 0 ]
  L=$T/wrap-mixed.log
  zk_hold_until "$L" Z "$mode" "$T/go-z" "$@" -s "$WH" /wrap/z & z=$!
  wait_for 20 sh -c "grep -qs ' enter Z ' $L || ! kill -0 $z 2>/dev/null"
  "$peer" /wrap/z "$mode" 1 "$L" P3 0 # numbered after zklock's node, sorted before it by the peer
  touch "$T/go-z"; wait $z; zst=$?
  check "zklock, there first, refused (exit $zst), so it never held beside the $name after it" [ $zst = 69 ]
  check "...and nobody overlapped" "$PY" "$TESTDIR/interop/check_log.py" "$L" --count P3=1
}
entered() { grep -q " enter $2 " "$1" 2>/dev/null; } # LOG ID
done_testing() { echo "1..$n"; [ $failures = 0 ]; }
