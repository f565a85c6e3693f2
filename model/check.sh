#!/bin/sh
# model/check.sh: checks the Promela model of zklock's queue engine with spin.
#
#   model/check.sh            the small bounds (make check, well under a minute)
#   model/check.sh --large    the larger bounds (make check-model)
#   model/check.sh --trace NAME   a short counterexample of a broken variant, step by step
#   model/check.sh --list     the configurations
#   model/check.sh NAME...    only those configurations (of the small or --large set)
#
# Environment: MODEL_JOBS (configurations checked at once, default 1),
# PAN_CC (the compiler of spin's verifier, default clang if installed, else
# $CC), PAN_CFLAGS, PAN_MEMLIM (megabytes per verifier, default 1024 for the
# small bounds, 4096 for the large ones: a run that needs more fails).
#
# Every configuration of the correct model must pass (all of P1-P5, no
# invalid end state); every deliberately broken variant (-DBROKEN_...) must
# fail on the property it names, so the test also shows that the model can
# catch the bug. The correct runs together must reach every feature the
# model marks with REACHED(n) (a fast-path hold, a handoff without a listing,
# a heir, an adoption after a lost reply, ...), or a property could hold only
# because its case never happens. Exit 77 (skip) only if spin is missing.
# docs/design.md, "A model of the protocol", explains the model and the figures.
set -u

here=$(cd "$(dirname "$0")" && pwd)
model=$here/zklock.pml
CC=${CC:-cc}
# pan.c is hundreds of kB of generated C: clang compiles it unoptimised in
# about half gcc's time, which is most of the small bounds' time.
if [ -z "${PAN_CC:-}" ]; then
    PAN_CC=$CC
    command -v clang >/dev/null 2>&1 && PAN_CC=clang
fi

command -v spin >/dev/null 2>&1 || { echo "SKIP: spin is not installed (Debian: apt-get install spin)"; exit 77; }
command -v "${PAN_CC%% *}" >/dev/null 2>&1 || { echo "ERROR: no C compiler ($PAN_CC) for spin's verifier"; exit 1; }

# name | expected | spin -D flags. Expected: pass (safety: P1-P5 and no
# invalid end state), ltl (that and `ltl progress` under weak fairness:
# no cycle that never finishes either), or the property that must fail
# (or properties, a|b: a variant that breaks both fails on the first found).

# The broken variants, the same in both sets (but b-requeue, in each, and
# b-record and b-never, in the large set only).
broken() {
    cat <<'EOF'
b-fastpath  p1_mutex     -DNK=2 -DREAPS=1 -DBROKEN_FAST_PATH
b-sole      p1_mutex     -DNK=3 -DROUNDS0=1 -DGIVEUPS=1 -DBROKEN_SOLE_BLOCKER
b-relist    p1_mutex     -DSCEN=2 -DROUNDS0=1 -DDOWNGRADES=1 -DBROKEN_HEIR_RELIST
b-heir      p1_mutex     -DSCEN=2 -DROUNDS0=1 -DDOWNGRADES=1 -DOPDELS=1 -DBROKEN_HEIR
b-owner     p1_belief    -DNK=1 -DROUNDS0=1 -DLOSSES=2 -DLEXPIRES=1 -DLIMBOS=1 -DSTICKY_PREFIX -DBROKEN_OWNER_CHECK
b-lease     p2_orphan    -DNK=2 -DROUNDS0=1 -DLOSSES=1 -DBROKEN_LEASE_CLEANUP
b-maxhold   p2_orphan    -DNK=2 -DROUNDS0=1 -DMAXHOLDS=1 -DBROKEN_LEASE_CLEANUP
b-heirlost  p2_orphan    -DSCEN=2 -DROUNDS0=1 -DDOWNGRADES=1 -DLOSSES=1 -DBROKEN_HEIR_ORPHAN
b-watch     p3_progress  -DNK=2 -DROUNDS0=1 -DBROKEN_WATCH_NONODE
b-multi     p3_progress  -DSCEN=3 -DNK=2 -DROUNDS0=1 -DOPDELS=1 -DBROKEN_MULTI_REQUEUE
b-silent    p5_definite  -DSCEN=4 -DNK=2 -DROUNDS0=2 -DTRYONCE=2 -DBROKEN_GIVEUP_SILENT
b-trust     p4_sound     -DSCEN=4 -DNK=2 -DROUNDS0=2 -DUNTRACKED=1 -DCRASHES=1 -DBROKEN_TRUST_GAPS
b-stale     p4_sound|p5_definite -DSCEN=4 -DNK=2 -DROUNDS0=1 -DROUNDS=2 -DOPDELS=1 -DBROKEN_STALE_READ
b-releases  p4_sound     -DSCEN=4 -DNK=2 -DROUNDS0=1 -DROUNDS=2 -DCRASHES=1 -DGIVEUPS=1 -DBROKEN_GIVEUP_RELEASES
EOF
}

