/*
 * nvtx.c: liblabelprof_nvtx.so, an NVTX injection library. Run a program
 * that uses NVTX (v3 headers, or libnvToolsExt) with
 *     NVTX_INJECTION64_PATH=$(pkg-config --variable=nvtx_injection labelprof)
 * and its ranges become labels: push/pop ranges on the calling thread's
 * pseudo-stack (the sampled tree, the timeline at LP_LEVEL_ANNOTATIONS,
 * subscribers), marks as instants, start/end ranges as slices on a track
 * per domain, thread names as lane names. Domains are categories;
 * LABELPROF_NVTX_DOMAINS=a,b keeps only those ("nvtx" is the default
 * domain).
 */
#define _GNU_SOURCE
#include "annot.h"

#include <pthread.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The part of NVTX's injection interface this library depends on, declared
 * from NVTX's documented ABI (nvtx3/nvtxDetail/nvtxTypes.h and
 * nvtx3/nvToolsExt.h, nvToolsExtSync.h, NVTX version 2/3): the loader calls
 * the exported InitializeInjectionNvtx2(getExportTable); the export table
 * with id 1 (NVTX_ETID_CALLBACKS) is { size_t struct_size; int
 * (*GetModuleFunctionTable)(module, NvtxFunctionPointer ***table, unsigned
 * *size) }; a module's table is indexed by callback id (slot 0 unused) and
 * each slot points at the function pointer the tool overwrites.
 */
typedef void (*nvtx_fn_t)(void);
typedef const void *(*nvtx_get_export_table_t)(uint32_t id);
typedef struct nvtx_callbacks_table {
  size_t struct_size;
  int (*get_module_function_table)(int module, nvtx_fn_t ***out_table, unsigned int *out_size);
} nvtx_callbacks_table_t;

enum { NVTX_ETID_CALLBACKS = 1 };
enum { MODULE_CORE = 1, MODULE_CORE2 = 5, MODULE_SYNC = 6 };
enum { /* NvtxCallbackIdCore */
  CORE_MarkEx = 1, CORE_MarkA, CORE_MarkW, CORE_RangeStartEx, CORE_RangeStartA, CORE_RangeStartW, CORE_RangeEnd,
  CORE_RangePushEx, CORE_RangePushA, CORE_RangePushW, CORE_RangePop, CORE_NameCategoryA, CORE_NameCategoryW,
  CORE_NameOsThreadA, CORE_NameOsThreadW
};
enum { /* NvtxCallbackIdCore2 */
  CORE2_DomainMarkEx = 1, CORE2_DomainRangeStartEx, CORE2_DomainRangeEnd, CORE2_DomainRangePushEx,
  CORE2_DomainRangePop, CORE2_DomainResourceCreate, CORE2_DomainResourceDestroy, CORE2_DomainNameCategoryA,
  CORE2_DomainNameCategoryW, CORE2_DomainRegisterStringA, CORE2_DomainRegisterStringW, CORE2_DomainCreateA,
  CORE2_DomainCreateW, CORE2_DomainDestroy, CORE2_Initialize
};
enum { /* NvtxCallbackIdSync */
  SYNC_UserCreate = 1, SYNC_UserDestroy, SYNC_UserAcquireStart, SYNC_UserAcquireFailed, SYNC_UserAcquireSuccess,
  SYNC_UserReleasing
};
enum { MESSAGE_UNKNOWN = 0, MESSAGE_ASCII = 1, MESSAGE_UNICODE = 2, MESSAGE_REGISTERED = 3 };

/* nvtxEventAttributes_v2 (version 2 or 3, size at least up to the message). */
typedef struct nvtx_event_attributes {
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type;
  int32_t reserved0;
  union {
    uint64_t u64;
    double d;
  } payload;
  int32_t message_type;
  union {
    const char *ascii;
    const wchar_t *unicode;
    const void *registered;
  } message;
} nvtx_event_attributes_t;

/* nvtxSyncUserAttributes_v0. */
typedef struct nvtx_sync_attributes {
  uint16_t version;
  uint16_t size;
  int32_t message_type;
  union {
    const char *ascii;
    const wchar_t *unicode;
    const void *registered;
  } message;
} nvtx_sync_attributes_t;

