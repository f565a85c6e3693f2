#!/bin/bash
# zk-harness.sh: throwaway ZooKeeper servers on loopback for tests and demos.
#
#   zk-harness.sh run [-n SERVERS] [--seed SEED] [--] COMMAND [ARG...]
#       Starts a standalone server (or an ensemble of SERVERS) in a temp dir,
#       runs COMMAND with ZKLOCK_TEST_HOSTS (the connect string),
#       ZKLOCK_TEST_ZKDIR (the harness dir) and ZKLOCK_TEST_HARNESS (this
#       script) in its environment, stops the servers and exits with
#       COMMAND's status.
#   zk-harness.sh start DIR [SERVERS [SEED]]   start servers under DIR (created); prints hosts
#   zk-harness.sh stop DIR              stop every server under DIR and remove DIR
#   zk-harness.sh kill DIR I            SIGKILL server I (1-based)
#   zk-harness.sh pause DIR I           SIGSTOP server I
#   zk-harness.sh resume DIR I          SIGCONT server I
#   zk-harness.sh restart DIR I         start server I again and wait until it serves
#   zk-harness.sh pid DIR I             print server I's pid
#   zk-harness.sh hosts DIR             print the connect string
#   zk-harness.sh ruok HOST:PORT        exit 0 if the server answers imok
#   zk-harness.sh fourlw HOST:PORT CMD  print a four-letter word's answer
#
# Needs Java and Debian's zookeeper package (the server jar). The servers
# use tickTime=500 so that short session timeouts (>= 1 s) and elections are
# quick, and check empty containers every second. The digest credential
# "super:zklock-test" is the servers' superuser (ZKLOCK_TEST_SUPER), so that
# tests can set up ACLs they themselves are then refused by.
#
# SEED ("PATH=COUNT PATH=COUNT ...") starts every server from a snapshot in
# which each PATH exists, persistent and empty, with COUNT child creations
# behind it: its next sequential child is numbered COUNT (test/SeedSnapshot.java;
# needs javac). The sequence-wrap tests start their lock paths near 2^31 so.
set -u

self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
ZK_CP=${ZK_CP:-/etc/zookeeper/conf_example:/usr/share/java/zookeeper.jar}
JAVA=${JAVA:-java}
START_TIMEOUT=${ZKLOCK_HARNESS_START_TIMEOUT:-60}
# base64(sha1("super:zklock-test")), as ZooKeeper's DigestAuthenticationProvider has it
SUPER_DIGEST=J6nKLfljqCPcjZk00Z/MiFFTUAk=

die() { echo "zk-harness: $*" >&2; exit 1; }

need_java() {
  command -v "$JAVA" >/dev/null 2>&1 || die "java not found (apt-get install default-jre-headless)"
  [ -f /usr/share/java/zookeeper.jar ] || die "ZooKeeper server jar not found (apt-get install zookeeper)"
}

