/*
 * fuzz_reader.c: mutates the seed traces of tests/data/cmd (and its fuzz/
 * directory of earlier crashers and odd shapes) and feeds every mutant to the
 * reader and the engine, as `labelprof stats` does (Chrome JSON, Perfetto
 * .pftrace, systrace text .txt, and the profiles of tools/read/profile.c:
 * .pprof, .folded).
 * A mutant must end with status 0 or 2, never a crash, a sanitizer report or
 * a hang; a trace read
 * successfully must have its self times add up to no more than its wall time.
 *
 * Then the command's outputs of the same input, run as users run them
 * (lp_main, standard output to a file): the flame graph, the flame graph
 * --diff against the previous input read, stats --format csv, and merge
 * (alone as Perfetto and as JSON, and with the previous input), whose
 * output stats must read. Each
 * must end with status 0 or 2, and what it wrote must be valid: the SVG
 * well-formed XML to libxml2's parser (so no byte or character XML cannot
 * hold, whatever the labels), every csv cell valid UTF-8 and inert (no
 * cell starts with = + - @ tab or CR, but a number).
 *
 * The mutations come from a fixed-seed generator, so a run is reproducible;
 * it stops after LP_FUZZ_SECONDS (default 8) or LP_FUZZ_RUNS mutants. A
 * successful read gives the same figures when the buffered scopes are
 * spilled to a temporary file every two. A failing input is kept in the
 * temporary directory, named on stderr: copy
 * it into tests/data/cmd/fuzz/ as a regression seed.
 *
 * Built with clang's -fsanitize=fuzzer and -DLP_LIBFUZZER, the same target
 * is a libFuzzer entry point instead.
 */
#include "config.h"

#include "agg.h"
#include "cmd.h"
#include "reader.h"
#include "../lib/jsonesc.h"

#include <libxml/parser.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char path[300], prev[300], out_path[300];
static bool have_prev; /* prev holds an input read before: --diff's BASE */

/* What a successful read must give whatever the memory limit: calls and self time of every label. */
static void summary(const lp_agg_t *a, uint64_t *calls, uint64_t *self) {
  *calls = 0; /* unsigned: a checksum that may wrap */
  *self = 0;
  for (uint32_t i = 0; i < a->nlabels; i++) {
    *calls += a->gstats[i].calls * (i + 1);
    *self += (uint64_t)a->gstats[i].self * (i + 1);
  }
}

/* The bytes of out_path (NUL-terminated), *n their count; NULL when unreadable. */
static char *slurp_out(size_t *n) {
  FILE *f = fopen(out_path, "rb");
  if (!f) return NULL;
  char *b = NULL;
  size_t cap = 0;
  *n = 0;
  for (;;) {
    if (*n + 4096 + 1 > cap) {
      char *nb = realloc(b, cap = cap ? cap * 2 : 65536);
      if (!nb) break;
      b = nb;
    }
    size_t got = fread(b + *n, 1, cap - *n - 1, f);
    *n += got;
    if (got == 0) break;
  }
  fclose(f);
  if (b) b[*n] = '\0';
  return b;
}

/* `labelprof ARGS...` in this process, its standard output in out_path: the exit status, -1 if that could not be arranged. */
static int command(char **args, int nargs) {
  char *argv[8] = {(char *)"labelprof"};
  for (int i = 0; i < nargs && i < 6; i++) argv[i + 1] = args[i];
  fflush(stdout);
  int saved = dup(1), fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (saved < 0 || fd < 0 || dup2(fd, 1) < 0) {
    perror("fuzz_reader: redirecting standard output");
    exit(2);
  }
  close(fd);
  clearerr(stdout);
  int status = lp_main(nargs + 1, argv);
  fflush(stdout);
  clearerr(stdout);
  if (dup2(saved, 1) < 0) {
    perror("fuzz_reader: restoring standard output");
    exit(2);
  }
  close(saved);
  return status;
}

/* The SVG written is well-formed XML (libxml2, no network, no entities loaded): 0 when it is. */
static int svg_bad(void) {
  size_t n;
  char *svg = slurp_out(&n);
  if (!svg) return 1;
  xmlDocPtr doc = n <= INT32_MAX ? xmlReadMemory(svg, (int)n, "graph.svg", NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
                                                                                        XML_PARSE_NOWARNING) : NULL;
  int bad = !doc || !strstr(svg, "</svg>");
  if (bad) fprintf(stderr, "fuzz_reader: the flame graph is not well-formed XML\n");
  xmlFreeDoc(doc);
  free(svg);
  return bad;
}

