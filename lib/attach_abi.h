/*
 * attach_abi.h: what a process that uses labelprof shows a reader outside
 * it (`labelprof top PID`). Private, never installed; the library
 * (lib/attach.c) and the command (tools/read/attach.c) both include it. It
 * needs nothing but <stdint.h>.
 *
 * How a reader finds it. The library carries an ELF note in a loaded
 * segment (PT_NOTE): owner "labelprof", type LP_ATTACH_NOTE_TYPE, and a
 * descriptor of 8 bytes, a signed 64-bit distance in bytes from the start
 * of that field to the descriptor below (fixed when the library is linked:
 * no relocation). A reader walks the program headers of each object the
 * process has mapped, in the process's memory, so it needs neither the
 * file nor its symbols: a stripped static program, a library replaced on
 * disk since, a process in another mount namespace all work.
 *
 * What it finds. The descriptor starts with a header of this fixed layout.
 * magic and version never move; a reader that does not know the version
 * reads nothing else. Everything else a reader needs, the layout of a
 * thread's state, of a site, of the slots, is given by the header as
 * sizes and offsets taken with offsetof when the library was built, so
 * that the library may change its own structures without a new version;
 * a new version means a new protocol, or a header that grew in a way old
 * readers must not ignore.
 *
 * Slots. Every registered thread has one slot: a sequence word and the
 * address of its state (lp__thread_t), or 0 for a free slot. The first
 * first_count slots follow the header, at first_slots bytes from the
 * descriptor's start; more come in blocks of block_slots slots, each
 * block starting with the address of the next one (0 for none) and its
 * slots at block_slots_at bytes from its start; next_block is the address
 * of the first of them. Slots at or past slots_used were never used.
 *
 * The protocol. A slot changes (a thread joins, is renamed or leaves)
 * under the registry's lock: its sequence word is made odd, the change is
 * written, and the word is made even again with a release store. A
 * thread's state is freed only after its slot was emptied. A reader copies
 * the slots, then what they point at, then the slots again, each copy
 * ordered after the one before (separate reads with a fence between):
 * what it read of a thread holds if that thread's slot is even and
 * identical in both copies. A thread's stack is read as the in-process
 * collector reads it: its word, its frames, its word again, the copy kept
 * only if the word did not change (see labelprof/impl.h). The word's low
 * bits (depth_mask) are the depth; a frame is a site's address with the
 * frame_flags bits set or not; a site's label text is at site_label.
 */
#ifndef LP_ATTACH_ABI_H
#define LP_ATTACH_ABI_H

#include <stdint.h>

#define LP_ATTACH_NOTE_NAME "labelprof"   /* the note's owner, NUL-terminated: 10 bytes */
#define LP_ATTACH_NOTE_TYPE 0x4c500001u   /* "LP" and 1 */
#define LP_ATTACH_MAGIC "lpattach"         /* 8 bytes, no NUL */
#define LP_ATTACH_VERSION 1u

typedef struct lp_attach_header {
  char magic[8];          /* LP_ATTACH_MAGIC */
  uint32_t version;       /* LP_ATTACH_VERSION */
  uint32_t header_size;   /* sizeof(lp_attach_header_t) as the library has it */
  char lib_version[16];   /* the library's version, NUL-terminated, for messages */
  uint32_t ptr_size;      /* sizeof(void *) */
  uint32_t stack_capacity; /* frames a thread's state holds */
  uint64_t depth_mask;    /* the depth's bits in a stack word */
  uint64_t frame_flags;   /* bits of a frame that are flags, not the site's address */
  /* a thread's state: offsets from its address */
  uint32_t thread_word, thread_frames, thread_tid, thread_name;
  uint32_t name_size;     /* bytes of the name, NUL included */
  /* a site: the offset of its label's address */
  uint32_t site_label;
  /* slots */
  uint32_t slot_size, slot_seq, slot_thread;
  uint32_t first_slots, first_count; /* the first slots: offset from the descriptor, count */
  uint32_t block_slots, block_slots_at; /* slots per further block, their offset in it */
  uint32_t slots_used;    /* written with release: slots past it were never used */
  uint32_t reserved;
  uint64_t next_block;    /* the first further block's address, 0 if none (written with release) */
} lp_attach_header_t;

#endif
