/* test_subscribers.c: streams, events, subscribers and their promises under concurrency. */
#include "internal.h"

#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"
#include "trace_json.h"

static uint64_t my_tid(void) { return (uint64_t)syscall(SYS_gettid); }

/* ---- a recording subscriber --------------------------------------------------------- */

#define LOG_MAX 256
typedef struct entry {
  char who;
  uint8_t stream;
  uint16_t type;
  const lp_event_t *parent;
  const lp_site_t *site;
  const lp_event_t *event;
  uint64_t instance;
  const void *user_data;
  void *slot_in;   /* *instance_data when called */
  void **slot_at;  /* instance_data */
  uint64_t tid;
} entry_t;

static entry_t logv[LOG_MAX];
static int nlog;

static void rec(const lp_notification_t *n, void *data, void **slot) {
  if (nlog < LOG_MAX)
    logv[nlog++] = (entry_t){*(const char *)data, n->stream, n->type, n->parent, n->site, n->event, n->instance,
                             n->user_data, *slot, slot, n->tid};
  if (!*slot) *slot = (void *)(uintptr_t)(0x1000 + nlog); /* the end must get this back */
}

static lp_subscriber_t *recorder(const char *who, uint8_t stream, const uint16_t *types, int ntypes) {
  lp_subscriber_t *s = NULL;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create((void *)who, &s), 0);
  for (int i = 0; i < ntypes; i++) CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, stream, types[i], rec), 0);
  return s;
}

/*
 * The tests' waits for destroy: long enough for any honest wait here (10 s,
 * LP_TEST_SLOW times more under emulation), short enough that a destroy that
 * never returns fails the test instead of hanging the suite.
 */
#define WAIT_NS ((int64_t)10000000000 * (int64_t)lp_test_slow())

static void drop(lp_subscriber_t *s) {
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 0), 0);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(s, WAIT_NS), 0);
}

static const uint16_t scope_types[] = {LP_TP_SCOPE_BEGIN, LP_TP_SCOPE_END, LP_TP_INSTANT};

/* ---- arguments ---------------------------------------------------------------------- */

static void test_bad_arguments_are_einval(void) {
  uint8_t id;
  uint16_t type;
  const lp_event_t *ev;
  lp_subscriber_t *s;
  lp_payload_t empty = {NULL, NULL, 1, 2, NULL};
  char longname[300];
  memset(longname, 'n', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  CU_ASSERT_EQUAL(lp_stream_register(NULL, &id), -EINVAL);
  CU_ASSERT_EQUAL(lp_stream_register("", &id), -EINVAL);
  CU_ASSERT_EQUAL(lp_stream_register("x", NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp_stream_register(longname, &id), -EINVAL);
  CU_ASSERT_EQUAL(lp_stream_initialize(NULL, 1, 0, "v"), -EINVAL);
  CU_ASSERT_EQUAL(lp_stream_finalize(NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp_stream_finalize("never.initialized"), -ENOENT);
  CU_ASSERT_EQUAL(lp_tp_register(NULL, 1, &type), -EINVAL);
  CU_ASSERT_EQUAL(lp_tp_register("", 1, &type), -EINVAL);
  CU_ASSERT_EQUAL(lp_tp_register("acme", 128, &type), -EINVAL);
  CU_ASSERT_EQUAL(lp_tp_register("acme", 1, NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp_event_make(NULL, 0, &ev, NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp_event_make(&empty, 0, &ev, NULL), -EINVAL);
  empty.name = "n";
  CU_ASSERT_EQUAL(lp_event_make(&empty, 0, NULL, NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp_event_find(1, NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp_event_find(0, &ev), -ENOENT);
  CU_ASSERT_EQUAL(lp_event_find(UINT64_MAX, &ev), -ENOENT);
  CU_ASSERT_EQUAL(lp_event_id(NULL), 0);
  CU_ASSERT_PTR_NULL(lp_event_payload(NULL));
  CU_ASSERT_EQUAL(lp_event_set_metadata(NULL, "k", "v"), -EINVAL);
  CU_ASSERT_PTR_NULL(lp_event_get_metadata(NULL, "k"));
  CU_ASSERT_EQUAL(lp_subscriber_create(NULL, NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(NULL, 1, 0, rec), -EINVAL);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(NULL, 1), -EINVAL);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(NULL, 0), -EINVAL);
  CU_ASSERT_EQUAL(lp_notify(0, 0, NULL, NULL, 0, NULL), -EINVAL);
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, 0, 0, rec), -EINVAL);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(s, 0), 0);
  /* A destroyed subscriber is unknown: refused, never touched. */
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 1), -EINVAL);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, 1, 0, rec), -EINVAL);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(s, 0), -EINVAL);
  /* A negative timeout waits without bound: with nothing to wait for, it returns at once. */
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s), 0);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(s, -1), 0);
}

/* ---- streams, types, events --------------------------------------------------------------- */

static void test_streams_register_once(void) {
  uint8_t a = 0, b = 0, l = 0;
  CU_ASSERT_EQUAL(lp_stream_register(LP_STREAM_LABELS_NAME, &l), 0);
  CU_ASSERT_EQUAL(l, LP_STREAM_LABELS);
  CU_ASSERT_EQUAL(lp_stream_register("test.streams", &a), 0);
  CU_ASSERT_EQUAL(lp_stream_register("test.streams", &b), 0);
  CU_ASSERT_EQUAL(a, b);
  CU_ASSERT(a > 1);
  CU_ASSERT_EQUAL(lp_stream_initialize("test.streams", 1, 2, NULL), 0);
  CU_ASSERT_EQUAL(lp_stream_initialize("test.streams", 1, 2, "again"), 0);
  CU_ASSERT_EQUAL(lp_stream_finalize("test.streams"), 0);
  CU_ASSERT_EQUAL(lp_stream_finalize("test.streams"), -ENOENT);
}

static void test_types_decode(void) {
  uint16_t t1, t2, t3, t4;
  CU_ASSERT_EQUAL(LP_TP_VENDOR(LP_TP_TASK_BEGIN), 0);
  CU_ASSERT_EQUAL(LP_TP_TASK_END, LP_TP_TASK_BEGIN | 1);
  CU_ASSERT_EQUAL(LP_TP_END(1 + 1), LP_TP_TASK_END); /* parenthesised */
  CU_ASSERT_EQUAL(LP_TP_BEGIN(64 + 2), LP_TP_BEGIN(2)); /* masked */
  CU_ASSERT_EQUAL(LP_TP_INDEX(0xffff), 0x7f);
  CU_ASSERT_EQUAL(LP_TP_VENDOR(0x1ffff), 0xff);
  CU_ASSERT_EQUAL(lp_tp_register("acme", LP_TP_BEGIN(3), &t1), 0);
  CU_ASSERT_EQUAL(lp_tp_register("acme", LP_TP_END(3), &t2), 0);
  CU_ASSERT_EQUAL(lp_tp_register("acme", LP_TP_BEGIN(3), &t3), 0);
  CU_ASSERT_EQUAL(lp_tp_register("other", 127, &t4), 0);
  CU_ASSERT_EQUAL(t1, t3);
  CU_ASSERT_EQUAL(t2, t1 | 1);
  CU_ASSERT(LP_TP_VENDOR(t1) >= 1);
  CU_ASSERT_EQUAL(LP_TP_INDEX(t1), LP_TP_BEGIN(3));
  CU_ASSERT_EQUAL(LP_TP_INDEX(t4), 127);
  CU_ASSERT_NOT_EQUAL(LP_TP_VENDOR(t4), LP_TP_VENDOR(t1));
  CU_ASSERT(LP_TP_IS_END(t2));
}

static void test_events_same_payload_same_id(void) {
  char name1[] = "graph.node", name2[] = "graph.node", file[] = "g.c";
  lp_payload_t p1 = {name1, file, 10, 3, NULL}, p2 = {name2, "g.c", 10, 3, NULL}, p3 = {name1, file, 11, 3, NULL};
  const lp_event_t *e1, *e2, *e3, *f;
  uint64_t i1, i2, i3;
  CU_ASSERT_EQUAL(lp_event_make(&p1, LP_TP_NODE_CREATE, &e1, &i1), 0);
  CU_ASSERT_EQUAL(lp_event_make(&p2, LP_TP_NODE_CREATE, &e2, &i2), 0);
  CU_ASSERT_EQUAL(lp_event_make(&p3, LP_TP_NODE_CREATE, &e3, &i3), 0);
  CU_ASSERT_PTR_EQUAL(e1, e2);
  CU_ASSERT_EQUAL(lp_event_id(e1), lp_event_id(e2));
  CU_ASSERT_NOT_EQUAL(lp_event_id(e1), lp_event_id(e3));
  CU_ASSERT_EQUAL(i2, i1 + 1);
  CU_ASSERT_EQUAL(i3, 1);
  CU_ASSERT_EQUAL(lp_event_type(e1), LP_TP_NODE_CREATE);
  CU_ASSERT_EQUAL(lp_event_find(lp_event_id(e3), &f), 0);
  CU_ASSERT_PTR_EQUAL(f, e3);
  /* The payload is the library's copy. */
  strcpy(name1, "changed!!!");
  const lp_payload_t *pl = lp_event_payload(e1);
  CU_ASSERT_STRING_EQUAL(pl->name, "graph.node");
  CU_ASSERT_STRING_EQUAL(pl->file, "g.c");
  CU_ASSERT_EQUAL(pl->line, 10);
  CU_ASSERT_EQUAL(pl->column, 3);
  /* The same buffer with new content is another payload (the thread's cache keys on pointers). */
  const lp_event_t *e4;
  uint64_t i4;
  CU_ASSERT_EQUAL(lp_event_make(&p1, LP_TP_NODE_CREATE, &e4, &i4), 0);
  CU_ASSERT_PTR_NOT_EQUAL(e4, e1);
  CU_ASSERT_STRING_EQUAL(lp_event_payload(e4)->name, "changed!!!");
  CU_ASSERT_EQUAL(i4, 1);
  /* Metadata. */
  char key[] = "k", val[] = "value";
  CU_ASSERT_EQUAL(lp_event_set_metadata(e1, key, val), 0);
  CU_ASSERT_EQUAL(lp_event_set_metadata(e1, "k2", "v2"), 0);
  CU_ASSERT_EQUAL(lp_event_set_metadata(e1, "k", "other"), -EEXIST);
  strcpy(val, "xxxxx");
  CU_ASSERT_STRING_EQUAL(lp_event_get_metadata(e1, "k"), "value");
  CU_ASSERT_STRING_EQUAL(lp_event_get_metadata(e1, "k2"), "v2");
  CU_ASSERT_PTR_NULL(lp_event_get_metadata(e1, "k3"));
  CU_ASSERT_PTR_NULL(lp_event_get_metadata(e3, "k"));
  /* A code pointer alone is a payload. */
  lp_payload_t pc = {NULL, NULL, 0, 0, (const void *)&test_events_same_payload_same_id};
  CU_ASSERT_EQUAL(lp_event_make(&pc, 0, &e2, NULL), 0);
  CU_ASSERT_NOT_EQUAL(lp_event_id(e2), lp_event_id(e1));
}

