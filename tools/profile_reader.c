/*
 * profile_reader.c: profiles as input, the other way round from `folded` and
 * `pprof`: folded stacks (`main;work;kernel 123456` lines) and pprof's
 * profile.proto (plain or gzipped, as lp_input_t unzips any input).
 *
 * A profile has weights, not times, so each reader lays its stacks end to end
 * on one lane (pid 1, tid 1): a stack of weight W is open for W nanoseconds,
 * and frames shared with the previous stack stay open. Every view then sees
 * a stack's weight as the self time of its leaf, so tree, stats, folded,
 * pprof and flamegraph read profiles as they read timelines. Call counts only
 * count these intervals.
 *
 * Weights: a folded file's are taken as nanoseconds (as `labelprof folded`
 * writes them). In a pprof profile the readers take the sample type "wall",
 * else the first one in a unit of time, else the last one (pprof's default);
 * values in microseconds, milliseconds or seconds become nanoseconds. With
 * lp_read_cpu set (flamegraph --cpu) a pprof profile gives its "cpu" sample
 * type, and a folded file is taken to hold CPU weights (as written by
 * lp_profile_write_folded_ex with LP_PRINT_CPU); both then count themselves
 * in lp_read_cpu_files, so that a view can refuse inputs that hold no CPU time.
 *
 * Bad input: the position of the first byte that is wrong (a line and column
 * in a folded file, a byte offset in the decompressed protobuf) and what was
 * expected, LP_READ_BAD.
 */
#include "config.h"

#include "reader.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

bool lp_read_cpu;
unsigned lp_read_cpu_files;

int lp_no_cpu(const char *file) {
  fprintf(stderr,
          "labelprof: %s: no CPU time in this input (--cpu reads the 'cpu' sample type of a pprof profile, which "
          "labelprof writes only where CPU time was measured, LABELPROF_CPU=1; and folded stacks)\n",
          strcmp(file, "-") == 0 ? "<stdin>" : file);
  return LP_READ_BAD;
}

#define MAX_TIME ((int64_t)1 << 62)

/* ---- stacks laid end to end ------------------------------------------------------- */

typedef struct stacker {
  const lp_sink_t *sink;
  lp_pos_t pos;
  char **open; /* the labels of the open frames, root first */
  uint32_t nopen, cap;
  int64_t ts;
  bool outside; /* the last weight was outside any label: an instant ends the lane there */
  bool started; /* an event was sent */
} stacker_t;

#define OUTSIDE "(outside of any label)"

static int emit(stacker_t *s, lp_ev_kind_t kind, const char *name) {
  s->started = true;
  lp_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = kind;
  ev.pid = 1;
  ev.tid = 1;
  ev.ts = s->ts;
  ev.name = name;
  ev.pos = s->pos;
  return s->sink->event(s->sink->ctx, &ev);
}

/* Closes the open frames above depth keep. */
static int close_to(stacker_t *s, uint32_t keep) {
  while (s->nopen > keep) {
    int r = emit(s, LP_EV_END, s->open[s->nopen - 1]);
    free(s->open[--s->nopen]);
    if (r) return r;
  }
  return 0;
}

/*
 * One stack of n labels, root first, as label(i, ctx), of weight w > 0:
 * LP_READ_OK, LP_READ_BAD after a message, or what the sink returned.
 */
static int stack(stacker_t *s, uint32_t n, const char *(*label)(uint32_t i, void *ctx), void *ctx, int64_t w) {
  if (n == 1 && strcmp(label(0, ctx), OUTSIDE) == 0) n = 0; /* time in no label, as `folded` and `pprof` write it */
  s->outside = n == 0;
  if (s->outside && !s->started) { /* the lane starts at its first event: one marks the start */
    int r0 = emit(s, LP_EV_INSTANT, "(start of profile)");
    if (r0) return r0;
  }
  uint32_t same = 0;
  while (same < n && same < s->nopen && strcmp(s->open[same], label(same, ctx)) == 0) same++;
  int r = close_to(s, same);
  if (r) return r;
  if (n > s->cap) {
    char **o = realloc(s->open, (size_t)n * sizeof *o);
    if (!o) {
      lp_report(&s->pos, "out of memory");
      return LP_READ_BAD;
    }
    s->open = o;
    s->cap = n;
  }
  for (uint32_t i = same; i < n; i++) {
    const char *l = label(i, ctx);
    if (!(s->open[i] = strdup(l))) {
      lp_report(&s->pos, "out of memory");
      return LP_READ_BAD;
    }
    s->nopen = i + 1;
    if ((r = emit(s, LP_EV_BEGIN, l)) != 0) return r;
  }
  if (w >= MAX_TIME - s->ts) {
    lp_report(&s->pos, "the weights add up to 2^62 or more");
    return LP_READ_BAD;
  }
  s->ts += w;
  return 0;
}

