/*
 * itt.c: liblabelprof_itt.so, an ITT collector. Run a program that uses
 * Intel's ITT API (ittnotify's static part, as oneDNN, OpenVINO and
 * PyTorch link it) with
 *     INTEL_LIBITTNOTIFY64=$(pkg-config --variable=itt_collector labelprof)
 * and its tasks become labels on the calling thread's pseudo-stack (the
 * sampled tree, the timeline at LP_LEVEL_ANNOTATIONS, subscribers);
 * markers become instants, counters counters, thread names lane names.
 * Domains are categories; LABELPROF_ITT_DOMAINS=a,b keeps only those (a
 * domain left out is created disabled, so ittnotify does not even call in).
 */
#define _GNU_SOURCE
#include "annot.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

/*
 * The part of ittnotify's collector interface this library depends on,
 * declared from Intel's documented ABI (include/ittnotify.h,
 * src/ittnotify/ittnotify_config.h and ittnotify_static.h): ittnotify's
 * static part loads the library named by INTEL_LIBITTNOTIFY64 and, when it
 * exports __itt_api_init, calls __itt_api_init(__itt_global *, group ids).
 * __itt_global's api_list_ptr is an array of { name, void **func_ptr,
 * init_func, null_func, group } ended by a NULL name; the collector stores
 * its functions through func_ptr for the names it implements
 * ("__itt_task_begin"...). Domains and string handles are structures whose
 * layout the program reads (a domain's flags: zero means disabled).
 */
typedef struct itt_api_info {
  const char *name;
  void **func_ptr;
  void *init_func;
  void *null_func;
  int group;
} itt_api_info_t;

typedef struct itt_global { /* __itt_global, up to api_list_ptr (pack 8: natural alignment here) */
  unsigned char magic[8];
  unsigned long version_major, version_minor, version_build;
  volatile long api_initialized, mutex_initialized, atomic_counter;
  pthread_mutex_t mutex;
  void *lib;
  void *error_handler;
  const char **dll_path_ptr;
  itt_api_info_t *api_list_ptr;
} itt_global_t;

typedef struct itt_domain { /* __itt_domain */
  volatile int flags;
  const char *nameA;
  void *nameW;
  int extra1;
  void *extra2; /* labelprof: the interned category */
  struct itt_domain *next;
} itt_domain_t;

typedef struct itt_string_handle { /* __itt_string_handle */
  const char *strA;
  void *strW;
  int extra1;
  void *extra2; /* labelprof: the site for the last category it was used in */
  struct itt_string_handle *next;
} itt_string_handle_t;

typedef struct itt_id { /* __itt_id */
  unsigned long long d1, d2, d3;
} itt_id_t;

enum { /* __itt_metadata_type */
  META_U64 = 1, META_S64, META_U32, META_S32, META_U16, META_S16, META_FLOAT, META_DOUBLE
};

/* What __itt_counter points at here. */
typedef struct counter {
  const lp_site_t *site;
  int type;
  _Atomic int64_t value;
} counter_t;

static _Atomic uint64_t unmatched_ends;
static __thread uint32_t depth __attribute__((tls_model("initial-exec"))); /* tasks open on the thread */

static const char *category_of(const itt_domain_t *d) {
  return d ? (const char *)d->extra2 : NULL;
}

/* The site of a string handle in a domain's category: one load when it was used in that category last. */
static const lp_site_t *handle_site(itt_string_handle_t *h, const char *cat) {
  const lp_impl_made_site_t *m;
  if (!h) return lp_impl_site_make("(unnamed task)", cat);
  m = __atomic_load_n((lp_impl_made_site_t **)&h->extra2, __ATOMIC_ACQUIRE);
  if (__builtin_expect(m && m->category == cat, 1)) return &m->site;
  const lp_site_t *s = lp_impl_site_make(h->strA, cat);
  __atomic_store_n(&h->extra2, (void *)s, __ATOMIC_RELEASE);
  return s;
}

static itt_domain_t *domain_create(const char *name) {
  itt_domain_t *d = annot_alloc(sizeof *d);
  if (!d) return NULL;
  const char *cat = lp_impl_category(name ? name : "(unnamed domain)");
  d->nameA = cat;
  d->extra2 = (void *)cat;
  d->flags = annot_domain_kept("LABELPROF_ITT_DOMAINS", cat) ? 1 : 0;
  return d;
}

static itt_string_handle_t *string_handle_create(const char *name) {
  size_t n = strlen(name ? name : "(null)") + 1;
  itt_string_handle_t *h = annot_alloc(sizeof *h + n);
  if (!h) return NULL;
  memcpy(h + 1, name ? name : "(null)", n);
  h->strA = (const char *)(h + 1);
  /* Interned once, here, without a category: the first task in a domain re-interns it in that domain's. */
  h->extra2 = (void *)lp_impl_site_make(h->strA, NULL);
  return h;
}

/*
 * A task of a filtered domain never reaches here through ittnotify (its
 * header tests the domain's flags, which this library clears, before it
 * calls begin or end), and if it is called anyway both its begin and its
 * end return at once: no depth is kept for filtered tasks.
 */
static void task_begin(const itt_domain_t *d, itt_id_t id, itt_id_t parent, itt_string_handle_t *name) {
  (void)id, (void)parent;
  if (__builtin_expect(d && !d->flags, 0)) return;
  depth++;
  lp_impl_annot_begin(handle_site(name, category_of(d)));
}

