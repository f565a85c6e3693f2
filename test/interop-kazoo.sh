#!/bin/bash
# interop-kazoo.sh: zklock with --kazoo names and python kazoo (Debian's
# 2.8) on the same lock paths: they exclude each other, are served in
# arrival order, and readers share.
set -u
if ! /usr/bin/python3 -c 'import kazoo' 2>/dev/null; then
  echo "SKIP: needs kazoo for /usr/bin/python3 (apt-get install python3-kazoo)"
  exit 77
fi
source "${srcdir:-$(dirname "$0")/..}/test/testlib.sh"
kazoo() { /usr/bin/python3 "$TESTDIR/interop/kazoo_peer.py" "$ZKLOCK_TEST_HOSTS" "$@"; }
checklog() { "$PY" "$TESTDIR/interop/check_log.py" "$@"; }
P=/zklock-test/kazoo-$$

# ---- Lock: exclusion both ways ---------------------------------------------------------------------
L=$T/lock.log
kazoo $P/m lock 12 "$L" k1 15 & a=$!
kazoo $P/m lock 12 "$L" k2 15 & b=$!
( for i in $(seq 12); do zk_section "$L" z1 lock 0.015 --kazoo $P/m; done ) & c=$!
( for i in $(seq 12); do zk_section "$L" z2 lock 0.015 --kazoo $P/m; done ) & d=$!
wait $a $b $c $d
check "zklock --kazoo and kazoo's Lock exclude each other" \
  checklog "$L" --count k1=12 --count k2=12 --count z1=12 --count z2=12

# ---- arrival order; zklock-ls shows kazoo's nodes ----------------------------------------------------
L=$T/order.log
zk_hold_until "$L" H lock "$T/go-h" --kazoo $P/o & h=$!
check "zklock holds" wait_for 20 entered "$L" H
kazoo $P/o lock 1 "$L" K 0 & k=$!
check "kazoo queued second" wait_for 30 queued $P/o 2
zk_section "$L" W lock 0 --kazoo $P/o & w=$!
check "zklock queued third" wait_for 20 queued $P/o 3
check "zklock-ls shows the kazoo node with its identifier" \
  [ "$(json_field $P/o 'q["nodes"][1]["kind"] + " " + q["nodes"][1]["identity"]')" = "kazoo-lock K" ]
check "zklock --kazoo writes kazoo's names" \
  [ "$(json_field $P/o 'all(__import__("re").match(r"^[0-9a-f]{32}__lock__[0-9]{10}$", n["name"]) for n in q["nodes"])')" = True ]
touch "$T/go-h"
wait $h $k $w
check "served in arrival order: zklock, kazoo, zklock" checklog "$L" --order H,K,W

# ---- readers share; writers exclude them ---------------------------------------------------------------
L=$T/rw.log
kazoo $P/rw read 1 "$L" KR 0 "$T/go-kr" & kr=$!
check "kazoo ReadLock holds" wait_for 30 entered "$L" KR
zk_section "$L" ZR read 0.2 -r --kazoo $P/rw
check "a zklock reader got in beside the kazoo reader" entered "$L" ZR
check "zklock's reader node is named __rlock__" \
  [ "$(json_field $P/rw '[n["kind"] for n in q["nodes"]]')" = "['kazoo-read']" ]
expect_status 1 "a zklock writer cannot get in while a kazoo reader holds" "$ZKLOCK" -w --kazoo -t 0 $P/rw true
touch "$T/go-kr"; wait $kr
check "readers shared across languages" checklog "$L" --expect-shared 2

L=$T/rw2.log
zk_hold_until "$L" ZR2 read "$T/go-zr" -r --kazoo $P/rw2 & zr=$!
check "zklock reader holds" wait_for 20 entered "$L" ZR2
check "kazoo's WriteLock is refused while a zklock reader holds" [ "$(kazoo $P/rw2 write 0 "$L" kw 0)" = busy ]
check "kazoo's ReadLock shares with it" [ "$(kazoo $P/rw2 read 0 "$L" kr 0)" = free ]
touch "$T/go-zr"; wait $zr

