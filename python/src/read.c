/*
 * read.c: labelprof.read() and labelprof.stats() on the command's readers.
 *
 * The labelprof command's sources are compiled into the module (python/
 * setup.py takes their list, cmd_sources, from Makefile.am), so that
 * Python reads every format the command reads (Chrome JSON, Perfetto,
 * systrace, gzip of any) with the same code, the same limits and the same
 * messages. read_events() runs one reader pass into a sink that keeps every
 * slice, instant and counter as rows of columns; begin/end pairs become
 * slices when their end arrives; then each lane's rows are put in time
 * order and given their nesting depth. The columns go back to Python as
 * bytes (numbers) and indices into one list of distinct strings, which
 * labelprof/__init__.py turns into a pandas DataFrame without a Python
 * object per number. command() runs a subcommand (lp_main) with its output
 * and messages captured, for labelprof.stats().
 *
 * Everything here runs with the GIL held: the command's code keeps a few
 * globals, and lp_py_out / lp_py_err are the module's only while it runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "reader.h"

FILE *lp_py_out, *lp_py_err;

/* ---- captured output ------------------------------------------------------------------- */

typedef struct capture {
  char *out, *err;
  size_t out_len, err_len;
  FILE *fout, *ferr;
} capture_t;

static int capture_begin(capture_t *c) {
  memset(c, 0, sizeof *c);
  c->fout = open_memstream(&c->out, &c->out_len);
  c->ferr = open_memstream(&c->err, &c->err_len);
  if (!c->fout || !c->ferr) {
    PyErr_SetFromErrno(PyExc_OSError);
    if (c->fout) fclose(c->fout);
    if (c->ferr) fclose(c->ferr);
    free(c->out);
    free(c->err);
    return -1;
  }
  lp_py_out = c->fout;
  lp_py_err = c->ferr;
  return 0;
}

/* Ends the capture; 0, or -1 with an exception when a stream could not be kept (out of memory). */
static int capture_end(capture_t *c) {
  lp_py_out = lp_py_err = NULL;
  int bad = fclose(c->fout) != 0;
  bad |= fclose(c->ferr) != 0;
  if (bad) {
    PyErr_NoMemory();
    free(c->out);
    free(c->err);
    c->out = c->err = NULL;
    return -1;
  }
  return 0;
}

static PyObject *text(const char *s, size_t n) { return PyUnicode_DecodeUTF8(s ? s : "", (Py_ssize_t)n, "replace"); }

/* command(args): (status, stdout, stderr) of `labelprof ARGS...`, run in this process. */
PyObject *lp_py_command(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *seq;
  if (!PyArg_ParseTuple(args, "O!:command", &PyTuple_Type, &seq)) return NULL;
  Py_ssize_t n = PyTuple_GET_SIZE(seq);
  char **argv = PyMem_Calloc((size_t)n + 2, sizeof *argv);
  PyObject **keep = PyMem_Calloc((size_t)n + 1, sizeof *keep);
  PyObject *r = NULL;
  if (!argv || !keep) {
    PyErr_NoMemory();
    goto out;
  }
  argv[0] = "labelprof";
  for (Py_ssize_t i = 0; i < n; i++) {
    if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(seq, i), &keep[i])) goto out;
    argv[i + 1] = PyBytes_AS_STRING(keep[i]);
  }
  capture_t c;
  if (capture_begin(&c) < 0) goto out;
  int status = lp_main((int)n + 1, argv);
  if (capture_end(&c) < 0) goto out;
  r = Py_BuildValue("(iNN)", status, text(c.out, c.out_len), text(c.err, c.err_len));
  free(c.out);
  free(c.err);
out:
  for (Py_ssize_t i = 0; keep && i < n; i++) Py_XDECREF(keep[i]);
  PyMem_Free(keep);
  PyMem_Free(argv);
  return r;
}

/* ---- the rows of a trace ------------------------------------------------------------------ */

enum kind { KIND_SLICE = 0, KIND_INSTANT = 1, KIND_COUNTER = 2 };
#define NONE UINT32_MAX /* a string column's missing value */

/*
 * A row's place in the file: seq is the index of the event that began it,
 * seq_end that of its end (a B's E), so that scopes whose times are equal
 * (systrace's microseconds, a clock's coarse ticks) still nest as the file
 * nested them. An X event has seq_end -1: at its end time it has ended
 * before anything that starts then.
 */
typedef struct row {
  int64_t ts, dur; /* dur: -1 while a begin waits for its end */
  int64_t seq, seq_end;
  double value;
  uint32_t lane, name, cat, series;
  int32_t depth;
  uint8_t kind;
} row_t;

