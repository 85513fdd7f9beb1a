/*
 * clock.c: one clock domain for the timeline.
 *
 * What it owns. The domain is CLOCK_MONOTONIC in nanoseconds: lp_now_ns()
 * reads it, track events are given in it, and exported times are in it.
 * Recording stamps events with raw ticks of one source, chosen once per
 * process before the first event and never changed, so a session never
 * mixes two kinds of ticks:
 *
 *   - the CPU's counter (x86: the TSC; aarch64: CNTVCT_EL0), read inline by
 *     the header, when it is invariant and either the kernel uses it as its
 *     own clocksource or this file's check passes (or when it is forced);
 *   - otherwise CLOCK_MONOTONIC itself, through lp_impl_ticks_slow().
 *
 * The check (auto mode, once, at the first timeline start, never at load).
 * Two helper threads, one pinned to the first allowed CPU and the other to
 * each other allowed CPU in turn (the pairs the kernel's own TSC sync check
 * uses), take strict turns (a spinlock lets the CPU that just released it
 * take it again, and hardly ever hands over) to read the counter with fences
 * and compare each reading with the other CPU's last one; a smaller reading
 * is a warp, and any warp fails. Meanwhile the calling thread measures the
 * counter's rate against CLOCK_MONOTONIC over each half of the check; the
 * two must agree within 100 ppm. It all ends within 20 ms whatever the CPU
 * count: the pairs share the time, each must make a minimum number of
 * hand-overs close enough in time to show a skew, and the caller stops
 * waiting at its deadline (the helpers are detached and leave on their
 * own), so a machine too busy to run both sides of a pair gets "verification
 * incomplete" and clock_gettime, never a long stall or an unseen CPU.
 *
 * Ticks become nanoseconds at export through sync points: (ticks, ns) pairs
 * read back to back when a session starts and stops, when any chunk is
 * started and when the export runs. The map sorts them by ns (the clock to
 * trust), fits the counter's rate, and splits them into epochs wherever a
 * point disagrees with its predecessor by more than the tolerance (a jump:
 * a VM migrated or restored, a TSC written). Within an epoch the map is the
 * straight line between neighbouring points, so it follows the slewing of
 * CLOCK_MONOTONIC instead of assuming one fixed frequency.
 *
 * The tricky invariant: an event is mapped through the epoch of its own
 * chunk's sync point (its anchor), never through points of another epoch,
 * and for a given anchor the mapping never decreases as ticks grow. A
 * chunk's events are read by one thread in order, so their times never go
 * backwards (unless the counter itself stepped back inside that chunk), and
 * a jump costs accuracy only in the chunks that were being filled when it
 * happened.
 */
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

LP_EXPORT int lp_impl_clock_counter;

/* ---- reading the counter ------------------------------------------------- */

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_COUNTER 1
#define COUNTER_NAME "tsc"
#define COUNTER_CLOCKSOURCE "tsc"
/* The same read as the header's inline one, so both stamp the same ticks. */
static inline uint64_t counter_raw(void) { return __builtin_ia32_rdtsc(); }
/*
 * A read that stays where it is written: the LFENCE before it waits for
 * every earlier instruction (a lock's acquire, a clock read) to complete,
 * and the one after it keeps later instructions from starting first. Linux
 * makes LFENCE dispatch-serialising on AMD too.
 */
