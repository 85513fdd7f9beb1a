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
 * lp_trace_write_json), or as systrace text for Android's and Linux's
 * tools (lp_trace_write_systrace). Labels may carry a layer and a phase
 * (LP_SCOPE_PHASE: see part 6).
 *
 * A label costs a few stores to memory no other thread writes, so labels can
 * stay in production code. With -DLABELPROF_DISABLE (or -DLP_DISABLE) every
 * macro compiles to nothing and every function becomes an inline stub, so
 * the program builds and links without the library.
 *
 * A label inlines only what an unrecorded scope runs: two tests, the push
 * and the matched pop, about 20 instructions and, on x86-64, no register
 * saved for it. Recording and subscribers are called out of line. Define
 * LABELPROF_INLINE_RECORDING before including this file to inline the
 * recording as well: each labelled function then grows by a few hundred
 * bytes and the registers its values need, for a recorded scope that costs
 * about what it does out of line (it is bound by its two reads of the
 * clock). Subscribers are always called out of line. Files built either
 * way work together; a unit built against another version's header is
 * refused at load (one line on stderr, labels disabled).
 *
 * How this file is laid out. The API comes first, in the order a user needs
 * it; each part opens with what it is for:
 *   1. Scopes: the macros that label code, their levels, the thread's name.
 *   2. The profile: the sampled percentage tree (and lp_strerror()).
 *   3. The timeline: every scope's begin and end, as JSON, Perfetto protobuf
 *      (written at the end or streamed) or systrace text.
 *   4. The environment: the LABELPROF_* variables' sessions, lp_dump().
 *   5. Subscribers: callbacks for tools, streams, events.
 *   6. Layers and phases: NNAPI's vocabulary for scopes.
 * After the API: the inline code the macros expand to, in
 * <labelprof/impl.h>, which this file includes and which is not an API; or,
 * with LABELPROF_DISABLE, every compiled-out replacement, in one block at
 * the end of this file.
 *
 * Where to include it. This header includes <stddef.h>, <stdint.h> and
 * <stdio.h>: its API has fixed-width integers and FILE. With glibc the
 * first system header a file includes fixes the feature-test macros for the
 * whole file: a _GNU_SOURCE, _POSIX_C_SOURCE or _FILE_OFFSET_BITS defined
 * after it has no effect, and what it would declare (mremap, say) stays
 * undeclared. So include labelprof.h where a system header may go: after the
 * file's feature-test macros, for instance after its own system includes;
 * or define those macros on the command line (-D_GNU_SOURCE).
 *
 * Conventions. Functions that can fail return 0 or a negative errno value;
 * lp_strerror() names it. The library never calls exit() or abort() on a
 * caller's mistake. Unless a comment says otherwise, every function may be
 * called from any thread. Labels are string literals, or strings that
 * outlive every profile and trace they appear in.
 *
 * Names that start with lp_impl_ / LP_IMPL_ belong to the inline code. They
 * are not part of the API and change without notice.
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

/* LP_DISABLE, the name the LP_ macros suggest, compiles labelprof out as LABELPROF_DISABLE does. */
#if defined(LP_DISABLE) && !defined(LABELPROF_DISABLE)
#define LABELPROF_DISABLE 1
#endif

#if defined(__GNUC__) || defined(__clang__)
#define LP_EXPORT __attribute__((visibility("default")))
#else
#error "labelprof needs GCC or Clang (thread-local storage models, the cleanup attribute)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* 1. Scopes                                                                */
/* ======================================================================== */

/*
 * A scope labels the code from where it opens to where its block ends. Each
 * thread keeps a pseudo-stack of its open labels; the profile samples it and
 * the timeline records its begins and ends. Nothing needs registering: a
 * thread joins at its first label. Scopes with a layer and a phase
 * (LP_SCOPE_PHASE, LP_PHASE_SWITCH, LP_SCOPE_SUBTRACT) are in part 6;
 * LP_NOTIFY_SCOPE, a scope for subscribers only, is in part 5.
 *
 * LP_SCOPE("label"): a label from here to the end of the enclosing block,
 * however the block is left (return, break, goto). Usable several times in
 * one block. A runtime-level scope for the timeline.
 *
 * LP_SCOPE_L(level, "label"): the same with an LP_LEVEL_* bit.
 *
 * A label is a constant expression: a string literal, or the address of a
 * static array. NULL is accepted and reported as "(null)".
 *
 * LP_BEGIN("label") ... LP_END(): a manual pair, for code that cannot use a
 * block. LP_END() ends the innermost label of the calling thread, whichever
 * it is. An LP_END() with nothing to end (also on a thread that never used a
 * label) is counted and ignored. (A manual pair deeper than
 * LP_STACK_CAPACITY is on the pseudo-stack but not on the timeline.)
 *
 * Labels are not async-signal-safe: do not use them in signal handlers. A
 * thread's first label allocates, and a handler's label could interleave
 * with the push it interrupted.
 *
 * The pseudo-stack survives mistakes: a scope that ends while labels it did
 * not start are still open above it (a longjmp, a missing LP_END) pops them
 * too, and counts a mismatch. Nothing is ever written beyond the stack. On
 * the timeline, begins and ends carry their depth, so the scopes a longjmp
 * skipped are closed where the scope that caught it ends, even in recursion.
 *
 * At exit: labels keep working after the environment's reports are written
 * (in destructors, in atexit handlers that run later, on threads still
 * running); they are simply not recorded. The program's own atexit handlers
 * run before labelprof's and are recorded; its destructor functions run
 * before it with the shared library and after it with the static one.
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

/*
 * Trace levels, a bitmask. Each scope has one level; a timeline records the
 * scopes whose level is enabled. Levels never change the sampled tree: every
 * scope is on the pseudo-stack whatever its level.
 */
#define LP_LEVEL_REQUEST  0x1u /* one per request or frame: the coarsest view */
#define LP_LEVEL_RUNTIME  0x2u /* runtime phases; the level of a plain LP_SCOPE */
#define LP_LEVEL_OPERATOR 0x4u /* individual operators or kernels */
#define LP_LEVEL_DEBUG    0x8u /* fine detail, usually left off */
#define LP_LEVEL_ANNOTATIONS 0x10u /* NVTX ranges and ITT tasks, through labelprof's NVTX and ITT libraries */
#define LP_LEVEL_STANDARD (LP_LEVEL_RUNTIME | LP_LEVEL_OPERATOR)
#define LP_LEVEL_ALL      0x1fu

/*
 * The deepest pseudo-stack recorded per thread. Deeper scopes still nest and
 * unwind correctly; the profile shows them as one "(deeper than 64 labels)"
 * node under the 64th.
 */
#define LP_STACK_CAPACITY 64

/*
 * One record per call site, created by the macros as a static constant: the
 * hot path passes its address and never copies, hashes or looks up the label.
 * Users rarely touch it; it is public so that tools can read what a site is.
 * Fields are only ever appended: code that initialises one by position
 * (rarely needed) lists the layer, phase, mode and reserved fields too, as
 * zeros for a plain label.
 */
typedef struct lp_site {
  const char *label; /* the label text */
  const char *file;  /* __FILE__ of the call site */
  const char *func;  /* __func__ of the call site */
  uint32_t line;     /* __LINE__ of the call site */
  uint32_t level;    /* one LP_LEVEL_* bit */
  /* layers and phases (part 6): zero for a plain label */
  uint8_t layer; /* LP_LAYER_*; LP_LAYER_NONE (0) for a label without a layer */
  uint8_t phase; /* LP_PHASE_*; meaningful only with a layer */
  uint8_t mode;  /* LP_MODE_SCOPE, LP_MODE_SWITCH or LP_MODE_SUBTRACT */
  uint8_t reserved_layers; /* zero */
} __attribute__((aligned(8))) lp_site_t;

/*
 * Names the calling thread in reports (the per-thread trees, and timeline
 * lanes). The name is copied; at most 63 bytes are kept. A thread that never
 * calls this is shown under its operating-system name at the time it first
 * used a label. Returns 0, -EINVAL if name is NULL, -ENOMEM if the thread
 * could not be registered.
 */
LP_EXPORT int lp_thread_set_name(const char *name);

/* ======================================================================== */
/* 2. The profile                                                           */
/* ======================================================================== */

