/*
 * export_perfetto.c: a session as Perfetto's TrackEvent protobuf
 * (lp_trace_write_perfetto), and the packets the stream's encoder
 * (stream_encode.c) writes alike (perfetto.h).
 *
 * The same lanes, window and pairing as every format (the lane walker,
 * walk.c), written as a Perfetto trace: a Trace message is a run of packets
 * (field 1), so the file is the packets one after the other. Field numbers
 * are those of Perfetto's schema (protos/perfetto/trace).
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
 * lane's slices and points are collected first (the sink) and put in time
 * order: begins by time, the longer first at equal times; an end goes out
 * before anything that starts at or after it. The JSON's args become debug
 * annotations: "truncated" on a made-up begin, "unterminated" on the end of
 * a scope a longjmp skipped, layer, phase and mode on a layered site's
 * begin. Counters go to one counter track per name under the process. What
 * the JSON says in otherData is said by the debug annotations of one
 * instant, "labelprof session", on the process's track, on a sequence of
 * its own.
 */
#include "perfetto.h"
#include "track_lane.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the sink (walk.c calls it): a lane's slices and points, collected ---- */

typedef struct pf_lane {
  lp__pf_rec_t *r;
  size_t n, cap;
  bool nomem;
} pf_lane_t;

static void pf_add(pf_lane_t *p, uint8_t kind, uint8_t flags, const void *key, uint64_t ts, uint64_t end,
                   int64_t value) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 1024;
    lp__pf_rec_t *r = lp__realloc(p->r, cap * sizeof *r);
    if (!r) {
      p->nomem = true;
      return;
    }
    p->r = r;
    p->cap = cap;
  }
  p->r[p->n++] = (lp__pf_rec_t){ts, end, key, value, kind, flags};
}

static void pf_slice(void *ctx, const lp__scope_t *o, uint64_t end, unsigned flags) {
  if (flags & LP__SLICE_TRUNCATED)
    pf_add(ctx, PF_SLICE, PF_TRUNCATED, o->site, o->ns, end > o->ns ? end : o->ns, 0);
  else
    pf_add(ctx, PF_SLICE, flags & LP__SLICE_UNTERMINATED ? PF_UNTERMINATED : 0, o->site, o->ns, end, 0);
}

static void pf_open(void *ctx, const lp__scope_t *o) { pf_add(ctx, PF_SLICE, PF_OPEN, o->site, o->ns, UINT64_MAX, 0); }

static void pf_instant(void *ctx, const lp_site_t *site, uint64_t ns) { pf_add(ctx, PF_INSTANT, 0, site, ns, 0, 0); }

static void pf_counter(void *ctx, const lp_site_t *site, uint64_t ns, int64_t value) {
  pf_add(ctx, PF_COUNTER, 0, site, ns, 0, value);
}

static void pf_item(void *ctx, const char *name, uint64_t start, uint64_t dur) {
  pf_add(ctx, PF_SLICE, PF_WORK, name, start, start + dur, 0);
}

static const lp__sink_t pf_sink = {NULL, pf_slice, pf_open, pf_instant, pf_counter, pf_item, false};

static int pf_cmp(const void *a, const void *b) {
  const lp__pf_rec_t *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  if (x->kind != y->kind) return x->kind == PF_SLICE ? -1 : y->kind == PF_SLICE ? 1 : 0;
  if (x->kind == PF_SLICE && x->end != y->end) return x->end > y->end ? -1 : 1; /* the enclosing one first */
  return x < y ? -1 : x > y; /* recording order otherwise: the sort is then stable */
}

/* ---- packets ---- */

/* The iid of key on the sequence; 0 when new (*iid is then the one to intern it under). */
static uint64_t pf_name_iid(lp__pf_seq_t *q, const void *key, uint64_t *fresh) {
  uint32_t at = lp__pf_find(q, key);
  if (at != UINT32_MAX) return q->iids[at];
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
      uint32_t h = lp__ptr_home(q->keys[i], mask);
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
  uint32_t h = lp__ptr_home(key, q->kmask);
  while (q->keys[h]) h = (h + 1) & q->kmask;
  q->keys[h] = key;
  q->iids[h] = *fresh = ++q->nkeys;
  return 0;
}


/* The category's iid on the sequence, 1-based; *fresh set when it is new. */
static uint64_t pf_cat_iid(lp__pf_seq_t *q, const char *cat, bool *fresh) {
  for (uint32_t i = 0; i < q->ncats; i++)
    if (strcmp(q->cats[i], cat) == 0) {
      *fresh = false;
      return i + 1;
    }
  *fresh = true;
  if (q->ncats == q->capcats) {
    uint32_t cap = q->capcats ? q->capcats * 2 : 16;
    const char **c = lp__realloc(q->cats, cap * sizeof *c);
    if (!c) {
      q->nomem = true;
      return 0;
    }
    q->cats = c;
    q->capcats = cap;
  }
  q->cats[q->ncats++] = cat;
  return q->ncats;
}