/* Every csv cell is valid UTF-8 and starts with no formula's character (a number may start with '-'). */
static int csv_bad(void) {
  size_t n;
  char *csv = slurp_out(&n);
  if (!csv) return 1;
  int bad = 0;
  bool quoted = false, start = true;
  const unsigned char *s = (const unsigned char *)csv, *end = s + n;
  for (const unsigned char *c = s; c < end && !bad;) {
    if (start) {
      const unsigned char *first = *c == '"' ? c + 1 : c;
      bool number = *c != '"' && *first == '-' && first + 1 < end && first[1] >= '0' && first[1] <= '9';
      if (first < end && strchr("=+-@\t\r", *first) && *first && !number) bad = 1;
      start = false;
    }
    if (*c >= 0x80) {
      unsigned cp;
      size_t k = lp__utf8_seq(c, end, &cp);
      if (!k) bad = 1;
      c += k ? k : 1;
      continue;
    }
    if (*c == '"') quoted = !quoted;
    else if ((*c == ',' || *c == '\n') && !quoted) start = true;
    c++;
  }
  if (bad) fprintf(stderr, "fuzz_reader: a csv cell is not valid UTF-8 or starts as a formula\n");
  free(csv);
  return bad;
}

/* The command's outputs of the input at path: 0 when each behaved. */
static int outputs(void) {
  int bad = 0, st;
  char fg[] = "flamegraph", df[] = "--diff", stats[] = "stats", fmt[] = "--format", csv[] = "csv";
  char *a1[] = {fg, path};
  if ((st = command(a1, 2)) == 0) bad |= svg_bad();
  else bad |= st != 2;
  if (have_prev) {
    char *a2[] = {fg, df, prev, path};
    if ((st = command(a2, 4)) == 0) bad |= svg_bad();
    else bad |= st != 2;
  }
  char *a3[] = {stats, fmt, csv, path};
  if ((st = command(a3, 4)) == 0) bad |= csv_bad();
  else bad |= st != 2;
  /* merged alone, in both formats, then with the previous input: what merge writes, stats reads. */
  char mg[] = "merge", o[] = "-o", mpf[320], mjs[320];
  snprintf(mpf, sizeof mpf, "%s.merged.pftrace", out_path);
  snprintf(mjs, sizeof mjs, "%s.merged.json", out_path);
  char *outs[2] = {mpf, mjs};
  for (int k = 0; k < 3; k++) {
    char *a4[] = {mg, o, outs[k & 1], path, prev};
    if (k == 2 && !have_prev) break;
    if ((st = command(a4, k == 2 ? 5 : 4)) == 0) {
      char *a5[] = {stats, outs[k & 1]};
      if (command(a5, 2) != 0) {
        fprintf(stderr, "fuzz_reader: stats cannot read what merge wrote (%s)\n", outs[k & 1]);
        bad = 1;
      }
    } else {
      bad |= st != 2;
    }
    unlink(outs[k & 1]);
  }
  return bad;
}

/* One input through the engine, then the outputs: 0 when it behaved. */
static int one(const uint8_t *data, size_t len, int strict) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
    perror("fuzz_reader: writing the input");
    exit(2);
  }
  lp_agg_t a;
  lp_agg_init(&a);
  a.strict = strict;
  a.lane_hists = strict;
  int rc = lp_agg_file(&a, path);
  int bad = rc != 0 && rc != LP_READ_BAD;
  if (rc == 0) {
    int64_t self = 0; /* saturating, as the engine's sums are */
    for (uint32_t i = 0; i < a.nlabels; i++)
      if (__builtin_add_overflow(self, a.gstats[i].self, &self)) self = INT64_MAX;
    if (self > lp_agg_wall(&a)) bad = 1;
    lp_tree_t m;
    if (lp_agg_merged_tree(&a, &m) == 0 && m.nodes[0].total != lp_agg_wall(&a)) bad = 1;
    lp_tree_free(&m);
    /* Again with buffered scopes spilled to disk every 2: the same figures. */
    lp_agg_t b;
    lp_agg_init(&b);
    b.strict = strict;
    b.spill_limit = 2;
    if (lp_agg_file(&b, path) != 0) {
      bad = 1;
    } else {
      uint64_t ca, cb, sa, sb;
      summary(&a, &ca, &sa);
      summary(&b, &cb, &sb);
      if (ca != cb || sa != sb || lp_agg_wall(&a) != lp_agg_wall(&b)) bad = 1;
    }
    lp_agg_free(&b);
    if (!bad) bad = outputs();
    if (!bad) have_prev = rename(path, prev) == 0; /* BASE of the next --diff */
  }
  lp_agg_free(&a);
  return bad;
}

