/*
 * attrib.c: time attribution to layers and phases (see attrib.h).
 *
 * Data flow: marks arrive per thread in file order and build one call tree
 * per thread (at_begin / at_end). At the end of a run, at_compute rewrites
 * each tree as AOSP's parser does (drop ignored and dummy nodes, move
 * one-time initialization and [SUB] scopes, insert missing application
 * scopes), checks the nesting rules, sums the self time of each scope into
 * S[app phase][layer][phase], and turns the sums into the total and self
 * time tables. Every floating-point sum is done in the reference's order
 * (children in list order, threads in tracked order), so the printed digits
 * match.
 *
 * Recursion depth is bounded: a begin deeper than AT_MAX_DEPTH is an error.
 */
#include "config.h"

#include "attrib.h"
#include "ftrace.h" /* lp_st_has */

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT_MAX_DEPTH 10000
#define CHUNK 4096

typedef struct node {
  double start, end;
  int layer, phase, eff, app, prev_app;
  unsigned char subtract, dummy, pushed_app, bad_name, removed;
  signed char name;
  long line;
  struct node *parent;
  struct node **kids;
  unsigned nkids, cap;
} node_t;

typedef struct ivlist {
  double *s, *e;
  size_t n, cap;
} ivlist_t;

typedef struct chunk {
  struct chunk *next;
  size_t used;
  node_t nodes[CHUNK];
} chunk_t;

typedef struct thr {
  long long tid;
  int driver;
  node_t root;
  node_t *top;
  size_t depth;
  double S[AT_NAPP][AT_NLAYERS_KNOWN][AT_NPHASES_KNOWN];
  ivlist_t iv[AT_NAPP][AT_NNAMES];
  long la_pe_count[AT_NAPP];
} thr_t;

struct at_ctx {
  int compat;
  thr_t **th;
  size_t nth, cap;
  int cur_app;
  chunk_t *chunks;
  char **lnames, **pnames; /* unknown codes, AT_N*_KNOWN + i */
  int nl, np;
  size_t bytes_threads, bytes_run; /* held by the threads, and by the current run's trees and intervals */
};

static const char *const LCODES[AT_NLAYERS_KNOWN] = {"LA", "LR", "LI", "LD", "LC", "LU", "LO", "LX"};
static const char *const PCODES[AT_NPHASES_KNOWN] = {"PU", "PI", "PP", "PC", "PE", "PT", "PIO",
                                                     "PTR", "PCO", "PR", "PO", "PWU", "PBM"};
const int at_tphases[AT_TPH] = {AT_PO, AT_PI, AT_PP, AT_PC, AT_PE, AT_PT, AT_PIO, AT_PTR, AT_PCO, AT_PR};
static const char *const NAMES[AT_NNAMES] = {
    "ANeuralNetworksExecution_startCompute", "ANeuralNetworksEvent_wait",
    "ANeuralNetworksExecution_create", "ANeuralNetworksExecution_free",
    "ANeuralNetworksEvent_create", "ANeuralNetworksEvent_free",
    "ANeuralNetworksExecution_setInput", "ANeuralNetworksExecution_setOutput",
    "ANeuralNetworksExecution_setInputFromMemory", "ANeuralNetworksExecution_setOutputFromMemory",
    "HIDL::IPreparedModel::execute::server", "HIDL::IExecutionCallback::notify::client"};

