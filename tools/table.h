/*
 * table.h: the command's tables (private, never installed): memory counted
 * against a cap (lp_mem_t), and the one small hash table every table of
 * entries is found through (lp_index_t).
 *
 * lp_index_t does not hold entries, only where they are: the caller keeps
 * its entries in an array of its own, in the order it made them, and the
 * index maps a hash of an entry's key to its position. Open addressing
 * over a power of two of slots, each an entry's position + 1 (0: empty),
 * linear probing, never more than half of them used, so that a lookup
 * looks at few. A lookup walks the slots from its key's hash and compares
 * the entries it meets, so an entry may also sit under a key it no longer
 * has (a stale key finds nothing). Entries are never removed one by one;
 * lp_index_clear() empties the index to put them again.
 *
 *   for (uint32_t at, e = lp_index_first(&ix, h, &at); e; e = lp_index_next(&ix, &at))
 *     if (same(entries[e - 1], key)) return e - 1;
 *   switch (lp_index_reserve(&ix, mem, n, 64)) {  // n entries already there
 *   case -1: return out_of_memory;
 *   case 1: for (i = 0; i < n; i++) lp_index_put(&ix, hash(entries[i]), i);
 *   }
 *   lp_index_put(&ix, h, n);                      // then the new one
 */
#ifndef LP_TOOLS_TABLE_H
#define LP_TOOLS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Memory held, counted against a cap (--max-memory): the views' tables and
 * the readers' own (their buffers, strings, sequences, tracks), with a word
 * of the allocator's per block. An allocation that would take `used` past
 * `cap` is refused, and the reading stops with a message at its position
 * (lp_mem_fail, reader.h). Only the input layer's fixed buffers (under 1
 * MiB) are not counted.
 */
typedef struct lp_mem {
  uint64_t used;
  uint64_t cap; /* 0: no cap */
  bool over;    /* an allocation was refused for the cap */
} lp_mem_t;

/* realloc, counted in m (NULL: not counted); old is p's size. NULL when refused or out of memory. */
void *lp_mem_realloc(lp_mem_t *m, void *p, size_t old, size_t size);
void lp_mem_free(lp_mem_t *m, void *p, size_t size);
/*
 * A table allocated elsewhere, counted in m: *counted (what m holds of it so
 * far) becomes now. 0, or -1 when that would pass the cap (m->over is set
 * and nothing changes). m NULL: 0.
 */
int lp_mem_charge(lp_mem_t *m, uint64_t *counted, uint64_t now);

/* A 64-bit key mixed down to 32 bits (MurmurHash3's finalizer): keys here are small counters, tids, uuids. */
static inline uint32_t lp_hash64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (uint32_t)x;
}

typedef struct lp_index {
  uint32_t *slot; /* an entry's position + 1; 0: empty */
  uint32_t mask;  /* the slots less one; 0 while there are none */
  uint32_t used;  /* slots taken */
} lp_index_t;

/* The first slot of hash h's walk (*at): its entry + 1, 0 when the walk ends there (or the index is empty). */
static inline uint32_t lp_index_first(const lp_index_t *ix, uint32_t h, uint32_t *at) {
  if (!ix->mask) return 0;
  *at = h & ix->mask;
  return ix->slot[*at];
}

/* The walk's next slot: its entry + 1, 0 at the end of the walk. */
static inline uint32_t lp_index_next(const lp_index_t *ix, uint32_t *at) {
  *at = (*at + 1) & ix->mask;
  return ix->slot[*at];
}

/*
 * Room for one more entry. When the slots are half used, they become twice
 * as many (first, a power of two, to begin with; at least twice n + 1),
 * counted in mem, all empty, and 1 is returned: the caller puts its n
 * entries again, then the new one. 0 when there is room already; -1 when
 * the slots cannot be had (the index stays as it was).
 */
int lp_index_reserve(lp_index_t *ix, lp_mem_t *mem, uint32_t n, uint32_t first);

/* Entry pos under hash h (after lp_index_reserve). */
static inline void lp_index_put(lp_index_t *ix, uint32_t h, uint32_t pos) {
  uint32_t at = h & ix->mask;
  while (ix->slot[at]) at = (at + 1) & ix->mask;
  ix->slot[at] = pos + 1;
  ix->used++;
}

/* Empties the index (its slots stay, to put the entries again). */
void lp_index_clear(lp_index_t *ix);
void lp_index_free(lp_index_t *ix, lp_mem_t *mem);
/* The bytes its slots hold. */
static inline size_t lp_index_bytes(const lp_index_t *ix) {
  return ix->mask ? ((size_t)ix->mask + 1) * sizeof *ix->slot : 0;
}

#endif
