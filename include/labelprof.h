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
 * (LP_SCOPE_PHASE: see "layers and phases").
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
  /* ---- layers and phases (LP_SCOPE_PHASE, LP_PHASE_SWITCH, LP_SCOPE_SUBTRACT) ---- */
  uint8_t layer; /* LP_LAYER_*; LP_LAYER_NONE (0) for a label without a layer */
  uint8_t phase; /* LP_PHASE_*; meaningful only with a layer */
  uint8_t mode;  /* LP_MODE_SCOPE, LP_MODE_SWITCH or LP_MODE_SUBTRACT */
  uint8_t reserved_layers; /* zero */
  /* ---- end of layers and phases ---- */
} __attribute__((aligned(8))) lp_site_t;

/* ---- layers and phases ----------------------------------------------------
 *
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
/* ---- end of layers and phases ---- */

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
 * negative errno such as -EBUSY; the sign does not matter), in the library's
 * own words where a value has a meaning of its own (-EBUSY: already
 * running), else the system's description of that errno. Never NULL; the
 * string is static; safe from any thread.
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
} lp_profile_opts_t;

/*
 * Starts the program's profile: a collector thread that wakes hz times a
 * second on absolute deadlines and samples the pseudo-stack of every thread
 * that uses labels. opts may be NULL for the defaults. Threads need no
 * registration; they join the first time they use a label.
 *
 * The program's profile and the environment's (LABELPROF_PROFILE) nest: one
 * collector serves both, and each profile holds exactly the samples taken
 * between its own start and stop. If the environment's profile is already
 * running, the collector keeps its rate (lp_profile_stats_t tells both
 * rates) and the program's start and stop work as if it were alone.
 *
 * Returns 0; -EBUSY if the program's profile is already running;
 * -EINVAL for an out-of-range option; -ENOMEM; or the negative error
 * pthread_create() gave.
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
 *     labelprof profile (2 threads, 2000 samples)
 *     2.01 s at 1000 Hz requested, 998 Hz achieved, 3 missed ticks; collector 0.9% of one CPU
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
 * in labels and thread names are printed as '?'. When the collector achieved
 * under 90% of the requested rate, a "note:" line says so.
 *
 * With min_percent, a node under that share is hidden and its samples count
 * in its parent's "other"; hidden top-level labels are summed on a line of
 * their own, "other (hidden labels)", since they are not outside of any
 * label.
 *
 * Returns 0; -EINVAL if p or out is NULL, or min_percent is not a number
 * from 0 to 100 (nothing is written); -EIO if writing to out failed.
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

/* ---- layers and phases: systrace ------------------------------------------
 *
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
/* ---- end of layers and phases: systrace ---- */

/* Counters of the current (or last) session. */
typedef struct lp_trace_stats {
  uint64_t recorded;     /* events in the buffers, ready to write */
  uint64_t dropped;      /* events lost: budget spent (discard), overwritten (ring), or during an export */
  uint64_t budget_bytes; /* the session's budget */
  uint64_t used_bytes;   /* chunks allocated now */
  uint32_t threads;      /* thread lanes with events, including exited threads */
  uint32_t tracks;       /* tracks created */
  const char *clock;        /* what stamps events: "tsc", "cntvct" or "clock_gettime"; NULL before any session */
  const char *clock_reason; /* why, e.g. "tsc (verified: 2 CPUs, max skew 0 ns, ...)"; static strings */
  uint64_t clock_check_ns;  /* what labelprof's check of the counter cost, once per process; 0 if it did not run */
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
/* The environment's sessions                                               */
/* ------------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------------ */
/* Subscribers: streams, trace points, events and callbacks                 */
/* ------------------------------------------------------------------------ */

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
 * ---- layers and phases ----
 *
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
 * ---- end of layers and phases ----
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
    uint32_t lp_impl_lv = LP_IMPL_LOAD_RELAXED(lp_impl_levels); \
    if (LP_IMPL_UNLIKELY(lp_impl_instant_site.level & lp_impl_lv)) \
      lp_impl_instant((uintptr_t)&lp_impl_instant_site | LP_IMPL_EV_INSTANT, lp_impl_lv); \
  } while (0)
#define LP_NOTIFY_SCOPE(stream, type, parent, event, instance, user_data) \
  lp_impl_nscope_t LP_IMPL_CAT(lp_impl_nscope_, __COUNTER__) __attribute__((cleanup(lp_impl_nscope_leave), unused)) = \
      lp_impl_nscope_enter((stream), (type), (parent), (event), (instance), (user_data))
#define LP_COUNTER(name, value) LP_COUNTER_L(LP_LEVEL_RUNTIME, name, value)
#define LP_COUNTER_L(lvl, text, value) \
  do { \
    static const lp_site_t lp_impl_counter_site = LP_IMPL_SITE(text, lvl); \
    if (LP_IMPL_UNLIKELY(lp_impl_counter_site.level & LP_IMPL_LOAD_RELAXED(lp_impl_levels))) \
      lp_impl_counter(&lp_impl_counter_site, (int64_t)(value)); \
  } while (0)

