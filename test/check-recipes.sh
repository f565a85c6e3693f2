#!/bin/sh
# recipe.h is the recipes' interface (design.md, "Layout"): every file of
# recipes/ includes lib/recipe.h and no other header of the library, and
# every internal symbol its object uses is declared there (or in the pure
# headers it includes: names.h, rules.h).
set -u
top=${top_builddir:-.}
src=${srcdir:-.}
command -v nm >/dev/null || { echo "SKIP: nm not found"; exit 77; }
status=0
for c in "$src"/recipes/*.c; do
  base=$(basename "$c" .c)
  other=$(grep '^#include "' "$c" | grep -v '^#include "\.\./lib/recipe\.h"$')
  if [ -n "$other" ]; then
    echo "FAIL: $base.c includes more than recipe.h: $other"; status=1
  fi
  o=$top/recipes/.libs/libzklock_core_la-$base.o
  [ -f "$o" ] || o=$top/recipes/libzklock_core_la-$base.o
  [ -f "$o" ] || { echo "FAIL: no object for $c in $top"; exit 1; }
  for sym in $(nm -P "$o" | awk '$2 == "U" && $1 ~ /^zklock__/ {print $1}'); do
    if ! cat "$src/lib/recipe.h" "$src/lib/names.h" "$src/lib/rules.h" | grep -q "[ *]$sym("; then
      echo "FAIL: $base.c calls $sym, which recipe.h does not declare"; status=1
    fi
  done
done
n=$(for c in "$src"/recipes/*.c; do
  base=$(basename "$c" .c)
  o=$top/recipes/.libs/libzklock_core_la-$base.o
  [ -f "$o" ] || o=$top/recipes/libzklock_core_la-$base.o
  nm -P "$o" | awk '$2 == "U" && $1 ~ /^zklock__/ {print $1}'
done | sort -u | wc -l)
[ $status -eq 0 ] && echo "PASS: the recipes include recipe.h only and call $n internal functions, all declared there"
exit $status
