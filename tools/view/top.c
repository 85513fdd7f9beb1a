/*
 * top.c: `labelprof top PID`: the percentage tree of a running process
 * that uses labelprof, sampled from outside it.
 *
 * Nothing is asked of the process: it was started without any variable
 * and runs no labelprof thread, timer or descriptor for us. Each sample is
 * one pass of tools/read/attach.c over its threads' pseudo-stacks, through
 * process_vm_readv, with the protocol the in-process collector uses; what
 * labelprof top costs is its own CPU (its header says how much) and, for
 * the process, the page-table walks of those reads.
 *
 * Ticks are placed as the collector places them: time is cut into periods
 * of one tick from the attach on, each period gets one pass at an instant
 * drawn at random within it, so that no periodic work locks to the ticks,
 * and a period that ended while the sampler was late is counted as missed.
 * Every pass adds one sample per thread whose stack it read to two trees,
 * all threads' and the thread's own, each node with two counts: the last
 * interval's and the whole attach's. So memory grows with the distinct
 * paths, not with time. Threads that exit keep their records (their
 * samples stay in the trees) up to KEEP_EXITED of them; older ones leave
 * the thread list, their samples staying in the all-threads tree.
 *
 * Batch mode (-b) prints a snapshot per interval, as lp_profile_print
 * does: the tree of the interval (or, with --cumulative, of the whole
 * attach), then the threads. The live view is in top_live.c.
 */
#include "config.h"

#include "cmd.h"
#include "opts.h"
#include "top.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KEEP_EXITED 64

