/*
 * bench_cmd.c: `labelprof stats` on a generated trace of at least 100 MB,
 * beside python3's json.load of the same file, in the same run: MB/s and
 * peak RSS (the children's ru_maxrss). Two files: complete events in order
 * of their starts (Chrome's own traces, B/E writers), the streaming path; and
 * the same events each written at its end, as labelprof's exporter writes
 * them, which the command reads again with each lane buffered.
 *
 * Then a Perfetto trace the library writes (LP_SCOPE, 6 nested labels, about
 * as many MB as the JSON files), read by `labelprof stats`: MB and events
 * per second of the command's CPU (#16: the command reads long streams).
 *
 * Then memory per lane and per label (#23): peak RSS of `labelprof stats`
 * on a trace of N lanes with one complete event each, and on one lane with
 * N distinct names, less the peak on a trace of one event, over N.
 *
 * Then a Perfetto trace of another producer's shape, read as fast with its
 * events spread over 20000 tracks, each on a sequence of its own, as on one.
 *
 *   bench/bench_cmd [MB]      (default 120; LP_BENCH_CMD_MB too)
 *   bench/bench_cmd --memory [N]   only the memory rows (N default 1000000; LP_BENCH_CMD_N too)
 *   bench/bench_cmd --tracks  only the rows of many tracks
 */
#include "bench.h"
#include "../tests/pb_write.h"

#include <labelprof.h>

#include <errno.h>
#include <sys/stat.h>

#define LANES 4

/*
 * One request on each lane: request > (decode, run > (launch, wait), encode),
 * with durations that vary; `at_end` writes each X when it ends (children
 * first), otherwise when it starts.
 */
static int generate(const char *path, double mb, int at_end) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  static const char *names[] = {"request", "decode", "run", "launch", "wait for device", "encode"};
  fputs("{\"traceEvents\":[\n", f);
  for (int l = 0; l < LANES; l++)
    fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":4242,\"tid\":%d,\"args\":{\"name\":\"worker %d\"}},\n",
            100 + l, l);
  double target = mb * 1e6;
  long long t[LANES] = {0};
  uint64_t seed = 88172645463325252ull;
  long n = 0;
  while (ftell(f) < (long)target) {
    for (int l = 0; l < LANES; l++) {
      seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
      long long d = 20 + (long long)(seed % 80), s = t[l]; /* ns * 1000: µs with 3 decimals */
      long long dec = d * 1000, lau = 3000 + (long long)(seed >> 40) % 2000, wai = d * 2000, enc = d * 500;
      long long st[6], du[6];
      st[0] = s;
      st[1] = s + 100;
      du[1] = dec;
      st[2] = st[1] + dec + 100;
      st[3] = st[2] + 50;
      du[3] = lau;
      st[4] = st[3] + lau + 50;
      du[4] = wai;
      du[2] = st[4] + wai + 50 - st[2];
      st[5] = st[2] + du[2] + 100;
      du[5] = enc;
      du[0] = st[5] + enc + 100 - s;
      static const int start_order[6] = {0, 1, 2, 3, 4, 5}, end_order[6] = {1, 3, 4, 2, 5, 0};
      const int *order = at_end ? end_order : start_order;
      for (int k = 0; k < 6; k++) {
        int e = order[k];
        fprintf(f, "{\"ph\":\"X\",\"cat\":\"runtime\",\"name\":\"%s\",\"pid\":4242,\"tid\":%d,\"ts\":%lld.%03lld,\"dur\":%lld.%03lld},\n",
                names[e], 100 + l, st[e] / 1000, st[e] % 1000, du[e] / 1000, du[e] % 1000);
        n++;
      }
      t[l] = s + du[0] + 1000;
    }
  }
  fprintf(f, "{\"ph\":\"i\",\"name\":\"end\",\"pid\":4242,\"tid\":100,\"ts\":%lld.000,\"s\":\"t\"}\n],\n"
             "\"displayTimeUnit\":\"ns\"}\n", t[0] / 1000 + 1);
  if (fclose(f) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}

