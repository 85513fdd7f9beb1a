/*
 * systrace.c: systrace and ftrace text as the normalised event stream
 * (reader.h), so that every subcommand reads `labelprof stats trace.html`.
 *
 * The input is read in chunks and cut into lines; tools/read/ftrace.c finds
 * the tracing_mark_write marks. A mark becomes:
 *   B|<pid>|<label>      LP_EV_BEGIN on lane (pid, tid)
 *   E                    LP_EV_END
 *   [SW] B               LP_EV_END of the open scope, then LP_EV_BEGIN: NNAPI's
 *                        switch, whose scope the next two E's close (the
 *                        second one ends a placeholder and emits nothing)
 * An NNAPI tag [NN_<L>_<P>] (with [SW]/[SUB]) is taken off the label and
 * given as layer, phase and mode (lowercase words, as labelprof's JSON
 * writes them) and as the category "layer,phase". The first mark of a
 * thread also gives its name (the task). Timestamps become nanoseconds
 * exactly (from the digits, no floating point).
 *
 * Memory: per thread, a stack of one byte per open scope; one line buffer;
 * the scanner's table of processes. All of it is counted in the sink's
 * memory (--max-memory), and a label longer than LP_READ_MAX_NAME is
 * refused. A line is looked for in the bytes as they arrive, each byte once.
 */
#include "config.h"

#include "reader.h"
#include "ftrace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct lane {
  long long tid;
  unsigned char *stk; /* 1 = a switch placeholder */
  size_t n, cap;
} lane_t;

typedef struct strd {
  const lp_sink_t *sink;
  lp_mem_t *mem;
  const char *file;
  lane_t *lanes; /* in the order they came, found by tid through index */
  size_t cap, used;
  lp__index_t index;
  int stop; /* the sink's non-zero verdict */
  char *label;
  size_t label_cap;
  uint64_t line_off; /* the byte offset of the line being scanned */
  uint64_t held;     /* what the memory counts of the scanner's table */
  const struct lp_st_scanner *sc;
} strd_t;

static uint32_t tid_hash(long long tid) { return lp__hash64((uint64_t)tid); }

static lane_t *lane_get(strd_t *r, long long tid, int *fresh) {
  *fresh = 0;
  for (uint32_t at, k = lp__index_first(&r->index, tid_hash(tid), &at); k; k = lp__index_next(&r->index, &at))
    if (r->lanes[k - 1].tid == tid) return &r->lanes[k - 1];
  if (r->used == r->cap) {
    size_t nc = r->cap ? r->cap * 2 : 64;
    lane_t *nl = nc < UINT32_MAX / 2 ? lp_mem_realloc(r->mem, r->lanes, r->cap * sizeof *nl, nc * sizeof *nl) : NULL;
    if (!nl) return NULL;
    r->lanes = nl;
    r->cap = nc;
  }
  switch (lp_index_reserve(&r->index, r->mem, (uint32_t)r->used, 64)) {
  case -1: return NULL;
  case 1:
    for (size_t i = 0; i < r->used; i++) lp__index_put(&r->index, tid_hash(r->lanes[i].tid), (uint32_t)i);
  }
  lp__index_put(&r->index, tid_hash(tid), (uint32_t)r->used);
  lane_t *l = &r->lanes[r->used++];
  *l = (lane_t){tid, NULL, 0, 0};
  *fresh = 1;
  return l;
}

static int lane_push(strd_t *r, lane_t *l, unsigned char v) {
  if (l->n == l->cap) {
    size_t nc = l->cap ? l->cap * 2 : 16;
    unsigned char *ns = lp_mem_realloc(r->mem, l->stk, l->cap, nc);
    if (!ns) return -1;
    l->stk = ns;
    l->cap = nc;
  }
  l->stk[l->n++] = v;
  return 0;
}

/*
 * "123.456789" -> nanoseconds; digits beyond the ninth decimal are cut. -1
 * at 2^62 ns (146 years) or more: every time of the event stream stays
 * within ±2^62 ns, so that any difference of two fits (reader.h).
 */
static int64_t ts_ns(const char *s, size_t n) {
  int64_t sec = 0, frac = 0;
  size_t i = 0;
  for (; i < n && s[i] != '.'; i++) {
    if (sec > 4611686018) return -1;
    sec = sec * 10 + (s[i] - '0');
  }
  int k = 0;
  for (i++; i < n && k < 9; i++, k++) frac = frac * 10 + (s[i] - '0');
  for (; k < 9; k++) frac *= 10;
  if (sec > 4611686018) return -1;
  int64_t v = sec * 1000000000 + frac;
  return v >= (int64_t)1 << 62 ? -1 : v;
}

static const char *const LWORD[] = {"application", "runtime", "ipc", "driver", "cpu", "utility"};
static const char *const LCODE[] = {"LA", "LR", "LI", "LD", "LC", "LU"};
static const char *const PWORD[] = {"unspecified", "initialization", "preparation", "compilation", "execution",
                                    "io", "transformation", "computation", "results", "termination",
                                    "overall", "warmup", "benchmark"};
