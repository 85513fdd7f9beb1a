/*
 * trace.c: recording the timeline.
 *
 * One recording serves every session. Each thread appends 16-byte events
 * (raw ticks, site pointer | kind) to the current chunk of its lane, inline
 * and without a lock (labelprof.h). Only when the chunk is full does it come
 * here, to the slow path, which takes the trace lock and gets the next chunk:
 * one from the pool or a new one while the budget allows, else, in ring
 * mode, the oldest chunk of any lane that nobody is filling and no export is
 * reading (its events are counted as overwritten; it is always the first of
 * its lane, so every lane keeps its newest events), else nothing (discard
 * mode: the budget is spent, and every later event is counted inline at
 * almost no cost). A chunk records a clock sync point when it is started.
 *
 * Sessions are windows onto the recording. The program's session
 * (lp_trace_start) and the environment's (LABELPROF_TRACE) may run at once:
 * the recorded levels are the union of theirs, the budget, policy and clock
 * are those of the session that started the recording, and each export
 * writes the events stamped inside its own session's window, of its own
 * levels. A session that starts when nothing is recording starts a new
 * recording: the chunks of the last one go back to the pool (already
 * touched, so a new session does not take page faults in its hot loop),
 * and a thread of the library keeps a stock of new chunks touched ahead of
 * need, within the budget, so that not even the first recording of a
 * process stalls on the kernel inside the scopes it measures.
 *
 * An export takes a snapshot under the trace lock (the chunks of each lane
 * and how far they are filled, names copied) and writes the file after
 * releasing it. The chunks it holds are pinned: a ring does not reuse them
 * and a new recording does not take them back until the export is done.
 *
 * Lanes of exited threads are retired as soon as they hold no chunk: at
 * once when the thread recorded nothing, when a ring reuses their last
 * chunk, or when a new recording starts. Memory is the budget, plus one
 * chunk per live thread that keeps its current chunk across recordings,
 * plus what exports still pin.
 */
#include "internal.h"
#include "track_lane.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stddef.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER; /* everything below */

/* The recording (trace lock). */
static struct {
  uint32_t recording;   /* sessions recording now */
  lp_trace_opts_t opts; /* budget, policy and clock of the session that started it */
  uint64_t gen;         /* recordings started so far */
  bool spent;           /* discard mode: the budget is spent */
} rec = {0, {LP_LEVEL_STANDARD, LP_TRACE_DISCARD, 64u << 20, LP_CLOCK_AUTO, NULL, 0, 0}, 0, false};

static atomic_int starved;            /* ring: the last thread that needed a chunk found none to take */
static atomic_int exports;            /* exports in flight, holding pins */
static uint64_t used;                 /* bytes of chunks in lanes */
static uint64_t lock_dropped;         /* events dropped under the lock (tracks, threads without state) */
static lp__chunk_t *oldest, *newest;  /* chunks in lanes, in the order they were started */
static lp__chunk_t *pool;             /* free chunks, linked through ->next */
static uint64_t pooled;               /* bytes in the pool */
static lp__chunk_t *released;         /* taken back while an export pinned them; linked through older/newer */
static uint64_t released_bytes;
static lp__lane_t *lanes, *lanes_tail; /* thread lanes */
static lp__lane_t *tracks[LP__MAX_TRACKS];
static _Atomic uint32_t ntracks;

typedef struct session {
  bool exists, running;
  uint32_t levels;
  uint64_t gen; /* the recording it belongs to */
  lp__sync_t start_sync, stop_sync; /* stop_sync.ns is UINT64_MAX while it runs */
  /*
   * The sync point the first write after the stop took ({0, 0} until then).
   * Every later write maps through it too, so that a scope which ended
   * after the stop has the same times in every file written of the session.
   */
  lp__sync_t written_sync;
  lp__wall_t start_wall;            /* a REALTIME reading at its start */
  uint64_t drops0, drops1; /* the drop total at its start and stop */
  uint64_t overwritten;    /* ring: events of its window reused */
  uint64_t first_drop_ns;  /* CLOCK_MONOTONIC time of its first drop, 0 if none (trace lock; cold paths only) */
  bool streamed;           /* LP_TRACE_STREAM: its events went to the stream's file */
} session_t;
static session_t sessions[LP__OWNERS];

/* ---- levels -------------------------------------------------------------------- */

/*
 * lp_impl_levels is the timeline's levels (and the spent bit) or'ed with
 * what subscribers need (every level and LP_IMPL_SUBS while one listens to
 * labels). The two parts have writers under different locks; each stores
 * its part, then the union, and stores again until the union it stored is
 * still the union of both parts, so that the last writer's view wins.
 * While both parts are set, it also has LP_IMPL_SUBS_TRACED.
 */
_Atomic uint32_t lp__trace_lv;
#define trace_lv lp__trace_lv
static _Atomic uint32_t subs_lv;

/* With LP_IMPL_SUBS_TRACED while both parts are set; 0 once the ABI check has refused labels. */
static uint32_t levels_union(void) {
  uint32_t t = atomic_load(&trace_lv), s = atomic_load(&subs_lv);
  if (lp__abi_refused()) return 0;
  return t | s | (t && s ? LP_IMPL_SUBS_TRACED : 0u);
}

/* Stores the union, then gives every thread its copy (lp__levels_publish()). */
static void levels_refresh(void) {
  for (;;) {
    uint32_t lv = levels_union();
    LP_IMPL_STORE_RELEASE(lp_impl_levels, lv);
    if (levels_union() == lv) break;
  }
  lp__levels_publish();
}

void lp__levels_set_subs(bool on) {
  atomic_store(&subs_lv, on ? (uint32_t)(LP_LEVEL_ALL | LP_IMPL_SUBS) : 0u);
  levels_refresh();
}

/* The union of the recording sessions' levels, and the spent bit. Trace lock held. */
static void publish_levels(void) {
  uint32_t lv = 0;
  for (int o = 0; o < LP__OWNERS; o++)
    if (sessions[o].running) lv |= sessions[o].levels;
  if (lv && rec.spent) lv |= LP_IMPL_SPENT;
  atomic_store(&trace_lv, lv);
  levels_refresh();
}

/* ---- chunks -------------------------------------------------------------------- */

/* The number of slots used in chunk c of lane l (c == l->last of a live thread: its published cursor). */
static uint32_t chunk_end(const lp__lane_t *l, const lp__chunk_t *c) {
  if (l->owner && c == l->last) {
    const lp_impl_event_t *e = LP_IMPL_LOAD_ACQUIRE(l->owner->hot.tcur);
    if (e >= c->ev && e <= c->ev + LP__CHUNK_EVENTS) return (uint32_t)(e - c->ev);
  }
  return c->count;
}

static void age_unlink(lp__chunk_t **first, lp__chunk_t **last, lp__chunk_t *c) {
  if (c->older)
    c->older->newer = c->newer;
  else
    *first = c->newer;
  if (c->newer)
    c->newer->older = c->older;
  else
    *last = c->older;
  c->older = c->newer = NULL;
}

static void age_append(lp__chunk_t *c) {
  c->older = newest;
  c->newer = NULL;
  if (newest)
    newest->newer = c;
  else
    oldest = c;
  newest = c;
}

/* A chunk no lane needs any more, to the pool (already touched: no page fault when it is used again). */
static void pool_put(lp__chunk_t *c) {
  c->lane = NULL;
  c->next = pool;
  pool = c;
  pooled += LP__CHUNK_BYTES;
}

/* The pool never holds more than the budget leaves room for beside the chunks in lanes. */
static void pool_trim(void) {
  while (pool && used + pooled > rec.opts.budget_bytes) {
    lp__chunk_t *c = pool;
    pool = c->next;
    pooled -= LP__CHUNK_BYTES;
    free(c);
  }
}

