/*
 * jsonesc.h: the project's one JSON string escaper.
 *
 * The library's writer (lib/json.c) and the command (tools/: stats --format
 * json, nnapi --json) all escape strings with it; the command compiles
 * lib/jsonesc.c into itself, as it does not link the library. The file needs
 * nothing but <stddef.h>.
 *
 * Any bytes give a valid JSON string: the quote, the backslash and every
 * control character (below 0x20) are escaped; valid UTF-8 (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF) passes through; each
 * byte that does not start a valid sequence becomes U+FFFD. A NUL inside the
 * given length is a control character like the others (\u0000).
 */
#ifndef LP_JSONESC_H
#define LP_JSONESC_H

#include <stddef.h>

/* The most output bytes lp__json_escape_chars writes per input byte. */
#define LP__JSON_ESC_MAX 6

/*
 * Escapes the characters of [*sp, end) into o (the string's content, without
 * its quotes) until end, or until *sp reaches stop: whole characters only, so
 * up to 3 bytes past stop are read, never past end. Advances *sp and returns
 * the end of the output, at most LP__JSON_ESC_MAX bytes per byte read.
 *
 * ascii = 0: valid UTF-8 is copied as it is, U+FFFD written as its UTF-8.
 * ascii = 1: the output is ASCII, as Python's json.dumps writes it
 * (ensure_ascii): every character from U+007F up is \uXXXX in lowercase hex,
 * as a surrogate pair above U+FFFF; U+FFFD is \ufffd.
 */
char *lp__json_escape_chars(char *o, const char **sp, const char *end, const char *stop, int ascii);

/*
 * The length of the valid UTF-8 sequence of two to four bytes at s (end - s
 * > 0 bytes readable), as RFC 3629 defines it, or 0 when there is none
 * (ASCII included); *cp gets its code point. The command's other escapers
 * (tools/escape.c) judge UTF-8 with it, as this one does.
 */
size_t lp__utf8_seq(const unsigned char *s, const unsigned char *end, unsigned *cp);

#endif
