/* test_stack.c: the pseudo-stack: push, pop, healing, depth limits, and untorn snapshots. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <string.h>

#include "runner.h"

/* The calling thread's stack as label texts; returns the full depth. */
static uint32_t own_stack(const char **labels, uint32_t cap) {
  const lp_site_t *frames[LP_STACK_CAPACITY];
  uint32_t depth = 0;
  uint64_t word;
  lp__thread_t *t = lp__thread_current();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL_FATAL(lp__stack_snapshot(t, LP__NO_WORD, frames, &depth, &word), 1);
  for (uint32_t i = 0; i < depth && i < cap && i < LP_STACK_CAPACITY; i++) labels[i] = frames[i]->label;
  return depth;
}

static uint64_t mistakes(int which) {
  lp__counters_t c;
  lp__registry_counters(&c);
  return which == 0 ? c.truncated : which == 1 ? c.mismatched : c.unmatched;
}
enum { TRUNCATED, MISMATCHED, UNMATCHED };

static void test_stack_scopes_nest_and_unwind(void) {
  const char *l[8];
  LP_SCOPE("outer");
  CU_ASSERT_EQUAL(own_stack(l, 8), 1);
  CU_ASSERT_STRING_EQUAL(l[0], "outer");
  {
    LP_SCOPE("inner");
    CU_ASSERT_EQUAL(own_stack(l, 8), 2);
    CU_ASSERT_STRING_EQUAL(l[1], "inner");
  }
  CU_ASSERT_EQUAL(own_stack(l, 8), 1);
}

static void test_stack_several_scopes_in_one_block(void) {
  const char *l[8];
  uint64_t before = mistakes(MISMATCHED);
  {
    LP_SCOPE("a"); LP_SCOPE("b"); /* two on one line: distinct call sites */
    LP_SCOPE("c");
    CU_ASSERT_EQUAL(own_stack(l, 8), 3);
    CU_ASSERT_STRING_EQUAL(l[0], "a");
    CU_ASSERT_STRING_EQUAL(l[1], "b");
    CU_ASSERT_STRING_EQUAL(l[2], "c");
  }
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
  CU_ASSERT_EQUAL(mistakes(MISMATCHED), before); /* they unwind in reverse order */
}

static int left_by_return(int x) {
  LP_SCOPE("returns");
  if (x > 0) return x;
  return -x;
}

static void test_stack_scope_ends_on_return_break_goto(void) {
  const char *l[8];
  CU_ASSERT_EQUAL(left_by_return(3), 3);
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
  for (int i = 0; i < 3; i++) {
    LP_SCOPE("loop");
    if (i == 1) break;
  }
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
  {
    LP_SCOPE("goto");
    goto out;
  }
out:
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
}

static void test_stack_begin_end_pairs(void) {
  const char *l[8];
  LP_BEGIN("manual");
  {
    LP_SCOPE("scoped");
    LP_BEGIN("manual inner");
    CU_ASSERT_EQUAL(own_stack(l, 8), 3);
    CU_ASSERT_STRING_EQUAL(l[2], "manual inner");
    LP_END();
  }
  CU_ASSERT_EQUAL(own_stack(l, 8), 1);
  CU_ASSERT_STRING_EQUAL(l[0], "manual");
  LP_END();
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
}

static void recurse(int n) {
  LP_SCOPE("deep");
  if (n > 1) recurse(n - 1);
}

static void deep_probe(int n, uint32_t *seen) {
  LP_SCOPE("deep");
  if (n > 1) {
    deep_probe(n - 1, seen);
  } else {
    const char *l[LP_STACK_CAPACITY];
    *seen = own_stack(l, LP_STACK_CAPACITY);
  }
}

static void test_stack_deeper_than_capacity(void) {
  const char *l[8];
  uint32_t seen = 0;
  uint64_t before = mistakes(TRUNCATED);
  deep_probe(LP_STACK_CAPACITY + 36, &seen);
  CU_ASSERT_EQUAL(seen, LP_STACK_CAPACITY + 36);
  CU_ASSERT_EQUAL(mistakes(TRUNCATED) - before, 36);
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
  before = mistakes(TRUNCATED);
  uint64_t mismatched = mistakes(MISMATCHED);
  recurse(1000);
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
  CU_ASSERT_EQUAL(mistakes(TRUNCATED) - before, 1000 - LP_STACK_CAPACITY);
  CU_ASSERT_EQUAL(mistakes(MISMATCHED), mismatched); /* deep scopes unwind cleanly */
}

static void test_stack_end_without_begin(void) {
  const char *l[8];
  uint64_t before = mistakes(UNMATCHED);
  LP_END();
  LP_END();
  CU_ASSERT_EQUAL(mistakes(UNMATCHED) - before, 2);
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
  LP_SCOPE("still works");
  CU_ASSERT_EQUAL(own_stack(l, 8), 1);
}