/* Takes c out of the recording (it is in no lane any more): pooled, or kept aside while an export pins it. */
static void release(lp__chunk_t *c) {
  age_unlink(&oldest, &newest, c);
  used -= LP__CHUNK_BYTES;
  c->lane = NULL;
  if (c->pins) {
    c->older = NULL;
    c->newer = released;
    if (released) released->older = c;
    released = c;
    released_bytes += LP__CHUNK_BYTES;
    return;
  }
  pool_put(c);
}

/* ---- the refill: chunks touched off the hot path ------------------------------ */

/*
 * A chunk fresh from the kernel costs four page faults on first touch (2 µs
 * each on a VM), which would land inside whatever scope is open and stretch
 * it. So a thread of the library keeps a small stock of touched chunks in
 * the pool, within the budget, while a recording runs: woken when the stock
 * runs low, it allocates and touches chunks without the lock, then adds
 * them. A thread that finds the pool empty still allocates its own.
 */
#define REFILL_LOW 16  /* wake the refill below this many chunks in the pool */
#define REFILL_HIGH 64 /* and fill up to this many (1 MiB), as the budget allows */

static pthread_cond_t refill_cv = PTHREAD_COND_INITIALIZER; /* with trace_mu */
static bool refill_started, refill_wanted;
/*
 * Held by the refill while it allocates, and by fork's prepare handler: a
 * child must not inherit an allocator lock that the refill held at the fork
 * (glibc's malloc takes its own locks around fork; ASan's allocator in GCC 12
 * does not, and a child that then took a chunk of the same size waited for
 * ever).
 */
static pthread_mutex_t refill_mu = PTHREAD_MUTEX_INITIALIZER;

/* How many chunks the refill should add now. Trace lock held. */
static uint32_t refill_need(void) {
  if (!rec.recording) return 0;
  uint64_t have = pooled / LP__CHUNK_BYTES, room = 0;
  if (used + pooled < rec.opts.budget_bytes) room = (rec.opts.budget_bytes - used - pooled) / LP__CHUNK_BYTES;
  uint64_t want = have < REFILL_HIGH ? REFILL_HIGH - have : 0;
  return (uint32_t)(want < room ? want : room);
}

static void *refill_main(void *arg) {
  (void)arg;
  lp__lock(&trace_mu);
  for (;;) {
    while (!refill_wanted) {
      int rc = pthread_cond_wait(&refill_cv, &trace_mu);
      if (rc != 0) lp__fatal("pthread_cond_wait", rc);
    }
    refill_wanted = false;
    uint32_t n = refill_need();
    lp__unlock(&trace_mu);
    lp__chunk_t *got = NULL;
    lp__lock(&refill_mu);
    for (uint32_t i = 0; i < n; i++) {
      lp__chunk_t *c = lp__aligned_alloc(64, LP__CHUNK_BYTES);
      if (!c) break; /* the recording threads will try for themselves */
      memset(c, 0, LP__CHUNK_BYTES); /* the touch: the page faults happen here */
      c->next = got;
      got = c;
    }
    lp__unlock(&refill_mu);
    lp__lock(&trace_mu);
    while (got) {
      lp__chunk_t *c = got;
      got = c->next;
      pool_put(c);
    }
    pool_trim(); /* a new recording with a smaller budget may have started meanwhile */
  }
  return NULL;
}

/* Asks the refill for more, starting it the first time. Trace lock held. */
static void refill_wake(void) {
  if (!refill_need()) return;
  /*
   * Not in a child forked from a threaded process: POSIX promises it only
   * async-signal-safe calls, and starting a thread is not one. Its
   * recording threads allocate their chunks themselves, as they can anyway.
   */
  if (!refill_started && lp__forked_child()) return;
  if (!refill_started) {
    pthread_t th;
    if (lp__thread_spawn(&th, refill_main, NULL, "labelprof-pool") != 0)
      return; /* no refill: threads allocate their own chunks, as they can anyway */
    pthread_detach(th);
    refill_started = true;
  }
  refill_wanted = true;
  int rc = pthread_cond_signal(&refill_cv);
  if (rc != 0) lp__fatal("pthread_cond_signal", rc);
}

static lp__chunk_t *chunk_get(void) {
  lp__chunk_t *c = pool;
  if (pooled / LP__CHUNK_BYTES <= REFILL_LOW) refill_wake();
  if (c) {
    pool = c->next;
    pooled -= LP__CHUNK_BYTES;
    return c;
  }
  return lp__aligned_alloc(64, LP__CHUNK_BYTES);
}

static void retire(lp__lane_t *l);

/* When an event was recorded: its stamp, or for a track's item the stamp in its payload's tag. */
static uint64_t recorded_at(const lp__chunk_t *c, uint32_t i) {
  if ((c->ev[i].tag & LP_IMPL_EV_KIND) == LP__EV_TRACK) return i + 1 < c->count ? lp__track_recorded(c->ev[i + 1]) : 0;
  return c->ev[i].ts;
}

/*
 * Whether an event of a chunk recorded at `ticks` is inside a window, given
 * where the chunk stands; a straddling chunk compares ticks, which is exact
 * unless the clock jumped inside that very chunk (then a count may be off
 * by the events of that chunk; the export itself maps through the clock).
 */
static bool inside(lp__span_t v, uint64_t ticks, lp__sync_t start, lp__sync_t stop) {
  return (v.after_start == LP__ALL_IN || (v.after_start == LP__EACH && ticks >= start.ticks)) &&
         (v.before_stop == LP__ALL_IN || (v.before_stop == LP__EACH && ticks <= stop.ticks));
}

/* Events of c (closed: count and payloads are final) recorded inside the window [start, stop]. */
static uint64_t events_between(const lp__chunk_t *c, lp__sync_t start, lp__sync_t stop) {
  uint64_t n = 0;
  lp__span_t v = lp__chunk_span(start, stop, c->sync.ns, c->next ? c->next->sync.ns : UINT64_MAX);
  if (c->count == 0 || !v.after_start || !v.before_stop) return 0;
  if (v.after_start == LP__ALL_IN && v.before_stop == LP__ALL_IN) return c->count - c->payloads;
  for (uint32_t i = 0; i < c->count; i++)
    if ((c->ev[i].tag & LP_IMPL_EV_KIND) != LP__EV_PAYLOAD) n += inside(v, recorded_at(c, i), start, stop);
  return n;
}

/*
 * Ring mode: takes the first chunk of its lane for reuse. Its events are
 * counted as overwritten in every session of this recording whose window
 * they fall in.
 */
static lp__chunk_t *take(lp__chunk_t *c) {
  lp__lane_t *l = c->lane;
  assert(l->first == c);
  for (int o = 0; o < LP__OWNERS; o++) {
    session_t *s = &sessions[o];
    if (!s->exists || s->gen != rec.gen) continue;
    uint64_t n = events_between(c, s->start_sync, s->stop_sync);
    s->overwritten += n;
    if (n && !s->first_drop_ns) s->first_drop_ns = lp__mono_ns();
  }
  l->first = c->next;
  if (!l->first) l->last = NULL;
  l->lost = true;
  age_unlink(&oldest, &newest, c);
  used -= LP__CHUNK_BYTES;
  if (!l->owner && !l->first && !l->track) retire(l);
  return c;
}

/*
 * Ring mode: the oldest chunk nobody is filling and no export is reading. A
 * lane's last chunk is the one its thread (or track) fills, and the asker
 * keeps its own too while any other can be had. A lane's chunks are in the
 * global order, so whatever is found first is the oldest of its lane.
 */
