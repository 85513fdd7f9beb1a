/*
 * bench_trace.c: the timeline's costs.
 *
 * Linked against the shared liblabelprof. In the same run:
 *   recorded:  an LP_SCOPE pair while a ring-mode session of 64 MiB records;
 *   floor:     two counter reads and two 16-byte stores per pair, cycling
 *              through a thread-local buffer of the same 64 MiB (the memory
 *              traffic of the real thing, without anything else);
 *   monotonic: the recorded pair again in a child process started with
 *              LABELPROF_CLOCK=monotonic (the clock is chosen once per
 *              process), beside one read of each clock;
 *   off:       an LP_SCOPE pair with tracing compiled in but not recording,
 *              beside the bare pseudo-stack push/pop it contains;
 *   spent:     an LP_SCOPE pair once a discard session's budget is spent,
 *              beside an untraced pair in the same session (a scope of no
 *              level: the same inline code, its level test never taken),
 *              and a scope of a level the session does not record, which
 *              goes to the library while the budget is spent (so that the
 *              drops of the levels recorded are counted exactly);
 *   fresh:     a pair in a session just started after another, beside the
 *              same in a warm ring that has wrapped; and the first session
 *              of a process, whose chunks come from the kernel;
 *   export:    events per second written by lp_trace_write_json, and bytes
 *              per event in memory and in the file.
 */
#include "bench.h"

#ifdef LABELPROF_INLINE_RECORDING
#define LP_BENCH_MODE ", the recording protocol inline (LABELPROF_INLINE_RECORDING)"
#else
#define LP_BENCH_MODE ""
#endif

#include <labelprof.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUDGET (64u << 20)

/* The counter the recorder reads (the floor reads it the same way); CLOCK_MONOTONIC where there is none. */
static inline uint64_t counter(void) {
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
  return lp_impl_counter_now();
#else
  return (uint64_t)bench_now_ns();
#endif
}

static void loop_scope(long n) {
  for (long i = 0; i < n; i++) {
    LP_SCOPE("bench");
    BENCH_BARRIER();
  }
}

/* A level the sessions here do not record: the untraced path, while a session runs. */
static void loop_debug_scope(long n) {
  for (long i = 0; i < n; i++) {
    LP_SCOPE_L(LP_LEVEL_DEBUG, "bench");
    BENCH_BARRIER();
  }
}

/*
 * A level not recorded on a thread whose budget is spent, once the thread
 * counts its drops (its first recorded scope after the budget was spent made
 * it count): such a scope goes to the library.
 */
static void loop_debug_counting(long n) {
  {
    LP_SCOPE("bench");
  }
  loop_debug_scope(n);
}

/* An untraced pair: a scope of no level, whose level test is never taken. */
static void loop_untraced(long n) {
  for (long i = 0; i < n; i++) {
    LP_SCOPE_L(0, "bench");
    BENCH_BARRIER();
  }
}

/* The pseudo-stack alone: LP_SCOPE without its trace-level check. */
static void loop_stack_only(long n) {
  static const lp_site_t site = {"bench", __FILE__, "", 0, LP_LEVEL_RUNTIME, 0, 0, 0, 0};
  for (long i = 0; i < n; i++) {
    lp_impl_scope_t s = {&site, lp_impl_push((uintptr_t)&site)};
    BENCH_BARRIER();
    lp_impl_leave(&s);
  }
}

static __thread lp_impl_event_t *floor_buf;
static __thread size_t floor_pos;

static void loop_floor(long n) {
  static const lp_site_t site = {"bench", __FILE__, "", 0, LP_LEVEL_RUNTIME, 0, 0, 0, 0};
  const size_t mask = BUDGET / sizeof(lp_impl_event_t) - 1;
  if (!floor_buf) {
    floor_buf = aligned_alloc(64, BUDGET);
    if (!floor_buf) exit(1);
    memset(floor_buf, 0, BUDGET);
  }
  lp_impl_event_t *b = floor_buf;
  size_t p = floor_pos;
  for (long i = 0; i < n; i++) {
    b[p].ts = counter();
    b[p].tag = (uintptr_t)&site;
    p = (p + 1) & mask;
    BENCH_BARRIER();
    b[p].ts = counter();
    b[p].tag = (uintptr_t)&site | 1;
    p = (p + 1) & mask;
  }
  floor_pos = p;
}

static void loop_counter(long n) {
  uint64_t sum = 0;
  for (long i = 0; i < n; i++) sum += counter();
  if (sum == 42) printf(" ");
}

static void loop_now(long n) {
  uint64_t sum = 0;
  for (long i = 0; i < n; i++) sum += lp_now_ns();
  if (sum == 42) printf(" ");
}

