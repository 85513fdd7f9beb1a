/*
 * escape.c: the escapers of the command's outputs, one per format (JSON,
 * XML, CSV, text: their contracts are in cmd.h). Labels come from files the
 * user did not write, so any bytes reach here: each escaper writes a valid
 * document of its format whatever they are, and UTF-8 is judged everywhere
 * by the one decoder of lib/jsonesc.c.
 */
#include "config.h"

#include "cmd.h"
#include "../lib/jsonesc.h"

#include <string.h>

#define U_FFFD "\xef\xbf\xbd"

/* Through the project's one escaper (lib/jsonesc.c), a block at a time. */
void lp_put_json_string_n(FILE *out, const char *s, size_t n) {
  enum { BLOCK = 1024 };
  char buf[LP__JSON_ESC_MAX * (BLOCK + 3)];
  const char *end = s + n;
  putc('"', out);
  while (s < end) {
    const char *stop = (size_t)(end - s) > BLOCK ? s + BLOCK : end;
    char *o = lp__json_escape_chars(buf, &s, end, stop, 0);
    fwrite(buf, 1, (size_t)(o - buf), out);
  }
  putc('"', out);
}

void lp_put_json_string(FILE *out, const char *s) { lp_put_json_string_n(out, s, strlen(s)); }

/*
 * The UTF-8 sequence at s as it may be written: its length, with *ok false
 * when it is to be written as U+FFFD instead (a byte that starts no valid
 * sequence is one such, and so are the code points `refuse` says no to).
 */
static size_t utf8_char(const unsigned char *s, const unsigned char *end, bool (*refuse)(unsigned cp), bool *ok) {
  unsigned cp;
  size_t n = lp__utf8_seq(s, end, &cp);
  *ok = n && !(refuse && refuse(cp));
  return n ? n : 1;
}

/* What XML 1.0 cannot hold above ASCII: surrogates (never valid UTF-8 anyway), U+FFFE and U+FFFF. */
static bool not_xml(unsigned cp) { return cp == 0xfffe || cp == 0xffff; }

void lp_put_xml(FILE *out, const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str, *end = s + n, *run = s;
  while (s < end) {
    unsigned char c = *s;
    if (c >= 0x20 && c < 0x80 && c != '&' && c != '<' && c != '>' && c != '"' && c != '\'') {
      s++; /* the common case: written with its neighbours */
      continue;
    }
    fwrite(run, 1, (size_t)(s - run), out);
    if (c >= 0x80) {
      bool ok;
      size_t k = utf8_char(s, end, not_xml, &ok);
      if (ok)
        fwrite(s, 1, k, out);
      else
        fputs(U_FFFD, out);
      s += k;
    } else {
      switch (c) {
      case '&': fputs("&amp;", out); break;
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '"': fputs("&quot;", out); break;
      case '\'': fputs("&apos;", out); break;
      case '\t': case '\n': case '\r': fprintf(out, "&#%u;", c); break;
      default: fputs(U_FFFD, out); break; /* no other control character is XML 1.0, as a reference either */
      }
      s++;
    }
    run = s;
  }
  fwrite(run, 1, (size_t)(s - run), out);
}

void lp_put_csv_field(FILE *out, const char *str) {
  const unsigned char *s = (const unsigned char *)str, *end = s + strlen(str);
  bool formula = strchr("=+-@\t\r", str[0]) && str[0];
  bool quote = formula || strpbrk(str, ",\"\r\n");
  if (quote) putc('"', out);
  if (formula) putc('\'', out);
  while (s < end) {
    if (*s < 0x80) {
      if (*s == '"') putc('"', out);
      putc(*s++, out);
      continue;
    }
    bool ok;
    size_t k = utf8_char(s, end, NULL, &ok);
    if (ok)
      fwrite(s, 1, k, out);
    else
      fputs(U_FFFD, out);
    s += k;
  }
  if (quote) putc('"', out);
}

size_t lp_put_text(FILE *out, const char *s, bool semicolons) {
  size_t n = 0;
  for (const unsigned char *c = (const unsigned char *)s; *c; c++, n++)
    putc(*c < 0x20 || *c == 0x7f ? '?' : semicolons && *c == ';' ? ':' : *c, out);
  return n;
}
