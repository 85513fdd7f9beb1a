/*
 * test_importer.c: what Perfetto's own trace processor makes of the files
 * labelprof writes.
 *
 * Perfetto's trace processor is the engine inside ui.perfetto.dev: if it
 * imports a file with no error or data-loss statistic and its tables hold
 * what labelprof recorded, the UI shows the same. It is found at
 * $LP_TRACE_PROCESSOR, else beside the source tree
 * (../shared/tools/perfetto/trace_processor_shell); where it is absent or
 * cannot run, the test is skipped (exit 77).
 *
 * The files: every .pftrace test_perfetto, test_stream and test_merge decode (run again
 * here with LP_TEST_PFTRACE_KEEP, see perfetto_decode.h): files written at
 * the end, streamed, rotated, with drops, killed mid-write, empty, of
 * hostile names, layers, tracks, counters; sessions written here whose
 * JSON is compared too; and the well-formed Perfetto fixtures of
 * tests/data/cmd. One trace processor run per file, one query with every
 * statement; each output column is a number or hex, so that no name can
 * break the CSV. For each file:
 *   - no statistic of severity error or data_loss;
 *   - every slice (lane, category, name, duration, -1 for one that did not
 *     end, debug annotations) is one the tests' decoder reads, and the
 *     other way round; instants are slices of no duration;
 *   - nesting: every slice inside its parent, on its track, one level down;
 *   - counters: per name, the count and the sum of the values;
 *   - the "labelprof session" notes, name by name.
 * The decoder (perfetto_decode.h) is what test_perfetto checks against the
 * JSON of the same session and against `labelprof stats`; here the JSON's
 * otherData is also compared with the Perfetto file's notes directly.
 */
#include "internal.h"
#include "annot_entry.h"

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>

#include "perfetto_decode.h"
#include "runner.h"

#ifndef LP_TRACE_PROCESSOR_DEFAULT
#define LP_TRACE_PROCESSOR_DEFAULT "../shared/tools/perfetto/trace_processor_shell"
#endif
#ifndef LP_TEST_DATA
#define LP_TEST_DATA "tests/data/cmd"
#endif

static const char *dir, *tp;
static char query_path[512];

static const char query[] =
    "select 'err' as tag, hex(name) as name, value from stats where value > 0 and severity in ('error', "
    "'data_loss');\n"
    "select 'slice' as tag, hex(coalesce(th.name, tr.name, '')) as lane, hex(coalesce(s.category, '')) as cat, "
    "hex(coalesce(s.name, '')) as name, s.dur as dur, hex(coalesce(f.flags, '')) as flags from slice s join "
    "__intrinsic_track tr on s.track_id = tr.id left join thread th on th.utid = tr.utid left join (select "
    "arg_set_id, group_concat(k, ',') as flags from (select arg_set_id, substr(key, 7) || '=' || display_value as k "
    "from args where key glob 'debug.*' order by arg_set_id, k) group by arg_set_id) f on f.arg_set_id = "
    "s.arg_set_id where coalesce(s.name, '') != 'labelprof session';\n"
    "select 'nest' as tag, count(*) as n from slice c join slice p on c.parent_id = p.id where c.ts < p.ts or "
    "(p.dur >= 0 and c.dur >= 0 and c.ts + c.dur > p.ts + p.dur) or c.track_id != p.track_id or c.depth != "
    "p.depth + 1;\n"
    "select 'orphan' as tag, count(*) as n from slice where depth > 0 and parent_id is null;\n"
    "select 'counter' as tag, hex(ct.name) as name, count(*) as n, cast(sum(c.value) as int) as total from counter "
    "c join counter_track ct on c.track_id = ct.id group by ct.id;\n"
    "select 'note' as tag, hex(substr(a.key, 7)) as k, hex(a.display_value) as v from slice s join args a using "
    "(arg_set_id) where s.name = 'labelprof session' and a.key glob 'debug.*';\n";

/* ---- strings ---- */
typedef struct strs {
  char **v;
  size_t n, cap;
} strs_t;

