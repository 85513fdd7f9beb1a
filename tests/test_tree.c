/* test_tree.c: the profile's tree: shape, merging, sorting, the printed report, folded stacks. */
#include "internal.h"
#include "pprof_enc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

/* Samples the calling thread n times with its current stack. */
static void sample(int n) {
  for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(lp__profile_sample_now(), 0);
}

static void kernel_site_one(int n) {
  LP_SCOPE("kernel");
  sample(n);
}
static void kernel_site_two(int n) {
  LP_SCOPE("kernel"); /* same text, another call site: merged */
  sample(n);
}

/*
 * Gives a profile fixed figures (a manual profile's time and ticks are
 * whatever the test took): 20 ms, 10 ticks at 1000 Hz requested, so 500 Hz
 * achieved, 1 missed tick and 0.2 ms of collector CPU. The header's second
 * line is then exactly HEADER2.
 */
#define HEADER2 \
  "0.02 s at 1000 Hz requested, 500 Hz achieved, 1 missed ticks (one at a random instant of each 1 ms); collector " \
  "1.0% of one CPU, default scheduling\n"
static void fix_figures(lp_profile_t *p, uint64_t duration_ns, uint64_t ticks) {
  lp_profile_stats_t s;
  CU_ASSERT_EQUAL_FATAL(lp_profile_get_stats(p, &s), 0);
  s.duration_ns = duration_ns;
  s.ticks = ticks;
  s.missed_ticks = 1;
  s.collector_cpu_ns = duration_ns / 100;
  lp__profile_test_set_stats(p, &s);
}

/*
 * 10 samples: matmul 8 = kernel 5 (two call sites: 3 + 2) + pack 2 + self 1;
 * io 1; outside any label 1.
 */
static lp_profile_t *make_profile(void) {
  lp_profile_t *p = NULL;
  lp_profile_opts_t o = {.hz = 1000};
  { LP_SCOPE("register"); } /* a thread is sampled from its first label on */
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(&o), 0);
  sample(1);
  {
    LP_SCOPE("matmul");
    kernel_site_one(3);
    kernel_site_two(2);
    {
      LP_SCOPE("pack");
      sample(2);
    }
    sample(1);
  }
  {
    LP_SCOPE("io");
    sample(1);
  }
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  fix_figures(p, 20000000, 10);
  return p;
}

/* Everything the printer wrote, as one string (free it). */
static char *print_to_string(const lp_profile_t *p, const lp_print_opts_t *o, int folded) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  int rc = folded ? lp_profile_write_folded(p, f) : lp_profile_print_ex(p, f, o);
  CU_ASSERT_EQUAL(rc, 0);
  fclose(f);
  return buf;
}

static void test_tree_shape_and_merge_by_text(void) {
  lp_profile_t *p = make_profile();
  const lp_node_t *root = lp_profile_root(p);
  CU_ASSERT_PTR_NULL(lp_node_label(root));
  CU_ASSERT_EQUAL(lp_node_samples(root), 10);
  CU_ASSERT_EQUAL(lp_node_self(root), 1);
  CU_ASSERT_EQUAL(lp_node_child_count(root), 2);
  const lp_node_t *m = lp_node_child(root, 0);
  CU_ASSERT_STRING_EQUAL(lp_node_label(m), "matmul");
  CU_ASSERT_EQUAL(lp_node_samples(m), 8);
  CU_ASSERT_EQUAL(lp_node_self(m), 1);
  CU_ASSERT_EQUAL(lp_node_child_count(m), 2);
  CU_ASSERT_STRING_EQUAL(lp_node_label(lp_node_child(m, 0)), "kernel");
  CU_ASSERT_EQUAL(lp_node_samples(lp_node_child(m, 0)), 5);
  CU_ASSERT_STRING_EQUAL(lp_node_label(lp_node_child(m, 1)), "pack");
  CU_ASSERT_PTR_NULL(lp_node_child(m, 2));
  CU_ASSERT_PTR_EQUAL(lp_node_find(root, "io"), lp_node_child(root, 1));
  CU_ASSERT_PTR_NULL(lp_node_find(root, "kernel"));
  lp_profile_stats_t s;
  CU_ASSERT_EQUAL(lp_profile_get_stats(p, &s), 0);
  CU_ASSERT_EQUAL(s.samples, 10);
  CU_ASSERT_EQUAL(s.threads, 1);
  CU_ASSERT_EQUAL(lp_profile_thread_count(p), 1);
  lp_profile_free(p);
}