static double file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (double)st.st_size : -1;
}

/*
 * A fresh session (started after another, so its chunks come from the pool)
 * against a warm ring that has wrapped, paired run by run. Each side records
 * `iters` pairs per thread, less than the budget holds.
 */
static void fresh_vs_warm(long iters, int threads, double *fresh, double *warm, double *ratio) {
  double vf[BENCH_RUNS], vw[BENCH_RUNS], vr[BENCH_RUNS];
  lp_trace_opts_t ring = {.policy = LP_TRACE_RING, .budget_bytes = BUDGET};
  for (int r = 0; r < BENCH_RUNS; r++) {
    if (lp_trace_start(&ring) != 0) exit(1);
    bench_run_cold(loop_scope, (long)BUDGET / 32 / threads + 100000, threads); /* fills and wraps the ring */
    vw[r] = bench_run_cold(loop_scope, iters, threads);
    lp_trace_stop();
    if (lp_trace_start(&ring) != 0) exit(1);
    vf[r] = bench_run_cold(loop_scope, iters, threads);
    lp_trace_stop();
    vr[r] = vf[r] / vw[r];
  }
  *fresh = bench_median(vf, BENCH_RUNS);
  *warm = bench_median(vw, BENCH_RUNS);
  *ratio = bench_median(vr, BENCH_RUNS);
}

/* The recorded pair in a child process on clock_gettime: its figures on stdout, "ns1 ns2". */
static int monotonic_pair(double *ns) {
  char cmd[4200], exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return -1;
  exe[n] = '\0';
  snprintf(cmd, sizeof cmd, "LABELPROF_CLOCK=monotonic '%s' --recorded-pair", exe);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  int got = fscanf(f, "%lf %lf", &ns[0], &ns[1]);
  return pclose(f) == 0 && got == 2 ? 0 : -1;
}

