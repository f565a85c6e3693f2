#!/bin/bash
# elect.sh: zklock-elect against a throwaway ZooKeeper: one leader at a
# time, handover on resign and on death (one worker at a time when the
# leader is killed), the listener following every change, COMMAND's
# environment and exit status, usage errors.
set -u
source "${srcdir:-$(dirname "$0")/..}/test/testlib.sh"
ELECT=$B/tools/zklock-elect
P=/zklock-test/elect-$$
lines() { [ "$(wc -l <"$1")" -ge "$2" ]; }  # FILE N: at least N lines
last_is() { [ "$(tail -n 1 "$1" 2>/dev/null)" = "$2" ]; }

# ---- usage --------------------------------------------------------------------------------------
expect_status 64 "missing VALUE" "$ELECT" $P/e
check "...says so" grep -q "missing VALUE" "$T/err"
expect_status 64 "--json goes with -l" "$ELECT" --json $P/e v
expect_status 64 "-l takes PATH only" "$ELECT" -l $P/e v
expect_status 65 "an invalid path" "$ELECT" e v
expect_status 0 "--help" "$ELECT" --help
check "...shows both forms" grep -q "zklock-elect -l \[OPTION\]... PATH" "$T/out"
check "...and that -l --json is JSON Lines" grep -q -- "-j, --json  *with -l: JSON Lines" "$T/out"
check "...as its man page does" grep -q "JSON Lines" "$TESTDIR/../docs/zklock-elect.1"
expect_status 64 "an option after PATH and VALUE, where COMMAND goes" "$ELECT" $P/e v -v true
check "...says that options go before PATH" grep -q "options go before PATH: '-v' comes after it" "$T/err"

# ---- three candidates, a listener -----------------------------------------------------------------
"$ELECT" -l --json $P/e >"$T/listen" 2>"$T/listen-err" & listener=$!
check "the listener says nobody leads" wait_for 20 grep -q '"leader":null' "$T/listen"
"$ELECT" --session-timeout 3000 $P/e alpha >"$T/alpha" & alpha=$!
check "alpha leads" wait_for 20 grep -qx leader "$T/alpha"
"$ELECT" $P/e beta >"$T/beta" & beta=$!
check "beta waits in line" wait_for 20 queued $P/e 2
"$ELECT" $P/e gamma >"$T/gamma" & gamma=$!
check "gamma waits in line, behind beta" wait_for 20 queued $P/e 3
check "...beta without leading" [ ! -s "$T/beta" ]
check "...gamma without leading" [ ! -s "$T/gamma" ]
expect_status 1 "-t 0 while someone leads: the conflict code" "$ELECT" -t 0 $P/e delta
check "the listener shows alpha" wait_for 20 grep -q '"leader":"alpha"' "$T/listen"
kill -INT $alpha; wait $alpha; st=$?
check "alpha resigns on SIGINT, exit 0" [ $st = 0 ]
check "beta leads next (arrival order)" wait_for 20 grep -qx leader "$T/beta"
check "...gamma still waits" [ ! -s "$T/gamma" ]
check "the listener shows beta" wait_for 20 grep -q '"leader":"beta"' "$T/listen"
# Deliberate fault: beta dies without resigning; gamma leads once its session expires.
kill -KILL $beta; wait $beta 2>/dev/null
check "gamma leads after beta's session expired" wait_for 30 grep -qx leader "$T/gamma"
check "the listener shows gamma" wait_for 20 grep -q '"leader":"gamma"' "$T/listen"
check "tokens grow with each leader" "$PY" -c 'import json,sys
t=[json.loads(l)["token"] for l in open(sys.argv[1]) if json.loads(l)["leader"]]
sys.exit(0 if t == sorted(t) and len(set(t)) == len(t) >= 3 else 1)' "$T/listen"
kill -TERM $gamma; wait $gamma; st=$?
check "gamma resigns on SIGTERM, exit 0" [ $st = 0 ]
check "the listener says nobody leads again" wait_for 20 last_is "$T/listen" "{\"path\":\"$P/e\",\"leader\":null,\"token\":0}"
check "...each change once: nobody, alpha, beta, gamma, nobody" \
  [ "$("$PY" -c 'import json,sys; print(" ".join(str(json.loads(l)["leader"]) for l in open(sys.argv[1])))' "$T/listen")" = "None alpha beta gamma None" ]
kill -TERM $listener; wait $listener; st=$?
check "the listener ends on SIGTERM with 0, as --help says" [ $st = 0 ]

# ---- COMMAND --------------------------------------------------------------------------------------
expect_status 7 "COMMAND runs while leading; its exit status is ours" \
  "$ELECT" $P/c addr:1 sh -c 'echo "$ZKLOCK_PATH $ZKLOCK_FENCE"; exit 7'
