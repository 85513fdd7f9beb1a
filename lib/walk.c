/*
 * walk.c: a lane of a session as every format sees it.
 *
 * The one reading of a snapshot's lane that the JSON, systrace and Perfetto
 * writers share: its events in recording order, those of the session's
 * window and levels only, scopes paired, and what a viewer needs made up.
 * The walker hands each format's sink what it found (lp__sink_t): a scope
 * that began, a slice when a scope ended, a scope still open at the lane's
 * end, an instant, a counter's value, a track's item. It owns the times:
 * ticks become CLOCK_MONOTONIC nanoseconds through the session's sync
 * points, and a lane's times are kept strictly increasing (a repeated or
 * backward time moves to one nanosecond after the previous one), so that
 * no two events of a lane share a time and nesting never depends on file
 * order.
 *
 * A lane's events are those stamped between the window's start and stop,
 * plus the ends, recorded after the stop, of scopes that began inside.
 * Begins and ends carry their depth on the pseudo-stack, and an end closes
 * the begin at its own depth (at 255, "that deep or deeper", the site must
 * match too). Scopes above it that never ended (a longjmp skipped them)
 * close at the same time, flagged unterminated; so do scopes at or below a
 * new begin's depth. An end whose begin is not there (it came before the
 * window, or the ring reused its chunk) gets a begin made up at the lane's
 * start, flagged truncated: made-up begins come before every real event of
 * the lane, a nanosecond per level apart, outermost first, so that they
 * nest whatever order their ends come in. A begin recorded after the stop
 * is followed (a shadow, never given to the sink) so that its end is not
 * taken for an enclosing scope's. Track lanes carry the caller's own times
 * and are given as they were recorded.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* ---- what every format says of the process -------------------------------------- */

/* Tests: the process id and BOOTTIME's offset from CLOCK_MONOTONIC, fixed. */
static uint64_t test_pid;
static int64_t test_boot_offset;

void lp__export_test_identity(uint64_t pid, int64_t boot_offset) {
  test_pid = pid;
  test_boot_offset = boot_offset;
}

uint64_t lp__export_pid(void) { return test_pid ? test_pid : (uint64_t)getpid(); }

int64_t lp__export_boot_offset(void) {
  if (test_pid) return test_boot_offset;
  struct timespec m, b;
  if (clock_gettime(CLOCK_MONOTONIC, &m) != 0 || clock_gettime(CLOCK_BOOTTIME, &b) != 0) return 0;
  return ((int64_t)b.tv_sec - (int64_t)m.tv_sec) * 1000000000 + ((int64_t)b.tv_nsec - (int64_t)m.tv_nsec);
}

void lp__jump_sentence(const lp__timemap_t *map, char *out, size_t size) {
  const char *jt = lp__timemap_jump_text(map);
  if (!jt || !out || !size) return;
  snprintf(out, size,
           "the timeline's clock jumped %zu time(s) during the session; the largest: %s; events recorded in the "
           "chunk where it happened may be off by up to that much",
           lp__timemap_jumps(map), jt);
}

static void note(lp__note_t *out, size_t *n, const char *key, lp__note_kind_t kind, const char *str, uint64_t u) {
  out[(*n)++] = (lp__note_t){key, kind, str, u};
}

size_t lp__notes_items(const lp__notes_t *in, lp__note_t out[LP__NOTES_MAX], char *levels) {
  size_t n = 0;
  note(out, &n, "library", LP__NOTE_STR, "labelprof " LABELPROF_VERSION_STRING, 0);
  note(out, &n, "clock", LP__NOTE_STR, lp__clock_name(), 0);
  note(out, &n, "clock_reason", LP__NOTE_STR, lp__clock_reason(), 0);
  note(out, &n, "clock_check_ns", LP__NOTE_UINT, NULL, lp__clock_check_ns());
  note(out, &n, "clock_domain", LP__NOTE_STR, "CLOCK_MONOTONIC", 0);
  if (in->has_ts_base) note(out, &n, "ts_base_ns", LP__NOTE_NS, NULL, in->ts_base_ns);
  if (in->jump) {
    note(out, &n, "clock_jumps", LP__NOTE_UINT, NULL, in->jumps);
    note(out, &n, "clock_jump", LP__NOTE_STR, in->jump, 0);
  }
  note(out, &n, "events_recorded", LP__NOTE_UINT, NULL, in->events);
  note(out, &n, "events_dropped", LP__NOTE_UINT, NULL, in->dropped);
  note(out, &n, "budget_bytes", LP__NOTE_UINT, NULL, in->budget_bytes);
  uint64_t names_over = atomic_load_explicit(&lp__names_overflowed, memory_order_relaxed);
  if (names_over) { /* NVTX and ITT names past LABELPROF_MAX_NAMES, in this process so far */
    note(out, &n, "names_overflowed", LP__NOTE_UINT, NULL, names_over);
    note(out, &n, "names_limit", LP__NOTE_UINT, NULL, atomic_load_explicit(&lp__names_limit, memory_order_relaxed));
  }
  note(out, &n, "session_start_ns", LP__NOTE_NS, NULL, in->start_ns);
  note(out, &n, "session_stop_ns", LP__NOTE_NS, NULL, in->at_ns);
  note(out, &n, "session_running", LP__NOTE_BOOL, NULL, in->running);
  if (in->first_drop_ns) note(out, &n, "first_drop_ns", LP__NOTE_NS, NULL, in->first_drop_ns);
  note(out, &n, "policy", LP__NOTE_STR, in->policy, 0);
  lp__levels_text(in->levels, levels, 64);
  note(out, &n, "levels", LP__NOTE_STR, levels, 0);
  note(out, &n, "unfinished_scopes", LP__NOTE_UINT, NULL, in->unfinished);
  if (in->file) {
    note(out, &n, "file_start_ns", LP__NOTE_NS, NULL, in->file_start_ns);
    note(out, &n, "session_events_dropped", LP__NOTE_UINT, NULL, in->session_dropped);
    note(out, &n, "file_number", LP__NOTE_UINT, NULL, in->file_number);
  }
  return n;
}