#ifdef LP_LIBFUZZER
static void remove_input(void) {
  unlink(path);
  unlink(prev);
  unlink(out_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  if (!path[0]) {
    const char *t = getenv("TMPDIR");
    t = t && *t && strlen(t) < 200 ? t : "/tmp";
    snprintf(path, sizeof path, "%s/lp-fuzz-%d.json", t, (int)getpid());
    snprintf(prev, sizeof prev, "%s/lp-fuzz-%d-base.json", t, (int)getpid());
    snprintf(out_path, sizeof out_path, "%s/lp-fuzz-%d.out", t, (int)getpid());
    atexit(remove_input);
  }
  if (one(data, len, 0)) abort();
  return 0;
}
#else

typedef struct buf {
  uint8_t *p;
  size_t len;
} buf_t;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return n ? (uint32_t)(rng % n) : 0;
}

static const char *const tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "\"ph\":\"B\"", "\"ph\":\"E\"", "\"ph\":\"X\"",
                                     "\"ts\":", "\"dur\":", "1e400", "-1", "99999999999999999999", "0.0005", "null",
                                     "true", "\"\\u0000\"", "\"tid\":", "\"pid\":", "\"args\":{", "\"name\":",
                                     "\"traceEvents\":[", "\x1f\x8b", "\n", "\xff"};

static void mutate(buf_t *b, const buf_t *other, size_t cap) {
  unsigned kind = rnd(7);
  size_t at = b->len ? rnd((uint32_t)b->len) : 0;
  switch (kind) {
  case 0: /* flip a byte */
    if (b->len) b->p[at] ^= (uint8_t)(1u << rnd(8));
    break;
  case 1: { /* insert a token */
    const char *t = tokens[rnd(sizeof tokens / sizeof *tokens)];
    size_t n = strlen(t);
    if (b->len + n > cap) break;
    memmove(b->p + at + n, b->p + at, b->len - at);
    memcpy(b->p + at, t, n);
    b->len += n;
    break;
  }
  case 2: { /* delete a range */
    size_t n = rnd(64) + 1;
    if (at + n > b->len) n = b->len - at;
    memmove(b->p + at, b->p + at + n, b->len - at - n);
    b->len -= n;
    break;
  }
  case 3: { /* duplicate a range */
    size_t n = rnd(256) + 1;
    if (at + n > b->len) n = b->len - at;
    if (b->len + n > cap) break;
    memmove(b->p + at + n, b->p + at, b->len - at);
    b->len += n;
    break;
  }
  case 4: /* truncate */
    b->len = at;
    break;
  case 5: { /* splice the tail of another seed */
    if (!other->len) break;
    size_t from = rnd((uint32_t)other->len), n = other->len - from;
    if (at + n > cap) n = cap - at;
    memcpy(b->p + at, other->p + from, n);
    b->len = at + n;
    break;
  }
  default: /* a digit changed: times out of order, depths */
    for (size_t i = at; i < b->len; i++)
      if (b->p[i] >= '0' && b->p[i] <= '9') {
        b->p[i] = (uint8_t)('0' + rnd(10));
        break;
      }
    break;
  }
}

