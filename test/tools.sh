#!/bin/bash
# tools.sh: the zklock and zklock-ls utilities, as a user runs them, against a
# throwaway ZooKeeper (started here unless ZKLOCK_TEST_HOSTS is set).
set -u
source "${srcdir:-$(dirname "$0")/..}/test/testlib.sh"
P=/zklock-test/tools-$$

# ---- exit codes ----------------------------------------------------------------------
expect_status 0 "runs the command" "$ZKLOCK" $P/a true
expect_status 3 "passes on the command's status" "$ZKLOCK" $P/a sh -c 'exit 3'
expect_status 137 "128+N when the command dies of signal N" "$ZKLOCK" $P/a sh -c 'kill -9 $$'
expect_status 64 "usage: no command" "$ZKLOCK" $P/a
expect_status 64 "usage: no command after --" "$ZKLOCK" $P/a --
expect_status 3 "-- before COMMAND, as getopt users write it" "$ZKLOCK" $P/a -- sh -c 'exit 3'
expect_status 0 "-- before LOCKPATH" "$ZKLOCK" -- $P/a true
expect_status 64 "usage: unknown option" "$ZKLOCK" --bogus $P/a true
check "...said in one line of zklock's" [ "$(cat "$T/err")" = "zklock: unknown option '--bogus' (try 'zklock --help')" ]
expect_status 64 "usage: an option after LOCKPATH, where COMMAND goes" "$ZKLOCK" $P/a --and $P/b true
check "...says that options go before LOCKPATH" \
  [ "$(cat "$T/err")" = "zklock: options go before LOCKPATH: '--and' comes after it, where COMMAND goes (put '--' before a COMMAND whose name starts with '-'; try 'zklock --help')" ]
check "...having taken nothing" queued $P/b 0
ln -s "$(type -P true)" "$T/-true"
expect_status 0 "a COMMAND whose name starts with '-', after --" env PATH="$T:$PATH" "$ZKLOCK" $P/a -- -true
expect_status 64 "usage: an option without its argument" "$ZKLOCK" -t
check "...said in one line of zklock's" [ "$(cat "$T/err")" = "zklock: option '-t' needs an argument (try 'zklock --help')" ]
expect_status 64 "usage: two modes" "$ZKLOCK" -r -w $P/a true
expect_status 64 "usage: bad timeout" "$ZKLOCK" -t soon $P/a true
expect_status 65 "invalid lock path" "$ZKLOCK" relative/path true
expect_status 65 "invalid lock path (..)" "$ZKLOCK" /a/../b true
expect_status 69 "servers unreachable, within the connect timeout" \
  "$ZKLOCK" -s 127.0.0.1:1 --connect-timeout 1 $P/a true
check "unreachable says so in one line" grep -q "no ZooKeeper server answered at 127.0.0.1:1" "$T/err"
expect_status 69 "-q: unreachable" "$ZKLOCK" -q -s 127.0.0.1:1 --connect-timeout 1 $P/a true
check "...says nothing" [ ! -s "$T/err" ]
expect_status 127 "-q: command not found" "$ZKLOCK" -q $P/a /nonexistent/command
check "...says nothing" [ ! -s "$T/err" ]
expect_status 64 "-q still tells usage errors" "$ZKLOCK" -q -t soon $P/a true
check "...on stderr" grep -q "is not a number of seconds" "$T/err"
expect_status 64 "usage: -q and -v" "$ZKLOCK" -q -v $P/a true
expect_status 127 "command not found" "$ZKLOCK" $P/a /nonexistent/command
echo "not a program" >"$T/noexec"
expect_status 126 "command not runnable" "$ZKLOCK" $P/a "$T/noexec"
expect_status 0 "--help" "$ZKLOCK" --help
check "--help names every option of the man page" \
  grep -q -- "--kill-after" "$T/out"
expect_status 0 "--version" "$ZKLOCK" --version
check "--version prints the version" grep -q "^zklock [0-9]" "$T/out"
expect_status 0 "zklock-ls --help" "$ZKLS" --help
check "...says that --json is JSON Lines" grep -q -- "-j, --json  *JSON Lines: one JSON object per lock" "$T/out"
check "...and so does its man page" grep -q "JSON Lines" "$TESTDIR/../docs/zklock-ls.1"
expect_status 64 "zklock-ls: no path" "$ZKLS"
expect_status 65 "zklock-ls: invalid path" "$ZKLS" /a//b

# ---- the environment ---------------------------------------------------------------------
"$ZKLOCK" $P/env sh -c 'echo "$ZKLOCK_PATH $ZKLOCK_FENCE"' >"$T/env"
read -r epath efence <"$T/env"
check "ZKLOCK_PATH is the lock path" [ "$epath" = "$P/env" ]
check "ZKLOCK_FENCE is a positive token" [ "${efence:-0}" -gt 0 ]
"$ZKLOCK" $P/env sh -c 'echo "$ZKLOCK_FENCE"' >"$T/env2"
check "tokens grow with each new holder" [ "$(cat "$T/env2")" -gt "$efence" ]

# ---- --identity ------------------------------------------------------------------------------
# The most the tool refuses (more than ZKLOCK_DATA_MAX, 1020 KiB) cannot be
# passed here: Linux limits one argument to 128 KiB. The largest that can
# must be taken and stored whole.
big=$(head -c 131000 /dev/zero | tr '\0' x)
"$ZKLOCK" --identity "$big" $P/id sh -c 'echo "$ZKLOCK_FENCE"' >"$T/id-out"
check "a 128 KiB identity is accepted" [ -s "$T/id-out" ]
rm -f "$T/ready"
"$ZKLOCK" --identity "$big" $P/id sh -c "echo x > $T/ready; sleep 30" & pid=$!
check "holder with a 128 KiB identity" wait_for 20 started "$T/ready"
check "...stored whole" [ "$(json_field $P/id 'len(q["nodes"][0]["identity"])')" = 131000 ]
kill -TERM $pid; wait $pid

# ---- busy, timeout, conflict code ------------------------------------------------------------
"$ZKLOCK" --identity holder-1 $P/busy sh -c "echo x > $T/busy-in; sleep 30" &
holder=$!
check "holder started" wait_for 20 started "$T/busy-in"
expect_status 1 "--timeout 0 on a held lock" "$ZKLOCK" -t 0 $P/busy true
check "...silently, as flock -n (cron mails nothing)" [ ! -s "$T/err" ]
expect_status 1 "-n is -t 0" "$ZKLOCK" -n $P/busy true
check "...silently" [ ! -s "$T/err" ]
expect_status 1 "--nonblock" "$ZKLOCK" --nonblock $P/busy true
expect_status 1 "-v -t 0 on a held lock" "$ZKLOCK" -v -t 0 $P/busy true
check "-v names the holder, its mode, age and token" \
  grep -Eq "^zklock: $P/busy is locked by holder-1 \(mutex, held for [0-9.]+s, token [0-9]+\)$" "$T/err"
expect_status 42 "--conflict-exit-code" "$ZKLOCK" -t 0 -E 42 $P/busy true
start=$(date +%s%N)
expect_status 1 "--timeout 0.5 gives up" "$ZKLOCK" -t 0.5 $P/busy true
check "...not before its deadline" [ $(( ($(date +%s%N) - start) / 1000000 )) -ge 500 ]
check "giving up left no node behind" queued $P/busy 1
kill -TERM $holder; wait $holder

