/*
 * bench_scope.c: the cost of a label on the hot path, and of the collector.
 *
 * Linked against the shared liblabelprof, like a user's program. In the same
 * run, beside LP_SCOPE, two baselines:
 *   floor: a bare thread-local push/pop with a release store (what any
 *          pseudo-stack must at least do): the push loads the depth the
 *          last pop stored, the pop stores a register, so one store-to-load
 *          forward per pair is on the loop's dependency chain, as in
 *          LP_SCOPE (on Intel each forward costs about 5 cycles);
 *   mutex: a thread-local stack with a mutex locked on every push and pop,
 *          the gemmlowp and ruy design.
 * Ratios are taken between figures of this run only: the machine is shared.
 */
#include "bench.h"

#include <labelprof.h>
#include <stdatomic.h>
#include <string.h>

static void loop_scope(long n) {
  for (long i = 0; i < n; i++) {
    LP_SCOPE("bench");
    BENCH_BARRIER();
  }
}

/* The floor: the least a pseudo-stack can do. */
static __thread struct {
  _Atomic uint32_t depth;
  _Atomic(const void *) frames[64];
} floor_stack;

static void loop_floor(long n) {
  static const char site[] = "bench";
  for (long i = 0; i < n; i++) {
    uint32_t d = atomic_load_explicit(&floor_stack.depth, memory_order_relaxed);
    atomic_store_explicit(&floor_stack.frames[d], (const void *)site, memory_order_relaxed);
    atomic_store_explicit(&floor_stack.depth, d + 1, memory_order_release);
    BENCH_BARRIER();
    atomic_store_explicit(&floor_stack.depth, d, memory_order_release);
  }
}

/* The gemmlowp/ruy design: the collector and the owner share a per-thread mutex. */
typedef struct mstack {
  pthread_mutex_t mu;
  const void *frames[64];
  int depth;
} mstack_t;
static __thread mstack_t *mstack;

static void loop_mutex(long n) {
  static const char site[] = "bench";
  if (!mstack) {
    mstack = calloc(1, sizeof *mstack);
    if (!mstack || pthread_mutex_init(&mstack->mu, NULL) != 0) exit(1);
  }
  mstack_t *s = mstack;
  for (long i = 0; i < n; i++) {
    pthread_mutex_lock(&s->mu);
    s->frames[s->depth++] = site;
    pthread_mutex_unlock(&s->mu);
    BENCH_BARRIER();
    pthread_mutex_lock(&s->mu);
    s->depth--;
    pthread_mutex_unlock(&s->mu);
  }
}

/* ---- collector cost ---------------------------------------------------------- */

static atomic_int busy_stop;

static void busy_nest(int depth) {
  LP_SCOPE("nest");
  if (depth > 1) busy_nest(depth - 1);
}

static void *busy_worker(void *arg) {
  (void)arg;
  LP_SCOPE("busy");
  while (!atomic_load_explicit(&busy_stop, memory_order_relaxed)) busy_nest(4);
  return NULL;
}

static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;
static int idle_release;

static void idle_nest(int depth, pthread_barrier_t *ready) {
  LP_SCOPE("idle");
  if (depth > 1) {
    idle_nest(depth - 1, ready);
    return;
  }
  pthread_barrier_wait(ready);
  pthread_mutex_lock(&idle_mu);
  while (!idle_release) pthread_cond_wait(&idle_cv, &idle_mu);
  pthread_mutex_unlock(&idle_mu);
}

static void *idle_worker(void *arg) {
  idle_nest(8, arg);
  return NULL;
}

/* Collector CPU ns per thread-sample while `busy` threads churn their stacks or `idle` threads wait deep in labels. */
static double collector_cost(int busy, int idle, double seconds, uint64_t *samples_out, double *pass_ns,
                             double *wake_us) {
  pthread_t th[128];
  pthread_barrier_t ready;
  lp_profile_opts_t o = {.hz = 10000};
  lp_profile_t *p = NULL;
  lp_profile_stats_t s;
  int n = 0;
  atomic_store(&busy_stop, 0);
  idle_release = 0;
  pthread_barrier_init(&ready, NULL, (unsigned)idle + 1);
  for (int i = 0; i < busy; i++)
    if (pthread_create(&th[n], NULL, busy_worker, NULL) == 0) n++;
  for (int i = 0; i < idle; i++)
    if (pthread_create(&th[n], NULL, idle_worker, &ready) == 0) n++;
  pthread_barrier_wait(&ready);
  if (lp_profile_start(&o) != 0) return -1;
  double t0 = bench_now_ns();
  while (bench_now_ns() - t0 < seconds * 1e9) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  if (lp_profile_stop(&p) != 0) return -1;
  lp_profile_get_stats(p, &s);
  lp_profile_free(p);
  atomic_store(&busy_stop, 1);
  pthread_mutex_lock(&idle_mu);
  idle_release = 1;
  pthread_cond_broadcast(&idle_cv);
  pthread_mutex_unlock(&idle_mu);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&ready);
  *samples_out = s.samples;
  *pass_ns = s.samples ? (double)s.sampling_ns / (double)s.samples : -1;
  *wake_us = s.ticks ? ((double)s.collector_cpu_ns - (double)s.sampling_ns) / (double)s.ticks / 1000.0 : -1;
  return s.samples ? (double)s.collector_cpu_ns / (double)s.samples : -1;
}


