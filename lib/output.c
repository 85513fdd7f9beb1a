/*
 * output.c: the one place that writes report files.
 *
 * What it owns, from lp__output_open() to lp__output_close(): the descriptor
 * the caller writes to, the target's directory (an O_PATH descriptor, so that
 * a long path is resolved once and the commit renames in the very directory
 * the temporary was made in, whatever happens to the path or the working
 * directory meanwhile), the temporary file, an optional stdio stream, and the
 * calling thread's signal mask.
 *
 * Where a path leads. The directory part of each path is resolved by the
 * kernel; the last component is followed here, one symbolic link at a time
 * (at most 40), because its end may not exist yet (a link to the report to be
 * written) and because a link may lead to a descriptor: /dev/stdout,
 * /dev/stderr, /dev/fd/N and /proc/self/fd/N are recognised by name at every
 * hop and duplicated, so the report goes where the shell redirected them, at
 * the current offset. Links inside /proc are magic (they name open files,
 * not paths), so there the kernel follows them. A regular file, or nothing
 * yet, is replaced through a temporary; anything else is written directly.
 *
 * The invariant everything hangs on: until close has seen every write, the
 * stream's flush and (for a named temporary) the descriptor's close succeed,
 * the target's name refers to the old file, untouched; after a successful
 * close it refers to the whole new one. The only name this file ever creates
 * is the temporary's, and every path out of open or close that does not
 * rename it over the target unlinks it. An O_TMPFILE has no name at all until
 * close links it, so a process that dies mid-write leaves nothing behind.
 *
 * Signals: SIGPIPE and SIGXFSZ are blocked on the calling thread for the
 * whole time, so a reader that went away or RLIMIT_FSIZE turns into -EPIPE or
 * -EFBIG from write(). Both are sent to the writing thread, and a blocked
 * signal stays pending, so close takes back what the writes raised, but only
 * a signal that was not already pending at open: that one belongs to someone
 * else. Dispositions are never touched; other threads are not affected.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#ifndef PROC_SUPER_MAGIC
#define PROC_SUPER_MAGIC 0x9fa0 /* <linux/magic.h> */
#endif

/* The kernel's limit on links in one lookup; we apply it to the last component. */
#define MAX_HOPS 40

bool lp__output_named_temp_only;

/* The two signals a write can raise. */
static void write_signals(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGPIPE);
  sigaddset(set, SIGXFSZ);
}

