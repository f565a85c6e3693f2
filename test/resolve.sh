#!/bin/bash
# resolve.sh: server lists and server names. A malformed list is a usage
# error (64, nothing to retry); a name that does not resolve leaves the
# servers unavailable (69, naming it), and a session opened in the
# background waits for the name to resolve. Names are looked up in a mount
# namespace of the test's own, whose resolver reads only a hosts file of the
# test's (nsswitch.conf "hosts: files"): no query leaves the machine, and
# none waits for a DNS server.
set -u
source "${srcdir:-$(dirname "$0")/..}/test/testlib.sh"
P=/zklock-test/resolve-$$
BACKGROUND=$B/test/background
PORT=${ZKLOCK_TEST_HOSTS##*:} # the harness's one server, on 127.0.0.1

# ---- malformed lists: usage errors, found before any lookup -------------------------------------
for list in zk1 zk1: :2181 zk1:0 zk1:65536 zk1:2181x '[::1]:2181' zk1:2181,zk2 \
            zk1:2181/bad//chroot ,; do
  expect_status 64 "a malformed server list '$list'" "$ZKLOCK" -s "$list" $P/a true
  check "...says it cannot use the list" grep -qF "cannot use the server list '$list'" "$T/err"
done

# ---- names that do not resolve ---------------------------------------------------------------------
printf 'hosts: files\n' >"$T/nsswitch.conf"
printf '127.0.0.1 localhost\n' >"$T/hosts"
# COMMAND... with the test's own resolver, for at most a minute
private_resolver() {
  timeout 60 unshare -m sh -c 'mount --bind "$0" /etc/nsswitch.conf && mount --bind "$1" /etc/hosts &&
    shift && exec "$@"' "$T/nsswitch.conf" "$T/hosts" "$@"
}
if ! private_resolver true 2>/dev/null || ! private_resolver getent hosts localhost >/dev/null; then
  skip "names that do not resolve: no mount namespace of the test's own here (needs root and unshare -m)"
  done_testing; exit
fi
check "the private resolver resolves localhost" private_resolver getent hosts localhost
check "...and nothing else" [ "$(private_resolver getent hosts nonexistent.invalid; echo $?)" = 2 ]

expect_status 69 "zklock: a server name that does not resolve is unavailable, not bad usage" \
  private_resolver "$ZKLOCK" -s nonexistent.invalid:2181 $P/a true
check "...naming it" grep -q "cannot resolve the server name nonexistent.invalid (of nonexistent.invalid:2181)" "$T/err"
expect_status 69 "zklock-ls: the same" private_resolver "$ZKLS" -s "nonexistent.invalid:2181,also.invalid:2182/app" $P/a
check "...naming both" grep -q "cannot resolve the server names nonexistent.invalid, also.invalid (of" "$T/err"
expect_status 0 "one name of the list that resolves is enough (as for ZooKeeper's client)" \
  private_resolver "$ZKLOCK" -s "nonexistent.invalid:2181,localhost:$PORT" $P/a true

# ---- a session opened in the background, before its server's name resolves ------------------------
hosts_read() { [ "$(stat -c %X "$T/hosts")" != "$1" ]; }
touch -a -d '2 hours ago' "$T/hosts" # the next lookup moves its access time to now
before=$(stat -c %X "$T/hosts")
private_resolver "$BACKGROUND" "zklock-late:$PORT" $P/late 40000 >"$T/late" 2>&1 & helper=$!
check "open in the background returns at once" wait_for 20 grep -qx "opened ZKLOCK_OK" "$T/late"
check "...the session looks the name up" wait_for 20 hosts_read "$before"
not_yet() { ! grep -q acquired "$T/late"; }
check "...which does not resolve yet: no acquisition" not_yet
echo "127.0.0.1 zklock-late" >>"$T/hosts"
wait $helper; st=$?
check "an acquisition made before the name resolved ends well once it does (exit $st)" [ $st = 0 ]
check "...having acquired, within its timeout" grep -qx "acquired ZKLOCK_OK" "$T/late"
check "no node left under $P/late" wait_for 10 queued $P/late 0
done_testing
