/*
 * collector.c: the profiler thread and the sampling pass.
 *
 * lp_profile_start() creates the aggregation and a thread that wakes on
 * absolute CLOCK_MONOTONIC deadlines (so ticks never drift; a deadline that
 * passes while the thread is late is counted as missed, not made up). Each
 * wakeup is one sampling pass: under the registry lock, copy the list of
 * threads (and pick up renames); without it, snapshot each thread's stack
 * and add the sample to the aggregation at once.
 *
 * The wait is pthread_cond_timedwait on a CLOCK_MONOTONIC condition variable
 * rather than clock_nanosleep: the same absolute deadline, but stop can wake
 * the thread at once instead of waiting out a tick that may be a second long.
 *
 * The sampling lock makes a pass atomic with respect to start, stop and the
 * test hook lp__profile_sample_now(); the hot path never takes any lock.
 */
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;    /* start and stop */
static pthread_mutex_t sample_mu = PTHREAD_MUTEX_INITIALIZER; /* everything below it */
static pthread_mutex_t wake_mu = PTHREAD_MUTEX_INITIALIZER;   /* stop_requested */
static pthread_cond_t wake_cv;
static bool cv_ready;
static bool stop_requested;
static uint64_t stop_ns; /* when stop was asked for (wake_mu) */

static atomic_int running;
static bool have_thread; /* ctl_mu */
static pthread_t collector;
static uint64_t collector_cpu_ns; /* written by the collector before it exits; read after join */

/* Under sample_mu. */
static bool live;
static lp__agg_t agg;
static uint64_t session;
static uint64_t tick_ns, start_ns;
static uint32_t hz;
static uint64_t mistakes0[3];
typedef struct pick {
  lp__thread_t *t;
  uint32_t slot;
} pick_t;
static pick_t *picks;
static uint32_t cappicks;

static void init_cv(void) {
  pthread_condattr_t a;
  int rc = pthread_condattr_init(&a);
  if (rc == 0) rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  if (rc == 0) rc = pthread_cond_init(&wake_cv, &a);
  if (rc != 0) lp__fatal("pthread_cond_init", rc);
  pthread_condattr_destroy(&a);
  cv_ready = true;
}

static pthread_once_t cv_once = PTHREAD_ONCE_INIT;

