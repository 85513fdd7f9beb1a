/* subs_noentry.c: a shared object with an init but no finish: LABELPROF_SUBSCRIBERS must skip it. */
#include <stdint.h>
#include <stdio.h>

__attribute__((visibility("default"))) void labelprof_subscriber_init(uint32_t major, uint32_t minor,
                                                                      const char *version, const char *stream);
void labelprof_subscriber_init(uint32_t major, uint32_t minor, const char *version, const char *stream) {
  (void)major;
  (void)minor;
  (void)version;
  fprintf(stderr, "noentry init %s\n", stream);
}
