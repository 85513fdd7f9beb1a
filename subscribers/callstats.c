/*
 * callstats.so: calls and wall time per label, printed at exit.
 *
 *   LABELPROF_SUBSCRIBERS=$(pkg-config --variable=subscriberdir labelprof)/callstats.so ./app
 *
 * For every label: how many scopes ended, their total, mean and longest
 * wall time, sorted by total, on stderr or in the file LABELPROF_CALLSTATS
 * names; LABELPROF_CALLSTATS_THREADS=1 gives one line per label and thread.
 * A scope's begin stores its start time in the scope's instance slot and
 * its end reads it back: nothing is allocated per scope, and each thread
 * counts in a table of its own. Scopes of labels with the same text merge.
 *
 * It uses only the public API, like any tool: it is also an example.
 */
#include <labelprof.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TABLE 1024 /* call sites per thread; more are counted as lost */

typedef struct stat {
  _Atomic(const lp_site_t *) site; /* set last, with release: the entry is ready */
  _Atomic uint64_t calls, total_ns, max_ns;
} stat_t;

typedef struct table {
  struct table *next;
  uint64_t tid;
  _Atomic uint64_t lost;
  stat_t e[TABLE];
} table_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static table_t *tables; /* every thread's, kept after it exits */
static __thread table_t *mine;
static lp_subscriber_t *sub;
static int reported;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_begin(const lp_notification_t *n, void *data, void **slot) {
  (void)n;
  (void)data;
  *slot = (void *)(uintptr_t)now_ns();
}

/* Only the owning thread writes its table: plain loads and stores of atomics, no read-modify-write. */
static void add(stat_t *s, uint64_t dur) {
  atomic_store_explicit(&s->calls, atomic_load_explicit(&s->calls, memory_order_relaxed) + 1, memory_order_relaxed);
  atomic_store_explicit(&s->total_ns, atomic_load_explicit(&s->total_ns, memory_order_relaxed) + dur,
                        memory_order_relaxed);
  if (dur > atomic_load_explicit(&s->max_ns, memory_order_relaxed))
    atomic_store_explicit(&s->max_ns, dur, memory_order_relaxed);
}

static void on_end(const lp_notification_t *n, void *data, void **slot) {
  (void)data;
  uint64_t t0 = (uint64_t)(uintptr_t)*slot, t1 = now_ns();
  table_t *t = mine;
  if (!t) {
    t = calloc(1, sizeof *t);
    if (!t) return;
    t->tid = n->tid;
    pthread_mutex_lock(&mu);
    t->next = tables;
    tables = t;
    pthread_mutex_unlock(&mu);
    mine = t;
  }
  uintptr_t h = ((uintptr_t)n->site >> 3) * 2654435761u;
  for (unsigned i = 0; i < TABLE; i++) {
    stat_t *s = &t->e[(h + i) % TABLE];
    const lp_site_t *have = atomic_load_explicit(&s->site, memory_order_relaxed);
    if (have == n->site) {
      add(s, t1 - t0);
      return;
    }
    if (!have) {
      add(s, t1 - t0);
      atomic_store_explicit(&s->site, n->site, memory_order_release);
      return;
    }
  }
  atomic_store_explicit(&t->lost, atomic_load_explicit(&t->lost, memory_order_relaxed) + 1, memory_order_relaxed);
}

typedef struct row {
  const char *label;
  uint64_t tid, calls, total, max;
} row_t;

static int by_key(const void *a, const void *b) {
  const row_t *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return strcmp(x->label, y->label);
}

static int by_total(const void *a, const void *b) {
  const row_t *x = a, *y = b;
  if (x->total != y->total) return x->total > y->total ? -1 : 1;
  return by_key(a, b);
}

