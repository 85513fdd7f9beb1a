/*
 * table.c: memory counted against a cap, and the index of the command's
 * tables (see table.h).
 */
#include "config.h"

#include "table.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK_OVERHEAD 16 /* what the allocator keeps beside each block, about */

void *lp_mem_realloc(lp_mem_t *m, void *p, size_t old, size_t size) {
  if (!m) return realloc(p, size);
  uint64_t drop = p ? old : 0, add = size + (p ? 0 : BLOCK_OVERHEAD);
  if (m->cap && m->used - drop + add > m->cap) {
    m->over = true;
    return NULL;
  }
  void *q = realloc(p, size);
  if (!q) return NULL;
  m->used = m->used - drop + add;
  return q;
}

void lp_mem_free(lp_mem_t *m, void *p, size_t size) {
  if (!p) return;
  if (m) m->used -= size + BLOCK_OVERHEAD;
  free(p);
}

int lp_mem_charge(lp_mem_t *m, uint64_t *counted, uint64_t now) {
  if (!m) return 0;
  if (now > *counted && m->cap && m->used - *counted + now > m->cap) {
    m->over = true;
    return -1;
  }
  m->used = m->used - *counted + now;
  *counted = now;
  return 0;
}

int lp_index_reserve(lp_index_t *ix, lp_mem_t *mem, uint32_t n, uint32_t first) {
  uint64_t slots = ix->mask ? (uint64_t)ix->mask + 1 : 0;
  if ((uint64_t)(ix->used + 1) * 2 <= slots) return 0;
  slots = slots ? slots * 2 : first;
  while (slots < 2 * ((uint64_t)n + 1)) slots *= 2;
  if (slots > (uint64_t)1 << 31) return -1; /* positions + 1 must fit a slot */
  uint32_t *fresh = lp_mem_realloc(mem, NULL, 0, (size_t)slots * sizeof *fresh);
  if (!fresh) return -1;
  memset(fresh, 0, (size_t)slots * sizeof *fresh);
  lp_index_free(ix, mem);
  ix->slot = fresh;
  ix->mask = (uint32_t)(slots - 1);
  return 1;
}

void lp_index_clear(lp_index_t *ix) {
  if (ix->slot) memset(ix->slot, 0, lp_index_bytes(ix));
  ix->used = 0;
}

void lp_index_free(lp_index_t *ix, lp_mem_t *mem) {
  if (ix->slot) lp_mem_free(mem, ix->slot, lp_index_bytes(ix));
  ix->slot = NULL;
  ix->mask = 0;
  ix->used = 0;
}
