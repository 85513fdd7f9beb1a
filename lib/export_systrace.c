/*
 * export_systrace.c: a session as systrace text (lp_trace_write_systrace).
 *
 * The same lanes, window and pairing as every format (the lane walker,
 * walk.c), written as ftrace text lines: a B line where a scope begins, an
 * E line where it ends, with the site's layer and phase as NNAPI's tag
 * ("[NN_LR_PE]label"). Lines must come in time order across threads, so
 * each lane's begins and ends are first turned into records (times already
 * strictly increasing within the lane, made-up begins in front), then the
 * lanes' runs are merged by time through a heap and formatted: a line is a
 * lane's fixed prefix, the time, and the site's tagged label (escaped once
 * per site), copied into the buffer. Tracks, instants and counters have no
 * lines here.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct st_rec {
  uint64_t ns;
  const lp_site_t *site; /* NULL for an end */
  uint32_t ends;         /* an end: how many E lines (a switch's end also ends what it replaced) */
  bool plain;            /* a switch's begin without its [SW]: it replaced nothing that was written */
} st_rec_t;

typedef struct st_writer {
  st_rec_t *recs;
  size_t n, cap;
  st_rec_t *made; /* made-up begins of the current lane */
  size_t nmade, capmade;
  /* The last record, if it is the end of a scope at last_depth: a switch that follows takes its place. */
  size_t last_end;
  uint32_t last_depth, last_extra;
  bool nomem;
} st_writer_t;

static inline bool st_push(st_rec_t **a, size_t *n, size_t *cap, uint64_t ns, const lp_site_t *site) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 4096;
    st_rec_t *r = lp__realloc(*a, c * sizeof *r);
    if (!r) return false;
    *a = r;
    *cap = c;
  }
  (*a)[(*n)++] = (st_rec_t){ns, site, 1, false};
  return true;
}

static inline void st_rec(st_writer_t *sw, uint64_t ns, const lp_site_t *site) {
  sw->last_end = SIZE_MAX;
  if (!st_push(&sw->recs, &sw->n, &sw->cap, ns, site)) sw->nomem = true;
}

/* The end of a scope: one E line, plus one for each scope that switches replaced on the way. */
static void st_rec_end(st_writer_t *sw, uint64_t ns, const lp__scope_t *o) {
  st_rec(sw, ns, NULL);
  if (sw->nomem) return;
  sw->recs[sw->n - 1].ends = 1 + o->extra;
  sw->last_end = sw->n - 1;
  sw->last_depth = o->depth;
  sw->last_extra = o->extra;
}

/* ---- the sink (walk.c calls it) ---- */

static void st_slice(void *ctx, const lp__scope_t *o, uint64_t end, unsigned flags) {
  st_writer_t *sw = ctx;
  if (flags & LP__SLICE_TRUNCATED) {
    if (!st_push(&sw->made, &sw->nmade, &sw->capmade, o->ns, o->site)) sw->nomem = true;
    /* Its begin is not in the window: written plain, so its end is one E. */
    else if (o->site->mode == LP_MODE_SWITCH) sw->made[sw->nmade - 1].plain = true;
  }
  st_rec_end(sw, end, o);
}

/*
 * A switch: its begin follows the end of the scope it replaced. NNAPI's
 * readers end that scope themselves when they see [SW], and expect one
 * more E when the switch ends: the replaced scope's end moves there.
 */
static void st_begin(void *ctx, lp__scope_t *o) {
  st_writer_t *sw = ctx;
  bool plain = false;
  if (o->site->mode == LP_MODE_SWITCH) {
    if (sw->last_end == sw->n - 1 && sw->last_end != SIZE_MAX && sw->last_depth == o->depth) {
      o->extra = sw->last_extra + 1;
      sw->n--;
    } else {
      plain = true;
    }
  }
  st_rec(sw, o->ns, o->site);
  if (!sw->nomem) sw->recs[sw->n - 1].plain = plain;
}

static const lp__sink_t st_sink = {st_begin, st_slice, NULL, NULL, NULL, NULL, true};