static void test_tree_print_gemmlowp_layout(void) {
  lp_profile_t *p = make_profile();
  char *out = print_to_string(p, NULL, 0);
  CU_ASSERT_STRING_EQUAL(out,
                         "labelprof profile by wall time (1 threads, 10 samples)\n" HEADER2
                         "80.00% matmul\n"
                         "    50.00% kernel\n"
                         "    20.00% pack\n"
                         "    10.00% other\n"
                         "10.00% io\n"
                         "10.00% other (outside of any label)\n");
  free(out);
  /* lp_profile_print is the same report */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CU_ASSERT_EQUAL(lp_profile_print(p, f), 0);
  fclose(f);
  out = print_to_string(p, NULL, 0);
  CU_ASSERT_STRING_EQUAL(buf, out);
  free(buf);
  free(out);
  lp_profile_free(p);
}

static void test_tree_print_min_percent_folds_into_other(void) {
  lp_profile_t *p = make_profile();
  lp_print_opts_t o = {.min_percent = 15.0};
  char *out = print_to_string(p, &o, 0);
  /* io (10%) is hidden: a top-level label on a line of its own, never outside of any label */
  CU_ASSERT_STRING_EQUAL(out,
                         "labelprof profile by wall time (1 threads, 10 samples)\n" HEADER2
                         "80.00% matmul\n"
                         "    50.00% kernel\n"
                         "    20.00% pack\n"
                         "    10.00% other\n"
                         "10.00% other (hidden labels)\n"
                         "10.00% other (outside of any label)\n");
  free(out);
  o.min_percent = 30.0; /* hides pack too: it joins matmul's other */
  out = print_to_string(p, &o, 0);
  CU_ASSERT_STRING_EQUAL(out,
                         "labelprof profile by wall time (1 threads, 10 samples)\n" HEADER2
                         "80.00% matmul\n"
                         "    50.00% kernel\n"
                         "    30.00% other\n"
                         "10.00% other (hidden labels)\n"
                         "10.00% other (outside of any label)\n");
  free(out);
  lp_profile_free(p);
}

static void test_tree_print_counts_and_time(void) {
  lp_profile_t *p = make_profile();
  lp_print_opts_t o = {.flags = LP_PRINT_COUNTS};
  char *out = print_to_string(p, &o, 0);
  CU_ASSERT_STRING_EQUAL(out,
                         "labelprof profile by wall time (1 threads, 10 samples)\n" HEADER2
                         /* Time is samples x the achieved tick (20 ms / 10 ticks), not the nominal 1 ms. */
                         "80.00% matmul [8 samples, 16.000 ms]\n"
                         "    50.00% kernel [5 samples, 10.000 ms]\n"
                         "    20.00% pack [2 samples, 4.000 ms]\n"
                         "    10.00% other [1 samples, 2.000 ms]\n"
                         "10.00% io [1 samples, 2.000 ms]\n"
                         "10.00% other (outside of any label) [1 samples, 2.000 ms]\n");
  free(out);
  lp_profile_free(p);
}

static void test_tree_print_per_thread(void) {
  lp_profile_t *p = make_profile();
  lp_print_opts_t o = {.flags = LP_PRINT_THREADS};
  lp_thread_info_t info;
  CU_ASSERT_EQUAL_FATAL(lp_profile_thread(p, 0, &info), 0);
  char *out = print_to_string(p, &o, 0);
  char expected[1024];
  snprintf(expected, sizeof expected,
           "labelprof profile by wall time (1 threads, 10 samples)\n"
           "0.02 s at 1000 Hz requested, 500 Hz achieved, 1 missed ticks (one at a random instant of each 1 ms); "
           "collector 1.0%% of one CPU, default scheduling\n"
           "thread %llu \"%s\" (10 samples, 100.00%% of all)\n"
           "80.00%% matmul\n"
           "    50.00%% kernel\n"
           "    20.00%% pack\n"
           "    10.00%% other\n"
           "10.00%% io\n"
           "10.00%% other (outside of any label)\n",
           (unsigned long long)info.tid, info.name);
  CU_ASSERT_STRING_EQUAL(out, expected);
  free(out);
  CU_ASSERT_EQUAL(lp_profile_thread(p, 1, &info), -EINVAL);
  lp_profile_free(p);
}

