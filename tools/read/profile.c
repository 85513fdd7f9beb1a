/*
 * profile.c: profiles as input, the other way round from `folded` and
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

#include "protobuf.h"
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
  char **open; /* the labels of the open frames, root first, counted in sink->mem */
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

static void drop_label(stacker_t *s, char *l) { lp_mem_free(s->sink->mem, l, strlen(l) + 1); }

/* Closes the open frames above depth keep. */
static int close_to(stacker_t *s, uint32_t keep) {
  while (s->nopen > keep) {
    int r = emit(s, LP_EV_END, s->open[s->nopen - 1]);
    drop_label(s, s->open[--s->nopen]);
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
  lp_mem_t *mem = s->sink->mem;
  if (n > s->cap) {
    char **o = lp_mem_realloc(mem, s->open, (size_t)s->cap * sizeof *o, (size_t)n * sizeof *o);
    if (!o) return lp_mem_fail(mem, &s->pos);
    s->open = o;
    s->cap = n;
  }
  for (uint32_t i = same; i < n; i++) {
    const char *l = label(i, ctx);
    size_t len = strlen(l) + 1;
    if (!(s->open[i] = lp_mem_realloc(mem, NULL, 0, len))) return lp_mem_fail(mem, &s->pos);
    memcpy(s->open[i], l, len);
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
  for (uint32_t i = 0; i < s->nopen; i++) drop_label(s, s->open[i]);
  lp_mem_free(s->sink->mem, s->open, (size_t)s->cap * sizeof *s->open);
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

/*
 * A first line that ends in " NUMBER"; or, for a first line longer than the
 * bytes peeked (a deep stack), text with a ';' in it and no control
 * character (JSON and systrace, which also are text, are tried first).
 */
static int fo_sniff(const unsigned char *head, size_t n) {
  const char *h = (const char *)head, *nl = memchr(h, '\n', n), *end = nl ? nl : h + n;
  int64_t w;
  if (end == h) return 0;
  for (const char *c = h; c < end; c++)
    if ((unsigned char)*c < 0x20 && *c != '\t' && *c != '\r') return 0;
  if (!nl) return n >= 256 && memchr(h, ';', n) != NULL;
  return folded_line(h, (size_t)(nl - h), &w) != 0;
}

typedef struct { /* the labels of one line, split in place */
  char **v;
  uint32_t n, cap;
} labels_t;

static const char *fo_label(uint32_t i, void *ctx) { return ((labels_t *)ctx)->v[i]; }

/* The labels of the line buf[0..n) (its weight cut off), split in place at each ';'. */
static int fo_split(stacker_t *s, labels_t *ls, char *buf, size_t n) {
  lp_mem_t *mem = s->sink->mem;
  ls->n = 0;
  for (char *p = buf, *end = buf + n;;) {
    if (ls->n == ls->cap) {
      uint32_t nc = ls->cap ? ls->cap * 2 : 64;
      char **v = nc > ls->cap ? lp_mem_realloc(mem, ls->v, (size_t)ls->cap * sizeof *v, (size_t)nc * sizeof *v) : NULL;
      if (!v) return lp_mem_fail(mem, &s->pos);
      ls->v = v;
      ls->cap = nc;
    }
    ls->v[ls->n++] = p;
    char *semi = memchr(p, ';', (size_t)(end - p));
    if ((size_t)((semi ? semi : end) - p) > LP_READ_MAX_NAME) {
      s->pos.column = (uint64_t)(p - buf) + LP_READ_MAX_NAME + 1;
      lp_report(&s->pos, "a label longer than 1 MiB: no label is that long");
      return LP_READ_BAD;
    }
    if (!semi) break;
    *semi = '\0';
    p = semi + 1;
  }
  return LP_READ_OK;
}

/*
 * Lines are found in a buffer that holds the rest of the last read: each is
 * read where it lies, and what is left is moved to the front once per read,
 * never once per line, so that blank lines cost what their bytes cost. A
 * line that is still arriving is looked at only in its new bytes, and is
 * refused as soon as its last label passes LP_READ_MAX_NAME. The buffer is
 * counted in the sink's memory.
 */
static int fo_read(lp_input_t *in, const lp_sink_t *sink) {
  stacker_t s = {sink, {lp_input_name(in), 0, 0, 0}, NULL, 0, 0, 0, false, false};
  if (strcmp(s.pos.file, "-") == 0) s.pos.file = "<stdin>";
  lp_mem_t *mem = sink->mem;
  labels_t ls = {NULL, 0, 0};
  size_t cap = 1 << 16, have = 0, at = 0, looked = 0, seg = 0; /* at: the line's start; looked: its bytes seen; seg: after its last ';' */
  char *buf = lp_mem_realloc(mem, NULL, 0, cap);
  int rc = LP_READ_OK;
  bool eof = false;
  uint64_t line = 0, base = 0; /* base: the input offset of buf[0] */
  if (!buf) return lp_mem_fail(mem, &s.pos);
  lp_read_cpu_files += lp_read_cpu;
  while (rc == LP_READ_OK) {
    char *nl = memchr(buf + looked, '\n', have - looked);
    if (!nl && !eof) {
      char *semi = memrchr(buf + looked, ';', have - looked);
      if (semi) seg = (size_t)(semi + 1 - buf);
      looked = have;
      if (have - seg > LP_READ_MAX_NAME + 32) { /* its last label (and a weight of at most 20 digits) is too long */
        s.pos.line = line + 1;
        s.pos.offset = base + at;
        s.pos.column = seg - at + LP_READ_MAX_NAME + 1;
        lp_report(&s.pos, "a label longer than 1 MiB: no label is that long");
        rc = LP_READ_BAD;
        break;
      }
      if (at) { /* the lines before go */
        memmove(buf, buf + at, have - at);
        have -= at;
        looked -= at;
        seg -= at;
        base += at;
        at = 0;
      }
      if (have == cap) {
        char *b = lp_mem_realloc(mem, buf, cap, cap * 2);
        if (!b) {
          s.pos.line = line + 1;
          s.pos.offset = base;
          s.pos.column = 1;
          rc = lp_mem_fail(mem, &s.pos);
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
    if (!nl && at == have) break;
    char *l = buf + at;
    size_t len = nl ? (size_t)(nl - l) : have - at;
    line++;
    s.pos.line = line;
    s.pos.column = 1;
    s.pos.offset = base + at;
    size_t sl = len && l[len - 1] == '\r' ? len - 1 : len;
    if (sl > 0) {
      int64_t w;
      size_t stack_len = folded_line(l, len, &w);
      if (!stack_len || memchr(l, '\0', len)) {
        lp_report(&s.pos, "expected a folded stack: labels split by ';', a space and a whole number of nanoseconds");
        rc = LP_READ_BAD;
        break;
      }
      l[stack_len] = '\0';
      rc = fo_split(&s, &ls, l, stack_len);
      if (rc == LP_READ_OK && w > 0) rc = stack(&s, ls.n, fo_label, &ls, w);
    }
    at += nl ? len + 1 : len;
    looked = seg = at;
  }
  lp_mem_free(mem, buf, cap);
  lp_mem_free(mem, ls.v, (size_t)ls.cap * sizeof *ls.v);
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
  const uint8_t *lines; /* the Location message: its Line fields are read when first used */
  size_t len;
  const char **names;   /* then its functions' names, caller first (counted in mem) */
  uint32_t nnames;
} pp_loc_t;

/*
 * A profile held whole (its messages refer to one another by id, in any
 * order): the bytes, and tables of offsets into them. Strings are made
 * NUL-terminated only when a function, a sample type or a unit needs one,
 * so a table of millions of strings costs 8 bytes each (and the pointer of
 * its copy), all counted in mem.
 */
typedef struct pp {
  const uint8_t *buf;
  size_t len;
  lp_pos_t pos;
  lp_mem_t *mem;
  uint32_t *soff, *slen; /* the string table: offsets and lengths in buf */
  size_t nstrs, strs_cap;
  char **owned;          /* NUL-terminated copies, made when first used */
  pp_func_t *funcs;
  size_t nfuncs, funcs_cap;
  pp_loc_t *locs;
  size_t nlocs, locs_cap;
  const char **stack; /* labels of the sample being laid, root first */
  uint32_t nstack, stack_cap;
} pp_t;

static int pp_bad(pp_t *pp, const uint8_t *at, const char *what) {
  pp->pos.offset = (uint64_t)(at - pp->buf);
  lp_report(&pp->pos, "%s", what);
  return LP_READ_BAD;
}

/* An allocation failed (out of memory, or past --max-memory): said at `at`. */
static int pp_oom(pp_t *pp, const uint8_t *at) {
  pp->pos.offset = (uint64_t)(at - pp->buf);
  return lp_mem_fail(pp->mem, &pp->pos);
}

/* The next field of [*p, end): 1, 0 at the end, or LP_READ_BAD after a message. */
static int pp_next(pp_t *pp, const uint8_t **p, const uint8_t *end, lp_pb_field_t *f) {
  int r = lp_pb_next(p, end, f);
  return r < 0 ? pp_bad(pp, f->at, lp_pb_error(r)) : r;
}

/* Repeated integers, packed or not: calls each(v, ctx) for every value. LP_READ_OK, LP_READ_BAD, or each's -1. */
static int pp_ints(pp_t *pp, const lp_pb_field_t *f, int (*each)(uint64_t v, void *ctx), void *ctx) {
  if (f->wire == 0) return each(f->v, ctx);
  if (f->wire != 2) return pp_bad(pp, f->at, "expected an integer or packed integers");
  const uint8_t *q = f->p, *qe = f->p + f->len;
  while (q < qe) {
    uint64_t v;
    if (lp_pb_varint(&q, qe, &v) != 0) return pp_bad(pp, q, "a packed varint is cut short");
    int r = each(v, ctx);
    if (r) return r;
  }
  return 0;
}

typedef struct { /* growable arrays of uint64, counted */
  uint64_t *v;
  size_t n, cap;
  lp_mem_t *mem;
} u64s_t;

static int push_u64(uint64_t v, void *ctx) {
  u64s_t *a = ctx;
  if (a->n == a->cap) {
    size_t nc = a->cap ? a->cap * 2 : 16;
    uint64_t *p = lp_mem_realloc(a->mem, a->v, a->cap * sizeof *p, nc * sizeof *p);
    if (!p) return -1;
    a->v = p;
    a->cap = nc;
  }
  a->v[a->n++] = v;
  return 0;
}

static void u64s_free(u64s_t *a) { lp_mem_free(a->mem, a->v, a->cap * sizeof *a->v); }

static int by_func_id(const void *a, const void *b) {
  uint64_t x = ((const pp_func_t *)a)->id, y = ((const pp_func_t *)b)->id;
  return x < y ? -1 : x > y;
}
static int by_loc_id(const void *a, const void *b) {
  uint64_t x = ((const pp_loc_t *)a)->id, y = ((const pp_loc_t *)b)->id;
  return x < y ? -1 : x > y;
}

/*
 * String i as a C string, into *out: copied on its first use. 0; or
 * LP_READ_BAD after a message naming `at` (past the table, a NUL in it, or
 * no memory for the copy).
 */
static int pp_string(pp_t *pp, uint64_t i, const uint8_t *at, const char **out) {
  if (i >= pp->nstrs) return pp_bad(pp, at, "a string index past the string table");
  if (!pp->owned[i]) {
    const uint8_t *str = pp->buf + pp->soff[i];
    size_t n = pp->slen[i];
    if (memchr(str, '\0', n)) return pp_bad(pp, str, "a string holds a NUL byte");
    if (!(pp->owned[i] = lp_mem_realloc(pp->mem, NULL, 0, n + 1))) return pp_oom(pp, str);
    memcpy(pp->owned[i], str, n);
    pp->owned[i][n] = '\0';
  }
  *out = pp->owned[i];
  return 0;
}

static const char *pp_label(uint32_t i, void *ctx) { return ((pp_t *)ctx)->stack[i]; }

static int pp_push_label(pp_t *pp, const char *l) {
  if (pp->nstack == pp->stack_cap) {
    uint32_t nc = pp->stack_cap ? pp->stack_cap * 2 : 64;
    const char **v = lp_mem_realloc(pp->mem, pp->stack, (size_t)pp->stack_cap * sizeof *v, (size_t)nc * sizeof *v);
    if (!v) return -1;
    pp->stack = v;
    pp->stack_cap = nc;
  }
  pp->stack[pp->nstack++] = l;
  return 0;
}

/*
 * A location's functions, caller first (its Lines are leaf first), onto the
 * stack: read from its Lines the first time, kept for the samples after.
 */
static int pp_location(pp_t *pp, const lp_pb_field_t *sf, uint64_t id) {
  pp_loc_t key = {id, NULL, 0, NULL, 0}, *l = bsearch(&key, pp->locs, pp->nlocs, sizeof *pp->locs, by_loc_id);
  if (!l) return pp_bad(pp, sf->at, "a sample names a location id that no Location has");
  if (l->names) {
    for (uint32_t i = 0; i < l->nnames; i++)
      if (pp_push_label(pp, l->names[i]) != 0) return pp_oom(pp, sf->at);
    return 0;
  }
  const char *names[64];
  uint32_t n = 0;
  const uint8_t *p = l->lines, *end = l->lines + l->len;
  lp_pb_field_t f;
  int r;
  while ((r = pp_next(pp, &p, end, &f)) == 1) {
    if (f.num != 4 || f.wire != 2) continue;
    const uint8_t *q = f.p, *qe = f.p + f.len;
    lp_pb_field_t g;
    uint64_t fid = 0;
    while ((r = pp_next(pp, &q, qe, &g)) == 1)
      if (g.num == 1 && g.wire == 0) fid = g.v;
    if (r) return r;
    pp_func_t fk = {fid, 0}, *fn = bsearch(&fk, pp->funcs, pp->nfuncs, sizeof *pp->funcs, by_func_id);
    if (!fn) return pp_bad(pp, f.at, "a Line names a function id that no Function has");
    const char *name;
    if ((r = pp_string(pp, fn->name, f.at, &name)) != 0) return r;
    if (n == 64) return pp_bad(pp, f.at, "more than 64 inlined lines in one Location");
    names[n++] = name;
  }
  if (r) return r;
  if (n == 0) return pp_bad(pp, sf->at, "a location has no line: labelprof needs function names");
  if (!(l->names = lp_mem_realloc(pp->mem, NULL, 0, n * sizeof *l->names))) return pp_oom(pp, sf->at);
  l->nnames = n;
  for (uint32_t i = 0; i < n; i++) l->names[i] = names[n - 1 - i];
  for (uint32_t i = 0; i < n; i++)
    if (pp_push_label(pp, l->names[i]) != 0) return pp_oom(pp, sf->at);
  return 0;
}

/* A string of the table, at `at` in the buffer, n bytes long: its place noted. 0, or -1 out of memory. */
static int pp_add_string(pp_t *pp, const uint8_t *at, size_t n) {
  if (pp->nstrs == pp->strs_cap) {
    size_t nc = pp->strs_cap ? pp->strs_cap * 2 : 256;
    uint32_t *o = lp_mem_realloc(pp->mem, pp->soff, pp->strs_cap * sizeof *o, nc * sizeof *o);
    if (!o) return -1;
    pp->soff = o;
    uint32_t *l = lp_mem_realloc(pp->mem, pp->slen, pp->strs_cap * sizeof *l, nc * sizeof *l);
    if (!l) return -1;
    pp->slen = l;
    pp->strs_cap = nc;
  }
  pp->soff[pp->nstrs] = (uint32_t)(at - pp->buf);
  pp->slen[pp->nstrs++] = (uint32_t)n;
  return 0;
}

static int pp_parse(pp_t *pp, const lp_sink_t *sink) {
  const uint8_t *p = pp->buf, *end = pp->buf + pp->len;
  lp_pb_field_t f;
  int r, rc = LP_READ_OK;
  u64s_t types = {NULL, 0, 0, pp->mem}, locs = {NULL, 0, 0, pp->mem}, vals = {NULL, 0, 0, pp->mem};
  size_t nf = 0, nl = 0;
  stacker_t s = {sink, pp->pos, NULL, 0, 0, 0, false, false};
  /* First pass: count and check, find the strings, the sample types, functions and locations. */
  while ((r = pp_next(pp, &p, end, &f)) == 1) {
    if (f.num == 6 && f.wire == 2) {
      if (pp_add_string(pp, f.p, f.len) != 0) {
        r = pp_oom(pp, f.at);
        break;
      }
    } else if (f.num == 1 && f.wire == 2) {
      const uint8_t *q = f.p, *qe = f.p + f.len;
      lp_pb_field_t g;
      uint64_t type = 0, unit = 0;
      while ((r = pp_next(pp, &q, qe, &g)) == 1) {
        if (g.num == 1 && g.wire == 0) type = g.v;
        if (g.num == 2 && g.wire == 0) unit = g.v;
      }
      if (r) break;
      if (push_u64(type, &types) != 0 || push_u64(unit, &types) != 0) {
        r = pp_oom(pp, f.at);
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
  pp->owned = lp_mem_realloc(pp->mem, NULL, 0, (pp->nstrs + 1) * sizeof *pp->owned);
  pp->funcs = lp_mem_realloc(pp->mem, NULL, 0, (nf + 1) * sizeof *pp->funcs);
  pp->funcs_cap = pp->funcs ? nf + 1 : 0;
  pp->locs = lp_mem_realloc(pp->mem, NULL, 0, (nl + 1) * sizeof *pp->locs);
  pp->locs_cap = pp->locs ? nl + 1 : 0;
  if (!pp->owned || !pp->funcs || !pp->locs) {
    rc = pp_oom(pp, pp->buf);
    goto out;
  }
  memset(pp->owned, 0, (pp->nstrs + 1) * sizeof *pp->owned);
  if (pp->nstrs == 0 || pp->slen[0] != 0) {
    rc = pp_bad(pp, pp->buf, "the string table does not start with the empty string (is this a pprof profile?)");
    goto out;
  }
  /* The sample type to read. */
  size_t ntypes = types.n / 2, pick = ntypes;
  for (size_t i = 0; i < ntypes; i++) {
    const char *t, *u;
    if ((rc = pp_string(pp, types.v[2 * i], pp->buf, &t)) != 0 || (rc = pp_string(pp, types.v[2 * i + 1], pp->buf, &u)) != 0)
      goto out;
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
  const char *unit;
  if ((rc = pp_string(pp, types.v[2 * pick + 1], pp->buf, &unit)) != 0) goto out;
  int64_t mult = strcmp(unit, "microseconds") == 0 ? 1000
                 : strcmp(unit, "milliseconds") == 0 ? 1000000
                 : strcmp(unit, "seconds") == 0     ? 1000000000
                                                    : 1;
  /* Second pass: functions and locations, sorted by id. */
  for (p = pp->buf; (r = pp_next(pp, &p, end, &f)) == 1;) {
    if (f.num != 4 && f.num != 5) continue;
    const uint8_t *q = f.p, *qe = f.p + f.len;
    lp_pb_field_t g;
    uint64_t id = 0, name = 0;
    while ((r = pp_next(pp, &q, qe, &g)) == 1) {
      if (g.num == 1 && g.wire == 0) id = g.v;
      if (f.num == 5 && g.num == 2 && g.wire == 0) name = g.v;
    }
    if (r) break;
    if (f.num == 5)
      pp->funcs[pp->nfuncs++] = (pp_func_t){id, name};
    else
      pp->locs[pp->nlocs++] = (pp_loc_t){id, f.p, f.len, NULL, 0};
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
    lp_pb_field_t g;
    while (rc == LP_READ_OK && (r = pp_next(pp, &q, qe, &g)) == 1) {
      if (g.num == 1) rc = pp_ints(pp, &g, push_u64, &locs);
      else if (g.num == 2) rc = pp_ints(pp, &g, push_u64, &vals);
      if (rc < 0) rc = pp_oom(pp, g.at);
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
  u64s_free(&locs);
  u64s_free(&vals);
  u64s_free(&types);
  return rc;
}

/*
 * A pprof profile, by its first fields: a Profile message is fields 1 to 14
 * in any order, each of its own wire type (1-6 and 11 messages or strings,
 * the others integers; 13 packed or not), and the writers differ in what
 * comes first: sample_type (labelprof, go tool pprof -proto), time_nanos
 * (Go's runtime/pprof for CPU), period_type (its heap and goroutine
 * profiles). So every field that the first bytes hold whole must be one of
 * those, and they must hold at least one whole. Two fields that start
 * 0x0a (a TracePacket of Perfetto) are told apart by what follows: a
 * sample_type's first field is type (0x08) or unit (0x10), which no
 * TracePacket starts with; a first field 1 of other content is Perfetto's.
 */
static bool pp_wire_ok(uint64_t num, unsigned wire) {
  switch (num) {
  case 1: case 2: case 3: case 4: case 5: case 6: case 11: return wire == 2;
  case 7: case 8: case 9: case 10: case 12: case 14: return wire == 0;
  case 13: return wire == 0 || wire == 2;
  default: return false;
  }
}

static int pp_sniff(const unsigned char *head, size_t n) {
  const uint8_t *p = head, *end = head + n;
  unsigned whole = 0;
  while (p < end) {
    uint64_t key, v;
    if (lp_pb_varint(&p, end, &key) != 0) break; /* cut by the end of the bytes peeked */
    unsigned wire = (unsigned)(key & 7);
    if (!pp_wire_ok(key >> 3, wire)) return 0;
    if (lp_pb_varint(&p, end, &v) != 0) break;
    if (wire == 2) {
      if (whole == 0 && key >> 3 == 1 && (p >= end || (*p != 0x08 && *p != 0x10))) return 0;
      if (v > PP_MAX_BYTES) return 0;
      if (v > (uint64_t)(end - p)) return whole > 0 || n >= 256; /* runs past the bytes peeked (of a long file) */
      p += v;
    }
    whole++;
  }
  return whole > 0;
}

/*
 * Reads the whole profile, counted in the sink's memory, looking at its
 * top-level fields as their bytes arrive: a string of the table longer than
 * LP_READ_MAX_NAME is refused at its header, before its bytes are held.
 */
static int pp_read(lp_input_t *in, const lp_sink_t *sink) {
  pp_t pp;
  memset(&pp, 0, sizeof pp);
  pp.pos.file = strcmp(lp_input_name(in), "-") == 0 ? "<stdin>" : lp_input_name(in);
  pp.mem = sink->mem;
  size_t cap = 1 << 16, have = 0, next = 0; /* next: where the next top-level field starts */
  uint8_t *buf = lp_mem_realloc(pp.mem, NULL, 0, cap);
  if (!buf) return lp_mem_fail(pp.mem, &pp.pos);
  for (;;) {
    if (have == cap) {
      uint8_t *b = cap < PP_MAX_BYTES ? lp_mem_realloc(pp.mem, buf, cap, cap * 2) : NULL;
      if (!b) {
        pp.pos.offset = have;
        int rc = cap < PP_MAX_BYTES ? lp_mem_fail(pp.mem, &pp.pos)
                                    : (lp_report(&pp.pos, "a pprof profile larger than 2 GiB"), LP_READ_BAD);
        lp_mem_free(pp.mem, buf, cap);
        return rc;
      }
      buf = b;
      cap *= 2;
    }
    ssize_t got = lp_input_read(in, buf + have, cap - have);
    if (got < 0) {
      lp_mem_free(pp.mem, buf, cap);
      return LP_READ_BAD;
    }
    if (got == 0) break;
    have += (size_t)got;
    /* The headers now whole: where each field ends. A malformed one is left for pp_parse to say. */
    while (next < have) {
      const uint8_t *q = buf + next, *qe = buf + have;
      uint64_t key, v = 0;
      if (lp_pb_varint(&q, qe, &key) != 0) break;
      unsigned wire = (unsigned)(key & 7);
      if (wire == 1 || wire == 5) {
        v = wire == 1 ? 8 : 4;
      } else if (wire == 0 || wire == 2) {
        if (lp_pb_varint(&q, qe, &v) != 0) break;
        if (wire == 0) v = 0;
      } else {
        next = SIZE_MAX; /* not a message: pp_parse says where */
        break;
      }
      if (wire == 2 && key >> 3 == 6 && v > LP_READ_MAX_NAME) {
        pp.pos.offset = next;
        lp_report(&pp.pos, "a string of %llu bytes in the string table: at most 1 MiB is expected (no name is that "
                           "long)", (unsigned long long)v);
        lp_mem_free(pp.mem, buf, cap);
        return LP_READ_BAD;
      }
      next = (size_t)(q - buf) + (size_t)(v > PP_MAX_BYTES ? PP_MAX_BYTES : v);
    }
  }
  pp.buf = buf;
  pp.len = have;
  int rc = pp_parse(&pp, sink);
  for (size_t i = 0; pp.owned && i < pp.nstrs; i++)
    if (pp.owned[i]) lp_mem_free(pp.mem, pp.owned[i], pp.slen[i] + 1);
  lp_mem_free(pp.mem, pp.owned, (pp.nstrs + 1) * sizeof *pp.owned);
  lp_mem_free(pp.mem, pp.soff, pp.strs_cap * sizeof *pp.soff);
  lp_mem_free(pp.mem, pp.slen, pp.strs_cap * sizeof *pp.slen);
  lp_mem_free(pp.mem, pp.funcs, pp.funcs_cap * sizeof *pp.funcs);
  for (size_t i = 0; i < pp.nlocs; i++) lp_mem_free(pp.mem, pp.locs[i].names, pp.locs[i].nnames * sizeof *pp.locs[i].names);
  lp_mem_free(pp.mem, pp.locs, pp.locs_cap * sizeof *pp.locs);
  lp_mem_free(pp.mem, pp.stack, (size_t)pp.stack_cap * sizeof *pp.stack);
  lp_mem_free(pp.mem, buf, cap);
  return rc;
}

const lp_reader_t lp_pprof_reader = {"pprof", pp_sniff, pp_read};
