/*
 * bench_hostile.c: each reader of the command on a hostile input as large as
 * an ordinary trace (1 GiB by default), beside the ordinary trace of the same
 * size and format, in the same run: the time must stay within a few seconds
 * of the ordinary read (#37: linear in the input, whatever its shape), and
 * the memory within --max-memory.
 *
 * Per format, an ordinary trace and hostile ones: blank lines (or empty
 * packets), one long string (a name, an unused argument, a line, a string of
 * the profile's table), many sequences or strings (tables that grow with the
 * input); then the view that once was quadratic, flamegraph --diff, on
 * 1 GiB of folded stacks with a million siblings under one frame. Each is
 * read by `labelprof stats --max-memory 4G` (the --diff row by flamegraph
 * --diff), its files generated into $TMPDIR and removed at once, a format's
 * at a time (four at most). Rounds interleave the ordinary and hostile runs of a
 * format; the table gives medians of the command's CPU time (user + system,
 * less disturbed than wall time on a shared machine), the wall time, the
 * peak RSS and the exit status (2: refused, as it must be where a name or a
 * table passes its limit).
 *
 *   bench/bench_hostile [MB]   (default 1024; LP_BENCH_HOSTILE_MB too; rounds: LP_BENCH_HOSTILE_ROUNDS, default 3)
 */
#include "bench.h"
#include "../tests/pb_write.h"

#include <errno.h>
#include <sys/stat.h>

#define ROUNDS_MAX 9
#define SLACK_S 3.0 /* "within a few seconds" of the ordinary read */

static const char *tool = "./tools/labelprof";
static char dir[512];
static uint64_t target; /* bytes per input */

/* ---- writing inputs ---- */

typedef struct out {
  FILE *f;
  uint64_t n;
  char buf[1 << 16];
  size_t len;
} out_t;

static void put(out_t *o, const void *p, size_t n) {
  if (o->len + n > sizeof o->buf) {
    if (o->len && fwrite(o->buf, 1, o->len, o->f) != o->len) {
      perror("bench_hostile: writing an input");
      exit(1);
    }
    o->len = 0;
  }
  if (n > sizeof o->buf) {
    if (fwrite(p, 1, n, o->f) != n) {
      perror("bench_hostile: writing an input");
      exit(1);
    }
  } else {
    memcpy(o->buf + o->len, p, n);
    o->len += n;
  }
  o->n += n;
}

static void puts_(out_t *o, const char *s) { put(o, s, strlen(s)); }

/* n bytes of c. */
static void fill(out_t *o, char c, uint64_t n) {
  static char block[1 << 20];
  memset(block, c, sizeof block);
  while (n) {
    size_t k = n > sizeof block ? sizeof block : (size_t)n;
    put(o, block, k);
    n -= k;
  }
}

static out_t *out_open(const char *path) {
  out_t *o = calloc(1, sizeof *o);
  if (!o || !(o->f = fopen(path, "wb"))) {
    perror(path);
    exit(1);
  }
  return o;
}

static void out_close(out_t *o) {
  if ((o->len && fwrite(o->buf, 1, o->len, o->f) != o->len) || fclose(o->f) != 0) {
    perror("bench_hostile: writing an input");
    exit(1);
  }
  free(o);
}

/* The hostile inputs of one shape: `before`, the input's size of byte c, `after`. */
static void sandwich(const char *path, const char *before, char c, const char *after) {
  out_t *o = out_open(path);
  puts_(o, before);
  fill(o, c, target);
  puts_(o, after);
  out_close(o);
}

static void put_pb(out_t *o, pbw_t *w) {
  if (w->failed) {
    fprintf(stderr, "bench_hostile: out of memory\n");
    exit(1);
  }
  put(o, w->b, w->n);
  w->n = 0;
}

/* ---- the inputs: ordinary, then hostile ---- */

typedef void (*gen_fn)(const char *path);

