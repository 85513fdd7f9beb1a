/*
 * labelprof/impl_cold.h: the recording protocol of a label. NOT AN API.
 *
 * labelprof/impl.h includes this file at its end; include <labelprof.h>,
 * never this file. It is the one implementation of how a label records its
 * begin and its end in its thread's timeline chunk, used three ways: by
 * liblabelprof's cold functions, which a label's inline code calls (through
 * a thunk on x86-64, lib/cold.c); inline in the program with
 * LABELPROF_INLINE_RECORDING; and by the library's own slow paths. Every
 * function here does the usual case or nothing: it returns LP_IMPL_NEVER
 * (a begin) or nonzero (an end) without having stored anything, and the
 * caller then calls the library's general path (lp_impl_enter_slow() and
 * its siblings), which handles the rest: a new thread, a full stack or
 * chunk, a spent budget, subscribers, a clock other than the CPU's counter,
 * a stack to heal. None of them calls anything: the thunks run them with
 * no register saved but the ones they use.
 */
#ifndef LABELPROF_IMPL_COLD_H
#define LABELPROF_IMPL_COLD_H

#ifndef LABELPROF_IMPL_H
#error "include <labelprof.h>; labelprof/impl_cold.h is part of its inline part, not an API"
#endif

/*
 * Whether [e, end) has more than `slots` events of room, as integers: a
 * thread without a chunk has both NULL, and no pointer is offset from NULL.
 */
LP_IMPL_INLINE int lp_impl_room(const lp_impl_event_t *e, const lp_impl_event_t *end, uintptr_t slots) {
  return (uintptr_t)end - (uintptr_t)e > slots * sizeof(lp_impl_event_t);
}

/*
 * A scope's or a manual pair's begin, recorded: its level is recorded (and
 * nothing else is set in the thread's levels), the frames have room, the
 * chunk has room for it, its end and the ends of the scopes below it. The
 * begin event (its depth in the tag), then the frame marked traced, then
 * the word. Returns the word marked, or LP_IMPL_NEVER having done nothing.
 */
LP_IMPL_INLINE uint64_t lp_impl_try_begin(const lp_site_t *site) {
  lp_impl_thread_t *t = lp_impl_self;
  uint32_t lv = LP_IMPL_LOAD_RELAXED(t->levels);
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  lp_impl_event_t *e = LP_IMPL_LOAD_RELAXED(t->tcur);
  if (LP_IMPL_LIKELY(!(lv & LP_IMPL_NOT_PLAIN) && (site->level & lv) && d < LP_STACK_CAPACITY &&
                     lp_impl_room(e, t->tend, (uintptr_t)d + 1))) {
    e->ts = lp_impl_counter_now();
    e->tag = (uintptr_t)site | LP_IMPL_EV_BEGIN | LP_IMPL_FRAME_TAG(d);
    LP_IMPL_STORE_RELEASE(t->tcur, e + 1);
    LP_IMPL_STORE_RELEASE(t->frames[d], (uintptr_t)site | LP_IMPL_TRACED);
    w += LP_IMPL_COUNT_ONE + 1;
    LP_IMPL_STORE_RELEASE(t->word, w);
    return w ^ LP_IMPL_TRACED_MARK;
  }
  return LP_IMPL_NEVER;
}

/*
 * The end event of the frame at depth d, which the caller has popped, into
 * the room its begin kept: 0, or nonzero having done nothing when the clock
 * is not the CPU's counter or the room is not there (a deep scope, the live
 * trace_marker's hidden limits).
 */
LP_IMPL_INLINE int lp_impl_try_end_event(lp_impl_thread_t *t, uintptr_t site, uint32_t d) {
  lp_impl_event_t *e = LP_IMPL_LOAD_RELAXED(t->tcur);
  if (LP_IMPL_LIKELY(!(LP_IMPL_LOAD_RELAXED(t->levels) & LP_IMPL_SLOW_CLOCK) && lp_impl_room(e, t->tend, 0))) {
    e->ts = lp_impl_counter_now();
    e->tag = site | LP_IMPL_EV_END | LP_IMPL_DEPTH_TAG(d);
    LP_IMPL_STORE_RELEASE(t->tcur, e + 1);
    return 0;
  }
  return 1;
}