/*
 * The sampled profile: a collector thread looks at every labelled thread's
 * pseudo-stack hz times a second, and the samples make a tree of
 * percentages, printed in the gemmlowp layout or written as folded stacks
 * for flame graphs. It costs the labelled threads nothing but their labels.
 */

/*
 * A short English description of a value returned by this library (0 or a
 * negative errno such as -EBUSY; the sign does not matter), in the library's
 * own words where a value has a meaning of its own (-EBUSY: already
 * running), else the system's description of that errno. Never NULL; the
 * string is static; safe from any thread.
 */
LP_EXPORT const char *lp_strerror(int err);

/*
 * A finished profile: the tree of samples of every thread that used labels
 * while the collector ran, including threads that have since exited. It owns
 * copies of its label texts, so it may outlive the code that made them.
 */
typedef struct lp_profile lp_profile_t;

/* A node of a profile's tree. Owned by the profile. */
typedef struct lp_node lp_node_t;

/*
 * How the collector thread asks to be scheduled. Its tick is a wakeup, and on
 * a machine with more runnable threads than CPUs a wakeup waits for a CPU:
 * with default scheduling a 1 kHz collector can lose half its ticks there.
 *
 *   LP_SCHED_SLICE    (the default) SCHED_OTHER, its nice value untouched,
 *                     with a short slice: sched_setattr's sched_runtime of
 *                     100 µs, which Linux 6.12 and later take as the task's
 *                     EEVDF slice, so that the thread is picked soon after it
 *                     wakes. No privilege is needed. Where the kernel refuses
 *                     or ignores it (older kernels, a seccomp filter), the
 *                     collector runs with default scheduling, and says so.
 *   LP_SCHED_DEFAULT  the scheduling the collector thread was created with.
 *   LP_SCHED_FIFO     SCHED_FIFO at sched_priority (1 to 99; 0 means 1), where
 *                     the process may (CAP_SYS_NICE, or RLIMIT_RTPRIO at least
 *                     that priority); otherwise one warning on stderr and the
 *                     slice instead. A real-time thread that misbehaved could
 *                     starve the CPU it runs on: the collector's pass is bounded
 *                     by the threads it samples, but ask for it only where
 *                     the rate matters more than that risk.
 */
typedef enum lp_sched {
  LP_SCHED_SLICE = 0,
  LP_SCHED_DEFAULT = 1,
  LP_SCHED_FIFO = 2
} lp_sched_t;

/* Options for lp_profile_start(). Zero-initialise; a zero field means its default. */
typedef struct lp_profile_opts {
  uint32_t hz;             /* samples per second per thread; 0 means 1000; at most 100000 */
  lp_sched_t sched;        /* how the collector is scheduled; LP_SCHED_SLICE by default */
  uint32_t sched_priority; /* LP_SCHED_FIFO's priority, 1 to 99; 0 means 1 */
  uint32_t flags;          /* LP_PROFILE_* bits (see "CPU time and pprof") */
  int cpu_signal;          /* LP_PROFILE_CPU's signal; 0 means SIGRTMAX - 4 (see "CPU time and pprof") */
} lp_profile_opts_t;

/*
 * Starts the program's profile: a collector thread that wakes hz times a
 * second and samples the pseudo-stack of every thread that uses labels.
 * Time is cut into periods of 1/hz s on absolute CLOCK_MONOTONIC deadlines,
 * and each period gets one tick at an instant drawn at random within it, so
 * that work whose period is a whole number of ticks (a 1 kHz control loop,
 * a frame loop) is seen at every phase and not locked to one. opts may be
 * NULL for the defaults. Threads need no registration; they join the first
 * time they use a label.
 *
 * The program's profile and the environment's (LABELPROF_PROFILE) nest: one
 * collector serves both, and each profile holds exactly the samples taken
 * between its own start and stop. If the environment's profile is already
 * running, the collector keeps its rate (lp_profile_stats_t tells both
 * rates) and the program's start and stop work as if it were alone.
 *
 * When it starts the collector thread, lp_profile_start() returns once that
 * thread runs with its scheduling in place; the first period starts then. On a crowded machine this wait is the new thread's first
 * turn on a CPU.
 *
 * Returns 0; -EBUSY if the program's profile is already running;
 * -EINVAL for an out-of-range option (a cpu_signal LP_PROFILE_CPU may not
 * take among them); -EEXIST with LP_PROFILE_CPU when the program handles or
 * ignores its signal (nothing is started: choose another with cpu_signal);
 * -ENOMEM; or the negative error pthread_create() gave.
 */
LP_EXPORT int lp_profile_start(const lp_profile_opts_t *opts);

/*
 * Stops the program's profile and hands it over in *out (free it with
 * lp_profile_free()); the collector stops after its last tick unless the
 * environment's profile still runs. out may be NULL to discard the profile.
 * Returns 0; -EINVAL if the program's profile is not running (nothing is
 * written to *out); -ENOMEM if the tree could not be built (the samples are
 * lost, the profile is stopped).
 */
LP_EXPORT int lp_profile_stop(lp_profile_t **out);

/* 1 if the program's profile is running, 0 if not (the environment's does not count). */
LP_EXPORT int lp_profile_running(void);

/* Report options for lp_profile_print_ex(). Zero-initialise. */
typedef struct lp_print_opts {
  uint32_t flags;     /* LP_PRINT_* bits */
  double min_percent; /* 0 to 100: hide nodes under this percentage (see lp_profile_print) */
} lp_print_opts_t;

#define LP_PRINT_THREADS 0x1u /* one tree per thread, percentages of that thread's samples */
/* Sample counts and the time they stand for on every line: samples x the achieved tick (duration / ticks). */
#define LP_PRINT_COUNTS  0x2u

/*
 * Prints the tree in the gemmlowp layout, under a line that states what the
 * profile cost and how well the collector kept its rate:
 *
 *     labelprof profile by wall time (2 threads, 2000 samples)
 *     2.01 s at 1000 Hz requested, 998 Hz achieved, 3 missed ticks (one at a random
 *       instant of each 1 ms); collector 0.9% of one CPU, slice 100 µs
 *     100.00% matmul
 *         62.10% kernel
 *         ...
 *         1.20% other
 *     0.00% other (outside of any label)
 *
 * Percentages are of all samples, not of the parent. Children are sorted by
 * weight, heaviest first; "other" closes every node that has children and
 * holds the samples that stopped at that node. Labels with the same text are
 * merged even when they come from different call sites. Control characters
 * in labels and thread names are printed as '?'. The second line says how
 * ticks were placed (one at a random instant of each period of the tick,
 * see lp_profile_start). When the collector achieved under 90% of the
 * requested rate, a "note:" line says so.
 *
 * With min_percent, a node under that share is hidden and its samples count
 * in its parent's "other"; hidden top-level labels are summed on a line of
 * their own, "other (hidden labels)", since they are not outside of any
 * label.
 *
 * The first line says the weighting: "labelprof profile by wall time"
 * (samples), or "by CPU time" (LP_PRINT_CPU, see "CPU time and pprof").
 *
 * Returns 0; -EINVAL if p or out is NULL, or min_percent is not a number
 * from 0 to 100 (nothing is written); -ENODATA for LP_PRINT_CPU on a
 * profile without CPU time (nothing is written); -EIO if writing to out
 * failed.
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
  uint64_t missed_ticks;     /* periods whose tick the collector was too late for; not sampled */
  uint64_t skipped;          /* thread-samples abandoned: the stack changed on every retry */
  uint64_t collector_cpu_ns; /* CPU time the collector thread used, wakeups included */
  uint64_t sampling_ns;      /* time spent inside sampling passes: the work per tick, without the wakeup */
  uint64_t duration_ns;      /* from start to stop */
  uint64_t tick_ns;          /* 1e9 / hz */
  uint32_t threads;          /* threads with at least one sample (each thread of a merged record counts) */
  uint32_t hz;               /* the rate the collector ran at */
  uint32_t requested_hz;     /* the rate this profile asked for (a nested profile runs at the first one's) */
  uint64_t truncated;  /* label pushes deeper than LP_STACK_CAPACITY during the profile */
  uint64_t mismatched; /* scope ends that did not match the top of the stack (healed) */
  uint64_t unmatched;  /* LP_END() with nothing to end (ignored) */
  /*
   * How the collector was scheduled, as the kernel reported it back
   * (sched_getattr): LP_SCHED_SLICE with the slice granted, LP_SCHED_FIFO
   * with its priority, or LP_SCHED_DEFAULT when neither was asked for or
   * the kernel refused or ignored it. For a nested profile, the collector's
   * as the first profile started it.
   */
  lp_sched_t sched;
  uint32_t sched_priority; /* LP_SCHED_FIFO: the priority it runs at */
  uint64_t slice_ns;       /* LP_SCHED_SLICE: the slice granted */
  /*
   * Why the rate may have been lost, for the report's note: the most
   * runnable threads seen at a tick against the CPUs this process may use
   * (both 0 if unknown), and how often a cgroup's CPU quota (cpu.max)
   * throttled the process during the profile.
   */
  uint32_t max_runnable;
  uint32_t cpus;
  uint64_t throttled;
  /* CPU samples (LP_PROFILE_CPU; see "CPU time and pprof"), all 0 without them. */
  uint64_t cpu_samples;    /* samples of the threads' CPU timers in the tree */
  uint64_t cpu_lost;       /* CPU samples lost: a thread's buffer was full (the collector far behind) */
  int cpu_signal;          /* the signal the CPU timers sent */
  uint32_t cpu_untimed;    /* threads that got no CPU timer (timer_create failed): their CPU time is missing */
  uint64_t cpu_stopped_ns; /* when CPU sampling stopped, ns into the profile, because the program put its
                              own handler on cpu_signal; 0 if it did not */
} lp_profile_stats_t;

