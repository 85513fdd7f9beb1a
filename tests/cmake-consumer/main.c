/*
 * main.c: the CMake consumer's program. It records two labelled scopes on a
 * timeline and checks that the library saw them: a program that compiles,
 * links and runs against the installed labelprof.
 */
#include <labelprof.h>
#include <stdio.h>

static int work(int n) {
  LP_SCOPE("work");
  return n * 2;
}

int main(void) {
  lp_trace_stats_t st;
  int rc = lp_trace_start(NULL);
  int v;
  if (rc != 0) {
    fprintf(stderr, "consumer: lp_trace_start: %s\n", lp_strerror(rc));
    return 1;
  }
  v = work(20) + work(1);
  rc = lp_trace_stop();
  if (rc == 0) rc = lp_trace_get_stats(&st);
  if (rc != 0) {
    fprintf(stderr, "consumer: %s\n", lp_strerror(rc));
    return 1;
  }
  if (v != 42 || st.recorded != 4) {
    fprintf(stderr, "consumer: %llu events recorded, expected 4\n", (unsigned long long)st.recorded);
    return 1;
  }
  printf("consumer: labelprof %s, %llu events recorded\n", LABELPROF_VERSION_STRING,
         (unsigned long long)st.recorded);
  return 0;
}
