/*
 * test_clock.c: the timeline's clock: the once-per-process choice, the
 * counter check, the ticks-to-ns map and its jumps.
 *
 * The choice is made once per process, so every test that needs one (or
 * starts threads) runs in a child of its own: the child makes the choice,
 * runs the body with ordinary CUnit assertions, prints what failed and
 * exits with the number of failures, which the parent asserts is 0. The
 * parent itself never chooses and never starts a thread, so every fork is
 * from a single-threaded process.
 */
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "runner.h"
#include "trace_json.h"

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_COUNTER 1
#define COUNTER "tsc"
#define KERNEL_CLOCKSOURCE "tsc"
static uint64_t raw_counter(void) { return __builtin_ia32_rdtsc(); }
#elif defined(__aarch64__)
#define HAVE_COUNTER 1
#define COUNTER "cntvct"
#define KERNEL_CLOCKSOURCE "arch_sys_counter"
static uint64_t raw_counter(void) {
  uint64_t v;
  __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
  return v;
}
#else
#define HAVE_COUNTER 0
#define COUNTER "clock_gettime"
#define KERNEL_CLOCKSOURCE ""
static uint64_t raw_counter(void) { return 0; }
#endif

static const char *tmpdir;

static uint64_t mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool starts_with(const char *s, const char *prefix) { return s && strncmp(s, prefix, strlen(prefix)) == 0; }

/*
 * The counter's rate in ticks per ns over 10 ms of busy waiting (no choice
 * needed). Both ends are taken just as the counter moves, so that one that
 * moves in coarse steps (qemu's) is measured as well as a fine one.
 */
static double counter_rate(void) {
  if (!HAVE_COUNTER) return 1; /* ticks are ns */
  uint64_t t = raw_counter(), t0, t1, n0, n1;
  while ((t0 = raw_counter()) == t) {
  }
  n0 = mono();
  while (mono() - n0 < 10000000) {
  }
  t = raw_counter();
  while ((t1 = raw_counter()) == t) {
  }
  n1 = mono();
  return (double)(t1 - t0) / (double)(n1 - n0);
}

/* The kernel's current clocksource, without the newline. */
static void kernel_clocksource(char *buf, size_t len) {
  buf[0] = 0;
  FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (!f) return;
  if (fgets(buf, (int)len, f)) buf[strcspn(buf, "\n")] = 0;
  fclose(f);
}

static size_t allowed_cpu_count(int *first, int *second) {
  cpu_set_t set;
  *first = *second = -1;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  size_t n = 0;
  for (int i = 0; i < CPU_SETSIZE; i++)
    if (CPU_ISSET(i, &set)) {
      if (n == 0) *first = i;
      if (n == 1) *second = i;
      n++;
    }
  return n;
}

static void *nothing(void *arg) { return arg; }

/*
 * How long the check may take here. Its own waits all end within its 20 ms
 * budget; on top come what it cannot control: the scheduler's delay in
 * waking the caller on a machine shared with other builds, and starting
 * its two threads, which takes microseconds natively but milliseconds
 * under qemu-user (measured here, slowest of three). The bound still
 * catches what matters: a caller waiting on a helper thread that gets no
 * CPU time, which took seconds. (Under ThreadSanitizer, with the load
 * average at 9, the check took 287 ms: the slack is 400 ms, 800 sanitized.)
 */
static uint64_t check_bound_ns(void) {
  uint64_t start = 0;
  for (int i = 0; i < 3; i++) {
    pthread_t t;
    uint64_t t0 = mono();
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, nothing, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_join(t, NULL), 0);
    if (mono() - t0 > start) start = mono() - t0;
  }
  return 20000000u + (LP_TEST_SANITIZED ? 800000000u : 400000000u) + 2 * 10 * start;
}

/* ---- running a body in a child -------------------------------------------------- */

#define NO_CHOICE (-1)

typedef struct choice {
  lp_clock_t env; /* LABELPROF_CLOCK's value */
  int want;       /* the first choice; NO_CHOICE: none */
  void (*body)(void);
} choice_t;

static void chosen(void *arg) {
  const choice_t *c = arg;
  if (c->env != LP_CLOCK_AUTO) lp__clock_set_env(c->env);
  if (c->want != NO_CHOICE) lp__clock_choose((lp_clock_t)c->want);
  c->body();
}

/* body in a child (lp_test_in_child), after LABELPROF_CLOCK env and the choice want: its failures, 0 if none. */
static int in_child(lp_clock_t env, int want, void (*body)(void)) {
  choice_t c = {env, want, body};
  return lp_test_in_child(chosen, &c);
}

#define CHILD(env, want, body) CU_ASSERT_EQUAL(in_child((env), (want), (body)), 0)

/* ---- the choice ------------------------------------------------------------------ */

static void test_clock_now_is_clock_monotonic(void) {
  uint64_t prev = 0;
  int backwards = 0;
  for (int i = 0; i < 100000; i++) {
    uint64_t a = mono(), n = lp_now_ns(), b = mono();
    if (n < a || n > b) backwards++;
    if (n < prev) backwards++;
    prev = n;
  }
  CU_ASSERT_EQUAL(backwards, 0);
}

