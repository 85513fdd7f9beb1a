/*
 * cold.c: a scope's slow paths, called from the inline fast path.
 *
 * labelprof/impl.h inlines only the unrecorded push and the matched pop.
 * Everything else a scope or a manual pair may need (recording its begin
 * and end, notifying subscribers, registering a new thread, a full stack,
 * healing the stack) starts here: lp_impl_enter_cold() and its three
 * siblings. On x86-64 the program reaches them through the thunks below,
 * which save every general-purpose register but rax, so that the labelled
 * function keeps its values in whatever registers suit it and saves none of
 * them on its fast path; elsewhere it calls the C functions directly.
 */
#include "internal.h"

#include <stdlib.h>

static inline uint64_t enter_cold(const lp_site_t *site, int manual) {
  uint32_t levels = LP_IMPL_LOAD_RELAXED(lp_impl_levels);
  /* Recording, or subscribers listening (every level bit set); else a push that may find a new thread or a full stack. */
  if (site->level & levels) return lp_impl_enter_traced(site, levels, manual);
  return lp_impl_push((uintptr_t)site);
}

uint64_t lp_impl_enter_cold(const lp_site_t *site) { return enter_cold(site, 0); }

uint64_t lp_impl_begin_cold(const lp_site_t *site) {
  (void)enter_cold(site, 1);
  return 0;
}

uint64_t lp_impl_leave_cold(const lp_site_t *site, uint64_t word) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint64_t diff = (w ^ word) & LP_IMPL_DEPTH_MASK;
  if (w == word) { /* the inline path's cases, should a caller come here with one */
    LP_IMPL_STORE_RELEASE(t->word, LP_IMPL_POPPED(word));
    return 0;
  }
  if (diff == 0) {
    LP_IMPL_STORE_RELEASE(t->word, LP_IMPL_POPPED(w));
    return 0;
  }
  if (LP_IMPL_LIKELY(diff == LP_IMPL_TRACED_MARK)) { /* it recorded a begin, and the stack is as it should be */
    uint32_t d = ((uint32_t)w & LP_IMPL_DEPTH_MASK) - 1;
    /* ...unless a stray LP_END ended it and another label took its place: the slow path sorts that out. */
    if (LP_IMPL_LIKELY(d >= LP_STACK_CAPACITY ||
                       LP_IMPL_LOAD_RELAXED(t->frames[d]) == ((uintptr_t)site | LP_IMPL_TRACED))) {
      LP_IMPL_STORE_RELEASE(t->word, LP_IMPL_POPPED(w));
      lp_impl_end_event(t, (uintptr_t)site, d);
      return 0;
    }
    /* Its begin reached subscribers: the usual end. */
    if (LP_IMPL_LOAD_RELAXED(t->frames[d]) == ((uintptr_t)site | LP_IMPL_NOTIFIED) && lp_impl_leave_subs(t, site, d))
      return 0;
  }
  lp_impl_leave_slow(site, word); /* a stack to heal */
  return 0;
}

uint64_t lp_impl_end_cold(void) {
  lp_impl_thread_t *t = lp_impl_self;
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  uintptr_t tag;
  /* d - 1 wraps for d == 0: empty stack, deep stack and unregistered thread all go slow. */
  if (LP_IMPL_UNLIKELY(d - 1u >= LP_STACK_CAPACITY)) {
    lp_impl_end_slow();
    return 0;
  }
  tag = LP_IMPL_LOAD_RELAXED(t->frames[d - 1]);
  if (tag & (LP_IMPL_TRACED | LP_IMPL_NOTIFIED)) {
    if (tag & LP_IMPL_NOTIFIED) { /* the end callbacks run before the pop, then the end is recorded */
      if (!(tag & LP_IMPL_TRACED) &&
          lp_impl_leave_subs(t, (const lp_site_t *)(tag & ~(uintptr_t)LP_IMPL_NOTIFIED), d - 1))
        return 0;
      lp_impl_end_notify(tag, d - 1);
      return 0;
    }
    LP_IMPL_STORE_RELEASE(t->word, LP_IMPL_POPPED(w));
    lp_impl_end_event(t, tag & ~(uintptr_t)LP_IMPL_TRACED, d - 1);
    return 0;
  }
  LP_IMPL_STORE_RELEASE(t->word, LP_IMPL_POPPED(w));
  return 0;
}