/* ---- layers and phases ---- */
#define LP_SCOPE_PHASE(layer, phase, label) LP_IMPL_SCOPE_LP(layer, phase, LP_MODE_SCOPE, label, __COUNTER__)
#define LP_SCOPE_SUBTRACT(layer, phase, label) LP_IMPL_SCOPE_LP(layer, phase, LP_MODE_SUBTRACT, label, __COUNTER__)
#define LP_PHASE_SWITCH(layer, phase, label) LP_IMPL_SWITCH(layer, phase, label, __COUNTER__)
/* ---- end of layers and phases ---- */

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
#define LP_NOTIFY_SCOPE(stream, type, parent, event, instance, user_data) \
  enum { LP_IMPL_CAT(lp_impl_disabled_nscope_, __COUNTER__) = \
             sizeof(lp_impl_disabled_nscope((stream), (type), (parent), (event), (instance), (user_data))) }
int lp_impl_disabled_nscope(uint8_t stream, uint16_t type, const lp_event_t *parent, const lp_event_t *event,
                            uint64_t instance, const void *user_data);
#define LP_COUNTER(name, value) ((void)(1 ? 0 : (int64_t)(value)))
#define LP_COUNTER_L(level, name, value) ((void)(1 ? 0 : (int64_t)(value)))
/* ---- layers and phases: compiled out, checked like LP_SCOPE_L ---- */
#define LP_IMPL_DISABLED_LP(layer, phase, label) \
  enum { LP_IMPL_CAT(lp_impl_disabled_scope_, __COUNTER__) = \
             LP_IMPL_DISABLED_SITE((layer) * 0 + (phase) * 0 + LP_LEVEL_RUNTIME, label) }
#define LP_SCOPE_PHASE(layer, phase, label) LP_IMPL_DISABLED_LP(layer, phase, label)
#define LP_SCOPE_SUBTRACT(layer, phase, label) LP_IMPL_DISABLED_LP(layer, phase, label)
#define LP_PHASE_SWITCH(layer, phase, label) LP_IMPL_DISABLED_LP(layer, phase, label)
/* ---- end of layers and phases ---- */

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
 * new frame, so an unchanged word means an untorn copy. The counter never
 * goes back, so no word is ever published twice. On x86 all of this compiles
 * to plain moves.
 *
 * Frames hold the site pointer with bit 0 set when the scope also recorded
 * a timeline begin event, and bit 1 set when its begin reached subscribers
 * (sites are 8-aligned).
 *
 * Timeline cursor: events go to [tcur, tlim) of the current chunk. The room
 * between tlim and tend is kept for the ends of the scopes whose begins this
 * thread recorded and that are still open: a begin moves tlim down one slot,
 * its end moves it back up, so an end always finds room, even after the
 * budget is spent or the session has stopped.
 */
/*
 * Shared fields are plain types accessed only through the __atomic builtins
 * (GCC and Clang, every C and C++ standard), so the header compiles cleanly
 * under -std=c99 -pedantic and C++11 as well as C11.
 */
#define LP_IMPL_LOAD_RELAXED(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define LP_IMPL_LOAD_ACQUIRE(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define LP_IMPL_STORE_RELAXED(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define LP_IMPL_STORE_RELEASE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

typedef struct lp_impl_event {
  uint64_t ts;   /* clock ticks, or a counter's value */
  uintptr_t tag; /* site pointer | event kind; begins and ends also carry the depth in bits 56-63 */
} lp_impl_event_t;

typedef struct lp_impl_thread {
  uint64_t word;          /* depth | change counter << 16 */
  lp_impl_event_t *tcur;  /* timeline: the next free slot, published with release */
  lp_impl_event_t *tlim;  /* begins, instants and counters stop here */
  lp_impl_event_t *tend;  /* the end of the chunk: ends may go up to here */
  uint64_t dropped;       /* events dropped inline because the budget is spent */
  uintptr_t frames[LP_STACK_CAPACITY];
} lp_impl_thread_t;

/*
 * A scope keeps the word its push published, so that its end stores the
 * next word computed from a register when nothing was pushed or popped in
 * between: then the pop waits on no load of the word (on Intel a store
 * forwarded to a dependent load costs about 5 cycles). It still loads the
 * word, but only to compare, which a predicted branch takes off the chain.
 * The word is published ^ LP_IMPL_TRACED_MARK when the scope recorded a
 * begin (no published word has that bit in its depth, so a traced scope ends
 * on its own branch), and LP_IMPL_NOT_PUSHED when nothing was pushed.
 */
typedef struct lp_impl_scope {
  const lp_site_t *site;
  uint64_t word;
} lp_impl_scope_t;

