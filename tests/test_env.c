/* test_env.c: LABELPROF_* variables, read when the library loads, reported at exit. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include "labelprof.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "runner.h"
#include "trace_json.h"

static const char *dir;

static char child_path[4096];

typedef lp_test_run_t run_t;

/*
 * The collector's warning that it kept under 90% of its rate depends on how
 * busy the machine is (sanitizers, other jobs): taken out of stderr before
 * tests look at it, except where a test asks for it.
 */
static int rate_warnings;

typedef struct spawn_opts {
  const char *duration, *mode, *arg; /* env_child's arguments */
  const char *cwd;                   /* NULL: the test's */
  rlim_t fsize;                      /* RLIMIT_FSIZE in bytes; 0: unlimited */
} spawn_opts_t;

/* Runs tests/env_child with exactly the given environment (NULL-terminated, up to 8 variables). */
static run_t spawn_child(const spawn_opts_t *o, const char *const *vars) {
  /* The child works 10 ms per character of its duration; LP_TEST_SLOW times longer under emulation. */
  char work[256];
  size_t len = strlen(o->duration) * lp_test_slow();
  if (len >= sizeof work) len = sizeof work - 1;
  memset(work, 'x', len);
  work[len] = '\0';
  char *argv[] = {child_path, work, (char *)(o->mode ? o->mode : "plain"), (char *)o->arg, NULL};
  lp_test_child_t c = {NULL, o->cwd, o->fsize, 0, 0, 0};
  run_t r = lp_test_run(child_path, argv, vars, &c);
  rate_warnings += lp_test_strip_rate_warning(r.err);
  return r;
}

static run_t run_child(const char *duration, const char *const *vars) {
  spawn_opts_t o = {duration, NULL, NULL, NULL, 0};
  return spawn_child(&o, vars);
}

static void run_free(run_t *r) {
  lp_test_run_free(r);
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

/* LABELPROF_PROFILE=1 reports on stderr, never into the program's own output; "-" asks for stdout. */
static void test_env_profile_1_reports_on_stderr(void) {
  const char *vars[] = {"LABELPROF_PROFILE=1", NULL};
  run_t r = run_child("xxxxx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  CU_ASSERT_EQUAL(strncmp(r.err, "labelprof profile by wall time (1 threads, ", 43), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "% env request\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "    "));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "% other (outside of any label)\n"));
  run_free(&r);
  const char *out[] = {"LABELPROF_PROFILE=-", NULL};
  r = run_child("xx", out);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  const char *tree = strstr(r.out, "labelprof profile by wall time (1 threads, ");
  CU_ASSERT_PTR_NOT_NULL(tree);
  CU_ASSERT(tree && strstr(r.out, "child done\n") < tree); /* at exit, after the program's output */
  run_free(&r);
}

static void test_env_profile_path_and_folded_files(void) {
  char prof[256], fold[256], pv[300], fv[300];
  snprintf(prof, sizeof prof, "%s/profile.txt", dir);
  snprintf(fold, sizeof fold, "%s/folded.txt", dir);
  snprintf(pv, sizeof pv, "LABELPROF_PROFILE=%s", prof);
  snprintf(fv, sizeof fv, "LABELPROF_FOLDED=%s", fold);
  const char *vars[] = {pv, fv, NULL};
  run_t r = run_child("xxxxxxxxxx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  CU_ASSERT_STRING_EQUAL(r.err, "");
  char *p = lp_test_slurp(prof), *f = lp_test_slurp(fold);
  CU_ASSERT(p && strncmp(p, "labelprof profile by wall time (", 32) == 0);
  CU_ASSERT(f && strstr(f, "env work;env inner ") != NULL);
  free(p);
  free(f);
  run_free(&r);
  unlink(prof);
  unlink(fold);
  /* Folded alone also starts the collector. */
  const char *only[] = {fv, NULL};
  r = run_child("xxxxxxxxxx", only);
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  f = lp_test_slurp(fold);
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
  char *c = lp_test_slurp(expect);
  CU_ASSERT(c && strncmp(c, "labelprof profile by wall time (", 32) == 0);
  free(c);
  unlink(expect);
  run_free(&r);
}

static void test_env_bad_values_warn_once_and_run_on(void) {
  const char *vars[] = {"LABELPROF_PROFILE=-", "LABELPROF_HZ=abc", "LABELPROF_REPORT=threads,sideways", NULL};
  run_t r = run_child("xxx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(count_lines(r.err), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_HZ"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "1000"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_REPORT"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "sideways"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "child done\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "labelprof profile by wall time ("));
  run_free(&r);
  const char *zero[] = {"LABELPROF_PROFILE=-", "LABELPROF_HZ=0", NULL};
  r = run_child("xx", zero);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(count_lines(r.err), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_HZ"));
  run_free(&r);
  /* Bad values warn even when no report is asked for. */
  const char *alone[] = {"LABELPROF_HZ=abc", "LABELPROF_REPORT=min=200", "LABELPROF_CLOCK=sundial", NULL};
  r = run_child("x", alone);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  CU_ASSERT_EQUAL(count_lines(r.err), 3);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_HZ='abc'"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "'min=200'"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_CLOCK='sundial'"));
  run_free(&r);
}

