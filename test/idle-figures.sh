#!/bin/bash
# idle-figures.sh: what an idle holder costs the ensemble, zklock beside
# Curator and kazoo, in one run, for docs/performance.md.
#   test/idle-figures.sh BUILD_DIR [HOLDERS] [SECONDS] [LOCKS] [HOSTS]
# For each session timeout of $SESSIONS (ms; default "4000 30000"):
#   zklock-bench idle HOLDERS SECONDS      HOLDERS sessions, a lock each, idle
#   zklock-bench idle-many LOCKS SECONDS   one session holding LOCKS locks, idle
#     (both for each lease of $LEASES: default "strict session", the
#     second with --lease session, ZKLOCK_LEASE_SESSION, no heartbeats)
#   the Curator and kazoo peers' "idle HOLDERS SECONDS"
# and prints one table: the transactions the ensemble committed in the
# window (from its zxid, 4-letter word srvr), per second and per session
# timeout per holding session.
#
# Without HOSTS, a throwaway ZooKeeper is started as ../shared/peers/compare.sh
# starts its own (tickTime=2000, forceSync=no, data in /dev/shm; sessions of
# 4-40 s), and it sweeps empty containers every second: the lock paths one
# run leaves are deleted before the next run's window. With HOSTS, the
# ensemble must serve nobody else (every transaction in the window counts).
# Before each run the script waits until the ensemble commits nothing for
# 3 s (90 s at most, else it says so).
#
# The peers are the comparison harness's, beside the project in
# ../shared/peers ($ZKLOCK_PEERS elsewhere): the project does not depend on
# them; without them only zklock's rows are printed. Their benchmarks take
# no session timeout: Curator's is set through its system property
# curator-default-session-timeout (JAVA_TOOL_OPTIONS), kazoo's by giving
# KazooClient the timeout as its default. The table shows the timeout each
# server granted (4-letter word cons, read while the run holds).
# Needs: java, Debian's zookeeper (and, for the peers, libcurator-recipes-java,
# python3-kazoo for /usr/bin/python3).
set -eu
B=$(realpath "${1:?usage: idle-figures.sh BUILD_DIR [HOLDERS] [SECONDS] [LOCKS] [HOSTS]}")
HOLDERS=${2:-10}; SECS=${3:-20}; LOCKS=${4:-200}; hosts=${5:-}
SESSIONS=${SESSIONS:-"4000 30000"}
LEASES=${LEASES:-"strict session"}
here=$(cd "$(dirname "$0")" && pwd)
peers=${ZKLOCK_PEERS:-$here/../../shared/peers}
BENCH=$B/tools/zklock-bench
[ -x "$BENCH" ] || { echo "idle-figures.sh: no $BENCH (build first)" >&2; exit 64; }
work=$(mktemp -d); zkpid=""
cleanup() {
  if [ -n "$zkpid" ]; then kill "$zkpid" 2>/dev/null; wait "$zkpid" 2>/dev/null || true; fi
  rm -rf "$work" "/dev/shm/zkidle-$$"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A 4-letter word's answer (5 s at most), or nothing.
fourlw() { # host:port word
  python3 - "$1" "$2" <<'PY' 2>/dev/null || true
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
with socket.create_connection((host.strip("[]"), int(port)), timeout=5) as c:
    c.sendall(sys.argv[2].encode())
    out = b""
    while True:
        b = c.recv(4096)
        if not b:
            break
        out += b
sys.stdout.write(out.decode(errors="replace"))
PY
}
servers() { echo "${hosts%%/*}" | tr ',' '\n'; }
zxid() { # the leader's, or the highest
  local s out best=""
  for s in $(servers); do
    out=$(fourlw "$s" srvr)
    grep -q '^Mode: leader' <<<"$out" && { sed -n 's/^Zxid: //p' <<<"$out"; return; }
    best="$best $(sed -n 's/^Zxid: //p' <<<"$out")"
  done
  python3 -c 'import sys; v=[int(x, 16) for x in sys.argv[1:]]; print(hex(max(v)) if v else "")' $best
}
wait_quiet() { # until the zxid stays put for 3 s; 90 s at most
  local last now since=$SECONDS start=$SECONDS
  last=$(zxid)
  while [ $((SECONDS - start)) -lt 90 ]; do
    sleep 0.5 # polling the server's zxid, with the deadline above
    now=$(zxid)
    if [ "$now" != "$last" ]; then last=$now; since=$SECONDS; fi
    [ -n "$now" ] && [ $((SECONDS - since)) -ge 3 ] && return 0
  done
  echo "idle-figures.sh: the ensemble did not stop committing for 3 s: the next figures may count others' writes" >&2
}

if [ -z "$hosts" ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "/dev/shm/zkidle-$$"
  printf 'tickTime=2000\ndataDir=/dev/shm/zkidle-%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxClientCnxns=0\nforceSync=no\n4lw.commands.whitelist=*\n' $$ "$port" >"$work/zoo.cfg"
  java -Xmx512m -Dznode.container.checkIntervalMs=1000 -cp /etc/zookeeper/conf_example:/usr/share/java/zookeeper.jar \
    org.apache.zookeeper.server.ZooKeeperServerMain "$work/zoo.cfg" >"$work/zk.log" 2>&1 &
  zkpid=$!
  hosts=127.0.0.1:$port
  for _ in $(seq 300); do [ "$(fourlw "$hosts" ruok)" = imok ] && break; sleep 0.2; done # 60 s at most
  [ "$(fourlw "$hosts" ruok)" = imok ] || { echo "idle-figures.sh: ZooKeeper did not start:" >&2; tail -n 20 "$work/zk.log" >&2; exit 69; }
fi
[ -n "$(zxid)" ] || { echo "idle-figures.sh: no server of $hosts answers srvr with a Zxid" >&2; exit 69; }

have_curator=false; have_kazoo=false
[ -f "$peers/curator_bench.sh" ] && [ -f /usr/share/java/curator-recipes.jar ] && have_curator=true
[ -f "$peers/kazoo_bench.py" ] && /usr/bin/python3 -c 'import kazoo' 2>/dev/null && have_kazoo=true

# Runs one benchmark (system, session ms, its command...) and appends its
# JSON line, with the system and the session timeouts the server granted
# while it ran, to $work/results.
run() {
  local sys=$1 ms=$2 out=$work/out cons=$work/cons pid; shift 2
  wait_quiet
  "$@" >"$out" 2>"$work/err" & pid=$!
  : >"$cons"
  while kill -0 "$pid" 2>/dev/null; do
    for s in $(servers); do fourlw "$s" cons; done >>"$cons"
    sleep 1 # sampling the connections while it runs; ends with it
  done
  if ! wait "$pid"; then
    echo "idle-figures.sh: $sys failed:" >&2; tail -n 5 "$work/err" >&2; return 1
  fi
  grep '^{' "$out" | tail -n 1 | python3 -c '
import json, re, sys
r = json.loads(sys.stdin.read())
granted = sorted({int(t) for t in re.findall(r"to=(\d+)", open(sys.argv[3]).read())})
r.update(system=sys.argv[1], asked_ms=int(sys.argv[2]), granted_ms=granted)
print(json.dumps(r))' "$sys" "$ms" "$cons" >>"$work/results"
}
curator() { # ms args...
  local ms=$1; shift
  JAVA_TOOL_OPTIONS="-Dcurator-default-session-timeout=$ms" "$peers/curator_bench.sh" "$hosts" "$@"
}
kazoo() { # ms args...
  local ms=$1; shift
  /usr/bin/python3 -c '
import runpy, sys
import kazoo.client
timeout = float(sys.argv[1]) / 1000
plain_init = kazoo.client.KazooClient.__init__
def init(self, *a, **kw):
    kw.setdefault("timeout", timeout)
    plain_init(self, *a, **kw)
kazoo.client.KazooClient.__init__ = init
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")' "$ms" "$peers/kazoo_bench.py" "$hosts" "$@"
}

: >"$work/results"
for ms in $SESSIONS; do
  for lease in $LEASES; do
    sys=zklock; [ "$lease" = strict ] || sys="zklock --lease $lease"
    run "$sys" "$ms" "$BENCH" --lease "$lease" --session-timeout "$ms" "$hosts" idle "$HOLDERS" "$SECS"
    run "$sys" "$ms" "$BENCH" --lease "$lease" --session-timeout "$ms" "$hosts" idle-many "$LOCKS" "$SECS"
  done
  $have_curator && run curator "$ms" curator "$ms" idle "$HOLDERS" "$SECS"
  $have_kazoo && run kazoo "$ms" kazoo "$ms" idle "$HOLDERS" "$SECS"
done

python3 - "$work/results" "$hosts" "$have_curator" "$have_kazoo" "$peers" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"server {sys.argv[2]}, one run; txns: what the ensemble committed in the window "
      "(its zxid, before and after)")
if sys.argv[3] != "true" or sys.argv[4] != "true":
    print(f"(peers missing from {sys.argv[5]}: only the systems shown ran)")
print("(its own requests: what zklock's sessions sent in the window, by its own count; the peers "
      "do not count theirs)")
print("\n| system | holding | session timeout asked / granted | seconds | txns | its own requests "
      "| txn/s per holder | txn per session timeout per holder |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    holding = (f"{r['holders']} sessions, a lock each" if r["workload"] == "idle"
               else f"1 session, {r['locks_per_holder']} locks")
    granted = ", ".join(f"{g} ms" for g in r["granted_ms"]) or "?"
    # per the timeout the server granted (zklock-bench says it; else one seen by cons)
    timeout = r.get("session_timeout_ms") or (
        r["granted_ms"][0] if len(r["granted_ms"]) == 1 else r["asked_ms"])
    per_timeout = r["txn_per_s_per_holder"] * timeout / 1000
    print(f"| {r['system']} | {holding} | {r['asked_ms']} ms / {granted} | {r['seconds']:.0f} "
          f"| {r['txns']} | {r.get('requests', '-')} | {r['txn_per_s_per_holder']:.4f} "
          f"| {per_timeout:.2f} |")
PY
