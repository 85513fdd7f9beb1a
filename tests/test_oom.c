/*
 * test_oom.c: every allocating entry point with one allocation failed at a
 * time.
 *
 * For each entry point the walk fails the 1st allocation the call makes,
 * then the 2nd, and so on (lp__alloc_test_fail), until a call runs with no
 * failure left to inject. Each call must return 0 or -ENOMEM (never
 * -ENOMEM unless an allocation failed), leave nothing half done (what it
 * documents about the state after a failure holds, and the same call then
 * succeeds), and leak nothing: the ASan build's leak check runs at exit.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"

static const char *dir;
static char json_path[256], systrace_path[256];
static FILE *sink;
static lp_profile_t *made; /* a profile for the print calls */
static lp_subscriber_t *sub;
static const lp_event_t *event;
static lp_track_t track = -1;

typedef struct oom_case {
  const char *name;
  void (*setup)(void);      /* before each call, with no failure */
  int (*call)(unsigned n);  /* the entry point; n makes names unique where the library keeps them */
  void (*undo)(int rc);     /* after each call, with no failure: checks the state, undoes what the call did */
} oom_case_t;

/* The number of allocations the call made when it ran through. */
static unsigned long walk(const oom_case_t *c) {
  unsigned long n;
  for (n = 1; n < 100000; n++) {
    if (c->setup) c->setup();
    lp__alloc_test_fail(n);
    int rc = c->call((unsigned)n);
    unsigned long left = lp__alloc_test_pending();
    lp__alloc_test_fail(0);
    if (rc != 0 && rc != -ENOMEM) {
      printf("\n    %s with allocation %lu failed: %d (%s) ", c->name, n, rc, lp_strerror(rc));
      CU_FAIL("neither 0 nor -ENOMEM");
    }
    if (rc == -ENOMEM && left) {
      printf("\n    %s: -ENOMEM with no allocation failed ", c->name);
      CU_FAIL("-ENOMEM out of nowhere");
    }
    if (c->undo) c->undo(rc);
    if (left) { /* it ran through */
      CU_ASSERT_EQUAL(rc, 0);
      break;
    }
    /* After the failure, the same call works. */
    if (c->setup) c->setup();
    int again = c->call((unsigned)n + 1000000u);
    CU_ASSERT_EQUAL(again, 0);
    if (c->undo) c->undo(again);
  }
  CU_ASSERT(n < 100000);
  printf("\n    %s: %lu allocation(s) failed in turn ", c->name, n - 1);
  return n - 1;
}

/* Labels on the calling thread, so that there is something to report. */
static void work(void) {
  LP_SCOPE_L(LP_LEVEL_REQUEST, "oom request");
  for (int i = 0; i < 3; i++) {
    LP_SCOPE("oom work");
    {
      LP_SCOPE("oom inner");
      if (lp_profile_running()) lp__profile_sample_now();
    }
    if (lp_profile_running()) lp__profile_sample_now();
  }
  LP_INSTANT("oom instant");
}

/* ---- the profile ---------------------------------------------------------------------------- */

static int call_profile_start(unsigned n) {
  (void)n;
  return lp_profile_start(NULL);
}
static void undo_profile_start(int rc) {
  CU_ASSERT_EQUAL(lp_profile_running(), rc == 0);
  lp_profile_t *p = NULL;
  if (rc == 0) CU_ASSERT_EQUAL(lp_profile_stop(&p), 0);
  lp_profile_free(p);
}

static void setup_profile_stop(void) {
  CU_ASSERT_EQUAL(lp__profile_start_manual(NULL), 0);
  work();
}
static lp_profile_t *stopped;
static int call_profile_stop(unsigned n) {
  (void)n;
  return lp_profile_stop(&stopped);
}
static void undo_profile_stop(int rc) {
  CU_ASSERT_EQUAL(lp_profile_running(), 0); /* stopped either way */
  if (rc == 0) {
    CU_ASSERT_PTR_NOT_NULL(stopped);
    CU_ASSERT_PTR_NOT_NULL(lp_node_find(lp_profile_root(stopped), "oom request"));
  }
  lp_profile_free(stopped);
  stopped = NULL;
}

