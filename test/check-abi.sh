#!/bin/sh
# The library's ABI against the last release's (abi/SONAME.abi, its abidw
# dump): a change other than a compatible addition fails (a function removed
# or changed, a public struct's layout changed beyond the growth zklock(3)
# allows, ABI AND VERSIONS, which abi/grown.py takes out of the new dump). Also: the SONAME is
# the one zklock(3) states, and debian/libzklockN.symbols lists exactly the
# exported symbols (dpkg-gensymbols would fail the package build otherwise).
# abi/update.sh renews both files (docs/release.md).
set -u
src=${srcdir:-.}
build=${top_builddir:-.}
lib=$build/.libs/libzklock.so
[ -f "$lib" ] || { echo "SKIP: no libzklock.so (built with --disable-shared)"; exit 77; }
command -v abidiff >/dev/null && command -v abidw >/dev/null ||
  { echo "SKIP: abidw/abidiff not found (Debian: abigail-tools)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 77; }
readelf -S "$lib" | grep -q '\.debug_info' ||
  { echo "SKIP: libzklock.so has no debug information (built without -g)"; exit 77; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
status=0

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
baseline=$src/abi/$soname.abi
symbols=$src/debian/$(echo "$soname" | sed 's/^lib\(.*\)\.so\.\([0-9]*\)$/lib\1\2/').symbols
if [ ! -f "$baseline" ]; then
  echo "not ok - no baseline abi/$soname.abi for SONAME $soname: a new SONAME is an"
  echo "  incompatible release (docs/release.md says what goes with it)"; exit 1
fi
if grep -q "^\.B $soname\$" "$src/docs/zklock.3"; then
  echo "ok - SONAME $soname, as zklock(3) says (ABI)"
else
  echo "not ok - SONAME $soname: zklock(3), ABI, names another"; status=1
fi

"$src/abi/dump.sh" "$lib" "$src" "$build" >"$tmp/dumped.abi" &&
  python3 "$src/abi/grown.py" "$baseline" "$tmp/dumped.abi" >"$tmp/now.abi" 2>"$tmp/grown" ||
  { echo "not ok - abidw or abi/grown.py failed"; cat "$tmp/grown"; exit 1; }
cat "$tmp/grown"
abidiff "$baseline" "$tmp/now.abi" >"$tmp/report"
rc=$?
# 0: nothing; 4 (ABIDIFF_ABI_CHANGE): something, maybe only additions; any
# other bit: an incompatible change (8) or abidiff's own error (1, 2)
if [ $rc -eq 4 ]; then
  abidiff --no-added-syms "$baseline" "$tmp/now.abi" >/dev/null
  rc=$?
fi
sed 's/^/# /' "$tmp/report"
if [ $rc -eq 0 ]; then
  echo "ok - the ABI of $(basename "$baseline") is kept (additions only, if any)"
else
  echo "not ok - the ABI changed incompatibly (abidiff exit $rc, report above)"; status=1
fi

if [ -f "$symbols" ]; then
  nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"
  sed -n 's/^ \([^@ ]*\)@Base .*/\1/p' "$symbols" | sort -u >"$tmp/listed"
  if diff -u "$tmp/listed" "$tmp/exported" >"$tmp/diff"; then
    echo "ok - debian/$(basename "$symbols") lists the $(wc -l <"$tmp/exported") exported symbols"
  else
    echo "not ok - debian/$(basename "$symbols") differs from the exports (- listed, + exported);"
    echo "  run abi/update.sh --symbols-only $(cd "$build" && pwd) (docs/release.md, step 4):"
    cat "$tmp/diff"; status=1
  fi
else
  echo "ok - # SKIP no debian/ in $src"
fi
exit $status