/* Fills *out. Returns 0, or -EINVAL if p or out is NULL. */
LP_EXPORT int lp_profile_get_stats(const lp_profile_t *p, lp_profile_stats_t *out);

/*
 * The root of the all-threads tree. Its label is NULL, its samples are all
 * samples, and its self count is the samples outside any label. NULL if p is
 * NULL.
 */
LP_EXPORT const lp_node_t *lp_profile_root(const lp_profile_t *p);

/*
 * One sampled thread of a profile. Threads that exited while the collector
 * ran keep trees of their own, up to a point: once more than 64 exited
 * threads are kept, the oldest are merged into one record per name (runs of
 * digits in the name count as "*", so "worker-17" and "worker-18" share
 * "worker-*"), and once there are 256 such names, into "(other exited
 * threads)". Memory therefore stays bounded however many threads come and go.
 */
typedef struct lp_thread_info {
  uint64_t tid;          /* the kernel's thread id; 0 for a merged record */
  const char *name;      /* owned by the profile */
  uint64_t samples;      /* this thread's samples */
  uint32_t merged;       /* 0 for one thread; for a merged record, how many exited threads it holds */
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

/* ======================================================================== */
/* 3. The timeline                                                          */
/* ======================================================================== */

/*
 * The timeline: while a session records, every scope whose level is
 * enabled writes a begin and an end event, stamped with the CPU's counter
 * where it is sound (see lp_clock_t), into its thread's buffer; instants, counters and work on virtual tracks
 * join them. A session is written as Chrome Trace Event JSON or as systrace
 * text.
 */

/*
 * What happens when the event memory budget is spent:
 *   LP_TRACE_DISCARD  recording stops; every event after that is counted as
 *                     dropped, a scope as two (its begin and its end); a
 *                     scope that began before still records its end. From
 *                     then on a scope of a recorded level costs what an
 *                     untraced one does (its drops are counted from the
 *                     thread's pushes), and a scope of a level the session
 *                     does not record is a call into the library.
 *   LP_TRACE_RING     a flight recorder: the oldest 16 KiB chunk of the session
 *                     that no thread is filling is reused, so every thread
 *                     keeps its newest events and threads that exited cannot
 *                     hold the memory against new ones; overwritten events
 *                     are counted as dropped. Give it at least one chunk per
 *                     recording thread: a thread that cannot get one records
 *                     nothing (counted).
 */
typedef enum lp_trace_policy { LP_TRACE_DISCARD = 0, LP_TRACE_RING = 1, LP_TRACE_STREAM = 2 } lp_trace_policy_t;

/*
 * ---- The streamed timeline (LP_TRACE_STREAM) ----
 * LP_TRACE_STREAM writes the timeline to a Perfetto file (opts.path) while
 * the program runs: a writer thread of the library takes the chunks that
 * threads have filled, in batches (when an eighth of the budget waits, or
 * 100 ms after the first of them filled), appends their events as whole
 * TracePackets with checked write(2) calls, and returns the chunks to the
 * pool. The budget then bounds memory,
 * not the length of the session. The hot path never waits for the writer:
 * when it falls behind and the budget has no free chunk, events are
 * dropped and counted, as LP_TRACE_DISCARD's are, until chunks come back.
 * Each second (LABELPROF_TRACE_FLUSH changes it, for every stream of the
 * process) the writer also appends what the chunks being filled hold so
 * far, read up to the cursor their threads published (no lock or wait on
 * the recording path), so that what a slow program records reaches the
 * file within that long. The file is a valid trace after every append: a
 * process killed at any moment leaves every packet written before the kill
 * readable (and at most the one packet being written cut short), every
 * scope that ended a second before it among them. lp_dump() and the dump
 * signal append what is recorded so far; lp_trace_stop() (and the exit, for
 * LABELPROF_TRACE) appends the rest and closes the file. The stream's file
 * is Perfetto only; an export of a streamed session to another path
 * (lp_trace_write_json() ...) flushes the stream and writes nothing else.
 * The file does not fill the page cache: the writer starts the writeback of
 * what it writes, and keeps at most 48 MiB of it cached (on a file
 * system that supports it; a pipe, tmpfs: as any write), none of a file
 * rotated out.
 * Rotation: opts.rotate_bytes and opts.rotate_ns (0: none) start a new file
 * once the current one holds that many bytes or has been written that long;
 * a "%n" in opts.path is then the file's number (1, 2, ...) and every file is
 * a self-contained trace. A stream's file is locked (flock, exclusive)
 * while it is written, and its first file until the stream ends: another
 * stream given the same file, in this process or another (a child that
 * inherited LABELPROF_TRACE), writes nothing to it instead of emptying it.
 * lp_trace_start() returns -EINVAL for a streamed session without a path
 * (or with rotation and no "%n"), -EBUSY while another session records,
 * -ETXTBSY when another stream is writing its first file, and the error of
 * opening that file; lp_trace_stop() returns the first error writing it
 * (also said on stderr; a later file another stream holds is lost).
 */

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
  lp_trace_policy_t policy; /* LP_TRACE_DISCARD (the default), LP_TRACE_RING or LP_TRACE_STREAM */
  uint64_t budget_bytes;    /* event memory for all threads and tracks; 0 means 64 MiB;
                               it is used in 16 KiB chunks, at least one */
  lp_clock_t clock;         /* LP_CLOCK_AUTO (the default), LP_CLOCK_TSC or LP_CLOCK_MONOTONIC */
  const char *path;         /* LP_TRACE_STREAM: the Perfetto file ("%n": the rotation's number); else unused */
  uint64_t rotate_bytes;    /* LP_TRACE_STREAM: a new file past this size; 0: never */
  uint64_t rotate_ns;       /* LP_TRACE_STREAM: a new file after this long; 0: never */
} lp_trace_opts_t;

/*
 * Starts the program's timeline: from now on every scope, instant and
 * counter whose level is enabled records events into its thread's buffer
 * (no lock, 16 bytes an event, names resolved only at export). opts may be
 * NULL for the defaults.
 *
 * Sessions are windows onto one recording. When nothing is recording, a
 * start begins a new recording with this session's budget, policy and clock
 * (the clock only at the first start of the process, see lp_clock_t), and
 * what earlier sessions recorded is discarded (its memory is kept for the
 * new one, already touched, so a new session records at full speed). When
 * the environment's timeline (LABELPROF_TRACE) is already recording, this
 * session joins it: the levels recorded become the union of both, the
 * budget and policy stay the environment's, and each export writes only its
 * own session's window and levels. Nothing one session does takes data from
 * the other; but one budget serves both, so in discard mode a spent budget
 * stops both, and in ring mode the ring may reuse what a stopped session has
 * not written yet.
 *
 * Returns 0; -EBUSY if the program's timeline is already recording;
 * -EINVAL for a level outside LP_LEVEL_ALL, an unknown policy or clock, or a
 * budget under 16 KiB.
 */
