/*
 * labelprof/impl.h: the inline part of labelprof.h. NOT AN API.
 *
 * labelprof.h includes this file at its end, unless LABELPROF_DISABLE is
 * defined; include <labelprof.h>, never this file. It holds what the macros
 * expand to and what that code touches: the per-thread state and its
 * frames, the timeline's event cursor, the subscribers' snapshot, the read
 * of the CPU's counter, and the declarations of the library's slow paths.
 * Every name it declares starts with lp_impl_ or LP_IMPL_, but for the
 * definitions of what labelprof.h documents (its macros, lp_notify as a
 * macro, lp_notify_wanted); any of it may change in any release. Programs
 * and tools use only what labelprof.h documents.
 */
#ifndef LABELPROF_IMPL_H
#define LABELPROF_IMPL_H

#ifndef LABELPROF_H
#error "include <labelprof.h>; labelprof/impl.h is its inline part, not an API"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* The API's macros (documented in labelprof.h, parts 1, 5 and 6)           */
/* ------------------------------------------------------------------------ */

#define LP_SCOPE(label) LP_SCOPE_L(LP_LEVEL_RUNTIME, label)
#define LP_SCOPE_L(level, label) LP_IMPL_SCOPE(level, label, __COUNTER__)
#define LP_BEGIN(label) LP_BEGIN_L(LP_LEVEL_RUNTIME, label)
#define LP_BEGIN_L(level, label) \
  do { \
    static const lp_site_t lp_impl_begin_site = LP_IMPL_SITE(label, level); \
    lp_impl_begin(&lp_impl_begin_site); \
  } while (0)
#define LP_END() lp_impl_end()
#define LP_INSTANT(label) LP_INSTANT_L(LP_LEVEL_RUNTIME, label)
#define LP_INSTANT_L(lvl, text) \
  do { \
    static const lp_site_t lp_impl_instant_site = LP_IMPL_SITE(text, lvl); \
    uint32_t lp_impl_lv = LP_IMPL_LOAD_RELAXED(lp_impl_levels); \
    if (LP_IMPL_UNLIKELY(lp_impl_instant_site.level & lp_impl_lv)) \
      lp_impl_instant((uintptr_t)&lp_impl_instant_site | LP_IMPL_EV_INSTANT, lp_impl_lv); \
  } while (0)
#define LP_NOTIFY_SCOPE(stream, type, parent, event, instance, user_data) \
  lp_impl_nscope_t LP_IMPL_CAT(lp_impl_nscope_, __COUNTER__) __attribute__((cleanup(lp_impl_nscope_leave), unused)) = \
      lp_impl_nscope_enter((stream), (type), (parent), (event), (instance), (user_data))
#define LP_COUNTER(name, value) LP_COUNTER_L(LP_LEVEL_RUNTIME, name, value)
#define LP_COUNTER_L(lvl, text, value) \
  do { \
    static const lp_site_t lp_impl_counter_site = LP_IMPL_SITE(text, lvl); \
    if (LP_IMPL_UNLIKELY(lp_impl_counter_site.level & LP_IMPL_LOAD_RELAXED(lp_impl_levels))) \
      lp_impl_counter(&lp_impl_counter_site, (int64_t)(value)); \
  } while (0)

/* ---- layers and phases ---- */
#define LP_SCOPE_PHASE(layer, phase, label) LP_IMPL_SCOPE_LP(layer, phase, LP_MODE_SCOPE, label, __COUNTER__)
#define LP_SCOPE_SUBTRACT(layer, phase, label) LP_IMPL_SCOPE_LP(layer, phase, LP_MODE_SUBTRACT, label, __COUNTER__)
#define LP_PHASE_SWITCH(layer, phase, label) LP_IMPL_SWITCH(layer, phase, label, __COUNTER__)
/* ---- end of layers and phases ---- */

/* ------------------------------------------------------------------------ */
/* What they expand to                                                      */
/* ------------------------------------------------------------------------ */

/*
 * The per-thread state the macros touch. The owning thread is its only
 * writer but for `levels`. `word` holds the stack depth in its low 16 bits
 * and a change counter above them; every push and pop publishes a new word
 * with a release store, and a push writes its frame (also with a release
 * store) before publishing. A push adds one to the depth and one to the
 * counter; a pop takes one from the depth only (LP_IMPL_POPPED); only a
 * phase switch, which rewrites the innermost frame in place, adds one to
 * the counter without a push. So the counter counts the thread's pushes,
 * which is how a spent budget counts its drops (below). A reader (the
 * collector) copies the frames, with acquire loads, between two reads of
 * the word and keeps the copy only if the word did not change: a frame is
 * only rewritten after a pop or a switch has published a new word, and the
 * frame's release store carries that word to any reader that sees the new
 * frame, so an unchanged word means an untorn copy. The counter never goes
 * back, and between two pushes the depth only goes down, so no word is ever
 * published twice. On x86 all of this compiles to plain moves.
 *
 * `levels` is the thread's own copy of lp_impl_levels, the one a scope
 * tests: the library writes it (lib/thread.c) whenever lp_impl_levels
 * changes, and the thread itself writes it in two cases. When a discard
 * budget is spent (LP_IMPL_SPENT), the thread's next recorded scope makes
 * it count instead of record: its levels become the levels not recorded
 * and LP_IMPL_COUNTING, so that a recorded level takes the untraced inline
 * path, and every push of one is a dropped scope (two events), counted as
 * the difference of the word's counter since then; a level not recorded
 * goes to the library instead, which pushes it and leaves it out of the
 * count. When the levels change again, the library sets
 * LP_IMPL_LEVELS_STALE and every level, so that the next scope goes to the
 * library, which adds up the count and takes the new levels.
 *
 * Frames hold the site pointer with bit 0 set when the scope also recorded
 * a timeline begin event, and bit 1 set when its begin reached subscribers
 * (sites are 8-aligned).
 *
 * Timeline cursor: events go to [tcur, tend) of the current chunk. Room is
 * kept for the ends of the scopes still open, by depth: a begin at depth d
 * is recorded only if d + 2 slots are left (itself, its end and the ends of
 * the d scopes below it), an instant or a counter only if it leaves d, so
 * that an end always finds room, even after the budget is spent or the
 * session has stopped. (Scopes deeper than the frames keep no room: a
 * longjmp out of them could not say so.)
 */