/* LABELPROF_COLLECTOR_SCHED: the report says how the collector ran; a bad value warns and keeps the slice. */
static void test_env_collector_sched(void) {
  const char *def[] = {"LABELPROF_PROFILE=-", "LABELPROF_COLLECTOR_SCHED=default", NULL};
  run_t r = run_child("xx", def);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " of one CPU, default scheduling\n"));
  run_free(&r);
  const char *bad[] = {"LABELPROF_COLLECTOR_SCHED=fifo:0", NULL};
  const char *worse[] = {"LABELPROF_COLLECTOR_SCHED=fifo:100", NULL};
  const char *typo[] = {"LABELPROF_COLLECTOR_SCHED=realtime", NULL};
  const char *const *each[] = {bad, worse, typo};
  for (int i = 0; i < 3; i++) {
    r = run_child("x", each[i]);
    CU_ASSERT(exited_ok(&r));
    CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
    CU_ASSERT_EQUAL(count_lines(r.err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_COLLECTOR_SCHED='"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "using the default, slice"));
    run_free(&r);
  }
  const char *fifo[] = {"LABELPROF_PROFILE=-", "LABELPROF_COLLECTOR_SCHED=fifo:2", NULL};
  r = run_child("xx", fifo);
  CU_ASSERT(exited_ok(&r));
  if (geteuid() == 0) {
    CU_ASSERT_STRING_EQUAL(r.err, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " of one CPU, SCHED_FIFO 2\n"));
  }
  run_free(&r);
}

static void test_env_hz_and_report_options(void) {
  /* Spaces around commas, as people type lists. */
  const char *vars[] = {"LABELPROF_PROFILE=-", "LABELPROF_HZ=500", "LABELPROF_REPORT=threads, counts , min=0.5", NULL};
  run_t r = run_child("xxx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_PTR_NULL(strstr(r.err, "LABELPROF_REPORT"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " s at 500 Hz requested, "));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nthread "));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " ms]\n"));
  run_free(&r);
  /* flat: the table after the tree, its header naming the columns */
  const char *flat[] = {"LABELPROF_PROFILE=-", "LABELPROF_REPORT=flat", NULL};
  r = run_child("xxx", flat);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  const char *t = strstr(r.out, "\nflat profile by wall time: ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_PTR_NOT_NULL(strstr(t, "\n   total     self  label\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(t, "%  env inner\n"));
  run_free(&r);
}

static void test_env_report_by_cpu(void) {
  /* The work spins: "env work" holds nearly all of the CPU time, and the header says the tree is by CPU. */
  const char *vars[] = {"LABELPROF_PROFILE=-", "LABELPROF_REPORT=cpu,counts", NULL};
  run_t r = run_child("xxxxxxxxxx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_PTR_NULL(strstr(r.err, "LABELPROF_REPORT"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "labelprof profile by CPU time ("));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " CPU]\n"));
  run_free(&r);
  /* LABELPROF_CPU=0 turns CPU samples off: the report is by wall time, and says why. */
  const char *off[] = {"LABELPROF_PROFILE=-", "LABELPROF_REPORT=cpu", "LABELPROF_CPU=0", NULL};
  r = run_child("xxx", off);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "labelprof profile by wall time ("));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "note: by wall time: CPU time was not measured"));
  run_free(&r);
  /* cpu,flat: the flat table is by CPU time too, and says so; the signal is the one asked for. */
  const char *flat[] = {"LABELPROF_PROFILE=-", "LABELPROF_REPORT=cpu,flat", "LABELPROF_CPU_SIGNAL=RTMIN+3", NULL};
  r = run_child("xxxxxxxxxx", flat);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "labelprof profile by CPU time ("));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " on its own CPU timer (SIGRTMIN+3)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nflat profile by CPU time: "));
  CU_ASSERT_PTR_NULL(strstr(r.out, "by wall time"));
  run_free(&r);
  /* A signal the CPU samples may not take: a warning, and the default. */
  const char *bad[] = {"LABELPROF_PROFILE=-", "LABELPROF_CPU=1", "LABELPROF_CPU_SIGNAL=INT", "LABELPROF_REPORT=cpu",
                       NULL};
  r = run_child("xxx", bad);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_CPU_SIGNAL='INT' is SIGINT, which the program needs as it is"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " on its own CPU timer (SIGRTMAX-4)"));
  run_free(&r);
  /* Dumps on the CPU samples' signal: refused, and CPU sampling keeps its signal to the end. */
  const char *both[] = {"LABELPROF_PROFILE=-", "LABELPROF_REPORT=cpu", "LABELPROF_DUMP_SIGNAL=RTMAX-4", NULL};
  r = run_child("xxxxxxxxxx", both);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_DUMP_SIGNAL is SIGRTMAX-4, the CPU samples' signal; no dumps"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "labelprof profile by CPU time ("));
  CU_ASSERT_PTR_NULL(strstr(r.out, "CPU sampling stopped"));
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

