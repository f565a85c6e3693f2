#!/bin/bash
# election-figures.sh: zklock's election beside Curator's LeaderLatch, in
# one run, for docs/performance.md:
#   - resign to new leader (p50, p99): two participants taking turns, N times
#     (zklock-bench election, LatchBench handover);
#   - kill to new leader: the leader is killed with SIGKILL, a standby takes
#     over once the leader's session expires; ROUNDS times each, against the
#     session timeout SESSION_MS.
#   test/election-figures.sh BUILD_DIR [N] [ROUNDS] [SESSION_MS]
# Starts a throwaway ZooKeeper (test/zk-harness.sh) unless ZKLOCK_TEST_HOSTS
# is set. Needs javac and Debian's Curator jars.
set -eu
B=$(realpath "${1:?usage: election-figures.sh BUILD_DIR [N] [ROUNDS] [SESSION_MS]}")
N=${2:-500}; ROUNDS=${3:-5}; SESSION_MS=${4:-4000}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${ZKLOCK_TEST_HOSTS:-}" ]; then
  exec "$here/zk-harness.sh" run bash "$0" "$@"
fi
J=/usr/share/java
CP=$J/curator-recipes.jar:$J/curator-framework.jar:$J/curator-client.jar:$J/zookeeper.jar:$J/zookeeper-jute.jar:$J/guava.jar:$J/slf4j-api.jar
[ -f $J/slf4j-nop.jar ] && CP=$CP:$J/slf4j-nop.jar
T=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$T"' EXIT # no job left: kill fails, and set -e would end the trap there
javac -nowarn -cp "$CP" -d "$T" "$here/interop/LatchBench.java"
latch() { exec java -cp "$CP:$T" LatchBench "$ZKLOCK_TEST_HOSTS" "$@"; } # in a subshell: $! is java
ELECT=$B/tools/zklock-elect
P=/zklock-figures/election-$$
export ZKLOCK_SERVERS=$ZKLOCK_TEST_HOSTS

queued() { [ "$("$B/tools/zklock-ls" --json "$1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["nodes"]))')" = "$2" ]; }
wait_until() { for _ in $(seq 600); do "$@" && return 0; sleep 0.05; done; return 1; } # poll, 30 s at most

# ---- resign to new leader --------------------------------------------------------------------
"$B/tools/zklock-bench" -p /zklock-figures "$ZKLOCK_TEST_HOSTS" election "$N" | tail -n 1 >"$T/zklock.json"
(latch handover "$P/h" "$N") | tail -n 1 >"$T/curator.json"

# ---- kill to new leader ------------------------------------------------------------------------
# One round: SYSTEM leads, a standby waits, the leader is killed; prints the
# ms from the kill to the standby's leading.
kill_round() {
  local sys=$1 path=$P/k-$1-$2 out=$T/standby-$1-$2
  if [ "$sys" = zklock ]; then
    "$ELECT" --session-timeout "$SESSION_MS" "$path" leader >"$T/lead" & leader=$!
    wait_until grep -qx leader "$T/lead"
    "$ELECT" --session-timeout "$SESSION_MS" "$path" standby sh -c 'date +%s%N' >"$out" & standby=$!
  else
    latch lead "$path" leader "$SESSION_MS" >"$T/lead" & leader=$!
    wait_until grep -qx leading "$T/lead"
    latch standby "$path" standby "$SESSION_MS" >"$out" & standby=$!
  fi
  wait_until queued "$path" 2
  # Kill at a random point of the leader's touch cycle (its pings and
  # heartbeats repeat every few seconds from its start): killed always the
  # same time after it started, the kill lands at the same phase, just
  # after a touch or just before one, and every round measures that one
  # case instead of the spread.
  sleep "$(python3 -c "import random; print(round(random.uniform(0, $SESSION_MS / 1000), 3))")"
  t0=$(date +%s%N)
  kill -KILL $leader; wait $leader 2>/dev/null || true
  wait $standby || true
  echo $(( ($(tail -n 1 "$out") - t0) / 1000000 ))
}
for sys in zklock curator; do
  for r in $(seq "$ROUNDS"); do kill_round $sys $r; done >"$T/kill-$sys"
done

python3 - "$T" "$N" "$ROUNDS" "$SESSION_MS" <<'PY'
import json, statistics, sys
t, n, rounds, session = sys.argv[1:]
print(f"election, one run: {n} handovers, {rounds} kills each, session timeout {session} ms\n")
print("| system | resign to new leader p50 | p99 | kill to new leader (median, min..max) |")
print("|---|---|---|---|")
for sys_ in ("zklock", "curator"):
    h = json.load(open(f"{t}/{sys_}.json"))
    k = [int(x) for x in open(f"{t}/kill-{sys_}").read().split()]
    name = "zklock" if sys_ == "zklock" else "Curator LeaderLatch"
    print(f"| {name} | {h['p50_us']:.0f} us | {h['p99_us']:.0f} us | "
          f"{statistics.median(k)} ms ({min(k)}..{max(k)}) |")
PY
