/*
 * test_reader.c: the normalised event stream (tools/reader.h) as the JSON
 * reader produces it: every field a view may use, times in nanoseconds,
 * positions, the choice of reader, and the sink stopping a pass.
 */
#include "config.h"

#include "reader.h"
#include "runner.h"

#include <stdint.h>
#include <unistd.h>

static const char *dir;

typedef struct seen {
  lp_ev_kind_t kind;
  int64_t pid, tid, ts, dur;
  char name[64], cat[64], layer[32], phase[32], mode[32], series[32];
  double value;
  uint64_t line, column;
} seen_t;

typedef struct sink_state {
  seen_t ev[32];
  int n;
  int stop_after; /* 0: never */
} sink_state_t;

static void copy(char *to, size_t len, const char *from) { snprintf(to, len, "%s", from ? from : "(null)"); }

static int record(void *ctx, const lp_event_t *e) {
  sink_state_t *s = ctx;
  if (s->n < 32) {
    seen_t *v = &s->ev[s->n];
    v->kind = e->kind;
    v->pid = e->pid, v->tid = e->tid, v->ts = e->ts, v->dur = e->dur;
    copy(v->name, sizeof v->name, e->name);
    copy(v->cat, sizeof v->cat, e->category);
    copy(v->layer, sizeof v->layer, e->layer);
    copy(v->phase, sizeof v->phase, e->phase);
    copy(v->mode, sizeof v->mode, e->mode);
    copy(v->series, sizeof v->series, e->series);
    v->value = e->value;
    v->line = e->pos.line, v->column = e->pos.column;
  }
  s->n++;
  return s->stop_after && s->n >= s->stop_after ? 7 : 0;
}

