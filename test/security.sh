#!/bin/bash
# security.sh: the utilities on a secured ensemble, as a user runs them:
# credentials from a file, the ACL of what they create, what an ACL refuses
# and how they say it, TLS options on a client without TLS, and output that
# node data cannot forge. The servers' superuser ($ZKLOCK_TEST_SUPER) sets up
# a lock root for alice and bob, and another client makes hostile lock
# nodes (test/zkadmin.py, with python kazoo).
set -u
source "${srcdir:-$(dirname "$0")/..}/test/testlib.sh"
"$PY" -c 'import kazoo' 2>/dev/null ||
  { echo "SKIP: needs kazoo for $PY (apt-get install python3-kazoo)"; exit 77; }
admin() { "$PY" "$TESTDIR/zkadmin.py" "$@"; }
# The same in the background, with $! its own pid (not a subshell's).
admin_bg() { "$PY" "$TESTDIR/zkadmin.py" "$@" & }
R=/zklock-test/security-$$       # alice and bob may lock here, anyone may read
H=/zklock-test/hostile-$$        # open to all: hostile lock nodes
admin root $R alice bob || { fail "the superuser sets up $R"; done_testing; exit; }

secret_file() { # NAME TEXT: a file only its owner may read
  printf '%s\n' "$2" >"$T/$1" && chmod 600 "$T/$1"
}
secret_file alice.auth "# alice, as the deploy jobs run
digest:alice:alice-pw"
secret_file bob.auth "digest:bob:bob-pw"
secret_file carol.auth "digest:carol:carol-pw"
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); } # START_NS
children() { admin children "$1"; }
# stderr of the last expect_status: N lines, all of the tool's own
lines_of() { [ "$(wc -l <"$T/err")" = "$2" ] && ! grep -qv "^$1: " "$T/err"; } # TOOL N
A_ID=$(admin digest alice) B_ID=$(admin digest bob)
# The ACL alice and bob share: a lock path either may create, queue on, delete.
printf '%s\n' "# alice and bob share these locks" "digest:$A_ID:cdrwa" "digest:$B_ID:cdrwa" \
  "world:anyone:r" >"$T/shared.acl"
shared_acl=$(printf '%s\n' "digest:$A_ID:crwda" "digest:$B_ID:crwda" "world:anyone:r" | sort)
printf '%s\n' "digest:$A_ID:cdrwa" >"$T/alice-only.acl"
sorted_acl() { admin acl "$1" | sort; }

# ---- refused without credentials ---------------------------------------------------------
# $R/nobody: a lock nobody may create (the paths the others create stay a
# moment after their last holder, as containers, and some are open).
start=$(date +%s%N)
expect_status 77 "no credentials: refused" "$ZKLOCK" -t 30 $R/nobody true
check "...at once, not after the timeout (no retry loop)" [ "$(ms_since $start)" -lt 15000 ]
check "...naming the node whose ACL refused: the deepest that exists" \
  [ "$(cat "$T/err")" = "zklock: cannot take $R/nobody: not allowed by the ACL of $R (this client gave no credentials: see --auth-file)" ]
check "...leaving nothing behind" [ "$(children $R)" = 0 ]
expect_status 77 "-q: refused, silently" "$ZKLOCK" -q -t 30 $R/nobody true
check "...says nothing" [ ! -s "$T/err" ]

# ---- credentials from a file ---------------------------------------------------------------
expect_status 0 "--auth-file: alice may lock under $R" "$ZKLOCK" --auth-file "$T/alice.auth" $R/job true
check "...without a word (the file is hers alone)" [ ! -s "$T/err" ]
expect_status 0 "\$ZKLOCK_AUTH_FILE" env ZKLOCK_AUTH_FILE="$T/alice.auth" "$ZKLOCK" $R/job true
printf 'digest:alice:alice-pw\r\n\r\n# comment\r\n' >"$T/crlf.auth"; chmod 600 "$T/crlf.auth"
expect_status 0 "a file written on Windows (CRLF)" "$ZKLOCK" --auth-file "$T/crlf.auth" $R/job true
secret_file two.auth "digest:carol:carol-pw
  # a comment after blanks