/* Many events, short and long strings: each found again by its id with its own payload. */
static void test_events_many_and_long(void) {
  enum { N = 6000 };
  static uint64_t ids[N];
  char name[64], file[64];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "many.%d", i);
    snprintf(file, sizeof file, "%*d.c", 1 + i % 40, i); /* lengths vary: events of many sizes */
    lp_payload_t p = {name, file, (uint32_t)i, 0, NULL};
    const lp_event_t *e;
    CU_ASSERT_EQUAL_FATAL(lp_event_make(&p, 0, &e, NULL), 0);
    ids[i] = lp_event_id(e);
  }
  for (int i = 0; i < N; i++) {
    const lp_event_t *e;
    CU_ASSERT_EQUAL_FATAL(lp_event_find(ids[i], &e), 0);
    snprintf(name, sizeof name, "many.%d", i);
    snprintf(file, sizeof file, "%*d.c", 1 + i % 40, i);
    const lp_payload_t *p = lp_event_payload(e);
    CU_ASSERT(strcmp(p->name, name) == 0 && strcmp(p->file, file) == 0 && p->line == (uint32_t)i);
  }
  size_t big = 100000;
  char *longname = malloc(big + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(longname);
  memset(longname, 'n', big);
  longname[big] = '\0';
  lp_payload_t pl = {longname, NULL, 1, 2, NULL};
  const lp_event_t *e1, *e2;
  uint64_t inst;
  CU_ASSERT_EQUAL(lp_event_make(&pl, 0, &e1, NULL), 0);
  longname[0] = 'm'; /* the library's copy does not change */
  CU_ASSERT_EQUAL(lp_event_make(&pl, 0, &e2, NULL), 0);
  CU_ASSERT_PTR_NOT_EQUAL(e1, e2);
  longname[0] = 'n';
  CU_ASSERT_EQUAL(lp_event_make(&pl, 0, &e2, &inst), 0);
  CU_ASSERT_PTR_EQUAL(e1, e2);
  CU_ASSERT_EQUAL(inst, 2);
  CU_ASSERT_EQUAL(strlen(lp_event_payload(e1)->name), big);
  CU_ASSERT_PTR_NULL(lp_event_payload(e1)->file);
  free(longname);
}

#define EV_THREADS 4
static long ev_iters;
static uint64_t *ev_seen[EV_THREADS];
static const lp_event_t *ev_got[EV_THREADS];

static void *event_worker(void *arg) {
  int k = (int)(intptr_t)arg;
  char name[32];
  snprintf(name, sizeof name, "shared.%d", 7); /* the same content from a different buffer per thread */
  lp_payload_t p = {name, "f.c", 1, 1, NULL};
  for (long i = 0; i < ev_iters; i++) {
    const lp_event_t *e;
    uint64_t inst;
    if (lp_event_make(&p, 0, &e, &inst) != 0) return NULL;
    ev_seen[k][i] = inst;
    ev_got[k] = e;
  }
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void test_events_from_several_threads(void) {
  ev_iters = LP_TEST_SANITIZED ? 2000 : 20000;
  pthread_t th[EV_THREADS];
  for (int k = 0; k < EV_THREADS; k++) {
    ev_seen[k] = calloc((size_t)ev_iters, sizeof(uint64_t));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev_seen[k]);
    ev_got[k] = NULL;
  }
  for (int k = 0; k < EV_THREADS; k++) CU_ASSERT_EQUAL(pthread_create(&th[k], NULL, event_worker, (void *)(intptr_t)k), 0);
  for (int k = 0; k < EV_THREADS; k++) pthread_join(th[k], NULL);
  uint64_t *all = malloc((size_t)ev_iters * EV_THREADS * sizeof *all);
  CU_ASSERT_PTR_NOT_NULL_FATAL(all);
  size_t n = 0;
  for (int k = 0; k < EV_THREADS; k++) {
    CU_ASSERT_PTR_EQUAL(ev_got[k], ev_got[0]);
    for (long i = 0; i < ev_iters; i++) {
      if (i) CU_ASSERT(ev_seen[k][i] > ev_seen[k][i - 1]); /* rising on each thread */
      all[n++] = ev_seen[k][i];
    }
    free(ev_seen[k]);
  }
  qsort(all, n, sizeof *all, cmp_u64);
  int gaps = 0;
  for (size_t i = 0; i < n; i++) gaps += all[i] != i + 1; /* every instance number exactly once */
  CU_ASSERT_EQUAL(gaps, 0);
  free(all);
}

/* ---- labels -------------------------------------------------------------------------- */

static void labelled(void) {
  LP_SCOPE("outer");
  {
    LP_SCOPE("inner");
    LP_INSTANT("tick");
  }
}

static void test_labels_reach_subscribers_in_order(void) {
  lp_subscriber_t *a = recorder("A", LP_STREAM_LABELS, scope_types, 3);
  lp_subscriber_t *b = recorder("B", LP_STREAM_LABELS, scope_types, 2);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(b, 1), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0); /* enable order: B, then A */
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(a, 9, 2, rec), -EBUSY);
  nlog = 0;
  labelled();
  /* begin outer: B A; begin inner: B A; instant: A; end inner: A B; end outer: A B */
  const char *who = "BABAAABAB";
  const uint16_t types[] = {0, 0, 0, 0, LP_TP_INSTANT, 1, 1, 1, 1};
  CU_ASSERT_EQUAL_FATAL(nlog, 9);
  for (int i = 0; i < 9; i++) {
    CU_ASSERT_EQUAL(logv[i].who, who[i]);
    CU_ASSERT_EQUAL(logv[i].type, types[i]);
    CU_ASSERT_EQUAL(logv[i].tid, my_tid());
    CU_ASSERT_PTR_NOT_NULL(logv[i].site);
    CU_ASSERT_PTR_NULL(logv[i].event);
  }
  CU_ASSERT_STRING_EQUAL(logv[0].site->label, "outer");
  CU_ASSERT_STRING_EQUAL(logv[2].site->label, "inner");
  CU_ASSERT_STRING_EQUAL(logv[4].site->label, "tick");
  CU_ASSERT_STRING_EQUAL(logv[5].site->label, "inner");
  CU_ASSERT_STRING_EQUAL(logv[8].site->label, "outer");
  CU_ASSERT_STRING_EQUAL(logv[0].site->func, "labelled");
  /* Slots: NULL at each begin, and the end of the same scope gets the same slot with what its begin left. */
  for (int i = 0; i < 4; i++) CU_ASSERT_PTR_NULL(logv[i].slot_in);
  CU_ASSERT_PTR_EQUAL(logv[5].slot_at, logv[3].slot_at); /* A inner */
  CU_ASSERT_PTR_EQUAL(logv[6].slot_at, logv[2].slot_at); /* B inner */
  CU_ASSERT_PTR_EQUAL(logv[7].slot_at, logv[1].slot_at); /* A outer */
  CU_ASSERT_PTR_EQUAL(logv[8].slot_at, logv[0].slot_at); /* B outer */
  CU_ASSERT_EQUAL((uintptr_t)logv[5].slot_in, 0x1000 + 4);
  CU_ASSERT_EQUAL((uintptr_t)logv[8].slot_in, 0x1000 + 1);
  CU_ASSERT_PTR_NULL(logv[4].slot_in); /* a single notification: a fresh slot */
  CU_ASSERT_PTR_NOT_EQUAL(logv[1].slot_at, logv[0].slot_at);
  /* Manual pairs too. */
  nlog = 0;
  LP_BEGIN("manual");
  LP_END();
  CU_ASSERT_EQUAL_FATAL(nlog, 4);
  CU_ASSERT_STRING_EQUAL(logv[3].site->label, "manual");
  CU_ASSERT_EQUAL(logv[3].type, LP_TP_SCOPE_END);
  CU_ASSERT_PTR_EQUAL(logv[3].slot_at, logv[0].slot_at);
  drop(a);
  drop(b);
  nlog = 0;
  labelled();
  CU_ASSERT_EQUAL(nlog, 0);
}

static void test_pairing_across_disable_and_late_enable(void) {
  lp_subscriber_t *a = recorder("A", LP_STREAM_LABELS, scope_types, 2);
  nlog = 0;
  {
    LP_SCOPE("before enable");
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
    {
      LP_SCOPE("while enabled");
      CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 0), 0);
      {
        LP_SCOPE("after disable");
      }
      /* The scope A saw begin is still open: destroying A now would wait for this very thread. */
      CU_ASSERT_EQUAL(lp_subscriber_destroy(a, WAIT_NS), -EDEADLK);
    }
  }
  CU_ASSERT_EQUAL_FATAL(nlog, 2);
  CU_ASSERT_STRING_EQUAL(logv[0].site->label, "while enabled");
  CU_ASSERT_EQUAL(logv[0].type, LP_TP_SCOPE_BEGIN);
  CU_ASSERT_STRING_EQUAL(logv[1].site->label, "while enabled");
  CU_ASSERT_EQUAL(logv[1].type, LP_TP_SCOPE_END);
  CU_ASSERT_PTR_EQUAL(logv[1].slot_at, logv[0].slot_at);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(a, WAIT_NS), 0);
}

