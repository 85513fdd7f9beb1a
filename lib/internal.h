/*
 * internal.h: private to the library, never installed.
 *
 * Lock order, outermost first; nothing takes them the other way round:
 *   profile control (collector.c) > sampling (collector.c) > registry (thread.c)
 *   > trace control (trace.c) > trace (trace.c)
 */
#ifndef LABELPROF_INTERNAL_H
#define LABELPROF_INTERNAL_H

#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "labelprof.h"

#define LP__NAME_MAX 64
/* Depths stop growing here; a push beyond it is counted and ignored. */
#define LP__DEPTH_LIMIT 0xfff0u
/* A word no thread publishes: its depth bits are all ones. */
#define LP__NO_WORD UINT64_MAX
#define LP__NONE UINT32_MAX

/* ---- util.c ------------------------------------------------------------- */

/* A pthread call that cannot fail unless memory is corrupt: report and abort. */
void lp__fatal(const char *what, int rc);
void lp__lock(pthread_mutex_t *m);
void lp__unlock(pthread_mutex_t *m);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t lp__mono_ns(void);
/* Adds one to a counter that only the calling thread writes (no read-modify-write). */
static inline void lp__bump(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* ---- thread.c ----------------------------------------------------------- */

typedef struct lp__thread lp__thread_t;
typedef struct lp__lane lp__lane_t;
struct lp__thread {
  lp_impl_thread_t hot; /* first: lp_impl_self points here */
  lp__thread_t *next, *prev; /* registry list; registry lock */
  uint64_t tid;
  char name[LP__NAME_MAX]; /* written by the owner under the registry lock */
  uint32_t name_gen;       /* registry lock */
  /* Instrumentation mistakes; the owner writes, anyone reads. */
  _Atomic uint64_t truncated, mismatched, unmatched;
  /* Owned by whoever holds the sampling lock. */
  uint64_t prof_session;
  uint32_t prof_slot;
  /* The thread's timeline lane; set by the owner under the trace lock. */
  lp__lane_t *lane;
};

/*
 * The calling thread's state, registering the thread on first use. NULL if
 * the thread has exited (a label used by a late key destructor) or could not
 * be registered.
 */
lp__thread_t *lp__thread_attach(void);
/* The calling thread's state if it is registered, else NULL. Never registers. */
lp__thread_t *lp__thread_current(void);

void lp__registry_lock(void);
void lp__registry_unlock(void);
/* The first registered thread; follow ->next. Registry lock held. */
lp__thread_t *lp__registry_head(void);
/*
 * Sampling on: exiting threads are parked instead of freed, because a
 * sampler may hold pointers it copied from the registry. Sampling off frees
 * what was parked. Registry lock held; only the sampling lock's holder calls.
 */
void lp__registry_set_sampling(bool on);
/* Frees parked threads. Registry lock held, by a sampler holding no stale pointers. */
void lp__registry_reap(void);
/* Totals of the instrumentation-mistake counters, live and exited threads. */
void lp__registry_mistakes(uint64_t *truncated, uint64_t *mismatched, uint64_t *unmatched);

/* ---- stack.c ------------------------------------------------------------ */

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

/* ---- tree.c: online aggregation ----------------------------------------- */

/* One node per distinct (thread, path of call sites). */
typedef struct lp__agg_node {
  const lp_site_t *site; /* NULL for a thread's root */
  uint32_t parent;       /* LP__NONE for a root */
  uint32_t thread;       /* index into threads */
  uint64_t self;         /* samples that stopped here */
} lp__agg_node_t;

typedef struct lp__agg_thread {
  uint64_t tid;
  char name[LP__NAME_MAX];
  uint32_t name_gen;
  uint32_t root;
  uint64_t samples;
  uint64_t last_word; /* the stack word of the last sample, LP__NO_WORD if none */
  uint32_t last_leaf; /* the node that sample ended at */
} lp__agg_thread_t;

typedef struct lp__agg {
  lp__agg_node_t *nodes;
  uint32_t nnodes, capnodes;
  uint32_t *slots; /* open addressing: node index + 1, 0 = empty */
  uint32_t mask;   /* slots - 1 */
  lp__agg_thread_t *threads;
  uint32_t nthreads, capthreads;
  uint64_t samples, skipped, ticks, missed, sampling_ns;
} lp__agg_t;

/* The site a truncated stack ends with: "(deeper than 64 labels)". */
extern const lp_site_t lp__truncated_site;

int lp__agg_init(lp__agg_t *a);
void lp__agg_free(lp__agg_t *a);
/* A new thread record with its own root; its index, or -ENOMEM. */
int lp__agg_add_thread(lp__agg_t *a, uint64_t tid, const char *name);
/* The node for this path under root, created as needed; LP__NONE if out of memory. */
uint32_t lp__agg_path(lp__agg_t *a, uint32_t root, const lp_site_t *const *frames, uint32_t n);
/* Bytes held by the aggregation. */
size_t lp__agg_bytes(const lp__agg_t *a);

/* Builds the finished profile (label texts merged, counts summed, children sorted). NULL on ENOMEM. */
lp_profile_t *lp__profile_build(const lp__agg_t *a, const lp_profile_stats_t *stats);

/* ---- collector.c -------------------------------------------------------- */

/*
 * lp_profile_start() without a collector thread: samples are taken only by
 * lp__profile_sample_now(). For deterministic tests.
 */
int lp__profile_start_manual(const lp_profile_opts_t *opts);
/* One sampling pass over every registered thread, now, on the calling thread. -EINVAL if not running. */
int lp__profile_sample_now(void);
/* Nodes and bytes of the running profile's aggregation (0 if not running). */
size_t lp__profile_node_count(void);
size_t lp__profile_bytes(void);

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
/* The number of jumps found between sync points, and a one-line description of the largest (NULL if none). */
size_t lp__timemap_jumps(const lp__timemap_t *m);
const char *lp__timemap_jump_text(const lp__timemap_t *m);

/* Test hooks (tests/test_clock.c only). */
typedef struct lp__clock_test_check {
  const int *cpus;      /* CPUs to pair, the first against each other (one may repeat); NULL: the allowed ones */
  size_t ncpus;
  const int64_t *skew;  /* ticks added to every reading taken on cpus[i]; NULL: none (needs cpus) */
  double rate_ppm;      /* the counter runs this much faster from the middle of the check on */
  uint64_t budget_ns;   /* 0: the real check's 20 ms */
  uint64_t rate_ns;     /* how long the rate is measured (within the budget); 0: as the real check plans it */
} lp__clock_test_check_t;
/*
 * Runs the counter check now (t may be NULL: the real one), whatever was
 * chosen. Returns 1 if it passes, 0 if not (verdict gets the reason, as
 * lp__clock_reason() would show it, took_ns its duration), -EINVAL for a
 * bad t, -ENOTSUP without a counter.
 */
int lp__clock_test_check(const lp__clock_test_check_t *t, char *verdict, size_t len, uint64_t *took_ns);
/*
 * Adds ticks to every counter reading from now on (cumulative): a jump of
 * the counter against CLOCK_MONOTONIC. While the total is not zero the
 * inline read is sent to lp_impl_ticks_slow(), which adds it, as
 * lp__clock_sync() does. -EINVAL unless the counter is in use.
 */
int lp__clock_test_jump(int64_t ticks);

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
  int dirfd;
  bool tmpfile;   /* fd is an O_TMPFILE, linked into place at close */
  char *tmp;      /* the temporary file's name in dirfd, or NULL */
  char *final;    /* the target's name in dirfd, or NULL when writing directly */
  bool replacing; /* a file was there: keep its mode, owner and group */
  uint32_t mode, uid, gid;
  FILE *stream;
  bool masked;
  sigset_t old_mask, pending_before;
} lp__output_t;

