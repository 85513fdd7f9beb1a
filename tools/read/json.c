/*
 * json.c: Chrome Trace Event JSON, streamed with yajl.
 *
 * The input goes through yajl in 256 KiB chunks; the callbacks keep only the
 * fields of the event being read (name, cat, ph, pid, tid, ts, dur and the
 * args the views use) in buffers reused from one event to the next, and push
 * the event into the sink when its object closes. Memory is the longest
 * string and the nesting depth, whatever the file's size.
 *
 * Long tokens: yajl keeps a token that a chunk cuts in two and lexes it again
 * from its start with each further chunk, which is quadratic in its length.
 * So a small scanner walks each chunk first and hands yajl only whole
 * strings and numbers: one cut short stays in the reader's buffer until its
 * end arrives. A string longer than LP_READ_MAX_NAME (as written) is judged
 * where it passes the limit: a value the views keep (a name, a category, a
 * phase, the layer words) is refused there; any other (a key, an unused
 * arg, Chrome's systemTraceEvents text) goes to yajl as "" and its bytes are
 * skipped as they arrive. A number longer than MAX_NUMBER is refused.
 * Every buffer is counted in the sink's memory (--max-memory).
 *
 * Both forms are read: {"traceEvents":[...], ...} and a bare array, which
 * may lack its closing ']' (the format allows it for writers that crashed).
 * Numbers are parsed from their text (yajl_number), so microseconds with
 * three decimals become exact nanoseconds and an out-of-range value is an
 * error rather than a silent infinity.
 *
 * Positions: lines are counted incrementally up to each event's offset, so
 * every event and every error carries its line and column at O(1) amortised
 * cost per byte.
 */
#include "config.h"

#include "reader.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#define CHUNK (256u << 10)
#define MAX_STRING LP_READ_MAX_NAME /* a longer name is not a label */
#define MAX_NUMBER 1024             /* characters of a number: no time or id needs more */
#define MAX_DEPTH 1000              /* JSON nesting; deeper is not a trace */
#define MAX_SERIES 64         /* counter series in one 'C' event */
#define NS_LIMIT 4611686018427387904.0 /* 2^62 ns: 146 years */

typedef struct strbuf {
  char *s;
  size_t len, cap;
  bool set;
} strbuf_t;

enum field { F_NONE, F_PH, F_NAME, F_CAT, F_PID, F_TID, F_TS, F_DUR, F_ARGS };
enum form { FORM_NONE, FORM_OBJECT, FORM_ARRAY };

typedef struct jr {
  lp_input_t *in;
  const lp_sink_t *sink;
  lp_mem_t *mem;
  yajl_handle h;
  /* positions */
  const unsigned char *chunk; /* being parsed */
  uint64_t chunk_base;        /* offset of chunk[0] */
  uint64_t scan;              /* offset up to which lines are counted */
  uint64_t line, line_start;  /* line number at scan, offset of that line's first byte */
  /* structure */
  enum form form;
  unsigned depth;      /* containers open */
  uint8_t maps[MAX_DEPTH / 8 + 1]; /* bit d: the container at depth d (from 0) is an object */
  bool want_key;       /* the next string is a key of the innermost object */
  uint64_t last_end;   /* the input offset just past the last '{', '[', '}' or ']' yajl read: outside any string */
  unsigned ev_depth;   /* depth of the events array once open (0: not yet) */
  bool events_done;    /* the events array closed */
  bool top_key_events; /* the last key at depth 1 was "traceEvents" */
  bool saw_events;
  bool top_other;      /* the last key at depth 1 was "otherData" */
  char info_key[80];   /* the last key at depth 1, or in otherData: "KEY" or "otherData.KEY" (truncated) */
  enum field key;      /* the current key of the event */
  char arg_key[64];    /* the current key in args (truncated; only short keys matter) */
  /* the event being read */
  bool in_event;
  lp_pos_t ev_pos;
  strbuf_t ph, name, cat, layer, phase, mode, mname, series;
  bool has_pid, has_tid, has_ts, has_dur;
  int64_t pid, tid, ts, dur;
  unsigned nseries;
  size_t series_off[MAX_SERIES];
  double series_val[MAX_SERIES];
  /* outcome */
  int rc;          /* the sink's non-zero verdict */
  bool failed;     /* a message was printed */
} jr_t;

/* Offset of the byte yajl has consumed up to, in the whole input. */
static uint64_t here(jr_t *r) { return r->chunk_base + yajl_get_bytes_consumed(r->h); }
/* The last byte of the token just read: where a message about a value points. */
static uint64_t tok(jr_t *r) {
  uint64_t h = here(r);
  return h ? h - 1 : 0;
}

