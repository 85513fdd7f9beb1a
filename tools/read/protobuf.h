/*
 * protobuf.h: the protobuf wire format as the command reads it (private,
 * never installed): the one decoder under the Perfetto reader (perfetto.c)
 * and the pprof reader (profile.c). A message is read in place, a field at
 * a time: nothing is copied or allocated, and nothing is read past the end
 * given, whatever the bytes say.
 *
 * What is refused: a key or a varint cut short or longer than 10 bytes, a
 * field number of 0 or past 2^29 - 1, the group wire types (3, 4) and the
 * undefined ones (6, 7), a fixed field or a length past the end. Each has
 * its own negative code, and lp_pb_error() says it in words.
 */
#ifndef LP_TOOLS_PROTOBUF_H
#define LP_TOOLS_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

enum { LP_PB_VARINT = 0, LP_PB_FIXED64 = 1, LP_PB_BYTES = 2, LP_PB_FIXED32 = 5 };

typedef struct lp_pb_field {
  uint32_t num;      /* the field number */
  uint32_t wire;     /* LP_PB_VARINT, LP_PB_FIXED64, LP_PB_BYTES or LP_PB_FIXED32 */
  uint64_t v;        /* a varint's or a fixed field's value (little-endian); a length-delimited field's length */
  const uint8_t *p;  /* a length-delimited or fixed field's bytes; NULL for a varint */
  size_t len;        /* their count */
  const uint8_t *at; /* where the field starts: its key */
} lp_pb_field_t;

/* Why lp_pb_next() stopped: its negative returns. */
enum {
  LP_PB_CUT_KEY = -1,     /* the key is cut short, or longer than a varint may be */
  LP_PB_ZERO_NUMBER = -2, /* field number 0 */
  LP_PB_BIG_NUMBER = -3,  /* a field number past 2^29 - 1 */
  LP_PB_CUT_VARINT = -4,  /* a varint value cut short, or longer than 10 bytes */
  LP_PB_CUT_FIXED = -5,   /* a fixed64 or fixed32 past the end */
  LP_PB_PAST_END = -6,    /* a length cut short, or longer than what is left */
  LP_PB_BAD_WIRE = -7,    /* wire type 3, 4, 6 or 7 */
};

/* A varint at *p, which moves past it: 0; -1 when it runs past end or past 10 bytes (*p stays). */
static inline int lp_pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  const uint8_t *q = *p;
  if (q < end && !(*q & 0x80)) { /* most are one byte */
    *v = *q;
    *p = q + 1;
    return 0;
  }
  uint64_t r = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (q >= end) return -1;
    uint8_t b = *q++;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      *p = q;
      return 0;
    }
  }
  return -1;
}

/* The next field of [*p, end), *p moved past it: 1; 0 at the end; or one of the codes above (f->at is set). */
static inline int lp_pb_next(const uint8_t **p, const uint8_t *end, lp_pb_field_t *f) {
  if (*p >= end) return 0;
  uint64_t key;
  f->at = *p;
  f->p = NULL;
  f->len = 0;
  if (lp_pb_varint(p, end, &key) != 0) return LP_PB_CUT_KEY;
  f->num = (uint32_t)(key >> 3);
  f->wire = (uint32_t)(key & 7);
  if (f->num == 0) return LP_PB_ZERO_NUMBER;
  if (key >> 32) return LP_PB_BIG_NUMBER;
  switch (f->wire) {
  case LP_PB_VARINT:
    return lp_pb_varint(p, end, &f->v) != 0 ? LP_PB_CUT_VARINT : 1;
  case LP_PB_FIXED64:
  case LP_PB_FIXED32: {
    size_t n = f->wire == LP_PB_FIXED64 ? 8 : 4;
    if ((size_t)(end - *p) < n) return LP_PB_CUT_FIXED;
    f->p = *p;
    f->len = n;
    f->v = 0;
    for (size_t i = n; i-- > 0;) f->v = f->v << 8 | (*p)[i];
    *p += n;
    return 1;
  }
  case LP_PB_BYTES:
    if (lp_pb_varint(p, end, &f->v) != 0 || f->v > (uint64_t)(end - *p)) return LP_PB_PAST_END;
    f->p = *p;
    f->len = (size_t)f->v;
    *p += f->len;
    return 1;
  default:
    return LP_PB_BAD_WIRE;
  }
}

/* What a negative return of lp_pb_next() means, for a message about the field at f->at. */
static inline const char *lp_pb_error(int code) {
  switch (code) {
  case LP_PB_CUT_KEY: return "a field's key is cut short (expected a varint)";
  case LP_PB_ZERO_NUMBER: return "field number 0 (expected a protobuf field)";
  case LP_PB_BIG_NUMBER: return "a field number past 2^29 - 1 (expected a protobuf field)";
  case LP_PB_CUT_VARINT: return "a varint is cut short";
  case LP_PB_CUT_FIXED: return "a fixed-size field is cut short";
  case LP_PB_PAST_END: return "a length-delimited field runs past its message";
  default: return "an unknown wire type (expected 0, 1, 2 or 5)";
  }
}

#endif
