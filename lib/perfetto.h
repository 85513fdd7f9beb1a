/*
 * perfetto.h: private to export_perfetto.c and stream_encode.c, never
 * installed. The packets both Perfetto writers share: a sequence's
 * interning and clock, event packets, descriptors, the session's notes.
 * export_perfetto.c defines them; the stream's encoder uses them.
 */
#ifndef LABELPROF_PERFETTO_H
#define LABELPROF_PERFETTO_H

#include "internal.h"
#include "perfetto_proto.h" /* the field numbers, shared with the command's reader */

/*
 * Event packets do not carry SEQ_NEEDS_STATE: it tells a reader to skip a
 * packet whose sequence lost its state to a gap in the buffer, and a file
 * written here has no gap (a killed writer leaves whole packets, in order).
 * Their interned names are still resolved on their sequence. Two bytes an
 * event.
 */
/* What an event packet is made of. */
enum { PF_SLICE, PF_INSTANT, PF_COUNTER };
enum { PF_TRUNCATED = 1, PF_UNTERMINATED = 2, PF_OPEN = 4, PF_WORK = 8, PF_ABSOLUTE = 16 };
typedef struct lp__pf_rec {
  uint64_t ts, end; /* end: slices only (UINT64_MAX while open) */
  const void *key;  /* the site, or a track's work name */
  int64_t value;
  uint8_t kind, flags;
} lp__pf_rec_t;

/* A sequence's interned names (by key) and categories (by text), and its clock. */
typedef struct lp__pf_seq {
  lp__pb_t *pb;
  uint32_t id;
  uint64_t last; /* the incremental clock's value */
  const void **keys;
  uint32_t kmask, nkeys;
  uint64_t *iids;
  uint64_t *cat_of; /* the key's one category iid once interned, for the fast path; 0: none (or a layered site) */
  const char **cats; /* categories by iid - 1: levels, layers and phases, "track", and NVTX and ITT domains */
  uint32_t ncats, capcats;
  bool nomem;
} lp__pf_seq_t;

/* The slot of key on the sequence, or UINT32_MAX. */
static inline uint32_t lp__pf_find(const lp__pf_seq_t *q, const void *key) {
  if (!q->keys) return UINT32_MAX;
  for (uint32_t h = lp__ptr_home(key, q->kmask);; h = (h + 1) & q->kmask) {
    if (!q->keys[h]) return UINT32_MAX;
    if (q->keys[h] == key) return h;
  }
}

typedef struct lp__pf_counters {
  const void **keys; /* sites whose counter track is described (a name's first site, and others of its name once met) */
  uint64_t *uuids;   /* their tracks */
  size_t n, cap;
} lp__pf_counters_t;

/* A file being written: its packets, the process, the counter tracks described. */
typedef struct lp__pf_export {
  lp__jw_t *w;
  lp__pb_t pb;
  lp__pf_seq_t q;
  uint64_t pid, process_uuid;
  int64_t boot_offset;
  lp__pf_counters_t counters;
  uint32_t rank;
} lp__pf_export_t;

/* Forgets what the sequence interned, and starts it as sequence id with its clock at base. */
void lp__pf_seq_reset(lp__pf_seq_t *q, uint32_t id, uint64_t base);
/* The first packet of a sequence: incremental state cleared, the clock snapshot, the defaults. */
void lp__pf_seq_start(lp__pf_seq_t *q, uint64_t track_uuid, int64_t boot_offset);
/* A track's uuid: what, of process pid (never 0). */
uint64_t lp__pf_uuid(uint64_t pid, uint64_t what);
/* One event packet of type at ts; name: a begin's or instant's, to intern; counter_uuid: a counter's track. */
void lp__pf_event(lp__pf_seq_t *q, const lp__pf_rec_t *r, uint32_t type, uint64_t ts, uint64_t counter_uuid,
                  const char *name, bool end);
/* A ClockSnapshot of wall's REALTIME, CLOCK_MONOTONIC and BOOTTIME, on sequence seq; nothing without a reading. */
void lp__pf_wall_clock(lp__pb_t *pb, uint32_t seq, const lp__wall_t *wall, int64_t boot_offset);
/* The process's descriptor, on sequence seq (with flags), named name (NULL: the program's). */
void lp__pf_process(lp__pf_export_t *x, uint32_t seq, uint32_t flags, const char *name);
/* A lane's track descriptor, on its own sequence: a track under the process, or a thread with its name. */
void lp__pf_lane_descriptor(lp__pf_export_t *x, uint32_t seq, uint64_t uuid, bool track, const char *name,
                            uint64_t tid);
/* The counter track of a site (described on its name's first use, on x->q.id's sequence). */
uint64_t lp__pf_counter_track(lp__pf_export_t *x, const lp_site_t *site);
/* Debug annotations of a TrackEvent. */
void lp__pf_annotation_str(lp__pb_t *pb, const char *name, const char *value);
void lp__pf_annotation_uint(lp__pb_t *pb, const char *name, uint32_t field, uint64_t value);
/*
 * The session's notes (lp__notes_items), as the debug annotations of one
 * instant, "labelprof session", on the process's track at n->at_ns
 * (CLOCK_MONOTONIC, named by a clock snapshot just before it), on sequence
 * seq: what the JSON says in otherData.
 */
void lp__pf_session_note(lp__pf_export_t *x, uint32_t seq, const lp__notes_t *n);

#endif /* LABELPROF_PERFETTO_H */
