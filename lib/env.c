/*
 * env.c: profiling without touching main.
 *
 * When the library loads, the constructor (lifecycle.c) calls lp__env_load,
 * which reads every LABELPROF_* variable, warns about bad values and unknown
 * names, and starts what they ask for as the environment's own sessions.
 * They nest with the program's: a program that starts and stops its own
 * profile or timeline gets exactly its own window, and the environment's
 * reports still cover the whole run.
 *
 * Reports are written at exit by an atexit handler, in this order: stop the
 * environment's profile (so that writing the trace is not sampled), stop and
 * write the timeline, then write the profile's reports. A signal named by
 * LABELPROF_DUMP_SIGNAL, or lp_dump(), writes the profile and the timeline so
 * far without stopping either: the handler only posts a semaphore, and a
 * thread of ours does the writing, off the signal's context.
 *
 * Paths are made absolute when the library loads, so that a program that
 * changes directory still writes where the user asked; %p is the process id,
 * %n the report's sequence number (dumps and the exit report count 1, 2...).
 * Reports asked for with LABELPROF_PROFILE=1 go to stderr, so that they
 * never mix with the program's own output; "-" asks for stdout.
 *
 *   LABELPROF_PROFILE=1|-|path  LABELPROF_FOLDED=path      LABELPROF_HZ=n
 *   LABELPROF_REPORT=threads,counts,flat,cpu,min=P        LABELPROF_TRACE=path
 *   LABELPROF_LEVELS=list       LABELPROF_TRACE_BUFFER=MiB LABELPROF_TRACE_MODE=discard|ring|stream
 *   LABELPROF_CLOCK=auto|tsc|monotonic                     LABELPROF_DUMP_SIGNAL=USR2
 *   LABELPROF_SYSTRACE=path     LABELPROF_TRACE_MARKER=1|path
 *   LABELPROF_COLLECTOR_SCHED=slice|default|fifo[:PRIO]
 *   LABELPROF_TRACE_FORMAT=json|perfetto|systrace (else .pftrace, .perfetto-trace: Perfetto)
 *   LABELPROF_CPU=0|1           (CPU samples; on with LABELPROF_REPORT=cpu)
 *   LABELPROF_CPU_SIGNAL=RTMAX-4 (the CPU timers' signal: RTMIN+N, RTMAX-N, PROF, VTALRM, ALRM, USR1, USR2)
 *   LABELPROF_PROFILE_EVERY=60s (one profile per period: rotate_locked)
 *
 * LABELPROF_PROFILE=path.pb.gz (or .pprof) writes pprof's format instead of
 * the printed tree.
 *
 * LABELPROF_SYSTRACE writes the environment's timeline as systrace text, at
 * exit and at dumps, beside or instead of LABELPROF_TRACE's JSON: one
 * recording serves both. LABELPROF_TRACE_MARKER writes every recorded begin
 * and end, as it happens, to the kernel's trace_marker (1) or to a file; it
 * starts the environment's timeline if no other variable does, in ring mode
 * unless LABELPROF_TRACE_MODE says otherwise, so that it never stops.
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static pthread_mutex_t env_mu = PTHREAD_MUTEX_INITIALIZER; /* everything below, and one report at a time */
static char *profile_path; /* absolute, %p expanded, %n kept; /dev/stderr for LABELPROF_PROFILE=1 */
static char *folded_path;
static char *trace_path;
static char *systrace_path; /* layers and phases: LABELPROF_SYSTRACE */
static lp__format_t trace_format; /* Perfetto: LABELPROF_TRACE's format */
static lp_print_opts_t report_opts;
static bool profiling, tracing;
static unsigned seq; /* reports written so far */
static bool at_exit_done;

static int dump_signal;
static sem_t dump_sem;
static pthread_t dump_thread;

/* ---- the variables ------------------------------------------------------------ */

static const char *const known[] = {
    "LABELPROF_PROFILE",      "LABELPROF_FOLDED",     "LABELPROF_HZ",    "LABELPROF_REPORT",
    "LABELPROF_TRACE",        "LABELPROF_LEVELS",     "LABELPROF_TRACE_BUFFER",
    "LABELPROF_TRACE_MODE",   "LABELPROF_CLOCK",      "LABELPROF_DUMP_SIGNAL",
    "LABELPROF_SYSTRACE",     "LABELPROF_TRACE_MARKER",
    "LABELPROF_COLLECTOR_SCHED",
    "LABELPROF_TRACE_FORMAT", /* Perfetto */
    "LABELPROF_CPU",          "LABELPROF_CPU_SIGNAL",
    "LABELPROF_PROFILE_EVERY",
    "LABELPROF_TRACE_ROTATE", "LABELPROF_TRACE_FLUSH", /* the Perfetto stream */
    "LABELPROF_ALLOW_ATTACH", /* labelprof top PID where Yama's ptrace_scope is 1 */
    /* Read by subs.c, and by the callstats.so subscriber installed with the library. */
    "LABELPROF_SUBSCRIBERS",  "LABELPROF_CALLSTATS",  "LABELPROF_CALLSTATS_THREADS",
    /* Read by names.c, and by the NVTX and ITT libraries installed with the library. */
    "LABELPROF_MAX_NAMES",    "LABELPROF_NVTX_DOMAINS", "LABELPROF_ITT_DOMAINS",
};
#define NKNOWN (sizeof known / sizeof known[0])

/* Edit distance between a and b (short names: a small table on the stack). */
static size_t distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return 64;
  size_t row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

/* One warning per LABELPROF_* name nobody reads: a misspelt variable should not be silently ignored. */
static void warn_unknown(void) {
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "LABELPROF_", 10) != 0) continue;
    const char *eq = strchr(*e, '=');
    size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
    char name[64];
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, *e, len);
    name[len] = '\0';
    size_t best = SIZE_MAX, which = 0;
    bool ok = false;
    for (size_t i = 0; i < NKNOWN; i++) {
      if (strcmp(name, known[i]) == 0) ok = true;
      size_t d = distance(name, known[i]);
      if (d < best) best = d, which = i;
    }
    if (ok) continue;
    if (best <= 3)
      lp__warn("%s is not a labelprof variable; did you mean %s?", name, known[which]);
    else
      lp__warn("%s is not a labelprof variable; ignoring it", name);
  }
}

