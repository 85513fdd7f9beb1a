/*
 * collector.c: profile sessions, the profiler thread and the sampling pass.
 *
 * One collector serves every session. The first session to start creates
 * the aggregation and a thread that wakes on absolute CLOCK_MONOTONIC
 * deadlines. Time is cut into periods of one tick from the first deadline
 * on, and each period gets one sample, at an instant drawn uniformly at
 * random within it (stratified sampling; "where ticks fall" below): a
 * workload whose period is a whole number of ticks cannot lock to the
 * collector, as it would to instants a fixed distance apart, and the rate
 * is still the one asked for (ticks never drift). A period that ends while
 * the thread is late is counted as missed, not made up. Each wakeup is one sampling pass:
 * under the registry lock, copy the list of threads (and pick up renames);
 * without it, snapshot each thread's stack and add the sample to the
 * aggregation at once. A session is a mark of the aggregation's counts at
 * its start; its profile is what was added since. The last session to stop
 * stops the thread and frees the aggregation.
 *
 * Threads that exit while the collector runs keep their records, so their
 * samples stay in the report. To keep memory bounded under thread churn, the
 * oldest exited records beyond LP__KEEP_EXITED are merged into one record
 * per thread name (digits folded, so that numbered pool threads share one),
 * and the merged nodes are reused.
 *
 * The wait is a futex wait on the stop word with an absolute CLOCK_MONOTONIC
 * timeout (FUTEX_WAIT_BITSET): the same absolute deadline and the same one
 * system call as clock_nanosleep, with nothing to take after it (no
 * condition variable, no mutex to reacquire), and stop can still wake the
 * thread at once instead of waiting out a tick that may be a second long.
 * Its timer slack is set to the minimum, so that the kernel does not defer
 * a wakeup by the default 50 µs, which at 1 kHz costs missed ticks.
 *
 * The sampling lock makes a pass atomic with respect to session starts and
 * stops and the test hook lp__profile_sample_now(); the hot path never takes
 * any lock.
 *
 * On a machine with more runnable threads than CPUs, a wakeup waits its turn
 * for a CPU, and with default scheduling the collector loses a share of its
 * ticks that depends on luck. So the thread asks, before its first tick,
 * for what the kernel grants without privilege: SCHED_OTHER with a 100 µs
 * slice (sched_setattr's sched_runtime, the EEVDF slice since Linux 6.12),
 * which has the scheduler pick it soon after it wakes; or SCHED_FIFO when
 * the program asks for it and may have it. sched_getattr tells what it got,
 * and the report says so.
 *
 * CPU time beside wall time: while some session asked for it
 * (LP_PROFILE_CPU), cpu.c has each thread sample its own stack on its own
 * CPU clock, and each pass drains what the threads recorded into the same
 * aggregation, as CPU nanoseconds on the nodes (and at stop and at a peek,
 * so that a profile holds every sample up to then). Sampling stays on until
 * the last session stops. Every 64 ticks the collector checks that the
 * handler is still labelprof's; if the program has put its own on the
 * signal, CPU sampling stops there, and the report says when.
 */
#include "internal.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LP__KEEP_EXITED 64  /* exited threads kept with records of their own */
#define LP__MAX_GROUPS 256  /* names exited threads are merged by; then one record for the rest */

static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;    /* sessions, the thread's life */
static pthread_mutex_t sample_mu = PTHREAD_MUTEX_INITIALIZER; /* everything below it */
/* 1 when stop is asked for: the collector's futex word. */
static _Atomic uint32_t stop_word;
static uint64_t stop_ns; /* when stop was asked for: written before stop_word, read after it */
/* 1 once the collector thread runs with its scheduling in place and has set start_ns. */
static _Atomic uint32_t ready_word;

static bool have_thread; /* ctl_mu */
static pthread_t collector;
static uint64_t collector_cpu_ns; /* written by the collector before it exits; read after join */

typedef struct psession {
  bool running;
  uint32_t requested_hz;
  uint64_t throttled; /* the cgroup's throttling count at the start */
  lp__mark_t mark;
} psession_t;

/* Under sample_mu. */
static bool live; /* the aggregation exists: some session runs */
static lp__agg_t agg;
static uint64_t run; /* collector runs so far: tells a thread's record of this run from a stale one */
static uint64_t tick_ns, start_ns;
static uint32_t hz;
/*
 * The tick plan (see "where ticks fall"): the index of the period the next
 * tick belongs to, the instant drawn for it, the block of LP__STRATA
 * periods it is in (its random offset, and the random order of the parts of
 * a period its periods draw from), and the generator (splitmix64: a 64-bit
 * state, one multiply-xorshift chain per draw). test_seed, when not 0,
 * seeds the next run instead of the clock.
 */
