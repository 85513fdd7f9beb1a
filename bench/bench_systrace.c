/*
 * bench_systrace.c: layers and phases, the costs that are not the hot path's.
 *
 * Linked against the shared liblabelprof. In the same run:
 *   export:  events per second written by lp_trace_write_systrace (to a new
 *            file in /tmp and to /dev/null) for a session of 4 M events
 *            (half of them LP_SCOPE_PHASE scopes with their tags, half
 *            plain labels, on 2 threads), beside lp_trace_write_json for
 *            the same session;
 *   marker:  ns per recorded LP_SCOPE_PHASE pair with LABELPROF_TRACE_MARKER
 *            (two write system calls a pair) to /dev/null, to a file, and
 *            to the kernel's trace_marker where tracefs is mounted and
 *            writable, each in a child process started with the variable
 *            (it is read once, when the library loads), beside the same
 *            pair recorded without a marker;
 *   switch:  ns per LP_PHASE_SWITCH (a call into the library), beside a
 *            pair of LP_SCOPE_PHASE.
 */
#include "bench.h"

#include <labelprof.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EVENTS (4L << 20)

static void loop_phase(long n) {
  for (long i = 0; i < n; i++) {
    LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "bench");
    BENCH_BARRIER();
  }
}

static void loop_switch(long n) {
  for (long i = 0; i < n; i++) {
    LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_TRANSFORMATION, "bench");
    BENCH_BARRIER();
    LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "bench");
    BENCH_BARRIER();
  }
}

static void loop_two_scopes(long n) {
  for (long i = 0; i < n; i++) {
    {
      LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_TRANSFORMATION, "bench");
      BENCH_BARRIER();
    }
    {
      LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "bench");
      BENCH_BARRIER();
    }
  }
}

/* Half layered scopes, half plain labels nested in them: what the export has to write. */
static void *fill(void *arg) {
  long n = *(long *)arg;
  for (long i = 0; i < n; i++) {
    LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_PREPARATION, "prepare the model");
    LP_SCOPE("kernel");
    BENCH_BARRIER();
  }
  return NULL;
}

static double ns_per(void (*fn)(long), long n) {
  fn(n / 10); /* warm */
  double t0 = bench_now_ns();
  fn(n);
  return (bench_now_ns() - t0) / (double)n;
}

/* The child's part: ns per recorded pair, under whatever LABELPROF_TRACE_MARKER the parent gave it. */
static int marker_child(void) {
  double v[BENCH_RUNS];
  (void)ns_per(loop_phase, 200000);
  for (int r = 0; r < BENCH_RUNS; r++) v[r] = ns_per(loop_phase, 200000);
  printf("%.3f\n", bench_median(v, BENCH_RUNS));
  return 0;
}

/* Runs this program as a marker child with the variable set; -1 if it failed. */
static double marker_run(const char *exe, const char *target) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "LABELPROF_TRACE_MARKER='%s' LABELPROF_TRACE_BUFFER=64 '%s' --marker-child", target, exe);
  FILE *p = popen(cmd, "r");
  double v = -1;
  if (!p) return -1;
  if (fscanf(p, "%lf", &v) != 1) v = -1;
  if (pclose(p) != 0) v = -1;
  return v;
}

static double thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Wall seconds of one write; *cpu gets the calling thread's CPU seconds (user and system), which a loaded machine inflates less. */
static double seconds_of(int (*write)(const char *), const char *path, double *cpu) {
  double c0 = thread_cpu_ns(), t0 = bench_now_ns();
  if (write(path) != 0) return -1;
  *cpu = (thread_cpu_ns() - c0) / 1e9;
  return (bench_now_ns() - t0) / 1e9;
}

