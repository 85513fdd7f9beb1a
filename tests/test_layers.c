/*
 * test_layers.c: layers and phases. The macros (switch, subtract,
 * unspecified phase), the JSON's category and args, the systrace text
 * (exact for a small session), its write failures, LABELPROF_SYSTRACE and
 * LABELPROF_TRACE_MARKER through child processes (a plain file, and the
 * kernel's trace_marker when tracefs can be used), and the contract's cases
 * through tests/layers_contract.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "runner.h"
#include "trace_json.h"

static const char *dir;
static char path[256], spath[256];
static char env_child[4096], contract[4096];

static uint64_t my_tid(void) { return (uint64_t)syscall(SYS_gettid); }

static json_t *written_json(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(path, "test_layers"), 0);
  json_t *root = trace_load(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  const char *bad = trace_check_lanes(trace_events(root));
  if (bad) printf("\n    %s ", bad);
  CU_ASSERT_PTR_NULL(bad);
  return root;
}

/*
 * The systrace file's event lines with the timestamp replaced by "T" (the
 * rest is exact), and the header checked. Returns a malloc'd string.
 */
static char *systrace_events(const char *file, int *header_ok) {
  char *text = lp_test_slurp(file);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  size_t cap = strlen(text) + 1, n = 0;
  char *out = malloc(cap);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  *header_ok = strncmp(text, "# tracer: nop\n", 14) == 0 &&
               strstr(text, "\n#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n"
                            "#              | |        |      |   ||||       |         |\n") != NULL;
  double last = 0;
  for (char *line = text, *next; *line; line = next) {
    char *nl = strchr(line, '\n');
    next = nl ? nl + 1 : line + strlen(line);
    if (line[0] == '#') continue;
    char *colon = strstr(line, ": tracing_mark_write: ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(colon);
    char *ts = colon;
    while (ts > line && ts[-1] != ' ') ts--;
    /*
     * Seconds '.' six digits, non-decreasing. The kernel pads the seconds to
     * five columns ("%5lu.%06lu"), so before 10,000 s of uptime spaces
     * stand in front of the number: they belong to the timestamp, which the
     * normalised line replaces whole.
     */
    char *field = ts;
    while (field - 1 > line && field[-2] == ' ') field--;
    CU_ASSERT_EQUAL(colon - field >= 12 && colon - ts >= 8 && colon[-7] == '.', 1);
    double t = strtod(ts, NULL);
    CU_ASSERT(t >= last);
    last = t;
    size_t head = (size_t)(field - line);
    memcpy(out + n, line, head);
    n += head;
    out[n++] = 'T';
    size_t tail = (size_t)(next - colon);
    memcpy(out + n, colon, tail);
    n += tail;
  }
  out[n] = '\0';
  free(text);
  return out;
}

/* "%16s-%-5d (%5d) [000] ...1 T: tracing_mark_write: " for this process, then mark. */
static void expect_line(char *buf, size_t size, const char *task16, uint64_t tid, const char *mark) {
  size_t n = strlen(buf);
  snprintf(buf + n, size - n, "%s-%-5llu (%5d) [000] ...1 T: tracing_mark_write: %s\n", task16,
           (unsigned long long)tid, (int)getpid(), mark);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

static int dir_entries(const char *d) {
  int n = 0;
  DIR *dp = opendir(d);
  if (!dp) return -1;
  for (struct dirent *e; (e = readdir(dp));) n += e->d_name[0] != '.';
  closedir(dp);
  return n;
}

/* ---- names and sites ---------------------------------------------------------- */

/* Runs first: nothing to write before any timeline. */
static void test_layers_systrace_needs_a_timeline(void) {
  CU_ASSERT_EQUAL(lp_trace_write_systrace(spath), -EINVAL);
  CU_ASSERT_EQUAL(lp_trace_write_systrace(NULL), -EINVAL);
  struct stat st;
  CU_ASSERT_NOT_EQUAL(stat(spath, &st), 0);
}

static void test_layers_names_and_tags(void) {
  static const char *const layers[] = {"application", "runtime", "ipc", "driver", "cpu", "utility"};
  static const char *const ltags[] = {"LA", "LR", "LI", "LD", "LC", "LU"};
  static const int lv[] = {LP_LAYER_APPLICATION, LP_LAYER_RUNTIME, LP_LAYER_IPC,
                           LP_LAYER_DRIVER,      LP_LAYER_CPU,     LP_LAYER_UTILITY};
  static const char *const phases[] = {"unspecified", "initialization", "preparation", "compilation", "execution",
                                       "io", "transformation", "computation", "results", "termination",
                                       "overall", "warmup", "benchmark"};
  static const char *const ptags[] = {"PU", "PI", "PP", "PC", "PE", "PIO", "PTR", "PCO", "PR", "PT", "PO", "PWU", "PBM"};
  static const int pv[] = {LP_PHASE_UNSPECIFIED, LP_PHASE_INITIALIZATION, LP_PHASE_PREPARATION, LP_PHASE_COMPILATION,
                           LP_PHASE_EXECUTION,   LP_PHASE_IO,             LP_PHASE_TRANSFORMATION,
                           LP_PHASE_COMPUTATION, LP_PHASE_RESULTS,        LP_PHASE_TERMINATION,
                           LP_PHASE_OVERALL,     LP_PHASE_WARMUP,         LP_PHASE_BENCHMARK};
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_STRING_EQUAL(lp_layer_name(lv[i]), layers[i]);
    CU_ASSERT_STRING_EQUAL(lp__layer_tag(lv[i]), ltags[i]);
  }
  for (int i = 0; i < 13; i++) {
    CU_ASSERT_STRING_EQUAL(lp_phase_name(pv[i]), phases[i]);
    CU_ASSERT_STRING_EQUAL(lp__phase_tag(pv[i]), ptags[i]);
  }
  CU_ASSERT_PTR_NULL(lp_layer_name(LP_LAYER_NONE));
  CU_ASSERT_PTR_NULL(lp_layer_name(7));
  CU_ASSERT_PTR_NULL(lp_layer_name(-1));
  CU_ASSERT_PTR_NULL(lp_phase_name(13));
  CU_ASSERT_PTR_NULL(lp_phase_name(-1));
  /* Tags of whole sites, with the mode's prefix. */
  static const lp_site_t sw = {"f", "", "", 0, LP_LEVEL_RUNTIME, LP_LAYER_CPU, LP_PHASE_COMPUTATION, LP_MODE_SWITCH, 0};
  static const lp_site_t sub = {"f", "", "", 0, LP_LEVEL_RUNTIME, LP_LAYER_RUNTIME, LP_PHASE_COMPILATION,
                                LP_MODE_SUBTRACT, 0};
  static const lp_site_t wide = {"f", "", "", 0, LP_LEVEL_RUNTIME, LP_LAYER_APPLICATION, LP_PHASE_WARMUP,
                                 LP_MODE_SUBTRACT, 0};
  static const lp_site_t plain = {"f", "", "", 0, LP_LEVEL_RUNTIME, 0, 0, 0, 0};
  char buf[LP__TAG_MAX + 1];
  size_t n = lp__site_tag(&sw, buf, sizeof buf);
  buf[n] = '\0';
  CU_ASSERT_STRING_EQUAL(buf, "[SW][NN_LC_PCO]");
  n = lp__site_tag(&sub, buf, sizeof buf);
  buf[n] = '\0';
  CU_ASSERT_STRING_EQUAL(buf, "[SUB][NN_LR_PC]");
  n = lp__site_tag(&wide, buf, sizeof buf);
  buf[n] = '\0';
  CU_ASSERT_STRING_EQUAL(buf, "[SUB][NN_LA_PWU]");
  CU_ASSERT_EQUAL(lp__site_tag(&plain, buf, sizeof buf), 0);
}

/* ---- the macros ------------------------------------------------------------------- */

static const lp_site_t *top_of_stack(uint32_t *depth) {
  const lp_site_t *frames[LP_STACK_CAPACITY];
  uint64_t word = 0;
  lp__thread_t *t = lp__thread_current();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL_FATAL(lp__stack_snapshot(t, 0, frames, depth, &word), 1);
  return *depth ? frames[*depth - 1] : NULL;
}

static uint64_t mismatches(void) {
  lp__thread_t *t = lp__thread_current();
  return t ? atomic_load(&t->mismatched) + atomic_load(&t->unmatched) : 0;
}

/* A switch replaces the innermost label in the pseudo-stack (the sampled tree), whether or not it is recorded. */
static void switch_on_the_stack(void) {
  uint32_t d0, d;
  { LP_SCOPE("warm up the thread"); }
  (void)top_of_stack(&d0);
  uint64_t m0 = mismatches();
  {
    LP_SCOPE("outer");
    {
      LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_TRANSFORMATION, "transform");
      const lp_site_t *top = top_of_stack(&d);
      CU_ASSERT_EQUAL(d, d0 + 2);
      CU_ASSERT_STRING_EQUAL(top->label, "transform");
      LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "compute");
      top = top_of_stack(&d);
      CU_ASSERT_EQUAL(d, d0 + 2);
      CU_ASSERT_STRING_EQUAL(top->label, "compute");
      CU_ASSERT_EQUAL(top->mode, LP_MODE_SWITCH);
      {
        LP_SCOPE("inside the switch");
        top = top_of_stack(&d);
        CU_ASSERT_EQUAL(d, d0 + 3);
      }
      LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_RESULTS, "results");
      top = top_of_stack(&d);
      CU_ASSERT_EQUAL(d, d0 + 2);
      CU_ASSERT_STRING_EQUAL(top->label, "results");
    }
    const lp_site_t *top = top_of_stack(&d);
    CU_ASSERT_EQUAL(d, d0 + 1);
    CU_ASSERT_STRING_EQUAL(top->label, "outer");
  }
  (void)top_of_stack(&d);
  CU_ASSERT_EQUAL(d, d0);
  CU_ASSERT_EQUAL(mismatches(), m0); /* a switch is no mistake */
}

