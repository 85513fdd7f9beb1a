/*
 * test_pfread.c: the command on Perfetto traces shaped like other producers'
 * (Chrome, the Perfetto SDK, the tracing service), hand-made: each
 * tests/data/cmd/pf_*.txtpb says what its .pftrace holds (encoded with
 * protoc --encode=perfetto.protos.Trace against Perfetto's schema), and the
 * tests here give what `labelprof stats --by thread` must print of it, as
 * Perfetto's trace processor reads the same file.
 */
#include "config.h"

#include "runner.h"
#include "pb_write.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LP_TEST_DATA
#error "LP_TEST_DATA: the directory of the fixtures"
#endif

static char tool[PATH_MAX];

typedef struct run {
  int status;
  char *out, *err;
} run_t;

/* labelprof stats --by thread --format csv FILE, FILE in tests/data/cmd. */
static run_t stats(const char *name) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", LP_TEST_DATA, name);
  char *argv[] = {tool, "stats", "--by", "thread", "--format", "csv", path, NULL};
  lp_test_run_t t = lp_test_run(tool, argv, NULL, NULL);
  run_t r = {lp_test_exit_code(&t), t.out, t.err};
  return r;
}

static void run_free(run_t *r) {
  free(r->out);
  free(r->err);
}

static const char head[] = "thread,label,calls,total_ns,self_ns,mean_ns,min_ns,p50_ns,p95_ns,p99_ns,max_ns,self_percent\n";

/* Exit 0, nothing on stderr, and exactly these rows after the header. */
static void expect_rows(const char *name, const char *rows) {
  run_t r = stats(name);
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  size_t n = strlen(head);
  bool ok = strncmp(r.out, head, n) == 0 && strcmp(r.out + n, rows) == 0;
  if (!ok) fprintf(stderr, "\n%s: expected:\n%s%s--- got (exit %d):\n%s%s---\n", name, head, rows, r.status, r.out, r.err);
  CU_ASSERT(ok);
  run_free(&r);
}

/*
 * A first packet of 91 or 123 bytes makes the file start with "\n[" or
 * "\n{", as JSON may; one longer than the bytes the command looks at may have
 * a first field that runs past them. All three are Perfetto traces.
 */
static void test_pfread_first_packet(void) {
  static const char *const files[] = {"pf_first_packet_91.pftrace", "pf_first_packet_123.pftrace"};
  static const char *const threads[] = {"io thread, its name long enough that the first packet is 91 bytes",
                                        "render thread, its name long enough that the first packet of this trace "
                                        "is 123 bytes long exactly"};
  for (int i = 0; i < 2; i++) {
    char rows[512];
    snprintf(rows, sizeof rows,
             "\"%s (pid 300, tid 301)\",load,1,3000,2000,3000,3000,3000,3000,3000,3000,66.6667\n"
             "\"%s (pid 300, tid 301)\",parse,1,1000,1000,1000,1000,1000,1000,1000,1000,33.3333\n",
             threads[i], threads[i]);
    expect_rows(files[i], rows);
  }
  /* JSON text that starts with "\n[" and whose next 91 bytes happen to parse as protobuf is still JSON. */
  expect_rows("pf_not_first_packet.json",
              "\"pid 1178, tid 1735\",n24824,1,823000,823000,823000,823000,823000,823000,823000,823000,100.0000\n"
              "\"pid 83, tid 4982\",n27018,1,274000,274000,274000,274000,274000,274000,274000,274000,100.0000\n");
  expect_rows("pf_first_packet_long.pftrace", "\"main (server pid 500, tid 501)\",serve,1,2000,2000,2000,2000,2000,2000,2000,2000,100.0000\n");
}

/*
 * Tracks that are neither a thread's nor the process's (as async work is
 * put on) are lanes of their own, whatever the threads' ids: here the main
 * thread's tid is 1, as in a container, and a counter track comes first.
 */
static void test_pfread_own_tracks_are_own_lanes(void) {
  expect_rows("pf_async_track_lanes.pftrace",
              "\"requests (server pid 1, tid 1000000000)\",handle,1,7000,7000,7000,7000,7000,7000,7000,7000,100.0000\n"
              "\"worker jobs (server pid 1, tid 1000000001)\",flush,1,5000,5000,5000,5000,5000,5000,5000,5000,100.0000\n"
              "\"server (server pid 1, tid 1)\",accept,1,4000,4000,4000,4000,4000,4000,4000,4000,100.0000\n"
              "\"worker (server pid 1, tid 2)\",compress,1,3000,3000,3000,3000,3000,3000,3000,3000,100.0000\n");
}

