/*
 * layers_contract.c: the cases of NNAPI's "contract between code and
 * parser", as small programs instrumented with labelprof's layers and
 * phases, each writing its timeline as systrace text and as JSON.
 *
 *   layers_contract CASE OUT [UNIT_MS]
 *
 * writes OUT.systrace and OUT.json. The work is busy waits of known length,
 * in units of UNIT_MS milliseconds (default 10), so that a reader's
 * attribution can be checked within bands. CASE and what each unit of time
 * should be attributed to (the contract's right-hand column):
 *
 *   baseline   funcP: runtime preparation 2u
 *   localcall  funcA1 (application preparation, 1u of its own) calls funcR1
 *              (runtime preparation, 2u): application total 3u, self 1u;
 *              runtime 2u
 *   switch     funcC1: CPU transformation 1u, then switches to CPU
 *              computation 2u (inside runtime execution, 1u of its own)
 *   subphase   funcR2 (runtime execution, 1u of its own) calls funcC2 (CPU
 *              computation 2u): CPU computation 2u, CPU execution 2u,
 *              runtime execution 3u
 *   detail     funcR3 (runtime execution, 1u) calls funcR4 (runtime
 *              execution, 2u): runtime execution 3u, funcR4 is detail
 *   ipc        two processes: the application's thread T1 runs funcRC, an
 *              IPC compilation scope "prepareModel" (1u of its own) that
 *              waits for a driver process, whose thread T2 runs
 *              SampleDriver::prepareModel (driver compilation, 2u) inside the
 *              HIDL server mark that tells AOSP's parser it is a driver; the two
 *              processes' systrace files are merged by time into OUT.systrace
 *              (OUT.json is the application's): IPC compilation 3u or more
 *              (it spans the driver's work), driver compilation 2u
 *   subtract   "prepareModel" (IPC compilation, 3u in all) holding a
 *              subtracted runtime compilation scope of 1u: IPC compilation
 *              2u, runtime compilation 1u
 *   init       funcR5 (runtime preparation, 3u in all) calls funcI (runtime
 *              initialization, 1u): runtime initialization 1u, runtime
 *              preparation 2u
 *   utility    funcR6 (runtime preparation, 1u of its own) calls funcU
 *              (utility, unspecified phase, 1u): runtime preparation 2u
 *
 * Exit status 0 when every call succeeded.
 */
#include <labelprof.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double unit_s = 0.010;
static int failures;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A busy wait of n units (the CPU stays busy, as real work would). */
static void work(double n) {
  double end = now_s() + n * unit_s;
  while (now_s() < end) {
  }
}

static void check(const char *what, int rc) {
  if (rc == 0) return;
  fprintf(stderr, "layers_contract: %s: %s\n", what, lp_strerror(rc));
  failures++;
}

/* ---- the cases: each function as the contract's left column has it ---- */

static void funcP(void) {
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_PREPARATION, "funcP");
  work(2);
}

static void funcR1(void) {
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_PREPARATION, "funcR1");
  work(2);
}

static void funcA1(void) {
  LP_SCOPE_PHASE(LP_LAYER_APPLICATION, LP_PHASE_PREPARATION, "funcA1");
  work(1);
  funcR1();
}

static void funcC1(void) {
  LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_TRANSFORMATION, "funcC1");
  work(1);
  LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "funcC1");
  work(2);
}

static void run_switch(void) {
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "funcR");
  work(1);
  funcC1();
}

static void funcC2(void) {
  LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "funcC2");
  work(2);
}

static void funcR2(void) {
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "funcR2");
  work(1);
  funcC2();
}

static void funcR4(void) {
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "funcR4");
  work(2);
}

static void funcR3(void) {
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "funcR3");
  work(1);
  funcR4();
}

static void versioned_prepare_model(void) {
  {
    LP_SCOPE_SUBTRACT(LP_LAYER_RUNTIME, LP_PHASE_COMPILATION, "VersionedIDevice::prepareModel");
    work(1); /* runtime work */
  }
  work(1); /* IPC work */
}

static void run_subtract(void) {
  LP_SCOPE_PHASE(LP_LAYER_IPC, LP_PHASE_COMPILATION, "prepareModel");
  work(1);
  versioned_prepare_model();
}

static void funcI(void) {
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_INITIALIZATION, "funcI");
  work(1);
}

static void funcR5(void) {
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_PREPARATION, "funcR5");
  work(1);
  funcI();
  work(1);
}

static void funcU(void) {
  LP_SCOPE_PHASE(LP_LAYER_UTILITY, LP_PHASE_UNSPECIFIED, "funcU");
  work(1);
}

static void funcR6(void) {
  LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_PREPARATION, "funcR6");
  work(1);
  funcU();
}

/* ---- IPC: an application process and a driver process ---- */

static void sample_driver_prepare_model(void) {
  LP_SCOPE_PHASE(LP_LAYER_DRIVER, LP_PHASE_COMPILATION, "SampleDriver::prepareModel");
  work(2);
}

static int write_both(const char *out, const char *suffix) {
  char p[4096];
  snprintf(p, sizeof p, "%s%s.systrace", out, suffix);
  check("lp_trace_write_systrace", lp_trace_write_systrace(p));
  snprintf(p, sizeof p, "%s%s.json", out, suffix);
  check("lp_trace_write_json", lp_trace_write_json(p, NULL));
  return failures;
}

