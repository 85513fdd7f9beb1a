/*
 * layers.c: `labelprof layers [--total-times] FILE`: time per layer and
 * phase for programs labelled with LP_SCOPE_PHASE and friends.
 *
 * The events come from any reader (labelprof's JSON with "args" layer,
 * phase and mode; its systrace with [NN_..] tags). Scopes with a layer are
 * kept per lane as intervals (B/E pairs and X events alike), then replayed
 * per lane in start order, outer scope first, into the attribution of
 * attrib.c in clean mode: NNAPI's rules without its NNAPI-specific special
 * cases and quirks (SPEC section 12). Memory grows with the number of
 * layered scopes, which is what the attribution needs anyway.
 */
#include "config.h"

#include "agg.h" /* lp_mem_cap */
#include "attrib.h"
#include "cmd.h"
#include "reader.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: labelprof layers [--total-times] [--max-memory SIZE] FILE\n"
    "\n"
    "Time per layer and phase for any program labelled with LP_SCOPE_PHASE,\n"
    "LP_PHASE_SWITCH and LP_SCOPE_SUBTRACT: NNAPI's attribution without its\n"
    "NNAPI-specific rules and quirks. FILE is labelprof's JSON (\"cat\" and\n"
    "args layer/phase/mode) or its systrace ([NN_LR_PP]label marks).\n"
    "\n"
    "Rows are layers (application, runtime, ipc, driver, cpu), columns phases.\n"
    "A layer's total time in a phase is the wall time of its outermost scopes of\n"
    "that phase; nested scopes of the same layer are detail. One-time\n"
    "initialization is counted at the top level, a subtract scope is taken out\n"
    "of its callers, execution's subphases roll up into execution.\n"
    "\n"
    "  --total-times  total times instead of self times (total minus the\n"
    "                 nearest lower layer with time in the phase)\n"
    "  --max-memory SIZE  the most the layered scopes and the reader's tables\n"
    "                 may hold (as for stats: 512M, 2G, none; the default is half\n"
    "                 the physical memory)\n"
    "\n"
    "Exit status: 0; 1 for a nesting violation (a message names the line or\n"
    "event and the rule); 2 for bad input.\n";

typedef struct opts {
  bool total_times;
  uint64_t max_memory;
} opts_t;

static const lp_opt_t options[] = {
    LP_OPT_FLAG("--total-times", opts_t, total_times),
    LP_OPT_MAX_MEMORY(opts_t, max_memory),
    LP_OPT_END,
};

static int run(const void *opts, int n, const char *const *files);

const lp_cmd_t lp_cmd_layers = {
    "layers", "time per layer and phase (LP_SCOPE_PHASE) as a table", usage, options, sizeof(opts_t), NULL,
    {1, 1, "FILE"}, run,
};

typedef struct liv {
  int64_t s, e;
  uint64_t seq, line;
  signed char layer, phase, sub;
} liv_t;

typedef struct lopen {
  int64_t s;
  uint64_t line;
  signed char layer, phase, sub; /* layer -1: a scope without one */
} lopen_t;

typedef struct llane {
  int64_t pid, tid;
  liv_t *iv;
  size_t n, cap;
  lopen_t *open;
  size_t no, ocap;
  int64_t last;
} llane_t;

typedef struct lctx {
  const char *file;
  lp_mem_t mem; /* every table here, against --max-memory */
  llane_t *lanes;
  size_t nl, cap;
  lp__index_t index; /* lanes by (pid, tid) */
  uint64_t seq;
  int bad;
  int warned_word;
} lctx_t;

static const char *const LWORDS[] = {"application", "runtime", "ipc", "driver", "cpu", "utility"};
static const int LCODES_[] = {AT_LA, AT_LR, AT_LI, AT_LD, AT_LC, AT_LU};
static const char *const PWORDS[] = {"unspecified", "initialization", "preparation", "compilation", "execution",
                                     "io", "transformation", "computation", "results", "termination",
                                     "overall", "warmup", "benchmark"};
