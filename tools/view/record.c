/*
 * record.c: `labelprof record -p PID -d SECONDS -o FILE`: a sampled
 * timeline of a running process, read from outside it as `labelprof top`
 * reads it, written as Chrome Trace Event JSON, or as a Perfetto trace
 * (TrackEvent protobuf) when FILE ends in .pftrace or .perfetto-trace.
 *
 * An exact timeline (every begin and end, with its own timestamp) is only
 * recorded inside the process, by the code the label runs, and only while
 * a session records: a program started without one has nothing to give.
 * This is the other timeline: the threads' pseudo-stacks sampled HZ times
 * a second (10000 by default), each change between two samples written as
 * the ends and begins it implies, at the midpoint between the two samples.
 * So an edge is within half a period of the truth, a scope shorter than a
 * period may be missed or shown one period long, and a label that was left
 * and entered again between two samples shows as one scope. Memory is the
 * threads' current stacks: the file is written as the samples come.
 *
 * Each thread is a lane (pid, tid) named as labelprof names it; a thread
 * that exits has its scopes closed where it was last seen; the scopes still
 * open at the end are closed at the last sample. otherData says how it was
 * sampled, at what rate asked for and achieved.
 *
 * The Perfetto file is a Trace of TracePackets, each written whole as it
 * comes (a killed run leaves whole packets): the process's track, with a
 * description that says how it was sampled; a thread's track, child of the
 * process's, whenever the thread is new or renamed; a slice's begin or end
 * on its thread's track, its name as text (no interning: one sequence, one
 * writer). Timestamps are CLOCK_BOOTTIME, Perfetto's default clock: the
 * monotonic clock the samples are taken on, plus the difference between
 * the two at the start.
 */
#include "config.h"

#include "cmd.h"
#include "opts.h"
#include "pb.h"
#include "perfetto_proto.h"
#include "top.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A thread's lane: its stack at its last sample. */
typedef struct lane {
  uint64_t id, tid;
  char name[64];
  bool open;          /* a thread is in the slot */
  uint64_t seen_ns;   /* its last sample; 0 before the first */
  uint32_t n, cap;
  uint32_t *labels;
} lane_t;

typedef struct rec {
  lp_top_t *t;
  FILE *out;
  const char *path;
  bool perfetto;
  uint64_t boot_minus_mono; /* Perfetto: CLOCK_BOOTTIME less CLOCK_MONOTONIC at the start */
  lp__pb_t pkt, msg, who;   /* Perfetto: the packet being built, and messages nested in it */
  bool nomem;               /* Perfetto: a packet was lost for memory */
  lane_t *lanes; /* one per slot of the reader */
  size_t nlanes;
  uint32_t *path_buf;
  size_t path_cap;
  uint64_t events;
  bool first_event;
} rec_t;

static const char usage[] =
    "usage: labelprof record -p PID [-d SECONDS] [--hz HZ] -o FILE.json|FILE.pftrace\n"
    "\n"
    "A sampled timeline of a running process that uses labelprof, however it\n"
    "was started, read from outside it as labelprof top reads it, written as a\n"
    "Perfetto trace (TrackEvent protobuf) when FILE ends in .pftrace or\n"
    ".perfetto-trace, else as Chrome Trace Event JSON; the Perfetto UI and every\n"
    "labelprof subcommand read both. The threads' pseudo-stacks are\n"
    "sampled HZ times a second (default 10000) for SECONDS (default 10); each\n"
    "change between two samples is written as the ends and begins it implies,\n"
    "at the midpoint between them. So an edge is within half a period of the\n"
    "truth, a scope shorter than a period may be missing, and calls are runs\n"
    "of samples, not calls. For every begin and end with its own timestamp the\n"
    "process must record itself: start it with LABELPROF_TRACE (and\n"
    "LABELPROF_DUMP_SIGNAL to get the file while it runs).\n"
    "\n"
    "  -p PID        the process\n"
    "  -d SECONDS    how long (0.01 to 86400; default 10)\n"
    "  --hz HZ       samples per second, 1 to 100000 (default 10000)\n"
    "  -o FILE       the file: .pftrace or .perfetto-trace for Perfetto, else\n"
    "                JSON; - is JSON on standard output\n"
    "\n"
    "Exit status: 0; 2 when the process cannot be read, the file cannot be\n"
    "written, or the process exits before the end (the file then holds the\n"
    "timeline until then, complete and valid).\n";

typedef struct opts {
  uint32_t pid, hz;
  uint64_t duration_ns;
  const char *out;
} opts_t;

static const lp_top_range_t pid_range = {"-p", 1, INT_MAX}, hz_range = {"--hz", 1, 100000};

