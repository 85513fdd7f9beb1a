/*
 * opts.c: the subcommands' option parser (see opts.h).
 */
#include "config.h"

#include "opts.h"

#include "agg.h"
#include "cmd.h"

#include <string.h>

static const lp_opt_t *find(const lp_opt_t *opts, const char *a, const char **inline_value) {
  for (const lp_opt_t *o = opts; o->name; o++) {
    size_t n = strlen(o->name);
    if (strncmp(a, o->name, n) != 0) continue;
    if (a[n] == '\0') {
      *inline_value = NULL;
      return o;
    }
    if (a[n] == '=' && !o->flag) {
      *inline_value = a + n + 1;
      return o;
    }
  }
  return NULL;
}

int lp_opts_parse(const char *cmd, int argc, char **argv, const lp_opt_t *opts, lp_operands_t *ops) {
  ops->n = 0;
  ops->first = argc;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    const lp_opt_t *o;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      lp_cmd_usage(cmd, stdout);
      return LP_EXIT_OK;
    } else if ((o = find(opts, a, &v))) {
      if (o->flag) {
        *o->flag = true;
        continue;
      }
      if (!v) {
        if (i + 1 >= argc) return lp_usage_error(cmd, "%s needs a value", o->name);
        v = argv[++i];
      }
      if (o->parse) {
        if (o->parse(cmd, v, o->arg) != 0) return LP_EXIT_BAD;
      } else {
        *o->value = v;
      }
    } else if (ops->first_ends_options && strcmp(a, "--") == 0) {
      ops->first = i + 1;
      break;
    } else if (a[0] == '-' && a[1]) {
      return lp_usage_error(cmd, "unknown option '%s'", a);
    } else if (ops->first_ends_options) {
      ops->first = i;
      break;
    } else if (ops->n == ops->max) {
      return lp_usage_error(cmd, "%s", ops->too_many);
    } else {
      ops->v[ops->n++] = a;
    }
  }
  if (ops->first_ends_options) ops->n = argc - ops->first;
  if (ops->n < ops->min) return lp_usage_error(cmd, "%s", ops->missing);
  return LP_OPTS_RUN;
}

int lp_opts_stdin_once(const char *cmd, const char *const *files, int n) {
  for (int i = 0, seen = 0; i < n; i++)
    if (strcmp(files[i], "-") == 0 && seen++)
      return lp_usage_error(cmd, "standard input (-) is given twice: it can be read once");
  return LP_OPTS_RUN;
}

int lp_opt_parse_max_memory(const char *cmd, const char *v, void *arg) {
  (void)arg;
  uint64_t bytes;
  if (!lp_parse_size(v, &bytes)) {
    lp_usage_error(cmd, "--max-memory takes a size above 0 (512M, 2G; K, M, G, T are powers of 1024) or none "
                        "(no cap), not '%s'", v);
    return -1;
  }
  lp_agg_max_memory = bytes;
  return 0;
}

int lp_opt_parse_word(const char *cmd, const char *v, void *arg) {
  const lp_opt_words_t *w = arg;
  for (int i = 0; w->words[i]; i++)
    if (strcmp(v, w->words[i]) == 0) {
      *w->dst = w->values[i];
      return 0;
    }
  lp_usage_error(cmd, "%s, not '%s'", w->error, v);
  return -1;
}

int lp_files_operands(const char *cmd, int argc, char **argv, int first) {
  if (first >= argc) return lp_usage_error(cmd, "no trace file given");
  for (int i = first; i < argc; i++) /* options after the files are an easy mistake: say so */
    if (argv[i][0] == '-' && argv[i][1]) return lp_usage_error(cmd, "options go before the files ('%s')", argv[i]);
  return lp_opts_stdin_once(cmd, (const char *const *)argv + first, argc - first);
}
