/*
 * export.c: a session as Chrome Trace Event JSON.
 *
 * The object form: {"labelprof_scope_order":"ends","traceEvents":[...],
 * "displayTimeUnit":"ns","otherData":{...}}. A process_name metadata event,
 * then for each lane with events a thread_name and a thread_sort_index, then
 * its events. The first key tells labelprof's reader, before any event, that
 * scopes come at their ends (below), not in order of their starts: it reads
 * such a file's lanes buffered from the start, in one pass and without a
 * note; other readers ignore an unknown key.
 *
 * A lane's events are read in recording order, and only those of the
 * session's window and levels are written: stamped between its start and
 * stop, plus the ends, recorded after the stop, of scopes that began inside.
 * Ticks become CLOCK_MONOTONIC nanoseconds through the session's sync
 * points, and each lane's times are kept strictly increasing (a repeated or
 * backward time moves to one nanosecond after the previous one): then no two
 * events of a lane share a time, and a viewer's nesting never depends on
 * file order.
 *
 * Begins and ends carry their depth on the pseudo-stack, and an end closes
 * the begin at its own depth: a begin is held until then and the pair is
 * written as one complete event ("X"). Scopes above it that never ended (a
 * longjmp skipped them) close at the same time, with
 * "args":{"unterminated":...}. An end whose begin is not there (it came
 * before the window, or the ring reused its chunk) gets a begin made up at
 * the lane's start, marked "truncated", so that the scopes around what was
 * kept still show; a first pass over the lane finds them. A begin still
 * open at the end of the lane is written as "B". Track lanes carry the
 * caller's own times and are written as they were recorded.
 */
#include "internal.h"
#include "track_lane.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Tests: the process id and BOOTTIME's offset from CLOCK_MONOTONIC every export writes, fixed (0: the real ones). */
static uint64_t test_pid;
static int64_t test_boot_offset;
static bool test_identity;

void lp__export_test_identity(uint64_t pid, int64_t boot_offset) {
  test_identity = pid != 0;
  test_pid = pid;
  test_boot_offset = boot_offset;
}

static uint64_t export_pid(void) { return test_identity ? test_pid : (uint64_t)getpid(); }

static const char *level_name(uint32_t level) {
  switch (level) {
  case LP_LEVEL_REQUEST:
    return "request";
  case LP_LEVEL_RUNTIME:
    return "runtime";
  case LP_LEVEL_OPERATOR:
    return "operator";
  case LP_LEVEL_DEBUG:
    return "debug";
  case LP_LEVEL_ANNOTATIONS:
    return "annotations";
  default:
    return "labelprof";
  }
}

typedef struct open_scope {
  const lp_site_t *site;
  uint64_t ns;
  uint32_t depth;
  bool shadow; /* begun after the stop: followed so that its end is known for what it is, never written */
  uint32_t extra; /* systrace: the ends of the scopes switches replaced, written with this one's */
} open_scope_t;

/* `"cat":"runtime","name":"kernel"`, escaped once per site (or track work name) and export. */
typedef struct fragment {
  const void *key;
  char *text;
  size_t len;
  const char *args; /* a layered site's args members: "layer":"runtime","phase":"execution"; else "" */
} fragment_t;

typedef struct pf_lane pf_lane_t;

typedef struct lane_writer {
  lp__jw_t *w;
  pf_lane_t *pf; /* Perfetto: the lane's slices and points are collected here instead of written as JSON */
  const lp__session_t *s;
  const lp__timemap_t *map;
  lp__sync_t anchor; /* the sync point of the chunk being written */
  lp__timeseg_t seg; /* the clock map's line for the chunk's ticks, as far as it goes (lane_ns) */
  uint64_t events;   /* events written */
  uint64_t made_up_base; /* made-up begins start here, plus their depth (UINT64_MAX: not known yet) */
  uint64_t ts_base;      /* "ts" is written relative to this CLOCK_MONOTONIC time (see ts_base_of) */
  char ids[64]; /* ,"pid":P,"tid":T,"ts": */
  size_t idslen;
  size_t cursor;
  uint64_t last;
  open_scope_t *stack;
  size_t depth, cap;
  fragment_t *frags;
  uint32_t nfrags, fmask;
  bool nomem;
} lane_writer_t;

static fragment_t build_fragment(const void *key, const char *cat, const char *name, const char *args) {
  fragment_t f = {key, lp__malloc(6 * strlen(name) + strlen(cat) + strlen(args) + 26), 0, NULL};
  if (!f.text) return f;
  char *o = f.text;
  memcpy(o, "\"cat\":\"", 7);
  o += 7;
  memcpy(o, cat, strlen(cat));
  o += strlen(cat);
  memcpy(o, "\",\"name\":", 9);
  o = lp__json_escape(o + 9, name);
  f.len = (size_t)(o - f.text);
  /* The args members live in the same allocation, after the text. */
  *o++ = '\0';
  memcpy(o, args, strlen(args) + 1);
  f.args = o;
  return f;
}

/* The fragment for key, built on first use; NULL when out of memory. */
static const fragment_t *fragment(lane_writer_t *lw, const void *key, const char *cat, const char *name,
                                  const char *args) {
  if (lw->frags) {
    uint32_t h = (uint32_t)(((uintptr_t)key >> 3) * 0x9e3779b1u) & lw->fmask;
    for (;; h = (h + 1) & lw->fmask) {
      if (!lw->frags[h].key) break;
      if (lw->frags[h].key == key) return &lw->frags[h];
    }
  }
  if (!lw->frags || (lw->nfrags + 1) * 2 > lw->fmask + 1) {
    uint32_t mask = lw->frags ? lw->fmask * 2 + 1 : 255;
    fragment_t *nf = lp__calloc((size_t)mask + 1, sizeof *nf);
    if (!nf) return NULL;
    for (uint32_t i = 0; lw->frags && i <= lw->fmask; i++) {
      if (!lw->frags[i].key) continue;
      uint32_t h = (uint32_t)(((uintptr_t)lw->frags[i].key >> 3) * 0x9e3779b1u) & mask;
      while (nf[h].key) h = (h + 1) & mask;
      nf[h] = lw->frags[i];
    }
    free(lw->frags);
    lw->frags = nf;
    lw->fmask = mask;
  }
  fragment_t f = build_fragment(key, cat, name, args);
  if (!f.text) return NULL;
  uint32_t h = (uint32_t)(((uintptr_t)key >> 3) * 0x9e3779b1u) & lw->fmask;
  while (lw->frags[h].key) h = (h + 1) & lw->fmask;
  lw->frags[h] = f;
  lw->nfrags++;
  return &lw->frags[h];
}

static void free_fragments(lane_writer_t *lw) {
  for (uint32_t i = 0; lw->frags && i <= lw->fmask; i++) free(lw->frags[i].text);
  free(lw->frags);
}

/* The next time of the lane: never equal to or before the previous one. */
static uint64_t lane_time(lane_writer_t *lw, uint64_t ns) {
  if (ns <= lw->last) ns = lw->last + 1;
  lw->last = ns;
  return ns;
}

/* ns for ticks of the chunk being written: on the line lent for its earlier ticks when it holds, else from the map. */
static uint64_t lane_ns(lane_writer_t *lw, uint64_t ticks) {
  uint64_t ns;
  if (lp__timeseg_ns(&lw->seg, ticks, &ns)) return ns;
  return lp__timemap_ns_seg(lw->map, ticks, lw->anchor, &lw->cursor, &lw->seg);
}

static uint64_t mapped(lane_writer_t *lw, uint64_t ticks) { return lane_time(lw, lane_ns(lw, ticks)); }

/*
 * "ts" is microseconds since the trace's base (otherData.ts_base_ns), with
 * three decimals. Readers parse it as a double, which holds whole
 * nanoseconds only below 2^53 ns (104 days): CLOCK_MONOTONIC itself passes
 * that on a server up for months, a time since the base only in a session
 * that long. Every event of a session is at or after its window's start
 * less 256 ns (made-up begins), so the base, a whole microsecond at or
 * before that, leaves every time non-negative; a time before it all the same
 * is written with its sign rather than wrapped.
 */
static uint64_t ts_base_of(const lp__session_t *s) {
  uint64_t t = s->start.ns > 1000 ? s->start.ns - 1000 : 0;
  return t - t % 1000;
}

static char *put_ts(char *o, uint64_t ns, uint64_t base) {
  if (ns >= base) return lp__jw_put_us(o, ns - base);
  *o = '-';
  return lp__jw_put_us(o + 1, base - ns);
}

/*
 * One event: ,\n{"ph":"X",<fragment>,"pid":P,"tid":T,"ts":<ts>[,"dur":<dur>]<tail>}
 * assembled in place with a single check for room.
 */
static void event(lane_writer_t *lw, char ph, const fragment_t *f, uint64_t ts, const uint64_t *dur, const char *tail) {
  lp__jw_t *w = lw->w;
  if (!f) {
    lw->nomem = true;
    return;
  }
  size_t tl = strlen(tail);
  char *o = lp__jw_reserve(w, f->len + lw->idslen + tl + 80);
  if (!o) { /* an error, or a label too long for the buffer: piece by piece */
    char head[] = ",\n{\"ph\":\"X\",";
    head[9] = ph;
    lp__jw_raw(w, head, sizeof head - 1);
    lp__jw_raw(w, f->text, f->len);
    lp__jw_raw(w, lw->ids, lw->idslen);
    char t[32];
    lp__jw_raw(w, t, (size_t)(put_ts(t, ts, lw->ts_base) - t));
    if (dur) {
      lp__jw_lit(w, ",\"dur\":");
      lp__jw_us(w, *dur);
    }
    lp__jw_raw(w, tail, tl);
    lp__jw_lit(w, "}");
    return;
  }
  memcpy(o, ",\n{\"ph\":\"X\",", 12);
  o[9] = ph;
  o += 12;
  memcpy(o, f->text, f->len);
  o += f->len;
  memcpy(o, lw->ids, lw->idslen);
  o = put_ts(o + lw->idslen, ts, lw->ts_base);
  if (dur) {
    memcpy(o, ",\"dur\":", 7);
    o = lp__jw_put_us(o + 7, *dur);
  }
  memcpy(o, tail, tl);
  o += tl;
  *o++ = '}';
  w->len = (size_t)(o - w->buf);
}

/* ---- layers and phases: "cat":"runtime,preparation", "args":{"layer":...,"phase":...[,"mode":...]} ---- */
static const fragment_t *site_fragment(lane_writer_t *lw, const lp_site_t *site) {
  /* A name made at run time (NVTX, ITT): its domain is the category. */
  if ((site->reserved_layers & LP_IMPL_SITE_MADE) && ((const lp_impl_made_site_t *)site)->category)
    return fragment(lw, site, ((const lp_impl_made_site_t *)site)->category, lp__label(site), "");
  if (!lp__site_has_layer(site)) return fragment(lw, site, level_name(site->level), lp__label(site), "");
  const char *layer = lp_layer_name(site->layer), *phase = lp_phase_name(site->phase);
  char cat[64], args[128];
  snprintf(cat, sizeof cat, "%s,%s", layer, phase);
  snprintf(args, sizeof args, "\"layer\":\"%s\",\"phase\":\"%s\"%s", layer, phase,
           site->mode == LP_MODE_SWITCH     ? ",\"mode\":\"switch\""
           : site->mode == LP_MODE_SUBTRACT ? ",\"mode\":\"subtract\""
                                            : "");
  return fragment(lw, site, cat, lp__label(site), args);
}

/* An event's tail: the site's args members (if any) and one more, in one "args" object. */
static const char *args_tail(char *buf, size_t size, const fragment_t *f, const char *extra) {
  if (!f || !f->args[0]) {
    if (!extra) return "";
    snprintf(buf, size, ",\"args\":{%s}", extra);
  } else {
    snprintf(buf, size, ",\"args\":{%s%s%s}", f->args, extra ? "," : "", extra ? extra : "");
  }
  return buf;
}
/* ---- end of layers and phases ---- */

/* ---- Perfetto: what the lane rules hand over instead of JSON (see the Perfetto section) ---- */
enum { PF_SLICE, PF_INSTANT, PF_COUNTER };
enum { PF_TRUNCATED = 1, PF_UNTERMINATED = 2, PF_OPEN = 4, PF_WORK = 8, PF_ABSOLUTE = 16 };
static void pf_add(lane_writer_t *lw, uint8_t kind, uint8_t flags, const void *key, uint64_t ts, uint64_t end,
                   int64_t value);

static void complete(lane_writer_t *lw, const open_scope_t *o, uint64_t end, bool unterminated) {
  uint64_t dur = end - o->ns;
  char tail[256];
  if (o->shadow) return;
  if (lw->pf) {
    pf_add(lw, PF_SLICE, unterminated ? PF_UNTERMINATED : 0, o->site, o->ns, end, 0);
    return;
  }
  const fragment_t *f = site_fragment(lw, o->site);
  event(lw, 'X', f, o->ns, &dur,
        args_tail(tail, sizeof tail, f, unterminated ? "\"unterminated\":\"ended by an enclosing scope\"" : NULL));
}

static bool grow_stack(lane_writer_t *lw) {
  if (lw->depth < lw->cap) return true;
  size_t cap = lw->cap ? lw->cap * 2 : 64;
  open_scope_t *s = lp__realloc(lw->stack, cap * sizeof *s);
  if (!s) {
    lw->nomem = true;
    return false;
  }
  lw->stack = s;
  lw->cap = cap;
  return true;
}

