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
accepted for that lock, so "tokens accepted in increasing order" holds by
construction and is not checked. At the end the checker proves, from the
storage's record and the clients' logs, what the storage does not enforce
(a hold is believed from the return of zklock_acquire until on_lost, the
release call or the client's death; CLOCK_MONOTONIC, shared by all
processes):
  1. no token is accepted from two different holds;
  2. no accepted write lands inside a newer conflicting hold: the storage
     accepts a stale token until the newer holder has written, so only the
     holds tell that the older holder wrote after the lock moved on;
  3. tokens grow with the order in which conflicting holds began;
  4. no two conflicting holds were believed at once;
  5. no write past zklock_valid_until() (by more than the lease's margin,
     a twentieth of the session timeout, in which on_lost is delivered) is
     accepted: fencing must refuse it;
  6. every surviving holder that was overtaken (a newer holder's write was
     accepted while it believed it held the lock) was told: on_lost, or
     ZKLOCK_ELOST from its release (a refused write tells the application
     nothing about the lock);
  7. no lock node is left on the server.
A client stopped with SIGSTOP can be told nothing: its holds are counted
apart from 2, 3 and 4, and its writes past valid_until apart from 2 and 5
(the client wrote knowing its lease was over). test/checkers.sh feeds the
checker synthetic histories with each violation (make check). It prints the
counts and exits 1 on any violation. With --persistent-paths
the lock paths are never reaped, so a client that takes a lock again after
holding it alone can skip the listing (the fast path, design.md): the
summary says how often it did.
"""
import argparse
import bisect
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
        self.history = []  # (ns, lock, token, holder, accepted, op, late): see Op

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
            op, lock, token, who, hold, late = (msg.decode().split() + ["-"])[:6]
            lock, token = int(lock), int(token)
            ok = token >= (self.highest_write if op == "R" else self.highest)[lock]
            if ok:
                self.highest[lock] = max(self.highest[lock], token)
                if op == "W":
                    self.highest_write[lock] = token
            self.history.append((now_ns(), lock, token, f"{who}#{hold}", ok, op, late))
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
        self.events = []  # client kills and pauses, for the checker
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
        self.events.append({"kind": "kill", "clients": [cid], "t0": now_ns()})
        self.clients[cid].kill()
        self.clients[cid].wait()
        del self.clients[cid]
        self.faults["client killed (-9)"] += 1
        self.start_client()

    def pause_client(self):
        cid = random.choice(list(self.clients))
        p = self.clients[cid]
        ev = {"kind": "pause", "clients": [cid], "t0": now_ns()}
        p.send_signal(signal.SIGSTOP)
        self.faults["client paused past the session timeout"] += 1
        self.wait(self.a.session_ms / 1000 * random.uniform(1.5, 2.5))
        p.send_signal(signal.SIGCONT)
        ev["t1"] = now_ns()
        self.events.append(ev)

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
            for cid, p in self.clients.items():
                if p.poll() is None:
                    self.events.append({"kind": "kill", "clients": [cid], "t0": now_ns()})
                    p.kill()
                    self.faults["client that would not stop (killed)"] += 1
            left = self.leftover_nodes()
            return check(self.dir, self.storage.history, self.events, self.faults, left,
                         self.a.session_ms)
        finally:
            for p in self.clients.values():  # stopped early (SIGTERM, an error)
                if p.poll() is None:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                    p.wait()
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


# ---- the clients' logs and the storage's record ----------------------------------------
# test/partition/check.py reads them with these too.

class Hold:
    """One hold as its client logged it. It is believed from acq (the return
    of zklock_acquire) to end: on_lost, the release call, or the kill of its
    process, whichever came first (None: it never ended)."""

    def __init__(self, client, thread, n, lock, token, kind, sid, acq):
        self.client, self.thread, self.n = client, thread, n
        self.lock, self.token, self.kind, self.sid, self.acq = lock, token, kind, sid, acq
        self.relstart = None    # the release call
        self.rel = None         # what it returned
        self.lost = None        # on_lost: when, and why
        self.reason = None
        self.lapsed = None      # a write was about to go out past zklock_valid_until
        self.killed = None      # its process was killed (SIGKILL) while it held
        self.paused = False     # its process was stopped (SIGSTOP) while it held

    @property
    def who(self):
        return f"{self.client}-{self.thread}#{self.n}"

    @property
    def holder(self):
        return (self.client, self.thread)

    @property
    def end(self):
        """The end of the belief: on_lost, the release call or the kill."""
        ends = [t for t in (self.lost, self.relstart, self.killed) if t is not None]
        return min(ends) if ends else None


def log_records(dirname):
    """The clients' log lines (every *.log in dirname, file by file), each
    split in its 8 fields: ns client thread event lock token hold detail."""
    for name in sorted(os.listdir(dirname)):
        if not name.endswith(".log"):
            continue
        with open(os.path.join(dirname, name)) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 8:  # not a line cut short by SIGKILL
                    yield parts


def read_logs(dirname):
    """The holds and the session events (CONN lines) of the clients' logs."""
    holds, current, conns = [], {}, []
    for ns, client, thread, event, lock, token, n, detail in log_records(dirname):
        ns, key = int(ns), (client, thread, n)
        if event == "CONN":
            state, _, server = detail.partition("@")
            conns.append((ns, client, thread, int(token), state, server))
        elif event == "ACQ":
            kind, sid = (detail.split(":") + ["0"])[:2]
            current[key] = Hold(client, thread, int(n), int(lock), int(token), kind,
                                int(sid, 16), ns)
            holds.append(current[key])
        elif key in current:
            h = current[key]
            if event == "LOST" and h.lost is None:
                h.lost, h.reason = ns, detail
            elif event == "RELSTART":
                h.relstart = ns
            elif event == "REL":
                h.rel = detail
            elif event == "LAPSED" and h.lapsed is None:
                h.lapsed = ns
    conns.sort()
    return holds, conns


