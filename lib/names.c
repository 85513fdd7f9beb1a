/*
 * names.c: what a site says about layers and phases. The names and systrace
 * tags of LP_LAYER_* and LP_PHASE_*, a site's systrace tag, and whether a
 * frame is an LP_PHASE_SWITCH's. Below everything that prints or pops them:
 * the timeline's export, the live trace_marker, the pseudo-stack's slow end.
 */
#include "internal.h"

#include <string.h>

static const char *const layer_names[] = {NULL, "application", "runtime", "ipc", "driver", "cpu", "utility"};
static const char *const layer_tags[] = {NULL, "LA", "LR", "LI", "LD", "LC", "LU"};
static const char *const phase_names[] = {"unspecified", "initialization", "preparation", "compilation",
                                          "execution",   "io",             "transformation", "computation",
                                          "results",     "termination",    "overall",     "warmup",
                                          "benchmark"};
static const char *const phase_tags[] = {"PU",  "PI", "PP", "PC", "PE", "PIO", "PTR",
                                         "PCO", "PR", "PT", "PO", "PWU", "PBM"};
#define NLAYERS (sizeof layer_names / sizeof layer_names[0])
#define NPHASES (sizeof phase_names / sizeof phase_names[0])

const char *lp_layer_name(int layer) {
  return layer > 0 && (size_t)layer < NLAYERS ? layer_names[layer] : NULL;
}

const char *lp_phase_name(int phase) {
  return phase >= 0 && (size_t)phase < NPHASES ? phase_names[phase] : NULL;
}

const char *lp__layer_tag(int layer) {
  return layer > 0 && (size_t)layer < NLAYERS ? layer_tags[layer] : NULL;
}

const char *lp__phase_tag(int phase) {
  return phase >= 0 && (size_t)phase < NPHASES ? phase_tags[phase] : NULL;
}

bool lp__site_has_layer(const lp_site_t *site) {
  return lp_layer_name(site->layer) != NULL && lp_phase_name(site->phase) != NULL;
}

size_t lp__site_tag(const lp_site_t *site, char *buf, size_t size) {
  const char *l = lp__layer_tag(site->layer), *p = lp__phase_tag(site->phase);
  size_t n = 0;
  if (!l || !p || size < LP__TAG_MAX) return 0;
  if (site->mode == LP_MODE_SWITCH) {
    memcpy(buf, "[SW]", 4);
    n = 4;
  } else if (site->mode == LP_MODE_SUBTRACT) {
    memcpy(buf, "[SUB]", 5);
    n = 5;
  }
  memcpy(buf + n, "[NN_", 4);
  n += 4;
  memcpy(buf + n, l, 2);
  n += 2;
  buf[n++] = '_';
  size_t pl = strlen(p);
  memcpy(buf + n, p, pl);
  n += pl;
  buf[n++] = ']';
  return n;
}

bool lp__switch_frame(uintptr_t frame) {
  const lp_site_t *site = (const lp_site_t *)(frame & ~(uintptr_t)LP__FRAME_BITS);
  return !(frame & (LP_IMPL_TRACED | LP_IMPL_NOTIFIED)) && site && site->mode == LP_MODE_SWITCH;
}