/*
 * A scope's end whose begin was recorded (its word marked), the stack as it
 * should be: its own frame on top, traced and not notified. The pop, then
 * the end event. Returns 0, or nonzero having done nothing.
 */
LP_IMPL_INLINE int lp_impl_try_leave(const lp_site_t *site, uint64_t word) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = ((uint32_t)w & LP_IMPL_DEPTH_MASK) - 1;
  lp_impl_event_t *e = LP_IMPL_LOAD_RELAXED(t->tcur);
  /* d wraps for an empty stack; an unregistered thread's depth is 0xffff */
  if (LP_IMPL_LIKELY(((w ^ word) & LP_IMPL_DEPTH_MASK) == LP_IMPL_TRACED_MARK && d < LP_STACK_CAPACITY &&
                     LP_IMPL_LOAD_RELAXED(t->frames[d]) == ((uintptr_t)site | LP_IMPL_TRACED) &&
                     !(LP_IMPL_LOAD_RELAXED(t->levels) & LP_IMPL_SLOW_CLOCK) && lp_impl_room(e, t->tend, 0))) {
    LP_IMPL_STORE_RELEASE(t->word, LP_IMPL_POPPED(w));
    e->ts = lp_impl_counter_now();
    e->tag = (uintptr_t)site | LP_IMPL_EV_END | LP_IMPL_FRAME_TAG(d);
    LP_IMPL_STORE_RELEASE(t->tcur, e + 1);
    return 0;
  }
  return 1;
}

/* LP_END of a frame whose begin was recorded and not notified, on top. Returns 0, or nonzero having done nothing. */
LP_IMPL_INLINE int lp_impl_try_end(void) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = ((uint32_t)w & LP_IMPL_DEPTH_MASK) - 1;
  lp_impl_event_t *e = LP_IMPL_LOAD_RELAXED(t->tcur);
  uintptr_t f;
  if (LP_IMPL_UNLIKELY(d >= LP_STACK_CAPACITY)) return 1;
  f = LP_IMPL_LOAD_RELAXED(t->frames[d]);
  if (LP_IMPL_LIKELY((f & (LP_IMPL_TRACED | LP_IMPL_NOTIFIED)) == LP_IMPL_TRACED &&
                     !(LP_IMPL_LOAD_RELAXED(t->levels) & LP_IMPL_SLOW_CLOCK) && lp_impl_room(e, t->tend, 0))) {
    LP_IMPL_STORE_RELEASE(t->word, LP_IMPL_POPPED(w));
    e->ts = lp_impl_counter_now();
    e->tag = (f & ~(uintptr_t)LP_IMPL_TRACED) | LP_IMPL_EV_END | LP_IMPL_FRAME_TAG(d);
    LP_IMPL_STORE_RELEASE(t->tcur, e + 1);
    return 0;
  }
  return 1;
}

/* The protocol, then the general path: what lp_impl_enter_cold() and its siblings are. */
LP_IMPL_INLINE uint64_t lp_impl_enter_cold_in(const lp_site_t *site, int manual) {
  uint64_t w = lp_impl_try_begin(site);
  return LP_IMPL_LIKELY(w != LP_IMPL_NEVER) ? w : lp_impl_enter_slow(site, manual);
}

LP_IMPL_INLINE uint64_t lp_impl_leave_cold_in(const lp_site_t *site, uint64_t word) {
  if (LP_IMPL_UNLIKELY(lp_impl_try_leave(site, word))) lp_impl_leave_slow(site, word);
  return 0;
}

LP_IMPL_INLINE uint64_t lp_impl_end_cold_in(void) {
  if (LP_IMPL_UNLIKELY(lp_impl_try_end())) lp_impl_end_slow();
  return 0;
}

#endif /* LABELPROF_IMPL_COLD_H */