/*
 * Shared fields are plain types accessed only through the __atomic builtins
 * (GCC and Clang, every C and C++ standard), so the header compiles cleanly
 * under -std=c99 -pedantic and C++11 as well as C11.
 */
#define LP_IMPL_LOAD_RELAXED(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define LP_IMPL_LOAD_ACQUIRE(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define LP_IMPL_STORE_RELAXED(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define LP_IMPL_STORE_RELEASE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

typedef struct lp_impl_event {
  uint64_t ts;   /* clock ticks, or a counter's value */
  uintptr_t tag; /* site pointer | event kind; begins and ends also carry the depth in bits 56-63 */
} lp_impl_event_t;

typedef struct lp_impl_thread {
  uint64_t word;   /* depth | change counter << 16 */
  uint32_t levels; /* what this thread's scopes test: see above */
  uint32_t unused;
  uintptr_t frames[LP_STACK_CAPACITY]; /* the inline code reaches word, levels and frames with one-byte offsets */
  lp_impl_event_t *tcur; /* timeline: the next free slot, published with release */
  lp_impl_event_t *tend; /* the end of the chunk */
  uint64_t dropped;      /* events dropped inline, counted one by one */
} lp_impl_thread_t;

/*
 * A scope keeps the word its push published, so that its end stores the
 * next word computed from a register when nothing was pushed or popped in
 * between: then the pop waits on no load of the word (on Intel a store
 * forwarded to a dependent load costs about 5 cycles). It still loads the
 * word, but only to compare, which a predicted branch takes off the chain.
 * The word is published ^ LP_IMPL_TRACED_MARK when the scope recorded a
 * begin (no published word has that bit in its depth, so a traced scope ends
 * on its own branch), and LP_IMPL_NOT_PUSHED when nothing was pushed.
 * It does not keep the thread's state: its end reads lp_impl_self again,
 * so that a scope whose end runs on another thread than its begin (a
 * coroutine resumed elsewhere) touches only the stack of the thread it
 * runs on, never another thread's. That end finds a word that is not its
 * own: it pops the running thread's innermost scope if their depths agree,
 * or takes the cold path, and the running thread's next scope to end heals
 * its stack.
 */
typedef struct lp_impl_scope {
  const lp_site_t *site;
  uint64_t word;
} lp_impl_scope_t;

/*
 * The version of the layout and protocol above, which labelprof.h compiles
 * into programs: every unit that includes labelprof.h tells the library its
 * number once it is loaded (lp_impl_abi_check(), from a constructor). A
 * library of another number writes one line to stderr and disables labels
 * (no thread joins, nothing records, no subscriber is called) rather than
 * let code built for another layout touch its state.
 */
#define LP_IMPL_ABI 2u

#define LP_IMPL_DEPTH_MASK  0xffffu
#define LP_IMPL_COUNT_SHIFT 16
#define LP_IMPL_COUNT_ONE   0x10000u
#define LP_IMPL_POPPED(w)   ((w) - 1u) /* the word after a pop */
#define LP_IMPL_TRACED_MARK 0x8000u /* depths stay below it */
#define LP_IMPL_NOT_PUSHED  0x7ffeu /* a depth no stack reaches; no published word equals it */
#define LP_IMPL_TRACED      0x1u    /* in a frame: the scope recorded a begin */
#define LP_IMPL_NOTIFIED    0x2u    /* in a frame: the scope's begin reached subscribers */
/* In lp_impl_levels and the threads' levels, beside the LP_LEVEL_* bits: */
#define LP_IMPL_SPENT       0x80000000u /* the discard budget is spent */
#define LP_IMPL_SUBS        0x40000000u /* subscribers listen to labels (then every level bit is set) */
#define LP_IMPL_SUBS_TRACED 0x20000000u /* subscribers listen and a timeline records */
/* Only in a thread's levels: */
#define LP_IMPL_SLOW_CLOCK   0x10000000u /* the timeline's clock is not the CPU's counter */
#define LP_IMPL_COUNTING     0x08000000u /* its pushes count its drops; its levels are those not recorded */
#define LP_IMPL_LEVELS_STALE 0x04000000u /* lp_impl_levels changed while it counted: its next scope catches up */
/* A thread's levels with any of these: a recorded scope takes the library's general path. */
#define LP_IMPL_NOT_PLAIN \
  (LP_IMPL_SPENT | LP_IMPL_SUBS | LP_IMPL_SLOW_CLOCK | LP_IMPL_COUNTING | LP_IMPL_LEVELS_STALE)
#define LP_IMPL_EV_BEGIN    0x0u /* event kinds, in the low bits of an event's tag */
#define LP_IMPL_EV_END      0x1u
#define LP_IMPL_EV_INSTANT  0x2u
#define LP_IMPL_EV_COUNTER  0x3u /* followed by a slot holding the value */
#define LP_IMPL_EV_KIND     0x7u
#if UINTPTR_MAX > 0xffffffffu
/* Depth 0..255 in the top byte (no user-space pointer reaches it); 255 means 255 or deeper. */
#define LP_IMPL_DEPTH_SHIFT 56
#define LP_IMPL_DEPTH_TAG(d) ((uintptr_t)((d) < 255u ? (d) : 255u) << LP_IMPL_DEPTH_SHIFT)
/* The same for a depth known to be below LP_STACK_CAPACITY. */
#define LP_IMPL_FRAME_TAG(d) ((uintptr_t)(d) << LP_IMPL_DEPTH_SHIFT)
#else
#define LP_IMPL_DEPTH_TAG(d) ((uintptr_t)0 * (d))
#define LP_IMPL_FRAME_TAG(d) ((uintptr_t)0 * (d))
#endif