static lp_pos_t pos_at(jr_t *r, uint64_t off) {
  if (off == r->ev_pos.offset && off < r->scan) return r->ev_pos;
  if (off >= r->scan && off >= r->chunk_base) {
    const unsigned char *p = r->chunk + (r->scan - r->chunk_base), *end = r->chunk + (off - r->chunk_base);
    const unsigned char *last = p < end ? memrchr(p, '\n', (size_t)(end - p)) : NULL;
    if (last) { /* counted in bulk (the compiler's vector loop): a file of blank lines costs no call per line */
      uint64_t lines = 0;
      for (const unsigned char *q = p; q <= last; q++) lines += *q == '\n';
      r->line += lines;
      r->line_start = r->chunk_base + (uint64_t)(last - r->chunk) + 1;
    }
    r->scan = off;
  }
  lp_pos_t pos = {lp_input_name(r->in), off, r->line, off >= r->line_start ? off - r->line_start + 1 : 1};
  return pos;
}

static int fail(jr_t *r, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(jr_t *r, uint64_t off, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  lp_pos_t pos = pos_at(r, off);
  lp_report(&pos, "%s", msg);
  r->failed = true;
  return 0; /* yajl: stop */
}

/* Makes room for n bytes in b, counted in the reader's memory; 1, or 0 after a message. */
static int sb_room(jr_t *r, strbuf_t *b, size_t n) {
  if (n <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < n) cap *= 2;
  char *p = lp_mem_realloc(r->mem, b->s, b->cap, cap);
  if (!p) {
    lp_pos_t pos = pos_at(r, here(r));
    lp_mem_fail(r->mem, &pos);
    r->failed = true;
    return 0;
  }
  b->s = p;
  b->cap = cap;
  return 1;
}

/* A decoded string into b; a NUL decoded from \u0000 is written back as those six characters (lp_name_put). */
static int sb_set(jr_t *r, strbuf_t *b, const unsigned char *s, size_t n) {
  if (n > MAX_STRING) return fail(r, tok(r), "a string of %zu bytes; at most %zu are expected", n, MAX_STRING);
  size_t len = memchr(s, '\0', n) ? lp_name_len(s, n) : n;
  if (!sb_room(r, b, len + 1)) return 0;
  if (len == n) {
    memcpy(b->s, s, n);
    b->s[n] = '\0';
  } else {
    lp_name_put(b->s, s, n);
  }
  b->len = len;
  b->set = true;
  return 1;
}

/* Appends a NUL-terminated piece (counter series names, one after another). */
static int sb_append(jr_t *r, strbuf_t *b, const char *s, size_t n, size_t *at) {
  if (!sb_room(r, b, b->len + n + 1)) return 0;
  *at = b->len;
  memcpy(b->s + b->len, s, n);
  b->s[b->len + n] = '\0';
  b->len += n + 1;
  return 1;
}

static const char *field_name(enum field f) {
  switch (f) {
  case F_PH: return "ph";
  case F_NAME: return "name";
  case F_CAT: return "cat";
  case F_PID: return "pid";
  case F_TID: return "tid";
  case F_TS: return "ts";
  case F_DUR: return "dur";
  case F_ARGS: return "args";
  default: return "?";
  }
}

/*
 * A JSON number as an integer (pid, tid) or as microseconds turned into
 * nanoseconds (ts, dur). Plain decimals are converted exactly (rounded to the
 * nanosecond); exponents go through strtod. 1 on success.
 */
static int parse_us(const char *s, size_t n, int64_t *ns) {
  const char *p = s, *end = s + n;
  bool neg = p < end && *p == '-';
  if (neg) p++;
  if (p == end) return 0;
  uint64_t whole = 0;
  for (; p < end && *p >= '0' && *p <= '9'; p++) {
    whole = whole * 10 + (uint64_t)(*p - '0');
    if (whole > (uint64_t)4611686018427387ull) return 0; /* 2^62 ns in µs */
  }
  uint64_t frac = 0; /* nanoseconds */
  if (p < end && *p == '.') {
    p++;
    int digits = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++, digits++) {
      if (digits < 3) frac = frac * 10 + (uint64_t)(*p - '0');
      else if (digits == 3 && *p >= '5') frac++; /* round half up at the nanosecond */
    }
    for (int d = digits; d < 3; d++) frac *= 10;
  }
  if (p < end && (*p == 'e' || *p == 'E')) { /* rare: through strtod */
    char buf[64];
    if (n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    double v = strtod(buf, NULL) * 1000.0;
    if (errno || !isfinite(v) || fabs(v) >= NS_LIMIT) return 0;
    *ns = (int64_t)llround(v);
    return 1;
  }
  if (p != end) return 0;
  uint64_t v = whole * 1000 + frac;
  if (v >= (uint64_t)1 << 62) return 0; /* the fraction may carry past the limit: times stay within ±2^62 ns */
  *ns = neg ? -(int64_t)v : (int64_t)v;
  return 1;
}

static int parse_int(const char *s, size_t n, int64_t *out) {
  const char *p = s, *end = s + n;
  bool neg = p < end && *p == '-';
  if (neg) p++;
  if (p == end) return 0;
  uint64_t v = 0;
  for (; p < end && *p >= '0' && *p <= '9'; p++) {
    if (v > (UINT64_MAX - 9) / 10) return 0;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  if (p != end) { /* 12.0 and 1.2e1 are integers too */
    char buf[64];
    if (n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *stop;
    double d = strtod(buf, &stop);
    if (*stop || !(d == floor(d)) || fabs(d) >= 9.2e18) return 0;
    *out = (int64_t)d;
    return 1;
  }
  if (v > (uint64_t)INT64_MAX) return 0;
  *out = neg ? -(int64_t)v : (int64_t)v;
  return 1;
}

static void reset_event(jr_t *r) {
  r->ph.set = r->name.set = r->cat.set = r->layer.set = r->phase.set = r->mode.set = r->mname.set = false;
  r->series.len = 0;
  r->nseries = 0;
  r->has_pid = r->has_tid = r->has_ts = r->has_dur = false;
  r->pid = r->tid = r->ts = r->dur = 0;
  r->key = F_NONE;
}

static bool in_fields(const jr_t *r) { return r->in_event && r->depth == r->ev_depth + 1; }
static bool in_args(const jr_t *r) { return r->in_event && r->depth == r->ev_depth + 2 && r->key == F_ARGS; }

/* A value that is not where a value of its type is expected. */
static int wrong_type(jr_t *r, const char *found) {
  if (in_fields(r)) {
    const char *want = r->key == F_PH || r->key == F_NAME || r->key == F_CAT ? "a string"
                       : r->key == F_ARGS                                   ? "an object"
                       : r->key == F_PID || r->key == F_TID                 ? "an integer"
                                                                            : "a number";
    return fail(r, tok(r), "expected %s for \"%s\", found %s", want, field_name(r->key), found);
  }
  return fail(r, tok(r), "expected an event object in the trace's array, found %s", found);
}

/* Where a scalar lands: 1 = in the event's fields, 2 = in its args, 0 = nowhere of interest, -1 error. */
static int scalar_place(jr_t *r, const char *what) {
  if (r->in_event && r->depth == r->ev_depth + 1) return 1; /* the common case first */
  if (r->depth == 0) {
    fail(r, tok(r), "expected a JSON object or array, found %s", what);
    return -1;
  }
  if (r->ev_depth && !r->events_done && r->depth == r->ev_depth && !r->in_event) {
    wrong_type(r, what);
    return -1;
  }
  if (r->form == FORM_OBJECT && r->depth == 1 && r->top_key_events) {
    fail(r, tok(r), "expected an array for \"traceEvents\", found %s", what);
    return -1;
  }
  if (in_fields(r)) return 1;
  if (in_args(r)) return 2;
  return 0;
}

/*
 * A scalar member of the trace object or of its otherData: handed on as
 * LP_EV_FILE_INFO (what the file says about itself: labelprof's
 * events_dropped, session times, scope order). Long values are not of that
 * kind and are left out.
 */
static int file_info(jr_t *r, const char *text, size_t n) {
  if (r->in_event || r->form != FORM_OBJECT || !r->info_key[0]) return 1;
  if (!(r->depth == 1 || (r->depth == 2 && r->top_other))) return 1;
  char value[256];
  if (n >= sizeof value || memchr(text, 0, n)) return 1;
  memcpy(value, text, n);
  value[n] = '\0';
  lp_event_t ev = {0};
  ev.kind = LP_EV_FILE_INFO;
  ev.name = r->info_key;
  ev.text = value;
  ev.pos = pos_at(r, tok(r));
  int rc = r->sink->event(r->sink->ctx, &ev);
  if (rc) {
    r->rc = rc;
    return 0;
  }
  return 1;
}

/* A value ended (or is about to): in an object, a key comes next. */
static void value_done(jr_t *r) {
  unsigned d = r->depth - 1;
  r->want_key = r->depth && (r->maps[d / 8] >> (d % 8) & 1);
}

/*
 * Whether the string yajl would read next is one the views keep: a value of
 * "ph", "name" or "cat" in an event, or of args.layer, .phase, .mode, .name.
 * (Judged from the callbacks so far, before the string is read.)
 */
static bool kept_string(const jr_t *r) {
  if (r->want_key) return false;
  if (in_fields(r)) return r->key == F_PH || r->key == F_NAME || r->key == F_CAT;
  return in_args(r) && (strcmp(r->arg_key, "layer") == 0 || strcmp(r->arg_key, "phase") == 0 ||
                        strcmp(r->arg_key, "mode") == 0 || strcmp(r->arg_key, "name") == 0);
}

static int cb_null(void *ctx) {
  jr_t *r = ctx;
  value_done(r);
  int at = scalar_place(r, "null");
  if (at < 0) return 0;
  if (at == 1 && r->key != F_NONE && r->key != F_CAT) return wrong_type(r, "null");
  return 1;
}

static int cb_boolean(void *ctx, int v) {
  jr_t *r = ctx;
  value_done(r);
  int at = scalar_place(r, v ? "true" : "false");
  if (at < 0) return 0;
  if (at == 1 && r->key != F_NONE) return wrong_type(r, "a boolean");
  if (at == 0) return file_info(r, v ? "true" : "false", v ? 4 : 5);
  return 1;
}

static int cb_number(void *ctx, const char *s, size_t n) {
  jr_t *r = ctx;
  value_done(r);
  int at = scalar_place(r, "a number");
  if (at < 0) return 0;
  if (at == 1) {
    switch (r->key) {
    case F_PID:
    case F_TID: {
      int64_t v;
      if (!parse_int(s, n, &v))
        return fail(r, tok(r), "expected an integer for \"%s\", found %.*s", field_name(r->key), (int)(n > 40 ? 40 : n), s);
      if (r->key == F_PID) r->pid = v, r->has_pid = true;
      else r->tid = v, r->has_tid = true;
      return 1;
    }
    case F_TS:
    case F_DUR: {
      int64_t v;
      if (!parse_us(s, n, &v))
        return fail(r, tok(r), "expected microseconds for \"%s\" (less than 2^62 ns: at most 4611686018427387.903 "
                    "either side of 0), found %.*s", field_name(r->key), (int)(n > 40 ? 40 : n), s);
      if (r->key == F_TS) r->ts = v, r->has_ts = true;
      else r->dur = v, r->has_dur = true;
      return 1;
    }
    case F_NONE: return 1;
    default: return wrong_type(r, "a number");
    }
  }
  if (at == 2 && r->nseries < MAX_SERIES) {
    char buf[64];
    if (n >= sizeof buf) return 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    if (!isfinite(v)) return 1;
    size_t off = 0;
    if (!sb_append(r, &r->series, r->arg_key, strlen(r->arg_key), &off)) return 0;
    r->series_off[r->nseries] = off;
    r->series_val[r->nseries++] = v;
  }
  if (at == 0) return file_info(r, s, n);
  return 1;
}

static int cb_string(void *ctx, const unsigned char *s, size_t n) {
  jr_t *r = ctx;
  value_done(r);
  int at = scalar_place(r, "a string");
  if (at < 0) return 0;
  if (at == 1) {
    switch (r->key) {
    case F_PH: return sb_set(r, &r->ph, s, n);
    case F_NAME: return sb_set(r, &r->name, s, n);
    case F_CAT: return sb_set(r, &r->cat, s, n);
    case F_NONE: return 1;
    default: return wrong_type(r, "a string");
    }
  }
  if (at == 2) {
    if (strcmp(r->arg_key, "layer") == 0) return sb_set(r, &r->layer, s, n);
    if (strcmp(r->arg_key, "phase") == 0) return sb_set(r, &r->phase, s, n);
    if (strcmp(r->arg_key, "mode") == 0) return sb_set(r, &r->mode, s, n);
    if (strcmp(r->arg_key, "name") == 0) return sb_set(r, &r->mname, s, n);
  }
  if (at == 0) return file_info(r, (const char *)s, n);
  return 1;
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t n) {
  jr_t *r = ctx;
  r->want_key = false;
  if (r->form == FORM_OBJECT && r->depth == 1) {
    r->top_key_events = n == 11 && memcmp(s, "traceEvents", 11) == 0;
    r->top_other = n == 9 && memcmp(s, "otherData", 9) == 0;
    size_t k = n < sizeof r->info_key - 1 ? n : sizeof r->info_key - 1;
    memcpy(r->info_key, s, k);
    r->info_key[k] = '\0';
    if (memchr(r->info_key, 0, k)) r->info_key[0] = '\0';
    if (r->top_key_events && r->saw_events) return fail(r, here(r), "a second \"traceEvents\" array");
    return 1;
  }
  if (r->form == FORM_OBJECT && r->depth == 2 && r->top_other) {
    int k = snprintf(r->info_key, sizeof r->info_key, "otherData.%.*s", (int)(n < 64 ? n : 64), (const char *)s);
    if (k < 0 || memchr(s, 0, n)) r->info_key[0] = '\0';
    return 1;
  }
  if (in_fields(r)) {
    r->key = F_NONE;
    if (n == 2 && memcmp(s, "ph", 2) == 0) r->key = F_PH;
    else if (n == 4 && memcmp(s, "name", 4) == 0) r->key = F_NAME;
    else if (n == 3 && memcmp(s, "cat", 3) == 0) r->key = F_CAT;
    else if (n == 3 && memcmp(s, "pid", 3) == 0) r->key = F_PID;
    else if (n == 3 && memcmp(s, "tid", 3) == 0) r->key = F_TID;
    else if (n == 2 && memcmp(s, "ts", 2) == 0) r->key = F_TS;
    else if (n == 3 && memcmp(s, "dur", 3) == 0) r->key = F_DUR;
    else if (n == 4 && memcmp(s, "args", 4) == 0) r->key = F_ARGS;
    return 1;
  }
  if (in_args(r)) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 7 <= sizeof r->arg_key; i++) { /* a NUL as in sb_set (lp_name_put) */
      if (s[i]) {
        r->arg_key[k++] = (char)s[i];
      } else {
        memcpy(r->arg_key + k, "\\u0000", 6);
        k += 6;
      }
    }
    r->arg_key[k] = '\0';
  }
  return 1;
}

static int open_container(jr_t *r, bool map) {
  if (r->depth >= MAX_DEPTH) return fail(r, here(r), "JSON nested deeper than %d levels", MAX_DEPTH);
  if (r->depth == 0) {
    r->form = map ? FORM_OBJECT : FORM_ARRAY;
    if (!map) r->ev_depth = 1, r->saw_events = true;
  } else if (r->form == FORM_OBJECT && r->depth == 1 && r->top_key_events) {
    if (map) return fail(r, here(r) - 1, "expected an array for \"traceEvents\", found an object");
    r->ev_depth = 2;
    r->saw_events = true;
  } else if (r->ev_depth && !r->events_done && r->depth == r->ev_depth) {
    if (!map) return fail(r, here(r) - 1, "expected an event object in the trace's array, found an array");
    r->in_event = true;
    reset_event(r);
    r->ev_pos = pos_at(r, here(r) - 1);
  } else if (in_fields(r)) {
    if (r->key != F_ARGS && r->key != F_NONE) return wrong_type(r, map ? "an object" : "an array");
    if (r->key == F_ARGS && !map) return wrong_type(r, "an array");
  }
  r->maps[r->depth / 8] = (uint8_t)((r->maps[r->depth / 8] & ~(1u << r->depth % 8)) | (unsigned)map << r->depth % 8);
  r->depth++;
  r->want_key = map;
  r->last_end = here(r);
  return 1;
}

static int cb_start_map(void *ctx) { return open_container(ctx, true); }
static int cb_start_array(void *ctx) { return open_container(ctx, false); }

static int emit(jr_t *r, lp_event_t *ev) {
  int rc = r->sink->event(r->sink->ctx, ev);
  if (rc) {
    r->rc = rc;
    return 0;
  }
  return 1;
}

/* The event's object closed: check it and hand it on. */
static int finish_event(jr_t *r) {
  lp_event_t ev = {0};
  ev.pid = r->pid;
  ev.tid = r->tid;
  ev.ts = r->ts;
  ev.name = r->name.set ? r->name.s : "";
  ev.category = r->cat.set ? r->cat.s : NULL;
  ev.layer = r->layer.set ? r->layer.s : NULL;
  ev.phase = r->phase.set ? r->phase.s : NULL;
  ev.mode = r->mode.set ? r->mode.s : NULL;
  ev.pos = r->ev_pos;
  uint64_t end = here(r);
  if (!r->ph.set) return fail(r, r->ev_pos.offset, "an event without \"ph\" (expected \"ph\":\"X\", \"B\", \"E\", ...)");
  const char *ph = r->ph.s;
  char c = r->ph.len == 1 ? ph[0] : '?';
  bool timed = c == 'X' || c == 'B' || c == 'E' || c == 'i' || c == 'I' || c == 'C';
  if (timed && !r->has_ts) return fail(r, end - 1, "a \"%c\" event without \"ts\"", c);
  switch (c) {
  case 'X':
    if (!r->has_dur) return fail(r, end - 1, "an \"X\" event without \"dur\"");
    if (r->dur < 0) return fail(r, end - 1, "a negative \"dur\"");
    if (r->ts > 0 && r->dur > INT64_MAX / 2 - r->ts) return fail(r, end - 1, "\"ts\" + \"dur\" out of range");
    ev.kind = LP_EV_COMPLETE;
    ev.dur = r->dur;
    return emit(r, &ev);
  case 'B': ev.kind = LP_EV_BEGIN; return emit(r, &ev);
  case 'E': ev.kind = LP_EV_END; return emit(r, &ev);
  case 'i':
  case 'I': ev.kind = LP_EV_INSTANT; return emit(r, &ev);
  case 'C':
    ev.kind = LP_EV_COUNTER;
    for (unsigned i = 0; i < r->nseries; i++) {
      ev.series = r->series.s + r->series_off[i];
      ev.value = r->series_val[i];
      if (!emit(r, &ev)) return 0;
    }
    return 1;
  case 'M':
    ev.ts = 0;
    if (strcmp(ev.name, "thread_name") == 0 || strcmp(ev.name, "process_name") == 0) {
      if (!r->mname.set) return 1;
      ev.kind = ev.name[0] == 't' ? LP_EV_THREAD_NAME : LP_EV_PROCESS_NAME;
      ev.name = r->mname.s;
      return emit(r, &ev);
    }
    return 1; /* sort indexes, labels: nothing to do */
  default:
    ev.kind = LP_EV_SKIPPED;
    ev.name = ph;
    return emit(r, &ev);
  }
}

static int close_container(jr_t *r) {
  r->depth--;
  value_done(r);
  r->last_end = here(r);
  if (r->in_event && r->depth == r->ev_depth) {
    r->in_event = false;
    return finish_event(r);
  }
  if (r->ev_depth && r->depth == r->ev_depth - 1) {
    r->events_done = true;
    r->top_key_events = false;
  }
  return 1;
}

static int cb_end(void *ctx) { return close_container(ctx); }

static const yajl_callbacks callbacks = {
    cb_null, cb_boolean, NULL, NULL, cb_number, cb_string, cb_start_map, cb_map_key, cb_end, cb_start_array, cb_end,
};

/* A control character other than a blank: never in JSON text, in nearly every protobuf message. */
static bool not_text(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') return true;
  return false;
}

static int sniff(const unsigned char *head, size_t n) {
  /* "\n[" and "\n{" also start a Perfetto trace whose first packet is 91 or 123 bytes long (0x0a, its length):
     when those bytes are there, parse as a packet and hold a byte that JSON text cannot, the file is that trace. */
  if (n >= 2 && head[0] == '\n' && (head[1] == '[' || head[1] == '{') && n >= 2 + (size_t)head[1] &&
      not_text(head + 2, head[1]) && lp_perfetto_reader.sniff(head, n))
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (head[i] == '{' || head[i] == '[') return 1;
    if (head[i] != ' ' && head[i] != '\t' && head[i] != '\r' && head[i] != '\n') return 0;
  }
  return 0;
}

