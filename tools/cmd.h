/*
 * cmd.h: the subcommands of the `labelprof` command (private, never installed).
 *
 * A subcommand is one lp_cmd_t in its own file (tools/view/NAME.c), as
 * Tracy's csvexport keeps its usage, its options and their table together:
 * its usage text, the struct of its options with their defaults, the table
 * of them (opts.h), its operands, and the function that runs it. The
 * dispatcher (tools/labelprof.c) finds it by name in lp_cmds, parses the
 * arguments with the one parser of opts.c, and calls run with the options
 * filled and the operands in order. run returns the command's exit status:
 * LP_EXIT_OK, LP_EXIT_CHECK (a check such as `diff --fail-above` failed) or
 * LP_EXIT_BAD (bad input or usage, after a message on stderr). Adding a
 * subcommand is its file, its row in lp_cmds and its line in Makefile.am;
 * its synopsis in tools/labelprof.1 is checked against its usage and table
 * (tests/test_opts.c).
 */
#ifndef LP_TOOLS_CMD_H
#define LP_TOOLS_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "opts.h"

enum { LP_EXIT_OK = 0, LP_EXIT_CHECK = 1, LP_EXIT_BAD = 2 };

typedef struct lp_cmd {
  const char *name;
  const char *summary;    /* one line, for `labelprof help` */
  const char *usage;      /* the full help text, printed by `-h` and `labelprof help NAME` */
  const lp_opt_t *opts;   /* the options' table, ended by LP_OPT_END */
  size_t opts_size;       /* the size of the options' struct */
  const void *defaults;   /* the struct's values before parsing; NULL: all zero */
  lp_operands_t operands;
  int (*run)(const void *opts, int n, const char *const *operands);
} lp_cmd_t;

extern const lp_cmd_t lp_cmd_stats, lp_cmd_tree, lp_cmd_diff, lp_cmd_folded, lp_cmd_flamegraph, lp_cmd_pprof,
    lp_cmd_nnapi, lp_cmd_layers, lp_cmd_top, lp_cmd_record, lp_cmd_merge, lp_cmd_help;

/* The subcommands, in the order `labelprof help` lists them, ended by NULL. */
extern const lp_cmd_t *const lp_cmds[];

/* The subcommand called name, NULL if there is none. */
const lp_cmd_t *lp_cmd_find(const char *name);

/*
 * The whole command: argv[0] is the program, argv[1] the subcommand. Returns
 * the exit status, standard output flushed (a failed write is LP_EXIT_BAD).
 * lp_overview() prints the list of subcommands.
 */
int lp_main(int argc, char **argv);
void lp_overview(FILE *out);

/*
 * For subcommands: prints the usage of `name` to `out` (stdout for -h, stderr
 * for a usage error). lp_usage_error() prints "labelprof NAME: MESSAGE" and
 * the usage to stderr and returns LP_EXIT_BAD.
 */
void lp_cmd_usage(const char *name, FILE *out);
int lp_usage_error(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- helpers shared by the subcommands (tools/labelprof.c) ---- */

/* A duration in human units with 3 significant digits: "812 ns", "12.3 us", "1.23 s". */
const char *lp_fmt_ns(int64_t ns, char *buf, size_t len);
/*
 * The escapers of the command's outputs (tools/escape.c), one per format;
 * every text of a file that reaches an output goes through one of them.
 * Each takes any bytes. What cannot be written in a format is replaced, not
 * dropped, so that a label stays recognisable and two labels that differ
 * never become one by losing characters:
 *
 *   JSON  lp_put_json_string: the project's one JSON escaper (lib/jsonesc.h):
 *         valid UTF-8 passes (U+FFFE and U+FFFF too: JSON allows them), each
 *         byte that is not valid UTF-8 becomes U+FFFD, control characters are
 *         escaped; _n takes n bytes, NUL included.
 *   XML   lp_put_xml (SVG text and attribute values): &, <, >, " and ' as
 *         entities; tab, newline and carriage return as character references
 *         (an attribute keeps them); each byte that is not valid UTF-8, each
 *         other control character, and U+FFFE and U+FFFF (none of which XML
 *         1.0 can hold, even as a reference) become U+FFFD.
 *   CSV   lp_put_csv_field (RFC 4180): invalid UTF-8 as in JSON; quoted when
 *         it holds a comma, a quote, CR or LF; a field that starts with =, +,
 *         -, @, tab or CR gets a ' before it, inside quotes, so that a
 *         spreadsheet shows it as text instead of running it as a formula
 *         (OWASP's CSV injection).
 *   text  lp_put_text (tables, trees, folded stacks): control characters as
 *         '?', so that a row stays one line; with semicolons set, ';' as ':'
 *         (the separator of folded stacks).
 */
void lp_put_json_string(FILE *out, const char *s);
void lp_put_json_string_n(FILE *out, const char *s, size_t n);
void lp_put_xml(FILE *out, const char *s, size_t n);
void lp_put_csv_field(FILE *out, const char *s);
/* Returns the bytes of s written (its length). */
size_t lp_put_text(FILE *out, const char *s, bool semicolons);
/* Parses a non-negative number; 1 on success. */
int lp_parse_double(const char *s, double *v);

#endif
