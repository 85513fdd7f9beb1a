/*
 * bench_inline.c: what a label adds to the function it is in, for
 * callgrind and objdump (bench/inline.sh runs it: `make bench`).
 *
 *   bench_inline N
 *
 * Calls a leaf (`return n->next ? n->next->v : 0`) and a function that ends
 * in a call, each with and without LP_SCOPE, N times; then runs a small
 * key-value store (inline_work.h) on N requests, with labels on its small
 * functions and without. No session runs: the labels' untraced cost.
 */
#include "bench.h"

#include <labelprof.h>
#include <string.h>

typedef struct node { struct node *next; int v; } node_t;
__attribute__((noinline)) int leaf_plain(const node_t *n);
__attribute__((noinline)) int leaf_label(const node_t *n);
__attribute__((noinline)) int call_plain(int x);
__attribute__((noinline)) int call_label(int x);
__attribute__((noinline)) int callee(int x);

int leaf_plain(const node_t *n) { return n->next ? n->next->v : 0; }
int leaf_label(const node_t *n) {
  LP_SCOPE("leaf");
  return n->next ? n->next->v : 0;
}
int callee(int x) {
  __asm__ __volatile__("" : "+r"(x));
  return x;
}
int call_plain(int x) { return callee(x + 1); }
int call_label(int x) {
  LP_SCOPE("call");
  return callee(x + 1);
}

#define TABLE 65536
typedef struct slot {
  int used;
  uint64_t h;
  size_t klen, vlen;
  char key[24], val[32];
} slot_t;
typedef struct table {
  slot_t slots[TABLE];
} table_t;

#define W(x) lab_##x
#define LABEL(s) LP_SCOPE(s)
#include "inline_work.h"
#undef W
#undef LABEL
#define W(x) plain_##x
#define LABEL(s) ((void)0)
#include "inline_work.h"

int main(int argc, char **argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
  node_t b = {NULL, 7}, a = {&b, 1};
  node_t *volatile pa = &a;
  volatile int sink = 0;
  for (long i = 0; i < n; i++) sink += leaf_plain(pa);
  for (long i = 0; i < n; i++) sink += leaf_label(pa);
  for (long i = 0; i < n; i++) sink += call_plain((int)i);
  for (long i = 0; i < n; i++) sink += call_label((int)i);
  char (*lines)[64] = malloc((size_t)n * 64);
  table_t *t1 = calloc(1, sizeof *t1), *t2 = calloc(1, sizeof *t2);
  if (!lines || !t1 || !t2) return 1;
  uint64_t r = 88172645463325252u;
  for (long i = 0; i < n; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    unsigned key = (unsigned)(r % 20000);
    if (r % 4 == 0)
      snprintf(lines[i], 64, "put user:%u value-%u-%lu", key, key * 7u, (unsigned long)(r % 1000));
    else
      snprintf(lines[i], 64, "get user:%u", key);
  }
  sink += (int)lab_run(t1, lines, n);
  sink += (int)plain_run(t2, lines, n);
  free(lines);
  free(t1);
  free(t2);
  return sink == 42;
}
