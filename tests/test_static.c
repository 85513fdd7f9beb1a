/*
 * test_static.c: a program linked with liblabelprof.a honours the LABELPROF_*
 * variables as one linked with the shared library does. It runs
 * tests/env_child_static (tests/env_child.c linked statically against
 * labelprof, dynamically against libc) with LABELPROF_PROFILE,
 * LABELPROF_FOLDED and LABELPROF_TRACE set, and reads the three files back.
 * The environment is read by a load-time constructor; if the object that
 * holds it is not pulled out of the archive, nothing is written. Then
 * LABELPROF_SUBSCRIBERS with a static program: tests/subs_child_static,
 * linked with -rdynamic, feeds a subscriber object; without -rdynamic, or
 * with an object that brings its own liblabelprof.so, one line says why.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"
#include "trace_json.h"

#define CHILD "tests/env_child_static"

static const char *dir;
/* Everything the test may leave in dir: the reports and the child's output. */
static char prof[256], fold[256], trace[256];


/*
 * The child must be a real program: a libtool wrapper script means libtool
 * linked it against the uninstalled shared library, and the test would
 * prove nothing about the static one.
 */
static int is_elf(const char *path) {
  char magic[4] = {0};
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t got = fread(magic, 1, sizeof magic, f);
  fclose(f);
  if (got != sizeof magic || memcmp(magic, "\177ELF", 4) != 0) {
    fprintf(stderr, "\n    %s is not an ELF program (a libtool wrapper script?)\n", path);
    return 0;
  }
  return 1;
}

static void test_static_child_is_linked_statically(void) {
  CU_ASSERT(is_elf(CHILD));
  CU_ASSERT(is_elf("tests/subs_child_static"));
}

/* What the last child wrote: taken by the test that reads it. */
static lp_test_run_t last;
static char *take(char **p) {
  char *v = *p;
  *p = NULL;
  return v;
}

/* Runs the static child with envp and argv[1..2]; its status, 0 if it exited 0. */
static int run_static(char *const *envp, const char *mode) {
  /* 10 ms of labelled work per character: 100 ms, LP_TEST_SLOW times longer under emulation. */
  char work[256];
  size_t len = 10 * lp_test_slow();
  if (len >= sizeof work) len = sizeof work - 1;
  memset(work, 'x', len);
  work[len] = '\0';
  char *argv[] = {CHILD, work, (char *)mode, NULL};
  lp_test_run_free(&last);
  last = lp_test_run(CHILD, argv, (const char *const *)envp, NULL);
  return lp_test_exit_code(&last) == 0 ? 0 : -1;
}

static void test_static_env_writes_profile_folded_and_trace(void) {
  char pv[300], fv[300], tv[300];
  snprintf(pv, sizeof pv, "LABELPROF_PROFILE=%s", prof);
  snprintf(fv, sizeof fv, "LABELPROF_FOLDED=%s", fold);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", trace);
  char *envp[] = {pv, fv, tv, "PATH=/usr/bin:/bin", NULL};
  CU_ASSERT_EQUAL(run_static(envp, "plain"), 0);

  char *o = take(&last.out), *e = take(&last.err);
  lp_test_strip_rate_warning(e);
  CU_ASSERT(o && strcmp(o, "child done\n") == 0);
  CU_ASSERT(e && strcmp(e, "") == 0);
  if (e && *e) fprintf(stderr, "\n    the child's stderr: %s\n", e);
  free(o);
  free(e);

  char *p = lp_test_slurp(prof), *f = lp_test_slurp(fold);
  if (!p) fprintf(stderr, "\n    %s was not written: the environment was ignored\n", prof);
  if (!f) fprintf(stderr, "\n    %s was not written: the environment was ignored\n", fold);
  CU_ASSERT(p && strncmp(p, "labelprof profile by wall time (", 32) == 0);
  CU_ASSERT(p && strstr(p, "% env work\n") != NULL);
  CU_ASSERT(f && strstr(f, "env work") != NULL);
  free(p);
  free(f);

  if (access(trace, F_OK) != 0) fprintf(stderr, "\n    %s was not written: the environment was ignored\n", trace);
  json_t *root = access(trace, F_OK) == 0 ? trace_load(trace) : NULL;
  CU_ASSERT_PTR_NOT_NULL(root);
  if (root) {
    json_t *ev = trace_events(root);
    CU_ASSERT_EQUAL(trace_count(ev, "X", "env work"), 1);
    CU_ASSERT(trace_count(ev, "X", "env inner") > 0);
    CU_ASSERT_PTR_NULL(trace_check_lanes(ev));
    json_decref(root);
  }
}

/*
 * With the static library, the program's destructor functions run after
 * labelprof's exit handler (with the shared one, before it: test_env.c):
 * their labels work and are not recorded. Its atexit handlers run before.
 */