static lp__chunk_t *take_oldest(lp__lane_t *asking) {
  for (lp__chunk_t *c = oldest; c; c = c->newer) {
    lp__lane_t *l = c->lane;
    if (c->pins || c != l->first) continue;
    if (c == l->last && (l->owner || l->cur || l == asking)) continue;
    return take(c);
  }
  /* Nothing else: the asker reuses the one chunk it has. */
  if (asking->first && asking->first == asking->last && !asking->first->pins) return take(asking->first);
  return NULL;
}

/*
 * The lane's next chunk: one within the budget, else (ring) the oldest one
 * free, else NULL, with *spent telling whether that is because the budget
 * is spent (discard) rather than memory short. Trace lock held.
 */
static lp__chunk_t *next_chunk(lp__lane_t *l, bool *spent) {
  lp__chunk_t *c = NULL;
  bool room = used + LP__CHUNK_BYTES <= rec.opts.budget_bytes;
  *spent = false;
  if (room && (c = chunk_get()) != NULL)
    ;
  else if (rec.opts.policy == LP_TRACE_RING)
    c = take_oldest(l);
  else
    *spent = !room;
  if (!c) return NULL;
  used += LP__CHUNK_BYTES;
  c->next = NULL;
  c->lane = l;
  c->sync = lp__clock_sync();
  c->count = 0;
  c->payloads = 0;
  c->pins = 0;
  if (l->last)
    l->last->next = c;
  else
    l->first = c;
  l->last = c;
  age_append(c);
  return c;
}

/* ---- lanes --------------------------------------------------------------------- */

static void free_names(lp__lane_t *l) {
  for (uint32_t i = 0; i < l->nnames; i++) free(l->names[i]);
  free(l->names);
  free(l->name_index.slot);
  l->names = NULL;
  l->name_index = (lp__index_t){0};
  l->nnames = l->capnames = 0;
}

/* A thread lane that holds nothing and whose thread has exited: gone, in O(1). Trace lock held. */
static void retire(lp__lane_t *l) {
  if (l->prev)
    l->prev->next = l->next;
  else
    lanes = l->next;
  if (l->next)
    l->next->prev = l->prev;
  else
    lanes_tail = l->prev;
  lp__pfs_lane_free(l->stream);
  free(l->name);
  free(l);
}

static lp__lane_t *new_lane(lp__thread_t *t) {
  lp__lane_t *l = lp__calloc(1, sizeof *l);
  if (!l || !(l->name = lp__strdup(t->name))) {
    free(l);
    return NULL;
  }
  l->owner = t;
  l->tid = t->tid;
  /* Appended: lanes are written in the order threads first recorded. */
  l->prev = lanes_tail;
  if (lanes_tail)
    lanes_tail->next = l;
  else
    lanes = l;
  lanes_tail = l;
  t->lane = l;
  return l;
}

/* ---- recording: the slow paths ---------------------------------------------------- */

/* Counts n events the calling thread could not record (the owner's own counter: no read-modify-write). */
static void drop_own(lp__thread_t *t, unsigned n) {
  LP_IMPL_STORE_RELAXED(t->hot.dropped, LP_IMPL_LOAD_RELAXED(t->hot.dropped) + n);
}

/*
 * The time of the first drop, for each recording session that has none yet.
 * Trace lock held. Called where a drop starts under the lock (the budget
 * found spent, no chunk to take, no memory); every later inline drop comes
 * after one of these, so the hot path never reads the clock for it.
 */
static void note_drop(void) {
  uint64_t now = 0;
  for (int o = 0; o < LP__OWNERS; o++) {
    session_t *s = &sessions[o];
    if (!s->running || s->gen != rec.gen || s->first_drop_ns) continue;
    if (!now) now = lp__mono_ns();
    s->first_drop_ns = now;
  }
}

/* The depth whose ends the chunk keeps room for: the open scopes that have frames. */
static uintptr_t open_frames(const lp__thread_t *t) {
  uint32_t d = (uint32_t)LP_IMPL_LOAD_RELAXED(t->hot.word) & LP_IMPL_DEPTH_MASK;
  return d < LP_STACK_CAPACITY ? d : LP_STACK_CAPACITY;
}

/*
 * Records an event of nslots slots (a counter's value as the second) for
 * the calling thread, whose current chunk has no room for it: closes that
 * chunk and gets the next. An end is recorded even once the budget is spent
 * or the session has stopped (its begin was). Returns 1 if recorded, 0 if
 * dropped: counted as `weight` events (a begin's drop is its end's too).
 */
static uint32_t record_slow(lp__thread_t *t, uintptr_t tag, uint64_t payload, unsigned nslots, bool end,
                            unsigned weight) {
  lp_impl_thread_t *h = &t->hot;
  lp__lane_t *l = t->lane;
  /*
   * Known without the lock: discard mode with the budget spent; or ring mode,
   * and the last thread that needed a chunk found none to take.
   */
  /*
   * (A thread that has a chunk can always reuse its own, unless an export
   * pins it: then it too has nothing to take until the export is done.)
   */
  if ((!end && (LP_IMPL_LOAD_RELAXED(lp_impl_levels) & LP_IMPL_SPENT)) ||
      (l && atomic_load_explicit(&starved, memory_order_relaxed) &&
       (!l->last || atomic_load_explicit(&exports, memory_order_relaxed)))) {
    drop_own(t, weight);
    return 0;
  }
  lp__lock(&trace_mu);
  if (!rec.recording && !end) goto drop;
  if (!l && !(l = new_lane(t))) goto drop;
  if (l->last) {
    l->last->count = (uint32_t)(LP_IMPL_LOAD_RELAXED(h->tcur) - l->last->ev);
    /* The chunk it leaves can be taken. Written only when set: no shared line touched per chunk. */
    if (atomic_load_explicit(&starved, memory_order_relaxed)) atomic_store_explicit(&starved, 0, memory_order_relaxed);
  }
  bool spent = false;
  if (l->last) lp__stream_wake(); /* the chunk it leaves is the writer's */
  lp__chunk_t *c = rec.recording ? next_chunk(l, &spent) : NULL;
  if (!c) {
    if (spent) { /* not on a failed allocation: that drops this event only */
      rec.spent = true;
      publish_levels();
    } else if (rec.recording && rec.opts.policy == LP_TRACE_RING) {
      atomic_store_explicit(&starved, 1, memory_order_relaxed);
    }
    goto drop;
  }
  c->ev[0].ts = lp_impl_ticks();
  c->ev[0].tag = tag;
  if (nslots == 2) {
    c->ev[1] = (lp_impl_event_t){payload, LP__EV_PAYLOAD};
    c->payloads = 1;
  }
  /* A new chunk has room for this event and the ends of every open scope (LP_STACK_CAPACITY of them at most). */
  h->tend = c->ev + LP__CHUNK_EVENTS;
  LP_IMPL_STORE_RELEASE(h->tcur, c->ev + nslots);
  lp__unlock(&trace_mu);
  return 1;
drop:
  note_drop();
  lp__unlock(&trace_mu);
  drop_own(t, weight);
  return 0;
}

/*
 * Records an event of nslots slots where the thread's chunk has room for it
 * and `keep` more slots (the ends of open scopes), stamped with the
 * session's clock, or else through record_slow().
 */
static uint32_t record(lp__thread_t *t, uintptr_t tag, uint64_t payload, unsigned nslots, uintptr_t keep, bool end,
                       unsigned weight) {
  lp_impl_event_t *e = LP_IMPL_LOAD_RELAXED(t->hot.tcur);
  if (!lp_impl_room(e, t->hot.tend, keep + nslots - 1)) return record_slow(t, tag, payload, nslots, end, weight);
  e[0].ts = lp_impl_ticks();
  e[0].tag = tag;
  if (nslots == 2) {
    e[1] = (lp_impl_event_t){payload, LP__EV_PAYLOAD};
    t->lane->last->payloads++; /* a cursor with room means a lane and a current chunk */
  }
  LP_IMPL_STORE_RELEASE(t->hot.tcur, e + nslots);
  return 1;
}