/*
 * The open scope an end at depth d closes: the innermost at that depth (at
 * 255, "that deep or deeper", also by site). 0 if none, else its index + 1.
 */
static size_t match(const open_scope_t *stack, size_t n, const lp_site_t *site, uint32_t d) {
  for (size_t k = n; k > 0; k--) {
    const open_scope_t *o = &stack[k - 1];
    if (o->depth < d) return 0;
    if (o->depth == d && (d < 255 || o->site == site)) return k;
  }
  return 0;
}

typedef struct lane_event {
  const lp_site_t *site;
  uint32_t kind, depth;
  uint64_t ts;
  bool after_start; /* stamped after the window's start */
  bool in_window;   /* stamped inside the window, of the session's levels */
} lane_event_t;

/* A chunk as the window sees it: where it stands, and the sync point its ticks map through. */
typedef struct chunk_view {
  lp__span_t span;
  lp__sync_t anchor;
} chunk_view_t;

static chunk_view_t view_of(const lane_writer_t *lw, const lp__snap_chunk_t *sc) {
  chunk_view_t cv = {lp__chunk_span(lw->s->start, lw->s->stop, sc->chunk->sync.ns, sc->end_ns), sc->chunk->sync};
  return cv;
}

/*
 * Whether ticks recorded in a chunk fall after the window's start and before
 * its stop. Only a chunk that straddles a bound maps them, through the
 * clock's stretches, to compare in ns.
 */
static inline void in_time(const lane_writer_t *lw, const chunk_view_t *cv, uint64_t ticks, bool *after,
                           bool *before) {
  uint64_t ns = 0;
  if (cv->span.after_start == LP__EACH || cv->span.before_stop == LP__EACH) {
    size_t cursor = 0;
    ns = lp__timemap_ns(lw->map, ticks, cv->anchor, &cursor);
  }
  *after = cv->span.after_start == LP__ALL_IN || (cv->span.after_start == LP__EACH && ns >= lw->s->start.ns);
  *before = cv->span.before_stop == LP__ALL_IN || (cv->span.before_stop == LP__EACH && ns <= lw->s->stop.ns);
}

static inline lane_event_t decode(const lane_writer_t *lw, const chunk_view_t *cv, lp_impl_event_t e) {
  lane_event_t v;
  bool before;
  v.kind = (uint32_t)(e.tag & LP_IMPL_EV_KIND);
  v.site = LP__TAG_SITE(e.tag);
  v.depth = v.kind <= LP_IMPL_EV_END ? LP__TAG_DEPTH(e.tag) : 0;
  v.ts = e.ts;
  v.after_start = v.in_window = false;
  if (v.kind == LP__EV_PAYLOAD || !(v.site->level & lw->s->opts.levels)) return v;
  in_time(lw, cv, e.ts, &v.after_start, &before);
  v.in_window = v.after_start && before;
  return v;
}

/* A new begin at depth d: scopes at d or deeper never ended (a longjmp skipped their ends). */
static void close_at_or_below(lane_writer_t *lw, uint32_t d, uint64_t ns) {
  while (lw->depth > 0 && lw->stack[lw->depth - 1].depth >= d) {
    lw->depth--;
    complete(lw, &lw->stack[lw->depth], lane_time(lw, ns), true);
  }
}

/*
 * An end whose begin the window does not hold: the scope was open when the
 * window (or, after the ring reused older chunks, what is left of the lane)
 * begins. Its begin is made up there, marked "truncated". Made-up begins
 * come before every real event of the lane, a nanosecond per level apart,
 * outermost first, so that they nest whatever order their ends come in.
 */
static void made_up(lane_writer_t *lw, const lane_event_t *v, uint64_t end) {
  uint64_t ts = lw->made_up_base + (v->depth < 255 ? v->depth : 255);
  uint64_t dur = end > ts ? end - ts : 0;
  char tail[256];
  if (lw->pf) {
    pf_add(lw, PF_SLICE, PF_TRUNCATED, v->site, ts, ts + dur, 0);
    return;
  }
  const fragment_t *f = site_fragment(lw, v->site);
  event(lw, 'X', f, ts, &dur, args_tail(tail, sizeof tail, f, "\"truncated\":true"));
}

static void scope_end(lane_writer_t *lw, const lane_event_t *v) {
  size_t k = match(lw->stack, lw->depth, v->site, v->depth);
  uint64_t ns = lane_ns(lw, v->ts);
  if (k == 0) {
    /* Scopes above its depth lost their ends, as when it is matched; then its own begin is made up. */
    close_at_or_below(lw, v->depth + 1, ns);
    if (!v->in_window) ns = lw->s->stop.ns; /* it enclosed the whole window: shown up to the stop */
    made_up(lw, v, lane_time(lw, ns));
    return;
  }
  /* Scopes above the match lost their ends: they close here, innermost first. */
  while (lw->depth > k) {
    lw->depth--;
    complete(lw, &lw->stack[lw->depth], lane_time(lw, ns), true);
  }
  lw->depth--;
  complete(lw, &lw->stack[lw->depth], lane_time(lw, ns), false);
}

static void scope_begin(lane_writer_t *lw, const lane_event_t *v, bool shadow) {
  uint64_t ns = shadow ? lw->last : mapped(lw, v->ts);
  close_at_or_below(lw, v->depth, ns);
  if (!grow_stack(lw)) return;
  lw->stack[lw->depth++] = (open_scope_t){v->site, ns, v->depth, shadow, 0};
}

