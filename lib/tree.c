/*
 * tree.c: the weighted tree, from samples to the printed report.
 *
 * While the collector runs, each sample is added at once to an aggregation
 * keyed by (parent node, call site): one hash probe per frame, one counter
 * increment per sample, so memory grows with the number of distinct paths and
 * never with the number of samples. Each thread has its own root.
 *
 * At stop, lp__profile_build() turns the aggregation into the profile users
 * see: label texts interned and copied (so the profile outlives the code
 * whose literals it names), call sites with equal text merged, an all-threads
 * tree plus one tree per thread, totals summed bottom-up, children sorted by
 * weight. The report and folded stacks are printed from that.
 */
#include "internal.h"

#include "index.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const lp_site_t lp__truncated_site = {"(deeper than 64 labels)", __FILE__, "", 0, 0, 0, 0, 0, 0};

static uint32_t hash2(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return (uint32_t)h;
}

static int grow(void **arr, uint32_t *cap, size_t elem, uint32_t need) {
  if (need <= *cap) return 0;
  uint32_t ncap = *cap ? *cap : 16;
  while (ncap < need) {
    if (ncap > UINT32_MAX / 2) return -ENOMEM;
    ncap *= 2;
  }
  void *n = lp__realloc(*arr, (size_t)ncap * elem);
  if (!n) return -ENOMEM;
  *arr = n;
  *cap = ncap;
  return 0;
}

/* ---- aggregation ---------------------------------------------------------- */

int lp__agg_init(lp__agg_t *a) {
  memset(a, 0, sizeof *a);
  a->mask = 255;
  a->free_nodes = LP__NONE;
  a->free_threads = LP__NONE;
  a->slots = lp__calloc((size_t)a->mask + 1, sizeof *a->slots);
  return a->slots ? 0 : -ENOMEM;
}

void lp__agg_free(lp__agg_t *a) {
  free(a->nodes);
  free(a->slots);
  free(a->threads);
  memset(a, 0, sizeof *a);
}

size_t lp__agg_bytes(const lp__agg_t *a) {
  return (size_t)a->capnodes * sizeof *a->nodes + ((size_t)a->mask + 1) * sizeof *a->slots +
         (size_t)a->capthreads * sizeof *a->threads;
}

uint32_t lp__agg_records(const lp__agg_t *a) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < a->nthreads; i++) n += !a->threads[i].free;
  return n;
}

/* A node for thread record `thread`, from the free list or the end of the array. */
static uint32_t new_node(lp__agg_t *a, const lp_site_t *site, uint32_t parent, uint32_t thread) {
  uint32_t idx;
  if (a->free_nodes != LP__NONE) {
    idx = a->free_nodes;
    a->free_nodes = a->nodes[idx].next;
    a->nfree--;
  } else {
    if (grow((void **)&a->nodes, &a->capnodes, sizeof *a->nodes, a->nnodes + 1) != 0) return LP__NONE;
    idx = a->nnodes++;
  }
  lp__agg_node_t *n = &a->nodes[idx];
  n->site = site;
  n->parent = parent;
  n->thread = thread;
  n->next = LP__NONE;
  n->aux = LP__NONE;
  n->self = 0;
  n->cpu_ns = 0;
  /* Appended to its thread's list: parents come before their children there. */
  if (thread != LP__NONE) {
    lp__agg_thread_t *t = &a->threads[thread];
    if (t->last != LP__NONE)
      a->nodes[t->last].next = idx;
    else
      t->first = idx;
    t->last = idx;
  }
  return idx;
}

int lp__agg_add_thread(lp__agg_t *a, uint64_t tid, const char *name) {
  uint32_t i;
  if (a->free_threads != LP__NONE) {
    i = a->free_threads;
  } else {
    if (grow((void **)&a->threads, &a->capthreads, sizeof *a->threads, a->nthreads + 1) != 0) return -ENOMEM;
    i = a->nthreads;
  }
  lp__agg_thread_t *t = &a->threads[i];
  lp__agg_thread_t keep = *t; /* a free record keeps the free list in ->older */
  memset(t, 0, sizeof *t);
  t->tid = tid;
  snprintf(t->name, sizeof t->name, "%s", name);
  t->first = t->last = LP__NONE;
  t->last_word = LP__NO_WORD;
  t->last_leaf = LP__NONE;
  t->cpu_word = LP__NO_WORD;
  t->cpu_leaf = LP__NONE;
  t->older = LP__NONE;
  uint32_t root = new_node(a, NULL, LP__NONE, i);
  if (root == LP__NONE) {
    *t = keep; /* not taken: still free, still on the free list */
    return -ENOMEM;
  }
  uint32_t next_free = keep.older;
  t->root = root;
  if (i == a->free_threads)
    a->free_threads = next_free;
  else
    a->nthreads++;
  return (int)i;
}

static uint32_t slot_home(const lp__agg_t *a, uint32_t node, uint32_t mask) {
  return hash2(a->nodes[node].parent, (uintptr_t)a->nodes[node].site) & mask;
}

static int rehash(lp__agg_t *a) {
  uint32_t nmask = a->mask * 2 + 1;
  uint32_t *ns = lp__calloc((size_t)nmask + 1, sizeof *ns);
  if (!ns) return -ENOMEM;
  for (uint32_t i = 0; i < a->nnodes; i++) {
    const lp__agg_node_t *n = &a->nodes[i];
    if (n->parent == LP__NONE) continue; /* roots and free nodes are not in the table */
    uint32_t h = slot_home(a, i, nmask);
    while (ns[h]) h = (h + 1) & nmask;
    ns[h] = i + 1;
  }
  free(a->slots);
  a->slots = ns;
  a->mask = nmask;
  return 0;
}