/* yajl's own message, first line only, for text that is not JSON. */
static int syntax_error(jr_t *r, const unsigned char *buf, size_t len) {
  unsigned char *msg = yajl_get_error(r->h, 0, buf, len);
  char text[256];
  snprintf(text, sizeof text, "%s", msg ? (const char *)msg : "invalid JSON");
  if (msg) yajl_free_error(r->h, msg);
  text[strcspn(text, "\n")] = '\0';
  uint64_t off = here(r);
  fail(r, off ? off - 1 : 0, "invalid JSON (%s)", text);
  return LP_READ_BAD;
}

/* ---- long tokens (see the note at the top) ---- */

/*
 * A token yajl holds cut short at the end of what it was given: where it
 * began, and for a string what yajl needs to end it cleanly (the rest of an
 * escape or of a UTF-8 sequence).
 */
enum held_kind { HELD_NONE, HELD_STRING, HELD_NUMBER };
typedef struct held {
  enum held_kind kind;
  uint64_t start;  /* the input offset of its first byte (the quote of a string) */
  unsigned esc;    /* a string: 1 after a backslash, 2 to 5 in a \u escape with 5 - esc hex digits to come */
  unsigned utf8;   /* a string: continuation bytes of a UTF-8 sequence to come */
} held_t;

typedef struct feed {
  unsigned char *buf;
  size_t cap, have; /* buf[0..have) read and not given to yajl */
  size_t scanned;   /* buf[0..scanned) looked at for the end of the held token */
  uint64_t base;    /* the input offset of buf[0] */
  held_t held;
  bool skipping;    /* the held string was too long: its bytes are dropped until it ends */
  bool esc;         /* while looking for a string's end: the last byte was a backslash */
  bool nonblank;    /* anything but blanks so far */
} feed_t;

