/*
 * stack.c: the pseudo-stack's slow paths and its reader.
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

static inline uint64_t with_depth(uint64_t w, uint32_t d) {
  return (w & ~(uint64_t)LP_IMPL_DEPTH_MASK) + LP_IMPL_COUNT_ONE + d;
}

uint64_t lp_impl_push_slow(uintptr_t tag) {
  lp__thread_t *t = lp__thread_attach();
  if (!t) return LP_IMPL_NOT_PUSHED;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->hot.word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  if (d < LP_STACK_CAPACITY) return lp_impl_push(tag); /* just registered */
  lp__bump(&t->truncated);
  if (d >= LP__DEPTH_LIMIT) return LP_IMPL_NOT_PUSHED;
  /* Deeper than the frames: count the depth, write nothing. */
  w += LP_IMPL_COUNT_ONE + 1;
  LP_IMPL_STORE_RELEASE(t->hot.word, w);
  return w;
}

/*
 * The ends of traced frames that a heal pops will never be recorded: give
 * back the room their begins kept.
 */
static void release_ends(lp__thread_t *t, uint32_t from, uint32_t to) {
  uint32_t n = 0;
  if (to > LP_STACK_CAPACITY) to = LP_STACK_CAPACITY;
  for (uint32_t k = from; k < to; k++) n += (LP_IMPL_LOAD_RELAXED(t->hot.frames[k]) & LP_IMPL_TRACED) != 0;
  /* ---- layers and phases: the live trace_marker ends them (innermost first), on the real limits ---- */
  if (LP_IMPL_UNLIKELY(lp__marker_fd >= 0)) {
    for (uint32_t k = to; k-- > from;)
      if (LP_IMPL_LOAD_RELAXED(t->hot.frames[k]) & LP_IMPL_TRACED) lp__marker_end(t, k);
    bool hidden = t->mark_hidden;
    lp__marker_unhide(t);
    if (n && t->hot.tlim) {
      uint32_t room = (uint32_t)(t->hot.tend - t->hot.tlim);
      t->hot.tlim += n < room ? n : room;
    }
    if (hidden) lp__marker_hide(t);
    return;
  }
  /* ---- end of layers and phases ---- */
  if (n && t->hot.tlim) {
    uint32_t room = (uint32_t)(t->hot.tend - t->hot.tlim);
    t->hot.tlim += n < room ? n : room;
  }
}

/*
 * The scope whose frame is at `depth` ends, and the top is not its frame.
 * Either labels it did not start are still open above it (a longjmp, a
 * missing LP_END): they go with it. Or its own frame was already ended by a
 * stray LP_END: never go back up, which would expose stale frames. Counted.
 * Returns true if its frame was still there (and is now popped).
 */
static bool heal(lp__thread_t *t, uint32_t depth) {
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->hot.word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  lp__bump(&t->mismatched);
  if (d > depth + 1) release_ends(t, depth + 1, d);
  LP_IMPL_STORE_RELEASE(t->hot.word, with_depth(w, d <= depth ? d : depth));
  return d > depth;
}

/*
 * A scope's end that the inline path could not finish. lp_impl_leave_slow()
 * is in subs.c: it ends a notified scope directly and comes here otherwise.
 */
void lp__leave_general(const lp_site_t *site, uint64_t word) {
  if ((uint32_t)(word & LP_IMPL_DEPTH_MASK) == LP_IMPL_NOT_PUSHED) return;
  /* Marked: the scope recorded a begin, or its begin reached subscribers; its frame says which. */
  bool marked = (word & LP_IMPL_TRACED_MARK) != 0;
  uint32_t depth = (uint32_t)((word ^ (marked ? LP_IMPL_TRACED_MARK : 0)) & LP_IMPL_DEPTH_MASK) - 1;
  lp__thread_t *t = lp__thread_current();
  if (!t) return; /* the thread has exited: nothing to pop, nothing to record */
  const uintptr_t bits = LP_IMPL_TRACED | LP_IMPL_NOTIFIED;
  uint64_t now = LP_IMPL_LOAD_RELAXED(t->hot.word);
  uint32_t d = (uint32_t)now & LP_IMPL_DEPTH_MASK;
  uintptr_t fr = depth < LP_STACK_CAPACITY && d > depth ? LP_IMPL_LOAD_RELAXED(t->hot.frames[depth]) : 0;
  /* ---- layers and phases: an LP_PHASE_SWITCH replaced it and ended both; pop quietly ---- */
  if (marked && d == depth + 1 && depth < LP_STACK_CAPACITY && lp__switch_frame(fr)) {
    LP_IMPL_STORE_RELEASE(t->hot.word, with_depth(now, depth));
    return;
  }
  /* ---- end of layers and phases ---- */
  bool ours = (fr & ~bits) == (uintptr_t)site && (fr & bits);
  if (marked && d == depth + 1 && depth < LP_STACK_CAPACITY) {
    if (!ours) {
      /* A stray LP_END() ended it (and recorded its end), and another label took its depth: not ours to pop. */
      lp__bump(&t->mismatched);
      return;
    }
    if (fr & LP_IMPL_NOTIFIED) { /* the usual end of a scope subscribers saw begin: callbacks, pop, end event */
      lp__subs_end(t, depth, site);
      uint64_t w = LP_IMPL_LOAD_RELAXED(t->hot.word);
      LP_IMPL_STORE_RELEASE(t->hot.word, w + LP_IMPL_COUNT_ONE - 1);
      if (fr & LP_IMPL_TRACED) lp_impl_end_event(&t->hot, (uintptr_t)site, depth);
      return;
    }
  }
  /* Scopes a longjmp skipped, or a missing LP_END left open, end here: their subscribers' ends first. */
  if (d > depth + 1) lp__subs_heal(t, depth + 1, d);
  if (marked && ours && (fr & LP_IMPL_NOTIFIED)) lp__subs_end(t, depth, site);
  /* The end is recorded when the begin was, unless a stray LP_END() already recorded it. */
  bool traced = marked && (depth >= LP_STACK_CAPACITY || !ours || (fr & LP_IMPL_TRACED));
  if (heal(t, depth) && traced) lp_impl_end_event(&t->hot, (uintptr_t)site, depth);
}

void lp_impl_end_slow(void) {
  /* Attach: an LP_END() on a thread that never used a label is a mistake to count too. */
  lp__thread_t *t = lp__thread_attach();
  if (!t) return;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->hot.word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  if (d == 0) {
    lp__bump(&t->unmatched);
    return;
  }
  /* Deeper than the frames: the label is not stored, so no end event is possible. */
  LP_IMPL_STORE_RELEASE(t->hot.word, with_depth(w, d - 1));
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
