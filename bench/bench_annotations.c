/*
 * bench_annotations.c: what an NVTX range and an ITT task cost through
 * labelprof's NVTX and ITT libraries, while a profile samples (no timeline).
 *
 * The libraries are loaded as NVTX's and ittnotify's loaders load them
 * (dlopen, the entry point, calls through the function pointers it filled,
 * see tests/test_nvtx.c and tests/test_itt.c). Beside them, NVTX's own cost
 * with no tool loaded: a call through a function pointer to an empty
 * function. Run from the build directory (make bench).
 */
#include "bench.h"

#include <dlfcn.h>
#include <labelprof.h>

typedef void (*fn_t)(void);
static fn_t core_fp[16], core2_fp[16], sync_fp[7];
static fn_t *core_tab[17], *core2_tab[17], *sync_tab[8];
static int get_module_table(int module, fn_t ***out, unsigned *size) {
  switch (module) {
  case 1: *out = core_tab, *size = 16; return 1;
  case 5: *out = core2_tab, *size = 16; return 1;
  case 6: *out = sync_tab, *size = 7; return 1;
  default: return 0;
  }
}
static const struct {
  size_t struct_size;
  int (*get)(int, fn_t ***, unsigned *);
} callbacks = {sizeof callbacks, get_module_table};
static const void *get_export_table(uint32_t id) { return id == 1 ? (const void *)&callbacks : NULL; }

typedef struct api_info {
  const char *name;
  void **func_ptr;
  void *init_func, *null_func;
  int group;
} api_info_t;
typedef struct global {
  unsigned char magic[8];
  unsigned long version_major, version_minor, version_build;
  volatile long api_initialized, mutex_initialized, atomic_counter;
  pthread_mutex_t mutex;
  void *lib, *error_handler;
  const char **dll_path_ptr;
  api_info_t *api_list_ptr;
} global_t;
typedef struct domain {
  volatile int flags;
} domain_t;
typedef struct id {
  unsigned long long d1, d2, d3;
} itt_id_t;
static const itt_id_t null_id = {0, 0, 0};
static domain_t *(*domain_create)(const char *);
static void *(*string_handle_create)(const char *);
static void (*task_begin)(const domain_t *, itt_id_t, itt_id_t, void *);
static void (*task_end)(const domain_t *);

static int (*volatile push_a)(const char *);
static int (*volatile pop)(void);
static domain_t *dom;
static void *handle;

static void *open_or_die(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "bench_annotations: %s (run from the build directory)\n", dlerror());
    exit(1);
  }
  return h;
}

static void load(void) {
  for (int i = 0; i < 16; i++) core_tab[i] = &core_fp[i], core2_tab[i] = &core2_fp[i];
  for (int i = 0; i < 7; i++) sync_tab[i] = &sync_fp[i];
  int (*init)(const void *(*)(uint32_t)) =
      (int (*)(const void *(*)(uint32_t)))dlsym(open_or_die("annotations/.libs/liblabelprof_nvtx.so"),
                                                "InitializeInjectionNvtx2");
  if (!init || init(get_export_table) != 1) exit(1);
  push_a = (int (*)(const char *))core_fp[9];
  pop = (int (*)(void))core_fp[11];

  api_info_t list[] = {
      {"__itt_domain_create", (void **)(void *)&domain_create, NULL, NULL, 0},
      {"__itt_string_handle_create", (void **)(void *)&string_handle_create, NULL, NULL, 0},
      {"__itt_task_begin", (void **)(void *)&task_begin, NULL, NULL, 0},
      {"__itt_task_end", (void **)(void *)&task_end, NULL, NULL, 0},
      {NULL, NULL, NULL, NULL, 0},
  };
  global_t g = {.api_list_ptr = list};
  void (*api_init)(global_t *, int) =
      (void (*)(global_t *, int))dlsym(open_or_die("annotations/.libs/liblabelprof_itt.so"), "__itt_api_init");
  if (!api_init) exit(1);
  api_init(&g, 0);
  if (!domain_create || !task_begin) exit(1);
  dom = domain_create("bench");
  handle = string_handle_create("bench task");
}

