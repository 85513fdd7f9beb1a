/*
 * labelprof.h: scoped labels for hot code, and the views built from them.
 *
 * Wrap hot loops and phases in labels:
 *
 *     void step(void) {
 *         LP_SCOPE("step");
 *         for (...) { LP_SCOPE("kernel"); ... }
 *     }
 *
 * and get, from that one instrumentation, a sampled percentage tree
 * (lp_profile_start / lp_profile_stop / lp_profile_print) and a timeline of
 * every scope, written as Chrome Trace Event JSON for chrome://tracing, the
 * Perfetto UI and speedscope (lp_trace_start / lp_trace_stop /
 * lp_trace_write_json).
 *
 * A label costs a few stores to memory no other thread writes, so labels can
 * stay in production code. With -DLABELPROF_DISABLE every macro compiles to
 * nothing and every function becomes an inline stub, so the program builds
 * and links without the library.
 *
 * Conventions. Functions that can fail return 0 or a negative errno value;
 * lp_strerror() names it. The library never calls exit() or abort() on a
 * caller's mistake. Unless a comment says otherwise, every function may be
 * called from any thread. Labels are string literals, or strings that
 * outlive every profile and trace they appear in.
 *
 * Names that start with lp_impl_ / LP_IMPL_ belong to the inline code in this
 * header. They are not part of the API and change without notice.
 */
#ifndef LABELPROF_H
#define LABELPROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LABELPROF_VERSION_MAJOR 0
#define LABELPROF_VERSION_MINOR 1
#define LABELPROF_VERSION_PATCH 0
#define LABELPROF_VERSION_STRING "0.1.0"

#if defined(__GNUC__) || defined(__clang__)
#define LP_EXPORT __attribute__((visibility("default")))
#else
#error "labelprof needs GCC or Clang (thread-local storage models, the cleanup attribute)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Call sites and levels                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Trace levels, a bitmask. Each scope has one level; a timeline records the
 * scopes whose level is enabled. Levels never change the sampled tree: every
 * scope is on the pseudo-stack whatever its level.
 */
#define LP_LEVEL_REQUEST  0x1u /* one per request or frame: the coarsest view */
#define LP_LEVEL_RUNTIME  0x2u /* runtime phases; the level of a plain LP_SCOPE */
#define LP_LEVEL_OPERATOR 0x4u /* individual operators or kernels */
#define LP_LEVEL_DEBUG    0x8u /* fine detail, usually left off */
#define LP_LEVEL_STANDARD (LP_LEVEL_RUNTIME | LP_LEVEL_OPERATOR)
#define LP_LEVEL_ALL      0xfu

/*
 * One record per call site, created by the macros as a static constant: the
 * hot path passes its address and never copies, hashes or looks up the label.
 * Users rarely touch it; it is public so that tools can read what a site is.
 */
typedef struct lp_site {
  const char *label; /* the label text */
  const char *file;  /* __FILE__ of the call site */
  const char *func;  /* __func__ of the call site */
  uint32_t line;     /* __LINE__ of the call site */
  uint32_t level;    /* one LP_LEVEL_* bit */
} __attribute__((aligned(8))) lp_site_t;

/*
 * The deepest pseudo-stack recorded per thread. Deeper scopes still nest and
 * unwind correctly; the profile shows them as one "(deeper than 64 labels)"
 * node under the 64th.
 */
#define LP_STACK_CAPACITY 64

/* ------------------------------------------------------------------------ */
/* Errors and threads                                                       */
/* ------------------------------------------------------------------------ */

/*
 * A short English description of a value returned by this library (0 or a
 * negative errno such as -EBUSY). Never NULL; the string is static.
 */
LP_EXPORT const char *lp_strerror(int err);

/*
 * Names the calling thread in reports (the per-thread trees, and timeline
 * lanes). The name is copied; at most 63 bytes are kept. A thread that never
 * calls this is shown under its operating-system name at the time it first
 * used a label. Returns 0, -EINVAL if name is NULL, -ENOMEM if the thread
 * could not be registered.
 */
LP_EXPORT int lp_thread_set_name(const char *name);

/* ------------------------------------------------------------------------ */
/* The sampled profile                                                      */
/* ------------------------------------------------------------------------ */

/*
 * A finished profile: the tree of samples of every thread that used labels
 * while the collector ran, including threads that have since exited. It owns
 * copies of its label texts, so it may outlive the code that made them.
 */
typedef struct lp_profile lp_profile_t;

/* A node of a profile's tree. Owned by the profile. */
typedef struct lp_node lp_node_t;

/* Options for lp_profile_start(). Zero-initialise; a zero field means its default. */
typedef struct lp_profile_opts {
  uint32_t hz; /* samples per second per thread; 0 means 1000; at most 100000 */
} lp_profile_opts_t;

