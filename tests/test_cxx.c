/* test_cxx.c: labels pushed by C++ code land in the same tree as C labels. */
#include "config.h"

#include "testing.h" /* lp__profile_start_manual, lp__profile_sample_now */

#include "runner.h"

void lp_test_cxx_scoped(void (*inside)(void));

static void sample(void) { lp__profile_sample_now(); }

static void test_cxx_labels_from_cxx(void) {
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  {
    LP_SCOPE("c caller");
    lp_test_cxx_scoped(sample);
  }
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  const lp_node_t *n = lp_node_find(lp_node_find(lp_node_find(lp_profile_root(p), "c caller"), "c++ outer"),
                                    "c++ kernel");
  CU_ASSERT_PTR_NOT_NULL(n);
  CU_ASSERT_EQUAL(lp_node_samples(n), 1);
  lp_profile_stats_t s;
  lp_profile_get_stats(p, &s);
  CU_ASSERT_EQUAL(s.mismatched + s.unmatched, 0);
  lp_profile_free(p);
}

int main(void) {
  CU_TestInfo tests[] = {
      LP_TEST(test_cxx_labels_from_cxx),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("cxx", tests);
}
