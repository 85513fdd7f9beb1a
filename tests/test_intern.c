/*
 * test_intern.c: names made at run time (lib/intern.c through lp_site_intern)
 * and the functions that use their sites (lp_scope_enter / lp_scope_leave,
 * lp_site_begin, lp_site_instant, lp_site_counter).
 *
 * One site per (name, level) for the life of the process, in every thread
 * and across fork; bad names refused; the bound shared with NVTX and ITT,
 * counted past it; the sites nesting with C labels in the tree and on the
 * timeline; the two-call scope healing what was left open inside it.
 * LABELPROF_MAX_NAMES is set by main(), before the first name.
 */
#include "internal.h"

#include <jansson.h>
#include <labelprof.h>
#include <pthread.h>

#include "runner.h"
#include "trace_json.h"

#define MAX_NAMES 400

static const lp_site_t *intern_ok(const char *name, uint32_t level) {
  const lp_site_t *s = NULL;
  CU_ASSERT_EQUAL(lp_site_intern(name, strlen(name), level, &s), 0);
  return s;
}

static unsigned depth(void) { return (unsigned)(lp_impl_self->word & LP_IMPL_DEPTH_MASK); }

static void test_intern_one_site_per_name_and_level(void) {
  const lp_site_t *a = intern_ok("intern step", LP_LEVEL_RUNTIME);
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  CU_ASSERT_STRING_EQUAL(a->label, "intern step");
  CU_ASSERT_EQUAL(a->level, LP_LEVEL_RUNTIME);
  CU_ASSERT_STRING_EQUAL(a->file, "");
  CU_ASSERT_EQUAL(a->line, 0);
  /* Another buffer with the same text, and a text that is not NUL-terminated where it ends. */
  char copy[] = "intern step and more";
  const lp_site_t *b = NULL;
  CU_ASSERT_EQUAL(lp_site_intern(copy, 11, LP_LEVEL_RUNTIME, &b), 0);
  CU_ASSERT_PTR_EQUAL(b, a);
  const lp_site_t *op = intern_ok("intern step", LP_LEVEL_OPERATOR);
  CU_ASSERT_PTR_NOT_EQUAL(op, a);
  CU_ASSERT_EQUAL(op->level, LP_LEVEL_OPERATOR);
  /* Texts that differ only in their middle (the per-thread cache keeps the first and last 8 bytes). */
  const lp_site_t *l1 = intern_ok("intern a long name with its middle: one", LP_LEVEL_RUNTIME);
  const lp_site_t *l2 = intern_ok("intern a long name with its middle: two", LP_LEVEL_RUNTIME);
  const lp_site_t *m1 = intern_ok("intern 0123456789 XX 0123456789", LP_LEVEL_RUNTIME);
  const lp_site_t *m2 = intern_ok("intern 0123456789 YY 0123456789", LP_LEVEL_RUNTIME);
  CU_ASSERT_PTR_NOT_EQUAL(l1, l2);
  CU_ASSERT_PTR_NOT_EQUAL(m1, m2);
  CU_ASSERT_PTR_EQUAL(intern_ok("intern 0123456789 XX 0123456789", LP_LEVEL_RUNTIME), m1);
  CU_ASSERT_STRING_EQUAL(m2->label, "intern 0123456789 YY 0123456789");
  /* Short names, down to none. */
  const lp_site_t *e = NULL;
  CU_ASSERT_EQUAL(lp_site_intern(NULL, 0, LP_LEVEL_DEBUG, &e), 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  CU_ASSERT_STRING_EQUAL(e->label, "");
  CU_ASSERT_PTR_NOT_EQUAL(intern_ok("ab", LP_LEVEL_DEBUG), intern_ok("ba", LP_LEVEL_DEBUG));
  /* NVTX's names share the table but not the sites: theirs have a category and their own level. */
  CU_ASSERT_PTR_NOT_EQUAL(lp_impl_site_make("intern step", NULL), a);
}

static void test_intern_refuses_bad_names(void) {
  const lp_site_t *keep = (const lp_site_t *)&keep, *s = keep;
  lp_names_stats_t before, after;
  CU_ASSERT_EQUAL(lp_names_get_stats(&before), 0);
  CU_ASSERT_EQUAL(lp_site_intern("a\0b", 3, LP_LEVEL_RUNTIME, &s), -EINVAL);
  CU_ASSERT_EQUAL(lp_site_intern("\0", 1, LP_LEVEL_RUNTIME, &s), -EINVAL);
  CU_ASSERT_EQUAL(lp_site_intern("long enough to be hashed in words\0", 34, LP_LEVEL_RUNTIME, &s), -EINVAL);
  CU_ASSERT_EQUAL(lp_site_intern(NULL, 3, LP_LEVEL_RUNTIME, &s), -EINVAL);
  CU_ASSERT_EQUAL(lp_site_intern("x", 1, 0, &s), -EINVAL);
  CU_ASSERT_EQUAL(lp_site_intern("x", 1, LP_LEVEL_RUNTIME | LP_LEVEL_DEBUG, &s), -EINVAL);
  CU_ASSERT_EQUAL(lp_site_intern("x", 1, LP_LEVEL_ALL + 1, &s), -EINVAL);
  CU_ASSERT_EQUAL(lp_site_intern("x", 1, LP_LEVEL_RUNTIME, NULL), -EINVAL);
  CU_ASSERT_PTR_EQUAL(s, keep);
  /* A prefix of a refused name is a name of its own. */
  CU_ASSERT_EQUAL(lp_site_intern("a\0b", 1, LP_LEVEL_RUNTIME, &s), 0);
  CU_ASSERT_STRING_EQUAL(s->label, "a");
  CU_ASSERT_EQUAL(lp_names_get_stats(&after), 0);
  CU_ASSERT_EQUAL(after.overflowed, before.overflowed); /* refusals are not overflows */
  CU_ASSERT_EQUAL(lp_names_get_stats(NULL), -EINVAL);
}

/* The same 64 names from four threads at once: one site each. */
#define SHARED_NAMES 64
static const lp_site_t *seen[4][SHARED_NAMES];

static void *intern_many(void *arg) {
  const lp_site_t **out = arg;
  char name[32];
  for (int round = 0; round < 20; round++)
    for (int i = 0; i < SHARED_NAMES; i++) {
      snprintf(name, sizeof name, "intern shared %d", i);
      const lp_site_t *s = NULL;
      if (lp_site_intern(name, strlen(name), LP_LEVEL_OPERATOR, &s) != 0) return NULL;
      if (round && s != out[i]) return NULL;
      out[i] = s;
    }
  return arg;
}

static void test_intern_threads_share_sites(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, intern_many, seen[i]), 0);
  for (int i = 0; i < 4; i++) {
    void *r = NULL;
    CU_ASSERT_EQUAL(pthread_join(t[i], &r), 0);
    CU_ASSERT_PTR_EQUAL(r, seen[i]); /* every call gave 0 and its round's site */
  }
  for (int i = 0; i < SHARED_NAMES; i++) {
    for (int k = 1; k < 4; k++) CU_ASSERT_PTR_EQUAL(seen[k][i], seen[0][i]);
    char name[32];
    snprintf(name, sizeof name, "intern shared %d", i);
    CU_ASSERT_PTR_EQUAL(intern_ok(name, LP_LEVEL_OPERATOR), seen[0][i]);
  }
}

