/* test_trace.c: recording the timeline: levels, budget, drops, ring mode, threads, sessions, write failures. */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "runner.h"
#include "trace_json.h"

static const char *dir;
static char path[256];

/* Writes the trace and parses it back. */
static json_t *written(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(path, "test_trace"), 0);
  json_t *root = trace_load(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  const char *bad = trace_check_lanes(trace_events(root));
  if (bad) printf("\n    %s ", bad);
  CU_ASSERT_PTR_NULL(bad);
  return root;
}

static int64_t other_data(json_t *root, const char *key) {
  return json_integer_value(json_object_get(json_object_get(root, "otherData"), key));
}

static void test_trace_start_stop_errors(void) {
  lp_trace_opts_t o = {0};
  CU_ASSERT_EQUAL(lp_trace_stop(), -EINVAL);
  CU_ASSERT_EQUAL(lp_trace_running(), 0);
  o.levels = 0x20;
  CU_ASSERT_EQUAL(lp_trace_start(&o), -EINVAL);
  o.levels = 0;
  o.policy = (lp_trace_policy_t)7;
  CU_ASSERT_EQUAL(lp_trace_start(&o), -EINVAL);
  o.policy = LP_TRACE_DISCARD;
  o.budget_bytes = 1000;
  CU_ASSERT_EQUAL(lp_trace_start(&o), -EINVAL);
  CU_ASSERT_EQUAL(lp_trace_running(), 0);
  CU_ASSERT_EQUAL(lp_trace_start(NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_running(), 1);
  CU_ASSERT_EQUAL(lp_trace_start(NULL), -EBUSY);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), -EINVAL);
  CU_ASSERT_EQUAL(lp_trace_write_json(NULL, NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp_trace_get_stats(NULL), -EINVAL);
}

static void test_trace_levels_choose_what_is_recorded(void) {
  lp_trace_opts_t o = {.levels = LP_LEVEL_RUNTIME | LP_LEVEL_DEBUG};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  {
    LP_SCOPE("runtime scope");
    LP_SCOPE_L(LP_LEVEL_OPERATOR, "operator scope");
    LP_SCOPE_L(LP_LEVEL_DEBUG, "debug scope");
    LP_SCOPE_L(LP_LEVEL_REQUEST, "request scope");
    LP_INSTANT_L(LP_LEVEL_OPERATOR, "operator instant");
    LP_INSTANT("runtime instant");
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written();
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "runtime scope"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "debug scope"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "operator scope"), 0);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "request scope"), 0);
  CU_ASSERT_EQUAL(trace_count(ev, "i", "runtime instant"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "i", "operator instant"), 0);
  json_t *x = trace_find(ev, "X", "debug scope");
  CU_ASSERT_STRING_EQUAL(ev_str(x, "cat"), "debug");
  json_decref(root);
}

static void test_trace_off_records_nothing(void) {
  lp_trace_stats_t s0, s1;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s0), 0);
  for (int i = 0; i < 1000; i++) {
    LP_SCOPE("after stop");
    LP_INSTANT("after stop");
    LP_COUNTER("after stop", i);
  }
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s1), 0);
  CU_ASSERT_EQUAL(s1.recorded, s0.recorded);
  CU_ASSERT_EQUAL(s1.dropped, s0.dropped);
}

/* Every event emitted is either recorded or counted as dropped; none vanishes. */
static void *emit_instants(void *arg) {
  long n = (long)(intptr_t)arg;
  for (long i = 0; i < n; i++) LP_INSTANT("filler");
  return NULL;
}

static void test_trace_discard_counts_every_drop(void) {
  const long per_thread = 20000;
  lp_trace_opts_t o = {.budget_bytes = 64 * 1024, .policy = LP_TRACE_DISCARD};
  lp_trace_stats_t s;
  pthread_t th[2];
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  for (int i = 0; i < 2; i++)
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, emit_instants, (void *)(intptr_t)per_thread), 0);
  emit_instants((void *)(intptr_t)per_thread);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(pthread_join(th[i], NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  CU_ASSERT_EQUAL(s.recorded + s.dropped, (uint64_t)(3 * per_thread));
  CU_ASSERT(s.dropped > 0);
  CU_ASSERT(s.used_bytes <= s.budget_bytes);
  CU_ASSERT_EQUAL(s.budget_bytes, 64 * 1024);
  json_t *root = written();
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "i", "filler"), s.recorded);
  CU_ASSERT_EQUAL(other_data(root, "events_recorded"), (int64_t)s.recorded);
  CU_ASSERT_EQUAL(other_data(root, "events_dropped"), (int64_t)s.dropped);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(root, "otherData"), "policy")),
                         "discard");
  printf("\n    %llu recorded, %llu dropped of %ld ", (unsigned long long)s.recorded,
         (unsigned long long)s.dropped, 3 * per_thread);
  json_decref(root);
}

/*
 * Drops count events, whatever the policy: a scope dropped is its begin and
 * its end, two events. Per iteration: two nested scopes, a scope of a level
 * the session does not record between them (neither recorded nor dropped),
 * an instant and a manual pair: 7 events. Around the loop, a scope that
 * begins before the budget is spent and ends after it: 2 more.
 */
#define DROP_EVENTS_PER_ROUND 7
static void *drop_rounds(void *arg) {
  long n = (long)(intptr_t)arg;
  LP_SCOPE("across the spend");
  for (long i = 0; i < n; i++) {
    LP_SCOPE("outer");
    {
      LP_SCOPE_L(LP_LEVEL_DEBUG, "not recorded");
      LP_SCOPE("inner");
      LP_INSTANT("tick");
    }
    LP_BEGIN("manual");
    LP_END();
  }
  return NULL;
}

/* Runs drop_rounds on the main thread and two others under opts; recorded + dropped must be all of it. */
static void drops_add_up(const lp_trace_opts_t *opts, const char *policy) {
  const long per_thread = 6000 * (LP_TEST_SANITIZED ? 1 : 3);
  const uint64_t total = 3 * ((uint64_t)per_thread * DROP_EVENTS_PER_ROUND + 2);
  lp_trace_stats_t s;
  pthread_t th[2];
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(opts), 0);
  for (int i = 0; i < 2; i++)
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, drop_rounds, (void *)(intptr_t)per_thread), 0);
  drop_rounds((void *)(intptr_t)per_thread);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(pthread_join(th[i], NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  if (s.recorded + s.dropped != total)
    printf("\n    %s: %llu recorded + %llu dropped, of %llu events ", policy, (unsigned long long)s.recorded,
           (unsigned long long)s.dropped, (unsigned long long)total);
  CU_ASSERT_EQUAL(s.recorded + s.dropped, total);
  CU_ASSERT(s.dropped > total / 2);
  json_t *root = written();
  CU_ASSERT_EQUAL(other_data(root, "events_recorded"), (int64_t)s.recorded);
  CU_ASSERT_EQUAL(other_data(root, "events_dropped"), (int64_t)s.dropped);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(root, "otherData"), "policy")), policy);
  json_decref(root);
}

static void test_trace_discard_drops_count_events(void) {
  lp_trace_opts_t o = {.budget_bytes = 64 * 1024, .policy = LP_TRACE_DISCARD};
  drops_add_up(&o, "discard");
  /* Again in a new session: the threads that counted drops by their pushes record again, and count again. */
  drops_add_up(&o, "discard");
}