typedef struct lane {
  int64_t pid, tid;
  uint32_t name;           /* thread_name, or NONE */
  int64_t last;            /* the latest time of any of its events */
  int has_x;               /* it has X events: rows of equal times are ordered by duration, not file order */
  uint32_t *open, nopen, open_cap; /* rows of begins waiting for their ends */
} lane_t;

typedef struct strtab {
  char **s;
  uint32_t n, cap;
  uint32_t *slots, nslots; /* open addressing: index + 1 */
} strtab_t;

typedef struct rows {
  row_t *r;
  size_t n, cap;
  lane_t *lanes;
  uint32_t nlanes, lanes_cap;
  uint32_t *lane_slots, lane_nslots;
  uint32_t last_lane;
  strtab_t strings;
  PyObject *info; /* what the file says of itself: {key: text} */
  uint64_t unmatched_ends, unclosed, skipped;
  int64_t ts_base;
  int nomem;
  uint64_t events; /* for the signal check */
} rows_t;

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

/* The id of s in t, added if new; NONE for NULL; NONE with nomem set when out of memory. */
static uint32_t str_id(rows_t *rs, const char *s) {
  strtab_t *t = &rs->strings;
  if (!s) return NONE;
  size_t len = strlen(s);
  if (t->n * 2 >= t->nslots) {
    uint32_t ns = t->nslots ? t->nslots * 2 : 256;
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots) goto nomem;
    for (uint32_t i = 0; i < t->n; i++) {
      uint32_t j = (uint32_t)hash_bytes(t->s[i], strlen(t->s[i])) & (ns - 1);
      while (slots[j]) j = (j + 1) & (ns - 1);
      slots[j] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
  }
  uint32_t j = (uint32_t)hash_bytes(s, len) & (t->nslots - 1);
  for (; t->slots[j]; j = (j + 1) & (t->nslots - 1))
    if (strcmp(t->s[t->slots[j] - 1], s) == 0) return t->slots[j] - 1;
  if (t->n == t->cap) {
    uint32_t cap = t->cap ? t->cap * 2 : 256;
    char **ns = realloc(t->s, cap * sizeof *ns);
    if (!ns) goto nomem;
    t->s = ns;
    t->cap = cap;
  }
  char *copy = malloc(len + 1);
  if (!copy) goto nomem;
  memcpy(copy, s, len + 1);
  t->s[t->n] = copy;
  t->slots[j] = t->n + 1;
  return t->n++;
nomem:
  rs->nomem = 1;
  return NONE;
}

static uint64_t lane_hash(int64_t pid, int64_t tid) {
  return ((uint64_t)pid * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)tid * 0xff51afd7ed558ccdull);
}

static lane_t *lane_of(rows_t *rs, int64_t pid, int64_t tid) {
  if (rs->last_lane < rs->nlanes && rs->lanes[rs->last_lane].pid == pid && rs->lanes[rs->last_lane].tid == tid)
    return &rs->lanes[rs->last_lane];
  if (rs->nlanes * 2 >= rs->lane_nslots) {
    uint32_t ns = rs->lane_nslots ? rs->lane_nslots * 2 : 64;
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots) return NULL;
    for (uint32_t i = 0; i < rs->nlanes; i++) {
      uint32_t j = (uint32_t)lane_hash(rs->lanes[i].pid, rs->lanes[i].tid) & (ns - 1);
      while (slots[j]) j = (j + 1) & (ns - 1);
      slots[j] = i + 1;
    }
    free(rs->lane_slots);
    rs->lane_slots = slots;
    rs->lane_nslots = ns;
  }
  uint32_t j = (uint32_t)lane_hash(pid, tid) & (rs->lane_nslots - 1);
  for (; rs->lane_slots[j]; j = (j + 1) & (rs->lane_nslots - 1)) {
    lane_t *l = &rs->lanes[rs->lane_slots[j] - 1];
    if (l->pid == pid && l->tid == tid) {
      rs->last_lane = rs->lane_slots[j] - 1;
      return l;
    }
  }
  if (rs->nlanes == rs->lanes_cap) {
    uint32_t cap = rs->lanes_cap ? rs->lanes_cap * 2 : 16;
    lane_t *nl = realloc(rs->lanes, cap * sizeof *nl);
    if (!nl) return NULL;
    rs->lanes = nl;
    rs->lanes_cap = cap;
  }
  lane_t *l = &rs->lanes[rs->nlanes];
  memset(l, 0, sizeof *l);
  l->pid = pid;
  l->tid = tid;
  l->name = NONE;
  l->last = INT64_MIN;
  rs->lane_slots[j] = rs->nlanes + 1;
  rs->last_lane = rs->nlanes++;
  return l;
}

