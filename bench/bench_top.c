/*
 * bench_top.c: what `labelprof top` costs, itself and the process it reads.
 *
 * 1. A pass of the reader (tools/read/attach.c), on this process's own threads,
 *    through process_vm_readv exactly as labelprof top reads another
 *    process: 1, 16 and 256 threads each waiting inside two labels (their
 *    words do not change: a pass reads the slots and the words), and one
 *    thread pushing and popping without pause (its word changes at every
 *    pass: the frames are read too). Microseconds per pass by the clock and
 *    in CPU time, and system calls per pass, median of 7 runs; and what the
 *    CPU time is, as a share of one CPU, at 1000 passes a second.
 * 2. The process's own work while labelprof top reads it: a forked child
 *    runs a labelled loop and counts its rounds; windows of 0.4 s
 *    alternate between nobody reading it, `labelprof top -b --hz 1000`
 *    reading it, and the same reading this process instead (the sampler's
 *    CPU on the machine, the child left alone), 15 of each; the median
 *    rounds per second, and per second of the child's own CPU time (what
 *    the reads cost it, apart from the CPU the sampler takes from a
 *    crowded machine).
 *
 * Run from the build directory (make bench does): it starts ./tools/labelprof.
 */
#include "bench.h"

#include <labelprof.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "attach.h"

#define PASSES 2000

extern char **environ;

/* ---- 1: the reader's pass ---- */

static pthread_barrier_t in_labels;
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int holding;
static atomic_int busy_stop;

static void *waiter(void *arg) {
  (void)arg;
  LP_SCOPE("serve");
  LP_SCOPE("wait");
  pthread_barrier_wait(&in_labels);
  pthread_mutex_lock(&hold_mu);
  while (holding) pthread_cond_wait(&hold_cv, &hold_mu);
  pthread_mutex_unlock(&hold_mu);
  return NULL;
}

static void *pusher(void *arg) {
  (void)arg;
  pthread_barrier_wait(&in_labels);
  while (!atomic_load_explicit(&busy_stop, memory_order_relaxed)) {
    LP_SCOPE("step");
    LP_SCOPE("kernel");
    BENCH_BARRIER();
  }
  return NULL;
}

typedef struct pass_cost {
  double us, cpu_us, calls;
  unsigned threads_read;
} pass_cost_t;

static double thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/*
 * Median µs per pass over 7 runs of PASSES passes of this process, by the
 * clock and by this thread's CPU time (the system calls' included: what a
 * pass costs, whatever else the machine runs), and system calls per pass.
 */
static int measure_passes(pass_cost_t *out) {
  lp_remote_t *r;
  char why[512];
  if (lp_remote_open(getpid(), "top", &r, why, sizeof why) != 0) {
    fprintf(stderr, "bench_top: %s\n", why);
    return -1;
  }
  double us[BENCH_RUNS], cpu[BENCH_RUNS];
  lp_remote_stats_t s0, s1;
  lp_remote_stats(r, &s0);
  for (int k = 0; k < BENCH_RUNS; k++) {
    double t0 = bench_now_ns(), c0 = thread_cpu_ns();
    for (int i = 0; i < PASSES; i++)
      if (lp_remote_sample(r, why, sizeof why) != 0) {
        fprintf(stderr, "bench_top: %s\n", why);
        lp_remote_close(r);
        return -1;
      }
    us[k] = (bench_now_ns() - t0) / 1e3 / PASSES;
    cpu[k] = (thread_cpu_ns() - c0) / 1e3 / PASSES;
  }
  lp_remote_stats(r, &s1);
  out->us = bench_median(us, BENCH_RUNS);
  out->cpu_us = bench_median(cpu, BENCH_RUNS);
  out->calls = (double)(s1.syscalls - s0.syscalls) / (BENCH_RUNS * PASSES);
  out->threads_read = 0;
  for (size_t i = 0; i < lp_remote_thread_count(r); i++) out->threads_read += lp_remote_thread(r, i)->read;
  lp_remote_close(r);
  return 0;
}

static int waiting_threads(int n, pass_cost_t *out) {
  pthread_t th[256];
  holding = 1;
  if (pthread_barrier_init(&in_labels, NULL, (unsigned)n + 1) != 0) return -1;
  for (int i = 0; i < n; i++)
    if (pthread_create(&th[i], NULL, waiter, NULL) != 0) return -1;
  pthread_barrier_wait(&in_labels);
  int rc = measure_passes(out);
  pthread_mutex_lock(&hold_mu);
  holding = 0;
  pthread_cond_broadcast(&hold_cv);
  pthread_mutex_unlock(&hold_mu);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&in_labels);
  return rc;
}

static int busy_thread(pass_cost_t *out) {
  pthread_t th;
  atomic_store(&busy_stop, 0);
  if (pthread_barrier_init(&in_labels, NULL, 2) != 0 || pthread_create(&th, NULL, pusher, NULL) != 0) return -1;
  pthread_barrier_wait(&in_labels);
  int rc = measure_passes(out);
  atomic_store(&busy_stop, 1);
  pthread_join(th, NULL);
  pthread_barrier_destroy(&in_labels);
  return rc;
}

/* ---- 2: the process's work while it is read ---- */

