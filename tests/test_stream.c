/*
 * test_stream.c: the streamed timeline (LP_TRACE_STREAM). Sessions many
 * times longer than their budget, written to a Perfetto file while they
 * run, read back by perfetto_decode.h (which also checks the encoding rules
 * of every sequence). The writer is driven without sleeps: the test hooks
 * lp__trace_stream_sync (wait until everything recorded is written) and
 * lp__trace_stream_hold (keep the writer from running).
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#include "perfetto_decode.h"
#include "runner.h"

static const char *dir;

static lp_trace_opts_t stream_opts(const char *path, uint64_t budget) {
  lp_trace_opts_t o;
  memset(&o, 0, sizeof o);
  o.policy = LP_TRACE_STREAM;
  o.budget_bytes = budget;
  o.path = path;
  o.clock = LP_CLOCK_MONOTONIC;
  return o;
}

/* Lines of t whose name field is name and phase ph. */
static size_t count_lines(const pd_trace_t *t, const char *ph, const char *name) {
  size_t n = 0;
  char want[256];
  snprintf(want, sizeof want, "|%s|", ph);
  for (size_t i = 0; i < t->lines.n; i++) {
    const char *l = t->lines.v[i], *p = strstr(l, want);
    if (!p) continue;
    p = strchr(p + strlen(want), '|'); /* past the category */
    if (p && strncmp(p + 1, name, strlen(name)) == 0 && p[1 + strlen(name)] == '|') n++;
  }
  return n;
}

/* "events_dropped=N" of the session's notes, or -1. */
static long long notes_dropped(const pd_trace_t *t) {
  const char *p = strstr(t->session, "events_dropped=");
  return p ? atoll(p + strlen("events_dropped=")) : -1;
}

/*
 * Ends a session that must have dropped nothing, and decodes its file at
 * path into *t (free t->lines after): the stats say no drop, the stop
 * succeeds and the file decodes (its error on stderr if not).
 */
static void stream_stop_and_decode(const char *path, pd_trace_t *t) {
  lp_trace_stats_t s;
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  CU_ASSERT_EQUAL(s.dropped, 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  memset(t, 0, sizeof *t);
  int rc = pd_decode(t, path);
  if (rc) fprintf(stderr, "decode %s: %s\n", path, t->error);
  CU_ASSERT_EQUAL(rc, 0);
}

static void work(unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    LP_SCOPE("stream inner");
  }
}

/* A session of many budgets' worth of scopes, the writer kept up with: every scope is in the file. */
static void test_stream_longer_than_budget(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/long.pftrace", dir);
  lp_trace_opts_t o = stream_opts(path, 4 * LP__CHUNK_BYTES);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  const unsigned rounds = 200, per = 300; /* 600 events a round, under one chunk: 30 budgets in all */
  {
    LP_SCOPE("stream outer"); /* open across every chunk */
    for (unsigned r = 0; r < rounds; r++) {
      work(per);
      CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
    }
    CU_ASSERT(lp__trace_held_bytes() <= 4 * LP__CHUNK_BYTES + 64 * LP__CHUNK_BYTES);
  }
  pd_trace_t t;
  stream_stop_and_decode(path, &t);
  /* Its statistics count what went to the file, not what is left in memory. */
  lp_trace_stats_t s;
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  CU_ASSERT_EQUAL(s.recorded, 2 * ((uint64_t)rounds * per + 1));
  CU_ASSERT_EQUAL(s.threads, 1);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "stream inner"), (size_t)rounds * per);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "stream outer"), 1);
  CU_ASSERT_EQUAL(notes_dropped(&t), 0);
  struct stat sb;
  CU_ASSERT(stat(path, &sb) == 0 && (uint64_t)sb.st_size > 4 * LP__CHUNK_BYTES);
  pd_free(&t.lines);
}

/*
 * A stream leaves its file out of the page cache but for its last ranges:
 * with ranges of 64 KiB and 256 KiB kept, a file of a few MiB has nothing
 * cached before its last 384 KiB (mincore() on a mapping of it, read
 * before anything reads the file). Only on file systems whose writeback
 * the writer can wait for and whose clean pages it can drop (ext4, XFS,
 * Btrfs); elsewhere (tmpfs, overlays) a note says the check was skipped.
 */
static void test_stream_leaves_the_page_cache(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/uncached.pftrace", dir);
  struct statfs fs;
  CU_ASSERT_EQUAL_FATAL(statfs(dir, &fs), 0);
  if (fs.f_type != 0xEF53 && fs.f_type != 0x58465342 && fs.f_type != (__typeof__(fs.f_type))0x9123683E) {
    printf("\n    skipped: %s is on a file system (0x%lx) not checked here\n", dir, (unsigned long)fs.f_type);
    return;
  }
  enum { BEHIND = 64 << 10, KEEP = 256 << 10 };
  lp__trace_stream_cache(BEHIND, KEEP);
  lp_trace_opts_t o = stream_opts(path, 64 * LP__CHUNK_BYTES);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  for (int r = 0; r < 100; r++) {
    work(2000); /* about 50 KB of packets a round */
    CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
  }
  lp_trace_stats_t s;
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  CU_ASSERT_EQUAL(s.dropped, 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  lp__trace_stream_cache(0, 0);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  CU_ASSERT_FATAL(fd >= 0);
  struct stat sb;
  CU_ASSERT_FATAL(fstat(fd, &sb) == 0);
  CU_ASSERT_FATAL(sb.st_size > 2 * (KEEP + 2 * BEHIND));
  size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (size_t)sb.st_size;
  void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
  CU_ASSERT_FATAL(map != MAP_FAILED);
  unsigned char *in = calloc((len + page - 1) / page, 1);
  CU_ASSERT_FATAL(in != NULL);
  CU_ASSERT_EQUAL_FATAL(mincore(map, len, in), 0);
  size_t old = (len - (KEEP + 2 * BEHIND)) / page, cached_old = 0;
  for (size_t i = 0; i < old; i++) cached_old += in[i] & 1;
  if (cached_old) fprintf(stderr, "%zu of the first %zu pages cached\n", cached_old, old);
  CU_ASSERT_EQUAL(cached_old, 0);
  free(in);
  munmap(map, len);
  close(fd);
  unlink(path);
}

/* Pages of the file at path in the page cache, from its start up to len - tail bytes; -1 if not read. */
static long cached_pages(const char *path, size_t tail) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat sb;
  long cached = -1;
  if (fstat(fd, &sb) == 0 && (size_t)sb.st_size > tail) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (size_t)sb.st_size;
    void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    unsigned char *in = calloc((len + page - 1) / page, 1);
    if (map != MAP_FAILED && in && mincore(map, len, in) == 0) {
      cached = 0;
      for (size_t i = 0; i < (len - tail) / page; i++) cached += in[i] & 1;
    }
    free(in);
    if (map != MAP_FAILED) munmap(map, len);
  }
  close(fd);
  return cached;
}

