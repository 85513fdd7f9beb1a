/*
 * jsonesc.c: the JSON string escaper of the library and the command
 * (jsonesc.h). Self-contained: the command compiles this file too.
 */
#include "jsonesc.h"

static const char hex[] = "0123456789abcdef";

size_t lp__utf8_seq(const unsigned char *s, const unsigned char *end, unsigned *cp) {
  size_t left = (size_t)(end - s);
  unsigned char c = s[0];
  if (c >= 0xc2 && c <= 0xdf) {
    if (left < 2 || (s[1] & 0xc0) != 0x80) return 0;
    *cp = (unsigned)(c & 0x1f) << 6 | (s[1] & 0x3fu);
    return 2;
  }
  if (c >= 0xe0 && c <= 0xef) {
    unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    if (left < 3 || s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80) return 0;
    *cp = (unsigned)(c & 0x0f) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu);
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    if (left < 4 || s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80) return 0;
    *cp = (unsigned)(c & 0x07) << 18 | (s[1] & 0x3fu) << 12 | (s[2] & 0x3fu) << 6 | (s[3] & 0x3fu);
    return 4;
  }
  return 0;
}

static char *u_escape(char *o, unsigned v) {
  o[0] = '\\';
  o[1] = 'u';
  o[2] = hex[(v >> 12) & 15];
  o[3] = hex[(v >> 8) & 15];
  o[4] = hex[(v >> 4) & 15];
  o[5] = hex[v & 15];
  return o + 6;
}

char *lp__json_escape_chars(char *o, const char **sp, const char *end, const char *stop, int ascii) {
  const unsigned char *s = (const unsigned char *)*sp, *e = (const unsigned char *)end,
                      *st = (const unsigned char *)stop;
  if (st > e) st = e;
  while (s < st) {
    unsigned char c = *s;
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      *o++ = (char)c;
      s++;
    } else if (c == '"' || c == '\\') {
      *o++ = '\\';
      *o++ = (char)c;
      s++;
    } else if (c < 0x20) {
      char named = c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' : c == '\b' ? 'b' : c == '\f' ? 'f' : 0;
      if (named) {
        *o++ = '\\';
        *o++ = named;
      } else {
        o = u_escape(o, c);
      }
      s++;
    } else if (c == 0x7f) {
      if (ascii)
        o = u_escape(o, c);
      else
        *o++ = (char)c;
      s++;
    } else {
      unsigned cp = 0xfffd;
      size_t n = lp__utf8_seq(s, e, &cp);
      if (!ascii && n) {
        for (size_t i = 0; i < n; i++) *o++ = (char)s[i];
      } else if (!ascii) {
        *o++ = (char)0xef;
        *o++ = (char)0xbf;
        *o++ = (char)0xbd;
      } else if (cp >= 0x10000) {
        o = u_escape(o, 0xd800 + ((cp - 0x10000) >> 10));
        o = u_escape(o, 0xdc00 + ((cp - 0x10000) & 0x3ff));
      } else {
        o = u_escape(o, cp);
      }
      s += n ? n : 1;
    }
  }
  *sp = (const char *)s;
  return o;
}
