/*
 * env.c: profiling without touching main.
 *
 * When the library loads, a constructor reads the LABELPROF_* variables; if
 * they ask for a profile it starts the collector and registers an atexit
 * handler that stops it and writes the report. A bad value gets one message
 * on stderr naming the variable and the default used instead, and the
 * program runs on. In a child created by fork() nothing is reported: the
 * parent owns the session and its output files.
 *
 *   LABELPROF_PROFILE=1|path   the tree on stdout, or in a file ("%p" = pid)
 *   LABELPROF_FOLDED=path      folded stacks too
 *   LABELPROF_HZ=n             samples per second (1..100000, default 1000)
 *   LABELPROF_REPORT=threads,counts,min=P   report options
 *   LABELPROF_TRACE=path       record a timeline from load, write it at exit
 *   LABELPROF_LEVELS=request,runtime,operator,debug | standard | all
 *   LABELPROF_TRACE_BUFFER=MiB event memory (default 64)
 *   LABELPROF_TRACE_MODE=discard|ring
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *profile_path; /* "-" for stdout */
static char *folded_path;
static char *trace_path;
static lp_print_opts_t report_opts;

/* Copies a path, replacing %p with the pid and %% with %. NULL on ENOMEM. */
static char *expand(const char *v) {
  size_t cap = strlen(v) + 32, n = 0;
  char *out = malloc(cap);
  if (!out) return NULL;
  for (const char *c = v; *c; c++) {
    if (n + 24 >= cap) {
      char *o = realloc(out, cap *= 2);
      if (!o) {
        free(out);
        return NULL;
      }
      out = o;
    }
    if (c[0] == '%' && c[1] == 'p') {
      n += (size_t)snprintf(out + n, cap - n, "%ld", (long)getpid());
      c++;
    } else if (c[0] == '%' && c[1] == '%') {
      out[n++] = '%';
      c++;
    } else {
      out[n++] = *c;
    }
  }
  out[n] = '\0';
  return out;
}

static uint32_t env_hz(void) {
  const char *v = getenv("LABELPROF_HZ");
  if (!v || !*v) return 1000;
  char *end;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (errno || *end || end == v || n < 1 || n > 100000 || v[0] == '-') {
    fprintf(stderr, "labelprof: LABELPROF_HZ='%s' is not a whole number from 1 to 100000; using the default, 1000\n",
            v);
    return 1000;
  }
  return (uint32_t)n;
}

/* A percentage from 0 to 100, the whole string. */
static bool parse_percent(const char *v, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (errno || end == v || *end || !(d >= 0.0 && d <= 100.0)) return false;
  *out = d;
  return true;
}

static void env_report(void) {
  const char *v = getenv("LABELPROF_REPORT");
  if (!v || !*v) return;
  char *copy = strdup(v), *save = NULL, bad[256] = "";
  if (!copy) return;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (strcmp(tok, "threads") == 0) {
      report_opts.flags |= LP_PRINT_THREADS;
    } else if (strcmp(tok, "counts") == 0) {
      report_opts.flags |= LP_PRINT_COUNTS;
    } else if (!(strncmp(tok, "min=", 4) == 0 && parse_percent(tok + 4, &report_opts.min_percent))) {
      size_t used = strlen(bad);
      snprintf(bad + used, sizeof bad - used, "%s'%s'", used ? ", " : "", tok);
    }
  }
  if (bad[0])
    fprintf(stderr,
            "labelprof: LABELPROF_REPORT: %s not understood (expected threads, counts, min=PERCENT); "
            "ignoring it\n",
            bad);
  free(copy);
}

/* Prints with fn to path ("-" is stdout); reports failures on stderr. */
static void write_report(const char *path, const char *what, const lp_profile_t *p,
                         int (*fn)(const lp_profile_t *, FILE *, const lp_print_opts_t *)) {
  if (strcmp(path, "-") == 0) {
    int rc = fn(p, stdout, &report_opts);
    if (rc) fprintf(stderr, "labelprof: writing the %s to stdout failed: %s\n", what, lp_strerror(rc));
    return;
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "labelprof: cannot write the %s to '%s': %s\n", what, path, lp_strerror(-errno));
    return;
  }
  int rc = fn(p, f, &report_opts);
  if (fclose(f) != 0 && rc == 0) rc = -errno;
  if (rc) fprintf(stderr, "labelprof: writing the %s to '%s' failed: %s\n", what, path, lp_strerror(rc));
}

static int folded_fn(const lp_profile_t *p, FILE *f, const lp_print_opts_t *o) {
  (void)o;
  return lp_profile_write_folded(p, f);
}