/*
 * Starts the collector: a thread that wakes hz times a second on absolute
 * deadlines and samples the pseudo-stack of every thread that uses labels.
 * opts may be NULL for the defaults. Threads need no registration; they join
 * the first time they use a label. Returns 0; -EBUSY if a profile is already
 * running; -EINVAL for an out-of-range option; -ENOMEM; or the negative
 * error pthread_create() gave.
 */
LP_EXPORT int lp_profile_start(const lp_profile_opts_t *opts);

/*
 * Stops the collector, waits for it to finish its last tick, and hands over
 * the profile in *out (free it with lp_profile_free()). out may be NULL to
 * discard the profile. Returns 0; -EINVAL if no profile is running (nothing
 * is written to *out); -ENOMEM if the tree could not be built (the samples
 * are lost, the collector is stopped).
 */
LP_EXPORT int lp_profile_stop(lp_profile_t **out);

/* 1 if a profile is running, 0 if not. */
LP_EXPORT int lp_profile_running(void);

/* Report options for lp_profile_print_ex(). Zero-initialise. */
typedef struct lp_print_opts {
  uint32_t flags;     /* LP_PRINT_* bits */
  double min_percent; /* hide nodes under this percentage; their samples count as their parent's "other" */
} lp_print_opts_t;

#define LP_PRINT_THREADS 0x1u /* one tree per thread, percentages of that thread's samples */
#define LP_PRINT_COUNTS  0x2u /* sample counts and estimated time (samples x tick) on every line */

/*
 * Prints the tree in the gemmlowp layout:
 *
 *     labelprof profile (2 threads, 2000 samples)
 *     100.00% matmul
 *         62.10% kernel
 *         ...
 *         1.20% other
 *     0.00% other (outside of any label)
 *
 * Percentages are of all samples, not of the parent. Children are sorted by
 * weight, heaviest first; "other" closes every node that has children and
 * holds the samples that stopped at that node. Labels with the same text are
 * merged even when they come from different call sites. Returns 0; -EINVAL if
 * p or out is NULL; -EIO if writing to out failed.
 */
LP_EXPORT int lp_profile_print(const lp_profile_t *p, FILE *out);

/* lp_profile_print() with options; opts may be NULL for the default report. */
LP_EXPORT int lp_profile_print_ex(const lp_profile_t *p, FILE *out, const lp_print_opts_t *opts);

/*
 * Writes folded stacks, one line per path that has samples stopping on it:
 * "matmul;kernel 1242". This is the input of flamegraph.pl, inferno and
 * speedscope. Samples outside any label are written as "(outside of any
 * label) N". In labels, ';' becomes ':' and control characters become '?',
 * so that every line parses. Returns 0, -EINVAL, or -EIO as lp_profile_print().
 */
LP_EXPORT int lp_profile_write_folded(const lp_profile_t *p, FILE *out);

/* Frees a profile and all its nodes. NULL is a harmless no-op. */
LP_EXPORT void lp_profile_free(lp_profile_t *p);

/* Counters of a profile, for reports and for judging the collector's cost. */
typedef struct lp_profile_stats {
  uint64_t samples;          /* thread-samples in the tree */
  uint64_t ticks;            /* collector wakeups */
  uint64_t missed_ticks;     /* deadlines that passed while the collector was late; not sampled */
  uint64_t skipped;          /* thread-samples abandoned: the stack changed on every retry */
  uint64_t collector_cpu_ns; /* CPU time the collector thread used, wakeups included */
  uint64_t sampling_ns;      /* time spent inside sampling passes: the work per tick, without the wakeup */
  uint64_t duration_ns;      /* from start to stop */
  uint64_t tick_ns;          /* 1e9 / hz */
  uint32_t threads;          /* threads with at least one sample */
  uint32_t hz;
  uint64_t truncated;  /* label pushes deeper than LP_STACK_CAPACITY during the profile */
  uint64_t mismatched; /* scope ends that did not match the top of the stack (healed) */
  uint64_t unmatched;  /* LP_END() with nothing to end (ignored) */
} lp_profile_stats_t;

/* Fills *out. Returns 0, or -EINVAL if p or out is NULL. */
LP_EXPORT int lp_profile_get_stats(const lp_profile_t *p, lp_profile_stats_t *out);

/*
 * The root of the all-threads tree. Its label is NULL, its samples are all
 * samples, and its self count is the samples outside any label. NULL if p is
 * NULL.
 */
LP_EXPORT const lp_node_t *lp_profile_root(const lp_profile_t *p);

/* One sampled thread of a profile. */
typedef struct lp_thread_info {
  uint64_t tid;          /* the kernel's thread id */
  const char *name;      /* owned by the profile */
  uint64_t samples;      /* this thread's samples */
  const lp_node_t *root; /* this thread's tree, shaped like lp_profile_root() */
} lp_thread_info_t;