/* The lines of a systrace file after its header, appended to *lines. */
static int read_events(const char *path, char ***lines, size_t *n, size_t *cap, char **header) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char buf[4096];
  size_t hlen = 0;
  while (fgets(buf, sizeof buf, f)) {
    if (buf[0] == '#') {
      if (header && !*lines) { /* the first file's header is kept */
        size_t l = strlen(buf);
        char *h = realloc(*header, hlen + l + 1);
        if (!h) break;
        memcpy(h + hlen, buf, l + 1);
        hlen += l;
        *header = h;
      }
      continue;
    }
    if (*n == *cap) {
      *cap = *cap ? *cap * 2 : 64;
      char **nl = realloc(*lines, *cap * sizeof *nl);
      if (!nl) break;
      *lines = nl;
    }
    (*lines)[(*n)++] = strdup(buf);
  }
  fclose(f);
  return 0;
}

/* The timestamp of a line: the number before ": tracing_mark_write". */
static double line_time(const char *l) {
  const char *c = strstr(l, ": tracing_mark_write");
  if (!c) return 0;
  const char *s = c;
  while (s > l && s[-1] != ' ') s--;
  return strtod(s, NULL);
}

static int by_time(const void *a, const void *b) {
  double x = line_time(*(char *const *)a), y = line_time(*(char *const *)b);
  return x < y ? -1 : x > y;
}

/* Merges the two processes' files by time into OUT.systrace (a stable merge keeps each thread's order). */
static void merge(const char *out) {
  char a[4096], b[4096], p[4096];
  snprintf(a, sizeof a, "%s.app.systrace", out);
  snprintf(b, sizeof b, "%s.driver.systrace", out);
  char **lines = NULL, *header = NULL;
  size_t n = 0, cap = 0;
  if (read_events(a, &lines, &n, &cap, &header) != 0 || read_events(b, &lines, &n, &cap, NULL) != 0) {
    failures++;
    return;
  }
  /* insertion sort: stable, and the files are small */
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && by_time(&lines[j - 1], &lines[j]) > 0; j--) {
      char *t = lines[j];
      lines[j] = lines[j - 1];
      lines[j - 1] = t;
    }
  snprintf(p, sizeof p, "%s.systrace", out);
  FILE *f = fopen(p, "w");
  if (!f) {
    failures++;
    return;
  }
  if (header) fputs(header, f);
  for (size_t i = 0; i < n; i++) {
    fputs(lines[i], f);
    free(lines[i]);
  }
  if (fclose(f) != 0) failures++;
  free(lines);
  free(header);
  snprintf(a, sizeof a, "%s.app.json", out);
  snprintf(p, sizeof p, "%s.json", out);
  if (rename(a, p) != 0) failures++;
}

static void run_ipc(const char *out) {
  int to_driver[2], to_app[2];
  char c = 0;
  if (pipe(to_driver) != 0 || pipe(to_app) != 0) {
    failures++;
    return;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    failures++;
    return;
  }
  if (pid == 0) { /* the driver process: its own session, its own file */
    check("lp_thread_set_name", lp_thread_set_name("HwBinder:driver"));
    lp_trace_opts_t o = {.clock = LP_CLOCK_MONOTONIC};
    check("lp_trace_start (driver)", lp_trace_start(&o));
    if (read(to_driver[0], &c, 1) != 1) _exit(1);
    {
      /* What HIDL's generated stub writes: it marks this process as a driver for AOSP's parser. */
      LP_SCOPE("HIDL::IDevice::prepareModel_1_1::server");
      sample_driver_prepare_model();
    }
    check("lp_trace_stop (driver)", lp_trace_stop());
    write_both(out, ".driver");
    if (write(to_app[1], &c, 1) != 1) _exit(1);
    _exit(failures ? 1 : 0);
  }
  {
    LP_SCOPE_PHASE(LP_LAYER_IPC, LP_PHASE_COMPILATION, "prepareModel");
    work(1);
    /* device->prepareModel(...); cb->wait(): the driver works meanwhile */
    {
      LP_SCOPE("HIDL::IDevice::prepareModel_1_1::client");
      work(0.1);
    }
    /* The transaction is sent once the client mark has ended, so that the merged file's order is fixed. */
    if (write(to_driver[1], &c, 1) != 1 || read(to_app[0], &c, 1) != 1) failures++;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failures++;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: layers_contract CASE OUT [UNIT_MS]\n");
    return 2;
  }
  const char *which = argv[1], *out = argv[2];
  if (argc > 3) unit_s = atof(argv[3]) / 1000.0;
  check("lp_thread_set_name", lp_thread_set_name("nn application"));
  lp_trace_opts_t o = {.clock = LP_CLOCK_MONOTONIC};
  check("lp_trace_start", lp_trace_start(&o));
  if (strcmp(which, "baseline") == 0)
    funcP();
  else if (strcmp(which, "localcall") == 0)
    funcA1();
  else if (strcmp(which, "switch") == 0)
    run_switch();
  else if (strcmp(which, "subphase") == 0)
    funcR2();
  else if (strcmp(which, "detail") == 0)
    funcR3();
  else if (strcmp(which, "ipc") == 0)
    run_ipc(out);
  else if (strcmp(which, "subtract") == 0)
    run_subtract();
  else if (strcmp(which, "init") == 0)
    funcR5();
  else if (strcmp(which, "utility") == 0)
    funcR6();
  else {
    fprintf(stderr, "layers_contract: unknown case '%s'\n", which);
    return 2;
  }
  check("lp_trace_stop", lp_trace_stop());
  if (strcmp(which, "ipc") == 0) {
    write_both(out, ".app");
    merge(out);
  } else {
    write_both(out, "");
  }
  return failures ? 1 : 0;
}
