/*
 * diff.c: `labelprof diff BASE NEW`: calls, total and self per label in two
 * traces, the change in self time, sorted by its size; --fail-above makes it
 * a regression gate.
 */
#include "config.h"

#include "agg.h"
#include "cmd.h"
#include "reader.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: labelprof diff [--fail-above PCT] [--min-time T] [--strict] [--max-memory SIZE]\n"
    "                      BASE NEW\n"
    "\n"
    "Per label: calls, total and self time in BASE and NEW, the change in self\n"
    "time and its percentage, sorted by the size of the change in self time.\n"
    "\n"
    "  --fail-above PCT  exit with status 1 when a label's self time grew by more\n"
    "                    than PCT percent (a regression gate for CI)\n"
    "  --min-time T      labels whose self time is under T in both files are not\n"
    "                    checked: a duration (500us, 2ms, 1.5s; plain numbers are ns)\n"
    "                    or a percentage of NEW's wall time (0.5%); default 1%\n"
    "  --max-memory SIZE as for stats (labelprof help stats), for each file\n"
    "\n"
    "Exit status: 0, 1 when --fail-above failed, 2 for bad input.\n";

typedef struct opts {
  double fail_above; /* -1: no gate */
  const char *min_time;
  bool strict;
  uint64_t max_memory;
} opts_t;

static const opts_t defaults = {.fail_above = -1, .min_time = "1%"};

static int parse_fail_above(const char *cmd, const char *v, void *field, const void *how);
static int parse_min_time(const char *cmd, const char *v, void *field, const void *how);

static const lp_opt_t options[] = {
    LP_OPT_PARSED("--fail-above", "PCT", opts_t, fail_above, parse_fail_above, NULL),
    LP_OPT_PARSED("--min-time", "T", opts_t, min_time, parse_min_time, NULL),
    LP_OPT_STRICT(opts_t, strict),
    LP_OPT_MAX_MEMORY(opts_t, max_memory),
    LP_OPT_END,
};

static int run(const void *opts, int n, const char *const *files);

const lp_cmd_t lp_cmd_diff = {
    "diff", "compare two traces label by label; a regression gate", usage, options, sizeof(opts_t), &defaults,
    {2, 2, "BASE NEW"}, run,
};

typedef struct drow {
  const char *label;
  const lp_lstat_t *b, *n; /* NULL: not in that file */
  int64_t change;
} drow_t;

static int cmp_drow(const void *x, const void *y) {
  const drow_t *a = x, *b = y;
  int64_t ca = a->change < 0 ? -a->change : a->change, cb = b->change < 0 ? -b->change : b->change;
  if (ca != cb) return ca > cb ? -1 : 1;
  return strcmp(a->label, b->label);
}

static const lp_lstat_t *find(const lp_agg_t *a, const char *label) {
  uint32_t i = lp_agg_label(a, label);
  return i != UINT32_MAX && a->gstats[i].calls ? &a->gstats[i] : NULL;
}

/* "500us", "2ms", "1.5s", "250ns", "1234" (ns), or "0.5%" (of wall). -1 when not a duration. */
static int64_t parse_time(const char *s, int64_t wall) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0) || v > 9e18) return -1;
  double mult;
  if (!*end || strcmp(end, "ns") == 0) mult = 1;
  else if (strcmp(end, "us") == 0) mult = 1e3;
  else if (strcmp(end, "ms") == 0) mult = 1e6;
  else if (strcmp(end, "s") == 0) mult = 1e9;
  else if (strcmp(end, "%") == 0) {
    if (v > 100) return -1;
    return (int64_t)llround(v / 100.0 * (double)wall);
  } else return -1;
  double ns = v * mult;
  return ns > 9e18 ? -1 : (int64_t)llround(ns);
}

static void pct_text(const drow_t *r, char *buf, size_t len) {
  int64_t base = r->b ? r->b->self : 0, now = r->n ? r->n->self : 0;
  if (!r->b) snprintf(buf, len, "new");
  else if (!r->n) snprintf(buf, len, "gone");
  else if (base == 0) snprintf(buf, len, now ? "+inf%%" : "0.0%%");
  else snprintf(buf, len, "%+.1f%%", 100.0 * (double)(now - base) / (double)base);
}

static int parse_fail_above(const char *cmd, const char *v, void *field, const void *how) {
  (void)how;
  if (lp_parse_double(v, field)) return 0;
  lp_usage_error(cmd, "--fail-above takes a percentage, not '%s'", v);
  return -1;
}

static int parse_min_time(const char *cmd, const char *v, void *field, const void *how) {
  (void)how;
  if (parse_time(v, 0) < 0) {
    lp_usage_error(cmd, "--min-time takes a duration (500us, 2ms, 1.5s) or a percentage (0.5%%), not '%s'", v);
    return -1;
  }
  *(const char **)field = v;
  return 0;
}

