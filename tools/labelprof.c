/*
 * labelprof.c: the `labelprof` command: dispatch, and `help`.
 *
 * Every subcommand is an lp_cmd_t in its own file (tools/view/, see cmd.h):
 * lp_cmds lists them in the order `labelprof help` shows them. lp_main
 * finds the one named, parses its arguments with the one parser (opts.c)
 * into its options' struct, and runs it. main() is tools/main.c, so that a
 * test can run the whole command in its own process (lp_main).
 */
#include "config.h"

#include "cmd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

const lp_cmd_t *const lp_cmds[] = {
    &lp_cmd_stats, &lp_cmd_tree,   &lp_cmd_diff,  &lp_cmd_folded, &lp_cmd_merge, &lp_cmd_flamegraph, &lp_cmd_pprof,
    &lp_cmd_nnapi, &lp_cmd_layers, &lp_cmd_top,   &lp_cmd_record, &lp_cmd_help,       NULL,
};

const lp_cmd_t *lp_cmd_find(const char *name) {
  for (const lp_cmd_t *const *c = lp_cmds; *c; c++)
    if (strcmp((*c)->name, name) == 0) return *c;
  return NULL;
}

void lp_cmd_usage(const char *name, FILE *out) {
  const lp_cmd_t *c = lp_cmd_find(name);
  if (c) fputs(c->usage, out);
}

int lp_usage_error(const char *name, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "labelprof %s: ", name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\n", stderr);
  lp_cmd_usage(name, stderr);
  return LP_EXIT_BAD;
}

const char *lp_fmt_ns(int64_t ns, char *buf, size_t len) {
  double v = (double)ns;
  static const char *const units[] = {"ns", "us", "ms", "s"};
  unsigned u = 0;
  while (u < 3 && (v >= 999.5 || v <= -999.5)) {
    v /= 1000.0;
    u++;
  }
  if (u == 0)
    snprintf(buf, len, "%lld ns", (long long)ns);
  else if (v >= 99.95 || v <= -99.95)
    snprintf(buf, len, "%.0f %s", v, units[u]);
  else if (v >= 9.995 || v <= -9.995)
    snprintf(buf, len, "%.1f %s", v, units[u]);
  else
    snprintf(buf, len, "%.2f %s", v, units[u]);
  return buf;
}

int lp_parse_double(const char *s, double *v) {
  char *end;
  errno = 0;
  *v = strtod(s, &end);
  return *s && !*end && !errno && *v >= 0 && *v < 1e300;
}

void lp_overview(FILE *out) {
  fputs("usage: labelprof SUBCOMMAND [OPTIONS] FILE...\n"
        "       labelprof --version | help [SUBCOMMAND] | SUBCOMMAND -h\n"
        "\n"
        "Reads Chrome Trace Event JSON (object or array form, gzip or plain, - for\n"
        "standard input) in one streaming pass, systrace (the viewer's HTML,\n"
        "ftrace text, trace-cmd report output), Perfetto traces (TrackEvent\n"
        "protobuf, labelprof's .pftrace and other producers'), and profiles\n"
        "(folded stacks, pprof) where a subcommand says so.\n"
        "\n"
        "subcommands:\n",
        out);
  int w = 0;
  for (const lp_cmd_t *const *c = lp_cmds; *c; c++)
    if ((int)strlen((*c)->name) > w) w = (int)strlen((*c)->name);
  for (const lp_cmd_t *const *c = lp_cmds; *c; c++) fprintf(out, "  %-*s  %s\n", w, (*c)->name, (*c)->summary);
  fputs("\nExit status: 0; 1 when a check failed (diff --fail-above; nnapi, layers: a\n"
        "nesting rule); 2 for bad input or usage.\n",
        out);
}

/* ---- help ---- */

static const char help_usage[] =
    "usage: labelprof help [SUBCOMMAND]\n"
    "\n"
    "Lists the subcommands, or prints the usage of one.\n";

static int help_run(const void *opts, int n, const char *const *operands) {
  (void)opts;
  if (n == 0) {
    lp_overview(stdout);
    return LP_EXIT_OK;
  }
  const lp_cmd_t *c = lp_cmd_find(operands[0]);
  if (!c) {
    fprintf(stderr, "labelprof help: no subcommand '%s'\n", operands[0]);
    lp_overview(stderr);
    return LP_EXIT_BAD;
  }
  fputs(c->usage, stdout);
  return LP_EXIT_OK;
}

static const lp_opt_t help_opts[] = {LP_OPT_END};
const lp_cmd_t lp_cmd_help = {
    "help", "list the subcommands, or show one's usage", help_usage, help_opts, 0, NULL, {0, 1, "[SUBCOMMAND]"},
    help_run,
};

/* ---- dispatch ---- */

/* Parses the subcommand's arguments (argv[0] is its name) and runs it. */
static int run(const lp_cmd_t *c, int argc, char **argv) {
  void *opts = calloc(1, c->opts_size ? c->opts_size : 1);
  const char **operands = malloc((size_t)argc * sizeof *operands);
  int status = LP_EXIT_BAD, n = 0;
  if (!opts || !operands) {
    fprintf(stderr, "labelprof %s: out of memory\n", c->name);
  } else {
    if (c->defaults) memcpy(opts, c->defaults, c->opts_size);
    status = lp_opts_parse(c->name, argc, argv, c->opts, &c->operands, opts, operands, &n);
    if (status == LP_OPTS_RUN) status = c->run(opts, n, operands);
  }
  free(operands);
  free(opts);
  return status;
}

int lp_main(int argc, char **argv) {
  if (argc < 2) {
    lp_overview(stderr);
    return LP_EXIT_BAD;
  }
  if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
    printf("labelprof %s\n", PACKAGE_VERSION);
    return LP_EXIT_OK;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    lp_overview(stdout);
    return LP_EXIT_OK;
  }
  const lp_cmd_t *c = lp_cmd_find(argv[1]);
  if (!c) {
    fprintf(stderr, "labelprof: no subcommand '%s'\n", argv[1]);
    lp_overview(stderr);
    return LP_EXIT_BAD;
  }
  int status = run(c, argc - 1, argv + 1);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    perror("labelprof: writing the output");
    return LP_EXIT_BAD;
  }
  return status;
}