static int st_cmp_ns(const void *a, const void *b) {
  const st_rec_t *x = a, *y = b;
  return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/* A thread lane's records, appended to sw->recs: made-up begins first, then the lane in order. */
static void st_lane(st_writer_t *sw, lp__walk_t *lw, const lp__snap_lane_t *l) {
  size_t first = sw->n;
  sw->nmade = 0;
  sw->last_end = SIZE_MAX;
  lp__walk_lane(lw, l);
  if (!sw->nmade || sw->nomem || lw->nomem) return;
  /* Made-up begins go in front, outermost (earliest) first. */
  qsort(sw->made, sw->nmade, sizeof *sw->made, st_cmp_ns);
  size_t n = sw->n - first;
  for (size_t k = 0; k < sw->nmade; k++) st_rec(sw, 0, NULL); /* room */
  if (sw->nomem) return;
  memmove(sw->recs + first + sw->nmade, sw->recs + first, n * sizeof *sw->recs);
  memcpy(sw->recs + first, sw->made, sw->nmade * sizeof *sw->made);
}

/* A label as systrace text: the tag, then the label with control characters and DEL as '?'. */
static char *st_label_text(const lp_site_t *site, size_t *len) {
  const char *label = lp__label(site);
  size_t n = strlen(label);
  char *t = lp__malloc(n + LP__TAG_MAX + 1);
  if (!t) return NULL;
  size_t o = lp__site_tag(site, t, LP__TAG_MAX);
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)label[i];
    t[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
  }
  t[o] = '\0';
  *len = o;
  return t;
}

/* A thread's task column as the kernel prints it: "%16s-%-5d (%5d) [000] ...1 ", the name cut to 15 bytes. */
static size_t st_prefix(char *buf, size_t size, const char *name, uint64_t tid, int pid) {
  char comm[17];
  size_t n = 0;
  for (; name && name[n] && n < 15; n++) {
    unsigned char ch = (unsigned char)name[n];
    comm[n] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
  }
  if (n == 0) {
    memcpy(comm, "<...>", 5);
    n = 5;
  } else if (n == 1) {
    comm[n++] = ' '; /* AOSP's parser needs two characters before "-tid" */
  }
  comm[n] = '\0';
  int r = snprintf(buf, size, "%16s-%-5llu (%5d) [000] ...1 ", comm, (unsigned long long)tid, pid);
  return r > 0 && (size_t)r < size ? (size_t)r : 0;
}

/*
 * " %5lu.%06lu" of ns, as the kernel prints its timestamps (truncated to
 * microseconds). The seconds' text is kept from one line to the next (they
 * rarely change), the microseconds are written two digits at a time.
 */
typedef struct st_clock_text {
  uint64_t sec;
  char text[32];
  size_t len;
} st_clock_text_t;

