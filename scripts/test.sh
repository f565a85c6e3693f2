#!/bin/bash
# scripts/test.sh: sets up everything (Debian packages, build) and runs the
# whole test suite. Each suite starts and stops its own throwaway ZooKeeper.
#
#   scripts/test.sh            every stage below
#   scripts/test.sh STAGE...   only those stages
#
# Stages:
#   check      ./configure && make check (unit, API, fault and tool tests)
#   install    make install into a temp prefix, build the README example with
#              pkg-config against it, make uninstall leaves nothing
#   demo       scripts/demo.sh runs to completion
#   asan       make check under AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan       make check under ThreadSanitizer
#   valgrind   make check-valgrind (memcheck, leaks are errors)
#   fuzz       libFuzzer on lock paths, node names and node data as the utilities
#              print it ($FUZZ_SECONDS, default 60)
#   soak       the chaos soak (make soak), short: $SOAK_SECONDS (default 120)
#              of client kills and pauses, server kills and pauses against a
#              3-server ensemble, then test/soak.py's checker; about 2.5
#              minutes in all, and stopped at SOAK_SECONDS + 180 s
#   distcheck  make distcheck
#   deb        the Debian packages (debian/): dpkg-buildpackage -b (nocheck: the
#              suites ran above) in a copy of the tree under build/deb, lintian
#              (no error, no warning), then installed with apt-get: the README
#              example built with pkg-config and CMake and run, the demo, zklock
#              --version and the man pages from the installed files, the
#              systemd unit checked (two instances started where systemd runs,
#              else systemd-analyze verify), and apt-get purge leaves no file.
#              About 3 minutes on the shared machine (122 to 205 s measured)
#   partition  the partition rig (make check-partition): network namespaces,
#              silent cuts, partitions, loss, delay, pauses, one run of each
#              scenario; needs root, and says SKIP (exit 77) where namespaces
#              cannot be made. About 5 minutes; $PARTITION_FLAGS go to
#              test/partition/rig.py (e.g. '--runs 3 --keep')
#
# Not a stage: the model's large bounds (make check-model), about 35 minutes
# and 3 GB for the verifiers, more than CI's budget (its whole run, about
# 40 minutes on two cores, each stage saying how long it took, must stay
# well under 90) and than a shared runner's memory. A suite that hangs is
# stopped after $ZKLOCK_TEST_TIMEOUT seconds (test/run-test.sh, 900).
# make check runs the small bounds (model/check.sh), every broken variant
# included; run make check-model when the engine's protocol or the model
# changes.
set -euo pipefail
source "$(dirname "$0")/common.sh"

ALL_STAGES="check install demo asan tsan valgrind fuzz soak distcheck deb partition"
# a suite that fails under test/zk-harness.sh shows its servers' last log lines
export ZKLOCK_HARNESS_LOGS=${ZKLOCK_HARNESS_LOGS:-1}
stages=${*:-$ALL_STAGES}
B=$ZKLOCK_TOP/build

# A suite that skips (exit 77), or a part of one that says so ("ok ... #
# SKIP why": testlib.sh's skip, tu_skip() in the C suites, check-header.sh),
# passes in make check; here it does not, since this script installed
# everything every suite needs; except what cannot run on Debian at all,
# listed here (extended regular expressions on "SUITE: why"):
#   security: TLS    Debian's ZooKeeper C client is built without OpenSSL,
#                    so no TLS connection can be tried.
#   check-abi        the sanitizer stages build no shared library (the
#                    check stage checks its ABI).
# ZKLOCK_ALLOW_SKIP=1 lets a machine without some package pass.
EXPECTED_SKIPS='security: TLS connections: |check-abi: the whole suite: no libzklock\.so \(built with --disable-shared\)'