digest:bob:bob-pw"
expect_status 0 "several credentials, comments and blank lines" "$ZKLOCK" --auth-file "$T/two.auth" $R/job true
cp "$T/alice.auth" "$T/open.auth"; chmod 644 "$T/open.auth"
expect_status 0 "a file others may read: used" "$ZKLOCK" --auth-file "$T/open.auth" $R/job true
check "...with a warning, one line" \
  [ "$(cat "$T/err")" = "zklock: warning: $T/open.auth holds secrets but others than its owner may read or write it (chmod 600 $T/open.auth)" ]
chmod 620 "$T/open.auth"
expect_status 0 "a file the group may write" "$ZKLOCK" --auth-file "$T/open.auth" $R/job true
check "...warned about too" grep -q "warning: $T/open.auth holds secrets" "$T/err"
expect_status 0 "zklock-ls warns too" "$ZKLS" --auth-file "$T/open.auth" $R/job
check "...in its own name" grep -q "^zklock-ls: warning: $T/open.auth" "$T/err"

secret_file wrong.auth "digest:alice:not-her-password"
expect_status 77 "a wrong password is another identity: refused by the ACL" \
  "$ZKLOCK" -t 30 --auth-file "$T/wrong.auth" $R/nobody true
check "...saying whose credentials" \
  [ "$(cat "$T/err")" = "zklock: cannot take $R/nobody: not allowed by the ACL of $R (as the identities in $T/wrong.auth)" ]
check "...leaving nothing behind" [ "$(children $R/nobody)" = 0 ]
secret_file unknown.auth "nosuchscheme:whatever"
# The server rejects the credentials and closes the connection, and the
# close can overtake the rejection: the C client then answers "connection
# loss" (the tool said so, exit 69, about one run in ten, until 1ccdd70:
# lib/auth.c now waits for the server's own verdict; faults/lost_auth_*
# drop that answer on purpose). Anything but 77 and the message fails.
expect_rejected() { # description tool command...
  local what=$1 tool=$2 got; shift 2
  "$@" >"$T/out" 2>"$T/err"; got=$?
  if [ "$got" = 77 ]; then
    ok "$what (exit 77)"
    check "...naming the file" [ "$(cat "$T/err")" = "$tool: the server rejected the credentials in $T/unknown.auth" ]
  else
    fail "$what: exit $got, want 77"; sed 's/^/    /' "$T/err"
  fi
}
start=$(date +%s%N)
expect_rejected "an unknown scheme: the server rejects the credentials" zklock \
  "$ZKLOCK" -t 30 --connect-timeout 30 --auth-file "$T/unknown.auth" $R/job true
check "...at once" [ "$(ms_since $start)" -lt 15000 ]
expect_rejected "zklock-ls: the same" zklock-ls "$ZKLS" --auth-file "$T/unknown.auth" $R/job

secret_file bad.auth "# a comment

digest:alice:alice-pw
s3cret-without-scheme"
expect_status 64 "a malformed line: usage error" "$ZKLOCK" --auth-file "$T/bad.auth" $R/job true
check "...naming the file and the line" grep -q "^zklock: $T/bad.auth:4: not a credential" "$T/err"
check "...but not what it holds" sh -c "! grep -q s3cret '$T/err'"
secret_file nodata.auth "digest:"
expect_status 64 "a scheme without data" "$ZKLOCK" --auth-file "$T/nodata.auth" $R/job true
check "...named" grep -q "^zklock: $T/nodata.auth:1: nothing after the scheme" "$T/err"
secret_file empty.auth "# nothing but a comment"
expect_status 64 "a file without credentials" "$ZKLOCK" --auth-file "$T/empty.auth" $R/job true
check "...said so" grep -q "holds no credentials" "$T/err"
expect_status 64 "a file that is not there" "$ZKLOCK" --auth-file "$T/none.auth" $R/job true
check "...said so" grep -q "^zklock: cannot read $T/none.auth: No such file or directory$" "$T/err"
expect_status 64 "-q still says a usage error in the file" "$ZKLOCK" -q --auth-file "$T/bad.auth" $R/job true
check "...on stderr" grep -q "$T/bad.auth:4:" "$T/err"

