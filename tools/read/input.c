/*
 * input.c: inputs (files, standard input, gzip), the choice of reader by the
 * first bytes, and the messages that name a position.
 *
 * An input can always start again from its first byte: standard input or a
 * FIFO that cannot seek (a pipe) is copied, as it is read and no sooner, to
 * an unlinked temporary file, so a view that needs a second pass (lanes
 * written out of order, nnapi) rewinds any input, while an input whose first
 * bytes no reader knows is refused before more than those are read. A copy
 * that fails on the way (a full disk) loses nothing of the first pass; only
 * a second one is then refused, saying why. Gzip is recognised by its magic bytes and inflated with zlib,
 * every member in turn as zcat does; bytes after the last member, or a
 * member cut short, are errors at their compressed byte offset. The first
 * bytes of the decompressed stream are kept aside for sniffing.
 */
#include "config.h"

#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdbool.h>
#include <zlib.h>

#define ZIN (1u << 17)

#define HEAD_MAX 512

struct lp_input {
  const char *name;
  int fd;
  /* A pipe: fd is the pipe, spool the copy of what was read from it; a pass reads the copy up to `spooled`, then
     the pipe, appending to the copy. */
  int spool;           /* -1: fd can seek */
  uint64_t spooled;    /* bytes in the copy */
  uint64_t raw;        /* bytes of the input read in this pass */
  int spool_error;     /* the copy failed (errno): no second pass */
  z_stream *gz; /* NULL: plain */
  unsigned char *zin;  /* compressed bytes read, not yet inflated */
  uint64_t zread;      /* compressed bytes read from the file so far */
  bool zeof;           /* the file's end was reached */
  bool member_done;    /* a gzip member ended: another, or the end, must follow */
  unsigned char head[HEAD_MAX];
  size_t head_len, head_pos; /* bytes of head not yet read */
  int head_done;             /* head has been filled */
};

const lp_reader_t *const lp_readers[] = {
    &lp_json_reader,
    &lp_systrace_reader, /* after JSON, which claims only text that starts with '{' or '[' */
    &lp_folded_reader,   /* tools/read/profile.c: text whose first line ends in " NUMBER" */
    &lp_pprof_reader,    /* before Perfetto: 0x0a LEN 0x08, a ValueType, which no TracePacket starts with */
    &lp_perfetto_reader, /* last: binary, its first byte a packet's tag (0x0a), which text may also start with */
    NULL,
};

