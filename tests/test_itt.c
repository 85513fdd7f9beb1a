/*
 * test_itt.c: liblabelprof_itt.so driven as ittnotify's static part drives
 * a collector (Intel's documented interface, ittnotify_config.h and
 * ittnotify.h): dlopen, __itt_api_init with an __itt_global whose api list
 * holds { name, pointer to the program's function pointer, ... }, then
 * calls through those pointers as the __itt_* macros do (a task only when
 * its domain's flags are set). Tasks, markers, counters, thread names,
 * domains as categories and their filter, misuse, threads.
 */
#define _GNU_SOURCE
#include <labelprof.h>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/wait.h>
#include <time.h>

#include "runner.h"
#include "trace_json.h"

/* ---- ittnotify's side, from its documented layout ---- */
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
  void *next, *thread_list, *domain_list, *string_list;
} global_t;
typedef struct domain {
  volatile int flags;
  const char *nameA;
  void *nameW;
  int extra1;
  void *extra2;
  struct domain *next;
} domain_t;
typedef struct string_handle string_handle_t;
typedef struct id {
  unsigned long long d1, d2, d3;
} id_t_;
static const id_t_ null_id = {0, 0, 0};

static domain_t *(*domain_create)(const char *);
static string_handle_t *(*string_handle_create)(const char *);
static void (*task_begin)(const domain_t *, id_t_, id_t_, string_handle_t *);
static void (*task_end)(const domain_t *);
static void (*marker)(const domain_t *, id_t_, string_handle_t *, int);
static void (*thread_set_name)(const char *);
static void *(*counter_create)(const char *, const char *);
static void (*counter_inc_delta)(void *, unsigned long long);
static void (*counter_set_value)(void *, void *);
static void (*pause_fn)(void); /* one the collector does not implement: stays NULL */

#define ENTRY(n, p) {n, (void **)(void *)&p, NULL, NULL, 0}
static api_info_t api_list[] = {
    ENTRY("__itt_domain_create", domain_create),
    ENTRY("__itt_string_handle_create", string_handle_create),
    ENTRY("__itt_task_begin", task_begin),
    ENTRY("__itt_task_end", task_end),
    ENTRY("__itt_marker", marker),
    ENTRY("__itt_thread_set_name", thread_set_name),
    ENTRY("__itt_counter_create", counter_create),
    ENTRY("__itt_counter_inc_delta", counter_inc_delta),
    ENTRY("__itt_counter_set_value", counter_set_value),
    ENTRY("__itt_pause", pause_fn),
    {NULL, NULL, NULL, NULL, 0},
};
static global_t global = {.api_list_ptr = api_list};

/* As ittnotify.h's macros: nothing is called for a disabled domain. */
#define TASK_BEGIN(d, h) ((d)->flags && task_begin ? task_begin(d, null_id, null_id, h) : (void)0)
#define TASK_END(d) ((d)->flags && task_end ? task_end(d) : (void)0)

static int loaded;
static void load(void) {
  if (loaded) return;
  void *h = dlopen("annotations/.libs/liblabelprof_itt.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "test_itt: %s (run from the build directory)\n", dlerror());
    exit(99);
  }
  void (*init)(global_t *, int) = (void (*)(global_t *, int))dlsym(h, "__itt_api_init");
  if (!init) {
    fprintf(stderr, "test_itt: no __itt_api_init\n");
    exit(99);
  }
  init(&global, 0);
  loaded = 1;
}

