/*
 * nnapi_summary.c: `labelprof nnapi [--total-times] [--per-execution] [--json] FILE`,
 * the summary itself.
 *
 * NNAPI's timing summary from a systrace capture, byte for byte what AOSP's
 * parse_systrace.py prints for the same flags (../shared/nnapi/SPEC.md),
 * quirks included. Flow: the source (view/nnapi.c streams the input; a
 * buffer for the tests) gives its lines twice; pass 1 over the marks picks
 * the threads to track (those with NNAPI tags, and HIDL servers, whose
 * processes are drivers); pass 2 replays the marks of tracked threads into
 * the attribution (attrib.c), printing a run at every [NN_LA_PO] but the
 * first and at the end. Where AOSP's parser crashes, a message names the
 * line and the rule and the exit status is 1. What is held (the source's
 * line buffer, the threads, a run's call trees) is checked against the
 * source's memory limit after every new thread and every begin.
 */
#include "config.h"

#include "attrib.h"
#include "cmd.h"
#include "nnapi.h"
#include "table.h"
#include "ftrace.h"
#include "../lib/jsonesc.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text helpers ---------------------------------------------------------- */

typedef struct sbuf {
  char *p;
  size_t n, cap;
  int oom;
} sbuf_t;

static void sb_add(sbuf_t *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->n + n + 1) nc *= 2;
    char *np = realloc(b->p, nc);
    if (!np) {
      b->oom = 1;
      return;
    }
    b->p = np;
    b->cap = nc;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}
static void sb_puts(sbuf_t *b, const char *s) { sb_add(b, s, strlen(s)); }
static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf_t *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = 1;
    return;
  }
  if ((size_t)n < sizeof tmp) {
    sb_add(b, tmp, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb_add(b, big, (size_t)n);
  free(big);
}

/* b = b.replace(a, r) */
static void sb_replace(sbuf_t *b, const char *a, const char *r) {
  if (b->oom || !b->p) return;
  sbuf_t o = {0};
  size_t la = strlen(a), lr = strlen(r);
  const char *p = b->p, *end = b->p + b->n, *q;
  while ((q = memmem(p, (size_t)(end - p), a, la))) {
    sb_add(&o, p, (size_t)(q - p));
    sb_add(&o, r, lr);
    p = q + la;
  }
  sb_add(&o, p, (size_t)(end - p));
  if (o.oom) {
    free(o.p);
    b->oom = 1;
    return;
  }
  free(b->p);
  *b = o;
}

/* Python's '{:9.2f}': glibc's %f but NaN is "nan" whatever its sign. */
static void cell(sbuf_t *b, int width, double v) {
  if (isnan(v))
    sb_printf(b, "%*s", width, "nan");
  else
    sb_printf(b, "%*.2f", width, v);
}

/* Python's repr() of a float, as json.dumps writes it. */
void lp_py_float(char *out, size_t outlen, double v) {
  if (isnan(v)) {
    snprintf(out, outlen, "NaN");
    return;
  }
  if (isinf(v)) {
    snprintf(out, outlen, v > 0 ? "Infinity" : "-Infinity");
    return;
  }
  if (v == 0) {
    snprintf(out, outlen, signbit(v) ? "-0.0" : "0.0");
    return;
  }
  char e[40];
  for (int p = 0; p <= 17; p++) {
    snprintf(e, sizeof e, "%.*e", p, v);
    if (strtod(e, NULL) == v) break;
  }
  /* e = [-]d[.ddd]e[+-]XX */
  const char *s = e;
  int neg = 0;
  if (*s == '-') neg = 1, s++;
  char digits[40];
  int nd = 0;
  for (; *s && *s != 'e'; s++)
    if (*s != '.') digits[nd++] = *s;
  digits[nd] = 0;
  int exp = atoi(s + 1);
  while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0;
  char r[80];
  size_t k = 0;
  if (neg) r[k++] = '-';
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      for (int i = 0; i <= exp; i++) r[k++] = i < nd ? digits[i] : '0';
      r[k++] = '.';
      if (nd > exp + 1)
        for (int i = exp + 1; i < nd; i++) r[k++] = digits[i];
      else
        r[k++] = '0';
    } else {
      r[k++] = '0';
      r[k++] = '.';
      for (int i = 0; i < -exp - 1; i++) r[k++] = '0';
      for (int i = 0; i < nd; i++) r[k++] = digits[i];
    }
    r[k] = 0;
  } else {
    r[k++] = digits[0];
    if (nd > 1) {
      r[k++] = '.';
      for (int i = 1; i < nd; i++) r[k++] = digits[i];
    }
    r[k] = 0;
    snprintf(r + k, sizeof r - k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  }
  snprintf(out, outlen, "%s", r);
}