/* The hot path is inlined whatever the compiler's size heuristics say: a call would double its cost. */
#define LP_IMPL_INLINE static inline __attribute__((always_inline))
#define LP_IMPL_LIKELY(x) __builtin_expect(!!(x), 1)
#define LP_IMPL_UNLIKELY(x) __builtin_expect(!!(x), 0)

/*
 * The calling thread's state. Initial-exec TLS: reached with one
 * thread-pointer-relative load, never through __tls_get_addr, also from a
 * shared library. Before a thread's first label it points at a shared
 * state nobody writes, every bit of which is set, so that the first label
 * takes the slow path, which registers the thread.
 */
LP_EXPORT extern __thread lp_impl_thread_t *lp_impl_self __attribute__((tls_model("initial-exec")));
/*
 * The trace levels being recorded (0 when no timeline is) and
 * LP_IMPL_SPENT; while subscribers listen to labels, also every level and
 * LP_IMPL_SUBS. Instants, counters and NVTX ranges test it; a scope tests
 * its thread's copy.
 */
LP_EXPORT extern uint32_t lp_impl_levels;
/* 1 when events are stamped with the CPU's counter; set before the first event, never changed after. */
LP_EXPORT extern int lp_impl_clock_counter;

/* The library's side of LP_IMPL_ABI (see above); 0 if abi is its own, else -1. */
LP_EXPORT int lp_impl_abi_check(unsigned abi);
#ifndef LP_IMPL_LIBRARY
static void lp_impl_abi_note(void) __attribute__((constructor(101), unused));
static void lp_impl_abi_note(void) { (void)lp_impl_abi_check(LP_IMPL_ABI); }
#endif

LP_EXPORT uint64_t lp_impl_push_slow(uintptr_t tag);
LP_EXPORT uint64_t lp_impl_enter_slow(const lp_site_t *site, int manual);
LP_EXPORT void lp_impl_leave_slow(const lp_site_t *site, uint64_t word);
LP_EXPORT void lp_impl_end_slow(void);
LP_EXPORT void lp_impl_instant_slow(uintptr_t tag);
LP_EXPORT uint64_t lp_impl_ticks_slow(void);
LP_EXPORT void lp_impl_counter(const lp_site_t *site, int64_t value);
/* ---- layers and phases ---- */
LP_EXPORT lp_impl_scope_t lp_impl_switch_enter(const lp_site_t *site);
LP_EXPORT void lp_impl_switch_leave(lp_impl_scope_t *s);
/* ---- end of layers and phases ---- */

/* Subscribers (see "subscribers: the inline part" below). */
#define LP_IMPL_WANT_BIT(type) ((uint64_t)1 << ((((unsigned)(type) >> 1) ^ ((unsigned)(type) >> 8)) & 63u))
LP_EXPORT extern uint64_t lp_impl_wanted[256];
LP_EXPORT void lp_impl_instant_notify(uintptr_t tag);
LP_EXPORT int lp_impl_notify_wanted_slow(uint8_t stream, uint16_t type);
/* lp_notify() past its test of lp_impl_wanted, which the caller made and found set (or stream 0). */
LP_EXPORT int lp_impl_notify_listened(uint8_t stream, uint16_t type, const lp_event_t *parent,
                                      const lp_event_t *event, uint64_t instance, const void *user_data);
LP_EXPORT int32_t lp_impl_nscope_begin(uint8_t stream, uint16_t type, const lp_event_t *parent,
                                       const lp_event_t *event, uint64_t instance, const void *user_data);
LP_EXPORT void lp_impl_nscope_end(int32_t pin);

/*
 * The part of the library's subscriber state that lp_notify's inline path
 * reads, and lib/subs.c's label paths (it has the rest and the protocol). A snapshot of the enabled
 * subscribers starts with the labels stream's scope pair: nscope calls, each
 * a begin and an end callback (never NULL), the subscriber's data and its
 * instance slot. A thread's state starts with its guard (set inside a
 * callback, and in the shared states of threads without one), its two
 * ready-made label notifications, lp_notify's notification, slot and pin,
 * and frame d's hazard pointer and instance slots. A snapshot also has the
 * key table that finds the calls for a (stream, pair of types): the key's
 * home is (key * 2654435761) >> 7 & mask. lp_impl_subs_current is the current snapshot, never NULL;
 * lp_impl_subs_asym is 1 while readers may pin without a fence (the writer
 * runs membarrier(2)).
 */
#define LP_IMPL_MAX_SUBS 16
typedef struct lp_impl_call {
  lp_callback_t cb[2]; /* the begin's callback, the end's */
  void *data;
  uint32_t slot;
} lp_impl_call_t;
typedef struct lp_impl_key {
  uint32_t key; /* stream << 16 | even type; 0 = empty */
  uint32_t count;
  const lp_impl_call_t *first; /* its calls, in subscriber order */
} lp_impl_key_t;
typedef struct lp_impl_snap {
  uint32_t nscope;
  uint32_t mask;             /* keys - 1 */
  const lp_impl_key_t *keys; /* no two keys share a home unless the table reached its largest size */
  lp_impl_call_t scope[LP_IMPL_MAX_SUBS];
} lp_impl_snap_t;
typedef struct lp_impl_sthread {
  int guard;
  lp_notification_t lbegin, lend;
  lp_notification_t snote; /* lp_notify's, filled in (but tid) each time */
  void *sslot;              /* the slot lp_notify's callback gets, NULL before each */
  lp_impl_snap_t *single;   /* lp_notify's pin */
  lp_impl_snap_t *label[LP_STACK_CAPACITY]; /* frame d's pin */
  void *label_slots[LP_STACK_CAPACITY][LP_IMPL_MAX_SUBS];
} lp_impl_sthread_t;
LP_EXPORT extern __thread lp_impl_sthread_t *lp_impl_sub_self __attribute__((tls_model("initial-exec")));
LP_EXPORT extern lp_impl_snap_t *lp_impl_subs_current;
LP_EXPORT extern int lp_impl_subs_asym;

