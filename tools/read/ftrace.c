/*
 * ftrace.c: the trace_marker lines of systrace and ftrace text (see ftrace.h).
 *
 * AOSP's parser reads a mark line with two regular expressions, the TGID
 * one first:
 *   R1 ^\s*([^ ].{1,15})-(\d+)\s+\(\s*([-0-9]+)\) .* (\d+\.\d+): tracing_mark_write: ([BE].*)$
 *   R2 ^\s*([^ ].{1,15})-(\d+) .* (\d+\.\d+): tracing_mark_write: ([BE].*)$
 * They are matched here by hand, with the same choices a backtracking
 * engine makes: the longest task name that lets the rest match, and
 * (greedy ".*") the rightmost timestamp. "." counts characters, so the task
 * length is counted in UTF-8 code points. Only when both fail does the
 * extended grammar try (long task names, trace-cmd's print events).
 */
#include "config.h"

#include "ftrace.h"
#include "table.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char HDR_TGID[] = "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION";
static const char HDR_OLD[] = "#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION";
static const char TMW[] = ": tracing_mark_write: ";

/* Python's \s for str patterns, restricted to ASCII. */
static int pyspace(unsigned char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static int isdig(unsigned char c) { return c >= '0' && c <= '9'; }

/* Length of the UTF-8 code point at p (1 for an invalid byte). */
static size_t cp_len(const char *p, const char *end) {
  unsigned char c = (unsigned char)*p;
  size_t n = c < 0x80 ? 1 : c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 1;
  if (n == 1 || (size_t)(end - p) < n) return 1;
  for (size_t i = 1; i < n; i++)
    if (((unsigned char)p[i] & 0xc0) != 0x80) return 1;
  return n;
}

/*
 * The rightmost position P of a space such that line[P+1..] is
 * "\d+\.\d+: tracing_mark_write: [BE]...". Returns -1 if none.
 */
static long rightmost_ts(const char *l, size_t n) {
  const size_t tl = sizeof TMW - 1;
  if (n < tl + 5) return -1;
  for (size_t k = n - tl; ; k--) {
    if (l[k] == ':' && memcmp(l + k, TMW, tl) == 0 && k + tl < n && (l[k + tl] == 'B' || l[k + tl] == 'E')) {
      size_t i = k;
      size_t frac = 0, whole = 0;
      while (i > 0 && isdig((unsigned char)l[i - 1])) i--, frac++;
      if (frac > 0 && i > 0 && l[i - 1] == '.') {
        i--;
        while (i > 0 && isdig((unsigned char)l[i - 1])) i--, whole++;
        if (whole > 0 && i > 0 && l[i - 1] == ' ') return (long)(i - 1);
      }
    }
    if (k == 0) break;
  }
  return -1;
}

/*
 * "<digits>.<digits>" as a double, correctly rounded without strtod when the
 * digits fit in 2^53 and the fraction has at most 22 digits: both the
 * integer and the power of ten are then exact, and one IEEE division rounds
 * once (Clinger's fast path). Returns 0 when it does not apply.
 */
static int fast_ts(const char *s, size_t n, double *out) {
  static const double p10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  unsigned long long m = 0;
  int frac = -1, digits = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '.') {
      if (frac >= 0) return 0;
      frac = 0;
      continue;
    }
    if (s[i] < '0' || s[i] > '9') return 0;
    if (m == 0 && s[i] == '0') {
      if (frac >= 0) frac++;
      continue;
    }
    if (++digits > 15) return 0;
    m = m * 10 + (unsigned)(s[i] - '0');
    if (frac >= 0) frac++;
  }
  if (frac < 0 || frac > 22) return 0;
  *out = (double)m / p10[frac];
  return 1;
}

static long long parse_ll(const char *s, size_t n) {
  long long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isdig((unsigned char)s[i])) return -1;
    int d = s[i] - '0';
    if (v > (LLONG_MAX - d) / 10) return LLONG_MAX;
    v = v * 10 + d;
  }
  return n ? v : -1;
}

/*
 * Match R1 (tgid_fmt) or R2 at this line. Fills task, tid, tgid (R1 only), ts and mark.
 */
