/*
 * top_live.c: `labelprof top`'s live view in a terminal.
 *
 * Plain ECMA-48 and xterm escapes, which every terminal in use speaks
 * (xterm, VTE, kitty, iTerm2, Windows Terminal, tmux, screen, the Linux
 * console): the alternate screen, a hidden cursor, home and erase. Each
 * frame is built whole and written with one write(2), lines overwritten in
 * place, so nothing flickers. A terminal library would add a dependency
 * and its own signal handlers for what is here a list of lines.
 *
 * The terminal is put in non-canonical mode without echo (signals still
 * work) and restored on every way out: q, Ctrl-C, SIGTERM, SIGHUP, the
 * end of -n, an error, the process's exit followed by q. Ctrl-Z restores
 * it before stopping and takes it again when continued. The signals are
 * blocked except inside ppoll(2), so a handler only sets a flag and the
 * loop, woken by it, acts at once.
 *
 * The loop waits for the next sample's instant, a key, a signal, or the
 * process's exit (its pidfd), whichever comes first. A frame is drawn at
 * the end of each interval and after each key.
 */
#include "config.h"

#include "cmd.h"
#include "top.h"
#include "jsonesc.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define FIRST_NS 250000000u /* the first interval at most: a quarter of a second */

static volatile sig_atomic_t got_quit, got_winch, got_tstp;

static void on_signal(int sig) {
  if (sig == SIGWINCH)
    got_winch = 1;
  else if (sig == SIGTSTP)
    got_tstp = 1;
  else
    got_quit = sig;
}

typedef struct live {
  lp_top_t *t;
  struct termios saved;
  bool raw;
  sigset_t old_mask;
  unsigned rows, cols;
  uint64_t view_id; /* 0: all threads */
  int sort;
  size_t scroll;
  bool paused;
  char status[768];
  /* the frame being built */
  char *buf;
  size_t len, cap;
  bool oom;
  unsigned line_no;
} live_t;

static const int handled[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGTSTP};

bool lp_top_live_possible(char *why, size_t len) {
  const char *term = getenv("TERM");
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
    snprintf(why, len, "the live view needs a terminal (standard input and output are not one)");
    return false;
  }
  if (!term || !*term || strcmp(term, "dumb") == 0) {
    snprintf(why, len, "the live view needs a terminal that moves its cursor (TERM is %s)",
             term && *term ? term : "unset");
    return false;
  }
  return true;
}

/* ---- the terminal ---- */

