#!/bin/bash
# interop-curator.sh: zklock and Apache Curator (Debian's 5.4 jars) on the
# same lock paths: they exclude each other, are served in arrival order, and
# each sees the other's holders. A detector log (enter/leave with wall-clock
# ns, from every language) would show any overlap.
set -u
J=/usr/share/java
CP=$J/curator-recipes.jar:$J/curator-framework.jar:$J/curator-client.jar:$J/zookeeper.jar:$J/zookeeper-jute.jar:$J/guava.jar:$J/slf4j-api.jar
[ -f $J/slf4j-nop.jar ] && CP=$CP:$J/slf4j-nop.jar
if ! command -v javac >/dev/null || ! command -v java >/dev/null || [ ! -f $J/curator-recipes.jar ]; then
  echo "SKIP: needs javac and Curator (apt-get install default-jdk-headless libcurator-recipes-java)"
  exit 77
fi
source "${srcdir:-$(dirname "$0")/..}/test/testlib.sh"
mkdir -p "$T/classes"
javac -nowarn -cp "$CP" -d "$T/classes" "$TESTDIR/interop/CuratorPeer.java" ||
  { echo "Bail out! CuratorPeer.java does not compile"; exit 99; }
curator() { java -cp "$CP:$T/classes" CuratorPeer "$ZKLOCK_TEST_HOSTS" "$@"; }
checklog() { "$PY" "$TESTDIR/interop/check_log.py" "$@"; }
P=/zklock-test/curator-$$

# ---- mutex: exclusion both ways ---------------------------------------------------------------
L=$T/mutex.log
curator $P/m mutex 12 "$L" c1 15 & a=$!
curator $P/m mutex 12 "$L" c2 15 & b=$!
( for i in $(seq 12); do zk_section "$L" z1 mutex 0.015 $P/m; done ) & c=$!
( for i in $(seq 12); do zk_section "$L" z2 mutex 0.015 $P/m; done ) & d=$!
wait $a $b $c $d
check "zklock -x and Curator's InterProcessMutex exclude each other" \
  checklog "$L" --count c1=12 --count c2=12 --count z1=12 --count z2=12

# ---- mutex: arrival order across languages; zklock-ls shows Curator's node -----------------------
L=$T/order.log
zk_hold_until "$L" H mutex "$T/go-h" $P/o & h=$!
check "zklock holds" wait_for 20 entered "$L" H
curator $P/o mutex 1 "$L" C 0 & c=$!
check "Curator queued second" wait_for 30 queued $P/o 2
zk_section "$L" W mutex 0 $P/o & w=$!
check "zklock queued third" wait_for 20 queued $P/o 3
check "zklock-ls shows Curator's node as a waiting mutex with its data (an address)" \
  [ "$(json_field $P/o 'q["nodes"][1]["state"] + " " + q["nodes"][1]["kind"] + " " + str(bool(__import__("re").match(r"^[0-9a-fA-F.:]+$", q["nodes"][1]["identity"])))')" = "waits mutex True" ]
check "zklock-ls reads Curator's name" \
  [ "$(json_field $P/o 'bool(__import__("re").match(r"^_c_[0-9a-f-]{36}-lock-[0-9]{10}$", q["nodes"][1]["name"]))')" = True ]
touch "$T/go-h"
wait $h $c $w
check "served in arrival order: zklock, Curator, zklock" checklog "$L" --order H,C,W

# ---- read/write lock ------------------------------------------------------------------------------
L=$T/rw.log
curator $P/rw read 1 "$L" CR 0 "$T/go-cr" & cr=$!
check "Curator reader holds" wait_for 30 entered "$L" CR
zk_section "$L" ZR read 0.2 -r $P/rw
check "a zklock reader got in while the Curator reader held" entered "$L" ZR
expect_status 1 "a zklock writer cannot get in while a Curator reader holds" "$ZKLOCK" -w -t 0 $P/rw true
touch "$T/go-cr"; wait $cr
check "readers shared across languages, and nothing overlapped" checklog "$L" --expect-shared 2

