/*
 * test_nvtx.c: liblabelprof_nvtx.so driven as NVTX's loader drives an
 * injection library (NVTX's documented injection interface, nvtxTypes.h):
 * dlopen, InitializeInjectionNvtx2 with an export-table getter whose
 * callbacks table hands out the CORE, CORE2 and SYNC function tables (one
 * pointer per callback id, slot 0 unused, each pointing at the function
 * pointer the program calls through), then calls through those pointers.
 * The tree, the timeline, misuse, threads, domains and the bound on names.
 */
#define _GNU_SOURCE
#include <labelprof.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>
#include <wchar.h>

#include "runner.h"
#include "trace_json.h"

/* ---- the loader's side, from NVTX's documented layout ---- */
typedef void (*fn_t)(void);
enum { CORE_SIZE = 16, CORE2_SIZE = 16, SYNC_SIZE = 7 }; /* NVTX_CBID_*_SIZE */
static fn_t core_fp[CORE_SIZE], core2_fp[CORE2_SIZE], sync_fp[SYNC_SIZE];
static fn_t *core_tab[CORE_SIZE + 1], *core2_tab[CORE2_SIZE + 1], *sync_tab[SYNC_SIZE + 1];

static int get_module_table(int module, fn_t ***out, unsigned *size) {
  switch (module) {
  case 1: *out = core_tab, *size = CORE_SIZE; return 1;   /* NVTX_CB_MODULE_CORE */
  case 5: *out = core2_tab, *size = CORE2_SIZE; return 1; /* NVTX_CB_MODULE_CORE2 */
  case 6: *out = sync_tab, *size = SYNC_SIZE; return 1;   /* NVTX_CB_MODULE_SYNC */
  default: return 0;
  }
}
static const struct {
  size_t struct_size;
  int (*get)(int, fn_t ***, unsigned *);
} callbacks = {sizeof callbacks, get_module_table};
static const void *get_export_table(uint32_t id) { return id == 1 ? (const void *)&callbacks : NULL; }

typedef struct attrs { /* nvtxEventAttributes_v2 */
  uint16_t version, size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type, reserved0;
  uint64_t payload;
  int32_t message_type;
  const void *message;
} attrs_t;

/* The program's NVTX calls, through the function pointers the tool filled. */
#define MarkA(m) ((void (*)(const char *))core_fp[2])(m)
#define RangeStartA(m) ((uint64_t(*)(const char *))core_fp[5])(m)
#define RangeEnd(id) ((void (*)(uint64_t))core_fp[7])(id)
#define RangePushA(m) ((int (*)(const char *))core_fp[9])(m)
#define RangePushW(m) ((int (*)(const wchar_t *))core_fp[10])(m)
#define RangePop() ((int (*)(void))core_fp[11])()
#define NameOsThreadA(t, n) ((void (*)(uint32_t, const char *))core_fp[14])(t, n)
#define DomainRangePushEx(d, a) ((int (*)(void *, const attrs_t *))core2_fp[4])(d, a)
#define DomainRangePop(d) ((int (*)(void *))core2_fp[5])(d)
#define DomainRegisterStringA(d, s) ((void *(*)(void *, const char *))core2_fp[10])(d, s)
#define DomainCreateA(n) ((void *(*)(const char *))core2_fp[12])(n)

static int loaded;

static void load(void) {
  if (loaded) return;
  for (int i = 0; i < CORE_SIZE; i++) core_tab[i] = &core_fp[i];
  for (int i = 0; i < CORE2_SIZE; i++) core2_tab[i] = &core2_fp[i];
  for (int i = 0; i < SYNC_SIZE; i++) sync_tab[i] = &sync_fp[i];
  void *h = dlopen("annotations/.libs/liblabelprof_nvtx.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "test_nvtx: %s (run from the build directory)\n", dlerror());
    exit(99);
  }
  int (*init)(const void *(*)(uint32_t)) = (int (*)(const void *(*)(uint32_t)))dlsym(h, "InitializeInjectionNvtx2");
  if (!init || init(get_export_table) != 1) {
    fprintf(stderr, "test_nvtx: InitializeInjectionNvtx2 missing or failed\n");
    exit(99);
  }
  loaded = 1;
}