/* A phase switch ends what it replaces and begins itself, for subscribers as on the timeline. */
static void switching(void) {
  LP_SCOPE("outer");
  {
    LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_TRANSFORMATION, "transform");
    LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "compute");
  }
}

static void check_switch_log(void) {
  static const char *const labels[] = {"outer", "transform", "transform", "compute", "compute", "outer"};
  static const uint16_t types[] = {0, 0, 1, 0, 1, 1};
  CU_ASSERT_EQUAL_FATAL(nlog, 6);
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_STRING_EQUAL(logv[i].site->label, labels[i]);
    CU_ASSERT_EQUAL(logv[i].type, types[i]);
  }
  CU_ASSERT_PTR_EQUAL(logv[2].slot_at, logv[1].slot_at);
  CU_ASSERT_EQUAL((uintptr_t)logv[2].slot_in, 0x1000 + 2);
  CU_ASSERT_PTR_EQUAL(logv[4].slot_at, logv[3].slot_at);
  CU_ASSERT_EQUAL((uintptr_t)logv[4].slot_in, 0x1000 + 4);
  CU_ASSERT_PTR_EQUAL(logv[5].slot_at, logv[0].slot_at);
}

static void test_phase_switch_pairs_for_subscribers(void) {
  lp_subscriber_t *a = recorder("A", LP_STREAM_LABELS, scope_types, 2);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
  lp__thread_t *t = lp__thread_current();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  uint64_t mismatched = atomic_load(&t->mismatched);
  nlog = 0;
  switching();
  check_switch_log();
  /* The same while a timeline records every level. */
  lp_trace_opts_t o = {0};
  o.levels = LP_LEVEL_ALL;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  nlog = 0;
  switching();
  check_switch_log();
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  /* The stack ended where it began: nothing healed, nothing mismatched. */
  CU_ASSERT_EQUAL(atomic_load(&t->mismatched), mismatched);
  CU_ASSERT_EQUAL(LP_IMPL_LOAD_RELAXED(t->hot.word) & LP_IMPL_DEPTH_MASK, 0);
  drop(a);
}


/*
 * One subscriber's pairs run in the program's own code, anything else in the
 * library: scopes that begin on one side and end on the other keep their
 * pairs, slots and order. A's scope begins alone (inline); B joins, and a
 * nested scope begins with both (out of line); A leaves: the nested end still
 * goes to both, in reverse, and the outer end to A alone (inline, with A
 * disabled). Then lp_notify with two listeners, then with one.
 */
static void test_inline_and_library_paths_hand_over(void) {
  static const uint16_t sig = LP_TP_SIGNAL;
  lp_subscriber_t *a = recorder("A", LP_STREAM_LABELS, scope_types, 2);
  lp_subscriber_t *b = recorder("B", LP_STREAM_LABELS, scope_types, 2);
  uint8_t st;
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.handover", &st), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(a, st, sig, rec), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(b, st, sig, rec), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
  nlog = 0;
  LP_BEGIN("outer");
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(b, 1), 0);
  {
    LP_SCOPE("inner");
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 0), 0);
  }
  LP_END();
  /* A: begin outer; A, B: begin inner; B, A: end inner; A: end outer */
  CU_ASSERT_EQUAL_FATAL(nlog, 6);
  const char *who = "AABBAA", *label[] = {"outer", "inner", "inner", "inner", "inner", "outer"};
  const int end[] = {0, 0, 0, 1, 1, 1};
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL(logv[i].who, who[i]);
    CU_ASSERT_STRING_EQUAL(logv[i].site->label, label[i]);
    CU_ASSERT_EQUAL(logv[i].type, end[i] ? LP_TP_SCOPE_END : LP_TP_SCOPE_BEGIN);
    CU_ASSERT_EQUAL(logv[i].tid, my_tid());
  }
  CU_ASSERT_PTR_EQUAL(logv[5].slot_at, logv[0].slot_at);
  CU_ASSERT_PTR_EQUAL(logv[4].slot_at, logv[1].slot_at);
  CU_ASSERT_PTR_EQUAL(logv[3].slot_at, logv[2].slot_at);
  CU_ASSERT_PTR_NOT_EQUAL(logv[1].slot_at, logv[2].slot_at);
  CU_ASSERT_PTR_EQUAL(logv[5].slot_in, (void *)(uintptr_t)(0x1000 + 1));
  CU_ASSERT_PTR_EQUAL(logv[4].slot_in, (void *)(uintptr_t)(0x1000 + 2));
  CU_ASSERT_PTR_EQUAL(logv[3].slot_in, (void *)(uintptr_t)(0x1000 + 3));
  /* A scope now reaches B alone, inline. */
  nlog = 0;
  { LP_SCOPE("b alone"); }
  CU_ASSERT_EQUAL_FATAL(nlog, 2);
  CU_ASSERT_EQUAL(logv[0].who, 'B');
  CU_ASSERT_PTR_EQUAL(logv[1].slot_in, (void *)(uintptr_t)(0x1000 + 1));
  /* lp_notify: both, in enable order (B first now), then B alone; each with a fresh NULL slot. */
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
  nlog = 0;
  CU_ASSERT_EQUAL(lp_notify(st, sig, NULL, NULL, 7, &nlog), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 0), 0);
  CU_ASSERT_EQUAL(lp_notify(st, sig, NULL, NULL, 8, &nlog), 0);
  CU_ASSERT_EQUAL(lp_notify(st, LP_TP_SIGNAL + 2, NULL, NULL, 9, &nlog), 0); /* nobody has this one */
  CU_ASSERT_EQUAL_FATAL(nlog, 3);
  const char *nwho = "BAB";
  const uint64_t inst[] = {7, 7, 8};
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(logv[i].who, nwho[i]);
    CU_ASSERT_EQUAL(logv[i].stream, st);
    CU_ASSERT_EQUAL(logv[i].type, LP_TP_SIGNAL);
    CU_ASSERT_EQUAL(logv[i].instance, inst[i]);
    CU_ASSERT_PTR_EQUAL(logv[i].user_data, &nlog);
    CU_ASSERT_PTR_NULL(logv[i].site);
    CU_ASSERT_PTR_NULL(logv[i].slot_in);
    CU_ASSERT_EQUAL(logv[i].tid, my_tid());
  }
  CU_ASSERT_EQUAL(lp_subscriber_destroy(a, WAIT_NS), 0);
  drop(b);
}

/* Half a pair: a subscriber with only the end, or only the begin, gets just that half, alone or beside others. */
static void test_half_pairs(void) {
  const uint16_t end_only = LP_TP_SCOPE_END, begin_only = LP_TP_SCOPE_BEGIN;
  for (int alone = 1; alone >= 0; alone--) {
    lp_subscriber_t *e = recorder("E", LP_STREAM_LABELS, &end_only, 1);
    lp_subscriber_t *b = recorder("B", LP_STREAM_LABELS, &begin_only, 1);
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(e, 1), 0);
    if (!alone) CU_ASSERT_EQUAL(lp_subscriber_set_enabled(b, 1), 0);
    nlog = 0;
    { LP_SCOPE("half"); }
    LP_BEGIN("half manual");
    LP_END();
    /* alone: E's two ends; with B: B's begin then E's end, twice */
    CU_ASSERT_EQUAL_FATAL(nlog, alone ? 2 : 4);
    const char *who = alone ? "EE" : "BEBE";
    for (int i = 0; i < nlog; i++) {
      CU_ASSERT_EQUAL(logv[i].who, who[i]);
      CU_ASSERT_EQUAL(logv[i].type, who[i] == 'E' ? LP_TP_SCOPE_END : LP_TP_SCOPE_BEGIN);
      CU_ASSERT_EQUAL(logv[i].tid, my_tid());
      CU_ASSERT_PTR_NULL(logv[i].slot_in); /* E's slot: cleared at the begin it did not see */
    }
    CU_ASSERT_STRING_EQUAL(logv[nlog - 1].site->label, "half manual");
    if (!alone) CU_ASSERT_PTR_NOT_EQUAL(logv[0].slot_at, logv[1].slot_at);
    drop(e);
    if (!alone) drop(b);
    else CU_ASSERT_EQUAL(lp_subscriber_destroy(b, WAIT_NS), 0);
  }
}

static void test_subscriber_with_instants_only_sees_no_scopes(void) {
  const uint16_t t = LP_TP_INSTANT;
  lp_subscriber_t *a = recorder("A", LP_STREAM_LABELS, &t, 1);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
  CU_ASSERT_EQUAL(lp_notify_wanted(LP_STREAM_LABELS, LP_TP_INSTANT), 1);
  CU_ASSERT_EQUAL(lp_notify_wanted(LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN), 0);
  nlog = 0;
  labelled();
  CU_ASSERT_EQUAL_FATAL(nlog, 1);
  CU_ASSERT_EQUAL(logv[0].type, LP_TP_INSTANT);
  drop(a);
}

/* ---- lp_notify, LP_NOTIFY_SCOPE, lp_notify_wanted -------------------------------------- */