uint64_t lp_top_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_now(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- trees ---- */

static uint32_t node_hash(uint32_t parent, uint32_t label) { return lp__hash64((uint64_t)parent << 32 | label); }

int lp_top_tree_init(lp_top_tree_t *t) {
  memset(t, 0, sizeof *t);
  t->cap = 16;
  t->nodes = malloc(t->cap * sizeof *t->nodes);
  if (!t->nodes) return -1;
  t->n = 1;
  t->nodes[0] = (lp_top_node_t){LP_REMOTE_NOLABEL, UINT32_MAX, UINT32_MAX, UINT32_MAX, {0}, {0}};
  return 0;
}

void lp_top_tree_free(lp_top_tree_t *t) {
  free(t->nodes);
  free(t->index.slot);
  memset(t, 0, sizeof *t);
}

uint32_t lp_top_tree_child(lp_top_tree_t *t, uint32_t parent, uint32_t label) {
  uint32_t h = node_hash(parent, label);
  for (uint32_t at, e = lp__index_first(&t->index, h, &at); e; e = lp__index_next(&t->index, &at)) {
    const lp_top_node_t *k = &t->nodes[e - 1];
    if (k->parent == parent && k->label == label) return e - 1;
  }
  if (t->n == UINT32_MAX - 1) return UINT32_MAX;
  if (t->n == t->cap) {
    lp_top_node_t *nodes = realloc(t->nodes, (size_t)t->cap * 2 * sizeof *nodes);
    if (!nodes) return UINT32_MAX;
    t->nodes = nodes;
    t->cap *= 2;
  }
  uint64_t want = lp__index_wants(&t->index, t->n - 1, 32); /* the root is in no slot */
  if (want) {
    uint32_t *fresh = want == UINT64_MAX ? NULL : calloc((size_t)want, sizeof *fresh);
    if (!fresh) return UINT32_MAX;
    free(lp__index_move(&t->index, fresh, want));
    for (uint32_t k = 1; k < t->n; k++) lp__index_put(&t->index, node_hash(t->nodes[k].parent, t->nodes[k].label), k);
  }
  uint32_t k = t->n++;
  t->nodes[k] = (lp_top_node_t){label, parent, UINT32_MAX, t->nodes[parent].kid, {0}, {0}};
  t->nodes[parent].kid = k;
  lp__index_put(&t->index, h, k);
  return k;
}

int lp_top_tree_add(lp_top_tree_t *t, const uint32_t *path, uint32_t n, uint64_t weight) {
  uint32_t k = 0;
  for (uint32_t d = 0; d < n; d++) {
    k = lp_top_tree_child(t, k, path[d]);
    if (k == UINT32_MAX) return -1;
  }
  t->nodes[k].self[LP_TOP_NOW] += weight;
  t->nodes[k].self[LP_TOP_ALL] += weight;
  for (;; k = t->nodes[k].parent) {
    t->nodes[k].total[LP_TOP_NOW] += weight;
    t->nodes[k].total[LP_TOP_ALL] += weight;
    if (k == 0) break;
  }
  return 0;
}

int lp_top_tree_merge(lp_top_tree_t *into, const lp_top_tree_t *from) {
  /* Nodes come after their parents: map each to its place in into, in order. */
  uint32_t *map = malloc((size_t)from->n * sizeof *map);
  if (!map) return -1;
  map[0] = 0;
  for (uint32_t k = 0; k < from->n; k++) {
    const lp_top_node_t *f = &from->nodes[k];
    if (k) {
      map[k] = lp_top_tree_child(into, map[f->parent], f->label);
      if (map[k] == UINT32_MAX) {
        free(map);
        return -1;
      }
    }
    lp_top_node_t *n = &into->nodes[map[k]];
    for (int w = 0; w < LP_TOP_WINDOWS; w++) {
      n->total[w] += f->total[w];
      n->self[w] += f->self[w];
    }
  }
  free(map);
  return 0;
}

/* The interval ends: its counts become the last interval's. */
static void tree_end_interval(lp_top_tree_t *t) {
  for (uint32_t k = 0; k < t->n; k++) {
    lp_top_node_t *n = &t->nodes[k];
    n->total[LP_TOP_LAST] = n->total[LP_TOP_NOW];
    n->self[LP_TOP_LAST] = n->self[LP_TOP_NOW];
    n->total[LP_TOP_NOW] = n->self[LP_TOP_NOW] = 0;
  }
}

/* ---- threads ---- */

lp_top_thread_t *lp_top_find_thread(const lp_top_t *t, uint64_t id) {
  for (size_t i = 0; i < t->nthreads; i++)
    if (t->threads[i]->id == id) return t->threads[i];
  return NULL;
}

static void free_thread(lp_top_thread_t *th) {
  lp_top_tree_free(&th->tree);
  free(th);
}

/* Forgets the exited threads beyond KEEP_EXITED, those that left first. */
static void evict(lp_top_t *t) {
  size_t exited = 0;
  for (size_t i = 0; i < t->nthreads; i++) exited += !t->threads[i]->live;
  while (exited > KEEP_EXITED) {
    size_t oldest = SIZE_MAX;
    for (size_t i = 0; i < t->nthreads; i++)
      if (!t->threads[i]->live && (oldest == SIZE_MAX || t->threads[i]->gone_ns < t->threads[oldest]->gone_ns))
        oldest = i;
    free_thread(t->threads[oldest]);
    memmove(t->threads + oldest, t->threads + oldest + 1, (t->nthreads - oldest - 1) * sizeof *t->threads);
    t->nthreads--;
    exited--;
  }
}

static lp_top_thread_t *new_thread(lp_top_t *t, const lp_rthread_t *p) {
  if (t->nthreads == t->capthreads) {
    size_t cap = t->capthreads ? t->capthreads * 2 : 16;
    lp_top_thread_t **v = realloc(t->threads, cap * sizeof *v);
    if (!v) return NULL;
    t->threads = v;
    t->capthreads = cap;
  }
  lp_top_thread_t *th = calloc(1, sizeof *th);
  if (!th) return NULL;
  if (lp_top_tree_init(&th->tree) != 0) {
    free(th);
    return NULL;
  }
  th->id = p->id;
  th->tid = p->tid;
  th->live = true;
  t->threads[t->nthreads++] = th;
  return th;
}

static void leave(lp_top_t *t, size_t slot) {
  lp_top_thread_t *th = t->by_slot[slot];
  if (!th) return;
  th->live = false;
  th->gone_ns = t->now_ns;
  t->by_slot[slot] = NULL;
}

static int nomem(lp_top_t *t) {
  snprintf(t->why, sizeof t->why, "out of memory");
  return LP_REMOTE_NOMEM;
}

int lp_top_sample(lp_top_t *t) {
  int rc = lp_remote_sample(t->r, t->why, sizeof t->why);
  t->now_ns = lp_top_now();
  if (rc) return rc;
  size_t n = lp_remote_thread_count(t->r);
  if (n > t->nby_slot) {
    lp_top_thread_t **v = realloc(t->by_slot, n * sizeof *v);
    if (!v) return nomem(t);
    memset(v + t->nby_slot, 0, (n - t->nby_slot) * sizeof *v);
    t->by_slot = v;
    t->nby_slot = n;
  }
  for (size_t i = 0; i < n; i++) {
    const lp_rthread_t *p = lp_remote_thread(t->r, i);
    lp_top_thread_t *th = t->by_slot[i];
    if (th && (!p->live || th->id != p->id)) leave(t, i);
    if (!p->live) continue;
    th = t->by_slot[i];
    if (!th) {
      th = t->by_slot[i] = new_thread(t, p);
      if (!th) return nomem(t);
    }
    memcpy(th->name, p->name, sizeof th->name);
    th->name[sizeof th->name - 1] = '\0';
    if (!p->read) continue; /* its stack changed during every try of this pass */
    if (p->n + 1 > t->path_cap) {
      size_t cap = p->n + 1 + 16;
      uint32_t *path = realloc(t->path, cap * sizeof *path);
      if (!path) return nomem(t);
      t->path = path;
      t->path_cap = cap;
    }
    uint32_t depth = 0;
    for (uint32_t f = 0; f < p->n; f++) {
      uint32_t id = lp_remote_label(t->r, p->frames[f]);
      if (id == LP_REMOTE_NOLABEL) return nomem(t);
      t->path[depth++] = id;
    }
    if (p->depth > p->n) {
      uint32_t id = lp_remote_truncated(t->r);
      if (id == LP_REMOTE_NOLABEL) return nomem(t);
      t->path[depth++] = id;
    }
    if (lp_top_tree_add(&t->all, t->path, depth, 1) != 0 || lp_top_tree_add(&th->tree, t->path, depth, 1) != 0)
      return nomem(t);
    th->samples[LP_TOP_NOW]++;
    th->samples[LP_TOP_ALL]++;
  }
  evict(t);
  t->passes[LP_TOP_NOW]++;
  t->passes[LP_TOP_ALL]++;
  return 0;
}

void lp_top_end_interval(lp_top_t *t) {
  tree_end_interval(&t->all);
  for (size_t i = 0; i < t->nthreads; i++) {
    lp_top_thread_t *th = t->threads[i];
    tree_end_interval(&th->tree);
    th->samples[LP_TOP_LAST] = th->samples[LP_TOP_NOW];
    th->samples[LP_TOP_NOW] = 0;
  }
  uint64_t cpu = cpu_now();
  t->passes[LP_TOP_LAST] = t->passes[LP_TOP_NOW];
  t->missed[LP_TOP_LAST] = t->missed[LP_TOP_NOW];
  t->passes[LP_TOP_NOW] = t->missed[LP_TOP_NOW] = 0;
  t->begin_ns[LP_TOP_LAST] = t->begin_ns[LP_TOP_NOW];
  t->end_ns[LP_TOP_LAST] = t->now_ns;
  t->begin_ns[LP_TOP_NOW] = t->now_ns;
  t->cpu_ns[LP_TOP_LAST] = cpu - t->cpu_ns[LP_TOP_NOW]; /* LAST holds what it used; the others their start */
  t->cpu_ns[LP_TOP_NOW] = cpu;
  t->snapshots++;
}

uint64_t lp_top_window_ns(const lp_top_t *t, int w) {
  uint64_t end = w == LP_TOP_LAST ? t->end_ns[w] : t->now_ns;
  return end > t->begin_ns[w] ? end - t->begin_ns[w] : 0;
}

uint64_t lp_top_window_cpu(const lp_top_t *t, int w) {
  return w == LP_TOP_LAST ? t->cpu_ns[w] : cpu_now() - t->cpu_ns[w];
}

/* ---- ticks ---- */

static uint64_t rnd(lp_top_t *t) {
  /* xorshift64*: the instants need no more than an even spread. */
  t->rng ^= t->rng >> 12;
  t->rng ^= t->rng << 25;
  t->rng ^= t->rng >> 27;
  return t->rng * 0x2545f4914f6cdd1dull;
}

uint64_t lp_top_next_instant(lp_top_t *t, uint64_t *period_start) {
  uint64_t period = 1000000000u / t->hz, now = lp_top_now();
  if (now >= *period_start + period) { /* periods that ended while we were late: missed */
    uint64_t late = (now - *period_start) / period;
    t->missed[LP_TOP_NOW] += late;
    t->missed[LP_TOP_ALL] += late;
    *period_start += late * period;
  }
  uint64_t at = *period_start + rnd(t) % period;
  return at < now ? now : at;
}

void lp_top_wait_until(lp_top_t *t, uint64_t at) {
  for (;;) {
    uint64_t now = lp_top_now();
    if (now >= at) return;
    struct timespec ts = {(time_t)((at - now) / 1000000000u), (long)((at - now) % 1000000000u)};
    struct pollfd p = {t->pidfd, POLLIN, 0};
    int n = ppoll(&p, t->pidfd >= 0, &ts, NULL);
    if (n > 0) return; /* the process exited: the next pass says so */
    if (n < 0 && errno != EINTR) return;
  }
}

/* ---- printing ---- */

typedef struct liner {
  const lp_top_t *t;
  const lp_top_tree_t *tree;
  int sort, w;
  double min_percent;
  uint64_t denom;
  lp_top_line_t *lines;
  size_t n, cap;
  bool failed;
} liner_t;

static const liner_t *sorting; /* qsort has no context argument in C11 */

static int cmp_kids(const void *x, const void *y) {
  const lp_top_node_t *a = &sorting->tree->nodes[*(const uint32_t *)x], *b = &sorting->tree->nodes[*(const uint32_t *)y];
  if (sorting->sort != LP_TOP_SORT_NAME) {
    int w = sorting->sort == LP_TOP_SORT_ALL ? LP_TOP_ALL : LP_TOP_LAST;
    if (a->total[w] != b->total[w]) return a->total[w] > b->total[w] ? -1 : 1;
    int o = w == LP_TOP_ALL ? LP_TOP_LAST : LP_TOP_ALL;
    if (a->total[o] != b->total[o]) return a->total[o] > b->total[o] ? -1 : 1;
  }
  return strcmp(lp_remote_text(sorting->t->r, a->label), lp_remote_text(sorting->t->r, b->label));
}

static void add_line(liner_t *l, uint32_t depth, uint64_t all, uint64_t last, const char *text) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    lp_top_line_t *v = realloc(l->lines, cap * sizeof *v);
    if (!v) {
      l->failed = true;
      return;
    }
    l->lines = v;
    l->cap = cap;
  }
  l->lines[l->n++] = (lp_top_line_t){depth, {0, all, last}, text};
}

