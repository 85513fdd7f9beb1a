/*
 * subs_child.c: a program with known label calls, run by test_subs_env.c
 * under LABELPROF_SUBSCRIBERS. It prints one line and exits with status 3,
 * so that a test can see a subscriber change neither.
 *
 *   subs_child [threads]
 *
 * Each working thread (one, or two with "threads"): 100 scopes "alpha",
 * each holding 10 scopes "beta"; 5 instants "gamma"; a manual pair "delta".
 */
#include <labelprof.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static __thread volatile unsigned long sink; /* per thread: the threads share nothing */

static void *work(void *arg) {
  (void)arg;
  for (int i = 0; i < 100; i++) {
    LP_SCOPE("alpha");
    for (int j = 0; j < 10; j++) {
      LP_SCOPE("beta");
      sink += (unsigned long)j;
    }
  }
  for (int i = 0; i < 5; i++) LP_INSTANT("gamma");
  LP_BEGIN("delta");
  LP_END();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "threads") == 0) {
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
      if (pthread_create(&th[i], NULL, work, NULL) != 0) return 1;
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  } else {
    work(NULL);
  }
  printf("subs_child: done\n");
  return 3;
}
