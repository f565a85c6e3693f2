#!/bin/sh
# The shared library exports the public API and nothing else: every
# ZKLOCK_API function declared in zklock.h, and no other symbol.
set -u
lib=${top_builddir:-.}/.libs/libzklock.so
header=${srcdir:-.}/include/zklock.h
[ -f "$lib" ] || { echo "SKIP: no shared library at $lib (built with --disable-shared?)"; exit 77; }
command -v nm >/dev/null || { echo "SKIP: nm not found"; exit 77; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"
# Declarations look like: ZKLOCK_API int zklock_x(...  (possibly with a * before the name)
tr '\n' ' ' <"$header" | grep -o 'ZKLOCK_API[^;(]*(' | sed 's/($//; s/.*[ *]//' | grep '^zklock_' | sort -u >"$tmp/declared"
status=0
if grep -v '^zklock_' "$tmp/exported" >"$tmp/foreign"; then
  echo "FAIL: exported symbols outside the zklock_ prefix:"; cat "$tmp/foreign"; status=1
fi
if ! diff -u "$tmp/declared" "$tmp/exported" >"$tmp/diff"; then
  echo "FAIL: exported symbols differ from the API declared in zklock.h (- declared, + exported):"
  cat "$tmp/diff"; status=1
fi
[ $status -eq 0 ] && echo "PASS: $(wc -l <"$tmp/exported") symbols, all declared in zklock.h"
exit $status
