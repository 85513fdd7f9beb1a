/*
 * agg.c: the engine every view runs on: per-lane stacks of open scopes,
 * label statistics, trees of call paths.
 *
 * Each lane (file, pid, tid) keeps a stack of frames. A scope is pushed when
 * it starts; a complete event (X) knows its end already and is popped when
 * a later event starts at or after that end ("settling"), an open one (B)
 * when its E comes. Popping a frame is where everything is counted:
 *
 *   duration = end - start               (calls, min, max, mean, histogram)
 *   self     = duration - direct children (on the same lane)
 *   total    = duration, but only when no frame of the same label is below
 *              it on the stack: a label nested in itself counts once
 *
 * and the frame's duration goes into its parent's children time, or into
 * the lane's time inside any label. The stack depth is bounded
 * (MAX_DEPTH), so is everything else: memory is labels, paths and lanes.
 *
 * Order: a lane must see its scopes in the order of their starts. When an X
 * arrives that starts before the last start (a writer that puts each X at
 * its end), the pass stops, the file's lanes are dropped, and the file is
 * read again with its lanes buffered as 24-byte records, sorted at the end
 * and fed to the same engine. stderr says so. A file that declares that
 * order before its events ("labelprof_scope_order":"ends", labelprof's own
 * exporter) is read buffered from the start, in one pass and silently. Past LP_SPILL_RECS records
 * they are written to a temporary file as sorted runs, one per lane, which a
 * heap merges at the end: memory stays bounded, the disk holds the rest.
 */
#include "config.h"

#include "agg.h"
#include "reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DEPTH 10000
#define OPEN_END INT64_MIN
#define MAX_WARN 5

typedef struct lp_frame {
  uint32_t label, node;
  int64_t start, end; /* end: OPEN_END for a B */
  int64_t kids;       /* time in direct children */
  int64_t kids_end;   /* the latest end of a direct child popped: this scope cannot end before it */
  bool top;           /* the outermost frame of its label on this stack */
  uint64_t line, col, off; /* where it began, for the message if it never ends */
} lp_frame_t;

typedef struct lp_rec {
  int64_t start, end;
  uint32_t label;
  uint32_t seq;
  uint64_t off; /* where the scope's event (its B for a B/E pair) is in the input: the second pass's messages */
} lp_rec_t;

typedef struct lp_run {
  uint64_t off, n; /* in the spill file: n records from byte off */
} lp_run_t;

typedef struct lp_open {
  uint32_t label;
  int64_t start;
  int64_t kids_end; /* the latest end of a B closed inside this one */
  lp_pos_t pos;
} lp_open_t;

/*
 * A label's hash, eight bytes at a time (a label may be 1 MiB long, and each
 * B event hashes its name): its length first, then each word multiplied in,
 * then mixed. Equal texts hash alike; that is all a table needs.
 */
