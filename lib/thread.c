/*
 * thread.c: per-thread state and the registry of threads that use labels.
 *
 * A thread joins the first time it uses a label. lp_impl_self starts out
 * pointing at `lp__unattached`, a shared state nobody writes whose depth is
 * out of range, so the first push falls into the slow path, which allocates
 * the thread's own state, links it into the registry and repoints
 * lp_impl_self. A pthread key destructor unlinks the state when the thread
 * exits and points lp_impl_self at `detached`, which the slow paths ignore.
 *
 * The registry calls nobody above it. Its users (the timeline) register
 * hooks for thread exit and rename; the collector learns of exits when it
 * reaps parked threads.
 *
 * The one tricky invariant: a walker (the collector) copies the registry's
 * pointers under the registry lock, then reads the states without it. So
 * while the registry is held, an exiting thread's state is parked, not
 * freed, and it is freed only by a walker at the start of its next pass
 * (lp__registry_reap), when that walker holds no pointer from an earlier
 * pass, or when the hold is released.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Every bit of the word and the levels set: every label goes slow (its
 * level is in levels, along with every bit that sends a recorded one to the
 * general path; the depth is 0xffff), and no scope's word matches it. No
 * chunk: an instant goes slow too. lp_impl_self (lifecycle.c) starts out
 * pointing at lp__unattached.
 */
#define ALL_SET {~(uint64_t)0, ~(uint32_t)0, ~(uint32_t)0, {0}, NULL, NULL, 0}
lp_impl_thread_t lp__unattached = ALL_SET;
static lp_impl_thread_t detached = ALL_SET;

/* Written by the timeline and the subscribers (trace.c), under their locks; copied into each thread's levels here. */
LP_EXPORT uint32_t lp_impl_levels;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
/*
 * The levels lock: the threads' levels and their counting state, and the
 * registry's list (changed under both locks, walked under either). A leaf.
 */
static pthread_mutex_t levels_mu = PTHREAD_MUTEX_INITIALIZER;
static lp__thread_t *head, *tail; /* live threads, in order of registration */
static lp__thread_t *parked;      /* exited while held; linked through ->next */
static bool held;
static lp__counters_t exited; /* counters of threads that have left */
static lp__registry_hooks_t hooks;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static bool key_ok;

static void thread_exit(void *arg);

static void make_key(void) { key_ok = pthread_key_create(&key, thread_exit) == 0; }

/* A state and what it owns: the ring of CPU samples cpu.c may have given it. */
static void free_state(lp__thread_t *t) {
  free(atomic_load_explicit(&t->cpu_ring, memory_order_relaxed));
  free(t);
}

void lp__registry_set_hooks(const lp__registry_hooks_t *h) { hooks = *h; }

static void unlink_thread(lp__thread_t *t) {
  if (t->prev)
    t->prev->next = t->next;
  else
    head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  else
    tail = t->prev;
  t->next = t->prev = NULL;
}

static void add_counters(lp__counters_t *c, const lp__thread_t *t) {
  c->truncated += atomic_load_explicit(&t->truncated, memory_order_relaxed);
  c->mismatched += atomic_load_explicit(&t->mismatched, memory_order_relaxed);
  c->unmatched += atomic_load_explicit(&t->unmatched, memory_order_relaxed);
  c->dropped += lp__thread_dropped(t);
}

/* ---- the threads' levels, and drops counted by pushes ---------------------------
 * A thread that counts its drops by its pushes (labelprof/impl.h) has
 * dropped, besides hot.dropped, two events (a begin and its end) for each
 * push since count_base: the word's counter counts pushes, and count_base
 * moves up by one for each push that dropped nothing. The owner changes
 * the counting state between two increments of count_seq; a reader retries
 * while it is odd or has moved. The counter has 48 bits: a thread that
 * pushes 2^48 scopes (three days at one a nanosecond) while counting,
 * without a change of levels, wraps its count.
 */
#define COUNT_MASK ((UINT64_C(1) << (64 - LP_IMPL_COUNT_SHIFT)) - 1)

static inline uint64_t pushes(uint64_t w) { return w >> LP_IMPL_COUNT_SHIFT; }

uint64_t lp__thread_dropped(const lp__thread_t *t) {
  uint64_t dropped = 0;
  /* A bounded wait: in a child of fork(), the parent's other threads may have stopped inside a change. */
  for (int tries = 0; tries < 10000; tries++) {
    uint32_t s1 = atomic_load_explicit(&t->count_seq, memory_order_acquire);
    dropped = LP_IMPL_LOAD_RELAXED(t->hot.dropped);
    uint32_t counting = atomic_load_explicit(&t->counting, memory_order_relaxed);
    uint64_t base = atomic_load_explicit(&t->count_base, memory_order_relaxed);
    uint64_t w = LP_IMPL_LOAD_ACQUIRE(t->hot.word);
    if (counting) dropped += 2 * ((pushes(w) - base) & COUNT_MASK);
    atomic_thread_fence(memory_order_acquire);
    if (!(s1 & 1) && atomic_load_explicit(&t->count_seq, memory_order_relaxed) == s1) break;
  }
  return dropped;
}