lp__notes_t lp__session_notes(const lp__session_t *s, const lp__timemap_t *map, const lp__walk_t *w) {
  return (lp__notes_t){.at_ns = s->stop.ns != UINT64_MAX ? s->stop.ns : s->taken_ns,
                       .events = w->events,
                       .dropped = s->dropped,
                       .budget_bytes = s->opts.budget_bytes,
                       .start_ns = s->start.ns,
                       .first_drop_ns = s->first_drop_ns,
                       .running = s->stop.ns == UINT64_MAX,
                       .policy = s->opts.policy == LP_TRACE_RING ? "ring" : "discard",
                       .levels = s->opts.levels,
                       .unfinished = w->unfinished,
                       .jumps = lp__timemap_jumps(map),
                       .jump = lp__timemap_jump_text(map)};
}

/* ---- the lane walker ------------------------------------------------------------- */

/* The next time of the lane: never equal to or before the previous one. */
static uint64_t lane_time(lp__walk_t *w, uint64_t ns) {
  if (ns <= w->last) ns = w->last + 1;
  w->last = ns;
  return ns;
}

/* ns for ticks of the chunk being read: on the line lent for its earlier ticks when it holds, else from the map. */
static uint64_t lane_ns(lp__walk_t *w, uint64_t ticks) {
  uint64_t ns;
  if (lp__timeseg_ns(&w->seg, ticks, &ns)) return ns;
  return lp__timemap_ns_seg(w->map, ticks, w->anchor, &w->cursor, &w->seg);
}

static uint64_t mapped(lp__walk_t *w, uint64_t ticks) { return lane_time(w, lane_ns(w, ticks)); }

/* A scope's end, to the sink (shadows are never given). */
static void slice(lp__walk_t *w, const lp__scope_t *o, uint64_t end, unsigned flags) {
  if (!o->shadow) w->sink->slice(w->ctx, o, end, flags);
}

static bool grow_stack(lp__walk_t *w) {
  if (w->depth < w->cap) return true;
  size_t cap = w->cap ? w->cap * 2 : 64;
  lp__scope_t *s = lp__realloc(w->stack, cap * sizeof *s);
  if (!s) {
    w->nomem = true;
    return false;
  }
  w->stack = s;
  w->cap = cap;
  return true;
}