static void vmsg(const lp_pos_t *pos, const char *kind, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
static void vmsg(const lp_pos_t *pos, const char *kind, const char *fmt, va_list ap) {
  fputs("labelprof: ", stderr);
  if (pos && pos->file) {
    const char *f = strcmp(pos->file, "-") == 0 ? "<stdin>" : pos->file;
    if (pos->line)
      fprintf(stderr, "%s:%llu:%llu: ", f, (unsigned long long)pos->line, (unsigned long long)pos->column);
    else
      fprintf(stderr, "%s: byte %llu: ", f, (unsigned long long)pos->offset);
  }
  fputs(kind, stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

void lp_report(const lp_pos_t *pos, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmsg(pos, "", fmt, ap);
  va_end(ap);
}

void lp_warn(const lp_pos_t *pos, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vmsg(pos, "warning: ", fmt, ap);
  va_end(ap);
}

/* ---- memory ---------------------------------------------------------------------- */

int lp_mem_fail(const lp_mem_t *m, const lp_pos_t *pos) {
  if (m && m->over) {
    uint64_t c = m->cap;
    unsigned shift = c % (1ull << 30) == 0 ? 30 : c % (1ull << 20) == 0 ? 20 : c % 1024 == 0 ? 10 : 0;
    lp_report(pos, "this trace needs more than %llu %s of memory (the cap, --max-memory) for its labels, lanes, "
                   "paths and the reader's tables: stopped here",
              (unsigned long long)(c >> shift), shift == 30 ? "GiB" : shift == 20 ? "MiB" : shift ? "KiB" : "bytes");
  } else {
    lp_report(pos, "out of memory");
  }
  return LP_READ_BAD;
}

/* ---- names ---------------------------------------------------------------------- */

#define NUL_TEXT "\\u0000"

size_t lp_name_len(const void *s, size_t n) {
  if (!n) return 0; /* s may be NULL then */
  size_t len = n;
  for (const char *p = s, *end = p + n; (p = memchr(p, '\0', (size_t)(end - p))) != NULL; p++) len += 5;
  return len;
}

char *lp_name_put(char *dst, const void *s, size_t n) {
  if (!n) { /* s may be NULL then */
    dst[0] = '\0';
    return dst;
  }
  const char *p = s, *end = p + n;
  char *o = dst;
  for (const char *nul; (nul = memchr(p, '\0', (size_t)(end - p))) != NULL; p = nul + 1) {
    memcpy(o, p, (size_t)(nul - p));
    o += nul - p;
    memcpy(o, NUL_TEXT, 6);
    o += 6;
  }
  memcpy(o, p, (size_t)(end - p));
  o[end - p] = '\0';
  return dst;
}

/* ---- inputs ---------------------------------------------------------------------- */

static const char *shown(const lp_input_t *in) { return strcmp(in->name, "-") == 0 ? "<stdin>" : in->name; }

const char *lp_input_name(const lp_input_t *in) { return in->name; }

int lp_temp_fd(void) {
  const char *dir = getenv("TMPDIR");
  char path[4096];
  if (!dir || !*dir || strlen(dir) > sizeof path - 32) dir = "/tmp";
  snprintf(path, sizeof path, "%s/labelprof-XXXXXX", dir);
  int fd = mkstemp(path);
  if (fd >= 0) unlink(path);
  return fd;
}

static ssize_t pipe_read(lp_input_t *in, void *buf, size_t n) {
  if (in->raw < in->spooled && !in->spool_error) { /* what an earlier pass read, from the copy */
    uint64_t left = in->spooled - in->raw;
    ssize_t got = pread(in->spool, buf, n < left ? n : (size_t)left, (off_t)in->raw);
    if (got < 0) {
      fprintf(stderr, "labelprof: %s: reading its temporary copy: %s\n", shown(in), strerror(errno));
      return -1;
    }
    in->raw += (uint64_t)got;
    return got;
  }
  ssize_t got;
  do got = read(in->fd, buf, n);
  while (got < 0 && errno == EINTR);
  if (got < 0) {
    fprintf(stderr, "labelprof: %s: %s\n", shown(in), strerror(errno));
    return -1;
  }
  in->raw += (uint64_t)got;
  for (ssize_t off = 0; off < got && !in->spool_error;) {
    ssize_t w = pwrite(in->spool, (const char *)buf + off, (size_t)(got - off), (off_t)in->spooled);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      in->spool_error = w < 0 ? errno : EIO; /* this pass goes on; a second one is refused */
      break;
    }
    off += w;
    in->spooled += (uint64_t)w;
  }
  return got;
}

static ssize_t fd_read(lp_input_t *in, void *buf, size_t n) {
  if (in->spool >= 0) return pipe_read(in, buf, n);
  for (;;) {
    ssize_t got = read(in->fd, buf, n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fprintf(stderr, "labelprof: %s: %s\n", shown(in), strerror(errno));
    return got;
  }
}

/* Back to the first byte of the input: 0, or -1 after a message. */
static int raw_rewind(lp_input_t *in) {
  if (in->spool < 0) {
    if (lseek(in->fd, 0, SEEK_SET) == 0) return 0;
    fprintf(stderr, "labelprof: %s: %s\n", shown(in), strerror(errno));
    return -1;
  }
  if (in->spool_error) {
    fprintf(stderr,
            "labelprof: %s: cannot read it a second time: its copy in the temporary directory (TMPDIR) failed "
            "after %llu bytes: %s; give the file itself, or make room there\n",
            shown(in), (unsigned long long)in->spooled, strerror(in->spool_error));
    return -1;
  }
  in->raw = 0;
  return 0;
}

/* A message about the compressed bytes, at the offset of the first one not yet inflated. */
static ssize_t gz_bad(lp_input_t *in, const char *what, const char *detail) {
  lp_pos_t pos = {in->name, in->zread - in->gz->avail_in, 0, 0};
  if (detail)
    lp_report(&pos, "%s (%s), in the compressed file", what, detail);
  else
    lp_report(&pos, "%s, in the compressed file", what);
  return -1;
}

/*
 * Inflates every member of a gzip file in turn, as zcat does; what follows
 * the last member must be the end of the file, anything else is an error,
 * and so is a member cut short.
 */
static ssize_t gz_read(lp_input_t *in, void *buf, size_t n) {
  z_stream *z = in->gz;
  unsigned want = n > (1u << 30) ? 1u << 30 : (unsigned)n;
  z->next_out = buf;
  z->avail_out = want;
  for (;;) {
    if (z->avail_in < 2 && !in->zeof) { /* two bytes: a member's magic */
      if (z->avail_in) memmove(in->zin, z->next_in, z->avail_in);
      ssize_t got = fd_read(in, in->zin + z->avail_in, ZIN - z->avail_in);
      if (got < 0) return -1;
      if (got == 0) in->zeof = true;
      in->zread += (uint64_t)got;
      z->next_in = in->zin;
      z->avail_in += (unsigned)got;
    }
    if (in->member_done) {
      if (!z->avail_in && in->zeof) return (ssize_t)(want - z->avail_out); /* the end */
      if (z->avail_in < 2 && !in->zeof) continue;
      if (z->avail_in < 2 || z->next_in[0] != 0x1f || z->next_in[1] != 0x8b)
        return gz_bad(in, "trailing garbage after the gzip data (expected another gzip member or the end)", NULL);
      if (inflateReset(z) != Z_OK) return gz_bad(in, "invalid gzip data", z->msg);
      in->member_done = false;
    }
    if (!z->avail_in && in->zeof) return gz_bad(in, "unexpected end of the gzip data (a truncated file?)", NULL);
    int rc = inflate(z, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) in->member_done = true;
    else if (rc == Z_MEM_ERROR) return gz_bad(in, "out of memory", NULL);
    else if (rc != Z_OK && rc != Z_BUF_ERROR) return gz_bad(in, "invalid gzip data", z->msg ? z->msg : "corrupt");
    if (z->avail_out < want) return (ssize_t)(want - z->avail_out);
  }
}

static ssize_t raw_read(lp_input_t *in, void *buf, size_t n) {
  if (in->gz) return gz_read(in, buf, n);
  return fd_read(in, buf, n);
}

static void gz_end(lp_input_t *in) {
  if (!in->gz) return;
  inflateEnd(in->gz);
  free(in->gz);
  free(in->zin);
  in->gz = NULL;
  in->zin = NULL;
}

/* From the input's first byte: gzip or not, then the first bytes into head. */
static int start(lp_input_t *in) {
  unsigned char magic[2];
  ssize_t m = 0;
  while (m < 2) { /* a pipe may give them one at a time */
    ssize_t got = fd_read(in, magic + m, (size_t)(2 - m));
    if (got < 0) return -1;
    if (got == 0) break;
    m += got;
  }
  if (in->spool_error) { /* not even the first bytes could be kept */
    fprintf(stderr, "labelprof: %s: cannot copy it to the temporary directory (TMPDIR): %s\n", shown(in),
            strerror(in->spool_error));
    return -1;
  }
  if (raw_rewind(in) != 0) return -1;
  if (m == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    in->gz = calloc(1, sizeof *in->gz);
    in->zin = malloc(ZIN);
    if (!in->gz || !in->zin || inflateInit2(in->gz, 16 + MAX_WBITS) != Z_OK) {
      free(in->gz);
      free(in->zin);
      in->gz = NULL;
      in->zin = NULL;
      fprintf(stderr, "labelprof: %s: cannot start gzip decompression\n", shown(in));
      return -1;
    }
    in->zread = 0;
    in->zeof = in->member_done = false;
  }
  in->head_len = in->head_pos = 0;
  while (in->head_len < HEAD_MAX) {
    ssize_t got = raw_read(in, in->head + in->head_len, HEAD_MAX - in->head_len);
    if (got < 0) return -1;
    if (got == 0) break;
    in->head_len += (size_t)got;
  }
  return 0;
}

/* The unlinked temporary file that keeps what is read from the pipe in->fd; 0, or -1 after a message. */
static int pipe_spool(lp_input_t *in) {
  in->spool = lp_temp_fd();
  if (in->spool >= 0) return 0;
  fprintf(stderr, "labelprof: %s: cannot make a temporary file to hold the input: %s\n", shown(in), strerror(errno));
  return -1;
}

lp_input_t *lp_input_open(const char *path) {
  lp_input_t *in = calloc(1, sizeof *in);
  if (!in) {
    fprintf(stderr, "labelprof: out of memory\n");
    return NULL;
  }
  in->name = path;
  in->fd = -1;
  in->spool = -1;
  if (strcmp(path, "-") == 0) {
    if (lseek(0, 0, SEEK_CUR) == (off_t)-1) {
      in->fd = dup(0);
      if (in->fd < 0) {
        fprintf(stderr, "labelprof: <stdin>: %s\n", strerror(errno));
      } else if (pipe_spool(in) != 0) {
        close(in->fd);
        in->fd = -1;
      }
    } else {
      in->fd = dup(0);
      if (in->fd >= 0 && lseek(in->fd, 0, SEEK_SET) != 0) {
        close(in->fd);
        in->fd = -1;
      }
      if (in->fd < 0) fprintf(stderr, "labelprof: <stdin>: %s\n", strerror(errno));
    }
  } else {
    in->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (in->fd < 0) {
      fprintf(stderr, "labelprof: %s: %s\n", path, strerror(errno));
    } else {
      struct stat st;
      if (fstat(in->fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "labelprof: %s: is a directory\n", path);
        close(in->fd);
        in->fd = -1;
      } else if (lseek(in->fd, 0, SEEK_CUR) == (off_t)-1 && pipe_spool(in) != 0) { /* a FIFO */
        close(in->fd);
        in->fd = -1;
      }
    }
  }
  if (in->fd < 0 || start(in) != 0) {
    lp_input_close(in);
    return NULL;
  }
  return in;
}

void lp_input_close(lp_input_t *in) {
  if (!in) return;
  gz_end(in);
  if (in->fd >= 0) close(in->fd);
  if (in->spool >= 0) close(in->spool);
  free(in);
}

ssize_t lp_input_read(lp_input_t *in, void *buf, size_t n) {
  if (in->head_pos < in->head_len) {
    size_t k = in->head_len - in->head_pos;
    if (k > n) k = n;
    memcpy(buf, in->head + in->head_pos, k);
    in->head_pos += k;
    return (ssize_t)k;
  }
  return raw_read(in, buf, n);
}

ssize_t lp_input_peek(lp_input_t *in, void *buf, size_t n) {
  size_t k = in->head_len - in->head_pos;
  if (k > n) k = n;
  memcpy(buf, in->head + in->head_pos, k);
  return (ssize_t)k;
}

int lp_input_rewind(lp_input_t *in) {
  gz_end(in);
  if (raw_rewind(in) != 0) return -1;
  return start(in);
}

int lp_read_input(lp_input_t *in, const lp_sink_t *sink) {
  unsigned char head[HEAD_MAX];
  ssize_t n = lp_input_peek(in, head, sizeof head);
  if (n < 0) return LP_READ_BAD;
  for (const lp_reader_t *const *r = lp_readers; *r; r++)
    if ((*r)->sniff(head, (size_t)n)) return (*r)->read(in, sink);
  /* No reader knows the first bytes: where the file leaves every format, and what each starts with. */
  lp_pos_t pos = {lp_input_name(in), 0, 1, 1};
  while (pos.offset < (uint64_t)n && strchr(" \t\r\n", head[pos.offset]) && head[pos.offset]) {
    if (head[pos.offset++] == '\n') {
      pos.line++;
      pos.column = 1;
    } else {
      pos.column++;
    }
  }
  if (pos.offset == (uint64_t)n) return lp_json_reader.read(in, sink); /* empty: its message says so */
  lp_report(&pos, "not a format labelprof reads: a JSON trace starts with '{' or '[', and this is not Perfetto "
                  "protobuf, systrace or ftrace text, folded stacks or a pprof profile either (each is known by its "
                  "first bytes, also gzip-compressed)");
  return LP_READ_BAD;
}