/* n with a comma between groups of three digits, as the library's notes write counts. */
static const char *grouped(uint64_t n, char *buf, size_t len) {
  char digits[24];
  int k = snprintf(digits, sizeof digits, "%" PRIu64, n);
  size_t o = 0;
  for (int i = 0; i < k && o + 2 < len; i++) {
    if (i > 0 && (k - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
  return buf;
}

static void test_env_trace_written_at_exit(void) {
  char tr[96], tv[128];
  snprintf(tr, sizeof tr, "%s/trace.json", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
  const char *vars[] = {tv, "LABELPROF_PROFILE=-", "LABELPROF_TRACE_MODE=ring", "LABELPROF_TRACE_BUFFER=16", NULL};
  run_t r = run_child("xx", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "labelprof profile by wall time (")); /* both at once */
  json_t *root = trace_load(tr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root), *od = json_object_get(root, "otherData");
  /*
   * The child labels for a time, not a number of scopes, and goes on until
   * its collector has run: how many events that is depends on the machine
   * (natively about 60% of 2 MiB; under emulation with the CPU's counter,
   * or a collector kept waiting, more). 16 MiB holds it; should a machine
   * fill even that, stderr holds the ring's note for exactly the events the
   * file says it lost, and nothing else.
   */
  json_int_t lost = json_integer_value(json_object_get(od, "events_dropped"));
  CU_ASSERT(json_is_integer(json_object_get(od, "events_dropped")) && lost >= 0);
  if (lost == 0) {
    CU_ASSERT_STRING_EQUAL(r.err, "");
  } else {
    char note[256], n[32];
    snprintf(note, sizeof note, "labelprof: the trace '%s' lost %s events: its 16 MiB budget (LABELPROF_TRACE_BUFFER) filled ",
             tr, grouped((uint64_t)lost, n, sizeof n));
    printf("\n    the ring filled (%s events lost) ", n);
    CU_ASSERT_EQUAL(strncmp(r.err, note, strlen(note)), 0);
    CU_ASSERT_EQUAL(count_lines(r.err), 1);
  }
  CU_ASSERT_EQUAL(trace_count(ev, "X", "env work"), 1);
  CU_ASSERT(trace_count(ev, "X", "env inner") > 10);
  CU_ASSERT_PTR_NULL(trace_check_lanes(ev));
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(od, "policy")), "ring");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(od, "budget_bytes")), 16 << 20);
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
  /* the child's scopes are runtime-level but for "env request" */
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "env work"), 0);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "env request"), 1);
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

/* A rate no machine's timer gives (100 kHz) draws one warning on stderr as well as the report's note. */
static void test_env_low_rate_is_said_on_stderr(void) {
  /* The child keeps the collector off the CPU for 300 ms of its 0.4 s: most ticks are missed, whatever the machine. */
  const char *vars[] = {"LABELPROF_PROFILE=-", NULL};
  int before = rate_warnings;
  spawn_opts_t o = {"xxxxxxxxxx", "starve", "300", NULL, 0};
  run_t r = spawn_child(&o, vars);
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3) {
    printf("\n    no SCHED_FIFO here (it needs root or RLIMIT_RTPRIO): not tried ");
    run_free(&r);
    return;
  }
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(rate_warnings, before + 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "note: the collector achieved "));
  run_free(&r);
}

/* A misspelt variable is not silently ignored: one warning, with the nearest real name. */
static void test_env_unknown_variables_warn_with_a_suggestion(void) {
  const char *vars[] = {"LABELPROF_PROFIE=1", "LABELPROF_SOMETHING_ELSE_ENTIRELY=2", NULL};
  run_t r = run_child("x", vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  CU_ASSERT_EQUAL(count_lines(r.err), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_PROFIE is not a labelprof variable; did you mean LABELPROF_PROFILE?"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_SOMETHING_ELSE_ENTIRELY is not a labelprof variable"));
  run_free(&r);
}

/* Level lists mix names and groups, with spaces, as people type them. */
static void test_env_level_lists_as_people_type_them(void) {
  const char *lists[] = {"LABELPROF_LEVELS=request, runtime", "LABELPROF_LEVELS=request,standard",
                         "LABELPROF_LEVELS= all "};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    char tr[96], tv[128];
    snprintf(tr, sizeof tr, "%s/list%zu.json", dir, i);
    snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
    const char *vars[] = {tv, lists[i], NULL};
    run_t r = run_child("x", vars);
    CU_ASSERT(exited_ok(&r));
    CU_ASSERT_STRING_EQUAL(r.err, "");
    json_t *root = trace_load(tr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "env request"), 1);
    CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "env work"), 1);
    json_decref(root);
    unlink(tr);
    run_free(&r);
  }
}

