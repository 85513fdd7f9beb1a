/*
 * testing.h: the library's hooks for its tests and benchmarks, private,
 * never installed. Nothing in a program's path calls them: they make what
 * is otherwise timed, random or rare happen when a test says (a sample now,
 * a tick at a given instant, the n-th allocation failing, a clock that
 * jumps), and read what a test checks (the aggregation's size). A test that
 * needs only these includes this header, not lib/internal.h; the library's
 * files see it through internal.h. The one for each module is defined in
 * that module's file.
 *
 * It depends on the public header alone.
 */
#ifndef LABELPROF_TESTING_H
#define LABELPROF_TESTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labelprof.h"

/* ---- collector.c: the profile without its thread -------------------------- */

/*
 * lp_profile_start() without a collector thread: samples are taken only by
 * lp__profile_sample_now() (or lp__profile_tick()), and with LP_PROFILE_CPU
 * CPU samples only by lp__cpu_test_sample(). For deterministic tests.
 */
int lp__profile_start_manual(const lp_profile_opts_t *opts);
/* One sampling pass over every registered thread, now, on the calling thread. -EINVAL if not running. */
int lp__profile_sample_now(void);
/*
 * The tick plan on a clock the test steps. lp__profile_test_seed() seeds
 * the instants of every run started from now on (0: from the clock again).
 * lp__profile_plan() gives the index of the period the next tick belongs
 * to (0 for the run's first) and the instant planned for it
 * (CLOCK_MONOTONIC ns). lp__profile_tick(now) is the collector thread's
 * wakeup at now, for a manual profile: 0 if now is before the instant
 * (nothing happens), else 1 after one pass and the plan moved on (periods
 * that ended by now count as missed ticks; one already begun is planned
 * at now if its instant has passed). Both -EINVAL without a running
 * profile, and lp__profile_tick() also when a collector thread runs the
 * plan.
 */
void lp__profile_test_seed(uint64_t seed);
int lp__profile_plan(uint64_t *index, uint64_t *at);
int lp__profile_tick(uint64_t now);
/* Nodes, bytes and thread records of the running aggregation (0 if not running). */
size_t lp__profile_node_count(void);
size_t lp__profile_bytes(void);
size_t lp__profile_thread_records(void);

/* ---- cpu.c ------------------------------------------------------------------ */

/* A sample of count periods on the calling thread, recorded as its signal handler would. */
void lp__cpu_test_sample(uint32_t count);

/* ---- tree.c ----------------------------------------------------------------- */

/* Replaces a profile's figures, so that a report's header can be checked exactly. */
void lp__profile_test_set_stats(lp_profile_t *p, const lp_profile_stats_t *s);

/* ---- clock.c (tests/test_clock.c) ------------------------------------------- */

typedef struct lp__clock_test_check {
  const int *cpus;      /* CPUs to pair, the first against each other (one may repeat); NULL: the allowed ones */
  size_t ncpus;
  const int64_t *skew;  /* ticks added to every reading taken on cpus[i]; NULL: none (needs cpus) */
  double rate_ppm;      /* the counter runs this much faster from the middle of the check on */
  uint64_t budget_ns;   /* 0: the real check's 20 ms */
  uint64_t rate_ns;     /* how long the rate is measured (within the budget); 0: as the real check plans it */
} lp__clock_test_check_t;
/*
 * Runs the counter check now (t may be NULL: the real one), whatever was
 * chosen. Returns 1 if it passes, 0 if not (verdict gets the reason, as
 * lp__clock_reason() would show it, took_ns its duration), -EINVAL for a
 * bad t, -ENOTSUP without a counter.
 */
int lp__clock_test_check(const lp__clock_test_check_t *t, char *verdict, size_t len, uint64_t *took_ns);
/*
 * Adds ticks to every counter reading from now on (cumulative): a jump of
 * the counter against CLOCK_MONOTONIC. While the total is not zero the
 * inline read is sent to lp_impl_ticks_slow(), which adds it, as
 * lp__clock_sync() does. -EINVAL unless the counter is in use. The caller
 * then calls lp__levels_publish(), so that the recording protocol, which
 * reads the counter itself, steps aside too (LP_IMPL_SLOW_CLOCK).
 */
int lp__clock_test_jump(int64_t ticks);
/*
 * Makes the next widen tries of lp__clock_sync() as wide as a preemption of
 * 10 us inside the bracket would (when the counter's rate is known), and
 * returns how many tries the last sync point took.
 */
unsigned lp__clock_test_sync(unsigned widen);
/* Maps made from now on read their points as a counter's, named name in a jump's text; NULL: as the clock says. */
void lp__timemap_test_counter(const char *name);

/* ---- output.c ----------------------------------------------------------------- */

/* A named temporary even where O_TMPFILE works, so that both ways are exercised. */
extern bool lp__output_named_temp_only;

/* ---- trace.c: the Perfetto stream's writer -------------------------------------- */

/* Holds the writer back (on) or lets it go; waits until it has written everything closed so far. */
void lp__trace_stream_hold(bool on);
int lp__trace_stream_sync(void);
/* The stream's page-cache ranges (0, 0: 8 MiB and 32 MiB); set before the stream starts. */
void lp__trace_stream_cache(uint64_t behind, uint64_t keep);
/* The distinct work names track holds in this recording (each interned once); 0 for no such track. */
uint32_t lp__track_test_names(lp_track_t track);

/* ---- util.c: allocation failures ------------------------------------------------- */

/*
 * lp__alloc_test_fail(n) makes the n-th allocation the calling thread makes
 * through the library's allocator (lp__malloc and the others, internal.h)
 * from then on fail (NULL, errno ENOMEM), once; 0 turns it off.
 * lp__alloc_test_pending() is what is left of the countdown: 0 once the
 * failure has happened (or when none was asked for).
 */
void lp__alloc_test_fail(unsigned long nth);
unsigned long lp__alloc_test_pending(void);

/* ---- env.c: the loader's parsers (tests/fuzz_env.c, tests/test_env.c) ------------ */

/*
 * The values of the variables that are not paths: lp__env_defaults fills
 * in what the loader uses when none is set; lp__env_parse reads one
 * variable's value (NULL or "" as unset) into *v as the loader does, a bad
 * value warning on stderr and keeping the default. It returns 0, -ENOMEM,
 * or -ENOENT for a name it does not parse (the paths,
 * LABELPROF_TRACE_MARKER, the subscribers' variables).
 */
typedef struct lp__env_values {
  lp_profile_opts_t profile; /* LABELPROF_HZ, LABELPROF_COLLECTOR_SCHED, LABELPROF_CPU_SIGNAL */
  lp_print_opts_t report;    /* LABELPROF_REPORT */
  lp_trace_opts_t trace;     /* LABELPROF_LEVELS, _TRACE_MODE, _TRACE_BUFFER, _CLOCK */
  int dump_signal;           /* LABELPROF_DUMP_SIGNAL; 0: none */
  uint64_t trace_flush_ns;   /* LABELPROF_TRACE_FLUSH */
} lp__env_values_t;
void lp__env_defaults(lp__env_values_t *v);
int lp__env_parse(lp__env_values_t *v, const char *name, const char *value);
/* A path variable's value as the loader keeps it: absolute, %p expanded, %n and %% kept. NULL on ENOMEM. */
char *lp__env_resolve(const char *value);

#endif /* LABELPROF_TESTING_H */
