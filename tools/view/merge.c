/*
 * merge.c: `labelprof merge -o OUT FILE...`: many processes on one timeline.
 *
 * Each input is one process's file (or any trace the readers take): its
 * events are read into memory (counted against --max-memory), its notes
 * say where it is in time. The output is one trace, Perfetto protobuf (JSON
 * when OUT ends in .json), in which every process keeps its pid, its name,
 * its threads and its tracks, on one clock: the CLOCK_MONOTONIC of one of
 * the inputs, the reference (the one whose clocks began earliest in wall
 * time, so that no time of another comes out negative).
 *
 * Placing a file in time. labelprof's files carry a CLOCK_REALTIME reading
 * tied to their CLOCK_MONOTONIC (REALTIME bracketed by two MONOTONIC reads),
 * the boot id and the time namespace's offsets. Two files of one boot share
 * the kernel's clock: their times differ by their namespaces' offsets
 * exactly (0 outside namespaces). A file of another boot (another machine,
 * or the same one rebooted) is placed through REALTIME: its offset from the
 * reference is the difference of the two readings' REALTIME-MONOTONIC
 * gaps, within the sum of their uncertainties (and of how far the two
 * machines' wall clocks disagree, which no file can tell). A boot with no
 * namespace offsets said is checked against REALTIME: more than a second
 * apart, it is placed through REALTIME too. Every file's placement is said
 * in the output's notes. A file with no REALTIME reading (an older
 * labelprof's, another tool's) cannot be placed beside others: exit 2,
 * naming it; alone, it is written as it is.
 *
 * Processes are (boot, pid): the same pid of two boots is two processes,
 * and the later one gets a pid (and its threads tids) above pid_max, said
 * in the notes. Threads of one process are (pid, tid); labelprof's virtual
 * tracks (tid LP__TRACK_FIRST_TID and up) stay tracks of their process.
 *
 * Scopes are paired per lane as they are read (B with its E, X as it is),
 * then each lane's slices are sorted as the library's writer sorts them
 * (by start, the enclosing one first at equal starts) and written as
 * begin/end pairs, each end before anything that starts at or after it.
 */
#include "config.h"

#include "cmd.h"
#include "agg.h"
#include "opts.h"
#include "reader.h"
#include "pb.h"
#include "perfetto_proto.h"
#include "track_lane.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: labelprof merge -o OUT [--max-memory SIZE] FILE...\n"
    "\n"
    "Many processes on one timeline: one trace holding every process of the files,\n"
    "each with its own pid, process name, threads and tracks. OUT is Perfetto\n"
    "protobuf, or Chrome JSON when it ends in .json. FILE is JSON or Perfetto,\n"
    "one process's (LABELPROF_TRACE=run-%p.pftrace) or already merged.\n"
    "\n"
    "Times are put on one clock through what each file says of itself: its boot\n"
    "id, its time namespace's offsets and a CLOCK_REALTIME reading tied to its\n"
    "CLOCK_MONOTONIC. Files of one boot share the kernel's clock (a time\n"
    "namespace's offset is taken off exactly); files of another boot (another\n"
    "machine) are placed through REALTIME, within the readings' uncertainty and\n"
    "however far the machines' wall clocks disagree. The output's clock is the\n"
    "CLOCK_MONOTONIC of the file whose clock began earliest; its notes say how\n"
    "each file was placed, with the offset applied. The same pid of two boots is\n"
    "two processes: the later gets a pid above pid_max, said in the notes.\n"
    "\n"
    "  -o OUT             the merged trace (.json: Chrome JSON; else Perfetto)\n"
    "  --max-memory SIZE  as for stats (labelprof help stats): every event of\n"
    "                     every file is held until the output is written\n"
    "\n"
    "A file with no REALTIME reading (an older labelprof's, another tool's)\n"
    "cannot be placed beside others: exit 2, naming it. Exit status: 0, or 2 for\n"
    "bad input or usage.\n";

typedef struct opts {
  const char *out;
  uint64_t max_memory;
} opts_t;

static const lp_opt_t options[] = {
    LP_OPT_TEXT("-o", "OUT", opts_t, out),
    LP_OPT_MAX_MEMORY(opts_t, max_memory),
    LP_OPT_END,
};

static int run(const void *opts, int n, const char *const *files);

const lp_cmd_t lp_cmd_merge = {
    "merge", "many processes' files as one trace on one clock", usage, options, sizeof(opts_t), NULL,
    {1, -1, "FILE..."}, run,
};

#define MG_PID_FREE 4194304 /* pid_max's limit: remapped pids and tids start here */

enum { MG_SLICE, MG_INSTANT, MG_COUNTER };

typedef struct mg_rec {
  int64_t ts, end; /* end: INT64_MAX for a slice still open at the end of its file */
  double value;    /* a counter's */
  uint32_t lane, name, cat, seq; /* cat: a counter's series; UINT32_MAX: none */
  uint8_t kind;
} mg_rec_t;

typedef struct mg_lane {
  unsigned file;
  int64_t pid, tid;     /* as in the file */
  int64_t out_tid;
  uint32_t proc, name;  /* name: UINT32_MAX when none */
  uint32_t *open;       /* the records of its open slices, innermost last */
  uint32_t nopen, capopen;
} mg_lane_t;

typedef struct mg_proc {
  unsigned file; /* the first file that has it */
  int64_t pid, out_pid;
  uint32_t name; /* UINT32_MAX: none */
} mg_proc_t;

typedef struct mg_wall {
  bool has;
  int64_t real, mono;
  uint64_t unc;
} mg_wall_t;