/* ---- labelprof's side ---------------------------------------------------- */

/* What nvtxDomainCreate returns (nvtxDomainHandle_t is opaque to the program). */
typedef struct domain {
  const char *category; /* interned */
  bool kept;
  _Atomic lp_track_t track; /* for start/end ranges; -1 until first used */
} domain_t;

/* A registered string (nvtxStringHandle_t): its site, interned once, in its domain's category. */
typedef struct reg_string {
  const lp_site_t *site;
} reg_string_t;

/* A sync user (nvtxSyncUser_t): its four instants. */
typedef struct sync_user {
  const lp_site_t *sites[4];
} sync_user_t;

static domain_t default_domain = {NULL, true, -1};
static _Atomic uint64_t unmatched_pops;
static _Atomic uint64_t range_id_next = 1;
static __thread annot_thread_t self __attribute__((tls_model("initial-exec")));

/* ---- start/end ranges: open ones by id, under a mutex (they may end on another thread) ---- */
#define RANGE_BUCKETS 1024
#define RANGES_MAX 65536
typedef struct range {
  uint64_t id, start_ns;
  const lp_site_t *site;
  domain_t *domain;
  struct range *next;
} range_t;
static pthread_mutex_t ranges_mu = PTHREAD_MUTEX_INITIALIZER;
static range_t *ranges[RANGE_BUCKETS];
static size_t nranges;
static _Atomic uint64_t ranges_dropped;

static domain_t *dom(const void *d) { return d ? (domain_t *)d : &default_domain; }

static domain_t *domain_make(const char *name) {
  domain_t *d = annot_alloc(sizeof *d);
  if (!d) return NULL;
  d->category = lp_impl_category(name ? name : "(unnamed domain)");
  d->kept = annot_domain_kept("LABELPROF_NVTX_DOMAINS", d->category);
  atomic_init(&d->track, -1);
  return d;
}

/* The site an event's attributes name, or NULL when the domain is filtered out. */
static const lp_site_t *attr_site(domain_t *d, const nvtx_event_attributes_t *a) {
  char wide[512];
  if (!d->kept) return NULL;
  if (!a || a->size < offsetof(nvtx_event_attributes_t, message) + sizeof a->message)
    return lp_impl_site_make("(no message)", d->category);
  switch (a->message_type) {
  case MESSAGE_ASCII:
    return lp_impl_site_make(a->message.ascii, d->category);
  case MESSAGE_UNICODE:
    return lp_impl_site_make(annot_wide(a->message.unicode, wide, sizeof wide), d->category);
  case MESSAGE_REGISTERED:
    if (a->message.registered) return ((const reg_string_t *)a->message.registered)->site;
    return lp_impl_site_make("(null)", d->category);
  default:
    return lp_impl_site_make("(no message)", d->category);
  }
}

static int push(domain_t *d, const lp_site_t *site) { return annot_push(&self, d->kept ? site : NULL); }

static void mark(const lp_site_t *site) {
  if (site) annot_instant(site);
}

static uint64_t range_start(domain_t *d, const lp_site_t *site) {
  uint64_t id = atomic_fetch_add_explicit(&range_id_next, 1, memory_order_relaxed);
  if (!site || !(LP_IMPL_LOAD_RELAXED(lp_impl_levels) & LP_LEVEL_ANNOTATIONS)) return id;
  range_t *r = malloc(sizeof *r);
  if (!r) {
    atomic_fetch_add_explicit(&ranges_dropped, 1, memory_order_relaxed);
    return id;
  }
  *r = (range_t){id, lp_now_ns(), site, d, NULL};
  pthread_mutex_lock(&ranges_mu);
  if (nranges >= RANGES_MAX) {
    pthread_mutex_unlock(&ranges_mu);
    free(r);
    atomic_fetch_add_explicit(&ranges_dropped, 1, memory_order_relaxed);
    return id;
  }
  r->next = ranges[id % RANGE_BUCKETS];
  ranges[id % RANGE_BUCKETS] = r;
  nranges++;
  pthread_mutex_unlock(&ranges_mu);
  return id;
}

