/* tree.c: `labelprof tree` (being written). */
#include "config.h"

#include "cmd.h"

int lp_cmd_tree(int argc, char **argv) {
  (void)argc;
  return lp_usage_error(argv[0], "not implemented yet");
}
