/*
 * pb.c: the one protobuf writer (pb.h): the Perfetto export and stream
 * write through it, and so does pprof_enc.c, in the library and in the
 * command.
 *
 * A message is built in a growing buffer: varints, length-delimited fields,
 * and nested messages whose length is not known when they open. A nested
 * message opens with its tag and one byte kept for its length; when it
 * closes, a length that needs more bytes moves the body up to make room, so
 * that every length is in its shortest form (short messages, the common
 * case, move nothing). The library hands finished top-level messages to an
 * lp__jw_t, which owns the file descriptor and its error (lp__pb_flush,
 * internal.h); the pprof encoder gzips them.
 *
 * Out of memory sticks, as a write error does in json.c: later calls do
 * nothing and the buffer's err says so once at the end.
 */
#include "pb.h"

#include "jsonesc.h" /* lp__utf8_seq: what valid UTF-8 is, for every writer */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool grow(lp__pb_t *pb, size_t more) {
  if (pb->err) return false;
  if (pb->len + more <= pb->cap) return true;
  size_t cap = pb->cap ? pb->cap : 4096;
  while (cap < pb->len + more) cap *= 2;
  uint8_t *b = lp__codec_realloc(pb->buf, cap);
  if (!b) {
    pb->err = -ENOMEM;
    return false;
  }
  pb->buf = b;
  pb->cap = cap;
  return true;
}

size_t lp__pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

void lp__pb_varint(lp__pb_t *pb, uint32_t field, uint64_t v) {
  if (!grow(pb, 20)) return;
  pb->len += lp__pb_put_varint(pb->buf + pb->len, (uint64_t)field << 3);
  pb->len += lp__pb_put_varint(pb->buf + pb->len, v);
}

void lp__pb_bare_varint(lp__pb_t *pb, uint64_t v) {
  if (!grow(pb, 10)) return;
  pb->len += lp__pb_put_varint(pb->buf + pb->len, v);
}

void lp__pb_bytes(lp__pb_t *pb, uint32_t field, const void *data, size_t n) {
  if (!grow(pb, n + 20)) return;
  pb->len += lp__pb_put_varint(pb->buf + pb->len, (uint64_t)field << 3 | 2);
  pb->len += lp__pb_put_varint(pb->buf + pb->len, n);
  if (n) memcpy(pb->buf + pb->len, data, n);
  pb->len += n;
}

void lp__pb_double(lp__pb_t *pb, uint32_t field, double v) {
  if (!grow(pb, 20)) return;
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  pb->len += lp__pb_put_varint(pb->buf + pb->len, (uint64_t)field << 3 | 1);
  for (int i = 0; i < 8; i++) pb->buf[pb->len++] = (uint8_t)(u >> (8 * i));
}

/*
 * A string field, valid UTF-8 as protobuf's string type requires: each byte
 * that does not start a valid sequence becomes U+FFFD, as in the JSON.
 */
void lp__pb_str(lp__pb_t *pb, uint32_t field, const char *str) {
  const unsigned char *s = (const unsigned char *)(str ? str : "");
  size_t n = strlen((const char *)s), i = 0;
  unsigned cp;
  for (; i < n; i++)
    if (s[i] >= 0x80 && !lp__utf8_seq(s + i, s + n, &cp)) break;
    else if (s[i] >= 0x80) i += lp__utf8_seq(s + i, s + n, &cp) - 1;
  if (i == n) { /* valid as it is: the common case */
    lp__pb_bytes(pb, field, s, n);
    return;
  }
  size_t m = lp__pb_begin(pb, field);
  if (!grow(pb, 3 * n)) return;
  uint8_t *o = pb->buf + pb->len;
  for (i = 0; i < n;) {
    size_t k = s[i] < 0x80 ? 1 : lp__utf8_seq(s + i, s + n, &cp);
    if (k) {
      memcpy(o, s + i, k);
      o += k;
      i += k;
    } else {
      memcpy(o, "\xef\xbf\xbd", 3);
      o += 3;
      i++;
    }
  }
  pb->len = (size_t)(o - pb->buf);
  lp__pb_end(pb, m);
}

void lp__pb_msg(lp__pb_t *pb, uint32_t field, lp__pb_t *msg) {
  if (msg->err && !pb->err) pb->err = msg->err;
  lp__pb_bytes(pb, field, msg->buf, msg->len);
  msg->len = 0;
}

size_t lp__pb_begin(lp__pb_t *pb, uint32_t field) {
  if (!grow(pb, 12)) return 0;
  pb->len += lp__pb_put_varint(pb->buf + pb->len, (uint64_t)field << 3 | 2);
  pb->buf[pb->len++] = 0; /* the length's first byte; more are made room for at the end */
  return pb->len;
}

void lp__pb_end(lp__pb_t *pb, size_t mark) {
  if (pb->err || mark == 0) return;
  size_t body = pb->len - mark, n = lp__pb_varint_size(body);
  if (n > 1) {
    if (!grow(pb, n - 1)) return;
    memmove(pb->buf + mark + n - 1, pb->buf + mark, body);
    pb->len += n - 1;
  }
  lp__pb_put_varint(pb->buf + mark - 1, body);
}

uint8_t *lp__pb_reserve_grow(lp__pb_t *pb, size_t n) { return grow(pb, n) ? pb->buf + pb->len : NULL; }

void lp__pb_free(lp__pb_t *pb) {
  free(pb->buf);
  pb->buf = NULL;
  pb->len = pb->cap = 0;
}
