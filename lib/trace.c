/*
 * trace.c: the timeline's recording side.
 *
 * This first version only defines the level mask the inline scopes test. It
 * stays 0, so lp_impl_emit() is never reached; recording arrives with the
 * timeline (per-thread chunked buffers, export as Chrome Trace Event JSON).
 */
#include "internal.h"

LP_EXPORT _Atomic uint32_t lp_impl_levels;

uint32_t lp_impl_emit(uintptr_t tag) {
  (void)tag;
  return 0;
}