static const char *value_of(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* The next item of a comma-separated list, spaces around it trimmed; NULL at the end. */
static char *next_item(char **cursor) {
  char *s = *cursor;
  if (!s) return NULL;
  char *comma = strchr(s, ',');
  *cursor = comma ? comma + 1 : NULL;
  if (comma) *comma = '\0';
  while (isspace((unsigned char)*s)) s++;
  char *end = s + strlen(s);
  while (end > s && isspace((unsigned char)end[-1])) *--end = '\0';
  return s;
}

/*
 * Digits only, at most hi: the value in *out and the first byte after them in
 * *end. False when there is no digit or the number passes hi (checked before
 * each digit is added, so no value overflows).
 */
static bool digits(const char *s, unsigned long hi, unsigned long *out, const char **end) {
  unsigned long n = 0;
  const char *c = s;
  for (; *c >= '0' && *c <= '9'; c++) {
    unsigned d = (unsigned)(*c - '0');
    if (d > hi || n > (hi - d) / 10) return false;
    n = n * 10 + d;
  }
  *out = n;
  *end = c;
  return c != s;
}

/* A whole number in [lo, hi] and nothing else (spaces around it and a leading + allowed). */
static bool parse_whole(const char *v, unsigned long lo, unsigned long hi, unsigned long *out) {
  while (isspace((unsigned char)*v)) v++;
  if (*v == '+') v++;
  unsigned long n;
  const char *end;
  if (!digits(v, hi, &n, &end)) return false;
  while (isspace((unsigned char)*end)) end++;
  if (*end || n < lo) return false;
  *out = n;
  return true;
}

/* name's value v as a whole number in [lo, hi]; else a warning and def. */
static unsigned long number(const char *name, const char *v, unsigned long lo, unsigned long hi, unsigned long def,
                            const char *unit) {
  unsigned long n;
  if (!v) return def;
  if (!parse_whole(v, lo, hi, &n)) {
    lp__warn("%s='%s' is not a whole number%s from %lu to %lu; using the default, %lu", name, v, unit, lo, hi, def);
    return def;
  }
  return n;
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

/* LABELPROF_REPORT into *opts; 0, or -ENOMEM (nothing said). */
static int parse_report(const char *v, lp_print_opts_t *opts) {
  if (!v) return 0;
  char *copy = lp__strdup(v), *cur = copy, *item;
  if (!copy) return -ENOMEM;
  while ((item = next_item(&cur)) != NULL) {
    if (!*item) continue;
    if (strcmp(item, "threads") == 0)
      opts->flags |= LP_PRINT_THREADS;
    else if (strcmp(item, "counts") == 0)
      opts->flags |= LP_PRINT_COUNTS;
    else if (strcmp(item, "flat") == 0)
      opts->flags |= LP_PRINT_FLAT;
    else if (strcmp(item, "cpu") == 0)
      opts->flags |= LP_PRINT_CPU;
    else if (!(strncmp(item, "min=", 4) == 0 && parse_percent(item + 4, &opts->min_percent)))
      lp__warn("LABELPROF_REPORT: '%s' not understood (expected threads, counts, flat, cpu, min=PERCENT from 0 to 100); "
           "ignoring it",
           item);
  }
  free(copy);
  return 0;
}

static uint32_t parse_levels(const char *v) {
  /* Unset: standard, and the NVTX and ITT libraries' ranges (no LP_SCOPE has their level). */
  if (!v) return LP_LEVEL_STANDARD | LP_LEVEL_ANNOTATIONS;
  static const struct {
    const char *name;
    uint32_t bits;
  } names[] = {{"request", LP_LEVEL_REQUEST}, {"runtime", LP_LEVEL_RUNTIME},   {"operator", LP_LEVEL_OPERATOR},
               {"debug", LP_LEVEL_DEBUG},     {"standard", LP_LEVEL_STANDARD}, {"all", LP_LEVEL_ALL},
               {"annotations", LP_LEVEL_ANNOTATIONS}};
  char *copy = lp__strdup(v), *cur = copy, *item;
  uint32_t levels = 0;
  bool bad = !copy;
  while (copy && (item = next_item(&cur)) != NULL) {
    bool found = false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (strcmp(item, names[i].name) == 0) {
        levels |= names[i].bits;
        found = true;
      }
    bad |= !found;
  }
  free(copy);
  if (bad || !levels) {
    lp__warn("LABELPROF_LEVELS='%s' is not a list of request, runtime, operator, debug, annotations, standard, all; using "
         "standard (runtime,operator)",
         v);
    return LP_LEVEL_STANDARD;
  }
  return levels;
}

static lp_trace_policy_t parse_mode(const char *v) {
  if (!v || strcmp(v, "discard") == 0) return LP_TRACE_DISCARD;
  if (strcmp(v, "ring") == 0) return LP_TRACE_RING;
  if (strcmp(v, "stream") == 0) return LP_TRACE_STREAM;
  lp__warn("LABELPROF_TRACE_MODE='%s' is none of discard, ring, stream; using the default, discard", v);
  return LP_TRACE_DISCARD;
}

/*
 * Perfetto: LABELPROF_TRACE's format. LABELPROF_TRACE_FORMAT=json|perfetto|
 * systrace says it; else the name does: .pftrace and .perfetto-trace are
 * Perfetto, anything else JSON.
 */
static lp__format_t parse_format(const char *path) {
  const char *v = value_of("LABELPROF_TRACE_FORMAT");
  if (v && strcmp(v, "json") == 0) return LP__FORMAT_JSON;
  if (v && strcmp(v, "perfetto") == 0) return LP__FORMAT_PERFETTO;
  if (v && strcmp(v, "systrace") == 0) return LP__FORMAT_SYSTRACE;
  if (v) lp__warn("LABELPROF_TRACE_FORMAT='%s' is none of json, perfetto, systrace; the name of the file decides", v);
  size_t n = path ? strlen(path) : 0;
  static const char *const ext[] = {".pftrace", ".perfetto-trace"};
  for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
    if (n > strlen(ext[i]) && strcmp(path + n - strlen(ext[i]), ext[i]) == 0) return LP__FORMAT_PERFETTO;
  return LP__FORMAT_JSON;
}

static lp_clock_t parse_clock(const char *v) {
  if (!v || strcmp(v, "auto") == 0) return LP_CLOCK_AUTO;
  if (strcmp(v, "tsc") == 0) return LP_CLOCK_TSC;
  if (strcmp(v, "monotonic") == 0) return LP_CLOCK_MONOTONIC;
  lp__warn("LABELPROF_CLOCK='%s' is not auto, tsc or monotonic; using the default, auto", v);
  return LP_CLOCK_AUTO;
}

/* LABELPROF_COLLECTOR_SCHED=slice|default|fifo[:PRIO] into *o; a bad value warns and keeps the default, slice. */
static void parse_sched(const char *v, lp_profile_opts_t *o) {
  o->sched = LP_SCHED_SLICE;
  o->sched_priority = 0;
  if (!v || strcmp(v, "slice") == 0) return;
  if (strcmp(v, "default") == 0) {
    o->sched = LP_SCHED_DEFAULT;
    return;
  }
  if (strncmp(v, "fifo", 4) == 0) {
    if (v[4] == '\0') {
      o->sched = LP_SCHED_FIFO;
      return;
    }
    unsigned long prio;
    const char *end;
    if (v[4] == ':' && v[5] >= '1' && v[5] <= '9' && digits(v + 5, 99, &prio, &end) && !*end) {
      o->sched = LP_SCHED_FIFO;
      o->sched_priority = (uint32_t)prio;
      return;
    }
  }
  lp__warn("LABELPROF_COLLECTOR_SCHED='%s' is not slice, default, fifo or fifo:PRIO (1 to 99); using the default, "
       "slice",
       v);
}

typedef struct signame {
  const char *name;
  int sig;
} signame_t;

/* The signals a dump may be asked on, besides RTMIN to RTMAX. */
static const signame_t usable[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT}, {"TSTP", SIGTSTP},
    {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU}, {"URG", SIGURG},   {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"PWR", SIGPWR},   {"PROF", SIGPROF}, {"VTALRM", SIGVTALRM}};

/*
 * Named, and refused: faults (a handler that returns makes the fault repeat
 * for ever), signals no handler can catch, and those whose default action a
 * program relies on or that the library takes itself (it blocks PIPE and
 * XFSZ while it writes a report, and takes back one its writes raised).
 */
static const signame_t refused[] = {
    {"SEGV", SIGSEGV}, {"BUS", SIGBUS},   {"FPE", SIGFPE},   {"ILL", SIGILL},   {"ABRT", SIGABRT},
    {"IOT", SIGABRT},  {"TRAP", SIGTRAP}, {"SYS", SIGSYS},   {"KILL", SIGKILL}, {"STOP", SIGSTOP},
    {"PIPE", SIGPIPE}, {"XFSZ", SIGXFSZ}, {"XCPU", SIGXCPU},
#ifdef SIGSTKFLT
    {"STKFLT", SIGSTKFLT},
#endif
};

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

static const char *name_of(const signame_t *t, size_t n, int sig) {
  for (size_t i = 0; i < n; i++)
    if (t[i].sig == sig) return t[i].name;
  return NULL;
}

/*
 * The signal variable var names (USR2, SIGUSR2, RTMIN+3, RTMAX-1, or a
 * number): its number, or 0 with a warning that says why it cannot be one
 * and what happens then (`instead`, e.g. "no dumps").
 */
static int signal_number(const char *var, const char *v, const char *instead) {
  const char *s = strncmp(v, "SIG", 3) == 0 ? v + 3 : v, *end;
  unsigned long n;
  int sig = 0;
  const char *refused_name = NULL;
  if (*s >= '0' && *s <= '9') {
    if (digits(s, INT_MAX, &n, &end) && !*end && n >= 1) {
      sig = (int)n;
      refused_name = name_of(refused, NELEMS(refused), sig);
      if (!refused_name && !name_of(usable, NELEMS(usable), sig) && (sig < SIGRTMIN || sig > SIGRTMAX)) {
        lp__warn("%s='%s' is not a signal a program may take here (the real-time ones are %d to %d); %s", var, v,
             SIGRTMIN, SIGRTMAX, instead);
        return 0;
      }
    }
  } else if (strncmp(s, "RTMIN", 5) == 0 || strncmp(s, "RTMAX", 5) == 0) {
    /* Offsets within RTMIN to RTMAX only: checked as the digits are read, never past them. */
    unsigned long span = (unsigned long)(SIGRTMAX - SIGRTMIN), off = 0;
    bool ok = !s[5] || ((s[5] == '+') == (s[3] == 'I') && (s[5] == '+' || s[5] == '-') &&
                        digits(s + 6, span, &off, &end) && !*end);
    if (!ok) {
      lp__warn("%s='%s' is not a real-time signal: RTMIN+N or RTMAX-N with N from 0 to %lu; %s", var, v, span, instead);
      return 0;
    }
    return s[3] == 'I' ? SIGRTMIN + (int)off : SIGRTMAX - (int)off;
  } else {
    for (size_t i = 0; i < NELEMS(usable); i++)
      if (strcmp(s, usable[i].name) == 0) return usable[i].sig;
    for (size_t i = 0; i < NELEMS(refused); i++)
      if (strcmp(s, refused[i].name) == 0) sig = refused[i].sig, refused_name = refused[i].name;
  }
  if (refused_name) {
    lp__warn("%s='%s' is SIG%s, which cannot be taken here (faults, KILL, STOP, PIPE, XFSZ, XCPU are refused; USR1, "
         "USR2 or RTMIN+N are the usual choices); %s",
         var, v, refused_name, instead);
    return 0;
  }
  if (!sig)
    lp__warn("%s='%s' is not a signal name (such as USR2 or RTMIN+1) or number; %s", var, v, instead);
  return sig;
}

/* LABELPROF_CPU_SIGNAL: a signal the CPU timers may send (lp__cpu_signal_ok), or 0 (the default) with a warning. */
static int cpu_signal_number(const char *v) {
  static const char instead[] = "the CPU samples use the default, RTMAX-4";
  int sig = signal_number("LABELPROF_CPU_SIGNAL", v, instead);
  if (sig && !lp__cpu_signal_ok(sig)) { /* one of `usable` (the others are refused above) */
    const char *name = name_of(usable, NELEMS(usable), sig);
    lp__warn("LABELPROF_CPU_SIGNAL='%s' is SIG%s, which the program needs as it is (the CPU samples take PROF, "
         "VTALRM, ALRM, USR1, USR2 or a real-time signal); %s",
         v, name ? name : "?", instead);
    sig = 0;
  }
  return sig;
}

/*
 * A path as it will be written: %p becomes the pid and %% a %, %n is kept
 * for the report's number, and a relative path is made absolute against the
 * working directory now (a % in its name kept as %%, so that the directory
 * is taken as it is). NULL on ENOMEM.
 */
static char *resolve(const char *v) {
  char cwd[4096] = "", pid[24];
  bool relative = v[0] != '/';
  if (relative && !getcwd(cwd, sizeof cwd)) {
    lp__warn("cannot read the working directory (%s); '%s' stays relative", lp_strerror(-errno), v);
    relative = false;
  }
  size_t npid = lp__decimal(pid, (unsigned long long)getpid());
  /* The exact size first: the directory, a slash, each byte of v as it comes out, the NUL. */
  size_t need = 1;
  if (relative) {
    for (const char *c = cwd; *c; c++) need = lp__size_add(need, *c == '%' ? 2 : 1);
    need = lp__size_add(need, 1);
  }
  for (const char *c = v; *c; c++) {
    if (c[0] == '%' && c[1] == 'p')
      need = lp__size_add(need, npid), c++;
    else if (c[0] == '%' && c[1] == '%')
      need = lp__size_add(need, 2), c++;
    else
      need = lp__size_add(need, 1);
  }
  if (need == SIZE_MAX) return NULL;
  char *out = lp__malloc(need), *o = out;
  if (!out) return NULL;
  if (relative) {
    for (const char *c = cwd; *c; c++) {
      if (*c == '%') *o++ = '%';
      *o++ = *c;
    }
    *o++ = '/';
  }
  for (const char *c = v; *c; c++) {
    if (c[0] == '%' && c[1] == 'p') {
      memcpy(o, pid, npid);
      o += npid;
      c++;
    } else if (c[0] == '%' && c[1] == '%') {
      *o++ = '%'; /* kept escaped for the %n pass */
      *o++ = '%';
      c++;
    } else {
      *o++ = *c;
    }
  }
  *o = '\0';
  return out;
}

/* ---- reports ---------------------------------------------------------------------- */

/* A report by CPU of a profile without CPU time (LABELPROF_CPU=0, or its signal was the program's): by wall time. */
static bool cpu_unmeasured(const lp_profile_t *p, const lp_print_opts_t *o) {
  return (o->flags & LP_PRINT_CPU) && !lp_profile_has_cpu(p);
}

static int profile_fn(const lp_profile_t *p, FILE *f, const lp_print_opts_t *o) {
  if (!cpu_unmeasured(p, o)) return lp_profile_print_ex(p, f, o);
  lp_print_opts_t wall = *o;
  wall.flags &= ~LP_PRINT_CPU;
  int rc = lp_profile_print_ex(p, f, &wall);
  if (rc == 0 && fprintf(f, "note: by wall time: CPU time was not measured (LABELPROF_CPU=0, or the program "
                            "handles its signal)\n") < 0)
    rc = -EIO;
  return rc;
}

static int folded_fn(const lp_profile_t *p, FILE *f, const lp_print_opts_t *o) {
  if (!cpu_unmeasured(p, o)) return lp_profile_write_folded_ex(p, f, o); /* LABELPROF_REPORT=cpu: CPU microseconds */
  lp__warn("the folded stacks are sample counts, not CPU microseconds: CPU time was not measured (LABELPROF_CPU=0, or "
       "the program handles its signal)");
  return lp_profile_write_folded(p, f);
}

/* Writes one report through the output layer; a failure is one stderr line naming the file and why. */
static void write_report(const char *path, const char *what, const lp_profile_t *p,
                         int (*fn)(const lp_profile_t *, FILE *, const lp_print_opts_t *)) {
  lp__output_t out;
  int rc = lp__output_open(&out, path);
  if (rc == 0) {
    FILE *f = lp__output_stream(&out);
    rc = f ? fn(p, f, &report_opts) : -ENOMEM;
    rc = lp__output_close(&out, rc);
  }
  if (rc) lp__warn("cannot write the %s to '%s': %s", what, path, lp_strerror(rc));
}

/* pprof's format for LABELPROF_PROFILE=*.pb.gz and *.pprof. */
static bool wants_pprof(const char *path) {
  size_t n = strlen(path);
  return (n >= 6 && strcmp(path + n - 6, ".pb.gz") == 0) || (n >= 6 && strcmp(path + n - 6, ".pprof") == 0);
}

static int pprof_fn(const lp_profile_t *p, FILE *f, const lp_print_opts_t *o) {
  (void)o;
  return lp__profile_write_pprof_stream(p, f);
}

static void write_profile(const lp_profile_t *p, unsigned number) {
  char *pp = profile_path ? lp__path_numbered(profile_path, number) : NULL;
  char *fp = folded_path ? lp__path_numbered(folded_path, number) : NULL;
  if (pp && wants_pprof(profile_path))
    write_report(pp, "pprof profile", p, pprof_fn);
  else if (pp)
    write_report(pp, "profile", p, profile_fn);
  if (fp) write_report(fp, "folded stacks", p, folded_fn);
  if ((profile_path && !pp) || (folded_path && !fp)) lp__warn("out of memory naming a report");
  double got;
  uint32_t want;
  if (lp__profile_rate_low(p, &got, &want))
    lp__warn("the collector achieved only %.0f of the %u samples per second asked for (%.0f%%); see the report's "
         "header",
         got, want, 100.0 * got / want);
  free(pp);
  free(fp);
}

static void write_trace(unsigned number) {
  if (trace_path) {
    char *tp = lp__path_numbered(trace_path, number);
    if (!tp) {
      lp__warn("out of memory naming the trace");
    } else {
      int rc = lp__trace_write_as(LP__ENV, tp, NULL, trace_format);
      if (rc) lp__warn("cannot write the trace to '%s': %s", tp, lp_strerror(rc));
      free(tp);
    }
  }
  if (systrace_path) {
    char *sp = lp__path_numbered(systrace_path, number);
    if (!sp) {
      lp__warn("out of memory naming the systrace file");
    } else {
      int rc = lp__trace_write_systrace(LP__ENV, sp);
      if (rc) lp__warn("cannot write the systrace file to '%s': %s", sp, lp_strerror(rc));
      free(sp);
    }
  }
}

/* n with thousands separators, into buf. */
static const char *grouped(uint64_t n, char *buf, size_t size) {
  char digits[24];
  int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
  size_t k = 0;
  for (int i = 0; i < len && k + 2 < size; i++) {
    if (i && (len - i) % 3 == 0) buf[k++] = ',';
    buf[k++] = digits[i];
  }
  buf[k] = '\0';
  return buf;
}

/* A size for people: "312 bytes", "4.0 KiB", "18.2 MiB", "1.25 GiB". */
static const char *bytes_text(uint64_t n, char *buf, size_t size) {
  if (n < 1024)
    snprintf(buf, size, "%llu bytes", (unsigned long long)n);
  else if (n < (1u << 20))
    snprintf(buf, size, "%.1f KiB", (double)n / 1024);
  else if (n < (1u << 30))
    snprintf(buf, size, "%.1f MiB", (double)n / (1 << 20));
  else
    snprintf(buf, size, "%.2f GiB", (double)n / (1 << 30));
  return buf;
}

/* A duration for people: "5.0 us", "4.5 ms", "19.70 s". */
static const char *seconds(uint64_t ns, char *buf, size_t size) {
  if (ns < 1000000u)
    snprintf(buf, size, "%.1f us", (double)ns / 1e3);
  else if (ns < 1000000000u)
    snprintf(buf, size, "%.1f ms", (double)ns / 1e6);
  else
    snprintf(buf, size, "%.2f s", (double)ns / 1e9);
  return buf;
}

/*
 * At exit, a trace that dropped events says so: how many, when, the budget,
 * and what to change, naming the file just written. A stream says in one
 * line what its files hold, whether it dropped or not.
 */
static void note_drops(unsigned number) {
  lp__drops_t d;
  if (lp__trace_drops(LP__ENV, &d) != 0 || (!d.dropped && !d.stream)) return;
  /* A stream's files are numbered by its rotations, not by the dumps: named from the first to the last. */
  char *path = lp__path_numbered(trace_path ? trace_path : systrace_path, d.stream ? 1 : number);
  if (!path) return;
  if (d.stream && d.stream_files > 1) {
    char *last = lp__path_numbered(trace_path, d.stream_files);
    size_t len = strlen(path) + (last ? strlen(last) : 0) + 8;
    char *both = last ? lp__malloc(len) : NULL;
    if (both) snprintf(both, len, "%s' to '%s", path, last);
    free(last);
    if (!both) {
      free(path);
      return;
    }
    free(path);
    path = both;
  }
  char n[32], budget[48];
  char at[32], len[32];
  seconds(d.first_drop_ns > d.start_ns ? d.first_drop_ns - d.start_ns : 0, at, sizeof at);
  seconds(d.stop_ns > d.start_ns ? d.stop_ns - d.start_ns : 0, len, sizeof len);
  if (d.budget_bytes % (1u << 20) == 0)
    snprintf(budget, sizeof budget, "%llu MiB", (unsigned long long)(d.budget_bytes >> 20));
  else
    snprintf(budget, sizeof budget, "%llu bytes", (unsigned long long)d.budget_bytes);
  if (d.stream) {
    /* A stream always says what it wrote: its files are what is left of the run. */
    char events[32], size[32], wrote[160];
    snprintf(wrote, sizeof wrote, "holds %s events of %u thread%s (%s in %u file%s)",
             grouped(d.stream_events, events, sizeof events), d.stream_threads, d.stream_threads == 1 ? "" : "s",
             bytes_text(d.stream_bytes, size, sizeof size), d.stream_files, d.stream_files == 1 ? "" : "s");
    if (!d.dropped)
      lp__warn("the stream '%s' %s; it dropped none", path, wrote);
    else
      lp__warn("the stream '%s' %s; it dropped %s events while its writer fell behind: its %s budget "
           "(LABELPROF_TRACE_BUFFER) was full, the first time %s into the %s session, so the file has gaps there. To "
           "keep them: a larger LABELPROF_TRACE_BUFFER (MiB), a faster disk or reader for the file, or fewer levels "
           "with LABELPROF_LEVELS",
           path, wrote, grouped(d.dropped, n, sizeof n), budget, at, len);
  }
  else if (d.ring)
    lp__warn("the trace '%s' lost %s events: its %s budget (LABELPROF_TRACE_BUFFER) filled %s into the %s "
         "session, and the ring overwrote the oldest events from then on, so the file holds only the last part of "
         "the session. To keep more: a larger LABELPROF_TRACE_BUFFER (MiB), or fewer levels with LABELPROF_LEVELS",
         path, grouped(d.dropped, n, sizeof n), budget, at, len);
  else
    lp__warn("the trace '%s' dropped %s events: its %s budget (LABELPROF_TRACE_BUFFER) filled %s into the %s "
         "session, so the file covers only its first %s. To keep more: a larger LABELPROF_TRACE_BUFFER (MiB), "
         "LABELPROF_TRACE_MODE=ring to keep the last events instead of the first, or fewer levels with "
         "LABELPROF_LEVELS",
         path, grouped(d.dropped, n, sizeof n), budget, at, len, at);
  free(path);
}

/* The profile and the timeline so far, without stopping either. env_mu held. */
static int dump_locked(void) {
  if (!profiling && !tracing) return -EINVAL;
  unsigned number = ++seq;
  int rc = 0;
  if (tracing) write_trace(number);
  if (profiling) {
    lp_profile_t *p = NULL;
    rc = lp__profile_peek(LP__ENV, &p);
    if (rc == 0) write_profile(p, number);
    lp_profile_free(p);
  }
  return rc;
}

/* ---- LABELPROF_PROFILE_EVERY: one profile per period ------------------------- */

static lp_profile_opts_t env_popts; /* how the environment's profile was started */
static uint64_t every_ns;
static pthread_t every_thread;

/* Ends the environment's profile, writes it, and starts the next at once. env_mu held. */
static void rotate_locked(void) {
  lp_profile_t *p = NULL;
  int rc = lp__profile_stop(LP__ENV, &p);
  if (rc) {
    lp__warn("could not finish the profile: %s", lp_strerror(rc));
    return;
  }
  rc = lp__profile_start(LP__ENV, &env_popts);
  if (rc) {
    lp__warn("cannot start the next profile: %s; no more periodic profiles", lp_strerror(rc));
    profiling = false;
  }
  write_profile(p, ++seq);
  lp_profile_free(p);
}

static void *every_main(void *arg) {
  (void)arg;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (;;) {
    uint64_t ns = (uint64_t)next.tv_nsec + every_ns;
    next.tv_sec += (time_t)(ns / 1000000000u);
    next.tv_nsec = (long)(ns % 1000000000u);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
    }
    lp__lock(&env_mu);
    bool go = !at_exit_done && profiling;
    if (go) rotate_locked();
    lp__unlock(&env_mu);
    if (!go) return NULL;
  }
}

