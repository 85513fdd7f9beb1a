/* test_env.c: LABELPROF_* variables, read when the library loads, reported at exit. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"
#include "trace_json.h"

static char dir[] = "/tmp/lp-env-XXXXXX";

typedef struct run {
  pid_t pid;
  int status;
  char *out, *err;
} run_t;

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, len = 0, n;
  char chunk[4096];
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      char *nb = realloc(buf, cap);
      if (!nb) break;
      buf = nb;
    }
    memcpy(buf + len, chunk, n);
    len += n;
  }
  fclose(f);
  if (!buf) buf = calloc(1, 1);
  else buf[len] = '\0';
  return buf;
}

/* Runs tests/env_child with exactly the given environment (NULL-terminated), up to 4 variables. */
static run_t run_child(const char *arg, const char *const *vars) {
  run_t r = {-1, -1, NULL, NULL};
  char outp[64], errp[64];
  snprintf(outp, sizeof outp, "%s/stdout", dir);
  snprintf(errp, sizeof errp, "%s/stderr", dir);
  char *envp[8];
  int n = 0;
  for (; vars && vars[n] && n < 6; n++) envp[n] = (char *)vars[n];
  envp[n++] = "PATH=/usr/bin:/bin";
  envp[n] = NULL;
  /* The child works 10 ms per character of arg; LP_TEST_SLOW times longer under emulation. */
  char work[256];
  size_t len = strlen(arg) * lp_test_slow();
  if (len >= sizeof work) len = sizeof work - 1;
  memset(work, 'x', len);
  work[len] = '\0';
  char *argv[] = {"tests/env_child", work, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int rc = posix_spawn(&pid, "tests/env_child", &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  r.pid = pid;
  CU_ASSERT_EQUAL_FATAL(waitpid(pid, &r.status, 0), pid);
  r.out = slurp(outp);
  r.err = slurp(errp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r.out);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r.err);
  return r;
}

static void run_free(run_t *r) {
  free(r->out);
  free(r->err);
}

static int exited_ok(const run_t *r) { return WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0; }

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

static void test_env_unset_reports_nothing(void) {
  run_t r = run_child("xx", NULL);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  CU_ASSERT_STRING_EQUAL(r.err, "");
  run_free(&r);
  const char *off[] = {"LABELPROF_PROFILE=0", NULL};
  r = run_child("xx", off);
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  CU_ASSERT_STRING_EQUAL(r.err, "");
  run_free(&r);
}

static void test_env_profile_1_prints_tree_to_stdout_at_exit(void) {
  const char *vars[] = {"LABELPROF_PROFILE=1", NULL};
  run_t r = run_child("xxxxx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  const char *tree = strstr(r.out, "labelprof profile (1 threads, ");
  CU_ASSERT_PTR_NOT_NULL(tree);
  CU_ASSERT(tree && strstr(r.out, "child done\n") < tree); /* at exit, after the program's output */
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "% env work\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "    "));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "% other (outside of any label)\n"));
  run_free(&r);
}

static void test_env_profile_path_and_folded_files(void) {
  char prof[96], fold[96], pv[128], fv[128];
  snprintf(prof, sizeof prof, "%s/profile.txt", dir);
  snprintf(fold, sizeof fold, "%s/folded.txt", dir);
  snprintf(pv, sizeof pv, "LABELPROF_PROFILE=%s", prof);
  snprintf(fv, sizeof fv, "LABELPROF_FOLDED=%s", fold);
  const char *vars[] = {pv, fv, NULL};
  run_t r = run_child("xxxx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  CU_ASSERT_STRING_EQUAL(r.err, "");
  char *p = slurp(prof), *f = slurp(fold);
  CU_ASSERT(p && strncmp(p, "labelprof profile (", 19) == 0);
  CU_ASSERT(f && strstr(f, "env work;env inner ") != NULL);
  free(p);
  free(f);
  run_free(&r);
  unlink(prof);
  unlink(fold);
  /* Folded alone also starts the collector. */
  const char *only[] = {fv, NULL};
  r = run_child("xxx", only);
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  f = slurp(fold);
  CU_ASSERT(f && strstr(f, "env work") != NULL);
  free(f);
  run_free(&r);
  unlink(fold);
}

static void test_env_pid_in_path(void) {
  char pv[128], expect[128];
  snprintf(pv, sizeof pv, "LABELPROF_PROFILE=%s/p-%%p.txt", dir);
  const char *vars[] = {pv, NULL};
  run_t r = run_child("xx", vars);
  CU_ASSERT(exited_ok(&r));
  snprintf(expect, sizeof expect, "%s/p-%ld.txt", dir, (long)r.pid);
  char *c = slurp(expect);
  CU_ASSERT(c && strncmp(c, "labelprof profile (", 19) == 0);
  free(c);
  unlink(expect);
  run_free(&r);
}

static void test_env_bad_values_warn_once_and_run_on(void) {
  const char *vars[] = {"LABELPROF_PROFILE=1", "LABELPROF_HZ=abc", "LABELPROF_REPORT=threads,sideways", NULL};
  run_t r = run_child("xxx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(count_lines(r.err), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_HZ"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "1000"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_REPORT"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "sideways"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "child done\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "labelprof profile ("));
  run_free(&r);
  const char *zero[] = {"LABELPROF_PROFILE=1", "LABELPROF_HZ=0", NULL};
  r = run_child("xx", zero);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(count_lines(r.err), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_HZ"));
  run_free(&r);
}

static void test_env_hz_and_report_options(void) {
  const char *vars[] = {"LABELPROF_PROFILE=1", "LABELPROF_HZ=500", "LABELPROF_REPORT=threads,counts,min=0.5", NULL};
  run_t r = run_child("xxx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "samples, 500 Hz)\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nthread "));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " ms]\n"));
  run_free(&r);
}

static void test_env_unwritable_path_is_reported(void) {
  const char *vars[] = {"LABELPROF_PROFILE=/nonexistent-dir/profile.txt", NULL};
  run_t r = run_child("xx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  CU_ASSERT_EQUAL(count_lines(r.err), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "/nonexistent-dir/profile.txt"));
  run_free(&r);
}

static void test_env_trace_written_at_exit(void) {
  char tr[96], tv[128];
  snprintf(tr, sizeof tr, "%s/trace.json", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
  const char *vars[] = {tv, "LABELPROF_PROFILE=1", "LABELPROF_TRACE_MODE=ring", "LABELPROF_TRACE_BUFFER=2", NULL};
  run_t r = run_child("xx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "labelprof profile (")); /* both at once */
  json_t *root = trace_load(tr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root), *od = json_object_get(root, "otherData");
  CU_ASSERT_EQUAL(trace_count(ev, "X", "env work"), 1);
  CU_ASSERT(trace_count(ev, "X", "env inner") > 10);
  CU_ASSERT_PTR_NULL(trace_check_lanes(ev));
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(od, "policy")), "ring");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(od, "budget_bytes")), 2 << 20);
  json_t *pn = trace_find(ev, "M", "process_name");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(pn, "args"), "name")), "env_child");
  json_decref(root);
  unlink(tr);
  run_free(&r);
}

