/* bench.h: timing helpers shared by the benchmarks. */
#ifndef LP_BENCH_H
#define LP_BENCH_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define BENCH_RUNS 7
#define BENCH_BARRIER() __asm__ volatile("" ::: "memory")

static inline double bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The first line of a file, without its newline; "?" if it cannot be read. */
static inline const char *bench_read_line(const char *path, const char *prefix, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  snprintf(buf, len, "?");
  if (!f) return buf;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    if (prefix && strncmp(line, prefix, strlen(prefix)) != 0) continue;
    char *v = prefix ? strchr(line, ':') : NULL;
    v = v ? v + 1 : line;
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = '\0';
    size_t n = strlen(v) < len - 1 ? strlen(v) : len - 1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    break;
  }
  fclose(f);
  return buf;
}

/* What every table states: the CPU and the kernel's clocksource (the TSC's cost and soundness differ). */
static inline void bench_print_machine(void) {
  char cpu[128], cs[64];
  bench_read_line("/proc/cpuinfo", "model name", cpu, sizeof cpu);
  if (strcmp(cpu, "?") == 0) bench_read_line("/proc/cpuinfo", "CPU part", cpu, sizeof cpu); /* aarch64 */
  bench_read_line("/sys/devices/system/clocksource/clocksource0/current_clocksource", NULL, cs, sizeof cs);
  printf("CPU: %s; %ld CPUs online; kernel clocksource: %s\n", cpu, sysconf(_SC_NPROCESSORS_ONLN), cs);
}