static void start_every(void) {
  int rc = lp__thread_spawn(&every_thread, every_main, NULL, "labelprof-every");
  if (rc != 0) {
    lp__warn("LABELPROF_PROFILE_EVERY: cannot start its thread (%s); one profile at exit", lp_strerror(rc));
    return;
  }
  pthread_detach(every_thread);
}

/* "60s", "500ms", "5m", or seconds alone: 10 ms to a day. 0 if unset or not understood (with a warning). */
static uint64_t parse_every(void) {
  const char *v = value_of("LABELPROF_PROFILE_EVERY");
  if (!v) return 0;
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  double unit = 1e9;
  if (strcmp(end, "ms") == 0)
    unit = 1e6;
  else if (strcmp(end, "m") == 0)
    unit = 60e9;
  else if (*end && strcmp(end, "s") != 0)
    unit = 0;
  double ns = d * unit;
  if (errno || end == v || !(ns >= 1e7 && ns <= 86400e9)) {
    lp__warn("LABELPROF_PROFILE_EVERY='%s' is not a period from 10ms to 24h (such as 60s, 500ms, 5m); one profile at exit",
         v);
    return 0;
  }
  return (uint64_t)ns;
}

/*
 * The Perfetto stream: LABELPROF_TRACE_FLUSH=250ms (ms, s, m, h; a number alone
 * is seconds) is how soon what a stream records reaches its file, from 1 ms
 * to 1 hour; 1 s by default.
 */