static int stacker_end(stacker_t *s, int rc) {
  if (rc == LP_READ_OK) rc = close_to(s, 0);
  if (rc == LP_READ_OK && s->outside) rc = emit(s, LP_EV_INSTANT, "(end of profile)");
  for (uint32_t i = 0; i < s->nopen; i++) free(s->open[i]);
  free(s->open);
  return rc;
}

/* ---- folded stacks ---------------------------------------------------------------- */

/* A line of text, its weight after the last space: the stack's length, or 0 when it is not one. */
static size_t folded_line(const char *l, size_t n, int64_t *w) {
  if (n && l[n - 1] == '\r') n--;
  size_t sp = n;
  while (sp > 0 && l[sp - 1] != ' ') sp--;
  if (sp < 2 || sp == n) return 0;
  int64_t v = 0;
  for (size_t i = sp; i < n; i++) {
    if (l[i] < '0' || l[i] > '9' || v > (MAX_TIME - 9) / 10) return 0;
    v = v * 10 + (l[i] - '0');
  }
  *w = v;
  return sp - 1;
}

static int fo_sniff(const unsigned char *head, size_t n) {
  const char *h = (const char *)head, *nl = memchr(h, '\n', n);
  int64_t w;
  if (!nl || nl == h) return 0;
  for (const char *c = h; c < nl; c++)
    if ((unsigned char)*c < 0x20 && *c != '\t' && *c != '\r') return 0;
  return folded_line(h, (size_t)(nl - h), &w) != 0;
}

typedef struct { /* the labels of one line, split in place */
  char **v;
  uint32_t n, cap;
} labels_t;

static const char *fo_label(uint32_t i, void *ctx) { return ((labels_t *)ctx)->v[i]; }

static int fo_read(lp_input_t *in, const lp_sink_t *sink) {
  stacker_t s = {sink, {lp_input_name(in), 0, 0, 0}, NULL, 0, 0, 0, false, false};
  if (strcmp(s.pos.file, "-") == 0) s.pos.file = "<stdin>";
  labels_t ls = {NULL, 0, 0};
  size_t cap = 1 << 16, have = 0;
  char *buf = malloc(cap);
  int rc = LP_READ_OK;
  bool eof = false;
  uint64_t line = 0, base = 0;
  if (!buf) {
    lp_report(&s.pos, "out of memory");
    return LP_READ_BAD;
  }
  lp_read_cpu_files += lp_read_cpu;
  while (rc == LP_READ_OK) {
    char *nl = memchr(buf, '\n', have);
    if (!nl && !eof) {
      if (have == cap) {
        char *b = cap < ((size_t)1 << 30) ? realloc(buf, cap * 2) : NULL;
        if (!b) {
          s.pos.line = line + 1;
          s.pos.column = 1;
          lp_report(&s.pos, b || cap < ((size_t)1 << 30) ? "out of memory" : "a line longer than 1 GiB");
          rc = LP_READ_BAD;
          break;
        }
        buf = b;
        cap *= 2;
      }
      ssize_t got = lp_input_read(in, buf + have, cap - have);
      if (got < 0) {
        rc = LP_READ_BAD;
        break;
      }
      if (got == 0) eof = true;
      have += (size_t)got;
      continue;
    }
    if (!nl && have == 0) break;
    size_t len = nl ? (size_t)(nl - buf) : have;
    line++;
    s.pos.line = line;
    s.pos.column = 1;
    s.pos.offset = base;
    size_t sl = len && buf[len - 1] == '\r' ? len - 1 : len;
    if (sl > 0) {
      int64_t w;
      size_t stack_len = folded_line(buf, len, &w);
      if (!stack_len || memchr(buf, '\0', len)) {
        lp_report(&s.pos, "expected a folded stack: labels split by ';', a space and a whole number of nanoseconds");
        rc = LP_READ_BAD;
        break;
      }
      buf[stack_len] = '\0';
      ls.n = 0;
      for (char *p = buf;;) {
        if (ls.n == ls.cap) {
          uint32_t nc = ls.cap ? ls.cap * 2 : 64;
          char **v = realloc(ls.v, (size_t)nc * sizeof *v);
          if (!v) {
            lp_report(&s.pos, "out of memory");
            rc = LP_READ_BAD;
            break;
          }
          ls.v = v;
          ls.cap = nc;
        }
        ls.v[ls.n++] = p;
        char *semi = strchr(p, ';');
        if (!semi) break;
        *semi = '\0';
        p = semi + 1;
      }
      if (rc == LP_READ_OK && w > 0) rc = stack(&s, ls.n, fo_label, &ls, w);
    }
    size_t used = nl ? len + 1 : len;
    memmove(buf, buf + used, have - used);
    have -= used;
    base += used;
  }
  free(buf);
  free(ls.v);
  return stacker_end(&s, rc);
}

