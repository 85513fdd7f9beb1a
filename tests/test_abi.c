/*
 * test_abi.c: a program built against a labelprof.h whose ABI number is
 * not the library's (Makefile.am builds it against a copy of the headers
 * with LP_IMPL_ABI changed, and nothing else). The library must say so
 * once, on stderr, and disable labels: no crash, nothing recorded, no
 * subscriber called, while the rest of the API still answers.
 *
 * The check runs when the program is loaded (the header's constructor), so
 * the program runs its labels in a child of its own, whose stderr it reads.
 */
#include <labelprof.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

#if LP_IMPL_ABI != LP_TEST_OTHER_ABI
#error "test_abi.c is built against the copy of the headers with another ABI number (Makefile.am)"
#endif

static int callbacks;
static void counted(const lp_notification_t *n, void *d, void **slot) {
  (void)n;
  (void)d;
  (void)slot;
  __atomic_add_fetch(&callbacks, 1, __ATOMIC_RELAXED);
}

static void *labels(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++) {
    LP_SCOPE("outer");
    LP_SCOPE_L(LP_LEVEL_DEBUG, "debug");
    LP_BEGIN("manual");
    LP_INSTANT("instant");
    LP_COUNTER("counter", i);
    LP_END();
  }
  LP_END(); /* nothing open: counted, not crashed */
  return NULL;
}

/* The child: labels on two threads under a session and a subscriber; what it saw on stdout. */
static int child(const char *dir) {
  lp_subscriber_t *s;
  uint8_t stream;
  int failed = 0;
  failed |= lp_subscriber_create(NULL, &s) != 0;
  failed |= lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, counted) != 0;
  failed |= lp_stream_register("test.abi", &stream) != 0;
  failed |= lp_subscriber_set_callback(s, stream, LP_TP_SIGNAL, counted) != 0;
  failed |= lp_subscriber_set_enabled(s, 1) != 0;
  failed |= lp_trace_start(NULL) != 0;
  pthread_t th;
  failed |= pthread_create(&th, NULL, labels, NULL) != 0;
  labels(NULL);
  failed |= pthread_join(th, NULL) != 0;
  lp_notify(stream, LP_TP_SIGNAL, NULL, NULL, 0, NULL);
  failed |= lp_trace_stop() != 0;
  lp_trace_stats_t st;
  failed |= lp_trace_get_stats(&st) != 0;
  char path[512];
  snprintf(path, sizeof path, "%s/abi.json", dir);
  failed |= lp_trace_write_json(path, "abi") != 0;
  unlink(path);
  printf("failed=%d recorded=%llu dropped=%llu callbacks=%d\n", failed, (unsigned long long)st.recorded,
         (unsigned long long)st.dropped, __atomic_load_n(&callbacks, __ATOMIC_RELAXED));
  return 0;
}

static char self_path[4096];
static const char *dir;

/* Runs the child with its stdout and stderr in files; its exit status. */
static int run_child(const char *out, const char *err) {
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(out, "w", stdout) || !freopen(err, "w", stderr)) _exit(98);
    execl(self_path, self_path, "--child", dir, (char *)NULL);
    _exit(97);
  }
  int status = -1;
  if (pid < 0 || lp_test_wait(pid, 0, &status) != 0) return -1;
  return status;
}

static char *slurp(const char *path) {
  static char buf[8192];
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = '\0';
  return buf;
}

static void test_abi_mismatch_disables_labels(void) {
  char out[600], err[600];
  snprintf(out, sizeof out, "%s/out", dir);
  snprintf(err, sizeof err, "%s/err", dir);
  int status = run_child(out, err);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* no crash, no abort */
  char *e = strdup(slurp(err));
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  printf("\n    stderr: %s", e);
  char want[128];
  snprintf(want, sizeof want, "built with labelprof.h of ABI %u, and this liblabelprof has ABI %u", LP_TEST_OTHER_ABI,
           LP_TEST_OTHER_ABI - 1000);
  CU_ASSERT_PTR_NOT_NULL(strstr(e, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(e, "labels are disabled"));
  const char *first = strstr(e, "labelprof:");
  CU_ASSERT(first && !strstr(first + 1, "labelprof:")); /* once, though every unit of the program checks */
  free(e);
  const char *o = slurp(out);
  printf("    stdout: %s", o);
  CU_ASSERT_STRING_EQUAL(o, "failed=0 recorded=0 dropped=0 callbacks=0\n");
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
  ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
  if (n <= 0) return 2;
  self_path[n] = '\0';
  dir = lp_test_tmpdir("abi");
  CU_TestInfo tests[] = {LP_TEST(test_abi_mismatch_disables_labels), CU_TEST_INFO_NULL};
  return lp_test_main("abi", tests);
}
