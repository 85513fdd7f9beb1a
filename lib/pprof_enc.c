/*
 * pprof_enc.c: profile.proto, written through pb.c, in a gzip file of stored
 * deflate blocks.
 *
 * The message is built in pieces (the samples, functions and locations in
 * one buffer as they come; the string table in another, since a string's
 * index is known only once it is first used) and written in one pass at the
 * end; protobuf readers take fields in any order.
 *
 * The gzip file is RFC 1952 around RFC 1951 "stored" blocks: the bytes as
 * they are, 65535 at most per block, each block's length and its ones'
 * complement before it, then the CRC-32 and the length of the whole. Every
 * gzip reader takes it. It is not compressed: the library has no zlib, and a
 * deflate of its own would be more code to get wrong than the few megabytes
 * it saves are worth; gzip -9 shrinks the files several times if they are
 * kept (the command's output, and Pyroscope's and Parca's agents, compress
 * on the way anyway).
 */
#include "pprof_enc.h"

#include "index.h"
#include "pb.h" /* the protobuf writer, and the allocator of lib/'s files the command compiles too */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- the profile ------------------------------------------------------------- */

typedef struct fkey {
  const char *name, *file; /* the caller's strings */
  int64_t line;
} fkey_t;

struct lp__pprof {
  lp__pb_t body;    /* samples, locations, functions */
  lp__pb_t strtab;  /* string_table entries */
  lp__pb_t scratch, scratch2;
  /* The string table's strings in order, found by text; the functions in order (id: position + 1), by (name, file, line). */
  const char **strs;
  uint32_t nstrs, strscap;
  lp__index_t strindex;
  fkey_t *funcs;
  uint32_t nfuncs, funcscap;
  lp__index_t funcindex;
  /* The last sample's thread name and its index, and the label keys' indexes (0: not yet). */
  const char *last_thread;
  int64_t last_thread_idx, thread_key, tid_key;
  bool cpu; /* the cpu/nanoseconds sample type: each sample has three values, else two */
};

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h ^ (h >> 29);
}

/*
 * Room for one more of n entries of size bytes in *entries (capacity *cap)
 * and in its index (hash_of: an entry's hash, to put them again). 0 or
 * -ENOMEM (nothing changed but a larger array).
 */
static int make_room(void **entries, uint32_t *cap, size_t size, uint32_t n, lp__index_t *ix,
                     uint32_t (*hash_of)(const lp__pprof_t *pp, uint32_t i), const lp__pprof_t *pp) {
  if (n == *cap) {
    uint32_t nc = *cap ? *cap * 2 : 512;
    void *p = nc < UINT32_MAX / 2 ? lp__codec_realloc(*entries, (size_t)nc * size) : NULL;
    if (!p) return -ENOMEM;
    *entries = p;
    *cap = nc;
  }
  uint64_t want = lp__index_wants(ix, n, 1024);
  if (!want) return 0;
  uint32_t *fresh = want == UINT64_MAX ? NULL : lp__codec_calloc((size_t)want, sizeof *fresh);
  if (!fresh) return -ENOMEM;
  free(lp__index_move(ix, fresh, want));
  for (uint32_t i = 0; i < n; i++) lp__index_put(ix, hash_of(pp, i), i);
  return 0;
}

static uint32_t str_hash(const lp__pprof_t *pp, uint32_t i) { return (uint32_t)hash_str(pp->strs[i]); }

/* The string table index of s, added on first use; -1 on ENOMEM. */
static int64_t str_index(lp__pprof_t *pp, const char *s) {
  if (!s) s = "";
  uint32_t h = (uint32_t)hash_str(s);
  for (uint32_t at, k = lp__index_first(&pp->strindex, h, &at); k; k = lp__index_next(&pp->strindex, &at))
    if (strcmp(pp->strs[k - 1], s) == 0) return k - 1;
  if (make_room((void **)&pp->strs, &pp->strscap, sizeof *pp->strs, pp->nstrs, &pp->strindex, str_hash, pp) != 0)
    return -1;
  lp__index_put(&pp->strindex, h, pp->nstrs);
  pp->strs[pp->nstrs++] = s;
  lp__pb_bytes(&pp->strtab, 6, s, strlen(s));
  return pp->strtab.err ? -1 : (int64_t)pp->nstrs - 1;
}

lp__pprof_t *lp__pprof_new(bool cpu) {
  lp__pprof_t *pp = lp__codec_calloc(1, sizeof *pp);
  if (!pp) return NULL;
  pp->cpu = cpu;
  /* string_table[0] is "" */
  if (str_index(pp, "") != 0) {
    lp__pprof_free(pp);
    return NULL;
  }
  return pp;
}