/*
 * json.dumps(s, ensure_ascii=True), through the project's one escaper
 * (lib/jsonesc.c). AOSP's parser dies on a file that is not UTF-8; here a
 * byte that starts no valid sequence becomes \ufffd.
 */
static void json_str(sbuf_t *b, const char *s, size_t n) {
  sb_puts(b, "\"");
  const char *end = s + n;
  while (s < end && !b->oom) {
    char tmp[LP__JSON_ESC_MAX * (1024 + 3)];
    const char *stop = (size_t)(end - s) > 1024 ? s + 1024 : end;
    char *o = lp__json_escape_chars(tmp, &s, end, stop, 1);
    sb_add(b, tmp, (size_t)(o - tmp));
  }
  sb_puts(b, "\"");
}

/* ---- the summary --------------------------------------------------------------- */

/* The template's values: V[layer][key], layers LA LR LI LD LC LT. */
enum { V_PI, V_PP, V_PC, V_PE, V_PT, V_PIO, V_PR, V_PEO, V_PO, V_PEp, V_N };
static const char *const VKEY[V_N] = {"PI", "PP", "PC", "PE", "PT", "PIO", "PR", "PEO", "PO", "PEp"};
static const char *const LKEY[AT_TL] = {"LA", "LR", "LI", "LD", "LC", "LT"};
static const int VPH[7] = {AT_PI, AT_PP, AT_PC, AT_PE, AT_PT, AT_PIO, AT_PR};

typedef struct nnopts {
  int total_times, per_execution, json;
} nnopts_t;

static void json_table(sbuf_t *b, const char *indent, double M[][AT_TL], const int *phases, int nph) {
  /* phases sorted by code */
  int ord[AT_NPHASES_KNOWN];
  for (int i = 0; i < nph; i++) ord[i] = phases[i];
  for (int i = 1; i < nph; i++)
    for (int j = i; j > 0 && strcmp(at_phase_code(ord[j - 1]), at_phase_code(ord[j])) > 0; j--) {
      int t = ord[j];
      ord[j] = ord[j - 1];
      ord[j - 1] = t;
    }
  static const int lsorted[AT_TL] = {AT_LA, AT_LC, AT_LD, AT_LI, AT_LR, AT_LT};
  char f[64];
  for (int i = 0; i < nph; i++) {
    sb_printf(b, "%s\"%s\": {\n", indent, at_phase_code(ord[i]));
    for (int k = 0; k < AT_TL; k++) {
      lp_py_float(f, sizeof f, M[ord[i]][lsorted[k]]);
      sb_printf(b, "%s  \"%s\": %s%s\n", indent, LKEY[lsorted[k]], f, k + 1 < AT_TL ? "," : "");
    }
    sb_printf(b, "%s}%s\n", indent, i + 1 < nph ? "," : "");
  }
}

static void json_dict(sbuf_t *b, const char *name, double M[][AT_TL], double Map[][AT_NPHASES_KNOWN][AT_TL],
                      int both) {
  static const int sub[5] = {AT_PCO, AT_PE, AT_PIO, AT_PR, AT_PTR};
  sb_printf(b, "  \"%s\": {\n", name);
  /* keys in order: PBM, the ten phases (PC..PTR), PWU */
  if (both) {
    sb_puts(b, "    \"PBM\": {\n");
    json_table(b, "      ", Map[AT_APBM], sub, 5);
    sb_puts(b, "    },\n");
  }
  json_table(b, "    ", M, at_tphases, AT_TPH);
  if (both) {
    b->n -= 1; /* the last "}\n" of the table gets a comma */
    sb_puts(b, ",\n    \"PWU\": {\n");
    json_table(b, "      ", Map[AT_APWU], sub, 5);
    sb_puts(b, "    }\n");
  }
  sb_puts(b, "  }");
}

