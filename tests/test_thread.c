/* test_thread.c: registration, names, threads that exit while sampled, fork. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

static const lp_thread_info_t *find_thread(const lp_profile_t *p, const char *name, lp_thread_info_t *buf) {
  for (size_t i = 0; i < lp_profile_thread_count(p); i++)
    if (lp_profile_thread(p, i, buf) == 0 && strcmp(buf->name, name) == 0) return buf;
  return NULL;
}

static void test_thread_set_name_rejects_null(void) {
  CU_ASSERT_EQUAL(lp_thread_set_name(NULL), -EINVAL);
}

static pthread_barrier_t gate;

static void *named_worker(void *arg) {
  lp_thread_set_name((const char *)arg);
  LP_SCOPE("named work");
  pthread_barrier_wait(&gate); /* in the scope: the main thread samples */
  pthread_barrier_wait(&gate); /* sampled: exit */
  return NULL;
}

/* A thread that exits while the collector runs keeps its samples, under its name. */
static void test_thread_exited_thread_keeps_samples_and_name(void) {
  pthread_t th;
  lp_profile_t *p;
  lp_thread_info_t info;
  char longname[100];
  memset(longname, 'n', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&gate, NULL, 2), 0);
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, named_worker, "gone but counted"), 0);
  pthread_barrier_wait(&gate);
  CU_ASSERT_EQUAL(lp__profile_sample_now(), 0);
  CU_ASSERT_EQUAL(lp__profile_sample_now(), 0);
  pthread_barrier_wait(&gate);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(lp__profile_sample_now(), 0); /* after the exit: nothing of it is touched */
  CU_ASSERT_EQUAL(lp_thread_set_name(longname), 0);
  CU_ASSERT_EQUAL(lp__profile_sample_now(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(find_thread(p, "gone but counted", &info));
  CU_ASSERT_EQUAL(info.samples, 2);
  CU_ASSERT_EQUAL(lp_node_samples(lp_node_find(info.root, "named work")), 2);
  /* a name is cut to 63 bytes, and a rename while sampled shows */
  longname[LP__NAME_MAX - 1] = '\0';
  CU_ASSERT_PTR_NOT_NULL(find_thread(p, longname, &info));
  lp_profile_free(p);
  pthread_barrier_destroy(&gate);
}

static void *default_name_worker(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "os-name");
  LP_SCOPE("default named"); /* registers: the OS name is read now */
  pthread_barrier_wait(&gate);
  pthread_barrier_wait(&gate);
  return NULL;
}

static void test_thread_default_name_is_the_os_name(void) {
  pthread_t th;
  lp_profile_t *p;
  lp_thread_info_t info;
  CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&gate, NULL, 2), 0);
  CU_ASSERT_EQUAL_FATAL(lp__profile_start_manual(NULL), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, default_name_worker, NULL), 0);
  pthread_barrier_wait(&gate);
  CU_ASSERT_EQUAL(lp__profile_sample_now(), 0);
  pthread_barrier_wait(&gate);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  CU_ASSERT_PTR_NOT_NULL(find_thread(p, "os-name", &info));
  CU_ASSERT_NOT_EQUAL(info.tid, 0);
  CU_ASSERT_NOT_EQUAL(info.tid, (uint64_t)getpid()); /* its own kernel thread id */
  lp_profile_free(p);
  pthread_barrier_destroy(&gate);
}

/*
 * 1000 threads start, use labels and exit while the collector samples at a
 * high rate and the main thread samples too: no crash, no leak, no race, and
 * every thread's sample is in the profile.
 *
 * Each worker waits at both barriers inside "churn/inner", so the main
 * thread's lp__profile_sample_now() between them finds all of its batch
 * there: at least one sample in churn/inner per thread, whatever the
 * collector's ticks add. (A worker that left "inner" as soon as the first
 * barrier let it go was often past it when the main thread, woken by the
 * same barrier, took its sample: from 0 to about 900 of the 1000 samples
 * landed in churn/inner, depending on how the threads were scheduled, and
 * the count rested on the ticks.)
 */
enum { CHURN_THREADS = 1000, BATCH = 8 };

static void *churn_worker(void *arg) {
  (void)arg;
  LP_SCOPE("churn");
  {
    LP_SCOPE("inner");
    pthread_barrier_wait(&gate); /* the batch is in churn/inner: the main thread samples */
    pthread_barrier_wait(&gate); /* sampled: leave, and exit while the collector ticks */
  }
  return NULL;
}