static void test_notify_and_notify_scope(void) {
  uint8_t st;
  uint16_t vt;
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.runtime", &st), 0);
  CU_ASSERT_EQUAL_FATAL(lp_tp_register("test.vendor", LP_TP_BEGIN(5), &vt), 0);
  const uint16_t types[] = {LP_TP_TASK_BEGIN, LP_TP_TASK_END, LP_TP_SIGNAL, vt, (uint16_t)(vt | 1)};
  lp_subscriber_t *a = recorder("A", st, types, 5);
  CU_ASSERT_EQUAL(lp_notify_wanted(st, LP_TP_TASK_BEGIN), 0);
  CU_ASSERT_EQUAL(lp_notify_wanted(st, vt), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
  CU_ASSERT_EQUAL(lp_notify_wanted(st, LP_TP_TASK_BEGIN), 1);
  CU_ASSERT_EQUAL(lp_notify_wanted(st, LP_TP_TASK_END), 1);
  CU_ASSERT_EQUAL(lp_notify_wanted(st, LP_TP_SIGNAL), 1);
  CU_ASSERT_EQUAL(lp_notify_wanted(st, vt), 1);
  CU_ASSERT_EQUAL(lp_notify_wanted(st, LP_TP_WAIT_BEGIN), 0);
  CU_ASSERT_EQUAL(lp_notify_wanted(st, (uint16_t)(vt + 2)), 0);
  CU_ASSERT_EQUAL(lp_notify_wanted((uint8_t)(st + 1), LP_TP_TASK_BEGIN), 0);
  lp_payload_t p = {"task", "t.c", 5, 0, NULL};
  const lp_event_t *ev;
  uint64_t inst;
  CU_ASSERT_EQUAL_FATAL(lp_event_make(&p, LP_TP_TASK_BEGIN, &ev, &inst), 0);
  int ud = 0;
  nlog = 0;
  CU_ASSERT_EQUAL(lp_notify(st, LP_TP_SIGNAL, NULL, ev, inst, &ud), 0);
  CU_ASSERT_EQUAL(lp_notify(st, LP_TP_WAIT_BEGIN, NULL, ev, inst, &ud), 0); /* nobody wants it */
  {
    LP_NOTIFY_SCOPE(st, LP_TP_TASK_BEGIN, NULL, ev, inst, &ud);
    LP_NOTIFY_SCOPE(st, vt, ev, ev, 77, NULL);
    CU_ASSERT_EQUAL(nlog, 3);
  }
  CU_ASSERT_EQUAL_FATAL(nlog, 5);
  CU_ASSERT_EQUAL(logv[0].type, LP_TP_SIGNAL);
  CU_ASSERT_PTR_EQUAL(logv[0].event, ev);
  CU_ASSERT_EQUAL(logv[0].instance, inst);
  CU_ASSERT_PTR_EQUAL(logv[0].user_data, &ud);
  CU_ASSERT_PTR_NULL(logv[0].site);
  CU_ASSERT_EQUAL(logv[1].type, LP_TP_TASK_BEGIN);
  CU_ASSERT_EQUAL(logv[2].type, vt);
  CU_ASSERT_EQUAL(logv[3].type, vt | 1); /* innermost ends first */
  CU_ASSERT_EQUAL(logv[3].instance, 77);
  CU_ASSERT_PTR_EQUAL(logv[3].slot_at, logv[2].slot_at);
  CU_ASSERT_EQUAL(logv[4].type, LP_TP_TASK_END);
  CU_ASSERT_PTR_EQUAL(logv[4].slot_at, logv[1].slot_at);
  CU_ASSERT_PTR_EQUAL(logv[4].user_data, &ud);
  CU_ASSERT_EQUAL((uintptr_t)logv[4].slot_in, 0x1000 + 2);
  /* Disabled between begin and end: the end still comes; begun after: nothing. */
  nlog = 0;
  {
    LP_NOTIFY_SCOPE(st, LP_TP_TASK_BEGIN, NULL, ev, inst, NULL);
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 0), 0);
    CU_ASSERT_EQUAL(lp_notify_wanted(st, LP_TP_TASK_BEGIN), 0);
    LP_NOTIFY_SCOPE(st, LP_TP_TASK_BEGIN, NULL, ev, inst, NULL);
  }
  CU_ASSERT_EQUAL(nlog, 2);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(a, WAIT_NS), 0);
}

/* Single notifications to two subscribers, through the macro, the function and a pointer to it. */
static void test_notify_reaches_each_subscriber_with_a_fresh_slot(void) {
  uint8_t st;
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.single", &st), 0);
  const uint16_t types[] = {LP_TP_SIGNAL, LP_TP_WAIT_END};
  lp_subscriber_t *a = recorder("A", st, types, 2), *b = recorder("B", st, types, 1);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(b, 1), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0); /* B, then A */
  lp_payload_t p1 = {"one", "n.c", 1, 0, NULL}, p2 = {"two", "n.c", 2, 0, NULL};
  const lp_event_t *e1, *e2;
  CU_ASSERT_EQUAL_FATAL(lp_event_make(&p1, 0, &e1, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(lp_event_make(&p2, 0, &e2, NULL), 0);
  int (*fn)(uint8_t, uint16_t, const lp_event_t *, const lp_event_t *, uint64_t, const void *) = lp_notify;
  nlog = 0;
  CU_ASSERT_EQUAL(lp_notify(st, LP_TP_SIGNAL, e1, e2, 11, &nlog), 0);
  CU_ASSERT_EQUAL((lp_notify)(st, LP_TP_SIGNAL, e2, e1, 12, NULL), 0);
  CU_ASSERT_EQUAL(fn(st, LP_TP_WAIT_END, NULL, e1, 13, e2), 0); /* A only */
  CU_ASSERT_EQUAL(lp_notify(0, LP_TP_SIGNAL, NULL, NULL, 0, NULL), -EINVAL);
  CU_ASSERT_EQUAL((lp_notify)(0, LP_TP_SIGNAL, NULL, NULL, 0, NULL), -EINVAL);
  CU_ASSERT_EQUAL_FATAL(nlog, 5);
  const char *who = "BABAA";
  const uint64_t inst[] = {11, 11, 12, 12, 13};
  for (int i = 0; i < 5; i++) {
    CU_ASSERT_EQUAL(logv[i].who, who[i]);
    CU_ASSERT_EQUAL(logv[i].stream, st);
    CU_ASSERT_EQUAL(logv[i].type, i < 4 ? LP_TP_SIGNAL : LP_TP_WAIT_END);
    CU_ASSERT_EQUAL(logv[i].instance, inst[i]);
    CU_ASSERT_EQUAL(logv[i].tid, my_tid());
    CU_ASSERT_PTR_NULL(logv[i].site);
    CU_ASSERT_PTR_NULL(logv[i].slot_in); /* rec fills its slot: a fresh one each time */
  }
  CU_ASSERT_PTR_EQUAL(logv[0].parent, e1);
  CU_ASSERT_PTR_EQUAL(logv[1].event, e2);
  CU_ASSERT_PTR_EQUAL(logv[1].user_data, &nlog);
  CU_ASSERT_PTR_EQUAL(logv[2].parent, e2);
  CU_ASSERT_PTR_EQUAL(logv[3].event, e1);
  CU_ASSERT_PTR_NULL(logv[3].user_data);
  CU_ASSERT_PTR_NULL(logv[4].parent);
  CU_ASSERT_PTR_EQUAL(logv[4].user_data, e2);
  /* A label's notification between them keeps its own fields. */
  nlog = 0;
  lp_subscriber_t *l = recorder("L", LP_STREAM_LABELS, scope_types, 2);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(l, 1), 0);
  {
    LP_SCOPE("between");
    CU_ASSERT_EQUAL(lp_notify(st, LP_TP_SIGNAL, e1, e1, 14, NULL), 0);
  }
  CU_ASSERT_EQUAL_FATAL(nlog, 4);
  CU_ASSERT_EQUAL(logv[3].who, 'L');
  CU_ASSERT_EQUAL(logv[3].stream, LP_STREAM_LABELS);
  CU_ASSERT_EQUAL(logv[3].type, LP_TP_SCOPE_END);
  CU_ASSERT_PTR_NULL(logv[3].parent);
  CU_ASSERT_PTR_NULL(logv[3].event);
  CU_ASSERT_EQUAL(logv[3].instance, 0);
  CU_ASSERT_STRING_EQUAL(logv[3].site->label, "between");
  drop(l);
  drop(a);
  drop(b);
}

/* ---- recursion ------------------------------------------------------------------------------ */

static int reentered, cb_calls;
static int in_cb;
static uint8_t rec_stream;

static void recursing(const lp_notification_t *n, void *data, void **slot) {
  (void)data;
  (void)slot;
  if (in_cb) reentered++;
  in_cb = 1;
  cb_calls++;
  if (n->type == LP_TP_SCOPE_BEGIN) {
    LP_SCOPE("inside callback");
    lp_notify(rec_stream, LP_TP_SIGNAL, NULL, NULL, 0, NULL);
    CU_ASSERT_EQUAL(lp_notify_wanted(rec_stream, LP_TP_SIGNAL), 0); /* nothing reaches anyone from here */
    CU_ASSERT_EQUAL(lp__profile_sample_now(), 0);
  }
  in_cb = 0;
}

static void test_callbacks_do_not_recurse_and_their_labels_are_sampled(void) {
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.recursion", &rec_stream), 0);
  lp_subscriber_t *s;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, recursing), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_END, recursing), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, rec_stream, LP_TP_SIGNAL, recursing), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 1), 0);
  lp_profile_opts_t o = {.hz = 1000};
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(&o), 0);
  reentered = cb_calls = 0;
  {
    LP_SCOPE("program");
  }
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  CU_ASSERT_EQUAL(reentered, 0);
  CU_ASSERT_EQUAL(cb_calls, 2); /* begin and end of "program" only */
  const lp_node_t *prog = lp_node_find(lp_profile_root(p), "program");
  CU_ASSERT_PTR_NOT_NULL_FATAL(prog);
  const lp_node_t *inside = lp_node_find(prog, "inside callback");
  CU_ASSERT_PTR_NOT_NULL(inside);
  CU_ASSERT_EQUAL(lp_node_samples(inside), 1);
  lp_profile_free(p);
  drop(s);
}

/* ---- longjmp, depth ---------------------------------------------------------------------- */

static jmp_buf jb;
static volatile int jump_now = 1;
static void jumps_out(int depth) {
  LP_SCOPE("skipped");
  if (depth)
    jumps_out(depth - 1);
  else if (jump_now)
    longjmp(jb, 1);
}

