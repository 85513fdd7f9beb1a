/*
 * bench_instr.c: instructions per label, for callgrind.
 *
 *   bench_instr MODE N
 *
 * MODE: plain (LP_SCOPE, no timeline), traced (LP_SCOPE while a timeline
 * records), phase and phase-traced (the same with LP_SCOPE_PHASE). It runs N
 * scopes in a loop. Run it under `valgrind --tool=callgrind` for two values
 * of N: the difference of the totals over the difference of N is the cost
 * of one scope, without the start-up. `make bench-instr` does this.
 */
#include "bench.h"

#include <labelprof.h>
#include <string.h>

static void __attribute__((noinline)) loop_plain(long n) {
  for (long i = 0; i < n; i++) {
    LP_SCOPE("bench");
    BENCH_BARRIER();
  }
}

#ifdef LP_SCOPE_PHASE
static void __attribute__((noinline)) loop_phase(long n) {
  for (long i = 0; i < n; i++) {
    LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "bench");
    BENCH_BARRIER();
  }
}
#endif

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: bench_instr plain|traced|phase|phase-traced N\n");
    return 2;
  }
  long n = strtol(argv[2], NULL, 10);
  const char *mode = argv[1];
  int traced = strstr(mode, "traced") != NULL;
  if (traced) {
    lp_trace_opts_t o = {.budget_bytes = (uint64_t)(n + 1024) * 40, .clock = LP_CLOCK_MONOTONIC};
    if (lp_trace_start(&o) != 0) return 1;
  }
  if (strncmp(mode, "plain", 5) == 0 || strcmp(mode, "traced") == 0)
    loop_plain(n);
#ifdef LP_SCOPE_PHASE
  else if (strncmp(mode, "phase", 5) == 0)
    loop_phase(n);
#endif
  else
    return 2;
  if (traced) lp_trace_stop();
  return 0;
}
