/*
 * test_perfetto.c: the timeline as Perfetto TrackEvent protobuf. Each case
 * records a session and writes it both ways; the Perfetto file, decoded by
 * perfetto_decode.h (which also checks the encoding rules), must say exactly
 * what the JSON says: the same lanes, scopes, times to the nanosecond,
 * categories, instants, counters, tracks and flags.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "perfetto_decode.h"
#include "runner.h"
#include "trace_json.h"

static const char *dir;
static char jpath[256], ppath[256];

/* The JSON's events as perfetto_decode.h's lines. */
static void json_lines(json_t *root, pd_lines_t *out) {
  json_t *ev = trace_events(root), *e;
  size_t i;
  char line[2048];
  json_array_foreach(ev, i, e) {
    const char *ph = ev_str(e, "ph");
    if (!ph || strcmp(ph, "M") == 0) continue;
    if (strcmp(ph, "C") == 0) {
      snprintf(line, sizeof line, "counter|C||%s|%lld|%lld|", ev_str(e, "name"), (long long)ev_ns(e, "ts"),
               (long long)json_integer_value(json_object_get(json_object_get(e, "args"), "value")));
      pd_push(out, line);
      continue;
    }
    /* The lane: the thread_name of its tid. */
    const char *lane = "?";
    size_t j;
    json_t *m;
    json_array_foreach(ev, j, m) if (ev_is(m, "M", "thread_name") && ev_int(m, "tid") == ev_int(e, "tid")) lane =
        json_string_value(json_object_get(json_object_get(m, "args"), "name"));
    char flags[512] = "", dur[32] = "";
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(e, "args"), k, v) {
      pd_flag(flags, sizeof flags, k, json_is_true(v) ? "true" : json_is_string(v) ? json_string_value(v) : "?");
    }
    if (strcmp(ph, "X") == 0) snprintf(dur, sizeof dur, "%lld", (long long)ev_ns(e, "dur"));
    snprintf(line, sizeof line, "%s|%s|%s|%s|%lld|%s|%s", lane, ph, ev_str(e, "cat"), ev_str(e, "name"),
             (long long)ev_ns(e, "ts"), dur, flags);
    pd_push(out, line);
  }
  pd_sort(out);
}

/* Called between the two writes of same_as_json() when set. */
static void (*between_writes)(void);

/* Writes the program's session both ways and compares; the decoded trace stays in *t for more checks. */
static void same_as_json(pd_trace_t *t) {
  memset(t, 0, sizeof *t);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(jpath, "test_perfetto"), 0);
  if (between_writes) between_writes();
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_perfetto(ppath, "test_perfetto"), 0);
  json_t *root = trace_load(jpath);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  pd_lines_t j = {0};
  json_lines(root, &j);
  json_decref(root);
  int rc = pd_decode(t, ppath);
  if (rc) printf("\n    %s: %s ", ppath, t->error);
  CU_ASSERT_EQUAL(rc, 0);
  size_t n = j.n > t->lines.n ? j.n : t->lines.n, shown = 0;
  for (size_t i = 0; i < n && shown < 5; i++) {
    const char *a = i < j.n ? j.v[i] : "(none)", *b = i < t->lines.n ? t->lines.v[i] : "(none)";
    if (strcmp(a, b) != 0) {
      printf("\n    json:     %s\n    perfetto: %s ", a, b);
      shown++;
    }
  }
  CU_ASSERT_EQUAL(j.n, t->lines.n);
  CU_ASSERT_EQUAL(shown, 0);
  pd_free(&j);
}

static size_t count(const pd_trace_t *t, const char *needle) {
  size_t n = 0;
  for (size_t i = 0; i < t->lines.n; i++) n += strstr(t->lines.v[i], needle) != NULL;
  return n;
}

static void *nested_worker(void *arg) {
  lp_thread_set_name((const char *)arg);
  for (int i = 0; i < 50; i++) {
    LP_SCOPE("level 1");
    LP_SCOPE_L(LP_LEVEL_OPERATOR, "level 2");
    { LP_SCOPE("level 3"); }
    LP_INSTANT("between");
  }
  return NULL;
}