static void test_skipped_scopes_end_when_the_stack_heals(void) {
  lp_subscriber_t *a = recorder("A", LP_STREAM_LABELS, scope_types, 2);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
  nlog = 0;
  {
    LP_SCOPE("catcher");
    if (!setjmp(jb)) jumps_out(2);
  }
  /* catcher, 3 skipped: 4 begins; the 3 skipped end (innermost first) before catcher. */
  CU_ASSERT_EQUAL_FATAL(nlog, 8);
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(logv[i].type, LP_TP_SCOPE_BEGIN);
  for (int i = 4; i < 8; i++) {
    CU_ASSERT_EQUAL(logv[i].type, LP_TP_SCOPE_END);
    CU_ASSERT_PTR_EQUAL(logv[i].slot_at, logv[7 - i].slot_at);
  }
  CU_ASSERT_STRING_EQUAL(logv[7].site->label, "catcher");
  drop(a);
}

static int deep_calls;
static void count(const lp_notification_t *n, void *d, void **slot) {
  (void)n;
  (void)d;
  (void)slot;
  deep_calls++;
}

static void nest(int n) {
  LP_SCOPE("nest");
  if (n > 1) nest(n - 1);
}

static void test_deep_scopes_pair_or_never_begin(void) {
  lp_subscriber_t *s;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, count), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_END, count), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 1), 0);
  deep_calls = 0;
  nest(100); /* 64 frames notify; deeper ones send nothing */
  CU_ASSERT_EQUAL(deep_calls, 2 * LP_STACK_CAPACITY);
  lp__thread_t *t = lp__thread_current();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(LP_IMPL_LOAD_RELAXED(t->hot.word) & LP_IMPL_DEPTH_MASK, 0);
  drop(s);
}

static uint8_t nest_stream;
static void nest_notify(int n) {
  LP_NOTIFY_SCOPE(nest_stream, LP_TP_REGION_BEGIN, NULL, NULL, (uint64_t)n, NULL);
  if (n > 1) nest_notify(n - 1);
}

static void test_notify_scopes_nested_past_64_pair_or_never_begin(void) {
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.nest", &nest_stream), 0);
  lp_subscriber_t *s;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, nest_stream, LP_TP_REGION_BEGIN, count), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, nest_stream, LP_TP_REGION_END, count), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 1), 0);
  deep_calls = 0;
  nest_notify(70);
  CU_ASSERT_EQUAL(deep_calls, 2 * 64);
  deep_calls = 0;
  nest_notify(3); /* every pin was given back */
  CU_ASSERT_EQUAL(deep_calls, 6);
  drop(s);
}

/* ---- pairing under races ------------------------------------------------------------------ */

typedef struct pair_thread {
  uint64_t tid;
  uint64_t begins, ends, errors, seq;
  long iters;
  uintptr_t stack[8];
  int depth;
  /* For the toggler: how far this thread has come (its iterations begun, its begins notified). */
  atomic_long progress;
  atomic_ullong seen;
} pair_thread_t;

static __thread pair_thread_t *pt;

static void pair_begin(const lp_notification_t *n, void *data, void **slot) {
  (void)data;
  if (!pt || n->tid != pt->tid || *slot != NULL || pt->depth >= 8) {
    if (pt) pt->errors++;
    return;
  }
  pt->begins++;
  atomic_store_explicit(&pt->seen, pt->begins, memory_order_relaxed);
  uintptr_t token = (uintptr_t)++pt->seq << 4 | 8;
  *slot = (void *)token;
  pt->stack[pt->depth++] = token;
}

static void pair_end(const lp_notification_t *n, void *data, void **slot) {
  (void)data;
  if (!pt) return;
  /* No end without a begin, on the same thread, with the slot its begin filled. */
  if (n->tid != pt->tid || pt->depth == 0 || (uintptr_t)*slot != pt->stack[pt->depth - 1]) {
    pt->errors++;
    return;
  }
  pt->depth--;
  pt->ends++;
}

static atomic_int pair_stop;
static atomic_long toggles;
static long pair_iters;

static void *pair_worker(void *arg) {
  pair_thread_t *me = arg;
  me->tid = my_tid();
  pt = me;
  /*
   * The toggler holds each state until a worker has made progress in it, but
   * on a loaded machine a worker may run while the other has the turns, or
   * the toggler may get few: then it runs on, bounded, until it has seen
   * both states (1000 scopes notified, one not) and 20 toggles.
   */
  long i, scopes = 0;
  for (i = 0; i < pair_iters || ((me->begins < 1000 || me->begins == (uint64_t)scopes || atomic_load(&toggles) < 20) &&
                                 i < 50 * pair_iters);
       i++) {
    atomic_store_explicit(&me->progress, i + 1, memory_order_relaxed);
    LP_SCOPE("race outer");
    scopes++;
    if ((i & 7) == 0) {
      LP_SCOPE("race inner");
      scopes++;
    }
  }
  me->iters = i;
  pt = NULL;
  return NULL;
}

static pair_thread_t *pair_w; /* the two workers */

static uint64_t pair_seen(void) {
  return atomic_load_explicit(&pair_w[0].seen, memory_order_relaxed) +
         atomic_load_explicit(&pair_w[1].seen, memory_order_relaxed);
}
static long pair_progress(void) {
  return atomic_load_explicit(&pair_w[0].progress, memory_order_relaxed) +
         atomic_load_explicit(&pair_w[1].progress, memory_order_relaxed);
}

/*
 * Turns the subscriber on and off as fast as the workers let it: each state
 * is held until a worker has made progress in it (a begin notified; an
 * iteration begun after the scope it was in), or the workers are done.
 * Toggling freely, the states were seen as the scheduler happened to
 * interleave the threads: on one CPU the toggler, building the enabled
 * snapshot, was mostly preempted while the subscriber was still off: under
 * ASan two workers could run their 4.5 million scopes each (the bound)
 * without a single one notified.
 */
static void *toggler(void *arg) {
  lp_subscriber_t *s = arg;
  long n = 0;
  while (!atomic_load(&pair_stop)) {
    if (lp_subscriber_set_enabled(s, (int)(++n & 1)) != 0) break;
    atomic_store(&toggles, n);
    /* Read once the new state is published: what comes later was made in it. */
    uint64_t seen = pair_seen();
    long progress = pair_progress();
    /* Polled, then yielding: on a CPU of its own a worker comes within microseconds, on a shared one it needs the CPU. */
    for (long k = 0; (n & 1 ? pair_seen() == seen : pair_progress() < progress + 4) && !atomic_load(&pair_stop); k++)
      if (k >= 1000) sched_yield();
  }
  lp_subscriber_set_enabled(s, 0);
  return (void *)n;
}

static void test_pairing_under_races(void) {
  /* At least 10 million scopes between the two threads natively. */
  pair_iters = 4500000 / (LP_TEST_SANITIZED ? 50 : 1) / (long)lp_test_slow();
  lp_subscriber_t *s;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, pair_begin), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_END, pair_end), 0);
  pair_thread_t w[2];
  memset(w, 0, sizeof w);
  pair_w = w;
  pthread_t th[2], tg;
  atomic_store(&pair_stop, 0);
  atomic_store(&toggles, 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&tg, NULL, toggler, s), 0);
  while (atomic_load(&toggles) < 1) sched_yield(); /* the toggling has started */
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, pair_worker, &w[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  atomic_store(&pair_stop, 1);
  void *toggled;
  pthread_join(tg, &toggled);
  uint64_t begins = 0;
  long scopes = 0;
  for (int i = 0; i < 2; i++) {
    scopes += w[i].iters + (w[i].iters + 7) / 8;
    CU_ASSERT_EQUAL(w[i].errors, 0);
    CU_ASSERT_EQUAL(w[i].begins, w[i].ends);
    CU_ASSERT_EQUAL(w[i].depth, 0);
    begins += w[i].begins;
  }
  /* The subscriber was on part of the time, off the rest. */
  CU_ASSERT((long)toggled > 10);
  CU_ASSERT(begins > 0);
  CU_ASSERT(begins < (uint64_t)scopes);
  CU_ASSERT(scopes >= 2 * pair_iters * 9 / 8);
  printf("\n    %ld scopes, %ld toggles, %llu begins and as many ends ", scopes, (long)toggled,
         (unsigned long long)begins);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(s, WAIT_NS), 0);
}

/* ---- destroy ---------------------------------------------------------------------------------- */

typedef struct guarded {
  atomic_int inside;
  atomic_long calls;
} guarded_t;

static void guarded_cb(const lp_notification_t *n, void *data, void **slot) {
  (void)n;
  (void)slot;
  guarded_t *g = data; /* freed right after destroy: a late call is a use after free */
  atomic_fetch_add(&g->inside, 1);
  atomic_fetch_add(&g->calls, 1);
  for (volatile int i = 0; i < 50; i++) {
  }
  atomic_fetch_sub(&g->inside, 1);
}

static atomic_int destroy_stop;
static void *scoper(void *arg) {
  (void)arg;
  while (!atomic_load(&destroy_stop)) {
    LP_SCOPE("in flight");
    lp_notify(LP_STREAM_LABELS, LP_TP_SIGNAL, NULL, NULL, 0, NULL);
  }
  return NULL;
}

static void test_destroy_waits_for_the_last_callback(void) {
  int rounds = LP_TEST_SANITIZED ? 20 : 200;
  pthread_t th[2];
  atomic_store(&destroy_stop, 0);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, scoper, NULL), 0);
  long total = 0;
  for (int r = 0; r < rounds; r++) {
    guarded_t *g = calloc(1, sizeof *g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    lp_subscriber_t *s;
    CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(g, &s), 0);
    CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, guarded_cb), 0);
    CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_END, guarded_cb), 0);
    CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SIGNAL, guarded_cb), 0);
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 1), 0);
    CU_ASSERT_EQUAL(lp_subscriber_destroy(s, WAIT_NS), -EBUSY);
    while (atomic_load(&g->calls) < 100) sched_yield();
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 0), 0);
    CU_ASSERT_EQUAL(lp_subscriber_destroy(s, WAIT_NS), 0);
    CU_ASSERT_EQUAL(atomic_load(&g->inside), 0);
    total += atomic_load(&g->calls);
    free(g);
  }
  atomic_store(&destroy_stop, 1);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  CU_ASSERT(total >= 100L * rounds);
}

