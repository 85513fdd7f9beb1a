/* diff.c: `labelprof diff` (being written). */
#include "config.h"

#include "cmd.h"

int lp_cmd_diff(int argc, char **argv) {
  (void)argc;
  return lp_usage_error(argv[0], "not implemented yet");
}
