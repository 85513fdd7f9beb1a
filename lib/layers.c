/*
 * layers.c: layers and phases. The names and systrace tags of LP_LAYER_* and
 * LP_PHASE_*, and LP_PHASE_SWITCH's two calls.
 *
 * A switch replaces the innermost frame of the pseudo-stack in place: it
 * records the end of the scope it replaces (when that one recorded a
 * begin), pops it and pushes its own site at the same depth, publishing the
 * words as a pop and a push do, so that the collector's seqlock holds. At
 * the end of the block the switch's cleanup runs first (it was declared
 * last): it records the switch's end and clears the frame's traced bit. The
 * replaced scope's cleanup runs next and pops the frame, which is then the
 * switch's, untraced: the pop needs no end event. An untraced replaced
 * scope ends on its usual fast path (its word's depth still matches); a
 * traced one finds another site in its frame and takes the slow path, which
 * recognises a switch's frame (lp__switch_frame) and pops it quietly.
 * Subscribers get the same: the replaced scope's end when the switch
 * begins, the switch's begin from its own push, and its end at the block's
 * end, each clearing the frame's notified mark as the traced one.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

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

/* A site pointer with this bit set in a switch's scope: nothing was open, the switch pushed a scope of its own. */
#define FRESH ((uintptr_t)1)

lp_impl_scope_t lp_impl_switch_enter(const lp_site_t *site) {
  lp__thread_t *t = lp__thread_current();
  uint64_t w = t ? LP_IMPL_LOAD_RELAXED(t->hot.word) : 0;
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  lp_impl_scope_t s;
  if (!t || d == 0 || d > LP_STACK_CAPACITY) {
    /* Nothing to replace (or the frame is not stored): a scope of its own. */
    s = lp_impl_enter(site);
    s.site = (const lp_site_t *)((uintptr_t)site | FRESH);
    return s;
  }
  uintptr_t old = LP_IMPL_LOAD_RELAXED(t->hot.frames[d - 1]);
  /* The replaced scope ends here: for its subscribers first, as any scope's end does... */
  if (old & LP_IMPL_NOTIFIED) {
    old &= ~(uintptr_t)LP_IMPL_NOTIFIED;
    LP_IMPL_STORE_RELEASE(t->hot.frames[d - 1], old);
    lp__subs_end(t, d - 1, (const lp_site_t *)(old & ~(uintptr_t)LP__FRAME_BITS));
  }
  /* ...then on the timeline; its room for the end is given back by the end itself. */
  if (old & LP_IMPL_TRACED) {
    LP_IMPL_STORE_RELEASE(t->hot.frames[d - 1], old & ~(uintptr_t)LP_IMPL_TRACED);
    t->mark_switching = true; /* the live trace_marker writes [SW] instead of this end */
    lp_impl_end_event(&t->hot, old & ~(uintptr_t)LP__FRAME_BITS, d - 1);
    t->mark_switching = false;
  }
  /* A pop, then a push into the same frame: the collector sees one or the other, never a torn stack. */
  LP_IMPL_STORE_RELEASE(t->hot.word, w + LP_IMPL_COUNT_ONE - 1);
  return lp_impl_enter(site);
}

void lp_impl_switch_leave(lp_impl_scope_t *s) {
  if ((uintptr_t)s->site & FRESH) {
    lp_impl_scope_t own = {(const lp_site_t *)((uintptr_t)s->site & ~FRESH), s->word};
    lp_impl_leave(&own);
    return;
  }
  if ((uint32_t)(s->word & LP_IMPL_DEPTH_MASK) == LP_IMPL_NOT_PUSHED) return;
  bool traced = (s->word & LP_IMPL_TRACED_MARK) != 0;
  uint32_t depth = (uint32_t)((s->word ^ (traced ? LP_IMPL_TRACED_MARK : 0)) & LP_IMPL_DEPTH_MASK) - 1;
  lp__thread_t *t = lp__thread_current();
  if (!t || depth >= LP_STACK_CAPACITY) return;
  uint32_t d = (uint32_t)LP_IMPL_LOAD_RELAXED(t->hot.word) & LP_IMPL_DEPTH_MASK;
  if (d != depth + 1) return; /* an LP_END or a longjmp ended it: the enclosing scope's end sorts the stack out */
  uintptr_t f = LP_IMPL_LOAD_RELAXED(t->hot.frames[depth]);
  if ((const lp_site_t *)(f & ~(uintptr_t)LP__FRAME_BITS) != s->site) return; /* a later switch ended it */
  if (f & LP_IMPL_NOTIFIED) {
    f &= ~(uintptr_t)LP_IMPL_NOTIFIED;
    LP_IMPL_STORE_RELEASE(t->hot.frames[depth], f);
    lp__subs_end(t, depth, s->site);
  }
  if (f & LP_IMPL_TRACED) {
    LP_IMPL_STORE_RELEASE(t->hot.frames[depth], f & ~(uintptr_t)LP_IMPL_TRACED);
    lp_impl_end_event(&t->hot, (uintptr_t)s->site, depth);
  }
  /* The frame stays, with neither mark: the replaced scope's end pops it. */
}