static pthread_barrier_t ring_held;
static void *hold_a_chunk(void *arg) {
  (void)arg;
  LP_SCOPE("holds its chunk");
  pthread_barrier_wait(&ring_held); /* both holders have a chunk */
  pthread_barrier_wait(&ring_held); /* the starved thread is done */
  return NULL;
}

static void test_trace_ring_drops_count_events(void) {
  lp_trace_opts_t o = {.budget_bytes = 64 * 1024, .policy = LP_TRACE_RING};
  drops_add_up(&o, "ring");
  /*
   * A ring whose two chunks are the ones two live threads fill: a third
   * thread finds none to take, and drops all it does.
   */
  const long n = 3000;
  const uint64_t total = 2 * 2 + (uint64_t)n * DROP_EVENTS_PER_ROUND + 2;
  lp_trace_opts_t two = {.budget_bytes = 2 * LP__CHUNK_BYTES, .policy = LP_TRACE_RING};
  lp_trace_stats_t s;
  pthread_t th[3];
  CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&ring_held, NULL, 3), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&two), 0);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, hold_a_chunk, NULL), 0);
  pthread_barrier_wait(&ring_held);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th[2], NULL, drop_rounds, (void *)(intptr_t)n), 0);
  CU_ASSERT_EQUAL(pthread_join(th[2], NULL), 0);
  pthread_barrier_wait(&ring_held);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(pthread_join(th[i], NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  if (s.recorded + s.dropped != total)
    printf("\n    starved ring: %llu recorded + %llu dropped, of %llu events ", (unsigned long long)s.recorded,
           (unsigned long long)s.dropped, (unsigned long long)total);
  CU_ASSERT_EQUAL(s.recorded + s.dropped, total);
  CU_ASSERT(s.dropped >= (uint64_t)n * DROP_EVENTS_PER_ROUND / 2);
  pthread_barrier_destroy(&ring_held);
}

/* Ring mode keeps the newest events: the counter values that survive are the last ones, without a gap. */
static void test_trace_ring_keeps_the_newest(void) {
  const int64_t n = 50000;
  lp_trace_opts_t o = {.budget_bytes = 64 * 1024, .policy = LP_TRACE_RING};
  lp_trace_stats_t s;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  for (int64_t i = 0; i < n; i++) LP_COUNTER("sequence", i);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  CU_ASSERT_EQUAL(s.recorded + s.dropped, (uint64_t)n);
  CU_ASSERT(s.dropped > 0);
  json_t *root = written();
  json_t *ev = trace_events(root);
  int64_t lo = INT64_MAX, hi = -1, count = 0;
  size_t i;
  json_t *e;
  json_array_foreach(ev, i, e) {
    if (!ev_is(e, "C", "sequence")) continue;
    int64_t v = json_integer_value(json_object_get(json_object_get(e, "args"), "value"));
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    count++;
  }
  CU_ASSERT_EQUAL(hi, n - 1);
  CU_ASSERT_EQUAL(hi - lo + 1, count); /* contiguous */
  CU_ASSERT_EQUAL((uint64_t)count, s.recorded);
  CU_ASSERT(count >= 1000);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(root, "otherData"), "policy")), "ring");
  json_decref(root);
}

static void *count_up(void *arg) {
  const char *name = arg;
  lp_thread_set_name(name);
  for (int64_t i = 0; i < 20000; i++) LP_COUNTER("count up", i);
  return NULL;
}

/* The highest and lowest "count up" values on the lane named name; the number seen. */
static int64_t count_up_range(json_t *ev, const char *name, int64_t *lo, int64_t *hi) {
  int64_t tid = trace_tid(ev, name), n = 0;
  size_t i;
  json_t *e;
  *lo = INT64_MAX;
  *hi = -1;
  json_array_foreach(ev, i, e) {
    if (!ev_is(e, "C", "count up") || ev_int(e, "tid") != tid) continue;
    int64_t v = json_integer_value(json_object_get(json_object_get(e, "args"), "value"));
    *lo = v < *lo ? v : *lo;
    *hi = v > *hi ? v : *hi;
    n++;
  }
  return n;
}

/*
 * Ring mode across threads: a thread that starts after an exited thread has
 * spent the budget still records, because the ring reuses the oldest chunks
 * of the whole session, not only the asking thread's own.
 */
static void test_trace_ring_serves_threads_that_come_later(void) {
  lp_trace_opts_t o = {.budget_bytes = 64 * 1024, .policy = LP_TRACE_RING};
  lp_trace_stats_t s;
  pthread_t th;
  int64_t lo, hi;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, count_up, "early"), 0);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, count_up, "late"), 0);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  CU_ASSERT_EQUAL(s.recorded + s.dropped, 40000);
  json_t *root = written();
  json_t *ev = trace_events(root);
  int64_t late = count_up_range(ev, "late", &lo, &hi);
  CU_ASSERT(late >= 1000);
  CU_ASSERT_EQUAL(hi, 19999);          /* the newest are kept */
  CU_ASSERT_EQUAL(hi - lo + 1, late); /* without a gap */
  CU_ASSERT_EQUAL(late, (int64_t)s.recorded - count_up_range(ev, "early", &lo, &hi));
  json_decref(root);
}

static void *short_lived(void *arg) {
  (void)arg;
  lp_thread_set_name("short-lived");
  LP_SCOPE("exited work");
  { LP_SCOPE("exited inner"); }
  return NULL;
}

static void test_trace_exited_threads_are_written(void) {
  pthread_t th;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, short_lived, NULL), 0);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written();
  json_t *ev = trace_events(root);
  int64_t tid = trace_tid(ev, "short-lived");
  CU_ASSERT(tid > 0);
  json_t *x = trace_find(ev, "X", "exited inner");
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  CU_ASSERT_EQUAL(ev_int(x, "tid"), tid);
  CU_ASSERT_EQUAL(ev_int(x, "pid"), (int64_t)getpid());
  json_decref(root);
}

static void test_trace_restart_discards_the_old_session(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  { LP_SCOPE("old session"); }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  { LP_SCOPE("new session"); }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written();
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "old session"), 0);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "new session"), 1);
  json_decref(root);
}

static void test_trace_scope_ending_after_stop_is_complete(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  {
    LP_SCOPE("spans the stop");
    CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  }
  json_t *root = written();
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "spans the stop"), 1);
  json_decref(root);
}

static void test_trace_manual_pairs_and_open_scopes(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  LP_BEGIN("manual");
  { LP_SCOPE("inside manual"); }
  LP_END();
  json_t *root;
  {
    LP_SCOPE("open at write");
    CU_ASSERT_EQUAL(lp_trace_stop(), 0);
    root = written(); /* still open: an unmatched begin */
  }
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "manual"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "inside manual"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "B", "open at write"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "open at write"), 0);
  json_decref(root);
}

/*
 * A scope's end that leaves the inline path keeps the function's return
 * value: on x86-64 the thunk such an end calls keeps rax, where the compiler
 * keeps the value across it. Two such ends: a recorded scope's, and a scope
 * that heals the stack (an LP_BEGIN left open inside it), with a session
 * and without.
 */