static const int PCODES_[] = {AT_PU, AT_PI, AT_PP, AT_PC, AT_PE, AT_PIO, AT_PTR, AT_PCO, AT_PR, AT_PT,
                              AT_PO, AT_PWU, AT_PBM};

static int word(const char *const *w, const int *codes, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(w[i], s) == 0) return codes[i];
  return -1;
}

static uint32_t lane_hash(int64_t pid, int64_t tid) {
  return lp__hash64((uint64_t)pid * 0x9e3779b97f4a7c15ull ^ (uint64_t)tid);
}

/* The lane (pid, tid), made if new: found through a hash, so that many threads cost no more each than one. */
static llane_t *lane_of(lctx_t *c, int64_t pid, int64_t tid) {
  uint32_t h = lane_hash(pid, tid);
  for (uint32_t at, k = lp__index_first(&c->index, h, &at); k; k = lp__index_next(&c->index, &at)) {
    llane_t *l = &c->lanes[k - 1];
    if (l->pid == pid && l->tid == tid) return l;
  }
  if (c->nl >= UINT32_MAX / 2) return NULL;
  switch (lp_index_reserve(&c->index, &c->mem, (uint32_t)c->nl, 64)) {
  case -1: return NULL;
  case 1:
    for (size_t i = 0; i < c->nl; i++) lp__index_put(&c->index, lane_hash(c->lanes[i].pid, c->lanes[i].tid), (uint32_t)i);
  }
  if (c->nl == c->cap) {
    size_t nc = c->cap ? c->cap * 2 : 16;
    llane_t *n = lp_mem_realloc(&c->mem, c->lanes, c->cap * sizeof *n, nc * sizeof *n);
    if (!n) return NULL;
    c->lanes = n;
    c->cap = nc;
  }
  lp__index_put(&c->index, h, (uint32_t)c->nl);
  llane_t *l = &c->lanes[c->nl++];
  memset(l, 0, sizeof *l);
  l->pid = pid;
  l->tid = tid;
  return l;
}

static int add_iv(lctx_t *c, llane_t *l, const liv_t *v) {
  if (l->n == l->cap) {
    size_t nc = l->cap ? l->cap * 2 : 64;
    liv_t *n = lp_mem_realloc(&c->mem, l->iv, l->cap * sizeof *n, nc * sizeof *n);
    if (!n) return -1;
    l->iv = n;
    l->cap = nc;
  }
  l->iv[l->n++] = *v;
  return 0;
}

/* layer and phase codes of an event; layer -1 when it has none (or an unknown word) */
static void codes(lctx_t *c, const lp_event_t *ev, signed char *layer, signed char *phase, signed char *sub) {
  *layer = -1;
  *phase = AT_PU;
  *sub = ev->mode && strcmp(ev->mode, "subtract") == 0;
  if (!ev->layer) return;
  int l = word(LWORDS, LCODES_, 6, ev->layer);
  int p = ev->phase ? word(PWORDS, PCODES_, 13, ev->phase) : AT_PU;
  if (l < 0 || p < 0) {
    if (!c->warned_word++)
      lp_warn(&ev->pos, "unknown layer or phase \"%s\"/\"%s\": such scopes are not counted", ev->layer,
              ev->phase ? ev->phase : "");
    return;
  }
  *layer = (signed char)l;
  *phase = (signed char)p;
}

