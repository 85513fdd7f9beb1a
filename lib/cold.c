/*
 * cold.c: a scope's slow paths, called from the inline fast path.
 *
 * labelprof/impl.h inlines only the unrecorded push and the matched pop.
 * Everything else a scope or a manual pair may need starts here:
 * lp_impl_enter_cold() and its three siblings run the recording protocol
 * of labelprof/impl_cold.h, the one implementation of it, and call the
 * library's general paths for anything else (subscribers, a new thread, a
 * full stack or chunk, a spent budget, healing the stack).
 *
 * On x86-64 the program reaches them through the thunks below, which keep
 * every general-purpose register but rax (the enter's and the begin's) or
 * rcx (the leave's), so that the labelled function keeps its values in
 * whatever registers suit it and saves none of them on its fast path. A
 * thunk first runs the protocol as a function that itself keeps every
 * register it uses (no_caller_saved_registers: it calls nothing, and saves
 * only what it touches), and only when that does nothing saves every
 * register and calls the general path, which may call anything.
 * Elsewhere, under ThreadSanitizer, or with LP_IMPL_PLAIN_CALLS, the
 * program calls the C functions directly.
 */
#if defined(__x86_64__) && !defined(__ILP32__) && defined(__GNUC__) && !defined(__clang__)
/* gcc compiles a no_caller_saved_registers function only without SSE; the whole file is general registers. */
#pragma GCC target("general-regs-only")
#endif
#include "internal.h"

#include <stddef.h>
#include <stdlib.h>

/*
 * The general begin: everything the protocol does not do, by what the
 * thread's levels say. A thread's first label registers it.
 */
uint64_t lp_impl_enter_slow(const lp_site_t *site, int manual) {
  lp__thread_t *t = lp__thread_self();
  if (!t) return LP_IMPL_NOT_PUSHED;
  for (;;) {
    uint32_t lv = LP_IMPL_LOAD_RELAXED(t->hot.levels);
    if (lv & LP_IMPL_LEVELS_STALE) { /* the levels changed while it counted its drops */
      lp__levels_catch_up(t);
      continue;
    }
    if (!(site->level & lv)) {
      /* A level that records nothing, a new thread or a full stack. Counting, a deep manual pair drops nothing. */
      uint32_t d = (uint32_t)LP_IMPL_LOAD_RELAXED(t->hot.word) & LP_IMPL_DEPTH_MASK;
      if ((lv & LP_IMPL_COUNTING) && manual && d >= LP_STACK_CAPACITY) return lp__push_uncounted(t, (uintptr_t)site);
      return lp_impl_push((uintptr_t)site);
    }
    if (lv & LP_IMPL_COUNTING) return lp__push_uncounted(t, (uintptr_t)site); /* a level not recorded */
    if (lv & LP_IMPL_SUBS) return lp__subs_begin(site, manual);
    if (!(lv & LP_IMPL_SPENT)) return lp__trace_begin(t, site, manual);
    /* The budget is spent: from now on the thread counts its drops by its pushes, this one the first. */
    if (lp__levels_count(t)) return lp_impl_push((uintptr_t)site);
  }
}

/* The general LP_END: an unregistered thread, an empty or deep stack, a notified or recorded frame. */
void lp_impl_end_slow(void) {
  lp__thread_t *t = lp__thread_self(); /* an LP_END on a thread that never used a label is a mistake to count too */
  if (!t) return;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->hot.word);
  uint32_t d = ((uint32_t)w & LP_IMPL_DEPTH_MASK) - 1; /* wraps for an empty stack */
  if (d >= LP_STACK_CAPACITY) {
    lp__stack_end_unstored(t);
    return;
  }
  uintptr_t tag = LP_IMPL_LOAD_RELAXED(t->hot.frames[d]);
  if (tag & LP_IMPL_NOTIFIED) { /* the end callbacks run before the pop, then the end is recorded */
    lp__subs_end_frame(t, tag, d);
    return;
  }
  LP_IMPL_STORE_RELEASE(t->hot.word, LP_IMPL_POPPED(w));
  if (tag & LP_IMPL_TRACED) lp__trace_end(t, tag & ~(uintptr_t)LP_IMPL_TRACED, d);
}