static void body_monotonic(void) {
  CU_ASSERT_FALSE(lp__clock_is_counter());
  CU_ASSERT_STRING_EQUAL(lp__clock_name(), "clock_gettime");
  CU_ASSERT_STRING_EQUAL(lp__clock_reason(), "clock_gettime (LP_CLOCK_MONOTONIC)");
  CU_ASSERT_EQUAL(lp__clock_check_ns(), 0);
  CU_ASSERT_EQUAL(lp_impl_clock_counter, 0);
  uint64_t t = lp_impl_ticks(), m = mono();
  CU_ASSERT(t <= m && m - t < 1000000000u); /* ticks are CLOCK_MONOTONIC ns here */
  lp__sync_t s = lp__clock_sync();
  CU_ASSERT_EQUAL(s.ticks, s.ns);
  CU_ASSERT_EQUAL(lp__clock_test_jump(1000), -EINVAL); /* no counter to jump */
  lp__clock_choose(LP_CLOCK_TSC);                     /* the first call decided */
  CU_ASSERT_STRING_EQUAL(lp__clock_name(), "clock_gettime");
}

static void test_clock_forced_monotonic(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_MONOTONIC, body_monotonic); }

static void body_counter(void) {
  CU_ASSERT_EQUAL(lp__clock_is_counter(), HAVE_COUNTER);
  CU_ASSERT_STRING_EQUAL(lp__clock_name(), COUNTER);
  const char *why = lp__clock_reason();
  printf("\n    forced: %s ", why);
  CU_ASSERT(starts_with(why, HAVE_COUNTER ? COUNTER " (LP_CLOCK_TSC" : "clock_gettime (no cycle counter"));
  CU_ASSERT_EQUAL(lp_impl_clock_counter, HAVE_COUNTER);
  if (!HAVE_COUNTER) return;
  uint64_t a = raw_counter(), t = lp_impl_ticks(), b = raw_counter();
  CU_ASSERT(a <= t && t <= b); /* the inline read is the counter itself */
  uint64_t s = lp_impl_ticks_slow();
  CU_ASSERT(s >= b && s <= raw_counter());
  lp__clock_choose(LP_CLOCK_MONOTONIC); /* the first call decided */
  CU_ASSERT_STRING_EQUAL(lp__clock_name(), COUNTER);
}

static void test_clock_forced_counter(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_counter); }

static void body_env_monotonic(void) {
  CU_ASSERT_STRING_EQUAL(lp__clock_reason(), "clock_gettime (LABELPROF_CLOCK=monotonic)");
  CU_ASSERT_FALSE(lp__clock_is_counter());
}

static void body_env_tsc(void) {
  CU_ASSERT(starts_with(lp__clock_reason(), HAVE_COUNTER ? COUNTER " (LABELPROF_CLOCK=tsc" : "clock_gettime ("));
  CU_ASSERT_EQUAL(lp__clock_is_counter(), HAVE_COUNTER);
}

/* LABELPROF_CLOCK (through lp__clock_set_env) overrides the session's option, both ways. */
static void test_clock_environment_overrides_option(void) {
  CHILD(LP_CLOCK_MONOTONIC, LP_CLOCK_TSC, body_env_monotonic);
  CHILD(LP_CLOCK_TSC, LP_CLOCK_MONOTONIC, body_env_tsc);
}

static void body_auto(void) {
  char cs[64];
  kernel_clocksource(cs, sizeof cs);
  const char *why = lp__clock_reason();
  uint64_t took = lp__clock_check_ns(), bound = check_bound_ns();
  printf("\n    clocksource %s: %s (check %.3f ms) ", cs, why, (double)took / 1e6);
  /* The name, the inline flag and the reason agree. */
  bool counter = lp__clock_is_counter();
  CU_ASSERT_EQUAL(lp_impl_clock_counter, counter);
  CU_ASSERT_STRING_EQUAL(lp__clock_name(), counter ? COUNTER : "clock_gettime");
  CU_ASSERT(starts_with(why, counter ? COUNTER " (" : "clock_gettime ("));
  if (!HAVE_COUNTER) return;
  if (strcmp(cs, KERNEL_CLOCKSOURCE) == 0) {
    CU_ASSERT_STRING_EQUAL(why, COUNTER " (the kernel's clocksource)");
    CU_ASSERT_EQUAL(took, 0); /* no check when the kernel already vouches for it */
  } else if (!strstr(why, "not invariant")) {
    /* The check ran, lazily here and not at load, within its budget (plus a busy machine's wake-up delays). */
    CU_ASSERT(starts_with(why, COUNTER " (verified: ") || starts_with(why, "clock_gettime (verification "));
    CU_ASSERT(took > 0 && took <= bound);
  }
}

static void test_clock_auto_on_this_machine(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_AUTO, body_auto); }

static lp_clock_t race_result[8];
static void *race_choose(void *arg) {
  size_t i = (size_t)arg;
  lp__clock_choose(i % 2 ? LP_CLOCK_MONOTONIC : LP_CLOCK_TSC);
  race_result[i] = lp__clock_is_counter() ? LP_CLOCK_TSC : LP_CLOCK_MONOTONIC;
  return NULL;
}

/* Threads that start their first timelines at once all get the one choice. */
static void body_race(void) {
  pthread_t t[8];
  for (size_t i = 0; i < 8; i++) CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, race_choose, (void *)i), 0);
  for (size_t i = 0; i < 8; i++) CU_ASSERT_EQUAL(pthread_join(t[i], NULL), 0);
  for (size_t i = 1; i < 8; i++) CU_ASSERT_EQUAL(race_result[i], race_result[0]);
  CU_ASSERT_EQUAL(lp__clock_is_counter(), race_result[0] == LP_CLOCK_TSC);
}