static uint64_t parse_flush(const char *v) {
  char *end;
  errno = 0;
  double d = strtod(v, &end), unit = 0;
  if (strcmp(end, "ms") == 0)
    unit = 1e6;
  else if (!*end || strcmp(end, "s") == 0)
    unit = 1e9;
  else if (strcmp(end, "m") == 0)
    unit = 60e9;
  else if (strcmp(end, "h") == 0)
    unit = 3600e9;
  double ns = d * unit;
  if (errno || end == v || !(ns >= 1e6 && ns <= 3600e9)) {
    lp__warn("LABELPROF_TRACE_FLUSH='%s' is not a time from 1ms to 1h (such as 1s, 250ms, 2m); a stream is flushed each "
         "second",
         v);
    return 1000000000u;
  }
  return (uint64_t)ns;
}

/*
 * The Perfetto stream: LABELPROF_TRACE_ROTATE=64M (a size: K, M, G, binary)
 * or =10m (a time: s, m, h) starts a new file of the stream at that point.
 */
static void parse_rotate(lp_trace_opts_t *t) {
  const char *v = value_of("LABELPROF_TRACE_ROTATE");
  if (!v) return;
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  double bytes = 0, ns = 0;
  if (strcmp(end, "K") == 0 || strcmp(end, "KiB") == 0) bytes = d * 1024;
  else if (strcmp(end, "M") == 0 || strcmp(end, "MiB") == 0) bytes = d * 1048576;
  else if (strcmp(end, "G") == 0 || strcmp(end, "GiB") == 0) bytes = d * 1073741824.0;
  else if (strcmp(end, "s") == 0) ns = d * 1e9;
  else if (strcmp(end, "m") == 0) ns = d * 60e9;
  else if (strcmp(end, "h") == 0) ns = d * 3600e9;
  if (errno || end == v || !((bytes >= 4096 && bytes <= 1e15) || (ns >= 1e9 && ns <= 365 * 86400e9))) {
    lp__warn("LABELPROF_TRACE_ROTATE='%s' is neither a size from 4K (such as 64M, 1G) nor a time from 1s (such as 30s, "
         "10m, 24h); the stream is not rotated",
         v);
    return;
  }
  t->rotate_bytes = (uint64_t)bytes;
  t->rotate_ns = (uint64_t)ns;
}