static void test_layers_switch_replaces_the_innermost_label(void) {
  switch_on_the_stack(); /* nothing recording */
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  switch_on_the_stack(); /* recording */
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written_json();
  json_t *ev = trace_events(root);
  json_t *tr = trace_find(ev, "X", "transform"), *co = trace_find(ev, "X", "compute"), *re = trace_find(ev, "X", "results");
  json_t *outer = trace_find(ev, "X", "outer"), *in = trace_find(ev, "X", "inside the switch");
  CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(co);
  CU_ASSERT_PTR_NOT_NULL_FATAL(re);
  CU_ASSERT_PTR_NOT_NULL_FATAL(outer);
  CU_ASSERT_PTR_NOT_NULL_FATAL(in);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "transform") + trace_count(ev, "X", "compute"), 2);
  /* Siblings one after the other, inside "outer"; the label inside the switch is inside "compute". */
  CU_ASSERT(ev_ns(tr, "ts") + ev_ns(tr, "dur") <= ev_ns(co, "ts"));
  CU_ASSERT(ev_ns(co, "ts") + ev_ns(co, "dur") <= ev_ns(re, "ts"));
  CU_ASSERT(ev_ns(outer, "ts") < ev_ns(tr, "ts"));
  CU_ASSERT(ev_ns(re, "ts") + ev_ns(re, "dur") <= ev_ns(outer, "ts") + ev_ns(outer, "dur"));
  CU_ASSERT(ev_ns(in, "ts") >= ev_ns(co, "ts") && ev_ns(in, "ts") + ev_ns(in, "dur") <= ev_ns(co, "ts") + ev_ns(co, "dur"));
  CU_ASSERT_STRING_EQUAL(ev_str(json_object_get(co, "args"), "mode"), "switch");
  CU_ASSERT_PTR_NULL(json_object_get(json_object_get(tr, "args"), "mode"));
  json_decref(root);
}