/* N lanes with one complete event each, or (names) one lane with N distinct names; a one-event trace for N = 0. */
static int generate_many(const char *path, long n, int names) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  fputs("[\n", f);
  if (n == 0) fputs("{\"ph\":\"X\",\"name\":\"f\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1}\n", f);
  for (long i = 0; i < n; i++) {
    if (names)
      fprintf(f, "%s{\"ph\":\"X\",\"name\":\"name %07ld\",\"pid\":1,\"tid\":1,\"ts\":%ld,\"dur\":1}\n", i ? "," : "",
              i, 2 * i);
    else
      fprintf(f, "%s{\"ph\":\"X\",\"name\":\"f\",\"pid\":1,\"tid\":%ld,\"ts\":1,\"dur\":1}\n", i ? "," : "", i + 1);
  }
  fputs("]\n", f);
  if (fclose(f) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}

/* Peak RSS per lane and per name, against the targets of #23. 0, or 1 when a run failed. */
static int memory_rows(const char *dir, long n) {
  char one[96], lanes[96], names[96];
  snprintf(one, sizeof one, "%s/one.json", dir);
  snprintf(lanes, sizeof lanes, "%s/lanes.json", dir);
  snprintf(names, sizeof names, "%s/names.json", dir);
  if (generate_many(one, 0, 0) || generate_many(lanes, n, 0) || generate_many(names, n, 1)) return 1;
  const char *files[3] = {one, lanes, names};
  double rss[3];
  int failed = 0;
  for (int i = 0; i < 3; i++) {
    char *tool[] = {"./tools/labelprof", "stats", "--top", "5", (char *)files[i], NULL};
    bench_child_t r = bench_run_child(tool);
    if (r.status != 0) {
      fprintf(stderr, "bench_cmd: labelprof stats %s exited with %d\n", files[i], r.status);
      failed = 1;
    }
    rss[i] = r.rss_mb * 1048576.0;
  }
  double per_lane = (rss[1] - rss[0]) / (double)n, per_name = (rss[2] - rss[0]) / (double)n;
  double text = 13; /* "name 0000000" and its NUL */
  printf("\nmemory per lane and per label: peak RSS of labelprof stats (--top 5), less that of a one-event trace (%.1f MB)\n\n",
         rss[0] / 1048576.0);
  printf("  %-44s %9s %12s\n", "", "peak RSS", "per item");
  printf("  %-44s %6.0f MB %9.0f B\n", "lanes: N lanes, one X event each", rss[1] / 1048576.0, per_lane);
  printf("  %-44s %6.0f MB %9.0f B\n", "names: one lane, N distinct names", rss[2] / 1048576.0, per_name);
  printf("  (N = %ld)\n\ntargets\n\n", n);
  printf("  %-52s %7.0f B  %s\n", "per lane <= 512 bytes", per_lane, bench_verdict(per_lane <= 512));
  printf("  %-52s %7.0f B  %s\n", "per distinct label <= 256 bytes + its text (13 B)", per_name,
         bench_verdict(per_name <= 256 + text));
  printf("  %-52s %7.0f MB  %s\n", "N lanes: peak RSS < 1 GiB", rss[1] / 1048576.0, bench_verdict(rss[1] < 1073741824.0));
  printf("  %-52s %7.0f MB  %s\n", "N names: peak RSS < 1 GiB", rss[2] / 1048576.0, bench_verdict(rss[2] < 1073741824.0));
  unlink(one);
  unlink(lanes);
  unlink(names);
  return failed;
}

/*
 * A Perfetto trace of about mb MB from labels: 6 nested scopes in a loop,
 * recorded in one session whose budget holds them all and written at the
 * end, in a child process, so that the budget's memory is not counted in
 * the peak RSS of the children run after it. Returns the events written,
 * or 0 on failure.
 */
