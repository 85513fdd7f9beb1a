/* test_json.c: the Chrome Trace Event JSON: structure, metadata, nesting, durations, escaping, tracks. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "runner.h"
#include "trace_json.h"

static const char *dir;
static char path[256];

static json_t *write_and_load(const char *process) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(path, process), 0);
  json_t *root = trace_load(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  const char *bad = trace_check_lanes(trace_events(root));
  if (bad) printf("\n    %s ", bad);
  CU_ASSERT_PTR_NULL(bad);
  return root;
}

static void test_json_structure_and_metadata(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  lp_thread_set_name("json main");
  { LP_SCOPE("meta"); }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load("my process");
  CU_ASSERT(json_is_object(root));
  CU_ASSERT(json_is_array(trace_events(root)));
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(root, "displayTimeUnit")), "ns");
  json_t *od = json_object_get(root, "otherData");
  CU_ASSERT(json_is_object(od));
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(od, "library")), "labelprof " LABELPROF_VERSION_STRING);
  const char *clock = json_string_value(json_object_get(od, "clock"));
  /* the counter (tsc on x86, cntvct on aarch64) or clock_gettime */
  CU_ASSERT(clock && (strcmp(clock, "tsc") == 0 || strcmp(clock, "cntvct") == 0 || strcmp(clock, "clock_gettime") == 0));
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(od, "clock_domain")), "CLOCK_MONOTONIC");
  CU_ASSERT(json_is_integer(json_object_get(od, "events_recorded")));
  CU_ASSERT(json_is_integer(json_object_get(od, "events_dropped")));
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(od, "budget_bytes")), 64 << 20);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(od, "policy")), "discard");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(od, "levels")), "runtime,operator");
  json_t *ev = trace_events(root);
  json_t *pn = trace_find(ev, "M", "process_name");
  CU_ASSERT_PTR_NOT_NULL_FATAL(pn);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(pn, "args"), "name")), "my process");
  CU_ASSERT_EQUAL(ev_int(pn, "pid"), (int64_t)getpid());
  int64_t tid = trace_tid(ev, "json main");
  CU_ASSERT_EQUAL(tid, (int64_t)lp__thread_current()->tid);
  json_t *x = trace_find(ev, "X", "meta");
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  CU_ASSERT_EQUAL(ev_int(x, "tid"), tid);
  CU_ASSERT_STRING_EQUAL(ev_str(x, "cat"), "runtime");
  json_decref(root);
  /* without a process name, the program's */
  root = write_and_load(NULL);
  pn = trace_find(trace_events(root), "M", "process_name");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(pn, "args"), "name")), "test_json");
  json_decref(root);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void busy_wait(double s) {
  double t0 = now_s();
  while (now_s() - t0 < s) {
  }
}

static void *nested_worker(void *arg) {
  lp_thread_set_name((const char *)arg);
  for (int i = 0; i < 3; i++) {
    LP_SCOPE("level 1");
    LP_SCOPE_L(LP_LEVEL_OPERATOR, "level 2");
    { LP_SCOPE("level 3"); }
    { LP_SCOPE("level 3"); }
  }
  return NULL;
}

static void test_json_nesting_on_several_threads(void) {
  pthread_t th[2];
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th[0], NULL, nested_worker, "nest a"), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th[1], NULL, nested_worker, "nest b"), 0);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(pthread_join(th[i], NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load(NULL);
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "level 1"), 6);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "level 3"), 12);
  CU_ASSERT(trace_tid(ev, "nest a") > 0);
  CU_ASSERT(trace_tid(ev, "nest b") > 0);
  CU_ASSERT_NOT_EQUAL(trace_tid(ev, "nest a"), trace_tid(ev, "nest b"));
  CU_ASSERT_EQUAL(trace_count(ev, "B", NULL) + trace_count(ev, "E", NULL), 0);
  json_decref(root);
}

/*
 * Durations of known busy waits lie between what this thread measured just
 * inside each scope and just outside it, whatever preempted it meanwhile
 * (a preemption between an outside reading and the scope's begin or end
 * stretches only the outside one). The margin is for mapping the counter
 * onto CLOCK_MONOTONIC, not for the scheduler: 0.1% and 20 us.
 */
static bool dur_within(double got, double inside, double outside) {
  double margin = 0.001 * outside + 20e-6;
  return got >= inside - margin && got <= outside + margin;
}