#define LP_IMPL_DEPTH_MASK  0xffffu
#define LP_IMPL_COUNT_ONE   0x10000u
#define LP_IMPL_TRACED_MARK 0x8000u /* depths stay below it */
#define LP_IMPL_NOT_PUSHED  0x7ffeu /* a depth no stack reaches; no published word equals it */
#define LP_IMPL_TRACED      0x1u    /* in a frame: the scope recorded a begin */
#define LP_IMPL_SPENT       0x80000000u /* in lp_impl_levels: the discard budget is spent */
#define LP_IMPL_EV_BEGIN    0x0u /* event kinds, in the low bits of an event's tag */
#define LP_IMPL_EV_END      0x1u
#define LP_IMPL_EV_INSTANT  0x2u
#define LP_IMPL_EV_COUNTER  0x3u /* followed by a slot holding the value */
#define LP_IMPL_EV_KIND     0x7u
#if UINTPTR_MAX > 0xffffffffu
/* Depth 0..255 in the top byte (no user-space pointer reaches it); 255 means 255 or deeper. */
#define LP_IMPL_DEPTH_TAG(d) ((uintptr_t)((d) < 255u ? (d) : 255u) << 56)
#else
#define LP_IMPL_DEPTH_TAG(d) ((uintptr_t)0 * (d))
#endif

/* The hot path is inlined whatever the compiler's size heuristics say: a call would double its cost. */
#define LP_IMPL_INLINE static inline __attribute__((always_inline))
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
/*
 * The trace levels being recorded (0 when no timeline is), and LP_IMPL_SPENT;
 * while subscribers listen to labels, also every level and LP_IMPL_SUBS.
 */
LP_EXPORT extern uint32_t lp_impl_levels;
/* 1 when events are stamped with the CPU's counter; set before the first event, never changed after. */
LP_EXPORT extern int lp_impl_clock_counter;

LP_EXPORT uint64_t lp_impl_push_slow(uintptr_t tag);
LP_EXPORT uint64_t lp_impl_enter_slow(const lp_site_t *site, int manual);
LP_EXPORT void lp_impl_leave_slow(const lp_site_t *site, uint64_t word);
LP_EXPORT void lp_impl_end_slow(void);
LP_EXPORT void lp_impl_end_event_slow(uintptr_t site, uint32_t depth);
LP_EXPORT void lp_impl_instant_slow(uintptr_t tag);
LP_EXPORT uint64_t lp_impl_ticks_slow(void);
LP_EXPORT void lp_impl_counter(const lp_site_t *site, int64_t value);
/* ---- layers and phases ---- */
LP_EXPORT lp_impl_scope_t lp_impl_switch_enter(const lp_site_t *site);
LP_EXPORT void lp_impl_switch_leave(lp_impl_scope_t *s);
/* ---- end of layers and phases ---- */

/* Subscribers (see "subscribers: the inline part" below). */
#define LP_IMPL_NOTIFIED 0x2u       /* in a frame: the scope's begin reached subscribers */
#define LP_IMPL_SUBS 0x40000000u    /* in lp_impl_levels: subscribers listen to labels */
#define LP_IMPL_WANT_BIT(type) ((uint64_t)1 << ((((unsigned)(type) >> 1) ^ ((unsigned)(type) >> 8)) & 63u))
LP_EXPORT extern uint64_t lp_impl_wanted[256];
LP_EXPORT uint64_t lp_impl_enter_notify(const lp_site_t *site, int manual);
LP_EXPORT void lp_impl_end_notify(uintptr_t tag, uint32_t depth);
LP_EXPORT void lp_impl_instant_notify(uintptr_t tag);
LP_EXPORT int lp_impl_notify_wanted_slow(uint8_t stream, uint16_t type);
/* lp_notify() past its test of lp_impl_wanted, which the caller made and found set (or stream 0). */
LP_EXPORT int lp_impl_notify_listened(uint8_t stream, uint16_t type, const lp_event_t *parent,
                                      const lp_event_t *event, uint64_t instance, const void *user_data);
LP_EXPORT int32_t lp_impl_nscope_begin(uint8_t stream, uint16_t type, const lp_event_t *parent,
                                       const lp_event_t *event, uint64_t instance, const void *user_data);
LP_EXPORT void lp_impl_nscope_end(int32_t pin);

/*
 * The part of the library's subscriber state that the inline label paths
 * read (lib/subs.c has the rest and the protocol). A snapshot of the enabled
 * subscribers starts with the labels stream's scope pair: nscope calls, each
 * a begin and an end callback (never NULL), the subscriber's data and its
 * instance slot. A thread's state starts with its guard (set inside a
 * callback, and in the shared states of threads without one), its two
 * ready-made label notifications, lp_notify's notification, slot and pin,
 * and frame d's hazard pointer and instance slots. A snapshot also has the
 * key table that finds the calls for a (stream, pair of types): the key's
 * home is (key * 2654435761) >> 7 & mask. lp_impl_subs_current is the current snapshot, never NULL;
 * lp_impl_subs_asym is 1 while readers may pin without a fence (the writer
 * runs membarrier(2)).
 */