/*
 * Events that name no track: the thread whose track descriptor their
 * sequence carries, after the state is cleared too; so is track 0 for a
 * legacy phase, while track 0 with a type is the trace's default track;
 * a legacy event's pid and tid overrides win; a process-wide legacy instant
 * is the process's (the default lane spans "global" only).
 */
static void test_pfread_sequence_thread(void) {
  expect_rows("pf_sequence_thread.pftrace",
              "\"ui (pid 7, tid 70)\",frame,1,2000,2000,2000,2000,2000,2000,2000,2000,30.7692\n"
              "\"ui (pid 7, tid 70)\",paint,1,2000,2000,2000,2000,2000,2000,2000,2000,30.7692\n"
              "\"ui (pid 7, tid 70)\",layout,1,500,500,500,500,500,500,500,500,7.6923\n"
              "\"worker (pid 7, tid 71)\",gc,1,2000,2000,2000,2000,2000,2000,2000,2000,100.0000\n"
              "\"pid 0, tid 0\",global,1,400,400,400,400,400,400,400,400,100.0000\n");
}

/*
 * Chrome's older traces: a ThreadDescriptor names the thread of each
 * sequence and the reference of its times, a ProcessDescriptor the process;
 * events count microseconds from the previous one (or give them whole) on
 * MONOTONIC, without a packet timestamp. A delta with no reference since the
 * state was cleared is skipped.
 */
static void test_pfread_legacy_chrome(void) {
  expect_rows("pf_legacy_chrome.pftrace",
              "\"CrBrowserMain (Browser pid 20, tid 21)\",Task,1,20000,20000,20000,20000,20000,20000,20000,20000,42.5532\n"
              "\"CrBrowserMain (Browser pid 20, tid 21)\",MessageLoop::Run,1,30000,10000,30000,30000,30000,30000,30000,"
              "30000,21.2766\n"
              "\"CrBrowserMain (Browser pid 20, tid 21)\",Paint,1,7000,7000,7000,7000,7000,7000,7000,7000,14.8936\n"
              "\"Chrome_IOThread (Browser pid 20, tid 22)\",IPC,1,4000,4000,4000,4000,4000,4000,4000,4000,100.0000\n");
}

/* A track of its own whose descriptor has no name is named after its first event, as Perfetto names it. */
static void test_pfread_unnamed_track(void) {
  expect_rows("pf_unnamed_track.pftrace",
              "\"upload photo.jpg (uploader pid 30, tid 1000000000)\",upload photo.jpg,1,7000,5000,7000,7000,7000,7000,"
              "7000,7000,71.4286\n"
              "\"upload photo.jpg (uploader pid 30, tid 1000000000)\",compress,1,2000,2000,2000,2000,2000,2000,2000,2000,"
              "28.5714\n"
              "\"main (uploader pid 30, tid 31)\",start upload,1,500,500,500,500,500,500,500,500,100.0000\n");
}

/*
 * A track of its own whose description says its tid as labelprof writes it
 * keeps that tid, the lane of labelprof's JSON; other tracks are numbered in
 * the file's order, past the tids said, as for any producer.
 */
static void test_pfread_track_said_tid(void) {
  expect_rows("pf_track_said_tid.pftrace",
              "\"fetch (app pid 50, tid 1000000000)\",get,1,5000,5000,5000,5000,5000,5000,5000,5000,100.0000\n"
              "\"render (app pid 50, tid 1000000001)\",draw,1,4000,4000,4000,4000,4000,4000,4000,4000,100.0000\n"
              "\"upload (app pid 50, tid 1000000005)\",put,1,3000,3000,3000,3000,3000,3000,3000,3000,100.0000\n"
              "\"decode (app pid 50, tid 1000000002)\",inflate,1,2000,2000,2000,2000,2000,2000,2000,2000,100.0000\n"
              "\"parse (app pid 50, tid 1000000003)\",tokens,1,1000,1000,1000,1000,1000,1000,1000,1000,100.0000\n");
}

/*
 * An event whose name is an iid never interned on its sequence (or interned
 * before the state was cleared) is kept without a name, as Perfetto's trace
 * processor keeps it, and a note on stderr (the rows go to stdout) counts
 * such events.
 */
