/*
 * export_json.c: a session as Chrome Trace Event JSON.
 *
 * The object form: {"labelprof_scope_order":"ends","traceEvents":[...],
 * "displayTimeUnit":"ns","otherData":{...}}. A process_name metadata event,
 * then for each lane with events a thread_name and a thread_sort_index, then
 * its events. The first key tells labelprof's reader, before any event, that
 * scopes come at their ends (below), not in order of their starts: it reads
 * such a file's lanes buffered from the start, in one pass and without a
 * note; other readers ignore an unknown key.
 *
 * The lanes are read by the lane walker (walk.c), which hands this file's
 * sink what to write: a scope's slice, when it ends, is one complete event
 * ("X"), with "args":{"unterminated":...} for a scope a longjmp skipped and
 * "args":{"truncated":true} for a begin made up at the lane's start; a
 * begin still open at the end of the lane is written as "B"; instants,
 * counters and track items as they come. Each event is assembled in place
 * from a fragment escaped once per site ("cat" and "name").
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `"cat":"runtime","name":"kernel"`, escaped once per site (or track work name) and export. */
typedef struct fragment {
  const void *key;
  char *text;
  size_t len;
  const char *args; /* a layered site's args members: "layer":"runtime","phase":"execution"; else "" */
} fragment_t;

/* The JSON sink: where events go, and what every event of the lane repeats. */
typedef struct json {
  lp__jw_t *w;
  uint64_t ts_base; /* "ts" is written relative to this CLOCK_MONOTONIC time (see ts_base_of) */
  char ids[64];     /* ,"pid":P,"tid":T,"ts": */
  size_t idslen;
  fragment_t *frags;
  uint32_t nfrags, fmask;
  bool nomem;
} json_t;

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
static const fragment_t *fragment(json_t *j, const void *key, const char *cat, const char *name, const char *args) {
  if (j->frags) {
    uint32_t h = lp__ptr_home(key, j->fmask);
    for (;; h = (h + 1) & j->fmask) {
      if (!j->frags[h].key) break;
      if (j->frags[h].key == key) return &j->frags[h];
    }
  }
  if (!j->frags || (j->nfrags + 1) * 2 > j->fmask + 1) {
    uint32_t mask = j->frags ? j->fmask * 2 + 1 : 255;
    fragment_t *nf = lp__calloc((size_t)mask + 1, sizeof *nf);
    if (!nf) return NULL;
    for (uint32_t i = 0; j->frags && i <= j->fmask; i++) {
      if (!j->frags[i].key) continue;
      uint32_t h = lp__ptr_home(j->frags[i].key, mask);
      while (nf[h].key) h = (h + 1) & mask;
      nf[h] = j->frags[i];
    }
    free(j->frags);
    j->frags = nf;
    j->fmask = mask;
  }
  fragment_t f = build_fragment(key, cat, name, args);
  if (!f.text) return NULL;
  uint32_t h = lp__ptr_home(key, j->fmask);
  while (j->frags[h].key) h = (h + 1) & j->fmask;
  j->frags[h] = f;
  j->nfrags++;
  return &j->frags[h];
}