static int deadlk_rc = 1;
static lp_subscriber_t *self_sub;
static void destroys_itself(const lp_notification_t *n, void *data, void **slot) {
  (void)n;
  (void)data;
  (void)slot;
  deadlk_rc = lp_subscriber_destroy(self_sub, 0);
}

static void test_destroy_from_a_callback_is_edeadlk(void) {
  lp_subscriber_t *first;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &first), 0);
  self_sub = first;
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(first, LP_STREAM_LABELS, LP_TP_INSTANT, destroys_itself), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(first, 1), 0);
  LP_INSTANT("destroy me");
  CU_ASSERT_EQUAL(deadlk_rc, -EBUSY); /* still enabled: busy comes first */
  lp_subscriber_t *other;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &other), 0);
  self_sub = other; /* disabled, but destroyed from inside a callback */
  LP_INSTANT("destroy the other");
  CU_ASSERT_EQUAL(deadlk_rc, -EDEADLK);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(other, 0), 0);
  drop(first);
}

static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int hold_state; /* 1: the scope is open; 2: may end */
static int hold_ends;

static void hold_end(const lp_notification_t *n, void *d, void **slot) {
  (void)d;
  (void)slot;
  if (n->type == LP_TP_SCOPE_END) hold_ends++;
}

static void *holder(void *arg) {
  (void)arg;
  LP_BEGIN("held open");
  pthread_mutex_lock(&hold_mu);
  hold_state = 1;
  pthread_cond_broadcast(&hold_cv);
  while (hold_state != 2) pthread_cond_wait(&hold_cv, &hold_mu);
  pthread_mutex_unlock(&hold_mu);
  LP_END();
  return NULL;
}

static void test_destroy_times_out_while_a_scope_is_open(void) {
  lp_subscriber_t *s;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, hold_end), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_END, hold_end), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 1), 0);
  hold_state = 0;
  hold_ends = 0;
  pthread_t th;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, holder, NULL), 0);
  pthread_mutex_lock(&hold_mu);
  while (hold_state != 1) pthread_cond_wait(&hold_cv, &hold_mu);
  pthread_mutex_unlock(&hold_mu);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 0), 0);
  uint64_t t0 = lp__mono_ns();
  CU_ASSERT_EQUAL(lp_subscriber_destroy(s, 20000000), -ETIMEDOUT);
  CU_ASSERT(lp__mono_ns() - t0 >= 20000000);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(s, 0), -ETIMEDOUT); /* still valid: call again */
  pthread_mutex_lock(&hold_mu);
  hold_state = 2;
  pthread_cond_broadcast(&hold_cv);
  pthread_mutex_unlock(&hold_mu);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(s, WAIT_NS), 0); /* returns once the end has run */
  CU_ASSERT_EQUAL(hold_ends, 1);
  pthread_join(th, NULL);
}

static void test_enable_limit(void) {
  lp_subscriber_t *s[17];
  for (int i = 0; i < 17; i++) {
    CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s[i]), 0);
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s[i], 1), i < 16 ? 0 : -ENOSPC);
  }
  for (int i = 0; i < 17; i++) {
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s[i], 0), 0);
    CU_ASSERT_EQUAL(lp_subscriber_destroy(s[i], WAIT_NS), 0);
  }
}

/* ---- fork ---------------------------------------------------------------------------------- */

static void test_fork_child_keeps_subscribers(void) {
  lp_subscriber_t *s;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, count), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_END, count), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 1), 0);
  deep_calls = 0;
  pid_t pid;
  {
    LP_SCOPE("around fork");
    pid = fork();
    if (pid == 0) {
      {
        LP_SCOPE("in child");
      }
      _exit(deep_calls == 3 ? 0 : 10 + deep_calls);
    }
  }
  int status = 0;
  CU_ASSERT_EQUAL_FATAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFEXITED(status));
  CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
  CU_ASSERT_EQUAL(deep_calls, 2);
  drop(s);
}

/*
 * An instant reaches subscribers once while the live trace_marker is open,
 * as without it. The marker sends every recorded event to the timeline's
 * slow path, whose instant went back through the subscribers' path: the
 * subscribers saw it twice. In a child: the marker stays open for the
 * process.
 */
static void test_instant_once_with_trace_marker(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/marker", lp_test_tmpdir("subs"));
  const uint16_t t = LP_TP_INSTANT;
  lp_subscriber_t *a = recorder("A", LP_STREAM_LABELS, &t, 1);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    char why[256];
    if (lp__marker_open(path, why, sizeof why) != 0) _exit(100);
    if (lp_trace_start(NULL) != 0) _exit(101);
    nlog = 0;
    {
      LP_SCOPE("marked");
      for (int i = 0; i < 3; i++) LP_INSTANT("marked instant");
    }
    _exit(nlog);
  }
  int status = 0;
  CU_ASSERT_EQUAL_FATAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFEXITED(status));
  CU_ASSERT_EQUAL(WEXITSTATUS(status), 3);
  drop(a);
}

/* ---- the timeline records what it recorded before, while subscribers listen ---------------- */

static void test_timeline_keeps_its_levels_while_subscribers_listen(void) {
  lp_subscriber_t *a = recorder("A", LP_STREAM_LABELS, scope_types, 3);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
  lp_trace_opts_t o = {.levels = LP_LEVEL_RUNTIME | LP_LEVEL_DEBUG};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  nlog = 0;
  {
    LP_SCOPE_L(LP_LEVEL_RUNTIME, "runtime scope");
    LP_SCOPE_L(LP_LEVEL_OPERATOR, "operator scope");
    LP_SCOPE_L(LP_LEVEL_DEBUG, "debug scope");
    LP_INSTANT_L(LP_LEVEL_RUNTIME, "runtime instant");
    LP_INSTANT_L(LP_LEVEL_OPERATOR, "operator instant");
    LP_COUNTER_L(LP_LEVEL_OPERATOR, "operator counter", 1);
    LP_COUNTER_L(LP_LEVEL_RUNTIME, "runtime counter", 2);
  }
  LP_BEGIN_L(LP_LEVEL_DEBUG, "debug pair");
  LP_END();
  LP_BEGIN_L(LP_LEVEL_REQUEST, "request pair");
  LP_END();
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  /* Subscribers saw every label, whatever its level: 5 pairs and 2 instants. */
  CU_ASSERT_EQUAL(nlog, 12);
  drop(a);
  {
    LP_SCOPE("after the stop"); /* nothing records now, and nobody listens */
  }
  char path[256];
  snprintf(path, sizeof path, "%s/trace.json", lp_test_tmpdir("subs-trace"));
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(path, "subs"), 0);
  json_t *root = trace_load(path);
  unlink(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "runtime scope"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "debug scope"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "debug pair"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "operator scope"), 0);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "request pair"), 0);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "after the stop"), 0);
  CU_ASSERT_EQUAL(trace_count(ev, "i", "runtime instant"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "i", "operator instant"), 0);
  CU_ASSERT_EQUAL(trace_count(ev, "C", "runtime counter"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "C", "operator counter"), 0);
  json_decref(root);
}

/* ---- the 256th stream (last: it fills the table) ------------------------------------------- */

static void test_stream_table_fills_at_255(void) {
  char name[32];
  int rc = 0, n = 0;
  uint8_t id = 0, last = 0;
  for (int i = 0; i < 300 && rc == 0; i++) {
    snprintf(name, sizeof name, "fill.%d", i);
    rc = lp_stream_register(name, &id);
    if (rc == 0) {
      n++;
      last = id;
    }
  }
  CU_ASSERT_EQUAL(rc, -ENOSPC);
  CU_ASSERT_EQUAL(last, 255);
  CU_ASSERT(n < 255);
  CU_ASSERT_EQUAL(lp_stream_register("fill.0", &id), 0); /* known names still resolve */
}

/*
 * Payloads that differ in one field only (line, column or code pointer),
 * from the same string buffers, are different events, more of them than
 * the per-thread cache has places: a cache hit is compared by content, and
 * so is a hash bucket's chain. A buffer whose content changed is a new
 * payload. The test above has two payloads and a third differing in its
 * line, which a comparison ignoring that field misses unless they collide.
 */
#define DIFFER_N 96
static void test_events_differ_in_any_field(void) {
  char name[32] = "differ", file[16] = "d.c";
  static const lp_event_t *ev[3][DIFFER_N];
  static char code[DIFFER_N];
  for (int pass = 0; pass < 2; pass++)
    for (int f = 0; f < 3; f++)
      for (int i = 0; i < DIFFER_N; i++) {
        lp_payload_t p = {name, file, f == 0 ? 100u + (uint32_t)i : 1u, f == 1 ? 100u + (uint32_t)i : 1u,
                          f == 2 ? (const void *)&code[i] : NULL};
        const lp_event_t *e = NULL;
        uint64_t inst = 0;
        CU_ASSERT_EQUAL_FATAL(lp_event_make(&p, 0, &e, &inst), 0);
        CU_ASSERT_EQUAL(inst, (uint64_t)pass + 1);
        if (pass == 0) {
          ev[f][i] = e;
          const lp_payload_t *q = lp_event_payload(e);
          CU_ASSERT_EQUAL(q->line, p.line);
          CU_ASSERT_EQUAL(q->column, p.column);
          CU_ASSERT_PTR_EQUAL(q->code_ptr, p.code_ptr);
        } else {
          CU_ASSERT_PTR_EQUAL(e, ev[f][i]);
        }
      }
  int same = 0;
  for (int k = 0; k < 3 * DIFFER_N; k++)
    for (int j = 0; j < k; j++) same += ev[k / DIFFER_N][k % DIFFER_N] == ev[j / DIFFER_N][j % DIFFER_N];
  CU_ASSERT_EQUAL(same, 0);
  /* The same buffers with another name in them. */
  strcpy(name, "differ.renamed");
  lp_payload_t p = {name, file, 100, 1, NULL};
  const lp_event_t *e = NULL;
  uint64_t inst = 0;
  CU_ASSERT_EQUAL_FATAL(lp_event_make(&p, 0, &e, &inst), 0);
  CU_ASSERT_PTR_NOT_EQUAL(e, ev[0][0]);
  CU_ASSERT_EQUAL(inst, 1);
  CU_ASSERT_STRING_EQUAL(lp_event_payload(e)->name, "differ.renamed");
}

