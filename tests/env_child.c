/*
 * env_child.c: a program that uses labels and nothing else, run by
 * test_env.c under LABELPROF_* variables. It never calls the API: the
 * environment alone must make it report.
 */
#include <labelprof.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile unsigned long sink;

int main(int argc, char **argv) {
  double ms = argc > 1 ? (double)strlen(argv[1]) * 10.0 : 100.0; /* "xxx" = 30 ms */
  double t0 = now_s();
  {
    LP_SCOPE("env work");
    while (now_s() - t0 < ms / 1000.0) {
      LP_SCOPE("env inner");
      for (int i = 0; i < 1000; i++) sink += (unsigned long)i;
    }
  }
  printf("child done\n");
  return 0;
}