# No secret on a command line: anyone on the machine can read it.
rm -f "$T/ready"
"$ZKLOCK" --auth-file "$T/alice.auth" $R/held sh -c "echo x > $T/ready; while [ ! -e $T/go-held ]; do sleep 0.05; done" &
pid=$!
check "a holder with --auth-file" wait_for 20 started "$T/ready"
check "...whose command line holds the file's name" grep -q -- "--auth-file" "/proc/$pid/cmdline"
check "...and not the password" sh -c "! grep -q alice-pw /proc/$pid/cmdline"
touch "$T/go-held"; wait $pid

# ---- two identities take turns; a third can look, not touch ------------------------------------
log=$T/turns.log
rm -f "$T/go-turns"
zk_hold_until "$log" alice x "$T/go-turns" --auth-file "$T/alice.auth" --acl-file "$T/shared.acl" $R/deploy & ta=$!
check "alice holds $R/deploy" wait_for 20 entered "$log" alice
zk_section "$log" bob x 0 -t 30 --auth-file "$T/bob.auth" --acl-file "$T/shared.acl" $R/deploy & tb=$!
check "bob waits behind her" wait_for 20 queued $R/deploy 2
check "the lock path has the ACL of --acl-file" [ "$(sorted_acl $R/deploy)" = "$shared_acl" ]
expect_status 0 "carol reads the queue (zklock-ls --auth-file)" "$ZKLS" --auth-file "$T/carol.auth" $R/deploy
check "...one holding, one waiting" grep -q "^$R/deploy  (1 holding, 1 waiting)" "$T/out"
check "...but cannot delete their nodes" [ "$(admin delete carol $R/deploy)" = NoAuthError ]
expect_status 77 "nor can carol queue" "$ZKLOCK" -t 0 --auth-file "$T/carol.auth" $R/deploy true
check "...refused by the lock path's own ACL" grep -q "not allowed by the ACL of $R/deploy (as the identities in $T/carol.auth)" "$T/err"
touch "$T/go-turns"
wait $ta; sa=$?; wait $tb; sb=$?
check "both ran" [ "$sa $sb" = "0 0" ]
check "alice, then bob" [ "$(awk '{print $2 "-" $3}' "$log" | tr '\n' ' ')" = "enter-alice leave-alice enter-bob leave-bob " ]

# ---- --acl creator and --acl open ---------------------------------------------------------------
rm -f "$T/ready"
"$ZKLOCK" --auth-file "$T/alice.auth" --acl creator $R/mine/sub sh -c "echo x > $T/ready; while [ ! -e $T/go-mine ]; do sleep 0.05; done" &
pid=$!
check "alice holds $R/mine/sub with --acl creator" wait_for 20 started "$T/ready"
creator_acl=$(printf '%s\n' "digest:$A_ID:crwda" "world:anyone:r" | sort)
check "...the level it made has alice's ACL" [ "$(sorted_acl $R/mine)" = "$creator_acl" ]
check "...and so has the lock path" [ "$(sorted_acl $R/mine/sub)" = "$creator_acl" ]
node=$(json_field $R/mine/sub 'q["nodes"][0]["name"]')
check "...and the lock node" [ "$(sorted_acl "$R/mine/sub/$node")" = "$creator_acl" ]
expect_status 77 "bob cannot queue there" "$ZKLOCK" -t 0 --auth-file "$T/bob.auth" $R/mine/sub true
check "...refused by the lock path's ACL" grep -q "not allowed by the ACL of $R/mine/sub " "$T/err"
expect_status 77 "nor make a lock beside it" "$ZKLOCK" -t 0 --auth-file "$T/bob.auth" $R/mine/other true
check "...refused by the ACL of the level above" grep -q "not allowed by the ACL of $R/mine " "$T/err"
touch "$T/go-mine"; wait $pid
expect_status 64 "--acl creator without credentials" "$ZKLOCK" --acl creator $R/job true
check "...says it needs --auth-file" grep -q "^zklock: --acl creator needs --auth-file" "$T/err"
expect_status 0 "--acl open" "$ZKLOCK" --auth-file "$T/alice.auth" --acl open $R/open \
  sh -c "'$PY' '$TESTDIR/zkadmin.py' acl $R/open"