static int call_profile_print(unsigned n) {
  (void)n;
  return lp_profile_print(made, sink);
}
static int call_profile_print_ex(unsigned n) {
  (void)n;
  lp_print_opts_t o = {LP_PRINT_THREADS | LP_PRINT_COUNTS, 0.5};
  return lp_profile_print_ex(made, sink, &o);
}
static int call_profile_folded(unsigned n) {
  (void)n;
  return lp_profile_write_folded(made, sink);
}

/* ---- the timeline ---------------------------------------------------------------------------- */

static int call_trace_start(unsigned n) {
  (void)n;
  return lp_trace_start(NULL);
}
static void undo_trace_start(int rc) {
  CU_ASSERT_EQUAL(lp_trace_running(), rc == 0);
  if (rc == 0) CU_ASSERT_EQUAL(lp_trace_stop(), 0);
}

static void setup_trace_stop(void) {
  CU_ASSERT_EQUAL(lp_trace_start(NULL), 0);
  work();
}
static int call_trace_stop(unsigned n) {
  (void)n;
  return lp_trace_stop();
}
static void undo_trace_stop(int rc) {
  (void)rc;
  CU_ASSERT_EQUAL(lp_trace_running(), 0);
}

static int call_track_create(unsigned n) {
  char name[64];
  snprintf(name, sizeof name, "oom track %u", n);
  lp_track_t t = lp_track_create(name);
  return t >= 0 ? 0 : t;
}

static void setup_recording(void) {
  CU_ASSERT_EQUAL(lp_trace_start(NULL), 0);
}
static int call_track_complete(unsigned n) {
  char name[64];
  snprintf(name, sizeof name, "oom item %u", n);
  uint64_t now = lp_now_ns();
  return lp_track_complete(track, name, now, 1000);
}
static void undo_recording(int rc) {
  (void)rc;
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
}

/* Nothing but the files a successful write leaves: no temporary file, no partial trace. */
static int files_in_dir(void) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

static int call_write_json(unsigned n) {
  (void)n;
  return lp_trace_write_json(json_path, "oom");
}
static void undo_write_json(int rc) {
  if (rc == 0) {
    json_error_t err;
    json_t *root = json_load_file(json_path, 0, &err);
    CU_ASSERT_PTR_NOT_NULL(root); /* complete and valid */
    CU_ASSERT(root && json_array_size(json_object_get(root, "traceEvents")) > 0);
    json_decref(root);
    CU_ASSERT_EQUAL(files_in_dir(), 1);
    unlink(json_path);
  }
  CU_ASSERT_EQUAL(files_in_dir(), 0);
}

static int call_write_systrace(unsigned n) {
  (void)n;
  return lp_trace_write_systrace(systrace_path);
}
static void undo_write_systrace(int rc) {
  if (rc == 0) {
    char *text = lp_test_slurp(systrace_path);
    CU_ASSERT(text && strstr(text, "oom work") != NULL);
    free(text);
    CU_ASSERT_EQUAL(files_in_dir(), 1);
    unlink(systrace_path);
  }
  CU_ASSERT_EQUAL(files_in_dir(), 0);
}

/* ---- threads ------------------------------------------------------------------------------------ */

/*
 * A new thread's first use of the library registers it, and its first event
 * makes its cache: the failure must be on that thread, so the call runs on
 * a thread of its own, which passes back what was left of the countdown.
 */
typedef struct thread_run {
  int (*call)(unsigned n);
  unsigned n;
  int rc;
  unsigned long left;
} thread_run_t;

static int call_event_make(unsigned n);

static void *on_thread(void *arg) {
  thread_run_t *r = arg;
  lp__alloc_test_fail(r->n < 1000000u ? r->n : 0);
  r->rc = r->call(r->n);
  r->left = lp__alloc_test_pending();
  lp__alloc_test_fail(0);
  work(); /* labels still work, whatever failed */
  return NULL;
}

/* Walks call on a new thread each time; the number of allocations it made. */
static unsigned long walk_on_threads(const char *name, int (*call)(unsigned n)) {
  unsigned long n;
  for (n = 1; n < 1000; n++) {
    thread_run_t r = {call, (unsigned)n, -1, 0};
    pthread_t th;
    CU_ASSERT_FATAL(pthread_create(&th, NULL, on_thread, &r) == 0 && pthread_join(th, NULL) == 0);
    if (r.rc != 0 && r.rc != -ENOMEM) printf("\n    %s with allocation %lu failed: %d ", name, n, r.rc);
    CU_ASSERT(r.rc == 0 || r.rc == -ENOMEM);
    CU_ASSERT(r.rc != -ENOMEM || r.left == 0);
    if (r.left) {
      CU_ASSERT_EQUAL(r.rc, 0);
      break;
    }
  }
  CU_ASSERT(n < 1000);
  printf("\n    %s on a new thread: %lu allocation(s) failed in turn ", name, n - 1);
  return n - 1;
}