LP_EXPORT int lp_trace_start(const lp_trace_opts_t *opts);

/*
 * Stops the program's timeline. What it recorded stays for
 * lp_trace_write_json() until a start begins a new recording. A scope that
 * began while recording and ends after the stop still records its end: each
 * recorded begin keeps room for its end, so that it is never lost, not even
 * when the budget is spent. Returns 0, or -EINVAL if the program's timeline
 * is not recording.
 */
LP_EXPORT int lp_trace_stop(void);

/* 1 if the program's timeline is recording, 0 if not (the environment's does not count). */
LP_EXPORT int lp_trace_running(void);

/*
 * Writes the program's current (or last) session as Chrome Trace Event JSON
 * (the object form, with metadata) to path: the events stamped inside its
 * window, of its levels, of every thread including those that have exited,
 * and of every track (an item belongs to the sessions that were recording
 * when lp_track_complete() recorded it). process_name names the process
 * lane; NULL means the program's name. A scope whose begin the window does
 * not hold (it began before the session, or the ring reused its chunk) gets
 * a begin made up at the lane's start, with "args":{"truncated":true}, so
 * that what encloses the kept events still shows.
 *
 * A regular file appears complete or not at all: the JSON goes to a
 * temporary file in the same directory (an unnamed one where the file
 * system allows, so that not even a crash leaves one behind; its name
 * always fits, however long path's is), renamed over path when every write
 * has succeeded, and removed on any failure. Readers never see a partial
 * file; the data is not forced to disk. A file that is replaced keeps its
 * permission bits, and its owner and group where the caller may set them;
 * a replaced hard link becomes a new file (other links keep the old
 * content). Symbolic links are followed to their target. /dev/stdout,
 * /dev/stderr, /dev/fd/N, /proc/self/fd/N, and links to them, write to that
 * descriptor at its current offset; pipes, FIFOs and devices are written
 * directly. While writing, SIGPIPE and SIGXFSZ are blocked on the calling
 * thread (the process's dispositions are not touched), so a pipe whose
 * reader has gone gives -EPIPE and a file over RLIMIT_FSIZE gives -EFBIG,
 * instead of killing the process.
 *
 * It may be called while recording, and blocks nobody else: the session is
 * snapshotted under a lock held for microseconds, and the file is opened
 * and written without it, however long it takes (a FIFO waiting for its
 * reader, a slow disk). The chunks it holds are pinned until it is done: the
 * ring does not reuse them and a new recording does not take them back, so
 * the file holds the session that was current when it was called, even if
 * the program starts another meanwhile. When the clock jumped during the
 * session (a VM migrated or restored), otherData and one stderr line say so.
 *
 * Times: "ts" is microseconds (three decimals) since otherData.ts_base_ns,
 * a CLOCK_MONOTONIC time in nanoseconds written as a string of digits; an
 * event happened at ts_base_ns + ts * 1000 ns. Relative to that base, every
 * time stays exact for readers that parse numbers as doubles (all of them)
 * at any uptime, where CLOCK_MONOTONIC itself would not past 104 days.
 *
 * Returns 0; -EINVAL if path is NULL or the program never started a
 * timeline; -ENOMEM; or the negative errno of the open, write or rename that
 * failed (-ENOENT for a missing directory, -ENOSPC for a full disk, -EFBIG,
 * -EPIPE...).
 */
LP_EXPORT int lp_trace_write_json(const char *path, const char *process_name);

/*
 * Writes the program's current or last timeline session to path as a
 * Perfetto trace (TrackEvent protobuf), which ui.perfetto.dev and Perfetto's
 * trace processor read: the same events as lp_trace_write_json() (scopes,
 * instants, counters, tracks, made-up begins marked "truncated", scopes a
 * longjmp skipped marked "unterminated"), thread and process names as track
 * descriptors, levels (or layer and phase) as categories, and the JSON's
 * otherData as the debug annotations of an instant named "labelprof
 * session" on the process's track. Times are CLOCK_MONOTONIC nanoseconds,
 * exact, tied to CLOCK_BOOTTIME by a clock snapshot so that the trace lines
 * up with system traces. process_name names the process; NULL: the
 * program's name. The file is written as lp_trace_write_json() writes its
 * own, with the same guarantees and the same returns.
 */
LP_EXPORT int lp_trace_write_perfetto(const char *path, const char *process_name);

/*
 * Writes the program's current (or last) session, the same events as
 * lp_trace_write_json() writes (its window, its levels, every thread), as
 * systrace text: the kernel's ftrace text format with the TGID column, the
 * form Android's systrace captures and `atrace` write, read by AOSP's NNAPI
 * parse_systrace.py, catapult's trace viewer, Perfetto's UI and trace
 * processor, and `labelprof nnapi` / `labelprof layers`:
 *
 *     # tracer: nop
 *     #
 *     # entries-in-buffer/entries-written: 4/4   #P:2
 *     #
 *     ...
 *     #           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION
 *     #              | |        |      |   ||||       |         |
 *                 model-4711  ( 4711) [000] ...1  5210.000100: tracing_mark_write: B|4711|[NN_LR_PP]prepare
 *      worker with a l-4712  ( 4711) [000] ...1  5210.000200: tracing_mark_write: B|4711|kernel
 *      worker with a l-4712  ( 4711) [000] ...1  5210.001200: tracing_mark_write: E|4711
 *                 model-4711  ( 4711) [000] ...1  5210.002100: tracing_mark_write: E|4711
 *
 * One B line per begin, one E line per end, of all threads, in time order
 * (CLOCK_MONOTONIC seconds with microseconds, truncated as the kernel does;
 * a thread's events keep their order). The task column is the thread's name
 * cut to the 15 bytes the kernel keeps (an empty name is "<...>", a
 * one-byte name gets a trailing space so that AOSP's parser reads it;
 * control characters become '?'), then its thread id; TGID and the B|pid
 * field are the process id. The CPU column is always [000]: labelprof does
 * not record CPUs. A scope with a layer is tagged as NNAPI tags it:
 * [NN_<layer>_<phase>] with layers LA LR LI LD LC LU and phases PU PI PP PC
 * PE PIO PTR PCO PR PT PO PWU PBM, prefixed by [SW] for LP_PHASE_SWITCH and
 * [SUB] for LP_SCOPE_SUBTRACT; a plain label is written as it is (control
 * characters become '?'). A switch first ends the scope it replaces: its B
 * follows that scope's E at the same time. Ends whose begins the window
 * does not hold get begins made up at the window's start, and scopes a
 * longjmp skipped end where the scope that caught it ends, as in the JSON;
 * a scope still open when the session is written has a B and no E.
 * Instants, counters and tracks are not written (ftrace text has no lanes
 * for them).
 *
 * The file is written as lp_trace_write_json() writes its own, with the
 * same guarantees (a regular file appears complete or not at all; pipes,
 * /dev/stdout, /dev/fd/N; SIGPIPE and SIGXFSZ blocked while writing).
 * Returns 0; -EINVAL if path is NULL or the program never started a
 * timeline; -ENOMEM; or the negative errno of the open, write or rename
 * that failed.
 */
LP_EXPORT int lp_trace_write_systrace(const char *path);