#define LP_IMPL_MAX_SUBS 16
#define LP_IMPL_SUBS_TRACED 0x20000000u /* in lp_impl_levels: subscribers listen and a timeline records */
typedef struct lp_impl_call {
  lp_callback_t cb[2]; /* the begin's callback, the end's */
  void *data;
  uint32_t slot;
} lp_impl_call_t;
typedef struct lp_impl_key {
  uint32_t key; /* stream << 16 | even type; 0 = empty */
  uint32_t count;
  const lp_impl_call_t *first; /* its calls, in subscriber order */
} lp_impl_key_t;
typedef struct lp_impl_snap {
  uint32_t nscope;
  uint32_t mask;             /* keys - 1 */
  const lp_impl_key_t *keys; /* no two keys share a home unless the table reached its largest size */
  lp_impl_call_t scope[LP_IMPL_MAX_SUBS];
} lp_impl_snap_t;
typedef struct lp_impl_sthread {
  int guard;
  lp_notification_t lbegin, lend;
  lp_notification_t snote; /* lp_notify's, filled in (but tid) each time */
  void *sslot;              /* the slot lp_notify's callback gets, NULL before each */
  lp_impl_snap_t *single;   /* lp_notify's pin */
  lp_impl_snap_t *label[LP_STACK_CAPACITY]; /* frame d's pin */
  void *label_slots[LP_STACK_CAPACITY][LP_IMPL_MAX_SUBS];
} lp_impl_sthread_t;
LP_EXPORT extern __thread lp_impl_sthread_t *lp_impl_sub_self __attribute__((tls_model("initial-exec")));
LP_EXPORT extern lp_impl_snap_t *lp_impl_subs_current;
LP_EXPORT extern int lp_impl_subs_asym;

/* A timestamp in the session's ticks: the CPU's counter, or CLOCK_MONOTONIC ns through the library. */
LP_IMPL_INLINE uint64_t lp_impl_ticks(void) {
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

#define LP_IMPL_CAT2(a, b) a##b
#define LP_IMPL_CAT(a, b) LP_IMPL_CAT2(a, b)
#define LP_IMPL_SITE(label, level) LP_IMPL_SITE_LP(label, level, LP_LAYER_NONE, LP_PHASE_UNSPECIFIED, LP_MODE_SCOPE)
/* ---- layers and phases ---- */
#define LP_IMPL_SITE_LP(label, level, layer, phase, mode) \
  { (label), __FILE__, __func__, (uint32_t)__LINE__, (uint32_t)(level), (uint8_t)(layer), (uint8_t)(phase), \
    (uint8_t)(mode), 0 }
#define LP_IMPL_SCOPE_LP(layer, phase, mode, label, n) \
  static const lp_site_t LP_IMPL_CAT(lp_impl_site_, n) = LP_IMPL_SITE_LP(label, LP_LEVEL_RUNTIME, layer, phase, mode); \
  lp_impl_scope_t LP_IMPL_CAT(lp_impl_scope_, n) __attribute__((cleanup(lp_impl_leave), unused)) = \
      lp_impl_enter(&LP_IMPL_CAT(lp_impl_site_, n))
/*
 * A switch's scope: lp_impl_switch_enter ends the innermost open label and
 * puts the switch's site in its frame; lp_impl_switch_leave records the
 * switch's end and leaves the frame to the scope it replaced, whose own end
 * pops it (without recording a second end). Both are calls: a switch is rare.
 */
#define LP_IMPL_SWITCH(layer, phase, label, n) \
  static const lp_site_t LP_IMPL_CAT(lp_impl_site_, n) = \
      LP_IMPL_SITE_LP(label, LP_LEVEL_RUNTIME, layer, phase, LP_MODE_SWITCH); \
  lp_impl_scope_t LP_IMPL_CAT(lp_impl_scope_, n) __attribute__((cleanup(lp_impl_switch_leave), unused)) = \
      lp_impl_switch_enter(&LP_IMPL_CAT(lp_impl_site_, n))
/* ---- end of layers and phases ---- */
#define LP_IMPL_SCOPE(level, label, n) \
  static const lp_site_t LP_IMPL_CAT(lp_impl_site_, n) = LP_IMPL_SITE(label, level); \
  lp_impl_scope_t LP_IMPL_CAT(lp_impl_scope_, n) __attribute__((cleanup(lp_impl_leave), unused)) = \
      lp_impl_enter(&LP_IMPL_CAT(lp_impl_site_, n))

/* Pushes tag; returns the word published, or LP_IMPL_NOT_PUSHED. */
LP_IMPL_INLINE uint64_t lp_impl_push(uintptr_t tag) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  if (LP_IMPL_UNLIKELY(d >= LP_STACK_CAPACITY)) return lp_impl_push_slow(tag);
  /* Release: a reader that sees this frame also sees every word published before it. */
  LP_IMPL_STORE_RELEASE(t->frames[d], tag);
  w += LP_IMPL_COUNT_ONE + 1;
  LP_IMPL_STORE_RELEASE(t->word, w);
  return w;
}

/*
 * Pins the current snapshot s in h, as lib/subs.c does: without a fence
 * while the writer runs membarrier(2), sequentially consistent otherwise.
 * Returns current as read after the pin; the pin holds only if it is s.
 */
LP_IMPL_INLINE lp_impl_snap_t *lp_impl_pin(lp_impl_snap_t **h, lp_impl_snap_t *s) {
  if (LP_IMPL_LIKELY(LP_IMPL_LOAD_RELAXED(lp_impl_subs_asym))) {
    LP_IMPL_STORE_RELAXED(*h, s);
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the writer's membarrier() is the fence */
    return LP_IMPL_LOAD_RELAXED(lp_impl_subs_current);
  }
  __atomic_store_n(h, s, __ATOMIC_SEQ_CST);
  return __atomic_load_n(&lp_impl_subs_current, __ATOMIC_SEQ_CST);
}