# ---- signals ----------------------------------------------------------------------------------
rm -f "$T/ready"
"$ZKLOCK" $P/sig sh -c "trap 'echo got-term > $T/term; exit 7' TERM; echo ready > $T/ready; while :; do sleep 0.1; done" &
pid=$!
check "command running" wait_for 20 started "$T/ready"
kill -TERM $pid; wait $pid; st=$?
check "SIGTERM is passed on to the command" grep -q got-term "$T/term"
check "...and zklock exits with its status" [ $st = 7 ]
check "...and releases the lock" queued $P/sig 0

rm -f "$T/ready"
"$ZKLOCK" $P/sig sh -c "trap 'echo got-hup > $T/hup; exit 0' HUP; echo ready > $T/ready; while :; do sleep 0.1; done" &
pid=$!
check "command running" wait_for 20 started "$T/ready"
kill -HUP $pid; wait $pid
check "SIGHUP is passed on" grep -q got-hup "$T/hup"

rm -f "$T/ready"
"$ZKLOCK" $P/wait sh -c "echo x > $T/ready; sleep 30" &
holder=$!
check "holder running" wait_for 20 started "$T/ready"
"$ZKLOCK" $P/wait true &
waiter=$!
check "waiter queued" wait_for 20 queued $P/wait 2
kill -INT $waiter; wait $waiter; st=$?
check "SIGINT while waiting: exit 130" [ $st = 130 ]
check "...leaving no node behind" queued $P/wait 1
kill -TERM $holder; wait $holder

# ---- the job: COMMAND and what it starts ------------------------------------------------------------
# job.sh DIR: a job that starts a process and waits for it, as sh -c './deploy.sh' does.
cat >"$T/job.sh" <<'EOF'
sleep 300 & echo $! >"$1/grandchild"
echo ready >"$1/ready"
wait
EOF
# stubborn.sh DIR: the leader ends at SIGTERM; the process it started ignores it.
cat >"$T/stubborn.sh" <<'EOF'
sh -c 'trap "" TERM; echo $$ >"$1/grandchild"; echo ready >"$1/ready"; while :; do sleep 0.1; done' sh "$1" &
wait
EOF
# count-int.py DIR: counts the SIGINTs it gets (into DIR/ints), busy so that
# each is handled the moment it comes; DIR/ready says its process group.
cat >"$T/count-int.py" <<'EOF'
import os, signal, sys, time
n = 0
def on_int(sig, frame):
    global n
    n += 1
    open(sys.argv[1] + "/ints", "w").write("%d\n" % n)
signal.signal(signal.SIGINT, on_int)
signal.signal(signal.SIGTERM, lambda sig, frame: os._exit(0))
open(sys.argv[1] + "/ready", "w").write("%d\n" % os.getpgrp())
end = time.monotonic() + 60
while time.monotonic() < end:
    pass
EOF
alive() { local st; st=$(ps -o stat= -p "$(cat "$1")" 2>/dev/null) && [ "${st#Z}" = "$st" ]; } # PIDFILE
dead() { ! alive "$1"; }

rm -f "$T/ready" "$T/grandchild"
"$ZKLOCK" $P/job sh "$T/job.sh" "$T" & pid=$!
check "job running" wait_for 20 started "$T/ready"
kill -TERM $pid; wait $pid
check "SIGTERM to zklock reaches what the command started" wait_for 5 dead "$T/grandchild"

echo "line from stdin" | "$ZKLOCK" $P/job sh -c 'read -r l; echo "got: $l"' >"$T/stdin-out"
check "COMMAND reads zklock's standard input" grep -q "got: line from stdin" "$T/stdin-out"

rm -f "$T/ready" "$T/ints"
# zklock in a process group of its own, which the test then signals as a
# terminal's Ctrl-C signals its foreground group.
setsid "$ZKLOCK" $P/job "$PY" "$T/count-int.py" "$T" & pid=$!
check "counting command running" wait_for 20 started "$T/ready"
kill -INT -- -$pid
check "SIGINT handled" wait_for 10 started "$T/ints"
kill -TERM $pid; wait $pid
check "a Ctrl-C to zklock's group reaches COMMAND once" [ "$(cat "$T/ints")" = 1 ]
check "...as COMMAND is not in that group (zklock passes it on)" [ "$(cat "$T/ready")" != $pid ]

if "$PY" -c 'import pty' 2>/dev/null && command -v bash >/dev/null; then
  while read -r verdict what; do
    if [ "$verdict" = PASS ]; then ok "terminal: $what"; else fail "terminal: $what"; fi
  done < <("$PY" "$TESTDIR/ttyjob.py" "$ZKLOCK" $P/tty 2>&1)
else
  skip "terminal: python3's pty module is needed"
fi

# ---- the lock lost while the command runs -------------------------------------------------------
lost_run() { # COMMAND...: runs it under zklock, which loses the lock meanwhile
  rm -f "$T/ready" "$T/lost"
  "$ZKLOCK" --session-timeout 2000 --kill-after 1 $P/lost "$@" 2>"$T/lost-err" &
  pid=$!
  check "command running" wait_for 20 started "$T/ready"
  # Deliberate fault: freeze zklock past its session timeout. Another client
  # gets the lock once ZooKeeper has expired the frozen session.
  kill -STOP $pid
  check "the lock moves on while zklock is frozen" "$ZKLOCK" -t 30 $P/lost true
  kill -CONT $pid
  wait $pid; st=$?
  check "zklock exits 75 when it lost the lock" [ $st = 75 ]
  check "...and says so" grep -q "lost $P/lost" "$T/lost-err"
}
lost_run sh -c "trap 'echo term > $T/lost; exit 0' TERM; echo ready > $T/ready; while :; do sleep 0.1; done"
check "the command got SIGTERM" grep -q term "$T/lost"
lost_run sh -c "trap '' TERM; echo ready > $T/ready; while :; do sleep 0.1; done"
check "a command ignoring SIGTERM gets SIGKILL after --kill-after" grep -q "SIGKILL" "$T/lost-err"
lost_run sh "$T/job.sh" "$T"
check "what the command started is stopped with it" dead "$T/grandchild"
lost_run sh "$T/stubborn.sh" "$T"
check "...and SIGKILLed after --kill-after, even when the command itself has ended" \
  wait_for 5 dead "$T/grandchild"
check "...which zklock says" grep -q "SIGKILL" "$T/lost-err"

# An operator deletes the lock node with another client (python kazoo).
if /usr/bin/python3 -c 'import kazoo' 2>/dev/null; then
  rm -f "$T/ready"
  "$ZKLOCK" $P/del sh -c "echo ready > $T/ready; exec sleep 30" 2>"$T/del-err" & pid=$!
  check "command running" wait_for 20 started "$T/ready"
  /usr/bin/python3 -c 'import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=20)
for child in zk.get_children(sys.argv[2]): zk.delete(sys.argv[2] + "/" + child)
zk.stop()' "$ZKLOCK_TEST_HOSTS" $P/del
  wait $pid; st=$?
  check "a deleted lock node: exit 75" [ $st = 75 ]
  check "...and zklock says the node was deleted, not that the session expired" \
    grep -q "lost $P/del (its lock node was deleted); stopping sh" "$T/del-err"
else
  skip "a deleted lock node: needs kazoo for /usr/bin/python3 (apt-get install python3-kazoo)"