static int write_all(const char *s, size_t n) {
  while (n) {
    ssize_t w = write(STDOUT_FILENO, s, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

static void restore(live_t *l) {
  if (!l->raw) return;
  static const char leave[] = "\x1b[?25h\x1b[?1049l"; /* cursor back, main screen back */
  (void)write_all(leave, sizeof leave - 1);
  tcsetattr(STDIN_FILENO, TCSAFLUSH, &l->saved);
  l->raw = false;
}

static int enter(live_t *l) {
  if (tcgetattr(STDIN_FILENO, &l->saved) != 0) return -1;
  struct termios raw = l->saved;
  raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0) return -1;
  l->raw = true;
  static const char begin[] = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J"; /* alternate screen, no cursor, cleared */
  return write_all(begin, sizeof begin - 1);
}

static void size_of_terminal(live_t *l) {
  struct winsize ws;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
    l->rows = ws.ws_row;
    l->cols = ws.ws_col;
  } else {
    l->rows = 24;
    l->cols = 80;
  }
}

/* ---- building a frame ---- */

static void put(live_t *l, const char *s, size_t n) {
  if (l->oom) return;
  if (l->len + n > l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 8192;
    while (cap < l->len + n) cap *= 2;
    char *b = realloc(l->buf, cap);
    if (!b) {
      l->oom = true;
      return;
    }
    l->buf = b;
    l->cap = cap;
  }
  memcpy(l->buf + l->len, s, n);
  l->len += n;
}

/*
 * One line of the screen, cut to its width. Labels and names come from
 * the process: whatever they hold must not move the cursor or change the
 * terminal, so control characters (C0, DEL, and C1 as UTF-8, which some
 * terminals obey) and bytes that are not valid UTF-8 become '?'. A UTF-8
 * sequence counts as one column (wide characters are rare in labels; a
 * cut one costs a column).
 */
static void line(live_t *l, bool inverse, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line(live_t *l, bool inverse, const char *fmt, ...) {
  if (l->line_no >= l->rows) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (l->line_no) put(l, "\r\n", 2);
  if (inverse) put(l, "\x1b[7m", 4);
  unsigned col = 0;
  const unsigned char *c = (const unsigned char *)text, *end = c + strlen(text);
  while (c < end && col < l->cols) {
    unsigned cp = *c;
    size_t n = *c < 0x80 ? 1 : lp__utf8_seq(c, end, &cp);
    if (n == 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
      put(l, "?", 1);
      c += n ? n : 1;
    } else {
      put(l, (const char *)c, n);
      c += n;
    }
    col++;
  }
  if (inverse) {
    for (; col < l->cols; col++) put(l, " ", 1);
    put(l, "\x1b[m", 3);
  }
  put(l, "\x1b[K", 3);
  l->line_no++;
}

static const char *const sort_names[] = {"last interval", "since attach", "label"};

static double pct(uint64_t v, uint64_t of) { return of ? 100.0 * (double)v / (double)of : 0.0; }

static void draw(live_t *l) {
  lp_top_t *t = l->t;
  size_of_terminal(l);
  l->len = 0;
  l->oom = false;
  l->line_no = 0;
  put(l, "\x1b[H", 3);
  uint64_t all_ns = lp_top_window_ns(t, LP_TOP_ALL), last_ns = lp_top_window_ns(t, LP_TOP_LAST);
  unsigned secs = (unsigned)(all_ns / 1000000000u);
  line(l, false, "labelprof top - process %d (%s, labelprof %s) - attached %u:%02u:%02u", (int)t->pid,
       lp_remote_comm(t->r), lp_remote_lib_version(t->r), secs / 3600, secs / 60 % 60, secs % 60);
  unsigned live = 0;
  for (size_t i = 0; i < t->nthreads; i++) live += t->threads[i]->live;
  line(l, false, "%.0f Hz of %u (%" PRIu64 " missed) - %u threads - labelprof top %.1f%% of one CPU - interval %.2g s%s",
       last_ns ? (double)t->passes[LP_TOP_LAST] * 1e9 / (double)last_ns : 0.0, t->hz, t->missed[LP_TOP_LAST], live,
       last_ns ? 100.0 * (double)lp_top_window_cpu(t, LP_TOP_LAST) / (double)last_ns : 0.0,
       (double)t->interval_ns / 1e9, l->paused ? " - PAUSED" : "");
  /* The tree of the view: all threads, or one. */
  const lp_top_thread_t *th = l->view_id ? lp_top_find_thread(t, l->view_id) : NULL;
  if (l->view_id && !th) l->view_id = 0; /* it was forgotten */
  const lp_top_tree_t *tree = th ? &th->tree : &t->all;
  if (th)
    line(l, false, "view: thread %" PRIu64 " \"%s\"%s - sort: %s", th->tid, th->name, th->live ? "" : " (exited)",
         sort_names[l->sort]);
  else
    line(l, false, "view: all threads - sort: %s", sort_names[l->sort]);
  line(l, true, "%7s %7s  %s", "LAST", "TOTAL", "LABEL");
  size_t n = 0;
  lp_top_line_t *lines = lp_top_lines(t, tree, l->sort, 0.0, &n);
  uint64_t dl = tree->nodes[0].total[LP_TOP_LAST], da = tree->nodes[0].total[LP_TOP_ALL];
  /* Rows: 4 above, the threads (at most a third of the screen) and 2 below. */
  unsigned nth = (unsigned)(t->nthreads < l->rows / 3 ? t->nthreads : l->rows / 3);
  unsigned room = l->rows > 6 + nth + 1 ? l->rows - 6 - nth - 1 : 1;
  if (l->scroll + room > n) l->scroll = n > room ? n - room : 0;
  if (!lines) {
    line(l, false, "(out of memory)");
  } else {
    for (size_t i = l->scroll; i < n && i < l->scroll + room; i++)
      line(l, false, "%6.1f%% %6.1f%%  %*s%s", pct(lines[i].v[LP_TOP_LAST], dl), pct(lines[i].v[LP_TOP_ALL], da),
           (int)(lines[i].depth * 4), "", lines[i].text);
    for (size_t i = n - l->scroll; i < room && n >= l->scroll; i++) line(l, false, "%s", "");
  }
  free(lines);
  line(l, true, "%-8s %-20s %9s %9s  %s", "TID", "THREAD", "SAMPLES", "IN LABELS",
       nth < t->nthreads ? "(t, T: more)" : "");
  /* The view's thread first when it would not fit, then the others in order of arrival. */
  unsigned shown = 0;
  for (size_t i = 0; i < t->nthreads && shown < nth; i++) {
    const lp_top_thread_t *x = t->threads[i];
    const lp_top_node_t *root = &x->tree.nodes[0];
    line(l, false, "%c%-7" PRIu64 " %-20.20s %9" PRIu64 " %8.1f%%%s", x->id == l->view_id ? '*' : ' ', x->tid, x->name,
         x->samples[LP_TOP_LAST], pct(root->total[LP_TOP_LAST] - root->self[LP_TOP_LAST], root->total[LP_TOP_LAST]),
         x->live ? "" : "  exited");
    shown++;
  }
  while (l->line_no < l->rows - 1) line(l, false, "%s", "");
  if (l->status[0])
    line(l, true, "%s", l->status);
  else
    line(l, true, "q quit  t/T next/previous thread  a all  +/- interval  s sort  p pause  arrows, PgUp/PgDn scroll");
  put(l, "\x1b[J", 3);
  if (!l->oom) (void)write_all(l->buf, l->len);
}

/* ---- keys ---- */

static void next_thread(live_t *l, int dir) {
  lp_top_t *t = l->t;
  if (!t->nthreads) return;
  size_t at = t->nthreads; /* "all" sits before the first */
  for (size_t i = 0; i < t->nthreads; i++)
    if (t->threads[i]->id == l->view_id) at = i;
  size_t slots = t->nthreads + 1;
  at = (at + slots + (dir > 0 ? 1 : slots - 1)) % slots;
  l->view_id = at == t->nthreads ? 0 : t->threads[at]->id;
  l->scroll = 0;
}

static const double intervals[] = {0.25, 0.5, 1, 2, 5, 10, 30, 60};

static void change_interval(live_t *l, int dir) {
  double s = (double)l->t->interval_ns / 1e9, to = s;
  size_t n = sizeof intervals / sizeof intervals[0];
  for (size_t i = 0; i < n; i++)
    if (dir > 0 && intervals[i] > s * 1.001) {
      to = intervals[i];
      break;
    }
  for (size_t i = n; dir < 0 && i-- > 0;)
    if (intervals[i] < s * 0.999) {
      to = intervals[i];
      break;
    }
  l->t->interval_ns = (uint64_t)(to * 1e9);
}

/* Handles the keys in buf; returns true when asked to quit. */
static bool keys(live_t *l, const char *buf, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char c = buf[i];
    if (c == '\x1b' && i + 2 < n && buf[i + 1] == '[') {
      char k = buf[i + 2];
      size_t used = 2;
      if (k == 'A' && l->scroll > 0) l->scroll--;
      if (k == 'B') l->scroll++;
      if (k == 'H') l->scroll = 0;
      if (k == 'F') l->scroll = SIZE_MAX / 2;
      if ((k == '5' || k == '6') && i + 3 < n && buf[i + 3] == '~') {
        size_t page = l->rows > 12 ? l->rows - 12 : 1;
        if (k == '5') l->scroll = l->scroll > page ? l->scroll - page : 0;
        if (k == '6') l->scroll += page;
        used = 3;
      }
      i += used;
      continue;
    }
    switch (c) {
    case 'q':
    case 'Q':
      return true;
    case 't':
      next_thread(l, 1);
      break;
    case 'T':
      next_thread(l, -1);
      break;
    case 'a':
      l->view_id = 0;
      l->scroll = 0;
      break;
    case '+':
    case '=':
      change_interval(l, 1);
      break;
    case '-':
    case '_':
      change_interval(l, -1);
      break;
    case 's':
      l->sort = (l->sort + 1) % LP_TOP_SORTS;
      break;
    case 'p':
    case ' ':
      l->paused = !l->paused;
      break;
    default:
      break;
    }
  }
  return false;
}

/* ---- the loop ---- */

/* Waits until at, a key, a signal or the process's exit. Returns the bytes read from the terminal (0 if none). */
static ssize_t wait_for(live_t *l, uint64_t at, char *buf, size_t len, bool *process_done) {
  uint64_t now = lp_top_now();
  struct timespec ts = {0, 0};
  if (at > now) ts = (struct timespec){(time_t)((at - now) / 1000000000u), (long)((at - now) % 1000000000u)};
  struct pollfd p[2] = {{STDIN_FILENO, POLLIN, 0}, {l->t->pidfd, POLLIN, 0}};
  int n = ppoll(p, l->t->pidfd >= 0 && !l->t->exited ? 2 : 1, at == UINT64_MAX ? NULL : &ts, &l->old_mask);
  if (n <= 0) return 0;
  if (p[1].revents) *process_done = true;
  if (p[0].revents & (POLLHUP | POLLERR)) {
    got_quit = SIGHUP;
    return 0;
  }
  if (!(p[0].revents & POLLIN)) return 0;
  ssize_t r = read(STDIN_FILENO, buf, len);
  return r > 0 ? r : 0;
}

static void stop_for_tstp(live_t *l) {
  got_tstp = 0;
  restore(l);
  /* Stop as the shell expects, then take the terminal again. */
  signal(SIGTSTP, SIG_DFL);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTSTP);
  sigprocmask(SIG_UNBLOCK, &s, NULL);
  raise(SIGTSTP);
  sigprocmask(SIG_BLOCK, &s, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTSTP, &sa, NULL);
  if (enter(l) != 0) got_quit = SIGHUP;
}

