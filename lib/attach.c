/*
 * attach.c: the registry as a reader outside the process sees it, for
 * `labelprof top PID`.
 *
 * Nothing runs here for that reader: no thread, timer, signal, socket or
 * file descriptor, before, during or after it reads. The process only
 * keeps, beside the registry's list, a table of slots (one per registered
 * thread: a sequence word and the address of the thread's state) behind
 * a descriptor that says how to read it, and an ELF note that says where
 * the descriptor is. The reader copies the slots and the states with
 * process_vm_readv(2). lib/attach_abi.h has the layout and the protocol.
 *
 * Every change to a slot is made under the registry lock (thread.c calls
 * in here with it held): a thread joins, is renamed, or leaves. A change
 * makes the slot's word odd, writes, and makes it even with a release
 * store, so that a reader that finds the same even word before and after
 * its copy of a thread also copied a state that was neither changed nor
 * freed meanwhile: thread.c frees a state only after its slot was emptied.
 *
 * What it costs the program: the descriptor and its first 64 slots (1 KiB
 * of data, on a page untouched until the first thread joins), a few stores
 * when a thread joins, is renamed or leaves, and a block of 256 more slots
 * (4 KiB) for each 256 threads alive at once beyond the first 64. Blocks
 * are never freed: a reader may be reading one. The hot path does not
 * change.
 */
#include "internal.h"

#include "attach_abi.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>

#define FIRST_SLOTS 64
#define BLOCK_SLOTS 256

struct lp__attach_slot {
  uint64_t seq;     /* even when still, odd while it changes */
  uintptr_t thread; /* the lp__thread_t, 0 when free */
};

typedef struct block {
  uint64_t next; /* the next block's address, 0 if none (release) */
  uint64_t reserved;
  lp__attach_slot_t slots[BLOCK_SLOTS];
} block_t;

typedef struct desc {
  lp_attach_header_t h;
  lp__attach_slot_t slots[FIRST_SLOTS];
} desc_t;

/* Hidden: the note's distance to it is fixed when the library is linked. */
__attribute__((used, aligned(64))) desc_t lp__attach_desc = {
    .h =
        {
            .magic = LP_ATTACH_MAGIC,
            .version = LP_ATTACH_VERSION,
            .header_size = sizeof(lp_attach_header_t),
            .lib_version = PACKAGE_VERSION,
            .ptr_size = sizeof(void *),
            .stack_capacity = LP_STACK_CAPACITY,
            .depth_mask = LP_IMPL_DEPTH_MASK,
            .frame_flags = LP_IMPL_TRACED | LP_IMPL_NOTIFIED,
            .thread_word = offsetof(lp__thread_t, hot.word),
            .thread_frames = offsetof(lp__thread_t, hot.frames),
            .thread_tid = offsetof(lp__thread_t, tid),
            .thread_name = offsetof(lp__thread_t, name),
            .name_size = LP__NAME_MAX,
            .site_label = offsetof(lp_site_t, label),
            .slot_size = sizeof(lp__attach_slot_t),
            .slot_seq = offsetof(lp__attach_slot_t, seq),
            .slot_thread = offsetof(lp__attach_slot_t, thread),
            .first_slots = offsetof(desc_t, slots),
            .first_count = FIRST_SLOTS,
            .block_slots = BLOCK_SLOTS,
            .block_slots_at = offsetof(block_t, slots),
        },
};

/*
 * The note: owner "labelprof", LP_ATTACH_NOTE_TYPE, and the distance from
 * its descriptor field to lp__attach_desc. '@' starts a comment in 32-bit
 * ARM's assembler, which writes the section type with '%'.
 */
#if defined(__arm__)
#define NOTE_SECTION_TYPE "%note"
#else
#define NOTE_SECTION_TYPE "@note"
#endif
#if UINTPTR_MAX > 0xffffffffu
#define NOTE_DISTANCE "\t.long 8\n\t.long 0x4c500001\n\t.asciz \"labelprof\"\n\t.balign 4\n1:\t.quad lp__attach_desc - 1b\n"
#else
#define NOTE_DISTANCE "\t.long 4\n\t.long 0x4c500001\n\t.asciz \"labelprof\"\n\t.balign 4\n1:\t.long lp__attach_desc - 1b\n"
#endif
__asm__(".pushsection .note.labelprof,\"a\"," NOTE_SECTION_TYPE "\n"
        "\t.balign 4\n"
        "\t.globl lp__attach_note\n"
        "\t.hidden lp__attach_note\n"
        "lp__attach_note:\n"
        "\t.long 10\n" NOTE_DISTANCE "\t.popsection\n");
