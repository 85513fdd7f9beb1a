/*
 * perfetto_decode.h: reading a Perfetto trace back, for the tests, by a
 * decoder of its own (not the library's writer turned around): the packets
 * become one line per event in a canonical text that the JSON's events are
 * also turned into, so that a session written both ways can be compared
 * line by line. While decoding it checks the encoding rules: every packet
 * has a sequence, a sequence's first packet clears its incremental state,
 * interned ids are defined before use and each name once per sequence,
 * a sequence's clock never goes back, a timestamp on a builtin clock
 * has a ClockSnapshot in the file that names that clock, a track under the
 * process is not one Perfetto would merge with another of its name, and
 * a counter name has one counter track (as the JSON's counters of a name are
 * one series).
 *
 * Lines: "lane|X|cat|name|ts|dur|flags", "lane|B|cat|name|ts||flags",
 * "lane|i|cat|name|ts||", "counter|C||name|ts|value|"; lane is the thread's
 * or track's name, flags the debug annotations (truncated, unterminated,
 * layer, phase, mode) as name=value, sorted.
 */
#ifndef LP_TESTS_PERFETTO_DECODE_H
#define LP_TESTS_PERFETTO_DECODE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct pd_str {
  uint64_t key;
  char *s;
} pd_str_t;

typedef struct pd_lines {
  char **v;
  size_t n, cap;
} pd_lines_t;

static inline void pd_sort_flags(char *line);
static inline void pd_push(pd_lines_t *l, const char *s) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 256;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
  }
  char *c = malloc(strlen(s) + 1024);
  strcpy(c, s);
  pd_sort_flags(c);
  l->v[l->n++] = c;
}

static inline int pd_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The flags of a line (after its sixth '|') as a sorted list, so that their order does not matter. */
static inline void pd_sort_flags(char *line) {
  char *f = line;
  for (int k = 0; k < 6 && f; k++) f = strchr(f, '|') ? strchr(f, '|') + 1 : NULL;
  if (!f || !*f) return;
  char *tok[32], copy[1024];
  int n = 0;
  snprintf(copy, sizeof copy, "%s", f);
  for (char *s = strtok(copy, ","); s && n < 32; s = strtok(NULL, ",")) tok[n++] = s;
  qsort(tok, (size_t)n, sizeof *tok, pd_cmp);
  char out[1024] = "";
  for (int i = 0; i < n; i++) {
    if (i) strcat(out, ",");
    strncat(out, tok[i], sizeof out - strlen(out) - 2);
  }
  strcpy(f, out);
}
static inline void pd_sort(pd_lines_t *l) {
  if (l->n) qsort(l->v, l->n, sizeof *l->v, pd_cmp); /* an empty trace has no array: qsort takes no NULL */
}
static inline void pd_free(pd_lines_t *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

/* A table of uint64 -> string, linear: the tests' traces are small. */
typedef struct pd_map {
  pd_str_t *e;
  size_t n, cap;
} pd_map_t;

static inline const char *pd_get(const pd_map_t *m, uint64_t k) {
  for (size_t i = 0; i < m->n; i++)
    if (m->e[i].key == k) return m->e[i].s;
  return NULL;
}
static inline void pd_put(pd_map_t *m, uint64_t k, const char *s, size_t len) {
  if (m->n == m->cap) {
    m->cap = m->cap ? m->cap * 2 : 16;
    m->e = realloc(m->e, m->cap * sizeof *m->e);
  }
  m->e[m->n].key = k;
  m->e[m->n].s = strndup(s, len);
  m->n++;
}
static inline void pd_map_free(pd_map_t *m) {
  for (size_t i = 0; i < m->n; i++) free(m->e[i].s);
  free(m->e);
  memset(m, 0, sizeof *m);
}

typedef struct pd_field {
  uint32_t num, wire;
  uint64_t v;        /* varint value */
  const uint8_t *p;  /* length-delimited data */
  size_t len;
} pd_field_t;

/* The next field of [*p, end); 0 at the end, -1 on malformed input. */
static inline int pd_next(const uint8_t **p, const uint8_t *end, pd_field_t *f) {
  memset(f, 0, sizeof *f);
  if (*p >= end) return 0;
  uint64_t vals[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
      if (*p >= end || shift > 63) return -1;
      uint8_t b = *(*p)++;
      v |= (uint64_t)(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) break;
    }
    vals[k] = v;
    if (k == 0) {
      f->num = (uint32_t)(v >> 3);
      f->wire = (uint32_t)(v & 7);
      if (f->wire == 1 || f->wire == 5) {
        size_t n = f->wire == 1 ? 8 : 4;
        if ((size_t)(end - *p) < n) return -1;
        f->p = *p;
        *p += n;
        return 1;
      }
      if (f->wire != 0 && f->wire != 2) return -1;
    }
  }
  f->v = vals[1];
  if (f->wire == 2) {
    if (vals[1] > (uint64_t)(end - *p)) return -1;
    f->p = *p;
    f->len = (size_t)vals[1];
    *p += f->len;
  }
  return 1;
}

