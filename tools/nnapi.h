/*
 * nnapi.h: NNAPI's timing summary (private to the command, never installed).
 */
#ifndef LP_TOOLS_NNAPI_H
#define LP_TOOLS_NNAPI_H

#include <stddef.h>
#include <stdio.h>

/*
 * Reads the systrace or ftrace file at path ("-" = standard input) and writes
 * AOSP's timing summary to out, as parse_systrace.py does with the same flags.
 * Returns the exit status: 0, 1 where AOSP's parser fails (a message on
 * stderr names the line and the rule), 2 when the file cannot be read.
 */
int lp_nnapi_run(const char *path, int total_times, int per_execution, int json, FILE *out);

/* The same over a buffer in memory; name is shown in messages. */
int lp_nnapi_buffer(const char *name, const char *data, size_t len, int total_times, int per_execution, int json,
                    FILE *out);

/* Python's repr() of a float (the form json.dumps writes), into out. */
void lp_py_float(char *out, size_t outlen, double v);

#endif