/*
 * A begin of a recorded level, from the general path: the protocol's
 * begin, with the session's clock, a new chunk or a deep stack. The
 * timeline's own levels decide (the subscribers' part set every level).
 * A begin dropped is counted as two events, it and its end.
 */
static uint64_t trace_begin(lp__thread_t *t, const lp_site_t *site, int manual) {
  uint32_t d = (uint32_t)LP_IMPL_LOAD_RELAXED(t->hot.word) & LP_IMPL_DEPTH_MASK;
  uint32_t levels = lp__trace_levels();
  if (!(site->level & levels)) return lp_impl_push((uintptr_t)site); /* the session stopped meanwhile */
  uintptr_t tag = (uintptr_t)site | LP_IMPL_EV_BEGIN | LP_IMPL_DEPTH_TAG(d);
  if (d >= LP_STACK_CAPACITY) {
    /* Deeper than the frames: a scope's own word carries "traced"; a manual pair has nowhere to. */
    uint64_t w = lp_impl_push_slow((uintptr_t)site);
    if (manual || (uint32_t)(w & LP_IMPL_DEPTH_MASK) == LP_IMPL_NOT_PUSHED) return w;
    /* Recorded like an instant: no room kept for its end, which no frame could give back after a longjmp. */
    if (levels & LP_IMPL_SPENT) {
      drop_own(t, 2);
      return w;
    }
    return record(t, tag, 0, 1, LP_STACK_CAPACITY, false, 2) ? w ^ LP_IMPL_TRACED_MARK : w;
  }
  if ((levels & LP_IMPL_SPENT) || !record(t, tag, 0, 1, d + 1, false, 2)) {
    if (levels & LP_IMPL_SPENT) drop_own(t, 2);
    return lp_impl_push((uintptr_t)site);
  }
  LP_IMPL_STORE_RELEASE(t->hot.frames[d], (uintptr_t)site | LP_IMPL_TRACED);
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->hot.word) + LP_IMPL_COUNT_ONE + 1;
  LP_IMPL_STORE_RELEASE(t->hot.word, w);
  return w ^ LP_IMPL_TRACED_MARK;
}

uint64_t lp__trace_begin(lp__thread_t *t, const lp_site_t *site, int manual) {
  if (LP_IMPL_LIKELY(lp__marker_fd < 0)) return trace_begin(t, site, manual);
  /* ---- layers and phases: the live trace_marker sees every recorded begin ---- */
  uint32_t d = (uint32_t)LP_IMPL_LOAD_RELAXED(t->hot.word) & LP_IMPL_DEPTH_MASK;
  lp__marker_unhide(t);
  uint64_t w = trace_begin(t, site, manual);
  if ((uint32_t)(w & LP_IMPL_DEPTH_MASK) != LP_IMPL_NOT_PUSHED && (w & LP_IMPL_TRACED_MARK))
    lp__marker_begin(t, site, d);
  else if (manual && d < LP_STACK_CAPACITY && (LP_IMPL_LOAD_RELAXED(t->hot.frames[d]) & LP_IMPL_TRACED))
    lp__marker_begin(t, site, d); /* a manual pair's begin: its frame says it was recorded */
  lp__marker_hide(t);
  return w;
}

void lp__trace_end(lp__thread_t *t, uintptr_t site, uint32_t depth) {
  if (LP_IMPL_LIKELY(lp__marker_fd < 0)) {
    if (lp_impl_try_end_event(&t->hot, site, depth)) record(t, site | LP_IMPL_EV_END | LP_IMPL_DEPTH_TAG(depth), 0, 1, 0, true, 1);
    return;
  }
  /* ---- layers and phases: the live trace_marker sees every recorded end ---- */
  lp__marker_unhide(t);
  record(t, site | LP_IMPL_EV_END | LP_IMPL_DEPTH_TAG(depth), 0, 1, 0, true, 1);
  lp__marker_end(t, depth);
  lp__marker_hide(t);
}

void lp_impl_instant_slow(uintptr_t tag) {
  lp__thread_t *t = lp__thread_attach();
  if (!t) return;
  if (LP_IMPL_UNLIKELY(t->mark_hidden)) { /* the live trace_marker: the real limits, then hidden again */
    lp__marker_unhide(t);
    /* Recorded here, as lp_impl_instant() would: not through its subscribers' branch, which have had it. */
    if (lp__trace_levels() & LP_IMPL_SPENT)
      drop_own(t, 1);
    else
      record(t, tag, 0, 1, open_frames(t), false, 1);
    lp__marker_hide(t);
    return;
  }
  record(t, tag, 0, 1, open_frames(t), false, 1);
}

void lp_impl_counter(const lp_site_t *site, int64_t value) {
  if (!(site->level & lp__trace_levels())) return; /* called because subscribers listen, not recording */
  lp__thread_t *t = lp__thread_attach();
  if (!t) return;
  if (LP_IMPL_UNLIKELY(t->mark_hidden)) { /* the live trace_marker: the real limits, then hidden again */
    lp__marker_unhide(t);
    lp_impl_counter(site, value);
    lp__marker_hide(t);
    return;
  }
  if (LP_IMPL_LOAD_RELAXED(lp_impl_levels) & LP_IMPL_SPENT)
    drop_own(t, 1);
  else
    record(t, (uintptr_t)site | LP_IMPL_EV_COUNTER, (uint64_t)value, 2, open_frames(t), false, 1);
}

/* ---- threads ------------------------------------------------------------------- */

void lp__trace_thread_exit(lp__thread_t *t) {
  if (!t->lane) return;
  lp__lock(&trace_mu);
  lp__lane_t *l = t->lane;
  if (l->last) l->last->count = (uint32_t)(LP_IMPL_LOAD_RELAXED(t->hot.tcur) - l->last->ev);
  if (l->last) lp__stream_wake();
  l->owner = NULL;
  t->lane = NULL;
  atomic_store_explicit(&starved, 0, memory_order_relaxed); /* its chunk can be taken now */
  if (!l->first) retire(l);
  lp__unlock(&trace_mu);
}

void lp__trace_thread_renamed(lp__thread_t *t) {
  lp__lock(&trace_mu);
  if (t->lane) {
    char *n = lp__strdup(t->name);
    if (n) { /* else the lane keeps the old name */
      free(t->lane->name);
      t->lane->name = n;
    }
  }
  lp__unlock(&trace_mu);
}

/* ---- the stream (LP_TRACE_STREAM): the recording's side of stream.c ---------------- */

static bool st_atexit;

/* What is to be written now: closed chunks, and with all, what live ones hold. Trace lock held. */
static size_t stream_collect(lp__stream_item_t **items, size_t *cap, bool all) {
  size_t n = 0;
  uint32_t nt = atomic_load(&ntracks);
  for (uint32_t pass = 0; pass < 1 + nt; pass++) {
    for (lp__lane_t *l = pass == 0 ? lanes : tracks[pass - 1]; l; l = pass == 0 ? l->next : NULL) {
      for (lp__chunk_t *c = l->first; c; c = c->next) {
        /* A track's last chunk stays open: lp_track_complete may add to it as soon as the lock is released. */
        bool closed = c != l->last || (!l->owner && !l->track);
        if (!closed && !all) break;
        uint32_t from = c == l->first ? l->streamed : 0;
        uint32_t to = l->track ? c->count : chunk_end(l, c);
        if (n == *cap) {
          size_t nc = *cap ? *cap * 2 : 64;
          lp__stream_item_t *ni = lp__realloc(*items, nc * sizeof *ni);
          if (!ni) return n; /* the rest next time */
          *items = ni;
          *cap = nc;
        }
        lp__stream_item_t *it = &(*items)[n];
        memset(it, 0, sizeof *it);
        it->lane = l;
        it->chunk = c;
        it->from = from;
        it->to = to;
        it->closed = closed;
        it->info.tid = l->tid;
        it->info.track = l->track;
        it->info.name = lp__strdup(l->name);
        if (l->track && l->nnames) {
          char **w = lp__malloc(l->nnames * sizeof *w);
          if (w) {
            memcpy(w, l->names, l->nnames * sizeof *w); /* the strings stay until a new recording */
            it->info.work = w;
            it->info.nwork = l->nnames;
          }
        }
        c->pins++;
        n++;
      }
    }
  }
  return n;
}