static void test_itt_fills_the_list(void) {
  load();
  CU_ASSERT_PTR_NOT_NULL(domain_create);
  CU_ASSERT_PTR_NOT_NULL(string_handle_create);
  CU_ASSERT_PTR_NOT_NULL(task_begin);
  CU_ASSERT_PTR_NOT_NULL(task_end);
  CU_ASSERT_PTR_NOT_NULL(marker);
  CU_ASSERT_PTR_NOT_NULL(thread_set_name);
  CU_ASSERT_PTR_NOT_NULL(counter_create);
  CU_ASSERT_PTR_NOT_NULL(counter_inc_delta);
  CU_ASSERT_PTR_NULL(pause_fn);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_itt_tasks_in_the_tree(void) {
  load();
  domain_t *d = domain_create("itt.test");
  string_handle_t *outer = string_handle_create("itt outer"), *inner = string_handle_create("itt inner");
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  CU_ASSERT(d->flags != 0);
  CU_ASSERT_STRING_EQUAL(d->nameA, "itt.test");
  for (int attempt = 0; attempt < 50; attempt++) {
    lp_profile_opts_t o = {.hz = 2000};
    lp_profile_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(lp_profile_start(&o), 0);
    TASK_BEGIN(d, outer);
    TASK_BEGIN(d, inner);
    double t0 = now_s();
    while (now_s() - t0 < 0.02) {
    }
    TASK_END(d);
    TASK_END(d);
    CU_ASSERT_EQUAL_FATAL(lp_profile_stop(&p), 0);
    const lp_node_t *o1 = lp_node_find(lp_profile_root(p), "itt outer");
    const lp_node_t *i1 = o1 ? lp_node_find(o1, "itt inner") : NULL;
    int ok = i1 && lp_node_samples(i1) > 0;
    lp_profile_free(p);
    if (ok) return;
  }
  CU_FAIL("no sample ever landed in itt outer > itt inner");
}

static void timeline_body(void) {
  domain_t *d = domain_create("oneDNN"), *skipped = domain_create("skipped");
  string_handle_t *conv = string_handle_create("conv"), *ckpt = string_handle_create("checkpoint");
  CU_ASSERT_EQUAL(skipped->flags, 0); /* LABELPROF_ITT_DOMAINS leaves it out */
  thread_set_name("itt main");
  void *bytes = counter_create("bytes", "oneDNN");
  TASK_BEGIN(d, conv);
  TASK_BEGIN(skipped, conv);
  marker(d, null_id, ckpt, 2);
  counter_inc_delta(bytes, 10);
  counter_inc_delta(bytes, 5);
  TASK_END(skipped);
  TASK_END(d);
  uint64_t v = 42;
  counter_set_value(bytes, &v);
}

static void test_itt_timeline(void) {
  load();
  json_t *root = trace_record_with("itt", timeline_body);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root), *e;
  CU_ASSERT_EQUAL(trace_count(ev, "X", "conv"), 1);
  CU_ASSERT_PTR_NOT_NULL(e = trace_find(ev, "X", "conv"));
  if (e) CU_ASSERT_STRING_EQUAL(ev_str(e, "cat"), "oneDNN");
  CU_ASSERT_PTR_NOT_NULL(trace_find(ev, "i", "checkpoint"));
  CU_ASSERT_EQUAL(trace_count(ev, "C", "bytes"), 3);
  size_t i;
  int named = 0;
  int64_t last = -1;
  json_array_foreach(ev, i, e) {
    const char *n = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
    if (ev_is(e, "M", "thread_name") && n && strcmp(n, "itt main") == 0) named = 1;
    if (ev_is(e, "C", "bytes")) last = json_integer_value(json_object_get(json_object_get(e, "args"), "value"));
  }
  CU_ASSERT(named);
  CU_ASSERT_EQUAL(last, 42);
  json_decref(root);
}

static void misuse_body(void) {
  domain_t *d = domain_create("oneDNN");
  string_handle_t *h = string_handle_create("inside");
  LP_BEGIN("program label");
  TASK_END(d); /* no task open: ignored, the program's label stays */
  TASK_BEGIN(d, h);
  TASK_END(d);
  TASK_END(d);
  LP_END();
}

static void test_itt_unmatched_end_is_ignored(void) {
  load();
  json_t *root = trace_record_with("itt", misuse_body);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root);
  json_t *outer = trace_find(ev, "X", "program label"), *in = trace_find(ev, "X", "inside");
  CU_ASSERT_PTR_NOT_NULL_FATAL(outer);
  CU_ASSERT_PTR_NOT_NULL_FATAL(in);
  CU_ASSERT(ev_ns(outer, "ts") + ev_ns(outer, "dur") >= ev_ns(in, "ts") + ev_ns(in, "dur"));
  json_decref(root);
}

static domain_t *shared_domain;
static string_handle_t *shared_handle;