static void test_pfread_unknown_name_iid(void) {
  static const char rows[] = "\"main (viewer pid 40, tid 41)\",decode,1,4000,3000,4000,4000,4000,4000,4000,4000,50.0000\n"
                             "\"main (viewer pid 40, tid 41)\",,2,2000,2000,1000,1000,1000,1000,1000,1000,33.3333\n"
                             "\"worker (viewer pid 40, tid 42)\",,1,1000,1000,1000,1000,1000,1000,1000,1000,33.3333\n"
                             "\"worker (viewer pid 40, tid 42)\",resize,1,1000,1000,1000,1000,1000,1000,1000,1000,"
                             "33.3333\n";
  run_t r = stats("pf_unknown_name_iid.pftrace");
  CU_ASSERT_EQUAL(r.status, 0);
  size_t n = strlen(head);
  bool ok = strncmp(r.out, head, n) == 0 && strcmp(r.out + n, rows) == 0;
  if (!ok) fprintf(stderr, "\nexpected:\n%s%s--- got (exit %d):\n%s%s---\n", head, rows, r.status, r.out, r.err);
  CU_ASSERT(ok);
  char note[PATH_MAX + 200];
  snprintf(note, sizeof note,
           "note: %s/pf_unknown_name_iid.pftrace: 3 events name an iid never interned on their sequence: "
           "they are counted without a name, as Perfetto shows them\n",
           LP_TEST_DATA);
  if (strcmp(r.err, note) != 0) fprintf(stderr, "\nexpected on stderr:\n%s--- got:\n%s---\n", note, r.err);
  CU_ASSERT_STRING_EQUAL(r.err, note);
  run_free(&r);
}

/* ---- a trace of many tracks, written here ---- */

/* A track descriptor under process 42 (uuid 7), on its own sequence, saying the tid of its lane. */
static void many_track(pbw_t *trace, uint64_t uuid, uint32_t seq, const char *name, long tid) {
  pbw_t packet = {0}, td = {0};
  char desc[80];
  snprintf(desc, sizeof desc, "labelprof track, tid %ld", tid);
  pbw_uint(&td, 1, uuid);
  pbw_uint(&td, 5, 7);
  pbw_str(&td, 2, name);
  pbw_str(&td, 14, desc);
  pbw_uint(&packet, 10, seq);
  pbw_sub(&packet, 60, &td);
  pbw_sub(trace, 1, &packet);
  pbw_free(&td);
  pbw_free(&packet);
}

/* A slice on track uuid: its begin at ts and its end dur later. */
static void many_slice(pbw_t *trace, uint64_t uuid, uint32_t seq, uint64_t ts, uint64_t dur) {
  pbw_t packet = {0}, te = {0};
  for (int end = 0; end < 2; end++) {
    pbw_uint(&te, 9, end ? 2 : 1);
    pbw_uint(&te, 11, uuid);
    if (!end) pbw_str(&te, 23, "work");
    pbw_uint(&packet, 8, ts + (end ? dur : 0));
    pbw_uint(&packet, 10, seq);
    pbw_sub(&packet, 11, &te);
    pbw_sub(trace, 1, &packet);
  }
  pbw_free(&te);
  pbw_free(&packet);
}

/*
 * Thousands of tracks, each on a sequence of its own, each saying a tid in
 * the reverse of the file's order, then two more saying tids already taken,
 * which are numbered past the rest: each slice must land on its own track,
 * with its own duration, in its lane (the reader's tables of sequences and
 * tracks grow many times over).
 */
static void test_pfread_many_tracks(void) {
  enum { NT = 3000 };
  const long first = 1000000000;
  pbw_t trace = {0}, proc = {0}, pd = {0}, packet = {0};
  pbw_uint(&pd, 1, 42);
  pbw_str(&pd, 6, "app");
  pbw_uint(&proc, 1, 7);
  pbw_sub(&proc, 3, &pd);
  pbw_uint(&packet, 10, 1);
  pbw_sub(&packet, 60, &proc);
  pbw_sub(&trace, 1, &packet);
  pbw_free(&pd);
  pbw_free(&proc);
  pbw_free(&packet);
  char name[32];
  for (uint32_t t = 0; t < NT + 2; t++) {
    snprintf(name, sizeof name, "track %u", t);
    many_track(&trace, 1000 + t, 2 + t, name, t < NT ? first + (NT - 1 - t) : first);
  }
  for (uint32_t t = 0; t < NT + 2; t++) many_slice(&trace, 1000 + t, 2 + t, 1000000 + 100000 * (uint64_t)t, 10 * (t + 1));
  CU_ASSERT_FATAL(!trace.failed);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/many.pftrace", lp_test_tmpdir("pfread"));
  FILE *f = fopen(path, "wb");
  CU_ASSERT_FATAL(f != NULL);
  CU_ASSERT_FATAL(fwrite(trace.b, 1, trace.n, f) == trace.n);
  CU_ASSERT_FATAL(fclose(f) == 0);
  pbw_free(&trace);
  char *argv[] = {tool, "stats", "--by", "thread", "--format", "csv", path, NULL};
  lp_test_run_t r = lp_test_run(tool, argv, NULL, NULL);
  CU_ASSERT_EQUAL(lp_test_exit_code(&r), 0);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  size_t rows = 0, right = 0;
  const char *line = strchr(r.out, '\n');
  while (line && line[1]) {
    unsigned t;
    long tid, total;
    line++;
    rows++;
    if (sscanf(line, "\"track %u (app pid 42, tid %ld)\",work,1,%ld,", &t, &tid, &total) == 3 && t < NT + 2 &&
        total == 10 * (long)(t + 1) && tid == (t < NT ? first + (NT - 1 - t) : first + NT + (t - NT)))
      right++;
    else if (rows - right <= 3)
      fprintf(stderr, "\nmany tracks: unexpected row: %.120s\n", line);
    line = strchr(line, '\n');
  }
  CU_ASSERT_EQUAL(rows, NT + 2);
  CU_ASSERT_EQUAL(right, NT + 2);
  lp_test_run_free(&r);
}