static void task_begin_fn(const itt_domain_t *d, itt_id_t id, itt_id_t parent, void *fn) {
  char text[256];
  Dl_info info;
  (void)id, (void)parent;
  if (d && !d->flags) return;
  if (dladdr(fn, &info) && info.dli_sname)
    snprintf(text, sizeof text, "%s", info.dli_sname);
  else
    snprintf(text, sizeof text, "%p", fn);
  depth++;
  lp_impl_annot_push(text, category_of(d));
}

static void task_end(const itt_domain_t *d) {
  if (__builtin_expect(d && !d->flags, 0)) return;
  if (__builtin_expect(depth == 0, 0)) {
    atomic_fetch_add_explicit(&unmatched_ends, 1, memory_order_relaxed);
    return;
  }
  depth--;
  lp_impl_annot_end();
}

static void marker(const itt_domain_t *d, itt_id_t id, itt_string_handle_t *name, int scope) {
  (void)id, (void)scope;
  if (d && !d->flags) return;
  annot_instant(handle_site(name, category_of(d)));
}

static void thread_set_name(const char *name) {
  if (name) lp_thread_set_name(name);
}

static counter_t *counter_create_typed(const char *name, const char *domain, int type) {
  counter_t *c = annot_alloc(sizeof *c);
  if (!c) return NULL;
  c->site = lp_impl_site_make(name ? name : "(counter)", domain ? lp_impl_category(domain) : NULL);
  c->type = type ? type : META_U64;
  return c;
}
static counter_t *counter_create(const char *name, const char *domain) {
  return counter_create_typed(name, domain, META_U64);
}
static void counter_destroy(counter_t *c) { (void)c; /* its site may be in buffers; the struct is small */ }

static void counter_record(const counter_t *c, int64_t v) {
  if (c->site->level & LP_IMPL_LOAD_RELAXED(lp_impl_levels)) lp_impl_counter(c->site, v);
}
static void counter_add(counter_t *c, int64_t delta) {
  if (c) counter_record(c, atomic_fetch_add_explicit(&c->value, delta, memory_order_relaxed) + delta);
}
static void counter_inc(counter_t *c) { counter_add(c, 1); }
static void counter_inc_delta(counter_t *c, unsigned long long v) { counter_add(c, (int64_t)v); }
static void counter_dec(counter_t *c) { counter_add(c, -1); }
static void counter_dec_delta(counter_t *c, unsigned long long v) { counter_add(c, -(int64_t)v); }
static void counter_set_value(counter_t *c, void *p) {
  int64_t v;
  if (!c || !p) return;
  switch (c->type) {
  case META_S64: v = *(const int64_t *)p; break;
  case META_U32: v = *(const uint32_t *)p; break;
  case META_S32: v = *(const int32_t *)p; break;
  case META_U16: v = *(const uint16_t *)p; break;
  case META_S16: v = *(const int16_t *)p; break;
  case META_FLOAT: v = (int64_t)*(const float *)p; break;
  case META_DOUBLE: v = (int64_t)*(const double *)p; break;
  default: v = (int64_t)*(const uint64_t *)p; break;
  }
  atomic_store_explicit(&c->value, v, memory_order_relaxed);
  counter_record(c, v);
}

static void report(void) {
  uint64_t u = atomic_load(&unmatched_ends), limit;
  uint64_t over = lp_impl_names_overflow(&limit);
  if (u) fprintf(stderr, "labelprof itt: %llu task ends with no task open (ignored)\n", (unsigned long long)u);
  if (over)
    fprintf(stderr, "labelprof itt: %llu tasks named past the bound of %llu distinct names (LABELPROF_MAX_NAMES) "
                    "were labelled \"(other names)\"\n",
            (unsigned long long)over, (unsigned long long)limit);
}

#define FN(f) ((void *)(size_t)(f))

ANNOT_EXPORT void __itt_api_init(itt_global_t *p, int init_groups);
ANNOT_EXPORT void __itt_api_init(itt_global_t *p, int init_groups) {
  static const struct {
    const char *name;
    void *fn;
  } mine[] = {
      {"__itt_domain_create", FN(domain_create)},
      {"__itt_string_handle_create", FN(string_handle_create)},
      {"__itt_task_begin", FN(task_begin)},
      {"__itt_task_begin_fn", FN(task_begin_fn)},
      {"__itt_task_end", FN(task_end)},
      {"__itt_marker", FN(marker)},
      {"__itt_thread_set_name", FN(thread_set_name)},
      {"__itt_counter_create", FN(counter_create)},
      {"__itt_counter_create_typed", FN(counter_create_typed)},
      {"__itt_counter_destroy", FN(counter_destroy)},
      {"__itt_counter_inc", FN(counter_inc)},
      {"__itt_counter_inc_delta", FN(counter_inc_delta)},
      {"__itt_counter_dec", FN(counter_dec)},
      {"__itt_counter_dec_delta", FN(counter_dec_delta)},
      {"__itt_counter_set_value", FN(counter_set_value)},
  };
  (void)init_groups; /* every group this library implements is filled */
  if (!p || !p->api_list_ptr) return;
  for (itt_api_info_t *a = p->api_list_ptr; a->name; a++)
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++)
      if (a->func_ptr && strcmp(a->name, mine[i].name) == 0) *a->func_ptr = mine[i].fn;
  static atomic_flag reported = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&reported)) atexit(report);
}
