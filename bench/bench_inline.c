/*
 * bench_inline.c: what a label adds to the function it is in, for
 * callgrind and objdump (bench/inline.sh runs it: `make bench`).
 *
 *   bench_inline N
 *
 * Calls a leaf (`return n->next ? n->next->v : 0`) and a function that ends
 * in a call, each with and without LP_SCOPE, N times; then runs a small
 * SQL-fronted B+tree store (inline_work.h) on N requests, with labels where
 * SQLite had them and without. No session runs: the labels' untraced cost.
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

#define FAN 32 /* keys per page */
#define KEYLEN 16
#define VALLEN 24
#define ROWLEN 48
#define MAXROWS 64
#define DIRTY 4096
#define LINE 96
enum { OP_INSERT = 1, OP_GET, OP_RANGE };
typedef struct page {
  int leaf, n, dirty;
  char keys[FAN][KEYLEN];
  char vals[FAN][VALLEN];        /* a leaf's values, text */
  struct page *kids[FAN + 1];    /* an interior page's children */
  struct page *next;             /* a leaf's right sibling */
} page_t;
typedef struct store {
  page_t *root, *pool;
  size_t used;
  long inserts;
  int ndirty;
  page_t *dirtied[DIRTY];
  uint64_t sum;
} store_t;
typedef struct op {
  int code, limit;
  char key[KEYLEN];
  char val[VALLEN];
} op_t;
typedef struct cursor {
  page_t *pg;
  int i;
} cursor_t;

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
  /* The store: as many requests as leaf calls, a third of them inserts, a fifth ranges of 20 rows. */
  long m = n;
  char (*lines)[LINE] = malloc((size_t)m * LINE);
  store_t *s1 = calloc(1, sizeof *s1), *s2 = calloc(1, sizeof *s2);
  size_t cap = (size_t)m / 4 + 64; /* every page but the root holds at least FAN / 2 keys */
  if (!lines || !s1 || !s2) return 1;
  s1->pool = calloc(cap, sizeof(page_t));
  s2->pool = calloc(cap, sizeof(page_t));
  if (!s1->pool || !s2->pool) return 1;
  s1->root = &s1->pool[s1->used++];
  s2->root = &s2->pool[s2->used++];
  s1->root->leaf = s2->root->leaf = 1;
  uint64_t r = 88172645463325252u;
  for (long i = 0; i < m; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    unsigned key = (unsigned)(r % 400000), kind = (unsigned)(r >> 40) % 15;
    if (kind < 5)
      snprintf(lines[i], LINE, "INSERT INTO t VALUES ('k%015u', 'v%u-%s')", key, (unsigned)(r >> 20) % 100000u,
               (r >> 50) & 1 ? "blue" : "green");
    else if (kind < 12)
      snprintf(lines[i], LINE, "SELECT v FROM t WHERE k = 'k%015u'", key);
    else
      snprintf(lines[i], LINE, "SELECT v FROM t WHERE k >= 'k%015u' LIMIT 20", key);
  }
  uint64_t a1 = lab_run(s1, lines, m), a2 = plain_run(s2, lines, m);
  if (a1 != a2) {
    fprintf(stderr, "bench_inline: the labelled store answered differently\n");
    return 1;
  }
  sink += (int)a1;
  free(lines);
  free(s1->pool);
  free(s2->pool);
  free(s1);
  free(s2);
  return sink == 42;
}
