/*
 * internal.h: private to the library, never installed.
 *
 * The files of lib/ in layers, top first. A file calls only files below it
 * and uses only their variables (those of one layer call neither way), so no
 * file reaches back to itself through what it calls. Where a lower file
 * must reach an upper one, the upper one installs a hook (the registry's
 * hooks for thread exit and rename). The one exception is lp_impl_self,
 * which every label reads: it is defined in lifecycle.c so that a static
 * link that uses a label pulls in the constructor. tests/layering.sh reads
 * this list and checks it on the objects the build made: a file of lib/ in
 * no layer, or a call to a file of the same layer or one above, fails it.
 * One layer a line: its files first, separated by commas, then what they
 * hold; a line indented further goes on with the one above.
 *
 *   lifecycle.c   the top: the constructor, fork and thread exit across modules, and the
 *                 public entry points that start something (lp_profile_start, lp_trace_start,
 *                 lp_track_create, lp_stream_*, lp_tp_register, lp_subscriber_create), which
 *                 make sure of the fork handlers first; nothing below starts the library
 *   env.c         LABELPROF_* sessions; reports at exit and on a signal
 *   intern.c      names made at run time (NVTX, ITT): sites interned by text, with a
 *                 per-thread cache in front of a shared table
 *   layers.c      LP_PHASE_SWITCH's calls: a scope's begin and end, as the program's are
 *   cold.c        a label's cold paths: the thunks, the recording protocol's calls, and the
 *                 general begin and LP_END, which send a label to the subscribers, the
 *                 timeline or the registry as its thread's levels say
 *   subs.c        streams, events, subscribers and their callbacks; LABELPROF_SUBSCRIBERS;
 *                 lp_impl_leave_slow() and the pseudo-stack's slow end (a heal, the pop of
 *                 a notified or recorded frame), which call the timeline and the marker
 *   pprof.c       the profile as pprof's profile.proto (lp_profile_write_pprof)
 *   collector.c   the profile: sessions, the sampling thread
 *   cpu.c         CPU samples: each thread's CPU timer, its signal handler and ring
 *   trace.c       the timeline: sessions, chunks, lanes, tracks; lp_impl_levels' value
 *   stream.c      the Perfetto stream's writer thread and files (trace.c hands it chunks)
 *   stream_encode.c   the Perfetto stream's encoder, on export_perfetto.c's packets
 *   export_json.c, export_systrace.c, export_perfetto.c
 *                 a session written at once as JSON, systrace text, Perfetto protobuf
 *   walk.c        the lane walker: a session's lanes as every format sees them
 *   marker.c      the live trace_marker
 *   stack.c       the pseudo-stack's push and LP_END slow paths, and its reader
 *   thread.c      the registry of threads; the threads' levels and their drops counted by
 *                 pushes; lp__forked_child()
 *   attach.c      the registry as a reader outside the process sees it (`labelprof top PID`)
 *   tree.c, clock.c, json.c, output.c, names.c, pprof_enc.c
 *                 the profile's tree, the clock, the buffered writer, output files, levels',
 *                 layers' and phases' names and tags, profile.proto and gzip (also compiled
 *                 into the command)
 *   pb.c          the protobuf writer, of Perfetto's files and of profile.proto (also
 *                 compiled into the command)
 *   jsonesc.c     JSON strings and UTF-8 (also compiled into the command)
 *   util.c        locks, threads, allocation, numbers
 *
 * Lock order, outermost first; nothing takes them the other way round:
 *   profile control (collector.c) > sampling (collector.c) > registry (thread.c) > CPU timers (cpu.c)
 *   env (env.c) > profile control;  env > trace (trace.c); fork does not take env
 * The registry lock and the trace lock are never held together: thread exit
 * runs the trace's hook before it takes the registry lock, and the trace
 * reads the registry's totals before it takes its own. fork() takes every
 * lock in this order (lifecycle.c).
 * subs.c's locks (streams, events, subscribers) are leaves: nothing else is
 * taken while one is held, and no callback runs under one; fork takes them
 * before all the others.
 * intern.c's names lock is a leaf too (it guards the table of names made at
 * run time); fork takes it after all the others but one.
 * thread.c's levels lock is the last leaf: the threads' copies of
 * lp_impl_levels and the registry's list, which it walks to write them. It
 * is taken under the trace lock, the subscribers' and the registry's (whose
 * list changes under both); fork takes it last.
 */
#ifndef LABELPROF_INTERNAL_H
#define LABELPROF_INTERNAL_H

#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* The library's own units need no check of the header's ABI against themselves (labelprof/impl.h). */
#define LP_IMPL_LIBRARY 1
#include "labelprof.h"
#include "index.h"   /* the one small hash table */
#include "jsonesc.h"
#include "pb.h"
#include "testing.h" /* the hooks the tests reach the library through */

#define LP__NAME_MAX 64
/* Depths stop growing here; a push beyond it is counted and ignored. Below LP_IMPL_TRACED_MARK. */
#define LP__DEPTH_LIMIT 0x7ff0u
/* The numbers of the protocol (labelprof/impl.h) that the library relies on beside the header's code. */
_Static_assert(LP__DEPTH_LIMIT < LP_IMPL_NOT_PUSHED && LP_IMPL_NOT_PUSHED < LP_IMPL_TRACED_MARK &&
                   LP_IMPL_TRACED_MARK <= LP_IMPL_DEPTH_MASK && LP_STACK_CAPACITY < LP__DEPTH_LIMIT,
               "depths, the marked word and the unpushed one stay apart in the word's low 16 bits");
_Static_assert(LP_IMPL_COUNT_ONE == 1u << LP_IMPL_COUNT_SHIFT && LP_IMPL_COUNT_ONE == LP_IMPL_DEPTH_MASK + 1u,
               "a push adds one to the depth and one to the change counter above it");
_Static_assert(LP_IMPL_EV_BEGIN == 0 && LP_IMPL_EV_END == 1 && LP_IMPL_EV_KIND == 7 && LP_IMPL_TRACED == 1 &&
                   LP_IMPL_NOTIFIED == 2,
               "event kinds in a tag's low bits, marks in a frame's, below a site's 8-byte alignment");
_Static_assert((LP_IMPL_NOT_PLAIN & LP_LEVEL_ALL) == 0 && (LP_IMPL_SUBS_TRACED & LP_IMPL_NOT_PLAIN) == 0,
               "the levels' own bits are apart from the levels");
/* A word no thread publishes: its depth bits are all ones. */
#define LP__NO_WORD UINT64_MAX
#define LP__NONE UINT32_MAX

/* Who started a session: the program through the public API, or the environment. They nest. */
typedef enum lp__owner { LP__PROGRAM = 0, LP__ENV = 1, LP__OWNERS = 2 } lp__owner_t;

/* ---- util.c ------------------------------------------------------------- */

/* "labelprof: MESSAGE" and a newline on stderr, the one way the library tells the user something. */
void lp__warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A pthread call that cannot fail unless memory is corrupt: report and abort. */
void lp__fatal(const char *what, int rc);
void lp__lock(pthread_mutex_t *m);
void lp__unlock(pthread_mutex_t *m);
/*
 * Starts a helper thread of the library (joinable) with every signal
 * blocked, so that none meant for the program lands there, and names it
 * (cosmetic: top and gdb show it). 0, or a negative errno from
 * pthread_create.
 */