/* Gives yajl n bytes that are at input offset `at`, and counts their lines: 0, or the pass's verdict. */
static int give(jr_t *r, const unsigned char *p, size_t n, uint64_t at) {
  if (!n) return 0;
  r->chunk = p;
  r->chunk_base = at;
  if (r->scan < at) r->scan = at; /* what lies between was a skipped string: no line ends in it */
  yajl_status st = yajl_parse(r->h, p, n);
  if (st == yajl_status_client_canceled) return r->rc ? r->rc : LP_READ_BAD;
  if (st == yajl_status_error) return syntax_error(r, p, n);
  pos_at(r, at + n);
  return 0;
}

static bool num_char(unsigned char c) { return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'; }

/*
 * After yajl took p[0..n) (at input offset `at`): what it holds cut short,
 * found by reading the tokens to the end from the last bracket yajl read or
 * from p[from], whichever is later (both are outside any string): in the
 * common case one event's bytes, and never a byte twice.
 */
static held_t held_tail(const jr_t *r, const unsigned char *p, size_t n, uint64_t at, size_t from) {
  held_t h = {HELD_NONE, 0, 0, 0};
  size_t i = r->last_end > at + from ? (size_t)(r->last_end - at) : from;
  while (i < n) {
    unsigned char c = p[i];
    if (c == '"') {
      h = (held_t){HELD_STRING, at + i, 0, 0};
      for (i++; i < n; i++) {
        c = p[i];
        if (h.utf8) {
          h.utf8--;
        } else if (h.esc == 1) {
          h.esc = c == 'u' ? 2 : 0;
        } else if (h.esc) {
          h.esc = h.esc == 5 ? 0 : h.esc + 1;
        } else if (c == '\\') {
          h.esc = 1;
        } else if (c == '"') {
          break;
        } else if (c >= 0xc0) {
          h.utf8 = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
        }
      }
      if (i == n) return h;
      h.kind = HELD_NONE; /* a whole string */
      i++;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t s = i;
      while (i < n && num_char(p[i])) i++;
      if (i == n) return (held_t){HELD_NUMBER, at + s, 0, 0};
    } else {
      i++;
    }
  }
  return h;
}

/*
 * What ends yajl's part of a held string that is being skipped: the rest of
 * its escape or UTF-8 sequence, an escaped NUL (so that a key cut short
 * cannot become a key the reader knows), and the quote.
 */
static size_t string_end(const held_t *h, char *out) {
  size_t n = 0;
  if (h->esc == 1) out[n++] = '/';
  for (unsigned k = h->esc >= 2 ? 6 - h->esc : 0; k > 0; k--) out[n++] = '0';
  for (unsigned k = h->utf8; k > 0; k--) out[n++] = (char)0x80;
  memcpy(out + n, "\\u0000\"", 7);
  return n + 7;
}

/*
 * Gives yajl what is in the buffer from byte `from`, as a chunk of its own,
 * then notes what it holds, reading the tokens from byte `outside` on: a
 * place outside any string (the buffer's start unless it begins with the
 * rest of a token yajl held).
 */
static int give_buffer(jr_t *r, feed_t *f, size_t from, size_t outside) {
  uint64_t at = f->base + from;
  int rc = give(r, f->buf + from, f->have - from, at);
  if (rc) return rc;
  f->held = held_tail(r, f->buf + from, f->have - from, at, outside - from);
  f->esc = f->held.esc == 1;
  f->base += f->have;
  f->have = f->scanned = 0;
  return 0;
}

static void point_at(jr_t *r, const feed_t *f) {
  r->chunk = f->buf;
  r->chunk_base = f->base;
  if (r->scan < r->chunk_base) r->scan = r->chunk_base;
}

/*
 * The bytes after a held token: looked at for its end, which lets yajl have
 * them all in one call (it lexes its held part once more, not once per
 * chunk). A string past MAX_STRING is refused when the views keep it, and
 * else ended for yajl and skipped; a number past MAX_NUMBER is refused.
 * 0, or the pass's verdict.
 */
static int held_more(jr_t *r, feed_t *f) {
  const unsigned char *p = f->buf + f->scanned, *end = f->buf + f->have;
  if (f->held.kind == HELD_NUMBER) {
    while (p < end && num_char(*p)) p++;
    f->scanned = (size_t)(p - f->buf);
    if (f->base + f->scanned - f->held.start > MAX_NUMBER) {
      point_at(r, f);
      fail(r, f->held.start + MAX_NUMBER, "a number longer than 1024 characters: no time or id is that long");
      return LP_READ_BAD;
    }
    return p < end ? give_buffer(r, f, 0, f->scanned) : 0;
  }
  while (p < end) {
    if (f->esc) {
      f->esc = false;
      p++;
      continue;
    }
    if (f->skipping && *p < 0x20) {
      point_at(r, f);
      fail(r, f->base + (uint64_t)(p - f->buf), "invalid JSON (a control character in a string)");
      return LP_READ_BAD;
    }
    if (*p == '\\') f->esc = true;
    else if (*p == '"') break;
    p++;
  }
  f->scanned = (size_t)(p - f->buf);
  if (f->skipping) { /* dropped as they arrive */
    if (p == end) {
      f->base += f->have;
      f->have = f->scanned = 0;
      return 0;
    }
    f->skipping = false;
    return give_buffer(r, f, f->scanned + 1, f->scanned + 1);
  }
  if (p < end) return give_buffer(r, f, 0, f->scanned + 1); /* past the string's closing quote */
  if (f->base + f->have - f->held.start - 1 <= MAX_STRING) return 0; /* more to come */
  point_at(r, f);
  if (kept_string(r)) {
    fail(r, f->held.start + 1 + MAX_STRING,
         "a string longer than 1 MiB where a name, a category, a phase or a layer is expected: no label is that long "
         "(the limit acts here, as the bytes arrive)");
    return LP_READ_BAD;
  }
  char tail[16];
  int rc = give(r, (const unsigned char *)tail, string_end(&f->held, tail), f->base);
  if (rc) return rc;
  f->skipping = true;
  f->base += f->have;
  f->have = f->scanned = 0;
  return 0;
}

/* Reads more input after what the buffer holds, growing it for a held token that fills it. 0 at the end. */
static ssize_t refill(jr_t *r, feed_t *f) {
  if (f->have == f->cap) { /* at most MAX_STRING + CHUNK: the held token is refused or skipped past MAX_STRING */
    unsigned char *nb = lp_mem_realloc(r->mem, f->buf, f->cap, f->cap * 2);
    if (!nb) {
      lp_pos_t pos = {lp_input_name(r->in), f->base + f->have, 0, 0};
      lp_mem_fail(r->mem, &pos);
      return -1;
    }
    f->buf = nb;
    f->cap *= 2;
  }
  ssize_t n = lp_input_read(r->in, f->buf + f->have, f->cap - f->have);
  if (n <= 0) return n;
  for (size_t i = f->have; !f->nonblank && i < f->have + (size_t)n; i++) /* only until the first that is not blank */
    f->nonblank = !(f->buf[i] == ' ' || f->buf[i] == '\n' || f->buf[i] == '\t' || f->buf[i] == '\r');
  f->have += (size_t)n;
  return n;
}

static int read_json(lp_input_t *in, const lp_sink_t *sink) {
  jr_t r = {0};
  r.in = in;
  r.sink = sink;
  r.mem = sink->mem;
  r.line = 1;
  int rc = LP_READ_OK;
  feed_t f = {0};
  f.buf = lp_mem_realloc(r.mem, NULL, 0, CHUNK);
  f.cap = CHUNK;
  r.h = yajl_alloc(&callbacks, NULL, &r);
  if (!f.buf || !r.h) {
    lp_pos_t pos = {lp_input_name(in), 0, 0, 0};
    rc = lp_mem_fail(r.mem, &pos);
    goto out;
  }
  /* Partial values: an array form without its ']' is accepted below, once we know where it stopped. */
  yajl_config(r.h, yajl_allow_partial_values, 1);
  for (;;) {
    ssize_t n = refill(&r, &f);
    if (n < 0) {
      rc = LP_READ_BAD;
      goto out;
    }
    if (n == 0) break;
    rc = f.held.kind == HELD_NONE ? give_buffer(&r, &f, 0, 0) : held_more(&r, &f);
    if (rc) goto out;
  }
  /* The end: what is left goes as it is (a token cut short: yajl says what is missing). */
  if (!f.skipping && (rc = give(&r, f.buf, f.have, f.base)) != 0) goto out;
  uint64_t total = f.base + f.have;
  point_at(&r, &f);
  lp_pos_t endpos = pos_at(&r, total);
  if (!f.nonblank) {
    lp_report(&endpos, "empty input: expected a trace (a JSON object or array)");
    rc = LP_READ_BAD;
    goto out;
  }
  r.chunk = (const unsigned char *)"";
  r.chunk_base = total;
  yajl_status st = yajl_complete_parse(r.h);
  if (st == yajl_status_client_canceled) {
    rc = r.rc ? r.rc : LP_READ_BAD;
    goto out;
  }
  if (st == yajl_status_error) {
    rc = syntax_error(&r, (const unsigned char *)"", 0);
    goto out;
  }
  if (r.depth > 0) {
    /* Truncated. A bare array that stopped between events is a crashed writer's file: fine. */
    if (r.form == FORM_ARRAY && r.depth == 1) goto out;
    lp_report(&endpos, "unexpected end of input inside %s (expected %s)",
              r.in_event ? "an event" : r.depth == 1 ? "the trace object" : "the trace",
              r.in_event && r.depth == r.ev_depth + 1 ? "the event to close with '}'"
              : r.form == FORM_OBJECT && r.depth == 1  ? "'}'"
                                                       : "more of the trace");
    rc = LP_READ_BAD;
    goto out;
  }
  if (r.form == FORM_OBJECT && !r.saw_events) {
    lp_report(&endpos, "no \"traceEvents\" array in the trace object");
    rc = LP_READ_BAD;
  }
out:
  if (r.failed && rc == LP_READ_OK) rc = LP_READ_BAD;
  if (r.h) yajl_free(r.h);
  lp_mem_free(r.mem, f.buf, f.cap);
  strbuf_t *bufs[] = {&r.ph, &r.name, &r.cat, &r.layer, &r.phase, &r.mode, &r.mname, &r.series};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) lp_mem_free(r.mem, bufs[i]->s, bufs[i]->cap);
  return rc;
}

const lp_reader_t lp_json_reader = {"chrome-json", sniff, read_json};
