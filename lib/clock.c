/*
 * clock.c: one clock domain for the timeline.
 *
 * The domain is CLOCK_MONOTONIC in nanoseconds: lp_now_ns() reads it, track
 * events are given in it, and exported times are in it. Recording stamps
 * events with raw ticks: the TSC when it is invariant and the kernel itself
 * uses it as its clocksource (the kernel watches the TSC for drift between
 * CPUs and drops it when a hypervisor makes it lie), and CLOCK_MONOTONIC
 * otherwise. The choice is made once, before the first event, and never
 * changes, so a session never mixes two kinds of ticks.
 *
 * Ticks become nanoseconds at export through sync points: (ticks, ns) pairs
 * read back to back when a session starts and stops, when a buffer chunk is
 * started, and when the export runs. Between two points the mapping is a
 * straight line; points that would make it decrease are dropped, so mapped
 * time never goes backwards, and the mapping follows any slewing of
 * CLOCK_MONOTONIC instead of assuming one fixed TSC frequency.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

LP_EXPORT int lp_impl_clock_counter;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool use_tsc;                       /* written once inside `once` */
static lp_clock_t env_clock = LP_CLOCK_AUTO; /* set at load, before any session */
static lp_clock_t wanted = LP_CLOCK_AUTO;    /* the first session's option */
static const char *reason = "";

static inline uint64_t rdtsc(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return 0;
#endif
}

/* Invariant TSC (CPUID 0x80000007 EDX bit 8), and the kernel's clocksource is "tsc". */
static bool tsc_trusted(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  if (!__get_cpuid(0x80000007u, &a, &b, &c, &d) || !(d & (1u << 8))) return false;
  char buf[32] = "";
  FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (!f) return false;
  bool ok = fgets(buf, sizeof buf, f) != NULL && strcmp(buf, "tsc\n") == 0;
  fclose(f);
  return ok;
#else
  return false;
#endif
}

static void decide(void) {
  lp_clock_t c = env_clock != LP_CLOCK_AUTO ? env_clock : wanted;
  use_tsc = c == LP_CLOCK_TSC || (c == LP_CLOCK_AUTO && tsc_trusted());
  reason = use_tsc ? "tsc" : "clock_gettime";
  LP_IMPL_STORE_RELEASE(lp_impl_clock_counter, (int)use_tsc);
}

void lp__clock_set_env(lp_clock_t c) { env_clock = c; }

void lp__clock_choose(lp_clock_t want) {
  wanted = want;
  int rc = pthread_once(&once, decide);
  if (rc != 0) lp__fatal("pthread_once", rc);
}

bool lp__clock_is_counter(void) {
  lp__clock_choose(LP_CLOCK_AUTO);
  return use_tsc;
}

const char *lp__clock_name(void) { return lp__clock_is_counter() ? "tsc" : "clock_gettime"; }
const char *lp__clock_reason(void) {
  lp__clock_choose(LP_CLOCK_AUTO);
  return reason;
}
uint64_t lp__clock_check_ns(void) { return 0; }

uint64_t lp_impl_ticks_slow(void) {
  /* Reached while the inline flag still reads 0: before the choice, or on the fallback. */
  return lp__clock_is_counter() ? rdtsc() : lp__mono_ns();
}

uint64_t lp_now_ns(void) { return lp__mono_ns(); }

lp__sync_t lp__clock_sync(void) {
  if (!lp__clock_is_counter()) {
    uint64_t ns = lp__mono_ns();
    return (lp__sync_t){ns, ns};
  }
  /* The tightest of three brackets: ns was read between t0 and t1. */
  lp__sync_t best = {0, 0};
  uint64_t width = UINT64_MAX;
  for (int i = 0; i < 3; i++) {
    uint64_t t0 = rdtsc(), ns = lp__mono_ns(), t1 = rdtsc();
    if (t1 >= t0 && t1 - t0 < width) {
      width = t1 - t0;
      best = (lp__sync_t){t0 + (t1 - t0) / 2, ns};
    }
  }
  return best;
}

