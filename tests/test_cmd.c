/*
 * test_cmd.c: the `labelprof` command, run as users run it (fork and exec of
 * tools/labelprof), on hand-written traces shaped like other producers' with
 * exact expected outputs (tests/data/cmd), on traces this library records
 * here from busy waits of known length, and on every kind of bad input.
 */
#include "config.h"

#include "internal.h" /* lp__profile_start_manual, lp__profile_sample_now */
#include "jsonesc.h"  /* lp__utf8_seq: the UTF-8 decoder the outputs are checked with */
#include "labelprof.h"
#include "pb_write.h"
#include "runner.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#ifndef LP_TEST_DATA
#error "LP_TEST_DATA: the directory of the fixtures"
#endif

static char tool[PATH_MAX];
static const char *dir;

typedef struct run {
  int status; /* exit status; -1 when it did not exit */
  char *out, *err;
} run_t;

/* Runs labelprof with argv (NULL-terminated), stdin from `in` (NULL: /dev/null). */
static run_t run_in(const char *in, const char *const *args) {
  char *argv[32];
  int n = 0;
  argv[n++] = tool;
  for (; args[n - 1] && n < 31; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  lp_test_child_t c = {in, NULL, 0, 1, 0, 0};
  lp_test_run_t t = lp_test_run(tool, argv, NULL, &c);
  run_t r = {lp_test_exit_code(&t), t.out, t.err};
  return r;
}

#define RUN(...) run_in(NULL, (const char *const[]){__VA_ARGS__, NULL})

static void run_free(run_t *r) {
  free(r->out);
  free(r->err);
}

static const char *data(const char *name) {
  static char paths[8][PATH_MAX];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, PATH_MAX, "%s/%s", LP_TEST_DATA, name);
  return p;
}

static const char *tmp(const char *name) {
  static char paths[8][PATH_MAX];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, PATH_MAX, "%s/%s", dir, name);
  return p;
}

static void write_file(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(fwrite(text, 1, len, f), len);
  CU_ASSERT_EQUAL(fclose(f), 0);
}

/* Prints what differs, so a failure says more than "not equal". */
static void expect_text(const char *got, const char *want) {
  if (strcmp(got, want) != 0) fprintf(stderr, "\n--- expected:\n%s--- got:\n%s---\n", want, got);
  CU_ASSERT_STRING_EQUAL(got, want);
}

/* ---- usage ---------------------------------------------------------------------- */