__attribute__((noinline)) static uint64_t mixed(uint64_t x) {
  __asm__ __volatile__("" : "+r"(x));
  return x * 0x9e3779b97f4a7c15u + 1;
}
__attribute__((noinline)) static uint64_t through_a_recorded_end(uint64_t x) {
  LP_SCOPE("recorded end");
  return mixed(x);
}
__attribute__((noinline)) static uint64_t through_a_healing_end(uint64_t x) {
  LP_SCOPE("healing end");
  LP_BEGIN("left open");
  return mixed(x);
}

static void test_trace_cold_ends_keep_the_return_value(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (uint64_t i = 1; i <= 3; i++) {
    CU_ASSERT_EQUAL(through_a_recorded_end(i), mixed(i));
    CU_ASSERT_EQUAL(through_a_healing_end(i), mixed(i));
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  for (uint64_t i = 1; i <= 3; i++) CU_ASSERT_EQUAL(through_a_healing_end(i), mixed(i));
  json_t *root = written();
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "recorded end"), 3);
  json_decref(root);
}

/*
 * A begin that the ring overwrote: its end gets a begin made up before the
 * lane's first remaining event, marked "truncated", so the enclosing scopes
 * still show around what was kept, properly nested.
 */
static void test_trace_ring_overwritten_begins_are_made_up(void) {
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
  json_t *root = written();
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "E", NULL), 0);
  CU_ASSERT_EQUAL(trace_count(ev, "B", NULL), 0);
  json_t *outer = trace_find(ev, "X", "outer overwritten"), *mid = trace_find(ev, "X", "begin overwritten");
  json_t *kept = trace_find(ev, "X", "kept inside");
  CU_ASSERT_PTR_NOT_NULL_FATAL(outer);
  CU_ASSERT_PTR_NOT_NULL_FATAL(mid);
  CU_ASSERT_PTR_NOT_NULL_FATAL(kept);
  CU_ASSERT(json_is_true(json_object_get(json_object_get(outer, "args"), "truncated")));
  CU_ASSERT(json_is_true(json_object_get(json_object_get(mid, "args"), "truncated")));
  CU_ASSERT_PTR_NULL(json_object_get(kept, "args"));
  /* Both made-up begins come before every instant that was kept, the outer one first. */
  int64_t first_instant = INT64_MAX;
  size_t i;
  json_t *e;
  json_array_foreach(ev, i, e) if (ev_is(e, "i", "pushes it out") && ev_ns(e, "ts") < first_instant)
      first_instant = ev_ns(e, "ts");
  CU_ASSERT(ev_ns(outer, "ts") < ev_ns(mid, "ts"));
  CU_ASSERT(ev_ns(mid, "ts") < first_instant);
  CU_ASSERT(ev_ns(kept, "ts") + ev_ns(kept, "dur") <= ev_ns(mid, "ts") + ev_ns(mid, "dur"));
  CU_ASSERT(other_data(root, "events_dropped") > 0);
  json_decref(root);
}

static jmp_buf jump;
static void skipped(void) {
  LP_SCOPE("skipped by longjmp");
  longjmp(jump, 1);
}
static void catch_jump(void) {
  if (setjmp(jump) == 0) skipped();
}

/* Scopes skipped by a longjmp are closed when the scope that healed the stack ends: still nested. */
static void test_trace_longjmp_closes_skipped_scopes(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  {
    LP_SCOPE("catcher");
    catch_jump();
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written();
  json_t *ev = trace_events(root);
  json_t *inner = trace_find(ev, "X", "skipped by longjmp"), *outer = trace_find(ev, "X", "catcher");
  CU_ASSERT_PTR_NOT_NULL_FATAL(inner);
  CU_ASSERT_PTR_NOT_NULL_FATAL(outer);
  CU_ASSERT(ev_ns(inner, "ts") > ev_ns(outer, "ts"));
  CU_ASSERT(ev_ns(inner, "ts") + ev_ns(inner, "dur") < ev_ns(outer, "ts") + ev_ns(outer, "dur"));
  CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(inner, "args"), "unterminated"));
  json_decref(root);
}

/* Only what the directory held before: no temporary file left behind. */
static int dir_entries(const char *d) {
  int n = 0;
  DIR *dp = opendir(d);
  if (!dp) return -1;
  for (struct dirent *e; (e = readdir(dp));) n += e->d_name[0] != '.';
  closedir(dp);
  return n;
}

static void test_trace_write_failures_leave_nothing(void) {
  char sub[160], target[200];
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 5000; i++) {
    LP_SCOPE("fill");
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_write_json("/dev/full", NULL), -ENOSPC);
  CU_ASSERT_EQUAL(lp_trace_write_json("/nonexistent-dir/trace.json", NULL), -ENOENT);
  /* A regular file that cannot be finished keeps its old contents, and no temporary file stays. */
  snprintf(sub, sizeof sub, "%s/sub", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
  snprintf(target, sizeof target, "%s/trace.json", sub);
  FILE *f = fopen(target, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("old contents\n", f);
  fclose(f);
  struct rlimit old, small = {4096, 0};
  CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_FSIZE, &old), 0);
  small.rlim_max = old.rlim_max;
  signal(SIGXFSZ, SIG_IGN);
  CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &small), 0);
  int rc = lp_trace_write_json(target, NULL);
  setrlimit(RLIMIT_FSIZE, &old);
  CU_ASSERT_EQUAL(rc, -EFBIG);
  CU_ASSERT_EQUAL(dir_entries(sub), 1);
  f = fopen(target, "r");
  char line[64] = "";
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
  fclose(f);
  CU_ASSERT_STRING_EQUAL(line, "old contents\n");
  /* and with room it succeeds, replacing the file */
  CU_ASSERT_EQUAL(lp_trace_write_json(target, NULL), 0);
  CU_ASSERT_EQUAL(dir_entries(sub), 1);
  json_t *root = trace_load(target);
  CU_ASSERT_PTR_NOT_NULL(root);
  json_decref(root);
  unlink(target);
  rmdir(sub);
}

static atomic_int keep_going, recorded_one;
static void *busy_recorder(void *arg) {
  (void)arg;
  lp_thread_set_name("recorder");
  while (atomic_load_explicit(&keep_going, memory_order_relaxed)) {
    {
      LP_SCOPE("busy outer");
      LP_SCOPE_L(LP_LEVEL_OPERATOR, "busy inner");
    }
    atomic_store_explicit(&recorded_one, 1, memory_order_release);
  }
  return NULL;
}

/* A write while another thread records yields a valid, nested file, and the numbers still add up. */
static void test_trace_write_while_recording(void) {
  pthread_t th;
  lp_trace_opts_t o = {.policy = LP_TRACE_RING, .budget_bytes = 1 << 20};
  atomic_store(&keep_going, 1);
  atomic_store(&recorded_one, 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, busy_recorder, NULL), 0);
  while (!atomic_load_explicit(&recorded_one, memory_order_acquire)) sched_yield();
  for (int i = 0; i < 3; i++) {
    json_t *root = written();
    CU_ASSERT(trace_count(trace_events(root), "X", "busy inner") > 0);
    json_decref(root);
  }
  atomic_store(&keep_going, 0);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written();
  CU_ASSERT(trace_count(trace_events(root), "X", "busy inner") > 0);
  json_decref(root);
}

