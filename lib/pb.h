/*
 * pb.h: the one protobuf writer (pb.c), private, never installed. The
 * library's Perfetto export and stream and the pprof encoder (pprof_enc.c)
 * write through it, in the library and in the command alike, which
 * compiles pb.c and pprof_enc.c too (LP_IN_COMMAND). Needs libc only.
 *
 * A message is built in a growing buffer: varint fields, length-delimited
 * fields, bare varints (the elements of a packed field), and nested
 * messages whose length is not known when they open. Out of memory sticks:
 * later calls do nothing and err says so once at the end.
 */
#ifndef LP_PB_H
#define LP_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The allocator of the files of lib/ that the command compiles too: in the
 * library, lp__malloc's kin (lib/internal.h), which the allocation-failure
 * tests hook; in the command, the C library's.
 */
#ifdef LP_IN_COMMAND
#include <stdlib.h>
#define lp__codec_calloc calloc
#define lp__codec_realloc realloc
#else
void *lp__calloc(size_t n, size_t size);
void *lp__realloc(void *p, size_t n);
#define lp__codec_calloc lp__calloc
#define lp__codec_realloc lp__realloc
#endif

typedef struct lp__pb {
  uint8_t *buf;
  size_t len, cap;
  int err; /* -ENOMEM, sticky */
} lp__pb_t;

/* v as a varint at o; returns its length (at most 10). */
static inline size_t lp__pb_put_varint(uint8_t *o, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    o[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  o[n++] = (uint8_t)v;
  return n;
}

/* The bytes v takes as a varint. */
size_t lp__pb_varint_size(uint64_t v);
/* A varint field (uint32/64, int64 as two's complement, bool, enum). */
void lp__pb_varint(lp__pb_t *pb, uint32_t field, uint64_t v);
/* A varint without a tag: one element of a packed repeated field. */
void lp__pb_bare_varint(lp__pb_t *pb, uint64_t v);
void lp__pb_bytes(lp__pb_t *pb, uint32_t field, const void *data, size_t n);
/* A double field (fixed64, little-endian IEEE 754). */
void lp__pb_double(lp__pb_t *pb, uint32_t field, double v);
/* A string field; invalid UTF-8 becomes U+FFFD. NULL is "". */
void lp__pb_str(lp__pb_t *pb, uint32_t field, const char *s);
/* A message built in msg, as a field of pb; msg is emptied (its error, if any, becomes pb's). */
void lp__pb_msg(lp__pb_t *pb, uint32_t field, lp__pb_t *msg);
/* Opens a nested message; returns the mark lp__pb_end() closes it with. */
size_t lp__pb_begin(lp__pb_t *pb, uint32_t field);
void lp__pb_end(lp__pb_t *pb, size_t mark);
/* The buffer grown to hold n more bytes: lp__pb_reserve's slow path. */
uint8_t *lp__pb_reserve_grow(lp__pb_t *pb, size_t n);
/* n bytes to fill at the returned pointer (then add what was used to pb->len); NULL out of memory. */
static inline uint8_t *lp__pb_reserve(lp__pb_t *pb, size_t n) {
  return !pb->err && pb->cap - pb->len >= n ? pb->buf + pb->len : lp__pb_reserve_grow(pb, n);
}
void lp__pb_free(lp__pb_t *pb);

#endif
