"""The soak's and the partition rig's checkers (test/soak.py,
test/partition/check.py), fed synthetic histories: a clean one must pass,
and each kind of violation must be caught, or the checkers could pass a
broken lock. And the shell suites' checker (test/script_checks.py), fed
made-up scripts: a check that asserts only its first condition must be
caught, on one line or over continuation lines, and the suites must have
none. Run by test/checkers.sh (make check).

Times are in milliseconds here (the logs have nanoseconds); the session
timeout is 2 s (a lease margin of 100 ms) for the soak, 4 s (200 ms) for the
rig."""
import contextlib
import io
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "partition"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import soak  # noqa: E402
import check  # noqa: E402
import script_checks  # noqa: E402

MS = 1_000_000


class History:
    """The clients' log lines and the storage's record of a made-up run."""

    def __init__(self):
        self.lines = {}     # client -> log lines
        self.ops = []       # (ms, lock, token, client, thread, n, op, late), judged by the storage in write()
        self.events = []    # pauses and kills
        self.history = []   # the storage's record

    def log(self, ms, client, thread, event, lock, token, n, detail):
        self.lines.setdefault(client, []).append(
            f"{int(ms * MS)} {client} {thread} {event} {lock} {token} {n} {detail}\n")

    def hold(self, client, lock, token, acq, writes=(), lost=None, rel=None, rel_rc="ZKLOCK_OK",
             kind="X", thread=0, n=1):
        """One hold: acquired at acq, operations at the times in writes (a
        time, or (time, LATE) for one that went out past valid_until: see
        soak_client.c), on_lost at lost, the release call at rel."""
        self.log(acq, client, thread, "ACQ", lock, token, n, f"{kind}:1:0")
        for w in writes:
            t, late = w if isinstance(w, tuple) else (w, "-")
            self.ops.append((t, lock, token, client, thread, n, "W" if kind == "X" else "R", late))
        if lost is not None:
            self.log(lost, client, thread, "LOST", lock, token, n, "ZKLOCK_LOST_UNSURE")
        if rel is not None:
            self.log(rel, client, thread, "RELSTART", lock, token, n, "-")
            self.log(rel, client, thread, "REL", lock, token, n, rel_rc)

    def pause(self, client, t0, t1):
        self.events.append({"kind": "pause", "clients": [client], "t0": t0 * MS, "t1": t1 * MS})

    def write(self, dirname):
        """The storage judges the operations in time order, as soak.Storage
        does; then the logs are written."""
        highest, highest_write = {}, {}
        self.history = []
        made, self.lines = self.lines, {c: list(lines) for c, lines in self.lines.items()}
        for t, lock, token, client, thread, n, op, late in sorted(self.ops):
            ok = token >= (highest_write if op == "R" else highest).get(lock, 0)
            if ok:
                highest[lock] = max(highest.get(lock, 0), token)
                if op == "W":
                    highest_write[lock] = token
            self.history.append((int(t * MS), lock, token, f"{client}-{thread}#{n}", ok, op, late))
            self.log(t, client, thread, "WRITE", lock, token, n, "A" if ok else "R")
        for client, lines in self.lines.items():
            with open(os.path.join(dirname, f"{client}.log"), "w") as f:
                f.writelines(sorted(lines, key=lambda line: int(line.split()[0])))
        self.lines = made  # as before: write() may run again