static int print_run(const nnopts_t *o, at_stats_t *st, const char *title, size_t tlen, FILE *out) {
  double(*src)[AT_TL] = o->total_times ? st->T : st->X;
  /* Per execution with warmup and benchmark: the benchmark's figures for
   * execution and its subphases, written over the table about to be printed
   * only (self times, or total times), as AOSP's parser does. The JSON dumps
   * both tables, so the other one keeps the whole run's figures. */
  if (st->both && o->per_execution) {
    static const int pe_set[5] = {AT_PE, AT_PIO, AT_PTR, AT_PCO, AT_PR};
    double(*bm)[AT_TL] = o->total_times ? st->Tap[AT_APBM] : st->Xap[AT_APBM];
    for (int i = 0; i < 5; i++)
      for (int L = 0; L < AT_TL; L++) src[pe_set[i]][L] = bm[pe_set[i]][L];
  }
  double V[AT_TL][V_N];
  for (int L = 0; L < AT_TL; L++) {
    for (int k = 0; k < 7; k++) V[L][k] = src[VPH[k]][L];
    V[L][V_PEO] = V[L][V_PE] - V[L][V_PIO] - V[L][V_PR];
    V[L][V_PO] = src[AT_PO][L];
  }
  for (int L = 0; L < AT_LT; L++) V[L][V_PEp] = V[AT_LT][V_PE] > 0 ? 100 * V[L][V_PE] / V[AT_LT][V_PE] : NAN;
  V[AT_LT][V_PEp] = NAN;
  int has_cpu = 0;
  for (int k = 0; k < V_N; k++)
    if (V[AT_LC][k] > 0) has_cpu = 1;
  if (o->per_execution) {
    long cnt = st->exec_count[st->both ? AT_APBM : AT_APO];
    static const int div[4] = {V_PIO, V_PEO, V_PR, V_PE};
    for (int L = 0; L < AT_TL; L++)
      for (int k = 0; k < 4; k++) V[L][div[k]] = cnt ? V[L][div[k]] / (double)cnt : NAN;
  }
  sbuf_t b = {0};
  char f[64];
  if (o->json) {
    sb_printf(&b, "{\n  \"execution_counts\": {\n    \"PBM\": %ld,\n    \"PO\": %ld,\n    \"PWU\": %ld\n  },\n",
              st->exec_count[AT_APBM], st->exec_count[AT_APO], st->exec_count[AT_APWU]);
    json_dict(&b, "self_times", st->X, st->Xap, st->both);
    sb_puts(&b, ",\n  \"starting_mark\": ");
    json_str(&b, title, tlen);
    sb_puts(&b, ",\n  \"template_inputs\": {\n");
    /* keys sorted: layers LA LC LD LI LR LT, then PC PE PEO PEp PI PIO PO PP PR PT */
    static const int lsorted[AT_TL] = {AT_LA, AT_LC, AT_LD, AT_LI, AT_LR, AT_LT};
    static const int ksorted[V_N] = {V_PC, V_PE, V_PEO, V_PEp, V_PI, V_PIO, V_PO, V_PP, V_PR, V_PT};
    int first = 1;
    for (int i = 0; i < AT_TL; i++)
      for (int k = 0; k < V_N; k++) {
        int L = lsorted[i], K = ksorted[k];
        if (L == AT_LT && K == V_PEp) continue;
        lp_py_float(f, sizeof f, V[L][K]);
        sb_printf(&b, "%s    \"%s_%s\": %s", first ? "" : ",\n", LKEY[L], VKEY[K], f);
        first = 0;
      }
    sb_puts(&b, "\n  },\n");
    json_dict(&b, "times", st->T, st->Tap, st->both);
    sb_puts(&b, ",\n  \"version\": 1\n}\n");
    sb_replace(&b, "NaN", "null");
  } else {
    sb_add(&b, title, tlen);
    sb_puts(&b, "\n\n");
    static const char *const rows[5] = {"Application", "Runtime", "IPC", "Driver", "CPU"};
    const char *head = "NNAPI timing summary (self-times, ms wall-clock)";
    if (!o->per_execution) {
      char eq[140];
      memset(eq, '=', 139);
      eq[139] = 0;
      sb_printf(&b, "%s\n%-102sExecution\n", eq, head);
      sb_printf(&b, "%59s%s\n", "", "----------------------------------------------------");
      sb_puts(&b, "              Initialization   Preparation   Compilation           I/O       Compute      Results "
                  "    Ex. total   Termination        Total\n");
      sb_puts(&b, "              --------------   -----------   -----------   -----------  ------------  -----------  "
                  " -----------   -----------   ----------\n");
      for (int L = 0; L < 5; L++) {
        const double *v = V[L];
        sb_printf(&b, "%-19s", rows[L]);
        cell(&b, 9, v[V_PI]), sb_puts(&b, "     ");
        cell(&b, 9, v[V_PP]), sb_puts(&b, "     ");
        cell(&b, 9, v[V_PC]), sb_puts(&b, "   ");
        cell(&b, 11, v[V_PIO]), sb_puts(&b, "   ");
        cell(&b, 11, v[V_PEO]), sb_puts(&b, "    ");
        cell(&b, 9, v[V_PR]), sb_puts(&b, "     ");
        cell(&b, 9, v[V_PE]), sb_puts(&b, "     ");
        cell(&b, 9, v[V_PT]), sb_puts(&b, "    ");
        cell(&b, 9, v[V_PO]);
        sb_puts(&b, L == AT_LA ? "*\n" : "\n");
      }
      const double *v = V[AT_LT];
      sb_printf(&b, "\n%-19s", "Total");
      cell(&b, 9, v[V_PI]), sb_puts(&b, "*    ");
      cell(&b, 9, v[V_PP]), sb_puts(&b, "*    ");
      cell(&b, 9, v[V_PC]), sb_puts(&b, "*  ");
      cell(&b, 11, v[V_PIO]), sb_puts(&b, "*  ");
      cell(&b, 11, v[V_PEO]), sb_puts(&b, "*   ");
      cell(&b, 9, v[V_PR]), sb_puts(&b, "*    ");
      cell(&b, 9, v[V_PE]), sb_puts(&b, "*    ");
      cell(&b, 9, v[V_PT]), sb_puts(&b, "*   ");
      cell(&b, 9, v[V_PO]), sb_puts(&b, "*\n");
      sb_printf(&b, "%s\n", eq);
      sb_puts(&b, "* This total ignores missing (n/a) values and thus is not necessarily consistent with the rest of "
                  "the numbers\n");
    } else {
      char eq[81];
      memset(eq, '=', 80);
      eq[80] = 0;
      sb_printf(&b, "%s\n%-71s%s\n", eq, head, st->both ? "Benchmark" : "Execution");
      sb_printf(&b, "%14s%s\n", "", "------------------------------------------------------------------");
      sb_puts(&b, "                      I/O       Compute      Results         Total    Percentage\n");
      sb_puts(&b, "              -----------  ------------  -----------   -----------   -----------\n");
      for (int L = 0; L < 4; L++) {
        const double *v = V[L];
        sb_printf(&b, "%-14s", rows[L]);
        cell(&b, 11, v[V_PIO]), sb_puts(&b, "   ");
        cell(&b, 11, v[V_PEO]), sb_puts(&b, "    ");
        cell(&b, 9, v[V_PR]), sb_puts(&b, "     ");
        cell(&b, 9, v[V_PE]), sb_puts(&b, "  ");
        cell(&b, 11, v[V_PEp]), sb_puts(&b, "%\n");
      }
      {
        const double *v = V[AT_LC];
        sb_printf(&b, "%-14s", rows[4]);
        cell(&b, 11, v[V_PIO]), sb_puts(&b, "   ");
        cell(&b, 11, v[V_PEO]), sb_puts(&b, "    ");
        cell(&b, 9, v[V_PR]), sb_puts(&b, "     ");
        cell(&b, 9, v[V_PE]), sb_puts(&b, "  ");
        cell(&b, 11, v[V_PEp]), sb_puts(&b, "%\n");
      }
      const double *v = V[AT_LT];
      sb_printf(&b, "\n%-14s", "Total");
      cell(&b, 11, v[V_PIO]), sb_puts(&b, "*  ");
      cell(&b, 11, v[V_PEO]), sb_puts(&b, "*   ");
      cell(&b, 9, v[V_PR]), sb_puts(&b, "*    ");
      cell(&b, 9, v[V_PE]), sb_puts(&b, "          100%\n");
      sb_printf(&b, "%s\n", eq);
      sb_puts(&b, "* This total ignores missing (n/a) values and thus is not necessarily consistent\n"
                  "  with the rest of the numbers\n");
    }
    if (o->total_times) sb_replace(&b, "self-times", "total time");
    sb_replace(&b, " 0.00%", "     -");
    sb_replace(&b, " 0.00", "    -");
    sb_replace(&b, " nan", " n/a");
    if (!has_cpu && !b.oom) {
      /* drop the lines that start with "CPU" */
      sbuf_t k = {0};
      const char *p = b.p, *end = b.p + b.n;
      while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl + 1 : end;
        if (!((size_t)(le - p) >= 3 && memcmp(p, "CPU", 3) == 0)) sb_add(&k, p, (size_t)(le - p));
        p = le;
      }
      free(b.p);
      b = k;
    }
  }
  if (b.oom) {
    free(b.p);
    fputs("labelprof nnapi: out of memory\n", stderr);
    return -1;
  }
  fwrite(b.p, 1, b.n, out);
  free(b.p);
  return 0;
}