static void test_nvtx_fills_the_tables(void) {
  load();
  for (int i = 1; i < CORE_SIZE; i++) CU_ASSERT_PTR_NOT_NULL(core_fp[i]);
  for (int i = 1; i < CORE2_SIZE; i++) CU_ASSERT_PTR_NOT_NULL(core2_fp[i]);
  for (int i = 1; i < SYNC_SIZE; i++) CU_ASSERT_PTR_NOT_NULL(sync_fp[i]);
  CU_ASSERT_PTR_NULL(core_fp[0]);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_nvtx_push_pop_in_the_tree(void) {
  load();
  char name[32];
  for (int attempt = 0; attempt < 50; attempt++) {
    lp_profile_opts_t o = {.hz = 2000};
    lp_profile_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(lp_profile_start(&o), 0);
    CU_ASSERT_EQUAL(RangePushA("nvtx outer"), 0);
    snprintf(name, sizeof name, "nvtx %s", "inner"); /* made at run time, in a buffer */
    CU_ASSERT_EQUAL(RangePushA(name), 1);
    double t0 = now_s();
    while (now_s() - t0 < 0.02) {
    }
    CU_ASSERT_EQUAL(RangePop(), 1);
    CU_ASSERT_EQUAL(RangePop(), 0);
    CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
    const lp_node_t *outer = lp_node_find(lp_profile_root(p), "nvtx outer");
    const lp_node_t *inner = outer ? lp_node_find(outer, "nvtx inner") : NULL;
    int ok = inner && lp_node_samples(inner) > 0;
    lp_profile_free(p);
    if (ok) return;
  }
  CU_FAIL("no sample ever landed in nvtx outer > nvtx inner");
}

static void timeline_body(void) {
  void *dom = DomainCreateA("oneDNN");
  void *conv = DomainRegisterStringA(dom, "conv");
  attrs_t a = {3, sizeof(attrs_t), 0, 0, 0, 0, 0, 0, 3 /* NVTX_MESSAGE_TYPE_REGISTERED */, conv};
  NameOsThreadA((uint32_t)syscall(SYS_gettid), "nvtx main");
  CU_ASSERT_EQUAL(RangePushA("step"), 0);
  CU_ASSERT_EQUAL(DomainRangePushEx(dom, &a), 1);
  MarkA("checkpoint");
  CU_ASSERT_EQUAL(DomainRangePop(dom), 1);
  CU_ASSERT_EQUAL(RangePushW(L"wide \u00e9"), 1);
  CU_ASSERT_EQUAL(RangePop(), 1);
  CU_ASSERT_EQUAL(RangePop(), 0);
  uint64_t id = RangeStartA("async copy");
  RangeEnd(id);
}

static void test_nvtx_timeline(void) {
  load();
  json_t *root = trace_record_with("nvtx", timeline_body);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root), *e;
  CU_ASSERT_PTR_NOT_NULL(e = trace_find(ev, "X", "step"));
  if (e) CU_ASSERT_STRING_EQUAL(ev_str(e, "cat"), "nvtx");
  CU_ASSERT_PTR_NOT_NULL(e = trace_find(ev, "X", "conv"));
  if (e) CU_ASSERT_STRING_EQUAL(ev_str(e, "cat"), "oneDNN");
  CU_ASSERT_PTR_NOT_NULL(trace_find(ev, "X", "wide \xc3\xa9"));
  CU_ASSERT_PTR_NOT_NULL(trace_find(ev, "i", "checkpoint"));
  CU_ASSERT_PTR_NOT_NULL(trace_find(ev, "X", "async copy")); /* a slice on the track */
  size_t i;
  int named = 0, track = 0;
  json_array_foreach(ev, i, e) {
    if (!ev_is(e, "M", NULL)) continue;
    const char *n = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
    named |= n && strcmp(n, "nvtx main") == 0;
    track |= n && strcmp(n, "NVTX ranges: nvtx") == 0;
  }
  CU_ASSERT(named);
  CU_ASSERT(track);
  json_decref(root);
}

static void misuse_body(void) {
  LP_BEGIN("program label");
  CU_ASSERT_EQUAL(RangePop(), -1); /* no NVTX range open: counted, the program's label stays */
  CU_ASSERT_EQUAL(RangePushA("inside"), 0);
  CU_ASSERT_EQUAL(RangePop(), 0);
  CU_ASSERT_EQUAL(RangePop(), -1);
  LP_END();
}

static void test_nvtx_unmatched_pop_is_ignored(void) {
  load();
  json_t *root = trace_record_with("nvtx", misuse_body);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root);
  json_t *outer = trace_find(ev, "X", "program label"), *in = trace_find(ev, "X", "inside");
  CU_ASSERT_PTR_NOT_NULL_FATAL(outer);
  CU_ASSERT_PTR_NOT_NULL_FATAL(in);
  /* the program's label ended at its LP_END, after "inside": the stray pops did not end it */
  CU_ASSERT(ev_ns(outer, "ts") + ev_ns(outer, "dur") >= ev_ns(in, "ts") + ev_ns(in, "dur"));
  json_decref(root);
}

