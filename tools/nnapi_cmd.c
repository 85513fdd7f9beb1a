/*
 * nnapi_cmd.c: the options of `labelprof nnapi` (the work is in nnapi.c).
 */
#include "config.h"

#include "cmd.h"
#include "nnapi.h"
#include "reader.h"

#include <stdlib.h>
#include <string.h>

/* A gzip-compressed file: decompressed into memory through the command's input layer. */
static int run_gz(const char *file, int tt, int pe, int js) {
  lp_input_t *in = lp_input_open(file);
  if (!in) return LP_EXIT_BAD;
  size_t cap = 1 << 20, n = 0;
  char *buf = malloc(cap);
  int status = LP_EXIT_BAD;
  for (;;) {
    if (!buf) {
      fprintf(stderr, "labelprof nnapi: %s: out of memory\n", file);
      goto out;
    }
    if (n == cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        continue;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t got = lp_input_read(in, buf + n, cap - n);
    if (got < 0) goto out;
    if (got == 0) break;
    n += (size_t)got;
  }
  status = lp_nnapi_buffer(lp_input_name(in), buf, n, tt, pe, js, stdout);
out:
  free(buf);
  lp_input_close(in);
  return status;
}

static int is_gzip(const char *file) {
  if (strcmp(file, "-") == 0) return 0;
  FILE *f = fopen(file, "rb");
  if (!f) return 0;
  unsigned char m[2];
  int gz = fread(m, 1, 2, f) == 2 && m[0] == 0x1f && m[1] == 0x8b;
  fclose(f);
  return gz;
}

static const char *nnapi_usage_name = "nnapi";

int lp_cmd_nnapi(int argc, char **argv) {
  int tt = 0, pe = 0, js = 0;
  const char *file = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      lp_cmd_usage(nnapi_usage_name, stdout);
      return LP_EXIT_OK;
    } else if (strcmp(a, "--total-times") == 0) {
      tt = 1;
    } else if (strcmp(a, "--per-execution") == 0) {
      pe = 1;
    } else if (strcmp(a, "--json") == 0) {
      js = 1;
    } else if (strcmp(a, "--") == 0 && i + 1 < argc && !file && i + 2 == argc) {
      file = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      return lp_usage_error(nnapi_usage_name, "unknown option '%s'", a);
    } else if (file) {
      return lp_usage_error(nnapi_usage_name, "one FILE only");
    } else {
      file = a;
    }
  }
  if (!file) return lp_usage_error(nnapi_usage_name, "FILE is missing");
  if (is_gzip(file)) return run_gz(file, tt, pe, js);
  return lp_nnapi_run(file, tt, pe, js, stdout);
}