/* NVTX with no tool: the header calls through a pointer to an empty function. */
static int empty_push(const char *m) {
  (void)m;
  return 0;
}
static int empty_pop(void) { return 0; }
static int (*volatile none_push)(const char *) = empty_push;
static int (*volatile none_pop)(void) = empty_pop;

static void loop_none(long n) {
  for (long i = 0; i < n; i++) {
    none_push("bench range");
    BENCH_BARRIER();
    none_pop();
  }
}

static void loop_literal(long n) {
  for (long i = 0; i < n; i++) {
    push_a("bench range");
    BENCH_BARRIER();
    pop();
  }
}

static void loop_rebuilt(long n) {
  for (long i = 0; i < n; i++) {
    char name[32];
    memcpy(name, "operator_conv_", 14);
    name[14] = (char)('0' + (i & 7)); /* 8 distinct texts */
    name[15] = '\0';
    BENCH_BARRIER();
    push_a(name);
    BENCH_BARRIER();
    pop();
  }
}

static void loop_itt(long n) {
  for (long i = 0; i < n; i++) {
    if (dom->flags) task_begin(dom, null_id, null_id, handle);
    BENCH_BARRIER();
    if (dom->flags) task_end(dom);
  }
}

/* For reference: a label of the program's own. */
static void loop_scope(long n) {
  for (long i = 0; i < n; i++) {
    LP_SCOPE("bench scope");
    BENCH_BARRIER();
  }
}

/* The clock of the first CPU as /proc/cpuinfo reports it (MHz), or "?". */
static void print_clock(void) {
  char mhz[64];
  bench_read_line("/proc/cpuinfo", "cpu MHz", mhz, sizeof mhz);
  printf("CPU clock: %s MHz (cpu0, /proc/cpuinfo)\n", mhz);
}

static double best_of(bench_loop_fn fn, long iters) {
  double v[BENCH_RUNS];
  for (int r = 0; r < BENCH_RUNS; r++) v[r] = bench_run(fn, iters, 1);
  return bench_median(v, BENCH_RUNS);
}

int main(int argc, char **argv) {
  /* An argument sets the iterations per run (smaller under valgrind --tool=callgrind). */
  const long iters = argc > 1 ? atol(argv[1]) : 2000000;
  if (iters <= 0) {
    fprintf(stderr, "bench_annotations: usage: bench_annotations [iterations per run]\n");
    return 2;
  }
  load();
  lp_profile_opts_t o = {0};
  if (lp_profile_start(&o) != 0) {
    fprintf(stderr, "bench_annotations: lp_profile_start failed\n");
    return 1;
  }
  double none = best_of(loop_none, iters);
  double lit = best_of(loop_literal, iters);
  double reb = best_of(loop_rebuilt, iters);
  double itt = best_of(loop_itt, iters);
  double scope = best_of(loop_scope, iters);
  lp_profile_stop(NULL);

  printf("NVTX and ITT through labelprof, while a profile samples at 1000 Hz (no timeline); ns per pair, median of %d\n",
         BENCH_RUNS);
  bench_print_machine();
  print_clock();
  printf("  %-58s %7.2f ns\n", "NVTX push/pop, no tool loaded (empty pointer calls)", none);
  printf("  %-58s %7.2f ns  target <= 20: %s\n", "nvtxRangePushA/Pop, literal name", lit, bench_verdict(lit <= 20));
  printf("  %-58s %7.2f ns  target <= 30: %s\n", "nvtxRangePushA/Pop, name rebuilt in a stack buffer (8 texts)", reb,
         bench_verdict(reb <= 30));
  printf("  %-58s %7.2f ns  target <= 15: %s\n", "__itt_task_begin/end, string handle", itt, bench_verdict(itt <= 15));
  printf("  %-58s %7.2f ns\n", "LP_SCOPE, for reference", scope);
  return 0;
}
