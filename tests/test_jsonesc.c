/*
 * test_jsonesc.c: the project's one JSON string escaper (lib/jsonesc.c),
 * which the library's writer and the command's JSON (stats, nnapi) share.
 *
 * Fixed cases give the exact output for invalid UTF-8 (a Latin-1 byte,
 * overlong forms, surrogates, sequences cut short, code points above
 * U+10FFFF), control characters, NUL, emoji, in both modes (UTF-8 out, and
 * ASCII out as Python's json.dumps writes it). Every output is read back by
 * jansson and by a strict reader written from the RFCs (json_check.h).
 * Then a fuzz loop with a fixed seed: random bytes, biased towards the
 * bytes where UTF-8 decoding goes wrong, and split into blocks at random
 * places, must always give a string both readers accept, that decodes to
 * the input when the input is valid UTF-8.
 */
#include "jsonesc.h"
#include "json_check.h"
#include "runner.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Escapes s[0..n) in one call; returns a malloc'ed NUL-terminated string, *len its length. */
static char *esc(const char *s, size_t n, int ascii, size_t *len) {
  char *o = malloc(LP__JSON_ESC_MAX * n + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  const char *p = s;
  char *e = lp__json_escape_chars(o, &p, s + n, s + n, ascii);
  CU_ASSERT_PTR_EQUAL(p, s + n);
  *e = 0;
  *len = (size_t)(e - o);
  CU_ASSERT(*len <= LP__JSON_ESC_MAX * n);
  return o;
}

/* jansson reads "<out>" as a JSON document; the decoded bytes must be dec[0..declen). */
static int jansson_reads(const char *out, size_t len, const char *dec, size_t declen) {
  char *doc = malloc(len + 3);
  if (!doc) return 0;
  doc[0] = '"';
  memcpy(doc + 1, out, len);
  doc[len + 1] = '"';
  doc[len + 2] = 0;
  json_error_t je;
  json_t *v = json_loadb(doc, len + 2, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
  free(doc);
  if (!v) return 0;
  int ok = json_is_string(v) && json_string_length(v) == declen && memcmp(json_string_value(v), dec, declen) == 0;
  json_decref(v);
  return ok;
}

/* Both modes: the exact outputs, read back by both readers to the same text. */
static void expect(const char *in, size_t n, const char *want_utf8, const char *want_ascii) {
  size_t lu, la, du, da;
  char *u = esc(in, n, 0, &lu), *a = esc(in, n, 1, &la);
  if (strcmp(u, want_utf8) != 0) fprintf(stderr, "\nutf8: got [%s] want [%s]\n", u, want_utf8);
  if (strcmp(a, want_ascii) != 0) fprintf(stderr, "\nascii: got [%s] want [%s]\n", a, want_ascii);
  CU_ASSERT_STRING_EQUAL(u, want_utf8);
  CU_ASSERT_STRING_EQUAL(a, want_ascii);
  char *dec_u = malloc(lu + 1), *dec_a = malloc(la + 1);
  CU_ASSERT_FATAL(dec_u && dec_a);
  CU_ASSERT_EQUAL_FATAL(jc_string(u, lu, 0, dec_u, &du), 0);
  CU_ASSERT_EQUAL_FATAL(jc_string(a, la, 1, dec_a, &da), 0);
  CU_ASSERT(du == da && memcmp(dec_u, dec_a, du) == 0);
  CU_ASSERT(jansson_reads(u, lu, dec_u, du));
  CU_ASSERT(jansson_reads(a, la, dec_u, du));
  free(dec_u);
  free(dec_a);
  free(u);
  free(a);
}
#define EXPECT(lit, u, a) expect(lit, sizeof(lit) - 1, u, a)
#define FFFD "\xef\xbf\xbd"

static void test_jsonesc_invalid_utf8(void) {
  EXPECT("caf\xe9", "caf" FFFD, "caf\\ufffd");                                 /* Latin-1 */
  EXPECT("\xc0\xaf", FFFD FFFD, "\\ufffd\\ufffd");                             /* overlong '/' */
  EXPECT("\xe0\x80\xaf", FFFD FFFD FFFD, "\\ufffd\\ufffd\\ufffd");             /* overlong, 3 bytes */
  EXPECT("\xf0\x80\x80\xaf", FFFD FFFD FFFD FFFD, "\\ufffd\\ufffd\\ufffd\\ufffd");
  EXPECT("\xed\xa0\x80", FFFD FFFD FFFD, "\\ufffd\\ufffd\\ufffd");             /* U+D800 */
  EXPECT("\xed\xb0\x80x", FFFD FFFD FFFD "x", "\\ufffd\\ufffd\\ufffdx");      /* U+DC00 */
  EXPECT("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD, "\\ufffd\\ufffd\\ufffd\\ufffd"); /* U+110000 */
  EXPECT("a\xe2\x82", "a" FFFD FFFD, "a\\ufffd\\ufffd");                       /* cut at the end */
  EXPECT("\xf0\x9f\x98x", FFFD FFFD FFFD "x", "\\ufffd\\ufffd\\ufffdx");       /* cut before x */
  EXPECT("\x80\xbf\xfe\xff\xf5", FFFD FFFD FFFD FFFD FFFD, "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd");
}

static void test_jsonesc_control_and_quotes(void) {
  EXPECT("\x01\x1f\n\t\r\b\f\"\\/", "\\u0001\\u001f\\n\\t\\r\\b\\f\\\"\\\\/", "\\u0001\\u001f\\n\\t\\r\\b\\f\\\"\\\\/");
  EXPECT("a\0b", "a\\u0000b", "a\\u0000b");
  EXPECT("\x7f", "\x7f", "\\u007f");
}

static void test_jsonesc_valid_utf8_passes(void) {
  EXPECT("\xf0\x9f\x98\x80 caf\xc3\xa9 \xe2\x82\xac", "\xf0\x9f\x98\x80 caf\xc3\xa9 \xe2\x82\xac",
         "\\ud83d\\ude00 caf\\u00e9 \\u20ac");
  EXPECT("\xf4\x8f\xbf\xbf\xef\xbf\xbd", "\xf4\x8f\xbf\xbf\xef\xbf\xbd", "\\udbff\\udfff\\ufffd");
  /* a block boundary inside a character: the character is read whole */
  const char *s = "\xf0\x9f\x98\x80z", *p = s;
  char out[64];
  char *e = lp__json_escape_chars(out, &p, s + 5, s + 1, 0);
  CU_ASSERT_PTR_EQUAL(p, s + 4);
  CU_ASSERT_EQUAL(e - out, 4);
  CU_ASSERT(memcmp(out, s, 4) == 0);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next32(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

static void test_jsonesc_fuzz(void) {
  static const unsigned char tricky[] = {0x00, 0x01, 0x1f, '"', '\\', 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf,
                                         0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf4,
                                         0xf5, 0xfe, 0xff, 'a', '\n'};
  static const char *const whole[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\x9f\xbf", "\xee\x80\x80",
                                      "\xf4\x8f\xbf\xbf"};
  unsigned char in[64];
  char out[LP__JSON_ESC_MAX * 64 + 8], one[LP__JSON_ESC_MAX * 64 + 8], dec[LP__JSON_ESC_MAX * 64], dec2[sizeof dec];
  unsigned runs = 200000 / (LP_TEST_SANITIZED ? 4 : 1);
  for (unsigned r = 0; r < runs; r++) {
    size_t n = next32() % 48;
    for (size_t i = 0; i < n;) {
      uint32_t k = next32() % 8;
      if (k < 3) {
        in[i++] = (unsigned char)next32();
      } else if (k < 6) {
        in[i++] = tricky[next32() % sizeof tricky];
      } else {
        const char *w = whole[next32() % 6];
        for (size_t j = 0; w[j] && i < n; j++) in[i++] = (unsigned char)w[j];
      }
    }
    size_t declen2 = 0;
    for (int ascii = 0; ascii < 2; ascii++) {
      /* one call, then blocks cut at random places: the same output */
      const char *p = (const char *)in, *end = p + n;
      char *e1 = lp__json_escape_chars(one, &p, end, end, ascii);
      size_t l1 = (size_t)(e1 - one);
      p = (const char *)in;
      char *o = out;
      while (p < end) {
        const char *stop = p + 1 + next32() % 5;
        o = lp__json_escape_chars(o, &p, end, stop, ascii);
      }
      size_t declen = 0;
      if (l1 != (size_t)(o - out) || memcmp(one, out, l1) != 0 || l1 > LP__JSON_ESC_MAX * n ||
          jc_string(one, l1, ascii, dec, &declen) != 0 || !jansson_reads(one, l1, dec, declen)) {
        fprintf(stderr, "\nfuzz run %u (ascii %d) fails on:", r, ascii);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %02x", in[i]);
        fputc('\n', stderr);
        CU_FAIL_FATAL("the escaper's output is not a valid JSON string");
      }
      /* valid UTF-8 (jansson says) comes back as it was; the two modes decode alike */
      json_t *v = json_stringn((const char *)in, n);
      if (v) CU_ASSERT(declen == n && memcmp(dec, in, n) == 0);
      json_decref(v);
      if (ascii) CU_ASSERT(declen == declen2 && memcmp(dec, dec2, declen) == 0);
      memcpy(dec2, dec, declen);
      declen2 = declen;
    }
  }
}

int main(void) {
  CU_TestInfo tests[] = {
      LP_TEST(test_jsonesc_invalid_utf8),
      LP_TEST(test_jsonesc_control_and_quotes),
      LP_TEST(test_jsonesc_valid_utf8_passes),
      LP_TEST(test_jsonesc_fuzz),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("jsonesc", tests);
}
