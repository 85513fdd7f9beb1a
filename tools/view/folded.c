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
    "usage: labelprof folded [--cpu] [--by process] [--strict] [--max-memory SIZE] FILE...\n"
    "\n"
    "Folded stacks weighted by self time in nanoseconds, one line per distinct\n"
    "stack (main;matmul;kernel 123456): the input of flamegraph.pl, inferno,\n"
    "speedscope and Pyroscope. ';' in a label becomes ':'.\n"
    "\n"
    "  --cpu              CPU time: the cpu sample type of a pprof profile, or a\n"
    "                     folded file's weights; other inputs are refused\n"
    "  --by process       each stack starts with its process (process PID NAME)\n"
    "  --max-memory SIZE  as for stats (labelprof help stats)\n"
    "\n"
    "Several files are read as one trace, as by stats.\n";

typedef struct opts {
  bool cpu, strict;
  int by;
  uint64_t max_memory;
} opts_t;

static const lp_opt_t options[] = {
    LP_OPT_FLAG("--cpu", opts_t, cpu),
    LP_OPT_BY_PROCESS(opts_t, by),
    LP_OPT_STRICT(opts_t, strict),
    LP_OPT_MAX_MEMORY(opts_t, max_memory),
    LP_OPT_END,
};

static int run(const void *opts, int n, const char *const *files);

const lp_cmd_t lp_cmd_folded = {
    "folded", "folded stacks weighted by self time, for flame graphs", usage, options, sizeof(opts_t), NULL,
    {1, -1, "FILE..."}, run,
};

/*
 * The stacks of tree m, depth first, children in the tree's order, without
 * recursion (the path is the stack); each line begins with root and ';'
 * when root is not NULL (--by process). -1 out of memory.
 */
static int print_stacks(FILE *out, const lp_agg_t *a, const lp_tree_t *m, const char *root) {
  uint32_t *path = malloc((size_t)m->n * sizeof *path);
  if (!path) return -1;
  uint32_t depth = 0, k = m->nodes[0].first_kid;
  while (k != UINT32_MAX) {
    path[depth++] = k;
    const lp_tnode_t *n = &m->nodes[k];
    if (n->self > 0) {
      if (root) {
        lp_put_text(out, root, true);
        putc(';', out);
      }
      for (uint32_t d = 0; d < depth; d++) {
        if (d) putc(';', out);
        lp_put_text(out, a->labels[m->nodes[path[d]].label], true);
      }
      fprintf(out, " %" PRId64 "\n", n->self);
    }
    if (n->first_kid != UINT32_MAX) {
      k = n->first_kid;
      continue;
    }
    /* Up until a node has a next sibling. */
    for (;;) {
      uint32_t done = path[--depth];
      if (m->nodes[done].next_sib != UINT32_MAX) {
        k = m->nodes[done].next_sib;
        break;
      }
      if (!depth) {
        k = UINT32_MAX;
        break;
      }
    }
  }
  if (m->nodes[0].self > 0) {
    if (root) {
      lp_put_text(out, root, true);
      putc(';', out);
    }
    fprintf(out, "(outside of any label) %" PRId64 "\n", m->nodes[0].self);
  }
  free(path);
  return 0;
}

static int run(const void *opts, int nfiles, const char *const *files) {
  const opts_t *o = opts;
  bool cpu = o->cpu, strict = o->strict;
  int by = o->by;
  lp_agg_max_memory = o->max_memory;
  lp_agg_t a;
  lp_read_cpu = cpu;
  lp_agg_init(&a);
  a.strict = strict;
  for (int i = 0; i < nfiles; i++) {
    unsigned had = lp_read_cpu_files;
    if (lp_agg_file(&a, files[i]) != 0) {
      lp_agg_free(&a);
      return LP_EXIT_BAD;
    }
    if (cpu && lp_read_cpu_files == had) { /* this one gave no CPU weights */
      lp_agg_free(&a);
      return lp_no_cpu(files[i]);
    }
  }
  lp_agg_file_notes(&a, stderr); /* stdout is the stacks */
  int status = LP_EXIT_OK;
  const lp_lane_t **procs = NULL;
  size_t np = by ? lp_agg_processes(&a, &procs) : 1;
  if (by && !procs) status = LP_EXIT_BAD;
  for (size_t p = 0; p < np && status == LP_EXIT_OK; p++) {
    lp_tree_t m;
    char title[600];
    if (lp_agg_process_tree(&a, by ? procs[p] : NULL, &m) != 0 ||
        print_stacks(stdout, &a, &m, by ? lp_process_title(&a, procs[p], title, sizeof title) : NULL) != 0)
      status = LP_EXIT_BAD;
    lp_tree_free(&m);
  }
  if (status != LP_EXIT_OK) fprintf(stderr, "labelprof: out of memory\n");
  free(procs);
  lp_agg_free(&a);
  return status;
}