static bool shown(const liner_t *l, const lp_top_node_t *k) {
  if (l->min_percent <= 0) return k->total[LP_TOP_LAST] || k->total[LP_TOP_ALL];
  return l->denom && 100.0 * (double)k->total[l->w] / (double)l->denom >= l->min_percent;
}

static void lines_of(liner_t *l, uint32_t node, uint32_t depth) {
  const lp_top_node_t *n = &l->tree->nodes[node];
  uint32_t nk = 0;
  for (uint32_t k = n->kid; k != UINT32_MAX; k = l->tree->nodes[k].sib) nk++;
  uint32_t *kids = nk ? malloc(nk * sizeof *kids) : NULL;
  if (nk && !kids) {
    l->failed = true;
    return;
  }
  nk = 0;
  for (uint32_t k = n->kid; k != UINT32_MAX; k = l->tree->nodes[k].sib) kids[nk++] = k;
  sorting = l;
  if (nk > 1) qsort(kids, nk, sizeof *kids, cmp_kids);
  uint64_t hidden[LP_TOP_WINDOWS] = {0, 0, 0};
  uint32_t nshown = 0;
  for (uint32_t i = 0; i < nk && !l->failed; i++) {
    const lp_top_node_t *k = &l->tree->nodes[kids[i]];
    if (!shown(l, k)) {
      hidden[LP_TOP_ALL] += k->total[LP_TOP_ALL];
      hidden[LP_TOP_LAST] += k->total[LP_TOP_LAST];
      continue;
    }
    nshown++;
    add_line(l, depth, k->total[LP_TOP_ALL], k->total[LP_TOP_LAST], lp_remote_text(l->t->r, k->label));
    if (k->kid != UINT32_MAX) lines_of(l, kids[i], depth + 1);
  }
  free(kids);
  if (node == 0) {
    if (hidden[LP_TOP_ALL] || hidden[LP_TOP_LAST])
      add_line(l, depth, hidden[LP_TOP_ALL], hidden[LP_TOP_LAST], "other (hidden labels)");
    add_line(l, depth, n->self[LP_TOP_ALL], n->self[LP_TOP_LAST], "other (outside of any label)");
  } else if (nshown) {
    add_line(l, depth, n->self[LP_TOP_ALL] + hidden[LP_TOP_ALL], n->self[LP_TOP_LAST] + hidden[LP_TOP_LAST], "other");
  }
}

