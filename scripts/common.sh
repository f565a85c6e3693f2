# scripts/common.sh: what the README's two commands share (sourced, bash).
# Installs the Debian packages zklock needs, generates the build system and
# builds in a directory of its own.

ZKLOCK_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=$(nproc 2>/dev/null || echo 2)

# Everything the build, the tests and the demo use, as Debian packages (the
# last line: the packages' build and lintian, abidiff, systemd-analyze, man).
ZKLOCK_PACKAGES="build-essential autoconf automake libtool pkg-config cmake
  libzookeeper-mt-dev libjansson-dev libcunit1-dev libuv1-dev zookeeper default-jre-headless
  valgrind clang python3 procps spin gdb
  default-jdk-headless libcurator-recipes-java libslf4j-java python3-kazoo
  iproute2 nftables liblog4j1.2-java
  debhelper lintian abigail-tools man-db systemd"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

missing_packages() {
  local p
  for p in $ZKLOCK_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

ensure_packages() {
  local missing sudo=""
  command -v dpkg-query >/dev/null || die "this script expects Debian or Ubuntu (dpkg, apt-get)"
  missing=$(missing_packages | tr '\n' ' ')
  [ -z "${missing// /}" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "missing packages: $missing; run as root or install them"
    sudo=sudo
  fi
  say "installing Debian packages: $missing"
  $sudo apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing \
    >/dev/null || die "apt-get install failed"
}

# build DIR [CONFIGURE-ARGS...]: configure (once per set of arguments) and make.
build() {
  local dir=$1; shift
  [ -x "$ZKLOCK_TOP/configure" ] || { say "generating the build system (autoreconf)";
    (cd "$ZKLOCK_TOP" && autoreconf -fi >/dev/null 2>&1) || die "autoreconf failed"; }
  mkdir -p "$dir"
  if [ ! -f "$dir/config.status" ] || [ "$(cat "$dir/.zklock-configure-args" 2>/dev/null)" != "$*" ] ||
     [ "$ZKLOCK_TOP/configure" -nt "$dir/config.status" ]; then
    say "configuring $dir ${*:-}"
    (cd "$dir" && "$ZKLOCK_TOP/configure" -q "$@" >/dev/null) || die "configure failed (see $dir/config.log)"
    echo "$*" >"$dir/.zklock-configure-args"
  fi
  say "building in $dir"
  make -C "$dir" -j"$JOBS" -s >/dev/null || make -C "$dir" -s || die "build failed"
}