static row_t *row_add(rows_t *rs) {
  if (rs->n == rs->cap) {
    size_t cap = rs->cap ? rs->cap * 2 : 4096;
    row_t *nr = realloc(rs->r, cap * sizeof *nr);
    if (!nr) return NULL;
    rs->r = nr;
    rs->cap = cap;
  }
  row_t *r = &rs->r[rs->n];
  memset(r, 0, sizeof *r);
  r->seq = (int64_t)rs->events;
  r->seq_end = -1;
  r->name = r->cat = r->series = NONE;
  rs->n++;
  return r;
}

static void lane_saw(lane_t *l, int64_t t) {
  if (t > l->last) l->last = t;
}

/* The sink: 0 to go on; LP_READ_BAD after a message when out of memory; 1 when a signal's handler raised. */
static int sink_event(void *ctx, const lp_event_t *ev) {
  rows_t *rs = ctx;
  if ((++rs->events & 0xffff) == 0 && PyErr_CheckSignals() < 0) return 1; /* Ctrl-C stops a long read */
  switch (ev->kind) {
  case LP_EV_FILE_INFO: {
    PyObject *v = text(ev->text, ev->text ? strlen(ev->text) : 0);
    if (!v || PyDict_SetItemString(rs->info, ev->name, v) < 0) {
      Py_XDECREF(v);
      return 1;
    }
    Py_DECREF(v);
    if (strcmp(ev->name, "otherData.ts_base_ns") == 0 && ev->text) {
      char *end;
      errno = 0;
      long long b = strtoll(ev->text, &end, 10);
      if (end != ev->text && !*end && !errno) rs->ts_base = b;
    }
    return 0;
  }
  case LP_EV_SKIPPED: rs->skipped++; return 0;
  case LP_EV_PROCESS_NAME: return 0;
  default: break;
  }
  lane_t *l = lane_of(rs, ev->pid, ev->tid);
  if (!l) goto nomem;
  uint32_t li = (uint32_t)(l - rs->lanes);
  if (ev->kind == LP_EV_THREAD_NAME) {
    if ((l->name = str_id(rs, ev->name)) == NONE) goto nomem;
    return 0;
  }
  if (ev->kind == LP_EV_END) {
    lane_saw(l, ev->ts);
    if (!l->nopen) {
      rs->unmatched_ends++;
      return 0;
    }
    row_t *b = &rs->r[l->open[--l->nopen]];
    b->dur = ev->ts >= b->ts ? ev->ts - b->ts : 0;
    b->seq_end = (int64_t)rs->events;
    return 0;
  }
  row_t *r = row_add(rs);
  if (!r) goto nomem;
  r->lane = li;
  r->ts = ev->ts;
  if ((r->name = str_id(rs, ev->name)) == NONE) goto nomem;
  if (ev->category && (r->cat = str_id(rs, ev->category)) == NONE) goto nomem;
  switch (ev->kind) {
  case LP_EV_COMPLETE:
    r->kind = KIND_SLICE;
    r->dur = ev->dur;
    l->has_x = 1;
    lane_saw(l, ev->ts + ev->dur); /* readers keep both within ±2^62 */
    break;
  case LP_EV_BEGIN:
    r->kind = KIND_SLICE;
    r->dur = -1;
    lane_saw(l, ev->ts);
    if (l->nopen == l->open_cap) {
      uint32_t cap = l->open_cap ? l->open_cap * 2 : 16;
      uint32_t *o = realloc(l->open, cap * sizeof *o);
      if (!o) goto nomem;
      l->open = o;
      l->open_cap = cap;
    }
    l->open[l->nopen++] = (uint32_t)(r - rs->r);
    break;
  case LP_EV_INSTANT:
    r->kind = KIND_INSTANT;
    lane_saw(l, ev->ts);
    break;
  case LP_EV_COUNTER:
    r->kind = KIND_COUNTER;
    r->value = ev->value;
    r->depth = -1;
    lane_saw(l, ev->ts);
    if (ev->series && (r->series = str_id(rs, ev->series)) == NONE) goto nomem;
    break;
  default: /* a kind added to the readers later: not a row */
    rs->n--;
    break;
  }
  return 0;
nomem:
  rs->nomem = 1;
  return lp_mem_fail(NULL, &ev->pos);
}