extern const char lp__attach_note[];

_Static_assert(sizeof(LP_ATTACH_MAGIC) - 1 == sizeof(((lp_attach_header_t *)0)->magic), "magic is 8 bytes");
_Static_assert(sizeof(PACKAGE_VERSION) <= sizeof(((lp_attach_header_t *)0)->lib_version), "version fits");
_Static_assert(LP_ATTACH_NOTE_TYPE == 0x4c500001u, "the note's type is written in the assembly above");

/* Registry lock: the blocks after the first, and the lowest slot that may be free. */
static block_t *last_block;
static uint32_t lowest_free;

static lp__attach_slot_t *slot_at(uint32_t i) {
  if (i < FIRST_SLOTS) return &lp__attach_desc.slots[i];
  i -= FIRST_SLOTS;
  block_t *b = (block_t *)(uintptr_t)lp__attach_desc.h.next_block;
  for (; i >= BLOCK_SLOTS; i -= BLOCK_SLOTS) b = (block_t *)(uintptr_t)b->next;
  return &b->slots[i];
}

/* A new slot at the end of the table, in a new block if the last is full. NULL out of memory. */
static lp__attach_slot_t *append(void) {
  uint32_t used = lp__attach_desc.h.slots_used;
  if (used >= FIRST_SLOTS && (used - FIRST_SLOTS) % BLOCK_SLOTS == 0) {
    block_t *b = lp__calloc(1, sizeof *b);
    if (!b) return NULL;
    /* Linked with release: a reader that finds the block finds it zeroed. */
    if (last_block)
      __atomic_store_n(&last_block->next, (uint64_t)(uintptr_t)b, __ATOMIC_RELEASE);
    else
      __atomic_store_n(&lp__attach_desc.h.next_block, (uint64_t)(uintptr_t)b, __ATOMIC_RELEASE);
    last_block = b;
  }
  __atomic_store_n(&lp__attach_desc.h.slots_used, used + 1, __ATOMIC_RELEASE);
  return slot_at(used);
}

void lp__attach_change_begin(lp__thread_t *t) {
  lp__attach_slot_t *s = t->attach_slot;
  if (!s) return;
  __atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
  /* The odd word before anything the change writes (a seqlock's writer). */
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

void lp__attach_change_end(lp__thread_t *t) {
  lp__attach_slot_t *s = t->attach_slot;
  if (s) __atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

void lp__attach_join(lp__thread_t *t) {
  /* Keeps the note in a program linked with --gc-sections: this code refers to it. */
  __asm__ __volatile__("" : : "r"(lp__attach_note));
  lp__attach_slot_t *s = NULL;
  uint32_t used = lp__attach_desc.h.slots_used, i = lowest_free;
  for (; i < used; i++) {
    s = slot_at(i);
    if (!s->thread) break;
  }
  if (i == used) s = append();
  lowest_free = i + 1;
  /* Out of memory: the thread is profiled as ever, only not seen from outside. */
  t->attach_slot = s;
  if (!s) return;
  lp__attach_change_begin(t);
  __atomic_store_n(&s->thread, (uintptr_t)t, __ATOMIC_RELAXED);
  lp__attach_change_end(t);
}

void lp__attach_leave(lp__thread_t *t) {
  lp__attach_slot_t *s = t->attach_slot;
  if (!s) return;
  lp__attach_change_begin(t);
  __atomic_store_n(&s->thread, (uintptr_t)0, __ATOMIC_RELAXED);
  lp__attach_change_end(t);
  t->attach_slot = NULL;
  uint32_t i = 0;
  if (s >= lp__attach_desc.slots && s < lp__attach_desc.slots + FIRST_SLOTS) {
    i = (uint32_t)(s - lp__attach_desc.slots);
  } else {
    i = FIRST_SLOTS;
    for (block_t *b = (block_t *)(uintptr_t)lp__attach_desc.h.next_block; b; b = (block_t *)(uintptr_t)b->next) {
      if (s >= b->slots && s < b->slots + BLOCK_SLOTS) {
        i += (uint32_t)(s - b->slots);
        break;
      }
      i += BLOCK_SLOTS;
    }
  }
  if (i < lowest_free) lowest_free = i;
}

int lp__attach_allow(void) {
#ifdef PR_SET_PTRACER
  return prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0 ? 0 : -errno;
#else
  return -EINVAL;
#endif
}