static inline uint64_t counter_fenced(void) {
  uint32_t lo, hi;
  __asm__ __volatile__("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi) : : "memory");
  return (uint64_t)hi << 32 | lo;
}
/* Invariant TSC: CPUID 0x80000007 EDX bit 8 (constant rate in every P-, C- and T-state). */
static bool counter_invariant(void) {
  unsigned a, b, c, d;
  return __get_cpuid(0x80000007u, &a, &b, &c, &d) && (d & (1u << 8));
}
static const char *const not_invariant = "the TSC is not invariant";
#elif defined(__aarch64__)
#define HAVE_COUNTER 1
#define COUNTER_NAME "cntvct"
#define COUNTER_CLOCKSOURCE "arch_sys_counter"
static inline uint64_t counter_raw(void) {
  uint64_t v;
  __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
  return v;
}
/* ISB before: the read is not taken ahead of earlier instructions; ISB after: nor later ones ahead of it. */
static inline uint64_t counter_fenced(void) {
  uint64_t v;
  __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0\n\tisb" : "=r"(v) : : "memory");
  return v;
}
/* The generic timer's virtual count is architecturally synchronised across PEs and runs at a constant rate. */
static bool counter_invariant(void) { return true; }
static const char *const not_invariant = "";
#else
#define HAVE_COUNTER 0
#define COUNTER_NAME "clock_gettime"
static inline uint64_t counter_raw(void) { return 0; }
static inline uint64_t counter_fenced(void) { return 0; }
#endif

/* ---- the choice ------------------------------------------------------------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int decided;                    /* __atomic: 1 once the choice below is final (release) */
static bool use_counter;               /* written inside `once`, read after `decided` */
static char reason[320] = "";          /* likewise */
static uint64_t check_took;            /* likewise */
static double check_rate;              /* ticks per ns measured by the check, 0 if none */
static lp__sync_t origin;              /* a sync point taken when the choice was made */
static int env_clock = LP_CLOCK_AUTO;  /* __atomic; from env.c at load */
static int first_want = -1;            /* __atomic: the first caller's option, -1 before any */
static int64_t jump_offset;            /* __atomic: test hook, ticks added to every reading */

/* Test hooks read through this so that a forced jump reaches every path but the inline one. */
static inline uint64_t counter_now(void) {
  return counter_raw() + (uint64_t)__atomic_load_n(&jump_offset, __ATOMIC_RELAXED);
}

void lp__clock_set_env(lp_clock_t c) { __atomic_store_n(&env_clock, (int)c, __ATOMIC_RELAXED); }

/* "812 ns", "3.250 us", "50.000 ms", "2.000 s". */
static void fmt_duration(char *buf, size_t len, double ns) {
  if (ns < 0) ns = -ns;
  if (ns < 1e3)
    snprintf(buf, len, "%.0f ns", ns);
  else if (ns < 1e6)
    snprintf(buf, len, "%.3f us", ns / 1e3);
  else if (ns < 1e9)
    snprintf(buf, len, "%.3f ms", ns / 1e6);
  else
    snprintf(buf, len, "%.3f s", ns / 1e9);
}

/* ---- the check ------------------------------------------------------------------ */

#if HAVE_COUNTER

/* Lets another thread run on this CPU. sched_yield() always succeeds on Linux: there is no result to check. */
static void give_way(void) { (void)sched_yield(); }

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#define CHECK_BUDGET_NS 20000000u   /* the whole check, whatever the CPU count */
#define CHECK_RESERVE_NS 3000000u   /* kept out of the pairs' time: thread start, waking up, the last bracket */
#define CHECK_MARGIN_NS 500000u     /* the caller stops waiting for the helpers this long before the budget ends */
#define CHECK_POLL_NS 200000u       /* how often the caller looks whether the helpers are done */
#define PAIR_MAX_NS 8000000u        /* one pair never gets more than this */
#define PAIR_MIN_EXCHANGES 200u     /* tight hand-overs from one CPU to the other, per pair */
#define TIGHT_NS 10000u             /* a hand-over counts when the two readings are at most this far apart */
#define RATE_HALF_NS 3000000u       /* each half of the rate measurement lasts at least this */
#define RATE_MAX_PPM 100.0
#define RATE_UNMEASURABLE_PPM 1000.0 /* brackets so wide that the rate cannot be judged (an emulator) */
#define BRACKETS 16                 /* a rate point is the tightest of this many brackets */

typedef struct check_opts {
  const int *cpus;      /* the CPUs to pair, first against each other; NULL: the allowed ones */
  size_t ncpus;
  const int64_t *skew;  /* test: ticks added to readings taken on cpus[i] */
  double rate_ppm;      /* test: the counter runs this much faster from the middle of the check */
  uint64_t budget_ns;
  uint64_t rate_ns;     /* test: how long to measure the rate; 0: as planned */
} check_opts_t;

typedef struct check_result {
  bool pass;
  char text[200];
  uint64_t ns;          /* how long the check took */
  double ticks_per_ns;  /* the rate it measured (first half), 0 if it could not */
} check_result_t;

/*
 * State shared by the caller and two helper threads: A stays on cpu[a_slot];
 * B moves to each later slot in turn and drives the rounds. The helpers are
 * detached and the caller never waits for them past its deadline: a helper
 * that gets no CPU time (a busy machine, a real-time task) cannot hold the
 * check up. The last of the three to leave frees the state.
 */
typedef struct check {
  int refs;          /* __atomic */
  int *cpu;          /* owned copies: a helper may outlive the caller's arrays */
  int64_t *skew;
  size_t ncpu;
  double rate_ppm;
  uint64_t pivot;    /* __atomic: from this raw reading on, the test rate applies; 0 = not yet */
  uint64_t slice_ns; /* each pair's share of the time */
  uint64_t hard_end; /* CLOCK_MONOTONIC ns by which every pair has stopped */
  /*
   * The exchange: turn (__atomic) says which side reads next, and the other
   * fields belong to that side until it hands the turn over (release).
   */
  int turn;
  uint64_t last, last_ns, exchanges; /* last_ns 0: no reading yet this round */
  int pair[2];       /* the CPUs of sides 0 and 1 this round */
  /* The largest warp so far, under `lock`: the caller reads it while a side may still run. */
  int lock;
  uint64_t max_warp; /* ticks */
  int behind, ahead;
  /* Control, all __atomic. B publishes a round once it is pinned; A follows it. */
  int stop;          /* the round is over */
  int quit;          /* the check is over */
  unsigned round, a_done;
  int a_state;       /* 0 starting, 1 pinned to cpu[a_slot], -1 pinned nowhere */
  /* Written by B before it publishes a round (A reads them after), or by A before a_state. */
  size_t a_slot;
  uint64_t slice_end;
  bool same_cpu;
  unsigned unpinned;
  int unpin_err, unpin_cpu;
  /* B's results, final once B sets `done` (__atomic, release). */
  int done;
  unsigned paired;   /* CPUs checked against the first one */
  bool incomplete;
  uint64_t weak_exchanges, weak_ns;
  int weak_cpu;
} check_t;

static void check_unref(check_t *c) {
  if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  free(c->cpu);
  free(c->skew);
  free(c);
}

/* A fenced reading as the check sees it: with the test's rate change and the skew of the slot's CPU. */
static uint64_t check_read(check_t *c, size_t slot) {
  uint64_t t = counter_fenced();
  uint64_t p = __atomic_load_n(&c->pivot, __ATOMIC_RELAXED);
  if (c->rate_ppm != 0 && p && t > p) t += (uint64_t)(int64_t)((double)(t - p) * c->rate_ppm * 1e-6);
  if (c->skew && slot < c->ncpu) t += (uint64_t)c->skew[slot];
  return t;
}

/*
 * The tightest of BRACKETS (counter, CLOCK_MONOTONIC, counter) readings.
 * *unsure gets how far its ticks can be from the ns read: half its width,
 * plus the counter's step, the smallest advance seen between two readings
 * (a counter that moves in coarse steps, as under an emulator, is off by up
 * to a step however tight the bracket); UINT64_MAX if it never advanced.
 */
static lp__sync_t check_bracket(check_t *c, uint64_t *unsure) {
  lp__sync_t best = {0, 0};
  uint64_t width = UINT64_MAX, step = UINT64_MAX, prev = 0;
  for (int i = 0; i < BRACKETS; i++) {
    uint64_t t0 = check_read(c, SIZE_MAX), ns = lp__mono_ns(), t1 = check_read(c, SIZE_MAX);
    if (i > 0 && t0 > prev && t0 - prev < step) step = t0 - prev;
    if (t1 > t0 && t1 - t0 < step) step = t1 - t0;
    prev = t1;
    if (t1 >= t0 && t1 - t0 < width) {
      width = t1 - t0;
      best = (lp__sync_t){t0 + (t1 - t0) / 2, ns};
    }
  }
  *unsure = step == UINT64_MAX || width == UINT64_MAX ? UINT64_MAX : width / 2 + step;
  return best;
}

static bool over(check_t *c) { return __atomic_load_n(&c->quit, __ATOMIC_ACQUIRE) || lp__mono_ns() >= c->hard_end; }

/* Takes the warp record's lock; false if `until` passed first (a holder that does not get to run). */
static bool spin_lock(check_t *c, uint64_t until) {
  unsigned spins = 0;
  while (__atomic_exchange_n(&c->lock, 1, __ATOMIC_ACQUIRE)) {
    while (__atomic_load_n(&c->lock, __ATOMIC_RELAXED)) {
      if (++spins > 1000) { /* the holder was preempted: spinning only delays it */
        if (lp__mono_ns() >= until) return false;
        give_way();
        spins = 0;
      } else {
        cpu_relax();
      }
    }
  }
  return true;
}

static void spin_unlock(check_t *c) { __atomic_store_n(&c->lock, 0, __ATOMIC_RELEASE); }

/*
 * One side of a pair's exchange, until the round stops: wait for the turn,
 * read the counter, compare with the other side's last reading, hand the
 * turn over. Strict turns make every reading a hand-over between the two
 * CPUs (a lock would mostly be taken again by the CPU that just released
 * it). The fences keep the read after the turn was seen, so a reading
 * smaller than the one the other CPU took before handing over is a real
 * warp. A hand-over counts towards the minimum only when the two readings
 * were close in time (TIGHT_NS): a skew shows only when it exceeds the time
 * between them, and on a busy machine a turn can wait a whole time slice.
 */
static void exchange(check_t *c, int side, size_t slot) {
  bool yield = c->same_cpu;
  unsigned spins = 0;
  while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
    if (__atomic_load_n(&c->turn, __ATOMIC_ACQUIRE) != side) {
      /* Sharing a CPU with the other side, or it is not running: give way, and notice the end. */
      if (yield || ++spins > 1000) {
        spins = 0;
        if (over(c)) break;
        give_way();
      } else {
        cpu_relax();
      }
      continue;
    }
    uint64_t now = check_read(c, slot), ns = lp__mono_ns();
    if (c->last_ns) {
      int64_t gap = (int64_t)(ns - c->last_ns);
      if (gap >= -(int64_t)TIGHT_NS && gap <= (int64_t)TIGHT_NS) c->exchanges++;
      if (now < c->last && spin_lock(c, UINT64_MAX)) {
        if (c->last - now > c->max_warp) {
          c->max_warp = c->last - now;
          c->behind = c->pair[side]; /* it read the smaller value */
          c->ahead = c->pair[1 - side];
        }
        spin_unlock(c);
      }
    }
    c->last = now;
    c->last_ns = ns;
    bool end = ns >= c->hard_end || (ns >= c->slice_end && c->exchanges >= PAIR_MIN_EXCHANGES) ||
               __atomic_load_n(&c->quit, __ATOMIC_RELAXED);
    __atomic_store_n(&c->turn, 1 - side, __ATOMIC_RELEASE);
    if (end) break;
  }
  __atomic_store_n(&c->stop, 1, __ATOMIC_RELAXED);
}