static int match_aosp(const char *l, size_t n, int r1, long P, struct lp_st_mark *m) {
  const char *end = l + n;
  size_t ws = 0;
  while (ws < n && pyspace((unsigned char)l[ws])) ws++;
  for (long start = (long)ws; start >= 0; start--) {
    if (start < (long)n && l[start] == ' ') continue;
    if ((size_t)start >= n) continue;
    /* offsets after 2..16 code points */
    size_t offs[16];
    int cnt = 0;
    const char *p = l + start;
    p += cp_len(p, end);
    while (cnt < 15 && p < end) {
      p += cp_len(p, end);
      offs[cnt++] = (size_t)(p - l);
    }
    for (int c = cnt - 1; c >= 0; c--) {
      size_t i = offs[c];
      if (i >= n || l[i] != '-') continue;
      size_t d0 = i + 1, d = d0;
      while (d < n && isdig((unsigned char)l[d])) d++;
      if (d == d0) continue;
      size_t s;
      const char *tg = NULL;
      size_t tgl = 0;
      if (!r1) {
        if (d >= n || l[d] != ' ') continue;
        s = d;
      } else {
        size_t w = d;
        while (w < n && pyspace((unsigned char)l[w])) w++;
        if (w == d || w >= n || l[w] != '(') continue;
        w++;
        while (w < n && pyspace((unsigned char)l[w])) w++;
        size_t g0 = w;
        while (w < n && (isdig((unsigned char)l[w]) || l[w] == '-')) w++;
        if (w == g0 || w + 1 >= n || l[w] != ')' || l[w + 1] != ' ') continue;
        tg = l + g0;
        tgl = w - g0;
        s = w + 1;
      }
      if (P < (long)s + 1) continue;
      m->task = l + start;
      m->task_len = i - (size_t)start;
      m->tid = parse_ll(l + d0, d - d0);
      m->tgid_str = tg;
      m->tgid_len = tgl;
      m->ts = l + P + 1;
      m->ts_len = (size_t)(memchr(m->ts, ':', (size_t)(end - m->ts)) ? (const char *)memchr(m->ts, ':', (size_t)(end - m->ts)) - m->ts : 0);
      m->mark = m->ts + m->ts_len + sizeof TMW - 1;
      m->mark_len = (size_t)(end - m->mark);
      return 1;
    }
  }
  return 0;
}

/*
 * The extended grammar: "<task>-<tid> [(<tgid>)] [<cpu>] [flags] <secs>.<frac>: "
 * then "tracing_mark_write: " or trace-cmd's "print: [<ip>:] ", then the mark.
 * The task is everything before the leftmost "-<digits>" that the CPU column follows.
 */
static int match_ext(const char *l, size_t n, struct lp_st_mark *m) {
  size_t i = 0;
  while (i < n && pyspace((unsigned char)l[i])) i++;
  size_t start = i;
  for (size_t k = start + 1; k < n; k++) {
    if (l[k] != '-' || k + 1 >= n || !isdig((unsigned char)l[k + 1])) continue;
    size_t d = k + 1;
    while (d < n && isdig((unsigned char)l[d])) d++;
    size_t w = d;
    while (w < n && pyspace((unsigned char)l[w])) w++;
    if (w == d || w >= n) continue;
    const char *tg = NULL;
    size_t tgl = 0;
    if (l[w] == '(') {
      size_t g = w + 1;
      while (g < n && pyspace((unsigned char)l[g])) g++;
      size_t g0 = g;
      while (g < n && (isdig((unsigned char)l[g]) || l[g] == '-')) g++;
      if (g == g0 || g >= n || l[g] != ')') continue;
      tg = l + g0;
      tgl = g - g0;
      w = g + 1;
      while (w < n && pyspace((unsigned char)l[w])) w++;
    }
    if (w >= n || l[w] != '[') continue;
    size_t c = w + 1;
    while (c < n && isdig((unsigned char)l[c])) c++;
    if (c == w + 1 || c >= n || l[c] != ']') continue;
    /* Up to three tokens: flags, then the timestamp with its colon. */
    size_t t = c + 1;
    for (int tok = 0; tok < 3 && t < n; tok++) {
      while (t < n && pyspace((unsigned char)l[t])) t++;
      size_t t0 = t;
      while (t < n && !pyspace((unsigned char)l[t])) t++;
      size_t tl = t - t0;
      const char *ts = l + t0;
      if (tl < 4 || ts[tl - 1] != ':') continue;
      const char *dot = memchr(ts, '.', tl);
      if (!dot || dot == ts || dot + 1 >= ts + tl - 1) continue;
      int ok = 1;
      for (const char *q = ts; q < ts + tl - 1; q++)
        if (q != dot && !isdig((unsigned char)*q)) ok = 0;
      if (!ok) continue;
      /* the event */
      size_t e = t;
      while (e < n && pyspace((unsigned char)l[e])) e++;
      static const char tmw[] = "tracing_mark_write: ", pr[] = "print:";
      if (n - e >= sizeof tmw - 1 && memcmp(l + e, tmw, sizeof tmw - 1) == 0) {
        e += sizeof tmw - 1;
      } else if (n - e >= sizeof pr - 1 && memcmp(l + e, pr, sizeof pr - 1) == 0) {
        e += sizeof pr - 1;
        while (e < n && pyspace((unsigned char)l[e])) e++;
        size_t e0 = e;
        while (e < n && !pyspace((unsigned char)l[e])) e++;
        if (e > e0 && l[e - 1] == ':' && !(l[e0] == 'B' || l[e0] == 'E')) {
          while (e < n && pyspace((unsigned char)l[e])) e++;
        } else {
          e = e0;
        }
      } else {
        return 0;
      }
      if (e >= n || (l[e] != 'B' && l[e] != 'E')) return 0;
      m->task = l + start;
      m->task_len = k - start;
      m->tid = parse_ll(l + k + 1, d - k - 1);
      m->tgid_str = tg;
      m->tgid_len = tgl;
      m->ts = ts;
      m->ts_len = tl - 1;
      m->mark = l + e;
      m->mark_len = n - e;
      while (m->mark_len > 0 && pyspace((unsigned char)m->mark[m->mark_len - 1]) && m->mark[m->mark_len - 1] != ' ')
        m->mark_len--;
      return 1;
    }
    return 0;
  }
  return 0;
}