/* Relative paths are resolved when the library loads: a program that changes directory writes where asked. */
static void test_env_relative_paths_resolved_at_start(void) {
  const char *vars[] = {"LABELPROF_PROFILE=rel.tree", "LABELPROF_TRACE=rel-%p.json", NULL};
  spawn_opts_t o = {"xx", "chdir", NULL, dir, 0};
  run_t r = spawn_child(&o, vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  char p[256], t[256], wrong[256];
  snprintf(p, sizeof p, "%s/rel.tree", dir);
  snprintf(t, sizeof t, "%s/rel-%ld.json", dir, (long)r.pid);
  snprintf(wrong, sizeof wrong, "/rel-%ld.json", (long)r.pid);
  char *c = lp_test_slurp(p);
  CU_ASSERT(c && strncmp(c, "labelprof profile by wall time (", 32) == 0);
  free(c);
  json_t *root = trace_load(t);
  CU_ASSERT_PTR_NOT_NULL(root);
  json_decref(root);
  CU_ASSERT_NOT_EQUAL(access("/rel.tree", F_OK), 0);
  CU_ASSERT_NOT_EQUAL(access(wrong, F_OK), 0);
  unlink(p);
  unlink(t);
  run_free(&r);
}

/* Share of the all-threads profile that a label line shows, from a report's text; -1 if absent. */
static double report_percent(const char *report, const char *label) {
  char want[128];
  snprintf(want, sizeof want, "%% %s\n", label);
  const char *at = strstr(report, want);
  if (!at) return -1;
  const char *line = at;
  while (line > report && line[-1] != '\n') line--;
  return strtod(line, NULL);
}

/*
 * The program runs a profile and a timeline of its own while the environment
 * asks for both: every call succeeds, its own reports hold its own window
 * only, and the environment's cover the whole run.
 */
static void test_env_sessions_nest_with_the_programs_own(void) {
  char pr[96], pv[128], tr[96], tv[128], own[96];
  snprintf(pr, sizeof pr, "%s/nest.txt", dir);
  snprintf(pv, sizeof pv, "LABELPROF_PROFILE=%s", pr);
  snprintf(tr, sizeof tr, "%s/nest.json", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
  snprintf(own, sizeof own, "%s/own.json", dir);
  const char *vars[] = {pv, tv, NULL};
  spawn_opts_t o = {"xxxxxx", "own", own, NULL, 0};
  run_t r = spawn_child(&o, vars);
  CU_ASSERT(exited_ok(&r)); /* every lp_* call returned 0 */
  CU_ASSERT_STRING_EQUAL(r.err, "");
  /* The program's own profile: its window, "own work", and nothing from before it. */
  const char *mine = strstr(r.out, "own profile:\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(mine);
  CU_ASSERT(report_percent(mine, "own work") >= 90.0);
  CU_ASSERT_PTR_NULL(strstr(mine, "env work"));
  /* Its own trace: its window only. */
  json_t *root = trace_load(own);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "own traced"), 1);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "env work"), 0);
  CU_ASSERT_PTR_NULL(trace_check_lanes(trace_events(root)));
  json_decref(root);
  /* The environment's: the whole run. */
  char *c = lp_test_slurp(pr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT(report_percent(c, "env request") > 0);
  CU_ASSERT(report_percent(c, "own work") > 0);
  free(c);
  root = trace_load(tr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "env work"), 1);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "own traced"), 1);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "own work"), 1);
  json_decref(root);
  unlink(pr);
  unlink(tr);
  unlink(own);
  run_free(&r);
}

/*
 * Dumps on a signal and from lp_dump(): numbered files, written without
 * stopping anything; the report at exit takes the next number.
 */
static void test_env_dumps_on_signal_and_lp_dump(void) {
  char pv[128], tv[128], second[128];
  snprintf(pv, sizeof pv, "LABELPROF_PROFILE=%s/dump-%%n.txt", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s/dump-%%n.json", dir);
  snprintf(second, sizeof second, "%s/dump-2.json", dir);
  const char *vars[] = {pv, tv, "LABELPROF_DUMP_SIGNAL=USR2", NULL};
  spawn_opts_t o = {"xxx", "dump", second, NULL, 0};
  run_t r = spawn_child(&o, vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  uint64_t samples[4] = {0};
  for (int n = 1; n <= 3; n++) {
    char p[256], t[256];
    snprintf(p, sizeof p, "%s/dump-%d.txt", dir, n);
    snprintf(t, sizeof t, "%s/dump-%d.json", dir, n);
    char *c = lp_test_slurp(p);
    CU_ASSERT(c && sscanf(c, "labelprof profile by wall time (%*u threads, %" SCNu64 " samples)", &samples[n]) == 1);
    free(c);
    json_t *root = trace_load(t);
    CU_ASSERT_PTR_NOT_NULL(root);
    if (root) CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "env work"), n == 3 ? 2 : 1);
    json_decref(root);
    unlink(p);
    unlink(t);
  }
  /* Each dump holds everything so far: the counts only grow. */
  CU_ASSERT(samples[1] > 0 && samples[1] <= samples[2] && samples[2] < samples[3]);
  run_free(&r);
}

/*
 * At exit the collector stops before the trace is written, so that a large
 * export is not sampled as time outside of any label. The program's own
 * atexit handlers run before labelprof's and are recorded; so are its
 * destructors, with the shared library (the static library runs them after:
 * test_static.c). A thread that keeps using labels while the process exits
 * does so safely after labelprof's handler has written everything.
 */
