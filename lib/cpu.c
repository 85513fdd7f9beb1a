/*
 * cpu.c: CPU samples, taken on each thread's own CPU clock.
 *
 * While CPU sampling runs (LP_PROFILE_CPU), every registered thread has a
 * POSIX timer on its own CPU clock (timer_create on the clock
 * pthread_getcpuclockid gave, SIGEV_THREAD_ID) that sends one signal to
 * that thread, and to no other, each time the thread has used another
 * period of CPU. The handler runs on the thread, at a moment it is using
 * the CPU, and reads its own pseudo-stack: no other thread writes it, so the
 * copy is exact without the collector's retries. It appends the stack to a
 * small ring of the thread's own, which the collector drains at its ticks
 * without a lock (one writer, one reader: the handler publishes its head
 * with release, the collector its tail). Each sample weighs the periods its
 * timer counted, overruns included: the kernel checks CPU timers at its
 * scheduler tick (CONFIG_HZ), so at 250 Hz a 1 ms timer fires about every
 * 4 ms of CPU with 3 overruns, and the weights still add up to the CPU used.
 *
 * Timers are made as threads register (the registry's hook) and for every
 * registered thread when sampling starts; deleted as threads exit (on the
 * thread, with the signal blocked first, so that none can arrive once the
 * thread's state starts to go) and when sampling stops. A child of fork()
 * inherits no timers and no pending signals: it forgets them.
 *
 * The handler is installed once, on a signal nobody else handles (the
 * program's own handler on it is never replaced: sampling is refused), with
 * SA_RESTART, and stays installed: a signal generated before a timer was
 * deleted may still be delivered after, and a real-time signal's default
 * action would end the process. It saves and restores errno, takes no lock,
 * calls nothing but loads and stores, and ignores the signal when no timer
 * sent it (si_code is not SI_TIMER).
 *
 * Lock order: the registry lock, then cpu_mu (a leaf). The ring belongs to
 * the thread's state and is freed with it (thread.c).
 */
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A ring of 512 words: 73 samples of a 5-deep stack, and two words for each sample of an unchanged stack. */
#define RING_WORDS 512u
#define SAME_STACK (1ull << 63) /* in a record's second word: no frames, the stack of the thread's last record */

struct lp__cpu_ring {
  _Atomic uint32_t head;     /* words written (the handler); wraps */
  _Atomic uint32_t tail;     /* words read (the collector, under its sampling lock) */
  _Atomic uint64_t lost;     /* samples dropped because the ring was full (the handler) */
  uint64_t last_word;        /* the handler's: the stack word of its last record (__atomic, relaxed: a start resets it) */
  uint64_t lost_seen;        /* the collector's: `lost` at its last drain */
  uint64_t words[RING_WORDS];
};

static pthread_mutex_t cpu_mu = PTHREAD_MUTEX_INITIALIZER;
static bool running;          /* cpu_mu */
static bool timers;           /* timers are made (not for a manual profile: its samples come from tests) (cpu_mu) */
static int signo;             /* the signal the timers send (cpu_mu); 0 until installed */
static bool installed;        /* the handler is on signo (cpu_mu) */
static uint64_t period;       /* ns of CPU between samples (cpu_mu) */
static uint64_t rng;          /* first expiries (cpu_mu) */
static _Atomic uint64_t untimed; /* threads whose timer could not be made, since the process started */

/* ---- the handler: on the sampled thread ------------------------------------------ */

/* Appends a sample of `count` periods of the calling thread's CPU to its ring. Async-signal-safe. */
static void record(uint64_t count) {
  lp__thread_t *t = lp__thread_current();
  if (!t) return; /* not registered, or exiting */
  lp__cpu_ring_t *r = atomic_load_explicit(&t->cpu_ring, memory_order_acquire);
  if (!r) return;
  /* The thread is stopped here: its own stack, read in program order, is whole. */
  uint64_t word = LP_IMPL_LOAD_RELAXED(t->hot.word);
  uint32_t depth = (uint32_t)word & LP_IMPL_DEPTH_MASK;
  uint32_t n = depth < LP_STACK_CAPACITY ? depth : LP_STACK_CAPACITY;
  bool same = word == __atomic_load_n(&r->last_word, __ATOMIC_RELAXED);
  uint32_t need = 2 + (same ? 0 : n);
  uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  if (RING_WORDS - (head - tail) < need) {
    /* The collector is far behind: count it, and make the next record whole. */
    atomic_store_explicit(&r->lost, atomic_load_explicit(&r->lost, memory_order_relaxed) + 1, memory_order_relaxed);
    __atomic_store_n(&r->last_word, LP__NO_WORD, __ATOMIC_RELAXED);
    return;
  }
  if (count > 0xffffffffull) count = 0xffffffffull;
  r->words[head % RING_WORDS] = word;
  r->words[(head + 1) % RING_WORDS] = count | (uint64_t)depth << 32 | (same ? SAME_STACK : 0);
  for (uint32_t k = 0; k < (same ? 0 : n); k++)
    r->words[(head + 2 + k) % RING_WORDS] = (uint64_t)LP_IMPL_LOAD_RELAXED(t->hot.frames[k]);
  __atomic_store_n(&r->last_word, word, __ATOMIC_RELAXED);
  atomic_store_explicit(&r->head, head + need, memory_order_release);
}

