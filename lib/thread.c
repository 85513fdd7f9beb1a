/*
 * thread.c: per-thread state and the registry of threads that use labels.
 *
 * A thread joins the first time it uses a label. lp_impl_self starts out
 * pointing at `unattached`, a shared state nobody writes whose depth is out
 * of range, so the first push falls into the slow path, which allocates the
 * thread's own state, links it into the registry and repoints lp_impl_self.
 * A pthread key destructor unlinks the state when the thread exits and points
 * lp_impl_self at `detached`, which the slow paths ignore.
 *
 * The one tricky invariant: a sampler copies the registry's pointers under
 * the registry lock, then reads the states without it. So while sampling is
 * on, an exiting thread's state is parked, not freed, and it is freed only
 * by a sampler at the start of its next pass (lp__registry_reap), when that
 * sampler holds no pointer from an earlier pass, or when sampling stops.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Depth 0xffff: every push and LP_END goes slow, and no scope's depth + 1 matches it. */
static lp_impl_thread_t unattached = {.word = LP_IMPL_DEPTH_MASK};
static lp_impl_thread_t detached = {.word = LP_IMPL_DEPTH_MASK};

LP_EXPORT __thread lp_impl_thread_t *lp_impl_self __attribute__((tls_model("initial-exec"))) = &unattached;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static lp__thread_t *head, *tail; /* live threads, in order of registration */
static lp__thread_t *parked;      /* exited while sampling; linked through ->next */
static bool sampling;
/* Mistake counters of threads that have exited. */
static uint64_t exited_truncated, exited_mismatched, exited_unmatched;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static bool key_ok;

static void thread_exit(void *arg);

static void make_key(void) { key_ok = pthread_key_create(&key, thread_exit) == 0; }

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

static void add_mistakes(const lp__thread_t *t) {
  exited_truncated += atomic_load_explicit(&t->truncated, memory_order_relaxed);
  exited_mismatched += atomic_load_explicit(&t->mismatched, memory_order_relaxed);
  exited_unmatched += atomic_load_explicit(&t->unmatched, memory_order_relaxed);
}

lp__thread_t *lp__thread_attach(void) {
  lp_impl_thread_t *self = lp_impl_self;
  if (self != &unattached) return self == &detached ? NULL : (lp__thread_t *)self;
  if (pthread_once(&key_once, make_key) != 0 || !key_ok) goto fail;
  /* Own cache lines: the owner's stores never share a line with another thread's. */
  size_t size = (sizeof(lp__thread_t) + 63) & ~(size_t)63;
  lp__thread_t *t = aligned_alloc(64, size);
  if (!t) goto fail;
  memset(t, 0, size);
  t->tid = (uint64_t)syscall(SYS_gettid);
  if (pthread_getname_np(pthread_self(), t->name, sizeof t->name) != 0 || !t->name[0])
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
  lp__unlock(&registry_mu);
  lp_impl_self = &t->hot;
  return t;
fail:
  /* Out of memory or keys: this thread goes unprofiled rather than retrying on every label. */
  lp_impl_self = &detached;
  return NULL;
}

lp__thread_t *lp__thread_current(void) {
  lp_impl_thread_t *self = lp_impl_self;
  return self == &unattached || self == &detached ? NULL : (lp__thread_t *)self;
}

static void thread_exit(void *arg) {
  lp__thread_t *t = arg;
  lp_impl_self = &detached; /* labels in later destructors are ignored */
  lp__trace_thread_exit(t); /* its timeline lane outlives it */
  lp__lock(&registry_mu);
  unlink_thread(t);
  add_mistakes(t);
  if (sampling) {
    t->next = parked;
    parked = t;
  } else {
    free(t);
  }
  lp__unlock(&registry_mu);
}

int lp_thread_set_name(const char *name) {
  if (!name) return -EINVAL;
  lp__thread_t *t = lp__thread_attach();
  if (!t) return -ENOMEM;
  lp__lock(&registry_mu);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->name_gen++;
  lp__unlock(&registry_mu);
  lp__trace_thread_renamed(t);
  return 0;
}

void lp__registry_lock(void) { lp__lock(&registry_mu); }
void lp__registry_unlock(void) { lp__unlock(&registry_mu); }
lp__thread_t *lp__registry_head(void) { return head; }

void lp__registry_reap(void) {
  while (parked) {
    lp__thread_t *t = parked;
    parked = t->next;
    free(t);
  }
}

void lp__registry_set_sampling(bool on) {
  sampling = on;
  if (!on) lp__registry_reap();
}

void lp__registry_mistakes(uint64_t *truncated, uint64_t *mismatched, uint64_t *unmatched) {
  lp__lock(&registry_mu);
  uint64_t tr = exited_truncated, mm = exited_mismatched, um = exited_unmatched;
  for (lp__thread_t *t = head; t; t = t->next) {
    tr += atomic_load_explicit(&t->truncated, memory_order_relaxed);
    mm += atomic_load_explicit(&t->mismatched, memory_order_relaxed);
    um += atomic_load_explicit(&t->unmatched, memory_order_relaxed);
  }
  lp__unlock(&registry_mu);
  *truncated = tr;
  *mismatched = mm;
  *unmatched = um;
}

/* ---- fork ----------------------------------------------------------------
 * The child of fork() has one thread. The states of the parent's other
 * threads were copied but their threads do not exist: free them, keep the
 * forking thread's, and start with a clean lock.
 */

static bool forked;

bool lp__forked_child(void) { return forked; }

void lp__registry_atfork_prepare(void) { lp__lock(&registry_mu); }
void lp__registry_atfork_parent(void) { lp__unlock(&registry_mu); }

void lp__registry_atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  lp__thread_t *self = lp__thread_current();
  forked = true;
  registry_mu = fresh;
  lp__registry_reap();
  sampling = false;
  for (lp__thread_t *t = head, *next; t; t = next) {
    next = t->next;
    if (t == self) continue;
    add_mistakes(t);
    free(t);
  }
  head = tail = self;
  if (self) self->next = self->prev = NULL;
}

/* Every library lock, taken in the lock order (internal.h), released after. */
static void atfork_prepare(void) {
  lp__collector_atfork_prepare();
  lp__registry_atfork_prepare();
  lp__trace_atfork_prepare();
}
static void atfork_parent(void) {
  lp__trace_atfork_parent();
  lp__registry_atfork_parent();
  lp__collector_atfork_parent();
}
static void atfork_child(void) {
  lp__registry_atfork_child();
  lp__collector_atfork_child();
  lp__trace_atfork_child();
}

static void register_handlers(void) {
  /* Without the handlers a forked child would try to join a collector it does not have. */
  int rc = pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  if (rc != 0)
    fprintf(stderr, "labelprof: pthread_atfork failed (%s); do not fork while profiling\n", lp_strerror(-rc));
}

void lp__fork_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  int rc = pthread_once(&once, register_handlers);
  if (rc != 0) lp__fatal("pthread_once", rc);
}
