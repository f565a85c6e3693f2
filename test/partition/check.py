#!/usr/bin/env python3
"""The partition rig's checker (test/partition/rig.py runs it on every
scenario; run it by hand on a directory the rig kept: check.py DIR...).

From a scenario's history (the clients' logs, the fenced storage's record,
the faults injected and the sessions the servers expired) it proves what
the storage does not enforce (it accepts a token no lower than the highest
it accepted, so "tokens accepted in increasing order" holds by construction
and is not checked):
  - no token is accepted from two holds, and no accepted operation lands
    inside a newer conflicting hold (the storage lets a stale token in until
    the newer holder writes: "acc.ov" in the rig's table);
  - tokens grow with the order in which conflicting holds began;
  - no two believed holds overlap in time: a hold is believed from the
    moment zklock_acquire returned until on_lost or the release call
    (CLOCK_MONOTONIC, which every namespace shares); exclusive holds
    exclude every other, readers may share;
  - no operation that went out past zklock_valid_until() by more than the
    lease's margin (a twentieth of the session timeout, in which on_lost is
    delivered) is accepted: fencing must refuse it;
  - no hold outlives, believed, its session's expiry on the server;
  - every hold that ended other than by a clean release was reported
    (on_lost), and so was every hold overtaken by a newer holder's accepted
    operation (on_lost, or ZKLOCK_ELOST from the release);
  - no lock node is left on the server at the end;
  - progress after every heal (the rig measured it: some holder on every
    lock, and the healed clients themselves, acquire again);
  - the scenario's own promise: a short blip is ridden out without a loss,
    a client cut off from its own server moves to another with its session.
A holder paused with SIGSTOP cannot be told anything while it is stopped:
its overlaps are counted apart ("paused") and are not violations, and its
margin is (the expiry, or the next holder) - (the end of its belief), told
or released; the fencing tokens must still keep its writes out (its writes
past valid_until, which it sent knowing its lease was over, are counted
apart: "lapsed"). So is an
acquire that returns, once the process runs again, on a session the server
expired while it was stopped (counted: granted_on_expired); anywhere else
that is a violation.

A scenario run with the session lease (record "lease": "session",
ZKLOCK_LEASE_SESSION) promises less: a holder cut off is told by its
session's end (the server's word, or zklock's local expiry a whole session
timeout after the client noticed the silence), which may come after the
server expired the session and another client took the lock. There, believed
overlaps, belief past the session's expiry, and stale writes the storage
accepted before the newer holder's first write (it cannot tell them yet) are
that documented window: counted (window_*), not violations. Everything else
holds as for the strict lease: no token from two holds, tokens in order,
every loss told, stale writes refused once the newer holder wrote, nothing
left behind, progress.

"Told first" margins, for every hold that was lost: (the next conflicting
acquisition by another holder) - (the moment the holder stopped believing:
told, or with the session lease also its release call if that came first),
and, where the leader's log shows the session's expiry, (the expiry) - (that
moment). Positive: told first. test/checkers.sh feeds check_scenario synthetic
histories with each violation (make check).
"""
import json
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import soak  # noqa: E402  (the clients' logs, the storage's record, the checks both share)
from soak import conflict, read_logs  # noqa: E402

NS = 1_000_000_000
SESSION_MS = 4000  # rig.py's, for a record that does not say


def spread(values):
    """min / median / max in seconds, or None."""
    if not values:
        return None
    return (min(values) / NS, statistics.median(values) / NS, max(values) / NS)


def fmt_spread(s):
    return "-" if s is None else f"{s[0]:+.2f} / {s[1]:+.2f} / {s[2]:+.2f}"


def granted_on_expired(holds, events, expiries, v):
    """Holds whose zklock_acquire returned on a session the server had already
    expired. Only a process stopped through the expiry has been seen to get
    one: the grant came from a watch event that waited in its socket while it
    was stopped, with its lease already run out, and on_lost followed. Such
    a hold counts as paused; anywhere else it is a violation. Returns them."""
    found = []
    for h in holds:
        before = [t for t, sid in expiries if sid == h.sid and t <= h.acq]
        if not before:
            continue
        t_exp = min(before)
        if any(ev["kind"] == "pause" and h.client in ev["clients"] and ev["t0"] <= t_exp <= ev["t1"]
               for ev in events):
            h.paused = True
            found.append(h)
        else:
            v.append(f"{h.who}: zklock_acquire returned on session {h.sid:x}, which the server had "
                     f"expired {(h.acq - t_exp) / 1e6:.0f} ms before")
    return found


