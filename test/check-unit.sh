#!/bin/sh
# zklock-elect@.service (tools/zklock-elect@.service.in) as systemd reads it:
# `systemd-analyze verify` with this build's zklock-elect and zklock-elect(1)
# (its Documentation=), where any message fails (verify still exits 0 after
# a setting it ignores); and its exit-status mapping against the codes
# tools/common.h gives: a configuration error stops the restarts, a lost
# leadership (75) or an unreachable ZooKeeper (69) does not.
# (scripts/test.sh deb checks the installed unit, and starts two instances
# where systemd runs.)
set -u
src=${srcdir:-.}
build=${top_builddir:-.}
command -v systemd-analyze >/dev/null ||
  { echo "SKIP: systemd-analyze not found (Debian: the systemd package)"; exit 77; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
status=0
unit=$tmp/zklock-elect@.service
mkdir -p "$tmp/man/man1"
cp "$src/docs/zklock-elect.1" "$tmp/man/man1/"
sed "s|@bindir@|$(cd "$build/tools" && pwd)|g" "$src/tools/zklock-elect@.service.in" >"$unit"

if MANPATH=$tmp/man systemd-analyze verify "$unit" >"$tmp/out" 2>&1 && [ ! -s "$tmp/out" ]; then
  echo "ok - systemd-analyze verify zklock-elect@.service: no message"
else
  echo "not ok - systemd-analyze verify zklock-elect@.service:"; cat "$tmp/out"; status=1
fi

code() { # NAME: its value in tools/common.h
  c=$(sed -n "s/^ *$1 = \([0-9][0-9]*\).*/\1/p" "$src/tools/common.h")
  echo "${c:-(not in tools/common.h)}"
}
prevented=" $(sed -n 's/^RestartPreventExitStatus=//p' "$unit") "
for name in EXIT_USAGE EXIT_BADPATH EXIT_NOPERM EXIT_CANNOT_RUN EXIT_NOT_FOUND; do
  case $prevented in
    *" $(code $name) "*) echo "ok - $name ($(code $name)) stops the restarts" ;;
    *) echo "not ok - $name ($(code $name)) is not in RestartPreventExitStatus=$prevented"; status=1 ;;
  esac
done
for name in EXIT_LOST EXIT_UNREACHABLE; do
  case $prevented in
    *" $(code $name) "*) echo "not ok - $name ($(code $name)) stops the restarts"; status=1 ;;
    *) echo "ok - $name ($(code $name)) restarts" ;;
  esac
done
grep -qx 'Restart=always' "$unit" && grep -qx 'KillMode=control-group' "$unit" ||
  { echo "not ok - Restart=always and KillMode=control-group"; status=1; }
exit $status