typedef struct mg_file {
  const char *path;
  lp_pos_t last; /* where its last event was: where a message about the whole file points */
  char boot[40];
  bool has_tn, has_base, has_pf_off;
  int64_t tn_mono, ts_base, pf_off;
  mg_wall_t wall[2]; /* start, end */
  uint64_t dropped;
  /* the placement */
  int64_t shift; /* CLOCK_MONOTONIC of the file + shift = the reference's */
  uint64_t unc;
  const char *how;
} mg_file_t;

typedef struct mg {
  lp_mem_t mem;
  mg_file_t *files;
  unsigned nfiles;
  size_t capfiles;
  mg_rec_t *recs;
  size_t nrecs, caprecs;
  mg_lane_t *lanes;
  uint32_t nlanes, caplanes;
  lp__index_t lane_index;
  mg_proc_t *procs;
  uint32_t nprocs, capprocs;
  char **names;
  uint32_t nnames, capnames;
  lp__index_t name_index;
  uint64_t unmatched;
  lp_pos_t at;
} mg_t;

static bool grow(mg_t *m, void **p, size_t *cap, size_t size, size_t need) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap * 2 : 64;
  while (n < need) n *= 2;
  void *q = lp_mem_realloc(&m->mem, *p, *cap * size, n * size);
  if (!q) return false;
  *p = q;
  *cap = n;
  return true;
}

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* The id of a name (interned once); UINT32_MAX when memory ran out. */
static uint32_t name_id(mg_t *m, const char *s) {
  uint32_t at, h = lp_text_hash(s);
  for (uint32_t e = lp__index_first(&m->name_index, h, &at); e; e = lp__index_next(&m->name_index, &at))
    if (strcmp(m->names[e - 1], s) == 0) return e - 1;
  switch (lp_index_reserve(&m->name_index, &m->mem, m->nnames, 256)) {
  case -1: return UINT32_MAX;
  case 1:
    for (uint32_t i = 0; i < m->nnames; i++) lp__index_put(&m->name_index, lp_text_hash(m->names[i]), i);
  }
  size_t cap = m->capnames, len = strlen(s) + 1;
  char *c = lp_mem_realloc(&m->mem, NULL, 0, len);
  if (!c) return UINT32_MAX;
  memcpy(c, s, len);
  if (!grow(m, (void **)&m->names, &cap, sizeof *m->names, (size_t)m->nnames + 1)) {
    lp_mem_free(&m->mem, c, len);
    return UINT32_MAX;
  }
  m->capnames = (uint32_t)cap;
  lp__index_put(&m->name_index, h, m->nnames);
  m->names[m->nnames] = c;
  return m->nnames++;
}

/*
 * The processes, once every file is read (a file's boot id is in its notes,
 * at its end): (boot, pid), a file with no boot id a boot of its own. Named
 * by the name its process track (tid 0) was given. 0, or -1 out of memory.
 */
static int assign_procs(mg_t *m) {
  for (uint32_t i = 0; i < m->nlanes; i++) {
    mg_lane_t *l = &m->lanes[i];
    const mg_file_t *b = &m->files[l->file];
    uint32_t k = 0;
    for (; k < m->nprocs; k++) {
      const mg_proc_t *p = &m->procs[k];
      const mg_file_t *a = &m->files[p->file];
      if (p->pid == l->pid && (p->file == l->file || (a->boot[0] && strcmp(a->boot, b->boot) == 0))) break;
    }
    if (k == m->nprocs) {
      size_t cap = m->capprocs;
      if (!grow(m, (void **)&m->procs, &cap, sizeof *m->procs, (size_t)m->nprocs + 1)) return -1;
      m->capprocs = (uint32_t)cap;
      m->procs[m->nprocs++] = (mg_proc_t){l->file, l->pid, l->pid, UINT32_MAX};
    }
    l->proc = k;
    if (l->tid == 0 && l->name != UINT32_MAX && m->procs[k].name == UINT32_MAX) m->procs[k].name = l->name;
  }
  return 0;
}

/* The lane (file, pid, tid), made when new; NULL when memory ran out. */
static mg_lane_t *lane_of(mg_t *m, int64_t pid, int64_t tid) {
  unsigned file = m->nfiles - 1;
  uint32_t at, h = lp_lane_hash(file, pid, tid);
  for (uint32_t e = lp__index_first(&m->lane_index, h, &at); e; e = lp__index_next(&m->lane_index, &at)) {
    mg_lane_t *l = &m->lanes[e - 1];
    if (l->file == file && l->pid == pid && l->tid == tid) return l;
  }
  switch (lp_index_reserve(&m->lane_index, &m->mem, m->nlanes, 256)) {
  case -1: return NULL;
  case 1:
    for (uint32_t i = 0; i < m->nlanes; i++) {
      const mg_lane_t *l = &m->lanes[i];
      lp__index_put(&m->lane_index, lp_lane_hash(l->file, l->pid, l->tid), i);
    }
  }
  size_t cap = m->caplanes;
  if (!grow(m, (void **)&m->lanes, &cap, sizeof *m->lanes, (size_t)m->nlanes + 1)) return NULL;
  m->caplanes = (uint32_t)cap;
  lp__index_put(&m->lane_index, h, m->nlanes);
  m->lanes[m->nlanes++] = (mg_lane_t){file, pid, tid, tid, UINT32_MAX, UINT32_MAX, NULL, 0, 0};
  return &m->lanes[m->nlanes - 1];
}

