/*
 * trace_json.h: reading labelprof's Chrome Trace Event JSON back with a real
 * parser (jansson), for the timeline tests.
 */
#ifndef LP_TESTS_TRACE_JSON_H
#define LP_TESTS_TRACE_JSON_H

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The base of the last trace loaded: its "ts" are microseconds since this
 * CLOCK_MONOTONIC time (otherData.ts_base_ns, a string of digits, so that
 * it stays exact past 2^53); 0 for a file without it.
 */
static int64_t trace_ts_base;

/* Parses a trace file; NULL (and a message) if it is not valid JSON. */
static inline json_t *trace_load(const char *path) {
  json_error_t err;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!root) fprintf(stderr, "\n    %s:%d:%d: %s\n", path, err.line, err.column, err.text);
  const char *base = json_string_value(json_object_get(json_object_get(root, "otherData"), "ts_base_ns"));
  trace_ts_base = base ? strtoll(base, NULL, 10) : 0;
  return root;
}

static inline json_t *trace_events(json_t *root) { return json_object_get(root, "traceEvents"); }

static inline const char *ev_str(json_t *e, const char *key) { return json_string_value(json_object_get(e, key)); }

/*
 * A time field (microseconds with nanosecond decimals) in whole nanoseconds,
 * read as every viewer reads it: through a double. "ts" comes back as
 * CLOCK_MONOTONIC (the trace's base added exactly, as an integer).
 */
static inline int64_t ev_ns(json_t *e, const char *key) {
  json_t *v = json_object_get(e, key);
  if (!v) return -1;
  int64_t ns = (int64_t)llround(json_number_value(v) * 1000.0);
  return strcmp(key, "ts") == 0 ? trace_ts_base + ns : ns;
}

static inline int64_t ev_int(json_t *e, const char *key) { return json_integer_value(json_object_get(e, key)); }

static inline int ev_is(json_t *e, const char *ph, const char *name) {
  const char *p = ev_str(e, "ph"), *n = ev_str(e, "name");
  return p && strcmp(p, ph) == 0 && (!name || (n && strcmp(n, name) == 0));
}

/* The number of events with phase ph (and name, if not NULL). */
static inline size_t trace_count(json_t *events, const char *ph, const char *name) {
  size_t i, n = 0;
  json_t *e;
  json_array_foreach(events, i, e) n += ev_is(e, ph, name);
  return n;
}

/* The first event with phase ph and name, or NULL. */
static inline json_t *trace_find(json_t *events, const char *ph, const char *name) {
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) if (ev_is(e, ph, name)) return e;
  return NULL;
}

/* The tid of the lane whose thread_name metadata is name, or -1. */
static inline int64_t trace_tid(json_t *events, const char *name) {
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) {
    if (!ev_is(e, "M", "thread_name")) continue;
    const char *n = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
    if (n && strcmp(n, name) == 0) return ev_int(e, "tid");
  }
  return -1;
}

typedef struct span {
  int64_t tid, start, end;
} span_t;

static inline int span_cmp(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->end > y->end ? -1 : x->end < y->end; /* longer first */
}

static inline int i64_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/*
 * Checks what viewers need of every lane: complete events nest properly (a
 * child starts and ends within its parent), and no two event times on a lane
 * are equal, so that order never depends on the file's order. Returns NULL,
 * or a static description of the first problem.
 */
static inline const char *trace_check_lanes(json_t *events) {
  size_t n = json_array_size(events), ns = 0, nt = 0;
  span_t *s = calloc(n + 1, sizeof *s);
  span_t *pts = calloc(2 * n + 1, sizeof *pts);
  const char *bad = NULL;
  if (!s || !pts) bad = "out of memory";
  for (size_t i = 0; i < n && !bad; i++) {
    json_t *e = json_array_get(events, i);
    const char *ph = ev_str(e, "ph");
    if (!ph || strcmp(ph, "M") == 0) continue;
    int64_t tid = ev_int(e, "tid"), ts = ev_ns(e, "ts");
    /* Track times come from the caller: back-to-back work may share an instant. */
    const char *cat = ev_str(e, "cat");
    int own_clock = !(cat && strcmp(cat, "track") == 0);
    if (ts < 0) bad = "an event without ts";
    if (strcmp(ph, "X") == 0) {
      int64_t dur = ev_ns(e, "dur");
      if (dur < 0) bad = "an X event without dur";
      s[ns++] = (span_t){tid, ts, ts + dur};
      if (own_clock) pts[nt++] = (span_t){tid, ts, 0};
      if (own_clock && dur > 0) pts[nt++] = (span_t){tid, ts + dur, 0};
    } else if (own_clock) {
      pts[nt++] = (span_t){tid, ts, 0};
    }
  }
  if (!bad) {
    qsort(s, ns, sizeof *s, span_cmp);
    span_t stack[256];
    int depth = 0;
    for (size_t i = 0; i < ns && !bad; i++) {
      while (depth > 0 && (stack[depth - 1].tid != s[i].tid || stack[depth - 1].end <= s[i].start)) depth--;
      if (depth > 0 && s[i].end > stack[depth - 1].end) bad = "complete events that overlap without nesting";
      if (depth < 256) stack[depth++] = s[i];
    }
    qsort(pts, nt, sizeof *pts, span_cmp);
    for (size_t i = 1; i < nt && !bad; i++)
      if (pts[i].tid == pts[i - 1].tid && pts[i].start == pts[i - 1].start) bad = "two events at the same time on a lane";
  }
  free(s);
  free(pts);
  return bad;
}

/*
 * Records body's events in a timeline of every level, writes it to TAG.json
 * in the test's temporary directory, and returns it parsed (NULL if it is
 * not valid JSON); the file is removed. Needs runner.h and labelprof.h first.
 */
#if defined(LP_TESTS_RUNNER_H) && defined(LABELPROF_H) && !defined(LABELPROF_DISABLE)
static inline json_t *trace_record_with(const char *tag, void (*body)(void)) {
  char path[4096];
  lp_trace_opts_t o = {.levels = LP_LEVEL_ALL};
  snprintf(path, sizeof path, "%s/%s.json", lp_test_tmpdir(tag), tag);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  body();
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(path, "test"), 0);
  json_t *root = trace_load(path);
  unlink(path);
  return root;
}
#endif

#endif