uint64_t lp_impl_enter_cold(const lp_site_t *site) { return lp_impl_enter_cold_in(site, 0); }

uint64_t lp_impl_begin_cold(const lp_site_t *site) {
  (void)lp_impl_enter_cold_in(site, 1);
  return 0;
}

uint64_t lp_impl_leave_cold(const lp_site_t *site, uint64_t word) { return lp_impl_leave_cold_in(site, word); }

uint64_t lp_impl_end_cold(void) { return lp_impl_end_cold_in(); }

void lp_impl_never(void) {
  lp__warn("internal error: a label's cold path returned LP_IMPL_NEVER");
  abort();
}

#if defined(__x86_64__) && !defined(__ILP32__) && !defined(LP_IMPL_TSAN)
/*
 * The protocol for the thunks: each keeps every register but rax. They are
 * leaves; a sanitizer's checks may call its handlers, which want the stack
 * the ABI promises, so then they realign it (the thunks do not: they are
 * called with the labelled function's stack, aligned or not).
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define LP__ALIGN_IN __attribute__((force_align_arg_pointer))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define LP__ALIGN_IN __attribute__((force_align_arg_pointer))
#endif
#endif
#ifndef LP__ALIGN_IN
#define LP__ALIGN_IN
#endif
#define LP__KEEPS_ALL __attribute__((no_caller_saved_registers, visibility("hidden"), used)) LP__ALIGN_IN
LP__KEEPS_ALL uint64_t lp__try_begin(const lp_site_t *site);
LP__KEEPS_ALL int lp__try_leave(const lp_site_t *site, uint64_t word);
LP__KEEPS_ALL int lp__try_end(void);
/*
 * On a thread that counts its drops by its pushes, the push of a scope of a
 * level not recorded, left out of the count (what lp_impl_enter_slow()
 * does with it, without the saves); else LP_IMPL_NEVER. Out of the
 * protocol's way: it keeps all registers too, so calling it saves none.
 */