/*
 * A rotated stream: each file rotated out leaves the page cache whole, as
 * a long file's older ranges do, so that files of a few MiB (less than
 * the range kept cached) do not stay cached one after another. Only the
 * last file keeps its last ranges.
 */
static void test_stream_rotated_files_leave_the_page_cache(void) {
  struct statfs fs;
  CU_ASSERT_EQUAL_FATAL(statfs(dir, &fs), 0);
  if (fs.f_type != 0xEF53 && fs.f_type != 0x58465342 && fs.f_type != (__typeof__(fs.f_type))0x9123683E) {
    printf("\n    skipped: %s is on a file system (0x%lx) not checked here\n", dir, (unsigned long)fs.f_type);
    return;
  }
  char path[256];
  snprintf(path, sizeof path, "%s/rotcache-%%n.pftrace", dir);
  lp__trace_stream_cache(64 << 10, 256 << 10);
  lp_trace_opts_t o = stream_opts(path, 64 * LP__CHUNK_BYTES);
  o.rotate_bytes = 1 << 20; /* more than the 384 KiB kept: each file drops its older ranges as it goes too */
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  for (int r = 0; r < 80; r++) {
    work(2000); /* about 50 KB of packets a round: four files or more */
    CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  lp__trace_stream_cache(0, 0);
  unsigned files = 0;
  for (unsigned k = 1;; k++) {
    char f[300];
    snprintf(f, sizeof f, "%s/rotcache-%u.pftrace", dir, k);
    struct stat sb;
    if (stat(f, &sb) != 0) break;
    files++;
  }
  CU_ASSERT(files >= 3);
  for (unsigned k = 1; k <= files; k++) {
    char f[300];
    snprintf(f, sizeof f, "%s/rotcache-%u.pftrace", dir, k);
    if (k < files) {
      long c = cached_pages(f, 0);
      if (c != 0) fprintf(stderr, "%s: %ld pages cached\n", f, c);
      CU_ASSERT_EQUAL(c, 0);
    }
    unlink(f);
  }
}

/* A writer held back: the budget fills, later events are dropped and counted, nothing waits. */
static void test_stream_writer_behind_drops(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/held.pftrace", dir);
  lp_trace_opts_t o = stream_opts(path, 2 * LP__CHUNK_BYTES);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  lp__trace_stream_hold(true);
  const unsigned n = 20 * LP__CHUNK_EVENTS; /* ten budgets' worth */
  work(n); /* returns: the hot path never waited for the writer */
  lp_trace_stats_t s;
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  CU_ASSERT(s.dropped > 0);
  CU_ASSERT(lp__trace_held_bytes() <= 2 * LP__CHUNK_BYTES + 64 * LP__CHUNK_BYTES);
  lp__trace_stream_hold(false);
  CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
  work(100); /* recording again once the writer has given chunks back */
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL(pd_decode(&t, path), 0);
  size_t got = count_lines(&t, "X", "stream inner");
  CU_ASSERT(got >= 100 && got < n);
  CU_ASSERT(notes_dropped(&t) > 0);
  pd_free(&t.lines);
}

/*
 * Drops count events in a stream too: a writer held back, two threads
 * running two nested scopes (4 events a round), one scope open across it
 * all; then the writer let go, and more rounds recorded. What the file
 * holds and what it says was dropped add up to every event.
 */
static void *nested_rounds(void *arg) {
  long n = (long)(intptr_t)arg;
  for (long i = 0; i < n; i++) {
    LP_SCOPE("stream outer");
    LP_SCOPE("stream inner");
  }
  return NULL;
}

static void test_stream_drops_count_events(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/drops.pftrace", dir);
  lp_trace_opts_t o = stream_opts(path, 2 * LP__CHUNK_BYTES);
  const long n = 5 * LP__CHUNK_EVENTS, after = 100; /* twenty budgets' worth a thread, then some recorded */
  const uint64_t total = 2 * 4 * ((uint64_t)n + after) + 2;
  pthread_t th;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  {
    LP_SCOPE("stream across");
    lp__trace_stream_hold(true);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, nested_rounds, (void *)(intptr_t)n), 0);
    nested_rounds((void *)(intptr_t)n);
    CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
    lp__trace_stream_hold(false);
    CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, nested_rounds, (void *)(intptr_t)after), 0);
    nested_rounds((void *)(intptr_t)after); /* recorded again once the writer has given chunks back */
    CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  lp_trace_stats_t s;
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  if (s.recorded + s.dropped != total)
    printf("\n    %llu written + %llu dropped, of %llu events ", (unsigned long long)s.recorded,
           (unsigned long long)s.dropped, (unsigned long long)total);
  CU_ASSERT_EQUAL(s.recorded + s.dropped, total);
  CU_ASSERT(s.dropped > total / 2);
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL_FATAL(pd_decode(&t, path), 0);
  CU_ASSERT_EQUAL(notes_dropped(&t), (long long)s.dropped);
  size_t pairs = count_lines(&t, "X", "stream outer") + count_lines(&t, "X", "stream inner") +
                 count_lines(&t, "X", "stream across");
  CU_ASSERT_EQUAL(2 * pairs, s.recorded);
  CU_ASSERT(count_lines(&t, "X", "stream inner") >= 2 * (size_t)after);
  pd_free(&t.lines);
}

/* An export of the streamed session flushes the stream: the file holds every scope so far, while it runs. */
static void test_stream_export_flushes(void) {
  char path[256], other[256];
  snprintf(path, sizeof path, "%s/flush.pftrace", dir);
  snprintf(other, sizeof other, "%s/other.json", dir);
  lp_trace_opts_t o = stream_opts(path, 8 * LP__CHUNK_BYTES);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  work(37); /* well under a chunk: nothing closed yet */
  CU_ASSERT_EQUAL(lp_trace_write_json(other, NULL), 0);
  struct stat sb;
  CU_ASSERT(stat(other, &sb) != 0); /* the events are in the stream, not here */
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL(pd_decode(&t, path), 0);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "stream inner"), 37);
  pd_free(&t.lines);
  work(5);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL(pd_decode(&t, path), 0);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "stream inner"), 42);
  pd_free(&t.lines);
}