void lp__pf_seq_reset(lp__pf_seq_t *q, uint32_t id, uint64_t base) {
  free(q->keys);
  free(q->iids);
  free(q->cat_of);
  q->keys = NULL;
  q->iids = NULL;
  q->cat_of = NULL;
  free(q->cats);
  q->cats = NULL;
  q->kmask = q->nkeys = q->ncats = q->capcats = 0;
  q->id = id;
  q->last = base;
}

uint64_t lp__pf_uuid(uint64_t pid, uint64_t what) {
  uint64_t z = pid * 0x9e3779b97f4a7c15u + what + 0x6c6162656c70726full; /* splitmix64 */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return (z ^ (z >> 31)) | 1; /* never 0 */
}

void lp__pf_annotation_str(lp__pb_t *pb, const char *name, const char *value) {
  size_t m = lp__pb_begin(pb, TE_DEBUG);
  lp__pb_str(pb, DA_NAME, name);
  lp__pb_str(pb, DA_STRING, value);
  lp__pb_end(pb, m);
}

void lp__pf_annotation_uint(lp__pb_t *pb, const char *name, uint32_t field, uint64_t value) {
  size_t m = lp__pb_begin(pb, TE_DEBUG);
  lp__pb_str(pb, DA_NAME, name);
  lp__pb_varint(pb, field, value);
  lp__pb_end(pb, m);
}

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