static mg_rec_t *rec_add(mg_t *m, uint8_t kind, uint32_t lane, int64_t ts, int64_t end, uint32_t name, uint32_t cat) {
  if (!grow(m, (void **)&m->recs, &m->caprecs, sizeof *m->recs, m->nrecs + 1)) return NULL;
  mg_rec_t *r = &m->recs[m->nrecs];
  *r = (mg_rec_t){ts, end, 0, lane, name, cat, (uint32_t)m->nrecs, kind};
  m->nrecs++;
  return r;
}

/* a + b and a - b, held at INT64_MIN or INT64_MAX where they would overflow: a file's times are its writer's word. */
static int64_t sat_add(int64_t a, int64_t b) {
  int64_t v;
  return __builtin_add_overflow(a, b, &v) ? (b > 0 ? INT64_MAX : INT64_MIN) : v;
}

static int64_t sat_sub(int64_t a, int64_t b) {
  int64_t v;
  return __builtin_sub_overflow(a, b, &v) ? (b < 0 ? INT64_MAX : INT64_MIN) : v;
}

static bool parse_i64(const char *s, int64_t *v) {
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (!*s || *end || errno) return false;
  *v = x;
  return true;
}

/* What the file says of itself: where it is in time. */
static void file_info(mg_file_t *f, const char *key, const char *text) {
  static const char *const wall_keys[2][3] = {
      {"otherData.realtime_start_ns", "otherData.realtime_start_mono_ns", "otherData.realtime_start_uncertainty_ns"},
      {"otherData.realtime_end_ns", "otherData.realtime_end_mono_ns", "otherData.realtime_end_uncertainty_ns"}};
  int64_t v;
  if (strcmp(key, "otherData.boot_id") == 0) {
    snprintf(f->boot, sizeof f->boot, "%s", text);
    return;
  }
  if (!parse_i64(text, &v)) return;
  if (strcmp(key, "otherData.timens_monotonic_ns") == 0) {
    f->tn_mono = v;
    f->has_tn = true;
  } else if (strcmp(key, "otherData.ts_base_ns") == 0) {
    f->ts_base = v;
    f->has_base = true;
  } else if (strcmp(key, "perfetto.monotonic_offset_ns") == 0) {
    f->pf_off = v;
    f->has_pf_off = true;
  } else if (strcmp(key, "otherData.events_dropped") == 0 && v > 0) {
    f->dropped += (uint64_t)v;
  }
  for (int k = 0; k < 2; k++)
    for (int j = 0; j < 3; j++) {
      if (strcmp(key, wall_keys[k][j]) != 0) continue;
      mg_wall_t *w = &f->wall[k];
      if (j == 0) w->real = v;
      if (j == 1) w->mono = v;
      if (j == 2) w->unc = v > 0 ? (uint64_t)v : 0;
      w->has = w->real > 0;
    }
}

static int on_event(void *ctx, const lp_event_t *ev) {
  mg_t *m = ctx;
  mg_file_t *f = &m->files[m->nfiles - 1];
  f->last = ev->pos;
  m->at = ev->pos;
  if (ev->kind == LP_EV_FILE_INFO) {
    file_info(f, ev->name, ev->text ? ev->text : "");
    return 0;
  }
  if (ev->kind == LP_EV_SKIPPED) return 0;
  mg_lane_t *l = lane_of(m, ev->pid, ev->kind == LP_EV_PROCESS_NAME ? 0 : ev->tid);
  if (!l) return lp_mem_fail(&m->mem, &ev->pos);
  uint32_t li = (uint32_t)(l - m->lanes);
  uint32_t name = ev->kind == LP_EV_END ? UINT32_MAX : name_id(m, ev->name);
  if (ev->kind != LP_EV_END && name == UINT32_MAX) return lp_mem_fail(&m->mem, &ev->pos);
  uint32_t cat = UINT32_MAX;
  const char *c = ev->kind == LP_EV_COUNTER ? ev->series : ev->category;
  if (c && (cat = name_id(m, c)) == UINT32_MAX) return lp_mem_fail(&m->mem, &ev->pos);
  mg_rec_t *r = NULL;
  switch (ev->kind) {
  case LP_EV_PROCESS_NAME: /* on the process's lane, tid 0 */
  case LP_EV_THREAD_NAME:
    l->name = name;
    return 0;
  case LP_EV_COMPLETE:
    r = rec_add(m, MG_SLICE, li, ev->ts, sat_add(ev->ts, ev->dur), name, cat);
    break;
  case LP_EV_BEGIN: {
    r = rec_add(m, MG_SLICE, li, ev->ts, INT64_MAX, name, cat);
    size_t cap = l->capopen;
    if (!r || !grow(m, (void **)&l->open, &cap, sizeof *l->open, (size_t)l->nopen + 1)) return lp_mem_fail(&m->mem, &ev->pos);
    l->capopen = (uint32_t)cap;
    l->open[l->nopen++] = (uint32_t)(m->nrecs - 1);
    return 0;
  }
  case LP_EV_END:
    if (!l->nopen) {
      m->unmatched++;
      return 0;
    }
    mg_rec_t *o = &m->recs[l->open[--l->nopen]];
    o->end = ev->ts > o->ts ? ev->ts : o->ts;
    return 0;
  case LP_EV_INSTANT:
    r = rec_add(m, MG_INSTANT, li, ev->ts, 0, name, cat);
    break;
  case LP_EV_COUNTER:
    if ((r = rec_add(m, MG_COUNTER, li, ev->ts, 0, name, cat))) r->value = ev->value;
    break;
  default:
    return 0;
  }
  return r ? 0 : lp_mem_fail(&m->mem, &ev->pos);
}

