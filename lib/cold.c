/*
 * cold.c: a scope's slow paths, called from the inline fast path.
 *
 * labelprof/impl.h inlines only the unrecorded push and the matched pop.
 * Everything else a scope or a manual pair may need (recording its begin
 * and end, notifying subscribers, registering a new thread, a full stack,
 * healing the stack) starts here: lp_impl_enter_cold() and its three
 * siblings. On x86-64 the program reaches them through the thunks below,
 * which save every general-purpose register but rax (the enter's and the
 * begin's) or rcx (the leave's), so that the labelled function keeps its
 * values in whatever registers suit it and saves none of them on its fast
 * path; elsewhere it calls the C functions directly.
 */
#include "internal.h"

#include <stddef.h>
#include <stdlib.h>


uint64_t lp_impl_enter_cold(const lp_site_t *site) { return lp_impl_enter_cold_in(site, 0); }

uint64_t lp_impl_begin_cold(const lp_site_t *site) {
  (void)lp_impl_enter_cold_in(site, 1);
  return 0;
}

uint64_t lp_impl_leave_cold(const lp_site_t *site, uint64_t word) { return lp_impl_leave_cold_in(site, word); }

uint64_t lp_impl_end_cold(void) { return lp_impl_end_cold_in(); }

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
 * keeps every register but r10, r11, the flags and the vector and x87
 * registers, which it declares changed (r10 and r11: the PLT's lazy binding
 * may use them before the thunk runs), and the one that carries the site:
 * rax for an enter or a begin, which return their word in it, rcx for a
 * leave, whose word comes in rdx. These are registers that lazy binding
 * keeps and that the caller can fill on its cold branch without moving the
 * values its fast path keeps in the argument registers; a leave keeps rax,
 * where its caller's return value usually is when the scope ends. A thunk
 * saves rcx, rdx, rsi, rdi, r8, r9 and rax, moves its arguments where the
 * C function takes them, aligns the stack and calls it. Its unwind
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
/*
 * The recorded scope, in the thunks themselves: a begin or an end recorded
 * with the CPU's counter into room the chunk has, and a push once a
 * discard budget is spent, are what lp_impl_enter_traced(),
 * lp_impl_end_event() and the leave's usual case do in C, written here
 * with the three scratch registers the caller gives up and two or three
 * saved ones, so that recording costs a call and a return more than it did
 * inline, not the C function's entry. Anything else (subscribers, no
 * chunk, a full chunk or stack, CLOCK_MONOTONIC, a stack to heal) goes to
 * the C function, before anything is stored. The offsets are checked
 * against the C layout below.
 */
#define LP__S(x) #x
#define LP__X(x) LP__S(x)
#define LP__OFF_LEVEL 28
#define LP__OFF_FRAMES 8
#define LP__OFF_TCUR 520
#define LP__OFF_TLIM 528
#define LP__OFF_TEND 536
#define LP__OFF_DROPPED 544
_Static_assert(offsetof(lp_site_t, level) == LP__OFF_LEVEL, "site level offset");
_Static_assert(offsetof(lp_impl_thread_t, word) == 0, "word offset");
_Static_assert(offsetof(lp_impl_thread_t, frames) == LP__OFF_FRAMES, "frames offset");
_Static_assert(offsetof(lp_impl_thread_t, tcur) == LP__OFF_TCUR, "tcur offset");
_Static_assert(offsetof(lp_impl_thread_t, tlim) == LP__OFF_TLIM, "tlim offset");
_Static_assert(offsetof(lp_impl_thread_t, tend) == LP__OFF_TEND, "tend offset");
_Static_assert(offsetof(lp_impl_thread_t, dropped) == LP__OFF_DROPPED, "dropped offset");
_Static_assert(sizeof(lp_impl_event_t) == 16 && LP_STACK_CAPACITY == 64, "event size, stack capacity");
_Static_assert(LP_IMPL_SPENT == 0x80000000u && LP_IMPL_SUBS == 0x40000000u && LP_IMPL_TRACED_MARK == 0x8000u &&
                   LP_IMPL_COUNT_ONE == 0x10000u && LP_IMPL_TRACED == 1u && LP_IMPL_EV_END == 1u,
               "the constants the thunks use");
#define LP__CFA(n) "\t.cfi_adjust_cfa_offset " #n "\n"

/*
 * A scope's or a manual pair's begin (site in rax): recorded, or pushed and
 * counted as dropped once the budget is spent. Returns the word in rax.
 */
