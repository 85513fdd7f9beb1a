/*
 * index.h: the one small hash table of the library and the command (private,
 * never installed), shared as track_lane.h is. Header only, with no
 * allocation of its own, so that the library (lp__malloc), the pprof
 * encoder the command also builds (libc) and the command's tables (counted
 * in lp_mem_t, tools/table.h) all use it.
 *
 * An index does not hold entries, only where they are: the caller keeps its
 * entries in an array of its own, in the order it made them, and the index
 * maps a hash of an entry's key to its position. Open addressing over a
 * power of two of slots, each an entry's position + 1 (0: empty), linear
 * probing, never more than half of them used. A lookup walks the slots
 * from its key's hash and the caller compares the entries it meets, so an
 * entry may also sit under a key it no longer has (a stale key finds
 * nothing). Entries are never removed one by one: lp__index_clear() empties
 * the index to put them again.
 *
 *   for (uint32_t at, e = lp__index_first(&ix, h, &at); e; e = lp__index_next(&ix, &at))
 *     if (same(entries[e - 1], key)) return e - 1;
 *   uint64_t want = lp__index_wants(&ix, n, 64);  // n entries already there
 *   if (want) {
 *     uint32_t *fresh = calloc(want, sizeof *fresh);
 *     if (!fresh) return -ENOMEM;
 *     free(lp__index_move(&ix, fresh, want));
 *     for (i = 0; i < n; i++) lp__index_put(&ix, hash(entries[i]), i);
 *   }
 *   lp__index_put(&ix, h, n);                     // then the new one
 */
#ifndef LP_INDEX_H
#define LP_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A 64-bit key mixed down to 32 bits (MurmurHash3's finalizer): keys are often small counters, tids, ids. */
static inline uint32_t lp__hash64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (uint32_t)x;
}

/*
 * The home slot, under mask, of a pointer kept as the key of a table of its
 * own (the exports' tables of sites and names, which keep the key and its
 * value in the slot): its alignment's zero bits dropped, then Fibonacci
 * hashing.
 */
static inline uint32_t lp__ptr_home(const void *p, uint32_t mask) {
  return (uint32_t)(((uintptr_t)p >> 3) * 0x9e3779b1u) & mask;
}

typedef struct lp__index {
  uint32_t *slot; /* an entry's position + 1; 0: empty */
  uint32_t mask;  /* the slots less one; 0 while there are none */
  uint32_t used;  /* slots taken */
} lp__index_t;

/* The first slot of hash h's walk (*at): its entry + 1, 0 when the walk ends there (or the index is empty). */
static inline uint32_t lp__index_first(const lp__index_t *ix, uint32_t h, uint32_t *at) {
  if (!ix->mask) return 0;
  *at = h & ix->mask;
  return ix->slot[*at];
}

/* The walk's next slot: its entry + 1, 0 at the end of the walk. */
static inline uint32_t lp__index_next(const lp__index_t *ix, uint32_t *at) {
  *at = (*at + 1) & ix->mask;
  return ix->slot[*at];
}

/* The bytes its slots hold. */
static inline size_t lp__index_bytes(const lp__index_t *ix) {
  return ix->mask ? ((size_t)ix->mask + 1) * sizeof *ix->slot : 0;
}

/*
 * 0 when the index has room for one more entry; else the slots it should
 * move to (first, a power of two, to begin with, then twice as many; at
 * least twice n + 1, n the entries there are), or UINT64_MAX when that
 * would be more than 2^31.
 */
static inline uint64_t lp__index_wants(const lp__index_t *ix, uint32_t n, uint32_t first) {
  uint64_t slots = ix->mask ? (uint64_t)ix->mask + 1 : 0;
  if ((uint64_t)(ix->used + 1) * 2 <= slots) return 0;
  slots = slots ? slots * 2 : first;
  while (slots < 2 * ((uint64_t)n + 1)) slots *= 2;
  return slots > (uint64_t)1 << 31 ? UINT64_MAX : slots;
}

/*
 * The index now uses fresh (count slots, all 0, count a power of two) and is
 * empty: the caller puts its entries again. Returns the old slots, for the
 * caller to free (NULL if there were none).
 */
static inline uint32_t *lp__index_move(lp__index_t *ix, uint32_t *fresh, uint64_t count) {
  uint32_t *old = ix->slot;
  ix->slot = fresh;
  ix->mask = (uint32_t)(count - 1);
  ix->used = 0;
  return old;
}

/* Entry pos under hash h (where there is room: after lp__index_wants said 0, or a move). */
static inline void lp__index_put(lp__index_t *ix, uint32_t h, uint32_t pos) {
  uint32_t at = h & ix->mask;
  while (ix->slot[at]) at = (at + 1) & ix->mask;
  ix->slot[at] = pos + 1;
  ix->used++;
}

/* Empties the index (its slots stay, to put the entries again). */
static inline void lp__index_clear(lp__index_t *ix) {
  if (ix->slot) memset(ix->slot, 0, lp__index_bytes(ix));
  ix->used = 0;
}

#endif
