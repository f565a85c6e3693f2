#!/bin/sh
# checkers.sh: the soak's and the partition rig's checkers catch what they
# are there to catch: test/test_checkers.py feeds them synthetic histories,
# a clean one and one with each kind of violation; and the shell suites'
# checker (test/script_checks.py) catches a check that asserts only its
# first condition, then finds none in test/*.sh. No ZooKeeper needed.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || { echo "SKIP: python3 is needed"; exit 77; }
# -B: no __pycache__ in the source tree (read-only under distcheck)
exec "$PY" -B "${srcdir:-$(dirname "$0")/..}/test/test_checkers.py" -v