static const char st_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static char *st_put_time(char *o, uint64_t ns, st_clock_text_t *ct) {
  uint64_t sec = ns / 1000000000u;
  uint32_t us = (uint32_t)((ns % 1000000000u) / 1000u);
  if (sec != ct->sec || !ct->len) {
    char d[24];
    int k = 0;
    uint64_t v = sec;
    do d[k++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    size_t n = 0;
    ct->text[n++] = ' ';
    for (int pad = 5 - k; pad > 0; pad--) ct->text[n++] = ' ';
    while (k > 0) ct->text[n++] = d[--k];
    ct->text[n++] = '.';
    ct->sec = sec;
    ct->len = n;
  }
  memcpy(o, ct->text, ct->len);
  o += ct->len;
  uint32_t hi = us / 10000u, mid = (us / 100u) % 100u, lo = us % 100u;
  memcpy(o, st_pairs + 2 * hi, 2);
  memcpy(o + 2, st_pairs + 2 * mid, 2);
  memcpy(o + 4, st_pairs + 2 * lo, 2);
  return o + 6;
}

typedef struct st_lane_out {
  size_t pos, end; /* its records in sw->recs */
  char prefix[64];
  size_t plen;
} st_lane_out_t;

typedef struct st_label {
  const lp_site_t *site;
  char *text;
  size_t len;
} st_label_t;

/* The site's label text, from an open-addressed table; NULL when out of memory. */
static const st_label_t *st_label(st_label_t **tab, uint32_t *mask, uint32_t *count, const lp_site_t *site) {
  if (*tab) {
    for (uint32_t h = lp__ptr_home(site, *mask);; h = (h + 1) & *mask) {
      if (!(*tab)[h].site) break;
      if ((*tab)[h].site == site) return &(*tab)[h];
    }
  }
  if (!*tab || (*count + 1) * 2 > *mask + 1) {
    uint32_t m = *tab ? *mask * 2 + 1 : 255;
    st_label_t *nt = lp__calloc((size_t)m + 1, sizeof *nt);
    if (!nt) return NULL;
    for (uint32_t i = 0; *tab && i <= *mask; i++) {
      if (!(*tab)[i].site) continue;
      uint32_t h = lp__ptr_home((*tab)[i].site, m);
      while (nt[h].site) h = (h + 1) & m;
      nt[h] = (*tab)[i];
    }
    free(*tab);
    *tab = nt;
    *mask = m;
  }
  st_label_t e = {site, NULL, 0};
  if (!(e.text = st_label_text(site, &e.len))) return NULL;
  uint32_t h = lp__ptr_home(site, *mask);
  while ((*tab)[h].site) h = (h + 1) & *mask;
  (*tab)[h] = e;
  (*count)++;
  return &(*tab)[h];
}

static const char st_header[] =
    "#                                      _-----=> irqs-off\n"
    "#                                     / _----=> need-resched\n"
    "#                                    | / _---=> hardirq/softirq\n"
    "#                                    || / _--=> preempt-depth\n"
    "#                                    ||| /     delay\n"
    "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n"
    "#              | |        |      |   ||||       |         |\n";

/* Heap of lanes ordered by their next record's time (then by lane order). */
static bool st_less(const st_writer_t *sw, const st_lane_out_t *lo, uint32_t a, uint32_t b) {
  uint64_t x = sw->recs[lo[a].pos].ns, y = sw->recs[lo[b].pos].ns;
  return x < y || (x == y && a < b);
}

static void st_sift(const st_writer_t *sw, const st_lane_out_t *lo, uint32_t *heap, uint32_t n, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && st_less(sw, lo, heap[l], heap[m])) m = l;
    if (r < n && st_less(sw, lo, heap[r], heap[m])) m = r;
    if (m == i) return;
    uint32_t t = heap[i];
    heap[i] = heap[m];
    heap[m] = t;
    i = m;
  }
}