static int read_text(const char *text, sink_state_t *s) {
  char path[256];
  snprintf(path, sizeof path, "%s/t.json", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
  lp_input_t *in = lp_input_open(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(in);
  lp_sink_t sink = {s, record, NULL};
  int rc = lp_read_input(in, &sink);
  lp_input_close(in);
  return rc;
}

static void test_reader_fields(void) {
  sink_state_t s = {.n = 0};
  int rc = read_text("{\"traceEvents\":[\n"
                     "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":3,\"tid\":4,\"args\":{\"name\":\"io \\u00e9\"}},\n"
                     "{\"ph\":\"X\",\"cat\":\"runtime,preparation\",\"name\":\"prep\",\"pid\":3,\"tid\":4,\"ts\":1.0005,"
                     "\"dur\":2.25,\"args\":{\"layer\":\"runtime\",\"phase\":\"preparation\",\"mode\":\"switch\",\"n\":[1,{}]}},\n"
                     "  {\"ph\":\"C\",\"name\":\"q\",\"pid\":3,\"ts\":7,\"args\":{\"a\":1,\"b\":2.5e3}},\n"
                     "{\"ph\":\"B\",\"name\":\"b\",\"ts\":-5},{\"ph\":\"E\",\"ts\":1e1},{\"ph\":\"I\",\"name\":\"mark\",\"ts\":0.001},\n"
                     "{\"ph\":\"s\",\"id\":1,\"ts\":3},{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":3,\"args\":{\"name\":\"srv\"}}\n"
                     "],\"otherData\":{\"x\":[1,{\"traceEvents\":2}]}}",
                     &s);
  CU_ASSERT_EQUAL(rc, LP_READ_OK);
  CU_ASSERT_EQUAL_FATAL(s.n, 9);
  CU_ASSERT_EQUAL(s.ev[0].kind, LP_EV_THREAD_NAME);
  CU_ASSERT_STRING_EQUAL(s.ev[0].name, "io \xc3\xa9");
  CU_ASSERT_EQUAL(s.ev[0].tid, 4);
  const seen_t *x = &s.ev[1];
  CU_ASSERT_EQUAL(x->kind, LP_EV_COMPLETE);
  CU_ASSERT_EQUAL(x->ts, 1001); /* 1.0005 us rounds half up to 1001 ns */
  CU_ASSERT_EQUAL(x->dur, 2250);
  CU_ASSERT_STRING_EQUAL(x->cat, "runtime,preparation");
  CU_ASSERT_STRING_EQUAL(x->layer, "runtime");
  CU_ASSERT_STRING_EQUAL(x->phase, "preparation");
  CU_ASSERT_STRING_EQUAL(x->mode, "switch");
  CU_ASSERT_EQUAL(x->line, 3);
  CU_ASSERT_EQUAL(x->column, 1);
  /* a counter: one event per series */
  CU_ASSERT_EQUAL(s.ev[2].kind, LP_EV_COUNTER);
  CU_ASSERT_STRING_EQUAL(s.ev[2].series, "a");
  CU_ASSERT_DOUBLE_EQUAL(s.ev[2].value, 1.0, 1e-9);
  CU_ASSERT_STRING_EQUAL(s.ev[3].series, "b");
  CU_ASSERT_DOUBLE_EQUAL(s.ev[3].value, 2500.0, 1e-9);
  CU_ASSERT_EQUAL(s.ev[3].ts, 7000);
  CU_ASSERT_EQUAL(s.ev[3].line, 4);
  CU_ASSERT_EQUAL(s.ev[3].column, 3);
  CU_ASSERT_STRING_EQUAL(s.ev[3].cat, "(null)");
  CU_ASSERT_EQUAL(s.ev[4].kind, LP_EV_BEGIN);
  CU_ASSERT_EQUAL(s.ev[4].ts, -5000);
  CU_ASSERT_EQUAL(s.ev[4].pid, 0); /* absent: 0 */
  CU_ASSERT_EQUAL(s.ev[5].kind, LP_EV_END);
  CU_ASSERT_EQUAL(s.ev[5].ts, 10000);
  CU_ASSERT_STRING_EQUAL(s.ev[5].name, "");
  CU_ASSERT_EQUAL(s.ev[6].kind, LP_EV_INSTANT);
  CU_ASSERT_EQUAL(s.ev[6].ts, 1);
  CU_ASSERT_EQUAL(s.ev[7].kind, LP_EV_SKIPPED);
  CU_ASSERT_STRING_EQUAL(s.ev[7].name, "s");
  CU_ASSERT_EQUAL(s.ev[8].kind, LP_EV_PROCESS_NAME);
  CU_ASSERT_STRING_EQUAL(s.ev[8].name, "srv");
}

/* A sink's non-zero verdict ends the pass at once, and comes back as it was. */
static void test_reader_sink_stops(void) {
  sink_state_t s = {.n = 0, .stop_after = 2};
  int rc = read_text("[{\"ph\":\"i\",\"ts\":1},{\"ph\":\"i\",\"ts\":2},{\"ph\":\"i\",\"ts\":3}]", &s);
  CU_ASSERT_EQUAL(rc, 7);
  CU_ASSERT_EQUAL(s.n, 2);
}

/* The array form without its ']' after a comma or an event; both forms empty. */
static void test_reader_forms(void) {
  const char *ok[] = {"[{\"ph\":\"i\",\"ts\":1},", "[{\"ph\":\"i\",\"ts\":1}\n", "[]", "{\"traceEvents\":[]}", "  [ ]  "};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    sink_state_t s = {.n = 0};
    CU_ASSERT_EQUAL(read_text(ok[i], &s), LP_READ_OK);
    CU_ASSERT_EQUAL(s.n, i < 2 ? 1 : 0);
  }
  sink_state_t s = {.n = 0};
  CU_ASSERT_EQUAL(read_text("[{\"ph\":\"i\",\"ts\":1},{\"ph\"", &s), LP_READ_BAD);
  CU_ASSERT_EQUAL(read_text("{\"traceEvents\":[{\"ph\":\"i\",\"ts\":1}", &s), LP_READ_BAD);
}

/* \u0000 in a string: kept as those six characters, so "a\u0000b" is neither "a" nor "a\u0000c". */
static void test_reader_nul_in_strings(void) {
  sink_state_t s = {.n = 0};
  int rc = read_text("[{\"ph\":\"M\",\"name\":\"thread_name\",\"tid\":1,\"args\":{\"name\":\"t\\u0000\"}},"
                     "{\"ph\":\"X\",\"name\":\"a\\u0000b\",\"tid\":1,\"ts\":1,\"dur\":1,"
                     "\"args\":{\"layer\\u0000\":\"no\",\"phase\":\"\\u0000\\u0000\"}}]",
                     &s);
  CU_ASSERT_EQUAL(rc, LP_READ_OK);
  CU_ASSERT_EQUAL_FATAL(s.n, 2);
  CU_ASSERT_STRING_EQUAL(s.ev[0].name, "t\\u0000");
  CU_ASSERT_STRING_EQUAL(s.ev[1].name, "a\\u0000b");
  CU_ASSERT_STRING_EQUAL(s.ev[1].layer, "(null)"); /* the key "layer\0" is not "layer" */
  CU_ASSERT_STRING_EQUAL(s.ev[1].phase, "\\u0000\\u0000");
}

/* The table of readers: JSON claims text that starts with '{' or '[' after blanks. */
static void test_reader_sniff(void) {
  CU_ASSERT_PTR_NOT_NULL_FATAL(lp_readers[0]);
  CU_ASSERT_STRING_EQUAL(lp_readers[0]->name, "chrome-json");
  CU_ASSERT(lp_json_reader.sniff((const unsigned char *)" \n{", 3));
  CU_ASSERT(lp_json_reader.sniff((const unsigned char *)"[", 1));
  CU_ASSERT(!lp_json_reader.sniff((const unsigned char *)"# tracer: nop", 13));
  CU_ASSERT(!lp_json_reader.sniff((const unsigned char *)"", 0));
}

/* Profiles and folded stacks by their first bytes, whatever their first field or the length of their first line. */
static void test_reader_sniff_profiles(void) {
  char line[700];
  memset(line, 'f', sizeof line);
  for (size_t i = 10; i < sizeof line; i += 10) line[i] = ';';
  CU_ASSERT(lp_folded_reader.sniff((const unsigned char *)line, 512)); /* a first line longer than the bytes peeked */
  CU_ASSERT(lp_folded_reader.sniff((const unsigned char *)"main;f 12\n", 10));
  CU_ASSERT(!lp_folded_reader.sniff((const unsigned char *)"Hello, world", 12));
  /* pprof: time_nanos first (Go's CPU profiles), period_type first (its heap profiles), sample_type first (ours). */
  static const unsigned char cpu[] = {0x48, 0xf4, 0xe4, 0xfc, 0xef, 0x85, 0xd3, 0xb6, 0xf7, 0x18, 0x0a, 0x04, 0x08, 0x01, 0x10, 0x02};
  static const unsigned char heap[] = {0x5a, 0x04, 0x08, 0x01, 0x10, 0x02, 0x60, 0x01, 0x0a, 0x04, 0x08, 0x03, 0x10, 0x04};
  static const unsigned char ours[] = {0x0a, 0x04, 0x08, 0x01, 0x10, 0x02, 0x0a, 0x04, 0x08, 0x03, 0x10, 0x04};
  CU_ASSERT(lp_pprof_reader.sniff(cpu, sizeof cpu));
  CU_ASSERT(lp_pprof_reader.sniff(heap, sizeof heap));
  CU_ASSERT(lp_pprof_reader.sniff(ours, sizeof ours));
  /* Not a profile: text, a Perfetto packet (field 1 holding a TracePacket's timestamp, 0x40), field 15. */
  static const unsigned char perfetto[] = {0x0a, 0x04, 0x40, 0xe8, 0x07, 0x50, 0x0a, 0x00};
  static const unsigned char f15[] = {0x78, 0x01};
  CU_ASSERT(!lp_pprof_reader.sniff((const unsigned char *)"Hello, world\n", 13));
  CU_ASSERT(!lp_pprof_reader.sniff(perfetto, sizeof perfetto));
  CU_ASSERT(!lp_pprof_reader.sniff(f15, sizeof f15));
}

/*
 * Strings longer than 1 MiB in JSON: the ones the views use are refused,
 * the others (keys, args, systemTraceEvents) skipped, cut by chunk
 * boundaries at every state (after a backslash, inside \uXXXX, inside a
 * UTF-8 sequence), with the events around them and their lines unchanged.
 * Numbers longer than 1024 characters are refused.
 */
static void test_reader_json_long_tokens(void) {
  static const char *const pieces[] = {"a", "\\\\", "\\\"", "\\u00e9", "\xc3\xa9", "\xf0\x9f\x98\x80", "\\n"};
  size_t cap = (size_t)3 << 20;
  char *blob = malloc(cap + 16);
  CU_ASSERT_PTR_NOT_NULL_FATAL(blob);
  for (int shift = 0; shift < 7; shift++) { /* where the pieces fall against the reader's 256 KiB chunks */
    size_t n = 0;
    for (size_t i = (size_t)shift; n < cap;) { /* the pieces in another order each time */
      const char *p = pieces[i++ % 7];
      memcpy(blob + n, p, strlen(p));
      n += strlen(p);
    }
    blob[n] = '\0';
    size_t len = 4 * n + 600;
    char *text = malloc(len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    static const char pad[] = "aaaaaaaaaaaaaaaaaaaaa";
    snprintf(text, len,
             "{\"systemTraceEvents\":\"%s\",\"traceEvents\":[\n"
             "{\"ph\":\"X\",\"name\":\"one\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2,\"args\":{\"blob\":\"%.*s%s\"}},\n"
             "{\"ph\":\"X\",\"name\":\"two\",\"pid\":1,\"tid\":1,\"ts\":5,\"dur\":1,\"args\":{\"%.*s%s\":[\"%.*s%s\"]}}\n]}\n",
             blob, shift, pad, blob, 2 * shift, pad, blob, 3 * shift, pad, blob);
    sink_state_t st = {0};
    CU_ASSERT_EQUAL(read_text(text, &st), 0);
    CU_ASSERT_EQUAL(st.n, 2);
    CU_ASSERT_STRING_EQUAL(st.ev[0].name, "one");
    CU_ASSERT_STRING_EQUAL(st.ev[1].name, "two");
    CU_ASSERT_EQUAL(st.ev[1].line, 3);
    CU_ASSERT_EQUAL(st.ev[1].column, 1);
    free(text);
  }
  /*
   * A string cut by a chunk's end and shorter than 1 MiB, then more than 1 MiB with no quote and no bracket
   * (blanks): what follows the string's end is outside it, not the start of another.
   */
  {
    size_t blanks = (size_t)3 << 20, len = 400000 + blanks + 200;
    char *text = malloc(len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    int k = snprintf(text, len, "[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1,\"args\":{\"k\":\"");
    memset(text + k, 'x', 300000);
    text[k + 300000] = '"';
    memset(text + k + 300001, ' ', blanks);
    snprintf(text + k + 300001 + blanks, 100, "}}]");
    sink_state_t st = {0};
    CU_ASSERT_EQUAL(read_text(text, &st), 0);
    CU_ASSERT_EQUAL(st.n, 1);
    free(text);
  }
  /* A name that long is refused. */
  size_t n = strlen(blob);
  char *text = malloc(n + 200);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  snprintf(text, n + 200, "[{\"ph\":\"X\",\"name\":\"%s\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2}]", blob);
  sink_state_t st = {0};
  CU_ASSERT_EQUAL(read_text(text, &st), LP_READ_BAD);
  CU_ASSERT_EQUAL(st.n, 0);
  /* A number of 2000 digits, even where nothing uses it. */
  memset(blob, '7', 2000);
  blob[2000] = '\0';
  snprintf(text, n + 200, "[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2,\"args\":{\"k\":%s}}]", blob);
  memset(&st, 0, sizeof st);
  CU_ASSERT_EQUAL(read_text(text, &st), LP_READ_BAD);
  free(text);
  free(blob);
}

int main(void) {
  dir = lp_test_tmpdir("reader");
  CU_TestInfo tests[] = {
      LP_TEST(test_reader_fields),
      LP_TEST(test_reader_sink_stops),
      LP_TEST(test_reader_forms),
      LP_TEST(test_reader_sniff),
      LP_TEST(test_reader_nul_in_strings),
      LP_TEST(test_reader_sniff_profiles),
      LP_TEST(test_reader_json_long_tokens),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("reader", tests);
  char path[256];
  snprintf(path, sizeof path, "%s/t.json", dir);
  unlink(path);
  rmdir(dir);
  return rc;
}
