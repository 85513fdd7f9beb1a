/*
 * nnapi.c: the options of `labelprof nnapi` and its input (the work is
 * in tools/nnapi_summary.c).
 *
 * The input is opened once, through the command's input layer
 * (read/input.c), like every other subcommand's: a file, a FIFO or a pipe (`<(...)`, copied
 * once to an unlinked temporary file, since the summary makes two passes),
 * or standard input, each gzip-compressed or not (recognised by the first
 * bytes already read). It is streamed line by line, twice; what stays in
 * memory is the longest line, the threads and one run's call trees, and
 * all of it together is held under --max-memory.
 */
#include "config.h"

#include "agg.h" /* lp_parse_size: the size grammar of every --max-memory */
#include "cmd.h"
#include "nnapi.h"
#include "reader.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_MEMORY ((size_t)1 << 30)

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

static const char *nnapi_usage_name = "nnapi";

int lp_cmd_nnapi(int argc, char **argv) {
  int tt = 0, pe = 0, js = 0;
  size_t max_memory = DEFAULT_MAX_MEMORY;
  const char *file = NULL, *v;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int got;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      lp_cmd_usage(nnapi_usage_name, stdout);
      return LP_EXIT_OK;
    } else if (strcmp(a, "--total-times") == 0) {
      tt = 1;
    } else if (strcmp(a, "--per-execution") == 0) {
      pe = 1;
    } else if (strcmp(a, "--json") == 0) {
      js = 1;
    } else if ((got = lp_opt_value(nnapi_usage_name, argc, argv, &i, "--max-memory", &v)) != 0) {
      if (got < 0) return LP_EXIT_BAD;
      uint64_t bytes;
      if (!lp_parse_size(v, &bytes))
        return lp_usage_error(nnapi_usage_name,
                              "--max-memory takes a size above 0 (512M, 2G; K, M, G, T are powers of 1024) or none "
                              "(no cap), not '%s'", v);
      max_memory = bytes == UINT64_MAX || bytes > SIZE_MAX ? 0 : (size_t)bytes; /* 0: no limit, to nnapi.c */
    } else if (strcmp(a, "--") == 0 && i + 1 < argc && !file && i + 2 == argc) {
      file = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      return lp_usage_error(nnapi_usage_name, "unknown option '%s'", a);
    } else if (file) {
      return lp_usage_error(nnapi_usage_name, "one FILE only");
    } else {
      file = a;
    }
  }
  if (!file) return lp_usage_error(nnapi_usage_name, "FILE is missing");
  stream_t s;
  memset(&s, 0, sizeof s);
  s.in = lp_input_open(file);
  if (!s.in) return LP_EXIT_BAD;
  s.shown = strcmp(file, "-") == 0 ? "<stdin>" : file;
  s.src.pass = stream_pass;
  s.src.name = s.shown;
  s.src.max_memory = max_memory;
  int status = lp_nnapi_read(&s.src, tt, pe, js, stdout);
  free(s.buf);
  lp_input_close(s.in);
  return status;
}