L=$T/rw3.log
zk_hold_until "$L" ZW write "$T/go-zw" -w --kazoo $P/rw3 & zw=$!
check "zklock writer holds" wait_for 20 entered "$L" ZW
check "kazoo's ReadLock is refused while a zklock writer holds" [ "$(kazoo $P/rw3 read 0 "$L" kr 0)" = busy ]
touch "$T/go-zw"; wait $zw

L=$T/rw4.log
kazoo $P/rw4 write 10 "$L" kw1 10 & a=$!
( for i in $(seq 10); do zk_section "$L" zr1 read 0.01 -r --kazoo $P/rw4; done ) & b=$!
( for i in $(seq 10); do zk_section "$L" zw1 write 0.01 -w --kazoo $P/rw4; done ) & c=$!
wait $a $b $c
check "kazoo's WriteLock and zklock readers and writers never overlap wrongly" \
  checklog "$L" --count kw1=10 --count zr1=10 --count zw1=10

# ---- Semaphore: kazoo's Semaphore and zklock --kazoo -n share the leases --------------------------------
L=$T/sem.log
kazoo $P/sem sem2 1 "$L" KS 0 "$T/go-ks" & ks=$!
check "a kazoo lease is taken" wait_for 30 entered "$L" KS
zk_hold_until "$L" ZS sem2 "$T/go-zs" --kazoo -n 2 $P/sem & zs=$!
check "zklock takes the second lease" wait_for 20 entered "$L" ZS
check "kazoo's max_leases is in the path's data" [ "$(/usr/bin/python3 -c '
import sys; from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(); print(zk.get(sys.argv[2])[0].decode()); zk.stop()' "$ZKLOCK_TEST_HOSTS" $P/sem)" = 2 ]
check "kazoo sees both leases taken" [ "$(kazoo $P/sem sem2 0 "$L" KT 0)" = busy ]
expect_status 1 "zklock --kazoo -n 2 -t 0 finds both taken" "$ZKLOCK" --kazoo -n 2 -t 0 $P/sem true
expect_status 64 "zklock --kazoo with another limit is refused, as kazoo refuses it" "$ZKLOCK" --kazoo -n 3 -t 0 $P/sem true
check "zklock-ls: a kazoo semaphore, both leases held, one with kazoo's identifier" \
  [ "$(json_field $P/sem '(q["semaphore"], [(n["state"], n["kind"]) for n in q["nodes"]], "KS" in [n["identity"] for n in q["nodes"]])')" = \
    "(True, [('holds', 'kazoo-lease'), ('holds', 'kazoo-lease')], True)" ]
touch "$T/go-zs" "$T/go-ks"; wait $zs $ks
L=$T/sem3.log
kazoo $P/sem3 sem3 12 "$L" k1 10 & a=$!
kazoo $P/sem3 sem3 12 "$L" k2 10 & b=$!
( for i in $(seq 12); do zk_section "$L" z1 sem3 0.01 --kazoo -n 3 $P/sem3; done ) & c=$!
( for i in $(seq 12); do zk_section "$L" z2 sem3 0.01 --kazoo -n 3 $P/sem3; done ) & d=$!
wait $a $b $c $d
check "four clients of both languages never hold more than 3 leases at once" \
  checklog "$L" --expect-shared 2 --count k1=12 --count k2=12 --count z1=12 --count z2=12

# ---- Election: kazoo's Election and zklock-elect --kazoo elect one leader between them -----------------
ELECT=$B/tools/zklock-elect
L=$T/elect.log
kazoo $P/el elect 6 "$L" k1 20 & a=$!
kazoo $P/el elect 6 "$L" k2 20 & b=$!
( for i in $(seq 6); do "$ELECT" --kazoo $P/el z1 sh -c "echo \"\$(date +%s%N) enter z1 lock\" >>$L; sleep 0.02; echo \"\$(date +%s%N) leave z1 lock\" >>$L"; done ) & c=$!
wait $a $b $c
check "kazoo's Election and zklock-elect --kazoo: one leader at a time" \
  checklog "$L" --count k1=6 --count k2=6 --count z1=6
"$ELECT" --kazoo $P/el2 zklock-leader >"$T/zl" & zl=$!
check "zklock-elect --kazoo leads" wait_for 20 grep -qx leader "$T/zl"
check "kazoo's Election.contenders() reports zklock's leader first" \
  [ "$(kazoo $P/el2 who 0 /dev/null - 0)" = zklock-leader ]
L=$T/elect2.log
kazoo $P/el2 elect 1 "$L" KE 0 "$T/go-ke" & ke=$!
check "a kazoo Election waits behind zklock" wait_for 30 queued $P/el2 2
kill -INT $zl; wait $zl
check "kazoo leads once zklock resigns" wait_for 30 entered "$L" KE
"$ELECT" -l $P/el2 >"$T/listen-ke" & li=$!
check "zklock-elect -l reports kazoo's leader (its identifier)" wait_for 20 grep -qx KE "$T/listen-ke"
kill $li; wait $li 2>/dev/null
touch "$T/go-ke"; wait $ke

# ---- kazoo's paths are persistent: a kazoo object used again after they stood empty ------------------
# kazoo's ensure_path makes them persistent, and a kazoo Lock or Semaphore that
# once saw its path never looks for it again: a container zklock made, reaped
# by the server once it stood empty, gave it NoNodeError (design.md, interop.md).
LS=$T/reap-sem.log LL=$T/reap-lock.log
zk_hold_until "$LS" ZS sem2 "$T/go-zs2" --kazoo -n 2 $P/reap/sem & zs=$!
zk_hold_until "$LL" ZL lock "$T/go-zl" --kazoo $P/reap/m & zl=$!
check "zklock made the paths and holds" wait_for 20 sh -c "grep -qs ' enter ZS ' $LS && grep -qs ' enter ZL ' $LL"
KAZOO_PEER_BETWEEN=$T/go-again kazoo $P/reap/sem sem2 2 "$LS" KS 0 & ks=$!
KAZOO_PEER_BETWEEN=$T/go-again kazoo $P/reap/m lock 2 "$LL" KL 0 & kl=$!
check "a kazoo Semaphore took a lease beside zklock's" wait_for 30 grep -q " between KS " "$LS"
check "a kazoo Lock queued behind zklock" wait_for 30 queued $P/reap/m 2
touch "$T/go-zs2" "$T/go-zl"; wait $zs $zl
check "...and had its turn" wait_for 30 grep -q " between KL " "$LL"
check "the semaphore stands empty" wait_for 10 queued $P/reap/sem 0
check "the lock stands empty" wait_for 10 queued $P/reap/m 0
check "the server's container reaper ran since" reaper_passed $P/reap
check "...and left kazoo's paths" [ "$(json_field $P/reap/sem 'q["exists"]') $(json_field $P/reap/m 'q["exists"]')" = "True True" ]
touch "$T/go-again"
wait $ks; ks_status=$?
wait $kl; kl_status=$?
check "the kazoo Semaphore took a lease again (no NoNodeError)" [ $ks_status = 0 ]
check "the kazoo Lock took the lock again (no NoNodeError)" [ $kl_status = 0 ]
check "...twice, within the limit" checklog "$LS" --count KS=2 --count ZS=1
check "...twice, one at a time" checklog "$LL" --count KL=2 --count ZL=1

# ---- past the end of the sequence counter -----------------------------------------------------------
# kazoo sorts the numbers' text: on a server of the test's own whose /wrap paths
# count from -2^31, as a wrapping server leaves them (testlib.sh, past_the_end).
if ! command -v javac >/dev/null; then
  skip "past the counter's end: a seeded server needs javac"
elif WH=$(private_zk "/wrap/p=-2147483648 /wrap/z=-2147483648"); then
  kz() { /usr/bin/python3 "$TESTDIR/interop/kazoo_peer.py" "$WH" "$@"; }
  past_the_end kz "kazoo Lock" lock --kazoo
  stop_private_zk
else
  fail "a server seeded near the counter's end started"
fi

for p in m o rw rw2 rw3 rw4 sem sem3 el el2 reap/sem reap/m; do check "no lock node left under $P/$p" wait_for 10 queued $P/$p 0; done
done_testing
