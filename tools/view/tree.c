/*
 * tree.c: `labelprof tree`: the tree of time from a timeline, printed in the
 * layout of the sampled profile (lp_profile_print in lib/tree.c), so that the
 * two can be compared line by line: percentages of the traced wall time (the
 * summed span of every lane, as samples are summed over threads), 4 spaces
 * per level (to level 32; a deeper line says its level), children heaviest
 * first, "other" closing each node that has children, "other (outside of
 * any label)" at the root.
 */
#include "config.h"

#include "agg.h"
#include "cmd.h"
#include "reader.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: labelprof tree [--threads] [--by process] [--min-percent P] [--counts] [--flat]\n"
    "                      [--strict] [--max-memory SIZE] FILE...\n"
    "\n"
    "The tree of time, in the layout of the sampled profile (lp_profile_print):\n"
    "percentages of the summed wall time of all lanes (each lane from its first\n"
    "to its last event), children heaviest first, 4 spaces per level (lines\n"
    "deeper than 32 levels stay at 128 spaces and start with [level N]). \"other\"\n"
    "closes each node with children: time in the node but in none of them.\n"
    "\"other (outside of any label)\" is lane time in no scope at all.\n"
    "\n"
    "  --threads        one tree per lane, heaviest first, in percent of that lane\n"
    "  --by process     one tree per process (a pid of a file), in percent of its\n"
    "                   threads' summed wall time\n"
    "  --min-percent P  hide nodes under P percent (their time goes to \"other\")\n"
    "  --counts         [N calls, T] on every line\n"
    "  --flat           then a flat table: each label's total and self share,\n"
    "                   summed over every place it appears, heaviest total first\n"
    "  --max-memory SIZE  as for stats (labelprof help stats)\n"
    "\n"
    "Several files are read as one trace, as by stats.\n";

typedef struct opts {
  bool threads, counts, flat, strict;
  int by;
  double min_percent;
  uint64_t max_memory;
} opts_t;

static const lp_opt_t options[] = {
    LP_OPT_FLAG("--threads", opts_t, threads),
    LP_OPT_BY_PROCESS(opts_t, by),
    LP_OPT_MIN_PERCENT(opts_t, min_percent),
    LP_OPT_FLAG("--counts", opts_t, counts),
    LP_OPT_FLAG("--flat", opts_t, flat),
    LP_OPT_STRICT(opts_t, strict),
    LP_OPT_MAX_MEMORY(opts_t, max_memory),
    LP_OPT_END,
};

static int run(const void *opts, int n, const char *const *files);

const lp_cmd_t lp_cmd_tree = {
    "tree", "the tree of time, in the layout of the sampled profile", usage, options, sizeof(opts_t), NULL,
    {1, -1, "FILE..."}, run,
};

typedef struct printer {
  FILE *out;
  const lp_agg_t *a;
  const lp_tree_t *t;
  int64_t denom;
  double min_percent;
  bool counts;
} printer_t;

static double pct(const printer_t *pr, int64_t v) { return pr->denom > 0 ? 100.0 * (double)v / (double)pr->denom : 0.0; }

/*
 * Levels are indented 4 spaces each down to INDENT_MAX; a deeper line keeps
 * that indentation and says its level ("[level 5000] "), so that the output
 * grows with the number of lines, not with their depth: a 10 KB profile with
 * a 10,000-deep stack would otherwise print 400 MB of spaces.
 */
#define INDENT_MAX 32

static void line(printer_t *pr, unsigned depth, int64_t v, uint64_t calls, const char *label, bool with_calls) {
  if (depth < INDENT_MAX)
    fprintf(pr->out, "%*s%.2f%% ", (int)(depth * 4), "", pct(pr, v));
  else
    fprintf(pr->out, "%*s[level %u] %.2f%% ", INDENT_MAX * 4, "", depth + 1, pct(pr, v));
  lp_put_text(pr->out, label, false);
  if (pr->counts) {
    double ns = (double)v;
    const char *unit = ns >= 1e9 ? "s" : ns >= 1e6 ? "ms" : "us";
    double shown = ns >= 1e9 ? ns / 1e9 : ns >= 1e6 ? ns / 1e6 : ns / 1e3;
    if (with_calls)
      fprintf(pr->out, " [%" PRIu64 " calls, %.3f %s]", calls, shown, unit);
    else
      fprintf(pr->out, " [%.3f %s]", shown, unit);
  }
  putc('\n', pr->out);
}