const lp_reader_t lp_folded_reader = {"folded", fo_sniff, fo_read};

/* ---- pprof's profile.proto ------------------------------------------------------------- */

#define PP_MAX_BYTES ((size_t)1 << 31) /* what a profile may decompress to */

typedef struct pp_func {
  uint64_t id, name;
} pp_func_t;
typedef struct pp_loc {
  uint64_t id;
  const uint8_t *lines; /* the Location message: its Line fields are read when used */
  size_t len;
} pp_loc_t;

typedef struct pp {
  const uint8_t *buf;
  size_t len;
  lp_pos_t pos;
  const char **strs;
  size_t *slen;
  uint64_t nstrs;
  pp_func_t *funcs;
  size_t nfuncs;
  pp_loc_t *locs;
  size_t nlocs;
  const char **stack; /* labels of the sample being laid, root first */
  uint32_t nstack, stack_cap;
  char **owned;       /* NUL-terminated copies of the strings */
} pp_t;

typedef struct pp_field {
  uint64_t num;
  unsigned wire;
  uint64_t v;       /* varint, fixed */
  const uint8_t *p; /* length-delimited: the bytes */
  size_t len;
  const uint8_t *at; /* where the field starts */
} pp_field_t;

static int pp_bad(pp_t *pp, const uint8_t *at, const char *what) {
  pp->pos.offset = (uint64_t)(at - pp->buf);
  lp_report(&pp->pos, "%s", what);
  return LP_READ_BAD;
}

static int pp_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p >= end) return -1;
    uint8_t b = *(*p)++;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return 0;
    }
  }
  return -1;
}

/* The next field of [*p, end): 1, 0 at the end, or LP_READ_BAD after a message. */
static int pp_next(pp_t *pp, const uint8_t **p, const uint8_t *end, pp_field_t *f) {
  if (*p >= end) return 0;
  f->at = *p;
  uint64_t key;
  if (pp_varint(p, end, &key) != 0) return pp_bad(pp, f->at, "a field's key is cut short (expected a varint)");
  f->num = key >> 3;
  f->wire = (unsigned)(key & 7);
  if (f->num == 0) return pp_bad(pp, f->at, "field number 0 (expected a protobuf field)");
  switch (f->wire) {
  case 0:
    if (pp_varint(p, end, &f->v) != 0) return pp_bad(pp, f->at, "a varint is cut short");
    return 1;
  case 1:
  case 5: {
    size_t k = f->wire == 1 ? 8 : 4;
    if ((size_t)(end - *p) < k) return pp_bad(pp, f->at, "a fixed-size field is cut short");
    f->v = 0;
    for (size_t i = 0; i < k; i++) f->v |= (uint64_t)(*p)[i] << (8 * i);
    *p += k;
    return 1;
  }
  case 2:
    if (pp_varint(p, end, &f->v) != 0 || f->v > (uint64_t)(end - *p))
      return pp_bad(pp, f->at, "a length-delimited field runs past its message");
    f->p = *p;
    f->len = (size_t)f->v;
    *p += f->len;
    return 1;
  default:
    return pp_bad(pp, f->at, "an unknown wire type (expected 0, 1, 2 or 5)");
  }
}

/* Repeated integers, packed or not: calls each(v, ctx) for every value. LP_READ_OK or LP_READ_BAD. */
static int pp_ints(pp_t *pp, const pp_field_t *f, int (*each)(uint64_t v, void *ctx), void *ctx) {
  if (f->wire == 0) return each(f->v, ctx);
  if (f->wire != 2) return pp_bad(pp, f->at, "expected an integer or packed integers");
  const uint8_t *q = f->p, *qe = f->p + f->len;
  while (q < qe) {
    uint64_t v;
    if (pp_varint(&q, qe, &v) != 0) return pp_bad(pp, q, "a packed varint is cut short");
    int r = each(v, ctx);
    if (r) return r;
  }
  return 0;
}