#define LP__STRATA 16u
static uint64_t origin_ns;
static uint64_t per_idx, at_ns, rng, block = UINT64_MAX, block_off;
static int cpu_sig; /* the signal of the CPU samples, while agg.cpu */
static uint8_t strata[LP__STRATA];
static uint64_t test_seed;
static bool threaded; /* the collector thread runs the plan; lp__profile_tick() may not */
/* How the collector runs (asked for at start, ctl_mu; what it got, sample_mu). */
static lp_sched_t sched_want;
static uint32_t prio_want;
static lp_sched_t sched_got;
static uint32_t prio_got, max_runnable, ncpus;
static uint64_t slice_got;
static psession_t sessions[LP__OWNERS];
static uint32_t oldest_exited = LP__NONE, newest_exited = LP__NONE, nexited;
typedef struct pick {
  lp__thread_t *t;
  uint32_t slot;
} pick_t;
static pick_t *picks;
static uint32_t cappicks;

/* futex(2) on a private word; every argument passed as the long syscall() reads. */
static long futex_call(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *abs, uint32_t val3) {
  return syscall(SYS_futex, (long)(uintptr_t)word, (long)(op | FUTEX_PRIVATE_FLAG), (long)val, (long)(uintptr_t)abs,
                 0L, (long)val3);
}

/* Waits until stop_word is no longer 0 or the absolute CLOCK_MONOTONIC time at, whichever comes first. */
static void wait_until(uint64_t at) {
  struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
  /* Without FUTEX_CLOCK_REALTIME, FUTEX_WAIT_BITSET's timeout is absolute on CLOCK_MONOTONIC. */
  long rc = futex_call(&stop_word, FUTEX_WAIT_BITSET, 0u, &ts, FUTEX_BITSET_MATCH_ANY);
  /* ETIMEDOUT: the deadline; EAGAIN: stop came first; EINTR: the caller looks again. */
  if (rc != 0 && errno != ETIMEDOUT && errno != EAGAIN && errno != EINTR) lp__fatal("futex wait", errno);
}

/* ---- where ticks fall ------------------------------------------------------------- */