/*
 * A label's begin while subscribers listen to labels, in the program's own
 * code for the usual case: no timeline recording, a thread with its
 * subscriber state (the shared states have the guard set), room on the
 * stack, outside callbacks, one subscriber on the scope pair, the snapshot
 * pinned at the first try. Pin, push the frame marked notified, call the
 * begin with the thread's ready-made notification. Anything else goes to
 * lp_impl_enter_notify(), which does it all out of line.
 */
LP_IMPL_INLINE uint64_t lp_impl_enter_subs(const lp_site_t *site, uint32_t levels, int manual) {
  lp_impl_thread_t *t = lp_impl_self;
  lp_impl_sthread_t *st = lp_impl_sub_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  lp_impl_snap_t *s = LP_IMPL_LOAD_ACQUIRE(lp_impl_subs_current);
  lp_impl_call_t *c;
  if (LP_IMPL_UNLIKELY(levels & LP_IMPL_SUBS_TRACED)) return lp_impl_enter_notify(site, manual);
  if (LP_IMPL_UNLIKELY(d >= LP_STACK_CAPACITY)) return lp_impl_enter_notify(site, manual);
  if (LP_IMPL_UNLIKELY(st->guard)) return lp_impl_enter_notify(site, manual);
  if (LP_IMPL_UNLIKELY(lp_impl_pin(&st->label[d], s) != s || s->nscope != 1)) {
    LP_IMPL_STORE_RELEASE(st->label[d], (lp_impl_snap_t *)0);
    return lp_impl_enter_notify(site, manual);
  }
  LP_IMPL_STORE_RELEASE(t->frames[d], (uintptr_t)site | LP_IMPL_NOTIFIED);
  w += LP_IMPL_COUNT_ONE + 1;
  LP_IMPL_STORE_RELEASE(t->word, w);
  st->guard = 1; /* first: a signal handler's label from here on reaches nobody, and leaves lbegin alone */
  st->lbegin.site = site;
  st->label_slots[d][0] = 0;
  c = &s->scope[0];
  c->cb[0](&st->lbegin, c->data, &st->label_slots[d][0]);
  st->guard = 0;
  return w | LP_IMPL_TRACED_MARK;
}

/*
 * The end of a scope whose begin reached subscribers, its frame (at depth
 * d) on top: in the program's own code when the thread is outside callbacks
 * and its pin holds one subscriber on the scope pair. The end callback, the
 * unpin, the pop (the word reloaded: the callback's own labels moved the
 * change counter). Returns 0, having done nothing, otherwise.
 */
LP_IMPL_INLINE int lp_impl_leave_subs(lp_impl_thread_t *t, const lp_site_t *site, uint32_t d) {
  lp_impl_sthread_t *st = lp_impl_sub_self;
  lp_impl_snap_t *s = LP_IMPL_LOAD_RELAXED(st->label[d]);
  lp_impl_call_t *c;
  if (LP_IMPL_UNLIKELY(!s || st->guard || s->nscope != 1)) return 0;
  st->guard = 1;
  st->lend.site = site;
  c = &s->scope[0];
  c->cb[1](&st->lend, c->data, &st->label_slots[d][0]);
  st->guard = 0;
  LP_IMPL_STORE_RELEASE(st->label[d], (lp_impl_snap_t *)0);
  LP_IMPL_STORE_RELEASE(t->word, LP_IMPL_LOAD_RELAXED(t->word) + LP_IMPL_COUNT_ONE - 1);
  return 1;
}

/*
 * A scope or manual pair whose level is being recorded: the begin event (its
 * depth in the tag), then the push, with the frame marked as traced. The
 * begin keeps one slot of room for its end (tlim moves down). Anything
 * unusual (no chunk or a full one, a full stack, an unregistered thread)
 * goes to the slow path; a spent budget is counted here, at almost the cost
 * of an untraced scope.
 */
LP_IMPL_INLINE uint64_t lp_impl_enter_traced(const lp_site_t *site, uint32_t levels, int manual) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  lp_impl_event_t *e;
  if (LP_IMPL_UNLIKELY(levels & (LP_IMPL_SPENT | LP_IMPL_SUBS))) {
    /* Subscribers listen: everything on the slow path, which also records. */
    if (levels & LP_IMPL_SUBS) return lp_impl_enter_subs(site, levels, manual);
    /* Recording has stopped: count the drop, push as an untraced scope would. A new thread goes slow. */
    if (LP_IMPL_LIKELY(d < LP_STACK_CAPACITY)) {
      LP_IMPL_STORE_RELAXED(t->dropped, LP_IMPL_LOAD_RELAXED(t->dropped) + 1);
      LP_IMPL_STORE_RELEASE(t->frames[d], (uintptr_t)site);
      w += LP_IMPL_COUNT_ONE + 1;
      LP_IMPL_STORE_RELEASE(t->word, w);
      return w;
    }
    return lp_impl_enter_slow(site, manual);
  }
  e = LP_IMPL_LOAD_RELAXED(t->tcur);
  if (LP_IMPL_LIKELY(d < LP_STACK_CAPACITY && e < t->tlim)) {
    e->ts = lp_impl_ticks();
    e->tag = (uintptr_t)site | LP_IMPL_EV_BEGIN | LP_IMPL_DEPTH_TAG(d);
    t->tlim = t->tlim - 1;
    LP_IMPL_STORE_RELEASE(t->tcur, e + 1);
    LP_IMPL_STORE_RELEASE(t->frames[d], (uintptr_t)site | LP_IMPL_TRACED);
    w += LP_IMPL_COUNT_ONE + 1;
    LP_IMPL_STORE_RELEASE(t->word, w);
    return w ^ LP_IMPL_TRACED_MARK;
  }
  return lp_impl_enter_slow(site, manual);
}

