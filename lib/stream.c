/*
 * stream.c: the stream's writer (LP_TRACE_STREAM).
 *
 * A writer thread takes the chunks that threads (and tracks) have left,
 * encodes them as Perfetto packets (stream_encode.c's lp__pfs_*), appends
 * them to the file and returns the chunks to the recording (trace.c, which
 * started the stream with an lp__stream_source_t: its lock, and how to
 * collect chunks and give them back). It holds the trace lock only to
 * collect chunks (pinned while it encodes) and to give them back, never
 * while it encodes or writes. While it is behind and the budget has no
 * chunk left, the recording is spent as in discard mode (the hot path drops
 * and counts inline); it is no longer spent once the writer returns chunks.
 * It wakes when an eighth of the budget's chunks (at most ST_BATCH) wait,
 * or ST_WAIT_NS after the first of them was left: each wake then collects,
 * maps the clock and writes a batch (one write per ST_WRITE bytes), and a
 * chunk reaches the file at most ST_WAIT_NS after it filled.
 * A flush also writes the part of each current chunk filled so far: the
 * writer's own timer (each second, LABELPROF_TRACE_FLUSH), so that a
 * program that records slowly has its events in the file within that long
 * whatever the rate, and a killed one loses no more; lp_dump, the dump
 * signal, an export of the session and the tests' lp__trace_stream_sync
 * ask for one and wait. A chunk being filled is read up to the cursor its
 * thread published, without a lock or a wait on the recording path. The
 * stop writes everything, adds the session's notes and closes.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { ST_BATCH = 64, ST_WRITE = 1 << 20 };
#define ST_WAIT_NS 100000000ull
static struct {
  bool on;                 /* a stream is open (trace lock, like everything here) */
  lp__owner_t owner;
  char *path;              /* as given: "%n" is the file's number */
  unsigned number;         /* of the current file */
  int fd;
  uint64_t rotate_bytes, rotate_ns, file_bytes, file_ns;
  pthread_t th;
  bool quit, wake, hold;
  uint32_t pending;        /* chunks left since the writer last collected */
  uint64_t pending_ns;     /* when the first of them was left */
  uint64_t req, done;      /* flushes asked for and done */
  int err;                 /* the first error writing, sticky */
  unsigned err_number;     /* the number of the file it happened to */
  unsigned long_number;    /* the first file whose numbered name was too long (0: none): no later one opens */
  lp__pfs_t *enc;          /* the writer's own (no lock needed) */
  uint64_t written;        /* events written to the stream's files (trace lock) */
  uint32_t threads;        /* thread lanes with events written (trace lock) */
  uint32_t put_threads;    /* thread lanes whose first event written was written since the last count (writer only) */
  lp__lane_t *unwritten;   /* thread lanes with events in the encoder, none yet written (writer only) */
  uint64_t started;        /* bytes of the file whose writeback was started (writer only) */
  uint64_t file_ok;        /* bytes written to the file, whole packets (writer only) */
  bool cut;                /* a write to the file failed: nothing more goes to it (writer only) */
  uint64_t encoded, put;   /* events in the encoder's packets; in packets written since the last count (writer only) */
  uint64_t put_bytes;      /* bytes written since the last count (writer only) */
  uint64_t bytes;          /* bytes written to the stream's files (trace lock) */
  bool uncached;           /* the file takes no writeback hints (a pipe, tmpfs...): none are given */
  uint64_t file_dropped0;  /* the session's drops when the current file began (writer only) */
  uint64_t file_start_ns;  /* when it began, CLOCK_MONOTONIC; 0: with the session (writer only) */
  uint64_t batch;          /* chunks left that wake the writer at once */
  uint64_t flush_ns;       /* how often the writer flushes by itself */
  uint32_t levels;         /* the levels its session asked for */
  lp__stream_source_t src; /* the recording's lock, and its chunks */
  int first_fd;            /* the first file, kept open (and locked) while the stream runs; -1: none */
} st = {.fd = -1, .first_fd = -1};
/*
 * The page cache: the writer starts the writeback of each ST_BEHIND bytes
 * it writes, and once ST_KEEP more are written, waits for that range to be
 * on disk and drops it from the cache, so a long stream keeps at most
 * ST_KEEP + 2 ST_BEHIND of its file cached. (Tests make both smaller.)
 */