L=$T/rw2.log
zk_hold_until "$L" ZR2 read "$T/go-zr" -r $P/rw2 & zr=$!
check "zklock reader holds" wait_for 20 entered "$L" ZR2
curator $P/rw2 write 1 "$L" CW 0 & cw=$!
check "Curator writer queued behind it" wait_for 30 queued $P/rw2 2
check "json: the queue is a holding reader and a waiting Curator writer" \
  [ "$(json_field $P/rw2 '[(n["state"], n["kind"]) for n in q["nodes"]]')" = "[('holds', 'read'), ('waits', 'write')]" ]
touch "$T/go-zr"; wait $zr $cw
check "the Curator writer waited for the zklock reader" checklog "$L" --order ZR2,CW

L=$T/rw3.log
curator $P/rw3 read 10 "$L" cr1 10 & a=$!
curator $P/rw3 write 10 "$L" cw1 10 & b=$!
( for i in $(seq 10); do zk_section "$L" zr1 read 0.01 -r $P/rw3; done ) & c=$!
( for i in $(seq 10); do zk_section "$L" zw1 write 0.01 -w $P/rw3; done ) & d=$!
wait $a $b $c $d
check "mixed readers and writers of both languages never overlap wrongly" \
  checklog "$L" --count cr1=10 --count cw1=10 --count zr1=10 --count zw1=10

# ---- semaphore: Curator's InterProcessSemaphoreV2 and zklock -n share the leases ---------------------
L=$T/sem.log
curator $P/sem sem2 1 "$L" CS 0 "$T/go-cs" & cs=$!
check "a Curator lease is taken" wait_for 30 entered "$L" CS
zk_hold_until "$L" ZS sem2 "$T/go-zs" -n 2 $P/sem & zs=$!
check "zklock takes the second lease" wait_for 20 entered "$L" ZS
expect_status 1 "a third (zklock -n 2 -t 0) finds both taken" "$ZKLOCK" -n 2 -t 0 $P/sem true
curator $P/sem sem2 1 "$L" CW 0 & cw=$!
check "a Curator contender waits in line" wait_for 30 queued $P/sem 4
check "zklock-ls: both leases taken (one Curator's, by its address), Curator's contender in line" \
  [ "$(json_field $P/sem '(q["semaphore"], sorted(n["state"] + " " + n["kind"] for n in q["nodes"]), sum(bool(__import__("re").match(r"^[0-9a-fA-F.:]+$", n["identity"])) for n in q["nodes"] if n["state"] == "holds"))')" = \
    "(True, ['holds lease', 'holds lease', 'waits lease', 'waits mutex'], 1)" ]
check "Curator's lease names" \
  [ "$(json_field $P/sem 'all(__import__("re").match(r"^_c_[0-9a-f-]{36}-lease-[0-9]{10}$", n["name"]) for n in q["nodes"] if n["kind"] == "lease")')" = True ]
touch "$T/go-zs"; wait $zs
check "the Curator contender gets zklock's lease" wait_for 30 entered "$L" CW
touch "$T/go-cs"; wait $cs $cw
L=$T/sem3.log
curator $P/sem3 sem3 15 "$L" c1 10 & a=$!
curator $P/sem3 sem3 15 "$L" c2 10 & b=$!
( for i in $(seq 15); do zk_section "$L" z1 sem3 0.01 -n 3 $P/sem3; done ) & c=$!
( for i in $(seq 15); do zk_section "$L" z2 sem3 0.01 -n 3 $P/sem3; done ) & d=$!
wait $a $b $c $d
check "four clients of both languages never hold more than 3 leases at once" \
  checklog "$L" --expect-shared 2 --count c1=15 --count c2=15 --count z1=15 --count z2=15

