/*
 * nnapi.c: the options of `labelprof nnapi` and its input (the work is
 * in tools/nnapi_summary.c).
 *
 * The input is opened once, through the command's input layer
 * (read/input.c), like every other subcommand's: a file, a FIFO or a pipe
 * (`<(...)`, copied once to an unlinked temporary file, since the summary
 * makes two passes), or standard input, each gzip-compressed or not
 * (recognised by the first bytes already read). It is streamed line by line, twice; what stays in
 * memory is the longest line, the threads and one run's call trees, and
 * all of it together is held under --max-memory.
 */
#include "config.h"

#include "cmd.h"
#include "nnapi.h"
#include "reader.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: labelprof nnapi [--total-times] [--per-execution] [--json] [--max-memory SIZE] FILE\n"
    "\n"
    "NNAPI's timing summary of a systrace capture: time per layer (application,\n"
    "runtime, IPC, driver, CPU) and phase (initialization, preparation,\n"
    "compilation, execution with its I/O, compute and results, termination), as\n"
    "Android's parse_systrace.py prints it, byte for byte, its quirks included.\n"
    "A table per run; a run starts at each [NN_LA_PO] mark.\n"
    "\n"
    "  --total-times    total times instead of self times (a layer's self time is\n"
    "                   its total minus the nearest lower layer's)\n"
    "  --per-execution  the execution columns only, divided by the number of\n"
    "                   executions (of the benchmark when it has warmup and benchmark)\n"
    "  --json           the numbers as JSON, one object per run in a list\n"
    "  --max-memory SIZE\n"
    "                   the most memory the longest line, the threads and a run's\n"
    "                   call trees may take together (as for stats: 512M, 2G,\n"
    "                   1GiB or none; the default is 1G)\n"
    "\n"
    "FILE is the systrace viewer's HTML or ftrace text: Android's header, Linux 5's\n"
    "(with or without TGID), trace-cmd report output; - is standard input. A FIFO\n"
    "or a pipe is read too, and any of them may be gzip-compressed. The input is\n"
    "streamed, twice.\n"
    "\"No NNAPI Runtime trace present\" and \"Incomplete trace\" go to stderr, as\n"
    "Android's parser writes them.\n"
    "\n"
    "Exit status: 0; 1 where Android's parser fails (a nesting violation, an\n"
    "unmatched end, a warmup without a benchmark, an unreadable mark line), with\n"
    "a message naming the line and the rule; 2 when FILE cannot be read or needs\n"
    "more than --max-memory.\n";

typedef struct opts {
  bool total_times, per_execution, json;
  uint64_t max_memory; /* UINT64_MAX: none */
} opts_t;

/* What the longest line, the threads and a run's call trees may hold together: 1 GiB unless told. */
static const opts_t defaults = {.max_memory = (uint64_t)1 << 30};

static const lp_opt_t options[] = {
    LP_OPT_FLAG("--total-times", opts_t, total_times),
    LP_OPT_FLAG("--per-execution", opts_t, per_execution),
    LP_OPT_FLAG("--json", opts_t, json),
    LP_OPT_MAX_MEMORY(opts_t, max_memory),
    LP_OPT_END,
};

static int run(const void *opts, int n, const char *const *files);

const lp_cmd_t lp_cmd_nnapi = {
    "nnapi", "NNAPI's timing summary of a systrace, as Android's parser prints it", usage, options, sizeof(opts_t), &defaults,
    {1, 1, "FILE"}, run,
};

typedef struct stream {
  lp_nnapi_src_t src;
  lp_input_t *in;
  const char *shown; /* the name in messages */
  char *buf;
  size_t cap;
  int passes;
} stream_t;

/* Grows the line buffer (doubling, up to the memory limit); -1 after a message. */
static int grow(stream_t *s, long lineno) {
  size_t max = s->src.max_memory ? s->src.max_memory : SIZE_MAX;
  if (s->cap >= max) {
    char lim[64];
    if (max % (1u << 20) == 0)
      snprintf(lim, sizeof lim, "%zu MiB", max >> 20);
    else
      snprintf(lim, sizeof lim, "%zu bytes", max);
    fprintf(stderr,
            "labelprof nnapi: %s:%ld: a line longer than the memory limit of %s (not systrace text?); "
            "--max-memory raises the limit\n",
            s->shown, lineno, lim);
    return -1;
  }
  size_t nc = s->cap ? s->cap * 2 : (size_t)1 << 16;
  if (nc > max || nc < s->cap) nc = max;
  char *nb = realloc(s->buf, nc);
  if (!nb) {
    fprintf(stderr, "labelprof nnapi: %s:%ld: out of memory (a line of %zu bytes)\n", s->shown, lineno, s->cap);
    return -1;
  }
  s->buf = nb;
  s->cap = nc;
  s->src.held = nc;
  return 0;
}

/* One pass over the input's lines, split as Python's universal newlines do (\n, \r\n, \r). */
static int stream_pass(lp_nnapi_src_t *src, lp_st_mark_cb cb, void *ctx, struct lp_st_error *err) {
  stream_t *s = (stream_t *)src;
  if (s->passes++ && lp_input_rewind(s->in) != 0) return -2;
  struct lp_st_scanner sc;
  lp_st_init(&sc);
  size_t have = 0, p = 0;
  long lineno = 0;
  int eof = 0, rc = 0;
  for (;;) {
    while (p < have && !sc.done) {
      const char *l = s->buf + p;
      size_t avail = have - p, n, endlen = 0;
      const char *nl = memchr(l, '\n', avail);
      n = nl ? (size_t)(nl - l) : avail;
      const char *cr = memchr(l, '\r', n);
      if (cr) n = (size_t)(cr - l);
      if (n < avail) {
        if (l[n] == '\n')
          endlen = 1;
        else if (n + 1 < avail)
          endlen = l[n + 1] == '\n' ? 2 : 1;
        else if (eof)
          endlen = 1;
        else
          break; /* a \r at the end of what was read: its \n may follow */
      } else if (!eof) {
        break; /* the line goes on */
      }
      lineno++;
      p += n + endlen;
      rc = lp_st_line(&sc, l, n, lineno, cb, ctx, err);
      if (rc) goto out;
    }
    if (sc.done || (eof && p >= have)) break;
    if (p) {
      memmove(s->buf, s->buf + p, have - p);
      have -= p;
      p = 0;
    }
    if (have == s->cap && grow(s, lineno + 1) < 0) {
      rc = -2;
      break;
    }
    ssize_t got = lp_input_read(s->in, s->buf + have, s->cap - have);
    if (got < 0) {
      rc = -2;
      break;
    }
    if (got == 0)
      eof = 1;
    else
      have += (size_t)got;
  }
out:
  lp_st_fini(&sc);
  return rc;
}

static int run(const void *opts, int n, const char *const *files) {
  const opts_t *o = opts;
  (void)n;
  const char *file = files[0];
  size_t max_memory = o->max_memory == UINT64_MAX || o->max_memory > SIZE_MAX ? 0 : (size_t)o->max_memory; /* 0: none */
  stream_t s;
  memset(&s, 0, sizeof s);
  s.in = lp_input_open(file);
  if (!s.in) return LP_EXIT_BAD;
  s.shown = strcmp(file, "-") == 0 ? "<stdin>" : file;
  s.src.pass = stream_pass;
  s.src.name = s.shown;
  s.src.max_memory = max_memory;
  int status = lp_nnapi_read(&s.src, o->total_times, o->per_execution, o->json, stdout);
  free(s.buf);
  lp_input_close(s.in);
  return status;
}