/* The record of thread t in this session's aggregation, or -ENOMEM. Registry lock held. */
static int slot_of(lp__thread_t *t) {
  if (t->prof_session == session) {
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
  t->prof_session = session;
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

/* One pass over every registered thread. sample_mu held. */
static void sample_pass(void) {
  uint32_t n = 0;
  uint64_t t0 = lp__mono_ns();
  lp__registry_lock();
  lp__registry_reap(); /* no pointer from an earlier pass survives to here */
  for (lp__thread_t *t = lp__registry_head(); t; t = t->next) {
    if (n == cappicks) {
      uint32_t ncap = cappicks ? cappicks * 2 : 64;
      pick_t *np = realloc(picks, ncap * sizeof *np);
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
  for (uint32_t i = 0; i < n; i++) sample_one(picks[i].t, picks[i].slot);
  agg.ticks++;
  agg.sampling_ns += lp__mono_ns() - t0;
}

static void *collector_main(void *arg) {
  (void)arg;
  struct timespec cpu;
  lp__lock(&wake_mu);
  uint64_t next = start_ns + tick_ns;
  while (!stop_requested) {
    struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
    int rc = pthread_cond_timedwait(&wake_cv, &wake_mu, &ts);
    if (rc != 0 && rc != ETIMEDOUT) lp__fatal("pthread_cond_timedwait", rc);
    if (stop_requested) break;
    if (lp__mono_ns() < next) continue; /* woken early */
    lp__unlock(&wake_mu);
    lp__lock(&sample_mu);
    sample_pass();
    uint64_t now = lp__mono_ns();
    next += tick_ns;
    if (now >= next) {
      uint64_t late = (now - next) / tick_ns + 1;
      agg.missed += late;
      next += late * tick_ns;
    }
    lp__unlock(&sample_mu);
    lp__lock(&wake_mu);
  }
  uint64_t end = stop_ns;
  lp__unlock(&wake_mu);
  /* Deadlines that passed before stop was asked for, while this thread waited to run, are missed. */
  if (end >= next) {
    lp__lock(&sample_mu);
    agg.missed += (end - next) / tick_ns + 1;
    lp__unlock(&sample_mu);
  }
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
    collector_cpu_ns = (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec;
  return NULL;
}

static int start(const lp_profile_opts_t *opts, bool with_thread) {
  uint32_t want = opts && opts->hz ? opts->hz : 1000;
  if (want > 100000) return -EINVAL;
  lp__fork_init();
  int rc = pthread_once(&cv_once, init_cv);
  if (rc != 0) lp__fatal("pthread_once", rc);
  lp__lock(&ctl_mu);
  if (atomic_load(&running)) {
    lp__unlock(&ctl_mu);
    return -EBUSY;
  }
  lp__registry_mistakes(&mistakes0[0], &mistakes0[1], &mistakes0[2]);
  lp__lock(&sample_mu);
  rc = lp__agg_init(&agg);
  if (rc == 0) {
    session++;
    hz = want;
    tick_ns = 1000000000u / want;
    start_ns = lp__mono_ns();
    live = true;
    lp__registry_lock();
    lp__registry_set_sampling(true);
    lp__registry_unlock();
  }
  lp__unlock(&sample_mu);
  if (rc == 0 && with_thread) {
    sigset_t all, old;
    lp__lock(&wake_mu);
    stop_requested = false;
    lp__unlock(&wake_mu);
    collector_cpu_ns = 0;
    /* The collector takes none of the program's signals. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = -pthread_create(&collector, NULL, collector_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) {
      pthread_setname_np(collector, "labelprof"); /* cosmetic: top and gdb show it */
    } else {
      lp__lock(&sample_mu);
      live = false;
      lp__registry_lock();
      lp__registry_set_sampling(false);
      lp__registry_unlock();
      lp__agg_free(&agg);
      lp__unlock(&sample_mu);
    }
  }
  if (rc == 0) {
    have_thread = with_thread;
    atomic_store(&running, 1);
  }
  lp__unlock(&ctl_mu);
  return rc;
}

int lp_profile_start(const lp_profile_opts_t *opts) { return start(opts, true); }
int lp__profile_start_manual(const lp_profile_opts_t *opts) { return start(opts, false); }

int lp_profile_stop(lp_profile_t **out) {
  lp_profile_stats_t s;
  uint64_t m[3];
  lp__lock(&ctl_mu);
  if (!atomic_load(&running)) {
    lp__unlock(&ctl_mu);
    return -EINVAL;
  }
  uint64_t asked = lp__mono_ns();
  if (have_thread) {
    lp__lock(&wake_mu);
    stop_requested = true;
    stop_ns = asked;
    int rc = pthread_cond_signal(&wake_cv);
    lp__unlock(&wake_mu);
    if (rc != 0) lp__fatal("pthread_cond_signal", rc);
    rc = pthread_join(collector, NULL);
    if (rc != 0) lp__fatal("pthread_join", rc);
  }
  lp__registry_mistakes(&m[0], &m[1], &m[2]);
  lp__lock(&sample_mu);
  memset(&s, 0, sizeof s);
  s.samples = agg.samples;
  s.ticks = agg.ticks;
  s.missed_ticks = agg.missed;
  s.skipped = agg.skipped;
  s.collector_cpu_ns = have_thread ? collector_cpu_ns : 0;
  s.sampling_ns = agg.sampling_ns;
  s.duration_ns = asked - start_ns;
  s.tick_ns = tick_ns;
  s.hz = hz;
  s.truncated = m[0] - mistakes0[0];
  s.mismatched = m[1] - mistakes0[1];
  s.unmatched = m[2] - mistakes0[2];
  live = false;
  lp__registry_lock();
  lp__registry_set_sampling(false);
  lp__registry_unlock();
  lp_profile_t *p = out ? lp__profile_build(&agg, &s) : NULL;
  lp__agg_free(&agg);
  free(picks);
  picks = NULL;
  cappicks = 0;
  lp__unlock(&sample_mu);
  atomic_store(&running, 0);
  lp__unlock(&ctl_mu);
  if (out && !p) return -ENOMEM;
  if (out) *out = p;
  return 0;
}

int lp_profile_running(void) { return atomic_load(&running); }

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

size_t lp__profile_node_count(void) {
  lp__lock(&sample_mu);
  size_t n = live ? agg.nnodes : 0;
  lp__unlock(&sample_mu);
  return n;
}

size_t lp__profile_bytes(void) {
  lp__lock(&sample_mu);
  size_t n = live ? lp__agg_bytes(&agg) : 0;
  lp__unlock(&sample_mu);
  return n;
}

/* ---- fork: see thread.c ---------------------------------------------------- */

void lp__collector_atfork_prepare(void) {
  lp__lock(&ctl_mu);
  lp__lock(&sample_mu);
}

void lp__collector_atfork_parent(void) {
  lp__unlock(&sample_mu);
  lp__unlock(&ctl_mu);
}

void lp__collector_atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  ctl_mu = fresh;
  sample_mu = fresh;
  wake_mu = fresh;
  if (cv_ready) init_cv(); /* a waiter in the parent may have left it in any state */
  /* The collector thread was not copied: the child starts with no profile. */
  if (live) lp__agg_free(&agg);
  live = false;
  free(picks);
  picks = NULL;
  cappicks = 0;
  have_thread = false;
  atomic_store(&running, 0);
}