class Checkers(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="zklock-checkers.")
        self.h = History()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def soak(self, leftover=0):
        """The soak's verdict: (exit status, what it printed)."""
        self.h.write(self.dir)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = soak.check(self.dir, self.h.history, self.h.events, {}, leftover, 2000)
        return rc, out.getvalue()

    def rig(self, leftover=0, lease="strict"):
        """The rig's verdict: its violations (and its figures)."""
        self.h.write(self.dir)
        self.stats, violations = check.check_scenario({
            "dir": self.dir, "history": self.h.history, "events": self.h.events,
            "expiries": [], "leftover": leftover, "stuck": [], "crashed": {}, "session_ms": 4000,
            "lease": lease})
        return violations

    def assert_caught(self, phrase, rig=True, soak=True):
        if soak:
            rc, out = self.soak()
            self.assertEqual(rc, 1, out)
            self.assertIn(phrase, out)
        if rig:
            violations = self.rig()
            self.assertTrue(any(phrase in v for v in violations), violations)

    def assert_counted(self, phrase):
        """The soak passes, and says it counted the case apart."""
        rc, out = self.soak()
        self.assertEqual(rc, 0, out)
        self.assertIn(phrase, out)

    def assert_clean(self):
        rc, out = self.soak()
        self.assertEqual(rc, 0, out)
        self.assertEqual(self.rig(), [])

    # ---- what must pass

    def test_handoffs_pass(self):
        self.h.hold("c1", 0, 5, acq=0, writes=[10, 50], rel=100)
        self.h.hold("c2", 0, 7, acq=120, writes=[130, 160], rel=200)
        self.h.hold("c1", 0, 9, acq=210, writes=[220], rel=260, n=2)
        self.assert_clean()

    def test_a_loss_told_first_passes(self):
        # c1 told at 100 (its write at 90 went out before), c2 holds from 150
        self.h.hold("c1", 0, 5, acq=0, writes=[10, 90], lost=100, rel=400, rel_rc="ZKLOCK_ELOST")
        self.h.hold("c2", 0, 7, acq=150, writes=[200, 250], rel=300)
        self.assert_clean()

    def test_readers_share(self):
        self.h.hold("c1", 0, 5, acq=0, writes=[10, 80], rel=100, kind="S")
        self.h.hold("c2", 0, 6, acq=20, writes=[30, 90], rel=110, kind="S")
        self.h.hold("c3", 0, 8, acq=120, writes=[130], rel=140)
        self.assert_clean()

    def test_late_within_the_margin_or_paused_is_counted_not_failed(self):
        self.h.hold("c1", 0, 5, acq=0, writes=[10, (90, "50000")], lost=95, rel=100,
                    rel_rc="ZKLOCK_ELOST")  # 50 ms late: within the soak's 100 ms
        self.h.hold("c2", 0, 7, acq=200, writes=[210, (2900, "900000")], rel=3000)
        self.h.pause("c2", 300, 2800)  # stopped through its lease: it wrote knowing
        self.h.hold("c3", 0, 8, acq=3100, writes=[3110], rel=3200)
        self.assert_counted("+1 within it, +1 by paused holders")

    # ---- what the storage does not enforce, one at a time

    def test_one_token_from_two_holds(self):
        self.h.hold("c1", 0, 5, acq=0, writes=[10], rel=100)
        self.h.hold("c2", 0, 5, acq=120, writes=[130], rel=200)
        self.assert_caught("token 5 accepted from c1-0#1 and c2-0#1")

    def test_a_stale_write_inside_a_newer_hold(self):
        # c1 is told at 100 but its write lands at 200, after c2 acquired
        # (150) and before c2 wrote (250): the storage accepts it
        self.h.hold("c1", 0, 5, acq=0, writes=[10, 200], lost=100, rel=400, rel_rc="ZKLOCK_ELOST")
        self.h.hold("c2", 0, 7, acq=150, writes=[250], rel=300)
        self.assert_caught("c1-0#1's W (token 5) accepted 50 ms into c2-0#1's newer hold")

    def test_a_reader_inside_a_newer_writer(self):
        self.h.hold("c1", 0, 5, acq=0, writes=[10, 200], lost=100, rel=400,
                    rel_rc="ZKLOCK_ELOST", kind="S")
        self.h.hold("c2", 0, 7, acq=150, writes=[250], rel=300)
        self.assert_caught("c1-0#1's R (token 5) accepted 50 ms into c2-0#1's newer hold")

    def test_a_paused_holders_late_write_inside_a_newer_hold_is_counted_apart(self):
        self.h.hold("c1", 0, 5, acq=0, writes=[10, (2600, "600000")], lost=2700, rel=2800,
                    rel_rc="ZKLOCK_ELOST")
        self.h.pause("c1", 50, 2550)
        self.h.hold("c2", 0, 7, acq=2500, writes=[2650], rel=2900)
        self.assert_counted("accepted inside a newer hold: 0 (+1 by paused holders past valid_until)")

    def test_tokens_out_of_the_order_of_the_holds(self):
        # c2 holds after c1 with a lower token: the storage refuses its
        # writes, which the old checker took for "told"
        self.h.hold("c1", 0, 9, acq=0, writes=[10], rel=100)
        self.h.hold("c2", 0, 7, acq=150, writes=[160], rel=200)
        self.assert_caught("c2-0#1 (token 7) began after c1-0#1 (token 9)")

    def test_the_session_lease_window_is_counted_not_failed(self):
        # ZKLOCK_LEASE_SESSION: c1, cut off, still believes when c2 takes
        # the lock; its write before c2's first is accepted, the later one
        # refused; it is told at 400
        self.h.hold("c1", 0, 5, acq=0, writes=[10, 160, 300], lost=400, rel=450,
                    rel_rc="ZKLOCK_ELOST")
        self.h.hold("c2", 0, 7, acq=150, writes=[200, 250], rel=500)
        self.assertEqual(self.rig(lease="session"), [])
        self.assertEqual(self.stats["window_overlaps"], 1)
        self.assertEqual(self.stats["window_accepted"], 1)
        self.assertEqual(self.stats["refused"], 1)
        self.assertEqual(self.stats["margins_next"], [-250 * MS])
        self.assertNotEqual(self.rig(), [])  # the strict lease promises more

    def test_the_session_lease_still_fails_one_token_from_two_holds(self):
        self.h.hold("c1", 0, 5, acq=0, writes=[10], rel=100)
        self.h.hold("c2", 0, 5, acq=120, writes=[130], rel=200)
        self.assertTrue(any("token 5 accepted from" in v for v in self.rig(lease="session")))

    def test_believed_overlap(self):
        self.h.hold("c1", 0, 5, acq=0, writes=[10], rel=300)
        self.h.hold("c2", 0, 7, acq=100, writes=[150], rel=200)
        self.assert_caught("believed they held together for 100 ms")

    def test_accepted_past_valid_until(self):
        # 250 ms late, beyond the margin (the soak's 100 ms, the rig's 200 ms)
        self.h.hold("c1", 0, 5, acq=0, writes=[10, (300, "250000")], lost=310, rel=320,
                    rel_rc="ZKLOCK_ELOST")
        self.assert_caught("went out 250 ms past zklock_valid_until and was accepted")

    def test_overtaken_and_never_told(self):
        # a zklock that never calls on_lost and answers OK to the release:
        # c1, stopped (so its overlap is excused), is overtaken by c2; its
        # next write is refused, which tells its application nothing
        self.h.hold("c1", 0, 5, acq=0, writes=[10, 270], rel=280)
        self.h.pause("c1", 20, 260)
        self.h.hold("c2", 0, 7, acq=100, writes=[150], rel=200)
        self.assert_caught("c1-0#1 was overtaken while holding and not told")

    def test_leftover_that_could_not_be_counted(self):
        self.h.hold("c1", 0, 5, acq=0, writes=[10], rel=100)
        rc, out = self.soak(leftover=None)
        self.assertEqual(rc, 1, out)
        self.assertIn("could not be counted", out)
        self.assertIn("the lock nodes left on the server could not be counted", self.rig(leftover=None))


