/*
 * subs.c: streams, trace-point types, events, subscribers and their
 * callbacks, and LABELPROF_SUBSCRIBERS.
 *
 * Writers (create, set_callback, enable, disable, destroy) take subs_mu and
 * publish an immutable snapshot of the enabled subscribers' callbacks in
 * `current`. Readers never lock: a notification pins the snapshot it uses
 * with a hazard pointer (Michael 2004) and uses only that one, so a scope's
 * end calls exactly the callbacks its begin called. The pins are per scope,
 * not per thread: each pseudo-stack frame has its own (label[depth]), each
 * LP_NOTIFY_SCOPE takes one of 64 (scope[i]), a single notification uses
 * `single`. A snapshot that is no longer current is freed once no pin holds
 * it; a subscriber is freed once no pinned snapshot holds it.
 *
 * The reader publishes its pin, then checks that the snapshot is still the
 * current one; the writer replaces the snapshot, then reads the pins. That
 * store-then-load on both sides needs a full fence on both; where Linux's
 * membarrier(2) is available the reader's becomes a compiler barrier and
 * the writer pays for both (MEMBARRIER_CMD_PRIVATE_EXPEDITED), else both
 * use sequentially consistent accesses.
 *
 * Nothing here allocates per notification: a thread's pins and instance
 * slots are allocated with its first notification.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_SUBS 16  /* enabled at once */
#define NSCOPES 64   /* LP_NOTIFY_SCOPEs open at once per thread */
#define MAX_NAME 256 /* stream and vendor names, with the NUL */
#define ECACHE 4096  /* events cached per thread, allocated at its first lp_event_make */

#if defined(__SANITIZE_THREAD__)
#define LP__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LP__TSAN 1
#endif
#endif
#ifndef LP__TSAN
#define LP__TSAN 0
#endif

LP_EXPORT uint64_t lp_impl_wanted[256];


/* ---- streams and vendors ------------------------------------------------------ */

typedef struct stream {
  char *name;
  bool initialized;
  uint64_t init_order; /* when it was last initialized, for replaying inits in order */
  uint32_t major, minor;
  char *version;
} stream_t;

static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER; /* streams, vendors, init_seq */
static stream_t streams[256];                                  /* 1..255 */
static uint32_t nstreams;
static char *vendors[256]; /* 1..255 */
static uint32_t nvendors;
static uint64_t init_seq;

/* An id for name in table (1..255), registering it. Lock held. */
static int name_id(char **names, size_t stride, uint32_t *n, const char *name, uint8_t *id) {
  if (!name || !*name || strnlen(name, MAX_NAME) >= MAX_NAME) return -EINVAL;
  for (uint32_t i = 1; i <= *n; i++) {
    char *have = *(char **)((char *)names + i * stride);
    if (strcmp(have, name) == 0) {
      *id = (uint8_t)i;
      return 0;
    }
  }
  if (*n >= 255) return -ENOSPC;
  char *copy = lp__strdup(name);
  if (!copy) return -ENOMEM;
  (*n)++;
  *(char **)((char *)names + *n * stride) = copy;
  *id = (uint8_t)*n;
  return 0;
}

static int register_stream(const char *name, uint8_t *id) {
  if (!id) return -EINVAL;
  uint8_t got = 0;
  lp__lock(&streams_mu);
  int rc = name_id(&streams[0].name, sizeof(stream_t), &nstreams, name, &got);
  lp__unlock(&streams_mu);
  if (rc == 0) *id = got;
  return rc;
}

int lp__stream_register(const char *name, uint8_t *id) { return register_stream(name, id); }

int lp__tp_register(const char *vendor, uint8_t index, uint16_t *type) {
  if (!type || index > 127) return -EINVAL;
  uint8_t v = 0;
  lp__lock(&streams_mu);
  int rc = name_id(vendors, sizeof(char *), &nvendors, vendor, &v);
  lp__unlock(&streams_mu);
  if (rc == 0) *type = (uint16_t)((unsigned)v << 8 | index);
  return rc;
}

/* ---- loaded subscriber libraries -------------------------------------------- */

typedef void (*init_fn)(uint32_t major, uint32_t minor, const char *version, const char *stream);
typedef void (*finish_fn)(const char *stream);
typedef struct lib {
  char *path;
  void *handle;
  init_fn init;
  finish_fn finish;
} lib_t;

#define MAX_LIBS 64
static lib_t libs[MAX_LIBS];
static _Atomic uint32_t nlibs; /* published after the entry is written; never shrinks */

/* The inits of every loaded library for one stream, no lock held: an init may use any of the API. */
static void run_inits(uint32_t from, uint32_t to, const char *name, uint32_t major, uint32_t minor,
                      const char *version) {
  for (uint32_t i = from; i < to; i++) libs[i].init(major, minor, version, name);
}

int lp__stream_initialize(const char *name, uint32_t major, uint32_t minor, const char *version) {
  uint8_t id;
  int rc = register_stream(name, &id);
  if (rc) return rc;
  char *v = lp__strdup(version ? version : "");
  if (!v) return -ENOMEM;
  lp__lock(&streams_mu);
  stream_t *s = &streams[id];
  free(s->version);
  s->version = v;
  s->major = major;
  s->minor = minor;
  s->initialized = true;
  s->init_order = ++init_seq;
  uint32_t n = atomic_load(&nlibs);
  /* The library's copies of name and version: they live as long as the process (versions are only replaced). */
  const char *stable = s->name;
  char *vcopy = lp__strdup(v);
  lp__unlock(&streams_mu);
  run_inits(0, n, stable, major, minor, vcopy ? vcopy : "");
  free(vcopy);
  return 0;
}

int lp__stream_finalize(const char *name) {
  if (!name) return -EINVAL;
  const char *stable = NULL;
  lp__lock(&streams_mu);
  for (uint32_t i = 1; i <= nstreams; i++)
    if (strcmp(streams[i].name, name) == 0 && streams[i].initialized) {
      streams[i].initialized = false;
      stable = streams[i].name;
    }
  uint32_t n = atomic_load(&nlibs);
  lp__unlock(&streams_mu);
  if (!stable) return -ENOENT;
  for (uint32_t i = 0; i < n; i++) libs[i].finish(stable);
  return 0;
}

/* ---- events ------------------------------------------------------------------ */

typedef struct meta {
  struct meta *next;
  char *key, *value;
} meta_t;

/*
 * Two parts, each starting a cache line. The first has the instance counter,
 * which every lp_event_make of the event writes, and what the table's
 * chains need; the second what a payload is compared by, its strings right
 * after it (a call site's name and file fit in the same line). A thread's
 * cached lookup reads the second and adds to the first: threads that make
 * one event pass the counter's line between them, and share the payload's.
 */
struct lp_event {
  _Atomic uint64_t instances;
  uint64_t hash;
  _Atomic(struct lp_event *) next; /* the bucket's chain */
  uint64_t id;
  _Atomic(meta_t *) meta; /* prepended under events_mu; readers walk it without */
  uint16_t type;
  _Alignas(64) lp_payload_t payload; /* its strings point into text[] */
  char text[];                       /* name, then file, each with its NUL */
};

#define EV_BUCKETS 65536u /* 512 KiB of chain heads, touched as they fill */
#define EV_PAGE 4096u
#define EV_PAGES 4096u
static pthread_mutex_t events_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(lp_event_t *) buckets[EV_BUCKETS];
typedef _Atomic(lp_event_t *) evslot_t;
static _Atomic(evslot_t *) pages[EV_PAGES]; /* id - 1 -> event */
static _Atomic uint64_t nevents;

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v;
  h *= 0x100000001b3ull;
  return h ^ (h >> 29);
}

/* Eight bytes a step: the length first (strlen is vectorised), then whole words, then the tail. */
static uint64_t hash_str(uint64_t h, const char *s) {
  if (!s) return mix(h, 0x9e3779b97f4a7c15ull);
  size_t n = strlen(s), i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    h = mix(h, w);
  }
  uint64_t tail = 0;
  memcpy(&tail, s + i, n - i);
  return mix(h, tail ^ (uint64_t)n << 56);
}

static uint64_t hash_payload(const lp_payload_t *p) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = hash_str(h, p->name);
  h = hash_str(h, p->file);
  h = mix(h, (uint64_t)p->line << 32 | p->column);
  h = mix(h, (uint64_t)(uintptr_t)p->code_ptr);
  /* A final avalanche (MurmurHash3's), so that the low bits that pick a bucket depend on every byte. */
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