check "...anyone may do anything" [ "$(cat "$T/out")" = "world:anyone:crwda" ]
expect_status 64 "--acl something else" "$ZKLOCK" --acl everyone $R/job true
check "...named" grep -q "^zklock: --acl: 'everyone' is neither open nor creator" "$T/err"

# ---- --acl-file mistakes ---------------------------------------------------------------------------
printf '%s\n' "world:anyone:r" "world:anyone" >"$T/short.acl"
expect_status 64 "--acl-file: a line without perms" "$ZKLOCK" --acl-file "$T/short.acl" $R/job true
check "...named by file and line" grep -q "^zklock: $T/short.acl:2: not scheme:id:perms" "$T/err"
printf '%s\n' "world:anyone:rx" >"$T/perms.acl"
expect_status 64 "--acl-file: perms not of crwda" "$ZKLOCK" --acl-file "$T/perms.acl" $R/job true
check "...named" grep -q "^zklock: $T/perms.acl:1: the permissions after the last colon must be letters of crwda" "$T/err"
expect_status 64 "--acl and --acl-file" "$ZKLOCK" --acl open --acl-file "$T/shared.acl" $R/job true
printf '%s\n' "ip:not-an-address:cdrwa" >"$T/invalid.acl"
expect_status 64 "an ACL the server finds invalid" "$ZKLOCK" --auth-file "$T/alice.auth" --acl-file "$T/invalid.acl" $R/invalid true
check "...says which" [ "$(cat "$T/err")" = "zklock: cannot take $R/invalid: the server refused the ACL in $T/invalid.acl as invalid" ]
check "...leaving nothing" [ "$(children $R/invalid)" = 0 ]

# ---- zklock-ls on a lock only alice may read ------------------------------------------------------
rm -f "$T/ready"
"$ZKLOCK" --auth-file "$T/alice.auth" --acl-file "$T/alice-only.acl" $R/private \
  sh -c "echo x > $T/ready; while [ ! -e $T/go-private ]; do sleep 0.05; done" & pid=$!
check "alice holds $R/private, which only she may read" wait_for 20 started "$T/ready"
expect_status 77 "zklock-ls without credentials is refused" "$ZKLS" $R/private
check "...naming the lock path" \
  [ "$(cat "$T/err")" = "zklock-ls: $R/private: not allowed by the ACL of $R/private (reading needs READ; this client gave no credentials: see --auth-file)" ]
expect_status 0 "zklock-ls --auth-file reads it" "$ZKLS" --auth-file "$T/alice.auth" $R/private
check "...her hold" grep -q "^$R/private  (1 holding, 0 waiting)" "$T/out"
expect_status 77 "zklock-ls -R goes past what it may not read" "$ZKLS" -R $R
check "...says it" grep -q "^zklock-ls: $R/private: not allowed by the ACL of $R/private" "$T/err"
expect_status 77 "zklock-ls -f stops at a refusal (asking again would not help)" \
  timeout 20 "$ZKLS" -f $R/private
touch "$T/go-private"; wait $pid

# ---- zklock-bench -------------------------------------------------------------------------------------
expect_status 0 "zklock-bench --auth-file" "$ZKBENCH" --auth-file "$T/alice.auth" -p $R/bench --warmup 0 \
  "$ZKLOCK_TEST_HOSTS" uncontended 3
