/*
 * json.c: a streaming JSON writer for the exporter.
 *
 * Output collects in a 256 KiB buffer that goes to the file descriptor with
 * write(2), retried on EINTR and short writes. The first error sticks: later
 * writes are skipped and the error is returned at the end, so one check
 * covers every write.
 *
 * Strings are escaped by the project's one escaper (jsonesc.c): quote,
 * backslash and every control character escaped, UTF-8 validated (RFC 3629:
 * no overlong forms, no surrogates, nothing above U+10FFFF), each byte that
 * does not start a valid sequence written as U+FFFD. Any label therefore
 * yields a document a strict parser accepts.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define JW_CAP (256u * 1024u)
#define JW_ROOM 64u /* the most any single number or escape appends at once */

int lp__jw_init(lp__jw_t *w, int fd) {
  memset(w, 0, sizeof *w);
  w->fd = fd;
  w->buf = lp__malloc(JW_CAP);
  if (!w->buf) w->err = -ENOMEM;
  return w->err;
}

static void flush(lp__jw_t *w) {
  size_t off = 0;
  while (off < w->len && !w->err) {
    ssize_t n = write(w->fd, w->buf + off, w->len - off);
    if (n > 0)
      off += (size_t)n;
    else if (n < 0 && errno != EINTR)
      w->err = -errno;
    else if (n == 0)
      w->err = -EIO;
  }
  w->bytes += off;
  w->len = 0;
}

int lp__jw_finish(lp__jw_t *w) {
  if (w->buf && !w->err) flush(w);
  free(w->buf);
  w->buf = NULL;
  return w->err;
}

/* Room for at least JW_ROOM more bytes. */
static inline bool room(lp__jw_t *w) {
  if (w->len + JW_ROOM > JW_CAP) flush(w);
  return !w->err;
}

void lp__jw_raw(lp__jw_t *w, const char *s, size_t n) {
  if (w->err) return;
  if (w->len + n > JW_CAP) {
    flush(w);
    if (w->err) return;
    if (n > JW_CAP) { /* larger than the buffer: straight through */
      char *keep = w->buf;
      w->buf = (char *)s;
      w->len = n;
      flush(w);
      w->buf = keep;
      return;
    }
  }
  memcpy(w->buf + w->len, s, n);
  w->len += n;
}

char *lp__json_escape(char *o, const char *str) {
  const char *s = str, *end = str + strlen(str);
  *o++ = '"';
  o = lp__json_escape_chars(o, &s, end, end, 0);
  *o++ = '"';
  return o;
}

/* Any length: a block of input at a time into reserved space, so the buffer never has to hold it all. */
void lp__jw_str(lp__jw_t *w, const char *str) {
  enum { BLOCK = 4096 };
  const char *s = str, *end = str + strlen(str);
  lp__jw_raw(w, "\"", 1);
  while (s < end) {
    char *o = lp__jw_reserve(w, LP__JSON_ESC_MAX * (BLOCK + 3));
    if (!o) return; /* an error, which sticks */
    const char *stop = (size_t)(end - s) > BLOCK ? s + BLOCK : end;
    w->len = (size_t)(lp__json_escape_chars(o, &s, end, stop, 0) - w->buf);
  }
  lp__jw_raw(w, "\"", 1);
}

static const char digit_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* v in decimal at o; returns the length. Two digits per division. */
static size_t put_u64(char *o, uint64_t v) {
  char tmp[24];
  size_t n = sizeof tmp;
  while (v >= 100) {
    unsigned r = (unsigned)(v % 100);
    v /= 100;
    n -= 2;
    memcpy(tmp + n, digit_pairs + 2 * r, 2);
  }
  if (v >= 10) {
    n -= 2;
    memcpy(tmp + n, digit_pairs + 2 * v, 2);
  } else {
    tmp[--n] = (char)('0' + v);
  }
  memcpy(o, tmp + n, sizeof tmp - n);
  return sizeof tmp - n;
}

void lp__jw_u64(lp__jw_t *w, uint64_t v) {
  if (room(w)) w->len += put_u64(w->buf + w->len, v);
}

char *lp__jw_reserve(lp__jw_t *w, size_t n) {
  if (w->err) return NULL;
  if (w->len + n > JW_CAP) flush(w);
  return w->err || n > JW_CAP ? NULL : w->buf + w->len;
}

char *lp__jw_put_us(char *o, uint64_t ns) {
  o += put_u64(o, ns / 1000);
  unsigned frac = (unsigned)(ns % 1000);
  o[0] = '.';
  o[1] = (char)('0' + frac / 100);
  memcpy(o + 2, digit_pairs + 2 * (frac % 100), 2);
  return o + 4;
}

char *lp__jw_put_u64(char *o, uint64_t v) { return o + put_u64(o, v); }

void lp__jw_i64(lp__jw_t *w, int64_t v) {
  if (v < 0) {
    lp__jw_raw(w, "-", 1);
    lp__jw_u64(w, (uint64_t)0 - (uint64_t)v);
  } else {
    lp__jw_u64(w, (uint64_t)v);
  }
}

void lp__jw_us(lp__jw_t *w, uint64_t ns) {
  if (room(w)) w->len = (size_t)(lp__jw_put_us(w->buf + w->len, ns) - w->buf);
}