/* The CPU's counter (x86's TSC, aarch64's virtual counter); 0 where there is none (lp_impl_clock_counter is 0 there). */
LP_IMPL_INLINE uint64_t lp_impl_counter_now(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

/* A timestamp in the session's ticks: the CPU's counter, or CLOCK_MONOTONIC ns through the library. */
LP_IMPL_INLINE uint64_t lp_impl_ticks(void) {
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
  if (LP_IMPL_LIKELY(LP_IMPL_LOAD_RELAXED(lp_impl_clock_counter))) return lp_impl_counter_now();
#endif
  return lp_impl_ticks_slow();
}

#define LP_IMPL_CAT2(a, b) a##b
#define LP_IMPL_CAT(a, b) LP_IMPL_CAT2(a, b)
#define LP_IMPL_SITE(label, level) LP_IMPL_SITE_LP(label, level, LP_LAYER_NONE, LP_PHASE_UNSPECIFIED, LP_MODE_SCOPE)
/* ---- layers and phases ---- */
#define LP_IMPL_SITE_LP(label, level, layer, phase, mode) \
  { (label), __FILE__, __func__, (uint32_t)__LINE__, (uint32_t)(level), (uint8_t)(layer), (uint8_t)(phase), \
    (uint8_t)(mode), 0 }
#define LP_IMPL_SCOPE_LP(layer, phase, mode, label, n) \
  static const lp_site_t LP_IMPL_CAT(lp_impl_site_, n) = LP_IMPL_SITE_LP(label, LP_LEVEL_RUNTIME, layer, phase, mode); \
  lp_impl_scope_t LP_IMPL_CAT(lp_impl_scope_, n) __attribute__((cleanup(lp_impl_leave), unused)) = \
      lp_impl_enter(&LP_IMPL_CAT(lp_impl_site_, n))
/*
 * A switch's scope: lp_impl_switch_enter ends the innermost open label and
 * puts the switch's site in its frame; lp_impl_switch_leave records the
 * switch's end and leaves the frame to the scope it replaced, whose own end
 * pops it (without recording a second end). Both are calls: a switch is rare.
 */
#define LP_IMPL_SWITCH(layer, phase, label, n) \
  static const lp_site_t LP_IMPL_CAT(lp_impl_site_, n) = \
      LP_IMPL_SITE_LP(label, LP_LEVEL_RUNTIME, layer, phase, LP_MODE_SWITCH); \
  lp_impl_scope_t LP_IMPL_CAT(lp_impl_scope_, n) __attribute__((cleanup(lp_impl_switch_leave), unused)) = \
      lp_impl_switch_enter(&LP_IMPL_CAT(lp_impl_site_, n))
/* ---- end of layers and phases ---- */
#define LP_IMPL_SCOPE(level, label, n) \
  static const lp_site_t LP_IMPL_CAT(lp_impl_site_, n) = LP_IMPL_SITE(label, level); \
  lp_impl_scope_t LP_IMPL_CAT(lp_impl_scope_, n) __attribute__((cleanup(lp_impl_leave), unused)) = \
      lp_impl_enter(&LP_IMPL_CAT(lp_impl_site_, n))

/*
 * A label's inline code is only what an unrecorded scope runs: the test
 * that its level records nothing (subscribers listening set every level),
 * the test that the depth is in range (a new thread's shared state is out
 * of range, and so is a full stack), the push (the frame, then the word),
 * and the matched pop. Everything else starts in lib/cold.c:
 * lp_impl_enter_cold() records the begin, notifies subscribers, registers
 * a new thread or counts a deep push; lp_impl_leave_cold() records the end,
 * notifies, or heals a stack that an LP_END or a longjmp left otherwise;
 * lp_impl_begin_cold() and lp_impl_end_cold() do the same for LP_BEGIN and
 * LP_END. They return 0 (the enter, its word) and never LP_IMPL_NEVER.
 * Each tries the recording protocol of labelprof/impl_cold.h first and
 * calls the general path of the library (lp_impl_enter_slow() and its
 * siblings) for anything else.
 */
LP_EXPORT uint64_t lp_impl_enter_cold(const lp_site_t *site);
LP_EXPORT uint64_t lp_impl_begin_cold(const lp_site_t *site);
LP_EXPORT uint64_t lp_impl_leave_cold(const lp_site_t *site, uint64_t word);
LP_EXPORT uint64_t lp_impl_end_cold(void);
#define LP_IMPL_NEVER (~(uint64_t)0) /* no word: its depth would be 0xffff */

/* The recording protocol (labelprof/impl_cold.h), declared here so that the fast paths below read first. */
LP_IMPL_INLINE uint64_t lp_impl_enter_cold_in(const lp_site_t *site, int manual);
LP_IMPL_INLINE uint64_t lp_impl_leave_cold_in(const lp_site_t *site, uint64_t word);
LP_IMPL_INLINE uint64_t lp_impl_end_cold_in(void);

/*
 * On x86-64 the inline code calls them through thunks (lib/cold.c) that
 * keep every register but the ones named here. An enter or a begin passes
 * its site in rax and gets its word back in rax; a leave passes its site in
 * rcx (its asm takes the site's address with a lea, so that the function
 * keeps no register for it) and its word in rdx, and its thunk keeps rax
 * too, where the function's return value usually is when its scope ends.
 * The asm says that r10 and r11, rax or rcx, the flags, memory and the
 * vector and x87 registers change; so a labelled function keeps its values
 * in the other registers across the cold call, and saves none of them on
 * its fast path for it, where a plain call would make it save, in its
 * prologue, every value that lives across the call in a callee-saved
 * register. The call goes through the GOT (no PLT stub in between) and
 * steps over the 128-byte red zone, which a leaf may be using; the thunk's
 * return (ret $128) steps back, and its unwind information accounts for it.
 *
 * A compiler sees no call in an asm, and gcc (12) then assumes that the
 * labelled function changes no static variable of its file whose address
 * is not taken: a subscriber's callback behind the thunk that changed one
 * would go unseen by a caller in that file. So with gcc the inline code
 * also holds a real call, to lp_impl_never(), which never runs: it is
 * reached only when a cold function returns LP_IMPL_NEVER, which none
 * does, and it is followed by __builtin_unreachable(), so that nothing
 * lives across it. (Declared noreturn, it would not do: gcc then leaves
 * the call out of the same reckoning.) Clang counts an asm that clobbers
 * memory as a write to every such variable.
 *
 * Elsewhere, under ThreadSanitizer, or with LP_IMPL_PLAIN_CALLS defined,
 * they are plain calls. With LABELPROF_INLINE_RECORDING (labelprof.h
 * documents it) the recording protocol is inline in the program instead,
 * and only the general paths are calls.
 */
LP_EXPORT void lp_impl_never(void) __attribute__((cold));
/* ThreadSanitizer sees no store a thunk makes: under it, plain calls. */
#if defined(__SANITIZE_THREAD__)
#define LP_IMPL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LP_IMPL_TSAN 1
#endif
#endif
#if defined(LABELPROF_INLINE_RECORDING)
#define LP_IMPL_COLD_ENTER(site, r) (*(r) = lp_impl_enter_cold_in((site), 0))
#define LP_IMPL_COLD_BEGIN(site, r) (*(r) = lp_impl_enter_cold_in((site), 1))
#define LP_IMPL_COLD_LEAVE(site, word, r) (*(r) = lp_impl_leave_cold_in((site), (word)))
#define LP_IMPL_COLD_END(r) (*(r) = lp_impl_end_cold_in())
#define LP_IMPL_SEEN(r) ((void)(r))
#elif defined(__x86_64__) && !defined(__ILP32__) && !defined(LP_IMPL_PLAIN_CALLS) && !defined(LP_IMPL_TSAN)
#define LP_IMPL_CLOBBER_X87 "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)", \
    "mm0", "mm1", "mm2", "mm3", "mm4", "mm5", "mm6", "mm7"
#define LP_IMPL_CLOBBER_XMM "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", \
    "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"
#ifdef __AVX512F__
#define LP_IMPL_CLOBBER_VEC LP_IMPL_CLOBBER_XMM, "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", \
    "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", \
    "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"
#else
#define LP_IMPL_CLOBBER_VEC LP_IMPL_CLOBBER_XMM
#endif
#define LP_IMPL_CLOBBERS "r10", "r11", "cc", "memory", LP_IMPL_CLOBBER_X87, LP_IMPL_CLOBBER_VEC
#define LP_IMPL_THUNK(fn) "add $-128, %%rsp\n\tcall *" fn "@GOTPCREL(%%rip)" /* the thunk returns with ret $128 */
/* Each returns through *r, not as a value: gcc would warn that a local may be clobbered by longjmp. */
#define LP_IMPL_COLD_ENTER(site, r) \
  __asm__ __volatile__(LP_IMPL_THUNK("lp_impl_enter_thunk") : "=a"(*(r)) : "0"(site) : LP_IMPL_CLOBBERS)
#define LP_IMPL_COLD_BEGIN(site, r) \
  __asm__ __volatile__(LP_IMPL_THUNK("lp_impl_begin_thunk") : "=a"(*(r)) : "0"(site) : LP_IMPL_CLOBBERS)
/* The leave's site is a memory operand: its address is a constant that the lea writes into the asm. */
#define LP_IMPL_COLD_LEAVE(site, word, r) \
  do { \
    *(r) = 0; \
    __asm__ __volatile__("lea %1, %%rcx\n\t" LP_IMPL_THUNK("lp_impl_leave_thunk") \
                         : : "d"(word), "m"(*(site)) : "rcx", LP_IMPL_CLOBBERS); \
  } while (0)
#define LP_IMPL_COLD_END(r) __asm__ __volatile__(LP_IMPL_THUNK("lp_impl_end_thunk") : "=a"(*(r)) : : LP_IMPL_CLOBBERS)
#ifdef __clang__
#define LP_IMPL_SEEN(r) ((void)(r))
#else
#define LP_IMPL_SEEN(r) \
  do { \
    if (LP_IMPL_UNLIKELY(*(r) == LP_IMPL_NEVER)) { \
      lp_impl_never(); \
      __builtin_unreachable(); \
    } \
  } while (0)
#endif
#else
#define LP_IMPL_COLD_ENTER(site, r) (*(r) = lp_impl_enter_cold(site))
#define LP_IMPL_COLD_BEGIN(site, r) (*(r) = lp_impl_begin_cold(site))
#define LP_IMPL_COLD_LEAVE(site, word, r) (*(r) = lp_impl_leave_cold((site), (word)))
#define LP_IMPL_COLD_END(r) (*(r) = lp_impl_end_cold())
#define LP_IMPL_SEEN(r) ((void)(r))
#endif

/*
 * The frame a push fills, found from the word it publishes (depth d + 1):
 * frames[d], addressed as frames + d + 1 - 1, which the compiler folds
 * into the thread's address plus 8 (d + 1) with no add for the index.
 */
LP_IMPL_INLINE uintptr_t *lp_impl_frame_below(lp_impl_thread_t *t, uint64_t pushed) {
  return (uintptr_t *)((char *)t->frames + sizeof(uintptr_t) * ((uint32_t)pushed & LP_IMPL_DEPTH_MASK) -
                       sizeof(uintptr_t));
}

/*
 * The tests and the pops in x86-64 instructions, with asm goto (gcc 4.5 and
 * clang 9 on; LP_IMPL_NO_ASM_GOTO turns it off), because a compiler does
 * not fold an atomic load into the instruction that uses it:
 *   - the level test: goto cold when the thread's levels have a bit of
 *     level, as one test of the field in memory (testb when level is a
 *     constant below 256, as a site's level is);
 *   - the matched pop's test: goto other unless the thread's word is the
 *     one the scope published, compared in memory;
 *   - the other pop's test: goto cold unless the word's depth is the one
 *     the scope published;
 *   - that pop: the word less one, in one instruction (a signal handler
 *     runs between two instructions, never inside one).
 * The matched pop itself stores the scope's word less one from a register:
 * it waits on no load (see lp_impl_scope_t).
 * Under ThreadSanitizer, which sees no access an asm makes, and elsewhere,
 * the same in C with atomic loads and stores.
 */
#if defined(__clang__) && __clang_major__ < 9 && !defined(LP_IMPL_NO_ASM_GOTO)
#define LP_IMPL_NO_ASM_GOTO 1
#endif
#if defined(__x86_64__) && !defined(LP_IMPL_TSAN) && !defined(LP_IMPL_NO_ASM_GOTO)
#define LP_IMPL_IF_LEVEL(t, level, cold) \
  do { \
    if (__builtin_constant_p(level) && (level) <= 0xffu) \
      __asm__ goto("testb %b0, %1\n\tjnz %l2" : : "ri"((uint8_t)(level)), "m"((t)->levels) : "cc" : cold); \
    else \
      __asm__ goto("testl %0, %1\n\tjnz %l2" : : "ri"((uint32_t)(level)), "m"((t)->levels) : "cc" : cold); \
  } while (0)
#define LP_IMPL_IF_NOT_WORD(t, kept, other) \
  __asm__ goto("cmpq %1, %0\n\tjne %l2" : : "m"((t)->word), "r"(kept) : "cc" : other)
#define LP_IMPL_IF_NOT_DEPTH(t, kept, other) \
  __asm__ goto("cmpw %w1, %0\n\tjne %l2" : : "m"((t)->word), "r"(kept) : "cc" : other)
#define LP_IMPL_POP(t) __asm__ __volatile__("decq %0" : "+m"((t)->word))
#else
#define LP_IMPL_IF_LEVEL(t, level, cold) \
  do { \
    if (LP_IMPL_UNLIKELY((level) & LP_IMPL_LOAD_RELAXED((t)->levels))) goto cold; \
  } while (0)
#define LP_IMPL_IF_NOT_WORD(t, kept, other) \
  do { \
    if (LP_IMPL_UNLIKELY(LP_IMPL_LOAD_RELAXED((t)->word) != (kept))) goto other; \
  } while (0)
#define LP_IMPL_IF_NOT_DEPTH(t, kept, other) \
  do { \
    if (LP_IMPL_UNLIKELY((uint16_t)LP_IMPL_LOAD_RELAXED((t)->word) != (uint16_t)(kept))) goto other; \
  } while (0)
#define LP_IMPL_POP(t) LP_IMPL_STORE_RELEASE((t)->word, LP_IMPL_POPPED(LP_IMPL_LOAD_RELAXED((t)->word)))
#endif

/* gcc lays out the block behind an asm goto's label where it comes, unless the label is marked cold. */
#if defined(__clang__)
#define LP_IMPL_COLD_LABEL
#else
#define LP_IMPL_COLD_LABEL __attribute__((cold))
#endif

/* Two tests, each of one load and one branch, and one cold call for both. */
LP_IMPL_INLINE lp_impl_scope_t lp_impl_enter(const lp_site_t *site) {
  lp_impl_scope_t s;
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w;
  uint32_t d;
  s.site = site;
  LP_IMPL_IF_LEVEL(t, site->level, cold);
  w = LP_IMPL_LOAD_RELAXED(t->word);
  d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  if (LP_IMPL_UNLIKELY(d >= LP_STACK_CAPACITY)) goto cold;
  s.word = w + LP_IMPL_COUNT_ONE + 1;
  /* Release: a reader that sees this frame also sees every word published before it. */
  LP_IMPL_STORE_RELEASE(*lp_impl_frame_below(t, s.word), (uintptr_t)site);
  LP_IMPL_STORE_RELEASE(t->word, s.word);
  return s;
cold: LP_IMPL_COLD_LABEL;
  LP_IMPL_COLD_ENTER(site, &s.word);
  LP_IMPL_SEEN(&s.word);
  return s;
}

LP_IMPL_INLINE void lp_impl_leave(lp_impl_scope_t *s) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t r;
  LP_IMPL_IF_NOT_WORD(t, s->word, other);
  LP_IMPL_STORE_RELEASE(t->word, LP_IMPL_POPPED(s->word)); /* nothing pushed or popped since */
  return;
other:
  LP_IMPL_IF_NOT_DEPTH(t, s->word, cold);
  LP_IMPL_POP(t); /* scopes inside it came and went */
  return;
cold: LP_IMPL_COLD_LABEL;
  /* Its begin was recorded or notified (its word is marked), or the stack needs healing. */
  LP_IMPL_COLD_LEAVE(s->site, s->word, &r);
  (void)r; /* the scope's enter holds the function's real call (LP_IMPL_SEEN) */
}