expect_status 0 "zklock-bench --acl creator" "$ZKBENCH" --auth-file "$T/alice.auth" --acl creator \
  -p $R/bench --warmup 0 "$ZKLOCK_TEST_HOSTS" contended 2 0.2
expect_status 77 "zklock-bench without credentials" "$ZKBENCH" -p $R/nobody --warmup 0 "$ZKLOCK_TEST_HOSTS" uncontended 3
check "...says which ACL refused" grep -q "^zklock-bench: cannot take $R/nobody/u-[0-9]*: not allowed by the ACL of $R " "$T/err"

# ---- TLS, on a client without it ---------------------------------------------------------------------
if grep -q "define HAVE_ZOOKEEPER_TLS 1" "$B/config.h" 2>/dev/null; then
  skip "TLS options: this build's ZooKeeper client has TLS (no TLS server here to test against)"
else
  touch "$T/ca.pem" "$T/cert.pem" "$T/key.pem"
  tls=(--tls-ca "$T/ca.pem" --tls-cert "$T/cert.pem" --tls-key "$T/key.pem")
  no_tls() { [ "$(cat "$T/err")" = "$1: this build's ZooKeeper client has no TLS: --tls-ca, --tls-cert and --tls-key need one built with OpenSSL" ]; }
  expect_status 64 "zklock: TLS asked of a client without it" "$ZKLOCK" "${tls[@]}" $R/job true
  check "...says so, in one line" no_tls zklock
  expect_status 64 "zklock-ls: the same" "$ZKLS" "${tls[@]}" $R/job
  check "...says so, in one line" no_tls zklock-ls
  expect_status 64 "zklock-bench: the same" "$ZKBENCH" "${tls[@]}" "$ZKLOCK_TEST_HOSTS" uncontended 1
  check "...says so, in one line" no_tls zklock-bench
  expect_status 64 "TLS: not all three files" "$ZKLOCK" --tls-ca "$T/ca.pem" $R/job true
  check "...said" grep -q -- "--tls-ca, --tls-cert and --tls-key go together" "$T/err"
  # expected in CI (scripts/test.sh): Debian's client is built without OpenSSL
  skip "TLS connections: this build's ZooKeeper client has no TLS, so none can be tried"
fi

# ---- --help ---------------------------------------------------------------------------------------------
for tool in "$ZKLOCK" "$ZKLS" "$ZKBENCH"; do
  "$tool" --help >"$T/help"
  for opt in --auth-file --tls-ca --tls-cert --tls-key --tls-key-password-file; do
    check "$(basename "$tool") --help: $opt" grep -q -- "$opt" "$T/help"
  done
  if [ "$tool" = "$ZKLS" ]; then
    check "zklock-ls --help: no --acl (it creates nothing)" sh -c "! grep -q -- --acl '$T/help'"
  else
    check "$(basename "$tool") --help: --acl, --acl-file" grep -q -- "--acl-file" "$T/help"
  fi
done

# ---- output that node data cannot forge --------------------------------------------------------------
# Text that is valid UTF-8 with no control character (but newlines ending
# lines), no C1 control and no bidirectional formatting character.
clean_text() { # FILE
  "$PY" - "$1" <<'EOF'
import re, sys
data = open(sys.argv[1], "rb").read()
text = data.decode("utf-8")  # raises on anything that is not UTF-8
bad = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
sys.exit(1 if bad.search(text) else 0)
EOF
}
rm -f "$T/hostile-ready"
admin_bg hostile $H/q "$T/hostile-ready"; hp=$!
check "hostile lock nodes made" wait_for 30 started "$T/hostile-ready"
nodes=$(cat "$T/hostile-ready")
expect_status 0 "zklock-ls on hostile nodes" "$ZKLS" $H/q
rows() { grep -cE '^  [0-9]+ +(holds|waits) ' "$T/out"; }
check "...one row per node ($nodes)" [ "$(rows)" = "$nodes" ]
check "...and nothing else: the header and the column names" [ "$(wc -l <"$T/out")" = $((nodes + 2)) ]
check "...no raw control byte, C1 or bidi control, nothing but UTF-8" clean_text "$T/out"
check "...a newline shown escaped, in its row" grep -qF 'line one\x0aline two\x0a' "$T/out"
check "...an escape sequence shown escaped" grep -qF '\x1b[31mred\x1b[0m \x1b]0;title\x07' "$T/out"
check "...bytes that are not UTF-8 as \\xNN" grep -qF '\xff\xfe invalid \xc3( utf-8 \xed\xa0\x80' "$T/out"
check "...C1 and bidi controls as \\uXXXX" grep -qF '\u009b31m c1-csi \u202e reversed' "$T/out"
check "...a backslash doubled, so that no escape is forged" grep -qF 'here\x7fdel\\x41 backslash' "$T/out"
check "...an identity up to its first NUL byte" grep -q ' before-nul$' "$T/out"
check "...a long identity cut at 80 characters, marked" \
  grep -qE '^  8 .* x{77}\.\.\.$' "$T/out"