static int run(const void *opts, int nfiles, const char *const *files) {
  const opts_t *o = opts;
  (void)nfiles;
  double fail_above = o->fail_above;
  lp_agg_max_memory = o->max_memory;
  lp_agg_t ab, an;
  lp_agg_init(&ab);
  lp_agg_init(&an);
  ab.strict = an.strict = o->strict;
  int status = LP_EXIT_OK;
  drow_t *rows = NULL;
  if (lp_agg_file(&ab, files[0]) != 0 || lp_agg_file(&an, files[1]) != 0) {
    status = LP_EXIT_BAD;
    goto out;
  }
  int64_t wb = lp_agg_wall(&ab), wn = lp_agg_wall(&an);
  int64_t min_time = parse_time(o->min_time, wn);
  rows = malloc(((size_t)ab.nlabels + an.nlabels + 1) * sizeof *rows);
  if (!rows) {
    fprintf(stderr, "labelprof: out of memory\n");
    status = LP_EXIT_BAD;
    goto out;
  }
  size_t m = 0;
  for (uint32_t i = 0; i < ab.nlabels; i++) {
    if (!ab.gstats[i].calls) continue;
    const lp_lstat_t *n = find(&an, ab.labels[i]);
    rows[m++] = (drow_t){ab.labels[i], &ab.gstats[i], n, (n ? n->self : 0) - ab.gstats[i].self};
  }
  for (uint32_t i = 0; i < an.nlabels; i++)
    if (an.gstats[i].calls && !find(&ab, an.labels[i]))
      rows[m++] = (drow_t){an.labels[i], NULL, &an.gstats[i], an.gstats[i].self};
  qsort(rows, m, sizeof *rows, cmp_drow);

  char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
  printf("base: %s (%s traced wall time)\nnew:  %s (%s traced wall time, %+.1f%%)\n", files[0],
         lp_fmt_ns(wb, b1, sizeof b1), files[1], lp_fmt_ns(wn, b2, sizeof b2),
         wb ? 100.0 * (double)(wn - wb) / (double)wb : 0.0);
  lp_agg_file_notes(&ab, stdout);
  lp_agg_file_notes(&an, stdout);
  size_t w = 5;
  for (size_t i = 0; i < m; i++)
    if (strlen(rows[i].label) > w) w = strlen(rows[i].label);
  if (w > 48) w = 48;
  printf("%-*s %10s %10s %9s %9s %9s %9s %9s %8s\n", (int)w, "label", "calls", "calls", "total", "total", "self",
         "self", "self", "self");
  printf("%-*s %10s %10s %9s %9s %9s %9s %9s %8s\n", (int)w, "", "base", "new", "base", "new", "base", "new",
         "change", "change%");
  unsigned failed = 0;
  for (size_t i = 0; i < m; i++) {
    const drow_t *r = &rows[i];
    char p[32], cb[24] = "-", cn[24] = "-";
    pct_text(r, p, sizeof p);
    if (r->b) snprintf(cb, sizeof cb, "%" PRIu64, r->b->calls);
    if (r->n) snprintf(cn, sizeof cn, "%" PRIu64, r->n->calls);
    size_t len = lp_put_text(stdout, r->label, false);
    printf("%*s %10s %10s %9s %9s %9s %9s %9s %8s\n", (int)(len < w ? w - len : 0), "", cb, cn,
           r->b ? lp_fmt_ns(r->b->total, b1, sizeof b1) : "-", r->n ? lp_fmt_ns(r->n->total, b2, sizeof b2) : "-",
           r->b ? lp_fmt_ns(r->b->self, b3, sizeof b3) : "-", r->n ? lp_fmt_ns(r->n->self, b4, sizeof b4) : "-",
           lp_fmt_ns(r->change, b5, sizeof b5), p);
  }
  if (fail_above >= 0) {
    for (size_t i = 0; i < m; i++) {
      const drow_t *r = &rows[i];
      int64_t base = r->b ? r->b->self : 0, now = r->n ? r->n->self : 0;
      if (now < min_time || now <= base) continue;
      double grew = base ? 100.0 * (double)(now - base) / (double)base : INFINITY;
      if (grew <= fail_above) continue;
      char p[32];
      pct_text(r, p, sizeof p);
      fputs("FAIL: ", stdout);
      lp_put_text(stdout, r->label, false);
      printf(": self time %s -> %s (%s), more than %g%%\n", lp_fmt_ns(base, b1, sizeof b1),
             lp_fmt_ns(now, b2, sizeof b2), p, fail_above);
      failed++;
    }
    if (failed)
      status = LP_EXIT_CHECK;
    else
      printf("ok: no label's self time grew by more than %g%% (labels under %s in NEW not checked)\n", fail_above,
             lp_fmt_ns(min_time, b6, sizeof b6));
  }
out:
  free(rows);
  lp_agg_free(&ab);
  lp_agg_free(&an);
  return status;
}