/* ---- passes over the marks ------------------------------------------------------- */

typedef struct tslot {
  long long tid;
  int idx;       /* tracked index, -1 if not tracked */
  char *tgid;    /* of the last tracking line */
} tslot_t;

typedef struct nnrun {
  const char *file;
  lp_nnapi_src_t *src;
  nnopts_t o;
  FILE *out;
  /* threads */
  tslot_t *slots; /* the threads in the order they came, found by tid through index */
  size_t cap, used;
  lp__index_t index;
  long long *order; /* tracked tids in order */
  size_t norder, ordcap;
  char **drivers;
  size_t ndrivers;
  int any_lr;
  /* pass 2 */
  at_ctx_t *at;
  int seen_po;
  char *title;
  size_t tlen;
  int json_started;
  int status;
} nnrun_t;

static uint32_t tid_hash(long long tid) { return lp__hash64((uint64_t)tid); }

static tslot_t *slot_get(nnrun_t *r, long long tid, int create) {
  for (uint32_t at, k = lp__index_first(&r->index, tid_hash(tid), &at); k; k = lp__index_next(&r->index, &at))
    if (r->slots[k - 1].tid == tid) return &r->slots[k - 1];
  if (!create) return NULL;
  if (r->used == r->cap) {
    size_t nc = r->cap ? r->cap * 2 : 256;
    tslot_t *ns = nc < UINT32_MAX / 2 ? realloc(r->slots, nc * sizeof *ns) : NULL;
    if (!ns) return NULL;
    r->slots = ns;
    r->cap = nc;
  }
  switch (lp_index_reserve(&r->index, NULL, (uint32_t)r->used, 512)) {
  case -1: return NULL;
  case 1:
    for (size_t i = 0; i < r->used; i++) lp__index_put(&r->index, tid_hash(r->slots[i].tid), (uint32_t)i);
  }
  lp__index_put(&r->index, tid_hash(tid), (uint32_t)r->used);
  tslot_t *s = &r->slots[r->used++];
  *s = (tslot_t){tid, -1, NULL};
  return s;
}