void lp__pprof_free(lp__pprof_t *pp) {
  if (!pp) return;
  free(pp->body.buf);
  free(pp->strtab.buf);
  free(pp->scratch.buf);
  free(pp->scratch2.buf);
  free(pp->strs);
  free(pp->strindex.slot);
  free(pp->funcs);
  free(pp->funcindex.slot);
  free(pp);
}

static uint64_t hash_func(const fkey_t *k) {
  return (hash_str(k->name) * 31 + hash_str(k->file)) * 0x9e3779b97f4a7c15ull + (uint64_t)k->line;
}

static uint32_t func_hash(const lp__pprof_t *pp, uint32_t i) { return (uint32_t)(hash_func(&pp->funcs[i]) >> 7); }

uint64_t lp__pprof_location(lp__pprof_t *pp, const char *name, const char *file, int64_t line) {
  fkey_t k = {name ? name : "", file ? file : "", line};
  uint32_t h = (uint32_t)(hash_func(&k) >> 7);
  for (uint32_t at, id = lp__index_first(&pp->funcindex, h, &at); id; id = lp__index_next(&pp->funcindex, &at)) {
    const fkey_t *f = &pp->funcs[id - 1];
    if (f->line == k.line && strcmp(f->name, k.name) == 0 && strcmp(f->file, k.file) == 0) return id;
  }
  if (make_room((void **)&pp->funcs, &pp->funcscap, sizeof *pp->funcs, pp->nfuncs, &pp->funcindex, func_hash, pp) != 0)
    return 0;
  int64_t ni = str_index(pp, k.name), fi = str_index(pp, k.file);
  if (ni < 0 || fi < 0) return 0;
  uint64_t id = pp->nfuncs + 1;
  /* Function: id 1, name 2, system_name 3, filename 4, start_line 5. */
  lp__pb_t *m = &pp->scratch;
  lp__pb_varint(m, 1, id);
  lp__pb_varint(m, 2, (uint64_t)ni);
  lp__pb_varint(m, 3, (uint64_t)ni);
  lp__pb_varint(m, 4, (uint64_t)fi);
  if (k.line > 0) lp__pb_varint(m, 5, (uint64_t)k.line);
  lp__pb_msg(&pp->body, 5, m);
  /* Location: id 1, mapping_id 2, line 4 (Line: function_id 1, line 2). */
  lp__pb_t *l = &pp->scratch2;
  lp__pb_varint(m, 1, id);
  if (k.line > 0) lp__pb_varint(m, 2, (uint64_t)k.line);
  lp__pb_varint(l, 1, id);
  lp__pb_varint(l, 2, 1);
  lp__pb_msg(l, 4, m);
  lp__pb_msg(&pp->body, 4, l);
  if (pp->body.err) return 0;
  lp__index_put(&pp->funcindex, h, pp->nfuncs);
  pp->funcs[pp->nfuncs++] = k;
  return id;
}

int lp__pprof_sample(lp__pprof_t *pp, const uint64_t *locs, size_t nlocs, int64_t samples, int64_t wall_ns,
                     int64_t cpu_ns, const char *thread, uint64_t tid) {
  lp__pb_t *m = &pp->scratch, *p = &pp->scratch2;
  if (thread && !pp->thread_key && (pp->thread_key = str_index(pp, "thread")) < 0) return pp->thread_key = 0, -ENOMEM;
  if (tid && !pp->tid_key && (pp->tid_key = str_index(pp, "thread_id")) < 0) return pp->tid_key = 0, -ENOMEM;
  if (thread && thread != pp->last_thread) {
    if ((pp->last_thread_idx = str_index(pp, thread)) < 0) return pp->last_thread = NULL, -ENOMEM;
    pp->last_thread = thread;
  }
  int64_t tk = pp->thread_key, tv = pp->last_thread_idx, ik = pp->tid_key;
  /* Sample: location_id 1 and value 2, both packed; label 3 (Label: key 1, str 2, num 3). */
  for (size_t i = 0; i < nlocs; i++) lp__pb_bare_varint(p, locs[i]);
  lp__pb_msg(m, 1, p);
  lp__pb_bare_varint(p, (uint64_t)samples);
  lp__pb_bare_varint(p, (uint64_t)wall_ns);
  if (pp->cpu) lp__pb_bare_varint(p, (uint64_t)cpu_ns);
  lp__pb_msg(m, 2, p);
  if (thread) {
    lp__pb_varint(p, 1, (uint64_t)tk);
    lp__pb_varint(p, 2, (uint64_t)tv);
    lp__pb_msg(m, 3, p);
  }
  if (tid) {
    lp__pb_varint(p, 1, (uint64_t)ik);
    lp__pb_varint(p, 3, tid);
    lp__pb_msg(m, 3, p);
  }
  lp__pb_msg(&pp->body, 2, m);
  return pp->body.err ? -ENOMEM : 0;
}

/* ---- gzip, stored ------------------------------------------------------------- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

uint32_t lp__crc32(uint32_t crc, const void *data, size_t n) {
  (void)pthread_once(&crc_once, crc_init); /* fails only for a bad argument */
  const uint8_t *p = data;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