static void test_env_trace_levels(void) {
  char tr[96], tv[128];
  snprintf(tr, sizeof tr, "%s/levels.json", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
  const char *vars[] = {tv, "LABELPROF_LEVELS=request,operator", NULL};
  run_t r = run_child("x", vars);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  json_t *root = trace_load(tr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  /* the child's scopes are runtime-level: none recorded */
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "env work"), 0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(root, "otherData"), "levels")),
                         "request,operator");
  json_decref(root);
  unlink(tr);
  run_free(&r);
}

static void test_env_bad_trace_values_warn_once_each(void) {
  char tr[96], tv[128];
  snprintf(tr, sizeof tr, "%s/bad.json", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
  const char *vars[] = {tv, "LABELPROF_LEVELS=runtime,bogus", "LABELPROF_TRACE_BUFFER=lots",
                        "LABELPROF_TRACE_MODE=sideways", NULL};
  run_t r = run_child("x", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(count_lines(r.err), 3);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_LEVELS"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "bogus"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_TRACE_BUFFER"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "64"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_TRACE_MODE"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "discard"));
  json_t *root = trace_load(tr); /* the defaults were used: runtime scopes recorded */
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "env work"), 1);
  json_decref(root);
  unlink(tr);
  run_free(&r);
  const char *unwritable[] = {"LABELPROF_TRACE=/nonexistent-dir/t.json", NULL};
  r = run_child("x", unwritable);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(count_lines(r.err), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "/nonexistent-dir/t.json"));
  run_free(&r);
}

int main(void) {
  if (!mkdtemp(dir)) return 2;
  CU_TestInfo tests[] = {
      LP_TEST(test_env_unset_reports_nothing),
      LP_TEST(test_env_profile_1_prints_tree_to_stdout_at_exit),
      LP_TEST(test_env_profile_path_and_folded_files),
      LP_TEST(test_env_pid_in_path),
      LP_TEST(test_env_bad_values_warn_once_and_run_on),
      LP_TEST(test_env_hz_and_report_options),
      LP_TEST(test_env_unwritable_path_is_reported),
      LP_TEST(test_env_trace_written_at_exit),
      LP_TEST(test_env_trace_levels),
      LP_TEST(test_env_bad_trace_values_warn_once_each),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("env", tests);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) rc = rc ? rc : 1;
  return rc;
}
