/*
 * env_child.c: a program that uses labels, run by test_env.c (and, linked
 * with the static library, by test_static.c) under LABELPROF_* variables.
 *
 *   env_child DURATION [MODE [ARG]]
 *
 * DURATION: 10 ms of labelled work per character ("xxx" = 30 ms), inside
 * "env request" (request level) > "env work" > "env inner".
 * MODE, what it does besides:
 *   plain    nothing else (the default)
 *   own      then runs a profile and a timeline of its own, as a program that
 *            knows nothing of the environment would: prints its own profile
 *            and writes its own trace to ARG
 *   chdir    changes to / before it exits
 *   dump     calls lp_dump(), then raises SIGUSR2 and waits (bounded) until
 *            the file ARG exists, then works again
 *   atexit   uses labels in an atexit handler of its own, in a destructor,
 *            and on a thread that keeps using them while the process exits
 *   many     records many short scopes, so that the trace is large
 *   dumps    calls lp_dump() ARG times
 *   dumpcopy records 1000 "env dumped" scopes, calls lp_dump(), copies the
 *            file LABELPROF_TRACE names to ARG as it is then (the program
 *            still running), then records 1000 "env after" scopes
 *   scopes   then records exactly ARG more "env inner" scopes, however slow
 *            the build (a budget that must fill)
 *   starve   then, on CPU 0 with every thread of the process, spins for
 *            ARG ms in "env starving" as a SCHED_FIFO thread, so that the
 *            collector cannot run meanwhile (root, or RLIMIT_RTPRIO; exit
 *            status 3 where it may not)
 *   layers   then labels with layers and phases, on a thread named
 *            "layered worker thread": a runtime preparation scope holding a
 *            CPU transformation that switches to computation, and a
 *            subtracted runtime compilation scope
 * The exit status is 0 when every call it makes returns what it should.
 */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include <labelprof.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile unsigned long sink;
static int failures;
static const char *mode = "plain";

static void spin(double seconds, int inner_iterations) {
  double t0 = now_s();
  while (now_s() - t0 < seconds) {
    LP_SCOPE("env inner");
    for (int i = 0; i < inner_iterations; i++) sink += (unsigned long)i;
  }
}

/*
 * How many times the collector thread (named "labelprof") has gone to sleep
 * so far (its voluntary context switches), or -1 if there is none. Between
 * two of its sleeps lies one wakeup, and a wakeup on a deadline is one
 * sampling pass.
 */
static long collector_sleeps(void) {
  DIR *d = opendir("/proc/self/task");
  long n = -1;
  if (!d) return -1;
  for (struct dirent *e; n < 0 && (e = readdir(d)) != NULL;) {
    char path[300], line[128] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    int ours = fgets(line, sizeof line, f) && strcmp(line, "labelprof\n") == 0;
    fclose(f);
    if (!ours) continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    if (!(f = fopen(path, "r"))) continue;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1) break;
    fclose(f);
  }
  closedir(d);
  return n;
}

/*
 * Labelled work for at least the given time, and on until the collector, if
 * one runs, has made passes while it went on: however starved the collector
 * was, the work is in the profile. Three sleeps after the first reading hold
 * two whole wakeups; at most one of them was stop's or an early one.
 */
static void spin_sampled(double seconds, int inner_iterations) {
  long first = collector_sleeps();
  spin(seconds, inner_iterations);
  if (first < 0) return;
  for (long now = collector_sleeps(); now >= 0 && now < first + 3; now = collector_sleeps())
    spin(0.001, inner_iterations);
}

static void check(const char *what, int rc) {
  if (rc == 0) return;
  fprintf(stderr, "env_child: %s returned %d\n", what, rc);
  failures++;
}

static void own_sessions(const char *trace_path) {
  lp_profile_t *p = NULL;
  check("lp_profile_start", lp_profile_start(NULL));
  {
    LP_SCOPE("own work");
    double t0 = now_s();
    while (now_s() - t0 < 0.05) sink++;
    /* and on until the collector has made 20 passes in it, however starved */
    long first = collector_sleeps();
    for (long now = first; first >= 0 && now >= 0 && now < first + 21; now = collector_sleeps())
      for (t0 = now_s(); now_s() - t0 < 0.001;) sink++;
  }
  check("lp_profile_stop", lp_profile_stop(&p));
  if (p) {
    printf("own profile:\n");
    check("lp_profile_print", lp_profile_print(p, stdout));
    lp_profile_free(p);
  }
  check("lp_trace_start", lp_trace_start(NULL));
  {
    LP_SCOPE("own traced");
    spin(0.01, 1000);
  }
  check("lp_trace_stop", lp_trace_stop());
  check("lp_trace_write_json", lp_trace_write_json(trace_path, "own"));
}

static void wait_for_file(const char *path) {
  struct stat st;
  double t0 = now_s();
  while (stat(path, &st) != 0) {
    if (now_s() - t0 > 10.0) {
      fprintf(stderr, "env_child: %s never appeared\n", path);
      failures++;
      return;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL); /* polling a state that another thread brings about */
  }
}

