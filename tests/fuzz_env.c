/*
 * fuzz_env.c: the environment loader's parsers under hostile values.
 *
 * An input is a line of text, NAME=VALUE:
 *   LABELPROF_HZ=..., _COLLECTOR_SCHED, _REPORT, _LEVELS, _TRACE_MODE,
 *   _TRACE_BUFFER, _CLOCK, _DUMP_SIGNAL, _CPU_SIGNAL, _TRACE_FLUSH
 *                  the value parsed as the loader does (lp__env_parse)
 *   LABELPROF_PROFILE=..., _FOLDED, _TRACE, _SYSTRACE
 *                  the path resolved (lp__env_resolve), then named for
 *                  reports 1, UINT32_MAX and one taken from the input
 *   @N=PATH        PATH named for report N (0 to 4294967295) as it stands
 *                  (lp__path_numbered)
 * Any other NAME picks one of these by its first byte, so that mutated
 * names still reach a parser. Every answer is checked against what the
 * variable allows, or against a slow reference: a parser must never crash,
 * overflow, or give a value out of its range; a name must have every %n
 * replaced by the number and every %% by a %.
 *
 * Built with clang's -fsanitize=fuzzer and -DLP_LIBFUZZER (Makefile.am,
 * tests/fuzz_libfuzzer.sh), this is a libFuzzer target. Otherwise it is a
 * test: it runs every file of tests/data/env-fuzz (the seeds, and every
 * input that once failed), then LP_FUZZ_RUNS (default 100000) mutants of
 * them from a fixed-seed generator.
 */
#include "config.h"

#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAIL(...)                                                                                                  \
  do {                                                                                                             \
    fprintf(stdout, "fuzz_env: " __VA_ARGS__);                                                                     \
    fputc('\n', stdout);                                                                                           \
    fflush(stdout);                                                                                                \
    abort();                                                                                                       \
  } while (0)

static const char *const parsed[] = {"LABELPROF_HZ",           "LABELPROF_COLLECTOR_SCHED", "LABELPROF_REPORT",
                                     "LABELPROF_LEVELS",       "LABELPROF_TRACE_MODE",      "LABELPROF_TRACE_BUFFER",
                                     "LABELPROF_CLOCK",        "LABELPROF_DUMP_SIGNAL",     "LABELPROF_CPU_SIGNAL",
                                     "LABELPROF_TRACE_FLUSH"};
static const char *const paths[] = {"LABELPROF_PROFILE", "LABELPROF_FOLDED", "LABELPROF_TRACE",
                                    "LABELPROF_SYSTRACE"};
#define NPARSED (sizeof parsed / sizeof parsed[0])
#define NPATHS (sizeof paths / sizeof paths[0])

/* Reference: s as a whole number (spaces around, a leading +) in [lo, hi], by comparing digit strings. */
static int ref_whole(const char *s, unsigned long lo, unsigned long hi, unsigned long *out) {
  while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
  if (*s == '+') s++;
  const char *d = s;
  while (*s >= '0' && *s <= '9') s++;
  size_t nd = (size_t)(s - d);
  while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
  if (*s || nd == 0) return 0;
  while (nd > 1 && *d == '0') d++, nd--;
  char hs[32];
  int nh = snprintf(hs, sizeof hs, "%lu", hi);
  if (nd > (size_t)nh || (nd == (size_t)nh && strncmp(d, hs, nd) > 0)) return 0;
  unsigned long n = 0;
  for (size_t i = 0; i < nd; i++) n = n * 10 + (unsigned long)(d[i] - '0');
  if (n < lo) return 0;
  *out = n;
  return 1;
}

/* Reference namer: grows one byte at a time. */
static char *ref_numbered(const char *path, unsigned n) {
  size_t cap = 16, len = 0;
  char *out = malloc(cap), num[16];
  if (!out) abort();
  snprintf(num, sizeof num, "%u", n);
  for (const char *c = path; *c; c++) {
    const char *add = c;
    size_t k = 1;
    if (c[0] == '%' && c[1] == 'n')
      add = num, k = strlen(num), c++;
    else if (c[0] == '%' && c[1] == '%')
      c++;
    for (size_t i = 0; i < k; i++) {
      if (len + 2 > cap && !(out = realloc(out, cap *= 2))) abort();
      out[len++] = add[i];
    }
  }
  out[len] = '\0';
  return out;
}

