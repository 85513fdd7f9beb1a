/*
 * test_export.c: the bytes of every timeline format, pinned.
 *
 * Sessions are made up from a seed, chunk by chunk as the recorder leaves
 * them: lanes of nested scopes, scopes whose ends never came (a longjmp),
 * ends whose begins came before the lane's first event, instants, counters
 * (two of one name), sites with layers, phases and modes, a site made at
 * run time (NVTX), depths past 255, hostile labels and thread names,
 * virtual tracks with items given inner first and back to back, windows
 * that cut through chunks, levels left out, a ring's lost lanes, a counter
 * running faster or slower than CLOCK_MONOTONIC, and a clock jump. Each is
 * written as JSON, systrace text, Perfetto at the end and the Perfetto
 * stream (its chunks given in batches, some in two parts as a flush gives
 * them, some files restarted), with a fixed process id and BOOTTIME offset.
 * Each output's length and FNV-1a hash must be those recorded in
 * tests/data/export/hashes.txt, and seed 0's outputs are kept whole beside
 * it, so that a deliberate change of output shows as a diff.
 *
 * LP_EXPORT_GOLDEN=DIR writes the goldens to DIR instead of checking them
 * (after a deliberate change, or a new version: the notes name it).
 */
#include "internal.h"
#include "track_lane.h"

#include <fcntl.h>

#include "runner.h"

#ifndef LP_TEST_EXPORT_DATA
#define LP_TEST_EXPORT_DATA "tests/data/export"
#endif

enum { SEEDS = 160, FORMATS = 4 };
static const char *const format_name[FORMATS] = {"json", "systrace", "pftrace", "stream.pftrace"};

/* ---- the sites ---- */
#define SITE(name, label, level, layer, phase, mode) \
  static const lp_site_t name = {label, __FILE__, "gen", __LINE__, level, layer, phase, mode, 0}
