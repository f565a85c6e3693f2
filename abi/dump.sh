#!/bin/sh
# abi/dump.sh LIBRARY SRCDIR BUILDDIR: prints LIBRARY's ABI as libabigail's
# XML (abidw), the one way both the baseline (abi/update.sh) and the check
# (test/check-abi.sh) make it, so that only real changes differ.
#
# Public: what include/zklock.h and the generated zklock_version.h define;
# every other type (the library's internals behind its opaque handles) is
# kept only as a declaration, so that internals change freely. No source
# locations and type ids from hashes: the dump does not depend on where the
# tree was built or on lines moving in zklock.h, and a new baseline differs
# from the old one where the ABI does (abidiff's reports name the types and
# members, without line numbers).
set -eu
lib=$1 src=$(cd "$2" && pwd) build=$(cd "$3" && pwd)
exec abidw --headers-dir "$src/include" --headers-dir "$build/include" --drop-private-types \
  --no-corpus-path --no-comp-dir-path --no-show-locs --type-id-style hash "$lib"
