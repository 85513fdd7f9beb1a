/*
 * trace.c: recording the timeline.
 *
 * Each thread appends 16-byte events (raw ticks, site pointer | kind) to the
 * current chunk of its lane, inline and without a lock (labelprof.h): store
 * the event, publish the cursor with a release store. Only when the chunk is
 * full does it come here, to the slow path, which takes the trace lock and
 * gets the next chunk: a new one while the session's memory budget allows,
 * else, in ring mode, the oldest chunk of the whole session that no thread is
 * still filling (its events are counted as overwritten; it is always the
 * first of its lane, so every lane keeps its newest events, and threads that
 * exited or went quiet cannot hold the budget against new ones), else
 * nothing (discard mode: every later event is counted as dropped, without
 * the lock). A chunk records a clock sync point when it is
 * started; the exporter turns ticks into nanoseconds with them.
 *
 * An export takes a snapshot under the trace lock (full chunks up to their
 * final count, each live thread's current chunk up to its published cursor,
 * names copied) and writes the file after releasing it. Until it is done the
 * chunks are pinned: nothing is recycled (a ring-mode thread that would need
 * to recycle drops and counts instead) and nothing is freed (only a new
 * session frees, and it waits for the export).
 *
 * Lanes of exited threads stay until the next lp_trace_start(), which frees
 * them and every chunk except the one each live thread is writing into (its
 * cursor stays valid; the session starts at the cursor).
 */
#include "internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

LP_EXPORT uint32_t lp_impl_levels;

static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;   /* start, stop, write */
static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER; /* everything below */
static atomic_int tracing;   /* a session is recording */
static atomic_int exhausted; /* discard mode: the budget is spent */
static atomic_int ring;      /* the session's policy is LP_TRACE_RING */
static atomic_int starved;   /* ring mode: the last thread without a chunk found none to take */
static bool pinned;          /* an export is reading the chunks (trace lock) */
static _Atomic uint64_t orphan_dropped;

static bool ever; /* a session was started since load (or fork) */
static lp__lane_t *lanes;
static lp__lane_t *tracks[LP__MAX_TRACKS];
static _Atomic uint32_t ntracks;
static lp_trace_opts_t session_opts = {LP_LEVEL_STANDARD, LP_TRACE_DISCARD, 64u << 20, LP_CLOCK_AUTO};
static uint64_t used; /* bytes of chunks in use */
static lp__chunk_t *oldest, *newest; /* every chunk in use, by the time it was started */
static lp__sync_t start_sync, stop_sync;
static bool stopped;

/* ---- chunks ------------------------------------------------------------------- */

static uint32_t count_payloads(const lp__chunk_t *c, uint32_t from, uint32_t to) {
  uint32_t n = 0;
  for (uint32_t i = from; i < to; i++) n += (c->ev[i].tag & LP_IMPL_EV_KIND) == LP__EV_PAYLOAD;
  return n;
}

/* The number of events in chunk c of lane l (c == l->last of a live thread: its published cursor). */
static uint32_t chunk_end(const lp__lane_t *l, const lp__chunk_t *c) {
  if (l->owner && c == l->last) {
    const lp_impl_event_t *e = LP_IMPL_LOAD_ACQUIRE(l->owner->hot.tcur);
    if (e >= c->ev && e <= c->ev + LP__CHUNK_EVENTS) return (uint32_t)(e - c->ev);
  }
  return c->count;
}