static bool str_eq(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

static bool same_payload(const lp_payload_t *a, const lp_payload_t *b) {
  return a->line == b->line && a->column == b->column && a->code_ptr == b->code_ptr && str_eq(a->name, b->name) &&
         str_eq(a->file, b->file);
}

static lp_event_t *find_payload(const lp_payload_t *p, uint64_t h) {
  for (lp_event_t *e = atomic_load_explicit(&buckets[h % EV_BUCKETS], memory_order_acquire); e;
       e = atomic_load_explicit(&e->next, memory_order_acquire))
    if (e->hash == h && same_payload(&e->payload, p)) return e;
  return NULL;
}

/*
 * Events live as long as the process: they are cut from 64 KiB blocks, on
 * 64-byte bounds, zeroed (one with long strings gets an allocation of its
 * own). events_mu held. NULL on ENOMEM.
 */
#define EV_BLOCK 65536u
static char *ev_cur, *ev_end;
#if defined(__SANITIZE_ADDRESS__)
#define LP_EV_OWN_ALLOCATIONS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LP_EV_OWN_ALLOCATIONS 1
#endif
#endif
static void *big_alloc(size_t size) {
  void *e = lp__aligned_alloc(64, (size + 63) & ~(size_t)63);
  if (e) memset(e, 0, size);
  return e;
}
static void *event_alloc(size_t size) {
#ifdef LP_EV_OWN_ALLOCATIONS
  return big_alloc(size); /* under ASan: each event its own, so that an overrun is caught */
#endif
  if (size > EV_BLOCK / 4) return big_alloc(size);
  size = (size + 63) & ~(size_t)63;
  if ((size_t)(ev_end - ev_cur) < size) {
    char *b = lp__aligned_alloc(64, EV_BLOCK);
    if (!b) return NULL;
    memset(b, 0, EV_BLOCK);
    ev_cur = b;
    ev_end = b + EV_BLOCK;
  }
  void *e = ev_cur;
  ev_cur += size;
  return e;
}

/* A new event for p, linked and numbered. events_mu held. NULL on ENOMEM or when ids run out. */
static lp_event_t *new_event(const lp_payload_t *p, uint64_t h, uint16_t type) {
  uint64_t id = atomic_load(&nevents) + 1;
  if (id > (uint64_t)EV_PAGE * EV_PAGES) return NULL;
  evslot_t *page = atomic_load(&pages[(id - 1) / EV_PAGE]);
  if (!page) {
    page = lp__calloc(EV_PAGE, sizeof *page);
    if (!page) return NULL;
    atomic_store_explicit(&pages[(id - 1) / EV_PAGE], page, memory_order_release);
  }
  size_t nl = p->name ? strlen(p->name) + 1 : 0, fl = p->file ? strlen(p->file) + 1 : 0;
  if (nl + fl > SIZE_MAX / 2) return NULL;
  lp_event_t *e = event_alloc(sizeof(lp_event_t) + nl + fl);
  if (!e) return NULL;
  e->payload = *p;
  e->payload.name = p->name ? memcpy(e->text, p->name, nl) : NULL;
  e->payload.file = p->file ? memcpy(e->text + nl, p->file, fl) : NULL;
  e->id = id;
  e->hash = h;
  e->type = type;
  atomic_store_explicit(&page[(id - 1) % EV_PAGE], e, memory_order_release);
  atomic_store_explicit(&e->next, atomic_load(&buckets[h % EV_BUCKETS]), memory_order_relaxed);
  atomic_store_explicit(&buckets[h % EV_BUCKETS], e, memory_order_release);
  atomic_store_explicit(&nevents, id, memory_order_release);
  return e;
}

static lp_event_t **cache_slot(const lp_payload_t *p);

int lp_event_make(const lp_payload_t *p, uint16_t event_type, const lp_event_t **ev, uint64_t *instance) {
  if (!p || !ev || (!p->name && !p->file && !p->code_ptr)) return -EINVAL;
  /* The calling thread's cache, by the payload's pointers; a hit is still compared by content. */
  lp_event_t **slot = cache_slot(p);
  lp_event_t *e = slot ? *slot : NULL;
  if (LP_IMPL_LIKELY(e && same_payload(&e->payload, p))) goto made;
  uint64_t h = hash_payload(p);
  e = find_payload(p, h);
  if (!e) {
    lp__lock(&events_mu);
    e = find_payload(p, h);
    if (!e) e = new_event(p, h, event_type);
    lp__unlock(&events_mu);
    if (!e) return -ENOMEM;
  }
  if (slot) *slot = e;
made:;
  uint64_t n = atomic_fetch_add_explicit(&e->instances, 1, memory_order_relaxed) + 1;
  if (instance) *instance = n;
  *ev = e;
  return 0;
}

uint64_t lp_event_id(const lp_event_t *ev) { return ev ? ev->id : 0; }
uint16_t lp_event_type(const lp_event_t *ev) { return ev ? ev->type : 0; }
const lp_payload_t *lp_event_payload(const lp_event_t *ev) { return ev ? &ev->payload : NULL; }

int lp_event_find(uint64_t id, const lp_event_t **ev) {
  if (!ev) return -EINVAL;
  if (id == 0 || id > atomic_load_explicit(&nevents, memory_order_acquire)) return -ENOENT;
  evslot_t *page = atomic_load_explicit(&pages[(id - 1) / EV_PAGE], memory_order_acquire);
  lp_event_t *e = page ? atomic_load_explicit(&page[(id - 1) % EV_PAGE], memory_order_acquire) : NULL;
  if (!e) return -ENOENT;
  *ev = e;
  return 0;
}

static const meta_t *find_meta(const lp_event_t *ev, const char *key) {
  for (const meta_t *m = atomic_load_explicit(&((lp_event_t *)ev)->meta, memory_order_acquire); m; m = m->next)
    if (strcmp(m->key, key) == 0) return m;
  return NULL;
}

int lp_event_set_metadata(const lp_event_t *ev, const char *key, const char *value) {
  if (!ev || !key || !value) return -EINVAL;
  lp_event_t *e = (lp_event_t *)ev;
  meta_t *m = lp__malloc(sizeof *m);
  char *k = lp__strdup(key), *v = lp__strdup(value);
  if (!m || !k || !v) {
    free(m);
    free(k);
    free(v);
    return -ENOMEM;
  }
  m->key = k;
  m->value = v;
  lp__lock(&events_mu);
  if (find_meta(e, key)) {
    lp__unlock(&events_mu);
    free(m);
    free(k);
    free(v);
    return -EEXIST;
  }
  m->next = atomic_load(&e->meta);
  atomic_store_explicit(&e->meta, m, memory_order_release);
  lp__unlock(&events_mu);
  return 0;
}

const char *lp_event_get_metadata(const lp_event_t *ev, const char *key) {
  if (!ev || !key) return NULL;
  const meta_t *m = find_meta(ev, key);
  return m ? m->value : NULL;
}

/* ---- subscribers and snapshots ---------------------------------------------- */

typedef struct cbent {
  uint8_t stream;
  uint16_t type;
  lp_callback_t cb;
} cbent_t;

struct lp_subscriber {
  lp_subscriber_t *next; /* every live subscriber */
  void *data;
  bool enabled;
  cbent_t *cbs;
  uint32_t ncbs, capcbs;
};

/*
 * One subscriber's callbacks for a pair of types (a single type is the even
 * half): cb[0] the even type's (a begin), cb[1] the odd one's (its end);
 * slot is the subscriber's index in the snapshot, its instance slot.
 * Declared in labelprof.h, which reads the labels' scope pair inline.
 */
typedef lp_impl_call_t call_t;
_Static_assert(MAX_SUBS == LP_IMPL_MAX_SUBS, "labelprof.h and subs.c agree on the most subscribers");

/* A key entry (labelprof.h): key = stream << 16 | even type, 0 = empty (stream 0 does not exist); first is in calls[]. */
typedef lp_impl_key_t keyent_t;

typedef struct snap {
  /* First, for the label paths (also labelprof.h's): the labels stream's scope pair, copied here. */
  lp_impl_snap_t head;
  struct snap *retired_next;
  uint32_t nsubs;
  lp_subscriber_t *subs[MAX_SUBS]; /* in enable order */
  call_t *calls;
  uint64_t wanted[256];
} snap_t;

/* A hazard pointer: the head of the snapshot a reader uses. Accessed through the __atomic builtins only. */
typedef lp_impl_snap_t *hazard_t;
static inline snap_t *hz_load(hazard_t *h, int mo) { return (snap_t *)__atomic_load_n(h, mo); }

typedef struct pin {
  hazard_t snap;
  void *slots[MAX_SUBS];
} pin_t;

typedef struct scope_info {
  uint8_t stream;
  uint16_t type;
  const lp_event_t *parent, *event;
  uint64_t instance;
  const void *user_data;
} scope_info_t;

/* A thread's pins, allocated with its first notification. The owner writes; writers read the pins. */
typedef struct sthread {
  /*
   * First, the part labelprof.h's label paths read, so that the one
   * thread-local pointer (lp_impl_sub_self) serves both: the guard (inside
   * a callback), the labels' notifications, filled in once (only the site
   * changes): the direct paths, which run only outside callbacks (guard
   * clear), set the guard, then the site, then call. A notification made
   * while the guard is set (an end owed inside a callback) is built on the
   * stack instead. Then the labels' pins: frame d's hazard pointer and its
   * instance slots.
   */
  lp_impl_sthread_t pub;
  struct sthread *next, *prev; /* subs_mu */
  uint64_t tid;
  uint64_t used; /* scope[] pins in use */
  /* lp_notify's, and the slot its callbacks get (NULL before each): used the same way, site always NULL. */
  pin_t probe;
  pin_t scope[NSCOPES];
  scope_info_t info[NSCOPES];
  lp_event_t **events; /* lp_event_make's cache: ECACHE entries, NULL until then */
} sthread_t;

static pthread_mutex_t subs_mu = PTHREAD_MUTEX_INITIALIZER; /* everything below */
static lp_subscriber_t *all;
static lp_subscriber_t *enabled_list[MAX_SUBS];
static uint32_t nenabled;
static snap_t *retired;
static sthread_t *sthreads;
/* The snapshot notifications use; with no subscriber enabled, empty_snap (no keys, nothing to call), never NULL. */
static keyent_t no_keys[1];
static snap_t empty_snap = {.head.mask = 0, .head.keys = no_keys};
LP_EXPORT lp_impl_snap_t *lp_impl_subs_current = &empty_snap.head;
LP_EXPORT int lp_impl_subs_asym; /* membarrier registered: readers need no fence */
static inline snap_t *cur_load(int mo) { return (snap_t *)__atomic_load_n(&lp_impl_subs_current, mo); }

/*
 * The thread's state; before its first notification unborn_st, after its
 * exit gone_st. Both read as inside a callback (guard set) and hold no pin,
 * so that the direct paths need no test of their own for them.
 */
static sthread_t unborn_st = {.pub.guard = 1};
static sthread_t gone_st = {.pub.guard = 1};
/* The same, as labelprof.h sees it (pub is the first member). */
LP_EXPORT __thread lp_impl_sthread_t *lp_impl_sub_self __attribute__((tls_model("initial-exec"))) = &unborn_st.pub;
/* The library's whole view of the calling thread's state, whose head lp_impl_sub_self points at. */
static inline sthread_t *my_state(void) { return (sthread_t *)lp_impl_sub_self; }
_Static_assert(offsetof(sthread_t, pub) == 0, "lp_impl_sub_self points at the head of the thread's state");
static inline bool st_real(const sthread_t *st) { return st != &unborn_st && st != &gone_st; }
static pthread_once_t st_once = PTHREAD_ONCE_INIT;
static pthread_key_t st_key;
static bool st_key_ok;

static void st_exit(void *arg) {
  sthread_t *st = arg;
  lp_impl_sub_self = &gone_st.pub;
  lp__lock(&subs_mu);
  if (st->prev)
    st->prev->next = st->next;
  else
    sthreads = st->next;
  if (st->next) st->next->prev = st->prev;
  lp__unlock(&subs_mu);
  free(st->events);
  free(st);
}

static void st_make_key(void) { st_key_ok = pthread_key_create(&st_key, st_exit) == 0; }

static sthread_t *st_create(void) {
  lp__thread_t *t = lp__thread_attach();
  if (!t || pthread_once(&st_once, st_make_key) != 0 || !st_key_ok) return NULL;
  sthread_t *st = lp__calloc(1, sizeof *st);
  if (!st) return NULL;
  st->tid = t->tid;
  st->pub.lbegin = (lp_notification_t){LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, NULL, NULL, NULL, 0, NULL, st->tid};
  st->pub.lend = (lp_notification_t){LP_STREAM_LABELS, LP_TP_SCOPE_END, NULL, NULL, NULL, 0, NULL, st->tid};
  st->pub.snote = (lp_notification_t){0, 0, NULL, NULL, NULL, 0, NULL, st->tid};
  if (pthread_setspecific(st_key, st) != 0) {
    free(st);
    return NULL;
  }
  lp__lock(&subs_mu);
  st->next = sthreads;
  if (sthreads) sthreads->prev = st;
  sthreads = st;
  lp__unlock(&subs_mu);
  lp_impl_sub_self = &st->pub;
  return st;
}

static inline sthread_t *st_get(void) {
  sthread_t *st = my_state();
  if (LP_IMPL_LIKELY(st_real(st))) return st;
  return st == &gone_st || lp__abi_refused() ? NULL : st_create(); /* a unit of another ABI reads it inline */
}

/*
 * The calling thread's cache slot for p, by p's pointers and numbers (a hit
 * is still compared by content). 4096 slots (32 KiB, only in threads that
 * make events): a runtime's thousand kernels, or the thousand trace points
 * of XPTI's benchmark, mostly stay in it.
 */
static lp_event_t **cache_slot(const lp_payload_t *p) {
  sthread_t *st = st_get();
  if (!st) return NULL;
  if (LP_IMPL_UNLIKELY(!st->events) && !(st->events = lp__calloc(ECACHE, sizeof *st->events))) return NULL;
  uint64_t h = ((uint64_t)(uintptr_t)p->name ^ (uint64_t)(uintptr_t)p->file * 31 ^ (uint64_t)(uintptr_t)p->code_ptr * 7 ^ p->line * 2654435761u ^
                 p->column) *
                0x9e3779b97f4a7c15ull;
  return &st->events[h >> 52];
}

/* Pins the current snapshot; NULL if there is none (or it kept changing). */
static inline snap_t *pin_current(hazard_t *h) {
  for (int i = 0; i < 8; i++) {
    snap_t *s = cur_load(__ATOMIC_ACQUIRE);
    if (!s) break; /* (a pin an earlier try stored is cleared below) */
#if !LP__TSAN
    if (LP_IMPL_LIKELY(__atomic_load_n(&lp_impl_subs_asym, __ATOMIC_RELAXED))) {
      __atomic_store_n(h, &s->head, __ATOMIC_RELAXED);
      atomic_signal_fence(memory_order_seq_cst); /* the writer's membarrier() is the fence */
      if (cur_load(__ATOMIC_RELAXED) == s) return s;
      continue;
    }
#endif
    __atomic_store_n(h, &s->head, __ATOMIC_SEQ_CST);
    if (cur_load(__ATOMIC_SEQ_CST) == s) return s;
  }
  if (__atomic_load_n(h, __ATOMIC_RELAXED)) __atomic_store_n(h, NULL, __ATOMIC_RELEASE);
  return NULL;
}

static inline void unpin(hazard_t *h) { __atomic_store_n(h, NULL, __ATOMIC_RELEASE); }

static inline uint32_t pair_key(uint8_t stream, uint16_t type) { return (uint32_t)stream << 16 | (type & 0xfffeu); }

static inline uint32_t key_home(uint32_t key, uint32_t mask) { return (key * 2654435761u) >> 7 & mask; }

static inline const keyent_t *lookup(const snap_t *s, uint32_t key) {
  for (uint32_t h = key_home(key, s->head.mask);; h = (h + 1) & s->head.mask) {
    const keyent_t *k = &s->head.keys[h];
    if (k->key == key) return k;
    if (k->key == 0) return NULL;
  }
}

/* Every pin of every thread, against s; subs_mu held. */
static bool pinned(const snap_t *s) {
  for (sthread_t *st = sthreads; st; st = st->next) {
    if (hz_load(&st->pub.single, __ATOMIC_SEQ_CST) == s || hz_load(&st->probe.snap, __ATOMIC_SEQ_CST) == s)
      return true;
    for (int i = 0; i < LP_STACK_CAPACITY; i++)
      if (hz_load(&st->pub.label[i], __ATOMIC_SEQ_CST) == s) return true;
    for (int i = 0; i < NSCOPES; i++)
      if (hz_load(&st->scope[i].snap, __ATOMIC_SEQ_CST) == s) return true;
  }
  return false;
}

static bool holds(const snap_t *s, const lp_subscriber_t *sub) {
  for (uint32_t i = 0; i < s->nsubs; i++)
    if (s->subs[i] == sub) return true;
  return false;
}

/* Frees the retired snapshots no pin holds. subs_mu held. */
static void reclaim(void) {
  for (snap_t **pp = &retired; *pp;) {
    snap_t *s = *pp;
    if (pinned(s)) {
      pp = &s->retired_next;
      continue;
    }
    *pp = s->retired_next;
    free(s);
  }
}

static void nop_callback(const lp_notification_t *n, void *subscriber_data, void **instance_data) {
  (void)n;
  (void)subscriber_data;
  (void)instance_data;
}

typedef struct flat {
  uint32_t key, sub;
  bool odd;
  lp_callback_t cb;
} flat_t;

static int flat_cmp(const void *a, const void *b) {
  const flat_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->sub < y->sub ? -1 : x->sub > y->sub;
}

#define KEYS_SPREAD 4096u /* the most key entries build() spends on a table without shared homes */

/* Whether two of the (sorted) keys of f have the same home in a table of mask + 1 entries. */
static bool homes_collide(const flat_t *f, uint32_t nf, uint32_t mask) {
  uint64_t seen[KEYS_SPREAD / 64] = {0};
  for (uint32_t i = 0; i < nf; i++) {
    if (i > 0 && f[i].key == f[i - 1].key) continue;
    uint32_t h = key_home(f[i].key, mask);
    if (seen[h / 64] >> (h % 64) & 1) return true;
    seen[h / 64] |= (uint64_t)1 << (h % 64);
  }
  return false;
}

/* The snapshot of the enabled subscribers, or NULL with *rc = -ENOMEM (none enabled: NULL, *rc = 0). subs_mu held. */
static snap_t *build(int *rc) {
  *rc = 0;
  if (!nenabled) return NULL;
  uint32_t nf = 0;
  for (uint32_t i = 0; i < nenabled; i++) nf += enabled_list[i]->ncbs;
  flat_t *f = lp__malloc((nf ? nf : 1) * sizeof *f);
  if (!f) goto oom;
  nf = 0;
  for (uint32_t i = 0; i < nenabled; i++)
    for (uint32_t j = 0; j < enabled_list[i]->ncbs; j++) {
      const cbent_t *c = &enabled_list[i]->cbs[j];
      f[nf++] = (flat_t){pair_key(c->stream, c->type), i, (c->type & 1u) != 0, c->cb};
    }
  qsort(f, nf, sizeof *f, flat_cmp);
  uint32_t nkeys = 0, ncalls = 0;
  for (uint32_t i = 0; i < nf; i++) {
    if (i == 0 || f[i].key != f[i - 1].key) nkeys++;
    if (i == 0 || f[i].key != f[i - 1].key || f[i].sub != f[i - 1].sub) ncalls++;
  }
  /* Big enough that no two keys share a home, where a few KiB allow: a notification's lookup is one probe. */
  uint32_t size = 8;
  while (size < nkeys * 2) size *= 2;
  while (size < KEYS_SPREAD && homes_collide(f, nf, size - 1)) size *= 2;
  snap_t *s = lp__calloc(1, sizeof *s + size * sizeof(keyent_t) + (ncalls ? ncalls : 1) * sizeof(call_t));
  if (!s) {
    free(f);
    goto oom;
  }
  keyent_t *keys = (keyent_t *)(s + 1);
  s->head.keys = keys;
  s->calls = (call_t *)(keys + size);
  s->head.mask = size - 1;
  s->nsubs = nenabled;
  memcpy(s->subs, enabled_list, nenabled * sizeof *s->subs);
  uint32_t c = 0;
  keyent_t *k = NULL;
  for (uint32_t i = 0; i < nf; i++) {
    if (i == 0 || f[i].key != f[i - 1].key) {
      uint32_t h = key_home(f[i].key, s->head.mask);
      while (keys[h].key) h = (h + 1) & s->head.mask;
      k = &keys[h];
      k->key = f[i].key;
      k->first = &s->calls[c];
      uint8_t stream = (uint8_t)(f[i].key >> 16);
      s->wanted[stream] |= LP_IMPL_WANT_BIT(f[i].key & 0xffffu);
    }
    if (i == 0 || f[i].key != f[i - 1].key || f[i].sub != f[i - 1].sub) {
      s->calls[c] = (call_t){{NULL, NULL}, s->subs[f[i].sub]->data, f[i].sub};
      c++;
      k->count++;
    }
    if (f[i].odd)
      s->calls[c - 1].cb[1] = f[i].cb;
    else
      s->calls[c - 1].cb[0] = f[i].cb;
  }
  free(f);
  const keyent_t *sk = lookup(s, pair_key(LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN));
  if (sk) {
    memcpy(s->head.scope, sk->first, sk->count * sizeof *s->head.scope);
    s->head.nscope = sk->count;
    /* The label paths call without testing: a missing half of the pair is a no-op. */
    for (uint32_t i = 0; i < s->head.nscope; i++) {
      if (!s->head.scope[i].cb[0]) s->head.scope[i].cb[0] = nop_callback;
      if (!s->head.scope[i].cb[1]) s->head.scope[i].cb[1] = nop_callback;
    }
  }
  return s;
oom:
  *rc = -ENOMEM;
  return NULL;
}

static void membarrier_all(void) {
#if !LP__TSAN
  if (__atomic_load_n(&lp_impl_subs_asym, __ATOMIC_SEQ_CST) &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
    /* Cannot happen once registered; if it does, readers must fence for themselves from now on. */
    __atomic_store_n(&lp_impl_subs_asym, 0, __ATOMIC_SEQ_CST);
  }
#endif
}

/* Makes a new snapshot current; subs_mu held. */
static int publish(void) {
  int rc;
  snap_t *n = build(&rc);
  if (rc) return rc;
  snap_t *old = cur_load(__ATOMIC_SEQ_CST);
  __atomic_store_n(&lp_impl_subs_current, n ? &n->head : &empty_snap.head, __ATOMIC_SEQ_CST);
  bool refused = lp__abi_refused(); /* code of another ABI reads lp_impl_wanted inline: it stays 0 */
  for (int i = 1; i < 256; i++) {
    uint64_t w = n && !refused ? n->wanted[i] : 0;
    if (LP_IMPL_LOAD_RELAXED(lp_impl_wanted[i]) != w) LP_IMPL_STORE_RELAXED(lp_impl_wanted[i], w);
  }
  lp__levels_set_subs(n && n->wanted[LP_STREAM_LABELS]);
  if (old != &empty_snap) {
    old->retired_next = retired;
    retired = old;
  }
  membarrier_all();
  reclaim();
  return 0;
}

void lp__subs_refused(void) {
  lp__lock(&subs_mu);
  (void)publish(); /* clears what code of another ABI reads inline; a snapshot it cannot make changes nothing */
  lp__unlock(&subs_mu);
}

static bool known_sub(const lp_subscriber_t *s) {
  for (lp_subscriber_t *x = all; x; x = x->next)
    if (x == s) return true;
  return false;
}

int lp__subscriber_create(void *subscriber_data, lp_subscriber_t **out) {
  if (!out) return -EINVAL;
  lp_subscriber_t *s = lp__calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  s->data = subscriber_data;
  lp__lock(&subs_mu);
  s->next = all;
  all = s;
  lp__unlock(&subs_mu);
  *out = s;
  return 0;
}

int lp_subscriber_set_callback(lp_subscriber_t *s, uint8_t stream, uint16_t type, lp_callback_t cb) {
  if (!s || !stream) return -EINVAL;
  int rc = 0;
  lp__lock(&subs_mu);
  if (!known_sub(s)) {
    rc = -EINVAL;
    goto out;
  }
  if (s->enabled) {
    rc = -EBUSY;
    goto out;
  }
  for (uint32_t i = 0; i < s->ncbs; i++)
    if (s->cbs[i].stream == stream && s->cbs[i].type == type) {
      if (cb)
        s->cbs[i].cb = cb;
      else
        s->cbs[i] = s->cbs[--s->ncbs];
      goto out;
    }
  if (!cb) goto out;
  if (s->ncbs == s->capcbs) {
    uint32_t cap = s->capcbs ? s->capcbs * 2 : 8;
    cbent_t *n = lp__realloc(s->cbs, cap * sizeof *n);
    if (!n) {
      rc = -ENOMEM;
      goto out;
    }
    s->cbs = n;
    s->capcbs = cap;
  }
  s->cbs[s->ncbs++] = (cbent_t){stream, type, cb};
out:
  lp__unlock(&subs_mu);
  return rc;
}

int lp_subscriber_set_enabled(lp_subscriber_t *s, int enabled) {
  if (!s) return -EINVAL;
  int rc = 0;
  lp__lock(&subs_mu);
  if (!known_sub(s)) {
    rc = -EINVAL;
  } else if (!!enabled != s->enabled) {
    if (enabled) {
      if (nenabled == MAX_SUBS) {
        rc = -ENOSPC;
        goto out;
      }
      enabled_list[nenabled++] = s;
    } else {
      uint32_t i = 0;
      while (enabled_list[i] != s) i++;
      memmove(&enabled_list[i], &enabled_list[i + 1], (nenabled - i - 1) * sizeof *enabled_list);
      nenabled--;
    }
    rc = publish();
    if (rc == 0) {
      s->enabled = enabled != 0;
    } else if (enabled) { /* undo */
      nenabled--;
    } else {
      enabled_list[nenabled++] = s; /* back, last: the order of the others is kept */
    }
  }
out:
  lp__unlock(&subs_mu);
  return rc;
}

/* Whether a pin of the calling thread holds a snapshot with s. Its own pins: no lock needed. */
static bool own_pins_hold(const sthread_t *st, const lp_subscriber_t *s) {
  if (!st) return false;
  const snap_t *x;
  for (int i = 0; i < LP_STACK_CAPACITY; i++)
    if ((x = hz_load((hazard_t *)&st->pub.label[i], __ATOMIC_RELAXED)) && holds(x, s)) return true;
  for (int i = 0; i < NSCOPES; i++)
    if ((x = hz_load((hazard_t *)&st->scope[i].snap, __ATOMIC_RELAXED)) && holds(x, s)) return true;
  return false;
}

/* Whether any pin holds a snapshot with s. subs_mu held. */
static bool in_use(const lp_subscriber_t *s) {
  snap_t *c = cur_load(__ATOMIC_SEQ_CST);
  if (c && holds(c, s)) return true;
  for (sthread_t *st = sthreads; st; st = st->next) {
    const snap_t *x1 = hz_load(&st->pub.single, __ATOMIC_SEQ_CST), *x2 = hz_load(&st->probe.snap, __ATOMIC_SEQ_CST);
    if ((x1 && holds(x1, s)) || (x2 && holds(x2, s))) return true;
    for (int i = 0; i < LP_STACK_CAPACITY; i++) {
      const snap_t *x = hz_load(&st->pub.label[i], __ATOMIC_SEQ_CST);
      if (x && holds(x, s)) return true;
    }
    for (int i = 0; i < NSCOPES; i++) {
      const snap_t *x = hz_load(&st->scope[i].snap, __ATOMIC_SEQ_CST);
      if (x && holds(x, s)) return true;
    }
  }
  return false;
}

int lp_subscriber_destroy(lp_subscriber_t *s, int64_t timeout_ns) {
  if (!s) return -EINVAL;
  lp__lock(&subs_mu);
  int rc = !known_sub(s) ? -EINVAL : s->enabled ? -EBUSY : 0;
  lp__unlock(&subs_mu);
  if (rc) return rc;
  sthread_t *st = st_real(my_state()) ? my_state() : NULL;
  if (st && (st->pub.guard || own_pins_hold(st, s))) return -EDEADLK;
  uint64_t start = lp__mono_ns();
  long nap = 20000; /* ns; doubles up to 1 ms */
  for (;;) {
    lp__lock(&subs_mu);
    reclaim();
    bool busy = in_use(s);
    if (!busy) {
      /* Unlinked under the same lock that saw it unused: no pin can take it again (it is not current). */
      lp_subscriber_t **pp = &all;
      while (*pp != s) pp = &(*pp)->next;
      *pp = s->next;
    }
    lp__unlock(&subs_mu);
    if (!busy) break;
    uint64_t waited = lp__mono_ns() - start;
    if (timeout_ns >= 0 && waited >= (uint64_t)timeout_ns) return -ETIMEDOUT;
    long sleep_ns = nap;
    if (timeout_ns >= 0 && (uint64_t)timeout_ns - waited < (uint64_t)sleep_ns)
      sleep_ns = (long)((uint64_t)timeout_ns - waited);
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (nap < 1000000) nap *= 2;
  }
  free(s->cbs);
  free(s);
  return 0;
}

/* ---- notifications -------------------------------------------------------------- */

static inline void call_begins(const call_t *c, uint32_t n, pin_t *p, const lp_notification_t *note, bool odd) {
  for (uint32_t i = 0; i < n; i++) {
    lp_callback_t cb = c[i].cb[odd];
    p->slots[c[i].slot] = NULL;
    if (cb) cb(note, c[i].data, &p->slots[c[i].slot]);
  }
}

static inline void call_ends(const call_t *c, uint32_t n, pin_t *p, const lp_notification_t *note) {
  for (uint32_t i = n; i-- > 0;)
    if (c[i].cb[1]) c[i].cb[1](note, c[i].data, &p->slots[c[i].slot]);
}

/*
 * The labels' scope pair: s->head.scope[] has no NULL callback (build() puts a
 * no-op in its place) and the instance slot of scope[i] is slots[i].
 */
static __attribute__((noinline)) void label_begins_loop(const snap_t *s, void **slots, const lp_notification_t *note) {
  const call_t *c = s->head.scope;
  for (uint32_t i = 0, n = s->head.nscope; i < n; i++) {
    slots[i] = NULL;
    c[i].cb[0](note, c[i].data, &slots[i]);
  }
}

static __attribute__((noinline)) void label_ends_loop(const snap_t *s, void **slots, const lp_notification_t *note) {
  const call_t *c = s->head.scope;
  for (uint32_t i = s->head.nscope; i-- > 0;) c[i].cb[1](note, c[i].data, &slots[i]);
}

/* One subscriber, the usual case, straight: the loops are out of line, with the registers they need. */
static inline void label_begins(const snap_t *s, void **slots, const lp_notification_t *note) {
  if (LP_IMPL_LIKELY(s->head.nscope == 1)) {
    slots[0] = NULL;
    s->head.scope[0].cb[0](note, s->head.scope[0].data, &slots[0]);
  } else {
    label_begins_loop(s, slots, note);
  }
}

static inline void label_ends(const snap_t *s, void **slots, const lp_notification_t *note) {
  if (LP_IMPL_LIKELY(s->head.nscope == 1))
    s->head.scope[0].cb[1](note, s->head.scope[0].data, &slots[0]);
  else
    label_ends_loop(s, slots, note);
}

/*
 * One try at pinning s, already read from `current`, in h: returns current
 * as read after the pin, which must be s. When it is not, h may hold s: the
 * caller clears it or pins again.
 */
static inline snap_t *pin_once(hazard_t *h, snap_t *s) {
#if !LP__TSAN
  if (LP_IMPL_LIKELY(__atomic_load_n(&lp_impl_subs_asym, __ATOMIC_RELAXED))) {
    __atomic_store_n(h, &s->head, __ATOMIC_RELAXED);
    atomic_signal_fence(memory_order_seq_cst); /* the writer's membarrier() is the fence */
    return cur_load(__ATOMIC_RELAXED);
  }
#endif
  __atomic_store_n(h, &s->head, __ATOMIC_SEQ_CST);
  return cur_load(__ATOMIC_SEQ_CST);
}

/* Everything out of the ordinary: recorded scopes, new or exited threads, deep stacks, callbacks' own labels. */
static __attribute__((noinline)) uint64_t enter_notify_general(const lp_site_t *site, int manual) {
  lp__thread_t *t = lp__thread_attach();
  if (!t) return LP_IMPL_NOT_PUSHED;
  uint64_t w;
  if (site->level & lp__trace_levels())
    w = lp__trace_begin(t, site, manual); /* records (or drops) and pushes */
  else
    w = lp_impl_push((uintptr_t)site);
  uint32_t depth = (uint32_t)(w & (LP_IMPL_DEPTH_MASK & ~(uint64_t)LP_IMPL_TRACED_MARK));
  if (depth == LP_IMPL_NOT_PUSHED || depth - 1u >= LP_STACK_CAPACITY) return w; /* deep: no notifications */
  if (!(LP_IMPL_LOAD_RELAXED(lp_impl_wanted[LP_STREAM_LABELS]) & LP_IMPL_WANT_BIT(LP_TP_SCOPE_BEGIN))) return w;
  sthread_t *st = st_get();
  if (!st || st->pub.guard) return w;
  uint32_t d = depth - 1;
  snap_t *s = pin_current(&st->pub.label[d]);
  if (LP_IMPL_UNLIKELY(!s || !s->head.nscope)) {
    if (s) unpin(&st->pub.label[d]);
    return w;
  }
  LP_IMPL_STORE_RELEASE(t->hot.frames[d], LP_IMPL_LOAD_RELAXED(t->hot.frames[d]) | LP_IMPL_NOTIFIED);
  lp_notification_t n = {LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, NULL, NULL, site, 0, NULL, st->tid};
  st->pub.guard = 1;
  label_begins(s, st->pub.label_slots[d], &n);
  st->pub.guard = 0;
  return w | LP_IMPL_TRACED_MARK;
}

/*
 * A scope's begin while subscribers listen to labels. The usual case (not
 * recorded, a thread with its pins, room on the stack, not in a callback,
 * the snapshot pinned at the first try) in one function with one test:
 * pin, push the frame already marked, call the begins with the thread's
 * ready-made notification. Anything else goes to enter_notify_general().
 */
uint64_t lp__subs_begin(const lp_site_t *site, int manual) {
  lp_impl_thread_t *t = lp_impl_self;
  sthread_t *st = my_state(); /* unborn_st and gone_st have the guard set */
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  snap_t *s = cur_load(__ATOMIC_ACQUIRE);
  /* A timeline records too (its levels decide there), or the stack is full or the thread new. */
  if (LP_IMPL_UNLIKELY((LP_IMPL_LOAD_RELAXED(t->levels) & LP_IMPL_SUBS_TRACED) || d >= LP_STACK_CAPACITY))
    return enter_notify_general(site, manual);
  if (LP_IMPL_UNLIKELY(st->pub.guard)) return enter_notify_general(site, manual);
  if (LP_IMPL_UNLIKELY(pin_once(&st->pub.label[d], s) != s || !s->head.nscope)) {
    unpin(&st->pub.label[d]);
    return enter_notify_general(site, manual);
  }
  LP_IMPL_STORE_RELEASE(t->frames[d], (uintptr_t)site | LP_IMPL_NOTIFIED);
  w += LP_IMPL_COUNT_ONE + 1;
  LP_IMPL_STORE_RELEASE(t->word, w);
  st->pub.guard = 1; /* first: a signal handler's label from here on reaches nobody, and leaves lbegin alone */
  st->pub.lbegin.site = site;
  label_begins(s, st->pub.label_slots[d], &st->pub.lbegin);
  st->pub.guard = 0;
  return w | LP_IMPL_TRACED_MARK;
}

void lp__subs_end(lp__thread_t *t, uint32_t depth, const lp_site_t *site) {
  (void)t;
  /* A frame marked notified means its begin pinned label[depth] on this thread: the thread has a state of its own. */
  sthread_t *st = my_state();
  if (LP_IMPL_UNLIKELY(!st_real(st) || depth >= LP_STACK_CAPACITY)) return;
  snap_t *s = hz_load(&st->pub.label[depth], __ATOMIC_RELAXED);
  if (LP_IMPL_UNLIKELY(!s)) return;
  lp_notification_t n = {LP_STREAM_LABELS, LP_TP_SCOPE_END, NULL, NULL, site, 0, NULL, st->tid};
  int g = st->pub.guard;
  st->pub.guard = 1; /* ends are owed even inside a callback; what they do reaches nobody */
  label_ends(s, st->pub.label_slots[depth], &n);
  st->pub.guard = g;
  unpin(&st->pub.label[depth]);
}

/*
 * The usual end of a notified scope, outside any callback: the ends with the
 * thread's ready-made notification, the unpin, the pop. h's frame at depth
 * is on top and is the scope's; label[depth] is pinned (gone_st and unborn_st pin nothing).
 */
static inline bool end_direct(lp_impl_thread_t *h, sthread_t *st, uint32_t depth, const lp_site_t *site) {
  snap_t *s = hz_load(&st->pub.label[depth], __ATOMIC_RELAXED);
  if (LP_IMPL_UNLIKELY(!s || st->pub.guard)) return false;
  st->pub.guard = 1;
  st->pub.lend.site = site;
  label_ends(s, st->pub.label_slots[depth], &st->pub.lend);
  st->pub.guard = 0;
  unpin(&st->pub.label[depth]);
  /* Reloaded: the callbacks' own labels moved the change counter. */
  LP_IMPL_STORE_RELEASE(h->word, LP_IMPL_POPPED(LP_IMPL_LOAD_RELAXED(h->word)));
  return true;
}

/* ---- the pseudo-stack's slow end ------------------------------------------------
 * Here, above the timeline, the live trace_marker and stack.c, because it
 * calls all three and the subscribers' ends.
 */

/* ---- layers and phases: the live trace_marker ends the traced frames a heal pops (innermost first) ---- */
static void marker_heal(lp__thread_t *t, uint32_t from, uint32_t to) {
  if (LP_IMPL_LIKELY(lp__marker_fd < 0)) return;
  if (to > LP_STACK_CAPACITY) to = LP_STACK_CAPACITY;
  for (uint32_t k = to; k-- > from;)
    if (LP_IMPL_LOAD_RELAXED(t->hot.frames[k]) & LP_IMPL_TRACED) lp__marker_end(t, k);
}
/* ---- end of layers and phases ---- */

/*
 * A scope that ended at `depth` while the stack was `d` deep did not match:
 * for the profile's note, the label on top then (if its frame is kept), or
 * that its own frame was gone.
 */
static void mismatch_note(const lp__thread_t *t, const lp_site_t *site, uint32_t d, uint32_t depth) {
  const uintptr_t bits = LP_IMPL_TRACED | LP_IMPL_NOTIFIED;
  const lp_site_t *top = NULL;
  if (d > depth && d - 1 < LP_STACK_CAPACITY)
    top = (const lp_site_t *)(LP_IMPL_LOAD_RELAXED(t->hot.frames[d - 1]) & ~bits);
  lp__mismatch_note(site, top, d <= depth);
}

/*
 * The scope whose frame is at `depth` ends, and the top is not its frame.
 * Either labels it did not start are still open above it (a longjmp, a
 * missing LP_END): they go with it. Or its own frame was already ended by a
 * stray LP_END: never go back up, which would expose stale frames. Counted.
 * Returns true if its frame was still there (and is now popped).
 */
static bool heal(lp__thread_t *t, uint32_t depth, const lp_site_t *site) {
  uint64_t w = LP_IMPL_LOAD_RELAXED(t->hot.word);
  uint32_t d = (uint32_t)w & LP_IMPL_DEPTH_MASK;
  lp__bump(&t->mismatched);
  mismatch_note(t, site, d, depth);
  if (d > depth + 1) marker_heal(t, depth + 1, d);
  LP_IMPL_STORE_RELEASE(t->hot.word, lp__with_depth(w, d <= depth ? d : depth));
  return d > depth;
}

/*
 * A scope's end that the inline path could not finish. lp_impl_leave_slow()
 * ends a notified scope directly and comes here otherwise. Out of line, as
 * when it was in a file of its own: lp_impl_leave_slow() keeps the usual
 * end's registers to itself.
 */
static __attribute__((noinline)) void leave_general(const lp_site_t *site, uint64_t word) {
  if ((uint32_t)(word & LP_IMPL_DEPTH_MASK) == LP_IMPL_NOT_PUSHED) return;
  /* Marked: the scope recorded a begin, or its begin reached subscribers; its frame says which. */
  bool marked = (word & LP_IMPL_TRACED_MARK) != 0;
  uint32_t depth = (uint32_t)((word ^ (marked ? LP_IMPL_TRACED_MARK : 0)) & LP_IMPL_DEPTH_MASK) - 1;
  lp__thread_t *t = lp__thread_current();
  if (!t) return; /* the thread has exited: nothing to pop, nothing to record */
  const uintptr_t bits = LP_IMPL_TRACED | LP_IMPL_NOTIFIED;
  uint64_t now = LP_IMPL_LOAD_RELAXED(t->hot.word);
  uint32_t d = (uint32_t)now & LP_IMPL_DEPTH_MASK;
  uintptr_t fr = depth < LP_STACK_CAPACITY && d > depth ? LP_IMPL_LOAD_RELAXED(t->hot.frames[depth]) : 0;
  /* ---- layers and phases: an LP_PHASE_SWITCH replaced it and ended both; pop quietly ---- */
  if (marked && d == depth + 1 && depth < LP_STACK_CAPACITY && lp__switch_frame(fr)) {
    LP_IMPL_STORE_RELEASE(t->hot.word, lp__with_depth(now, depth));
    return;
  }
  /* ---- end of layers and phases ---- */
  bool ours = (fr & ~bits) == (uintptr_t)site && (fr & bits);
  if (marked && d == depth + 1) {
    if (depth < LP_STACK_CAPACITY && !ours) {
      /* A stray LP_END() ended it (and recorded its end), and another label took its depth: not ours to pop. */
      lp__bump(&t->mismatched);
      mismatch_note(t, site, d, depth);
      return;
    }
    /*
     * The usual end of a scope on top whose begin reached subscribers or was
     * recorded, which the recording protocol leaves here when the clock is
     * not the CPU's counter, the live trace_marker hides the room, or the
     * scope is deeper than the frames (its begin recorded, as below): the
     * end callbacks, the pop, the end event. No mistake, nothing to heal.
     */
    if (fr & LP_IMPL_NOTIFIED) lp__subs_end(t, depth, site);
    LP_IMPL_STORE_RELEASE(t->hot.word, LP_IMPL_POPPED(LP_IMPL_LOAD_RELAXED(t->hot.word)));
    if (depth >= LP_STACK_CAPACITY || (fr & LP_IMPL_TRACED)) lp__trace_end(t, (uintptr_t)site, depth);
    return;
  }
  /* Scopes a longjmp skipped, or a missing LP_END left open, end here: their subscribers' ends first. */
  if (d > depth + 1) lp__subs_heal(t, depth + 1, d);
  if (marked && ours && (fr & LP_IMPL_NOTIFIED)) lp__subs_end(t, depth, site);
  /* The end is recorded when the begin was, unless a stray LP_END() already recorded it. */
  bool traced = marked && (depth >= LP_STACK_CAPACITY || !ours || (fr & LP_IMPL_TRACED));
  if (heal(t, depth, site) && traced) lp__trace_end(t, (uintptr_t)site, depth);
}

/*
 * The pseudo-stack's slow end, here so that the usual end of a notified
 * scope is one call from the program: a marked word (its begin reached
 * subscribers, or was recorded), its frame on top and notified, outside any
 * callback. Anything else goes to leave_general().
 */
void lp_impl_leave_slow(const lp_site_t *site, uint64_t word) {
  lp_impl_thread_t *h = lp_impl_self;
  sthread_t *st = my_state();
  uint32_t depth = (uint32_t)((word ^ LP_IMPL_TRACED_MARK) & LP_IMPL_DEPTH_MASK) - 1;
  if (LP_IMPL_LIKELY((word & LP_IMPL_TRACED_MARK) && depth < LP_STACK_CAPACITY &&
                     (LP_IMPL_LOAD_RELAXED(h->word) & LP_IMPL_DEPTH_MASK) == depth + 1 &&
                     LP_IMPL_LOAD_RELAXED(h->frames[depth]) == ((uintptr_t)site | LP_IMPL_NOTIFIED) &&
                     end_direct(h, st, depth, site)))
    return;
  leave_general(site, word);
}

/* The thunks' way here (lib/cold.c), within the library: no PLT, no interposition. */
extern __typeof__(lp_impl_leave_slow) lp__leave_slow __attribute__((alias("lp_impl_leave_slow"), visibility("hidden")));

void lp__subs_heal(lp__thread_t *t, uint32_t from, uint32_t to) {
  if (to > LP_STACK_CAPACITY) to = LP_STACK_CAPACITY;
  for (uint32_t k = to; k-- > from;) {
    uintptr_t fr = LP_IMPL_LOAD_RELAXED(t->hot.frames[k]);
    if (fr & LP_IMPL_NOTIFIED)
      lp__subs_end(t, k, (const lp_site_t *)(fr & ~(uintptr_t)(LP_IMPL_TRACED | LP_IMPL_NOTIFIED)));
  }
}

void lp__subs_end_frame(lp__thread_t *t, uintptr_t tag, uint32_t depth) {
  const lp_site_t *site = (const lp_site_t *)(tag & ~(uintptr_t)(LP_IMPL_TRACED | LP_IMPL_NOTIFIED));
  /* LP_END of a notified, unrecorded frame on top: the direct end. */
  if (LP_IMPL_LIKELY(!(tag & LP_IMPL_TRACED)) && end_direct(&t->hot, my_state(), depth, site)) return;
  lp__subs_end(t, depth, site);
  LP_IMPL_STORE_RELEASE(t->hot.word, LP_IMPL_POPPED(LP_IMPL_LOAD_RELAXED(t->hot.word)));
  if (tag & LP_IMPL_TRACED) lp__trace_end(t, (uintptr_t)site, depth);
}

/* The callbacks of a single notification, each with a fresh NULL slot. */
static __attribute__((noinline)) void single_loop(const call_t *c, uint32_t count, const lp_notification_t *n) {
  for (uint32_t i = 0; i < count; i++) {
    lp_callback_t cb = c[i].cb[n->type & 1u];
    void *slot = NULL;
    if (cb) cb(n, c[i].data, &slot);
  }
}

/* A single notification to whoever has a callback for it. */
static void single(sthread_t *st, const lp_notification_t *n) {
  snap_t *s = pin_current(&st->pub.single);
  if (!s) return;
  const keyent_t *k = lookup(s, pair_key(n->stream, n->type));
  if (k) {
    st->pub.guard = 1;
    single_loop(k->first, k->count, n);
    st->pub.guard = 0;
  }
  unpin(&st->pub.single);
}

void lp_impl_instant_notify(uintptr_t tag) {
  const lp_site_t *site = (const lp_site_t *)(tag & ~(uintptr_t)LP_IMPL_EV_KIND);
  uint32_t tl = lp__trace_levels();
  if (site->level & tl) lp_impl_instant(tag, tl);
  if (!(LP_IMPL_LOAD_RELAXED(lp_impl_wanted[LP_STREAM_LABELS]) & LP_IMPL_WANT_BIT(LP_TP_INSTANT))) return;
  sthread_t *st = st_get();
  if (!st || st->pub.guard) return;
  lp_notification_t n = {LP_STREAM_LABELS, LP_TP_INSTANT, NULL, NULL, site, 0, NULL, st->tid};
  single(st, &n);
}

static __attribute__((noinline)) int notify_slow(uint8_t stream, uint16_t type, const lp_event_t *parent,
                                                 const lp_event_t *event, uint64_t instance, const void *user_data) {
  sthread_t *st = st_get();
  if (!st || st->pub.guard) return 0;
  lp_notification_t n = {stream, type, parent, event, NULL, instance, user_data, st->tid};
  single(st, &n);
  return 0;
}

/* lp_notify's callbacks, st->pub.snote filled in and the guard set: then the guard cleared and the pin dropped. */
int(lp_notify)(uint8_t stream, uint16_t type, const lp_event_t *parent, const lp_event_t *event, uint64_t instance,
               const void *user_data) {
  /* Stream 0 never has a wanted bit: the common case is one load and a test. */
  if (LP_IMPL_LIKELY(!(LP_IMPL_LOAD_RELAXED(lp_impl_wanted[stream]) & LP_IMPL_WANT_BIT(type))))
    return stream ? 0 : -EINVAL;
  return lp_impl_notify_listened(stream, type, parent, event, instance, user_data);
}

/* lp_notify's callbacks, st->pub.snote filled in and the guard set: then the guard cleared and the pin dropped. */
static __attribute__((noinline)) int deliver(sthread_t *st, const call_t *c, uint32_t count, unsigned odd) {
  if (LP_IMPL_LIKELY(count == 1)) {
    lp_callback_t cb = c->cb[odd];
    st->pub.sslot = NULL;
    if (LP_IMPL_LIKELY(cb != NULL)) cb(&st->pub.snote, c->data, &st->pub.sslot);
  } else {
    single_loop(c, count, &st->pub.snote);
  }
  st->pub.guard = 0;
  unpin(&st->pub.single);
  return 0;
}

int lp_impl_notify_listened(uint8_t stream, uint16_t type, const lp_event_t *parent, const lp_event_t *event,
                            uint64_t instance, const void *user_data) {
  if (LP_IMPL_UNLIKELY(!stream)) return -EINVAL;
  /* Someone may listen. The usual case here: a thread with its state, outside callbacks, pinned at the first try. */
  sthread_t *st = my_state(); /* unborn_st and gone_st have the guard set */
  snap_t *s = cur_load(__ATOMIC_ACQUIRE);
  if (LP_IMPL_UNLIKELY(st->pub.guard)) return notify_slow(stream, type, parent, event, instance, user_data);
  hazard_t *p = &st->pub.single;
  if (LP_IMPL_UNLIKELY(pin_once(p, s) != s)) {
    unpin(p);
    return notify_slow(stream, type, parent, event, instance, user_data);
  }
  lp_notification_t *n = &st->pub.snote;
  st->pub.guard = 1; /* first: a signal handler's notification from here on reaches nobody, and leaves snote alone */
  /* Filled in before the lookup, so that the arguments need no register of their own past here. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* stream and type in one store (the byte between them is padding) */
  uint32_t head = (uint32_t)stream | (uint32_t)type << 16;
  memcpy(n, &head, sizeof head);
#else
  n->stream = stream;
  n->type = type;
#endif
  n->parent = parent;
  n->event = event;
  n->instance = instance;
  n->user_data = user_data;
  const keyent_t *k = lookup(s, pair_key(stream, type));
  if (LP_IMPL_UNLIKELY(k == NULL)) {
    st->pub.guard = 0;
    unpin(p);
    return 0;
  }
  /* A call, not inline: this function then calls nothing and saves no register. */
  return deliver(st, k->first, k->count, type & 1u);
}

int lp_impl_notify_wanted_slow(uint8_t stream, uint16_t type) {
  sthread_t *st = st_get();
  if (!st || st->pub.guard) return 0;
  snap_t *s = pin_current(&st->probe.snap);
  if (!s) return 0;
  int want = 0;
  const keyent_t *k = lookup(s, pair_key(stream, type));
  if (k)
    for (uint32_t i = 0; i < k->count && !want; i++)
      want = k->first[i].cb[type & 1u] != NULL;
  unpin(&st->probe.snap);
  return want;
}

int32_t lp_impl_nscope_begin(uint8_t stream, uint16_t type, const lp_event_t *parent, const lp_event_t *event,
                             uint64_t instance, const void *user_data) {
  if (!stream) return -1;
  sthread_t *st = st_get();
  if (!st || st->pub.guard || st->used == UINT64_MAX) return -1;
  int i = __builtin_ctzll(~st->used);
  pin_t *p = &st->scope[i];
  snap_t *s = pin_current(&p->snap);
  if (!s) return -1;
  const keyent_t *k = lookup(s, pair_key(stream, type));
  if (!k) {
    unpin(&p->snap);
    return -1;
  }
  st->used |= (uint64_t)1 << i;
  st->info[i] = (scope_info_t){stream, type, parent, event, instance, user_data};
  lp_notification_t n = {stream, type, parent, event, NULL, instance, user_data, st->tid};
  st->pub.guard = 1;
  call_begins(k->first, k->count, p, &n, (type & 1u) != 0);
  st->pub.guard = 0;
  return i;
}

void lp_impl_nscope_end(int32_t i) {
  sthread_t *st = my_state();
  if (!st_real(st) || i < 0 || i >= NSCOPES || !(st->used >> i & 1)) return;
  pin_t *p = &st->scope[i];
  snap_t *s = hz_load(&p->snap, __ATOMIC_RELAXED);
  const scope_info_t *in = &st->info[i];
  lp_notification_t n = {in->stream, (uint16_t)(in->type | 1u), in->parent, in->event, NULL, in->instance,
                         in->user_data, st->tid};
  const keyent_t *k = s ? lookup(s, pair_key(in->stream, in->type)) : NULL;
  if (k) {
    int g = st->pub.guard;
    st->pub.guard = 1;
    call_ends(k->first, k->count, p, &n);
    st->pub.guard = g;
  }
  unpin(&p->snap);
  st->used &= ~((uint64_t)1 << i);
}

/* ---- LABELPROF_SUBSCRIBERS ---------------------------------------------------------- */

/* At exit: every loaded library's finish for every stream still initialized. */
static void finish_at_exit(void) {
  if (lp__forked_child()) return; /* the parent's tools report for the parent */
  const char *names[256];
  uint32_t n = 0;
  lp__lock(&streams_mu);
  for (uint32_t i = 1; i <= nstreams; i++)
    if (streams[i].initialized) {
      streams[i].initialized = false;
      names[n++] = streams[i].name;
    }
  uint32_t nl = atomic_load(&nlibs);
  lp__unlock(&streams_mu);
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t l = 0; l < nl; l++) libs[l].finish(names[i]);
}