typedef struct pd_open {
  uint64_t track, ts;
  char *head; /* "lane|X|cat|name|", the X at phpos */
  size_t phpos;
  char flags[2048];
  char *lane, *cat, *name; /* with want_evs */
} pd_open_t;

/*
 * With want_evs set before pd_decode, the events as fields too (names may
 * hold '|', which the lines cannot tell apart): X, B (begun, not ended), i,
 * and C (a counter: name and value). flags: sorted, comma-separated. Free
 * them with pd_evs_free().
 */
typedef struct pd_ev {
  char ph;
  char *lane, *cat, *name, *flags;
  uint64_t dur;
  int64_t value;
} pd_ev_t;

typedef struct pd_seq {
  uint32_t id;
  uint64_t clock, track;
  int clock_set, cleared;
  pd_map_t names, cats;
} pd_seq_t;

typedef struct pd_trace {
  pd_lines_t lines;
  pd_map_t lanes;    /* track uuid -> lane name */
  pd_map_t counters; /* track uuid -> counter name */
  pd_seq_t seqs[512];
  size_t nseqs;
  pd_open_t *open;
  size_t nopen, capopen;
  char session[4096]; /* the "labelprof session" annotations, name=value; */
  int want_evs;
  pd_ev_t *evs;
  size_t nevs, capevs;
  uint64_t clocks_named, clocks_used; /* builtin clocks (ids 1-63) in a ClockSnapshot; on a packet's timestamp */
  uint64_t real_ns[8], real_mono_ns[8]; /* the ClockSnapshots that hold REALTIME and MONOTONIC: both, in order */
  size_t nreal;
  const char *error;  /* the first broken rule */
} pd_trace_t;

/* Copies flags (name=value, comma-separated) into out, sorted. */
static inline char *pd_sorted_flags(const char *flags) {
  char line[2100];
  snprintf(line, sizeof line, "||||||%s", flags);
  pd_sort_flags(line);
  return strdup(line + 6);
}

static inline void pd_ev_push(pd_trace_t *t, char ph, const char *lane, const char *cat, const char *name,
                              const char *flags, uint64_t dur, int64_t value) {
  if (!t->want_evs) return;
  if (t->nevs == t->capevs) {
    t->capevs = t->capevs ? t->capevs * 2 : 256;
    t->evs = realloc(t->evs, t->capevs * sizeof *t->evs);
  }
  pd_ev_t *e = &t->evs[t->nevs++];
  e->ph = ph;
  e->lane = strdup(lane);
  e->cat = strdup(cat);
  e->name = strdup(name);
  e->flags = pd_sorted_flags(flags);
  e->dur = dur;
  e->value = value;
}

static inline void pd_evs_free(pd_trace_t *t) {
  for (size_t i = 0; i < t->nevs; i++) {
    free(t->evs[i].lane);
    free(t->evs[i].cat);
    free(t->evs[i].name);
    free(t->evs[i].flags);
  }
  free(t->evs);
  t->evs = NULL;
  t->nevs = t->capevs = 0;
}