/* Rotation: several files, each a trace on its own; together they hold every scope. */
static void test_stream_rotation(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/rot-%%n.pftrace", dir);
  lp_trace_opts_t o = stream_opts(path, 4 * LP__CHUNK_BYTES);
  o.rotate_bytes = 8192;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  const unsigned rounds = 40, per = 300;
  {
    LP_SCOPE("stream outer");
    for (unsigned r = 0; r < rounds; r++) {
      work(per);
      CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
    }
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  size_t files = 0, inner = 0, outer_open = 0, outer = 0;
  for (unsigned k = 1;; k++) {
    char f[256];
    snprintf(f, sizeof f, "%s/rot-%u.pftrace", dir, k);
    struct stat sb;
    if (stat(f, &sb) != 0) break;
    files++;
    pd_trace_t t;
    memset(&t, 0, sizeof t);
    int rc = pd_decode(&t, f);
    if (rc) fprintf(stderr, "%s: %s\n", f, t.error);
    CU_ASSERT_EQUAL(rc, 0);
    inner += count_lines(&t, "X", "stream inner");
    outer += count_lines(&t, "X", "stream outer");
    outer_open += count_lines(&t, "B", "stream outer");
    pd_free(&t.lines);
  }
  CU_ASSERT(files >= 3);
  if (inner != (size_t)rounds * per) fprintf(stderr, "inner %zu files %zu outer %zu open %zu\n", inner, files, outer, outer_open);
  CU_ASSERT_EQUAL(inner, (size_t)rounds * per);
  CU_ASSERT_EQUAL(outer, 1);                /* ended in the last file */
  CU_ASSERT_EQUAL(outer_open, files - 1);   /* and open in every earlier one */
  /* A file that cannot be written: the stop says so, and nothing waits. */
  lp_trace_opts_t full = stream_opts("/dev/full", 4 * LP__CHUNK_BYTES);
  if (lp_trace_start(&full) == 0) {
    work(5000);
    CU_ASSERT_EQUAL(lp_trace_stop(), -ENOSPC);
  }
  lp_trace_opts_t bad = stream_opts("no-number.pftrace", 4 * LP__CHUNK_BYTES);
  bad.rotate_ns = 1000000000u;
  CU_ASSERT_EQUAL(lp_trace_start(&bad), -EINVAL); /* rotation needs %n */
  bad = stream_opts(NULL, 4 * LP__CHUNK_BYTES);
  CU_ASSERT_EQUAL(lp_trace_start(&bad), -EINVAL);
}

static jmp_buf jump;
static void skipped(void) {
  LP_SCOPE("stream skipped");
  longjmp(jump, 1);
}

static void *other_thread(void *arg) {
  lp_thread_set_name("stream other");
  work(*(unsigned *)arg);
  return NULL;
}

/* Instants, counters, virtual tracks, a second thread that exits, and a begin left by a longjmp, all streamed. */
static void test_stream_kinds(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/kinds.pftrace", dir);
  lp_trace_opts_t o = stream_opts(path, 64 * LP__CHUNK_BYTES); /* room for a round: nothing dropped */
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  lp_track_t gpu = lp_track_create("stream gpu");
  CU_ASSERT(gpu >= 0);
  uint64_t t0 = lp__mono_ns();
  unsigned per = 2000;
  for (int r = 0; r < 10; r++) {
    LP_INSTANT("stream tick");
    LP_COUNTER("stream depth", r);
    CU_ASSERT_EQUAL(lp_track_complete(gpu, "stream kernel", t0 + 1000 * (uint64_t)r, 500), 0);
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, other_thread, &per), 0);
    CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
    {
      LP_SCOPE("stream catcher");
      if (setjmp(jump) == 0) skipped(); /* its scope never ends: the next begin at its depth ends it */
      { LP_SCOPE("stream after"); }
    }
    CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
  }
  pd_trace_t t;
  stream_stop_and_decode(path, &t);
  CU_ASSERT_EQUAL(count_lines(&t, "i", "stream tick"), 10);
  size_t counters = 0, kernels = 0, nskipped = 0;
  for (size_t i = 0; i < t.lines.n; i++) {
    counters += strncmp(t.lines.v[i], "counter|C||stream depth|", 24) == 0;
    kernels += strncmp(t.lines.v[i], "stream gpu|X|track|stream kernel|", 33) == 0;
    nskipped += strstr(t.lines.v[i], "|stream skipped|") != NULL && strstr(t.lines.v[i], "unterminated") != NULL;
  }
  if (nskipped != 10)
    for (size_t i = 0; i < t.lines.n; i++)
      if (!strstr(t.lines.v[i], "stream inner")) fprintf(stderr, "%s\n", t.lines.v[i]);
  CU_ASSERT_EQUAL(counters, 10);
  CU_ASSERT_EQUAL(kernels, 10);
  CU_ASSERT_EQUAL(nskipped, 10);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "stream after"), 10);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "stream inner"), 10 * per);
  pd_free(&t.lines);
}

/* A streamed session that recorded nothing: its file still places its notes in time (see test_perfetto). */
static void test_stream_empty_session_keeps_its_notes(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/empty.pftrace", dir);
  lp_trace_opts_t o = stream_opts(path, 4 * LP__CHUNK_BYTES);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  pd_trace_t t;
  stream_stop_and_decode(path, &t);
  CU_ASSERT_EQUAL(t.lines.n, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(t.session, "policy=stream"));
  pd_free(&t.lines);
  unlink(path);
}

static void counter_site_a(int v) { LP_COUNTER("stream shared depth", v); }
static void counter_site_b(int v) { LP_COUNTER("stream shared depth", v); }

/* Whether t has the line lane|X|track|name|ts|dur| (a track item, no flags). */
static bool has_item(const pd_trace_t *t, const char *lane, const char *name, uint64_t ts, uint64_t dur) {
  char want[512];
  snprintf(want, sizeof want, "%s|X|track|%s|%llu|%llu|", lane, name, (unsigned long long)ts, (unsigned long long)dur);
  for (size_t i = 0; i < t->lines.n; i++)
    if (strcmp(t->lines.v[i], want) == 0) return true;
  fprintf(stderr, "no line %s\n", want);
  return false;
}