fi
check "a lost session is told as such" grep -q "lost $P/lost (the ZooKeeper session expired)" "$T/lost-err"

# ---- read/write modes ----------------------------------------------------------------------------
# Each reader stays inside until it has seen the other inside (both must hold
# at once) and the test says "out".
reader() { "$ZKLOCK" -r $P/rw sh -c "touch $T/in-$1; for i in \$(seq 400); do [ -e $T/in-$2 ] && [ -e $T/readers-go ] && exit 0; sleep 0.05; done; exit 9"; }
reader a b & ra=$!
reader b a & rb=$!
check "both readers inside at once" wait_for 20 test -e "$T/in-a"
check "both readers inside at once" wait_for 20 test -e "$T/in-b"
expect_status 1 "a writer cannot join them" "$ZKLOCK" -w -t 0 $P/rw true
touch "$T/readers-go"
wait $ra; sa=$?; wait $rb; sb=$?
check "readers shared the lock" [ "$sa $sb" = "0 0" ]
expect_status 0 "a writer gets it after them" "$ZKLOCK" -w -t 5 $P/rw true

# ---- zklock-ls ------------------------------------------------------------------------------------
rm -f "$T/ready"
"$ZKLOCK" -w --identity writer-1 $P/ls sh -c "echo x > $T/ready; sleep 30" & w1=$!
check "writer holds" wait_for 20 started "$T/ready"
"$ZKLOCK" -r --identity reader-2 $P/ls true & r2=$!
check "reader queued" wait_for 20 queued $P/ls 2
"$ZKLOCK" -x --identity mutex-3 $P/ls true & m3=$!
check "mutex queued" wait_for 20 queued $P/ls 3
expect_status 0 "zklock-ls shows the queue" "$ZKLS" $P/ls
check "text: header" grep -q "^$P/ls  (1 holding, 2 waiting)" "$T/out"
check "text: 1 holds write writer-1" grep -Eq "^  1 +holds +write +[0-9]{10} .* writer-1$" "$T/out"
check "text: 2 waits read reader-2" grep -Eq "^  2 +waits +read +[0-9]{10} .* reader-2$" "$T/out"
check "text: 3 waits mutex mutex-3" grep -Eq "^  3 +waits +mutex +[0-9]{10} .* mutex-3$" "$T/out"
check "json: states, kinds, identities in order" [ "$(json_field $P/ls '[(n["state"],n["kind"],n["identity"]) for n in q["nodes"]]')" = \
  "[('holds', 'write', 'writer-1'), ('waits', 'read', 'reader-2'), ('waits', 'mutex', 'mutex-3')]" ]
check "json: tokens increase along the queue" [ "$(json_field $P/ls 'all(a["token"] < b["token"] for a, b in zip(q["nodes"], q["nodes"][1:]))')" = True ]
check "json: positions and sessions" [ "$(json_field $P/ls '[n["position"] for n in q["nodes"]] == [1,2,3] and all(n["session"].startswith("0x") for n in q["nodes"])')" = True ]
"$ZKLS" -f $P/ls >"$T/watch" 2>&1 & watcher=$!
check "-f prints the queue" wait_for 20 grep -q "1 holding, 2 waiting" "$T/watch"
"$ZKLS" --watch $P/ls >"$T/watch2" 2>&1 & watcher2=$!
check "--watch is -f" wait_for 20 grep -q "1 holding, 2 waiting" "$T/watch2"
kill -TERM $w1; wait $w1 $r2 $m3
check "-f prints it again as it moves" wait_for 20 grep -q "(free)\|no such lock" "$T/watch"
kill $watcher $watcher2 2>/dev/null; wait $watcher $watcher2 2>/dev/null
expect_status 64 "zklock-ls: -w is no option (zklock's -w is --write)" "$ZKLS" -w $P/ls
check "...and the error names -f" grep -q -- "-f (--follow)" "$T/err"
expect_status 0 "zklock-ls on a missing lock" "$ZKLS" /zklock-test/never-made
check "...says so" grep -q "(no such lock)" "$T/out"
expect_status 69 "zklock-ls: unreachable, within --connect-timeout" \
  "$ZKLS" -s 127.0.0.1:1 --connect-timeout 1 $P/ls
check "...says so in one line" [ "$(cat "$T/err")" = "zklock-ls: no ZooKeeper server answered at 127.0.0.1:1" ]

# ---- zklock-ls -R --------------------------------------------------------------------------------
# Locks at three levels, one with a waiter, and a free lock (its path stays
# until the server removes the empty container): -R lists the three.
tree_holder() { # ID PATH: holds PATH until the test ends it
  "$ZKLOCK" --identity "$1" "$2" sh -c "echo x > $T/ready-$1; sleep 30"
}
tree_holder top $P/tree & t1=$!
tree_holder a $P/tree/a & t2=$!
tree_holder deep $P/tree/b/deep & t3=$!
for id in top a deep; do check "holder $id" wait_for 20 started "$T/ready-$id"; done
"$ZKLOCK" --identity waiter $P/tree/a true & t4=$!
check "a waiter queued" wait_for 20 queued $P/tree/a 2
"$ZKLOCK" $P/tree/free true
expect_status 0 "-R lists the locks below a path" "$ZKLS" -R $P/tree
check "...each with its queue, parents first, siblings sorted; no free lock" \
  [ "$(grep -o "^$P/tree[^ ]*  ([0-9] holding, [0-9] waiting)" "$T/out" | tr '\n' ';')" = \
    "$P/tree  (1 holding, 0 waiting);$P/tree/a  (1 holding, 1 waiting);$P/tree/b/deep  (1 holding, 0 waiting);" ]
"$ZKLS" -R --json $P/tree >"$T/tree.json"
check "-R --json: one object per lock per line" \
  [ "$("$PY" -c 'import json,sys; print([(q["path"][len(sys.argv[1]):], [n["identity"] for n in q["nodes"]]) for q in map(json.loads, open(sys.argv[2]))])' $P "$T/tree.json")" = \
    "[('/tree', ['top']), ('/tree/a', ['a', 'waiter']), ('/tree/b/deep', ['deep'])]" ]
expect_status 0 "-R /: the whole ensemble" "$ZKLS" -R /
check "...finds them too" grep -q "^$P/tree/b/deep  " "$T/out"
expect_status 1 "-R stops at --limit" "$ZKLS" -R --limit 2 $P/tree
check "...says where" grep -q "stopped after looking at 2 nodes, before $P/tree/b (raise --limit to see more)" "$T/err"
check "...having printed what it found" [ "$(grep -c "^$P/tree" "$T/out")" = 2 ]
expect_status 0 "-R where there is no lock: nothing" "$ZKLS" -R /zklock-test/never-made
check "...printed" [ ! -s "$T/out" ]
expect_status 64 "-R and -f do not go together" "$ZKLS" -R -f $P/tree
expect_status 64 "-R: usage" "$ZKLS" -R
kill -TERM $t1 $t2 $t3; wait $t1 $t2 $t3 $t4

# ---- -v and --kazoo ---------------------------------------------------------------------------------
rm -f "$T/ready"
"$ZKLOCK" --identity holder-v $P/v sh -c "echo x > $T/ready; sleep 30" & hv=$!
check "holder running" wait_for 20 started "$T/ready"
"$ZKLOCK" -v $P/v true 2>"$T/verbose" & vw=$!
check "-v shows the place in the queue and the holder" \
  wait_for 20 grep -q "waiting for $P/v: place 2 of 2, 1 ahead of us; held by holder-v" "$T/verbose"