int lp_top_live(lp_top_t *t) {
  live_t l;
  memset(&l, 0, sizeof l);
  l.t = t;
  struct sigaction sa, old[sizeof handled / sizeof handled[0]];
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigset_t block;
  sigemptyset(&block);
  for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++) sigaddset(&block, handled[i]);
  sigprocmask(SIG_BLOCK, &block, &l.old_mask);
  for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++) sigaction(handled[i], &sa, &old[i]);
  int status = LP_EXIT_OK;
  if (enter(&l) != 0) {
    restore(&l);
    fprintf(stderr, "labelprof top: cannot set up the terminal: %s\n", strerror(errno));
    status = LP_EXIT_BAD;
    goto out;
  }
  snprintf(l.status, sizeof l.status, "sampling process %d at %u Hz", (int)t->pid, t->hz);
  draw(&l);
  /* The first interval is short, so that the tree shows at once; the others are as asked. */
  uint64_t pstart = t->begin_ns[LP_TOP_ALL];
  uint64_t end = pstart + (t->interval_ns < FIRST_NS ? t->interval_ns : FIRST_NS);
  uint64_t at = lp_top_next_instant(t, &pstart);
  for (;;) {
    if (got_quit) break;
    if (got_tstp) {
      stop_for_tstp(&l);
      draw(&l);
      continue;
    }
    if (got_winch) {
      got_winch = 0;
      draw(&l);
    }
    char buf[64];
    bool done = false;
    uint64_t until = t->exited ? UINT64_MAX : at < end ? at : end;
    ssize_t n = wait_for(&l, until, buf, sizeof buf, &done);
    if (n > 0) {
      if (keys(&l, buf, (size_t)n)) break;
      draw(&l);
    }
    if (t->exited) continue;
    uint64_t now = lp_top_now();
    if (now >= end) {
      t->now_ns = now;
      lp_top_end_interval(t);
      l.status[0] = '\0';
      if (!l.paused) draw(&l);
      if (t->count && t->snapshots >= t->count) break;
      end += t->interval_ns;
      if (end <= now) end = now + t->interval_ns;
    }
    if (done || now >= at) {
      int rc = lp_top_sample(t);
      if (rc) {
        t->exited = true;
        t->now_ns = lp_top_now();
        lp_top_end_interval(t);
        snprintf(l.status, sizeof l.status, "%s after %.1f s; the view holds what was sampled; q quits", t->why,
                 (double)lp_top_window_ns(t, LP_TOP_ALL) / 1e9);
        draw(&l);
        continue;
      }
      pstart += 1000000000u / t->hz;
      at = lp_top_next_instant(t, &pstart);
    }
  }
out:
  restore(&l);
  for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++) sigaction(handled[i], &old[i], NULL);
  sigprocmask(SIG_SETMASK, &l.old_mask, NULL);
  free(l.buf);
  if (got_quit && got_quit != SIGINT && status == LP_EXIT_OK) status = 128 + got_quit;
  return status;
}