static int pin_self(int cpu) {
  if (cpu < 0) return EINVAL;
  size_t size = CPU_ALLOC_SIZE((size_t)cpu + 1);
  cpu_set_t *set = CPU_ALLOC((size_t)cpu + 1);
  if (!set) return ENOMEM;
  CPU_ZERO_S(size, set);
  CPU_SET_S((size_t)cpu, size, set);
  int rc = pthread_setaffinity_np(pthread_self(), size, set);
  CPU_FREE(set);
  return rc;
}

static void *helper_a(void *arg) {
  check_t *c = arg;
  size_t slot = 0;
  /* The first CPU that takes us; those that do not are out of the process's reach (a cpuset). */
  for (; slot < c->ncpu; slot++) {
    int rc = pin_self(c->cpu[slot]);
    if (rc == 0) break;
    if (c->unpinned++ == 0) {
      c->unpin_err = rc;
      c->unpin_cpu = c->cpu[slot];
    }
  }
  c->a_slot = slot;
  __atomic_store_n(&c->a_state, slot < c->ncpu ? 1 : -1, __ATOMIC_RELEASE);
  for (unsigned seen = 0; slot < c->ncpu;) {
    unsigned r;
    while ((r = __atomic_load_n(&c->round, __ATOMIC_ACQUIRE)) == seen && !__atomic_load_n(&c->quit, __ATOMIC_ACQUIRE))
      give_way();
    if (r == seen) break; /* the check is over */
    seen = r;
    exchange(c, 0, slot);
    __atomic_store_n(&c->a_done, seen, __ATOMIC_RELEASE);
  }
  check_unref(c);
  return NULL;
}

/* Records why the pairing stopped short, once. */
static void short_of(check_t *c, int cpu, uint64_t exchanges, uint64_t ns) {
  if (c->incomplete) return;
  c->incomplete = true;
  c->weak_cpu = cpu;
  c->weak_exchanges = exchanges;
  c->weak_ns = ns;
}

static void drive_rounds(check_t *c) {
  int st;
  while ((st = __atomic_load_n(&c->a_state, __ATOMIC_ACQUIRE)) == 0) {
    if (over(c)) {
      short_of(c, -1, 0, 0); /* A never got to run */
      return;
    }
    give_way();
  }
  if (st < 0) return;
  size_t first = c->a_slot;
  for (size_t k = first + 1; k < c->ncpu; k++) {
    uint64_t t = lp__mono_ns();
    if (t >= c->hard_end) { /* out of time with CPUs left unchecked */
      short_of(c, c->cpu[k], 0, 0);
      return;
    }
    int rc = pin_self(c->cpu[k]);
    if (rc != 0) {
      if (c->unpinned++ == 0) {
        c->unpin_err = rc;
        c->unpin_cpu = c->cpu[k];
      }
      continue;
    }
    /* A is between rounds (its a_done was acquired): the exchange is ours to set up. B reads first. */
    __atomic_store_n(&c->turn, 1, __ATOMIC_RELAXED);
    c->last = c->last_ns = c->exchanges = 0;
    if (!spin_lock(c, UINT64_MAX)) return; /* cannot fail without a deadline */
    c->pair[0] = c->cpu[first];
    c->pair[1] = c->cpu[k];
    spin_unlock(c);
    c->same_cpu = c->cpu[k] == c->cpu[first];
    c->slice_end = t + c->slice_ns;
    __atomic_store_n(&c->stop, 0, __ATOMIC_RELAXED);
    unsigned round = __atomic_load_n(&c->round, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&c->round, round, __ATOMIC_RELEASE);
    exchange(c, 1, k);
    while (__atomic_load_n(&c->a_done, __ATOMIC_ACQUIRE) != round) {
      if (__atomic_load_n(&c->quit, __ATOMIC_ACQUIRE)) { /* A never got to run: leave the exchange to it */
        short_of(c, c->cpu[k], 0, lp__mono_ns() - t);
        return;
      }
      give_way();
    }
    c->paired++;
    if (c->exchanges < PAIR_MIN_EXCHANGES) short_of(c, c->cpu[k], c->exchanges, lp__mono_ns() - t);
  }
}

static void *helper_b(void *arg) {
  check_t *c = arg;
  drive_rounds(c);
  __atomic_store_n(&c->quit, 1, __ATOMIC_RELEASE); /* A leaves too */
  __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
  check_unref(c);
  return NULL;
}

static void sleep_until(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* The CPUs the calling thread may run on, in order. 0, or a negative errno. */
static int allowed_cpus(int **out, size_t *n) {
  for (size_t max = 1024; max <= (1u << 20); max *= 2) {
    size_t size = CPU_ALLOC_SIZE(max);
    cpu_set_t *set = CPU_ALLOC(max);
    if (!set) return -ENOMEM;
    if (sched_getaffinity(0, size, set) != 0) {
      int e = errno;
      CPU_FREE(set);
      if (e == EINVAL) continue; /* the kernel's mask is larger: try a larger set */
      return -e;
    }
    size_t count = (size_t)CPU_COUNT_S(size, set), k = 0;
    int *cpus = lp__malloc((count ? count : 1) * sizeof *cpus);
    if (!cpus) {
      CPU_FREE(set);
      return -ENOMEM;
    }
    for (size_t i = 0; i < max && k < count; i++)
      if (CPU_ISSET_S(i, size, set)) cpus[k++] = (int)i;
    CPU_FREE(set);
    *out = cpus;
    *n = k;
    return 0;
  }
  return -EINVAL;
}

/* A detached helper that holds a reference; its signals blocked, so that none meant for the process lands there. */
static int start_helper(void *(*fn)(void *), check_t *c) {
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc != 0) return rc;
  if ((rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED)) != 0) goto out;
  sigset_t all, old;
  sigfillset(&all);
  if ((rc = pthread_sigmask(SIG_SETMASK, &all, &old)) != 0) goto out;
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  pthread_t t;
  rc = pthread_create(&t, &attr, fn, c);
  if (rc != 0) __atomic_sub_fetch(&c->refs, 1, __ATOMIC_RELAXED); /* never started: the caller still holds one */
  int rc2 = pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc2 != 0) lp__fatal("pthread_sigmask", rc2); /* restoring a mask just read cannot fail */
out:;
  int rc3 = pthread_attr_destroy(&attr);
  if (rc3 != 0) lp__fatal("pthread_attr_destroy", rc3); /* an attribute object we initialised */
  return rc;
}