static void test_env_exit_order(void) {
  char pr[96], pv[128], tr[96], tv[128];
  snprintf(pr, sizeof pr, "%s/exit.txt", dir);
  snprintf(pv, sizeof pv, "LABELPROF_PROFILE=%s", pr);
  snprintf(tr, sizeof tr, "%s/exit.json", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
  const char *vars[] = {pv, tv, "LABELPROF_TRACE_BUFFER=256", "LABELPROF_HZ=5000", NULL};
  spawn_opts_t o = {"xxxxxxxxxxxxxxx", "many", NULL, NULL, 0};
  run_t r = spawn_child(&o, vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  char *c = lp_test_slurp(pr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  double outside = report_percent(c, "other (outside of any label)");
  printf("\n    %.2f%% outside of any label with a large trace written at exit ", outside);
  CU_ASSERT(outside >= 0 && outside < 10.0);
  free(c);
  json_t *root = trace_load(tr);
  CU_ASSERT_PTR_NOT_NULL(root);
  if (root) CU_ASSERT(trace_count(trace_events(root), "X", "env inner") > (LP_TEST_SANITIZED ? 10000u : 100000u));
  json_decref(root);
  unlink(pr);
  unlink(tr);
  run_free(&r);

  const char *vars2[] = {tv, NULL};
  spawn_opts_t late = {"xx", "atexit", NULL, NULL, 0};
  r = spawn_child(&late, vars2);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  root = trace_load(tr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "program atexit"), 1);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "destructor"), 1);
  json_decref(root);
  unlink(tr);
  run_free(&r);
}

/*
 * A trace whose budget fills drops events, and says so at exit: how many,
 * when, the budget, and what to change. The file's otherData holds the
 * session's window and the first drop as exact CLOCK_MONOTONIC strings.
 */
static void test_env_drops_are_said_at_exit(void) {
  char tr[96], tv[128];
  snprintf(tr, sizeof tr, "%s/drops.json", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
  const char *vars[] = {tv, "LABELPROF_TRACE_BUFFER=1", NULL};
  spawn_opts_t o = {"x", "scopes", "200000", NULL, 0}; /* 400,000 events: 1 MiB holds 65,536 */
  run_t r = spawn_child(&o, vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(count_lines(r.err), 1);
  CU_ASSERT_EQUAL(strncmp(r.err, "labelprof: the trace '", 22), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, tr));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, " events: its 1 MiB budget (LABELPROF_TRACE_BUFFER) filled "));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, " session, so the file covers only its first "));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_TRACE_MODE=ring"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "LABELPROF_LEVELS"));
  json_t *root = trace_load(tr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *od = json_object_get(root, "otherData");
  uint64_t dropped = (uint64_t)json_integer_value(json_object_get(od, "events_dropped"));
  CU_ASSERT(dropped > 0);
  char want[64];
  snprintf(want, sizeof want, "dropped %llu events", (unsigned long long)dropped);
  if (dropped < 1000) CU_ASSERT_PTR_NOT_NULL(strstr(r.err, want)); /* larger counts have separators */
  const char *start = json_string_value(json_object_get(od, "session_start_ns"));
  const char *stop = json_string_value(json_object_get(od, "session_stop_ns"));
  const char *first = json_string_value(json_object_get(od, "first_drop_ns"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(start);
  CU_ASSERT_PTR_NOT_NULL_FATAL(stop);
  CU_ASSERT_PTR_NOT_NULL_FATAL(first);
  unsigned long long a = strtoull(start, NULL, 10), b = strtoull(first, NULL, 10), c = strtoull(stop, NULL, 10);
  CU_ASSERT(a > 0 && a <= b && b <= c);
  CU_ASSERT(json_is_false(json_object_get(od, "session_running")));
  json_decref(root);
  unlink(tr);
  run_free(&r);
}

/*
 * A stream keeps recording when its writer falls behind: what it dropped are
 * gaps, and the line at exit says so (not that the file covers only the
 * start), naming the file written, "%n" replaced. 4 M events against a
 * 1 MiB budget leave the writer behind on any machine seen so far; a run
 * that dropped nothing says so on the same one line.
 */
static void test_env_stream_drops_are_said_as_gaps(void) {
  char tr[96], tv[128];
  snprintf(tr, sizeof tr, "%s/gaps-1.pftrace", dir); /* the file the stream writes: its first, and only */
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s/gaps-%%n.pftrace", dir);
  const char *vars[] = {tv, "LABELPROF_TRACE_MODE=stream", "LABELPROF_TRACE_BUFFER=1", NULL};
  spawn_opts_t o = {"x", "scopes", "2000000", NULL, 0};
  run_t r = spawn_child(&o, vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(count_lines(r.err), 1);
  CU_ASSERT_EQUAL(strncmp(r.err, "labelprof: the stream '", 23), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, tr));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, " events of 1 thread ("));
  if (!strstr(r.err, "; it dropped none\n")) {
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, " events while its writer fell behind: its 1 MiB budget (LABELPROF_TRACE_BUFFER) was full, the first time "));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, " session, so the file has gaps there."));
    CU_ASSERT_PTR_NULL(strstr(r.err, "covers only its first"));
    CU_ASSERT_PTR_NULL(strstr(r.err, "LABELPROF_TRACE_MODE=ring"));
    CU_ASSERT_PTR_NULL(strstr(r.err, "%n"));
  }
  unlink(tr);
  run_free(&r);
}