static uint32_t env_levels(void) {
  const char *v = getenv("LABELPROF_LEVELS");
  if (!v || !*v) return LP_LEVEL_STANDARD;
  if (strcmp(v, "standard") == 0) return LP_LEVEL_STANDARD;
  if (strcmp(v, "all") == 0) return LP_LEVEL_ALL;
  static const struct {
    const char *name;
    uint32_t bit;
  } names[] = {{"request", LP_LEVEL_REQUEST}, {"runtime", LP_LEVEL_RUNTIME}, {"operator", LP_LEVEL_OPERATOR},
               {"debug", LP_LEVEL_DEBUG}};
  char *copy = strdup(v), *save = NULL;
  uint32_t levels = 0;
  bool bad = !copy;
  for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
    bool known = false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (strcmp(tok, names[i].name) == 0) {
        levels |= names[i].bit;
        known = true;
      }
    bad |= !known;
  }
  free(copy);
  if (bad || !levels) {
    fprintf(stderr,
            "labelprof: LABELPROF_LEVELS='%s' is not a list of request, runtime, operator, debug (or standard, "
            "all); using the default, standard (runtime,operator)\n",
            v);
    return LP_LEVEL_STANDARD;
  }
  return levels;
}

static uint64_t env_buffer(void) {
  const char *v = getenv("LABELPROF_TRACE_BUFFER");
  if (!v || !*v) return 64u << 20;
  char *end;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (errno || *end || end == v || v[0] == '-' || n < 1 || n > 1048576) {
    fprintf(stderr,
            "labelprof: LABELPROF_TRACE_BUFFER='%s' is not a whole number of MiB from 1 to 1048576; using the "
            "default, 64\n",
            v);
    return 64u << 20;
  }
  return (uint64_t)n << 20;
}

static lp_trace_policy_t env_mode(void) {
  const char *v = getenv("LABELPROF_TRACE_MODE");
  if (!v || !*v || strcmp(v, "discard") == 0) return LP_TRACE_DISCARD;
  if (strcmp(v, "ring") == 0) return LP_TRACE_RING;
  fprintf(stderr, "labelprof: LABELPROF_TRACE_MODE='%s' is neither discard nor ring; using the default, discard\n",
          v);
  return LP_TRACE_DISCARD;
}

static void trace_at_exit(void) {
  int rc = lp__trace_stop(LP__ENV);
  if (rc == -EINVAL) return;
  rc = lp__trace_write(LP__ENV, trace_path, NULL);
  if (rc) fprintf(stderr, "labelprof: cannot write the trace to '%s': %s\n", trace_path, lp_strerror(rc));
}

static void at_exit(void) {
  if (lp__forked_child()) return;
  if (trace_path) trace_at_exit();
  if (!profile_path && !folded_path) return;
  lp_profile_t *p = NULL;
  int rc = lp__profile_stop(LP__ENV, &p);
  if (rc == -EINVAL) return; /* the program stopped it itself */
  if (rc) {
    fprintf(stderr, "labelprof: could not finish the profile: %s\n", lp_strerror(rc));
    return;
  }
  if (profile_path) write_report(profile_path, "profile", p, lp_profile_print_ex);
  if (folded_path) write_report(folded_path, "folded stacks", p, folded_fn);
  lp_profile_free(p);
}

static void start_trace(void) {
  lp_trace_opts_t o = {.levels = env_levels(), .policy = env_mode(), .budget_bytes = env_buffer()};
  int rc = lp__trace_start(LP__ENV, &o);
  if (rc) {
    fprintf(stderr, "labelprof: cannot start the trace: %s\n", lp_strerror(rc));
    free(trace_path);
    trace_path = NULL;
  }
}

static void start_profile(void) {
  lp_profile_opts_t o = {.hz = env_hz()};
  env_report();
  int rc = lp__profile_start(LP__ENV, &o);
  if (rc) {
    fprintf(stderr, "labelprof: cannot start the profile: %s\n", lp_strerror(rc));
    free(profile_path);
    free(folded_path);
    profile_path = folded_path = NULL;
  }
}

void lp__env_load(void) {
  const char *prof = getenv("LABELPROF_PROFILE"), *fold = getenv("LABELPROF_FOLDED");
  const char *trace = getenv("LABELPROF_TRACE");
  bool want_prof = prof && *prof && strcmp(prof, "0") != 0;
  bool want_fold = fold && *fold;
  bool want_trace = trace && *trace;
  if (!want_prof && !want_fold && !want_trace) return;
  profile_path = want_prof ? (strcmp(prof, "1") == 0 ? strdup("-") : expand(prof)) : NULL;
  folded_path = want_fold ? expand(fold) : NULL;
  trace_path = want_trace ? expand(trace) : NULL;
  if ((want_prof && !profile_path) || (want_fold && !folded_path) || (want_trace && !trace_path)) {
    fprintf(stderr, "labelprof: out of memory reading the LABELPROF_* variables; not profiling\n");
    return;
  }
  if (want_trace) start_trace();
  if (want_prof || want_fold) start_profile();
  if ((trace_path || profile_path || folded_path) && atexit(at_exit) != 0)
    fprintf(stderr, "labelprof: atexit failed; nothing will be reported at exit\n");
}

void lp__env_atfork_prepare(void) {}
void lp__env_atfork_parent(void) {}
void lp__env_atfork_child(void) {}