static void test_clock_concurrent_first_choices_agree(void) { CHILD(LP_CLOCK_AUTO, NO_CHOICE, body_race); }

/* ---- the check -------------------------------------------------------------------- */

/* A budget that a busy machine (other builds, sanitizers) still fits enough exchanges into. */
#define ROOMY 1000000000u

/*
 * The check, run again while its verdict says the machine got in the way:
 * "incomplete" (too busy to run both threads of a pair at once) or a rate
 * that "could not be measured" (every bracket stretched by a burst of
 * load). Neither says anything about the counter, which is what these tests
 * judge. On two CPUs shared with other test programs and busy loops, five
 * tries of a second each were not always enough for the two threads of a
 * pair, pinned to one busy CPU, to meet 200 times (under TSan, not even
 * thirty). Each try has twice the budget of the last, up to 8 s, for
 * at most twelve tries: only a check that never completes takes them all
 * (about 80 s).
 */
static int check_until_complete(const lp__clock_test_check_t *t, char *v, size_t len, uint64_t *took) {
  int rc = 0;
  const uint64_t most = 8 * (uint64_t)ROOMY;
  lp__clock_test_check_t again = *t;
  for (int i = 0; i < 12; i++, again.budget_ns = again.budget_ns < most / 2 ? 2 * again.budget_ns : most) {
    rc = lp__clock_test_check(&again, v, len, took);
    if (!starts_with(v, "verification incomplete") && !strstr(v, "could not be measured")) break;
    printf("\n    (busy: %s; again) ", v);
  }
  return rc;
}

static void body_check_accepts(void) {
  if (!HAVE_COUNTER) {
    CU_ASSERT_EQUAL(lp__clock_test_check(NULL, NULL, 0, NULL), -ENOTSUP);
    return;
  }
  char v[256];
  uint64_t took;
  int first, second;
  size_t n = allowed_cpu_count(&first, &second);
  /* The real CPU list. */
  lp__clock_test_check_t t = {.budget_ns = ROOMY};
  int rc = check_until_complete(&t, v, sizeof v, &took);
  printf("\n    all CPUs: %s (%.3f ms) ", v, (double)took / 1e6);
  CU_ASSERT_EQUAL(rc, 1);
  char want[64];
  snprintf(want, sizeof want, n > 1 ? "verified: %zu CPUs, max skew 0 ns" : "verified: %zu CPU,", n);
  CU_ASSERT(starts_with(v, want));
  /* Two threads on one CPU: the exchange still works (the case a 1-CPU machine can test). */
  int same[2] = {first, first};
  t.cpus = same;
  t.ncpus = 2;
  rc = check_until_complete(&t, v, sizeof v, &took);
  printf("\n    one CPU twice: %s ", v);
  CU_ASSERT_EQUAL(rc, 1);
  CU_ASSERT(starts_with(v, "verified: 2 CPUs, max skew 0 ns, rate within "));
  /* A CPU the process cannot have is left out, and said so. */
  int gone[3] = {first, first, 1 << 19};
  t.ncpus = 3;
  t.cpus = gone;
  rc = check_until_complete(&t, v, sizeof v, &took);
  printf("\n    with a CPU that does not exist: %s ", v);
  CU_ASSERT_EQUAL(rc, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(v, "cannot be pinned"));
  /* Bad arguments. */
  int64_t skew[2] = {0, 0};
  lp__clock_test_check_t bad = {.skew = skew};
  CU_ASSERT_EQUAL(lp__clock_test_check(&bad, v, sizeof v, NULL), -EINVAL);
}

static void test_clock_check_accepts_a_good_counter(void) { CHILD(LP_CLOCK_AUTO, NO_CHOICE, body_check_accepts); }

static void body_check_skew(void) {
  if (!HAVE_COUNTER) return;
  char v[256];
  double rate = counter_rate();
  int first, second;
  size_t n = allowed_cpu_count(&first, &second);
  /*
   * On one CPU the two threads take turns through the scheduler, so only a
   * skew larger than a context switch (on a busy machine, a time slice)
   * shows: a whole second.
   */
  int same[2] = {first, first};
  int64_t skew[2] = {0, -(int64_t)(1e9 * rate)};
  lp__clock_test_check_t t = {.cpus = same, .ncpus = 2, .skew = skew, .budget_ns = ROOMY};
  CU_ASSERT_EQUAL(check_until_complete(&t, v, sizeof v, NULL), 0);
  printf("\n    one CPU, 1 s behind: %s ", v);
  CU_ASSERT(starts_with(v, "verification failed: CPU ") && strstr(v, " behind CPU "));
  if (n < 2) return; /* a 1-CPU machine: the pair above is all it can do */
  /* Two CPUs: 20 us, either way round; the reason names the CPU that is behind. */
  int two[2] = {first, second};
  char want[96];
  for (int dir = -1; dir <= 1; dir += 2) {
    skew[1] = (int64_t)(dir * 20e3 * rate);
    t.cpus = two;
    CU_ASSERT_EQUAL(check_until_complete(&t, v, sizeof v, NULL), 0);
    printf("\n    CPU %d %+d us: %s ", second, dir * 20, v);
    snprintf(want, sizeof want, "verification failed: CPU %d read ", dir < 0 ? second : first);
    CU_ASSERT(starts_with(v, want));
    snprintf(want, sizeof want, " behind CPU %d", dir < 0 ? first : second);
    CU_ASSERT_PTR_NOT_NULL(strstr(v, want));
  }
}