/*
 * LP_TEST_PFTRACE_KEEP=DIR: every file decoded is also copied to DIR (as
 * PID-N-NAME), for tests/test_importer to give to Perfetto's trace
 * processor. A file decoded again right after (a test that reads a file
 * while it is written) replaces its copy.
 */
static inline void pd_keep(const char *path, const uint8_t *buf, size_t n) {
  static unsigned count;
  static char last[4096];
  const char *dir = getenv("LP_TEST_PFTRACE_KEEP");
  if (!dir || !*dir) return;
  if (strcmp(last, path) != 0) count++;
  snprintf(last, sizeof last, "%s", path);
  const char *base = strrchr(path, '/');
  char copy[4096];
  snprintf(copy, sizeof copy, "%s/%d-%u-%s", dir, (int)getpid(), count, base ? base + 1 : path);
  FILE *f = fopen(copy, "wb");
  int ok = f && fwrite(buf, 1, n, f) == n;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok) fprintf(stderr, "pd_keep: cannot write %s\n", copy);
}

/* Copies len bytes at p to dst (of size bytes) as a string, cut short if they do not fit. */
static inline void pd_copy(char *dst, size_t size, const uint8_t *p, size_t len) {
  if (len > size - 1) len = size - 1;
  memcpy(dst, p, len);
  dst[len] = '\0';
}

/* Appends s to buf (of size bytes), cutting it short if it does not fit. */
static inline void pd_cat(char *buf, size_t size, const char *s) {
  size_t n = strlen(buf), k = strlen(s);
  if (n + 1 >= size) return;
  if (k > size - n - 1) k = size - n - 1;
  memcpy(buf + n, s, k);
  buf[n + k] = '\0';
}

static inline void pd_flag(char *flags, size_t size, const char *name, const char *value) {
  if (flags[0]) pd_cat(flags, size, ",");
  pd_cat(flags, size, name);
  pd_cat(flags, size, "=");
  pd_cat(flags, size, value);
}

/* An annotation name=value into buf. */
static inline void pd_annotation(const uint8_t *p, size_t len, char *name, size_t nsize, char *value, size_t vsize) {
  pd_field_t f;
  const uint8_t *e = p + len;
  name[0] = value[0] = '\0';
  while (pd_next(&p, e, &f) > 0) {
    if (f.num == 10 && f.wire == 2) pd_copy(name, nsize, f.p, f.len);
    if (f.num == 6 && f.wire == 2) pd_copy(value, vsize, f.p, f.len);
    if (f.num == 2 && f.wire == 0) snprintf(value, vsize, "%s", f.v ? "true" : "false");
    if (f.num == 3 && f.wire == 0) snprintf(value, vsize, "%llu", (unsigned long long)f.v);
    if (f.num == 4 && f.wire == 0) snprintf(value, vsize, "%lld", (long long)f.v);
  }
}

static inline pd_seq_t *pd_seq(pd_trace_t *t, uint32_t id) {
  for (size_t i = 0; i < t->nseqs; i++)
    if (t->seqs[i].id == id) return &t->seqs[i];
  if (t->nseqs == sizeof t->seqs / sizeof t->seqs[0]) return NULL;
  pd_seq_t *q = &t->seqs[t->nseqs++];
  memset(q, 0, sizeof *q);
  q->id = id;
  return q;
}

static inline void pd_interned(pd_trace_t *t, pd_seq_t *q, const uint8_t *p, size_t len) {
  pd_field_t f, g;
  const uint8_t *e = p + len;
  while (pd_next(&p, e, &f) > 0) {
    if ((f.num != 1 && f.num != 2) || f.wire != 2) continue;
    const uint8_t *ip = f.p, *ie = f.p + f.len;
    uint64_t iid = 0;
    const uint8_t *name = NULL;
    size_t nlen = 0;
    while (pd_next(&ip, ie, &g) > 0) {
      if (g.num == 1) iid = g.v;
      if (g.num == 2) {
        name = g.p;
        nlen = g.len;
      }
    }
    pd_map_t *m = f.num == 1 ? &q->cats : &q->names;
    if (pd_get(m, iid)) t->error = "an iid interned twice on one sequence";
    for (size_t i = 0; i < m->n && f.num == 2; i++)
      if (strlen(m->e[i].s) == nlen && memcmp(m->e[i].s, name, nlen) == 0) t->error = "a name interned twice on one sequence";
    pd_put(m, iid, name ? (const char *)name : "", nlen);
  }
}

