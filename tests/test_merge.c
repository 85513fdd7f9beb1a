/*
 * test_merge.c: many processes on one timeline (`labelprof merge`).
 *
 * The job: this program run as a parent that labels its own work and starts
 * three workers by fork and exec, the environment (LABELPROF_TRACE with %p)
 * inherited, the third inside a time namespace 100000 s ahead (unshare -T;
 * where that is not permitted the worker runs without it, said on stdout).
 * Each process labels "work K" and, at one instant, "probe K" around a
 * CLOCK_REALTIME read it writes down. The four files merged are read back
 * with the tests' Perfetto decoder and with protoc: four pids, each
 * process's slices, and the probes apart on the merged clock by what their
 * REALTIME reads say (within 1 ms, times LP_TEST_SLOW). Then: a JSON and a
 * Perfetto file merged; an old file with no REALTIME reading refused; two
 * machines' files with one pid kept as two processes, placed through their
 * REALTIME readings to the nanosecond; `stats --by process`.
 */
#include "config.h"

#include "labelprof.h"
#include "runner.h"

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perfetto_decode.h"

#ifndef LP_TEST_PROTO
#error "LP_TEST_PROTO: tests/perfetto_subset.proto"
#endif

static char tool[PATH_MAX], self[PATH_MAX];
static const char *dir;

/* ---- the job's processes (this program, run as "job K") ---- */

static void busy_us(unsigned us) {
  uint64_t end = lp_now_ns() + us * 1000ull;
  while (lp_now_ns() < end) {
  }
}

static int64_t realtime_ns(void) {
  struct timespec r;
  clock_gettime(CLOCK_REALTIME, &r);
  return (int64_t)r.tv_sec * 1000000000 + r.tv_nsec;
}

/* Labels, as string literals: a label outlives the session. */
static int64_t work_and_probe(int k) {
  int64_t real = 0;
  for (int i = 0; i < 20; i++) {
    switch (k) {
    case 0: { LP_SCOPE("work 0"); busy_us(100); break; }
    case 1: { LP_SCOPE("work 1"); busy_us(100); break; }
    case 2: { LP_SCOPE("work 2"); busy_us(100); break; }
    default: { LP_SCOPE("work 3"); busy_us(100); break; }
    }
  }
  switch (k) {
  case 0: { LP_SCOPE("probe 0"); real = realtime_ns(); break; }
  case 1: { LP_SCOPE("probe 1"); real = realtime_ns(); break; }
  case 2: { LP_SCOPE("probe 2"); real = realtime_ns(); break; }
  default: { LP_SCOPE("probe 3"); real = realtime_ns(); break; }
  }
  return real;
}

static pid_t start_worker(int k, bool ns) {
  char arg[16];
  snprintf(arg, sizeof arg, "%d", k);
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (ns) {
    char *argv[] = {"unshare", "-T", "--monotonic", "100000", "--boottime", "100000", self, "job", arg, NULL};
    execv("/usr/bin/unshare", argv);
  } else {
    char *argv[] = {self, "job", arg, NULL};
    execv(self, argv);
  }
  _exit(127);
}

static int job(int k) {
  char name[16], path[PATH_MAX];
  snprintf(name, sizeof name, "proc %d", k);
  if (lp_thread_set_name(name) != 0) return 3;
  pid_t kids[3];
  if (k == 0) {
    bool ns = getenv("LP_MERGE_NS") && strcmp(getenv("LP_MERGE_NS"), "1") == 0;
    for (int i = 0; i < 3; i++)
      if ((kids[i] = start_worker(i + 1, ns && i == 2)) < 0) return 4;
  }
  int64_t real = work_and_probe(k);
  snprintf(path, sizeof path, "%s/probe-%d.txt", getenv("LP_MERGE_DIR"), k);
  FILE *f = fopen(path, "w");
  if (!f || fprintf(f, "%lld\n", (long long)real) < 0 || fclose(f) != 0) return 5;
  int bad = 0;
  for (int i = 0; k == 0 && i < 3; i++) {
    int st;
    if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad = 6;
  }
  return bad;
}