/* Chrome JSON: requests on 4 lanes, each with decode and run inside, in order of their starts. */
static void json_events(out_t *o, uint64_t upto) {
  static const char *const names[3] = {"request", "decode", "run"};
  uint64_t t = 0;
  char ev[256];
  for (int first = 1; o->n < upto; t += 200000) {
    for (int lane = 0; lane < 4; lane++) {
      const uint64_t st[3] = {t, t + 1000, t + 40000}, du[3] = {150000, 30000, 100000};
      for (int k = 0; k < 3; k++) {
        int n = snprintf(ev, sizeof ev,
                         "%s{\"ph\":\"X\",\"cat\":\"runtime\",\"name\":\"%s\",\"pid\":1,\"tid\":%d,\"ts\":%llu.%03llu,"
                         "\"dur\":%llu.%03llu}",
                         first ? "\n" : ",\n", names[k], 100 + lane, (unsigned long long)(st[k] / 1000),
                         (unsigned long long)(st[k] % 1000), (unsigned long long)(du[k] / 1000),
                         (unsigned long long)(du[k] % 1000));
        put(o, ev, (size_t)n);
        first = 0;
      }
    }
  }
}

static void json_ordinary(const char *path) {
  out_t *o = out_open(path);
  puts_(o, "{\"traceEvents\":[");
  json_events(o, target);
  puts_(o, "]}\n");
  out_close(o);
}

static void json_blank(const char *path) {
  sandwich(path, "[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1},", '\n',
           "{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":2,\"dur\":1}]\n");
}

/* One string as long as the input, in an argument nobody reads (as Chrome's systemTraceEvents). */
static void json_long_arg(const char *path) {
  sandwich(path, "[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1,\"args\":{\"blob\":\"", 'x', "\"}}]\n");
}

/* One name as long as the input: refused where it passes 1 MiB. */
static void json_long_name(const char *path) {
  sandwich(path, "[{\"ph\":\"X\",\"ts\":0,\"dur\":1,\"pid\":1,\"tid\":1,\"name\":\"", 'x', "\"}]\n");
}

static const char st_header[] = "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n";

static void systrace_ordinary(const char *path) {
  out_t *o = out_open(path);
  puts_(o, st_header);
  char line[160];
  for (uint64_t us = 1000000; o->n < target; us += 100) {
    for (int k = 0; k < 4; k++) {
      int n = snprintf(line, sizeof line, "     worker-%d  (  100) [000] ...1  %llu.%06llu: tracing_mark_write: %s\n",
                       101 + k / 2, (unsigned long long)((us + (uint64_t)k * 10) / 1000000),
                       (unsigned long long)((us + (uint64_t)k * 10) % 1000000),
                       k % 2 ? "E|100" : k ? "B|100|decode" : "B|100|request");
      put(o, line, (size_t)n);
    }
  }
  out_close(o);
}

static void systrace_blank(const char *path) {
  sandwich(path, "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n"
                 "     worker-101  (  100) [000] ...1  1.000000: tracing_mark_write: B|100|a\n",
           '\n', "     worker-101  (  100) [000] ...1  2.000000: tracing_mark_write: E|100\n");
}

/* One line as long as the input: held against --max-memory, looked at once per byte. */
static void systrace_long_line(const char *path) { sandwich(path, st_header, 'x', "\n"); }

/* Perfetto: a thread's track, interned names, begin and end slices. */
static void perfetto_ordinary(const char *path) {
  out_t *o = out_open(path);
  pbw_t w = {0}, p = {0}, a = {0}, b = {0};
  pbw_uint(&b, 1, 5), pbw_uint(&b, 2, 6), pbw_sub(&a, 4, &b); /* thread pid 5 tid 6 */
  pbw_uint(&a, 1, 1), pbw_sub(&p, 60, &a);
  pbw_uint(&p, 10, 1), pbw_uint(&p, 13, 1), pbw_sub(&w, 1, &p);
  static const char *const names[] = {"request", "decode", "run"};
  for (unsigned i = 0; i < 3; i++) pbw_uint(&b, 1, i + 1), pbw_str(&b, 2, names[i]), pbw_sub(&a, 2, &b);
  pbw_sub(&p, 12, &a), pbw_uint(&p, 10, 1), pbw_uint(&p, 13, 2), pbw_sub(&w, 1, &p);
  put_pb(o, &w);
  for (uint64_t t = 1000; o->n < target; t += 1000) {
    for (unsigned k = 0; k < 4; k++) {
      pbw_uint(&a, 11, 1), pbw_uint(&a, 9, k % 2 ? 2 : 1);
      if (k % 2 == 0) pbw_uint(&a, 10, k / 2 + 1);
      pbw_sub(&p, 11, &a), pbw_uint(&p, 8, t + k * 100), pbw_uint(&p, 10, 1), pbw_uint(&p, 13, 2);
      pbw_sub(&w, 1, &p);
    }
    put_pb(o, &w);
  }
  pbw_free(&w), pbw_free(&p), pbw_free(&a), pbw_free(&b);
  out_close(o);
}

