/*
 * export.c: a session as Chrome Trace Event JSON.
 *
 * The object form: {"traceEvents":[...],"displayTimeUnit":"ns","otherData":
 * {...}}. A process_name metadata event, then for each lane with events a
 * thread_name and a thread_sort_index, then its events.
 *
 * A lane's events are read in recording order. Ticks become CLOCK_MONOTONIC
 * nanoseconds through the session's sync points, and each lane's times are
 * kept strictly increasing (a repeated or backward time moves to one
 * nanosecond after the previous one): then no two events of a lane share a
 * time, and a viewer's nesting never depends on file order. A begin is held
 * on a stack until its end arrives and the pair is written as one complete
 * event ("X"). An end whose begin is deeper in the stack closes the scopes
 * above it too, as a longjmp skipped their ends (they get
 * "args":{"unterminated":...}). An end with no begin is written as "E"; a
 * begin still open at the end of the lane as "B". Track lanes carry the
 * caller's own times and are written as they were recorded.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  default:
    return "labelprof";
  }
}

typedef struct open_scope {
  const lp_site_t *site;
  uint64_t ns;
} open_scope_t;

/* `"cat":"runtime","name":"kernel"`, escaped once per site (or track work name) and export. */
typedef struct fragment {
  const void *key;
  char *text;
  size_t len;
} fragment_t;