void lp_impl_never(void) {
  fputs("labelprof: internal error: a label's cold path returned LP_IMPL_NEVER\n",
        stderr);
  abort();
}

#if defined(__x86_64__) && !defined(__ILP32__)
/*
 * The thunks the inline paths call (see labelprof/impl.h). The caller has
 * moved its stack pointer 128 bytes down, past its red zone, before the
 * call, and the thunk moves it back as it returns (ret $128). The caller
 * keeps every register but rax, r10, r11, the flags and the vector and x87
 * registers, which it declares changed (r10 and r11: the PLT's lazy binding
 * may use them before the thunk runs). The site comes in rax and the word
 * in rdx, registers that lazy binding keeps and that the caller can fill on
 * its cold branch without moving the values its fast path keeps in the
 * argument registers. A thunk saves rcx, rdx, rsi, rdi, r8 and r9, moves
 * its arguments where the C function takes them, aligns the stack and
 * calls it. Its unwind
 * information puts the caller's frame 128 bytes above the return address,
 * so that a backtrace from inside a callback walks through the labelled
 * function.
 */
/* The thunks call these, within the library: no PLT, no interposition. */
#define LP__HIDDEN_ALIAS(name, of) extern __typeof__(of) name __attribute__((alias(#of), visibility("hidden")))
LP__HIDDEN_ALIAS(lp__enter_cold, lp_impl_enter_cold);
LP__HIDDEN_ALIAS(lp__begin_cold, lp_impl_begin_cold);
LP__HIDDEN_ALIAS(lp__leave_cold, lp_impl_leave_cold);
LP__HIDDEN_ALIAS(lp__end_cold, lp_impl_end_cold);
#ifdef __CET__
#define LP__ENDBR "endbr64\n\t"
#else
#define LP__ENDBR ""
#endif
#define LP__THUNK(name, target) \
  "\t.text\n" \
  "\t.globl " name "\n" \
  "\t.type " name ", @function\n" \
  "\t.p2align 4\n" \
  name ":\n" \
  "\t.cfi_startproc\n" \
  "\t" LP__ENDBR \
  ".cfi_def_cfa_offset 136\n" \
  "\t.cfi_offset 16, -136\n" \
  "\tpushq %rbp\n" \
  "\t.cfi_def_cfa_offset 144\n" \
  "\t.cfi_offset %rbp, -144\n" \
  "\tmovq %rsp, %rbp\n" \
  "\t.cfi_def_cfa_register %rbp\n" \
  "\tpushq %rcx\n\tpushq %rdx\n\tpushq %rsi\n\tpushq %rdi\n" \
  "\tpushq %r8\n\tpushq %r9\n" \
  "\tmovq %rax, %rdi\n\tmovq %rdx, %rsi\n" \
  "\tandq $-16, %rsp\n" \
  "\tcall " target "\n" \
  "\tleaq -48(%rbp), %rsp\n" \
  "\tpopq %r9\n\tpopq %r8\n" \
  "\tpopq %rdi\n\tpopq %rsi\n\tpopq %rdx\n\tpopq %rcx\n" \
  "\tpopq %rbp\n" \
  "\t.cfi_def_cfa %rsp, 136\n" \
  "\tret $128\n" \
  "\t.cfi_endproc\n" \
  "\t.size " name ", .-" name "\n"
__asm__(LP__THUNK("lp_impl_enter_thunk", "lp__enter_cold") LP__THUNK("lp_impl_begin_thunk", "lp__begin_cold")
            LP__THUNK("lp_impl_leave_thunk", "lp__leave_cold") LP__THUNK("lp_impl_end_thunk", "lp__end_cold"));
#endif