/* Opens path. Returns 0, or a negative errno (then nothing is left behind and o needs no close). */
int lp__output_open(lp__output_t *o, const char *path);
/* A stdio stream on o->fd (for reports printed with stdio); NULL with ENOMEM. Closed by lp__output_close. */
FILE *lp__output_stream(lp__output_t *o);
/*
 * Flushes the stream if there is one, closes, and commits (rc == 0) or
 * removes the temporary (rc != 0). Returns rc if it is an error, else the
 * first error of flushing, closing or committing.
 */
int lp__output_close(lp__output_t *o, int rc);

/* ---- trace.c: recording ------------------------------------------------- */

#define LP__CHUNK_BYTES 16384u
#define LP__EV_TRACK 0x4u   /* a track's work: ts = start ns, tag = name id << 3 | 4; then a payload */
#define LP__EV_PAYLOAD 0x7u /* the second slot of a counter or track event, or padding */
#define LP__MAX_TRACKS 4096
#define LP__MAX_WORK_NAMES 65536 /* distinct work names per track and session */

typedef struct lp__chunk lp__chunk_t;
struct lp__chunk {
  lp__chunk_t *next;          /* the lane's chunks, oldest first */
  lp__chunk_t *older, *newer; /* every chunk in use, in the order it was started (ring mode reuses the oldest) */
  lp__lane_t *lane;
  lp__sync_t sync;            /* read when the chunk was started */
  uint32_t begin;     /* first event of the current session */
  uint32_t count;     /* events written, once the owner has moved on (trace lock) */
  /* Payload slots among the events: written by the filler, read once the chunk is closed. */
  uint32_t payloads, payloads_before_begin;
  lp_impl_event_t ev[];
};
#define LP__CHUNK_EVENTS ((LP__CHUNK_BYTES - sizeof(lp__chunk_t)) / sizeof(lp_impl_event_t))