static void age_unlink(lp__chunk_t *c) {
  if (c->older)
    c->older->newer = c->newer;
  else
    oldest = c->newer;
  if (c->newer)
    c->newer->older = c->older;
  else
    newest = c->older;
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

static lp__chunk_t *take(lp__chunk_t *c) {
  lp__lane_t *l = c->lane;
  assert(l->first == c);
  /* Closed: its count and payloads are final. */
  l->overwritten += (c->count - c->begin) - (c->payloads - c->payloads_before_begin);
  l->first = c->next;
  if (!l->first) l->last = NULL;
  age_unlink(c);
  return c;
}

/*
 * Ring mode: the oldest chunk nobody is filling. A lane's last chunk is the
 * one its thread (or track) fills, and the asker keeps its own too while any
 * other can be had. A lane's chunks are in the global order, so whatever is
 * found first is the oldest of its lane.
 */
static lp__chunk_t *take_oldest(lp__lane_t *asking) {
  if (pinned) return NULL;
  for (lp__chunk_t *c = oldest; c; c = c->newer) {
    lp__lane_t *l = c->lane;
    if (c == l->last && (l->owner || l->cur || l == asking)) continue;
    return take(c);
  }
  /* Nothing else: the asker reuses the one chunk it has. */
  if (asking->first && asking->first == asking->last) return take(asking->first);
  return NULL;
}

/* The lane's next chunk: a new one within the budget, else (ring) the oldest one free, else NULL. */
static lp__chunk_t *next_chunk(lp__lane_t *l) {
  lp__chunk_t *c = NULL;
  if (used + LP__CHUNK_BYTES <= session_opts.budget_bytes && (c = aligned_alloc(64, LP__CHUNK_BYTES)) != NULL)
    used += LP__CHUNK_BYTES;
  else if (session_opts.policy == LP_TRACE_RING)
    c = take_oldest(l);
  if (!c) return NULL;
  c->next = NULL;
  c->lane = l;
  c->sync = lp__clock_sync();
  c->begin = 0;
  c->count = 0;
  c->payloads = c->payloads_before_begin = 0;
  if (l->last)
    l->last->next = c;
  else
    l->first = c;
  l->last = c;
  age_append(c);
  return c;
}

static void free_chunks(lp__lane_t *l) {
  for (lp__chunk_t *c = l->first, *n; c; c = n) {
    n = c->next;
    age_unlink(c);
    free(c);
  }
  l->first = l->last = NULL;
}

static void free_lane(lp__lane_t *l) {
  free_chunks(l);
  for (uint32_t i = 0; i < l->nnames; i++) free(l->names[i]);
  free(l->names);
  free(l->name_slots);
  free(l->name);
  free(l);
}

static lp__lane_t *new_lane(lp__thread_t *t) {
  lp__lane_t *l = calloc(1, sizeof *l);
  if (!l || !(l->name = strdup(t->name))) {
    free(l);
    return NULL;
  }
  l->owner = t;
  l->tid = t->tid;
  l->dropped_base = 0;
  /* Append: lanes are written in the order threads first recorded. */
  lp__lane_t **pp = &lanes;
  while (*pp) pp = &(*pp)->next;
  *pp = l;
  t->lane = l;
  return l;
}

static void drop(lp__lane_t *l) {
  if (l)
    lp__bump(&l->dropped);
  else
    atomic_fetch_add_explicit(&orphan_dropped, 1, memory_order_relaxed);
}

/* The slow path of every event: the chunk is full, or the thread has none. */
static uint32_t record_slow(uintptr_t tag, uint64_t payload, unsigned nslots) {
  lp__thread_t *t = lp__thread_attach();
  if (!t) return 0;
  lp__lane_t *l = t->lane;
  /*
   * Nothing to be had, known without the lock: count and leave. Discard mode
   * with the budget spent; or ring mode, no chunk of its own, and the last
   * thread in that state found none to take (reset when a chunk frees up).
   * A live thread's lane->last changes only by its own hand.
   */
  if (l && (atomic_load_explicit(&ring, memory_order_relaxed)
                ? !l->last && atomic_load_explicit(&starved, memory_order_relaxed)
                : atomic_load_explicit(&exhausted, memory_order_relaxed))) {
    lp__bump(&l->dropped);
    return 0;
  }
  lp__lock(&trace_mu);
  uint32_t ok = 0;
  if (!atomic_load_explicit(&tracing, memory_order_relaxed)) {
    if (l) lp__bump(&l->dropped); /* the end of a scope that outlived the session */
    goto out;
  }
  if (!l && !(l = new_lane(t))) {
    drop(NULL);
    goto out;
  }
  if (l->last) {
    l->last->count = (uint32_t)(LP_IMPL_LOAD_RELAXED(t->hot.tcur) - l->last->ev);
    /* The chunk it leaves can be taken. Written only when set: no shared line touched per chunk. */
    if (atomic_load_explicit(&starved, memory_order_relaxed)) atomic_store_explicit(&starved, 0, memory_order_relaxed);
  }
  lp__chunk_t *c = next_chunk(l);
  if (!c) {
    if (!atomic_load_explicit(&ring, memory_order_relaxed))
      atomic_store(&exhausted, 1);
    else if (!l->last)
      atomic_store_explicit(&starved, 1, memory_order_relaxed);
    lp__bump(&l->dropped);
    goto out;
  }
  c->ev[0].ts = lp_impl_ticks();
  c->ev[0].tag = tag;
  if (nslots == 2) {
    c->ev[1] = (lp_impl_event_t){payload, LP__EV_PAYLOAD};
    c->payloads = 1;
  }
  t->hot.tlim = c->ev + LP__CHUNK_EVENTS;
  LP_IMPL_STORE_RELEASE(t->hot.tcur, c->ev + nslots);
  ok = 1;
out:
  lp__unlock(&trace_mu);
  return ok;
}

uint32_t lp_impl_emit_slow(uintptr_t tag) { return record_slow(tag, 0, 1); }

void lp_impl_counter(const lp_site_t *site, int64_t value) {
  lp_impl_thread_t *h = lp_impl_self;
  lp_impl_event_t *e = LP_IMPL_LOAD_RELAXED(h->tcur);
  uintptr_t tag = (uintptr_t)site | LP_IMPL_EV_COUNTER;
  if (e && h->tlim - e >= 2) {
    e[0].ts = lp_impl_ticks();
    e[0].tag = tag;
    e[1].ts = (uint64_t)value;
    e[1].tag = LP__EV_PAYLOAD;
    ((lp__thread_t *)h)->lane->last->payloads++; /* a cursor means a lane and a current chunk */
    LP_IMPL_STORE_RELEASE(h->tcur, e + 2);
    return;
  }
  record_slow(tag, (uint64_t)value, 2);
}

/* ---- threads ------------------------------------------------------------------- */

void lp__trace_thread_exit(lp__thread_t *t) {
  if (!t->lane) return;
  lp__lock(&trace_mu);
  lp__lane_t *l = t->lane;
  if (l->last) l->last->count = (uint32_t)(LP_IMPL_LOAD_RELAXED(t->hot.tcur) - l->last->ev);
  l->owner = NULL; /* the lane and its events stay until the next session starts */
  t->lane = NULL;
  atomic_store_explicit(&starved, 0, memory_order_relaxed); /* its chunk can be taken now */
  lp__unlock(&trace_mu);
}

void lp__trace_thread_renamed(lp__thread_t *t) {
  if (!t->lane) return;
  char *n = strdup(t->name);
  if (!n) return; /* keeps the old name */
  lp__lock(&trace_mu);
  free(t->lane->name);
  t->lane->name = n;
  lp__unlock(&trace_mu);
}

/* ---- sessions ------------------------------------------------------------------ */

/* Drops the last session: exited lanes go, live lanes keep only the chunk their cursor is in. */
static void reset(void) {
  used = 0;
  for (lp__lane_t **pp = &lanes; *pp;) {
    lp__lane_t *l = *pp;
    if (!l->owner) {
      *pp = l->next;
      free_lane(l);
      continue;
    }
    lp__chunk_t *keep = l->last;
    for (lp__chunk_t *c = l->first, *n; c && c != keep; c = n) {
      n = c->next;
      age_unlink(c);
      free(c);
    }
    l->first = keep;
    if (keep) {
      keep->begin = chunk_end(l, keep);
      keep->payloads_before_begin = count_payloads(keep, 0, keep->begin);
      used += LP__CHUNK_BYTES;
    }
    l->dropped_base = atomic_load_explicit(&l->dropped, memory_order_relaxed);
    l->overwritten = 0;
    pp = &l->next;
  }
  uint32_t n = atomic_load(&ntracks);
  for (uint32_t i = 0; i < n; i++) {
    lp__lane_t *l = tracks[i];
    free_chunks(l);
    /* No event refers to a work name any more. */
    for (uint32_t k = 0; k < l->nnames; k++) free(l->names[k]);
    free(l->names);
    free(l->name_slots);
    l->names = NULL;
    l->name_slots = NULL;
    l->nnames = l->capnames = l->name_mask = 0;
    l->cur = l->lim = NULL;
    l->dropped_base = atomic_load_explicit(&l->dropped, memory_order_relaxed);
    l->overwritten = 0;
  }
}

int lp_trace_start(const lp_trace_opts_t *opts) {
  lp_trace_opts_t want = opts ? *opts : (lp_trace_opts_t){0};
  if (!want.levels) want.levels = LP_LEVEL_STANDARD;
  if (!want.budget_bytes) want.budget_bytes = 64u << 20;
  if ((want.levels & ~LP_LEVEL_ALL) || (want.policy != LP_TRACE_DISCARD && want.policy != LP_TRACE_RING) ||
      want.budget_bytes < LP__CHUNK_BYTES)
    return -EINVAL;
  lp__fork_init();
  lp__clock_choose(want.clock); /* before the first event: the tick source never changes after */
  lp__lock(&ctl_mu);
  if (atomic_load(&tracing)) {
    lp__unlock(&ctl_mu);
    return -EBUSY;
  }
  lp__lock(&trace_mu);
  reset();
  session_opts = want;
  ever = true;
  stopped = false;
  start_sync = lp__clock_sync();
  atomic_store(&orphan_dropped, 0);
  atomic_store(&exhausted, 0);
  atomic_store(&starved, 0);
  atomic_store(&ring, want.policy == LP_TRACE_RING);
  atomic_store(&tracing, 1);
  LP_IMPL_STORE_RELEASE(lp_impl_levels, want.levels);
  lp__unlock(&trace_mu);
  lp__unlock(&ctl_mu);
  return 0;
}

int lp_trace_stop(void) {
  lp__lock(&ctl_mu);
  if (!atomic_load(&tracing)) {
    lp__unlock(&ctl_mu);
    return -EINVAL;
  }
  LP_IMPL_STORE_RELEASE(lp_impl_levels, 0u);
  lp__lock(&trace_mu);
  atomic_store(&tracing, 0);
  stop_sync = lp__clock_sync();
  stopped = true;
  lp__unlock(&trace_mu);
  lp__unlock(&ctl_mu);
  return 0;
}

int lp_trace_running(void) { return atomic_load(&tracing); }

/* Events (payload slots not counted) in [begin, end) of c. */
static uint64_t events_in(const lp__chunk_t *c, uint32_t begin, uint32_t end) {
  return (end - begin) - count_payloads(c, begin, end);
}

static uint64_t lane_dropped(const lp__lane_t *l) {
  return atomic_load_explicit(&l->dropped, memory_order_relaxed) - l->dropped_base + l->overwritten;
}

static void free_session(lp__session_t *s) {
  for (uint32_t i = 0; i < s->nlanes; i++) {
    free(s->lanes[i].name);
    free(s->lanes[i].work);
    free(s->lanes[i].chunks);
  }
  free(s->lanes);
  free(s->syncs);
  memset(s, 0, sizeof *s);
}

/* Adds lane l to the snapshot if it has events. Trace lock held. */
static int snap_lane(lp__session_t *s, const lp__lane_t *l) {
  uint32_t n = 0;
  for (const lp__chunk_t *c = l->first; c; c = c->next) n++;
  lp__snap_lane_t *sl = &s->lanes[s->nlanes];
  memset(sl, 0, sizeof *sl);
  sl->chunks = calloc(n + 1, sizeof *sl->chunks);
  if (!sl->chunks) return -ENOMEM;
  uint64_t events = 0;
  for (const lp__chunk_t *c = l->first; c; c = c->next) {
    uint32_t end = chunk_end(l, c);
    if (end <= c->begin) continue;
    sl->chunks[sl->nchunks++] = (lp__snap_chunk_t){c, c->begin, end};
    events += events_in(c, c->begin, end);
  }
  s->recorded += events;
  s->dropped += lane_dropped(l);
  if (!sl->nchunks) {
    free(sl->chunks);
    return 0;
  }
  sl->tid = l->tid;
  if (!(sl->name = strdup(l->name))) goto nomem;
  if (!l->owner && l->names) { /* a track: its work names as they are now */
    if (!(sl->work = malloc((l->nnames + 1) * sizeof *sl->work))) goto nomem;
    memcpy(sl->work, l->names, l->nnames * sizeof *sl->work);
  }
  s->nlanes++;
  return 0;
nomem:
  free(sl->name);
  free(sl->chunks);
  return -ENOMEM;
}

/* The session as an export sees it. Trace lock held; *s is freed with free_session(). */
static int snapshot(lp__session_t *s) {
  memset(s, 0, sizeof *s);
  uint32_t nlanes = atomic_load(&ntracks), nchunks = 0;
  for (const lp__lane_t *l = lanes; l; l = l->next) {
    nlanes++;
    for (const lp__chunk_t *c = l->first; c; c = c->next) nchunks++;
  }
  s->opts = session_opts;
  s->lanes = calloc(nlanes + 1, sizeof *s->lanes);
  s->syncs = malloc((nchunks + 3) * sizeof *s->syncs);
  if (!s->lanes || !s->syncs) goto nomem;
  s->syncs[s->nsyncs++] = start_sync;
  if (stopped) s->syncs[s->nsyncs++] = stop_sync;
  s->syncs[s->nsyncs++] = lp__clock_sync();
  for (const lp__lane_t *l = lanes; l; l = l->next) {
    for (const lp__chunk_t *c = l->first; c; c = c->next) s->syncs[s->nsyncs++] = c->sync;
    if (snap_lane(s, l) != 0) goto nomem;
  }
  s->nthreads = s->nlanes;
  for (uint32_t i = 0; i < atomic_load(&ntracks); i++)
    if (snap_lane(s, tracks[i]) != 0) goto nomem;
  s->dropped += atomic_load(&orphan_dropped);
  return 0;
nomem:
  free_session(s);
  return -ENOMEM;
}

int lp_trace_get_stats(lp_trace_stats_t *out) {
  if (!out) return -EINVAL;
  memset(out, 0, sizeof *out);
  lp__lock(&trace_mu);
  /* Counted in place: a snapshot would allocate. */
  for (const lp__lane_t *l = lanes; l; l = l->next) {
    uint64_t before = out->recorded;
    for (const lp__chunk_t *c = l->first; c; c = c->next) out->recorded += events_in(c, c->begin, chunk_end(l, c));
    out->threads += out->recorded > before;
    out->dropped += lane_dropped(l);
  }
  uint32_t n = atomic_load(&ntracks);
  for (uint32_t i = 0; i < n; i++) {
    for (const lp__chunk_t *c = tracks[i]->first; c; c = c->next) out->recorded += events_in(c, c->begin, c->count);
    out->dropped += lane_dropped(tracks[i]);
  }
  out->dropped += atomic_load(&orphan_dropped);
  out->budget_bytes = session_opts.budget_bytes;
  out->used_bytes = used;
  out->tracks = n;
  lp__unlock(&trace_mu);
  return 0;
}

/* ---- writing ------------------------------------------------------------------- */

typedef struct output {
  int fd;
  char *tmp;   /* the temporary file, renamed over `final` at the end; NULL when writing directly */
  char *final; /* the path to rename to: the user's, or the file a symbolic link points at */
} output_t;

/* /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: the descriptor they name, or -1. */
static int named_fd(const char *path) {
  const char *num = NULL;
  if (strcmp(path, "/dev/stdout") == 0) return 1;
  if (strcmp(path, "/dev/stderr") == 0) return 2;
  if (strncmp(path, "/dev/fd/", 8) == 0) num = path + 8;
  if (strncmp(path, "/proc/self/fd/", 14) == 0) num = path + 14;
  if (!num || !*num) return -1;
  char *end;
  long n = strtol(num, &end, 10);
  return *end || n < 0 || n > INT32_MAX ? -1 : (int)n;
}

/*
 * Follows symbolic links from path to the file they end at, which may not
 * exist yet (a link to the trace to be written). NULL with errno on failure.
 */
static char *follow_links(const char *path) {
  char *cur = strdup(path);
  if (!cur) {
    errno = ENOMEM;
    return NULL;
  }
  for (int hop = 0; hop < 40; hop++) {
    struct stat st;
    if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return cur; /* the end: a file, or nothing yet */
    char target[4096];
    ssize_t n = readlink(cur, target, sizeof target - 1);
    if (n < 0) {
      int err = errno;
      free(cur);
      errno = err;
      return NULL;
    }
    target[n] = '\0';
    /* A relative target is relative to the link's directory. */
    const char *slash = strrchr(cur, '/');
    size_t dirlen = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
    char *next = malloc(dirlen + (size_t)n + 1);
    if (!next) {
      free(cur);
      errno = ENOMEM;
      return NULL;
    }
    memcpy(next, cur, dirlen);
    memcpy(next + dirlen, target, (size_t)n + 1);
    free(cur);
    cur = next;
  }
  free(cur);
  errno = ELOOP;
  return NULL;
}

/*
 * Opens what the JSON goes to. A descriptor named by path (/dev/stdout...) is
 * duplicated and written at its current offset, as a shell redirect expects.
 * A symbolic link is followed to its target. A regular file, or a path that
 * does not exist yet, gets a temporary sibling that is renamed over it at the
 * end; anything else (a pipe, a device) is written directly.
 */
static int open_output(const char *path, output_t *o) {
  struct stat st;
  memset(o, 0, sizeof *o);
  int named = named_fd(path);
  if (named >= 0) {
    o->fd = fcntl(named, F_DUPFD_CLOEXEC, 3);
    return o->fd >= 0 ? 0 : -errno;
  }
  if (!(o->final = follow_links(path))) return -errno;
  if (stat(o->final, &st) == 0 && !S_ISREG(st.st_mode)) {
    o->fd = open(o->final, O_WRONLY | O_CLOEXEC);
    return o->fd >= 0 ? 0 : -errno;
  }
  size_t len = strlen(o->final) + 48;
  if (!(o->tmp = malloc(len))) return -ENOMEM;
  static _Atomic unsigned serial;
  for (int attempt = 0; attempt < 100; attempt++) {
    snprintf(o->tmp, len, "%s.tmp-%ld-%u", o->final, (long)getpid(), atomic_fetch_add(&serial, 1));
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (o->fd >= 0) return 0;
    if (errno != EEXIST) break;
  }
  int err = errno == EEXIST ? -EEXIST : -errno;
  free(o->tmp);
  o->tmp = NULL;
  return err;
}

/* Closes, and renames or removes the temporary file; returns rc or the first error of these. */
static int close_output(output_t *o, int rc) {
  if (o->fd >= 0 && close(o->fd) != 0 && rc == 0) rc = -errno;
  if (o->tmp) {
    if (rc == 0 && rename(o->tmp, o->final) != 0) rc = -errno;
    if (rc != 0) unlink(o->tmp);
  }
  free(o->tmp);
  free(o->final);
  return rc;
}

/*
 * Formats and writes a snapshot. SIGPIPE is blocked for the calling thread
 * meanwhile, so that a pipe whose reader has gone makes this return -EPIPE
 * instead of killing the process; the signal it raised is then consumed,
 * unless one was already pending.
 */
static int write_snapshot(int fd, const lp__session_t *s, const char *process_name) {
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
  int rc = pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  if (rc != 0) return -rc;
  lp__jw_t w;
  rc = lp__jw_init(&w, fd);
  if (rc == 0) rc = lp__export_json(&w, s, process_name);
  int frc = lp__jw_finish(&w);
  if (rc == 0) rc = frc;
  if (rc == -EPIPE && !was_pending) {
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_only, NULL, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

int lp_trace_write_json(const char *path, const char *process_name) {
  if (!path) return -EINVAL;
  lp__lock(&ctl_mu);
  if (!ever) {
    lp__unlock(&ctl_mu);
    return -EINVAL;
  }
  output_t out;
  int rc = open_output(path, &out);
  if (rc != 0) {
    close_output(&out, rc);
    lp__unlock(&ctl_mu);
    return rc;
  }
  lp__session_t s;
  lp__lock(&trace_mu);
  rc = snapshot(&s);
  pinned = rc == 0;
  lp__unlock(&trace_mu);
  if (rc == 0) {
    rc = write_snapshot(out.fd, &s, process_name);
    lp__lock(&trace_mu);
    pinned = false;
    atomic_store_explicit(&starved, 0, memory_order_relaxed); /* chunks can be taken again */
    lp__unlock(&trace_mu);
    free_session(&s);
  }
  rc = close_output(&out, rc);
  lp__unlock(&ctl_mu);
  return rc;
}

/* ---- tracks -------------------------------------------------------------------- */

lp_track_t lp_track_create(const char *name) {
  if (!name) return -EINVAL;
  lp__lane_t *l = calloc(1, sizeof *l);
  if (!l || !(l->name = strdup(name))) {
    free(l);
    return -ENOMEM;
  }
  lp__lock(&trace_mu);
  uint32_t n = atomic_load(&ntracks);
  if (n == LP__MAX_TRACKS) {
    lp__unlock(&trace_mu);
    free_lane(l);
    return -ENOMEM;
  }
  /* Synthetic ids far above any kernel thread id (pid_max is at most 2^22). */
  l->tid = 1000000000u + n;
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
  if (l->name_slots) {
    for (uint32_t h = hash_name(name) & l->name_mask;; h = (h + 1) & l->name_mask) {
      uint32_t s = l->name_slots[h];
      if (!s) break;
      if (strcmp(l->names[s - 1], name) == 0) return s - 1;
    }
  }
  if (l->nnames == LP__MAX_WORK_NAMES) return LP__NONE; /* names are not freed within a session */
  if (!l->name_slots || (l->nnames + 1) * 2 > l->name_mask + 1) {
    uint32_t mask = l->name_slots ? l->name_mask * 2 + 1 : 63;
    uint32_t *slots = calloc((size_t)mask + 1, sizeof *slots);
    if (!slots) return LP__NONE;
    for (uint32_t i = 0; i < l->nnames; i++) {
      uint32_t h = hash_name(l->names[i]) & mask;
      while (slots[h]) h = (h + 1) & mask;
      slots[h] = i + 1;
    }
    free(l->name_slots);
    l->name_slots = slots;
    l->name_mask = mask;
  }
  if (l->nnames == l->capnames) {
    uint32_t cap = l->capnames ? l->capnames * 2 : 16;
    char **names = realloc(l->names, cap * sizeof *names);
    if (!names) return LP__NONE;
    l->names = names;
    l->capnames = cap;
  }
  char *copy = strdup(name);
  if (!copy) return LP__NONE;
  uint32_t h = hash_name(name) & l->name_mask;
  while (l->name_slots[h]) h = (h + 1) & l->name_mask;
  l->name_slots[h] = l->nnames + 1;
  l->names[l->nnames] = copy;
  return l->nnames++;
}

int lp_track_complete(lp_track_t track, const char *name, uint64_t start_ns, uint64_t dur_ns) {
  if (!name || track < 0 || (uint32_t)track >= atomic_load_explicit(&ntracks, memory_order_acquire) ||
      dur_ns > UINT64_MAX - start_ns)
    return -EINVAL;
  lp__lane_t *l = tracks[track];
  if (!atomic_load_explicit(&tracing, memory_order_relaxed)) return 0;
  lp__lock(&trace_mu);
  if (atomic_load_explicit(&tracing, memory_order_relaxed)) {
    uint32_t id = intern(l, name);
    if (id != LP__NONE && (!l->cur || l->lim - l->cur < 2)) {
      lp__chunk_t *c = next_chunk(l);
      if (c) {
        l->cur = c->ev;
        l->lim = c->ev + LP__CHUNK_EVENTS;
      } else {
        if (session_opts.policy == LP_TRACE_DISCARD) atomic_store(&exhausted, 1);
        l->cur = l->lim = NULL;
      }
    }
    if (id != LP__NONE && l->cur) {
      l->cur[0] = (lp_impl_event_t){start_ns, ((uintptr_t)id << 3) | LP__EV_TRACK};
      l->cur[1] = (lp_impl_event_t){dur_ns, LP__EV_PAYLOAD};
      l->cur += 2;
      l->last->payloads++;
      l->last->count = (uint32_t)(l->cur - l->last->ev);
    } else {
      atomic_fetch_add_explicit(&l->dropped, 1, memory_order_relaxed);
    }
  }
  lp__unlock(&trace_mu);
  return 0;
}

/* ---- fork: see thread.c -------------------------------------------------------- */

void lp__trace_atfork_prepare(void) {
  lp__lock(&ctl_mu);
  lp__lock(&trace_mu);
}

void lp__trace_atfork_parent(void) {
  lp__unlock(&trace_mu);
  lp__unlock(&ctl_mu);
}

void lp__trace_atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  ctl_mu = fresh;
  trace_mu = fresh;
  /* The child records nothing until it starts a session of its own. */
  LP_IMPL_STORE_RELEASE(lp_impl_levels, 0u);
  atomic_store(&tracing, 0);
  pinned = false;
  ever = false;
  lp__thread_t *self = lp__thread_current();
  if (self) {
    self->lane = NULL;
    LP_IMPL_STORE_RELEASE(self->hot.tcur, (lp_impl_event_t *)NULL);
    self->hot.tlim = NULL;
  }
  for (lp__lane_t *l = lanes, *n; l; l = n) {
    n = l->next;
    free_lane(l);
  }
  lanes = NULL;
  reset(); /* empties the tracks */
  oldest = newest = NULL;
}