static check_t *check_new(const check_opts_t *o, char *err, size_t errlen) {
  check_t *c = lp__calloc(1, sizeof *c);
  if (!c) goto nomem;
  c->refs = 1;
  c->rate_ppm = o->rate_ppm;
  if (o->cpus) {
    c->ncpu = o->ncpus;
    if (!(c->cpu = lp__malloc(o->ncpus * sizeof *c->cpu))) goto nomem;
    memcpy(c->cpu, o->cpus, o->ncpus * sizeof *c->cpu);
    if (o->skew) {
      if (!(c->skew = lp__malloc(o->ncpus * sizeof *c->skew))) goto nomem;
      memcpy(c->skew, o->skew, o->ncpus * sizeof *c->skew);
    }
  } else {
    int rc = allowed_cpus(&c->cpu, &c->ncpu);
    if (rc != 0) {
      snprintf(err, errlen, "verification failed: cannot read the CPU affinity: %s", strerror(-rc));
      free(c);
      return NULL;
    }
  }
  return c;
nomem:
  snprintf(err, errlen, "verification failed: out of memory");
  if (c) {
    free(c->cpu);
    free(c->skew);
    free(c);
  }
  return NULL;
}

/*
 * Waits for B's results until `until`; true if they are final. It polls
 * rather than waits on anything a helper holds: a helper preempted while
 * holding a mutex (it is pinned to a CPU that may be busy) would hold the
 * caller up for as long as it stays off that CPU.
 */
static bool wait_done(check_t *c, uint64_t until) {
  for (;;) {
    if (__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) return true;
    uint64_t now = lp__mono_ns();
    if (now >= until) return false;
    sleep_until(now + CHECK_POLL_NS < until ? now + CHECK_POLL_NS : until);
  }
}

/*
 * The check: fills r with the verdict, its text for the reason, the time it
 * took and the rate it measured. Anything that keeps it from running (no
 * memory, no threads) is a verdict too: not verified.
 */
static void run_check(const check_opts_t *o, check_result_t *r) {
  uint64_t budget = o->budget_ns ? o->budget_ns : CHECK_BUDGET_NS;
  uint64_t t0 = lp__mono_ns();
  memset(r, 0, sizeof *r);
  check_t *c = check_new(o, r->text, sizeof r->text);
  if (!c) {
    r->ns = lp__mono_ns() - t0;
    return;
  }
  /* The plan: the pairs share what the budget leaves, up to PAIR_MAX_NS each; the rate needs two halves. */
  size_t pairs = c->ncpu > 1 ? c->ncpu - 1 : 0;
  uint64_t avail = budget > 2 * CHECK_RESERVE_NS ? budget - CHECK_RESERVE_NS : budget / 2;
  uint64_t cross = 0;
  if (pairs) {
    c->slice_ns = avail / pairs < PAIR_MAX_NS ? avail / pairs : PAIR_MAX_NS;
    cross = c->slice_ns * pairs;
  }
  c->hard_end = t0 + avail;
  uint64_t span = o->rate_ns ? o->rate_ns : cross > 2 * RATE_HALF_NS ? cross : 2 * RATE_HALF_NS;
  if (span > avail) span = avail;

  uint64_t u0, u1, u2;
  lp__sync_t p0 = check_bracket(c, &u0);
  int rc = 0;
  bool done = true;
  if (pairs) {
    if ((rc = start_helper(helper_a, c)) == 0 && (rc = start_helper(helper_b, c)) != 0)
      __atomic_store_n(&c->quit, 1, __ATOMIC_RELEASE); /* A alone: let it go */
  }
  sleep_until(t0 + span / 2);
  lp__sync_t p1 = check_bracket(c, &u1);
  __atomic_store_n(&c->pivot, p1.ticks, __ATOMIC_RELAXED);
  if (pairs && rc == 0) done = wait_done(c, t0 + budget - CHECK_MARGIN_NS);
  __atomic_store_n(&c->quit, 1, __ATOMIC_RELEASE);
  /* A warp decides even when the pairing did not finish; read it under the helpers' lock, briefly. */
  uint64_t max_warp = 0;
  int behind = -1, ahead = -1;
  if (pairs && rc == 0 && spin_lock(c, lp__mono_ns() + 100000)) {
    max_warp = c->max_warp;
    behind = c->behind;
    ahead = c->ahead;
    spin_unlock(c);
  }
  sleep_until(t0 + span);
  lp__sync_t p2 = check_bracket(c, &u2);

  /* The rate over each half, in ticks per ns. */
  double d1t = (double)(int64_t)(p1.ticks - p0.ticks), d1n = (double)(p1.ns - p0.ns);
  double d2t = (double)(int64_t)(p2.ticks - p1.ticks), d2n = (double)(p2.ns - p1.ns);
  double r1 = d1n > 0 ? d1t / d1n : 0, r2 = d2n > 0 ? d2t / d2n : 0;
  double ppm = r1 > 0 && r2 > 0 ? (r2 / r1 - 1) * 1e6 : 0;
  if (ppm < 0) ppm = -ppm;
  /*
   * What the brackets leave uncertain: each half's rate is off by its two
   * points' uncertainty over its length. A change only fails the check when
   * it exceeds 100 ppm by more than that (some ppm on hardware; far more
   * under an emulator, whose counter moves in steps of many microseconds).
   */
  double unsure = 1e300;
  if (d1t > 0 && d2t > 0 && u0 != UINT64_MAX && u1 != UINT64_MAX && u2 != UINT64_MAX)
    unsure = ((double)(u0 + u1) / d1t + (double)(u1 + u2) / d2t) * 1e6;
  r->ticks_per_ns = r1 > 0 && unsure <= RATE_UNMEASURABLE_PPM ? r1 : 0; /* a rate for the map, if it is one */

  /* CPUs whose counters were compared: the first and each one paired with it (none if A found no CPU). */
  bool anchored = done && pairs && __atomic_load_n(&c->a_state, __ATOMIC_ACQUIRE) > 0;
  unsigned checked = !pairs ? 1 : anchored ? 1 + c->paired : 0;
  char amount[32];
  if (rc != 0) {
    snprintf(r->text, sizeof r->text, "verification failed: cannot start a thread: %s", strerror(rc));
  } else if (max_warp > 0) {
    if (r1 > 0)
      fmt_duration(amount, sizeof amount, (double)max_warp / r1);
    else
      snprintf(amount, sizeof amount, "%llu ticks", (unsigned long long)max_warp);
    snprintf(r->text, sizeof r->text, "verification failed: CPU %d read %s behind CPU %d", behind, amount, ahead);
  } else if (!done) {
    fmt_duration(amount, sizeof amount, (double)budget);
    snprintf(r->text, sizeof r->text, "verification incomplete: the CPUs could not all be paired within %s",
             amount);
  } else if (c->incomplete) {
    fmt_duration(amount, sizeof amount, (double)c->weak_ns);
    if (c->weak_ns)
      snprintf(r->text, sizeof r->text,
               "verification incomplete: %llu exchanges between CPU %d and CPU %d in %s (%u needed)",
               (unsigned long long)c->weak_exchanges, c->cpu[c->a_slot], c->weak_cpu, amount, PAIR_MIN_EXCHANGES);
    else if (c->weak_cpu >= 0 && anchored)
      snprintf(r->text, sizeof r->text, "verification incomplete: no time left to pair CPU %d with CPU %d",
               c->cpu[c->a_slot], c->weak_cpu);
    else
      snprintf(r->text, sizeof r->text, "verification incomplete: its threads did not get to run in time");
  } else if (r1 <= 0 || r2 <= 0) {
    snprintf(r->text, sizeof r->text, "verification failed: the counter did not advance");
  } else if (unsure > RATE_UNMEASURABLE_PPM) {
    if (unsure < 1e9)
      snprintf(r->text, sizeof r->text, "verification failed: its rate could not be measured (only to %.0f ppm)",
               unsure);
    else
      snprintf(r->text, sizeof r->text, "verification failed: its rate could not be measured (it did not advance)");
  } else if (ppm > RATE_MAX_PPM + unsure) {
    snprintf(r->text, sizeof r->text,
             "verification failed: its rate against CLOCK_MONOTONIC changed by %.0f ppm during the check", ppm);
  } else {
    r->pass = true;
    unsigned ippm = ppm < 1 ? 1 : (unsigned)(ppm + 0.999);
    char skipped[96] = "";
    if (c->unpinned)
      snprintf(skipped, sizeof skipped, " (CPU %d%s cannot be pinned: %s)", c->unpin_cpu,
               c->unpinned > 1 ? " and others" : "", strerror(c->unpin_err));
    if (checked == 0)
      snprintf(r->text, sizeof r->text, "verified: rate within %u ppm; no CPU could be pinned%s", ippm, skipped);
    else
      snprintf(r->text, sizeof r->text, "verified: %u%s CPU%s%s, %srate within %u ppm", checked,
               c->unpinned ? " of the" : "", checked > 1 || c->unpinned ? "s" : "", skipped,
               checked > 1 ? "max skew 0 ns, " : "", ippm);
  }
  check_unref(c);
  r->ns = lp__mono_ns() - t0;
}

