# ZKL_CHECK_ZOOKEEPER: ZooKeeper's multi-threaded C client, 3.7 or later.
# Sets ZOOKEEPER_CFLAGS and ZOOKEEPER_LIBS. Debian's libzookeeper-mt-dev ships
# no .pc file, so without one fall back to a header and library check.
AC_DEFUN([ZKL_CHECK_ZOOKEEPER], [
  PKG_CHECK_MODULES([ZOOKEEPER], [zookeeper_mt], [zkl_have_zk_pc=yes], [zkl_have_zk_pc=no])
  if test "x$zkl_have_zk_pc" = xno; then
    zkl_save_LIBS=$LIBS
    zkl_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS -DTHREADED"
    AC_CHECK_HEADER([zookeeper/zookeeper.h], [],
      [AC_MSG_ERROR([ZooKeeper's C client headers were not found.
    On Debian/Ubuntu: apt-get install libzookeeper-mt-dev])])
    AC_SEARCH_LIBS([zoo_set_servers_resolution_delay], [zookeeper_mt], [],
      [AC_MSG_ERROR([libzookeeper_mt (3.7 or later, with zoo_set_servers_resolution_delay) was not found.
    On Debian/Ubuntu: apt-get install libzookeeper-mt-dev])])
    LIBS=$zkl_save_LIBS
    CPPFLAGS=$zkl_save_CPPFLAGS
    ZOOKEEPER_CFLAGS="-DTHREADED"
    ZOOKEEPER_LIBS="-lzookeeper_mt"
  fi
  AC_SUBST([ZOOKEEPER_CFLAGS])
  AC_SUBST([ZOOKEEPER_LIBS])

  # TLS: zookeeper_init_ssl exists only in a client built with OpenSSL (not
  # Debian 12's). Its header declares it only under HAVE_OPENSSL_H.
  zkl_save_LIBS=$LIBS
  LIBS="$ZOOKEEPER_LIBS $LIBS"
  AC_CHECK_FUNC([zookeeper_init_ssl], [zkl_have_zk_tls=yes], [zkl_have_zk_tls=no])
  LIBS=$zkl_save_LIBS
  if test "x$zkl_have_zk_tls" = xyes; then
    AC_DEFINE([HAVE_ZOOKEEPER_TLS], [1], [ZooKeeper's C client has zookeeper_init_ssl (TLS).])
  fi
])
