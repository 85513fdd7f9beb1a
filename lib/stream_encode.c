/*
 * stream_encode.c: the Perfetto stream's encoder (LP_TRACE_STREAM): chunks
 * encoded as they fill, for the stream's writer (stream.c).
 *
 * The same packets as a file written at the end (export_perfetto.c, whose
 * packet writers it shares through perfetto.h), but written chunk by chunk,
 * in recording order: a begin is a SLICE_BEGIN when it is read, an end the
 * SLICE_END of the open scope it matches (the scopes above it, and those at or below a new
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
#include "perfetto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  lp__pf_seq_t q;
  uint32_t seq;
  uint64_t uuid, file; /* the file its sequence was started in (0: none yet) */
  uint64_t prev_end;   /* a track's: the end of the item given before (UINT64_MAX: none) */
  lp__scope_t *stack;
  size_t depth, cap;
  pfs_tail_t end;          /* an end's */
  pfs_tail_t *fast;         /* the begins of sites interned in this file: open addressing, at most half full */
  uint32_t fmask, nfast;    /* fast's slots - 1 (0 with no table: the one empty slot pfs_no_tails), sites in it */
};

static void pfs_tails_clear(lp__pfs_lane_t *l);

struct lp__pfs {
  lp__pf_export_t x;
  uint64_t file;   /* files started */
  uint32_t nseq;   /* sequences given out */
  uint64_t events; /* events written to the current file */
  uint64_t open;   /* scopes begun in the current file and not ended (begins less ends written in it) */
  uint64_t jumps;  /* clock jumps the batches' maps found while it was current, and a description */
  char jump[200];
};

lp__pfs_t *lp__pfs_new(void) {
  lp__pfs_t *f = lp__calloc(1, sizeof *f);
  if (!f) return NULL;
  f->x.pid = lp__export_pid();
  f->x.process_uuid = lp__pf_uuid(f->x.pid, 0);
  f->x.boot_offset = lp__export_boot_offset();
  f->x.q.pb = &f->x.pb;
  f->nseq = 1; /* 1 is the process's own */
  return f;
}

void lp__pfs_restart(lp__pfs_t *f, const char *process_name) {
  lp__pf_export_t *x = &f->x;
  f->file++;
  f->events = 0;
  f->open = 0;
  f->jumps = 0;
  /* Read again for each file: a machine suspended since the last one moved BOOTTIME away from MONOTONIC. */
  x->boot_offset = lp__export_boot_offset();
  x->counters.n = 0; /* counter tracks are described again in each file */
  x->rank = 0;
  lp__pf_process(x, 1, SEQ_CLEARED, process_name);
}

void lp__pfs_lane_free(lp__pfs_lane_t *l) {
  if (!l) return;
  lp__pf_seq_reset(&l->q, 0, 0);
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
  lp__pf_export_t *x = &f->x;
  lp__pf_seq_reset(&l->q, l->seq, ts);
  pfs_tails_clear(l); /* the file interns its names afresh */
  lp__pf_seq_start(&l->q, l->uuid, x->boot_offset);
  lp__pf_lane_descriptor(x, l->seq, l->uuid, info->track, info->name, info->tid);
  l->file = f->file;
  f->open += l->depth;
  for (size_t k = 0; k < l->depth; k++) {
    lp__pf_rec_t r = {ts, 0, l->stack[k].site, 0, PF_SLICE, PF_TRUNCATED};
    lp__pf_event(&l->q, &r, TYPE_SLICE_BEGIN, ts, 0, lp__label(l->stack[k].site), false);
  }
}

/* Ends the open scopes from index k up, innermost first, at ts. */
static void pfs_close_from(lp__pfs_t *f, lp__pfs_lane_t *l, size_t k, uint64_t ts, bool unterminated) {
  if (l->depth > k) f->open -= l->depth - k;
  while (l->depth > k) {
    l->depth--;
    lp__pf_rec_t r = {ts, ts, l->stack[l->depth].site, 0, PF_SLICE, unterminated ? PF_UNTERMINATED : 0};
    lp__pf_event(&l->q, &r, TYPE_SLICE_END, ts, 0, NULL, true);
  }
}

