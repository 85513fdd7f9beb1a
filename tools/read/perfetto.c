/*
 * perfetto.c: Perfetto traces (TrackEvent protobuf) into the
 * normalised event stream, labelprof's own and other producers'.
 *
 * A trace is a run of TracePackets (field 1 of Trace), read one packet at a
 * time: memory holds one packet, the track descriptors, and each sequence's
 * incremental state, never the whole file. What is understood:
 *
 * - Sequences (trusted_packet_sequence_id): each has its interned event
 *   names, categories and debug annotation names, its TracePacketDefaults
 *   (clock, track) and its sequence-scoped clocks (ids 64-127). A packet
 *   with SEQ_INCREMENTAL_STATE_CLEARED (or incremental_state_cleared)
 *   forgets them; one that needs the state before any was set is skipped,
 *   as Perfetto's own reader does after packet loss.
 * - Clocks: every time is put on BOOTTIME, Perfetto's default trace clock,
 *   through the clock snapshots (a builtin clock's offset to BOOTTIME is
 *   taken from the latest snapshot that holds both); incremental clocks add
 *   each packet's delta to the last value; unit_multiplier_ns is applied.
 *   Differences within the file are what the views use.
 * - Track descriptors: a thread's track is its (pid, tid) lane and names
 *   it; a process's names the process; any other track (labelprof's virtual
 *   tracks, async tracks) is a lane of its own under its process, named
 *   after the track (else its first event), its tid PR_FIRST_LANE and up
 *   (never a thread's): the one its description says for a track labelprof
 *   wrote (its tid in the JSON), else the next in the file's order; a
 *   counter track names a counter series.
 * - The sequence's thread: the last thread track descriptor, or legacy
 *   ThreadDescriptor packet, on the sequence. An event with no track (and no
 *   default), or track 0 with a legacy phase, is that thread's, unless the
 *   legacy event's pid and tid overrides say otherwise.
 * - Chrome's legacy times: timestamp_delta_us from the ThreadDescriptor's
 *   reference (kept until the state is cleared) or timestamp_absolute_us,
 *   microseconds on MONOTONIC; ProcessDescriptor packets name the process.
 * - Track events: SLICE_BEGIN and SLICE_END (the innermost open slice of
 *   the track), INSTANT, COUNTER (integer or double), and the legacy
 *   events' phases B, E, X (with its duration), I and i. Names come inline
 *   or interned; categories likewise, joined with ','; the debug
 *   annotations layer, phase and mode are passed on as the JSON's args are.
 *   labelprof's "labelprof session" note is not an event of the program:
 *   what it says of drops and of the session's window is passed on as
 *   LP_EV_FILE_INFO "otherData.KEY", as the JSON's otherData is.
 *
 * Names (of events, interned or inline, of categories, tracks, threads and
 * processes) are kept whole, as Perfetto keeps them: one longer than
 * LP_READ_MAX_NAME is refused, and a NUL byte in one is the text \u0000, as
 * in the JSON reader, so that two names never become one. Every table (the
 * packet being read, sequences and their interned names, tracks, indexes)
 * is counted in the sink's memory: a packet past --max-memory is refused at
 * its header, before its bytes are held.
 *
 * An event whose name iid was not interned on its sequence (or only before
 * its state was cleared) is kept without a name, as Perfetto's trace
 * processor keeps it; the count of such events is passed on at the end of
 * the pass as LP_EV_FILE_INFO "perfetto.unknown_name_iids", for the notes.
 *
 * Anything malformed (a varint or a length past its message, a wire type
 * the schema cannot have, a category iid not interned on its sequence, a
 * time out of range) stops the pass with a message giving the byte offset
 * of the packet and what was expected.
 */
#include "perfetto_proto.h" /* the field numbers, the library's writers' own */
#include "protobuf.h"
#include "reader.h"
#include "track_lane.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PR_MAX_PACKET (256u << 20)  /* a packet larger than this is not believed */
#define PR_TIME_LIMIT ((int64_t)1 << 62)
#define PR_FIRST_LANE ((int64_t)LP__TRACK_FIRST_TID) /* as the library numbers its tracks */

/* ---- tables: uint64 keys to small records, open addressing ---- */

typedef struct pr_str {
  uint64_t key;
  char *s;
} pr_str_t;

/* Interned strings of a sequence by iid: in the order they came, found through an index. */
typedef struct pr_strmap {
  pr_str_t *e;
  size_t n, cap;
  lp__index_t ix;
} pr_strmap_t;

static pr_str_t *pr_find(const pr_strmap_t *m, uint64_t key) {
  for (uint32_t at, k = lp__index_first(&m->ix, lp__hash64(key), &at); k; k = lp__index_next(&m->ix, &at))
    if (m->e[k - 1].key == key) return &m->e[k - 1];
  return NULL;
}

static const char *pr_get(const pr_strmap_t *m, uint64_t key) {
  const pr_str_t *e = pr_find(m, key);
  return e ? e->s : NULL;
}

/*
 * Copies s[0..len) into dst (size bytes), up to its first NUL and cut to
 * size - 1 bytes, as snprintf's "%.*s" would, at the cost of a memcpy: it
 * runs for every event's strings.
 */
static void pr_copy(char *dst, size_t size, const void *s, size_t len) {
  const char *nul = memchr(s, '\0', len);
  if (nul) len = (size_t)(nul - (const char *)s);
  if (len > size - 1) len = size - 1;
  memcpy(dst, s, len);
  dst[len] = '\0';
}

/*
 * A name from the file, s[0..len), as a C string, counted in mem: a NUL in
 * it, which would cut it short and make two names one, is the text \u0000
 * (lp_name_put), as the JSON reader gives it. NULL out of memory.
 */
static char *pr_name_copy(lp_mem_t *mem, const uint8_t *s, size_t len) {
  size_t n = lp_name_len(s, len);
  char *c = lp_mem_realloc(mem, NULL, 0, n + 1);
  return c ? lp_name_put(c, s, len) : NULL;
}

static void pr_name_free(lp_mem_t *mem, char *c) {
  if (c) lp_mem_free(mem, c, strlen(c) + 1);
}

/* Sets key to a copy of s[0..len); 0, or -1 out of memory. */
static int pr_put(lp_mem_t *mem, pr_strmap_t *m, uint64_t key, const uint8_t *s, size_t len) {
  char *c = pr_name_copy(mem, s, len);
  if (!c) return -1;
  pr_str_t *e = pr_find(m, key);
  if (e) {
    pr_name_free(mem, e->s);
    e->s = c;
    return 0;
  }
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 16;
    pr_str_t *ne = cap < UINT32_MAX / 2 ? lp_mem_realloc(mem, m->e, m->cap * sizeof *ne, cap * sizeof *ne) : NULL;
    if (!ne) {
      pr_name_free(mem, c);
      return -1;
    }
    m->e = ne;
    m->cap = cap;
  }
  switch (lp_index_reserve(&m->ix, mem, (uint32_t)m->n, 64)) {
  case -1:
    pr_name_free(mem, c);
    return -1;
  case 1:
    for (size_t i = 0; i < m->n; i++) lp__index_put(&m->ix, lp__hash64(m->e[i].key), (uint32_t)i);
  }
  lp__index_put(&m->ix, lp__hash64(key), (uint32_t)m->n);
  m->e[m->n++] = (pr_str_t){key, c};
  return 0;
}

