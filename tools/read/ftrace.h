/*
 * ftrace.h: the trace_marker lines of systrace and ftrace text (private to
 * the command, never installed).
 *
 * It finds the tracing_mark_write lines (the user-space marks that Android's
 * ATRACE, NNAPI and labelprof write to the kernel's trace_marker) in:
 *
 *  - the systrace viewer's HTML file (the ftrace text embedded in a <script>
 *    block) and raw ftrace text with the header of Android's kernels
 *    ("TASK-PID    TGID   CPU#  ||||"), read exactly as AOSP's NNAPI
 *    systrace parser reads them;
 *  - beyond that parser: the header of Linux 5 and later ("|||||", with or
 *    without the TGID column, TGID shown as dashes when unknown), the output
 *    of `trace-cmd report` (print events, no header), and task names longer
 *    than 16 characters.
 *
 * Lines are split as Python's universal newlines do (\n, \r\n, \r) and
 * numbered from 1. Collection starts at the first header line and stops
 * before the first later line holding "</script>". The reader works on a
 * buffer in memory (lp_st_scan) or on lines fed one by one (lp_st_line, for a
 * stream) and calls back once per mark, in file order; nothing is kept
 * between calls but the tid -> tgid table the old header format needs.
 */
#ifndef LP_TOOLS_SYSTRACE_H
#define LP_TOOLS_SYSTRACE_H

#include <stddef.h>
#include <string.h>

/* One tracing_mark_write line. The pointers point into the caller's buffer. */
struct lp_st_mark {
  long lineno;             /* 1-based line number */
  const char *line;        /* the whole line, without its end */
  size_t line_len;
  const char *task;        /* the task (thread) name */
  size_t task_len;
  long long tid;           /* the thread id (ftrace's PID column) */
  long long tgid;          /* the process id, resolved as AOSP's parser does; -1 if not numeric */
  const char *tgid_str;    /* the process id as text (AOSP compares it as text) */
  size_t tgid_len;
  const char *ts;          /* the timestamp text, seconds with a fraction */
  size_t ts_len;
  double t;                /* the same in seconds, correctly rounded */
  const char *mark;        /* from its B or E to the end of the line ("B|100|label", "E|100", "E") */
  size_t mark_len;
  int extended;            /* 1 if only the extended grammar (beyond AOSP's) read the line */
};

/* Why a scan stopped early. */
struct lp_st_error {
  long lineno;             /* 0 if not about one line */
  char msg[320];           /* "rule: what was wrong" */
};

/* Called once per mark; a nonzero return stops the scan and is returned by lp_st_scan. */
typedef int (*lp_st_mark_cb)(void *ctx, const struct lp_st_mark *m);

/*
 * Scan buf[0..len) and call cb for each tracing_mark_write line with a B or
 * E mark, in file order. Counter marks (C|...) and other ftrace events are
 * skipped. Returns 0 at the end of the input, -1 with *err filled when a line
 * cannot be read (a mark line that matches no grammar, an old-format line
 * whose process is unknown, a bare E where the process id must come from
 * the mark), or cb's nonzero value. *nheader is set to 1 if a header (or
 * trace-cmd's preamble) was found, 0 otherwise (no marks are reported then).
 */
int lp_st_scan(const char *buf, size_t len, lp_st_mark_cb cb, void *ctx,
               int *nheader, struct lp_st_error *err);

/* A scanner for callers that feed lines one by one (a stream). */
struct lp_st_scanner {
  int collecting; /* a header was seen: lines are read */
  int done;       /* "</script>" ended the trace data */
  void *map;      /* tid -> tgid */
};
void lp_st_init(struct lp_st_scanner *sc);
void lp_st_fini(struct lp_st_scanner *sc);
/* One line (without its end), numbered lineno. Same returns as lp_st_scan. */
int lp_st_line(struct lp_st_scanner *sc, const char *l, size_t n, long lineno, lp_st_mark_cb cb, void *ctx,
               struct lp_st_error *err);

/* The bytes the scanner holds (its tid -> tgid table), for a caller that bounds its memory. */
size_t lp_st_held(const struct lp_st_scanner *sc);

/*
 * The first needle[0..nl) in s[0..n), or NULL (s when nl is 0): memmem for
 * the short needles of mark lines, where memchr's vectorised search for
 * the first byte and then a memcmp beat a general search. lp_st_has: the
 * same for a C string needle, as a yes or no.
 */
static inline const char *lp_st_find(const char *s, size_t n, const char *needle, size_t nl) {
  if (nl == 0) return s;
  const char *end = s + n, *p = s;
  while ((size_t)(end - p) >= nl) {
    const char *q = memchr(p, needle[0], (size_t)(end - p) - nl + 1);
    if (!q) return NULL;
    if (memcmp(q + 1, needle + 1, nl - 1) == 0) return q;
    p = q + 1;
  }
  return NULL;
}
static inline int lp_st_has(const char *s, size_t n, const char *needle) {
  return lp_st_find(s, n, needle, strlen(needle)) != NULL;
}

/* True if the buffer looks like systrace or ftrace text (a header, trace-cmd's preamble, or a mark line in its first 64 KiB). */
int lp_st_sniff(const char *buf, size_t len);

#endif