static inline void pd_track_event(pd_trace_t *t, pd_seq_t *q, uint64_t ts, const uint8_t *p, size_t len) {
  pd_field_t f;
  const uint8_t *e = p + len;
  uint64_t type = 0, track = q->track, name_iid = 0;
  int64_t value = 0;
  char cats[256] = "", flags[2048] = "", name[1024] = "";
  while (pd_next(&p, e, &f) > 0) {
    if (f.num == 9) type = f.v;
    else if (f.num == 11) track = f.v;
    else if (f.num == 10) name_iid = f.v;
    else if (f.num == 23) pd_copy(name, sizeof name, f.p, f.len);
    else if (f.num == 30) value = (int64_t)f.v;
    else if (f.num == 3) {
      const char *c = pd_get(&q->cats, f.v);
      if (!c) t->error = "a category iid used before it was interned";
      pd_flag(cats, sizeof cats, "", c ? c : "?");
    } else if (f.num == 22 && f.wire == 2) { /* a category given inline (labelprof merge writes them so) */
      char c[256];
      pd_copy(c, sizeof c, f.p, f.len);
      pd_flag(cats, sizeof cats, "", c);
    } else if (f.num == 4 && f.wire == 2) {
      char n[64], v[512];
      pd_annotation(f.p, f.len, n, sizeof n, v, sizeof v);
      pd_flag(flags, sizeof flags, n, v);
    }
  }
  /* pd_flag wrote "=cat": drop the '='s of the categories. */
  char c2[256];
  size_t k = 0;
  for (size_t i = 0; cats[i] && k + 1 < sizeof c2; i++)
    if (cats[i] != '=') c2[k++] = cats[i];
  c2[k] = '\0';
  if (name_iid) {
    const char *s = pd_get(&q->names, name_iid);
    if (!s) t->error = "a name iid used before it was interned";
    snprintf(name, sizeof name, "%s", s ? s : "?");
  }
  if (strcmp(name, "labelprof session") == 0) {
    snprintf(t->session, sizeof t->session, "%s", flags);
    return;
  }
  const char *lane = pd_get(&t->lanes, track);
  char line[4096];
  if (type == 4) {
    const char *cn = pd_get(&t->counters, track);
    if (!cn) t->error = "a counter event on a track not described";
    snprintf(line, sizeof line, "counter|C||%s|%llu|%lld|", cn ? cn : "?", (unsigned long long)ts, (long long)value);
    pd_push(&t->lines, line);
    pd_ev_push(t, 'C', "", "", cn ? cn : "?", "", 0, value);
    return;
  }
  if (!lane) {
    t->error = "an event on a track not described";
    lane = "?";
  }
  if (type == 3) {
    snprintf(line, sizeof line, "%s|i|%s|%s|%llu||%s", lane, c2, name, (unsigned long long)ts, flags);
    pd_push(&t->lines, line);
    pd_ev_push(t, 'i', lane, c2, name, flags, 0, 0);
  } else if (type == 1) {
    if (t->nopen == t->capopen) {
      t->capopen = t->capopen ? t->capopen * 2 : 64;
      t->open = realloc(t->open, t->capopen * sizeof *t->open);
    }
    pd_open_t *o = &t->open[t->nopen++];
    o->track = track;
    o->ts = ts;
    snprintf(line, sizeof line, "%s|X|%s|%s|", lane, c2, name);
    o->head = strdup(line);
    o->phpos = strlen(lane) + 1;
    snprintf(o->flags, sizeof o->flags, "%s", flags);
    o->lane = t->want_evs ? strdup(lane) : NULL;
    o->cat = t->want_evs ? strdup(c2) : NULL;
    o->name = t->want_evs ? strdup(name) : NULL;
  } else if (type == 2) {
    size_t i = t->nopen;
    while (i > 0 && t->open[i - 1].track != track) i--;
    if (i == 0) {
      t->error = "an end without a begin on its track";
      return;
    }
    pd_open_t o = t->open[i - 1];
    memmove(&t->open[i - 1], &t->open[i], (t->nopen - i) * sizeof *t->open);
    t->nopen--;
    if (flags[0]) pd_flag(o.flags, sizeof o.flags, "", flags); /* leaves "=" in front: removed below */
    char fl[512];
    size_t m = 0;
    for (size_t j = 0; o.flags[j] && m + 1 < sizeof fl; j++)
      if (!(o.flags[j] == '=' && (j == 0 || o.flags[j - 1] == ','))) fl[m++] = o.flags[j];
    fl[m] = '\0';
    snprintf(line, sizeof line, "%s%llu|%llu|%s", o.head, (unsigned long long)o.ts, (unsigned long long)(ts - o.ts), fl);
    pd_push(&t->lines, line);
    if (o.lane) pd_ev_push(t, 'X', o.lane, o.cat, o.name, fl, ts - o.ts, 0);
    free(o.head);
    free(o.lane);
    free(o.cat);
    free(o.name);
  }
}