/* Empty packets, Perfetto's blank lines. */
static void perfetto_blank(const char *path) {
  out_t *o = out_open(path);
  static char empty[1 << 16];
  for (size_t i = 0; i < sizeof empty; i += 2) empty[i] = 0x0a, empty[i + 1] = 0x00;
  while (o->n < target) put(o, empty, sizeof empty);
  out_close(o);
}

/* Every packet a sequence of its own: a table that grows with the input, stopped at the cap. */
static void perfetto_sequences(const char *path) {
  out_t *o = out_open(path);
  pbw_t w = {0}, p = {0};
  for (uint32_t seq = 1; o->n < target; seq++) {
    pbw_uint(&p, 10, seq), pbw_uint(&p, 13, 1), pbw_sub(&w, 1, &p);
    if (w.n > (1 << 16)) put_pb(o, &w);
  }
  put_pb(o, &w);
  pbw_free(&w), pbw_free(&p);
  out_close(o);
}

/* Packets of 255 MiB, each a name as long: the first is refused where its name passes 1 MiB. */
static void perfetto_long_name(const char *path) {
  out_t *o = out_open(path);
  pbw_t w = {0}, len = {0};
  uint64_t name = (255u << 20) - 64;
  while (o->n < target) {
    pbw_varint(&len, name);
    uint64_t ev = 2 + len.n + name; /* TrackEvent: field 23's tag (2 bytes), its length, the name */
    len.n = 0;
    pbw_varint(&len, ev);
    uint64_t packet = 1 + len.n + ev; /* TracePacket: field 11's tag, its length, the TrackEvent */
    len.n = 0;
    pbw_varint(&w, 1 << 3 | 2), pbw_varint(&w, packet); /* Trace.packet */
    pbw_varint(&w, 11 << 3 | 2), pbw_varint(&w, ev);    /* TracePacket.track_event */
    pbw_varint(&w, 23 << 3 | 2), pbw_varint(&w, name);  /* TrackEvent.name */
    put_pb(o, &w);
    fill(o, 'n', name);
  }
  pbw_free(&len);
  pbw_free(&w);
  out_close(o);
}

static void folded_ordinary(const char *path) {
  out_t *o = out_open(path);
  char line[160];
  for (unsigned i = 0; o->n < target; i++) {
    int n = snprintf(line, sizeof line, "main;request;run;kernel %u;inner loop %u %u\n", i % 64, i % 7, 1000 + i % 5000);
    put(o, line, (size_t)n);
  }
  out_close(o);
}

static void folded_blank(const char *path) { sandwich(path, "main;a 10\n", '\n', "main;b 20\n"); }

/* One line, one label, as long as the input: refused where the label passes 1 MiB. */
static void folded_long_line(const char *path) { sandwich(path, "main;a 10\n", 'x', " 1\n"); }

/* A million siblings under one frame, with names of about 1 KiB: the input of flamegraph --diff's row. */
static void folded_siblings(const char *path) {
  out_t *o = out_open(path);
  static char name[1024];
  memset(name, 's', sizeof name - 40);
  name[sizeof name - 40] = '\0';
  char line[1200];
  for (unsigned i = 0; o->n < target; i++) {
    int n = snprintf(line, sizeof line, "main;sibling %s %u %u\n", name, i, 1000 + i % 997);
    put(o, line, (size_t)n);
  }
  out_close(o);
}