/*
 * A track's items keep their own times in the stream, whatever order they
 * are given in: work done inside other work is given first (it ends first),
 * and the enclosing item starts before it. An item that starts where the one
 * given before it ended starts 1 ns later, as in the file written at the end.
 * Names are shared as the JSON shares them (see test_perfetto).
 */
static void test_stream_track_items_keep_their_times(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/items.pftrace", dir);
  lp_trace_opts_t o = stream_opts(path, 64 * LP__CHUNK_BYTES);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  lp_track_t q = lp_track_create("stream nest");
  CU_ASSERT(q >= 0);
  uint64_t t0 = lp__mono_ns();
  CU_ASSERT_EQUAL(lp_track_complete(q, "inner item", t0 + 5000, 3000), 0);
  CU_ASSERT_EQUAL(lp_track_complete(q, "outer item", t0 + 1000, 20000), 0);
  CU_ASSERT_EQUAL(lp_track_complete(q, "next item", t0 + 21000, 1000), 0);
  lp_track_t twin = lp_track_create("stream nest"); /* a second track of that name: a lane of its own */
  CU_ASSERT(twin >= 0);
  CU_ASSERT_EQUAL(lp_track_complete(twin, "twin item", t0 + 2000, 1000), 0);
  counter_site_a(1); /* two counter sites of one name: one counter, as in the JSON */
  counter_site_b(2);
  pd_trace_t t;
  stream_stop_and_decode(path, &t);
  CU_ASSERT(has_item(&t, "stream nest", "inner item", t0 + 5000, 3000));
  CU_ASSERT(has_item(&t, "stream nest", "outer item", t0 + 1000, 20000));
  CU_ASSERT(has_item(&t, "stream nest", "next item", t0 + 21001, 999));
  CU_ASSERT(has_item(&t, "stream nest", "twin item", t0 + 2000, 1000));
  CU_ASSERT_EQUAL(count_lines(&t, "C", "stream shared depth"), 2);
  pd_free(&t.lines);
}

/* n bytes written to path and decoded into *t; pd_decode's result (its error said on stderr). */
static int decode_bytes(pd_trace_t *t, const char *path, const uint8_t *bytes, size_t n) {
  memset(t, 0, sizeof *t);
  FILE *fp = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  CU_ASSERT_EQUAL(fwrite(bytes, 1, n, fp), n);
  CU_ASSERT_EQUAL(fclose(fp), 0);
  int rc = pd_decode(t, path);
  if (rc) fprintf(stderr, "decode: %s\n", t->error);
  return rc;
}

/*
 * The encoder alone, on made-up chunks: 300 sites (name iids past 127, two
 * bytes), each pair of them again and again (the encoder's fast path after
 * their first time), gaps of 50, 200, 20,000 and 40,000 ticks (timestamps
 * of one, two and three bytes, and two bytes' largest), and the events
 * split across two chunks at an odd place. Every scope must come back with
 * the clock map's time for its begin and its end. This suite records on
 * CLOCK_MONOTONIC, so the map is the identity here; a child runs it again
 * on the counter, where the map's lines are real: ticks_per_ns 1 (a line of
 * one whole ns per tick and a fraction) and 3 (no whole ns: the encoder's
 * other loop). test_clock checks the segments themselves.
 */
static void encoder_on_chunks(unsigned ticks_per_ns) {
  enum { NSITES = 300, ROUNDS = 3, NEV = ROUNDS * NSITES * 4 };
  static lp_site_t sites[NSITES];
  static char names[NSITES][24];
  for (int k = 0; k < NSITES; k++) {
    snprintf(names[k], sizeof names[k], "enc site %d", k);
    sites[k] = (lp_site_t){names[k], __FILE__, __func__, (uint32_t)__LINE__, LP_LEVEL_RUNTIME, 0, 0, 0, 0};
  }
  lp__sync_t pts[4] = {{1000000, 5000000000u}, {9000000, 5008001500u}, {17000000, 5016000500u},
                       {45000000, 5044003000u}};
  for (int k = 0; k < 4; k++) pts[k].ticks *= ticks_per_ns;
  lp__sync_t copy[4];
  memcpy(copy, pts, sizeof pts);
  lp__timemap_t *m = lp__timemap_new(copy, 4);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(lp__timemap_jumps(m), 0);
  static lp_impl_event_t ev[NEV];
  static char want[NEV / 2][128];
  size_t n = 0, nwant = 0, cursor = 0;
  uint64_t ticks = pts[0].ticks;
  for (int k = 0; k < NSITES; k++)
    for (int r = 0; r < ROUNDS; r++) { /* a pair again and again: after its first, from the encoder's site cache */
      const lp_site_t *outer = &sites[k], *inner = &sites[(k + 1) % NSITES];
      uint64_t t[4];
      for (int e = 0; e < 4; e++) {
        int g = (k + r + e) % 11;
        t[e] = ticks += g == 0 ? 40000 : g == 3 ? 20000 : g == 5 ? 16383 : g == 9 ? 16384 : g == 7 ? 200 : 50;
      }
      ev[n++] = (lp_impl_event_t){t[0], (uintptr_t)outer | LP_IMPL_EV_BEGIN | LP_IMPL_DEPTH_TAG(1)};
      ev[n++] = (lp_impl_event_t){t[1], (uintptr_t)inner | LP_IMPL_EV_BEGIN | LP_IMPL_DEPTH_TAG(2)};
      ev[n++] = (lp_impl_event_t){t[2], (uintptr_t)inner | LP_IMPL_EV_END | LP_IMPL_DEPTH_TAG(2)};
      ev[n++] = (lp_impl_event_t){t[3], (uintptr_t)outer | LP_IMPL_EV_END | LP_IMPL_DEPTH_TAG(1)};
      uint64_t ns[4];
      for (int e = 0; e < 4; e++) ns[e] = lp__timemap_ns(m, t[e], pts[0], &cursor);
      snprintf(want[nwant++], sizeof want[0], "enc lane|X|runtime|%s|%llu|%llu|", outer->label,
               (unsigned long long)ns[0], (unsigned long long)(ns[3] - ns[0]));
      snprintf(want[nwant++], sizeof want[0], "enc lane|X|runtime|%s|%llu|%llu|", inner->label,
               (unsigned long long)ns[1], (unsigned long long)(ns[2] - ns[1]));
    }
  CU_ASSERT_FATAL(ticks < pts[3].ticks); /* every event inside the map's segments */
  lp__pfs_t *f = lp__pfs_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  lp__pfs_restart(f, "enc");
  lp__pfs_lane_t *lane = NULL;
  lp__pfs_lane_info_t info = {42, "enc lane", false, NULL, 0};
  CU_ASSERT_EQUAL(lp__pfs_chunk(f, &lane, &info, ev, 0, 1001, m, pts[0]), 0);
  CU_ASSERT_EQUAL(lp__pfs_chunk(f, &lane, &info, ev, 1001, NEV, m, pts[0]), 0);
  CU_ASSERT_EQUAL(lp__pfs_events(f), NEV);
  lp__notes_t notes = {.at_ns = 5030000000u, .policy = "stream"};
  lp__pfs_finish(f, &notes);
  size_t len;
  const uint8_t *bytes = lp__pfs_bytes(f, &len);
  char path[256];
  snprintf(path, sizeof path, "%s/encoder.pftrace", dir);
  pd_trace_t t;
  int rc = decode_bytes(&t, path, bytes, len);
  lp__pfs_lane_free(lane);
  lp__pfs_free(f);
  lp__timemap_free(m);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(t.lines.n, nwant);
  size_t found = 0;
  for (size_t i = 0; i < nwant; i++) {
    size_t j = 0;
    while (j < t.lines.n && strcmp(t.lines.v[j], want[i]) != 0) j++;
    if (j < t.lines.n) {
      found++;
    } else if (i - found < 3) {
      fprintf(stderr, "missing: %s\n", want[i]);
    }
  }
  CU_ASSERT_EQUAL(found, nwant);
  pd_free(&t.lines);
  unlink(path);
}