static void test_trace_stats_count_threads_and_tracks(void) {
  lp_trace_stats_t s;
  pthread_t th;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  lp_track_t tr = lp_track_create("stats track");
  CU_ASSERT(tr >= 0);
  CU_ASSERT_EQUAL(lp_track_complete(tr, "work", lp_now_ns(), 10), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, short_lived, NULL), 0);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  { LP_SCOPE("main work"); }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  CU_ASSERT(s.threads >= 2);
  CU_ASSERT(s.tracks >= 1);
  CU_ASSERT_EQUAL(s.recorded, 4 + 2 + 1); /* two scopes in the thread, one here, one track event */
  CU_ASSERT_EQUAL(s.used_bytes % (16 * 1024), 0);
  CU_ASSERT_EQUAL(lp_track_complete(tr, NULL, 0, 0), -EINVAL);
  CU_ASSERT_EQUAL(lp_track_complete(9999, "x", 0, 0), -EINVAL);
  CU_ASSERT_EQUAL(lp_track_complete(-1, "x", 0, 0), -EINVAL);
  CU_ASSERT_EQUAL(lp_track_complete(tr, "x", UINT64_MAX, 2), -EINVAL);
  CU_ASSERT_EQUAL(lp_track_create(NULL), -EINVAL);
}

/* Parses what fd holds from offset 0. */
static json_t *load_fd(int fd) {
  json_error_t err;
  FILE *f = fdopen(dup(fd), "r");
  if (!f) return NULL;
  rewind(f);
  json_t *root = json_loadf(f, 0, &err);
  fclose(f);
  return root;
}

static void test_trace_writes_to_named_descriptors(void) {
  char name[64];
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  { LP_SCOPE("to a descriptor"); }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  const char *forms[] = {"/dev/fd/", "/proc/self/fd/"};
  for (int i = 0; i < 2; i++) {
    FILE *f = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    snprintf(name, sizeof name, "%s%d", forms[i], fileno(f));
    CU_ASSERT_EQUAL(lp_trace_write_json(name, NULL), 0);
    json_t *root = load_fd(fileno(f));
    CU_ASSERT_PTR_NOT_NULL(root);
    CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "to a descriptor"), 1);
    json_decref(root);
    fclose(f);
  }
}

static void test_trace_follows_symbolic_links(void) {
  char target[160], link[160];
  struct stat st;
  snprintf(target, sizeof target, "%s/target.json", dir);
  snprintf(link, sizeof link, "%s/link.json", dir);
  CU_ASSERT_EQUAL_FATAL(symlink("target.json", link), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  { LP_SCOPE("through a link"); }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_write_json(link, NULL), 0);
  CU_ASSERT_EQUAL(lstat(link, &st), 0);
  CU_ASSERT(S_ISLNK(st.st_mode)); /* the link stays a link */
  json_t *root = trace_load(target);
  CU_ASSERT_PTR_NOT_NULL(root);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "through a link"), 1);
  json_decref(root);
  /* and again, now that the target exists */
  CU_ASSERT_EQUAL(lp_trace_write_json(link, NULL), 0);
  CU_ASSERT_EQUAL(lstat(link, &st), 0);
  CU_ASSERT(S_ISLNK(st.st_mode));
  CU_ASSERT_EQUAL(dir_entries(dir), 3); /* trace.json, target.json, link.json: no temporary file left */
  unlink(link);
  unlink(target);
}

static void test_trace_closed_pipe_gives_epipe(void) {
  int fds[2];
  char name[64];
  sigset_t pending;
  CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
  close(fds[0]);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  { LP_SCOPE("nobody reads this"); }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  snprintf(name, sizeof name, "/dev/fd/%d", fds[1]);
  CU_ASSERT_EQUAL(lp_trace_write_json(name, NULL), -EPIPE); /* and the process is still here */
  CU_ASSERT_EQUAL(sigpending(&pending), 0);
  CU_ASSERT_FALSE(sigismember(&pending, SIGPIPE));
  close(fds[1]);
}

/* A stray LP_END() inside a recorded scope ends it once, not twice. */
static void test_trace_stray_end_records_one_end(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  {
    LP_SCOPE("ended early");
    LP_END();
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written();
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "ended early"), 1);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "E", NULL), 0);
  json_decref(root);
}

static void deep_manual(int n) {
  LP_BEGIN("manual level");
  if (n > 1) deep_manual(n - 1);
  LP_END();
}

/* Manual pairs deeper than the stack's frames are not recorded at all, rather than half. */
static void test_trace_deep_manual_pairs_stay_paired(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  deep_manual(LP_STACK_CAPACITY + 6);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written();
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "manual level"), LP_STACK_CAPACITY);
  CU_ASSERT_EQUAL(trace_count(ev, "B", NULL) + trace_count(ev, "E", NULL), 0);
  json_decref(root);
}

static void *one_scope(void *arg) {
  (void)arg;
  LP_SCOPE("many lanes");
  return NULL;
}

/* Many lanes and tracks, with long ids: every metadata line is whole (it once overflowed a fixed buffer). */
static void test_trace_many_lanes_and_tracks(void) {
  pthread_t th;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 150; i++) {
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, one_scope, NULL), 0);
    CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  }
  lp_track_t tr = lp_track_create("a track after many lanes");
  CU_ASSERT_EQUAL(lp_track_complete(tr, "work", lp_now_ns(), 5), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written();
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "many lanes"), 150);
  CU_ASSERT(trace_count(ev, "M", "thread_sort_index") >= 151);
  CU_ASSERT(trace_tid(ev, "a track after many lanes") >= 1000000000);
  json_decref(root);
}

/*
 * The file goes to a pipe that a thread of this process drains; meanwhile
 * that thread renames itself and another thread exits. Neither may wait for
 * the export (which waits for the reader): a deadlock here ends in SIGALRM.
 */
static int pipe_fds[2];
static size_t drained;
static void *drain(void *arg) {
  (void)arg;
  char buf[4096];
  ssize_t n;
  bool once = false;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) {
    drained += (size_t)n;
    if (!once) {
      once = true;
      lp_thread_set_name("drainer");
      pthread_t th;
      if (pthread_create(&th, NULL, one_scope, NULL) == 0) pthread_join(th, NULL);
    }
  }
  return NULL;
}

static void test_trace_export_to_own_pipe_does_not_block_others(void) {
  pthread_t reader;
  char name[64];
  CU_ASSERT_EQUAL_FATAL(pipe(pipe_fds), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 20000; i++) {
    LP_SCOPE("fills the pipe");
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  drained = 0;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&reader, NULL, drain, NULL), 0);
  snprintf(name, sizeof name, "/dev/fd/%d", pipe_fds[1]);
  alarm(60);
  CU_ASSERT_EQUAL(lp_trace_write_json(name, NULL), 0);
  close(pipe_fds[1]);
  CU_ASSERT_EQUAL(pthread_join(reader, NULL), 0);
  alarm(0);
  close(pipe_fds[0]);
  CU_ASSERT(drained > 20000 * 40);
}

