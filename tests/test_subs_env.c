/*
 * test_subs_env.c: LABELPROF_SUBSCRIBERS, through child processes: good and
 * bad subscriber objects, callstats.so, and the example subscriber.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

static const char *dir;
static char child[4096], good[4096], noentry[4096], callstats[4096], example[4096];

typedef lp_test_run_t run_t;

/* Runs subs_child [arg] with exactly these variables (NULL-terminated, up to 6). */
static run_t run(const char *arg, const char *const *vars) {
  char *argv[] = {child, (char *)arg, NULL};
  return lp_test_run(child, argv, vars, NULL);
}

static void run_free(run_t *r) { lp_test_run_free(r); }

/* The program's own output and status, whatever the subscribers do. */
static void unchanged(const run_t *r) {
  CU_ASSERT(WIFEXITED(r->status));
  CU_ASSERT_EQUAL(WEXITSTATUS(r->status), 3);
  CU_ASSERT_STRING_EQUAL(r->out, "subs_child: done\n");
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

static char var[2][10000];
static const char *subs(const char *a, const char *b) {
  snprintf(var[0], sizeof var[0], "LABELPROF_SUBSCRIBERS=%s%s%s", a, b ? "," : "", b ? b : "");
  return var[0];
}

static void test_no_variable_and_empty_list(void) {
  run_t r = run(NULL, NULL);
  unchanged(&r);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  run_free(&r);
  const char *v[] = {"LABELPROF_SUBSCRIBERS=", NULL};
  r = run(NULL, v);
  unchanged(&r);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  run_free(&r);
}

static void test_good_subscriber_sees_every_label(void) {
  const char *v[] = {subs(good, NULL), NULL};
  run_t r = run(NULL, v);
  unchanged(&r);
  /* 100 alpha + 1000 beta + 1 delta scopes. */
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "good init labelprof.labels 0.1 0.1.0\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "good finish labelprof.labels begins=1101 ends=1101\n"));
  CU_ASSERT_EQUAL(count(r.err, "labelprof:"), 0);
  run_free(&r);
}

static void test_duplicate_path_loads_once(void) {
  const char *v[] = {subs(good, good), NULL};
  run_t r = run(NULL, v);
  unchanged(&r);
  CU_ASSERT_EQUAL(count(r.err, "good init labelprof.labels"), 1);
  CU_ASSERT_EQUAL(count(r.err, "good finish labelprof.labels begins=1101 ends=1101"), 1);
  run_free(&r);
}

/*
 * The same object under another spelling of its path loads once too: the
 * test above passes on the comparison of path strings alone, and a check of
 * the loaded handles that went missing would go unnoticed.
 */
static void test_same_object_by_another_path_loads_once(void) {
  char other[4200];
  const char *slash = strrchr(good, '/');
  CU_ASSERT_PTR_NOT_NULL_FATAL(slash);
  snprintf(other, sizeof other, "%.*s/.%s", (int)(slash - good), good, slash);
  CU_ASSERT_STRING_NOT_EQUAL(other, good);
  const char *v[] = {subs(good, other), NULL};
  run_t r = run(NULL, v);
  unchanged(&r);
  CU_ASSERT_EQUAL(count(r.err, "good init labelprof.labels"), 1);
  CU_ASSERT_EQUAL(count(r.err, "good finish labelprof.labels begins=1101 ends=1101"), 1);
  CU_ASSERT_EQUAL(count(r.err, "labelprof:"), 0);
  run_free(&r);
}

static void test_bad_objects_get_one_line_and_are_skipped(void) {
  const char *missing = "/nonexistent/labelprof-nothing.so";
  const char *v[] = {subs(noentry, missing), NULL};
  run_t r = run(NULL, v);
  unchanged(&r);
  CU_ASSERT_EQUAL(count(r.err, "\n"), 2);
  CU_ASSERT_EQUAL(count(r.err, "labelprof: LABELPROF_SUBSCRIBERS: "), 2);
  const char *line = strstr(r.err, noentry);
  CU_ASSERT_PTR_NOT_NULL(line);
  if (line) CU_ASSERT_PTR_NOT_NULL(strstr(line, "does not export labelprof_subscriber_finish"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "cannot load /nonexistent/labelprof-nothing.so"));
  CU_ASSERT_PTR_NULL(strstr(r.err, "noentry init")); /* skipped: never called */
  run_free(&r);
  /* A bad one does not stop a good one after it. */
  const char *w[] = {subs(missing, good), NULL};
  r = run(NULL, w);
  unchanged(&r);
  CU_ASSERT_EQUAL(count(r.err, "labelprof: LABELPROF_SUBSCRIBERS: "), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "good finish labelprof.labels begins=1101 ends=1101"));
  run_free(&r);
}