/* The number of threads in p (0 if p is NULL). */
LP_EXPORT size_t lp_profile_thread_count(const lp_profile_t *p);

/*
 * Fills *out with thread i, in order of samples, heaviest first. Returns 0,
 * or -EINVAL if p or out is NULL or i is out of range.
 */
LP_EXPORT int lp_profile_thread(const lp_profile_t *p, size_t i, lp_thread_info_t *out);

/* A node's label; NULL for a root. "(deeper than 64 labels)" for truncation. */
LP_EXPORT const char *lp_node_label(const lp_node_t *n);
/* Samples at or below the node. */
LP_EXPORT uint64_t lp_node_samples(const lp_node_t *n);
/* Samples that stopped at the node: its "other" (at a root: outside any label). */
LP_EXPORT uint64_t lp_node_self(const lp_node_t *n);
/* The number of children. */
LP_EXPORT size_t lp_node_child_count(const lp_node_t *n);
/* Child i, heaviest first; NULL if i is out of range. */
LP_EXPORT const lp_node_t *lp_node_child(const lp_node_t *n, size_t i);
/* The child with this label text, or NULL. */
LP_EXPORT const lp_node_t *lp_node_find(const lp_node_t *n, const char *label);

/* ------------------------------------------------------------------------ */
/* The timeline                                                             */
/* ------------------------------------------------------------------------ */

/*
 * What happens when the event memory budget is spent:
 *   LP_TRACE_DISCARD  recording stops; every event after that is counted as dropped.
 *   LP_TRACE_RING     a flight recorder: the oldest 16 KiB chunk of the session
 *                     that no thread is filling is reused, so every thread
 *                     keeps its newest events and threads that exited cannot
 *                     hold the memory against new ones; overwritten events
 *                     are counted as dropped. Give it at least one chunk per
 *                     recording thread: a thread that cannot get one records
 *                     nothing (counted).
 */
typedef enum lp_trace_policy { LP_TRACE_DISCARD = 0, LP_TRACE_RING = 1 } lp_trace_policy_t;

/*
 * What stamps timeline events. Exported times are always CLOCK_MONOTONIC
 * nanoseconds; this chooses what is read while recording.
 *   LP_CLOCK_AUTO       the CPU's counter where it is sound, else CLOCK_MONOTONIC.
 *                       Sound means: the counter is invariant (x86: CPUID says
 *                       so; aarch64: the architecture guarantees it), and either
 *                       the kernel itself uses it as its clocksource, or
 *                       labelprof's own check passes (threads on every pair of
 *                       allowed CPUs see no reading go backwards, and its rate
 *                       matches CLOCK_MONOTONIC within 100 ppm). The check runs
 *                       once, when the first timeline starts, in at most 20 ms.
 *   LP_CLOCK_TSC        the CPU's counter (x86 TSC, aarch64 CNTVCT_EL0) even when
 *                       the check fails; a warning on stderr says so.
 *   LP_CLOCK_MONOTONIC  clock_gettime(CLOCK_MONOTONIC) for every event.
 * The choice is made once per process, by the first timeline that starts;
 * LABELPROF_CLOCK=auto|tsc|monotonic, when set, overrides the option. The
 * exported file's otherData names the clock and why it was chosen.
 */
typedef enum lp_clock { LP_CLOCK_AUTO = 0, LP_CLOCK_TSC = 1, LP_CLOCK_MONOTONIC = 2 } lp_clock_t;

/* Options for lp_trace_start(). Zero-initialise; a zero field means its default. */
typedef struct lp_trace_opts {
  uint32_t levels;          /* LP_LEVEL_* bits to record; 0 means LP_LEVEL_STANDARD */
  lp_trace_policy_t policy; /* LP_TRACE_DISCARD (the default) or LP_TRACE_RING */
  uint64_t budget_bytes;    /* event memory for all threads and tracks; 0 means 64 MiB;
                               it is used in 16 KiB chunks, at least one */
  lp_clock_t clock;         /* LP_CLOCK_AUTO (the default), LP_CLOCK_TSC or LP_CLOCK_MONOTONIC */
} lp_trace_opts_t;

/*
 * Starts recording a timeline: from now on every scope, instant and counter
 * whose level is enabled records events into its thread's buffer (no lock,
 * about 16 bytes an event, names resolved only at export). Anything recorded
 * by an earlier session and not needed any more is discarded. opts may be
 * NULL for the defaults. Returns 0; -EBUSY if already tracing; -EINVAL for a
 * level outside LP_LEVEL_ALL, an unknown policy, or a budget under 16 KiB.
 */