static int load_dir(const char *dir, buf_t *seeds, int n, int max) {
  DIR *d = opendir(dir);
  if (!d) return n;
  struct dirent *e;
  while ((e = readdir(d)) && n < max) {
    size_t l = strlen(e->d_name);
    bool json = l >= 5 && strcmp(e->d_name + l - 5, ".json") == 0;
    bool pftrace = l >= 8 && strcmp(e->d_name + l - 8, ".pftrace") == 0; /* Perfetto's protobuf */
    bool systrace = l >= 4 && strcmp(e->d_name + l - 4, ".txt") == 0;
    bool profile = (l >= 6 && strcmp(e->d_name + l - 6, ".pprof") == 0) || (l >= 7 && strcmp(e->d_name + l - 7, ".folded") == 0);
    if (!json && !pftrace && !systrace && !profile) continue;
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    FILE *f = fopen(p, "rb");
    if (!f) continue;
    seeds[n].p = malloc(1 << 16);
    seeds[n].len = seeds[n].p ? fread(seeds[n].p, 1, 1 << 16, f) : 0;
    fclose(f);
    if (seeds[n].p) n++;
  }
  closedir(d);
  return n;
}

int main(void) {
  /* Kept when something failed: the inputs that did are in it. */
  const char *tmp = getenv("TMPDIR");
  char dir[256];
  snprintf(dir, sizeof dir, "%s/lp-fuzz-XXXXXX", tmp && *tmp && strlen(tmp) < 200 ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    perror("fuzz_reader: mkdtemp");
    return 2;
  }
  snprintf(path, sizeof path, "%s/input.json", dir);
  snprintf(prev, sizeof prev, "%s/base.json", dir);
  snprintf(out_path, sizeof out_path, "%s/output", dir);
  buf_t seeds[64];
  int n = load_dir(LP_TEST_DATA, seeds, 0, 64);
  n = load_dir(LP_TEST_DATA "/fuzz", seeds, n, 64);
  if (n < 5) {
    fprintf(stderr, "fuzz_reader: only %d seeds in %s\n", n, LP_TEST_DATA);
    return 2;
  }
  const char *s = getenv("LP_FUZZ_SECONDS"), *r = getenv("LP_FUZZ_RUNS");
  double seconds = s ? atof(s) : 8.0;
  long runs = r ? atol(r) : 1000000;
  /*
   * The reader reports every bad input on stderr: thousands of lines nobody
   * needs here. They go to a file, emptied now and then, where a sanitizer's
   * report that ends the run stays (the directory is kept then).
   */
  char msgs[300];
  snprintf(msgs, sizeof msgs, "%s/messages", dir);
  printf("fuzz_reader: the reader's messages (and a sanitizer's report, if one stops this) go to %s\n", msgs);
  fflush(stdout);
  int saved = dup(2), null = open(msgs, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (saved < 0 || null < 0 || dup2(null, 2) < 0) return 2;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  size_t cap = 1 << 17;
  buf_t b = {malloc(cap), 0};
  long done = 0, failures = 0;
  /* The seeds themselves first: earlier crashers are regression tests. */
  for (int i = 0; i < n; i++) failures += one(seeds[i].p, seeds[i].len, 0) + one(seeds[i].p, seeds[i].len, 1);
  for (; b.p && done < runs && !failures; done++) {
    if (done % 256 == 0 && (ftruncate(2, 0) != 0 || lseek(2, 0, SEEK_SET) != 0)) return 2;
    if (done % 64 == 0) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 > seconds) break;
    }
    const buf_t *seed = &seeds[rnd((uint32_t)n)];
    memcpy(b.p, seed->p, seed->len);
    b.len = seed->len;
    for (unsigned m = rnd(4) + 1; m > 0; m--) mutate(&b, &seeds[rnd((uint32_t)n)], cap);
    if (one(b.p, b.len, (int)(done & 1))) {
      failures++;
      char keep[300];
      snprintf(keep, sizeof keep, "%s/failed-%ld.json", dir, done);
      rename(path, keep);
      snprintf(keep, sizeof keep, "%s/failed-%ld-base.json", dir, done); /* flamegraph --diff's BASE */
      if (have_prev) rename(prev, keep);
      have_prev = false;
      dup2(saved, 2);
      fprintf(stderr, "fuzz_reader: a bad outcome on %s\n", keep);
      dup2(null, 2);
    }
  }
  dup2(saved, 2);
  printf("fuzz_reader: %d seeds, %ld mutants, %ld failures\n", n, done, failures);
  unlink(path);
  unlink(prev);
  unlink(out_path);
  if (!failures) {
    unlink(msgs);
    rmdir(dir);
  }
  for (int i = 0; i < n; i++) free(seeds[i].p);
  free(b.p);
  return failures ? 1 : (done > 100 ? 0 : 1);
}
#endif