static void check_numbered(const char *path, unsigned n) {
  char *got = lp__path_numbered(path, n);
  if (!got) FAIL("lp__path_numbered('%s', %u) returned NULL", path, n);
  char *want = ref_numbered(path, n);
  if (strcmp(got, want) != 0) FAIL("lp__path_numbered('%s', %u) gave '%s', not '%s'", path, n, got, want);
  free(got);
  free(want);
}

/* A dump signal the loader may take: none of the refused, and a real signal a program may catch. */
static void check_signal(const char *value, int sig) {
  static const int refused[] = {SIGSEGV, SIGBUS,  SIGFPE,  SIGILL,  SIGABRT, SIGTRAP, SIGSYS,
                                SIGKILL, SIGSTOP, SIGPIPE, SIGXFSZ, SIGXCPU};
  if (sig == 0) return;
  if (sig < 1 || sig > SIGRTMAX || (sig > 31 && sig < SIGRTMIN))
    FAIL("LABELPROF_DUMP_SIGNAL='%s' gave %d, not a signal a program may take", value, sig);
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    if (sig == refused[i]) FAIL("LABELPROF_DUMP_SIGNAL='%s' gave %d, a refused signal", value, sig);
}

static void check_parsed(const char *name, const char *value) {
  lp__env_values_t v, d;
  lp__env_defaults(&v);
  lp__env_defaults(&d);
  int rc = lp__env_parse(&v, name, value);
  if (rc == -ENOMEM) return;
  if (rc != 0) FAIL("lp__env_parse(%s) returned %d", name, rc);
  unsigned long n;
  if (strcmp(name, "LABELPROF_HZ") == 0) {
    unsigned long want = *value && ref_whole(value, 1, 100000, &n) ? n : 1000;
    if (v.profile.hz != want) FAIL("LABELPROF_HZ='%s' gave %u, not %lu", value, v.profile.hz, want);
  } else if (strcmp(name, "LABELPROF_COLLECTOR_SCHED") == 0) {
    lp_sched_t want = LP_SCHED_SLICE;
    unsigned long prio = 0;
    if (strcmp(value, "default") == 0)
      want = LP_SCHED_DEFAULT;
    else if (strcmp(value, "fifo") == 0)
      want = LP_SCHED_FIFO;
    else if (strncmp(value, "fifo:", 5) == 0 && value[5] != '0' && value[5] != '+' && value[5] != ' ' &&
             !(value[5] >= '\t' && value[5] <= '\r') && ref_whole(value + 5, 1, 99, &n) &&
             strspn(value + 5, "0123456789") == strlen(value + 5))
      want = LP_SCHED_FIFO, prio = n;
    if (v.profile.sched != want || v.profile.sched_priority != prio)
      FAIL("LABELPROF_COLLECTOR_SCHED='%s' gave %d:%u, not %d:%lu", value, (int)v.profile.sched,
           v.profile.sched_priority, (int)want, prio);
  } else if (strcmp(name, "LABELPROF_TRACE_BUFFER") == 0) {
    unsigned long want = *value && ref_whole(value, 1, 1048576, &n) ? n : 64;
    if (v.trace.budget_bytes != (uint64_t)want << 20)
      FAIL("LABELPROF_TRACE_BUFFER='%s' gave %llu bytes, not %lu MiB", value,
           (unsigned long long)v.trace.budget_bytes, want);
  } else if (strcmp(name, "LABELPROF_REPORT") == 0) {
    if (!(v.report.min_percent >= 0.0 && v.report.min_percent <= 100.0) ||
        (v.report.flags & ~(uint32_t)(LP_PRINT_THREADS | LP_PRINT_COUNTS | LP_PRINT_FLAT | LP_PRINT_CPU)))
      FAIL("LABELPROF_REPORT='%s' gave flags %#x, min %g", value, v.report.flags, v.report.min_percent);
  } else if (strcmp(name, "LABELPROF_LEVELS") == 0) {
    if (!v.trace.levels || (v.trace.levels & ~(uint32_t)LP_LEVEL_ALL))
      FAIL("LABELPROF_LEVELS='%s' gave %#x", value, v.trace.levels);
  } else if (strcmp(name, "LABELPROF_TRACE_MODE") == 0) {
    lp_trace_policy_t want = strcmp(value, "ring") == 0     ? LP_TRACE_RING
                             : strcmp(value, "stream") == 0 ? LP_TRACE_STREAM
                                                            : LP_TRACE_DISCARD;
    if (v.trace.policy != want)
      FAIL("LABELPROF_TRACE_MODE='%s' gave %d, not %d", value, (int)v.trace.policy, (int)want);
  } else if (strcmp(name, "LABELPROF_CLOCK") == 0) {
    if (v.trace.clock != LP_CLOCK_AUTO && v.trace.clock != LP_CLOCK_TSC && v.trace.clock != LP_CLOCK_MONOTONIC)
      FAIL("LABELPROF_CLOCK='%s' gave %d", value, (int)v.trace.clock);
  } else if (strcmp(name, "LABELPROF_DUMP_SIGNAL") == 0) {
    check_signal(value, v.dump_signal);
  } else if (strcmp(name, "LABELPROF_CPU_SIGNAL") == 0) {
    /* 0 (the default), or a signal the CPU timers may send: PROF, VTALRM, ALRM, USR1, USR2, a real-time one. */
    int sig = v.profile.cpu_signal;
    if (sig && sig != SIGPROF && sig != SIGVTALRM && sig != SIGALRM && sig != SIGUSR1 && sig != SIGUSR2 &&
        (sig < SIGRTMIN || sig > SIGRTMAX))
      FAIL("LABELPROF_CPU_SIGNAL='%s' gave %d, not a signal the CPU samples may take", value, sig);
  } else if (strcmp(name, "LABELPROF_TRACE_FLUSH") == 0) {
    if (v.trace_flush_ns < 1000000u || v.trace_flush_ns > 3600000000000u || (!*value && v.trace_flush_ns != 1000000000u))
      FAIL("LABELPROF_TRACE_FLUSH='%s' gave %llu ns", value, (unsigned long long)v.trace_flush_ns);
  }
  /* Only its own field changes: the others keep their defaults. */
  if (strcmp(name, "LABELPROF_HZ") == 0) d.profile.hz = v.profile.hz;
  if (strcmp(name, "LABELPROF_COLLECTOR_SCHED") == 0) d.profile = v.profile;
  if (strcmp(name, "LABELPROF_CPU_SIGNAL") == 0) d.profile.cpu_signal = v.profile.cpu_signal;
  if (strcmp(name, "LABELPROF_REPORT") == 0) d.report = v.report;
  if (strcmp(name, "LABELPROF_DUMP_SIGNAL") == 0) d.dump_signal = v.dump_signal;
  if (strcmp(name, "LABELPROF_LEVELS") == 0) d.trace.levels = v.trace.levels;
  if (strcmp(name, "LABELPROF_TRACE_MODE") == 0) d.trace.policy = v.trace.policy;
  if (strcmp(name, "LABELPROF_TRACE_BUFFER") == 0) d.trace.budget_bytes = v.trace.budget_bytes;
  if (strcmp(name, "LABELPROF_CLOCK") == 0) d.trace.clock = v.trace.clock;
  if (strcmp(name, "LABELPROF_TRACE_FLUSH") == 0) d.trace_flush_ns = v.trace_flush_ns;
  if (d.profile.hz != v.profile.hz || d.profile.sched != v.profile.sched ||
      d.profile.sched_priority != v.profile.sched_priority || d.profile.cpu_signal != v.profile.cpu_signal ||
      d.dump_signal != v.dump_signal || d.trace.levels != v.trace.levels ||
      d.trace.policy != v.trace.policy || d.trace.budget_bytes != v.trace.budget_bytes ||
      d.trace.clock != v.trace.clock || d.report.flags != v.report.flags ||
      d.report.min_percent != v.report.min_percent || d.trace_flush_ns != v.trace_flush_ns)
    FAIL("%s='%s' changed another variable's value", name, value);
}