check "...and so every row is short" [ "$(awk '{ if (length($0) > max) max = length($0) } END { print max }' "$T/out")" -lt 200 ]
expect_status 0 "zklock-ls --json on hostile nodes" "$ZKLS" --json $H/q
check "...one line" [ "$(wc -l <"$T/out")" = 1 ]
check "...that python's json.tool accepts" "$PY" -m json.tool "$T/out" /dev/null
check "...in printable ASCII only" sh -c "! LC_ALL=C grep -q '[^ -~]' '$T/out'"
check "...with the identities as they were (a NUL ends one; U+FFFD for what is not UTF-8)" "$PY" - "$T/out" <<'EOF'
import json, sys
ids = [n["identity"] for n in json.load(open(sys.argv[1]))["nodes"]]
assert ids[0] == "line one\nline two\n  9    holds  mutex      0000000099  1.0s    1            forged", ids[0]
assert ids[1] == "\x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b[2J\x1b[H", ids[1]
assert ids[3] == "before-nul", ids[3]
assert ids[4] == "\ufffd\ufffd invalid \ufffd( utf-8 \ufffd\ufffd\ufffd", ids[4]
assert ids[5] == "\x9b31m c1-csi \u202e reversed", ids[5]
assert ids[6] == "tab\there\x7fdel\\x41 backslash", ids[6]
assert ids[7] == "x" * (1000 * 1024), len(ids[7])
EOF
expect_status 0 "zklock-ls -R --json below hostile nodes" "$ZKLS" -R --json $H
check "...every line valid JSON" sh -c "while read -r l; do printf '%s' \"\$l\" | '$PY' -m json.tool >/dev/null || exit 1; done <'$T/out'"

# zklock -v names the holder: its identity escaped too.
rm -f "$T/holder-ready"
admin_bg holder $H/v '\x1b]0;owned\x07line\nforged row\xff' "$T/holder-ready"; hv=$!
check "a holder with hostile data" wait_for 30 started "$T/holder-ready"
expect_status 1 "zklock -v on a lock with a hostile holder" "$ZKLOCK" -v -t 0 $H/v true
check "...two lines: connecting, and who holds it" lines_of zklock 2
check "...escaped" grep -qF 'is locked by \x1b]0;owned\x07line\x0aforged row\xff (mutex' "$T/err"
check "...no raw control byte" clean_text "$T/err"
expect_status 1 "zklock -v waiting behind it" "$ZKLOCK" -v -t 1 $H/v true
check "...escaped in the waiting line too" grep -qF 'held by \x1b]0;owned\x07line\x0aforged row\xff (mutex' "$T/err"
check "...no raw control byte" clean_text "$T/err"
kill -TERM $hp $hv; wait $hp $hv

# ---- nothing left behind --------------------------------------------------------------------------------
for p in nobody job held deploy mine mine/sub private open invalid bench; do
  check "no lock node left under $R/$p" wait_for 10 queued $R/$p 0
done
check "no hostile node left" wait_for 10 queued $H/q 0
done_testing