static void test_json_durations_of_busy_waits(void) {
  double outer_out, outer_in, inner_out, inner_in;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  { LP_SCOPE("warm"); } /* the thread's first scope takes its first chunk: not inside the ones measured */
  double t0 = now_s();
  {
    LP_SCOPE("20 ms");
    double i0 = now_s();
    busy_wait(0.010);
    double t1 = now_s();
    {
      LP_SCOPE("5 ms");
      double j0 = now_s();
      busy_wait(0.005);
      inner_in = now_s() - j0;
    }
    inner_out = now_s() - t1;
    busy_wait(0.005);
    outer_in = now_s() - i0;
  }
  outer_out = now_s() - t0;
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load(NULL);
  json_t *outer = trace_find(trace_events(root), "X", "20 ms"), *inner = trace_find(trace_events(root), "X", "5 ms");
  CU_ASSERT_PTR_NOT_NULL_FATAL(outer);
  CU_ASSERT_PTR_NOT_NULL_FATAL(inner);
  double od = (double)ev_ns(outer, "dur") * 1e-9, id = (double)ev_ns(inner, "dur") * 1e-9;
  printf("\n    outer %.3f ms (measured %.3f-%.3f), inner %.3f ms (measured %.3f-%.3f) ", od * 1e3, outer_in * 1e3,
         outer_out * 1e3, id * 1e3, inner_in * 1e3, inner_out * 1e3);
  CU_ASSERT(dur_within(od, outer_in, outer_out));
  CU_ASSERT(dur_within(id, inner_in, inner_out));
  CU_ASSERT(od >= 0.020 && id >= 0.005);
  json_decref(root);
}

/* Any label yields valid JSON; text survives exactly, invalid UTF-8 becomes U+FFFD. */
static void test_json_hostile_labels(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  { LP_SCOPE("quote \" backslash \\ slash /"); }
  { LP_SCOPE("newline \n tab \t cr \r bell \a nul-free \x01\x1f del \x7f"); }
  { LP_SCOPE("valid: caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"); }
  { LP_SCOPE("invalid: \xff|\xc3|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82"); }
  LP_INSTANT("instant \"quoted\"");
  LP_COUNTER("counter \\ name", 7);
  lp_track_t tr = lp_track_create("track \"name\"\n");
  CU_ASSERT_EQUAL(lp_track_complete(tr, "work \xfe", lp_now_ns(), 1000), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load("proc \"name\" \\");
  json_t *ev = trace_events(root);
  CU_ASSERT_PTR_NOT_NULL(trace_find(ev, "X", "quote \" backslash \\ slash /"));
  CU_ASSERT_PTR_NOT_NULL(trace_find(ev, "X", "newline \n tab \t cr \r bell \a nul-free \x01\x1f del \x7f"));
  CU_ASSERT_PTR_NOT_NULL(trace_find(ev, "X", "valid: caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  /* each invalid sequence becomes one or more U+FFFD (EF BF BD); nothing else changes */
  json_t *inv = NULL;
  size_t i;
  json_t *e;
  json_array_foreach(ev, i, e) if (ev_is(e, "X", NULL) && strncmp(ev_str(e, "name"), "invalid: ", 9) == 0) inv = e;
  CU_ASSERT_PTR_NOT_NULL_FATAL(inv);
  const char *name = ev_str(inv, "name");
  CU_ASSERT_PTR_NULL(strchr(name, '\xff'));
  CU_ASSERT_PTR_NOT_NULL(strstr(name, "\xef\xbf\xbd|\xef\xbf\xbd|"));
  CU_ASSERT_PTR_NOT_NULL(trace_find(ev, "i", "instant \"quoted\""));
  CU_ASSERT_PTR_NOT_NULL(trace_find(ev, "C", "counter \\ name"));
  CU_ASSERT(trace_tid(ev, "track \"name\"\n") > 0);
  CU_ASSERT_PTR_NOT_NULL(trace_find(ev, "X", "work \xef\xbf\xbd"));
  json_t *pn = trace_find(ev, "M", "process_name");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(pn, "args"), "name")), "proc \"name\" \\");
  json_decref(root);
}