static uint32_t child(lp__agg_t *a, uint32_t parent, const lp_site_t *site) {
  uint32_t h = hash2(parent, (uintptr_t)site) & a->mask;
  for (;;) {
    uint32_t s = a->slots[h];
    if (!s) break;
    const lp__agg_node_t *n = &a->nodes[s - 1];
    if (n->parent == parent && n->site == site) return s - 1;
    h = (h + 1) & a->mask;
  }
  /* Keep the table at most half full. */
  if ((uint64_t)(a->nnodes - a->nfree + 1) * 2 > (uint64_t)a->mask + 1) {
    if (rehash(a) != 0) return LP__NONE;
    return child(a, parent, site);
  }
  uint32_t idx = new_node(a, site, parent, a->nodes[parent].thread);
  if (idx == LP__NONE) return LP__NONE;
  a->slots[h] = idx + 1;
  return idx;
}

uint32_t lp__agg_path(lp__agg_t *a, uint32_t root, const lp_site_t *const *frames, uint32_t n) {
  uint32_t cur = root;
  for (uint32_t i = 0; i < n && cur != LP__NONE; i++) cur = child(a, cur, frames[i]);
  return cur;
}

/* Takes node i out of the table (linear probing: later entries of its run move back) and frees it. */
static void free_node(lp__agg_t *a, uint32_t i) {
  if (a->nodes[i].parent != LP__NONE) {
    uint32_t h = slot_home(a, i, a->mask);
    while (a->slots[h] != i + 1) h = (h + 1) & a->mask;
    for (uint32_t j = h;;) {
      j = (j + 1) & a->mask;
      if (!a->slots[j]) break;
      uint32_t home = slot_home(a, a->slots[j] - 1, a->mask);
      /* Move it back unless its home lies cyclically in (h, j]. */
      bool stays = h <= j ? (home > h && home <= j) : (home > h || home <= j);
      if (!stays) {
        a->slots[h] = a->slots[j];
        h = j;
      }
    }
    a->slots[h] = 0;
  }
  lp__agg_node_t *n = &a->nodes[i];
  n->site = NULL;
  n->parent = LP__NONE;
  n->thread = LP__NONE;
  n->self = 0;
  n->cpu_ns = 0;
  n->next = a->free_nodes;
  a->free_nodes = i;
  a->nfree++;
}

/* Room in a mark's arrays for index i (they grow with the aggregation). */
static int mark_cover(uint64_t **arr, uint32_t *n, uint32_t i) {
  if (i < *n) return 0;
  uint32_t want = i + 1 > *n * 2 ? i + 1 : *n * 2;
  uint64_t *g = lp__realloc(*arr, (size_t)want * sizeof *g);
  if (!g) return -ENOMEM;
  memset(g + *n, 0, (size_t)(want - *n) * sizeof *g);
  *arr = g;
  *n = want;
  return 0;
}

/* Room in a mark's node arrays (samples and CPU, always the same length) for node i. */
static int mark_cover_node(lp__mark_t *m, uint32_t i) {
  uint32_t n = m->nself;
  int rc = mark_cover(&m->cpu, &n, i);
  if (rc == 0) rc = mark_cover(&m->self, &m->nself, i);
  if (rc == 0 && n != m->nself) return -ENOMEM; /* cannot happen: both grow by the same rule */
  return rc;
}

int lp__agg_merge(lp__agg_t *a, uint32_t from, uint32_t to, lp__mark_t *const *marks, size_t nmarks) {
  lp__agg_thread_t *f = &a->threads[from];
  /* First every target node, so that running out of memory changes nothing that counts. */
  for (uint32_t i = f->first; i != LP__NONE; i = a->nodes[i].next) {
    lp__agg_node_t *n = &a->nodes[i];
    uint32_t target = n->parent == LP__NONE ? a->threads[to].root : child(a, a->nodes[n->parent].aux, n->site);
    if (target == LP__NONE) return -ENOMEM;
    n = &a->nodes[i]; /* child() may have moved the array */
    n->aux = target;
    for (size_t m = 0; m < nmarks; m++) {
      if (i >= marks[m]->nself || !marks[m]->self[i]) continue;
      if (mark_cover_node(marks[m], target) != 0) return -ENOMEM;
    }
  }
  for (size_t m = 0; m < nmarks; m++)
    if (from < marks[m]->nthreads && marks[m]->tsamples[from] &&
        mark_cover(&marks[m]->tsamples, &marks[m]->nthreads, to) != 0)
      return -ENOMEM;
  /* Then move the counts, the marks' with them. */
  for (uint32_t i = f->first; i != LP__NONE; i = a->nodes[i].next) {
    uint32_t target = a->nodes[i].aux;
    a->nodes[target].self += a->nodes[i].self;
    a->nodes[target].cpu_ns += a->nodes[i].cpu_ns;
    for (size_t m = 0; m < nmarks; m++) {
      /* Only nonzero marks were given room at the target above. */
      if (i >= marks[m]->nself || !marks[m]->self[i]) continue;
      marks[m]->self[target] += marks[m]->self[i];
      marks[m]->self[i] = 0;
      marks[m]->cpu[target] += marks[m]->cpu[i];
      marks[m]->cpu[i] = 0;
    }
  }
  a->threads[to].samples += f->samples;
  a->threads[to].merged += f->merged ? f->merged : 1;
  for (size_t m = 0; m < nmarks; m++) {
    if (from >= marks[m]->nthreads || !marks[m]->tsamples[from]) continue;
    marks[m]->tsamples[to] += marks[m]->tsamples[from];
    marks[m]->tsamples[from] = 0;
  }
  /* Its nodes leave the table and go to the free list; nothing refers to them any more. */
  for (uint32_t i = f->first, next; i != LP__NONE; i = next) {
    next = a->nodes[i].next;
    free_node(a, i);
  }
  memset(f, 0, sizeof *f);
  f->free = true;
  f->first = f->last = f->root = LP__NONE;
  f->older = a->free_threads;
  a->free_threads = from;
  return 0;
}