/* JSON: "cat":"<layer>,<phase>", args with layer and phase (and mode); plain labels as before. */
static void test_layers_json_category_and_args(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  {
    LP_SCOPE("plain label");
    LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_PREPARATION, "prepare");
    {
      LP_SCOPE_SUBTRACT(LP_LAYER_IPC, LP_PHASE_COMPILATION, "subtracted");
    }
    {
      LP_SCOPE_PHASE(LP_LAYER_UTILITY, LP_PHASE_UNSPECIFIED, "utility");
    }
    {
      LP_SCOPE_PHASE(LP_LAYER_APPLICATION, LP_PHASE_BENCHMARK, "bench");
    }
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written_json();
  json_t *ev = trace_events(root);
  struct {
    const char *name, *cat, *layer, *phase, *mode;
  } want[] = {{"prepare", "runtime,preparation", "runtime", "preparation", NULL},
              {"subtracted", "ipc,compilation", "ipc", "compilation", "subtract"},
              {"utility", "utility,unspecified", "utility", "unspecified", NULL},
              {"bench", "application,benchmark", "application", "benchmark", NULL}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    json_t *e = trace_find(ev, "X", want[i].name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_STRING_EQUAL(ev_str(e, "cat"), want[i].cat);
    json_t *args = json_object_get(e, "args");
    CU_ASSERT_EQUAL(json_object_size(args), want[i].mode ? 3u : 2u);
    CU_ASSERT_STRING_EQUAL(ev_str(args, "layer"), want[i].layer);
    CU_ASSERT_STRING_EQUAL(ev_str(args, "phase"), want[i].phase);
    if (want[i].mode) CU_ASSERT_STRING_EQUAL(ev_str(args, "mode"), want[i].mode);
  }
  json_t *plain = trace_find(ev, "X", "plain label");
  CU_ASSERT_PTR_NOT_NULL_FATAL(plain);
  CU_ASSERT_STRING_EQUAL(ev_str(plain, "cat"), "runtime");
  CU_ASSERT_PTR_NULL(json_object_get(plain, "args"));
  json_decref(root);
}

/* A scope left open when the file is written: "B" with the layer's args; one made up at the start is "truncated" too. */
static void test_layers_json_open_and_made_up_scopes_keep_their_args(void) {
  CU_ASSERT_EQUAL_FATAL(lp__trace_start(LP__ENV, NULL), 0); /* the environment's timeline records its begin */
  {
    LP_SCOPE_PHASE(LP_LAYER_DRIVER, LP_PHASE_EXECUTION, "began before");
    CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
    { LP_SCOPE("inside"); }
  }
  {
    LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_IO, "still open");
    json_t *root = written_json();
    json_t *ev = trace_events(root);
    json_t *made = trace_find(ev, "X", "began before"), *open = trace_find(ev, "B", "still open");
    CU_ASSERT_PTR_NOT_NULL_FATAL(made);
    CU_ASSERT_PTR_NOT_NULL_FATAL(open);
    json_t *a = json_object_get(made, "args");
    CU_ASSERT_STRING_EQUAL(ev_str(a, "layer"), "driver");
    CU_ASSERT_STRING_EQUAL(ev_str(a, "phase"), "execution");
    CU_ASSERT(json_is_true(json_object_get(a, "truncated")));
    CU_ASSERT_STRING_EQUAL(ev_str(open, "cat"), "cpu,io");
    CU_ASSERT_STRING_EQUAL(ev_str(json_object_get(open, "args"), "phase"), "io");
    json_decref(root);
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp__trace_stop(LP__ENV), 0);
}

/* ---- systrace -------------------------------------------------------------------------- */

typedef struct worker_arg {
  const char *name; /* NULL: leave the thread's name */
  void (*fn)(void);
  uint64_t tid;
} worker_arg_t;

static void *worker(void *p) {
  worker_arg_t *a = p;
  a->tid = my_tid();
  if (a->name) CU_ASSERT_EQUAL(lp_thread_set_name(a->name), 0);
  a->fn();
  return NULL;
}

static void run_worker(worker_arg_t *a) {
  pthread_t th;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, worker, a), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_join(th, NULL), 0);
}

/* The collector samples a thread that switches all the time: both labels show up, as siblings, and nothing is a mistake. */
static volatile unsigned long sink;

static void switching_loop(void) {
  /* At least this many, and for at least 100 ms (more under emulation): the collector must see it, however busy the machine. */
  long n = LP_TEST_SANITIZED ? 20000 : 400000;
  uint64_t until = lp_now_ns() + 100000000ull * lp_test_slow();
  for (long i = 0; i < n || (i % 1024 != 0 || lp_now_ns() < until); i++) {
    LP_SCOPE("frame");
    LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_TRANSFORMATION, "transform");
    for (int k = 0; k < 50; k++) sink += (unsigned long)k;
    LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "compute");
    for (int k = 0; k < 50; k++) sink += (unsigned long)k;
  }
}

static void test_layers_switch_under_the_collector(void) {
  lp_profile_opts_t o = {.hz = 10000};
  worker_arg_t a = {"switcher", switching_loop, 0};
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(lp_profile_start(&o), 0);
  run_worker(&a);
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  lp_profile_stats_t st;
  CU_ASSERT_EQUAL(lp_profile_get_stats(p, &st), 0);
  CU_ASSERT_EQUAL(st.mismatched, 0);
  CU_ASSERT_EQUAL(st.unmatched, 0);
  const lp_node_t *frame = lp_node_find(lp_profile_root(p), "frame");
  CU_ASSERT_PTR_NOT_NULL(frame);
  if (!frame) {
    lp_profile_free(p);
    return;
  }
  const lp_node_t *tr = lp_node_find(frame, "transform"), *co = lp_node_find(frame, "compute");
  CU_ASSERT_PTR_NOT_NULL(tr);
  CU_ASSERT_PTR_NOT_NULL(co);
  /* never one inside the other */
  if (tr) CU_ASSERT_PTR_NULL(lp_node_find(tr, "compute"));
  if (co) CU_ASSERT_PTR_NULL(lp_node_find(co, "transform"));
  lp_profile_free(p);
}

static void first_thread_work(void) {
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_PREPARATION, "prepare");
  {
    LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_INITIALIZATION, "init once");
  }
  {
    LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_TRANSFORMATION, "op");
    LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "op");
    LP_SCOPE("plain | with a bar");
  }
  {
    LP_SCOPE_SUBTRACT(LP_LAYER_IPC, LP_PHASE_COMPILATION, "sub");
  }
}

static void second_thread_work(void) {
  LP_SCOPE_PHASE(LP_LAYER_UTILITY, LP_PHASE_UNSPECIFIED, "util\nline");
}

static void third_thread_work(void) {
  LP_SCOPE_L(LP_LEVEL_DEBUG, "not recorded"); /* so the switch replaces nothing that is written */
  LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_RESULTS, "results");
}

/* The whole text, exactly (times aside): task names cut to 15 bytes, pids, tids, tags, switch ends. */
static void test_layers_systrace_exact(void) {
  worker_arg_t a = {"a thread name longer than 15", first_thread_work, 0};
  worker_arg_t b = {"x", second_thread_work, 0};
  worker_arg_t c = {"tab\there", third_thread_work, 0};
  lp_trace_opts_t o = {.levels = LP_LEVEL_STANDARD};
  uint64_t t0 = lp_now_ns();
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  run_worker(&a);
  run_worker(&b);
  run_worker(&c);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  uint64_t t1 = lp_now_ns();
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_systrace(spath), 0);
  int header_ok = 0;
  char *got = systrace_events(spath, &header_ok);
  CU_ASSERT(header_ok);
  char want[4096] = "";
  const char *ta = " a thread name l", *tb = "              x ", *tc = "        tab?here";
  char m[256];
  int pid = (int)getpid();
