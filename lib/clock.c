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

LP_EXPORT _Atomic int lp_impl_clock_tsc;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool use_tsc;     /* written once inside `once` */
static bool forced_mono; /* set before `once` runs */

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
  use_tsc = !forced_mono && tsc_trusted();
  atomic_store_explicit(&lp_impl_clock_tsc, use_tsc, memory_order_release);
}

void lp__clock_init(void) {
  int rc = pthread_once(&once, decide);
  if (rc != 0) lp__fatal("pthread_once", rc);
}

int lp__clock_force_monotonic(void) {
  forced_mono = true;
  lp__clock_init();
  return use_tsc ? -EBUSY : 0;
}

bool lp__clock_is_tsc(void) {
  lp__clock_init();
  return use_tsc;
}

const char *lp__clock_name(void) { return lp__clock_is_tsc() ? "tsc" : "clock_gettime"; }

uint64_t lp_impl_ticks_slow(void) {
  /* Reached while the inline flag still reads 0: before the choice, or on the fallback. */
  return lp__clock_is_tsc() ? rdtsc() : lp__mono_ns();
}

uint64_t lp_now_ns(void) { return lp__mono_ns(); }

lp__sync_t lp__clock_sync(void) {
  if (!lp__clock_is_tsc()) {
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

int lp__timemap_init(lp__timemap_t *m, lp__sync_t *pts, size_t n) {
  memset(m, 0, sizeof *m);
  m->identity = !lp__clock_is_tsc();
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
    lp__timemap_free(m);
    return -ENOMEM;
  }
  for (size_t i = 0; i + 1 < k; i++) {
    uint64_t dn = pts[i + 1].ns - pts[i].ns, dt = pts[i + 1].ticks - pts[i].ticks;
    m->whole[i] = dn / dt;
    m->frac[i] = (uint64_t)(((unsigned __int128)(dn % dt) << 64) / dt);
  }
  return 0;
}

void lp__timemap_free(lp__timemap_t *m) {
  free(m->whole);
  free(m->frac);
  m->whole = m->frac = NULL;
}

uint64_t lp__timemap_ns(const lp__timemap_t *m, uint64_t ticks, size_t *cursor) {
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