/* ---- deciding ------------------------------------------------------------------- */

/* The kernel's current clocksource is our counter: it watches it and stops using it when it misbehaves. */
static bool kernel_uses_counter(void) {
  char buf[64] = "";
  FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
  if (!f) return false;
  bool ok = fgets(buf, sizeof buf, f) != NULL && strcmp(buf, COUNTER_CLOCKSOURCE "\n") == 0;
  (void)fclose(f); /* read only: nothing is lost if closing fails */
  return ok;
}

/* Is the counter sound? Writes why to buf; may run the check. */
static bool counter_sound(char *buf, size_t len) {
  if (!counter_invariant()) {
    snprintf(buf, len, "%s", not_invariant);
    return false;
  }
  if (kernel_uses_counter()) {
    snprintf(buf, len, "the kernel's clocksource");
    return true;
  }
  check_opts_t o = {0};
  check_result_t r;
  run_check(&o, &r);
  check_took = r.ns;
  check_rate = r.ticks_per_ns;
  snprintf(buf, len, "%s", r.text);
  return r.pass;
}
#endif

static void decide(void) {
  int env = __atomic_load_n(&env_clock, __ATOMIC_RELAXED);
  int want = env != LP_CLOCK_AUTO ? env : __atomic_load_n(&first_want, __ATOMIC_RELAXED);
  if (want != LP_CLOCK_TSC && want != LP_CLOCK_MONOTONIC) want = LP_CLOCK_AUTO;
  const char *forced = env != LP_CLOCK_AUTO ? (want == LP_CLOCK_TSC ? "LABELPROF_CLOCK=tsc" : "LABELPROF_CLOCK=monotonic")
                                            : (want == LP_CLOCK_TSC ? "LP_CLOCK_TSC" : "LP_CLOCK_MONOTONIC");
  bool use = false;
  if (want == LP_CLOCK_MONOTONIC) {
    snprintf(reason, sizeof reason, "clock_gettime (%s)", forced);
  } else {
#if HAVE_COUNTER
    char why[200];
    bool sound = counter_sound(why, sizeof why);
    if (want == LP_CLOCK_AUTO) {
      use = sound;
      snprintf(reason, sizeof reason, "%s (%s)", sound ? COUNTER_NAME : "clock_gettime", why);
    } else {
      use = true;
      snprintf(reason, sizeof reason, "%s (%s%s%s)", COUNTER_NAME, forced, sound ? "; " : ", although ", why);
      if (!sound)
        lp__warn("%s: stamping events with the %s although %s; exported times may be wrong", forced, COUNTER_NAME, why);
    }
#else
    snprintf(reason, sizeof reason, "clock_gettime (no cycle counter on this architecture)");
    if (want == LP_CLOCK_TSC)
      lp__warn("%s: no cycle counter on this architecture; using clock_gettime", forced);
#endif
  }
  use_counter = use;
  if (use) {
    origin.ticks = counter_fenced();
    origin.ns = lp__mono_ns();
  }
  /* The inline flag first: whoever sees the choice made also stamps with it from the first event. */
  LP_IMPL_STORE_RELEASE(lp_impl_clock_counter, (int)use);
  __atomic_store_n(&decided, 1, __ATOMIC_RELEASE);
}

void lp__clock_choose(lp_clock_t want) {
  if (__atomic_load_n(&decided, __ATOMIC_ACQUIRE)) return;
  /* The first caller's wish is the one that counts, whichever thread runs the once-routine. */
  int none = -1;
  __atomic_compare_exchange_n(&first_want, &none, (int)want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  int rc = pthread_once(&once, decide);
  if (rc != 0) lp__fatal("pthread_once", rc);
}

bool lp__clock_is_counter(void) {
  lp__clock_choose(LP_CLOCK_AUTO);
  return use_counter;
}

const char *lp__clock_name(void) { return lp__clock_is_counter() ? COUNTER_NAME : "clock_gettime"; }

const char *lp__clock_reason(void) {
  lp__clock_choose(LP_CLOCK_AUTO);
  return reason;
}

uint64_t lp__clock_check_ns(void) {
  lp__clock_choose(LP_CLOCK_AUTO);
  return check_took;
}

uint64_t lp_impl_ticks_slow(void) {
  /* Reached when the inline flag reads 0: the clock_gettime fallback, or a test's forced jump. */
  return lp__clock_is_counter() ? counter_now() : lp__mono_ns();
}

uint64_t lp_now_ns(void) { return lp__mono_ns(); }

/*
 * A sync point is a bracket: CLOCK_MONOTONIC read between two readings of
 * the counter, the point at its middle, so half its width is the point's
 * error. Two points' errors must stay well inside JUMP_NOISE_NS, or a
 * preemption inside a bracket reads as a jump of the counter. The tightest
 * of three brackets is kept; while it is wider than SYNC_WIDE_NS, or twice
 * the narrowest this process has taken (a machine or a sanitizer where
 * clock_gettime is slow), more are taken, up to SYNC_TRIES in all: on a
 * loaded machine all three may have been preempted.
 */
#define SYNC_WIDE_NS 500.0
#define SYNC_TRIES 24
static uint64_t sync_narrowest = UINT64_MAX; /* __atomic: ticks */
static unsigned sync_widen;                  /* __atomic: test hook: tries to make wide */
static unsigned sync_tries;                  /* __atomic: test hook: tries the last sync took */

/*
 * The counter's rate in ticks per ns as stated: the architecture's (a rate
 * measured over the check's few ms can be off by more), or the check's; 0
 * if neither is known.
 */
static double stated_rate(void) {
#if defined(__aarch64__)
  uint64_t f;
  __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(f));
  if (f) return (double)f / 1e9;
#endif
  return check_rate > 0 ? check_rate : 0;
}

