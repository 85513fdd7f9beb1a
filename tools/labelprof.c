/*
 * labelprof.c: the `labelprof` command: argument parsing and dispatch.
 *
 * Every subcommand is a row of lp_cmds: its name, its entry point (see
 * cmd.h), a one-line summary for `labelprof help`, and its full usage text
 * for `-h` and `labelprof help NAME`. Adding one is one row here. main()
 * is tools/main.c, so that a test can run the whole command in its own
 * process (lp_main).
 */
#include "config.h"

#include "cmd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static const char stats_usage[] =
    "usage: labelprof stats [--by thread] [--top N] [--sort calls|total|self|mean|max]\n"
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

static const char tree_usage[] =
    "usage: labelprof tree [--threads] [--min-percent P] [--counts] [--flat] [--strict]\n"
    "                      [--max-memory SIZE] FILE\n"
    "\n"
    "The tree of time, in the layout of the sampled profile (lp_profile_print):\n"
    "percentages of the summed wall time of all lanes (each lane from its first\n"
    "to its last event), children heaviest first, 4 spaces per level (lines\n"
    "deeper than 32 levels stay at 128 spaces and start with [level N]). \"other\"\n"
    "closes each node with children: time in the node but in none of them.\n"
    "\"other (outside of any label)\" is lane time in no scope at all.\n"
    "\n"
    "  --threads        one tree per lane, heaviest first, in percent of that lane\n"
    "  --min-percent P  hide nodes under P percent (their time goes to \"other\")\n"
    "  --counts         [N calls, T] on every line\n"
    "  --flat           then a flat table: each label's total and self share,\n"
    "                   summed over every place it appears, heaviest total first\n"
    "  --max-memory SIZE  as for stats (labelprof help stats)\n";

static const char diff_usage[] =
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

static const char folded_usage[] =
    "usage: labelprof folded [--cpu] [--strict] [--max-memory SIZE] FILE\n"
    "\n"
    "Folded stacks weighted by self time in nanoseconds, one line per distinct\n"
    "stack (main;matmul;kernel 123456): the input of flamegraph.pl, inferno,\n"
    "speedscope and Pyroscope. ';' in a label becomes ':'.\n"
    "\n"
    "  --cpu              CPU time: the cpu sample type of a pprof profile, or a\n"
    "                     folded file's weights; other inputs are refused\n"
    "  --max-memory SIZE  as for stats (labelprof help stats)\n";

static const char pprof_usage[] =
    "usage: labelprof pprof [--strict] [--max-memory SIZE] FILE > profile.pb.gz\n"
    "\n"
    "The timeline as pprof's profile.proto, gzipped, for go tool pprof,\n"
    "speedscope, Pyroscope, Parca and Grafana: one sample per thread and call\n"
    "path, with the number of scopes on it (samples) and its self time (wall,\n"
    "nanoseconds), labelled thread and thread_id.\n"
    "\n"
    "  --max-memory SIZE  as for stats (labelprof help stats)\n";

static const char flamegraph_usage[] =
    "usage: labelprof flamegraph [--cpu] [--title TEXT] [--strict] [--max-memory SIZE] FILE > graph.svg\n"
    "       labelprof flamegraph --diff [--cpu] [--title TEXT] BASE NEW > diff.svg\n"
    "\n"
    "The tree of time of a timeline or a profile, all threads merged by label,\n"
    "as one self-contained SVG flame graph: each label above its parent, as wide\n"
    "as its total time; click a frame to zoom, Search to highlight labels, Reset\n"
    "zoom. Colours are stable per label; siblings narrower than a pixel are\n"
    "merged. FILE may be JSON, systrace, Perfetto, folded stacks or pprof.\n"
    "\n"
    "  --cpu              CPU time: the cpu sample type of a pprof profile, or a\n"
    "                     folded file's weights; other inputs are refused\n"
    "  --diff BASE NEW    frames sized by NEW and coloured by their change from\n"
    "                     BASE: red grew, blue shrank, white the same, full colour\n"
    "                     at 100% or more (and for frames not in BASE)\n"
    "  --title TEXT       the caption (default: labelprof flame graph, or the\n"
    "                     change of the total with --diff)\n"
    "  --max-memory SIZE  as for stats (labelprof help stats)\n";

static const char nnapi_usage[] =
    "usage: labelprof nnapi [--total-times] [--per-execution] [--json] [--max-memory SIZE] FILE\n"
    "\n"
    "NNAPI's timing summary of a systrace capture: time per layer (application,\n"
    "runtime, IPC, driver, CPU) and phase (initialization, preparation,\n"
    "compilation, execution with its I/O, compute and results, termination), as\n"
    "Android's parse_systrace.py prints it, byte for byte, its quirks included.\n"
    "A table per run; a run starts at each [NN_LA_PO] mark.\n"
    "\n"
    "  --total-times    total times instead of self times (a layer's self time is\n"
    "                   its total minus the nearest lower layer's)\n"
    "  --per-execution  the execution columns only, divided by the number of\n"
    "                   executions (of the benchmark when it has warmup and benchmark)\n"
    "  --json           the numbers as JSON, one object per run in a list\n"
    "  --max-memory SIZE\n"
    "                   the most memory the longest line, the threads and a run's\n"
    "                   call trees may take together (as for stats: 512M, 2G,\n"
    "                   1GiB or none; the default is 1G)\n"
    "\n"
    "FILE is the systrace viewer's HTML or ftrace text: Android's header, Linux 5's\n"
    "(with or without TGID), trace-cmd report output; - is standard input. A FIFO\n"
    "or a pipe is read too, and any of them may be gzip-compressed. The input is\n"
    "streamed, twice.\n"
    "\"No NNAPI Runtime trace present\" and \"Incomplete trace\" go to stderr, as\n"
    "Android's parser writes them.\n"
    "\n"
    "Exit status: 0; 1 where Android's parser fails (a nesting violation, an\n"
    "unmatched end, a warmup without a benchmark, an unreadable mark line), with\n"
    "a message naming the line and the rule; 2 when FILE cannot be read or needs\n"
    "more than --max-memory.\n";

