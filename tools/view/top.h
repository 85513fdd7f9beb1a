/*
 * top.h: `labelprof top`'s state, shared by its sampler and batch output
 * (tools/view/top.c) and its live view in a terminal (tools/view/top_live.c).
 * Private to the command.
 */
#ifndef LP_TOOLS_TOP_H
#define LP_TOOLS_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "attach.h"
#include "index.h" /* the one small hash table */

/*
 * Counts are kept for three windows: the interval running now, the whole
 * attach (now included), and the last interval that ended, which is what
 * a snapshot shows while the next one fills.
 */
enum { LP_TOP_NOW = 0, LP_TOP_ALL = 1, LP_TOP_LAST = 2, LP_TOP_WINDOWS = 3 };

/* A node of a tree of label paths, with every window's samples. */
typedef struct lp_top_node {
  uint32_t label;  /* lp_remote label id; LP_REMOTE_NOLABEL at the root */
  uint32_t parent; /* UINT32_MAX at the root */
  uint32_t kid, sib; /* first child, next sibling (in order of creation); UINT32_MAX for none */
  uint64_t total[LP_TOP_WINDOWS]; /* samples at this node or under it */
  uint64_t self[LP_TOP_WINDOWS];  /* samples that stopped here */
} lp_top_node_t;

typedef struct lp_top_tree {
  lp_top_node_t *nodes; /* nodes[0] is the root */
  uint32_t n, cap;
  lp__index_t index; /* the nodes by (parent, label) */
} lp_top_tree_t;

int lp_top_tree_init(lp_top_tree_t *t);
void lp_top_tree_free(lp_top_tree_t *t);
/* The child of parent with label, made if new; UINT32_MAX out of memory. */
uint32_t lp_top_tree_child(lp_top_tree_t *t, uint32_t parent, uint32_t label);
/* Adds weight samples along the path (n labels, outermost first) to NOW and ALL. 0, or -1 out of memory. */
int lp_top_tree_add(lp_top_tree_t *t, const uint32_t *path, uint32_t n, uint64_t weight);
/* Adds every count of from (every window) into into, by label path. 0, or -1 out of memory. */
int lp_top_tree_merge(lp_top_tree_t *into, const lp_top_tree_t *from);

/* A thread as the view knows it: live, or exited while watched. */
typedef struct lp_top_thread {
  uint64_t id, tid;
  char name[64];
  bool live;
  uint64_t gone_ns; /* when it was last seen, once it left */
  uint64_t samples[LP_TOP_WINDOWS];
  lp_top_tree_t tree;
} lp_top_thread_t;

/* How children are ordered: by the last interval, by the whole attach, by label. */
enum { LP_TOP_SORT_LAST, LP_TOP_SORT_ALL, LP_TOP_SORT_NAME, LP_TOP_SORTS };

typedef struct lp_top {
  /* options */
  pid_t pid;
  uint32_t hz;
  uint64_t interval_ns;
  long count;          /* snapshots before stopping; 0: no end */
  bool batch, cumulative, per_thread;
  const char *select;  /* --thread: a name or a tid; NULL: all threads */
  double min_percent;
  /* the process */
  lp_remote_t *r;
  int pidfd;           /* -1 where the kernel has no pidfd_open */
  uint64_t slice_ns;   /* the scheduler's slice this process got, 0: default scheduling */
  /* what was sampled */
  lp_top_tree_t all;
  lp_top_thread_t **threads; /* in order of arrival; exited ones are forgotten oldest first */
  size_t nthreads, capthreads;
  lp_top_thread_t **by_slot; /* the record of each remote slot's current thread, or NULL */
  size_t nby_slot;
  uint32_t *path;
  size_t path_cap;
  uint64_t now_ns;     /* when the last pass ended */
  /* each window's start and end (CLOCK_MONOTONIC), passes, missed ticks, and this process's CPU time */
  uint64_t begin_ns[LP_TOP_WINDOWS], end_ns[LP_TOP_WINDOWS];
  uint64_t passes[LP_TOP_WINDOWS], missed[LP_TOP_WINDOWS], cpu_ns[LP_TOP_WINDOWS];
  long snapshots;      /* intervals ended */
  uint64_t rng;
  bool exited;         /* the process is gone (or unreadable); why says so */
  char why[512];
} lp_top_t;

/* One pass over the process's threads, into the trees. 0, or an LP_REMOTE_* code (t->why says it). */
int lp_top_sample(lp_top_t *t);
/* Ends the interval at t->now_ns: NOW's counts become LAST's, and NOW starts again from zero. */
void lp_top_end_interval(lp_top_t *t);
/* A window's duration in ns (ALL and NOW: up to t->now_ns). */
uint64_t lp_top_window_ns(const lp_top_t *t, int w);
/* This process's CPU time over a window, in ns. */
uint64_t lp_top_window_cpu(const lp_top_t *t, int w);
/*
 * Opens t->pid (t->pid, t->hz set; the rest zero but pidfd -1) and sets
 * up the sampling: the pidfd, the timer slack, the scheduler's slice, the
 * windows' start. 0, or -1 after one line on stderr ("labelprof CMD: why").
 */
int lp_top_attach(lp_top_t *t, const char *cmd);
void lp_top_free(lp_top_t *t);
/* A whole number in [lo, hi], named opt in the usage error. 0, or -1 after the error. */
int lp_top_parse_u32(const char *cmd, const char *opt, const char *v, uint32_t lo, uint32_t hi, uint32_t *out);
/*
 * Rows' parsers for top and record (opts.h): a whole number into a uint32_t
 * within how's lp_top_range_t; seconds from 0.01 to 86400 into a uint64_t
 * of ns, how being the option's name.
 */
typedef struct lp_top_range {
  const char *name;
  uint32_t lo, hi;
} lp_top_range_t;
int lp_top_opt_u32(const char *cmd, const char *value, void *field, const void *how);
int lp_top_opt_seconds(const char *cmd, const char *value, void *field, const void *how);
/* The thread record with this id, NULL if none. */
lp_top_thread_t *lp_top_find_thread(const lp_top_t *t, uint64_t id);
/* CLOCK_MONOTONIC in ns. */
uint64_t lp_top_now(void);

/*
 * One line of a printed tree: its depth, its samples in every window, and
 * its text (a label, "other", "other (outside of any label)", "other
 * (hidden labels)"). lp_top_lines() fills them for a tree, children
 * ordered by sort, nodes under min_percent of the sorted window folded
 * into their parent's "other".
 */
typedef struct lp_top_line {
  uint32_t depth;
  uint64_t v[LP_TOP_WINDOWS];
  const char *text;
} lp_top_line_t;
/* The lines (malloc'd, *n of them) or NULL out of memory. */
lp_top_line_t *lp_top_lines(const lp_top_t *t, const lp_top_tree_t *tree, int sort, double min_percent, size_t *n);

/* The live view: runs until q, Ctrl-C or -n snapshots. An exit status. */
int lp_top_live(lp_top_t *t);
/* Whether the live view can run here: stdin and stdout a terminal that is not "dumb". */
bool lp_top_live_possible(char *why, size_t len);

/* Waits until the CLOCK_MONOTONIC instant at (ns), or until the process exits (pidfd). */
void lp_top_wait_until(lp_top_t *t, uint64_t at);
/* The instant of the next sample, one at a random instant of each period; counts missed periods. */
uint64_t lp_top_next_instant(lp_top_t *t, uint64_t *period_start);

#endif