int lp_dump(void) {
  lp__lock(&env_mu);
  int rc = at_exit_done ? -EINVAL : dump_locked();
  lp__unlock(&env_mu);
  return rc;
}

static void *dump_main(void *arg) {
  (void)arg;
  for (;;) {
    if (sem_wait(&dump_sem) != 0) continue; /* EINTR */
    lp_dump();
  }
  return NULL;
}

/* Async-signal-safe: the handler only wakes the dump thread. */
static void on_dump_signal(int sig) {
  (void)sig;
  int saved = errno;
  sem_post(&dump_sem);
  errno = saved;
}

static void start_dumps(int sig) {
  if (sem_init(&dump_sem, 0, 0) != 0) {
    lp__warn("LABELPROF_DUMP_SIGNAL: cannot create a semaphore (%s); no dumps", lp_strerror(-errno));
    return;
  }
  int rc = lp__thread_spawn(&dump_thread, dump_main, NULL, "labelprof-dump");
  if (rc != 0) {
    lp__warn("LABELPROF_DUMP_SIGNAL: cannot start the dump thread (%s); no dumps", lp_strerror(rc));
    return;
  }
  pthread_detach(dump_thread);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_dump_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, NULL) != 0) {
    lp__warn("LABELPROF_DUMP_SIGNAL: cannot install the handler (%s); no dumps", lp_strerror(-errno));
    return;
  }
  dump_signal = sig;
}