class Op:
    """One operation the storage saw: a write ("W") or a reader's read ("R").
    late: None if the lease ran when it went out, "E" if zklock had ended the
    hold (on_lost on its way), else how many microseconds past
    zklock_valid_until() (soak_client's LATE field)."""

    def __init__(self, ns, lock, token, who, ok, op, late="-"):
        self.ns, self.lock, self.token, self.who, self.ok, self.op = ns, lock, token, who, ok, op
        self.late = None if late in ("-", None) else late if late == "E" else int(late)

    @property
    def kind(self):
        return "X" if self.op == "W" else "S"

    @property
    def past_lease(self):
        return self.late is not None


def read_history(history):
    return [Op(*e) for e in history]


def conflict(a, b):
    return a == "X" or b == "X"


def mark_faults(holds, events):
    """Holds whose process was stopped (a "pause" event: t0, t1) while they
    held, and the end of those whose process was killed ("kill": t0)."""
    for ev in events:
        for h in holds:
            if h.client not in ev["clients"]:
                continue
            if ev["kind"] == "kill" and h.acq < ev["t0"] and h.end is None:
                h.killed = ev["t0"]
            end = h.end if h.end is not None else float("inf")
            if ev["kind"] == "pause" and h.acq < ev["t1"] and end > ev["t0"]:
                h.paused = True


# ---- what the storage does not enforce ------------------------------------------------

def tokens_from_two_holds(ops):
    """The storage accepts a token equal to the highest: one token from two
    holds gets in."""
    owner, problems = {}, []
    for o in ops:
        if o.ok and owner.setdefault((o.lock, o.token), o.who) != o.who:
            problems.append(f"lock {o.lock}: token {o.token} accepted from "
                            f"{owner[(o.lock, o.token)]} and {o.who}")
    return problems