lp_top_line_t *lp_top_lines(const lp_top_t *t, const lp_top_tree_t *tree, int sort, double min_percent, size_t *n) {
  liner_t l = {t, tree, sort, sort == LP_TOP_SORT_ALL ? LP_TOP_ALL : LP_TOP_LAST, min_percent, 0, NULL, 0, 0, false};
  l.denom = tree->nodes[0].total[l.w];
  lines_of(&l, 0, 0);
  if (l.failed || !l.lines) {
    free(l.lines);
    return NULL;
  }
  *n = l.n;
  return l.lines;
}

static double pct(uint64_t v, uint64_t of) { return of ? 100.0 * (double)v / (double)of : 0.0; }

static int print_tree(const lp_top_t *t, FILE *out, const lp_top_tree_t *tree, int w) {
  size_t n;
  lp_top_line_t *lines = lp_top_lines(t, tree, w == LP_TOP_ALL ? LP_TOP_SORT_ALL : LP_TOP_SORT_LAST, t->min_percent, &n);
  if (!lines) return -1;
  uint64_t denom = tree->nodes[0].total[w];
  for (size_t i = 0; i < n; i++) {
    fprintf(out, "%*s%.2f%% ", (int)(lines[i].depth * 4), "", pct(lines[i].v[w], denom));
    lp_put_text(out, lines[i].text, false);
    putc('\n', out);
  }
  free(lines);
  return 0;
}