static void test_cmd_help_version_usage(void) {
  run_t r = RUN("--version");
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_STRING_EQUAL(r.out, "labelprof " PACKAGE_VERSION "\n");
  run_free(&r);
  r = RUN("help");
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "  stats "));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "  folded "));
  /* Every subcommand's summary starts in one column, however long its name. */
  const char *list = strstr(r.out, "subcommands:\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(list);
  int column = -1, lines = 0;
  for (const char *l = list + strlen("subcommands:\n"); *l == ' '; l = strchr(l, '\n') + 1) {
    const char *name_end = l + 2 + strcspn(l + 2, " ");
    int at = (int)(name_end + strspn(name_end, " ") - l);
    if (column < 0) column = at;
    CU_ASSERT_EQUAL(at, column);
    lines++;
    if (!strchr(l, '\n')) break;
  }
  CU_ASSERT(lines >= 12);
  run_free(&r);
  const char *subs[] = {"stats", "tree", "diff", "folded"};
  for (size_t i = 0; i < 4; i++) {
    r = RUN("help", subs[i]);
    CU_ASSERT_EQUAL(r.status, 0);
    char want[64];
    snprintf(want, sizeof want, "usage: labelprof %s ", subs[i]);
    CU_ASSERT_EQUAL(strncmp(r.out, want, strlen(want)), 0);
    run_t h = RUN(subs[i], "-h");
    CU_ASSERT_EQUAL(h.status, 0);
    CU_ASSERT_STRING_EQUAL(h.out, r.out);
    run_free(&h);
    run_free(&r);
    r = RUN(subs[i]); /* no file */
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "usage: labelprof"));
    run_free(&r);
  }
  r = RUN("frobnicate");
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "no subcommand 'frobnicate'"));
  run_free(&r);
  r = RUN("stats", "--sort", "speed", data("x_sorted.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--sort takes calls, total, self, mean or max"));
  run_free(&r);
  r = RUN("tree", "--min-percent", "101", data("x_sorted.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  run_free(&r);
}

/* ---- hand-written traces, exact outputs ------------------------------------------ */

/*
 * x_sorted.json: main [0,100] us holds a [10,40] (holding b [15,25]) and a
 * [50,70] (holding a [55,60]). main: self 100 - 30 - 20 = 50. a: three calls
 * (30, 20, 5 us); total 50 (the inner a is inside an a), self 20 + 15 + 5.
 * p50 is the 2nd of 3 durations, 20000 ns, in the histogram's bucket
 * [19968, 20096) whose middle 20032 is reported; p95 and p99 are the 3rd,
 * 30000 (the bucket's middle, 30016, is clamped to the max).
 */
static const char x_csv[] =
    "label,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,self_percent\n"
    "main,1,100000,50000,100000,100000,100000,100000,100000,100000,50.0000\n"
    "a,3,50000,40000,18333,5000,20032,30000,30000,30000,40.0000\n"
    "b,1,10000,10000,10000,10000,10000,10000,10000,10000,10.0000\n";

static const char x_tree[] = "labelprof trace (1 threads, 5 scopes)\n"
                             "100 us traced wall time: the sum over lanes of first to last event\n"
                             "100.00% main\n"
                             "    50.00% a\n"
                             "        10.00% b\n"
                             "        5.00% a\n"
                             "        35.00% other\n"
                             "    50.00% other\n"
                             "0.00% other (outside of any label)\n";

static const char x_folded[] = "main 50000\nmain;a 35000\nmain;a;b 10000\nmain;a;a 5000\n";

static void test_cmd_x_events_exact(void) {
  run_t r = RUN("stats", "--format", "csv", data("x_sorted.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, x_csv);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  run_free(&r);
  r = RUN("tree", data("x_sorted.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, x_tree);
  run_free(&r);
  r = RUN("folded", data("x_sorted.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, x_folded);
  run_free(&r);
  /* --top, --sort */
  r = RUN("stats", "--format", "csv", "--top", "1", "--sort", "calls", data("x_sorted.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, "label,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,self_percent\n"
                     "a,3,50000,40000,18333,5000,20032,30000,30000,30000,40.0000\n");
  run_free(&r);
  /* --min-percent hides a's children (10% and 5%): a then has no "other" line, like the sampled tree */
  r = RUN("tree", "--min-percent", "20", "--counts", data("x_sorted.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, "labelprof trace (1 threads, 5 scopes)\n"
                     "100 us traced wall time: the sum over lanes of first to last event\n"
                     "100.00% main [1 calls, 100.000 us]\n"
                     "    50.00% a [2 calls, 50.000 us]\n"
                     "    50.00% other [50.000 us]\n"
                     "0.00% other (outside of any label) [0.000 us]\n");
  run_free(&r);
}

/* The same scopes written at their ends (children first), the array left without its ']'. */
static void test_cmd_x_at_end_buffered(void) {
  run_t r = RUN("stats", "--format", "csv", data("x_at_end.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, x_csv);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "not in order of their starts"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "buffered"));
  run_free(&r);
  r = RUN("tree", data("x_at_end.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, x_tree);
  run_free(&r);
  r = RUN("folded", data("x_at_end.json"));
  expect_text(r.out, x_folded);
  run_free(&r);
}

/*
 * be_pids.json: the object form, B/E only, fractional microseconds, two
 * pids. Lane (7,70) "io" of process "server": read [1.5,5.5] holds decode
 * [2.0,3.5]; lane (8,80): parse [2.25,4.25], then an instant at 6.25. Each
 * lane spans 4 us: wall 8 us, 2 us of it outside any label (lane 8 after
 * parse). An async event ('b') is skipped and counted.
 */
static void test_cmd_be_pids_exact(void) {
  run_t r = RUN("stats", "--format", "csv", data("be_pids.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, "label,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,self_percent\n"
                     "read,1,4000,2500,4000,4000,4000,4000,4000,4000,31.2500\n"
                     "parse,1,2000,2000,2000,2000,2000,2000,2000,2000,25.0000\n"
                     "decode,1,1500,1500,1500,1500,1500,1500,1500,1500,18.7500\n");
  run_free(&r);
  r = RUN("stats", "--by", "thread", "--format", "csv", data("be_pids.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out,
              "thread,label,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,self_percent\n"
              "\"io (server pid 7, tid 70)\",read,1,4000,2500,4000,4000,4000,4000,4000,4000,62.5000\n"
              "\"io (server pid 7, tid 70)\",decode,1,1500,1500,1500,1500,1500,1500,1500,1500,37.5000\n"
              "\"pid 8, tid 80\",parse,1,2000,2000,2000,2000,2000,2000,2000,2000,50.0000\n");
  run_free(&r);
  r = RUN("tree", data("be_pids.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, "labelprof trace (2 threads, 3 scopes)\n"
                     "8.00 us traced wall time: the sum over lanes of first to last event\n"
                     "50.00% read\n"
                     "    18.75% decode\n"
                     "    31.25% other\n"
                     "25.00% parse\n"
                     "25.00% other (outside of any label)\n"
                     "note: 1 events of other phases (async, flow, ...) skipped\n");
  run_free(&r);
  r = RUN("tree", "--threads", data("be_pids.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, "labelprof trace (2 threads, 3 scopes)\n"
                     "8.00 us traced wall time: the sum over lanes of first to last event\n"
                     "thread 70 \"io\" (0.000 s, 50.00% of all)\n"
                     "100.00% read\n"
                     "    37.50% decode\n"
                     "    62.50% other\n"
                     "0.00% other (outside of any label)\n"
                     "thread 80 \"\" (0.000 s, 50.00% of all)\n"
                     "50.00% parse\n"
                     "50.00% other (outside of any label)\n"
                     "note: 1 events of other phases (async, flow, ...) skipped\n");
  run_free(&r);
  r = RUN("folded", data("be_pids.json"));
  expect_text(r.out, "read 2500\nread;decode 1500\nparse 2000\n(outside of any label) 2000\n");
  run_free(&r);
  /* json: integer nanoseconds, valid JSON */
  r = RUN("stats", "--format", "json", data("be_pids.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  json_error_t je;
  json_t *root = json_loads(r.out, 0, &je);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "wall_ns")), 8000);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "skipped")), 1);
  json_t *labels = json_object_get(root, "labels");
  CU_ASSERT_EQUAL_FATAL(json_array_size(labels), 3);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(labels, 0), "label")), "read");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_array_get(labels, 0), "self_ns")), 2500);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_array_get(labels, 2), "total_ns")), 1500);
  json_decref(root);
  run_free(&r);
}

/* gzip by magic bytes whatever the name, and standard input, compressed or not. */
static void test_cmd_gzip_and_stdin(void) {
  char *plain = lp_test_slurp(data("x_sorted.json"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(plain);
  gzFile gz = gzopen(tmp("trace.data"), "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(gz);
  CU_ASSERT_EQUAL(gzwrite(gz, plain, (unsigned)strlen(plain)), (int)strlen(plain));
  CU_ASSERT_EQUAL(gzclose(gz), Z_OK);
  free(plain);
  run_t r = RUN("stats", "--format", "csv", tmp("trace.data"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, x_csv);
  run_free(&r);
  r = run_in(tmp("trace.data"), (const char *const[]){"folded", "-", NULL});
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, x_folded);
  run_free(&r);
  /* A pipe cannot seek: the out-of-order file needs a second pass, which the copy makes possible. */
  char cmd[PATH_MAX * 3];
  snprintf(cmd, sizeof cmd, "cat '%s' | '%s' folded - > '%s' 2>/dev/null", data("x_at_end.json"), tool,
           tmp("piped"));
  CU_ASSERT_EQUAL(system(cmd), 0);
  char *got = lp_test_slurp(tmp("piped"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(got);
  expect_text(got, x_folded);
  free(got);
}

/* ---- diff ----------------------------------------------------------------------------- */

/* diff_base: work [0,100] holds slow [10,30]; diff_new: slow [10,40]. slow's self grows 50%, work's falls 12.5%. */
static void test_cmd_diff_statuses(void) {
  run_t r = RUN("diff", data("diff_base.json"), data("diff_new.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "+50.0%"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "-12.5%"));
  /* sorted by the size of the change: both changed by 10 us; then by name */
  const char *slow = strstr(r.out, "\nslow "), *work = strstr(r.out, "\nwork ");
  CU_ASSERT(slow && work && slow < work);
  run_free(&r);
  r = RUN("diff", "--fail-above", "40", data("diff_base.json"), data("diff_new.json"));
  CU_ASSERT_EQUAL(r.status, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "FAIL: slow: self time 20.0 us -> 30.0 us (+50.0%)"));
  CU_ASSERT_PTR_NULL(strstr(r.out, "FAIL: work"));
  run_free(&r);
  r = RUN("diff", "--fail-above", "60", data("diff_base.json"), data("diff_new.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "ok: no label's self time grew by more than 60%"));
  run_free(&r);
  /* slow's new self time, 30 us, is under --min-time: not checked */
  r = RUN("diff", "--fail-above", "40", "--min-time", "50us", data("diff_base.json"), data("diff_new.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
  r = RUN("diff", "--fail-above", "40", "--min-time", "31%", data("diff_base.json"), data("diff_new.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
  r = RUN("diff", "--fail-above", "40", "--min-time", "29%", data("diff_base.json"), data("diff_new.json"));
  CU_ASSERT_EQUAL(r.status, 1);
  run_free(&r);
  /* the same file twice passes any gate */
  r = RUN("diff", "--fail-above", "0", data("x_sorted.json"), data("x_at_end.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
  r = RUN("diff", "--fail-above", "10", data("diff_base.json"), tmp("missing.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "missing.json: No such file or directory"));
  run_free(&r);
  r = RUN("diff", "--min-time", "soon", data("diff_base.json"), data("diff_new.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  run_free(&r);
}

/* ---- bad input -------------------------------------------------------------------------- */

typedef struct bad {
  const char *name, *text;
  const char *flag; /* an extra option, or NULL */
  int status;
  const char *message; /* expected in stderr */
} bad_t;

static void test_cmd_bad_input(void) {
  static const bad_t cases[] = {
      {"empty.json", "", NULL, 2, "empty.json:1:1: empty input: expected a trace"},
      {"blank.json", " \n ", NULL, 2, "blank.json:2:2: empty input"},
      {"trunc.json", "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2},{\"ph\":\"X\",\"na", NULL, 2,
       "trunc.json:1:67: unexpected end of input inside an event (expected the event to close with '}')"},
      {"trunc_obj.json", "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2}]", NULL, 2,
       "unexpected end of input inside the trace object (expected '}')"},
      {"type_ts.json", "{\"traceEvents\":[\n{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2},\n{\"ph\":\"X\",\"ts\":\"abc\"}]}",
       NULL, 2, "type_ts.json:3:20: expected a number for \"ts\", found a string"},
      {"type_name.json", "[{\"ph\":\"X\",\"name\":[\"a\"],\"ts\":1,\"dur\":2}]", NULL, 2,
       "type_name.json:1:19: expected a string for \"name\", found an array"},
      {"type_pid.json", "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2,\"pid\":1.5}]", NULL, 2,
       "expected an integer for \"pid\", found 1.5"},
      {"type_ev.json", "[1,2]", NULL, 2, "type_ev.json:1:2: expected an event object in the trace's array, found a number"},
      {"type_te.json", "{\"traceEvents\":{}}", NULL, 2, "expected an array for \"traceEvents\", found an object"},
      {"huge_ts.json", "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1e400,\"dur\":2}]", NULL, 2,
       "expected microseconds for \"ts\" (less than 2^62 ns: at most 4611686018427387.903 either side of 0), found 1e400"},
      {"huge_dur.json", "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":99999999999999999999}]", NULL, 2,
       "found 99999999999999999999"},
      {"neg_dur.json", "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":-2}]", NULL, 2, "neg_dur.json:1:38: a negative \"dur\""},
      {"no_ph.json", "[{\"name\":\"a\",\"ts\":1}]", NULL, 2, "no_ph.json:1:2: an event without \"ph\""},
      {"no_dur.json", "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1}]", NULL, 2, "an \"X\" event without \"dur\""},
      {"no_ts.json", "[{\"ph\":\"B\",\"name\":\"a\"}]", NULL, 2, "a \"B\" event without \"ts\""},
      {"no_events.json", "{\"foo\":1}", NULL, 2, "no \"traceEvents\" array in the trace object"},
      {"garbage.json", "hello world", NULL, 2, "garbage.json:1:1: not a format labelprof reads: a JSON trace starts with"},
      {"garbage2.json", " \n  hello", NULL, 2, "garbage2.json:2:3: not a format labelprof reads"},
      {"trailing.json", "{\"traceEvents\":[]} x", NULL, 2, "invalid JSON (parse error: trailing garbage)"},
      {"badgz.json", "\x1f\x8bxxxxxxxxxxxxxxxxxxxx", NULL, 2, "badgz.json: byte 4: invalid gzip data"},
      {"lone_e.json", "[{\"ph\":\"E\",\"ts\":1},{\"ph\":\"X\",\"name\":\"a\",\"ts\":2,\"dur\":1}]", NULL, 0,
       "lone_e.json:1:2: warning: an \"E\" event with no open \"B\" on its lane: ignored"},
      {"lone_e2.json", "[{\"ph\":\"E\",\"ts\":1},{\"ph\":\"X\",\"name\":\"a\",\"ts\":2,\"dur\":1}]", "--strict", 2,
       "lone_e2.json:1:2: an \"E\" event with no open \"B\" on its lane (pid 0, tid 0)"},
      {"open_b.json", "[{\"ph\":\"B\",\"name\":\"open\",\"ts\":1},\n{\"ph\":\"i\",\"name\":\"t\",\"ts\":10}]", NULL, 0,
       "open_b.json:1:2: warning: a \"B\" event never closed: it ends at its lane's last event"},
      {"open_b2.json", "[{\"ph\":\"B\",\"name\":\"open\",\"ts\":1},\n{\"ph\":\"i\",\"name\":\"t\",\"ts\":10}]", "--strict",
       2, "open_b2.json:1:2: a \"B\" event never closed by an \"E\""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const bad_t *c = &cases[i];
    write_file(tmp(c->name), c->text, strlen(c->text));
    run_t r = c->flag ? RUN("stats", c->flag, tmp(c->name)) : RUN("stats", tmp(c->name));
    if (r.status != c->status || !strstr(r.err, c->message))
      fprintf(stderr, "\n%s: status %d, stderr: %s", c->name, r.status, r.err);
    CU_ASSERT_EQUAL(r.status, c->status);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, c->message));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, tmp(c->name))); /* the file is named */
    run_free(&r);
  }
  /* An open B ends at its lane's last event (the instant at 10 us): 9 us. */
  run_t r = RUN("stats", "--format", "csv", tmp("open_b.json"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nopen,1,9000,9000,"));
  run_free(&r);
  r = RUN("stats", tmp("no-such-file.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "no-such-file.json: No such file or directory"));
  run_free(&r);
  r = RUN("stats", dir);
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "is a directory"));
  run_free(&r);
}

/* The sum of the self_percent column of `stats --format csv` output. */
static double csv_self_sum(const char *out) {
  double sum = 0;
  for (const char *line = strchr(out, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
    const char *comma = strrchr(line + 1, ',');
    const char *eol = strchr(line + 1, '\n');
    if (comma && (!eol || comma < eol)) sum += atof(comma + 1);
  }
  return sum;
}

/* An E earlier than a child's end: the scope ends with its child, self times stay within the wall time. */
static void test_cmd_early_end_clamped(void) {
  const char *files[] = {"fuzz/crash-early-end-selfsum.json", "early_end.txt"};
  for (int i = 0; i < 2; i++) {
    run_t r = RUN("stats", "--format", "csv", data(files[i]));
    CU_ASSERT_EQUAL(r.status, 0);
    double sum = csv_self_sum(r.out);
    if (sum > 100.0001) fprintf(stderr, "\n%s: self shares sum to %.4f%%:\n%s", files[i], sum, r.out);
    CU_ASSERT(sum <= 100.0001);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nb,1,9000,0,")); /* b ends with c, its child, at 10 us */
    const char *w = strstr(r.err, "warning: an \"E\" ends before a scope inside it ends");
    CU_ASSERT_PTR_NOT_NULL(w);
    if (w) CU_ASSERT_PTR_NULL(strstr(w + 1, "warning: an \"E\" ends before")); /* once per file */
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, files[i]));
    run_free(&r);
  }
}

/* Times near ±2^62 ns: refused with their position past the limit, exact spans inside it. */
static void test_cmd_time_limits(void) {
  run_t r = RUN("stats", data("fuzz/crash-span-overflow.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "crash-span-overflow.json:1:64: expected microseconds for \"ts\""));
  run_free(&r);
  r = RUN("stats", "--format", "csv", data("fuzz/widest-span.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nb,1,4611686018427387903,4611686018427387903,"));
  run_free(&r);
  r = RUN("stats", "--format", "json", data("fuzz/widest-span.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\"wall_ns\":9223372036854775806"));
  run_free(&r);
  const char *st = "# tracer: nop\n#\n#           TASK-PID     TGID     CPU#  |||||  TIMESTAMP  FUNCTION\n"
                   "            app-100     (    100) [001] .....    4611686018.427387904: tracing_mark_write: B|100|a\n";
  write_file(tmp("late.txt"), st, strlen(st));
  r = RUN("stats", tmp("late.txt"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "late.txt:4:1: timestamp 4611686018.427387904: too large"));
  run_free(&r);
}

/* Names that differ after a \u0000 stay apart, the NUL shown as \u0000. */
static void test_cmd_nul_in_names(void) {
  run_t r = RUN("stats", "--format", "csv", data("fuzz/nul-names.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, "label,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,self_percent\n"
                     "\\u0000,1,1000,1000,1000,1000,1000,1000,1000,1000,14.2857\n"
                     "a,1,1000,1000,1000,1000,1000,1000,1000,1000,14.2857\n"
                     "a\\u0000b,1,1000,1000,1000,1000,1000,1000,1000,1000,14.2857\n"
                     "a\\u0000c,1,1000,1000,1000,1000,1000,1000,1000,1000,14.2857\n");
  run_free(&r);
}

/* Writes text as one more gzip member at the end of path. */
static void gz_append(const char *path, const char *text) {
  gzFile gz = gzopen(path, "ab");
  CU_ASSERT_PTR_NOT_NULL_FATAL(gz);
  CU_ASSERT_EQUAL(gzwrite(gz, text, (unsigned)strlen(text)), (int)strlen(text));
  CU_ASSERT_EQUAL(gzclose(gz), Z_OK);
}

/* Every member of a multi-member gzip is read, as zcat does; bytes after the last one, or a cut member, are errors. */
static void test_cmd_gzip_members(void) {
  const char *path = tmp("members.gz");
  unlink(path);
  gz_append(path, "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1},\n");
  gz_append(path, "{\"ph\":\"X\",\"name\":\"b\",\"ts\":3,\"dur\":1},\n");
  gz_append(path, "{\"ph\":\"X\",\"name\":\"c\",\"ts\":5,\"dur\":1}]\n");
  run_t r = RUN("stats", "--format", "csv", path);
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\na,1,1000,"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nb,1,1000,"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nc,1,1000,"));
  run_free(&r);
  FILE *f = fopen(path, "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  CU_ASSERT_EQUAL(fclose(f), 0);
  f = fopen(path, "ab");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("trailing", f);
  CU_ASSERT_EQUAL(fclose(f), 0);
  r = RUN("stats", path);
  CU_ASSERT_EQUAL(r.status, 2);
  char want[PATH_MAX + 128];
  snprintf(want, sizeof want, "%s: byte %ld: trailing garbage after the gzip data", path, size);
  if (!strstr(r.err, want)) fprintf(stderr, "\nexpected %s in: %s", want, r.err);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, want));
  run_free(&r);
  CU_ASSERT_EQUAL(truncate(path, size - 4), 0); /* the last member without its size */
  r = RUN("stats", path);
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "unexpected end of the gzip data"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, path));
  run_free(&r);
  unlink(path);
}

/* Past the memory cap: exit 2 naming the file, the position and the cap; under it, the same trace reads. */
static void test_cmd_memory_cap(void) {
  const char *path = tmp("names.json");
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("[", f);
  for (int i = 0; i < 20000; i++)
    fprintf(f, "%s\n{\"ph\":\"X\",\"name\":\"label %d\",\"pid\":1,\"tid\":%d,\"ts\":%d,\"dur\":1}", i ? "," : "", i, i % 50, i);
  fputs("]\n", f);
  CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
  run_t r = RUN("stats", "--max-memory", "1M", path);
  CU_ASSERT_EQUAL(r.status, 2);
  char want[PATH_MAX + 16];
  snprintf(want, sizeof want, "%s:", path);
  const char *at = strstr(r.err, want);
  CU_ASSERT_PTR_NOT_NULL(at);
  if (at) { /* FILE:LINE:COLUMN: past the first line */
    long line = strtol(at + strlen(want), NULL, 10);
    CU_ASSERT(line > 1 && line <= 20001);
  }
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "more than 1 MiB of memory"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--max-memory"));
  CU_ASSERT_STRING_EQUAL(r.out, "");
  run_free(&r);
  const char *others[] = {"tree", "folded"};
  for (int i = 0; i < 2; i++) {
    r = RUN(others[i], "--max-memory=1M", path);
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "more than 1 MiB of memory"));
    run_free(&r);
  }
  r = RUN("stats", "--max-memory", "64M", "--top", "1", path);
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "20000 scopes"));
  run_free(&r);
  r = RUN("stats", "--max-memory", "lots", path);
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--max-memory takes a size"));
  run_free(&r);
}

/* JSON nested absurdly deep, and scopes nested deeper than any program. */
static void test_cmd_bad_depth(void) {
  size_t n = 200000;
  char *deep = malloc(n + 16);
  CU_ASSERT_PTR_NOT_NULL_FATAL(deep);
  memcpy(deep, "{\"a\":", 5);
  memset(deep + 5, '[', n);
  write_file(tmp("deep.json"), deep, n + 5);
  free(deep);
  run_t r = RUN("stats", tmp("deep.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "deep.json:1:1006: JSON nested deeper than 1000 levels"));
  run_free(&r);
  FILE *f = fopen(tmp("deepscope.json"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("[", f);
  for (int i = 0; i < 10001; i++) fprintf(f, "%s\n{\"ph\":\"B\",\"name\":\"r\",\"ts\":%d}", i ? "," : "", i);
  fputs("]", f);
  CU_ASSERT_EQUAL(fclose(f), 0);
  r = RUN("stats", tmp("deepscope.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "deepscope.json:10002:1: scopes nested deeper than 10000"));
  run_free(&r);
  /* The same depth from X events written at their ends, innermost first: found in the buffered pass. */
  f = fopen(tmp("deepx.json"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("[", f);
  for (int i = 10000; i >= 0; i--)
    fprintf(f, "%s\n{\"ph\":\"X\",\"name\":\"r\",\"ts\":%d,\"dur\":%d}", i < 10000 ? "," : "", i, 2 * (10001 - i));
  fputs("]", f);
  CU_ASSERT_EQUAL(fclose(f), 0);
  r = RUN("stats", tmp("deepx.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "deepx.json: byte 2: scopes nested deeper than 10000")); /* the first event */
  run_free(&r);
}

/* ---- traces recorded here ------------------------------------------------------------------ */

static void busy_ns(uint64_t ns) {
  uint64_t end = lp_now_ns() + ns;
  while (lp_now_ns() < end) {
  }
}

static uint64_t rec_outer_ns, rec_inner_ns; /* the outermost call, measured outside and inside its scope */
static void rec(int depth, uint64_t each) {
  uint64_t t0 = lp_now_ns();
  {
    LP_SCOPE("rec");
    uint64_t i0 = lp_now_ns();
    busy_ns(each);
    if (depth > 1) rec(depth - 1, each);
    if (depth == 3) rec_inner_ns = lp_now_ns() - i0;
  }
  if (depth == 3) rec_outer_ns = lp_now_ns() - t0;
}

/*
 * labelprof's JSON writes "ts" relative to otherData.ts_base_ns; files
 * written before did not, and carry CLOCK_MONOTONIC itself. The same trace
 * in both forms reads the same: the old form is made here from the new by
 * adding the base back to every "ts", exactly, in decimal.
 */
static int absolute_copy(const char *src, const char *dst) {
  char *text = lp_test_slurp(src);
  if (!text) return -1;
  const char *b = strstr(text, "\"ts_base_ns\":\"");
  if (!b) {
    free(text);
    return -1;
  }
  unsigned long long base = strtoull(b + 14, NULL, 10);
  FILE *f = fopen(dst, "w");
  if (!f) {
    free(text);
    return -1;
  }
  int n = 0;
  for (const char *p = text, *at; *p; p = at) {
    at = strstr(p, "\"ts\":");
    if (!at) {
      fputs(p, f);
      break;
    }
    at += 5;
    fwrite(p, 1, (size_t)(at - p), f);
    bool neg = *at == '-';
    char *end;
    unsigned long long us = strtoull(at + neg, &end, 10), frac = 0;
    if (*end == '.') frac = strtoull(end + 1, &end, 10);
    unsigned long long ns = us * 1000 + frac, abs = neg ? base - ns : base + ns;
    fprintf(f, "%llu.%03llu", abs / 1000, abs % 1000);
    at = end;
    n++;
  }
  free(text);
  return fclose(f) == 0 ? n : -1;
}

static void test_cmd_reads_relative_and_absolute_times(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 50; i++) {
    LP_SCOPE("outer");
    busy_ns(20000);
    {
      LP_SCOPE("inner");
      busy_ns(10000);
    }
  }
  CU_ASSERT_EQUAL_FATAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(tmp("relative.json"), "test_cmd"), 0);
  CU_ASSERT(absolute_copy(tmp("relative.json"), tmp("absolute.json")) >= 100);
  run_t a = RUN("stats", "--format", "csv", tmp("relative.json"));
  run_t b = RUN("stats", "--format", "csv", tmp("absolute.json"));
  CU_ASSERT_EQUAL(a.status, 0);
  CU_ASSERT_EQUAL(b.status, 0);
  /* labelprof's own file declares its order: one pass, nothing on stderr */
  CU_ASSERT_STRING_EQUAL(a.err, "");
  CU_ASSERT_STRING_EQUAL(b.err, "");
  CU_ASSERT_PTR_NOT_NULL(strstr(a.out, "\nouter,50,"));
  CU_ASSERT_STRING_EQUAL(a.out, b.out);
  run_free(&a);
  run_free(&b);
}

/* Runs every summary of file and checks that each states its drops with what (a note's middle part). */
static void expect_drop_notes(const char *file, const char *const *what, size_t nwhat) {
  run_t s = RUN("stats", file);
  run_t t = RUN("tree", file);
  run_t d = RUN("diff", file, file);
  run_t f = RUN("folded", file);
  run_t c = RUN("stats", "--format", "csv", file);
  run_t *all[] = {&s, &t, &d, &c, &f};
  const char *where[] = {s.out, t.out, d.out, c.err, f.err};
  for (int i = 0; i < 5; i++) {
    CU_ASSERT_EQUAL(all[i]->status, 0);
    const char *n = strstr(where[i], "note: ");
    CU_ASSERT_PTR_NOT_NULL(n);
    if (!n) continue;
    CU_ASSERT_EQUAL(strncmp(n + 6, file, strlen(file)), 0);
    for (size_t k = 0; k < nwhat; k++) {
      if (!strstr(n, what[k])) fprintf(stderr, "\n%s: no \"%s\" in:\n%s", file, what[k], n);
      CU_ASSERT_PTR_NOT_NULL(strstr(n, what[k]));
    }
  }
  CU_ASSERT_PTR_NULL(strstr(f.out, "note:")); /* folded stacks stay clean */
  for (int i = 0; i < 5; i++) run_free(all[i]);
}

/*
 * A file whose budget filled: every summary says how many events were
 * dropped and what window of the session the trace covers, whether the
 * session was written as JSON or as Perfetto protobuf.
 */
static void test_cmd_states_drops(void) {
  lp_trace_opts_t opts = {.budget_bytes = 64 << 10};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&opts), 0);
  for (int i = 0; i < 100000; i++) {
    LP_SCOPE("dropper");
  }
  CU_ASSERT_EQUAL_FATAL(lp_trace_stop(), 0);
  lp_trace_stats_t st;
  CU_ASSERT_EQUAL(lp_trace_get_stats(&st), 0);
  CU_ASSERT(st.dropped > 0);
  CU_ASSERT(st.first_drop_ns > 0 && st.first_drop_ns <= lp_now_ns());
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(tmp("drops.json"), "test_cmd"), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_perfetto(tmp("drops.pftrace"), "test_cmd"), 0);
  const char *what[] = {": the trace covers ", " session; ", " events were dropped after the 64 KiB budget filled at "};
  expect_drop_notes(tmp("drops.json"), what, 3);
  expect_drop_notes(tmp("drops.pftrace"), what, 3);
  /* A ring's Perfetto file names the part of the session it kept. */
  lp_trace_opts_t ring = {.budget_bytes = 64 << 10, .policy = LP_TRACE_RING};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&ring), 0);
  for (int i = 0; i < 100000; i++) {
    LP_SCOPE("dropper");
  }
  CU_ASSERT_EQUAL_FATAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_perfetto(tmp("ring.pftrace"), "test_cmd"), 0);
  const char *ring_what[] = {": the trace covers the last ", " events were overwritten after the 64 KiB budget filled at "};
  expect_drop_notes(tmp("ring.pftrace"), ring_what, 2);
  unlink(tmp("drops.json"));
  unlink(tmp("drops.pftrace"));
  unlink(tmp("ring.pftrace"));
}

/*
 * A stream of a 2-chunk budget whose writer is held back holds times, while
 * each hold's scopes fill the budget and the rest are dropped; then 100
 * scopes more, kept. The session's drops (never none).
 */
static uint64_t stream_with_gaps(const char *path, uint64_t rotate_bytes, int holds) {
  lp_trace_opts_t o = {.policy = LP_TRACE_STREAM, .budget_bytes = 2 * LP__CHUNK_BYTES, .path = path,
                       .clock = LP_CLOCK_MONOTONIC, .rotate_bytes = rotate_bytes};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  for (int round = 0; round < holds; round++) {
    lp__trace_stream_hold(true); /* the writer takes nothing: the budget fills, the rest is dropped */
    for (size_t i = 0; i < 20 * LP__CHUNK_EVENTS; i++) {
      LP_SCOPE("streamed");
    }
    lp__trace_stream_hold(false);
    CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0);
  }
  for (int i = 0; i < 100; i++) {
    LP_SCOPE("streamed");
  }
  CU_ASSERT_EQUAL_FATAL(lp_trace_stop(), 0);
  lp_trace_stats_t st;
  CU_ASSERT_EQUAL(lp_trace_get_stats(&st), 0);
  CU_ASSERT_FATAL(st.dropped > 0);
  return st.dropped;
}

/*
 * A stream whose writer fell behind has gaps, not a window: every summary
 * says how many events were dropped and when the first was.
 */
static void test_cmd_states_stream_drops(void) {
  stream_with_gaps(tmp("gaps.pftrace"), 0, 1);
  const char *what[] = {" events were dropped while the stream's writer fell behind (its 32 KiB budget was full), the "
                        "first at ", " session: the trace has gaps there"};
  expect_drop_notes(tmp("gaps.pftrace"), what, 2);
  unlink(tmp("gaps.pftrace"));
}

/*
 * A rotated stream: each file states the drops counted while it was the
 * stream's file, so that they add up to the session's; the first drop is
 * placed in the file it happened in, and a later file whose drops began
 * before it says them from its own start. The writer is held twice, each
 * time while a different file is current.
 */
static void test_cmd_states_rotated_stream_drops_per_file(void) {
  uint64_t dropped = stream_with_gaps(tmp("rgaps-%n.pftrace"), 8192, 2);
  uint64_t sum = 0;
  int files = 0, first = 0, from_start = 0;
  for (int k = 1; k < 100; k++) {
    char name[64];
    snprintf(name, sizeof name, "rgaps-%d.pftrace", k);
    if (access(tmp(name), F_OK) != 0) break;
    files++;
    run_t r = RUN("stats", tmp(name));
    CU_ASSERT_EQUAL(r.status, 0);
    const char *n = strstr(r.out, "note: ");
    const char *d = n ? strstr(n, " events were dropped while the stream's writer fell behind") : NULL;
    if (d) {
      const char *c = d; /* the count before it, with its thousands separators */
      while (c > n && (isdigit((unsigned char)c[-1]) || c[-1] == ',')) c--;
      uint64_t v = 0;
      for (; c < d; c++)
        if (*c != ',') v = v * 10 + (uint64_t)(*c - '0');
      sum += v;
      first += strstr(d, "), the first at ") != NULL;
      from_start += strstr(d, "), since this file began, ") != NULL;
    }
    run_free(&r);
    unlink(tmp(name));
  }
  CU_ASSERT(files >= 3);
  CU_ASSERT_EQUAL(sum, dropped);
  CU_ASSERT_EQUAL(first, 1);
  CU_ASSERT_EQUAL(from_start, 1);
}

/*
 * tree --flat: seek under two parents and inside a recursion is summed; rec
 * recurs on one stack and counts once in its total. 100 us of wall time.
 */
static void test_cmd_tree_flat(void) {
  const char *text = "{\"traceEvents\":[\n"
                     "{\"ph\":\"X\",\"name\":\"insert\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":30},\n"
                     "{\"ph\":\"X\",\"name\":\"seek\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":20},\n"
                     "{\"ph\":\"X\",\"name\":\"exec\",\"pid\":1,\"tid\":1,\"ts\":30,\"dur\":30},\n"
                     "{\"ph\":\"X\",\"name\":\"seek\",\"pid\":1,\"tid\":1,\"ts\":30,\"dur\":30},\n"
                     "{\"ph\":\"X\",\"name\":\"rec\",\"pid\":1,\"tid\":1,\"ts\":60,\"dur\":40},\n"
                     "{\"ph\":\"X\",\"name\":\"rec\",\"pid\":1,\"tid\":1,\"ts\":70,\"dur\":20},\n"
                     "{\"ph\":\"X\",\"name\":\"rec\",\"pid\":1,\"tid\":1,\"ts\":80,\"dur\":10},\n"
                     "{\"ph\":\"X\",\"name\":\"seek\",\"pid\":1,\"tid\":1,\"ts\":80,\"dur\":10}]}\n";
  write_file(tmp("flat.json"), text, strlen(text));
  run_t r = RUN("tree", "--flat", tmp("flat.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  const char *flat = strstr(r.out, "\nflat profile: ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(flat);
  const char *table = strchr(flat + 1, '\n');
  CU_ASSERT_PTR_NOT_NULL_FATAL(table);
  CU_ASSERT_STRING_EQUAL(table + 1,
                         "   total     self  label\n"
                         "  60.00%   60.00%  seek\n"
                         "  40.00%   30.00%  rec\n"
                         "  30.00%   10.00%  insert\n"
                         "  30.00%    0.00%  exec\n");
  run_free(&r);
  r = RUN("tree", tmp("flat.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NULL(strstr(r.out, "flat profile"));
  run_free(&r);
}

/* Finds `label,` at a line start in CSV output and reads its integer columns. */
static int csv_row(const char *csv, const char *label, long long v[9]) {
  char key[64];
  snprintf(key, sizeof key, "\n%s,", label);
  const char *p = strstr(csv, key);
  if (!p) return 0;
  p += strlen(key);
  for (int i = 0; i < 9; i++) {
    char *end;
    v[i] = strtoll(p, &end, 10);
    if (*end != ',') return 0;
    p = end + 1;
  }
  return 1;
}

/*
 * A traced duration lies between what the thread measured just inside its
 * scope and just outside it, whatever preempted the thread meanwhile. The
 * margin is for mapping the TSC onto CLOCK_MONOTONIC at export and for the
 * JSON's rounding, not for the scheduler: 0.1% and 20 us.
 */
static int within(long long got, uint64_t inside, uint64_t outside) {
  double margin = 0.001 * (double)outside + 20000.0;
  return (double)got >= (double)inside - margin && (double)got <= (double)outside + margin;
}

static void test_cmd_live_trace_totals(void) {
  uint64_t ms = 1000000ull * lp_test_slow();
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  /*
   * The thread's first recorded scope registers it and takes its first chunk
   * before its timestamp: milliseconds under TSan, inside what this thread
   * measures around "outer" but rightly outside the scope. Pay it here.
   */
  {
    LP_SCOPE("warm");
  }
  /* Each duration measured just outside its scope and just inside it. */
  uint64_t outer_out = 0, outer_in = 0, inner_out = 0, inner_in = 0;
  for (int i = 0; i < 3; i++) {
    uint64_t t0 = lp_now_ns(), t1, t2;
    {
      LP_SCOPE("outer");
      uint64_t i0 = lp_now_ns();
      busy_ns(8 * ms);
      t1 = lp_now_ns();
      {
        LP_SCOPE("inner");
        uint64_t j0 = lp_now_ns();
        busy_ns(12 * ms);
        inner_in += lp_now_ns() - j0;
      }
      t2 = lp_now_ns();
      inner_out += t2 - t1;
      outer_in += t2 - i0;
    }
    outer_out += lp_now_ns() - t0;
  }
  rec(3, 4 * ms);
  CU_ASSERT_EQUAL_FATAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(tmp("live.json"), "test_cmd"), 0);
  run_t r = RUN("stats", "--format", "csv", tmp("live.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_STRING_EQUAL(r.err, ""); /* read in one pass, without a note */
  long long o[9], in[9], rc[9];
  CU_ASSERT_FATAL(csv_row(r.out, "outer", o) && csv_row(r.out, "inner", in) && csv_row(r.out, "rec", rc));
  CU_ASSERT_EQUAL(o[0], 3);
  CU_ASSERT_EQUAL(in[0], 3);
  /* totals against what this thread measured around the scopes; self is total minus the child */
  CU_ASSERT(within(o[1], outer_in, outer_out));
  CU_ASSERT(within(in[1], inner_in, inner_out));
  CU_ASSERT(within(o[2], outer_in - inner_out, outer_out - inner_in));
  CU_ASSERT_EQUAL(in[1], in[2]);
  CU_ASSERT(o[4] >= 19 * (long long)ms && o[8] <= o[1]); /* min of one call: 20 ms of busy work */
  /* recursion: three calls, total counts the outermost only, self of all three adds up to it */
  CU_ASSERT_EQUAL(rc[0], 3);
  CU_ASSERT(within(rc[1], rec_inner_ns, rec_outer_ns));
  /* counted three times, total would be the sum of the three durations (3 x mean); it is the sum less the inner two */
  CU_ASSERT(rc[1] < 3 * rc[3] - rc[4] / 2);
  CU_ASSERT(llabs(rc[2] - rc[1]) <= 1000);
  if (!within(o[1], outer_in, outer_out) || !within(rc[1], rec_inner_ns, rec_outer_ns))
    fprintf(stderr, "\nouter %lld (measured %llu-%llu), rec %lld (measured %llu-%llu)\n", o[1],
            (unsigned long long)outer_in, (unsigned long long)outer_out, rc[1], (unsigned long long)rec_inner_ns,
            (unsigned long long)rec_outer_ns);
  run_free(&r);
  /* folded parses back to the same self times, and its lines add up to the traced wall time */
  r = RUN("folded", tmp("live.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  long long outer_self = 0, inner_self = 0, rec_self = 0, all = 0;
  for (char *line = r.out; *line;) {
    char *nl = strchr(line, '\n');
    CU_ASSERT_PTR_NOT_NULL_FATAL(nl);
    *nl = '\0';
    char *sp = strrchr(line, ' ');
    CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
    long long v = atoll(sp + 1);
    *sp = '\0';
    const char *leaf = strrchr(line, ';') ? strrchr(line, ';') + 1 : line;
    if (strcmp(leaf, "outer") == 0) outer_self += v;
    if (strcmp(leaf, "inner") == 0) inner_self += v;
    if (strcmp(leaf, "rec") == 0) rec_self += v;
    all += v;
    line = nl + 1;
  }
  CU_ASSERT_EQUAL(outer_self, o[2]);
  CU_ASSERT_EQUAL(inner_self, in[2]);
  CU_ASSERT_EQUAL(rec_self, rc[2]);
  run_free(&r);
  r = RUN("stats", "--format", "json", tmp("live.json"));
  json_t *root = json_loads(r.out, 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  CU_ASSERT_EQUAL(all, json_integer_value(json_object_get(root, "wall_ns")));
  json_decref(root);
  run_free(&r);
  /* diff against itself: nothing grew */
  r = RUN("diff", "--fail-above", "1", tmp("live.json"), tmp("live.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
}

/* ---- tree against the sampled profile ------------------------------------------------------- */

typedef struct pline {
  char path[256];
  double pct;
} pline_t;

/* The nodes of a printed tree (either printer): "path/of/labels" -> percent. Returns the count. */
static int parse_tree(const char *text, pline_t *out, int max) {
  char stack[16][64];
  int n = 0;
  for (const char *line = text; *line && n < max;) {
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    size_t sp = 0;
    while (sp < len && line[sp] == ' ') sp++;
    double pct;
    int used = -1; /* set only when the '%' matched too */
    if (sscanf(line + sp, "%lf%%%n", &pct, &used) == 1 && used > 0 && sp % 4 == 0 && sp / 4 < 16) {
      size_t depth = sp / 4, at = sp + (size_t)used + 1;
      char label[64];
      size_t ll = len > at ? len - at : 0;
      if (ll >= sizeof label) ll = sizeof label - 1;
      memcpy(label, line + at, ll);
      label[ll] = '\0';
      snprintf(stack[depth], sizeof stack[depth], "%s", label);
      size_t plen = 0;
      out[n].path[0] = '\0';
      for (size_t d = 0; d <= depth && plen < sizeof out[n].path; d++) {
        int w = snprintf(out[n].path + plen, sizeof out[n].path - plen, "%s%s", d ? "/" : "", stack[d]);
        plen += w > 0 ? (size_t)w : 0;
      }
      out[n++].pct = pct;
    }
    line = nl ? nl + 1 : line + len;
  }
  return n;
}

/*
 * One run of the same workload under a profile and a timeline at once.
 * Returns the number of nodes that differ by more than 2 points (-1 when the
 * two trees do not have the same 7 nodes); prints both when asked to.
 */
/*
 * Sampling on a grid of instants 250 us apart (4000 Hz), taken by the
 * working thread itself: whenever it looks, it takes one sample for each
 * instant passed since it last looked, with the stack it has now. A thread
 * that was preempted had that same stack all along, so the samples are
 * those a collector that never ran late would have taken, whatever the
 * machine's load.
 */
static uint64_t grid_next;
static void grid_catch_up(void) {
  for (uint64_t now = lp_now_ns(); grid_next <= now; grid_next += 250000u)
    CU_ASSERT_EQUAL(lp__profile_sample_now(), 0);
}

static void busy_sampled(uint64_t ns) {
  uint64_t end = lp_now_ns() + ns;
  do grid_catch_up();
  while (lp_now_ns() < end);
  grid_catch_up();
}

static int tree_vs_profile(int attempt, bool report) {
  uint64_t ms = 1000000ull * lp_test_slow();
  lp_profile_opts_t po = {.hz = 4000};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(&po), 0);
  grid_next = lp_now_ns();
  busy_sampled(ms); /* outside any label */
  /*
   * Busy waits of lengths drawn from a fixed-seed generator (a deterministic
   * workload), so that no phase of it lines up with the collector's tick:
   * on average A 50% (B 30% of it), C 10%, work's own 10%.
   */
  uint32_t seed = 12345u + (uint32_t)attempt;
  {
    LP_SCOPE("work");
    for (int i = 0; i < 200; i++) {
      uint64_t u[4];
      for (int k = 0; k < 4; k++) {
        seed = seed * 1664525u + 1013904223u;
        u[k] = 500 + (seed >> 22); /* 0.5 .. 1.52 */
      }
      {
        LP_SCOPE("A");
        busy_sampled(u[0] * ms / 1000);
        {
          LP_SCOPE("B");
          busy_sampled(u[1] * 3 * ms / 5000);
        }
      }
      {
        LP_SCOPE("C");
        busy_sampled(u[2] * ms / 5000);
      }
      busy_sampled(u[3] * ms / 5000);
    }
  }
  busy_sampled(ms); /* outside any label */
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(tmp("same_run.json"), "test_cmd"), 0);
  char *sampled = NULL;
  size_t slen = 0;
  FILE *mem = open_memstream(&sampled, &slen);
  CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
  CU_ASSERT_EQUAL(lp_profile_print(p, mem), 0);
  CU_ASSERT_EQUAL(fclose(mem), 0);
  lp_profile_free(p);
  run_t r = RUN("tree", tmp("same_run.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  pline_t a[64], b[64];
  int na = parse_tree(sampled, a, 64), nb = parse_tree(r.out, b, 64);
  int matched = 0, off = 0;
  for (int i = 0; i < na; i++) {
    for (int j = 0; j < nb; j++) {
      if (strcmp(a[i].path, b[j].path) != 0) continue;
      matched++;
      if (fabs(a[i].pct - b[j].pct) > 2.0) {
        off++;
        if (report) fprintf(stderr, "\n%s: sampled %.2f%%, traced %.2f%%\n", a[i].path, a[i].pct, b[j].pct);
      }
    }
  }
  /* work, A, B, A's other, C, work's other, outside: every node of each is in the other */
  bool same_shape = matched == 7 && na == 7 && nb == 7;
  if (report || !same_shape || getenv("LP_TEST_VERBOSE"))
    fprintf(stderr, "\nattempt %d: sampled:\n%s\ntraced:\n%s\n", attempt, sampled, r.out);
  free(sampled);
  run_free(&r);
  return same_shape ? off : -1;
}

/*
 * The sampled profile and the trace of the same run agree within 2 points per
 * node. The samples fall on a fixed grid of instants (see busy_sampled), so
 * that a loaded machine cannot skew them; what is left is the grid's own
 * rounding at each scope's ends, a fraction of a point here.
 */
static void test_cmd_tree_matches_profile(void) {
  int off = tree_vs_profile(0, true);
  CU_ASSERT_NOT_EQUAL(off, -1); /* the shape never depends on timing */
  CU_ASSERT_EQUAL(off, 0);
}

/* ---- JSON whatever a label holds ---------------------------------------------------- */

/*
 * A systrace label with Latin-1 (0xE9), an overlong '/', a surrogate, a
 * control character and an emoji: stats --format json and nnapi --json
 * must write JSON that jansson (strict UTF-8, no lone surrogates) reads,
 * invalid bytes as U+FFFD, the emoji and the control character kept.
 */
static void test_cmd_json_any_label(void) {
  static const char hdr[] = "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n";
  static const char label[] = "caf\xe9 \xc0\xaf \xed\xa0\x80 \x01 \xf0\x9f\x98\x80";
  static const char want[] = "caf\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \x01 "
                             "\xf0\x9f\x98\x80";
  char text[1024];
  int n = snprintf(text, sizeof text,
                   "%s  p-100  (  100) [000] ...1  10.000000: tracing_mark_write: B|100|[NN_LA_PO]%s\n"
                   "  p-100  (  100) [000] ...1  10.000000: tracing_mark_write: B|100|[NN_LR_PP]x\n"
                   "  p-100  (  100) [000] ...1  10.001000: tracing_mark_write: E|100\n"
                   "  p-100  (  100) [000] ...1  10.002000: tracing_mark_write: E|100\n",
                   hdr, label);
  CU_ASSERT_FATAL(n > 0 && (size_t)n < sizeof text);
  write_file(tmp("latin1.txt"), text, (size_t)n);
  run_t r = RUN("stats", "--format", "json", tmp("latin1.txt"));
  CU_ASSERT_EQUAL(r.status, 0);
  json_error_t je;
  json_t *root = json_loads(r.out, 0, &je);
  if (!root) fprintf(stderr, "\nstats --format json: %s (byte %d)\n", je.text, je.position);
  CU_ASSERT_PTR_NOT_NULL(root);
  json_t *labels = json_object_get(root, "labels");
  int found = 0;
  for (size_t i = 0; i < json_array_size(labels); i++) {
    const char *l = json_string_value(json_object_get(json_array_get(labels, i), "label"));
    if (l && strcmp(l, want) == 0) found = 1;
  }
  CU_ASSERT(found);
  json_decref(root);
  run_free(&r);
  r = RUN("nnapi", "--json", tmp("latin1.txt"));
  CU_ASSERT_EQUAL(r.status, 0);
  root = json_loads(r.out, 0, &je);
  if (!root) fprintf(stderr, "\nnnapi --json: %s (byte %d)\n", je.text, je.position);
  CU_ASSERT_PTR_NOT_NULL(root);
  const char *mark = json_string_value(json_object_get(json_array_get(root, 0), "starting_mark"));
  CU_ASSERT(mark && strncmp(mark, "B|100|[NN_LA_PO]", 16) == 0 && strcmp(mark + 16, want) == 0);
  CU_ASSERT_PTR_NULL(strstr(r.out, "\\ud800")); /* no lone surrogate, even escaped */
  json_decref(root);
  run_free(&r);
}

/* ---- hostile input (#37) ------------------------------------------------------------ */

/* Runs labelprof with argv under a CPU-time limit (a guard against a hang: the work takes well under it). */
static run_t run_cpu(rlim_t seconds, const char *const *args) {
  char *argv[32];
  int n = 0;
  argv[n++] = tool;
  for (; args[n - 1] && n < 31; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  lp_test_child_t c = {NULL, NULL, 0, 1, seconds * lp_test_slow() * (LP_TEST_SANITIZED ? 4 : 1), 0};
  lp_test_run_t t = lp_test_run(tool, argv, NULL, &c);
  run_t r = {lp_test_exit_code(&t), t.out, t.err};
  return r;
}
#define RUN_CPU(seconds, ...) run_cpu((seconds), (const char *const[]){__VA_ARGS__, NULL})

/*
 * Text XML 1.0 can hold, as the flame graph must be: valid UTF-8 (the
 * project's decoder), no U+FFFE or U+FFFF, and no control character but
 * tab, newline and carriage return. Returns the offset of the first bad
 * byte, or -1.
 */
static long xml_bad_at(const char *text) {
  const unsigned char *s = (const unsigned char *)text, *end = s + strlen(text);
  for (const unsigned char *p = s; p < end;) {
    unsigned cp;
    if (*p < 0x80) {
      if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') return (long)(p - s);
      p++;
      continue;
    }
    size_t n = lp__utf8_seq(p, end, &cp);
    if (!n || cp == 0xfffe || cp == 0xffff) return (long)(p - s);
    p += n;
  }
  return -1;
}

/*
 * Row 1: labels with bytes that are not UTF-8, U+FFFE and U+FFFF, and
 * control characters, read from JSON, folded stacks, systrace and Perfetto:
 * the flame graph (and --diff) is text XML can hold, each such label shown
 * with U+FFFD, and XML's specials escaped.
 */
static void test_cmd_svg_any_label(void) {
  static const char *const inputs[] = {"fuzz/hostile-names.json", "fuzz/hostile-names.folded", "fuzz/hostile-names.txt",
                                       "fuzz/hostile-names.pftrace"};
  for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
    run_t r = RUN("flamegraph", data(inputs[i]));
    CU_ASSERT_EQUAL(r.status, 0);
    long bad = xml_bad_at(r.out);
    if (bad >= 0) fprintf(stderr, "\n%s: the SVG's byte %ld cannot be XML: ...%.40s\n", inputs[i], bad, r.out + bad);
    CU_ASSERT_EQUAL(bad, -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\xef\xbf\xbd")); /* U+FFFD where a label had what XML cannot hold */
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "a&lt;b&gt;&amp;&apos;&quot;c"));
    run_free(&r);
  }
  run_t r = RUN("flamegraph", data("fuzz/hostile-names.json"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "nonchar \xef\xbf\xbd ffff"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "nonchar \xef\xbf\xbd fffe"));
  run_free(&r);
  r = RUN("flamegraph", data("fuzz/hostile-names.folded"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "bad \xef\xbf\xbd byte"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "overlong \xef\xbf\xbd\xef\xbf\xbd nul"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "ctl \xef\xbf\xbd\xef\xbf\xbd end"));
  run_free(&r);
  r = RUN("flamegraph", "--diff", data("fuzz/hostile-names.json"), data("fuzz/hostile-names.folded"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_EQUAL(xml_bad_at(r.out), -1);
  run_free(&r);
  r = RUN("flamegraph", "--title", "bad \xff title \x01", data("fuzz/hostile-names.json"));
  CU_ASSERT_EQUAL(xml_bad_at(r.out), -1);
  run_free(&r);
}

/* Row 10: no csv cell starts with a formula's first character, and none holds bytes that are not UTF-8. */
static void test_cmd_csv_inert(void) {
  static const char *const inputs[] = {"fuzz/hostile-names.json", "fuzz/hostile-names.folded",
                                       "fuzz/hostile-names.pftrace"};
  for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
    run_t r = RUN("stats", "--by", "thread", "--format", "csv", data(inputs[i]));
    CU_ASSERT_EQUAL(r.status, 0);
    /* Every cell: each line's fields, split outside quotes; a quoted cell's first character after its quote. */
    for (const char *l = r.out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
      bool quoted = false, start = true;
      for (const char *c = l; *c && (quoted || *c != '\n'); c++) {
        if (start) {
          const char *first = *c == '"' ? c + 1 : c;
          bool formula = *first && strchr("=+@\t\r", *first);
          if (*first == '-' && !(first[1] >= '0' && first[1] <= '9' && *c != '"')) formula = true; /* numbers: -5 */
          if (formula) fprintf(stderr, "\n%s: a csv cell starts with a formula: %.30s\n", inputs[i], c);
          CU_ASSERT(!formula);
          start = false;
        }
        if (*c == '"') quoted = !quoted;
        else if (*c == ',' && !quoted) start = true;
      }
    }
    for (const unsigned char *p = (const unsigned char *)r.out, *end = p + strlen(r.out); p < end;) {
      unsigned cp;
      size_t n = *p < 0x80 ? 1 : lp__utf8_seq(p, end, &cp);
      CU_ASSERT_FATAL(n > 0);
      p += n;
    }
    run_free(&r);
  }
  run_t r = RUN("stats", "--format", "csv", data("fuzz/hostile-names.json"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n\"'=HYPERLINK(\"\"http://example.com\"\")\","));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n\"'+1\","));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n\"'-2\","));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n\"'@SUM(A1)\","));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n\"'\tTab\","));
  run_free(&r);
}

/* Row 11: a 3,000-deep stack prints lines of bounded indentation, each deeper one saying its level. */
static void test_cmd_tree_deep_stack(void) {
  enum { DEPTH = 3000 };
  FILE *f = fopen(tmp("deep.folded"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("f 1\n", f); /* a first line of its own, short, as the reader knows folded stacks by it */
  for (int d = 0; d < DEPTH; d++) fputs(d ? ";f" : "f", f);
  fputs(" 1000\n", f);
  CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
  run_t r = RUN("tree", tmp("deep.folded"));
  CU_ASSERT_EQUAL(r.status, 0);
  size_t len = strlen(r.out);
  if (len >= (size_t)(2 << 20)) fprintf(stderr, "\ntree printed %zu bytes for a %d-deep stack\n", len, DEPTH);
  CU_ASSERT(len < (size_t)(2 << 20)); /* 4 spaces a level would be 36 MB */
  char want[64];
  snprintf(want, sizeof want, "[level %d] 99.90%% f\n", DEPTH);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n    99.90% f\n")); /* level 2, indented */
  run_free(&r);
  unlink(tmp("deep.folded"));
}

/*
 * Row 6: flamegraph --diff of two profiles with 150,000 siblings under one
 * frame finishes well inside a CPU-time limit (each child of NEW was looked
 * for among all of BASE's: about a minute here; now a fraction of a second).
 */
static void test_cmd_diff_many_siblings(void) {
  enum { N = 150000 };
  for (int k = 0; k < 2; k++) {
    FILE *f = fopen(tmp(k ? "new.folded" : "base.folded"), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < N; i++) fprintf(f, "main;sibling %06d %d\n", i, 1000 + (k ? (i % 7) : 0));
    CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
  }
  run_t r = RUN_CPU(20, "flamegraph", "--diff", tmp("base.folded"), tmp("new.folded"));
  CU_ASSERT_EQUAL(r.status, 0); /* -1: killed at the limit */
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "</svg>"));
  run_free(&r);
  unlink(tmp("base.folded"));
  unlink(tmp("new.folded"));
}

/*
 * Many processes, each named: process names were looked up, and added, by
 * scanning them all (150,000 named processes: minutes); now by a hash,
 * under a CPU-time guard, with --by thread's titles naming each lane's.
 */
static void test_cmd_many_processes(void) {
  enum { N = 150000 };
  FILE *f = fopen(tmp("procs.json"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("[", f);
  for (int i = 0; i < N; i++)
    fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"proc %d\"}},\n"
               "{\"ph\":\"X\",\"name\":\"work\",\"pid\":%d,\"tid\":1,\"ts\":%d,\"dur\":1}",
            i ? "," : "", i, i, i, i);
  fputs("]\n", f);
  CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
  run_t r = RUN_CPU(20, "stats", "--by", "thread", "--format", "csv", tmp("procs.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n\"proc 149999 pid 149999, tid 1\",work,1,1000,"));
  run_free(&r);
  unlink(tmp("procs.json"));
}

/* Row 4: 32 MiB of blank lines in folded stacks are read well inside a CPU-time limit (once 17.6 s per 16 MiB). */
static void test_cmd_folded_blank_lines(void) {
  FILE *f = fopen(tmp("blank.folded"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  static char nl[1 << 16];
  memset(nl, '\n', sizeof nl);
  fputs("a;b 7\n", f);
  for (int i = 0; i < 512; i++) CU_ASSERT_EQUAL(fwrite(nl, 1, sizeof nl, f), sizeof nl);
  fputs("a 3\n", f);
  CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
  run_t r = RUN_CPU(10, "folded", tmp("blank.folded"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, "a 3\na;b 7\n");
  run_free(&r);
  unlink(tmp("blank.folded"));
}

/*
 * Row 5: a 16 MiB name in JSON is refused where it passes 1 MiB, not where
 * it ends (the limit acts as the bytes arrive); a 16 MiB string the views do
 * not use (an arg, systemTraceEvents) is skipped and the trace reads.
 */
static void test_cmd_json_long_strings(void) {
  const size_t big = (size_t)16 << 20;
  char *s = malloc(big + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  memset(s, 'x', big);
  s[big] = '\0';
  FILE *f = fopen(tmp("long-name.json"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "[{\"ph\":\"X\",\"ts\":0,\"dur\":1,\"pid\":1,\"tid\":1,\"name\":\"%s\"}]\n", s);
  CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
  run_t r = RUN("stats", tmp("long-name.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "longer than 1 MiB"));
  const char *at = strstr(r.err, "long-name.json:1:");
  CU_ASSERT_PTR_NOT_NULL(at);
  if (at) { /* the column where the name passed 1 MiB */
    long col = strtol(at + strlen("long-name.json:1:"), NULL, 10);
    CU_ASSERT(col > (1 << 20) && col < (1 << 20) + 100);
  }
  run_free(&r);
  f = fopen(tmp("long-arg.json"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "{\"systemTraceEvents\":\"%s\",\"traceEvents\":[{\"ph\":\"X\",\"ts\":0,\"dur\":1,\"pid\":1,\"tid\":1,"
             "\"name\":\"a\",\"args\":{\"blob\":\"%s\\\"\\u00e9\\n\",\"\\u0000%s\":1}}]}\n", s, s, s);
  CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
  r = RUN("stats", "--format", "csv", "--max-memory", "8M", tmp("long-arg.json"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, "label,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,self_percent\n"
                     "a,1,1000,1000,1000,1000,1000,1000,1000,1000,100.0000\n");
  run_free(&r);
  free(s);
  unlink(tmp("long-name.json"));
  unlink(tmp("long-arg.json"));
}

/* A gzip file of what w holds. */
static void write_gz(const char *path, const pbw_t *w) {
  CU_ASSERT_FATAL(!w->failed);
  gzFile gz = gzopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(gz);
  for (size_t off = 0; off < w->n;) {
    unsigned k = w->n - off > (1u << 30) ? 1u << 30 : (unsigned)(w->n - off);
    CU_ASSERT_EQUAL_FATAL(gzwrite(gz, w->b + off, k), (int)k);
    off += k;
  }
  CU_ASSERT_EQUAL_FATAL(gzclose(gz), Z_OK);
}

/* A pprof profile: one sample (f, 100 ns of wall time); `strings` more empty strings, or one string of `big` bytes. */
static void pprof_with(pbw_t *w, size_t strings, size_t big) {
  pbw_t m = {0}, l = {0};
  pbw_uint(&m, 1, 1), pbw_uint(&m, 2, 2), pbw_sub(w, 1, &m); /* sample_type wall/nanoseconds */
  pbw_uint(&m, 1, 1), pbw_uint(&m, 2, 100), pbw_sub(w, 2, &m); /* sample: location 1, 100 */
  pbw_uint(&l, 1, 1), pbw_uint(&m, 1, 1), pbw_sub(&m, 4, &l), pbw_sub(w, 4, &m); /* location 1: function 1 */
  pbw_uint(&m, 1, 1), pbw_uint(&m, 2, 3), pbw_sub(w, 5, &m); /* function 1: name "f" */
  pbw_str(w, 6, ""), pbw_str(w, 6, "wall"), pbw_str(w, 6, "nanoseconds"), pbw_str(w, 6, "f");
  for (size_t i = 0; i < strings; i++) pbw_str(w, 6, "");
  if (big) {
    pbw_varint(w, 6 << 3 | 2);
    pbw_varint(w, big);
    for (size_t k = 0; k < big; k += 4096) {
      static const char pad[4096] = {'p'};
      pbw_bytes(w, pad, big - k < 4096 ? big - k : 4096);
    }
  }
  pbw_free(&m);
  pbw_free(&l);
}

/*
 * Row 3: --max-memory bounds what the readers hold: a pprof of 4 M empty
 * strings (an 8 MB file, 30 KB gzipped) and a Perfetto trace naming 200,000
 * sequences stop at a 16 MiB cap, naming the cap; without it, both read.
 * A 64 MiB pprof string and an 8 MiB Perfetto track name are refused, the
 * string at its header, before its bytes are held.
 */
static void test_cmd_memory_cap_readers(void) {
  pbw_t w = {0};
  pprof_with(&w, 4u << 20, 0);
  write_gz(tmp("strings.pb.gz"), &w);
  pbw_free(&w);
  run_t r = RUN("folded", "--max-memory", "16M", tmp("strings.pb.gz"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "more than 16 MiB of memory (the cap, --max-memory)"));
  run_free(&r);
  r = RUN("folded", tmp("strings.pb.gz"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, "f 100\n");
  run_free(&r);
  pprof_with(&w, 0, (size_t)64 << 20);
  write_gz(tmp("string.pb.gz"), &w);
  pbw_free(&w);
  r = RUN("folded", tmp("string.pb.gz"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "a string of 67108864 bytes in the string table"));
  const char *at = strstr(r.err, "string.pb.gz: byte ");
  CU_ASSERT(at && strtol(at + strlen("string.pb.gz: byte "), NULL, 10) < 100); /* its header, near the start */
  run_free(&r);
  /* Perfetto: each packet a sequence of its own. */
  pbw_t p = {0}, t = {0};
  for (uint32_t seq = 1; seq <= 200000; seq++) {
    pbw_uint(&t, 10, seq);
    pbw_uint(&t, 13, 1);
    pbw_sub(&w, 1, &t);
  }
  write_gz(tmp("seqs.pftrace.gz"), &w);
  pbw_free(&w);
  r = RUN("stats", "--max-memory", "16M", tmp("seqs.pftrace.gz"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "more than 16 MiB of memory (the cap, --max-memory)"));
  run_free(&r);
  r = RUN("stats", tmp("seqs.pftrace.gz"));
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
  /* A track named by 8 MiB. */
  pbw_t d = {0};
  char *name = malloc((8u << 20) + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(name);
  memset(name, 'n', 8u << 20);
  name[8u << 20] = '\0';
  pbw_uint(&d, 1, 5), pbw_str(&d, 2, name), pbw_sub(&p, 60, &d);
  pbw_uint(&p, 10, 1), pbw_sub(&w, 1, &p);
  write_gz(tmp("track.pftrace.gz"), &w);
  pbw_free(&w);
  pbw_free(&p);
  pbw_free(&t);
  pbw_free(&d);
  free(name);
  r = RUN("stats", tmp("track.pftrace.gz"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "a track's name longer than 1 MiB"));
  run_free(&r);
  unlink(tmp("strings.pb.gz"));
  unlink(tmp("string.pb.gz"));
  unlink(tmp("seqs.pftrace.gz"));
  unlink(tmp("track.pftrace.gz"));
}

/*
 * Row 2: a Profile message's fields in any order: here from 14 down to 1,
 * the reverse of labelprof's own; and the profiles Go's runtime wrote
 * (tests/data/cmd/fuzz/profile-go-runtime-*.pprof: time_nanos or
 * period_type first).
 */
static void test_cmd_pprof_any_field_order(void) {
  pbw_t w = {0}, m = {0}, l = {0};
  pbw_uint(&w, 14, 1);                                    /* default_sample_type */
  pbw_uint(&w, 13, 0);                                    /* comment */
  pbw_uint(&w, 12, 1000);                                 /* period */
  pbw_uint(&m, 1, 1), pbw_uint(&m, 2, 2), pbw_sub(&w, 11, &m); /* period_type */
  pbw_uint(&w, 10, 5), pbw_uint(&w, 9, 7), pbw_uint(&w, 8, 0), pbw_uint(&w, 7, 0);
  pbw_str(&w, 6, ""), pbw_str(&w, 6, "wall"), pbw_str(&w, 6, "nanoseconds"), pbw_str(&w, 6, "g"), pbw_str(&w, 6, "f");
  pbw_uint(&m, 1, 1), pbw_uint(&m, 2, 3), pbw_sub(&w, 5, &m); /* function 1: g */
  pbw_uint(&m, 1, 2), pbw_uint(&m, 2, 4), pbw_sub(&w, 5, &m); /* function 2: f */
  pbw_uint(&l, 1, 1), pbw_uint(&m, 1, 1), pbw_sub(&m, 4, &l), pbw_sub(&w, 4, &m);
  pbw_uint(&l, 1, 2), pbw_uint(&m, 1, 2), pbw_sub(&m, 4, &l), pbw_sub(&w, 4, &m);
  pbw_uint(&m, 1, 1), pbw_sub(&w, 3, &m);                  /* mapping */
  pbw_uint(&m, 1, 1), pbw_uint(&m, 1, 2), pbw_uint(&m, 2, 100), pbw_sub(&w, 2, &m); /* sample: g in f */
  pbw_uint(&m, 1, 1), pbw_uint(&m, 2, 2), pbw_sub(&w, 1, &m); /* sample_type, last */
  CU_ASSERT_FATAL(!w.failed);
  write_file(tmp("reversed.pprof"), (const char *)w.b, w.n);
  pbw_free(&w);
  pbw_free(&m);
  pbw_free(&l);
  run_t r = RUN("folded", tmp("reversed.pprof"));
  CU_ASSERT_EQUAL(r.status, 0);
  expect_text(r.out, "f;g 100\n");
  run_free(&r);
  unlink(tmp("reversed.pprof"));
  r = RUN("folded", data("fuzz/profile-go-runtime-cpu.pprof"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "main.burn "));
  run_free(&r);
  r = RUN("folded", data("fuzz/profile-go-runtime-heap.pprof"));
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "runtime.main;main.main;main.allocate "));
  run_free(&r);
  /* Text is still not a profile. */
  write_file(tmp("hello.txt"), "Hello, world\n", 13);
  r = RUN("stats", tmp("hello.txt"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "not a format labelprof reads"));
  run_free(&r);
  unlink(tmp("hello.txt"));
}

/*
 * Row 12: standard input is not copied whole before its format is known:
 * a pipe that never ends (zeros) is refused after its first bytes, so the
 * writer is stopped (EPIPE) long before 256 MiB.
 */
static void test_cmd_stdin_read_as_needed(void) {
  int fds[2];
  CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
  char err[PATH_MAX];
  snprintf(err, sizeof err, "%s", tmp("stdin.err"));
  fflush(NULL);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600), null = open("/dev/null", O_WRONLY);
    if (e < 0 || null < 0 || dup2(fds[0], 0) < 0 || dup2(null, 1) < 0 || dup2(e, 2) < 0) _exit(126);
    close(fds[1]);
    execl(tool, tool, "stats", "-", (char *)NULL);
    _exit(127);
  }
  close(fds[0]);
  void (*was)(int) = signal(SIGPIPE, SIG_IGN);
  static char zeros[1 << 16];
  uint64_t written = 0;
  while (written < (256u << 20)) {
    ssize_t w = write(fds[1], zeros, sizeof zeros);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    written += (uint64_t)w;
  }
  close(fds[1]);
  signal(SIGPIPE, was);
  int st;
  CU_ASSERT_EQUAL_FATAL(lp_test_wait(pid, 0, &st), 0);
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  CU_ASSERT(written < (8u << 20)); /* the pipe's buffer and the first read, not the whole stream */
  char *said = lp_test_slurp(err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(said);
  CU_ASSERT_PTR_NOT_NULL(strstr(said, "<stdin>:1:1: not a format labelprof reads"));
  free(said);
  unlink(err);
}

/* Row 12: stdin given twice, --max-memory 0, the size grammar of nnapi and layers. */
static void test_cmd_hostile_usage(void) {
  run_t r = RUN("diff", "-", "-");
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "standard input (-) is given twice"));
  run_free(&r);
  r = RUN("flamegraph", "--diff", "-", "-");
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "standard input (-) is given twice"));
  run_free(&r);
  r = RUN("stats", "-", data("x_sorted.json"), "-");
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "standard input (-) is given twice"));
  run_free(&r);
  static const char *const cmds[] = {"stats", "tree", "folded", "flamegraph", "pprof", "layers", "nnapi"};
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    const char *in = i == 6 ? "../nnapi/driver.txt" : i == 5 ? "../layers/app.json" : "x_sorted.json";
    r = RUN(cmds[i], "--max-memory", "0", data(in));
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "--max-memory takes a size above 0"));
    run_free(&r);
    static const char *const sizes[] = {"none", "1GiB", "1T", "64M", "1048576"};
    for (size_t k = 0; k < 5; k++) {
      r = RUN(cmds[i], "--max-memory", sizes[k], data(in));
      if (r.status != 0) fprintf(stderr, "\n%s --max-memory %s: %s", cmds[i], sizes[k], r.err);
      CU_ASSERT_EQUAL(r.status, 0);
      run_free(&r);
    }
  }
  r = RUN("layers", "--max-memory", "1K", data("../layers/app.json"));
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "more than 1 KiB of memory"));
  run_free(&r);
}

int main(void) {
  dir = lp_test_tmpdir("cmd");
  if (!realpath("tools/labelprof", tool)) {
    perror("test_cmd: setup (run from the build directory)");
    return 2;
  }
  CU_TestInfo tests[] = {
      LP_TEST(test_cmd_help_version_usage),
      LP_TEST(test_cmd_x_events_exact),
      LP_TEST(test_cmd_x_at_end_buffered),
      LP_TEST(test_cmd_be_pids_exact),
      LP_TEST(test_cmd_gzip_and_stdin),
      LP_TEST(test_cmd_diff_statuses),
      LP_TEST(test_cmd_bad_input),
      LP_TEST(test_cmd_bad_depth),
      LP_TEST(test_cmd_early_end_clamped),
      LP_TEST(test_cmd_time_limits),
      LP_TEST(test_cmd_memory_cap),
      LP_TEST(test_cmd_nul_in_names),
      LP_TEST(test_cmd_gzip_members),
      LP_TEST(test_cmd_live_trace_totals),
      LP_TEST(test_cmd_states_drops),
      LP_TEST(test_cmd_states_stream_drops),
      LP_TEST(test_cmd_states_rotated_stream_drops_per_file),
      LP_TEST(test_cmd_tree_flat),
      LP_TEST(test_cmd_tree_matches_profile),
      LP_TEST(test_cmd_reads_relative_and_absolute_times),
      LP_TEST(test_cmd_json_any_label),
      LP_TEST(test_cmd_svg_any_label),
      LP_TEST(test_cmd_csv_inert),
      LP_TEST(test_cmd_tree_deep_stack),
      LP_TEST(test_cmd_diff_many_siblings),
      LP_TEST(test_cmd_folded_blank_lines),
      LP_TEST(test_cmd_many_processes),
      LP_TEST(test_cmd_json_long_strings),
      LP_TEST(test_cmd_memory_cap_readers),
      LP_TEST(test_cmd_pprof_any_field_order),
      LP_TEST(test_cmd_stdin_read_as_needed),
      LP_TEST(test_cmd_hostile_usage),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("cmd", tests);
  return rc;
}