static uint64_t st_behind = 8u << 20, st_keep = 32u << 20;
static pthread_cond_t st_cv = PTHREAD_COND_INITIALIZER;      /* the writer waits here */
static pthread_cond_t st_done_cv = PTHREAD_COND_INITIALIZER; /* and flushers here */
static bool st_cv_monotonic; /* st_cv made again with the monotonic clock (trace lock) */
static uint64_t st_flush_ns = 1000000000u; /* LABELPROF_TRACE_FLUSH; set before any stream starts */

void lp__stream_set_flush(uint64_t ns) { st_flush_ns = ns ? ns : 1000000000u; }

void lp__stream_wake(void) {
  if (!st.on || st.wake) return;
  if (st.pending++ == 0) st.pending_ns = lp__mono_ns();
  if (st.pending < st.batch) return; /* the writer's timer takes it */
  st.wake = true;
  int rc = pthread_cond_signal(&st_cv);
  if (rc != 0) lp__fatal("pthread_cond_signal", rc);
}

/* The stream's first error is kept, with the number of the file it happened to. Writer only. */
static void stream_error(int rc) {
  if (rc && !st.err) {
    st.err = rc;
    st.err_number = st.number;
  }
}

/* Appends n bytes, all of them (write(2) may write less, or be interrupted). */
static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (k == 0) return -EIO; /* no progress and no error: never loop on it */
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/*
 * The file's range [at, at + len) (len 0: to its end) waited for on disk
 * and dropped from the page cache. A file that refuses either (a pipe,
 * tmpfs...) is given no more hints; EIO or ENOSPC from the wait is the
 * disk failing to take what was written: the stream's error. Writer only.
 */
static void stream_drop(uint64_t at, uint64_t len) {
  unsigned flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
  if (sync_file_range(st.fd, (off_t)at, (off_t)len, flags) != 0) {
    if (errno == EIO || errno == ENOSPC) stream_error(-errno);
    st.uncached = true;
  } else if (posix_fadvise(st.fd, (off_t)at, (off_t)len, POSIX_FADV_DONTNEED) != 0) {
    st.uncached = true;
  }
}

/*
 * The writeback of the file's new whole ranges started, and the range
 * ST_KEEP behind them on disk and out of the page cache. Advice only: a
 * file that refuses it (ESPIPE for a pipe, EINVAL...) is given no more.
 * Writer only.
 */
static void stream_uncache(void) {
  while (!st.uncached && !st.cut && st.fd >= 0 && st.file_bytes - st.started >= st_behind) {
    if (sync_file_range(st.fd, (off_t)st.started, (off_t)st_behind, SYNC_FILE_RANGE_WRITE) != 0) {
      st.uncached = true;
      return;
    }
    st.started += st_behind;
    if (st.started < st_keep + st_behind) continue;
    stream_drop(st.started - st_keep - st_behind, st_behind);
  }
}

/*
 * A file rotated out, out of the page cache whole: what stream_uncache()
 * keeps cached, written back and dropped. Most of it is on its way to the
 * disk already; the wait is for the rest, about as long as one of
 * stream_uncache()'s. Writer only.
 */
static void stream_uncache_rest(void) {
  if (st.uncached || st.cut || st.fd < 0) return;
  stream_drop(st.started >= st_keep + st_behind ? st.started - st_keep : 0, 0); /* before it: dropped already */
}

/* Appends what the encoder holds, whole packets. Writer only. */
static void stream_put(void) {
  size_t n;
  const uint8_t *b = lp__pfs_bytes(st.enc, &n);
  int rc = lp__pfs_error(st.enc);
  if (!rc && n && st.fd >= 0 && !st.cut) {
    rc = write_all(st.fd, b, n);
    if (rc == 0) {
      st.file_ok += n;
      st.put += st.encoded; /* the statistics count what reached the file */
      st.put_bytes += n;
      for (lp__lane_t *l = st.unwritten; l; l = l->stream_pending) {
        l->stream_state = LP__STREAM_WRITTEN;
        st.put_threads++;
      }
    } else {
      /*
       * Failed part-way (a full disk, RLIMIT_FSIZE): the file ends with its
       * whole packets, as after a kill, and takes nothing more, which would
       * follow a cut packet and be unreadable. A next file starts afresh.
       */
      st.cut = true;
      int cut = ftruncate(st.fd, (off_t)st.file_ok);
      (void)cut; /* fails on a pipe or a FIFO, which cannot take back what they passed on: nothing else to do */
    }
  }
  stream_error(rc);
  st.encoded = 0;
  /* A lane whose packets did not reach the file is not counted for them: a later write may count it. */
  for (lp__lane_t *l = st.unwritten, *next; l; l = next) {
    next = l->stream_pending;
    l->stream_pending = NULL;
    if (l->stream_state == LP__STREAM_PENDING) l->stream_state = LP__STREAM_UNWRITTEN;
  }
  st.unwritten = NULL;
  st.file_bytes += n;
  lp__pfs_clear(st.enc);
  if (!rc) stream_uncache();
}

