#!/usr/bin/python3
"""check_log: proves from an enter/leave log that no critical sections that
must exclude each other overlapped, whatever language each holder ran.

  check_log.py LOG [--expect-shared N] [--order ID,ID,...] [--count ID=N ...]
               [--leases N]

Lines: "<ns> enter|leave ID MODE" ("between" lines, a peer's pause, are
skipped); MODE read is shared, semN is a lease of a semaphore of N (at most
N inside at once), anything else is exclusive.
--expect-shared N: at least N readers (or leases) were inside at once.
Prints what it found; exits 1 on an overlap or a failed expectation."""
import sys
from collections import defaultdict


def shared(mode):
    return mode == "read" or mode.startswith("sem")


def main():
    args = sys.argv[1:]
    path = args.pop(0)
    expect_shared, order, counts = None, None, {}
    while args:
        opt = args.pop(0)
        if opt == "--expect-shared":
            expect_shared = int(args.pop(0))
        elif opt == "--order":
            order = args.pop(0).split(",")
        elif opt == "--count":
            who, n = args.pop(0).split("=")
            counts[who] = int(n)
    open_at, spans = {}, []
    limit = None
    for line in open(path):
        ns, what, who, mode = line.split()
        if what == "between":
            continue  # a peer's pause between two iterations: no section
        if what == "enter":
            open_at[who] = (int(ns), mode)
        else:
            start, mode = open_at.pop(who)
            spans.append((start, int(ns), who, mode))
    bad = []
    spans.sort()
    for i, (s1, e1, w1, m1) in enumerate(spans):
        for s2, e2, w2, m2 in spans[i + 1:]:
            if s2 >= e1:
                break
            if not (shared(m1) and shared(m2) and m1[:3] == m2[:3]):
                bad.append(f"{w1} ({m1}) and {w2} ({m2}) overlapped")
    # most readers (or leases) inside at once; leaving sorts before entering
    events = sorted([(s, 1) for s, e, w, m in spans if shared(m)] +
                    [(e, -1) for s, e, w, m in spans if shared(m)])
    inside = most = 0
    for _, d in events:
        inside += d
        most = max(most, inside)
    for s, e, w, m in spans:
        if m.startswith("sem"):
            limit = int(m[3:]) if limit is None else min(limit, int(m[3:]))
    if limit is not None and most > limit:
        bad.append(f"{most} leases held at once, more than {limit}")
    served = defaultdict(int)
    for s, e, w, m in spans:
        served[w] += 1
    print(f"{len(spans)} critical sections, {len(served)} holders, "
          f"at most {most} readers or leases at once, {len(bad)} overlaps")
    for b in bad[:10]:
        print("  " + b)
    ok = not bad and not open_at
    if open_at:
        print(f"  never left: {sorted(open_at)}")
    if expect_shared is not None and most < expect_shared:
        print(f"  expected {expect_shared} readers at once, saw {most}")
        ok = False
    if order is not None:
        seen = [w for s, e, w, m in spans if w in order]
        if seen != order:
            print(f"  served in order {seen}, expected {order}")
            ok = False
    for who, n in counts.items():
        if served[who] != n:
            print(f"  {who} held it {served[who]} times, expected {n}")
            ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