/* What the writer wrote: unpinned, and closed chunks back to the pool. Trace lock held. */
static void stream_give_back(lp__stream_item_t *items, size_t n) {
  bool freed = false;
  for (size_t i = 0; i < n; i++) {
    lp__stream_item_t *it = &items[i];
    lp__lane_t *l = it->lane;
    lp__chunk_t *c = it->chunk;
    free((void *)it->info.name);
    free((void *)it->info.work);
    c->pins--;
    if (!it->closed) {
      l->streamed = it->to;
      continue;
    }
    /* Written: back to the pool. It is the first of its lane: chunks are written in order. */
    l->first = c->next;
    if (l->last == c) l->last = NULL; /* an exited thread's */
    l->streamed = 0;
    release(c);
    freed = true;
    if (!l->owner && !l->first && !l->track) retire(l);
  }
  if (freed && rec.spent && rec.opts.policy == LP_TRACE_STREAM) {
    rec.spent = false;
    publish_levels();
  }
}

static const lp__stream_source_t stream_source = {&trace_mu, stream_collect, stream_give_back, lp__trace_drops};

/* The stop of the stream's session: everything written, the file closed. Trace lock held; released meanwhile. */
static int stream_stop(void) {
  int err = lp__stream_stop();
  /* Lanes keep no writer's state beyond the stream: a next one starts afresh. */
  for (lp__lane_t *l = lanes; l; l = l->next) {
    lp__pfs_lane_free(l->stream);
    l->stream = NULL;
    l->streamed = 0;
    l->stream_state = LP__STREAM_UNWRITTEN;
  }
  for (uint32_t i = 0; i < atomic_load(&ntracks); i++) {
    lp__pfs_lane_free(tracks[i]->stream);
    tracks[i]->stream = NULL;
    tracks[i]->streamed = 0;
  }
  /* Sessions that still record go on as discard mode would. */
  if (rec.opts.policy == LP_TRACE_STREAM) rec.opts.policy = LP_TRACE_DISCARD;
  return err;
}

int lp__trace_stream_sync(void) {
  lp__lock(&trace_mu);
  int rc = lp__stream_flush();
  lp__unlock(&trace_mu);
  return rc;
}

void lp__trace_stream_cache(uint64_t behind, uint64_t keep) {
  lp__lock(&trace_mu);
  lp__stream_cache(behind, keep);
  lp__unlock(&trace_mu);
}

void lp__trace_stream_hold(bool on) {
  lp__lock(&trace_mu);
  lp__stream_hold(on);
  lp__unlock(&trace_mu);
}

/* At exit: the program's stream, if it still runs, written to its end. */
static void stream_at_exit(void) {
  if (lp__forked_child()) return;
  lp__stream_status_t ss;
  lp__lock(&trace_mu);
  lp__stream_status(&ss);
  lp__unlock(&trace_mu);
  if (ss.on) lp__trace_stop(ss.owner);
}

/* ---- sessions ------------------------------------------------------------------ */

/*
 * A new recording: what the last one recorded goes back to the pool, but for
 * the chunk each live thread is filling (its cursor stays valid; the new
 * window starts after what it holds). Lanes of exited threads go. Trace lock
 * held, nothing recording.
 */
static void reset(const lp_trace_opts_t *opts) {
  rec.gen++;
  rec.opts = *opts;
  rec.spent = false;
  atomic_store(&starved, 0);
  for (lp__lane_t *l = lanes, *next; l; l = next) {
    next = l->next;
    lp__chunk_t *keep = l->owner ? l->last : NULL;
    for (lp__chunk_t *c = l->first, *n; c && c != keep; c = n) {
      n = c->next;
      release(c);
    }
    l->first = keep;
    /* A live thread reads its own lane's last without the lock: it is the same chunk, so not written. */
    if (l->last != keep) l->last = keep;
    l->lost = false;
    if (!keep && !l->owner) retire(l);
  }
  uint32_t n = atomic_load(&ntracks);
  for (uint32_t i = 0; i < n; i++) {
    lp__lane_t *l = tracks[i];
    for (lp__chunk_t *c = l->first, *next; c; c = next) {
      next = c->next;
      release(c);
    }
    l->first = l->last = NULL;
    l->cur = l->lim = NULL;
    l->lost = false;
    free_names(l); /* exports hold copies */
  }
  pool_trim(); /* once every chunk is back: a new session keeps as many as its budget allows */
}

static int check_opts(const lp_trace_opts_t *opts, lp_trace_opts_t *want) {
  *want = opts ? *opts : (lp_trace_opts_t){0};
  if (!want->levels) want->levels = LP_LEVEL_STANDARD;
  if (!want->budget_bytes) want->budget_bytes = 64u << 20;
  if (want->policy == LP_TRACE_STREAM &&
      (!want->path || !want->path[0] || ((want->rotate_bytes || want->rotate_ns) && !lp__path_has_number(want->path))))
    return -EINVAL;
  if ((want->levels & ~LP_LEVEL_ALL) ||
      (want->policy != LP_TRACE_DISCARD && want->policy != LP_TRACE_RING && want->policy != LP_TRACE_STREAM) ||
      want->budget_bytes < LP__CHUNK_BYTES ||
      (want->clock != LP_CLOCK_AUTO && want->clock != LP_CLOCK_TSC && want->clock != LP_CLOCK_MONOTONIC))
    return -EINVAL;
  return 0;
}

/* Every drop so far: inline ones from the registry (read first, without the trace lock), then the lock's. */
static uint64_t drop_total(const lp__counters_t *c) { return c->dropped + lock_dropped; }

/*
 * later - earlier, or 0: the registry's totals are read before the trace lock
 * is taken, so a start that raced ahead may have read a larger one.
 */
static uint64_t since(uint64_t later, uint64_t earlier) { return later > earlier ? later - earlier : 0; }

int lp__trace_start(lp__owner_t who, const lp_trace_opts_t *opts) {
  lp_trace_opts_t want;
  if (check_opts(opts, &want) != 0) return -EINVAL;
  lp__clock_choose(want.clock); /* before the first event: the tick source never changes after */
  lp__counters_t c;
  lp__registry_counters(&c);
  lp__lock(&trace_mu);
  session_t *s = &sessions[who];
  if (s->running) {
    lp__unlock(&trace_mu);
    return -EBUSY;
  }
  lp__stream_status_t ss;
  lp__stream_status(&ss);
  if (ss.quitting) { /* a stream is being written to its end: its chunks are not to be taken back yet */
    lp__unlock(&trace_mu);
    return -EBUSY;
  }
  if (want.policy == LP_TRACE_STREAM) {
    /* A stream starts the recording: its chunks are the writer's. */
    int rc = rec.recording ? -EBUSY : lp__stream_start(who, &want, &stream_source);
    if (rc) {
      lp__unlock(&trace_mu);
      return rc;
    }
    if (!st_atexit && atexit(stream_at_exit) == 0) st_atexit = true;
  }
  if (!rec.recording) reset(&want);
  if (want.policy == LP_TRACE_STREAM) /* what a live thread's kept chunk holds is the last recording's */
    for (lp__lane_t *l = lanes; l; l = l->next) l->streamed = l->first ? chunk_end(l, l->first) : 0;
  memset(s, 0, sizeof *s);
  s->streamed = want.policy == LP_TRACE_STREAM;
  s->exists = s->running = true;
  s->levels = want.levels;
  s->gen = rec.gen;
  s->start_sync = lp__clock_sync();
  lp__wall_read(&s->start_wall);
  s->stop_sync = (lp__sync_t){UINT64_MAX, UINT64_MAX};
  s->written_sync = (lp__sync_t){0, 0};
  s->drops0 = drop_total(&c);
  if (rec.spent) s->first_drop_ns = s->start_sync.ns; /* joined a recording whose budget is spent: drops from here */
  rec.recording++;
  publish_levels();
  refill_wake(); /* a stock of touched chunks before the first ones are needed */
  lp__unlock(&trace_mu);
  return 0;
}

