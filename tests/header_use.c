/*
 * header_use.c: every macro of labelprof.h and a few of its functions, the
 * way a user's C code would use them. tests/header_check.sh compiles it under
 * C99, C11 and C17 with gcc and clang, with and without LABELPROF_DISABLE,
 * with -Wall -Wextra -pedantic -Wdeclaration-after-statement -Werror: the
 * header must not make a careful user's build fail. Compiled (and, when
 * disabled, linked without liblabelprof); never run.
 *
 * Declarations come first in every block, as -Wdeclaration-after-statement
 * wants: LP_SCOPE and LP_SCOPE_L must count as declarations, enabled or not.
 */
#include <labelprof.h>

static int kernel(const int *v, int n) {
  LP_SCOPE("kernel");
  LP_SCOPE_L(LP_LEVEL_OPERATOR, "kernel inner");
  int sum = 0; /* a declaration right after two scopes */
  int i;
  for (i = 0; i < n; i++) {
    LP_SCOPE("element");
    sum += v[i];
  }
  if (sum > 100) {
    LP_SCOPE("big"); LP_SCOPE("big again"); /* two on one line */
    return sum;
  }
  return -sum;
}

/* Layers and phases: declarations too, enabled or not. */
static int layered(int n) {
  LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_TRANSFORMATION, "layered");
  int done = n; /* a declaration right after a scope */
  LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "layered");
  int more = done + 1; /* and after a switch */
  {
    LP_SCOPE_SUBTRACT(LP_LAYER_RUNTIME, LP_PHASE_UNSPECIFIED, "subtracted");
    more++;
  }
  return more + (lp_layer_name(LP_LAYER_UTILITY) != 0) + (lp_phase_name(LP_PHASE_BENCHMARK) != 0);
}

/*
 * Jumps a scope allows: out of its block (break, continue, goto), and back
 * to before it. (A jump into its block past it is refused: header_check.sh.)
 */
static int jumps(int n) {
  int i;
again: {
    LP_SCOPE("retried");
    if (n-- > 3) goto again;
  }
  for (i = 0; i < n; i++) {
    LP_SCOPE("looped");
    if (i == 1) continue;
    if (i == 2) break;
    if (i == 3) goto out;
  }
  switch (n) {
  case 0: {
    LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "in a case");
    n++;
    break;
  }
  default:
    break;
  }
out:
  return n;
}

static int step(int n) {
  static const int v[4] = {1, 2, 3, 4};
  int queued = n * 2; /* used by a counter only */
  int total;
  LP_BEGIN("step manual");
  total = kernel(v, 4) + layered(n) + jumps(n);
  LP_END();
  LP_BEGIN_L(LP_LEVEL_DEBUG, "step debug");
  LP_END();
  LP_INSTANT("step instant");
  LP_INSTANT_L(LP_LEVEL_REQUEST, "step request instant");
  LP_COUNTER("queued", queued);
  LP_COUNTER_L(LP_LEVEL_DEBUG, "total", total);
  return total;
}

/* Names made at run time (part 7), as a binding uses them; compiled out, stubs. */
static int made_names(const char *name, size_t len) {
  const lp_site_t *site = NULL;
  lp_names_stats_t st;
  lp_scope_t s;
  int rc = lp_site_intern(name, len, LP_LEVEL_RUNTIME, &site);
  if (rc != 0 || !site) return rc;
  s = lp_scope_enter(site);
  lp_site_instant(site);
  lp_site_counter(site, (int64_t)len);
  lp_site_begin(site);
  LP_END();
  lp_scope_leave(&s);
  return lp_names_get_stats(&st);
}

static void on_label(const lp_notification_t *n, void *data, void **slot) {
  (void)data;
  *slot = (void *)n->site;
}

/* The subscriber API, as a tool and as a runtime use it; with LABELPROF_DISABLE every call is a stub. */
static int subscribers(void) {
  lp_subscriber_t *s = NULL;
  lp_payload_t pl = {"task", __FILE__, (uint32_t)__LINE__, 0, NULL};
  const lp_event_t *ev = NULL;
  uint64_t instance = 0;
  uint16_t type = 0;
  uint8_t st = 0;
  int rc = lp_stream_initialize("header.use", 1, 0, "1.0");
  rc |= lp_stream_register("header.use", &st);
  rc |= lp_tp_register("header", LP_TP_BEGIN(1), &type);
  rc |= lp_subscriber_create(NULL, &s);
  rc |= lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, on_label);
  rc |= lp_subscriber_set_enabled(s, 1);
  rc |= lp_event_make(&pl, LP_TP_TASK_BEGIN, &ev, &instance);
  if (lp_notify_wanted(st, LP_TP_SIGNAL)) rc |= lp_notify(st, LP_TP_SIGNAL, NULL, ev, instance, NULL);
  {
    LP_NOTIFY_SCOPE(st, LP_TP_TASK_BEGIN, NULL, ev, instance, NULL);
    rc |= lp_event_set_metadata(ev, "k", "v");
  }
  rc |= lp_event_get_metadata(ev, "k") == NULL;
  rc |= lp_event_find(lp_event_id(ev), &ev);
  rc |= lp_event_payload(ev) == NULL;
  rc |= LP_TP_VENDOR(type) == 0 || LP_TP_INDEX(type) != LP_TP_BEGIN(1);
  rc |= lp_subscriber_set_enabled(s, 0);
  rc |= lp_subscriber_destroy(s, -1);
  rc |= lp_stream_finalize("header.use");
  return rc;
}

int main(void) {
  lp_trace_opts_t opts = {0};
  lp_print_opts_t print = {0};
  lp_profile_t *p = NULL;
  lp_track_t track;
  uint64_t t0;
  int rc;
  opts.levels = LP_LEVEL_ALL;
  opts.policy = LP_TRACE_RING;
  print.flags = LP_PRINT_THREADS | LP_PRINT_COUNTS;
  rc = lp_thread_set_name("main");
  rc |= lp_profile_start(NULL);
  rc |= lp_trace_start(&opts);
  t0 = lp_now_ns();
  track = lp_track_create("device");
  rc |= step(3) < 0;
  rc |= made_names("made at run time", 16) > 0;
  rc |= lp_track_complete(track, "device work", t0, lp_now_ns() - t0);
  rc |= lp_trace_stop();
  rc |= lp_trace_write_json("/dev/null", "header_use");
  rc |= lp_trace_write_systrace("/dev/null");
  if (lp_profile_stop(&p) == 0) {
    rc |= lp_profile_print_ex(p, stdout, &print);
    rc |= lp_node_find(lp_profile_root(p), "kernel") == NULL;
    lp_profile_free(p);
  }
  /* Compiled out, the subscriber calls say -ENOTSUP: only the enabled build must get through them. */
#ifndef LABELPROF_DISABLE
  rc |= subscribers();
#else
  (void)subscribers();
#endif
  if (rc != 0) fprintf(stderr, "%s\n", lp_strerror(rc));
  return rc != 0;
}