static void test_clock_check_rejects_a_skewed_counter(void) { CHILD(LP_CLOCK_AUTO, NO_CHOICE, body_check_skew); }

static void body_check_rate(void) {
  if (!HAVE_COUNTER) return;
  char v[256];
  int first, second;
  allowed_cpu_count(&first, &second);
  /*
   * One CPU: the rate alone, measured over 40 ms so that a counter that
   * moves in microsecond steps (qemu's) is measured well enough too.
   */
  lp__clock_test_check_t t = {.cpus = &first, .ncpus = 1, .rate_ppm = 5000, .budget_ns = ROOMY, .rate_ns = 40000000};
  CU_ASSERT_EQUAL(check_until_complete(&t, v, sizeof v, NULL), 0);
  printf("\n    +5000 ppm: %s ", v);
  CU_ASSERT(starts_with(v, "verification failed: its rate against CLOCK_MONOTONIC changed by "));
  t.rate_ppm = -5000;
  CU_ASSERT_EQUAL(check_until_complete(&t, v, sizeof v, NULL), 0);
  CU_ASSERT(starts_with(v, "verification failed: its rate against CLOCK_MONOTONIC changed by "));
  /* Within the tolerance: a change of 20 ppm passes. */
  t.rate_ppm = 20;
  CU_ASSERT_EQUAL(check_until_complete(&t, v, sizeof v, NULL), 1);
  printf("\n    +20 ppm: %s ", v);
}

static void test_clock_check_rejects_a_wrong_rate(void) { CHILD(LP_CLOCK_AUTO, NO_CHOICE, body_check_rate); }

/* The real check, with its real budget: bounded, and its verdict well formed whatever it is. */
static void body_check_bounded(void) {
  if (!HAVE_COUNTER) return;
  char v[256];
  uint64_t took, t0 = mono();
  int rc = lp__clock_test_check(NULL, v, sizeof v, &took);
  uint64_t wall = mono() - t0;
  printf("\n    %s (%.3f ms) ", v, (double)took / 1e6);
  CU_ASSERT(rc == 0 || rc == 1);
  CU_ASSERT(took <= wall);
  CU_ASSERT(starts_with(v, rc ? "verified: " : "verification "));
  CU_ASSERT(took <= check_bound_ns());
}

static void test_clock_check_is_bounded(void) { CHILD(LP_CLOCK_AUTO, NO_CHOICE, body_check_bounded); }

/* ---- the map -------------------------------------------------------------------------- */

/* Synthetic points: every 100 us from 1 s, at 3 ticks per ns, from jump_at on moved by jump ns. */
#define NPTS 200
#define STEP 100000u
static void points(lp__sync_t *p, size_t n, size_t jump_at, int64_t jump_ns) {
  for (size_t i = 0; i < n; i++) {
    p[i].ns = 1000000000u + i * STEP;
    p[i].ticks = 5000000000u + 3 * (p[i].ns - 1000000000u);
    if (i >= jump_at) p[i].ticks += (uint64_t)(3 * jump_ns);
  }
}