static void test_perfetto_threads_nesting_and_names(void) {
  pthread_t a, b;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  lp_thread_set_name("pf main");
  { LP_SCOPE("on main"); }
  CU_ASSERT_EQUAL_FATAL(pthread_create(&a, NULL, nested_worker, "worker a"), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&b, NULL, nested_worker, "worker b"), 0);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pd_trace_t t;
  same_as_json(&t);
  CU_ASSERT_EQUAL(count(&t, "worker a|X|operator|level 2|"), 50);
  CU_ASSERT_EQUAL(count(&t, "worker b|X|runtime|level 3|"), 50);
  CU_ASSERT_EQUAL(count(&t, "pf main|X|runtime|on main|"), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(t.session, "events_recorded="));
  CU_ASSERT_PTR_NOT_NULL(strstr(t.session, "policy=discard"));
  CU_ASSERT_PTR_NOT_NULL(strstr(t.session, "clock_domain=CLOCK_MONOTONIC"));
  pd_free(&t.lines);
}

/*
 * A session that recorded nothing: the file still places its notes in time.
 * The notes' timestamp is on BUILTIN_CLOCK_MONOTONIC, and Perfetto's trace
 * processor drops a packet whose clock no ClockSnapshot names; with no
 * thread or track, no lane's snapshot names it.
 */
static void test_perfetto_empty_session_keeps_its_notes(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pd_trace_t t;
  same_as_json(&t);
  CU_ASSERT_EQUAL(t.lines.n, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(t.session, "events_recorded=0"));
  pd_free(&t.lines);
}

static void counter_site_a(int v) { LP_COUNTER("pf shared depth", v); }
static void counter_site_b(int v) { LP_COUNTER("pf shared depth", v); }

/*
 * Names shared as the JSON shares them: two counter sites of one name are
 * one counter (one series in the JSON), two tracks of one name two lanes
 * (two tids in the JSON; Perfetto would merge same-named tracks under the
 * process unless told not to).
 */
static void test_perfetto_shared_names_as_in_the_json(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  lp_track_t a = lp_track_create("pf twin"), b = lp_track_create("pf twin");
  uint64_t now = lp_now_ns();
  CU_ASSERT_EQUAL(lp_track_complete(a, "pf twin one", now, 1000), 0);
  CU_ASSERT_EQUAL(lp_track_complete(b, "pf twin two", now + 500, 1000), 0);
  counter_site_a(1);
  counter_site_b(2);
  counter_site_a(3);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pd_trace_t t;
  same_as_json(&t);
  CU_ASSERT_EQUAL(count(&t, "counter|C||pf shared depth|"), 3);
  CU_ASSERT_EQUAL(count(&t, "pf twin|X|track|"), 2);
  pd_free(&t.lines);
}