#define MARK(fmt, ...) (snprintf(m, sizeof m, fmt, __VA_ARGS__), m)
  expect_line(want, sizeof want, ta, a.tid, MARK("B|%d|[NN_LR_PP]prepare", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("B|%d|[NN_LR_PI]init once", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("E|%d", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("B|%d|[NN_LC_PTR]op", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("B|%d|[SW][NN_LC_PCO]op", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("B|%d|plain | with a bar", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("E|%d", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("E|%d", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("E|%d", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("B|%d|[SUB][NN_LI_PC]sub", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("E|%d", pid));
  expect_line(want, sizeof want, ta, a.tid, MARK("E|%d", pid));
  expect_line(want, sizeof want, tb, b.tid, MARK("B|%d|[NN_LU_PU]util?line", pid));
  expect_line(want, sizeof want, tb, b.tid, MARK("E|%d", pid));
  expect_line(want, sizeof want, tc, c.tid, MARK("B|%d|[NN_LC_PR]results", pid));
  expect_line(want, sizeof want, tc, c.tid, MARK("E|%d", pid));
#undef MARK
  if (strcmp(got, want) != 0) printf("\n--- got:\n%s--- want:\n%s", got, want);
  CU_ASSERT_STRING_EQUAL(got, want);
  /* Times: CLOCK_MONOTONIC seconds, within the session. */
  char *text = lp_test_slurp(spath);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  char *first = strstr(text, "...1 ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(first);
  double ts = strtod(first + 5, NULL);
  CU_ASSERT(ts >= (double)(t0 / 1000) / 1e6 && ts <= (double)t1 / 1e9);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "# entries-in-buffer/entries-written: 16/16 "));
  free(text);
  free(got);
}

/* A switch with nothing open is a plain scope; one that ends an empty block ends once. */
static void lone_switch(void) { LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "alone"); }

static void test_layers_switch_with_nothing_open(void) {
  uint32_t d0, d;
  worker_arg_t a = {"lone", lone_switch, 0};
  (void)top_of_stack(&d0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  run_worker(&a);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_systrace(spath), 0);
  int header_ok = 0;
  char *got = systrace_events(spath, &header_ok);
  char want[1024] = "", m[64];
  snprintf(m, sizeof m, "B|%d|[NN_LC_PCO]alone", (int)getpid());
  expect_line(want, sizeof want, "            lone", a.tid, m);
  snprintf(m, sizeof m, "E|%d", (int)getpid());
  expect_line(want, sizeof want, "            lone", a.tid, m);
  CU_ASSERT_STRING_EQUAL(got, want);
  free(got);
  lone_switch(); /* here too: the stack comes back to where it was */
  (void)top_of_stack(&d);
  CU_ASSERT_EQUAL(d, d0);
}

/* A scope begun before the window (the environment's timeline recorded its begin) gets a begin made up at its start. */
static void test_layers_systrace_made_up_begins(void) {
  uint64_t tid = my_tid();
  CU_ASSERT_EQUAL_FATAL(lp__trace_start(LP__ENV, NULL), 0);
  {
    LP_SCOPE_PHASE(LP_LAYER_APPLICATION, LP_PHASE_OVERALL, "whole run");
    CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
    {
      LP_SCOPE_PHASE(LP_LAYER_APPLICATION, LP_PHASE_WARMUP, "warmup");
    }
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp__trace_stop(LP__ENV), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_systrace(spath), 0);
  int header_ok = 0;
  char *got = systrace_events(spath, &header_ok);
  char task[17];
  char want[1024] = "", m[64];
  lp__thread_t *t = lp__thread_current();
  snprintf(task, sizeof task, "%16.15s", t->name);
  snprintf(m, sizeof m, "B|%d|[NN_LA_PO]whole run", (int)getpid());
  expect_line(want, sizeof want, task, tid, m);
  snprintf(m, sizeof m, "B|%d|[NN_LA_PWU]warmup", (int)getpid());
  expect_line(want, sizeof want, task, tid, m);
  snprintf(m, sizeof m, "E|%d", (int)getpid());
  expect_line(want, sizeof want, task, tid, m);
  expect_line(want, sizeof want, task, tid, m);
  CU_ASSERT_STRING_EQUAL(got, want);
  free(got);
}

/* Failures leave nothing: the old file stays, no temporary remains (the same output code as the JSON). */
static void test_layers_systrace_write_failures_leave_nothing(void) {
  char sub[160], target[200];
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 5000; i++) {
    LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "fill");
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_write_systrace("/dev/full"), -ENOSPC);
  CU_ASSERT_EQUAL(lp_trace_write_systrace("/nonexistent-dir/trace.systrace"), -ENOENT);
  snprintf(sub, sizeof sub, "%s/sub", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
  snprintf(target, sizeof target, "%s/trace.systrace", sub);
  FILE *f = fopen(target, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("old contents\n", f);
  fclose(f);
  struct rlimit old, small = {4096, 0};
  CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_FSIZE, &old), 0);
  small.rlim_max = old.rlim_max;
  signal(SIGXFSZ, SIG_IGN);
  CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &small), 0);
  int rc = lp_trace_write_systrace(target);
  setrlimit(RLIMIT_FSIZE, &old);
  CU_ASSERT_EQUAL(rc, -EFBIG);
  CU_ASSERT_EQUAL(dir_entries(sub), 1);
  char *text = lp_test_slurp(target);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_STRING_EQUAL(text, "old contents\n");
  free(text);
  CU_ASSERT_EQUAL(lp_trace_write_systrace(target), 0);
  CU_ASSERT_EQUAL(dir_entries(sub), 1);
  text = lp_test_slurp(target);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_EQUAL(count(text, "[NN_LR_PE]fill\n"), 5000);
  CU_ASSERT_EQUAL(count(text, ": tracing_mark_write: E|"), 5000);
  free(text);
  /* A pipe whose reader has gone: -EPIPE, and the process lives on. */
  int p[2];
  CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
  close(p[0]);
  char fdpath[64];
  snprintf(fdpath, sizeof fdpath, "/dev/fd/%d", p[1]);
  CU_ASSERT_EQUAL(lp_trace_write_systrace(fdpath), -EPIPE);
  close(p[1]);
  unlink(target);
  rmdir(sub);
}

/* ---- the environment: child processes ------------------------------------------------ */

typedef lp_test_run_t run_t;

static run_t spawn(const char *prog, char *const argv[], const char *const *vars) {
  return lp_test_run(prog, argv, vars, NULL);
}

static run_t run_layers_child(const char *const *vars) {
  char *argv[] = {env_child, "x", "layers", NULL};
  return spawn(env_child, argv, vars);
}

static void run_free(run_t *r) { lp_test_run_free(r); }

static int exited_ok(const run_t *r) { return WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0; }


/* The marks of the layered thread, in order, as "B|[tag]label" and "E" with the pid checked and dropped. */
static char *marks_of(const char *text, const char *task, int pid) {
  char *out = calloc(1, strlen(text) + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  char bpid[32], epid[32];
  snprintf(bpid, sizeof bpid, "B|%d|", pid);
  snprintf(epid, sizeof epid, "E|%d", pid);
  for (const char *line = text; *line;) {
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    const char *mark = line;
    if (task) { /* a systrace line: only this task's */
      const char *c = strstr(line, ": tracing_mark_write: ");
      if (line[0] == '#' || !c || c > line + len || strncmp(line, task, strlen(task)) != 0) goto next;
      mark = c + 22;
    }
    if (strncmp(mark, bpid, strlen(bpid)) == 0) {
      strcat(out, "B|");
      strncat(out, mark + strlen(bpid), len - (size_t)(mark - line) - strlen(bpid));
      strcat(out, "\n");
    } else if (strncmp(mark, epid, strlen(epid)) == 0 && (size_t)(mark - line) + strlen(epid) == len) {
      strcat(out, "E\n");
    }
  next:
    line += len + (nl != NULL);
  }
  return out;
}

/* What env_child's "layers" thread records (spin()'s plain labels in between). */
static const char layered_marks[] =
    "B|[NN_LR_PP]prepare\n"
    "B|[NN_LC_PTR]convert\n"
    "B|env inner\n"
    "E\n"
    "B|[SW][NN_LC_PCO]convert\n"
    "B|env inner\n"
    "E\n"
    "E\n"
    "E\n"
    "B|[SUB][NN_LR_PC]compile\n"
    "E\n"
    "E\n";

/* Collapses runs of "B|env inner\nE\n" (spin() loops a varying number of times) into one. */
static void squeeze_inner(char *s) {
  const char *pair = "B|env inner\nE\n";
  size_t pl = strlen(pair);
  for (char *at = s; (at = strstr(at, pair)) != NULL; at += pl)
    while (strncmp(at + pl, pair, pl) == 0) memmove(at + pl, at + 2 * pl, strlen(at + 2 * pl) + 1);
}

static void test_layers_env_systrace_at_exit(void) {
  char sys[256], var[300];
  snprintf(sys, sizeof sys, "%s/env.systrace", dir);
  snprintf(var, sizeof var, "LABELPROF_SYSTRACE=%s", sys);
  const char *vars[] = {var, NULL};
  run_t r = run_layers_child(vars);
  CU_ASSERT(exited_ok(&r));
  lp_test_strip_rate_warning(r.err);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  char *text = lp_test_slurp(sys);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_EQUAL(strncmp(text, "# tracer: nop\n", 14), 0);
  /* The child's pid: the TGID of its lines. */
  char *l = strstr(text, " (");
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  int pid = atoi(l + 2);
  CU_ASSERT(pid > 0);
  char *marks = marks_of(text, " layered worker -", pid);
  squeeze_inner(marks);
  CU_ASSERT_STRING_EQUAL(marks, layered_marks);
  /* The main thread's plain labels are there too, without tags. */
  char b[64];
  snprintf(b, sizeof b, "B|%d|env work\n", pid);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, b));
  free(marks);
  free(text);
  unlink(sys);
  run_free(&r);
}

static void test_layers_env_trace_marker_file(void) {
  char mk[160], var[200], js[160], jvar[200];
  snprintf(mk, sizeof mk, "%s/marker", dir);
  snprintf(var, sizeof var, "LABELPROF_TRACE_MARKER=%s", mk);
  snprintf(js, sizeof js, "%s/marker.json", dir);
  snprintf(jvar, sizeof jvar, "LABELPROF_TRACE=%s", js);
  unlink(mk);
  const char *vars[] = {var, jvar, NULL};
  run_t r = run_layers_child(vars);
  CU_ASSERT(exited_ok(&r));
  lp_test_strip_rate_warning(r.err);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  char *text = lp_test_slurp(mk);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  int pid = atoi(text + 2);
  CU_ASSERT(pid > 0);
  /* Every begin has its end; the layered thread's marks are in order with their tags. */
  CU_ASSERT_EQUAL(count(text, "B|"), count(text, "E|"));
  char *marks = marks_of(text, NULL, pid);
  /* The main thread ran first and ended: drop its part, up to the layered thread's first mark. */
  char *from = strstr(marks, "B|[NN_LR_PP]prepare\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(from);
  squeeze_inner(from);
  CU_ASSERT_STRING_EQUAL(from, layered_marks);
  /* The marker does not replace the timeline: the JSON has every scope too. */
  json_t *root = trace_load(js);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "convert"), 2);
  CU_ASSERT_EQUAL((int)trace_count(ev, "X", "env inner") + (int)trace_count(ev, "X", "env work") +
                      (int)trace_count(ev, "X", "env request") + 2 + 2,
                  count(text, "B|"));
  json_decref(root);
  free(marks);
  free(text);
  unlink(mk);
  unlink(js);
  run_free(&r);
}

static void test_layers_env_trace_marker_cannot_open(void) {
  const char *vars[] = {"LABELPROF_TRACE_MARKER=/nonexistent-dir/marker", NULL};
  run_t r = run_layers_child(vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  lp_test_strip_rate_warning(r.err);
  CU_ASSERT_EQUAL(count(r.err, "\n"), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_TRACE_MARKER"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "/nonexistent-dir/marker"));
  run_free(&r);
  /* A typo in the name is caught like any other variable's. */
  const char *typo[] = {"LABELPROF_SYSTRAC=/tmp/x", NULL};
  r = run_layers_child(typo);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "did you mean LABELPROF_SYSTRACE"));
  run_free(&r);
}

/* The kernel's own trace_marker, through a tracefs mounted for the test (as root), else skipped. */
static void test_layers_env_trace_marker_kernel(void) {
  char mnt[160], mk[200], var[240], buf[256];
  snprintf(mnt, sizeof mnt, "%s/tracefs", dir);
  if (geteuid() != 0 || mkdir(mnt, 0700) != 0 || mount("nodev", mnt, "tracefs", 0, NULL) != 0) {
    printf("\n    skipped: tracefs cannot be mounted here (%s) ", geteuid() ? "not root" : strerror(errno));
    rmdir(mnt);
    CU_PASS("skipped");
    return;
  }
  /* Room for the whole run (the default buffer is a few KiB per CPU), given back afterwards. */
  char size_path[200], old_size[64] = "";
  snprintf(size_path, sizeof size_path, "%s/buffer_size_kb", mnt);
  int fd = open(size_path, O_RDWR);
  if (fd >= 0) {
    ssize_t n = read(fd, old_size, sizeof old_size - 1);
    old_size[n > 0 ? n : 0] = '\0';
    old_size[strcspn(old_size, " \n")] = '\0';
    if (lseek(fd, 0, SEEK_SET) != 0 || write(fd, "8192", 4) != 4) old_size[0] = '\0';
    close(fd);
  }
  snprintf(mk, sizeof mk, "%s/tracing_on", mnt);
  fd = open(mk, O_WRONLY);
  bool on = fd >= 0 && write(fd, "1", 1) == 1;
  if (fd >= 0) close(fd);
  snprintf(mk, sizeof mk, "%s/trace", mnt);
  fd = open(mk, O_WRONLY | O_TRUNC); /* empties the ring buffer */
  if (fd >= 0) close(fd);
  snprintf(mk, sizeof mk, "%s/trace_marker", mnt);
  if (!on || access(mk, W_OK) != 0) {
    printf("\n    skipped: tracefs is mounted but its trace_marker is not writable ");
    umount(mnt);
    rmdir(mnt);
    CU_PASS("skipped");
    return;
  }
  snprintf(var, sizeof var, "LABELPROF_TRACE_MARKER=%s", mk);
  const char *vars[] = {var, NULL};
  run_t r = run_layers_child(vars);
  CU_ASSERT(exited_ok(&r));
  lp_test_strip_rate_warning(r.err);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  snprintf(mk, sizeof mk, "%s/trace", mnt);
  char *text = lp_test_slurp(mk);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  /* The kernel's lines: "tracing_mark_write: B|<pid>|[NN_LR_PP]prepare" on the layered thread's task. */
  const char *at = strstr(text, "|[NN_LR_PP]prepare");
  CU_ASSERT_PTR_NOT_NULL(at);
  if (at) {
    const char *bol = at;
    while (bol > text && bol[-1] != '\n') bol--;
    snprintf(buf, sizeof buf, "%.*s", (int)(at - bol), bol);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "tracing_mark_write: B|"));
  }
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "[SW][NN_LC_PCO]convert"));
  CU_ASSERT_EQUAL(count(text, "tracing_mark_write: B|"), count(text, "tracing_mark_write: E|"));
  free(text);
  run_free(&r);
  if (old_size[0] && (fd = open(size_path, O_WRONLY)) >= 0) {
    if (write(fd, old_size, strlen(old_size)) < 0) printf("\n    could not restore buffer_size_kb ");
    close(fd);
  }
  CU_ASSERT_EQUAL(umount(mnt), 0);
  rmdir(mnt);
}