static const lp_opt_t options[] = {
    LP_OPT_PARSED("-p", "PID", opts_t, pid, lp_top_opt_u32, &pid_range),
    LP_OPT_PARSED("-d", "SECONDS", opts_t, duration_ns, lp_top_opt_seconds, "-d"),
    LP_OPT_PARSED("--hz", "HZ", opts_t, hz, lp_top_opt_u32, &hz_range),
    LP_OPT_TEXT("-o", "FILE.json|FILE.pftrace", opts_t, out),
    LP_OPT_END,
};

static const opts_t defaults = {.hz = 10000, .duration_ns = 10000000000u};

static int run(const void *opts, int n, const char *const *operands);

const lp_cmd_t lp_cmd_record = {
    "record", "a running process's sampled timeline, read from outside it", usage, options, sizeof(opts_t),
    &defaults, {0, 0, ""}, run,
};

static void put_ts(FILE *out, uint64_t ns) {
  fprintf(out, "%" PRIu64 ".%03u", ns / 1000u, (unsigned)(ns % 1000u));
}

/* ---- Perfetto: protobuf, only what these packets need ---- */

#define SEQ_ID 1u
#define PROCESS_UUID 0x6c70726f63000000ull /* a thread's track is this plus the reader's id of the thread */

/* Writes the finished TracePacket as one field of the Trace, and empties it. */
static void pf_packet(rec_t *rc) {
  lp__pb_varint(&rc->pkt, TP_SEQ_ID, SEQ_ID);
  lp__pb_t top = {0};
  lp__pb_msg(&top, TRACE_PACKET, &rc->pkt);
  if (top.err)
    rc->nomem = true;
  else
    fwrite(top.buf, 1, top.len, rc->out); /* its errors: ferror() at the end */
  lp__pb_free(&top);
  rc->pkt.err = rc->msg.err = rc->who.err = 0; /* the next packet may fit */
  rc->msg.len = rc->who.len = 0;
}

/* A track's descriptor: the process's (l NULL) or a thread's. */
static void pf_track(rec_t *rc, const lane_t *l, const char *name, const char *description) {
  lp__pb_varint(&rc->msg, TD_UUID, l ? PROCESS_UUID + l->id : PROCESS_UUID);
  if (l) {
    lp__pb_varint(&rc->msg, TD_PARENT, PROCESS_UUID);
    lp__pb_varint(&rc->who, THD_PID, (uint64_t)rc->t->pid);
    lp__pb_varint(&rc->who, THD_TID, l->tid);
    lp__pb_str(&rc->who, THD_NAME, name);
    lp__pb_msg(&rc->msg, TD_THREAD, &rc->who);
  } else {
    lp__pb_varint(&rc->who, PD_PID, (uint64_t)rc->t->pid);
    lp__pb_str(&rc->who, PD_NAME, name);
    lp__pb_msg(&rc->msg, TD_PROCESS, &rc->who);
    if (description) lp__pb_str(&rc->msg, TD_DESCRIPTION, description);
  }
  lp__pb_msg(&rc->pkt, TP_TRACK_DESCRIPTOR, &rc->msg);
  pf_packet(rc);
}

static void pf_event(rec_t *rc, const lane_t *l, bool begin, uint32_t label, uint64_t ns) {
  lp__pb_varint(&rc->msg, TE_TYPE, begin ? TYPE_SLICE_BEGIN : TYPE_SLICE_END);
  lp__pb_varint(&rc->msg, TE_TRACK_UUID, PROCESS_UUID + l->id);
  if (begin) lp__pb_str(&rc->msg, TE_NAME, lp_remote_text(rc->t->r, label));
  lp__pb_varint(&rc->pkt, TP_TIMESTAMP, ns + rc->boot_minus_mono);
  lp__pb_msg(&rc->pkt, TP_TRACK_EVENT, &rc->msg);
  pf_packet(rc);
}

/* ---- either format ---- */

static void event(rec_t *rc, const lane_t *l, const char *ph, uint32_t label, uint64_t ns) {
  rc->events++;
  if (rc->perfetto) {
    pf_event(rc, l, ph[0] == 'B', label, ns);
    return;
  }
  uint64_t tid = l->tid;
  fputs(rc->first_event ? "\n" : ",\n", rc->out);
  rc->first_event = false;
  fputs("{\"name\":", rc->out);
  lp_put_json_string(rc->out, lp_remote_text(rc->t->r, label));
  fprintf(rc->out, ",\"ph\":\"%s\",\"ts\":", ph);
  put_ts(rc->out, ns);
  fprintf(rc->out, ",\"pid\":%d,\"tid\":%" PRIu64 "}", (int)rc->t->pid, tid);
}