/*
 * Opens a file of the stream, locked (flock, exclusive) for as long as it is
 * open, so that a second stream given the same file (another process given
 * the same path, a child that inherited LABELPROF_TRACE) finds it taken and
 * writes nothing to it (-ETXTBSY) rather than emptying it under the first. A
 * regular file is emptied only once it is locked; a pipe, a FIFO or a
 * device is neither locked nor emptied. A file system that takes no locks
 * (ENOLCK...) is written unlocked, as before there were locks.
 */
static int stream_open_locked(const char *name) {
  int fd = open(name, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return -errno;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) return fd;
  int rc = 0;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
    rc = -ETXTBSY;
  else if (ftruncate(fd, 0) != 0)
    rc = -errno;
  if (rc == 0) return fd;
  close(fd);
  return rc;
}

/* Opens the next file and writes its first packets. */
static int stream_open_next(void) {
  char *name = lp__path_numbered(st.path, ++st.number);
  /*
   * The next rotation counts from here, whether this file opens or not: one
   * that cannot be opened (no descriptor left, its directory gone) loses
   * what would have gone to it, and the next rotation tries the next number.
   */
  st.file_bytes = 0;
  st.file_ns = lp__mono_ns();
  if (!name) return -ENOMEM;
  int fd = stream_open_locked(name);
  free(name);
  if (fd == -ENAMETOOLONG && !st.long_number) st.long_number = st.number; /* names only grow with the number */
  if (fd < 0) return fd;
  /* The first file stays taken until the stream ends: the same pattern elsewhere must not empty it. */
  if (st.number == 1) st.first_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  st.fd = fd;
  st.started = 0;
  st.uncached = false;
  st.file_ok = 0;
  st.cut = false;
  lp__pfs_restart(st.enc, NULL);
  stream_put();
  return 0;
}

/*
 * The session's notes at the end of the current file, and the file closed;
 * rotated: out of the page cache too (the last file keeps its last ranges
 * cached, as any file written is). The drops a file states are those
 * counted while it was the current file, and its first drop only if that
 * was the session's first: a rotated file read alone speaks for its own
 * span. Writer only, no lock.
 */
static void stream_close_file(bool rotated) {
  lp__drops_t d;
  if (st.src.drops(st.owner, &d) != 0) memset(&d, 0, sizeof d);
  uint64_t now = lp__mono_ns(), from = st.file_start_ns ? st.file_start_ns : d.start_ns;
  lp__notes_t n = {.at_ns = now,
                   .dropped = d.dropped >= st.file_dropped0 ? d.dropped - st.file_dropped0 : 0,
                   .budget_bytes = d.budget_bytes,
                   .start_ns = d.start_ns,
                   .first_drop_ns = d.first_drop_ns >= from ? d.first_drop_ns : 0,
                   .running = rotated, /* a file rotated out: the session goes on in the next */
                   .policy = "stream",
                   .levels = st.levels,
                   .file_start_ns = from,
                   .session_dropped = d.dropped};
  st.file_dropped0 = d.dropped;
  st.file_start_ns = now;
  lp__pfs_finish(st.enc, &n);
  stream_put();
  if (rotated) stream_uncache_rest();
  if (st.fd >= 0 && close(st.fd) != 0) stream_error(-errno);
  st.fd = -1;
}

