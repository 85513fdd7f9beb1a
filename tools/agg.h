/*
 * agg.h: from the event stream to per-lane aggregates (private).
 *
 * Every view (stats, tree, diff, folded) reads traces through lp_agg_file(),
 * which runs one pass of a reader into the engine of tools/agg.c and leaves,
 * per lane (a (file, pid, tid) thread or track): its span, its label
 * statistics and its tree of call paths. Memory grows with distinct labels,
 * paths, lanes and nesting depth, never with the number of events, as long
 * as each lane's scopes arrive in time order of their starts (B/E pairs in
 * any case, X events sorted by ts). A lane whose X events come in another
 * order (some writers put each X at its end, children before parents) is
 * read again with that file's lanes buffered: 32 bytes per scope, said on
 * stderr (a file that says so before its events, as labelprof's own do with
 * "labelprof_scope_order":"ends", is buffered from the start: one pass, no
 * note); past LP_SPILL_RECS of them (24 MiB) the buffered scopes go to a
 * temporary file in sorted runs, merged at the end,
 * so memory stays bounded whatever the file's size.
 */
#ifndef LP_TOOLS_AGG_H
#define LP_TOOLS_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "reader.h"

#define LP_SPILL_RECS (3u << 18) /* 32 bytes each: 24 MiB */

/*
 * Memory the engine holds: every table below is counted in an lp_mem_t
 * (reader.h), with the reader's own tables, against one cap.
 */
/* The default cap: half the physical memory (at least 256 MiB). */
uint64_t lp_mem_default_cap(void);
/*
 * The size grammar of every --max-memory: "512M", "2G", "1GiB", "1048576"
 * (bytes; K, M, G, T are powers of 1024, with an optional "iB" or "B"), or
 * "none": no cap (*bytes = UINT64_MAX). 0 bytes is no size. 1 on success.
 */
int lp_parse_size(const char *s, uint64_t *bytes);
/* The cap the next lp_agg_init() gives (the commands' --max-memory; UINT64_MAX: none; 0: the default). */
extern uint64_t lp_agg_max_memory;
/* That cap as an lp_mem_t holds it (0: none). */
uint64_t lp_mem_cap(void);
/* The hashes of the command's tables: a text's, and a lane's (a file's pid and tid). */
uint32_t lp_text_hash(const char *s);
uint32_t lp_lane_hash(unsigned file, int64_t pid, int64_t tid);

/*
 * Durations of calls: a log-linear histogram, exact below 128 ns and within
 * 0.4% above. A label's first two calls need none (they are its min and
 * max): the histogram is made at the third.
 */
#define LP_HIST_SUB 128
typedef struct lp_hist {
  uint64_t count;
  uint32_t *oct[64]; /* oct[0]: values 0..127 exactly; oct[e] (e >= 7): 2^e .. 2^(e+1)-1 in 128 steps */
} lp_hist_t;

typedef struct lp_lstat {
  uint32_t label;
  uint64_t calls;
  int64_t total, self, sum; /* total: outermost calls only; sum: all calls (for the mean) */
  int64_t min, max;
  lp_hist_t *hist; /* NULL while calls <= 2 */
} lp_lstat_t;

/* The nearest-rank p-th percentile (p in 0..100] of a label's calls, within [min, max]; 0 when none. */
int64_t lp_lstat_percentile(const lp_lstat_t *s, double p);

/* A node of a tree of call paths: the time of every scope whose path from the lane's root is this one. */
typedef struct lp_tnode {
  uint32_t label;  /* UINT32_MAX at the root */
  uint32_t parent; /* UINT32_MAX at the root */
  uint64_t calls;
  int64_t total, self;
  uint32_t first_kid, next_sib; /* filled by lp_tree_link() */
} lp_tnode_t;

typedef struct lp_tree {
  lp_tnode_t *nodes; /* nodes[0] is the root */
  uint32_t n, cap;
  lp__index_t index; /* nodes by (parent, label); none while the tree is small */
  lp_mem_t *mem; /* where its memory is counted, or NULL */
} lp_tree_t;