size_t lp__scope_match(const lp__scope_t *stack, size_t n, const lp_site_t *site, uint32_t d) {
  for (size_t k = n; k > 0; k--) {
    const lp__scope_t *o = &stack[k - 1];
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

static chunk_view_t view_of(const lp__walk_t *w, const lp__snap_chunk_t *sc) {
  chunk_view_t cv = {lp__chunk_span(w->s->start, w->s->stop, sc->chunk->sync.ns, sc->end_ns), sc->chunk->sync};
  return cv;
}

/*
 * Whether ticks recorded in a chunk fall after the window's start and before
 * its stop. Only a chunk that straddles a bound maps them, through the
 * clock's stretches, to compare in ns.
 */
static inline void in_time(const lp__walk_t *w, const chunk_view_t *cv, uint64_t ticks, bool *after, bool *before) {
  uint64_t ns = 0;
  if (cv->span.after_start == LP__EACH || cv->span.before_stop == LP__EACH) {
    size_t cursor = 0;
    ns = lp__timemap_ns(w->map, ticks, cv->anchor, &cursor);
  }
  *after = cv->span.after_start == LP__ALL_IN || (cv->span.after_start == LP__EACH && ns >= w->s->start.ns);
  *before = cv->span.before_stop == LP__ALL_IN || (cv->span.before_stop == LP__EACH && ns <= w->s->stop.ns);
}

static inline lane_event_t decode(const lp__walk_t *w, const chunk_view_t *cv, lp_impl_event_t e) {
  lane_event_t v;
  bool before;
  v.kind = (uint32_t)(e.tag & LP_IMPL_EV_KIND);
  v.site = LP__TAG_SITE(e.tag);
  v.depth = v.kind <= LP_IMPL_EV_END ? LP__TAG_DEPTH(e.tag) : 0;
  v.ts = e.ts;
  v.after_start = v.in_window = false;
  if (v.kind == LP__EV_PAYLOAD || !(v.site->level & w->s->opts.levels)) return v;
  in_time(w, cv, e.ts, &v.after_start, &before);
  v.in_window = v.after_start && before;
  return v;
}

/* A new begin at depth d: scopes at d or deeper never ended (a longjmp skipped their ends). */
static void close_at_or_below(lp__walk_t *w, uint32_t d, uint64_t ns) {
  while (w->depth > 0 && w->stack[w->depth - 1].depth >= d) {
    w->depth--;
    slice(w, &w->stack[w->depth], lane_time(w, ns), LP__SLICE_UNTERMINATED);
  }
}

static void scope_end(lp__walk_t *w, const lane_event_t *v) {
  size_t k = lp__scope_match(w->stack, w->depth, v->site, v->depth);
  uint64_t ns = lane_ns(w, v->ts);
  if (k == 0) {
    /* Scopes above its depth lost their ends, as when it is matched; then its own begin is made up. */
    close_at_or_below(w, v->depth + 1, ns);
    if (!v->in_window) ns = w->s->stop.ns; /* it enclosed the whole window: shown up to the stop */
    lp__scope_t o = {v->site, w->made_up_base + (v->depth < 255 ? v->depth : 255), v->depth, false, 0};
    w->sink->slice(w->ctx, &o, lane_time(w, ns), LP__SLICE_TRUNCATED);
    return;
  }
  /* Scopes above the match lost their ends: they close here, innermost first. */
  while (w->depth > k) {
    w->depth--;
    slice(w, &w->stack[w->depth], lane_time(w, ns), LP__SLICE_UNTERMINATED);
  }
  w->depth--;
  slice(w, &w->stack[w->depth], lane_time(w, ns), 0);
}

static void scope_begin(lp__walk_t *w, const lane_event_t *v, bool shadow) {
  uint64_t ns = shadow ? w->last : mapped(w, v->ts);
  close_at_or_below(w, v->depth, ns);
  if (!grow_stack(w)) return;
  lp__scope_t *o = &w->stack[w->depth++];
  *o = (lp__scope_t){v->site, ns, v->depth, shadow, 0};
  if (!shadow && w->sink->begin) w->sink->begin(w->ctx, o);
}

/*
 * note_first: at the lane's first event in the window, where made-up begins
 * go (at the window's start, or just before what the ring left).
 * end_written: whether an end is given; *m is its match on the stack (0:
 * none). Not given: an end after the stop whose begin was not given either
 * (before the lane's first event in the window, or a shadow).
 */
static void note_first(lp__walk_t *w, const lp__snap_lane_t *l, const lane_event_t *v) {
  if (w->made_up_base != UINT64_MAX || !v->in_window) return;
  uint64_t first = lane_ns(w, v->ts);
  uint64_t base = l->lost || first < w->s->start.ns ? first : w->s->start.ns;
  w->made_up_base = base > 256 ? base - 256 : 0;
}

static bool end_written(const lp__walk_t *w, const lane_event_t *v, size_t *m) {
  *m = lp__scope_match(w->stack, w->depth, v->site, v->depth);
  return v->in_window || (w->made_up_base != UINT64_MAX && !(*m && w->stack[*m - 1].shadow));
}

static void walk_thread(lp__walk_t *w, const lp__snap_lane_t *l) {
  const lp__sink_t *sink = w->sink;
  w->made_up_base = UINT64_MAX;
  for (uint32_t k = 0; k < l->nchunks; k++) {
    const lp__chunk_t *c = l->chunks[k].chunk;
    uint32_t end = l->chunks[k].end;
    chunk_view_t cv = view_of(w, &l->chunks[k]);
    w->anchor = c->sync;
    w->seg = LP__TIMESEG_NONE;
    for (uint32_t i = 0; i < end; i++) {
      lane_event_t v = decode(w, &cv, c->ev[i]);
      if (v.kind == LP_IMPL_EV_COUNTER) i++;
      if (!v.after_start || (sink->scopes_only && v.kind > LP_IMPL_EV_END)) continue;
      note_first(w, l, &v);
      switch (v.kind) {
      case LP_IMPL_EV_BEGIN:
        /* After the stop, followed (not given) so that its end is not taken for an enclosing scope's. */
        scope_begin(w, &v, !v.in_window);
        w->events += v.in_window;
        break;
      case LP_IMPL_EV_END: {
        size_t m;
        if (!end_written(w, &v, &m)) {
          if (m) scope_end(w, &v); /* a scope begun after the stop: pops its shadow, gives nothing */
          break;
        }
        w->events += v.in_window || m != 0;
        scope_end(w, &v);
        break;
      }
      case LP_IMPL_EV_INSTANT:
        if (!v.in_window) break;
        w->events++;
        sink->instant(w->ctx, v.site, mapped(w, v.ts));
        break;
      case LP_IMPL_EV_COUNTER:
        if (!v.in_window || i >= end) break;
        w->events++;
        sink->counter(w->ctx, v.site, mapped(w, v.ts), (int64_t)c->ev[i].ts);
        break;
      default: /* payload slots */
        break;
      }
    }
  }
  /* Still open: unmatched begins (shadows are not given). */
  for (size_t k = 0; k < w->depth; k++) {
    if (w->stack[k].shadow) continue;
    w->unfinished++;
    if (sink->open) sink->open(w->ctx, &w->stack[k]);
  }
  w->depth = 0;
}

/*
 * Track items keep the caller's times, with one exception: an item that
 * starts exactly when the item recorded before it ended starts one
 * nanosecond later (its end unchanged). Viewers that turn complete events
 * into begin/end pairs (speedscope) order an end and a begin at one time by
 * name and by floating-point sums, so back-to-back work would otherwise be
 * merged or mis-nested.
 */
static void walk_track(lp__walk_t *w, const lp__snap_lane_t *l) {
  uint64_t prev_end = UINT64_MAX;
  for (uint32_t k = 0; k < l->nchunks; k++) {
    const lp__chunk_t *c = l->chunks[k].chunk;
    uint32_t end = l->chunks[k].end;
    chunk_view_t cv = view_of(w, &l->chunks[k]);
    for (uint32_t i = 0; i + 1 < end; i++) {
      lp_impl_event_t e = c->ev[i];
      if ((e.tag & LP_IMPL_EV_KIND) != LP__EV_TRACK) continue;
      uint64_t id = e.tag >> 3, rec_ticks = lp__track_recorded(c->ev[i + 1]);
      uint64_t start = e.ts, dur = c->ev[++i].ts, item_end = start + dur;
      /* An item belongs to the sessions that were recording when it was recorded. */
      bool after, before;
      in_time(w, &cv, rec_ticks, &after, &before);
      if (id >= l->nwork || !after || !before) continue;
      w->events++;
      if (start == prev_end && dur > 0) {
        start++;
        dur--;
      }
      prev_end = item_end;
      w->sink->item(w->ctx, l->work[id], start, dur);
    }
  }
}

void lp__walk_init(lp__walk_t *w, const lp__session_t *s, const lp__timemap_t *map, const lp__sink_t *sink,
                   void *ctx) {
  *w = (lp__walk_t){.s = s, .map = map, .sink = sink, .ctx = ctx};
}

void lp__walk_lane(lp__walk_t *w, const lp__snap_lane_t *l) {
  w->cursor = 0;
  w->last = 0;
  if (l->work)
    walk_track(w, l);
  else
    walk_thread(w, l);
}

bool lp__walk_has_events(const lp__walk_t *w, const lp__snap_lane_t *l) {
  for (uint32_t k = 0; k < l->nchunks; k++) {
    const lp__chunk_t *c = l->chunks[k].chunk;
    chunk_view_t cv = view_of(w, &l->chunks[k]);
    for (uint32_t i = 0; i < l->chunks[k].end; i++) {
      if (l->work) { /* a track: an item recorded in the window */
        if (i + 1 >= l->chunks[k].end || (c->ev[i].tag & LP_IMPL_EV_KIND) != LP__EV_TRACK) continue;
        bool after, before;
        in_time(w, &cv, lp__track_recorded(c->ev[i + 1]), &after, &before);
        if (after && before) return true;
        continue;
      }
      lane_event_t v = decode(w, &cv, c->ev[i]);
      if (v.in_window) return true;
      if (v.kind == LP_IMPL_EV_COUNTER) i++;
    }
  }
  return false;
}

void lp__walk_free(lp__walk_t *w) {
  free(w->stack);
  w->stack = NULL;
  w->depth = w->cap = 0;
}