/* Decodes a whole file into t (zeroed by the caller); 0, or -1 with t->error set. */
static inline int pd_decode(pd_trace_t *t, const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    t->error = "cannot open the file";
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  size_t r;
  while ((r = fread(buf + n, 1, cap - n, fp)) > 0) {
    n += r;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(fp);
  pd_keep(path, buf, n);
  const uint8_t *p = buf, *end = buf + n;
  pd_field_t pk;
  int rc;
  while (!t->error && (rc = pd_next(&p, end, &pk)) > 0) {
    if (pk.num != 1 || pk.wire != 2) {
      t->error = "a field of Trace other than packet";
      break;
    }
    const uint8_t *q0 = pk.p, *qe = pk.p + pk.len;
    pd_field_t f;
    uint32_t seq = 0, flags = 0, clock_id = 0;
    uint64_t ts = 0;
    int has_ts = 0;
    const uint8_t *te = NULL, *td = NULL, *in = NULL, *cs = NULL, *def = NULL;
    size_t tel = 0, tdl = 0, inl = 0, csl = 0, defl = 0;
    while (pd_next(&q0, qe, &f) > 0) {
      switch (f.num) {
      case 10: seq = (uint32_t)f.v; break;
      case 13: flags = (uint32_t)f.v; break;
      case 8: ts = f.v; has_ts = 1; break;
      case 58: clock_id = (uint32_t)f.v; break;
      case 11: te = f.p; tel = f.len; break;
      case 60: td = f.p; tdl = f.len; break;
      case 12: in = f.p; inl = f.len; break;
      case 6: cs = f.p; csl = f.len; break;
      case 59: def = f.p; defl = f.len; break;
      default: break;
      }
    }
    if (!seq) {
      t->error = "a packet without a sequence";
      break;
    }
    pd_seq_t *q = pd_seq(t, seq);
    if (!q) break;
    if (flags & 1) q->cleared = 1;
    if ((flags & 2) && !q->cleared) {
      t->error = "a packet needs incremental state before its sequence cleared it";
      break;
    }
    if ((in || def) && !q->cleared) {
      t->error = "interned data or defaults on a sequence that did not clear its state";
      break;
    }
    if (flags & 1) {
      pd_map_free(&q->names);
      pd_map_free(&q->cats);
    }
    if (cs) {
      const uint8_t *c = cs, *ce = cs + csl;
      uint64_t real = 0, mono = 0;
      while (pd_next(&c, ce, &f) > 0) {
        const uint8_t *k = f.p, *ke = f.p + f.len;
        pd_field_t g;
        uint64_t id = 0, v = 0;
        while (pd_next(&k, ke, &g) > 0) {
          if (g.num == 1) id = g.v;
          if (g.num == 2) v = g.v;
        }
        if (id == 1) real = v;
        if (id == 3) mono = v;
        if (id == 64) {
          q->clock = v;
          q->clock_set = 1;
        }
        if (id > 0 && id < 64) t->clocks_named |= (uint64_t)1 << id;
      }
      if (real && mono && t->nreal < sizeof t->real_ns / sizeof t->real_ns[0]) {
        t->real_ns[t->nreal] = real;
        t->real_mono_ns[t->nreal++] = mono;
      }
    }
    if (def) {
      const uint8_t *d = def, *de = def + defl;
      while (pd_next(&d, de, &f) > 0)
        if (f.num == 11) {
          const uint8_t *k = f.p, *ke = f.p + f.len;
          pd_field_t g;
          while (pd_next(&k, ke, &g) > 0)
            if (g.num == 11) q->track = g.v;
        }
    }
    if (in) pd_interned(t, q, in, inl);
    if (has_ts && clock_id > 0 && clock_id < 64) t->clocks_used |= (uint64_t)1 << clock_id;
    if (has_ts && !clock_id) {
      if (!q->clock_set) {
        t->error = "a timestamp on clock 64 before its clock snapshot";
        break;
      }
      q->clock += ts;
      ts = q->clock;
    }
    if (td) {
      const uint8_t *d = td, *de = td + tdl;
      uint64_t uuid = 0, merge = 0;
      char name[512] = "";
      int counter = 0, parent = 0, thread = 0;
      while (pd_next(&d, de, &f) > 0) {
        if (f.num == 1) uuid = f.v;
        if (f.num == 2) pd_copy(name, sizeof name, f.p, f.len);
        if (f.num == 8) counter = 1;
        if (f.num == 5) parent = 1;
        if (f.num == 15) merge = f.v;
        if (f.num == 4) {
          thread = 1;
          const uint8_t *k = f.p, *ke = f.p + f.len;
          pd_field_t g;
          while (pd_next(&k, ke, &g) > 0)
            if (g.num == 5) pd_copy(name, sizeof name, g.p, g.len);
        }
      }
      /* Perfetto merges the slice tracks under one parent that have one name (unless told not to, 2: NONE)... */
      if (parent && !thread && !counter && merge != 2) {
        t->error = "a track under the process that Perfetto would merge with any sibling of its name";
        break;
      }
      /* ...and keeps counter tracks apart, where the JSON's counters of one name are one series. */
      for (size_t k = 0; counter && k < t->counters.n; k++)
        if (t->counters.e[k].key != uuid && strcmp(t->counters.e[k].s, name) == 0) t->error = "two counter tracks of one name";
      if (t->error) break;
      pd_put(counter ? &t->counters : &t->lanes, uuid, name, strlen(name));
    }
    if (te) pd_track_event(t, q, ts, te, tel);
  }
  if (!t->error && p != end) t->error = "malformed protobuf";
  /* Perfetto's trace processor drops a packet whose clock no snapshot of the file names (clock_sync_failure). */
  if (!t->error && (t->clocks_used & ~t->clocks_named))
    t->error = "a timestamp on a builtin clock that no ClockSnapshot in the file names";
  free(buf);
  /* Begins still open at the end. */
  for (size_t i = 0; i < t->nopen; i++) {
    char line[4096];
    t->open[i].head[t->open[i].phpos] = 'B';
    snprintf(line, sizeof line, "%s%llu||%s", t->open[i].head, (unsigned long long)t->open[i].ts, t->open[i].flags);
    pd_push(&t->lines, line);
    if (t->open[i].lane) pd_ev_push(t, 'B', t->open[i].lane, t->open[i].cat, t->open[i].name, t->open[i].flags, 0, 0);
    free(t->open[i].head);
    free(t->open[i].lane);
    free(t->open[i].cat);
    free(t->open[i].name);
  }
  free(t->open);
  for (size_t i = 0; i < t->nseqs; i++) {
    pd_map_free(&t->seqs[i].names);
    pd_map_free(&t->seqs[i].cats);
  }
  pd_map_free(&t->lanes);
  pd_map_free(&t->counters);
  pd_sort(&t->lines);
  return t->error ? -1 : 0;
}

#endif