/* Whether thread th is one --thread names: its name, or its tid. */
static bool selected(const lp_top_t *t, const lp_top_thread_t *th) {
  if (!t->select) return true;
  if (strcmp(th->name, t->select) == 0) return true;
  char *end;
  errno = 0;
  unsigned long long tid = strtoull(t->select, &end, 10);
  return !errno && !*end && end != t->select && tid == th->tid;
}

static int print_snapshot(lp_top_t *t, FILE *out) {
  int w = t->cumulative ? LP_TOP_ALL : LP_TOP_LAST;
  uint64_t dur = lp_top_window_ns(t, w), cpu = lp_top_window_cpu(t, w);
  lp_top_tree_t sel, *tree = &t->all;
  if (t->select) {
    if (lp_top_tree_init(&sel) != 0) return -1;
    for (size_t i = 0; i < t->nthreads; i++)
      if (selected(t, t->threads[i]) && lp_top_tree_merge(&sel, &t->threads[i]->tree) != 0) {
        lp_top_tree_free(&sel);
        return -1;
      }
    tree = &sel;
  }
  unsigned nth = 0;
  for (size_t i = 0; i < t->nthreads; i++) nth += t->threads[i]->samples[w] && selected(t, t->threads[i]);
  fprintf(out, "labelprof top: process %d (", (int)t->pid);
  lp_put_text(out, lp_remote_comm(t->r), false);
  fprintf(out, ", labelprof %s)", lp_remote_lib_version(t->r));
  if (t->count)
    fprintf(out, ", snapshot %ld of %ld", t->snapshots, t->count);
  else
    fprintf(out, ", snapshot %ld", t->snapshots);
  fprintf(out, ": %s %.2f s", w == LP_TOP_ALL ? "since the attach," : "the last", (double)dur / 1e9);
  if (t->select) {
    fputs(", thread ", out);
    lp_put_text(out, t->select, false);
  }
  fprintf(out, " (%u threads, %" PRIu64 " samples)\n", nth, tree->nodes[0].total[w]);
  uint64_t period = 1000000000u / t->hz;
  fprintf(out, "%.2f s at %u Hz requested, %.0f Hz achieved, %" PRIu64 " missed ticks (one at a random instant of each ",
          (double)dur / 1e9, t->hz, dur ? (double)t->passes[w] * 1e9 / (double)dur : 0.0, t->missed[w]);
  if (period >= 1000000)
    fprintf(out, "%.3g ms", (double)period / 1e6);
  else
    fprintf(out, "%.3g \xc2\xb5s", (double)period / 1e3);
  fprintf(out, "); labelprof top %.1f%% of one CPU, ", dur ? 100.0 * (double)cpu / (double)dur : 0.0);
  if (t->slice_ns)
    fprintf(out, "slice %.0f \xc2\xb5s\n", (double)t->slice_ns / 1e3);
  else
    fputs("default scheduling\n", out);
  int rc = 0;
  if (t->per_thread) {
    uint64_t all = tree->nodes[0].total[w];
    for (size_t i = 0; i < t->nthreads && rc == 0; i++) {
      const lp_top_thread_t *th = t->threads[i];
      if (!selected(t, th) || !th->samples[w]) continue;
      fprintf(out, "thread %" PRIu64 " \"", th->tid);
      lp_put_text(out, th->name, false);
      fprintf(out, "\" (%" PRIu64 " samples, %.2f%% of all%s)\n", th->samples[w], pct(th->samples[w], all),
              th->live ? "" : ", exited");
      rc = print_tree(t, out, &th->tree, w);
    }
  } else {
    rc = print_tree(t, out, tree, w);
    for (size_t i = 0; i < t->nthreads && rc == 0; i++) {
      const lp_top_thread_t *th = t->threads[i];
      if (!selected(t, th) || !th->samples[w]) continue;
      const lp_top_node_t *root = &th->tree.nodes[0];
      fprintf(out, "thread %" PRIu64 " \"", th->tid);
      lp_put_text(out, th->name, false);
      fprintf(out, "\": %" PRIu64 " samples, %.2f%% in labels%s\n", th->samples[w],
              pct(root->total[w] - root->self[w], root->total[w]), th->live ? "" : ", exited");
    }
  }
  if (t->select && tree->nodes[0].total[w] == 0) {
    fputs("no thread named or numbered ", out);
    lp_put_text(out, t->select, false);
    fputs(" was sampled\n", out);
  }
  putc('\n', out);
  if (t->select) lp_top_tree_free(&sel);
  fflush(out);
  return rc;
}

