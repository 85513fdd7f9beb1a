/*
 * reader.h: the normalised event stream every subcommand reads (private,
 * never installed).
 *
 * A reader turns one input format into a stream of lp_event_t pushed into a
 * sink, in the order of the file, in one pass: Chrome Trace Event JSON
 * (tools/read/json.c), systrace text, and whatever comes next. The views
 * (stats, tree, diff, folded...) only ever see lp_event_t, so a new format is
 * one reader plus one row in the table of tools/read/input.c, and a new view
 * works on every format.
 *
 * Input (lp_input_t) is shared by all readers: a file, or "-" for standard
 * input, transparently gunzipped when it starts with gzip's magic bytes (every
 * member of a multi-member file; trailing bytes that are not one are an error). The
 * driver (lp_read_trace) peeks at the first bytes and picks the first reader
 * whose sniff() accepts them.
 *
 * Errors: a reader reports bad input once, through lp_report() with the
 * position (file, line:column or byte offset) and what was expected, and
 * returns LP_READ_BAD. A sink may stop the pass by returning non-zero; the
 * reader then returns that value at once without a message of its own.
 */
#ifndef LP_TOOLS_READER_H
#define LP_TOOLS_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "table.h" /* lp_mem_t */

/* A reader's or a sink's verdict: 0 is success. */
enum { LP_READ_OK = 0, LP_READ_BAD = 2 };

/* Where something is in an input. line and column count from 1; 0 = unknown (then offset is used). */
typedef struct lp_pos {
  const char *file;  /* as the user named it; "-" is shown as "<stdin>" */
  uint64_t offset;   /* bytes from the start of the (decompressed) input */
  uint64_t line;
  uint64_t column;
} lp_pos_t;

typedef enum lp_ev_kind {
  LP_EV_COMPLETE = 1, /* a scope with its duration ('X'): ts .. ts + dur */
  LP_EV_BEGIN,        /* a scope begins ('B') */
  LP_EV_END,          /* the innermost open scope of the lane ends ('E'); name may be "" */
  LP_EV_INSTANT,      /* a point in time ('i', 'I') */
  LP_EV_COUNTER,      /* one value of a counter ('C'): one event per series */
  LP_EV_THREAD_NAME,  /* metadata ('M' thread_name): name is the lane's name */
  LP_EV_PROCESS_NAME, /* metadata ('M' process_name): name is the process's name */
  LP_EV_SKIPPED,      /* an event of a phase the views do not use (async, flow, ...): name is the phase */
  LP_EV_FILE_INFO     /* what the file says of itself, not an event: name is the key ("otherData.events_dropped",
                         or a top-level key), text its scalar value as written (strings unquoted) */
} lp_ev_kind_t;

/*
 * One event. Every pointer is valid only during the sink's callback (copy
 * what you keep). Strings are NUL-terminated UTF-8 with escapes decoded.
 */
typedef struct lp_event {
  lp_ev_kind_t kind;
  int64_t pid, tid;     /* the lane is (pid, tid) */
  int64_t ts;           /* nanoseconds, in the file's own time base; 0 for metadata */
  int64_t dur;          /* nanoseconds, >= 0; LP_EV_COMPLETE only */
  /* Readers refuse (LP_READ_BAD) times at or beyond ±2^62 ns: ts and ts + dur stay strictly inside, so the
     difference of any two times fits an int64_t. */
  const char *name;     /* never NULL ("" when the file gives none) */
  const char *category; /* "cat", NULL when absent; labelprof writes "layer,phase" for layered sites */
  const char *layer;    /* args.layer, args.phase, args.mode as strings; NULL when absent */
  const char *phase;
  const char *mode;
  const char *series;   /* LP_EV_COUNTER: the series (the key in args); NULL otherwise */
  double value;         /* LP_EV_COUNTER: the value */
  const char *text;     /* LP_EV_FILE_INFO: the value's text; NULL otherwise */
  lp_pos_t pos;         /* where the event starts in the input */
} lp_event_t;

/* ---- memory ---------------------------------------------------------------------- */

/*
 * After an allocation through m failed: "FILE:POS: this trace needs more
 * than 64 MiB of memory (the cap, --max-memory): stopped here" when the cap
 * refused it, "out of memory" otherwise. Returns LP_READ_BAD.
 */
int lp_mem_fail(const lp_mem_t *m, const lp_pos_t *pos);

/*
 * The longest name (a label, a category, a thread's name) any reader takes:
 * 1 MiB. A longer one is refused as its bytes arrive, before they are held,
 * with the position where it passed the limit: no program names a scope so,
 * and a file that does is not a trace to trust.
 */