static void metadata(lp__jw_t *w, int pid, uint64_t tid, const char *name, uint32_t sort_index) {
  lp__jw_lit(w, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
  lp__jw_i64(w, pid);
  lp__jw_lit(w, ",\"tid\":");
  lp__jw_u64(w, tid);
  lp__jw_lit(w, ",\"args\":{\"name\":");
  lp__jw_str(w, name);
  lp__jw_lit(w, "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":");
  lp__jw_i64(w, pid);
  lp__jw_lit(w, ",\"tid\":");
  lp__jw_u64(w, tid);
  lp__jw_lit(w, ",\"args\":{\"sort_index\":");
  lp__jw_u64(w, sort_index);
  lp__jw_lit(w, "}}");
}

/*
 * The rules both lane writers (JSON and systrace) follow, in one place.
 * note_first: at the lane's first event in the window, where made-up begins
 * go (at the window's start, or just before what the ring left).
 * end_written: whether an end is written; *m is its match on the stack (0:
 * none). Not written: an end after the stop whose begin was not written
 * either (before the lane's first event in the window, or a shadow).
 */
static void note_first(lane_writer_t *lw, const lp__snap_lane_t *l, const lane_event_t *v) {
  if (lw->made_up_base != UINT64_MAX || !v->in_window) return;
  uint64_t first = lane_ns(lw, v->ts);
  uint64_t base = l->lost || first < lw->s->start.ns ? first : lw->s->start.ns;
  lw->made_up_base = base > 256 ? base - 256 : 0;
}

static bool end_written(const lane_writer_t *lw, const lane_event_t *v, size_t *m) {
  *m = match(lw->stack, lw->depth, v->site, v->depth);
  return v->in_window || (lw->made_up_base != UINT64_MAX && !(*m && lw->stack[*m - 1].shadow));
}

static void write_thread_lane(lane_writer_t *lw, const lp__snap_lane_t *l) {
  char value[48];
  lw->made_up_base = UINT64_MAX;
  for (uint32_t k = 0; k < l->nchunks; k++) {
    const lp__chunk_t *c = l->chunks[k].chunk;
    uint32_t end = l->chunks[k].end;
    chunk_view_t cv = view_of(lw, &l->chunks[k]);
    lw->anchor = c->sync;
    lw->seg = LP__TIMESEG_NONE;
    for (uint32_t i = 0; i < end; i++) {
      lane_event_t v = decode(lw, &cv, c->ev[i]);
      if (v.kind == LP_IMPL_EV_COUNTER) i++;
      if (!v.after_start) continue;
      note_first(lw, l, &v);
      switch (v.kind) {
      case LP_IMPL_EV_BEGIN:
        /* After the stop, followed (not written) so that its end is not taken for an enclosing scope's. */
        scope_begin(lw, &v, !v.in_window);
        lw->events += v.in_window;
        break;
      case LP_IMPL_EV_END: {
        size_t m;
        if (!end_written(lw, &v, &m)) {
          if (m) scope_end(lw, &v); /* a scope begun after the stop: pops its shadow, writes nothing */
          break;
        }
        lw->events += v.in_window || m != 0;
        scope_end(lw, &v);
        break;
      }
      case LP_IMPL_EV_INSTANT:
        if (!v.in_window) break;
        lw->events++;
        if (lw->pf)
          pf_add(lw, PF_INSTANT, 0, v.site, mapped(lw, v.ts), 0, 0);
        else
          event(lw, 'i', site_fragment(lw, v.site), mapped(lw, v.ts), NULL, ",\"s\":\"t\"");
        break;
      case LP_IMPL_EV_COUNTER:
        if (!v.in_window || i >= end) break;
        lw->events++;
        if (lw->pf) {
          pf_add(lw, PF_COUNTER, 0, v.site, mapped(lw, v.ts), 0, (int64_t)c->ev[i].ts);
          break;
        }
        snprintf(value, sizeof value, ",\"args\":{\"value\":%lld}", (long long)(int64_t)c->ev[i].ts);
        event(lw, 'C', site_fragment(lw, v.site), mapped(lw, v.ts), NULL, value);
        break;
      default: /* payload slots */
        break;
      }
    }
  }
  /* Still open: unmatched begins (shadows are not written). */
  for (size_t k = 0; k < lw->depth; k++) {
    char tail[256];
    if (lw->pf) {
      if (!lw->stack[k].shadow) pf_add(lw, PF_SLICE, PF_OPEN, lw->stack[k].site, lw->stack[k].ns, UINT64_MAX, 0);
      continue;
    }
    const fragment_t *f = lw->stack[k].shadow ? NULL : site_fragment(lw, lw->stack[k].site);
    if (f) event(lw, 'B', f, lw->stack[k].ns, NULL, args_tail(tail, sizeof tail, f, NULL));
    else if (!lw->stack[k].shadow) lw->nomem = true;
  }
  lw->depth = 0;
}

/*
 * Track items keep the caller's times, with one exception: an item that
 * starts exactly when the item recorded before it ended starts one
 * nanosecond later (its end unchanged). Viewers that turn complete events
 * into begin/end pairs (speedscope) order an end and a begin at one time by
 * name and by floating-point sums, so back-to-back work would otherwise be
 * merged or mis-nested.
 */
static void write_track_lane(lane_writer_t *lw, const lp__snap_lane_t *l) {
  uint64_t prev_end = UINT64_MAX;
  for (uint32_t k = 0; k < l->nchunks; k++) {
    const lp__chunk_t *c = l->chunks[k].chunk;
    uint32_t end = l->chunks[k].end;
    chunk_view_t cv = view_of(lw, &l->chunks[k]);
    for (uint32_t i = 0; i + 1 < end; i++) {
      lp_impl_event_t e = c->ev[i];
      if ((e.tag & LP_IMPL_EV_KIND) != LP__EV_TRACK) continue;
      uint64_t id = e.tag >> 3, rec_ticks = lp__track_recorded(c->ev[i + 1]);
      uint64_t start = e.ts, dur = c->ev[++i].ts, item_end = start + dur;
      /* An item belongs to the sessions that were recording when it was recorded. */
      bool after, before;
      in_time(lw, &cv, rec_ticks, &after, &before);
      if (id >= l->nwork || !after || !before) continue;
      const char *name = l->work[id];
      lw->events++;
      if (start == prev_end && dur > 0) {
        start++;
        dur--;
      }
      prev_end = item_end;
      if (lw->pf) {
        pf_add(lw, PF_SLICE, PF_WORK, name, start, start + dur, 0);
        continue;
      }
      event(lw, 'X', fragment(lw, name, "track", name, ""), start, &dur, "");
    }
  }
}

static void levels_text(lp__jw_t *w, uint32_t levels) {
  static const uint32_t bits[] = {LP_LEVEL_REQUEST, LP_LEVEL_RUNTIME, LP_LEVEL_OPERATOR, LP_LEVEL_DEBUG,
                                  LP_LEVEL_ANNOTATIONS};
  char buf[64] = "";
  for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
    if (levels & bits[i]) {
      if (buf[0]) strcat(buf, ",");
      strcat(buf, level_name(bits[i]));
    }
  lp__jw_str(w, buf);
}

/* Whether a track lane has an item in the window. */
static bool track_has_items(const lane_writer_t *lw, const lp__snap_lane_t *l) {
  for (uint32_t k = 0; k < l->nchunks; k++) {
    const lp__chunk_t *c = l->chunks[k].chunk;
    chunk_view_t cv = view_of(lw, &l->chunks[k]);
    for (uint32_t i = 0; i + 1 < l->chunks[k].end; i++) {
      if ((c->ev[i].tag & LP_IMPL_EV_KIND) != LP__EV_TRACK) continue;
      bool after, before;
      in_time(lw, &cv, lp__track_recorded(c->ev[i + 1]), &after, &before);
      if (after && before) return true;
    }
  }
  return false;
}

/* Whether a thread lane has an event in the window. */
static bool thread_has_events(const lane_writer_t *lw, const lp__snap_lane_t *l) {
  for (uint32_t k = 0; k < l->nchunks; k++) {
    const lp__chunk_t *c = l->chunks[k].chunk;
    chunk_view_t cv = view_of(lw, &l->chunks[k]);
    for (uint32_t i = 0; i < l->chunks[k].end; i++) {
      lane_event_t v = decode(lw, &cv, c->ev[i]);
      if (v.in_window) return true;
      if (v.kind == LP_IMPL_EV_COUNTER) i++;
    }
  }
  return false;
}

int lp__export_json(lp__jw_t *w, const lp__session_t *s, const char *process_name, char *jump, size_t jump_len) {
  lp__timemap_t *map = lp__timemap_new(s->syncs, s->nsyncs);
  if (!map) return -ENOMEM;
  int pid = (int)export_pid();
  /* Said before the events, so that labelprof reads a lane written at its ends in one pass (tools/agg.c). */
  lp__jw_lit(w, "{\"labelprof_scope_order\":\"ends\",\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
  lp__jw_i64(w, pid);
  lp__jw_lit(w, ",\"args\":{\"name\":");
  lp__jw_str(w, process_name ? process_name : program_invocation_short_name);
  lp__jw_lit(w, "}}");

  lane_writer_t lw = {.w = w, .s = s, .map = map, .ts_base = ts_base_of(s)};
  uint32_t written = 0;
  for (uint32_t i = 0; i < s->nlanes && !w->err; i++) {
    const lp__snap_lane_t *l = &s->lanes[i];
    bool track = l->work != NULL;
    if (!(track ? track_has_items(&lw, l) : thread_has_events(&lw, l))) continue;
    metadata(w, pid, l->tid, l->name, written++);
    lw.idslen = (size_t)snprintf(lw.ids, sizeof lw.ids, ",\"pid\":%d,\"tid\":%llu,\"ts\":", pid,
                                 (unsigned long long)l->tid);
    lw.cursor = 0;
    lw.last = 0;
    if (track)
      write_track_lane(&lw, l);
    else
      write_thread_lane(&lw, l);
  }
  free(lw.stack);
  free_fragments(&lw);

  lp__jw_lit(w, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"library\":\"labelprof " LABELPROF_VERSION_STRING
                "\",\"clock\":");
  lp__jw_str(w, lp__clock_name());
  lp__jw_lit(w, ",\"clock_reason\":");
  lp__jw_str(w, lp__clock_reason());
  lp__jw_lit(w, ",\"clock_check_ns\":");
  lp__jw_u64(w, lp__clock_check_ns());
  lp__jw_lit(w, ",\"clock_domain\":\"CLOCK_MONOTONIC\",\"ts_base_ns\":\"");
  lp__jw_u64(w, lw.ts_base);
  lp__jw_lit(w, "\"");
  const char *jt = lp__timemap_jump_text(map);
  if (jt) {
    lp__jw_lit(w, ",\"clock_jumps\":");
    lp__jw_u64(w, lp__timemap_jumps(map));
    lp__jw_lit(w, ",\"clock_jump\":");
    lp__jw_str(w, jt);
    if (jump && jump_len)
      snprintf(jump, jump_len,
               "the timeline's clock jumped %zu time(s) during the session; the largest: %s; events recorded "
               "in the chunk where it happened may be off by up to that much",
               lp__timemap_jumps(map), jt);
  }
  lp__jw_lit(w, ",\"events_recorded\":");
  lp__jw_u64(w, lw.events);
  lp__jw_lit(w, ",\"events_dropped\":");
  lp__jw_u64(w, s->dropped);
  lp__jw_lit(w, ",\"budget_bytes\":");
  lp__jw_u64(w, s->opts.budget_bytes);
  uint64_t names_over = atomic_load_explicit(&lp__names_overflowed, memory_order_relaxed);
  if (names_over) { /* NVTX and ITT names past LABELPROF_MAX_NAMES, in this process so far */
    lp__jw_lit(w, ",\"names_overflowed\":");
    lp__jw_u64(w, names_over);
    lp__jw_lit(w, ",\"names_limit\":");
    lp__jw_u64(w, atomic_load_explicit(&lp__names_limit, memory_order_relaxed));
  }
  /* The session's window and first drop, CLOCK_MONOTONIC ns as exact strings like ts_base_ns. */
  lp__jw_lit(w, ",\"session_start_ns\":\"");
  lp__jw_u64(w, s->start.ns);
  lp__jw_lit(w, "\",\"session_stop_ns\":\"");
  lp__jw_u64(w, s->stop.ns == UINT64_MAX ? s->taken_ns : s->stop.ns);
  if (s->stop.ns == UINT64_MAX)
    lp__jw_lit(w, "\",\"session_running\":true");
  else
    lp__jw_lit(w, "\",\"session_running\":false");
  if (s->first_drop_ns) {
    lp__jw_lit(w, ",\"first_drop_ns\":\"");
    lp__jw_u64(w, s->first_drop_ns);
    lp__jw_lit(w, "\"");
  }
  lp__jw_lit(w, ",\"policy\":");
  lp__jw_str(w, s->opts.policy == LP_TRACE_RING ? "ring" : "discard");
  lp__jw_lit(w, ",\"levels\":");
  levels_text(w, s->opts.levels);
  lp__jw_lit(w, "}}\n");
  lp__timemap_free(map);
  if (lw.nomem && !w->err) return -ENOMEM;
  return w->err;
}

/* ---- layers and phases: systrace text -------------------------------------------
 *
 * The same lanes, window and matching as the JSON, written as ftrace text
 * lines (see lp_trace_write_systrace). Lines must come in time order across
 * threads, so each lane's begins and ends are first turned into records
 * (times already mapped and strictly increasing within the lane, made-up
 * begins in front), then the lanes' runs are merged by time through a
 * heap and formatted: a line is a lane's fixed prefix, the time, and the
 * site's tagged label (escaped once per site), copied into the buffer.
 */

typedef struct st_rec {
  uint64_t ns;
  const lp_site_t *site; /* NULL for an end */
  uint32_t ends;         /* an end: how many E lines (a switch's end also ends what it replaced) */
  bool plain;            /* a switch's begin without its [SW]: it replaced nothing that was written */
} st_rec_t;

typedef struct st_writer {
  lane_writer_t lw; /* the lane, window and time state shared with the JSON's code */
  st_rec_t *recs;
  size_t n, cap;
  st_rec_t *made; /* made-up begins of the current lane */
  size_t nmade, capmade;
  /* The last record, if it is the end of a scope at last_depth: a switch that follows takes its place. */
  size_t last_end;
  uint32_t last_depth, last_extra;
} st_writer_t;

static inline bool st_push(st_rec_t **a, size_t *n, size_t *cap, uint64_t ns, const lp_site_t *site) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 4096;
    st_rec_t *r = lp__realloc(*a, c * sizeof *r);
    if (!r) return false;
    *a = r;
    *cap = c;
  }
  (*a)[(*n)++] = (st_rec_t){ns, site, 1, false};
  return true;
}

static inline void st_rec(st_writer_t *sw, uint64_t ns, const lp_site_t *site) {
  sw->last_end = SIZE_MAX;
  if (!st_push(&sw->recs, &sw->n, &sw->cap, ns, site)) sw->lw.nomem = true;
}

/* The end of an open scope: one E line, plus one for each scope that switches replaced on the way. */
static void st_rec_end(st_writer_t *sw, uint64_t ns, const open_scope_t *o) {
  if (o->shadow) return;
  st_rec(sw, ns, NULL);
  if (sw->lw.nomem) return;
  sw->recs[sw->n - 1].ends = 1 + o->extra;
  sw->last_end = sw->n - 1;
  sw->last_depth = o->depth;
  sw->last_extra = o->extra;
}

/* Open scopes at depth d or deeper never ended: they end now. */
static void st_close_at_or_below(st_writer_t *sw, uint32_t d, uint64_t ns) {
  lane_writer_t *lw = &sw->lw;
  while (lw->depth > 0 && lw->stack[lw->depth - 1].depth >= d) {
    lw->depth--;
    st_rec_end(sw, lane_time(lw, ns), &lw->stack[lw->depth]);
  }
}

static void st_end(st_writer_t *sw, const lane_event_t *v) {
  lane_writer_t *lw = &sw->lw;
  size_t k = match(lw->stack, lw->depth, v->site, v->depth);
  uint64_t ns = lane_ns(lw, v->ts);
  if (k == 0) {
    st_close_at_or_below(sw, v->depth + 1, ns);
    if (!v->in_window) ns = lw->s->stop.ns;
    uint64_t b = lw->made_up_base + (v->depth < 255 ? v->depth : 255);
    if (!st_push(&sw->made, &sw->nmade, &sw->capmade, b, v->site)) lw->nomem = true;
    /* Its begin is not in the window: written plain, so its end is one E. */
    else if (v->site->mode == LP_MODE_SWITCH) sw->made[sw->nmade - 1].plain = true;
    open_scope_t o = {v->site, 0, v->depth, false, 0};
    st_rec_end(sw, lane_time(lw, ns), &o);
    return;
  }
  while (lw->depth > k) {
    lw->depth--;
    st_rec_end(sw, lane_time(lw, ns), &lw->stack[lw->depth]);
  }
  lw->depth--;
  st_rec_end(sw, lane_time(lw, ns), &lw->stack[lw->depth]);
}

static void st_begin(st_writer_t *sw, const lane_event_t *v, bool shadow) {
  lane_writer_t *lw = &sw->lw;
  uint64_t ns = shadow ? lw->last : mapped(lw, v->ts);
  st_close_at_or_below(sw, v->depth, ns);
  if (!grow_stack(lw)) return;
  /*
   * A switch: its begin follows the end of the scope it replaced. NNAPI's
   * readers end that scope themselves when they see [SW], and expect one
   * more E when the switch ends: the replaced scope's end moves there.
   */
  uint32_t extra = 0;
  bool plain = false;
  if (!shadow && v->site->mode == LP_MODE_SWITCH) {
    if (sw->last_end == sw->n - 1 && sw->last_end != SIZE_MAX && sw->last_depth == v->depth) {
      extra = sw->last_extra + 1;
      sw->n--;
    } else {
      plain = true;
    }
  }
  lw->stack[lw->depth++] = (open_scope_t){v->site, ns, v->depth, shadow, extra};
  if (!shadow) {
    st_rec(sw, ns, v->site);
    if (!lw->nomem) sw->recs[sw->n - 1].plain = plain;
  }
}

static int st_cmp_ns(const void *a, const void *b) {
  const st_rec_t *x = a, *y = b;
  return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/* A thread lane's records, appended to sw->recs: made-up begins first, then the lane in order. */
static void st_lane(st_writer_t *sw, const lp__snap_lane_t *l) {
  lane_writer_t *lw = &sw->lw;
  size_t first = sw->n;
  lw->made_up_base = UINT64_MAX;
  sw->nmade = 0;
  sw->last_end = SIZE_MAX;
  for (uint32_t k = 0; k < l->nchunks; k++) {
    const lp__chunk_t *c = l->chunks[k].chunk;
    uint32_t end = l->chunks[k].end;
    chunk_view_t cv = view_of(lw, &l->chunks[k]);
    lw->anchor = c->sync;
    lw->seg = LP__TIMESEG_NONE;
    for (uint32_t i = 0; i < end; i++) {
      lane_event_t v = decode(lw, &cv, c->ev[i]);
      if (v.kind == LP_IMPL_EV_COUNTER) i++;
      if (!v.after_start || v.kind > LP_IMPL_EV_END) continue;
      note_first(lw, l, &v);
      if (v.kind == LP_IMPL_EV_BEGIN) {
        st_begin(sw, &v, !v.in_window);
        lw->events += v.in_window;
      } else {
        size_t m;
        if (!end_written(lw, &v, &m)) {
          if (m) st_end(sw, &v);
          continue;
        }
        lw->events += v.in_window || m != 0;
        st_end(sw, &v);
      }
    }
  }
  lw->depth = 0;
  if (!sw->nmade || lw->nomem) return;
  /* Made-up begins go in front, outermost (earliest) first. */
  qsort(sw->made, sw->nmade, sizeof *sw->made, st_cmp_ns);
  size_t n = sw->n - first;
  for (size_t k = 0; k < sw->nmade; k++) st_rec(sw, 0, NULL); /* room */
  if (lw->nomem) return;
  memmove(sw->recs + first + sw->nmade, sw->recs + first, n * sizeof *sw->recs);
  memcpy(sw->recs + first, sw->made, sw->nmade * sizeof *sw->made);
}

/* A label as systrace text: the tag, then the label with control characters and DEL as '?'. */
static char *st_label_text(const lp_site_t *site, size_t *len) {
  const char *label = lp__label(site);
  size_t n = strlen(label);
  char *t = lp__malloc(n + LP__TAG_MAX + 1);
  if (!t) return NULL;
  size_t o = lp__site_tag(site, t, LP__TAG_MAX);
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)label[i];
    t[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
  }
  t[o] = '\0';
  *len = o;
  return t;
}

/* A thread's task column as the kernel prints it: "%16s-%-5d (%5d) [000] ...1 ", the name cut to 15 bytes. */
static size_t st_prefix(char *buf, size_t size, const char *name, uint64_t tid, int pid) {
  char comm[17];
  size_t n = 0;
  for (; name && name[n] && n < 15; n++) {
    unsigned char ch = (unsigned char)name[n];
    comm[n] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
  }
  if (n == 0) {
    memcpy(comm, "<...>", 5);
    n = 5;
  } else if (n == 1) {
    comm[n++] = ' '; /* AOSP's parser needs two characters before "-tid" */
  }
  comm[n] = '\0';
  int r = snprintf(buf, size, "%16s-%-5llu (%5d) [000] ...1 ", comm, (unsigned long long)tid, pid);
  return r > 0 && (size_t)r < size ? (size_t)r : 0;
}

/*
 * " %5lu.%06lu" of ns, as the kernel prints its timestamps (truncated to
 * microseconds). The seconds' text is kept from one line to the next (they
 * rarely change), the microseconds are written two digits at a time.
 */
typedef struct st_clock_text {
  uint64_t sec;
  char text[32];
  size_t len;
} st_clock_text_t;

static const char st_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static char *st_put_time(char *o, uint64_t ns, st_clock_text_t *ct) {
  uint64_t sec = ns / 1000000000u;
  uint32_t us = (uint32_t)((ns % 1000000000u) / 1000u);
  if (sec != ct->sec || !ct->len) {
    char d[24];
    int k = 0;
    uint64_t v = sec;
    do d[k++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    size_t n = 0;
    ct->text[n++] = ' ';
    for (int pad = 5 - k; pad > 0; pad--) ct->text[n++] = ' ';
    while (k > 0) ct->text[n++] = d[--k];
    ct->text[n++] = '.';
    ct->sec = sec;
    ct->len = n;
  }
  memcpy(o, ct->text, ct->len);
  o += ct->len;
  uint32_t hi = us / 10000u, mid = (us / 100u) % 100u, lo = us % 100u;
  memcpy(o, st_pairs + 2 * hi, 2);
  memcpy(o + 2, st_pairs + 2 * mid, 2);
  memcpy(o + 4, st_pairs + 2 * lo, 2);
  return o + 6;
}

typedef struct st_lane_out {
  size_t pos, end; /* its records in sw->recs */
  char prefix[64];
  size_t plen;
} st_lane_out_t;

typedef struct st_label {
  const lp_site_t *site;
  char *text;
  size_t len;
} st_label_t;

/* The site's label text, from an open-addressed table; NULL when out of memory. */
static const st_label_t *st_label(st_label_t **tab, uint32_t *mask, uint32_t *count, const lp_site_t *site) {
  if (*tab) {
    for (uint32_t h = (uint32_t)(((uintptr_t)site >> 3) * 0x9e3779b1u) & *mask;; h = (h + 1) & *mask) {
      if (!(*tab)[h].site) break;
      if ((*tab)[h].site == site) return &(*tab)[h];
    }
  }
  if (!*tab || (*count + 1) * 2 > *mask + 1) {
    uint32_t m = *tab ? *mask * 2 + 1 : 255;
    st_label_t *nt = lp__calloc((size_t)m + 1, sizeof *nt);
    if (!nt) return NULL;
    for (uint32_t i = 0; *tab && i <= *mask; i++) {
      if (!(*tab)[i].site) continue;
      uint32_t h = (uint32_t)(((uintptr_t)(*tab)[i].site >> 3) * 0x9e3779b1u) & m;
      while (nt[h].site) h = (h + 1) & m;
      nt[h] = (*tab)[i];
    }
    free(*tab);
    *tab = nt;
    *mask = m;
  }
  st_label_t e = {site, NULL, 0};
  if (!(e.text = st_label_text(site, &e.len))) return NULL;
  uint32_t h = (uint32_t)(((uintptr_t)site >> 3) * 0x9e3779b1u) & *mask;
  while ((*tab)[h].site) h = (h + 1) & *mask;
  (*tab)[h] = e;
  (*count)++;
  return &(*tab)[h];
}

static const char st_header[] =
    "#                                      _-----=> irqs-off\n"
    "#                                     / _----=> need-resched\n"
    "#                                    | / _---=> hardirq/softirq\n"
    "#                                    || / _--=> preempt-depth\n"
    "#                                    ||| /     delay\n"
    "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n"
    "#              | |        |      |   ||||       |         |\n";

/* Heap of lanes ordered by their next record's time (then by lane order). */
static bool st_less(const st_writer_t *sw, const st_lane_out_t *lo, uint32_t a, uint32_t b) {
  uint64_t x = sw->recs[lo[a].pos].ns, y = sw->recs[lo[b].pos].ns;
  return x < y || (x == y && a < b);
}

static void st_sift(const st_writer_t *sw, const st_lane_out_t *lo, uint32_t *heap, uint32_t n, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && st_less(sw, lo, heap[l], heap[m])) m = l;
    if (r < n && st_less(sw, lo, heap[r], heap[m])) m = r;
    if (m == i) return;
    uint32_t t = heap[i];
    heap[i] = heap[m];
    heap[m] = t;
    i = m;
  }
}

