/*
 * runner.h: the CUnit entry point shared by the test binaries.
 *
 * CUnit's basic runner returns 0 even when tests fail, so the exit status is
 * taken from the failure counts.
 */
#ifndef LP_TESTS_RUNNER_H
#define LP_TESTS_RUNNER_H

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>

#define LP_TEST(fn) {#fn, fn}

static inline int lp_test_main(const char *suite, CU_TestInfo *tests) {
  CU_SuiteInfo suites[] = {{suite, NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  if (CU_register_suites(suites) != CUE_SUCCESS) {
    fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
    CU_cleanup_registry();
    return 2;
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_suites_failed() +
                    CU_get_number_of_tests_failed();
  unsigned ran = CU_get_number_of_tests_run();
  CU_cleanup_registry();
  if (ran == 0) return 2;
  return failed ? 1 : 0;
}

/* True when built with a sanitizer that slows code down a lot: loops are scaled down, never skipped. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define LP_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define LP_TEST_SANITIZED 1
#endif
#endif
#ifndef LP_TEST_SANITIZED
#define LP_TEST_SANITIZED 0
#endif

#endif