/* Counters of the current (or last) session. */
typedef struct lp_trace_stats {
  uint64_t recorded;     /* events in the buffers, ready to write; for a stream, written to its files so far
                            (lp_dump() writes what is recorded) */
  uint64_t dropped;      /* events lost: budget spent (discard), overwritten (ring), the writer behind
                            (stream), or during an export; a scope lost is two events, its begin and its
                            end, so that recorded + dropped is every event of the session's levels (manual
                            pairs deeper than LP_STACK_CAPACITY, never on the timeline, aside) */
  uint64_t budget_bytes; /* the session's budget */
  uint64_t used_bytes;   /* chunks allocated now */
  uint32_t threads;      /* thread lanes with events, including exited threads (stream: with events written) */
  uint32_t tracks;       /* tracks created */
  const char *clock;        /* what stamps events: "tsc", "cntvct" or "clock_gettime"; NULL before any session */
  const char *clock_reason; /* why, e.g. "tsc (verified: 2 CPUs, max skew 0 ns, ...)"; static strings */
  uint64_t clock_check_ns;  /* what labelprof's check of the counter cost, once per process; 0 if it did not run */
  uint64_t first_drop_ns;   /* when the first event was dropped (lp_now_ns() domain); 0 if none was */
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

/* ======================================================================== */
/* 4. The environment                                                       */
/* ======================================================================== */

/*
 * Without a line of code beyond the labels, the LABELPROF_* environment
 * variables (the README lists them) start a profile and a timeline when the
 * library loads and write their reports at exit. These sessions run beside
 * the program's own (parts 2 and 3) and take nothing from them. lp_dump()
 * writes their reports at a moment of the program's choosing.
 */

/*
 * Writes what the LABELPROF_* variables asked for, so far, without stopping
 * anything: the profile's reports (LABELPROF_PROFILE, LABELPROF_FOLDED) and
 * the timeline (LABELPROF_TRACE, and LABELPROF_SYSTRACE as systrace text),
 * to their files, with %n in a path replaced
 * by the report's sequence number (1, 2, ...; the report at exit takes the
 * next one). Without %n each dump replaces the file, and the report at exit
 * replaces it last. LABELPROF_DUMP_SIGNAL=USR2 (any signal name or number)
 * does the same on that signal: its handler only wakes a thread of the
 * library, which writes. Returns 0; -EINVAL if the environment asked for no
 * report (or the process is exiting); a negative errno if the profile could
 * not be built. A file that cannot be written is reported on stderr.
 */
LP_EXPORT int lp_dump(void);

/* ======================================================================== */
/* 5. Subscribers                                                           */
/* ======================================================================== */

/*
 * Tools receive what a program does through callbacks. Everything that can
 * be notified belongs to a stream (an id 1..255 with a name); a notification
 * carries a 16-bit trace-point type. Labels are the built-in stream
 * LP_STREAM_LABELS ("labelprof.labels"), registered and initialized when the
 * library loads: every LP_SCOPE and LP_BEGIN/LP_END sends LP_TP_SCOPE_BEGIN
 * and LP_TP_SCOPE_END, every LP_INSTANT sends LP_TP_INSTANT, with the call
 * site in the notification. Runtimes register streams of their own, turn
 * payloads (name, file, line, column) into events with stable ids, and send
 * them with lp_notify() or LP_NOTIFY_SCOPE.
 *
 * A subscriber is a set of callbacks, one per (stream, type), and a pointer
 * of the tool's. It is created disabled; its callbacks change only while it
 * is disabled. Promises, under any concurrency:
 *   - Pairing: if a subscriber's begin callback ran for a scope (a label
 *     scope, a manual LP_BEGIN/LP_END pair, an LP_NOTIFY_SCOPE), its end
 *     callback runs for that scope, on the same thread, with the same
 *     instance slot, even if the subscriber is disabled in between. If the
 *     begin did not run (the subscriber was disabled, or enabled only
 *     later), the end does not run either. A scope's end uses the callbacks
 *     that were enabled at its begin. Scopes that a longjmp skips get their
 *     ends when the scope that catches it ends (the pseudo-stack heals).
 *   - Order: enabled subscribers are called in the order they were enabled
 *     at a begin or single notification, and in reverse order at an end.
 *   - No recursion: labels and notifications made inside a callback reach
 *     no subscriber (a per-thread guard); the labels still count in the
 *     sampled profile and on the timeline.
 *   - Callbacks run on the thread that made the notification, never on a
 *     thread of the library's.
 *   - fork(): the child keeps the subscribers the parent had, enabled or
 *     not, and the forking thread's open scopes still get their ends in it.
 *   - Nobody listening costs nothing: a scope takes the same one predictable
 *     branch it takes when no timeline records; no notification allocates.
 * Limits: at most 16 subscribers enabled at once. Label scopes deeper than
 * LP_STACK_CAPACITY, and LP_NOTIFY_SCOPEs nested more than 64 deep on one
 * thread, send no notifications (neither begin nor end).
 *
 * Attaching a tool without rebuilding the program: LABELPROF_SUBSCRIBERS=
 * /path/a.so,/path/b.so loads those shared objects when the library loads
 * (ignored in setuid and setgid programs). Each must export
 *     void labelprof_subscriber_init(uint32_t major, uint32_t minor,
 *                                    const char *version, const char *stream);
 *     void labelprof_subscriber_finish(const char *stream);
 * init runs for every stream as it is initialized ("labelprof.labels" first,
 * then every stream initialized before the object was loaded), and may run
 * twice for one stream; there the tool creates, configures and enables its
 * subscribers. finish runs at lp_stream_finalize() and at exit for the
 * streams still open. A path that does not load, or lacks either entry
 * point, is named in one line on stderr and skipped; a path given twice
 * loads once. Loaded objects are never unloaded. The library installs one
 * such tool, callstats.so, in the directory named by
 * `pkg-config --variable=subscriberdir labelprof`.
 * A subscriber object takes the lp_* functions from the program, so that it
 * and the program share one library. A program with liblabelprof.a linked in
 * must export them: link it with -rdynamic (-Wl,--export-dynamic), and the
 * object without -llabelprof (which would bring a second library of its
 * own). Where labelprof comes in a library loaded RTLD_LOCAL (a plugin), link
 * the object with -llabelprof. Otherwise either works. When the object does
 * not load, or brings a second copy, the line on stderr says so.
 */

/* A subscriber object's entry points, declared so that a tool's definitions are checked against them. */
LP_EXPORT void labelprof_subscriber_init(uint32_t major, uint32_t minor, const char *version, const char *stream);
LP_EXPORT void labelprof_subscriber_finish(const char *stream);

/* The built-in labels stream: its id, always 1, and its name. */
#define LP_STREAM_LABELS ((uint8_t)1)
#define LP_STREAM_LABELS_NAME "labelprof.labels"

/*
 * Registers a stream by name (copied; at most 255 bytes) and sets *id to its
 * id, 1..255; the same name always gets the same id. Returns 0; -EINVAL for
 * a NULL or empty name, a name of 256 bytes or more, or a NULL id; -ENOSPC
 * when 255 streams exist (the labels stream is one of them); -ENOMEM.
 */
LP_EXPORT int lp_stream_register(const char *name, uint8_t *id);

/*
 * Registers the stream if needed and runs every loaded subscriber's
 * labelprof_subscriber_init(major, minor, version, name) for it, on the
 * calling thread; an object loaded later gets the call when it loads.
 * version may be NULL (passed as ""). Calling it again for a stream runs the
 * inits again. Returns 0, or an error of lp_stream_register().
 */
LP_EXPORT int lp_stream_initialize(const char *name, uint32_t major, uint32_t minor, const char *version);

/*
 * Runs every loaded subscriber's labelprof_subscriber_finish(name); the
 * stream stays registered, and its notifications still reach enabled
 * subscribers. Returns 0; -EINVAL for NULL; -ENOENT if the stream is not
 * initialized (never, or already finalized).
 */
LP_EXPORT int lp_stream_finalize(const char *name);

/*
 * Trace-point types, 16 bits: a vendor in the high byte (0 for the
 * predefined types), bit 7 zero, an index in bits 0-6. Bit 0 marks the end
 * of a pair: LP_TP_BEGIN(n) and LP_TP_END(n) are pair n (0..63), and a
 * begin's end is always (begin | 1). Single notifications use even types.
 */
#define LP_TP_BEGIN(n) ((uint16_t)(((unsigned)(n) & 0x3fu) << 1))
#define LP_TP_END(n) ((uint16_t)(LP_TP_BEGIN(n) | 1u))
#define LP_TP_VENDOR(type) ((uint8_t)(((unsigned)(type) >> 8) & 0xffu))
#define LP_TP_INDEX(type) ((uint8_t)((unsigned)(type) & 0x7fu))
#define LP_TP_IS_END(type) ((int)((unsigned)(type) & 1u))

#define LP_TP_SCOPE_BEGIN    LP_TP_BEGIN(0) /* labels: LP_SCOPE, LP_BEGIN */
#define LP_TP_SCOPE_END      LP_TP_END(0)
#define LP_TP_REGION_BEGIN   LP_TP_BEGIN(1)
#define LP_TP_REGION_END     LP_TP_END(1)
#define LP_TP_TASK_BEGIN     LP_TP_BEGIN(2)
#define LP_TP_TASK_END       LP_TP_END(2)
#define LP_TP_BARRIER_BEGIN  LP_TP_BEGIN(3)
#define LP_TP_BARRIER_END    LP_TP_END(3)
#define LP_TP_LOCK_BEGIN     LP_TP_BEGIN(4)
#define LP_TP_LOCK_END       LP_TP_END(4)
#define LP_TP_TRANSFER_BEGIN LP_TP_BEGIN(5)
#define LP_TP_TRANSFER_END   LP_TP_END(5)
#define LP_TP_WAIT_BEGIN     LP_TP_BEGIN(6)
#define LP_TP_WAIT_END       LP_TP_END(6)
#define LP_TP_FUNCTION_BEGIN LP_TP_BEGIN(7)
#define LP_TP_FUNCTION_END   LP_TP_END(7)
#define LP_TP_GRAPH_CREATE   ((uint16_t)0x40u) /* single notifications */
#define LP_TP_NODE_CREATE    ((uint16_t)0x42u)
#define LP_TP_EDGE_CREATE    ((uint16_t)0x44u)
#define LP_TP_SIGNAL         ((uint16_t)0x46u)
#define LP_TP_METADATA       ((uint16_t)0x48u)
#define LP_TP_INSTANT        ((uint16_t)0x4au) /* labels: LP_INSTANT */

/*
 * A user-defined type: vendor (a name, copied; at most 255 vendors) and
 * index (0..127; use LP_TP_BEGIN(n) / LP_TP_END(n) for pairs) give *type,
 * the same for the same pair of arguments, decoded by LP_TP_VENDOR (1..255)
 * and LP_TP_INDEX. Returns 0; -EINVAL for a NULL or empty vendor, an index
 * over 127, or a NULL type; -ENOSPC past 255 vendors; -ENOMEM.
 */
LP_EXPORT int lp_tp_register(const char *vendor, uint8_t index, uint16_t *type);

/* Where an event comes from. name and file may be NULL, not both with code_ptr. */
typedef struct lp_payload {
  const char *name, *file;
  uint32_t line, column;
  const void *code_ptr;
} lp_payload_t;

/* An event: a payload made unique. Owned by the library, never freed. */
typedef struct lp_event lp_event_t;

/*
 * The event of payload p: the same content (name and file compared as
 * strings, line, column, code_ptr) gives the same event, whatever the
 * pointers. The first call creates it with event_type; each call sets
 * *instance (may be NULL) to the next instance number of the event, from 1,
 * unique even across threads. Returns 0; -EINVAL if p or ev is NULL, or the
 * payload has no name, no file and no code_ptr; -ENOMEM. Cost: a thread's
 * first call allocates its cache (32 KiB, 4096 payloads by their pointers,
 * still compared by content); later calls for a cached payload take about
 * 12 ns, others look the event up in the process's table.
 */
LP_EXPORT int lp_event_make(const lp_payload_t *p, uint16_t event_type, const lp_event_t **ev, uint64_t *instance);
/* The event's id: 1, 2, ... in order of creation, stable for the process; 0 for NULL. */
LP_EXPORT uint64_t lp_event_id(const lp_event_t *ev);
/* The type the event was made with; 0 for NULL. */
LP_EXPORT uint16_t lp_event_type(const lp_event_t *ev);
/* The event with this id. Returns 0, -EINVAL if ev is NULL, -ENOENT for an unknown id. */
LP_EXPORT int lp_event_find(uint64_t id, const lp_event_t **ev);
/* The event's payload; its strings are the library's copies. NULL for NULL. */
LP_EXPORT const lp_payload_t *lp_event_payload(const lp_event_t *ev);
/*
 * Attaches key = value (both copied) to an event. Values never change, so
 * the pointer lp_event_get_metadata() returns stays valid. Returns 0;
 * -EINVAL for a NULL argument; -EEXIST if the key is already set; -ENOMEM.
 */
LP_EXPORT int lp_event_set_metadata(const lp_event_t *ev, const char *key, const char *value);
/* The value of key, or NULL. */
LP_EXPORT const char *lp_event_get_metadata(const lp_event_t *ev, const char *key);

/*
 * What a callback receives. site is set for label notifications (event is
 * NULL); event, parent, instance and user_data are those given to
 * lp_notify() or LP_NOTIFY_SCOPE (site is NULL). tid is the calling
 * thread's kernel id. Valid during the call only.
 */
typedef struct lp_notification {
  uint8_t stream;
  uint16_t type;
  const lp_event_t *parent, *event;
  const lp_site_t *site;
  uint64_t instance;
  const void *user_data;
  uint64_t tid;
} lp_notification_t;

/*
 * A callback. subscriber_data is the pointer given to lp_subscriber_create().
 * *instance_data is a slot private to this subscriber, this scope and this
 * thread: NULL at a begin; the end of the same scope gets the same slot, with
 * what the begin stored there (a start time, a pointer). A single
 * notification gets a fresh NULL slot. Callbacks must not longjmp out.
 */
typedef void (*lp_callback_t)(const lp_notification_t *n, void *subscriber_data, void **instance_data);

typedef struct lp_subscriber lp_subscriber_t;

/* A new subscriber, disabled, with no callbacks. Returns 0, -EINVAL if out is NULL, -ENOMEM. */
LP_EXPORT int lp_subscriber_create(void *subscriber_data, lp_subscriber_t **out);

/*
 * Sets the callback for (stream, type); cb NULL removes it. The end of a
 * pair is its own type (type | 1). stream need not be registered yet.
 * Returns 0; -EINVAL for an unknown subscriber or stream 0; -EBUSY while s
 * is enabled; -ENOMEM.
 */
LP_EXPORT int lp_subscriber_set_callback(lp_subscriber_t *s, uint8_t stream, uint16_t type, lp_callback_t cb);

/*
 * Enables (enabled != 0) or disables s; from when it returns, scopes and
 * notifications that begin reach s (or no longer do; the ends of scopes
 * whose begins reached s still do). Enabling puts s last in the call order.
 * Returns 0 (also when nothing changes); -EINVAL for an unknown subscriber;
 * -ENOSPC when 16 subscribers are enabled; -ENOMEM.
 */
LP_EXPORT int lp_subscriber_set_enabled(lp_subscriber_t *s, int enabled);

/*
 * Frees a disabled subscriber, once no callback of s is running and every
 * scope whose begin s received has ended; timeout_ns < 0 waits for that as
 * long as it takes. It waits without holding any library lock (others may
 * create, enable and notify meanwhile). After it returns 0, no callback of
 * s ever runs again and s is gone. Returns 0; -EINVAL for an unknown
 * subscriber; -EBUSY if s is enabled; -ETIMEDOUT if the wait ran out (s
 * stays valid and disabled: call again); -EDEADLK, at once, when called
 * from inside a callback or from a thread that holds an open scope whose
 * begin s received.
 */
LP_EXPORT int lp_subscriber_destroy(lp_subscriber_t *s, int64_t timeout_ns);

/*
 * Sends a single notification of (stream, type) to every enabled subscriber
 * with a callback for it, in enable order, on the calling thread. Nothing
 * is allocated. Returns 0 (also when nobody listens, and inside a callback,
 * where it reaches nobody); -EINVAL for stream 0. A macro: inline, each
 * call site is about 380 bytes of code, of which only a load, a bit test
 * and a branch run while nobody listens.
 */
LP_EXPORT int lp_notify(uint8_t stream, uint16_t type, const lp_event_t *parent, const lp_event_t *event,
                        uint64_t instance, const void *user_data);

/*
 * 1 if an enabled subscriber has a callback for (stream, type), else 0.
 * Inline: one load and a bit test when nobody listens; use it to skip
 * building what a notification would carry.
 */
static inline int lp_notify_wanted(uint8_t stream, uint16_t type);

/*
 * LP_NOTIFY_SCOPE(stream, type, parent, event, instance, user_data): notifies
 * type (a begin, even) now and type | 1 when the enclosing block ends, with
 * the pairing promise above. A declaration, like LP_SCOPE.
 */

/* ======================================================================== */
/* 6. Layers and phases                                                     */
/* ======================================================================== */

/*
 * The vocabulary of Android's NNAPI tracing (NNTRACE_*), for any program:
 * a labelled scope may say which layer of the software runs in it and in
 * which phase of the work. The timeline then carries both (Chrome JSON
 * "cat":"runtime,preparation"; systrace tags [NN_LR_PP]), and tools
 * (`labelprof layers`, AOSP's parse_systrace.py for systrace files) add up
 * self and total times per layer and phase.
 *
 * Layers, from the top: the application, the runtime (a framework or
 * library the application calls), IPC (the client side of calls into
 * another process), the driver (the server side: the process doing the
 * work), the CPU (work done on the CPU instead of an accelerator), and
 * utility code, whose time stays with whoever called it.
 */
#define LP_LAYER_NONE        0 /* a plain label: not attributed */
#define LP_LAYER_APPLICATION 1 /* systrace tag LA */
#define LP_LAYER_RUNTIME     2 /* LR */
#define LP_LAYER_IPC         3 /* LI */
#define LP_LAYER_DRIVER      4 /* LD */
#define LP_LAYER_CPU         5 /* LC */
#define LP_LAYER_UTILITY     6 /* LU */

/*
 * Phases. UNSPECIFIED takes the enclosing scope's phase. EXECUTION has four
 * subphases (I/O, transformation, computation, results) whose time also
 * counts in EXECUTION. OVERALL, WARMUP and BENCHMARK belong to the
 * application layer: a whole run, and its warm-up and measured parts.
 * INITIALIZATION is one-time work: its time is moved out of whatever phase
 * encloses it.
 */
#define LP_PHASE_UNSPECIFIED    0  /* PU: the enclosing scope's phase */
#define LP_PHASE_INITIALIZATION 1  /* PI */
#define LP_PHASE_PREPARATION    2  /* PP */
#define LP_PHASE_COMPILATION    3  /* PC */
#define LP_PHASE_EXECUTION      4  /* PE */
#define LP_PHASE_IO             5  /* PIO, a subphase of execution */
#define LP_PHASE_TRANSFORMATION 6  /* PTR, a subphase of execution */
#define LP_PHASE_COMPUTATION    7  /* PCO, a subphase of execution */
#define LP_PHASE_RESULTS        8  /* PR, a subphase of execution */
#define LP_PHASE_TERMINATION    9  /* PT */
#define LP_PHASE_OVERALL        10 /* PO, application only */
#define LP_PHASE_WARMUP         11 /* PWU, application only */
#define LP_PHASE_BENCHMARK      12 /* PBM, application only */

/* What kind of scope a site opens (lp_site_t.mode). */
#define LP_MODE_SCOPE    0 /* LP_SCOPE_PHASE, and every plain label */
#define LP_MODE_SWITCH   1 /* LP_PHASE_SWITCH: systrace prefix [SW] */
#define LP_MODE_SUBTRACT 2 /* LP_SCOPE_SUBTRACT: systrace prefix [SUB] */

/*
 * LP_SCOPE_PHASE(layer, phase, "label"): LP_SCOPE with an LP_LAYER_* and an
 * LP_PHASE_* (NNAPI's NNTRACE_FULL). It costs what LP_SCOPE costs.
 *
 * LP_PHASE_SWITCH(layer, phase, "label"): ends the innermost label that is
 * open (on the calling thread: the one opened last in this block, when the
 * block's labels are used as they should be) and continues, from here to
 * the end of this block, as a new scope with this layer, phase and label
 * (NNAPI's NNTRACE_*_SWITCH, for a function that first transforms, then
 * computes). On the timeline the two are siblings: the first ends where the
 * second begins. In the sampled tree the label is replaced. Several
 * switches may follow each other in one block; each replaces the previous.
 * With no label open it is a plain LP_SCOPE_PHASE. A switch is a call into
 * the library (it is not for the hottest loops); the scope it replaces ends
 * as cheaply as ever.
 *
 * LP_SCOPE_SUBTRACT(layer, phase, "label"): a scope whose time is taken out
 * of its enclosing scopes' layer and counted in its own (NNAPI's
 * NNTRACE_FULL_SUBTRACT, for code where the layers' nesting is violated:
 * runtime work called from inside an IPC scope). Recorded like
 * LP_SCOPE_PHASE; the attribution is the readers' (systrace [SUB]).
 *
 * All three record at LP_LEVEL_RUNTIME. Labels without a layer are
 * untouched by any of this: same tree, same timeline, same files.
 */

/*
 * The lowercase names of a layer and of a phase, as the JSON's "cat" and
 * args and `labelprof layers` write them: "application", "runtime", "ipc",
 * "driver", "cpu", "utility"; "unspecified", "initialization",
 * "preparation", "compilation", "execution", "io", "transformation",
 * "computation", "results", "termination", "overall", "warmup",
 * "benchmark". NULL for LP_LAYER_NONE and for values out of range.
 */
LP_EXPORT const char *lp_layer_name(int layer);
LP_EXPORT const char *lp_phase_name(int phase);

/* ---- the flat view: an lp_print_opts_t flag ---- */
/*
 * LP_PRINT_FLAT (lp_print_opts_t.flags; LABELPROF_REPORT=flat) adds a flat
 * table after the tree: for each label, its total and its self share of all
 * samples (of all CPU time with LP_PRINT_CPU: the tree's weighting, which
 * its header names), heaviest total first, under a header naming the columns:
 *
 *     flat profile by wall time: each label summed over every place it appears; ...
 *        total     self  label
 *       62.10%   40.00%  btree_seek
 *
 * A label under several parents is summed; a label that recurs on one stack
 * counts each sample once in its total. min_percent hides rows whose total
 * is under it. lp_profile_print_ex() then also returns -ENOMEM when the
 * table cannot be built.
 */
#define LP_PRINT_FLAT 0x4u
/* ---- end of the flat view ---- */

/* ------------------------------------------------------------------------ */
/* CPU time and pprof                                                       */
/* ------------------------------------------------------------------------ */
/* This block needs <stdio.h> (FILE), which the header includes above. */

/*
 * CPU time beside wall time. With LP_PROFILE_CPU each thread that uses
 * labels has a timer on its own CPU clock (timer_create(2) on the clock
 * pthread_getcpuclockid() gives, its signal sent to that thread only), and
 * each time the thread has used another tick of CPU (1/hz s; 1 ms at the
 * default 1000 Hz) the signal's handler, on that thread, records the stack
 * of labels it is in: the stack running when the CPU was spent. Each node
 * then carries two weights: its samples (wall time) and CPU nanoseconds. A
 * thread that waits inside a label takes its share of samples but no CPU.
 * The kernel checks CPU timers at its own tick (CONFIG_HZ, often 250 Hz), so
 * a sample may stand for several ticks of CPU; it weighs what its timer
 * counted, so the weights add up to the CPU used. Work whose period is a
 * multiple of the kernel's tick is seen at the same phase by every CPU
 * sample: read the wall tree for such work.
 *
 * The signal is SIGRTMAX - 4 unless lp_profile_opts_t.cpu_signal (or
 * LABELPROF_CPU_SIGNAL) names another: SIGPROF, SIGVTALRM, SIGALRM, SIGUSR1,
 * SIGUSR2 or a real-time signal. labelprof never takes a signal the program
 * handles or ignores (lp_profile_start() returns -EEXIST); once installed,
 * its handler stays for the life of the process (a signal may still be on
 * its way after the last timer is deleted), with SA_RESTART, and ignores
 * every instance of the signal that no timer sent. A program that puts its
 * own handler on the signal later stops CPU sampling there (checked every
 * 64 ticks; lp_profile_stats_t.cpu_stopped_ns). The known price of a
 * signal-based profiler: a system call that SA_RESTART does not restart
 * (poll, epoll_wait, nanosleep, sem_timedwait, ...; see signal(7)) may
 * return EINTR when the signal lands just before the thread blocks in it.
 * A thread that blocks the signal (pthread_sigmask) has no CPU samples.
 *
 * LP_PRINT_CPU in lp_print_opts_t.flags (LABELPROF_REPORT=cpu) prints the
 * tree weighted by CPU time: percentages of all CPU time, children sorted by
 * CPU, a header that says "by CPU time", and a line that says how the CPU
 * samples were taken. With LP_PRINT_COUNTS each line gives the CPU time;
 * with LP_PRINT_FLAT the flat table is by CPU time too, and says so.
 * lp_profile_write_folded_ex() with LP_PRINT_CPU writes CPU microseconds
 * instead of samples. Both return -ENODATA, and write nothing, for a
 * profile without CPU time (lp_profile_has_cpu() 0): zeros would read as a
 * program that used no CPU.
 */
#define LP_PRINT_CPU 0x8u
/*
 * lp_profile_opts_t.flags: sample CPU time (LABELPROF_CPU=1;
 * LABELPROF_REPORT=cpu implies it). It costs each thread a signal per
 * sample while it uses the CPU, and nothing while it waits (figures in
 * README's Measured). While any running profile asked for it, CPU samples
 * are taken for all, until the last profile stops; a profile started while
 * CPU samples were not yet taken has them from then on. The first CPU
 * profile's signal and rate hold for those that nest in it.
 */
#define LP_PROFILE_CPU 0x1u
#ifndef LABELPROF_DISABLE
/* 1 if CPU time was sampled for p (LP_PROFILE_CPU), 0 if not: then its CPU weights are 0 and the CPU views refuse it. */
LP_EXPORT int lp_profile_has_cpu(const lp_profile_t *p);
/* CPU nanoseconds at or below the node. */
LP_EXPORT uint64_t lp_node_cpu_ns(const lp_node_t *n);
/* CPU nanoseconds that stopped at the node (at a root: outside any label). */
LP_EXPORT uint64_t lp_node_self_cpu_ns(const lp_node_t *n);
/*
 * lp_profile_write_folded() with options: only LP_PRINT_CPU counts (-ENODATA,
 * nothing written, for a profile without CPU time); opts may be NULL.
 */
LP_EXPORT int lp_profile_write_folded_ex(const lp_profile_t *p, FILE *out, const lp_print_opts_t *opts);
/*
 * Writes p to path as pprof's profile.proto, gzipped (the file `go tool
 * pprof`, speedscope, Pyroscope, Parca and Grafana read). Sample types
 * samples/count, wall/nanoseconds (samples x the achieved tick) and, only in
 * a profile that measured CPU time (LP_PROFILE_CPU), cpu/nanoseconds, which
 * viewers then show first; period wall/nanoseconds, the tick. Each label at a call site is a function named by the label, with the
 * site's file and line; one sample per thread and stack, leaf first, labelled
 * thread (the name) and thread_id. Time in no label is the function
 * "(outside of any label)". The gzip file holds stored (uncompressed) blocks:
 * the library has no zlib. The file appears whole or not at all. Returns 0,
 * -EINVAL if p or path is NULL, -ENOMEM, or a negative errno from writing.
 */
LP_EXPORT int lp_profile_write_pprof(const lp_profile_t *p, const char *path);
#else
#define lp_profile_has_cpu(p) ((void)(p), 0)
#define lp_profile_write_pprof(p, f) lp_impl_disabled_int2((const void *)(p), (const void *)(f))
#define lp_node_cpu_ns(n) ((void)(n), (uint64_t)0)
#define lp_node_self_cpu_ns(n) ((void)(n), (uint64_t)0)
#define lp_profile_write_folded_ex(p, f, o) ((void)(f), lp_impl_disabled_int2((const void *)(p), (const void *)(o)))
#endif

#ifdef __cplusplus
}
#endif