/* Labels far longer than one escaping block, with characters straddling every block boundary, survive exactly. */
static void test_json_long_labels(void) {
  static char labels[4][20000];
  static const char *piece[] = {"\xe2\x82\xac", "\"", "\n", "\xf0\x9f\x98\x80", "a", "\\", "\xc3\xa9"};
  for (int k = 0; k < 4; k++) {
    size_t n = 0;
    for (int i = k; n + 8 < sizeof labels[k]; i++) {
      const char *p = piece[i % 7];
      memcpy(labels[k] + n, p, strlen(p));
      n += strlen(p);
    }
    labels[k][n] = '\0';
  }
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  lp_track_t tr = lp_track_create("long names");
  for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(lp_track_complete(tr, labels[k], lp_now_ns() + (uint64_t)k * 10, 5), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load(NULL);
  for (int k = 0; k < 4; k++) CU_ASSERT_PTR_NOT_NULL(trace_find(trace_events(root), "X", labels[k]));
  json_decref(root);
  /* Event names are escaped whole; a process name streams through the writer a block at a time. */
  for (int k = 0; k < 4; k++) {
    root = write_and_load(labels[k]);
    json_t *pn = trace_find(trace_events(root), "M", "process_name");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(pn, "args"), "name")), labels[k]);
    json_decref(root);
  }
}

static void test_json_counters_and_instants(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  LP_COUNTER("queue depth", 42);
  LP_COUNTER("queue depth", -3);
  LP_COUNTER("extremes", INT64_MIN);
  LP_COUNTER("extremes", INT64_MAX);
  LP_INSTANT("marker");
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load(NULL);
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "C", "queue depth"), 2);
  int64_t seen[4], n = 0;
  size_t i;
  json_t *e;
  json_array_foreach(ev, i, e) if (ev_is(e, "C", NULL) && n < 4) {
    json_t *v = json_object_get(json_object_get(e, "args"), "value");
    CU_ASSERT(json_is_integer(v));
    seen[n++] = json_integer_value(v);
  }
  CU_ASSERT_EQUAL(n, 4);
  CU_ASSERT_EQUAL(seen[0], 42);
  CU_ASSERT_EQUAL(seen[1], -3);
  CU_ASSERT_EQUAL(seen[2], INT64_MIN);
  CU_ASSERT_EQUAL(seen[3], INT64_MAX);
  json_t *m = trace_find(ev, "i", "marker");
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_STRING_EQUAL(ev_str(m, "s"), "t");
  CU_ASSERT_EQUAL(ev_int(m, "tid"), (int64_t)lp__thread_current()->tid);
  json_decref(root);
}

/* A track is its own named lane; its events keep the caller's times to the nanosecond. */
static void test_json_tracks(void) {
  lp_track_t q = lp_track_create("gpu0 queue"), dma = lp_track_create("dma");
  CU_ASSERT(q >= 0 && dma >= 0 && q != dma);
  CU_ASSERT_EQUAL(lp_track_complete(q, "before tracing", lp_now_ns(), 5), 0); /* ignored */
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  uint64_t t0 = lp_now_ns();
  CU_ASSERT_EQUAL(lp_track_complete(q, "gemm", t0 + 1000, 123456), 0);
  CU_ASSERT_EQUAL(lp_track_complete(q, "relu", t0 + 1000 + 123456, 7), 0);
  CU_ASSERT_EQUAL(lp_track_complete(dma, "copy h2d", t0 + 1, 999), 0);
  /* The same work twice, back to back: viewers must not merge them into one. */
  CU_ASSERT_EQUAL(lp_track_complete(dma, "copy d2h", t0 + 5000, 100), 0);
  CU_ASSERT_EQUAL(lp_track_complete(dma, "copy d2h", t0 + 5100, 100), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load(NULL);
  json_t *ev = trace_events(root);
  int64_t qt = trace_tid(ev, "gpu0 queue"), dt = trace_tid(ev, "dma");
  CU_ASSERT(qt > 0 && dt > 0 && qt != dt);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "before tracing"), 0);
  json_t *g = trace_find(ev, "X", "gemm"), *r = trace_find(ev, "X", "relu"), *c = trace_find(ev, "X", "copy h2d");
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_EQUAL(ev_int(g, "tid"), qt);
  CU_ASSERT_EQUAL(ev_int(c, "tid"), dt);
  CU_ASSERT_EQUAL(ev_ns(g, "ts"), (int64_t)(t0 + 1000));
  CU_ASSERT_EQUAL(ev_ns(g, "dur"), 123456);
  CU_ASSERT_EQUAL(ev_ns(r, "ts"), (int64_t)(t0 + 1000 + 123456 + 1)); /* back to back: 1 ns apart */
  CU_ASSERT_EQUAL(ev_ns(r, "dur"), 6);
  CU_ASSERT_STRING_EQUAL(ev_str(g, "cat"), "track");
  size_t i;
  json_t *e;
  int64_t starts[2], ends[2], n = 0;
  json_array_foreach(ev, i, e) if (ev_is(e, "X", "copy d2h") && n < 2) {
    starts[n] = ev_ns(e, "ts");
    ends[n] = starts[n] + ev_ns(e, "dur");
    n++;
  }
  CU_ASSERT_EQUAL(n, 2);
  CU_ASSERT_EQUAL(starts[0], (int64_t)(t0 + 5000));
  CU_ASSERT_EQUAL(ends[0], (int64_t)(t0 + 5100));
  CU_ASSERT_EQUAL(starts[1], (int64_t)(t0 + 5101)); /* one nanosecond apart */
  CU_ASSERT_EQUAL(ends[1], (int64_t)(t0 + 5200));   /* ending when it did */
  json_decref(root);
}