static void pr_strmap_free(lp_mem_t *mem, pr_strmap_t *m) {
  for (size_t i = 0; i < m->n; i++) pr_name_free(mem, m->e[i].s);
  lp_mem_free(mem, m->e, m->cap * sizeof *m->e);
  lp_index_free(&m->ix, mem);
  memset(m, 0, sizeof *m);
}

/* ---- sequences ---- */

typedef struct pr_clock {
  uint32_t id;
  uint64_t snap;   /* its value in the snapshot */
  int64_t boot;    /* BOOTTIME at that moment */
  uint64_t last;   /* incremental: the value so far */
  uint64_t mult;
  bool incremental;
} pr_clock_t;

typedef struct pr_seq {
  uint32_t id;
  bool valid; /* incremental state was cleared once */
  pr_strmap_t names, cats, dnames;
  uint32_t clock_id; /* from the defaults; 0: none */
  uint64_t track;    /* from the defaults; 0: none */
  bool has_track;
  pr_clock_t clocks[8];
  uint32_t nclocks;
  /* The thread that writes the sequence, from a ThreadDescriptor or a thread's track descriptor on it: kept when
     the incremental state is cleared, as Perfetto keeps it. */
  int64_t pid, tid;
  bool has_thread;
  /* Legacy times in microseconds: the reference (MONOTONIC, ns) that timestamp_delta_us adds to. */
  int64_t ref_ns;
  bool has_ref;
} pr_seq_t;

typedef struct pr_track {
  uint64_t uuid;
  int64_t pid, tid;
  bool counter;
  char *name;
} pr_track_t;

typedef struct pr_state {
  lp_input_t *in;
  const lp_sink_t *sink;
  lp_mem_t *mem; /* every table and buffer here, against --max-memory */
  lp_pos_t pos;
  pr_seq_t *seqs;
  size_t nseqs, capseqs;
  lp__index_t seq_by_id;
  pr_track_t *tracks;
  size_t ntracks, captracks;
  lp__index_t track_by_uuid, track_by_lane; /* the lane's key: pr_lane_key(pid, tid) */
  int64_t offset[64]; /* builtin clock -> BOOTTIME */
  bool has_offset[64];
  int64_t next_lane; /* tracks that are lanes of their own so far, numbered in order: tids PR_FIRST_LANE up */
  size_t nsaid;      /* tracks that are lanes of their own, with the tid their description says */
  uint64_t unknown_names; /* events whose name iid was not interned on their sequence */
  char *name, *cats;      /* the event being read: its name given inline, its categories joined */
  size_t name_cap, cats_cap, cats_len;
} pr_state_t;

/*
 * Sequences and tracks are found by their keys through lp__index_t (a
 * uint64 key's lp__hash64). An entry may be put under several keys (a track
 * whose descriptor changed its thread); a lookup compares the entry itself,
 * so a stale key finds nothing.
 */
typedef uint64_t (*pr_key_fn)(const pr_state_t *st, size_t pos);

/*
 * Puts entry pos (one of entries 0..n-1) under key; when the index grows,
 * the other entries are put again under their keys now (key_of). 0, or -1
 * out of memory (the index is left as it was).
 */
static int pr_index_put(pr_state_t *st, lp__index_t *ix, uint64_t key, size_t pos, size_t n, pr_key_fn key_of) {
  if (n >= UINT32_MAX / 2) return -1;
  switch (lp_index_reserve(ix, st->mem, (uint32_t)n, 64)) {
  case -1: return -1;
  case 1:
    for (size_t i = 0; i < n; i++)
      if (i != pos) lp__index_put(ix, lp__hash64(key_of(st, i)), (uint32_t)i);
  }
  lp__index_put(ix, lp__hash64(key), (uint32_t)pos);
  return 0;
}

static uint64_t pr_seq_key(const pr_state_t *st, size_t pos) { return st->seqs[pos].id; }

static pr_seq_t *pr_seq(pr_state_t *st, uint32_t id) {
  const lp__index_t *ix = &st->seq_by_id;
  for (uint32_t at, e = lp__index_first(ix, lp__hash64(id), &at); e; e = lp__index_next(ix, &at))
    if (st->seqs[e - 1].id == id) return &st->seqs[e - 1];
  if (st->nseqs == st->capseqs) {
    size_t cap = st->capseqs ? st->capseqs * 2 : 16;
    pr_seq_t *s = lp_mem_realloc(st->mem, st->seqs, st->capseqs * sizeof *s, cap * sizeof *s);
    if (!s) return NULL;
    st->seqs = s;
    st->capseqs = cap;
  }
  pr_seq_t *q = &st->seqs[st->nseqs];
  memset(q, 0, sizeof *q);
  q->id = id;
  if (pr_index_put(st, &st->seq_by_id, id, st->nseqs, st->nseqs + 1, pr_seq_key) != 0) return NULL;
  st->nseqs++;
  return q;
}

static void pr_seq_clear(lp_mem_t *mem, pr_seq_t *q) {
  pr_strmap_free(mem, &q->names);
  pr_strmap_free(mem, &q->cats);
  pr_strmap_free(mem, &q->dnames);
  q->clock_id = 0;
  q->track = 0;
  q->has_track = false;
  q->nclocks = 0;
  q->has_ref = false;
}

static pr_track_t *pr_track(pr_state_t *st, uint64_t uuid) {
  const lp__index_t *ix = &st->track_by_uuid;
  for (uint32_t at, e = lp__index_first(ix, lp__hash64(uuid), &at); e; e = lp__index_next(ix, &at))
    if (st->tracks[e - 1].uuid == uuid) return &st->tracks[e - 1];
  return NULL;
}

static int pr_bad(pr_state_t *st, const char *what) {
  lp_report(&st->pos, "%s", what);
  return LP_READ_BAD;
}

/* ---- packets ---- */

/* The interned entries of one kind: 0, or LP_READ_BAD. */
static int pr_interned(pr_state_t *st, pr_strmap_t *m, const uint8_t *p, size_t len) {
  lp_pb_field_t f;
  const uint8_t *e = p + len;
  uint64_t iid = 0;
  const uint8_t *name = (const uint8_t *)"";
  size_t nlen = 0;
  int r;
  while ((r = lp_pb_next(&p, e, &f)) > 0) {
    if (f.num == IN_IID && f.wire == 0) iid = f.v;
    if (f.num == IN_NAME && f.wire == 2) {
      name = f.p;
      nlen = f.len;
    }
  }
  if (r < 0) return pr_bad(st, "malformed interned entry (expected iid and name)");
  if (nlen > LP_READ_MAX_NAME) return pr_bad(st, "an interned name longer than 1 MiB: no name is that long");
  if (pr_put(st->mem, m, iid, name, nlen) != 0) return lp_mem_fail(st->mem, &st->pos);
  return 0;
}