LP_EXPORT int lp_trace_start(const lp_trace_opts_t *opts);

/*
 * Stops recording. What was recorded stays until lp_trace_start() is called
 * again, for lp_trace_write_json(). A scope that began while recording and
 * ends after the stop still records its end. Returns 0, or -EINVAL if not
 * tracing.
 */
LP_EXPORT int lp_trace_stop(void);

/* 1 if a timeline is recording, 0 if not. */
LP_EXPORT int lp_trace_running(void);

/*
 * Writes everything the current (or last) session recorded, of every thread
 * including those that have exited and of every track, as Chrome Trace Event
 * JSON (the object form, with metadata) to path. process_name names the
 * process lane; NULL means the program's name.
 *
 * A regular file appears complete or not at all: the JSON goes to a
 * temporary file in the same directory, renamed over path when every write
 * has succeeded, and removed on any failure (readers never see a partial
 * file; the data is not forced to disk). A symbolic link is followed to its
 * target. /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N write to
 * that descriptor at its current offset; pipes and devices are written
 * directly. A pipe whose reader has gone gives -EPIPE, not SIGPIPE.
 *
 * It may be called while recording. The session is snapshotted under a lock
 * held for microseconds and written without it; until the write is done no
 * chunk is reused, so in ring mode a thread that would have to reuse one
 * drops its events (counted). Nothing else waits for the file.
 * Returns 0; -EINVAL if path is NULL or nothing was ever recorded; -ENOMEM;
 * or the negative errno of the open, write or rename that failed (-ENOENT
 * for a missing directory, -ENOSPC for a full disk, -EPIPE...).
 */
LP_EXPORT int lp_trace_write_json(const char *path, const char *process_name);

/* Counters of the current (or last) session. */
typedef struct lp_trace_stats {
  uint64_t recorded;     /* events in the buffers, ready to write */
  uint64_t dropped;      /* events lost: budget spent (discard), overwritten (ring), or during an export */
  uint64_t budget_bytes; /* the session's budget */
  uint64_t used_bytes;   /* chunks allocated now */
  uint32_t threads;      /* thread lanes with events, including exited threads */
  uint32_t tracks;       /* tracks created */
} lp_trace_stats_t;

/* Fills *out. Returns 0, or -EINVAL if out is NULL. */
LP_EXPORT int lp_trace_get_stats(lp_trace_stats_t *out);

/*
 * Now, in the timeline's clock domain: CLOCK_MONOTONIC, in nanoseconds (the
 * clock of std::chrono::steady_clock on Linux). Events are stamped with the
 * TSC where it is invariant and the kernel trusts it, and mapped onto this
 * domain at export; otherwise they are stamped with CLOCK_MONOTONIC itself.
 */
LP_EXPORT uint64_t lp_now_ns(void);

/*
 * A virtual track: a named lane for work that is not a CPU thread, such as a
 * device queue or a DMA engine. Returns a handle (0 or more), or -EINVAL if
 * name is NULL, or -ENOMEM. The name is copied. Tracks live as long as the
 * process; at most 4096.
 */
typedef int32_t lp_track_t;
LP_EXPORT lp_track_t lp_track_create(const char *name);

/*
 * Records a piece of work on a track: name (copied), starting at start_ns and
 * lasting dur_ns, both in the lp_now_ns() domain. Any thread may record on
 * any track. Ignored when no timeline is recording. Work on one track should
 * not partly overlap; give overlapping streams tracks of their own. Work
 * that starts exactly when the work recorded before it ended is written
 * 1 ns later (same end), so that no viewer merges or mis-nests the two.
 *
 * Device timestamps: take a pair (h0 = lp_now_ns(); d = device_now();
 * h1 = lp_now_ns()) when the device is idle, and map d' to
 * (h0 + h1) / 2 + (d' - d) * ns_per_device_tick; take a new pair now and then
 * if the two clocks drift.
 *
 * Work names are kept per track for the session: at most 65536 distinct
 * names a track (more are dropped and counted); put varying detail in the
 * track, not the name.
 *
 * Returns 0; -EINVAL for an unknown track, a NULL name, or an end past
 * UINT64_MAX.
 */
LP_EXPORT int lp_track_complete(lp_track_t track, const char *name, uint64_t start_ns, uint64_t dur_ns);

/* ------------------------------------------------------------------------ */
/* The macros                                                               */
/* ------------------------------------------------------------------------ */