typedef struct { /* growable arrays of uint64 */
  uint64_t *v;
  size_t n, cap;
} u64s_t;

static int push_u64(uint64_t v, void *ctx) {
  u64s_t *a = ctx;
  if (a->n == a->cap) {
    size_t nc = a->cap ? a->cap * 2 : 16;
    uint64_t *p = realloc(a->v, nc * sizeof *p);
    if (!p) return -1;
    a->v = p;
    a->cap = nc;
  }
  a->v[a->n++] = v;
  return 0;
}

static int by_func_id(const void *a, const void *b) {
  uint64_t x = ((const pp_func_t *)a)->id, y = ((const pp_func_t *)b)->id;
  return x < y ? -1 : x > y;
}
static int by_loc_id(const void *a, const void *b) {
  uint64_t x = ((const pp_loc_t *)a)->id, y = ((const pp_loc_t *)b)->id;
  return x < y ? -1 : x > y;
}

static const char *pp_string(pp_t *pp, uint64_t i) { return i < pp->nstrs ? pp->strs[i] : NULL; }

static const char *pp_label(uint32_t i, void *ctx) { return ((pp_t *)ctx)->stack[i]; }

static int pp_push_label(pp_t *pp, const char *l) {
  if (pp->nstack == pp->stack_cap) {
    uint32_t nc = pp->stack_cap ? pp->stack_cap * 2 : 64;
    const char **v = realloc(pp->stack, (size_t)nc * sizeof *v);
    if (!v) return -1;
    pp->stack = v;
    pp->stack_cap = nc;
  }
  pp->stack[pp->nstack++] = l;
  return 0;
}

/* A location's functions, caller first (its Lines are leaf first), onto the stack. */
static int pp_location(pp_t *pp, const pp_field_t *sf, uint64_t id) {
  pp_loc_t key = {id, NULL, 0}, *l = bsearch(&key, pp->locs, pp->nlocs, sizeof *pp->locs, by_loc_id);
  if (!l) return pp_bad(pp, sf->at, "a sample names a location id that no Location has");
  const char *names[64];
  uint32_t n = 0;
  const uint8_t *p = l->lines, *end = l->lines + l->len;
  pp_field_t f;
  int r;
  while ((r = pp_next(pp, &p, end, &f)) == 1) {
    if (f.num != 4 || f.wire != 2) continue;
    const uint8_t *q = f.p, *qe = f.p + f.len;
    pp_field_t g;
    uint64_t fid = 0;
    while ((r = pp_next(pp, &q, qe, &g)) == 1)
      if (g.num == 1 && g.wire == 0) fid = g.v;
    if (r) return r;
    pp_func_t fk = {fid, 0}, *fn = bsearch(&fk, pp->funcs, pp->nfuncs, sizeof *pp->funcs, by_func_id);
    if (!fn) return pp_bad(pp, f.at, "a Line names a function id that no Function has");
    const char *name = pp_string(pp, fn->name);
    if (!name) return pp_bad(pp, f.at, "a Function's name is past the string table");
    if (n == 64) return pp_bad(pp, f.at, "more than 64 inlined lines in one Location");
    names[n++] = name;
  }
  if (r) return r;
  if (n == 0) return pp_bad(pp, sf->at, "a location has no line: labelprof needs function names");
  while (n > 0)
    if (pp_push_label(pp, names[--n]) != 0) return pp_bad(pp, sf->at, "out of memory");
  return 0;
}

