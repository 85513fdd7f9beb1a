/*
 * annot.h: what labelprof's NVTX and ITT libraries share: ranges on the
 * calling thread's pseudo-stack, domain filters, wide strings.
 *
 * Each library keeps, per thread, the depth of its own ranges (NVTX also
 * which of them were filtered out and pushed nothing), so that a pop knows
 * whether to end a label, and a pop with no range of its own open is counted
 * and ignored instead of ending one of the program's LP_BEGIN labels. The
 * labels themselves go through liblabelprof's out-of-line entry points
 * (lib/annot_entry.h).
 */
#ifndef LABELPROF_ANNOT_H
#define LABELPROF_ANNOT_H

#include <labelprof.h>

#include "annot_entry.h" /* lib/: the out-of-line label entry points */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define ANNOT_EXPORT __attribute__((visibility("default")))
#define ANNOT_SKIP_DEPTH 256 /* ranges this deep or deeper are never filtered out */

typedef struct annot_thread {
  uint32_t depth;                   /* this library's ranges open on the thread */
  uint64_t skip[ANNOT_SKIP_DEPTH / 64]; /* bit d: the range at depth d pushed nothing */
} annot_thread_t;

/*
 * Handles the program is given (domains, strings, counters) are never freed:
 * the APIs have no end for some of them, and sites and events may point at
 * them. They stay reachable from this list, so that leak checkers see them
 * as kept, which they are.
 */
typedef struct annot_kept {
  struct annot_kept *_Atomic next;
  _Alignas(16) unsigned char data[];
} annot_kept_t;
static annot_kept_t *_Atomic annot_kept_list;

/* Zeroed memory of n bytes, kept for the process; NULL if there is none. */
static inline void *annot_alloc(size_t n) {
  annot_kept_t *k = calloc(1, sizeof *k + n);
  if (!k) return NULL;
  annot_kept_t *head = atomic_load_explicit(&annot_kept_list, memory_order_relaxed);
  do
    atomic_store_explicit(&k->next, head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&annot_kept_list, &head, k, memory_order_release,
                                                memory_order_relaxed));
  return k->data;
}

/* Counts a range opened at the thread's next depth, which pushed a label or not; returns its depth. */
static inline uint32_t annot_open(annot_thread_t *t, bool pushed) {
  uint32_t d = t->depth++;
  if (d < ANNOT_SKIP_DEPTH) {
    uint64_t bit = (uint64_t)1 << (d & 63);
    if (pushed)
      t->skip[d >> 6] &= ~bit;
    else
      t->skip[d >> 6] |= bit;
  }
  return d;
}

/* Opens a range: site NULL means filtered out (nothing pushed). Returns its zero-based depth. */
static inline int annot_push(annot_thread_t *t, const lp_site_t *site) {
  uint32_t d = annot_open(t, site != NULL);
  if (site)
    lp_impl_annot_begin(site);
  else if (d >= ANNOT_SKIP_DEPTH) /* too deep to remember: a label, so that the pop has one to end */
    lp_impl_annot_begin(lp_impl_site_make("(filtered domain, deep)", NULL));
  return (int)d;
}

/* Opens a range named by text in category (never filtered out). Returns its zero-based depth. */
static inline int annot_push_text(annot_thread_t *t, const char *text, const char *category) {
  uint32_t d = annot_open(t, true);
  lp_impl_annot_push(text, category);
  return (int)d;
}

/* Closes the innermost range. Returns its depth, or -1 (counted in *unmatched) when none is open. */
static inline int annot_pop(annot_thread_t *t, _Atomic uint64_t *unmatched) {
  if (__builtin_expect(t->depth == 0, 0)) {
    atomic_fetch_add_explicit(unmatched, 1, memory_order_relaxed);
    return -1;
  }
  uint32_t d = --t->depth;
  if (d < ANNOT_SKIP_DEPTH && (t->skip[d >> 6] >> (d & 63) & 1)) return (int)d;
  lp_impl_annot_end();
  return (int)d;
}

/* A point in time on the calling thread's lane, when its level is recorded. */
static inline void annot_instant(const lp_site_t *site) {
  uint32_t lv = LP_IMPL_LOAD_RELAXED(lp_impl_levels);
  if (site->level & lv) lp_impl_instant((uintptr_t)site | LP_IMPL_EV_INSTANT, lv);
}

/*
 * Whether a domain named name is kept by the filter in variable var: a
 * comma-separated list of domain names; unset or empty keeps every domain.
 */
static inline bool annot_domain_kept(const char *var, const char *name) {
  const char *v = getenv(var);
  if (!v || !*v) return true;
  size_t n = strlen(name);
  for (const char *p = v; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && memcmp(p, name, n) == 0) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}

/* A wide string as UTF-8 into buf (cut to fit; unconvertible characters become '?'). */
static inline const char *annot_wide(const wchar_t *w, char *buf, size_t size) {
  if (!w) return NULL;
  size_t o = 0;
  for (; *w && o + 5 < size; w++) {
    uint32_t c = (uint32_t)*w;
    if (c < 0x80) {
      buf[o++] = (char)c;
    } else if (c < 0x800) {
      buf[o++] = (char)(0xc0 | c >> 6);
      buf[o++] = (char)(0x80 | (c & 0x3f));
    } else if (c < 0x10000 && (c < 0xd800 || c > 0xdfff)) {
      buf[o++] = (char)(0xe0 | c >> 12);
      buf[o++] = (char)(0x80 | (c >> 6 & 0x3f));
      buf[o++] = (char)(0x80 | (c & 0x3f));
    } else if (c >= 0x10000 && c < 0x110000) {
      buf[o++] = (char)(0xf0 | c >> 18);
      buf[o++] = (char)(0x80 | (c >> 12 & 0x3f));
      buf[o++] = (char)(0x80 | (c >> 6 & 0x3f));
      buf[o++] = (char)(0x80 | (c & 0x3f));
    } else {
      buf[o++] = '?';
    }
  }
  buf[o] = '\0';
  return buf;
}

#endif /* LABELPROF_ANNOT_H */