int lp__export_systrace(lp__jw_t *w, const lp__session_t *s) {
  lp__timemap_t *map = lp__timemap_new(s->syncs, s->nsyncs);
  if (!map) return -ENOMEM;
  int pid = (int)export_pid();
  st_writer_t sw = {.lw = {.w = w, .s = s, .map = map}};
  st_lane_out_t *lo = lp__calloc(s->nlanes ? s->nlanes : 1, sizeof *lo);
  uint32_t *heap = lp__calloc(s->nlanes ? s->nlanes : 1, sizeof *heap);
  st_label_t *labels = NULL;
  uint32_t lmask = 0, lcount = 0, nheap = 0;
  st_clock_text_t clock_text = {0, "", 0};
  const lp_site_t *last_site = NULL;
  st_label_t last_copy = {NULL, NULL, 0};
  const st_label_t *last_label = NULL;
  int rc = 0;
  /* Room for every record at once: at most one per recorded slot, plus made-up begins (grown if needed). */
  size_t slots = 0;
  for (uint32_t i = 0; i < s->nlanes; i++)
    for (uint32_t k = 0; !s->lanes[i].work && k < s->lanes[i].nchunks; k++) slots += s->lanes[i].chunks[k].end;
  sw.cap = slots + 64;
  sw.recs = lp__malloc(sw.cap * sizeof *sw.recs);
  if (!lo || !heap || !sw.recs) {
    rc = -ENOMEM;
    goto out;
  }
  for (uint32_t i = 0; i < s->nlanes && !sw.lw.nomem; i++) {
    const lp__snap_lane_t *l = &s->lanes[i];
    if (l->work) continue; /* tracks: ftrace text has no lanes for them */
    sw.lw.cursor = 0;
    sw.lw.last = 0;
    lo[i].pos = sw.n;
    st_lane(&sw, l);
    lo[i].end = sw.n;
    lo[i].plen = st_prefix(lo[i].prefix, sizeof lo[i].prefix, l->name, l->tid, pid);
    if (lo[i].end > lo[i].pos) heap[nheap++] = i;
  }
  if (sw.lw.nomem) {
    rc = -ENOMEM;
    goto out;
  }
  char pidtext[24], line[160];
  int pidlen = snprintf(pidtext, sizeof pidtext, "%d", pid);
  size_t lines = 0;
  for (size_t i = 0; i < sw.n; i++) lines += sw.recs[i].site ? 1 : sw.recs[i].ends;
  snprintf(line, sizeof line, "# tracer: nop\n#\n# entries-in-buffer/entries-written: %zu/%zu   #P:%ld\n#\n", lines,
           lines, sysconf(_SC_NPROCESSORS_ONLN));
  lp__jw_raw(w, line, strlen(line));
  lp__jw_raw(w, st_header, sizeof st_header - 1);
  for (uint32_t i = nheap / 2; i-- > 0;) st_sift(&sw, lo, heap, nheap, i);
  while (nheap > 0 && !w->err) {
    st_lane_out_t *o = &lo[heap[0]];
    const st_rec_t *r = &sw.recs[o->pos];
    const st_label_t *lab = NULL;
    if (r->site && r->site == last_site) {
      lab = last_label; /* the same site again: no lookup */
    } else if (r->site) {
      if (!(lab = st_label(&labels, &lmask, &lcount, r->site))) {
        rc = -ENOMEM;
        break;
      }
      /* The table may move when it grows: copy the entry, not a pointer into it. */
      last_copy = *lab;
      last_label = &last_copy;
      last_site = r->site;
      lab = last_label;
    }
    size_t need = (o->plen + 48 + (size_t)pidlen) * (r->site ? 1 : r->ends) + (lab ? lab->len : 0);
    char *p = lp__jw_reserve(w, need);
    char *big = NULL, *start;
    if (p)
      start = p;
    else if (w->err)
      break;
    else if (!(start = p = big = lp__malloc(need))) { /* a label longer than the buffer */
      rc = -ENOMEM;
      break;
    }
    memcpy(p, o->prefix, o->plen);
    p = st_put_time(p + o->plen - 1, r->ns, &clock_text); /* the prefix's last space is the time's leading one */
    if (lab) {
      size_t skip = r->plain && lab->len >= 4 && memcmp(lab->text, "[SW]", 4) == 0 ? 4 : 0;
      memcpy(p, ": tracing_mark_write: B|", 24);
      p += 24;
      memcpy(p, pidtext, (size_t)pidlen);
      p += pidlen;
      *p++ = '|';
      memcpy(p, lab->text + skip, lab->len - skip);
      p += lab->len - skip;
      *p++ = '\n';
    } else {
      memcpy(p, ": tracing_mark_write: E|", 24);
      p += 24;
      memcpy(p, pidtext, (size_t)pidlen);
      p += pidlen;
      *p++ = '\n';
      size_t len = (size_t)(p - start);
      for (uint32_t k = 1; k < r->ends; k++) {
        memmove(p, start, len);
        p += len;
      }
    }
    if (start == w->buf + w->len)
      w->len += (size_t)(p - start);
    else
      lp__jw_raw(w, start, (size_t)(p - start));
    free(big);
    if (++o->pos == o->end)
      heap[0] = heap[--nheap];
    st_sift(&sw, lo, heap, nheap, 0);
  }
out:
  for (uint32_t i = 0; labels && i <= lmask; i++) free(labels[i].text);
  free(labels);
  free(lo);
  free(heap);
  free(sw.recs);
  free(sw.made);
  free(sw.lw.stack);
  lp__timemap_free(map);
  return rc ? rc : w->err;
}
/* ---- end of layers and phases: systrace text ---- */

/* ---- Perfetto: the session as TrackEvent protobuf ---------------------------------
 *
 * The same lanes, window and matching as the JSON (write_thread_lane and
 * write_track_lane, through pf_add), written as a Perfetto trace: a Trace
 * message is a run of packets (field 1), so the file is the packets one
 * after the other. Field numbers are those of Perfetto's schema
 * (protos/perfetto/trace); tests/perfetto_subset.proto names the ones used.
 *
 * Each lane is a packet sequence of its own (trusted_packet_sequence_id =
 * its index + 1). Its first packet clears the incremental state and holds
 * the clock snapshot and the defaults: timestamps are on clock 64, a
 * sequence-scoped incremental clock in ns that the snapshot ties to
 * CLOCK_MONOTONIC (and BOOTTIME, the clock Perfetto lines system traces up
 * on), and events go to the lane's track unless they say otherwise. Then
 * the lane's TrackDescriptor, then its events in time order: an event name
 * (and category) is interned on first use on the sequence, in the packet
 * that first uses it, and later events carry its iid.
 *
 * A JSON complete event becomes a SLICE_BEGIN and a SLICE_END, so the
 * lane's slices and points are collected first (pf_add) and put in time
 * order: begins by time, the longer first at equal times; an end goes out
 * before anything that starts at or after it. The JSON's args become debug
 * annotations: "truncated" on a made-up begin, "unterminated" on the end of
 * a scope a longjmp skipped, layer, phase and mode on a layered site's
 * begin. Counters go to one counter track per site under the process. What
 * the JSON says in otherData is said by the debug annotations of one
 * instant, "labelprof session", on the process's track, on a sequence of
 * its own.
 */

typedef struct pf_rec {
  uint64_t ts, end; /* end: slices only (UINT64_MAX while open) */
  const void *key;  /* the site, or a track's work name */
  int64_t value;
  uint8_t kind, flags;
} pf_rec_t;

struct pf_lane {
  pf_rec_t *r;
  size_t n, cap;
};

static void pf_add(lane_writer_t *lw, uint8_t kind, uint8_t flags, const void *key, uint64_t ts, uint64_t end,
                   int64_t value) {
  pf_lane_t *p = lw->pf;
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 1024;
    pf_rec_t *r = lp__realloc(p->r, cap * sizeof *r);
    if (!r) {
      lw->nomem = true;
      return;
    }
    p->r = r;
    p->cap = cap;
  }
  p->r[p->n++] = (pf_rec_t){ts, end, key, value, kind, flags};
}

static int pf_cmp(const void *a, const void *b) {
  const pf_rec_t *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  if (x->kind != y->kind) return x->kind == PF_SLICE ? -1 : y->kind == PF_SLICE ? 1 : 0;
  if (x->kind == PF_SLICE && x->end != y->end) return x->end > y->end ? -1 : 1; /* the enclosing one first */
  return x < y ? -1 : x > y; /* recording order otherwise: the sort is then stable */
}

