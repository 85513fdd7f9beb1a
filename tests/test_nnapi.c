/*
 * test_nnapi.c: the trace_marker scanner (tools/read/ftrace.c), the layer and phase
 * attribution (tools/attrib.c) on the worked examples of NNAPI's
 * specification, and Python's float repr (tools/nnapi_summary.c).
 */
#include "config.h"

#include "attrib.h"
#include "nnapi.h"
#include "ftrace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

/* ---- attribution --------------------------------------------------------- */

/* One thread's marks: "B <ms> <mark>" or "E <ms>", one per array entry. */
static int run_marks(int compat, const char *const *marks, at_stats_t *st, at_error_t *err) {
  at_ctx_t *c = at_new(compat);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  int th = at_thread(c, 100, 0);
  CU_ASSERT_EQUAL_FATAL(th, 0);
  int rc = 0;
  for (long i = 0; marks[i] && rc == 0; i++) {
    char kind;
    double ms;
    int off = 0;
    CU_ASSERT_FATAL(sscanf(marks[i], "%c %lf %n", &kind, &ms, &off) == 2);
    const char *text = marks[i] + off;
    if (kind == 'B') {
      char buf[256];
      snprintf(buf, sizeof buf, "B|100|%s", text);
      rc = at_begin(c, th, ms / 1000, buf, strlen(buf), i + 1, err);
    } else {
      rc = at_end(c, th, ms / 1000, i + 1, err);
    }
  }
  if (rc == 0) {
    CU_ASSERT_FALSE(at_incomplete(c));
    rc = at_compute(c, st, err);
  }
  at_free(c);
  return rc;
}

#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((a), (b), 1e-6)

static void test_nnapi_init_moves_to_top(void) {
  /* LR_PP[0,10] contains LR_PI[1,4]: preparation 7, initialization 3 */
  static const char *const m[] = {"B 0 [NN_LR_PP]funcR5", "B 1 [NN_LR_PI]funcI", "E 4", "E 10", NULL};
  at_stats_t st;
  at_error_t e;
  CU_ASSERT_EQUAL_FATAL(run_marks(1, m, &st, &e), 0);
  NEAR(st.T[AT_PP][AT_LR], 7);
  NEAR(st.T[AT_PI][AT_LR], 3);
  NEAR(st.T[AT_PO][AT_LR], 10);
}

static void test_nnapi_subtract(void) {
  /* LI_PC[0,10] contains [SUB]LR_PC[1,4]: IPC 7, runtime 3 */
  static const char *const m[] = {"B 0 [NN_LI_PC]prepareModel", "B 1 [SUB][NN_LR_PC]VersionedIDevice::prepareModel",
                                  "E 4", "E 10", NULL};
  at_stats_t st;
  at_error_t e;
  CU_ASSERT_EQUAL_FATAL(run_marks(1, m, &st, &e), 0);
  NEAR(st.T[AT_PC][AT_LI], 7);
  NEAR(st.T[AT_PC][AT_LR], 3);
  /* self: runtime 3 minus IPC 7 */
  NEAR(st.X[AT_PC][AT_LR], -4);
}

static void test_nnapi_subtract_climbs(void) {
  /* LR_PC[0,20] > LI_PC[1,8] > LI_PC[2,6] > [SUB]LR_PC[3,5]: AOSP counts the runtime's 2 twice (22), clean mode once */
  static const char *const m[] = {"B 0 [NN_LR_PC]a", "B 1 [NN_LI_PC]b", "B 2 [NN_LI_PC]c", "B 3 [SUB][NN_LR_PC]d",
                                  "E 5", "E 6", "E 8", "E 20", NULL};
  at_stats_t st;
  at_error_t e;
  CU_ASSERT_EQUAL_FATAL(run_marks(1, m, &st, &e), 0);
  NEAR(st.T[AT_PC][AT_LI], 5);
  NEAR(st.T[AT_PC][AT_LR], 22);
  CU_ASSERT_EQUAL_FATAL(run_marks(0, m, &st, &e), 0);
  NEAR(st.T[AT_PC][AT_LI], 5);
  NEAR(st.T[AT_PC][AT_LR], 20);
}