/* Without a counter the map is the identity, whatever the points. */
static bool map_is_identity(void) {
  if (HAVE_COUNTER) return false;
  lp__sync_t p[NPTS];
  points(p, NPTS, 100, 50000000);
  lp__timemap_t *m = lp__timemap_new(p, NPTS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  size_t cur = 0;
  CU_ASSERT_EQUAL(lp__timemap_ns(m, 12345, p[0], &cur), 12345);
  CU_ASSERT_EQUAL(lp__timemap_jumps(m), 0);
  lp__timemap_free(m);
  return true;
}

/* The map of NTP slewing: each segment's rate off by up to +-450 ppm, which is no jump. p gets the points. */
static lp__timemap_t *slewed_map(lp__sync_t *p) {
  lp__sync_t q[NPTS];
  points(p, NPTS, NPTS, 0);
  for (size_t i = 1; i < NPTS; i++) p[i].ticks += (uint64_t)(int64_t)(i % 2 ? 135 : -135);
  memcpy(q, p, NPTS * sizeof *p);
  return lp__timemap_new(q, NPTS);
}

static void body_map_steady(void) {
  if (map_is_identity()) return;
  lp__sync_t p[NPTS];
  lp__timemap_t *m = slewed_map(p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(lp__timemap_jumps(m), 0);
  CU_ASSERT_PTR_NULL(lp__timemap_jump_text(m));
  size_t cur = 0;
  int off = 0, back = 0;
  uint64_t prev = 0;
  for (size_t i = 0; i < NPTS; i++) {
    /* Exact at the points, through any anchor up to them. */
    if (lp__timemap_ns(m, p[i].ticks, p[i / 2], &cur) != p[i].ns) off++;
  }
  cur = 0;
  for (uint64_t t = p[0].ticks; t < p[NPTS - 1].ticks; t += 977) {
    uint64_t ns = lp__timemap_ns(m, t, p[0], &cur);
    if (ns < prev) back++;
    prev = ns;
  }
  CU_ASSERT_EQUAL(off, 0);
  CU_ASSERT_EQUAL(back, 0);
  /* Past the last point and before the anchor: the fitted rate, and no event precedes its chunk's point. */
  cur = 0;
  uint64_t past = lp__timemap_ns(m, p[NPTS - 1].ticks + 3000000, p[NPTS - 1], &cur);
  CU_ASSERT(past >= p[NPTS - 1].ns + 999000 && past <= p[NPTS - 1].ns + 1001000);
  CU_ASSERT_EQUAL(lp__timemap_ns(m, p[10].ticks - 500, p[10], &cur), p[10].ns);
  lp__timemap_free(m);
  /* A single point maps with the rate the process measured (within 1%); none at all still answers. */
  double rate = counter_rate();
  lp__sync_t one = lp__clock_sync();
  m = lp__timemap_new(&one, 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  cur = 0;
  uint64_t later = lp__timemap_ns(m, one.ticks + (uint64_t)(100000 * rate), one, &cur);
  CU_ASSERT(later >= one.ns + 99000 && later <= one.ns + 101000);
  lp__timemap_free(m);
  m = lp__timemap_new(NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(lp__timemap_jumps(m), 0);
  lp__timemap_free(m);
}

static void test_clock_map_follows_slewing_without_jumps(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_map_steady); }

/* A jump of d ns at point 100: found, described, and each side mapped through its own points. */
static void map_jump(int64_t d, const char *text) {
  lp__sync_t p[NPTS], q[NPTS];
  points(p, NPTS, 100, d);
  memcpy(q, p, sizeof p);
  lp__timemap_t *m = lp__timemap_new(q, NPTS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(lp__timemap_jumps(m), 1);
  const char *t = lp__timemap_jump_text(m);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  printf("\n    %s ", t);
  CU_ASSERT_PTR_NOT_NULL(strstr(t, text));
  CU_ASSERT_PTR_NOT_NULL(strstr(t, "between ts 1009900.000 and 1010000.000"));
  size_t cur = 0;
  int off = 0;
  for (size_t i = 0; i < NPTS; i++) {
    /* Events halfway to the next point, anchored at their chunk's point. */
    uint64_t ns = lp__timemap_ns(m, p[i].ticks + 3 * STEP / 2, p[i], &cur);
    if (ns != p[i].ns + STEP / 2) off++;
  }
  CU_ASSERT_EQUAL(off, 0);
  /*
   * The chunk the jump happened in (anchored at point 99) goes on past it:
   * its readings stay monotonic; before the jump they are exact, and once
   * past the next epoch's first point they are exact again.
   */
  cur = 0;
  int back = 0;
  uint64_t prev = 0;
  for (uint64_t tk = p[99].ticks; tk < p[99].ticks + 3 * 4 * STEP + (uint64_t)(d > 0 ? 3 * d : 0); tk += 101) {
    uint64_t ns = lp__timemap_ns(m, tk, p[99], &cur);
    if (ns < prev) back++;
    prev = ns;
  }
  CU_ASSERT_EQUAL(back, 0);
  cur = 0;
  CU_ASSERT_EQUAL(lp__timemap_ns(m, p[99].ticks + 3 * STEP / 2, p[99], &cur), p[99].ns + STEP / 2);
  if (d > 0) CU_ASSERT_EQUAL(lp__timemap_ns(m, p[101].ticks + 300, p[99], &cur), p[101].ns + 100);
  lp__timemap_free(m);
}

static void body_map_jumps(void) {
  if (map_is_identity()) return;
  map_jump(50000000, "jumped forward by 50.000 ms");
  /* Backwards: the new epoch's ticks overlap the old one's, and sorting by ns keeps them apart. */
  map_jump(-50000000, "jumped backward by 50.000 ms");
  map_jump(-3000, "jumped backward by 3.000 us");
}

static void test_clock_map_finds_jumps_both_ways(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_map_jumps); }

/*
 * The line a mapping hands out (lp__timemap_ns_seg, for the stream's
 * encoder): whenever it answers for later ticks of the chunk it answers
 * what the map says, across the segments of a slewed clock and across a
 * jump (where the chunk's line ends at its epoch), and it answers for most.
 */
static int seg_checks(lp__timemap_t *m, uint64_t from, uint64_t to, lp__sync_t anchor, int *answered) {
  size_t cur = 0, cur2 = 0;
  lp__timeseg_t seg = LP__TIMESEG_NONE;
  int wrong = 0;
  for (uint64_t tk = from; tk < to; tk += 977) {
    uint64_t want = lp__timemap_ns(m, tk, anchor, &cur2), got;
    if (lp__timeseg_ns(&seg, tk, &got)) {
      (*answered)++;
      wrong += got != want;
    } else {
      wrong += lp__timemap_ns_seg(m, tk, anchor, &cur, &seg) != want;
    }
  }
  return wrong;
}

static void body_map_segments(void) {
  if (map_is_identity()) return;
  lp__sync_t p[NPTS], q[NPTS];
  lp__timemap_t *m = slewed_map(p);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  int answered = 0, tries = (int)((p[NPTS - 1].ticks + 3000000 - p[0].ticks) / 977);
  CU_ASSERT_EQUAL(seg_checks(m, p[0].ticks - 5000, p[NPTS - 1].ticks + 3000000, p[0], &answered), 0);
  CU_ASSERT(answered > tries * 9 / 10);
  lp__timemap_free(m);
  points(p, NPTS, 100, 50000000);
  memcpy(q, p, sizeof p);
  m = lp__timemap_new(q, NPTS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(lp__timemap_jumps(m), 1);
  answered = 0;
  CU_ASSERT_EQUAL(seg_checks(m, p[99].ticks, p[102].ticks + 3000, p[99], &answered), 0);
  CU_ASSERT(answered > 0);
  lp__timemap_free(m);
}

static void test_clock_map_lends_its_lines(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_map_segments); }

/* The tolerance: 600 ppm of the time between the points plus 2 us. */
static void body_map_tolerance(void) {
  if (map_is_identity()) return;
  lp__sync_t p[NPTS];
  /* Over 100 us between points the tolerance is 2.06 us. */
  const int64_t steps[] = {2200, -2200, 1900, -1900};
  const size_t want[] = {1, 1, 0, 0};
  for (size_t k = 0; k < 4; k++) {
    points(p, NPTS, 100, steps[k]);
    lp__timemap_t *m = lp__timemap_new(p, NPTS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(lp__timemap_jumps(m), want[k]);
    lp__timemap_free(m);
  }
  /* Two jumps, the larger described; points given in any order. */
  points(p, NPTS, 50, 1000000);
  for (size_t i = 150; i < NPTS; i++) p[i].ticks += 3 * 7000000;
  for (size_t i = 0; i < NPTS / 2; i++) {
    lp__sync_t s = p[i];
    p[i] = p[NPTS - 1 - i];
    p[NPTS - 1 - i] = s;
  }
  lp__timemap_t *m = lp__timemap_new(p, NPTS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(lp__timemap_jumps(m), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(lp__timemap_jump_text(m), "forward by 7.000 ms"));
  lp__timemap_free(m);
}

static void test_clock_map_tolerance(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_map_tolerance); }

/*
 * A session's usual shape: its start, then (tens of ms later) a burst of
 * points a few hundred ns apart (its stop, its last chunk, the export).
 * Each bracket is tens of ns wide, so the burst's segments have rates off by
 * percents; the one long segment must still set the rate, with no jump
 * found and the times along it exact.
 */
static void body_map_burst(void) {
  if (map_is_identity()) return;
  /* 3 ticks per ns; the burst's rates, 2.88, 2.89 and 2.9, agree with each other but not with it. */
  const uint64_t t0 = 7000000000u, n0 = 2000000000u, len = 30000000;
  lp__sync_t p[5] = {{t0, n0},
                     {t0 + 3 * len, n0 + len},
                     {t0 + 3 * len + 1440, n0 + len + 500},
                     {t0 + 3 * len + 1440 + 1734, n0 + len + 1100},
                     {t0 + 3 * len + 1440 + 1734 + 1450, n0 + len + 1600}};
  lp__sync_t q[5];
  memcpy(q, p, sizeof p);
  lp__timemap_t *m = lp__timemap_new(q, 5);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(lp__timemap_jumps(m), 0);
  size_t cur = 0;
  CU_ASSERT_EQUAL(lp__timemap_ns(m, t0 + 3 * (len / 2), p[0], &cur), n0 + len / 2);
  /* Past the last point: the long segment's rate, not the burst's. */
  cur = 0;
  uint64_t past = lp__timemap_ns(m, p[4].ticks + 3 * 1000000, p[4], &cur);
  CU_ASSERT(past >= p[4].ns + 999000 && past <= p[4].ns + 1001000);
  lp__timemap_free(m);
}

static void test_clock_map_short_segments_do_not_outvote_long_ones(void) {
  CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_map_burst);
}

/* ---- sessions ------------------------------------------------------------------------ */

static void filler(int n) {
  for (int i = 0; i < n; i++) {
    LP_SCOPE("filler");
  }
}

/* The X events named name on the lane of this thread, in file order. */
static size_t collect(json_t *events, const char *name, int64_t *ts, int64_t *end, size_t max) {
  size_t i, k = 0;
  json_t *e;
  json_array_foreach(events, i, e) if (ev_is(e, "X", name) && k < max) {
    ts[k] = ev_ns(e, "ts");
    end[k] = ts[k] + ev_ns(e, "dur");
    k++;
  }
  return k;
}

/*
 * Scopes bracketed by lp_now_ns() (before[i], after[i]) come out within tol
 * ns of their brackets, and nothing else breaks the lanes.
 */
static void check_probes(json_t *root, const char *name, const uint64_t *before, const uint64_t *after, size_t n,
                         int64_t tol) {
  int64_t ts[64], end[64];
  CU_ASSERT_FATAL(n <= 64);
  size_t k = collect(trace_events(root), name, ts, end, 64);
  CU_ASSERT_EQUAL(k, n);
  int bad = 0;
  for (size_t i = 0; i < k && i < n; i++)
    if (ts[i] < (int64_t)before[i] - tol || end[i] > (int64_t)after[i] + tol || end[i] < ts[i]) {
      printf("\n    %s %zu: [%lld, %lld] outside [%llu, %llu] ", name, i, (long long)ts[i], (long long)end[i],
             (unsigned long long)before[i], (unsigned long long)after[i]);
      bad++;
    }
  CU_ASSERT_EQUAL(bad, 0);
}

static json_t *write_and_load(const char *file) {
  char path[160];
  snprintf(path, sizeof path, "%s/%s", tmpdir, file);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(path, NULL), 0);
  json_t *root = trace_load(path);
  unlink(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  const char *bad = trace_check_lanes(trace_events(root));
  if (bad) printf("\n    %s ", bad);
  CU_ASSERT_PTR_NULL(bad);
  return root;
}

/* Events agree with lp_now_ns() readings around them: exactly with clock_gettime, within 1 us with the counter. */
static void body_events_agree(void) {
  uint64_t before[50], after[50];
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 50; i++) {
    before[i] = lp_now_ns();
    {
      LP_SCOPE("probe");
    }
    after[i] = lp_now_ns();
    filler(40); /* the probes spread over a few chunks */
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load("agree.json");
  const char *clock = json_string_value(json_object_get(json_object_get(root, "otherData"), "clock"));
  CU_ASSERT_STRING_EQUAL(clock, lp__clock_name());
  /* Each lane's times are kept strictly increasing, which may add a nanosecond per event. */
  check_probes(root, "probe", before, after, 50, lp__clock_is_counter() ? 1000 : 0);
  json_decref(root);
}

static void test_clock_events_agree_with_clock_gettime(void) {
  CHILD(LP_CLOCK_AUTO, LP_CLOCK_MONOTONIC, body_events_agree);
}

static void test_clock_events_agree_with_the_counter(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_events_agree); }

/* Scopes nested n deep, the innermost `depth` of them past the frames when depth > LP_STACK_CAPACITY. */
static void nest(int n) {
  if (n == 0) return;
  LP_SCOPE("nested");
  nest(n - 1);
}

/*
 * Recorded labels end as they began whichever clock stamps them: with
 * clock_gettime every end leaves the recording protocol for the library's
 * general path, which must end the scope on top, not heal the stack and
 * count a mistake. Nested scopes, a manual pair and scopes deeper than the
 * frames, each complete on the timeline, and no mismatched or unmatched end.
 */
static void body_recorded_ends(void) {
  { LP_SCOPE("the thread joins"); }
  lp__thread_t *t = lp__thread_current();
  CU_ASSERT_PTR_NOT_NULL(t);
  CU_ASSERT_EQUAL(lp_trace_start(NULL), 0);
  if (!t) return; /* no _FATAL in a child: it would go on with the parent's next tests */
  {
    LP_SCOPE("outer");
    {
      LP_SCOPE("inner");
      LP_BEGIN("manual");
      LP_END();
    }
  }
  nest(LP_STACK_CAPACITY + 3);
  CU_ASSERT_EQUAL(atomic_load(&t->mismatched), 0);
  CU_ASSERT_EQUAL(atomic_load(&t->unmatched), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load("ends.json");
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "outer"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "inner"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "manual"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "nested"), LP_STACK_CAPACITY + 3);
  json_decref(root);
}

static void test_clock_recorded_ends_with_clock_gettime(void) {
  CHILD(LP_CLOCK_AUTO, LP_CLOCK_MONOTONIC, body_recorded_ends);
}

static void test_clock_recorded_ends_with_the_counter(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_recorded_ends); }