/* The child's loop: labelled rounds of a little arithmetic, counted in shared memory. */
static void child_loop(_Atomic uint64_t *rounds) {
  lp_thread_set_name("bench worker");
  volatile uint64_t x = 1;
  for (;;) {
    LP_SCOPE("round");
    for (int i = 0; i < 200; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
    atomic_fetch_add_explicit(rounds, 1, memory_order_relaxed);
  }
}

/* The child's CPU time in ns. */
static double child_cpu_ns(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/*
 * Rounds a second the child made over seconds, and (*per_cpu) rounds per
 * second of its own CPU time: with nobody reading it (read_it 0), with
 * labelprof top reading it (1), or reading this process instead (2: the
 * same sampler on the machine, the child left alone).
 */
static double window(pid_t child, clockid_t clock, _Atomic uint64_t *rounds, double seconds, int read_it,
                     double *per_cpu, int *failed) {
  pid_t top = 0;
  char pid_s[16], d_s[32];
  snprintf(pid_s, sizeof pid_s, "%d", (int)(read_it == 2 ? getpid() : child));
  snprintf(d_s, sizeof d_s, "%.3f", seconds + 0.2);
  if (read_it) {
    char *argv[] = {"./tools/labelprof", "top", "-b", "-n", "1", "-d", d_s, "--hz", "1000", pid_s, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&top, argv[0], &fa, NULL, argv, environ) != 0) {
      *failed = 1;
      return 0;
    }
    posix_spawn_file_actions_destroy(&fa);
    bench_sleep_s(0.1); /* its start (exec, the scan of the maps) is not the steady cost being measured */
  }
  uint64_t r0 = atomic_load(rounds);
  double t0 = bench_now_ns(), c0 = child_cpu_ns(clock);
  bench_sleep_s(seconds);
  uint64_t r1 = atomic_load(rounds);
  double t1 = bench_now_ns(), c1 = child_cpu_ns(clock);
  *per_cpu = c1 > c0 ? (double)(r1 - r0) / ((c1 - c0) / 1e9) : 0;
  if (read_it) {
    int status;
    if (waitpid(top, &status, 0) != top || !WIFEXITED(status) || WEXITSTATUS(status) != 0) *failed = 1;
  }
  return (double)(r1 - r0) / ((t1 - t0) / 1e9);
}

int main(void) {
  printf("labelprof %s: what labelprof top costs, itself and the process it reads\n", LABELPROF_VERSION_STRING);
  bench_print_machine();
  printf("clocks: CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID and the child's CPU clock; medians of %d runs\n\n", BENCH_RUNS);
  LP_SCOPE("bench main"); /* this thread is read too */

  printf("  a pass of the reader (process_vm_readv)      threads read   µs/pass   CPU µs/pass   calls/pass   CPU at 1000 Hz\n");
  static const int counts[] = {1, 16, 256};
  pass_cost_t c;
  double us_256 = 0;
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    if (waiting_threads(counts[i], &c) != 0) return 1;
    char what[64];
    snprintf(what, sizeof what, "%d threads waiting in labels", counts[i]);
    printf("  %-44s %12u %9.2f %13.2f %12.1f %15.1f%%\n", what, c.threads_read, c.us, c.cpu_us, c.calls, c.cpu_us / 10.0);
    if (counts[i] == 256) us_256 = c.cpu_us;
  }
  if (busy_thread(&c) != 0) return 1;
  printf("  %-44s %12u %9.2f %13.2f %12.1f %15.1f%%\n", "1 thread pushing and popping (frames read)", c.threads_read, c.us,
         c.cpu_us, c.calls, c.cpu_us / 10.0);

  _Atomic uint64_t *rounds = mmap(NULL, sizeof *rounds, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (rounds == MAP_FAILED) return 1;
  atomic_store(rounds, 0);
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    child_loop(rounds);
    _exit(0);
  }
  clockid_t clock;
  if (clock_getcpuclockid(child, &clock) != 0) return 1;
  enum { ROUNDS = 2 * BENCH_RUNS + 1 };
  double alone[ROUNDS], read[ROUNDS], beside[ROUNDS], alone_c[ROUNDS], read_c[ROUNDS], beside_c[ROUNDS], w;
  int failed = 0;
  window(child, clock, rounds, 0.3, 0, &w, &failed); /* warm up */
  for (int k = 0; k < ROUNDS && !failed; k++) {
    alone[k] = window(child, clock, rounds, 0.4, 0, &alone_c[k], &failed);
    read[k] = window(child, clock, rounds, 0.4, 1, &read_c[k], &failed);
    beside[k] = window(child, clock, rounds, 0.4, 2, &beside_c[k], &failed);
  }
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  if (failed) {
    fprintf(stderr, "bench_top: ./tools/labelprof top failed (run from the build directory)\n");
    return 1;
  }
  double a = bench_median(alone, ROUNDS), b = bench_median(read, ROUNDS), o = bench_median(beside, ROUNDS);
  double ac = bench_median(alone_c, ROUNDS), bc = bench_median(read_c, ROUNDS), oc = bench_median(beside_c, ROUNDS);
  double ratio = bc / ac;
  printf("\n  the process's labelled work (medians of %d interleaved windows of 0.4 s)      per second   per CPU second\n",
         ROUNDS);
  printf("    %-66s %10.0f %10.0f\n", "alone", a, ac);
  printf("    %-66s %10.0f %10.0f  %.3fx %.3fx\n", "labelprof top at 1000 Hz reading another process (its CPU only)",
         o, oc, o / a, oc / ac);
  printf("    %-66s %10.0f %10.0f  %.3fx %.3fx\n", "labelprof top at 1000 Hz reading this one", b, bc, b / a, ratio);

  printf("\ntargets\n\n");
  printf("  %-58s %7.3fx  %s\n", "the process's work per CPU second while read >= 0.97x alone", ratio,
         bench_verdict(ratio >= 0.97));
  printf("  %-58s %6.1f%%  %s\n", "labelprof top at 1000 Hz on 256 waiting threads < 10% of a CPU", us_256 / 10.0,
         bench_verdict(us_256 / 10.0 < 10.0));
  return 0;
}