static int run_batch(lp_top_t *t) {
  uint64_t pstart = t->begin_ns[LP_TOP_ALL], end = pstart + t->interval_ns;
  for (;;) {
    uint64_t at = lp_top_next_instant(t, &pstart);
    if (at >= end) {
      lp_top_wait_until(t, end);
      t->now_ns = lp_top_now();
      lp_top_end_interval(t);
      if (print_snapshot(t, stdout) != 0) goto oom;
      if (t->count && t->snapshots >= t->count) return LP_EXIT_OK;
      end += t->interval_ns;
      if (end <= t->now_ns) end = t->now_ns + t->interval_ns; /* far behind (stopped, swapped): start afresh */
      continue;
    }
    lp_top_wait_until(t, at);
    int rc = lp_top_sample(t);
    if (rc == LP_REMOTE_NOMEM) goto oom;
    if (rc) {
      /* What was sampled until then, and why it ended. */
      lp_top_end_interval(t);
      if (print_snapshot(t, stdout) != 0) goto oom;
      fprintf(stderr, "labelprof top: %s\n", t->why);
      return LP_EXIT_BAD;
    }
    pstart += 1000000000u / t->hz;
  }
oom:
  fprintf(stderr, "labelprof top: out of memory\n");
  return LP_EXIT_BAD;
}

/* ---- the command ---- */