int lp__mark_take(lp__mark_t *m, const lp__agg_t *a) {
  memset(m, 0, sizeof *m);
  m->nself = a->nnodes;
  m->nthreads = a->nthreads;
  m->self = lp__calloc((size_t)m->nself + 1, sizeof *m->self);
  m->cpu = lp__calloc((size_t)m->nself + 1, sizeof *m->cpu);
  m->tsamples = lp__calloc((size_t)m->nthreads + 1, sizeof *m->tsamples);
  if (!m->self || !m->cpu || !m->tsamples) {
    lp__mark_free(m);
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < m->nself; i++) {
    m->self[i] = a->nodes[i].self;
    m->cpu[i] = a->nodes[i].cpu_ns;
  }
  for (uint32_t i = 0; i < m->nthreads; i++) m->tsamples[i] = a->threads[i].samples;
  m->samples = a->samples;
  m->skipped = a->skipped;
  m->ticks = a->ticks;
  m->missed = a->missed;
  m->sampling_ns = a->sampling_ns;
  m->cpu_samples = a->cpu_samples;
  m->cpu_lost = a->cpu_lost;
  return 0;
}

void lp__mark_free(lp__mark_t *m) {
  free(m->self);
  free(m->cpu);
  free(m->tsamples);
  memset(m, 0, sizeof *m);
}

/* ---- the finished profile -------------------------------------------------- */

struct lp_node {
  const char *label;
  uint64_t samples, self;
  uint64_t cpu, cpu_self; /* CPU time, ns: at or below the node, and stopped at it */
  const char *file;       /* the first call site seen with this label here: file and line (pprof) */
  uint32_t line;
  const lp_node_t **kids;
  uint32_t nkids;
  uint32_t parent;
};

typedef struct lp__pthread {
  uint64_t tid;
  const char *name;
  uint64_t samples;
  uint32_t merged;
  const lp_node_t *root;
} lp__pthread_t;

struct lp_profile {
  lp_profile_stats_t stats;
  lp_node_t *nodes; /* [0] is the all-threads root */
  uint32_t nnodes;
  const lp_node_t **kidbuf;
  char *strings;
  lp__pthread_t *threads;
  uint32_t nthreads;
  bool cpu; /* CPU time was sampled (LP_PROFILE_CPU) */
  uint64_t end_real_ns; /* CLOCK_REALTIME when it was built */
  char *mismatch;       /* the first mismatched end, for the note; NULL if not known */
};

/* Builder state: nodes refer to labels and parents by index until the end. */
typedef struct bnode {
  uint32_t label; /* offset into strings, LP__NONE for roots */
  uint32_t parent;
  uint32_t file, line; /* file: offset into strings, LP__NONE if none yet */
  uint64_t self, samples, cpu_self, cpu;
} bnode_t;

typedef struct builder {
  bnode_t *nodes;
  uint32_t nnodes, capnodes;
  lp__index_t kids; /* nodes by (parent, label) */
  char *strings;
  uint32_t nstrings, capstrings;
  lp__index_t texts; /* the strings' offsets by text */
} builder_t;

static uint32_t hash_text(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return hash2(h, 0);
}

/* An index sized once for at most n entries: it never fills, so it never grows. */
static int table_init(lp__index_t *ix, uint32_t n) {
  uint64_t slots = lp__index_wants(ix, n, 256);
  uint32_t *fresh = slots == UINT64_MAX ? NULL : lp__calloc((size_t)slots, sizeof *fresh);
  if (!fresh) return -ENOMEM;
  lp__index_move(ix, fresh, slots);
  return 0;
}

/* The interned offset of a label text, copying it on first sight. */
static uint32_t intern(builder_t *b, const char *text) {
  uint32_t h = hash_text(text);
  for (uint32_t at, s = lp__index_first(&b->texts, h, &at); s; s = lp__index_next(&b->texts, &at))
    if (strcmp(b->strings + s - 1, text) == 0) return s - 1;
  size_t len = strlen(text) + 1;
  if (len > UINT32_MAX / 4 || grow((void **)&b->strings, &b->capstrings, 1, b->nstrings + (uint32_t)len) != 0)
    return LP__NONE;
  uint32_t off = b->nstrings;
  memcpy(b->strings + off, text, len);
  b->nstrings += (uint32_t)len;
  lp__index_put(&b->texts, h, off); /* the table was sized for every site: it cannot fill */
  return off;
}

static uint32_t bnode_new(builder_t *b, uint32_t label, uint32_t parent) {
  if (grow((void **)&b->nodes, &b->capnodes, sizeof *b->nodes, b->nnodes + 1) != 0) return LP__NONE;
  b->nodes[b->nnodes] = (bnode_t){label, parent, LP__NONE, 0, 0, 0, 0, 0};
  return b->nnodes++;
}

static uint32_t bchild(builder_t *b, uint32_t parent, uint32_t label) {
  uint32_t h = hash2(parent, label);
  for (uint32_t at, s = lp__index_first(&b->kids, h, &at); s; s = lp__index_next(&b->kids, &at))
    if (b->nodes[s - 1].parent == parent && b->nodes[s - 1].label == label) return s - 1;
  uint32_t idx = bnode_new(b, label, parent);
  if (idx != LP__NONE) lp__index_put(&b->kids, h, idx); /* sized for every aggregation node twice */
  return idx;
}

static int cmp_kids(const void *x, const void *y) {
  const lp_node_t *a = *(const lp_node_t *const *)x, *b = *(const lp_node_t *const *)y;
  if (a->samples != b->samples) return a->samples > b->samples ? -1 : 1;
  return strcmp(a->label, b->label);
}

static int cmp_threads(const void *x, const void *y) {
  const lp__pthread_t *a = x, *b = y;
  if (a->samples != b->samples) return a->samples > b->samples ? -1 : 1;
  return a->tid < b->tid ? -1 : a->tid > b->tid;
}

