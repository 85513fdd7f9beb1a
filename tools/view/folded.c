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
#include "opts.h"
#include "reader.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int lp_cmd_folded(int argc, char **argv) {
  const char *cmd = argv[0], *file = NULL;
  bool strict = false, cpu = false;
  const lp_opt_t opts[] = {LP_OPT_STRICT(&strict), LP_OPT_MAX_MEMORY, {"--cpu", &cpu, 0, 0, 0}, LP_OPT_END};
  lp_operands_t ops = {.v = &file, .min = 1, .max = 1, .too_many = "one trace file only", .missing = "no trace file given"};
  int r = lp_opts_parse(cmd, argc, argv, opts, &ops);
  if (r != LP_OPTS_RUN) return r;
  lp_agg_t a;
  lp_read_cpu = cpu;
  if (lp_agg_read_one(&a, file, strict) != 0) return LP_EXIT_BAD;
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