/* A stream whose file cannot be opened names it. */
static void test_env_stream_start_names_its_file(void) {
  char tr[128], tv[160];
  snprintf(tr, sizeof tr, "%s/no such directory/x.pftrace", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
  const char *vars[] = {tv, "LABELPROF_TRACE_MODE=stream", NULL};
  spawn_opts_t o = {"x", NULL, NULL, NULL, 0};
  run_t r = spawn_child(&o, vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(count_lines(r.err), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "labelprof: cannot start the stream to '"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, tr));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, lp_strerror(-ENOENT)));
  run_free(&r);
}

/* Over RLIMIT_FSIZE the export fails with EFBIG, named on one line; the program lives and nothing is left behind. */
static void test_env_file_size_limit_is_an_error_not_a_death(void) {
  char sub[96], tr[128], tv[160];
  snprintf(sub, sizeof sub, "%s/fsize", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
  snprintf(tr, sizeof tr, "%s/x.json", sub);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
  const char *vars[] = {tv, NULL};
  spawn_opts_t o = {"xxxxx", NULL, NULL, NULL, 16 * 1024}; /* a few ms of work writes more than that */
  run_t r = spawn_child(&o, vars);
  CU_ASSERT(WIFEXITED(r.status));
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.out, "child done\n");
  CU_ASSERT_EQUAL(count_lines(r.err), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, tr));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, lp_strerror(-EFBIG)));
  DIR *d = opendir(sub);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  int entries = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) entries += e->d_name[0] != '.' || e->d_name[1] > '.';
  closedir(d);
  CU_ASSERT_EQUAL(entries, 0); /* no temporary file, no partial trace */
  rmdir(sub);
  run_free(&r);
}

/*
 * Report names with many %n: a program that dumps 110 times with 25 of them
 * in its trace's name gets 111 files (the last at exit), each named with its
 * own number in every place.
 */