# A child node beside the lock nodes (zklock makes $P/v/sub): the queue
# changes, what -v says does not. Then a third contender: place 2 of 3.
"$ZKLOCK" $P/v/sub true
"$ZKLOCK" $P/v true & v3=$!
check "-v says when the place changes" wait_for 20 grep -q "place 2 of 3" "$T/verbose"
check "...and only then: one line for place 2 of 2" [ "$(grep -c "place 2 of 2" "$T/verbose")" = 1 ]
kill -TERM $hv; wait $hv $vw $v3
check "-v says when it got the lock" grep -q "acquired $P/v after" "$T/verbose"
# From zklock_lock_stats, after the release: the wait (it queued behind a
# holder that ran until killed: more than nothing) and the hold.
check "-v says how long it waited" grep -Eq "^zklock: waited [0-9]+\.[0-9]{3}s for $P/v$" "$T/verbose"
check "...a wait behind a holder is not nothing" \
  [ "$(sed -n "s|^zklock: waited \([0-9.]*\)s for $P/v$|\1|p" "$T/verbose" | tr -d .)" -gt 0 ]
check "-v says how long it held" grep -Eq "^zklock: held $P/v for [0-9]+\.[0-9]{3}s$" "$T/verbose"
# An empty identity reads the same in -v as in zklock-ls's table.
rm -f "$T/ready"
"$ZKLOCK" --identity "" $P/v sh -c "echo x > $T/ready; sleep 30" & hv=$!
check "a holder with an empty identity" wait_for 20 started "$T/ready"
"$ZKLOCK" -v $P/v true 2>"$T/verbose" & vw=$!
check "zklock-ls shows it as -" [ "$("$ZKLS" $P/v | awk '$2 == "holds" { print $NF }')" = - ]
check "...and so does -v" wait_for 20 grep -q "; held by - (mutex, token" "$T/verbose"
kill -TERM $hv; wait $hv $vw

rm -f "$T/ready"
"$ZKLOCK" --kazoo $P/kz sh -c "echo x > $T/ready; sleep 30" & kz=$!
check "kazoo-named holder running" wait_for 20 started "$T/ready"
check "--kazoo names the node <32 hex>__lock__<seq>" \
  [ "$(json_field $P/kz 'q["nodes"][0]["kind"] + " " + str(bool(__import__("re").match(r"^[0-9a-f]{32}__lock__[0-9]{10}$", q["nodes"][0]["name"])))')" = "kazoo-lock True" ]
expect_status 1 "a Curator-named mutex respects it" "$ZKLOCK" -t 0 $P/kz true
kill -TERM $kz; wait $kz

# ---- zklock-bench: usage -------------------------------------------------------------------------
expect_status 64 "zklock-bench: no workload" "$ZKBENCH" "$ZKLOCK_TEST_HOSTS"
check "...says what is missing" grep -q "missing WORKLOAD after HOSTS: uncontended, contended, semaphore, herd, many, multi, election, async-many, idle or idle-many" "$T/err"
expect_status 64 "zklock-bench: an unknown workload" "$ZKBENCH" "$ZKLOCK_TEST_HOSTS" bogus
check "...is named" grep -q "unknown workload 'bogus'" "$T/err"
expect_status 64 "zklock-bench: a workload without its arguments" "$ZKBENCH" "$ZKLOCK_TEST_HOSTS" contended 4
check "...says which" grep -q "contended needs CLIENTS and SECONDS" "$T/err"
expect_status 64 "zklock-bench: an extra argument" "$ZKBENCH" "$ZKLOCK_TEST_HOSTS" many 3 4
check "...is named" grep -q "many takes LOCKS only, not '4'" "$T/err"
expect_status 64 "zklock-bench: a session timeout out of range" "$ZKBENCH" --session-timeout 0 "$ZKLOCK_TEST_HOSTS" idle 1 1
check "...says which" grep -q -- "--session-timeout: '0' is not a number from 1 to 3600000" "$T/err"
expect_status 0 "zklock-bench --help" "$ZKBENCH" --help
check "...offers --lease" grep -q -- "--lease strict|session" "$T/out"
check "...says what the comparison is, not where a file of ours lies" \
  sh -c "grep -q 'docs/performance.md' '$T/out' && ! grep -q 'shared/' '$T/out'"

# ---- --lease: the session lease (ZKLOCK_LEASE_SESSION), no heartbeat writes ------------------------
expect_status 64 "zklock: an unknown --lease" "$ZKLOCK" --lease loose $P/lease true
check "...is named, with both choices" grep -q -- "--lease: 'loose' is neither strict nor session" "$T/err"
expect_status 64 "zklock-elect: an unknown --lease" "$B/tools/zklock-elect" --lease 1 $P/lease v true
check "...is named" grep -q -- "--lease: '1' is neither strict nor session" "$T/err"
expect_status 64 "zklock-bench: an unknown --lease" "$ZKBENCH" --lease "" "$ZKLOCK_TEST_HOSTS" idle 1 1
check "...is named" grep -q -- "--lease: '' is neither strict nor session" "$T/err"
expect_status 0 "zklock --lease session runs the command" \
  "$ZKLOCK" --lease session $P/lease sh -c 'test -n "$ZKLOCK_FENCE"'
expect_status 0 "zklock --lease strict runs the command" "$ZKLOCK" --lease strict $P/lease true
check "zklock --help offers --lease" sh -c "'$ZKLOCK' --help | grep -q -- '--lease strict|session'"
check "...and its man page" grep -q 'lease " " strict' "$TESTDIR/../docs/zklock.1"
# Two holders idle for 4 s on 4 s sessions commit nothing with the session
# lease (the strict one: a few heartbeats each); one stray transaction
# allowed (an earlier test's session or container going meanwhile).
expect_status 0 "zklock-bench --lease session idle" \
  "$ZKBENCH" --lease session --session-timeout 4000 "$ZKLOCK_TEST_HOSTS" idle 2 4
check "...says the lease in its JSON line" grep -q '"lease":"session"' "$T/out"
check "...and the ensemble committed nothing for the holders" \
  [ "$(tail -n 1 "$T/out" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["txns"])')" -le 1 ]

