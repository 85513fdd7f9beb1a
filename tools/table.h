/*
 * table.h: the command's tables (private, never installed): memory counted
 * against a cap (lp_mem_t), and the one small hash table every table of
 * entries is found through: lib/index.h's lp__index_t, the library's own,
 * with its slots counted in an lp_mem_t here (lp_index_reserve).
 *
 *   for (uint32_t at, e = lp__index_first(&ix, h, &at); e; e = lp__index_next(&ix, &at))
 *     if (same(entries[e - 1], key)) return e - 1;
 *   switch (lp_index_reserve(&ix, mem, n, 64)) {  // n entries already there
 *   case -1: return out_of_memory;
 *   case 1: for (i = 0; i < n; i++) lp__index_put(&ix, hash(entries[i]), i);
 *   }
 *   lp__index_put(&ix, h, n);                      // then the new one
 */
#ifndef LP_TOOLS_TABLE_H
#define LP_TOOLS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index.h"

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

/*
 * Room for one more entry. When the slots are half used, they become twice
 * as many (first, a power of two, to begin with; at least twice n + 1),
 * counted in mem, all empty, and 1 is returned: the caller puts its n
 * entries again, then the new one. 0 when there is room already; -1 when
 * the slots cannot be had (the index stays as it was).
 */
int lp_index_reserve(lp__index_t *ix, lp_mem_t *mem, uint32_t n, uint32_t first);

/* Frees the slots, counted in mem (NULL: not counted); the index is empty. */
void lp_index_free(lp__index_t *ix, lp_mem_t *mem);

#endif