static void at_program_exit(void) {
  LP_SCOPE("program atexit"); /* before labelprof's handler: recorded */
  spin(0.005, 1000);
}

/* Before labelprof's exit handler with the shared library, after it with the static one. */
__attribute__((destructor)) static void late(void) {
  if (strcmp(mode, "atexit") != 0) return;
  LP_SCOPE("destructor");
  spin(0.002, 1000);
}

/*
 * Labels on a thread that runs on through exit(), after labelprof's handler
 * has written its reports. Of a level not recorded by default: spinning, it
 * would otherwise spend a discard budget before the atexit handler records.
 */
static void *still_running(void *arg) {
  volatile unsigned long mine = 0;
  (void)arg;
  for (;;) {
    LP_SCOPE_L(LP_LEVEL_DEBUG, "still running");
    mine++;
  }
  return NULL;
}

static void *layered(void *unused) {
  (void)unused;
  check("lp_thread_set_name", lp_thread_set_name("layered worker thread"));
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_PREPARATION, "prepare");
  {
    LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_TRANSFORMATION, "convert");
    spin(0.002, 1000);
    LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "convert");
    spin(0.002, 1000);
  }
  {
    LP_SCOPE_SUBTRACT(LP_LAYER_RUNTIME, LP_PHASE_COMPILATION, "compile");
  }
  return NULL;
}

/* Every thread of the process onto CPU 0, this one SCHED_FIFO spinning for ms: the collector gets no tick. */
static int starve(long ms) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  DIR *d = opendir("/proc/self/task");
  if (!d) return 1;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && sched_setaffinity((pid_t)atoi(e->d_name), sizeof one, &one) != 0) failures++;
  closedir(d);
  struct sched_param fifo = {.sched_priority = 1}, other = {.sched_priority = 0};
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo) != 0) return 3;
  {
    LP_SCOPE("env starving");
    double t0 = now_s();
    while (now_s() - t0 < (double)ms / 1000.0) sink++;
  }
  if (pthread_setschedparam(pthread_self(), SCHED_OTHER, &other) != 0) failures++;
  return 0;
}

/* The file from as it is now, copied to to: 0, or -1. */
static int copy_file(const char *from, const char *to) {
  char buf[1 << 14];
  size_t n;
  int rc = 0;
  FILE *in = from ? fopen(from, "rb") : NULL, *out = fopen(to, "wb");
  if (!in || !out) rc = -1;
  while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) rc = -1;
  if (in && ferror(in)) rc = -1;
  if (in) fclose(in);
  if (out && fclose(out) != 0) rc = -1;
  return rc;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? (double)strlen(argv[1]) * 0.01 : 0.1;
  const char *arg = argc > 3 ? argv[3] : NULL;
  if (argc > 2) mode = argv[2];
  if (strcmp(mode, "atexit") == 0) {
    pthread_t th;
    if (atexit(at_program_exit) != 0 || pthread_create(&th, NULL, still_running, NULL) != 0) failures++;
  }
  {
    LP_SCOPE_L(LP_LEVEL_REQUEST, "env request");
    LP_SCOPE("env work");
    spin_sampled(seconds, strcmp(mode, "many") == 0 ? 10 : 1000);
  }
  if (strcmp(mode, "own") == 0 && arg) own_sessions(arg);
  if (strcmp(mode, "dump") == 0 && arg) {
    check("lp_dump", lp_dump());
    if (raise(SIGUSR2) != 0) failures++;
    wait_for_file(arg);
    LP_SCOPE("env work");
    spin(seconds, 1000);
  }
  if (strcmp(mode, "dumpcopy") == 0 && arg) {
    for (int i = 0; i < 1000; i++) {
      LP_SCOPE("env dumped");
      sink += (unsigned long)i;
    }
    check("lp_dump", lp_dump());
    check("copying the trace", copy_file(getenv("LABELPROF_TRACE"), arg));
    for (int i = 0; i < 1000; i++) {
      LP_SCOPE("env after");
      sink += (unsigned long)i;
    }
  }
  if (strcmp(mode, "dumps") == 0 && arg)
    for (long i = atol(arg); i > 0; i--) check("lp_dump", lp_dump());
  if (strcmp(mode, "scopes") == 0 && arg) {
    long n = strtol(arg, NULL, 10);
    LP_SCOPE("env work");
    for (long i = 0; i < n; i++) {
      LP_SCOPE("env inner");
      sink += (unsigned long)i;
    }
  }
  if (strcmp(mode, "starve") == 0 && arg) {
    int rc = starve(atol(arg));
    if (rc) return rc;
  }
  if (strcmp(mode, "chdir") == 0 && chdir("/") != 0) failures++;
  if (strcmp(mode, "layers") == 0) {
    pthread_t th;
    if (pthread_create(&th, NULL, layered, NULL) != 0 || pthread_join(th, NULL) != 0) failures++;
  }
  printf("child done\n");
  return failures ? 1 : 0;
}
