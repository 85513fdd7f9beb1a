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
 * Packets ready to copy. A begin's packet differs from the same site's
 * last one only in its timestamp's delta: the rest (the packet's header,
 * the TrackEvent's type, category and name iids, the sequence id) is kept,
 * once per site and depth, with a delta of one byte, and an event is a copy
 * and its delta written in (two bytes: the copy one byte further). A scope
 * with nothing recorded inside (a leaf: the end comes right after its
 * begin) is written in one copy of both packets, its end's delta of one
 * byte or two; an end's packet alone is kept once per lane. A slot is 128
 * bytes, an index shifted.
 */
typedef struct pfs_tail {
  uintptr_t key; /* the begin's tag: its site and its depth (0: a free slot) */
  uint8_t n;     /* the begin packet's bytes, its delta of one byte at b[3] */
  uint8_t pair;  /* the begin's and its end's, with a delta of one byte at b[n + 3] */
  uint8_t pair2; /* the same with the end's delta of two bytes, at b2[n + 3] */
  uint8_t pad_[5];
  uint8_t b[56];  /* the begin packet then its end's; 32 bytes are copied at once, at most 32 count */
  uint8_t b2[56]; /* the same, the end with two bytes of delta */
} pfs_tail_t;

struct lp__pfs_lane {
  lp__pf_seq_t q;
  uint32_t seq;
  uint64_t uuid, file; /* the file its sequence was started in (0: none yet) */
  uint64_t prev_end;   /* a track's: the end of the item given before (UINT64_MAX: none) */
  lp__scope_t *stack;
  size_t depth, cap;
  pfs_tail_t end;          /* an end's packet */
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
  lp__wall_t wall; /* the REALTIME reading at the current file's start */
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
  lp__wall_read(&f->wall); /* each file can be placed in time alone */
  lp__pf_wall_clock(&x->pb, 1, &f->wall, x->boot_offset);
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

/*
 * A packet ready to copy, into b: a TrackEvent of type with the fields te
 * (n bytes), on sequence seq, at a delta of one byte (0). Its length.
 */
static size_t pfs_packet(uint8_t *b, uint32_t type, const uint8_t *te, size_t n, uint32_t seq) {
  size_t k = 0;
  b[k++] = TRACE_PACKET_TAG;
  k++; /* the packet's length, below */
  b[k++] = TP_TIMESTAMP << 3;
  b[k++] = 0;
  b[k++] = TP_TRACK_EVENT << 3 | 2;
  b[k++] = (uint8_t)(2 + n);
  b[k++] = TE_TYPE << 3;
  b[k++] = (uint8_t)type;
  if (n) memcpy(b + k, te, n);
  k += n;
  b[k++] = TP_SEQ_ID << 3;
  k += lp__pb_put_varint(b + k, seq);
  b[1] = (uint8_t)(k - 2);
  return k;
}

/*
 * A lane's begins kept ready, by site and depth: an open-addressed table,
 * at most half full, that grows to PFS_FAST_MAX slots; a begin past that
 * takes the general path. With no table the lane points at one free slot.
 */
enum { PFS_FAST_MIN = 64, PFS_FAST_MAX = 4096 };
static pfs_tail_t pfs_no_tails[1];

static inline uint32_t pfs_hash(uintptr_t key) { return (uint32_t)(key >> 4); }

static void pfs_tails_clear(lp__pfs_lane_t *l) {
  if (l->fast != pfs_no_tails) free(l->fast);
  l->fast = pfs_no_tails;
  l->fmask = 0;
  l->nfast = 0;
}

/*
 * A begin's own slot, where it nearly always is: fast[pfs_hash(key) & mask],
 * at byte offset ((key >> 4) << 7) & (mask << 7). (key >> 4) << 7 differs
 * from key << 3 only in its low seven bits, which mask << 7 clears (and the
 * depth, in the key's top byte, goes out): the offset is (key << 3) &
 * (mask << 7), a shift and a mask less.
 */
static inline const pfs_tail_t *pfs_tail_home(const pfs_tail_t *fast, uintptr_t byte_mask, uintptr_t key) {
  _Static_assert(sizeof *fast == 128, "a slot's offset is its index << 7");
  return (const pfs_tail_t *)((const char *)fast + ((key << 3) & byte_mask));
}

/* The slot for key: its own, or the free one it would take. */
static inline pfs_tail_t *pfs_tail_slot(pfs_tail_t *fast, uint32_t mask, uintptr_t key) {
  uint32_t h = pfs_hash(key) & mask;
  while (fast[h].key && fast[h].key != key) h = (h + 1) & mask;
  return &fast[h];
}

/* Keeps a plain site's begin at depth d ready, once lp__pf_event has interned its name and its one category. */
static void pfs_fast_learn(lp__pfs_lane_t *l, const lp_site_t *site, uint32_t d) {
  uint32_t h = lp__pf_find(&l->q, site);
  if (h == UINT32_MAX || !l->q.cat_of[h] || lp__site_has_layer(site)) return;
  uint8_t te[20], b[64];
  size_t n = 0;
  te[n++] = TE_CATEGORY_IIDS << 3;
  n += lp__pb_put_varint(te + n, l->q.cat_of[h]);
  te[n++] = TE_NAME_IID << 3;
  n += lp__pb_put_varint(te + n, l->q.iids[h]);
  size_t nb = pfs_packet(b, TYPE_SLICE_BEGIN, te, n, l->seq);
  if (nb + l->end.n + 1 > 32) return; /* iids (or sequence ids) that large: the general path */
  if ((l->nfast + 1) * 2 > l->fmask + 1) {
    uint32_t slots = l->fast == pfs_no_tails ? PFS_FAST_MIN : (l->fmask + 1) * 2;
    if (slots > PFS_FAST_MAX) return;
    pfs_tail_t *t = lp__calloc(slots, sizeof *t);
    if (!t) return; /* the general path, as for any begin not kept */
    for (uint32_t i = 0; l->fast != pfs_no_tails && i <= l->fmask; i++)
      if (l->fast[i].key) *pfs_tail_slot(t, slots - 1, l->fast[i].key) = l->fast[i];
    uint32_t kept = l->nfast;
    pfs_tails_clear(l);
    l->fast = t;
    l->fmask = slots - 1;
    l->nfast = kept;
  }
  uintptr_t key = (uintptr_t)site | LP_IMPL_EV_BEGIN | LP_IMPL_DEPTH_TAG(d);
  pfs_tail_t *t = pfs_tail_slot(l->fast, l->fmask, key);
  l->nfast += !t->key;
  memset(t, 0, sizeof *t);
  t->key = key;
  memcpy(t->b, b, nb);
  memcpy(t->b + nb, l->end.b, l->end.n);
  memcpy(t->b2, b, nb); /* the end packet one byte longer: its length field too, and its tail after the delta */
  memcpy(t->b2 + nb, l->end.b, 4);
  t->b2[nb + 1]++;
  memcpy(t->b2 + nb + 5, l->end.b + 4, l->end.n - 4u);
  t->n = (uint8_t)nb;
  t->pair = (uint8_t)(nb + l->end.n);
  t->pair2 = (uint8_t)(t->pair + 1);
}

/*
 * A packet copied from p (n bytes, its delta of one byte at p[3]) to o with
 * the delta dt: its length. The copy is 32 bytes whatever n (room is made
 * for it); a delta of two bytes or more moves the rest of the packet along.
 */
static inline size_t pfs_put(uint8_t *o, const uint8_t *p, size_t n, uint64_t dt) {
  if (dt < 0x80) {
    memcpy(o, p, 32);
    o[3] = (uint8_t)dt;
    return n;
  }
  if (dt < 0x4000) {
    memcpy(o + 1, p, 32); /* then the header over what came along */
    o[0] = TRACE_PACKET_TAG;
    o[1] = (uint8_t)(p[1] + 1);
    o[2] = TP_TIMESTAMP << 3;
    o[3] = (uint8_t)(dt | 0x80);
    o[4] = (uint8_t)(dt >> 7);
    return n + 1;
  }
  size_t k = 3 + lp__pb_put_varint(o + 3, dt);
  memcpy(o + k, p + 4, 32);
  o[0] = TRACE_PACKET_TAG;
  o[1] = (uint8_t)(p[1] + k - 4);
  o[2] = TP_TIMESTAMP << 3;
  return n + k - 4;
}

/* What a time line's ns per tick is made of: a fraction only, whole ns and a fraction, one ns exactly. */
typedef enum { PFS_LINE_FRAC, PFS_LINE_BOTH, PFS_LINE_NS } pfs_line_t;

/* The clock of the chunk being encoded: its map and anchor, the lane's cursor in it, the line lent for its ticks. */
typedef struct pfs_clock {
  const lp__timemap_t *map;
  lp__sync_t anchor;
  size_t cursor;
  lp__timeseg_t seg;
} pfs_clock_t;

static inline pfs_line_t pfs_shape(const lp__timeseg_t *s) {
  return s->whole == 1 && !s->frac ? PFS_LINE_NS : s->whole ? PFS_LINE_BOTH : PFS_LINE_FRAC;
}

/* seg with its shape's constants, for the loop of that shape (whole 0, or 1 and no fraction: multiplies go). */
static inline lp__timeseg_t pfs_line(const lp__timeseg_t *seg, pfs_line_t line) {
  lp__timeseg_t s = *seg;
  if (line == PFS_LINE_FRAC) s.whole = 0;
  if (line == PFS_LINE_NS) {
    s.whole = 1;
    s.frac = 0;
  }
  return s;
}

/* The line for ticks, taken as the general path takes it (into c->seg): false if it holds no such tick or has another shape. */
static bool pfs_reline(pfs_clock_t *c, uint64_t ticks, pfs_line_t line) {
  lp__timemap_ns_seg(c->map, ticks, c->anchor, &c->cursor, &c->seg);
  return ticks - c->seg.lo < c->seg.span && pfs_shape(&c->seg) == line;
}

/* ns past the line's ns0 for ticks on s's line (ticks in its range), with the line's shape known. */
static inline uint64_t pfs_line_off(const lp__timeseg_t *s, uint64_t ticks, pfs_line_t line) {
  uint64_t d = ticks - s->t0;
  if (line == PFS_LINE_NS) return d;
  uint64_t ns = (uint64_t)(((unsigned __int128)d * s->frac) >> 64);
  return line == PFS_LINE_BOTH ? ns + d * s->whole : ns;
}

/* ns for ticks on s's line, as lp__timeseg_ns gives them (the sum is the same, modulo 2^64). */
static inline uint64_t pfs_line_ns(const lp__timeseg_t *s, uint64_t ticks, pfs_line_t line) {
  return s->ns0 + pfs_line_off(s, ticks, line);
}

/*
 * The common events, written straight to the buffer from event i on: a
 * begin kept ready that ends no scope, and an end that matches the
 * innermost open scope, each at a time on seg's line; a leaf (a begin whose
 * own end is the next event) in one step, both packets at once. The packets
 * are byte for byte those lp__pf_event writes. Returns the index of the
 * first event it left to the general path (to when none).
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
                                                                 pfs_clock_t *c, pfs_line_t line) {
  lp__pb_t *pb = &f->x.pb;
  enum { ROOM = 48 }; /* the most a packet writes: its copy of 32 bytes after a delta of up to 10, rounded up */
  if (l->file != f->file || pb->err || !l->stack) return i; /* no stack yet: its first begin makes it */
  size_t n = to - i;
  uint8_t *o = n ? lp__pb_reserve(pb, n * ROOM) : NULL;
  if (!o) return i;
  lp__timeseg_t s = pfs_line(&c->seg, line);
  const lp_impl_event_t *e = ev + i, *const end = e + n;
  uint64_t last = l->q.last;
  lp__scope_t *top = l->stack + l->depth - 1; /* the innermost open scope, or the sentinel */
  const lp__scope_t *const full = l->stack + l->cap - 1; /* top when the stack is full */
  pfs_tail_t *const fast = l->fast;
  const uint32_t fmask = l->fmask;
  const uintptr_t byte_mask = (uintptr_t)fmask << 7;
  uint64_t hi = s.lo + s.span; /* the line's ticks: [s.lo, hi) (the next chunk's sync point, or an epoch's end) */
  const lp_impl_event_t *const last_pair = end - 1; /* where a leaf's begin can be */
  for (;;) {
    /*
     * Leaves: a begin whose own end is the next event (the same site and
     * depth, one kind more), kept ready, deeper than the innermost open
     * scope (its tag, the depth in the top byte, at least `deeper`). Both
     * packets at once, from the begin's slot when the begin's delta takes
     * one byte and the end's one or two; else one after the other. A
     * time gone back (a delta wrapped past 2^63) is left to the general
     * path. Ticks: the first begin's on the line, checked here (from then
     * on a begin's are at or past the end's before it, or the time went
     * back), an end's before the line's end. Times are ns past the line's
     * ns0 (modulo 2^64): a delta is a difference of two of them.
     */
    const uint64_t deeper = LP_IMPL_DEPTH_TAG(top->depth + 1 > 255 ? 255 : top->depth + 1);
    if (e < end && e->ts >= s.lo && (int32_t)top->depth < 255) {
      uint64_t rel = last - s.ns0;
      while (e < last_pair) {
        uint64_t tag = e->tag;
        if (e[1].tag != tag + 1) break;
        uint64_t t1 = e[1].ts;
        if (t1 >= hi || tag < deeper) break;
        const pfs_tail_t *t = pfs_tail_home(fast, byte_mask, tag);
        if (t->key != tag) break;
        uint64_t h0 = pfs_line_off(&s, e->ts, line), h1 = pfs_line_off(&s, t1, line);
        uint64_t dt0 = h0 - rel, dt1 = h1 - h0;
        if (dt0 < 0x80 && dt1 < 0x80) {
          memcpy(o, t->b, 32);
          o[3] = (uint8_t)dt0;
          o[t->n + 3] = (uint8_t)dt1;
          o += t->pair;
        } else if (dt0 < 0x80 && dt1 < 0x4000) { /* the end's delta of two bytes */
          uint8_t *d1 = o + t->n + 3; /* before the stores, which the compiler would take to change t */
          size_t len = t->pair2;
          memcpy(o, t->b2, 32);
          o[3] = (uint8_t)dt0;
          d1[0] = (uint8_t)(dt1 | 0x80);
          d1[1] = (uint8_t)(dt1 >> 7);
          o += len;
        } else if ((int64_t)(dt0 | dt1) >= 0) { /* longer deltas: each packet on its own */
          o += pfs_put(o, t->b, t->n, dt0);
          o += pfs_put(o, l->end.b, l->end.n, dt1);
        } else { /* a time gone back (a delta wrapped past 2^63): the general path holds it to the one before */
          break;
        }
        rel = h1;
        e += 2;
      }
      last = s.ns0 + rel;
    }
    if (e >= end) break;
    /* One event: a begin kept ready that ends no scope, or the end of the innermost one. */
    uint64_t tag = e->tag, ts;
    uint32_t kind = (uint32_t)(tag & LP_IMPL_EV_KIND);
    if (kind > LP_IMPL_EV_END) break;
    if (e->ts - s.lo < s.span) {
      ts = pfs_line_ns(&s, e->ts, line);
    } else { /* past the line's end: the next line, when it is of this shape */
      if (!pfs_reline(c, e->ts, line)) break;
      s = pfs_line(&c->seg, line);
      hi = s.lo + s.span;
      ts = pfs_line_ns(&s, e->ts, line);
    }
    if (ts < last) ts = last; /* a lane's time never goes back on its sequence */
    uint64_t dt = ts - last;
    uint32_t d = LP__TAG_DEPTH(tag);
    if (kind == LP_IMPL_EV_BEGIN) {
      if ((int32_t)top->depth >= (int32_t)d || top == full) break; /* it ends scopes: the general path */
      const pfs_tail_t *t = pfs_tail_home(fast, byte_mask, tag);
      if (t->key != tag) { /* not in its own slot: probe on */
        t = pfs_tail_slot(fast, fmask, tag);
        if (t->key != tag) break;
      }
      top++;
      top->site = LP__TAG_SITE(tag); /* all the stream reads of an open scope */
      top->depth = d;
      o += pfs_put(o, t->b, t->n, dt);
    } else {
      if (top->depth != d || (d >= 255 && top->site != LP__TAG_SITE(tag))) break;
      top--;
      o += pfs_put(o, l->end.b, l->end.n, dt);
    }
    last = ts;
    e++;
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
                        pfs_clock_t *c) {
  uint64_t ticks = ev[i].ts;
  if ((ev[i].tag & LP_IMPL_EV_KIND) > LP_IMPL_EV_END) return i; /* ticks it has not: the general path */
  if (ticks - c->seg.lo >= c->seg.span) lp__timemap_ns_seg(c->map, ticks, c->anchor, &c->cursor, &c->seg);
  pfs_line_t shape = pfs_shape(&c->seg);
  if (shape == PFS_LINE_NS) return pfs_loop(f, l, ev, i, to, c, PFS_LINE_NS);
  if (shape == PFS_LINE_BOTH) return pfs_loop(f, l, ev, i, to, c, PFS_LINE_BOTH);
  return pfs_loop(f, l, ev, i, to, c, PFS_LINE_FRAC);
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
    l->end.n = (uint8_t)pfs_packet(l->end.b, TYPE_SLICE_END, NULL, 0, l->seq);
    *state = l;
  }
  pfs_clock_t c = {map, anchor, 0, LP__TIMESEG_NONE};
  for (uint32_t i = from; i < to && !x->pb.err; i++) {
    if ((i = pfs_run(f, l, ev, i, to, &c)) >= to) break;
    uint32_t kind = (uint32_t)(ev[i].tag & LP_IMPL_EV_KIND);
    if (kind == LP__EV_PAYLOAD) continue;
    uint64_t ts;
    if (kind == LP__EV_TRACK) {
      if (i + 1 >= to) break; /* its payload not there: cannot happen, both are written at once */
      ts = ev[i].ts;
    } else if (!lp__timeseg_ns(&c.seg, ev[i].ts, &ts)) {
      ts = lp__timemap_ns_seg(map, ev[i].ts, anchor, &c.cursor, &c.seg);
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
      pfs_fast_learn(l, site, d);
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
  mine.wall_start = f->wall;
  lp__wall_read(&mine.wall_end);
  lp__host_read(&mine.host);
  lp__pf_session_note(&f->x, 1, &mine);
}

void lp__pfs_jumps(lp__pfs_t *f, const lp__timemap_t *map) {
  const char *jt = lp__timemap_jump_text(map);
  if (!jt) return;
  f->jumps += lp__timemap_jumps(map);
  snprintf(f->jump, sizeof f->jump, "%s", jt); /* the largest of the last batch that had one */
}