/* ======================================================================== */
/* Not API: the inline code, or the compiled-out build                      */
/* ======================================================================== */

#ifndef LABELPROF_DISABLE

#include "labelprof/impl.h"

#else /* LABELPROF_DISABLE */

/*
 * Compiled out: every macro and every function of the API is replaced here,
 * in one block. Nothing runs and nothing links; labelprof/impl.h is not
 * included.
 */
#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LP_IMPL_CAT2(a, b) a##b
#define LP_IMPL_CAT(a, b) LP_IMPL_CAT2(a, b)

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
/* Subscribers (part 5): a declaration, its arguments checked, nothing evaluated. */
#define LP_NOTIFY_SCOPE(stream, type, parent, event, instance, user_data) \
  enum { LP_IMPL_CAT(lp_impl_disabled_nscope_, __COUNTER__) = \
             sizeof(lp_impl_disabled_nscope((stream), (type), (parent), (event), (instance), (user_data))) }
int lp_impl_disabled_nscope(uint8_t stream, uint16_t type, const lp_event_t *parent, const lp_event_t *event,
                            uint64_t instance, const void *user_data);
/* Layers and phases (part 6): checked like LP_SCOPE_L. */
#define LP_IMPL_DISABLED_LP(layer, phase, label) \
  enum { LP_IMPL_CAT(lp_impl_disabled_scope_, __COUNTER__) = \
             LP_IMPL_DISABLED_SITE((layer) * 0 + (phase) * 0 + LP_LEVEL_RUNTIME, label) }