/* Perfetto's field numbers (protos/perfetto/trace). */
enum {
  TRACE_PACKET = 1,
  TP_CLOCK_SNAPSHOT = 6, TP_TIMESTAMP = 8, TP_SEQ_ID = 10, TP_TRACK_EVENT = 11, TP_INTERNED = 12,
  TP_SEQ_FLAGS = 13, TP_CLOCK_ID = 58, TP_DEFAULTS = 59, TP_TRACK_DESCRIPTOR = 60, TP_FIRST_ON_SEQ = 87,
  CS_CLOCKS = 1, CLK_ID = 1, CLK_TS = 2, CLK_INCREMENTAL = 3,
  DEF_CLOCK_ID = 58, DEF_TRACK_EVENT = 11, TED_TRACK_UUID = 11,
  TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT = 5, TD_COUNTER = 8, TD_CHILD_ORDERING = 11,
  TD_RANK = 12, TD_DESCRIPTION = 14, TD_MERGE = 15, MERGE_NONE = 2,
  PD_PID = 1, PD_NAME = 6, THD_PID = 1, THD_TID = 2, THD_NAME = 5,
  TE_CATEGORY_IIDS = 3, TE_DEBUG = 4, TE_TYPE = 9, TE_NAME_IID = 10, TE_TRACK_UUID = 11, TE_COUNTER_VALUE = 30,
  DA_BOOL = 2, DA_UINT = 3, DA_INT = 4, DA_STRING = 6, DA_NAME = 10,
  ID_CATEGORIES = 1, ID_NAMES = 2, IN_IID = 1, IN_NAME = 2,
};
enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
/*
 * Event packets do not carry SEQ_NEEDS_STATE: it tells a reader to skip a
 * packet whose sequence lost its state to a gap in the buffer, and a file
 * written here has no gap (a killed writer leaves whole packets, in order).
 * Their interned names are still resolved on their sequence. Two bytes an
 * event.
 */
enum { SEQ_CLEARED = 1, SEQ_NEEDS_STATE = 2 };
enum { CLOCK_MONOTONIC_ID = 3, CLOCK_BOOTTIME_ID = 6, CLOCK_LANE = 64 };

/* A sequence's interned names (by key) and categories (by text), and its clock. */
typedef struct pf_seq {
  lp__pb_t *pb;
  uint32_t id;
  uint64_t last; /* the incremental clock's value */
  const void **keys;
  uint32_t kmask, nkeys;
  uint64_t *iids;
  uint64_t *cat_of; /* the key's one category iid once interned, for the fast path; 0: none (or a layered site) */
  const char *cats[64];
  uint32_t ncats;
  bool nomem;
} pf_seq_t;

/* The iid of key on the sequence; 0 when new (*iid is then the one to intern it under). */
static uint64_t pf_name_iid(pf_seq_t *q, const void *key, uint64_t *fresh) {
  if (q->keys) {
    for (uint32_t h = (uint32_t)(((uintptr_t)key >> 3) * 0x9e3779b1u) & q->kmask;; h = (h + 1) & q->kmask) {
      if (!q->keys[h]) break;
      if (q->keys[h] == key) return q->iids[h];
    }
  }
  if (!q->keys || (q->nkeys + 1) * 2 > q->kmask + 1) {
    uint32_t mask = q->keys ? q->kmask * 2 + 1 : 255;
    const void **nk = lp__calloc((size_t)mask + 1, sizeof *nk);
    uint64_t *ni = lp__calloc((size_t)mask + 1, sizeof *ni), *nc = lp__calloc((size_t)mask + 1, sizeof *nc);
    if (!nk || !ni || !nc) {
      free(nk);
      free(ni);
      free(nc);
      q->nomem = true;
      *fresh = 0;
      return 0;
    }
    for (uint32_t i = 0; q->keys && i <= q->kmask; i++) {
      if (!q->keys[i]) continue;
      uint32_t h = (uint32_t)(((uintptr_t)q->keys[i] >> 3) * 0x9e3779b1u) & mask;
      while (nk[h]) h = (h + 1) & mask;
      nk[h] = q->keys[i];
      ni[h] = q->iids[i];
      nc[h] = q->cat_of[i];
    }
    free(q->keys);
    free(q->iids);
    free(q->cat_of);
    q->keys = nk;
    q->iids = ni;
    q->cat_of = nc;
    q->kmask = mask;
  }
  uint32_t h = (uint32_t)(((uintptr_t)key >> 3) * 0x9e3779b1u) & q->kmask;
  while (q->keys[h]) h = (h + 1) & q->kmask;
  q->keys[h] = key;
  q->iids[h] = *fresh = ++q->nkeys;
  return 0;
}

/* The slot of key on the sequence, or UINT32_MAX. */
static inline uint32_t pf_find(const pf_seq_t *q, const void *key) {
  if (!q->keys) return UINT32_MAX;
  for (uint32_t h = (uint32_t)(((uintptr_t)key >> 3) * 0x9e3779b1u) & q->kmask;; h = (h + 1) & q->kmask) {
    if (!q->keys[h]) return UINT32_MAX;
    if (q->keys[h] == key) return h;
  }
}

/* The category's iid on the sequence, 1-based; *fresh set when it is new. */
static uint64_t pf_cat_iid(pf_seq_t *q, const char *cat, bool *fresh) {
  for (uint32_t i = 0; i < q->ncats; i++)
    if (strcmp(q->cats[i], cat) == 0) {
      *fresh = false;
      return i + 1;
    }
  *fresh = true;
  if (q->ncats == sizeof q->cats / sizeof q->cats[0]) return 0; /* cannot happen: a handful of names */
  q->cats[q->ncats++] = cat;
  return q->ncats;
}

static void pf_seq_reset(pf_seq_t *q, uint32_t id, uint64_t base) {
  free(q->keys);
  free(q->iids);
  free(q->cat_of);
  q->keys = NULL;
  q->iids = NULL;
  q->cat_of = NULL;
  q->kmask = q->nkeys = q->ncats = 0;
  q->id = id;
  q->last = base;
}

static uint64_t pf_uuid(uint64_t pid, uint64_t what) {
  uint64_t z = pid * 0x9e3779b97f4a7c15u + what + 0x6c6162656c70726full; /* splitmix64 */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return (z ^ (z >> 31)) | 1; /* never 0 */
}

static void pf_annotation_str(lp__pb_t *pb, const char *name, const char *value) {
  size_t m = lp__pb_begin(pb, TE_DEBUG);
  lp__pb_str(pb, DA_NAME, name);
  lp__pb_str(pb, DA_STRING, value);
  lp__pb_end(pb, m);
}

static void pf_annotation_uint(lp__pb_t *pb, const char *name, uint32_t field, uint64_t value) {
  size_t m = lp__pb_begin(pb, TE_DEBUG);
  lp__pb_str(pb, DA_NAME, name);
  lp__pb_varint(pb, field, value);
  lp__pb_end(pb, m);
}

/* The first packet of a sequence: incremental state cleared, the clock snapshot, the defaults. */
/* A ClockSnapshot's BOOTTIME and MONOTONIC at mono_ns (CLOCK_MONOTONIC ns). */
static void pf_clocks_system(lp__pb_t *pb, uint64_t mono_ns, int64_t boot_offset) {
  size_t c = lp__pb_begin(pb, CS_CLOCKS);
  lp__pb_varint(pb, CLK_ID, CLOCK_BOOTTIME_ID);
  lp__pb_varint(pb, CLK_TS, mono_ns + (uint64_t)boot_offset);
  lp__pb_end(pb, c);
  c = lp__pb_begin(pb, CS_CLOCKS);
  lp__pb_varint(pb, CLK_ID, CLOCK_MONOTONIC_ID);
  lp__pb_varint(pb, CLK_TS, mono_ns);
  lp__pb_end(pb, c);
}

static void pf_seq_start(pf_seq_t *q, uint64_t track_uuid, int64_t boot_offset) {
  lp__pb_t *pb = q->pb;
  size_t p = lp__pb_begin(pb, TRACE_PACKET);
  lp__pb_varint(pb, TP_SEQ_ID, q->id);
  lp__pb_varint(pb, TP_SEQ_FLAGS, SEQ_CLEARED);
  lp__pb_varint(pb, TP_FIRST_ON_SEQ, 1);
  size_t cs = lp__pb_begin(pb, TP_CLOCK_SNAPSHOT);
  pf_clocks_system(pb, q->last, boot_offset);
  size_t c = lp__pb_begin(pb, CS_CLOCKS);
  lp__pb_varint(pb, CLK_ID, CLOCK_LANE);
  lp__pb_varint(pb, CLK_TS, q->last);
  lp__pb_varint(pb, CLK_INCREMENTAL, 1);
  lp__pb_end(pb, c);
  lp__pb_end(pb, cs);
  size_t d = lp__pb_begin(pb, TP_DEFAULTS);
  lp__pb_varint(pb, DEF_CLOCK_ID, CLOCK_LANE);
  size_t te = lp__pb_begin(pb, DEF_TRACK_EVENT);
  lp__pb_varint(pb, TED_TRACK_UUID, track_uuid);
  lp__pb_end(pb, te);
  lp__pb_end(pb, d);
  lp__pb_end(pb, p);
}

/*
 * The session's notes are an event on BUILTIN_CLOCK_MONOTONIC, and a reader
 * places such a time through a ClockSnapshot that names the clock: Perfetto's
 * trace processor drops the packet otherwise (clock_sync_failure). The lanes'
 * snapshots name it, but a file may have no lane (a session that recorded
 * nothing, a rotated file in which nothing happened): this snapshot, on the
 * notes' sequence just before them, names it in any case, with the offset to
 * BOOTTIME the lanes' snapshots use.
 */
static void pf_notes_clock(lp__pb_t *pb, uint32_t seq, uint64_t at, int64_t boot_offset) {
  size_t p = lp__pb_begin(pb, TRACE_PACKET);
  lp__pb_varint(pb, TP_SEQ_ID, seq);
  size_t cs = lp__pb_begin(pb, TP_CLOCK_SNAPSHOT);
  pf_clocks_system(pb, at, boot_offset);
  lp__pb_end(pb, cs);
  lp__pb_end(pb, p);
}

/* A packet that holds only a TrackDescriptor (no timestamp: it describes, it does not happen). */
static size_t pf_descriptor_begin(lp__pb_t *pb, uint32_t seq, uint32_t flags, size_t *packet) {
  *packet = lp__pb_begin(pb, TRACE_PACKET);
  lp__pb_varint(pb, TP_SEQ_ID, seq);
  lp__pb_varint(pb, TP_SEQ_FLAGS, flags);
  return lp__pb_begin(pb, TP_TRACK_DESCRIPTOR);
}

typedef struct pf_counters {
  const void **keys; /* sites whose counter track is described (a name's first site, and others of its name once met) */
  uint64_t *uuids;   /* their tracks */
  size_t n, cap;
} pf_counters_t;

/*
 * The common packets at once: a plain end, or a begin or instant whose name
 * and single category are interned already and that has no annotations.
 * Every length then fits in one byte. False: not one of those.
 */
static bool pf_event_fast(pf_seq_t *q, const pf_rec_t *r, uint32_t type, uint64_t ts, bool end) {
  uint64_t name_iid = 0, cat_iid = 0;
  if (ts < q->last || (r->flags & PF_ABSOLUTE)) return false;
  if (end) {
    if (r->flags & PF_UNTERMINATED) return false;
  } else {
    if (type == TYPE_COUNTER || (r->flags & PF_TRUNCATED)) return false;
    uint32_t h = pf_find(q, r->key);
    if (h == UINT32_MAX || !(cat_iid = q->cat_of[h])) return false;
    name_iid = q->iids[h];
  }
  lp__pb_t *pb = q->pb;
  uint8_t *o = lp__pb_reserve(pb, 64);
  if (!o) return true; /* out of memory: it sticks, and is reported at the end */
  size_t n = 2;
  o[n++] = TP_TIMESTAMP << 3;
  n += lp__pb_put_varint(o + n, ts - q->last);
  o[n++] = TP_TRACK_EVENT << 3 | 2;
  size_t te = n++; /* the TrackEvent's length, under 128: filled in below */
  o[n++] = TE_TYPE << 3;
  o[n++] = (uint8_t)type;
  if (!end) {
    o[n++] = TE_CATEGORY_IIDS << 3;
    n += lp__pb_put_varint(o + n, cat_iid);
    o[n++] = TE_NAME_IID << 3;
    n += lp__pb_put_varint(o + n, name_iid);
  }
  o[te] = (uint8_t)(n - te - 1);
  o[n++] = TP_SEQ_ID << 3;
  n += lp__pb_put_varint(o + n, q->id);
  o[0] = TRACE_PACKET << 3 | 2;
  o[1] = (uint8_t)(n - 2);
  pb->len += n;
  q->last = ts;
  return true;
}