def accepted_inside_newer_holds(ops, holds):
    """Accepted operations that landed while a newer conflicting hold of
    another holder was believed: the storage lets a stale token in until the
    newer holder writes, so it cannot see these. Returns (violations, the
    same by a paused holder that wrote past valid_until: counted apart)."""
    by_who = {h.who: h for h in holds}
    by_lock = defaultdict(list)
    for h in holds:
        by_lock[h.lock].append(h)
    for hs in by_lock.values():
        hs.sort(key=lambda h: h.acq)
    starts = {lock: [h.acq for h in hs] for lock, hs in by_lock.items()}
    violations, excused = [], []
    for o in ops:
        a = by_who.get(o.who)
        if not o.ok or a is None:
            continue
        hs = by_lock[o.lock]
        first = bisect.bisect_right(starts[o.lock], a.acq)
        last = bisect.bisect_left(starts[o.lock], o.ns)
        for b in hs[first:last]:
            if b.holder == a.holder or not conflict(b.kind, o.kind) or \
                    (b.end is not None and b.end <= o.ns):
                continue
            what = (f"lock {o.lock}: {a.who}'s {o.op} (token {o.token}) accepted "
                    f"{(o.ns - b.acq) / 1e6:.0f} ms into {b.who}'s newer hold (token {b.token})")
            (excused if a.paused and o.past_lease else violations).append(what)
            break
    return violations, excused


def token_order(holds):
    """Of two conflicting holds of different holders, the one that began
    later has the larger token (the queue's order is the tokens' order).
    Paused holds are left out (an acquisition can return on a session the
    server expired while the process was stopped)."""
    problems = []
    by_lock = defaultdict(list)
    for h in holds:
        if not h.paused:
            by_lock[h.lock].append(h)
    for lock, hs in by_lock.items():
        hs.sort(key=lambda h: h.acq)
        highest = {}  # (holder, kind) -> the hold with the largest token so far
        for b in hs:
            for (holder, kind), a in highest.items():
                if holder != b.holder and conflict(kind, b.kind) and a.token >= b.token:
                    problems.append(f"lock {lock}: {b.who} (token {b.token}) began after "
                                    f"{a.who} (token {a.token})")
            key = (b.holder, b.kind)
            if key not in highest or highest[key].token < b.token:
                highest[key] = b
    return problems


def believed_overlaps(holds):
    """Pairs of conflicting holds of one lock, of different holders, whose
    believed intervals overlap."""
    pairs = []
    by_lock = defaultdict(list)
    for h in holds:
        by_lock[h.lock].append(h)
    for hs in by_lock.values():
        hs.sort(key=lambda h: h.acq)
        active = []
        for h in hs:
            active = [a for a in active if a.end is None or a.end > h.acq]
            for a in active:
                if a.holder != h.holder and conflict(a.kind, h.kind):
                    pairs.append((a, h))
            active.append(h)
    return pairs


def overlap_violations(holds):
    """believed_overlaps() as violations, but for those with a paused holder
    (it could be told nothing): (violations, the pairs with a paused one)."""
    violations, paused = [], []
    for a, b in believed_overlaps(holds):
        if a.paused or b.paused:
            paused.append((a, b))
            continue
        both = min(a.end or float("inf"), b.end or float("inf")) - b.acq
        violations.append(f"lock {a.lock}: {a.who} ({a.kind}) and {b.who} ({b.kind}) believed "
                          f"they held together for {both / 1e6:.0f} ms")
    return violations, paused


def lapsed_accepted(ops, holds, margin_us):
    """Accepted operations that went out past zklock_valid_until() by more
    than margin_us: the lease's margin, in which zklock delivers on_lost and
    no other client can hold yet; fencing must refuse the rest. Returns
    (violations, within the margin or sent once zklock had ended the hold,
    by a paused holder): the last two are counted, not violations."""
    by_who = {h.who: h for h in holds}
    violations, within, paused = [], 0, 0
    for o in ops:
        if not o.ok or not o.past_lease:
            continue
        a = by_who.get(o.who)
        if a is not None and a.paused:
            paused += 1
        elif o.late == "E" or o.late <= margin_us:
            within += 1
        else:
            violations.append(f"lock {o.lock}: {o.who}'s {o.op} (token {o.token}) went out "
                              f"{o.late / 1000:.0f} ms past zklock_valid_until and was accepted")
    return violations, within, paused