SITE(s_plain, "plain", LP_LEVEL_RUNTIME, 0, 0, 0);
SITE(s_op, "operator \"quoted\" \\ /", LP_LEVEL_OPERATOR, 0, 0, 0);
SITE(s_dbg, "debug detail", LP_LEVEL_DEBUG, 0, 0, 0);
SITE(s_req, "request", LP_LEVEL_REQUEST, 0, 0, 0);
SITE(s_ctl, "ctl\x01\x1f\x7f tab\t nl\n", LP_LEVEL_RUNTIME, 0, 0, 0);
SITE(s_utf, "bad \xff\xfe utf8 \xc3 cut \xe2\x82", LP_LEVEL_RUNTIME, 0, 0, 0);
SITE(s_uni, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", LP_LEVEL_OPERATOR, 0, 0, 0);
#define LONG10 "long label"
#define LONG100 LONG10 LONG10 LONG10 LONG10 LONG10 LONG10 LONG10 LONG10 LONG10 LONG10
SITE(s_long, LONG100 LONG100 LONG100, LP_LEVEL_RUNTIME, 0, 0, 0);
SITE(s_null, NULL, LP_LEVEL_RUNTIME, 0, 0, 0);
SITE(s_layer, "layered", LP_LEVEL_RUNTIME, LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, LP_MODE_SCOPE);
SITE(s_switch, "switched", LP_LEVEL_RUNTIME, LP_LAYER_DRIVER, LP_PHASE_COMPUTATION, LP_MODE_SWITCH);
SITE(s_switch2, "switched again", LP_LEVEL_OPERATOR, LP_LAYER_DRIVER, LP_PHASE_IO, LP_MODE_SWITCH);
SITE(s_sub, "subtracted", LP_LEVEL_RUNTIME, LP_LAYER_CPU, LP_PHASE_IO, LP_MODE_SUBTRACT);
SITE(s_app, "application", LP_LEVEL_REQUEST, LP_LAYER_APPLICATION, LP_PHASE_OVERALL, LP_MODE_SCOPE);
SITE(s_instant, "instant \"i\"", LP_LEVEL_RUNTIME, 0, 0, 0);
SITE(s_counter, "queue depth", LP_LEVEL_RUNTIME, 0, 0, 0);
SITE(s_counter2, "queue depth", LP_LEVEL_OPERATOR, 0, 0, 0);
SITE(s_counter3, "bytes", LP_LEVEL_DEBUG, 0, 0, 0);
static const lp_impl_made_site_t s_made = {
    {"nvtx range", "", "", 0, LP_LEVEL_ANNOTATIONS, 0, 0, 0, LP_IMPL_SITE_MADE}, "cuda domain"};
static const lp_impl_made_site_t s_made_plain = {
    {"nvtx plain", "", "", 0, LP_LEVEL_ANNOTATIONS, 0, 0, 0, LP_IMPL_SITE_MADE}, NULL};

static const lp_site_t *const scope_sites[] = {&s_plain, &s_plain, &s_plain, &s_op, &s_op, &s_dbg, &s_req,
                                                &s_ctl, &s_utf, &s_uni, &s_long, &s_null, &s_layer, &s_switch,
                                                &s_switch2, &s_sub, &s_app, &s_made.site, &s_made_plain.site};
static const lp_site_t *const instant_sites[] = {&s_instant, &s_plain, &s_made.site, &s_layer};
static const lp_site_t *const counter_sites[] = {&s_counter, &s_counter2, &s_counter3};
static const char *const thread_names[] = {"main", "worker \"1\"", "", "w", "tab\tthread \xff", LONG100};
static const char *const work_names[] = {"kernel", "copy \"h2d\"", "kernel", "bad \xc3", "", "queue\x01"};
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- a seeded generator ---- */
typedef struct rng {
  uint64_t s;
} rng_t;

static uint64_t rnd(rng_t *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}
static uint32_t below(rng_t *r, uint32_t n) { return (uint32_t)(rnd(r) % n); }

/* The clock: ns = base + ticks * num / den, and from tick `jump_at` on, jump ns more (a VM restored). */
typedef struct clockdef {
  uint64_t base, num, den, jump_at;
  int64_t jump;
} clockdef_t;

static lp__sync_t sync_at(const clockdef_t *c, uint64_t ticks) {
  uint64_t ns = c->base + (uint64_t)((unsigned __int128)ticks * c->num / c->den);
  if (ticks >= c->jump_at) ns += (uint64_t)c->jump;
  return (lp__sync_t){ticks, ns};
}

typedef struct gen_lane {
  lp_impl_event_t *ev;
  size_t n, cap;
} gen_lane_t;

static void push(gen_lane_t *g, uint64_t ts, uintptr_t tag) {
  if (g->n == g->cap) {
    g->cap = g->cap ? g->cap * 2 : 1024;
    g->ev = realloc(g->ev, g->cap * sizeof *g->ev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g->ev);
  }
  g->ev[g->n++] = (lp_impl_event_t){ts, tag};
}

static uintptr_t tag_of(const lp_site_t *site, unsigned kind, uint32_t depth) {
  return (uintptr_t)site | kind | LP_IMPL_DEPTH_TAG(depth);
}

/* A thread's events from tick t on: nested scopes and the mistakes a program makes. */
static uint64_t gen_thread(rng_t *r, gen_lane_t *g, uint64_t t, size_t nev) {
  struct {
    const lp_site_t *site;
    uint32_t depth;
  } st[400];
  size_t n = 0;
  /* Scopes open before the lane's first event: their ends come without begins. */
  uint32_t d0 = below(r, 3);
  for (uint32_t k = below(r, 4); k > 0; k--, d0++) st[n++] = (__typeof__(st[0])){scope_sites[below(r, N(scope_sites))], d0};
  while (g->n < nev) {
    uint32_t gap = below(r, 8) == 0 ? 0 : below(r, 20) == 0 ? 1000000 + below(r, 5000000) : 1 + below(r, 3000);
    t += gap;
    uint32_t top = n ? st[n - 1].depth : d0;
    uint32_t op = below(r, 100);
    if (op < 40 && n < 380) {
      const lp_site_t *s = scope_sites[below(r, N(scope_sites))];
      uint32_t d = n ? top + 1 + (below(r, 5) == 0) : d0 + below(r, 2);
      if (below(r, 60) == 0) d = 255 + below(r, 3); /* deeper than the tag holds: matched by site too */
      push(g, t, tag_of(s, LP_IMPL_EV_BEGIN, d));
      st[n].site = s;
      st[n++].depth = d;
    } else if (op < 78 && n) {
      n--;
      push(g, t, tag_of(st[n].site, LP_IMPL_EV_END, st[n].depth));
    } else if (op < 81 && n >= 2) { /* a longjmp: inner scopes never end, an outer one does */
      n -= 1 + below(r, (uint32_t)n - 1);
      push(g, t, tag_of(st[n - 1].site, LP_IMPL_EV_END, st[n - 1].depth));
      n--;
    } else if (op < 83 && n) { /* a longjmp, then a new begin at or above the skipped scopes' depth */
      uint32_t d = st[below(r, (uint32_t)n)].depth;
      while (n && st[n - 1].depth >= d) n--;
      const lp_site_t *s = scope_sites[below(r, N(scope_sites))];
      push(g, t, tag_of(s, LP_IMPL_EV_BEGIN, d));
      st[n].site = s;
      st[n++].depth = d;
    } else if (op < 84) { /* an end nothing begun matches */
      uint32_t past = 1 + below(r, 3); /* one draw per statement: argument order is the compiler's */
      push(g, t, tag_of(scope_sites[below(r, N(scope_sites))], LP_IMPL_EV_END, top + past));
    } else if (op < 91) {
      push(g, t, (uintptr_t)instant_sites[below(r, N(instant_sites))] | LP_IMPL_EV_INSTANT);
    } else {
      push(g, t, (uintptr_t)counter_sites[below(r, N(counter_sites))] | LP_IMPL_EV_COUNTER);
      push(g, (uint64_t)(int64_t)((int64_t)below(r, 2000000) - 1000000), LP__EV_PAYLOAD);
    }
  }
  return t;
}

/* A track's items, given as a program gives them: some back to back, some inner first, recorded at rec ticks. */
static void gen_track(rng_t *r, gen_lane_t *g, const clockdef_t *c, uint64_t t0, uint64_t t1, size_t nitems,
                      uint32_t nwork) {
  uint64_t start = sync_at(c, t0).ns - 500000, prev_end = 0;
  for (size_t i = 0; i < nitems; i++) {
    uint64_t rec = t0 + (t1 - t0) * i / nitems;
    uint32_t id = below(r, nwork + 1); /* nwork: an id past the names (cannot happen, skipped) */
    if (id == nwork && below(r, 4)) id = 0;
    uint64_t dur = below(r, 10) == 0 ? 0 : 1 + below(r, 100000);
    uint64_t s = below(r, 3) == 0 && prev_end ? prev_end : start + below(r, 200000);
    if (below(r, 5) == 0 && prev_end > 3000) { /* the outer item, given after the inner one */
      s = prev_end - 3000;
      dur = 5000 + below(r, 1000);
    }
    start = s;
    prev_end = s + dur;
    push(g, s, ((uintptr_t)id << 3) | LP__EV_TRACK);
    push(g, dur, lp__track_payload_tag(rec));
  }
}

/* The ticks of event i of a thread lane (of the event before it, if i is a counter's value). */
static uint64_t event_ticks(const gen_lane_t *g, size_t i) {
  if (i > 0 && (g->ev[i].tag & LP_IMPL_EV_KIND) == LP__EV_PAYLOAD) i--;
  return g->ev[i].ts;
}

/* ---- a session from a seed ---- */
typedef struct made {
  lp__session_t s;
  lp__chunk_t **chunks; /* every chunk made, to free */
  size_t nchunks;
  gen_lane_t *gl;       /* the lanes' events, to free */
  uint32_t ngl;
  lp__sync_t *all;      /* every sync point, for the stream's map */
  size_t nall;
} made_t;

static lp__chunk_t *new_chunk(made_t *m) {
  lp__chunk_t *c = calloc(1, LP__CHUNK_BYTES);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  m->chunks = realloc(m->chunks, (m->nchunks + 1) * sizeof *m->chunks);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m->chunks);
  m->chunks[m->nchunks++] = c;
  return c;
}

