/*
 * folded.c: `labelprof folded`: one line per distinct stack of labels,
 * weighted by its self time in nanoseconds (main;matmul;kernel 123456), all
 * lanes merged by label text as in `tree`; the format of
 * lp_profile_write_folded, flamegraph.pl, inferno, speedscope and Pyroscope.
 * Time in no label is the line "(outside of any label) N", as there.
 */
#include "config.h"

#include "agg.h"
#include "cmd.h"
#include "reader.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: labelprof folded [--cpu] [--strict] [--max-memory SIZE] FILE\n"
    "\n"
    "Folded stacks weighted by self time in nanoseconds, one line per distinct\n"
    "stack (main;matmul;kernel 123456): the input of flamegraph.pl, inferno,\n"
    "speedscope and Pyroscope. ';' in a label becomes ':'.\n"
    "\n"
    "  --cpu              CPU time: the cpu sample type of a pprof profile, or a\n"
    "                     folded file's weights; other inputs are refused\n"
    "  --max-memory SIZE  as for stats (labelprof help stats)\n";

typedef struct opts {
  bool cpu, strict;
  uint64_t max_memory;
} opts_t;

static const lp_opt_t options[] = {
    LP_OPT_FLAG("--cpu", opts_t, cpu),
    LP_OPT_STRICT(opts_t, strict),
    LP_OPT_MAX_MEMORY(opts_t, max_memory),
    LP_OPT_END,
};

static int run(const void *opts, int n, const char *const *files);

const lp_cmd_t lp_cmd_folded = {
    "folded", "folded stacks weighted by self time, for flame graphs", usage, options, sizeof(opts_t), NULL,
    {1, 1, "FILE"}, run,
};

static int run(const void *opts, int nfiles, const char *const *files) {
  const opts_t *o = opts;
  (void)nfiles;
  const char *file = files[0];
  bool cpu = o->cpu;
  lp_agg_max_memory = o->max_memory;
  lp_agg_t a;
  lp_read_cpu = cpu;
  if (lp_agg_read_one(&a, file, o->strict) != 0) return LP_EXIT_BAD;
  if (cpu && !lp_read_cpu_files) {
    lp_agg_free(&a);
    return lp_no_cpu(file);
  }
  lp_agg_file_notes(&a, stderr); /* stdout is the stacks */
  lp_tree_t m;
  int status = LP_EXIT_OK;
  uint32_t *path = NULL;
  if (lp_agg_merged_tree(&a, &m) != 0 || !(path = malloc((size_t)m.n * sizeof *path))) {
    fprintf(stderr, "labelprof: out of memory\n");
    status = LP_EXIT_BAD;
    goto out;
  }
  /* Depth first, children in the tree's order, without recursion: the path is the stack. */
  uint32_t depth = 0, k = m.nodes[0].first_kid;
  while (k != UINT32_MAX) {
    path[depth++] = k;
    const lp_tnode_t *n = &m.nodes[k];
    if (n->self > 0) {
      for (uint32_t d = 0; d < depth; d++) {
        if (d) putc(';', stdout);
        lp_put_text(stdout, a.labels[m.nodes[path[d]].label], true);
      }
      printf(" %" PRId64 "\n", n->self);
    }
    if (n->first_kid != UINT32_MAX) {
      k = n->first_kid;
      continue;
    }
    /* Up until a node has a next sibling. */
    for (;;) {
      uint32_t done = path[--depth];
      if (m.nodes[done].next_sib != UINT32_MAX) {
        k = m.nodes[done].next_sib;
        break;
      }
      if (!depth) {
        k = UINT32_MAX;
        break;
      }
    }
  }
  if (m.nodes[0].self > 0) printf("(outside of any label) %" PRId64 "\n", m.nodes[0].self);
out:
  free(path);
  lp_tree_free(&m);
  lp_agg_free(&a);
  return status;
}