/*
 * An end event at depth d, into the room its begin kept, which it gives
 * back. Scopes deeper than the frames keep no room (a longjmp out of them
 * could not give it back), and a mistake (a stray LP_END, then a new scope
 * at the same depth) must not push the limit past the chunk's end.
 */
LP_IMPL_INLINE void lp_impl_end_event(lp_impl_thread_t *t, uintptr_t site, uint32_t d) {
  lp_impl_event_t *e = LP_IMPL_LOAD_RELAXED(t->tcur);
  if (LP_IMPL_LIKELY(e < t->tend)) {
    e->ts = lp_impl_ticks();
    e->tag = site | LP_IMPL_EV_END | LP_IMPL_DEPTH_TAG(d);
    if (LP_IMPL_LIKELY(d < LP_STACK_CAPACITY && t->tlim + 1 < t->tend)) t->tlim = t->tlim + 1;
    LP_IMPL_STORE_RELEASE(t->tcur, e + 1);
    return;
  }
  lp_impl_end_event_slow(site, d);
}

LP_IMPL_INLINE lp_impl_scope_t lp_impl_enter(const lp_site_t *site) {
  lp_impl_scope_t s;
  uint32_t levels = LP_IMPL_LOAD_RELAXED(lp_impl_levels);
  s.site = site;
  /* Recording: a path of its own, so that the common one carries nothing of it. */
  if (LP_IMPL_UNLIKELY(site->level & levels))
    s.word = lp_impl_enter_traced(site, levels, 0);
  else
    s.word = lp_impl_push((uintptr_t)site);
  return s;
}

LP_IMPL_INLINE void lp_impl_leave(lp_impl_scope_t *s) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint64_t diff = (w ^ s->word) & LP_IMPL_DEPTH_MASK;
  if (LP_IMPL_LIKELY(w == s->word)) { /* nothing pushed or popped since: the next word from a register */
    LP_IMPL_STORE_RELEASE(t->word, s->word + LP_IMPL_COUNT_ONE - 1);
    return;
  }
  if (LP_IMPL_LIKELY(diff == 0)) { /* scopes inside it came and went */
    LP_IMPL_STORE_RELEASE(t->word, w + LP_IMPL_COUNT_ONE - 1);
    return;
  }
  if (LP_IMPL_LIKELY(diff == LP_IMPL_TRACED_MARK)) { /* it recorded a begin, and the stack is as it should be */
    uint32_t d = ((uint32_t)w & LP_IMPL_DEPTH_MASK) - 1;
    /* ...unless a stray LP_END ended it and another label took its place: the slow path sorts that out. */
    if (LP_IMPL_LIKELY(d >= LP_STACK_CAPACITY ||
                       LP_IMPL_LOAD_RELAXED(t->frames[d]) == ((uintptr_t)s->site | LP_IMPL_TRACED))) {
      LP_IMPL_STORE_RELEASE(t->word, w + LP_IMPL_COUNT_ONE - 1);
      lp_impl_end_event(t, (uintptr_t)s->site, d);
      return;
    }
    /* Its begin reached subscribers: the usual end inline. */
    if (LP_IMPL_LOAD_RELAXED(t->frames[d]) == ((uintptr_t)s->site | LP_IMPL_NOTIFIED) &&
        lp_impl_leave_subs(t, s->site, d))
      return;
  }
  lp_impl_leave_slow(s->site, s->word); /* a stack to heal */
}

LP_IMPL_INLINE void lp_impl_begin(const lp_site_t *site) {
  uint32_t levels = LP_IMPL_LOAD_RELAXED(lp_impl_levels);
  if (LP_IMPL_UNLIKELY(site->level & levels))
    (void)lp_impl_enter_traced(site, levels, 1);
  else
    (void)lp_impl_push((uintptr_t)site);
}

LP_IMPL_INLINE void lp_impl_end(void) {
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
  if (LP_IMPL_UNLIKELY(tag & (LP_IMPL_TRACED | LP_IMPL_NOTIFIED))) {
    if (tag & LP_IMPL_NOTIFIED) { /* the end callbacks run before the pop, then the end is recorded */
      if (!(tag & LP_IMPL_TRACED) && lp_impl_leave_subs(t, (const lp_site_t *)(tag & ~(uintptr_t)LP_IMPL_NOTIFIED), d - 1))
        return;
      lp_impl_end_notify(tag, d - 1);
      return;
    }
    LP_IMPL_STORE_RELEASE(t->word, w + LP_IMPL_COUNT_ONE - 1);
    lp_impl_end_event(t, tag & ~(uintptr_t)LP_IMPL_TRACED, d - 1);
    return;
  }
  LP_IMPL_STORE_RELEASE(t->word, w + LP_IMPL_COUNT_ONE - 1);
}