static void *stream_main(void *arg) {
  (void)arg;
  lp__stream_item_t *items = NULL;
  size_t cap = 0;
  lp__sync_t *syncs = NULL;
  size_t scap = 0;
  lp__lock(st.src.mu);
  uint64_t next_flush = lp__mono_ns() + st.flush_ns;
  for (;;) {
    bool timer = false; /* the writer's own flush is due */
    while (!st.quit && (st.hold || (!st.wake && st.req == st.done))) {
      if (st.hold) { /* the tests' hook */
        int rc = pthread_cond_wait(&st_cv, st.src.mu);
        if (rc != 0) lp__fatal("pthread_cond_wait", rc);
        continue;
      }
      uint64_t at = next_flush;
      if (st.pending && st.pending_ns + ST_WAIT_NS < at) at = st.pending_ns + ST_WAIT_NS;
      struct timespec dl = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
      int rc = pthread_cond_timedwait(&st_cv, st.src.mu, &dl); /* st_cv is on CLOCK_MONOTONIC */
      if (rc == ETIMEDOUT) {
        if (st.hold) continue; /* held meanwhile: wait on */
        timer = lp__mono_ns() >= next_flush;
        break;
      }
      if (rc != 0) lp__fatal("pthread_cond_timedwait", rc);
    }
    bool quit = st.quit;
    uint64_t req = st.req;
    bool all = quit || req != st.done || timer;
    st.wake = false;
    st.pending = 0;
    size_t n = st.src.collect(&items, &cap, all);
    if (all) next_flush = lp__mono_ns() + st.flush_ns; /* what is recorded from now on is flushed by then */
    lp__unlock(st.src.mu);
    /* The clock's points: each chunk's, and now's (after every event collected). */
    if (n + 1 > scap) {
      lp__sync_t *ns = lp__realloc(syncs, (n + 1) * sizeof *ns);
      if (ns) {
        syncs = ns;
        scap = n + 1;
      }
    }
    lp__timemap_t *map = NULL;
    if (scap >= n + 1) {
      for (size_t i = 0; i < n; i++) syncs[i] = items[i].chunk->sync;
      syncs[n] = lp__clock_sync();
      map = lp__timemap_new(syncs, n + 1);
      if (map) lp__pfs_jumps(st.enc, map);
    }
    for (size_t i = 0; i < n; i++) {
      lp__stream_item_t *it = &items[i];
      size_t held;
      lp__pfs_bytes(st.enc, &held);
      if ((st.rotate_bytes && st.file_bytes + held >= st.rotate_bytes) ||
          (st.rotate_ns && lp__mono_ns() - st.file_ns >= st.rotate_ns)) {
        if (st.fd >= 0) stream_close_file(true);
        stream_error(stream_open_next());
      }
      if (!map) {
        stream_error(-ENOMEM);
      } else if (it->from < it->to && it->info.name) {
        uint64_t e0 = lp__pfs_events(st.enc);
        lp__lane_t *l = it->lane;
        lp__pfs_chunk(st.enc, &l->stream, &it->info, it->chunk->ev, it->from, it->to, map, it->chunk->sync);
        uint64_t encoded = lp__pfs_events(st.enc) - e0;
        st.encoded += encoded; /* a new file starts between chunks, never inside one */
        if (encoded && !l->track && l->stream_state == LP__STREAM_UNWRITTEN) {
          l->stream_state = LP__STREAM_PENDING; /* counted once the write that holds its events succeeds */
          l->stream_pending = st.unwritten;
          st.unwritten = l;
        }
        lp__pfs_bytes(st.enc, &held);
        if (held >= ST_WRITE) stream_put(); /* whole chunks: the file is a trace after each write */
      }
    }
    stream_put();
    lp__timemap_free(map);
    if (quit) stream_close_file(false);
    lp__lock(st.src.mu);
    st.written += st.put;
    st.bytes += st.put_bytes;
    st.put_bytes = 0;
    st.put = 0;
    st.threads += st.put_threads;
    st.put_threads = 0;
    st.src.give_back(items, n);
    if (all) {
      st.done = req;
      int rc = pthread_cond_broadcast(&st_done_cv);
      if (rc != 0) lp__fatal("pthread_cond_broadcast", rc);
    }
    if (quit) break;
  }
  lp__unlock(st.src.mu);
  free(items);
  free(syncs);
  return NULL;
}

int lp__stream_start(lp__owner_t who, const lp_trace_opts_t *o, const lp__stream_source_t *src) {
  if (lp__forked_child()) return -ENOTSUP; /* no thread may be started there */
  if (!st_cv_monotonic) {
    /* The writer's timer runs on CLOCK_MONOTONIC. Nobody waits on st_cv without a writer: it can be made again. */
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (rc) return -rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (!rc && !(rc = pthread_cond_destroy(&st_cv))) rc = pthread_cond_init(&st_cv, &a);
    pthread_condattr_destroy(&a);
    if (rc) return -rc;
    st_cv_monotonic = true;
  }
  memset(&st, 0, sizeof st);
  st.fd = st.first_fd = -1;
  st.owner = who;
  st.rotate_bytes = o->rotate_bytes;
  st.rotate_ns = o->rotate_ns;
  uint64_t batch = o->budget_bytes / LP__CHUNK_BYTES / 8;
  st.batch = batch > ST_BATCH ? ST_BATCH : batch ? batch : 1;
  st.flush_ns = st_flush_ns;
  st.levels = o->levels;
  st.src = *src;
  if (!(st.path = lp__strdup(o->path)) || !(st.enc = lp__pfs_new())) {
    free(st.path);
    st.path = NULL;
    return -ENOMEM;
  }
  int rc = stream_open_next();
  if (rc == 0) rc = lp__thread_spawn(&st.th, stream_main, NULL, "labelprof-write");
  if (rc) {
    if (st.fd >= 0) { /* opened and locked, then no writer: the file made for it goes */
      char *name = lp__path_numbered(st.path, 1);
      if (name) unlink(name);
      free(name);
      close(st.fd);
    }
    if (st.first_fd >= 0) close(st.first_fd);
    lp__pfs_free(st.enc);
    free(st.path);
    memset(&st, 0, sizeof st);
    st.fd = st.first_fd = -1;
    return rc;
  }
  st.on = true;
  return 0;
}