int lp__trace_stop(lp__owner_t who) {
  lp__counters_t c;
  lp__registry_counters(&c);
  lp__lock(&trace_mu);
  session_t *s = &sessions[who];
  if (!s->running) {
    lp__unlock(&trace_mu);
    return -EINVAL;
  }
  s->running = false;
  s->stop_sync = lp__clock_sync();
  s->drops1 = drop_total(&c);
  rec.recording--;
  publish_levels();
  lp__stream_status_t ss;
  lp__stream_status(&ss);
  int rc = ss.on && ss.owner == who ? stream_stop() : 0;
  lp__unlock(&trace_mu);
  return rc;
}

bool lp__trace_running(lp__owner_t who) {
  lp__lock(&trace_mu);
  bool r = sessions[who].running;
  lp__unlock(&trace_mu);
  return r;
}

int lp_trace_stop(void) { return lp__trace_stop(LP__PROGRAM); }
int lp_trace_running(void) { return lp__trace_running(LP__PROGRAM); }

/* ---- snapshots ------------------------------------------------------------------ */

static void free_session(lp__session_t *s) {
  for (uint32_t i = 0; i < s->nlanes; i++) {
    lp__snap_lane_t *l = &s->lanes[i];
    free(l->name);
    for (uint32_t k = 0; l->work && k < l->nwork; k++) free(l->work[k]);
    free(l->work);
    free(l->chunks);
  }
  free(s->lanes);
  free(s->syncs);
  memset(s, 0, sizeof *s);
}

/* Adds lane l to the snapshot, pinning its chunks that may hold events of the window. Trace lock held. */
static int snap_lane(lp__session_t *s, const lp__lane_t *l, bool track) {
  uint32_t n = 0;
  for (const lp__chunk_t *c = l->first; c; c = c->next) n++;
  lp__snap_lane_t *sl = &s->lanes[s->nlanes];
  memset(sl, 0, sizeof *sl);
  if (!n) return 0;
  sl->chunks = lp__calloc(n, sizeof *sl->chunks);
  if (!sl->chunks) return -ENOMEM;
  for (lp__chunk_t *c = l->first; c; c = c->next) {
    uint32_t end = chunk_end(l, c);
    /* Entirely before the window: its events precede the next chunk's sync point. */
    if (!end || (c->next && c->next->sync.ns < s->start.ns)) continue;
    sl->chunks[sl->nchunks++] = (lp__snap_chunk_t){c, end, c->next ? c->next->sync.ns : UINT64_MAX};
    s->syncs[s->nsyncs++] = c->sync;
  }
  if (!sl->nchunks) {
    free(sl->chunks);
    sl->chunks = NULL;
    return 0;
  }
  sl->tid = l->tid;
  sl->lost = l->lost;
  if (!(sl->name = lp__strdup(l->name))) goto nomem;
  if (track) { /* the work names as they are now: copies, since a new recording frees them */
    sl->work = lp__calloc(l->nnames + 1, sizeof *sl->work);
    if (!sl->work) goto nomem;
    for (uint32_t i = 0; i < l->nnames; i++, sl->nwork++)
      if (!(sl->work[i] = lp__strdup(l->names[i]))) goto nomem;
  }
  for (uint32_t k = 0; k < sl->nchunks; k++) ((lp__chunk_t *)sl->chunks[k].chunk)->pins++;
  s->nlanes++;
  return 0;
nomem:
  for (uint32_t k = 0; sl->work && k < sl->nwork; k++) free(sl->work[k]);
  free(sl->work);
  free(sl->name);
  free(sl->chunks);
  memset(sl, 0, sizeof *sl);
  return -ENOMEM;
}

static void unpin(lp__session_t *s) {
  lp__lock(&trace_mu);
  if (s->pinned) atomic_fetch_sub_explicit(&exports, 1, memory_order_relaxed);
  s->pinned = false;
  for (uint32_t i = 0; i < s->nlanes; i++)
    for (uint32_t k = 0; k < s->lanes[i].nchunks; k++) {
      lp__chunk_t *c = (lp__chunk_t *)s->lanes[i].chunks[k].chunk;
      if (--c->pins == 0 && !c->lane) { /* taken back by a new recording meanwhile */
        age_unlink(&released, &(lp__chunk_t *){NULL}, c);
        released_bytes -= LP__CHUNK_BYTES;
        pool_put(c);
      }
    }
  pool_trim();
  atomic_store_explicit(&starved, 0, memory_order_relaxed); /* chunks can be taken again */
  lp__unlock(&trace_mu);
}

/*
 * The session of `who` as an export sees it: its window, and the chunks of
 * this recording that may hold its events, pinned. -EINVAL if who never
 * started one. Free with unpin() and free_session().
 */
static int snapshot(lp__owner_t who, lp__session_t *s) {
  memset(s, 0, sizeof *s);
  lp__counters_t cnt;
  lp__registry_counters(&cnt);
  lp__lock(&trace_mu);
  session_t *ss = &sessions[who];
  if (!ss->exists) {
    lp__unlock(&trace_mu);
    return -EINVAL;
  }
  s->opts = rec.opts;
  s->opts.levels = ss->levels;
  s->start = ss->start_sync;
  s->wall_start = ss->start_wall;
  s->stop = ss->stop_sync;
  s->dropped = since(ss->running ? drop_total(&cnt) : ss->drops1, ss->drops0) + ss->overwritten;
  /* A drop counted without its time (one inline before the lock noted it): the window's start, at the latest. */
  s->first_drop_ns = s->dropped ? (ss->first_drop_ns ? ss->first_drop_ns : ss->start_sync.ns) : 0;
  bool current = ss->gen == rec.gen; /* else a later recording took its events back */
  uint32_t nlanes = atomic_load(&ntracks), nchunks = 0;
  for (const lp__lane_t *l = lanes; l; l = l->next) {
    nlanes++;
    for (const lp__chunk_t *c = l->first; c; c = c->next) nchunks++;
  }
  for (uint32_t i = 0; i < atomic_load(&ntracks); i++)
    for (const lp__chunk_t *c = tracks[i]->first; c; c = c->next) nchunks++;
  s->lanes = lp__calloc(nlanes + 1, sizeof *s->lanes);
  s->syncs = lp__malloc((nchunks + 4) * sizeof *s->syncs);
  if (!s->lanes || !s->syncs) goto nomem;
  s->syncs[s->nsyncs++] = ss->start_sync;
  if (!ss->running) {
    s->syncs[s->nsyncs++] = ss->stop_sync;
    if (!ss->written_sync.ns) ss->written_sync = lp__clock_sync();
    s->syncs[s->nsyncs++] = ss->written_sync;
  }
  s->syncs[s->nsyncs++] = lp__clock_sync();
  s->taken_ns = s->syncs[s->nsyncs - 1].ns;
  if (current) {
    atomic_fetch_add_explicit(&exports, 1, memory_order_relaxed);
    s->pinned = true;
    for (const lp__lane_t *l = lanes; l; l = l->next)
      if (snap_lane(s, l, false) != 0) goto nomem;
    s->nthreads = s->nlanes;
    for (uint32_t i = 0; i < atomic_load(&ntracks); i++)
      if (snap_lane(s, tracks[i], true) != 0) goto nomem;
  }
  lp__unlock(&trace_mu);
  return 0;
nomem:
  lp__unlock(&trace_mu);
  unpin(s);
  free_session(s);
  return -ENOMEM;
}