static void test_env_many_n_in_report_names(void) {
  char sub[256], tv[512];
  snprintf(sub, sizeof sub, "%s/many", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
  int len = snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s/t", sub);
  for (int i = 0; i < 25; i++) len += snprintf(tv + len, sizeof tv - (size_t)len, "%%n");
  snprintf(tv + len, sizeof tv - (size_t)len, ".json");
  const char *vars[] = {tv, NULL};
  spawn_opts_t o = {"x", "dumps", "110", NULL, 0};
  run_t r = spawn_child(&o, vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  int found = 0;
  for (int n = 1; n <= 111; n++) {
    char want[512];
    int w = snprintf(want, sizeof want, "%s/t", sub);
    for (int i = 0; i < 25; i++) w += snprintf(want + w, sizeof want - (size_t)w, "%d", n);
    snprintf(want + w, sizeof want - (size_t)w, ".json");
    found += access(want, F_OK) == 0;
    unlink(want);
  }
  CU_ASSERT_EQUAL(found, 111);
  CU_ASSERT_EQUAL(rmdir(sub), 0); /* nothing else was written there */
  run_free(&r);
}

/* The namer alone, for any number of %n and report numbers up to UINT32_MAX. */
static void test_env_namer_any_count_any_number(void) {
  static const unsigned numbers[] = {0, 1, 9, 10, 110, 4294967295u};
  for (size_t k = 0; k < sizeof numbers / sizeof numbers[0]; k++) {
    for (size_t count = 0; count <= 300; count += 23) {
      char *path = malloc(3 * count + 16), *want = malloc(12 * count + 16);
      CU_ASSERT_PTR_NOT_NULL_FATAL(path);
      CU_ASSERT_PTR_NOT_NULL_FATAL(want);
      size_t p = 0, w = 0;
      path[p++] = '/';
      want[w++] = '/';
      for (size_t i = 0; i < count; i++) {
        memcpy(path + p, i % 3 == 2 ? "%%x" : "%n", i % 3 == 2 ? 3 : 2);
        p += i % 3 == 2 ? 3 : 2;
        w += i % 3 == 2 ? (size_t)sprintf(want + w, "%%x") : (size_t)sprintf(want + w, "%u", numbers[k]);
      }
      strcpy(path + p, "%");
      strcpy(want + w, "%");
      char *got = lp__path_numbered(path, numbers[k]);
      CU_ASSERT_PTR_NOT_NULL_FATAL(got);
      CU_ASSERT_STRING_EQUAL(got, want);
      free(got);
      free(path);
      free(want);
    }
  }
}

/* A % in the working directory's name is part of the name, not a %n or %p to expand. */
static void test_env_percent_in_working_directory(void) {
  char sub[256], want[320];
  snprintf(sub, sizeof sub, "%s/pct%%n%%p%%%%", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
  const char *vars[] = {"LABELPROF_PROFILE=rel-%n.txt", NULL};
  spawn_opts_t o = {"xx", NULL, NULL, sub, 0};
  run_t r = spawn_child(&o, vars);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_STRING_EQUAL(r.err, "");
  snprintf(want, sizeof want, "%s/rel-1.txt", sub);
  char *c = lp_test_slurp(want);
  CU_ASSERT(c && strncmp(c, "labelprof profile by wall time (", 32) == 0);
  free(c);
  unlink(want);
  CU_ASSERT_EQUAL(rmdir(sub), 0);
  run_free(&r);
}

/* One line naming LABELPROF_DUMP_SIGNAL and its value, "no dumps"; the program runs and reports as usual. */
static void check_signal_refused(const char *value) {
  char tr[256], tv[300], sv[128];
  snprintf(tr, sizeof tr, "%s/sig.json", dir);
  snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
  snprintf(sv, sizeof sv, "LABELPROF_DUMP_SIGNAL=%s", value);
  const char *vars[] = {tv, sv, NULL};
  run_t r = run_child("x", vars);
  char want[160];
  snprintf(want, sizeof want, "labelprof: LABELPROF_DUMP_SIGNAL='%s' ", value);
  CU_ASSERT(exited_ok(&r));
  CU_ASSERT_EQUAL(count_lines(r.err), 1);
  CU_ASSERT_EQUAL(strncmp(r.err, want, strlen(want)), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "; no dumps\n"));
  if (count_lines(r.err) != 1 || strncmp(r.err, want, strlen(want)) != 0)
    fprintf(stderr, "\n    LABELPROF_DUMP_SIGNAL=%s: stderr was '%s'", value, r.err);
  json_t *root = trace_load(tr);
  CU_ASSERT_PTR_NOT_NULL(root);
  json_decref(root);
  unlink(tr);
  run_free(&r);
}

/*
 * Faults (a handler that returns makes the fault repeat for ever), signals
 * that cannot be caught, and those the library takes itself are refused as
 * dump signals, by name and by number.
 */
static void test_env_fault_signals_refused(void) {
  static const struct {
    const char *name;
    int sig;
  } bad[] = {{"SEGV", SIGSEGV}, {"BUS", SIGBUS},   {"FPE", SIGFPE},   {"ILL", SIGILL},  {"ABRT", SIGABRT},
             {"TRAP", SIGTRAP}, {"SYS", SIGSYS},   {"KILL", SIGKILL}, {"STOP", SIGSTOP}, {"PIPE", SIGPIPE},
             {"XFSZ", SIGXFSZ}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char name[32], num[16];
    snprintf(name, sizeof name, "%s%s", i % 2 ? "SIG" : "", bad[i].name);
    snprintf(num, sizeof num, "%d", bad[i].sig);
    check_signal_refused(name);
    check_signal_refused(num);
  }
}

/* Real-time offsets and numbers of any size give the usual warning, never an overflow. */
static void test_env_huge_signal_numbers_refused(void) {
  static const char *const values[] = {"RTMIN+9223372036854775807", "RTMIN+18446744073709551616",
                                       "RTMAX-9223372036854775808", "SIGRTMIN+4294967296",
                                       "RTMIN+99999999999999999999999999999", "RTMIN+-1", "RTMIN+", "RTMAX-31",
                                       "4294967306", "18446744073709551626", "-10", "0", "65", "32"};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) check_signal_refused(values[i]);
  lp__env_values_t v;
  lp__env_defaults(&v);
  CU_ASSERT_EQUAL(lp__env_parse(&v, "LABELPROF_DUMP_SIGNAL", "RTMIN+2"), 0);
  CU_ASSERT_EQUAL(v.dump_signal, SIGRTMIN + 2);
  CU_ASSERT_EQUAL(lp__env_parse(&v, "LABELPROF_DUMP_SIGNAL", "SIGRTMAX-1"), 0);
  CU_ASSERT_EQUAL(v.dump_signal, SIGRTMAX - 1);
  CU_ASSERT_EQUAL(lp__env_parse(&v, "LABELPROF_DUMP_SIGNAL", "12"), 0);
  CU_ASSERT_EQUAL(v.dump_signal, SIGUSR2);
}

/* LABELPROF_TRACE_FLUSH in each of its units, at both ends of its range, and past them: the default, 1 s. */
static void test_env_trace_flush_units(void) {
  static const struct {
    const char *value;
    uint64_t ns;
  } cases[] = {
      {"250ms", 250000000u}, {"2", 2000000000u},       {"1.5s", 1500000000u},    {"2m", 120000000000u},
      {"1ms", 1000000u},     {"1h", 3600000000000u},   {"0.5h", 1800000000000u}, {"60m", 3600000000000u},
      {"0.5ms", 1000000000u}, {"2h", 1000000000u},     {"61m", 1000000000u},     {"1d", 1000000000u},
      {"", 1000000000u},     {"-1s", 1000000000u},     {"1e999", 1000000000u},   {"ms", 1000000000u},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lp__env_values_t v;
    lp__env_defaults(&v);
    CU_ASSERT_EQUAL(lp__env_parse(&v, "LABELPROF_TRACE_FLUSH", cases[i].value), 0);
    if (v.trace_flush_ns != cases[i].ns)
      fprintf(stderr, "LABELPROF_TRACE_FLUSH='%s' gave %llu ns, not %llu\n", cases[i].value,
              (unsigned long long)v.trace_flush_ns, (unsigned long long)cases[i].ns);
    CU_ASSERT_EQUAL(v.trace_flush_ns, cases[i].ns);
  }
}

/* Numbers past every limit, and past 2^32 and 2^64, in each numeric variable: the usual warning and the default. */
static void test_env_big_numbers_in_every_variable(void) {
  static const struct {
    const char *var, *value, *def;
  } cases[] = {
      {"LABELPROF_HZ", "18446744073709551616", "1000"},
      {"LABELPROF_HZ", "4294968296", "1000"}, /* 2^32 + 1000 */
      {"LABELPROF_HZ", "100001", "1000"},
      {"LABELPROF_HZ", "-1", "1000"},
      {"LABELPROF_TRACE_BUFFER", "18446744073709551615", "64"},
      {"LABELPROF_TRACE_BUFFER", "17592186044416", "64"}, /* 2^44 MiB: 2^64 bytes */
      {"LABELPROF_TRACE_BUFFER", "4294967297", "64"},
      {"LABELPROF_TRACE_BUFFER", "1048577", "64"},
      {"LABELPROF_COLLECTOR_SCHED", "fifo:4294967397", "slice"}, /* 2^32 + 101 */
      {"LABELPROF_COLLECTOR_SCHED", "fifo:100", "slice"},
      {"LABELPROF_REPORT", "min=1e999", "ignoring it"},
      {"LABELPROF_REPORT", "min=100.000001", "ignoring it"},
      {"LABELPROF_REPORT", "min=-0.5", "ignoring it"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char tr[256], tv[300], ev[128];
    snprintf(tr, sizeof tr, "%s/big.json", dir);
    snprintf(tv, sizeof tv, "LABELPROF_TRACE=%s", tr);
    snprintf(ev, sizeof ev, "%s=%s", cases[i].var, cases[i].value);
    const char *vars[] = {tv, ev, "LABELPROF_PROFILE=-", NULL};
    run_t r = run_child("x", vars);
    CU_ASSERT(exited_ok(&r));
    CU_ASSERT_EQUAL(count_lines(r.err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, cases[i].value));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, cases[i].def));
    json_t *root = trace_load(tr);
    CU_ASSERT_PTR_NOT_NULL(root);
    if (root && strcmp(cases[i].var, "LABELPROF_TRACE_BUFFER") == 0)
      CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(root, "otherData"), "budget_bytes")),
                      64 << 20);
    json_decref(root);
    unlink(tr);
    run_free(&r);
  }
  /* The largest values taken, and the parsers' answers. */
  lp__env_values_t v;
  lp__env_defaults(&v);
  CU_ASSERT_EQUAL(lp__env_parse(&v, "LABELPROF_TRACE_BUFFER", "1048576"), 0);
  CU_ASSERT_EQUAL(v.trace.budget_bytes, (uint64_t)1 << 40);
  CU_ASSERT_EQUAL(lp__env_parse(&v, "LABELPROF_HZ", " 100000 "), 0);
  CU_ASSERT_EQUAL(v.profile.hz, 100000);
  CU_ASSERT_EQUAL(lp__env_parse(&v, "LABELPROF_HZ", "4294968296"), 0);
  CU_ASSERT_EQUAL(v.profile.hz, 1000);
  CU_ASSERT_EQUAL(lp__env_parse(&v, "LABELPROF_REPORT", "min=100"), 0);
  CU_ASSERT(v.report.min_percent == 100.0);
  CU_ASSERT_EQUAL(lp__env_parse(&v, "LABELPROF_TRACE", "x"), -ENOENT);
}