static void report(void) {
  const char *path = getenv("LABELPROF_CALLSTATS");
  const char *th = getenv("LABELPROF_CALLSTATS_THREADS");
  int threads = th && strcmp(th, "1") == 0;
  FILE *out = stderr;
  if (path && *path) {
    out = fopen(path, "w");
    if (!out) {
      fprintf(stderr, "callstats: cannot write %s (%s); reporting on stderr\n", path, strerror(errno));
      out = stderr;
    }
  }
  pthread_mutex_lock(&mu);
  size_t n = 0, cap = 64;
  uint64_t lost = 0;
  row_t *rows = malloc(cap * sizeof *rows);
  for (table_t *t = tables; t && rows; t = t->next) {
    lost += atomic_load_explicit(&t->lost, memory_order_relaxed);
    for (unsigned i = 0; i < TABLE && rows; i++) {
      const lp_site_t *site = atomic_load_explicit(&t->e[i].site, memory_order_acquire);
      if (!site) continue;
      if (n == cap) {
        row_t *r = realloc(rows, (cap *= 2) * sizeof *rows);
        if (!r) {
          free(rows);
          rows = NULL;
          break;
        }
        rows = r;
      }
      rows[n++] = (row_t){site->label ? site->label : "(null)", threads ? t->tid : 0,
                          atomic_load_explicit(&t->e[i].calls, memory_order_relaxed),
                          atomic_load_explicit(&t->e[i].total_ns, memory_order_relaxed),
                          atomic_load_explicit(&t->e[i].max_ns, memory_order_relaxed)};
    }
  }
  pthread_mutex_unlock(&mu);
  if (!rows) {
    fprintf(stderr, "callstats: out of memory; no report\n");
    if (out != stderr) fclose(out);
    return;
  }
  /* Merge the rows of one label (and thread) from several sites or threads. */
  qsort(rows, n, sizeof *rows, by_key);
  size_t m = 0;
  uint64_t calls = 0;
  for (size_t i = 0; i < n; i++) {
    calls += rows[i].calls;
    if (m && by_key(&rows[m - 1], &rows[i]) == 0) {
      rows[m - 1].calls += rows[i].calls;
      rows[m - 1].total += rows[i].total;
      if (rows[i].max > rows[m - 1].max) rows[m - 1].max = rows[i].max;
    } else {
      rows[m++] = rows[i];
    }
  }
  qsort(rows, m, sizeof *rows, by_total);
  fprintf(out, "labelprof callstats: %zu %s, %llu calls; wall time, sorted by total\n", m,
          threads ? "label-thread pairs" : "labels", (unsigned long long)calls);
  fprintf(out, "%12s %12s %12s %12s  %s%s\n", "calls", "total ms", "mean us", "max us", threads ? "thread  " : "",
          "label");
  for (size_t i = 0; i < m; i++) {
    char tid[32] = "";
    if (threads) snprintf(tid, sizeof tid, "%-8llu", (unsigned long long)rows[i].tid);
    fprintf(out, "%12llu %12.3f %12.3f %12.3f  %s%s%s\n", (unsigned long long)rows[i].calls, rows[i].total / 1e6,
            rows[i].calls ? rows[i].total / 1e3 / (double)rows[i].calls : 0.0, rows[i].max / 1e3, tid,
            threads ? " " : "", rows[i].label);
  }
  if (lost) fprintf(out, "(%llu calls at sites past %d per thread not counted)\n", (unsigned long long)lost, TABLE);
  free(rows);
  if (out != stderr && fclose(out) != 0) fprintf(stderr, "callstats: writing %s failed\n", path);
}

void labelprof_subscriber_init(uint32_t major, uint32_t minor, const char *version, const char *stream) {
  (void)major;
  (void)minor;
  (void)version;
  if (strcmp(stream, LP_STREAM_LABELS_NAME) != 0 || sub) return; /* labels only; an init may come twice */
  int rc = lp_subscriber_create(NULL, &sub);
  if (rc == 0) rc = lp_subscriber_set_callback(sub, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, on_begin);
  if (rc == 0) rc = lp_subscriber_set_callback(sub, LP_STREAM_LABELS, LP_TP_SCOPE_END, on_end);
  if (rc == 0) rc = lp_subscriber_set_enabled(sub, 1);
  if (rc != 0) fprintf(stderr, "callstats: cannot subscribe (%s)\n", lp_strerror(rc));
}

void labelprof_subscriber_finish(const char *stream) {
  if (strcmp(stream, LP_STREAM_LABELS_NAME) != 0 || !sub || reported) return;
  reported = 1;
  report();
}