small() {
    cat <<'EOF'
mutex       pass         -DNK=3 -DROUNDS0=1
shared      pass         -DNK=3 -DNSHARED=2 -DROUNDS0=1
fastpath    ltl          -DNK=2 -DREAPS=1 -DLOSSES=1
opdel       pass         -DNK=2 -DROUNDS0=1 -DOPDELS=1 -DGIVEUPS=1
sessions    pass         -DNK=2 -DROUNDS0=1 -DLOSSES=2 -DEXPIRES=1
givenup     pass         -DNK=2 -DROUNDS0=1 -DLOSSES=1 -DLEXPIRES=1 -DLIMBOS=1
rwlock      pass         -DSCEN=2 -DROUNDS0=1 -DDOWNGRADES=1 -DLOSSES=1 -DLEXPIRES=1
rwopdel     pass         -DSCEN=2 -DROUNDS0=1 -DDOWNGRADES=1 -DOPDELS=1
rwlost      pass         -DSCEN=2 -DROUNDS0=1 -DROUNDS=0 -DDOWNGRADES=1 -DOPDELS=1 -DLOSSES=1
sticky      pass         -DNK=1 -DROUNDS0=1 -DLOSSES=2 -DLEXPIRES=1 -DLIMBOS=1 -DSTICKY_PREFIX
multi       pass         -DSCEN=3 -DNK=2 -DROUNDS0=1 -DOPDELS=1
maxhold     pass         -DNK=2 -DROUNDS0=1 -DROUNDS=2 -DMAXHOLDS=1 -DLOSSES=1
rwmaxhold   pass         -DSCEN=2 -DROUNDS0=1 -DDOWNGRADES=1 -DMAXHOLDS=1
track       pass         -DSCEN=4 -DNK=2 -DROUNDS0=2 -DTRYONCE=2 -DDELAY=1 -DCRASHES=1 -DLOSSES=1
trackpeer   pass         -DSCEN=4 -DNK=2 -DROUNDS0=2 -DUNTRACKED=1 -DCRASHES=1 -DGIVEUPS=1
trackwait   pass         -DSCEN=4 -DNK=3 -DROUNDS0=1 -DUNTRACKED=1 -DTRYONCE=4
trackdel    pass         -DSCEN=4 -DNK=2 -DROUNDS0=1 -DTRYONCE=2 -DOPDELS=1
b-requeue   p3_progress  -DSCEN=2 -DROUNDS0=1 -DROUNDS=0 -DDOWNGRADES=1 -DOPDELS=1 -DLOSSES=1 -DBROKEN_HEIR_REQUEUE
EOF
    broken
}

