/*
 * intern.c: sites made at run time: lp_site_intern() (bindings such as
 * Python's module, names that are data) and labelprof's NVTX and ITT
 * libraries (lp_impl_site_make).
 *
 * Those names are strings made while the program runs, where LP_SCOPE has a
 * static site. Each distinct (text, category, level) becomes one site that
 * lives as long as the process, so that the pseudo-stack, the timeline and
 * the tree keep holding site pointers. Lookups go first to a per-thread
 * cache (no lock, no shared write); a miss takes the shared table's mutex.
 * The number of distinct names is bounded, for both entries together: past
 * the bound a name gets its level's overflow site and the call is counted.
 */
#include "internal.h"
#include "annot_entry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 256  /* per thread, direct-mapped, by the text's first and last bytes and length */
#define MAX_CATEGORIES 4096
#define DEFAULT_MAX_NAMES 10000

typedef struct entry {
  uint64_t hash;
  const lp_impl_made_site_t *site;
} entry_t;

/*
 * A name the thread used: its first and last 8 bytes (which, with the
 * length, are all of a text up to 16 bytes) and its length held inline, so
 * that a short text is compared with four loads and no call, and a longer
 * one with one memcmp of known length over the bytes between.
 */
typedef struct slot {
  uint64_t head, tail;
  size_t len;
  const char *cat;
  uint32_t level;
  const lp_impl_made_site_t *site;
} slot_t;

typedef struct cache {
  slot_t s[CACHE_SLOTS];
} cache_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry_t *table;        /* open addressing, size a power of two, under mu */
static size_t table_size, table_used;
static uint64_t max_names;    /* read once, under mu */
static const char *categories[MAX_CATEGORIES];
static size_t ncategories;
static pthread_key_t cache_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;
static __thread cache_t *self_cache __attribute__((tls_model("initial-exec")));

/* One per level, indexed by the level's bit: a name past the bound still records at its own level. */
#define OVERFLOW_SITE(level) \
  {{"(other names)", "", "", 0, (level), LP_LAYER_NONE, LP_PHASE_UNSPECIFIED, LP_MODE_SCOPE, LP_IMPL_SITE_MADE}, NULL}
static const lp_impl_made_site_t overflow_sites[] = {OVERFLOW_SITE(LP_LEVEL_REQUEST), OVERFLOW_SITE(LP_LEVEL_RUNTIME),
                                                     OVERFLOW_SITE(LP_LEVEL_OPERATOR), OVERFLOW_SITE(LP_LEVEL_DEBUG),
                                                     OVERFLOW_SITE(LP_LEVEL_ANNOTATIONS)};
_Static_assert(sizeof overflow_sites / sizeof overflow_sites[0] == 5 && LP_LEVEL_ALL == 0x1fu,
               "one overflow site per level");

static const lp_site_t *overflow_site(uint32_t level) { return &overflow_sites[__builtin_ctz(level)].site; }

/*
 * Word-at-a-time hash of len bytes, mixed with the category pointer and the
 * level; the last word overlaps the one before.
 */
static uint64_t hash_text(const char *s, size_t len, const char *cat, uint32_t level) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)cat ^ len ^ (uint64_t)level << 48, w = 0;
  size_t n = len;
  while (n > 8) {
    memcpy(&w, s, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    s += 8;
    n -= 8;
  }
  if (len >= 8) {
    memcpy(&w, s + n - 8, 8);
  } else {
    w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)(unsigned char)s[i] << (8 * i);
  }
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33; /* a finaliser: every bit of the text reaches the low bits (the slots) */
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h | 1; /* 0 marks an empty slot */
}

static void free_cache(void *p) {
  self_cache = NULL; /* key destructors run on the exiting thread: a later lookup goes to the table */
  free(p);
}
static void make_key(void) { key_ok = pthread_key_create(&cache_key, free_cache) == 0; }

static cache_t *thread_cache(void) {
  if (pthread_once(&key_once, make_key) != 0 || !key_ok) return NULL;
  cache_t *c = lp__calloc(1, sizeof *c);
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
    lp__warn("LABELPROF_MAX_NAMES='%s' is not a number from 1 to 100000000; using %d", v, DEFAULT_MAX_NAMES);
  }
  return DEFAULT_MAX_NAMES;
}