/* The callstats line of label in report: its calls, or -1. */
static long calls_of(const char *report, const char *label, const char *tid) {
  char want[128];
  snprintf(want, sizeof want, " %s%s%s\n", tid ? tid : "", tid ? " " : "", label);
  for (const char *line = report; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
    size_t wl = strlen(want);
    if (len >= wl && strncmp(line + len - wl, want, wl) == 0) return strtol(line, NULL, 10);
  }
  return -1;
}

static void test_callstats_counts(void) {
  const char *v[] = {subs(callstats, NULL), NULL};
  run_t r = run(NULL, v);
  unchanged(&r);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "labelprof callstats: 3 labels, 1101 calls"));
  CU_ASSERT_EQUAL(calls_of(r.err, "alpha", NULL), 100);
  CU_ASSERT_EQUAL(calls_of(r.err, "beta", NULL), 1000);
  CU_ASSERT_EQUAL(calls_of(r.err, "delta", NULL), 1);
  /* Sorted by total: alpha holds every beta. */
  CU_ASSERT(strstr(r.err, " alpha\n") < strstr(r.err, " beta\n"));
  run_free(&r);
  /* To a file, per thread. */
  char path[256];
  snprintf(path, sizeof path, "%s/callstats.txt", dir);
  snprintf(var[1], sizeof var[1], "LABELPROF_CALLSTATS=%s", path);
  const char *w[] = {subs(callstats, NULL), var[1], "LABELPROF_CALLSTATS_THREADS=1", NULL};
  r = run("threads", w);
  unchanged(&r);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  char *rep = lp_test_slurp(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rep);
  CU_ASSERT_PTR_NOT_NULL(strstr(rep, "labelprof callstats: 6 label-thread pairs, 2202 calls"));
  CU_ASSERT_EQUAL(count(rep, " alpha\n"), 2);
  CU_ASSERT_EQUAL(count(rep, " beta\n"), 2);
  /* Each thread's line says 100 alpha. */
  /* Per thread: each of the two threads has its 100 alpha and 1000 beta. */
  unsigned long long alpha_tid[2] = {0, 0}, beta_tid[2] = {0, 0};
  int alpha100 = 0, beta1000 = 0;
  for (const char *line = rep; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    unsigned long long c, t;
    double x, y, z;
    char label[64];
    if (sscanf(line, "%llu %lf %lf %lf %llu %63s", &c, &x, &y, &z, &t, label) != 6) continue;
    if (strcmp(label, "alpha") == 0 && c == 100 && alpha100 < 2) alpha_tid[alpha100++] = t;
    if (strcmp(label, "beta") == 0 && c == 1000 && beta1000 < 2) beta_tid[beta1000++] = t;
  }
  CU_ASSERT_EQUAL(beta1000, 2);
  CU_ASSERT_NOT_EQUAL(alpha_tid[0], alpha_tid[1]);
  CU_ASSERT((alpha_tid[0] == beta_tid[0] && alpha_tid[1] == beta_tid[1]) ||
            (alpha_tid[0] == beta_tid[1] && alpha_tid[1] == beta_tid[0]));
  CU_ASSERT_EQUAL(alpha100, 2);
  free(rep);
  run_free(&r);
}

static void test_example_subscriber(void) {
  const char *v[] = {subs(example, NULL), NULL};
  run_t r = run("threads", v);
  unchanged(&r);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "example subscriber: stream labelprof.labels 0.1 (0.1.0)\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "example subscriber: 2202 scopes began, 2202 ended, 0 unpaired, 10 instants\n"));
  run_free(&r);
}

int main(void) {
  dir = lp_test_tmpdir("subs");
  if (!realpath("tests/subs_child", child) || !realpath("tests/.libs/subs_good.so", good) ||
      !realpath("tests/.libs/subs_noentry.so", noentry) || !realpath("subscribers/.libs/callstats.so", callstats) ||
      !realpath("examples/.libs/subscriber.so", example)) {
    fprintf(stderr, "test_subs_env: run from the build directory after make check built the subscribers\n");
    return 2;
  }
  CU_TestInfo tests[] = {
      LP_TEST(test_no_variable_and_empty_list),
      LP_TEST(test_good_subscriber_sees_every_label),
      LP_TEST(test_duplicate_path_loads_once),
      LP_TEST(test_same_object_by_another_path_loads_once),
      LP_TEST(test_bad_objects_get_one_line_and_are_skipped),
      LP_TEST(test_callstats_counts),
      LP_TEST(test_example_subscriber),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("subscribers from the environment", tests);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return rc;
}
