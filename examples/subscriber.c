/*
 * subscriber.c: a tool that attaches to any program using labelprof, for
 * tool authors to start from. Build it as a shared object and name it in
 * LABELPROF_SUBSCRIBERS:
 *
 *   cc -shared -fPIC -o subscriber.so subscriber.c $(pkg-config --cflags labelprof)
 *   LABELPROF_SUBSCRIBERS=$PWD/subscriber.so ./app
 *
 * The library calls labelprof_subscriber_init for each stream as it is
 * initialized ("labelprof.labels" first) and labelprof_subscriber_finish at
 * lp_stream_finalize() and at exit. Here init subscribes to the labels'
 * begins, ends and instants; each begin leaves a value in the scope's
 * instance slot, which its end checks, and finish prints what was seen.
 * Callbacks run on the program's threads: keep them short and thread-safe.
 */
#include <labelprof.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static lp_subscriber_t *sub;
static atomic_ulong begins, ends, instants, unpaired;
static int done;

static void on_begin(const lp_notification_t *n, void *data, void **slot) {
  (void)data;
  *slot = (void *)n->site; /* the scope's own slot: its end gets it back, on this thread */
  atomic_fetch_add_explicit(&begins, 1, memory_order_relaxed);
}

static void on_end(const lp_notification_t *n, void *data, void **slot) {
  (void)data;
  if (*slot != (void *)n->site) atomic_fetch_add_explicit(&unpaired, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&ends, 1, memory_order_relaxed);
}

static void on_instant(const lp_notification_t *n, void *data, void **slot) {
  (void)n;
  (void)data;
  (void)slot;
  atomic_fetch_add_explicit(&instants, 1, memory_order_relaxed);
}

void labelprof_subscriber_init(uint32_t major, uint32_t minor, const char *version, const char *stream) {
  fprintf(stderr, "example subscriber: stream %s %u.%u (%s)\n", stream, major, minor, version);
  if (strcmp(stream, LP_STREAM_LABELS_NAME) != 0 || sub) return; /* an init may come twice */
  int rc = lp_subscriber_create(NULL, &sub);
  if (rc == 0) rc = lp_subscriber_set_callback(sub, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, on_begin);
  if (rc == 0) rc = lp_subscriber_set_callback(sub, LP_STREAM_LABELS, LP_TP_SCOPE_END, on_end);
  if (rc == 0) rc = lp_subscriber_set_callback(sub, LP_STREAM_LABELS, LP_TP_INSTANT, on_instant);
  if (rc == 0) rc = lp_subscriber_set_enabled(sub, 1);
  if (rc != 0) fprintf(stderr, "example subscriber: %s\n", lp_strerror(rc));
}

void labelprof_subscriber_finish(const char *stream) {
  if (strcmp(stream, LP_STREAM_LABELS_NAME) != 0 || done) return;
  done = 1;
  fprintf(stderr, "example subscriber: %lu scopes began, %lu ended, %lu unpaired, %lu instants\n",
          (unsigned long)atomic_load(&begins), (unsigned long)atomic_load(&ends),
          (unsigned long)atomic_load(&unpaired), (unsigned long)atomic_load(&instants));
}
