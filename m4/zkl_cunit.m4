# ZKL_CHECK_CUNIT: CUnit for `make check`, unless --disable-tests.
# Sets CUNIT_CFLAGS, CUNIT_LIBS and the ENABLE_TESTS conditional.
AC_DEFUN([ZKL_CHECK_CUNIT], [
  AC_ARG_ENABLE([tests],
    [AS_HELP_STRING([--disable-tests], [do not build the CUnit test suites])],
    [], [enable_tests=yes])
  if test "x$enable_tests" = xyes; then
    PKG_CHECK_MODULES([CUNIT], [cunit], [],
      [AC_CHECK_HEADER([CUnit/Basic.h],
        [AC_SEARCH_LIBS([CU_initialize_registry], [cunit],
          [CUNIT_LIBS="-lcunit"; CUNIT_CFLAGS=""],
          [ZKL_CUNIT_MISSING])],
        [ZKL_CUNIT_MISSING])])
  fi
  AM_CONDITIONAL([ENABLE_TESTS], [test "x$enable_tests" = xyes])
])

AC_DEFUN([ZKL_CUNIT_MISSING], [AC_MSG_ERROR([CUnit was not found (needed by make check).
    On Debian/Ubuntu: apt-get install libcunit1-dev, or configure --disable-tests])])