static void range_end(uint64_t id) {
  uint64_t now = lp_now_ns();
  range_t *r = NULL;
  pthread_mutex_lock(&ranges_mu);
  for (range_t **p = &ranges[id % RANGE_BUCKETS]; *p; p = &(*p)->next)
    if ((*p)->id == id) {
      r = *p;
      *p = r->next;
      nranges--;
      break;
    }
  pthread_mutex_unlock(&ranges_mu);
  if (!r) return; /* not recorded (no timeline, filtered) or ended twice */
  lp_track_t t = atomic_load_explicit(&r->domain->track, memory_order_acquire);
  if (t < 0) {
    char name[128];
    snprintf(name, sizeof name, "NVTX ranges: %s", r->domain->category);
    lp_track_t made = lp_track_create(name); /* two threads may both make one: the first stored wins */
    if (made >= 0 && atomic_compare_exchange_strong(&r->domain->track, &t, made)) t = made;
  }
  if (t >= 0) lp_track_complete(t, r->site->label, r->start_ns, now >= r->start_ns ? now - r->start_ns : 0);
  free(r);
}

static void name_thread(uint32_t tid, const char *name) {
  if (name && tid == (uint32_t)syscall(SYS_gettid)) lp_thread_set_name(name);
}

/* ---- CORE ---------------------------------------------------------------- */

static void MarkEx(const nvtx_event_attributes_t *a) { mark(attr_site(&default_domain, a)); }
static void MarkA(const char *m) {
  if (default_domain.kept) mark(lp_impl_site_make(m, default_domain.category));
}
static void MarkW(const wchar_t *m) {
  char b[512];
  MarkA(annot_wide(m, b, sizeof b));
}
static uint64_t RangeStartEx(const nvtx_event_attributes_t *a) {
  return range_start(&default_domain, attr_site(&default_domain, a));
}
static uint64_t RangeStartA(const char *m) {
  return range_start(&default_domain, default_domain.kept ? lp_impl_site_make(m, default_domain.category) : NULL);
}
static uint64_t RangeStartW(const wchar_t *m) {
  char b[512];
  return RangeStartA(annot_wide(m, b, sizeof b));
}
static void RangeEnd(uint64_t id) { range_end(id); }
static int RangePushEx(const nvtx_event_attributes_t *a) {
  return push(&default_domain, attr_site(&default_domain, a));
}
static int RangePushA(const char *m) {
  if (__builtin_expect(!default_domain.kept, 0)) return annot_push(&self, NULL);
  return annot_push_text(&self, m, default_domain.category);
}
static int RangePushW(const wchar_t *m) {
  char b[512];
  return RangePushA(annot_wide(m, b, sizeof b));
}
static int RangePop(void) { return annot_pop(&self, &unmatched_pops); }
static void NameCategoryA(uint32_t c, const char *n) { (void)c, (void)n; }
static void NameCategoryW(uint32_t c, const wchar_t *n) { (void)c, (void)n; }
static void NameOsThreadA(uint32_t tid, const char *name) { name_thread(tid, name); }
static void NameOsThreadW(uint32_t tid, const wchar_t *name) {
  char b[128];
  name_thread(tid, annot_wide(name, b, sizeof b));
}

/* ---- CORE2: domains and registered strings -------------------------------- */