lp_profile_t *lp__profile_build(const lp__agg_t *a, const lp__mark_t *mark, const lp_profile_stats_t *stats) {
  builder_t b = {0};
  lp_profile_t *p = lp__calloc(1, sizeof *p), *done = NULL;
  uint32_t *map_all = lp__calloc((size_t)a->nnodes + 1, sizeof *map_all);
  uint32_t *map_thr = lp__calloc((size_t)a->nnodes + 1, sizeof *map_thr);
  uint32_t *troot = lp__calloc((size_t)a->nthreads + 1, sizeof *troot);
  uint32_t *tname = NULL;
  if (!p || !map_all || !map_thr || !troot) goto fail;
  if (table_init(&b.kids, 2 * a->nnodes + a->nthreads + 1) != 0) goto fail;
  /* Strings: a label and a file per site at most, and thread names. */
  if (table_init(&b.texts, 2 * a->nnodes + a->nthreads + 1) != 0) goto fail;

  if (bnode_new(&b, LP__NONE, LP__NONE) == LP__NONE) goto fail; /* the all-threads root */
  for (uint32_t i = 0; i < a->nthreads; i++)
    if ((troot[i] = bnode_new(&b, LP__NONE, LP__NONE)) == LP__NONE) goto fail;

  /* Each record's nodes in creation order: a parent is mapped before its children. */
  for (uint32_t t = 0; t < a->nthreads; t++) {
    if (a->threads[t].free) continue;
    for (uint32_t i = a->threads[t].first; i != LP__NONE; i = a->nodes[i].next) {
      const lp__agg_node_t *n = &a->nodes[i];
      if (n->parent == LP__NONE) {
        map_all[i] = 0;
        map_thr[i] = troot[t];
      } else {
        uint32_t label = intern(&b, lp__label(n->site));
        if (label == LP__NONE) goto fail;
        map_all[i] = bchild(&b, map_all[n->parent], label);
        map_thr[i] = bchild(&b, map_thr[n->parent], label);
        if (map_all[i] == LP__NONE || map_thr[i] == LP__NONE) goto fail;
        for (int k = 0; k < 2; k++) {
          bnode_t *bn = &b.nodes[k ? map_thr[i] : map_all[i]];
          if (bn->file != LP__NONE) continue;
          if ((bn->file = intern(&b, n->site->file ? n->site->file : "")) == LP__NONE) goto fail;
          bn->line = n->site->line;
        }
      }
      /* What the session saw: the count beyond its mark. */
      uint64_t self = n->self - (mark && i < mark->nself ? mark->self[i] : 0);
      uint64_t cpu = n->cpu_ns - (mark && i < mark->nself ? mark->cpu[i] : 0);
      b.nodes[map_all[i]].self += self;
      b.nodes[map_thr[i]].self += self;
      b.nodes[map_all[i]].cpu_self += cpu;
      b.nodes[map_thr[i]].cpu_self += cpu;
    }
  }
  /* Totals bottom-up: a child's index is always above its parent's. */
  for (uint32_t i = b.nnodes; i-- > 0;) {
    b.nodes[i].samples += b.nodes[i].self;
    b.nodes[i].cpu += b.nodes[i].cpu_self;
    if (b.nodes[i].parent != LP__NONE) {
      b.nodes[b.nodes[i].parent].samples += b.nodes[i].samples;
      b.nodes[b.nodes[i].parent].cpu += b.nodes[i].cpu;
    }
  }
  /* Thread names go into the same string table, before it is copied. */
  tname = lp__calloc((size_t)a->nthreads + 1, sizeof *tname);
  if (!tname) goto fail;
  for (uint32_t i = 0; i < a->nthreads; i++)
    if (!a->threads[i].free && (tname[i] = intern(&b, a->threads[i].name)) == LP__NONE) goto fail;

  p->stats = *stats;
  p->cpu = a->cpu;
  struct timespec rt;
  if (clock_gettime(CLOCK_REALTIME, &rt) == 0) p->end_real_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
  p->nnodes = b.nnodes;
  p->nodes = lp__calloc(b.nnodes, sizeof *p->nodes);
  p->kidbuf = lp__calloc(b.nnodes, sizeof *p->kidbuf);
  p->threads = lp__calloc((size_t)a->nthreads + 1, sizeof *p->threads);
  p->strings = lp__malloc((size_t)b.nstrings + 1);
  if (!p->nodes || !p->kidbuf || !p->threads || !p->strings) goto fail;
  memcpy(p->strings, b.strings ? b.strings : "", b.nstrings);
  for (uint32_t i = 0; i < b.nnodes; i++) {
    lp_node_t *n = &p->nodes[i];
    n->label = b.nodes[i].label == LP__NONE ? NULL : p->strings + b.nodes[i].label;
    n->samples = b.nodes[i].samples;
    n->self = b.nodes[i].self;
    n->cpu = b.nodes[i].cpu;
    n->cpu_self = b.nodes[i].cpu_self;
    n->file = b.nodes[i].file == LP__NONE ? NULL : p->strings + b.nodes[i].file;
    n->line = b.nodes[i].line;
    n->parent = b.nodes[i].parent;
    /* A node is in the tree if anything landed there: wall samples, or CPU samples (taken apart from them). */
    if (n->parent != LP__NONE && (n->samples > 0 || n->cpu > 0)) p->nodes[n->parent].nkids++;
  }
  /* Children: slices of one array, in parent order, then sorted by weight. */
  uint32_t used = 0;
  for (uint32_t i = 0; i < b.nnodes; i++) {
    p->nodes[i].kids = p->kidbuf + used;
    used += p->nodes[i].nkids;
    p->nodes[i].nkids = 0;
  }
  for (uint32_t i = 0; i < b.nnodes; i++) {
    lp_node_t *n = &p->nodes[i];
    if (n->parent == LP__NONE || (n->samples == 0 && n->cpu == 0)) continue;
    lp_node_t *par = &p->nodes[n->parent];
    par->kids[par->nkids++] = n;
  }
  for (uint32_t i = 0; i < b.nnodes; i++)
    if (p->nodes[i].nkids > 1) qsort(p->nodes[i].kids, p->nodes[i].nkids, sizeof *p->nodes[i].kids, cmp_kids);

  /*
   * Threads with samples (wall or CPU), heaviest first; a record of merged
   * exited threads counts for each of them.
   */
  p->stats.threads = 0;
  for (uint32_t i = 0; i < a->nthreads; i++) {
    const lp__agg_thread_t *t = &a->threads[i];
    uint64_t samples = t->samples - (mark && i < mark->nthreads ? mark->tsamples[i] : 0);
    if (t->free || (samples == 0 && p->nodes[troot[i]].cpu == 0)) continue;
    lp__pthread_t *pt = &p->threads[p->nthreads++];
    pt->tid = t->tid;
    pt->name = p->strings + tname[i];
    pt->samples = samples;
    pt->merged = t->merged;
    pt->root = &p->nodes[troot[i]];
    p->stats.threads += t->merged ? t->merged : 1;
  }
  qsort(p->threads, p->nthreads, sizeof *p->threads, cmp_threads);
  done = p;
  p = NULL;
fail:
  free(tname);
  free(b.nodes);
  free(b.kids.slot);
  free(b.strings);
  free(b.texts.slot);
  free(map_all);
  free(map_thr);
  free(troot);
  lp_profile_free(p);
  return done;
}