/* The name of the process (l NULL) or of a thread's lane. */
static void meta(rec_t *rc, const lane_t *l, const char *name) {
  if (rc->perfetto) {
    char about[256];
    snprintf(about, sizeof about,
             "labelprof record: sampled from outside the process at %u Hz requested: each edge is within half a "
             "period of the truth, and a scope shorter than a period may be missing",
             rc->t->hz);
    pf_track(rc, l, name, l ? NULL : about);
    return;
  }
  const char *what = l ? "thread_name" : "process_name";
  uint64_t tid = l ? l->tid : 0;
  fputs(rc->first_event ? "\n" : ",\n", rc->out);
  rc->first_event = false;
  fprintf(rc->out, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%" PRIu64 ",\"args\":{\"name\":", what,
          (int)rc->t->pid, tid);
  lp_put_json_string(rc->out, name);
  fputs("}}", rc->out);
}

/* Ends the lane's scopes from the innermost down to depth keep, at ns. */
static void close_to(rec_t *rc, lane_t *l, uint32_t keep, uint64_t ns) {
  while (l->n > keep) {
    l->n--;
    event(rc, l, "E", l->labels[l->n], ns);
  }
}

/* The lane's stack becomes path (n labels) at the sample of ns. 0, or -1 out of memory. */
static int move_to(rec_t *rc, lane_t *l, const uint32_t *path, uint32_t n, uint64_t ns) {
  /* An edge between two samples is put at their midpoint; scopes open at the first sample start there. */
  uint64_t at = l->seen_ns ? l->seen_ns + (ns - l->seen_ns) / 2 : ns;
  uint32_t same = 0;
  while (same < l->n && same < n && l->labels[same] == path[same]) same++;
  close_to(rc, l, same, at);
  if (n > l->cap) {
    uint32_t *v = realloc(l->labels, n * sizeof *v);
    if (!v) return -1;
    l->labels = v;
    l->cap = n;
  }
  for (; l->n < n; l->n++) {
    l->labels[l->n] = path[l->n];
    event(rc, l, "B", path[l->n], at);
  }
  l->seen_ns = ns;
  return 0;
}

/* One pass: every thread's lane moved to its stack, lanes of threads gone closed. 0, or an LP_REMOTE_* code. */
static int pass(rec_t *rc) {
  lp_top_t *t = rc->t;
  uint64_t before = lp_top_now();
  int e = lp_remote_sample(t->r, t->why, sizeof t->why);
  uint64_t ns = before + (lp_top_now() - before) / 2;
  if (e) return e;
  t->passes[LP_TOP_ALL]++;
  t->now_ns = ns;
  size_t n = lp_remote_thread_count(t->r);
  if (n > rc->nlanes) {
    lane_t *v = realloc(rc->lanes, n * sizeof *v);
    if (!v) return LP_REMOTE_NOMEM;
    memset(v + rc->nlanes, 0, (n - rc->nlanes) * sizeof *v);
    rc->lanes = v;
    rc->nlanes = n;
  }
  for (size_t i = 0; i < n; i++) {
    const lp_rthread_t *p = lp_remote_thread(t->r, i);
    lane_t *l = &rc->lanes[i];
    if (l->open && (!p->live || p->id != l->id)) { /* gone: its scopes end where it was last seen */
      close_to(rc, l, 0, l->seen_ns);
      l->open = false;
    }
    if (!p->live) continue;
    if (!l->open) {
      l->open = true;
      l->id = p->id;
      l->tid = p->tid;
      l->seen_ns = 0;
      l->name[0] = '\0';
    }
    if (strcmp(l->name, p->name) != 0) {
      memcpy(l->name, p->name, sizeof l->name);
      l->name[sizeof l->name - 1] = '\0';
      meta(rc, l, l->name);
    }
    if (!p->read) continue;
    if (p->n + 1 > rc->path_cap) {
      uint32_t *v = realloc(rc->path_buf, (p->n + 1) * sizeof *v);
      if (!v) return LP_REMOTE_NOMEM;
      rc->path_buf = v;
      rc->path_cap = p->n + 1;
    }
    uint32_t depth = 0;
    for (uint32_t f = 0; f < p->n; f++) {
      uint32_t id = lp_remote_label(t->r, p->frames[f]);
      if (id == LP_REMOTE_NOLABEL) return LP_REMOTE_NOMEM;
      rc->path_buf[depth++] = id;
    }
    if (p->depth > p->n) {
      uint32_t id = lp_remote_truncated(t->r);
      if (id == LP_REMOTE_NOLABEL) return LP_REMOTE_NOMEM;
      rc->path_buf[depth++] = id;
    }
    if (move_to(rc, l, rc->path_buf, depth, ns) != 0) return LP_REMOTE_NOMEM;
  }
  return 0;
}