/* A made site's scope around a C label, a manual pair, an instant and a counter: one timeline. */
static const lp_site_t *outer_site, *pair_site, *mark_site, *gauge_site;

static void inner_c(void) { LP_SCOPE("intern c label"); }

static void nested_body(void) {
  lp_scope_t s = lp_scope_enter(outer_site);
  inner_c();
  lp_site_instant(mark_site);
  lp_site_counter(gauge_site, 42);
  lp_site_begin(pair_site);
  inner_c();
  LP_END();
  lp_scope_leave(&s);
}

static void test_intern_sites_nest_with_c_labels(void) {
  outer_site = intern_ok("intern outer", LP_LEVEL_RUNTIME);
  pair_site = intern_ok("intern pair", LP_LEVEL_OPERATOR);
  mark_site = intern_ok("intern mark", LP_LEVEL_RUNTIME);
  gauge_site = intern_ok("intern gauge", LP_LEVEL_RUNTIME);
  json_t *root = trace_record_with("intern", nested_body);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root);
  json_t *outer = trace_find(ev, "X", "intern outer"), *pair = trace_find(ev, "X", "intern pair");
  CU_ASSERT_PTR_NOT_NULL_FATAL(outer);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pair);
  CU_ASSERT_STRING_EQUAL(ev_str(outer, "cat"), "runtime");
  CU_ASSERT_STRING_EQUAL(ev_str(pair, "cat"), "operator");
  CU_ASSERT_EQUAL(trace_count(ev, "X", "intern c label"), 2);
  int64_t o0 = ev_ns(outer, "ts"), o1 = o0 + ev_ns(outer, "dur");
  size_t i;
  json_t *e;
  int inside = 0;
  json_array_foreach(ev, i, e) {
    if (!ev_is(e, "X", "intern c label")) continue;
    int64_t t0 = ev_ns(e, "ts"), t1 = t0 + ev_ns(e, "dur");
    inside += t0 >= o0 && t1 <= o1;
  }
  CU_ASSERT_EQUAL(inside, 2);
  CU_ASSERT_EQUAL(trace_count(ev, "i", "intern mark"), 1);
  json_t *c = trace_find(ev, "C", "intern gauge");
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(c, "args"), "value")), 42);
  json_decref(root);
  CU_ASSERT_EQUAL(depth(), 0);
}

