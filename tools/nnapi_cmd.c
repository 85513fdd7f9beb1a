/*
 * nnapi_cmd.c: the options of `labelprof nnapi` (the work is in nnapi.c).
 */
#include "config.h"

#include "cmd.h"
#include "nnapi.h"

#include <string.h>

static const char *nnapi_usage_name = "nnapi";

int lp_cmd_nnapi(int argc, char **argv) {
  int tt = 0, pe = 0, js = 0;
  const char *file = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      lp_cmd_usage(nnapi_usage_name, stdout);
      return LP_EXIT_OK;
    } else if (strcmp(a, "--total-times") == 0) {
      tt = 1;
    } else if (strcmp(a, "--per-execution") == 0) {
      pe = 1;
    } else if (strcmp(a, "--json") == 0) {
      js = 1;
    } else if (strcmp(a, "--") == 0 && i + 1 < argc && !file && i + 2 == argc) {
      file = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      return lp_usage_error(nnapi_usage_name, "unknown option '%s'", a);
    } else if (file) {
      return lp_usage_error(nnapi_usage_name, "one FILE only");
    } else {
      file = a;
    }
  }
  if (!file) return lp_usage_error(nnapi_usage_name, "FILE is missing");
  return lp_nnapi_run(file, tt, pe, js, stdout);
}
