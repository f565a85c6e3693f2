#!/bin/sh
# abi/update.sh [--symbols-only] [BUILDDIR]: renews, from the library built
# in BUILDDIR (default: build/plain, as scripts/test.sh builds it),
#  - abi/SONAME.abi, the ABI baseline test/check-abi.sh compares with (a
#    release step: docs/release.md; not with --symbols-only), and
#  - debian/libzklock0.symbols: a symbol already listed keeps the version
#    that brought it, a new one gets the version in configure.ac (so bump
#    that first), a lost one is dropped with a warning (it breaks the ABI).
# `make abi-update` runs it on the build it is typed in. Then look at
# `git diff abi debian` and commit it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
symbols_only=
[ "${1:-}" = --symbols-only ] && { symbols_only=1; shift; }
build=$(cd "${1:-$top/build/plain}" && pwd)
lib=$build/.libs/libzklock.so
[ -f "$lib" ] || { echo "abi/update.sh: no $lib: build the library first" >&2; exit 1; }

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
version=$(sed -n 's/^#define ZKLOCK_VERSION "\(.*\)"$/\1/p' "$build/include/zklock_version.h")
package=$(echo "$soname" | sed 's/^lib\(.*\)\.so\.\([0-9]*\)$/lib\1\2/')

if [ -z "$symbols_only" ]; then
  "$here/dump.sh" "$lib" "$top" "$build" >"$here/$soname.abi.new"
  mv "$here/$soname.abi.new" "$here/$soname.abi"
  echo "abi/$soname.abi: the ABI of zklock $version"
fi

old=$top/debian/$package.symbols
new=$old.new
added=0
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
{
  echo "$soname $package #MINVER#"
  echo "* Build-Depends-Package: libzklock-dev"
  for sym in $exported; do
    since=$(sed -n "s/^ $sym@Base \(.*\)/\1/p" "$old" 2>/dev/null || true)
    [ -n "$since" ] || added=$((added + 1))
    echo " $sym@Base ${since:-$version}"
  done
} >"$new"
for sym in $(sed -n 's/^ \([^@ ]*\)@Base .*/\1/p' "$old" 2>/dev/null); do
  echo "$exported" | grep -qx "$sym" ||
    echo "abi/update.sh: WARNING: $sym is no longer exported: an incompatible change, a new SONAME (docs/release.md)" >&2
done
mv "$new" "$old"
echo "debian/$package.symbols: $(echo "$exported" | wc -l) symbols, $added of them new (since $version)"