/*
 * LP_SCOPE("label"): a label from here to the end of the enclosing block,
 * however the block is left (return, break, goto). Usable several times in
 * one block. A runtime-level scope for the timeline.
 *
 * LP_SCOPE_L(level, "label"): the same with an LP_LEVEL_* bit.
 *
 * LP_BEGIN("label") ... LP_END(): a manual pair, for code that cannot use a
 * block. LP_END() ends the innermost label of the calling thread, whichever
 * it is. An LP_END() with nothing to end is counted and ignored. (A manual
 * pair deeper than LP_STACK_CAPACITY is on the pseudo-stack but not on the
 * timeline.)
 *
 * Labels are not async-signal-safe: do not use them in signal handlers. A
 * thread's first label allocates, and a handler's label could interleave
 * with the push it interrupted.
 *
 * The pseudo-stack survives mistakes: a scope that ends while labels it did
 * not start are still open above it (a longjmp, a missing LP_END) pops them
 * too, and counts a mismatch. Nothing is ever written beyond the stack.
 *
 * For the timeline only (they are not on the pseudo-stack):
 *
 * LP_INSTANT("label"), LP_INSTANT_L(level, "label"): a point in time on the
 * calling thread's lane.
 *
 * LP_COUNTER("name", value), LP_COUNTER_L(level, "name", value): the value
 * (a 64-bit integer) of a counter from now on, drawn as a graph. value is
 * evaluated only when the level is recorded.
 */
#ifndef LABELPROF_DISABLE

#define LP_SCOPE(label) LP_SCOPE_L(LP_LEVEL_RUNTIME, label)
#define LP_SCOPE_L(level, label) LP_IMPL_SCOPE(level, label, __COUNTER__)
#define LP_BEGIN(label) LP_BEGIN_L(LP_LEVEL_RUNTIME, label)
#define LP_BEGIN_L(level, label) \
  do { \
    static const lp_site_t lp_impl_begin_site = LP_IMPL_SITE(label, level); \
    lp_impl_begin(&lp_impl_begin_site); \
  } while (0)
#define LP_END() lp_impl_end()
#define LP_INSTANT(label) LP_INSTANT_L(LP_LEVEL_RUNTIME, label)
#define LP_INSTANT_L(lvl, text) \
  do { \
    static const lp_site_t lp_impl_instant_site = LP_IMPL_SITE(text, lvl); \
    if (LP_IMPL_UNLIKELY(lp_impl_instant_site.level & LP_IMPL_LOAD_RELAXED(lp_impl_levels))) \
      lp_impl_emit((uintptr_t)&lp_impl_instant_site | LP_IMPL_EV_INSTANT); \
  } while (0)
#define LP_COUNTER(name, value) LP_COUNTER_L(LP_LEVEL_RUNTIME, name, value)
#define LP_COUNTER_L(lvl, text, value) \
  do { \
    static const lp_site_t lp_impl_counter_site = LP_IMPL_SITE(text, lvl); \
    if (LP_IMPL_UNLIKELY(lp_impl_counter_site.level & LP_IMPL_LOAD_RELAXED(lp_impl_levels))) \
      lp_impl_counter(&lp_impl_counter_site, (int64_t)(value)); \
  } while (0)

#else /* LABELPROF_DISABLE */

/*
 * Compiled out, the macros keep their grammar: LP_SCOPE and LP_SCOPE_L are
 * still declarations, so that `LP_SCOPE("f"); int s = 0;` is as clean under
 * -Wdeclaration-after-statement as in the enabled build, and the others are
 * still statements. A scope becomes an enumeration constant whose value is
 * the size of a call to lp_impl_disabled_site(): the level and the label are
 * checked as the enabled build checks them, nothing is evaluated, nothing is
 * left unused, and the function is never defined or linked (a sizeof operand
 * is not evaluated).
 */
int lp_impl_disabled_site(uint32_t level, const char *label);
#define LP_IMPL_DISABLED_SITE(level, label) sizeof(lp_impl_disabled_site((uint32_t)(level), (label)))
#define LP_SCOPE(label) LP_SCOPE_L(LP_LEVEL_RUNTIME, label)
#define LP_SCOPE_L(level, label) \
  enum { LP_IMPL_CAT(lp_impl_disabled_scope_, __COUNTER__) = LP_IMPL_DISABLED_SITE(level, label) }
#define LP_BEGIN(label) LP_BEGIN_L(LP_LEVEL_RUNTIME, label)
#define LP_BEGIN_L(level, label) ((void)LP_IMPL_DISABLED_SITE(level, label))
#define LP_END() ((void)0)
#define LP_INSTANT(label) LP_INSTANT_L(LP_LEVEL_RUNTIME, label)
#define LP_INSTANT_L(level, label) ((void)LP_IMPL_DISABLED_SITE(level, label))
/*
 * The value is never evaluated, yet what only feeds a counter still counts as
 * used (no unused-variable or unneeded-function warnings), and it is checked
 * for conversion to int64_t as in the enabled build.
 */
#define LP_COUNTER(name, value) ((void)(1 ? 0 : (int64_t)(value)))
#define LP_COUNTER_L(level, name, value) ((void)(1 ? 0 : (int64_t)(value)))