/* ---- helpers ---- */

typedef struct run {
  int status;
  char *out, *err;
} run_t;

static run_t run_tool(const char *const *args) {
  char *argv[32];
  int n = 0;
  argv[n++] = tool;
  for (; args[n - 1] && n < 31; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  lp_test_run_t r = lp_test_run(tool, argv, NULL, NULL);
  return (run_t){lp_test_exit_code(&r), r.out, r.err};
}
#define RUN(...) run_tool((const char *const[]){__VA_ARGS__, NULL})

static void run_free(run_t *r) {
  free(r->out);
  free(r->err);
}

static char *path_in(const char *name) {
  static char paths[8][PATH_MAX];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, PATH_MAX, "%s/%s", dir, name);
  return p;
}

static bool write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return false;
  bool ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok;
}

/* The begin time of the first complete slice named name on the lane lane, from the decoder's lines; -1 when none. */
static int64_t slice_ts(const pd_trace_t *t, const char *lane, const char *name, size_t *count) {
  char head[128];
  snprintf(head, sizeof head, "%s|X|", lane);
  int64_t ts = -1;
  *count = 0;
  for (size_t i = 0; i < t->lines.n; i++) { /* lane|X|cat|name|ts|dur|flags */
    const char *l = t->lines.v[i];
    if (strncmp(l, head, strlen(head)) != 0) continue;
    const char *n = strchr(l + strlen(head), '|');
    if (!n || strncmp(n + 1, name, strlen(name)) != 0 || n[1 + strlen(name)] != '|') continue;
    if (!(*count)++) ts = strtoll(n + 2 + strlen(name), NULL, 10);
  }
  return ts;
}

static int64_t read_probe(int k) {
  char name[32];
  snprintf(name, sizeof name, "probe-%d.txt", k);
  char *s = lp_test_slurp(path_in(name));
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  int64_t v = strtoll(s, NULL, 10);
  free(s);
  return v;
}

/* The distinct pids of the ProcessDescriptors protoc shows in the file (at most 8); their count. */
static int protoc_pids(const char *file, long pids[8]) {
  char cmd[2 * PATH_MAX + 256];
  snprintf(cmd, sizeof cmd, "protoc --decode=perfetto.Trace -I \"$(dirname '%s')\" '%s' < '%s' > '%s' 2>&1", LP_TEST_PROTO,
           LP_TEST_PROTO, file, path_in("protoc.txt"));
  if (system(cmd) != 0) return -1;
  char *text = lp_test_slurp(path_in("protoc.txt"));
  if (!text) return -1;
  int n = 0;
  for (char *p = strstr(text, "process {"); p; p = strstr(p + 1, "process {")) {
    char *pid = strstr(p, "pid: ");
    if (!pid) break;
    long v = strtol(pid + 5, NULL, 10);
    int k = 0;
    while (k < n && pids[k] != v) k++;
    if (k == n && n < 8) pids[n++] = v;
  }
  free(text);
  return n;
}

/* The job's four files, named after their pids, sorted; their count. */
static int job_files(char files[4][PATH_MAX], const char *prefix) {
  DIR *d = opendir(dir);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && n < 4) snprintf(files[n++], PATH_MAX, "%s/%s", dir, e->d_name);
  closedir(d);
  return n;
}

static bool ns_permitted(void) {
  char *argv[] = {"unshare", "-T", "--monotonic", "100000", "--boottime", "100000", "/bin/true", NULL};
  lp_test_run_t r = lp_test_run("/usr/bin/unshare", argv, NULL, NULL);
  bool ok = lp_test_exit_code(&r) == 0;
  lp_test_run_free(&r);
  return ok;
}

