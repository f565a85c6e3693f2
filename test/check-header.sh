#!/bin/sh
# zklock.h compiles cleanly wherever a daemon may include it: C89, C99 and
# C11 with -pedantic, and C++98 and C++17, every warning an error.
set -u
top=${srcdir:-.}
inc="-I$top/include -I${top_builddir:-.}/include"
cc=${CC:-cc}
cxx=${CXX:-c++}
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/use.c" <<'SRC'
#include <zklock.h>
int main(void)
{
    zklock_stats_t st;
    (void)st;
    return zklock_strerror(ZKLOCK_EBUSY) == 0 || ZKLOCK_OK != 0;
}
SRC
status=0
for std in c89 c99 c11; do
  if $cc -std=$std -pedantic -Wall -Wextra -Werror -fsyntax-only $inc "$tmp/use.c" 2>"$tmp/err"; then
    echo "ok - $std"
  else
    echo "not ok - $std:"; cat "$tmp/err"; status=1
  fi
done
if command -v "$cxx" >/dev/null 2>&1; then
  for std in c++98 c++17; do
    if $cxx -x c++ -std=$std -pedantic -Wall -Wextra -Werror -fsyntax-only $inc "$tmp/use.c" 2>"$tmp/err"; then
      echo "ok - $std"
    else
      echo "not ok - $std:"; cat "$tmp/err"; status=1
    fi
  done
else
  # a skip scripts/test.sh sees (and fails on: CI installs a C++ compiler)
  echo "ok - c++98 # SKIP no C++ compiler ($cxx)"
  echo "ok - c++17 # SKIP no C++ compiler ($cxx)"
fi
exit $status