skips_in() { # build dir: every skip its test logs show, one line each: "SUITE: why"
  local trs log name
  for trs in "$1"/test/*.trs "$1"/model/*.trs; do
    [ -f "$trs" ] || continue
    log=${trs%.trs}.log name=$(basename "$trs" .trs)
    if grep -q '^:test-result: SKIP' "$trs"; then
      echo "$name: the whole suite: $(grep -m 1 '^SKIP' "$log" | sed 's/^SKIP: *//')"
    fi
    sed -n 's/^ok .*# SKIP *//p' "$log" | sed "s/^/$name: /"
  done
}

no_skips() { # build dir
  local all unexpected
  all=$(skips_in "$1")
  [ -n "$all" ] || return 0
  printf '%s\n' "$all" | grep -E "^($EXPECTED_SKIPS)" | sed 's/^/expected skip: /' || true
  unexpected=$(printf '%s\n' "$all" | grep -Ev "^($EXPECTED_SKIPS)" || true)
  [ -n "$unexpected" ] || return 0
  printf '%s\n' "$unexpected" | sed 's/^/SKIPPED: /'
  if [ -n "${ZKLOCK_ALLOW_SKIP:-}" ]; then
    echo "(ZKLOCK_ALLOW_SKIP is set: not a failure)"; return 0
  fi
  echo "FAIL: $(printf '%s\n' "$unexpected" | wc -l) skip(s) CI does not expect"; return 1
}

stage_check() {
  build "$B/plain"
  make -C "$B/plain" -j"$JOBS" check || { cat "$B/plain/test-suite.log"; return 1; }
  no_skips "$B/plain"
}

stage_install() {
  local prefix=$B/prefix
  rm -rf "$prefix"
  build "$B/install" --prefix="$prefix"
  make -C "$B/install" -s install >/dev/null 2>&1 || { echo "FAIL: make install"; return 1; }
  # shellcheck disable=SC2046
  cc -o "$B/example-installed" "$ZKLOCK_TOP/docs/example.c" \
    $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs zklock) \
    -Wl,-rpath,"$prefix/lib" ||
    { echo "FAIL: the README example does not build against the installed library"; return 1; }
  "$ZKLOCK_TOP/test/zk-harness.sh" run sh -c '"$0" "$ZKLOCK_TEST_HOSTS"' "$B/example-installed" |
    grep -q 'holding the lock' || { echo "FAIL: the installed example did not take the lock"; return 1; }
  [ -f "$prefix/share/man/man3/zklock.3" ] || { echo "FAIL: man page not installed"; return 1; }
  rm -rf "$B/cmake-user"
  cmake -S "$ZKLOCK_TOP/test/cmake" -B "$B/cmake-user" -DCMAKE_PREFIX_PATH="$prefix" \
    -DEXAMPLE_SOURCE="$ZKLOCK_TOP/docs/example.c" -DCMAKE_BUILD_RPATH="$prefix/lib" >"$B/cmake-user.log" 2>&1 &&
    cmake --build "$B/cmake-user" >>"$B/cmake-user.log" 2>&1 ||
    { cat "$B/cmake-user.log"; echo "FAIL: a CMake project cannot find_package(zklock CONFIG) and link it"; return 1; }
  "$ZKLOCK_TOP/test/zk-harness.sh" run sh -c '"$0" "$ZKLOCK_TEST_HOSTS"' "$B/cmake-user/example" |
    grep -q 'holding the lock' || { echo "FAIL: the example built with CMake did not take the lock"; return 1; }
  make -C "$B/install" -s uninstall >/dev/null
  if [ -n "$(find "$prefix" -type f)" ]; then
    echo "FAIL: make uninstall left files behind:"; find "$prefix" -type f; return 1
  fi
  rm -rf "$prefix" "$B/example-installed" "$B/cmake-user"
  echo "PASS: make install, docs/example.c built against it with pkg-config and with CMake, make uninstall"
}