/*
 * At exit: the collector stops first, so that writing the trace is not
 * sampled as time outside of any label; then the timeline is stopped and
 * written; then the profile's reports. Labels used after this (later atexit
 * handlers, destructors) still work; they are simply not recorded.
 */
static void at_exit(void) {
  if (lp__forked_child()) return; /* the parent owns the sessions and their files */
  lp__lock(&env_mu);
  at_exit_done = true;
  if (dump_signal) signal(dump_signal, SIG_IGN);
  fflush(NULL); /* the program's buffered output comes before a report sent to the same place */
  unsigned number = ++seq;
  lp_profile_t *p = NULL;
  if (profiling) {
    int rc = lp__profile_stop(LP__ENV, &p);
    if (rc) lp__warn("could not finish the profile: %s", lp_strerror(rc));
  }
  if (tracing) {
    lp__trace_stop(LP__ENV);
    write_trace(number);
    if (trace_path || systrace_path) note_drops(number);
  }
  if (p) write_profile(p, number);
  lp_profile_free(p);
  profiling = tracing = false;
  lp__unlock(&env_mu);
}

/* ---- load -------------------------------------------------------------------------- */

void lp__env_defaults(lp__env_values_t *v) {
  memset(v, 0, sizeof *v);
  v->profile.hz = 1000;
  v->profile.sched = LP_SCHED_SLICE;
  v->trace.levels = LP_LEVEL_STANDARD;
  v->trace.policy = LP_TRACE_DISCARD;
  v->trace.budget_bytes = (uint64_t)64 << 20;
  v->trace.clock = LP_CLOCK_AUTO;
  v->trace_flush_ns = 1000000000u;
}