/* Run by the program itself with --on-counter, before anything has chosen the clock. */
static void test_stream_encoder_on_counter(void) {
  lp__clock_choose(LP_CLOCK_TSC);
  if (!lp__clock_is_counter()) return; /* no counter here: the map stays the identity */
  encoder_on_chunks(1);
  encoder_on_chunks(3);
}

static void test_stream_encoder_on_chunks(void) {
  encoder_on_chunks(1);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    execl("/proc/self/exe", "test_stream", "--on-counter", (char *)NULL);
    _exit(127);
  }
  int status;
  CU_ASSERT_EQUAL_FATAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The child of the kill test: streams until it is killed, telling fd 3 after its first flushes. */
static int kill_child(const char *path) {
  lp_trace_opts_t o = stream_opts(path, 4 * LP__CHUNK_BYTES);
  if (lp_trace_start(&o) != 0) return 3;
  for (unsigned r = 0;; r++) {
    work(300);
    if (r < 20 && lp__trace_stream_sync() != 0) return 4;
    if (r == 20 && write(3, "r", 1) != 1) return 5;
  }
}

/*
 * The child of the slow stream test, run with LABELPROF_TRACE streaming:
 * a few scopes 10 ms apart, as a program that labels slowly records them,
 * then a word on fd 3, then nothing until it is killed.
 */
enum { SLOW_SCOPES = 5 };
static int slow_child(void) {
  for (int i = 0; i < SLOW_SCOPES; i++) {
    {
      LP_SCOPE("slow scope");
    }
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  if (write(3, "r", 1) != 1) return 5;
  for (;;) pause();
}

/* The length of the whole packets at the start of [p, p + n). */
static size_t whole_packets(const uint8_t *p, size_t n) {
  const uint8_t *q = p, *end = p + n;
  pd_field_t f;
  size_t ok = 0;
  while (pd_next(&q, end, &f) > 0) ok = (size_t)(q - p);
  return ok;
}

/*
 * This program run again as a child (mode, and arg unless NULL), with fd 3
 * a pipe and the environment changed by vars ("NAME=value" sets, "NAME"
 * unsets): its pid, once it has written its first byte there (*said 1) or
 * died first (*said 0).
 */
static pid_t child_that_says(const char *mode, const char *arg, const char *const *vars, int *said) {
  int fds[2];
  CU_ASSERT_FATAL(pipe(fds) == 0);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    if (dup2(fds[1], 3) < 0) _exit(6);
    for (const char *const *v = vars; v && *v; v++)
      if (strchr(*v, '=') ? putenv((char *)*v) != 0 : unsetenv(*v) != 0) _exit(6);
    execl("/proc/self/exe", "test_stream", mode, arg, (char *)NULL);
    _exit(7);
  }
  close(fds[1]);
  char c = 0;
  ssize_t r;
  while ((r = read(fds[0], &c, 1)) < 0 && errno == EINTR)
    ;
  close(fds[0]);
  *said = r == 1;
  return pid;
}

/* The bytes of the file at path as it is now (NULL if it cannot be opened), *n of them. */
static uint8_t *file_now(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16;
  uint8_t *buf = malloc(cap);
  CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
  *n = 0;
  for (size_t r; (r = fread(buf + *n, 1, cap - *n, f)) > 0;) {
    *n += r;
    if (*n == cap) {
      buf = realloc(buf, cap *= 2);
      CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    }
  }
  fclose(f);
  return buf;
}

/* The whole packets of the file at path, as it is now, decoded (through copy): the slices named name. */
static size_t slices_in_file_now(const char *path, const char *copy, const char *name) {
  size_t n, found = 0;
  uint8_t *buf = file_now(path, &n);
  if (!buf) return 0;
  pd_trace_t t;
  if (decode_bytes(&t, copy, buf, whole_packets(buf, n)) == 0) found = count_lines(&t, "X", name);
  pd_free(&t.lines);
  free(buf);
  return found;
}

/*
 * A program that records slowly: what it records reaches the file while it
 * runs, a second after at most (LABELPROF_TRACE_FLUSH's default), with no
 * chunk filled. The child says when its scopes have ended; the file is then
 * read until it holds them all (a deadline of 10 s, LP_TEST_SLOW times
 * that), and the child is killed: the scopes are in the file it leaves.
 */
