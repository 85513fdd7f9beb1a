/*
 * matmul.c: a blocked matrix multiply on several threads, labelled, with the
 * percentage tree printed at the end.
 *
 *     ./examples/matmul [size] [threads]
 *
 * C = A x B for square float matrices. Each thread owns a band of rows of C
 * and, for every block, packs a panel of A and of B into contiguous buffers,
 * runs a register-blocked kernel on them, and unpacks the result into C:
 * the shape of a real GEMM, with its phases labelled.
 */
#define _POSIX_C_SOURCE 200809L

#include <labelprof.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 64

typedef struct job {
  const float *a, *b;
  float *c;
  int n, row0, row1, id;
} job_t;

static void pack(float *dst, const float *src, int n, int r0, int c0) {
  LP_SCOPE_L(LP_LEVEL_OPERATOR, "pack");
  for (int r = 0; r < BLOCK; r++) memcpy(dst + r * BLOCK, src + (size_t)(r0 + r) * n + c0, BLOCK * sizeof *dst);
}

static void kernel(float *acc, const float *pa, const float *pb) {
  LP_SCOPE_L(LP_LEVEL_OPERATOR, "kernel");
  for (int i = 0; i < BLOCK; i++)
    for (int k = 0; k < BLOCK; k++) {
      float x = pa[i * BLOCK + k];
      for (int j = 0; j < BLOCK; j++) acc[i * BLOCK + j] += x * pb[k * BLOCK + j];
    }
}

static void unpack(float *c, const float *acc, int n, int r0, int c0) {
  LP_SCOPE_L(LP_LEVEL_OPERATOR, "unpack");
  for (int r = 0; r < BLOCK; r++) memcpy(c + (size_t)(r0 + r) * n + c0, acc + r * BLOCK, BLOCK * sizeof *acc);
}

static void *worker(void *arg) {
  job_t *j = arg;
  char name[32];
  snprintf(name, sizeof name, "worker %d", j->id);
  lp_thread_set_name(name);
  float *pa = malloc(BLOCK * BLOCK * sizeof *pa), *pb = malloc(BLOCK * BLOCK * sizeof *pb);
  float *acc = malloc(BLOCK * BLOCK * sizeof *acc);
  if (!pa || !pb || !acc) {
    free(pa);
    free(pb);
    free(acc);
    return "out of memory";
  }
  LP_SCOPE("matmul");
  for (int r0 = j->row0; r0 < j->row1; r0 += BLOCK)
    for (int c0 = 0; c0 < j->n; c0 += BLOCK) {
      memset(acc, 0, BLOCK * BLOCK * sizeof *acc);
      for (int k0 = 0; k0 < j->n; k0 += BLOCK) {
        pack(pa, j->a, j->n, r0, k0);
        pack(pb, j->b, j->n, k0, c0);
        kernel(acc, pa, pb);
      }
      unpack(j->c, acc, j->n, r0, c0);
    }
  free(pa);
  free(pb);
  free(acc);
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1536;
  int nthreads = argc > 2 ? atoi(argv[2]) : 4;
  if (n < BLOCK || n % BLOCK || nthreads < 1 || nthreads > 64) {
    fprintf(stderr, "usage: %s [size, a multiple of %d] [threads, 1 to 64]\n", argv[0], BLOCK);
    return 2;
  }
  float *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b);
  float *c = calloc((size_t)n * n, sizeof *c);
  pthread_t th[64];
  job_t jobs[64];
  if (!a || !b || !c) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < (size_t)n * n; i++) {
    a[i] = (float)(i % 7) - 3.0f;
    b[i] = (float)(i % 5) * 0.5f;
  }

  int rc = lp_profile_start(NULL);
  if (rc) fprintf(stderr, "lp_profile_start: %s\n", lp_strerror(rc));
  int blocks = n / BLOCK, started = 0;
  for (int t = 0; t < nthreads; t++) {
    jobs[t] = (job_t){a, b, c, n, blocks * t / nthreads * BLOCK, blocks * (t + 1) / nthreads * BLOCK, t};
    if (pthread_create(&th[t], NULL, worker, &jobs[t]) != 0) break;
    started++;
  }
  int failed = started < nthreads;
  for (int t = 0; t < started; t++) {
    void *res;
    pthread_join(th[t], &res);
    failed |= res != NULL;
  }
  lp_profile_t *p = NULL;
  if (rc == 0 && (rc = lp_profile_stop(&p)) == 0) {
    lp_profile_print(p, stdout);
    lp_profile_free(p);
  }

  /* Check a few entries against the plain definition. */
  for (int s = 0; s < 16 && !failed; s++) {
    int i = (s * 37) % n, k = (s * 101) % n;
    double want = 0;
    for (int m = 0; m < n; m++) want += (double)a[(size_t)i * n + m] * b[(size_t)m * n + k];
    if (fabs(want - c[(size_t)i * n + k]) > 1e-3 * (1 + fabs(want))) {
      fprintf(stderr, "wrong result at (%d, %d): %f, want %f\n", i, k, c[(size_t)i * n + k], want);
      failed = 1;
    }
  }
  free(a);
  free(b);
  free(c);
  return failed || rc ? 1 : 0;
}
