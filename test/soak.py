#!/usr/bin/python3
"""Chaos soak for zklock (make soak; not part of make check).

Several client processes (test/soak_client, each with several threads and a
session per thread) contend on a few locks against a 3-server ensemble,
while this driver, for --seconds, at random:
  - kills a client with SIGKILL (and starts a new one in its place),
  - pauses a client with SIGSTOP for longer than the session timeout, so it
    wakes up believing it holds a lock,
  - kills a server and restarts it, or pauses a server for a moment.
Every holder writes to a "storage" (this driver, over a UNIX socket) with
its fencing token; the storage refuses a token lower than the highest it has
accepted for that lock. At the end the checker proves from the history:
  1. no two accepted critical sections of a lock overlap, and no token is
     accepted from two different holds;
  2. tokens are accepted in increasing order;
  3. no two holds that ended cleanly (release OK, never lost) overlapped in
     time (CLOCK_MONOTONIC, shared by all processes);
  4. every surviving holder that was overtaken (another holder's write was
     accepted while it believed it held the lock) was told: on_lost, a
     refused write, or ZKLOCK_ELOST from its release;
  5. no lock node is left on the server.
It prints the counts and exits 1 on any violation. With --persistent-paths
the lock paths are never reaped, so a client that takes a lock again after
holding it alone can skip the listing (the fast path, design.md): the
summary says how often it did.
"""
import argparse
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

