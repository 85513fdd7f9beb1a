/*
 * pprof.c: `labelprof pprof`: a timeline as pprof's profile.proto,
 * gzipped, on standard output, through the library's encoder (pprof_enc.c).
 *
 * One sample per lane and call path with self time: its labels leaf first,
 * the count of scopes on that path (samples/count), its self time
 * (wall/nanoseconds), and no cpu sample type (a timeline has no CPU time); labels thread
 * (the lane's name) and thread_id. Time in a lane but in no label is the
 * function "(outside of any label)". Timelines carry no file or line, so
 * functions have neither.
 */
#include "config.h"

#include "agg.h"
#include "cmd.h"
#include "pprof_enc.h"
#include "reader.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: labelprof pprof [--strict] [--max-memory SIZE] FILE > profile.pb.gz\n"
    "\n"
    "The timeline as pprof's profile.proto, gzipped, for go tool pprof,\n"
    "speedscope, Pyroscope, Parca and Grafana: one sample per thread and call\n"
    "path, with the number of scopes on it (samples) and its self time (wall,\n"
    "nanoseconds), labelled thread and thread_id.\n"
    "\n"
    "  --max-memory SIZE  as for stats (labelprof help stats)\n";

typedef struct opts {
  bool strict;
  uint64_t max_memory;
} opts_t;

static const lp_opt_t options[] = {
    LP_OPT_STRICT(opts_t, strict),
    LP_OPT_MAX_MEMORY(opts_t, max_memory),
    LP_OPT_END,
};

static int run(const void *opts, int n, const char *const *files);

const lp_cmd_t lp_cmd_pprof = {
    "pprof", "the timeline as a pprof profile (gzipped profile.proto)", usage, options, sizeof(opts_t), NULL,
    {1, 1, "FILE"}, run,
};

/* One lane's tree into pp. 0 or -1 (out of memory). */
static int lane_samples(lp__pprof_t *pp, const lp_agg_t *a, const lp_lane_t *l, uint32_t *path, uint64_t *locs) {
  const lp_tree_t *t = &l->tree;
  const char *thread = l->name ? l->name : "";
  uint64_t tid = l->tid > 0 ? (uint64_t)l->tid : 0;
  if (t->nodes[0].self > 0) {
    uint64_t loc = lp__pprof_location(pp, "(outside of any label)", "", 0);
    if (!loc || lp__pprof_sample(pp, &loc, 1, 0, t->nodes[0].self, 0, thread, tid) != 0) return -1;
  }
  uint32_t depth = 0, k = t->nodes[0].first_kid;
  while (k != UINT32_MAX) {
    path[depth++] = k;
    const lp_tnode_t *n = &t->nodes[k];
    if (n->self > 0 || n->calls > 0) {
      for (uint32_t d = 0; d < depth; d++) {
        locs[d] = lp__pprof_location(pp, a->labels[t->nodes[path[depth - 1 - d]].label], "", 0);
        if (!locs[d]) return -1;
      }
      if (lp__pprof_sample(pp, locs, depth, (int64_t)n->calls, n->self > 0 ? n->self : 0, 0, thread, tid) != 0)
        return -1;
    }
    if (n->first_kid != UINT32_MAX) {
      k = n->first_kid;
      continue;
    }
    for (;;) {
      uint32_t done = path[--depth];
      if (t->nodes[done].next_sib != UINT32_MAX) {
        k = t->nodes[done].next_sib;
        break;
      }
      if (!depth) {
        k = UINT32_MAX;
        break;
      }
    }
  }
  return 0;
}

static int run(const void *opts, int n, const char *const *files) {
  const opts_t *o = opts;
  (void)n;
  const char *cmd = "pprof", *file = files[0];
  lp_agg_max_memory = o->max_memory;
  if (isatty(STDOUT_FILENO)) return lp_usage_error(cmd, "the profile is binary: redirect standard output to a file");
  lp_agg_t a;
  if (lp_agg_read_one(&a, file, o->strict) != 0) return LP_EXIT_BAD;
  int status = LP_EXIT_OK;
  lp__pprof_t *pp = lp__pprof_new(false); /* a timeline has no CPU time: no cpu sample type */
  uint32_t maxn = 1;
  int64_t longest = 0;
  for (uint32_t i = 0; i < a.nlanes; i++) {
    lp_agg_lane_tree(&a, a.lanes[i]);
    if (a.lanes[i]->tree.n > maxn) maxn = a.lanes[i]->tree.n;
    if (lp_lane_span(a.lanes[i]) > longest) longest = lp_lane_span(a.lanes[i]);
  }
  uint32_t *path = malloc((size_t)maxn * sizeof *path);
  uint64_t *locs = malloc((size_t)maxn * sizeof *locs);
  bool oom = !pp || !path || !locs;
  for (uint32_t i = 0; i < a.nlanes && !oom; i++) oom = lane_samples(pp, &a, a.lanes[i], path, locs) != 0;
  if (oom) {
    fprintf(stderr, "labelprof: out of memory\n");
    status = LP_EXIT_BAD;
  } else {
    int rc = lp__pprof_write(pp, stdout, 0, longest, 1, "wall", file); /* no program: the trace names it */
    if (rc == 0 && fflush(stdout) != 0) rc = -1;
    if (rc != 0) {
      fprintf(stderr, "labelprof: cannot write the profile to standard output\n");
      status = LP_EXIT_BAD;
    }
  }
  free(path);
  free(locs);
  lp__pprof_free(pp);
  lp_agg_free(&a);
  return status;
}