/* ---- the live trace_marker ------------------------------------------------------- */

int lp__marker_fd = -1;
static int marker_pid;

int lp__marker_open(const char *value, char *why, size_t why_len) {
  static const char *const kernel[] = {"/sys/kernel/tracing/trace_marker", "/sys/kernel/debug/tracing/trace_marker"};
  int fd = -1, err = 0;
  if (strcmp(value, "1") == 0) {
    size_t n = 0;
    why[0] = '\0';
    for (size_t i = 0; i < sizeof kernel / sizeof kernel[0] && fd < 0; i++) {
      fd = open(kernel[i], O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        err = -errno;
        int r = snprintf(why + n, why_len > n ? why_len - n : 0, "%s%s: %s", n ? "; " : "", kernel[i],
                         lp_strerror(err));
        if (r > 0) n += (size_t)r;
      }
    }
  } else {
    fd = open(value, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
      err = -errno;
      snprintf(why, why_len, "%s: %s", value, lp_strerror(err));
    }
  }
  if (fd < 0) return err ? err : -ENOENT;
  marker_pid = (int)getpid();
  lp__marker_fd = fd;
  return 0;
}

void lp__marker_atfork_child(void) { marker_pid = (int)getpid(); }

void lp__marker_unhide(lp__thread_t *t) {
  if (!t->mark_hidden) return;
  t->hot.tlim = t->mark_tlim;
  t->hot.tend = t->mark_tend;
  t->mark_hidden = false;
}

void lp__marker_hide(lp__thread_t *t) {
  if (lp__marker_fd < 0 || t->mark_hidden) return;
  t->mark_tlim = t->hot.tlim;
  t->mark_tend = t->hot.tend;
  t->hot.tlim = t->hot.tend = LP_IMPL_LOAD_RELAXED(t->hot.tcur);
  t->mark_hidden = true;
}

/* One write: the kernel takes a marker line per write(); a short or failed one is lost, never retried. */
static void marker_write(const char *buf, size_t n) {
  ssize_t r;
  do r = write(lp__marker_fd, buf, n);
  while (r < 0 && errno == EINTR);
}

void lp__marker_begin(lp__thread_t *t, const lp_site_t *site, uint32_t d) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "B|%d|", marker_pid);
  size_t o = n > 0 ? (size_t)n : 0;
  if (site->mode == LP_MODE_SWITCH && !t->mark_replaced) {
    /* It replaced nothing that was written: a plain scope for the readers, without [SW]. */
    lp_site_t plain = *site;
    plain.mode = LP_MODE_SCOPE;
    o += lp__site_tag(&plain, buf + o, sizeof buf - o);
  } else {
    o += lp__site_tag(site, buf + o, sizeof buf - o);
  }
  for (const char *l = lp__label(site); *l && o < sizeof buf - 2; l++) {
    unsigned char ch = (unsigned char)*l;
    buf[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
  }
  buf[o++] = '\n'; /* the kernel keeps one; a plain file needs it */
  if (d < LP_STACK_CAPACITY) {
    uint32_t extra = 0;
    if (site->mode == LP_MODE_SWITCH && t->mark_replaced) extra = t->mark_extra[d] + 1u;
    t->mark_extra[d] = (uint8_t)(extra < 255 ? extra : 255);
  }
  t->mark_replaced = false;
  marker_write(buf, o);
}

void lp__marker_end(lp__thread_t *t, uint32_t d) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "E|%d\n", marker_pid);
  if (n <= 0) return;
  if (t->mark_switching) { /* a switch ends what it replaces: the readers do that themselves on [SW] */
    t->mark_replaced = true;
    return;
  }
  uint32_t lines = 1 + (d < LP_STACK_CAPACITY ? t->mark_extra[d] : 0);
  if (d < LP_STACK_CAPACITY) t->mark_extra[d] = 0;
  for (uint32_t k = 0; k < lines; k++) marker_write(buf, (size_t)n);
}
