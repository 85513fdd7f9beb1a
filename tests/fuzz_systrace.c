/*
 * fuzz_systrace.c: fuzzes the systrace reader and the NNAPI summary.
 *
 * One input = one file's bytes: it is scanned for marks (tools/read/ftrace.c)
 * and summarised under three flag sets (tools/nnapi_summary.c, tools/attrib.c),
 * output to /dev/null. Any crash, sanitizer report or hang is a failure.
 * The same bytes go through the project's JSON string escaper
 * (lib/jsonesc.c, which writes nnapi --json's strings) in both its modes:
 * the output must be a JSON string a strict reader accepts (json_check.h),
 * and ASCII text must come back unchanged; otherwise the run aborts.
 *
 * Built two ways:
 *  - with libFuzzer (clang, -DLP_LIBFUZZER): LLVMFuzzerTestOneInput only;
 *    tests/fuzz_systrace.sh runs it for a bounded time on the seed corpus;
 *  - with any compiler: main() runs every seed and regression input, then a
 *    deterministic mutation loop (a fixed PRNG seed) for LP_FUZZ_SECONDS
 *    (default 10). Iteration i's input depends only on i, so
 *    `fuzz_systrace --dump I OUT SEEDS...` writes the input that failed.
 * Inputs that once crashed live in tests/data/systrace-fuzz/ and run first.
 */
#include "config.h"

#include "nnapi.h"
#include "ftrace.h"
#include "../lib/jsonesc.h"
#include "json_check.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static FILE *devnull;

static int count_mark(void *ctx, const struct lp_st_mark *m) {
  size_t *n = ctx;
  /* touch every field the callers use */
  *n += m->task_len + m->mark_len + m->ts_len + m->tgid_len + (size_t)(m->t > 0);
  return 0;
}

static void check_escaper(const char *buf, size_t size) {
  char *out = malloc(LP__JSON_ESC_MAX * size + 1), *dec = malloc(LP__JSON_ESC_MAX * size + 1);
  if (!out || !dec) {
    free(out);
    free(dec);
    return;
  }
  int ascii_in = 1;
  for (size_t i = 0; i < size; i++)
    if ((unsigned char)buf[i] >= 0x80) ascii_in = 0;
  for (int ascii = 0; ascii < 2; ascii++) {
    const char *p = buf;
    char *e = lp__json_escape_chars(out, &p, buf + size, buf + size, ascii);
    size_t n = (size_t)(e - out), declen = 0;
    if (p != buf + size || n > LP__JSON_ESC_MAX * size || jc_string(out, n, ascii, dec, &declen) != 0 ||
        (ascii_in && (declen != size || memcmp(dec, buf, size) != 0))) {
      fprintf(stderr, "fuzz_systrace: the JSON escaper (ascii %d) wrote an invalid or wrong string\n", ascii);
      abort();
    }
  }
  free(out);
  free(dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!devnull) devnull = fopen("/dev/null", "w");
  if (!devnull) return 0;
  /* an exact-size copy, so that a read past the end is caught */
  char *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  size_t n = 0;
  int hdr;
  struct lp_st_error e;
  check_escaper(buf, size);
  lp_st_scan(buf, size, count_mark, &n, &hdr, &e);
  lp_nnapi_buffer("fuzz", buf, size, 0, 0, 0, devnull);
  lp_nnapi_buffer("fuzz", buf, size, 1, 1, 0, devnull);
  lp_nnapi_buffer("fuzz", buf, size, 0, 1, 1, devnull);
  free(buf);
  return 0;
}

#ifndef LP_LIBFUZZER

typedef struct blob {
  char *p;
  size_t n;
} blob_t;

static blob_t *seeds;
static size_t nseeds;

static int add_seed(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  blob_t b = {NULL, 0};
  size_t cap = 0;
  char tmp[4096];
  size_t r;
  while ((r = fread(tmp, 1, sizeof tmp, f)) > 0) {
    if (b.n + r > cap) {
      cap = (b.n + r) * 2;
      char *np = realloc(b.p, cap);
      if (!np) {
        free(b.p);
        fclose(f);
        return -1;
      }
      b.p = np;
    }
    memcpy(b.p + b.n, tmp, r);
    b.n += r;
  }
  fclose(f);
  blob_t *ns = realloc(seeds, (nseeds + 1) * sizeof *ns);
  if (!ns) {
    free(b.p);
    return -1;
  }
  seeds = ns;
  seeds[nseeds++] = b;
  return 0;
}

static int add_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    perror(path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) return add_seed(path);
  DIR *d = opendir(path);
  if (!d) {
    perror(path);
    return -1;
  }
  struct dirent *de;
  char **names = NULL;
  size_t nn = 0;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    char **x = realloc(names, (nn + 1) * sizeof *x);
    if (!x) break;
    names = x;
    size_t l = strlen(path) + strlen(de->d_name) + 2;
    names[nn] = malloc(l);
    if (!names[nn]) break;
    snprintf(names[nn], l, "%s/%s", path, de->d_name);
    nn++;
  }
  closedir(d);
  /* sorted, so that the corpus order (and the loop) does not depend on the file system */
  for (size_t i = 1; i < nn; i++)
    for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char *t = names[j];
      names[j] = names[j - 1];
      names[j - 1] = t;
    }
  int rc = 0;
  for (size_t i = 0; i < nn; i++) {
    if (rc == 0) rc = add_seed(names[i]);
    free(names[i]);
  }
  free(names);
  return rc;
}