/* The hook itself: readings move by the offset on every path, and the inline read is sent to the slow path. */
static void body_jump_hook(void) {
  if (!HAVE_COUNTER) return;
  double rate = counter_rate();
  int64_t d = (int64_t)(50e6 * rate);
  CU_ASSERT_EQUAL(lp_impl_clock_counter, 1);
  CU_ASSERT_EQUAL(lp__clock_test_jump(d), 0);
  CU_ASSERT_EQUAL(lp_impl_clock_counter, 0);
  uint64_t a = raw_counter(), t = lp_impl_ticks();
  lp__sync_t s = lp__clock_sync();
  uint64_t b = raw_counter();
  CU_ASSERT(t >= a + (uint64_t)d && t <= b + (uint64_t)d);
  CU_ASSERT(s.ticks >= a + (uint64_t)d && s.ticks <= b + (uint64_t)d);
  CU_ASSERT_EQUAL(lp__clock_test_jump(-d), 0);
  CU_ASSERT_EQUAL(lp_impl_clock_counter, 1); /* no offset left: the inline read again */
}

static void test_clock_jump_hook(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_jump_hook); }

/*
 * A sync point whose three brackets were all preempted is taken again: the
 * first three tries are made 10 us wide, and the sync must try more, as
 * such a point would be off by 5 us, past the map's allowance for noise.
 */
