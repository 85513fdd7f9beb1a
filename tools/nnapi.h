/*
 * nnapi.h: NNAPI's timing summary (private to the command, never installed).
 */
#ifndef LP_TOOLS_NNAPI_H
#define LP_TOOLS_NNAPI_H

#include <stddef.h>
#include <stdio.h>

#include "ftrace.h"

/*
 * Where the summary reads from. pass() makes one pass over the lines from the
 * start, handing each to lp_st_line() with cb and ctx (a scanner of its own
 * per pass). It returns 0 at the end of the input, cb's nonzero value, -1
 * with *err filled (a line lp_st_line refused), or -2 after its own message
 * on stderr (the input cannot be read; a line longer than max_memory).
 */
typedef struct lp_nnapi_src {
  int (*pass)(struct lp_nnapi_src *src, lp_st_mark_cb cb, void *ctx, struct lp_st_error *err);
  const char *name;  /* shown in messages */
  size_t max_memory; /* a limit on what the summary holds, bytes; 0: none */
  size_t held;       /* the bytes the source holds now (its line buffer) */
} lp_nnapi_src_t;

/*
 * Writes AOSP's timing summary of the source's systrace or ftrace text to
 * out, as parse_systrace.py does with the same flags. Returns the exit
 * status: 0; 1 where AOSP's parser fails (a message on stderr names the line
 * and the rule); 2 when the input cannot be read or needs more memory than
 * src->max_memory (a message names the file, the line and the limit).
 */
int lp_nnapi_read(lp_nnapi_src_t *src, int total_times, int per_execution, int json, FILE *out);

/* The same over a buffer in memory, without a memory limit; name is shown in messages. */
int lp_nnapi_buffer(const char *name, const char *data, size_t len, int total_times, int per_execution, int json,
                    FILE *out);

/* Python's repr() of a float (the form json.dumps writes), into out. */
void lp_py_float(char *out, size_t outlen, double v);

#endif