/* ---- tid -> tgid, as the old header format needs ----------------------- */

struct tgmap {
  long long *tid; /* entries in the order they came: a thread, its process id (a copy) and its length */
  const char **tg;
  size_t *tgl;
  size_t n, cap;
  lp__index_t ix;  /* entries by tid */
  size_t strings; /* the copies' bytes */
};

static uint32_t tg_hash(long long tid) { return lp__hash64((uint64_t)tid); }

/* What the table and its copies hold (lp_st_held). */
static size_t tg_bytes(const struct tgmap *t) {
  return t->cap * (sizeof *t->tid + sizeof *t->tg + sizeof *t->tgl) + lp__index_bytes(&t->ix) + t->strings;
}

/* tid's entry, or SIZE_MAX. */
static size_t tg_find(const struct tgmap *t, long long tid) {
  for (uint32_t at, k = lp__index_first(&t->ix, tg_hash(tid), &at); k; k = lp__index_next(&t->ix, &at))
    if (t->tid[k - 1] == tid) return k - 1;
  return SIZE_MAX;
}

static char *dupn(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

/* Records tid -> tgid (a copy); *stored points to the copy. */
static int tg_put(struct tgmap *t, long long tid, const char *tg, size_t tgl, const char **stored) {
  size_t k = tg_find(t, tid);
  if (k != SIZE_MAX) {
    if (t->tgl[k] != tgl || memcmp(t->tg[k], tg, tgl) != 0) {
      char *c = dupn(tg, tgl);
      if (!c) return -ENOMEM;
      free((void *)t->tg[k]);
      t->strings = t->strings - t->tgl[k] + tgl;
      t->tg[k] = c;
      t->tgl[k] = tgl;
    }
    *stored = t->tg[k];
    return 0;
  }
  if (t->n == t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 64;
    long long *tids = nc < UINT32_MAX / 2 ? realloc(t->tid, nc * sizeof *tids) : NULL;
    if (tids) t->tid = tids;
    const char **tgs = tids ? realloc(t->tg, nc * sizeof *tgs) : NULL;
    if (tgs) t->tg = tgs;
    size_t *tgls = tgs ? realloc(t->tgl, nc * sizeof *tgls) : NULL;
    if (!tgls) return -ENOMEM; /* what did grow is kept, unused past cap */
    t->tgl = tgls;
    t->cap = nc;
  }
  switch (lp_index_reserve(&t->ix, NULL, (uint32_t)t->n, 64)) {
  case -1: return -ENOMEM;
  case 1:
    for (size_t i = 0; i < t->n; i++) lp__index_put(&t->ix, tg_hash(t->tid[i]), (uint32_t)i);
  }
  char *c = dupn(tg, tgl);
  if (!c) return -ENOMEM;
  lp__index_put(&t->ix, tg_hash(tid), (uint32_t)t->n);
  t->tid[t->n] = tid;
  t->tg[t->n] = c;
  t->tgl[t->n] = tgl;
  t->n++;
  t->strings += tgl + 1;
  *stored = c;
  return 0;
}

static void tg_free(struct tgmap *t) {
  for (size_t i = 0; i < t->n; i++) free((void *)t->tg[i]);
  free(t->tid), free(t->tg), free(t->tgl);
  lp_index_free(&t->ix, NULL);
  memset(t, 0, sizeof *t);
}

static void seterr(struct lp_st_error *err, long lineno, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(struct lp_st_error *err, long lineno, const char *fmt, ...) {
  if (!err) return;
  va_list ap;
  va_start(ap, fmt);
  err->lineno = lineno;
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
}

static int is_header(const char *l, size_t n, int *aosp) {
  if (lp_st_has(l, n, HDR_TGID) || lp_st_has(l, n, HDR_OLD)) {
    *aosp = 1;
    return 1;
  }
  *aosp = 0;
  if (n > 0 && l[0] == '#' && lp_st_has(l, n, "TASK-PID") && lp_st_has(l, n, "TIMESTAMP") && lp_st_has(l, n, "FUNCTION")) return 1;
  if ((n >= 5 && memcmp(l, "cpus=", 5) == 0) || (n >= 10 && memcmp(l, "version = ", 10) == 0)) return 1;
  return 0;
}

static int all_dashes(const char *s, size_t n) {
  if (!n) return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] != '-') return 0;
  return 1;
}