/* A child forked while recording records nothing of the parent's session and can trace on its own. */
static void test_trace_fork_while_recording(void) {
  char child_path[160];
  int status = -1;
  snprintf(child_path, sizeof child_path, "%s/child.json", dir);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  { LP_SCOPE("parent before fork"); }
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int bad = 0;
    if (lp_trace_running()) bad |= 1;
    if (lp_trace_write_json(child_path, NULL) != -EINVAL) bad |= 2; /* nothing recorded here */
    if (lp_trace_start(NULL) != 0) bad |= 4;
    { LP_SCOPE("in the child"); }
    if (lp_trace_stop() != 0) bad |= 8;
    if (lp_trace_write_json(child_path, NULL) != 0) bad |= 16;
    _exit(bad);
  }
  { LP_SCOPE("parent after fork"); }
  CU_ASSERT_EQUAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written(), *child = trace_load(child_path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(child);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "parent after fork"), 1);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "in the child"), 0);
  CU_ASSERT_EQUAL(trace_count(trace_events(child), "X", "in the child"), 1);
  CU_ASSERT_EQUAL(trace_count(trace_events(child), "X", "parent before fork"), 0);
  json_decref(root);
  json_decref(child);
  unlink(child_path);
}

/* ---- hardening -------------------------------------------------------------------- */

static char fifo_path[160];
static int export_rc = 1;
static _Atomic int export_done, exporter_tid;

static void *export_to_fifo(void *arg) {
  (void)arg;
  atomic_store(&exporter_tid, (int)syscall(SYS_gettid));
  export_rc = lp_trace_write_json(fifo_path, "fifo");
  atomic_store(&export_done, 1);
  return NULL;
}

/* True once thread tid sleeps in the kernel (here: in the FIFO's open, waiting for a reader). */
static bool sleeping(int tid) {
  char p[256], buf[512];
  snprintf(p, sizeof p, "/proc/self/task/%d/stat", tid);
  FILE *f = fopen(p, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')');
  return paren && paren[1] == ' ' && paren[2] == 'S';
}

static double elapsed_ms(double t0) { return (double)(lp_now_ns() - (uint64_t)t0) / 1e6; }

/*
 * An export waiting for its FIFO's reader blocks nobody: stopping, starting
 * a second session, fork, and a profile's start and stop each return while
 * the exporter still waits (the reader comes only after them, so a call
 * that waited for the export would never return: SIGALRM ends the test).
 * They take microseconds natively, but a loaded machine or a sanitizer can
 * stretch one to tens of milliseconds (fork under TSan, a new collector
 * thread waiting for a CPU: 68 ms seen under TSan); only seconds would mean
 * that a call waited on the export. Once a reader comes, the file holds the
 * session that was current when the export was called, though a new
 * recording started meanwhile.
 */
static void test_trace_export_waiting_for_a_fifo_blocks_nobody(void) {
  pthread_t th;
  snprintf(fifo_path, sizeof fifo_path, "%s/fifo", dir);
  CU_ASSERT_EQUAL_FATAL(mkfifo(fifo_path, 0600), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 5000; i++) {
    LP_SCOPE("first session");
  }
  atomic_store(&export_done, 0);
  atomic_store(&exporter_tid, 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, export_to_fifo, NULL), 0);
  /* Until the exporter sleeps in the FIFO's open: the kernel says when, polled every millisecond, up to 10 s. */
  bool waiting = false;
  for (int i = 0; i < 10000 && !waiting; i++) {
    int tid = atomic_load(&exporter_tid);
    waiting = tid && sleeping(tid);
    if (!waiting) nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  CU_ASSERT_FATAL(waiting);
  alarm(60);
  double worst = 0, t0;
  int rc[5];
  pid_t pid;
  /* Each call is timed on its own; the assertions come after, outside the timing. */
#define TIMED(stmt) \
  do { \
    t0 = (double)lp_now_ns(); \
    stmt; \
    if (elapsed_ms(t0) > worst) worst = elapsed_ms(t0); \
  } while (0)
  TIMED(rc[0] = lp_trace_stop());
  TIMED(rc[1] = lp_trace_start(NULL)); /* a new recording: the export's chunks must survive it */
  for (int i = 0; i < 5000; i++) {
    LP_SCOPE("second session");
  }
  TIMED(rc[2] = lp_trace_stop());
  TIMED(pid = fork());
  if (pid == 0) _exit(0);
  CU_ASSERT(pid > 0);
  int status = -1;
  CU_ASSERT_EQUAL(lp_test_wait(pid, 0, &status), 0);
  TIMED(rc[3] = lp_profile_start(NULL));
  TIMED(rc[4] = lp_profile_stop(NULL));
#undef TIMED
  for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(rc[i], 0);
  printf("\n    slowest call while the export waited: %.3f ms ", worst);
  CU_ASSERT(worst < 10000.0 * lp_test_slow());
  CU_ASSERT_EQUAL(atomic_load(&export_done), 0);
  CU_ASSERT(sleeping(atomic_load(&exporter_tid))); /* still in the FIFO's open */
  /* The reader comes: the export completes, with the first session's events. */
  int rd = open(fifo_path, O_RDONLY | O_CLOEXEC);
  CU_ASSERT_FATAL(rd >= 0);
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 65536 > cap) {
      cap = (len + 65536) * 2;
      char *nb = realloc(buf, cap);
      CU_ASSERT_PTR_NOT_NULL_FATAL(nb);
      buf = nb;
    }
    ssize_t n = read(rd, buf + len, cap - len);
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(rd);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  alarm(0);
  CU_ASSERT_EQUAL(export_rc, 0);
  json_error_t err;
  json_t *root = json_loadb(buf, len, 0, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "first session"), 5000);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "second session"), 0);
  json_decref(root);
  free(buf);
  unlink(fifo_path);
}

static void *one_scope_thread(void *arg) {
  (void)arg;
  LP_SCOPE("short-lived");
  return NULL;
}

/*
 * Lanes of exited threads retire once the ring has reused their chunks:
 * memory stays within the budget and the lanes kept stay few, however many
 * threads came and went.
 */
static void test_trace_lanes_of_exited_threads_retire(void) {
  const int threads = LP_TEST_SANITIZED ? 1000 : 5000;
  lp_trace_opts_t o = {.policy = LP_TRACE_RING, .budget_bytes = 8 * LP__CHUNK_BYTES};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  for (int i = 0; i < threads; i++) {
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, one_scope_thread, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_join(th, NULL), 0);
  }
  uint32_t lanes = lp__trace_lane_count();
  uint64_t held = lp__trace_held_bytes();
  printf("\n    %d threads: %u lanes kept, %llu bytes of chunks held ", threads, lanes,
         (unsigned long long)held);
  CU_ASSERT(lanes <= 8 + 1); /* one a chunk at most, and this thread's */
  CU_ASSERT(held <= o.budget_bytes);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written();
  CU_ASSERT(trace_count(trace_events(root), "X", "short-lived") >= 1);
  CU_ASSERT(trace_count(trace_events(root), "M", "thread_name") <= 9);
  json_decref(root);
}

/*
 * A scope that began while recording and ends after the stop gets its end,
 * even when its thread's chunk was full and the budget spent: its begin kept
 * the room. In a child, whose thread starts with no chunk: one kept from an
 * earlier test's recording could leave room for the first begin only.
 */