# ---- clean output while ZooKeeper is away ----------------------------------------------------------
# The ZooKeeper client library logs to stderr from its own threads; the
# tools show that log under -v only. Every tool on a server of our own,
# killed while they work: a quiet zklock and a -v one holding, zklock-ls -f,
# zklock-bench mid-run.
own_lines_only() { ! grep -v "^$1: " "$2"; } # TOOL FILE (prints the intruders)
not_grep() { ! grep -q "$@"; }
exited() { ! kill -0 "$1" 2>/dev/null; }
expect_status 69 "zklock -v: unreachable" "$ZKLOCK" -v -s 127.0.0.1:1 --connect-timeout 1 $P/a true
check "...shows the client's log" grep -q "ZOO_ERROR" "$T/err"
expect_status 69 "zklock: unreachable" "$ZKLOCK" -s 127.0.0.1:1 --connect-timeout 1 $P/a true
check "...shows none of it" own_lines_only zklock "$T/err"
if hosts2=$(private_zk); then
  rm -f "$T/go" "$T/ready-q" "$T/ready-v"
  hold_until_go() { # ID [zklock options...]: holds $P/clean-ID until $T/go exists
    local id=$1; shift
    "$ZKLOCK" -s "$hosts2" --session-timeout 4000 "$@" $P/clean-$id \
      sh -c "echo x > $T/ready-$id; while [ ! -e $T/go ]; do sleep 0.05; done"
  }
  hold_until_go q 2>"$T/clean-q" & cq=$!
  hold_until_go v -v 2>"$T/clean-v" & cv=$!
  "$ZKLS" -s "$hosts2" -f $P/clean-q >/dev/null 2>"$T/clean-ls" & cl=$!
  "$ZKBENCH" -p $P/bench "$hosts2" contended 2 300 >/dev/null 2>"$T/clean-bench" & cb=$!
  check "holders running" wait_for 20 started "$T/ready-q"
  check "holders running" wait_for 20 started "$T/ready-v"
  check "zklock-bench running" wait_for 20 sh -c "'$ZKLS' -s '$hosts2' $P/bench/c-$cb | grep -q holds"
  private_zk_kill
  check "the client logs errors now (zklock -v shows them)" wait_for 30 grep -q "ZOO_ERROR" "$T/clean-v"
  check "zklock-ls -f says it cannot read" wait_for 30 grep -q "trying again" "$T/clean-ls"
  check "zklock-bench stops: its figures would be wrong" wait_for 30 exited $cb
  kill $cb 2>/dev/null; wait $cb; st=$?
  check "...with 69" [ $st = 69 ]
  touch "$T/go"
  wait $cq $cv
  kill $cl; wait $cl
  check "zklock: nothing but its own lines" own_lines_only zklock "$T/clean-q"
  check "zklock-ls: nothing but its own lines" own_lines_only zklock-ls "$T/clean-ls"
  check "...saying once that it cannot read" [ "$(grep -c "trying again" "$T/clean-ls")" = 1 ]
  check "zklock-bench: nothing but its own lines" own_lines_only zklock-bench "$T/clean-bench"
  check "...which say why it stopped" grep -q "connection to ZooKeeper was lost" "$T/clean-bench"
  stop_private_zk
else
  fail "a ZooKeeper server of the test's own"
fi

# ---- --on-suspend stop: the command waits while the connection is lost -------------------------
state_of() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null; } # R, S, T (stopped), ...
stopped() { [ "$(state_of "$1")" = T ]; }
running() { [ -n "$(state_of "$1")" ] && [ "$(state_of "$1")" != T ]; }
rm -f "$T/ready"
# The window between the notice (2/3 of the timeout after the last reply)
# and the end of the lease (0.95 of it after the last heartbeat answered,
# one every sixth) is about a ninth of the timeout: 30 s leaves the test
# ~3.5 s to see the stop and resume the server, on a loaded machine too
# (20 s, ~2 s, was once too short under load).
"$ZKLOCK" --session-timeout 30000 --on-suspend stop $P/susp \
  sh -c "echo \$\$ > $T/ready; while :; do sleep 0.05; done" 2>"$T/susp-err" & zs=$!
check "--on-suspend: command running" wait_for 20 started "$T/ready"
cmd=$(cat "$T/ready")
# Deliberate fault: the server freezes; the client notices in 2/3 of the timeout.
"$ZKLOCK_TEST_HARNESS" pause "$ZKLOCK_TEST_ZKDIR" 1
check "...stopped (SIGSTOP) while the connection is lost" wait_for 40 stopped "$cmd"
"$ZKLOCK_TEST_HARNESS" resume "$ZKLOCK_TEST_ZKDIR" 1
check "...continued (SIGCONT) when the session is back" wait_for 20 running "$cmd"
check "...which still holds the lock" queued $P/susp 1
check "...and says so" grep -q "still holds: continuing" "$T/susp-err"
kill -TERM $zs; wait $zs
expect_status 64 "--on-suspend takes stop or continue" "$ZKLOCK" --on-suspend pause $P/susp true

# ---- -v through an outage, and after a loss: zklock's own words ---------------------------------
# A waiter (it has no lease to run out) sees the server freeze, and come
# back within the session timeout.
rm -f "$T/ready-o" "$T/go-o"
"$ZKLOCK" --session-timeout 10000 $P/outage \
  sh -c "echo x > $T/ready-o; while [ ! -e $T/go-o ]; do sleep 0.05; done" 2>/dev/null & oh=$!
check "-v, an outage: the lock is held" wait_for 20 started "$T/ready-o"
"$ZKLOCK" -v --session-timeout 10000 $P/outage true 2>"$T/outage-err" & ov=$!
check "...the -v one waits" wait_for 20 queued $P/outage 2
"$ZKLOCK_TEST_HARNESS" pause "$ZKLOCK_TEST_ZKDIR" 1
check "...and says when the connection is lost" \
  wait_for 30 grep -q "^zklock: connection to ZooKeeper lost: reconnecting" "$T/outage-err"
"$ZKLOCK_TEST_HARNESS" resume "$ZKLOCK_TEST_ZKDIR" 1
check "...and when it is back, the same session" \
  wait_for 20 grep -q "^zklock: reconnected to ZooKeeper: the same session, its locks kept" "$T/outage-err"
touch "$T/go-o"; wait $oh; wait $ov; st=$?
check "...then takes the lock (exit $st)" [ $st = 0 ]

# A holder frozen past its session timeout: the session's end is said, and
# no release (there is nothing left to release).
rm -f "$T/ready"
"$ZKLOCK" -v --session-timeout 2000 $P/vlost sh -c "echo ready > $T/ready; exec sleep 300" 2>"$T/vlost-err" & pid=$!
check "-v, a loss: the command runs" wait_for 20 started "$T/ready"
kill -STOP $pid
check "...the lock moves on while zklock is frozen" "$ZKLOCK" -t 30 $P/vlost true
kill -CONT $pid; wait $pid; st=$?
check "...exit 75 (exit $st)" [ $st = 75 ]
check "...saying that the session expired, in zklock's own words" \
  grep -q "^zklock: ZooKeeper session expired: its locks are lost" "$T/vlost-err"
check "...and that the command ended" grep -q "^zklock: sh ended (143)$" "$T/vlost-err"
check "...with no word of releasing (nothing was)" not_grep releas "$T/vlost-err"