void lp_profile_free(lp_profile_t *p) {
  if (!p) return;
  free(p->nodes);
  free(p->kidbuf);
  free(p->strings);
  free(p->threads);
  free(p->mismatch);
  free(p);
}

/* "label" (file:line), the label cut at 200 bytes: a note stays one line (put_text makes it printable). */
static int site_text(char *buf, size_t n, const lp_site_t *s) {
  const char *label = s->label ? s->label : "(null)";
  int len = (int)strnlen(label, 201);
  return snprintf(buf, n, "\"%.*s%s\" (%s:%u)", len > 200 ? 200 : len, label, len > 200 ? "..." : "",
                  s->file ? s->file : "?", s->line);
}

int lp__profile_name_mismatch(lp_profile_t *p, const lp__mismatch_t *m) {
  char ended[512], top[512], text[1200];
  site_text(ended, sizeof ended, m->ended);
  if (m->gone)
    snprintf(text, sizeof text, "%s ended after an LP_END() had ended it", ended);
  else if (m->top) {
    site_text(top, sizeof top, m->top);
    snprintf(text, sizeof text, "%s ended while %s, which it did not start, was the innermost label", ended, top);
  } else
    snprintf(text, sizeof text, "%s ended while labels it did not start were open", ended);
  size_t len = strlen(text) + 1;
  char *copy = lp__malloc(len);
  if (!copy) return -ENOMEM;
  memcpy(copy, text, len);
  free(p->mismatch);
  p->mismatch = copy;
  return 0;
}

/* ---- accessors --------------------------------------------------------------- */

void lp__profile_test_set_stats(lp_profile_t *p, const lp_profile_stats_t *s) { p->stats = *s; }

int lp_profile_get_stats(const lp_profile_t *p, lp_profile_stats_t *out) {
  if (!p || !out) return -EINVAL;
  *out = p->stats;
  return 0;
}

const lp_node_t *lp_profile_root(const lp_profile_t *p) { return p ? &p->nodes[0] : NULL; }

size_t lp_profile_thread_count(const lp_profile_t *p) { return p ? p->nthreads : 0; }

int lp_profile_thread(const lp_profile_t *p, size_t i, lp_thread_info_t *out) {
  if (!p || !out || i >= p->nthreads) return -EINVAL;
  out->tid = p->threads[i].tid;
  out->name = p->threads[i].name;
  out->samples = p->threads[i].samples;
  out->merged = p->threads[i].merged;
  out->root = p->threads[i].root;
  return 0;
}

const char *lp_node_label(const lp_node_t *n) { return n ? n->label : NULL; }
uint64_t lp_node_samples(const lp_node_t *n) { return n ? n->samples : 0; }
uint64_t lp_node_self(const lp_node_t *n) { return n ? n->self : 0; }
void lp__node_site(const lp_node_t *n, const char **file, uint32_t *line) {
  *file = n ? n->file : NULL;
  *line = n ? n->line : 0;
}

uint64_t lp__profile_end_real_ns(const lp_profile_t *p) { return p->end_real_ns; }

int lp_profile_has_cpu(const lp_profile_t *p) { return p && p->cpu; }
uint64_t lp_node_cpu_ns(const lp_node_t *n) { return n ? n->cpu : 0; }
uint64_t lp_node_self_cpu_ns(const lp_node_t *n) { return n ? n->cpu_self : 0; }
size_t lp_node_child_count(const lp_node_t *n) { return n ? n->nkids : 0; }

const lp_node_t *lp_node_child(const lp_node_t *n, size_t i) { return n && i < n->nkids ? n->kids[i] : NULL; }

const lp_node_t *lp_node_find(const lp_node_t *n, const char *label) {
  if (!n || !label) return NULL;
  for (uint32_t i = 0; i < n->nkids; i++)
    if (strcmp(n->kids[i]->label, label) == 0) return n->kids[i];
  return NULL;
}

/* ---- the report ---------------------------------------------------------------- */

typedef struct printer {
  FILE *out;
  uint64_t denom; /* 100% */
  double tick_ns; /* the time a sample stands for: the achieved tick */
  double min_percent;
  bool counts;
  bool failed;
  bool cpu; /* weights are CPU nanoseconds, not samples */
} printer_t;

/* A node's weight in this report: samples, or CPU time. */
static uint64_t weight(const printer_t *pr, const lp_node_t *n) { return pr->cpu ? n->cpu : n->samples; }
static uint64_t weight_self(const printer_t *pr, const lp_node_t *n) { return pr->cpu ? n->cpu_self : n->self; }

static void emit(printer_t *pr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(printer_t *pr, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (vfprintf(pr->out, fmt, ap) < 0) pr->failed = true;
  va_end(ap);
}

/*
 * A label or name as one line's worth of text: control characters become
 * '?' (a newline in a label must not start a line of its own), and in
 * folded stacks ';' becomes ':', the separator being theirs.
 */
static void put_text(printer_t *pr, const char *s, bool folded) {
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    int ch = *c < 0x20 || *c == 0x7f ? '?' : folded && *c == ';' ? ':' : *c;
    if (putc(ch, pr->out) == EOF) pr->failed = true;
  }
}