/* A path variable: resolved as the loader keeps it, then named for a few report numbers. */
static void check_path(const char *value, unsigned n) {
  if (!*value) return; /* unset */
  char *r = lp__env_resolve(value);
  if (!r) return; /* ENOMEM */
  if (r[0] != '/' && value[0] == '/') FAIL("'%s' resolved to '%s', not absolute", value, r);
  if (value[0] == '/' && !strstr(value, "%p") && strcmp(r, value) != 0)
    FAIL("'%s' resolved to '%s', not itself", value, r);
  check_numbered(r, 1);
  check_numbered(r, UINT32_MAX);
  check_numbered(r, n);
  free(r);
}

static int one(const uint8_t *data, size_t len) {
  char *line = malloc(len + 1);
  if (!line) return 0;
  memcpy(line, data, len);
  line[len] = '\0'; /* a NUL in the input ends the value, as in an environment */
  char *eq = strchr(line, '='), *value = eq ? eq + 1 : line;
  if (eq) *eq = '\0';
  const char *name = eq ? line : "";
  unsigned n = 0;
  for (size_t i = 0; i < len; i++) n = n * 31u + data[i];
  if (name[0] == '@') {
    char *end;
    errno = 0;
    unsigned long long k = strtoull(name + 1, &end, 10);
    check_numbered(value, errno || *end || k > UINT32_MAX ? n : (unsigned)k);
    free(line);
    return 0;
  }
  for (size_t i = 0; i < NPARSED; i++)
    if (strcmp(name, parsed[i]) == 0) {
      check_parsed(name, value);
      free(line);
      return 0;
    }
  for (size_t i = 0; i < NPATHS; i++)
    if (strcmp(name, paths[i]) == 0) {
      check_path(value, n);
      free(line);
      return 0;
    }
  unsigned pick = (unsigned)(len ? data[0] : 0) % (NPARSED + 2);
  if (pick < NPARSED)
    check_parsed(parsed[pick], value);
  else if (pick == NPARSED)
    check_path(value, n);
  else
    check_numbered(value, n);
  free(line);
  return 0;
}