static int read_file(mg_t *m, const char *path) {
  if (!grow(m, (void **)&m->files, &m->capfiles, sizeof *m->files, (size_t)m->nfiles + 1)) {
    fprintf(stderr, "labelprof: out of memory\n");
    return LP_READ_BAD;
  }
  mg_file_t *f = &m->files[m->nfiles++];
  memset(f, 0, sizeof *f);
  f->path = path;
  f->last = (lp_pos_t){path, 0, 0, 0};
  lp_input_t *in = lp_input_open(path);
  if (!in) return LP_READ_BAD;
  lp_sink_t sink = {m, on_event, &m->mem};
  int rc = lp_read_input(in, &sink);
  lp_input_close(in);
  if (rc) return LP_READ_BAD;
  for (uint32_t i = 0; i < m->nlanes; i++) m->lanes[i].nopen = 0; /* still open: they end with their file */
  return 0;
}

/* The file's reading with the smaller uncertainty; NULL if it has none. */
static const mg_wall_t *best_wall(const mg_file_t *f) {
  const mg_wall_t *a = &f->wall[0], *b = &f->wall[1];
  if (!a->has) return b->has ? b : NULL;
  return b->has && b->unc < a->unc ? b : a;
}

/* How the file's events' times become CLOCK_MONOTONIC: events = mono + this. */
static int64_t events_offset(const mg_file_t *f) {
  if (f->has_pf_off) return f->pf_off;
  return f->has_base ? sat_sub(0, f->ts_base) : 0;
}

/* Each file placed on the reference's clock; LP_READ_BAD after a message for one that cannot be. */
static int place(mg_t *m, unsigned *ref_out) {
  unsigned ref = 0;
  if (m->nfiles > 1) {
    for (unsigned i = 0; i < m->nfiles; i++) {
      if (best_wall(&m->files[i])) continue;
      lp_report(&m->files[i].last,
                "no CLOCK_REALTIME reading in the file's notes (realtime_start_ns): written by an older labelprof "
                "or another tool, it cannot be placed in time beside the other files");
      return LP_READ_BAD;
    }
    /* The reference: the file whose CLOCK_MONOTONIC began earliest in REALTIME. */
    for (unsigned i = 1; i < m->nfiles; i++) {
      const mg_wall_t *a = best_wall(&m->files[i]), *b = best_wall(&m->files[ref]);
      if (sat_sub(a->real, a->mono) < sat_sub(b->real, b->mono)) ref = i;
    }
  }
  *ref_out = ref;
  const mg_file_t *r = &m->files[ref];
  const mg_wall_t *rw = best_wall(r);
  for (unsigned i = 0; i < m->nfiles; i++) {
    mg_file_t *f = &m->files[i];
    f->shift = 0;
    f->unc = 0;
    if (i == ref) {
      f->how = "the reference: times are its CLOCK_MONOTONIC";
      continue;
    }
    const mg_wall_t *w = best_wall(f);
    int64_t by_real = sat_sub(sat_sub(w->real, w->mono), sat_sub(rw->real, rw->mono));
    bool same_boot = f->boot[0] && strcmp(f->boot, r->boot) == 0;
    if (same_boot && f->has_tn && r->has_tn) {
      f->shift = sat_sub(r->tn_mono, f->tn_mono);
      f->how = f->shift ? "the same boot as the reference in another time namespace: its offset taken off exactly"
                        : "the same boot as the reference: the same clock";
    } else if (same_boot && by_real > -1000000000 && by_real < 1000000000) {
      f->how = "the same boot as the reference and within 1 s of it through REALTIME: the same clock";
    } else {
      f->shift = by_real;
      f->unc = w->unc + rw->unc;
      f->how = same_boot ? "the same boot as the reference but not its clock (a time namespace): through REALTIME"
                         : "another boot (another machine): through REALTIME";
    }
  }
  return 0;
}

/* Remapped pids and tids: a process of another boot whose pid is taken, and threads whose tid is. */
static void remap(mg_t *m) {
  int64_t next = MG_PID_FREE;
  for (uint32_t i = 0; i < m->nprocs; i++) {
    mg_proc_t *p = &m->procs[i];
    for (uint32_t j = 0; j < i; j++)
      if (m->procs[j].out_pid == p->out_pid) {
        p->out_pid = next++;
        break;
      }
  }
  for (uint32_t i = 0; i < m->nlanes; i++) {
    mg_lane_t *l = &m->lanes[i];
    const mg_proc_t *p = &m->procs[l->proc];
    if (l->tid == 0 || l->tid >= (int64_t)LP__TRACK_FIRST_TID) continue; /* the process's, or a track */
    if (l->tid == p->pid) {
      l->out_tid = p->out_pid;
      continue;
    }
    for (uint32_t j = 0; j < i; j++) {
      const mg_lane_t *o = &m->lanes[j];
      if (o->proc != l->proc && o->out_tid == l->out_tid && o->tid != 0) {
        l->out_tid = next++;
        break;
      }
    }
  }
}

/* The output's time of a record's time in file f. */
static int64_t out_time(const mg_file_t *f, int64_t t) {
  int64_t v = sat_add(sat_sub(t, events_offset(f)), f->shift);
  return v < 0 ? 0 : v;
}