static void body_sync_retries(void) {
  if (!HAVE_COUNTER) return;
  /* Chosen without the check, the counter's rate is known from its first millisecond on. */
  uint64_t t0 = lp_now_ns();
  while (lp_now_ns() - t0 < 2000000) continue;
  uint64_t a = raw_counter();
  lp__clock_test_sync(3);
  lp__sync_t s = lp__clock_sync();
  unsigned tries = lp__clock_test_sync(0);
  uint64_t b = raw_counter();
  CU_ASSERT(tries > 3);
  CU_ASSERT(s.ticks >= a && s.ticks <= b);
  lp__clock_sync();
  CU_ASSERT(lp__clock_test_sync(0) >= 3); /* never fewer than three */
}

static void test_clock_sync_retries_wide_brackets(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_sync_retries); }

/*
 * A jump of 50 ms of ticks, forward or backward, in the middle of a session:
 * the map reports it, and the exported times stay within 1 us of lp_now_ns()
 * readings around scopes on both sides of it, with more than a chunk of
 * events between the jump and the bracketed scope after it. The filler
 * scopes, in recording order, keep strictly increasing times.
 */
static void jump_session(int dir) {
  double rate = counter_rate();
  int64_t d = (int64_t)(dir * 50e6 * rate);
  uint64_t before[2], after[2];
  size_t chunk = LP__CHUNK_EVENTS;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  lp__sync_t pts[4];
  pts[0] = lp__clock_sync();
  before[0] = lp_now_ns();
  {
    LP_SCOPE("known");
  }
  after[0] = lp_now_ns();
  filler((int)chunk); /* two events a scope: two chunks */
  pts[1] = lp__clock_sync();
  uint64_t jumped_at = lp_now_ns();
  CU_ASSERT_EQUAL(lp__clock_test_jump(d), 0);
  lp__levels_publish();
  pts[2] = lp__clock_sync();
  filler((int)chunk);
  before[1] = lp_now_ns();
  {
    LP_SCOPE("known");
  }
  after[1] = lp_now_ns();
  filler((int)chunk);
  pts[3] = lp__clock_sync();
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load(dir > 0 ? "forward.json" : "backward.json");
  CU_ASSERT_EQUAL(lp__clock_test_jump(-d), 0);
  lp__levels_publish();

  /* The map over these sync points finds the one jump. */
  lp__timemap_t *m = lp__timemap_new(pts, 4);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(lp__timemap_jumps(m), 1);
  const char *text = lp__timemap_jump_text(m);
  printf("\n    %s ", text ? text : "(no jump)");
  /* Its size as the map measured it: 50 ms, give or take the rate this test measured. */
  const char *by = text ? strstr(text, dir > 0 ? "forward by " : "backward by ") : NULL;
  double ms = 0;
  CU_ASSERT(by && sscanf(strchr(by, 'y') + 2, "%lf ms", &ms) == 1 && ms > 49.5 && ms < 50.5);
  lp__timemap_free(m);

  check_probes(root, "known", before, after, 2, 1000);
  /* Fillers in recording order: strictly increasing, each ending before the next starts, none far off. */
  static int64_t ts[4096], end[4096];
  size_t n = collect(trace_events(root), "filler", ts, end, 4096);
  CU_ASSERT_EQUAL(n, 3 * chunk);
  int back = 0, outside = 0;
  /*
   * 1 us, plus 100 ppm of the session: the map's rate comes from sync points
   * of its own, and under emulation (qemu's counter) a few ppm off over the
   * session's length adds up to more than a microsecond. A misplaced jump
   * would be 50 ms off.
   */
  int64_t tol = 1000 + (int64_t)((mono() - before[0]) / 10000);
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && (ts[i] <= ts[i - 1] || ts[i] < end[i - 1])) back++;
    if (ts[i] < (int64_t)after[0] || end[i] > (int64_t)(i < chunk ? jumped_at : mono()) + tol) {
      if (outside < 3)
        printf("\n    filler %zu of %zu: %lld..%lld, known scope ended %lld, jump at %lld ", i, n, (long long)ts[i],
               (long long)end[i], (long long)after[0], (long long)jumped_at);
      outside++;
    }
  }
  CU_ASSERT_EQUAL(back, 0);
  CU_ASSERT_EQUAL(outside, 0);
  json_decref(root);
}