/* Saturating: the engine's sums saturate at INT64_MAX for absurd inputs. */
static int64_t add(int64_t x, int64_t y) {
  int64_t r;
  return __builtin_add_overflow(x, y, &r) ? INT64_MAX : r;
}

static void print_children(printer_t *pr, uint32_t k, unsigned depth) {
  const lp_tnode_t *n = &pr->t->nodes[k];
  int64_t hidden = 0;
  unsigned shown = 0;
  for (uint32_t c = n->first_kid; c != UINT32_MAX; c = pr->t->nodes[c].next_sib) {
    const lp_tnode_t *kid = &pr->t->nodes[c];
    if (pct(pr, kid->total) < pr->min_percent) {
      hidden = add(hidden, kid->total);
      continue;
    }
    shown++;
    line(pr, depth, kid->total, kid->calls, pr->a->labels[kid->label], true);
    if (kid->first_kid != UINT32_MAX) print_children(pr, c, depth + 1);
  }
  if (k == 0) {
    if (hidden) line(pr, depth, hidden, 0, "other (hidden labels)", false);
    line(pr, depth, n->self, 0, "other (outside of any label)", false);
  } else if (shown) {
    line(pr, depth, add(n->self, hidden), 0, "other", false);
  }
}

/* ---- the flat view (--flat) ---- */

static int cmp_flat(const void *x, const void *y, void *ctx) {
  const lp_agg_t *a = ctx;
  uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
  const lp_lstat_t *s = &a->gstats[i], *t = &a->gstats[j];
  if (s->total != t->total) return s->total > t->total ? -1 : 1;
  if (s->self != t->self) return s->self > t->self ? -1 : 1;
  return strcmp(a->labels[i], a->labels[j]);
}

/*
 * For each label of every lane: its total and self shares of the traced wall
 * time, heaviest total first. The engine's label statistics are that
 * already: self summed over every call, total over the calls with no call of
 * the same label around them on their lane (a recursion counts once).
 */
static int print_flat(printer_t *pr) {
  const lp_agg_t *a = pr->a;
  uint32_t *ids = malloc((a->nlabels ? a->nlabels : 1) * sizeof *ids), n = 0, hidden = 0;
  if (!ids) return -1;
  for (uint32_t i = 0; i < a->nlabels; i++)
    if (a->gstats[i].calls) ids[n++] = i;
  qsort_r(ids, n, sizeof *ids, cmp_flat, (void *)a);
  fprintf(pr->out, "flat profile: each label summed over every place it appears; a recursive label's time counted "
                   "once in its total\n");
  fprintf(pr->out, "%8s %8s  %s\n", "total", "self", "label");
  for (uint32_t k = 0; k < n; k++) {
    const lp_lstat_t *s = &a->gstats[ids[k]];
    if (pct(pr, s->total) < pr->min_percent) {
      hidden++;
      continue;
    }
    fprintf(pr->out, "%7.2f%% %7.2f%%  ", pct(pr, s->total), pct(pr, s->self));
    lp_put_text(pr->out, a->labels[ids[k]], false);
    putc('\n', pr->out);
  }
  if (hidden) fprintf(pr->out, "(%u labels under %g%% of total not shown)\n", hidden, pr->min_percent);
  free(ids);
  return 0;
}

static int cmp_lane(const void *x, const void *y) {
  const lp_lane_t *a = *(lp_lane_t *const *)x, *b = *(lp_lane_t *const *)y;
  int64_t sa = lp_lane_span(a), sb = lp_lane_span(b);
  if (sa != sb) return sa > sb ? -1 : 1;
  if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
  return a->tid < b->tid ? -1 : a->tid > b->tid;
}

