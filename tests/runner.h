/*
 * runner.h: the CUnit entry point shared by the test binaries.
 *
 * CUnit's basic runner returns 0 even when tests fail, so the exit status is
 * taken from the failure counts.
 */
#ifndef LP_TESTS_RUNNER_H
#define LP_TESTS_RUNNER_H

#include <CUnit/Basic.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/*
 * LP_TEST_SLOW=N (1 to 1000): the tests run about N times slower than
 * natively, as under qemu-user emulation (CI's aarch64 stage sets it). Tests
 * whose loops or timing bands assume native speed scale them by N; none is
 * skipped. Set it only where the tests really are that slow: a native run
 * told it is slow does N times the work. Unset or empty means 1; any other
 * value stops the test with a hard error (exit 99).
 * (Not a LABELPROF_* name: those are the library's.)
 */
static inline unsigned lp_test_slow(void) {
  const char *s = getenv("LP_TEST_SLOW");
  char *end;
  unsigned long n;
  if (!s || !*s) return 1;
  n = strtoul(s, &end, 10);
  if (*end || n < 1 || n > 1000) {
    fprintf(stderr, "LP_TEST_SLOW=%s: expected a whole number from 1 to 1000\n", s);
    exit(99);
  }
  return (unsigned)n;
}

/*
 * The test program's temporary directory: made under $TMPDIR (/tmp when
 * unset) as lp-TAG-XXXXXX, and removed with everything in it when the
 * program exits, whether its tests passed or failed. A child forked from the
 * program leaves it alone. Returns its path; a directory that cannot be made
 * stops the program with exit status 2 (an error, not a failed test).
 */
static char lp_test_dir_path[160];
static pid_t lp_test_dir_owner;

static inline int lp_test_rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f) {
  (void)st;
  (void)f;
  if ((flag == FTW_DP ? rmdir(p) : unlink(p)) != 0 && errno != ENOENT)
    fprintf(stderr, "cannot remove %s: %s\n", p, strerror(errno));
  return 0;
}

static inline void lp_test_tmpdir_remove(void) {
  if (!lp_test_dir_path[0] || getpid() != lp_test_dir_owner) return;
  nftw(lp_test_dir_path, lp_test_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  lp_test_dir_path[0] = '\0';
}

static inline const char *lp_test_tmpdir(const char *tag) {
  const char *t = getenv("TMPDIR");
  if (!t || !*t) t = "/tmp";
  /* The tests build file names in buffers of 256 bytes from this path. */
  int n = snprintf(lp_test_dir_path, sizeof lp_test_dir_path, "%s/lp-%s-XXXXXX", t, tag);
  if (n < 0 || (size_t)n >= sizeof lp_test_dir_path - 32) {
    fprintf(stderr, "TMPDIR=%s is too long for the tests (at most %zu bytes)\n", t,
            sizeof lp_test_dir_path - 32 - strlen(tag) - 12);
    exit(2);
  }
  if (!mkdtemp(lp_test_dir_path)) {
    fprintf(stderr, "cannot make a directory %s: %s\n", lp_test_dir_path, strerror(errno));
    exit(2);
  }
  lp_test_dir_owner = getpid();
  if (atexit(lp_test_tmpdir_remove) != 0) {
    lp_test_tmpdir_remove();
    fprintf(stderr, "atexit failed\n");
    exit(2);
  }
  return lp_test_dir_path;
}

/* The whole file as a string (free it), or NULL if it cannot be read. */
static inline char *lp_test_slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, len = 0, n;
  char chunk[4096];
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      char *nb = (char *)realloc(buf, cap);
      if (!nb) break;
      buf = nb;
    }
    memcpy(buf + len, chunk, n);
    len += n;
  }
  fclose(f);
  if (!buf)
    buf = (char *)calloc(1, 1);
  else
    buf[len] = '\0';
  return buf;
}

#endif