int lp_tree_init(lp_tree_t *t, lp_mem_t *mem);
/* The child of parent labelled label, UINT32_MAX if there is none. */
uint32_t lp_tree_find(const lp_tree_t *t, uint32_t parent, uint32_t label);
/* The child of parent labelled label, made if new; UINT32_MAX when out of memory. */
uint32_t lp_tree_child(lp_tree_t *t, uint32_t parent, uint32_t label);
/* Fills first_kid/next_sib, children sorted by total (heaviest first), then by label text. */
void lp_tree_link(lp_tree_t *t, const char *const *labels);
void lp_tree_free(lp_tree_t *t);

struct lp_frame;
typedef struct lp_lane {
  int64_t pid, tid;
  unsigned file;
  bool has_span;
  bool buffered;
  char *name;         /* thread_name, or NULL */
  int64_t first, last; /* earliest and latest time of any event */
  int64_t in_label;    /* time inside a top-level scope */
  lp_lstat_t *stats;   /* in order of first call; freed once merged unless lane_hists */
  uint32_t nstats, stats_cap;
  lp__index_t stat_index; /* stats by label, once the lane has more than a few labels */
  /* reading */
  uint32_t depth, stack_cap;
  struct lp_frame *stack;
  lp_tree_t tree;
  int64_t last_start;
  int64_t closed;      /* the latest end of a scope already popped: nothing new may start before it */
  struct lp_rec *recs; /* buffered scopes */
  uint32_t nrecs, recs_cap;
  uint32_t seq;          /* buffered scopes so far: ties sort in file order */
  uint32_t nruns, runs_cap;
  struct lp_run *runs;   /* sorted runs of buffered scopes in the spill file */
  struct lp_open *opens; /* buffered: B events waiting for their E */
  uint32_t nopens, opens_cap;
} lp_lane_t;

/*
 * What a file says of itself (LP_EV_FILE_INFO): labelprof's otherData
 * (events dropped, the session's window and first drop, in CLOCK_MONOTONIC
 * ns) and the order it declares for its scopes. Times are absolute; an
 * event's absolute time is its ts plus ts_base.
 */
typedef struct lp_file_info {
  bool has_dropped, has_session, ring;
  bool stream; /* "policy":"stream": drops are gaps where the writer fell behind, not a window kept */
  bool ends_order; /* "labelprof_scope_order":"ends": X events at their ends, read buffered from the start */
  uint64_t dropped, budget;
  int64_t ts_base, start, stop, first_drop; /* first_drop: 0 if none */
  int64_t file_start;                        /* a rotated stream's file: when it began (0: not said) */
  uint64_t unknown_names; /* Perfetto: events whose name iid was never interned on their sequence */
} lp_file_info_t;

typedef struct lp_agg {
  bool strict;        /* unmatched E / unclosed B are errors */
  bool lane_hists;    /* keep each lane's statistics after its file is read (stats --by thread) */
  lp_mem_t mem;       /* what the tables hold, and the cap */
  lp_pos_t at;        /* the event being counted: where a memory error points */
  /* labels: interned texts, in blocks */
  struct lp_text *text;
  char **labels;
  uint32_t nlabels, labels_cap;
  lp__index_t label_index;
  lp_lstat_t *gstats; /* per label, all lanes: indexed by label id */
  uint32_t gstats_cap;
  /* lanes */
  lp_lane_t **lanes;
  uint32_t nlanes, lanes_cap;
  lp__index_t lane_index;
  lp_lane_t *last_lane; /* the lane of the last event */
  FILE *spill;          /* buffered scopes beyond the memory limit, in sorted runs */
  uint64_t spill_off, nbuffered, spill_limit; /* spill_limit: scopes kept in memory (0: the default) */
  struct lp_pname *pnames; /* process names, by (file, pid) */
  uint32_t npnames, pnames_cap;
  lp__index_t pname_index; /* by (file, pid) */
  /* counts */
  unsigned nfiles;
  uint64_t events, scopes, instants, counters, skipped, unmatched_ends, unclosed_begins, overlaps;
  uint64_t early_ends; /* E events before the end of a scope inside theirs: moved to that end */
  /* the file being read */
  const char *file;
  bool file_buffered; /* this file's lanes are buffered */
  bool restart;       /* the file must be read again, buffered */
  int warned;
  bool early_end_warned; /* the warning about early ends is said once per file */
  uint64_t reported_upto; /* the first pass's last event: its warnings are not repeated */
  lp_file_info_t *finfo;  /* per file, as numbered by the lanes' `file` */
  const char **fpaths;    /* per file: the path as given */
  unsigned finfo_cap;
} lp_agg_t;