def overtaken_not_told(holds, ops):
    """Holds that survived (released) although a newer conflicting holder's
    operation was accepted while they believed they held: each must have
    been told, by on_lost or ZKLOCK_ELOST from its release. Returns
    (overtaken, told, violations)."""
    by_lock = defaultdict(list)
    for o in ops:
        if o.ok:
            by_lock[o.lock].append(o)
    overtaken = told = 0
    violations = []
    for h in holds:
        if h.relstart is None or h.rel is None:
            continue  # killed while holding: nobody left to tell
        if not any(o.token > h.token and h.acq <= o.ns <= h.relstart and conflict(h.kind, o.kind)
                   for o in by_lock[h.lock]):
            continue
        overtaken += 1
        if h.lost is not None or h.rel == "ZKLOCK_ELOST":
            told += 1
        else:
            violations.append(f"lock {h.lock}: {h.who} was overtaken while holding and not told "
                              f"(release answered {h.rel}, no on_lost)")
    return overtaken, told, violations


# ---- the soak's verdict ----------------------------------------------------------------

def read_fast(dirname):
    """Acquisitions and fast-path ones, from the STATS lines of the clients
    that stopped cleanly."""
    acquired = fast = 0
    for parts in log_records(dirname):
        if parts[3] == "STATS":
            acquired += int(parts[5])
            fast += int(parts[7])
    return acquired, fast


def check(dirname, history, events, faults, leftover, session_ms):
    """Prints the soak's figures and violations; 0 if there is none."""
    holds, _ = read_logs(dirname)
    ops = read_history(history)
    mark_faults(holds, events)
    violations = tokens_from_two_holds(ops)
    inside, inside_paused = accepted_inside_newer_holds(ops, holds)
    violations += inside
    order = token_order(holds)
    violations += order
    overlaps, paused_pairs = overlap_violations(holds)
    violations += overlaps
    lapsed, lapsed_within, lapsed_paused = lapsed_accepted(ops, holds, session_ms * 1000 // 20)
    violations += lapsed
    overtaken, told, untold = overtaken_not_told(holds, ops)
    violations += untold
    if leftover is None:
        violations.append("the lock nodes left on the server could not be counted")
    elif leftover != 0:
        violations.append(f"{leftover} lock node(s) left on the server")

    accepted = sum(1 for o in ops if o.ok)
    print("\n== soak results ==")
    print(f"acquisitions:                 {len(holds)}")
    print(f"  released cleanly:           {sum(1 for h in holds if h.rel == 'ZKLOCK_OK')}")
    print(f"  release answered ELOST:     {sum(1 for h in holds if h.rel == 'ZKLOCK_ELOST')}")
    print(f"  holder killed while holding:{sum(1 for h in holds if h.killed is not None):>6}")
    print(f"  held while paused:          {sum(1 for h in holds if h.paused)}")
    print(f"writes accepted / refused:    {accepted} / {len(ops) - accepted}")
    print(f"losses reported (on_lost):    {sum(1 for h in holds if h.lost is not None)}")
    print(f"holders overtaken / told:     {overtaken} / {told}")
    print(f"believed overlaps:            {len(overlaps)} "
          f"(+{len(paused_pairs)} with a paused holder)")
    print(f"accepted inside a newer hold: {len(inside)} (+{len(inside_paused)} by paused "
          f"holders past valid_until)")
    print(f"tokens out of order:          {len(order)}")
    print(f"accepted past valid_until:    {len(lapsed)} beyond the margin (+{lapsed_within} within "
          f"it, +{lapsed_paused} by paused holders)")
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

    def interrupted(sig, frame):  # through the clean-up in Soak.run
        raise KeyboardInterrupt(f"interrupted by {signal.Signals(sig).name}")
    signal.signal(signal.SIGTERM, interrupted)
    sys.exit(Soak(args).run())


if __name__ == "__main__":
    main()