/* LP_END() on a thread that never used a label is a mistake like any other: counted. */
static void *end_on_a_new_thread(void *arg) {
  (void)arg;
  LP_END();
  return NULL;
}

static void test_stack_end_on_a_thread_without_labels_is_counted(void) {
  pthread_t th;
  uint64_t before = mistakes(UNMATCHED);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, end_on_a_new_thread, NULL), 0);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(mistakes(UNMATCHED) - before, 1);
}

/*
 * A scope whose end runs on another thread than its begin (a coroutine
 * resumed elsewhere) must not write the first thread's stack: that thread
 * may be pushing and popping at the same moment. The end runs here on a
 * second thread inside a scope of its own: the first thread's word must be
 * the one its begin published, and the second's stack whole again once its
 * own scope has ended.
 */
typedef struct moved {
  lp_impl_scope_t scope;
  uint32_t depth_after;
} moved_t;

static void *end_moved_scope(void *arg) {
  moved_t *m = arg;
  const char *l[4];
  {
    LP_SCOPE("the second thread's own");
    lp_impl_leave(&m->scope); /* may pop this thread's own scope: the depths agree */
  }
  m->depth_after = own_stack(l, 4); /* healed by its own scope's end */
  return NULL;
}

static void test_stack_scope_ended_on_another_thread(void) {
  pthread_t th;
  moved_t m = {.depth_after = 99};
  const char *l[4];
  static const lp_site_t moved_site = LP_IMPL_SITE("moved", LP_LEVEL_RUNTIME);
  { LP_SCOPE("register"); }
  lp__thread_t *self = lp__thread_current();
  CU_ASSERT_PTR_NOT_NULL_FATAL(self);
  m.scope = lp_impl_enter(&moved_site);
  uint64_t published = LP_IMPL_LOAD_RELAXED(self->hot.word);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, end_moved_scope, &m), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(LP_IMPL_LOAD_RELAXED(self->hot.word), published); /* untouched by the other thread */
  CU_ASSERT_EQUAL(m.depth_after, 0);
  CU_ASSERT_EQUAL(own_stack(l, 4), 1);
  lp_impl_leave(&m.scope); /* here it ends as any scope does */
  CU_ASSERT_EQUAL(own_stack(l, 4), 0);
}

static void test_stack_scope_heals_labels_left_open(void) {
  const char *l[8];
  uint64_t before = mistakes(MISMATCHED);
  {
    LP_SCOPE("outer");
    LP_BEGIN("never ended");
    LP_BEGIN("never ended either");
    CU_ASSERT_EQUAL(own_stack(l, 8), 3);
  }
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
  CU_ASSERT_EQUAL(mistakes(MISMATCHED) - before, 1);
}

static void test_stack_scope_heals_an_extra_end(void) {
  const char *l[8];
  uint64_t before = mistakes(MISMATCHED);
  LP_SCOPE("kept");
  {
    LP_SCOPE("popped early");
    LP_END(); /* ends "popped early" */
    LP_END(); /* ends "kept", which is not this code's to end */
    CU_ASSERT_EQUAL(own_stack(l, 8), 0);
  }
  /* "popped early" ended below its own depth: nothing stale comes back. */
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
  CU_ASSERT_EQUAL(mistakes(MISMATCHED) - before, 1);
}

static jmp_buf jump;

static void jumps_out(void) {
  LP_SCOPE("skipped 1");
  {
    LP_SCOPE("skipped 2");
    longjmp(jump, 1);
  }
}

/* setjmp in a function of its own: gcc warns (-Wclobbered) when it shares one with a scope. */
static void catch_jump(void) {
  if (setjmp(jump) == 0) jumps_out();
}

static void test_stack_longjmp_over_scopes(void) {
  const char *l[8];
  uint64_t before = mistakes(MISMATCHED);
  {
    LP_SCOPE("catcher");
    catch_jump();
    /* The skipped scopes never ran their cleanup: they are still on the stack. */
    CU_ASSERT_EQUAL(own_stack(l, 8), 3);
  }
  CU_ASSERT_EQUAL(own_stack(l, 8), 0);
  CU_ASSERT_EQUAL(mistakes(MISMATCHED) - before, 1);
}

static void test_stack_snapshot_reports_unchanged_word(void) {
  const lp_site_t *frames[LP_STACK_CAPACITY];
  uint32_t depth;
  uint64_t w1, w2;
  LP_SCOPE("steady");
  lp__thread_t *t = lp__thread_current();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(lp__stack_snapshot(t, LP__NO_WORD, frames, &depth, &w1), 1);
  CU_ASSERT_EQUAL(lp__stack_snapshot(t, w1, frames, &depth, &w2), 0);
  { LP_SCOPE("blip"); }
  /* Same depth and frames as before, but it changed in between: a new word. */
  CU_ASSERT_EQUAL(lp__stack_snapshot(t, w1, frames, &depth, &w2), 1);
  CU_ASSERT_NOT_EQUAL(w1, w2);
  CU_ASSERT_EQUAL(depth, 1);
}

