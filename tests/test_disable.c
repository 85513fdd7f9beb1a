/*
 * test_disable.c: built with -DLABELPROF_DISABLE and linked without
 * liblabelprof. That it links at all is half the test; the other half is
 * that the macros evaluate nothing and the functions are inert stubs.
 */
#ifndef LABELPROF_DISABLE
#error "this test is built with -DLABELPROF_DISABLE"
#endif
/* tests/runner.h's temporary directory needs POSIX beyond plain C11. */
#define _XOPEN_SOURCE 700
#include <labelprof.h>

#include <errno.h>

#include "runner.h"

static int evaluated;
static int touch(void) { return ++evaluated; }

static void test_disable_macros_compile_to_nothing(void) {
  LP_SCOPE("gone");
  LP_SCOPE_L(LP_LEVEL_DEBUG, "gone too");
  {
    LP_SCOPE("a"); LP_SCOPE("b");
  }
  LP_BEGIN("manual");
  LP_END();
  LP_BEGIN_L(LP_LEVEL_OPERATOR, "manual op");
  LP_END();
  LP_INSTANT("gone");
  LP_INSTANT_L(LP_LEVEL_DEBUG, "gone");
  int only_for_the_counter = 3;
  LP_COUNTER("gone", touch() + only_for_the_counter); /* not evaluated, and the variable counts as used */
  LP_COUNTER_L(LP_LEVEL_DEBUG, "gone", touch());
  CU_ASSERT_EQUAL(evaluated, 0);
  /* Nothing was pushed, so nothing can have been registered or linked. */
  CU_ASSERT_STRING_EQUAL(lp_strerror(0), "labelprof was compiled out (LABELPROF_DISABLE)");
}

static void test_disable_functions_are_stubs(void) {
  lp_profile_t *p = NULL;
  lp_profile_stats_t s;
  CU_ASSERT_EQUAL(lp_profile_start(NULL), -ENOTSUP);
  CU_ASSERT_EQUAL(lp_profile_running(), 0);
  CU_ASSERT_EQUAL(lp_profile_stop(&p), -ENOTSUP);
  CU_ASSERT_PTR_NULL(p);
  CU_ASSERT_EQUAL(lp_profile_print(p, stdout), -ENOTSUP);
  CU_ASSERT_EQUAL(lp_profile_write_folded(p, stdout), -ENOTSUP);
  CU_ASSERT_EQUAL(lp_profile_get_stats(p, &s), -ENOTSUP);
  CU_ASSERT_PTR_NULL(lp_profile_root(p));
  CU_ASSERT_EQUAL(lp_profile_thread_count(p), 0);
  CU_ASSERT_EQUAL(lp_thread_set_name("x"), -ENOTSUP);
  CU_ASSERT_PTR_NOT_NULL(lp_strerror(-ENOTSUP));
  lp_trace_stats_t ts;
  CU_ASSERT_EQUAL(lp_trace_start(NULL), -ENOTSUP);
  CU_ASSERT_EQUAL(lp_trace_stop(), -ENOTSUP);
  CU_ASSERT_EQUAL(lp_trace_running(), 0);
  CU_ASSERT_EQUAL(lp_trace_write_json("/tmp/never-written.json", NULL), -ENOTSUP);
  CU_ASSERT_EQUAL(lp_trace_get_stats(&ts), -ENOTSUP);
  CU_ASSERT_EQUAL(lp_track_create("t"), -ENOTSUP);
  CU_ASSERT_EQUAL(lp_track_complete(0, "w", 1, 2), -ENOTSUP);
  CU_ASSERT_EQUAL(lp_now_ns(), 0);
  lp_profile_free(p);
}

/*
 * What a program calls for its effect, called as statements, result unused:
 * compiled out, each is still a statement without a warning (-Wunused-value
 * under -Werror would fail the program's build otherwise).
 */
static void test_disable_calls_as_statements(void) {
  lp_profile_t *p = NULL;
  lp_profile_start(NULL);
  lp_profile_stop(&p);
  lp_profile_print(p, stdout);
  lp_profile_free(p);
  lp_trace_start(NULL);
  lp_trace_write_perfetto("/tmp/never-written.pftrace", NULL);
  lp_trace_stop();
  lp_dump();
  lp_thread_set_name("x");
  lp_track_complete(0, "w", 1, 2);
  CU_ASSERT_PTR_NULL(p);
}

int main(void) {
  CU_TestInfo tests[] = {
      LP_TEST(test_disable_macros_compile_to_nothing),
      LP_TEST(test_disable_functions_are_stubs),
      LP_TEST(test_disable_calls_as_statements),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("disable", tests);
}