#endif /* LABELPROF_DISABLE */

/* ------------------------------------------------------------------------ */
/* Inline implementation: not API                                           */
/* ------------------------------------------------------------------------ */

/*
 * The per-thread state the macros touch. The owning thread is its only
 * writer. `word` holds the stack depth in its low 16 bits and a change
 * counter above them; every push and pop publishes a new word with a release
 * store, and a push writes its frame (also with a release store) before
 * publishing. A reader (the collector) copies the frames, with acquire loads,
 * between two reads of the word and keeps the copy only if the word did not
 * change: a frame is only rewritten after a pop has published a new word, and
 * the frame's release store carries that word to any reader that sees the
 * new frame, so an unchanged word means an untorn copy. On x86 all of this
 * compiles to plain moves.
 *
 * Frames hold the site pointer with bit 0 set when the scope also recorded
 * a timeline begin event.
 */
typedef struct lp_impl_event {
  uint64_t ts;   /* clock ticks, or a counter's value */
  uintptr_t tag; /* site pointer | event kind */
} lp_impl_event_t;

/*
 * Shared fields are plain types accessed only through the __atomic builtins
 * (GCC and Clang, every C and C++ standard), so the header compiles cleanly
 * under -std=c99 -pedantic and C++11 as well as C11.
 */
#define LP_IMPL_LOAD_RELAXED(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define LP_IMPL_LOAD_ACQUIRE(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define LP_IMPL_STORE_RELAXED(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define LP_IMPL_STORE_RELEASE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

typedef struct lp_impl_thread {
  uint64_t word;          /* depth | change counter << 16 */
  lp_impl_event_t *tcur; /* timeline: next free event slot */
  lp_impl_event_t *tlim;                  /* timeline: end of the current chunk */
  uintptr_t frames[LP_STACK_CAPACITY];
} lp_impl_thread_t;

/*
 * What a scope's end compares the stack's depth with: the depth after its
 * push (its own depth + 1), with LP_IMPL_EXPECT_TRACED added when it
 * recorded a begin event. That bit never matches a 16-bit depth, so a traced
 * scope ends in the cold branch of the compare (which records the end), and
 * an untraced one pays for tracing with nothing at its end: the one branch
 * is at its start.
 */
typedef struct lp_impl_scope {
  const lp_site_t *site;
  uint32_t expect;
} lp_impl_scope_t;

#define LP_IMPL_DEPTH_MASK 0xffffu
#define LP_IMPL_COUNT_ONE  0x10000u
#define LP_IMPL_NOT_PUSHED 0xffffu /* +1 never equals a 16-bit depth */
#define LP_IMPL_EXPECT_TRACED 0x100000u
#define LP_IMPL_EXPECT_DEPTH 0x1ffffu
#define LP_IMPL_TRACED     0x1u
#define LP_IMPL_EV_BEGIN   0x0u /* event kinds, in the low bits of an event's tag */
#define LP_IMPL_EV_END     0x1u
#define LP_IMPL_EV_INSTANT 0x2u
#define LP_IMPL_EV_COUNTER 0x3u /* followed by a slot holding the value */
#define LP_IMPL_EV_KIND    0x7u

#define LP_IMPL_LIKELY(x) __builtin_expect(!!(x), 1)
#define LP_IMPL_UNLIKELY(x) __builtin_expect(!!(x), 0)

/*
 * The calling thread's state. Initial-exec TLS: reached with one
 * thread-pointer-relative load, never through __tls_get_addr, also from a
 * shared library. Before a thread's first label it points at a shared,
 * read-only state whose depth is out of range, so the first push takes the
 * slow path, which registers the thread.
 */
LP_EXPORT extern __thread lp_impl_thread_t *lp_impl_self __attribute__((tls_model("initial-exec")));
/* The trace levels being recorded; 0 when no timeline is recording. */
LP_EXPORT extern uint32_t lp_impl_levels;
/* 1 when events are stamped with the CPU's counter; set before the first event, never changed after. */
LP_EXPORT extern int lp_impl_clock_counter;

LP_EXPORT uint32_t lp_impl_push_slow(uintptr_t tag);
LP_EXPORT void lp_impl_pop_slow(uint32_t depth);
LP_EXPORT void lp_impl_leave_slow(const lp_site_t *site, uint32_t expect);
LP_EXPORT void lp_impl_end_slow(void);
LP_EXPORT uint32_t lp_impl_emit_slow(uintptr_t tag);
LP_EXPORT uint64_t lp_impl_ticks_slow(void);
LP_EXPORT void lp_impl_counter(const lp_site_t *site, int64_t value);