static void test_tree_folded_stacks(void) {
  lp_profile_t *p = make_profile();
  char *out = print_to_string(p, NULL, 1);
  CU_ASSERT_STRING_EQUAL(out,
                         "matmul 1\n"
                         "matmul;kernel 5\n"
                         "matmul;pack 2\n"
                         "io 1\n"
                         "(outside of any label) 1\n");
  free(out);
  lp_profile_free(p);
}

/* The gzip file of stored blocks, taken apart by hand: header, blocks, CRC-32, size, and the message's strings. */
static void test_tree_pprof_file(void) {
  CU_ASSERT_EQUAL(lp__crc32(0, "123456789", 9), 0xcbf43926u); /* the check value of CRC-32 */
  lp_profile_t *p = make_profile();
  char path[4096];
  snprintf(path, sizeof path, "%s/tree.pb.gz", lp_test_tmpdir("tree"));
  CU_ASSERT_EQUAL(lp_profile_write_pprof(NULL, path), -EINVAL);
  CU_ASSERT_EQUAL(lp_profile_write_pprof(p, NULL), -EINVAL);
  CU_ASSERT_EQUAL_FATAL(lp_profile_write_pprof(p, path), 0);
  lp_profile_free(p);
  FILE *f = fopen(path, "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  static unsigned char file[1 << 20], raw[1 << 20];
  size_t n = fread(file, 1, sizeof file, f), nraw = 0, at = 10;
  fclose(f);
  unlink(path);
  CU_ASSERT_FATAL(n > 18 && file[0] == 0x1f && file[1] == 0x8b && file[2] == 8 && file[3] == 0);
  int last = 0;
  while (!last && at + 5 <= n) {
    last = file[at] & 1;
    CU_ASSERT_EQUAL_FATAL(file[at] >> 1, 0); /* BTYPE 00: stored */
    size_t len = file[at + 1] | (size_t)file[at + 2] << 8, nlen = file[at + 3] | (size_t)file[at + 4] << 8;
    CU_ASSERT_EQUAL_FATAL(len ^ nlen, 0xffffu);
    CU_ASSERT_FATAL(at + 5 + len <= n - 8);
    memcpy(raw + nraw, file + at + 5, len);
    nraw += len;
    at += 5 + len;
  }
  CU_ASSERT(last);
  CU_ASSERT_EQUAL_FATAL(at + 8, n);
  uint32_t crc = file[at] | (uint32_t)file[at + 1] << 8 | (uint32_t)file[at + 2] << 16 | (uint32_t)file[at + 3] << 24;
  uint32_t size = file[at + 4] | (uint32_t)file[at + 5] << 8 | (uint32_t)file[at + 6] << 16 | (uint32_t)file[at + 7] << 24;
  CU_ASSERT_EQUAL(crc, lp__crc32(0, raw, nraw));
  CU_ASSERT_EQUAL(size, (uint32_t)nraw);
  const char *want[] = {"matmul", "kernel", "pack", "io", "(outside of any label)", "thread", "thread_id",
                        "samples", "count", "wall", "nanoseconds", "test_tree.c"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    CU_ASSERT_PTR_NOT_NULL(memmem(raw, nraw, want[i], strlen(want[i])));
  /* The profile measured no CPU time: it declares no cpu sample type (no "cpu" string at all). */
  CU_ASSERT_PTR_NULL(memmem(raw, nraw, "cpu", 3));
}

static void test_tree_folded_sanitises_labels(void) {
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  {
    LP_SCOPE("a;b\nc");
    sample(2);
  }
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  char *out = print_to_string(p, NULL, 1);
  CU_ASSERT_STRING_EQUAL(out, "a:b?c 2\n");
  free(out);
  lp_profile_free(p);
}

static void deep(int n) {
  LP_SCOPE("level");
  if (n > 1)
    deep(n - 1);
  else
    sample(1);
}

static void test_tree_truncated_stack_is_one_node(void) {
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  deep(LP_STACK_CAPACITY + 10);
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  const lp_node_t *n = lp_profile_root(p);
  for (int i = 0; i < LP_STACK_CAPACITY; i++) {
    n = lp_node_find(n, "level");
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
  }
  CU_ASSERT_EQUAL(lp_node_child_count(n), 1);
  CU_ASSERT_STRING_EQUAL(lp_node_label(lp_node_child(n, 0)), "(deeper than 64 labels)");
  CU_ASSERT_EQUAL(lp_node_samples(lp_node_child(n, 0)), 1);
  lp_profile_stats_t s;
  lp_profile_get_stats(p, &s);
  CU_ASSERT_EQUAL(s.truncated, 10);
  lp_profile_free(p);
}

static void test_tree_empty_profile_prints(void) {
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  fix_figures(p, 20000000, 10);
  char *out = print_to_string(p, NULL, 0);
  CU_ASSERT_STRING_EQUAL(out, "labelprof profile by wall time (0 threads, 0 samples)\n" HEADER2 "0.00% other (outside of any label)\n");
  free(out);
  out = print_to_string(p, NULL, 1);
  CU_ASSERT_STRING_EQUAL(out, "");
  free(out);
  lp_profile_free(p);
}

static void test_tree_reports_instrumentation_mistakes(void) {
  lp_profile_t *p = NULL;
  int scope_line, begin_line;
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  LP_END();
  {
    scope_line = __LINE__ + 1;
    LP_SCOPE("left open");
    begin_line = __LINE__ + 1;
    LP_BEGIN("never ended");
    sample(1);
  }
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  lp_profile_stats_t s;
  lp_profile_get_stats(p, &s);
  CU_ASSERT_EQUAL(s.unmatched, 1);
  CU_ASSERT_EQUAL(s.mismatched, 1);
  char *out = print_to_string(p, NULL, 0);
  /* The note names the first end that did not match: which scope, and what was on top. */
  char want[512];
  snprintf(want, sizeof want,
           "note: 1 label ends did not match the innermost label (stack healed); the first: \"left open\" (%s:%d) "
           "ended while \"never ended\" (%s:%d), which it did not start, was the innermost label\n",
           __FILE__, scope_line, __FILE__, begin_line);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  if (!strstr(out, want)) printf("\nwanted: %s\ngot:\n%s\n", want, out);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "note: 1 LP_END() calls had no label to end\n"));
  free(out);
  lp_profile_free(p);
}