static void on_signal(int sig, siginfo_t *si, void *ctx) {
  (void)sig;
  (void)ctx;
  int saved = errno;
  if (si && si->si_code == SI_TIMER) record(1 + (uint64_t)(si->si_overrun > 0 ? si->si_overrun : 0));
  errno = saved;
}

void lp__cpu_test_sample(uint32_t count) { record(count); }

/* ---- timers ------------------------------------------------------------------- */

bool lp__cpu_signal_ok(int sig) {
  return sig == SIGPROF || sig == SIGVTALRM || sig == SIGALRM || sig == SIGUSR1 || sig == SIGUSR2 ||
         (sig >= SIGRTMIN && sig <= SIGRTMAX);
}

int lp__cpu_default_signal(void) { return SIGRTMAX - 4; }

static bool ours(const struct sigaction *sa) {
  return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_signal;
}

/* Puts the handler on sig, unless the program handles or ignores it. cpu_mu held. */
static int install(int sig) {
  struct sigaction old, sa;
  if (sigaction(sig, NULL, &old) != 0) return -errno;
  if (ours(&old)) return 0;
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) {
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) return -errno;
    return 0;
  }
  return -EEXIST;
}

/* A ring for t, and a timer on its CPU clock firing every period of its CPU. cpu_mu held. */
static int arm(lp__thread_t *t) {
  if (t->cpu_timed || t->cpu_gone) return 0;
  lp__cpu_ring_t *r = atomic_load_explicit(&t->cpu_ring, memory_order_relaxed);
  if (!r) {
    r = lp__calloc(1, sizeof *r);
    if (!r) return -ENOMEM;
    r->last_word = LP__NO_WORD;
    atomic_store_explicit(&t->cpu_ring, r, memory_order_release);
  }
  if (!timers) return 0;
  if (!t->cpu_clock_ok) return -EINVAL;
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = signo;
#ifdef sigev_notify_thread_id
  sev.sigev_notify_thread_id = (pid_t)t->tid;
#else
  sev._sigev_un._tid = (pid_t)t->tid;
#endif
  if (timer_create(t->cpu_clock, &sev, &t->cpu_timer) != 0) return -errno;
  /* The first expiry anywhere in the first period of CPU, as the collector places its ticks. */
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  uint64_t first = 1 + (uint64_t)(((unsigned __int128)(rng >> 11) * period) >> 53);
  struct itimerspec its = {{(time_t)(period / 1000000000u), (long)(period % 1000000000u)},
                           {(time_t)(first / 1000000000u), (long)(first % 1000000000u)}};
  if (timer_settime(t->cpu_timer, 0, &its, NULL) != 0) {
    int rc = -errno;
    (void)timer_delete(t->cpu_timer);
    return rc;
  }
  t->cpu_timed = true;
  return 0;
}

/* cpu_mu held. */
static void disarm(lp__thread_t *t) {
  if (!t->cpu_timed) return;
  (void)timer_delete(t->cpu_timer); /* fails only for a timer that does not exist */
  t->cpu_timed = false;
}

static void arm_or_count(lp__thread_t *t) {
  if (arm(t) != 0) atomic_fetch_add_explicit(&untimed, 1, memory_order_relaxed);
}

int lp__cpu_start(int sig, uint64_t period_ns, bool with_timers) {
  if (!lp__cpu_signal_ok(sig) || period_ns == 0) return -EINVAL;
  lp__registry_lock();
  lp__lock(&cpu_mu);
  int rc = 0;
  if (running) goto out; /* the first start's signal and period hold */
  if (installed && sig != signo) { /* a handler stays where it was put; another signal needs its own */
    installed = false;
  }
  if ((rc = install(sig)) != 0) goto out;
  installed = true;
  signo = sig;
  period = period_ns;
  rng ^= lp__mono_ns();
  running = true;
  timers = with_timers;
  for (lp__thread_t *t = lp__registry_head(); t; t = t->next) {
    lp__cpu_ring_t *r = atomic_load_explicit(&t->cpu_ring, memory_order_acquire);
    if (r) { /* what an earlier run left (the collector is not draining: the caller holds its sampling lock) */
      atomic_store_explicit(&r->tail, atomic_load_explicit(&r->head, memory_order_acquire), memory_order_release);
      /* The new run has not seen the stack of the last record: the next one carries its frames. */
      __atomic_store_n(&r->last_word, LP__NO_WORD, __ATOMIC_RELAXED);
    }
    arm_or_count(t);
  }
out:
  lp__unlock(&cpu_mu);
  lp__registry_unlock();
  return rc;
}