static int mhas(const struct lp_st_mark *m, const char *s) {
  return lp_st_has(m->mark, m->mark_len, s);
}

static int fail(nnrun_t *r, long line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(nnrun_t *r, long line, const char *fmt, ...) {
  va_list ap;
  fflush(r->out);
  if (line)
    fprintf(stderr, "labelprof nnapi: %s:%ld: ", r->file, line);
  else
    fprintf(stderr, "labelprof nnapi: %s: ", r->file);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  r->status = LP_EXIT_CHECK;
  return 1;
}

/* "1 GiB", "64 MiB", "1000 bytes" */
static void fmt_size(char *buf, size_t len, size_t v) {
  if (v >= (1u << 30) && v % (1u << 30) == 0)
    snprintf(buf, len, "%zu GiB", v >> 30);
  else if (v >= (1u << 20) && v % (1u << 20) == 0)
    snprintf(buf, len, "%zu MiB", v >> 20);
  else if (v >= (1u << 10) && v % (1u << 10) == 0)
    snprintf(buf, len, "%zu KiB", v >> 10);
  else
    snprintf(buf, len, "%zu bytes", v);
}

/* What the summary holds (the source's line buffer, the threads, the run's call trees) against the limit. */
static int over_limit(nnrun_t *r, long line) {
  size_t max = r->src->max_memory;
  if (!max) return 0;
  size_t held = r->src->held + r->cap * sizeof *r->slots + lp__index_bytes(&r->index) + r->ordcap * sizeof *r->order +
                (r->at ? at_bytes(r->at) : 0);
  if (held <= max) return 0;
  char lim[64];
  fmt_size(lim, sizeof lim, max);
  char at[48] = "";
  if (line) snprintf(at, sizeof at, "%ld:", line);
  fflush(r->out);
  fprintf(stderr,
          "labelprof nnapi: %s:%s more than the memory limit of %s needed to hold the threads and call trees "
          "of a run; --max-memory raises the limit\n",
          r->file, at, lim);
  r->status = LP_EXIT_BAD;
  return 1;
}

static int pass1(void *ctx, const struct lp_st_mark *m) {
  nnrun_t *r = ctx;
  if (!r->any_lr && mhas(m, "NN_LR")) r->any_lr = 1;
  int nn = mhas(m, "[NN");
  int server = !nn && mhas(m, "HIDL::IDevice") && mhas(m, "::server");
  if (!nn && !server) return 0;
  tslot_t *s = slot_get(r, m->tid, 1);
  if (!s) return fail(r, m->lineno, "out of memory");
  if (s->idx < 0) {
    if (r->norder == r->ordcap) {
      size_t nc = r->ordcap ? r->ordcap * 2 : 16;
      long long *no = realloc(r->order, nc * sizeof *no);
      if (!no) return fail(r, m->lineno, "out of memory");
      r->order = no;
      r->ordcap = nc;
    }
    s->idx = (int)r->norder;
    r->order[r->norder++] = m->tid;
    if (over_limit(r, m->lineno)) return 1;
  }
  if (!s->tgid || strlen(s->tgid) != m->tgid_len || memcmp(s->tgid, m->tgid_str, m->tgid_len) != 0) {
    char *t = strndup(m->tgid_str, m->tgid_len);
    if (!t) return fail(r, m->lineno, "out of memory");
    free(s->tgid);
    s->tgid = t;
  }
  if (server) {
    for (size_t i = 0; i < r->ndrivers; i++)
      if (strcmp(r->drivers[i], s->tgid) == 0) return 0;
    char **nd = realloc(r->drivers, (r->ndrivers + 1) * sizeof *nd);
    if (!nd) return fail(r, m->lineno, "out of memory");
    r->drivers = nd;
    if (!(nd[r->ndrivers] = strdup(s->tgid))) return fail(r, m->lineno, "out of memory");
    r->ndrivers++;
  }
  return 0;
}

static int at_fail(nnrun_t *r, const at_error_t *e) {
  if (e->line2)
    return fail(r, e->line, "%s (the enclosing scope begins at line %ld)", e->msg, e->line2);
  return fail(r, e->line, "%s", e->msg);
}

static int emit(nnrun_t *r) {
  int first = !r->json_started;
  r->json_started = 1;
  if (at_incomplete(r->at)) {
    fflush(r->out);
    fputs("Incomplete trace, not able to print all statistics\n", stderr);
    return 0;
  }
  if (r->o.json) fputs(first ? "[\n" : ",\n", r->out);
  at_stats_t st;
  at_error_t e = {0};
  if (at_compute(r->at, &st, &e) < 0) return at_fail(r, &e);
  if (print_run(&r->o, &st, r->title ? r->title : "", r->tlen, r->out) < 0) {
    r->status = LP_EXIT_BAD;
    return 1;
  }
  return 0;
}

static int pass2(void *ctx, const struct lp_st_mark *m) {
  nnrun_t *r = ctx;
  tslot_t *s = slot_get(r, m->tid, 0);
  if (!s || s->idx < 0) {
    if (mhas(m, "HIDL::IDevice") || mhas(m, "[NN_"))
      return fail(r, m->lineno, "untracked thread: thread %lld writes an NNAPI or HIDL device mark but no NNAPI tag",
                  m->tid);
    return 0;
  }
  at_error_t e = {0};
  if (m->mark[0] == 'B') {
    if (mhas(m, "[NN_LA_PO]")) {
      if (r->seen_po) {
        if (emit(r)) return 1;
        at_reset(r->at);
      }
      r->seen_po = 1;
      char *t = malloc(m->mark_len + 1);
      if (!t) return fail(r, m->lineno, "out of memory");
      memcpy(t, m->mark, m->mark_len);
      t[m->mark_len] = 0;
      free(r->title);
      r->title = t;
      r->tlen = m->mark_len;
    }
    if (at_begin(r->at, s->idx, m->t, m->mark, m->mark_len, m->lineno, &e) < 0) return at_fail(r, &e);
    if (over_limit(r, m->lineno)) return 1;
  } else {
    if (at_end(r->at, s->idx, m->t, m->lineno, &e) < 0) return at_fail(r, &e);
  }
  return 0;
}


/* A buffer in memory as a source. */
typedef struct bufsrc {
  lp_nnapi_src_t src;
  const char *data;
  size_t len;
} bufsrc_t;

static int buf_pass(lp_nnapi_src_t *src, lp_st_mark_cb cb, void *ctx, struct lp_st_error *err) {
  bufsrc_t *b = (bufsrc_t *)src;
  int hdr;
  return lp_st_scan(b->data, b->len, cb, ctx, &hdr, err);
}

int lp_nnapi_buffer(const char *name, const char *data, size_t len, int total_times, int per_execution, int json,
                    FILE *out) {
  bufsrc_t b;
  memset(&b, 0, sizeof b);
  b.src.pass = buf_pass;
  b.src.name = name;
  b.data = data;
  b.len = len;
  return lp_nnapi_read(&b.src, total_times, per_execution, json, out);
}

int lp_nnapi_read(lp_nnapi_src_t *src, int total_times, int per_execution, int json, FILE *out) {
  nnrun_t r;
  memset(&r, 0, sizeof r);
  r.file = src->name;
  r.src = src;
  r.o.total_times = total_times;
  r.o.per_execution = per_execution;
  r.o.json = json;
  r.out = out;
  struct lp_st_error se = {0};
  int rc = src->pass(src, pass1, &r, &se);
  if (rc == -1) fail(&r, se.lineno, "%s", se.msg);
  if (rc == -2) r.status = LP_EXIT_BAD;
  if (rc == 0) {
    if (!r.any_lr) fputs("\n*** No NNAPI Runtime trace present - check your systrace setup ***\n\n", stderr);
    r.at = at_new(1);
    if (!r.at) {
      fail(&r, 0, "out of memory");
    } else {
      for (size_t i = 0; i < r.norder && !r.status; i++) {
        tslot_t *s = slot_get(&r, r.order[i], 0);
        int drv = 0;
        for (size_t k = 0; k < r.ndrivers; k++)
          if (s && s->tgid && strcmp(r.drivers[k], s->tgid) == 0) drv = 1;
        if (at_thread(r.at, r.order[i], drv) < 0) fail(&r, 0, "out of memory");
      }
      if (!r.status && over_limit(&r, 0)) rc = 1;
      if (!r.status) {
        rc = src->pass(src, pass2, &r, &se);
        if (rc == -1) fail(&r, se.lineno, "%s", se.msg);
        if (rc == -2) r.status = LP_EXIT_BAD;
        if (rc == 0) emit(&r);
        if (!r.status && json) fputs("]\n", out);
      }
    }
  }
  at_free(r.at);
  for (size_t i = 0; i < r.used; i++) free(r.slots[i].tgid);
  free(r.slots);
  lp_index_free(&r.index, NULL);
  free(r.order);
  for (size_t i = 0; i < r.ndrivers; i++) free(r.drivers[i]);
  free(r.drivers);
  free(r.title);
  return r.status;
}