/*
 * Pairing on the ends the library delivers itself: a recorded scope or pair
 * (the timeline records every level) and scopes a longjmp skipped end
 * through lp__subs_end, not through the direct ends the tests above reach.
 * A saw each begin; before the end A is disabled and B enabled: the end goes
 * to A alone, with the slot A's begin filled, and B gets no end.
 */
static lp_subscriber_t *swap_a, *swap_b;
static jmp_buf swap_jb;

static void swap_subscribers(void) {
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(swap_b, 1), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(swap_a, 0), 0);
}

static void swaps_then_jumps(void) {
  LP_SCOPE("skipped");
  swap_subscribers();
  longjmp(swap_jb, 1);
}

static void catches_the_jump(void) {
  LP_SCOPE("catcher");
  if (!setjmp(swap_jb)) swaps_then_jumps();
}

static void test_pairing_across_disable_on_recorded_and_healed_ends(void) {
  for (int round = 0; round < 3; round++) {
    swap_a = recorder("A", LP_STREAM_LABELS, scope_types, 2);
    swap_b = recorder("B", LP_STREAM_LABELS, scope_types, 2);
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(swap_a, 1), 0);
    lp_trace_opts_t o = {0};
    o.levels = LP_LEVEL_ALL;
    nlog = 0;
    if (round == 0) {
      CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
      {
        LP_SCOPE("recorded");
        swap_subscribers();
      }
      CU_ASSERT_EQUAL(lp_trace_stop(), 0);
    } else if (round == 1) {
      CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
      LP_BEGIN("recorded pair");
      swap_subscribers();
      LP_END();
      CU_ASSERT_EQUAL(lp_trace_stop(), 0);
    } else {
      catches_the_jump();
    }
    /* The catcher's scope ends at the end of the block above, after the heal of the skipped one. */
    int n = round < 2 ? 2 : 4;
    CU_ASSERT_EQUAL_FATAL(nlog, n);
    for (int i = 0; i < n; i++) {
      CU_ASSERT_EQUAL(logv[i].who, 'A');
      CU_ASSERT_EQUAL(logv[i].type, i < n / 2 ? LP_TP_SCOPE_BEGIN : LP_TP_SCOPE_END);
      CU_ASSERT_PTR_EQUAL(logv[i].slot_at, logv[n - 1 - i].slot_at);
      CU_ASSERT_EQUAL(logv[i].tid, my_tid());
    }
    CU_ASSERT_EQUAL((uintptr_t)logv[n - 1].slot_in, 0x1000 + 1);
    if (round == 2) {
      CU_ASSERT_STRING_EQUAL(logv[2].site->label, "skipped");
      CU_ASSERT_EQUAL((uintptr_t)logv[2].slot_in, 0x1000 + 2);
    }
    CU_ASSERT_EQUAL(lp_subscriber_destroy(swap_a, WAIT_NS), 0);
    drop(swap_b);
  }
  lp__thread_t *t = lp__thread_current();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(LP_IMPL_LOAD_RELAXED(t->hot.word) & LP_IMPL_DEPTH_MASK, 0);
}

/*
 * LP_NOTIFY_SCOPE with several subscribers, the first enabled one without a
 * callback on the stream (so that a subscriber's place among the enabled
 * ones differs from its place among this pair's callers): ends in reverse
 * order, each with the slot its own begin filled, and NULL slots at every
 * begin, also when the scope's per-thread pin is used a second time.
 */
static void test_notify_scope_with_several_subscribers_pairs_in_reverse(void) {
  uint8_t st, other;
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.nscope.several", &st), 0);
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.nscope.other", &other), 0);
  const uint16_t types[] = {LP_TP_REGION_BEGIN, LP_TP_REGION_END}, sig = LP_TP_SIGNAL;
  lp_subscriber_t *x = recorder("X", other, &sig, 1);
  lp_subscriber_t *a = recorder("A", st, types, 2), *b = recorder("B", st, types, 2);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(x, 1), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(b, 1), 0);
  for (int round = 0; round < 2; round++) {
    nlog = 0;
    {
      LP_NOTIFY_SCOPE(st, LP_TP_REGION_BEGIN, NULL, NULL, (uint64_t)round, NULL);
      CU_ASSERT_EQUAL(nlog, 2);
    }
    CU_ASSERT_EQUAL_FATAL(nlog, 4);
    const char *who = "ABBA";
    for (int i = 0; i < 4; i++) {
      CU_ASSERT_EQUAL(logv[i].who, who[i]);
      CU_ASSERT_EQUAL(logv[i].stream, st);
      CU_ASSERT_EQUAL(logv[i].type, i < 2 ? LP_TP_REGION_BEGIN : LP_TP_REGION_END);
      CU_ASSERT_EQUAL(logv[i].instance, (uint64_t)round);
    }
    CU_ASSERT_PTR_NULL(logv[0].slot_in);
    CU_ASSERT_PTR_NULL(logv[1].slot_in);
    CU_ASSERT_PTR_NOT_EQUAL(logv[0].slot_at, logv[1].slot_at);
    CU_ASSERT_PTR_EQUAL(logv[2].slot_at, logv[1].slot_at);
    CU_ASSERT_PTR_EQUAL(logv[3].slot_at, logv[0].slot_at);
    CU_ASSERT_EQUAL((uintptr_t)logv[2].slot_in, 0x1000 + 2);
    CU_ASSERT_EQUAL((uintptr_t)logv[3].slot_in, 0x1000 + 1);
  }
  drop(a);
  drop(b);
  drop(x);
}

/*
 * Disabling a subscriber in the middle keeps the others in the order they
 * were enabled, at the begin and in reverse at the end (a disable that moved
 * the last one into the gap passes with two subscribers, not with three).
 */
static void test_order_after_a_disable_in_the_middle(void) {
  uint8_t st;
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.order", &st), 0);
  const uint16_t sig = LP_TP_SIGNAL;
  lp_subscriber_t *s[3];
  const char *names = "ABC";
  for (int i = 0; i < 3; i++) {
    s[i] = recorder(&names[i], LP_STREAM_LABELS, scope_types, 2);
    CU_ASSERT_EQUAL(lp_subscriber_set_callback(s[i], st, sig, rec), 0);
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s[i], 1), 0);
  }
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s[0], 0), 0);
  nlog = 0;
  {
    LP_SCOPE("ordered");
    CU_ASSERT_EQUAL(lp_notify(st, LP_TP_SIGNAL, NULL, NULL, 0, NULL), 0);
  }
  CU_ASSERT_EQUAL_FATAL(nlog, 6);
  const char *who = "BCBCCB";
  for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(logv[i].who, who[i]);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(s[0], WAIT_NS), 0);
  drop(s[1]);
  drop(s[2]);
}

/*
 * lp_notify's callback gets a fresh NULL slot every time, also when one
 * subscriber is called inline several times in a row (rec fills the slot
 * it is given, so a slot that is not cleared comes back filled).
 */
static void test_notify_gives_a_fresh_slot_every_time(void) {
  uint8_t st;
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.fresh", &st), 0);
  const uint16_t sig = LP_TP_SIGNAL;
  lp_subscriber_t *a = recorder("A", st, &sig, 1);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(a, 1), 0);
  nlog = 0;
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(lp_notify(st, LP_TP_SIGNAL, NULL, NULL, (uint64_t)i, NULL), 0);
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL((lp_notify)(st, LP_TP_SIGNAL, NULL, NULL, (uint64_t)i, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(nlog, 6);
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_PTR_NULL(logv[i].slot_in);
    CU_ASSERT_EQUAL(logv[i].instance, (uint64_t)(i % 3));
  }
  drop(a);
}

/*
 * Callbacks run on the thread that made the notification, never on the
 * collector thread: a subscriber listens to every label while a profile
 * with its own collector thread runs, until the collector has woken a few
 * times.
 */
static atomic_long on_other_thread, on_this_thread;
static uint64_t this_tid;

static void where(const lp_notification_t *n, void *data, void **slot) {
  (void)data;
  (void)slot;
  if (n->tid == this_tid && my_tid() == this_tid)
    atomic_fetch_add(&on_this_thread, 1);
  else
    atomic_fetch_add(&on_other_thread, 1);
}

static void test_callbacks_never_run_on_the_collector_thread(void) {
  this_tid = my_tid();
  atomic_store(&on_other_thread, 0);
  atomic_store(&on_this_thread, 0);
  lp_subscriber_t *s;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s), 0);
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, scope_types[i], where), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 1), 0);
  uint64_t ticks = 0;
  long scopes = 0;
  for (int tries = 0; tries < 200 && ticks < 5; tries++) {
    lp_profile_opts_t o = {.hz = 1000};
    CU_ASSERT_EQUAL_FATAL(lp_profile_start(&o), 0);
    uint64_t t0 = lp__mono_ns();
    while (lp__mono_ns() - t0 < 5000000) {
      LP_SCOPE("watched");
      scopes++;
    }
    lp_profile_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
    lp_profile_stats_t stats;
    CU_ASSERT_EQUAL(lp_profile_get_stats(p, &stats), 0);
    ticks += stats.ticks;
    lp_profile_free(p);
  }
  drop(s);
  CU_ASSERT(ticks >= 5);
  CU_ASSERT_EQUAL(atomic_load(&on_other_thread), 0);
  CU_ASSERT_EQUAL(atomic_load(&on_this_thread), 2 * scopes);
}

/*
 * No recursion on every path: the test above has one subscriber, whose
 * labels run inline, in the program's own code. Here the same callbacks,
 * also at the ends, with one and two subscribers and with and without a
 * timeline recording, so that begins and ends, lp_notify (the macro and the
 * function) and LP_NOTIFY_SCOPE all go through the library's own paths.
 * A callback makes labels and notifications of every kind; none reaches a
 * subscriber. (A broken guard recurses at most two deep here.)
 */
