# ZKL_CHECK_PTHREAD: POSIX threads with -pthread; sets PTHREAD_CFLAGS.
# GCC and Clang on Linux and the BSDs take -pthread for both compile and link.
AC_DEFUN([ZKL_CHECK_PTHREAD], [
  PTHREAD_CFLAGS=-pthread
  zkl_save_CFLAGS=$CFLAGS
  CFLAGS="$CFLAGS $PTHREAD_CFLAGS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <pthread.h>]],
    [[pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; return pthread_mutex_lock(&m);]])],
    [], [AC_MSG_ERROR([zklock needs POSIX threads (the compiler did not accept -pthread)])])
  CFLAGS=$zkl_save_CFLAGS
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SEARCH_LIBS([clock_gettime], [rt])
])