static void *worker(void *arg) {
  char name[32];
  snprintf(name, sizeof name, "itt worker %d", (int)(intptr_t)arg);
  thread_set_name(name);
  for (int i = 0; i < 1000; i++) {
    TASK_BEGIN(shared_domain, shared_handle);
    TASK_END(shared_domain);
  }
  return NULL;
}

static void threads_body(void) {
  pthread_t t[4];
  shared_domain = domain_create("threads");
  shared_handle = string_handle_create("shared task");
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i), 0);
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(pthread_join(t[i], NULL), 0);
}

static void test_itt_threads(void) {
  load();
  json_t *root = trace_record_with("itt", threads_body);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  json_t *ev = trace_events(root), *e;
  CU_ASSERT_EQUAL(trace_count(ev, "X", "shared task"), 4000);
  size_t i;
  int named = 0;
  json_array_foreach(ev, i, e) {
    const char *n = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
    if (ev_is(e, "M", "thread_name") && n && strncmp(n, "itt worker ", 11) == 0) named++;
  }
  CU_ASSERT_EQUAL(named, 4);
  json_decref(root);
}

/* ---- fork while another thread interns names ---- */
static atomic_int interning_stop;

static void *intern_loop(void *arg) {
  char name[32];
  (void)arg;
  /* 3000 names: more than the thread's cache holds, so that most lookups take the names mutex. */
  for (unsigned i = 0; !atomic_load_explicit(&interning_stop, memory_order_relaxed); i = (i + 1) % 3000) {
    snprintf(name, sizeof name, "busy %u", i);
    (void)lp_impl_site_make(name, NULL);
  }
  return NULL;
}

/* In the child: intern a new name, record it on a timeline, find it there. Exit 0 when it is there. */
static int child_records_a_new_name(int round) {
  char name[64], path[4096];
  snprintf(name, sizeof name, "forked child %d", round);
  snprintf(path, sizeof path, "%s/fork-%d.json", lp_test_tmpdir("itt"), round);
  lp_trace_opts_t o = {.levels = LP_LEVEL_ALL};
  if (lp_trace_start(&o) != 0) return 2;
  domain_t *d = domain_create("itt.test");
  string_handle_t *h = string_handle_create(name);
  if (!d || !h) return 3;
  TASK_BEGIN(d, h);
  TASK_END(d);
  if (lp_trace_stop() != 0 || lp_trace_write_json(path, "test") != 0) return 4;
  json_t *root = trace_load(path);
  unlink(path);
  int found = root && trace_find(trace_events(root), "X", name) != NULL;
  json_decref(root);
  return found ? 0 : 5;
}

/* A fork while another thread holds the names mutex must leave the child able to intern names. */
static void test_itt_fork_while_interning(void) {
  load();
  (void)lp_test_tmpdir("itt");
  pthread_t th;
  atomic_store(&interning_stop, 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, intern_loop, NULL), 0);
  int ok = 0, hung = 0, rounds = 30;
  for (int round = 0; round < rounds && !hung; round++) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      alarm(10); /* a child that cannot take the names mutex ends here, instead of hanging the test */
      _exit(child_records_a_new_name(round));
    }
    int status;
    if (lp_test_wait(pid, 0, &status) != 0) break;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      ok++;
    else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
      hung++;
    else
      fprintf(stderr, "\n    round %d: child status %#x\n", round, (unsigned)status);
  }
  atomic_store(&interning_stop, 1);
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  CU_ASSERT_EQUAL(hung, 0);
  CU_ASSERT_EQUAL(ok, rounds);
}

int main(void) {
  setenv("LABELPROF_ITT_DOMAINS", "itt.test,oneDNN,threads", 1);
  CU_TestInfo tests[] = {LP_TEST(test_itt_fills_the_list), LP_TEST(test_itt_tasks_in_the_tree),
                         LP_TEST(test_itt_timeline), LP_TEST(test_itt_unmatched_end_is_ignored),
                         LP_TEST(test_itt_threads), LP_TEST(test_itt_fork_while_interning),
                         CU_TEST_INFO_NULL};
  return lp_test_main("itt", tests);
}
