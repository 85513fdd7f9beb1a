/*
 * layers.c: LP_PHASE_SWITCH's two calls. The names and tags of layers and
 * phases are in names.c, the live trace_marker in marker.c.
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
    lp__trace_end(t, old & ~(uintptr_t)LP__FRAME_BITS, d - 1);
    t->mark_switching = false;
  }
  /*
   * A pop, then a push into the same frame: the collector sees one or the
   * other, never a torn stack. The pop moves the change counter (the frame
   * is rewritten at the same depth), and drops nothing.
   */
  lp__publish_uncounted(t, w + LP_IMPL_COUNT_ONE - 1);
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
    lp__trace_end(t, (uintptr_t)s->site, depth);
  }
  /* The frame stays, with neither mark: the replaced scope's end pops it. */
}
