/*
 * util.c: error strings, locking that cannot fail, the monotonic clock, and
 * the allocator every part of the library goes through.
 *
 * lp_strerror() answers from the library's own wording for the values it
 * returns, then from the C library's static descriptions of every other
 * errno value, so it is thread-safe and never allocates.
 */
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Allocation: the C library's, but for a failure a test can ask for
 * (lp__alloc_test_fail). The countdown is the calling thread's, so that
 * which allocation fails does not depend on what other threads do.
 */
static _Thread_local unsigned long fail_in; /* 0: off; n: the n-th allocation from here fails */

static bool failing(void) {
  if (__builtin_expect(fail_in == 0, 1)) return false;
  if (--fail_in != 0) return false;
  errno = ENOMEM;
  return true;
}

void lp__alloc_test_fail(unsigned long nth) { fail_in = nth; }
unsigned long lp__alloc_test_pending(void) { return fail_in; }

void *lp__malloc(size_t n) { return failing() ? NULL : malloc(n); }
void *lp__calloc(size_t n, size_t size) { return failing() ? NULL : calloc(n, size); }
void *lp__realloc(void *p, size_t n) { return failing() ? NULL : realloc(p, n); }
char *lp__strdup(const char *s) { return failing() ? NULL : strdup(s); }
char *lp__strndup(const char *s, size_t n) { return failing() ? NULL : strndup(s, n); }
void *lp__aligned_alloc(size_t align, size_t n) { return failing() ? NULL : aligned_alloc(align, n); }

void lp__warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  flockfile(stderr); /* one line, whatever other threads write meanwhile */
  fputs("labelprof: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  funlockfile(stderr);
  va_end(ap);
}

void lp__fatal(const char *what, int rc) {
  /* Only reached when a mutex or condition variable is corrupt: not a caller's mistake. */
  lp__warn("%s failed (error %d); memory is corrupt", what, rc);
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

/*
 * The library's own wording: values with a meaning of their own here (EBUSY
 * is "already running", EINVAL also "not running"), and those it returns
 * itself, worded as its messages are. Searched first.
 */
static const struct lp__errtext {
  int code;
  const char *text;
} own_errors[] = {
    {0, "success"},
    {EBUSY, "already running"},
    {ETXTBSY, "another stream is writing that file"},
    {EINVAL, "invalid argument, or not running"},
    {ENOTSUP, "not supported"},
    {ENOMEM, "out of memory"},
    {EIO, "input/output error"},
    {ENOSPC, "no space left on device"},
    {EDQUOT, "disk quota exceeded"},
    {EFBIG, "file too large"},
    {ENOENT, "no such file or directory"},
    {ENOTDIR, "a component of the path is not a directory"},
    {EISDIR, "is a directory"},
    {EACCES, "permission denied"},
    {EPERM, "operation not permitted"},
    {EROFS, "read-only file system"},
    {ENAMETOOLONG, "file name too long"},
    {EMFILE, "too many open files"},
    {ENFILE, "too many open files in the system"},
    {EAGAIN, "resource temporarily unavailable"},
    {EEXIST, "file exists"},
    {EPIPE, "broken pipe"},
    {EXDEV, "cross-device link"},
    {ERANGE, "result out of range"},
};

#ifndef HAVE_STRERRORDESC_NP
/*
 * Without glibc's strerrordesc_np (before 2.32, or another C library): the
 * rest of POSIX's error numbers. strerror() is not thread-safe and
 * strerror_r() fills a buffer the caller would have to own, so a table it is.
 * A value two names share (EWOULDBLOCK, EOPNOTSUPP on Linux) is found under
 * the first.
 */
static const struct lp__errtext posix_errors[] = {
    {E2BIG, "argument list too long"},
    {EADDRINUSE, "address already in use"},
    {EADDRNOTAVAIL, "address not available"},
    {EAFNOSUPPORT, "address family not supported"},
    {EALREADY, "connection already in progress"},
    {EBADF, "bad file descriptor"},
    {EBADMSG, "bad message"},
    {ECANCELED, "operation canceled"},
    {ECHILD, "no child processes"},
    {ECONNABORTED, "connection aborted"},
    {ECONNREFUSED, "connection refused"},
    {ECONNRESET, "connection reset"},
    {EDEADLK, "resource deadlock would occur"},
    {EDESTADDRREQ, "destination address required"},
    {EDOM, "mathematics argument out of domain of function"},
    {EFAULT, "bad address"},
    {EHOSTUNREACH, "host is unreachable"},
    {EIDRM, "identifier removed"},
    {EILSEQ, "illegal byte sequence"},
    {EINPROGRESS, "operation in progress"},
    {EINTR, "interrupted function call"},
    {EISCONN, "socket is connected"},
    {ELOOP, "too many levels of symbolic links"},
    {EMLINK, "too many links"},
    {EMSGSIZE, "message too long"},
    {ENETDOWN, "network is down"},
    {ENETRESET, "connection aborted by network"},
    {ENETUNREACH, "network unreachable"},
    {ENOBUFS, "no buffer space available"},
    {ENODEV, "no such device"},
    {ENOEXEC, "executable file format error"},
    {ENOLCK, "no locks available"},
    {ENOMSG, "no message of the desired type"},
    {ENOPROTOOPT, "protocol not available"},
    {ENOSYS, "function not implemented"},
    {ENOTCONN, "the socket is not connected"},
    {ENOTEMPTY, "directory not empty"},
    {ENOTRECOVERABLE, "state not recoverable"},
    {ENOTSOCK, "not a socket"},
    {ENOTTY, "inappropriate I/O control operation"},
    {ENXIO, "no such device or address"},
    {EOPNOTSUPP, "operation not supported on socket"},
    {EOVERFLOW, "value too large to be stored in data type"},
    {EOWNERDEAD, "previous owner died"},
    {EPROTO, "protocol error"},
    {EPROTONOSUPPORT, "protocol not supported"},
    {EPROTOTYPE, "protocol wrong type for socket"},
    {ESPIPE, "invalid seek"},
    {ESRCH, "no such process"},
    {ESTALE, "stale file handle"},
    {ETIMEDOUT, "connection timed out"},
    {ETXTBSY, "text file busy"},
    {EWOULDBLOCK, "operation would block"},
#ifdef ENODATA /* obsolescent in POSIX: STREAMS */
    {ENODATA, "no data available"},
#endif
#ifdef ETIME
    {ETIME, "timer expired"},
#endif
#ifdef EMULTIHOP
    {EMULTIHOP, "multihop attempted"},
#endif
#ifdef ENOLINK
    {ENOLINK, "link has been severed"},
#endif
};
#endif

static const char *lookup(const struct lp__errtext *t, size_t n, unsigned e) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned)t[i].code == e) return t[i].text;
  return NULL;
}

