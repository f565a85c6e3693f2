# ZKL_CHECK_JANSSON: jansson, with which the utilities write JSON (zklock-ls
# --json) that node data cannot make invalid. Sets JANSSON_CFLAGS and
# JANSSON_LIBS; falls back to a header and library check without a .pc file.
AC_DEFUN([ZKL_CHECK_JANSSON], [
  PKG_CHECK_MODULES([JANSSON], [jansson >= 2.8], [],
    [AC_CHECK_HEADER([jansson.h],
      [AC_SEARCH_LIBS([json_stringn], [jansson],
        [JANSSON_LIBS="-ljansson"; JANSSON_CFLAGS=""],
        [ZKL_JANSSON_MISSING])],
      [ZKL_JANSSON_MISSING])])
])

AC_DEFUN([ZKL_JANSSON_MISSING], [AC_MSG_ERROR([jansson (2.8 or later) was not found (needed by the utilities).
    On Debian/Ubuntu: apt-get install libjansson-dev])])