stage_demo() {
  DEMO_PAUSE=0 "$ZKLOCK_TOP/scripts/demo.sh" >"$B/demo.log" 2>&1 ||
    { tail -n 40 "$B/demo.log"; echo "FAIL: the demo"; return 1; }
  grep -q "next has the lock" "$B/demo.log" || { echo "FAIL: the demo did not finish its story"; return 1; }
  echo "PASS: scripts/demo.sh"
}

stage_asan() {
  build "$B/asan" --enable-asan --disable-shared
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    LSAN_OPTIONS="suppressions=$ZKLOCK_TOP/test/lsan.supp:print_suppressions=0" \
    make -C "$B/asan" -j"$JOBS" check || { cat "$B/asan/test-suite.log"; return 1; }
  no_skips "$B/asan"
}

stage_tsan() {
  build "$B/tsan" --enable-tsan --disable-shared
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$ZKLOCK_TOP/test/tsan.supp" \
    make -C "$B/tsan" -j"$JOBS" check || { cat "$B/tsan/test-suite.log"; return 1; }
  no_skips "$B/tsan"
}

stage_valgrind() {
  build "$B/plain"
  make -C "$B/plain" check-valgrind || { cat "$B/plain/test-suite.log"; return 1; }
  no_skips "$B/plain"
}

