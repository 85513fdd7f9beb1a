/*
 * pprof.c: a profile as pprof's profile.proto (lp_profile_write_pprof and
 * LABELPROF_PROFILE=path.pb.gz), through the encoder in pprof_enc.c.
 *
 * One sample per thread and node that has samples stopping on it: its stack
 * of labels leaf first, its samples, the wall time they stand for (samples x
 * the achieved tick, as LP_PRINT_COUNTS) and, only in a profile that
 * measured it, its CPU time; labels "thread"
 * (the name) and "thread_id" (the kernel's id, absent for merged records of
 * exited threads). Time in no label is the frame "(outside of any label)".
 * Each label at a call site is a Function named by the label, with the
 * site's file and line (the first site seen, when sites share a label).
 */
#include "internal.h"

#include "pprof_enc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct walk {
  lp__pprof_t *pp;
  uint64_t locs[LP_STACK_CAPACITY + 4]; /* root first while walking */
  uint64_t leaf_first[LP_STACK_CAPACITY + 4];
  double tick_ns;
  const char *thread;
  uint64_t tid;
  int rc;
} walk_t;

static void emit(walk_t *w, uint32_t depth, uint64_t self, uint64_t cpu) {
  for (uint32_t i = 0; i < depth; i++) w->leaf_first[i] = w->locs[depth - 1 - i];
  int rc = lp__pprof_sample(w->pp, w->leaf_first, depth, (int64_t)self, (int64_t)((double)self * w->tick_ns + 0.5),
                            (int64_t)cpu, w->thread, w->tid);
  if (rc) w->rc = rc;
}

static void walk(walk_t *w, const lp_node_t *n, uint32_t depth) {
  for (size_t i = 0; i < lp_node_child_count(n) && !w->rc; i++) {
    const lp_node_t *k = lp_node_child(n, i);
    const char *file;
    uint32_t line;
    lp__node_site(k, &file, &line);
    uint64_t loc = lp__pprof_location(w->pp, lp_node_label(k), file, line);
    if (!loc) {
      w->rc = -ENOMEM;
      return;
    }
    w->locs[depth] = loc;
    if (lp_node_self(k) || lp_node_self_cpu_ns(k)) emit(w, depth + 1, lp_node_self(k), lp_node_self_cpu_ns(k));
    if (depth + 1 < sizeof w->locs / sizeof w->locs[0]) walk(w, k, depth + 1);
  }
}

int lp__profile_write_pprof_stream(const lp_profile_t *p, FILE *out) {
  if (!p || !out) return -EINVAL;
  lp_profile_stats_t s;
  lp_profile_get_stats(p, &s);
  walk_t *w = lp__calloc(1, sizeof *w);
  if (!w) return -ENOMEM;
  w->pp = lp__pprof_new(lp_profile_has_cpu(p)); /* a cpu type only where CPU time was measured */
  w->tick_ns = s.ticks && s.duration_ns ? (double)s.duration_ns / (double)s.ticks : (double)s.tick_ns;
  if (!w->pp) w->rc = -ENOMEM;
  for (size_t t = 0; t < lp_profile_thread_count(p) && !w->rc; t++) {
    lp_thread_info_t ti;
    lp_profile_thread(p, t, &ti);
    w->thread = ti.name;
    w->tid = ti.tid;
    if (lp_node_self(ti.root) || lp_node_self_cpu_ns(ti.root)) {
      w->locs[0] = lp__pprof_location(w->pp, "(outside of any label)", "", 0);
      if (!w->locs[0]) w->rc = -ENOMEM;
      else emit(w, 1, lp_node_self(ti.root), lp_node_self_cpu_ns(ti.root));
    }
    walk(w, ti.root, 0);
  }
  int rc = w->rc;
  if (!rc) {
    uint64_t end = lp__profile_end_real_ns(p);
    /* The profiled program is this process: its path names the profile, as Go's profiles name theirs. */
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = '\0';
    rc = lp__pprof_write(w->pp, out, (int64_t)(end > s.duration_ns ? end - s.duration_ns : 0),
                         (int64_t)s.duration_ns, (int64_t)s.tick_ns, lp_profile_has_cpu(p) ? "cpu" : "wall",
                         n > 0 ? exe : NULL);
  }
  if (!rc && (fflush(out) != 0 || ferror(out))) rc = -EIO;
  lp__pprof_free(w->pp);
  free(w);
  return rc;
}

int lp_profile_write_pprof(const lp_profile_t *p, const char *path) {
  if (!p || !path) return -EINVAL;
  lp__output_t o;
  int rc = lp__output_open(&o, path);
  if (rc) return rc;
  FILE *f = lp__output_stream(&o);
  rc = f ? lp__profile_write_pprof_stream(p, f) : -ENOMEM;
  return lp__output_close(&o, rc);
}