#define LP_SCOPE_PHASE(layer, phase, label) LP_IMPL_DISABLED_LP(layer, phase, label)
#define LP_SCOPE_SUBTRACT(layer, phase, label) LP_IMPL_DISABLED_LP(layer, phase, label)
#define LP_PHASE_SWITCH(layer, phase, label) LP_IMPL_DISABLED_LP(layer, phase, label)

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
#define lp_trace_stop() lp_impl_disabled_int1((const void *)0)
#define lp_trace_running() 0
#define lp_trace_write_json(p, n) lp_impl_disabled_int2((const void *)(p), (const void *)(n))
#define lp_trace_write_perfetto(p, n) lp_impl_disabled_int2((const void *)(p), (const void *)(n))
#define lp_trace_write_systrace(p) lp_impl_disabled_int1((const void *)(p))
#define lp_layer_name(l) ((void)(l), (const char *)0)
#define lp_phase_name(p) ((void)(p), (const char *)0)
#define lp_trace_get_stats(o) lp_impl_disabled_int1((const void *)(o))
#define lp_now_ns() ((uint64_t)0)
#define lp_dump() lp_impl_disabled_int1((const void *)0)
#define lp_track_create(n) ((lp_track_t)lp_impl_disabled_int1((const void *)(n)))
#define lp_track_complete(t, n, s, d) \
  ((void)(t), (void)(s), (void)(d), lp_impl_disabled_int1((const void *)(n)))