static int call_thread_set_name(unsigned n) {
  (void)n;
  return lp_thread_set_name("oom worker");
}
static int call_first_labels(unsigned n) {
  (void)n;
  work();
  return 0;
}

/* ---- streams, events, subscribers ------------------------------------------------------------------ */

static int call_stream_register(unsigned n) {
  char name[64];
  uint8_t id;
  snprintf(name, sizeof name, "oom.stream.%u", n);
  return lp_stream_register(name, &id);
}
static int call_stream_initialize(unsigned n) {
  char name[64];
  snprintf(name, sizeof name, "oom.initialized.%u", n);
  return lp_stream_initialize(name, 1, 0, "1.0");
}
static int call_tp_register(unsigned n) {
  char vendor[64];
  uint16_t type;
  snprintf(vendor, sizeof vendor, "oom vendor %u", n);
  return lp_tp_register(vendor, 3, &type);
}
static int call_event_make(unsigned n) {
  static _Atomic unsigned serial; /* a new payload every call, whatever the walk */
  char name[64];
  snprintf(name, sizeof name, "oom event %u", ++serial);
  lp_payload_t p = {name, "test_oom.c", n, 1, NULL};
  const lp_event_t *ev = NULL;
  uint64_t instance = 0;
  int rc = lp_event_make(&p, LP_TP_SIGNAL, &ev, &instance);
  if (rc == 0) CU_ASSERT(ev && instance == 1);
  return rc;
}
static int call_event_set_metadata(unsigned n) {
  char key[64];
  snprintf(key, sizeof key, "oom key %u", n);
  int rc = lp_event_set_metadata(event, key, "value");
  if (rc == 0) CU_ASSERT_STRING_EQUAL(lp_event_get_metadata(event, key), "value");
  return rc;
}

static void noop(const lp_notification_t *n, void *data, void **slot) {
  (void)n;
  (void)data;
  (void)slot;
}
static int call_subscriber_create(unsigned n) {
  (void)n;
  return lp_subscriber_create(NULL, &sub);
}
static void undo_subscriber_create(int rc) {
  if (rc == 0) CU_ASSERT_EQUAL(lp_subscriber_destroy(sub, -1), 0);
  sub = NULL;
}
static void setup_subscriber(void) {
  CU_ASSERT_EQUAL(lp_subscriber_create(NULL, &sub), 0);
}
static int call_subscriber_set_callback(unsigned n) {
  (void)n;
  return lp_subscriber_set_callback(sub, 1, LP_TP_SCOPE_BEGIN, noop);
}
static void undo_subscriber(int rc) {
  (void)rc;
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(sub, 0), 0);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(sub, -1), 0);
  sub = NULL;
}
static void setup_subscriber_callbacks(void) {
  setup_subscriber();
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(sub, 1, LP_TP_SCOPE_BEGIN, noop), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(sub, 1, LP_TP_SCOPE_END, noop), 0);
}
static int call_subscriber_enable(unsigned n) {
  (void)n;
  int rc = lp_subscriber_set_enabled(sub, 1);
  if (rc == 0) work(); /* the scopes reach it */
  return rc;
}

/* ---- the tests ------------------------------------------------------------------------------------ */

static void test_oom_profile(void) {
  static const oom_case_t cases[] = {
      {"lp_profile_start", NULL, call_profile_start, undo_profile_start},
      {"lp_profile_stop", setup_profile_stop, call_profile_stop, undo_profile_stop},
      {"lp_profile_print", NULL, call_profile_print, NULL},
      {"lp_profile_print_ex", NULL, call_profile_print_ex, NULL},
      {"lp_profile_write_folded", NULL, call_profile_folded, NULL},
  };
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  work();
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&made), 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) walk(&cases[i]);
  lp_profile_free(made);
  made = NULL;
}