const char *lp_strerror(int err) {
  /* In unsigned arithmetic, so that INT_MIN has a magnitude too. */
  unsigned e = err < 0 ? 0u - (unsigned)err : (unsigned)err;
  const char *s = lookup(own_errors, sizeof own_errors / sizeof own_errors[0], e);
  if (s) return s;
  if (e > INT_MAX) return "unknown error";
#ifdef HAVE_STRERRORDESC_NP
  /* The C library's description of any value it knows: a static string, no locale, no buffer. */
  s = strerrordesc_np((int)e);
#else
  s = lookup(posix_errors, sizeof posix_errors / sizeof posix_errors[0], e);
#endif
  return s ? s : "unknown error";
}

const char *lp__signal_name(int sig, char *buf, size_t len) {
  static const struct {
    int sig;
    const char *name;
  } named[] = {{SIGPROF, "SIGPROF"}, {SIGVTALRM, "SIGVTALRM"}, {SIGALRM, "SIGALRM"}, {SIGUSR1, "SIGUSR1"},
               {SIGUSR2, "SIGUSR2"}};
  for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
    if (named[i].sig == sig) return snprintf(buf, len, "%s", named[i].name), buf;
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) {
    /* Counted from the nearer end, as programs name them. */
    if (sig - SIGRTMIN <= SIGRTMAX - sig)
      snprintf(buf, len, sig == SIGRTMIN ? "SIGRTMIN" : "SIGRTMIN+%d", sig - SIGRTMIN);
    else
      snprintf(buf, len, sig == SIGRTMAX ? "SIGRTMAX" : "SIGRTMAX-%d", SIGRTMAX - sig);
    return buf;
  }
  snprintf(buf, len, "signal %d", sig);
  return buf;
}

/* intern.c's counts of names, read by the timeline's export (see internal.h). */
_Atomic uint64_t lp__names_overflowed, lp__names_limit;

int lp__thread_spawn(pthread_t *th, void *(*fn)(void *), void *arg, const char *name) {
  sigset_t all, old;
  sigfillset(&all);
  int rc = pthread_sigmask(SIG_SETMASK, &all, &old);
  if (rc != 0) return -rc;
  rc = pthread_create(th, NULL, fn, arg);
  int rc2 = pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc2 != 0) lp__fatal("pthread_sigmask", rc2); /* restoring a mask just read cannot fail */
  if (rc != 0) return -rc;
  pthread_setname_np(*th, name); /* cosmetic: a name too long or a failure changes nothing else */
  return 0;
}

/* ---- numbered paths: reports (env.c) and the stream's rotated files (trace.c) ---- */

/* Decimal digits of n, into buf (at least 21 bytes); their count. */
size_t lp__decimal(char *buf, unsigned long long n) {
  char tmp[24];
  size_t len = 0;
  do {
    tmp[len++] = (char)('0' + n % 10);
    n /= 10;
  } while (n);
  for (size_t i = 0; i < len; i++) buf[i] = tmp[len - 1 - i];
  buf[len] = '\0';
  return len;
}

/* a + b, or SIZE_MAX when it would not fit (then no allocation is tried). */
size_t lp__size_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

char *lp__path_numbered(const char *path, unsigned number) {
  char num[24];
  size_t nnum = lp__decimal(num, number), need = 1;
  for (const char *c = path; *c; c++) {
    if (c[0] == '%' && c[1] == 'n')
      need = lp__size_add(need, nnum), c++;
    else if (c[0] == '%' && c[1] == '%')
      need = lp__size_add(need, 1), c++;
    else
      need = lp__size_add(need, 1);
  }
  if (need == SIZE_MAX) return NULL;
  char *out = lp__malloc(need), *o = out;
  if (!out) return NULL;
  for (const char *c = path; *c; c++) {
    if (c[0] == '%' && c[1] == 'n') {
      memcpy(o, num, nnum);
      o += nnum;
      c++;
    } else if (c[0] == '%' && c[1] == '%') {
      *o++ = '%';
      c++;
    } else {
      *o++ = *c;
    }
  }
  *o = '\0';
  return out;
}

bool lp__path_has_number(const char *path) {
  for (const char *c = path; *c; c++) {
    if (c[0] == '%' && c[1] == 'n') return true;
    if (c[0] == '%' && c[1] == '%') c++;
  }
  return false;
}
