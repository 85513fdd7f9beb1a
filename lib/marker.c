/*
 * marker.c: the live trace_marker (LABELPROF_TRACE_MARKER). env.c opens it
 * before any timeline starts; the timeline's slow paths and the
 * pseudo-stack's slow end write its B and E lines (see internal.h).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int lp__marker_fd = -1;
static int marker_pid;

int lp__marker_open(const char *value, char *why, size_t why_len) {
  static const char *const kernel[] = {"/sys/kernel/tracing/trace_marker", "/sys/kernel/debug/tracing/trace_marker"};
  int fd = -1, err = 0;
  if (strcmp(value, "1") == 0) {
    size_t n = 0;
    why[0] = '\0';
    for (size_t i = 0; i < sizeof kernel / sizeof kernel[0] && fd < 0; i++) {
      fd = open(kernel[i], O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        err = -errno;
        int r = snprintf(why + n, why_len > n ? why_len - n : 0, "%s%s: %s", n ? "; " : "", kernel[i],
                         lp_strerror(err));
        if (r > 0) n += (size_t)r;
      }
    }
  } else {
    fd = open(value, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
      err = -errno;
      snprintf(why, why_len, "%s: %s", value, lp_strerror(err));
    }
  }
  if (fd < 0) return err ? err : -ENOENT;
  marker_pid = (int)getpid();
  lp__marker_fd = fd;
  return 0;
}

void lp__marker_atfork_child(void) { marker_pid = (int)getpid(); }

void lp__marker_unhide(lp__thread_t *t) {
  if (!t->mark_hidden) return;
  t->hot.tend = t->mark_tend;
  t->mark_hidden = false;
}

void lp__marker_hide(lp__thread_t *t) {
  if (lp__marker_fd < 0 || t->mark_hidden) return;
  t->mark_tend = t->hot.tend;
  t->hot.tend = LP_IMPL_LOAD_RELAXED(t->hot.tcur);
  t->mark_hidden = true;
}

/* One write: the kernel takes a marker line per write(); a short or failed one is lost, never retried. */
static void marker_write(const char *buf, size_t n) {
  ssize_t r;
  do r = write(lp__marker_fd, buf, n);
  while (r < 0 && errno == EINTR);
}

void lp__marker_begin(lp__thread_t *t, const lp_site_t *site, uint32_t d) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "B|%d|", marker_pid);
  size_t o = n > 0 ? (size_t)n : 0;
  if (site->mode == LP_MODE_SWITCH && !t->mark_replaced) {
    /* It replaced nothing that was written: a plain scope for the readers, without [SW]. */
    lp_site_t plain = *site;
    plain.mode = LP_MODE_SCOPE;
    o += lp__site_tag(&plain, buf + o, sizeof buf - o);
  } else {
    o += lp__site_tag(site, buf + o, sizeof buf - o);
  }
  for (const char *l = lp__label(site); *l && o < sizeof buf - 2; l++) {
    unsigned char ch = (unsigned char)*l;
    buf[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
  }
  buf[o++] = '\n'; /* the kernel keeps one; a plain file needs it */
  if (d < LP_STACK_CAPACITY) {
    uint32_t extra = 0;
    if (site->mode == LP_MODE_SWITCH && t->mark_replaced) extra = t->mark_extra[d] + 1u;
    t->mark_extra[d] = (uint8_t)(extra < 255 ? extra : 255);
  }
  t->mark_replaced = false;
  marker_write(buf, o);
}

void lp__marker_end(lp__thread_t *t, uint32_t d) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "E|%d\n", marker_pid);
  if (n <= 0) return;
  if (t->mark_switching) { /* a switch ends what it replaces: the readers do that themselves on [SW] */
    t->mark_replaced = true;
    return;
  }
  uint32_t lines = 1 + (d < LP_STACK_CAPACITY ? t->mark_extra[d] : 0);
  if (d < LP_STACK_CAPACITY) t->mark_extra[d] = 0;
  for (uint32_t k = 0; k < lines; k++) marker_write(buf, (size_t)n);
}