large() {
    cat <<'EOF'
mutex       pass         -DNK=3 -DROUNDS0=2 -DGIVEUPS=1 -DLOSSES=1
fastpath    ltl          -DNK=2 -DROUNDS0=2 -DROUNDS=2 -DREAPS=2 -DLOSSES=2
opdel       pass         -DNK=3 -DROUNDS0=1 -DOPDELS=1 -DGIVEUPS=1
sessions    pass         -DNK=2 -DROUNDS0=2 -DLOSSES=2 -DEXPIRES=1 -DLEXPIRES=1 -DLIMBOS=1
expreap     pass         -DNK=2 -DROUNDS0=2 -DLOSSES=2 -DEXPIRES=1 -DREAPS=1
givenreap   pass         -DNK=2 -DROUNDS0=2 -DLOSSES=2 -DLEXPIRES=1 -DLIMBOS=1 -DREAPS=1
shared      pass         -DNK=3 -DNSHARED=2 -DROUNDS0=1 -DGIVEUPS=1 -DOPDELS=1
sharedloss  pass         -DNK=3 -DNSHARED=2 -DROUNDS0=1 -DGIVEUPS=1 -DLOSSES=1
rwlock      pass         -DSCEN=2 -DROUNDS0=2 -DDOWNGRADES=2 -DLOSSES=2 -DLEXPIRES=1
rwopdel     pass         -DSCEN=2 -DROUNDS0=2 -DDOWNGRADES=1 -DOPDELS=1 -DLOSSES=1
rwprogress  ltl          -DSCEN=2 -DROUNDS0=1 -DDOWNGRADES=1 -DOPDELS=1 -DLOSSES=1
rwreader    pass         -DSCEN=2 -DREADER -DROUNDS0=1 -DDOWNGRADES=1 -DOPDELS=1
sticky      pass         -DNK=2 -DROUNDS0=2 -DLOSSES=2 -DLEXPIRES=1 -DLIMBOS=1 -DSTICKY_PREFIX
owner       pass         -DNK=2 -DROUNDS0=2 -DLOSSES=2 -DLEXPIRES=1 -DLIMBOS=1 -DBROKEN_OWNER_CHECK
multi       pass         -DSCEN=3 -DNK=3 -DROUNDS0=1 -DOPDELS=1
multidel    pass         -DSCEN=3 -DNK=2 -DROUNDS0=1 -DOPDELS=2
multiloss   pass         -DSCEN=3 -DNK=2 -DROUNDS0=1 -DOPDELS=1 -DLOSSES=1 -DEXPIRES=1
multiprogress ltl        -DSCEN=3 -DNK=2 -DROUNDS0=1 -DOPDELS=1
track       pass         -DSCEN=4 -DNK=3 -DROUNDS0=2 -DTRYONCE=6 -DDELAY=1 -DCRASHES=1
trackpeer   pass         -DSCEN=4 -DNK=3 -DROUNDS0=2 -DUNTRACKED=1 -DTRYONCE=2 -DCRASHES=1
trackloss   pass         -DSCEN=4 -DNK=2 -DROUNDS0=2 -DLOSSES=1 -DEXPIRES=1 -DGIVEUPS=1
trackopdel  pass         -DSCEN=4 -DNK=2 -DROUNDS0=2 -DOPDELS=1 -DGIVEUPS=1
trackprogress ltl        -DSCEN=4 -DNK=2 -DROUNDS0=2 -DTRYONCE=2 -DDELAY=1 -DCRASHES=1 -DGIVEUPS=1
b-record    p5_definite  -DSCEN=4 -DNK=2 -DROUNDS0=2 -DTRYONCE=2 -DBROKEN_UNCOUNTED_RECORD
b-never     p5_definite  -DSCEN=4 -DNK=2 -DROUNDS0=2 -DTRYONCE=2 -DBROKEN_DROP_NEVER
b-requeue   p3_progress  -DSCEN=2 -DROUNDS0=1 -DDOWNGRADES=1 -DOPDELS=1 -DLOSSES=1 -DBROKEN_HEIR_REQUEUE
EOF
    broken
}

# The features REACHED(n) marks (the numbers are the model's).
features="1:a hold by the fast path
2:a hold on the sole blocker's deletion, without a listing
3:a downgrade heir holds
4:a node adopted after a lost reply (the owner check passed)
5:a node of a given-up session deleted by the next session
6:a create of a given-up session applied late
7:a holder believes after an operator deleted its node (the own-watch window)
8:a heir's writer check failed: queued as a reader
9:the owner check refused a node of an older session (STICKY_PREFIX only)
10:a writer found a heir ahead of it
11:the fast path refused by the zxid gap alone
12:a heir whose own node went made again as a heir (its writer holds)
13:a multi-lock whose member lost its place let go of the other's and queued both again
14:a multi-lock holds both its locks
15:a tracking verdict vouched by the count, give-ups among the numbers between
16:the record's own creation counted among the numbers between
17:the last blocker vouches for the record where the count cannot
18:a verdict unclean (the last holder died holding, or an operator took its node)
19:a verdict unknown
20:a write of the record refused for its version, read and written again
21:a try-once gives up at its turn: the lock-delay does not fit
22:a tracking contender's own node that went without a word counted as never held
23:a \"held\" whose reply was lost found written by the next read
24:a read of the record answered after its turn was over (its node went): no view for the next
25:a give-up whose \"held\" landed as it gave up puts back the record that write replaced"

