/*
 * stats.c: `labelprof stats`: one row per label, from the label statistics
 * the engine (agg.c) keeps per lane and for all lanes.
 */
#include "config.h"

#include "agg.h"
#include "cmd.h"
#include "reader.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum sort_key { BY_SELF, BY_CALLS, BY_TOTAL, BY_MEAN, BY_MAX };
enum format { FMT_TABLE, FMT_CSV, FMT_JSON };

static const char usage[] =
    "usage: labelprof stats [--by thread|process] [--top N] [--sort calls|total|self|mean|max]\n"
    "                       [--format table|csv|json] [--strict] [--max-memory SIZE] FILE...\n"
    "\n"
    "One row per label: calls, total, self, mean, min, p50, p95, p99, max, and self\n"
    "time as a percentage of the traced wall time, heaviest self time first.\n"
    "\n"
    "  total   time inside the label; a label nested in itself is counted once\n"
    "          (only its outermost call adds to total)\n"
    "  self    total minus the time of the scopes directly inside it on the same\n"
    "          lane (thread); a recursive call's time is its own child's, so self\n"
    "          times of all labels add up to the time spent in any label\n"
    "  mean, min, p50, p95, p99, max\n"
    "          over the duration of each call (p50..p99 within 1%)\n"
    "  self%   self time over the traced wall time: the sum over lanes of the\n"
    "          time from each lane's first event to its last\n"
    "\n"
    "  --by thread   one table per lane (thread), named from the trace's metadata\n"
    "  --by process  one table per process (a pid of a file: a merged file holds\n"
    "                several), its threads added up; without --by, every\n"
    "                process's work counts in one table\n"
    "  --top N       only the first N rows of each table\n"
    "  --sort KEY    order by calls, total, self (the default), mean or max\n"
    "  --format F    table (aligned, human units; the default), csv or json\n"
    "                (csv and json: integer nanoseconds; in csv a label that\n"
    "                starts with = + - @ gets a ' before it, so that a\n"
    "                spreadsheet does not take it for a formula)\n"
    "  --strict      a B never closed or an E with nothing open is an error\n"
    "  --max-memory SIZE  stop (exit 2, naming the file and the position) when the\n"
    "                trace's labels, lanes and paths and the reader's own tables\n"
    "                would need more memory than SIZE (512M, 2G, 1GiB: powers of\n"
    "                1024; none: no cap; 0 is refused); the default is half the\n"
    "                physical memory\n"
    "\n"
    "Several files are read as one trace whose lanes are kept apart. FILE may be\n"
    "gzip-compressed, and - is standard input (once). A name longer than 1 MiB\n"
    "is refused as its bytes arrive.\n";

typedef struct opts {
  int by, sort, format; /* by: 0, 1 thread, 2 process */
  long top; /* -1: every row */
  bool strict;
  uint64_t max_memory;
} opts_t;

static const opts_t defaults = {.sort = BY_SELF, .format = FMT_TABLE, .top = -1};
static const char *const by_words[] = {"thread", "process", NULL}, *const sort_words[] = {"self", "calls", "total", "mean", "max", NULL},
                  *const format_words[] = {"table", "csv", "json", NULL};
static const int by_values[] = {1, 2}, sort_values[] = {BY_SELF, BY_CALLS, BY_TOTAL, BY_MEAN, BY_MAX},
                 format_values[] = {FMT_TABLE, FMT_CSV, FMT_JSON};
static const lp_opt_words_t by_how = {by_words, by_values, "--by takes thread or process"},
                            sort_how = {sort_words, sort_values, "--sort takes calls, total, self, mean or max"},
                            format_how = {format_words, format_values, "--format takes table, csv or json"};
static int parse_top(const char *cmd, const char *v, void *field, const void *how);