uint32_t lp_text_hash(const char *s) {
  size_t n = strlen(s);
  uint64_t h = n * 0x9e3779b97f4a7c15ull, w;
  for (; n >= 8; s += 8, n -= 8) {
    memcpy(&w, s, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  w = 0;
  memcpy(&w, s, n);
  return lp__hash64(h ^ w);
}

/* ---- memory ------------------------------------------------------------------------ */

#define BLOCK_OVERHEAD 16 /* what the allocator keeps beside each block, about (as lp_mem_realloc counts) */

uint64_t lp_agg_max_memory; /* 0: lp_mem_default_cap(); UINT64_MAX: no cap */

static void *mem_calloc(lp_mem_t *m, size_t n, size_t size) {
  void *p = lp_mem_realloc(m, NULL, 0, n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

uint64_t lp_mem_default_cap(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t half = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 2 : 0;
  return half < (256ull << 20) ? 256ull << 20 : half;
}

uint64_t lp_mem_cap(void) {
  return lp_agg_max_memory == 0 ? lp_mem_default_cap() : lp_agg_max_memory == UINT64_MAX ? 0 : lp_agg_max_memory;
}

int lp_parse_size(const char *s, uint64_t *bytes) {
  if (strcmp(s, "none") == 0) {
    *bytes = UINT64_MAX;
    return 1;
  }
  uint64_t v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9') return 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (UINT64_MAX - 9) / 10) return 0;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  unsigned shift = 0;
  switch (*p) {
  case 'K': case 'k': shift = 10; break;
  case 'M': case 'm': shift = 20; break;
  case 'G': case 'g': shift = 30; break;
  case 'T': case 't': shift = 40; break;
  case '\0': break;
  default: return 0;
  }
  if (shift && *++p == 'i') p++; /* "MiB" */
  if (shift && (*p == 'B' || *p == 'b')) p++;
  if (*p || v == 0 || (shift && v > UINT64_MAX >> shift) || v << shift == UINT64_MAX) return 0;
  *bytes = v << shift;
  return 1;
}

/* Grows an array of elem-sized items to hold need, from `first` items, then doubling. */
static int grow(lp_mem_t *m, void **p, uint32_t *cap, size_t elem, uint32_t need, uint32_t first) {
  if (need <= *cap) return 0;
  uint32_t n = *cap ? *cap : first;
  while (n < need) {
    if (n > UINT32_MAX / 4) return -1;
    n *= 2;
  }
  void *q = lp_mem_realloc(m, *p, (size_t)*cap * elem, (size_t)n * elem);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

/* Sums of durations saturate: a file may hold times near the 2^62 ns limit many times over. */
static inline int64_t sat_add(int64_t x, int64_t y) { return lp_sat_add(x, y); }

/* Out of memory, or past the cap: said once, at the event being counted. */
static int oom_at(lp_agg_t *a) {
  lp_pos_t pos = a->at;
  if (!pos.file) pos.file = a->file;
  return lp_mem_fail(&a->mem, &pos);
}

/* ---- histograms ---------------------------------------------------------------- */

static void hist_slot(int64_t v, unsigned *oct, unsigned *sub) {
  uint64_t u = v < 0 ? 0 : (uint64_t)v;
  if (u < LP_HIST_SUB) {
    *oct = 0;
    *sub = (unsigned)u;
    return;
  }
  unsigned e = 63u - (unsigned)__builtin_clzll(u);
  *oct = e;
  *sub = (unsigned)(u >> (e - 7)) & (LP_HIST_SUB - 1);
}

/* The value a slot stands for: exact below 128, the middle of its step above. */
static int64_t slot_value(unsigned o, unsigned s) {
  if (o == 0) return s;
  uint64_t lo = ((uint64_t)(LP_HIST_SUB + s)) << (o - 7), width = 1ull << (o - 7);
  return (int64_t)(lo + width / 2);
}

static int hist_add(lp_mem_t *m, lp_hist_t *h, int64_t v) {
  unsigned o, s;
  hist_slot(v, &o, &s);
  if (!h->oct[o] && !(h->oct[o] = mem_calloc(m, LP_HIST_SUB, sizeof(uint32_t)))) return -1;
  if (h->oct[o][s] == UINT32_MAX) return 0; /* saturated: 4 billion calls of one size */
  h->oct[o][s]++;
  h->count++;
  return 0;
}

static void hist_free(lp_mem_t *m, lp_hist_t *h) {
  if (!h) return;
  for (unsigned o = 0; o < 64; o++) lp_mem_free(m, h->oct[o], LP_HIST_SUB * sizeof(uint32_t));
  lp_mem_free(m, h, sizeof *h);
}

/* s's calls so far (at most two: its min and max) into a new histogram. */
static int hist_make(lp_mem_t *m, lp_lstat_t *s) {
  if (!(s->hist = mem_calloc(m, 1, sizeof *s->hist))) return -1;
  if (s->calls >= 1 && hist_add(m, s->hist, s->min)) return -1;
  if (s->calls >= 2 && hist_add(m, s->hist, s->max)) return -1;
  return 0;
}

/* Counts one call's duration into s's distribution (before s->calls, min and max count it). */
static int stat_value(lp_mem_t *m, lp_lstat_t *s, int64_t v) {
  if (!s->hist && s->calls < 2) return 0;
  if (!s->hist && hist_make(m, s)) return -1;
  return hist_add(m, s->hist, v);
}

/* from's distribution into to's (before to's calls, min and max take from's). */
static int stat_merge(lp_mem_t *m, lp_lstat_t *to, const lp_lstat_t *from) {
  if (!from->calls) return 0;
  if (!to->hist && !from->hist && to->calls + from->calls <= 2) return 0;
  if (!to->hist && hist_make(m, to)) return -1;
  if (!from->hist) {
    if (hist_add(m, to->hist, from->min)) return -1;
    return from->calls >= 2 ? hist_add(m, to->hist, from->max) : 0;
  }
  for (unsigned o = 0; o < 64; o++) {
    if (!from->hist->oct[o]) continue;
    if (!to->hist->oct[o] && !(to->hist->oct[o] = mem_calloc(m, LP_HIST_SUB, sizeof(uint32_t)))) return -1;
    for (unsigned k = 0; k < LP_HIST_SUB; k++) {
      uint64_t sum = (uint64_t)to->hist->oct[o][k] + from->hist->oct[o][k];
      to->hist->oct[o][k] = sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
    }
  }
  to->hist->count += from->hist->count;
  return 0;
}

int lp_lstat_add(lp_mem_t *m, lp_lstat_t *g, const lp_lstat_t *s) {
  if (stat_merge(m, g, s)) return -1;
  g->calls += s->calls;
  g->total = sat_add(g->total, s->total);
  g->self = sat_add(g->self, s->self);
  g->sum = sat_add(g->sum, s->sum);
  if (s->min < g->min) g->min = s->min;
  if (s->max > g->max) g->max = s->max;
  return 0;
}

void lp_lstat_clear(lp_lstat_t *s, uint32_t label) {
  hist_free(NULL, s->hist);
  *s = (lp_lstat_t){.label = label, .min = INT64_MAX};
}

int64_t lp_lstat_percentile(const lp_lstat_t *st, double p) {
  int64_t min = st->min, max = st->max;
  const lp_hist_t *h = st->hist;
  uint64_t count = h ? h->count : st->calls;
  if (!count) return 0;
  uint64_t rank = (uint64_t)((p / 100.0) * (double)count + 0.999999999);
  if (rank < 1) rank = 1;
  if (rank > count) rank = count;
  int64_t v = max;
  if (!h) { /* one or two calls: min, then max */
    unsigned o, s;
    hist_slot(rank == 1 ? min : max, &o, &s);
    v = slot_value(o, s);
  } else {
    uint64_t seen = 0;
    bool found = false;
    for (unsigned o = 0; o < 64 && !found; o++) {
      if (!h->oct[o]) continue;
      for (unsigned s = 0; s < LP_HIST_SUB && !found; s++) {
        seen += h->oct[o][s];
        if (seen >= rank) {
          v = slot_value(o, s);
          found = true;
        }
      }
    }
  }
  return v < min ? min : v > max ? max : v;
}

/* ---- trees of call paths -------------------------------------------------------- */

#define TREE_LINEAR 8 /* a tree of up to this many nodes is searched without a hash */

int lp_tree_init(lp_tree_t *t, lp_mem_t *mem) {
  memset(t, 0, sizeof *t);
  t->mem = mem;
  if (grow(mem, (void **)&t->nodes, &t->cap, sizeof *t->nodes, 2, 2)) return -1;
  t->nodes[0] = (lp_tnode_t){UINT32_MAX, UINT32_MAX, 0, 0, 0, UINT32_MAX, UINT32_MAX};
  t->n = 1;
  return 0;
}

static uint32_t node_hash(uint32_t parent, uint32_t label) { return lp__hash64(((uint64_t)parent << 32) | label); }

uint32_t lp_tree_find(const lp_tree_t *t, uint32_t parent, uint32_t label) {
  if (t->index.mask) {
    for (uint32_t at, s = lp__index_first(&t->index, node_hash(parent, label), &at); s; s = lp__index_next(&t->index, &at))
      if (t->nodes[s - 1].parent == parent && t->nodes[s - 1].label == label) return s - 1;
  } else {
    for (uint32_t k = 1; k < t->n; k++)
      if (t->nodes[k].parent == parent && t->nodes[k].label == label) return k;
  }
  return UINT32_MAX;
}

uint32_t lp_tree_child(lp_tree_t *t, uint32_t parent, uint32_t label) {
  uint32_t found = lp_tree_find(t, parent, label);
  if (found != UINT32_MAX) return found;
  if (grow(t->mem, (void **)&t->nodes, &t->cap, sizeof *t->nodes, t->n + 1, 2)) return UINT32_MAX;
  uint32_t k = t->n++;
  t->nodes[k] = (lp_tnode_t){label, parent, 0, 0, 0, UINT32_MAX, UINT32_MAX};
  if (t->n <= TREE_LINEAR) return k;
  switch (lp_index_reserve(&t->index, t->mem, k - 1, 4 * TREE_LINEAR)) { /* every node but the root is indexed */
  case -1:
    t->n--;
    return UINT32_MAX;
  case 1:
    for (uint32_t j = 1; j < k; j++) lp__index_put(&t->index, node_hash(t->nodes[j].parent, t->nodes[j].label), j);
  }
  lp__index_put(&t->index, node_hash(parent, label), k);
  return k;
}

static const char *const *sort_labels;
static const lp_tnode_t *sort_nodes;
static int cmp_kid(const void *x, const void *y) {
  const lp_tnode_t *a = &sort_nodes[*(const uint32_t *)x], *b = &sort_nodes[*(const uint32_t *)y];
  if (a->total != b->total) return a->total > b->total ? -1 : 1;
  return strcmp(sort_labels[a->label], sort_labels[b->label]);
}

void lp_tree_link(lp_tree_t *t, const char *const *labels) {
  uint32_t *order = malloc((size_t)t->n * sizeof *order);
  for (uint32_t k = 0; k < t->n; k++) t->nodes[k].first_kid = t->nodes[k].next_sib = UINT32_MAX;
  if (!order) { /* unsorted, but linked */
    for (uint32_t k = t->n; k-- > 1;) {
      lp_tnode_t *p = &t->nodes[t->nodes[k].parent];
      t->nodes[k].next_sib = p->first_kid;
      p->first_kid = k;
    }
    return;
  }
  uint32_t m = 0;
  for (uint32_t k = 1; k < t->n; k++) order[m++] = k;
  sort_labels = labels;
  sort_nodes = t->nodes;
  qsort(order, m, sizeof *order, cmp_kid);
  for (uint32_t i = m; i-- > 0;) {
    uint32_t k = order[i];
    lp_tnode_t *p = &t->nodes[t->nodes[k].parent];
    t->nodes[k].next_sib = p->first_kid;
    p->first_kid = k;
  }
  free(order);
}

void lp_tree_free(lp_tree_t *t) {
  lp_mem_free(t->mem, t->nodes, (size_t)t->cap * sizeof *t->nodes);
  lp_index_free(&t->index, t->mem);
  memset(t, 0, sizeof *t);
}

/* ---- labels and lanes --------------------------------------------------------------- */

/* The labels' texts, packed in blocks: no allocator's word per label. */
#define TEXT_BLOCK (64u << 10)
typedef struct lp_text {
  struct lp_text *next;
  size_t used, cap;
  char s[];
} lp_text_t;

static char *text_copy(lp_agg_t *a, const char *s) {
  size_t n = strlen(s) + 1;
  lp_text_t *b = a->text;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > TEXT_BLOCK / 16 ? n : TEXT_BLOCK - sizeof *b - BLOCK_OVERHEAD;
    lp_text_t *nb = lp_mem_realloc(&a->mem, NULL, 0, sizeof *nb + cap);
    if (!nb) return NULL;
    nb->used = 0;
    nb->cap = cap;
    if (b && cap != n) { /* a new block to fill */
      nb->next = b;
      a->text = nb;
    } else if (b) { /* a long text alone in its block; the one being filled stays first */
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = NULL;
      a->text = nb;
    }
    b = nb;
  }
  char *t = b->s + b->used;
  memcpy(t, s, n);
  b->used += n;
  return t;
}

/* The label s's id, or UINT32_MAX; h is lp_text_hash(s). */
static uint32_t label_find(const lp_agg_t *a, const char *s, uint32_t h) {
  for (uint32_t at, k = lp__index_first(&a->label_index, h, &at); k; k = lp__index_next(&a->label_index, &at))
    if (strcmp(a->labels[k - 1], s) == 0) return k - 1;
  return UINT32_MAX;
}

uint32_t lp_agg_label(const lp_agg_t *a, const char *s) { return label_find(a, s, lp_text_hash(s)); }

static uint32_t intern(lp_agg_t *a, const char *s) {
  uint32_t h = lp_text_hash(s), found = label_find(a, s, h);
  if (found != UINT32_MAX) return found;
  switch (lp_index_reserve(&a->label_index, &a->mem, a->nlabels, 64)) {
  case -1: return UINT32_MAX;
  case 1:
    for (uint32_t k = 0; k < a->nlabels; k++) lp__index_put(&a->label_index, lp_text_hash(a->labels[k]), k);
  }
  if (grow(&a->mem, (void **)&a->gstats, &a->gstats_cap, sizeof *a->gstats, a->nlabels + 1, 16) ||
      grow(&a->mem, (void **)&a->labels, &a->labels_cap, sizeof *a->labels, a->nlabels + 1, 16))
    return UINT32_MAX;
  char *copy = text_copy(a, s);
  if (!copy) return UINT32_MAX;
  uint32_t k = a->nlabels++;
  a->labels[k] = copy;
  a->gstats[k] = (lp_lstat_t){.label = k, .min = INT64_MAX};
  lp__index_put(&a->label_index, h, k);
  return k;
}

#define STATS_LINEAR 8 /* a lane with up to this many labels finds them without a hash */

/* The lane's statistics of a label, made if new; NULL when out of memory. Valid until the next call. */
static lp_lstat_t *lane_stat(lp_agg_t *a, lp_lane_t *l, uint32_t label) {
  if (l->stat_index.mask) {
    for (uint32_t at, j = lp__index_first(&l->stat_index, lp__hash64(label), &at); j; j = lp__index_next(&l->stat_index, &at))
      if (l->stats[j - 1].label == label) return &l->stats[j - 1];
  } else {
    for (uint32_t j = 0; j < l->nstats; j++)
      if (l->stats[j].label == label) return &l->stats[j];
  }
  if (grow(&a->mem, (void **)&l->stats, &l->stats_cap, sizeof *l->stats, l->nstats + 1, 1)) return NULL;
  uint32_t j = l->nstats++;
  l->stats[j] = (lp_lstat_t){.label = label, .min = INT64_MAX};
  if (l->nstats <= STATS_LINEAR) return &l->stats[j];
  switch (lp_index_reserve(&l->stat_index, &a->mem, j, 4 * STATS_LINEAR)) {
  case -1:
    l->nstats--;
    return NULL;
  case 1:
    for (uint32_t k = 0; k < j; k++) lp__index_put(&l->stat_index, lp__hash64(l->stats[k].label), k);
  }
  lp__index_put(&l->stat_index, lp__hash64(label), j);
  return &l->stats[j];
}

static void lane_stats_free(lp_agg_t *a, lp_lane_t *l) {
  for (uint32_t j = 0; j < l->nstats; j++) hist_free(&a->mem, l->stats[j].hist);
  lp_mem_free(&a->mem, l->stats, (size_t)l->stats_cap * sizeof *l->stats);
  lp_index_free(&l->stat_index, &a->mem);
  l->stats = NULL;
  l->nstats = l->stats_cap = 0;
}

uint32_t lp_lane_hash(unsigned file, int64_t pid, int64_t tid) {
  return lp__hash64((uint64_t)pid * 0x9e3779b97f4a7c15ull ^ (uint64_t)tid ^ ((uint64_t)file << 48));
}

/* Puts every lane in the index again. */
static void lanes_index(lp_agg_t *a) {
  for (uint32_t k = 0; k < a->nlanes; k++) {
    const lp_lane_t *l = a->lanes[k];
    lp__index_put(&a->lane_index, lp_lane_hash(l->file, l->pid, l->tid), k);
  }
}

static lp_lane_t *lane_get(lp_agg_t *a, int64_t pid, int64_t tid) {
  unsigned file = a->nfiles - 1;
  lp_lane_t *c = a->last_lane; /* events of one lane tend to come together */
  if (c && c->pid == pid && c->tid == tid && c->file == file) return c;
  uint32_t h = lp_lane_hash(file, pid, tid);
  for (uint32_t at, k = lp__index_first(&a->lane_index, h, &at); k; k = lp__index_next(&a->lane_index, &at)) {
    lp_lane_t *l = a->lanes[k - 1];
    if (l->file == file && l->pid == pid && l->tid == tid) return a->last_lane = l;
  }
  switch (lp_index_reserve(&a->lane_index, &a->mem, a->nlanes, 64)) {
  case -1: return NULL;
  case 1: lanes_index(a);
  }
  if (grow(&a->mem, (void **)&a->lanes, &a->lanes_cap, sizeof *a->lanes, a->nlanes + 1, 16)) return NULL;
  lp_lane_t *l = mem_calloc(&a->mem, 1, sizeof *l);
  if (!l) return NULL;
  if (lp_tree_init(&l->tree, &a->mem)) {
    lp_mem_free(&a->mem, l, sizeof *l);
    return NULL;
  }
  l->file = file;
  l->pid = pid;
  l->tid = tid;
  l->last_start = INT64_MIN;
  l->closed = INT64_MIN;
  l->buffered = a->file_buffered;
  uint32_t k = a->nlanes++;
  a->lanes[k] = l;
  lp__index_put(&a->lane_index, h, k);
  return a->last_lane = l;
}

static void lane_free(lp_agg_t *a, lp_lane_t *l) {
  lane_stats_free(a, l);
  lp_tree_free(&l->tree);
  lp_mem_free(&a->mem, l->stack, (size_t)l->stack_cap * sizeof *l->stack);
  lp_mem_free(&a->mem, l->recs, l->recs_cap * sizeof *l->recs);
  lp_mem_free(&a->mem, l->runs, (size_t)l->runs_cap * sizeof *l->runs);
  lp_mem_free(&a->mem, l->opens, (size_t)l->opens_cap * sizeof *l->opens);
  if (l->name) lp_mem_free(&a->mem, l->name, strlen(l->name) + 1);
  lp_mem_free(&a->mem, l, sizeof *l);
}

/* A process's name, found by a hash as lanes are: a trace of many processes costs no more each than one. */
typedef struct lp_pname {
  unsigned file;
  int64_t pid;
  char *name;
} lp_pname_t;

static uint32_t pname_find(const lp_agg_t *a, unsigned file, int64_t pid) {
  for (uint32_t at, k = lp__index_first(&a->pname_index, lp_lane_hash(file, pid, 0), &at); k;
       k = lp__index_next(&a->pname_index, &at))
    if (a->pnames[k - 1].file == file && a->pnames[k - 1].pid == pid) return k - 1;
  return UINT32_MAX;
}

/* Puts every process name in the index again. */
static void pnames_index(lp_agg_t *a) {
  for (uint32_t k = 0; k < a->npnames; k++)
    lp__index_put(&a->pname_index, lp_lane_hash(a->pnames[k].file, a->pnames[k].pid, 0), k);
}

/* The first name a (file, pid) is given; 0, or -1 out of memory (past the cap). */
static int pname_add(lp_agg_t *a, unsigned file, int64_t pid, const char *name) {
  if (pname_find(a, file, pid) != UINT32_MAX) return 0;
  switch (lp_index_reserve(&a->pname_index, &a->mem, a->npnames, 64)) {
  case -1: return -1;
  case 1: pnames_index(a);
  }
  if (grow(&a->mem, (void **)&a->pnames, &a->pnames_cap, sizeof *a->pnames, a->npnames + 1, 16)) return -1;
  size_t n = strlen(name) + 1;
  char *copy = lp_mem_realloc(&a->mem, NULL, 0, n);
  if (!copy) return -1;
  memcpy(copy, name, n);
  uint32_t k = a->npnames++;
  a->pnames[k] = (lp_pname_t){file, pid, copy};
  lp__index_put(&a->pname_index, lp_lane_hash(file, pid, 0), k);
  return 0;
}

const char *lp_lane_title(const lp_agg_t *a, const lp_lane_t *l, char *buf, size_t len) {
  uint32_t k = pname_find(a, l->file, l->pid);
  const char *pname = k == UINT32_MAX ? NULL : a->pnames[k].name;
  char file[32] = "";
  if (a->nfiles > 1) snprintf(file, sizeof file, "file %u, ", l->file + 1);
  if (l->name)
    snprintf(buf, len, "%s (%s%s%spid %lld, tid %lld)", l->name, file, pname ? pname : "", pname ? " " : "",
             (long long)l->pid, (long long)l->tid);
  else
    snprintf(buf, len, "%s%s%spid %lld, tid %lld", file, pname ? pname : "", pname ? " " : "", (long long)l->pid,
             (long long)l->tid);
  return buf;
}

/* ---- the engine ----------------------------------------------------------------------- */

static void span(lp_lane_t *l, int64_t t) {
  if (!l->has_span) {
    l->first = l->last = t;
    l->has_span = true;
    return;
  }
  if (t < l->first) l->first = t;
  if (t > l->last) l->last = t;
}

static int count_call(lp_agg_t *a, lp_lstat_t *s, int64_t dur, int64_t self, bool top) {
  if (stat_value(&a->mem, s, dur)) return oom_at(a);
  s->calls++;
  s->sum = sat_add(s->sum, dur);
  s->self = sat_add(s->self, self);
  if (top) s->total = sat_add(s->total, dur);
  if (dur < s->min) s->min = dur;
  if (dur > s->max) s->max = dur;
  return 0;
}

static void warn_early_end(lp_agg_t *a, const lp_pos_t *pos) {
  if (a->early_end_warned) return;
  a->early_end_warned = true;
  if (a->file_buffered && pos->offset <= a->reported_upto) return; /* past the first pass's warning */
  lp_warn(pos, "an \"E\" ends before a scope inside it ends: it is taken to end with that scope "
               "(said once per file)");
}

/* Pops the top frame, ending at `end` (at the E at pos, NULL when none), and counts it. */
static int pop(lp_agg_t *a, lp_lane_t *l, int64_t end, const lp_pos_t *pos) {
  lp_frame_t *f = &l->stack[--l->depth];
  if (end < f->kids_end) { /* a scope never ends before its children do */
    end = f->kids_end;
    a->early_ends++;
    if (pos) warn_early_end(a, pos);
  }
  if (l->depth && l->stack[l->depth - 1].end != OPEN_END && end > l->stack[l->depth - 1].end) {
    end = l->stack[l->depth - 1].end; /* a child cannot outlast its parent */
    a->overlaps++;
  }
  int64_t dur = end > f->start ? lp_sat_sub(end, f->start) : 0;
  if (end > l->closed) l->closed = end;
  int64_t self = dur - f->kids;
  if (self < 0) self = 0;
  lp_tnode_t *n = &l->tree.nodes[f->node];
  n->calls++;
  n->total = sat_add(n->total, dur);
  n->self = sat_add(n->self, self);
  if (l->depth) {
    l->stack[l->depth - 1].kids = sat_add(l->stack[l->depth - 1].kids, dur);
    if (end > l->stack[l->depth - 1].kids_end) l->stack[l->depth - 1].kids_end = end;
  } else
    l->in_label = sat_add(l->in_label, dur);
  lp_lstat_t *ls = lane_stat(a, l, f->label);
  if (!ls) return oom_at(a);
  a->scopes++;
  return count_call(a, ls, dur, self, f->top);
}

/* Pops the complete scopes that have ended by t. */
static int settle(lp_agg_t *a, lp_lane_t *l, int64_t t) {
  while (l->depth && l->stack[l->depth - 1].end != OPEN_END && l->stack[l->depth - 1].end <= t) {
    int rc = pop(a, l, l->stack[l->depth - 1].end, NULL);
    if (rc) return rc;
  }
  return 0;
}

static int push(lp_agg_t *a, lp_lane_t *l, uint32_t label, int64_t start, int64_t end, const lp_pos_t *pos) {
  if (l->depth >= MAX_DEPTH) {
    char t[256];
    lp_report(pos, "scopes nested deeper than %d on lane %s: expected their ends", MAX_DEPTH,
              lp_lane_title(a, l, t, sizeof t));
    return LP_READ_BAD;
  }
  if (grow(&a->mem, (void **)&l->stack, &l->stack_cap, sizeof *l->stack, l->depth + 1, 1)) return oom_at(a);
  if (l->depth && end != OPEN_END && l->stack[l->depth - 1].end != OPEN_END && end > l->stack[l->depth - 1].end) {
    end = l->stack[l->depth - 1].end; /* a child cannot outlast its parent */
    a->overlaps++;
  }
  uint32_t parent = l->depth ? l->stack[l->depth - 1].node : 0;
  uint32_t node = lp_tree_child(&l->tree, parent, label);
  if (node == UINT32_MAX) return oom_at(a);
  bool top = true;
  for (uint32_t i = 0; i < l->depth && top; i++) top = l->stack[i].label != label;
  lp_frame_t *f = &l->stack[l->depth++];
  *f = (lp_frame_t){label, node, start, end, 0, INT64_MIN, top, pos ? pos->line : 0, pos ? pos->column : 0, pos ? pos->offset : 0};
  if (start > l->last_start) l->last_start = start;
  return 0;
}

static void warn_pos(lp_agg_t *a, const lp_pos_t *pos, const char *what) {
  if (a->file_buffered && pos->offset <= a->reported_upto) return; /* said in the first pass */
  if (a->warned++ < MAX_WARN) lp_warn(pos, "%s", what);
}

static int end_scope(lp_agg_t *a, lp_lane_t *l, int64_t t, const lp_pos_t *pos) {
  int rc = settle(a, l, t);
  if (rc) return rc;
  uint32_t b = l->depth;
  while (b && l->stack[b - 1].end != OPEN_END) b--;
  if (!b) {
    a->unmatched_ends++;
    if (a->strict) {
      lp_report(pos, "an \"E\" event with no open \"B\" on its lane (pid %lld, tid %lld)", (long long)l->pid,
                (long long)l->tid);
      return LP_READ_BAD;
    }
    warn_pos(a, pos, "an \"E\" event with no open \"B\" on its lane: ignored");
    return 0;
  }
  while (l->depth >= b) /* complete scopes still open inside the B end with it */
    if ((rc = pop(a, l, t, pos))) return rc;
  return 0;
}

static int cmp_rec(const void *x, const void *y) {
  const lp_rec_t *a = x, *b = y;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->end != b->end) return a->end > b->end ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Writes every buffered lane's scopes to the spill file as one sorted run each, and frees them. */
static int spill(lp_agg_t *a) {
  int fd = a->spill ? -1 : lp_temp_fd();
  if (!a->spill && (fd < 0 || !(a->spill = fdopen(fd, "w+b")))) {
    if (fd >= 0) close(fd);
    fprintf(stderr, "labelprof: %s: cannot make a temporary file for the buffered scopes: %s\n", a->file,
            strerror(errno));
    return LP_READ_BAD;
  }
  for (uint32_t k = 0; k < a->nlanes; k++) {
    lp_lane_t *l = a->lanes[k];
    if (!l->nrecs) continue;
    qsort(l->recs, l->nrecs, sizeof *l->recs, cmp_rec);
    if (grow(&a->mem, (void **)&l->runs, &l->runs_cap, sizeof *l->runs, l->nruns + 1, 8)) return oom_at(a);
    if (fwrite(l->recs, sizeof *l->recs, l->nrecs, a->spill) != l->nrecs) {
      fprintf(stderr, "labelprof: %s: writing buffered scopes to a temporary file: %s\n", a->file, strerror(errno));
      return LP_READ_BAD;
    }
    l->runs[l->nruns++] = (lp_run_t){a->spill_off, l->nrecs};
    a->spill_off += l->nrecs * sizeof *l->recs;
    lp_mem_free(&a->mem, l->recs, l->recs_cap * sizeof *l->recs);
    l->recs = NULL;
    l->nrecs = l->recs_cap = 0;
  }
  if (fflush(a->spill) != 0) {
    fprintf(stderr, "labelprof: %s: writing buffered scopes to a temporary file: %s\n", a->file, strerror(errno));
    return LP_READ_BAD;
  }
  a->nbuffered = 0;
  return 0;
}

static int rec_add(lp_agg_t *a, lp_lane_t *l, int64_t start, int64_t end, uint32_t label, uint64_t off) {
  if (a->nbuffered >= (a->spill_limit ? a->spill_limit : LP_SPILL_RECS)) {
    int rc = spill(a);
    if (rc) return rc;
  }
  if (l->nrecs == l->recs_cap) {
    uint32_t n = l->recs_cap ? l->recs_cap * 2 : 4;
    lp_rec_t *r = lp_mem_realloc(&a->mem, l->recs, l->recs_cap * sizeof *r, n * sizeof *r);
    if (!r) return oom_at(a);
    l->recs = r;
    l->recs_cap = n;
  }
  l->recs[l->nrecs++] = (lp_rec_t){start, end, label, l->seq++, off};
  a->nbuffered++;
  return 0;
}

/* Reading back one run (or the scopes still in memory) a block at a time, for the merge. */
#define RUN_BLOCK 2048
typedef struct cursor {
  lp_rec_t *buf;
  size_t pos, len;
  uint64_t off, left; /* in the spill file; left == 0 and no off for the in-memory run */
  bool owned;
} cursor_t;

static int cursor_fill(lp_agg_t *a, cursor_t *c) {
  if (c->pos < c->len || !c->left) return 0;
  size_t n = c->left < RUN_BLOCK ? (size_t)c->left : RUN_BLOCK;
  ssize_t got = pread(fileno(a->spill), c->buf, n * sizeof *c->buf, (off_t)c->off);
  if (got != (ssize_t)(n * sizeof *c->buf)) {
    fprintf(stderr, "labelprof: %s: reading buffered scopes back from a temporary file: %s\n", a->file,
            got < 0 ? strerror(errno) : "short read");
    return LP_READ_BAD;
  }
  c->off += got;
  c->left -= n;
  c->pos = 0;
  c->len = n;
  return 0;
}

static bool cursor_less(const cursor_t *x, const cursor_t *y) { return cmp_rec(&x->buf[x->pos], &y->buf[y->pos]) < 0; }

static void sift(cursor_t **h, size_t n, size_t i) {
  for (;;) {
    size_t m = i, l = 2 * i + 1, r = l + 1;
    if (l < n && cursor_less(h[l], h[m])) m = l;
    if (r < n && cursor_less(h[r], h[m])) m = r;
    if (m == i) return;
    cursor_t *t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

/* Runs one buffered scope through the engine, in order of starts. */
static int feed(lp_agg_t *a, lp_lane_t *l, lp_rec_t r) {
  int rc = settle(a, l, r.start);
  if (rc) return rc;
  if (r.start < l->closed) { /* overlaps a scope it is not inside of: starts at its end */
    r.start = l->closed;
    if (r.end < r.start) r.end = r.start;
    a->overlaps++;
  }
  lp_pos_t pos = {a->file, r.off, 0, 0}; /* the byte offset: lines are not kept for buffered scopes */
  a->at = pos;
  return push(a, l, r.label, r.start, r.end, &pos);
}

/* All of a buffered lane's scopes, in order: the in-memory ones and the spilled runs merged. */
static int run_buffered(lp_agg_t *a, lp_lane_t *l) {
  if (l->nrecs) qsort(l->recs, l->nrecs, sizeof *l->recs, cmp_rec);
  int rc = 0;
  if (!l->nruns) {
    for (size_t i = 0; i < l->nrecs && !rc; i++) rc = feed(a, l, l->recs[i]);
    return rc;
  }
  size_t n = l->nruns + 1, live = 0;
  cursor_t *cur = calloc(n, sizeof *cur);
  cursor_t **heap = calloc(n, sizeof *heap);
  if (!cur || !heap) {
    free(cur);
    free(heap);
    return oom_at(a);
  }
  for (uint32_t i = 0; i < l->nruns && !rc; i++) {
    cur[i] = (cursor_t){malloc(RUN_BLOCK * sizeof(lp_rec_t)), 0, 0, l->runs[i].off, l->runs[i].n, true};
    if (!cur[i].buf) rc = oom_at(a);
    else rc = cursor_fill(a, &cur[i]);
  }
  cur[n - 1] = (cursor_t){l->recs, 0, l->nrecs, 0, 0, false};
  for (size_t i = 0; i < n && !rc; i++)
    if (cur[i].pos < cur[i].len) heap[live++] = &cur[i];
  for (size_t i = live; i-- > 0;) sift(heap, live, i);
  while (live && !rc) {
    cursor_t *c = heap[0];
    rc = feed(a, l, c->buf[c->pos++]);
    if (!rc) rc = cursor_fill(a, c);
    if (c->pos >= c->len) heap[0] = heap[--live];
    sift(heap, live, 0);
  }
  for (size_t i = 0; i < n; i++)
    if (cur[i].owned) free(cur[i].buf);
  free(cur);
  free(heap);
  lp_mem_free(&a->mem, l->runs, (size_t)l->runs_cap * sizeof *l->runs);
  l->runs = NULL;
  l->nruns = l->runs_cap = 0;
  return rc;
}

/* The file's own words about itself: kept for the notes, and a declared order followed. */
static int file_info(lp_agg_t *a, const lp_event_t *ev) {
  lp_file_info_t *f = &a->finfo[a->nfiles - 1];
  const char *k = ev->name, *v = ev->text;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  bool num = end != v && !*end && !errno && n >= 0;
  if (strcmp(k, "labelprof_scope_order") == 0 && strcmp(v, "ends") == 0) {
    /* Said before any scope: every lane of the file is buffered from the start, without a first pass. */
    bool any = false;
    for (uint32_t i = 0; i < a->nlanes && !any; i++) any = a->lanes[i]->file == a->nfiles - 1;
    if (!any && !a->file_buffered) {
      a->file_buffered = true;
      a->reported_upto = 0;
      f->ends_order = true;
    }
  } else if (strcmp(k, "otherData.events_dropped") == 0 && num) {
    f->has_dropped = true;
    f->dropped = (uint64_t)n;
  } else if (strcmp(k, "otherData.budget_bytes") == 0 && num) {
    f->budget = (uint64_t)n;
  } else if (strcmp(k, "otherData.policy") == 0) {
    f->ring = strcmp(v, "ring") == 0;
    f->stream = strcmp(v, "stream") == 0;
  } else if (strcmp(k, "otherData.ts_base_ns") == 0 && num) {
    f->ts_base = n;
  } else if (strcmp(k, "otherData.session_start_ns") == 0 && num) {
    f->start = n;
    f->has_session = f->stop >= n;
  } else if (strcmp(k, "otherData.session_stop_ns") == 0 && num) {
    f->stop = n;
    f->has_session = f->start && n >= f->start;
  } else if (strcmp(k, "otherData.first_drop_ns") == 0 && num) {
    f->first_drop = n;
  } else if (strcmp(k, "otherData.file_start_ns") == 0 && num) {
    f->file_start = n;
  } else if (strcmp(k, "perfetto.unknown_name_iids") == 0 && num) {
    f->unknown_names = (uint64_t)n;
  }
  return 0;
}

static int on_event(void *ctx, const lp_event_t *ev) {
  lp_agg_t *a = ctx;
  if (ev->kind == LP_EV_FILE_INFO) return file_info(a, ev);
  a->events++;
  a->at = ev->pos;
  if (!a->file_buffered) a->reported_upto = ev->pos.offset;
  if (ev->kind == LP_EV_SKIPPED) {
    a->skipped++;
    return 0;
  }
  if (ev->kind == LP_EV_PROCESS_NAME) return pname_add(a, a->nfiles - 1, ev->pid, ev->name) ? oom_at(a) : 0;
  lp_lane_t *l = lane_get(a, ev->pid, ev->tid);
  if (!l) return oom_at(a);
  switch (ev->kind) {
  case LP_EV_THREAD_NAME:
    if (!l->name) {
      size_t n = strlen(ev->name) + 1;
      if (!(l->name = lp_mem_realloc(&a->mem, NULL, 0, n))) return oom_at(a);
      memcpy(l->name, ev->name, n);
    }
    return 0;
  case LP_EV_INSTANT: a->instants++; span(l, ev->ts); return 0;
  case LP_EV_COUNTER: a->counters++; span(l, ev->ts); return 0;
  default: break;
  }
  span(l, ev->ts);
  if (ev->kind == LP_EV_COMPLETE) span(l, sat_add(ev->ts, ev->dur));
  if (l->buffered) {
    if (ev->kind == LP_EV_END) {
      if (!l->nopens) {
        a->unmatched_ends++;
        if (a->strict) {
          lp_report(&ev->pos, "an \"E\" event with no open \"B\" on its lane (pid %lld, tid %lld)",
                    (long long)l->pid, (long long)l->tid);
          return LP_READ_BAD;
        }
        warn_pos(a, &ev->pos, "an \"E\" event with no open \"B\" on its lane: ignored");
        return 0;
      }
      lp_open_t *o = &l->opens[--l->nopens];
      int64_t end = ev->ts < o->start ? o->start : ev->ts;
      if (end < o->kids_end) { /* as pop() does: never before a scope inside it */
        end = o->kids_end;
        a->early_ends++;
        warn_early_end(a, &ev->pos);
      }
      if (l->nopens && end > l->opens[l->nopens - 1].kids_end) l->opens[l->nopens - 1].kids_end = end;
      return rec_add(a, l, o->start, end, o->label, o->pos.offset);
    }
    uint32_t label = intern(a, ev->name);
    if (label == UINT32_MAX) return oom_at(a);
    if (ev->kind == LP_EV_COMPLETE) return rec_add(a, l, ev->ts, sat_add(ev->ts, ev->dur), label, ev->pos.offset);
    if (l->nopens >= MAX_DEPTH) {
      lp_report(&ev->pos, "\"B\" events nested deeper than %d on one lane: expected their ends", MAX_DEPTH);
      return LP_READ_BAD;
    }
    if (grow(&a->mem, (void **)&l->opens, &l->opens_cap, sizeof *l->opens, l->nopens + 1, 4)) return oom_at(a);
    l->opens[l->nopens++] = (lp_open_t){label, ev->ts, INT64_MIN, ev->pos};
    return 0;
  }
  if (ev->kind == LP_EV_END) return end_scope(a, l, ev->ts, &ev->pos);
  /* A scope starts: the lane must be in order of starts, a parent before its children. */
  int64_t end = ev->kind == LP_EV_COMPLETE ? sat_add(ev->ts, ev->dur) : OPEN_END;
  /* Before an end already seen: written at its end, or B/E out of order. */
  bool late = ev->ts < l->last_start || ev->ts < l->closed;
  if (!late && l->depth && ev->kind == LP_EV_COMPLETE) {
    const lp_frame_t *t = &l->stack[l->depth - 1];
    late = t->start == ev->ts && t->end != OPEN_END && t->end < end; /* same start, and this one is longer */
  }
  if (late) {
    a->restart = true;
    return LP_READ_BAD; /* stops the pass quietly; lp_agg_file reads the file again */
  }
  int rc = settle(a, l, ev->ts);
  if (rc) return rc;
  uint32_t label = intern(a, ev->name);
  if (label == UINT32_MAX) return oom_at(a);
  return push(a, l, label, ev->ts, end, &ev->pos);
}

/* End of a file: buffered lanes are sorted and run; open scopes end at their lane's last event. */
static int finish_file(lp_agg_t *a, unsigned file) {
  for (uint32_t k = 0; k < a->nlanes; k++) {
    lp_lane_t *l = a->lanes[k];
    if (l->file != file) continue;
    int rc;
    if (l->buffered) {
      for (uint32_t i = l->nopens; i-- > 0;) {
        a->unclosed_begins++;
        if (a->strict) {
          lp_report(&l->opens[i].pos, "a \"B\" event never closed by an \"E\"");
          return LP_READ_BAD;
        }
        warn_pos(a, &l->opens[i].pos, "a \"B\" event never closed: it ends at its lane's last event");
        if ((rc = rec_add(a, l, l->opens[i].start, l->last, l->opens[i].label, l->opens[i].pos.offset))) return rc;
      }
      l->nopens = 0;
      if ((rc = run_buffered(a, l))) return rc;
      lp_mem_free(&a->mem, l->recs, l->recs_cap * sizeof *l->recs);
      l->recs = NULL;
      l->nrecs = l->recs_cap = 0;
    }
    if ((rc = settle(a, l, INT64_MAX))) return rc;
    while (l->depth) {
      const lp_frame_t *f = &l->stack[l->depth - 1];
      lp_pos_t pos = {a->file, f->off, f->line, f->col};
      a->unclosed_begins++;
      if (a->strict) {
        lp_report(&pos, "a \"B\" event never closed by an \"E\"");
        return LP_READ_BAD;
      }
      warn_pos(a, &pos, "a \"B\" event never closed: it ends at its lane's last event");
      if ((rc = pop(a, l, l->last, NULL))) return rc;
      if ((rc = settle(a, l, INT64_MAX))) return rc;
    }
    /* The lane is done: its statistics join those of all lanes. */
    for (uint32_t i = 0; i < l->nstats; i++)
      if (lp_lstat_add(&a->mem, &a->gstats[l->stats[i].label], &l->stats[i])) return oom_at(a);
    if (!a->lane_hists) lane_stats_free(a, l);
    lp_mem_free(&a->mem, l->stack, (size_t)l->stack_cap * sizeof *l->stack); /* the lane is done */
    l->stack = NULL;
    l->stack_cap = 0;
  }
  return 0;
}

void lp_agg_init(lp_agg_t *a) {
  memset(a, 0, sizeof *a);
  a->mem.cap = lp_mem_cap();
}

/* Forgets the lanes of the last file (to read it again); labels stay, their statistics are rebuilt. */
static void drop_file(lp_agg_t *a, unsigned file) {
  uint32_t kept = 0;
  for (uint32_t k = 0; k < a->nlanes; k++) {
    if (a->lanes[k]->file == file)
      lane_free(a, a->lanes[k]);
    else
      a->lanes[kept++] = a->lanes[k];
  }
  a->nlanes = kept;
  a->last_lane = NULL;
  lp__index_clear(&a->lane_index);
  lanes_index(a);
  uint32_t kp = 0;
  for (uint32_t i = 0; i < a->npnames; i++) {
    if (a->pnames[i].file == file)
      lp_mem_free(&a->mem, a->pnames[i].name, strlen(a->pnames[i].name) + 1);
    else
      a->pnames[kp++] = a->pnames[i];
  }
  a->npnames = kp;
  lp__index_clear(&a->pname_index);
  pnames_index(a);
}

int lp_agg_file(lp_agg_t *a, const char *path) {
  lp_input_t *in = lp_input_open(path);
  if (!in) return LP_READ_BAD;
  if (a->nfiles + 1 > a->finfo_cap) {
    unsigned cap = a->finfo_cap ? a->finfo_cap * 2 : 4;
    lp_file_info_t *f = realloc(a->finfo, cap * sizeof *f);
    if (f) a->finfo = f;
    const char **p = realloc(a->fpaths, cap * sizeof *p);
    if (p) a->fpaths = p;
    if (!f || !p) {
      lp_input_close(in);
      fprintf(stderr, "labelprof: out of memory\n");
      return LP_READ_BAD;
    }
    a->finfo_cap = cap;
  }
  memset(&a->finfo[a->nfiles], 0, sizeof *a->finfo);
  a->fpaths[a->nfiles] = path;
  a->nfiles++;
  a->file = path;
  a->file_buffered = false;
  a->restart = false;
  a->early_end_warned = false;
  lp_agg_t saved_counts = *a; /* the counts to go back to if the file is read again */
  lp_sink_t sink = {a, on_event, &a->mem};
  int rc = lp_read_input(in, &sink);
  if (rc && a->restart) {
    const char *shown = strcmp(path, "-") == 0 ? "<stdin>" : path;
    fprintf(stderr,
            "labelprof: %s: scopes are not in order of their starts (complete events written at their ends?); "
            "reading it again with each lane buffered (in memory up to 24 MiB, then in a temporary file)\n",
            shown);
    drop_file(a, a->nfiles - 1);
    a->events = saved_counts.events;
    a->scopes = saved_counts.scopes;
    a->instants = saved_counts.instants;
    a->counters = saved_counts.counters;
    a->skipped = saved_counts.skipped;
    a->unmatched_ends = saved_counts.unmatched_ends;
    a->unclosed_begins = saved_counts.unclosed_begins;
    a->overlaps = saved_counts.overlaps;
    a->early_ends = saved_counts.early_ends;
    /* warnings already printed are not printed again, nor counted twice */
    a->file_buffered = true;
    a->restart = false;
    if (lp_input_rewind(in) != 0) {
      lp_input_close(in);
      return LP_READ_BAD;
    }
    rc = lp_read_input(in, &sink);
  }
  lp_input_close(in);
  if (rc) return LP_READ_BAD;
  rc = finish_file(a, a->nfiles - 1);
  if (a->spill) { /* the next file starts its own */
    fclose(a->spill);
    a->spill = NULL;
    a->spill_off = 0;
  }
  a->nbuffered = 0;
  if (rc) return rc;
  if (a->warned > MAX_WARN)
    fprintf(stderr, "labelprof: %s: %d more warnings like these\n", strcmp(path, "-") == 0 ? "<stdin>" : path,
            a->warned - MAX_WARN);
  a->warned = 0;
  return 0;
}

int lp_agg_read_one(lp_agg_t *a, const char *path, bool strict) {
  lp_agg_init(a);
  a->strict = strict;
  int rc = lp_agg_file(a, path);
  if (rc != 0) lp_agg_free(a);
  return rc;
}

int lp_agg_read_files(lp_agg_t *a, const char *const *paths, int n, bool strict) {
  lp_agg_init(a);
  a->strict = strict;
  for (int i = 0; i < n; i++)
    if (lp_agg_file(a, paths[i]) != 0) {
      lp_agg_free(a);
      return LP_READ_BAD;
    }
  return 0;
}

int64_t lp_agg_wall(const lp_agg_t *a) {
  int64_t w = 0;
  for (uint32_t k = 0; k < a->nlanes; k++)
    w = sat_add(w, lp_lane_span(a->lanes[k]));
  return w;
}

void lp_agg_free(lp_agg_t *a) {
  if (a->spill) fclose(a->spill);
  for (uint32_t k = 0; k < a->nlanes; k++) lane_free(a, a->lanes[k]);
  free(a->lanes);
  lp_index_free(&a->lane_index, NULL);
  for (uint32_t j = 0; j < a->nlabels; j++) hist_free(NULL, a->gstats[j].hist);
  for (lp_text_t *b = a->text, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  free(a->labels);
  free(a->gstats);
  lp_index_free(&a->label_index, NULL);
  for (uint32_t i = 0; i < a->npnames; i++) free(a->pnames[i].name);
  free(a->pnames);
  lp_index_free(&a->pname_index, NULL);
  free(a->finfo);
  free(a->fpaths);
  memset(a, 0, sizeof *a);
}

/* A duration for the notes: "5.0 us", "3.3 ms", "19.70 s". */
static const char *note_time(int64_t ns, char *buf, size_t size) {
  if (ns < 0) ns = 0;
  if (ns < 1000000)
    snprintf(buf, size, "%.1f us", (double)ns / 1e3);
  else if (ns < 1000000000)
    snprintf(buf, size, "%.1f ms", (double)ns / 1e6);
  else
    snprintf(buf, size, "%.2f s", (double)ns / 1e9);
  return buf;
}

static const char *note_count(uint64_t n, char *buf, size_t size) {
  char digits[24];
  int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
  size_t k = 0;
  for (int i = 0; i < len && k + 2 < size; i++) {
    if (i && (len - i) % 3 == 0) buf[k++] = ',';
    buf[k++] = digits[i];
  }
  buf[k] = '\0';
  return buf;
}

void lp_agg_file_notes(const lp_agg_t *a, FILE *out) {
  for (unsigned fi = 0; fi < a->nfiles; fi++) {
    const lp_file_info_t *f = &a->finfo[fi];
    const char *path = strcmp(a->fpaths[fi], "-") == 0 ? "<stdin>" : a->fpaths[fi];
    char n[32], budget[48] = "budget", t1[32], t2[32], t3[32];
    if (f->unknown_names) {
      note_count(f->unknown_names, n, sizeof n);
      fprintf(out, "note: %s: %s events name an iid never interned on their sequence: they are counted without a "
                   "name, as Perfetto shows them\n", path, n);
    }
    if (!f->has_dropped || !f->dropped) continue;
    note_count(f->dropped, n, sizeof n);
    if (f->budget) {
      if (f->budget % (1u << 20) == 0)
        snprintf(budget, sizeof budget, "%llu MiB budget", (unsigned long long)(f->budget >> 20));
      else if (f->budget % 1024 == 0)
        snprintf(budget, sizeof budget, "%llu KiB budget", (unsigned long long)(f->budget >> 10));
      else
        snprintf(budget, sizeof budget, "%llu-byte budget", (unsigned long long)f->budget);
    }
    if (!f->has_session) {
      fprintf(out, "note: %s: %s events were dropped (otherData.events_dropped): the trace does not hold the whole run\n",
              path, n);
      continue;
    }
    int64_t len = f->stop - f->start, at = f->first_drop ? f->first_drop - f->start : 0;
    if (f->stream) {
      /* A stream keeps recording: what it lost are gaps, wherever its writer fell behind. */
      if (!f->first_drop && f->file_start > f->start && f->file_start <= f->stop) {
        /* A later file of a rotated stream, whose drops began before it: they are said from its start. */
        fprintf(out, "note: %s: %s events were dropped while the stream's writer fell behind (its %s was full), "
                     "since this file began, %s into the %s session: the trace has gaps there\n",
                path, n, budget, note_time(f->file_start - f->start, t1, sizeof t1), note_time(len, t2, sizeof t2));
        continue;
      }
      fprintf(out, "note: %s: %s events were dropped while the stream's writer fell behind (its %s was full), the "
                   "first at %s into the %s session: the trace has gaps there\n",
              path, n, budget, note_time(at, t1, sizeof t1), note_time(len, t2, sizeof t2));
      continue;
    }
    if (!f->ring) {
      fprintf(out, "note: %s: the trace covers %s of a %s session; %s events were dropped after the %s filled at %s\n",
              path, note_time(at, t1, sizeof t1), note_time(len, t2, sizeof t2), n, budget, note_time(at, t3, sizeof t3));
      continue;
    }
    /* A ring keeps the newest events: the trace starts at its lanes' earliest event. */
    int64_t first = INT64_MAX;
    for (uint32_t k = 0; k < a->nlanes; k++) {
      const lp_lane_t *l = a->lanes[k];
      if (l->file == fi && l->has_span && l->first < first) first = l->first;
    }
    int64_t from = first == INT64_MAX ? f->start : lp_sat_add(first, f->ts_base);
    if (from < f->start) from = f->start;
    fprintf(out, "note: %s: the trace covers the last %s of a %s session; %s events were overwritten after the %s "
                 "filled at %s\n",
            path, note_time(f->stop - from, t1, sizeof t1), note_time(len, t2, sizeof t2), n, budget,
            note_time(at, t3, sizeof t3));
  }
}

void lp_agg_lane_tree(const lp_agg_t *a, lp_lane_t *l) {
  int64_t span = lp_lane_span(l);
  l->tree.nodes[0].total = span;
  l->tree.nodes[0].self = span > l->in_label ? span - l->in_label : 0;
  lp_tree_link(&l->tree, (const char *const *)a->labels);
}

int lp_agg_merged_tree(const lp_agg_t *a, lp_tree_t *m) { return lp_agg_process_tree(a, NULL, m); }

static int cmp_process(const void *x, const void *y) {
  const lp_lane_t *a = *(const lp_lane_t *const *)x, *b = *(const lp_lane_t *const *)y;
  if (a->file != b->file) return a->file < b->file ? -1 : 1;
  return a->pid < b->pid ? -1 : a->pid > b->pid;
}

size_t lp_agg_processes(const lp_agg_t *a, const lp_lane_t ***out) {
  const lp_lane_t **v = malloc((a->nlanes ? a->nlanes : 1) * sizeof *v);
  *out = v;
  if (!v) return 0;
  for (uint32_t k = 0; k < a->nlanes; k++) v[k] = a->lanes[k];
  qsort(v, a->nlanes, sizeof *v, cmp_process);
  size_t n = 0;
  for (uint32_t k = 0; k < a->nlanes; k++)
    if (!n || !lp_same_process(v[n - 1], v[k])) v[n++] = v[k];
  return n;
}

const char *lp_process_title(const lp_agg_t *a, const lp_lane_t *l, char *buf, size_t len) {
  uint32_t k = pname_find(a, l->file, l->pid);
  const char *pname = k == UINT32_MAX ? NULL : a->pnames[k].name, *file = a->fpaths[l->file];
  if (file && strcmp(file, "-") == 0) file = "<stdin>";
  snprintf(buf, len, "process %lld%s%s%s%s%s", (long long)l->pid, pname ? " " : "", pname ? pname : "",
           a->nfiles > 1 ? " (" : "", a->nfiles > 1 ? file : "", a->nfiles > 1 ? ")" : "");
  return buf;
}

int lp_agg_process_tree(const lp_agg_t *a, const lp_lane_t *proc, lp_tree_t *m) {
  if (lp_tree_init(m, NULL)) return -1;
  for (uint32_t k = 0; k < a->nlanes; k++) {
    const lp_lane_t *l = a->lanes[k];
    if (proc && !lp_same_process(proc, l)) continue;
    uint32_t *map = malloc((size_t)l->tree.n * sizeof *map);
    if (!map) return -1;
    map[0] = 0;
    /* A node's parent was made before it, so one pass in order maps every node. */
    for (uint32_t j = 1; j < l->tree.n; j++) {
      const lp_tnode_t *n = &l->tree.nodes[j];
      uint32_t to = lp_tree_child(m, map[n->parent], n->label);
      if (to == UINT32_MAX) {
        free(map);
        return -1;
      }
      map[j] = to;
      m->nodes[to].calls += n->calls;
      m->nodes[to].total = sat_add(m->nodes[to].total, n->total);
      m->nodes[to].self = sat_add(m->nodes[to].self, n->self);
    }
    free(map);
    int64_t span = lp_lane_span(l);
    m->nodes[0].total = sat_add(m->nodes[0].total, span);
    m->nodes[0].self = sat_add(m->nodes[0].self, span > l->in_label ? span - l->in_label : 0);
  }
  lp_tree_link(m, (const char *const *)a->labels);
  return 0;
}