static int pp_parse(pp_t *pp, const lp_sink_t *sink) {
  const uint8_t *p = pp->buf, *end = pp->buf + pp->len;
  pp_field_t f;
  int r, rc = LP_READ_OK;
  u64s_t types = {0}, nstr = {0}, locs = {0}, vals = {0};
  size_t nf = 0, nl = 0;
  stacker_t s = {sink, pp->pos, NULL, 0, 0, 0, false, false};
  /* First pass: count and check, find the strings, the sample types, functions and locations. */
  while ((r = pp_next(pp, &p, end, &f)) == 1) {
    if (f.num == 6 && f.wire == 2) {
      if (push_u64((uint64_t)(f.p - pp->buf), &nstr) != 0 || push_u64(f.len, &nstr) != 0) {
        r = pp_bad(pp, f.at, "out of memory");
        break;
      }
    } else if (f.num == 1 && f.wire == 2) {
      const uint8_t *q = f.p, *qe = f.p + f.len;
      pp_field_t g;
      uint64_t type = 0, unit = 0;
      while ((r = pp_next(pp, &q, qe, &g)) == 1) {
        if (g.num == 1 && g.wire == 0) type = g.v;
        if (g.num == 2 && g.wire == 0) unit = g.v;
      }
      if (r) break;
      if (push_u64(type, &types) != 0 || push_u64(unit, &types) != 0) {
        r = pp_bad(pp, f.at, "out of memory");
        break;
      }
    } else if (f.num == 5 && f.wire == 2) {
      nf++;
    } else if (f.num == 4 && f.wire == 2) {
      nl++;
    } else if (f.num >= 1 && f.num <= 6 && f.wire != 2) {
      r = pp_bad(pp, f.at, "expected a length-delimited field (sample_type, sample, location, function, string)");
      break;
    }
  }
  if ((rc = r) != 0) goto out;
  pp->nstrs = nstr.n / 2;
  pp->strs = calloc(pp->nstrs + 1, sizeof *pp->strs);
  pp->owned = calloc(pp->nstrs + 1, sizeof *pp->owned);
  pp->funcs = calloc(nf + 1, sizeof *pp->funcs);
  pp->locs = calloc(nl + 1, sizeof *pp->locs);
  if (!pp->strs || !pp->owned || !pp->funcs || !pp->locs) {
    rc = pp_bad(pp, pp->buf, "out of memory");
    goto out;
  }
  for (uint64_t i = 0; i < pp->nstrs; i++) {
    const uint8_t *str = pp->buf + nstr.v[2 * i];
    size_t n = (size_t)nstr.v[2 * i + 1];
    if (memchr(str, '\0', n)) {
      rc = pp_bad(pp, str, "a string holds a NUL byte");
      goto out;
    }
    if (!(pp->owned[i] = malloc(n + 1))) {
      rc = pp_bad(pp, str, "out of memory");
      goto out;
    }
    memcpy(pp->owned[i], str, n);
    pp->owned[i][n] = '\0';
    pp->strs[i] = pp->owned[i];
  }
  if (pp->nstrs == 0 || pp->strs[0][0]) {
    rc = pp_bad(pp, pp->buf, "the string table does not start with the empty string (is this a pprof profile?)");
    goto out;
  }
  /* The sample type to read. */
  size_t ntypes = types.n / 2, pick = ntypes;
  for (size_t i = 0; i < ntypes; i++) {
    const char *t = pp_string(pp, types.v[2 * i]), *u = pp_string(pp, types.v[2 * i + 1]);
    if (!t || !u) {
      rc = pp_bad(pp, pp->buf, "a sample type's name or unit is past the string table");
      goto out;
    }
    bool time = strcmp(u, "nanoseconds") == 0 || strcmp(u, "microseconds") == 0 || strcmp(u, "milliseconds") == 0 ||
                strcmp(u, "seconds") == 0;
    if (lp_read_cpu ? strcmp(t, "cpu") == 0 : strcmp(t, "wall") == 0) {
      pick = i;
      break;
    }
    if (!lp_read_cpu && time && pick == ntypes) pick = i;
  }
  if (pick == ntypes && !lp_read_cpu && ntypes) pick = ntypes - 1;
  if (pick == ntypes) {
    /* No cpu type: said as for any input without CPU time, not as a fault of the file. */
    rc = lp_read_cpu && ntypes ? lp_no_cpu(pp->pos.file) : pp_bad(pp, pp->buf, "the profile has no sample type");
    goto out;
  }
  const char *unit = pp_string(pp, types.v[2 * pick + 1]);
  int64_t mult = strcmp(unit, "microseconds") == 0 ? 1000
                 : strcmp(unit, "milliseconds") == 0 ? 1000000
                 : strcmp(unit, "seconds") == 0     ? 1000000000
                                                    : 1;
  /* Second pass: functions and locations, sorted by id. */
  for (p = pp->buf; (r = pp_next(pp, &p, end, &f)) == 1;) {
    if (f.num != 4 && f.num != 5) continue;
    const uint8_t *q = f.p, *qe = f.p + f.len;
    pp_field_t g;
    uint64_t id = 0, name = 0;
    while ((r = pp_next(pp, &q, qe, &g)) == 1) {
      if (g.num == 1 && g.wire == 0) id = g.v;
      if (f.num == 5 && g.num == 2 && g.wire == 0) name = g.v;
    }
    if (r) break;
    if (f.num == 5)
      pp->funcs[pp->nfuncs++] = (pp_func_t){id, name};
    else
      pp->locs[pp->nlocs++] = (pp_loc_t){id, f.p, f.len};
  }
  if ((rc = r) != 0) goto out;
  qsort(pp->funcs, pp->nfuncs, sizeof *pp->funcs, by_func_id);
  qsort(pp->locs, pp->nlocs, sizeof *pp->locs, by_loc_id);
  /* Third pass: the samples, in the file's order. */
  lp_read_cpu_files += lp_read_cpu;
  for (p = pp->buf; rc == LP_READ_OK && (r = pp_next(pp, &p, end, &f)) == 1;) {
    if (f.num != 2) continue;
    locs.n = vals.n = 0;
    const uint8_t *q = f.p, *qe = f.p + f.len;
    pp_field_t g;
    while (rc == LP_READ_OK && (r = pp_next(pp, &q, qe, &g)) == 1) {
      if (g.num == 1) rc = pp_ints(pp, &g, push_u64, &locs);
      else if (g.num == 2) rc = pp_ints(pp, &g, push_u64, &vals);
      if (rc < 0) rc = pp_bad(pp, g.at, "out of memory");
    }
    if (rc == LP_READ_OK) rc = r;
    if (rc != LP_READ_OK) break;
    if (vals.n != ntypes) {
      rc = pp_bad(pp, f.at, "a sample's count of values differs from the count of sample types");
      break;
    }
    int64_t v = (int64_t)vals.v[pick];
    if (v < 0 || v > MAX_TIME / mult) {
      rc = pp_bad(pp, f.at, "a sample's value is negative or beyond 2^62 ns");
      break;
    }
    if (v == 0 || locs.n == 0) continue;
    pp->nstack = 0;
    for (size_t i = locs.n; i-- > 0 && rc == LP_READ_OK;) rc = pp_location(pp, &f, locs.v[i]);
    s.pos.offset = (uint64_t)(f.at - pp->buf);
    if (rc == LP_READ_OK) rc = stack(&s, pp->nstack, pp_label, pp, v * mult);
  }
  if (rc == LP_READ_OK) rc = r;
out:
  rc = stacker_end(&s, rc);
  free(locs.v);
  free(vals.v);
  free(types.v);
  free(nstr.v);
  return rc;
}