/* A profile with functions f1..f20; the string table and types first, as labelprof writes it. */
static void pprof_head(pbw_t *w, unsigned nfunc) {
  pbw_t m = {0}, l = {0};
  pbw_uint(&m, 1, 1), pbw_uint(&m, 2, 2), pbw_sub(w, 1, &m);
  pbw_str(w, 6, ""), pbw_str(w, 6, "wall"), pbw_str(w, 6, "nanoseconds");
  for (unsigned i = 1; i <= nfunc; i++) {
    char s[32];
    snprintf(s, sizeof s, "function %u", i);
    pbw_str(w, 6, s);
    pbw_uint(&m, 1, i), pbw_uint(&m, 2, 2 + i), pbw_sub(w, 5, &m);
    pbw_uint(&l, 1, i), pbw_uint(&m, 1, i), pbw_sub(&m, 4, &l), pbw_sub(w, 4, &m);
  }
  pbw_free(&m), pbw_free(&l);
}

/* Samples 20 frames deep, the two leaves taking turns. */
static void pprof_ordinary(const char *path) {
  out_t *o = out_open(path);
  pbw_t w = {0}, m = {0}, ids = {0};
  pprof_head(&w, 21);
  put_pb(o, &w);
  for (unsigned i = 0; o->n < target; i++) {
    pbw_varint(&ids, 20 + i % 2); /* the leaf: 20 or 21, then 19 .. 1 */
    for (unsigned k = 19; k >= 1; k--) pbw_varint(&ids, k);
    pbw_sub(&m, 1, &ids), pbw_uint(&m, 2, 1000 + i % 100), pbw_sub(&w, 2, &m);
    if (w.n > (1 << 16)) put_pb(o, &w);
  }
  put_pb(o, &w);
  pbw_free(&w), pbw_free(&m), pbw_free(&ids);
  out_close(o);
}

/* Empty strings filling the input: the table grows with it, stopped at the cap. */
static void pprof_strings(const char *path) {
  out_t *o = out_open(path);
  pbw_t w = {0};
  pprof_head(&w, 1);
  put_pb(o, &w);
  static char empty[1 << 16];
  for (size_t i = 0; i < sizeof empty; i += 2) empty[i] = 6 << 3 | 2, empty[i + 1] = 0;
  while (o->n < target) put(o, empty, sizeof empty);
  pbw_free(&w);
  out_close(o);
}

/* One string as long as the input: refused at its header. */
static void pprof_long_string(const char *path) {
  out_t *o = out_open(path);
  pbw_t w = {0};
  pprof_head(&w, 1);
  pbw_varint(&w, 6 << 3 | 2);
  pbw_varint(&w, target);
  put_pb(o, &w);
  fill(o, 's', target);
  pbw_free(&w);
  out_close(o);
}

/* ---- runs ---- */

typedef struct row {
  const char *format, *input;
  gen_fn gen;
  int diff; /* flamegraph --diff FILE FILE instead of stats */
} row_t;

static void cmd_of(const row_t *r, const char *path, char **argv) {
  int n = 0;
  argv[n++] = (char *)tool;
  if (r->diff) {
    argv[n++] = "flamegraph";
    argv[n++] = "--diff";
    argv[n++] = "--max-memory";
    argv[n++] = "4G";
    argv[n++] = (char *)path;
  } else {
    argv[n++] = "stats";
    argv[n++] = "--max-memory";
    argv[n++] = "4G";
  }
  argv[n++] = (char *)path;
  argv[n] = NULL;
}

static double file_mb(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (double)st.st_size / (1 << 20) : 0;
}

/* A format's ordinary row and its hostile rows, generated, run in interleaved rounds, removed; printed. */
static int group(const row_t *rows, int n, int rounds) {
  char paths[8][600];
  double cpu[8][ROUNDS_MAX], wall[8][ROUNDS_MAX], rss[8] = {0};
  int status[8], missed = 0;
  for (int i = 0; i < n; i++) {
    snprintf(paths[i], sizeof paths[i], "%s/%s-%d.in", dir, rows[i].format, i);
    rows[i].gen(paths[i]);
  }
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < n; i++) {
      char *argv[10];
      cmd_of(&rows[i], paths[i], argv);
      bench_child_t c = bench_run_child(argv);
      cpu[i][r] = c.cpu;
      wall[i][r] = c.seconds;
      if (c.rss_mb > rss[i]) rss[i] = c.rss_mb;
      status[i] = c.status;
    }
  double base = bench_median(cpu[0], rounds);
  for (int i = 0; i < n; i++) {
    double c = bench_median(cpu[i], rounds), w = bench_median(wall[i], rounds);
    int ok = i == 0 ? status[i] == 0 : (status[i] == 0 || status[i] == 2) && c <= base + SLACK_S;
    missed += !ok;
    printf("%-9s %-40s %8.0f %9.2f %9.2f %+10.2f %8.0f %5d  %s\n", rows[i].format, rows[i].input, file_mb(paths[i]), c, w,
           c - base, rss[i], status[i], i == 0 && ok ? "(baseline)" : bench_verdict(ok));
    unlink(paths[i]);
  }
  return missed;
}