static const char *const PCODE[] = {"PU", "PI", "PP", "PC", "PE", "PIO", "PTR", "PCO", "PR", "PT", "PO", "PWU", "PBM"};

static int code_index(const char *const *tab, size_t ntab, const char *s, size_t n) {
  for (size_t i = 0; i < ntab; i++)
    if (strlen(tab[i]) == n && memcmp(tab[i], s, n) == 0) return (int)i;
  return -1;
}

/* Room for a label of n bytes and its NUL; 0, or -1 out of memory. */
static int label_room(strd_t *r, size_t n) {
  if (n + 1 <= r->label_cap) return 0;
  char *nl = lp_mem_realloc(r->mem, r->label, r->label_cap, n + 256);
  if (!nl) return -1;
  r->label = nl;
  r->label_cap = n + 256;
  return 0;
}

static int emit(strd_t *r, lp_event_t *ev) {
  int rc = r->sink->event(r->sink->ctx, ev);
  if (rc) r->stop = rc;
  return rc;
}

static int on_mark(void *ctx, const struct lp_st_mark *m) {
  strd_t *r = ctx;
  int fresh;
  lane_t *l = lane_get(r, m->tid, &fresh);
  lp_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.pid = m->tgid >= 0 ? m->tgid : 0;
  ev.tid = m->tid;
  ev.pos.file = r->file;
  ev.pos.line = (uint64_t)m->lineno;
  ev.pos.column = 1;
  ev.pos.offset = r->line_off;
  ev.name = "";
  if (!l) return lp_mem_fail(r->mem, &ev.pos);
  ev.ts = ts_ns(m->ts, m->ts_len);
  if (ev.ts < 0) {
    lp_report(&ev.pos, "timestamp %.*s: too large (less than 2^62 ns: at most 4611686018.427387903 seconds)", (int)m->ts_len, m->ts);
    return LP_READ_BAD;
  }
  if (lp_mem_charge(r->mem, &r->held, lp_st_held(r->sc)) != 0) return lp_mem_fail(r->mem, &ev.pos);
  if (fresh) {
    if (m->task_len > LP_READ_MAX_NAME) {
      lp_report(&ev.pos, "a task name longer than 1 MiB: no thread is named so");
      return LP_READ_BAD;
    }
    if (label_room(r, m->task_len) != 0) return lp_mem_fail(r->mem, &ev.pos);
    memcpy(r->label, m->task, m->task_len);
    r->label[m->task_len] = 0;
    ev.kind = LP_EV_THREAD_NAME;
    ev.name = r->label;
    lp_event_t meta = ev;
    meta.ts = 0;
    if (emit(r, &meta)) return r->stop;
  }
  if (m->mark[0] == 'E') {
    ev.kind = LP_EV_END;
    ev.name = "";
    unsigned char top = l->n ? l->stk[--l->n] : 0;
    if (top) return 0; /* a switch's placeholder */
    return emit(r, &ev);
  }
  /* B|pid|text: the text is everything after the second '|' */
  const char *text = m->mark + 1;
  size_t tl = m->mark_len - 1;
  if (tl && text[0] == '|') {
    const char *b2 = memchr(text + 1, '|', tl - 1);
    if (b2) {
      tl -= (size_t)(b2 + 1 - text);
      text = b2 + 1;
    } else {
      tl = 0;
    }
  } else {
    tl = 0;
  }
  int sw = 0, sub = 0;
  for (;;) {
    if (tl >= 4 && memcmp(text, "[SW]", 4) == 0)
      sw = 1, text += 4, tl -= 4;
    else if (tl >= 5 && memcmp(text, "[SUB]", 5) == 0)
      sub = 1, text += 5, tl -= 5;
    else
      break;
  }
  char cat[64];
  int li = -1, pi = -1;
  if (tl >= 9 && memcmp(text, "[NN_", 4) == 0) {
    const char *close = memchr(text, ']', tl);
    const char *us = close ? memchr(text + 4, '_', (size_t)(close - text - 4)) : NULL;
    if (close && us) {
      li = code_index(LCODE, 6, text + 4, (size_t)(us - text - 4));
      pi = code_index(PCODE, 13, us + 1, (size_t)(close - us - 1));
      if (li >= 0 && pi >= 0) {
        tl -= (size_t)(close + 1 - text);
        text = close + 1;
      }
    }
  }
  if (tl > LP_READ_MAX_NAME) {
    lp_report(&ev.pos, "a label longer than 1 MiB: no label is that long");
    return LP_READ_BAD;
  }
  if (label_room(r, tl) != 0) return lp_mem_fail(r->mem, &ev.pos);
  memcpy(r->label, text, tl);
  r->label[tl] = 0;
  if (memchr(text, 0, tl)) {
    lp_report(&ev.pos, "a NUL byte in a label");
    return LP_READ_BAD;
  }
  ev.name = r->label;
  if (li >= 0 && pi >= 0) {
    snprintf(cat, sizeof cat, "%s,%s", LWORD[li], PWORD[pi]);
    ev.category = cat;
    ev.layer = LWORD[li];
    ev.phase = PWORD[pi];
    ev.mode = sw ? "switch" : sub ? "subtract" : NULL;
  }
  if (sw) {
    /* NNAPI's switch: the open scope ends here, a placeholder stays open */
    unsigned char top = l->n ? l->stk[--l->n] : 0;
    if (!top) {
      lp_event_t end = ev;
      end.kind = LP_EV_END;
      end.name = "";
      end.category = end.layer = end.phase = end.mode = NULL;
      if (emit(r, &end)) return r->stop;
    }
    if (lane_push(r, l, 1) < 0) return lp_mem_fail(r->mem, &ev.pos);
  }
  if (lane_push(r, l, 0) < 0) return lp_mem_fail(r->mem, &ev.pos);
  ev.kind = LP_EV_BEGIN;
  return emit(r, &ev);
}

