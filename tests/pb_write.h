/*
 * pb_write.h: a protobuf writer for traces made by the tests and the
 * benchmarks (varints, length-delimited fields), into a buffer that grows.
 * An allocation that fails sets `failed` and writes nothing more; the
 * caller checks it once, at the end.
 */
#ifndef LP_PB_WRITE_H
#define LP_PB_WRITE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pbw {
  unsigned char *b;
  size_t n, cap;
  int failed;
} pbw_t;

static inline void pbw_bytes(pbw_t *p, const void *d, size_t n) {
  if (p->failed || n == 0) return;
  if (p->n + n > p->cap) {
    size_t cap = (p->n + n) * 2;
    unsigned char *b = realloc(p->b, cap);
    if (!b) {
      p->failed = 1;
      return;
    }
    p->b = b;
    p->cap = cap;
  }
  memcpy(p->b + p->n, d, n);
  p->n += n;
}

static inline void pbw_varint(pbw_t *p, uint64_t v) {
  unsigned char b[10];
  size_t n = 0;
  do {
    b[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  pbw_bytes(p, b, n);
}

static inline void pbw_uint(pbw_t *p, unsigned field, uint64_t v) {
  pbw_varint(p, (uint64_t)field << 3);
  pbw_varint(p, v);
}

/* Field `field` holding what inner holds (a message or a string); inner is emptied, its memory kept for reuse. */
static inline void pbw_sub(pbw_t *p, unsigned field, pbw_t *inner) {
  pbw_varint(p, (uint64_t)field << 3 | 2);
  pbw_varint(p, inner->n);
  pbw_bytes(p, inner->b, inner->n);
  if (inner->failed) p->failed = 1;
  inner->n = 0;
}

static inline void pbw_str(pbw_t *p, unsigned field, const char *s) {
  pbw_varint(p, (uint64_t)field << 3 | 2);
  pbw_varint(p, strlen(s));
  pbw_bytes(p, s, strlen(s));
}

static inline void pbw_free(pbw_t *p) {
  free(p->b);
  memset(p, 0, sizeof *p);
}

#endif