/* Loads one path; replays the inits of the streams initialized so far, oldest first. */
static void load_one(const char *path) {
  uint32_t n = atomic_load(&nlibs);
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(libs[i].path, path) == 0) return; /* the same path twice loads once */
  if (n == MAX_LIBS) {
    lp__warn("LABELPROF_SUBSCRIBERS: more than %d subscribers; %s skipped", MAX_LIBS, path);
    return;
  }
  /*
   * An object takes the lp_* functions from the program's global scope. They
   * are not there when this library is linked in statically and the program
   * does not export them (no -rdynamic), or when it came in a library loaded
   * RTLD_LOCAL. (RTLD_DEFAULT would search this library's own scope too: the
   * program's handle searches the global one only.) Any of this file's
   * lp_* functions tells.
   */
  void *ours = (void *)(uintptr_t)lp_subscriber_destroy;
  void *prog = dlopen(NULL, RTLD_NOW);
  bool global = prog && dlsym(prog, "lp_subscriber_destroy") == ours;
  if (prog) dlclose(prog);
  (void)dlerror(); /* a failed probe leaves nothing pending for the program */
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    lp__warn("LABELPROF_SUBSCRIBERS: cannot load %s (%s); skipped%s", path, e ? e : "unknown error",
         global ? ""
                : " (labelprof's functions are not in the program's global scope: link a program that has "
                  "liblabelprof.a linked in with -rdynamic; where labelprof comes in a library loaded RTLD_LOCAL, "
                  "link the object with -llabelprof)");
    return;
  }
  for (uint32_t i = 0; i < n; i++)
    if (libs[i].handle == h) return; /* another path to an object already loaded */
  /* Its own liblabelprof.so, where the program's labelprof is not global: a second library nothing records into. */
  void *theirs = dlsym(h, "lp_subscriber_destroy");
  (void)dlerror();
  if (!global && theirs && theirs != ours) {
    lp__warn("LABELPROF_SUBSCRIBERS: %s brings a second copy of labelprof (it is linked with -llabelprof, and the "
         "program's labelprof is not in its global scope: liblabelprof.a linked in without -rdynamic); it stays "
         "loaded but sees none of the program's labels: link it without -llabelprof",
         path);
    return;
  }
  init_fn init = (init_fn)(uintptr_t)dlsym(h, "labelprof_subscriber_init");
  finish_fn finish = (finish_fn)(uintptr_t)dlsym(h, "labelprof_subscriber_finish");
  if (!init || !finish) {
    /* Left loaded: it is never unloaded, and its constructors have run. */
    lp__warn("LABELPROF_SUBSCRIBERS: %s does not export %s; skipped", path,
         !init && !finish ? "labelprof_subscriber_init and labelprof_subscriber_finish"
         : !init          ? "labelprof_subscriber_init"
                          : "labelprof_subscriber_finish");
    return;
  }
  char *copy = lp__strdup(path);
  if (!copy) {
    lp__warn("LABELPROF_SUBSCRIBERS: out of memory; %s skipped", path);
    return;
  }
  libs[n] = (lib_t){copy, h, init, finish};
  atomic_store(&nlibs, n + 1);
  if (n == 0 && atexit(finish_at_exit) != 0) lp__warn("LABELPROF_SUBSCRIBERS: atexit failed; no finish at exit");
  /* Its inits for the streams already initialized, in the order they were. */
  uint64_t done_order = 0;
  for (;;) {
    uint64_t best = UINT64_MAX;
    uint32_t which = 0, major = 0, minor = 0;
    char *version = NULL;
    lp__lock(&streams_mu);
    for (uint32_t i = 1; i <= nstreams; i++)
      if (streams[i].initialized && streams[i].init_order > done_order && streams[i].init_order < best)
        best = streams[i].init_order, which = i;
    if (which) {
      done_order = best;
      major = streams[which].major;
      minor = streams[which].minor;
      version = lp__strdup(streams[which].version ? streams[which].version : "");
    }
    const char *name = which ? streams[which].name : NULL;
    lp__unlock(&streams_mu);
    if (!which) break;
    run_inits(n, n + 1, name, major, minor, version ? version : "");
    free(version);
  }
}