static uint64_t generate_pftrace(const char *path, double mb) {
  int fd[2];
  uint64_t events = 0;
  if (pipe(fd)) {
    perror("bench_cmd: pipe");
    return 0;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("bench_cmd: fork");
    return 0;
  }
  if (pid == 0) {
    close(fd[0]);
    uint64_t scopes = (uint64_t)(mb * 1e6 / 25.0); /* about 12.5 bytes an event, two events a scope */
    lp_trace_opts_t o = {.budget_bytes = (scopes * 2 * 16 * 5 / 4 + (1u << 20)) & ~(uint64_t)0xfffff};
    int rc = lp_trace_start(&o);
    if (rc) {
      fprintf(stderr, "bench_cmd: lp_trace_start: %s\n", strerror(-rc));
      _exit(1);
    }
    volatile uint64_t sink = 0;
    for (uint64_t i = 0; i < scopes / 6; i++) {
      LP_SCOPE("request");
      {
        LP_SCOPE("parse");
        sink += i;
      }
      LP_SCOPE("plan");
      LP_SCOPE("execute");
      LP_SCOPE("kernel");
      LP_SCOPE("store");
      sink += i;
    }
    (void)sink; /* read once more: the loop's work is kept, and clang sees the variable used */
    lp_trace_stats_t st;
    if ((rc = lp_trace_stop()) || (rc = lp_trace_get_stats(&st)) || (rc = lp_trace_write_perfetto(path, "bench_cmd"))) {
      fprintf(stderr, "bench_cmd: the Perfetto trace: %s\n", strerror(-rc));
      _exit(1);
    }
    if (st.dropped) {
      fprintf(stderr, "bench_cmd: %llu events dropped from the Perfetto trace\n", (unsigned long long)st.dropped);
      _exit(1);
    }
    _exit(write(fd[1], &st.recorded, sizeof st.recorded) == (ssize_t)sizeof st.recorded ? 0 : 1);
  }
  close(fd[1]);
  if (read(fd[0], &events, sizeof events) != (ssize_t)sizeof events) events = 0;
  close(fd[0]);
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) events = 0;
  return events;
}

/* `labelprof stats` on argv three times: the medians of wall and CPU seconds, and the peak RSS. 0, or 1 when a run failed. */
static int stats_runs(char *const argv[], double *wall, double *cpu, double *rss_mb) {
  double tw[3], tc[3];
  int failed = 0;
  *rss_mb = 0;
  for (int i = 0; i < 3; i++) {
    bench_child_t t = bench_run_child(argv);
    if (t.status != 0) {
      fprintf(stderr, "bench_cmd: labelprof stats exited with %d\n", t.status);
      failed = 1;
    }
    tw[i] = t.seconds, tc[i] = t.cpu;
    if (t.rss_mb > *rss_mb) *rss_mb = t.rss_mb;
  }
  *wall = bench_median(tw, 3);
  *cpu = bench_median(tc, 3);
  return failed;
}

/* ---- a Perfetto trace from another producer: tracks of its own, each on a sequence of its own ---- */

/* One TracePacket on seq, holding inner in field `field`, with a timestamp unless ts is 0. 0, or -1. */
static int pf_packet(FILE *f, uint32_t seq, uint64_t ts, unsigned field, pbw_t *inner) {
  pbw_t packet = {0}, trace = {0};
  if (ts) pbw_uint(&packet, 8, ts);
  pbw_uint(&packet, 10, seq);
  pbw_sub(&packet, field, inner);
  pbw_sub(&trace, 1, &packet);
  int rc = !trace.failed && fwrite(trace.b, 1, trace.n, f) == trace.n ? 0 : -1;
  pbw_free(&packet);
  pbw_free(&trace);
  return rc;
}

/*
 * Slices named in full (no interning) on ntracks tracks under one process,
 * each track on a sequence of its own, taken in turn: as a producer with
 * many async tracks writes them. Returns the events written, 0 on failure.
 */
static uint64_t generate_tracks(const char *path, uint32_t ntracks, uint64_t events) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return 0;
  }
  pbw_t td = {0}, pd = {0}, te = {0};
  int bad = 0;
  pbw_uint(&pd, 1, 4242);
  pbw_str(&pd, 6, "producer");
  pbw_uint(&td, 1, 7);
  pbw_sub(&td, 3, &pd);
  bad |= pf_packet(f, 1, 0, 60, &td);
  char name[32];
  for (uint32_t t = 0; t < ntracks; t++) {
    snprintf(name, sizeof name, "queue %u", t);
    pbw_uint(&td, 1, 1000 + (uint64_t)t);
    pbw_uint(&td, 5, 7);
    pbw_str(&td, 2, name);
    bad |= pf_packet(f, 2 + t, 0, 60, &td);
  }
  uint64_t ts = 1000000, n = 0;
  for (; n + 2 <= events && !bad; n += 2) {
    uint32_t t = (uint32_t)(n / 2 % ntracks);
    pbw_uint(&te, 9, 1);
    pbw_uint(&te, 11, 1000 + (uint64_t)t);
    pbw_str(&te, 23, "submit");
    bad |= pf_packet(f, 2 + t, ts, 11, &te);
    pbw_uint(&te, 9, 2);
    pbw_uint(&te, 11, 1000 + (uint64_t)t);
    bad |= pf_packet(f, 2 + t, ts + 700, 11, &te);
    ts += 1000;
  }
  pbw_free(&td);
  pbw_free(&pd);
  pbw_free(&te);
  if (fclose(f) != 0 || bad) {
    perror(path);
    return 0;
  }
  return n;
}