/* One event packet. */
static void pf_event(pf_seq_t *q, const pf_rec_t *r, uint32_t type, uint64_t ts, uint64_t counter_uuid,
                     const char *name, bool end) {
  if (pf_event_fast(q, r, type, ts, end)) return;
  lp__pb_t *pb = q->pb;
  size_t p = lp__pb_begin(pb, TRACE_PACKET);
  if (r->flags & PF_ABSOLUTE) { /* its own time, on CLOCK_MONOTONIC: the sequence's clock stays where it is */
    lp__pb_varint(pb, TP_TIMESTAMP, ts);
    lp__pb_varint(pb, TP_CLOCK_ID, CLOCK_MONOTONIC_ID);
  } else {
    if (ts < q->last) ts = q->last; /* cannot happen in a lane's order; the clock only goes forward */
    lp__pb_varint(pb, TP_TIMESTAMP, ts - q->last);
    q->last = ts;
  }
  size_t te = lp__pb_begin(pb, TP_TRACK_EVENT);
  lp__pb_varint(pb, TE_TYPE, type);
  const lp_site_t *site = r->flags & PF_WORK ? NULL : r->key;
  const char *cats[2] = {NULL, NULL};
  uint64_t fresh_name = 0, name_iid = 0, cat_iid[2] = {0, 0};
  bool fresh_cat[2] = {false, false};
  if (!end && type != TYPE_COUNTER) {
    name_iid = pf_name_iid(q, r->key, &fresh_name);
    if (!name_iid) name_iid = fresh_name;
    if (!site) {
      cats[0] = "track";
    } else if (lp__site_has_layer(site)) {
      cats[0] = lp_layer_name(site->layer);
      cats[1] = lp_phase_name(site->phase);
    } else {
      cats[0] = level_name(site->level);
    }
    for (int k = 0; k < 2 && cats[k]; k++) {
      cat_iid[k] = pf_cat_iid(q, cats[k], &fresh_cat[k]);
      if (cat_iid[k]) lp__pb_varint(pb, TE_CATEGORY_IIDS, cat_iid[k]);
    }
    if (name_iid) lp__pb_varint(pb, TE_NAME_IID, name_iid);
    /* One category and no annotations: later events of the key take the fast path. */
    if (!cats[1] && cat_iid[0] && (!site || !lp__site_has_layer(site))) {
      uint32_t h = pf_find(q, r->key);
      if (h != UINT32_MAX) q->cat_of[h] = cat_iid[0];
    }
  }
  if (type == TYPE_COUNTER) {
    lp__pb_varint(pb, TE_TRACK_UUID, counter_uuid);
    lp__pb_varint(pb, TE_COUNTER_VALUE, (uint64_t)r->value);
  }
  if (type == TYPE_SLICE_BEGIN && (r->flags & PF_TRUNCATED)) pf_annotation_uint(pb, "truncated", DA_BOOL, 1);
  if (end && (r->flags & PF_UNTERMINATED)) pf_annotation_str(pb, "unterminated", "ended by an enclosing scope");
  if (!end && site && type != TYPE_COUNTER && lp__site_has_layer(site)) {
    pf_annotation_str(pb, "layer", lp_layer_name(site->layer));
    pf_annotation_str(pb, "phase", lp_phase_name(site->phase));
    if (site->mode == LP_MODE_SWITCH) pf_annotation_str(pb, "mode", "switch");
    if (site->mode == LP_MODE_SUBTRACT) pf_annotation_str(pb, "mode", "subtract");
  }
  lp__pb_end(pb, te);
  if (fresh_name || fresh_cat[0] || fresh_cat[1]) {
    size_t id = lp__pb_begin(pb, TP_INTERNED);
    for (int k = 0; k < 2; k++) {
      if (!fresh_cat[k] || !cat_iid[k]) continue;
      size_t e = lp__pb_begin(pb, ID_CATEGORIES);
      lp__pb_varint(pb, IN_IID, cat_iid[k]);
      lp__pb_str(pb, IN_NAME, cats[k]);
      lp__pb_end(pb, e);
    }
    if (fresh_name) {
      size_t e = lp__pb_begin(pb, ID_NAMES);
      lp__pb_varint(pb, IN_IID, fresh_name);
      lp__pb_str(pb, IN_NAME, name);
      lp__pb_end(pb, e);
    }
    lp__pb_end(pb, id);
  }
  lp__pb_varint(pb, TP_SEQ_ID, q->id);
  lp__pb_end(pb, p);
}

typedef struct pf_export {
  lp__jw_t *w;
  lp__pb_t pb;
  pf_seq_t q;
  uint64_t pid, process_uuid;
  int64_t boot_offset;
  pf_counters_t counters;
  uint32_t rank;
} pf_export_t;

static const char *pf_name_of(const pf_rec_t *r) {
  return r->flags & PF_WORK ? (const char *)r->key : lp__label((const lp_site_t *)r->key);
}

/*
 * The counter track of a site: one per counter name, as the JSON's counters
 * of one name are one series (Perfetto keeps counter tracks of one name
 * apart), described on the name's first use. A site is looked up by address
 * first; a site of a name already described is then remembered under it.
 */
static uint64_t pf_counter_track(pf_export_t *x, const lp_site_t *site) {
  pf_counters_t *c = &x->counters;
  for (size_t i = 0; i < c->n; i++)
    if (c->keys[i] == site) return c->uuids[i];
  const char *name = lp__label(site);
  uint64_t uuid = 0;
  for (size_t i = 0; i < c->n && !uuid; i++)
    if (strcmp(lp__label(c->keys[i]), name) == 0) uuid = c->uuids[i];
  bool described = uuid != 0;
  if (!described) {
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a of the name */
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3u;
    uuid = pf_uuid(x->pid, (h << 1) | 1);
  }
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    const void **k = lp__realloc(c->keys, cap * sizeof *k);
    if (k) c->keys = k;
    uint64_t *u = k ? lp__realloc(c->uuids, cap * sizeof *u) : NULL;
    if (u) c->uuids = u;
    if (!k || !u) {
      x->q.nomem = true;
      return uuid;
    }
    c->cap = cap;
  }
  c->keys[c->n] = site;
  c->uuids[c->n++] = uuid;
  if (described) return uuid;
  size_t p, td = pf_descriptor_begin(&x->pb, x->q.id, SEQ_NEEDS_STATE, &p);
  lp__pb_varint(&x->pb, TD_UUID, uuid);
  lp__pb_varint(&x->pb, TD_PARENT, x->process_uuid);
  lp__pb_str(&x->pb, TD_NAME, name);
  size_t cd = lp__pb_begin(&x->pb, TD_COUNTER);
  lp__pb_end(&x->pb, cd);
  lp__pb_end(&x->pb, td);
  lp__pb_end(&x->pb, p);
  return uuid;
}

/*
 * A lane's track descriptor, on its own sequence: a track under the process, or a thread with its name.
 *
 * A virtual track says its JSON tid (1000000000 and up, by creation among all
 * the program's tracks) in its description, which labelprof's reader takes
 * for the lane's tid, so that the command titles the lane alike in both
 * formats. Not as a ThreadDescriptor: Perfetto would list the track as a
 * thread of the process, one the kernel never had (in a system trace too,
 * beside the real ones); nor in a field number of labelprof's choosing,
 * which a later version of Perfetto's schema could give a meaning. The
 * description is text Perfetto shows as is (the track's help), and the
 * track stays a track under the process. Its sibling_merge_behavior is NONE:
 * Perfetto would otherwise merge the process's tracks of one name into one,
 * where the JSON has a lane for each.
 */
static void pf_lane_descriptor(pf_export_t *x, uint32_t seq, uint64_t uuid, bool track, const char *name,
                               uint64_t tid) {
  size_t p, td = pf_descriptor_begin(&x->pb, seq, SEQ_NEEDS_STATE, &p);
  lp__pb_varint(&x->pb, TD_UUID, uuid);
  if (track) {
    char desc[96];
    snprintf(desc, sizeof desc, LP__TRACK_DESCRIPTION "%llu (its lane in labelprof's JSON timeline)",
             (unsigned long long)tid);
    lp__pb_varint(&x->pb, TD_PARENT, x->process_uuid);
    lp__pb_str(&x->pb, TD_NAME, name);
    lp__pb_str(&x->pb, TD_DESCRIPTION, desc);
    lp__pb_varint(&x->pb, TD_MERGE, MERGE_NONE);
  } else {
    size_t t = lp__pb_begin(&x->pb, TD_THREAD);
    lp__pb_varint(&x->pb, THD_PID, x->pid);
    lp__pb_varint(&x->pb, THD_TID, tid);
    lp__pb_str(&x->pb, THD_NAME, name);
    lp__pb_end(&x->pb, t);
  }
  lp__pb_varint(&x->pb, TD_RANK, x->rank++);
  lp__pb_end(&x->pb, td);
  lp__pb_end(&x->pb, p);
}

/* A lane's collected records, in time order, as packets of its sequence. */
static void pf_write_lane(pf_export_t *x, lane_writer_t *lw, const lp__snap_lane_t *l, uint32_t seq, uint64_t uuid) {
  pf_lane_t *pl = lw->pf;
  /* Scopes that never nest are collected in order already (pf_cmp is a total order: nothing to sort then). */
  size_t k = 1;
  while (k < pl->n && pf_cmp(&pl->r[k - 1], &pl->r[k]) < 0) k++;
  if (k < pl->n) qsort(pl->r, pl->n, sizeof *pl->r, pf_cmp);
  uint64_t base = pl->n ? pl->r[0].ts : lw->s->start.ns;
  pf_seq_reset(&x->q, seq, base);
  pf_seq_start(&x->q, uuid, x->boot_offset);
  pf_lane_descriptor(x, seq, uuid, l->work != NULL, l->name, l->tid);
  /* The open slices, innermost last; an end goes out before anything at or after it. */
  const pf_rec_t **open = NULL;
  size_t nopen = 0, capopen = 0;
  for (size_t i = 0; i <= pl->n && !x->q.nomem && !x->pb.err; i++) {
    const pf_rec_t *r = i < pl->n ? &pl->r[i] : NULL;
    while (nopen > 0 && (!r || open[nopen - 1]->end <= r->ts)) {
      const pf_rec_t *o = open[--nopen];
      if (!(o->flags & PF_OPEN)) pf_event(&x->q, o, TYPE_SLICE_END, o->end, 0, NULL, true);
    }
    if (!r) break;
    if (r->kind == PF_SLICE) {
      pf_event(&x->q, r, TYPE_SLICE_BEGIN, r->ts, 0, pf_name_of(r), false);
      if (nopen == capopen) {
        size_t cap = capopen ? capopen * 2 : 64;
        const pf_rec_t **no = lp__realloc(open, cap * sizeof *no);
        if (!no) {
          x->q.nomem = true;
          break;
        }
        open = no;
        capopen = cap;
      }
      open[nopen++] = r;
    } else if (r->kind == PF_INSTANT) {
      pf_event(&x->q, r, TYPE_INSTANT, r->ts, 0, pf_name_of(r), false);
    } else {
      uint64_t cu = pf_counter_track(x, r->key);
      pf_event(&x->q, r, TYPE_COUNTER, r->ts, cu, NULL, false);
    }
    if (x->pb.len > 512 * 1024) lp__pb_flush(&x->pb, x->w); /* more than json.c buffers: written straight through */
  }
  free(open);
  lp__pb_flush(&x->pb, x->w);
  pl->n = 0;
}

/*
 * The session's notes, what the JSON's otherData says: the debug
 * annotations of one instant, "labelprof session", on the process's track at
 * n->at_ns (CLOCK_MONOTONIC, named by a snapshot just before it), with what
 * every file says of its session: library, clock, events recorded (events)
 * and dropped, budget, window and first drop. The caller adds what its kind
 * of file says, then ends the packet with pf_session_note_end().
 */
static void pf_session_note_begin(pf_export_t *x, uint32_t seq, const lp__pfs_notes_t *n, uint64_t events,
                                  size_t *p, size_t *te) {
  pf_notes_clock(&x->pb, seq, n->at_ns, x->boot_offset);
  *p = lp__pb_begin(&x->pb, TRACE_PACKET);
  lp__pb_varint(&x->pb, TP_TIMESTAMP, n->at_ns);
  lp__pb_varint(&x->pb, TP_CLOCK_ID, CLOCK_MONOTONIC_ID);
  *te = lp__pb_begin(&x->pb, TP_TRACK_EVENT);
  lp__pb_varint(&x->pb, TE_TYPE, TYPE_INSTANT);
  lp__pb_varint(&x->pb, TE_TRACK_UUID, x->process_uuid);
  pf_annotation_str(&x->pb, "library", "labelprof " LABELPROF_VERSION_STRING);
  pf_annotation_str(&x->pb, "clock", lp__clock_name());
  pf_annotation_str(&x->pb, "clock_reason", lp__clock_reason());
  pf_annotation_uint(&x->pb, "clock_check_ns", DA_UINT, lp__clock_check_ns());
  pf_annotation_str(&x->pb, "clock_domain", "CLOCK_MONOTONIC");
  pf_annotation_uint(&x->pb, "events_recorded", DA_UINT, events);
  pf_annotation_uint(&x->pb, "events_dropped", DA_UINT, n->dropped);
  pf_annotation_uint(&x->pb, "budget_bytes", DA_UINT, n->budget_bytes);
  pf_annotation_uint(&x->pb, "session_start_ns", DA_UINT, n->start_ns);
  pf_annotation_uint(&x->pb, "session_stop_ns", DA_UINT, n->at_ns);
  if (n->first_drop_ns) pf_annotation_uint(&x->pb, "first_drop_ns", DA_UINT, n->first_drop_ns);
}

static void pf_session_note_end(pf_export_t *x, uint32_t seq, size_t p, size_t te) {
  lp__pb_str(&x->pb, 23, "labelprof session"); /* TrackEvent.name: a one-off, not interned */
  lp__pb_end(&x->pb, te);
  lp__pb_varint(&x->pb, TP_SEQ_ID, seq);
  lp__pb_end(&x->pb, p);
}