static const lp_opt_t options[] = {
    LP_OPT_PARSED("--by", "thread|process", opts_t, by, lp_opt_parse_word, &by_how),
    LP_OPT_PARSED("--top", "N", opts_t, top, parse_top, NULL),
    LP_OPT_PARSED("--sort", "calls|total|self|mean|max", opts_t, sort, lp_opt_parse_word, &sort_how),
    LP_OPT_PARSED("--format", "table|csv|json", opts_t, format, lp_opt_parse_word, &format_how),
    LP_OPT_STRICT(opts_t, strict),
    LP_OPT_MAX_MEMORY(opts_t, max_memory),
    LP_OPT_END,
};

static int run(const void *opts, int n, const char *const *files);

const lp_cmd_t lp_cmd_stats = {
    "stats", "statistics per label: calls, total, self, percentiles", usage, options, sizeof(opts_t), &defaults,
    {1, -1, "FILE..."}, run,
};

typedef struct row {
  const char *label;
  const lp_lstat_t *s;
  int64_t mean, p50, p95, p99;
} row_t;

static enum sort_key sort_by;

static int64_t key_of(const row_t *r) {
  switch (sort_by) {
  case BY_CALLS: return (int64_t)r->s->calls;
  case BY_TOTAL: return r->s->total;
  case BY_MEAN: return r->mean;
  case BY_MAX: return r->s->max;
  default: return r->s->self;
  }
}

static int cmp_row(const void *x, const void *y) {
  const row_t *a = x, *b = y;
  int64_t ka = key_of(a), kb = key_of(b);
  if (ka != kb) return ka > kb ? -1 : 1;
  return strcmp(a->label, b->label);
}

static void fill(row_t *r, const char *label, const lp_lstat_t *s) {
  r->label = label;
  r->s = s;
  r->mean = s->calls ? s->sum / (int64_t)s->calls : 0;
  r->p50 = lp_lstat_percentile(s, 50);
  r->p95 = lp_lstat_percentile(s, 95);
  r->p99 = lp_lstat_percentile(s, 99);
}

static const char *const heads[] = {"calls", "total", "self", "mean", "min", "p50", "p95", "p99", "max", "self%"};

static void print_table(FILE *out, const row_t *rows, size_t n, int64_t wall) {
  size_t w = 5;
  for (size_t i = 0; i < n; i++)
    if (strlen(rows[i].label) > w) w = strlen(rows[i].label);
  if (w > 48) w = 48;
  fprintf(out, "%-*s %9s", (int)w, "label", heads[0]);
  for (int c = 1; c < 9; c++) fprintf(out, " %8s", heads[c]);
  fprintf(out, " %7s\n", heads[9]);
  for (size_t i = 0; i < n; i++) {
    const row_t *r = &rows[i];
    char b[9][32];
    int64_t v[9] = {0, r->s->total, r->s->self, r->mean, r->s->min, r->p50, r->p95, r->p99, r->s->max};
    size_t len = lp_put_text(out, r->label, false); /* whole, on one line */
    if (len < w) fprintf(out, "%*s", (int)(w - len), "");
    fprintf(out, " %9" PRIu64, r->s->calls);
    for (int c = 1; c < 9; c++) fprintf(out, " %8s", lp_fmt_ns(v[c], b[c], sizeof b[c]));
    fprintf(out, " %6.2f%%\n", wall > 0 ? 100.0 * (double)r->s->self / (double)wall : 0.0);
  }
}

static void print_csv(FILE *out, const row_t *rows, size_t n, int64_t wall, const char *thread) {
  for (size_t i = 0; i < n; i++) {
    const row_t *r = &rows[i];
    if (thread) {
      lp_put_csv_field(out, thread);
      putc(',', out);
    }
    lp_put_csv_field(out, r->label);
    fprintf(out, ",%" PRIu64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
                 ",%" PRId64 ",%.4f\n",
            r->s->calls, r->s->total, r->s->self, r->mean, r->s->min, r->p50, r->p95, r->p99, r->s->max,
            wall > 0 ? 100.0 * (double)r->s->self / (double)wall : 0.0);
  }
}