/* Whether a thread counting its drops goes on counting under lp_impl_levels g. */
static bool counts_on(const lp__thread_t *t, uint32_t g) {
  return (g & LP_IMPL_SPENT) && !(g & LP_IMPL_SUBS) && (g & LP_LEVEL_ALL) == t->count_levels;
}

/*
 * A thread's copy of lp_impl_levels g: with LP_IMPL_SLOW_CLOCK unless
 * events are stamped with the CPU's counter (chosen before a timeline's
 * first event, and changed after only by a test's hook).
 */
static uint32_t copy_of(uint32_t g) {
  return g | (LP_IMPL_LOAD_RELAXED(lp_impl_clock_counter) ? 0u : LP_IMPL_SLOW_CLOCK);
}

/* t's levels for lp_impl_levels g. Levels lock held. */
static void set_levels(lp__thread_t *t, uint32_t g) {
  g = copy_of(g);
  if (!atomic_load_explicit(&t->counting, memory_order_relaxed))
    LP_IMPL_STORE_RELAXED(t->hot.levels, g);
  else if (!counts_on(t, g))
    LP_IMPL_STORE_RELAXED(t->hot.levels, LP_LEVEL_ALL | LP_IMPL_LEVELS_STALE | (g & LP_IMPL_SLOW_CLOCK));
}

void lp__levels_publish(void) {
  lp__lock(&levels_mu);
  uint32_t g = LP_IMPL_LOAD_RELAXED(lp_impl_levels);
  for (lp__thread_t *t = head; t; t = t->next) set_levels(t, g);
  lp__unlock(&levels_mu);
}

void lp__levels_catch_up(lp__thread_t *t) {
  lp__lock(&levels_mu);
  if (atomic_load_explicit(&t->counting, memory_order_relaxed)) {
    uint64_t base = atomic_load_explicit(&t->count_base, memory_order_relaxed);
    uint64_t n = (pushes(LP_IMPL_LOAD_RELAXED(t->hot.word)) - base) & COUNT_MASK;
    lp__count_change_begin(t);
    LP_IMPL_STORE_RELAXED(t->hot.dropped, LP_IMPL_LOAD_RELAXED(t->hot.dropped) + 2 * n);
    atomic_store_explicit(&t->counting, 0, memory_order_relaxed);
    lp__count_change_end(t);
  }
  set_levels(t, LP_IMPL_LOAD_RELAXED(lp_impl_levels));
  lp__unlock(&levels_mu);
}

bool lp__levels_count(lp__thread_t *t) {
  lp__lock(&levels_mu);
  uint32_t g = copy_of(LP_IMPL_LOAD_RELAXED(lp_impl_levels));
  bool start = !atomic_load_explicit(&t->counting, memory_order_relaxed) && (g & LP_IMPL_SPENT) &&
               !(g & LP_IMPL_SUBS);
  if (start) {
    lp__count_change_begin(t);
    atomic_store_explicit(&t->count_base, pushes(LP_IMPL_LOAD_RELAXED(t->hot.word)), memory_order_relaxed);
    t->count_levels = g & LP_LEVEL_ALL;
    atomic_store_explicit(&t->counting, 1, memory_order_relaxed);
    lp__count_change_end(t);
    LP_IMPL_STORE_RELAXED(t->hot.levels, (LP_LEVEL_ALL & ~t->count_levels) | LP_IMPL_COUNTING |
                                             (g & LP_IMPL_SLOW_CLOCK));
  } else {
    set_levels(t, g);
  }
  lp__unlock(&levels_mu);
  return start;
}

void lp__publish_uncounted(lp__thread_t *t, uint64_t w) {
  if (!atomic_load_explicit(&t->counting, memory_order_relaxed)) { /* only the owner starts it */
    LP_IMPL_STORE_RELEASE(t->hot.word, w);
    return;
  }
  lp__count_uncounted(t, w);
}

/* ---- the ABI check (lifecycle.c) ---------------------------------------------- */

static atomic_bool abi_refused;

bool lp__abi_refused(void) { return atomic_load_explicit(&abi_refused, memory_order_relaxed); }
bool lp__abi_refuse(void) { return !atomic_exchange(&abi_refused, true); }

