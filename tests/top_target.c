/*
 * top_target.c: a labelled program for tests/top.sh to attach to, started
 * with no LABELPROF_* variable and calling no session function.
 *
 *   top_target split   a thread "worker" spends 3 ms of each 10 ms in "a"
 *                      and 7 ms in "b", both inside "outer"; a thread
 *                      "sleeper" waits inside "wait"
 *   top_target churn   the same worker, and threads "churn" that come and
 *                      go, each labelled for about 2 ms
 *   top_target hostile the same worker, and a sleeper whose label and name
 *                      hold terminal escapes and bytes that are not UTF-8
 *   top_target deep    the same worker, and a sleeper that waits 40 labels
 *                      deep ("deep" inside "deep"...): a tree past the
 *                      command's first table sizes
 *
 * It prints "ready" once its threads are labelled. Then each line read from
 * standard input is answered with "pong N A B": the worker's rounds so far,
 * and the seconds it spent in "a" and in "b" by its own clock (the truth a
 * sampled split is checked against); end of input ends the program.
 */
#define _GNU_SOURCE
#include <labelprof.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_ulong rounds;
static _Atomic double in_a, in_b; /* seconds the worker spent in "a" and in "b", by its own clock */
static atomic_int labelled;
static atomic_int stop;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Busy until the clock has moved by s: wall time in the label, whatever the scheduler does. */
static void spin(double s) {
  double end = now_s() + s;
  while (now_s() < end) {
  }
}

static void *worker(void *arg) {
  (void)arg;
  lp_thread_set_name("worker");
  for (int first = 1; !atomic_load(&stop); first = 0) {
    LP_SCOPE("outer");
    {
      LP_SCOPE("a");
      double t0 = now_s();
      if (first) atomic_fetch_add(&labelled, 1);
      spin(0.003);
      atomic_store(&in_a, atomic_load(&in_a) + (now_s() - t0));
    }
    {
      LP_SCOPE("b");
      double t0 = now_s();
      spin(0.007);
      atomic_store(&in_b, atomic_load(&in_b) + (now_s() - t0));
    }
    atomic_fetch_add(&rounds, 1);
  }
  return NULL;
}

static int hostile, deep;

static void *sleeper(void *arg);

/* The sleeper's wait, under depth more labels "deep". */
static void *sleep_under(int depth) {
  if (depth == 0) return sleeper(NULL);
  LP_SCOPE("deep");
  return sleep_under(depth - 1);
}

static void *deep_sleeper(void *arg) {
  (void)arg;
  return sleep_under(40);
}

static void *sleeper(void *arg) {
  (void)arg;
  lp_thread_set_name(hostile ? "sl\x1b[2Jeeper\xff" : "sleeper");
  if (hostile) LP_BEGIN("\x1b[2J\x1b]0;title\x07wait\xc2\x9b\xfe");
  LP_SCOPE("wait");
  pthread_mutex_lock(&mu);
  atomic_fetch_add(&labelled, 1);
  while (!atomic_load(&stop)) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  if (hostile) LP_END();
  return NULL;
}

static void *churner(void *arg) {
  (void)arg;
  lp_thread_set_name("churn");
  LP_SCOPE("churn work");
  spin(0.002);
  return NULL;
}

static void *churn_loop(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    pthread_t th[4];
    int made = 0;
    for (int i = 0; i < 4; i++) made += pthread_create(&th[made], NULL, churner, NULL) == 0;
    for (int i = 0; i < made; i++) pthread_join(th[i], NULL);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "split") != 0 && strcmp(argv[1], "churn") != 0 && strcmp(argv[1], "hostile") != 0 &&
                    strcmp(argv[1], "deep") != 0)) {
    fprintf(stderr, "usage: top_target split|churn|hostile|deep\n");
    return 2;
  }
  bool churn = strcmp(argv[1], "churn") == 0;
  hostile = strcmp(argv[1], "hostile") == 0;
  deep = strcmp(argv[1], "deep") == 0;
  pthread_t w, s, c;
  if (pthread_create(&w, NULL, worker, NULL) != 0 || pthread_create(&s, NULL, deep ? deep_sleeper : sleeper, NULL) != 0 ||
      (churn && pthread_create(&c, NULL, churn_loop, NULL) != 0)) {
    fprintf(stderr, "top_target: cannot start its threads\n");
    return 1;
  }
  /* Ready once both threads are inside their labels: the attach must see them. */
  while (atomic_load(&labelled) < 2) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  printf("ready\n");
  fflush(stdout);
  char line[256];
  while (fgets(line, sizeof line, stdin)) {
    printf("pong %lu %.6f %.6f\n", (unsigned long)atomic_load(&rounds), atomic_load(&in_a), atomic_load(&in_b));
    fflush(stdout);
  }
  atomic_store(&stop, 1);
  pthread_mutex_lock(&mu);
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(w, NULL);
  pthread_join(s, NULL);
  if (churn) pthread_join(c, NULL);
  return 0;
}
