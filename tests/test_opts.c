/*
 * test_opts.c: the command's subcommands as the one parser (tools/opts.c)
 * and their tables describe them: every usage's synopsis names exactly the
 * options of its table, with their values' names; the man page's SYNOPSIS
 * says what the usages say, line for line; and every subcommand, run as
 * users run it, answers -h, --, unknown options, missing values and
 * missing or extra operands with the same words.
 *
 * The tables are read from the command's own sources, linked in; the man
 * page from the source tree (LP_TEST_SRCDIR).
 */
#include "config.h"

#include "cmd.h"
#include "runner.h"

#include <ctype.h>
#include <limits.h>
#include <stdbool.h>

#ifndef LP_TEST_SRCDIR
#error "LP_TEST_SRCDIR: the source tree, for tools/labelprof.1"
#endif

static char tool[PATH_MAX];

/* ---- synopses as text ----------------------------------------------------------- */

#define MAX_FORMS 8

typedef struct forms {
  char *line[MAX_FORMS]; /* "labelprof stats [--by thread] ... FILE...", spaces folded */
  int n;
} forms_t;

static void forms_free(forms_t *f) {
  for (int i = 0; i < f->n; i++) free(f->line[i]);
  f->n = 0;
}

/* Appends text to *line with one space between words. */
static void append(char **line, const char *text, size_t len) {
  size_t have = *line ? strlen(*line) : 0;
  char *s = realloc(*line, have + len + 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  size_t o = have;
  for (size_t i = 0; i < len; i++) {
    if (isspace((unsigned char)text[i])) {
      if (o && s[o - 1] != ' ') s[o++] = ' ';
    } else {
      if (i == 0 && o && s[o - 1] != ' ') s[o++] = ' ';
      s[o++] = text[i];
    }
  }
  while (o && s[o - 1] == ' ') o--;
  s[o] = '\0';
  *line = s;
}

/*
 * The synopsis of a usage text: its lines up to the first blank one; a
 * line that starts with "usage: labelprof" or with spaces then "labelprof"
 * starts a form, any other continues the one before.
 */
static forms_t usage_forms(const char *usage) {
  forms_t f = {{NULL}, 0};
  const char *p = usage;
  while (*p && *p != '\n') {
    const char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *q = p;
    if (strncmp(q, "usage:", 6) == 0) q += 6;
    while (q < p + len && *q == ' ') q++;
    if (strncmp(q, "labelprof ", 10) == 0 && f.n < MAX_FORMS) f.n++;
    if (f.n) append(&f.line[f.n - 1], q, len - (size_t)(q - p));
    p = end ? end + 1 : p + len;
  }
  return f;
}

/* troff's text as it reads: fonts dropped, \- as -, requests (.B) as their text. */
static void roff_text(char *dst, size_t cap, const char *src, size_t len) {
  size_t o = 0;
  if (len >= 3 && strncmp(src, ".B ", 3) == 0) src += 3, len -= 3;
  for (size_t i = 0; i < len && o + 1 < cap; i++) {
    if (src[i] == '\\' && i + 1 < len && src[i + 1] == 'f' && i + 2 < len) {
      i += 2; /* \fB, \fI, \fR, \fP */
      continue;
    }
    if (src[i] == '\\' && i + 1 < len && src[i + 1] == '-') {
      dst[o++] = '-';
      i++;
      continue;
    }
    dst[o++] = src[i];
  }
  dst[o] = '\0';
}

/*
 * The man page's SYNOPSIS for the subcommand name: its forms are the runs
 * of lines between .br requests, and belong to name when they start with
 * "labelprof NAME".
 */
static forms_t man_forms(const char *man, const char *name) {
  forms_t f = {{NULL}, 0};
  const char *p = strstr(man, "\n.SH SYNOPSIS\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  p += strlen("\n.SH SYNOPSIS\n");
  const char *stop = strstr(p, "\n.SH ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(stop);
  char *form = NULL;
  char want[64];
  snprintf(want, sizeof want, "labelprof %s", name);
  size_t wl = strlen(want);
  for (;;) {
    const char *end = strchr(p, '\n');
    bool last = !end || end >= stop;
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (last || strncmp(p, ".br", 3) == 0) {
      if (form && strncmp(form, want, wl) == 0 && (form[wl] == ' ' || !form[wl]) && f.n < MAX_FORMS)
        f.line[f.n++] = form;
      else
        free(form);
      form = NULL;
    } else {
      char text[1024];
      roff_text(text, sizeof text, p, len);
      append(&form, text, strlen(text));
    }
    if (last) break;
    p = end + 1;
  }
  return f;
}

/* ---- the synopses against the tables and the man page ----------------------------- */

/* Whether the synopsis s has the option o: "[--name]", "[--name ARG]", or --name bare (a form's own, as --diff). */
static bool names_option(const char *s, const lp_opt_t *o) {
  size_t n = strlen(o->name);
  for (const char *p = s; (p = strstr(p, o->name)) != NULL; p += n) {
    if (p > s && p[-1] != '[' && p[-1] != ' ') continue;
    const char *after = p + n;
    if (!o->arg) {
      if (*after == ']' || *after == ' ' || !*after) return true;
      continue;
    }
    if (*after != ' ') continue;
    size_t a = strlen(o->arg);
    if (strncmp(after + 1, o->arg, a) == 0 && (after[1 + a] == ']' || after[1 + a] == ' ' || !after[1 + a]))
      return true;
  }
  return false;
}

/* Every option of every usage's synopsis is a row of its table, with its value's name, and the other way round. */
static void test_opts_usage_names_the_table(void) {
  for (const lp_cmd_t *const *c = lp_cmds; *c; c++) {
    forms_t u = usage_forms((*c)->usage);
    CU_ASSERT_TRUE(u.n > 0);
    char *all = NULL;
    for (int i = 0; i < u.n; i++) append(&all, u.line[i], strlen(u.line[i]));
    for (const lp_opt_t *o = (*c)->opts; o->name; o++) {
      if (!names_option(all, o)) printf("\n    %s: the usage does not name %s %s", (*c)->name, o->name, o->arg ? o->arg : "");
      CU_ASSERT_TRUE(names_option(all, o));
    }
    /* Each --word of the synopsis is a row. */
    for (const char *p = all; p && (p = strstr(p, "--")) != NULL;) {
      size_t w = strcspn(p, " ]");
      bool found = false;
      for (const lp_opt_t *o = (*c)->opts; o->name; o++)
        if ((strlen(o->name) == w && strncmp(o->name, p, w) == 0) ||
            (o->also && strlen(o->also) == w && strncmp(o->also, p, w) == 0))
          found = true;
      if (!found) printf("\n    %s: %.*s is in the usage, not in the table", (*c)->name, (int)w, p);
      CU_ASSERT_TRUE(found);
      p += w;
    }
    /* The first form ends with the operands as the table names them (before a "> FILE" of its output). */
    char *first = u.line[0], *redirect = strstr(first, " > ");
    size_t end = redirect ? (size_t)(redirect - first) : strlen(first), on = strlen((*c)->operands.names);
    CU_ASSERT_TRUE(end >= on && strncmp(first + end - on, (*c)->operands.names, on) == 0);
    free(all);
    forms_free(&u);
  }
}

/* The man page's SYNOPSIS has each subcommand's forms as its usage writes them, in the same order. */
static void test_opts_man_synopsis_is_the_usage(void) {
  char *man = lp_test_slurp(LP_TEST_SRCDIR "/tools/labelprof.1");
  CU_ASSERT_PTR_NOT_NULL_FATAL(man);
  for (const lp_cmd_t *const *c = lp_cmds; *c; c++) {
    forms_t u = usage_forms((*c)->usage), m = man_forms(man, (*c)->name);
    if (m.n != u.n) printf("\n    %s: %d forms in the man page, %d in the usage", (*c)->name, m.n, u.n);
    CU_ASSERT_EQUAL(m.n, u.n);
    for (int i = 0; i < u.n && i < m.n; i++) {
      if (strcmp(m.line[i], u.line[i]) != 0) printf("\n    man:   %s\n    usage: %s", m.line[i], u.line[i]);
      CU_ASSERT_STRING_EQUAL(m.line[i], u.line[i]);
    }
    forms_free(&u);
    forms_free(&m);
  }
  free(man);
}

/* ---- the same words everywhere ---------------------------------------------------- */

typedef struct run {
  int status;
  char *out, *err;
} run_t;

static run_t run(const char *const *args) {
  char *argv[16];
  int n = 0;
  argv[n++] = tool;
  for (; args[n - 1] && n < 15; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  lp_test_run_t t = lp_test_run(tool, argv, NULL, NULL);
  run_t r = {lp_test_exit_code(&t), t.out, t.err};
  return r;
}
#define RUN(...) run((const char *const[]){__VA_ARGS__, NULL})

static void run_free(run_t *r) {
  free(r->out);
  free(r->err);
}

/* stderr is "labelprof NAME: MESSAGE\n" then the usage; status 2. */
static void expect_usage_error(const lp_cmd_t *c, run_t *r, const char *message) {
  size_t len = strlen(c->name) + strlen(message) + strlen(c->usage) + 16;
  char *want = malloc(len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  snprintf(want, len, "labelprof %s: %s\n%s", c->name, message, c->usage);
  if (strcmp(r->err, want) != 0) printf("\n    %s: said \"%.*s\", not \"%s\"", c->name, (int)strcspn(r->err, "\n"), r->err, message);
  CU_ASSERT_EQUAL(r->status, 2);
  CU_ASSERT_STRING_EQUAL(r->err, want);
  CU_ASSERT_STRING_EQUAL(r->out, "");
  free(want);
  run_free(r);
}

/* The first operand's name as the messages say it ("FILE", "BASE", "SUBCOMMAND"). */
static void first_operand(const lp_cmd_t *c, char *buf, size_t len) {
  const char *p = c->operands.names;
  while (*p == '[') p++;
  size_t w = strcspn(p, " []");
  if (w >= 3 && strncmp(p + w - 3, "...", 3) == 0) w -= 3;
  snprintf(buf, len, "%.*s", (int)w, p);
}

/* -h, --help, unknown options, missing values, missing and extra operands: one wording for every subcommand. */
static void test_opts_same_words_everywhere(void) {
  const char *missing_path = "-no-such-file"; /* in the working directory, which has none */
  for (const lp_cmd_t *const *c = lp_cmds; *c; c++) {
    const char *name = (*c)->name;
    run_t r = RUN(name, "-h");
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_STRING_EQUAL(r.out, (*c)->usage);
    CU_ASSERT_STRING_EQUAL(r.err, "");
    run_free(&r);
    r = RUN(name, "x", "--help");
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_STRING_EQUAL(r.out, (*c)->usage);
    run_free(&r);

    r = RUN(name, "--no-such-option", "x");
    expect_usage_error(*c, &r, "unknown option '--no-such-option'");

    /* Every option with a value, given none. */
    for (const lp_opt_t *o = (*c)->opts; o->name; o++) {
      if (!o->arg) continue;
      char msg[96];
      snprintf(msg, sizeof msg, "%s needs a value", o->name);
      r = RUN(name, o->name);
      expect_usage_error(*c, &r, msg);
    }
    /* A flag takes no "=VALUE". */
    for (const lp_opt_t *o = (*c)->opts; o->name; o++) {
      if (o->arg) continue;
      char arg[64], msg[96];
      snprintf(arg, sizeof arg, "%s=1", o->name);
      snprintf(msg, sizeof msg, "unknown option '%s'", arg);
      r = RUN(name, arg, "x");
      expect_usage_error(*c, &r, msg);
    }

    char first[32], msg[96];
    first_operand(*c, first, sizeof first);
    if ((*c)->operands.min == 1) {
      r = RUN(name);
      snprintf(msg, sizeof msg, "%s is missing", first);
      expect_usage_error(*c, &r, msg);
    }
    if ((*c)->operands.max == 1) {
      r = RUN(name, "a", "b");
      snprintf(msg, sizeof msg, "%s only: 'b' is one too many", first);
      expect_usage_error(*c, &r, msg);
    }
    /* After "--", a name that starts with '-' is an operand: the subcommand looks for the file. */
    if ((*c)->operands.min > 0 && strcmp(name, "flamegraph") != 0) {
      const char *args[8] = {name, "--", missing_path, NULL};
      if ((*c)->operands.min == 2) args[3] = missing_path;
      if (strcmp(name, "merge") == 0) { /* its output is required, and named before the files are read */
        const char *with_out[8] = {name, "-o", missing_path, "--", missing_path, NULL};
        memcpy(args, with_out, sizeof args);
      }
      r = run(args);
      CU_ASSERT_EQUAL(r.status, 2);
      CU_ASSERT_PTR_NULL(strstr(r.err, "unknown option"));
      CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "-no-such-file"));
      run_free(&r);
    }
    /* Standard input can be read once. */
    if ((*c)->operands.max < 0 || (*c)->operands.max > 1) {
      r = RUN(name, "-", "-");
      expect_usage_error(*c, &r, "standard input (-) is given twice: it can be read once");
    }
  }
}

/* The words of the missing operands: one, two, and from the second. */
static void test_opts_missing_operands_named(void) {
  const lp_cmd_t *diff = lp_cmd_find("diff");
  CU_ASSERT_PTR_NOT_NULL_FATAL(diff);
  run_t r = RUN("diff");
  expect_usage_error(diff, &r, "BASE and NEW are missing");
  r = RUN("diff", "a.json");
  expect_usage_error(diff, &r, "NEW is missing");
  r = RUN("diff", "a", "b", "c");
  expect_usage_error(diff, &r, "BASE and NEW only: 'c' is one too many");
  const lp_cmd_t *help = lp_cmd_find("help");
  CU_ASSERT_PTR_NOT_NULL_FATAL(help);
  r = RUN("help", "stats", "tree");
  expect_usage_error(help, &r, "SUBCOMMAND only: 'tree' is one too many");
  /* Options and operands in any order; "=VALUE" and " VALUE" alike. */
  r = RUN("stats", "--top", "x");
  expect_usage_error(lp_cmd_find("stats"), &r, "--top takes a count, not 'x'");
  r = RUN("stats", "--top=x");
  expect_usage_error(lp_cmd_find("stats"), &r, "--top takes a count, not 'x'");
}

/* ---- the parser itself, on a table of its own ------------------------------------- */

typedef struct fake {
  bool batch, quiet;
  const char *name;
  int count;
} fake_t;

static int parse_count(const char *cmd, const char *v, void *field, const void *how) {
  (void)cmd;
  (void)how;
  *(int *)field = atoi(v);
  return 0;
}

/* Two spellings, values inline or not, options after operands, and "--". */
static void test_opts_parser_spellings(void) {
  static const lp_opt_t table[] = {
      LP_OPT_FLAG_ALSO("-b", "--batch", fake_t, batch),
      LP_OPT_FLAG("-q", fake_t, quiet),
      LP_OPT_TEXT("--name", "TEXT", fake_t, name),
      LP_OPT_PARSED_ALSO("-n", "--count", "N", fake_t, count, parse_count, NULL),
      LP_OPT_END,
  };
  static const lp_operands_t spec = {0, -1, "FILE..."};
  char *argv[] = {"fake", "a", "--batch", "--name=x", "b", "--count", "7", "--", "-q", "--name", NULL};
  int argc = 10, n = -1;
  const char *operands[10];
  fake_t o = {false, false, NULL, 0};
  CU_ASSERT_EQUAL(lp_opts_parse("fake", argc, argv, table, &spec, &o, operands, &n), LP_OPTS_RUN);
  CU_ASSERT_TRUE(o.batch);
  CU_ASSERT_FALSE(o.quiet); /* after "--": an operand */
  CU_ASSERT_PTR_NOT_NULL_FATAL(o.name);
  CU_ASSERT_STRING_EQUAL(o.name, "x");
  CU_ASSERT_EQUAL(o.count, 7);
  CU_ASSERT_EQUAL_FATAL(n, 4);
  CU_ASSERT_STRING_EQUAL(operands[0], "a");
  CU_ASSERT_STRING_EQUAL(operands[1], "b");
  CU_ASSERT_STRING_EQUAL(operands[2], "-q");
  CU_ASSERT_STRING_EQUAL(operands[3], "--name");
  char *again[] = {"fake", "-b", "-n=2", NULL};
  fake_t p = {false, false, NULL, 0};
  CU_ASSERT_EQUAL(lp_opts_parse("fake", 3, again, table, &spec, &p, operands, &n), LP_OPTS_RUN);
  CU_ASSERT_TRUE(p.batch);
  CU_ASSERT_EQUAL(p.count, 2);
  CU_ASSERT_EQUAL(n, 0);
}

int main(void) {
  lp_test_tmpdir("opts");
  if (!realpath("tools/labelprof", tool)) {
    perror("test_opts: setup (run from the build directory)");
    return 2;
  }
  CU_TestInfo tests[] = {
      LP_TEST(test_opts_usage_names_the_table),
      LP_TEST(test_opts_man_synopsis_is_the_usage),
      LP_TEST(test_opts_same_words_everywhere),
      LP_TEST(test_opts_missing_operands_named),
      LP_TEST(test_opts_parser_spellings),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("opts", tests);
}