static void test_stream_slow_program_reaches_the_file(void) {
  char path[256], copy[256], tv[300];
  snprintf(path, sizeof path, "%s/slow.pftrace", dir);
  snprintf(copy, sizeof copy, "%s/slow-copy.pftrace", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", path);
  const char *vars[] = {tv, "LABELPROF_TRACE_MODE=stream", "LABELPROF_TRACE_FLUSH", NULL};
  int r;
  pid_t pid = child_that_says("--slow-child", NULL, vars, &r);
  CU_ASSERT_EQUAL(r, 1); /* 0: the child died before its scopes ended */
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double limit = 10.0 * lp_test_slow(), waited = 0;
  size_t found = 0;
  while (r == 1 && (found = slices_in_file_now(path, copy, "slow scope")) < SLOW_SCOPES && waited < limit) {
    struct timespec pause_ts = {0, 20000000};
    nanosleep(&pause_ts, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    waited = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
  }
  kill(pid, SIGKILL);
  int status = 0;
  CU_ASSERT_EQUAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  if (found < SLOW_SCOPES)
    fprintf(stderr, "slow stream: %zu of %d scopes in the file %.1f s after they ended\n", found, SLOW_SCOPES, waited);
  CU_ASSERT_EQUAL(found, SLOW_SCOPES);
  CU_ASSERT_EQUAL(slices_in_file_now(path, copy, "slow scope"), SLOW_SCOPES); /* and after the kill */
  unlink(copy);
}

/* A process killed by SIGKILL while it streams: the file's whole packets are a valid trace. */
static void test_stream_kill9_prefix(void) {
  char path[256], cut[256];
  snprintf(path, sizeof path, "%s/killed.pftrace", dir);
  snprintf(cut, sizeof cut, "%s/killed-cut.pftrace", dir);
  int said;
  pid_t pid = child_that_says("--kill-child", path, NULL, &said);
  CU_ASSERT_EQUAL(said, 1);
  kill(pid, SIGKILL);
  int status = 0;
  CU_ASSERT_EQUAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  size_t n;
  uint8_t *buf = file_now(path, &n);
  CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
  size_t ok = whole_packets(buf, n);
  CU_ASSERT(ok > 0 && n - ok < 4096); /* at most the packet being written is cut */
  pd_trace_t t;
  int rc = decode_bytes(&t, cut, buf, ok);
  free(buf);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT(count_lines(&t, "X", "stream inner") >= 20 * 300); /* everything flushed before the signal */
  pd_free(&t.lines);
}

/* The bytes of the file at path, in a buffer to free; *n its length. */
static uint8_t *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  CU_ASSERT_FATAL(f != NULL);
  size_t cap = 1 << 16, len = 0, r;
  uint8_t *buf = malloc(cap);
  CU_ASSERT_FATAL(buf != NULL);
  while ((r = fread(buf + len, 1, cap - len, f)) > 0) {
    len += r;
    if (len == cap) {
      buf = realloc(buf, cap *= 2);
      CU_ASSERT_FATAL(buf != NULL);
    }
  }
  fclose(f);
  *n = len;
  return buf;
}

static void *work_thread(void *arg) {
  work(*(const unsigned *)arg);
  return NULL;
}

/* A thread of its own that records n scopes, joined. */
static void work_on_a_thread(unsigned n) {
  pthread_t th;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, work_thread, &n), 0);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
}

/*
 * A write that fails part-way (here past RLIMIT_FSIZE, as on a full disk
 * that has room again later): the file keeps its whole packets, as after a
 * kill, and nothing written later is appended after the cut, where it
 * would make the rest of the file unreadable. The error sticks and the
 * stop reports it. The statistics count what reached the file: its events,
 * and the threads with one of them in it, not a thread whose packets were
 * all in the failed write or came after it.
 */
static void test_stream_write_error_keeps_a_trace(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/efbig.pftrace", dir);
  lp_trace_opts_t o = stream_opts(path, 64 * LP__CHUNK_BYTES);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  work(300);
  CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
  struct stat sb;
  CU_ASSERT_FATAL(stat(path, &sb) == 0);
  struct rlimit was, small;
  CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_FSIZE, &was), 0);
  small = was;
  small.rlim_cur = (rlim_t)sb.st_size + 1000; /* the next write is cut inside a packet */
  CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &small), 0);
  lp__trace_stream_hold(true); /* one write for both threads: the main thread's packets first, then the other's */
  work(3000);
  work_on_a_thread(300);
  lp__trace_stream_hold(false);
  int rc = lp__trace_stream_sync();
  CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &was), 0);
  CU_ASSERT_EQUAL(rc, -EFBIG);
  work(3000); /* room again: these must not follow the cut */
  work_on_a_thread(300);
  CU_ASSERT_EQUAL(lp__trace_stream_sync(), -EFBIG);
  CU_ASSERT_EQUAL(lp_trace_stop(), -EFBIG);
  lp_trace_stats_t st;
  CU_ASSERT_EQUAL(lp_trace_get_stats(&st), 0);
  CU_ASSERT_EQUAL(st.recorded, 2 * 300); /* the events in the file, none of those that did not reach it */
  CU_ASSERT_EQUAL(st.threads, 1);        /* the main thread's; neither other thread has an event in the file */
  size_t n;
  uint8_t *buf = read_all(path, &n);
  CU_ASSERT(n <= (size_t)small.rlim_cur);
  size_t ok = whole_packets(buf, n);
  CU_ASSERT(ok >= (size_t)sb.st_size);
  CU_ASSERT_EQUAL(ok, n); /* the cut packet taken back: the file is a trace as it is */
  pd_trace_t t;
  char cut[256];
  snprintf(cut, sizeof cut, "%s/efbig-cut.pftrace", dir);
  CU_ASSERT_EQUAL(decode_bytes(&t, cut, buf, ok), 0);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "stream inner"), 300);
  pd_free(&t.lines);
  free(buf);
  unlink(cut);
  unlink(path);
}

/*
 * A file that cannot be opened at a rotation (no descriptor left, its
 * directory gone) loses what would have gone to it, not the rest of the
 * stream: the next rotation tries again, under the next number. Here the
 * directory is moved away for the second file and is back for the third.
 */
