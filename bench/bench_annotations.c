/*
 * bench_annotations.c: what an NVTX range and an ITT task cost through
 * labelprof's NVTX and ITT libraries, while a profile samples (no timeline).
 *
 * The libraries are loaded as NVTX's and ittnotify's loaders load them
 * (dlopen, the entry point, calls through the function pointers it filled,
 * see tests/test_nvtx.c and tests/test_itt.c). Beside them, NVTX's own cost
 * with no tool loaded: a call through a function pointer to an empty
 * function. Run from the build directory (make bench).
 *
 * Then nvtxRangePushA/Pop again at two loads: alone, and with LOAD_THREADS
 * threads of this process spinning on the machine's CPUs beside it. For
 * each: the wall time of a run (what a median of long runs shows), the
 * thread's own CPU time over the same runs (CLOCK_THREAD_CPUTIME_ID: the
 * cost of the range on the CPU, without the time the thread waited for
 * one), and the fastest of many short runs (each shorter than a scheduler's
 * slice).
 */
#include "bench.h"

#include <dlfcn.h>
#include <labelprof.h>
#include <stdatomic.h>

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

/* ---- the two loads ---- */
#define LOAD_THREADS 4
#define LP_BENCH_STR2(x) #x
#define LP_BENCH_STR(x) LP_BENCH_STR2(x)
#define SHORT_RUNS 200
static atomic_int spin_stop;

static void *spinner(void *arg) {
  (void)arg;
  volatile uint64_t x = 0;
  while (!atomic_load_explicit(&spin_stop, memory_order_relaxed)) x = x * 3 + 1;
  return NULL;
}

static double thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef struct loaded {
  double wall, cpu, shortest; /* ns per pair: median of long runs' wall, their CPU, the fastest short run */
  double loadavg;             /* the machine's 1-minute load average after the runs */
} loaded_t;

/* fn at a load: `threads` spinners started beside it (0: none). */
static loaded_t at_load(bench_loop_fn fn, long iters, int threads) {
  pthread_t th[LOAD_THREADS];
  loaded_t r = {0, 0, 1e300, 0};
  atomic_store(&spin_stop, 0);
  for (int i = 0; i < threads; i++)
    if (pthread_create(&th[i], NULL, spinner, NULL) != 0) {
      fprintf(stderr, "bench_annotations: pthread_create failed\n");
      exit(1);
    }
  fn(iters / 10); /* warm */
  double wall[BENCH_RUNS], cpu[BENCH_RUNS];
  for (int k = 0; k < BENCH_RUNS; k++) {
    double w0 = bench_now_ns(), c0 = thread_cpu_ns();
    fn(iters);
    cpu[k] = (thread_cpu_ns() - c0) / (double)iters;
    wall[k] = (bench_now_ns() - w0) / (double)iters;
  }
  long short_iters = iters / 100 > 1000 ? iters / 100 : 1000;
  for (int k = 0; k < SHORT_RUNS; k++) {
    double w0 = bench_now_ns();
    fn(short_iters);
    double v = (bench_now_ns() - w0) / (double)short_iters;
    if (v < r.shortest) r.shortest = v;
  }
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f || fscanf(f, "%lf", &r.loadavg) != 1) r.loadavg = -1;
  if (f) fclose(f);
  atomic_store(&spin_stop, 1);
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  r.wall = bench_median(wall, BENCH_RUNS);
  r.cpu = bench_median(cpu, BENCH_RUNS);
  return r;
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
  loaded_t none = at_load(loop_none, iters, 0), lit = at_load(loop_literal, iters, 0);
  loaded_t reb = at_load(loop_rebuilt, iters, 0), itt = at_load(loop_itt, iters, 0);
  loaded_t scope = at_load(loop_scope, iters, 0);
  loaded_t lit4 = at_load(loop_literal, iters, LOAD_THREADS), scope4 = at_load(loop_scope, iters, LOAD_THREADS);
  lp_profile_stop(NULL);

  printf("NVTX and ITT through labelprof, while a profile samples at 1000 Hz (no timeline); ns per pair, median of %d\n",
         BENCH_RUNS);
  bench_print_machine();
  print_clock();
  printf("  %-62s %8s %8s %8s\n", "", "wall", "CPU", "fastest");
  const struct {
    const char *what;
    const loaded_t *r;
    double target; /* on the CPU time and the fastest short run; 0: none */
  } rows[] = {
      {"NVTX push/pop, no tool loaded (empty pointer calls)", &none, 0},
      {"nvtxRangePushA/Pop, literal name", &lit, 20},
      {"nvtxRangePushA/Pop, name rebuilt in a stack buffer (8 texts)", &reb, 30},
      {"__itt_task_begin/end, string handle", &itt, 15},
      {"LP_SCOPE, for reference", &scope, 0},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const loaded_t *r = rows[i].r;
    printf("  %-62s %8.2f %8.2f %8.2f", rows[i].what, r->wall, r->cpu, r->shortest);
    if (rows[i].target)
      printf("  target <= %.0f: %s", rows[i].target,
             bench_verdict(r->cpu <= rows[i].target && r->shortest <= rows[i].target));
    printf("\n");
  }

  printf("\nnvtxRangePushA/Pop at two loads: ns per pair (the machine's 1-minute load average after each)\n");
  printf("  %-54s %9s %8s %8s %8s\n", "", "load avg", "wall", "CPU", "fastest");
  const struct {
    const char *what;
    const loaded_t *r;
  } loads[] = {{"alone: nvtxRangePushA/Pop", &lit}, {"       LP_SCOPE", &scope},
               {"beside " LP_BENCH_STR(LOAD_THREADS) " spinning threads: nvtxRangePushA/Pop", &lit4},
               {"       LP_SCOPE", &scope4}};
  for (size_t i = 0; i < sizeof loads / sizeof loads[0]; i++)
    printf("  %-54s %9.2f %8.2f %8.2f %8.2f\n", loads[i].what, loads[i].r->loadavg, loads[i].r->wall,
           loads[i].r->cpu, loads[i].r->shortest);
  printf("  wall: median of %d runs of %ld pairs; CPU: the thread's own CPU time over the same runs; fastest: the\n"
         "  fastest of %d runs of %ld pairs, each shorter than a scheduler's slice.\n",
         BENCH_RUNS, iters, SHORT_RUNS, iters / 100 > 1000 ? iters / 100 : 1000);
  printf("  Beside the spinning threads: a range's wall time %+.0f%%, LP_SCOPE's %+.0f%%; a range's CPU time %+.0f%%,\n"
         "  its fastest run %+.0f%%. What grows is the time the thread waits for one of the %ld CPUs, which no\n"
         "  code of the range can hold; the targets are on the CPU time and the fastest run, at both loads.\n",
         100 * (lit4.wall / lit.wall - 1), 100 * (scope4.wall / scope.wall - 1), 100 * (lit4.cpu / lit.cpu - 1),
         100 * (lit4.shortest / lit.shortest - 1), sysconf(_SC_NPROCESSORS_ONLN));
  printf("\ntargets\n\n");
  printf("  %-74s %7.2f ns  %s\n", "nvtxRangePushA/Pop <= 20 ns, alone (CPU; fastest run)", lit.cpu,
         bench_verdict(lit.cpu <= 20 && lit.shortest <= 20));
  printf("  %-74s %7.2f ns  %s\n", "nvtxRangePushA/Pop <= 20 ns, beside " LP_BENCH_STR(LOAD_THREADS) " spinning threads (CPU; fastest run)",
         lit4.cpu, bench_verdict(lit4.cpu <= 20 && lit4.shortest <= 20));
  return 0;
}