/* A timestamp in the session's ticks: the CPU's counter, or CLOCK_MONOTONIC ns through the library. */
static inline uint64_t lp_impl_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (LP_IMPL_LIKELY(LP_IMPL_LOAD_RELAXED(lp_impl_clock_counter))) return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
  if (LP_IMPL_LIKELY(LP_IMPL_LOAD_RELAXED(lp_impl_clock_counter))) {
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
  }
#endif
  return lp_impl_ticks_slow();
}

/*
 * Appends one event to the calling thread's current chunk and publishes it
 * with a release store of the cursor, which is all the exporter reads.
 * A full chunk, a thread without one, and an unregistered thread all look
 * the same here (cursor == limit) and go to the slow path. Returns 1 if the
 * event was recorded, 0 if it was dropped.
 */
static inline uint32_t lp_impl_emit(uintptr_t tag) {
  lp_impl_thread_t *t = lp_impl_self;
  lp_impl_event_t *e = LP_IMPL_LOAD_RELAXED(t->tcur);
  if (LP_IMPL_UNLIKELY(e == t->tlim)) return lp_impl_emit_slow(tag);
  e->ts = lp_impl_ticks();
  e->tag = tag;
  LP_IMPL_STORE_RELEASE(t->tcur, e + 1);
  return 1;
}

#define LP_IMPL_CAT2(a, b) a##b
#define LP_IMPL_CAT(a, b) LP_IMPL_CAT2(a, b)
#define LP_IMPL_SITE(label, level) { (label), __FILE__, __func__, (uint32_t)__LINE__, (uint32_t)(level) }
#define LP_IMPL_SCOPE(level, label, n) \
  static const lp_site_t LP_IMPL_CAT(lp_impl_site_, n) = LP_IMPL_SITE(label, level); \
  lp_impl_scope_t LP_IMPL_CAT(lp_impl_scope_, n) __attribute__((cleanup(lp_impl_leave), unused)) = \
      lp_impl_enter(&LP_IMPL_CAT(lp_impl_site_, n))

static inline uint32_t lp_impl_push(uintptr_t tag) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  if (LP_IMPL_UNLIKELY(d >= LP_STACK_CAPACITY)) return lp_impl_push_slow(tag);
  /* Release: a reader that sees this frame also sees every word published before it. */
  LP_IMPL_STORE_RELEASE(t->frames[d], tag);
  LP_IMPL_STORE_RELEASE(t->word, w + LP_IMPL_COUNT_ONE + 1);
  return d;
}

static inline void lp_impl_pop(uint32_t depth) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  if (LP_IMPL_UNLIKELY(((uint32_t)w & LP_IMPL_DEPTH_MASK) != depth + 1)) {
    lp_impl_pop_slow(depth);
    return;
  }
  LP_IMPL_STORE_RELEASE(t->word, (w & ~(uint64_t)LP_IMPL_DEPTH_MASK) + LP_IMPL_COUNT_ONE + depth);
}

static inline lp_impl_scope_t lp_impl_enter(const lp_site_t *site) {
  lp_impl_scope_t s;
  s.site = site;
  if (LP_IMPL_UNLIKELY(site->level & LP_IMPL_LOAD_RELAXED(lp_impl_levels))) {
    /* Recording: a path of its own, so that the common one carries nothing of it. */
    uint32_t traced = lp_impl_emit((uintptr_t)site | LP_IMPL_EV_BEGIN);
    s.expect = (lp_impl_push((uintptr_t)site | traced) + 1) | (traced ? LP_IMPL_EXPECT_TRACED : 0);
    return s;
  }
  s.expect = lp_impl_push((uintptr_t)site) + 1;
  return s;
}

static inline void lp_impl_leave(lp_impl_scope_t *s) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  if (LP_IMPL_UNLIKELY(d != s->expect)) {
    /* Recorded, with the stack as it should be: pop, then record the end. */
    if (d == (s->expect & LP_IMPL_EXPECT_DEPTH) && (s->expect & LP_IMPL_EXPECT_TRACED)) {
      LP_IMPL_STORE_RELEASE(t->word, (w & ~(uint64_t)LP_IMPL_DEPTH_MASK) + LP_IMPL_COUNT_ONE + (d - 1));
      lp_impl_emit((uintptr_t)s->site | LP_IMPL_EV_END);
      return;
    }
    lp_impl_leave_slow(s->site, s->expect); /* a stack to heal */
    return;
  }
  LP_IMPL_STORE_RELEASE(t->word, (w & ~(uint64_t)LP_IMPL_DEPTH_MASK) + LP_IMPL_COUNT_ONE + (d - 1));
}

/*
 * Pushes first: a begin is recorded only for a frame that can hold the
 * "recorded" bit, so that the LP_END() that pops it knows to record the end.
 * Setting the bit rewrites the frame with the same site, which a reader
 * masks off: every copy it can make is still a stack that existed.
 */
