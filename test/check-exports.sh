#!/bin/sh
# The shared library exports the public API and nothing else: every
# ZKLOCK_API function declared in zklock.h, and no other symbol. The static
# archive cannot hide its internal globals, so they must at least stay in
# the library's namespace: every global it defines starts with zklock_
# (internals are zklock__name).
set -u
libs=${top_builddir:-.}/.libs
header=${srcdir:-.}/include/zklock.h
command -v nm >/dev/null || { echo "SKIP: nm not found"; exit 77; }
[ -f "$libs/libzklock.so" ] || [ -f "$libs/libzklock.a" ] ||
  { echo "SKIP: no library built in $libs"; exit 77; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
status=0

if [ -f "$libs/libzklock.so" ]; then
  nm -D --defined-only "$libs/libzklock.so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"
  # Declarations look like: ZKLOCK_API int zklock_x(...  (possibly with a * before the name)
  tr '\n' ' ' <"$header" | grep -o 'ZKLOCK_API[^;(]*(' | sed 's/($//; s/.*[ *]//' | grep '^zklock_' | sort -u >"$tmp/declared"
  if grep -v '^zklock_' "$tmp/exported" >"$tmp/foreign"; then
    echo "FAIL: libzklock.so exports symbols outside the zklock_ prefix:"; cat "$tmp/foreign"; status=1
  fi
  if ! diff -u "$tmp/declared" "$tmp/exported" >"$tmp/diff"; then
    echo "FAIL: exported symbols differ from the API declared in zklock.h (- declared, + exported):"
    cat "$tmp/diff"; status=1
  fi
  [ $status -eq 0 ] && echo "PASS: libzklock.so: $(wc -l <"$tmp/exported") symbols, all declared in zklock.h"
else
  echo "# no libzklock.so (built with --disable-shared)"
fi

if [ -f "$libs/libzklock.a" ]; then
  # (a sanitizer's build adds __odr_asan.NAME for each global NAME: the name is ours)
  nm -g --defined-only "$libs/libzklock.a" | awk 'NF == 3 && $2 ~ /^[TDBRCVWGS]$/ {print $3}' |
    sed 's/^__odr_asan\.//' | sort -u >"$tmp/archive"
  if grep -v '^zklock_' "$tmp/archive" >"$tmp/foreign-a"; then
    echo "FAIL: libzklock.a defines globals outside the zklock_ namespace:"; cat "$tmp/foreign-a"; status=1
  else
    echo "PASS: libzklock.a: $(wc -l <"$tmp/archive") globals, all zklock_ or zklock__"
  fi
fi
exit $status