static void test_thread_1000_threads_come_and_go_while_sampled(void) {
  lp_profile_opts_t o = {.hz = 20000};
  lp_profile_t *p;
  lp_profile_stats_t s;
  pthread_t th[BATCH];
  int failures = 0;
  CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&gate, NULL, BATCH + 1), 0);
  CU_ASSERT_EQUAL_FATAL(lp_profile_start(&o), 0);
  for (int done = 0; done < CHURN_THREADS; done += BATCH) {
    for (int i = 0; i < BATCH; i++)
      if (pthread_create(&th[i], NULL, churn_worker, NULL) != 0) failures++;
    pthread_barrier_wait(&gate); /* all inside "churn/inner" */
    if (lp__profile_sample_now() != 0) failures++;
    pthread_barrier_wait(&gate); /* now they may leave the scopes and exit */
    for (int i = 0; i < BATCH; i++)
      if (pthread_join(th[i], NULL) != 0) failures++;
  }
  CU_ASSERT_EQUAL(failures, 0);
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  lp_profile_get_stats(p, &s);
  const lp_node_t *inner = lp_node_find(lp_node_find(lp_profile_root(p), "churn"), "inner");
  CU_ASSERT_PTR_NOT_NULL_FATAL(inner);
  CU_ASSERT(lp_node_samples(inner) >= CHURN_THREADS);
  /* Every thread counted; exited ones beyond the 64 newest merged into one record for their shared name. */
  printf("\n    %zu thread records ", lp_profile_thread_count(p));
  CU_ASSERT(s.threads >= CHURN_THREADS);
  CU_ASSERT(lp_profile_thread_count(p) <= 64 + 2 + 1);
  uint64_t sum = 0, threads = 0, merged_records = 0, workers = 0;
  lp_thread_info_t info;
  for (size_t i = 0; i < lp_profile_thread_count(p); i++) {
    CU_ASSERT_EQUAL(lp_profile_thread(p, i, &info), 0);
    sum += info.samples;
    threads += info.merged ? info.merged : 1;
    if (info.merged) {
      merged_records++;
      CU_ASSERT_EQUAL(info.tid, 0);
    }
    /* A worker's record, its own or merged: each of its threads has its sample from the barrier in churn/inner. */
    const lp_node_t *churn = lp_node_find(info.root, "churn");
    if (churn) {
      workers += info.merged ? info.merged : 1;
      CU_ASSERT(lp_node_samples(lp_node_find(churn, "inner")) >= (info.merged ? info.merged : 1));
    }
  }
  CU_ASSERT_EQUAL(merged_records, 1);
  CU_ASSERT_EQUAL(workers, CHURN_THREADS);
  CU_ASSERT_EQUAL(sum, s.samples);
  CU_ASSERT_EQUAL(lp_node_samples(lp_profile_root(p)), s.samples);
  CU_ASSERT_EQUAL(s.threads, threads);
  printf("\n    %zu threads, %llu samples in %llu ticks ", lp_profile_thread_count(p),
         (unsigned long long)s.samples, (unsigned long long)s.ticks);
  lp_profile_free(p);
  pthread_barrier_destroy(&gate);
}

/*
 * fork() while the collector runs: the child has no collector thread, so it
 * must not try to stop or join one, and its labels must still work.
 */
static void test_thread_fork_while_profiling(void) {
  lp_profile_opts_t o = {.hz = 5000};
  lp_profile_t *p;
  int status = -1;
  LP_SCOPE("before fork");
  CU_ASSERT_EQUAL_FATAL(lp_profile_start(&o), 0);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int bad = 0;
    if (lp_profile_running()) bad |= 1;
    if (lp_profile_stop(NULL) != -EINVAL) bad |= 2;
    { LP_SCOPE("in child"); }
    /* A child of a threaded process should not start threads (POSIX; TSan enforces it): sample by hand. */
    if (lp__profile_start_manual(&o) != 0) bad |= 4;
    { LP_SCOPE("child work"); }
    if (lp__profile_sample_now() != 0) bad |= 8;
    lp_profile_t *cp = NULL;
    if (lp_profile_stop(&cp) != 0 || !cp) bad |= 16;
    if (cp && lp_profile_thread_count(cp) != 1) bad |= 32; /* only the forking thread exists here */
    lp_profile_free(cp);
    _exit(bad);
  }
  CU_ASSERT_EQUAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFEXITED(status));
  CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
  CU_ASSERT_EQUAL(lp_profile_running(), 1);
  CU_ASSERT_EQUAL(lp__profile_sample_now(), 0);
  CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
  CU_ASSERT(lp_node_samples(lp_node_find(lp_profile_root(p), "before fork")) >= 1);
  lp_profile_free(p);
}

int main(void) {
  CU_TestInfo tests[] = {
      LP_TEST(test_thread_set_name_rejects_null),
      LP_TEST(test_thread_exited_thread_keeps_samples_and_name),
      LP_TEST(test_thread_default_name_is_the_os_name),
      LP_TEST(test_thread_1000_threads_come_and_go_while_sampled),
      LP_TEST(test_thread_fork_while_profiling),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("thread", tests);
}