static void test_stream_rotation_after_a_failed_open(void) {
  char sub[256], away[256], path[300], first[300];
  snprintf(sub, sizeof sub, "%s/rot", dir);
  snprintf(away, sizeof away, "%s/rot-away", dir);
  snprintf(path, sizeof path, "%s/x-%%n.pftrace", sub);
  snprintf(first, sizeof first, "%s/x-1.pftrace", away);
  CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
  lp_trace_opts_t o = stream_opts(path, 64 * LP__CHUNK_BYTES);
  o.rotate_bytes = 32768;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  work(300);
  CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
  CU_ASSERT_EQUAL_FATAL(rename(sub, away), 0);
  work(3000); /* more than a file's worth: the second file is due, and cannot be opened */
  CU_ASSERT_EQUAL(lp__trace_stream_sync(), -ENOENT);
  CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
  work(3000); /* a later rotation opens a file again */
  CU_ASSERT_EQUAL(lp__trace_stream_sync(), -ENOENT);
  CU_ASSERT_EQUAL(lp_trace_stop(), -ENOENT); /* the first error, sticky */
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL(pd_decode(&t, first), 0);
  size_t before = count_lines(&t, "X", "stream inner"); /* the first 300, and what came before the rotation */
  CU_ASSERT(before >= 300 && before < 3300);
  pd_free(&t.lines);
  unlink(first);
  /* How many numbers the missing directory took depends on where the chunks fell: the files after it, whole. */
  size_t files = 0, later = 0;
  DIR *d = opendir(sub);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    unsigned k;
    if (sscanf(e->d_name, "x-%u.pftrace", &k) != 1) continue;
    char f[600];
    snprintf(f, sizeof f, "%s/%s", sub, e->d_name);
    CU_ASSERT(k >= 3); /* 2 could not be opened */
    memset(&t, 0, sizeof t);
    CU_ASSERT_EQUAL(pd_decode(&t, f), 0);
    later += count_lines(&t, "X", "stream inner");
    pd_free(&t.lines);
    unlink(f);
    files++;
  }
  closedir(d);
  CU_ASSERT(files >= 1);
  CU_ASSERT(later > 0 && later <= 3000);
  rmdir(sub);
  rmdir(away);
}

/*
 * A numbered name that grows past the file system's NAME_MAX (255 bytes
 * here at file 10): every later name is longer still, so the message at
 * the stop says that everything from that file on is lost, not just what
 * went "to the next rotation". Files 1 to 9 are whole.
 */
static void test_stream_rotation_name_too_long(void) {
  char prefix[256], path[600], err_path[300];
  memset(prefix, 'n', 245);
  prefix[245] = '\0'; /* 245 + "-9.pftrace" is 255 bytes; "-10.pftrace" makes 256 */
  snprintf(path, sizeof path, "%s/%s-%%n.pftrace", dir, prefix);
  snprintf(err_path, sizeof err_path, "%s/stop-stderr", dir);
  lp_trace_opts_t o = stream_opts(path, 64 * LP__CHUNK_BYTES);
  o.rotate_bytes = 32768;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  int rc = 0;
  for (int i = 0; i < 60 && rc == 0; i++) { /* until the rotation to file 10 fails */
    work(3000);
    rc = lp__trace_stream_sync();
  }
  CU_ASSERT_EQUAL(rc, -ENAMETOOLONG);
  work(6000); /* and later rotations, which fail the same way */
  CU_ASSERT_EQUAL(lp__trace_stream_sync(), -ENAMETOOLONG);
  fflush(stderr);
  int saved = dup(2), err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CU_ASSERT_FATAL(saved >= 0 && err >= 0 && dup2(err, 2) == 2);
  CU_ASSERT_EQUAL(lp_trace_stop(), -ENAMETOOLONG);
  fflush(stderr);
  CU_ASSERT_FATAL(dup2(saved, 2) == 2);
  close(saved);
  close(err);
  size_t n;
  uint8_t *bytes = read_all(err_path, &n);
  char *said = calloc(1, n + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(said);
  memcpy(said, bytes, n);
  free(bytes);
  CU_ASSERT(strstr(said, "-10.pftrace': ") != NULL);
  CU_ASSERT(strstr(said, "every later file's, is too long: what was recorded from then on is in no file") != NULL);
  CU_ASSERT(strstr(said, "to the next rotation") == NULL);
  if (!strstr(said, "is in no file")) fprintf(stderr, "\nthe stop said: %s\n", said);
  free(said);
  unlink(err_path);
  for (unsigned k = 1; k <= 9; k++) {
    char f[600];
    snprintf(f, sizeof f, "%s/%s-%u.pftrace", dir, prefix, k);
    pd_trace_t t;
    memset(&t, 0, sizeof t);
    CU_ASSERT_EQUAL(pd_decode(&t, f), 0); /* whole */
    pd_free(&t.lines);
    unlink(f);
  }
}

static char env_child[4096];

/*
 * Two streams never write one file (#37): a child given the file this
 * process streams to (as a child that inherits LABELPROF_TRACE is) writes
 * nothing to it and says why on one line, and the file stays this
 * process's, whole. Rotated, the first file stays taken while later ones
 * are written, so that the same pattern in another process cannot empty it.
 */
static void test_stream_one_file_one_stream(void) {
  for (int rotated = 0; rotated < 2; rotated++) {
    char path[256], first[256], tv[320];
    snprintf(path, sizeof path, "%s/shared%s.pftrace", dir, rotated ? "-%n" : "");
    snprintf(first, sizeof first, "%s/shared%s.pftrace", dir, rotated ? "-1" : "");
    lp_trace_opts_t o = stream_opts(path, 1 << 20);
    if (rotated) o.rotate_bytes = 4096;
    CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
    work(2000);
    CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
    snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", path);
    const char *vars[] = {tv, "LABELPROF_TRACE_MODE=stream", NULL};
    char *argv[] = {env_child, (char *)"x", NULL};
    lp_test_run_t r = lp_test_run(env_child, argv, vars, NULL);
    CU_ASSERT(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
    const char *nl = strchr(r.err, '\n');
    CU_ASSERT(nl && nl[1] == '\0'); /* one line */
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "another stream is writing that file"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, first));
    lp_test_run_free(&r);
    work(500);
    pd_trace_t t;
    stream_stop_and_decode(first, &t);
    CU_ASSERT_EQUAL(count_lines(&t, "X", "env work"), 0);
    if (!rotated) CU_ASSERT_EQUAL(count_lines(&t, "X", "stream inner"), 2500);
    if (rotated) CU_ASSERT(count_lines(&t, "X", "stream inner") > 0);
    pd_free(&t.lines);
    for (int k = 1; k < 100; k++) { /* a rotated stream's files */
      char name[300];
      snprintf(name, sizeof name, "%s/shared-%d.pftrace", dir, k);
      unlink(name);
    }
    unlink(first);
  }
}