/*
 * Ticks per ns, without taking a sync point: the stated rate, or (a counter
 * chosen without the check) the process's since the choice, once a
 * millisecond has passed; 0 if unknown. A rough rate is enough to tell a
 * bracket a few hundred ns wide from one of microseconds.
 */
static double sync_rate(void) {
  double r = stated_rate();
  if (r > 0) return r;
  uint64_t ns = lp__mono_ns(), ticks = counter_fenced();
  if (origin.ns && ns - origin.ns >= 1000000 && ticks > origin.ticks)
    return (double)(ticks - origin.ticks) / (double)(ns - origin.ns);
  return 0;
}

lp__sync_t lp__clock_sync(void) {
  if (!lp__clock_is_counter()) {
    uint64_t ns = lp__mono_ns();
    return (lp__sync_t){ns, ns};
  }
  int64_t off = __atomic_load_n(&jump_offset, __ATOMIC_RELAXED);
  double rate = sync_rate();
  uint64_t narrowest = __atomic_load_n(&sync_narrowest, __ATOMIC_RELAXED);
  uint64_t wide = rate > 0 ? (uint64_t)(rate * SYNC_WIDE_NS) : UINT64_MAX; /* no rate known: three tries */
  if (wide != UINT64_MAX && narrowest != UINT64_MAX && narrowest <= UINT64_MAX / 2 && wide < 2 * narrowest)
    wide = 2 * narrowest;
  lp__sync_t best = {0, 0};
  uint64_t width = UINT64_MAX;
  int i = 0;
  for (; i < SYNC_TRIES && (i < 3 || width > wide); i++) {
    uint64_t t0 = counter_fenced();
    if (__atomic_load_n(&sync_widen, __ATOMIC_RELAXED) && rate > 0) {
      __atomic_sub_fetch(&sync_widen, 1, __ATOMIC_RELAXED);
      while (counter_fenced() - t0 < (uint64_t)(rate * 10000.0)) continue; /* as a preemption of 10 us would */
    }
    uint64_t ns = lp__mono_ns(), t1 = counter_fenced();
    if (t1 >= t0 && t1 - t0 < width) {
      width = t1 - t0;
      best = (lp__sync_t){t0 + (t1 - t0) / 2 + (uint64_t)off, ns};
    }
  }
  if (width < narrowest) __atomic_store_n(&sync_narrowest, width, __ATOMIC_RELAXED);
  __atomic_store_n(&sync_tries, (unsigned)i, __ATOMIC_RELAXED);
  return best;
}

/* ---- test hooks ----------------------------------------------------------------- */

int lp__clock_test_check(const lp__clock_test_check_t *t, char *verdict, size_t len, uint64_t *took_ns) {
#if HAVE_COUNTER
  check_opts_t o = {0};
  if (t) {
    o.cpus = t->cpus;
    o.ncpus = t->cpus ? t->ncpus : 0;
    o.skew = t->skew;
    o.rate_ppm = t->rate_ppm;
    o.budget_ns = t->budget_ns;
    o.rate_ns = t->rate_ns;
  }
  if (o.cpus && o.ncpus == 0) return -EINVAL;
  if (o.skew && !o.cpus) return -EINVAL; /* a skew is given per listed CPU */
  check_result_t r;
  run_check(&o, &r);
  if (verdict && len) snprintf(verdict, len, "%s", r.text);
  if (took_ns) *took_ns = r.ns;
  return r.pass ? 1 : 0;
#else
  (void)t;
  if (verdict && len) snprintf(verdict, len, "no cycle counter on this architecture");
  if (took_ns) *took_ns = 0;
  return -ENOTSUP;
#endif
}

unsigned lp__clock_test_sync(unsigned widen) {
  unsigned last = __atomic_load_n(&sync_tries, __ATOMIC_RELAXED);
  __atomic_store_n(&sync_widen, widen, __ATOMIC_RELAXED);
  return last;
}

int lp__clock_test_jump(int64_t ticks) {
  if (!lp__clock_is_counter()) return -EINVAL;
  int64_t total = __atomic_add_fetch(&jump_offset, ticks, __ATOMIC_RELAXED);
  /* While an offset is in force every reading must come here, where it is added. */
  LP_IMPL_STORE_RELEASE(lp_impl_clock_counter, total == 0);
  return 0;
}

/* ---- ticks to nanoseconds ------------------------------------------------------- */

/*
 * When is a sync point a jump? Between two neighbouring points (by ns) the
 * counter must advance by the fitted rate times the elapsed ns, within:
 *   JUMP_PPM of the elapsed time: CLOCK_MONOTONIC is slewed by NTP at no more
 *     than 500 ppm, so its rate against the counter can wander that much
 *     from the session's average; 100 ppm more covers the fitted rate's own
 *     error and what the check allowed the counter's rate to wander;
 *   JUMP_NOISE_NS: each point is a bracket a few tens of ns wide, two points
 *     may come from CPUs whose counters differ by less than the check can
 *     see (an exchange's latency, some hundreds of ns), and a point taken
 *     while the hypervisor was stealing the CPU can be a little off.
 * A smaller step is not told from slewing; it simply bends one segment of
 * the map, by less than the allowance.
 */
#define JUMP_PPM 600.0
#define JUMP_NOISE_NS 2000.0

/* 32 bytes: what mapping one tick reads, two to a cache line. */
typedef struct tm_point {
  uint64_t ticks, ns;
  /* ns per tick from here on (integer and 64-bit fraction): to the next point of the epoch, or the fitted rate. */
  uint64_t whole, frac;
} tm_point_t;

typedef struct tm_epoch {
  size_t lo, hi;     /* its points, inclusive */
  uint64_t start_ns; /* anchors from here on (to the next epoch's start) belong to it */
  uint64_t limit_ns; /* the next epoch's start_ns; UINT64_MAX for the last */
} tm_epoch_t;

struct lp__timemap {
  bool identity;
  tm_point_t *pt;
  uint32_t *pt_epoch; /* the epoch of each point */
  size_t n;
  tm_epoch_t *ep;
  size_t nep;
  size_t jumps;
  char text[200];
};

static int sync_cmp(const void *a, const void *b) {
  const lp__sync_t *x = a, *y = b;
  if (x->ns != y->ns) return x->ns < y->ns ? -1 : 1;
  return x->ticks < y->ticks ? -1 : x->ticks > y->ticks;
}

static int dbl_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double dabs(double x) { return x < 0 ? -x : x; }

/* Signed tick step from a to b, and the ns that passed (b.ns >= a.ns). */
static double step_ticks(const lp__sync_t *a, const lp__sync_t *b) { return (double)(int64_t)(b->ticks - a->ticks); }
static double step_ns(const lp__sync_t *a, const lp__sync_t *b) { return (double)(b->ns - a->ns); }

/* How far the counter's step from a to b is off the rate, in ns (positive: it ran ahead). */
static double deviation(const lp__sync_t *a, const lp__sync_t *b, double rate) {
  return step_ticks(a, b) / rate - step_ns(a, b);
}

