/*
 * names.c: sites made at run time, for labelprof's NVTX and ITT libraries.
 *
 * NVTX and ITT name their ranges with strings made while the program runs,
 * where LP_SCOPE has a static site. Each distinct (text, category) becomes
 * one site that lives as long as the process, so that the pseudo-stack, the
 * timeline and the tree keep holding site pointers. Lookups go first to a
 * per-thread cache (no lock, no shared write); a miss takes the shared
 * table's mutex. The number of distinct names is bounded: past the bound a
 * name gets the overflow site and the call is counted.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 256  /* per thread, direct-mapped */
#define MAX_CATEGORIES 4096
#define DEFAULT_MAX_NAMES 10000

typedef struct entry {
  uint64_t hash;
  const lp_impl_made_site_t *site;
} entry_t;

typedef struct cache {
  entry_t e[CACHE_SLOTS];
} cache_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry_t *table;        /* open addressing, size a power of two, under mu */
static size_t table_size, table_used;
static uint64_t max_names;    /* read once, under mu */
static _Atomic uint64_t overflowed;
static const char *categories[MAX_CATEGORIES];
static size_t ncategories;
static pthread_key_t cache_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;
static __thread cache_t *self_cache __attribute__((tls_model("initial-exec")));

static const lp_impl_made_site_t overflow_site = {
    {"(other names)", "", "", 0, LP_LEVEL_ANNOTATIONS, LP_LAYER_NONE, LP_PHASE_UNSPECIFIED, LP_MODE_SCOPE,
     LP_IMPL_SITE_MADE},
    NULL};

/* Word-at-a-time hash of len bytes, mixed with the category pointer. */
static uint64_t hash_text(const char *s, size_t len, const char *cat) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)cat ^ len;
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    s += 8;
    len -= 8;
  }
  if (len) {
    uint64_t w = 0;
    memcpy(&w, s, len);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  }
  h ^= h >> 29;
  return h | 1; /* 0 marks an empty slot */
}

static void free_cache(void *p) {
  self_cache = NULL; /* key destructors run on the exiting thread: a later lookup goes to the table */
  free(p);
}
static void make_key(void) { key_ok = pthread_key_create(&cache_key, free_cache) == 0; }

static cache_t *thread_cache(void) {
  if (pthread_once(&key_once, make_key) != 0 || !key_ok) return NULL;
  cache_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  if (pthread_setspecific(cache_key, c) != 0) {
    free(c);
    return NULL;
  }
  self_cache = c;
  return c;
}

static uint64_t read_max_names(void) {
  const char *v = getenv("LABELPROF_MAX_NAMES");
  if (v && *v) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (!*end && !errno && n >= 1 && n <= 100000000ull) return n;
    fprintf(stderr, "labelprof: LABELPROF_MAX_NAMES='%s' is not a number from 1 to 100000000; using %d\n", v,
            DEFAULT_MAX_NAMES);
  }
  return DEFAULT_MAX_NAMES;
}

static bool same(const lp_impl_made_site_t *m, const char *text, size_t len, const char *cat) {
  return m->category == cat && memcmp(m->site.label, text, len + 1) == 0;
}

/* Under mu: the table's site for text, made if the bound allows; NULL past the bound or out of memory. */
static const lp_impl_made_site_t *lookup_locked(const char *text, size_t len, const char *cat, uint64_t h) {
  if (!max_names) max_names = read_max_names();
  if (table_used * 2 >= table_size) { /* grow: keep the load under one half */
    size_t n = table_size ? table_size * 2 : 1024;
    entry_t *t = calloc(n, sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < table_size; i++)
      if (table[i].hash) {
        size_t j = table[i].hash & (n - 1);
        while (t[j].hash) j = (j + 1) & (n - 1);
        t[j] = table[i];
      }
    free(table);
    table = t;
    table_size = n;
  }
  size_t i = h & (table_size - 1);
  for (; table[i].hash; i = (i + 1) & (table_size - 1))
    if (table[i].hash == h && same(table[i].site, text, len, cat)) return table[i].site;
  if (table_used >= max_names) return NULL;
  lp_impl_made_site_t *m = malloc(sizeof *m + len + 1);
  if (!m) return NULL;
  char *copy = (char *)(m + 1);
  memcpy(copy, text, len + 1);
  *m = (lp_impl_made_site_t){{copy, cat ? cat : "", "", 0, LP_LEVEL_ANNOTATIONS, LP_LAYER_NONE,
                              LP_PHASE_UNSPECIFIED, LP_MODE_SCOPE, LP_IMPL_SITE_MADE},
                             cat};
  table[i].hash = h;
  table[i].site = m;
  table_used++;
  return m;
}

const lp_site_t *lp_impl_site_make(const char *text, const char *category) {
  if (!text) text = "(null)";
  size_t len = strlen(text);
  uint64_t h = hash_text(text, len, category);
  cache_t *c = self_cache;
  entry_t *e = c ? &c->e[h & (CACHE_SLOTS - 1)] : NULL;
  if (e && e->hash == h && same(e->site, text, len, category)) return &e->site->site;
  lp__lock(&mu);
  const lp_impl_made_site_t *m = lookup_locked(text, len, category, h);
  lp__unlock(&mu);
  if (!m) {
    atomic_fetch_add_explicit(&overflowed, 1, memory_order_relaxed);
    return &overflow_site.site;
  }
  if (!c) c = thread_cache();
  if (c) {
    e = &c->e[h & (CACHE_SLOTS - 1)];
    e->hash = h;
    e->site = m;
  }
  return &m->site;
}

const char *lp_impl_category(const char *text) {
  if (!text) return NULL;
  const char *r = "(other categories)";
  lp__lock(&mu);
  for (size_t i = 0; i < ncategories; i++)
    if (strcmp(categories[i], text) == 0) {
      r = categories[i];
      goto out;
    }
  if (ncategories < MAX_CATEGORIES) {
    char *copy = strdup(text);
    if (copy) r = categories[ncategories++] = copy;
  }
out:
  lp__unlock(&mu);
  return r;
}

uint64_t lp_impl_names_overflow(uint64_t *limit) {
  if (limit) {
    lp__lock(&mu);
    if (!max_names) max_names = read_max_names();
    *limit = max_names;
    lp__unlock(&mu);
  }
  return atomic_load_explicit(&overflowed, memory_order_relaxed);
}