static const char usage[] =
    "usage: labelprof top [-d SECONDS] [--hz HZ] [--thread NAME|TID] PID\n"
    "       labelprof top -b [-n N] [-d SECONDS] [--hz HZ] [--thread NAME|TID] [--threads]\n"
    "                     [--cumulative] [--min-percent P] PID\n"
    "\n"
    "The percentage tree of a running process that uses labelprof (shared or\n"
    "static), however it was started: no variable, no restart, nothing run in\n"
    "it. labelprof top reads its threads' pseudo-stacks from outside with\n"
    "process_vm_readv, HZ times a second (default 1000), at a random instant of\n"
    "each period, and shows the tree of the last interval beside the tree since\n"
    "it attached, the rate it achieved and the threads by name. It needs the\n"
    "right to read the process that ptrace(2) would need: the same user where\n"
    "the kernel allows it (kernel.yama.ptrace_scope 0, or the program started\n"
    "with LABELPROF_ALLOW_ATTACH=1), or root.\n"
    "\n"
    "  -d SECONDS     the interval (default 1; 0.01 to 86400)\n"
    "  --hz HZ        samples per second per thread, 1 to 10000 (default 1000)\n"
    "  --thread SEL   one thread's tree: the threads named SEL, or the thread\n"
    "                 whose tid is SEL\n"
    "  -b, --batch    print a snapshot per interval to stdout instead of the\n"
    "                 live view: the tree in the layout of the sampled profile,\n"
    "                 then one line per thread\n"
    "  -n N           stop after N intervals (batch and live)\n"
    "  --threads      batch: one tree per thread instead of the lines\n"
    "  --cumulative   batch: the trees since the attach, not of the interval\n"
    "  --min-percent P  batch: hide nodes under P percent\n"
    "\n"
    "Keys in the live view: q quits (so does Ctrl-C); t and T show the next or\n"
    "previous thread alone, a all threads; + and - lengthen or shorten the\n"
    "interval; s sorts by the last interval, since the attach, or by label; p\n"
    "pauses the display; arrows, PgUp, PgDn, Home and End scroll.\n"
    "\n"
    "Exit status: 0; 2 when the process cannot be read (none with that PID, it\n"
    "does not use labelprof or uses another release's, no right to read it), or\n"
    "in batch mode when it exits before the last snapshot.\n";


typedef struct opts {
  bool batch, threads, cumulative;
  uint32_t n, hz;
  uint64_t interval_ns;
  const char *thread;
  double min_percent;
} opts_t;

static const lp_top_range_t count_range = {"-n", 1, 1000000}, hz_range = {"--hz", 1, 10000};

static const lp_opt_t options[] = {
    LP_OPT_PARSED("-d", "SECONDS", opts_t, interval_ns, lp_top_opt_seconds, "-d"),
    LP_OPT_PARSED("--hz", "HZ", opts_t, hz, lp_top_opt_u32, &hz_range),
    LP_OPT_TEXT("--thread", "NAME|TID", opts_t, thread),
    LP_OPT_FLAG_ALSO("-b", "--batch", opts_t, batch),
    LP_OPT_PARSED("-n", "N", opts_t, n, lp_top_opt_u32, &count_range),
    LP_OPT_FLAG("--threads", opts_t, threads),
    LP_OPT_FLAG("--cumulative", opts_t, cumulative),
    LP_OPT_MIN_PERCENT(opts_t, min_percent),
    LP_OPT_END,
};

static const opts_t defaults = {.hz = 1000, .interval_ns = 1000000000u};

static int run(const void *opts, int n, const char *const *operands);

const lp_cmd_t lp_cmd_top = {
    "top", "a running process's tree, live, read from outside it", usage, options, sizeof(opts_t), &defaults,
    {1, 1, "PID"}, run,
};


int lp_top_parse_u32(const char *cmd, const char *opt, const char *v, uint32_t lo, uint32_t hi, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long x = strtoul(v, &end, 10);
  if (errno || !*v || *end || *v == '-' || x < lo || x > hi) {
    lp_usage_error(cmd, "%s takes a whole number from %u to %u, not '%s'", opt, lo, hi, v);
    return -1;
  }
  *out = (uint32_t)x;
  return 0;
}

int lp_top_opt_u32(const char *cmd, const char *value, void *field, const void *how) {
  const lp_top_range_t *r = how;
  return lp_top_parse_u32(cmd, r->name, value, r->lo, r->hi, field);
}

int lp_top_opt_seconds(const char *cmd, const char *value, void *field, const void *how) {
  double s;
  if (!lp_parse_double(value, &s) || s < 0.01 || s > 86400) {
    lp_usage_error(cmd, "%s takes seconds from 0.01 to 86400, not '%s'", (const char *)how, value);
    return -1;
  }
  *(uint64_t *)field = (uint64_t)(s * 1e9 + 0.5);
  return 0;
}

