/* script_inline.c: record_script.h with the recording protocol inline (test_trace.c compares). */
#define LABELPROF_INLINE_RECORDING 1
#define RECORD_SCRIPT record_script_inline
#include "record_script.h"