static void end_after_stop_in_a_full_chunk(void *arg) {
  (void)arg;
  lp_trace_opts_t o = {.policy = LP_TRACE_DISCARD, .budget_bytes = LP__CHUNK_BYTES};
  lp_trace_stats_t s;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  {
    LP_SCOPE("open across the stop");
    LP_BEGIN("manual across the stop");
    {
      LP_SCOPE("nested across the stop");
      for (int i = 0; i < 2 * (int)LP__CHUNK_EVENTS; i++) LP_INSTANT("fills the chunk");
      CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
      CU_ASSERT(s.dropped > 0); /* the chunk is full and the budget spent */
      CU_ASSERT_EQUAL(lp_trace_stop(), 0);
    }
    LP_END();
  }
  json_t *root = written();
  json_t *ev = trace_events(root);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "open across the stop"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "manual across the stop"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "nested across the stop"), 1);
  CU_ASSERT_EQUAL(trace_count(ev, "B", NULL), 0);
  json_decref(root);
}

static void test_trace_end_after_stop_has_room_in_a_full_chunk(void) {
  CU_ASSERT_EQUAL(lp_test_in_child(end_after_stop_in_a_full_chunk, NULL), 0);
}

/* longjmp out of a recursive labelled function: ends match begins by depth, so the copies nest as they ran. */
static jmp_buf rec_jump;
static void recurse(int n, int catch_at);
static void catch_recursion(int n) {
  if (setjmp(rec_jump) == 0) recurse(n, -1);
}
static void recurse(int n, int catch_at) {
  LP_SCOPE("recursive");
  if (n == catch_at)
    catch_recursion(n - 1);
  else if (n == 0)
    longjmp(rec_jump, 1);
  else
    recurse(n - 1, catch_at);
}

static void test_trace_longjmp_out_of_recursion_nests_by_depth(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  recurse(4, 2); /* depths 0..4; the jump from depth 4 lands in the frame at depth 2 */
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written(); /* checks that complete events nest */
  json_t *ev = trace_events(root), *e, *catcher = NULL;
  size_t i, n = 0, unterminated = 0;
  int64_t depth2_end = -1;
  json_array_foreach(ev, i, e) {
    if (!ev_is(e, "X", "recursive")) continue;
    n++;
    if (json_object_get(json_object_get(e, "args"), "unterminated")) unterminated++;
  }
  CU_ASSERT_EQUAL(n, 5);
  CU_ASSERT_EQUAL(unterminated, 2); /* the two the jump skipped, at depths 3 and 4 */
  /* The scope at depth 2 (third by start time) ends where the skipped ones were closed. */
  int64_t starts[5];
  size_t k = 0;
  json_array_foreach(ev, i, e) if (ev_is(e, "X", "recursive") && k < 5) starts[k++] = ev_ns(e, "ts");
  qsort(starts, k, sizeof starts[0], i64_cmp);
  json_array_foreach(ev, i, e) if (ev_is(e, "X", "recursive") && k == 5 && ev_ns(e, "ts") == starts[2]) catcher = e;
  CU_ASSERT_PTR_NOT_NULL_FATAL(catcher);
  CU_ASSERT_PTR_NULL(json_object_get(json_object_get(catcher, "args"), "unterminated"));
  depth2_end = ev_ns(catcher, "ts") + ev_ns(catcher, "dur");
  json_array_foreach(ev, i, e) {
    if (!ev_is(e, "X", "recursive") || !json_object_get(json_object_get(e, "args"), "unterminated")) continue;
    CU_ASSERT(ev_ns(e, "ts") > ev_ns(catcher, "ts"));
    CU_ASSERT(ev_ns(e, "ts") + ev_ns(e, "dur") <= depth2_end);
    CU_ASSERT(ev_ns(e, "ts") + ev_ns(e, "dur") >= depth2_end - 3);
  }
  json_decref(root);
}

/* A NULL label is written as "(null)", not a crash. */
static void test_trace_null_label(void) {
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  {
    LP_SCOPE(NULL);
    LP_INSTANT(NULL);
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  json_t *root = written();
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "(null)"), 1);
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "i", "(null)"), 1);
  json_decref(root);
}

/* ---- found in review ------------------------------------------------------------ */

/* A track that keeps recording after a discard budget is spent: the chunk's count stays sound. */
static void test_trace_track_after_the_budget_is_spent(void) {
  /* A few chunks: live threads keep the chunk they are filling across recordings, within the budget. */
  lp_trace_opts_t o = {.policy = LP_TRACE_DISCARD, .budget_bytes = 4 * LP__CHUNK_BYTES};
  lp_trace_stats_t s;
  const int items = 4 * (int)LP__CHUNK_EVENTS; /* two slots each: twice what the budget holds */
  lp_track_t q = lp_track_create("spent queue");
  CU_ASSERT_FATAL(q >= 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  uint64_t t0 = lp_now_ns();
  for (int i = 0; i < items; i++) CU_ASSERT_EQUAL(lp_track_complete(q, "item", t0 + 10u * (uint64_t)i, 5), 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL(lp_trace_get_stats(&s), 0);
  CU_ASSERT(s.recorded > 0 && s.recorded < (uint64_t)items);
  CU_ASSERT_EQUAL(s.recorded + s.dropped, (uint64_t)items);
  json_t *root = written();
  CU_ASSERT_EQUAL(trace_count(trace_events(root), "X", "item"), s.recorded);
  json_decref(root);
}

/*
 * The recording protocol has one implementation, reached three ways: the
 * build's own (through thunks on x86-64), inline (LABELPROF_INLINE_RECORDING)
 * and plain calls. The same script recorded each way gives the same
 * events: kind, depth and label, and counters' values, in the same order,
 * stamped in order.
 */
#define RECORD_SCRIPT record_script_here
#include "record_script.h"
void record_script_inline(void);
void record_script_plain(void);

typedef struct script_ev {
  uintptr_t kind;
  uint32_t depth;
  const char *label;
  uint64_t value; /* a counter's */
} script_ev_t;
typedef struct script_run {
  void (*script)(void);
  script_ev_t ev[512];
  size_t n;
  int bad; /* a timestamp out of order, or too many events */
} script_run_t;

/* Runs a script on a thread of its own, and copies its lane's events before it exits. */
static void *run_script(void *arg) {
  script_run_t *r = arg;
  r->script();
  const lp__thread_t *t = lp__thread_current();
  uint64_t last = 0;
  for (const lp__chunk_t *c = t && t->lane ? t->lane->first : NULL; c; c = c->next) {
    uint32_t end = c == t->lane->last ? (uint32_t)(t->hot.tcur - c->ev) : c->count;
    for (uint32_t i = 0; i < end; i++) {
      lp_impl_event_t e = c->ev[i];
      uintptr_t kind = e.tag & LP_IMPL_EV_KIND;
      if (kind == LP__EV_PAYLOAD) {
        if (r->n) r->ev[r->n - 1].value = e.ts;
        continue;
      }
      if (r->n == sizeof r->ev / sizeof r->ev[0] || e.ts < last) {
        r->bad = 1;
        return NULL;
      }
      last = e.ts;
      r->ev[r->n++] = (script_ev_t){kind, LP__TAG_DEPTH(e.tag), LP__TAG_SITE(e.tag)->label, 0};
    }
  }
  return NULL;
}

static void test_trace_every_path_records_alike(void) {
  static script_run_t runs[3];
  void (*const scripts[3])(void) = {record_script_here, record_script_inline, record_script_plain};
  for (int k = 0; k < 3; k++) {
    pthread_t th;
    runs[k] = (script_run_t){.script = scripts[k]};
    CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, run_script, &runs[k]), 0);
    CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
    CU_ASSERT_EQUAL(lp_trace_stop(), 0);
    CU_ASSERT_EQUAL(runs[k].bad, 0);
  }
  /* 3 rounds of 9, 2 for the scope LP_END ends, 71 deep scopes, 7 around the longjmp (its 5 ends are never made) */
  if (runs[0].n != 3 * 9 + 2 + 2 * 71 + 7) printf("\n    %zu events ", runs[0].n);
  CU_ASSERT_EQUAL(runs[0].n, 3 * 9 + 2 + 2 * 71 + 7);
  for (int k = 1; k < 3; k++) {
    CU_ASSERT_EQUAL(runs[k].n, runs[0].n);
    size_t diff = 0;
    for (size_t i = 0; i < runs[0].n && i < runs[k].n; i++) {
      const script_ev_t *a = &runs[0].ev[i], *b = &runs[k].ev[i];
      if (a->kind != b->kind || a->depth != b->depth || strcmp(a->label, b->label) != 0 || a->value != b->value) {
        if (!diff)
          printf("\n    way %d, event %zu: kind %u depth %u '%s' %llu, against kind %u depth %u '%s' %llu ", k, i,
                 (unsigned)b->kind, b->depth, b->label, (unsigned long long)b->value, (unsigned)a->kind, a->depth,
                 a->label, (unsigned long long)a->value);
        diff++;
      }
    }
    CU_ASSERT_EQUAL(diff, 0);
  }
}