/* LABELPROF_TRACE_MODE=stream: the environment's session streamed to LABELPROF_TRACE, numbered by rotation. */
static void test_stream_env(void) {
  char tv[400], f1[300];
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s/env-%%n.pftrace", dir);
  snprintf(f1, sizeof f1, "%s/env-1.pftrace", dir);
  const char *vars[] = {tv, "LABELPROF_TRACE_MODE=stream", "LABELPROF_TRACE_ROTATE=1h", NULL};
  char *argv[] = {env_child, (char *)"xxx", (char *)"dumps", (char *)"2", NULL};
  lp_test_run_t r = lp_test_run(env_child, argv, vars, NULL);
  CU_ASSERT(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL(pd_decode(&t, f1), 0);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "env work"), 1);
  CU_ASSERT(strstr(t.session, "policy=stream") != NULL);
  /* At exit, one line: what the file holds (as its notes say), and that nothing was dropped. */
  const char *rec = strstr(t.session, "events_recorded=");
  char digits[32], grouped[48], want[512];
  snprintf(digits, sizeof digits, "%lld", rec ? atoll(rec + strlen("events_recorded=")) : -1);
  size_t nd = strlen(digits), k = 0;
  for (size_t i = 0; i < nd; i++) { /* 40836 as 40,836 */
    if (i && (nd - i) % 3 == 0) grouped[k++] = ',';
    grouped[k++] = digits[i];
  }
  grouped[k] = '\0';
  snprintf(want, sizeof want, "labelprof: the stream '%s' holds %s events of 1 thread (", f1, grouped);
  CU_ASSERT_EQUAL(strncmp(r.err, want, strlen(want)), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, " in 1 file); it dropped none\n"));
  const char *nl = strchr(r.err, '\n');
  CU_ASSERT(nl && nl[1] == '\0'); /* one line */
  pd_free(&t.lines);
  lp_test_run_free(&r);
}

/*
 * lp_dump() on a stream started from the environment flushes it: the file,
 * copied by the program right after the call while it still runs, holds
 * every scope ended before the call and none of those after.
 */
static void test_stream_env_dump_flushes(void) {
  char tv[400], f[300], copy[300];
  snprintf(f, sizeof f, "%s/dumped.pftrace", dir);
  snprintf(copy, sizeof copy, "%s/dumped-copy.pftrace", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", f);
  const char *vars[] = {tv, "LABELPROF_TRACE_MODE=stream", NULL};
  char *argv[] = {env_child, (char *)"x", (char *)"dumpcopy", copy, NULL};
  lp_test_run_t r = lp_test_run(env_child, argv, vars, NULL);
  CU_ASSERT(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
  CU_ASSERT_EQUAL(strncmp(r.err, "labelprof: the stream '", 23), 0); /* what it wrote, said at exit */
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "; it dropped none\n"));
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL_FATAL(pd_decode(&t, copy), 0);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "env dumped"), 1000);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "env after"), 0);
  pd_free(&t.lines);
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL_FATAL(pd_decode(&t, f), 0);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "env dumped"), 1000);
  CU_ASSERT_EQUAL(count_lines(&t, "X", "env after"), 1000);
  pd_free(&t.lines);
  unlink(f);
  unlink(copy);
  lp_test_run_free(&r);
}

/* Stream mode with a JSON file: a warning, and the JSON written at exit as in discard mode. */
static void test_stream_env_json_falls_back(void) {
  char tv[400], jf[300];
  snprintf(jf, sizeof jf, "%s/env.json", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", jf);
  const char *vars[] = {tv, "LABELPROF_TRACE_MODE=stream", NULL};
  char *argv[] = {env_child, (char *)"x", NULL};
  lp_test_run_t r = lp_test_run(env_child, argv, vars, NULL);
  CU_ASSERT(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
  CU_ASSERT(strstr(r.err, "LABELPROF_TRACE_MODE=stream") != NULL && strstr(r.err, "discard") != NULL);
  struct stat sb;
  CU_ASSERT(stat(jf, &sb) == 0 && sb.st_size > 0);
  lp_test_run_free(&r);
  const char *bad[] = {tv, "LABELPROF_TRACE_MODE=stream", "LABELPROF_TRACE_ROTATE=lots", NULL};
  r = lp_test_run(env_child, argv, bad, NULL);
  CU_ASSERT(strstr(r.err, "LABELPROF_TRACE_ROTATE") != NULL);
  lp_test_run_free(&r);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--kill-child") == 0) return kill_child(argv[2]);
  if (argc == 2 && strcmp(argv[1], "--slow-child") == 0) return slow_child();
  dir = lp_test_tmpdir("stream");
  if (argc == 2 && strcmp(argv[1], "--on-counter") == 0) {
    CU_TestInfo counter[] = {LP_TEST(test_stream_encoder_on_counter), CU_TEST_INFO_NULL};
    unsetenv("LP_TEST_ONLY"); /* the parent's choice of tests is not this program's */
    return lp_test_main("stream on the counter", counter);
  }
  if (!realpath("tests/env_child", env_child)) return 2;
  CU_TestInfo tests[] = {
      LP_TEST(test_stream_longer_than_budget), LP_TEST(test_stream_leaves_the_page_cache),
      LP_TEST(test_stream_rotated_files_leave_the_page_cache),
      LP_TEST(test_stream_writer_behind_drops),
      LP_TEST(test_stream_drops_count_events),
      LP_TEST(test_stream_export_flushes),     LP_TEST(test_stream_rotation),
      LP_TEST(test_stream_kill9_prefix),       LP_TEST(test_stream_slow_program_reaches_the_file),       LP_TEST(test_stream_kinds), LP_TEST(test_stream_track_items_keep_their_times),
      LP_TEST(test_stream_empty_session_keeps_its_notes),
      LP_TEST(test_stream_write_error_keeps_a_trace),
      LP_TEST(test_stream_rotation_after_a_failed_open),
      LP_TEST(test_stream_rotation_name_too_long),
      LP_TEST(test_stream_encoder_on_chunks),
      LP_TEST(test_stream_env),                LP_TEST(test_stream_env_dump_flushes),
      LP_TEST(test_stream_env_json_falls_back), LP_TEST(test_stream_one_file_one_stream),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("stream", tests);
}
