/*
 * reader.c: inputs (files, standard input, gzip), the choice of reader by the
 * first bytes, and the messages that name a position.
 *
 * An input is a file descriptor that can always seek: standard input that
 * cannot (a pipe) is copied once to an unlinked temporary file, so a view
 * that needs a second pass (lanes written out of order) can rewind any
 * input. Gzip is recognised by its magic bytes and read through zlib; the
 * first bytes of the decompressed stream are kept aside for sniffing.
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
#include <zlib.h>

#define HEAD_MAX 512

struct lp_input {
  const char *name;
  int fd;
  gzFile gz; /* NULL: plain */
  unsigned char head[HEAD_MAX];
  size_t head_len, head_pos; /* bytes of head not yet read */
  int head_done;             /* head has been filled */
};

const lp_reader_t *const lp_readers[] = {
    &lp_json_reader,
    &lp_systrace_reader, /* after JSON, which claims only text that starts with '{' or '[' */
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

/* Copies a pipe to an unlinked temporary file; returns its descriptor at offset 0, or -1. */
static int spool(int from, const char *name) {
  int fd = lp_temp_fd();
  if (fd < 0) {
    fprintf(stderr, "labelprof: %s: cannot make a temporary file to hold the input: %s\n", name, strerror(errno));
    return -1;
  }
  static char buf[1 << 16];
  for (;;) {
    ssize_t n = read(from, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fprintf(stderr, "labelprof: %s: %s\n", name, strerror(errno));
      close(fd);
      return -1;
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(fd, buf + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        fprintf(stderr, "labelprof: %s: writing a temporary copy: %s\n", name, strerror(errno));
        close(fd);
        return -1;
      }
      off += w;
    }
  }
  if (lseek(fd, 0, SEEK_SET) != 0) {
    fprintf(stderr, "labelprof: %s: %s\n", name, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

static ssize_t raw_read(lp_input_t *in, void *buf, size_t n) {
  if (in->gz) {
    unsigned want = n > (1u << 30) ? 1u << 30 : (unsigned)n;
    int got = gzread(in->gz, buf, want);
    if (got < 0) {
      int err;
      const char *msg = gzerror(in->gz, &err);
      const char *colon = msg ? strstr(msg, ": ") : NULL; /* zlib names the descriptor: "<fd:4>: ..." */
      if (colon && msg[0] == '<') msg = colon + 2;
      fprintf(stderr, "labelprof: %s: invalid gzip data (%s)\n", shown(in), err == Z_ERRNO ? strerror(errno) : msg);
      return -1;
    }
    return got;
  }
  for (;;) {
    ssize_t got = read(in->fd, buf, n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fprintf(stderr, "labelprof: %s: %s\n", shown(in), strerror(errno));
    return got;
  }
}

/* From offset 0 of the file: gzip or not, then the first bytes into head. */
static int start(lp_input_t *in) {
  unsigned char magic[2];
  ssize_t m = pread(in->fd, magic, 2, 0);
  if (m < 0) {
    fprintf(stderr, "labelprof: %s: %s\n", shown(in), strerror(errno));
    return -1;
  }
  if (lseek(in->fd, 0, SEEK_SET) != 0) {
    fprintf(stderr, "labelprof: %s: %s\n", shown(in), strerror(errno));
    return -1;
  }
  if (m == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    int dfd = dup(in->fd);
    if (dfd < 0 || !(in->gz = gzdopen(dfd, "rb"))) {
      if (dfd >= 0) close(dfd);
      fprintf(stderr, "labelprof: %s: cannot start gzip decompression\n", shown(in));
      return -1;
    }
    gzbuffer(in->gz, 1u << 17);
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

lp_input_t *lp_input_open(const char *path) {
  lp_input_t *in = calloc(1, sizeof *in);
  if (!in) {
    fprintf(stderr, "labelprof: out of memory\n");
    return NULL;
  }
  in->name = path;
  in->fd = -1;
  if (strcmp(path, "-") == 0) {
    if (lseek(0, 0, SEEK_CUR) == (off_t)-1) {
      in->fd = spool(0, "<stdin>");
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
      } else if (lseek(in->fd, 0, SEEK_CUR) == (off_t)-1) { /* a FIFO */
        int fd = spool(in->fd, path);
        close(in->fd);
        in->fd = fd;
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
  if (in->gz) gzclose(in->gz);
  if (in->fd >= 0) close(in->fd);
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
  if (in->gz) {
    gzclose(in->gz);
    in->gz = NULL;
  }
  if (lseek(in->fd, 0, SEEK_SET) != 0) {
    fprintf(stderr, "labelprof: %s: %s\n", shown(in), strerror(errno));
    return -1;
  }
  return start(in);
}

int lp_read_input(lp_input_t *in, const lp_sink_t *sink) {
  unsigned char head[HEAD_MAX];
  ssize_t n = lp_input_peek(in, head, sizeof head);
  if (n < 0) return LP_READ_BAD;
  for (const lp_reader_t *const *r = lp_readers; *r; r++)
    if ((*r)->sniff(head, (size_t)n)) return (*r)->read(in, sink);
  return lp_json_reader.read(in, sink); /* its messages say what was expected */
}
