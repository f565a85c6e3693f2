#!/usr/bin/env python3
"""ttyjob.py: zklock as a job of an interactive shell on a terminal.

    ttyjob.py ZKLOCK LOCKPATH

Starts bash with job control on a pseudo-terminal, runs under zklock a
command that reads the terminal and counts the SIGINTs it gets, and types
at it as a user would: a line, Ctrl-C, Ctrl-Z, fg, Ctrl-D. Prints one line
per step, "PASS what" or "FAIL what: why", and stops at the first failure.
Every wait has a deadline.
"""
import os
import pty
import re
import select
import sys
import time

DEADLINE_S = 20

# The command under zklock: echoes each line it reads with the number of
# SIGINTs it has had so far.
COMMAND = r'''
import signal, sys
n = 0
def on_int(sig, frame):
    global n
    n += 1
signal.signal(signal.SIGINT, on_int)
print("READY", flush=True)
for line in sys.stdin:
    print("GOT", line.strip(), "INTS", n, flush=True)
'''


class Terminal:
    def __init__(self, argv, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execvpe(argv[0], argv, env)
        self.seen = ""

    def type(self, text):
        os.write(self.fd, text.encode())

    def expect(self, pattern):
        """Reads until pattern matches what came since the last match;
        returns the match, or None at the deadline."""
        end = time.monotonic() + DEADLINE_S
        while True:
            m = re.search(pattern, self.seen)
            if m:
                self.seen = self.seen[m.end():]
                return m
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                return None
            if not chunk:
                return None
            self.seen += chunk.decode(errors="replace").replace("\r", "")


def main():
    zklock, lockpath = sys.argv[1], sys.argv[2]
    env = dict(os.environ, PS1="PROMPT$ ", TERM="dumb")
    t = Terminal(["bash", "--norc", "--noprofile", "--noediting", "-i"], env)
    quoted = COMMAND.replace("'", "'\\''")
    # (what, typed, pattern, the pattern's group must be this)
    steps = [
        ("the shell starts", "", r"PROMPT\$ ", None),
        ("COMMAND starts under zklock",
         "%s %s %s -c '%s'\n" % (zklock, lockpath, sys.executable, quoted),
         r"READY\n", None),
        ("COMMAND reads the terminal", "one\n", r"GOT one INTS (\d+)\n", "0"),
        ("Ctrl-C reaches COMMAND once", "\x03two\n", r"GOT two INTS (\d+)\n", "1"),
        ("Ctrl-Z stops zklock too and gives the shell the terminal", "\x1a",
         r"Stopped.*\n(.|\n)*PROMPT\$ ", None),
        ("fg continues COMMAND with the terminal", "fg\nthree\n", r"GOT three INTS (\d+)\n", "1"),
        ("Ctrl-D ends COMMAND, and the shell has the terminal back", "\x04", r"PROMPT\$ ", None),
        ("zklock exits with COMMAND's status", "echo zklock-status=$?\n", r"zklock-status=(\d+)\n", "0"),
    ]
    failed = False
    for what, typed, pattern, want in steps:
        t.type(typed)
        m = t.expect(pattern)
        if not m:
            print("FAIL %s: no /%s/ within %d s; the terminal showed: %r"
                  % (what, pattern, DEADLINE_S, t.seen[-400:]))
        elif want is not None and m.group(1) != want:
            print("FAIL %s: %r, want %s" % (what, m.group(0), want))
        else:
            print("PASS %s" % what)
            continue
        failed = True
        break
    if failed:
        os.close(t.fd)  # hangs the terminal up: SIGHUP to what still runs on it
        os.kill(t.pid, 9)
    else:
        t.type("exit\n")
    os.waitpid(t.pid, 0)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
