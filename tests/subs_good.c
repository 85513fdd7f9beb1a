/* subs_good.c: a subscriber for test_subs_env.c that says what it sees. */
#include <labelprof.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static lp_subscriber_t *sub;
static atomic_ulong begins, ends;

static void on(const lp_notification_t *n, void *data, void **slot) {
  (void)data;
  (void)slot;
  atomic_fetch_add(n->type == LP_TP_SCOPE_BEGIN ? &begins : &ends, 1);
}

void labelprof_subscriber_init(uint32_t major, uint32_t minor, const char *version, const char *stream) {
  fprintf(stderr, "good init %s %u.%u %s\n", stream, major, minor, version);
  if (strcmp(stream, LP_STREAM_LABELS_NAME) != 0 || sub) return;
  if (lp_subscriber_create(NULL, &sub) || lp_subscriber_set_callback(sub, LP_STREAM_LABELS, LP_TP_SCOPE_BEGIN, on) ||
      lp_subscriber_set_callback(sub, LP_STREAM_LABELS, LP_TP_SCOPE_END, on) || lp_subscriber_set_enabled(sub, 1))
    fprintf(stderr, "good: cannot subscribe\n");
}

void labelprof_subscriber_finish(const char *stream) {
  fprintf(stderr, "good finish %s begins=%lu ends=%lu\n", stream, (unsigned long)atomic_load(&begins),
          (unsigned long)atomic_load(&ends));
}