static uint64_t rng_next(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A number drawn uniformly from [0, n). */
static uint64_t rng_below(uint64_t n) { return (uint64_t)(((unsigned __int128)rng_next() * n) >> 64); }

/*
 * Periods and their instants. Period j starts at origin + j ticks, plus the
 * offset of its block: each block of LP__STRATA periods is shifted by its
 * own random offset of up to one tick, so that periods do not sit on one
 * fixed grid either (blocks overlap or leave a gap of less than a tick;
 * the rate is the one asked for on average). A period's instant is drawn
 * uniformly within it: within one of its LP__STRATA parts, the block's
 * periods taking the parts in a random order. So 16 consecutive periods
 * see 16 different sixteenths of a period, and a workload whose period is
 * the tick's is seen at evenly spread phases rather than at independent
 * ones (in a simulation of 3 s at 1000 Hz with 50 us of wakeup jitter,
 * half the error on a 1 ms workload: 95th percentile 1.07 points, against
 * 1.90).
 *
 * A collector that is late reaches a period after it began, sometimes after
 * its instant: that period is sampled at once, and periods that ended
 * meanwhile are missed. Were the late period skipped, or kept only when its
 * instant is still ahead, the rate would fall or the instants would lean to
 * the later parts of periods; on one fixed grid that leaning is a leaning
 * to some phases of a workload whose period is the tick's (1.2 points off
 * in a simulation of a crowded machine). With the blocks' offsets the
 * periods' starts fall at every phase, and the same simulation stays within
 * 0.2 points while the rate is the fixed grid's. sample_mu held throughout.
 */
static uint64_t period_start(uint64_t j) {
  if (j / LP__STRATA != block) { /* a new block: its offset, and its parts in a random order (Fisher-Yates) */
    block = j / LP__STRATA;
    block_off = rng_below(tick_ns);
    for (uint32_t i = 0; i < LP__STRATA; i++) strata[i] = (uint8_t)i;
    for (uint32_t i = LP__STRATA - 1; i > 0; i--) {
      uint32_t k = (uint32_t)rng_below(i + 1);
      uint8_t x = strata[i];
      strata[i] = strata[k];
      strata[k] = x;
    }
  }
  return origin_ns + j * tick_ns + block_off;
}

static void plan_period(uint64_t j) {
  uint64_t p = period_start(j);
  per_idx = j;
  at_ns = p + (strata[j % LP__STRATA] * tick_ns + rng_below(tick_ns)) / LP__STRATA;
}

/* The first period's block starts at t0. */
static void plan_start(uint64_t t0) {
  rng = test_seed ? test_seed : t0 ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&rng;
  origin_ns = t0;
  block = UINT64_MAX;
  plan_period(0);
}

/*
 * From period j on, the first period that has not ended by now; *missed
 * counts those that had. Periods surely over (whatever their block's
 * offset) are skipped by arithmetic, not one by one.
 */
static uint64_t first_open(uint64_t j, uint64_t now, uint64_t *missed) {
  uint64_t nominal = now > origin_ns ? (now - origin_ns) / tick_ns : 0; /* period j ends by origin + (j + 2) ticks */
  if (nominal >= j + 2) {
    *missed += nominal - 1 - j;
    j = nominal - 1;
  }
  while (period_start(j) + tick_ns <= now) {
    ++*missed;
    j++;
  }
  return j;
}

/* After the pass of the current period, at now: the next period's instant, or now if it is late. */
static void plan_after_pass(uint64_t now) {
  uint64_t missed = 0;
  plan_period(first_open(per_idx + 1, now, &missed));
  if (at_ns < now) at_ns = now; /* reached after its instant: sampled at once */
  agg.missed += missed;
}

/* The instants at or before end that were not sampled (the collector stopped at end): missed ticks. */
static uint64_t plan_passed(uint64_t end) {
  if (at_ns > end) return 0;
  uint64_t missed = 1;
  uint64_t j = first_open(per_idx + 1, end, &missed);
  if (period_start(j) <= end) { /* end's own period: missed if its instant came first */
    plan_period(j);
    missed += at_ns <= end;
  }
  return missed;
}

/* ---- exited threads ------------------------------------------------------------ */

static void drain_one(lp__thread_t *t, uint32_t slot);

/* The name exited threads are merged by: runs of digits become "*". */
static void group_key(const char *name, char *key, size_t len) {
  size_t n = 0;
  for (const char *c = name; *c && n + 1 < len; c++) {
    if (*c >= '0' && *c <= '9') {
      if (n == 0 || key[n - 1] != '*') key[n++] = '*';
      continue;
    }
    key[n++] = *c;
  }
  key[n] = '\0';
}

/* The record exited threads named like `name` are merged into, made on first use; LP__NONE on ENOMEM. */
static uint32_t group_of(const char *name) {
  char key[LP__NAME_MAX];
  group_key(name, key, sizeof key);
  uint32_t groups = 0, rest = LP__NONE;
  for (uint32_t i = 0; i < agg.nthreads; i++) {
    const lp__agg_thread_t *t = &agg.threads[i];
    if (t->free || !t->group) continue;
    if (strcmp(t->name, key) == 0) return i;
    if (strcmp(t->name, "(other exited threads)") == 0) rest = i;
    groups++;
  }
  if (groups >= LP__MAX_GROUPS) {
    if (rest != LP__NONE) return rest;
    snprintf(key, sizeof key, "%s", "(other exited threads)");
  }
  int slot = lp__agg_add_thread(&agg, 0, key);
  if (slot < 0) return LP__NONE;
  agg.threads[slot].group = true; /* its count of merged threads goes up as they come in */
  return (uint32_t)slot;
}

static void marks_of_sessions(lp__mark_t **marks, size_t *n) {
  *n = 0;
  for (int o = 0; o < LP__OWNERS; o++)
    if (sessions[o].running) marks[(*n)++] = &sessions[o].mark;
}

/* Merges the oldest exited records while more than LP__KEEP_EXITED are kept. sample_mu held. */
static void merge_exited(void) {
  while (nexited > LP__KEEP_EXITED) {
    uint32_t from = oldest_exited;
    lp__agg_thread_t *t = &agg.threads[from];
    uint32_t to = group_of(t->name);
    lp__mark_t *marks[LP__OWNERS];
    size_t nmarks;
    marks_of_sessions(marks, &nmarks);
    uint32_t older = agg.threads[from].older;
    if (to == LP__NONE || lp__agg_merge(&agg, from, to, marks, nmarks) != 0) return; /* kept as it is */
    oldest_exited = older;
    if (oldest_exited == LP__NONE) newest_exited = LP__NONE;
    nexited--;
  }
}

/* The registry frees an exited thread: its record, if it has one in this run, is final now. */
static void thread_gone(lp__thread_t *t, void *arg) {
  (void)arg;
  if (t->prof_run != run) return;
  drain_one(t, t->prof_slot); /* its last CPU samples, before its state is freed */
  lp__agg_thread_t *rec = &agg.threads[t->prof_slot];
  if (rec->name_gen != t->name_gen) {
    memcpy(rec->name, t->name, sizeof rec->name);
    rec->name_gen = t->name_gen;
  }
  rec->exited = true;
  rec->older = LP__NONE;
  if (newest_exited != LP__NONE)
    agg.threads[newest_exited].older = t->prof_slot;
  else
    oldest_exited = t->prof_slot;
  newest_exited = t->prof_slot;
  nexited++;
}

/* Learns of the threads that exited since the last pass, and merges. sample_mu held, no stale pointers kept. */
static void reap_exited(void) {
  lp__registry_lock();
  lp__registry_reap(thread_gone, NULL);
  lp__registry_unlock();
  merge_exited();
}

/* ---- sampling --------------------------------------------------------------------- */

/* The record of thread t in this run's aggregation, or -ENOMEM. Registry lock held. */
static int slot_of(lp__thread_t *t) {
  if (t->prof_run == run) {
    lp__agg_thread_t *rec = &agg.threads[t->prof_slot];
    if (rec->name_gen != t->name_gen) {
      memcpy(rec->name, t->name, sizeof rec->name);
      rec->name_gen = t->name_gen;
    }
    return (int)t->prof_slot;
  }
  int slot = lp__agg_add_thread(&agg, t->tid, t->name);
  if (slot < 0) return slot;
  agg.threads[slot].name_gen = t->name_gen;
  t->prof_run = run;
  t->prof_slot = (uint32_t)slot;
  return slot;
}

static void sample_one(lp__thread_t *t, uint32_t slot) {
  const lp_site_t *frames[LP_STACK_CAPACITY + 1];
  lp__agg_thread_t *rec = &agg.threads[slot];
  uint32_t depth, leaf;
  uint64_t word;
  int rc = lp__stack_snapshot(t, rec->last_word, frames, &depth, &word);
  if (rc < 0) {
    agg.skipped++;
    return;
  }
  if (rc == 0) {
    leaf = rec->last_leaf; /* the stack has not moved since the last sample */
  } else {
    uint32_t n = depth < LP_STACK_CAPACITY ? depth : LP_STACK_CAPACITY;
    if (depth > LP_STACK_CAPACITY) frames[n++] = &lp__truncated_site;
    leaf = lp__agg_path(&agg, rec->root, frames, n);
    if (leaf == LP__NONE) {
      agg.skipped++; /* out of memory for a new path */
      return;
    }
    rec->last_word = word;
    rec->last_leaf = leaf;
  }
  agg.nodes[leaf].self++;
  rec->samples++;
  agg.samples++;
}

/* ---- CPU samples ----------------------------------------------------------------- */

/*
 * One CPU sample of the thread whose record is *arg: its weight goes to the
 * node of its stack, found the cheap way when the stack word is one a wall
 * sample or an earlier CPU sample already placed. sample_mu held.
 */
static void take_cpu(void *arg, const lp__cpu_sample_t *s) {
  uint32_t slot = *(const uint32_t *)arg, leaf;
  lp__agg_thread_t *rec = &agg.threads[slot];
  if (s->word == rec->last_word)
    leaf = rec->last_leaf;
  else if (s->word == rec->cpu_word)
    leaf = rec->cpu_leaf;
  else if (s->frames)
    leaf = lp__agg_path(&agg, rec->root, s->frames, s->n);
  else
    leaf = LP__NONE; /* an unchanged stack whose first record was lost */
  if (leaf == LP__NONE) {
    agg.cpu_lost++; /* or out of memory for a new path */
    return;
  }
  rec = &agg.threads[slot];
  rec->cpu_word = s->word;
  rec->cpu_leaf = leaf;
  agg.nodes[leaf].cpu_ns += s->count * tick_ns;
  agg.cpu_samples++;
}

/* What thread t's handler recorded, into record slot. sample_mu held; t alive. */
static void drain_one(lp__thread_t *t, uint32_t slot) {
  if (agg.cpu) agg.cpu_lost += lp__cpu_drain(t, take_cpu, &slot);
}

/* Every registered thread into picks, with its record; their count. sample_mu held. */
static uint32_t pick_threads(void) {
  uint32_t n = 0;
  lp__registry_lock();
  lp__registry_reap(thread_gone, NULL); /* no pointer from an earlier pass survives to here */
  for (lp__thread_t *t = lp__registry_head(); t; t = t->next) {
    if (n == cappicks) {
      uint32_t ncap = cappicks ? cappicks * 2 : 64;
      pick_t *np = lp__realloc(picks, ncap * sizeof *np);
      if (!np) {
        agg.skipped++;
        continue;
      }
      picks = np;
      cappicks = ncap;
    }
    int slot = slot_of(t);
    if (slot < 0) {
      agg.skipped++;
      continue;
    }
    picks[n++] = (pick_t){t, (uint32_t)slot};
  }
  lp__registry_unlock();
  merge_exited();
  return n;
}

/* One pass over every registered thread: a wall sample of each, and the CPU samples it recorded. sample_mu held. */
static void sample_pass(void) {
  uint64_t t0 = lp__mono_ns();
  uint32_t n = pick_threads();
  for (uint32_t i = 0; i < n; i++) {
    sample_one(picks[i].t, picks[i].slot);
    drain_one(picks[i].t, picks[i].slot);
  }
  agg.ticks++;
  agg.sampling_ns += lp__mono_ns() - t0;
}

/* The CPU samples recorded so far, without a wall sample: before a profile is built. sample_mu held. */
static void drain_all(void) {
  if (!agg.cpu) return;
  uint32_t n = pick_threads();
  for (uint32_t i = 0; i < n; i++) drain_one(picks[i].t, picks[i].slot);
}

/* Stops CPU sampling when the program has taken its signal's handler. sample_mu held. */
static void check_cpu_handler(void) {
  if (!agg.cpu || agg.cpu_stopped_ns || lp__cpu_handler_kept()) return;
  lp__cpu_stop();
  agg.cpu_stopped_ns = lp__mono_ns();
}

/* ---- how the collector is scheduled --------------------------------------------- */

#define LP__SLICE_NS 100000u /* the shortest slice the fair scheduler takes */

/* The kernel's struct sched_attr (sched_setattr(2)); glibc 2.36 has no wrapper. */
typedef struct sched_attr_k {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime, sched_deadline, sched_period;
} sched_attr_k;

static int get_attr(sched_attr_k *a) {
  memset(a, 0, sizeof *a);
  return syscall(SYS_sched_getattr, 0, a, (unsigned)sizeof *a, 0u) == 0 ? 0 : -errno;
}

static int set_attr(sched_attr_k *a) {
  a->size = (uint32_t)sizeof *a;
  return syscall(SYS_sched_setattr, 0, a, 0u) == 0 ? 0 : -errno;
}

/*
 * Asks for the scheduling in sched_want, and records what the kernel says the
 * thread got. On the collector thread, before its first tick. Never fails:
 * whatever is refused leaves the thread as it was.
 */
static void apply_sched(void) {
  sched_attr_k a;
  lp_sched_t want = sched_want;
  if (want == LP_SCHED_FIFO) {
    if (get_attr(&a) == 0) {
      a.sched_policy = SCHED_FIFO;
      a.sched_priority = prio_want;
      a.sched_runtime = 0;
      int rc = set_attr(&a);
      if (rc != 0) {
        lp__warn("the collector cannot run as SCHED_FIFO %u (%s: it needs CAP_SYS_NICE or RLIMIT_RTPRIO of %u); it "
                 "asks for a short slice instead",
                 prio_want, lp_strerror(rc), prio_want);
        want = LP_SCHED_SLICE;
      }
    }
  }
  if (want == LP_SCHED_SLICE && get_attr(&a) == 0 && a.sched_policy == SCHED_OTHER) {
    a.sched_runtime = LP__SLICE_NS; /* sched_nice as read: the nice value is left as it is */
    a.sched_flags = 0;
    (void)set_attr(&a); /* an older kernel refuses it or ignores the field: read back below */
  }
  lp_sched_t got = LP_SCHED_DEFAULT;
  uint32_t prio = 0;
  uint64_t slice = 0;
  if (get_attr(&a) == 0) {
    if (a.sched_policy == SCHED_FIFO) {
      got = LP_SCHED_FIFO;
      prio = a.sched_priority;
    } else if (want == LP_SCHED_SLICE && a.sched_policy == SCHED_OTHER && a.sched_runtime > 0 &&
               a.sched_runtime <= 2 * LP__SLICE_NS) {
      got = LP_SCHED_SLICE;
      slice = a.sched_runtime;
    }
  }
  cpu_set_t set;
  uint32_t cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? (uint32_t)CPU_COUNT(&set) : 0;
  lp__lock(&sample_mu);
  sched_got = got;
  prio_got = prio;
  slice_got = slice;
  ncpus = cpus;
  lp__unlock(&sample_mu);
}

/* Threads running or runnable on the machine now (/proc/loadavg's fourth field), 0 if unknown. */
static uint32_t runnable_now(void) {
  char buf[128];
  int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned a, b;
  return sscanf(buf, "%*s %*s %*s %u/%u", &a, &b) == 2 ? a : 0;
}

/* How often the cgroup's CPU quota throttled this process so far (cpu.stat's nr_throttled), 0 if unknown. */
static uint64_t throttled_now(void) {
  char line[4096], path[4200];
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (!f) return 0;
  bool found = false;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "0::", 3) == 0) { /* the unified hierarchy */
      line[strcspn(line, "\n")] = '\0';
      snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.stat", line + 3);
      found = true;
      break;
    }
  fclose(f);
  if (!found || !(f = fopen(path, "re"))) return 0;
  unsigned long long v = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "nr_throttled %llu", &v) == 1) break;
  fclose(f);
  return v;
}

