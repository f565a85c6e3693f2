#!/bin/bash
# scripts/demo.sh: sets up everything (Debian packages, build), starts a
# throwaway local ZooKeeper, shows zklock at work with real processes, and
# stops ZooKeeper. About a minute.
set -euo pipefail
source "$(dirname "$0")/common.sh"

B=$ZKLOCK_TOP/build/plain
# ZKLOCK_DEMO_BINDIR=/usr/bin: the installed tools instead of a build
# (scripts/test.sh deb runs the demo so on the installed packages)
bin=${ZKLOCK_DEMO_BINDIR:-}
if [ -z "$bin" ]; then
  ensure_packages
  build "$B"
  bin=$B/tools
fi

ZKLOCK=$bin/zklock
ZKLS=$bin/zklock-ls
ELECT=$bin/zklock-elect
zkdir=$(mktemp -d "${TMPDIR:-/tmp}/zklock-demo.XXXXXX")
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  "$ZKLOCK_TOP/test/zk-harness.sh" stop "$zkdir"
}
trap cleanup EXIT

say "starting a throwaway ZooKeeper on loopback"
ZKLOCK_SERVERS=$("$ZKLOCK_TOP/test/zk-harness.sh" start "$zkdir") || die "ZooKeeper did not start"
export ZKLOCK_SERVERS
echo "ZooKeeper is at $ZKLOCK_SERVERS (ZKLOCK_SERVERS tells the tools where)."

stamp() { date +%H:%M:%S.%1N; }
# Polls the lock's queue until it has n nodes (so that arrival order is known).
queued() {
  for _ in $(seq 200); do
    [ "$("$ZKLS" --json "$1" | grep -o '"position"' | wc -l)" -ge "$2" ] && return 0
    sleep 0.05 # poll the queue
  done
  return 1
}
show() { echo; echo "\$ zklock-ls $1"; "$ZKLS" "$1" | sed 's/^/  /'; echo; }
running() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${st#Z}" = "$st" ]; } # PID
pause_for_reader() { sleep "${DEMO_PAUSE:-1}"; }

# ---------------------------------------------------------------------------
echo
say "1. Three workers want the same lock, each for a second"
echo "Each runs:  zklock --identity worker-N /demo/report sh -c '...; sleep 1'"
for i in 1 2 3; do
  "$ZKLOCK" --identity "worker-$i" /demo/report sh -c \
    "echo \"  \$(date +%H:%M:%S.%1N)  worker $i starts (fencing token \$ZKLOCK_FENCE)\"; sleep 1; echo \"  \$(date +%H:%M:%S.%1N)  worker $i done\"" &
  queued /demo/report "$i"
done
show /demo/report
wait
echo "They ran one at a time, in the order they arrived; each holder's token is"
echo "larger than the last, so storage can refuse a stale holder."
pause_for_reader

# ---------------------------------------------------------------------------
echo
say "2. Readers share, a writer waits its turn, later readers wait behind it"
run() { # mode name seconds
  "$ZKLOCK" "-$1" --identity "$2" /demo/config sh -c \
    "echo \"  \$(date +%H:%M:%S.%1N)  $2 in\"; sleep $3; echo \"  \$(date +%H:%M:%S.%1N)  $2 out\"" &
}
run r reader-1 2; queued /demo/config 1
run r reader-2 2; queued /demo/config 2
run w writer 1;   queued /demo/config 3
run r reader-3 1; queued /demo/config 4
show /demo/config
wait
echo "reader-1 and reader-2 read together; the writer waited for them; reader-3,"
echo "who came after the writer, waited for the writer (writers do not starve)."
pause_for_reader

# ---------------------------------------------------------------------------
echo
say "3. A holder is killed with SIGKILL and never releases"
echo "It holds /demo/job with a 4 s session timeout; 'next' waits behind it."
# (in a subshell, so that the shell does not announce the kill; zklock's own
# stderr, its watchdog's too, is the demo's: fd 3)
( "$ZKLOCK" --session-timeout 4000 --identity doomed /demo/job \
    sh -c "echo \$\$ >$zkdir/doomed-cmd.pid; exec sleep 300" 2>&3 &
  echo $! >"$zkdir/doomed.pid"; wait ) 3>&2 2>/dev/null &
queued /demo/job 1
doomed=$(cat "$zkdir/doomed.pid")
"$ZKLOCK" --identity next /demo/job sh -c 'echo "  $(date +%H:%M:%S.%1N)  next has the lock"' &
next=$!
queued /demo/job 2
show /demo/job
echo "  $(stamp)  kill -9 the holder"
kill -KILL "$doomed"
t0=$(date +%s%N)
wait "$next"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
printf '  The lock moved on %d.%d s after the kill: when ZooKeeper expired the dead\n' \
  $((ms / 1000)) $((ms % 1000 / 100))
echo "  process's session. No lease to tune, no cleanup by hand."
if running "$(cat "$zkdir/doomed-cmd.pid")"; then
  echo "  (its command still runs: that should not happen)"
else
  echo "  Its command did not outlive it: zklock's watchdog stopped it (the line above)"
  echo "  before the session expired, so it never ran without the lock."
fi

# ---------------------------------------------------------------------------
echo
say "4. Three candidates for leader; a listener shows who leads"
echo "Each runs:  zklock-elect --session-timeout 4000 /demo/leader ADDRESS sh -c '...'"
echo "and the listener:  zklock-elect -l /demo/leader"
"$ELECT" -l /demo/leader | sed -u 's/^/  listener sees: /' &
listener=$!
for i in 1 2 3; do
  ( "$ELECT" --session-timeout 4000 /demo/leader "10.0.0.$i:8080" sh -c \
      "echo \$\$ >$zkdir/worker$i.pid; touch $zkdir/led$i; echo \"  \$(date +%H:%M:%S.%1N)  candidate $i leads (token \$ZKLOCK_FENCE)\"; sleep 300" 2>&3 &
    echo $! >"$zkdir/cand$i.pid"; wait ) 3>&2 2>/dev/null &
  queued /demo/leader "$i"
done
sleep 1
echo "  $(stamp)  kill -9 the leader (candidate 1)"
leader=$(cat "$zkdir/cand1.pid")
kill -KILL "$leader"
t0=$(date +%s%N)
until [ -e "$zkdir/led2" ]; do sleep 0.05; done # poll for the handover
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
sleep 0.5
printf '  Candidate 2 took over %d.%d s after the kill, when its session expired;\n' \
  $((ms / 1000)) $((ms % 1000 / 100))
echo "  candidate 3 still waits, and the listener saw each change."
if running "$(cat "$zkdir/worker1.pid")"; then
  echo "  (candidate 1's worker still runs: that should not happen)"
else
  echo "  Candidate 1's worker was stopped by its watchdog before that: one worker at a time."
fi
kill $(cat "$zkdir/cand2.pid") $(cat "$zkdir/cand3.pid") 2>/dev/null || true
sleep 1
kill "$listener" 2>/dev/null || true

# ---------------------------------------------------------------------------
echo
say "done: ZooKeeper stops now"
cat <<'TXT'
Where next:
  zklock --help, man zklock, man zklock-ls,
  man zklock-elect                             the tools (build/plain/tools)
  README.md                                    using the library from C
  man 3 zklock, docs/design.md                 the API and how it works
  scripts/test.sh                              the whole test suite
TXT
