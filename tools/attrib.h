/*
 * attrib.h: time attribution to layers and phases (private to the command).
 *
 * NNAPI's scheme (AOSP's systrace parser, ../shared/nnapi/SPEC.md): every
 * scope carries a layer (application, runtime, IPC, driver, CPU, utility)
 * and a phase (initialization, preparation, compilation, execution and its
 * subphases, termination; unspecified = the parent's). Per thread the scopes
 * form a tree; one-time initialization is moved to the top, [SUB] scopes are
 * taken out of their callers, nested scopes of the same layer are detail.
 * A layer's time in a phase is the wall time of its outermost scopes; its
 * self time is that minus the time of the nearest lower layer with any.
 *
 * Two modes: compat (labelprof nnapi) reproduces AOSP's parser, its NNAPI
 * special cases (SPEC section 7) and quirks included; clean (labelprof
 * layers) is the generic core (sections 3-6 and 8) with the quirks fixed:
 * the application phase stack pops, a warmup without a benchmark is no
 * error, and a [SUB] scope is not counted twice.
 */
#ifndef LP_TOOLS_ATTRIB_H
#define LP_TOOLS_ATTRIB_H

#include <stddef.h>

/* Layers: the five shown first, in the tables' order of the code (LA..LC). */
enum { AT_LA, AT_LR, AT_LI, AT_LD, AT_LC, AT_LU, AT_LO, AT_LX, AT_NLAYERS_KNOWN };
/* Phases. AT_NONE: the root's, or inherited from it. */
enum {
  AT_NONE = -1,
  AT_PU = 0,
  AT_PI, AT_PP, AT_PC, AT_PE, AT_PT,
  AT_PIO, AT_PTR, AT_PCO, AT_PR,
  AT_PO, AT_PWU, AT_PBM,
  AT_NPHASES_KNOWN
};
/* Application phases (the runs' sub-tables). */
enum { AT_APO, AT_APWU, AT_APBM, AT_NAPP };

/* Section 7's names (compat mode), whose intervals are kept. */
enum {
  AT_N_STARTCOMPUTE, AT_N_EVENT_WAIT,
  AT_N_EXEC_CREATE, AT_N_EXEC_FREE, AT_N_EVENT_CREATE, AT_N_EVENT_FREE,
  AT_N_SET_INPUT, AT_N_SET_OUTPUT, AT_N_SET_INPUT_MEM, AT_N_SET_OUTPUT_MEM,
  AT_N_EXECUTE_SERVER, AT_N_NOTIFY_CLIENT,
  AT_NNAMES
};

typedef struct at_ctx at_ctx_t;

/* What went wrong, for the caller's message. */
typedef struct at_error {
  long line;       /* the input line of the offending mark, 0 if none */
  long line2;      /* a second line the message names (the enclosing scope), 0 if none */
  char msg[400];
} at_error_t;

/* compat: AOSP's behaviour (sections 7 and the quirks); otherwise clean. */
at_ctx_t *at_new(int compat);
void at_free(at_ctx_t *c);

/* Returns the thread's index (created in call order = tracked order), -1 when out of memory. */
int at_thread(at_ctx_t *c, long long tid, int driver);
size_t at_nthreads(const at_ctx_t *c);
/* About the bytes held: the threads, and the current run's trees and intervals (at_reset frees those). */
size_t at_bytes(const at_ctx_t *c);

/*
 * A begin on thread th at t seconds. mark is the mark text as NNAPI writes it
 * ("B|<pid>|[NN_LR_PP]label", "[SW]"/"[SUB]" prefixes, or a HIDL name). In
 * clean mode a mark without a tag is ignored (its scope counts for its
 * parent). Returns 0, or -1 with *err filled.
 */
int at_begin(at_ctx_t *c, int th, double t, const char *mark, size_t len, long line, at_error_t *err);
/* A begin with a known layer and phase (AT_LA.., AT_PU..), as labelprof's JSON gives them. */
int at_begin_codes(at_ctx_t *c, int th, double t, int layer, int phase, int subtract, long line, at_error_t *err);
/* An end on thread th at t seconds. Returns 0, or -1 (nothing open). */
int at_end(at_ctx_t *c, int th, double t, long line, at_error_t *err);

/* Non-zero if some thread has an open scope (then the run is incomplete). */
int at_incomplete(const at_ctx_t *c);
/* Forget the trees and sums, keep the threads (a new run). */
void at_reset(at_ctx_t *c);

/* The phases of the result tables, in SPEC order, and the sub-table phases. */
#define AT_TPH 10 /* PO PI PP PC PE PT PIO PTR PCO PR */
extern const int at_tphases[AT_TPH];
#define AT_TL 6   /* LA LR LI LD LC LT */
enum { AT_LT = 5 };

typedef struct at_stats {
  int both;                       /* warmup and benchmark both ran */
  long exec_count[AT_NAPP];       /* per application phase */
  double T[AT_NPHASES_KNOWN][AT_TL];        /* total times by [phase][layer], ms; NaN = missing */
  double X[AT_NPHASES_KNOWN][AT_TL];        /* self times */
  double Tap[AT_NAPP][AT_NPHASES_KNOWN][AT_TL]; /* PWU / PBM sub-tables (if both) */
  double Xap[AT_NAPP][AT_NPHASES_KNOWN][AT_TL];
} at_stats_t;

/* Sections 4-6 and 8 (and 7 in compat mode) over the current run. Returns 0, or -1 with *err. */
int at_compute(at_ctx_t *c, at_stats_t *out, at_error_t *err);

/* Codes as the tags spell them: "LA", "PIO"... */
const char *at_layer_code(int l);
const char *at_phase_code(int p);

#endif