int main(void) {
  const long iters = 50000000;
  double scope[2], scope_on[2], flo[2], mtx[2], vs_floor[2], mutex_ratio[2];
  for (int t = 1; t <= 2; t++) {
    bench_interleaved(loop_scope, loop_floor, iters, t, &scope[t - 1], &flo[t - 1], &vs_floor[t - 1]);
    mtx[t - 1] = bench_median_run(loop_mutex, iters / 10, t);
    mutex_ratio[t - 1] = mtx[t - 1] / scope[t - 1];
    lp_profile_opts_t o = {.hz = 1000};
    if (lp_profile_start(&o) != 0) return 1;
    scope_on[t - 1] = bench_median_run(loop_scope, iters, t);
    lp_profile_stop(NULL);
  }
  uint64_t busy_samples = 0, idle_samples = 0;
  double busy_pass, idle_pass, busy_wake, idle_wake;
  double busy_cost = collector_cost(2, 0, 1.0, &busy_samples, &busy_pass, &busy_wake);
  double idle_cost = collector_cost(0, 64, 1.0, &idle_samples, &idle_pass, &idle_wake);

  printf("labelprof %s: hot path, ns per push+pop pair (median of %d runs, shared library)\n",
         LABELPROF_VERSION_STRING, BENCH_RUNS);
  bench_print_machine();
  printf("\n");
  printf("  %-44s %10s %10s\n", "", "1 thread", "2 threads");
  printf("  %-44s %10.2f %10.2f\n", "LP_SCOPE, collector off", scope[0], scope[1]);
  printf("  %-44s %10.2f %10.2f\n", "LP_SCOPE, collector on (1 kHz)", scope_on[0], scope_on[1]);
  printf("  %-44s %10.2f %10.2f\n", "floor: bare TLS push/pop, release store", flo[0], flo[1]);
  printf("  %-44s %10.2f %10.2f\n", "mutex per push and pop (gemmlowp, ruy)", mtx[0], mtx[1]);
  printf("  %-44s %9.1fx %9.1fx\n", "mutex / LP_SCOPE", mutex_ratio[0], mutex_ratio[1]);
  printf("  %-44s %9.2fx %9.2fx\n", "LP_SCOPE / floor (median of paired runs)", vs_floor[0], vs_floor[1]);
  printf("\ncollector, per thread-sample (10 kHz for 1 s)\n\n");
  printf("  %-44s %12s %14s %10s\n", "", "sampling ns", "CPU ns (all)", "samples");
  printf("  %-44s %12.0f %14.0f %10llu\n", "2 threads churning 5-deep stacks", busy_pass, busy_cost,
         (unsigned long long)busy_samples);
  printf("  %-44s %12.0f %14.0f %10llu\n", "64 threads waiting 8 deep", idle_pass, idle_cost,
         (unsigned long long)idle_samples);
  printf("  %-44s %9.1f us\n", "wakeup CPU per tick (timer, context switch)", (busy_wake + idle_wake) / 2);
  printf("  (sampling: time inside sampling passes; CPU: the collector thread's CPU time, wakeups included)\n");

  double worst = scope[0] > scope[1] ? scope[0] : scope[1];
  double ratio = mutex_ratio[0] < mutex_ratio[1] ? mutex_ratio[0] : mutex_ratio[1];
  double worst_vs_floor = vs_floor[0] > vs_floor[1] ? vs_floor[0] : vs_floor[1];
  double coll = busy_pass > idle_pass ? busy_pass : idle_pass;
  printf("\ntargets\n\n");
  (void)worst;
  printf("  %-44s %9.2fx  %s\n", "LP_SCOPE <= 1.5x the floor (one forward each)", worst_vs_floor,
         bench_verdict(worst_vs_floor <= 1.5));
  printf("  %-44s %9.1fx  %s\n", "mutex baseline / LP_SCOPE >= 8x", ratio, bench_verdict(ratio >= 8.0));
  printf("  %-44s %7.0f ns  %s\n", "collector sampling <= 300 ns per thread-sample", coll, bench_verdict(coll <= 300));
  return 0;
}
