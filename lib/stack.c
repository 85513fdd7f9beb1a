/*
 * stack.c: the pseudo-stack's slow paths and its reader. The slow end of a
 * scope (a heal, the pop of a notified or recorded frame) calls the
 * subscribers, the timeline and the live trace_marker, all above this file:
 * it is in subs.c, beside lp_impl_leave_slow().
 *
 * The fast paths are inline in labelprof.h: a push stores the frame and then
 * publishes the stack word (depth | change counter) with a release store; a
 * pop only publishes a new word. They fall through to here when the depth is
 * out of range, which means one of: the thread is not registered yet (its
 * state is the shared `lp__unattached` one), the thread has exited, the stack
 * is full, or a pop does not match the top.
 *
 * The reader (lp__stack_snapshot) is the seqlock's other half: read the word
 * with acquire, copy the frames with acquire loads, read the word again;
 * equal words mean no push or pop was published in between. A frame is only
 * ever rewritten after a pop published a new word, and the push stores the
 * frame with release, so a reader whose acquire load sees the rewritten frame
 * also sees that pop's word or a later one (Boehm 2012, with the pop's publish
 * playing the role of the odd sequence number, and release/acquire on the
 * frames instead of fences: no fence instruction on any architecture, and
 * visible to ThreadSanitizer). The change counter only grows, so a word is
 * never published twice and equal words cannot hide a change.
 */
#include "internal.h"

#include <errno.h>

/*
 * Pushes tag onto t's stack (the calling thread's), deep or not. A push
 * that is not `counted` is left out of t's count of drops while it counts
 * them (thread.c).
 */
static uint64_t push_on(lp__thread_t *t, uintptr_t tag, bool counted) {
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->hot.word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  if (d >= LP_STACK_CAPACITY) {
    lp__bump(&t->truncated);
    if (d >= LP__DEPTH_LIMIT) return LP_IMPL_NOT_PUSHED;
    /* Deeper than the frames: count the depth, write nothing. */
  } else {
    /* Release: a reader that sees this frame also sees every word published before it. */
    LP_IMPL_STORE_RELEASE(t->hot.frames[d], tag);
  }
  w += LP_IMPL_COUNT_ONE + 1;
  if (counted)
    LP_IMPL_STORE_RELEASE(t->hot.word, w);
  else
    lp__publish_uncounted(t, w);
  return w;
}

uint64_t lp_impl_push_slow(uintptr_t tag) {
  lp__thread_t *t = lp__thread_attach();
  return t ? push_on(t, tag, true) : LP_IMPL_NOT_PUSHED;
}

uint64_t lp__push_uncounted(lp__thread_t *t, uintptr_t tag) { return push_on(t, tag, false); }

void lp__stack_end_unstored(lp__thread_t *t) {
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->hot.word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  if (d == 0) {
    lp__bump(&t->unmatched);
    return;
  }
  /* Deeper than the frames: the label is not stored, so no end event is possible. */
  LP_IMPL_STORE_RELEASE(t->hot.word, lp__with_depth(w, d - 1));
}

int lp__stack_snapshot(const lp__thread_t *t, uint64_t known, const lp_site_t **frames, uint32_t *depth,
                       uint64_t *word) {
  for (int i = 0; i < LP__SNAPSHOT_TRIES; i++) {
    uint64_t w1 = LP_IMPL_LOAD_ACQUIRE(t->hot.word);
    if (w1 == known) return 0;
    uint32_t d = (uint32_t)w1 & LP_IMPL_DEPTH_MASK;
    uint32_t n = d < LP_STACK_CAPACITY ? d : LP_STACK_CAPACITY;
    for (uint32_t k = 0; k < n; k++) {
      uintptr_t tag = LP_IMPL_LOAD_ACQUIRE(t->hot.frames[k]);
      frames[k] = (const lp_site_t *)(tag & ~(uintptr_t)(LP_IMPL_TRACED | LP_IMPL_NOTIFIED));
    }
    /* After the acquire loads: if a frame was new, this sees the pop that preceded it. */
    uint64_t w2 = LP_IMPL_LOAD_RELAXED(t->hot.word);
    if (w1 == w2) {
      *depth = d;
      *word = w1;
      return 1;
    }
  }
  return -EAGAIN;
}