/* The cursor never passes the end of the chunk. */
static int room_ok(void) {
  const lp_impl_thread_t *h = lp_impl_self;
  return !h->tend || h->tcur <= h->tend;
}

static void deep_traced(int n) {
  LP_SCOPE("deep");
  if (n > 0) deep_traced(n - 1);
}

static jmp_buf deep_jump;
static void deep_then_jump(int n) {
  LP_SCOPE("deep jump");
  if (n < 0) return; /* never: but the recursion must have a way out that returns */
  if (n == 0) longjmp(deep_jump, 1);
  deep_then_jump(n - 1);
}
static void catch_deep(int n) {
  if (setjmp(deep_jump) == 0) deep_then_jump(n);
}

/* Each on a thread of its own, whose pseudo-stack the mistakes may leave in any state. */
static void *deep_and_instants(void *arg) {
  int *bad = arg;
  deep_traced(800); /* scopes far deeper than the frames */
  *bad |= !room_ok();
  for (int i = 0; i < 2000; i++) LP_INSTANT("after the deep scopes");
  *bad |= !room_ok() << 1;
  /* longjmps out of deep recursion: the scope around them heals, giving back the room of all they skipped */
  for (int i = 0; i < 3; i++) {
    LP_SCOPE("catcher");
    catch_deep(300);
  }
  const lp_impl_thread_t *h = lp_impl_self;
  *bad |= (!h->tend || (h->word & LP_IMPL_DEPTH_MASK) != 0) << 2; /* nothing is open: no room is kept */
  return NULL;
}

static void *stray_ends(void *arg) {
  int *bad = arg;
  /* A stray LP_END ends a recorded scope, and another label takes its depth, again and again. */
  for (int i = 0; i < 3000; i++) {
    LP_SCOPE("ended twice");
    LP_END();
    LP_BEGIN("takes its depth");
  }
  *bad |= !room_ok();
  for (int i = 0; i < 2000; i++) LP_INSTANT("after the stray ends");
  *bad |= !room_ok() << 1;
  return NULL;
}

static void test_trace_room_for_ends_stays_inside_the_chunk(void) {
  void *(*const cases[])(void *) = {deep_and_instants, stray_ends};
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pthread_t th;
    int bad = 0;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, cases[i], &bad), 0);
    CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
    if (bad) printf("\n    case %zu: %d ", i, bad);
    CU_ASSERT_EQUAL(bad, 0);
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
}

/* A child forked inside recorded scopes may record; their ends give back no room it did not keep. */
static void test_trace_fork_inside_recorded_scopes(void) {
  char child_path[160];
  snprintf(child_path, sizeof child_path, "%s/forked.json", dir);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  int status = -1;
  pid_t pid;
  {
    LP_SCOPE("a");
    LP_SCOPE("b");
    LP_SCOPE("c");
    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
      int bad = lp_trace_start(NULL) != 0;
      for (int i = 0; i < 100; i++) LP_INSTANT("in the child");
      bad |= !room_ok();
      _exit(bad); /* the inherited scopes end in the parent's code below, which the child does not run */
    }
  }
  CU_ASSERT_EQUAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int bad = lp_trace_start(NULL) != 0; /* the child records, and forks again inside recorded scopes */
    {
      LP_SCOPE("open at fork");
      LP_SCOPE("also open");
      pid_t inner = fork(); /* a grandchild that ends the scopes it inherited while it records */
      if (inner == 0) {
        bad = lp_trace_start(NULL) != 0;
      } else if (inner < 0 || lp_test_wait(inner, 0, &status) != 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
        _exit(2);
      } else {
        _exit(0);
      }
    }
    for (int i = 0; i < 100; i++) LP_INSTANT("after");
    bad |= !room_ok();
    bad |= lp_trace_stop() != 0;
    bad |= lp_trace_write_json(child_path, NULL) != 0;
    _exit(bad);
  }
  CU_ASSERT_EQUAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  json_t *child = trace_load(child_path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(child);
  /* Begun in the parent, ended in the grandchild's window: made up there, enclosing what it recorded. */
  CU_ASSERT_EQUAL(trace_count(trace_events(child), "X", "also open"), 1);
  json_decref(child);
  unlink(child_path);
}

/*
 * A scope that encloses a whole nested session (it began before the
 * program's start, under the environment's recording, and ends after its
 * stop) still shows in the program's file, made up and clipped to its window.
 */
static void test_trace_scope_enclosing_a_nested_window(void) {
  CU_ASSERT_EQUAL_FATAL(lp__trace_start(LP__ENV, NULL), 0);
  {
    LP_SCOPE("encloses the window");
    CU_ASSERT_EQUAL(lp_trace_start(NULL), 0);
    {
      LP_SCOPE("inside the window");
    }
    CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  }
  {
    LP_SCOPE("after the window");
  }
  json_t *root = written();
  json_t *ev = trace_events(root);
  json_t *outer = trace_find(ev, "X", "encloses the window"), *inner = trace_find(ev, "X", "inside the window");
  CU_ASSERT_PTR_NOT_NULL_FATAL(outer);
  CU_ASSERT_PTR_NOT_NULL_FATAL(inner);
  CU_ASSERT(json_is_true(json_object_get(json_object_get(outer, "args"), "truncated")));
  CU_ASSERT(ev_ns(outer, "ts") < ev_ns(inner, "ts"));
  CU_ASSERT(ev_ns(outer, "ts") + ev_ns(outer, "dur") >= ev_ns(inner, "ts") + ev_ns(inner, "dur"));
  CU_ASSERT_EQUAL(trace_count(ev, "X", "after the window"), 0);
  json_decref(root);
  CU_ASSERT_EQUAL(lp__trace_stop(LP__ENV), 0);
}

