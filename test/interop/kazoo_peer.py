#!/usr/bin/python3
"""kazoo_peer: the Python side of zklock's interoperability tests.

  kazoo_peer.py HOSTS PATH MODE ITERATIONS LOG ID HOLD_MS [GOFILE]

MODE is lock (kazoo Lock), read (ReadLock), write (WriteLock), semN
(Semaphore with max_leases N) or elect (Election: lead in its run()
function). MODE who prints the first of Election.contenders() (the leader's
identifier) and exits. For each
iteration: acquire (60 s at most), append "<ns> enter ID MODE" to LOG, hold
for HOLD_MS (or, with GOFILE, until that file exists), append
"<ns> leave ID MODE", release. The lock's identifier is ID.
With ITERATIONS 0: try once without waiting and print "busy" or "free".
With KAZOO_PEER_BETWEEN=FILE in the environment, between two iterations
append "<ns> between ID MODE" to LOG and wait (60 s at most) until FILE
exists: one kazoo object, used again later, as a long-lived service would.

A lock path zklock made is persistent where kazoo's layout has it so (kazoo
never looks for a path again once it saw it): no NoNodeError is caught.
"""
import os
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout


def log(path, line):
    with open(path, "a") as f:  # one write per line, appended
        f.write(line + "\n")


def wait_file(path):
    deadline = time.time() + 60
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.02)  # polls for the test's signal


def lead(logfile, ident, mode, go, hold_ms):
    """One term: log it, hold it as the other modes hold their lock."""
    log(logfile, f"{time.time_ns()} enter {ident} {mode}")
    if go:
        wait_file(go)
    elif hold_ms:
        time.sleep(hold_ms / 1000)
    log(logfile, f"{time.time_ns()} leave {ident} {mode}")


def main():
    if len(sys.argv) < 8:
        sys.exit(__doc__)
    hosts, path, mode, iterations, logfile, ident, hold_ms = sys.argv[1:8]
    go = sys.argv[8] if len(sys.argv) > 8 else None
    iterations, hold_ms = int(iterations), int(hold_ms)
    zk = KazooClient(hosts=hosts, timeout=10.0)
    zk.start(timeout=20)
    if mode == "who":
        contenders = zk.Election(path).contenders()
        print(contenders[0] if contenders else "")
        zk.stop()
        return
    if mode == "elect":
        for _ in range(iterations):
            zk.Election(path, ident).run(lead, logfile, ident, mode, go, hold_ms)
        zk.stop()
        zk.close()
        return
    if mode.startswith("sem"):
        lock = zk.Semaphore(path, ident, max_leases=int(mode[3:]))
    else:
        make = {"lock": zk.Lock, "read": zk.ReadLock, "write": zk.WriteLock}[mode]
        lock = make(path, ident)
    status = 0
    between = os.environ.get("KAZOO_PEER_BETWEEN")
    if iterations == 0:
        got = lock.acquire(blocking=False)
        print("free" if got else "busy")
        if got:
            lock.release()
    for i in range(iterations):
        if between and i > 0:
            log(logfile, f"{time.time_ns()} between {ident} {mode}")
            wait_file(between)
        try:
            lock.acquire(timeout=60)
        except LockTimeout:
            print(f"kazoo_peer {ident}: timed out", file=sys.stderr)
            status = 1
            break
        log(logfile, f"{time.time_ns()} enter {ident} {mode}")
        if go:
            wait_file(go)
        elif hold_ms:
            time.sleep(hold_ms / 1000)
        log(logfile, f"{time.time_ns()} leave {ident} {mode}")
        lock.release()
    zk.stop()
    zk.close()
    sys.exit(status)


if __name__ == "__main__":
    main()