void lp__pf_seq_start(lp__pf_seq_t *q, uint64_t track_uuid, int64_t boot_offset) {
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

/*
 * A REALTIME reading as a ClockSnapshot of its own: CLOCK_REALTIME (Perfetto's
 * BUILTIN_CLOCK_REALTIME) beside the trace's clock, CLOCK_MONOTONIC, and
 * BOOTTIME, at the reading's instant. What lines the file up with other
 * machines' (labelprof merge; Perfetto's own readers take it too). Its
 * uncertainty is in the notes.
 */
void lp__pf_wall_clock(lp__pb_t *pb, uint32_t seq, const lp__wall_t *wall, int64_t boot_offset) {
  if (!wall->real_ns) return;
  size_t p = lp__pb_begin(pb, TRACE_PACKET);
  lp__pb_varint(pb, TP_SEQ_ID, seq);
  size_t cs = lp__pb_begin(pb, TP_CLOCK_SNAPSHOT);
  pf_clocks_system(pb, wall->mono_ns, boot_offset);
  size_t c = lp__pb_begin(pb, CS_CLOCKS);
  lp__pb_varint(pb, CLK_ID, CLOCK_REALTIME_ID);
  lp__pb_varint(pb, CLK_TS, wall->real_ns);
  lp__pb_end(pb, c);
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

/*
 * The common packets at once: a plain end, or a begin or instant whose name
 * and single category are interned already and that has no annotations.
 * Every length then fits in one byte. False: not one of those.
 */
static bool pf_event_fast(lp__pf_seq_t *q, const lp__pf_rec_t *r, uint32_t type, uint64_t ts, bool end) {
  uint64_t name_iid = 0, cat_iid = 0;
  if (ts < q->last || (r->flags & PF_ABSOLUTE)) return false;
  if (end) {
    if (r->flags & PF_UNTERMINATED) return false;
  } else {
    if (type == TYPE_COUNTER || (r->flags & PF_TRUNCATED)) return false;
    uint32_t h = lp__pf_find(q, r->key);
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
  o[0] = TRACE_PACKET_TAG;
  o[1] = (uint8_t)(n - 2);
  pb->len += n;
  q->last = ts;
  return true;
}

/* One event packet. */
void lp__pf_event(lp__pf_seq_t *q, const lp__pf_rec_t *r, uint32_t type, uint64_t ts, uint64_t counter_uuid,
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
      cats[0] = lp__site_category(site); /* as the JSON's "cat": a made name's domain, or the level */
    }
    for (int k = 0; k < 2 && cats[k]; k++) {
      cat_iid[k] = pf_cat_iid(q, cats[k], &fresh_cat[k]);
      if (cat_iid[k]) lp__pb_varint(pb, TE_CATEGORY_IIDS, cat_iid[k]);
    }
    if (name_iid) lp__pb_varint(pb, TE_NAME_IID, name_iid);
    /* One category and no annotations: later events of the key take the fast path. */
    if (!cats[1] && cat_iid[0] && (!site || !lp__site_has_layer(site))) {
      uint32_t h = lp__pf_find(q, r->key);
      if (h != UINT32_MAX) q->cat_of[h] = cat_iid[0];
    }
  }
  if (type == TYPE_COUNTER) {
    lp__pb_varint(pb, TE_TRACK_UUID, counter_uuid);
    lp__pb_varint(pb, TE_COUNTER_VALUE, (uint64_t)r->value);
  }
  if (type == TYPE_SLICE_BEGIN && (r->flags & PF_TRUNCATED)) lp__pf_annotation_uint(pb, "truncated", DA_BOOL, 1);
  if (end && (r->flags & PF_UNTERMINATED)) lp__pf_annotation_str(pb, "unterminated", "ended by an enclosing scope");
  if (!end && site && type != TYPE_COUNTER && lp__site_has_layer(site)) {
    lp__pf_annotation_str(pb, "layer", lp_layer_name(site->layer));
    lp__pf_annotation_str(pb, "phase", lp_phase_name(site->phase));
    if (site->mode == LP_MODE_SWITCH) lp__pf_annotation_str(pb, "mode", "switch");
    if (site->mode == LP_MODE_SUBTRACT) lp__pf_annotation_str(pb, "mode", "subtract");
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

static const char *pf_name_of(const lp__pf_rec_t *r) {
  return r->flags & PF_WORK ? (const char *)r->key : lp__label((const lp_site_t *)r->key);
}

/*
 * The counter track of a site: one per counter name, as the JSON's counters
 * of one name are one series (Perfetto keeps counter tracks of one name
 * apart), described on the name's first use. A site is looked up by address
 * first; a site of a name already described is then remembered under it.
 */
uint64_t lp__pf_counter_track(lp__pf_export_t *x, const lp_site_t *site) {
  lp__pf_counters_t *c = &x->counters;
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
    uuid = lp__pf_uuid(x->pid, (h << 1) | 1);
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
void lp__pf_lane_descriptor(lp__pf_export_t *x, uint32_t seq, uint64_t uuid, bool track, const char *name,
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
static void pf_write_lane(lp__pf_export_t *x, pf_lane_t *pl, const lp__session_t *s, const lp__snap_lane_t *l,
                          uint32_t seq, uint64_t uuid) {
  /* Scopes that never nest are collected in order already (pf_cmp is a total order: nothing to sort then). */
  size_t k = 1;
  while (k < pl->n && pf_cmp(&pl->r[k - 1], &pl->r[k]) < 0) k++;
  if (k < pl->n) qsort(pl->r, pl->n, sizeof *pl->r, pf_cmp);
  uint64_t base = pl->n ? pl->r[0].ts : s->start.ns;
  lp__pf_seq_reset(&x->q, seq, base);
  lp__pf_seq_start(&x->q, uuid, x->boot_offset);
  lp__pf_lane_descriptor(x, seq, uuid, l->work != NULL, l->name, l->tid);
  /* The open slices, innermost last; an end goes out before anything at or after it. */
  const lp__pf_rec_t **open = NULL;
  size_t nopen = 0, capopen = 0;
  for (size_t i = 0; i <= pl->n && !x->q.nomem && !x->pb.err; i++) {
    const lp__pf_rec_t *r = i < pl->n ? &pl->r[i] : NULL;
    while (nopen > 0 && (!r || open[nopen - 1]->end <= r->ts)) {
      const lp__pf_rec_t *o = open[--nopen];
      if (!(o->flags & PF_OPEN)) lp__pf_event(&x->q, o, TYPE_SLICE_END, o->end, 0, NULL, true);
    }
    if (!r) break;
    if (r->kind == PF_SLICE) {
      lp__pf_event(&x->q, r, TYPE_SLICE_BEGIN, r->ts, 0, pf_name_of(r), false);
      if (nopen == capopen) {
        size_t cap = capopen ? capopen * 2 : 64;
        const lp__pf_rec_t **no = lp__realloc(open, cap * sizeof *no);
        if (!no) {
          x->q.nomem = true;
          break;
        }
        open = no;
        capopen = cap;
      }
      open[nopen++] = r;
    } else if (r->kind == PF_INSTANT) {
      lp__pf_event(&x->q, r, TYPE_INSTANT, r->ts, 0, pf_name_of(r), false);
    } else {
      uint64_t cu = lp__pf_counter_track(x, r->key);
      lp__pf_event(&x->q, r, TYPE_COUNTER, r->ts, cu, NULL, false);
    }
    if (x->pb.len > 512 * 1024) lp__pb_flush(&x->pb, x->w); /* more than json.c buffers: written straight through */
  }
  free(open);
  lp__pb_flush(&x->pb, x->w);
  pl->n = 0;
}

void lp__pf_session_note(lp__pf_export_t *x, uint32_t seq, const lp__notes_t *n) {
  lp__pf_wall_clock(&x->pb, seq, &n->wall_end, x->boot_offset);
  pf_notes_clock(&x->pb, seq, n->at_ns, x->boot_offset);
  size_t p = lp__pb_begin(&x->pb, TRACE_PACKET);
  lp__pb_varint(&x->pb, TP_TIMESTAMP, n->at_ns);
  lp__pb_varint(&x->pb, TP_CLOCK_ID, CLOCK_MONOTONIC_ID);
  size_t te = lp__pb_begin(&x->pb, TP_TRACK_EVENT);
  lp__pb_varint(&x->pb, TE_TYPE, TYPE_INSTANT);
  lp__pb_varint(&x->pb, TE_TRACK_UUID, x->process_uuid);
  lp__note_t items[LP__NOTES_MAX];
  char levels[64];
  size_t nitems = lp__notes_items(n, items, levels);
  for (size_t i = 0; i < nitems; i++) {
    const lp__note_t *it = &items[i];
    if (it->kind == LP__NOTE_STR)
      lp__pf_annotation_str(&x->pb, it->key, it->str);
    else
      lp__pf_annotation_uint(&x->pb, it->key,
                             it->kind == LP__NOTE_BOOL  ? DA_BOOL
                             : it->kind == LP__NOTE_INT ? DA_INT
                                                        : DA_UINT,
                             it->u);
  }
  lp__pb_str(&x->pb, TE_NAME, "labelprof session"); /* a one-off, not interned */
  lp__pb_end(&x->pb, te);
  lp__pb_varint(&x->pb, TP_SEQ_ID, seq);
  lp__pb_end(&x->pb, p);
}

void lp__pf_process(lp__pf_export_t *x, uint32_t seq, uint32_t flags, const char *name) {
  size_t p, td = pf_descriptor_begin(&x->pb, seq, flags, &p);
  lp__pb_varint(&x->pb, TD_UUID, x->process_uuid);
  size_t pd = lp__pb_begin(&x->pb, TD_PROCESS);
  lp__pb_varint(&x->pb, PD_PID, x->pid);
  lp__pb_str(&x->pb, PD_NAME, name ? name : program_invocation_short_name);
  lp__pb_end(&x->pb, pd);
  lp__pb_varint(&x->pb, TD_CHILD_ORDERING, 3); /* EXPLICIT: lanes in the JSON's order */
  lp__pb_end(&x->pb, td);
  lp__pb_end(&x->pb, p);
}

int lp__export_perfetto(lp__jw_t *w, const lp__session_t *s, const char *process_name, char *jump,
                        size_t jump_len) {
  lp__timemap_t *map = lp__timemap_new(s->syncs, s->nsyncs);
  if (!map) return -ENOMEM;
  pf_lane_t pl = {NULL, 0, 0, false};
  lp__pf_export_t x = {.w = w, .pid = lp__export_pid(), .boot_offset = lp__export_boot_offset()};
  x.q.pb = &x.pb;
  x.process_uuid = lp__pf_uuid(x.pid, 0);
  uint32_t pseq = s->nlanes + 1; /* the process's own sequence: its descriptor and the session's notes */
  lp__pf_process(&x, pseq, SEQ_CLEARED, process_name);
  lp__pf_wall_clock(&x.pb, pseq, &s->wall_start, x.boot_offset);
  lp__pb_flush(&x.pb, w);

  lp__walk_t lw;
  lp__walk_init(&lw, s, map, &pf_sink, &pl);
  for (uint32_t i = 0; i < s->nlanes && !w->err && !lw.nomem && !pl.nomem && !x.q.nomem && !x.pb.err; i++) {
    const lp__snap_lane_t *l = &s->lanes[i];
    if (!lp__walk_has_events(&lw, l)) continue;
    lp__walk_lane(&lw, l);
    if (!lw.nomem && !pl.nomem) pf_write_lane(&x, &pl, s, l, i + 1, lp__pf_uuid(x.pid, (uint64_t)i + 2));
  }

  /* The session's notes, at its stop (a session still running: when it was taken). */
  lp__notes_t n = lp__session_notes(s, map, &lw);
  lp__pf_session_note(&x, pseq, &n);
  lp__jump_sentence(map, jump, jump_len);
  lp__pb_flush(&x.pb, w);

  int rc = x.pb.err ? x.pb.err : (lw.nomem || pl.nomem || x.q.nomem) ? -ENOMEM : 0;
  lp__pf_seq_reset(&x.q, 0, 0);
  lp__pb_free(&x.pb);
  free(x.counters.keys);
  free(x.counters.uuids);
  free(pl.r);
  lp__walk_free(&lw);
  lp__timemap_free(map);
  return rc ? rc : w->err;
}