int lp__thread_spawn(pthread_t *th, void *(*fn)(void *), void *arg, const char *name);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t lp__mono_ns(void);
/* Decimal digits of n, into buf (at least 21 bytes); their count. */
size_t lp__decimal(char *buf, unsigned long long n);
/* a + b, or SIZE_MAX when it would not fit (then no allocation is tried). */
size_t lp__size_add(size_t a, size_t b);
/* path with each %n as number and %% as % (a report's file, a rotated stream's). NULL on ENOMEM. */
char *lp__path_numbered(const char *path, unsigned number);
/* Whether path has a %n (not a %%n). */
bool lp__path_has_number(const char *path);
/* A signal's name as reports write it: SIGPROF, SIGUSR1, SIGRTMAX-4, SIGRTMIN+2, or "signal N". Returns buf. */
const char *lp__signal_name(int sig, char *buf, size_t len);
/* Adds one to a counter that only the calling thread writes (no read-modify-write). */
static inline void lp__bump(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* ---- thread.c: the registry ------------------------------------------- */

typedef struct lp__thread lp__thread_t;
typedef struct lp__lane lp__lane_t;
typedef struct lp__cpu_ring lp__cpu_ring_t;
typedef struct lp__attach_slot lp__attach_slot_t;
struct lp__thread {
  lp_impl_thread_t hot; /* first: lp_impl_self points here */
  lp__thread_t *next, *prev; /* registry list; registry lock */
  uint64_t tid;
  char name[LP__NAME_MAX]; /* written by the owner under the registry lock */
  uint32_t name_gen;       /* registry lock */
  lp__attach_slot_t *attach_slot; /* its slot for readers outside the process (attach.c), NULL if none; registry lock */
  /* Instrumentation mistakes; the owner writes, anyone reads. */
  _Atomic uint64_t truncated, mismatched, unmatched;
  /* The collector's: which run's aggregation has this thread, and where (sampling lock). */
  uint64_t prof_run;
  uint32_t prof_slot;
  /* The thread's CPU clock (pthread_getcpuclockid at attach); cpu_clock_ok false if it has none. */
  clockid_t cpu_clock;
  bool cpu_clock_ok;
  /*
   * CPU samples (cpu.c): the ring the thread's signal handler fills, made
   * with its first timer and freed with the state (thread.c); the timer on
   * the thread's CPU clock, and whether it exists or may still be made
   * (cpu.c's lock).
   */
  lp__cpu_ring_t *_Atomic cpu_ring;
  timer_t cpu_timer;
  bool cpu_timed, cpu_gone;
  /* The trace's: the thread's timeline lane (trace lock). */
  lp__lane_t *lane;
  /*
   * Drops counted by pushes (see labelprof/impl.h, `levels`): the owner
   * writes them under the levels lock, count_seq odd meanwhile; anyone
   * reads them (lp__thread_dropped()).
   */
  _Atomic uint32_t count_seq;
  _Atomic uint32_t counting;   /* 1 while the thread's pushes count its drops */
  _Atomic uint64_t count_base; /* the word's counter when it began, plus the pushes since that dropped nothing */
  uint32_t count_levels;       /* the levels recorded when it began */
  /* ---- layers and phases: the live trace_marker (owner only) ---- */
  bool mark_hidden;                     /* tend holds the cursor, the real end is mark_tend */
  bool mark_switching;                  /* a switch is ending the scope it replaces: no E line */
  bool mark_replaced;                   /* ...and it did (the switch's B gets its [SW]) */
  lp_impl_event_t *mark_tend;
  uint8_t mark_extra[LP_STACK_CAPACITY]; /* E lines owed at this depth's end for scopes switches replaced */
  /* ---- end of layers and phases ---- */
};

/* The shared state of threads that have not used a label yet (read-only, every bit set). */
extern lp_impl_thread_t lp__unattached;

/*
 * The ABI check (labelprof/impl.h, LP_IMPL_ABI): true once a unit built
 * with another number has been loaded. From then on no thread joins, and
 * lp_impl_levels and lp_impl_wanted stay 0.
 */
bool lp__abi_refused(void);
/* Refuses labels from now on (lp_impl_abi_check(), lifecycle.c); true the first time. */
bool lp__abi_refuse(void);

/*
 * The calling thread's state, registering the thread on first use. NULL if
 * the thread has exited (a label used by a late key destructor) or could not
 * be registered.
 */
lp__thread_t *lp__thread_attach(void);
/* The calling thread's state if it is registered, else NULL. Never registers. */
lp__thread_t *lp__thread_current(void);
/* lp__thread_attach(), without a call for a thread that has joined (the shared states' depth is 0xffff). */
static inline lp__thread_t *lp__thread_self(void) {
  lp_impl_thread_t *h = lp_impl_self;
  if (LP_IMPL_LIKELY((LP_IMPL_LOAD_RELAXED(h->word) & LP_IMPL_DEPTH_MASK) != LP_IMPL_DEPTH_MASK))
    return (lp__thread_t *)h;
  return lp__thread_attach();
}

/*
 * What the registry's users want to hear, registered once (lifecycle.c).
 * All run on the thread concerned, with no library lock held.
 */
typedef struct lp__registry_hooks {
  void (*exit)(lp__thread_t *t);    /* before the thread leaves the registry */
  void (*renamed)(lp__thread_t *t); /* after lp_thread_set_name() */
  void (*joined)(lp__thread_t *t);  /* once the thread is in the registry */
} lp__registry_hooks_t;
void lp__registry_set_hooks(const lp__registry_hooks_t *h);

void lp__registry_lock(void);
void lp__registry_unlock(void);
/* The first registered thread; follow ->next. Registry lock held. */
lp__thread_t *lp__registry_head(void);
/*
 * Held: exiting threads are parked instead of freed, because a walker (the
 * collector) may hold pointers it copied from the registry and read them
 * without the lock. Released: what was parked is freed. Registry lock held.
 */
void lp__registry_hold(bool on);
/*
 * Frees parked threads, calling visit on each first (the collector learns
 * which threads exited). Registry lock held, by a walker that keeps no stale
 * pointer. visit may be NULL.
 */
void lp__registry_reap(void (*visit)(lp__thread_t *t, void *arg), void *arg);

/*
 * The threads' levels (labelprof/impl.h): after every store of
 * lp_impl_levels, its value is copied into every registered thread's
 * levels, but that a thread counting its drops by its pushes keeps its own
 * while it may go on (the budget still spent, the same levels recorded, no
 * subscriber), and gets every level and LP_IMPL_LEVELS_STALE otherwise.
 * The levels lock is a leaf: any lock may be held.
 */
void lp__levels_publish(void);
/*
 * The calling thread t found LP_IMPL_LEVELS_STALE in its levels: its count
 * of drops is added up, and it takes lp_impl_levels.
 */
void lp__levels_catch_up(lp__thread_t *t);
/*
 * The calling thread t found LP_IMPL_SPENT in its levels, for a recorded
 * scope: from now on its pushes count its drops, and its levels are those
 * not recorded. False, with t's levels brought up to date, if
 * lp_impl_levels no longer says so.
 */
bool lp__levels_count(lp__thread_t *t);
/*
 * Publishes w, the word of a push or a switch of the calling thread t that
 * dropped no event: left out of its count while it counts. Owner only.
 */
void lp__publish_uncounted(lp__thread_t *t, uint64_t w);
/* The owner's changes of its counting state, between two increments of count_seq (thread.c). */
static inline void lp__count_change_begin(lp__thread_t *t) {
  atomic_store_explicit(&t->count_seq, atomic_load_explicit(&t->count_seq, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
}
static inline void lp__count_change_end(lp__thread_t *t) {
  atomic_store_explicit(&t->count_seq, atomic_load_explicit(&t->count_seq, memory_order_relaxed) + 1,
                        memory_order_release);
}
/* lp__publish_uncounted() of a thread known to count: w published, and left out of the count. Owner only. */
static inline void lp__count_uncounted(lp__thread_t *t, uint64_t w) {
  lp__count_change_begin(t);
  atomic_store_explicit(&t->count_base, atomic_load_explicit(&t->count_base, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  LP_IMPL_STORE_RELEASE(t->hot.word, w);
  lp__count_change_end(t);
}
/* Events t dropped so far: those counted one by one and those counted by pushes. Any thread. */
uint64_t lp__thread_dropped(const lp__thread_t *t);

/* Per-thread counters summed over live and exited threads. */
typedef struct lp__counters {
  uint64_t truncated, mismatched, unmatched; /* instrumentation mistakes */
  uint64_t dropped;                          /* timeline events dropped inline (lp__thread_dropped()) */
} lp__counters_t;
void lp__registry_counters(lp__counters_t *out);

/*
 * The first scope end that did not match, for each profile session: the
 * profile's note names it. A session starts watching (its first not seen
 * yet); the first mismatch after that is kept for it, the later ones only
 * counted. lp__mismatch_note() is called by the thread whose scope ended
 * (a heal); it never waits: while another thread notes one (a try-lock of
 * nanoseconds), a mismatch goes unnamed.
 */
typedef struct lp__mismatch {
  const lp_site_t *ended; /* the scope that ended */
  const lp_site_t *top;   /* the innermost label then, which it did not start; NULL if none is known */
  bool gone;              /* its own frame was already gone: an LP_END() too many had ended it */
} lp__mismatch_t;
void lp__mismatch_watch(lp__owner_t who);
bool lp__mismatch_first(lp__owner_t who, lp__mismatch_t *out);
void lp__mismatch_note(const lp_site_t *ended, const lp_site_t *top, bool gone);

void lp__registry_atfork_prepare(void);
void lp__registry_atfork_parent(void);
/* The first fork handler to run in the child. */
void lp__registry_atfork_child(void);
/* The levels lock across fork: taken last, released first; in the child, right after the registry's. */
void lp__levels_atfork_prepare(void);
void lp__levels_atfork_parent(void);
void lp__levels_atfork_child(void);
/* True in a child created by fork() from a process that had started labelprof (its handlers ran). */
bool lp__forked_child(void);

/* ---- attach.c: the registry as a reader outside the process sees it -------- */

/*
 * All under the registry lock. join gives t a slot (a thread that gets none,
 * out of memory, is not seen from outside); leave empties it, before t is
 * freed. Whatever changes what a slot's thread shows a reader (its name,
 * its tid) is written between change_begin and change_end. Each is a no-op
 * for a thread without a slot.
 */
void lp__attach_join(lp__thread_t *t);
void lp__attach_leave(lp__thread_t *t);
void lp__attach_change_begin(lp__thread_t *t);
void lp__attach_change_end(lp__thread_t *t);
/*
 * LABELPROF_ALLOW_ATTACH=1 (env.c, at load): lets any process of the same
 * user read this one, as kernel.yama.ptrace_scope=0 would
 * (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)). 0, or a negative errno:
 * -EINVAL where the kernel has no Yama (nothing to allow).
 */
int lp__attach_allow(void);

/* ---- stack.c ------------------------------------------------------------ */

/* The stack word w with a smaller depth d, as a pop to d publishes it (the change counter counts pushes only). */
static inline uint64_t lp__with_depth(uint64_t w, uint32_t d) { return (w & ~(uint64_t)LP_IMPL_DEPTH_MASK) + d; }
/*
 * A push of tag by the calling thread t that drops no event while t counts
 * its drops (a scope of a level not recorded): as lp_impl_push(). Owner only.
 */
uint64_t lp__push_uncounted(lp__thread_t *t, uintptr_t tag);
/* LP_END with no frame to pop (an empty stack or one deeper than the frames), by the calling thread t. */
void lp__stack_end_unstored(lp__thread_t *t);

/* Bounded retries of a snapshot whose stack keeps changing under it. */
#define LP__SNAPSHOT_TRIES 8

/*
 * Copies the pseudo-stack of thread t, as it was at one instant. If the
 * stack's word equals known (the word of an earlier snapshot) nothing is
 * copied and 0 is returned: the stack is the one seen then. Otherwise fills
 * frames (at most LP_STACK_CAPACITY sites, tag bits cleared), *depth (the
 * full depth, which may exceed the capacity) and *word, and returns 1.
 * Returns -EAGAIN if the stack changed during every one of the tries.
 */
int lp__stack_snapshot(const lp__thread_t *t, uint64_t known, const lp_site_t **frames, uint32_t *depth,
                       uint64_t *word);

/* ---- cpu.c: CPU samples on each thread's own CPU clock --------------------- */

/*
 * Whether sig may carry CPU samples: PROF, VTALRM, ALRM, USR1, USR2 or a
 * real-time signal. The default is SIGRTMAX - 4.
 */
bool lp__cpu_signal_ok(int sig);
int lp__cpu_default_signal(void);
/*
 * Starts CPU sampling: the handler on sig (once), and a timer on the CPU
 * clock of every registered thread, one signal per period_ns of its CPU.
 * Without with_timers (a manual profile) every thread gets its ring but no
 * timer: its samples come from lp__cpu_test_sample() alone (testing.h).
 * Already running: 0, and the first start's signal and period hold. 0;
 * -EINVAL for a signal lp__cpu_signal_ok() refuses; -EEXIST if the program
 * handles or ignores sig; or a negative errno from sigaction. A thread
 * whose timer cannot be made goes unsampled and is counted
 * (lp__cpu_untimed). The registry lock is not held; the caller holds the
 * collector's sampling lock, so that no drain runs meanwhile.
 */
int lp__cpu_start(int sig, uint64_t period_ns, bool with_timers);
/* Deletes every timer; the handler stays (a signal may still be on its way). Registry lock not held. */
void lp__cpu_stop(void);
/* The signal of the running CPU sampling, 0 if none. */
int lp__cpu_signal(void);
/* Whether the handler is still labelprof's (the program may have put its own on the signal since). */
bool lp__cpu_handler_kept(void);
/* Threads whose timer could not be made, since the process started. */
uint64_t lp__cpu_untimed(void);
/* The registry's hooks: a thread joined (its timer, if sampling runs), a thread exits (on the thread). */
void lp__cpu_thread_joined(lp__thread_t *t);
void lp__cpu_thread_exit(lp__thread_t *t);
/*
 * A CPU sample as drained: the stack word it was taken at, the periods of
 * CPU it weighs, the stack's full depth, and its frames (n of them, with
 * "(deeper than 64 labels)" last for a deeper stack), or NULL when the
 * stack is the one of the thread's previous sample (same word).
 */
typedef struct lp__cpu_sample {
  uint64_t word, count;
  uint32_t depth, n;
  const lp_site_t *const *frames;
} lp__cpu_sample_t;
/*
 * Hands each sample t's handler recorded since the last drain to take, in
 * order; returns the samples lost meanwhile (its ring was full). Under the
 * collector's sampling lock, t alive (copied from the registry, held).
 */
uint64_t lp__cpu_drain(lp__thread_t *t, void (*take)(void *arg, const lp__cpu_sample_t *s), void *arg);
void lp__cpu_atfork_prepare(void);
void lp__cpu_atfork_parent(void);
void lp__cpu_atfork_child(void);

/* ---- tree.c: online aggregation ----------------------------------------- */

/* One node per distinct (thread record, path of call sites). */
typedef struct lp__agg_node {
  const lp_site_t *site; /* NULL for a thread's root, and for a free node */
  uint32_t parent;       /* LP__NONE for a root and a free node */
  uint32_t thread;       /* index into threads; LP__NONE for a free node */
  uint32_t next;         /* the thread's next node in creation order (parents first); the free list */
  uint32_t aux;          /* scratch for merges */
  uint64_t self;         /* samples that stopped here */
  uint64_t cpu_ns;       /* CPU time of the CPU samples that stopped here (cpu.c): periods x the tick */
} lp__agg_node_t;

typedef struct lp__agg_thread {
  uint64_t tid;           /* 0 for a record that merges exited threads */
  char name[LP__NAME_MAX];
  uint32_t name_gen;
  uint32_t root;
  uint32_t first, last;   /* its nodes, in creation order */
  uint32_t merged;        /* exited threads merged into this record; 0 for one thread's own */
  bool exited, free, group; /* group: a record exited threads are merged into */
  uint32_t older;         /* exited records, oldest first (collector.c) */
  uint64_t samples;
  uint64_t last_word; /* the stack word of the last sample, LP__NO_WORD if none */
  uint32_t last_leaf; /* the node that sample ended at */
  uint64_t cpu_word;  /* the same for the last CPU sample that carried its frames */
  uint32_t cpu_leaf;
} lp__agg_thread_t;

typedef struct lp__agg {
  lp__agg_node_t *nodes;
  uint32_t nnodes, capnodes, free_nodes, nfree;
  uint32_t *slots; /* open addressing: node index + 1, 0 = empty */
  uint32_t mask;   /* slots - 1 */
  lp__agg_thread_t *threads;
  uint32_t nthreads, capthreads, free_threads;
  uint64_t samples, skipped, ticks, missed, sampling_ns;
  uint64_t cpu_samples, cpu_lost; /* CPU samples in the tree, and lost (a ring was full, a stack unknown) */
  uint64_t cpu_stopped_ns;        /* when CPU sampling stopped early (its handler was taken), CLOCK_MONOTONIC; 0 */
  bool cpu; /* CPU samples are taken (some session asked for them, cpu.c's timers run) */
} lp__agg_t;

/*
 * A profile session's start: the counts it will subtract. Node and thread
 * counts are indexed like the aggregation's; entries past the end were 0.
 */
typedef struct lp__mark {
  uint64_t *self;
  uint64_t *cpu; /* the nodes' cpu_ns, nself of them like self */
  uint32_t nself;
  uint64_t *tsamples;
  uint32_t nthreads;
  uint64_t samples, skipped, ticks, missed, sampling_ns, cpu_ns, start_ns;
  uint64_t cpu_samples, cpu_lost, cpu_untimed;
  lp__counters_t counters;
} lp__mark_t;

/* The site a truncated stack ends with: "(deeper than 64 labels)". */
extern const lp_site_t lp__truncated_site;

int lp__agg_init(lp__agg_t *a);
void lp__agg_free(lp__agg_t *a);
/* A new thread record with its own root; its index, or -ENOMEM. */
int lp__agg_add_thread(lp__agg_t *a, uint64_t tid, const char *name);
/* The node for this path under root, created as needed; LP__NONE if out of memory. */
uint32_t lp__agg_path(lp__agg_t *a, uint32_t root, const lp_site_t *const *frames, uint32_t n);
/*
 * Moves thread record `from` (an exited thread) into record `to`: its
 * samples go to the same paths under `to`, its nodes and record are freed
 * for reuse, and the marks follow the counts they subtract. -ENOMEM leaves
 * everything as it was.
 */
int lp__agg_merge(lp__agg_t *a, uint32_t from, uint32_t to, lp__mark_t *const *marks, size_t nmarks);
/* Bytes held by the aggregation. */
size_t lp__agg_bytes(const lp__agg_t *a);
/* Records in use. */
uint32_t lp__agg_records(const lp__agg_t *a);

int lp__mark_take(lp__mark_t *m, const lp__agg_t *a);
void lp__mark_free(lp__mark_t *m);

/*
 * Builds the finished profile from what the aggregation holds beyond mark
 * (label texts merged, counts summed, children sorted). NULL on ENOMEM.
 */
lp_profile_t *lp__profile_build(const lp__agg_t *a, const lp__mark_t *mark, const lp_profile_stats_t *stats);
/* Names the profile's first mismatched end in its note (the texts copied). 0 or -ENOMEM. */
int lp__profile_name_mismatch(lp_profile_t *p, const lp__mismatch_t *m);
/* Whether the collector kept under 90% of the rate asked for; the achieved and requested rates. */
bool lp__profile_rate_low(const lp_profile_t *p, double *achieved, uint32_t *requested);

/* ---- collector.c ------------------------------------------------------- */

/*
 * Profile sessions. The collector runs once for all of them; a session is a
 * mark of the counts at its start, and its profile is what was added since.
 * A second start by the same owner while its session runs is -EBUSY.
 */
int lp__profile_start(lp__owner_t who, const lp_profile_opts_t *opts);
int lp__profile_stop(lp__owner_t who, lp_profile_t **out);
/* The profile so far, without stopping (a dump). -EINVAL if who has no running session. */
int lp__profile_peek(lp__owner_t who, lp_profile_t **out);
bool lp__profile_running(lp__owner_t who);

void lp__collector_atfork_prepare(void);
void lp__collector_atfork_parent(void);
void lp__collector_atfork_child(void);

/* ---- clock.c ------------------------------------------------------------ */

/* A (ticks, CLOCK_MONOTONIC ns) pair read back to back. */
typedef struct lp__sync {
  uint64_t ticks, ns;
} lp__sync_t;

/*
 * Sets the clock LABELPROF_CLOCK asked for (env.c, at load); it overrides
 * what the first session asks. LP_CLOCK_AUTO when the variable is unset.
 */
void lp__clock_set_env(lp_clock_t c);
/*
 * Chooses the tick source, once per process: the first call decides (want is
 * the first timeline's option; LABELPROF_CLOCK overrides it), later calls
 * change nothing. Called when a timeline starts, before its first event. In
 * auto mode it may run the counter check (at most 20 ms).
 */
void lp__clock_choose(lp_clock_t want);
/* Events are stamped with the CPU's counter (TSC, CNTVCT_EL0). Chooses with LP_CLOCK_AUTO if not yet chosen. */
bool lp__clock_is_counter(void);
/* "tsc", "cntvct" or "clock_gettime". */
const char *lp__clock_name(void);
/*
 * Why: one line for otherData, e.g. "tsc (the kernel's clocksource)",
 * "tsc (verified: 2 CPUs, max skew 0 ns, rate within 3 ppm)",
 * "clock_gettime (the TSC is not invariant)", "clock_gettime (LABELPROF_CLOCK=monotonic)".
 */
const char *lp__clock_reason(void);
/* How long the counter check took when it ran, in ns (0 if it did not run). */
uint64_t lp__clock_check_ns(void);
/* A sync pair: the tightest of a few (counter, CLOCK_MONOTONIC, counter) brackets. */
lp__sync_t lp__clock_sync(void);

/*
 * Ticks to ns. Built at export from every sync point of the session; each
 * event is mapped through the points of the stretch of time its own chunk's
 * sync point belongs to, so that a jump of the counter against
 * CLOCK_MONOTONIC (a VM migrated or restored, a TSC write) costs accuracy
 * only inside the chunk where it happened, and mapped time never goes
 * backwards within a chunk.
 */
typedef struct lp__timemap lp__timemap_t;
/* Builds a map from n points (pts may be reordered). NULL on ENOMEM. */
lp__timemap_t *lp__timemap_new(lp__sync_t *pts, size_t n);
void lp__timemap_free(lp__timemap_t *m);
/*
 * ns for ticks read in the chunk whose sync point is anchor (one of the
 * points given to lp__timemap_new). cursor: a per-lane hint, 0 to start.
 */
uint64_t lp__timemap_ns(const lp__timemap_t *m, uint64_t ticks, lp__sync_t anchor, size_t *cursor);
/*
 * The same, and the line it took: seg then maps the chunk's later ticks in
 * [lo, lo + span) inline (lp__timeseg_ns). The range ends where the
 * segment does and before the first tick the line would put at or past its
 * epoch's end, so a tick in it needs no other test. An empty range when
 * there is no such line (before the map's first point, past an epoch's end).
 */
typedef struct lp__timeseg {
  uint64_t lo, span, t0, ns0, whole, frac;
} lp__timeseg_t;
#define LP__TIMESEG_NONE ((lp__timeseg_t){0, 0, 0, 0, 0, 0})
uint64_t lp__timemap_ns_seg(const lp__timemap_t *m, uint64_t ticks, lp__sync_t anchor, size_t *cursor,
                            lp__timeseg_t *seg);
/* ns for ticks on seg's line; false when ticks is not in its range (then ask lp__timemap_ns_seg). */
static inline bool lp__timeseg_ns(const lp__timeseg_t *s, uint64_t ticks, uint64_t *ns) {
  if (ticks - s->lo >= s->span) return false; /* below lo, the difference wraps */
  uint64_t d = ticks - s->t0;
  *ns = s->ns0 + d * s->whole + (uint64_t)(((unsigned __int128)d * s->frac) >> 64);
  return true;
}
/* The number of jumps found between sync points, and a one-line description of the largest (NULL if none). */
size_t lp__timemap_jumps(const lp__timemap_t *m);
const char *lp__timemap_jump_text(const lp__timemap_t *m);

/* ---- output.c: writing a report file ------------------------------------ */

/*
 * One place that opens, writes and atomically replaces output files (the
 * timeline's JSON, the environment's reports).
 *
 * A regular file (or a path that does not exist yet) is written to a
 * temporary file in the same directory, whose name always fits the file
 * system's limits, and renamed over the target only when every write has
 * succeeded; the temporary is removed on any failure. The replaced file's
 * permission bits (and, where allowed, its owner and group) are kept; a
 * replaced hard link becomes a new file. Symbolic links are followed to
 * their target. /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, and
 * symbolic links to any of them, write to that descriptor at its current
 * offset; pipes, FIFOs and devices are written directly.
 *
 * From open to close, SIGPIPE and SIGXFSZ are blocked on the calling thread,
 * so that a pipe without a reader gives -EPIPE and RLIMIT_FSIZE gives -EFBIG
 * instead of killing the process; close consumes what the writes raised
 * (never one that was pending before) and restores the mask. The process's
 * signal dispositions are never changed.
 */
typedef struct lp__output {
  int fd; /* write here */
  /* private */
  int dirfd;      /* the target's directory (O_PATH), or -1 when writing directly */
  char *final;    /* the target's name in dirfd, or NULL when writing directly */
  char tmp[48];   /* the temporary's name in dirfd while it has one, else "" */
  bool tmpfile;   /* fd is an O_TMPFILE, given the name tmp at close */
  FILE *stream;
  int stream_err; /* the stream's first write error (negative errno), 0 if none */
  bool masked;    /* old_mask is to be restored */
  sigset_t old_mask, pending_before;
} lp__output_t;

/*
 * Opens path. Returns 0, or a negative errno (then nothing is left behind and
 * o needs no close). Opening a FIFO waits for its reader. Call open, write
 * and close on one thread: the signal mask is the calling thread's.
 */
int lp__output_open(lp__output_t *o, const char *path);
/*
 * A stdio stream that writes to o->fd (for reports printed with stdio); the
 * same stream on every call. NULL with errno set (ENOMEM). Closed by
 * lp__output_close, which reports the first write error with its errno. The
 * stream refers to o: o must not be moved or copied while it is open.
 */
FILE *lp__output_stream(lp__output_t *o);
/*
 * Flushes the stream if there is one, closes, and commits (rc == 0) or
 * removes the temporary (rc != 0). Returns rc if it is an error, else the
 * first error of flushing, closing or committing.
 */
int lp__output_close(lp__output_t *o, int rc);

/* ---- pprof.c: the profile as profile.proto, gzipped --------------------- */

/* The file and line of the first call site that made node n (NULL and 0 for a root). tree.c. */
void lp__node_site(const lp_node_t *n, const char **file, uint32_t *line);
/* When p was built (its stop), CLOCK_REALTIME ns. tree.c. */
uint64_t lp__profile_end_real_ns(const lp_profile_t *p);
/* lp_profile_write_pprof() to a stream. */
int lp__profile_write_pprof_stream(const lp_profile_t *p, FILE *out);

/* ---- names.c: levels, layers and phases, by name ------------------------------ */

/* "runtime", "operator"...: an LP_LEVEL_* bit's name ("labelprof" for anything else). */
const char *lp__level_name(uint32_t level);
/* A site's category when it has no layer: a name made at run time, its domain (NVTX, ITT); else its level's name. */
const char *lp__site_category(const lp_site_t *site);
/* The names of the bits of levels, "request,runtime,...", into buf (size bytes); its length. */
size_t lp__levels_text(uint32_t levels, char *buf, size_t size);

/* The low bits of a frame that are not the site's address (the site is 8-byte aligned). */
#define LP__FRAME_BITS 0x7u
/* The longest systrace tag: "[SUB][NN_LA_PWU]". */
#define LP__TAG_MAX 24
/* Systrace codes: "LR", "PCO"; NULL out of range (LP_LAYER_NONE has none). */
const char *lp__layer_tag(int layer);
const char *lp__phase_tag(int phase);
/* Whether a site carries a known layer and phase. */
bool lp__site_has_layer(const lp_site_t *site);
/* Writes the site's systrace tag ("[SW][NN_LC_PCO]") into buf (LP__TAG_MAX bytes); its length, 0 for none. */
size_t lp__site_tag(const lp_site_t *site, char *buf, size_t size);
/* Whether a frame is a switch's, whose end is already recorded: the replaced scope's end pops it quietly. */
bool lp__switch_frame(uintptr_t frame);

/* ---- marker.c: the live trace_marker ---------------------------------------- */

/*
 * The live trace_marker (LABELPROF_TRACE_MARKER). While it is open, every
 * recording thread's tend equals its cursor, so that every begin,
 * end, instant and counter takes the slow path; the slow paths unhide the
 * real limits (kept in the thread), record, write the marker line, and hide
 * them again. lp__marker_fd is set once, before any timeline starts.
 */
extern int lp__marker_fd;
/* Opens the marker ("1": the kernel's trace_marker) ; 0 or a negative errno, with a message in why. */
int lp__marker_open(const char *value, char *why, size_t why_len);
void lp__marker_unhide(lp__thread_t *t);
void lp__marker_hide(lp__thread_t *t);
/* One B line for site at depth d, or n E lines. */
void lp__marker_begin(lp__thread_t *t, const lp_site_t *site, uint32_t d);
void lp__marker_end(lp__thread_t *t, uint32_t d);
void lp__marker_atfork_child(void);

/* ---- trace.c: recording ------------------------------------------------- */

#define LP__CHUNK_BYTES 16384u
#define LP__EV_TRACK 0x4u   /* a track's work: ts = start ns, tag = name id << 3 | 4; then a payload */
#define LP__EV_PAYLOAD 0x7u /* the second slot of a counter or track event, or padding */
#define LP__MAX_TRACKS 4096
#define LP__MAX_WORK_NAMES 65536 /* distinct work names per track and recording */
/* The site pointer of a begin or end tag (the depth is in the top byte). */
#define LP__TAG_SITE(tag) ((const lp_site_t *)((tag) & (UINTPTR_MAX >> 8) & ~(uintptr_t)LP_IMPL_EV_KIND))
#if UINTPTR_MAX > 0xffffffffu
#define LP__TAG_DEPTH(tag) ((uint32_t)((tag) >> LP_IMPL_DEPTH_SHIFT))
_Static_assert(LP__TAG_DEPTH(LP_IMPL_DEPTH_TAG(300u)) == 255u &&
                   LP__TAG_DEPTH(LP_IMPL_FRAME_TAG(LP_STACK_CAPACITY - 1)) == LP_STACK_CAPACITY - 1 &&
                   ((LP_IMPL_DEPTH_TAG(255u) | LP_IMPL_EV_KIND) & (UINTPTR_MAX >> 8) & ~(uintptr_t)LP_IMPL_EV_KIND) == 0,
               "a tag's depth, as the recorders write it, and its site apart from it");
#else
#define LP__TAG_DEPTH(tag) 255u
#endif

/*
 * A track item's payload slot holds its duration, and in its tag the ticks
 * when it was recorded: an item belongs to the sessions that were recording
 * then, whatever device times it carries.
 */
static inline uintptr_t lp__track_payload_tag(uint64_t ticks) { return (uintptr_t)(ticks << 3) | LP__EV_PAYLOAD; }
static inline uint64_t lp__track_recorded(lp_impl_event_t payload) { return (uint64_t)(payload.tag >> 3); }

typedef struct lp__chunk lp__chunk_t;
struct lp__chunk {
  lp__chunk_t *next;          /* the lane's chunks, oldest first; the pool's free list */
  lp__chunk_t *older, *newer; /* every chunk in a lane, in the order it was started (ring mode reuses the oldest) */
  lp__lane_t *lane;           /* NULL in the pool, and for a chunk only an export still holds */
  lp__sync_t sync;            /* read when the chunk was started */
  uint32_t count;             /* events written, once the filler has moved on (trace lock) */
  uint32_t payloads;          /* payload slots among them: written by the filler, read once it is closed */
  uint32_t pins;              /* exports reading it (trace lock): not reused or freed while nonzero */
  uint32_t pad_;
  lp_impl_event_t ev[];
};
#define LP__CHUNK_EVENTS ((LP__CHUNK_BYTES - sizeof(lp__chunk_t)) / sizeof(lp_impl_event_t))

struct lp__lane {
  lp__lane_t *next, *prev; /* thread lanes, in the order they first recorded (trace lock) */
  lp__thread_t *owner;     /* NULL once the thread has exited, and for tracks */
  uint64_t tid;            /* the kernel's, or a synthetic one for a track */
  char *name;              /* owned */
  lp__chunk_t *first, *last;
  bool track;              /* a virtual track, not a thread */
  bool lost;               /* ring: a chunk of it was reused in this recording */
  /* Tracks only: the write cursor and the interned work names (trace lock). */
  lp_impl_event_t *cur, *lim;
  char **names;
  uint32_t nnames, capnames;
  lp__index_t name_index;
  /* LP_TRACE_STREAM: slots of its first chunk already written, and the writer's state for it (trace lock). */
  uint32_t streamed;
  struct lp__pfs_lane *stream;
  /* The writer's own, for the statistics: whether an event of the lane has reached the stream's files (or waits
     in the encoder, on the writer's list of such lanes through stream_pending, to be counted if it does). */
  enum { LP__STREAM_UNWRITTEN, LP__STREAM_PENDING, LP__STREAM_WRITTEN } stream_state;
  lp__lane_t *stream_pending;
};

/*
 * Where a chunk stands against a session's window [start, stop]. A chunk
 * spans from its sync point to the next chunk's of its lane (end_ns,
 * UINT64_MAX for a lane's last chunk); all of that is compared in
 * CLOCK_MONOTONIC ns, since raw ticks compare only within a stretch of time
 * without a clock jump. A chunk wholly on one side of a bound is decided at
 * once; only one that straddles it (at most one per lane and bound) is
 * decided event by event.
 */
enum { LP__NONE_IN = 0, LP__ALL_IN = 1, LP__EACH = 2 };
typedef struct lp__span {
  uint8_t after_start, before_stop; /* LP__NONE_IN, LP__ALL_IN or LP__EACH */
} lp__span_t;
static inline lp__span_t lp__chunk_span(lp__sync_t start, lp__sync_t stop, uint64_t begin_ns, uint64_t end_ns) {
  lp__span_t v;
  v.after_start = begin_ns >= start.ns ? LP__ALL_IN : end_ns <= start.ns ? LP__NONE_IN : LP__EACH;
  v.before_stop = stop.ns == UINT64_MAX || end_ns <= stop.ns ? LP__ALL_IN : begin_ns > stop.ns ? LP__NONE_IN : LP__EACH;
  return v;
}

int lp__trace_start(lp__owner_t who, const lp_trace_opts_t *opts);
int lp__trace_stop(lp__owner_t who);
bool lp__trace_running(lp__owner_t who);
/* Writes who's current or last session to path. */
int lp__trace_write(lp__owner_t who, const char *path, const char *process_name);
/* ---- layers and phases: the same, as systrace text ---- */
int lp__trace_write_systrace(lp__owner_t who, const char *path);
/* ---- Perfetto: any format, by name ---- */
typedef enum { LP__FORMAT_JSON, LP__FORMAT_PERFETTO, LP__FORMAT_SYSTRACE } lp__format_t;
int lp__trace_write_as(lp__owner_t who, const char *path, const char *process_name, lp__format_t format);
/* What a session dropped, and when: for the note at exit (env.c). */
typedef struct lp__drops {
  uint64_t dropped;
  uint64_t first_drop_ns;     /* CLOCK_MONOTONIC; 0 if nothing was dropped */
  uint64_t start_ns, stop_ns; /* the session's window (stop: now, while it runs) */
  uint64_t budget_bytes;
  bool ring;
  bool stream; /* LP_TRACE_STREAM: drops are where the writer fell behind */
  unsigned stream_files; /* a stopped stream: the number of its last file ("%n"); else 0 */
  uint64_t stream_events, stream_bytes; /* a stream: the events and bytes written to its files */
  uint32_t stream_threads;              /* ... and the threads with events in them */
} lp__drops_t;
/* Fills *out for who's current or last session: 0, or -EINVAL if it never started one. */
int lp__trace_drops(lp__owner_t who, lp__drops_t *out);
/* Bytes of chunks the recorder holds: in lanes, in the pool, and held by exports. */
uint64_t lp__trace_held_bytes(void);
/* Thread lanes the recorder keeps (live and exited threads). */
uint32_t lp__trace_lane_count(void);
/* lp_track_create() (lifecycle.c), once the library is started. */
lp_track_t lp__track_create(const char *name);

/*
 * The calling thread t begins a scope (a manual pair: manual) whose level
 * the timeline records, as the general path does it: the session's clock,
 * a new chunk, a deep stack, the live trace_marker, a budget spent (a
 * begin dropped counts as two events: it and its end). Returns the word as
 * lp_impl_enter() keeps it.
 */
uint64_t lp__trace_begin(lp__thread_t *t, const lp_site_t *site, int manual);
/* The end event of the frame at depth (already popped) of the calling thread t, whose begin was recorded. */
void lp__trace_end(lp__thread_t *t, uintptr_t site, uint32_t depth);
void lp__trace_thread_exit(lp__thread_t *t);
void lp__trace_thread_renamed(lp__thread_t *t);
void lp__trace_atfork_prepare(void);
void lp__trace_atfork_parent(void);
void lp__trace_atfork_child(void);

/* ---- json.c: a buffered JSON writer ------------------------------------- */

typedef struct lp__jw {
  int fd;
  char *buf;
  size_t len;
  int err;        /* the first write error, as a negative errno; sticky */
  uint64_t bytes; /* written to fd so far */
} lp__jw_t;

int lp__jw_init(lp__jw_t *w, int fd);
/* Writes what is buffered and frees the buffer; returns w->err. */
int lp__jw_finish(lp__jw_t *w);
void lp__jw_raw(lp__jw_t *w, const char *s, size_t n);
/* A string literal, its length known at compile time. */
#define lp__jw_lit(w, s) lp__jw_raw((w), "" s, sizeof(s) - 1)
/*
 * n bytes to fill at the returned pointer (then add what was used to
 * w->len); NULL after an error, or if n exceeds the buffer.
 */
char *lp__jw_reserve(lp__jw_t *w, size_t n);
/* Unchecked writers into reserved space; they return the end. */
char *lp__jw_put_u64(char *o, uint64_t v);
char *lp__jw_put_us(char *o, uint64_t ns);
/* s as a quoted JSON string at o, which has room for 6 * strlen(s) + 2 bytes; returns the end. */
char *lp__json_escape(char *o, const char *s);
/* A JSON string: quoted, escaped, invalid UTF-8 replaced by U+FFFD. */
void lp__jw_str(lp__jw_t *w, const char *s);
void lp__jw_u64(lp__jw_t *w, uint64_t v);
void lp__jw_i64(lp__jw_t *w, int64_t v);
/* Nanoseconds as microseconds with three decimals: 1234567 -> 1234.567. */
void lp__jw_us(lp__jw_t *w, uint64_t ns);


/* ---- pb.c: the protobuf writer (pb.h), its messages flushed to a buffered writer ---- */

/* Moves what was built to w and empties the buffer. */
static inline void lp__pb_flush(lp__pb_t *pb, lp__jw_t *w) {
  if (!pb->err && pb->len) lp__jw_raw(w, (const char *)pb->buf, pb->len);
  pb->len = 0;
}

/* ---- walk.c: a session's lanes, as every format sees them ----------------- */

/*
 * What an export writes: a snapshot of a session taken under the trace lock
 * (chunks and how far they are filled, names copied, sync points, the
 * session's window), formatted after the lock is released. The chunks are
 * pinned meanwhile: none is reused or freed until the export releases them,
 * whatever sessions start or stop in between.
 */
typedef struct lp__snap_chunk {
  const lp__chunk_t *chunk;
  uint32_t end;    /* slots filled */
  uint64_t end_ns; /* when the lane's next chunk started; UINT64_MAX for its last */
} lp__snap_chunk_t;

typedef struct lp__snap_lane {
  uint64_t tid;
  char *name;  /* owned */
  char **work; /* tracks: the work names by id, owned copies; NULL for threads */
  uint32_t nwork;
  bool lost;   /* ring: older chunks of the lane were reused */
  lp__snap_chunk_t *chunks;
  uint32_t nchunks;
} lp__snap_lane_t;

/*
 * What places a file in time beside other processes' and machines' files
 * (`labelprof merge`): a CLOCK_REALTIME reading tied to the trace's clock
 * (CLOCK_MONOTONIC), the boot it was taken in, and the time namespace's
 * offsets. lp__wall_read() brackets a REALTIME read between two
 * CLOCK_MONOTONIC reads and keeps the narrowest of a few tries: real_ns
 * was the time at mono_ns, give or take uncertainty_ns (half the bracket).
 * real_ns 0: no reading. Cold: a few hundred nanoseconds.
 */
typedef struct lp__wall {
  uint64_t mono_ns, real_ns, uncertainty_ns;
} lp__wall_t;
void lp__wall_read(lp__wall_t *out);
typedef struct lp__host {
  char boot_id[40];              /* /proc/sys/kernel/random/boot_id; "" when unreadable */
  bool timens;                   /* the offsets below were read (/proc/self/timens_offsets) */
  int64_t timens_mono_ns, timens_boot_ns; /* this process's time namespace: its clocks less the host's */
} lp__host_t;
void lp__host_read(lp__host_t *out);

typedef struct lp__session {
  lp__snap_lane_t *lanes; /* threads first, then tracks */
  uint32_t nlanes, nthreads;
  lp_trace_opts_t opts;   /* budget, policy and clock of the recording; levels of the session */
  /* The window: from start to stop, as sync points (stop.ns is UINT64_MAX while recording). */
  lp__sync_t start, stop;
  lp__sync_t *syncs;
  size_t nsyncs;
  uint64_t dropped;
  bool pinned; /* counted among the exports in flight */
  uint64_t first_drop_ns; /* CLOCK_MONOTONIC time of the session's first drop; 0 if it dropped nothing */
  uint64_t taken_ns;      /* when the snapshot was taken (the end of a session still running) */
  lp__wall_t wall_start;  /* a REALTIME reading at the session's start */
} lp__session_t;

/*
 * The lane walker: a snapshot's lane read once for any format, in recording
 * order, of the session's window and levels, scopes paired and begins made
 * up where the window lost them (walk.c says how). It hands a format's sink
 * what it finds; times are CLOCK_MONOTONIC ns, strictly increasing within a
 * thread lane. Every callback may be NULL but slice; ctx is the sink's.
 */
typedef struct lp__scope {
  const lp_site_t *site;
  uint64_t ns;    /* its begin; for a begin made up, the time made up for it */
  uint32_t depth; /* on the pseudo-stack, as its tag says (255: that deep or deeper) */
  bool shadow;    /* begun after the stop: followed so that its end is known for what it is, never given */
  uint32_t extra; /* the sink's own (systrace: the ends of the scopes switches replaced, owed with this one's) */
} lp__scope_t;
enum { LP__SLICE_UNTERMINATED = 1, LP__SLICE_TRUNCATED = 2 };
typedef struct lp__sink {
  /* A scope begins (the walker's stack holds o until its slice; the sink may set o->extra). */
  void (*begin)(void *ctx, lp__scope_t *o);
  /* A scope ends at end: its own end, or unterminated (a longjmp skipped it), or truncated (its begin made up). */
  void (*slice)(void *ctx, const lp__scope_t *o, uint64_t end, unsigned flags);
  /* A scope still open at the lane's end. */
  void (*open)(void *ctx, const lp__scope_t *o);
  void (*instant)(void *ctx, const lp_site_t *site, uint64_t ns);
  void (*counter)(void *ctx, const lp_site_t *site, uint64_t ns, int64_t value);
  /* A track's item: the caller's own times (one that starts where the one before it ended, 1 ns later). */
  void (*item)(void *ctx, const char *name, uint64_t start, uint64_t dur);
  bool scopes_only; /* instants and counters are not read (nor do they place made-up begins) */
} lp__sink_t;
typedef struct lp__walk {
  const lp__session_t *s;
  const lp__timemap_t *map;
  const lp__sink_t *sink;
  void *ctx;
  uint64_t events;     /* events given so far (all lanes) */
  uint64_t unfinished; /* scopes still open at their lane's end, given so far */
  bool nomem;          /* the walker's own stack could not grow: a scope was lost */
  /* private */
  lp__sync_t anchor; /* the sync point of the chunk being read */
  lp__timeseg_t seg; /* the clock map's line for the chunk's ticks, as far as it goes */
  uint64_t made_up_base; /* made-up begins start here, plus their depth (UINT64_MAX: not known yet) */
  size_t cursor;
  uint64_t last;
  lp__scope_t *stack;
  size_t depth, cap;
} lp__walk_t;
void lp__walk_init(lp__walk_t *w, const lp__session_t *s, const lp__timemap_t *map, const lp__sink_t *sink,
                   void *ctx);
/* Whether lane l has anything in the window (a thread's event, a track's item). */
bool lp__walk_has_events(const lp__walk_t *w, const lp__snap_lane_t *l);
/* Gives lane l (a thread's or a track's) to the sink. */
void lp__walk_lane(lp__walk_t *w, const lp__snap_lane_t *l);
void lp__walk_free(lp__walk_t *w);
/* The open scope an end at depth d closes: the innermost at d (at 255, also by site); 0 if none, else its index + 1. */
size_t lp__scope_match(const lp__scope_t *stack, size_t n, const lp_site_t *site, uint32_t d);
/* The process id every export writes, and BOOTTIME's offset from CLOCK_MONOTONIC now. */
uint64_t lp__export_pid(void);
int64_t lp__export_boot_offset(void);
/* Tests: every export writes this process id and this offset (pid 0: the real ones), and fixed readings below. */
void lp__export_test_identity(uint64_t pid, int64_t boot_offset);

/* When map found the clock jumping: the one line said on stderr about it, into out (size bytes); else out is left. */
void lp__jump_sentence(const lp__timemap_t *map, char *out, size_t size);

/*
 * The session's notes: what every format says of the session besides its
 * events (the JSON's otherData, the debug annotations of a Perfetto file's
 * "labelprof session" instant), in one list and one order, so that the
 * formats say the same. lp__notes_items() lays n out as items; levels is
 * a buffer of 64 bytes for the levels' text.
 */
typedef struct lp__notes {
  uint64_t at_ns;              /* when said: the session's stop, or when a running one was taken or its file ended */
  uint64_t events, dropped, budget_bytes;
  uint64_t start_ns, first_drop_ns; /* CLOCK_MONOTONIC; first_drop_ns 0: none (in this file) */
  bool running;
  const char *policy;          /* "discard", "ring", "stream" */
  uint32_t levels;
  uint64_t unfinished;         /* scopes begun in the file and not ended when it ends */
  uint64_t jumps;              /* clock jumps found, and the largest's description (NULL: none) */
  const char *jump;
  bool has_ts_base;            /* JSON: its "ts" base */
  uint64_t ts_base_ns;
  bool file;                   /* a stream's file: when it began, the session's drops so far, its number */
  uint64_t file_start_ns, session_dropped, file_number;
  lp__wall_t wall_start, wall_end; /* REALTIME readings: at the session's (or the file's) start, and when written */
  lp__host_t host;                 /* the boot and the time namespace (lp__host_read) */
} lp__notes_t;
/* NS: a time in ns, exact (a string of digits in the JSON); INT: signed, exact (a string in the JSON). */
typedef enum { LP__NOTE_STR, LP__NOTE_UINT, LP__NOTE_NS, LP__NOTE_BOOL, LP__NOTE_INT } lp__note_kind_t;
typedef struct lp__note {
  const char *key;
  lp__note_kind_t kind;
  const char *str;
  uint64_t u;
} lp__note_t;
enum { LP__NOTES_MAX = 48 };
size_t lp__notes_items(const lp__notes_t *n, lp__note_t out[LP__NOTES_MAX], char *levels);
/* A session's notes once w has walked its lanes (at its stop, or when it was taken if it runs). */
lp__notes_t lp__session_notes(const lp__session_t *s, const lp__timemap_t *map, const lp__walk_t *w);

/*
 * The formats: each writes the whole file to w, and returns w's error, or
 * -ENOMEM. When the clock jumped during the session, jump (of jump_len
 * bytes) gets the line for the caller to say; else it is left empty.
 */
/* export_json.c: Chrome Trace Event JSON (lp_trace_write_json) */
int lp__export_json(lp__jw_t *w, const lp__session_t *s, const char *process_name, char *jump, size_t jump_len);
/* export_systrace.c: systrace text (lp_trace_write_systrace) */
int lp__export_systrace(lp__jw_t *w, const lp__session_t *s);
/* export_perfetto.c: Perfetto TrackEvent protobuf (lp_trace_write_perfetto) */
int lp__export_perfetto(lp__jw_t *w, const lp__session_t *s, const char *process_name, char *jump, size_t jump_len);
/*
 * ---- stream_encode.c: the Perfetto stream's encoder (LP_TRACE_STREAM) ----
 * One encoder per stream; lp__pfs_restart starts a file (the process's
 * descriptor), lp__pfs_chunk encodes slots [from, to) of a lane's chunk
 * with the lane's state (*state: NULL at first; free it with
 * lp__pfs_lane_free), lp__pfs_finish adds the session's notes. The packets
 * built so far are at lp__pfs_bytes until lp__pfs_clear; they always end
 * on a packet boundary.
 */
typedef struct lp__pfs lp__pfs_t;
typedef struct lp__pfs_lane lp__pfs_lane_t;
typedef struct lp__pfs_lane_info {
  uint64_t tid;
  const char *name;
  bool track;
  char *const *work; /* a track's work names by id */
  uint32_t nwork;
} lp__pfs_lane_info_t;

lp__pfs_t *lp__pfs_new(void);
void lp__pfs_free(lp__pfs_t *f);
void lp__pfs_restart(lp__pfs_t *f, const char *process_name);
int lp__pfs_chunk(lp__pfs_t *f, lp__pfs_lane_t **state, const lp__pfs_lane_info_t *info, const lp_impl_event_t *ev,
                  uint32_t from, uint32_t to, const lp__timemap_t *map, lp__sync_t anchor);
/* The file's notes (n's events, unfinished scopes and clock jumps are the encoder's own). */
void lp__pfs_finish(lp__pfs_t *f, const lp__notes_t *n);
/* The clock jumps a batch's map found: said in the file's notes. */
void lp__pfs_jumps(lp__pfs_t *f, const lp__timemap_t *map);
void lp__pfs_lane_free(lp__pfs_lane_t *l);
const uint8_t *lp__pfs_bytes(const lp__pfs_t *f, size_t *n);
void lp__pfs_clear(lp__pfs_t *f);
int lp__pfs_error(const lp__pfs_t *f);
uint64_t lp__pfs_events(const lp__pfs_t *f);
/*
 * ---- stream.c: the stream's writer ----
 * A thread that writes what the recording's threads leave in their chunks
 * to the stream's file while the program runs. The recording (trace.c)
 * starts it with its source: the trace lock, under which everything here is
 * called unless said, and how to collect chunks and give them back.
 */
typedef struct lp__stream_item {
  lp__lane_t *lane;
  lp__chunk_t *chunk; /* pinned while the writer has it */
  uint32_t from, to;  /* its slots to write */
  bool closed;        /* the chunk is full (or its thread gone): it goes back once written */
  lp__pfs_lane_info_t info; /* name and work names copied */
} lp__stream_item_t;
typedef struct lp__stream_source {
  pthread_mutex_t *mu;
  /* What is to be written now: closed chunks, and with all, what live ones hold (pinned); their count. */
  size_t (*collect)(lp__stream_item_t **items, size_t *cap, bool all);
  /* What was written: unpinned, closed chunks back to the recording; names freed. */
  void (*give_back)(lp__stream_item_t *items, size_t n);
  /* The session's drops so far (called without mu). */
  int (*drops)(lp__owner_t who, lp__drops_t *out);
} lp__stream_source_t;
/* Opens the first file of who's stream and starts its writer (nothing recording yet): 0 or a negative errno. */
int lp__stream_start(lp__owner_t who, const lp_trace_opts_t *o, const lp__stream_source_t *src);
/* Everything written, the session's notes added, the file closed, the writer gone (mu released meanwhile). */
int lp__stream_stop(void);
/* A chunk was left for the writer. */
void lp__stream_wake(void);
/* Everything recorded so far written, partly filled chunks too (mu released meanwhile): the stream's error. */
int lp__stream_flush(void);
typedef struct lp__stream_status {
  bool on, quitting; /* a stream is open; being written to its end */
  lp__owner_t owner; /* of the last stream started */
  uint64_t written;  /* events written to its files */
  uint64_t bytes;    /* bytes written to its files */
  uint32_t threads;  /* thread lanes with events written */
} lp__stream_status_t;
void lp__stream_status(lp__stream_status_t *out);
/* The number of the stream's last file: only once its writer has ended (the writer counts them with no lock). */
unsigned lp__stream_files(void);
void lp__stream_hold(bool on);
void lp__stream_cache(uint64_t behind, uint64_t keep);
/* LABELPROF_TRACE_FLUSH: how often a stream's writer writes what its chunks hold so far (0: each second). */
void lp__stream_set_flush(uint64_t ns);
/* In a forked child (no lock: the only thread): the parent's stream forgotten, its file closed. */
void lp__stream_atfork_child(void);
/* ---- end of the Perfetto stream ---- */
/* A site's label for reports: "(null)" for a NULL label. */
static inline const char *lp__label(const lp_site_t *site) { return site->label ? site->label : "(null)"; }

/* ---- trace.c: the levels word ------------------------------------------ */

/* The timeline's part of lp_impl_levels: the levels recorded and LP_IMPL_SPENT (no subscriber bits). */
extern _Atomic uint32_t lp__trace_lv;
static inline uint32_t lp__trace_levels(void) { return atomic_load_explicit(&lp__trace_lv, memory_order_relaxed); }
/* Subscribers listen to labels (on) or not: every level and LP_IMPL_SUBS join lp_impl_levels, or leave it. */
void lp__levels_set_subs(bool on);

/* ---- subs.c: streams, events, subscribers --------------------------------- */

/* Registers and initializes the labels stream (id 1); the constructor calls it first. */
void lp__subs_init(void);
/* Loads LABELPROF_SUBSCRIBERS (the constructor calls it after lp__env_load). */
void lp__subs_env_load(void);
/*
 * The pseudo-stack of t pops frames [from, to) that never had their own
 * end (a longjmp, a missing LP_END): the ends of those whose begins reached
 * subscribers, innermost first. The calling thread is t's.
 */
void lp__subs_heal(lp__thread_t *t, uint32_t from, uint32_t to);
/* The end callbacks of the notified scope whose frame is at depth (still on the stack). */
void lp__subs_end(lp__thread_t *t, uint32_t depth, const lp_site_t *site);
/*
 * A scope's or a manual pair's begin while subscribers listen to labels,
 * by the calling thread: pushed, notified and recorded as the levels say.
 * Returns the word as lp_impl_enter() keeps it.
 */
uint64_t lp__subs_begin(const lp_site_t *site, int manual);
/* Labels are refused (lp__abi_refused()): lp_impl_wanted and the subscribers' levels cleared. */
void lp__subs_refused(void);
/* LP_END of t's frame at depth, tag, whose begin reached subscribers: their ends, the pop, its end event. */
void lp__subs_end_frame(lp__thread_t *t, uintptr_t tag, uint32_t depth);
/* lp_stream_register() and the others of lifecycle.c, once the library is started. */
int lp__stream_register(const char *name, uint8_t *id);
int lp__stream_initialize(const char *name, uint32_t major, uint32_t minor, const char *version);
int lp__stream_finalize(const char *name);
int lp__tp_register(const char *vendor, uint8_t index, uint16_t *type);
int lp__subscriber_create(void *subscriber_data, lp_subscriber_t **out);
void lp__subs_atfork_prepare(void);
void lp__subs_atfork_parent(void);
void lp__subs_atfork_child(void);

/* ---- util.c: allocation ---------------------------------------------------- */

/*
 * Every allocation of the library goes through these: malloc, calloc,
 * realloc, strdup, strndup and aligned_alloc, freed with free(). They differ
 * only in a test hook (lp__alloc_test_fail, testing.h).
 */
void *lp__malloc(size_t n);
void *lp__calloc(size_t n, size_t size);
void *lp__realloc(void *p, size_t n);
char *lp__strdup(const char *s);
char *lp__strndup(const char *s, size_t n);
void *lp__aligned_alloc(size_t align, size_t n);

/* ---- env.c ---------------------------------------------------------------- */

/* Reads LABELPROF_*, starts what they ask for and arranges the reports (the constructor calls it). */
void lp__env_load(void);
void lp__env_atfork_child(void);

/* ---- intern.c: names made at run time (NVTX, ITT) ---- */
void lp__names_atfork_prepare(void);
void lp__names_atfork_parent(void);
void lp__names_atfork_child(void);
/*
 * Calls that got the "(other names)" site so far, and the bound on names (0
 * until first read): in util.c, so that the timeline's export can report
 * them without depending on intern.c, which sits above the recorder.
 */
extern _Atomic uint64_t lp__names_overflowed, lp__names_limit;

#endif /* LABELPROF_INTERNAL_H */