int lp__stream_stop(void) {
  st.quit = true;
  int rc = pthread_cond_signal(&st_cv);
  if (rc != 0) lp__fatal("pthread_cond_signal", rc);
  pthread_t th = st.th;
  lp__unlock(st.src.mu);
  rc = pthread_join(th, NULL);
  if (rc != 0) lp__fatal("pthread_join", rc);
  lp__lock(st.src.mu);
  int err = st.err;
  /* Said here too: the environment's session has nobody else to tell. */
  if (err) {
    /* What is lost: to the next rotation, unless a name grew too long, after which no file opens. */
    char *name = lp__path_numbered(st.path, st.err_number ? st.err_number : 1), later[96] = "";
    const char *lost = !(st.rotate_bytes || st.rotate_ns) ? "what was recorded from then on is not in it"
                       : st.long_number == st.err_number
                           ? "its name, and every later file's, is too long: what was recorded from then on is in no file"
                           : "what was recorded from then on to the next rotation is lost";
    if (st.long_number && st.long_number != st.err_number)
      snprintf(later, sizeof later, "; from file %u on the names are too long: what was recorded since is in no file",
               st.long_number);
    lp__warn("cannot write the stream to '%s': %s; %s%s", name ? name : st.path, lp_strerror(err), lost, later);
    free(name);
  }
  lp__pfs_free(st.enc);
  free(st.path);
  st.enc = NULL;
  st.path = NULL;
  if (st.first_fd >= 0) close(st.first_fd); /* the first file free for another stream */
  st.first_fd = -1;
  st.on = st.quit = false;
  rc = pthread_cond_broadcast(&st_done_cv);
  if (rc != 0) lp__fatal("pthread_cond_broadcast", rc);
  return err;
}

int lp__stream_flush(void) {
  if (!st.on) return 0;
  uint64_t my = ++st.req;
  int rc = pthread_cond_signal(&st_cv);
  if (rc != 0) lp__fatal("pthread_cond_signal", rc);
  while (st.on && st.done < my) {
    rc = pthread_cond_wait(&st_done_cv, st.src.mu);
    if (rc != 0) lp__fatal("pthread_cond_wait", rc);
  }
  return st.err;
}

void lp__stream_cache(uint64_t behind, uint64_t keep) {
  st_behind = behind ? behind : 8u << 20;
  st_keep = keep ? keep : 32u << 20;
}

void lp__stream_hold(bool on) {
  st.hold = on;
  if (!on) {
    int rc = pthread_cond_signal(&st_cv);
    if (rc != 0) lp__fatal("pthread_cond_signal", rc);
  }
}

void lp__stream_status(lp__stream_status_t *out) {
  out->on = st.on;
  out->quitting = st.quit;
  out->owner = st.owner;
  out->written = st.written;
  out->bytes = st.bytes;
  out->threads = st.threads;
}

unsigned lp__stream_files(void) { return st.number; }

void lp__stream_atfork_child(void) {
  /* The parent's stream: its writer was not copied and its file is the parent's (its lock stays the parent's). */
  if (st.fd >= 0) close(st.fd);
  if (st.first_fd >= 0) close(st.first_fd);
  lp__pfs_free(st.enc);
  free(st.path);
  memset(&st, 0, sizeof st);
  st.fd = st.first_fd = -1;
  pthread_cond_t fresh_st = PTHREAD_COND_INITIALIZER, fresh_done = PTHREAD_COND_INITIALIZER;
  st_cv = fresh_st;
  st_done_cv = fresh_done;
}