set_=small
mode=check
names=
while [ $# -gt 0 ]; do
    case $1 in
    --large) set_=large ;;
    --list) mode=list ;;
    --trace) mode=trace ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) names="$names $1" ;;
    esac
    shift
done

if [ "$mode" = list ]; then
    $set_
    exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/zklock-model.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
# interrupted: stop there (a shell carries on after a trap otherwise, and
# would report every feature missing from the directory just removed)
trap 'rm -rf "$work"; exit 130' INT
trap 'rm -rf "$work"; exit 143' TERM
cp "$model" "$work/zklock.pml"

# Optimising pan.c (hundreds of kB of generated C) costs more than it saves on
# the small bounds; the large ones are worth it.
if [ "$set_" = large ]; then
    CFLAGS=${PAN_CFLAGS:--O2}
    depth=1000000
    memlim=${PAN_MEMLIM:-4096}
else
    CFLAGS=${PAN_CFLAGS:--O0}
    depth=300000
    memlim=${PAN_MEMLIM:-1024}
fi

# build NAME FLAGS...: spin and the C compiler, in $work/NAME
build() {
    n=$1
    shift
    mkdir -p "$work/$n"
    (cd "$work/$n" && cp ../zklock.pml . &&
        spin -o3 -a "$@" zklock.pml >spin.out 2>&1 &&
        $PAN_CC $CFLAGS -DCOLLAPSE -DMEMLIM="$memlim" ${EXTRA:-} -o pan pan.c >cc.out 2>&1) ||
        { cat "$work/$n/spin.out" "$work/$n/cc.out" 2>/dev/null; return 1; }
}

# steps NAME FLAGS...: the counterexample replayed: the model's own steps
steps() {
    n=$1
    shift
    (cd "$work/$n" && spin -t "$@" zklock.pml 2>&1) |
        sed -n 's/^ *//; /^@ \|^node \|both hold\|believes it holds\|is left\|waits for ever\|verdict/p'
}

# run NAME EXPECT FLAGS...: one configuration; prints its line, 0 if as expected
run() {
    n=$1 expect=$2
    shift 2
    # a broken variant: iterative deepening (-I) finds a short counterexample;
    # ltl: the never claim of `ltl progress`, acceptance cycles, weak fairness
    case $expect in
    pass) extra=-DNOCLAIM opts= ;;
    ltl) extra= opts="-a -f" ;;
    *) extra="-DNOCLAIM -DREACH" opts=-I ;;
    esac
    EXTRA=$extra build "$n" "$@" || { echo "ERROR $n: the model does not build"; return 1; }
    start=$(date +%s.%N)
    (cd "$work/$n" && ./pan -m$depth $opts >pan.out 2>&1)
    secs=$(echo "$start $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
    out=$work/$n/pan.out
    stored=$(awk '/states, stored/ {print $1; exit}' "$out")
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out")
    violated=$(sed -n 's/.*assertion violated \([a-z0-9_]*\).*/\1/p' "$out" | head -n 1)
    grep -q "^pan:[0-9]*: acceptance cycle" "$out" && violated=${violated:-progress_cycle}
    if grep -q "^pan:[0-9]*: invalid end state" "$out" && [ -z "$violated" ]; then
        violated=invalid_end_state
    fi
    if grep -q "max search depth too small" "$out"; then
        echo "ERROR $n: search depth $depth too small"
        return 1
    fi
    if grep -q "out of memory\|MEMLIM bound" "$out"; then
        echo "ERROR $n: out of memory (PAN_MEMLIM=$memlim MB)"
        return 1
    fi
    if [ -z "$stored" ]; then
        echo "ERROR $n: the verifier did not finish (killed?)"
        tail -n 5 "$out"
        return 1
    fi
    if [ "$expect" = pass ] || [ "$expect" = ltl ]; then
        if [ "$errors" = 0 ]; then
            what=$stored
            [ "$expect" = ltl ] && what="$stored states, progress under weak fairness,"
            [ "$expect" = pass ] && what="$stored states,"
            echo "PASS $n: $what ${secs}s  ($*)"
            # which features this run reached: pan lists what it did not
            (cd "$work/$n" && ./pan -d 2>/dev/null) | grep -o '"*wit = [0-9]*' | sed 's/"//' |
                sort | uniq -c >"$work/$n/wit.all"
            grep -o '"wit = [0-9]*"' "$out" | tr -d '"' | sort | uniq -c >"$work/$n/wit.unreached"
            return 0
        fi
        echo "FAIL $n: expected to pass, found ${violated:-errors=$errors}  ($*)"
        steps "$n" "$@" | tail -n 40
        return 1
    fi
    # (EXPECT may name several, p4_sound|p5_definite: the first found counts)
    if [ -n "$violated" ] && case "|$expect|" in *"|$violated|"*) true ;; *) false ;; esac; then
        len=$(steps "$n" "$@" | grep -c '^@ ')
        echo "CAUGHT $n: $violated violated, counterexample of $len steps, ${secs}s  ($*)"
        return 0
    fi
    echo "FAIL $n: the broken variant should violate $expect, found ${violated:-nothing}  ($*)"
    return 1
}

