/*
 * bench_trace.c: the timeline's costs.
 *
 * Linked against the shared liblabelprof. In the same run:
 *   recorded:  an LP_SCOPE pair while a ring-mode session of 64 MiB records;
 *   floor:     two rdtsc reads and two 16-byte stores per pair, cycling
 *              through a thread-local buffer of the same 64 MiB (the memory
 *              traffic of the real thing, without anything else);
 *   off:       an LP_SCOPE pair with tracing compiled in but not recording,
 *              beside the bare pseudo-stack push/pop it contains;
 *   export:    events per second written by lp_trace_write_json, and bytes
 *              per event in memory and in the file.
 */
#include "bench.h"

#include <labelprof.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUDGET (64u << 20)

static void loop_scope(long n) {
  for (long i = 0; i < n; i++) {
    LP_SCOPE("bench");
    BENCH_BARRIER();
  }
}

/* The pseudo-stack alone: LP_SCOPE without its trace-level check. */
static void loop_stack_only(long n) {
  static const lp_site_t site = {"bench", __FILE__, "", 0, LP_LEVEL_RUNTIME};
  for (long i = 0; i < n; i++) {
    lp_impl_scope_t s = {&site, lp_impl_push((uintptr_t)&site)};
    BENCH_BARRIER();
    lp_impl_leave(&s);
  }
}

static __thread lp_impl_event_t *floor_buf;
static __thread size_t floor_pos;

static void loop_floor(long n) {
  static const lp_site_t site = {"bench", __FILE__, "", 0, LP_LEVEL_RUNTIME};
  const size_t mask = BUDGET / sizeof(lp_impl_event_t) - 1;
  if (!floor_buf) {
    floor_buf = aligned_alloc(64, BUDGET);
    if (!floor_buf) exit(1);
    memset(floor_buf, 0, BUDGET);
  }
  lp_impl_event_t *b = floor_buf;
  size_t p = floor_pos;
  for (long i = 0; i < n; i++) {
    b[p].ts = __builtin_ia32_rdtsc();
    b[p].tag = (uintptr_t)&site;
    p = (p + 1) & mask;
    BENCH_BARRIER();
    b[p].ts = __builtin_ia32_rdtsc();
    b[p].tag = (uintptr_t)&site | 1;
    p = (p + 1) & mask;
  }
  floor_pos = p;
}

static void loop_rdtsc(long n) {
  uint64_t sum = 0;
  for (long i = 0; i < n; i++) sum += __builtin_ia32_rdtsc();
  if (sum == 42) printf(" ");
}

static double file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (double)st.st_size : -1;
}