static void test_nnapi_app_phase_mismatch(void) {
  /* LA_PC[0,10] > {LR_PC[1,2], LR_PT[3,7]}: LA_PC 6, LR_PC 1, LR_PT 4 */
  static const char *const m[] = {"B 0 [NN_LA_PC]app", "B 1 [NN_LR_PC]c", "E 2", "B 3 [NN_LR_PT]t", "E 7", "E 10",
                                  NULL};
  at_stats_t st;
  at_error_t e;
  CU_ASSERT_EQUAL_FATAL(run_marks(1, m, &st, &e), 0);
  NEAR(st.T[AT_PC][AT_LA], 6);
  NEAR(st.T[AT_PC][AT_LR], 1);
  NEAR(st.T[AT_PT][AT_LR], 4);
}

static void test_nnapi_switch(void) {
  /* PTR [1,3] then, switched, PCO [3,8]; the last E closes the placeholder */
  static const char *const m[] = {"B 0 [NN_LR_PE]rt", "B 1 [NN_LC_PTR]funcC1", "B 3 [SW][NN_LC_PCO]funcC1", "E 8",
                                  "E 8.1", "E 10", NULL};
  at_stats_t st;
  at_error_t e;
  CU_ASSERT_EQUAL_FATAL(run_marks(1, m, &st, &e), 0);
  NEAR(st.T[AT_PTR][AT_LC], 2);
  NEAR(st.T[AT_PCO][AT_LC], 5);
  NEAR(st.T[AT_PE][AT_LC], 7);
  /* compat: the runtime's execution comes from the asynchronous API only (none here) */
  NEAR(st.T[AT_PE][AT_LR], 0);
}

static void test_nnapi_subphase_rolls_up(void) {
  /* LR_PE[0,6] > LC_PCO[1,5]: CPU computation 4 and CPU execution 4; clean mode also keeps the runtime's 6 */
  static const char *const m[] = {"B 0 [NN_LR_PE]funcR2", "B 1 [NN_LC_PCO]funcC2", "E 5", "E 6", NULL};
  at_stats_t st;
  at_error_t e;
  CU_ASSERT_EQUAL_FATAL(run_marks(1, m, &st, &e), 0);
  NEAR(st.T[AT_PCO][AT_LC], 4);
  NEAR(st.T[AT_PE][AT_LC], 4);
  CU_ASSERT_EQUAL_FATAL(run_marks(0, m, &st, &e), 0);
  NEAR(st.T[AT_PE][AT_LR], 6);
  NEAR(st.X[AT_PE][AT_LR], 2);
}

static void test_nnapi_async_execution(void) {
  /* SPEC 7: LR_PE = wait end - startCompute start + create + setInput + free = 15 + 1 + 1 + 1 */
  static const char *const m[] = {"B 0 [NN_LA_PE]app",
                                  "B 1 [NN_LR_PE]ANeuralNetworksExecution_create", "E 2",
                                  "B 3 [NN_LR_PIO]ANeuralNetworksExecution_setInput", "E 4",
                                  "B 5 [NN_LR_PE]ANeuralNetworksExecution_startCompute", "E 6",
                                  "B 7 [NN_LR_PE]ANeuralNetworksEvent_wait", "E 20",
                                  "B 21 [NN_LR_PR]ANeuralNetworksExecution_free", "E 22",
                                  "E 30", NULL};
  at_stats_t st;
  at_error_t e;
  CU_ASSERT_EQUAL_FATAL(run_marks(1, m, &st, &e), 0);
  NEAR(st.T[AT_PE][AT_LR], 18);
  NEAR(st.T[AT_PIO][AT_LR], 1);
  NEAR(st.T[AT_PR][AT_LR], 1);
  NEAR(st.T[AT_PE][AT_LA], 30);
  NEAR(st.X[AT_PE][AT_LA], 12);
  CU_ASSERT_EQUAL(st.exec_count[AT_APO], 1);
}

static void test_nnapi_missing_is_nan(void) {
  /* no application scope: the application's cells are missing (n/a), the driver's subphases too */
  static const char *const m[] = {"B 0 [NN_LR_PP]p", "E 2", NULL};
  at_stats_t st;
  at_error_t e;
  CU_ASSERT_EQUAL_FATAL(run_marks(1, m, &st, &e), 0);
  CU_ASSERT_TRUE(isnan(st.T[AT_PP][AT_LA]));
  CU_ASSERT_TRUE(isnan(st.T[AT_PO][AT_LA]));
  CU_ASSERT_TRUE(isnan(st.T[AT_PIO][AT_LD]));
  NEAR(st.T[AT_PE][AT_LD], 0);
  NEAR(st.T[AT_PO][AT_LR], 2);
  NEAR(st.T[AT_PO][AT_LT], 2);
}