check "...with the path and the token in its environment" grep -Eq "^$P/c [1-9][0-9]*$" "$T/out"
"$ELECT" -l $P/c >"$T/listen-c" 2>&1 & listener=$!
check "text listener: nobody" wait_for 20 grep -qx "(no leader)" "$T/listen-c"
"$ELECT" $P/c "$(printf 'evil\033[2Jvalue')" sh -c "touch $T/c-in; sleep 30" & c=$!
check "text listener: the value, escaped" wait_for 20 grep -q 'evil\\x1b\[2Jvalue' "$T/listen-c"
kill -TERM $c; wait $c 2>/dev/null
check "text listener: nobody again" wait_for 20 last_is "$T/listen-c" "(no leader)"
kill -INT $listener; wait $listener; st=$?
check "...ends on SIGINT with 0" [ $st = 0 ]

# ---- the README's active/standby line, its leader killed: one worker at a time -------------------
# worker.sh DIR NAME: first notes (DIR/NAME.saw) every earlier worker's
# process still alive, then starts a background process, writes both pids
# to DIR/NAME.pids and works until stopped.
mkdir -p "$T/w"
cat >"$T/worker.sh" <<'EOF'
for f in "$1"/*.pids; do
  [ -e "$f" ] || continue
  for p in $(cat "$f"); do
    st=$(ps -o stat= -p "$p" 2>/dev/null) && [ "${st#Z}" = "$st" ] && echo "$f $p" >>"$1/$2.saw"
  done
done
sleep 300 & echo "$$ $!" >"$1/$2.pids"
wait
EOF
standby() { # NAME: the README's line (exec: $! is zklock-elect's pid)
  exec "$ELECT" --session-timeout 4000 $P/w "10.0.0.$1:8080" sh "$T/worker.sh" "$T/w" "$1" 2>"$T/w/$1.err"
}
standby 1 & w1=$!
check "active/standby: the first host's worker runs" wait_for 20 started "$T/w/1.pids"
standby 2 & w2=$!
check "...the second host stands by" wait_for 20 queued $P/w 2
kill -KILL $w1; wait $w1 2>/dev/null
check "kill -9 of the leading zklock-elect: the standby's worker runs" wait_for 30 started "$T/w/2.pids"
check "...and found nothing of the old worker alive, nor of what it started" [ ! -e "$T/w/2.saw" ]
check "...which the dead leader's watchdog had stopped" \
  grep -q "^zklock-elect: zklock-elect (pid $w1) ended while sh ran: SIGTERM to its process group" "$T/w/1.err"
standby 3 & w3=$!
check "a third host stands by" wait_for 20 queued $P/w 2
kill -KILL $w2; wait $w2 2>/dev/null
check "kill -9 of the next leader: the third host's worker runs" wait_for 30 started "$T/w/3.pids"
check "...alone" [ ! -e "$T/w/3.saw" ]
kill -TERM $w3; wait $w3
check "no node left under $P/w" wait_for 10 queued $P/w 0

# ---- --max-hold: the leader steps down ------------------------------------------------------------
"$ELECT" --max-hold 2 $P/emh first sleep 30 2>"$T/emh-err" & first=$!
check "a leader with --max-hold 2" wait_for 20 queued $P/emh 1
"$ELECT" $P/emh waiter >"$T/emh-waiter" & waiter_pid=$!
wait $first; st=$?
check "--max-hold 2: the leader steps down, exit 124 (exit $st)" [ $st = 124 ]
check "...and the next participant leads" wait_for 20 grep -qx leader "$T/emh-waiter"
kill -INT $waiter_pid; wait $waiter_pid
check "no node left under $P/emh" wait_for 10 queued $P/emh 0

# ---- kazoo's Election ----------------------------------------------------------------------------
"$ELECT" --kazoo $P/k kz >"$T/kz" & kz=$!
check "--kazoo leads" wait_for 20 grep -qx leader "$T/kz"
check "...with kazoo's node names" [ "$(json_field $P/k 'q["nodes"][0]["kind"] + " " + q["nodes"][0]["identity"]')" = "kazoo-lock kz" ]
kill -INT $kz; wait $kz

# ---- --revocable: a request resigns the leader (issue 25, item 3) ----------------------------------
"$ELECT" --revocable $P/rv first sh -c 'echo up >'"$T/rv.up"'; trap "echo down >'"$T/rv.down"'; exit 0" TERM; while :; do sleep 0.05; done' & rv=$!
check "a revocable leader runs its command" wait_for 20 started "$T/rv.up"
"$ELECT" $P/rv second >"$T/rv.second" & second=$!
check "a second participant waits" wait_for 20 queued $P/rv 2
"$ZKLS" --revoke $P/rv >"$T/rv.asked"; st=$?
check "zklock-ls --revoke asks (exit $st)" [ "$st" = 0 ]
check "...one node" [ "$(wc -l <"$T/rv.asked")" = 1 ]
check "...the leader's, named by its value" grep -q " first\$" "$T/rv.asked"
wait $rv; st=$?
check "the asked leader resigned: exit 79 (got $st)" [ "$st" = 79 ]
check "...having stopped its command (SIGTERM)" [ -s "$T/rv.down" ]
check "the next participant leads at once" wait_for 20 grep -qx leader "$T/rv.second"
kill -INT $second; wait $second

for p in e c k rv; do check "no node left under $P/$p" wait_for 10 queued $P/$p 0; done
done_testing