/*
 * A clock snapshot may put a clock anywhere up to 2^63 - 1 ns from BOOTTIME:
 * a time on that clock is then beyond ±2^62 ns on BOOTTIME and the file is
 * refused at its packet, with no overflow on the way (the sum used to wrap
 * back into range and read as a slice of 1 ns).
 */
static void test_pfread_clock_overflow(void) {
  run_t r = stats("pf_clock_overflow.pftrace");
  CU_ASSERT_EQUAL(r.status, 2);
  CU_ASSERT_STRING_EQUAL(r.out, "");
  bool said = strstr(r.err, "pf_clock_overflow.pftrace") && strstr(r.err, "a time beyond") && strstr(r.err, "2^62 ns");
  if (!said) fprintf(stderr, "\nclock overflow: got (exit %d):\n%s%s---\n", r.status, r.out, r.err);
  CU_ASSERT(said);
  run_free(&r);
}

/*
 * Names longer than 4,095 bytes, kept whole (Perfetto's trace processor
 * keeps them so): two 4,100-byte names that differ in their last byte are
 * two labels, and the e-acute that ends a 4,096-byte name is not cut.
 */
static void test_pfread_long_names(void) {
  run_t r = stats("pf_long_names.pftrace");
  CU_ASSERT_EQUAL(r.status, 0);
  CU_ASSERT_STRING_EQUAL(r.err, "");
  char x[4100], y[4097], row[4400];
  memset(x, 'x', 4099);
  x[4099] = '\0';
  memset(y, 'y', 4094);
  memcpy(y + 4094, "\xc3\xa9", 3);
  snprintf(row, sizeof row, "\n\"worker (pid 10, tid 11)\",%sa,1,1000,1000,", x);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, row));
  snprintf(row, sizeof row, "\n\"worker (pid 10, tid 11)\",%sb,1,2000,2000,", x);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, row));
  snprintf(row, sizeof row, "\n\"worker (pid 10, tid 11)\",%s,1,3000,3000,", y);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.out, row));
  run_free(&r);
}

/*
 * A NUL inside a name, inline or interned, does not end it: "alpha" and
 * "alpha\0beta" are two labels, the second written alpha\u0000beta as the
 * JSON reader writes "\u0000". (Perfetto's trace processor cuts the name at
 * the NUL and merges them; labelprof keeps apart what the file keeps apart.)
 */
static void test_pfread_nul_names(void) {
  expect_rows("pf_nul_names.pftrace",
              "\"worker (pid 10, tid 11)\",alpha\\u0000beta,1,3000,3000,3000,3000,3000,3000,3000,3000,46.1538\n"
              "\"worker (pid 10, tid 11)\",alpha,1,1000,1000,1000,1000,1000,1000,1000,1000,15.3846\n"
              "\"worker (pid 10, tid 11)\",gamma\\u0000delta,1,500,500,500,500,500,500,500,500,7.6923\n");
}

int main(void) {
  if (!realpath("tools/labelprof", tool)) {
    perror("test_pfread: setup (run from the build directory)");
    return 2;
  }
  CU_TestInfo tests[] = {
      LP_TEST(test_pfread_first_packet),
      LP_TEST(test_pfread_own_tracks_are_own_lanes),
      LP_TEST(test_pfread_sequence_thread),
      LP_TEST(test_pfread_legacy_chrome),
      LP_TEST(test_pfread_unnamed_track),
      LP_TEST(test_pfread_unknown_name_iid),
      LP_TEST(test_pfread_track_said_tid),
      LP_TEST(test_pfread_many_tracks),
      LP_TEST(test_pfread_clock_overflow),
      LP_TEST(test_pfread_long_names),
      LP_TEST(test_pfread_nul_names),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("pfread", tests);
}