static int run(const void *opts, int nfiles, const char *const *files) {
  const opts_t *o = opts;
  bool threads = o->threads, counts = o->counts, flat = o->flat;
  int by = o->by;
  double min_percent = o->min_percent;
  lp_agg_max_memory = o->max_memory;
  lp_agg_t a;
  if (lp_agg_read_files(&a, files, nfiles, o->strict) != 0) return LP_EXIT_BAD;
  int64_t wall = lp_agg_wall(&a);
  FILE *out = stdout;
  printer_t pr = {out, &a, NULL, wall, min_percent, counts};
  fprintf(out, "labelprof trace (%u threads, %" PRIu64 " scopes)\n", a.nlanes, a.scopes);
  char wb[32];
  fprintf(out, "%s traced wall time: the sum over lanes of first to last event\n", lp_fmt_ns(wall, wb, sizeof wb));
  lp_agg_file_notes(&a, out);
  int status = LP_EXIT_OK;
  if (by) {
    const lp_lane_t **procs;
    size_t np = lp_agg_processes(&a, &procs);
    for (size_t p = 0; p < np && status == LP_EXIT_OK; p++) {
      lp_tree_t m;
      if (lp_agg_process_tree(&a, procs[p], &m) != 0) {
        fprintf(stderr, "labelprof: out of memory\n");
        status = LP_EXIT_BAD;
      } else {
        char title[600];
        int64_t span = m.nodes[0].total;
        lp_put_text(out, lp_process_title(&a, procs[p], title, sizeof title), false);
        fprintf(out, " (%.3f s, %.2f%% of all)\n", (double)span / 1e9, wall > 0 ? 100.0 * (double)span / (double)wall : 0.0);
        pr.t = &m;
        pr.denom = span;
        print_children(&pr, 0, 0);
      }
      lp_tree_free(&m);
    }
    if (!procs) {
      fprintf(stderr, "labelprof: out of memory\n");
      status = LP_EXIT_BAD;
    }
    free(procs);
    pr.t = NULL;
  } else if (threads) {
    lp_lane_t **lanes = malloc((a.nlanes ? a.nlanes : 1) * sizeof *lanes);
    if (!lanes) {
      fprintf(stderr, "labelprof: out of memory\n");
      lp_agg_free(&a);
      return LP_EXIT_BAD;
    }
    if (a.nlanes) memcpy(lanes, a.lanes, a.nlanes * sizeof *lanes);
    qsort(lanes, a.nlanes, sizeof *lanes, cmp_lane);
    for (uint32_t k = 0; k < a.nlanes; k++) {
      lp_lane_t *l = lanes[k];
      lp_agg_lane_tree(&a, l);
      int64_t span = l->tree.nodes[0].total;
      fprintf(out, "thread %" PRId64 " \"", l->tid);
      lp_put_text(out, l->name ? l->name : "", false);
      fprintf(out, "\" (%.3f s, %.2f%% of all)\n", (double)span / 1e9, wall > 0 ? 100.0 * (double)span / (double)wall : 0.0);
      pr.t = &l->tree;
      pr.denom = span;
      print_children(&pr, 0, 0);
    }
    free(lanes);
  } else {
    lp_tree_t m;
    if (lp_agg_merged_tree(&a, &m) != 0) {
      fprintf(stderr, "labelprof: out of memory\n");
      status = LP_EXIT_BAD;
    } else {
      pr.t = &m;
      print_children(&pr, 0, 0);
    }
    lp_tree_free(&m);
  }
  if (status == LP_EXIT_OK && flat) {
    pr.denom = wall;
    if (print_flat(&pr) != 0) {
      fprintf(stderr, "labelprof: out of memory\n");
      status = LP_EXIT_BAD;
    }
  }
  if (status == LP_EXIT_OK) {
    if (a.skipped) fprintf(out, "note: %" PRIu64 " events of other phases (async, flow, ...) skipped\n", a.skipped);
    if (a.unclosed_begins)
      fprintf(out, "note: %" PRIu64 " scopes never closed, counted as ending at their lane's last event\n",
              a.unclosed_begins);
    if (a.unmatched_ends) fprintf(out, "note: %" PRIu64 " \"E\" events had no open \"B\"\n", a.unmatched_ends);
  }
  lp_agg_free(&a);
  return status;
}