typedef struct lane_writer {
  lp__jw_t *w;
  const lp__timemap_t *map;
  lp__sync_t anchor; /* the sync point of the chunk being written */
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

static fragment_t build_fragment(const void *key, const char *cat, const char *name) {
  fragment_t f = {key, malloc(6 * strlen(name) + strlen(cat) + 24), 0};
  if (!f.text) return f;
  char *o = f.text;
  memcpy(o, "\"cat\":\"", 7);
  o += 7;
  memcpy(o, cat, strlen(cat));
  o += strlen(cat);
  memcpy(o, "\",\"name\":", 9);
  o = lp__json_escape(o + 9, name);
  f.len = (size_t)(o - f.text);
  return f;
}

/* The fragment for key, built on first use; NULL when out of memory. */
static const fragment_t *fragment(lane_writer_t *lw, const void *key, const char *cat, const char *name) {
  if (lw->frags) {
    uint32_t h = (uint32_t)(((uintptr_t)key >> 3) * 0x9e3779b1u) & lw->fmask;
    for (;; h = (h + 1) & lw->fmask) {
      if (!lw->frags[h].key) break;
      if (lw->frags[h].key == key) return &lw->frags[h];
    }
  }
  if (!lw->frags || (lw->nfrags + 1) * 2 > lw->fmask + 1) {
    uint32_t mask = lw->frags ? lw->fmask * 2 + 1 : 255;
    fragment_t *nf = calloc((size_t)mask + 1, sizeof *nf);
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
  fragment_t f = build_fragment(key, cat, name);
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

static uint64_t mapped(lane_writer_t *lw, uint64_t ticks) {
  return lane_time(lw, lp__timemap_ns(lw->map, ticks, lw->anchor, &lw->cursor));
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
    lp__jw_us(w, ts);
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
  o = lp__jw_put_us(o + lw->idslen, ts);
  if (dur) {
    memcpy(o, ",\"dur\":", 7);
    o = lp__jw_put_us(o + 7, *dur);
  }
  memcpy(o, tail, tl);
  o += tl;
  *o++ = '}';
  w->len = (size_t)(o - w->buf);
}

static const fragment_t *site_fragment(lane_writer_t *lw, const lp_site_t *site) {
  return fragment(lw, site, level_name(site->level), site->label);
}

static void complete(lane_writer_t *lw, const open_scope_t *o, uint64_t end, bool unterminated) {
  uint64_t dur = end - o->ns;
  event(lw, 'X', site_fragment(lw, o->site), o->ns, &dur,
        unterminated ? ",\"args\":{\"unterminated\":\"ended by an enclosing scope\"}" : "");
}

static void scope_end(lane_writer_t *lw, const lp_site_t *site, uint64_t ticks) {
  size_t k = lw->depth;
  while (k > 0 && lw->stack[k - 1].site != site) k--;
  if (k == 0) { /* its begin is not in this session (or was overwritten) */
    event(lw, 'E', site_fragment(lw, site), mapped(lw, ticks), NULL, "");
    return;
  }
  uint64_t ns = lp__timemap_ns(lw->map, ticks, lw->anchor, &lw->cursor);
  /* Scopes above the match lost their ends: they close here, innermost first. */
  while (lw->depth > k) {
    lw->depth--;
    complete(lw, &lw->stack[lw->depth], lane_time(lw, ns), true);
  }
  lw->depth--;
  complete(lw, &lw->stack[lw->depth], lane_time(lw, ns), false);
}

static void scope_begin(lane_writer_t *lw, const lp_site_t *site, uint64_t ticks) {
  if (lw->depth == lw->cap) {
    size_t cap = lw->cap ? lw->cap * 2 : 64;
    open_scope_t *s = realloc(lw->stack, cap * sizeof *s);
    if (!s) {
      lw->nomem = true;
      return;
    }
    lw->stack = s;
    lw->cap = cap;
  }
  lw->stack[lw->depth++] = (open_scope_t){site, mapped(lw, ticks)};
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

static void write_thread_lane(lane_writer_t *lw, const lp__snap_lane_t *l) {
  char value[48];
  for (uint32_t k = 0; k < l->nchunks; k++) {
    const lp__chunk_t *c = l->chunks[k].chunk;
    uint32_t end = l->chunks[k].end;
    lw->anchor = c->sync;
    for (uint32_t i = l->chunks[k].begin; i < end; i++) {
      lp_impl_event_t e = c->ev[i];
      const lp_site_t *site = (const lp_site_t *)(e.tag & ~(uintptr_t)LP_IMPL_EV_KIND);
      switch (e.tag & LP_IMPL_EV_KIND) {
      case LP_IMPL_EV_BEGIN:
        scope_begin(lw, site, e.ts);
        break;
      case LP_IMPL_EV_END:
        scope_end(lw, site, e.ts);
        break;
      case LP_IMPL_EV_INSTANT:
        event(lw, 'i', site_fragment(lw, site), mapped(lw, e.ts), NULL, ",\"s\":\"t\"");
        break;
      case LP_IMPL_EV_COUNTER:
        if (i + 1 >= end) break; /* cannot happen: both slots are published together */
        snprintf(value, sizeof value, ",\"args\":{\"value\":%lld}", (long long)(int64_t)c->ev[i + 1].ts);
        event(lw, 'C', site_fragment(lw, site), mapped(lw, e.ts), NULL, value);
        i++;
        break;
      default: /* payload slots */
        break;
      }
    }
  }
  /* Still open: unmatched begins. */
  for (size_t k = 0; k < lw->depth; k++) event(lw, 'B', site_fragment(lw, lw->stack[k].site), lw->stack[k].ns, NULL, "");
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
    for (uint32_t i = l->chunks[k].begin; i + 1 < end; i++) {
      lp_impl_event_t e = c->ev[i];
      if ((e.tag & LP_IMPL_EV_KIND) != LP__EV_TRACK) continue;
      const char *name = l->work[e.tag >> 3];
      uint64_t start = e.ts, dur = c->ev[++i].ts, item_end = start + dur;
      if (start == prev_end && dur > 0) {
        start++;
        dur--;
      }
      prev_end = item_end;
      event(lw, 'X', fragment(lw, name, "track", name), start, &dur, "");
    }
  }
}

static void levels_text(lp__jw_t *w, uint32_t levels) {
  static const uint32_t bits[] = {LP_LEVEL_REQUEST, LP_LEVEL_RUNTIME, LP_LEVEL_OPERATOR, LP_LEVEL_DEBUG};
  char buf[64] = "";
  for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
    if (levels & bits[i]) {
      if (buf[0]) strcat(buf, ",");
      strcat(buf, level_name(bits[i]));
    }
  lp__jw_str(w, buf);
}

int lp__export_json(lp__jw_t *w, const lp__session_t *s, const char *process_name) {
  lp__timemap_t *map = lp__timemap_new(s->syncs, s->nsyncs);
  if (!map) return -ENOMEM;
  int pid = (int)getpid();
  lp__jw_lit(w, "{\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
  lp__jw_i64(w, pid);
  lp__jw_lit(w, ",\"args\":{\"name\":");
  lp__jw_str(w, process_name ? process_name : program_invocation_short_name);
  lp__jw_lit(w, "}}");

  lane_writer_t lw = {.w = w, .map = map};
  for (uint32_t i = 0; i < s->nlanes && !w->err; i++) {
    const lp__snap_lane_t *l = &s->lanes[i];
    metadata(w, pid, l->tid, l->name, i);
    lw.idslen = (size_t)snprintf(lw.ids, sizeof lw.ids, ",\"pid\":%d,\"tid\":%llu,\"ts\":", pid,
                                 (unsigned long long)l->tid);
    lw.cursor = 0;
    lw.last = 0;
    if (l->work)
      write_track_lane(&lw, l);
    else
      write_thread_lane(&lw, l);
  }
  free(lw.stack);
  free_fragments(&lw);
  lp__timemap_free(map);

  lp__jw_lit(w, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"library\":\"labelprof " LABELPROF_VERSION_STRING
                "\",\"clock\":");
  lp__jw_str(w, lp__clock_name());
  lp__jw_lit(w, ",\"clock_domain\":\"CLOCK_MONOTONIC\",\"events_recorded\":");
  lp__jw_u64(w, s->recorded);
  lp__jw_lit(w, ",\"events_dropped\":");
  lp__jw_u64(w, s->dropped);
  lp__jw_lit(w, ",\"budget_bytes\":");
  lp__jw_u64(w, s->opts.budget_bytes);
  lp__jw_lit(w, ",\"policy\":");
  lp__jw_str(w, s->opts.policy == LP_TRACE_RING ? "ring" : "discard");
  lp__jw_lit(w, ",\"levels\":");
  levels_text(w, s->opts.levels);
  lp__jw_lit(w, "}}\n");
  if (lw.nomem && !w->err) return -ENOMEM;
  return w->err;
}