def first_expiry(expiries, sid, after):
    times = [t for t, s in expiries if s == sid and t >= after]
    return min(times) if times else None


def check_scenario(d):
    """d: the scenario's record (rig.py's scenario.json). Returns (stats, violations)."""
    dirname = d["dir"]
    holds, conns = read_logs(dirname)
    ops = soak.read_history(d["history"])
    events = d["events"]
    expiries = [tuple(e) for e in d["expiries"]]
    soak.mark_faults(holds, events)
    v, window = [], {"overlaps": [], "past_expiry": [], "accepted": []}
    session_lease = d.get("lease", "strict") == "session"
    on_expired = granted_on_expired(holds, events, expiries, v)

    # what the storage does not enforce
    inside, inside_paused = soak.accepted_inside_newer_holds(ops, holds)
    acc = soak.tokens_from_two_holds(ops) + inside
    if session_lease:  # the window: counted, not violations
        window["accepted"] = inside
        v += [a for a in acc if a not in inside]
    else:
        v += acc
    order = soak.token_order(holds)
    v += order
    margin_us = d.get("session_ms", SESSION_MS) * 1000 // 20
    lapsed, lapsed_within, lapsed_paused = soak.lapsed_accepted(ops, holds, margin_us)
    v += lapsed
    v += soak.overtaken_not_told(holds, ops)[2]

    # believed holds
    overlaps, paused_pairs = soak.overlap_violations(holds)
    if session_lease:
        window["overlaps"] = overlaps
    else:
        v += overlaps

    # every hold ends; every loss is told; no belief past the session's end
    margins_next, margins_exp, paused_margins = [], [], []
    released_first = 0
    by_lock = defaultdict(list)
    for h in holds:
        by_lock[h.lock].append(h)
    for h in holds:
        if h.end is None:
            v.append(f"{h.who}: the hold never ended (no release, no on_lost)")
            continue
        if h.rel not in (None, "ZKLOCK_OK") and h.lost is None:
            v.append(f"{h.who}: release answered {h.rel} and on_lost never came")
        if h.rel == "ZKLOCK_OK" and h.lost is not None:
            v.append(f"{h.who}: on_lost ({h.reason}) and yet the release answered OK")
        exp = first_expiry(expiries, h.sid, 0)  # a session expires once
        if exp is not None and exp < (h.relstart or float("inf")) and h.lost is None:
            v.append(f"{h.who}: its session expired on the server while it held, and it was never told")
        nxt = [g.acq for g in by_lock[h.lock]
               if g.holder != h.holder and g.acq > h.acq and conflict(h.kind, g.kind)]
        if h.paused:
            # stopped, it could be told nothing: how long past the moment
            # another could hold (the expiry, else the next holder) it believed
            first = exp if exp is not None else min(nxt) if nxt else None
            if first is not None and (h.lost is not None or h.rel != "ZKLOCK_OK"):
                paused_margins.append(first - h.end)
            continue
        if exp is not None and h.end > exp:
            (window["past_expiry"] if session_lease else v).append(
                f"{h.who}: believed it held {(h.end - exp) / 1e6:.0f} ms past its session's "
                f"expiry on the server")
        if h.lost is None:
            continue
        told = h.lost
        if h.relstart is not None and h.relstart < h.lost:
            released_first += 1  # it stopped believing by itself before it was told
            if not session_lease:
                continue
            # the session lease: a holder cut off that released (its hold's
            # time was up) before it was told still believed until then
            told = h.relstart
        m_next = min(nxt) - told if nxt else None
        m_exp = exp - told if exp is not None else None
        if m_next is not None:
            margins_next.append(m_next)
        if m_exp is not None:
            margins_exp.append(m_exp)

    # what the scenario promised
    for ev in events:
        if ev.get("progress_s", 0) is None:
            v.append(f"no progress within {ev.get('progress_limit_s')} s after the {ev['kind']} "
                     f"at {ev['t0'] / NS:.1f} s healed")
        if ev["kind"] == "blip":
            for h in holds:
                if h.client in ev["clients"] and h.lost is not None and \
                        h.acq < ev["t1"] and h.lost > ev["t0"] and h.lost < ev["t1"] + 3 * NS:
                    v.append(f"{h.who}: lost ({h.reason}) in a {(ev['t1'] - ev['t0']) / NS:.1f} s blip")
            for t, c, th, sid, state, server in conns:
                if c in ev["clients"] and state == "EXPIRED" and ev["t0"] <= t <= ev["t1"] + 3 * NS:
                    v.append(f"{c}-{th}: session expired in a blip")
        if ev["kind"] == "own_server":
            c, th = ev["clients"][0], str(ev["thread"])
            before = [sid for t, cc, tt, sid, s, _ in conns if (cc, tt) == (c, th) and t < ev["t0"]]
            moved = [server for t, cc, tt, sid, s, server in conns
                     if (cc, tt) == (c, th) and ev["t0"] <= t <= ev["t1"] and s == "RECONNECTED"
                     and before and sid == before[-1] and server != ev["server"]]
            lost_session = [s for t, cc, tt, sid, s, _ in conns
                            if (cc, tt) == (c, th) and ev["t0"] <= t <= ev["t1"] and s == "EXPIRED"]
            ev["moved_to"] = moved[0] if moved else None
            if not moved or lost_session:
                v.append(f"{c}-{th}: cut off from its server {ev['server']}, it did not move to "
                         f"another with its session ({'expired' if lost_session else 'no reconnection'})")
    if d["leftover"] is None:
        v.append("the lock nodes left on the server could not be counted")
    elif d["leftover"] != 0:
        v.append(f"{d['leftover']} lock node(s) left on the server")
    for c in d.get("stuck", []):
        v.append(f"client {c} did not stop on SIGTERM")
    for c in d.get("crashed", []):
        v.append(f"client {c} exited on its own: {d['crashed'][c]}")

    handoffs = 0
    for hs in by_lock.values():
        hs.sort(key=lambda h: h.acq)
        handoffs += sum(1 for a, b in zip(hs, hs[1:]) if a.holder != b.holder)
    reasons = defaultdict(int)
    for h in holds:
        if h.lost is not None:
            reasons[h.reason.replace("ZKLOCK_LOST_", "").replace("ZKLOCK_E", "")] += 1
    stats = {
        "holds": len(holds),
        "handoffs": handoffs,
        "faults": sum(ev.get("count", 1) for ev in events),
        "losses": dict(reasons),
        "believed_overlaps": len(overlaps),
        "paused_overlaps": len(paused_pairs),
        "accepted_overlaps": len(acc),
        "accepted_inside_paused": len(inside_paused),
        "token_order": len(order),
        "refused": sum(1 for o in ops if not o.ok),
        "granted_on_expired": len(on_expired),
        "lapsed": sum(1 for h in holds if h.lapsed is not None and (h.lost is None or h.lapsed < h.lost)),
        "lapsed_accepted": len(lapsed),
        "lapsed_accepted_within_margin": lapsed_within,
        "lapsed_accepted_paused": lapsed_paused,
        "nodes_left": d["leftover"] or 0,  # None (not counted) is a violation above
        "released_first": released_first,
        "margins_next": margins_next,
        "margins_expiry": margins_exp,
        "paused_margins": paused_margins,
        "violations": len(v),
        "window_overlaps": len(window["overlaps"]),
        "window_past_expiry": len(window["past_expiry"]),
        "window_accepted": len(window["accepted"]),
    }
    return stats, v


def main():
    status = 0
    for dirname in sys.argv[1:]:
        with open(os.path.join(dirname, "scenario.json")) as f:
            d = json.load(f)
        d["dir"] = dirname
        stats, v = check_scenario(d)
        print(dirname, json.dumps({k: x for k, x in stats.items() if not k.startswith("margins")}))
        print("  told first (next holder):", fmt_spread(spread(stats["margins_next"])))
        print("  told first (expiry):     ", fmt_spread(spread(stats["margins_expiry"])))
        for line in v:
            print("  VIOLATION", line)
        status |= bool(v)
    return status


if __name__ == "__main__":
    sys.exit(main())