/* A begin the ring overwrote: made up, "truncated", in both. */
static void test_perfetto_ring_orphans(void) {
  lp_trace_opts_t o = {.budget_bytes = 32 * 1024, .policy = LP_TRACE_RING};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  {
    LP_SCOPE("outer overwritten");
    {
      LP_SCOPE("begin overwritten");
      for (int i = 0; i < 20000; i++) LP_INSTANT("pushes it out");
      LP_SCOPE("kept inside");
    }
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pd_trace_t t;
  same_as_json(&t);
  CU_ASSERT_EQUAL(count(&t, "|outer overwritten|"), 1);
  CU_ASSERT_EQUAL(count(&t, "truncated=true"), 2);
  CU_ASSERT_PTR_NULL(strstr(t.session, "events_dropped=0,"));
  CU_ASSERT_PTR_NOT_NULL(strstr(t.session, "policy=ring"));
  pd_free(&t.lines);
}

/*
 * Bends the counter against the clock by 1.5 us worth of ticks, less than
 * a jump: as an emulated counter's noise (qemu) bends it between two
 * sync points. A write that took a sync point of its own would then map
 * a time after the stop differently from the write before it (here by
 * some hundreds of ns).
 */
static int64_t bent;
static void bend_the_counter(void) {
  if (!lp__clock_is_counter()) return;
  lp__sync_t a = lp__clock_sync(), b;
  while ((b = lp__clock_sync()).ns - a.ns < 1000000) continue;
  bent = (int64_t)(1500.0 * (double)(b.ticks - a.ticks) / (double)(b.ns - a.ns));
  CU_ASSERT_EQUAL_FATAL(lp__clock_test_jump(bent), 0);
  lp__levels_publish();
}

/*
 * On the counter, bent between the two writes: the scope's end, after the
 * stop, is mapped through the sync point the first write took, the same
 * in both files.
 */
static void bent_between_writes(void *arg) {
  (void)arg;
  lp__clock_choose(LP_CLOCK_TSC);
  if (!lp__clock_is_counter()) return; /* none on this machine */
  pd_trace_t t;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  {
    LP_SCOPE("spans the stop");
    CU_ASSERT_EQUAL(lp_trace_stop(), 0);
    uint64_t t0 = lp__mono_ns();
    while (lp__mono_ns() - t0 < 300000) continue; /* ends 300 us after the stop */
  }
  bent = 0;
  between_writes = bend_the_counter;
  same_as_json(&t);
  between_writes = NULL;
  CU_ASSERT(bent > 0);
  CU_ASSERT_EQUAL(count(&t, "|X|runtime|spans the stop|"), 1);
  pd_free(&t.lines);
}

static void test_perfetto_scope_ending_after_stop_bent_counter(void) {
  CU_ASSERT_EQUAL(lp_test_in_child(bent_between_writes, NULL), 0);
}

static void test_perfetto_scope_ending_after_stop_and_open_scopes(void) {
  pd_trace_t t;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  {
    LP_SCOPE("spans the stop");
    CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  }
  same_as_json(&t);
  CU_ASSERT_EQUAL(count(&t, "|X|runtime|spans the stop|"), 1);
  pd_free(&t.lines);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  LP_BEGIN("manual");
  { LP_SCOPE("inside manual"); }
  LP_END();
  {
    LP_SCOPE("open at write");
    CU_ASSERT_EQUAL(lp_trace_stop(), 0);
    same_as_json(&t);
  }
  CU_ASSERT_EQUAL(count(&t, "|B|runtime|open at write|"), 1);
  CU_ASSERT_EQUAL(count(&t, "|X|runtime|manual|"), 1);
  pd_free(&t.lines);
}

static jmp_buf jump;
static void skipped(void) {
  LP_SCOPE("skipped by longjmp");
  longjmp(jump, 1);
}

static void test_perfetto_longjmp(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  {
    LP_SCOPE("catcher");
    if (setjmp(jump) == 0) skipped();
    { LP_SCOPE("after the jump"); }
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pd_trace_t t;
  same_as_json(&t);
  CU_ASSERT_EQUAL(count(&t, "unterminated=ended by an enclosing scope"), 1);
  pd_free(&t.lines);
}

static void *short_lived(void *arg) {
  (void)arg;
  lp_thread_set_name("short-lived");
  LP_SCOPE("exited outer");
  { LP_SCOPE("exited inner"); }
  return NULL;
}

static void test_perfetto_exited_threads(void) {
  pthread_t th;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, short_lived, NULL), 0);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pd_trace_t t;
  same_as_json(&t);
  CU_ASSERT_EQUAL(count(&t, "short-lived|X|runtime|exited inner|"), 1);
  pd_free(&t.lines);
}

/* A child of fork records and writes its own session; the parent's does not hold it. */
static void test_perfetto_fork(void) {
  char child_path[300];
  int status = -1;
  snprintf(child_path, sizeof child_path, "%s/child.pftrace", dir);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  { LP_SCOPE("parent before fork"); }
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int bad = 0;
    if (lp_trace_write_perfetto(child_path, NULL) != -EINVAL) bad |= 1;
    if (lp_trace_start(NULL) != 0) bad |= 2;
    { LP_SCOPE("in the child"); }
    if (lp_trace_stop() != 0) bad |= 4;
    if (lp_trace_write_perfetto(child_path, NULL) != 0) bad |= 8;
    _exit(bad);
  }
  { LP_SCOPE("parent after fork"); }
  CU_ASSERT_EQUAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pd_trace_t t, c;
  same_as_json(&t);
  CU_ASSERT_EQUAL(count(&t, "|parent after fork|"), 1);
  CU_ASSERT_EQUAL(count(&t, "|in the child|"), 0);
  memset(&c, 0, sizeof c);
  CU_ASSERT_EQUAL(pd_decode(&c, child_path), 0);
  CU_ASSERT_EQUAL(count(&c, "|in the child|"), 1);
  CU_ASSERT_EQUAL(count(&c, "|parent before fork|"), 0);
  pd_free(&t.lines);
  pd_free(&c.lines);
  unlink(child_path);
}