/* In the sampled tree: the C label under the made one. */
static void test_intern_sites_in_the_tree(void) {
  const lp_site_t *site = intern_ok("intern tree outer", LP_LEVEL_RUNTIME);
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  lp_scope_t s = lp_scope_enter(site);
  {
    LP_SCOPE("intern tree c");
    CU_ASSERT_EQUAL(lp__profile_sample_now(), 0);
  }
  lp_scope_leave(&s);
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  const lp_node_t *n = lp_node_find(lp_profile_root(p), "intern tree outer");
  CU_ASSERT_PTR_NOT_NULL_FATAL(n);
  const lp_node_t *c = lp_node_find(n, "intern tree c");
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT_EQUAL(lp_node_samples(c), 1);
  lp_profile_free(p);
}

/* A two-call scope closes what was left open inside it, and counts it, as LP_SCOPE does. */
static void test_intern_scope_heals(void) {
  const lp_site_t *site = intern_ok("intern healer", LP_LEVEL_RUNTIME);
  unsigned d0 = depth();
  lp__thread_t *t = lp__thread_self();
  lp_scope_t s = lp_scope_enter(site);
  t = lp__thread_self();
  uint64_t mismatched = atomic_load(&t->mismatched);
  LP_BEGIN("intern left open");
  LP_BEGIN("intern left open too");
  CU_ASSERT_EQUAL(depth(), d0 + 3);
  lp_scope_leave(&s);
  CU_ASSERT_EQUAL(depth(), d0);
  CU_ASSERT_EQUAL(atomic_load(&t->mismatched), mismatched + 1);
}

/* The bound: LABELPROF_MAX_NAMES (main) distinct names, then the level's "(other names)", counted. */
static void test_intern_bound_on_names(void) {
  lp_names_stats_t st;
  CU_ASSERT_EQUAL_FATAL(lp_names_get_stats(&st), 0);
  CU_ASSERT_EQUAL(st.limit, MAX_NAMES);
  CU_ASSERT_FATAL(st.names < MAX_NAMES);
  uint64_t room = MAX_NAMES - st.names, over0 = st.overflowed;
  char name[48];
  const lp_site_t *s = NULL, *other_debug = NULL, *other_request = NULL;
  for (uint64_t i = 0; i < room; i++) {
    snprintf(name, sizeof name, "intern fill %llu", (unsigned long long)i);
    CU_ASSERT_EQUAL(lp_site_intern(name, strlen(name), LP_LEVEL_DEBUG, &s), 0);
  }
  CU_ASSERT_EQUAL(lp_site_intern("intern one more", 15, LP_LEVEL_DEBUG, &other_debug), -ENOSPC);
  CU_ASSERT_EQUAL(lp_site_intern("intern one more", 15, LP_LEVEL_REQUEST, &other_request), -ENOSPC);
  CU_ASSERT_PTR_NOT_NULL_FATAL(other_debug);
  CU_ASSERT_PTR_NOT_NULL_FATAL(other_request);
  CU_ASSERT_STRING_EQUAL(other_debug->label, "(other names)");
  CU_ASSERT_EQUAL(other_debug->level, LP_LEVEL_DEBUG);
  CU_ASSERT_EQUAL(other_request->level, LP_LEVEL_REQUEST);
  /* NVTX's names are past the same bound. */
  CU_ASSERT_STRING_EQUAL(lp_impl_site_make("intern nvtx name", NULL)->label, "(other names)");
  /* Names made before the bound keep their sites. */
  CU_ASSERT_STRING_EQUAL(intern_ok("intern step", LP_LEVEL_RUNTIME)->label, "intern step");
  CU_ASSERT_EQUAL(lp_names_get_stats(&st), 0);
  CU_ASSERT_EQUAL(st.names, MAX_NAMES);
  CU_ASSERT_EQUAL(st.overflowed - over0, 3);
  /* The overflow site is a label like any other. */
  lp_scope_t sc = lp_scope_enter(other_debug);
  CU_ASSERT_EQUAL(depth(), 1);
  lp_scope_leave(&sc);
  CU_ASSERT_EQUAL(depth(), 0);
}

/* A child of fork() has the parent's sites and makes new ones (the table's lock is not left held). */
static void test_intern_across_fork(void) {
  const lp_site_t *a = intern_ok("intern step", LP_LEVEL_RUNTIME);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    const lp_site_t *s = NULL, *o = NULL;
    int ok = lp_site_intern("intern step", 11, LP_LEVEL_RUNTIME, &s) == 0 && s == a;
    /* The table is full (test_intern_bound_on_names): a new name is refused, with its site. */
    ok = ok && lp_site_intern("intern child", 12, LP_LEVEL_RUNTIME, &o) == -ENOSPC && o != NULL;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
  setenv("LABELPROF_MAX_NAMES", "400", 1);
  CU_TestInfo tests[] = {LP_TEST(test_intern_one_site_per_name_and_level),
                         LP_TEST(test_intern_refuses_bad_names),
                         LP_TEST(test_intern_threads_share_sites),
                         LP_TEST(test_intern_sites_nest_with_c_labels),
                         LP_TEST(test_intern_sites_in_the_tree),
                         LP_TEST(test_intern_scope_heals),
                         LP_TEST(test_intern_bound_on_names),
                         LP_TEST(test_intern_across_fork),
                         CU_TEST_INFO_NULL};
  return lp_test_main("intern", tests);
}