/* Runs the job, its files named prefix-%p.ext; the probes' REALTIME reads into real. */
static bool run_job(const char *prefix, const char *ext, bool ns, int64_t real[4]) {
  char trace[PATH_MAX + 64], mdir[PATH_MAX + 32];
  snprintf(trace, sizeof trace, "LABELPROF_TRACE=%s/%s-%%p.%s", dir, prefix, ext);
  snprintf(mdir, sizeof mdir, "LP_MERGE_DIR=%s", dir);
  const char *vars[] = {trace, mdir, ns ? "LP_MERGE_NS=1" : "LP_MERGE_NS=0", NULL};
  char *argv[] = {self, "job", "0", NULL};
  lp_test_run_t r = lp_test_run(self, argv, vars, NULL);
  int code = lp_test_exit_code(&r);
  if (code != 0) fprintf(stderr, "the job failed (%d): %s\n", code, r.err);
  lp_test_run_free(&r);
  for (int k = 0; k < 4 && code == 0; k++) real[k] = read_probe(k);
  return code == 0;
}

/* ---- the tests ---- */

/* The four-process job, merged: four pids, each one's slices, the probes apart as REALTIME says. */
static void test_merge_four_processes_one_clock(void) {
  bool ns = ns_permitted();
  if (!ns) printf("test_merge: unshare -T is not permitted here: the third worker runs without a time namespace\n");
  int64_t real[4];
  CU_ASSERT_FATAL(run_job("run", "pftrace", ns, real));
  char files[4][PATH_MAX];
  CU_ASSERT_EQUAL_FATAL(job_files(files, "run-"), 4);
  const char *out = path_in("merged.pftrace");
  run_t r = RUN("merge", "-o", out, files[0], files[1], files[2], files[3]);
  CU_ASSERT_EQUAL(r.status, 0);
  if (r.status) fprintf(stderr, "%s", r.err);
  if (ns) CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "another time namespace: its offset taken off exactly"));
  run_free(&r);

  pd_trace_t t;
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL_FATAL(pd_decode(&t, out), 0);
  CU_ASSERT_PTR_NULL(t.error);
  if (t.error) fprintf(stderr, "decoder: %s\n", t.error);
  int64_t at[4];
  for (int k = 0; k < 4; k++) {
    char lane[32], work[32], probe[32];
    snprintf(lane, sizeof lane, "proc %d", k);
    snprintf(work, sizeof work, "work %d", k);
    snprintf(probe, sizeof probe, "probe %d", k);
    size_t n;
    CU_ASSERT(slice_ts(&t, lane, work, &n) > 0);
    CU_ASSERT_EQUAL(n, 20);
    at[k] = slice_ts(&t, lane, probe, &n);
    CU_ASSERT_EQUAL(n, 1);
  }
  /* The probes as far apart on the merged clock as their REALTIME reads: within 1 ms. */
  int64_t tol = 1000000 * (int64_t)lp_test_slow();
  for (int k = 1; k < 4; k++) {
    int64_t merged = at[k] - at[0], wall = real[k] - real[0];
    if (llabs(merged - wall) >= tol)
      fprintf(stderr, "probe %d: %lld ns after probe 0 in the merged file, %lld ns by REALTIME\n", k,
              (long long)merged, (long long)wall);
    CU_ASSERT(llabs(merged - wall) < tol);
  }
  CU_ASSERT(t.nreal >= 1); /* the merged file's own REALTIME snapshot */
  pd_free(&t.lines);

  /* protoc reads every byte and shows the four processes. */
  long pids[8];
  int npids = protoc_pids(out, pids);
  if (npids < 0) {
    printf("test_merge: protoc is not installed or failed: the merged file is not decoded by it\n");
  } else {
    CU_ASSERT_EQUAL(npids, 4);
    for (int k = 0; k < 4; k++) { /* the pids are the files' own */
      bool found = false;
      for (int j = 0; j < npids; j++) {
        char want[32];
        snprintf(want, sizeof want, "-%ld.pftrace", pids[j]);
        found |= strstr(files[k], want) != NULL;
      }
      CU_ASSERT(found);
    }
  }

  /* stats counts every process's work by default, and splits by process on asking. */
  r = RUN("stats", "--format", "csv", out);
  CU_ASSERT_EQUAL(r.status, 0);
  for (int k = 0; k < 4; k++) {
    char want[32];
    snprintf(want, sizeof want, "work %d,20,", k);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, want));
  }
  run_free(&r);
  r = RUN("stats", "--by", "process", out);
  CU_ASSERT_EQUAL(r.status, 0);
  int tables = 0;
  for (char *p = strstr(r.out, "process "); p; p = strstr(p + 1, "\nprocess ")) tables++;
  CU_ASSERT_EQUAL(tables, 4);
  run_free(&r);
}