# ---- -n N / --limit N: a counting semaphore -------------------------------------------------------
# Two leases: two commands inside at once, a third busy; -n before a path is
# still flock's -n.
lease() { "$ZKLOCK" -n 2 --identity "lease-$1" $P/sem sh -c "touch $T/sem-in-$1; while [ ! -e $T/sem-go ]; do sleep 0.02; done"; }
lease a & la=$!
lease b & lb=$!
check "-n 2: two commands inside at once" wait_for 20 test -e "$T/sem-in-a"
check "-n 2: two commands inside at once" wait_for 20 test -e "$T/sem-in-b"
expect_status 1 "-n 2 -t 0: a third one is busy, silently" "$ZKLOCK" -n 2 -t 0 $P/sem true
check "...silently" [ ! -s "$T/err" ]
expect_status 3 "--limit 2 -n: the same, with -n as flock's" "$ZKLOCK" --limit 2 -n -E 3 $P/sem true
expect_status 1 "-v says how many leases are taken, and by whom" "$ZKLOCK" -v -n2 -t 0 $P/sem true
check "...2 of 2, the oldest named" grep -q "is locked: 2 of 2 leases taken (the oldest by lease-[ab]" "$T/err"
"$ZKLOCK" -n 2 --identity lease-c $P/sem sh -c 'echo "$ZKLOCK_FENCE" > '"$T/sem-fence" & lc=$!
# It takes the acquisition lock, makes its lease node and waits for a lease
# to free: four nodes.
check "a third one waits in line" wait_for 20 queued $P/sem 4
expect_status 0 "zklock-ls shows the semaphore" "$ZKLS" $P/sem
check "text: the leases taken and the line" grep -q "^$P/sem  (semaphore: 2 leases taken, 1 in line)" "$T/out"
check "text: the leases hold" [ "$(grep -Ec "^  [12] +holds +lease +[0-9]{10} .* lease-[ab]$" "$T/out")" = 2 ]
# The third is one contender: one row, its lease node (the one it will hold).
check "text: the third waits, heading the line" grep -Eq "^  3 +waits +lease +[0-9]{10} .* lease-c$" "$T/out"
check "...in one row, as one contender" [ "$(grep -c " lease-c$" "$T/out")" = 1 ]
check "json: a semaphore, two leases and a waiter: its lease node and its node in line" \
  [ "$(json_field $P/sem '(q.get("semaphore"), [(n["state"], n["kind"]) for n in q["nodes"]])')" = \
  "(True, [('holds', 'lease'), ('holds', 'lease'), ('waits', 'lease'), ('waits', 'mutex')])" ]
check "json: ...counted as the table does" [ "$(json_field $P/sem '(q["taken"], q["in_line"])')" = "(2, 1)" ]
"$ZKLOCK" -n 2 --identity lease-d $P/sem true & ld=$!
check "a fourth one waits in line" wait_for 20 queued $P/sem 5
expect_status 0 "zklock-ls shows two in line" "$ZKLS" $P/sem
check "text: 2 leases taken, 2 in line" grep -q "^$P/sem  (semaphore: 2 leases taken, 2 in line)" "$T/out"
check "text: the fourth behind the third, by its node in the acquisition lock" \
  grep -Eq "^  4 +waits +mutex +[0-9]{10} .* lease-d$" "$T/out"
check "text: a row per contender, four" [ "$(grep -Ec "^  [0-9]+ +(holds|waits) " "$T/out")" = 4 ]
check "json: five nodes, 2 taken, 2 in line" [ "$(json_field $P/sem '(len(q["nodes"]), q["taken"], q["in_line"])')" = "(5, 2, 2)" ]
touch "$T/sem-go"; wait $la $lb $lc $ld
check "the third ran, with its lease's token" grep -Eq '^[0-9]+$' "$T/sem-fence"
expect_status 64 "--limit 0 is refused" "$ZKLOCK" --limit 0 $P/sem true
expect_status 64 "--limit and -r do not go together" "$ZKLOCK" -n 2 -r $P/sem true
check "...and says so" grep -q "choose one of -x, -r, -w, --limit" "$T/err"
expect_status 0 "--kazoo --limit: kazoo's Semaphore" "$ZKLOCK" --kazoo --limit 2 $P/ksem true
# Held meanwhile (before kazoo paths were persistent, an empty one was reaped with its limit).
"$ZKLOCK" --kazoo --limit 2 $P/ksem sh -c "touch $T/ksem-in; while [ ! -e $T/ksem-go ]; do sleep 0.02; done" & kh=$!
check "a kazoo semaphore of 2 is held" wait_for 20 test -e "$T/ksem-in"
expect_status 64 "--kazoo: another limit on the same path is refused" "$ZKLOCK" --kazoo --limit 3 $P/ksem true
check "...saying why" grep -q "cannot take $P/ksem: the semaphore's path holds another number of leases" "$T/err"
touch "$T/ksem-go"; wait $kh

# ---- --and: several paths, all or none ----------------------------------------------------------------
expect_status 0 "--and: the command runs holding both" \
  "$ZKLOCK" --and $P/and2 $P/and1 sh -c "$ZKLS --json $P/and1 $P/and2 > $T/and-held"
check "...one node in each, both held" [ "$("$PY" -c 'import json,sys; print([n["state"] for l in open(sys.argv[1]) for n in json.loads(l)["nodes"]])' "$T/and-held")" = "['holds', 'holds']" ]
"$ZKLOCK" $P/and2 sh -c "touch $T/and-in; while [ ! -e $T/and-go ]; do sleep 0.02; done" & ah=$!
check "another holds one of them" wait_for 20 test -e "$T/and-in"
expect_status 1 "--and -t 0: busy, taking neither" "$ZKLOCK" -t 0 --and $P/and2 $P/and1 true
check "...and leaving nothing on the free one" queued $P/and1 0
expect_status 1 "--and -t 0.3: the timeout, taking neither" "$ZKLOCK" -t 0.3 --and $P/and1 $P/and2 true
check "...and leaving nothing on the free one" queued $P/and1 0
touch "$T/and-go"; wait $ah
expect_status 64 "--and with LOCKPATH again is refused" "$ZKLOCK" --and $P/and1 $P/and1 true
expect_status 65 "--and checks its path" "$ZKLOCK" --and no-slash $P/and1 true

# ---- zklock dies: its watchdog stops the job before the lock can move on -------------------------
# worker.sh DIR [TERM]: a job that starts a background process, writes both
# pids to DIR/pids and waits; with TERM, both ignore SIGTERM.
cat >"$T/worker.sh" <<'EOF'
[ "${2:-}" = TERM ] && trap '' TERM
sleep 300 & echo "$$ $!" >"$1/pids"
wait
EOF
# next.sh DIR: the next holder's command: notes (in DIR/alive) the old job's
# processes still alive when it starts.
cat >"$T/next.sh" <<'EOF'
for p in $(cat "$1/pids"); do
  st=$(ps -o stat= -p "$p" 2>/dev/null) && [ "${st#Z}" = "$st" ] && echo "$p" >>"$1/alive"
done
echo ran >"$1/next-ran"
EOF
guard_of() { ps -o pid=,comm= --ppid "$1" | awk '$2 == "zklock-guard" { print $1 }'; } # ZKLOCK_PID
pid_gone() { local st; ! st=$(ps -o stat= -p "$1" 2>/dev/null) || [ "${st#Z}" != "$st" ]; }
no_process() { ! kill -0 "$1" 2>/dev/null; } # not even a zombie: reaped
# killed_run NAME pid|group [TERM]: zklock runs worker.sh, another waits for
# the lock; then SIGKILL for zklock (pid) or its whole process group (group).
killed_run() {
  local name=$1 how=$2 d=$T/killed-$1 pid guard next; shift 2
  mkdir -p "$d"
  setsid "$ZKLOCK" --session-timeout 4000 $P/killed-$name sh "$T/worker.sh" "$d" "$@" 2>"$d/err" & pid=$!
  check "kill -9 ($name): the job runs" wait_for 20 started "$d/pids"
  guard=$(guard_of $pid)
  check "...watched by zklock's watchdog" [ -n "$guard" ]
  "$ZKLOCK" $P/killed-$name sh "$T/next.sh" "$d" & next=$!
  check "...the next holder waits" wait_for 20 queued $P/killed-$name 2
  if [ "$how" = group ]; then kill -KILL -- -$pid; else kill -KILL $pid; fi
  wait $pid 2>/dev/null
  check "...and runs once the killed zklock's session expired" wait_for 30 started "$d/next-ran"
  check "...finding nothing of the old job alive: its command, what that started" [ ! -e "$d/alive" ]
  check "...which the watchdog stopped, saying so" \
    grep -q "^zklock: zklock (pid $pid) ended while sh ran: SIGTERM to its process group" "$d/err"
  check "...and then exited" wait_for 10 pid_gone "${guard:-0}"
  wait $next
}
killed_run pid pid            # kill -9 zklock, as the OOM killer does
killed_run group group TERM   # kill -9 zklock's whole group; a job deaf to SIGTERM