static bool same(const lp_impl_made_site_t *m, const char *text, size_t len, const char *cat, uint32_t level) {
  return m->category == cat && m->site.level == level && memcmp(m->site.label, text, len) == 0 &&
         m->site.label[len] == '\0';
}

/* Under mu: the bound, read from the environment the first time. */
static uint64_t max_names_locked(void) {
  if (!max_names) {
    max_names = read_max_names();
    atomic_store_explicit(&lp__names_limit, max_names, memory_order_relaxed);
  }
  return max_names;
}

/*
 * Under mu: the table's site for text, made if the bound allows; NULL past
 * the bound (*full set) or out of memory.
 */
static const lp_impl_made_site_t *lookup_locked(const char *text, size_t len, const char *cat, uint32_t level,
                                                uint64_t h, bool *full) {
  max_names_locked();
  if (table_used * 2 >= table_size) { /* grow: keep the load under one half */
    size_t n = table_size ? table_size * 2 : 1024;
    entry_t *t = lp__calloc(n, sizeof *t);
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
    if (table[i].hash == h && same(table[i].site, text, len, cat, level)) return table[i].site;
  if (table_used >= max_names) {
    *full = true;
    return NULL;
  }
  lp_impl_made_site_t *m = lp__malloc(sizeof *m + len + 1);
  if (!m) return NULL;
  char *copy = (char *)(m + 1);
  memcpy(copy, text, len);
  copy[len] = '\0';
  /* The file is "" for a binding's name, the category (the domain's name) for NVTX's and ITT's. */
  *m = (lp_impl_made_site_t){{copy, cat ? cat : "", "", 0, level, LP_LAYER_NONE, LP_PHASE_UNSPECIFIED,
                              LP_MODE_SCOPE, LP_IMPL_SITE_MADE},
                             cat};
  table[i].hash = h;
  table[i].site = m;
  table_used++;
  return m;
}

/* Up to 8 bytes of s (n of them, n <= 8) as a little-endian word, zero-padded, reading no byte past them. */
static inline uint64_t load_upto8(const char *s, size_t n) {
  uint32_t lo, hi;
  if (n >= 4) { /* two 4-byte loads that overlap */
    memcpy(&lo, s, 4);
    memcpy(&hi, s + n - 4, 4);
    return (uint64_t)lo | (uint64_t)hi << (8 * (n - 4));
  }
  uint64_t w = 0;
  if (n > 0) w = (uint64_t)(unsigned char)s[0] | (uint64_t)(unsigned char)s[n / 2] << (8 * (n / 2)) |
                 (uint64_t)(unsigned char)s[n - 1] << (8 * (n - 1));
  return w;
}

/*
 * The key of a text in the per-thread cache: from 8 bytes on, its first and
 * its last 8 (they overlap below 16 bytes, and with the length they are the
 * whole text up to 16); below 8, all of it.
 */
static inline void cache_key_of(const char *text, size_t len, uint64_t *head, uint64_t *tail) {
  if (__builtin_expect(len >= 8, 1)) {
    memcpy(head, text, 8);
    memcpy(tail, text + len - 8, 8);
  } else {
    *head = load_upto8(text, len);
    *tail = 0;
  }
}

static inline slot_t *cache_slot(cache_t *c, uint64_t head, uint64_t tail, size_t len, const char *cat,
                                 uint32_t level) {
  uint64_t k = (head ^ (tail * 0x9e3779b97f4a7c15ull) ^ len ^ (uintptr_t)cat ^ (uint64_t)level << 40) *
               0xff51afd7ed558ccdull;
  return &c->s[k >> 56];
}

/*
 * A name the thread's cache did not hold: the shared table, under its
 * mutex; then the cache learns it. 0 and the name's site; -ENOSPC past
 * the bound or -ENOMEM out of memory, counted, with the level's overflow
 * site; -EINVAL, and *out untouched, for a name holding a NUL byte.
 */
static __attribute__((noinline)) int site_make_slow(const char *text, size_t len, const char *category,
                                                    uint32_t level, uint64_t head, uint64_t tail,
                                                    const lp_site_t **out) {
  if (memchr(text, '\0', len)) return -EINVAL; /* only a new name is searched: a cached one was checked */
  uint64_t h = hash_text(text, len, category, level);
  bool full = false;
  lp__lock(&mu);
  const lp_impl_made_site_t *m = lookup_locked(text, len, category, level, h, &full);
  lp__unlock(&mu);
  if (!m) {
    atomic_fetch_add_explicit(&lp__names_overflowed, 1, memory_order_relaxed);
    *out = overflow_site(level);
    return full ? -ENOSPC : -ENOMEM;
  }
  cache_t *c = self_cache;
  if (c || (c = thread_cache()) != NULL)
    *cache_slot(c, head, tail, len, category, level) = (slot_t){head, tail, len, category, level, m};
  *out = &m->site;
  return 0;
}

static inline __attribute__((always_inline)) int site_make(const char *text, size_t len, const char *category,
                                                           uint32_t level, const lp_site_t **out) {
  uint64_t head, tail;
  cache_key_of(text, len, &head, &tail);
  cache_t *c = self_cache;
  if (__builtin_expect(c != NULL, 1)) {
    const slot_t *sl = cache_slot(c, head, tail, len, category, level);
    if (sl->head == head && sl->tail == tail && sl->len == len && sl->cat == category && sl->level == level &&
        (len <= 16 || memcmp(sl->site->site.label + 8, text + 8, len - 16) == 0)) {
      *out = &sl->site->site;
      return 0;
    }
  }
  return site_make_slow(text, len, category, level, head, tail, out);
}

/* NVTX's and ITT's names: NUL-terminated, at LP_LEVEL_ANNOTATIONS, never refused. */
static inline __attribute__((always_inline)) const lp_site_t *annot_site(const char *text, const char *category) {
  const lp_site_t *site = overflow_site(LP_LEVEL_ANNOTATIONS);
  if (__builtin_expect(!text, 0)) text = "(null)";
  (void)site_make(text, strlen(text), category, LP_LEVEL_ANNOTATIONS, &site);
  return site;
}

int lp_site_intern(const char *name, size_t len, uint32_t level, const lp_site_t **out) {
  if (!out || (!name && len) || !level || (level & (level - 1)) || (level & ~LP_LEVEL_ALL)) return -EINVAL;
  return site_make(name ? name : "", len, NULL, level, out);
}

int lp_names_get_stats(lp_names_stats_t *out) {
  if (!out) return -EINVAL;
  lp__lock(&mu);
  out->limit = max_names_locked();
  out->names = table_used;
  lp__unlock(&mu);
  out->overflowed = atomic_load_explicit(&lp__names_overflowed, memory_order_relaxed);
  return 0;
}

const lp_site_t *lp_impl_site_make(const char *text, const char *category) { return annot_site(text, category); }

void lp_impl_annot_push(const char *text, const char *category) { lp_impl_begin(annot_site(text, category)); }

void lp_impl_annot_begin(const lp_site_t *site) { lp_impl_begin(site); }

void lp_impl_annot_end(void) { lp_impl_end(); }

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
    char *copy = lp__strdup(text);
    if (copy) r = categories[ncategories++] = copy;
  }
out:
  lp__unlock(&mu);
  return r;
}

uint64_t lp_impl_names_overflow(uint64_t *limit) {
  if (limit) {
    lp__lock(&mu);
    *limit = max_names_locked();
    lp__unlock(&mu);
  }
  return atomic_load_explicit(&lp__names_overflowed, memory_order_relaxed);
}

/* Fork: the names lock is held across fork(), so that the child's table is whole; the child starts it afresh. */
void lp__names_atfork_prepare(void) { lp__lock(&mu); }
void lp__names_atfork_parent(void) { lp__unlock(&mu); }
/* The child's only thread is the one whose prepare took the lock: it releases it, as the registry's does. */
void lp__names_atfork_child(void) { lp__unlock(&mu); }