/* A JSON file and a Perfetto file of two processes: one trace, both processes, on one clock. */
static void test_merge_json_and_perfetto(void) {
  int64_t real[4];
  CU_ASSERT_FATAL(run_job("mixed", "json", false, real));
  char files[4][PATH_MAX];
  CU_ASSERT_EQUAL_FATAL(job_files(files, "mixed-"), 4);
  /* One of them written again as Perfetto: the same process's file in the other format. */
  const char *pf = path_in("other.pftrace");
  run_t r = RUN("merge", "-o", pf, files[1]);
  CU_ASSERT_EQUAL_FATAL(r.status, 0);
  run_free(&r);
  const char *out = path_in("mixed.pftrace"), *outj = path_in("mixed.json");
  r = RUN("merge", "-o", out, files[0], pf);
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
  r = RUN("merge", "-o", outj, files[0], pf);
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL_FATAL(pd_decode(&t, out), 0);
  CU_ASSERT_PTR_NULL(t.error);
  size_t n0 = 0, n1 = 0;
  int64_t p0 = -1, p1 = -1;
  for (int k = 0; k < 4; k++) {
    char lane[32], probe[32];
    snprintf(lane, sizeof lane, "proc %d", k);
    snprintf(probe, sizeof probe, "probe %d", k);
    size_t n;
    int64_t ts = slice_ts(&t, lane, probe, &n);
    if (n && p0 < 0) {
      p0 = ts;
      n0 = (size_t)k;
    } else if (n) {
      p1 = ts;
      n1 = (size_t)k;
    }
  }
  CU_ASSERT_FATAL(p0 >= 0 && p1 >= 0);
  int64_t merged = p1 - p0, wall = real[n1] - real[n0];
  CU_ASSERT(llabs(merged - wall) < 1000000 * (int64_t)lp_test_slow());
  pd_free(&t.lines);
  /* The JSON output says the same to the command. */
  r = RUN("stats", "--by", "process", "--format", "csv", outj);
  CU_ASSERT_EQUAL(r.status, 0);
  char w0[48], w1[48];
  snprintf(w0, sizeof w0, "work %zu,20,", n0);
  snprintf(w1, sizeof w1, "work %zu,20,", n1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, w0));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, w1));
  int rows = 0;
  for (char *p = strstr(r.out, "\nprocess "); p; p = strstr(p + 1, "\nprocess ")) rows++;
  CU_ASSERT_EQUAL(rows, 4); /* two processes, each its work and its probe */
  run_free(&r);
}

/* A file with no REALTIME reading beside another: exit 2, naming it and why. */
static void test_merge_old_file_refused(void) {
  const char *old = path_in("old.json"), *good = path_in("good.json");
  CU_ASSERT_FATAL(write_text(old, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":7,\"tid\":7,\"ts\":1,\"dur\":2}]}\n"));
  CU_ASSERT_FATAL(write_text(good, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"b\",\"pid\":8,\"tid\":8,\"ts\":1,\"dur\":2}],"
                                   "\"otherData\":{\"boot_id\":\"b1\",\"ts_base_ns\":\"1000\",\"realtime_start_ns\":"
                                   "\"1700000000000000000\",\"realtime_start_mono_ns\":\"1000\","
                                   "\"realtime_start_uncertainty_ns\":5}}\n"));
  const char *out = path_in("never.pftrace");
  run_t r = RUN("merge", "-o", out, good, old);
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, old));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "no CLOCK_REALTIME reading"));
  CU_ASSERT(access(out, F_OK) != 0);
  run_free(&r);
  r = RUN("merge", "-o", out, old); /* alone, it needs no placing */
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
  r = RUN("merge", "-o", out);
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "FILE is missing"));
  run_free(&r);
  r = RUN("merge", good);
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "-o OUT"));
  run_free(&r);
}

