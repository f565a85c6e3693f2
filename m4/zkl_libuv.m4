# ZKL_CHECK_LIBUV: libuv, for the event-loop example that `make check` builds
# and runs (docs/examples/uv-daemon.c). Optional: without it the example is
# not built and test/examples.sh says it skipped it.
AC_DEFUN([ZKL_CHECK_LIBUV], [
  PKG_CHECK_MODULES([LIBUV], [libuv], [zkl_have_libuv=yes], [zkl_have_libuv=no])
  AM_CONDITIONAL([HAVE_LIBUV], [test "x$zkl_have_libuv" = xyes])
])