LP_IMPL_INLINE void lp_impl_begin(const lp_site_t *site) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w, r;
  uint32_t d;
  LP_IMPL_IF_LEVEL(t, site->level, cold);
  w = LP_IMPL_LOAD_RELAXED(t->word);
  d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  if (LP_IMPL_UNLIKELY(d >= LP_STACK_CAPACITY)) goto cold;
  w += LP_IMPL_COUNT_ONE + 1;
  LP_IMPL_STORE_RELEASE(*lp_impl_frame_below(t, w), (uintptr_t)site);
  LP_IMPL_STORE_RELEASE(t->word, w);
  return;
cold: LP_IMPL_COLD_LABEL;
  LP_IMPL_COLD_BEGIN(site, &r);
  LP_IMPL_SEEN(&r);
}

LP_IMPL_INLINE void lp_impl_end(void) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  uint64_t r;
  /* d - 1 wraps for d == 0: an empty stack, a deep one and an unregistered thread all go cold, and so does a
     frame whose begin was recorded or notified. */
  if (LP_IMPL_UNLIKELY(d - 1u >= LP_STACK_CAPACITY ||
                       (LP_IMPL_LOAD_RELAXED(t->frames[d - 1u]) & (LP_IMPL_TRACED | LP_IMPL_NOTIFIED)))) {
    LP_IMPL_COLD_END(&r);
    LP_IMPL_SEEN(&r);
    return;
  }
  LP_IMPL_STORE_RELEASE(t->word, LP_IMPL_POPPED(w));
}