static void *registered_probe(void *arg) {
  int *out = arg;
  out[0] = lp__thread_current() != NULL;
  { LP_SCOPE("first label"); }
  out[1] = lp__thread_current() != NULL;
  return NULL;
}

static void test_stack_thread_registers_on_first_label(void) {
  pthread_t th;
  int seen[2] = {-1, -1};
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, registered_probe, seen), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(seen[0], 0);
  CU_ASSERT_EQUAL(seen[1], 1);
}

/*
 * The collector must never see a stack that never existed. A writer flips as
 * fast as it can between A/B/C and X/Y/Z, which share no label; the reader
 * snapshots it millions of times and checks every copy is a prefix of one of
 * the two stacks.
 */
static atomic_int flip_stop;
static _Atomic(lp__thread_t *) flip_thread;

static void abc(void) {
  LP_SCOPE("A");
  LP_SCOPE("B");
  LP_SCOPE("C");
}
static void xyz(void) {
  LP_SCOPE("X");
  {
    LP_SCOPE("Y");
    { LP_SCOPE("Z"); }
  }
}

static void *flipper(void *arg) {
  (void)arg;
  { LP_SCOPE("register"); }
  atomic_store(&flip_thread, lp__thread_current());
  /* acquire: the reader's last snapshot happens before this thread frees its state at exit */
  while (!atomic_load_explicit(&flip_stop, memory_order_acquire)) {
    abc();
    xyz();
    LP_BEGIN("A");
    LP_BEGIN("B");
    LP_END();
    LP_END();
  }
  return NULL;
}

static void test_stack_snapshots_never_mix_two_stacks(void) {
  pthread_t th;
  const lp_site_t *f[LP_STACK_CAPACITY];
  uint32_t depth;
  uint64_t word, mixed = 0, copied = 0, gave_up = 0, deepest = 0;
  const long reads = LP_TEST_SANITIZED ? 1000000 : 4000000;
  atomic_store(&flip_stop, 0);
  atomic_store(&flip_thread, NULL);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, flipper, NULL), 0);
  lp__thread_t *t;
  while ((t = atomic_load(&flip_thread)) == NULL) sched_yield();
  /*
   * Read on until enough snapshots were copied and the writer has been seen
   * mid-flight: it may not get a CPU at first, and how many snapshots give up
   * depends on the machine (on some, two thirds of them, when the two threads
   * share a line across cores). The bound only keeps a broken reader from
   * looping for ever: a reader that copies less than one snapshot in 200
   * attempts fails the check below.
   */
  const uint64_t want = (uint64_t)reads / 2;
  for (long i = 0; (copied < want || deepest < 3) && i < 100 * reads; i++) {
    int rc = lp__stack_snapshot(t, LP__NO_WORD, f, &depth, &word);
    if (rc < 0) {
      gave_up++;
      continue;
    }
    copied++;
    if (depth > 3) {
      mixed++;
      continue;
    }
    if (depth > deepest) deepest = depth;
    const char *set = depth ? (f[0]->label[0] == 'A' ? "ABC" : "XYZ") : "";
    for (uint32_t k = 0; k < depth; k++)
      if (f[k]->label[0] != set[k] || f[k]->label[1] != '\0') mixed++;
  }
  atomic_store(&flip_stop, 1);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(mixed, 0);
  CU_ASSERT(copied >= want);
  CU_ASSERT_EQUAL(deepest, 3); /* the reader really did see the writer mid-flight */
  printf("\n    %llu snapshots, %llu mixed, %llu given up after %d tries ",
         (unsigned long long)copied, (unsigned long long)mixed, (unsigned long long)gave_up,
         LP__SNAPSHOT_TRIES);
}

int main(void) {
  CU_TestInfo tests[] = {
      LP_TEST(test_stack_scopes_nest_and_unwind),
      LP_TEST(test_stack_several_scopes_in_one_block),
      LP_TEST(test_stack_scope_ends_on_return_break_goto),
      LP_TEST(test_stack_begin_end_pairs),
      LP_TEST(test_stack_deeper_than_capacity),
      LP_TEST(test_stack_end_without_begin),
      LP_TEST(test_stack_end_on_a_thread_without_labels_is_counted),
      LP_TEST(test_stack_scope_ended_on_another_thread),
      LP_TEST(test_stack_scope_heals_labels_left_open),
      LP_TEST(test_stack_scope_heals_an_extra_end),
      LP_TEST(test_stack_longjmp_over_scopes),
      LP_TEST(test_stack_snapshot_reports_unchanged_word),
      LP_TEST(test_stack_thread_registers_on_first_label),
      LP_TEST(test_stack_snapshots_never_mix_two_stacks),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("stack", tests);
}