static void strs_add(strs_t *s, const char *x) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 64;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s->v);
  }
  s->v[s->n] = strdup(x);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s->v[s->n]);
  s->n++;
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void strs_free(strs_t *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

static void hex(char *out, size_t size, const char *s) {
  static const char digits[] = "0123456789ABCDEF";
  size_t k = 0;
  for (; *s && k + 3 < size; s++) {
    out[k++] = digits[(unsigned char)*s >> 4];
    out[k++] = digits[(unsigned char)*s & 15];
  }
  out[k] = '\0';
}

/* Hex back to text (the notes' values, for messages). */
static void unhex(char *out, size_t size, const char *h) {
  size_t k = 0;
  for (; h[0] && h[1] && k + 1 < size; h += 2) {
    unsigned v;
    if (sscanf(h, "%2x", &v) != 1) break;
    out[k++] = (char)v;
  }
  out[k] = '\0';
}

/*
 * Two lists, which must hold the same (sorted here): prints the first
 * differences, naming what they are of and whose. Returns whether they do.
 */
static bool same_lists(strs_t *a, strs_t *b, const char *what, const char *file, const char *an, const char *bn) {
  if (a->n) qsort(a->v, a->n, sizeof *a->v, str_cmp);
  if (b->n) qsort(b->v, b->n, sizeof *b->v, str_cmp);
  size_t i = 0, j = 0, shown = 0;
  bool same = a->n == b->n;
  while (i < a->n || j < b->n) {
    int c = i == a->n ? 1 : j == b->n ? -1 : strcmp(a->v[i], b->v[j]);
    if (c == 0) {
      i++;
      j++;
      continue;
    }
    same = false;
    if (shown++ < 4)
      fprintf(stderr, "%s: %s, %s only: %s\n", file, what, c < 0 ? an : bn, c < 0 ? a->v[i] : b->v[j]);
    if (c < 0)
      i++;
    else
      j++;
  }
  return same;
}

/* ---- running the trace processor ---- */

/* Starts the trace processor on path with the query, its output to out; its pid. */
static pid_t tp_start(const char *path, const char *out) {
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), null = open("/dev/null", O_WRONLY);
    if (fd < 0 || null < 0 || dup2(fd, 1) < 0 || dup2(null, 2) < 0) _exit(126);
    execl(tp, tp, "query", "-f", query_path, path, (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* Waits for the trace processor started on path; its output, or NULL (said on stderr). */
static char *tp_wait(pid_t pid, const char *path, const char *out) {
  int status;
  CU_ASSERT_EQUAL_FATAL(lp_test_wait(pid, 0, &status), 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "%s: the trace processor failed (status %d)\n", path, status);
    return NULL;
  }
  FILE *f = fopen(out, "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
  for (size_t r; (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += r;
    if (n + 1 == cap) {
      buf = realloc(buf, cap *= 2);
      CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    }
  }
  fclose(f);
  unlink(out);
  buf[n] = '\0';
  return buf;
}

static char *run_tp(const char *path) {
  char out[600];
  snprintf(out, sizeof out, "%s/tp.out", dir);
  return tp_wait(tp_start(path, out), path, out);
}

/* The fields of a CSV row whose values are numbers or hex, quoted or not, into f; their count. */
static int fields(char *line, char **f, int max) {
  int n = 0;
  for (char *p = line; p && n < max;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    if (*p == '"') {
      p++;
      size_t l = strlen(p);
      if (l && p[l - 1] == '"') p[l - 1] = '\0';
    }
    f[n++] = p;
    p = comma ? comma + 1 : NULL;
  }
  return n;
}

/* ---- one file ---- */

typedef struct checked {
  unsigned files, slices, notes;
} checked_t;
static checked_t total;

/*
 * The trace processor's reading of the file at path (out: its output, or
 * NULL to run it now) against the tests' decoder's; strict false (a file
 * of another producer): only its statistics and nesting. Gives the file's
 * notes as the trace processor read them ("name=value") to notes_out.
 */
static void check_tp(const char *path, char *out, bool strict, strs_t *notes_out) {
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  t.want_evs = 1;
  int rc = strict ? pd_decode(&t, path) : 0;
  if (rc) fprintf(stderr, "%s: the decoder: %s\n", path, t.error);
  CU_ASSERT_EQUAL(rc, 0);
  if (!out) out = run_tp(path);
  CU_ASSERT_PTR_NOT_NULL(out);
  if (!out || rc) {
    pd_free(&t.lines);
    pd_evs_free(&t);
    free(out);
    return;
  }
  strs_t tp_slices = {0}, pd_slices = {0}, tp_counters = {0}, pd_counters = {0}, tp_notes = {0}, pd_notes = {0};
  long long nest_bad = -1, orphans = -1;
  unsigned errors = 0;
  for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
    char *f[8];
    int n = fields(line, f, 8);
    char key[8192];
    if (n >= 3 && strcmp(f[0], "err") == 0) {
      char name[256];
      unhex(name, sizeof name, f[1]);
      fprintf(stderr, "%s: the trace processor's statistic %s = %s\n", path, name, f[2]);
      errors++;
    } else if (n >= 6 && strcmp(f[0], "slice") == 0) {
      snprintf(key, sizeof key, "%s|%s|%s|%s|%s", f[1], f[2], f[3], f[4], f[5]);
      strs_add(&tp_slices, key);
    } else if (n >= 2 && strcmp(f[0], "nest") == 0) {
      nest_bad = atoll(f[1]);
    } else if (n >= 2 && strcmp(f[0], "orphan") == 0) {
      orphans = atoll(f[1]);
    } else if (n >= 4 && strcmp(f[0], "counter") == 0) {
      snprintf(key, sizeof key, "%s|%s|%s", f[1], f[2], f[3]);
      strs_add(&tp_counters, key);
    } else if (n >= 3 && strcmp(f[0], "note") == 0) {
      char k[128], v[1024];
      unhex(k, sizeof k, f[1]);
      unhex(v, sizeof v, f[2]);
      snprintf(key, sizeof key, "%s=%s", k, v);
      strs_add(&tp_notes, key);
      if (notes_out) strs_add(notes_out, key);
    }
  }
  /* The decoder's view of the same file. */
  typedef struct csum {
    const char *name;
    unsigned long long n;
    long long sum;
  } csum_t;
  csum_t cs[64];
  size_t ncs = 0;
  for (size_t i = 0; i < t.nevs; i++) {
    const pd_ev_t *e = &t.evs[i];
    if (e->ph == 'C') {
      size_t k = 0;
      while (k < ncs && strcmp(cs[k].name, e->name) != 0) k++;
      if (k == ncs && ncs < 64) cs[ncs++] = (csum_t){e->name, 0, 0};
      if (k < ncs) {
        cs[k].n++;
        cs[k].sum += e->value;
      }
      continue;
    }
    char l[2048], c[512], nm[4096], fl[2048], key[8800];
    hex(l, sizeof l, e->lane);
    hex(c, sizeof c, e->cat);
    hex(nm, sizeof nm, e->name);
    hex(fl, sizeof fl, e->flags);
    snprintf(key, sizeof key, "%s|%s|%s|%lld|%s", l, c, nm, e->ph == 'B' ? -1LL : (long long)e->dur, fl);
    strs_add(&pd_slices, key);
  }
  for (size_t k = 0; k < ncs; k++) {
    char nm[4096], key[4200];
    hex(nm, sizeof nm, cs[k].name);
    snprintf(key, sizeof key, "%s|%llu|%lld", nm, cs[k].n, cs[k].sum);
    strs_add(&pd_counters, key);
  }
  /* The decoder's notes: "name=value,..." (a value may hold commas: the names, of a-z, _ and digits after the first,
     are found at the start or after one). */
  for (const char *p = t.session; *p;) {
    const char *eq = p;
    while ((*eq >= 'a' && *eq <= 'z') || (*eq >= '0' && *eq <= '9' && eq > p) || *eq == '_') eq++;
    const char *next = strchr(p, ',');
    if (*eq == '=' && eq > p) {
      /* the value runs to the next ",name=" */
      const char *end = eq + 1;
      for (;;) {
        end = strchr(end, ',');
        if (!end) break;
        const char *k = end + 1;
        while ((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9' && k > end + 1) || *k == '_') k++;
        if (*k == '=' && k > end + 1) break;
        end++;
      }
      char note[1200];
      size_t len = end ? (size_t)(end - p) : strlen(p);
      snprintf(note, sizeof note, "%.*s", (int)len, p);
      strs_add(&pd_notes, note);
      if (!end) break;
      p = end + 1;
      continue;
    }
    if (!next) break;
    p = next + 1;
  }
  CU_ASSERT_EQUAL(errors, 0);
  CU_ASSERT_EQUAL(nest_bad, 0);
  CU_ASSERT_EQUAL(orphans, 0);
  if (strict) {
    const char *tpn = "the trace processor's", *pdn = "the decoder's";
    CU_ASSERT(same_lists(&tp_slices, &pd_slices, "slice (lane|cat|name|dur|flags, hex)", path, tpn, pdn));
    CU_ASSERT(same_lists(&tp_counters, &pd_counters, "counter (name|count|sum)", path, tpn, pdn));
    CU_ASSERT(same_lists(&tp_notes, &pd_notes, "note", path, tpn, pdn));
  }
  total.files++;
  total.slices += (unsigned)tp_slices.n;
  total.notes += (unsigned)tp_notes.n;
  strs_free(&tp_slices);
  strs_free(&pd_slices);
  strs_free(&tp_counters);
  strs_free(&pd_counters);
  strs_free(&tp_notes);
  strs_free(&pd_notes);
  pd_free(&t.lines);
  pd_evs_free(&t);
  free(out);
}

static void check_file(const char *path, strs_t *notes_out) { check_tp(path, NULL, true, notes_out); }

/* ---- the files ---- */

/* Runs a test program of the suite with LP_TEST_PFTRACE_KEEP=keep: every .pftrace it decodes is kept there. */
static void run_suite(const char *prog, const char *keep) {
  char path[4096];
  CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(prog, path));
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 || setenv("LP_TEST_PFTRACE_KEEP", keep, 1) != 0)
      _exit(126);
    execl(path, path, (char *)NULL);
    _exit(127);
  }
  int status;
  CU_ASSERT_EQUAL_FATAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Every file of d that want takes, two trace processors at a time (the next runs while one is read). */
static void check_dir(const char *d, bool (*want)(const char *name), bool strict) {
  DIR *dd = opendir(d);
  CU_ASSERT_PTR_NOT_NULL_FATAL(dd);
  strs_t names = {0};
  for (struct dirent *e; (e = readdir(dd)) != NULL;)
    if (want(e->d_name)) strs_add(&names, e->d_name);
  closedir(dd);
  if (names.n) qsort(names.v, names.n, sizeof *names.v, str_cmp);
  char path[2][4096], out[2][600];
  pid_t pid[2] = {-1, -1};
  for (size_t i = 0; i <= names.n; i++) {
    int k = (int)(i & 1);
    if (i < names.n) {
      snprintf(path[k], sizeof path[k], "%s/%s", d, names.v[i]);
      snprintf(out[k], sizeof out[k], "%s/tp-%d.out", dir, k);
      pid[k] = tp_start(path[k], out[k]);
    }
    if (i > 0) { /* the one before, while this one runs */
      int j = 1 - k;
      check_tp(path[j], tp_wait(pid[j], path[j], out[j]), strict, NULL);
    }
  }
  strs_free(&names);
}

static bool any_pftrace(const char *name) {
  size_t n = strlen(name);
  return n > 8 && strcmp(name + n - 8, ".pftrace") == 0;
}

/* The fixtures, but those that break Perfetto's rules on purpose (a time past 2^63 ns: the reader must refuse it). */
static bool well_formed_fixture(const char *name) {
  return any_pftrace(name) && strcmp(name, "pf_clock_overflow.pftrace") != 0;
}

/* The fuzz seeds that are whole traces (the others are hostile on purpose: conflicting tracks, clocks past 2^63). */
static bool well_formed_seed(const char *name) {
  return any_pftrace(name) && strncmp(name, "perfetto-", 9) == 0 && strcmp(name, "perfetto-many-tracks.pftrace") != 0;
}

/* Every .pftrace test_perfetto and test_stream write and read, through the trace processor. */
static void test_importer_the_suites_files(void) {
  char keep[600];
  snprintf(keep, sizeof keep, "%s/keep", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(keep, 0700), 0);
  run_suite("tests/test_perfetto", keep);
  run_suite("tests/test_stream", keep);
  run_suite("tests/test_merge", keep); /* merged files: several processes, their clocks aligned */
  unsigned before = total.files;
  check_dir(keep, any_pftrace, true);
  CU_ASSERT(total.files - before >= 30); /* the suites wrote what they always write */
}

/*
 * The Perfetto fixtures of tests/data/cmd, hand-made as other producers
 * write (which the tests' decoder, made for labelprof's own files, would
 * refuse), and the whole traces among the fuzz seeds: no error statistic,
 * and nesting.
 */
static void test_importer_fixtures(void) {
  unsigned before = total.files;
  check_dir(LP_TEST_DATA, well_formed_fixture, false);
  check_dir(LP_TEST_DATA "/fuzz", well_formed_seed, false);
  CU_ASSERT(total.files - before >= 10);
}

/* ---- sessions written here: the JSON's otherData and the Perfetto notes ---- */

static void spin(void) {
  for (volatile int i = 0; i < 2000; i++) {
  }
}

static void workload(void) {
  for (int r = 0; r < 50; r++) {
    LP_SCOPE("importer outer");
    {
      LP_SCOPE_L(LP_LEVEL_OPERATOR, "importer \"op\"|pipe");
      spin();
    }
    LP_SCOPE_PHASE(LP_LAYER_RUNTIME, LP_PHASE_EXECUTION, "importer layered");
    LP_INSTANT("importer instant");
    LP_COUNTER("importer depth", r);
    lp_impl_annot_push("made \"here\"", "importer domain"); /* an NVTX range's way in */
    lp_impl_annot_end();
  }
}

/* A session's options on CLOCK_MONOTONIC: levels (0: the default), streamed to path when path is not NULL. */
static lp_trace_opts_t opts(uint32_t levels, const char *path) {
  lp_trace_opts_t o;
  memset(&o, 0, sizeof o);
  o.levels = levels;
  o.clock = LP_CLOCK_MONOTONIC;
  o.policy = path ? LP_TRACE_STREAM : LP_TRACE_DISCARD;
  o.path = path;
  return o;
}

/* The JSON's otherData as "name=value" (strings as they are, numbers and booleans as JSON writes them). */
static void json_notes(const char *path, strs_t *out) {
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *od = json_object_get(root, "otherData");
  CU_ASSERT_PTR_NOT_NULL_FATAL(od);
  const char *k;
  json_t *v;
  json_object_foreach(od, k, v) {
    char note[1200];
    if (json_is_string(v))
      snprintf(note, sizeof note, "%s=%s", k, json_string_value(v));
    else if (json_is_integer(v))
      snprintf(note, sizeof note, "%s=%lld", k, (long long)json_integer_value(v));
    else
      snprintf(note, sizeof note, "%s=%s", k, json_is_true(v) ? "true" : "false");
    strs_add(out, note);
  }
  json_decref(root);
}

/* What a Perfetto file's notes must say that a JSON's need not: the stream's file. */
static bool perfetto_only(const char *note) {
  return strncmp(note, "file_start_ns=", 14) == 0 || strncmp(note, "session_events_dropped=", 23) == 0 ||
         strncmp(note, "file_number=", 12) == 0;
}

/*
 * One session written as JSON and as Perfetto (stopped, then still
 * running): the trace processor reads the Perfetto file as the decoder
 * does, and its notes are the JSON's otherData name by name (the JSON's
 * ts_base_ns aside: the base of its "ts", which Perfetto's exact times do
 * not need). Then a stream of the same work: its notes say the same names
 * (with its own policy and its file's), the levels among them.
 */
static void test_importer_notes_as_in_the_json(void) {
  for (int running = 0; running < 2; running++) {
    char js[600], pf[600];
    snprintf(js, sizeof js, "%s/notes-%d.json", dir, running);
    snprintf(pf, sizeof pf, "%s/notes-%d.pftrace", dir, running);
    lp_trace_opts_t o = opts(LP_LEVEL_ALL, NULL);
    CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
    LP_BEGIN("importer open"); /* still open at the end: unfinished, in both */
    workload();
    if (!running) CU_ASSERT_EQUAL(lp_trace_stop(), 0);
    CU_ASSERT_EQUAL(lp_trace_write_json(js, "importer"), 0);
    CU_ASSERT_EQUAL(lp_trace_write_perfetto(pf, "importer"), 0);
    LP_END();
    if (running) CU_ASSERT_EQUAL(lp_trace_stop(), 0);
    strs_t jn = {0}, pn = {0}, jn2 = {0};
    json_notes(js, &jn);
    check_file(pf, &pn);
    /* The running session's stop is when each file was taken; the REALTIME reading at the end, when it was written. */
    size_t ends = 0;
    for (size_t i = 0; i < jn.n; i++)
      if (strncmp(jn.v[i], "ts_base_ns=", 11) != 0 && (!running || strncmp(jn.v[i], "session_stop_ns=", 16) != 0) &&
          strncmp(jn.v[i], "realtime_end_", 13) != 0)
        strs_add(&jn2, jn.v[i]);
    strs_t pn2 = {0};
    for (size_t i = 0; i < pn.n; i++)
      if (strncmp(pn.v[i], "realtime_end_", 13) == 0)
        ends++;
      else if (!running || strncmp(pn.v[i], "session_stop_ns=", 16) != 0)
        strs_add(&pn2, pn.v[i]);
    CU_ASSERT_EQUAL(ends, 3);
    CU_ASSERT(same_lists(&pn2, &jn2, "note", pf, "the Perfetto file's", "the JSON's"));
    bool found = false;
    for (size_t i = 0; i < pn.n; i++) found |= strcmp(pn.v[i], "levels=request,runtime,operator,debug,annotations") == 0;
    CU_ASSERT(found);
    found = false;
    for (size_t i = 0; i < pn.n; i++) found |= strcmp(pn.v[i], "unfinished_scopes=1") == 0;
    CU_ASSERT(found);
    strs_free(&jn);
    strs_free(&jn2);
    strs_free(&pn);
    strs_free(&pn2);
  }
  /* The stream: the same names, its policy and its file's three more. */
  char st[600], js[600];
  snprintf(st, sizeof st, "%s/notes-stream.pftrace", dir);
  snprintf(js, sizeof js, "%s/notes-0.json", dir);
  lp_trace_opts_t o = opts(LP_LEVEL_ALL, st);
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  workload();
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  strs_t jn = {0}, sn = {0}, jk = {0}, sk = {0};
  json_notes(js, &jn);
  check_file(st, &sn);
  for (size_t i = 0; i < jn.n; i++) {
    if (strncmp(jn.v[i], "ts_base_ns=", 11) == 0) continue;
    *strchr(jn.v[i], '=') = '\0';
    strs_add(&jk, jn.v[i]);
  }
  bool levels = false, policy = false, running = false;
  for (size_t i = 0; i < sn.n; i++) {
    levels |= strcmp(sn.v[i], "levels=request,runtime,operator,debug,annotations") == 0;
    policy |= strcmp(sn.v[i], "policy=stream") == 0;
    running |= strcmp(sn.v[i], "session_running=false") == 0;
    if (perfetto_only(sn.v[i])) continue;
    *strchr(sn.v[i], '=') = '\0';
    strs_add(&sk, sn.v[i]);
  }
  CU_ASSERT(levels && policy && running);
  CU_ASSERT(same_lists(&sk, &jk, "note name", st, "the stream's", "the JSON's"));
  strs_free(&jn);
  strs_free(&sn);
  strs_free(&jk);
  strs_free(&sk);
}

/*
 * A rotated stream with a scope open across its files: in each file the
 * scope is a slice that did not end (the trace processor's dur -1), and
 * the file's notes count it among its unfinished scopes; in the next it is
 * begun again, flagged truncated.
 */
static void test_importer_rotated_open_scope_is_unfinished(void) {
  char path[600];
  snprintf(path, sizeof path, "%s/across-%%n.pftrace", dir);
  lp_trace_opts_t o = opts(0, path);
  o.rotate_bytes = 4096;
  CU_ASSERT_EQUAL_FATAL(lp_trace_start(&o), 0);
  LP_BEGIN("importer across");
  for (int k = 0; k < 3; k++) {
    workload();
    CU_ASSERT_EQUAL(lp__trace_stream_sync(), 0); /* written: the next chunk starts a new file */
  }
  LP_END();
  CU_ASSERT_EQUAL(lp_trace_stop(), 0);
  char first[600], second[600];
  snprintf(first, sizeof first, "%s/across-1.pftrace", dir);
  snprintf(second, sizeof second, "%s/across-2.pftrace", dir);
  strs_t n1 = {0}, n2 = {0};
  check_file(first, &n1);
  check_file(second, &n2);
  bool open1 = false, running1 = false;
  for (size_t i = 0; i < n1.n; i++) {
    open1 |= strncmp(n1.v[i], "unfinished_scopes=", 18) == 0 && atoi(n1.v[i] + 18) >= 1;
    running1 |= strcmp(n1.v[i], "session_running=true") == 0;
  }
  CU_ASSERT(open1 && running1);
  pd_trace_t t;
  memset(&t, 0, sizeof t);
  t.want_evs = 1;
  CU_ASSERT_EQUAL(pd_decode(&t, first), 0);
  unsigned unfinished = 0;
  for (size_t i = 0; i < t.nevs; i++) unfinished += t.evs[i].ph == 'B' && strcmp(t.evs[i].name, "importer across") == 0;
  CU_ASSERT_EQUAL(unfinished, 1);
  pd_free(&t.lines);
  pd_evs_free(&t);
  memset(&t, 0, sizeof t);
  t.want_evs = 1;
  CU_ASSERT_EQUAL(pd_decode(&t, second), 0);
  unsigned truncated = 0;
  for (size_t i = 0; i < t.nevs; i++)
    truncated += strcmp(t.evs[i].name, "importer across") == 0 && strstr(t.evs[i].flags, "truncated=true") != NULL;
  CU_ASSERT_EQUAL(truncated, 1);
  pd_free(&t.lines);
  pd_evs_free(&t);
  strs_free(&n1);
  strs_free(&n2);
}

int main(void) {
  const char *env = getenv("LP_TRACE_PROCESSOR");
  tp = env && *env ? env : LP_TRACE_PROCESSOR_DEFAULT;
  if (access(tp, X_OK) != 0) {
    printf("test_importer: skipped: no trace processor at %s (LP_TRACE_PROCESSOR names one)\n", tp);
    return 77;
  }
  dir = lp_test_tmpdir("importer");
  snprintf(query_path, sizeof query_path, "%s/query.sql", dir);
  FILE *q = fopen(query_path, "w");
  if (!q || fputs(query, q) < 0 || fclose(q) != 0) return 2;
  /* It must run here: its libraries (protobuf, sqlite) may be missing. */
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    execl(tp, tp, "--version", (char *)NULL);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || lp_test_wait(pid, 0, &status) != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("test_importer: skipped: the trace processor at %s does not run here\n", tp);
    return 77;
  }
  CU_TestInfo tests[] = {LP_TEST(test_importer_notes_as_in_the_json),
                         LP_TEST(test_importer_rotated_open_scope_is_unfinished), LP_TEST(test_importer_fixtures),
                         LP_TEST(test_importer_the_suites_files), CU_TEST_INFO_NULL};
  int rc = lp_test_main("importer", tests);
  printf("test_importer: %u files, %u slices and %u notes read alike by Perfetto's trace processor\n", total.files,
         total.slices, total.notes);
  return rc;
}