static const row_t *sort_rows;
static const lane_t *sort_lanes;

/*
 * Lane, then time. At one time, on a lane of begins and ends only, file
 * order (a begin's order is its nesting); on a lane with X events, which
 * writers may put in any order, a slice before an instant and a longer
 * slice before a shorter one, then file order.
 */
static int cmp_row(const void *x, const void *y) {
  const row_t *a = &sort_rows[*(const uint32_t *)x], *b = &sort_rows[*(const uint32_t *)y];
  if (a->lane != b->lane) return a->lane < b->lane ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (sort_lanes[a->lane].has_x) {
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  }
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Whether a row that starts at (ts, seq) is inside a slice that ends at (end, seq_end). */
static int inside(const row_t *r, int64_t end, int64_t seq_end) {
  return r->ts < end || (r->ts == end && r->seq < seq_end);
}

/* Closes what never ended, orders the rows and gives each slice and instant its depth on its lane. */
static uint32_t *finish(rows_t *rs) {
  for (uint32_t i = 0; i < rs->nlanes; i++) {
    lane_t *l = &rs->lanes[i];
    while (l->nopen) { /* a scope never closed ends at its lane's last event, as `labelprof stats` counts it */
      row_t *b = &rs->r[l->open[--l->nopen]];
      b->dur = l->last > b->ts ? l->last - b->ts : 0;
      b->seq_end = INT64_MAX;
      rs->unclosed++;
    }
  }
  uint32_t *order = malloc((rs->n ? rs->n : 1) * sizeof *order);
  const row_t **open = malloc((rs->n ? rs->n : 1) * sizeof *open); /* the slices the sweep is inside */
  if (!order || !open) {
    free(order);
    free(open);
    return NULL;
  }
  for (size_t i = 0; i < rs->n; i++) order[i] = (uint32_t)i;
  sort_rows = rs->r;
  sort_lanes = rs->lanes;
  qsort(order, rs->n, sizeof *order, cmp_row);
  size_t depth = 0;
  uint32_t lane = NONE;
  for (size_t k = 0; k < rs->n; k++) {
    row_t *r = &rs->r[order[k]];
    if (r->kind == KIND_COUNTER) continue;
    if (r->lane != lane) {
      lane = r->lane;
      depth = 0;
    }
    while (depth && !inside(r, open[depth - 1]->ts + open[depth - 1]->dur, open[depth - 1]->seq_end)) depth--;
    r->depth = (int32_t)depth;
    if (r->kind == KIND_SLICE) open[depth++] = r;
  }
  free(open);
  return order;
}

static PyObject *column(const void *data, size_t size) {
  return PyBytes_FromStringAndSize(data, (Py_ssize_t)size);
}

/* The columns, in the rows' order: a dict of bytes (numbers) and lists. */
static PyObject *columns(const rows_t *rs, const uint32_t *order) {
  size_t n = rs->n;
  int64_t *ts = malloc((n ? n : 1) * sizeof *ts), *dur = malloc((n ? n : 1) * sizeof *dur);
  double *value = malloc((n ? n : 1) * sizeof *value);
  uint32_t *lane = malloc((n ? n : 1) * sizeof *lane), *name = malloc((n ? n : 1) * sizeof *name),
           *cat = malloc((n ? n : 1) * sizeof *cat), *series = malloc((n ? n : 1) * sizeof *series);
  int32_t *depth = malloc((n ? n : 1) * sizeof *depth);
  uint8_t *kind = malloc(n ? n : 1);
  PyObject *d = NULL, *strings = NULL, *lanes = NULL;
  if (!ts || !dur || !value || !lane || !name || !cat || !series || !depth || !kind) {
    PyErr_NoMemory();
    goto out;
  }
  for (size_t k = 0; k < n; k++) {
    const row_t *r = &rs->r[order[k]];
    ts[k] = r->ts + rs->ts_base;
    dur[k] = r->kind == KIND_SLICE ? r->dur : 0;
    value[k] = r->value;
    lane[k] = r->lane;
    name[k] = r->name;
    cat[k] = r->cat;
    series[k] = r->series;
    depth[k] = r->depth;
    kind[k] = r->kind;
  }
  if (!(strings = PyList_New(rs->strings.n))) goto out;
  for (uint32_t i = 0; i < rs->strings.n; i++) {
    PyObject *s = text(rs->strings.s[i], strlen(rs->strings.s[i]));
    if (!s) goto out;
    PyList_SET_ITEM(strings, i, s);
  }
  if (!(lanes = PyList_New(rs->nlanes))) goto out;
  for (uint32_t i = 0; i < rs->nlanes; i++) {
    const lane_t *l = &rs->lanes[i];
    PyObject *t = Py_BuildValue("(LLI)", (long long)l->pid, (long long)l->tid, (unsigned)l->name);
    if (!t) goto out;
    PyList_SET_ITEM(lanes, i, t);
  }
  d = Py_BuildValue("{s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:O,s:O,s:O,s:K,s:K,s:K}", "ts", column(ts, n * sizeof *ts),
                    "dur", column(dur, n * sizeof *dur), "value", column(value, n * sizeof *value), "lane",
                    column(lane, n * sizeof *lane), "name", column(name, n * sizeof *name), "category",
                    column(cat, n * sizeof *cat), "series", column(series, n * sizeof *series), "depth",
                    column(depth, n * sizeof *depth), "kind", column(kind, n), "strings", strings, "lanes", lanes,
                    "info", rs->info, "unmatched_ends", (unsigned long long)rs->unmatched_ends, "unclosed",
                    (unsigned long long)rs->unclosed, "skipped", (unsigned long long)rs->skipped);
out:
  Py_XDECREF(strings);
  Py_XDECREF(lanes);
  free(ts);
  free(dur);
  free(value);
  free(lane);
  free(name);
  free(cat);
  free(series);
  free(depth);
  free(kind);
  return d;
}

static void rows_free(rows_t *rs) {
  free(rs->r);
  for (uint32_t i = 0; i < rs->nlanes; i++) free(rs->lanes[i].open);
  free(rs->lanes);
  free(rs->lane_slots);
  for (uint32_t i = 0; i < rs->strings.n; i++) free(rs->strings.s[i]);
  free(rs->strings.s);
  free(rs->strings.slots);
  Py_XDECREF(rs->info);
}

/*
 * read_events(path): the dict of columns above; raises ValueError with the
 * reader's message ("labelprof: FILE:LINE:COL: ...") for bad input, OSError
 * for a file that cannot be opened.
 */
PyObject *lp_py_read(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *path = NULL, *r = NULL;
  if (!PyArg_ParseTuple(args, "O&:read_events", PyUnicode_FSConverter, &path)) return NULL;
  rows_t rs;
  memset(&rs, 0, sizeof rs);
  rs.last_lane = NONE;
  capture_t c;
  if (!(rs.info = PyDict_New()) || capture_begin(&c) < 0) {
    Py_DECREF(path);
    rows_free(&rs);
    return NULL;
  }
  int rc = -1;
  lp_input_t *in = lp_input_open(PyBytes_AS_STRING(path));
  if (in) {
    lp_sink_t sink = {&rs, sink_event, NULL};
    rc = lp_read_input(in, &sink);
    lp_input_close(in);
  }
  int saved = errno;
  if (capture_end(&c) < 0) goto out;
  if (rc == 1 && PyErr_Occurred()) goto out; /* a signal's handler raised, or the info dict failed */
  if (rc != 0) {
    const char *msg = c.err && c.err_len ? c.err : "labelprof: cannot read the trace\n";
    size_t len = strlen(msg);
    while (len && msg[len - 1] == '\n') len--;
    PyObject *m = text(msg, len);
    if (m) {
      if (!in && saved) { /* the file could not be opened: OSError with its errno, and the message */
        PyObject *a = Py_BuildValue("(iOO)", saved, m, PyTuple_GET_ITEM(args, 0));
        if (a) PyErr_SetObject(PyExc_OSError, a);
        Py_XDECREF(a);
      } else if (rs.nomem) {
        PyErr_SetObject(PyExc_MemoryError, m);
      } else {
        PyErr_SetObject(PyExc_ValueError, m);
      }
      Py_DECREF(m);
    }
    goto out;
  }
  uint32_t *order = finish(&rs);
  if (!order) {
    PyErr_NoMemory();
    goto out;
  }
  r = columns(&rs, order);
  free(order);
  if (r) { /* the reader's warnings, for Python's warnings.warn() */
    size_t len = c.err_len;
    while (len && c.err[len - 1] == '\n') len--;
    PyObject *w = text(c.err, len);
    if (!w || PyDict_SetItemString(r, "warnings", w) < 0) Py_CLEAR(r);
    Py_XDECREF(w);
  }
out:
  free(c.out);
  free(c.err);
  Py_DECREF(path);
  rows_free(&rs);
  return r;
}
