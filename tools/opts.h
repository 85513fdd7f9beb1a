/*
 * opts.h: the one option parser of the subcommands (private, never installed).
 *
 * A subcommand describes its options in a table and its operands in an
 * lp_operands_t; lp_opts_parse() walks argv once and fills both. What every
 * subcommand shares is done here, the same way everywhere:
 *   -h and --help print the usage to stdout;
 *   a flag is its name alone (--strict);
 *   an option with a value is `--name VALUE` or `--name=VALUE`, and a missing
 *   value is a usage error ("--name needs a value");
 *   an argument that starts with '-' (but is not "-", standard input) and is
 *   in no row is "unknown option";
 *   any other argument is an operand.
 */
#ifndef LP_TOOLS_OPTS_H
#define LP_TOOLS_OPTS_H

#include <stdbool.h>

/*
 * One option. A flag sets *flag to true. An option with a value hands it to
 * parse(cmd, value, arg) when parse is set (which returns 0, or -1 after a
 * usage error), and else stores it in *value. The table ends with a row whose
 * name is NULL.
 */
typedef struct lp_opt {
  const char *name;
  bool *flag;
  const char **value;
  int (*parse)(const char *cmd, const char *value, void *arg);
  void *arg;
} lp_opt_t;

/*
 * The operands: up to max of them into v[0..max-1], their count in n. More
 * than max is the usage error too_many; fewer than min is the usage error
 * missing. With first_ends_options, the first operand ends the options (and
 * so does "--"): the rest of argv are operands, their index in *first, and v
 * and max are unused.
 */
typedef struct lp_operands {
  const char **v;
  int min, max, n;
  const char *too_many, *missing;
  bool first_ends_options;
  int first;
} lp_operands_t;

/* lp_opts_parse() returns LP_OPTS_RUN to go on, or else the exit status to return now. */
enum { LP_OPTS_RUN = -1 };
int lp_opts_parse(const char *cmd, int argc, char **argv, const lp_opt_t *opts, lp_operands_t *ops);

/*
 * A value that is one of a few words: as the parse of a row, with arg an
 * lp_opt_words_t. Sets *dst to the value of the word given; another word is
 * the usage error "ERROR, not 'WORD'".
 */
typedef struct lp_opt_words {
  const char *const *words; /* ended by NULL */
  const int *values;
  int *dst;
  const char *error; /* "--sort takes calls, total, self, mean or max" */
} lp_opt_words_t;
int lp_opt_parse_word(const char *cmd, const char *value, void *arg);

/*
 * Standard input ("-") given more than once among the n files: the usage
 * error "standard input (-) is given twice: it can be read once" and
 * LP_EXIT_BAD (the second would read as empty); else LP_OPTS_RUN.
 */
int lp_opts_stdin_once(const char *cmd, const char *const *files, int n);

/*
 * The files of a subcommand that takes several, argv[first..argc-1]: none
 * given, an option among them (options go before the files) and "-" twice
 * are usage errors (LP_EXIT_BAD after the message); else LP_OPTS_RUN.
 */
int lp_files_operands(const char *cmd, int argc, char **argv, int first);
/* The row of --max-memory SIZE, and of --strict into a bool. */
int lp_opt_parse_max_memory(const char *cmd, const char *value, void *arg);
#define LP_OPT_MAX_MEMORY {"--max-memory", 0, 0, lp_opt_parse_max_memory, 0}
#define LP_OPT_STRICT(b) {"--strict", (b), 0, 0, 0}
#define LP_OPT_END {0, 0, 0, 0, 0}

#endif