static void test_nnapi_errors_name_lines(void) {
  at_stats_t st;
  at_error_t e;
  /* execution inside compilation */
  static const char *const nest[] = {"B 0 [NN_LR_PC]r", "B 1 [NN_LR_PE]a", "E 2", "E 3", NULL};
  memset(&e, 0, sizeof e);
  CU_ASSERT_EQUAL(run_marks(1, nest, &st, &e), -1);
  CU_ASSERT_EQUAL(e.line, 2);
  CU_ASSERT_EQUAL(e.line2, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "nesting violation"));
  /* IPC called from the CPU layer */
  static const char *const lay[] = {"B 0 [NN_LC_PE]c", "B 1 [NN_LI_PE]i", "E 2", "E 3", NULL};
  CU_ASSERT_EQUAL(run_marks(1, lay, &st, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "layer"));
  /* an end with nothing open */
  static const char *const unm[] = {"B 0 [NN_LR_PP]a", "E 1", "E 2", NULL};
  CU_ASSERT_EQUAL(run_marks(1, unm, &st, &e), -1);
  CU_ASSERT_EQUAL(e.line, 3);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "unmatched end"));
  /* a switch with nothing open */
  static const char *const sw[] = {"B 0 [SW][NN_LR_PP]a", "E 1", NULL};
  CU_ASSERT_EQUAL(run_marks(1, sw, &st, &e), -1);
  CU_ASSERT_EQUAL(e.line, 1);
  /* a tag that does not split in three */
  static const char *const tag[] = {"B 0 [NN_LR]a", "E 1", NULL};
  CU_ASSERT_EQUAL(run_marks(1, tag, &st, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bad tag"));
  /* warmup without benchmark: AOSP fails, clean mode does not */
  static const char *const wu[] = {"B 0 [NN_LA_PWU]w", "B 1 [NN_LA_PE]e", "E 2", "E 3", NULL};
  CU_ASSERT_EQUAL(run_marks(1, wu, &st, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "warmup"));
  CU_ASSERT_EQUAL(run_marks(0, wu, &st, &e), 0);
  /* a top-level scope of unspecified phase */
  static const char *const pu[] = {"B 0 [NN_LR_PU]a", "E 1", NULL};
  CU_ASSERT_EQUAL(run_marks(1, pu, &st, &e), -1);
  CU_ASSERT_EQUAL(e.line, 1);
}

static void test_nnapi_hidl_marks(void) {
  /* HIDL marks: client = IPC, server = driver (CPU outside a driver process); the rest is ignored */
  static const char *const m[] = {"B 0 [NN_LR_PC]r", "B 1 HIDL::IDevice::prepareModel::client", "E 4",
                                  "B 5 HWDevice::Commit::", "E 6", "E 10", NULL};
  at_stats_t st;
  at_error_t e;
  CU_ASSERT_EQUAL_FATAL(run_marks(1, m, &st, &e), 0);
  NEAR(st.T[AT_PC][AT_LI], 3);
  NEAR(st.T[AT_PC][AT_LR], 10);
  NEAR(st.X[AT_PC][AT_LR], 7);
}

/* ---- the systrace reader ------------------------------------------------ */

typedef struct got {
  int n;
  struct lp_st_mark m[8];
  char tgid[8][16];
} got_t;

static int collect(void *ctx, const struct lp_st_mark *m) {
  got_t *g = ctx;
  if (g->n < 8) {
    g->m[g->n] = *m;
    snprintf(g->tgid[g->n], sizeof g->tgid[0], "%.*s", (int)m->tgid_len, m->tgid_str);
  }
  g->n++;
  return 0;
}

static int scan(const char *text, got_t *g, struct lp_st_error *e) {
  int hdr;
  memset(g, 0, sizeof *g);
  memset(e, 0, sizeof *e);
  return lp_st_scan(text, strlen(text), collect, g, &hdr, e);
}

#define HDR "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n"
#define OLDHDR "#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION\n"

static void test_systrace_aosp_lines(void) {
  got_t g;
  struct lp_st_error e;
  CU_ASSERT_EQUAL_FATAL(scan("<html>\n" HDR
                             "  HwBinder:784_1-5236  (  784) [001] ...1   397.528915: tracing_mark_write: "
                             "B|784|HIDL::IDevice::prepareModel::server\n"
                             " my-task-12-300 (  300) [000] ...1 1.5: tracing_mark_write: B|300|x\n"
                             "  other-1 ( 1) [000] ...1 2.0: sched_switch: prev_comm=a\n"
                             "  c-7 ( 7) [000] ...1 3.0: tracing_mark_write: C|7|counter|5\n"
                             "  p-9 ( 9) [000] ...1 4.25: tracing_mark_write: E|9\n"
                             "</script>\n"
                             "  p-9 ( 9) [000] ...1 5.0: tracing_mark_write: E|9\n",
                             &g, &e),
                        0);
  CU_ASSERT_EQUAL_FATAL(g.n, 3);
  CU_ASSERT_EQUAL(g.m[0].tid, 5236);
  CU_ASSERT_STRING_EQUAL(g.tgid[0], "784");
  CU_ASSERT_EQUAL(g.m[0].task_len, strlen("HwBinder:784_1"));
  CU_ASSERT_EQUAL(g.m[0].lineno, 3);
  CU_ASSERT_EQUAL(g.m[0].t, strtod("397.528915", NULL)); /* exactly, as Python's float() */
  CU_ASSERT_EQUAL(g.m[1].tid, 300);
  CU_ASSERT_EQUAL(g.m[1].task_len, strlen("my-task-12"));
  CU_ASSERT_EQUAL(g.m[2].tid, 9);
  CU_ASSERT_EQUAL(g.m[2].mark_len, 3);
  CU_ASSERT_FALSE(g.m[0].extended);
  /* a one-character task name: AOSP's expressions want two, the wider grammar reads it */
  CU_ASSERT_TRUE(g.m[2].extended);
}

static void test_systrace_old_header_tgid(void) {
  got_t g;
  struct lp_st_error e;
  /* old header: the process comes from the mark, then from the thread's last line */
  CU_ASSERT_EQUAL_FATAL(scan(OLDHDR "  p-9  [000] ...1 1.000001: tracing_mark_write: B|42|x\r\n"
                                    "  p-9  [000] ...1 1.000002: tracing_mark_write: E\r"
                                    "  p-9  [000] ...1 1.000003: tracing_mark_write: E\n",
                             &g, &e),
                        0);
  CU_ASSERT_EQUAL_FATAL(g.n, 3);
  CU_ASSERT_STRING_EQUAL(g.tgid[1], "42");
  CU_ASSERT_EQUAL(g.m[1].tgid, 42);
  CU_ASSERT_EQUAL(g.m[2].lineno, 4);
  /* a bare E on a thread never seen: no process */
  CU_ASSERT_EQUAL(scan(OLDHDR "  p-9  [000] ...1 1.0: tracing_mark_write: E\n", &g, &e), -1);
  CU_ASSERT_EQUAL(e.lineno, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no process id"));
}

static void test_systrace_beyond_aosp(void) {
  got_t g;
  struct lp_st_error e;
  CU_ASSERT_EQUAL_FATAL(
      scan("# tracer: nop\n"
           "#           TASK-PID     TGID     CPU#  |||||  TIMESTAMP  FUNCTION\n"
           "  a_task_name_of_30_characters-77 (-------) [002] d..1. 12.000001: tracing_mark_write: B|70|[NN_LR_PP]x\n"
           "  a_task_name_of_30_characters-77 (-------) [002] d..1. 12.000002: tracing_mark_write: E|70\n",
           &g, &e),
      0);
  CU_ASSERT_EQUAL_FATAL(g.n, 2);
  CU_ASSERT_EQUAL(g.m[0].tid, 77);
  CU_ASSERT_STRING_EQUAL(g.tgid[0], "70");
  CU_ASSERT_TRUE(g.m[0].extended);
  CU_ASSERT_EQUAL(g.m[0].task_len, 28);
  /* dashes and a bare E: fatal */
  CU_ASSERT_EQUAL(scan(HDR "  p-77 (-------) [002] d..1. 12.000002: tracing_mark_write: E\n", &g, &e), -1);
  /* trace-cmd report */
  CU_ASSERT_EQUAL_FATAL(scan("version = 6\ncpus=4\n"
                             "        prog-1234  [001]  5678.123456: print:                tracing_mark_write: "
                             "B|1234|label\n",
                             &g, &e),
                        0);
  CU_ASSERT_EQUAL_FATAL(g.n, 1);
  CU_ASSERT_EQUAL(g.m[0].tid, 1234);
  CU_ASSERT_EQUAL(g.m[0].ts_len, strlen("5678.123456"));
}

static void test_systrace_bad_lines(void) {
  got_t g;
  struct lp_st_error e;
  /* no header: nothing is read */
  CU_ASSERT_EQUAL(scan("  p-9 ( 9) [000] ...1 1.0: tracing_mark_write: B|9|x\n", &g, &e), 0);
  CU_ASSERT_EQUAL(g.n, 0);
  CU_ASSERT_EQUAL(scan("", &g, &e), 0);
  /* a timestamp without a fraction, a one-character task name */
  CU_ASSERT_EQUAL(scan(HDR "  p-9 ( 9) [000] ...1 1: tracing_mark_write: B|9|x\n", &g, &e), -1);
  CU_ASSERT_EQUAL(e.lineno, 2);
  /* truncated, garbage: skipped unless they hold a mark */
  CU_ASSERT_EQUAL(scan(HDR "  p-9 ( 9) [000] ...1 1.0: tracing_mar\n\377\376garbage\n\n", &g, &e), 0);
  CU_ASSERT_EQUAL(g.n, 0);
  CU_ASSERT_EQUAL(scan(HDR "garbage [NN_LR_PP] here\n", &g, &e), -1);
}

/* ---- output helpers ------------------------------------------------------ */

static void test_nnapi_py_float(void) {
  static const struct {
    double v;
    const char *s;
  } cases[] = {{2.000000000000668, "2.000000000000668"}, {100.0, "100.0"}, {1e-05, "1e-05"},
               {0.0001, "0.0001"}, {1e16, "1e+16"}, {1.5e16, "1.5e+16"}, {123456789012345.6, "123456789012345.6"},
               {-6.000000000000227, "-6.000000000000227"}, {0.1, "0.1"}, {0.0, "0.0"}, {-0.0, "-0.0"},
               {84.23700000275858, "84.23700000275858"}, {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"}};
  char buf[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lp_py_float(buf, sizeof buf, cases[i].v);
    CU_ASSERT_STRING_EQUAL(buf, cases[i].s);
  }
  lp_py_float(buf, sizeof buf, NAN);
  CU_ASSERT_STRING_EQUAL(buf, "NaN");
}

static void test_nnapi_buffer_runs(void) {
  /* two runs, the second starting at the second [NN_LA_PO]; the JSON list has both */
  const char *t = HDR "  p-1 ( 1) [000] ...1 1.000: tracing_mark_write: B|1|[NN_LA_PO]one\n"
                      "  p-1 ( 1) [000] ...1 1.010: tracing_mark_write: E|1\n"
                      "  p-1 ( 1) [000] ...1 2.000: tracing_mark_write: B|1|[NN_LA_PO]two \"q\" \xc3\xa9\n"
                      "  p-1 ( 1) [000] ...1 2.001: tracing_mark_write: B|1|[NN_LR_PP]p\n"
                      "  p-1 ( 1) [000] ...1 2.003: tracing_mark_write: E|1\n"
                      "  p-1 ( 1) [000] ...1 2.020: tracing_mark_write: E|1\n";
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(lp_nnapi_buffer("mem", t, strlen(t), 0, 0, 1, f), 0);
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "[\n{\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n}\n,\n{\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"starting_mark\": \"B|1|[NN_LA_PO]one\""));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"starting_mark\": \"B|1|[NN_LA_PO]two \\\"q\\\" \\u00e9\""));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"LA_PO\": 10.0"));
  CU_ASSERT_EQUAL(len >= 3 && strcmp(out + len - 3, "}\n]") == 0 ? 0 : strcmp(out + len - 2, "]\n"), 0);
  free(out);
}

int main(void) {
  CU_TestInfo tests[] = {
      LP_TEST(test_nnapi_init_moves_to_top),
      LP_TEST(test_nnapi_subtract),
      LP_TEST(test_nnapi_subtract_climbs),
      LP_TEST(test_nnapi_app_phase_mismatch),
      LP_TEST(test_nnapi_switch),
      LP_TEST(test_nnapi_subphase_rolls_up),
      LP_TEST(test_nnapi_async_execution),
      LP_TEST(test_nnapi_missing_is_nan),
      LP_TEST(test_nnapi_errors_name_lines),
      LP_TEST(test_nnapi_hidl_marks),
      LP_TEST(test_systrace_aosp_lines),
      LP_TEST(test_systrace_old_header_tgid),
      LP_TEST(test_systrace_beyond_aosp),
      LP_TEST(test_systrace_bad_lines),
      LP_TEST(test_nnapi_py_float),
      LP_TEST(test_nnapi_buffer_runs),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("nnapi", tests);
}
