#include "config.h"
#include "cmd.h"
int lp_cmd_layers(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return LP_EXIT_BAD;
}