/* An instant: room before tlim, like a begin, but it keeps none. */
LP_IMPL_INLINE void lp_impl_instant(uintptr_t tag, uint32_t levels) {
  lp_impl_thread_t *t = lp_impl_self;
  lp_impl_event_t *e = LP_IMPL_LOAD_RELAXED(t->tcur);
  if (LP_IMPL_LIKELY(e < t->tlim && !(levels & (LP_IMPL_SPENT | LP_IMPL_SUBS)))) {
    e->ts = lp_impl_ticks();
    e->tag = tag;
    LP_IMPL_STORE_RELEASE(t->tcur, e + 1);
    return;
  }
  if (levels & LP_IMPL_SUBS) {
    lp_impl_instant_notify(tag);
    return;
  }
  if ((levels & LP_IMPL_SPENT) && e) { /* a thread without a chunk may not be registered yet */
    LP_IMPL_STORE_RELAXED(t->dropped, LP_IMPL_LOAD_RELAXED(t->dropped) + 1);
    return;
  }
  lp_impl_instant_slow(tag);
}

/* ---- subscribers: the inline part ---------------------------------------
 * When an enabled subscriber has a callback on the labels stream,
 * lp_impl_levels holds every level bit and LP_IMPL_SUBS, so that every
 * scope takes the branch a recorded scope takes, and lp_impl_enter_traced
 * sends it to lp_impl_enter_subs() (inline for one subscriber, else
 * lp_impl_enter_notify()). A scope whose begin reached a subscriber has
 * LP_IMPL_NOTIFIED in its frame and its word marked like a traced one, so
 * that its end leaves the common path too (lp_impl_leave_subs(), else
 * lp_impl_leave_slow()). lp_impl_wanted has,
 * per stream, one bit per pair of types (hashed for vendors' types) that an
 * enabled subscriber may want.
 */

static inline int lp_notify_wanted(uint8_t stream, uint16_t type) {
  if (LP_IMPL_LIKELY(!(LP_IMPL_LOAD_RELAXED(lp_impl_wanted[stream]) & LP_IMPL_WANT_BIT(type)))) return 0;
  return lp_impl_notify_wanted_slow(stream, type);
}

/*
 * lp_notify() is also a macro, so that nobody listening costs one load and a
 * test inline; when the bit is set, the call goes past the exported
 * lp_notify's own test of it. (lp_notify)(...) or a pointer to lp_notify
 * calls the function, test included.
 */
/*
 * Someone may listen: in the program's own code for the usual case (a
 * thread with its subscriber state, outside callbacks, the snapshot pinned
 * at the first try, the key at its home, one subscriber on it): the
 * thread's notification filled in, the callback with a fresh NULL slot.
 * Anything else goes to lp_impl_notify_listened(). Inline at every
 * lp_notify, as its test in lp_impl_notify is: left to itself, gcc kept the
 * two out of line together, so that nobody listening cost a call, and one
 * callback a call more (about 1 ns each); the extra code is out of the way
 * of the test's likely path, as a scope's is.
 */
LP_IMPL_INLINE int lp_impl_notify_local(uint8_t stream, uint16_t type, const lp_event_t *parent,
                                         const lp_event_t *event, uint64_t instance, const void *user_data) {
  lp_impl_sthread_t *st = lp_impl_sub_self;
  lp_impl_snap_t *s = LP_IMPL_LOAD_ACQUIRE(lp_impl_subs_current);
  uint32_t key = (uint32_t)stream << 16 | (type & 0xfffeu);
  const lp_impl_key_t *k;
  const lp_impl_call_t *c;
  lp_callback_t cb;
  if (LP_IMPL_UNLIKELY(!stream || st->guard)) goto out_of_line;
  if (LP_IMPL_UNLIKELY(lp_impl_pin(&st->single, s) != s)) goto unpin;
  k = &s->keys[(key * 2654435761u) >> 7 & s->mask];
  if (LP_IMPL_UNLIKELY(k->key != key || k->count != 1)) {
    if (k->key == 0) { /* nobody has this pair */
      LP_IMPL_STORE_RELEASE(st->single, (lp_impl_snap_t *)0);
      return 0;
    }
    goto unpin;
  }
  c = k->first;
  cb = c->cb[type & 1u];
  st->guard = 1; /* first: a signal handler's notification from here on reaches nobody, and leaves snote alone */
  st->snote.stream = stream;
  st->snote.type = type;
  st->snote.parent = parent;
  st->snote.event = event;
  st->snote.instance = instance;
  st->snote.user_data = user_data;
  st->sslot = 0;
  if (LP_IMPL_LIKELY(cb != 0)) cb(&st->snote, c->data, &st->sslot);
  st->guard = 0;
  LP_IMPL_STORE_RELEASE(st->single, (lp_impl_snap_t *)0);
  return 0;
unpin:
  LP_IMPL_STORE_RELEASE(st->single, (lp_impl_snap_t *)0);
out_of_line:
  return lp_impl_notify_listened(stream, type, parent, event, instance, user_data);
}

