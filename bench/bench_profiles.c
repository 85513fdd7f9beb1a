/*
 * bench_profiles.c: what pprof output and flame graphs cost. (What CPU
 * samples cost is in bench_cpu.c.)
 *
 * 1. pprof writing: a profile of 125,000 distinct stacks written with
 *    lp_profile_write_pprof(), wall and CPU time. Target: 100 ms.
 * 2. labelprof flamegraph of a large JSON trace against labelprof folded on
 *    the same file (the same reader and tree): within 10%, and at most 5 MB
 *    of SVG.
 */
#include "bench.h"

#include "testing.h" /* lp__profile_start_manual, lp__profile_sample_now */
#include <labelprof.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- 1. pprof writing: 50 x 50 x 50 = 125,000 distinct stacks, one sample each --------------- */

#define C10(p) X(p##0) X(p##1) X(p##2) X(p##3) X(p##4) X(p##5) X(p##6) X(p##7) X(p##8) X(p##9)

static void level(int depth, int code) {
  if (depth == 3) {
    lp__profile_sample_now();
    return;
  }
  int rest = code / 50;
#define X(n)                       \
  case n: {                        \
    LP_SCOPE("site " #n);          \
    level(depth + 1, rest);        \
    break;                         \
  }
  switch (code % 50) {
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) C10(1) C10(2) C10(3) C10(4)
  }
#undef X
}

static void bench_pprof(void) {
  lp_profile_opts_t o = {.hz = 1000};
  lp_profile_t *p = NULL;
  { LP_SCOPE("register"); }
  if (lp__profile_start_manual(&o) != 0) {
    fprintf(stderr, "bench_profiles: cannot start a manual profile\n");
    exit(1);
  }
  for (int code = 0; code < 50 * 50 * 50; code++) level(0, code);
  if (lp_profile_stop(&p) != 0 || !p) {
    fprintf(stderr, "bench_profiles: cannot stop the profile\n");
    exit(1);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/bench_profiles.%d.pb.gz", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
           (int)getpid());
  double runs[BENCH_RUNS], cpus[BENCH_RUNS];
  for (int r = 0; r < BENCH_RUNS; r++) {
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    double t0 = bench_now_ns();
    if (lp_profile_write_pprof(p, path) != 0) {
      fprintf(stderr, "bench_profiles: cannot write %s\n", path);
      exit(1);
    }
    runs[r] = (bench_now_ns() - t0) / 1e6;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    cpus[r] = ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) / 1e6;
  }
  FILE *f = fopen(path, "rb");
  long size = 0;
  if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
  if (f) fclose(f);
  unlink(path);
  lp_profile_free(p);
  double ms = bench_median(runs, BENCH_RUNS), cpu = bench_median(cpus, BENCH_RUNS);
  printf("\n  pprof of a profile of 125,000 distinct stacks (3 labels deep), median of %d: %.1f ms (%.1f ms of CPU), "
         "%.1f MB\n",
         BENCH_RUNS, ms, cpu, (double)size / 1e6);
  printf("  pprof writing of 100,000 or more distinct stacks <= 100 ms              %6.1f ms  %s\n", ms,
         bench_verdict(ms <= 100.0));
}

/* ---- 2. flamegraph of a large trace: as fast as the command reads it (labelprof folded reads the same way) -- */

static double run_ms(const char *cmd) {
  double t0 = bench_now_ns();
  int rc = system(cmd);
  if (rc != 0) {
    fprintf(stderr, "bench_profiles: '%s' failed\n", cmd);
    exit(1);
  }
  return (bench_now_ns() - t0) / 1e6;
}

static void bench_flamegraph(void) {
  const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char trace[2048], svg[2048], cmd[8192];
  snprintf(trace, sizeof trace, "%s/bench_profiles.%d.json", dir, (int)getpid());
  snprintf(svg, sizeof svg, "%s/bench_profiles.%d.svg", dir, (int)getpid());
  FILE *f = fopen(trace, "w");
  if (!f) {
    fprintf(stderr, "bench_profiles: cannot write %s\n", trace);
    exit(1);
  }
  /* 4 threads, 300,000 scopes each: outer > one of 1000 middles > inner, in order of their starts. */
  fputs("[", f);
  for (int t = 0; t < 4; t++)
    for (long i = 0; i < 100000; i++) {
      long ts = i * 100;
      fprintf(f, "%s{\"name\":\"outer\",\"ph\":\"X\",\"ts\":%ld,\"dur\":90,\"pid\":1,\"tid\":%d},\n", t || i ? "," : "", ts, t);
      fprintf(f, "{\"name\":\"middle %ld\",\"ph\":\"X\",\"ts\":%ld,\"dur\":60,\"pid\":1,\"tid\":%d},\n", i % 1000, ts + 10, t);
      fprintf(f, "{\"name\":\"inner\",\"ph\":\"X\",\"ts\":%ld,\"dur\":20,\"pid\":1,\"tid\":%d}", ts + 20, t);
    }
  fputs("]\n", f);
  long size = ftell(f);
  if (fclose(f) != 0) exit(1);
  double folded[3], flame[3];
  for (int r = 0; r < 3; r++) {
    snprintf(cmd, sizeof cmd, "./tools/labelprof folded '%s' >/dev/null", trace);
    folded[r] = run_ms(cmd);
    snprintf(cmd, sizeof cmd, "./tools/labelprof flamegraph '%s' >'%s'", trace, svg);
    flame[r] = run_ms(cmd);
  }
  f = fopen(svg, "r");
  long svgsize = 0;
  if (f && fseek(f, 0, SEEK_END) == 0) svgsize = ftell(f);
  if (f) fclose(f);
  unlink(trace);
  unlink(svg);
  double mf = bench_median(folded, 3), mg = bench_median(flame, 3);
  printf("\n  a %.0f MB JSON trace of 1.2 million scopes: labelprof folded %.0f ms, labelprof flamegraph %.0f ms "
         "(%.0f MB/s), SVG %.0f kB\n",
         (double)size / 1e6, mf, mg, (double)size / 1e3 / mg, (double)svgsize / 1e3);
  printf("  flamegraph within 10%% of the command's reading speed (folded)          %+5.1f%%    %s\n",
         100.0 * (mg - mf) / mf, bench_verdict(mg <= 1.1 * mf));
  printf("  flamegraph output <= 5 MB                                              %6.2f MB  %s\n",
         (double)svgsize / 1e6, bench_verdict(svgsize <= 5000000));
}

int main(void) {
  printf("labelprof %s: what pprof output and flame graphs cost\n", LABELPROF_VERSION_STRING);
  bench_print_machine();
  bench_pprof();
  bench_flamegraph();
  return 0;
}