static void test_oom_trace(void) {
  static const oom_case_t cases[] = {
      {"lp_trace_start", NULL, call_trace_start, undo_trace_start},
      {"lp_trace_stop", setup_trace_stop, call_trace_stop, undo_trace_stop},
      {"lp_track_create", NULL, call_track_create, NULL},
      {"lp_track_complete", setup_recording, call_track_complete, undo_recording},
  };
  track = lp_track_create("oom queue");
  CU_ASSERT_FATAL(track >= 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) walk(&cases[i]);
}

static void test_oom_trace_write(void) {
  static const oom_case_t cases[] = {
      {"lp_trace_write_json", NULL, call_write_json, undo_write_json},
      {"lp_trace_write_systrace", NULL, call_write_systrace, undo_write_systrace},
  };
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  work();
  CU_ASSERT_EQUAL(lp_track_complete(track, "oom item", lp_now_ns(), 1000), 0);
  {
    LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_PREPARATION, "oom prepare");
    LP_SCOPE("oom work");
  }
  CU_ASSERT_EQUAL_FATAL(lp_trace_stop(), 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) walk(&cases[i]);
  /* And while recording. */
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  work();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) walk(&cases[i]);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
}

static void test_oom_thread(void) {
  walk_on_threads("lp_thread_set_name", call_thread_set_name);
  walk_on_threads("lp_event_make", call_event_make);
  /* A thread's first labels while a profile and a timeline run: it is registered, gets a lane... */
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  walk_on_threads("labels (LP_SCOPE, LP_INSTANT)", call_first_labels);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL(lp_profile_stop(&p), 0);
  CU_ASSERT_PTR_NOT_NULL(lp_node_find(lp_profile_root(p), "oom request"));
  lp_profile_free(p);
  /* ...and what was recorded is written whole. */
  CU_ASSERT_EQUAL(lp_trace_write_json(json_path, "oom"), 0);
  undo_write_json(0);
}

static void test_oom_events(void) {
  static const oom_case_t cases[] = {
      {"lp_stream_register", NULL, call_stream_register, NULL},
      {"lp_stream_initialize", NULL, call_stream_initialize, NULL},
      {"lp_tp_register", NULL, call_tp_register, NULL},
      {"lp_event_make", NULL, call_event_make, NULL},
      {"lp_event_set_metadata", NULL, call_event_set_metadata, NULL},
  };
  lp_payload_t p = {"oom metadata event", NULL, 0, 0, NULL};
  CU_ASSERT_EQUAL_FATAL(lp_event_make(&p, LP_TP_SIGNAL, &event, NULL), 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) walk(&cases[i]);
}

static void test_oom_subscribers(void) {
  static const oom_case_t cases[] = {
      {"lp_subscriber_create", NULL, call_subscriber_create, undo_subscriber_create},
      {"lp_subscriber_set_callback", setup_subscriber, call_subscriber_set_callback, undo_subscriber},
      {"lp_subscriber_set_enabled", setup_subscriber_callbacks, call_subscriber_enable, undo_subscriber},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) walk(&cases[i]);
}

/* The hook itself: the n-th allocation fails, once, on this thread only. */
static void test_oom_countdown(void) {
  lp__alloc_test_fail(2);
  void *a = lp__malloc(8), *b = lp__malloc(8), *c = lp__malloc(8);
  CU_ASSERT_PTR_NOT_NULL(a);
  CU_ASSERT_PTR_NULL(b);
  CU_ASSERT_PTR_NOT_NULL(c);
  CU_ASSERT_EQUAL(lp__alloc_test_pending(), 0);
  free(a);
  free(c);
  lp__alloc_test_fail(1);
  CU_ASSERT_PTR_NULL(lp__strdup("x"));
  lp__alloc_test_fail(0);
  char *d = lp__strdup("x");
  CU_ASSERT_PTR_NOT_NULL(d);
  free(d);
}

int main(void) {
  dir = lp_test_tmpdir("oom");
  snprintf(json_path, sizeof json_path, "%s/t.json", dir);
  snprintf(systrace_path, sizeof systrace_path, "%s/t.txt", dir);
  sink = fopen("/dev/null", "w");
  if (!sink) return 2;
  CU_TestInfo tests[] = {
      LP_TEST(test_oom_countdown),
      LP_TEST(test_oom_profile),
      LP_TEST(test_oom_trace),
      LP_TEST(test_oom_trace_write),
      LP_TEST(test_oom_thread),
      LP_TEST(test_oom_events),
      LP_TEST(test_oom_subscribers),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("oom", tests);
  fclose(sink);
  return rc;
}