class ScriptChecks(unittest.TestCase):
    """A check that names two conditions and asserts one is caught."""

    def caught(self, script):
        return [line for line, _ in script_checks.unasserted(script)]

    # ---- what must be caught

    def test_a_second_condition_after_and(self):
        self.assertEqual(self.caught('check "a and b" [ "$a" = 1 ] && [ "$b" = 2 ]\n'), [1])

    def test_over_continuation_lines(self):
        script = ('true\n'
                  'check "a and b" \\\n'
                  '  [ "$a" = 1 ] && grep -q b "$T/out"\n')
        self.assertEqual(self.caught(script), [2])

    def test_the_operator_on_the_continuation_line_itself(self):
        self.assertEqual(self.caught('check "a" [ "$a" = 1 ] \\\n  && [ -s f ]\n'), [1])

    def test_or_and_a_pipe(self):
        script = ('check "x" foo || echo never\n'
                  'expect_status 0 "y" "$ZKLOCK" /p true | cat\n')
        self.assertEqual(self.caught(script), [1, 2])

    def test_after_then_and_do(self):
        script = ('if true; then check "x" a && b; fi\n'
                  'for p in a b; do check "y" c && d; done\n')
        self.assertEqual(self.caught(script), [1, 2])

    def test_after_a_here_document(self):
        script = ('"$PY" - <<\'PY\'\n'
                  'print("it\'s && not shell")\n'
                  'PY\n'
                  'check "x" a && b\n')
        self.assertEqual(self.caught(script), [4])

    # ---- what must pass

    def test_conditions_inside_the_asserted_command(self):
        script = ('check "x" sh -c "a && b || c | d"\n'
                  "check 'y' sh -c 'a && b'\n"
                  'check "z" [ "$(a && b | c)" = "$(( 1 && 2 ))" ]\n'
                  'check "w" grep -q "a \\" && b" f\n'
                  'check "v" wait_for 20 sh -c "grep -qs x $L && grep -qs y $L"\n')
        self.assertEqual(self.caught(script), [])

    def test_one_check_per_condition(self):
        script = ('check "a" [ "$a" = 1 ]\n'
                  'check "...and b" \\\n'
                  '  [ "$b" = 2 ]; wait $x && echo done\n'
                  '[ -n "$x" ] && check "c" true\n'
                  'expect_status 64 "d" "$ZKLOCK" 2>&1 >/dev/null\n'
                  'check "e" true # a comment && more\n')
        self.assertEqual(self.caught(script), [])

    # ---- the suites themselves: make check fails on the shape

    def test_the_suites_assert_every_condition(self):
        suites = [os.path.join(HERE, f) for f in sorted(os.listdir(HERE)) if f.endswith(".sh")]
        self.assertIn(os.path.join(HERE, "tools.sh"), suites)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = script_checks.main(suites)
        self.assertEqual(rc, 0, out.getvalue())


if __name__ == "__main__":
    unittest.main()