int lp__env_parse(lp__env_values_t *v, const char *name, const char *value) {
  if (value && !*value) value = NULL; /* set but empty: as if unset */
  if (strcmp(name, "LABELPROF_HZ") == 0)
    v->profile.hz = (uint32_t)number(name, value, 1, 100000, 1000, "");
  else if (strcmp(name, "LABELPROF_COLLECTOR_SCHED") == 0)
    parse_sched(value, &v->profile);
  else if (strcmp(name, "LABELPROF_REPORT") == 0)
    return parse_report(value, &v->report);
  else if (strcmp(name, "LABELPROF_LEVELS") == 0)
    v->trace.levels = parse_levels(value);
  else if (strcmp(name, "LABELPROF_TRACE_MODE") == 0)
    v->trace.policy = parse_mode(value);
  else if (strcmp(name, "LABELPROF_TRACE_BUFFER") == 0)
    v->trace.budget_bytes = (uint64_t)number(name, value, 1, 1048576, 64, " of MiB") << 20;
  else if (strcmp(name, "LABELPROF_CLOCK") == 0)
    v->trace.clock = parse_clock(value);
  else if (strcmp(name, "LABELPROF_DUMP_SIGNAL") == 0)
    v->dump_signal = value ? signal_number(name, value, "no dumps") : 0;
  else if (strcmp(name, "LABELPROF_CPU_SIGNAL") == 0)
    v->profile.cpu_signal = value ? cpu_signal_number(value) : 0;
  else if (strcmp(name, "LABELPROF_TRACE_FLUSH") == 0)
    v->trace_flush_ns = value ? parse_flush(value) : 1000000000u;
  else
    return -ENOENT;
  return 0;
}

char *lp__env_resolve(const char *value) { return resolve(value); }