static void *collector_main(void *arg) {
  (void)arg;
  struct timespec cpu;
  /* The kernel may defer a timed wakeup by the thread's timer slack (50 µs by default). */
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  apply_sched();
  /*
   * The deadlines start now, not when the session asked: a new thread on a
   * crowded machine may wait tens of milliseconds for its first run, with
   * default scheduling until here, and those would be missed ticks the
   * collector could not help.
   */
  lp__lock(&sample_mu);
  start_ns = lp__mono_ns();
  plan_start(start_ns);
  uint64_t next = at_ns;
  lp__unlock(&sample_mu);
  atomic_store_explicit(&ready_word, 1u, memory_order_release);
  if (futex_call(&ready_word, FUTEX_WAKE, 1u, NULL, 0u) < 0)
    lp__fatal("futex wake", errno);
  uint32_t since_load = 0;
  while (!atomic_load_explicit(&stop_word, memory_order_acquire)) {
    wait_until(next);
    if (atomic_load_explicit(&stop_word, memory_order_acquire)) break;
    if (lp__mono_ns() < next) continue; /* woken early */
    /*
     * Now and then, how crowded the machine is (a cause of missed ticks the
     * report can name), and whether the CPU samples' handler is still ours.
     */
    bool now_and_then = ++since_load >= 64;
    uint32_t running = now_and_then ? (since_load = 0, runnable_now()) : 0;
    lp__lock(&sample_mu);
    if (running > max_runnable) max_runnable = running;
    if (now_and_then) check_cpu_handler();
    sample_pass();
    plan_after_pass(lp__mono_ns());
    next = at_ns;
    lp__unlock(&sample_mu);
  }
  /* Instants that passed before stop was asked for, while this thread waited to run, are missed. */
  lp__lock(&sample_mu);
  agg.missed += plan_passed(stop_ns);
  lp__unlock(&sample_mu);
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
    collector_cpu_ns = (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec;
  return NULL;
}

/* The collector thread's CPU time so far (ctl_mu held). */
static uint64_t collector_cpu_now(void) {
  clockid_t id;
  struct timespec ts;
  if (!have_thread) return 0;
  if (pthread_getcpuclockid(collector, &id) != 0 || clock_gettime(id, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- sessions ------------------------------------------------------------------ */

static bool any_running(void) {
  for (int o = 0; o < LP__OWNERS; o++)
    if (sessions[o].running) return true;
  return false;
}

/* The last session is gone: the aggregation and the registry's hold go with it. sample_mu held. */
static void drop_aggregation(void) {
  if (agg.cpu && !agg.cpu_stopped_ns) lp__cpu_stop();
  live = false;
  lp__registry_lock();
  lp__registry_hold(false);
  lp__registry_unlock();
  lp__agg_free(&agg);
  free(picks);
  picks = NULL;
  cappicks = 0;
}

/*
 * Starts the collector for a first session, whose mark is taken here, on the
 * fresh aggregation, before the thread can make a pass. ctl_mu held.
 */
static int start_collector(uint32_t want, const lp_profile_opts_t *opts, bool with_thread, lp__mark_t *mark) {
  lp__lock(&sample_mu);
  int rc = lp__agg_init(&agg);
  if (rc == 0 && (rc = lp__mark_take(mark, &agg)) != 0) lp__agg_free(&agg);
  if (rc == 0) {
    run++;
    sched_want = opts ? opts->sched : LP_SCHED_SLICE;
    prio_want = opts && opts->sched_priority ? opts->sched_priority : 1;
    sched_got = LP_SCHED_DEFAULT; /* until the thread reads back what it got */
    prio_got = max_runnable = ncpus = 0;
    slice_got = 0;
    hz = want;
    tick_ns = 1000000000u / want;
    start_ns = lp__mono_ns();
    plan_start(start_ns); /* a manual session's plan, for lp__profile_tick(); the thread makes its own */
    threaded = with_thread;
    oldest_exited = newest_exited = LP__NONE;
    nexited = 0;
    live = true;
    lp__registry_lock();
    lp__registry_hold(true);
    lp__registry_unlock();
  }
  lp__unlock(&sample_mu);
  if (rc != 0 || !with_thread) {
    have_thread = false;
    return rc;
  }
  atomic_store_explicit(&stop_word, 0u, memory_order_relaxed); /* pthread_create publishes it */
  atomic_store_explicit(&ready_word, 0u, memory_order_relaxed);
  collector_cpu_ns = 0;
  rc = lp__thread_spawn(&collector, collector_main, NULL, "labelprof");
  if (rc == 0) {
    have_thread = true;
    /* The session starts when the deadlines do (start_ns, set by the thread). */
    while (!atomic_load_explicit(&ready_word, memory_order_acquire)) {
      long w = futex_call(&ready_word, FUTEX_WAIT, 0u, NULL, 0u);
      if (w != 0 && errno != EAGAIN && errno != EINTR) lp__fatal("futex wait", errno);
    }
    return 0;
  }
  lp__lock(&sample_mu);
  lp__mark_free(mark);
  drop_aggregation();
  lp__unlock(&sample_mu);
  return rc;
}

/* Stops the collector thread, if there is one, after its last pass. ctl_mu held. */
static void stop_thread(uint64_t asked) {
  if (!have_thread) return;
  stop_ns = asked;
  atomic_store_explicit(&stop_word, 1u, memory_order_release);
  if (futex_call(&stop_word, FUTEX_WAKE, 1u, NULL, 0u) < 0)
    lp__fatal("futex wake", errno);
  int rc = pthread_join(collector, NULL);
  if (rc != 0) lp__fatal("pthread_join", rc);
}

static int start(lp__owner_t who, const lp_profile_opts_t *opts, bool with_thread) {
  uint32_t want = opts && opts->hz ? opts->hz : 1000;
  if (want > 100000) return -EINVAL;
  if (opts && ((unsigned)opts->sched > LP_SCHED_FIFO || opts->sched_priority > 99)) return -EINVAL;
  if (opts && (opts->flags & ~LP_PROFILE_CPU)) return -EINVAL;
  if (opts && opts->cpu_signal && !lp__cpu_signal_ok(opts->cpu_signal)) return -EINVAL;
  bool want_cpu = opts && (opts->flags & LP_PROFILE_CPU);
  int sig = opts && opts->cpu_signal ? opts->cpu_signal : lp__cpu_default_signal();
  int rc = 0;
  lp__lock(&ctl_mu);
  if (sessions[who].running) {
    lp__unlock(&ctl_mu);
    return -EBUSY;
  }
  lp__counters_t counters;
  lp__mismatch_watch(who); /* before the counters: a mismatch they count is one it can name */
  lp__registry_counters(&counters);
  bool first = !any_running();
  psession_t *s = &sessions[who];
  if (first) rc = start_collector(want, opts, with_thread, &s->mark);
  uint64_t throttled = throttled_now();
  if (rc == 0) {
    uint64_t cpu = first ? 0 : collector_cpu_now(); /* a new thread's CPU time is all the first session's */
    lp__lock(&sample_mu);
    if (!first) rc = lp__mark_take(&s->mark, &agg);
    if (rc == 0 && want_cpu && !agg.cpu) { /* from now on, for every session, until the last one stops */
      rc = lp__cpu_start(sig, tick_ns, threaded); /* a manual run has rings, no timers */
      if (rc == 0) {
        agg.cpu = true;
        cpu_sig = sig;
      } else {
        lp__mark_free(&s->mark);
      }
    }
    if (rc == 0) {
      s->mark.cpu_ns = cpu;
      s->mark.cpu_untimed = lp__cpu_untimed();
      /* The first session starts when the deadlines do, so that its ticks and missed ticks fit its duration. */
      s->mark.start_ns = first ? start_ns : lp__mono_ns();
      s->mark.counters = counters;
      s->requested_hz = want;
      s->throttled = throttled;
      s->running = true;
    }
    lp__unlock(&sample_mu);
    if (rc != 0 && first) { /* CPU sampling refused: the collector this start made goes again */
      stop_thread(lp__mono_ns());
      lp__lock(&sample_mu);
      drop_aggregation();
      lp__unlock(&sample_mu);
      have_thread = false;
    }
  }
  lp__unlock(&ctl_mu);
  return rc;
}

/* The session's figures: what was added since its mark. sample_mu held. */
static void session_stats(const psession_t *s, uint64_t now, uint64_t cpu, const lp__counters_t *c,
                          lp_profile_stats_t *st) {
  const lp__mark_t *m = &s->mark;
  memset(st, 0, sizeof *st);
  st->samples = agg.samples - m->samples;
  st->ticks = agg.ticks - m->ticks;
  st->missed_ticks = agg.missed - m->missed;
  st->skipped = agg.skipped - m->skipped;
  st->collector_cpu_ns = cpu > m->cpu_ns ? cpu - m->cpu_ns : 0;
  st->sampling_ns = agg.sampling_ns - m->sampling_ns;
  st->duration_ns = now - m->start_ns;
  st->tick_ns = tick_ns;
  st->hz = hz;
  st->requested_hz = s->requested_hz;
  st->truncated = c->truncated - m->counters.truncated;
  st->mismatched = c->mismatched - m->counters.mismatched;
  st->unmatched = c->unmatched - m->counters.unmatched;
  st->sched = sched_got;
  st->sched_priority = prio_got;
  st->slice_ns = slice_got;
  st->max_runnable = max_runnable;
  st->cpus = ncpus;
  uint64_t thr = throttled_now();
  st->throttled = thr > s->throttled ? thr - s->throttled : 0;
  st->cpu_samples = agg.cpu_samples - m->cpu_samples;
  st->cpu_lost = agg.cpu_lost - m->cpu_lost;
  st->cpu_untimed = (uint32_t)(lp__cpu_untimed() - m->cpu_untimed);
  st->cpu_signal = agg.cpu ? cpu_sig : 0;
  if (agg.cpu_stopped_ns) st->cpu_stopped_ns = agg.cpu_stopped_ns > m->start_ns ? agg.cpu_stopped_ns - m->start_ns : 1;
}

/* The profile's note names the session's first mismatched end; without memory for its texts, it only counts. */
static void name_mismatch(lp_profile_t *p, lp__owner_t who, const lp_profile_stats_t *st) {
  lp__mismatch_t m;
  if (p && st->mismatched && lp__mismatch_first(who, &m)) (void)lp__profile_name_mismatch(p, &m);
}

int lp__profile_stop(lp__owner_t who, lp_profile_t **out) {
  lp_profile_stats_t st;
  lp__counters_t c;
  lp__lock(&ctl_mu);
  psession_t *s = &sessions[who];
  if (!s->running) {
    lp__unlock(&ctl_mu);
    return -EINVAL;
  }
  uint64_t asked = lp__mono_ns();
  bool last = true;
  for (int o = 0; o < LP__OWNERS; o++) last &= o == (int)who || !sessions[o].running;
  uint64_t cpu = collector_cpu_now();
  if (last) {
    stop_thread(asked);
    cpu = have_thread ? collector_cpu_ns : 0;
  }
  lp__registry_counters(&c);
  lp__lock(&sample_mu);
  reap_exited(); /* the collector has stopped: no pass holds a pointer */
  drain_all();
  session_stats(s, asked, cpu, &c, &st);
  lp_profile_t *p = out ? lp__profile_build(&agg, &s->mark, &st) : NULL;
  name_mismatch(p, who, &st);
  lp__mark_free(&s->mark);
  s->running = false;
  if (last) {
    drop_aggregation();
    have_thread = false;
  }
  lp__unlock(&sample_mu);
  lp__unlock(&ctl_mu);
  if (out && !p) return -ENOMEM;
  if (out) *out = p;
  return 0;
}

int lp__profile_peek(lp__owner_t who, lp_profile_t **out) {
  lp_profile_stats_t st;
  lp__counters_t c;
  if (!out) return -EINVAL;
  lp__lock(&ctl_mu);
  psession_t *s = &sessions[who];
  if (!s->running) {
    lp__unlock(&ctl_mu);
    return -EINVAL;
  }
  uint64_t cpu = collector_cpu_now();
  lp__registry_counters(&c);
  lp__lock(&sample_mu);
  drain_all();
  session_stats(s, lp__mono_ns(), cpu, &c, &st);
  lp_profile_t *p = lp__profile_build(&agg, &s->mark, &st);
  name_mismatch(p, who, &st);
  lp__unlock(&sample_mu);
  lp__unlock(&ctl_mu);
  if (!p) return -ENOMEM;
  *out = p;
  return 0;
}

bool lp__profile_running(lp__owner_t who) {
  lp__lock(&ctl_mu);
  bool r = sessions[who].running;
  lp__unlock(&ctl_mu);
  return r;
}

int lp__profile_start(lp__owner_t who, const lp_profile_opts_t *opts) { return start(who, opts, true); }
int lp__profile_start_manual(const lp_profile_opts_t *opts) { return start(LP__PROGRAM, opts, false); }
int lp_profile_stop(lp_profile_t **out) { return lp__profile_stop(LP__PROGRAM, out); }
int lp_profile_running(void) { return lp__profile_running(LP__PROGRAM); }

int lp__profile_sample_now(void) {
  lp__lock(&sample_mu);
  if (!live) {
    lp__unlock(&sample_mu);
    return -EINVAL;
  }
  sample_pass();
  lp__unlock(&sample_mu);
  return 0;
}

void lp__profile_test_seed(uint64_t seed) {
  lp__lock(&sample_mu);
  test_seed = seed;
  lp__unlock(&sample_mu);
}

int lp__profile_plan(uint64_t *index, uint64_t *at) {
  lp__lock(&sample_mu);
  int rc = live ? 0 : -EINVAL;
  if (rc == 0) {
    *index = per_idx;
    *at = at_ns;
  }
  lp__unlock(&sample_mu);
  return rc;
}

int lp__profile_tick(uint64_t now) {
  lp__lock(&sample_mu);
  int rc = !live || threaded ? -EINVAL : now < at_ns ? 0 : 1;
  if (rc == 1) {
    sample_pass();
    plan_after_pass(now);
  }
  lp__unlock(&sample_mu);
  return rc;
}

size_t lp__profile_node_count(void) {
  lp__lock(&sample_mu);
  size_t n = live ? agg.nnodes - agg.nfree : 0;
  lp__unlock(&sample_mu);
  return n;
}

size_t lp__profile_bytes(void) {
  lp__lock(&sample_mu);
  size_t n = live ? lp__agg_bytes(&agg) : 0;
  lp__unlock(&sample_mu);
  return n;
}

size_t lp__profile_thread_records(void) {
  lp__lock(&sample_mu);
  size_t n = live ? lp__agg_records(&agg) : 0;
  lp__unlock(&sample_mu);
  return n;
}

/* ---- fork: see lifecycle.c ---------------------------------------------------- */

void lp__collector_atfork_prepare(void) {
  lp__lock(&ctl_mu);
  lp__lock(&sample_mu);
}

void lp__collector_atfork_parent(void) {
  lp__unlock(&sample_mu);
  lp__unlock(&ctl_mu);
}

void lp__collector_atfork_child(void) {
  /*
   * The locks prepare took belong to this thread, the child's only one: they
   * are released as usual.
   */
  lp__unlock(&sample_mu);
  lp__unlock(&ctl_mu);
  /* The collector thread was not copied: the child starts with no profile. */
  if (live) lp__agg_free(&agg);
  for (int o = 0; o < LP__OWNERS; o++) {
    if (sessions[o].running) lp__mark_free(&sessions[o].mark);
    sessions[o].running = false;
  }
  live = false;
  free(picks);
  picks = NULL;
  cappicks = 0;
  have_thread = false;
}
