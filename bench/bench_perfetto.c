/*
 * bench_perfetto.c: the timeline written as Perfetto protobuf, against the
 * JSON, on the peers' workload: 2 threads, scopes of about 1.8 us, a session
 * written at the end. One table:
 *
 * - scopes encoded per second of the writer's CPU (the writing thread's CPU
 *   time for lp_trace_write_perfetto, to a file in $TMPDIR);
 * - bytes per scope on disk (a scope is one complete event in the JSON, a
 *   begin and an end packet in the protobuf);
 * - recorded / unrecorded CPU of the whole process to the end of the
 *   write (the median of paired runs, alternated);
 * - peak RSS of a long streamed session: streaming is not written yet.
 */
#include "bench.h"

#include <labelprof.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define SCOPES_PER_THREAD 200000

static void spin_ns(double ns) {
  double t0 = bench_now_ns();
  while (bench_now_ns() - t0 < ns) BENCH_BARRIER();
}

static void *work(void *arg) {
  (void)arg;
  for (long i = 0; i < SCOPES_PER_THREAD; i++) {
    LP_SCOPE("peer scope");
    spin_ns(1800);
  }
  return NULL;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run_threads(void) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    if (pthread_create(&t[i], NULL, work, NULL) != 0) exit(1);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

/* One run: CPU of the process for the workload (and, if recorded, the write); the write's own CPU and bytes. */
static double one_run(int recorded, int perfetto, const char *path, double *write_cpu, double *bytes) {
  double c0 = cpu_s();
  if (recorded && lp_trace_start(NULL) != 0) exit(1);
  run_threads();
  if (recorded) {
    lp_trace_stop();
    double w0 = thread_cpu_s();
    int rc = perfetto ? lp_trace_write_perfetto(path, NULL) : lp_trace_write_json(path, NULL);
    *write_cpu = thread_cpu_s() - w0;
    if (rc != 0) {
      fprintf(stderr, "bench_perfetto: writing %s: %s\n", path, lp_strerror(rc));
      exit(1);
    }
    struct stat st;
    *bytes = stat(path, &st) == 0 ? (double)st.st_size : 0;
  }
  return cpu_s() - c0;
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  char pf[512], js[512];
  snprintf(pf, sizeof pf, "%s/bench_perfetto_%d.pftrace", tmp && *tmp ? tmp : "/tmp", (int)getpid());
  snprintf(js, sizeof js, "%s/bench_perfetto_%d.json", tmp && *tmp ? tmp : "/tmp", (int)getpid());
  enum { RUNS = 3 };
  double ratio_pf[RUNS], ratio_js[RUNS], enc_pf[RUNS], enc_js[RUNS], bpe_pf = 0, bpe_js = 0;
  double scopes = 2.0 * SCOPES_PER_THREAD;
  for (int r = 0; r < RUNS; r++) {
    double wc, b, dummy;
    double base = one_run(0, 0, NULL, &dummy, &dummy);
    double rec = one_run(1, 1, pf, &wc, &b);
    ratio_pf[r] = rec / base;
    enc_pf[r] = scopes / wc;
    bpe_pf = b / scopes;
    base = one_run(0, 0, NULL, &dummy, &dummy);
    rec = one_run(1, 0, js, &wc, &b);
    ratio_js[r] = rec / base;
    enc_js[r] = scopes / wc;
    bpe_js = b / scopes;
  }
  unlink(pf);
  unlink(js);
  double rp = bench_median(ratio_pf, RUNS), rj = bench_median(ratio_js, RUNS);
  double ep = bench_median(enc_pf, RUNS), ej = bench_median(enc_js, RUNS);
  printf("bench_perfetto: the timeline as Perfetto protobuf and as JSON, written at the end\n");
  bench_print_machine();
  printf("workload: 2 threads x %d scopes of ~1.8 us; medians of %d paired runs\n", SCOPES_PER_THREAD, RUNS);
  printf("  %-58s %12s %12s %10s  %s\n", "", "perfetto", "json", "target", "");
  printf("  %-58s %11.1fM %11.1fM %9s  %s\n", "scopes encoded per second of the writer's CPU", ep / 1e6, ej / 1e6,
         ">= 60M", bench_verdict(ep >= 60e6));
  printf("  %-58s %12.1f %12.1f %10s  %s\n", "bytes per scope on disk", bpe_pf, bpe_js, "<= 12",
         bench_verdict(bpe_pf <= 12));
  printf("  %-58s %11.3fx %11.3fx %10s  %s\n", "recorded / unrecorded CPU to the end of the write", rp, rj,
         "<= 1.03x", bench_verdict(rp <= 1.03));
  printf("  %-58s %12s %12s %10s  %s\n", "peak RSS of a long streamed session, 4 MiB budget", "-", "-", "flat",
         "not measured: streaming is not written yet");
  return 0;
}