static void add_sync(made_t *m, lp__sync_t p) {
  m->all = realloc(m->all, (m->nall + 1) * sizeof *m->all);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m->all);
  m->all[m->nall++] = p;
}

/* The lane's events cut into chunks (a counter's two slots never apart), as snap_lane keeps them for the window. */
static void chunk_lane(rng_t *r, made_t *m, const clockdef_t *c, lp__snap_lane_t *sl, const gen_lane_t *g, bool lost,
                       bool track) {
  size_t cap = g->n + 1;
  sl->chunks = calloc(cap, sizeof *sl->chunks);
  CU_ASSERT_PTR_NOT_NULL_FATAL(sl->chunks);
  uint64_t prev_ticks = 0;
  size_t i = 0, made = 0;
  uint32_t skip = lost ? 1 + below(r, 2) : 0; /* the ring reused the lane's first chunks */
  while (i < g->n) {
    uint32_t want = below(r, 6) == 0 ? (uint32_t)LP__CHUNK_EVENTS : 1 + below(r, 120);
    size_t end = i + want < g->n ? i + want : g->n;
    if (end < g->n && (g->ev[end].tag & LP_IMPL_EV_KIND) == LP__EV_PAYLOAD) end++;
    if (end - i > LP__CHUNK_EVENTS) end -= 2;
    uint64_t first = track ? lp__track_recorded(g->ev[i + 1]) : g->ev[i].ts;
    uint64_t ticks = first > prev_ticks + 7 ? first - below(r, 7) : first;
    lp__chunk_t *ch = new_chunk(m);
    ch->sync = sync_at(c, ticks);
    ch->count = (uint32_t)(end - i);
    memcpy(ch->ev, g->ev + i, (end - i) * sizeof *g->ev);
    prev_ticks = track ? lp__track_recorded(g->ev[end - 1]) : g->ev[end - 1].ts;
    add_sync(m, ch->sync);
    if (made++ >= skip) sl->chunks[sl->nchunks++] = (lp__snap_chunk_t){ch, (uint32_t)(end - i), UINT64_MAX};
    i = end;
  }
  for (uint32_t k = 0; k + 1 < sl->nchunks; k++) sl->chunks[k].end_ns = sl->chunks[k + 1].chunk->sync.ns;
  sl->lost = skip > 0;
}