/*
 * An instant: room for itself and the ends of the d scopes open, like a
 * begin, but it keeps none. (A deep stack asks more room than it needs,
 * and an unregistered thread, depth 0xffff, has none.)
 */
LP_IMPL_INLINE void lp_impl_instant(uintptr_t tag, uint32_t levels) {
  lp_impl_thread_t *t = lp_impl_self;
  lp_impl_event_t *e = LP_IMPL_LOAD_RELAXED(t->tcur);
  uintptr_t d = (uintptr_t)(LP_IMPL_LOAD_RELAXED(t->word) & LP_IMPL_DEPTH_MASK);
  if (LP_IMPL_LIKELY(!(levels & (LP_IMPL_SPENT | LP_IMPL_SUBS)) &&
                     (uintptr_t)t->tend - (uintptr_t)e > d * sizeof(lp_impl_event_t))) {
    e->ts = lp_impl_ticks();
    e->tag = tag;
    LP_IMPL_STORE_RELEASE(t->tcur, e + 1);
    return;
  }
  if (levels & LP_IMPL_SUBS) {
    lp_impl_instant_notify(tag);
    return;
  }
  if ((levels & LP_IMPL_SPENT) && e) { /* a thread without a chunk may not be registered yet */
    LP_IMPL_STORE_RELAXED(t->dropped, LP_IMPL_LOAD_RELAXED(t->dropped) + 1);
    return;
  }
  lp_impl_instant_slow(tag);
}