/* An open() that a signal handler without SA_RESTART cannot fail: opening a FIFO may wait long. */
static int open_at(int dirfd, const char *name, int flags, mode_t mode) {
  int fd;
  do fd = openat(dirfd, name, flags, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

/* A descriptor named by its digits ("12"); -1 for anything else (empty, a sign, too large). */
static int fd_number(const char *s) {
  long n = 0;
  if (!*s) return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    int d = *s - '0';
    if (n > (INT_MAX - d) / 10) return -1;
    n = n * 10 + d;
  }
  return (int)n;
}

/* /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, /proc/thread-self/fd/N: the descriptor, or -1. */
static int named_fd(const char *path) {
  static const char *const dirs[] = {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"};
  if (strcmp(path, "/dev/stdout") == 0) return 1;
  if (strcmp(path, "/dev/stderr") == 0) return 2;
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    size_t n = strlen(dirs[i]);
    if (strncmp(path, dirs[i], n) == 0) return fd_number(path + n);
  }
  return -1;
}

/*
 * Opens the directory part of path (relative to at) as an O_PATH descriptor
 * in *dirfd and copies the last component to *name. path is not empty and
 * does not end with a slash.
 */
static int open_parent(int at, const char *path, int *dirfd, char **name) {
  const char *slash = strrchr(path, '/');
  char *dir = NULL;
  const char *dirpath = ".";
  if (slash == path) {
    dirpath = "/";
  } else if (slash) {
    if (!(dir = lp__strndup(path, (size_t)(slash - path)))) return -ENOMEM;
    dirpath = dir;
  }
  int fd = open_at(at, dirpath, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
  int err = fd < 0 ? -errno : 0;
  free(dir);
  if (err) return err;
  if (!(*name = lp__strdup(slash ? slash + 1 : path))) {
    close(fd);
    return -ENOMEM;
  }
  *dirfd = fd;
  return 0;
}

static bool on_procfs(int dirfd) {
  struct statfs sfs;
  return fstatfs(dirfd, &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC;
}

/* A fresh name for a temporary file: short enough for any file system, whatever the target's length. */
static void temp_name(char *buf, size_t size) {
  static _Atomic unsigned serial;
  snprintf(buf, size, ".labelprof-%ld-%u.tmp", (long)getpid(), atomic_fetch_add(&serial, 1));
}

/*
 * Gives a new file the replaced one's permission bits, owner and group. The
 * mode first, while the file is surely ours to chmod: a 0600 report must not
 * become readable because the owner could not be kept. A caller who may not
 * give the file away (EPERM, or EINVAL for an id its user namespace does not
 * map) keeps what it can: the group if it belongs to it, else nothing; that
 * is not an error. A chown clears set-id bits, so they are set again after
 * it where the kernel still allows.
 */
static int keep_attributes(int fd, const struct stat *old) {
  mode_t mode = old->st_mode & 07777;
  if (fchmod(fd, mode) != 0) return -errno;
  if (fchown(fd, old->st_uid, old->st_gid) != 0) {
    if (errno != EPERM && errno != EINVAL) return -errno;
    if (fchown(fd, (uid_t)-1, old->st_gid) != 0 && errno != EPERM && errno != EINVAL) return -errno;
  }
  if ((mode & (S_ISUID | S_ISGID)) && fchmod(fd, mode) != 0 && errno != EPERM) return -errno;
  return 0;
}

/*
 * An O_TMPFILE in o->dirfd, if the file system has them and /proc lets close
 * link it (it links /proc/self/fd/N). Returns the descriptor, a negative
 * errno, or 0 with *unsupported set: use a named temporary instead.
 */
static int open_tmpfile(lp__output_t *o, mode_t mode, bool *unsupported) {
  *unsupported = true;
  if (lp__output_named_temp_only) return 0;
  int fd = open_at(o->dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
  if (fd < 0) {
    /*
     * Not supported here: by the file system (EOPNOTSUPP), or by a kernel
     * older than 3.11, which ignores the flag (EISDIR) or lacks it (ENOENT,
     * EINVAL). Anything else (EACCES, EROFS, ENOSPC, EMFILE) would fail a
     * named temporary just the same.
     */
    if (errno == EOPNOTSUPP || errno == EISDIR || errno == ENOENT || errno == EINVAL) return 0;
    *unsupported = false;
    return -errno;
  }
  char proc[40];
  struct stat a, b;
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  if (fstat(fd, &a) != 0 || stat(proc, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
    close(fd); /* no /proc: the file could never be given a name */
    return 0;
  }
  *unsupported = false;
  return fd;
}

/* A named temporary in o->dirfd, its name in o->tmp. */
static int open_named_temp(lp__output_t *o, mode_t mode) {
  for (int attempt = 0; attempt < 100; attempt++) {
    temp_name(o->tmp, sizeof o->tmp);
    int fd = open_at(o->dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd >= 0) return fd;
    if (errno != EEXIST) break; /* EEXIST: a name left by a process that had our pid; try the next */
  }
  int err = errno;
  o->tmp[0] = '\0';
  return -err;
}

/*
 * The target (o->dirfd, o->final) is a regular file (old) or does not exist
 * (old NULL): write a temporary next to it. A new file is created with 0666
 * less the umask, like any file a program creates; a replacement starts
 * private (0600) and is given the old file's attributes before anything is
 * written to it.
 */
static int open_replacement(lp__output_t *o, const struct stat *old) {
  mode_t mode = old ? 0600 : 0666;
  bool unsupported;
  int fd = open_tmpfile(o, mode, &unsupported);
  if (fd < 0) return fd;
  if (!unsupported) {
    o->tmpfile = true;
  } else if ((fd = open_named_temp(o, mode)) < 0) {
    return fd;
  }
  o->fd = fd;
  return old ? keep_attributes(fd, old) : 0;
}

/*
 * Opens name in dirfd to be written directly: a FIFO (which waits for a
 * reader), a device, a magic link in /proc (flags O_TRUNC: a regular file
 * behind it is written in place, as no temporary can be made there). If a
 * FIFO or device turns out to be a regular file after all (it was replaced
 * since we looked), o->fd stays -1 and *st says so: the caller replaces it.
 */
static int open_direct(lp__output_t *o, int dirfd, const char *name, int flags, struct stat *st) {
  int fd = open_at(dirfd, name, O_WRONLY | O_NOCTTY | O_CLOEXEC | flags, 0);
  if (fd < 0) return -errno;
  if (fstat(fd, st) != 0) {
    int err = -errno;
    close(fd);
    return err;
  }
  if (S_ISREG(st->st_mode) && !(flags & O_TRUNC)) {
    close(fd);
    return 0;
  }
  o->fd = fd;
  return 0;
}

/* Follows path to what it leads to and opens it (see the top of the file). */
static int resolve_and_open(lp__output_t *o, const char *path) {
  char *link = NULL; /* the last link's target, PATH_MAX bytes */
  int at = AT_FDCWD; /* what a relative path is relative to: the last link's directory */
  int err = 0;
  for (int hops = 0;; hops++) {
    int named = named_fd(path);
    if (named >= 0) {
      o->fd = fcntl(named, F_DUPFD_CLOEXEC, 3);
      err = o->fd < 0 ? -errno : 0;
      break;
    }
    size_t len = strlen(path);
    if (len == 0) {
      err = -ENOENT;
      break;
    }
    if (path[len - 1] == '/') {
      /* Only a directory can end with a slash, and no directory can be written: the kernel says why. */
      int fd = open_at(at, path, O_WRONLY | O_CLOEXEC, 0);
      err = fd < 0 ? -errno : -EISDIR;
      if (fd >= 0) close(fd);
      break;
    }
    int dirfd;
    char *name;
    err = open_parent(at, path, &dirfd, &name);
    if (at != AT_FDCWD) close(at);
    at = AT_FDCWD;
    if (err) break;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) {
        err = -errno;
        close(dirfd);
        free(name);
        break;
      }
      o->dirfd = dirfd;
      o->final = name;
      err = open_replacement(o, NULL); /* nothing there yet */
      break;
    }
    if (S_ISLNK(st.st_mode) && on_procfs(dirfd)) {
      /* /proc/PID/fd/N and the like: the kernel opens the file the link stands for. */
      err = open_direct(o, dirfd, name, O_TRUNC, &st);
      close(dirfd);
      free(name);
      break;
    }
    if (S_ISLNK(st.st_mode)) {
      if (hops == MAX_HOPS) {
        err = -ELOOP;
      } else if (!link && !(link = lp__malloc(PATH_MAX))) {
        err = -ENOMEM;
      } else {
        ssize_t n = readlinkat(dirfd, name, link, PATH_MAX);
        if (n < 0)
          err = -errno;
        else if (n == PATH_MAX)
          err = -ENAMETOOLONG;
        else
          link[n] = '\0';
      }
      free(name);
      if (err) {
        close(dirfd);
        break;
      }
      at = dirfd; /* a relative target is relative to the link's directory */
      path = link;
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      err = open_direct(o, dirfd, name, O_NOFOLLOW, &st);
      if (err || o->fd >= 0) {
        close(dirfd);
        free(name);
        break;
      }
      /* it became a regular file under us: fall through and replace it */
    }
    o->dirfd = dirfd;
    o->final = name;
    err = open_replacement(o, &st);
    break;
  }
  if (at != AT_FDCWD) close(at);
  free(link);
  return err;
}

int lp__output_open(lp__output_t *o, const char *path) {
  if (!o) return -EINVAL;
  memset(o, 0, sizeof *o);
  o->fd = o->dirfd = -1;
  if (!path) return -EINVAL;
  sigset_t set;
  write_signals(&set);
  int rc = pthread_sigmask(SIG_BLOCK, &set, &o->old_mask);
  if (rc != 0) return -rc;
  o->masked = true;
  /* Blocked now, so whatever is pending stays pending until close looks again. */
  if (sigpending(&o->pending_before) != 0) sigemptyset(&o->pending_before);
  rc = resolve_and_open(o, path);
  if (rc != 0) return lp__output_close(o, rc);
  return 0;
}

#ifdef HAVE_FOPENCOOKIE
/*
 * The stream writes to o->fd itself, through these, so that the first
 * write error is kept with its errno. A stream on a descriptor loses it:
 * an fwrite larger than the buffer goes straight to write(), and when that
 * fails nothing is left buffered for the flush at close to fail on again,
 * so all that remains is ferror() and no reason (-EIO where -EFBIG was due).
 */
static ssize_t cookie_write(void *cookie, const char *buf, size_t n) {
  lp__output_t *o = cookie;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(o->fd, buf + done, n - done);
    if (w > 0) {
      done += (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      if (!o->stream_err) o->stream_err = w < 0 ? -errno : -EIO;
      break;
    }
  }
  /* A partial count tells stdio the rest failed; nothing at all is an error. */
  return done > 0 ? (ssize_t)done : -1;
}

static int cookie_close(void *cookie) {
  (void)cookie; /* o->fd is lp__output_close's to close: it commits with it */
  return 0;
}
#endif

FILE *lp__output_stream(lp__output_t *o) {
  if (!o || o->fd < 0) {
    errno = EBADF;
    return NULL;
  }
  if (o->stream) return o->stream;
#ifdef HAVE_FOPENCOOKIE
  o->stream = fopencookie(o, "w", (cookie_io_functions_t){.write = cookie_write, .close = cookie_close});
#else
  /* A duplicate, so that fclose leaves o->fd to lp__output_close, which still needs it to commit. */
  int fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return NULL;
  if (!(o->stream = fdopen(fd, "w"))) {
    int err = errno;
    close(fd);
    errno = err;
  }
#endif
  return o->stream;
}

/* Flushes and closes the stream; the first error, 0 if none. */
static int close_stream(lp__output_t *o) {
  if (!o->stream) return 0;
  errno = 0;
  int flushed = fflush(o->stream);
  int err = o->stream_err; /* the first write's own errno, where the cookie kept it */
  if (!err && flushed != 0) err = errno ? -errno : -EIO;
  if (!err && ferror(o->stream)) err = -EIO; /* failed earlier; the reason went with the bytes */
  if (fclose(o->stream) != 0 && !err) err = -errno;
  o->stream = NULL;
  return err;
}

/* Gives the O_TMPFILE a name, o->tmp, in the target's directory. */
static int link_tmpfile(lp__output_t *o) {
  char proc[40];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", o->fd);
  for (int attempt = 0; attempt < 100; attempt++) {
    temp_name(o->tmp, sizeof o->tmp);
    if (linkat(AT_FDCWD, proc, o->dirfd, o->tmp, AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno != EEXIST) break;
  }
  int err = errno;
  o->tmp[0] = '\0';
  return -err;
}

/* close() whose EINTR is no failure: Linux has released the descriptor, and nothing was lost. */
static int close_fd(int fd) {
  return close(fd) == 0 || errno == EINTR ? 0 : -errno;
}

/* Takes back a SIGPIPE or SIGXFSZ that our writes left pending, then restores the caller's mask. */
static void restore_signals(lp__output_t *o) {
  sigset_t now;
  if (sigpending(&now) == 0) {
    static const int sigs[] = {SIGPIPE, SIGXFSZ};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
      if (!sigismember(&now, sigs[i]) || sigismember(&o->pending_before, sigs[i])) continue;
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sigs[i]);
      struct timespec zero = {0, 0};
      while (sigtimedwait(&one, NULL, &zero) < 0 && errno == EINTR) {
      }
    }
  }
  pthread_sigmask(SIG_SETMASK, &o->old_mask, NULL); /* cannot fail: the mask came from the kernel */
  o->masked = false;
}

int lp__output_close(lp__output_t *o, int rc) {
  if (!o) return rc ? rc : -EINVAL;
  int err = close_stream(o);
  if (rc == 0) rc = err;
  if (o->fd >= 0) {
    if (o->tmpfile) {
      /* An O_TMPFILE is linked while it is still open: its /proc name dies with the descriptor. */
      if (rc == 0) rc = link_tmpfile(o);
      err = close_fd(o->fd);
    } else {
      /* Closed before the rename: a file system that reports write errors at close must not lose them. */
      err = close_fd(o->fd);
    }
    if (rc == 0) rc = err;
    o->fd = -1;
  }
  if (o->tmp[0]) {
    if (rc == 0 && renameat(o->dirfd, o->tmp, o->dirfd, o->final) != 0) rc = -errno;
    if (rc != 0) unlinkat(o->dirfd, o->tmp, 0);
    o->tmp[0] = '\0';
  }
  if (o->dirfd >= 0) close(o->dirfd);
  o->dirfd = -1;
  free(o->final);
  o->final = NULL;
  o->tmpfile = false;
  if (o->masked) restore_signals(o);
  return rc;
}