ROOT = "/zklock-soak"


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Storage:
    """The fenced storage: accepts a write ("W") iff its token >= the highest
    it accepted yet, and a reader's read ("R") iff its token >= the highest
    write it accepted (readers share the lock, but not with a newer writer)."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.bind(path)
        self.sock.listen(256)
        self.conns = []
        self.highest = defaultdict(int)
        self.highest_write = defaultdict(int)
        self.history = []  # (ns, lock, token, holder, accepted, op)

    def serve(self, timeout):
        rl, _, _ = select.select([self.sock] + self.conns, [], [], timeout)
        for s in rl:
            if s is self.sock:
                c, _ = self.sock.accept()
                self.conns.append(c)
                continue
            try:
                msg = s.recv(256)
            except OSError:
                msg = b""
            if not msg:
                self.conns.remove(s)
                s.close()
                continue
            op, lock, token, who, hold = msg.decode().split()
            lock, token = int(lock), int(token)
            ok = token >= (self.highest_write if op == "R" else self.highest)[lock]
            if ok:
                self.highest[lock] = max(self.highest[lock], token)
                if op == "W":
                    self.highest_write[lock] = token
            self.history.append((now_ns(), lock, token, f"{who}#{hold}", ok, op))
            try:
                s.send(b"A" if ok else b"R")
            except OSError:
                pass


class Soak:
    def __init__(self, args):
        self.a = args
        self.dir = tempfile.mkdtemp(prefix="zklock-soak.")
        self.zkdir = os.path.join(self.dir, "zk")
        self.storage = Storage(os.path.join(self.dir, "storage.sock"))
        self.clients = {}  # id -> Popen
        self.next_id = 0
        self.faults = defaultdict(int)
        self.down_server = None
        self.hosts = ""

    def harness(self, *cmd):
        return subprocess.run([self.a.harness, *cmd], capture_output=True, text=True)

    def start_client(self):
        cid = f"c{self.next_id}"
        self.next_id += 1
        log = os.path.join(self.dir, f"{cid}.log")
        self.clients[cid] = subprocess.Popen(
            [self.a.client, self.hosts, ROOT, str(self.a.locks), str(self.a.threads),
             str(self.a.session_ms), self.storage.sock.getsockname(), log, cid])

    def wait(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.storage.serve(max(0.0, min(0.05, end - time.monotonic())))

    # ---- faults ---------------------------------------------------------------
    def kill_client(self):
        cid = random.choice(list(self.clients))
        self.clients[cid].kill()
        self.clients[cid].wait()
        del self.clients[cid]
        self.faults["client killed (-9)"] += 1
        self.start_client()

    def pause_client(self):
        cid = random.choice(list(self.clients))
        p = self.clients[cid]
        p.send_signal(signal.SIGSTOP)
        self.faults["client paused past the session timeout"] += 1
        self.wait(self.a.session_ms / 1000 * random.uniform(1.5, 2.5))
        p.send_signal(signal.SIGCONT)

    def kill_server(self):
        i = random.randint(1, 3)
        self.harness("kill", self.zkdir, str(i))
        self.faults["server killed and restarted"] += 1
        self.wait(random.uniform(1, 4))
        self.harness("restart", self.zkdir, str(i))

    def pause_server(self):
        i = random.randint(1, 3)
        self.harness("pause", self.zkdir, str(i))
        self.faults["server paused"] += 1
        self.wait(random.uniform(0.5, 3))
        self.harness("resume", self.zkdir, str(i))

    def run(self):
        r = self.harness("start", self.zkdir, "3")
        if r.returncode != 0:
            sys.exit("cannot start the ensemble:\n" + r.stderr)
        self.hosts = r.stdout.strip()
        print(f"ensemble {self.hosts}; {self.a.clients} clients x {self.a.threads} threads, "
              f"{self.a.locks} locks, session {self.a.session_ms} ms, {self.a.seconds} s")
        try:
            if self.a.persistent_paths:
                subprocess.run([self.a.client, "--make-paths", self.hosts, ROOT, str(self.a.locks)],
                               check=True)
            for _ in range(self.a.clients):
                self.start_client()
            faults = [self.kill_client, self.pause_client, self.kill_server, self.pause_server]
            end = time.monotonic() + self.a.seconds
            while time.monotonic() < end:
                self.wait(random.uniform(0.5, 2.5))
                random.choice(faults)()
            for p in self.clients.values():
                p.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 60
            while any(p.poll() is None for p in self.clients.values()) and time.monotonic() < deadline:
                self.wait(0.1)
            for p in self.clients.values():
                if p.poll() is None:
                    p.kill()
                    self.faults["client that would not stop (killed)"] += 1
            left = self.leftover_nodes()
            return check(self.dir, self.storage.history, self.faults, left)
        finally:
            self.harness("stop", self.zkdir)

    def leftover_nodes(self):
        """Lock nodes still there once killed clients' sessions have expired;
        None if they could never be counted (a failed look is no "none")."""
        deadline = time.monotonic() + 3 * self.a.session_ms / 1000 + 10
        while True:
            n = count_leftover([self.a.client, "--ephemerals", self.hosts, ROOT])
            if n == 0 or time.monotonic() > deadline:
                return n
            self.wait(0.5)


def count_leftover(argv):
    """soak_client --ephemerals: the count, or None if it could not look."""
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.strip().isdigit():
        sys.stderr.write(r.stderr)
        return None
    return int(r.stdout)


# ---- the checker ---------------------------------------------------------------------

class Hold:
    def __init__(self, who, lock, token, acq):
        self.who, self.lock, self.token, self.acq = who, lock, token, acq
        self.end = None       # RELSTART: from here on it no longer acts as holder
        self.rel = None       # release result
        self.lost = False     # on_lost was logged
        self.refused = False  # a write was refused


def log_records(dirname):
    """The clients' log lines (every *.log in dirname, file by file), each
    split in its 8 fields: ns client thread event lock token hold detail.
    test/partition/check.py reads them too."""
    for name in sorted(os.listdir(dirname)):
        if not name.endswith(".log"):
            continue
        with open(os.path.join(dirname, name)) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 8:  # not a line cut short by SIGKILL
                    yield parts


def read_holds(dirname):
    holds, current = [], {}
    for ns, client, thread, event, lock, token, hold, detail in log_records(dirname):
        key = (client, thread, hold)
        if event == "ACQ":
            current[key] = Hold(f"{client}-{thread}#{hold}", int(lock), int(token), int(ns))
            holds.append(current[key])
        elif key in current:
            h = current[key]
            if event == "WRITE" and detail == "R":
                h.refused = True
            elif event == "LOST":
                h.lost = True
            elif event == "RELSTART":
                h.end = int(ns)
            elif event == "REL":
                h.rel = detail
    return holds


def read_fast(dirname):
    """Acquisitions and fast-path ones, from the STATS lines of the clients
    that stopped cleanly."""
    acquired = fast = 0
    for parts in log_records(dirname):
        if parts[3] == "STATS":
            acquired += int(parts[5])
            fast += int(parts[7])
    return acquired, fast


def check(dirname, history, faults, leftover):
    violations = []
    holds = read_holds(dirname)
    by_lock = defaultdict(list)
    for ns, lock, token, who, ok, _ in history:
        if ok:
            by_lock[lock].append((ns, token, who))

    # 1 and 2: accepted writes, per lock, in storage order
    for lock, writes in by_lock.items():
        owner, last_token, spans = {}, 0, []
        for ns, token, who in writes:
            if owner.setdefault(token, who) != who:
                violations.append(f"lock {lock}: token {token} accepted from {owner[token]} and {who}")
            if token < last_token:
                violations.append(f"lock {lock}: token {token} accepted after {last_token}")
            if spans and spans[-1][0] == who:
                spans[-1][2] = ns
            else:
                spans.append([who, ns, ns])
            last_token = token
        seen = set()
        for who, start, end in spans:
            if who in seen:
                violations.append(f"lock {lock}: critical section of {who} interleaved with another")
            seen.add(who)

    # 3: clean holds never overlap in time
    clean = defaultdict(list)
    for h in holds:
        if h.rel == "ZKLOCK_OK" and not h.lost and not h.refused:
            clean[h.lock].append(h)
    for lock, hs in clean.items():
        hs.sort(key=lambda h: h.acq)
        for a, b in zip(hs, hs[1:]):
            if b.acq < a.end:
                violations.append(f"lock {lock}: {a.who} and {b.who} both held it cleanly at once")

    # 4: every survivor that was overtaken was told
    overtaken = told = 0
    for h in holds:
        if h.end is None or h.rel is None:
            continue  # killed while holding: nobody left to tell
        later = [ns for ns, token, who in by_lock[h.lock] if token > h.token and h.acq <= ns <= h.end]
        if not later:
            continue
        overtaken += 1
        if h.lost or h.refused or h.rel == "ZKLOCK_ELOST":
            told += 1
        else:
            violations.append(f"lock {h.lock}: {h.who} was overtaken while holding and not told")

    # 5: nothing left behind
    if leftover is None:
        violations.append("the lock nodes left on the server could not be counted")
    elif leftover != 0:
        violations.append(f"{leftover} lock node(s) left on the server")

    accepted = sum(1 for e in history if e[4])
    print("\n== soak results ==")
    print(f"acquisitions:                 {len(holds)}")
    print(f"  released cleanly:           {sum(1 for h in holds if h.rel == 'ZKLOCK_OK')}")
    print(f"  release answered ELOST:     {sum(1 for h in holds if h.rel == 'ZKLOCK_ELOST')}")
    print(f"  holder killed while holding:{sum(1 for h in holds if h.end is None):>6}")
    print(f"writes accepted / refused:    {accepted} / {len(history) - accepted}")
    print(f"losses reported (on_lost):    {sum(1 for h in holds if h.lost)}")
    print(f"stale tokens refused:         {sum(1 for h in holds if h.refused)} holds")
    print(f"holders overtaken / told:     {overtaken} / {told}")
    print("faults injected:")
    for kind, n in sorted(faults.items()):
        print(f"  {kind}: {n}")
    acquired, fast = read_fast(dirname)
    print(f"fast path (no listing):       {fast} of {acquired} acquisitions by clients that stopped cleanly")
    print(f"lock nodes left:              {leftover}")
    print(f"violations:                   {len(violations)}")
    for v in violations[:20]:
        print("  " + v)
    return 0 if not violations else 1


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=60, help="how long to inject faults")
    ap.add_argument("--clients", type=int, default=4, help="client processes")
    ap.add_argument("--threads", type=int, default=3, help="threads (sessions) per client")
    ap.add_argument("--locks", type=int, default=3, help="lock paths")
    ap.add_argument("--session-ms", type=int, default=2000, help="session timeout")
    ap.add_argument("--client", default="test/soak_client", help="the soak_client program")
    ap.add_argument("--harness", default=os.path.join(here, "zk-harness.sh"))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--persistent-paths", action="store_true",
                    help="make the lock paths persistent beforehand: never reaped, their "
                         "sequence numbers keep growing (exercises the fast path)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    random.seed(seed)
    print(f"seed {seed}")
    sys.exit(Soak(args).run())


if __name__ == "__main__":
    main()