LP_IMPL_INLINE int lp_impl_notify(uint8_t stream, uint16_t type, const lp_event_t *parent, const lp_event_t *event,
                                   uint64_t instance, const void *user_data) {
  if (LP_IMPL_LIKELY(!(LP_IMPL_LOAD_RELAXED(lp_impl_wanted[stream]) & LP_IMPL_WANT_BIT(type))) && stream) return 0;
  return lp_impl_notify_local(stream, type, parent, event, instance, user_data);
}
#ifndef LABELPROF_DISABLE
#define lp_notify(stream, type, parent, event, instance, user_data) \
  lp_impl_notify((stream), (type), (parent), (event), (instance), (user_data))
#endif

/* An LP_NOTIFY_SCOPE: the per-thread pin its begin took, or -1 when nothing began. */
typedef struct lp_impl_nscope {
  int32_t pin;
} lp_impl_nscope_t;

LP_IMPL_INLINE lp_impl_nscope_t lp_impl_nscope_enter(uint8_t stream, uint16_t type, const lp_event_t *parent,
                                                     const lp_event_t *event, uint64_t instance,
                                                     const void *user_data) {
  lp_impl_nscope_t s;
  s.pin = -1;
  if (LP_IMPL_UNLIKELY(LP_IMPL_LOAD_RELAXED(lp_impl_wanted[stream]) & LP_IMPL_WANT_BIT(type)))
    s.pin = lp_impl_nscope_begin(stream, type, parent, event, instance, user_data);
  return s;
}

LP_IMPL_INLINE void lp_impl_nscope_leave(lp_impl_nscope_t *s) {
  if (LP_IMPL_UNLIKELY(s->pin >= 0)) lp_impl_nscope_end(s->pin);
}

/* ------------------------------------------------------------------------ */
/* CPU time and pprof                                                       */
/* ------------------------------------------------------------------------ */
/* This block needs <stdio.h> (FILE), which the header includes above. */

/*
 * CPU time beside wall time. At each tick the collector reads every sampled
 * thread's CPU clock and gives the CPU that thread used since its previous
 * sample to the stack it is in now, so each node carries two weights: its
 * samples (wall time) and CPU nanoseconds. A thread that waits inside a label
 * takes its share of samples but little CPU. A thread's first sample carries
 * no CPU (there is nothing to measure from).
 *
 * LP_PRINT_CPU in lp_print_opts_t.flags (LABELPROF_REPORT=cpu) prints the
 * tree weighted by CPU time: percentages of all CPU time, children sorted by
 * CPU, and a header that says "by CPU time". With LP_PRINT_COUNTS each line
 * gives the CPU time. lp_profile_write_folded_ex() with LP_PRINT_CPU writes
 * CPU microseconds instead of samples.
 */
#define LP_PRINT_CPU 0x4u
/*
 * lp_profile_opts_t.flags: read the threads' CPU clocks (LABELPROF_CPU=1;
 * LABELPROF_REPORT=cpu implies it). Off by default: each read is a system
 * call per sampled thread per tick, which costs about 0.7 us on a virtual
 * machine, over 1% of one CPU at 16 threads and 1000 Hz. While any running
 * profile asked for it, the collector reads them for all.
 */
#define LP_PROFILE_CPU 0x1u
#ifndef LABELPROF_DISABLE
/* 1 if the threads' CPU clocks were read for p (LP_PROFILE_CPU), 0 if not; its CPU weights are 0 then. */
LP_EXPORT int lp_profile_has_cpu(const lp_profile_t *p);
/* CPU nanoseconds at or below the node. */
LP_EXPORT uint64_t lp_node_cpu_ns(const lp_node_t *n);
/* CPU nanoseconds that stopped at the node (at a root: outside any label). */
LP_EXPORT uint64_t lp_node_self_cpu_ns(const lp_node_t *n);
/* lp_profile_write_folded() with options: only LP_PRINT_CPU counts; opts may be NULL. */
LP_EXPORT int lp_profile_write_folded_ex(const lp_profile_t *p, FILE *out, const lp_print_opts_t *opts);
/*
 * Writes p to path as pprof's profile.proto, gzipped (the file `go tool
 * pprof`, speedscope, Pyroscope, Parca and Grafana read). Sample types
 * samples/count, wall/nanoseconds (samples x the achieved tick) and
 * cpu/nanoseconds (0 without LP_PROFILE_CPU); period wall/nanoseconds, the
 * tick. Each label at a call site is a function named by the label, with the
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
/* ---- layers and phases ---- */
#define lp_trace_write_systrace(p) lp_impl_disabled_int1((const void *)(p))
#define lp_layer_name(l) ((void)(l), (const char *)0)
#define lp_phase_name(p) ((void)(p), (const char *)0)
/* ---- end of layers and phases ---- */
#define lp_trace_get_stats(o) lp_impl_disabled_int1((const void *)(o))
#define lp_now_ns() ((uint64_t)0)
#define lp_dump() (-ENOTSUP)
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
#define lp_notify_wanted(s, t) ((void)(s), (void)(t), 0)
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