typedef struct gz {
  FILE *out;
  uint8_t block[65535];
  size_t n;
  uint32_t crc, size;
  bool failed;
} gz_t;

static void gz_block(gz_t *g, bool last) {
  uint8_t head[5] = {last ? 1 : 0, (uint8_t)(g->n & 0xff), (uint8_t)(g->n >> 8), (uint8_t)(~g->n & 0xff),
                     (uint8_t)((~g->n >> 8) & 0xff)};
  if (fwrite(head, 1, 5, g->out) != 5 || fwrite(g->block, 1, g->n, g->out) != g->n) g->failed = true;
  g->n = 0;
}

static void gz_write(gz_t *g, const void *data, size_t n) {
  const uint8_t *p = data;
  g->crc = lp__crc32(g->crc, p, n);
  g->size += (uint32_t)n;
  while (n) {
    size_t room = sizeof g->block - g->n, k = n < room ? n : room;
    memcpy(g->block + g->n, p, k);
    g->n += k;
    p += k;
    n -= k;
    if (g->n == sizeof g->block) gz_block(g, false);
  }
}

static void le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int lp__pprof_write(lp__pprof_t *pp, FILE *out, int64_t time_nanos, int64_t duration_nanos, int64_t period_ns,
                    const char *default_type, const char *mapping_file) {
  static const char *const types[3][2] = {{"samples", "count"}, {"wall", "nanoseconds"}, {"cpu", "nanoseconds"}};
  lp__pb_t head = {0};
  int64_t idx[3][2];
  int ntypes = pp->cpu ? 3 : 2;
  if (default_type && strcmp(default_type, "cpu") == 0 && !pp->cpu) default_type = "wall";
  for (int i = 0; i < ntypes; i++)
    for (int j = 0; j < 2; j++)
      if ((idx[i][j] = str_index(pp, types[i][j])) < 0) return -ENOMEM;
  int64_t def = str_index(pp, default_type ? default_type : "wall"), map = mapping_file ? str_index(pp, mapping_file) : 0;
  if (def < 0 || map < 0) return -ENOMEM;
  /* sample_type 1 (ValueType: type 1, unit 2), time_nanos 9, duration_nanos 10, period_type 11, period 12,
     default_sample_type 14. */
  for (int i = 0; i < ntypes; i++) {
    lp__pb_varint(&pp->scratch, 1, (uint64_t)idx[i][0]);
    lp__pb_varint(&pp->scratch, 2, (uint64_t)idx[i][1]);
    lp__pb_msg(&head, 1, &pp->scratch);
  }
  /* One mapping (id 1, filename 5, has_functions 7, has_filenames 8, has_line_numbers 9): the labels are
     already symbols, and readers need not look for a binary. Its file is the program's, which pprof
     names the profile by ("File:"). */
  lp__pb_varint(&pp->scratch, 1, 1);
  if (map) lp__pb_varint(&pp->scratch, 5, (uint64_t)map);
  lp__pb_varint(&pp->scratch, 7, 1);
  lp__pb_varint(&pp->scratch, 8, 1);
  lp__pb_varint(&pp->scratch, 9, 1);
  lp__pb_msg(&head, 3, &pp->scratch);
  lp__pb_varint(&head, 9, (uint64_t)time_nanos);
  lp__pb_varint(&head, 10, (uint64_t)duration_nanos);
  lp__pb_varint(&pp->scratch, 1, (uint64_t)idx[1][0]);
  lp__pb_varint(&pp->scratch, 2, (uint64_t)idx[1][1]);
  lp__pb_msg(&head, 11, &pp->scratch);
  lp__pb_varint(&head, 12, (uint64_t)period_ns);
  lp__pb_varint(&head, 14, (uint64_t)def);
  if (head.err || pp->body.err || pp->strtab.err) {
    free(head.buf);
    return -ENOMEM;
  }
  gz_t *g = lp__codec_calloc(1, sizeof *g);
  if (!g) {
    free(head.buf);
    return -ENOMEM;
  }
  g->out = out;
  /* ID1 ID2, deflate, no flags, no time, no extra flags, OS unknown. */
  static const uint8_t gzhead[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
  if (fwrite(gzhead, 1, sizeof gzhead, out) != sizeof gzhead) g->failed = true;
  gz_write(g, head.buf, head.len);
  gz_write(g, pp->body.buf, pp->body.len);
  gz_write(g, pp->strtab.buf, pp->strtab.len);
  gz_block(g, true);
  uint8_t tail[8];
  le32(tail, g->crc);
  le32(tail + 4, g->size);
  if (fwrite(tail, 1, 8, out) != 8) g->failed = true;
  int rc = g->failed ? -EIO : 0;
  free(g);
  free(head.buf);
  return rc;
}