# ---- a multi-lock's nodes are ordinary nodes of each lock -------------------------------------------
L=$T/multi.log
curator $P/ma mutex 1 "$L" CM 0 "$T/go-cm" & cm=$!
check "Curator holds A" wait_for 30 entered "$L" CM
zk_section "$L" ZM mutex 0 --and $P/mb $P/ma & zm=$!
check "zklock --and B A queues on A behind Curator" wait_for 20 queued $P/ma 2
check "...with its node on B" queued $P/mb 1
curator $P/mb mutex 1 "$L" CB 0 & cb=$!
check "a Curator client on B queues behind zklock's node" wait_for 30 queued $P/mb 2
touch "$T/go-cm"; wait $cm $zm $cb
check "served in order: Curator on A, zklock on both, Curator on B" checklog "$L" --order CM,ZM,CB

# ---- --track-previous (issue 25): behind a Curator holder the fate is unknown; Curator ignores the record
L=$T/prev.log
prev_of() { sed -n 's/^ZKLOCK_PREVIOUS=//p' "$1"; }
"$ZKLOCK" --track-previous $P/p sh -c 'env >"$0"' "$T/prev-a"
check "zklock --track-previous: the first holder is told none" [ "$(prev_of "$T/prev-a")" = none ]
curator $P/p mutex 1 "$L" CP 0 "$T/go-cp" & cp=$!
check "a Curator mutex holds beside the record (it is no contender to Curator)" wait_for 30 entered "$L" CP
"$ZKLOCK" --track-previous $P/p sh -c 'env >"$0"' "$T/prev-b" & zp=$!
check "zklock --track-previous queues behind the Curator holder" wait_for 20 queued $P/p 2
touch "$T/go-cp"; wait $cp $zp
check "...and is told unknown: Curator wrote no record" [ "$(prev_of "$T/prev-b")" = unknown ]
"$ZKLOCK" --track-previous $P/p sh -c 'env >"$0"' "$T/prev-c"
check "the next zklock, right behind a tracking one, is told clean" [ "$(prev_of "$T/prev-c")" = clean ]
curator $P/p mutex 3 "$L" CQ 0 & cq=$!
( for i in 1 2 3; do zk_section "$L" ZQ mutex 0.01 --track-previous $P/p; done ) & zq=$!
wait $cq $zq
check "Curator and tracking zklock holders exclude each other with the record there" \
  checklog "$L" --count CP=1 --count CQ=3 --count ZQ=3
if /usr/bin/python3 -c 'import kazoo' 2>/dev/null; then
  /usr/bin/python3 -c 'import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=20)
zk.delete(sys.argv[2] + "/zklock.previous"); zk.stop()' "$ZKLOCK_TEST_HOSTS" $P/p
fi

# ---- election: Curator's LeaderLatch and zklock-elect elect one leader between them -----------------
ELECT=$B/tools/zklock-elect
elect_term() { # LOG ID HOLD_S [zklock-elect options...] PATH: one term as leader, logged
  local log=$1 id=$2 hold=$3; shift 3
  "$ELECT" "$@" "$id" sh -c "echo \"\$(date +%s%N) enter $id latch\" >>$log; sleep $hold; echo \"\$(date +%s%N) leave $id latch\" >>$log"
}
L=$T/latch.log
curator $P/el latch 6 "$L" c1 20 & a=$!
curator $P/el latch 6 "$L" c2 20 & b=$!
( for i in $(seq 6); do elect_term "$L" z1 0.02 $P/el; done ) & c=$!
( for i in $(seq 6); do elect_term "$L" z2 0.02 $P/el; done ) & d=$!
wait $a $b $c $d
check "Curator's LeaderLatch and zklock-elect: one leader at a time" \
  checklog "$L" --count c1=6 --count c2=6 --count z1=6 --count z2=6
L=$T/latch2.log
curator $P/el2 latch 1 "$L" CL 0 "$T/go-cl" & cl=$!
check "a Curator LeaderLatch leads" wait_for 30 entered "$L" CL
"$ELECT" -l $P/el2 >"$T/listen-cl" & li=$!
check "zklock-elect -l reports Curator's leader (its id)" wait_for 20 grep -qx CL "$T/listen-cl"
kill $li; wait $li 2>/dev/null
"$ELECT" $P/el2 zklock-leader >"$T/zl" & zl=$!
check "zklock-elect waits behind it" wait_for 20 queued $P/el2 2
touch "$T/go-cl"; wait $cl
check "zklock-elect leads once Curator's latch closes" wait_for 20 grep -qx leader "$T/zl"
check "Curator's LeaderLatch.getLeader() reports zklock's leader (its value)" \
  [ "$(curator $P/el2 who 0 /dev/null - 0)" = zklock-leader ]