stage_fuzz() {
  local out=$B/fuzz
  build "$B/plain"
  mkdir -p "$out/corpus"
  cp "$ZKLOCK_TOP"/test/fuzz-corpus/* "$out/corpus/"
  clang -g -O1 -fsanitize=fuzzer,address,undefined -DZKL_LIBFUZZER -DTHREADED \
    -I"$B/plain" -I"$B/plain/include" -I"$ZKLOCK_TOP/include" \
    -o "$out/fuzz_names" "$ZKLOCK_TOP/test/fuzz_names.c" "$ZKLOCK_TOP/lib/node.c" \
    "$ZKLOCK_TOP/lib/path.c" "$ZKLOCK_TOP/lib/hosts.c" "$ZKLOCK_TOP/lib/error.c" "$ZKLOCK_TOP/tools/escape.c" \
    -lzookeeper_mt -ljansson ||
    { echo "FAIL: cannot build the fuzz target"; return 1; }
  (cd "$out" && ./fuzz_names -max_total_time="${FUZZ_SECONDS:-60}" -max_len=4096 \
    -print_final_stats=1 corpus 2>&1 | tail -n 15) || { echo "FAIL: the fuzzer found a crash (see $out)"; return 1; }
  echo "PASS: fuzzed lock paths, node names and node data for ${FUZZ_SECONDS:-60} s"
}

stage_soak() {
  local seconds=${SOAK_SECONDS:-120} rc=0
  build "$B/plain"
  make -C "$B/plain" -s test/soak_client >/dev/null || { echo "FAIL: cannot build test/soak_client"; return 1; }
  # soak.py bounds itself (the faults for $seconds, then at most a minute to
  # stop the clients and a few session timeouts for the nodes to go); the
  # timeout is for a hang, and its SIGTERM goes through soak.py's clean-up
  (cd "$B/plain" && timeout $((seconds + 180)) python3 "$ZKLOCK_TOP/test/soak.py" --seconds "$seconds" \
    --client test/soak_client --harness "$ZKLOCK_TOP/test/zk-harness.sh") >"$B/soak.log" 2>&1 || rc=$?
  sed -n '1p; /== soak results ==/,$p' "$B/soak.log"
  if [ $rc -ne 0 ]; then
    tail -n 20 "$B/soak.log"; echo "FAIL: the soak (exit $rc; log in $B/soak.log)"; return 1
  fi
  echo "PASS: the soak, $seconds s of faults"
}

stage_distcheck() {
  build "$B/plain"
  # VERBOSE=1 reaches the inner make check: a failing test's log is printed
  make -C "$B/plain" -j"$JOBS" distcheck VERBOSE=1 >"$B/distcheck.log" 2>&1 ||
    { grep -E -A200 '^(FAIL|ERROR): ' "$B/distcheck.log" | tail -n 300; return 1; }
  echo "PASS: make distcheck"
}

# The Debian packages, built from a copy of the checkout (dpkg-buildpackage
# writes into the tree and its parent), installed, used and purged.
DEB_PACKAGES="libzklock0 libzklock-dev zklock-tools"

stage_deb() {
  local work=$B/deb version src p rc=0
  rm -rf "$work" && mkdir -p "$work"
  version=$(sed -n 's/^AC_INIT(\[zklock\], \[\([^]]*\)\].*/\1/p' "$ZKLOCK_TOP/configure.ac")
  src=$work/zklock-$version
  deb_copy_tree "$src" || { echo "FAIL: cannot copy the tree into $src"; return 1; }
  (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$JOBS" dpkg-buildpackage -us -uc -b) \
    >"$work/build.log" 2>&1 || { tail -n 60 "$work/build.log"; echo "FAIL: dpkg-buildpackage (log: $work/build.log)"; return 1; }
  echo "built: $(cd "$work" && echo *.deb)"
  # errors and warnings fail, info tags are shown; an override says why in
  # debian/PACKAGE.lintian-overrides (--show-overrides would make lintian fail)
  lintian --display-info --fail-on error,warning "$work"/zklock_*.changes ||
    { echo "FAIL: lintian"; return 1; }
  echo "PASS: lintian, no error or warning; overridden, with reasons:" \
    "$(cd "$src/debian" && grep -v '^#' ./*.lintian-overrides | sed 's|^\./||; s|\.lintian-overrides:| |' | tr '\n' ';')"
  for p in $DEB_PACKAGES; do # the stage purges what it installed: nothing of this machine's own
    ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
      { echo "FAIL: $p is installed already: apt-get purge $DEB_PACKAGES first"; return 1; }
  done
  if deb_install "$work"; then deb_use "$work" || rc=1; else rc=1; fi
  deb_purge "$work" || rc=1
  return $rc
}

deb_copy_tree() { # dir: the checkout's files (tracked and new, not ignored: no build/)
  mkdir -p "$1"
  if git -C "$ZKLOCK_TOP" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$ZKLOCK_TOP" && git ls-files -z -c -o --exclude-standard | xargs -0 sh -c \
      'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | tar --null -T - -cf -) | tar -xf - -C "$1"
  else
    tar -C "$ZKLOCK_TOP" --exclude=./build -cf - . | tar -xf - -C "$1"
  fi
}

deb_install() { # work dir
  local p
  for p in $DEB_PACKAGES; do # what the packages will install, and what of it was there before
    dpkg-deb -c "$1"/${p}_*.deb | awk '{print substr($6, 2)}' | sed 's|/$||' | grep . >>"$1/contents"
  done
  while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done <"$1/contents" >"$1/there-before"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $(for p in $DEB_PACKAGES; do echo "$1"/${p}_*.deb; done) >"$1/install.log" 2>&1 ||
    { cat "$1/install.log"; echo "FAIL: apt-get install of the packages"; return 1; }
  # shellcheck disable=SC2086
  dpkg -L $DEB_PACKAGES | grep -vx '/\.' | sort -u >"$1/installed"
  echo "PASS: apt-get install ./*.deb: $(wc -l <"$1/installed") paths"
}

deb_use() { # work dir: the installed files at work
  # (grep >/dev/null, not grep -q, after a command that writes much: under
  # pipefail the writer's SIGPIPE when grep -q stops reading fails the pipe)
  local rc=0 out want
  want="zklock $(dpkg-query -W -f='${Version}' zklock-tools | sed 's/-[^-]*$//')"
  out=$(/usr/bin/zklock --version) && [ "$out" = "$want" ] &&
    ldd /usr/bin/zklock | grep 'libzklock\.so\.0 => /\(usr/\)\{0,1\}lib/' >/dev/null ||
    { echo "FAIL: /usr/bin/zklock --version says '$out', not '$want', or is not linked with /usr/lib's libzklock.so.0"; rc=1; }
  for page in 1:zklock 1:zklock-elect 1:zklock-ls 1:zklock-bench 3:zklock; do
    man -P cat "${page%%:*}" "${page#*:}" 2>/dev/null | grep "^NAME" >/dev/null &&
      man -w "${page%%:*}" "${page#*:}" | grep -q '^/usr/share/man/' ||
      { echo "FAIL: man ${page%%:*} ${page#*:} from the installed page"; rc=1; }
  done
  [ $rc -eq 0 ] && echo "PASS: $out; man zklock, zklock-elect, zklock-ls, zklock-bench, man 3 zklock"
  # the README example against libzklock-dev, with pkg-config and with CMake
  # shellcheck disable=SC2046
  cc -o "$1/example" "$ZKLOCK_TOP/docs/example.c" $(pkg-config --cflags --libs zklock) &&
    cmake -S "$ZKLOCK_TOP/test/cmake" -B "$1/cmake-user" -DEXAMPLE_SOURCE="$ZKLOCK_TOP/docs/example.c" \
      >"$1/cmake.log" 2>&1 && cmake --build "$1/cmake-user" >>"$1/cmake.log" 2>&1 ||
    { cat "$1/cmake.log" 2>/dev/null; echo "FAIL: docs/example.c against libzklock-dev"; return 1; }
  "$ZKLOCK_TOP/test/zk-harness.sh" run sh -c '"$0" "$ZKLOCK_TEST_HOSTS" && "$1" "$ZKLOCK_TEST_HOSTS"' \
    "$1/example" "$1/cmake-user/example" | grep -c 'holding the lock' | grep -qx 2 ||
    { echo "FAIL: docs/example.c built against libzklock-dev did not take the lock"; return 1; }
  echo "PASS: docs/example.c built with pkg-config and with CMake against libzklock-dev, and run"
  DEMO_PAUSE=0 ZKLOCK_DEMO_BINDIR=/usr/bin "$ZKLOCK_TOP/scripts/demo.sh" >"$1/demo.log" 2>&1 &&
    grep -q "next has the lock" "$1/demo.log" ||
    { tail -n 40 "$1/demo.log"; echo "FAIL: the demo on the installed tools"; return 1; }
  echo "PASS: scripts/demo.sh on /usr/bin's zklock, zklock-ls and zklock-elect"
  deb_unit "$1" || rc=1
  return $rc
}

deb_unit() { # work dir: zklock-elect@.service as installed
  local unit=/lib/systemd/system/zklock-elect@.service out
  if [ -d /run/systemd/system ]; then
    deb_unit_pair "$1"; return
  fi
  out=$(systemd-analyze verify "$unit" 2>&1) && [ -z "$out" ] ||
    { echo "$out"; echo "FAIL: systemd-analyze verify $unit"; return 1; }
  echo "PASS: systemd-analyze verify $unit (systemd does not run here: no instance started)"
}

deb_unit_pair() { # work dir: two instances of the unit, one leads; stopped, the other does
  local zk leader other i rc=0
  zk=$("$ZKLOCK_TOP/test/zk-harness.sh" start "$1/zk") || { echo "FAIL: ZooKeeper did not start"; return 1; }
  mkdir -p /etc/zklock
  for i in a b; do
    printf '%s\n' "ZKLOCK_SERVERS=$zk" ZKLOCK_ELECT_PATH=/zklock-ci/deb-pair "ZKLOCK_ELECT_VALUE=$i" \
      'ZKLOCK_ELECT_COMMAND=/bin/sleep 600' 'ZKLOCK_ELECT_OPTIONS=--session-timeout 4000' >/etc/zklock/zklock-ci-$i.conf
  done
  systemctl start zklock-elect@zklock-ci-a zklock-elect@zklock-ci-b
  leader=$(deb_leader "$zk" "")
  case $leader in a) other=b ;; b) other=a ;; *) other= ;; esac
  if [ -z "$other" ]; then
    echo "FAIL: neither instance leads (leader: '$leader')"; rc=1
  else
    systemctl stop "zklock-elect@zklock-ci-$leader"
    [ "$(deb_leader "$zk" "$leader")" = "$other" ] ||
      { echo "FAIL: stopping instance $leader did not hand the lead to $other"; rc=1; }
  fi
  systemctl stop zklock-elect@zklock-ci-a zklock-elect@zklock-ci-b
  rm -f /etc/zklock/zklock-ci-a.conf /etc/zklock/zklock-ci-b.conf
  rmdir /etc/zklock 2>/dev/null || true
  "$ZKLOCK_TOP/test/zk-harness.sh" stop "$1/zk"
  [ $rc -eq 0 ] && echo "PASS: two instances of zklock-elect@.service under systemd: $leader led, stopped, $other led"
  return $rc
}

