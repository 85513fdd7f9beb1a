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
 * Depth 0xffff: every push and LP_END goes slow, and no scope's word matches
 * it. lp_impl_self (lifecycle.c) starts out pointing at lp__unattached.
 */
lp_impl_thread_t lp__unattached = {.word = LP_IMPL_DEPTH_MASK};
static lp_impl_thread_t detached = {.word = LP_IMPL_DEPTH_MASK};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
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
  c->dropped += LP_IMPL_LOAD_RELAXED(t->hot.dropped);
}

lp__thread_t *lp__thread_attach(void) {
  lp_impl_thread_t *self = lp_impl_self;
  if (self != &lp__unattached) return self == &detached ? NULL : (lp__thread_t *)self;
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
  t->prev = tail;
  if (tail)
    tail->next = t;
  else
    head = t;
  tail = t;
  lp__attach_join(t);
  lp__unlock(&registry_mu);
  lp_impl_self = &t->hot;
  if (hooks.joined) hooks.joined(t);
  return t;
fail:
  /* Out of memory or keys: this thread goes unprofiled rather than retrying on every label. */
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
  lp__attach_leave(t); /* before it can be freed: a reader outside sees the slot change first */
  unlink_thread(t);
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