/*
 * Profile.sample_type (field 1, a ValueType whose first field is type, 0x08)
 * or Profile.sample (field 2) first. Perfetto's packets start 0x0a too, but
 * no TracePacket field is number 1, so 0x0a LEN 0x08 is a profile.
 */
static int pp_sniff(const unsigned char *head, size_t n) {
  if (n < 3 || (head[0] != 0x0a && head[0] != 0x12)) return 0;
  size_t k = 1;
  while (k < n && k < 6 && (head[k] & 0x80)) k++;
  return k + 1 < n && (head[k + 1] == 0x08 || (head[0] == 0x12 && head[k + 1] == 0x0a));
}

static int pp_read(lp_input_t *in, const lp_sink_t *sink) {
  pp_t pp;
  memset(&pp, 0, sizeof pp);
  pp.pos.file = strcmp(lp_input_name(in), "-") == 0 ? "<stdin>" : lp_input_name(in);
  size_t cap = 1 << 16, have = 0;
  uint8_t *buf = malloc(cap);
  if (!buf) {
    lp_report(&pp.pos, "out of memory");
    return LP_READ_BAD;
  }
  for (;;) {
    if (have == cap) {
      uint8_t *b = cap < PP_MAX_BYTES ? realloc(buf, cap * 2) : NULL;
      if (!b) {
        pp.pos.offset = have;
        lp_report(&pp.pos, cap < PP_MAX_BYTES ? "out of memory" : "a pprof profile larger than 2 GiB");
        free(buf);
        return LP_READ_BAD;
      }
      buf = b;
      cap *= 2;
    }
    ssize_t got = lp_input_read(in, buf + have, cap - have);
    if (got < 0) {
      free(buf);
      return LP_READ_BAD;
    }
    if (got == 0) break;
    have += (size_t)got;
  }
  pp.buf = buf;
  pp.len = have;
  int rc = pp_parse(&pp, sink);
  for (uint64_t i = 0; pp.owned && i < pp.nstrs; i++) free(pp.owned[i]);
  free(pp.owned);
  free(pp.strs);
  free(pp.funcs);
  free(pp.locs);
  free(pp.stack);
  free(buf);
  return rc;
}

const lp_reader_t lp_pprof_reader = {"pprof", pp_sniff, pp_read};
