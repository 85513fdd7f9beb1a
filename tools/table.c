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

int lp_index_reserve(lp__index_t *ix, lp_mem_t *mem, uint32_t n, uint32_t first) {
  uint64_t want = lp__index_wants(ix, n, first);
  if (!want) return 0;
  uint32_t *fresh = want == UINT64_MAX ? NULL : lp_mem_realloc(mem, NULL, 0, (size_t)want * sizeof *fresh);
  if (!fresh) return -1;
  memset(fresh, 0, (size_t)want * sizeof *fresh);
  size_t old = lp__index_bytes(ix);
  lp_mem_free(mem, lp__index_move(ix, fresh, want), old);
  return 1;
}

void lp_index_free(lp__index_t *ix, lp_mem_t *mem) {
  lp_mem_free(mem, ix->slot, lp__index_bytes(ix));
  ix->slot = NULL;
  ix->mask = 0;
  ix->used = 0;
}