static void free_fragments(json_t *j) {
  for (uint32_t i = 0; j->frags && i <= j->fmask; i++) free(j->frags[i].text);
  free(j->frags);
}

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
static void event(json_t *j, char ph, const fragment_t *f, uint64_t ts, const uint64_t *dur, const char *tail) {
  lp__jw_t *w = j->w;
  if (!f) {
    j->nomem = true;
    return;
  }
  size_t tl = strlen(tail);
  char *o = lp__jw_reserve(w, f->len + j->idslen + tl + 80);
  if (!o) { /* an error, or a label too long for the buffer: piece by piece */
    char head[] = ",\n{\"ph\":\"X\",";
    head[9] = ph;
    lp__jw_raw(w, head, sizeof head - 1);
    lp__jw_raw(w, f->text, f->len);
    lp__jw_raw(w, j->ids, j->idslen);
    char t[32];
    lp__jw_raw(w, t, (size_t)(put_ts(t, ts, j->ts_base) - t));
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
  memcpy(o, j->ids, j->idslen);
  o = put_ts(o + j->idslen, ts, j->ts_base);
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
static const fragment_t *site_fragment(json_t *j, const lp_site_t *site) {
  if (!lp__site_has_layer(site)) return fragment(j, site, lp__site_category(site), lp__label(site), "");
  const char *layer = lp_layer_name(site->layer), *phase = lp_phase_name(site->phase);
  char cat[64], args[128];
  snprintf(cat, sizeof cat, "%s,%s", layer, phase);
  snprintf(args, sizeof args, "\"layer\":\"%s\",\"phase\":\"%s\"%s", layer, phase,
           site->mode == LP_MODE_SWITCH     ? ",\"mode\":\"switch\""
           : site->mode == LP_MODE_SUBTRACT ? ",\"mode\":\"subtract\""
                                            : "");
  return fragment(j, site, cat, lp__label(site), args);
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


/* ---- the sink (walk.c calls it) ---- */

static void json_slice(void *ctx, const lp__scope_t *o, uint64_t end, unsigned flags) {
  json_t *j = ctx;
  uint64_t dur = end > o->ns ? end - o->ns : 0;
  char tail[256];
  const fragment_t *f = site_fragment(j, o->site);
  const char *extra = flags & LP__SLICE_TRUNCATED      ? "\"truncated\":true"
                      : flags & LP__SLICE_UNTERMINATED ? "\"unterminated\":\"ended by an enclosing scope\""
                                                       : NULL;
  event(j, 'X', f, o->ns, &dur, args_tail(tail, sizeof tail, f, extra));
}

static void json_open(void *ctx, const lp__scope_t *o) {
  json_t *j = ctx;
  char tail[256];
  const fragment_t *f = site_fragment(j, o->site);
  if (f)
    event(j, 'B', f, o->ns, NULL, args_tail(tail, sizeof tail, f, NULL));
  else
    j->nomem = true;
}

static void json_instant(void *ctx, const lp_site_t *site, uint64_t ns) {
  json_t *j = ctx;
  event(j, 'i', site_fragment(j, site), ns, NULL, ",\"s\":\"t\"");
}

static void json_counter(void *ctx, const lp_site_t *site, uint64_t ns, int64_t value) {
  json_t *j = ctx;
  char tail[48];
  snprintf(tail, sizeof tail, ",\"args\":{\"value\":%lld}", (long long)value);
  event(j, 'C', site_fragment(j, site), ns, NULL, tail);
}

static void json_item(void *ctx, const char *name, uint64_t start, uint64_t dur) {
  json_t *j = ctx;
  event(j, 'X', fragment(j, name, "track", name, ""), start, &dur, "");
}

static const lp__sink_t json_sink = {NULL, json_slice, json_open, json_instant, json_counter, json_item, false};

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

int lp__export_json(lp__jw_t *w, const lp__session_t *s, const char *process_name, char *jump, size_t jump_len) {
  lp__timemap_t *map = lp__timemap_new(s->syncs, s->nsyncs);
  if (!map) return -ENOMEM;
  int pid = (int)lp__export_pid();
  /* Said before the events, so that labelprof reads a lane written at its ends in one pass (tools/agg.c). */
  lp__jw_lit(w, "{\"labelprof_scope_order\":\"ends\",\"traceEvents\":[\n"
                "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
  lp__jw_i64(w, pid);
  lp__jw_lit(w, ",\"args\":{\"name\":");
  lp__jw_str(w, process_name ? process_name : program_invocation_short_name);
  lp__jw_lit(w, "}}");

  json_t j = {.w = w, .ts_base = ts_base_of(s)};
  lp__walk_t lw;
  lp__walk_init(&lw, s, map, &json_sink, &j);
  uint32_t written = 0;
  for (uint32_t i = 0; i < s->nlanes && !w->err; i++) {
    const lp__snap_lane_t *l = &s->lanes[i];
    if (!lp__walk_has_events(&lw, l)) continue;
    metadata(w, pid, l->tid, l->name, written++);
    j.idslen = (size_t)snprintf(j.ids, sizeof j.ids, ",\"pid\":%d,\"tid\":%llu,\"ts\":", pid,
                                (unsigned long long)l->tid);
    lp__walk_lane(&lw, l);
  }
  lp__walk_free(&lw);
  free_fragments(&j);

  /* The session's notes (the same as a Perfetto file's); CLOCK_MONOTONIC times as exact strings of digits. */
  lp__notes_t n = lp__session_notes(s, map, &lw);
  n.has_ts_base = true;
  n.ts_base_ns = j.ts_base;
  lp__jump_sentence(map, jump, jump_len);
  lp__note_t items[LP__NOTES_MAX];
  char levels[64];
  size_t nitems = lp__notes_items(&n, items, levels);
  lp__jw_lit(w, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{");
  for (size_t i = 0; i < nitems; i++) {
    const lp__note_t *it = &items[i];
    if (i) lp__jw_lit(w, ",");
    lp__jw_str(w, it->key);
    lp__jw_lit(w, ":");
    if (it->kind == LP__NOTE_STR) {
      lp__jw_str(w, it->str);
    } else if (it->kind == LP__NOTE_BOOL) {
      if (it->u)
        lp__jw_lit(w, "true");
      else
        lp__jw_lit(w, "false");
    } else if (it->kind == LP__NOTE_NS || it->kind == LP__NOTE_INT) {
      bool neg = it->kind == LP__NOTE_INT && (int64_t)it->u < 0;
      if (neg)
        lp__jw_lit(w, "\"-");
      else
        lp__jw_lit(w, "\"");
      lp__jw_u64(w, neg ? 0 - it->u : it->u);
      lp__jw_lit(w, "\"");
    } else {
      lp__jw_u64(w, it->u);
    }
  }
  lp__jw_lit(w, "}}\n");
  lp__timemap_free(map);
  if ((lw.nomem || j.nomem) && !w->err) return -ENOMEM;
  return w->err;
}