#define LP_READ_MAX_NAME ((size_t)1 << 20)

/*
 * A name of n bytes as the views see it: a NUL byte, which would end it
 * early and make two names one, is written as the six characters \u0000,
 * as the JSON reader gives "\u0000". lp_name_len() is the length that
 * takes; lp_name_put() writes it and a terminating NUL into dst (which holds
 * lp_name_len(s, n) + 1 bytes) and returns dst. s may be NULL when n is 0.
 */
size_t lp_name_len(const void *s, size_t n);
char *lp_name_put(char *dst, const void *s, size_t n);

/* Where a reader pushes its events. event() returns 0 to go on, non-zero to stop the pass. */
typedef struct lp_sink {
  void *ctx;
  int (*event)(void *ctx, const lp_event_t *ev);
  /* Where the reader counts what it holds, against the same cap as the sink's tables; NULL: not counted. */
  lp_mem_t *mem;
} lp_sink_t;

/* ---- input ---------------------------------------------------------------------- */

typedef struct lp_input lp_input_t;

/*
 * Opens `path` ("-" is standard input) for reading. Gzip is recognised by its
 * magic bytes, whatever the name. An input that cannot seek (a pipe, a FIFO)
 * is copied to an unlinked temporary file in $TMPDIR as it is read, so that
 * every input can be rewound; nothing is read before it is asked for (the
 * first bytes, for sniffing). Returns NULL after a message on stderr.
 */
lp_input_t *lp_input_open(const char *path);
void lp_input_close(lp_input_t *in); /* NULL is a no-op */

/* The name to show in messages. */
const char *lp_input_name(const lp_input_t *in);

/*
 * Reads up to n decompressed bytes. Returns the count, 0 at the end, -1
 * after reporting a read or decompression error.
 */
ssize_t lp_input_read(lp_input_t *in, void *buf, size_t n);

/* Copies up to n of the first bytes without consuming them (the driver's sniffing). Returns the count or -1. */
ssize_t lp_input_peek(lp_input_t *in, void *buf, size_t n);

/* Starts again from the first byte. 0, or -1 after a message (a pipe whose copy failed, a full disk, says so). */
int lp_input_rewind(lp_input_t *in);

/* An unlinked temporary file in $TMPDIR (else /tmp), open for reading and writing; -1 with errno set. */
int lp_temp_fd(void);

/* ---- readers ------------------------------------------------------------------------ */

typedef struct lp_reader {
  const char *name; /* "chrome-json", "systrace", ... */
  /* Non-zero when the first bytes (n may be small, even 0) look like this format. */
  int (*sniff)(const unsigned char *head, size_t n);
  /* One pass over the input: LP_READ_OK, LP_READ_BAD after a message, or what the sink returned. */
  int (*read)(lp_input_t *in, const lp_sink_t *sink);
} lp_reader_t;

extern const lp_reader_t lp_json_reader;
extern const lp_reader_t lp_systrace_reader; /* tools/read/systrace.c: systrace HTML, ftrace text */
extern const lp_reader_t lp_perfetto_reader; /* tools/read/perfetto.c: Perfetto TrackEvent protobuf */
extern const lp_reader_t lp_folded_reader;   /* tools/read/profile.c: folded stacks */
extern const lp_reader_t lp_pprof_reader;    /* tools/read/profile.c: pprof's profile.proto */
/* Profiles give their CPU weights instead of wall time (flamegraph --cpu); see tools/read/profile.c. */
extern bool lp_read_cpu;
extern unsigned lp_read_cpu_files; /* the inputs read so that gave CPU weights */
/* "labelprof: FILE: no CPU time in this input ..." on stderr; returns LP_READ_BAD (the exit status 2). */
int lp_no_cpu(const char *file);

/* The readers, in the order they are tried; ended by NULL. */
extern const lp_reader_t *const lp_readers[];

/*
 * One pass over an open input with the reader its first bytes call for
 * (JSON when nothing else claims them). Same returns as lp_reader_t.read.
 */
int lp_read_input(lp_input_t *in, const lp_sink_t *sink);

/* ---- messages -------------------------------------------------------------------- */

/* "labelprof: FILE:LINE:COLUMN: MESSAGE" (or "FILE: byte OFFSET: "), newline added, to stderr. */
void lp_report(const lp_pos_t *pos, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same as a warning: "labelprof: FILE:LINE:COLUMN: warning: MESSAGE". */
void lp_warn(const lp_pos_t *pos, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