/* A scope whose frame an LP_END() too many ended, named as such. */
static void label_ended_twice(int *line) {
  *line = __LINE__ + 1;
  LP_SCOPE("ended twice");
  LP_END();
}

/*
 * Each session names its own first mismatch: not one from before it
 * started, not a later one; a mismatch outside any session is only counted.
 */
static void test_tree_names_each_sessions_first_mismatch(void) {
  lp_profile_t *p = NULL;
  int first, later;
  {
    LP_SCOPE("before the session"); /* a mismatch with no session yet: not this session's */
    LP_END();
  }
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  label_ended_twice(&first);
  {
    later = __LINE__ + 1;
    LP_SCOPE("later");
    LP_BEGIN("left open");
  }
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  lp_profile_stats_t s;
  lp_profile_get_stats(p, &s);
  CU_ASSERT_EQUAL(s.mismatched, 2);
  char *out = print_to_string(p, NULL, 0);
  char want[512];
  snprintf(want, sizeof want,
           "note: 2 label ends did not match the innermost label (stack healed); the first: \"ended twice\" (%s:%d) "
           "ended after an LP_END() had ended it\n",
           __FILE__, first);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  if (!strstr(out, want)) printf("\nwanted: %s\ngot:\n%s\n", want, out);
  CU_ASSERT_PTR_NULL(strstr(out, "before the session"));
  free(out);
  lp_profile_free(p);
  /* The next session starts afresh: its first is the later kind. */
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  {
    later = __LINE__ + 1;
    LP_SCOPE("later");
    LP_BEGIN("left open");
  }
  label_ended_twice(&first);
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  out = print_to_string(p, NULL, 0);
  snprintf(want, sizeof want,
           "; the first: \"later\" (%s:%d) ended while \"left open\" (%s:%d), which it did not start, was the "
           "innermost label\n",
           __FILE__, later, __FILE__, later + 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  if (!strstr(out, want)) printf("\nwanted: %s\ngot:\n%s\n", want, out);
  free(out);
  lp_profile_free(p);
}

static void test_tree_bad_arguments_and_write_errors(void) {
  lp_profile_t *p = make_profile();
  lp_profile_stats_t s;
  lp_thread_info_t info;
  CU_ASSERT_EQUAL(lp_profile_print(NULL, stdout), -EINVAL);
  CU_ASSERT_EQUAL(lp_profile_print(p, NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp_profile_write_folded(NULL, stdout), -EINVAL);
  CU_ASSERT_EQUAL(lp_profile_get_stats(NULL, &s), -EINVAL);
  CU_ASSERT_EQUAL(lp_profile_get_stats(p, NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp_profile_thread(NULL, 0, &info), -EINVAL);
  CU_ASSERT_PTR_NULL(lp_profile_root(NULL));
  CU_ASSERT_EQUAL(lp_profile_thread_count(NULL), 0);
  lp_profile_free(NULL);
  FILE *full = fopen("/dev/full", "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(full);
  CU_ASSERT_EQUAL(lp_profile_print(p, full), -EIO);
  clearerr(full);
  CU_ASSERT_EQUAL(lp_profile_write_folded(p, full), -EIO);
  fclose(full);
  lp_profile_free(p);
}

/* min_percent is a percentage: anything else is refused, not silently applied. */
static void test_tree_print_rejects_bad_min_percent(void) {
  lp_profile_t *p = make_profile();
  const double bad[] = {-1.0, 100.5, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lp_print_opts_t o = {.min_percent = bad[i]};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(lp_profile_print_ex(p, f, &o), -EINVAL);
    fclose(f);
    CU_ASSERT_EQUAL(len, 0);
    free(buf);
  }
  lp_print_opts_t all = {.min_percent = 100.0};
  char *out = print_to_string(p, &all, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "90.00% other (hidden labels)\n10.00% other (outside of any label)\n"));
  free(out);
  lp_profile_free(p);
}

/* A label with a newline or control characters stays on its own line of the report. */
static void test_tree_print_escapes_labels(void) {
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  {
    LP_SCOPE("two\nlines\x1b[31m");
    sample(2);
  }
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  fix_figures(p, 20000000, 10);
  char *out = print_to_string(p, NULL, 0);
  CU_ASSERT_STRING_EQUAL(out, "labelprof profile by wall time (1 threads, 2 samples)\n" HEADER2
                              "100.00% two?lines?[31m\n"
                              "0.00% other (outside of any label)\n");
  free(out);
  lp_profile_free(p);
}

/* Under 90% of the requested rate, the report says so, and what a sample then stands for. */
static void test_tree_print_notes_a_low_rate(void) {
  lp_profile_t *p = make_profile();
  fix_figures(p, 1000000000, 410); /* 410 ticks in 1 s at 1000 Hz requested */
  char *out = print_to_string(p, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "1.00 s at 1000 Hz requested, 410 Hz achieved, 1 missed ticks"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "note: the collector achieved 41% of the requested rate"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "each sample stands for 2.439 ms\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(late wakeups: slow timers, or a busy host)"));
  free(out);
  /* The likely causes, where the collector saw them; and how it was scheduled. */
  lp_profile_stats_t s;
  CU_ASSERT_EQUAL_FATAL(lp_profile_get_stats(p, &s), 0);
  s.max_runnable = 17;
  s.cpus = 2;
  s.throttled = 12;
  s.sched = LP_SCHED_SLICE;
  s.slice_ns = 100000;
  lp__profile_test_set_stats(p, &s);
  out = print_to_string(p, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "collector 1.0% of one CPU, slice 100 \xc2\xb5s\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "note: the collector achieved 41% of the requested rate (up to 17 runnable "
                                     "threads on 2 CPUs; a CPU quota (cgroup cpu.max) throttled the process 12 "
                                     "times); each sample stands for 2.439 ms\n"));
  free(out);
  s.max_runnable = 2;
  s.throttled = 0;
  s.sched = LP_SCHED_FIFO;
  s.sched_priority = 7;
  lp__profile_test_set_stats(p, &s);
  out = print_to_string(p, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "collector 1.0% of one CPU, SCHED_FIFO 7\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(late wakeups: slow timers, or a busy host)"));
  free(out);
  /* The placement of ticks is said in the tick's own unit. */
  s.tick_ns = 50000;
  lp__profile_test_set_stats(p, &s);
  out = print_to_string(p, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, " missed ticks (one at a random instant of each 50 \xc2\xb5s); collector "));
  free(out);
  fix_figures(p, 1000000000, 950);
  out = print_to_string(p, NULL, 0);
  CU_ASSERT_PTR_NULL(strstr(out, "note: the collector achieved"));
  free(out);
  lp_profile_free(p);
}