static void seterr(at_error_t *err, long line, long line2, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void seterr(at_error_t *err, long line, long line2, const char *fmt, ...) {
  if (!err) return;
  va_list ap;
  va_start(ap, fmt);
  err->line = line;
  err->line2 = line2;
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
}

const char *at_layer_code(int l) { return l >= 0 && l < AT_NLAYERS_KNOWN ? LCODES[l] : "?"; }
const char *at_phase_code(int p) { return p >= 0 && p < AT_NPHASES_KNOWN ? PCODES[p] : p == AT_NONE ? "none" : "?"; }

static const char *lname(const at_ctx_t *c, int l) {
  return l < AT_NLAYERS_KNOWN ? LCODES[l] : c->lnames[l - AT_NLAYERS_KNOWN];
}
static const char *pname(const at_ctx_t *c, int p) {
  return p == AT_NONE ? "(none)" : p < AT_NPHASES_KNOWN ? PCODES[p] : c->pnames[p - AT_NPHASES_KNOWN];
}

/* Interns a code; -1 when out of memory. */
static int intern(char ***tab, int *n, const char *const *known, int nknown, const char *s, size_t len) {
  for (int i = 0; i < nknown; i++)
    if (strlen(known[i]) == len && memcmp(known[i], s, len) == 0) return i;
  for (int i = 0; i < *n; i++)
    if (strlen((*tab)[i]) == len && memcmp((*tab)[i], s, len) == 0) return nknown + i;
  if (*n >= 4096) return -1;
  char **nt = realloc(*tab, (size_t)(*n + 1) * sizeof *nt);
  if (!nt) return -1;
  *tab = nt;
  char *d = malloc(len + 1);
  if (!d) return -1;
  memcpy(d, s, len);
  d[len] = 0;
  nt[(*n)++] = d;
  return nknown + *n - 1;
}

at_ctx_t *at_new(int compat) {
  at_ctx_t *c = calloc(1, sizeof *c);
  if (c) c->compat = compat;
  return c;
}

static void free_nodes(at_ctx_t *c) {
  for (chunk_t *k = c->chunks, *nx; k; k = nx) {
    nx = k->next;
    for (size_t i = 0; i < k->used; i++) free(k->nodes[i].kids);
    free(k);
  }
  c->chunks = NULL;
  c->bytes_run = 0;
}

static void thr_clear(thr_t *t) {
  free(t->root.kids);
  memset(&t->root, 0, sizeof t->root);
  t->root.layer = AT_LX;
  t->root.phase = AT_PU;
  t->root.eff = AT_NONE;
  t->root.name = -1;
  t->top = &t->root;
  t->depth = 0;
  memset(t->S, 0, sizeof t->S);
  for (int a = 0; a < AT_NAPP; a++)
    for (int n = 0; n < AT_NNAMES; n++) {
      free(t->iv[a][n].s);
      free(t->iv[a][n].e);
      memset(&t->iv[a][n], 0, sizeof t->iv[a][n]);
    }
  memset(t->la_pe_count, 0, sizeof t->la_pe_count);
}

void at_reset(at_ctx_t *c) {
  for (size_t i = 0; i < c->nth; i++) thr_clear(c->th[i]);
  free_nodes(c);
  c->cur_app = AT_APO;
}

void at_free(at_ctx_t *c) {
  if (!c) return;
  at_reset(c);
  for (size_t i = 0; i < c->nth; i++) free(c->th[i]);
  free(c->th);
  for (int i = 0; i < c->nl; i++) free(c->lnames[i]);
  for (int i = 0; i < c->np; i++) free(c->pnames[i]);
  free(c->lnames);
  free(c->pnames);
  free(c);
}

int at_thread(at_ctx_t *c, long long tid, int driver) {
  if (c->nth == c->cap) {
    size_t nc = c->cap ? c->cap * 2 : 16;
    thr_t **n = realloc(c->th, nc * sizeof *n);
    if (!n) return -1;
    c->th = n;
    c->cap = nc;
  }
  thr_t *t = calloc(1, sizeof *t);
  if (!t) return -1;
  c->bytes_threads += sizeof *t + sizeof t;
  t->tid = tid;
  t->driver = driver;
  thr_clear(t);
  c->th[c->nth] = t;
  return (int)c->nth++;
}

size_t at_nthreads(const at_ctx_t *c) { return c->nth; }

size_t at_bytes(const at_ctx_t *c) { return c->bytes_threads + c->bytes_run; }

static node_t *alloc_node(at_ctx_t *c) {
  if (!c->chunks || c->chunks->used == CHUNK) {
    chunk_t *k = malloc(sizeof *k);
    if (!k) return NULL;
    c->bytes_run += sizeof *k + CHUNK * 2 * sizeof(node_t *); /* and its nodes' places in their parents' lists */
    k->next = c->chunks;
    k->used = 0;
    c->chunks = k;
  }
  node_t *n = &c->chunks->nodes[c->chunks->used++];
  memset(n, 0, sizeof *n);
  n->name = -1;
  n->eff = AT_NONE;
  return n;
}

static int add_kid(node_t *p, node_t *k) {
  if (p->nkids == p->cap) {
    unsigned nc = p->cap ? p->cap * 2 : 2;
    node_t **n = realloc(p->kids, nc * sizeof *n);
    if (!n) return -1;
    p->kids = n;
    p->cap = nc;
  }
  p->kids[p->nkids++] = k;
  k->parent = p;
  return 0;
}

static int iv_add(ivlist_t *l, double s, double e) {
  if (l->n == l->cap) {
    size_t nc = l->cap ? l->cap * 2 : 8;
    double *ns = realloc(l->s, nc * sizeof *ns);
    if (!ns) return -1;
    l->s = ns;
    double *ne = realloc(l->e, nc * sizeof *ne);
    if (!ne) return -1;
    l->e = ne;
    l->cap = nc;
  }
  l->s[l->n] = s;
  l->e[l->n] = e;
  l->n++;
  return 0;
}


/* Python's s.replace(a, b) into a new buffer; *outlen set. NULL when out of memory. */
static char *replace_all(const char *s, size_t n, const char *a, const char *b, size_t *outlen) {
  size_t la = strlen(a), lb = strlen(b);
  size_t cnt = 0;
  for (const char *p = s; (p = memmem(p, (size_t)(s + n - p), a, la)); p += la) cnt++;
  size_t ol = n - cnt * la + cnt * lb;
  char *o = malloc(ol + 1);
  if (!o) return NULL;
  char *w = o;
  const char *p = s, *q;
  while ((q = memmem(p, (size_t)(s + n - p), a, la))) {
    memcpy(w, p, (size_t)(q - p));
    w += q - p;
    memcpy(w, b, lb);
    w += lb;
    p = q + la;
  }
  memcpy(w, p, (size_t)(s + n - p));
  w += s + n - p;
  *w = 0;
  *outlen = ol;
  return o;
}

static int isdig(char ch) { return ch >= '0' && ch <= '9'; }

/*
 * The tag of a begin mark, as AOSP's B\|\d+\|.*\[([^]]+)\]\[?([^]])\]? finds
 * it: after the first "B|<digits>|", the last "[...]" (non-empty, no ']')
 * followed by a character other than ']'. Returns 1 with tag and tl set.
 */
static int find_tag(const char *m, size_t n, const char **tag, size_t *tl) {
  size_t r = (size_t)-1;
  for (size_t i = 0; i + 2 < n; i++) {
    if (m[i] != 'B' || m[i + 1] != '|' || !isdig(m[i + 2])) continue;
    size_t d = i + 2;
    while (d < n && isdig(m[d])) d++;
    if (d < n && m[d] == '|') {
      r = d + 1;
      break;
    }
  }
  if (r == (size_t)-1) return 0;
  for (size_t j = n; j-- > r;) {
    if (m[j] != '[') continue;
    const char *q = memchr(m + j + 1, ']', n - j - 1);
    if (!q || q == m + j + 1) continue;
    size_t qi = (size_t)(q - m);
    if (qi + 1 >= n || m[qi + 1] == ']') continue;
    *tag = m + j + 1;
    *tl = qi - j - 1;
    return 1;
  }
  return 0;
}

/* Section 2.6: the interval key's name, or -1 (not one section 7 uses), -2 (AOSP fails on it). */
static int name_of(const char *m, size_t n) {
  const char *b1 = memchr(m, '|', n);
  if (!b1) return -2;
  const char *b2 = memchr(b1 + 1, '|', (size_t)(m + n - b1 - 1));
  if (!b2) return -2;
  const char *f = b2 + 1;
  const char *b3 = memchr(f, '|', (size_t)(m + n - f));
  size_t fl = (size_t)((b3 ? b3 : m + n) - f);
  char buf[128];
  size_t bl;
  if (lp_st_has(f, fl, "[NN_")) {
    size_t l1, l2;
    char *a = NULL, *b = NULL;
    char s1[512], s2[512];
    if (fl < sizeof s1) {
      /* the two replaces in a row, on the stack */
      l1 = 0;
      for (size_t i = 0; i < fl;) {
        if (fl - i >= 5 && memcmp(f + i, "[SUB]", 5) == 0) {
          i += 5;
          continue;
        }
        s1[l1++] = f[i++];
      }
      l2 = 0;
      for (size_t i = 0; i < l1;) {
        if (l1 - i >= 4 && memcmp(s1 + i, "[SW]", 4) == 0) {
          i += 4;
          continue;
        }
        s2[l2++] = s1[i++];
      }
      b = s2;
    } else {
      a = replace_all(f, fl, "[SUB]", "", &l1);
      if (!a) return -1;
      b = replace_all(a, l1, "[SW]", "", &l2);
      free(a);
      if (!b) return -1;
    }
    const char *c1 = memchr(b, ']', l2);
    if (!c1) {
      if (b != s2) free(b);
      return -2;
    }
    const char *c2 = memchr(c1 + 1, ']', (size_t)(b + l2 - c1 - 1));
    const char *s = c1 + 1, *e = c2 ? c2 : b + l2;
    bl = 0;
    int toolong = 0;
    for (const char *p = s; p < e; p++) {
      if (*p == '[') continue;
      if (bl + 1 >= sizeof buf) {
        toolong = 1;
        break;
      }
      buf[bl++] = *p;
    }
    if (b != s2) free(b);
    if (toolong) return -1;
  } else {
    if (fl >= sizeof buf) return -1;
    memcpy(buf, f, fl);
    bl = fl;
  }
  for (int i = 0; i < AT_NNAMES; i++)
    if (strlen(NAMES[i]) == bl && memcmp(NAMES[i], buf, bl) == 0) return i;
  return -1;
}

static int do_end(at_ctx_t *c, thr_t *t, double ts, long line, at_error_t *err) {
  node_t *n = t->top;
  if (n == &t->root) {
    seterr(err, line, 0, "unmatched end: an E with no open B on thread %lld", t->tid);
    return -1;
  }
  n->end = ts;
  t->top = n->parent;
  t->depth--;
  if (n->pushed_app && !c->compat) c->cur_app = n->prev_app;
  if (!n->dummy && c->compat) {
    if (n->bad_name) {
      seterr(err, line, n->line,
             "unreadable begin mark: the B this E closes has no third |-field or an NNAPI tag without ']'");
      return -1;
    }
    if (n->name >= 0) {
      if (iv_add(&t->iv[n->app][(int)n->name], n->start * 1000, ts * 1000) < 0) {
        seterr(err, line, 0, "out of memory");
        return -1;
      }
      c->bytes_run += 4 * sizeof(double); /* the lists double: at most twice what they hold */
    }
  }
  return 0;
}

int at_end(at_ctx_t *c, int th, double t, long line, at_error_t *err) {
  return do_end(c, c->th[th], t, line, err);
}

static int push(thr_t *t, node_t *n, long line, at_error_t *err) {
  if (t->depth >= AT_MAX_DEPTH) {
    seterr(err, line, 0, "nesting deeper than %d scopes on thread %lld", AT_MAX_DEPTH, t->tid);
    return -1;
  }
  if (add_kid(t->top, n) < 0) {
    seterr(err, line, 0, "out of memory");
    return -1;
  }
  t->top = n;
  t->depth++;
  return 0;
}

static int in_sub(int parent, int p) {
  switch (parent) {
    case AT_PE: return p == AT_PIO || p == AT_PTR || p == AT_PCO || p == AT_PR;
    case AT_PO: return p == AT_PWU || p == AT_PBM || p == AT_PI || p == AT_PP || p == AT_PC || p == AT_PE || p == AT_PT;
    case AT_PWU:
    case AT_PBM: return p == AT_PE;
    default: return 0;
  }
}
static int pe_set(int p) { return p == AT_PE || in_sub(AT_PE, p); }

/* Pushes a scope (section 3's begin after the mark is read). nm: a section 7 name, -1 none, -2 unreadable. */
static int push_scope(at_ctx_t *c, thr_t *t, double ts, int layer, int phase, int subtract, int nm, long line,
                      at_error_t *err) {
  node_t *nd = alloc_node(c);
  if (!nd) {
    seterr(err, line, 0, "out of memory");
    return -1;
  }
  if (layer == AT_LA && (phase == AT_PWU || phase == AT_PBM)) {
    nd->pushed_app = 1;
    nd->prev_app = c->cur_app;
    c->cur_app = phase == AT_PWU ? AT_APWU : AT_APBM;
  }
  if (layer == AT_LA && phase == AT_PE) t->la_pe_count[c->cur_app]++;
  nd->start = ts;
  nd->layer = layer;
  nd->phase = phase;
  nd->app = c->cur_app;
  nd->subtract = (unsigned char)subtract;
  nd->line = line;
  if (nm == -2)
    nd->bad_name = 1;
  else
    nd->name = (signed char)nm;
  return push(t, nd, line, err);
}

int at_begin_codes(at_ctx_t *c, int th, double ts, int layer, int phase, int subtract, long line, at_error_t *err) {
  if (layer < 0 || layer >= AT_NLAYERS_KNOWN || phase < 0 || phase >= AT_NPHASES_KNOWN) {
    seterr(err, line, 0, "unknown layer or phase");
    return -1;
  }
  return push_scope(c, c->th[th], ts, layer, phase, subtract, -1, line, err);
}

int at_begin(at_ctx_t *c, int th, double ts, const char *mark0, size_t len0, long line, at_error_t *err) {
  thr_t *t = c->th[th];
  char *own = NULL;
  const char *m = mark0;
  size_t n = len0;
  int rc = -1;
  /* 2.3: rewrites of the raw mark */
  if (c->compat) {
    if (lp_st_has(m, n, "ANeuralNetworksEvent_free") || lp_st_has(m, n, "ANeuralNetworksExecution_free"))
      own = replace_all(m, n, "_PT", "_PE", &n);
    else if (lp_st_has(m, n, "getSupportedExtensions"))
      own = replace_all(m, n, "_PC", "_PI", &n);
    else if (lp_st_has(m, n, "[SW][NN_LA_PR]executeWithCompilation"))
      own = replace_all(m, n, "[SW]", "", &n);
    else
      goto nocopy;
    if (!own) {
      seterr(err, line, 0, "out of memory");
      return -1;
    }
    m = own;
  }
nocopy:
  if (lp_st_has(m, n, "[SW]")) {
    if (t->top == &t->root) {
      seterr(err, line, 0, "switch with nothing open: a [SW] mark must follow an open B on the same thread");
      goto out;
    }
    if (do_end(c, t, ts, line, err) < 0) goto out;
    node_t *d = alloc_node(c);
    if (!d) {
      seterr(err, line, 0, "out of memory");
      goto out;
    }
    d->dummy = 1;
    d->start = ts;
    d->layer = AT_LX;
    d->phase = AT_PU;
    d->app = c->cur_app;
    d->line = line;
    if (push(t, d, line, err) < 0) goto out;
  }
  int subtract = lp_st_has(m, n, "[SUB]");
  const char *tag;
  size_t tl;
  int layer, phase;
  if (find_tag(m, n, &tag, &tl)) {
    const char *u1 = memchr(tag, '_', tl);
    const char *u2 = u1 ? memchr(u1 + 1, '_', (size_t)(tag + tl - u1 - 1)) : NULL;
    if (!u1 || !u2 || memchr(u2 + 1, '_', (size_t)(tag + tl - u2 - 1))) {
      seterr(err, line, 0, "bad tag [%.*s]: a tag reads [NN_<layer>_<phase>] (three parts split by '_')",
             (int)(tl > 60 ? 60 : tl), tag);
      goto out;
    }
    const char *ls = u1 + 1;
    size_t ll = (size_t)(u2 - ls);
    const char *ps = u2 + 1;
    size_t pl = (size_t)(tag + tl - ps);
    char *rl = NULL;
    if (c->compat) {
      /* 2.5: a driver process has no CPU fallback; elsewhere "driver" code is the CPU's */
      rl = t->driver ? replace_all(ls, ll, "LC", "LD", &ll) : replace_all(ls, ll, "LD", "LC", &ll);
      if (!rl) {
        seterr(err, line, 0, "out of memory");
        goto out;
      }
      ls = rl;
    }
    layer = intern(&c->lnames, &c->nl, LCODES, AT_NLAYERS_KNOWN, ls, ll);
    phase = intern(&c->pnames, &c->np, PCODES, AT_NPHASES_KNOWN, ps, pl);
    free(rl);
    if (layer < 0 || phase < 0) {
      seterr(err, line, 0, "out of memory (or more than 4096 distinct layer or phase codes)");
      goto out;
    }
  } else if (!c->compat) {
    layer = AT_LX;
    phase = AT_PU;
  } else {
    /* 2.4: HIDL names */
    if (lp_st_has(m, n, "::client"))
      layer = lp_st_has(m, n, "notify") ? AT_LX : AT_LI;
    else if (lp_st_has(m, n, "::server"))
      layer = lp_st_has(m, n, "notify") ? AT_LX : AT_LD;
    else if (lp_st_has(m, n, "::passthrough"))
      layer = AT_LI;
    else if (lp_st_has(m, n, "getCapabilities") || lp_st_has(m, n, "getSupportedOperations"))
      layer = AT_LD;
    else if (!lp_st_has(m, n, "HIDL"))
      layer = AT_LX;
    else {
      seterr(err, line, 0, "unknown HIDL mark: a HIDL name must end in ::client, ::server or ::passthrough");
      goto out;
    }
    if (lp_st_has(m, n, "IAllocator"))
      phase = AT_PU;
    else if (lp_st_has(m, n, "getCapabilities"))
      phase = AT_PI;
    else if (lp_st_has(m, n, "prepareModel") || lp_st_has(m, n, "getSupportedOperations"))
      phase = AT_PC;
    else if (lp_st_has(m, n, "IPreparedModelCallback"))
      phase = AT_PC;
    else if (lp_st_has(m, n, "execute") || lp_st_has(m, n, "IExecutionCallback"))
      phase = AT_PE;
    else
      phase = AT_PI;
    if (layer == AT_LD && !t->driver) layer = AT_LC;
  }
  {
    int nm = c->compat ? name_of(m, n) : -1;
    if (push_scope(c, t, ts, layer, phase, subtract, nm, line, err) < 0) goto out;
  }
  rc = 0;
out:
  free(own);
  return rc;
}

int at_incomplete(const at_ctx_t *c) {
  for (size_t i = 0; i < c->nth; i++)
    if (c->th[i]->top != &c->th[i]->root) return 1;
  return 0;
}

/* ---- normalisation ------------------------------------------------------- */

typedef struct vec {
  node_t **v;
  size_t n, cap;
} vec_t;

static int vpush(vec_t *v, node_t *x) {
  if (v->n == v->cap) {
    size_t nc = v->cap ? v->cap * 2 : 64;
    node_t **nv = realloc(v->v, nc * sizeof *nv);
    if (!nv) return -1;
    v->v = nv;
    v->cap = nc;
  }
  v->v[v->n++] = x;
  return 0;
}

/* Pre-order list of the nodes under root (root excluded). */
static int preorder(node_t *root, vec_t *out) {
  vec_t st = {0};
  out->n = 0;
  for (unsigned i = root->nkids; i-- > 0;)
    if (vpush(&st, root->kids[i]) < 0) goto oom;
  while (st.n) {
    node_t *x = st.v[--st.n];
    if (vpush(out, x) < 0) goto oom;
    for (unsigned i = x->nkids; i-- > 0;)
      if (vpush(&st, x->kids[i]) < 0) goto oom;
  }
  free(st.v);
  return 0;
oom:
  free(st.v);
  return -1;
}

/*
 * Removes x from its parent's children and appends x's children to that list
 * (4.1). The slot is only marked here: compact() drops marked slots in one
 * pass, which keeps the order eager removal gives without a search and a
 * memmove per node (a run's top level can hold many thousands of children).
 */
static int remove_node(node_t *x) {
  node_t *p = x->parent;
  x->removed = 1;
  for (unsigned k = 0; k < x->nkids; k++)
    if (add_kid(p, x->kids[k]) < 0) return -1;
  x->nkids = 0;
  return 0;
}

static void compact(node_t *root, vec_t *pre) {
  for (size_t i = 0; i <= pre->n; i++) {
    node_t *n = i < pre->n ? pre->v[i] : root;
    if (n->removed) continue;
    unsigned w = 0;
    for (unsigned k = 0; k < n->nkids; k++)
      if (!n->kids[k]->removed) n->kids[w++] = n->kids[k];
    n->nkids = w;
  }
}

static double elapsed(const node_t *n) { return (n->end - n->start) * 1000; }

static int is_root(const node_t *n) { return n->parent == NULL; }

static int detail(const node_t *n) {
  const node_t *p = n->parent;
  if (is_root(n) || !p || is_root(p)) return 0;
  return n->layer == p->layer && !in_sub(p->eff, n->eff) && !(n->eff == AT_PI && p->eff != AT_PI) && !n->subtract;
}

static double subtracted(const node_t *n) {
  if (detail(n)) {
    double s = 0;
    for (unsigned i = 0; i < n->nkids; i++) s += subtracted(n->kids[i]);
    return s;
  }
  return n->subtract ? elapsed(n) : 0.0;
}

static double own_time(const node_t *n) {
  double t = elapsed(n);
  for (unsigned i = 0; i < n->nkids; i++) t -= subtracted(n->kids[i]);
  return t;
}

static void set_eff(vec_t *pre) {
  for (size_t i = 0; i < pre->n; i++) {
    node_t *n = pre->v[i];
    n->eff = n->phase == AT_PU ? n->parent->eff : n->phase;
  }
}

static const char *layer_word(const at_ctx_t *c, int l) {
  static const char *const w[] = {"application", "runtime", "IPC", "driver", "CPU", "utility", "other", "ignored"};
  return l < AT_NLAYERS_KNOWN ? w[l] : lname(c, l);
}
static const char *phase_word(const at_ctx_t *c, int p) {
  static const char *const w[] = {"unspecified", "initialization", "preparation", "compilation", "execution",
                                  "termination", "I/O", "transformation", "computation", "results",
                                  "overall", "warmup", "benchmark"};
  return p == AT_NONE ? "none" : p < AT_NPHASES_KNOWN ? w[p] : pname(c, p);
}

static int normalise(at_ctx_t *c, thr_t *t, at_error_t *err) {
  vec_t pre = {0}, sel = {0};
  int rc = -1;
  node_t *root = &t->root;
  root->parent = NULL;
  root->eff = AT_NONE;
  /* 4.1: drop ignored nodes, then dummies */
  for (int pass = 0; pass < 2; pass++) {
    if (preorder(root, &pre) < 0) goto oom;
    int any = 0;
    for (size_t i = 0; i < pre.n; i++) {
      node_t *x = pre.v[i];
      if (pass == 0 ? (x->layer == AT_LX && !x->dummy) : x->dummy) {
        if (remove_node(x) < 0) goto oom;
        any = 1;
      }
    }
    if (any) compact(root, &pre);
  }
  if (preorder(root, &pre) < 0) goto oom;
  set_eff(&pre);
  /* 4.2: relocation, flags taken before any move */
  sel.n = 0;
  char *kind = malloc(pre.n + 1);
  if (!kind) goto oom;
  for (size_t i = 0; i < pre.n; i++) {
    node_t *x = pre.v[i], *p = x->parent;
    kind[i] = 0;
    if (x->subtract)
      kind[i] = 'a';
    else if (x->eff == AT_PI && p->eff != AT_PI)
      kind[i] = 'b';
    else if (!is_root(p) && p->layer == AT_LA && (x->layer == AT_LR || x->layer == AT_LI) && p->eff != x->eff &&
             p->eff != AT_PO && !pe_set(x->eff))
      kind[i] = 'c';
  }
  for (size_t i = 0; i < pre.n; i++) {
    if (!kind[i]) continue;
    node_t *x = pre.v[i], *target = x->parent;
    int copy = 1;
    if (kind[i] == 'a') {
      while ((target->layer != x->layer || detail(target)) && !is_root(target)) target = target->parent;
      /* Clean mode: a same-layer caller already holds this time; a copy would count it twice. */
      if (!c->compat && !is_root(target)) copy = 0;
    } else if (kind[i] == 'b') {
      while (!is_root(target)) target = target->parent;
    } else {
      target = target->parent;
    }
    if (!is_root(target)) target = target->parent;
    if (copy) {
      node_t *cp = alloc_node(c);
      if (!cp) {
        free(kind);
        goto oom;
      }
      cp->start = x->start;
      cp->end = x->end;
      cp->layer = x->layer;
      cp->app = x->app;
      cp->phase = cp->eff = x->eff;
      cp->line = x->line;
      if (add_kid(target, cp) < 0) {
        free(kind);
        goto oom;
      }
    }
    x->subtract = 1;
  }
  free(kind);
  /* 4.3: a missing application scope around a runtime/IPC scope of another phase */
  if (preorder(root, &pre) < 0) goto oom;
  sel.n = 0;
  for (size_t i = 0; i < pre.n; i++) {
    node_t *x = pre.v[i], *p = x->parent;
    if (!is_root(p) && !detail(x) && !x->subtract && (x->layer == AT_LR || x->layer == AT_LI) && p->layer == AT_LA &&
        p->eff != AT_PO && p->eff != x->eff && !pe_set(x->eff))
      if (vpush(&sel, x) < 0) goto oom;
  }
  for (size_t i = 0; i < sel.n; i++) {
    node_t *x = sel.v[i], *p = x->parent;
    node_t *la = alloc_node(c);
    if (!la) goto oom;
    la->layer = AT_LA;
    la->phase = la->eff = x->eff;
    la->app = x->app;
    la->start = x->start;
    la->end = x->start + own_time(x) / 1000;
    la->line = x->line;
    la->parent = p;
    unsigned k = 0;
    while (k < p->nkids && p->kids[k] != x) k++;
    if (k < p->nkids) p->kids[k] = la;
    if (add_kid(la, x) < 0) goto oom;
  }
  /* 5: validation */
  if (preorder(root, &pre) < 0) goto oom;
  for (size_t i = 0; i < pre.n; i++) {
    node_t *x = pre.v[i], *p = x->parent;
    if (is_root(p) && x->eff == AT_NONE) {
      seterr(err, x->line, 0, "top-level scope without a phase: [%s_PU] is only allowed inside a scope with a phase",
             lname(c, x->layer));
      goto out;
    }
    int pe = p->eff, e = x->eff;
    int phase_ok = pe == AT_NONE || e == pe || e == AT_PI || in_sub(pe, e) || (in_sub(AT_PE, e) && in_sub(pe, AT_PE)) ||
                   x->subtract;
    int pl = p->layer, l = x->layer;
    int layer_ok = is_root(p) || l == AT_LU || l == pl || (pl == AT_LA && l == AT_LR) ||
                   (pl == AT_LR && (l == AT_LI || l == AT_LC)) || (pl == AT_LI && l == AT_LD) || x->subtract;
    if (!phase_ok) {
      seterr(err, x->line, p->line,
             "nesting violation: phase %s (%s) may not be nested in phase %s (%s); allowed are the same phase, "
             "initialization, a subphase, or a [SUB] scope",
             phase_word(c, e), pname(c, e), phase_word(c, pe), pname(c, pe));
      goto out;
    }
    if (!layer_ok) {
      seterr(err, x->line, p->line,
             "nesting violation: layer %s (%s) may not be called from layer %s (%s); allowed are the same layer, "
             "application -> runtime -> IPC -> driver, runtime -> CPU, utility anywhere, or a [SUB] scope",
             layer_word(c, l), lname(c, l), layer_word(c, pl), lname(c, pl));
      goto out;
    }
  }
  rc = 0;
  goto out;
oom:
  seterr(err, 0, 0, "out of memory");
out:
  free(pre.v);
  free(sel.v);
  return rc;
}

/* 6: self time per (app phase, layer, phase) */
static void accumulate(thr_t *t, node_t *n, int in_pe[AT_NLAYERS_KNOWN]) {
  int L = n->layer, P = n->eff;
  if (!detail(n) && !n->subtract && L < AT_NLAYERS_KNOWN && P >= 0 && P < AT_NPHASES_KNOWN) {
    double o = own_time(n);
    t->S[n->app][L][P] += o;
    if (in_sub(AT_PE, P) && in_pe[L] == 0) t->S[n->app][L][AT_PE] += o;
  }
  int bump = P == AT_PE && L < AT_NLAYERS_KNOWN;
  if (bump) in_pe[L]++;
  for (unsigned i = 0; i < n->nkids; i++) accumulate(t, n->kids[i], in_pe);
  if (bump) in_pe[L]--;
}

/* 7.1: the runtime's execution time from the asynchronous API's intervals */
static int runtime_exec(const thr_t *t, int ap, double *out, at_error_t *err) {
  const ivlist_t *sc = &t->iv[ap][AT_N_STARTCOMPUTE], *w = &t->iv[ap][AT_N_EVENT_WAIT];
  if (w->n < sc->n) {
    seterr(err, 0, 0,
           "execution without its wait: thread %lld has %zu ANeuralNetworksExecution_startCompute but %zu "
           "ANeuralNetworksEvent_wait",
           t->tid, sc->n, w->n);
    return -1;
  }
  double s = 0;
  for (size_t i = 0; i < sc->n; i++) s += w->e[i] - sc->s[i];
  for (int k = AT_N_EXEC_CREATE; k <= AT_N_SET_OUTPUT_MEM; k++)
    for (size_t i = 0; i < t->iv[ap][k].n; i++) s += t->iv[ap][k].e[i] - t->iv[ap][k].s[i];
  *out = s;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* 7.2: the driver's execution time, from the server's start to the callback's start */
static int driver_exec(const at_ctx_t *c, int ap, double *out, at_error_t *err) {
  size_t nb = 0, ne = 0;
  for (size_t i = 0; i < c->nth; i++) {
    nb += c->th[i]->iv[ap][AT_N_EXECUTE_SERVER].n;
    ne += c->th[i]->iv[ap][AT_N_NOTIFY_CLIENT].n;
  }
  if (nb != ne) {
    seterr(err, 0, 0,
           "driver executions unmatched: %zu HIDL::IPreparedModel::execute::server but %zu "
           "HIDL::IExecutionCallback::notify::client",
           nb, ne);
    return -1;
  }
  *out = 0;
  if (!nb) return 0;
  double *b = malloc(nb * sizeof *b), *e = malloc(ne * sizeof *e);
  if (!b || !e) {
    free(b);
    free(e);
    seterr(err, 0, 0, "out of memory");
    return -1;
  }
  size_t kb = 0, ke = 0;
  for (size_t i = 0; i < c->nth; i++) {
    const ivlist_t *x = &c->th[i]->iv[ap][AT_N_EXECUTE_SERVER], *y = &c->th[i]->iv[ap][AT_N_NOTIFY_CLIENT];
    /* (an empty list has no array: memcpy wants one even for 0 bytes) */
    if (x->n) memcpy(b + kb, x->s, x->n * sizeof *b);
    kb += x->n;
    if (y->n) memcpy(e + ke, y->s, y->n * sizeof *e);
    ke += y->n;
  }
  qsort(b, nb, sizeof *b, cmp_double);
  qsort(e, ne, sizeof *e, cmp_double);
  double s = 0;
  for (size_t i = 0; i < nb; i++) s += e[i] - b[i];
  free(b);
  free(e);
  *out = s;
  return 0;
}

static double nan0(double v) { return isnan(v) ? 0.0 : v; }

static double missing(int compat, int L, int P, double v) {
  if (compat && v == 0.0 && (L == AT_LA || (L == AT_LD && in_sub(AT_PE, P)))) return NAN;
  return v;
}

static double maxl(const double *row) {
  double m = nan0(row[0]);
  for (int l = 1; l < 5; l++)
    if (nan0(row[l]) > m) m = nan0(row[l]);
  return m;
}

static void self_walk(int compat, double T[][AT_TL], double X[][AT_TL], int P, double t_pe_ld) {
  static const int order[5] = {AT_LC, AT_LD, AT_LI, AT_LR, AT_LA};
  X[P][AT_LT] = T[P][AT_LT];
  double prev = 0.0;
  for (int i = 0; i < 5; i++) {
    int L = order[i];
    double v = T[P][L];
    if (isnan(v))
      X[P][L] = NAN;
    else if (v == 0.0)
      X[P][L] = 0.0;
    else if (compat && P == AT_PO && (L == AT_LD || L == AT_LI) && t_pe_ld == 0.0)
      X[P][L] = L == AT_LD ? v : T[AT_PO][AT_LI] - T[AT_PO][AT_LD];
    else {
      X[P][L] = v - prev;
      prev = v;
    }
  }
}

int at_compute(at_ctx_t *c, at_stats_t *o, at_error_t *err) {
  memset(o, 0, sizeof *o);
  for (size_t i = 0; i < c->nth; i++) {
    thr_t *t = c->th[i];
    if (normalise(c, t, err) < 0) return -1;
    for (unsigned k = 0; k < t->root.nkids; k++) {
      int in_pe[AT_NLAYERS_KNOWN] = {0};
      accumulate(t, t->root.kids[k], in_pe);
    }
  }
  /* 7.3: executions per application phase */
  for (int ap = 0; ap < AT_NAPP; ap++) {
    long m = 0;
    for (size_t i = 0; i < c->nth; i++) {
      long n = c->compat ? (long)c->th[i]->iv[ap][AT_N_EXEC_CREATE].n : 0;
      if (!n) n = c->th[i]->la_pe_count[ap];
      if (n > m) m = n;
    }
    o->exec_count[ap] = m;
  }
  int wu = o->exec_count[AT_APWU] > 0, bm = o->exec_count[AT_APBM] > 0;
  if (c->compat && wu != bm) {
    seterr(err, 0, 0, "%s without %s: an application's [NN_LA_PWU] warmup needs a [NN_LA_PBM] benchmark, each with "
                      "executions",
           wu ? "warmup" : "benchmark", wu ? "benchmark" : "warmup");
    return -1;
  }
  o->both = c->compat ? wu && bm : wu || bm;
  int aps[AT_NAPP], nap = 0;
  aps[nap++] = AT_APO;
  if (o->both || !c->compat) {
    aps[nap++] = AT_APWU;
    aps[nap++] = AT_APBM;
  }
  static const int PHI[5] = {AT_PI, AT_PP, AT_PC, AT_PE, AT_PT};
  for (int L = 0; L < 5; L++) {
    for (int k = 0; k < AT_TPH; k++) {
      int P = at_tphases[k];
      double tot = 0.0;
      for (int a = 0; a < nap; a++) {
        int ap = aps[a];
        double t0 = 0.0;
        if (c->compat && L == AT_LD && P == AT_PE) {
          if (driver_exec(c, ap, &t0, err) < 0) return -1;
        } else {
          for (size_t i = 0; i < c->nth; i++) {
            double g;
            if (c->compat && L == AT_LR && P == AT_PE) {
              if (runtime_exec(c->th[i], ap, &g, err) < 0) return -1;
            } else {
              g = c->th[i]->S[ap][L][P];
            }
            t0 += g;
          }
        }
        tot += t0;
        if (o->both && pe_set(P) && ap != AT_APO) o->Tap[ap][P][L] = missing(c->compat, L, P, t0);
      }
      o->T[P][L] = missing(c->compat, L, P, tot);
    }
    if (o->T[AT_PO][L] == 0.0) {
      double s = 0.0;
      for (int k = 0; k < 5; k++) s += nan0(o->T[PHI[k]][L]);
      o->T[AT_PO][L] = s;
    }
  }
  for (int k = 0; k < AT_TPH; k++) o->T[at_tphases[k]][AT_LT] = maxl(o->T[at_tphases[k]]);
  for (int k = 0; k < AT_TPH; k++) self_walk(c->compat, o->T, o->X, at_tphases[k], o->T[AT_PE][AT_LD]);
  if (!c->compat) {
    /* Clean mode: NNAPI's walk over the overall column subtracts totals of
     * different phases from each other; a layer's overall self time is the
     * sum of its self times per phase instead (the application keeps its
     * total minus the layers below: its own overall scope). */
    for (int L = AT_LR; L < 5; L++) {
      double s = 0.0;
      for (int k = 0; k < 5; k++) s += nan0(o->X[PHI[k]][L]);
      o->X[AT_PO][L] = s;
    }
  }
  if (o->both)
    for (int ap = AT_APWU; ap <= AT_APBM; ap++)
      for (int k = 0; k < AT_TPH; k++) {
        int P = at_tphases[k];
        if (!pe_set(P)) continue;
        o->Tap[ap][P][AT_LT] = maxl(o->Tap[ap][P]);
        self_walk(0, o->Tap[ap], o->Xap[ap], P, 0);
      }
  return 0;
}
