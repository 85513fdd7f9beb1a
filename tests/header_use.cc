// header_use.cc: every macro of labelprof.h and a few of its functions, the
// way a user's C++ code would use them: in member functions, templates and
// lambdas. tests/header_check.sh compiles it under C++11 and C++17 with g++
// and clang++, with and without LABELPROF_DISABLE, with -Wall -Wextra
// -pedantic -Werror. Compiled (and, when disabled, linked without
// liblabelprof); never run.
#include <labelprof.h>

namespace {

class Engine {
 public:
  int run(int n) const {
    LP_SCOPE("engine run");
    LP_SCOPE_L(LP_LEVEL_OPERATOR, "engine inner");
    int sum = 0;  // a declaration right after two scopes
    for (int i = 0; i < n; i++) {
      LP_SCOPE("element"); LP_SCOPE("element again");  // two on one line
      sum += i;
    }
    return sum;
  }
};

// Layers and phases, in a member function and a template.
struct Layered {
  int run(int n) const {
    LP_SCOPE_PHASE(LP_LAYER_CPU, LP_PHASE_TRANSFORMATION, "layered");
    int done = n;
    LP_PHASE_SWITCH(LP_LAYER_CPU, LP_PHASE_COMPUTATION, "layered");
    LP_SCOPE_SUBTRACT(LP_LAYER_IPC, LP_PHASE_EXECUTION, "subtracted");
    return done + (lp_layer_name(LP_LAYER_RUNTIME) != nullptr);
  }
};

template <typename T>
T twice(T x) {
  LP_SCOPE_L(LP_LEVEL_DEBUG, "twice");
  return x + x;
}

int step(int n) {
  int queued = n * 2;  // used by a counter only
  LP_BEGIN("step manual");
  int total = Engine().run(n) + Layered().run(n);
  LP_END();
  LP_BEGIN_L(LP_LEVEL_DEBUG, "step debug");
  LP_END();
  auto lambda = [](double d) {
    LP_SCOPE("lambda");
    return d * 2.0;
  };
  LP_INSTANT("step instant");
  LP_INSTANT_L(LP_LEVEL_REQUEST, "step request instant");
  LP_COUNTER("queued", queued);
  LP_COUNTER_L(LP_LEVEL_DEBUG, "total", total);
  return total + twice(1) + static_cast<int>(lambda(1.5));
}

}  // namespace

// Names made at run time (part 7), as a binding's context manager uses them.
struct MadeScope {
  lp_scope_t s;
  explicit MadeScope(const lp_site_t *site) : s(lp_scope_enter(site)) {}
  ~MadeScope() { lp_scope_leave(&s); }
};

static int made_names(const char *name, size_t len) {
  const lp_site_t *site = nullptr;
  int rc = lp_site_intern(name, len, LP_LEVEL_OPERATOR, &site);
  if (rc != 0 || !site) return rc;
  MadeScope scope(site);
  lp_site_instant(site);
  lp_site_counter(site, 1);
  lp_site_begin(site);
  LP_END();
  lp_names_stats_t st;
  return lp_names_get_stats(&st);
}

static void on_label(const lp_notification_t *n, void *, void **slot) { *slot = const_cast<lp_site_t *>(n->site); }

static int subscribers() {
  lp_subscriber_t *s = nullptr;
  lp_payload_t pl = {"task", __FILE__, static_cast<uint32_t>(__LINE__), 0, nullptr};
  const lp_event_t *ev = nullptr;
  uint64_t instance = 0;
  uint8_t st = 0;
  int rc = lp_stream_register("header.use.cc", &st);
  rc |= lp_subscriber_create(nullptr, &s);
  rc |= lp_subscriber_set_callback(s, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, on_label);
  rc |= lp_subscriber_set_enabled(s, 1);
  rc |= lp_event_make(&pl, LP_TP_TASK_BEGIN, &ev, &instance);
  {
    LP_NOTIFY_SCOPE(st, LP_TP_TASK_BEGIN, nullptr, ev, instance, nullptr);
    if (lp_notify_wanted(st, LP_TP_SIGNAL)) rc |= lp_notify(st, LP_TP_SIGNAL, nullptr, ev, instance, nullptr);
  }
  rc |= lp_subscriber_set_enabled(s, 0);
  rc |= lp_subscriber_destroy(s, -1);
  return rc;
}

int main() {
  lp_trace_opts_t opts = {};
  opts.levels = LP_LEVEL_ALL;
  opts.policy = LP_TRACE_RING;
  lp_print_opts_t print = {};
  print.flags = LP_PRINT_THREADS | LP_PRINT_COUNTS;
  int rc = lp_thread_set_name("main");
  rc |= lp_profile_start(nullptr);
  rc |= lp_trace_start(&opts);
  uint64_t t0 = lp_now_ns();
  lp_track_t track = lp_track_create("device");
  rc |= step(3) < 0;
  rc |= made_names("made at run time", 16) > 0;
  rc |= lp_track_complete(track, "device work", t0, lp_now_ns() - t0);
  rc |= lp_trace_stop();
  rc |= lp_trace_write_json("/dev/null", "header_use");
  rc |= lp_trace_write_systrace("/dev/null");
  lp_profile_t *p = nullptr;
  if (lp_profile_stop(&p) == 0) {
    rc |= lp_profile_print_ex(p, stdout, &print);
    rc |= lp_node_find(lp_profile_root(p), "engine run") == nullptr;
    lp_profile_free(p);
  }
#ifndef LABELPROF_DISABLE
  rc |= subscribers();
#else
  (void)subscribers();
#endif
  if (rc != 0) fprintf(stderr, "%s\n", lp_strerror(rc));
  return rc != 0;
}
