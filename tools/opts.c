/*
 * opts.c: the subcommands' one option parser (see opts.h).
 */
#include "config.h"

#include "opts.h"

#include "agg.h" /* lp_parse_size: the size grammar of every --max-memory */
#include "cmd.h"

#include <string.h>

/* Whether a is the option spelled name ("--top", or "--top=VALUE" when it takes one). */
static bool spelled(const lp_opt_t *o, const char *name, const char *a, const char **inline_value) {
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return false;
  if (a[n] == '\0') {
    *inline_value = NULL;
    return true;
  }
  if (a[n] == '=' && o->arg) {
    *inline_value = a + n + 1;
    return true;
  }
  return false;
}

static const lp_opt_t *find(const lp_opt_t *table, const char *a, const char **inline_value) {
  for (const lp_opt_t *o = table; o->name; o++)
    if (spelled(o, o->name, a, inline_value) || (o->also && spelled(o, o->also, a, inline_value))) return o;
  return NULL;
}

/*
 * The operand names of spec from the (from+1)-th to the to-th, as the
 * messages say them: "NEW", "BASE and NEW" (brackets and "..." dropped).
 * Returns how many.
 */
static int names(const lp_operands_t *spec, int from, int to, char *out, size_t len) {
  const char *p = spec->names;
  size_t at = 0;
  int k = 0, listed = 0;
  out[0] = '\0';
  while (*p && k < to) {
    while (*p == ' ' || *p == '[' || *p == ']') p++;
    if (!*p) break;
    size_t w = strcspn(p, " []");
    size_t word = w >= 3 && strncmp(p + w - 3, "...", 3) == 0 ? w - 3 : w;
    if (k >= from && at + word + 6 < len) {
      if (listed) {
        memcpy(out + at, " and ", 5);
        at += 5;
      }
      memcpy(out + at, p, word);
      at += word;
      out[at] = '\0';
      listed++;
    }
    p += w;
    k++;
  }
  return listed;
}

int lp_opts_parse(const char *cmd, int argc, char **argv, const lp_opt_t *table, const lp_operands_t *spec,
                  void *opts, const char **operands, int *n) {
  bool options = true;
  int stdin_seen = 0;
  const char *extra = NULL;
  *n = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    const lp_opt_t *o;
    if (options && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
      lp_cmd_usage(cmd, stdout);
      return 0;
    }
    if (options && strcmp(a, "--") == 0) {
      options = false;
      continue;
    }
    if (options && (o = find(table, a, &v))) {
      void *field = (char *)opts + o->off;
      if (!o->arg) {
        *(bool *)field = true;
        continue;
      }
      if (!v) {
        if (i + 1 >= argc) return lp_usage_error(cmd, "%s needs a value", o->name);
        v = argv[++i];
      }
      if (o->parse) {
        if (o->parse(cmd, v, field, o->how) != 0) return 2;
      } else {
        *(const char **)field = v;
      }
      continue;
    }
    if (options && a[0] == '-' && a[1]) return lp_usage_error(cmd, "unknown option '%s'", a);
    if (spec->max >= 0 && *n == spec->max) {
      if (!extra) extra = a; /* said once the rest is read: a -h after it still shows the usage */
      continue;
    }
    if (strcmp(a, "-") == 0 && stdin_seen++)
      return lp_usage_error(cmd, "standard input (-) is given twice: it can be read once");
    operands[(*n)++] = a;
  }
  if (extra && spec->max == 0) return lp_usage_error(cmd, "no operands: '%s' is one too many", extra);
  if (extra) {
    char list[160];
    names(spec, 0, spec->max, list, sizeof list);
    return lp_usage_error(cmd, "%s only: '%s' is one too many", list, extra);
  }
  if (*n < spec->min) {
    char list[160];
    int k = names(spec, *n, spec->min, list, sizeof list);
    return lp_usage_error(cmd, "%s %s missing", k ? list : "an operand", k > 1 ? "are" : "is");
  }
  return LP_OPTS_RUN;
}

int lp_opt_parse_percent(const char *cmd, const char *v, void *field, const void *how) {
  (void)how;
  double *p = field;
  if (lp_parse_double(v, p) && *p <= 100) return 0;
  lp_usage_error(cmd, "--min-percent takes a percentage from 0 to 100, not '%s'", v);
  return -1;
}

int lp_opt_parse_max_memory(const char *cmd, const char *v, void *field, const void *how) {
  (void)how;
  uint64_t bytes;
  if (!lp_parse_size(v, &bytes)) {
    lp_usage_error(cmd, "--max-memory takes a size above 0 (512M, 2G; K, M, G, T are powers of 1024) or none "
                        "(no cap), not '%s'", v);
    return -1;
  }
  *(uint64_t *)field = bytes;
  return 0;
}

static const char *const by_process_words[] = {"process", NULL};
static const int by_process_values[] = {1};
const lp_opt_words_t lp_opt_by_process = {by_process_words, by_process_values, "--by takes process"};

int lp_opt_parse_word(const char *cmd, const char *v, void *field, const void *how) {
  const lp_opt_words_t *w = how;
  for (int i = 0; w->words[i]; i++)
    if (strcmp(v, w->words[i]) == 0) {
      *(int *)field = w->values[i];
      return 0;
    }
  lp_usage_error(cmd, "%s, not '%s'", w->error, v);
  return -1;
}
