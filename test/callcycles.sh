#!/bin/sh
# Calls go one way between the library's files (design.md, "Layout"): the
# object of every source file of lib/ and recipes/, none left out, and no
# two files that reach each other (test/callcycles.py, a copy of
# ../shared/tools/callcycles.py: an edge is a global symbol one file uses
# and another defines).
set -u
top=${top_builddir:-.}
src=${srcdir:-.}
command -v nm >/dev/null || { echo "SKIP: nm not found"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }
objs=
for c in "$src"/lib/*.c "$src"/recipes/*.c; do
  dir=$(basename "$(dirname "$c")") base=$(basename "$c" .c)
  # libtool's PIC object, or the plain one of a --disable-shared build
  o=$top/$dir/.libs/libzklock_core_la-$base.o
  [ -f "$o" ] || o=$top/$dir/libzklock_core_la-$base.o
  [ -f "$o" ] || { echo "FAIL: no object for $c in $top"; exit 1; }
  objs="$objs $o"
done
python3 "$src/test/callcycles.py" $objs