/*
 * Two machines (two boot ids), one pid: two processes, the second's pid
 * remapped and said; placed through REALTIME to the nanosecond (0.5 s apart
 * by their readings, whatever their CLOCK_MONOTONIC says).
 */
static void test_merge_same_pid_two_machines(void) {
  const char *a = path_in("host-a.json"), *b = path_in("host-b.json");
  CU_ASSERT_FATAL(write_text(a, "{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":100,\"tid\":100,"
                                "\"args\":{\"name\":\"a main\"}},{\"ph\":\"X\",\"name\":\"on a\",\"pid\":100,\"tid\":100,"
                                "\"ts\":0,\"dur\":1000}],\"otherData\":{\"boot_id\":\"aaaa\",\"ts_base_ns\":\"1000000000\","
                                "\"realtime_start_ns\":\"1700000000000000000\",\"realtime_start_mono_ns\":\"1000000000\","
                                "\"realtime_start_uncertainty_ns\":10,\"events_dropped\":0}}\n"));
  CU_ASSERT_FATAL(write_text(b, "{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":100,\"tid\":100,"
                                "\"args\":{\"name\":\"b main\"}},{\"ph\":\"X\",\"name\":\"on b\",\"pid\":100,\"tid\":100,"
                                "\"ts\":0,\"dur\":1000}],\"otherData\":{\"boot_id\":\"bbbb\",\"ts_base_ns\":\"7000000000\","
                                "\"realtime_start_ns\":\"1700000000500000000\",\"realtime_start_mono_ns\":\"7000000000\","
                                "\"realtime_start_uncertainty_ns\":20}}\n"));
  const char *out = path_in("hosts.pftrace"), *outj = path_in("hosts.json");
  run_t r = RUN("merge", "-o", out, a, b);
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "another boot (another machine): through REALTIME"));
  run_free(&r);
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL_FATAL(pd_decode(&t, out), 0);
  CU_ASSERT_PTR_NULL(t.error);
  size_t na, nb;
  int64_t ta = slice_ts(&t, "a main", "on a", &na), tb = slice_ts(&t, "b main", "on b", &nb);
  CU_ASSERT(na == 1 && nb == 1);
  CU_ASSERT_EQUAL(tb - ta, 500000000);
  CU_ASSERT_PTR_NOT_NULL(strstr(t.session, "written as 4194304"));
  CU_ASSERT_PTR_NOT_NULL(strstr(t.session, "(within 30 ns)"));
  pd_free(&t.lines);
  long pids[8];
  int np = protoc_pids(out, pids);
  if (np >= 0) {
    CU_ASSERT_EQUAL(np, 2);
    CU_ASSERT((pids[0] == 100 && pids[1] == 4194304) || (pids[1] == 100 && pids[0] == 4194304));
  }
  /* The same as JSON; and stats keeps the two processes apart. */
  r = RUN("merge", "-o", outj, a, b);
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
  char *j = lp_test_slurp(outj);
  CU_ASSERT_PTR_NOT_NULL_FATAL(j);
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"pid\":4194304,\"tid\":4194304,\"ts\":500000.000,\"dur\":1000.000"));
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"pid\":100,\"tid\":100,\"ts\":0.000,\"dur\":1000.000"));
  free(j);
  r = RUN("stats", "--by", "process", outj);
  CU_ASSERT_EQUAL(r.status, 0);
  char *p100 = strstr(r.out, "process 100"), *p4 = strstr(r.out, "process 4194304");
  CU_ASSERT(p100 && p4);
  CU_ASSERT(p100 && p4 && strstr(p100, "on a") && strstr(p4, "on b"));
  CU_ASSERT(p100 && p4 && (p100 < p4 ? strstr(p100, "on b") > p4 : strstr(p4, "on a") > p100));
  run_free(&r);
  /* Two files read together: processes of two files stay apart too. */
  r = RUN("stats", "--by", "process", "--format", "csv", a, b);
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "host-a.json"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "host-b.json"));
  run_free(&r);
  r = RUN("tree", "--by", "process", a, b);
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "process 100"));
  run_free(&r);
  r = RUN("folded", "--by", "process", a, b);
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, ";on a 1000000\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, ";on b 1000000\n"));
  run_free(&r);
}