static inline void lp_impl_begin(const lp_site_t *site) {
  uint32_t d = lp_impl_push((uintptr_t)site);
  if (LP_IMPL_UNLIKELY(site->level & LP_IMPL_LOAD_RELAXED(lp_impl_levels)) && d < LP_STACK_CAPACITY &&
      lp_impl_emit((uintptr_t)site | LP_IMPL_EV_BEGIN))
    LP_IMPL_STORE_RELEASE(lp_impl_self->frames[d], (uintptr_t)site | LP_IMPL_TRACED);
}

static inline void lp_impl_end(void) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  uintptr_t tag;
  /* d - 1 wraps for d == 0: empty stack, deep stack and unregistered thread all go slow. */
  if (LP_IMPL_UNLIKELY(d - 1u >= LP_STACK_CAPACITY)) {
    lp_impl_end_slow();
    return;
  }
  tag = LP_IMPL_LOAD_RELAXED(t->frames[d - 1]);
  LP_IMPL_STORE_RELEASE(t->word, (w & ~(uint64_t)LP_IMPL_DEPTH_MASK) + LP_IMPL_COUNT_ONE + (d - 1));
  if (LP_IMPL_UNLIKELY(tag & LP_IMPL_TRACED))
    lp_impl_emit((tag & ~(uintptr_t)LP_IMPL_TRACED) | LP_IMPL_EV_END);
}

/* ------------------------------------------------------------------------ */
/* Compiled out                                                             */
/* ------------------------------------------------------------------------ */

#ifdef LABELPROF_DISABLE
#include <errno.h>
/* With LABELPROF_DISABLE the functions are stubs: nothing runs, nothing links. */
#define LP_IMPL_STUB static inline __attribute__((unused))
#define lp_strerror(e) lp_impl_disabled_strerror(e)
#define lp_thread_set_name(n) lp_impl_disabled_int1((const void *)(n))
#define lp_profile_start(o) lp_impl_disabled_int1((const void *)(o))
#define lp_profile_stop(o) lp_impl_disabled_int1((const void *)(o))
#define lp_profile_running() 0
#define lp_profile_print(p, f) lp_impl_disabled_int2((const void *)(p), (const void *)(f))
#define lp_profile_print_ex(p, f, o) ((void)(f), lp_impl_disabled_int2((const void *)(p), (const void *)(o)))
#define lp_profile_write_folded(p, f) lp_impl_disabled_int2((const void *)(p), (const void *)(f))
#define lp_profile_free(p) ((void)(p))
#define lp_profile_get_stats(p, o) lp_impl_disabled_int2((const void *)(p), (const void *)(o))
#define lp_profile_root(p) ((void)(p), (const lp_node_t *)0)
#define lp_profile_thread_count(p) ((void)(p), (size_t)0)
#define lp_profile_thread(p, i, o) ((void)(i), lp_impl_disabled_int2((const void *)(p), (const void *)(o)))
#define lp_node_label(n) ((void)(n), (const char *)0)
#define lp_node_samples(n) ((void)(n), (uint64_t)0)
#define lp_node_self(n) ((void)(n), (uint64_t)0)
#define lp_node_child_count(n) ((void)(n), (size_t)0)
#define lp_node_child(n, i) ((void)(n), (void)(i), (const lp_node_t *)0)
#define lp_node_find(n, l) ((void)(n), (void)(l), (const lp_node_t *)0)
#define lp_trace_start(o) lp_impl_disabled_int1((const void *)(o))
#define lp_trace_stop() (-ENOTSUP)
#define lp_trace_running() 0
#define lp_trace_write_json(p, n) lp_impl_disabled_int2((const void *)(p), (const void *)(n))
#define lp_trace_get_stats(o) lp_impl_disabled_int1((const void *)(o))
#define lp_now_ns() ((uint64_t)0)
#define lp_track_create(n) ((lp_track_t)lp_impl_disabled_int1((const void *)(n)))
#define lp_track_complete(t, n, s, d) \
  ((void)(t), (void)(s), (void)(d), lp_impl_disabled_int1((const void *)(n)))
LP_IMPL_STUB const char *lp_impl_disabled_strerror(int e) {
  (void)e;
  return "labelprof was compiled out (LABELPROF_DISABLE)";
}
LP_IMPL_STUB int lp_impl_disabled_int1(const void *a) {
  (void)a;
  return -ENOTSUP;
}
LP_IMPL_STUB int lp_impl_disabled_int2(const void *a, const void *b) {
  (void)a;
  (void)b;
  return -ENOTSUP;
}
#endif /* LABELPROF_DISABLE */

#ifdef __cplusplus
}
#endif

#endif /* LABELPROF_H */