static double pct(const printer_t *pr, uint64_t n) { return pr->denom ? 100.0 * (double)n / (double)pr->denom : 0.0; }

/* A time in s, ms or us: three decimals (12.345 ms), or as a period is stated (1 ms, 333.3 ms, 50 \xc2\xb5s). */
static void put_time_as(printer_t *pr, double ns, bool period) {
  double v = ns >= 1e9 ? ns / 1e9 : ns >= 1e6 ? ns / 1e6 : ns / 1e3;
  const char *unit = ns >= 1e9 ? "s" : ns >= 1e6 ? "ms" : period ? "\xc2\xb5s" : "us";
  if (period)
    emit(pr, "%.4g %s", v, unit);
  else
    emit(pr, "%.3f %s", v, unit);
}

static void put_time(printer_t *pr, double ns) { put_time_as(pr, ns, false); }
static void put_period(printer_t *pr, double ns) { put_time_as(pr, ns, true); }

static int cmp_kids_cpu(const void *x, const void *y) {
  const lp_node_t *a = *(const lp_node_t *const *)x, *b = *(const lp_node_t *const *)y;
  if (a->cpu != b->cpu) return a->cpu > b->cpu ? -1 : 1;
  return strcmp(a->label, b->label);
}

static void line(printer_t *pr, unsigned depth, uint64_t samples, const char *label) {
  emit(pr, "%*s%.2f%% ", (int)(depth * 4), "", pct(pr, samples));
  put_text(pr, label, false);
  if (pr->counts && pr->cpu) {
    emit(pr, " [");
    put_time(pr, (double)samples);
    emit(pr, " CPU]\n");
    return;
  }
  if (pr->counts) {
    double ns = (double)samples * pr->tick_ns;
    if (ns >= 1e9)
      emit(pr, " [%" PRIu64 " samples, %.3f s]", samples, ns / 1e9);
    else if (ns >= 1e6)
      emit(pr, " [%" PRIu64 " samples, %.3f ms]", samples, ns / 1e6);
    else
      emit(pr, " [%" PRIu64 " samples, %.3f us]", samples, ns / 1e3);
  }
  emit(pr, "\n");
}

/*
 * Prints n's children and its "other". A hidden child's samples count in
 * its parent's "other"; at the root, hidden labels get a line of their own,
 * since they are not outside of any label.
 */
static void print_children(printer_t *pr, const lp_node_t *n, unsigned depth) {
  uint64_t hidden = 0;
  uint32_t shown = 0;
  const lp_node_t **kids = n->kids, **sorted = NULL;
  if (pr->cpu && n->nkids > 1) { /* heaviest by CPU first */
    sorted = lp__malloc(n->nkids * sizeof *sorted);
    if (!sorted) {
      pr->failed = true;
      return;
    }
    memcpy(sorted, n->kids, n->nkids * sizeof *sorted);
    qsort(sorted, n->nkids, sizeof *sorted, cmp_kids_cpu);
    kids = sorted;
  }
  for (uint32_t i = 0; i < n->nkids; i++) {
    const lp_node_t *k = kids[i];
    if (pct(pr, weight(pr, k)) < pr->min_percent) {
      hidden += weight(pr, k);
      continue;
    }
    shown++;
    line(pr, depth, weight(pr, k), k->label);
    if (k->nkids) print_children(pr, k, depth + 1);
  }
  free(sorted);
  if (!n->label) {
    if (hidden) line(pr, depth, hidden, "other (hidden labels)");
    line(pr, depth, weight_self(pr, n), "other (outside of any label)");
  } else if (shown) {
    line(pr, depth, weight_self(pr, n) + hidden, "other");
  }
}

static int finish(printer_t *pr) {
  if (fflush(pr->out) != 0 || ferror(pr->out)) pr->failed = true;
  return pr->failed ? -EIO : 0;
}

/* ---- the flat view (LP_PRINT_FLAT) --------------------------------------------- */

/*
 * One row per label text: self is summed over every node of that label,
 * total over the nodes that have no node of the same label above them, so
 * that a label recurring on one stack counts each sample once.
 */
typedef struct flat_row {
  const char *label;
  uint64_t total, self;
} flat_row_t;

typedef struct flat {
  flat_row_t *rows;
  uint32_t n, cap;
  lp__index_t ix; /* the rows by their label's hash, sized for every node: never full */
  const char *path[LP_STACK_CAPACITY + 2]; /* labels from the root's child down */
  unsigned depth;
  bool nomem;
  const printer_t *pr; /* the weights: the tree's */
} flat_t;

static flat_row_t *flat_row(flat_t *f, const char *label) {
  uint32_t at, h = hash_text(label);
  for (uint32_t e = lp__index_first(&f->ix, h, &at); e; e = lp__index_next(&f->ix, &at))
    if (strcmp(f->rows[e - 1].label, label) == 0) return &f->rows[e - 1];
  if (f->n == f->cap) { /* a row per node at most: never */
    f->nomem = true;
    return NULL;
  }
  f->rows[f->n] = (flat_row_t){label, 0, 0};
  lp__index_put(&f->ix, h, f->n);
  return &f->rows[f->n++];
}

static void flat_walk(flat_t *f, const lp_node_t *n) {
  for (uint32_t i = 0; i < n->nkids && !f->nomem; i++) {
    const lp_node_t *k = n->kids[i];
    flat_row_t *r = flat_row(f, k->label);
    if (!r) return;
    r->self += weight_self(f->pr, k);
    bool outermost = true;
    for (unsigned d = 0; d < f->depth && outermost; d++) outermost = strcmp(f->path[d], k->label) != 0;
    if (outermost) r->total += weight(f->pr, k);
    if (!k->nkids || f->depth >= sizeof f->path / sizeof f->path[0]) continue;
    f->path[f->depth++] = k->label;
    flat_walk(f, k);
    f->depth--;
  }
}