static void test_static_destructors_run_after_the_reports(void) {
  char tv[300];
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", trace);
  char *envp[] = {tv, "PATH=/usr/bin:/bin", NULL};
  CU_ASSERT_EQUAL(run_static(envp, "atexit"), 0);
  json_t *root = trace_load(trace);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "program atexit"), 1);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "destructor"), 0);
  json_decref(root);
}

/* ---- subscriber objects and a static program ---------------------------------------------- */

/* Runs prog with one argument and LABELPROF_SUBSCRIBERS=module; its exit status, -1 if it did not exit. */
static int run_subscribed(const char *prog, const char *arg, const char *module) {
  char mod[4096], sv[4200];
  CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(module, mod));
  snprintf(sv, sizeof sv, "LABELPROF_SUBSCRIBERS=%s", mod);
  const char *vars[] = {sv, NULL};
  char *argv[] = {(char *)prog, (char *)arg, NULL};
  lp_test_run_free(&last);
  last = lp_test_run(prog, argv, vars, NULL);
  return lp_test_exit_code(&last);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; p && (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

/* Linked with -rdynamic, a static program lends its labelprof to the object: every label reaches it. */
static void test_static_rdynamic_program_feeds_subscribers(void) {
  CU_ASSERT_EQUAL(run_subscribed("tests/subs_child_static", NULL, "tests/.libs/subs_good.so"), 3);
  char *o = take(&last.out), *e = take(&last.err);
  CU_ASSERT(o && strcmp(o, "subs_child: done\n") == 0);
  /* 100 alpha + 1000 beta + 1 delta scopes, as with the shared library (test_subs_env). */
  CU_ASSERT(e && strstr(e, "good finish labelprof.labels begins=1101 ends=1101\n") != NULL);
  CU_ASSERT_EQUAL(count(e, "labelprof:"), 0);
  if (e && !strstr(e, "begins=1101")) fprintf(stderr, "\n    the child's stderr: %s\n", e);
  free(o);
  free(e);
}

/* Without -rdynamic the object cannot load; the line says why, and the program runs on unchanged. */
static void test_static_program_without_rdynamic_says_so(void) {
  CU_ASSERT_EQUAL(run_subscribed(CHILD, "x", "tests/.libs/subs_good.so"), 0);
  char *o = take(&last.out), *e = take(&last.err);
  lp_test_strip_rate_warning(e);
  CU_ASSERT(o && strcmp(o, "child done\n") == 0);
  CU_ASSERT_EQUAL(count(e, "\n"), 1);
  CU_ASSERT(e && strstr(e, "labelprof: LABELPROF_SUBSCRIBERS: cannot load ") == e);
  CU_ASSERT(e && strstr(e, "subs_good.so") != NULL);
  CU_ASSERT(e && strstr(e, "linked in with -rdynamic") != NULL);
  CU_ASSERT(e && strstr(e, "good init") == NULL);
  free(o);
  free(e);
}

/*
 * An object linked with -llabelprof subscribes to a second library of its
 * own, which sees none of the program's labels: said in one line. (That
 * copy reads the environment too, and runs the object's init itself.)
 */
static void test_static_program_refuses_a_second_copy(void) {
  CU_ASSERT_EQUAL(run_subscribed(CHILD, "x", "tests/.libs/subs_linked.so"), 0);
  char *o = take(&last.out), *e = take(&last.err);
  lp_test_strip_rate_warning(e);
  CU_ASSERT(o && strcmp(o, "child done\n") == 0);
  CU_ASSERT_EQUAL(count(e, "labelprof: "), 1);
  CU_ASSERT(e && strstr(e, "brings a second copy of labelprof") != NULL);
  CU_ASSERT(e && strstr(e, "begins=0 ends=0") != NULL); /* what the second copy gave it */
  free(o);
  free(e);
}

int main(void) {
#ifdef LP_TEST_NO_STATIC_LIB
  fprintf(stderr, "SKIP: liblabelprof.a is not built (configure --disable-static); nothing to test\n");
  return 77;
#endif
  dir = lp_test_tmpdir("static");
  snprintf(prof, sizeof prof, "%s/p.txt", dir);
  snprintf(fold, sizeof fold, "%s/p.folded", dir);
  snprintf(trace, sizeof trace, "%s/t.json", dir);
  CU_TestInfo tests[] = {
      LP_TEST(test_static_child_is_linked_statically),
      LP_TEST(test_static_env_writes_profile_folded_and_trace),
      LP_TEST(test_static_destructors_run_after_the_reports),
      LP_TEST(test_static_rdynamic_program_feeds_subscribers),
      LP_TEST(test_static_program_without_rdynamic_says_so),
      LP_TEST(test_static_program_refuses_a_second_copy),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("static", tests);
  lp_test_run_free(&last);
  return rc;
}