static int recorded_pair_only(void) {
  lp_trace_opts_t ring = {.policy = LP_TRACE_RING, .budget_bytes = BUDGET};
  if (lp_trace_start(&ring) != 0) return 1;
  double a = bench_median_run(loop_scope, 5000000, 1), b = bench_median_run(loop_scope, 5000000, 2);
  lp_trace_stop();
  printf("%.3f %.3f\n", a, b);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--recorded-pair") == 0) return recorded_pair_only();
  const long iters = 5000000;
  double rec[2], flo[2], off[2], bare[2], rec_ratio[2], off_ratio[2];
  double spent[2], untraced[2], spent_ratio[2], fresh[2], warm[2], fresh_ratio[2], mono[2] = {-1, -1};
  double unrec[2], spent_untraced[2], unrec_ratio[2];
  lp_trace_opts_t ring = {.policy = LP_TRACE_RING, .budget_bytes = BUDGET};
  lp_trace_stats_t s;

  /* The first session of the process: nothing touched yet, every chunk comes from the kernel. */
  if (lp_trace_start(&ring) != 0) return 1;
  double first = bench_run_cold(loop_scope, 1000000, 1);
  lp_trace_get_stats(&s);
  lp_trace_stop();

  for (int t = 1; t <= 2; t++) {
    /* The floor does not look at the session, so both run while it records. */
    if (lp_trace_start(&ring) != 0) return 1;
    bench_interleaved(loop_scope, loop_floor, iters, t, &rec[t - 1], &flo[t - 1], &rec_ratio[t - 1]);
    lp_trace_stop();
    bench_interleaved(loop_scope, loop_stack_only, iters * 10, t, &off[t - 1], &bare[t - 1], &off_ratio[t - 1]);
    /* A discard session whose budget one chunk's worth of events has spent. */
    lp_trace_opts_t tiny = {.policy = LP_TRACE_DISCARD, .budget_bytes = 16384};
    if (lp_trace_start(&tiny) != 0) return 1;
    loop_scope(10000);
    bench_interleaved(loop_scope, loop_untraced, iters * 10, t, &spent[t - 1], &untraced[t - 1],
                      &spent_ratio[t - 1]);
    bench_interleaved(loop_debug_counting, loop_untraced, iters, t, &unrec[t - 1], &spent_untraced[t - 1],
                      &unrec_ratio[t - 1]);
    lp_trace_stop();
    fresh_vs_warm(1000000, t, &fresh[t - 1], &warm[t - 1], &fresh_ratio[t - 1]);
  }
  double counter_ns = bench_median_run(loop_counter, iters, 1), now_ns = bench_median_run(loop_now, iters, 1);
  int mono_ok = monotonic_pair(mono) == 0;

  /* Export: fill a discard session, then write it. */
  lp_trace_opts_t discard = {.policy = LP_TRACE_DISCARD, .budget_bytes = BUDGET};
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

  printf("labelprof %s: timeline, ns per LP_SCOPE pair (median of %d runs, shared library)%s\n",
         LABELPROF_VERSION_STRING, BENCH_RUNS, LP_BENCH_MODE);
  bench_print_machine();
  printf("timeline clock: %s; the check cost %.2f ms, once\n\n", s.clock_reason ? s.clock_reason : "?",
         (double)s.clock_check_ns / 1e6);
  printf("  %-48s %10s %10s\n", "", "1 thread", "2 threads");
  printf("  %-48s %10.2f %10.2f\n", "recorded (ring, 64 MiB)", rec[0], rec[1]);
  printf("  %-48s %10.2f %10.2f\n", "floor: 2 counter reads + 2 16-byte stores", flo[0], flo[1]);
  printf("  %-48s %9.2fx %9.2fx\n", "recorded / floor (median of paired runs)", rec_ratio[0], rec_ratio[1]);
  if (mono_ok)
    printf("  %-48s %10.2f %10.2f\n", "recorded, LABELPROF_CLOCK=monotonic", mono[0], mono[1]);
  else
    printf("  %-48s %10s\n", "recorded, LABELPROF_CLOCK=monotonic", "failed");
  printf("  %-48s %10.2f %10.2f\n", "fresh session (after another)", fresh[0], fresh[1]);
  printf("  %-48s %10.2f %10.2f\n", "warm ring that has wrapped", warm[0], warm[1]);
  printf("  %-48s %9.2fx %9.2fx\n", "fresh / warm (median of paired runs)", fresh_ratio[0], fresh_ratio[1]);
  printf("  %-48s %10.2f\n", "first session of the process (chunks from the OS)", first);
  printf("  %-48s %10.2f %10.2f\n", "budget spent (discard): a recorded level", spent[0], spent[1]);
  printf("  %-48s %10.2f %10.2f\n", "... an untraced pair", untraced[0], untraced[1]);
  printf("  %-48s %9.2fx %9.2fx\n", "spent / untraced (median of paired runs)", spent_ratio[0], spent_ratio[1]);
  printf("  %-48s %10.2f %10.2f\n", "... a level not recorded, counting thread", unrec[0], unrec[1]);
  printf("  %-48s %9.2fx %9.2fx\n", "... / untraced (median of paired runs)", unrec_ratio[0], unrec_ratio[1]);
  printf("  %-48s %10.2f %10.2f\n", "tracing compiled in, not recording", off[0], off[1]);
  printf("  %-48s %10.2f %10.2f\n", "pseudo-stack push/pop alone (no trace check)", bare[0], bare[1]);
  printf("  %-48s %10.2f %10.2f\n", "the check's cost", off[0] - bare[0], off[1] - bare[1]);
  printf("  %-48s %10.2f\n", "one read of the CPU's counter", counter_ns);
  printf("  %-48s %10.2f\n", "one read of CLOCK_MONOTONIC (lp_now_ns)", now_ns);
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
  double offd = off[0] - bare[0] > off[1] - bare[1] ? off[0] - bare[0] : off[1] - bare[1];
  double rate = (double)s.recorded / (write_s > replace_s ? write_s : replace_s) / 1e6; /* the slower of the two */
  double spent_worst = spent_ratio[0] > spent_ratio[1] ? spent_ratio[0] : spent_ratio[1];
  double fresh_worst = fresh_ratio[0] > fresh_ratio[1] ? fresh_ratio[0] : fresh_ratio[1];
  printf("\ntargets\n\n");
  printf("  %-48s %9.2fx  %s\n", "recorded pair <= 1.2x floor", ratio, bench_verdict(ratio <= 1.2));
  printf("  %-48s %9.2fx  %s\n", "fresh session <= 1.1x warm ring", fresh_worst, bench_verdict(fresh_worst <= 1.1));
  printf("  %-48s %9.2fx  %s\n", "budget spent <= 1.5x an untraced pair", spent_worst,
         bench_verdict(spent_worst <= 1.5));
  printf("  %-48s %7.2f ns  %s\n", "not recording: one branch over the bare stack", offd, bench_verdict(offd <= 0.3));
  printf("  %-48s %8.1f M  %s\n", "export >= 10 M events/s to a file", rate, bench_verdict(rate >= 10.0));
  printf("  %-48s %10.2f  %s\n", "16 bytes per event in memory", (double)s.used_bytes / (double)s.recorded,
         bench_verdict((double)s.used_bytes / (double)s.recorded < 16.5));
  return 0;
}