static void test_perfetto_tracks_counters_instants(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  lp_thread_set_name("pf main");
  lp_track_t gpu = lp_track_create("gpu queue"), dma = lp_track_create("dma");
  uint64_t t0 = lp_now_ns();
  lp_track_complete(gpu, "kernel a", t0 + 5000, 100);
  lp_track_complete(gpu, "kernel b", t0 + 5100, 100); /* back to back: one ns later, as in the JSON */
  lp_track_complete(dma, "copy", t0 + 4000, 3000);
  for (int i = 0; i < 10; i++) {
    LP_COUNTER("queue depth", i - 3);
    LP_INSTANT("tick");
  }
  LP_COUNTER("other counter", INT64_MIN);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pd_trace_t t;
  same_as_json(&t);
  CU_ASSERT_EQUAL(count(&t, "gpu queue|X|track|kernel"), 2);
  CU_ASSERT_EQUAL(count(&t, "dma|X|track|copy|"), 1);
  CU_ASSERT_EQUAL(count(&t, "counter|C||queue depth|"), 10);
  CU_ASSERT_EQUAL(count(&t, "|-3|"), 1);
  CU_ASSERT_EQUAL(count(&t, "|-9223372036854775808|"), 1);
  CU_ASSERT_EQUAL(count(&t, "pf main|i|runtime|tick|"), 10);
  pd_free(&t.lines);
}

/* Layers and phases as categories and annotations; labels that are not valid UTF-8. */
static void test_perfetto_layers_and_hostile_labels(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  {
    LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "layered");
    LP_PHASE_SWITCH(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "switched");
  }
  { LP_SCOPE("quote \" backslash \\ tab \t"); }
  { LP_SCOPE("caf\xc3\xa9 \xe2\x82\xac"); }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pd_trace_t t;
  same_as_json(&t);
  CU_ASSERT_EQUAL(count(&t, "|runtime,execution|layered|"), 1);
  CU_ASSERT_EQUAL(count(&t, "mode=switch"), 1);
  CU_ASSERT_EQUAL(count(&t, "caf\xc3\xa9 \xe2\x82\xac"), 1);
  pd_free(&t.lines);
  /* Invalid UTF-8: U+FFFD in the protobuf string, as in the JSON. */
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  { LP_SCOPE("bad \xff byte"); }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_perfetto(ppath, NULL), 0);
  CU_ASSERT_EQUAL(pd_decode(&t, ppath), 0);
  CU_ASSERT_EQUAL(count(&t, "|bad \xef\xbf\xbd byte|"), 1);
  pd_free(&t.lines);
}

/* Names are interned: a scope recorded many times costs far less than its name each time. */
static void test_perfetto_interning_keeps_events_small(void) {
  static const char name[] = "a rather long label that would cost much if written with every event";
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 10000; i++) {
    LP_SCOPE(name);
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_perfetto(ppath, NULL), 0);
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(ppath, &st), 0);
  CU_ASSERT(st.st_size < 10000 * 40);
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  CU_ASSERT_EQUAL(pd_decode(&t, ppath), 0);
  CU_ASSERT_EQUAL(count(&t, name), 10000);
  pd_free(&t.lines);
}


/* ---- the command reads it ---- */

static char tool[4096];

static lp_test_run_t run_tool(const char *cmd, const char *file) {
  char *argv[] = {tool, (char *)cmd, (char *)file, NULL};
  return lp_test_run(tool, argv, NULL, NULL);
}