/*
 * ---- a year of uptime ----
 * A child runs in a time namespace whose CLOCK_MONOTONIC (and BOOTTIME) is
 * a year ahead, as on a server up that long: it records tight nested scopes
 * on two threads, brackets one probe with clock_gettime, and writes the
 * trace. Read back through doubles, as viewers read it, every scope must
 * still nest, and the probe must sit where the namespace's clock saw it: so
 * the counter's map follows the namespace too.
 */
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#define YEAR_S 31622400ull /* 366 days: past 2^53 ns on its own */

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *uptime_worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 4000; i++) {
    LP_SCOPE("outer");
    {
      LP_SCOPE("inner a");
    }
    {
      LP_SCOPE("inner b");
    }
  }
  return NULL;
}

/* The child's side: argv[2] is the trace to write, argv[3] where the probe's brackets go. */
static int uptime_child(const char *trace, const char *probe) {
  if (lp_trace_start(NULL) != 0) return 3;
  pthread_t t;
  if (pthread_create(&t, NULL, uptime_worker, NULL) != 0) return 3;
  uptime_worker(NULL);
  if (pthread_join(t, NULL) != 0) return 3;
  uint64_t before = mono_ns();
  LP_INSTANT("probe");
  uint64_t after = mono_ns();
  if (lp_trace_stop() != 0 || lp_trace_write_json(trace, "uptime") != 0) return 3;
  FILE *f = fopen(probe, "w");
  if (!f) return 3;
  fprintf(f, "%llu %llu\n", (unsigned long long)before, (unsigned long long)after);
  return fclose(f) == 0 ? 0 : 3;
}

static void test_trace_exact_after_a_year_of_uptime(void) {
  char trace[300], probe[300];
  snprintf(trace, sizeof trace, "%s/uptime.json", dir);
  snprintf(probe, sizeof probe, "%s/uptime.probe", dir);
  fflush(NULL);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    /* Offsets may be set only before any process is in the namespace: the next fork is its first. */
    char off[64];
    int n = snprintf(off, sizeof off, "monotonic %llu 0\nboottime %llu 0\n", YEAR_S, YEAR_S);
    int fd;
    if (unshare(CLONE_NEWTIME) != 0 || (fd = open("/proc/self/timens_offsets", O_WRONLY)) < 0) _exit(77);
    if (write(fd, off, (size_t)n) != n) _exit(77);
    close(fd);
    pid_t g = fork();
    if (g < 0) _exit(3);
    if (g == 0) lp_test_exec_self("--uptime-child", (const char *const[]){trace, probe, NULL});
    int st;
    if (lp_test_wait(g, 0, &st) != 0 || !WIFEXITED(st)) _exit(4);
    _exit(WEXITSTATUS(st));
  }
  int status;
  CU_ASSERT_EQUAL_FATAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT_FATAL(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    printf("\n    no time namespace here (they need root and Linux 5.6): not tried ");
    return;
  }
  CU_ASSERT_EQUAL_FATAL(WEXITSTATUS(status), 0);
  unsigned long long before = 0, after = 0;
  FILE *f = fopen(probe, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(fscanf(f, "%llu %llu", &before, &after), 2);
  fclose(f);
  CU_ASSERT(before >= YEAR_S * 1000000000ull); /* the offset took */
  json_t *root = trace_load(trace);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root);
  const char *bad = trace_check_lanes(ev);
  if (bad) printf("\n    %s ", bad);
  CU_ASSERT_PTR_NULL(bad);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "outer"), 8000);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "inner b"), 8000);
  /* Every time a viewer reads is an exact number of nanoseconds. */
  size_t i;
  json_t *e;
  int inexact = 0;
  json_array_foreach(ev, i, e) {
    json_t *ts = json_object_get(e, "ts");
    if (ts && fabs(json_number_value(ts) * 1000.0) >= 9007199254740992.0) inexact++;
  }
  CU_ASSERT_EQUAL(inexact, 0);
  json_t *p = trace_find(ev, "i", "probe");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  int64_t at = ev_ns(p, "ts");
  if (at < (int64_t)before - 1000 || at > (int64_t)after + 1000)
    printf("\n    probe at %lld, outside [%llu, %llu] ", (long long)at, before, after);
  CU_ASSERT(at >= (int64_t)before - 1000 && at <= (int64_t)after + 1000);
  json_decref(root);
  unlink(trace);
  unlink(probe);
}

int main(int argc, char **argv) {
  if (lp_test_mode(argc, argv, "--uptime-child") && argc == 4) return uptime_child(argv[2], argv[3]);
  dir = lp_test_tmpdir("trace");
  snprintf(path, sizeof path, "%s/trace.json", dir);
  CU_TestInfo tests[] = {
      LP_TEST(test_trace_start_stop_errors),
      LP_TEST(test_trace_levels_choose_what_is_recorded),
      LP_TEST(test_trace_off_records_nothing),
      LP_TEST(test_trace_discard_counts_every_drop),
      LP_TEST(test_trace_discard_drops_count_events),
      LP_TEST(test_trace_ring_drops_count_events),
      LP_TEST(test_trace_ring_keeps_the_newest),
      LP_TEST(test_trace_ring_serves_threads_that_come_later),
      LP_TEST(test_trace_exited_threads_are_written),
      LP_TEST(test_trace_restart_discards_the_old_session),
      LP_TEST(test_trace_scope_ending_after_stop_is_complete),
      LP_TEST(test_trace_manual_pairs_and_open_scopes),
      LP_TEST(test_trace_cold_ends_keep_the_return_value),
      LP_TEST(test_trace_ring_overwritten_begins_are_made_up),
      LP_TEST(test_trace_longjmp_closes_skipped_scopes),
      LP_TEST(test_trace_write_failures_leave_nothing),
      LP_TEST(test_trace_write_while_recording),
      LP_TEST(test_trace_stats_count_threads_and_tracks),
      LP_TEST(test_trace_writes_to_named_descriptors),
      LP_TEST(test_trace_follows_symbolic_links),
      LP_TEST(test_trace_closed_pipe_gives_epipe),
      LP_TEST(test_trace_stray_end_records_one_end),
      LP_TEST(test_trace_deep_manual_pairs_stay_paired),
      LP_TEST(test_trace_many_lanes_and_tracks),
      LP_TEST(test_trace_export_to_own_pipe_does_not_block_others),
      LP_TEST(test_trace_fork_while_recording),
      LP_TEST(test_trace_export_waiting_for_a_fifo_blocks_nobody),
      LP_TEST(test_trace_lanes_of_exited_threads_retire),
      LP_TEST(test_trace_end_after_stop_has_room_in_a_full_chunk),
      LP_TEST(test_trace_longjmp_out_of_recursion_nests_by_depth),
      LP_TEST(test_trace_null_label),
      LP_TEST(test_trace_track_after_the_budget_is_spent),
      LP_TEST(test_trace_room_for_ends_stays_inside_the_chunk),
      LP_TEST(test_trace_every_path_records_alike),
      LP_TEST(test_trace_fork_inside_recorded_scopes),
      LP_TEST(test_trace_scope_enclosing_a_nested_window),
      LP_TEST(test_trace_exact_after_a_year_of_uptime),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("trace", tests);
  unlink(path);
  rmdir(dir);
  return rc;
}