static void filter_body(void) {
  void *dropped = DomainCreateA("dropped");
  void *kept = DomainCreateA("kept");
  attrs_t a = {3, sizeof(attrs_t), 0, 0, 0, 0, 0, 0, 1 /* ASCII */, "filtered out"};
  attrs_t b = {3, sizeof(attrs_t), 0, 0, 0, 0, 0, 0, 1, "kept range"};
  CU_ASSERT_EQUAL(DomainRangePushEx(dropped, &a), 0);
  CU_ASSERT_EQUAL(DomainRangePushEx(kept, &b), 1);
  CU_ASSERT_EQUAL(DomainRangePop(kept), 1);
  CU_ASSERT_EQUAL(DomainRangePop(dropped), 0);
}

static void test_nvtx_domain_filter(void) {
  load();
  json_t *root = trace_record_with("nvtx", filter_body);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root), *e;
  CU_ASSERT_PTR_NULL(trace_find(ev, "X", "filtered out"));
  CU_ASSERT_PTR_NOT_NULL(e = trace_find(ev, "X", "kept range"));
  if (e) CU_ASSERT_STRING_EQUAL(ev_str(e, "cat"), "kept");
  json_decref(root);
}

static void *worker(void *arg) {
  char name[32];
  int k = (int)(intptr_t)arg;
  snprintf(name, sizeof name, "nvtx worker %d", k);
  NameOsThreadA((uint32_t)syscall(SYS_gettid), name);
  for (int i = 0; i < 1000; i++) {
    snprintf(name, sizeof name, "op %d", i % 8);
    if (RangePushA(name) != 0) return (void *)1;
    if (RangePushA("leaf") != 1) return (void *)1;
    if (RangePop() != 1 || RangePop() != 0) return (void *)1;
  }
  return NULL;
}

static void threads_body(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i), 0);
  for (int i = 0; i < 4; i++) {
    void *r;
    CU_ASSERT_EQUAL(pthread_join(t[i], &r), 0);
    CU_ASSERT_PTR_NULL(r);
  }
}

static void test_nvtx_threads(void) {
  load();
  json_t *root = trace_record_with("nvtx", threads_body);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root), *e;
  CU_ASSERT_EQUAL(trace_count(ev, "X", "leaf"), 4000);
  CU_ASSERT_EQUAL(trace_count(ev, "X", "op 7"), 500);
  size_t i;
  int named = 0;
  json_array_foreach(ev, i, e) {
    const char *n = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
    if (ev_is(e, "M", "thread_name") && n && strncmp(n, "nvtx worker ", 12) == 0) named++;
  }
  CU_ASSERT_EQUAL(named, 4);
  json_decref(root);
}

static void names_body(void) {
  char name[32];
  for (int i = 0; i < 300; i++) {
    snprintf(name, sizeof name, "many %d", i);
    CU_ASSERT_EQUAL(RangePushA(name), 0);
    CU_ASSERT_EQUAL(RangePop(), 0);
  }
}

/* LABELPROF_MAX_NAMES=100 (set in main): past 100 distinct names, one overflow label, counted. */
static void test_nvtx_bound_on_names(void) {
  load();
  uint64_t limit = 0, before = lp_impl_names_overflow(&limit);
  CU_ASSERT_EQUAL(limit, 100);
  json_t *root = trace_record_with("nvtx", names_body);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root);
  size_t distinct = 0;
  char name[32];
  for (int i = 0; i < 300; i++) {
    snprintf(name, sizeof name, "many %d", i);
    distinct += trace_find(ev, "X", name) != NULL;
  }
  CU_ASSERT(distinct > 0 && distinct < 100);
  CU_ASSERT_PTR_NULL(trace_find(ev, "X", "many 299"));
  CU_ASSERT_EQUAL(trace_count(ev, "X", "(other names)"), 300 - distinct);
  CU_ASSERT_EQUAL(lp_impl_names_overflow(NULL) - before, 300 - distinct);
  json_t *other = json_object_get(root, "otherData"); /* the JSON says so too */
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(other, "names_overflowed")), (json_int_t)lp_impl_names_overflow(NULL));
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(other, "names_limit")), 100);
  json_decref(root);
}

int main(void) {
  setenv("LABELPROF_MAX_NAMES", "100", 1);
  setenv("LABELPROF_NVTX_DOMAINS", "nvtx,oneDNN,kept", 1);
  CU_TestInfo tests[] = {LP_TEST(test_nvtx_fills_the_tables), LP_TEST(test_nvtx_push_pop_in_the_tree),
                         LP_TEST(test_nvtx_timeline),         LP_TEST(test_nvtx_unmatched_pop_is_ignored),
                         LP_TEST(test_nvtx_domain_filter),    LP_TEST(test_nvtx_threads),
                         LP_TEST(test_nvtx_bound_on_names),   CU_TEST_INFO_NULL};
  return lp_test_main("nvtx", tests);
}