static int pr_interned_data(pr_state_t *st, pr_seq_t *q, const uint8_t *p, size_t len) {
  lp_pb_field_t f;
  const uint8_t *e = p + len;
  int r;
  while ((r = lp_pb_next(&p, e, &f)) > 0) {
    if (f.wire != 2) continue;
    pr_strmap_t *m = f.num == ID_CATEGORIES ? &q->cats : f.num == ID_NAMES ? &q->names : f.num == ID_DEBUG_NAMES ? &q->dnames : NULL;
    if (m && pr_interned(st, m, f.p, f.len)) return LP_READ_BAD;
  }
  return r < 0 ? pr_bad(st, "malformed interned_data") : 0;
}

/*
 * a + b for times and clock offsets, held at INT64_MIN or INT64_MAX past
 * them: a file's clocks may say anything up to 2^63 - 1 ns, and a time so
 * far is then refused as beyond ±2^62 ns, neither an overflow nor wrapped
 * back into range.
 */
static int64_t pr_add(int64_t a, int64_t b) {
  int64_t s;
  if (!__builtin_add_overflow(a, b, &s)) return s;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

static int pr_clock_snapshot(pr_state_t *st, pr_seq_t *q, const uint8_t *p, size_t len) {
  lp_pb_field_t f, g;
  const uint8_t *e = p + len;
  pr_clock_t cl[16];
  size_t n = 0;
  int r;
  while ((r = lp_pb_next(&p, e, &f)) > 0) {
    if (f.num != CS_CLOCKS || f.wire != 2) continue;
    const uint8_t *c = f.p, *ce = f.p + f.len;
    pr_clock_t k = {0, 0, 0, 0, 1, false};
    int r2;
    while ((r2 = lp_pb_next(&c, ce, &g)) > 0) {
      if (g.num == CLK_ID) k.id = (uint32_t)g.v;
      if (g.num == CLK_TS) k.snap = g.v;
      if (g.num == CLK_INCREMENTAL) k.incremental = g.v != 0;
      if (g.num == CLK_UNIT_MULTIPLIER) k.mult = g.v ? g.v : 1;
    }
    if (r2 < 0) return pr_bad(st, "malformed clock in a clock snapshot");
    if (n < sizeof cl / sizeof cl[0]) cl[n++] = k;
  }
  if (r < 0) return pr_bad(st, "malformed clock snapshot");
  /* BOOTTIME at the snapshot: given, or through a known offset. */
  int64_t boot = 0;
  bool have_boot = false;
  for (size_t i = 0; i < n && !have_boot; i++)
    if (cl[i].id == 6) {
      boot = (int64_t)(cl[i].snap & (UINT64_MAX >> 1));
      have_boot = true;
    }
  for (size_t i = 0; i < n && !have_boot; i++)
    if (cl[i].id < 64 && st->has_offset[cl[i].id]) {
      boot = pr_add((int64_t)(cl[i].snap & (UINT64_MAX >> 1)), st->offset[cl[i].id]);
      have_boot = true;
    }
  for (size_t i = 0; i < n && !have_boot; i++)
    if (cl[i].id < 64) { /* nothing ties it to BOOTTIME: it becomes the time base */
      boot = (int64_t)(cl[i].snap & (UINT64_MAX >> 1));
      have_boot = true;
    }
  for (size_t i = 0; i < n; i++) {
    if (cl[i].id < 64) {
      st->offset[cl[i].id] = pr_add(boot, -(int64_t)(cl[i].snap & (UINT64_MAX >> 1)));
      st->has_offset[cl[i].id] = true;
    } else if (cl[i].id < 128 && q) {
      size_t k = 0;
      while (k < q->nclocks && q->clocks[k].id != cl[i].id) k++;
      if (k == q->nclocks) {
        if (q->nclocks == sizeof q->clocks / sizeof q->clocks[0]) continue;
        q->nclocks++;
      }
      cl[i].boot = boot;
      cl[i].last = cl[i].snap;
      q->clocks[k] = cl[i];
    }
  }
  return 0;
}

/* The time of a packet on BOOTTIME; false if its clock is not known. */
static bool pr_time(pr_state_t *st, pr_seq_t *q, uint32_t clock, uint64_t ts, int64_t *out) {
  if (clock == 0) clock = q && q->clock_id ? q->clock_id : CLOCK_BOOTTIME_ID;
  if (clock >= CLOCK_LANE) { /* a clock of the sequence's own */
    for (uint32_t k = 0; q && k < q->nclocks; k++) {
      pr_clock_t *c = &q->clocks[k];
      if (c->id != clock) continue;
      uint64_t v = c->incremental ? (c->last += ts * c->mult) : ts * c->mult;
      *out = pr_add(c->boot, (int64_t)(v - c->snap)); /* the difference wraps like the clock does */
      return true;
    }
    return false;
  }
  *out = pr_add((int64_t)(ts & (UINT64_MAX >> 1)), st->has_offset[clock] ? st->offset[clock] : 0);
  return true;
}

/*
 * The tid a labelprof track's description says ("labelprof track, tid N
 * ..."), N at or above PR_FIRST_LANE: its lane in labelprof's JSON. 0 for
 * any other description, or none.
 */
static int64_t pr_said_tid(const uint8_t *desc, size_t len) {
  static const char prefix[] = LP__TRACK_DESCRIPTION;
  size_t n = sizeof prefix - 1, i = n;
  if (!desc || len <= n || memcmp(desc, prefix, n) != 0) return 0;
  int64_t tid = 0;
  for (; i < len && desc[i] >= '0' && desc[i] <= '9'; i++) {
    tid = tid * 10 + (desc[i] - '0');
    if (tid > INT32_MAX) return 0;
  }
  return i > n && tid >= PR_FIRST_LANE ? tid : 0;
}

static uint64_t pr_lane_key(int64_t pid, int64_t tid) { return (uint64_t)pid * 0x9e3779b97f4a7c15ull ^ (uint64_t)tid; }
static uint64_t pr_track_uuid_key(const pr_state_t *st, size_t pos) { return st->tracks[pos].uuid; }
static uint64_t pr_track_lane_key(const pr_state_t *st, size_t pos) {
  return pr_lane_key(st->tracks[pos].pid, st->tracks[pos].tid);
}

/* Whether a track of process pid is the lane (pid, tid) already. */
static bool pr_tid_taken(const pr_state_t *st, int64_t pid, int64_t tid) {
  const lp__index_t *ix = &st->track_by_lane;
  for (uint32_t at, e = lp__index_first(ix, lp__hash64(pr_lane_key(pid, tid)), &at); e; e = lp__index_next(ix, &at))
    if (st->tracks[e - 1].pid == pid && st->tracks[e - 1].tid == tid) return true;
  return false;
}

static int pr_descriptor(pr_state_t *st, pr_seq_t *q, const uint8_t *p, size_t len) {
  lp_pb_field_t f, g;
  const uint8_t *e = p + len;
  uint64_t uuid = 0, parent = 0;
  int64_t pid = 0, tid = 0;
  const uint8_t *name = NULL, *tname = NULL, *pname = NULL, *desc = NULL;
  size_t nlen = 0, tnlen = 0, pnlen = 0, dlen = 0;
  bool thread = false, process = false, counter = false;
  int r;
  while ((r = lp_pb_next(&p, e, &f)) > 0) {
    switch (f.num) {
    case TD_UUID: uuid = f.v; break;
    case TD_PARENT: parent = f.v; break;
    case TD_DESCRIPTION:
      if (f.wire == 2) {
        desc = f.p;
        dlen = f.len;
      }
      break;
    case TD_NAME: case TD_STATIC_NAME: case TD_ATRACE_NAME:
      if (f.wire == 2) {
        name = f.p;
        nlen = f.len;
      }
      break;
    case TD_COUNTER: counter = true; break;
    case TD_PROCESS: case TD_THREAD: {
      if (f.wire != 2) break;
      const uint8_t *d = f.p, *de = f.p + f.len;
      int r2;
      if (f.num == TD_PROCESS) process = true;
      else thread = true;
      _Static_assert(PD_PID == THD_PID, "a process's and a thread's pid are one field");
      while ((r2 = lp_pb_next(&d, de, &g)) > 0) {
        if (g.num == PD_PID && g.wire == 0) pid = (int64_t)(int32_t)g.v;
        if (f.num == TD_THREAD && g.num == THD_TID && g.wire == 0) tid = (int64_t)g.v;
        if (f.num == TD_THREAD && g.num == THD_NAME && g.wire == 2) {
          tname = g.p;
          tnlen = g.len;
        }
        if (f.num == TD_PROCESS && g.num == PD_NAME && g.wire == 2) {
          pname = g.p;
          pnlen = g.len;
        }
      }
      if (r2 < 0) return pr_bad(st, "malformed process or thread descriptor");
      break;
    }
    default: break;
    }
  }
  if (r < 0) return pr_bad(st, "malformed track descriptor");
  if (thread && !tname) {
    tname = name;
    tnlen = nlen;
  }
  if (thread && q) { /* the sequence's own thread, for its events that name no track */
    q->pid = pid;
    q->tid = tid;
    q->has_thread = true;
  }
  if (!thread) {
    const pr_track_t *up = parent ? pr_track(st, parent) : NULL;
    if (!process) pid = up ? up->pid : 0;
  }
  pr_track_t *t = pr_track(st, uuid);
  bool fresh = !t;
  int64_t was_pid = t ? t->pid : 0, was_tid = t ? t->tid : 0;
  if (!t) {
    if (st->ntracks == st->captracks) {
      size_t cap = st->captracks ? st->captracks * 2 : 32;
      pr_track_t *nt = lp_mem_realloc(st->mem, st->tracks, st->captracks * sizeof *nt, cap * sizeof *nt);
      if (!nt) return lp_mem_fail(st->mem, &st->pos);
      st->tracks = nt;
      st->captracks = cap;
    }
    /* A track of its own (not a thread's, not the process's, not a counter) is a lane of its own: its tid is
       above any thread's. labelprof's tracks say the tid its JSON gives them; others are numbered from
       1000000000 up in the file's order, as the library's JSON numbers its tracks, past the tids said. */
    int64_t own = 0;
    if (!thread && !process && !counter) {
      own = pr_said_tid(desc, dlen);
      if (own && !pr_tid_taken(st, pid, own))
        st->nsaid++;
      else
        do own = PR_FIRST_LANE + st->next_lane++;
        while (st->nsaid && pr_tid_taken(st, pid, own)); /* only a tid said can be taken already */
    }
    t = &st->tracks[st->ntracks++];
    memset(t, 0, sizeof *t);
    t->uuid = uuid;
    t->tid = thread ? tid : own;
  } else if (thread) {
    t->tid = tid;
  }
  t->pid = pid;
  t->counter = counter;
  size_t pos = (size_t)(t - st->tracks);
  if ((fresh && pr_index_put(st, &st->track_by_uuid, uuid, pos, st->ntracks, pr_track_uuid_key) != 0) ||
      ((fresh || t->pid != was_pid || t->tid != was_tid) &&
       pr_index_put(st, &st->track_by_lane, pr_lane_key(t->pid, t->tid), pos, st->ntracks, pr_track_lane_key) != 0))
    return lp_mem_fail(st->mem, &st->pos);
  const uint8_t *shown = thread ? tname : process ? pname : name;
  size_t slen = thread ? tnlen : process ? pnlen : nlen;
  if (slen > LP_READ_MAX_NAME) return pr_bad(st, "a track's name longer than 1 MiB: no name is that long");
  char *c = pr_name_copy(st->mem, shown, slen);
  if (!c) return lp_mem_fail(st->mem, &st->pos);
  pr_name_free(st->mem, t->name);
  t->name = c;
  if (counter || (!shown && !process)) return 0;
  lp_event_t ev = {.kind = process ? LP_EV_PROCESS_NAME : LP_EV_THREAD_NAME, .pid = t->pid, .tid = t->tid,
                   .name = c, .pos = st->pos};
  return st->sink->event(st->sink->ctx, &ev);
}

/*
 * labelprof's session note: its debug annotations passed on as the JSON's
 * otherData is (LP_EV_FILE_INFO "otherData.KEY"), for the views' notes on
 * drops. The session's times are CLOCK_MONOTONIC there; they are put on the
 * events' clock (BOOTTIME) here, so the file's time base stays 0.
 */
#define PR_NOTE_KEYS 6
static const char *const pr_note_keys[PR_NOTE_KEYS] = {"events_dropped", "budget_bytes",  "session_start_ns",
                                                       "session_stop_ns", "first_drop_ns", "file_start_ns"};

/*
 * What places the file in time (labelprof merge): passed on as written, its
 * CLOCK_MONOTONIC times too; "perfetto.monotonic_offset_ns" then says what
 * was added to CLOCK_MONOTONIC to put the events on BOOTTIME.
 */
#define PR_RAW_KEYS 9
static const char *const pr_raw_keys[PR_RAW_KEYS] = {
    "boot_id",           "timens_monotonic_ns",    "timens_boottime_ns",
    "realtime_start_ns", "realtime_start_mono_ns", "realtime_start_uncertainty_ns",
    "realtime_end_ns",   "realtime_end_mono_ns",   "realtime_end_uncertainty_ns"};
typedef struct pr_raw {
  unsigned has; /* bit k: pr_raw_keys[k] said */
  char text[PR_RAW_KEYS][40];
} pr_raw_t;

static int pr_session_note(pr_state_t *st, const uint64_t *said, const bool *has_said, const char *policy,
                           const pr_raw_t *raw) {
  char key[64], text[24];
  int r;
  for (int k = 0; k < PR_RAW_KEYS; k++) {
    if (!(raw->has & 1u << k)) continue;
    snprintf(key, sizeof key, "otherData.%s", pr_raw_keys[k]);
    lp_event_t ev = {.kind = LP_EV_FILE_INFO, .name = key, .text = raw->text[k], .pos = st->pos};
    if ((r = st->sink->event(st->sink->ctx, &ev)) != 0) return r;
  }
  if (raw->has && st->has_offset[3]) {
    snprintf(text, sizeof text, "%lld", (long long)st->offset[3]);
    lp_event_t ev = {.kind = LP_EV_FILE_INFO, .name = "perfetto.monotonic_offset_ns", .text = text, .pos = st->pos};
    if ((r = st->sink->event(st->sink->ctx, &ev)) != 0) return r;
  }
  for (int k = 0; k < PR_NOTE_KEYS; k++) {
    if (!has_said[k]) continue;
    uint64_t v = said[k];
    if (k >= 2) { /* a time: on the events' clock, as their ts are */
      if (v >= (uint64_t)PR_TIME_LIMIT) return pr_bad(st, "a session time beyond 2^62 ns in labelprof's notes");
      int64_t t = pr_add((int64_t)v, st->has_offset[3] ? st->offset[3] : 0);
      if (t < 0 || t >= PR_TIME_LIMIT) return pr_bad(st, "a session time beyond 2^62 ns in labelprof's notes");
      v = (uint64_t)t;
    }
    snprintf(key, sizeof key, "otherData.%s", pr_note_keys[k]);
    snprintf(text, sizeof text, "%llu", (unsigned long long)v);
    lp_event_t ev = {.kind = LP_EV_FILE_INFO, .name = key, .text = text, .pos = st->pos};
    if ((r = st->sink->event(st->sink->ctx, &ev)) != 0) return r;
  }
  if (!policy[0]) return 0;
  lp_event_t ev = {.kind = LP_EV_FILE_INFO, .name = "otherData.policy", .text = policy, .pos = st->pos};
  return st->sink->event(st->sink->ctx, &ev);
}

static int pr_track_event(pr_state_t *st, pr_seq_t *q, bool timed, int64_t ts, const uint8_t *p, size_t len) {
  lp_pb_field_t f, g;
  const uint8_t *e = p + len;
  uint64_t type = 0, track = q && q->has_track ? q->track : 0, name_iid = 0;
  bool has_name_iid = false, has_value = false, dvalue = false;
  int64_t value = 0;
  double dv = 0;
  /* The name: "", interned (the sequence's copy), or given inline (copied into st->name); never cut. */
  const char *name = "";
  char layer[64], phase[64], mode[64];
  layer[0] = phase[0] = mode[0] = '\0';
  st->cats_len = 0;
  bool has_name = false;
  int legacy_phase = 0, legacy_scope = 0;
  int64_t legacy_dur = -1, pid_override = 0, tid_override = 0, us = 0;
  bool has_type = false, has_track = false, has_pid_override = false, has_tid_override = false;
  int us_kind = 0; /* legacy times: 1 timestamp_delta_us, 2 timestamp_absolute_us */
  /* What labelprof's session note says of the file (its debug annotations), kept in case this event is it. */
  uint64_t said[PR_NOTE_KEYS];
  bool has_said[PR_NOTE_KEYS] = {false};
  char policy[16] = "";
  pr_raw_t raw;
  raw.has = 0;
  int r;
  while ((r = lp_pb_next(&p, e, &f)) > 0) {
    switch (f.num) {
    case TE_TYPE: type = f.v; has_type = true; break;
    case TE_TRACK_UUID: track = f.v; has_track = true; break;
    case TE_DELTA_US: case TE_ABSOLUTE_US:
      if (f.wire == 0) {
        us = (int64_t)f.v;
        if (f.num == TE_DELTA_US || us_kind != 1) us_kind = f.num == TE_DELTA_US ? 1 : 2; /* a delta wins, as in Perfetto */
      }
      break;
    case TE_NAME_IID: name_iid = f.v; has_name_iid = true; break;
    case TE_NAME:
      if (f.wire == 2) {
        if (f.len > LP_READ_MAX_NAME) return pr_bad(st, "an event's name longer than 1 MiB: no label is that long");
        size_t n = lp_name_len(f.p, f.len) + 1;
        if (n > st->name_cap) {
          char *b = lp_mem_realloc(st->mem, st->name, st->name_cap, n);
          if (!b) return lp_mem_fail(st->mem, &st->pos);
          st->name = b;
          st->name_cap = n;
        }
        name = lp_name_put(st->name, f.p, f.len);
        has_name = true;
      }
      break;
    case TE_COUNTER_VALUE: value = (int64_t)f.v; has_value = true; break;
    case TE_DOUBLE_COUNTER_VALUE:
      if (f.wire == 1) {
        memcpy(&dv, &f.v, sizeof dv);
        has_value = dvalue = true;
      }
      break;
    case TE_CATEGORY_IIDS: case TE_CATEGORIES: {
      /* Categories, interned or inline, joined with ',' in st->cats. */
      const char *c = NULL;
      size_t n = 0;
      if (f.num == TE_CATEGORY_IIDS) {
        if (!(c = q ? pr_get(&q->cats, f.v) : NULL)) return pr_bad(st, "a category iid that was not interned on its sequence");
        n = strlen(c);
      } else if (f.wire == 2) {
        if (f.len > LP_READ_MAX_NAME) return pr_bad(st, "a category longer than 1 MiB: no name is that long");
        n = lp_name_len(f.p, f.len);
      } else {
        break;
      }
      size_t need = st->cats_len + 1 + n + 1;
      if (need > st->cats_cap) {
        size_t cap = st->cats_cap ? st->cats_cap : 256;
        while (cap < need) cap *= 2;
        char *b = lp_mem_realloc(st->mem, st->cats, st->cats_cap, cap);
        if (!b) return lp_mem_fail(st->mem, &st->pos);
        st->cats = b;
        st->cats_cap = cap;
      }
      if (st->cats_len) st->cats[st->cats_len++] = ',';
      if (c)
        memcpy(st->cats + st->cats_len, c, n + 1);
      else
        lp_name_put(st->cats + st->cats_len, f.p, f.len);
      st->cats_len += n;
      break;
    }
    case TE_DEBUG: {
      if (f.wire != 2) break;
      const uint8_t *d = f.p, *de = f.p + f.len;
      char an[64], av[64];
      an[0] = av[0] = '\0';
      uint64_t au = 0;
      bool has_au = false, has_ai = false, has_av = false;
      int r2;
      while ((r2 = lp_pb_next(&d, de, &g)) > 0) {
        if (g.num == DA_NAME && g.wire == 2) pr_copy(an, sizeof an, g.p, g.len);
        if (g.num == DA_NAME_IID && g.wire == 0) {
          const char *s = q ? pr_get(&q->dnames, g.v) : NULL;
          if (s) pr_copy(an, sizeof an, s, strlen(s));
        }
        if (g.num == DA_STRING && g.wire == 2) {
          pr_copy(av, sizeof av, g.p, g.len);
          has_av = true;
        }
        if ((g.num == DA_UINT || g.num == DA_INT) && g.wire == 0) {
          au = g.v;
          has_au = g.num == DA_UINT;
          has_ai = g.num == DA_INT;
        }
      }
      if (r2 < 0) return pr_bad(st, "malformed debug annotation");
      if (has_au || has_ai || has_av)
        for (int k = 0; k < PR_RAW_KEYS; k++) {
          if (strcmp(an, pr_raw_keys[k]) != 0) continue;
          if (has_av)
            pr_copy(raw.text[k], sizeof raw.text[k], av, strlen(av));
          else if (has_ai)
            snprintf(raw.text[k], sizeof raw.text[k], "%lld", (long long)(int64_t)au);
          else
            snprintf(raw.text[k], sizeof raw.text[k], "%llu", (unsigned long long)au);
          raw.has |= 1u << k;
        }
      for (int k = 0; k < PR_NOTE_KEYS && has_au; k++)
        if (strcmp(an, pr_note_keys[k]) == 0) {
          said[k] = au;
          has_said[k] = true;
        }
      if (strcmp(an, "policy") == 0) memcpy(policy, av, sizeof policy - 1);
      _Static_assert(sizeof layer == sizeof av && sizeof phase == sizeof av && sizeof mode == sizeof av, "sizes");
      if (strcmp(an, "layer") == 0) memcpy(layer, av, sizeof av);
      if (strcmp(an, "phase") == 0) memcpy(phase, av, sizeof av);
      if (strcmp(an, "mode") == 0) memcpy(mode, av, sizeof av);
      break;
    }
    case TE_LEGACY: { /* legacy_event: phase and duration */
      if (f.wire != 2) break;
      const uint8_t *d = f.p, *de = f.p + f.len;
      int r2;
      while ((r2 = lp_pb_next(&d, de, &g)) > 0) {
        if (g.num == LE_NAME_IID && g.wire == 0) {
          name_iid = g.v;
          has_name_iid = true;
        }
        if (g.num == LE_PHASE && g.wire == 0) legacy_phase = (int)g.v;
        if (g.num == LE_DURATION_US && g.wire == 0) legacy_dur = (int64_t)g.v;
        if (g.num == LE_INSTANT_SCOPE && g.wire == 0) legacy_scope = (int)g.v;
        if (g.num == LE_PID_OVERRIDE && g.wire == 0) {
          pid_override = (int32_t)g.v;
          has_pid_override = true;
        }
        if (g.num == LE_TID_OVERRIDE && g.wire == 0) {
          tid_override = (int32_t)g.v;
          has_tid_override = true;
        }
      }
      if (r2 < 0) return pr_bad(st, "malformed legacy event");
      break;
    }
    default: break;
    }
  }
  if (r < 0) return pr_bad(st, "malformed track event");
  if (has_name_iid) {
    const char *s = q ? pr_get(&q->names, name_iid) : NULL;
    if (s) {
      name = s;
      has_name = true;
    } else {
      /* Never interned on the sequence (or before its state was cleared): kept without a name, as Perfetto keeps
         it, and counted for the file's notes. */
      name = "";
      has_name = false;
      st->unknown_names++;
    }
  }
  if (us_kind) {
    /* Legacy times, in microseconds on MONOTONIC: a delta from the sequence's reference, or absolute. */
    if (us <= -PR_TIME_LIMIT / 1000 || us >= PR_TIME_LIMIT / 1000) return pr_bad(st, "a time beyond ±2^62 ns");
    int64_t mono = us * 1000;
    if (us_kind == 1) {
      if (!q || !q->has_ref) return 0; /* no ThreadDescriptor since the state was cleared: skipped, as Perfetto does */
      mono += q->ref_ns;
      if (mono <= -PR_TIME_LIMIT || mono >= PR_TIME_LIMIT) return pr_bad(st, "a time beyond ±2^62 ns");
      q->ref_ns = mono;
    }
    ts = pr_add(mono, st->has_offset[3] ? st->offset[3] : 0);
    timed = true;
  }
  if (!timed) return pr_bad(st, "a track event without a time (no timestamp, or its clock was never defined)");
  if (ts <= -PR_TIME_LIMIT || ts >= PR_TIME_LIMIT) return pr_bad(st, "a time beyond ±2^62 ns");
  pr_track_t *t = pr_track(st, track);
  lp_event_t ev = {.pid = t ? t->pid : 0, .tid = t ? t->tid : (int64_t)(track & INT32_MAX), .ts = ts,
                   .name = name, .category = st->cats_len ? st->cats : NULL, .layer = layer[0] ? layer : NULL,
                   .phase = phase[0] ? phase : NULL, .mode = mode[0] ? mode : NULL, .pos = st->pos};
  if (!track) {
    /* No track (none given, no default), or track 0 for a legacy event: the thread that writes the sequence, as
       its ThreadDescriptor or its thread's track descriptor says, with the legacy event's pid and tid
       overrides; else the trace's default track, lane (0, 0). */
    bool seq_thread = q && q->has_thread && (!has_track || !has_type);
    if (seq_thread || has_pid_override || (has_tid_override && q && q->has_thread)) {
      ev.pid = has_pid_override ? pid_override : q->pid;
      ev.tid = has_tid_override ? tid_override : has_pid_override ? 0 : q->tid;
    }
  }
  if (t && ev.pid == t->pid && ev.tid == t->tid && t->tid >= PR_FIRST_LANE && !t->counter && t->name && !t->name[0] &&
      name[0] && type != 2 && legacy_phase != 'E') {
    /* A track of its own without a name takes its first event's, as in Perfetto. */
    size_t n = strlen(name) + 1;
    char *c = lp_mem_realloc(st->mem, NULL, 0, n);
    if (!c) return lp_mem_fail(st->mem, &st->pos);
    memcpy(c, name, n);
    pr_name_free(st->mem, t->name);
    t->name = c;
    lp_event_t tn = {.kind = LP_EV_THREAD_NAME, .pid = ev.pid, .tid = ev.tid, .name = c, .pos = st->pos};
    if ((r = st->sink->event(st->sink->ctx, &tn)) != 0) return r;
  }
  if (legacy_phase == 'i' || legacy_phase == 'I') {
    if (legacy_scope == LE_SCOPE_GLOBAL) ev.pid = ev.tid = 0; /* the trace's own lane */
    if (legacy_scope == LE_SCOPE_PROCESS) ev.tid = 0;        /* the process's */
  }
  if (type == 0 && legacy_phase) {
    switch (legacy_phase) {
    case 'B': type = TYPE_SLICE_BEGIN; break;
    case 'E': type = TYPE_SLICE_END; break;
    case 'I': case 'i': type = TYPE_INSTANT; break;
    case 'X':
      if (legacy_dur < 0 || legacy_dur > PR_TIME_LIMIT / 1000) return pr_bad(st, "a complete event's duration out of range");
      ev.kind = LP_EV_COMPLETE;
      ev.dur = legacy_dur * 1000;
      if (ts + ev.dur >= PR_TIME_LIMIT) return pr_bad(st, "a time beyond ±2^62 ns");
      return st->sink->event(st->sink->ctx, &ev);
    default: {
      ev.kind = LP_EV_SKIPPED;
      char ph[2] = {(char)legacy_phase, '\0'};
      ev.name = ph;
      return st->sink->event(st->sink->ctx, &ev);
    }
    }
  }
  switch (type) {
  case TYPE_SLICE_BEGIN: ev.kind = LP_EV_BEGIN; break;
  case TYPE_SLICE_END: ev.kind = LP_EV_END; ev.name = ""; break;
  case TYPE_INSTANT:
    if (has_name && strcmp(name, "labelprof session") == 0 && t && t->tid == 0) /* the session's note */
      return pr_session_note(st, said, has_said, policy, &raw);
    ev.kind = LP_EV_INSTANT;
    break;
  case TYPE_COUNTER:
    if (!has_value) return pr_bad(st, "a counter event without a value");
    ev.kind = LP_EV_COUNTER;
    ev.name = t && t->name ? t->name : name;
    {
      /* On the lane of the thread that recorded it (its sequence's track), as in the JSON; else the process's. */
      const pr_track_t *own = q && q->has_track ? pr_track(st, q->track) : NULL;
      ev.pid = own ? own->pid : t ? t->pid : 0;
      ev.tid = own ? own->tid : 0;
    }
    ev.series = ev.name;
    ev.value = dvalue ? dv : (double)value;
    break;
  default:
    ev.kind = LP_EV_SKIPPED;
    ev.name = "track event";
    break;
  }
  return st->sink->event(st->sink->ctx, &ev);
}

/*
 * The legacy ThreadDescriptor and ProcessDescriptor packets (Chrome's before
 * track descriptors): the thread that writes the sequence, with the reference
 * of its times in microseconds, and the thread's or the process's name.
 */
static int pr_legacy_descriptor(pr_state_t *st, pr_seq_t *q, bool thread, const uint8_t *p, size_t len) {
  lp_pb_field_t f;
  const uint8_t *e = p + len;
  int64_t pid = 0, tid = 0, ref_us = 0;
  const uint8_t *name = NULL;
  size_t nlen = 0;
  int r;
  while ((r = lp_pb_next(&p, e, &f)) > 0) {
    if (f.num == PD_PID && f.wire == 0) pid = (int32_t)f.v; /* THD_PID too */
    if (thread && f.num == THD_TID && f.wire == 0) tid = (int64_t)f.v;
    if (thread && f.num == THD_REFERENCE_US && f.wire == 0) ref_us = (int64_t)f.v;
    if (f.num == (thread ? (unsigned)THD_NAME : (unsigned)PD_NAME) && f.wire == 2) {
      name = f.p;
      nlen = f.len;
    }
  }
  if (r < 0) return pr_bad(st, thread ? "malformed thread descriptor" : "malformed process descriptor");
  if (thread) {
    if (ref_us <= -PR_TIME_LIMIT / 1000 || ref_us >= PR_TIME_LIMIT / 1000)
      return pr_bad(st, "a thread descriptor's reference time beyond ±2^62 ns");
    q->pid = pid;
    q->tid = tid;
    q->has_thread = true;
    q->ref_ns = ref_us * 1000;
    q->has_ref = true;
  }
  if (!name) return 0;
  if (nlen > LP_READ_MAX_NAME) return pr_bad(st, "a thread's or process's name longer than 1 MiB: no name is that long");
  char *c = pr_name_copy(st->mem, name, nlen);
  if (!c) return lp_mem_fail(st->mem, &st->pos);
  lp_event_t ev = {.kind = thread ? LP_EV_THREAD_NAME : LP_EV_PROCESS_NAME, .pid = pid, .tid = thread ? tid : 0,
                   .name = c, .pos = st->pos};
  r = st->sink->event(st->sink->ctx, &ev);
  pr_name_free(st->mem, c);
  return r;
}

static int pr_packet(pr_state_t *st, const uint8_t *p, size_t len) {
  lp_pb_field_t f;
  const uint8_t *e = p, *end = p + len;
  uint32_t seq = 0, flags = 0, clock = 0;
  uint64_t ts = 0;
  bool has_ts = false, cleared = false;
  const uint8_t *te = NULL, *td = NULL, *in = NULL, *cs = NULL, *def = NULL, *thd = NULL, *prd = NULL;
  size_t tel = 0, tdl = 0, inl = 0, csl = 0, defl = 0, thdl = 0, prdl = 0;
  int r;
  while ((r = lp_pb_next(&e, end, &f)) > 0) {
    bool ld = f.wire == 2, vi = f.wire == 0;
    switch (f.num) {
    case TP_SEQ_ID: if (vi) seq = (uint32_t)f.v; break;
    case TP_SEQ_FLAGS: if (vi) flags = (uint32_t)f.v; break;
    case TP_INCREMENTAL_CLEARED: if (vi) cleared = f.v != 0; break;
    case TP_TIMESTAMP: if (vi) { ts = f.v; has_ts = true; } break;
    case TP_CLOCK_ID: if (vi) clock = (uint32_t)f.v; break;
    case TP_TRACK_EVENT: if (ld) { te = f.p; tel = f.len; } break;
    case TP_TRACK_DESCRIPTOR: if (ld) { td = f.p; tdl = f.len; } break;
    case TP_INTERNED: if (ld) { in = f.p; inl = f.len; } break;
    case TP_CLOCK_SNAPSHOT: if (ld) { cs = f.p; csl = f.len; } break;
    case TP_DEFAULTS: if (ld) { def = f.p; defl = f.len; } break;
    case TP_THREAD_DESCRIPTOR: if (ld) { thd = f.p; thdl = f.len; } break;
    case TP_PROCESS_DESCRIPTOR: if (ld) { prd = f.p; prdl = f.len; } break;
    default: break;
    }
  }
  if (r < 0) return pr_bad(st, "malformed trace packet (a varint or a length runs past the packet)");
  pr_seq_t *q = pr_seq(st, seq);
  if (!q) return lp_mem_fail(st->mem, &st->pos);
  if ((flags & SEQ_CLEARED) || cleared) {
    pr_seq_clear(st->mem, q);
    q->valid = true;
  }
  if ((flags & SEQ_NEEDS_STATE) && !q->valid) return 0; /* its state was lost (or never written): skipped */
  if (def) {
    const uint8_t *d = def, *de = def + defl;
    lp_pb_field_t g, h;
    int r2;
    while ((r2 = lp_pb_next(&d, de, &g)) > 0) {
      if (g.num == DEF_CLOCK_ID && g.wire == 0) q->clock_id = (uint32_t)g.v;
      if (g.num == DEF_TRACK_EVENT && g.wire == 2) {
        const uint8_t *k = g.p, *ke = g.p + g.len;
        int r3;
        while ((r3 = lp_pb_next(&k, ke, &h)) > 0)
          if (h.num == TED_TRACK_UUID && h.wire == 0) {
            q->track = h.v;
            q->has_track = true;
          }
        if (r3 < 0) return pr_bad(st, "malformed track event defaults");
      }
    }
    if (r2 < 0) return pr_bad(st, "malformed trace packet defaults");
  }
  if (cs && pr_clock_snapshot(st, q, cs, csl)) return LP_READ_BAD;
  if (in && pr_interned_data(st, q, in, inl)) return LP_READ_BAD;
  if (td && (r = pr_descriptor(st, q, td, tdl)) != 0) return r;
  if (prd && (r = pr_legacy_descriptor(st, q, false, prd, prdl)) != 0) return r;
  if (thd && (r = pr_legacy_descriptor(st, q, true, thd, thdl)) != 0) return r;
  if (te) {
    int64_t t = 0;
    bool timed = has_ts && pr_time(st, q, clock, ts, &t);
    return pr_track_event(st, q, timed, t, te, tel);
  }
  if (has_ts && !cs) { /* keeps an incremental clock's value right for later packets */
    int64_t t;
    (void)pr_time(st, q, clock, ts, &t);
  }
  return 0;
}

static int pr_sniff(const unsigned char *head, size_t n) {
  /* Trace.packet (field 1, length-delimited), a plausible length, and a first field that parses. */
  if (n < 3 || head[0] != TRACE_PACKET_TAG) return 0;
  const uint8_t *p = head, *end = head + n;
  lp_pb_field_t f;
  if (lp_pb_next(&p, end, &f) <= 0) {
    /* the first packet is longer than the bytes peeked: its first field must at least start well */
    const uint8_t *b = head + 1;
    uint64_t len, v, flen;
    if (lp_pb_varint(&b, end, &len) || b >= end || len > PR_MAX_PACKET || len < (uint64_t)(end - b)) return 0;
    /* Its first field's tag, and for a message or a string its length: past the bytes peeked, within the packet. */
    const uint8_t *k = b;
    if (lp_pb_varint(&b, end, &v)) return 0;
    uint32_t wire = (uint32_t)(v & 7);
    if (v >> 3 == 0 || v >> 32 || (wire != 0 && wire != 1 && wire != 2 && wire != 5)) return 0;
    if (wire != 2) return 1;
    if (lp_pb_varint(&b, end, &flen)) return 0;
    return flen <= len - (uint64_t)(b - k);
  }
  const uint8_t *q = f.p, *qe = f.p + f.len;
  int r;
  while ((r = lp_pb_next(&q, qe, &f)) > 0) {
  }
  return r == 0;
}

static int pr_read(lp_input_t *in, const lp_sink_t *sink) {
  pr_state_t st;
  memset(&st, 0, sizeof st);
  st.in = in;
  st.sink = sink;
  st.pos.file = strcmp(lp_input_name(in), "-") == 0 ? "<stdin>" : lp_input_name(in);
  st.offset[6] = 0;
  st.has_offset[6] = true;
  st.mem = sink->mem;
  size_t cap = 1 << 16, have = 0, at = 0;
  uint64_t base = 0; /* the offset of buf[0] in the input */
  uint8_t *buf = lp_mem_realloc(st.mem, NULL, 0, cap);
  int rc = LP_READ_OK;
  bool eof = false;
  if (!buf) return lp_mem_fail(st.mem, &st.pos);
  for (;;) {
    /* A whole packet at buf + at: its tag, its length, its bytes. */
    size_t need = 0, hdr = 0;
    uint64_t len = 0;
    bool complete = false;
    if (have - at >= 1) {
      st.pos.offset = base + at;
      if (buf[at] != TRACE_PACKET_TAG) {
        uint8_t tag = buf[at];
        if ((tag & 7) > 5 || tag == 0) {
          rc = pr_bad(&st, "expected a trace packet (field 1 of Trace, length-delimited)");
          break;
        }
      }
      /* any field of Trace: packets (1) are read, others skipped; a tag of one byte is all Trace uses */
      size_t k = at + 1;
      int shift = 0;
      bool ended = false;
      uint32_t wire = buf[at] & 7;
      if (buf[at] & 0x80) {
        rc = pr_bad(&st, "expected a trace packet (field 1 of Trace, length-delimited)");
        break;
      }
      if (wire != 2) {
        rc = pr_bad(&st, "expected a trace packet (field 1 of Trace, length-delimited)");
        break;
      }
      while (k < have && shift <= 63) {
        len |= (uint64_t)(buf[k] & 0x7f) << shift;
        shift += 7;
        if (!(buf[k++] & 0x80)) {
          ended = true;
          break;
        }
      }
      if (shift > 63 || (ended && len > PR_MAX_PACKET)) {
        rc = pr_bad(&st, "a packet length larger than 256 MiB (not a Perfetto trace, or a damaged one)");
        break;
      }
      if (ended) {
        hdr = k - at;
        need = hdr + (size_t)len;
        complete = have - at >= need;
      }
    }
    if (complete) {
      if (buf[at] == TRACE_PACKET_TAG) rc = pr_packet(&st, buf + at + hdr, (size_t)len);
      at += need;
      if (rc) break;
      continue;
    }
    if (eof) {
      if (have > at) {
        st.pos.offset = base + at;
        rc = pr_bad(&st, "the file ends inside a packet (a truncated trace?)");
      }
      break;
    }
    /* More bytes: move what is left to the front, grow for a large packet. */
    memmove(buf, buf + at, have - at);
    have -= at;
    base += at;
    at = 0;
    if (need > cap) { /* a packet larger than the buffer: refused here, at its header, past --max-memory */
      size_t ncap = cap;
      while (ncap < need) ncap *= 2;
      uint8_t *nb = lp_mem_realloc(st.mem, buf, cap, ncap);
      if (!nb) {
        st.pos.offset = base;
        rc = lp_mem_fail(st.mem, &st.pos);
        break;
      }
      buf = nb;
      cap = ncap;
    }
    ssize_t n = lp_input_read(in, buf + have, cap - have);
    if (n < 0) {
      rc = LP_READ_BAD;
      break;
    }
    if (n == 0) eof = true;
    have += (size_t)n;
  }
  lp_mem_free(st.mem, buf, cap);
  if (rc == LP_READ_OK && st.unknown_names) {
    /* Said once, at the end: the views' notes count such events. */
    char n[24];
    snprintf(n, sizeof n, "%llu", (unsigned long long)st.unknown_names);
    lp_event_t ev = {.kind = LP_EV_FILE_INFO, .name = "perfetto.unknown_name_iids", .text = n, .pos = st.pos};
    rc = sink->event(sink->ctx, &ev);
  }
  for (size_t i = 0; i < st.nseqs; i++) pr_seq_clear(st.mem, &st.seqs[i]);
  lp_mem_free(st.mem, st.seqs, st.capseqs * sizeof *st.seqs);
  for (size_t i = 0; i < st.ntracks; i++) pr_name_free(st.mem, st.tracks[i].name);
  lp_mem_free(st.mem, st.tracks, st.captracks * sizeof *st.tracks);
  lp_index_free(&st.seq_by_id, st.mem);
  lp_index_free(&st.track_by_uuid, st.mem);
  lp_index_free(&st.track_by_lane, st.mem);
  lp_mem_free(st.mem, st.name, st.name_cap);
  lp_mem_free(st.mem, st.cats, st.cats_cap);
  return rc;
}

const lp_reader_t lp_perfetto_reader = {"perfetto", pr_sniff, pr_read};