static void make_session(uint64_t seed, made_t *m) {
  memset(m, 0, sizeof *m);
  rng_t r = {seed * 0x2545f4914f6cdd1du + 7};
  clockdef_t c = {5000000000u + below(&r, 1000000000), 1, 1, UINT64_MAX, 0};
  uint32_t rate = below(&r, 3);
  if (rate == 1) { /* a counter slower than 1 GHz: whole ns and a fraction per tick */
    c.num = 7;
    c.den = 3 + below(&r, 4);
  } else if (rate == 2) { /* faster: a fraction of a ns per tick */
    c.num = 3;
    c.den = 7 + below(&r, 4);
  }
  if (below(&r, 5) == 0) { /* a jump of the counter against CLOCK_MONOTONIC */
    c.jump_at = 2000000 + below(&r, 4000000);
    c.jump = below(&r, 2) ? 3000000 : -200000;
  }
  uint32_t nthreads = seed == 0 ? 2 : 1 + below(&r, 4), ntracks = seed == 0 ? 1 : below(&r, 3);
  size_t nev = seed == 0 ? 60 : 20 + below(&r, seed % 7 == 0 ? 6000 : 900);
  m->ngl = nthreads + ntracks;
  m->gl = calloc(m->ngl, sizeof *m->gl);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m->gl);
  uint64_t tmax = 0;
  for (uint32_t i = 0; i < nthreads; i++) {
    size_t more = below(&r, 50);
    uint64_t t = gen_thread(&r, &m->gl[i], 1000 + below(&r, 100000), nev + more);
    if (t > tmax) tmax = t;
  }
  lp__session_t *s = &m->s;
  s->nlanes = m->ngl;
  s->nthreads = nthreads;
  s->lanes = calloc(m->ngl + 1, sizeof *s->lanes);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s->lanes);
  static const uint32_t levels[] = {LP_LEVEL_STANDARD, LP_LEVEL_ALL, LP_LEVEL_RUNTIME,
                                    LP_LEVEL_STANDARD | LP_LEVEL_ANNOTATIONS, LP_LEVEL_ALL & ~LP_LEVEL_DEBUG};
  s->opts.levels = seed == 0 ? LP_LEVEL_ALL : levels[below(&r, N(levels))];
  s->opts.policy = below(&r, 3) == 0 ? LP_TRACE_RING : LP_TRACE_DISCARD;
  s->opts.budget_bytes = (uint64_t)(1 + below(&r, 64)) << 20;
  /* The window: from the first thread's early events (or from before any) to its late ones (or still running). */
  const gen_lane_t *g0 = &m->gl[0];
  uint64_t start_ticks = 500;
  if (below(&r, 3) != 0) {
    start_ticks = event_ticks(g0, below(&r, (uint32_t)g0->n / 3));
    start_ticks += below(&r, 2);
  }
  uint64_t stop_ticks = below(&r, 3) == 0 ? UINT64_MAX : event_ticks(g0, g0->n - 1 - below(&r, (uint32_t)g0->n / 3));
  if (stop_ticks < start_ticks) stop_ticks = UINT64_MAX;
  s->start = sync_at(&c, start_ticks);
  s->stop = stop_ticks == UINT64_MAX ? (lp__sync_t){UINT64_MAX, UINT64_MAX} : sync_at(&c, stop_ticks);
  lp__sync_t now = sync_at(&c, tmax + 1000);
  s->taken_ns = now.ns;
  if (below(&r, 2)) {
    s->dropped = 1 + below(&r, 100000);
    s->first_drop_ns = s->start.ns + below(&r, 1000000);
  }
  for (uint32_t i = 0; i < nthreads; i++) {
    lp__snap_lane_t *sl = &s->lanes[i];
    sl->tid = 100 + i * 7;
    sl->name = strdup(thread_names[below(&r, N(thread_names))]);
    chunk_lane(&r, m, &c, sl, &m->gl[i], s->opts.policy == LP_TRACE_RING && below(&r, 2), false);
  }
  for (uint32_t k = 0; k < ntracks; k++) {
    lp__snap_lane_t *sl = &s->lanes[nthreads + k];
    uint32_t nwork = 1 + below(&r, N(work_names));
    sl->tid = LP__TRACK_FIRST_TID + k;
    sl->name = strdup(k % 2 ? "queue \"b\"" : "gpu");
    sl->work = calloc(nwork + 1, sizeof *sl->work);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sl->work);
    for (uint32_t w = 0; w < nwork; w++) sl->work[w] = strdup(work_names[w]);
    sl->nwork = nwork;
    gen_track(&r, &m->gl[nthreads + k], &c, 500, tmax, seed == 0 ? 12 : 5 + below(&r, 200), nwork);
    chunk_lane(&r, m, &c, sl, &m->gl[nthreads + k], false, true);
  }
  /* The sync points an export maps through: the window's, the chunks', and now. */
  s->syncs = calloc(m->nall + 3, sizeof *s->syncs);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s->syncs);
  s->syncs[s->nsyncs++] = s->start;
  if (s->stop.ns != UINT64_MAX) s->syncs[s->nsyncs++] = s->stop;
  for (size_t i = 0; i < m->nall; i++) s->syncs[s->nsyncs++] = m->all[i];
  s->syncs[s->nsyncs++] = now;
  add_sync(m, now);
}