static uint64_t rng = 0x5eed5eed12345678ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static const char *const tokens[] = {
    "[SW]", "[SUB]", "[NN_LA_PO]", "[NN_LA_PWU]", "[NN_LA_PBM]", "[NN_LA_PE]", "[NN_LR_PE]", "[NN_LC_PCO]",
    "[NN_LI_PC]", "[NN_LD_PE]", "[NN_LU_PU]", "[NN_LR_PU]", "[NN_LX_PI]", "[NN_", "]", "[", "|", "E|100\n",
    "B|100|", "tracing_mark_write: B|100|[NN_LR_PP]x\n", "tracing_mark_write: E\n", "</script>", "\r", "\r\n",
    "\n", "-------", "(-----)", " 10.5: ", "HIDL::IDevice::prepareModel::server",
    "HIDL::IPreparedModel::execute::server", "HIDL::IExecutionCallback::notify::client",
    "ANeuralNetworksExecution_startCompute", "ANeuralNetworksEvent_wait", "ANeuralNetworksExecution_create",
    "ANeuralNetworksExecution_free", "getSupportedExtensions", "::client", "print: ",
    "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n",
    "#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION\n", "cpus=2\n", "\xc3\xa9", "\xff",
    "99999999999999999999999.999999999999"};

#define MAXLEN (64 * 1024)

/* The input of one iteration, in buf (MAXLEN bytes); returns its length. */
static size_t mutate(char *buf) {
  const blob_t *s = &seeds[next() % nseeds];
  size_t n = s->n > MAXLEN ? MAXLEN : s->n;
  memcpy(buf, s->p, n);
  int rounds = 1 + (int)(next() % 8);
  for (int r = 0; r < rounds; r++) {
    size_t pos = n ? next() % (n + 1) : 0;
    switch (next() % 7) {
      case 0: /* flip a bit */
        if (n) buf[pos % n] ^= (char)(1u << (next() % 8));
        break;
      case 1: /* a random byte */
        if (n) buf[pos % n] = (char)next();
        break;
      case 2: { /* delete a run */
        size_t len = next() % 16;
        if (pos + len > n) len = n - pos;
        memmove(buf + pos, buf + pos + len, n - pos - len);
        n -= len;
        break;
      }
      case 3:
      case 4: { /* insert a token */
        const char *t = tokens[next() % (sizeof tokens / sizeof tokens[0])];
        size_t len = strlen(t);
        if (n + len > MAXLEN) break;
        memmove(buf + pos + len, buf + pos, n - pos);
        memcpy(buf + pos, t, len);
        n += len;
        break;
      }
      case 5: { /* a piece of another seed */
        const blob_t *o = &seeds[next() % nseeds];
        if (!o->n) break;
        size_t from = next() % o->n, len = next() % 256;
        if (from + len > o->n) len = o->n - from;
        if (n + len > MAXLEN) break;
        memmove(buf + pos + len, buf + pos, n - pos);
        memcpy(buf + pos, o->p + from, len);
        n += len;
        break;
      }
      default: /* truncate */
        n = pos;
        break;
    }
  }
  return n;
}

int main(int argc, char **argv) {
  long dump = -1;
  const char *dump_to = NULL;
  int a = 1;
  if (argc > 3 && strcmp(argv[1], "--dump") == 0) {
    dump = atol(argv[2]);
    dump_to = argv[3];
    a = 4;
  }
  for (; a < argc; a++)
    if (add_path(argv[a]) != 0) return 99;
  if (!nseeds) {
    fprintf(stderr, "usage: fuzz_systrace [--dump I OUT] SEED_FILE_OR_DIR...\n");
    return 99;
  }
  char *buf = malloc(MAXLEN);
  if (!buf) return 99;
  if (dump >= 0) {
    size_t n = 0;
    for (long i = 0; i <= dump; i++) n = mutate(buf);
    FILE *f = fopen(dump_to, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) return 99;
    free(buf);
    return 0;
  }
  /* messages about bad input are expected by the thousand */
  if (!freopen("/dev/null", "w", stderr)) return 99;
  for (size_t i = 0; i < nseeds; i++) LLVMFuzzerTestOneInput((const uint8_t *)seeds[i].p, seeds[i].n);
  const char *env = getenv("LP_FUZZ_SECONDS");
  double secs = env && *env ? atof(env) : 10;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long it = 0;
  for (;; it++) {
    if ((it & 63) == 0) {
      clock_gettime(CLOCK_MONOTONIC, &t1);
      if ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9 >= secs) break;
    }
    size_t n = mutate(buf);
    /* the iteration number goes to stdout first, so a crash says which input to --dump */
    if ((it & 1023) == 0) {
      printf("iteration %ld\n", it);
      fflush(stdout);
    }
    LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
  }
  printf("fuzz_systrace: %zu seeds, %ld mutated inputs, no failure\n", nseeds, it);
  free(buf);
  for (size_t i = 0; i < nseeds; i++) free(seeds[i].p);
  free(seeds);
  if (devnull) fclose(devnull);
  return 0;
}

#endif