static uint32_t flat_count(const lp_node_t *n) {
  uint32_t c = 1;
  for (uint32_t i = 0; i < n->nkids; i++) c += flat_count(n->kids[i]);
  return c;
}

static int cmp_flat(const void *x, const void *y) {
  const flat_row_t *a = x, *b = y;
  if (a->total != b->total) return a->total > b->total ? -1 : 1;
  if (a->self != b->self) return a->self > b->self ? -1 : 1;
  return strcmp(a->label, b->label);
}

/* The flat table of the tree under root, shares of pr->denom; rows under min_percent of total hidden. */
static int print_flat(printer_t *pr, const lp_node_t *root) {
  flat_t f;
  memset(&f, 0, sizeof f);
  f.pr = pr;
  f.cap = flat_count(root);
  uint32_t size = 16;
  while (size < 2 * f.cap) size *= 2;
  f.rows = lp__malloc((size_t)f.cap * sizeof *f.rows);
  uint32_t *slots = lp__calloc(size, sizeof *slots);
  if (!f.rows || !slots) f.nomem = true;
  if (slots) lp__index_move(&f.ix, slots, size);
  if (!f.nomem) flat_walk(&f, root);
  if (f.nomem) {
    free(f.rows);
    free(f.ix.slot);
    return -ENOMEM;
  }
  qsort(f.rows, f.n, sizeof *f.rows, cmp_flat);
  if (pr->cpu)
    emit(pr, "flat profile by CPU time: each label summed over every place it appears; a recursive label's CPU time "
             "counted once in its total\n");
  else
    emit(pr, "flat profile by wall time: each label summed over every place it appears; a recursive label's samples "
             "counted once in its total\n");
  emit(pr, "%8s %8s  %s\n", "total", "self", "label");
  uint32_t hidden = 0;
  for (uint32_t i = 0; i < f.n; i++) {
    if (pct(pr, f.rows[i].total) < pr->min_percent) {
      hidden++;
      continue;
    }
    emit(pr, "%7.2f%% %7.2f%%  ", pct(pr, f.rows[i].total), pct(pr, f.rows[i].self));
    put_text(pr, f.rows[i].label, false);
    emit(pr, "\n");
  }
  if (hidden) emit(pr, "(%u labels under %g%% of total not shown)\n", hidden, pr->min_percent);
  free(f.rows);
  free(f.ix.slot);
  return 0;
}

/* Samples per second the collector achieved; 0 for a profile too short to tell. */
static double achieved_hz(const lp_profile_stats_t *s) {
  return s->duration_ns ? (double)s->ticks * 1e9 / (double)s->duration_ns : 0.0;
}

bool lp__profile_rate_low(const lp_profile_t *p, double *achieved, uint32_t *requested) {
  const lp_profile_stats_t *s = &p->stats;
  *achieved = achieved_hz(s);
  *requested = s->requested_hz ? s->requested_hz : s->hz;
  /* A tenth of a second at least, so that a short profile's few ticks do not cry wolf. */
  return s->duration_ns >= 100000000u && *achieved < 0.9 * (double)*requested;
}