static void DomainMarkEx(const void *d, const nvtx_event_attributes_t *a) { mark(attr_site(dom(d), a)); }
static uint64_t DomainRangeStartEx(const void *d, const nvtx_event_attributes_t *a) {
  return range_start(dom(d), attr_site(dom(d), a));
}
static void DomainRangeEnd(const void *d, uint64_t id) {
  (void)d;
  range_end(id);
}
static int DomainRangePushEx(const void *d, const nvtx_event_attributes_t *a) {
  return push(dom(d), attr_site(dom(d), a));
}
static int DomainRangePop(const void *d) {
  (void)d;
  return annot_pop(&self, &unmatched_pops);
}
static void *DomainResourceCreate(const void *d, void *attribs) {
  (void)d, (void)attribs;
  return NULL;
}
static void DomainResourceDestroy(void *r) { (void)r; }
static void DomainNameCategoryA(const void *d, uint32_t c, const char *n) { (void)d, (void)c, (void)n; }
static void DomainNameCategoryW(const void *d, uint32_t c, const wchar_t *n) { (void)d, (void)c, (void)n; }
static const void *DomainRegisterStringA(const void *d, const char *s) {
  reg_string_t *r = annot_alloc(sizeof *r); /* kept for the process, like the site */
  if (!r) return NULL;
  r->site = lp_impl_site_make(s, dom(d)->category);
  return r;
}
static const void *DomainRegisterStringW(const void *d, const wchar_t *s) {
  char b[512];
  return DomainRegisterStringA(d, annot_wide(s, b, sizeof b));
}
static void *DomainCreateA(const char *name) { return domain_make(name); }
static void *DomainCreateW(const wchar_t *name) {
  char b[256];
  return domain_make(annot_wide(name, b, sizeof b));
}
/* Domains are kept: registered strings and ranges still open may point at them. */
static void DomainDestroy(void *d) { (void)d; }
static void Initialize(const void *reserved) { (void)reserved; }

/* ---- SYNC: user synchronisation objects, as instants ---------------------- */

static void *SyncUserCreate(const void *d, const nvtx_sync_attributes_t *a) {
  static const char *const what[4] = {"acquire start", "acquire failed", "acquired", "releasing"};
  domain_t *dm = dom(d);
  sync_user_t *u = annot_alloc(sizeof *u);
  char wide[256], text[512];
  const char *name = "(sync)";
  if (!u) return NULL;
  if (a && a->size >= offsetof(nvtx_sync_attributes_t, message) + sizeof a->message) {
    if (a->message_type == MESSAGE_ASCII && a->message.ascii) name = a->message.ascii;
    if (a->message_type == MESSAGE_UNICODE && a->message.unicode)
      name = annot_wide(a->message.unicode, wide, sizeof wide);
    if (a->message_type == MESSAGE_REGISTERED && a->message.registered)
      name = ((const reg_string_t *)a->message.registered)->site->label;
  }
  for (int i = 0; i < 4; i++) {
    snprintf(text, sizeof text, "%s: %s", name, what[i]);
    u->sites[i] = dm->kept ? lp_impl_site_make(text, dm->category) : NULL;
  }
  return u;
}
static void SyncUserDestroy(void *u) { (void)u; /* its sites may still be in buffers; the struct is small */ }
static void sync_event(void *u, int i) {
  if (u) mark(((sync_user_t *)u)->sites[i]);
}
static void SyncUserAcquireStart(void *u) { sync_event(u, 0); }
static void SyncUserAcquireFailed(void *u) { sync_event(u, 1); }
static void SyncUserAcquireSuccess(void *u) { sync_event(u, 2); }
static void SyncUserReleasing(void *u) { sync_event(u, 3); }

/* ---- the entry point ------------------------------------------------------- */

#define FN(f) ((nvtx_fn_t)(void (*)(void))(f))

static void fill(const nvtx_callbacks_table_t *cb, int module, const nvtx_fn_t *mine, unsigned n) {
  nvtx_fn_t **table = NULL;
  unsigned size = 0;
  if (!cb->get_module_function_table(module, &table, &size) || !table) return;
  for (unsigned i = 1; i < n && i <= size; i++)
    if (mine[i] && table[i]) *table[i] = mine[i];
}

static void report(void) {
  uint64_t u = atomic_load(&unmatched_pops), dr = atomic_load(&ranges_dropped), limit;
  uint64_t over = lp_impl_names_overflow(&limit);
  if (u) fprintf(stderr, "labelprof nvtx: %llu range pops with no range open (ignored)\n", (unsigned long long)u);
  if (dr) fprintf(stderr, "labelprof nvtx: %llu start/end ranges not recorded (over %d open)\n",
                  (unsigned long long)dr, RANGES_MAX);
  if (over)
    fprintf(stderr, "labelprof nvtx: %llu ranges named past the bound of %llu distinct names (LABELPROF_MAX_NAMES) "
                    "were labelled \"(other names)\"\n",
            (unsigned long long)over, (unsigned long long)limit);
}