kill -INT $zl; wait $zl
# LeaderSelector is an InterProcessMutex: a zklock mutex on its path takes part.
L=$T/selector.log
curator $P/sel selector 6 "$L" s1 20 & a=$!
( for i in $(seq 6); do zk_section "$L" z1 mutex 0.02 $P/sel; done ) & c=$!
wait $a $c
check "Curator's LeaderSelector and a zklock mutex on its path: one at a time" \
  checklog "$L" --count s1=6 --count z1=6

# ---- revocation, Curator's convention (issue 25, item 3) -----------------------------------------
# A Curator Revoker.attemptRevoke ends a `zklock --revocable` command: its group gets
# SIGTERM, the lock is released, zklock exits 79 (zklock(1)).
L=$T/revoke.log
"$ZKLOCK" --revocable $P/rv sh -c "echo \"\$(date +%s%N) enter ZV mutex\" >>$L; trap 'echo \"\$(date +%s%N) leave ZV mutex\" >>$L; exit 0' TERM; while :; do sleep 0.05; done" &
zv=$!
check "zklock --revocable holds" wait_for 20 entered "$L" ZV
node=$(json_field $P/rv 'q["nodes"][0]["name"]')
check "Curator's Revoker.attemptRevoke asks the zklock holder" curator "$P/rv/$node" revoke 0 "$L" R 0
wait $zv; st=$?
check "the revoked zklock command was stopped, and zklock exits 79 (got $st)" [ "$st" = 79 ]
check "its command saw SIGTERM" grep -q " leave ZV " "$L"
check "the lock is free after" wait_for 10 queued $P/rv 0
# zklock-ls --revoke makes a Curator InterProcessMutex that called makeRevocable let go.
L=$T/revoke2.log
curator $P/rv2 revocable 1 "$L" CV 0 & cv=$!
check "a revocable Curator holder holds" wait_for 30 entered "$L" CV
"$ZKLS" --revoke $P/rv2 >"$T/asked" 2>&1; st=$?
check "zklock-ls --revoke exits 0 having asked one holder (got $st)" [ "$st" = 0 ]
# (Curator makes a revocable lock's node with no data, so its identity is "-")
check "zklock-ls --revoke says whom it asked: Curator's node, and its empty data" \
  grep -Eq "^asked $P/rv2/_c_[0-9a-f-]{36}-lock-[0-9]{10} -\$" "$T/asked"
wait $cv; st=$?
check "the Curator holder was told (its listener) and released (exit $st)" [ "$st" = 0 ]
check "its log says it let go on the request" grep -q " leave CV revocable revoked" "$L"
check "the lock is free after" wait_for 10 queued $P/rv2 0
expect_status 1 "zklock-ls --revoke on a free lock asks nobody" "$ZKLS" --revoke $P/rv2
check "... and says so" grep -q "^nobody holds $P/rv2\$" "$T/out"

# ---- past the end of the sequence counter -----------------------------------------------------------
# Curator sorts the numbers' text: on a server of the test's own whose /wrap paths
# count from -2^31, as a wrapping server leaves them (testlib.sh, past_the_end).
if WH=$(private_zk "/wrap/p=-2147483648 /wrap/z=-2147483648"); then
  cur() { java -cp "$CP:$T/classes" CuratorPeer "$WH" "$@"; }
  past_the_end cur "Curator InterProcessMutex" mutex
  stop_private_zk
else
  fail "a server seeded near the counter's end started"
fi

for p in m o rw rw2 rw3 sem sem3 ma mb el el2 sel rv rv2; do check "no node left under $P/$p" wait_for 10 queued $P/$p 0; done
done_testing