# zklock ends normally: its watchdog exits before it, and what COMMAND left
# in the background is left alone, as before.
cat >"$T/bg.sh" <<'EOF'
sleep 300 & echo $! >"$1/bg"
ps -o pid=,comm= --ppid $PPID | awk '$2 == "zklock-guard" { print $1 }' >"$1/guard"
ps -o sid= -p "$(cat "$1/guard")" >"$1/guard-sid"; ps -o sid= -p $PPID >"$1/zklock-sid"
EOF
mkdir -p "$T/ends"
expect_status 0 "a command that leaves a process in the background" "$ZKLOCK" $P/ends sh "$T/bg.sh" "$T/ends"
check "...ran watched by zklock's watchdog" [ -s "$T/ends/guard" ]
guard_detached() { [ -s "$1/guard-sid" ] && ! cmp -s "$1/guard-sid" "$1/zklock-sid"; }
check "...already in a session of its own when COMMAND started" guard_detached "$T/ends"
check "...which is gone, reaped, once zklock has exited" no_process "$(cat "$T/ends/guard")"
check "...having stopped nothing: the background process runs on" alive "$T/ends/bg"
check "...and said nothing" [ ! -s "$T/err" ]
kill "$(cat "$T/ends/bg")"
for p in killed-pid killed-group ends; do
  check "no node left under $P/$p" wait_for 10 queued $P/$p 0
done

# ---- --max-hold: a hold with a limit, as timeout(1) ------------------------------------------------
expect_status 64 "--max-hold 0 is refused (0 would mean no limit)" "$ZKLOCK" --max-hold 0 $P/maxhold true
expect_status 64 "--max-hold takes seconds" "$ZKLOCK" --max-hold -1 $P/maxhold true
check "--help tells of --max-hold" sh -c "'$ZKLOCK' --help | grep -q -- '--max-hold SECONDS'"
rm -f "$T/mh-pid"
started_at=$(date +%s)
"$ZKLOCK" --max-hold 2 --kill-after 1 $P/maxhold sh -c "echo \$\$ >$T/mh-pid; exec sleep 30" \
  2>"$T/mh-err"; st=$?
took=$(( $(date +%s) - started_at ))
check "--max-hold 2 ends a longer command: exit 124, as timeout(1) (exit $st)" [ $st = 124 ]
check "...in less than the command's 30 s (took $took s)" [ $took -lt 30 ]
check "...which is gone" wait_for 5 dead "$T/mh-pid"
check "...and zklock says why" grep -q "^zklock: $P/maxhold: --max-hold passed: stopping sh, then releasing\$" "$T/mh-err"
check "...the lock is free after" "$ZKLOCK" -t 0 $P/maxhold true
expect_status 0 "a command that ends within --max-hold: its own status" "$ZKLOCK" --max-hold 30 $P/maxhold true
# The lock goes only once the command is gone: a command (a whole group)
# that ignores SIGTERM keeps it until SIGKILL, --kill-after later, and the
# next holder's command, queued meanwhile, starts only after that.
rm -f "$T/mh-first" "$T/mh-next"
"$ZKLOCK" --max-hold 1 --kill-after 2 $P/maxhold \
  sh -c "trap '' TERM; echo \$\$ >$T/mh-first; sleep 30 & while :; do sleep 0.05; done" \
  2>"$T/mh-err" & first=$!
check "a command that ignores SIGTERM holds, --max-hold 1 --kill-after 2" wait_for 20 started "$T/mh-first"
"$ZKLOCK" -t 30 $P/maxhold \
  sh -c "if kill -0 -\$(cat $T/mh-first) 2>/dev/null; then echo beside; else echo after; fi >$T/mh-next" &
next=$!
check "...the next holder waits" wait_for 20 queued $P/maxhold 2
wait $first; st=$?
check "...its zklock exits 124 (exit $st)" [ $st = 124 ]
check "...once the group took SIGKILL" grep -q "sh did not stop after SIGTERM: SIGKILL" "$T/mh-err"
wait $next; st=$?
check "...and the next holder's command (exit $st) ran only once that group was gone" \
  grep -qx after "$T/mh-next"
# ---- --track-previous, --lock-delay (issue 25): none -> clean -> unclean -------------------------------
tp=$P/prev
envvar() { sed -n "s/^$2=//p" "$1"; } # FILE NAME
ms_now() { date +%s%3N; }
expect_status 0 "--track-previous: the first holder" "$ZKLOCK" --track-previous $tp sh -c 'env >"$0"' "$T/prev-1"
check "...is told none, and no token" [ "$(envvar "$T/prev-1" ZKLOCK_PREVIOUS)" = none -a \
  -z "$(envvar "$T/prev-1" ZKLOCK_PREVIOUS_TOKEN)" ]
check "...and the record is no contender" queued $tp 0
"$ZKLOCK" --track-previous $tp sh -c 'env >"$0"' "$T/prev-2"
check "the next is told clean, with the first's token" \
  [ "$(envvar "$T/prev-2" ZKLOCK_PREVIOUS)" = clean -a \
  "$(envvar "$T/prev-2" ZKLOCK_PREVIOUS_TOKEN)" = "$(envvar "$T/prev-1" ZKLOCK_FENCE)" ]
# kill_holder N: a --track-previous holder with a short session is killed
# (kill -9 of its whole group); waits until its node is gone (the session
# expired).
kill_holder() { # N [path]: sets kill_ms
  local pid path=${2:-$tp}
  rm -f "$T/prev-k$1"
  setsid "$ZKLOCK" --track-previous --session-timeout 4000 $path sh -c 'env >"$0.tmp"; mv "$0.tmp" "$0"; exec sleep 60' \
    "$T/prev-k$1" 2>/dev/null & pid=$!
  check "a --track-previous holder runs ($1)" wait_for 20 started "$T/prev-k$1"
  kill -KILL -- -$pid; kill_ms=$(ms_now); wait $pid 2>/dev/null
  check "...is killed, and its session expires" wait_for 30 queued $path 0
}
kill_holder 1
expect_status 0 "after a kill -9" "$ZKLOCK" --track-previous $tp sh -c 'env >"$0"' "$T/prev-3"
check "...the next is told unclean, with the dead holder's token" \
  [ "$(envvar "$T/prev-3" ZKLOCK_PREVIOUS)" = unclean -a \
  "$(envvar "$T/prev-3" ZKLOCK_PREVIOUS_TOKEN)" = "$(envvar "$T/prev-k1" ZKLOCK_FENCE)" ]