static bool is_jump(const lp__sync_t *a, const lp__sync_t *b, double rate) {
  return dabs(deviation(a, b, rate)) > JUMP_PPM * 1e-6 * step_ns(a, b) + JUMP_NOISE_NS;
}

/* The counter's rate: ticks per ns, and when it came from whole sums, those sums (for an exact slope). */
typedef struct tm_rate {
  double r;
  uint64_t ticks, ns; /* 0 when r has no exact form */
} tm_rate_t;

/* A segment's rate (ticks per ns) and its weight, the ns it spans. */
typedef struct tm_seg {
  double rate, ns;
} tm_seg_t;

static int seg_cmp(const void *a, const void *b) { return dbl_cmp(&((const tm_seg_t *)a)->rate, &((const tm_seg_t *)b)->rate); }

/* The rate that half the segments' time lies at or below (k > 0, total > 0); sorts seg by rate. */
static double weighted_median(tm_seg_t *seg, size_t k, double total) {
  qsort(seg, k, sizeof *seg, seg_cmp);
  double acc = 0;
  for (size_t i = 0; i < k; i++) {
    acc += seg[i].ns;
    if (acc * 2 >= total) return seg[i].rate;
  }
  return seg[k - 1].rate;
}

/*
 * The counter's rate from the points themselves (sorted by ns), robust to
 * jumps. A first guess is the median of the segments' rates weighted by the
 * time each spans: a session's points come in bursts (a chunk started a
 * microsecond after another), and the rate of such a short segment is off
 * by a percent from the bracket's width alone, so counting segments instead
 * of time lets a handful of them outvote the one that spans the session,
 * and that one then looks like a jump. The guess is good enough to set
 * aside the segments that hold a jump; the rate is then the sum of the
 * remaining segments' ticks over their ns, a baseline as long as the
 * session. r is 0 when no segment moves forward.
 */
static tm_rate_t fit_rate(const lp__sync_t *p, size_t n, tm_seg_t *seg) {
  tm_rate_t out = {0, 0, 0};
  size_t k = 0;
  double total = 0;
  for (size_t i = 1; i < n; i++)
    if (p[i].ns > p[i - 1].ns && p[i].ticks > p[i - 1].ticks) {
      seg[k] = (tm_seg_t){step_ticks(&p[i - 1], &p[i]) / step_ns(&p[i - 1], &p[i]), step_ns(&p[i - 1], &p[i])};
      total += seg[k++].ns;
    }
  if (k == 0) return out;
  double med = weighted_median(seg, k, total);
  for (size_t i = 0; i < k; i++) seg[i].rate = dabs(seg[i].rate - med);
  /* The spread, weighted the same way, widens this first pass where the segments are noisy. */
  double loose = JUMP_PPM * 1e-6 + 3 * weighted_median(seg, k, total) / med;
  __int128 st = 0, sn = 0;
  for (size_t i = 1; i < n; i++) {
    if (dabs(deviation(&p[i - 1], &p[i], med)) <= loose * step_ns(&p[i - 1], &p[i]) + JUMP_NOISE_NS) {
      st += (int64_t)(p[i].ticks - p[i - 1].ticks);
      sn += p[i].ns - p[i - 1].ns;
    }
  }
  out.r = med;
  if (st > 0 && sn > 0 && st <= (__int128)UINT64_MAX && sn <= (__int128)UINT64_MAX) {
    out.ticks = (uint64_t)st;
    out.ns = (uint64_t)sn;
    out.r = (double)out.ticks / (double)out.ns;
  }
  return out;
}

/* What to use when the points give no rate: the stated rate, or the process's so far. */
static double nominal_rate(void) {
  double r = stated_rate();
  if (r > 0) return r;
  lp__sync_t now = lp__clock_sync();
  if (now.ns > origin.ns && now.ticks > origin.ticks) return step_ticks(&origin, &now) / step_ns(&origin, &now);
  return 1.0;
}

/*
 * ns per tick as integer and 64-bit fraction, from dn ns over dt ticks (dt >
 * 0). The fraction is rounded up, so that a whole number of ns comes out
 * whole (a third of 3 ticks is 1, not 0.999...) and the far end of a segment
 * is reached exactly, never passed.
 */
static void slope_exact(tm_point_t *p, uint64_t dn, uint64_t dt) {
  p->whole = dn / dt;
  p->frac = (uint64_t)((((unsigned __int128)(dn % dt) << 64) + dt - 1) / dt);
}

static void slope_rate(tm_point_t *p, double ticks_per_ns) {
  double x = 1.0 / ticks_per_ns;
  p->whole = (uint64_t)x;
  p->frac = (uint64_t)((x - (double)p->whole) * 18446744073709551616.0);
}

static inline uint64_t eval(const tm_point_t *a, uint64_t ticks) {
  if (ticks >= a->ticks) {
    uint64_t d = ticks - a->ticks;
    return a->ns + d * a->whole + (uint64_t)(((unsigned __int128)d * a->frac) >> 64);
  }
  uint64_t d = a->ticks - ticks;
  uint64_t off = d * a->whole + (uint64_t)(((unsigned __int128)d * a->frac) >> 64);
  return off < a->ns ? a->ns - off : 0;
}

/*
 * The first ticks in [lo, hi) that the line from a (at or before lo) puts
 * at or past limit, hi if none. The line never goes down; here its values
 * saturate rather than wrap, so the search is sound over any range.
 */