static void print_json_rows(FILE *out, const row_t *rows, size_t n, int64_t wall) {
  fputs("[", out);
  for (size_t i = 0; i < n; i++) {
    const row_t *r = &rows[i];
    fputs(i ? ",\n    {\"label\":" : "\n    {\"label\":", out);
    lp_put_json_string(out, r->label);
    fprintf(out,
            ",\"calls\":%" PRIu64 ",\"total_ns\":%" PRId64 ",\"self_ns\":%" PRId64 ",\"mean_ns\":%" PRId64
            ",\"min_ns\":%" PRId64 ",\"p50_ns\":%" PRId64 ",\"p95_ns\":%" PRId64 ",\"p99_ns\":%" PRId64
            ",\"max_ns\":%" PRId64 ",\"self_percent\":%.4f}",
            r->s->calls, r->s->total, r->s->self, r->mean, r->s->min, r->p50, r->p95, r->p99, r->s->max,
            wall > 0 ? 100.0 * (double)r->s->self / (double)wall : 0.0);
  }
  fputs(n ? "\n  ]" : "]", out);
}

/* The rows of one set of statistics (a lane's hash table, or the global array), sorted; NULL when out of memory. */
static row_t *rows_of(const lp_agg_t *a, const lp_lstat_t *s, uint32_t n, size_t *count) {
  row_t *rows = malloc((n ? n : 1) * sizeof *rows);
  if (!rows) return NULL;
  size_t m = 0;
  for (uint32_t i = 0; i < n; i++)
    if (s[i].label != UINT32_MAX && s[i].calls) fill(&rows[m++], a->labels[s[i].label], &s[i]);
  qsort(rows, m, sizeof *rows, cmp_row);
  *count = m;
  return rows;
}

static void notes(FILE *out, const lp_agg_t *a) {
  if (a->skipped) fprintf(out, "note: %" PRIu64 " events of other phases (async, flow, ...) skipped\n", a->skipped);
  if (a->unclosed_begins)
    fprintf(out, "note: %" PRIu64 " scopes never closed, counted as ending at their lane's last event\n",
            a->unclosed_begins);
  if (a->unmatched_ends) fprintf(out, "note: %" PRIu64 " \"E\" events had no open \"B\"\n", a->unmatched_ends);
  if (a->early_ends)
    fprintf(out, "note: %" PRIu64 " \"E\" events came before the end of a scope inside theirs; their scopes end with it\n",
            a->early_ends);
  if (a->overlaps) fprintf(out, "note: %" PRIu64 " scopes outlasted their parent and were cut at its end\n", a->overlaps);
}

static int cmp_lane(const void *x, const void *y) {
  const lp_lane_t *a = *(lp_lane_t *const *)x, *b = *(lp_lane_t *const *)y;
  int64_t sa = lp_lane_span(a), sb = lp_lane_span(b);
  if (a->in_label != b->in_label) return a->in_label > b->in_label ? -1 : 1;
  if (sa != sb) return sa > sb ? -1 : 1;
  if (a->file != b->file) return a->file < b->file ? -1 : 1;
  if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
  return a->tid < b->tid ? -1 : a->tid > b->tid;
}

static int parse_top(const char *cmd, const char *v, void *field, const void *how) {
  (void)how;
  long *top = field;
  char *end;
  *top = strtol(v, &end, 10);
  if (*v && !*end && *top >= 0) return 0;
  lp_usage_error(cmd, "--top takes a count, not '%s'", v);
  return -1;
}

/*
 * --by process: one table per process (a pid of a file), its lanes'
 * statistics added up, its wall time the sum of its lanes' spans.
 */