#ifdef LP_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) { return one(data, len); }
#else

#ifndef LP_ENV_FUZZ_DATA
#define LP_ENV_FUZZ_DATA "tests/data/env-fuzz"
#endif

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void) { /* xorshift64: a fixed sequence */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Bytes that matter to these parsers, for mutations. */
static const char interesting[] = "%np%+-09 ,=/.RTMINAXSIGUSR";
static const char *const big[] = {"4294967295", "4294967296", "18446744073709551615", "18446744073709551616",
                                  "9223372036854775807", "9223372036854775808", "%n%n%n%n", "1e999", "-0"};

typedef struct seed {
  char *data;
  size_t len;
} seed_t;

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : LP_ENV_FUZZ_DATA;
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "fuzz_env: cannot open %s\n", dir);
    return 99;
  }
  seed_t seeds[256];
  size_t nseeds = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL && nseeds < 256;) {
    if (e->d_name[0] == '.') continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    FILE *f = fopen(p, "rb");
    if (!f) continue;
    char buf[4096];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    seeds[nseeds].data = malloc(len + 1);
    if (!seeds[nseeds].data) return 99;
    memcpy(seeds[nseeds].data, buf, len);
    seeds[nseeds++].len = len;
  }
  closedir(d);
  if (nseeds == 0) {
    fprintf(stderr, "fuzz_env: no seeds in %s\n", dir);
    return 99;
  }
  /* The parsers' warnings are expected here: only a failure is worth reading. */
  if (!freopen("/dev/null", "w", stderr)) return 99;
  for (size_t i = 0; i < nseeds; i++) one((const uint8_t *)seeds[i].data, seeds[i].len);
  const char *r = getenv("LP_FUZZ_RUNS");
  long runs = r && *r ? atol(r) : 100000;
  char buf[8192];
  for (long k = 0; k < runs; k++) {
    const seed_t *s = &seeds[next() % nseeds];
    size_t len = s->len;
    memcpy(buf, s->data, len);
    for (int m = 1 + (int)(next() % 4); m > 0; m--) {
      size_t at = len ? (size_t)(next() % (len + 1)) : 0;
      switch (next() % 5) {
      case 0: /* replace a byte */
        if (at < len) buf[at] = interesting[next() % (sizeof interesting - 1)];
        break;
      case 1: /* insert a byte */
        if (len + 1 < sizeof buf) {
          memmove(buf + at + 1, buf + at, len - at);
          buf[at] = interesting[next() % (sizeof interesting - 1)];
          len++;
        }
        break;
      case 2: /* delete a byte */
        if (at < len) memmove(buf + at, buf + at + 1, len - at - 1), len--;
        break;
      case 3: { /* insert a big number or many %n */
        const char *b = big[next() % (sizeof big / sizeof big[0])];
        size_t bl = strlen(b);
        if (len + bl < sizeof buf) {
          memmove(buf + at + bl, buf + at, len - at);
          memcpy(buf + at, b, bl);
          len += bl;
        }
        break;
      }
      default: /* repeat the tail */
        if (len * 2 < sizeof buf) memcpy(buf + len, buf + at, len - at), len += len - at;
        break;
      }
    }
    one((const uint8_t *)buf, len);
  }
  printf("fuzz_env: %zu seeds and %ld mutants, no failure\n", nseeds, runs);
  for (size_t i = 0; i < nseeds; i++) free(seeds[i].data);
  return 0;
}
#endif