#define lp_stream_register(n, i) lp_impl_disabled_int2((const void *)(n), (const void *)(i))
#define lp_stream_initialize(n, a, b, v) ((void)(a), (void)(b), lp_impl_disabled_int2((const void *)(n), (const void *)(v)))
#define lp_stream_finalize(n) lp_impl_disabled_int1((const void *)(n))
#define lp_tp_register(v, i, t) ((void)(i), lp_impl_disabled_int2((const void *)(v), (const void *)(t)))
#define lp_event_make(p, t, e, i) \
  ((void)(t), (void)(i), lp_impl_disabled_int2((const void *)(p), (const void *)(e)))
#define lp_event_id(e) ((void)(e), (uint64_t)0)
#define lp_event_type(e) ((void)(e), (uint16_t)0)
#define lp_event_find(i, e) ((void)(i), lp_impl_disabled_int1((const void *)(e)))
#define lp_event_payload(e) ((void)(e), (const lp_payload_t *)0)
#define lp_event_set_metadata(e, k, v) ((void)(v), lp_impl_disabled_int2((const void *)(e), (const void *)(k)))
#define lp_event_get_metadata(e, k) ((void)(e), (void)(k), (const char *)0)
#define lp_subscriber_create(d, o) lp_impl_disabled_int2((const void *)(d), (const void *)(o))
#define lp_subscriber_set_callback(s, st, t, c) \
  ((void)(st), (void)(t), (void)(c), lp_impl_disabled_int1((const void *)(s)))
#define lp_subscriber_set_enabled(s, e) ((void)(e), lp_impl_disabled_int1((const void *)(s)))
#define lp_subscriber_destroy(s, t) ((void)(t), lp_impl_disabled_int1((const void *)(s)))
#define lp_notify(s, t, p, e, i, u) \
  ((void)(s), (void)(t), (void)(i), (void)(u), lp_impl_disabled_int2((const void *)(p), (const void *)(e)))
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
/* A function, not a macro: it defines the static inline function part 5 declares. */
LP_IMPL_STUB int lp_notify_wanted(uint8_t stream, uint16_t type) {
  (void)stream;
  (void)type;
  return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* LABELPROF_DISABLE */

#endif /* LABELPROF_H */