/* A push of tag, for the library's own paths and benches; returns the word published, or LP_IMPL_NOT_PUSHED. */
LP_IMPL_INLINE uint64_t lp_impl_push(uintptr_t tag) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  if (LP_IMPL_UNLIKELY(d >= LP_STACK_CAPACITY)) return lp_impl_push_slow(tag);
  /* Release: a reader that sees this frame also sees every word published before it. */
  LP_IMPL_STORE_RELEASE(t->frames[d], tag);
  w += LP_IMPL_COUNT_ONE + 1;
  LP_IMPL_STORE_RELEASE(t->word, w);
  return w;
}

/* ---- subscribers: the inline part ---------------------------------------
 * When an enabled subscriber has a callback on the labels stream,
 * lp_impl_levels and every thread's levels hold every level bit and
 * LP_IMPL_SUBS, so that every scope takes its cold path, which the library
 * sends to its subscribers' paths (lib/subs.c). A scope whose begin reached
 * a subscriber has LP_IMPL_NOTIFIED in its frame and its word marked like a
 * traced one, so that its end leaves the common path too. lp_impl_wanted
 * has, per stream, one bit per pair of types (hashed for vendors' types)
 * that an enabled subscriber may want.
 */

/*
 * Pins the current snapshot s in h, as lib/subs.c does: without a fence
 * while the writer runs membarrier(2), sequentially consistent otherwise.
 * Returns current as read after the pin; the pin holds only if it is s.
 */
LP_IMPL_INLINE lp_impl_snap_t *lp_impl_pin(lp_impl_snap_t **h, lp_impl_snap_t *s) {
  if (LP_IMPL_LIKELY(LP_IMPL_LOAD_RELAXED(lp_impl_subs_asym))) {
    LP_IMPL_STORE_RELAXED(*h, s);
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the writer's membarrier() is the fence */
    return LP_IMPL_LOAD_RELAXED(lp_impl_subs_current);
  }
  __atomic_store_n(h, s, __ATOMIC_SEQ_CST);
  return __atomic_load_n(&lp_impl_subs_current, __ATOMIC_SEQ_CST);
}

static inline int lp_notify_wanted(uint8_t stream, uint16_t type) {
  if (LP_IMPL_LIKELY(!(LP_IMPL_LOAD_RELAXED(lp_impl_wanted[stream]) & LP_IMPL_WANT_BIT(type)))) return 0;
  return lp_impl_notify_wanted_slow(stream, type);
}

/*
 * lp_notify() is also a macro, so that nobody listening costs one load and a
 * test inline; when the bit is set, the call goes past the exported
 * lp_notify's own test of it. (lp_notify)(...) or a pointer to lp_notify
 * calls the function, test included.
 */
/*
 * Someone may listen: in the program's own code for the usual case (a
 * thread with its subscriber state, outside callbacks, the snapshot pinned
 * at the first try, the key at its home, one subscriber on it): the
 * thread's notification filled in, the callback with a fresh NULL slot.
 * Anything else goes to lp_impl_notify_listened(). Inline at every
 * lp_notify, as its test in lp_impl_notify is: left to itself, gcc kept the
 * two out of line together, so that nobody listening cost a call, and one
 * callback a call more (about 1 ns each); the extra code is out of the way
 * of the test's likely path, as a scope's is.
 */
