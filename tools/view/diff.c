/*
 * diff.c: `labelprof diff BASE NEW`: calls, total and self per label in two
 * traces, the change in self time, sorted by its size; --fail-above makes it
 * a regression gate.
 */
#include "config.h"

#include "agg.h"
#include "cmd.h"
#include "opts.h"
#include "reader.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static int parse_fail_above(const char *cmd, const char *v, void *arg) {
  if (lp_parse_double(v, arg)) return 0;
  lp_usage_error(cmd, "--fail-above takes a percentage, not '%s'", v);
  return -1;
}

static int parse_min_time(const char *cmd, const char *v, void *arg) {
  if (parse_time(v, 0) < 0) {
    lp_usage_error(cmd, "--min-time takes a duration (500us, 2ms, 1.5s) or a percentage (0.5%%), not '%s'", v);
    return -1;
  }
  *(const char **)arg = v;
  return 0;
}

int lp_cmd_diff(int argc, char **argv) {
  const char *cmd = argv[0], *files[2] = {NULL, NULL}, *min_text = "1%";
  double fail_above = -1;
  bool strict = false;
  const lp_opt_t opts[] = {LP_OPT_STRICT(&strict), LP_OPT_MAX_MEMORY, {"--fail-above", 0, 0, parse_fail_above, &fail_above},
                           {"--min-time", 0, 0, parse_min_time, &min_text}, LP_OPT_END};
  lp_operands_t ops = {.v = files, .min = 2, .max = 2, .too_many = "two trace files: BASE and NEW",
                       .missing = "two trace files are needed: BASE and NEW"};
  int parsed = lp_opts_parse(cmd, argc, argv, opts, &ops);
  if (parsed == LP_OPTS_RUN) parsed = lp_opts_stdin_once(cmd, files, 2);
  if (parsed != LP_OPTS_RUN) return parsed;
  lp_agg_t ab, an;
  lp_agg_init(&ab);
  lp_agg_init(&an);
  ab.strict = an.strict = strict;
  int status = LP_EXIT_OK;
  drow_t *rows = NULL;
  if (lp_agg_file(&ab, files[0]) != 0 || lp_agg_file(&an, files[1]) != 0) {
    status = LP_EXIT_BAD;
    goto out;
  }
  int64_t wb = lp_agg_wall(&ab), wn = lp_agg_wall(&an);
  int64_t min_time = parse_time(min_text, wn);
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