/* An empty label keeps its separator in folded stacks; a NULL label is "(null)". */
static void test_tree_folded_empty_and_null_labels(void) {
  lp_profile_t *p = NULL;
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  {
    LP_SCOPE("");
    {
      LP_SCOPE("child");
      sample(2);
    }
    {
      LP_SCOPE(NULL);
      sample(1);
    }
  }
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  char *out = print_to_string(p, NULL, 1);
  CU_ASSERT_STRING_EQUAL(out, ";child 2\n;(null) 1\n");
  free(out);
  CU_ASSERT_PTR_NOT_NULL(lp_node_find(lp_node_child(lp_profile_root(p), 0), "(null)"));
  lp_profile_free(p);
}

/*
 * Merging an exited thread's record under a session's mark moves the mark
 * with the counts, also onto nodes and records made after the mark (reused
 * free nodes among them). Run under ASan, this also checks every mark
 * access stays in bounds.
 */
static void test_tree_merge_moves_marks_with_counts(void) {
  static const lp_site_t s1 = {"s1", "f", "f", 1, LP_LEVEL_RUNTIME, 0, 0, 0, 0},
                         s2 = {"s2", "f", "f", 2, LP_LEVEL_RUNTIME, 0, 0, 0, 0};
  const lp_site_t *p1[] = {&s1}, *p2[] = {&s2};
  lp__agg_t a;
  lp__mark_t m;
  CU_ASSERT_EQUAL_FATAL(lp__agg_init(&a), 0);
  int x = lp__agg_add_thread(&a, 1, "x");
  CU_ASSERT_FATAL(x >= 0);
  uint32_t n = lp__agg_path(&a, a.threads[x].root, p1, 1);
  a.nodes[n].self += 3;
  a.threads[x].samples += 3;
  int g = lp__agg_add_thread(&a, 0, "g");
  CU_ASSERT_FATAL(g >= 0);
  a.threads[g].group = true;
  CU_ASSERT_EQUAL(lp__agg_merge(&a, (uint32_t)x, (uint32_t)g, NULL, 0), 0); /* frees x's nodes */
  CU_ASSERT_EQUAL_FATAL(lp__mark_take(&m, &a), 0);                          /* the session starts */
  int y = lp__agg_add_thread(&a, 2, "y");                                   /* reuses freed nodes */
  CU_ASSERT_FATAL(y >= 0);
  n = lp__agg_path(&a, a.threads[y].root, p2, 1);
  a.nodes[n].self += 5;
  a.threads[y].samples += 5;
  int h = lp__agg_add_thread(&a, 0, "h"); /* a record and nodes made after the mark */
  CU_ASSERT_FATAL(h >= 0);
  lp__mark_t *marks[] = {&m};
  CU_ASSERT_EQUAL(lp__agg_merge(&a, (uint32_t)y, (uint32_t)h, marks, 1), 0);
  lp_profile_stats_t st = {0};
  lp_profile_t *p = lp__profile_build(&a, &m, &st);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  /* The session sees y's 5 samples, now in h's record, and none of x's from before its mark. */
  CU_ASSERT_EQUAL(lp_node_samples(lp_node_find(lp_profile_root(p), "s2")), 5);
  CU_ASSERT_PTR_NULL(lp_node_find(lp_profile_root(p), "s1"));
  lp_profile_free(p);
  lp__mark_free(&m);
  lp__agg_free(&a);
}