deb_leader() { # servers, a leader to see gone: the value of the leader, within 20 s
  local i now
  for i in $(seq 200); do
    now=$(zklock-ls -s "$1" /zklock-ci/deb-pair 2>/dev/null | awk '$2 == "holds" {print $NF; exit}')
    [ -n "$now" ] && [ "$now" != "$2" ] && { echo "$now"; return; }
    sleep 0.1 # poll the election
  done
}

deb_purge() { # work dir: nothing of the packages is left
  local left list=$1/installed
  [ -f "$list" ] || list=$1/contents # the install failed: look for all the packages hold
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $DEB_PACKAGES >"$1/purge.log" 2>&1 ||
    { cat "$1/purge.log"; echo "FAIL: apt-get purge"; return 1; }
  left=$(while read -r f; do
    { [ -e "$f" ] || [ -L "$f" ]; } && ! grep -qxF "$f" "$1/there-before" && echo "$f"
  done <"$list")
  [ -z "$left" ] || { echo "$left"; echo "FAIL: apt-get purge left these behind"; return 1; }
  echo "PASS: apt-get purge: none of the $(wc -l <"$list") paths is left but what was there before"
}

stage_partition() {
  local rc=0 t0=$SECONDS
  build "$B/plain"
  make -C "$B/plain" -s test/soak_client test/partition/zkproxy-run >/dev/null ||
    { echo "FAIL: cannot build the partition rig's programs"; return 1; }
  # the rig bounds itself (--time-limit, 600 s a run) and tears down what it made
  # shellcheck disable=SC2086
  (cd "$B/plain" && python3 "$ZKLOCK_TOP/test/partition/rig.py" --client test/soak_client \
    --proxy test/partition/zkproxy-run ${PARTITION_FLAGS:-}) || rc=$?
  echo "partition stage: $((SECONDS - t0)) s"
  return $rc
}

ensure_packages
failed="" skipped=""
for s in $stages; do
  case " $ALL_STAGES " in *" $s "*) ;; *) die "unknown stage '$s' (stages: $ALL_STAGES)";; esac
  say "stage: $s"
  rc=0 t0=$SECONDS
  "stage_$s" || rc=$?
  say "stage $s took $((SECONDS - t0)) s"
  if [ $rc -eq 77 ]; then skipped="$skipped $s"; say "stage $s SKIPPED"
  elif [ $rc -ne 0 ]; then failed="$failed $s"; say "stage $s FAILED"; fi
done
if [ -n "$failed" ]; then
  say "FAILED stages:$failed"
  exit 1
fi
# A stage that cannot run here (the partition rig without network
# namespaces) makes the whole run exit 77, unless ZKLOCK_ALLOW_SKIP is set.
if [ -n "$skipped" ]; then
  say "SKIP: stages that could not run here:$skipped (the others passed)"
  [ -n "${ZKLOCK_ALLOW_SKIP:-}" ] && exit 0
  exit 77
fi
say "all stages passed: $stages"