static int finish(rec_t *rc, uint64_t start_ns) {
  lp_top_t *t = rc->t;
  for (size_t i = 0; i < rc->nlanes; i++)
    if (rc->lanes[i].open) close_to(rc, &rc->lanes[i], 0, rc->lanes[i].seen_ns);
  uint64_t dur = t->now_ns > start_ns ? t->now_ns - start_ns : 0;
  if (rc->perfetto) goto close;
  fprintf(rc->out,
          "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"labelprof_record\":\"sampled from outside the process: "
          "each edge is within half a period of the truth, and a scope shorter than a period may be missing\","
          "\"hz_requested\":%u,\"hz_achieved\":%.1f,\"passes\":%" PRIu64 ",\"missed_ticks\":%" PRIu64
          ",\"labelprof_version\":",
          t->hz, dur ? (double)t->passes[LP_TOP_ALL] * 1e9 / (double)dur : 0.0, t->passes[LP_TOP_ALL],
          t->missed[LP_TOP_ALL]);
  lp_put_json_string(rc->out, lp_remote_lib_version(t->r));
  fputs("}}\n", rc->out);
close:;
  int bad = ferror(rc->out);
  if (rc->out == stdout ? fflush(stdout) != 0 : fclose(rc->out) != 0) bad = 1;
  rc->out = NULL;
  lp__pb_free(&rc->pkt);
  lp__pb_free(&rc->msg);
  lp__pb_free(&rc->who);
  if (rc->nomem && !bad) {
    fprintf(stderr, "labelprof record: out of memory: %s lacks some of the timeline\n", rc->path);
    return -1;
  }
  if (bad) {
    fprintf(stderr, "labelprof record: cannot write %s: %s\n", rc->path, strerror(errno));
    return -1;
  }
  return 0;
}

static int run(const void *opts, int n, const char *const *operands) {
  const opts_t *o = opts;
  (void)n;
  (void)operands;
  const char *cmd = lp_cmd_record.name, *out = o->out;
  if (!o->pid) return lp_usage_error(cmd, "-p PID is missing");
  if (!out) return lp_usage_error(cmd, "-o FILE is missing");
  size_t len = strlen(out);
  bool perfetto =
      (len >= 8 && strcmp(out + len - 8, ".pftrace") == 0) || (len >= 15 && strcmp(out + len - 15, ".perfetto-trace") == 0);
  lp_top_t t;
  memset(&t, 0, sizeof t);
  t.pidfd = -1;
  t.hz = o->hz;
  t.pid = (pid_t)o->pid;
  uint64_t dur_ns = o->duration_ns;
  if (lp_top_attach(&t, cmd) != 0) return LP_EXIT_BAD;
  rec_t rc;
  memset(&rc, 0, sizeof rc);
  rc.t = &t;
  rc.path = out;
  rc.perfetto = perfetto;
  rc.first_event = true;
  struct timespec mono, boot;
  if (perfetto && clock_gettime(CLOCK_MONOTONIC, &mono) == 0 && clock_gettime(CLOCK_BOOTTIME, &boot) == 0) {
    int64_t d = ((int64_t)boot.tv_sec - (int64_t)mono.tv_sec) * 1000000000 + (boot.tv_nsec - mono.tv_nsec);
    rc.boot_minus_mono = d > 0 ? (uint64_t)d : 0;
  }
  rc.out = strcmp(out, "-") == 0 ? stdout : fopen(out, "wb");
  if (!rc.out) {
    fprintf(stderr, "labelprof record: cannot write %s: %s\n", out, strerror(errno));
    lp_top_free(&t);
    return LP_EXIT_BAD;
  }
  if (!perfetto) fputs("{\"traceEvents\":[", rc.out);
  meta(&rc, NULL, lp_remote_comm(t.r));
  uint64_t start = t.begin_ns[LP_TOP_ALL], pstart = start, end = start + dur_ns;
  int status = LP_EXIT_OK, e = 0;
  for (;;) {
    uint64_t at = lp_top_next_instant(&t, &pstart);
    if (at >= end) break;
    lp_top_wait_until(&t, at);
    e = pass(&rc);
    if (e) break;
    pstart += 1000000000u / t.hz;
  }
  if (e == LP_REMOTE_NOMEM) snprintf(t.why, sizeof t.why, "out of memory");
  if (finish(&rc, start) != 0) status = LP_EXIT_BAD;
  if (e) {
    fprintf(stderr, "labelprof record: %s; %s holds the timeline until then\n", t.why, out);
    status = LP_EXIT_BAD;
  }
  for (size_t i = 0; i < rc.nlanes; i++) free(rc.lanes[i].labels);
  free(rc.lanes);
  free(rc.path_buf);
  lp_top_free(&t);
  return status;
}
