/*
 * test_clock.c: the timeline's clock. This binary forces the clock_gettime
 * fallback before anything reads the clock, so the path that machines
 * without a trustworthy TSC take is tested on every machine.
 */
#include "internal.h"

#include <time.h>

#include "runner.h"
#include "trace_json.h"

static char dir[] = "/tmp/lp-clock-XXXXXX";
static char path[128];

static uint64_t mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_clock_now_is_clock_monotonic(void) {
  uint64_t prev = 0;
  int backwards = 0;
  for (int i = 0; i < 100000; i++) {
    uint64_t a = mono(), n = lp_now_ns(), b = mono();
    if (n < a || n > b) backwards++;
    if (n < prev) backwards++;
    prev = n;
  }
  CU_ASSERT_EQUAL(backwards, 0);
}

static void test_clock_fallback_is_used_and_named(void) {
  CU_ASSERT_STRING_EQUAL(lp__clock_name(), "clock_gettime");
  uint64_t t = lp_impl_ticks(), m = mono();
  CU_ASSERT(t <= m && m - t < 1000000000u); /* ticks are CLOCK_MONOTONIC ns here */
}

static void test_clock_fallback_events_are_exact(void) {
  uint64_t before[50], after[50];
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(NULL), 0);
  for (int i = 0; i < 50; i++) {
    before[i] = lp_now_ns();
    { LP_SCOPE("probe"); }
    after[i] = lp_now_ns();
  }
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_trace_write_json(path, NULL), 0);
  json_t *root = trace_load(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  CU_ASSERT_PTR_NULL(trace_check_lanes(trace_events(root)));
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(root, "otherData"), "clock")),
                         "clock_gettime");
  size_t i;
  json_t *e;
  int k = 0, bad = 0;
  json_array_foreach(trace_events(root), i, e) if (ev_is(e, "X", "probe") && k < 50) {
    int64_t ts = ev_ns(e, "ts"), end = ts + ev_ns(e, "dur");
    /* Each lane's times are kept strictly increasing, which may add a nanosecond per event. */
    if (ts < (int64_t)before[k] || end > (int64_t)after[k] + 2) bad++;
    k++;
  }
  CU_ASSERT_EQUAL(k, 50);
  CU_ASSERT_EQUAL(bad, 0);
  json_decref(root);
  unlink(path);
}

int main(void) {
  if (!mkdtemp(dir)) return 2;
  snprintf(path, sizeof path, "%s/trace.json", dir);
  lp__clock_choose(LP_CLOCK_MONOTONIC);
  CU_TestInfo tests[] = {
      LP_TEST(test_clock_now_is_clock_monotonic),
      LP_TEST(test_clock_fallback_is_used_and_named),
      LP_TEST(test_clock_fallback_events_are_exact),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("clock", tests);
  rmdir(dir);
  return rc;
}