static void test_tree_strerror_names_errors(void) {
  CU_ASSERT_STRING_EQUAL(lp_strerror(0), "success");
  CU_ASSERT_PTR_NOT_NULL(strstr(lp_strerror(-EBUSY), "already"));
  CU_ASSERT_PTR_NOT_NULL(strstr(lp_strerror(-EINVAL), "invalid"));
  CU_ASSERT_PTR_NOT_NULL(lp_strerror(-12345));
  CU_ASSERT_PTR_NOT_NULL(lp_strerror(12345));
}

/*
 * The flat view: seek under two parents and under a recursion is summed;
 * rec recurs on one stack and counts each sample once in its total.
 * 10 samples: insert{seek 2, self 1}, exec{seek 3}, rec{1, rec{2, rec{seek 1}}}.
 */
static void flat_seek(int n) {
  LP_SCOPE("seek");
  sample(n);
}

static void test_tree_flat_view(void) {
  lp_profile_t *p = NULL;
  lp_profile_opts_t o = {.hz = 1000};
  { LP_SCOPE("register"); }
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(&o), 0);
  {
    LP_SCOPE("insert");
    flat_seek(2);
    sample(1);
  }
  {
    LP_SCOPE("exec");
    flat_seek(3);
  }
  {
    LP_SCOPE("rec");
    sample(1);
    {
      LP_SCOPE("rec");
      sample(2);
      {
        LP_SCOPE("rec");
        flat_seek(1);
      }
    }
  }
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  fix_figures(p, 20000000, 10);
  lp_print_opts_t po = {LP_PRINT_FLAT, 0.0};
  char *s = print_to_string(p, &po, 0);
  const char *flat = strstr(s, "flat profile by wall time: ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(flat);
  if (getenv("LP_TEST_VERBOSE")) fputs(s, stderr);
  const char *table = strchr(flat, '\n');
  CU_ASSERT_PTR_NOT_NULL_FATAL(table);
  CU_ASSERT_STRING_EQUAL(table + 1,
                         "   total     self  label\n"
                         "  60.00%   60.00%  seek\n"
                         "  40.00%   30.00%  rec\n"
                         "  30.00%   10.00%  insert\n"
                         "  30.00%    0.00%  exec\n");
  free(s);
  /* min_percent hides rows by their total, and says how many */
  po.min_percent = 35.0;
  s = print_to_string(p, &po, 0);
  flat = strstr(s, "flat profile by wall time: ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(flat);
  CU_ASSERT_PTR_NOT_NULL(strstr(flat, "  40.00%   30.00%  rec\n(2 labels under 35% of total not shown)\n"));
  CU_ASSERT_PTR_NULL(strstr(flat, "insert"));
  free(s);
  /* without the flag, no table */
  s = print_to_string(p, NULL, 0);
  CU_ASSERT_PTR_NULL(strstr(s, "flat profile"));
  free(s);
  lp_profile_free(p);
}

/* What print_ex or write_folded_ex wrote for p with flags, and its return in *rc. */
static char *view(const lp_profile_t *p, uint32_t flags, int folded, int *rc) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  lp_print_opts_t po = {flags, 0.0};
  *rc = folded ? lp_profile_write_folded_ex(p, f, &po) : lp_profile_print_ex(p, f, &po);
  fclose(f);
  return text;
}

