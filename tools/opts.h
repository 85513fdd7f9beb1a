/*
 * opts.h: the subcommands' options and the one parser of them (private,
 * never installed).
 *
 * A subcommand is one lp_cmd_t, defined in its own file beside its usage
 * text, the struct of its options and the table of them (see cmd.h). The
 * dispatcher (tools/labelprof.c) parses argv with lp_opts_parse() from that
 * table before the subcommand runs, so that every subcommand reads its
 * arguments the same way and says the same thing about them:
 *   -h and --help print the usage to stdout (exit 0);
 *   a flag is its name alone (--strict);
 *   an option with a value is `--name VALUE` or `--name=VALUE`; a missing
 *   value is "--name needs a value";
 *   options and operands may come in any order; "--" ends the options, so
 *   that a file whose name starts with '-' can be named;
 *   an argument that starts with '-' (but is not "-", standard input) and
 *   is in no row is "unknown option '-x'";
 *   too few operands is "FILE is missing" (the names of the missing ones, as
 *   the usage writes them), too many is "FILE only: 'x' is one too many"
 *   ("no operands: 'x' is one too many" where none is taken);
 *   standard input ("-") named twice is refused (it can be read once).
 * Every usage error is "labelprof NAME: MESSAGE", then the usage, on stderr,
 * and exit status 2.
 */
#ifndef LP_TOOLS_OPTS_H
#define LP_TOOLS_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One option, at offset off of the subcommand's options struct. A flag (arg
 * NULL) sets a bool there. An option with a value, named arg in the usage
 * ("N", "SIZE"), hands the value to parse(cmd, value, field, how) when parse
 * is set (it returns 0, or -1 after lp_usage_error), and else stores it as
 * a const char * there. name is how the usage's synopsis writes it ("-b");
 * also, when not NULL, is another spelling taken alike ("--batch"). The
 * table ends with LP_OPT_END.
 */
typedef struct lp_opt {
  const char *name;
  const char *arg;
  size_t off;
  int (*parse)(const char *cmd, const char *value, void *field, const void *how);
  const void *how;
  const char *also;
} lp_opt_t;

#define LP_OPT_FLAG(name, type, field) {(name), NULL, offsetof(type, field), NULL, NULL, NULL}
#define LP_OPT_TEXT(name, arg, type, field) {(name), (arg), offsetof(type, field), NULL, NULL, NULL}
#define LP_OPT_PARSED(name, arg, type, field, parse, how) {(name), (arg), offsetof(type, field), (parse), (how), NULL}
/* The same, with a second spelling. */
#define LP_OPT_FLAG_ALSO(name, also, type, field) {(name), NULL, offsetof(type, field), NULL, NULL, (also)}
#define LP_OPT_PARSED_ALSO(name, also, arg, type, field, parse, how) \
  {(name), (arg), offsetof(type, field), (parse), (how), (also)}
#define LP_OPT_END {NULL, NULL, 0, NULL, NULL, NULL}

/*
 * The operands: from min to max of them (max -1: no limit; 0: none, every
 * value is an option's), named as the
 * usage names them ("FILE...", "FILE", "BASE NEW", "[SUBCOMMAND]"); the
 * messages about a missing one name it from there.
 */
typedef struct lp_operands {
  int min, max;
  const char *names;
} lp_operands_t;

/* lp_opts_parse() returns LP_OPTS_RUN to go on, or else the exit status to return now. */
enum { LP_OPTS_RUN = -1 };
/*
 * Parses argv[1..argc-1] (argv[0] is the subcommand's name) into opts (the
 * subcommand's struct, already holding its defaults) and the operands, in
 * their order, into operands[0..*n-1] (room for argc of them).
 */
int lp_opts_parse(const char *cmd, int argc, char **argv, const lp_opt_t *table, const lp_operands_t *spec,
                  void *opts, const char **operands, int *n);

/*
 * A value that is one of a few words, as the parse of a row: how is an
 * lp_opt_words_t, the field an int that gets the value of the word given;
 * another word is the usage error "ERROR, not 'WORD'".
 */
typedef struct lp_opt_words {
  const char *const *words; /* ended by NULL */
  const int *values;
  const char *error; /* "--sort takes calls, total, self, mean or max" */
} lp_opt_words_t;
int lp_opt_parse_word(const char *cmd, const char *value, void *field, const void *how);

/*
 * --max-memory SIZE into a uint64_t: bytes (lp_parse_size's grammar: 512M,
 * 2G, 1GiB; K, M, G, T are powers of 1024), UINT64_MAX for none; 0 is
 * refused, so that 0 in the field can mean "the subcommand's default".
 */
int lp_opt_parse_max_memory(const char *cmd, const char *value, void *field, const void *how);
#define LP_OPT_MAX_MEMORY(type, field) LP_OPT_PARSED("--max-memory", "SIZE", type, field, lp_opt_parse_max_memory, NULL)
/* --min-percent P into a double: a percentage from 0 to 100. */
int lp_opt_parse_percent(const char *cmd, const char *value, void *field, const void *how);
#define LP_OPT_MIN_PERCENT(type, field) LP_OPT_PARSED("--min-percent", "P", type, field, lp_opt_parse_percent, NULL)
#define LP_OPT_STRICT(type, field) LP_OPT_FLAG("--strict", type, field)
/* --by process into an int: 1 when given (tree, folded; stats takes thread too). */
extern const lp_opt_words_t lp_opt_by_process;
#define LP_OPT_BY_PROCESS(type, field) LP_OPT_PARSED("--by", "process", type, field, lp_opt_parse_word, &lp_opt_by_process)

#endif