/*
 * The command on the same events spread over one track and over many, each
 * track on a sequence of its own: it finds an event's sequence and track in
 * constant time, so the rates should match. 0, or 1 when a run failed.
 */
static int tracks_rows(const char *dir) {
  enum { EVENTS = 1000000, MANY = 20000 };
  const uint32_t ntracks[2] = {1, MANY};
  double rate[2];
  int failed = 0;
  printf("\nPerfetto from another producer: %d events of slices named in full, on one track and on %d, each track\n"
         "on a sequence of its own (3 runs, medians)\n\n",
         EVENTS, MANY);
  printf("  %-30s %9s %10s %10s\n", "", "wall s", "CPU s", "M events/s of CPU");
  for (int k = 0; k < 2; k++) {
    char path[96];
    snprintf(path, sizeof path, "%s/tracks%d.pftrace", dir, k);
    uint64_t n = generate_tracks(path, ntracks[k], EVENTS);
    if (!n) return 1;
    char *tool[] = {"./tools/labelprof", "stats", "--top", "5", path, NULL};
    double mtw, mtc, rss;
    failed |= stats_runs(tool, &mtw, &mtc, &rss);
    rate[k] = (double)n / mtc / 1e6;
    printf("  %-30s %9.2f %10.2f %10.1f\n", k ? "    20000 tracks" : "    one track", mtw, mtc, rate[k]);
    unlink(path);
  }
  printf("\ntargets\n\n");
  /* Not 1x: 20000 sequences and lanes leave the caches; a search per event through the tracks made it 0.01x. */
  printf("  %-52s %7.2fx  %s\n", "20000 tracks: events/s >= 0.25x one track's", rate[1] / rate[0],
         bench_verdict(rate[1] >= 0.25 * rate[0]));
  return failed;
}