static int by_process(lp_agg_t *a, FILE *out, enum format fmt, long top, int64_t wall) {
  const lp_lane_t **procs;
  size_t np = lp_agg_processes(a, &procs);
  lp_lstat_t *ps = malloc((a->nlabels ? a->nlabels : 1) * sizeof *ps);
  if (!procs || !ps) {
    free(procs);
    free(ps);
    fprintf(stderr, "labelprof: out of memory\n");
    return LP_EXIT_BAD;
  }
  for (uint32_t k = 0; k < a->nlabels; k++) ps[k] = (lp_lstat_t){.label = k, .min = INT64_MAX};
  int status = LP_EXIT_OK;
  char wb[32];
  if (fmt == FMT_TABLE) lp_agg_file_notes(a, out);
  if (fmt == FMT_CSV)
    fputs("process,label,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,self_percent\n", out);
  if (fmt == FMT_JSON)
    fprintf(out, "{\"wall_ns\":%" PRId64 ",\"lanes\":%u,\"scopes\":%" PRIu64 ",\"skipped\":%" PRIu64 ",\"processes\":[",
            wall, a->nlanes, a->scopes, a->skipped);
  for (size_t p = 0; p < np && status == LP_EXIT_OK; p++) {
    int64_t pw = 0;
    for (uint32_t k = 0; k < a->nlanes; k++) {
      const lp_lane_t *l = a->lanes[k];
      if (!lp_same_process(l, procs[p])) continue;
      pw = lp_sat_add(pw, lp_lane_span(l));
      for (uint32_t i = 0; i < l->nstats; i++)
        if (lp_lstat_add(NULL, &ps[l->stats[i].label], &l->stats[i])) status = LP_EXIT_BAD;
    }
    size_t n = 0;
    row_t *rows = status == LP_EXIT_OK ? rows_of(a, ps, a->nlabels, &n) : NULL;
    if (!rows) {
      fprintf(stderr, "labelprof: out of memory\n");
      status = LP_EXIT_BAD;
    } else {
      if (top >= 0 && (size_t)top < n) n = (size_t)top;
      char title[600];
      lp_process_title(a, procs[p], title, sizeof title);
      if (fmt == FMT_TABLE) {
        fprintf(out, "%s", p ? "\n" : "");
        lp_put_text(out, title, false);
        fprintf(out, ": %s wall time\n", lp_fmt_ns(pw, wb, sizeof wb));
        print_table(out, rows, n, pw);
      } else if (fmt == FMT_CSV) {
        print_csv(out, rows, n, pw, title);
      } else {
        fputs(p ? ",\n {\"process\":" : "\n {\"process\":", out);
        lp_put_json_string(out, title);
        fprintf(out, ",\"pid\":%" PRId64 ",\"wall_ns\":%" PRId64 ",\n  \"labels\":", procs[p]->pid, pw);
        print_json_rows(out, rows, n, pw);
        fputs("}", out);
      }
    }
    free(rows);
    for (uint32_t k = 0; k < a->nlabels; k++) lp_lstat_clear(&ps[k], k);
  }
  if (fmt == FMT_JSON) fputs("]}\n", out);
  if (fmt == FMT_TABLE && status == LP_EXIT_OK) notes(out, a);
  free(ps);
  free(procs);
  return status;
}