/* A merged Perfetto file whose labels hold systrace's words is still read as Perfetto (no NUL byte is text). */
static void test_merge_output_read_back(void) {
  const char *in = path_in("words.json"), *out = path_in("words.pftrace");
  CU_ASSERT_FATAL(write_text(in, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"x-1 [000] 1.0: tracing_mark_write: "
                                 "B|1|TASK-PID\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2}]}\n"));
  run_t r = RUN("merge", "-o", out, in);
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
  r = RUN("stats", "--format", "csv", out);
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "tracing_mark_write: B|1|TASK-PID,1,2000,"));
  run_free(&r);
}

/*
 * Many lanes and names, past the first sizes of merge's tables (256 slots):
 * 1,000 threads of one process, each with its own label and one shared
 * label, come out as 1,000 threads with every label and count.
 */
static void test_merge_many_threads_and_names(void) {
  const char *in = path_in("many.json"), *out = path_in("many.json.merged.json");
  FILE *f = fopen(in, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("{\"traceEvents\":[\n", f);
  for (int t = 1; t <= 1000; t++) /* every lane and name made, then each lane found again */
    fprintf(f, "%s{\"ph\":\"X\",\"name\":\"own %d\",\"pid\":7,\"tid\":%d,\"ts\":%d,\"dur\":3}",
            t > 1 ? ",\n" : "", t, t, t * 10);
  for (int t = 1; t <= 1000; t++)
    fprintf(f, ",\n{\"ph\":\"X\",\"name\":\"shared\",\"pid\":7,\"tid\":%d,\"ts\":%d,\"dur\":1}", t, t * 10 + 5);
  fputs("]}\n", f);
  CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
  run_t r = RUN("merge", "-o", out, in);
  CU_ASSERT_EQUAL(r.status, 0);
  run_free(&r);
  r = RUN("stats", "--format", "csv", out);
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nshared,1000,1000000,"));
  char want[48];
  int found = 0;
  for (int t = 1; t <= 1000; t++) {
    snprintf(want, sizeof want, "\nown %d,1,3000,", t);
    found += strstr(r.out, want) != NULL;
  }
  CU_ASSERT_EQUAL(found, 1000);
  run_free(&r);
  r = RUN("stats", "--by", "thread", "--format", "csv", out);
  CU_ASSERT_EQUAL(r.status, 0);
  int threads = 0;
  for (const char *p = r.out; (p = strstr(p, ",shared,1,")); p++) threads++;
  CU_ASSERT_EQUAL(threads, 1000);
  run_free(&r);
}

int main(int argc, char **argv) {
  if (!realpath("/proc/self/exe", self)) return 2;
  if (argc == 3 && strcmp(argv[1], "job") == 0) return job(atoi(argv[2]));
  if (!realpath("tools/labelprof", tool)) {
    perror("test_merge: setup (run from the build directory)");
    return 2;
  }
  dir = lp_test_tmpdir("merge");
  CU_TestInfo tests[] = {LP_TEST(test_merge_four_processes_one_clock), LP_TEST(test_merge_json_and_perfetto),
                         LP_TEST(test_merge_old_file_refused), LP_TEST(test_merge_same_pid_two_machines),
                         LP_TEST(test_merge_output_read_back), LP_TEST(test_merge_many_threads_and_names),
                         CU_TEST_INFO_NULL};
  return lp_test_main("merge", tests);
}