/*
 * A view by CPU of a profile that measured no CPU time is refused
 * (-ENODATA, nothing written), not a tree of zeros. Every table says its
 * weighting, and the flat table follows the tree's: here the wall samples
 * split io:math 3:1 and the CPU samples 1:3.
 */
static void test_tree_views_say_their_weighting(void) {
  int rc;
  lp_profile_t *p = make_profile();
  char *out = view(p, LP_PRINT_CPU, 0, &rc);
  CU_ASSERT_EQUAL(rc, -ENODATA);
  CU_ASSERT_STRING_EQUAL(out, "");
  free(out);
  out = view(p, LP_PRINT_CPU, 1, &rc);
  CU_ASSERT_EQUAL(rc, -ENODATA);
  CU_ASSERT_STRING_EQUAL(out, "");
  free(out);
  lp_profile_free(p);

  lp_profile_opts_t o = {.hz = 1000, .flags = LP_PROFILE_CPU};
  { LP_SCOPE("register"); }
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(&o), 0);
  {
    LP_SCOPE("io");
    sample(3);
    lp__cpu_test_sample(1);
  }
  {
    LP_SCOPE("math");
    sample(1);
    lp__cpu_test_sample(3);
  }
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  fix_figures(p, 20000000, 10);
  out = view(p, LP_PRINT_CPU | LP_PRINT_FLAT, 0, &rc);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(out, "labelprof profile by CPU time (1 threads, 2 CPU samples, 4.000 ms of CPU)\n" HEADER2
                              "CPU samples: one per 1 ms of a thread's CPU time, taken by the thread on its own CPU "
                              "timer (SIGRTMAX-4); 2.000 ms of CPU each on average\n"
                              "75.00% math\n"
                              "25.00% io\n"
                              "0.00% other (outside of any label)\n"
                              "flat profile by CPU time: each label summed over every place it appears; a recursive "
                              "label's CPU time counted once in its total\n"
                              "   total     self  label\n"
                              "  75.00%   75.00%  math\n"
                              "  25.00%   25.00%  io\n");
  free(out);
  out = view(p, LP_PRINT_FLAT, 0, &rc);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(out, "labelprof profile by wall time (1 threads, 4 samples)\n" HEADER2 "75.00% io\n"
                              "25.00% math\n"
                              "0.00% other (outside of any label)\n"
                              "flat profile by wall time: each label summed over every place it appears; a recursive "
                              "label's samples counted once in its total\n"
                              "   total     self  label\n"
                              "  75.00%   75.00%  io\n"
                              "  25.00%   25.00%  math\n");
  free(out);
  out = view(p, LP_PRINT_CPU, 1, &rc);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(out, "io 1000\nmath 3000\n");
  free(out);
  lp_profile_free(p);
}

