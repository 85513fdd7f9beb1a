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

#include <limits.h>
#include <stdbool.h>
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
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("pfread", tests);
}