/*
 * A track's work names are interned per track: 300 distinct names, each
 * given three times in turn, are past the first sizes of its name table
 * (64 slots, 16 names), and every item keeps its own name.
 */
static void test_json_track_many_work_names(void) {
  lp_track_t q = lp_track_create("many names");
  CU_ASSERT_FATAL(q >= 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  uint64_t t0 = lp_now_ns();
  char name[32];
  for (int round = 0; round < 3; round++)
    for (int k = 0; k < 300; k++) {
      snprintf(name, sizeof name, "kernel %d", k);
      CU_ASSERT_EQUAL(lp_track_complete(q, name, t0 + (uint64_t)(round * 300 + k) * 10, 5), 0);
    }
  CU_ASSERT_EQUAL(lp__track_test_names(q), 300); /* each interned once, across the table's growth */
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load(NULL);
  json_t *ev = trace_events(root);
  int64_t qt = trace_tid(ev, "many names");
  CU_ASSERT(qt > 0);
  for (int k = 0; k < 300; k++) {
    snprintf(name, sizeof name, "kernel %d", k);
    CU_ASSERT_EQUAL(trace_count(ev, "X", name), 3);
    json_t *e = trace_find(ev, "X", name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(ev_int(e, "tid"), qt);
    CU_ASSERT_EQUAL(ev_ns(e, "ts"), (int64_t)(t0 + (uint64_t)k * 10)); /* the first of its three */
  }
  json_decref(root);
}

/* Thread events land where lp_now_ns() says they happened: the TSC mapping holds to the microsecond. */
static void test_json_event_times_agree_with_lp_now_ns(void) {
  uint64_t before[20], after[20];
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 20; i++) {
    before[i] = lp_now_ns();
    LP_INSTANT("clock probe");
    after[i] = lp_now_ns();
    busy_wait(0.002);
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = write_and_load(NULL);
  size_t i;
  json_t *e;
  int k = 0, bad = 0;
  json_array_foreach(trace_events(root), i, e) if (ev_is(e, "i", "clock probe") && k < 20) {
    int64_t ts = ev_ns(e, "ts");
    if (ts < (int64_t)before[k] - 1000 || ts > (int64_t)after[k] + 1000) {
      printf("\n    probe %d at %lld, outside [%llu, %llu] ", k, (long long)ts, (unsigned long long)before[k],
             (unsigned long long)after[k]);
      bad++;
    }
    k++;
  }
  CU_ASSERT_EQUAL(k, 20);
  CU_ASSERT_EQUAL(bad, 0);
  json_decref(root);
}

int main(void) {
  dir = lp_test_tmpdir("json");
  snprintf(path, sizeof path, "%s/trace.json", dir);
  CU_TestInfo tests[] = {
      LP_TEST(test_json_structure_and_metadata),
      LP_TEST(test_json_nesting_on_several_threads),
      LP_TEST(test_json_durations_of_busy_waits),
      LP_TEST(test_json_hostile_labels),
      LP_TEST(test_json_long_labels),
      LP_TEST(test_json_counters_and_instants),
      LP_TEST(test_json_tracks),
      LP_TEST(test_json_track_many_work_names),
      LP_TEST(test_json_event_times_agree_with_lp_now_ns),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("json", tests);
  unlink(path);
  rmdir(dir);
  return rc;
}