static double file_mb(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (double)st.st_size / 1e6 : 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--memory") == 0) {
    const char *e = getenv("LP_BENCH_CMD_N");
    long n = argc > 2 ? atol(argv[2]) : e ? atol(e) : 1000000;
    char mdir[] = "/tmp/lp-bench-mem-XXXXXX";
    if (n < 1 || !mkdtemp(mdir)) return 1;
    int rc = memory_rows(mdir, n);
    rmdir(mdir);
    return rc;
  }
  if (argc > 1 && strcmp(argv[1], "--tracks") == 0) {
    char tdir[] = "/tmp/lp-bench-tracks-XXXXXX";
    if (!mkdtemp(tdir)) return 1;
    int rc = tracks_rows(tdir);
    rmdir(tdir);
    return rc;
  }
  const char *env = getenv("LP_BENCH_CMD_MB");
  double mb = argc > 1 ? atof(argv[1]) : env ? atof(env) : 120;
  if (mb < 1) mb = 120;
  char dir[] = "/tmp/lp-bench-cmd-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("bench_cmd: mkdtemp");
    return 1;
  }
  char sorted[64], at_end[64];
  snprintf(sorted, sizeof sorted, "%s/sorted.json", dir);
  snprintf(at_end, sizeof at_end, "%s/at_end.json", dir);
  if (generate(sorted, mb, 0) || generate(at_end, mb, 1)) return 1;
  double size[2] = {file_mb(sorted), file_mb(at_end)};
  const char *files[2] = {sorted, at_end};
  const char *what[2] = {"X in order of starts (streaming)", "X at their ends (labelprof's order, buffered)"};

  printf("labelprof stats on a generated Chrome trace, beside python3 json.load of the same file\n");
  bench_print_machine();
  printf("files: %.0f MB each, %d lanes, 6 nested labels; 3 rounds of (labelprof, python3) taken in turn, medians\n",
         size[0], LANES);
  printf("MB/s is file size over wall time; CPU MB/s over the child's user + system time (fairer on a busy machine)\n\n");
  printf("  %-30s %9s %9s %10s %10s %11s\n", "", "wall s", "MB/s", "CPU MB/s", "peak RSS", "vs python3");
  double ratio[2], rss[2];
  int failed = 0;
  for (int f = 0; f < 2; f++) {
    char *tool[] = {"./tools/labelprof", "stats", (char *)files[f], NULL};
    char script[256];
    snprintf(script, sizeof script, "import json; json.load(open('%s'))", files[f]);
    char *py[] = {"python3", "-c", script, NULL};
    double tw[3], tc[3], pw[3], pc[3], rr[3], trss = 0, prss = 0;
    for (int i = 0; i < 3; i++) {
      bench_child_t t = bench_run_child(tool), p = bench_run_child(py);
      if (t.status != 0 || p.status != 0) {
        fprintf(stderr, "bench_cmd: a run failed (labelprof %d, python3 %d)\n", t.status, p.status);
        failed = 1;
      }
      tw[i] = t.seconds, tc[i] = t.cpu, pw[i] = p.seconds, pc[i] = p.cpu;
      rr[i] = p.seconds / t.seconds;
      if (t.rss_mb > trss) trss = t.rss_mb;
      if (p.rss_mb > prss) prss = p.rss_mb;
    }
    double mtw = bench_median(tw, 3), mtc = bench_median(tc, 3), mpw = bench_median(pw, 3), mpc = bench_median(pc, 3);
    ratio[f] = bench_median(rr, 3);
    rss[f] = trss;
    printf("  %s\n", what[f]);
    printf("  %-30s %9.2f %9.1f %10.1f %7.1f MB %10.1fx\n", "    labelprof stats", mtw, size[f] / mtw, size[f] / mtc,
           trss, ratio[f]);
    printf("  %-30s %9.2f %9.1f %10.1f %7.1f MB\n", "    python3 json.load", mpw, size[f] / mpw, size[f] / mpc, prss);
  }
  /* The same amount of Perfetto, and the JSON's events per second for comparison. */
  char pf[64];
  snprintf(pf, sizeof pf, "%s/trace.pftrace", dir);
  uint64_t pf_events = generate_pftrace(pf, mb);
  if (!pf_events) {
    failed = 1;
  } else {
    char *tool[] = {"./tools/labelprof", "stats", pf, NULL};
    double mtw, mtc, rss_pf;
    failed |= stats_runs(tool, &mtw, &mtc, &rss_pf);
    double pf_mb = file_mb(pf);
    printf("  Perfetto protobuf written by the library (%.0f MB, %.1f M events, 6 nested labels)\n", pf_mb,
           (double)pf_events / 1e6);
    printf("  %-30s %9.2f %9.1f %10.1f %7.1f MB   %.1f M events/s of CPU\n", "    labelprof stats", mtw,
           pf_mb / mtw, pf_mb / mtc, rss_pf, (double)pf_events / mtc / 1e6);
    unlink(pf);
  }
  printf("\ntargets\n\n");
  printf("  %-52s %7.1fx  %s\n", "streaming: MB/s >= 3x python3's (median of rounds)", ratio[0],
         bench_verdict(ratio[0] >= 3));
  printf("  %-52s %7.1f MB  %s\n", "streaming: peak RSS < 50 MB", rss[0], bench_verdict(rss[0] < 50));
  printf("  %-52s %7.1fx  %s\n", "labelprof's order: MB/s >= 3x python3's", ratio[1], bench_verdict(ratio[1] >= 3));
  printf("  %-52s %7.1f MB  %s\n", "labelprof's order: peak RSS < 50 MB", rss[1], bench_verdict(rss[1] < 50));
  unlink(sorted);
  unlink(at_end);
  if (tracks_rows(dir)) failed = 1;
  const char *e = getenv("LP_BENCH_CMD_N");
  if (memory_rows(dir, e && atol(e) > 0 ? atol(e) : 1000000)) failed = 1;
  rmdir(dir);
  return failed;
}