void lp__subs_env_load(void) {
  const char *v = secure_getenv("LABELPROF_SUBSCRIBERS");
  if (!v || !*v) return;
  char *list = lp__strdup(v);
  if (!list) {
    lp__warn("LABELPROF_SUBSCRIBERS: out of memory; no subscriber loaded");
    return;
  }
  for (char *save = NULL, *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    while (*item == ' ' || *item == '\t') item++;
    size_t len = strlen(item);
    while (len && (item[len - 1] == ' ' || item[len - 1] == '\t')) item[--len] = '\0';
    if (*item) load_one(item);
  }
  free(list);
}

void lp__subs_init(void) {
  uint8_t id = 0;
  /* First: the labels stream is id 1. */
  if (register_stream(LP_STREAM_LABELS_NAME, &id) != 0 || id != LP_STREAM_LABELS)
    lp__warn("could not register the labels stream");
  lp__lock(&streams_mu);
  streams[LP_STREAM_LABELS].initialized = true;
  streams[LP_STREAM_LABELS].major = LABELPROF_VERSION_MAJOR;
  streams[LP_STREAM_LABELS].minor = LABELPROF_VERSION_MINOR;
  streams[LP_STREAM_LABELS].version = lp__strdup(LABELPROF_VERSION_STRING);
  streams[LP_STREAM_LABELS].init_order = ++init_seq;
  lp__unlock(&streams_mu);
#if !LP__TSAN
  /* Readers pin without a fence when the writer can make every running thread execute one. */
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
    __atomic_store_n(&lp_impl_subs_asym, 1, __ATOMIC_SEQ_CST);
#endif
}

/* ---- fork ------------------------------------------------------------------------ */

void lp__subs_atfork_prepare(void) {
  lp__lock(&streams_mu);
  lp__lock(&events_mu);
  lp__lock(&subs_mu);
}

void lp__subs_atfork_parent(void) {
  lp__unlock(&subs_mu);
  lp__unlock(&events_mu);
  lp__unlock(&streams_mu);
}

/* The child keeps the subscribers and the forking thread's pins; the other threads do not exist there. */
void lp__subs_atfork_child(void) {
  sthread_t *self = st_real(my_state()) ? my_state() : NULL;
  for (sthread_t *st = sthreads, *next; st; st = next) {
    next = st->next;
    if (st != self) {
      free(st->events);
      free(st);
    }
  }
  sthreads = self;
  if (self) self->next = self->prev = NULL;
#if !LP__TSAN
  /* The registration may not be the child's: register again, or fence on both sides from now on. */
  if (__atomic_load_n(&lp_impl_subs_asym, __ATOMIC_SEQ_CST) &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0)
    __atomic_store_n(&lp_impl_subs_asym, 0, __ATOMIC_SEQ_CST);
#endif
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  subs_mu = fresh;
  events_mu = fresh;
  streams_mu = fresh;
}
