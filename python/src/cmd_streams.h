/*
 * cmd_streams.h: the command's standard output and error, sent where the
 * module asks. python/setup.py makes every one of the labelprof command's
 * sources compiled into the module include this after config.h.
 *
 * The module runs the command's readers and subcommands in the Python
 * process (labelprof.read(), labelprof.stats()): what they would print is
 * the DataFrame's input or the exception's message, not the terminal's.
 * So stdout and stderr, in these files only, are lp_py_out and lp_py_err
 * while the module has set them (with the GIL held, python/src/read.c),
 * and the real streams otherwise. printf, puts and putchar write to that
 * stdout too.
 */
#ifndef LP_PY_CMD_STREAMS_H
#define LP_PY_CMD_STREAMS_H

#include <stdio.h>

extern FILE *lp_py_out __attribute__((visibility("hidden")));
extern FILE *lp_py_err __attribute__((visibility("hidden")));

/* A macro naming itself is not expanded again: the inner stdout is the C library's. */
#undef stdout
#undef stderr
#define stdout (lp_py_out ? lp_py_out : stdout)
#define stderr (lp_py_err ? lp_py_err : stderr)
#define printf(...) fprintf(stdout, __VA_ARGS__)
#define vprintf(fmt, ap) vfprintf(stdout, (fmt), (ap))
#define puts(s) (fputs((s), stdout) == EOF ? EOF : putc('\n', stdout))
#define putchar(c) putc((c), stdout)

#endif