static void free_session_made(made_t *m) {
  for (uint32_t i = 0; i < m->s.nlanes; i++) {
    lp__snap_lane_t *l = &m->s.lanes[i];
    free(l->name);
    for (uint32_t k = 0; k < l->nwork; k++) free(l->work[k]);
    free(l->work);
    free(l->chunks);
  }
  free(m->s.lanes);
  free(m->s.syncs);
  for (size_t i = 0; i < m->nchunks; i++) free(m->chunks[i]);
  free(m->chunks);
  for (uint32_t i = 0; i < m->ngl; i++) free(m->gl[i].ev);
  free(m->gl);
  free(m->all);
}

/* ---- the outputs ---- */
typedef struct buf {
  uint8_t *p;
  size_t n, cap;
} buf_t;

static void buf_add(buf_t *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2;
    b->p = realloc(b->p, b->cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b->p);
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
}

static const char *dir;

/* What an export wrote to a file, read back. */
static void through_file(buf_t *out, int (*fn)(lp__jw_t *, const lp__session_t *, const char *, char *, size_t),
                         int (*fn_st)(lp__jw_t *, const lp__session_t *), const lp__session_t *s) {
  char path[256];
  snprintf(path, sizeof path, "%s/out", dir);
  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
  CU_ASSERT_FATAL(fd >= 0);
  lp__jw_t w;
  CU_ASSERT_EQUAL_FATAL(lp__jw_init(&w, fd), 0);
  char jump[512] = "";
  int rc = fn ? fn(&w, s, "golden \"process\"", jump, sizeof jump) : fn_st(&w, s);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_EQUAL(lp__jw_finish(&w), 0);
  off_t len = lseek(fd, 0, SEEK_END);
  CU_ASSERT_FATAL(len >= 0);
  uint8_t *p = malloc((size_t)len + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  CU_ASSERT_EQUAL_FATAL(pread(fd, p, (size_t)len, 0), len);
  close(fd);
  unlink(path);
  buf_add(out, p, (size_t)len);
  buf_add(out, jump, strlen(jump)); /* the line said on stderr, part of what the export gives */
  free(p);
}

/* Systrace's header counts the machine's CPUs: "#P:N" becomes "#P:-" here. */
static void systrace_normalize(buf_t *b) {
  for (size_t i = 0; i + 3 < b->n; i++) {
    if (memcmp(b->p + i, "#P:", 3) != 0) continue;
    size_t k = i + 3;
    while (k < b->n && b->p[k] >= '0' && b->p[k] <= '9') k++;
    memmove(b->p + i + 4, b->p + k, b->n - k);
    b->p[i + 3] = '-';
    b->n = b->n - (k - i - 3) + 1;
    return;
  }
}

static void stream_take(lp__pfs_t *f, buf_t *out) {
  size_t n;
  const uint8_t *p = lp__pfs_bytes(f, &n);
  buf_add(out, p, n);
  lp__pfs_clear(f);
}

/*
 * The stream of the same chunks, as the writer gives them: in batches, each
 * lane's next chunk in turn, some chunks in two parts (a flush took the
 * first while it filled), some files ended and begun again.
 */
static void stream_of(rng_t *r, const made_t *m, buf_t *out) {
  const lp__session_t *s = &m->s;
  lp__sync_t *pts = malloc(m->nall * sizeof *pts);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pts);
  memcpy(pts, m->all, m->nall * sizeof *pts);
  lp__timemap_t *map = lp__timemap_new(pts, m->nall);
  free(pts);
  CU_ASSERT_PTR_NOT_NULL_FATAL(map);
  lp__pfs_t *f = lp__pfs_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  lp__pfs_restart(f, "golden \"process\"");
  lp__pfs_lane_t **state = calloc(s->nlanes + 1, sizeof *state);
  uint32_t *next = calloc(s->nlanes + 1, sizeof *next), *part = calloc(s->nlanes + 1, sizeof *part);
  CU_ASSERT_FATAL(state && next && part);
  lp__notes_t notes = {.at_ns = s->taken_ns,
                       .dropped = 3,
                       .budget_bytes = s->opts.budget_bytes,
                       .start_ns = s->start.ns,
                       .running = true,
                       .policy = "stream",
                       .levels = s->opts.levels,
                       .file_start_ns = s->start.ns,
                       .session_dropped = 3};
  for (bool more = true; more;) {
    more = false;
    for (uint32_t i = 0; i < s->nlanes; i++) {
      const lp__snap_lane_t *l = &s->lanes[i];
      if (next[i] >= l->nchunks) continue;
      const lp__snap_chunk_t *sc = &l->chunks[next[i]];
      uint32_t to = sc->end;
      if (!part[i] && to > 4 && below(r, 4) == 0) to = 1 + below(r, to - 1); /* a live chunk, flushed */
      lp__pfs_lane_info_t info = {l->tid, l->name, l->work != NULL, l->work, l->nwork};
      CU_ASSERT_EQUAL(lp__pfs_chunk(f, &state[i], &info, sc->chunk->ev, part[i], to, map, sc->chunk->sync), 0);
      stream_take(f, out);
      if (to == sc->end) {
        next[i]++;
        part[i] = 0;
      } else {
        part[i] = to;
      }
      more = true;
    }
    if (more && below(r, 5) == 0) { /* rotated */
      notes.at_ns += 1000;
      lp__pfs_finish(f, &notes);
      lp__pfs_restart(f, "golden \"process\"");
      stream_take(f, out);
    }
  }
  lp__pfs_finish(f, &notes);
  stream_take(f, out);
  CU_ASSERT_EQUAL(lp__pfs_error(f), 0);
  for (uint32_t i = 0; i < s->nlanes; i++) lp__pfs_lane_free(state[i]);
  free(state);
  free(next);
  free(part);
  lp__pfs_free(f);
  lp__timemap_free(map);
}