int main(void) {
  CU_TestInfo tests[] = {
      LP_TEST(test_tree_shape_and_merge_by_text),
      LP_TEST(test_tree_print_gemmlowp_layout),
      LP_TEST(test_tree_print_min_percent_folds_into_other),
      LP_TEST(test_tree_print_counts_and_time),
      LP_TEST(test_tree_print_per_thread),
      LP_TEST(test_tree_folded_stacks),
      LP_TEST(test_tree_pprof_file),
      LP_TEST(test_tree_folded_sanitises_labels),
      LP_TEST(test_tree_truncated_stack_is_one_node),
      LP_TEST(test_tree_empty_profile_prints),
      LP_TEST(test_tree_reports_instrumentation_mistakes),
      LP_TEST(test_tree_names_each_sessions_first_mismatch),
      LP_TEST(test_tree_bad_arguments_and_write_errors),
      LP_TEST(test_tree_print_rejects_bad_min_percent),
      LP_TEST(test_tree_print_escapes_labels),
      LP_TEST(test_tree_print_notes_a_low_rate),
      LP_TEST(test_tree_folded_empty_and_null_labels),
      LP_TEST(test_tree_merge_moves_marks_with_counts),
      LP_TEST(test_tree_strerror_names_errors),
      LP_TEST(test_tree_flat_view),
      LP_TEST(test_tree_views_say_their_weighting),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("tree", tests);
}