void lp__env_load(void) {
  warn_unknown();
  /* Every value is checked, whether or not an output variable is set. */
  const char *prof = value_of("LABELPROF_PROFILE"), *fold = value_of("LABELPROF_FOLDED");
  const char *trace = value_of("LABELPROF_TRACE"), *sig = value_of("LABELPROF_DUMP_SIGNAL");
  const char *systrace = value_of("LABELPROF_SYSTRACE"), *marker = value_of("LABELPROF_TRACE_MARKER");
  static const char *const parsed[] = {"LABELPROF_HZ",           "LABELPROF_COLLECTOR_SCHED", "LABELPROF_REPORT",
                                       "LABELPROF_LEVELS",       "LABELPROF_TRACE_MODE",      "LABELPROF_TRACE_BUFFER",
                                       "LABELPROF_CLOCK",        "LABELPROF_DUMP_SIGNAL",     "LABELPROF_CPU_SIGNAL",
                                       "LABELPROF_TRACE_FLUSH"};
  lp__env_values_t vals;
  lp__env_defaults(&vals);
  for (size_t i = 0; i < sizeof parsed / sizeof parsed[0]; i++)
    if (lp__env_parse(&vals, parsed[i], value_of(parsed[i])) == -ENOMEM)
      lp__warn("out of memory reading %s; using its default", parsed[i]);
  lp_profile_opts_t popts = vals.profile;
  report_opts = vals.report;
  lp_trace_opts_t topts = vals.trace;
  /* CPU samples: LABELPROF_CPU=1, or a report by CPU that needs them. */
  if (number("LABELPROF_CPU", value_of("LABELPROF_CPU"), 0, 1, (report_opts.flags & LP_PRINT_CPU) ? 1 : 0, ""))
    popts.flags |= LP_PROFILE_CPU;
  env_popts = popts;
  every_ns = parse_every();
  lp__clock_set_env(topts.clock);
  lp__stream_set_flush(vals.trace_flush_ns); /* every stream of the process, the program's too */
  trace_format = parse_format(trace);
  int dsig = sig ? vals.dump_signal : 0;
  int csig = popts.cpu_signal ? popts.cpu_signal : lp__cpu_default_signal();
  if (dsig && dsig == csig && (popts.flags & LP_PROFILE_CPU)) {
    /* One handler per signal: dumps on every CPU sample, or CPU samples stopped by the dump's handler. */
    char name[24];
    lp__warn("LABELPROF_DUMP_SIGNAL is %s, the CPU samples' signal; no dumps (choose another signal for one of them, "
         "LABELPROF_CPU_SIGNAL for the CPU samples)",
         lp__signal_name(dsig, name, sizeof name));
    dsig = 0;
  }
  bool want_prof = prof && strcmp(prof, "0") != 0;
  if (number("LABELPROF_ALLOW_ATTACH", value_of("LABELPROF_ALLOW_ATTACH"), 0, 1, 0, "")) {
    int rc = lp__attach_allow();
    if (rc && rc != -EINVAL) lp__warn("LABELPROF_ALLOW_ATTACH: prctl(PR_SET_PTRACER) failed (%s)", lp_strerror(rc));
  }
  /* ---- layers and phases: the live trace_marker, opened before anything records ---- */
  bool want_marker = false;
  if (marker && strcmp(marker, "0") != 0) {
    char why[512];
    int rc = lp__marker_open(marker, why, sizeof why);
    if (rc)
      lp__warn("LABELPROF_TRACE_MARKER: cannot open %s (%s); labels are not written to it",
           strcmp(marker, "1") == 0 ? "the kernel's trace_marker" : "the file", why);
    else
      want_marker = true;
    if (want_marker && !trace && !systrace && !value_of("LABELPROF_TRACE_MODE")) topts.policy = LP_TRACE_RING;
  }
  /* ---- end of layers and phases ---- */
  if (!want_prof && !fold && !trace && !systrace && !want_marker) {
    if (dsig) lp__warn("LABELPROF_DUMP_SIGNAL is set, but no report is: nothing to dump");
    return;
  }
  lp__lock(&env_mu);
  if (want_prof) profile_path = strcmp(prof, "1") == 0 ? lp__strdup("/dev/stderr") : strcmp(prof, "-") == 0 ? lp__strdup("/dev/stdout") : resolve(prof);
  if (fold) folded_path = resolve(fold);
  if (trace) trace_path = resolve(trace);
  if (systrace) systrace_path = resolve(systrace);
  if ((want_prof && !profile_path) || (fold && !folded_path) || (trace && !trace_path) ||
      (systrace && !systrace_path)) {
    lp__warn("out of memory reading the LABELPROF_* variables; not profiling");
    lp__unlock(&env_mu);
    return;
  }
  /* ---- the Perfetto stream: LABELPROF_TRACE_MODE=stream writes LABELPROF_TRACE as the program runs ---- */
  if (topts.policy == LP_TRACE_STREAM) {
    parse_rotate(&topts);
    if (!trace_path || trace_format != LP__FORMAT_PERFETTO) {
      lp__warn("LABELPROF_TRACE_MODE=stream writes a Perfetto file only (LABELPROF_TRACE=x.pftrace, or "
           "LABELPROF_TRACE_FORMAT=perfetto); %s",
           trace_path ? "this trace is written at exit instead, in discard mode"
                      : "LABELPROF_TRACE is not set, so nothing is streamed (a trace is written at exit, in discard mode)");
      topts.policy = LP_TRACE_DISCARD;
    } else if ((topts.rotate_bytes || topts.rotate_ns) && !strstr(trace_path, "%n")) {
      lp__warn("LABELPROF_TRACE_ROTATE needs %%n in LABELPROF_TRACE (trace-%%n.pftrace) to number the files; "
           "the stream is not rotated");
      topts.rotate_bytes = topts.rotate_ns = 0;
    }
    topts.path = topts.policy == LP_TRACE_STREAM ? trace_path : NULL;
  }
  /* ---- end of the Perfetto stream ---- */
  if (trace || systrace || want_marker) {
    int rc = lp__trace_start(LP__ENV, &topts);
    char *first = rc == -ETXTBSY ? lp__path_numbered(trace_path, 1) : NULL;
    if (first) /* a parent's stream, say, whose LABELPROF_TRACE this process inherited */
      lp__warn("cannot start the stream to '%s': %s; this process streams nothing (%%p in LABELPROF_TRACE gives each "
           "process a file of its own)",
           first, lp_strerror(rc));
    else if (rc && topts.policy == LP_TRACE_STREAM)
      lp__warn("cannot start the stream to '%s': %s", trace_path, lp_strerror(rc));
    else if (rc)
      lp__warn("cannot start the trace: %s", lp_strerror(rc));
    else
      tracing = true;
    free(first);
  }
  if (want_prof || fold) {
    int rc = lp__profile_start(LP__ENV, &popts);
    if (rc == -EEXIST && (popts.flags & LP_PROFILE_CPU)) {
      /* The program handles the CPU timers' signal: a profile of wall time is still worth having. */
      char name[24];
      lp__warn("the program has its own handler on %s, which the CPU samples need (LABELPROF_CPU_SIGNAL chooses "
           "another); profiling without CPU time",
           lp__signal_name(popts.cpu_signal ? popts.cpu_signal : lp__cpu_default_signal(), name, sizeof name));
      popts.flags &= ~LP_PROFILE_CPU;
      env_popts = popts;
      rc = lp__profile_start(LP__ENV, &popts);
    }
    if (rc)
      lp__warn("cannot start the profile: %s", lp_strerror(rc));
    else
      profiling = true;
  }
  lp__unlock(&env_mu);
  if ((profiling || tracing) && atexit(at_exit) != 0) lp__warn("atexit failed; nothing will be reported at exit");
  if (dsig && (profiling || tracing)) start_dumps(dsig);
  if (every_ns && profiling) start_every();
}

/* ---- fork: see lifecycle.c ---------------------------------------------------- */

/*
 * Not taken around fork: a dump may hold it while its file waits for a
 * reader, and fork must not wait for that. The child reports nothing
 * (at_exit checks) and has no dump thread, so it only needs a usable lock.
 */
void lp__env_atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  env_mu = fresh;
  profiling = tracing = false;
}