static void body_jump_forward(void) {
  if (HAVE_COUNTER) jump_session(1);
}

static void body_jump_backward(void) {
  if (HAVE_COUNTER) jump_session(-1);
}

static void test_clock_jump_forward_mid_session(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_jump_forward); }

static void test_clock_jump_backward_mid_session(void) { CHILD(LP_CLOCK_AUTO, LP_CLOCK_TSC, body_jump_backward); }

int main(void) {
  tmpdir = lp_test_tmpdir("clock");
  CU_TestInfo tests[] = {
      LP_TEST(test_clock_now_is_clock_monotonic),
      LP_TEST(test_clock_forced_monotonic),
      LP_TEST(test_clock_forced_counter),
      LP_TEST(test_clock_environment_overrides_option),
      LP_TEST(test_clock_auto_on_this_machine),
      LP_TEST(test_clock_concurrent_first_choices_agree),
      LP_TEST(test_clock_check_accepts_a_good_counter),
      LP_TEST(test_clock_check_rejects_a_skewed_counter),
      LP_TEST(test_clock_check_rejects_a_wrong_rate),
      LP_TEST(test_clock_check_is_bounded),
      LP_TEST(test_clock_map_follows_slewing_without_jumps),
      LP_TEST(test_clock_map_finds_jumps_both_ways),
      LP_TEST(test_clock_map_lends_its_lines),
      LP_TEST(test_clock_map_tolerance),
      LP_TEST(test_clock_map_short_segments_do_not_outvote_long_ones),
      LP_TEST(test_clock_events_agree_with_clock_gettime),
      LP_TEST(test_clock_events_agree_with_the_counter),
      LP_TEST(test_clock_recorded_ends_with_clock_gettime),
      LP_TEST(test_clock_recorded_ends_with_the_counter),
      LP_TEST(test_clock_jump_hook),
      LP_TEST(test_clock_sync_retries_wide_brackets),
      LP_TEST(test_clock_jump_forward_mid_session),
      LP_TEST(test_clock_jump_backward_mid_session),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("clock", tests);
  rmdir(tmpdir);
  return rc;
}