static int rec_cmp(const void *pa, const void *pb) {
  const mg_rec_t *x = pa, *y = pb;
  if (x->lane != y->lane) return x->lane < y->lane ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  if (x->kind != y->kind) return x->kind == MG_SLICE ? -1 : y->kind == MG_SLICE ? 1 : x->kind < y->kind ? -1 : 1;
  if (x->kind == MG_SLICE && x->end != y->end) return x->end > y->end ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* ---- the notes: what both formats say of the merge ---- */

typedef struct mg_note {
  char key[40];
  char *text; /* malloc'd */
  bool number;
} mg_note_t;

typedef struct mg_notes {
  mg_note_t *v;
  size_t n, cap;
  bool nomem;
} mg_notes_t;

static void note_add(mg_notes_t *ns, const char *key, bool number, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note_add(mg_notes_t *ns, const char *key, bool number, const char *fmt, ...) {
  if (ns->n == ns->cap) {
    size_t cap = ns->cap ? ns->cap * 2 : 16;
    mg_note_t *v = realloc(ns->v, cap * sizeof *v);
    if (!v) {
      ns->nomem = true;
      return;
    }
    ns->v = v;
    ns->cap = cap;
  }
  va_list ap;
  va_start(ap, fmt);
  char *text = NULL;
  int k = vasprintf(&text, fmt, ap);
  va_end(ap);
  if (k < 0) {
    ns->nomem = true;
    return;
  }
  mg_note_t *n = &ns->v[ns->n++];
  snprintf(n->key, sizeof n->key, "%s", key);
  n->text = text;
  n->number = number;
}

static void notes_free(mg_notes_t *ns) {
  for (size_t i = 0; i < ns->n; i++) free(ns->v[i].text);
  free(ns->v);
}

static void make_notes(const mg_t *m, unsigned ref, mg_notes_t *ns) {
  const mg_file_t *r = &m->files[ref];
  uint64_t dropped = 0;
  for (unsigned i = 0; i < m->nfiles; i++) dropped += m->files[i].dropped;
  note_add(ns, "library", false, "labelprof %s (merge)", PACKAGE_VERSION);
  note_add(ns, "clock_domain", false, "CLOCK_MONOTONIC");
  if (r->boot[0]) note_add(ns, "boot_id", false, "%s", r->boot);
  if (r->has_tn) note_add(ns, "timens_monotonic_ns", false, "%" PRId64, r->tn_mono);
  const mg_wall_t *w = best_wall(r);
  if (w) { /* the reference's reading: the merged file can be merged again */
    note_add(ns, "realtime_start_ns", false, "%" PRId64, w->real);
    note_add(ns, "realtime_start_mono_ns", false, "%" PRId64, w->mono);
    note_add(ns, "realtime_start_uncertainty_ns", true, "%" PRIu64, w->unc);
  }
  note_add(ns, "events_dropped", true, "%" PRIu64, dropped);
  note_add(ns, "merge_files", true, "%u", m->nfiles);
  for (unsigned i = 0; i < m->nfiles; i++) {
    const mg_file_t *f = &m->files[i];
    char key[40];
    snprintf(key, sizeof key, "merge_file_%u", i + 1);
    if (i == ref || !f->unc)
      note_add(ns, key, false, "%s: %s; offset %+" PRId64 " ns", f->path, f->how, f->shift);
    else
      note_add(ns, key, false, "%s: %s; offset %+" PRId64 " ns (within %" PRIu64 " ns)", f->path, f->how, f->shift,
               f->unc);
  }
  for (uint32_t i = 0; i < m->nprocs; i++) {
    const mg_proc_t *p = &m->procs[i];
    if (p->out_pid == p->pid) continue;
    char key[40];
    snprintf(key, sizeof key, "merge_pid_%" PRId64, p->out_pid);
    note_add(ns, key, false,
             "%s: pid %" PRId64 " written as %" PRId64 " (pid %" PRId64 " is another boot's process too); its "
             "threads' tids likewise where taken",
             m->files[p->file].path, p->pid, p->out_pid, p->pid);
  }
  if (m->unmatched) note_add(ns, "merge_unmatched_ends", true, "%" PRIu64, m->unmatched);
}

/* ---- Perfetto protobuf ---- */

typedef struct pfw {
  FILE *out;
  lp__pb_t pk, a, b, c; /* a packet, and messages nested in it */
  bool bad;             /* out of memory, or a write failed */
} pfw_t;

static void pf_packet_end(pfw_t *w) {
  lp__pb_varint(&w->pk, TP_SEQ_ID, 1);
  lp__pb_t top = {0};
  lp__pb_msg(&top, TRACE_PACKET, &w->pk);
  if (top.err || fwrite(top.buf, 1, top.len, w->out) != top.len) w->bad = true;
  lp__pb_free(&top);
}

static uint64_t proc_uuid(uint32_t proc) { return mix(0x6d65726765ull + proc) | 1; }
static uint64_t lane_uuid(uint32_t lane) { return mix(0x6c616e65ull * 31 + lane) | 2; }
static uint64_t counter_uuid(uint32_t lane, uint32_t series) { return mix(((uint64_t)lane << 32 | series) ^ 0x636f756eull) | 4; }

static void pf_clock(pfw_t *w, uint32_t id, uint64_t ts) {
  lp__pb_varint(&w->b, CLK_ID, id);
  lp__pb_varint(&w->b, CLK_TS, ts);
  lp__pb_msg(&w->a, CS_CLOCKS, &w->b);
}

static void pf_event(pfw_t *w, const mg_t *m, uint64_t ts, uint32_t type, uint64_t track, const mg_rec_t *r) {
  lp__pb_varint(&w->pk, TP_TIMESTAMP, ts);
  lp__pb_varint(&w->pk, TP_CLOCK_ID, CLOCK_MONOTONIC_ID);
  lp__pb_varint(&w->a, TE_TYPE, type);
  lp__pb_varint(&w->a, TE_TRACK_UUID, track);
  if (r && type != TYPE_SLICE_END && type != TYPE_COUNTER) {
    if (r->cat != UINT32_MAX) lp__pb_str(&w->a, TE_CATEGORIES, m->names[r->cat]);
    lp__pb_str(&w->a, TE_NAME, m->names[r->name]);
  }
  if (r && type == TYPE_COUNTER) {
    if (r->value >= -0x1p63 && r->value < 0x1p63 && r->value == (double)(int64_t)r->value)
      lp__pb_varint(&w->a, TE_COUNTER_VALUE, (uint64_t)(int64_t)r->value);
    else
      lp__pb_double(&w->a, TE_DOUBLE_COUNTER_VALUE, r->value);
  }
  lp__pb_msg(&w->pk, TP_TRACK_EVENT, &w->a);
  pf_packet_end(w);
}

/* A record's time t on the output's clock, and its track. */
static uint64_t rec_time(const mg_t *m, const mg_rec_t *r, int64_t t) {
  return (uint64_t)out_time(&m->files[m->lanes[r->lane].file], t);
}

static uint64_t rec_track(const mg_t *m, const mg_rec_t *r) {
  const mg_lane_t *l = &m->lanes[r->lane];
  return l->tid ? lane_uuid(r->lane) : proc_uuid(l->proc);
}

/* Whether the counter track uuid was described already; else it is now counted as described. */
static bool counter_seen(uint64_t **seen, size_t *n, uint64_t uuid, bool *nomem) {
  for (size_t i = 0; i < *n; i++)
    if ((*seen)[i] == uuid) return true;
  uint64_t *s = realloc(*seen, (*n + 1) * sizeof *s);
  if (!s) {
    *nomem = true;
    return true;
  }
  *seen = s;
  s[(*n)++] = uuid;
  return false;
}

static int write_perfetto(const mg_t *m, unsigned ref, const mg_notes_t *ns, FILE *out) {
  pfw_t w = {.out = out};
  const mg_file_t *rf = &m->files[ref];
  const mg_wall_t *rw = best_wall(rf);
  /* The clocks: the reference's CLOCK_MONOTONIC beside BOOTTIME (Perfetto's own) and its REALTIME reading. */
  uint64_t at = rw ? (uint64_t)rw->mono : 0;
  pf_clock(&w, CLOCK_BOOTTIME_ID, at + (uint64_t)(rf->has_pf_off ? rf->pf_off : 0));
  pf_clock(&w, CLOCK_MONOTONIC_ID, at);
  if (rw) pf_clock(&w, CLOCK_REALTIME_ID, (uint64_t)rw->real);
  lp__pb_msg(&w.pk, TP_CLOCK_SNAPSHOT, &w.a);
  pf_packet_end(&w);
  for (uint32_t i = 0; i < m->nprocs; i++) {
    const mg_proc_t *p = &m->procs[i];
    lp__pb_varint(&w.b, PD_PID, (uint64_t)p->out_pid);
    if (p->name != UINT32_MAX) lp__pb_str(&w.b, PD_NAME, m->names[p->name]);
    lp__pb_varint(&w.a, TD_UUID, proc_uuid(i));
    lp__pb_msg(&w.a, TD_PROCESS, &w.b);
    lp__pb_msg(&w.pk, TP_TRACK_DESCRIPTOR, &w.a);
    pf_packet_end(&w);
  }
  for (uint32_t i = 0; i < m->nlanes; i++) {
    const mg_lane_t *l = &m->lanes[i];
    const mg_proc_t *p = &m->procs[l->proc];
    if (l->tid == 0) continue; /* the process's own track */
    lp__pb_varint(&w.a, TD_UUID, lane_uuid(i));
    if (l->tid >= (int64_t)LP__TRACK_FIRST_TID) {
      char desc[96];
      snprintf(desc, sizeof desc, LP__TRACK_DESCRIPTION "%" PRId64, l->tid);
      lp__pb_varint(&w.a, TD_PARENT, proc_uuid(l->proc));
      lp__pb_str(&w.a, TD_NAME, l->name != UINT32_MAX ? m->names[l->name] : "track");
      lp__pb_str(&w.a, TD_DESCRIPTION, desc);
      lp__pb_varint(&w.a, TD_MERGE, 2); /* SIBLING_MERGE_BEHAVIOR_NONE: tracks of one name stay apart */
    } else {
      lp__pb_varint(&w.b, THD_PID, (uint64_t)p->out_pid);
      lp__pb_varint(&w.b, THD_TID, (uint64_t)l->out_tid);
      if (l->name != UINT32_MAX) lp__pb_str(&w.b, THD_NAME, m->names[l->name]);
      lp__pb_msg(&w.a, TD_THREAD, &w.b);
    }
    lp__pb_msg(&w.pk, TP_TRACK_DESCRIPTOR, &w.a);
    pf_packet_end(&w);
  }
  /* Each lane's records in order; an end before anything at or after it. */
  size_t *open = NULL, nopen = 0, capopen = 0, nseen = 0;
  uint64_t *seen = NULL;
  for (size_t i = 0; i <= m->nrecs && !w.bad; i++) {
    const mg_rec_t *r = i < m->nrecs ? &m->recs[i] : NULL;
    bool new_lane = r && i && m->recs[i - 1].lane != r->lane; /* the previous lane's open slices all end */
    if (new_lane) nseen = 0;
    while (nopen && (!r || new_lane || m->recs[open[nopen - 1]].end <= r->ts)) {
      const mg_rec_t *o = &m->recs[open[--nopen]];
      if (o->end != INT64_MAX) pf_event(&w, m, rec_time(m, o, o->end), TYPE_SLICE_END, rec_track(m, o), NULL);
    }
    if (!r) break;
    const mg_lane_t *l = &m->lanes[r->lane];
    uint64_t track = rec_track(m, r), ts = rec_time(m, r, r->ts);
    if (r->kind == MG_SLICE) {
      pf_event(&w, m, ts, TYPE_SLICE_BEGIN, track, r);
      if (nopen == capopen) {
        size_t cap = capopen ? capopen * 2 : 64;
        size_t *no = realloc(open, cap * sizeof *no);
        if (!no) {
          w.bad = true;
          break;
        }
        open = no;
        capopen = cap;
      }
      open[nopen++] = i;
    } else if (r->kind == MG_INSTANT) {
      pf_event(&w, m, ts, TYPE_INSTANT, track, r);
    } else {
      uint64_t cu = counter_uuid(r->lane, r->name);
      if (!counter_seen(&seen, &nseen, cu, &w.bad)) { /* the counter's track, under the process, named as the file names it */
        lp__pb_varint(&w.a, TD_UUID, cu);
        lp__pb_varint(&w.a, TD_PARENT, proc_uuid(l->proc));
        lp__pb_str(&w.a, TD_NAME, m->names[r->name]);
        lp__pb_msg(&w.a, TD_COUNTER, &w.b);
        lp__pb_msg(&w.pk, TP_TRACK_DESCRIPTOR, &w.a);
        pf_packet_end(&w);
      }
      pf_event(&w, m, ts, TYPE_COUNTER, cu, r);
    }
  }
  free(open);
  free(seen);
  /* The notes, as labelprof's session note: an instant on the reference's process. */
  uint32_t rproc = UINT32_MAX;
  for (uint32_t i = 0; i < m->nprocs && rproc == UINT32_MAX; i++)
    if (m->procs[i].file == ref) rproc = i;
  if (rproc != UINT32_MAX) {
    lp__pb_varint(&w.pk, TP_TIMESTAMP, at);
    lp__pb_varint(&w.pk, TP_CLOCK_ID, CLOCK_MONOTONIC_ID);
    lp__pb_varint(&w.a, TE_TYPE, TYPE_INSTANT);
    lp__pb_varint(&w.a, TE_TRACK_UUID, proc_uuid(rproc));
    lp__pb_str(&w.a, TE_NAME, "labelprof session");
    for (size_t i = 0; i < ns->n; i++) {
      lp__pb_str(&w.b, DA_NAME, ns->v[i].key);
      int64_t v;
      if (parse_i64(ns->v[i].text, &v) && strstr(ns->v[i].key, "_ns"))
        lp__pb_varint(&w.b, v < 0 ? DA_INT : DA_UINT, (uint64_t)v);
      else if (ns->v[i].number && parse_i64(ns->v[i].text, &v))
        lp__pb_varint(&w.b, DA_UINT, (uint64_t)v);
      else
        lp__pb_str(&w.b, DA_STRING, ns->v[i].text);
      lp__pb_msg(&w.a, TE_DEBUG, &w.b);
    }
    lp__pb_msg(&w.pk, TP_TRACK_EVENT, &w.a);
    pf_packet_end(&w);
  }
  bool nomem = w.bad || w.pk.err || w.a.err || w.b.err || w.c.err;
  lp__pb_free(&w.pk);
  lp__pb_free(&w.a);
  lp__pb_free(&w.b);
  lp__pb_free(&w.c);
  return nomem ? -ENOMEM : 0;
}

/* ---- JSON ---- */

static void json_ts(FILE *out, const char *key, int64_t ns) {
  fprintf(out, ",\"%s\":%" PRId64 ".%03d", key, ns / 1000, (int)(ns % 1000));
}

static void json_ids(FILE *out, const mg_t *m, const mg_lane_t *l) {
  fprintf(out, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64, m->procs[l->proc].out_pid, l->tid ? l->out_tid : 0);
}

static int write_json(const mg_t *m, const mg_notes_t *ns, FILE *out) {
  int64_t base = INT64_MAX;
  for (size_t i = 0; i < m->nrecs; i++) {
    int64_t t = out_time(&m->files[m->lanes[m->recs[i].lane].file], m->recs[i].ts);
    if (t < base) base = t;
  }
  if (base == INT64_MAX) base = 0;
  base -= base % 1000;
  fputs("{\"traceEvents\":[\n", out);
  bool comma = false;
  for (uint32_t i = 0; i < m->nprocs; i++) {
    const mg_proc_t *p = &m->procs[i];
    if (p->name == UINT32_MAX) continue;
    fprintf(out, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRId64 ",\"tid\":0,\"args\":{\"name\":",
            comma ? ",\n" : "", p->out_pid);
    lp_put_json_string(out, m->names[p->name]);
    fputs("}}", out);
    comma = true;
  }
  for (uint32_t i = 0; i < m->nlanes; i++) {
    const mg_lane_t *l = &m->lanes[i];
    if (l->name == UINT32_MAX || !l->tid) continue;
    fprintf(out, "%s{\"ph\":\"M\",\"name\":\"thread_name\"", comma ? ",\n" : "");
    json_ids(out, m, l);
    fputs(",\"args\":{\"name\":", out);
    lp_put_json_string(out, m->names[l->name]);
    fputs("}}", out);
    comma = true;
  }
  for (size_t i = 0; i < m->nrecs; i++) {
    const mg_rec_t *r = &m->recs[i];
    const mg_lane_t *l = &m->lanes[r->lane];
    const mg_file_t *f = &m->files[l->file];
    int64_t ts = out_time(f, r->ts) - base;
    const char *ph = r->kind == MG_COUNTER ? "C" : r->kind == MG_INSTANT ? "i" : r->end == INT64_MAX ? "B" : "X";
    fprintf(out, "%s{\"ph\":\"%s\"", comma ? ",\n" : "", ph);
    comma = true;
    if (r->kind != MG_COUNTER && r->cat != UINT32_MAX) {
      fputs(",\"cat\":", out);
      lp_put_json_string(out, m->names[r->cat]);
    }
    fputs(",\"name\":", out);
    lp_put_json_string(out, m->names[r->name]);
    json_ids(out, m, l);
    json_ts(out, "ts", ts);
    if (r->kind == MG_SLICE && r->end != INT64_MAX) json_ts(out, "dur", out_time(f, r->end) - base - ts);
    if (r->kind == MG_INSTANT) fputs(",\"s\":\"t\"", out);
    if (r->kind == MG_COUNTER) {
      fputs(",\"args\":{", out);
      lp_put_json_string(out, r->cat != UINT32_MAX ? m->names[r->cat] : "value");
      if (isfinite(r->value))
        fprintf(out, ":%.17g}", r->value);
      else /* JSON has no NaN or infinity; a Perfetto output keeps them */
        fputs(":null}", out);
    }
    fputs("}", out);
  }
  fputs("\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{", out);
  fprintf(out, "\"ts_base_ns\":\"%" PRId64 "\"", base);
  for (size_t i = 0; i < ns->n; i++) {
    fputs(",", out);
    lp_put_json_string(out, ns->v[i].key);
    fputs(":", out);
    if (ns->v[i].number)
      fputs(ns->v[i].text, out);
    else
      lp_put_json_string(out, ns->v[i].text);
  }
  fputs("}}\n", out);
  return 0;
}

static void mg_free(mg_t *m) {
  for (uint32_t i = 0; i < m->nlanes; i++) lp_mem_free(&m->mem, m->lanes[i].open, m->lanes[i].capopen * sizeof(uint32_t));
  for (uint32_t i = 0; i < m->nnames; i++) lp_mem_free(&m->mem, m->names[i], strlen(m->names[i]) + 1);
  lp_mem_free(&m->mem, m->names, m->capnames * sizeof *m->names);
  lp_index_free(&m->name_index, &m->mem);
  lp_mem_free(&m->mem, m->lanes, m->caplanes * sizeof *m->lanes);
  lp_index_free(&m->lane_index, &m->mem);
  lp_mem_free(&m->mem, m->procs, m->capprocs * sizeof *m->procs);
  lp_mem_free(&m->mem, m->recs, m->caprecs * sizeof *m->recs);
  lp_mem_free(&m->mem, m->files, m->capfiles * sizeof *m->files);
}

static int run(const void *opts, int nfiles, const char *const *files) {
  const opts_t *o = opts;
  const char *out_path = o->out;
  if (!out_path) return lp_usage_error(lp_cmd_merge.name, "no output given (-o OUT)");
  lp_agg_max_memory = o->max_memory;

  mg_t m;
  memset(&m, 0, sizeof m);
  m.mem.cap = lp_mem_cap();
  int status = LP_EXIT_OK;
  unsigned ref = 0;
  mg_notes_t ns = {0};
  FILE *out = NULL;
  for (int i = 0; i < nfiles; i++)
    if (read_file(&m, files[i]) != 0) {
      status = LP_EXIT_BAD;
      goto done;
    }
  if (place(&m, &ref) != 0) {
    status = LP_EXIT_BAD;
    goto done;
  }
  if (assign_procs(&m) != 0) {
    lp_mem_fail(&m.mem, &m.at);
    status = LP_EXIT_BAD;
    goto done;
  }
  remap(&m);
  if (m.nrecs > 1) qsort(m.recs, m.nrecs, sizeof *m.recs, rec_cmp);
  make_notes(&m, ref, &ns);
  if (ns.nomem) {
    fprintf(stderr, "labelprof: out of memory\n");
    status = LP_EXIT_BAD;
    goto done;
  }
  size_t plen = strlen(out_path);
  bool json = plen >= 5 && strcmp(out_path + plen - 5, ".json") == 0;
  if (!(out = fopen(out_path, "wb"))) {
    fprintf(stderr, "labelprof: %s: cannot write: %s\n", out_path, strerror(errno));
    status = LP_EXIT_BAD;
    goto done;
  }
  int rc = json ? write_json(&m, &ns, out) : write_perfetto(&m, ref, &ns, out);
  if (ferror(out) || rc) {
    fprintf(stderr, "labelprof: %s: %s\n", out_path, rc == -ENOMEM ? "out of memory" : "write failed");
    status = LP_EXIT_BAD;
  }
  if (fclose(out) != 0 && status == LP_EXIT_OK) {
    fprintf(stderr, "labelprof: %s: write failed: %s\n", out_path, strerror(errno));
    status = LP_EXIT_BAD;
  }
  for (unsigned i = 0; i < m.nfiles && status == LP_EXIT_OK; i++) /* what was done, for the user */
    if (i != ref && m.files[i].shift)
      fprintf(stderr, "labelprof merge: %s: %s; offset %+" PRId64 " ns\n", m.files[i].path, m.files[i].how,
              m.files[i].shift);
done:
  notes_free(&ns);
  mg_free(&m);
  return status;
}