static void outputs(uint64_t seed, buf_t out[FORMATS]) {
  made_t m;
  make_session(seed, &m);
  memset(out, 0, FORMATS * sizeof *out);
  through_file(&out[0], lp__export_json, NULL, &m.s);
  through_file(&out[1], NULL, lp__export_systrace, &m.s);
  systrace_normalize(&out[1]);
  through_file(&out[2], lp__export_perfetto, NULL, &m.s);
  rng_t r = {seed + 99};
  stream_of(&r, &m, &out[3]);
  free_session_made(&m);
}

static uint64_t fnv(const buf_t *b) {
  uint64_t h = 0xcbf29ce484222325u;
  for (size_t i = 0; i < b->n; i++) h = (h ^ b->p[i]) * 0x100000001b3u;
  return h;
}

/* ---- the goldens ---- */
static bool write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(p, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

static uint8_t *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *p = NULL;
  size_t cap = 0;
  *n = 0;
  for (;;) {
    if (*n + 65536 > cap) {
      cap = cap * 2 + 65536;
      uint8_t *q = realloc(p, cap);
      if (!q) break;
      p = q;
    }
    size_t k = fread(p + *n, 1, cap - *n, f);
    *n += k;
    if (k == 0) break;
  }
  fclose(f);
  return p;
}