void lp_st_init(struct lp_st_scanner *sc) { memset(sc, 0, sizeof *sc); }

void lp_st_fini(struct lp_st_scanner *sc) {
  struct tgmap *map = sc->map;
  if (map) {
    tg_free(map);
    free(map);
  }
  sc->map = NULL;
}

int lp_st_line(struct lp_st_scanner *sc, const char *l, size_t n, long lineno, lp_st_mark_cb cb, void *ctx,
               struct lp_st_error *err) {
  char tsbuf[64];
  if (sc->done) return 0;
  if (!sc->collecting) {
    int aosp;
    if (!is_header(l, n, &aosp)) return 0;
    sc->collecting = 1;
  } else if (lp_st_has(l, n, "</script>")) {
    sc->done = 1;
    return 0;
  }
  if (!sc->map) {
    sc->map = calloc(1, sizeof(struct tgmap));
    if (!sc->map) {
      seterr(err, lineno, "out of memory");
      return -1;
    }
  }
  struct tgmap *map = sc->map;
  struct lp_st_mark m;
  memset(&m, 0, sizeof m);
  long P = rightmost_ts(l, n);
  int ok = 0;
  if (P >= 0) ok = match_aosp(l, n, 1, P, &m) || match_aosp(l, n, 0, P, &m);
  if (!ok) {
    if (!lp_st_has(l, n, "tracing_mark_write") && !lp_st_has(l, n, "print:")) {
      if (lp_st_has(l, n, "HIDL::IDevice") || lp_st_has(l, n, "[NN_")) {
        seterr(err, lineno, "unreadable line: an NNAPI mark outside a tracing_mark_write line of the ftrace format");
        return -1;
      }
      return 0;
    }
    ok = match_ext(l, n, &m);
    if (ok) m.extended = 1;
  }
  if (!ok) {
    if (lp_st_has(l, n, "HIDL::IDevice") || lp_st_has(l, n, "[NN_") || lp_st_has(l, n, "tracing_mark_write: B") ||
        lp_st_has(l, n, "tracing_mark_write: E")) {
      seterr(err, lineno,
             "unreadable line: a tracing_mark_write B/E line must read \"<task>-<tid> [(<tgid>)] [<cpu>] ... "
             "<seconds>.<fraction>: tracing_mark_write: B|<pid>|<label>\"");
      return -1;
    }
    return 0;
  }
  m.lineno = lineno;
  m.line = l;
  m.line_len = n;
  /* the process */
  if (m.tgid_str && all_dashes(m.tgid_str, m.tgid_len)) {
    const char *q = m.mark + 1;
    size_t r = m.mark_len - 1, d = 0;
    if (r > 0 && q[0] == '|')
      while (1 + d < r && isdig((unsigned char)q[1 + d])) d++;
    if (d == 0) {
      seterr(err, lineno, "no process id: the TGID column is unknown (%.*s) and the mark has no %c|<pid>",
             (int)m.tgid_len, m.tgid_str, m.mark[0]);
      return -1;
    }
    m.tgid_str = q + 1;
    m.tgid_len = d;
  } else if (!m.tgid_str) {
    const char *bar = memchr(m.mark, '|', m.mark_len);
    if (bar) {
      const char *b2 = memchr(bar + 1, '|', (size_t)(m.mark + m.mark_len - bar - 1));
      m.tgid_str = bar + 1;
      m.tgid_len = (size_t)((b2 ? b2 : m.mark + m.mark_len) - bar - 1);
    } else {
      size_t slot = tg_find(map, m.tid);
      if (slot == SIZE_MAX) {
        seterr(err, lineno, "no process id: a bare %c on thread %lld, whose process no earlier line names",
               m.mark[0], m.tid);
        return -1;
      }
      m.tgid_str = map->tg[slot];
      m.tgid_len = map->tgl[slot];
    }
  }
  /* The table keeps pointers into the line: callers that stream must keep
   * process ids alive, so the scanner copies them. */
  if (tg_put(map, m.tid, m.tgid_str, m.tgid_len, &m.tgid_str) < 0) {
    seterr(err, lineno, "out of memory");
    return -1;
  }
  m.tgid = parse_ll(m.tgid_str, m.tgid_len);
  if (fast_ts(m.ts, m.ts_len, &m.t)) {
    /* exact */
  } else if (m.ts_len < sizeof tsbuf) {
    memcpy(tsbuf, m.ts, m.ts_len);
    tsbuf[m.ts_len] = 0;
    m.t = strtod(tsbuf, NULL);
  } else {
    char *tmp = malloc(m.ts_len + 1);
    if (!tmp) {
      seterr(err, lineno, "out of memory");
      return -1;
    }
    memcpy(tmp, m.ts, m.ts_len);
    tmp[m.ts_len] = 0;
    m.t = strtod(tmp, NULL);
    free(tmp);
  }
  return cb(ctx, &m);
}

