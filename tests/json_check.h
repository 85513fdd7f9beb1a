/*
 * json_check.h: a strict reader of one JSON string's content, for the tests
 * of the project's escaper (lib/jsonesc.c): test_jsonesc and the fuzzers.
 * Written from RFC 8259 and RFC 3629, independently of the escaper.
 */
#ifndef LP_TESTS_JSON_CHECK_H
#define LP_TESTS_JSON_CHECK_H

#include <stddef.h>
#include <string.h>

static int jc_hex4(const unsigned char *p, unsigned *v) {
  *v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned char c = p[i];
    unsigned d = 16;
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a') + 10;
    else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A') + 10;
    if (d == 16) return -1;
    *v = *v << 4 | d;
  }
  return 0;
}

static size_t jc_put_utf8(unsigned char *o, unsigned cp) {
  if (cp < 0x80) return o[0] = (unsigned char)cp, 1;
  if (cp < 0x800) return o[0] = (unsigned char)(0xc0 | cp >> 6), o[1] = (unsigned char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xe0 | cp >> 12);
    o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (unsigned char)(0xf0 | cp >> 18);
  o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
  o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
  o[3] = (unsigned char)(0x80 | (cp & 0x3f));
  return 4;
}

/*
 * s[0..n) must be the content of a JSON string (between its quotes) that a
 * strict reader accepts: no raw control character or quote, only the
 * escapes JSON defines, surrogates in pairs, UTF-8 without overlong forms,
 * surrogates or code points above U+10FFFF; with ascii, no byte above 0x7f.
 * Decodes it (as UTF-8) into dec, which has room for n bytes; *declen gets
 * its length. Returns 0, or -1 at the first fault.
 */
static int jc_string(const char *str, size_t n, int ascii, char *dec, size_t *declen) {
  const unsigned char *s = (const unsigned char *)str;
  unsigned char *o = (unsigned char *)dec;
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x20 || c == '"') return -1;
    if (c == '\\') {
      if (i + 1 >= n) return -1;
      unsigned char e = s[i + 1];
      const char *simple = strchr("\"\\/bfnrt", e);
      if (e && simple) {
        static const char map[] = "\"\\/\b\f\n\r\t";
        *o++ = (unsigned char)map[simple - "\"\\/bfnrt"];
        i += 2;
        continue;
      }
      unsigned v, lo;
      if (e != 'u' || i + 6 > n || jc_hex4(s + i + 2, &v)) return -1;
      i += 6;
      if (v >= 0xdc00 && v <= 0xdfff) return -1;
      if (v >= 0xd800 && v <= 0xdbff) {
        if (i + 6 > n || s[i] != '\\' || s[i + 1] != 'u' || jc_hex4(s + i + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
          return -1;
        i += 6;
        v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
      }
      o += jc_put_utf8(o, v);
      continue;
    }
    if (c < 0x80) {
      *o++ = c;
      i++;
      continue;
    }
    if (ascii) return -1;
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!len || i + len > n) return -1;
    unsigned cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return -1;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
      return -1;
    memcpy(o, s + i, len);
    o += len;
    i += len;
  }
  *declen = (size_t)(o - (unsigned char *)dec);
  return 0;
}

#endif