static const char layers_usage[] =
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

static const char top_usage[] =
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

static const char record_usage[] =
    "usage: labelprof record -p PID [-d SECONDS] [--hz HZ] -o FILE.json\n"
    "\n"
    "A sampled timeline of a running process that uses labelprof, however it\n"
    "was started, read from outside it as labelprof top reads it, written as\n"
    "Chrome Trace Event JSON (the Perfetto UI, chrome://tracing, speedscope and\n"
    "every labelprof subcommand read it). The threads' pseudo-stacks are\n"
    "sampled HZ times a second (default 10000) for SECONDS (default 10); each\n"
    "change between two samples is written as the ends and begins it implies,\n"
    "at the midpoint between them. So an edge is within half a period of the\n"
    "truth, a scope shorter than a period may be missing, and calls are runs\n"
    "of samples, not calls. For every begin and end with its own timestamp the\n"
    "process must record itself: start it with LABELPROF_TRACE (and\n"
    "LABELPROF_DUMP_SIGNAL to get the file while it runs).\n"
    "\n"
    "  -p PID        the process\n"
    "  -d SECONDS    how long (0.01 to 86400; default 10)\n"
    "  --hz HZ       samples per second, 1 to 100000 (default 10000)\n"
    "  -o FILE       the JSON file; - is standard output\n"
    "\n"
    "Exit status: 0; 2 when the process cannot be read, the file cannot be\n"
    "written, or the process exits before the end (the file then holds the\n"
    "timeline until then, complete and valid).\n";

static const char help_usage[] =
    "usage: labelprof help [SUBCOMMAND]\n"
    "\n"
    "Lists the subcommands, or prints the usage of one.\n";

const lp_cmd_t lp_cmds[] = {
    {"stats", lp_cmd_stats, "statistics per label: calls, total, self, percentiles", stats_usage},
    {"tree", lp_cmd_tree, "the tree of time, in the layout of the sampled profile", tree_usage},
    {"diff", lp_cmd_diff, "compare two traces label by label; a regression gate", diff_usage},
    {"folded", lp_cmd_folded, "folded stacks weighted by self time, for flame graphs", folded_usage},
    {"flamegraph", lp_cmd_flamegraph, "the tree of time as an SVG flame graph", flamegraph_usage},
    {"pprof", lp_cmd_pprof, "the timeline as a pprof profile (gzipped profile.proto)", pprof_usage},
    {"nnapi", lp_cmd_nnapi, "NNAPI's timing summary of a systrace, as Android's parser prints it", nnapi_usage},
    {"layers", lp_cmd_layers, "time per layer and phase (LP_SCOPE_PHASE) as a table", layers_usage},
    {"top", lp_cmd_top, "a running process's tree, live, read from outside it", top_usage},
    {"record", lp_cmd_record, "a running process's sampled timeline, as JSON, read from outside it", record_usage},
    {"help", lp_cmd_help, "list the subcommands, or show one's usage", help_usage},
    {NULL, NULL, NULL, NULL},
};

const lp_cmd_t *lp_cmd_find(const char *name) {
  for (const lp_cmd_t *c = lp_cmds; c->name; c++)
    if (strcmp(c->name, name) == 0) return c;
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

int lp_opt_value(const char *cmd, int argc, char **argv, int *i, const char *name, const char **value) {
  size_t n = strlen(name);
  const char *a = argv[*i];
  if (strncmp(a, name, n) != 0) return 0;
  if (a[n] == '=') {
    *value = a + n + 1;
    return 1;
  }
  if (a[n] != '\0') return 0;
  if (*i + 1 >= argc) {
    lp_usage_error(cmd, "%s needs a value", name);
    return -1;
  }
  *value = argv[++*i];
  return 1;
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
  for (const lp_cmd_t *c = lp_cmds; c->name; c++) fprintf(out, "  %-8s %s\n", c->name, c->summary);
  fputs("\nExit status: 0; 1 when a check failed (diff --fail-above; nnapi, layers: a\n"
        "nesting rule); 2 for bad input or usage.\n",
        out);
}

int lp_cmd_help(int argc, char **argv) {
  if (argc > 2) return lp_usage_error("help", "one subcommand at most");
  if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    lp_cmd_usage("help", stdout);
    return LP_EXIT_OK;
  }
  if (argc == 2) {
    const lp_cmd_t *c = lp_cmd_find(argv[1]);
    if (!c) {
      fprintf(stderr, "labelprof help: no subcommand '%s'\n", argv[1]);
      lp_overview(stderr);
      return LP_EXIT_BAD;
    }
    fputs(c->usage, stdout);
    return LP_EXIT_OK;
  }
  lp_overview(stdout);
  return LP_EXIT_OK;
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
  int status = c->entry(argc - 1, argv + 1);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    perror("labelprof: writing the output");
    return LP_EXIT_BAD;
  }
  return status;
}