static int st_sniff(const unsigned char *head, size_t n) { return lp_st_sniff((const char *)head, n); }

static int st_read(lp_input_t *in, const lp_sink_t *sink) {
  strd_t r;
  memset(&r, 0, sizeof r);
  r.sink = sink;
  r.mem = sink->mem;
  r.file = lp_input_name(in);
  struct lp_st_scanner sc;
  lp_st_init(&sc);
  r.sc = &sc;
  size_t cap = 1 << 16, have = 0, looked = 0; /* looked: the bytes of the line being read already looked at */
  char *buf = lp_mem_realloc(r.mem, NULL, 0, cap);
  int rc = LP_READ_OK, eof = 0, pending_cr = 0;
  long lineno = 0;
  uint64_t base = 0; /* the offset of buf[0] in the input */
  lp_pos_t pos = {r.file, 0, 0, 0};
  struct lp_st_error se = {0}; /* filled when a line is refused */
  if (!buf) return lp_mem_fail(r.mem, &pos);
  while (!eof && rc == LP_READ_OK && !sc.done) {
    if (have == cap) {
      char *nb = lp_mem_realloc(r.mem, buf, cap, cap * 2);
      if (!nb) {
        pos.line = (uint64_t)lineno + 1;
        pos.column = 1;
        rc = lp_mem_fail(r.mem, &pos);
        break;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t got = lp_input_read(in, buf + have, cap - have);
    if (got < 0) {
      rc = LP_READ_BAD;
      break;
    }
    if (got == 0) eof = 1;
    have += (size_t)got;
    size_t p = 0;
    for (;;) {
      if (pending_cr && p < have) {
        /* "\r\n" split across reads: the "\n" belongs to the line already seen */
        if (buf[p] == '\n') p++;
        pending_cr = 0;
      }
      size_t q = p + looked;
      while (q < have && buf[q] != '\n' && buf[q] != '\r') q++;
      if (q == have && !eof) {
        looked = q - p; /* the next read looks at its own bytes only */
        break;
      }
      looked = 0;
      if (q == have && q == p) break;
      lineno++;
      r.line_off = base + p;
      /* A line of fewer than 4 bytes cannot be a header, a mark or "</script>", nor hold "[NN_": skipped here, so that
         blank lines cost what their bytes cost. */
      int v = q - p < 4 ? 0 : lp_st_line(&sc, buf + p, q - p, lineno, on_mark, &r, &se);
      if (v < 0) {
        pos.line = (uint64_t)se.lineno;
        pos.column = 1;
        lp_report(&pos, "%s", se.msg);
        rc = LP_READ_BAD;
        break;
      }
      if (v) {
        rc = r.stop ? r.stop : v;
        break;
      }
      if (q < have) {
        if (buf[q] == '\r') {
          if (q + 1 < have) {
            p = q + 1 + (buf[q + 1] == '\n');
          } else {
            p = q + 1;
            pending_cr = 1;
          }
        } else {
          p = q + 1;
        }
      } else {
        p = q;
      }
    }
    memmove(buf, buf + p, have - p);
    have -= p;
    base += p;
  }
  if (rc == LP_READ_OK && !sc.collecting) {
    pos.line = 0;
    pos.offset = 0;
    lp_report(&pos, "no ftrace header (\"# TASK-PID ... TIMESTAMP  FUNCTION\") and no trace-cmd preamble: "
                    "not systrace or ftrace text");
    rc = LP_READ_BAD;
  }
  lp_st_fini(&sc);
  lp_mem_charge(r.mem, &r.held, 0);
  lp_mem_free(r.mem, buf, cap);
  for (size_t i = 0; i < r.used; i++) lp_mem_free(r.mem, r.lanes[i].stk, r.lanes[i].cap);
  lp_mem_free(r.mem, r.lanes, r.cap * sizeof *r.lanes);
  lp_index_free(&r.index, r.mem);
  lp_mem_free(r.mem, r.label, r.label_cap);
  return rc;
}

const lp_reader_t lp_systrace_reader = {"systrace", st_sniff, st_read};