/* ---- ticks to nanoseconds ------------------------------------------------- */

static int sync_cmp(const void *a, const void *b) {
  const lp__sync_t *x = a, *y = b;
  if (x->ticks != y->ticks) return x->ticks < y->ticks ? -1 : 1;
  return x->ns < y->ns ? -1 : x->ns > y->ns;
}

struct lp__timemap {
  lp__sync_t *pts; /* sorted, strictly increasing; borrowed */
  size_t n;
  bool identity;
  /* Per segment i (pts[i] to pts[i+1]): ns per tick as integer and 64-bit fraction. */
  uint64_t *whole, *frac;
};

static void timemap_release(lp__timemap_t *m) {
  free(m->whole);
  free(m->frac);
  m->whole = m->frac = NULL;
}

static int timemap_init(lp__timemap_t *m, lp__sync_t *pts, size_t n) {
  memset(m, 0, sizeof *m);
  m->identity = !lp__clock_is_counter();
  m->pts = pts;
  if (m->identity || n == 0) return 0;
  qsort(pts, n, sizeof *pts, sync_cmp);
  /* Keep a strictly increasing chain: the mapping can then never go backwards. */
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (k > 0 && (pts[i].ticks <= pts[k - 1].ticks || pts[i].ns <= pts[k - 1].ns)) continue;
    pts[k++] = pts[i];
  }
  m->n = k;
  if (k < 2) return 0;
  /* Each segment's slope once, so that mapping a tick is two multiplications, no division. */
  m->whole = malloc((k - 1) * sizeof *m->whole);
  m->frac = malloc((k - 1) * sizeof *m->frac);
  if (!m->whole || !m->frac) {
    timemap_release(m);
    return -ENOMEM;
  }
  for (size_t i = 0; i + 1 < k; i++) {
    uint64_t dn = pts[i + 1].ns - pts[i].ns, dt = pts[i + 1].ticks - pts[i].ticks;
    m->whole[i] = dn / dt;
    m->frac[i] = (uint64_t)(((unsigned __int128)(dn % dt) << 64) / dt);
  }
  return 0;
}

lp__timemap_t *lp__timemap_new(lp__sync_t *pts, size_t n) {
  lp__timemap_t *m = malloc(sizeof *m);
  if (m && timemap_init(m, pts, n) != 0) {
    free(m);
    return NULL;
  }
  return m;
}

void lp__timemap_free(lp__timemap_t *m) {
  if (!m) return;
  timemap_release(m);
  free(m);
}

size_t lp__timemap_jumps(const lp__timemap_t *m) {
  (void)m;
  return 0;
}

const char *lp__timemap_jump_text(const lp__timemap_t *m) {
  (void)m;
  return NULL;
}

uint64_t lp__timemap_ns(const lp__timemap_t *m, uint64_t ticks, lp__sync_t anchor, size_t *cursor) {
  (void)anchor;
  if (m->identity) return ticks;
  if (m->n < 2) return m->n ? m->pts[0].ns : 0; /* a session always has a start and an export point */
  size_t i = *cursor < m->n - 1 ? *cursor : m->n - 2;
  /* Events of a lane come in order, so the segment moves forward a step at a time. */
  while (i + 2 < m->n && ticks >= m->pts[i + 1].ticks) i++;
  while (i > 0 && ticks < m->pts[i].ticks) i--;
  *cursor = i;
  const lp__sync_t *a = &m->pts[i];
  uint64_t d = ticks >= a->ticks ? ticks - a->ticks : a->ticks - ticks;
  uint64_t off = d * m->whole[i] + (uint64_t)(((unsigned __int128)d * m->frac[i]) >> 64);
  if (ticks >= a->ticks) return a->ns + off;
  return off < a->ns ? a->ns - off : 0;
}