int lp__export_systrace(lp__jw_t *w, const lp__session_t *s) {
  lp__timemap_t *map = lp__timemap_new(s->syncs, s->nsyncs);
  if (!map) return -ENOMEM;
  int pid = (int)lp__export_pid();
  st_writer_t sw = {.recs = NULL};
  lp__walk_t lw;
  lp__walk_init(&lw, s, map, &st_sink, &sw);
  st_lane_out_t *lo = lp__calloc(s->nlanes ? s->nlanes : 1, sizeof *lo);
  uint32_t *heap = lp__calloc(s->nlanes ? s->nlanes : 1, sizeof *heap);
  st_label_t *labels = NULL;
  uint32_t lmask = 0, lcount = 0, nheap = 0;
  st_clock_text_t clock_text = {0, "", 0};
  const lp_site_t *last_site = NULL;
  st_label_t last_copy = {NULL, NULL, 0};
  const st_label_t *last_label = NULL;
  int rc = 0;
  /* Room for every record at once: at most one per recorded slot, plus made-up begins (grown if needed). */
  size_t slots = 0;
  for (uint32_t i = 0; i < s->nlanes; i++)
    for (uint32_t k = 0; !s->lanes[i].work && k < s->lanes[i].nchunks; k++) slots += s->lanes[i].chunks[k].end;
  sw.cap = slots + 64;
  sw.recs = lp__malloc(sw.cap * sizeof *sw.recs);
  if (!lo || !heap || !sw.recs) {
    rc = -ENOMEM;
    goto out;
  }
  for (uint32_t i = 0; i < s->nlanes && !sw.nomem && !lw.nomem; i++) {
    const lp__snap_lane_t *l = &s->lanes[i];
    if (l->work) continue; /* tracks: ftrace text has no lanes for them */
    lo[i].pos = sw.n;
    st_lane(&sw, &lw, l);
    lo[i].end = sw.n;
    lo[i].plen = st_prefix(lo[i].prefix, sizeof lo[i].prefix, l->name, l->tid, pid);
    if (lo[i].end > lo[i].pos) heap[nheap++] = i;
  }
  if (sw.nomem || lw.nomem) {
    rc = -ENOMEM;
    goto out;
  }
  char pidtext[24], line[160];
  int pidlen = snprintf(pidtext, sizeof pidtext, "%d", pid);
  size_t lines = 0;
  for (size_t i = 0; i < sw.n; i++) lines += sw.recs[i].site ? 1 : sw.recs[i].ends;
  snprintf(line, sizeof line, "# tracer: nop\n#\n# entries-in-buffer/entries-written: %zu/%zu   #P:%ld\n#\n", lines,
           lines, sysconf(_SC_NPROCESSORS_ONLN));
  lp__jw_raw(w, line, strlen(line));
  lp__jw_raw(w, st_header, sizeof st_header - 1);
  for (uint32_t i = nheap / 2; i-- > 0;) st_sift(&sw, lo, heap, nheap, i);
  while (nheap > 0 && !w->err) {
    st_lane_out_t *o = &lo[heap[0]];
    const st_rec_t *r = &sw.recs[o->pos];
    const st_label_t *lab = NULL;
    if (r->site && r->site == last_site) {
      lab = last_label; /* the same site again: no lookup */
    } else if (r->site) {
      if (!(lab = st_label(&labels, &lmask, &lcount, r->site))) {
        rc = -ENOMEM;
        break;
      }
      /* The table may move when it grows: copy the entry, not a pointer into it. */
      last_copy = *lab;
      last_label = &last_copy;
      last_site = r->site;
      lab = last_label;
    }
    size_t need = (o->plen + 48 + (size_t)pidlen) * (r->site ? 1 : r->ends) + (lab ? lab->len : 0);
    char *p = lp__jw_reserve(w, need);
    char *big = NULL, *start;
    if (p)
      start = p;
    else if (w->err)
      break;
    else if (!(start = p = big = lp__malloc(need))) { /* a label longer than the buffer */
      rc = -ENOMEM;
      break;
    }
    memcpy(p, o->prefix, o->plen);
    p = st_put_time(p + o->plen - 1, r->ns, &clock_text); /* the prefix's last space is the time's leading one */
    if (lab) {
      size_t skip = r->plain && lab->len >= 4 && memcmp(lab->text, "[SW]", 4) == 0 ? 4 : 0;
      memcpy(p, ": tracing_mark_write: B|", 24);
      p += 24;
      memcpy(p, pidtext, (size_t)pidlen);
      p += pidlen;
      *p++ = '|';
      memcpy(p, lab->text + skip, lab->len - skip);
      p += lab->len - skip;
      *p++ = '\n';
    } else {
      memcpy(p, ": tracing_mark_write: E|", 24);
      p += 24;
      memcpy(p, pidtext, (size_t)pidlen);
      p += pidlen;
      *p++ = '\n';
      size_t len = (size_t)(p - start);
      for (uint32_t k = 1; k < r->ends; k++) {
        memmove(p, start, len);
        p += len;
      }
    }
    if (start == w->buf + w->len)
      w->len += (size_t)(p - start);
    else
      lp__jw_raw(w, start, (size_t)(p - start));
    free(big);
    if (++o->pos == o->end)
      heap[0] = heap[--nheap];
    st_sift(&sw, lo, heap, nheap, 0);
  }
out:
  for (uint32_t i = 0; labels && i <= lmask; i++) free(labels[i].text);
  free(labels);
  free(lo);
  free(heap);
  free(sw.recs);
  free(sw.made);
  lp__walk_free(&lw);
  lp__timemap_free(map);
  return rc ? rc : w->err;
}