# A four-letter word over bash's /dev/tcp: no nc or python needed.
fourlw() { # host:port word
  local host=${1%:*} port=${1##*:}
  (exec 3<>"/dev/tcp/$host/$port" && printf '%s' "$2" >&3 && timeout 2 cat <&3) 2>/dev/null
}

ruok() { [ "$(fourlw "$1" ruok)" = imok ]; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pick_port() {
  local p
  for _ in $(seq 200); do
    p=$(( (RANDOM << 1 | RANDOM & 1) % 30000 + 20000 ))
    port_free "$p" && port_free $((p + 1)) && port_free $((p + 2)) && { echo "$p"; return; }
  done
  die "no free port"
}

server_cfg() { # dir i n base
  local dir=$1 i=$2 n=$3 base=$4
  mkdir -p "$dir/s$i/data"
  {
    echo "tickTime=500"
    echo "initLimit=20"
    echo "syncLimit=10"
    echo "dataDir=$dir/s$i/data"
    echo "clientPort=$((base + 3 * (i - 1)))"
    echo "clientPortAddress=127.0.0.1"
    echo "minSessionTimeout=1000"
    echo "maxSessionTimeout=60000"
    echo "maxClientCnxns=0"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=*"
    echo "forceSync=no"
    if [ "$n" -gt 1 ]; then
      echo "electionPortBindRetry=0"
      for j in $(seq "$n"); do
        echo "server.$j=127.0.0.1:$((base + 3 * (j - 1) + 1)):$((base + 3 * (j - 1) + 2))"
      done
      echo "$i" >"$dir/s$i/data/myid"
    fi
  } >"$dir/s$i/zoo.cfg"
}

launch() { # dir i
  local dir=$1 i=$2 main=org.apache.zookeeper.server.ZooKeeperServerMain
  [ "$(cat "$dir/n")" -gt 1 ] && main=org.apache.zookeeper.server.quorum.QuorumPeerMain
  # setsid: the server survives nothing but us; stop/kill find it by pid.
  setsid "$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dznode.container.checkIntervalMs=1000 -Dzookeeper.admin.enableServer=false \
    -Dzookeeper.DigestAuthenticationProvider.superDigest=super:$SUPER_DIGEST \
    -cp "$ZK_CP" "$main" "$dir/s$i/zoo.cfg" >>"$dir/s$i/server.log" 2>&1 </dev/null &
  echo $! >"$dir/s$i/pid"
}

# Writes the snapshot SEED asks for into server i's data dir (compiled once per DIR).
seed_data() { # dir i seed
  local dir=$1 i=$2 src; src=$(dirname "$self")/SeedSnapshot.java
  [ -z "$3" ] && return 0
  command -v javac >/dev/null 2>&1 || die "--seed needs javac (apt-get install default-jdk-headless)"
  if [ ! -f "$dir/seed/SeedSnapshot.class" ]; then
    mkdir -p "$dir/seed" && javac -nowarn -cp "$ZK_CP" -d "$dir/seed" "$src" ||
      die "cannot compile $src"
  fi
  # shellcheck disable=SC2086 # SEED is a list of words
  "$JAVA" -cp "$ZK_CP:$dir/seed" SeedSnapshot "$dir/s$i/data" $3 >>"$dir/s$i/seed.log" 2>&1 ||
    { cat "$dir/s$i/seed.log" >&2; die "cannot seed server $i with: $3"; }
}

addr() { echo "127.0.0.1:$(sed -n 's/^clientPort=//p' "$1/s$2/zoo.cfg")"; }

wait_serving() { # dir i
  local a; a=$(addr "$1" "$2")
  for _ in $(seq $((START_TIMEOUT * 10))); do
    # An ensemble member answers imok before it has a quorum; srvr says
    # "Mode:" only once it serves.
    if [ "$(cat "$1/n")" -gt 1 ]; then
      fourlw "$a" srvr | grep -q '^Mode:' && return 0
    else
      ruok "$a" && return 0
    fi
    kill -0 "$(cat "$1/s$2/pid")" 2>/dev/null || break
    sleep 0.1 # polling the server's readiness with a deadline
  done
  echo "zk-harness: server $2 did not start; its log:" >&2
  tail -n 30 "$1/s$2/server.log" >&2
  return 1
}

# Starts the n servers under dir on ports from base; fails if one does not serve.
start_on() { # dir n seed base
  local dir=$1 n=$2 seed=$3 base=$4 i status
  rm -rf "$dir"/s[0-9]*
  # every data dir is seeded before any server starts: a failure leaves none running
  for i in $(seq "$n"); do server_cfg "$dir" "$i" "$n" "$base"; seed_data "$dir" "$i" "$seed"; done
  for i in $(seq "$n"); do launch "$dir" "$i"; done
  for i in $(seq "$n"); do
    wait_serving "$dir" "$i" && continue
    # exit status 2: the server exited (a port it could not bind, say)
    kill -0 "$(cat "$dir/s$i/pid")" 2>/dev/null && status=1 || status=2
    cmd_stop "$dir" keep; return "$status"
  done
}

cmd_start() { # dir [n [seed]]
  local dir=$1 n=${2:-1} seed=${3:-} hosts="" i attempt rc
  need_java
  mkdir -p "$dir" || die "cannot create $dir"
  echo "$n" >"$dir/n"
  # A port seen free may be taken before the server binds it (by another
  # suite's harness starting at the same moment; the server exits, and its
  # log says nothing: no logger is configured): then try other ports.
  for attempt in 1 2 3; do
    rc=0; start_on "$dir" "$n" "$seed" "$(pick_port)" 2>"$dir/start.err" || rc=$?
    [ $rc -eq 0 ] && break
    [ $rc -eq 2 ] && [ "$attempt" -lt 3 ] && continue
    cat "$dir/start.err" >&2; return 1
  done
  for i in $(seq "$n"); do hosts="$hosts${hosts:+,}$(addr "$dir" "$i")"; done
  echo "$hosts" >"$dir/hosts"
  echo "$hosts"
}

cmd_stop() { # dir [keep]
  local dir=$1 f pid
  for f in "$dir"/s*/pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null
  done
  [ "${2:-}" = keep ] || rm -rf "$dir"
}

cmd_run() {
  local n=1 seed="" status hosts
  while [ $# -gt 0 ]; do
    case $1 in
      -n) n=$2; shift 2 ;;
      --seed) seed=$2; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ $# -gt 0 ] || die "run: no command"
  run_dir=$(mktemp -d "${TMPDIR:-/tmp}/zklock-zk.XXXXXX") || die "mktemp failed"
  trap 'cmd_stop "$run_dir"' EXIT
  trap 'exit 130' INT TERM
  hosts=$(cmd_start "$run_dir" "$n" "$seed") || exit 99 # a hard error for the automake harness
  ZKLOCK_TEST_HOSTS=$hosts ZKLOCK_TEST_ZKDIR=$run_dir ZKLOCK_TEST_HARNESS=$self \
    ZKLOCK_TEST_SUPER=super:zklock-test "$@"
  status=$?
  # with $ZKLOCK_HARNESS_LOGS set, a failure (not a skip, 77) shows the
  # servers' last log lines (scripts/test.sh sets it: CI keeps nothing else)
  [ $status -ne 0 ] && [ $status -ne 77 ] && [ -n "${ZKLOCK_HARNESS_LOGS:-}" ] &&
    tail -n 50 "$run_dir"/s*/server.log >&2
  return $status
}

sub=${1:-}; shift || true
case $sub in
  run) cmd_run "$@"; exit $? ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop "$1" ;;
  kill) kill -KILL "$(cat "$1/s$2/pid")" ;;
  pause) kill -STOP "$(cat "$1/s$2/pid")" ;;
  resume) kill -CONT "$(cat "$1/s$2/pid")" ;;
  restart) # a killed server's ports can take a moment to be free again
    need_java
    for attempt in 1 2 3; do
      launch "$1" "$2"
      wait_serving "$1" "$2" 2>"$1/restart.err" && exit 0
      kill -KILL "$(cat "$1/s$2/pid")" 2>/dev/null
    done
    cat "$1/restart.err" >&2; exit 1 ;;
  pid) cat "$1/s$2/pid" ;;
  hosts) cat "$1/hosts" ;;
  ruok) ruok "$1" ;;
  fourlw) fourlw "$1" "$2" ;;
  *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
