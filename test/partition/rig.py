#!/usr/bin/env python3
"""Partition rig for zklock (make check-partition; issue #15). Needs root.

A 3-server ZooKeeper ensemble and 4 lock clients (test/soak_client, two
sessions each), every one in a network namespace of its own, joined by veth
pairs to a bridge that lives in a namespace of the rig, on 198.18.15.0/24
(RFC 2544's range for testing network devices), which exists only there:
no namespace of the rig has a route elsewhere and the machine's own
namespace has no interface in it. Faults, all silent (nothing is refused or
reset, packets just vanish):
  - a bridge port set to disabled: a host cut off from everything;
  - nftables rules in the bridge's namespace: a host cut off from some hosts
    only (a partition), or `numgen random` dropping a share of all frames;
  - test/partition/zkproxy-run in each client's namespace: 100-300 ms of
    delay with jitter on the client's links (the kernel has no netem);
  - SIGSTOP of a client process.
Scenarios, each with its own clients on a mutex and a read/write lock,
writing through the fenced storage of test/soak.py: see SCENARIOS below.
Session timeout 4 s. Every scenario runs with the strict lease (the
default); those where the two lease modes differ (--session-lease, by
default 1-cut and 3-leader-minority: a holder cut off past the session
timeout) run once more with ZKLOCK_LEASE_SESSION, as "NAME/session": there
a holder cut off may be told after the next holder starts (the documented
window), and fencing must refuse its stale writes. test/partition/check.py
proves the properties from the history and this prints a table. Everything
the rig made is torn down at the end, also on failure or interrupt. Exit: 0 all held, 1 a violation,
77 (SKIP) where network namespaces cannot be made.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree (read-only under distcheck)
import soak  # noqa: E402  (the fenced storage)
import check  # noqa: E402

SUBNET = "198.18.15"
SERVERS, CLIENTS, THREADS = 3, 4, 2
LOCKS, RW_LOCKS = 2, 1           # lock 0 a mutex, lock 1 a read/write lock
SESSION_MS = 4000
HOLD, LONG = "300:1500", "20:5000:10000"  # holds of 0.3-1.5 s, 20 % of 5-10 s; a write every 50 ms
ZK_PORT, PROXY_PORT = 2181, 12180
ZK_CP = os.environ.get("ZK_CP", "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:"
                                "/usr/share/java/log4j-1.2.jar")
NS = 1_000_000_000


def mono():
    return time.monotonic_ns()


def server_ip(i):
    return f"{SUBNET}.{10 + i}"


def client_ip(i):
    return f"{SUBNET}.{20 + i}"


def run(*argv, check_rc=True, inp=None):
    r = subprocess.run(argv, capture_output=True, text=True, input=inp)
    if check_rc and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r


class Skip(Exception):
    pass


# ---- the network --------------------------------------------------------------------------

class Net:
    """Namespaces <tag>-br (the bridge), <tag>-s1..3 and <tag>-c1..4. The bridge's
    port for host h is named h in the bridge's namespace."""

    def __init__(self, tag):
        self.tag = tag
        self.br = f"{tag}-br"
        self.hosts = {f"s{i}": server_ip(i) for i in range(1, SERVERS + 1)}
        self.hosts.update({f"c{i}": client_ip(i) for i in range(1, CLIENTS + 1)})
        self.made = []
        self.blocked = set()   # frozensets of two ports that cannot reach each other
        self.loss_pct = 0

    def ns(self, host):
        return f"{self.tag}-{host}"

    def exec(self, host, argv):
        return ["ip", "netns", "exec", self.ns(host), *argv]

    def add_ns(self, name):
        run("ip", "netns", "add", name)
        self.made.append(name)
        run("ip", "-n", name, "link", "set", "lo", "up")

    def setup(self):
        self.add_ns(self.br)
        run("ip", "-n", self.br, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.br, "link", "set", "br0", "up")
        for host, ip in self.hosts.items():
            ns = self.ns(host)
            self.add_ns(ns)
            run("ip", "link", "add", "veth0", "netns", ns, "type", "veth", "peer", "name", host,
                "netns", self.br)
            run("ip", "-n", self.br, "link", "set", host, "master", "br0", "up")
            run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "veth0")
            run("ip", "-n", ns, "link", "set", "veth0", "up")
        run("ip", "netns", "exec", self.br, "nft", "-f", "-",
            inp="table bridge rig {\n  counter lost {\n  }\n  chain faults {\n"
                "    type filter hook forward priority 0; policy accept;\n  }\n}\n")
        self.apply()

    def verify_isolated(self):
        """No route out of any namespace of the rig; nothing of the subnet outside it."""
        for name in self.made:
            routes = run("ip", "-n", name, "-4", "route", "show").stdout.split("\n")
            for r in routes:
                if r.strip() and not r.startswith(f"{SUBNET}.0/24 "):
                    raise RuntimeError(f"namespace {name} has a route out of the rig: {r}")
        mine = run("ip", "-o", "-4", "addr", "show").stdout
        if f" {SUBNET}." in mine:
            raise RuntimeError(f"the machine's own namespace has an address in {SUBNET}.0/24")

    def teardown(self):
        for name in reversed(self.made):
            pids = run("ip", "netns", "pids", name, check_rc=False).stdout.split()
            for pid in pids:  # what we started there and did not end already
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        for name in reversed(self.made):
            for _ in range(50):
                if run("ip", "netns", "del", name, check_rc=False).returncode == 0:
                    break
                time.sleep(0.1)
        self.made = []

    # faults
    def port(self, host, up):
        """A bridge port disabled: the host is a silent black hole."""
        run("bridge", "-n", self.br, "link", "set", "dev", host, "state", "3" if up else "0")

    def apply(self):
        """The nftables chain of the bridge: partitions, then loss, in one transaction."""
        rules = [f"flush chain bridge rig faults"]
        for pair in sorted(tuple(sorted(p)) for p in self.blocked):
            a, b = pair
            rules.append(f'add rule bridge rig faults iifname "{a}" oifname "{b}" drop')
            rules.append(f'add rule bridge rig faults iifname "{b}" oifname "{a}" drop')
        if self.loss_pct:
            rules.append(f'add rule bridge rig faults numgen random mod 1000 < {self.loss_pct * 10} '
                         f'counter name "lost" drop')
        run("ip", "netns", "exec", self.br, "nft", "-f", "-", inp="\n".join(rules) + "\n")

    def block(self, group_a, group_b):
        for a in group_a:
            for b in group_b:
                self.blocked.add(frozenset((a, b)))
        self.apply()

    def unblock_all(self):
        self.blocked.clear()
        self.apply()

    def loss(self, pct):
        self.loss_pct = pct
        self.apply()

    def lost_packets(self):
        out = run("ip", "netns", "exec", self.br, "nft", "list", "counter", "bridge", "rig", "lost").stdout
        m = re.search(r"packets (\d+)", out)
        return int(m.group(1)) if m else 0