int lp_profile_print_ex(const lp_profile_t *p, FILE *out, const lp_print_opts_t *opts) {
  if (!p || !out) return -EINVAL;
  lp_print_opts_t o = opts ? *opts : (lp_print_opts_t){0};
  if (!(o.min_percent >= 0.0 && o.min_percent <= 100.0)) return -EINVAL; /* NaN fails both */
  const lp_profile_stats_t *s = &p->stats;
  double hz = achieved_hz(s);
  bool cpu = (o.flags & LP_PRINT_CPU) != 0;
  if (cpu && !p->cpu) return -ENODATA; /* a tree of CPU time that was never measured would be all zeros */
  printer_t pr = {out, cpu ? p->nodes[0].cpu : p->nodes[0].samples, hz > 0 ? 1e9 / hz : (double)s->tick_ns,
                  o.min_percent, (o.flags & LP_PRINT_COUNTS) != 0, false, cpu};
  if (cpu) {
    emit(&pr, "labelprof profile by CPU time (%u threads, %" PRIu64 " CPU samples, ", s->threads, s->cpu_samples);
    put_time(&pr, (double)p->nodes[0].cpu);
    emit(&pr, " of CPU)\n");
  } else {
    emit(&pr, "labelprof profile by wall time (%u threads, %" PRIu64 " samples)\n", s->threads, p->nodes[0].samples);
  }
  /* What the profile cost and how well it kept its rate: on a VM each wakeup can cost tens of µs. */
  uint32_t requested = s->requested_hz ? s->requested_hz : s->hz;
  emit(&pr, "%.2f s at %u Hz requested", (double)s->duration_ns / 1e9, requested);
  if (requested != s->hz) emit(&pr, " (sampled at %u Hz, the rate of an enclosing profile)", s->hz);
  /* How ticks are placed: one per period of the tick, at a random instant of it (collector.c). */
  emit(&pr, ", %.0f Hz achieved, %" PRIu64 " missed ticks (one at a random instant of each ", hz, s->missed_ticks);
  put_period(&pr, (double)s->tick_ns);
  emit(&pr, "); collector %.1f%% of one CPU",
       s->duration_ns ? 100.0 * (double)s->collector_cpu_ns / (double)s->duration_ns : 0.0);
  if (s->sched == LP_SCHED_SLICE)
    emit(&pr, ", slice %.0f \xc2\xb5s\n", (double)s->slice_ns / 1e3);
  else if (s->sched == LP_SCHED_FIFO)
    emit(&pr, ", SCHED_FIFO %u\n", s->sched_priority);
  else
    emit(&pr, ", default scheduling\n");
  if (cpu) {
    /* How CPU time was sampled: each thread on its own CPU clock; the mean weight shows the kernel's granularity. */
    char sig[24];
    emit(&pr, "CPU samples: one per ");
    put_period(&pr, (double)s->tick_ns);
    emit(&pr, " of a thread's CPU time, taken by the thread on its own CPU timer (%s)",
         lp__signal_name(s->cpu_signal, sig, sizeof sig));
    if (s->cpu_samples) {
      emit(&pr, "; ");
      put_time(&pr, (double)p->nodes[0].cpu / (double)s->cpu_samples);
      emit(&pr, " of CPU each on average");
    }
    emit(&pr, "\n");
  }
  if (o.flags & LP_PRINT_THREADS) {
    uint64_t all = pr.denom;
    for (uint32_t i = 0; i < p->nthreads; i++) {
      const lp__pthread_t *t = &p->threads[i];
      if (t->merged)
        emit(&pr, "threads \"");
      else
        emit(&pr, "thread %" PRIu64 " \"", t->tid);
      put_text(&pr, t->name, false);
      emit(&pr, "\" (");
      if (t->merged) emit(&pr, "%u exited threads merged, ", t->merged);
      if (cpu) {
        put_time(&pr, (double)t->root->cpu);
        emit(&pr, " of CPU, %.2f%% of all CPU)\n", all ? 100.0 * (double)t->root->cpu / (double)all : 0.0);
        pr.denom = t->root->cpu;
      } else {
        emit(&pr, "%" PRIu64 " samples, %.2f%% of all)\n", t->samples,
             all ? 100.0 * (double)t->samples / (double)all : 0.0);
        pr.denom = t->samples;
      }
      print_children(&pr, t->root, 0);
    }
  } else {
    print_children(&pr, &p->nodes[0], 0);
  }
  if (o.flags & LP_PRINT_FLAT) {
    pr.denom = weight(&pr, &p->nodes[0]); /* the tree's weighting, of all threads */
    int frc = print_flat(&pr, &p->nodes[0]);
    if (frc) return frc;
  }
  double got;
  uint32_t want;
  if (lp__profile_rate_low(p, &got, &want)) {
    emit(&pr, "note: the collector achieved %.0f%% of the requested rate (", 100.0 * got / want);
    const char *sep = "";
    if (s->cpus && s->max_runnable > s->cpus) {
      emit(&pr, "up to %u runnable threads on %u CPUs", s->max_runnable, s->cpus);
      sep = "; ";
    }
    if (s->throttled) {
      emit(&pr, "%sa CPU quota (cgroup cpu.max) throttled the process %" PRIu64 " times", sep, s->throttled);
      sep = "; ";
    }
    if (!*sep) emit(&pr, "late wakeups: slow timers, or a busy host");
    emit(&pr, "); each sample stands for %.3f ms\n", pr.tick_ns / 1e6);
  }
  if (cpu && s->cpu_stopped_ns) {
    char sig[24];
    emit(&pr, "note: CPU sampling stopped %.3f s into the profile: the program put its own handler on %s\n",
         (double)s->cpu_stopped_ns / 1e9, lp__signal_name(s->cpu_signal, sig, sizeof sig));
  }
  if (cpu && s->cpu_untimed)
    emit(&pr, "note: %u threads got no CPU timer (timer_create failed): their CPU time is missing\n", s->cpu_untimed);
  if (cpu && s->cpu_lost)
    emit(&pr, "note: %" PRIu64 " CPU samples lost: the collector fell behind and threads' buffers filled\n",
         s->cpu_lost);
  if (s->skipped)
    emit(&pr, "note: %" PRIu64 " samples skipped: the stack changed during every read\n", s->skipped);
  if (s->truncated)
    emit(&pr, "note: %" PRIu64 " label pushes were deeper than %d and show as one node\n", s->truncated,
         LP_STACK_CAPACITY);
  if (s->mismatched) {
    emit(&pr, "note: %" PRIu64 " label ends did not match the innermost label (stack healed)", s->mismatched);
    if (p->mismatch) {
      emit(&pr, "; the first: ");
      put_text(&pr, p->mismatch, false);
    }
    emit(&pr, "\n");
  }
  if (s->unmatched) emit(&pr, "note: %" PRIu64 " LP_END() calls had no label to end\n", s->unmatched);
  return finish(&pr);
}

int lp_profile_print(const lp_profile_t *p, FILE *out) { return lp_profile_print_ex(p, out, NULL); }

/* ---- folded stacks ----------------------------------------------------------- */

typedef struct folder {
  printer_t pr;
  const lp_node_t *path[LP_STACK_CAPACITY + 2]; /* the nodes from the root's child down */
  unsigned depth;
} folder_t;

static void fold(folder_t *f, const lp_node_t *n) {
  for (uint32_t i = 0; i < n->nkids && !f->pr.failed; i++) {
    const lp_node_t *k = n->kids[i];
    f->path[f->depth++] = k;
    uint64_t w = f->pr.cpu ? k->cpu_self / 1000 : k->self;
    if (w) {
      /* A separator between every two labels, even empty ones. */
      for (unsigned d = 0; d < f->depth; d++) {
        if (d && putc(';', f->pr.out) == EOF) f->pr.failed = true;
        put_text(&f->pr, f->path[d]->label, true);
      }
      emit(&f->pr, " %" PRIu64 "\n", w);
    }
    if (f->depth < sizeof f->path / sizeof f->path[0]) fold(f, k);
    f->depth--;
  }
}

int lp_profile_write_folded_ex(const lp_profile_t *p, FILE *out, const lp_print_opts_t *opts) {
  if (!p || !out) return -EINVAL;
  bool cpu = opts && (opts->flags & LP_PRINT_CPU);
  if (cpu && !p->cpu) return -ENODATA; /* weights of CPU never measured: nothing a flame graph could mean */
  folder_t f = {{out, 0, 0, 0.0, false, false, cpu}, {NULL}, 0};
  fold(&f, &p->nodes[0]);
  uint64_t w = cpu ? p->nodes[0].cpu_self / 1000 : p->nodes[0].self;
  if (w) emit(&f.pr, "(outside of any label) %" PRIu64 "\n", w);
  return finish(&f.pr);
}

int lp_profile_write_folded(const lp_profile_t *p, FILE *out) { return lp_profile_write_folded_ex(p, out, NULL); }
