# ZKL_ARG_SANITIZERS: --enable-asan (AddressSanitizer + UndefinedBehaviorSanitizer)
# and --enable-tsan (ThreadSanitizer). Sets SANITIZE_FLAGS, added to every
# compile and link, and the SANITIZED conditional.
AC_DEFUN([ZKL_ARG_SANITIZERS], [
  AC_ARG_ENABLE([asan],
    [AS_HELP_STRING([--enable-asan], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
    [], [enable_asan=no])
  AC_ARG_ENABLE([tsan],
    [AS_HELP_STRING([--enable-tsan], [build with ThreadSanitizer])],
    [], [enable_tsan=no])
  if test "x$enable_asan" = xyes && test "x$enable_tsan" = xyes; then
    AC_MSG_ERROR([--enable-asan and --enable-tsan cannot be combined])
  fi
  SANITIZE_FLAGS=""
  if test "x$enable_asan" = xyes; then
    SANITIZE_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  fi
  if test "x$enable_tsan" = xyes; then
    SANITIZE_FLAGS="-fsanitize=thread -fno-omit-frame-pointer"
  fi
  AC_SUBST([SANITIZE_FLAGS])
  AM_CONDITIONAL([SANITIZED], [test -n "$SANITIZE_FLAGS"])
])

# ZKL_WARNINGS: the warnings zklock is built with (WARN_CFLAGS); errors only
# with --enable-werror.
AC_DEFUN([ZKL_WARNINGS], [
  AC_ARG_ENABLE([werror],
    [AS_HELP_STRING([--enable-werror], [treat compiler warnings as errors])],
    [], [enable_werror=no])
  WARN_CFLAGS="-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith -Wformat=2 -Wno-unused-parameter"
  if test "x$enable_werror" = xyes; then
    WARN_CFLAGS="$WARN_CFLAGS -Werror"
  fi
  AC_SUBST([WARN_CFLAGS])
])

# ZKL_ARG_DEBUG (after ZKL_ARG_SANITIZERS): --enable-debug keeps assert()
# (the sanitizer builds keep it too); other builds define NDEBUG
# (DEBUG_CPPFLAGS). The engine's guards (a contender's transitions checked
# against phase.c's table, the driver never entered twice) are not
# assertions: they hold in every build (design.md, "One driver").
AC_DEFUN([ZKL_ARG_DEBUG], [
  AC_ARG_ENABLE([debug],
    [AS_HELP_STRING([--enable-debug], [keep assert() (also with --enable-asan/--enable-tsan); the engine's guards hold in every build])],
    [], [enable_debug=no])
  DEBUG_CPPFLAGS="-DNDEBUG"
  zkl_assertions=no
  if test "x$enable_debug" = xyes || test -n "$SANITIZE_FLAGS"; then
    DEBUG_CPPFLAGS=""
    zkl_assertions=yes
  fi
  AC_SUBST([DEBUG_CPPFLAGS])
])