static uint64_t first_reaching(const tm_point_t *a, uint64_t lo, uint64_t hi, uint64_t limit) {
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2, d = mid - a->ticks;
    unsigned __int128 v = (unsigned __int128)d * a->whole + (((unsigned __int128)d * a->frac) >> 64) + a->ns;
    if (v >= limit)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* Tests: maps read their points as a counter's, with this name (NULL: as the clock chosen says). */
static const char *test_counter_name;

void lp__timemap_test_counter(const char *name) { test_counter_name = name; }

static void describe_jump(lp__timemap_t *m, const lp__sync_t *a, const lp__sync_t *b, double dev) {
  char amount[32];
  fmt_duration(amount, sizeof amount, dev);
  snprintf(m->text, sizeof m->text,
           "the %s jumped %s by %s against CLOCK_MONOTONIC between ts %llu.%03llu and %llu.%03llu (us)",
           test_counter_name ? test_counter_name : COUNTER_NAME,
           dev > 0 ? "forward" : "backward", amount, (unsigned long long)(a->ns / 1000),
           (unsigned long long)(a->ns % 1000), (unsigned long long)(b->ns / 1000), (unsigned long long)(b->ns % 1000));
}

static void timemap_release(lp__timemap_t *m) {
  free(m->pt);
  free(m->pt_epoch);
  free(m->ep);
  m->pt = NULL;
  m->pt_epoch = NULL;
  m->ep = NULL;
}

static int timemap_init(lp__timemap_t *m, lp__sync_t *pts, size_t n) {
  memset(m, 0, sizeof *m);
  m->identity = !test_counter_name && !lp__clock_is_counter();
  if (m->identity || n == 0) return 0;
  /* By ns: a counter that stepped back must not interleave the points of its two epochs. */
  qsort(pts, n, sizeof *pts, sync_cmp);
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (u == 0 || pts[i].ns != pts[u - 1].ns || pts[i].ticks != pts[u - 1].ticks) pts[u++] = pts[i];
  n = u;
  tm_seg_t *scratch = lp__malloc(n * sizeof *scratch);
  m->pt = lp__malloc(n * sizeof *m->pt);
  m->pt_epoch = lp__malloc(n * sizeof *m->pt_epoch);
  m->ep = lp__malloc(n * sizeof *m->ep);
  if (!scratch || !m->pt || !m->pt_epoch || !m->ep) {
    free(scratch);
    timemap_release(m);
    return -ENOMEM;
  }
  tm_rate_t fit = fit_rate(pts, n, scratch);
  free(scratch);
  double rate = fit.r > 0 ? fit.r : nominal_rate();

  /* Epochs: a new one wherever a point is off its predecessor by more than the tolerance. */
  double worst = 0;
  size_t worst_at = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    bool jump = i > 0 && is_jump(&pts[i - 1], &pts[i], rate);
    if (i == 0 || jump) {
      if (jump) {
        m->jumps++;
        double dev = deviation(&pts[i - 1], &pts[i], rate);
        if (dabs(dev) > dabs(worst)) {
          worst = dev;
          worst_at = i;
        }
        m->ep[m->nep - 1].limit_ns = pts[i].ns;
      }
      m->ep[m->nep++] = (tm_epoch_t){k, k, pts[i].ns, UINT64_MAX};
    } else if (pts[i].ticks <= m->pt[k - 1].ticks || pts[i].ns <= m->pt[k - 1].ns) {
      continue; /* within an epoch keep a strictly increasing chain: the map can never go backwards */
    }
    m->pt[k] = (tm_point_t){pts[i].ticks, pts[i].ns, 0, 0};
    m->pt_epoch[k] = (uint32_t)(m->nep - 1);
    m->ep[m->nep - 1].hi = k++;
  }
  m->n = k;
  /* Each segment's slope once, so that mapping a tick is two multiplications and no division. */
  for (size_t e = 0; e < m->nep; e++) {
    for (size_t i = m->ep[e].lo; i < m->ep[e].hi; i++)
      slope_exact(&m->pt[i], m->pt[i + 1].ns - m->pt[i].ns, m->pt[i + 1].ticks - m->pt[i].ticks);
    /* Past its last point: the fitted rate. */
    if (fit.ticks)
      slope_exact(&m->pt[m->ep[e].hi], fit.ns, fit.ticks);
    else
      slope_rate(&m->pt[m->ep[e].hi], rate);
  }
  if (m->jumps) describe_jump(m, &pts[worst_at - 1], &pts[worst_at], worst);
  return 0;
}

lp__timemap_t *lp__timemap_new(lp__sync_t *pts, size_t n) {
  lp__timemap_t *m = lp__malloc(sizeof *m);
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

size_t lp__timemap_jumps(const lp__timemap_t *m) { return m->jumps; }

const char *lp__timemap_jump_text(const lp__timemap_t *m) { return m->jumps ? m->text : NULL; }

/* The epoch an anchor belongs to: the last one that starts at or before it. */
static const tm_epoch_t *epoch_of(const lp__timemap_t *m, uint64_t ns) {
  size_t lo = 0, hi = m->nep;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->ep[mid].start_ns <= ns)
      lo = mid;
    else
      hi = mid;
  }
  return &m->ep[lo];
}

/* The point of epoch e whose segment holds ticks: the last one at or before it, else the first. */
static size_t point_of(const lp__timemap_t *m, const tm_epoch_t *e, uint64_t ticks) {
  size_t lo = e->lo, hi = e->hi + 1;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->pt[mid].ticks <= ticks)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/*
 * Past the next epoch's start: only events read after a forward jump get
 * here (before it, the epoch's own line stays below that start). The next
 * epoch's line gives their exact time once it is past its own start; in
 * between the time is held at that start. min(own, max(start, next)) keeps
 * the mapping monotonic in ticks, and a backward jump leaves it as it was.
 */
__attribute__((noinline)) static uint64_t past_epoch(const lp__timemap_t *m, const tm_epoch_t *e, uint64_t ticks, uint64_t own) {
  const tm_epoch_t *next = e + 1;
  uint64_t there = eval(&m->pt[point_of(m, next, ticks)], ticks);
  uint64_t held = there > e->limit_ns ? there : e->limit_ns;
  return own < held ? own : held;
}

/* A lane's first event, or its first in another epoch: find the anchor's epoch, and the point there. */
__attribute__((noinline)) static uint64_t map_searching(const lp__timemap_t *m, uint64_t ticks, lp__sync_t anchor,
                                                        size_t *cursor) {
  if (m->n == 0) return 0; /* a session always has a start and an export point */
  const tm_epoch_t *e = epoch_of(m, anchor.ns);
  size_t i = point_of(m, e, ticks);
  *cursor = i + 1;
  uint64_t ns = eval(&m->pt[i], ticks);
  return ns >= e->limit_ns ? past_epoch(m, e, ticks, ns) : ns;
}

uint64_t lp__timemap_ns(const lp__timemap_t *m, uint64_t ticks, lp__sync_t anchor, size_t *cursor) {
  return lp__timemap_ns_seg(m, ticks, anchor, cursor, NULL);
}

uint64_t lp__timemap_ns_seg(const lp__timemap_t *m, uint64_t ticks, lp__sync_t anchor, size_t *cursor,
                            lp__timeseg_t *seg) {
  if (seg) *seg = LP__TIMESEG_NONE; /* empty until a line is found */
  if (m->identity) {
    if (seg) *seg = (lp__timeseg_t){0, UINT64_MAX, 0, 0, 1, 0};
    return ticks;
  }
  /* No event of a chunk is read before the chunk's own sync point. */
  if (ticks < anchor.ticks) ticks = anchor.ticks;
  /*
   * The cursor is the lane's last point + 1 (0: none yet). It stays valid
   * while the anchor stays in its epoch, which is always the case without
   * jumps, and the common path is then a short walk and one evaluation.
   */
  size_t i = *cursor - 1;
  if (i >= m->n) return map_searching(m, ticks, anchor, cursor);
  const tm_epoch_t *e = m->ep;
  if (m->nep > 1) {
    e = &m->ep[m->pt_epoch[i]];
    if (anchor.ns < e->start_ns || anchor.ns >= e->limit_ns) return map_searching(m, ticks, anchor, cursor);
  }
  /* Events of a lane come in order, so the segment moves forward a step at a time. */
  while (i < e->hi && ticks >= m->pt[i + 1].ticks) i++;
  while (i > e->lo && ticks < m->pt[i].ticks) i--;
  *cursor = i + 1;
  const tm_point_t *p = &m->pt[i];
  uint64_t ns = eval(p, ticks);
  if (__builtin_expect(ns >= e->limit_ns, 0)) return past_epoch(m, e, ticks, ns);
  if (seg) {
    /* Later ticks of the chunk in this segment, at or after both its point and the anchor, take the same line. */
    uint64_t lo = p->ticks > anchor.ticks ? p->ticks : anchor.ticks;
    uint64_t hi = i < e->hi ? m->pt[i + 1].ticks : UINT64_MAX;
    if (e->limit_ns != UINT64_MAX) hi = first_reaching(p, lo, hi, e->limit_ns);
    *seg = (lp__timeseg_t){lo, hi > lo ? hi - lo : 0, p->ticks, p->ns, p->whole, p->frac};
  }
  return ns;
}