static int64_t pf_boot_offset(void) {
  if (test_identity) return test_boot_offset;
  struct timespec m, b;
  if (clock_gettime(CLOCK_MONOTONIC, &m) != 0 || clock_gettime(CLOCK_BOOTTIME, &b) != 0) return 0;
  return ((int64_t)b.tv_sec - (int64_t)m.tv_sec) * 1000000000 + ((int64_t)b.tv_nsec - (int64_t)m.tv_nsec);
}

int lp__export_perfetto(lp__jw_t *w, const lp__session_t *s, const char *process_name, char *jump,
                        size_t jump_len) {
  lp__timemap_t *map = lp__timemap_new(s->syncs, s->nsyncs);
  if (!map) return -ENOMEM;
  pf_lane_t pl = {NULL, 0, 0};
  pf_export_t x = {.w = w, .pid = export_pid(), .boot_offset = pf_boot_offset()};
  x.q.pb = &x.pb;
  x.process_uuid = pf_uuid(x.pid, 0);
  uint32_t pseq = s->nlanes + 1; /* the process's own sequence: its descriptor and the session's notes */
  /* The process. */
  size_t p, td = pf_descriptor_begin(&x.pb, pseq, SEQ_CLEARED, &p);
  lp__pb_varint(&x.pb, TD_UUID, x.process_uuid);
  size_t pd = lp__pb_begin(&x.pb, TD_PROCESS);
  lp__pb_varint(&x.pb, PD_PID, x.pid);
  lp__pb_str(&x.pb, PD_NAME, process_name ? process_name : program_invocation_short_name);
  lp__pb_end(&x.pb, pd);
  lp__pb_varint(&x.pb, TD_CHILD_ORDERING, 3); /* EXPLICIT: lanes in the JSON's order */
  lp__pb_end(&x.pb, td);
  lp__pb_end(&x.pb, p);
  lp__pb_flush(&x.pb, w);

  lane_writer_t lw = {.w = w, .pf = &pl, .s = s, .map = map};
  for (uint32_t i = 0; i < s->nlanes && !w->err && !lw.nomem && !x.q.nomem && !x.pb.err; i++) {
    const lp__snap_lane_t *l = &s->lanes[i];
    bool track = l->work != NULL;
    if (!(track ? track_has_items(&lw, l) : thread_has_events(&lw, l))) continue;
    lw.cursor = 0;
    lw.last = 0;
    if (track)
      write_track_lane(&lw, l);
    else
      write_thread_lane(&lw, l);
    if (!lw.nomem) pf_write_lane(&x, &lw, l, i + 1, pf_uuid(x.pid, (uint64_t)i + 2));
  }

  /* The session's notes, at its stop (a session still running: when it was taken). */
  lp__pfs_notes_t n = {s->stop.ns != UINT64_MAX ? s->stop.ns : s->taken_ns, s->dropped, s->opts.budget_bytes,
                       s->start.ns, s->first_drop_ns, 0, 0};
  size_t te;
  pf_session_note_begin(&x, pseq, &n, lw.events, &p, &te);
  pf_annotation_uint(&x.pb, "session_running", DA_BOOL, s->stop.ns == UINT64_MAX);
  const char *jt = lp__timemap_jump_text(map);
  if (jt) {
    pf_annotation_uint(&x.pb, "clock_jumps", DA_UINT, lp__timemap_jumps(map));
    pf_annotation_str(&x.pb, "clock_jump", jt);
    if (jump && jump_len)
      snprintf(jump, jump_len,
               "the timeline's clock jumped %zu time(s) during the session; the largest: %s; events recorded "
               "in the chunk where it happened may be off by up to that much",
               lp__timemap_jumps(map), jt);
  }
  pf_annotation_str(&x.pb, "policy", s->opts.policy == LP_TRACE_RING ? "ring" : "discard");
  char levels[64] = "";
  static const uint32_t bits[] = {LP_LEVEL_REQUEST, LP_LEVEL_RUNTIME, LP_LEVEL_OPERATOR, LP_LEVEL_DEBUG};
  for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
    if (s->opts.levels & bits[i]) {
      if (levels[0]) strcat(levels, ",");
      strcat(levels, level_name(bits[i]));
    }
  pf_annotation_str(&x.pb, "levels", levels);
  pf_session_note_end(&x, pseq, p, te);
  lp__pb_flush(&x.pb, w);

  int rc = x.pb.err ? x.pb.err : (lw.nomem || x.q.nomem) ? -ENOMEM : 0;
  pf_seq_reset(&x.q, 0, 0);
  lp__pb_free(&x.pb);
  free(x.counters.keys);
  free(x.counters.uuids);
  free(pl.r);
  free(lw.stack);
  lp__timemap_free(map);
  return rc ? rc : w->err;
}

/* ---- Perfetto streamed: chunks encoded as they fill (LP_TRACE_STREAM, trace.c) ----------
 *
 * The same packets as above, but written chunk by chunk, in recording order:
 * a begin is a SLICE_BEGIN when it is read, an end the SLICE_END of the open
 * scope it matches (the scopes above it, and those at or below a new
 * begin's depth, end there too, flagged "unterminated": a longjmp skipped
 * them). An end whose begin the stream never saw (dropped, or recorded
 * before the stream) is left out. What a lane needs across chunks is kept
 * in its lp__pfs_lane_t: its sequence (interning and clock), and its open
 * scopes. Each file starts afresh (lp__pfs_restart): the process
 * descriptor, and on each lane's first packet in it the cleared incremental
 * state, the clock snapshot, the defaults and the lane's descriptor; the
 * scopes still open then are begun again at the lane's first event in the
 * file, flagged "truncated". A virtual track's items are written in the
 * order they were given, as a begin and an end each, on CLOCK_MONOTONIC
 * rather than the lane's incremental clock: any thread may give an item,
 * and not in time order (the work inside another is given before it, being
 * done first), which a clock that only goes forward would move to the
 * previous item's end. A reader that sorts (Perfetto's does) nests them by
 * their times; like the file written at the end, an item that starts where
 * the item given before it ended starts 1 ns later.
 */

/*
 * The bytes of a packet that follow its timestamp, ready to copy: the
 * TrackEvent (type, and for a begin its category and name iids) and the
 * sequence id. A begin's are kept by site, an end's once per lane. Sixteen
 * bytes hold them: a begin's are 13 while its iids and the sequence id fit
 * in two bytes each (a site whose tail would not fit takes the general
 * path). The loop then copies them in one move, and a slot is 32 bytes, a
 * shift from its index.
 */
typedef struct pfs_tail {
  const void *site;
  uint8_t b[16];
  uint8_t n; /* of b's bytes, those that count */
} pfs_tail_t;

struct lp__pfs_lane {
  pf_seq_t q;
  uint32_t seq;
  uint64_t uuid, file; /* the file its sequence was started in (0: none yet) */
  uint64_t prev_end;   /* a track's: the end of the item given before (UINT64_MAX: none) */
  open_scope_t *stack;
  size_t depth, cap;
  pfs_tail_t end;          /* an end's */
  pfs_tail_t *fast;         /* the begins of sites interned in this file: open addressing, at most half full */
  uint32_t fmask, nfast;    /* fast's slots - 1 (0 with no table: the one empty slot pfs_no_tails), sites in it */
};

static void pfs_tails_clear(lp__pfs_lane_t *l);

struct lp__pfs {
  pf_export_t x;
  uint64_t file;   /* files started */
  uint32_t nseq;   /* sequences given out */
  uint64_t events; /* events written to the current file */
};

lp__pfs_t *lp__pfs_new(void) {
  lp__pfs_t *f = lp__calloc(1, sizeof *f);
  if (!f) return NULL;
  f->x.pid = export_pid();
  f->x.process_uuid = pf_uuid(f->x.pid, 0);
  f->x.boot_offset = pf_boot_offset();
  f->x.q.pb = &f->x.pb;
  f->nseq = 1; /* 1 is the process's own */
  return f;
}

void lp__pfs_restart(lp__pfs_t *f, const char *process_name) {
  pf_export_t *x = &f->x;
  f->file++;
  f->events = 0;
  /* Read again for each file: a machine suspended since the last one moved BOOTTIME away from MONOTONIC. */
  x->boot_offset = pf_boot_offset();
  x->counters.n = 0; /* counter tracks are described again in each file */
  x->rank = 0;
  size_t p, td = pf_descriptor_begin(&x->pb, 1, SEQ_CLEARED, &p);
  lp__pb_varint(&x->pb, TD_UUID, x->process_uuid);
  size_t pd = lp__pb_begin(&x->pb, TD_PROCESS);
  lp__pb_varint(&x->pb, PD_PID, x->pid);
  lp__pb_str(&x->pb, PD_NAME, process_name ? process_name : program_invocation_short_name);
  lp__pb_end(&x->pb, pd);
  lp__pb_varint(&x->pb, TD_CHILD_ORDERING, 3);
  lp__pb_end(&x->pb, td);
  lp__pb_end(&x->pb, p);
}

void lp__pfs_lane_free(lp__pfs_lane_t *l) {
  if (!l) return;
  pf_seq_reset(&l->q, 0, 0);
  free(l->stack ? l->stack - 1 : NULL);
  pfs_tails_clear(l);
  free(l);
}

void lp__pfs_free(lp__pfs_t *f) {
  if (!f) return;
  lp__pb_free(&f->x.pb);
  free(f->x.counters.keys);
  free(f->x.counters.uuids);
  free(f);
}

const uint8_t *lp__pfs_bytes(const lp__pfs_t *f, size_t *n) {
  *n = f->x.pb.len;
  return f->x.pb.buf;
}

void lp__pfs_clear(lp__pfs_t *f) { f->x.pb.len = 0; }

int lp__pfs_error(const lp__pfs_t *f) { return f->x.pb.err ? f->x.pb.err : f->x.q.nomem ? -ENOMEM : 0; }

uint64_t lp__pfs_events(const lp__pfs_t *f) { return f->events; }

/* The lane's sequence started in this file, with its descriptor, and its open scopes begun again at ts. */
static void pfs_lane_start(lp__pfs_t *f, lp__pfs_lane_t *l, const lp__pfs_lane_info_t *info, uint64_t ts) {
  pf_export_t *x = &f->x;
  pf_seq_reset(&l->q, l->seq, ts);
  pfs_tails_clear(l); /* the file interns its names afresh */
  pf_seq_start(&l->q, l->uuid, x->boot_offset);
  pf_lane_descriptor(x, l->seq, l->uuid, info->track, info->name, info->tid);
  l->file = f->file;
  for (size_t k = 0; k < l->depth; k++) {
    pf_rec_t r = {ts, 0, l->stack[k].site, 0, PF_SLICE, PF_TRUNCATED};
    pf_event(&l->q, &r, TYPE_SLICE_BEGIN, ts, 0, lp__label(l->stack[k].site), false);
  }
}

/* Ends the open scopes from index k up, innermost first, at ts. */
static void pfs_close_from(lp__pfs_lane_t *l, size_t k, uint64_t ts, bool unterminated) {
  while (l->depth > k) {
    l->depth--;
    pf_rec_t r = {ts, ts, l->stack[l->depth].site, 0, PF_SLICE, unterminated ? PF_UNTERMINATED : 0};
    pf_event(&l->q, &r, TYPE_SLICE_END, ts, 0, NULL, true);
  }
}

/* Doubles a lane's stack, which sits after its sentinel: an entry of depth -1 (as an int32_t). */
static bool pfs_stack_grow(lp__pfs_lane_t *l) {
  size_t cap = l->cap ? l->cap * 2 : 64;
  open_scope_t *base = lp__realloc(l->stack ? l->stack - 1 : NULL, (cap + 1) * sizeof *base);
  if (!base) return false;
  base[0] = (open_scope_t){NULL, 0, UINT32_MAX, false, 0};
  l->stack = base + 1;
  l->cap = cap;
  return true;
}

/* The tail of a packet: a TrackEvent of type with fields te (n bytes), and the sequence id. */
static void pfs_tail_set(pfs_tail_t *t, const void *site, uint32_t type, const uint8_t *te, size_t n, uint32_t seq) {
  t->site = site;
  t->n = 0;
  t->b[t->n++] = TP_TRACK_EVENT << 3 | 2;
  t->b[t->n++] = (uint8_t)(2 + n);
  t->b[t->n++] = TE_TYPE << 3;
  t->b[t->n++] = (uint8_t)type;
  if (n) memcpy(t->b + t->n, te, n);
  t->n += (uint8_t)n;
  t->b[t->n++] = TP_SEQ_ID << 3;
  t->n += (uint8_t)lp__pb_put_varint(t->b + t->n, seq);
}

/*
 * A lane's begins kept ready, by site: an open-addressed table, at most
 * half full, that grows to PFS_FAST_MAX slots; a site past that takes the
 * general path. With no table the lane points at one empty slot.
 */
enum { PFS_FAST_MIN = 64, PFS_FAST_MAX = 8192 };
static pfs_tail_t pfs_no_tails[1];

static inline uint32_t pfs_hash(const void *site) { return (uint32_t)((uintptr_t)site >> 4); }

static void pfs_tails_clear(lp__pfs_lane_t *l) {
  if (l->fast != pfs_no_tails) free(l->fast);
  l->fast = pfs_no_tails;
  l->fmask = 0;
  l->nfast = 0;
}