static int on_event(void *ctx, const lp_event_t *ev) {
  lctx_t *c = ctx;
  if (ev->kind != LP_EV_BEGIN && ev->kind != LP_EV_END && ev->kind != LP_EV_COMPLETE) return 0;
  llane_t *l = lane_of(c, ev->pid, ev->tid);
  if (!l) goto oom;
  int64_t end = ev->kind == LP_EV_COMPLETE ? ev->ts + ev->dur : ev->ts;
  if (end > l->last) l->last = end;
  if (ev->kind == LP_EV_END) {
    if (!l->no) {
      lp_report(&ev->pos, "an end (E) with nothing open on thread %lld of process %lld", (long long)ev->tid,
                (long long)ev->pid);
      return LP_READ_BAD;
    }
    lopen_t o = l->open[--l->no];
    if (o.layer < 0) return 0;
    liv_t v = {o.s, ev->ts < o.s ? o.s : ev->ts, c->seq++, o.line, o.layer, o.phase, o.sub};
    return add_iv(c, l, &v) < 0 ? lp_mem_fail(&c->mem, &ev->pos) : 0;
  }
  signed char la, ph, sub;
  codes(c, ev, &la, &ph, &sub);
  if (ev->kind == LP_EV_COMPLETE) {
    if (la < 0) return 0;
    liv_t v = {ev->ts, end, c->seq++, ev->pos.line, la, ph, sub};
    return add_iv(c, l, &v) < 0 ? lp_mem_fail(&c->mem, &ev->pos) : 0;
  }
  if (l->no == l->ocap) {
    size_t nc = l->ocap ? l->ocap * 2 : 16;
    lopen_t *n = lp_mem_realloc(&c->mem, l->open, l->ocap * sizeof *n, nc * sizeof *n);
    if (!n) goto oom;
    l->open = n;
    l->ocap = nc;
  }
  lopen_t o = {ev->ts, ev->pos.line, la, ph, sub};
  l->open[l->no++] = o;
  return 0;
oom:
  return lp_mem_fail(&c->mem, &ev->pos);
}