static int write_json(const char *path) { return lp_trace_write_json(path, "bench"); }

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--marker-child") == 0) return marker_child();
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 1;
  exe[n] = '\0';

  /* ---- export ---- */
  lp_trace_opts_t o = {.budget_bytes = 128u << 20};
  if (lp_trace_start(&o) != 0) return 1;
  long per_thread = EVENTS / 8; /* 2 threads x 2 scopes x 2 events */
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    if (pthread_create(&th[i], NULL, fill, &per_thread) != 0) return 1;
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  if (lp_trace_stop() != 0) return 1;
  lp_trace_stats_t s;
  if (lp_trace_get_stats(&s) != 0) return 1;
  char path[128];
  snprintf(path, sizeof path, "/tmp/labelprof-bench-%ld.systrace", (long)getpid());
  double sys_file[BENCH_RUNS], sys_null[BENCH_RUNS], json_file[BENCH_RUNS], ratio[BENCH_RUNS];
  double sys_file_cpu[BENCH_RUNS], sys_null_cpu[BENCH_RUNS], json_file_cpu[BENCH_RUNS];
  for (int r = 0; r < BENCH_RUNS; r++) {
    unlink(path);
    sys_file[r] = seconds_of(lp_trace_write_systrace, path, &sys_file_cpu[r]);
    unlink(path);
    json_file[r] = seconds_of(write_json, path, &json_file_cpu[r]);
    unlink(path);
    sys_null[r] = seconds_of(lp_trace_write_systrace, "/dev/null", &sys_null_cpu[r]);
    if (sys_file[r] < 0 || json_file[r] < 0 || sys_null[r] < 0) return 1;
    ratio[r] = sys_file[r] / json_file[r];
  }
  double sfc = bench_median(sys_file_cpu, BENCH_RUNS), snc = bench_median(sys_null_cpu, BENCH_RUNS);
  double jfc = bench_median(json_file_cpu, BENCH_RUNS);
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 1) load[0] = -1;
  if (lp_trace_write_systrace(path) != 0) return 1;
  struct stat st;
  double fbytes = stat(path, &st) == 0 ? (double)st.st_size : 0;
  unlink(path);
  double sf = bench_median(sys_file, BENCH_RUNS), sn = bench_median(sys_null, BENCH_RUNS);
  double jf = bench_median(json_file, BENCH_RUNS), rt = bench_median(ratio, BENCH_RUNS);
  double ev = (double)s.recorded;

  /* ---- marker ---- */
  double plain[BENCH_RUNS];
  lp_trace_opts_t ring = {.budget_bytes = 64u << 20, .policy = LP_TRACE_RING};
  if (lp_trace_start(&ring) != 0) return 1;
  (void)ns_per(loop_two_scopes, 1000000); /* the session's chunks, touched once */
  for (int r = 0; r < BENCH_RUNS; r++) plain[r] = ns_per(loop_phase, 200000);
  double rec = bench_median(plain, BENCH_RUNS);
  double sw[BENCH_RUNS], two[BENCH_RUNS];
  for (int r = 0; r < BENCH_RUNS; r++) {
    sw[r] = ns_per(loop_switch, 200000);
    two[r] = ns_per(loop_two_scopes, 200000);
  }
  if (lp_trace_stop() != 0) return 1;
  double swm = bench_median(sw, BENCH_RUNS), twom = bench_median(two, BENCH_RUNS);
  char mfile[128];
  snprintf(mfile, sizeof mfile, "/tmp/labelprof-bench-%ld.marker", (long)getpid());
  double m_null = marker_run(exe, "/dev/null");
  double m_file = marker_run(exe, mfile);
  unlink(mfile);
  const char *kernel = access("/sys/kernel/tracing/trace_marker", W_OK) == 0         ? "/sys/kernel/tracing/trace_marker"
                       : access("/sys/kernel/debug/tracing/trace_marker", W_OK) == 0 ? "/sys/kernel/debug/tracing/trace_marker"
                                                                                      : NULL;
  double m_kernel = kernel ? marker_run(exe, kernel) : -1;

  printf("labelprof %s: layers and phases (median of %d runs, shared library)\n", LABELPROF_VERSION_STRING,
         BENCH_RUNS);
  bench_print_machine();
  printf("load average %.2f while it ran\n", load[0]);
  printf("\nexport (%.0f events, 2 threads, half of them tagged scopes)  wall: s, M events/s; CPU of the writing thread: s, M events/s\n\n", ev);
  printf("  %-48s %8.3f %8.1f %10.3f %8.1f\n", "lp_trace_write_systrace to a new file in /tmp", sf, ev / sf / 1e6, sfc,
         ev / sfc / 1e6);
  printf("  %-48s %8.3f %8.1f %10.3f %8.1f\n", "lp_trace_write_systrace to /dev/null", sn, ev / sn / 1e6, snc,
         ev / snc / 1e6);
  printf("  %-48s %8.3f %8.1f %10.3f %8.1f\n", "lp_trace_write_json to a new file (same session)", jf, ev / jf / 1e6,
         jfc, ev / jfc / 1e6);
  printf("  %-48s %9.2fx\n", "systrace / JSON (median of paired runs)", rt);
  printf("  %-48s %10.2f\n", "bytes per event in the systrace file", fbytes / ev);
  printf("\nrecording, ns per LP_SCOPE_PHASE pair (1 thread)\n\n");
  printf("  %-48s %10.2f\n", "recorded, no marker", rec);
  if (m_null > 0) printf("  %-48s %10.2f   %+.0f ns per event\n", "LABELPROF_TRACE_MARKER=/dev/null", m_null, (m_null - rec) / 2);
  if (m_file > 0) printf("  %-48s %10.2f   %+.0f ns per event\n", "LABELPROF_TRACE_MARKER=a file in /tmp", m_file, (m_file - rec) / 2);
  if (m_kernel > 0)
    printf("  %-48s %10.2f   %+.0f ns per event\n", "LABELPROF_TRACE_MARKER=1 (the kernel's)", m_kernel, (m_kernel - rec) / 2);
  else
    printf("  %-48s %10s\n", "LABELPROF_TRACE_MARKER=1 (the kernel's)", "no tracefs");
  printf("  %-48s %10.2f\n", "scope + LP_PHASE_SWITCH, recorded", swm);
  printf("  %-48s %10.2f\n", "two LP_SCOPE_PHASE, recorded", twom);
  printf("\ntargets\n\n");
  double rate = ev / sf / 1e6, cpu_rate = ev / sfc / 1e6;
  printf("  %-48s %8.1f M  %s\n", "systrace export >= 10 M events/s to a file (wall)", rate, bench_verdict(rate >= 10.0));
  printf("  %-48s %8.1f M  %s\n", "... in the writing thread's CPU time", cpu_rate, bench_verdict(cpu_rate >= 10.0));
  printf("  %-48s %9.2fx  %s\n", "systrace no slower than the JSON (wall, paired)", rt, bench_verdict(rt <= 1.0));
  return 0;
}