static void test_export_bytes_as_pinned(void) {
  const char *gold = getenv("LP_EXPORT_GOLDEN");
  char path[1024];
  FILE *hashes = NULL;
  if (gold && *gold) {
    snprintf(path, sizeof path, "%s/hashes.txt", gold);
    hashes = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(hashes);
    fprintf(hashes, "# seed format bytes fnv1a64 (labelprof %s)\n", LABELPROF_VERSION_STRING);
  }
  size_t hn = 0;
  snprintf(path, sizeof path, "%s/hashes.txt", LP_TEST_EXPORT_DATA);
  char *want = hashes ? NULL : (char *)read_file(path, &hn);
  if (!hashes) {
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    want = realloc(want, hn + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    want[hn] = '\0';
  }
  unsigned bad = 0;
  for (uint64_t seed = 0; seed < SEEDS; seed++) {
    buf_t out[FORMATS];
    outputs(seed, out);
    for (int k = 0; k < FORMATS; k++) {
      char line[128];
      snprintf(line, sizeof line, "%llu %s %zu %016llx\n", (unsigned long long)seed, format_name[k], out[k].n,
               (unsigned long long)fnv(&out[k]));
      if (seed == 0) {
        snprintf(path, sizeof path, "%s/seed0.%s", hashes ? gold : LP_TEST_EXPORT_DATA, format_name[k]);
        if (hashes) {
          CU_ASSERT(write_file(path, out[k].p, out[k].n));
        } else {
          size_t n;
          uint8_t *p = read_file(path, &n);
          CU_ASSERT_PTR_NOT_NULL(p);
          bool same = p && n == out[k].n && memcmp(p, out[k].p, n) == 0;
          if (!same) fprintf(stderr, "%s: the output is not the same (LP_EXPORT_GOLDEN=DIR writes it there)\n", path);
          CU_ASSERT(same);
          free(p);
        }
      }
      if (hashes) {
        fputs(line, hashes);
      } else if (!strstr(want, line)) {
        if (bad++ < 12) fprintf(stderr, "not as pinned: %s", line);
      }
      free(out[k].p);
    }
  }
  if (hashes) {
    CU_ASSERT_EQUAL(fclose(hashes), 0);
  } else {
    if (bad) fprintf(stderr, "%u outputs are not as pinned in %s/hashes.txt\n", bad, LP_TEST_EXPORT_DATA);
    CU_ASSERT_EQUAL(bad, 0);
  }
  free(want);
}

/* The same seed twice in one process gives the same bytes: nothing of the process leaks into them. */
static void test_export_bytes_repeat(void) {
  buf_t a[FORMATS], b[FORMATS];
  outputs(7, a);
  outputs(7, b);
  for (int k = 0; k < FORMATS; k++) {
    CU_ASSERT(a[k].n == b[k].n && memcmp(a[k].p, b[k].p, a[k].n) == 0);
    CU_ASSERT(a[k].n > 0);
    free(a[k].p);
    free(b[k].p);
  }
}

int main(void) {
  dir = lp_test_tmpdir("export");
  /* Fixed: the clock's name and reason, the process id, BOOTTIME's offset. */
  lp__clock_set_env(LP_CLOCK_AUTO);
  lp__clock_choose(LP_CLOCK_MONOTONIC);
  if (strcmp(lp__clock_reason(), "clock_gettime (LP_CLOCK_MONOTONIC)") != 0) {
    fprintf(stderr, "test_export: the clock was chosen before the test (%s): LABELPROF_CLOCK or LABELPROF_TRACE set?\n",
            lp__clock_reason());
    return 99;
  }
  lp__export_test_identity(4242, 123456789);
  lp__timemap_test_counter("counter"); /* the sessions' own sync points make the maps, as a counter's do */
  CU_TestInfo tests[] = {LP_TEST(test_export_bytes_as_pinned), LP_TEST(test_export_bytes_repeat), CU_TEST_INFO_NULL};
  return lp_test_main("export", tests);
}