int main(void) {
  const long iters = 5000000;
  double rec[2], flo[2], off[2], bare[2], rec_ratio[2], off_ratio[2];
  lp_trace_opts_t ring = {.policy = LP_TRACE_RING, .budget_bytes = BUDGET};
  for (int t = 1; t <= 2; t++) {
    /* The floor does not look at the session, so both run while it records. */
    if (lp_trace_start(&ring) != 0) return 1;
    bench_interleaved(loop_scope, loop_floor, iters, t, &rec[t - 1], &flo[t - 1], &rec_ratio[t - 1]);
    lp_trace_stop();
    bench_interleaved(loop_scope, loop_stack_only, iters * 10, t, &off[t - 1], &bare[t - 1], &off_ratio[t - 1]);
  }
  double tsc = bench_median_run(loop_rdtsc, iters, 1);

  /* Export: fill a discard session, then write it. */
  lp_trace_opts_t discard = {.policy = LP_TRACE_DISCARD, .budget_bytes = BUDGET};
  lp_trace_stats_t s;
  char path[64];
  snprintf(path, sizeof path, "/tmp/labelprof-bench-%ld.json", (long)getpid());
  if (lp_trace_start(&discard) != 0) return 1;
  loop_scope(3000000);
  {
    LP_SCOPE("outer"); /* some nesting, as in real traces */
    loop_scope(500000);
  }
  lp_trace_stop();
  lp_trace_get_stats(&s);
  double wr[BENCH_RUNS], rep[BENCH_RUNS], nul[BENCH_RUNS];
  for (int r = 0; r < BENCH_RUNS; r++) {
    unlink(path);
    sync(); /* the last file's blocks are freed outside the timing */
    double t0 = bench_now_ns();
    if (lp_trace_write_json(path, "bench") != 0) return 1;
    double t1 = bench_now_ns();
    if (lp_trace_write_json(path, "bench") != 0) return 1; /* over the file just written */
    double t2 = bench_now_ns();
    if (lp_trace_write_json("/dev/null", "bench") != 0) return 1;
    double t3 = bench_now_ns();
    wr[r] = (t1 - t0) / 1e9;
    rep[r] = (t2 - t1) / 1e9;
    nul[r] = (t3 - t2) / 1e9;
  }
  double write_s = bench_median(wr, BENCH_RUNS), replace_s = bench_median(rep, BENCH_RUNS);
  double null_s = bench_median(nul, BENCH_RUNS);
  double fbytes = file_size(path);
  unlink(path);

  printf("labelprof %s: timeline, ns per LP_SCOPE pair (median of %d runs, shared library)\n\n",
         LABELPROF_VERSION_STRING, BENCH_RUNS);
  printf("  %-48s %10s %10s\n", "", "1 thread", "2 threads");
  printf("  %-48s %10.2f %10.2f\n", "recorded (ring, 64 MiB)", rec[0], rec[1]);
  printf("  %-48s %10.2f %10.2f\n", "floor: 2 rdtsc + 2 16-byte stores, 64 MiB ring", flo[0], flo[1]);
  printf("  %-48s %9.2fx %9.2fx\n", "recorded / floor (median of paired runs)", rec_ratio[0], rec_ratio[1]);
  printf("  %-48s %10.2f %10.2f\n", "tracing compiled in, not recording", off[0], off[1]);
  printf("  %-48s %10.2f %10.2f\n", "pseudo-stack push/pop alone (no trace check)", bare[0], bare[1]);
  printf("  %-48s %10.2f %10.2f\n", "the check's cost", off[0] - bare[0], off[1] - bare[1]);
  printf("  %-48s %10.2f\n", "one rdtsc", tsc);
  printf("\nexport (%llu events, %.1f MiB of chunks)\n\n", (unsigned long long)s.recorded,
         (double)s.used_bytes / (1 << 20));
  printf("  %-48s %10.3f s %8.1f M events/s\n", "lp_trace_write_json to a new file in /tmp", write_s,
         (double)s.recorded / write_s / 1e6);
  printf("  %-48s %10.3f s %8.1f M events/s\n", "... replacing that file", replace_s,
         (double)s.recorded / replace_s / 1e6);
  printf("  %-48s %10.3f s %8.1f M events/s\n", "lp_trace_write_json to /dev/null", null_s,
         (double)s.recorded / null_s / 1e6);
  printf("  %-48s %10.2f\n", "bytes per event in memory", (double)s.used_bytes / (double)s.recorded);
  printf("  %-48s %10.2f\n", "bytes per event in the file", fbytes / (double)s.recorded);

  double ratio = rec_ratio[0] > rec_ratio[1] ? rec_ratio[0] : rec_ratio[1];
  (void)off_ratio;
  double offd = off[0] - bare[0] > off[1] - bare[1] ? off[0] - bare[0] : off[1] - bare[1];
  double rate = (double)s.recorded / (write_s > replace_s ? write_s : replace_s) / 1e6; /* the slower of the two */
  printf("\ntargets\n\n");
  printf("  %-48s %9.2fx  %s\n", "recorded pair <= 1.2x floor", ratio, bench_verdict(ratio <= 1.2));
  printf("  %-48s %7.2f ns  %s\n", "not recording: one branch over the bare stack", offd, bench_verdict(offd <= 0.3));
  printf("  %-48s %8.1f M  %s\n", "export >= 10 M events/s to a file", rate, bench_verdict(rate >= 10.0));
  printf("  %-48s %10.2f  %s\n", "16 bytes per event in memory", (double)s.used_bytes / (double)s.recorded,
         bench_verdict((double)s.used_bytes / (double)s.recorded < 16.5));
  return 0;
}