/*
 * Asks for a 100 µs slice of the fair scheduler (sched_setattr's
 * sched_runtime, the EEVDF slice since Linux 6.12), as the in-process
 * collector does, so that a wakeup on a crowded machine runs soon; granted
 * without privilege. Returns the slice the kernel reports, 0 if none.
 */
typedef struct sched_attr_k {
  uint32_t size, sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime, sched_deadline, sched_period;
} sched_attr_k;

static uint64_t ask_for_slice(void) {
#if defined(SYS_sched_setattr) && defined(SYS_sched_getattr)
  sched_attr_k a;
  memset(&a, 0, sizeof a);
  if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof a, 0u) != 0 || a.sched_policy != SCHED_OTHER) return 0;
  a.size = (uint32_t)sizeof a;
  a.sched_runtime = 100000;
  a.sched_flags = 0;
  (void)syscall(SYS_sched_setattr, 0, &a, 0u);
  memset(&a, 0, sizeof a);
  if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof a, 0u) != 0) return 0;
  return a.sched_policy == SCHED_OTHER && a.sched_runtime <= 200000 ? a.sched_runtime : 0;
#else
  return 0;
#endif
}

static int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) return fd;
#else
  (void)pid;
#endif
  return -1;
}

int lp_top_attach(lp_top_t *t, const char *cmd) {
  int rc = lp_remote_open(t->pid, cmd, &t->r, t->why, sizeof t->why);
  if (rc) {
    fprintf(stderr, "labelprof %s: %s\n", cmd, t->why);
    return -1;
  }
  if (lp_top_tree_init(&t->all) != 0) {
    lp_top_free(t);
    fprintf(stderr, "labelprof %s: out of memory\n", cmd);
    return -1;
  }
  t->pidfd = open_pidfd(t->pid);
  /* Wakeups on time: the kernel's default slack of 50 µs would cost ticks at 1 kHz. Cosmetic if refused. */
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  t->slice_ns = ask_for_slice();
  t->now_ns = t->begin_ns[LP_TOP_NOW] = t->begin_ns[LP_TOP_ALL] = lp_top_now();
  t->cpu_ns[LP_TOP_NOW] = t->cpu_ns[LP_TOP_ALL] = cpu_now();
  t->rng = t->now_ns ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
  if (!t->rng) t->rng = 1;
  return 0;
}

void lp_top_free(lp_top_t *t) {
  lp_top_tree_free(&t->all);
  for (size_t i = 0; i < t->nthreads; i++) free_thread(t->threads[i]);
  free(t->threads);
  free(t->by_slot);
  free(t->path);
  lp_remote_close(t->r);
  if (t->pidfd >= 0) close(t->pidfd);
}

static int run(const void *opts, int n, const char *const *operands) {
  const opts_t *o = opts;
  (void)n;
  const char *cmd = lp_cmd_top.name;
  lp_top_t t;
  memset(&t, 0, sizeof t);
  t.pidfd = -1;
  t.hz = o->hz;
  t.interval_ns = o->interval_ns;
  t.count = o->n;
  t.batch = o->batch;
  t.per_thread = o->threads;
  t.cumulative = o->cumulative;
  t.select = o->thread;
  t.min_percent = o->min_percent;
  uint32_t pid;
  if (lp_top_parse_u32(cmd, "PID", operands[0], 1, INT_MAX, &pid) != 0) return LP_EXIT_BAD;
  t.pid = (pid_t)pid;
  if (!t.batch && (t.per_thread || t.cumulative))
    return lp_usage_error(cmd, "--threads and --cumulative are for batch mode (-b); the live view has keys for them");
  char why[256];
  if (!t.batch && !lp_top_live_possible(why, sizeof why)) {
    fprintf(stderr, "labelprof top: %s; use -b for batch output\n", why);
    return LP_EXIT_BAD;
  }
  if (lp_top_attach(&t, cmd) != 0) return LP_EXIT_BAD;
  int rc = t.batch ? run_batch(&t) : lp_top_live(&t);
  lp_top_free(&t);
  return rc;
}
