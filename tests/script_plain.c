/* script_plain.c: record_script.h reaching the recorder through plain calls (test_trace.c compares). */
#define LP_IMPL_PLAIN_CALLS 1
#define RECORD_SCRIPT record_script_plain
#include "record_script.h"