def probe(tag):
    """Can network namespaces, veth pairs, bridges and nftables be made here?"""
    if os.geteuid() != 0:
        raise Skip("not root")
    for tool in ("ip", "bridge", "nft", "java"):
        if not shutil.which(tool):
            raise Skip(f"{tool} not found")
    net = Net(tag)
    try:
        net.add_ns(net.br)
        run("ip", "-n", net.br, "link", "add", "br0", "type", "bridge")
        net.add_ns(net.ns("p"))
        run("ip", "link", "add", "veth0", "netns", net.ns("p"), "type", "veth", "peer", "name", "p",
            "netns", net.br)
        run("ip", "-n", net.br, "link", "set", "p", "master", "br0")
        run("ip", "netns", "exec", net.br, "nft", "add", "table", "bridge", "probe")
    except RuntimeError as e:
        raise Skip(f"cannot make the rig's network: {e}")
    finally:
        net.teardown()


# ---- the ensemble -------------------------------------------------------------------------

class Ensemble:
    def __init__(self, net, dirname):
        self.net, self.dir = net, dirname
        self.procs = {}

    def cfg(self, i):
        d = os.path.join(self.dir, f"s{i}")
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        with open(os.path.join(d, "data", "myid"), "w") as f:
            f.write(f"{i}\n")
        lines = ["tickTime=500", "initLimit=10", "syncLimit=5", f"dataDir={d}/data",
                 f"clientPort={ZK_PORT}", f"clientPortAddress={server_ip(i)}",
                 "minSessionTimeout=1000", "maxSessionTimeout=60000", "maxClientCnxns=0",
                 "admin.enableServer=false", "4lw.commands.whitelist=*", "forceSync=no",
                 "electionPortBindRetry=0"]
        lines += [f"server.{j}={server_ip(j)}:2888:3888" for j in range(1, SERVERS + 1)]
        with open(os.path.join(d, "zoo.cfg"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(d, "log4j.properties"), "w") as f:
            f.write("log4j.rootLogger=INFO, CONSOLE\n"
                    "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
                    "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
                    "log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] - %m%n\n")
        return d

    def start(self):
        for i in range(1, SERVERS + 1):
            d = self.cfg(i)
            log = open(os.path.join(d, "server.log"), "ab")
            self.procs[i] = subprocess.Popen(self.net.exec(f"s{i}", [
                "java", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Duser.timezone=UTC", f"-Dlog4j.configuration=file:{d}/log4j.properties",
                "-Dznode.container.checkIntervalMs=1000", "-Dzookeeper.admin.enableServer=false",
                "-cp", ZK_CP, "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                f"{d}/zoo.cfg"]), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
            log.close()

    def fourlw(self, i, word):
        """Asked from the server's own namespace: no fault of the rig is in the way."""
        r = run(*self.net.exec(f"s{i}", ["bash", "-c", f'exec 3<>/dev/tcp/{server_ip(i)}/{ZK_PORT} && '
                                         f'printf {word} >&3 && timeout 2 cat <&3']), check_rc=False)
        return r.stdout

    def mode(self, i):
        m = re.search(r"^Mode: (\w+)", self.fourlw(i, "srvr"), re.M)
        return m.group(1) if m else None

    def wait_serving(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            modes = [self.mode(i) for i in range(1, SERVERS + 1)]
            if all(modes) and modes.count("leader") == 1:
                return modes.index("leader") + 1
            for i, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"server {i} exited; its log: {self.dir}/s{i}/server.log")
            time.sleep(0.2)
        raise RuntimeError(f"the ensemble did not serve within {timeout} s (modes {modes})")

    def wall_to_mono(self, stamp, offset_s):
        wall = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc).timestamp()
        return int((wall - offset_s) * NS)

    def leader_change(self, t0, t1, offset_s):
        """Between t0 and t1: when the deposed leader gave up (it serves until it
        sees it lost its quorum) and when the new leader began to serve (it
        restarts every session's timeout then). (deposed, new) in CLOCK_MONOTONIC
        ns, either None if the logs do not show it."""
        deposed = new = None
        pat = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*(Not sufficient followers synced|"
                         r"Peer state changed: leading - broadcast)")
        for i in range(1, SERVERS + 1):
            with open(os.path.join(self.dir, f"s{i}", "server.log"), errors="replace") as f:
                for line in f:
                    m = pat.match(line)
                    if not m:
                        continue
                    t = self.wall_to_mono(m.group(1), offset_s)
                    if t0 <= t <= t1:
                        if m.group(2).startswith("Not"):
                            deposed = deposed or t
                        else:
                            new = new or t
        return deposed, new

    def expiries(self, offset_s):
        """(CLOCK_MONOTONIC ns, session id) of every session expiry the servers logged."""
        out = []
        pat = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*Expiring session 0x([0-9a-f]+),")
        for i in range(1, SERVERS + 1):
            with open(os.path.join(self.dir, f"s{i}", "server.log"), errors="replace") as f:
                for line in f:
                    m = pat.match(line)
                    if m:
                        out.append((self.wall_to_mono(m.group(1), offset_s), int(m.group(2), 16)))
        return out

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


# ---- the clients' logs, followed as they grow ---------------------------------------------

class Follow:
    def __init__(self, dirname):
        self.dir = dirname
        self.offsets = defaultdict(int)
        self.holding = {}            # (client, thread) -> (acq ns, lock, kind, planned end ns)
        self.acqs = []               # (ns, client, thread, lock)
        self.conn = {}               # (client, thread) -> (session id, state, server)

    def poll(self):
        for name in os.listdir(self.dir):
            if not name.endswith(".log"):
                continue
            path = os.path.join(self.dir, name)
            with open(path, "rb") as f:
                f.seek(self.offsets[path])
                data = f.read()
            cut = data.rfind(b"\n") + 1
            self.offsets[path] += cut
            for line in data[:cut].decode(errors="replace").splitlines():
                p = line.split()
                if len(p) != 8:
                    continue
                ns, client, thread, event = int(p[0]), p[1], p[2], p[3]
                key = (client, thread)
                if event == "ACQ":
                    kind, _, plan = p[7].split(":")
                    self.holding[key] = (ns, int(p[4]), kind, ns + int(plan) * 1_000_000)
                    self.acqs.append((ns, client, thread, int(p[4])))
                elif event in ("LOST", "RELSTART"):
                    self.holding.pop(key, None)
                elif event == "CONN":
                    state, _, server = p[7].partition("@")
                    self.conn[key] = (int(p[5]), state, server)


# ---- the rig ------------------------------------------------------------------------------

class Rig:
    def __init__(self, args):
        self.a = args
        self.tag = f"zkr{os.getpid() % 100000}"
        self.dir = tempfile.mkdtemp(prefix="zklock-partition.")
        self.net = Net(self.tag)
        self.zk = Ensemble(self.net, self.dir)
        self.offset_s = time.time() - time.monotonic()  # CLOCK_REALTIME - CLOCK_MONOTONIC
        self.clients, self.proxies = {}, []
        self.hosts = ",".join(f"{server_ip(i)}:{ZK_PORT}" for i in range(1, SERVERS + 1))
        self.results = defaultdict(list)

    def sleep(self, seconds):
        time.sleep(max(0.0, seconds))

    # -- clients
    def start_clients(self, sdir, root, proxied, lease):
        hosts = self.hosts
        if proxied:
            hosts = ",".join(f"127.0.0.1:{PROXY_PORT + i}" for i in range(1, SERVERS + 1))
            for c in range(1, CLIENTS + 1):
                p = subprocess.Popen(self.net.exec(f"c{c}", [
                    self.a.proxy, "-d", "100:300",
                    *[f"127.0.0.1:{PROXY_PORT + i}={server_ip(i)}:{ZK_PORT}" for i in range(1, SERVERS + 1)]]),
                    stdout=subprocess.PIPE, text=True, start_new_session=True)
                if p.stdout.readline().strip() != "ready":
                    raise RuntimeError("zkproxy-run did not start")
                self.proxies.append(p)
        for c in range(1, CLIENTS + 1):
            cid = f"c{c}"
            self.clients[cid] = subprocess.Popen(self.net.exec(cid, [
                self.a.client, "-r", str(RW_LOCKS), "-H", HOLD, "-l", LONG, "-g", "50", "-t", "30000",
                "-L", lease,
                hosts, root, str(LOCKS), str(THREADS), str(SESSION_MS), os.path.join(sdir, "storage.sock"),
                os.path.join(sdir, f"{cid}.log"), cid]), start_new_session=True,
                stdin=subprocess.DEVNULL)

    def stop_clients(self):
        stuck, crashed = [], {}
        for cid, p in self.clients.items():
            if p.poll() is not None:
                crashed[cid] = f"exit status {p.returncode}"
            else:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
        end = time.monotonic() + 25
        for cid, p in self.clients.items():
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                stuck.append(cid)
        self.clients = {}
        for p in self.proxies:
            p.terminate()
            p.wait()
        self.proxies = []
        return stuck, crashed

    def leftover(self, root):
        """Lock nodes left under root, once every session that could hold one has ended."""
        deadline = time.monotonic() + 2 * SESSION_MS / 1000 + 15
        while True:
            n = soak.count_leftover(self.net.exec("c1", [self.a.client, "--ephemerals", self.hosts, root]))
            if n == 0 or time.monotonic() > deadline:
                return n
            time.sleep(0.5)

    # -- waiting on the clients
    def wait_for(self, f, pred, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            f.poll()
            v = pred()
            if v:
                return v
            time.sleep(0.05)
        return None

    def holder(self, f, left_s, fresh_ms=1000, shared_ok=False, timeout=45):
        """A (client, thread) that acquired moments ago and means to hold for
        left_s more at least: the fault lands inside its hold."""
        def pick():
            now = mono()
            cands = [k for k, (acq, lock, kind, end) in f.holding.items()
                     if now - acq < fresh_ms * 1_000_000 and end > now + left_s * NS and
                     (shared_ok or kind == "X")]
            return random.choice(cands) if cands else None
        k = self.wait_for(f, pick, timeout)
        if not k:
            raise RuntimeError("no client took a lock")
        return k

    def progress(self, f, ev, clients, limit=60):
        """After a heal: every lock is acquired again, and so is some lock by each
        healed client. Records how long it took (None: not within the limit)."""
        t1 = ev["t1"]

        def done():
            locks = {lock for ns, c, t, lock in f.acqs if ns > t1}
            cs = {c for ns, c, t, lock in f.acqs if ns > t1}
            return len(locks) == LOCKS and all(c in cs for c in clients)
        ok = self.wait_for(f, done, limit)
        ev["progress_s"] = round((mono() - t1) / NS, 2) if ok else None
        ev["progress_limit_s"] = limit

    # -- the scenarios
    def sc_cut(self, f, events):
        """1: a holder's client cut off from every server past the session timeout."""
        for _ in range(self.a.repeat):
            c, t = self.holder(f, SESSION_MS / 1000 + 1)
            ev = {"kind": "cut", "clients": [c], "thread": int(t), "t0": mono()}
            self.net.port(c, False)
            self.sleep(self.a.cut_seconds)
            self.net.port(c, True)
            ev["t1"] = mono()
            events.append(ev)
            self.progress(f, ev, [c])

    def sc_blip(self, f, events):
        """1b: a holder's client silent for 1.5 s (--blip-seconds): no loss."""
        for _ in range(self.a.repeat + 1):
            c, t = self.holder(f, SESSION_MS / 1000)
            ev = {"kind": "blip", "clients": [c], "thread": int(t), "t0": mono()}
            self.net.port(c, False)
            self.sleep(self.a.blip_seconds)
            self.net.port(c, True)
            ev["t1"] = mono()
            events.append(ev)
            self.progress(f, ev, [c])
            self.sleep(2)

    def sc_own_server(self, f, events):
        """2: a holder's client cut off from the server its session talks to."""
        for _ in range(self.a.repeat):
            c, t = self.holder(f, SESSION_MS / 1000 + 1)
            sid, state, server = f.conn[(c, t)]
            s = next(h for h, ip in self.net.hosts.items() if server.startswith(ip + ":"))
            ev = {"kind": "own_server", "clients": [c], "thread": int(t), "server": server, "t0": mono()}
            self.net.block([c], [s])
            self.sleep(self.a.cut_seconds + 1)
            self.net.unblock_all()
            ev["t1"] = mono()
            events.append(ev)
            self.progress(f, ev, [c])

    def sc_leader_minority(self, f, events):
        """3: the leader cut off with a minority of the clients; holders on both sides."""
        leader = self.zk.wait_serving(60)
        # a long hold on the minority side, best one whose session talks to the
        # leader (a deposed leader answers until it sees it lost its quorum),
        # and a holder on the majority side

        def two_sides(on_leader):
            now = mono()
            long = [k[0] for k, (acq, lock, kind, end) in f.holding.items()
                    if end > now + (SESSION_MS / 1000 + 1) * NS and
                    (not on_leader or f.conn[k][2].startswith(server_ip(leader) + ":"))]
            others = [k[0] for k in f.holding if long and k[0] != long[0]]
            return [long[0]] if others else None
        minority = self.wait_for(f, lambda: two_sides(True), 30) or self.wait_for(f, lambda: two_sides(False), 30)
        if not minority:
            raise RuntimeError("no moment with holders for both sides")
        side_a = [f"s{leader}"] + minority
        side_b = [h for h in self.net.hosts if h not in side_a]
        f.poll()
        ev = {"kind": "leader_minority", "clients": minority, "leader": leader, "t0": mono(),
              "on_leader": sorted(f"{c}-{t}" for (c, t), conn in f.conn.items()
                                  if c in minority and conn[2].startswith(server_ip(leader) + ":")),
              "holders_minority": sorted(f"{c}-{t}" for c, t in f.holding if c in minority),
              "holders_majority": sorted(f"{c}-{t}" for c, t in f.holding if c not in minority)}
        self.net.block(side_a, side_b)
        self.sleep(self.a.minority_seconds)
        self.net.unblock_all()
        ev["t1"] = mono()
        events.append(ev)
        ev["new_leader"] = self.zk.wait_serving(60)
        deposed, new = self.zk.leader_change(ev["t0"], ev["t1"], self.offset_s)
        if deposed and new:
            # > 0: the old leader still answered after the new one had restarted
            # the sessions' timeouts (design.md, "The partition rig")
            ev["deposed_after_new_ms"] = (deposed - new) // 1_000_000
            ev["new_leader_after_s"] = round((new - ev["t0"]) / NS, 2)
        self.progress(f, ev, [f"c{i}" for i in range(1, CLIENTS + 1)])

    def sc_flap(self, f, events):
        """4: a holder's link down and up every 0.3-3 s at random."""
        c, t = self.holder(f, 3)
        ev = {"kind": "flap", "clients": [c], "thread": int(t), "t0": mono(), "count": 0}
        end = time.monotonic() + self.a.flap_seconds
        while time.monotonic() < end:
            self.net.port(c, False)
            ev["count"] += 1
            self.sleep(random.uniform(0.3, 3))
            self.net.port(c, True)
            self.sleep(random.uniform(0.3, 3))
        ev["t1"] = mono()
        events.append(ev)
        self.progress(f, ev, [c])

    def sc_slow(self, f, events):
        """5: 100-300 ms of delay with jitter (the proxies) and 5 % loss on every link."""
        ev = {"kind": "slow_lossy", "clients": [], "t0": mono()}
        before = self.net.lost_packets()
        self.net.loss(5)
        self.sleep(self.a.slow_seconds)
        ev["packets_dropped"] = self.net.lost_packets() - before
        self.net.loss(0)
        ev["t1"] = mono()
        events.append(ev)
        self.progress(f, ev, [f"c{i}" for i in range(1, CLIENTS + 1)])

    def sc_pause(self, f, events):
        """6: a holder's process stopped (SIGSTOP) past the session timeout."""
        for _ in range(self.a.repeat):
            c, t = self.holder(f, 1)
            p = self.clients[c]
            ev = {"kind": "pause", "clients": [c], "thread": int(t), "t0": mono()}
            p.send_signal(signal.SIGSTOP)
            self.sleep(self.a.cut_seconds)
            p.send_signal(signal.SIGCONT)
            ev["t1"] = mono()
            events.append(ev)
            self.progress(f, ev, [c])

    SCENARIOS = [
        ("1-cut", "sc_cut", False, "client cut off from all servers past the session timeout"),
        ("1b-blip", "sc_blip", False, "client silent for 1.5 s (must not lose)"),
        ("2-own-server", "sc_own_server", False, "client cut off from its own server only"),
        ("3-leader-minority", "sc_leader_minority", False, "leader cut off with a minority of clients"),
        ("4-flap", "sc_flap", False, "link down/up every 0.3-3 s under a holder"),
        ("5-slow-lossy", "sc_slow", True, "100-300 ms delay + jitter, 5 % loss, every link"),
        ("6-pause", "sc_pause", False, "holder paused (SIGSTOP) past the session timeout"),
    ]

    def scenario(self, run_no, name, method, proxied, lease="strict"):
        if lease != "strict":
            name = f"{name}/{lease}"
        slug = name.replace("/", "-")
        sdir = os.path.join(self.dir, f"run{run_no}-{slug}")
        os.makedirs(sdir)
        root = f"/zklock-rig/run{run_no}-{slug}"
        storage = soak.Storage(os.path.join(sdir, "storage.sock"))
        stop = threading.Event()

        def serve():
            while not stop.is_set():
                storage.serve(0.1)
        serving = threading.Thread(target=serve, daemon=True)
        serving.start()
        events, f = [], Follow(sdir)
        t_start = mono()
        try:
            self.start_clients(sdir, root, proxied, lease)
            ready = self.wait_for(f, lambda: len({k[0] for k in f.conn}) == CLIENTS and len(f.acqs) > 4, 30)
            if not ready:
                raise RuntimeError(f"{name}: the clients did not start (logs in {sdir})")
            getattr(self, method)(f, events)
            self.sleep(1)
        finally:
            stuck, crashed = self.stop_clients()
            stop.set()
            serving.join()
            for sock in [storage.sock] + storage.conns:
                sock.close()
        record = {
            "name": name, "dir": sdir, "t_start": t_start, "t_end": mono(),
            "history": storage.history, "events": events,
            "leftover": self.leftover(root), "stuck": stuck, "crashed": crashed,
            "session_ms": SESSION_MS, "lease": lease,
        }
        record["expiries"] = [e for e in self.zk.expiries(self.offset_s) if e[0] >= t_start]
        with open(os.path.join(sdir, "scenario.json"), "w") as out:
            json.dump(record, out)
        stats, violations = check.check_scenario(record)
        self.results[name].append(stats)
        mark = "ok" if not violations else f"{len(violations)} VIOLATION(S)"
        print(f"  {name}: {stats['holds']} holds, {stats['faults']} faults, losses {stats['losses']} "
              f"({stats['released_first']} released before told), believed overlaps "
              f"{stats['believed_overlaps']}, {mark}", flush=True)
        for v in violations[:15]:
            print(f"    {v}", flush=True)
        for ev in events:
            extra = {k: x for k, x in ev.items() if k not in ("t0", "t1", "kind", "clients")}
            print(f"    {ev['kind']} {','.join(ev['clients'])} {(ev['t1'] - ev['t0']) / NS:.1f} s {extra}",
                  flush=True)
        return not violations

    def run(self):
        print(f"rig {self.tag}: {SERVERS} servers, {CLIENTS} clients x {THREADS} sessions, "
              f"session timeout {SESSION_MS} ms, {SUBNET}.0/24 in {self.dir}", flush=True)
        self.net.setup()
        self.net.verify_isolated()
        print("network made and isolated: every namespace's only route is the rig's subnet", flush=True)
        self.zk.start()
        leader = self.zk.wait_serving(120)
        print(f"ensemble serving, leader s{leader}", flush=True)
        ok = True
        only = set(self.a.only.split(",")) if self.a.only else None
        session = set(self.a.session_lease.split(",")) if self.a.session_lease else set()
        for run_no in range(1, self.a.runs + 1):
            for name, method, proxied, _ in self.SCENARIOS:
                if only and not any(name.startswith(o) for o in only):
                    continue
                self.zk.wait_serving(60)
                ok &= self.scenario(run_no, name, method, proxied)
                if any(name.startswith(o) for o in session):
                    self.zk.wait_serving(60)
                    ok &= self.scenario(run_no, name, method, proxied, "session")
        self.table()
        return ok

    def table(self):
        print("\n== partition rig: per scenario (margins in s: min / median / max; + = told first) ==")
        hdr = f"{'scenario':<27}{'runs':>5}{'holds':>7}{'handoffs':>9}{'faults':>7}  {'losses':<22}" \
              f"{'bel.ov':>7}{'acc.ov':>7}{'left':>5}  {'told first: next holder':<26}{'told first: expiry':<26}"
        print(hdr)
        summary = {}
        for name, what in [(n, w) for n0, _, _, w in self.SCENARIOS for n in (n0, f"{n0}/session")]:
            rs = self.results.get(name)
            if not rs:
                continue
            losses = defaultdict(int)
            for r in rs:
                for k, n in r["losses"].items():
                    losses[k] += n
            tot = {k: sum(r[k] for r in rs) for k in ("holds", "handoffs", "faults", "believed_overlaps",
                                                      "paused_overlaps", "accepted_overlaps", "nodes_left",
                                                      "violations", "lapsed", "refused",
                                                      "granted_on_expired", "window_overlaps",
                                                      "window_past_expiry", "window_accepted")}
            mn = [m for r in rs for m in r["margins_next"]]
            me = [m for r in rs for m in r["margins_expiry"]]
            pm = [m for r in rs for m in r["paused_margins"]]
            ls = " ".join(f"{k}:{n}" for k, n in sorted(losses.items())) or "0"
            bel = f"{tot['believed_overlaps']}" + (f"+{tot['paused_overlaps']}p" if tot["paused_overlaps"] else "")
            print(f"{name:<27}{len(rs):>5}{tot['holds']:>7}{tot['handoffs']:>9}{tot['faults']:>7}  {ls:<22}"
                  f"{bel:>7}{tot['accepted_overlaps']:>7}{tot['nodes_left']:>5}  "
                  f"{check.fmt_spread(check.spread(mn)) + f' ({len(mn)})':<26}"
                  f"{check.fmt_spread(check.spread(me)) + f' ({len(me)})':<26}")
            if pm:
                print(f"{'':<27}paused holders (told only once running again): expiry - end of belief "
                      f"{check.fmt_spread(check.spread(pm))} ({len(pm)}); writes past valid_until before "
                      f"on_lost: {tot['lapsed']}; writes refused by fencing: {tot['refused']}; "
                      f"acquires that returned on a session expired during the pause: "
                      f"{tot['granted_on_expired']}")
            if name.endswith("/session"):
                print(f"{'':<27}session lease (no heartbeat; told by the session's end): believed "
                      f"overlaps in the documented window {tot['window_overlaps']}, holds believed past "
                      f"their session's expiry {tot['window_past_expiry']}, stale writes refused by "
                      f"fencing {tot['refused']}, stale writes accepted before the newer holder's "
                      f"first write {tot['window_accepted']}")
            summary[name] = {"what": what, "runs": len(rs), **tot, "losses": dict(losses),
                             "margins_next": mn, "margins_expiry": me, "paused_margins": pm}
        if self.a.json:
            with open(self.a.json, "w") as out:
                json.dump(summary, out, indent=1)

    def teardown(self):
        for p in list(self.clients.values()) + self.proxies:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
        self.zk.stop()
        self.net.teardown()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--client", default="test/soak_client")
    ap.add_argument("--proxy", default="test/partition/zkproxy-run")
    ap.add_argument("--runs", type=int, default=1, help="run every scenario this many times")
    ap.add_argument("--repeat", type=int, default=2, help="faults per scenario where they repeat")
    ap.add_argument("--only", default="", help="scenarios whose names start so (comma-separated)")
    ap.add_argument("--cut-seconds", type=float, default=6.0, help="cuts and pauses (1.5 session timeouts)")
    ap.add_argument("--blip-seconds", type=float, default=1.5,
                    help="1b's blips (longer ones measure what the lease rides out)")
    ap.add_argument("--minority-seconds", type=float, default=12.0)
    ap.add_argument("--flap-seconds", type=float, default=20.0)
    ap.add_argument("--slow-seconds", type=float, default=60.0)
    ap.add_argument("--session-lease", default="1-cut,3-leader-minority",
                    help="scenarios (names start so, comma-separated) run again with "
                         "ZKLOCK_LEASE_SESSION; empty: none")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", default="", help="write the table's figures here")
    ap.add_argument("--keep", action="store_true", help="keep the logs even when everything held")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="fail (after the teardown) past this many seconds; default 600 per run")
    a = ap.parse_args()
    a.client, a.proxy = os.path.abspath(a.client), os.path.abspath(a.proxy)
    limit = a.time_limit or 600 * a.runs
    seed = a.seed if a.seed is not None else int(time.time())
    random.seed(seed)
    print(f"seed {seed}")

    # SIGTERM, SIGHUP, SIGINT (Ctrl-C) and the time limit end the run the
    # same way: through the teardown below, which nothing interrupts
    class Interrupted(BaseException):
        pass

    def interrupted(sig, frame):
        raise Interrupted("over its time limit of %.0f s" % limit if sig == signal.SIGALRM
                          else f"interrupted by {signal.Signals(sig).name}")
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGALRM):
        signal.signal(s, interrupted)
    try:
        probe(f"zkp{os.getpid() % 100000}")
    except Skip as e:
        print(f"SKIP: partition rig: {e}")
        return 77
    except Interrupted as e:
        print(f"FAIL: partition rig: {e}")
        return 1
    rig = Rig(a)
    ok, why = False, ""
    signal.alarm(int(limit + 0.5))
    try:
        ok = rig.run()
    except Interrupted as e:
        why = f": {e}"
    except Exception as e:  # a scenario that could not be set up: a failure, after the teardown
        import traceback
        traceback.print_exc()
        why = f": {e}"
    finally:
        signal.alarm(0)
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)  # the teardown runs to its end
        rig.teardown()
        if ok and not a.keep:
            shutil.rmtree(rig.dir, ignore_errors=True)
        else:
            print(f"logs kept in {rig.dir}")
    print("PASS: partition rig" if ok else f"FAIL: partition rig{why}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