kill_holder 2
# The delay runs from the dead holder's unclean end (the end of its lease: no
# sooner than its death), not from this run's turn.
expect_status 0 "--lock-delay 2 after an unclean end" "$ZKLOCK" -v --lock-delay 2 $tp sh -c 'env >"$0"; date +%s%3N >"$0.t"' "$T/prev-4"
cp "$T/err" "$T/prev-4.err"
check "...runs its command at least 2 s after the death ($(( $(cat "$T/prev-4.t") - kill_ms )) ms)" \
  [ $(( $(cat "$T/prev-4.t") - kill_ms )) -ge 2000 ]
check "...and says unclean, with the dead holder's token" \
  [ "$(envvar "$T/prev-4" ZKLOCK_PREVIOUS)" = unclean -a \
  "$(envvar "$T/prev-4" ZKLOCK_PREVIOUS_TOKEN)" = "$(envvar "$T/prev-k2" ZKLOCK_FENCE)" ]
check "...and -v tells it" grep -q "previous holder: unclean (token $(envvar "$T/prev-k2" ZKLOCK_FENCE))" "$T/prev-4.err"
acquired=$(sed -n 's/.*acquired .* after \([0-9.]*\)s .*/\1/p' "$T/prev-4.err")
waited=$(sed -n 's/.*waited \([0-9.]*\)s for .*/\1/p' "$T/prev-4.err")
check "...whose 'acquired after' ($acquired s) agrees with 'waited' ($waited s)" \
  "$PY" -c 'import sys; a, w = map(float, sys.argv[1:]); sys.exit(abs(a - w) > 0.5)' "${acquired:-0}" "${waited:-99}"
# Inside the delay, a try-once gives up (the conflict code), says how much
# is left, and changes nothing the next run reads.
kill_holder 3 $P/prev-in
expect_status 1 "-t 0 inside a 30 s lock-delay: skips" "$ZKLOCK" -v -t 0 --lock-delay 30 $P/prev-in true
check "...and says how much was left, after whose end" \
  grep -q "lock-delay: [0-9.]* s left after the unclean end of token $(envvar "$T/prev-k3" ZKLOCK_FENCE)" "$T/err"
expect_status 0 "...the next run, tracking without a delay" "$ZKLOCK" --track-previous $P/prev-in sh -c 'env >"$0"' "$T/prev-in"
check "...reads the same unclean end" [ "$(envvar "$T/prev-in" ZKLOCK_PREVIOUS)" = unclean -a \
  "$(envvar "$T/prev-in" ZKLOCK_PREVIOUS_TOKEN)" = "$(envvar "$T/prev-k3" ZKLOCK_FENCE)" ]
t0=$(ms_now)
expect_status 0 "--lock-delay 2 after a clean end" "$ZKLOCK" --lock-delay 2 $tp sh -c 'env >"$0"' "$T/prev-5"
t1=$(ms_now)
check "...does not wait (took $((t1 - t0)) ms)" [ $((t1 - t0)) -lt 2000 ]
check "...and says clean" [ "$(envvar "$T/prev-5" ZKLOCK_PREVIOUS)" = clean ]
expect_status 64 "--lock-delay -1 is refused" "$ZKLOCK" --lock-delay -1 $tp true
expect_status 64 "--track-previous with -r is refused" "$ZKLOCK" --track-previous -r $tp true
expect_status 64 "--track-previous with --and is refused" "$ZKLOCK" --track-previous --and $P/prev2 $tp true
check "no node left under $tp but the record" queued $tp 0

# ---- the cron fleet: three hosts race every night with -t 0 --lock-delay 3 -------------------------------
# Exactly one runs each night; every host tracks, so the verdict is never
# unknown: none, clean..., a host killed -9 while it runs, then (once its
# session expired and the delay after its end is over) unclean, clean...
fleet=$P/fleet
run_host() { # NIGHT HOST [kill]: one host's cron run; its pid, exit status and (if it ran) env in files
  local f=$T/fleet-$1
  # The job lasts until the two other runs are over (or, to be killed, for
  # ever): none of them can find the lock free meanwhile.
  "$ZKLOCK" -t 0 --lock-delay 3 --session-timeout 4000 $fleet sh -c 'env >"$0.env.tmp"; mv "$0.env.tmp" "$0.env"
    n=0; while [ "$(ls "$1"-*.rc 2>/dev/null | wc -l)" -lt 2 ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n + 1)); done
    [ "$2" = kill ] && exec sleep 60; exit 0' "$f-$2" "$f" "${3:-}" 2>"$f-$2.err" &
  echo $! >"$f-$2.pid"
  wait $!
  echo $? >"$f-$2.rc"
}
ran_in() { ls "$T"/fleet-$1-*.env 2>/dev/null | sed 's/\.env$//'; } # NIGHT: who ran
rcs_in() { cat "$T"/fleet-$1-*.rc 2>/dev/null | sort | tr '\n' ' '; }
last_fence=
for night in 1 2 3 4 5 6 7 8; do # (not n: testlib.sh counts its checks in n)
  rm -f "$T"/fleet-$night-*
  mode=; [ $night = 4 ] && mode=kill
  pids=
  for h in 1 2 3; do run_host $night $h $mode & pids="$pids $!"; done
  if [ "$mode" = kill ]; then
    check "night $night: one host runs" wait_for 30 sh -c "ls $T/fleet-$night-*.env >/dev/null 2>&1"
    check "...the two others skip" wait_for 30 sh -c "[ \$(ls $T/fleet-$night-*.rc 2>/dev/null | wc -l) = 2 ]"
    kill -KILL "$(cat "$(ran_in $night).pid")"; kill_ms=$(ms_now)
  fi
  wait $pids
  winner=$(ran_in $night)
  case $night in 1) want=none ;; 5) want=unclean ;; *) want=clean ;; esac
  check "night $night: exactly one host runs (ran: $(echo $winner | wc -w); exits: $(rcs_in $night))" \
    [ "$(echo $winner | wc -w)" = 1 ]
  [ "$mode" = kill ] || check "...the two others skip, exit 1" [ "$(rcs_in $night)" = "0 1 1 " ]
  check "...reading $want ($(envvar "$winner.env" ZKLOCK_PREVIOUS), token $(envvar "$winner.env" ZKLOCK_PREVIOUS_TOKEN))" \
    [ "$(envvar "$winner.env" ZKLOCK_PREVIOUS)" = $want -a \
      "$(envvar "$winner.env" ZKLOCK_PREVIOUS_TOKEN)" = "$last_fence" ]
  last_fence=$(envvar "$winner.env" ZKLOCK_FENCE)
  if [ "$mode" = kill ]; then
    check "...its host killed -9 while it runs: its session expires" wait_for 30 queued $fleet 0
    # Its lease ends no later than a session timeout (4 s) after its death;
    # the delay (3 s) after that; and a margin (a run reckons the server's
    # time from when it heard its create's answer: later on a loaded
    # machine, so that the delay it computes only ever ends later).
    check "...and the delay after its end passes" wait_for 20 sh -c "[ \$(date +%s%3N) -ge $((kill_ms + 9000)) ]"
  fi
done
check "no node left under $fleet but the record" queued $fleet 0

# ---- nothing left behind -------------------------------------------------------------------------------
for p in a env id busy sig wait job tty lost del rw ls tree tree/a tree/b/deep v kz susp sem ksem and1 and2 maxhold prev-in fleet; do
  check "no node left under $P/$p" wait_for 10 queued $P/$p 0
done
done_testing