int main(int argc, char **argv) {
  const char *env = getenv("LP_BENCH_HOSTILE_MB"), *rounds_env = getenv("LP_BENCH_HOSTILE_ROUNDS");
  double mb = argc > 1 ? atof(argv[1]) : env ? atof(env) : 1024;
  int rounds = rounds_env ? atoi(rounds_env) : 3;
  if (mb < 1) mb = 1;
  if (rounds < 1 || rounds > ROUNDS_MAX) rounds = 3;
  target = (uint64_t)(mb * (1 << 20));
  if (access(tool, X_OK) != 0) {
    fprintf(stderr, "bench_hostile: %s: %s (run it from the build directory, as make bench does)\n", tool, strerror(errno));
    return 1;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/lp-bench-hostile-XXXXXX", tmp && *tmp && strlen(tmp) < 400 ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    perror("bench_hostile: mkdtemp");
    return 1;
  }
  printf("labelprof's readers on hostile inputs of %.0f MiB beside an ordinary trace of the same size and format (#37)\n",
         mb);
  bench_print_machine();
  printf("clock: CPU time of the command (user + system, getrusage), median of %d interleaved rounds; wall time too\n",
         rounds);
  printf("command: labelprof stats --max-memory 4G FILE (the --diff row: flamegraph --diff, the file as both); "
         "target: within %.0f s of the format's ordinary trace; exit 2 = refused, as it must be\n\n", SLACK_S);
  printf("%-9s %-40s %8s %9s %9s %10s %8s %5s  %s\n", "format", "input", "MiB", "cpu s", "wall s", "vs ordinary",
         "RSS MB", "exit", "verdict");
  static const row_t json[] = {{"json", "ordinary: X events, 4 lanes", json_ordinary, 0},
                               {"json", "blank lines", json_blank, 0},
                               {"json", "one long string (an unused arg)", json_long_arg, 0},
                               {"json", "one long name", json_long_name, 0}};
  static const row_t systrace[] = {{"systrace", "ordinary: B/E marks, 2 threads", systrace_ordinary, 0},
                                   {"systrace", "blank lines", systrace_blank, 0},
                                   {"systrace", "one long line", systrace_long_line, 0}};
  static const row_t perfetto[] = {{"perfetto", "ordinary: slices, interned names", perfetto_ordinary, 0},
                                   {"perfetto", "empty packets", perfetto_blank, 0},
                                   {"perfetto", "a new sequence per packet", perfetto_sequences, 0},
                                   {"perfetto", "one long name per 255 MiB packet", perfetto_long_name, 0}};
  static const row_t folded[] = {{"folded", "ordinary: 5-deep stacks", folded_ordinary, 0},
                                 {"folded", "blank lines", folded_blank, 0},
                                 {"folded", "one long line (one label)", folded_long_line, 0}};
  static const row_t pprof[] = {{"pprof", "ordinary: 20-deep samples", pprof_ordinary, 0},
                                {"pprof", "empty strings", pprof_strings, 0},
                                {"pprof", "one long string", pprof_long_string, 0}};
  static const row_t views[] = {{"--diff", "ordinary: folded stacks, as above", folded_ordinary, 1},
                                {"--diff", "many siblings: 1 M under one frame", folded_siblings, 1}};
  int missed = 0;
  missed += group(json, 4, rounds);
  missed += group(systrace, 3, rounds);
  missed += group(perfetto, 4, rounds);
  missed += group(folded, 3, rounds);
  missed += group(pprof, 3, rounds);
  missed += group(views, 2, rounds);
  rmdir(dir);
  printf("\n%d of the 19 rows missed the target\n", missed);
  return 0;
}