static int cmp_iv(const void *a, const void *b) {
  const liv_t *x = a, *y = b;
  if (x->s != y->s) return x->s < y->s ? -1 : 1;
  if (x->e != y->e) return x->e > y->e ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void print_table(const at_stats_t *st, int total, const char *file) {
  static const char *const rows[] = {"application", "runtime", "ipc", "driver", "cpu", "total"};
  static const int rl[] = {AT_LA, AT_LR, AT_LI, AT_LD, AT_LC, AT_LT};
  static const char *const cols[] = {"initialization", "preparation", "compilation", "execution", "io",
                                     "transformation", "computation", "results", "termination", "overall"};
  static const int cp[] = {AT_PI, AT_PP, AT_PC, AT_PE, AT_PIO, AT_PTR, AT_PCO, AT_PR, AT_PT, AT_PO};
  printf("%s time per layer and phase, ms (wall clock): %s\n\n", total ? "total" : "self", file);
  printf("%-12s", "layer");
  for (int k = 0; k < 10; k++) printf(" %14s", cols[k]);
  printf("\n");
  for (int r = 0; r < 6; r++) {
    if (r == 5) printf("\n");
    printf("%-12s", rows[r]);
    for (int k = 0; k < 10; k++) {
      double v = (total ? st->T : st->X)[cp[k]][rl[r]];
      if (isnan(v) || v == 0)
        printf(" %14s", "-");
      else
        printf(" %14.3f", v);
    }
    printf("\n");
  }
  printf("\nio, transformation, computation and results are parts of execution.\n");
  if (!total)
    printf("Self time: a layer's time minus that of the nearest layer below it with any\n"
           "(application > runtime > ipc > driver > cpu).\n");
}

static int run(const void *opts, int n, const char *const *files) {
  const opts_t *opt = opts;
  (void)n;
  bool total = opt->total_times;
  const char *file = files[0];
  lp_agg_max_memory = opt->max_memory;
  lp_input_t *in = lp_input_open(file);
  if (!in) return LP_EXIT_BAD;
  lctx_t c;
  memset(&c, 0, sizeof c);
  c.file = lp_input_name(in);
  c.mem.cap = lp_mem_cap();
  lp_sink_t sink = {&c, on_event, &c.mem};
  int rc = lp_read_input(in, &sink);
  lp_input_close(in);
  int status = rc ? LP_EXIT_BAD : LP_EXIT_OK;
  at_ctx_t *at = NULL;
  size_t nscopes = 0;
  if (!status) {
    at = at_new(0);
    if (!at) {
      fprintf(stderr, "labelprof layers: out of memory\n");
      status = LP_EXIT_BAD;
    }
  }
  for (size_t i = 0; !status && i < c.nl; i++) {
    llane_t *l = &c.lanes[i];
    /* scopes never closed end at the lane's last event */
    if (l->no) {
      fprintf(stderr, "labelprof layers: %s: warning: %zu scope(s) never closed on thread %lld; they end at the "
                      "thread's last event\n", strcmp(file, "-") ? file : "<stdin>", l->no, (long long)l->tid);
      while (l->no) {
        lopen_t o = l->open[--l->no];
        if (o.layer < 0) continue;
        liv_t v = {o.s, l->last, c.seq++, o.line, o.layer, o.phase, o.sub};
        if (add_iv(&c, l, &v) < 0) {
          fprintf(stderr, "labelprof layers: %s: out of memory%s\n", c.file, c.mem.over ? " (the cap, --max-memory)" : "");
          status = LP_EXIT_BAD;
          break;
        }
      }
    }
    if (!l->n || status) continue;
    qsort(l->iv, l->n, sizeof *l->iv, cmp_iv);
    int th = at_thread(at, l->tid, 0);
    if (th < 0) {
      fprintf(stderr, "labelprof layers: out of memory\n");
      status = LP_EXIT_BAD;
      break;
    }
    int64_t *ends = malloc(l->n * sizeof *ends);
    size_t ne = 0;
    if (!ends) {
      fprintf(stderr, "labelprof layers: out of memory\n");
      status = LP_EXIT_BAD;
      break;
    }
    at_error_t e = {0};
    for (size_t k = 0; k < l->n && !status; k++) {
      liv_t *v = &l->iv[k];
      while (ne && ends[ne - 1] <= v->s) {
        if (at_end(at, th, (double)ends[--ne] / 1e9, 0, &e) < 0) status = LP_EXIT_CHECK;
      }
      if (ne && v->e > ends[ne - 1]) v->e = ends[ne - 1]; /* overlaps its parent: cut at the parent's end */
      if (!status && at_begin_codes(at, th, (double)v->s / 1e9, v->layer, v->phase, v->sub, (long)v->line, &e) < 0)
        status = LP_EXIT_CHECK;
      ends[ne++] = v->e;
      nscopes++;
    }
    while (ne && !status)
      if (at_end(at, th, (double)ends[--ne] / 1e9, 0, &e) < 0) status = LP_EXIT_CHECK;
    free(ends);
    if (status) fprintf(stderr, "labelprof layers: %s:%ld: %s\n", c.file, e.line, e.msg);
  }
  if (!status) {
    at_stats_t st;
    at_error_t e = {0};
    if (at_compute(at, &st, &e) < 0) {
      if (e.line2)
        fprintf(stderr, "labelprof layers: %s:%ld: %s (the enclosing scope begins at line %ld)\n", c.file, e.line,
                e.msg, e.line2);
      else
        fprintf(stderr, "labelprof layers: %s:%ld: %s\n", c.file, e.line, e.msg);
      status = LP_EXIT_CHECK;
    } else {
      if (!nscopes)
        fprintf(stderr, "labelprof layers: %s: no scope with a layer (LP_SCOPE_PHASE) in this trace\n", c.file);
      print_table(&st, total, c.file);
    }
  }
  at_free(at);
  for (size_t i = 0; i < c.nl; i++) {
    lp_mem_free(&c.mem, c.lanes[i].iv, c.lanes[i].cap * sizeof *c.lanes[i].iv);
    lp_mem_free(&c.mem, c.lanes[i].open, c.lanes[i].ocap * sizeof *c.lanes[i].open);
  }
  lp_mem_free(&c.mem, c.lanes, c.cap * sizeof *c.lanes);
  lp_index_free(&c.index, &c.mem);
  return status;
}