configs=$($set_)
if [ -n "$names" ]; then
    configs=$(echo "$configs" | awk -v names="$names" 'BEGIN {n = split(names, a, " "); for (i = 1; i <= n; i++) want[a[i]] = 1} want[$1]')
    [ -n "$configs" ] || { echo "no such configuration:$names" >&2; exit 2; }
fi

if [ "$mode" = trace ]; then
    echo "$configs" | while read -r n expect flags; do
        # shellcheck disable=SC2086
        EXTRA="-DNOCLAIM -DREACH" build "$n" $flags || exit 1
        (cd "$work/$n" && ./pan -m$depth -i >pan.out 2>&1)
        # (-i shortens: the trail kept is the last counterexample found)
        echo "== $n ($flags): $(grep -o 'assertion violated [a-z0-9_]*' "$work/$n/pan.out" | tail -n 1)"
        # shellcheck disable=SC2086
        steps "$n" $flags
    done
    exit 0
fi

echo "spin: $(spin -V 2>&1 | head -n 1); $set_ bounds"
fails=0
start=$(date +%s)
# one at a time unless asked: make check runs other suites beside this one
jobs=${MODEL_JOBS:-1}
# the lines of the runs finished so far, in order (shown as they finish:
# the large set takes a while)
shown=0
show() {
    while [ -f "$work/rc.$((shown + 1))" ]; do
        shown=$((shown + 1))
        cat "$work/line.$shown"
        [ "$(cat "$work/rc.$shown")" = 0 ] || fails=$((fails + 1))
    done
}
# in this shell, not a pipeline's subshell: a signal's trap ends it at once
echo "$configs" >"$work/configs"
i=0
while read -r n expect flags; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    (run "$n" "$expect" $flags >"$work/line.$i" 2>&1; echo $? >"$work/rc.$i") &
    if [ $((i % jobs)) = 0 ]; then
        wait
        show
    fi
done <"$work/configs"
wait
show
# A run that wrote no status (its shell killed, say) stops show() short:
# the runs after it are shown here, and it is a failure, not a pass.
while [ "$shown" -lt "$i" ]; do
    shown=$((shown + 1))
    if [ -f "$work/rc.$shown" ]; then
        cat "$work/line.$shown"
        [ "$(cat "$work/rc.$shown")" = 0 ] || fails=$((fails + 1))
    else
        echo "FAIL $(awk -v k="$shown" 'NR == k {print $1}' "$work/configs"): no result (configuration $shown of $i)"
        fails=$((fails + 1))
    fi
done

# every feature reached by some correct run (of the whole set only)
if [ -z "$names" ]; then
    echo "$features" | while IFS=: read -r w text; do
        [ "$w" = 9 ] && ! grep -q STICKY_PREFIX "$model" && continue
        reached=no
        for all in "$work"/*/wit.all; do
            [ -f "$all" ] || continue
            total=$(awk -v w="$w" '$NF == w {print $1}' "$all")
            missed=$(awk -v w="$w" '$NF == w {print $1}' "${all%.all}.unreached")
            [ -n "$total" ] && [ "${missed:-0}" -lt "$total" ] && reached=yes
        done
        if [ $reached = yes ]; then
            echo "REACHED $w: $text"
        else
            echo "FAIL: feature $w never reached: $text"
            echo x >>"$work/unreached"
        fi
    done
    [ -f "$work/unreached" ] && fails=$((fails + 1))
fi

echo "$(($(date +%s) - start))s"
if [ $fails -gt 0 ]; then
    echo "FAIL: $fails"
    exit 1
fi
exit 0