static void free_run(lp_test_run_t *r) {
  free(r->out);
  free(r->err);
}

/* stats, tree and folded say the same of a session written both ways. */
static void test_perfetto_command_reads_what_the_json_says(void) {
  pthread_t a, b;
  lp_trace_opts_t o = {.budget_bytes = 64 * 1024, .policy = LP_TRACE_RING};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  lp_thread_set_name("pf main");
  {
    LP_SCOPE("made up on main");
    CU_ASSERT_EQUAL_FATAL(pthread_create(&a, NULL, nested_worker, "worker a"), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&b, NULL, nested_worker, "worker b"), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    for (int i = 0; i < 3000; i++) {
      LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "layered");
      LP_COUNTER("queue depth", i);
    }
  }
  lp_track_t gpu = lp_track_create("gpu queue");
  uint64_t t0 = lp_now_ns();
  for (int i = 0; i < 20; i++) lp_track_complete(gpu, i % 2 ? "kernel a" : "kernel b", t0 + 1000u * (unsigned)i, 700);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(jpath, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_perfetto(ppath, NULL), 0);
  static const char *const cmds[] = {"stats", "tree", "folded"};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    lp_test_run_t j = run_tool(cmds[i], jpath), p = run_tool(cmds[i], ppath);
    CU_ASSERT(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j.out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p.out);
    /* Both files tell the ring's overwrites, which the summaries note alike but for the file's name. */
    char *jn = strstr(j.out, "note: "), *pn = strstr(p.out, "note: ");
    if (cmds[i][0] != 'f') {
      CU_ASSERT_PTR_NOT_NULL_FATAL(jn);
      CU_ASSERT_PTR_NOT_NULL_FATAL(pn);
      CU_ASSERT_PTR_NOT_NULL(strstr(jn, " events were overwritten after the "));
      char *jt = strstr(jn, ": the trace covers "), *pt = strstr(pn, ": the trace covers ");
      CU_ASSERT_PTR_NOT_NULL_FATAL(jt);
      CU_ASSERT_PTR_NOT_NULL_FATAL(pt);
      size_t jl = strcspn(jt, "\n"), pl = strcspn(pt, "\n");
      CU_ASSERT(jl == pl && memcmp(jt, pt, jl) == 0);
      /* The notes out of both; the rest is compared whole. */
      memmove(jn, jn + strcspn(jn, "\n") + 1, strlen(jn + strcspn(jn, "\n") + 1) + 1);
      memmove(pn, pn + strcspn(pn, "\n") + 1, strlen(pn + strcspn(pn, "\n") + 1) + 1);
    }
    if (strcmp(j.out, p.out) != 0) printf("\n    %s differs:\n%s\n    ---\n%s\n    %s ", cmds[i], j.out, p.out, p.err);
    CU_ASSERT_STRING_EQUAL(j.out, p.out);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.out, cmds[i][0] == 'f' ? "layered" : "kernel a"));
    free_run(&j);
    free_run(&p);
  }
}

/*
 * Virtual tracks are the same lanes both ways: the JSON numbers a track by
 * its creation among all the program's tracks (here after two that recorded
 * nothing and are not written), and the Perfetto file says that number for
 * the command to use, so `stats --by thread` titles the lanes alike.
 */
static void test_perfetto_command_track_lanes_as_in_the_json(void) {
  char *argv_j[] = {tool, "stats", "--by", "thread", jpath, NULL}, *argv_p[] = {tool, "stats", "--by", "thread", ppath, NULL};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  lp_thread_set_name("pf main");
  lp_track_t idle_a = lp_track_create("idle a"), idle_b = lp_track_create("idle b");
  lp_track_t gpu = lp_track_create("gpu queue"), dma = lp_track_create("dma");
  CU_ASSERT(idle_a >= 0 && idle_b >= 0 && gpu >= 0 && dma >= 0);
  uint64_t t0 = lp_now_ns();
  { LP_SCOPE("on main"); }
  lp_track_complete(dma, "copy", t0 + 1000, 3000);
  lp_track_complete(gpu, "kernel", t0 + 5000, 2000);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(jpath, "lanes"), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_perfetto(ppath, "lanes"), 0);
  lp_test_run_t j = lp_test_run(tool, argv_j, NULL, NULL), p = lp_test_run(tool, argv_p, NULL, NULL);
  CU_ASSERT(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(j.out);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p.out);
  char title[128];
  snprintf(title, sizeof title, "gpu queue (lanes pid %d, tid %u)", (int)getpid(), 1000000000u + (unsigned)gpu);
  CU_ASSERT_PTR_NOT_NULL(strstr(j.out, title));
  if (strcmp(j.out, p.out) != 0) printf("\n    json:\n%s\n    ---\n    perfetto:\n%s\n    %s ", j.out, p.out, p.err);
  CU_ASSERT_STRING_EQUAL(j.out, p.out);
  free_run(&j);
  free_run(&p);
}

