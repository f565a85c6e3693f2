# ZKL_SYSTEMD_UNITDIR: where `make install` puts zklock-elect@.service
# (--with-systemdunitdir=DIR; default PREFIX/lib/systemd/system, a directory
# systemd reads for /usr and /usr/local; "no": not installed).
AC_DEFUN([ZKL_SYSTEMD_UNITDIR], [
  AC_ARG_WITH([systemdunitdir],
    [AS_HELP_STRING([--with-systemdunitdir=DIR],
      [install the systemd unit zklock-elect@.service in DIR [PREFIX/lib/systemd/system]])],
    [], [with_systemdunitdir='${prefix}/lib/systemd/system'])
  AS_IF([test "x$with_systemdunitdir" = xyes],
    [with_systemdunitdir='${prefix}/lib/systemd/system'])
  AC_SUBST([systemdunitdir], [$with_systemdunitdir])
  AM_CONDITIONAL([INSTALL_SYSTEMD_UNIT], [test "x$with_systemdunitdir" != xno])
])