#define LP__ENTER_FAST(slow) \
  "\tmovq lp_impl_levels@GOTPCREL(%rip), %r10\n" \
  "\tmovl (%r10), %r10d\n" \
  "\tmovl " LP__X(LP__OFF_LEVEL) "(%rax), %r11d\n" \
  "\ttestl %r10d, %r11d\n" \
  "\tjz " slow "\n"                     /* not recorded: a new thread or a full stack */ \
  "\ttestl $0x40000000, %r10d\n" \
  "\tjnz " slow "\n"                    /* subscribers */ \
  "\tpushq %rcx\n" LP__CFA(8) \
  "\tpushq %rdx\n" LP__CFA(8) \
  "\tmovq lp_impl_self@gottpoff(%rip), %rcx\n" \
  "\tmovq %fs:(%rcx), %rcx\n"           /* t */ \
  "\tmovq (%rcx), %r11\n"               /* w */ \
  "\tmovzwl %r11w, %edx\n"              /* d */ \
  "\tcmpl $63, %edx\n" \
  "\tja 8f\n" \
  "\ttestl %r10d, %r10d\n" \
  "\tjs 7f\n"                           /* LP_IMPL_SPENT */ \
  "\tmovq lp_impl_clock_counter@GOTPCREL(%rip), %r10\n" \
  "\tcmpl $0, (%r10)\n" \
  "\tje 8f\n" \
  "\tmovq " LP__X(LP__OFF_TCUR) "(%rcx), %r10\n" /* e */ \
  "\tcmpq " LP__X(LP__OFF_TLIM) "(%rcx), %r10\n" \
  "\tjae 8f\n" \
  "\tsubq $16, " LP__X(LP__OFF_TLIM) "(%rcx)\n" \
  "\taddq $0x10001, %r11\n"             /* the word to publish */ \
  "\tpushq %r11\n" LP__CFA(8) \
  "\tleaq 1(%rax), %r11\n"              /* the frame: site | LP_IMPL_TRACED */ \
  "\tmovq %r11, " LP__X(LP__OFF_FRAMES) "(%rcx,%rdx,8)\n" \
  "\tshlq $56, %rdx\n" \
  "\torq %rax, %rdx\n"                  /* the tag: site | begin | depth << 56 */ \
  "\tmovq %rdx, 8(%r10)\n" \
  "\trdtsc\n" \
  "\tshlq $32, %rdx\n" \
  "\torq %rdx, %rax\n" \
  "\tmovq %rax, (%r10)\n" \
  "\taddq $16, %r10\n" \
  "\tmovq %r10, " LP__X(LP__OFF_TCUR) "(%rcx)\n" \
  "\tpopq %rax\n" LP__CFA(-8) \
  "\tmovq %rax, (%rcx)\n" \
  "\txorq $0x8000, %rax\n"              /* marked: its end leaves the inline path */ \
  "\tpopq %rdx\n" LP__CFA(-8) \
  "\tpopq %rcx\n" LP__CFA(-8) \
  "\tret $128\n" \
  LP__CFA(16) \
  "7:\n"                                /* spent: count the drop, push unrecorded */ \
  "\tincq " LP__X(LP__OFF_DROPPED) "(%rcx)\n" \
  "\tmovq %rax, " LP__X(LP__OFF_FRAMES) "(%rcx,%rdx,8)\n" \
  "\tleaq 0x10001(%r11), %rax\n" \
  "\tmovq %rax, (%rcx)\n" \
  "\tpopq %rdx\n" LP__CFA(-8) \
  "\tpopq %rcx\n" LP__CFA(-8) \
  "\tret $128\n" \
  LP__CFA(16) \
  "8:\n" \
  "\tpopq %rdx\n" LP__CFA(-8) \
  "\tpopq %rcx\n" LP__CFA(-8) \
  "\tjmp " slow "\n"

/*
 * A scope's end (site in rcx, its word in rdx; rax is kept, as the
 * caller's return value may be in it) whose begin was recorded, the stack
 * as it should be: the pop, then the end event into the room its begin
 * kept, which it gives back.
 */