/* A damaged file: exit 2, a message with the byte offset and what was expected. */
static void test_perfetto_command_bad_input(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 100; i++) {
    LP_SCOPE("some scope");
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_perfetto(ppath, NULL), 0);
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(ppath, &st), 0);
  /* cut inside the last packet */
  CU_ASSERT_EQUAL_FATAL(truncate(ppath, st.st_size - 3), 0);
  lp_test_run_t r = run_tool("stats", ppath);
  CU_ASSERT(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2);
  CU_ASSERT(r.err && strstr(r.err, ": byte "));
  CU_ASSERT(r.err && strstr(r.err, "ends inside a packet"));
  free_run(&r);
  /* a category iid that was never interned (a name iid is kept without a name: test_pfread) */
  static const unsigned char bad[] = {
      0x0a, 0x04, 0x50, 0x01, 0x68, 0x01,                   /* packet: sequence 1, state cleared */
      0x0a, 0x0a, 0x50, 0x01, 0x40, 0x05, 0x5a, 0x04, 0x48, 0x01, 0x18, 0x07}; /* begin, category iid 7 */
  FILE *f = fopen(ppath, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(fwrite(bad, 1, sizeof bad, f), sizeof bad);
  CU_ASSERT_EQUAL(fclose(f), 0);
  r = run_tool("stats", ppath);
  CU_ASSERT(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2);
  CU_ASSERT(r.err && strstr(r.err, "byte 6: a category iid that was not interned"));
  free_run(&r);
}

static void test_perfetto_errors(void) {
  CU_ASSERT_EQUAL(lp_trace_write_perfetto(NULL, NULL), -EINVAL);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/no/such/dir/x.pftrace", dir);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_write_perfetto(missing, NULL), -ENOENT);
}

int main(void) {
  dir = lp_test_tmpdir("perfetto");
  if (!realpath("tools/labelprof", tool)) {
    perror("test_perfetto: setup (run from the build directory)");
    return 2;
  }
  snprintf(jpath, sizeof jpath, "%s/trace.json", dir);
  snprintf(ppath, sizeof ppath, "%s/trace.pftrace", dir);
  CU_TestInfo tests[] = {
      LP_TEST(test_perfetto_threads_nesting_and_names),
      LP_TEST(test_perfetto_ring_orphans),
      LP_TEST(test_perfetto_empty_session_keeps_its_notes),
      LP_TEST(test_perfetto_shared_names_as_in_the_json),
      LP_TEST(test_perfetto_scope_ending_after_stop_and_open_scopes),
      LP_TEST(test_perfetto_scope_ending_after_stop_bent_counter),
      LP_TEST(test_perfetto_longjmp),
      LP_TEST(test_perfetto_exited_threads),
      LP_TEST(test_perfetto_fork),
      LP_TEST(test_perfetto_tracks_counters_instants),
      LP_TEST(test_perfetto_layers_and_hostile_labels),
      LP_TEST(test_perfetto_interning_keeps_events_small),
      LP_TEST(test_perfetto_errors),
      LP_TEST(test_perfetto_command_reads_what_the_json_says),
      LP_TEST(test_perfetto_command_bad_input),
      LP_TEST(test_perfetto_command_track_lanes_as_in_the_json),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("perfetto", tests);
  unlink(jpath);
  unlink(ppath);
  return rc;
}