LP_IMPL_INLINE int lp_impl_notify_local(uint8_t stream, uint16_t type, const lp_event_t *parent,
                                         const lp_event_t *event, uint64_t instance, const void *user_data) {
  lp_impl_sthread_t *st = lp_impl_sub_self;
  lp_impl_snap_t *s = LP_IMPL_LOAD_ACQUIRE(lp_impl_subs_current);
  uint32_t key = (uint32_t)stream << 16 | (type & 0xfffeu);
  const lp_impl_key_t *k;
  const lp_impl_call_t *c;
  lp_callback_t cb;
  if (LP_IMPL_UNLIKELY(!stream || st->guard)) goto out_of_line;
  if (LP_IMPL_UNLIKELY(lp_impl_pin(&st->single, s) != s)) goto unpin;
  k = &s->keys[(key * 2654435761u) >> 7 & s->mask];
  if (LP_IMPL_UNLIKELY(k->key != key || k->count != 1)) {
    if (k->key == 0) { /* nobody has this pair */
      LP_IMPL_STORE_RELEASE(st->single, (lp_impl_snap_t *)0);
      return 0;
    }
    goto unpin;
  }
  c = k->first;
  cb = c->cb[type & 1u];
  st->guard = 1; /* first: a signal handler's notification from here on reaches nobody, and leaves snote alone */
  st->snote.stream = stream;
  st->snote.type = type;
  st->snote.parent = parent;
  st->snote.event = event;
  st->snote.instance = instance;
  st->snote.user_data = user_data;
  st->sslot = 0;
  if (LP_IMPL_LIKELY(cb != 0)) cb(&st->snote, c->data, &st->sslot);
  st->guard = 0;
  LP_IMPL_STORE_RELEASE(st->single, (lp_impl_snap_t *)0);
  return 0;
unpin:
  LP_IMPL_STORE_RELEASE(st->single, (lp_impl_snap_t *)0);
out_of_line:
  return lp_impl_notify_listened(stream, type, parent, event, instance, user_data);
}

LP_IMPL_INLINE int lp_impl_notify(uint8_t stream, uint16_t type, const lp_event_t *parent, const lp_event_t *event,
                                   uint64_t instance, const void *user_data) {
  if (LP_IMPL_LIKELY(!(LP_IMPL_LOAD_RELAXED(lp_impl_wanted[stream]) & LP_IMPL_WANT_BIT(type))) && stream) return 0;
  return lp_impl_notify_local(stream, type, parent, event, instance, user_data);
}
#define lp_notify(stream, type, parent, event, instance, user_data) \
  lp_impl_notify((stream), (type), (parent), (event), (instance), (user_data))

/* An LP_NOTIFY_SCOPE: the per-thread pin its begin took, or -1 when nothing began. */
typedef struct lp_impl_nscope {
  int32_t pin;
} lp_impl_nscope_t;

LP_IMPL_INLINE lp_impl_nscope_t lp_impl_nscope_enter(uint8_t stream, uint16_t type, const lp_event_t *parent,
                                                     const lp_event_t *event, uint64_t instance,
                                                     const void *user_data) {
  lp_impl_nscope_t s;
  s.pin = -1;
  if (LP_IMPL_UNLIKELY(LP_IMPL_LOAD_RELAXED(lp_impl_wanted[stream]) & LP_IMPL_WANT_BIT(type)))
    s.pin = lp_impl_nscope_begin(stream, type, parent, event, instance, user_data);
  return s;
}

LP_IMPL_INLINE void lp_impl_nscope_leave(lp_impl_nscope_t *s) {
  if (LP_IMPL_UNLIKELY(s->pin >= 0)) lp_impl_nscope_end(s->pin);
}

/* ------------------------------------------------------------------------ */
/* Sites made at run time: for labelprof's NVTX and ITT libraries (not API)  */
/* ------------------------------------------------------------------------ */

/*
 * Exported for liblabelprof_nvtx.so and liblabelprof_itt.so, which turn
 * NVTX ranges and ITT tasks into labels; not part of the API, and changed
 * without notice. A name made at run time is interned by its text into a
 * site that lives as long as the process (the pseudo-stack holds site
 * pointers); the category (an NVTX or ITT domain) is what the timeline
 * writes as the event's "cat". Sites made here have LP_IMPL_SITE_MADE in
 * reserved_layers and are the first member of an lp_impl_made_site_t.
 */
#define LP_IMPL_SITE_MADE 0x80u
typedef struct lp_impl_made_site {
  lp_site_t site;
  const char *category; /* from lp_impl_category(); NULL for none */
} lp_impl_made_site_t;

/*
 * The site for text (NUL-terminated) in category, at LP_LEVEL_ANNOTATIONS:
 * the same text and category always give the same site. A per-thread cache
 * answers repeated names without a lock. Past LABELPROF_MAX_NAMES distinct
 * names (default 10000) every new name gets one overflow site, "(other
 * names)", and each such call is counted (lp_impl_names_overflow()). NULL
 * text is "(null)". Never returns NULL.
 */
LP_EXPORT const lp_site_t *lp_impl_site_make(const char *text, const char *category);
/* The interned copy of a category name (at most 4096 distinct; past that, "(other categories)"); NULL for NULL. */
LP_EXPORT const char *lp_impl_category(const char *text);
/* Calls that got the overflow site so far; *limit (may be NULL) is the bound on distinct names. */
LP_EXPORT uint64_t lp_impl_names_overflow(uint64_t *limit);
/* ---- end of sites made at run time ---- */

#include "labelprof/impl_cold.h"

#ifdef __cplusplus
}
#endif

#endif /* LABELPROF_IMPL_H */