void lp__cpu_stop(void) {
  lp__registry_lock();
  lp__lock(&cpu_mu);
  running = false;
  for (lp__thread_t *t = lp__registry_head(); t; t = t->next) disarm(t);
  lp__unlock(&cpu_mu);
  lp__registry_unlock();
}

int lp__cpu_signal(void) {
  lp__lock(&cpu_mu);
  int s = running ? signo : 0;
  lp__unlock(&cpu_mu);
  return s;
}

bool lp__cpu_handler_kept(void) {
  struct sigaction sa;
  lp__lock(&cpu_mu);
  int s = running ? signo : 0;
  lp__unlock(&cpu_mu);
  return !s || (sigaction(s, NULL, &sa) == 0 && ours(&sa));
}

uint64_t lp__cpu_untimed(void) { return atomic_load_explicit(&untimed, memory_order_relaxed); }

void lp__cpu_thread_joined(lp__thread_t *t) {
  lp__lock(&cpu_mu);
  if (running) arm_or_count(t);
  lp__unlock(&cpu_mu);
}

void lp__cpu_thread_exit(lp__thread_t *t) {
  lp__lock(&cpu_mu);
  if (t->cpu_timed) {
    /* Blocked first: a signal already pending then dies with the thread instead of finding its state half gone. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    (void)pthread_sigmask(SIG_BLOCK, &set, NULL); /* fails only for a bad argument */
  }
  disarm(t);
  t->cpu_gone = true;
  lp__unlock(&cpu_mu);
}

/* ---- the collector's side ------------------------------------------------------- */

uint64_t lp__cpu_drain(lp__thread_t *t, void (*take)(void *arg, const lp__cpu_sample_t *s), void *arg) {
  lp__cpu_ring_t *r = atomic_load_explicit(&t->cpu_ring, memory_order_acquire);
  if (!r) return 0;
  uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
  uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  const lp_site_t *frames[LP_STACK_CAPACITY + 1];
  while (tail != head) {
    lp__cpu_sample_t s;
    s.word = r->words[tail % RING_WORDS];
    uint64_t meta = r->words[(tail + 1) % RING_WORDS];
    s.count = (uint32_t)meta;
    s.depth = (uint32_t)(meta >> 32) & LP_IMPL_DEPTH_MASK;
    s.n = 0;
    s.frames = NULL;
    tail += 2;
    if (!(meta & SAME_STACK)) {
      s.n = s.depth < LP_STACK_CAPACITY ? s.depth : LP_STACK_CAPACITY;
      for (uint32_t k = 0; k < s.n; k++)
        frames[k] = (const lp_site_t *)(uintptr_t)(r->words[(tail + k) % RING_WORDS] &
                                                    ~(uint64_t)(LP_IMPL_TRACED | LP_IMPL_NOTIFIED));
      tail += s.n;
      if (s.depth > LP_STACK_CAPACITY) frames[s.n++] = &lp__truncated_site;
      s.frames = frames;
    }
    take(arg, &s);
  }
  atomic_store_explicit(&r->tail, tail, memory_order_release);
  uint64_t lost = atomic_load_explicit(&r->lost, memory_order_relaxed), fresh = lost - r->lost_seen;
  r->lost_seen = lost;
  return fresh;
}

/* ---- fork --------------------------------------------------------------------- */

void lp__cpu_atfork_prepare(void) { lp__lock(&cpu_mu); }
void lp__cpu_atfork_parent(void) { lp__unlock(&cpu_mu); }

void lp__cpu_atfork_child(void) {
  /* The child has no timers and no pending signals of the parent's; its one thread's timer is forgotten. */
  running = false;
  lp__thread_t *self = lp__thread_current();
  if (self) {
    self->cpu_timed = false;
    lp__cpu_ring_t *r = atomic_load_explicit(&self->cpu_ring, memory_order_relaxed);
    if (r) atomic_store_explicit(&r->tail, atomic_load_explicit(&r->head, memory_order_relaxed), memory_order_relaxed);
  }
  lp__unlock(&cpu_mu);
}