/* ---- the contract's cases -------------------------------------------------------------- */

/* The marks of OUT.systrace (all tasks), after running a case. */
static char *contract_marks(const char *which, char *json_path, size_t json_len) {
  char out[256];
  snprintf(out, sizeof out, "%s/contract-%s", dir, which);
  char unit[16];
  snprintf(unit, sizeof unit, "%u", 2 * lp_test_slow());
  char *argv[] = {contract, (char *)which, out, unit, NULL};
  run_t r = spawn(contract, argv, NULL);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  run_free(&r);
  char sys[300];
  snprintf(sys, sizeof sys, "%s.systrace", out);
  snprintf(json_path, json_len, "%s.json", out);
  char *text = lp_test_slurp(sys);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  /* Every line: "<task>-<tid> (<pid>) ... tracing_mark_write: B|<pid>|..." with the same pid in both places. */
  char *marks = calloc(1, strlen(text) + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(marks);
  for (char *line = text, *next; *line; line = next) {
    char *nl = strchr(line, '\n');
    next = nl ? nl + 1 : line + strlen(line);
    if (line[0] == '#') continue;
    char *open = strstr(line, " (");
    char *c = strstr(line, ": tracing_mark_write: ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(open);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    int tgid = atoi(open + 2);
    c += 22;
    CU_ASSERT_EQUAL(atoi(c + 2), tgid);
    if (c[0] == 'B') {
      char *bar = strchr(c + 2, '|');
      CU_ASSERT_PTR_NOT_NULL_FATAL(bar);
      strcat(marks, "B ");
      strncat(marks, bar + 1, (size_t)(next - bar - 1));
    } else {
      strcat(marks, "E\n");
    }
  }
  free(text);
  unlink(sys);
  return marks;
}

static void check_case(const char *which, const char *want_marks, const char *json_name, const char *json_cat) {
  char js[300];
  char *marks = contract_marks(which, js, sizeof js);
  if (strcmp(marks, want_marks) != 0) printf("\n%s: got\n%s", which, marks);
  CU_ASSERT_STRING_EQUAL(marks, want_marks);
  free(marks);
  json_t *root = trace_load(js);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *e = trace_find(trace_events(root), "X", json_name);
  CU_ASSERT_PTR_NOT_NULL(e);
  if (e) CU_ASSERT_STRING_EQUAL(ev_str(e, "cat"), json_cat);
  json_decref(root);
  unlink(js);
}

static void test_layers_contract_cases(void) {
  check_case("baseline", "B [NN_LR_PP]funcP\nE\n", "funcP", "runtime,preparation");
  check_case("localcall", "B [NN_LA_PP]funcA1\nB [NN_LR_PP]funcR1\nE\nE\n", "funcA1", "application,preparation");
  check_case("switch", "B [NN_LR_PE]funcR\nB [NN_LC_PTR]funcC1\nB [SW][NN_LC_PCO]funcC1\nE\nE\nE\n", "funcC1",
             "cpu,transformation");
  check_case("subphase", "B [NN_LR_PE]funcR2\nB [NN_LC_PCO]funcC2\nE\nE\n", "funcC2", "cpu,computation");
  check_case("detail", "B [NN_LR_PE]funcR3\nB [NN_LR_PE]funcR4\nE\nE\n", "funcR4", "runtime,execution");
  check_case("ipc",
             "B [NN_LI_PC]prepareModel\nB HIDL::IDevice::prepareModel_1_1::client\nE\n"
             "B HIDL::IDevice::prepareModel_1_1::server\nB [NN_LD_PC]SampleDriver::prepareModel\nE\nE\nE\n",
             "prepareModel", "ipc,compilation");
  check_case("subtract", "B [NN_LI_PC]prepareModel\nB [SUB][NN_LR_PC]VersionedIDevice::prepareModel\nE\nE\n",
             "VersionedIDevice::prepareModel", "runtime,compilation");
  check_case("init", "B [NN_LR_PP]funcR5\nB [NN_LR_PI]funcI\nE\nE\n", "funcI", "runtime,initialization");
  check_case("utility", "B [NN_LR_PP]funcR6\nB [NN_LU_PU]funcU\nE\nE\n", "funcU", "utility,unspecified");
}

/* ---- the contract's right-hand column, through labelprof layers and labelprof nnapi ---- */

static char labelprof_cmd[4096];

enum { PI_, PP_, PC_, PE_, PIO_, PTR_, PCO_, PR_, PT_, NPH };
enum { LA_, LR_, LI_, LD_, LC_, NLY };
static const char *const layer_rows[NLY] = {"application", "runtime", "ipc", "driver", "cpu"};
static const char *const nn_layers[NLY] = {"LA", "LR", "LI", "LD", "LC"};
static const char *const nn_phases[NPH] = {"PI", "PP", "PC", "PE", "PIO", "PTR", "PCO", "PR", "PT"};

/* The timestamps (ms) of a systrace file's event lines, in order. */
static int line_times(const char *file, double *t, int max) {
  char *text = lp_test_slurp(file);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  int n = 0;
  for (char *line = text, *next; *line && n < max; line = next) {
    char *nl = strchr(line, '\n');
    next = nl ? nl + 1 : line + strlen(line);
    if (line[0] == '#') continue;
    char *c = strstr(line, ": tracing_mark_write: ");
    if (!c) continue;
    char *ts = c;
    while (ts > line && ts[-1] != ' ') ts--;
    /* seconds and microseconds as integers: no rounding on the way */
    long long sec = strtoll(ts, NULL, 10), us = strtoll(strchr(ts, '.') + 1, NULL, 10);
    t[n++] = (double)(sec * 1000000LL + us) / 1000.0;
  }
  free(text);
  return n;
}

/* Runs a command, its stdout to a file; its exit status, or -1. */
static int run_to(const char *cmd, const char *out) {
  char full[9000];
  snprintf(full, sizeof full, "%.8000s > '%.900s' 2> /dev/null", cmd, out);
  int st = system(full);
  return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* labelprof layers --total-times FILE as a [layer][phase] table of ms ("-" is 0). */
static void layers_table(const char *file, double v[NLY][NPH]) {
  char cmd[8192], out[200];
  snprintf(out, sizeof out, "%s/layers.out", dir);
  snprintf(cmd, sizeof cmd, "'%s' layers --total-times '%s'", labelprof_cmd, file);
  CU_ASSERT_EQUAL_FATAL(run_to(cmd, out), 0);
  char *text = lp_test_slurp(out);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  memset(v, 0, sizeof(double) * NLY * NPH);
  int rows = 0;
  for (int l = 0; l < NLY; l++) {
    char key[32];
    snprintf(key, sizeof key, "\n%s ", layer_rows[l]);
    char *at = strstr(text, key);
    if (!at) continue;
    rows++;
    char *p = at + strlen(key);
    for (int ph = 0; ph < NPH; ph++) {
      while (*p == ' ') p++;
      if (*p == '-' && (p[1] == ' ' || p[1] == '\n')) {
        v[l][ph] = 0;
        p++;
      } else {
        v[l][ph] = strtod(p, &p);
      }
    }
  }
  CU_ASSERT_EQUAL(rows, NLY);
  free(text);
  unlink(out);
}

/* labelprof nnapi --json FILE: the first run's "times" as a [layer][phase] table (null is NaN). */
static int nnapi_table(const char *file, double v[NLY][NPH]) {
  char cmd[8192], out[200];
  snprintf(out, sizeof out, "%s/nnapi.out", dir);
  snprintf(cmd, sizeof cmd, "'%s' nnapi --json '%s'", labelprof_cmd, file);
  int rc = run_to(cmd, out);
  CU_ASSERT_EQUAL(rc, 0);
  json_error_t err;
  json_t *root = json_load_file(out, 0, &err);
  unlink(out);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *run = json_array_get(root, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(run);
  json_t *times = json_object_get(run, "times");
  for (int l = 0; l < NLY; l++)
    for (int ph = 0; ph < NPH; ph++) {
      json_t *x = json_object_get(json_object_get(times, nn_phases[ph]), nn_layers[l]);
      v[l][ph] = json_is_number(x) ? json_number_value(x) : NAN;
    }
  json_decref(root);
  return rc;
}

typedef struct cell {
  int layer, phase;
  double ms;       /* the contract's formula on the file's times */
  double at_least; /* the busy waits' length, in units */
} cell_t;

/*
 * Every cell of the table is the contract's value (to the microseconds the
 * file holds) where it names one, and zero elsewhere; and each value is at
 * least as long as the busy waits inside it.
 */
static void check_layers(const char *which, double v[NLY][NPH], const cell_t *want, int nwant, double unit_ms) {
  for (int l = 0; l < NLY; l++)
    for (int ph = 0; ph < NPH; ph++) {
      double expect = 0, least = 0;
      for (int k = 0; k < nwant; k++)
        if (want[k].layer == l && want[k].phase == ph) {
          expect = want[k].ms;
          least = want[k].at_least * unit_ms;
        }
      if (fabs(v[l][ph] - expect) > 0.0015) printf("\n    %s: %s %s is %.3f, the contract says %.3f ", which, layer_rows[l], nn_phases[ph], v[l][ph], expect);
      CU_ASSERT(fabs(v[l][ph] - expect) <= 0.0015);
      CU_ASSERT(expect >= least);
    }
}

/* The same cells in NNAPI's own summary (only where its NNAPI-specific rules do not apply: not runtime execution). */
static void check_nnapi(const char *which, double v[NLY][NPH], const cell_t *want, int nwant) {
  for (int k = 0; k < nwant; k++) {
    if (want[k].layer == LR_ && want[k].phase == PE_) continue;
    double got = v[want[k].layer][want[k].phase];
    if (!(fabs(got - want[k].ms) <= 0.0015))
      printf("\n    %s (nnapi): %s %s is %.3f, the contract says %.3f ", which, nn_layers[want[k].layer],
             nn_phases[want[k].phase], got, want[k].ms);
    CU_ASSERT(fabs(got - want[k].ms) <= 0.0015);
  }
}

static void test_layers_contract_attribution(void) {
  if (access(labelprof_cmd, X_OK) != 0) {
    printf("\n    skipped: no tools/labelprof in this build ");
    CU_PASS("skipped");
    return;
  }
  double unit = 10.0 * lp_test_slow();
  static const char *const cases[] = {"baseline", "localcall", "switch", "subphase", "detail",
                                      "ipc",      "subtract",  "init",   "utility"};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const char *which = cases[c];
    char out[256], sys[300], unit_text[32];
    snprintf(out, sizeof out, "%s/attr-%s", dir, which);
    snprintf(sys, sizeof sys, "%s.systrace", out);
    snprintf(unit_text, sizeof unit_text, "%g", unit);
    char *argv[] = {contract, (char *)which, out, unit_text, NULL};
    run_t r = spawn(contract, argv, NULL);
    CU_ASSERT(exited_ok(&r));
    run_free(&r);
    double t[16];
    int n = line_times(sys, t, 16);
    cell_t want[4];
    int nw = 0;
#define WANT(l, p, v, least) (want[nw++] = (cell_t){l, p, v, least})
    if (strcmp(which, "baseline") == 0 && n == 2) {
      WANT(LR_, PP_, t[1] - t[0], 2);
    } else if (strcmp(which, "localcall") == 0 && n == 4) {
      WANT(LA_, PP_, t[3] - t[0], 3);
      WANT(LR_, PP_, t[2] - t[1], 2);
    } else if (strcmp(which, "switch") == 0 && n == 6) {
      WANT(LC_, PTR_, t[2] - t[1], 1);
      WANT(LC_, PCO_, t[3] - t[2], 2);
      WANT(LC_, PE_, t[3] - t[1], 3);
      WANT(LR_, PE_, t[5] - t[0], 4);
    } else if (strcmp(which, "subphase") == 0 && n == 4) {
      WANT(LC_, PCO_, t[2] - t[1], 2);
      WANT(LC_, PE_, t[2] - t[1], 2);
      WANT(LR_, PE_, t[3] - t[0], 3);
    } else if (strcmp(which, "detail") == 0 && n == 4) {
      WANT(LR_, PE_, t[3] - t[0], 3);
    } else if (strcmp(which, "ipc") == 0 && n == 8) {
      /* labelprof layers knows labels by their tags: the driver's time is SampleDriver::prepareModel's */
      WANT(LI_, PC_, t[7] - t[0], 3);
      WANT(LD_, PC_, t[5] - t[4], 2);
    } else if (strcmp(which, "subtract") == 0 && n == 4) {
      WANT(LI_, PC_, (t[3] - t[0]) - (t[2] - t[1]), 2);
      WANT(LR_, PC_, t[2] - t[1], 1);
    } else if (strcmp(which, "init") == 0 && n == 4) {
      WANT(LR_, PI_, t[2] - t[1], 1);
      WANT(LR_, PP_, (t[3] - t[0]) - (t[2] - t[1]), 2);
    } else if (strcmp(which, "utility") == 0 && n == 4) {
      WANT(LR_, PP_, t[3] - t[0], 2);
    } else {
      printf("\n    %s: %d lines, not the contract's ", which, n);
      CU_FAIL("unexpected number of lines");
      continue;
    }
#undef WANT
    double v[NLY][NPH];
    layers_table(sys, v);
    check_layers(which, v, want, nw, unit);
    /* AOSP's parser also maps HIDL's marks: the driver's time starts with the server stub's */
    if (strcmp(which, "ipc") == 0) want[1].ms = t[6] - t[3];
    nnapi_table(sys, v);
    check_nnapi(which, v, want, nw);
    if (strcmp(which, "ipc") == 0) want[1].ms = t[5] - t[4];
    unlink(sys);
    snprintf(sys, sizeof sys, "%s.json", out);
    /*
     * The JSON of the same run gives labelprof layers the same table (ipc:
     * only the application's side), to the nanoseconds it keeps: the
     * systrace's times are cut to microseconds, so a formula of four of them
     * may differ by up to 4 us, plus the table's rounding.
     */
    if (strcmp(which, "ipc") != 0) {
      double vj[NLY][NPH];
      layers_table(sys, vj);
      for (int k = 0; k < nw; k++) {
        /* (a switch's JSON ends the replaced scope where its end was recorded, a moment before the new begin) */
        double tol = strcmp(which, "switch") == 0 ? 0.05 * lp_test_slow() : 0.0045;
        double d = fabs(vj[want[k].layer][want[k].phase] - want[k].ms);
        if (d > tol) printf("\n    %s (JSON): %s %s differs by %.4f ms ", which, nn_layers[want[k].layer], nn_phases[want[k].phase], d);
        CU_ASSERT(d <= tol);
      }
    }
    unlink(sys);
  }
}

int main(void) {
  dir = lp_test_tmpdir("layers");
  if (!realpath("tests/env_child", env_child) || !realpath("tests/layers_contract", contract)) {
    fprintf(stderr, "test_layers: run from the build directory (tests/env_child, tests/layers_contract)\n");
    return 2;
  }
  if (!realpath("tools/labelprof", labelprof_cmd)) snprintf(labelprof_cmd, sizeof labelprof_cmd, "tools/labelprof");
  snprintf(path, sizeof path, "%s/trace.json", dir);
  snprintf(spath, sizeof spath, "%s/trace.systrace", dir);
  CU_TestInfo tests[] = {LP_TEST(test_layers_systrace_needs_a_timeline),
                         LP_TEST(test_layers_names_and_tags),
                         LP_TEST(test_layers_switch_replaces_the_innermost_label),
                         LP_TEST(test_layers_json_category_and_args),
                         LP_TEST(test_layers_switch_under_the_collector),
                         LP_TEST(test_layers_json_open_and_made_up_scopes_keep_their_args),
                         LP_TEST(test_layers_systrace_exact),
                         LP_TEST(test_layers_switch_with_nothing_open),
                         LP_TEST(test_layers_systrace_made_up_begins),
                         LP_TEST(test_layers_systrace_write_failures_leave_nothing),
                         LP_TEST(test_layers_env_systrace_at_exit),
                         LP_TEST(test_layers_env_trace_marker_file),
                         LP_TEST(test_layers_env_trace_marker_cannot_open),
                         LP_TEST(test_layers_env_trace_marker_kernel),
                         LP_TEST(test_layers_contract_cases),
                         LP_TEST(test_layers_contract_attribution),
                         CU_TEST_INFO_NULL};
  int rc = lp_test_main("layers", tests);
  unlink(path);
  unlink(spath);
  char p[256];
  snprintf(p, sizeof p, "%s/stdout", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/stderr", dir);
  unlink(p);
  rmdir(dir);
  return rc;
}