/* ---- statistics ------------------------------------------------------------------- */

/* Events of a snapshot inside its window (payload slots and, for threads, events outside it not counted). */
static void count_window(const lp__session_t *s, uint64_t *events, uint32_t *threads) {
  *events = 0;
  *threads = 0;
  for (uint32_t i = 0; i < s->nlanes; i++) {
    uint64_t before = *events;
    const lp__snap_lane_t *l = &s->lanes[i];
    for (uint32_t k = 0; k < l->nchunks; k++) {
      const lp__chunk_t *c = l->chunks[k].chunk;
      lp__span_t v = lp__chunk_span(s->start, s->stop, c->sync.ns, l->chunks[k].end_ns);
      for (uint32_t e = 0; e < l->chunks[k].end; e++) {
        uintptr_t kind = c->ev[e].tag & LP_IMPL_EV_KIND;
        if (kind == LP__EV_PAYLOAD) continue;
        if (i >= s->nthreads) {
          uint64_t rec_ticks = e + 1 < l->chunks[k].end ? lp__track_recorded(c->ev[e + 1]) : 0;
          *events += kind == LP__EV_TRACK && inside(v, rec_ticks, s->start, s->stop);
          continue;
        }
        uint64_t ts = c->ev[e].ts;
        const lp_site_t *site = LP__TAG_SITE(c->ev[e].tag);
        *events += inside(v, ts, s->start, s->stop) && (site->level & s->opts.levels);
      }
    }
    *threads += i < s->nthreads && *events > before;
  }
}

int lp_trace_get_stats(lp_trace_stats_t *out) {
  if (!out) return -EINVAL;
  memset(out, 0, sizeof *out);
  lp__session_t s;
  /* The program's session; under LABELPROF_TRACE alone, the environment's. */
  lp__owner_t who = LP__PROGRAM;
  int rc = snapshot(who, &s);
  if (rc == -EINVAL) rc = snapshot(who = LP__ENV, &s);
  if (rc == -EINVAL) {
    lp__lock(&trace_mu);
    out->budget_bytes = rec.opts.budget_bytes;
    out->used_bytes = used;
    out->tracks = atomic_load(&ntracks);
    lp__unlock(&trace_mu);
    return 0;
  }
  if (rc != 0) return rc;
  out->clock = lp__clock_name(); /* a session has started: the choice is made */
  out->clock_reason = lp__clock_reason();
  out->clock_check_ns = lp__clock_check_ns();
  out->dropped = s.dropped;
  out->first_drop_ns = s.first_drop_ns;
  out->budget_bytes = s.opts.budget_bytes;
  lp__lock(&trace_mu);
  lp__stream_status_t ss;
  lp__stream_status(&ss);
  bool streamed = sessions[who].streamed && ss.owner == who; /* its events are in its files, or on their way */
  if (streamed) {
    out->recorded = ss.written;
    out->threads = ss.threads;
  }
  out->used_bytes = used;
  out->tracks = atomic_load(&ntracks);
  lp__unlock(&trace_mu);
  if (!streamed) count_window(&s, &out->recorded, &out->threads);
  unpin(&s);
  free_session(&s);
  return 0;
}

int lp__trace_drops(lp__owner_t who, lp__drops_t *out) {
  memset(out, 0, sizeof *out);
  lp__counters_t cnt;
  lp__registry_counters(&cnt);
  lp__lock(&trace_mu);
  const session_t *ss = &sessions[who];
  if (!ss->exists) {
    lp__unlock(&trace_mu);
    return -EINVAL;
  }
  out->dropped = since(ss->running ? drop_total(&cnt) : ss->drops1, ss->drops0) + ss->overwritten;
  out->first_drop_ns = out->dropped ? (ss->first_drop_ns ? ss->first_drop_ns : ss->start_sync.ns) : 0;
  out->start_ns = ss->start_sync.ns;
  out->stop_ns = ss->running ? lp__mono_ns() : ss->stop_sync.ns;
  out->budget_bytes = rec.opts.budget_bytes;
  out->ring = rec.opts.policy == LP_TRACE_RING;
  out->stream = ss->streamed;
  lp__stream_status_t sst;
  lp__stream_status(&sst);
  /* Its writer has ended, and no other stream has begun since: no race. */
  out->stream_files = ss->streamed && !ss->running && !sst.on ? lp__stream_files() : 0;
  if (ss->streamed && sst.owner == who) {
    out->stream_events = sst.written;
    out->stream_bytes = sst.bytes;
    out->stream_threads = sst.threads;
  }
  lp__unlock(&trace_mu);
  return 0;
}

uint32_t lp__trace_lane_count(void) {
  uint32_t n = 0;
  lp__lock(&trace_mu);
  for (const lp__lane_t *l = lanes; l; l = l->next) n++;
  lp__unlock(&trace_mu);
  return n;
}

uint64_t lp__trace_held_bytes(void) {
  lp__lock(&trace_mu);
  uint64_t n = used + pooled + released_bytes;
  lp__unlock(&trace_mu);
  return n;
}

/* ---- writing ------------------------------------------------------------------- */

/* Formats a snapshot onto fd in one of the formats. */
static int write_snapshot(int fd, const lp__session_t *s, const char *process_name, lp__format_t format, char *jump,
                          size_t jump_len) {
  lp__jw_t w;
  int rc = lp__jw_init(&w, fd);
  if (rc == 0) {
    if (format == LP__FORMAT_SYSTRACE)
      rc = lp__export_systrace(&w, s);
    else if (format == LP__FORMAT_PERFETTO)
      rc = lp__export_perfetto(&w, s, process_name, jump, jump_len);
    else
      rc = lp__export_json(&w, s, process_name, jump, jump_len);
  }
  int frc = lp__jw_finish(&w);
  return rc ? rc : frc;
}

/* One way out for every format: the same snapshot, the same output file handling (output.c). */
int lp__trace_write_as(lp__owner_t who, const char *path, const char *process_name, lp__format_t format) {
  if (!path) return -EINVAL;
  lp__lock(&trace_mu);
  if (sessions[who].exists && sessions[who].streamed) {
    /* Its events are in the stream's file, or on their way: they are sent there, not here. */
    lp__stream_status_t ss;
    lp__stream_status(&ss);
    int rc = ss.on && ss.owner == who ? lp__stream_flush() : 0;
    lp__unlock(&trace_mu);
    return rc;
  }
  lp__unlock(&trace_mu);
  lp__session_t s;
  int rc = snapshot(who, &s);
  if (rc != 0) return rc;
  /* No lock from here on: the file may take its time (a FIFO waiting for its reader, a slow disk). */
  lp__output_t out;
  char jump[512] = "";
  rc = lp__output_open(&out, path);
  if (rc == 0) rc = lp__output_close(&out, write_snapshot(out.fd, &s, process_name, format, jump, sizeof jump));
  unpin(&s);
  free_session(&s);
  if (jump[0]) lp__warn("%s: %s", path, jump);
  return rc;
}

int lp__trace_write(lp__owner_t who, const char *path, const char *process_name) {
  return lp__trace_write_as(who, path, process_name, LP__FORMAT_JSON);
}