/* Resident memory of this process, in bytes. */
static inline double bench_rss(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

/* Sleeps for seconds (a workload's length, not a wait for anything), whatever signals interrupt it. */
static inline void bench_sleep_s(double seconds) {
  struct timespec d = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (nanosleep(&d, &d) != 0) {
  }
}

/* How a figure stands against its target, for the tables. */
static inline const char *bench_verdict(int ok) { return ok ? "met" : "MISSED"; }

static inline int bench_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Runs loop(iters) on `threads` threads started together; returns ns per iteration, averaged over threads. */
typedef void (*bench_loop_fn)(long iters);

typedef struct bench_job {
  bench_loop_fn fn;
  long iters;
  int warm;
  pthread_barrier_t *start;
  double ns;
  double t0, t1; /* when its timed run began and ended */
} bench_job_t;

static void *bench_thread(void *arg) {
  bench_job_t *j = arg;
  if (j->warm) j->fn(j->iters / 100); /* warm: registration, caches */
  pthread_barrier_wait(j->start);
  j->t0 = bench_now_ns();
  j->fn(j->iters);
  j->t1 = bench_now_ns();
  j->ns = (j->t1 - j->t0) / (double)j->iters;
  return NULL;
}

/*
 * As bench_run_as, and *fastest is the round's figure for a minimum: on a
 * shared machine with as many threads as CPUs, a round where no thread was
 * disturbed is rare, and cost the threads cause each other (a shared line
 * written, a shared core) slows each of them while they run together. So it
 * is the fastest thread's ns per iteration when the threads' timed runs
 * overlapped for at least 90% of the shortest, and the slowest thread's
 * otherwise (a thread that ran alone for part of its run says nothing about
 * running together).
 */
static inline double bench_run_fastest(bench_loop_fn fn, long iters, int threads, int warm, double *fastest) {
  pthread_t th[8];
  bench_job_t jobs[8];
  pthread_barrier_t start;
  double sum = 0;
  if (threads < 1 || threads > 8 || pthread_barrier_init(&start, NULL, (unsigned)threads) != 0) {
    fprintf(stderr, "bench: pthread_barrier_init failed\n");
    exit(1);
  }
  for (int i = 0; i < threads; i++) {
    jobs[i] = (bench_job_t){fn, iters, warm, &start, 0, 0, 0};
    if (pthread_create(&th[i], NULL, bench_thread, &jobs[i]) != 0) {
      fprintf(stderr, "bench: pthread_create failed\n");
      exit(1);
    }
  }
  double lo = 1e300, hi = 0, last_start = 0, first_end = 1e300, shortest = 1e300;
  for (int i = 0; i < threads; i++) {
    if (pthread_join(th[i], NULL) != 0) {
      fprintf(stderr, "bench: pthread_join failed\n");
      exit(1);
    }
    sum += jobs[i].ns;
    if (jobs[i].ns < lo) lo = jobs[i].ns;
    if (jobs[i].ns > hi) hi = jobs[i].ns;
    if (jobs[i].t0 > last_start) last_start = jobs[i].t0;
    if (jobs[i].t1 < first_end) first_end = jobs[i].t1;
    if (jobs[i].t1 - jobs[i].t0 < shortest) shortest = jobs[i].t1 - jobs[i].t0;
  }
  pthread_barrier_destroy(&start);
  *fastest = first_end - last_start >= 0.9 * shortest ? lo : hi;
  return sum / threads;
}

static inline double bench_run_as(bench_loop_fn fn, long iters, int threads, int warm) {
  double fastest;
  return bench_run_fastest(fn, iters, threads, warm, &fastest);
}

static inline double bench_run(bench_loop_fn fn, long iters, int threads) { return bench_run_as(fn, iters, threads, 1); }

/* Without the warm-up: for what must start cold, such as a session's first events. */
static inline double bench_run_cold(bench_loop_fn fn, long iters, int threads) {
  return bench_run_as(fn, iters, threads, 0);
}

/*
 * A and B run alternately, BENCH_RUNS times each, so that both see the same
 * moments of a shared machine; *ratio is the median of the per-round A/B.
 */
static inline void bench_interleaved(bench_loop_fn a, bench_loop_fn b, long iters, int threads, double *med_a,
                                     double *med_b, double *ratio) {
  double va[BENCH_RUNS], vb[BENCH_RUNS], vr[BENCH_RUNS];
  for (int r = 0; r < BENCH_RUNS; r++) {
    va[r] = bench_run(a, iters, threads);
    vb[r] = bench_run(b, iters, threads);
    vr[r] = va[r] / vb[r];
  }
  *med_a = bench_median(va, BENCH_RUNS);
  *med_b = bench_median(vb, BENCH_RUNS);
  *ratio = bench_median(vr, BENCH_RUNS);
}

/* Median over BENCH_RUNS runs. */
static inline double bench_median_run(bench_loop_fn fn, long iters, int threads) {
  double v[BENCH_RUNS];
  for (int r = 0; r < BENCH_RUNS; r++) v[r] = bench_run(fn, iters, threads);
  return bench_median(v, BENCH_RUNS);
}

/* A program run by a benchmark (a command on a generated input): wall and CPU seconds, peak RSS, exit status. */
typedef struct bench_child {
  double seconds, cpu, rss_mb; /* wall, user + system */
  int status;                  /* the exit status, -1 when it did not exit */
} bench_child_t;

/* Runs argv (argv[0] looked for in PATH) with stdout and stderr to /dev/null, and waits for it. */
static inline bench_child_t bench_run_child(char *const argv[]) {
  bench_child_t r = {0, 0, 0, -1};
  fflush(stdout);
  double t0 = bench_now_ns();
  pid_t pid = fork();
  if (pid < 0) {
    perror("bench: fork");
    exit(1);
  }
  if (pid == 0) {
    FILE *n = freopen("/dev/null", "w", stdout);
    FILE *e = freopen("/dev/null", "w", stderr);
    (void)n;
    (void)e;
    execvp(argv[0], argv);
    _exit(127);
  }
  int st;
  struct rusage ru;
  if (wait4(pid, &st, 0, &ru) != pid) {
    perror("bench: wait4");
    exit(1);
  }
  r.seconds = (bench_now_ns() - t0) / 1e9;
  r.rss_mb = (double)ru.ru_maxrss / 1024.0;
  r.cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
          (double)ru.ru_stime.tv_usec / 1e6;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

#endif
