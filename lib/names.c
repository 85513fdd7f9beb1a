/*
 * names.c: what a site says about its level, layer and phase. The names of
 * the LP_LEVEL_* bits, the names and systrace tags of LP_LAYER_* and
 * LP_PHASE_*, a site's systrace tag, and whether a frame is an
 * LP_PHASE_SWITCH's. Below everything that prints or pops them:
 * the timeline's export, the live trace_marker, the pseudo-stack's slow end.
 */
#include "internal.h"

#include <stdio.h>
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

const char *lp__level_name(uint32_t level) {
  switch (level) {
  case LP_LEVEL_REQUEST:
    return "request";
  case LP_LEVEL_RUNTIME:
    return "runtime";
  case LP_LEVEL_OPERATOR:
    return "operator";
  case LP_LEVEL_DEBUG:
    return "debug";
  case LP_LEVEL_ANNOTATIONS:
    return "annotations";
  default:
    return "labelprof";
  }
}

const char *lp__site_category(const lp_site_t *site) {
  if ((site->reserved_layers & LP_IMPL_SITE_MADE) && ((const lp_impl_made_site_t *)site)->category)
    return ((const lp_impl_made_site_t *)site)->category;
  return lp__level_name(site->level);
}

size_t lp__levels_text(uint32_t levels, char *buf, size_t size) {
  size_t n = 0;
  if (size) buf[0] = '\0';
  for (uint32_t bit = LP_LEVEL_REQUEST; bit <= LP_LEVEL_ANNOTATIONS; bit <<= 1) {
    if (!(levels & bit)) continue;
    int k = snprintf(buf + n, size - n, "%s%s", n ? "," : "", lp__level_name(bit));
    if (k < 0 || (size_t)k >= size - n) break;
    n += (size_t)k;
  }
  return n;
}

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