ANNOT_EXPORT int InitializeInjectionNvtx2(nvtx_get_export_table_t get_export_table);
ANNOT_EXPORT int InitializeInjectionNvtx2(nvtx_get_export_table_t get_export_table) {
  const nvtx_callbacks_table_t *cb;
  if (!get_export_table) return 0;
  cb = (const nvtx_callbacks_table_t *)get_export_table(NVTX_ETID_CALLBACKS);
  if (!cb || cb->struct_size < sizeof *cb || !cb->get_module_function_table) return 0;
  default_domain.category = lp_impl_category("nvtx");
  default_domain.kept = annot_domain_kept("LABELPROF_NVTX_DOMAINS", "nvtx");

  nvtx_fn_t core[CORE_NameOsThreadW + 1] = {0};
  core[CORE_MarkEx] = FN(MarkEx);
  core[CORE_MarkA] = FN(MarkA);
  core[CORE_MarkW] = FN(MarkW);
  core[CORE_RangeStartEx] = FN(RangeStartEx);
  core[CORE_RangeStartA] = FN(RangeStartA);
  core[CORE_RangeStartW] = FN(RangeStartW);
  core[CORE_RangeEnd] = FN(RangeEnd);
  core[CORE_RangePushEx] = FN(RangePushEx);
  core[CORE_RangePushA] = FN(RangePushA);
  core[CORE_RangePushW] = FN(RangePushW);
  core[CORE_RangePop] = FN(RangePop);
  core[CORE_NameCategoryA] = FN(NameCategoryA);
  core[CORE_NameCategoryW] = FN(NameCategoryW);
  core[CORE_NameOsThreadA] = FN(NameOsThreadA);
  core[CORE_NameOsThreadW] = FN(NameOsThreadW);
  fill(cb, MODULE_CORE, core, sizeof core / sizeof core[0]);

  nvtx_fn_t core2[CORE2_Initialize + 1] = {0};
  core2[CORE2_DomainMarkEx] = FN(DomainMarkEx);
  core2[CORE2_DomainRangeStartEx] = FN(DomainRangeStartEx);
  core2[CORE2_DomainRangeEnd] = FN(DomainRangeEnd);
  core2[CORE2_DomainRangePushEx] = FN(DomainRangePushEx);
  core2[CORE2_DomainRangePop] = FN(DomainRangePop);
  core2[CORE2_DomainResourceCreate] = FN(DomainResourceCreate);
  core2[CORE2_DomainResourceDestroy] = FN(DomainResourceDestroy);
  core2[CORE2_DomainNameCategoryA] = FN(DomainNameCategoryA);
  core2[CORE2_DomainNameCategoryW] = FN(DomainNameCategoryW);
  core2[CORE2_DomainRegisterStringA] = FN(DomainRegisterStringA);
  core2[CORE2_DomainRegisterStringW] = FN(DomainRegisterStringW);
  core2[CORE2_DomainCreateA] = FN(DomainCreateA);
  core2[CORE2_DomainCreateW] = FN(DomainCreateW);
  core2[CORE2_DomainDestroy] = FN(DomainDestroy);
  core2[CORE2_Initialize] = FN(Initialize);
  fill(cb, MODULE_CORE2, core2, sizeof core2 / sizeof core2[0]);

  nvtx_fn_t sync[SYNC_UserReleasing + 1] = {0};
  sync[SYNC_UserCreate] = FN(SyncUserCreate);
  sync[SYNC_UserDestroy] = FN(SyncUserDestroy);
  sync[SYNC_UserAcquireStart] = FN(SyncUserAcquireStart);
  sync[SYNC_UserAcquireFailed] = FN(SyncUserAcquireFailed);
  sync[SYNC_UserAcquireSuccess] = FN(SyncUserAcquireSuccess);
  sync[SYNC_UserReleasing] = FN(SyncUserReleasing);
  fill(cb, MODULE_SYNC, sync, sizeof sync / sizeof sync[0]);

  static atomic_flag reported = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&reported)) atexit(report);
  return 1;
}