static __attribute__((noinline, no_caller_saved_registers)) LP__ALIGN_IN uint64_t
try_uncounted(const lp_site_t *site) {
  lp_impl_thread_t *h = lp_impl_self;
  uint32_t lv = LP_IMPL_LOAD_RELAXED(h->levels);
  uint64_t w = LP_IMPL_LOAD_RELAXED(h->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  /* Not LP_IMPL_LEVELS_STALE: the shared states before a thread joins have every bit set, and no counter. */
  if ((lv & (LP_IMPL_COUNTING | LP_IMPL_LEVELS_STALE | LP_IMPL_SUBS)) != LP_IMPL_COUNTING || !(site->level & lv) ||
      d >= LP_STACK_CAPACITY)
    return LP_IMPL_NEVER;
  lp__thread_t *t = (lp__thread_t *)h;
  LP_IMPL_STORE_RELEASE(h->frames[d], (uintptr_t)site);
  lp__count_uncounted(t, w + LP_IMPL_COUNT_ONE + 1);
  return w + LP_IMPL_COUNT_ONE + 1;
}

/* The recording protocol's begin, or try_uncounted(). */
uint64_t lp__try_begin(const lp_site_t *site) {
  uint64_t w = lp_impl_try_begin(site);
  return LP_IMPL_LIKELY(w != LP_IMPL_NEVER) ? w : try_uncounted(site);
}
int lp__try_leave(const lp_site_t *site, uint64_t word) { return lp_impl_try_leave(site, word); }
int lp__try_end(void) { return lp_impl_try_end(); }

/* The general paths the thunks call, within the library: no PLT, no interposition. */
#define LP__HIDDEN_ALIAS(name, of) extern __typeof__(of) name __attribute__((alias(#of), visibility("hidden")))
LP__HIDDEN_ALIAS(lp__enter_slow, lp_impl_enter_slow);
LP__HIDDEN_ALIAS(lp__end_slow, lp_impl_end_slow); /* lp__leave_slow: subs.c */
#ifdef __CET__
#define LP__ENDBR "endbr64\n\t"
#else
#define LP__ENDBR ""
#endif

/*
 * The numbers the thunks' assembly shares with labelprof/impl.h, checked
 * here: where a thread's levels are, the bits that send a scope to the
 * subscribers or to the general path, what LP_IMPL_NEVER is, and the red
 * zone a call steps over.
 */
#define LP__S(x) #x
#define LP__X(x) LP__S(x)
#define LP__OFF_LEVELS 8
#define LP__SUBS 0x40000000
#define LP__STALE 0x04000000
#define LP__RED_ZONE 128
_Static_assert(offsetof(lp_impl_thread_t, levels) == LP__OFF_LEVELS, "levels offset");
_Static_assert(LP_IMPL_SUBS == LP__SUBS && LP_IMPL_LEVELS_STALE == LP__STALE,
               "the levels bits the thunks test");
_Static_assert(LP_IMPL_NEVER == ~(uint64_t)0, "a thunk compares with -1");
#define LP__CFA(n) "\t.cfi_adjust_cfa_offset " #n "\n"
#define LP__LEVELS_TO_R10 \
  "\tmovq lp_impl_self@gottpoff(%rip), %r10\n" \
  "\tmovq %fs:(%r10), %r10\n"

#define LP__ARGS_SCOPE "\tmovq %rax, %rdi\n\txorl %esi, %esi\n"
#define LP__ARGS_MANUAL "\tmovq %rax, %rdi\n\tmovl $1, %esi\n"
#define LP__ARGS_CX_DX "\tmovq %rcx, %rdi\n\tmovq %rdx, %rsi\n"
#define LP__ZERO_RAX "\txorl %eax, %eax\n"

/*
 * The thunks' code is laid out for the two usual cases: subscribers
 * listening fall through to their call with one branch taken, which is
 * what that path spends most of its time on; recording takes one branch
 * to the protocol, which waits for the counter anyway.
 */
/*
 * A begin (site in rax), in the thunk: the subscribers' begin when they
 * listen, else the protocol (lp__try_begin(): a recorded begin, or a push
 * that a thread counting its drops leaves out of its count; its word in
 * rax), and the general path when that does nothing.
 */
#define LP__BEGIN_THUNK(name, args) \
  LP__THUNK(name, \
            LP__LEVELS_TO_R10 \
            "\tmovl " LP__X(LP__OFF_LEVELS) "(%r10), %r11d\n" \
            "\ttestl $" LP__X(LP__SUBS) ", %r11d\n" \
            "\tjz 3f\n" \
            "\ttestl $" LP__X(LP__STALE) ", %r11d\n" /* a thread not joined, or counting its drops */ \
            "\tjnz .L" name "_slow\n" \
            LP__SAVED_CALL(".L" name "_subs", "rcx", args, "", "lp__subs_begin") \
            "3:\n" \
            "\tpushq %rdi\n" LP__CFA(8) \
            "\tmovq %rax, %rdi\n" \
            "\tcall lp__try_begin\n" \
            "\tcmpq $-1, %rax\n" \
            "\tje 1f\n" \
            "\tpopq %rdi\n" LP__CFA(-8) \
            "\tret $" LP__X(LP__RED_ZONE) "\n" \
            LP__CFA(8) \
            "1:\n" \
            "\tmovq %rdi, %rax\n" /* the site again */ \
            "\tpopq %rdi\n" LP__CFA(-8) \
            LP__SAVED_CALL(".L" name "_slow", "rcx", args, "", "lp__enter_slow"))

/*
 * A scope's end (site in rcx, its word in rdx; rax is kept), in the thunk:
 * the general path when subscribers listen, else the protocol, and the
 * general path when it does nothing.
 */
#define LP__LEAVE_THUNK(name) \
  LP__THUNK(name, \
            LP__LEVELS_TO_R10 \
            "\ttestl $" LP__X(LP__SUBS) ", " LP__X(LP__OFF_LEVELS) "(%r10)\n" \
            "\tjz 4f\n" \
            LP__SAVED_CALL(".L" name "_slow", "rax", LP__ARGS_CX_DX, "", "lp__leave_slow") \
            "4:\n" \
            "\tpushq %rax\n" LP__CFA(8) \
            "\tpushq %rdi\n" LP__CFA(8) \
            "\tpushq %rsi\n" LP__CFA(8) \
            "\tmovq %rcx, %rdi\n" \
            "\tmovq %rdx, %rsi\n" \
            "\tcall lp__try_leave\n" \
            "\ttestl %eax, %eax\n" \
            "\tpopq %rsi\n" LP__CFA(-8) \
            "\tpopq %rdi\n" LP__CFA(-8) \
            "\tpopq %rax\n" LP__CFA(-8) \
            "\tjnz .L" name "_slow\n" \
            "\tret $" LP__X(LP__RED_ZONE) "\n")

/* LP_END: the protocol; 0 in rax. */
#define LP__END_FAST(name) \
  "\tcall lp__try_end\n" \
  "\ttestl %eax, %eax\n" \
  "\tjnz .L" name "_slow\n" \
  "\tret $" LP__X(LP__RED_ZONE) "\n"

/*
 * A call of a general path: the six registers the caller keeps and a C
 * function may change saved (first: rcx, or rax for a leave, whose caller
 * gives up rcx and keeps its return value in rax), the arguments moved from
 * where the caller put them (args), the stack aligned, the call, and what
 * it does after the call (after: LP__ZERO_RAX returns 0). The caller has
 * moved its stack pointer 128 bytes down, past its red zone, before the
 * call, and the thunk moves it back as it returns (ret $128).
 */
#define LP__SAVED_CALL(label, first, args, after, target) \
  label ":\n" \
  "\tpushq %rbp\n" \
  "\t.cfi_def_cfa_offset 144\n" \
  "\t.cfi_offset %rbp, -144\n" \
  "\tmovq %rsp, %rbp\n" \
  "\t.cfi_def_cfa_register %rbp\n" \
  "\tpushq %" first "\n\tpushq %rdx\n\tpushq %rsi\n\tpushq %rdi\n" \
  "\tpushq %r8\n\tpushq %r9\n" \
  args \
  "\tandq $-16, %rsp\n" \
  "\tcall " target "\n" \
  after \
  "\tleaq -48(%rbp), %rsp\n" \
  "\tpopq %r9\n\tpopq %r8\n" \
  "\tpopq %rdi\n\tpopq %rsi\n\tpopq %rdx\n\tpopq %" first "\n" \
  "\tpopq %rbp\n" \
  "\t.cfi_def_cfa %rsp, 136\n" \
  "\tret $" LP__X(LP__RED_ZONE) "\n" \
  "\t.cfi_def_cfa_offset 136\n" \
  "\t.cfi_offset 16, -136\n" \
  "\t.cfi_restore %rbp\n"

/*
 * A thunk: its fast part, then the calls of the general paths (body).
 * Its unwind information puts the caller's frame 128 bytes above the
 * return address, so that a backtrace from inside a callback walks through
 * the labelled function.
 */
#define LP__THUNK(name, body) \
  "\t.text\n" \
  "\t.globl " name "\n" \
  "\t.type " name ", @function\n" \
  "\t.p2align 4\n" \
  name ":\n" \
  "\t.cfi_startproc\n" \
  "\t" LP__ENDBR \
  ".cfi_def_cfa_offset 136\n" \
  "\t.cfi_offset 16, -136\n" \
  body \
  "\t.cfi_endproc\n" \
  "\t.size " name ", .-" name "\n"
__asm__(LP__BEGIN_THUNK("lp_impl_enter_thunk", LP__ARGS_SCOPE) LP__BEGIN_THUNK("lp_impl_begin_thunk", LP__ARGS_MANUAL)
            LP__LEAVE_THUNK("lp_impl_leave_thunk")
                LP__THUNK("lp_impl_end_thunk", LP__END_FAST("lp_impl_end_thunk") LP__SAVED_CALL(
                                                   ".Llp_impl_end_thunk_slow", "rcx", "", LP__ZERO_RAX,
                                                   "lp__end_slow")));
#endif