/* Doubles a lane's stack, which sits after its sentinel: an entry of depth -1 (as an int32_t). */
static bool pfs_stack_grow(lp__pfs_lane_t *l) {
  size_t cap = l->cap ? l->cap * 2 : 64;
  lp__scope_t *base = lp__realloc(l->stack ? l->stack - 1 : NULL, (cap + 1) * sizeof *base);
  if (!base) return false;
  base[0] = (lp__scope_t){NULL, 0, UINT32_MAX, false, 0};
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
  uint32_t h = lp__pf_find(&l->q, site);
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
  lp__scope_t *top = l->stack + l->depth - 1; /* the innermost open scope, or the sentinel */
  const lp__scope_t *const full = l->stack + l->cap - 1; /* top when the stack is full */
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
  size_t depth = (size_t)(top + 1 - l->stack);
  f->open += depth - l->depth; /* begins less ends: modulo 2^64, the sum stays right */
  l->depth = depth;
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
  lp__pf_export_t *x = &f->x;
  lp__pfs_lane_t *l = *state;
  if (!l) {
    if (!(l = lp__calloc(1, sizeof *l))) return -ENOMEM;
    l->seq = ++f->nseq;
    l->uuid = lp__pf_uuid(x->pid, ((uint64_t)l->seq << 1) | ((uint64_t)1 << 62));
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
      pfs_close_from(f, l, k, ts, true);
      if (l->depth == l->cap && !pfs_stack_grow(l)) {
        l->q.nomem = true;
        break;
      }
      l->stack[l->depth++] = (lp__scope_t){site, ts, d, false, 0};
      f->open++;
      lp__pf_rec_t r = {ts, 0, site, 0, PF_SLICE, 0};
      lp__pf_event(&l->q, &r, TYPE_SLICE_BEGIN, ts, 0, lp__label(site), false);
      pfs_fast_learn(l, site);
      f->events++;
      break;
    }
    case LP_IMPL_EV_END: {
      size_t m = lp__scope_match(l->stack, l->depth, site, LP__TAG_DEPTH(ev[i].tag));
      if (!m) break; /* its begin is not in the stream */
      pfs_close_from(f, l, m, ts, true);
      pfs_close_from(f, l, m - 1, ts, false);
      f->events++;
      break;
    }
    case LP_IMPL_EV_INSTANT: {
      lp__pf_rec_t r = {ts, 0, site, 0, PF_INSTANT, 0};
      lp__pf_event(&l->q, &r, TYPE_INSTANT, ts, 0, lp__label(site), false);
      f->events++;
      break;
    }
    case LP_IMPL_EV_COUNTER: {
      if (i + 1 >= to) break;
      lp__pf_rec_t r = {ts, 0, site, (int64_t)ev[i + 1].ts, PF_COUNTER, 0};
      x->q.id = l->seq; /* the sequence its descriptor goes on */
      uint64_t cu = lp__pf_counter_track(x, site);
      lp__pf_event(&l->q, &r, TYPE_COUNTER, ts, cu, NULL, false);
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
      lp__pf_rec_t r = {start, item_end, name, 0, PF_SLICE, PF_WORK | PF_ABSOLUTE};
      lp__pf_event(&l->q, &r, TYPE_SLICE_BEGIN, start, 0, name, false);
      lp__pf_event(&l->q, &r, TYPE_SLICE_END, item_end, 0, NULL, true);
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

void lp__pfs_finish(lp__pfs_t *f, const lp__notes_t *n) {
  lp__notes_t mine = *n;
  mine.events = f->events;
  mine.unfinished = f->open;
  mine.jumps = f->jumps;
  mine.jump = f->jumps ? f->jump : NULL;
  mine.file = true;
  mine.file_number = f->file;
  lp__pf_session_note(&f->x, 1, &mine);
}

void lp__pfs_jumps(lp__pfs_t *f, const lp__timemap_t *map) {
  const char *jt = lp__timemap_jump_text(map);
  if (!jt) return;
  f->jumps += lp__timemap_jumps(map);
  snprintf(f->jump, sizeof f->jump, "%s", jt); /* the largest of the last batch that had one */
}