struct lp__lane {
  lp__lane_t *next;     /* all thread lanes (trace lock) */
  lp__thread_t *owner;  /* NULL once the thread has exited, and for tracks */
  uint64_t tid;         /* the kernel's, or a synthetic one for a track */
  char *name;           /* owned */
  lp__chunk_t *first, *last;
  _Atomic uint64_t dropped; /* the owner adds without the lock (no read-modify-write); tracks use fetch_add */
  uint64_t dropped_base;    /* `dropped` when the session started */
  uint64_t overwritten;     /* ring: events lost to recycling, this session */
  /* Tracks only: the write cursor (trace lock) and the interned work names. */
  lp_impl_event_t *cur, *lim;
  char **names;
  uint32_t nnames, capnames;
  uint32_t *name_slots, name_mask;
};

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

/* ---- export.c ----------------------------------------------------------- */

/*
 * What an export writes: a snapshot of the session taken under the trace
 * lock (event ranges, names copied, counts, sync points), formatted after
 * the lock is released. The chunks it points into stay pinned meanwhile:
 * none is recycled or freed while an export runs.
 */
typedef struct lp__snap_chunk {
  const lp__chunk_t *chunk;
  uint32_t begin, end;
} lp__snap_chunk_t;

typedef struct lp__snap_lane {
  uint64_t tid;
  char *name;          /* owned */
  char **work;         /* tracks: the work names by id (owned array, borrowed strings); NULL for threads */
  lp__snap_chunk_t *chunks;
  uint32_t nchunks;
} lp__snap_lane_t;

typedef struct lp__session {
  lp__snap_lane_t *lanes; /* threads first, then tracks */
  uint32_t nlanes, nthreads;
  lp_trace_opts_t opts;
  lp__sync_t *syncs;
  size_t nsyncs;
  uint64_t recorded, dropped;
} lp__session_t;

/* Writes the whole JSON document to w. Returns w's error, or -ENOMEM. */
int lp__export_json(lp__jw_t *w, const lp__session_t *s, const char *process_name);

/* ---- fork --------------------------------------------------------------- */

/* Registers the fork handlers once (called from the library constructor). */
void lp__fork_init(void);
void lp__collector_atfork_prepare(void);
void lp__collector_atfork_parent(void);
void lp__collector_atfork_child(void);
void lp__registry_atfork_prepare(void);
void lp__registry_atfork_parent(void);
void lp__registry_atfork_child(void);
/* True in a child created by fork() from a process that had started labelprof. */
bool lp__forked_child(void);

#endif /* LABELPROF_INTERNAL_H */