/*
 * A site's own slot, where it nearly always is: fast[pfs_hash(site) & mask],
 * at byte offset ((site >> 4) << 5) & (mask << 5). (site >> 4) << 5 differs
 * from site << 1 only in its low five bits, which mask << 5 clears: the
 * offset is (site << 1) & (mask << 5), a shift and a mask less.
 */
static inline const pfs_tail_t *pfs_tail_home(const pfs_tail_t *fast, uintptr_t byte_mask, const void *site) {
  _Static_assert(sizeof *fast == 32, "a slot's offset is its index << 5");
  return (const pfs_tail_t *)((const char *)fast + (((uintptr_t)site << 1) & byte_mask));
}

/* The slot for site: its own, or the empty one it would take. */
static inline pfs_tail_t *pfs_tail_slot(pfs_tail_t *fast, uint32_t mask, const void *site) {
  uint32_t h = pfs_hash(site) & mask;
  while (fast[h].site && fast[h].site != site) h = (h + 1) & mask;
  return &fast[h];
}

/* Remembers a plain site's begin once pf_event has interned its name and its one category. */
static void pfs_fast_learn(lp__pfs_lane_t *l, const lp_site_t *site) {
  uint32_t h = pf_find(&l->q, site);
  if (h == UINT32_MAX || !l->q.cat_of[h] || lp__site_has_layer(site)) return;
  uint8_t te[20];
  size_t n = 0;
  te[n++] = TE_CATEGORY_IIDS << 3;
  n += lp__pb_put_varint(te + n, l->q.cat_of[h]);
  te[n++] = TE_NAME_IID << 3;
  n += lp__pb_put_varint(te + n, l->q.iids[h]);
  if (4 + n + 1 + lp__pb_varint_size(l->seq) > sizeof l->fast[0].b) return; /* iids that large: the general path */
  if ((l->nfast + 1) * 2 > l->fmask + 1) {
    uint32_t slots = l->fast == pfs_no_tails ? PFS_FAST_MIN : (l->fmask + 1) * 2;
    if (slots > PFS_FAST_MAX) return;
    pfs_tail_t *t = lp__calloc(slots, sizeof *t);
    if (!t) return; /* the general path, as for any site not kept */
    for (uint32_t i = 0; l->fast != pfs_no_tails && i <= l->fmask; i++)
      if (l->fast[i].site) *pfs_tail_slot(t, slots - 1, l->fast[i].site) = l->fast[i];
    uint32_t kept = l->nfast;
    pfs_tails_clear(l);
    l->fast = t;
    l->fmask = slots - 1;
    l->nfast = kept;
  }
  pfs_tail_t *t = pfs_tail_slot(l->fast, l->fmask, site);
  l->nfast += !t->site;
  pfs_tail_set(t, site, TYPE_SLICE_BEGIN, te, n, l->seq);
}

/* What a time line's ns per tick is made of: a fraction only, whole ns and a fraction, one ns exactly. */
typedef enum { PFS_LINE_FRAC, PFS_LINE_BOTH, PFS_LINE_NS } pfs_line_t;

/*
 * The common events, written straight to the buffer from event i on: a
 * begin of a learnt site that ends no scope, and an end that matches the
 * innermost open scope, each at a time on seg's line. The packets are byte
 * for byte those pf_event_fast writes. Returns the index of the first event
 * it left to the general path (to when none).
 *
 * The buffer's room is made before the run starts, so that its loop does
 * not test it: an event writes at most ROOM bytes. The stack's room is
 * tested by each begin instead: bounding the run by it would end a run of
 * flat scopes every 64 events (the stack's first size) and send the next
 * one to the general path. The entry below the stack (its sentinel, depth
 * -1) lets the loop read the innermost depth with no test for an empty
 * stack: the loop keeps a pointer to the innermost entry.
 */
static inline __attribute__((always_inline)) uint32_t pfs_loop(lp__pfs_t *f, lp__pfs_lane_t *l,
                                                                 const lp_impl_event_t *ev, uint32_t i, uint32_t to,
                                                                 const lp__timeseg_t *seg, pfs_line_t line) {
  lp__pb_t *pb = &f->x.pb;
  enum { ROOM = 32 }; /* the longest packet written here (2 + 1 + 10 + 16), rounded up */
  if (l->file != f->file || pb->err || !l->stack) return i; /* no stack yet: its first begin makes it */
  size_t n = to - i;
  uint8_t *o = n ? lp__pb_reserve(pb, n * ROOM) : NULL;
  if (!o) return i;
  lp__timeseg_t s = *seg;
  if (line == PFS_LINE_FRAC) s.whole = 0; /* constants here: a multiply goes */
  if (line == PFS_LINE_NS) {
    s.whole = 1;
    s.frac = 0;
  }
  const lp_impl_event_t *e = ev + i, *const end = e + n;
  uint64_t last = l->q.last;
  open_scope_t *top = l->stack + l->depth - 1; /* the innermost open scope, or the sentinel */
  const open_scope_t *const full = l->stack + l->cap - 1; /* top when the stack is full */
  pfs_tail_t *const fast = l->fast;
  const uint32_t fmask = l->fmask;
  const uintptr_t byte_mask = (uintptr_t)fmask << 5;
  const pfs_tail_t *const end_tail = &l->end;
  for (; e < end; e++) {
    uint64_t tag = e->tag, ts;
    uint32_t kind = (uint32_t)(tag & LP_IMPL_EV_KIND);
    if (kind > LP_IMPL_EV_END || !lp__timeseg_ns(&s, e->ts, &ts)) break;
    if (ts < last) ts = last; /* a lane's time never goes back on its sequence */
    const lp_site_t *site = LP__TAG_SITE(tag);
    uint32_t d = LP__TAG_DEPTH(tag);
    const pfs_tail_t *t;
    if (kind == LP_IMPL_EV_BEGIN) {
      if ((int32_t)top->depth >= (int32_t)d || top == full) break;
      t = pfs_tail_home(fast, byte_mask, site);
      if (t->site != site) { /* not in its own slot: probe on */
        t = pfs_tail_slot(fast, fmask, site);
        if (t->site != site) break;
      }
      top++;
      top->site = site; /* all the stream reads of an open scope */
      top->depth = d;
    } else {
      if (top->depth != d || (d >= 255 && top->site != site)) break;
      top--;
      t = end_tail;
    }
    uint64_t dt = ts - last;
    size_t k; /* the timestamp's end */
    o[2] = TP_TIMESTAMP << 3;
    if (dt < 0x4000) {
      /* One byte or two: the second is written either way (fewer
         instructions), and after a one-byte dt the tail's copy overwrites it. */
      bool two = dt >= 0x80;
      o[3] = (uint8_t)(two ? dt | 0x80 : dt);
      o[4] = (uint8_t)(dt >> 7);
      k = two ? 5 : 4;
    } else {
      k = 3 + lp__pb_put_varint(o + 3, dt);
    }
    memcpy(o + k, t->b, sizeof t->b); /* a fixed size: one wide move; only t->n of it counts */
    k += t->n;
    o[0] = TRACE_PACKET << 3 | 2;
    o[1] = (uint8_t)(k - 2);
    o += k;
    last = ts;
  }
  uint32_t done = (uint32_t)(e - (ev + i));
  pb->len = (size_t)(o - pb->buf);
  l->q.last = last;
  l->depth = (size_t)(top + 1 - l->stack);
  f->events += done;
  return i + done;
}

/*
 * The loop for the line's shape, each with its multiplies known: a counter
 * faster than 1 GHz has no whole ns per tick, one slower has both parts,
 * and CLOCK_MONOTONIC's map (the identity) is one ns per tick exactly.
 */
static uint32_t pfs_run(lp__pfs_t *f, lp__pfs_lane_t *l, const lp_impl_event_t *ev, uint32_t i, uint32_t to,
                        const lp__timeseg_t *seg) {
  if (seg->whole == 1 && !seg->frac) return pfs_loop(f, l, ev, i, to, seg, PFS_LINE_NS);
  if (seg->whole) return pfs_loop(f, l, ev, i, to, seg, PFS_LINE_BOTH);
  return pfs_loop(f, l, ev, i, to, seg, PFS_LINE_FRAC);
}

int lp__pfs_chunk(lp__pfs_t *f, lp__pfs_lane_t **state, const lp__pfs_lane_info_t *info, const lp_impl_event_t *ev,
                  uint32_t from, uint32_t to, const lp__timemap_t *map, lp__sync_t anchor) {
  pf_export_t *x = &f->x;
  lp__pfs_lane_t *l = *state;
  if (!l) {
    if (!(l = lp__calloc(1, sizeof *l))) return -ENOMEM;
    l->seq = ++f->nseq;
    l->uuid = pf_uuid(x->pid, ((uint64_t)l->seq << 1) | ((uint64_t)1 << 62));
    l->q.pb = &x->pb;
    l->fast = pfs_no_tails;
    l->prev_end = UINT64_MAX;
    pfs_tail_set(&l->end, NULL, TYPE_SLICE_END, NULL, 0, l->seq);
    *state = l;
  }
  size_t cursor = 0;
  lp__timeseg_t seg = LP__TIMESEG_NONE;
  for (uint32_t i = from; i < to && !x->pb.err; i++) {
    if ((i = pfs_run(f, l, ev, i, to, &seg)) >= to) break;
    uint32_t kind = (uint32_t)(ev[i].tag & LP_IMPL_EV_KIND);
    if (kind == LP__EV_PAYLOAD) continue;
    uint64_t ts;
    if (kind == LP__EV_TRACK) {
      if (i + 1 >= to) break; /* its payload not there: cannot happen, both are written at once */
      ts = ev[i].ts;
    } else if (!lp__timeseg_ns(&seg, ev[i].ts, &ts)) {
      ts = lp__timemap_ns_seg(map, ev[i].ts, anchor, &cursor, &seg);
    }
    if (l->file != f->file) pfs_lane_start(f, l, info, ts);
    if (ts < l->q.last) ts = l->q.last; /* a lane's time never goes back on its sequence */
    const lp_site_t *site = LP__TAG_SITE(ev[i].tag);
    switch (kind) {
    case LP_IMPL_EV_BEGIN: {
      uint32_t d = LP__TAG_DEPTH(ev[i].tag);
      size_t k = l->depth;
      while (k > 0 && l->stack[k - 1].depth >= d) k--;
      pfs_close_from(l, k, ts, true);
      if (l->depth == l->cap && !pfs_stack_grow(l)) {
        l->q.nomem = true;
        break;
      }
      l->stack[l->depth++] = (open_scope_t){site, ts, d, false, 0};
      pf_rec_t r = {ts, 0, site, 0, PF_SLICE, 0};
      pf_event(&l->q, &r, TYPE_SLICE_BEGIN, ts, 0, lp__label(site), false);
      pfs_fast_learn(l, site);
      f->events++;
      break;
    }
    case LP_IMPL_EV_END: {
      size_t m = match(l->stack, l->depth, site, LP__TAG_DEPTH(ev[i].tag));
      if (!m) break; /* its begin is not in the stream */
      pfs_close_from(l, m, ts, true);
      pfs_close_from(l, m - 1, ts, false);
      f->events++;
      break;
    }
    case LP_IMPL_EV_INSTANT: {
      pf_rec_t r = {ts, 0, site, 0, PF_INSTANT, 0};
      pf_event(&l->q, &r, TYPE_INSTANT, ts, 0, lp__label(site), false);
      f->events++;
      break;
    }
    case LP_IMPL_EV_COUNTER: {
      if (i + 1 >= to) break;
      pf_rec_t r = {ts, 0, site, (int64_t)ev[i + 1].ts, PF_COUNTER, 0};
      x->q.id = l->seq; /* the sequence its descriptor goes on */
      uint64_t cu = pf_counter_track(x, site);
      pf_event(&l->q, &r, TYPE_COUNTER, ts, cu, NULL, false);
      f->events++;
      i++;
      break;
    }
    case LP__EV_TRACK: {
      uint32_t id = (uint32_t)(ev[i].tag >> 3);
      uint64_t dur = ev[i + 1].ts;
      i++;
      if (id >= info->nwork) break;
      const char *name = info->work[id];
      uint64_t start = ev[i - 1].ts, item_end = start + dur; /* its own time, not clamped to the lane's */
      if (start == l->prev_end && dur > 0) start++;
      l->prev_end = item_end;
      pf_rec_t r = {start, item_end, name, 0, PF_SLICE, PF_WORK | PF_ABSOLUTE};
      pf_event(&l->q, &r, TYPE_SLICE_BEGIN, start, 0, name, false);
      pf_event(&l->q, &r, TYPE_SLICE_END, item_end, 0, NULL, true);
      f->events++;
      break;
    }
    default:
      break;
    }
  }
  if (l->q.nomem) x->q.nomem = true;
  return lp__pfs_error(f);
}

void lp__pfs_finish(lp__pfs_t *f, const lp__pfs_notes_t *n) {
  pf_export_t *x = &f->x;
  size_t p, te;
  pf_session_note_begin(x, 1, n, f->events, &p, &te);
  pf_annotation_uint(&x->pb, "file_start_ns", DA_UINT, n->file_start_ns);
  pf_annotation_uint(&x->pb, "session_events_dropped", DA_UINT, n->session_dropped);
  pf_annotation_str(&x->pb, "policy", "stream");
  pf_annotation_uint(&x->pb, "file_number", DA_UINT, f->file);
  pf_session_note_end(x, 1, p, te);
}
/* ---- end of Perfetto ---- */