int main(void) {
  dir = lp_test_tmpdir("env");
  if (!realpath("tests/env_child", child_path)) return 2;
  CU_TestInfo tests[] = {
      LP_TEST(test_env_unset_reports_nothing),
      LP_TEST(test_env_profile_1_reports_on_stderr),
      LP_TEST(test_env_profile_path_and_folded_files),
      LP_TEST(test_env_pid_in_path),
      LP_TEST(test_env_bad_values_warn_once_and_run_on),
      LP_TEST(test_env_hz_and_report_options),
      LP_TEST(test_env_report_by_cpu),
      LP_TEST(test_env_collector_sched),
      LP_TEST(test_env_unwritable_path_is_reported),
      LP_TEST(test_env_trace_written_at_exit),
      LP_TEST(test_env_trace_levels),
      LP_TEST(test_env_bad_trace_values_warn_once_each),
      LP_TEST(test_env_low_rate_is_said_on_stderr),
      LP_TEST(test_env_unknown_variables_warn_with_a_suggestion),
      LP_TEST(test_env_level_lists_as_people_type_them),
      LP_TEST(test_env_relative_paths_resolved_at_start),
      LP_TEST(test_env_sessions_nest_with_the_programs_own),
      LP_TEST(test_env_dumps_on_signal_and_lp_dump),
      LP_TEST(test_env_exit_order),
      LP_TEST(test_env_file_size_limit_is_an_error_not_a_death),
      LP_TEST(test_env_many_n_in_report_names),
      LP_TEST(test_env_namer_any_count_any_number),
      LP_TEST(test_env_percent_in_working_directory),
      LP_TEST(test_env_fault_signals_refused),
      LP_TEST(test_env_huge_signal_numbers_refused),
      LP_TEST(test_env_big_numbers_in_every_variable),
      LP_TEST(test_env_trace_flush_units),
      LP_TEST(test_env_drops_are_said_at_exit),
      LP_TEST(test_env_stream_drops_are_said_as_gaps),
      LP_TEST(test_env_stream_start_names_its_file),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("env", tests);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) rc = rc ? rc : 1;
  return rc;
}