static int run(const void *opts, int nfiles, const char *const *files) {
  const opts_t *o = opts;
  bool by_thread = o->by == 1;
  long top = o->top;
  enum format fmt = (enum format)o->format;
  sort_by = (enum sort_key)o->sort;
  lp_agg_max_memory = o->max_memory;
  lp_agg_t a;
  lp_agg_init(&a);
  a.strict = o->strict;
  a.lane_hists = o->by != 0;
  for (int i = 0; i < nfiles; i++)
    if (lp_agg_file(&a, files[i]) != 0) {
      lp_agg_free(&a);
      return LP_EXIT_BAD;
    }
  int64_t wall = lp_agg_wall(&a);
  FILE *out = stdout;
  int status = LP_EXIT_OK;
  char wb[32];
  /* Drops, and the window the trace covers: on the table's first lines, on stderr beside csv and json. */
  if (fmt != FMT_TABLE) lp_agg_file_notes(&a, stderr);
  if (o->by == 2) {
    status = by_process(&a, out, fmt, top, wall);
    goto out;
  }
  if (!by_thread) {
    size_t n;
    row_t *rows = rows_of(&a, a.gstats, a.nlabels, &n);
    if (!rows) {
      status = LP_EXIT_BAD;
      fprintf(stderr, "labelprof: out of memory\n");
      goto out;
    }
    if (top >= 0 && (size_t)top < n) n = (size_t)top;
    if (fmt == FMT_TABLE) {
      fprintf(out, "%u lanes, %s traced wall time, %" PRIu64 " scopes\n", a.nlanes, lp_fmt_ns(wall, wb, sizeof wb),
              a.scopes);
      lp_agg_file_notes(&a, out);
      print_table(out, rows, n, wall);
      notes(out, &a);
    } else if (fmt == FMT_CSV) {
      fputs("label,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,self_percent\n", out);
      print_csv(out, rows, n, wall, NULL);
    } else {
      fprintf(out, "{\"wall_ns\":%" PRId64 ",\"lanes\":%u,\"scopes\":%" PRIu64 ",\"skipped\":%" PRIu64 ",\n  \"labels\":",
              wall, a.nlanes, a.scopes, a.skipped);
      print_json_rows(out, rows, n, wall);
      fputs("}\n", out);
    }
    free(rows);
    goto out;
  }
  lp_lane_t **lanes = malloc((a.nlanes ? a.nlanes : 1) * sizeof *lanes);
  if (!lanes) {
    status = LP_EXIT_BAD;
    fprintf(stderr, "labelprof: out of memory\n");
    goto out;
  }
  if (a.nlanes) memcpy(lanes, a.lanes, a.nlanes * sizeof *lanes);
  qsort(lanes, a.nlanes, sizeof *lanes, cmp_lane);
  if (fmt == FMT_TABLE) lp_agg_file_notes(&a, out);
  if (fmt == FMT_CSV)
    fputs("thread,label,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,self_percent\n", out);
  if (fmt == FMT_JSON)
    fprintf(out, "{\"wall_ns\":%" PRId64 ",\"lanes\":%u,\"scopes\":%" PRIu64 ",\"skipped\":%" PRIu64 ",\"threads\":[",
            wall, a.nlanes, a.scopes, a.skipped);
  unsigned shown = 0;
  for (uint32_t k = 0; k < a.nlanes; k++) {
    const lp_lane_t *l = lanes[k];
    if (!l->nstats) continue;
    int64_t lw = lp_lane_span(l);
    size_t n;
    row_t *rows = rows_of(&a, l->stats, l->nstats, &n);
    if (!rows) {
      status = LP_EXIT_BAD;
      fprintf(stderr, "labelprof: out of memory\n");
      break;
    }
    if (top >= 0 && (size_t)top < n) n = (size_t)top;
    char title[512];
    lp_lane_title(&a, l, title, sizeof title);
    if (fmt == FMT_TABLE) {
      fprintf(out, "%sthread %s: %s wall time\n", shown ? "\n" : "", title, lp_fmt_ns(lw, wb, sizeof wb));
      print_table(out, rows, n, lw);
    } else if (fmt == FMT_CSV) {
      print_csv(out, rows, n, lw, title);
    } else {
      fputs(shown ? ",\n {\"thread\":" : "\n {\"thread\":", out);
      lp_put_json_string(out, l->name ? l->name : "");
      fprintf(out, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"wall_ns\":%" PRId64 ",\n  \"labels\":", l->pid,
              l->tid, lw);
      print_json_rows(out, rows, n, lw);
      fputs("}", out);
    }
    shown++;
    free(rows);
  }
  if (fmt == FMT_JSON) fputs("]}\n", out);
  if (fmt == FMT_TABLE) notes(out, &a);
  free(lanes);
out:
  lp_agg_free(&a);
  return status;
}
