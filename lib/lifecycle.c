/*
 * lifecycle.c: what spans modules at fork, thread exit and load. The top of
 * the library: it calls every module, and none calls it.
 *
 * The registry (thread.c) never calls up into its users; this file wires
 * them together: it registers the timeline's hooks for thread exit and
 * rename, and the fork handlers, which take every library lock in the one
 * order written down in internal.h and release or reinitialise them after.
 * It runs them once, from the constructor, or from the first public entry
 * point that starts something (below), whichever comes first: another
 * constructor of a statically linked program may start a profile before
 * this one has run.
 *
 * It also defines lp_impl_self. Every label reads it, so every program that
 * uses labelprof links this object, and with it the constructor that reads
 * LABELPROF_*: with the static library, an object nothing refers to is left
 * out of the program, and the environment would be ignored.
 */
#include "internal.h"

#include <stdio.h>

LP_EXPORT __thread lp_impl_thread_t *lp_impl_self __attribute__((tls_model("initial-exec"))) = &lp__unattached;

/*
 * Every library lock that guards state the child keeps, taken in the lock
 * order (internal.h), released in reverse. env.c's is not taken: a report
 * may hold it while its file waits for a reader.
 */
static void atfork_prepare(void) {
  lp__subs_atfork_prepare();
  lp__collector_atfork_prepare();
  lp__registry_atfork_prepare();
  lp__cpu_atfork_prepare();
  lp__trace_atfork_prepare();
  lp__names_atfork_prepare();
  lp__levels_atfork_prepare();
}

static void atfork_parent(void) {
  lp__levels_atfork_parent();
  lp__names_atfork_parent();
  lp__trace_atfork_parent();
  lp__cpu_atfork_parent();
  lp__registry_atfork_parent();
  lp__collector_atfork_parent();
  lp__subs_atfork_parent();
}

static void atfork_child(void) {
  lp__registry_atfork_child(); /* first: from here on lp__forked_child() is true */
  lp__levels_atfork_child();   /* the registry's list is the child's: the others publish levels from here on */
  lp__cpu_atfork_child();      /* timers are not inherited: forgotten before the collector resets */
  lp__collector_atfork_child();
  lp__trace_atfork_child();
  lp__env_atfork_child();
  lp__subs_atfork_child();
  lp__names_atfork_child();
}

int lp_impl_abi_check(unsigned abi) {
  if (abi == LP_IMPL_ABI) return 0;
  if (lp__abi_refuse()) {
    lp__warn("code in this process was built with labelprof.h of ABI %u, and this liblabelprof has ABI %u "
             "(labelprof %s): labels are disabled; build it again against this version's header",
             abi, LP_IMPL_ABI, LABELPROF_VERSION_STRING);
    /* Threads that joined before (the library's own, or labels in earlier constructors) record no more. */
    lp__subs_refused();
  }
  return -1;
}

/* A thread leaves: its CPU timer first (no signal reaches a state on its way out), then its timeline lane. */
static void thread_exit(lp__thread_t *t) {
  lp__cpu_thread_exit(t);
  lp__trace_thread_exit(t);
}

static void init(void) {
  static const lp__registry_hooks_t hooks = {thread_exit, lp__trace_thread_renamed, lp__cpu_thread_joined};
  lp__registry_set_hooks(&hooks);
  lp__subs_init(); /* before anyone can register a stream: the labels stream is id 1 */
  /* Without the handlers a forked child would try to join a collector it does not have. */
  int rc = pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  if (rc != 0)
    lp__warn("pthread_atfork failed (%s); do not fork while profiling", lp_strerror(-rc));
}

static void lifecycle_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  int rc = pthread_once(&once, init);
  if (rc != 0) lp__fatal("pthread_once", rc);
}

__attribute__((constructor)) static void load(void) {
  lifecycle_init();
  lp__env_load();
  lp__subs_env_load(); /* last: a subscriber's init may use every part of the library */
}

/* ---- the public entry points that start something: the library first ---- */

int lp_profile_start(const lp_profile_opts_t *opts) {
  lifecycle_init();
  return lp__profile_start(LP__PROGRAM, opts);
}

int lp_trace_start(const lp_trace_opts_t *opts) {
  lifecycle_init();
  return lp__trace_start(LP__PROGRAM, opts);
}

lp_track_t lp_track_create(const char *name) {
  lifecycle_init();
  return lp__track_create(name);
}

/* The labels stream is registered first (lp__subs_init), as id 1. */
int lp_stream_register(const char *name, uint8_t *id) {
  lifecycle_init();
  return lp__stream_register(name, id);
}

int lp_stream_initialize(const char *name, uint32_t major, uint32_t minor, const char *version) {
  lifecycle_init();
  return lp__stream_initialize(name, major, minor, version);
}

int lp_stream_finalize(const char *name) {
  lifecycle_init();
  return lp__stream_finalize(name);
}

int lp_tp_register(const char *vendor, uint8_t index, uint16_t *type) {
  lifecycle_init();
  return lp__tp_register(vendor, index, type);
}

int lp_subscriber_create(void *subscriber_data, lp_subscriber_t **out) {
  lifecycle_init();
  return lp__subscriber_create(subscriber_data, out);
}