int lp_trace_write_json(const char *path, const char *process_name) {
  return lp__trace_write(LP__PROGRAM, path, process_name);
}

/* ---- Perfetto ---- */
int lp_trace_write_perfetto(const char *path, const char *process_name) {
  return lp__trace_write_as(LP__PROGRAM, path, process_name, LP__FORMAT_PERFETTO);
}
/* ---- end of Perfetto ---- */

/* ---- layers and phases ---- */
int lp__trace_write_systrace(lp__owner_t who, const char *path) {
  return lp__trace_write_as(who, path, NULL, LP__FORMAT_SYSTRACE);
}

int lp_trace_write_systrace(const char *path) {
  return lp__trace_write_systrace(LP__PROGRAM, path);
}
/* ---- end of layers and phases ---- */

/* ---- tracks -------------------------------------------------------------------- */

lp_track_t lp__track_create(const char *name) {
  if (!name) return -EINVAL;
  lp__lane_t *l = lp__calloc(1, sizeof *l);
  if (!l || !(l->name = lp__strdup(name))) {
    free(l);
    return -ENOMEM;
  }
  lp__lock(&trace_mu);
  uint32_t n = atomic_load(&ntracks);
  if (n == LP__MAX_TRACKS) {
    lp__unlock(&trace_mu);
    free(l->name);
    free(l);
    return -ENOMEM;
  }
  l->tid = LP__TRACK_FIRST_TID + n;
  l->track = true;
  tracks[n] = l;
  atomic_store_explicit(&ntracks, n + 1, memory_order_release);
  lp__unlock(&trace_mu);
  return (lp_track_t)n;
}

static uint32_t hash_name(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* The id of a work name on track l, copying it on first use; LP__NONE when out of memory. Trace lock held. */
static uint32_t intern(lp__lane_t *l, const char *name) {
  uint32_t at, h = hash_name(name);
  for (uint32_t e = lp__index_first(&l->name_index, h, &at); e; e = lp__index_next(&l->name_index, &at))
    if (strcmp(l->names[e - 1], name) == 0) return e - 1;
  if (l->nnames == LP__MAX_WORK_NAMES) return LP__NONE; /* names are not freed within a session */
  uint64_t want = lp__index_wants(&l->name_index, l->nnames, 64);
  if (want) {
    uint32_t *fresh = want == UINT64_MAX ? NULL : lp__calloc(want, sizeof *fresh);
    if (!fresh) return LP__NONE;
    free(lp__index_move(&l->name_index, fresh, want));
    for (uint32_t i = 0; i < l->nnames; i++) lp__index_put(&l->name_index, hash_name(l->names[i]), i);
  }
  if (l->nnames == l->capnames) {
    uint32_t cap = l->capnames ? l->capnames * 2 : 16;
    char **names = lp__realloc(l->names, cap * sizeof *names);
    if (!names) return LP__NONE;
    l->names = names;
    l->capnames = cap;
  }
  char *copy = lp__strdup(name);
  if (!copy) return LP__NONE;
  lp__index_put(&l->name_index, h, l->nnames);
  l->names[l->nnames] = copy;
  return l->nnames++;
}

uint32_t lp__track_test_names(lp_track_t track) {
  if (track < 0 || (uint32_t)track >= atomic_load_explicit(&ntracks, memory_order_acquire)) return 0;
  lp__lock(&trace_mu);
  uint32_t n = tracks[track]->nnames;
  lp__unlock(&trace_mu);
  return n;
}

int lp_track_complete(lp_track_t track, const char *name, uint64_t start_ns, uint64_t dur_ns) {
  if (!name || track < 0 || (uint32_t)track >= atomic_load_explicit(&ntracks, memory_order_acquire) ||
      dur_ns > UINT64_MAX - start_ns)
    return -EINVAL;
  lp__lane_t *l = tracks[track];
  if (!lp__trace_levels()) return 0; /* nothing recording: known without the lock */
  lp__lock(&trace_mu);
  if (rec.recording) {
    uint32_t id = intern(l, name);
    if (id != LP__NONE && (!l->cur || l->lim - l->cur < 2)) {
      /* (The count of the chunk it leaves is already current: it is set after every item.) */
      bool spent = false;
      if (l->last) lp__stream_wake();
      lp__chunk_t *c = next_chunk(l, &spent);
      if (c) {
        l->cur = c->ev;
        l->lim = c->ev + LP__CHUNK_EVENTS;
      } else {
        if (spent && !rec.spent) {
          rec.spent = true;
          publish_levels();
        }
        l->cur = l->lim = NULL;
      }
    }
    if (id != LP__NONE && l->cur) {
      l->cur[0] = (lp_impl_event_t){start_ns, ((uintptr_t)id << 3) | LP__EV_TRACK};
      l->cur[1] = (lp_impl_event_t){dur_ns, lp__track_payload_tag(lp_impl_ticks())};
      l->cur += 2;
      l->last->payloads++;
      l->last->count = (uint32_t)(l->cur - l->last->ev);
    } else {
      lock_dropped++;
      note_drop();
    }
  }
  lp__unlock(&trace_mu);
  return 0;
}

/* ---- fork: see lifecycle.c -------------------------------------------------------- */

/* refill_mu first: the refill takes trace_mu only after letting refill_mu go. */
void lp__trace_atfork_prepare(void) {
  lp__lock(&refill_mu);
  lp__lock(&trace_mu);
}
void lp__trace_atfork_parent(void) {
  lp__unlock(&trace_mu);
  lp__unlock(&refill_mu);
}

static void free_chain(lp__chunk_t *c, bool by_next) {
  while (c) {
    lp__chunk_t *n = by_next ? c->next : c->newer;
    free(c);
    c = n;
  }
}

void lp__trace_atfork_child(void) {
  lp__marker_atfork_child();
  pthread_cond_t fresh_cv = PTHREAD_COND_INITIALIZER;
  refill_cv = fresh_cv; /* the refill thread was not copied: the child starts its own if it records */
  refill_started = refill_wanted = false;
  /* The child records nothing until it starts a session of its own; exports in flight were the parent's. */
  atomic_store(&trace_lv, 0u);
  levels_refresh(); /* subscribers stay */
  memset(sessions, 0, sizeof sessions);
  rec.recording = 0;
  rec.spent = false;
  lp__thread_t *self = lp__thread_current();
  if (self) {
    self->lane = NULL;
    LP_IMPL_STORE_RELEASE(self->hot.tcur, (lp_impl_event_t *)NULL);
    self->hot.tend = NULL;
    self->mark_hidden = false;
    self->mark_tend = NULL;
    /* The ends of scopes it inherited find no chunk: recorded in one of the child's own if it records. */
  }
  for (lp__lane_t *l = lanes, *n; l; l = n) {
    n = l->next;
    free_chain(l->first, true);
    lp__pfs_lane_free(l->stream);
    free(l->name);
    free(l);
  }
  lanes = lanes_tail = NULL;
  uint32_t nt = atomic_load(&ntracks);
  for (uint32_t i = 0; i < nt; i++) {
    lp__lane_t *l = tracks[i];
    free_chain(l->first, true);
    l->first = l->last = NULL;
    l->cur = l->lim = NULL;
    lp__pfs_lane_free(l->stream);
    l->stream = NULL;
    l->streamed = 0;
    free_names(l);
  }
  atomic_store(&exports, 0);
  free_chain(pool, true);
  free_chain(released, false);
  pool = released = oldest = newest = NULL;
  pooled = released_bytes = used = 0;
  atomic_store(&starved, 0);
  lp__stream_atfork_child();
  if (rec.opts.policy == LP_TRACE_STREAM) rec.opts.policy = LP_TRACE_DISCARD;
  lp__unlock(&trace_mu); /* taken by prepare on this thread, the child's only one */
  lp__unlock(&refill_mu);
}
