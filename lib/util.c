/*
 * util.c: error strings, locking that cannot fail, the monotonic clock.
 *
 * lp_strerror() answers from one table of the errors this library returns,
 * so it is thread-safe and never allocates.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void lp__fatal(const char *what, int rc) {
  /* Only reached when a mutex or condition variable is corrupt: not a caller's mistake. */
  fprintf(stderr, "labelprof: %s failed (error %d); memory is corrupt\n", what, rc);
  abort();
}

void lp__lock(pthread_mutex_t *m) {
  int rc = pthread_mutex_lock(m);
  if (rc != 0) lp__fatal("pthread_mutex_lock", rc);
}

void lp__unlock(pthread_mutex_t *m) {
  int rc = pthread_mutex_unlock(m);
  if (rc != 0) lp__fatal("pthread_mutex_unlock", rc);
}

uint64_t lp__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* cannot fail for CLOCK_MONOTONIC */
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define LP__ERRORS(X) \
  X(0, "success") \
  X(EBUSY, "already running") \
  X(EINVAL, "invalid argument, or not running") \
  X(ENOMEM, "out of memory") \
  X(EIO, "input/output error") \
  X(ENOSPC, "no space left on device") \
  X(EDQUOT, "disk quota exceeded") \
  X(EFBIG, "file too large") \
  X(ENOENT, "no such file or directory") \
  X(ENOTDIR, "a component of the path is not a directory") \
  X(EISDIR, "is a directory") \
  X(EACCES, "permission denied") \
  X(EPERM, "operation not permitted") \
  X(EROFS, "read-only file system") \
  X(ENAMETOOLONG, "file name too long") \
  X(EMFILE, "too many open files") \
  X(ENFILE, "too many open files in the system") \
  X(EAGAIN, "resource temporarily unavailable") \
  X(EEXIST, "file exists") \
  X(EPIPE, "broken pipe") \
  X(EXDEV, "cross-device link") \
  X(ENOTSUP, "not supported") \
  X(ERANGE, "result out of range")

const char *lp_strerror(int err) {
  int e = err < 0 ? -err : err;
  switch (e) {
#define LP__CASE(code, text) \
  case code: \
    return text;
    LP__ERRORS(LP__CASE)
#undef LP__CASE
  default:
    return "unknown error";
  }
}