int lp_st_scan(const char *buf, size_t len, lp_st_mark_cb cb, void *ctx, int *nheader,
               struct lp_st_error *err) {
  struct lp_st_scanner sc;
  int rc = 0;
  long lineno = 0;
  size_t pos = 0;
  lp_st_init(&sc);
  while (pos < len && !sc.done) {
    const char *l = buf + pos;
    const char *nl = memchr(l, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - l) : len - pos;
    const char *cr = memchr(l, '\r', n);
    if (cr) n = (size_t)(cr - l);
    pos += n;
    if (pos < len) pos += (buf[pos] == '\r' && pos + 1 < len && buf[pos + 1] == '\n') ? 2 : 1;
    lineno++;
    rc = lp_st_line(&sc, l, n, lineno, cb, ctx, err);
    if (rc) break;
  }
  if (nheader) *nheader = sc.collecting;
  lp_st_fini(&sc);
  return rc;
}

int lp_st_sniff(const char *buf, size_t len) {
  size_t n = len < 65536 ? len : 65536;
  /* Text has no NUL byte; a binary trace (Perfetto) whose labels hold these words does. */
  if (memchr(buf, '\0', n)) return 0;
  if (lp_st_has(buf, n, "TASK-PID") || lp_st_has(buf, n, "tracing_mark_write") || lp_st_has(buf, n, "trace-data")) return 1;
  /* the systrace viewer's HTML: no Chrome JSON starts with '<' */
  size_t i = 0;
  while (i < n && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n')) i++;
  if (i < n && buf[i] == '<') return 1;
  if (n - i >= 8 && memcmp(buf + i, "# tracer", 8) == 0) return 1;
  if ((n >= 5 && memcmp(buf, "cpus=", 5) == 0) || (n >= 10 && memcmp(buf, "version = ", 10) == 0)) return 1;
  return 0;
}

size_t lp_st_held(const struct lp_st_scanner *sc) { return sc->map ? tg_bytes(sc->map) : 0; }