lp__thread_t *lp__thread_attach(void) {
  lp_impl_thread_t *self = lp_impl_self;
  if (self != &lp__unattached) return self == &detached ? NULL : (lp__thread_t *)self;
  if (lp__abi_refused()) goto fail;
  if (pthread_once(&key_once, make_key) != 0 || !key_ok) goto fail;
  /* Own cache lines: the owner's stores never share a line with another thread's. */
  size_t size = (sizeof(lp__thread_t) + 63) & ~(size_t)63;
  lp__thread_t *t = lp__aligned_alloc(64, size);
  if (!t) goto fail;
  memset(t, 0, size);
  t->tid = (uint64_t)syscall(SYS_gettid);
  t->cpu_clock_ok = pthread_getcpuclockid(pthread_self(), &t->cpu_clock) == 0;
  /* The calling thread's own name: no file to read, unlike pthread_getname_np on another thread. */
  char comm[17] = "";
  if (prctl(PR_GET_NAME, comm) == 0 && comm[0])
    snprintf(t->name, sizeof t->name, "%s", comm);
  else
    snprintf(t->name, sizeof t->name, "thread %llu", (unsigned long long)t->tid);
  if (pthread_setspecific(key, t) != 0) {
    free(t);
    goto fail;
  }
  lp__lock(&registry_mu);
  lp__lock(&levels_mu);
  t->prev = tail;
  if (tail)
    tail->next = t;
  else
    head = t;
  tail = t;
  set_levels(t, LP_IMPL_LOAD_RELAXED(lp_impl_levels));
  lp__unlock(&levels_mu);
  lp__attach_join(t);
  lp__unlock(&registry_mu);
  lp_impl_self = &t->hot;
  if (hooks.joined) hooks.joined(t);
  return t;
fail:
  /* Out of memory or keys, or labels refused: this thread goes unprofiled rather than retrying on every label. */
  lp_impl_self = &detached;
  return NULL;
}

lp__thread_t *lp__thread_current(void) {
  lp_impl_thread_t *self = lp_impl_self;
  return self == &lp__unattached || self == &detached ? NULL : (lp__thread_t *)self;
}

static void thread_exit(void *arg) {
  lp__thread_t *t = arg;
  lp_impl_self = &detached; /* labels in later destructors are ignored */
  if (hooks.exit) hooks.exit(t);
  lp__lock(&registry_mu);
  lp__lock(&levels_mu);
  lp__attach_leave(t); /* before it can be freed: a reader outside sees the slot change first */
  unlink_thread(t);
  lp__unlock(&levels_mu);
  add_counters(&exited, t);
  if (held) {
    t->next = parked;
    parked = t;
  } else {
    free_state(t);
  }
  lp__unlock(&registry_mu);
}

int lp_thread_set_name(const char *name) {
  if (!name) return -EINVAL;
  lp__thread_t *t = lp__thread_attach();
  if (!t) return -ENOMEM;
  lp__lock(&registry_mu);
  lp__attach_change_begin(t);
  snprintf(t->name, sizeof t->name, "%s", name);
  lp__attach_change_end(t);
  t->name_gen++;
  lp__unlock(&registry_mu);
  if (hooks.renamed) hooks.renamed(t);
  return 0;
}

void lp__registry_lock(void) { lp__lock(&registry_mu); }
void lp__registry_unlock(void) { lp__unlock(&registry_mu); }
lp__thread_t *lp__registry_head(void) { return head; }

void lp__registry_reap(void (*visit)(lp__thread_t *t, void *arg), void *arg) {
  while (parked) {
    lp__thread_t *t = parked;
    parked = t->next;
    if (visit) visit(t, arg);
    free_state(t);
  }
}

void lp__registry_hold(bool on) {
  held = on;
  if (!on) lp__registry_reap(NULL, NULL);
}

void lp__registry_counters(lp__counters_t *out) {
  lp__lock(&registry_mu);
  lp__counters_t c = exited;
  for (lp__thread_t *t = head; t; t = t->next) add_counters(&c, t);
  lp__unlock(&registry_mu);
  *out = c;
}

/* ---- fork ----------------------------------------------------------------
 * The child of fork() has one thread. The states of the parent's other
 * threads were copied but their threads do not exist: free them, keep the
 * forking thread's, and release the lock prepare took on this thread.
 */

static bool forked;

bool lp__forked_child(void) { return forked; }

void lp__registry_atfork_prepare(void) { lp__lock(&registry_mu); }
void lp__registry_atfork_parent(void) { lp__unlock(&registry_mu); }
/* The levels lock is a leaf: fork takes it after every other lock, and releases it first. */
void lp__levels_atfork_prepare(void) { lp__lock(&levels_mu); }
void lp__levels_atfork_parent(void) { lp__unlock(&levels_mu); }
void lp__levels_atfork_child(void) { lp__unlock(&levels_mu); }

void lp__registry_atfork_child(void) {
  lp__thread_t *self = lp__thread_current();
  forked = true;
  lp__registry_reap(NULL, NULL);
  held = false;
  for (lp__thread_t *t = head, *next; t; t = next) {
    next = t->next;
    if (t == self) continue;
    add_counters(&exited, t);
    lp__attach_leave(t);
    free_state(t);
  }
  head = tail = self;
  if (self) self->next = self->prev = NULL;
  /* The child's only thread has a thread id of its own: its lane (systrace's TASK-PID) must say so. */
  if (self) {
    lp__attach_change_begin(self);
    self->tid = (uint64_t)syscall(SYS_gettid);
    lp__attach_change_end(self);
  }
  if (self) self->cpu_clock_ok = pthread_getcpuclockid(pthread_self(), &self->cpu_clock) == 0;
  lp__unlock(&registry_mu); /* taken by prepare on this thread, the child's only one */
}
