/*
 * bench_churn.c: a thread per request, for a long time.
 *
 * 100,000 short-lived threads, created and joined one at a time, each
 * recording one scope: without a timeline (the baseline: what creating and
 * joining a thread costs here), and while a 1 MiB ring records. The cost per
 * thread by quarter shows whether it grows with the threads that came
 * before; RSS shows whether their lanes stay behind. Then the cost of a new
 * thread's first label alone, with and without a timeline (registration,
 * its first chunk), and a profile's memory under churn of threads that each
 * live long enough to be sampled.
 */
#include "bench.h"

#include <labelprof.h>

#define THREADS 100000
#define QUARTERS 4
#define BUDGET (1u << 20)
#define PROFILED 20000 /* threads that each stay long enough to be sampled */

static void *one_scope(void *arg) {
  (void)arg;
  LP_SCOPE("request");
  BENCH_BARRIER();
  return NULL;
}

/* A thread that stays in a label for 300 µs: a collector at 10 kHz samples it a few times. */
static void *sampled_scope(void *arg) {
  (void)arg;
  LP_SCOPE("request");
  double t0 = bench_now_ns();
  while (bench_now_ns() - t0 < 300e3) BENCH_BARRIER();
  return NULL;
}

/* µs per thread for each quarter of n threads running fn, created and joined one at a time. */
static int churn_with(void *(*fn)(void *), int n, double *quarter_us) {
  for (int q = 0; q < QUARTERS; q++) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n / QUARTERS; i++) {
      pthread_t th;
      if (pthread_create(&th, NULL, fn, NULL) != 0 || pthread_join(th, NULL) != 0) return -1;
    }
    quarter_us[q] = (bench_now_ns() - t0) / 1e3 / (n / QUARTERS);
  }
  return 0;
}

static int churn(int n, double *quarter_us) { return churn_with(one_scope, n, quarter_us); }

/* The time of a new thread's first label, and of its second. */
typedef struct first {
  double first_ns, second_ns;
} first_t;

static void *first_label(void *arg) {
  first_t *f = arg;
  double t0 = bench_now_ns();
  { LP_SCOPE("first"); }
  double t1 = bench_now_ns();
  { LP_SCOPE("second"); }
  double t2 = bench_now_ns();
  f->first_ns = t1 - t0;
  f->second_ns = t2 - t1;
  return NULL;
}

static double first_label_us(int samples) {
  double v[64];
  if (samples > 64) samples = 64;
  for (int i = 0; i < samples; i++) {
    pthread_t th;
    first_t f = {0, 0};
    if (pthread_create(&th, NULL, first_label, &f) != 0 || pthread_join(th, NULL) != 0) return -1;
    v[i] = f.first_ns / 1e3;
  }
  return bench_median(v, samples);
}

int main(void) {
  double base[QUARTERS], rec[QUARTERS], prof[QUARTERS];
  lp_trace_opts_t ring = {.policy = LP_TRACE_RING, .budget_bytes = BUDGET};
  lp_trace_stats_t st;

  /* Warm the allocator and the thread stack cache, so that the baseline starts where the others do. */
  if (churn(4000, base) != 0) return 1;
  if (churn(THREADS, base) != 0) return 1;
  double first_off = first_label_us(41);

  if (lp_trace_start(&ring) != 0) return 1;
  double rss0 = bench_rss();
  if (churn(THREADS, rec) != 0) return 1;
  double rss_growth = bench_rss() - rss0;
  double first_on = first_label_us(41);
  lp_trace_get_stats(&st);
  lp_trace_stop();

  lp_profile_opts_t po = {.hz = 10000};
  if (churn_with(sampled_scope, 2000, prof) != 0) return 1; /* the allocator's and the stacks' own growth first */
  if (lp_profile_start(&po) != 0) return 1;
  double prss0 = bench_rss();
  if (churn_with(sampled_scope, PROFILED, prof) != 0) return 1;
  double prof_growth = bench_rss() - prss0;
  lp_profile_t *p = NULL;
  lp_profile_stop(&p);
  lp_profile_stats_t ps;
  lp_profile_get_stats(p, &ps);
  size_t records = lp_profile_thread_count(p);
  lp_profile_free(p);

  printf("labelprof %s: thread churn, %d threads created and joined one at a time, each with one scope\n",
         LABELPROF_VERSION_STRING, THREADS);
  bench_print_machine();
  printf("timeline clock: %s\n\n", st.clock_reason ? st.clock_reason : "?");
  printf("  %-36s", "µs per thread, by quarter");
  for (int q = 0; q < QUARTERS; q++) printf(" %9s%d", "Q", q + 1);
  printf(" %12s\n", "RSS growth");
  printf("  %-36s", "no timeline (create + join)");
  for (int q = 0; q < QUARTERS; q++) printf(" %10.1f", base[q]);
  printf(" %12s\n", "-");
  printf("  %-36s", "recording, ring 1 MiB");
  for (int q = 0; q < QUARTERS; q++) printf(" %10.1f", rec[q]);
  printf(" %9.2f MiB\n", rss_growth / (1 << 20));
  printf("  %-36s", "profile at 10 kHz (20,000 threads, 300 µs)");
  for (int q = 0; q < QUARTERS; q++) printf(" %10.1f", prof[q]);
  printf(" %9.2f MiB\n", prof_growth / (1 << 20));
  printf("\n  first label of a new thread: %.1f µs without a timeline, %.1f µs recording (median of 41)\n",
         first_off, first_on);
  printf("  ring at the end: %.2f MiB of chunks in use for a budget of %.2f MiB\n", st.used_bytes / 1048576.0,
         st.budget_bytes / 1048576.0);
  printf("  profile at the end: %zu thread records for %u threads sampled\n", records, ps.threads);

  double growth = rec[QUARTERS - 1] / rec[0];
  double over = rec[QUARTERS - 1] - base[QUARTERS - 1];
  double budget_mib = (BUDGET + (1u << 20)) / 1048576.0;
  printf("\ntargets\n\n");
  printf("  %-52s %7.2fx  %s\n", "recording: last quarter <= 1.2x the first", growth, bench_verdict(growth <= 1.2));
  printf("  %-52s %7.1f µs  %s\n", "recording: last quarter <= untraced + 20 µs", over, bench_verdict(over <= 20));
  printf("  %-52s %6.2f MiB  %s\n", "recording: RSS growth <= budget + 1 MiB", rss_growth / 1048576.0,
         bench_verdict(rss_growth <= budget_mib * 1048576.0));
  printf("  %-52s %7.1f µs  %s\n", "first label recording <= untraced + 5 µs", first_on - first_off,
         bench_verdict(first_on - first_off <= 5.0));
  printf("  %-52s %7.2fx  %s\n", "profile: last quarter <= 1.2x the first", prof[QUARTERS - 1] / prof[0],
         bench_verdict(prof[QUARTERS - 1] / prof[0] <= 1.2));
  printf("  %-52s %6.2f MiB  %s\n", "profile: RSS growth <= 1 MiB", prof_growth / 1048576.0,
         bench_verdict(prof_growth <= 1048576.0));
  return 0;
}