#define LP__LEAVE_FAST(slow) \
  "\tmovq lp_impl_self@gottpoff(%rip), %r10\n" \
  "\tmovq %fs:(%r10), %r10\n"           /* t */ \
  "\tmovq (%r10), %r11\n"               /* w */ \
  "\txorq %rdx, %r11\n" \
  "\tcmpw $0x8000, %r11w\n" \
  "\tjne " slow "\n"                    /* not a recorded begin on an unchanged stack */ \
  "\tpushq %rax\n" LP__CFA(8) \
  "\tpushq %rcx\n" LP__CFA(8) \
  "\tpushq %rdx\n" LP__CFA(8) \
  "\tpushq %rsi\n" LP__CFA(8) \
  "\tmovq %rcx, %rax\n"                 /* the site */ \
  "\tmovq (%r10), %r11\n" \
  "\tmovzwl %r11w, %ecx\n" \
  "\tsubl $1, %ecx\n"                   /* d */ \
  "\tcmpl $63, %ecx\n" \
  "\tja 8f\n" \
  "\tleaq 1(%rax), %rsi\n" \
  "\tcmpq %rsi, " LP__X(LP__OFF_FRAMES) "(%r10,%rcx,8)\n" \
  "\tjne 8f\n"                          /* a stray LP_END, and another label in its place */ \
  "\tmovq lp_impl_clock_counter@GOTPCREL(%rip), %rsi\n" \
  "\tcmpl $0, (%rsi)\n" \
  "\tje 8f\n" \
  "\tmovq " LP__X(LP__OFF_TCUR) "(%r10), %rsi\n" /* e */ \
  "\tcmpq " LP__X(LP__OFF_TEND) "(%r10), %rsi\n" \
  "\tjae 8f\n" \
  "\tsubq $1, %r11\n" \
  "\tmovq %r11, (%r10)\n"               /* the pop */ \
  "\tshlq $56, %rcx\n" \
  "\torq %rax, %rcx\n" \
  "\torq $1, %rcx\n"                    /* the tag: site | end | depth << 56 */ \
  "\tmovq %rcx, 8(%rsi)\n" \
  "\trdtsc\n" \
  "\tshlq $32, %rdx\n" \
  "\torq %rdx, %rax\n" \
  "\tmovq %rax, (%rsi)\n" \
  "\tmovq " LP__X(LP__OFF_TLIM) "(%r10), %rax\n" \
  "\taddq $16, %rax\n" \
  "\tcmpq " LP__X(LP__OFF_TEND) "(%r10), %rax\n" \
  "\tjae 1f\n" \
  "\tmovq %rax, " LP__X(LP__OFF_TLIM) "(%r10)\n" \
  "1:\n" \
  "\taddq $16, %rsi\n" \
  "\tmovq %rsi, " LP__X(LP__OFF_TCUR) "(%r10)\n" \
  "\tpopq %rsi\n" LP__CFA(-8) \
  "\tpopq %rdx\n" LP__CFA(-8) \
  "\tpopq %rcx\n" LP__CFA(-8) \
  "\tpopq %rax\n" LP__CFA(-8) \
  "\tret $128\n" \
  LP__CFA(32) \
  "8:\n" \
  "\tpopq %rsi\n" LP__CFA(-8) \
  "\tpopq %rdx\n" LP__CFA(-8) \
  "\tpopq %rcx\n" LP__CFA(-8) \
  "\tpopq %rax\n" LP__CFA(-8) \
  "\tjmp " slow "\n"

/*
 * A thunk: its fast part (may be empty), then the call of the C function
 * for everything else, with the arguments moved from where the caller put
 * them (args), and what it does after the call (after: LP__KEEP_RAX gives
 * the caller back its rax).
 */
#define LP__THUNK(name, fast, args, after, target) \
  "\t.text\n" \
  "\t.globl " name "\n" \
  "\t.type " name ", @function\n" \
  "\t.p2align 4\n" \
  name ":\n" \
  "\t.cfi_startproc\n" \
  "\t" LP__ENDBR \
  ".cfi_def_cfa_offset 136\n" \
  "\t.cfi_offset 16, -136\n" \
  fast \
  ".L" name "_slow:\n" \
  "\tpushq %rbp\n" \
  "\t.cfi_def_cfa_offset 144\n" \
  "\t.cfi_offset %rbp, -144\n" \
  "\tmovq %rsp, %rbp\n" \
  "\t.cfi_def_cfa_register %rbp\n" \
  "\tpushq %rcx\n\tpushq %rdx\n\tpushq %rsi\n\tpushq %rdi\n" \
  "\tpushq %r8\n\tpushq %r9\n" \
  "\tpushq %rax\n" \
  args \
  "\tandq $-16, %rsp\n" \
  "\tcall " target "\n" \
  after \
  "\tleaq -48(%rbp), %rsp\n" \
  "\tpopq %r9\n\tpopq %r8\n" \
  "\tpopq %rdi\n\tpopq %rsi\n\tpopq %rdx\n\tpopq %rcx\n" \
  "\tpopq %rbp\n" \
  "\t.cfi_def_cfa %rsp, 136\n" \
  "\tret $128\n" \
  "\t.cfi_endproc\n" \
  "\t.size " name ", .-" name "\n"
#define LP__ARGS_AX_DX "\tmovq %rax, %rdi\n\tmovq %rdx, %rsi\n"
#define LP__ARGS_CX_DX "\tmovq %rcx, %rdi\n\tmovq %rdx, %rsi\n"
#define LP__KEEP_RAX "\tmovq -56(%rbp), %rax\n"
__asm__(LP__THUNK("lp_impl_enter_thunk", LP__ENTER_FAST(".Llp_impl_enter_thunk_slow"), LP__ARGS_AX_DX, "",
                  "lp__enter_cold")
            LP__THUNK("lp_impl_begin_thunk", LP__ENTER_FAST(".Llp_impl_begin_thunk_slow"), LP__ARGS_AX_DX, "",
                      "lp__begin_cold")
                LP__THUNK("lp_impl_leave_thunk", LP__LEAVE_FAST(".Llp_impl_leave_thunk_slow"), LP__ARGS_CX_DX, LP__KEEP_RAX,
                          "lp__leave_cold")
                    LP__THUNK("lp_impl_end_thunk", "", LP__ARGS_AX_DX, "", "lp__end_cold"));
#endif