static int rdepth, rreentered, rcalls;
static uint8_t rl_stream;

static void recursing_everywhere(const lp_notification_t *n, void *data, void **slot) {
  (void)n;
  (void)data;
  (void)slot;
  if (rdepth) rreentered++;
  rdepth++;
  rcalls++;
  if (rdepth < 3) {
    LP_SCOPE("inside callback");
    LP_BEGIN("inside pair");
    LP_END();
    LP_INSTANT("inside instant");
    lp_notify(rl_stream, LP_TP_SIGNAL, NULL, NULL, 0, NULL);
    (lp_notify)(rl_stream, LP_TP_SIGNAL, NULL, NULL, 0, NULL);
    LP_NOTIFY_SCOPE(rl_stream, LP_TP_REGION_BEGIN, NULL, NULL, 0, NULL);
  }
  rdepth--;
}

static void recursion_program(void) {
  {
    LP_SCOPE("program");
  }
  LP_BEGIN("program pair");
  LP_END();
  LP_INSTANT("program instant");
  lp_notify(rl_stream, LP_TP_SIGNAL, NULL, NULL, 0, NULL);
  (lp_notify)(rl_stream, LP_TP_SIGNAL, NULL, NULL, 0, NULL);
  {
    LP_NOTIFY_SCOPE(rl_stream, LP_TP_REGION_BEGIN, NULL, NULL, 0, NULL);
  }
}

static void test_callbacks_do_not_recurse_on_any_path(void) {
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.recursion.paths", &rl_stream), 0);
  const uint16_t labels[] = {LP_TP_SCOPE_BEGIN, LP_TP_SCOPE_END, LP_TP_INSTANT};
  const uint16_t mine[] = {LP_TP_SIGNAL, LP_TP_REGION_BEGIN, LP_TP_REGION_END};
  lp_subscriber_t *s[2];
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(NULL, &s[i]), 0);
    for (int j = 0; j < 3; j++) {
      CU_ASSERT_EQUAL(lp_subscriber_set_callback(s[i], LP_STREAM_LABELS, labels[j], recursing_everywhere), 0);
      CU_ASSERT_EQUAL(lp_subscriber_set_callback(s[i], rl_stream, mine[j], recursing_everywhere), 0);
    }
  }
  for (int run = 0; run < 4; run++) {
    int nsubs = 1 + (run & 1), traced = run >= 2;
    for (int i = 0; i < nsubs; i++) CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s[i], 1), 0);
    if (traced) {
      lp_trace_opts_t o = {0};
      o.levels = LP_LEVEL_ALL;
      CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
    }
    rdepth = rreentered = rcalls = 0;
    recursion_program();
    if (traced) CU_ASSERT_EQUAL(lp_trace_stop(), 0);
    /* Per subscriber: the scope's and the pair's begin and end, the instant, two signals, the region's pair. */
    CU_ASSERT_EQUAL(rreentered, 0);
    CU_ASSERT_EQUAL(rcalls, 9 * nsubs);
    for (int i = 0; i < nsubs; i++) CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s[i], 0), 0);
  }
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(lp_subscriber_destroy(s[i], WAIT_NS), 0);
  lp__thread_t *t = lp__thread_current();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(LP_IMPL_LOAD_RELAXED(t->hot.word) & LP_IMPL_DEPTH_MASK, 0);
}

/*
 * What destroy waits for, deterministically: a single notification's
 * callback still running on another thread, and an LP_NOTIFY_SCOPE another
 * thread holds open (its begin reached the subscriber); -EDEADLK at once
 * for the caller's own open LP_NOTIFY_SCOPE or label scope, and -EBUSY at
 * once while enabled (a timeout of 0 everywhere, so that a wrong answer
 * fails instead of waiting forever). The race test above sees a running
 * callback only by luck.
 */
typedef struct waiter {
  uint8_t stream;
  int scope; /* 0: lp_notify whose callback waits; 1: an LP_NOTIFY_SCOPE held open */
  atomic_int entered, release, ends, returned;
} waiter_t;

static void waiting_cb(const lp_notification_t *n, void *data, void **slot) {
  waiter_t *w = data;
  (void)slot;
  if (LP_TP_IS_END(n->type)) {
    atomic_fetch_add(&w->ends, 1);
    return;
  }
  if (w->scope) return;
  atomic_store(&w->entered, 1);
  while (!atomic_load(&w->release)) sched_yield();
  atomic_fetch_add(&w->returned, 1);
}

static void *waiting_thread(void *arg) {
  waiter_t *w = arg;
  if (!w->scope) {
    lp_notify(w->stream, LP_TP_SIGNAL, NULL, NULL, 0, NULL);
    return NULL;
  }
  {
    LP_NOTIFY_SCOPE(w->stream, LP_TP_REGION_BEGIN, NULL, NULL, 0, NULL);
    atomic_store(&w->entered, 1);
    while (!atomic_load(&w->release)) sched_yield();
  }
  return NULL;
}

static lp_subscriber_t *waited_subscriber(waiter_t *w) {
  lp_subscriber_t *s;
  CU_ASSERT_EQUAL_FATAL(lp_subscriber_create(w, &s), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, w->stream, LP_TP_SIGNAL, waiting_cb), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, w->stream, LP_TP_REGION_BEGIN, waiting_cb), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, w->stream, LP_TP_REGION_END, waiting_cb), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, waiting_cb), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_END, waiting_cb), 0);
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 1), 0);
  return s;
}

static void test_destroy_waits_for_other_threads_and_refuses_its_own(void) {
  uint8_t st;
  CU_ASSERT_EQUAL_FATAL(lp_stream_register("test.destroy.wait", &st), 0);
  for (int scope = 0; scope < 2; scope++) {
    waiter_t w = {.stream = st, .scope = scope};
    lp_subscriber_t *s = waited_subscriber(&w);
    CU_ASSERT_EQUAL(lp_subscriber_destroy(s, 0), -EBUSY);
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, waiting_thread, &w), 0);
    while (!atomic_load(&w.entered)) sched_yield();
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 0), 0);
    CU_ASSERT_EQUAL(lp_subscriber_destroy(s, 0), -ETIMEDOUT);
    CU_ASSERT_EQUAL(lp_subscriber_destroy(s, 1000000), -ETIMEDOUT); /* still valid */
    atomic_store(&w.release, 1);
    CU_ASSERT_EQUAL(lp_subscriber_destroy(s, WAIT_NS), 0);
    /* Returned only after the callback returned, or the scope's end ran. */
    CU_ASSERT_EQUAL(atomic_load(&w.returned), scope ? 0 : 1);
    CU_ASSERT_EQUAL(atomic_load(&w.ends), scope ? 1 : 0);
    pthread_join(th, NULL);
  }
  /* The caller's own open scopes: refused at once, whatever the timeout. */
  waiter_t w = {.stream = st, .scope = 1};
  lp_subscriber_t *s = waited_subscriber(&w);
  {
    LP_NOTIFY_SCOPE(st, LP_TP_REGION_BEGIN, NULL, NULL, 0, NULL);
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 0), 0);
    CU_ASSERT_EQUAL(lp_subscriber_destroy(s, 0), -EDEADLK);
  }
  CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 1), 0);
  {
    LP_SCOPE("own open scope");
    CU_ASSERT_EQUAL(lp_subscriber_set_enabled(s, 0), 0);
    CU_ASSERT_EQUAL(lp_subscriber_destroy(s, 0), -EDEADLK);
  }
  CU_ASSERT_EQUAL(atomic_load(&w.ends), 2);
  CU_ASSERT_EQUAL(lp_subscriber_destroy(s, 0), 0);
}

int main(void) {
  CU_TestInfo tests[] = {
      LP_TEST(test_bad_arguments_are_einval),
      LP_TEST(test_streams_register_once),
      LP_TEST(test_types_decode),
      LP_TEST(test_events_same_payload_same_id),
      LP_TEST(test_events_many_and_long),
      LP_TEST(test_events_from_several_threads),
      LP_TEST(test_events_differ_in_any_field),
      LP_TEST(test_labels_reach_subscribers_in_order),
      LP_TEST(test_pairing_across_disable_and_late_enable),
      LP_TEST(test_pairing_across_disable_on_recorded_and_healed_ends),
      LP_TEST(test_phase_switch_pairs_for_subscribers),
      LP_TEST(test_half_pairs),
      LP_TEST(test_inline_and_library_paths_hand_over),
      LP_TEST(test_notify_reaches_each_subscriber_with_a_fresh_slot),
      LP_TEST(test_subscriber_with_instants_only_sees_no_scopes),
      LP_TEST(test_notify_and_notify_scope),
      LP_TEST(test_notify_scope_with_several_subscribers_pairs_in_reverse),
      LP_TEST(test_order_after_a_disable_in_the_middle),
      LP_TEST(test_notify_gives_a_fresh_slot_every_time),
      LP_TEST(test_callbacks_do_not_recurse_and_their_labels_are_sampled),
      LP_TEST(test_callbacks_do_not_recurse_on_any_path),
      LP_TEST(test_callbacks_never_run_on_the_collector_thread),
      LP_TEST(test_skipped_scopes_end_when_the_stack_heals),
      LP_TEST(test_deep_scopes_pair_or_never_begin),
      LP_TEST(test_notify_scopes_nested_past_64_pair_or_never_begin),
      LP_TEST(test_pairing_under_races),
      LP_TEST(test_destroy_waits_for_the_last_callback),
      LP_TEST(test_destroy_from_a_callback_is_edeadlk),
      LP_TEST(test_destroy_times_out_while_a_scope_is_open),
      LP_TEST(test_destroy_waits_for_other_threads_and_refuses_its_own),
      LP_TEST(test_enable_limit),
      LP_TEST(test_fork_child_keeps_subscribers),
      LP_TEST(test_instant_once_with_trace_marker),
      LP_TEST(test_timeline_keeps_its_levels_while_subscribers_listen),
      LP_TEST(test_stream_table_fills_at_255),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("subscribers", tests);
}