void lp_agg_init(lp_agg_t *a);
void lp_agg_free(lp_agg_t *a);
/* Reads one file into a. 0, or LP_READ_BAD after a message. */
int lp_agg_file(lp_agg_t *a, const char *path);
/* A fresh a, holding the n files read as one trace (strict or not). 0; or, after a message, LP_READ_BAD with a freed. */
int lp_agg_read_files(lp_agg_t *a, const char *const *paths, int n, bool strict);
/* A fresh a, holding one file read (strict or not). 0; or, after a message, LP_READ_BAD with a freed. */
int lp_agg_read_one(lp_agg_t *a, const char *path, bool strict);
/*
 * For each file that dropped events (its otherData says so): one line
 * "note: FILE: the trace covers 3.3 ms of a 101 ms session; 957,103 events
 * were dropped after the 1 MiB budget filled at 3.3 ms". Nothing for a
 * file without drops.
 */
void lp_agg_file_notes(const lp_agg_t *a, FILE *out);
/* The id of a label's text, UINT32_MAX when the trace has no such label. */
uint32_t lp_agg_label(const lp_agg_t *a, const char *text);
/* The summed span of all lanes that have events: the traced wall time. */
int64_t lp_agg_wall(const lp_agg_t *a);
/*
 * Arithmetic on times: the readers keep every time within ±2^62 ns, so a
 * difference of two fits; these saturate anyway, so that no input can make
 * the engine's arithmetic overflow.
 */
static inline int64_t lp_sat_add(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_add_overflow(x, y, &r)) return y > 0 ? INT64_MAX : INT64_MIN;
  return r;
}
static inline int64_t lp_sat_sub(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_sub_overflow(x, y, &r)) return y < 0 ? INT64_MAX : INT64_MIN;
  return r;
}
/* A lane's span (latest time - earliest), 0 when it has no timed event. */
static inline int64_t lp_lane_span(const lp_lane_t *l) { return l->has_span ? lp_sat_sub(l->last, l->first) : 0; }
/* A lane's display name: "NAME (pid P, tid T)" or "pid P, tid T"; into buf. */
const char *lp_lane_title(const lp_agg_t *a, const lp_lane_t *l, char *buf, size_t len);

#endif

/*
 * The tree of all lanes merged by label text (as the sampled profile merges
 * threads): into m, initialised by the call; the root's total is the traced
 * wall time and its self the time outside any label. 0, or -1 when out of
 * memory. Linked (lp_tree_link) and ready to walk.
 */
int lp_agg_merged_tree(const lp_agg_t *a, lp_tree_t *m);
/*
 * Processes (--by process): a process is a (file, pid), its lanes those of
 * that pid in that file (a merged file holds several). lp_agg_processes()
 * gives one lane of each, ordered by file then pid, in *out (free it; NULL
 * and 0 out of memory); lp_process_title() names it "process PID [NAME]
 * [(FILE)]", the file when several were read; lp_agg_process_tree() is
 * lp_agg_merged_tree() of proc's process only (of every lane when NULL).
 */
static inline bool lp_same_process(const lp_lane_t *x, const lp_lane_t *y) { return x->file == y->file && x->pid == y->pid; }
size_t lp_agg_processes(const lp_agg_t *a, const lp_lane_t ***out);
const char *lp_process_title(const lp_agg_t *a, const lp_lane_t *l, char *buf, size_t len);
int lp_agg_process_tree(const lp_agg_t *a, const lp_lane_t *proc, lp_tree_t *m);
/* s's statistics added into g's (hist made or grown in m). 0, or -1 out of memory. */
int lp_lstat_add(lp_mem_t *m, lp_lstat_t *g, const lp_lstat_t *s);
/* s emptied (its histogram, made with no lp_mem_t, freed), for label. */
void lp_lstat_clear(lp_lstat_t *s, uint32_t label);
/* One lane's tree with its root's total and self set the same way, linked. */
void lp_agg_lane_tree(const lp_agg_t *a, lp_lane_t *l);
