/*
 * runner.h: the CUnit entry point shared by the test binaries.
 *
 * CUnit's basic runner returns 0 even when tests fail, so the exit status is
 * taken from the failure counts.
 */
#ifndef LP_TESTS_RUNNER_H
#define LP_TESTS_RUNNER_H

#include <CUnit/Basic.h>
#include <errno.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LP_TEST(fn) {#fn, fn}

/*
 * LP_TEST_ONLY=name[,name...] runs only the tests so named (to repeat one,
 * under load or a debugger); none of them in this program: exit status 2.
 */
static inline int lp_test_only(const char *name) {
  const char *only = getenv("LP_TEST_ONLY");
  if (!only || !*only) return 1;
  size_t n = strlen(name);
  for (const char *p = only; *p;) {
    size_t len = strcspn(p, ",");
    if (len == n && strncmp(p, name, n) == 0) return 1;
    p += len + (p[len] == ',');
  }
  return 0;
}

static inline int lp_test_main(const char *suite, CU_TestInfo *tests) {
  size_t k = 0;
  for (size_t i = 0; tests[i].pName; i++)
    if (lp_test_only(tests[i].pName)) tests[k++] = tests[i];
  tests[k] = (CU_TestInfo)CU_TEST_INFO_NULL;
  if (k == 0) {
    fprintf(stderr, "%s: no test here is named in LP_TEST_ONLY='%s'\n", suite, getenv("LP_TEST_ONLY"));
    return 2;
  }
  CU_SuiteInfo suites[] = {{suite, NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  if (CU_register_suites(suites) != CUE_SUCCESS) {
    fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
    CU_cleanup_registry();
    return 2;
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_suites_failed() +
                    CU_get_number_of_tests_failed();
  unsigned ran = CU_get_number_of_tests_run();
  CU_cleanup_registry();
  if (ran == 0) return 2;
  return failed ? 1 : 0;
}

/* True when built with a sanitizer that slows code down a lot: loops are scaled down, never skipped. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define LP_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define LP_TEST_SANITIZED 1
#endif
#endif
#ifndef LP_TEST_SANITIZED
#define LP_TEST_SANITIZED 0
#endif

/*
 * LP_TEST_SLOW=N (1 to 1000): the tests run about N times slower than
 * natively, as under qemu-user emulation (CI's aarch64 stage sets it). Tests
 * whose loops or timing bands assume native speed scale them by N; none is
 * skipped. Set it only where the tests really are that slow: a native run
 * told it is slow does N times the work. Unset or empty means 1; any other
 * value stops the test with a hard error (exit 99).
 * (Not a LABELPROF_* name: those are the library's.)
 */
static inline unsigned lp_test_slow(void) {
  const char *s = getenv("LP_TEST_SLOW");
  char *end;
  unsigned long n;
  if (!s || !*s) return 1;
  n = strtoul(s, &end, 10);
  if (*end || n < 1 || n > 1000) {
    fprintf(stderr, "LP_TEST_SLOW=%s: expected a whole number from 1 to 1000\n", s);
    exit(99);
  }
  return (unsigned)n;
}

/*
 * The test program's temporary directory: made under $TMPDIR (/tmp when
 * unset) as lp-TAG-XXXXXX by the first call (later calls return the same
 * one, whatever their tag), and removed with everything in it when the
 * program exits, whether its tests passed or failed. A child forked from the
 * program leaves it alone. Returns its path; a directory that cannot be made
 * stops the program with exit status 2 (an error, not a failed test).
 */
static char lp_test_dir_path[160];
static pid_t lp_test_dir_owner;

/* Removes path and, for a directory, everything in it (links are removed, never followed). */
static inline void lp_test_rm_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    if (d) {
      for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        size_t n = strlen(path) + strlen(e->d_name) + 2;
        char *sub = (char *)malloc(n);
        if (!sub) continue;
        snprintf(sub, n, "%s/%s", path, e->d_name);
        lp_test_rm_tree(sub);
        free(sub);
      }
      closedir(d);
    }
    if (rmdir(path) != 0) fprintf(stderr, "cannot remove %s: %s\n", path, strerror(errno));
  } else if (unlink(path) != 0) {
    fprintf(stderr, "cannot remove %s: %s\n", path, strerror(errno));
  }
}

static inline void lp_test_tmpdir_remove(void) {
  if (!lp_test_dir_path[0] || getpid() != lp_test_dir_owner) return;
  lp_test_rm_tree(lp_test_dir_path);
  lp_test_dir_path[0] = '\0';
}

static inline const char *lp_test_tmpdir(const char *tag) {
  if (lp_test_dir_path[0]) return lp_test_dir_path; /* one per program: the first call's tag names it */
  const char *t = getenv("TMPDIR");
  if (!t || !*t) t = "/tmp";
  /* The tests build file names in buffers of 256 bytes from this path. */
  int n = snprintf(lp_test_dir_path, sizeof lp_test_dir_path, "%s/lp-%s-XXXXXX", t, tag);
  if (n < 0 || (size_t)n >= sizeof lp_test_dir_path - 32) {
    fprintf(stderr, "TMPDIR=%s is too long for the tests (at most %zu bytes)\n", t,
            sizeof lp_test_dir_path - 32 - strlen(tag) - 12);
    exit(2);
  }
  if (!mkdtemp(lp_test_dir_path)) {
    fprintf(stderr, "cannot make a directory %s: %s\n", lp_test_dir_path, strerror(errno));
    exit(2);
  }
  lp_test_dir_owner = getpid();
  if (atexit(lp_test_tmpdir_remove) != 0) {
    lp_test_tmpdir_remove();
    fprintf(stderr, "atexit failed\n");
    exit(2);
  }
  return lp_test_dir_path;
}

/* The whole file as a string (free it), or NULL if it cannot be read. */
static inline char *lp_test_slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, len = 0, n;
  char chunk[4096];
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      char *nb = (char *)realloc(buf, cap);
      if (!nb) break;
      buf = nb;
    }
    memcpy(buf + len, chunk, n);
    len += n;
  }
  fclose(f);
  if (!buf)
    buf = (char *)calloc(1, 1);
  else
    buf[len] = '\0';
  return buf;
}


/*
 * ---- child processes ----
 * Every wait for a child here has a deadline: a child that hangs is killed
 * (SIGKILL) and reported, so that a hang fails its test instead of the
 * whole suite. LP_TEST_CHILD_SECONDS is the default, scaled by
 * lp_test_slow() and, under a sanitizer, by 4.
 */
#define LP_TEST_CHILD_SECONDS 120u

static inline unsigned lp_test_child_seconds(unsigned seconds) {
  return (seconds ? seconds : LP_TEST_CHILD_SECONDS) * lp_test_slow() * (LP_TEST_SANITIZED ? 4u : 1u);
}

/*
 * What a child that did not exit was doing, for the log: each of its
 * threads' state, CPU time and the system call it is in (from /proc), so
 * that a hang says whether it spun or waited, and where.
 */
static inline void lp_test_show_stuck(pid_t pid) {
  char dir[64], path[400], buf[512];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char state = '?', comm[64] = "?", sys[64] = "?", wchan[64] = "?";
    unsigned long ut = 0, st = 0;
    snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
    FILE *f = fopen(path, "r");
    if (f) {
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      buf[n] = '\0';
      fclose(f);
      char *open = strchr(buf, '('), *close = strrchr(buf, ')');
      if (open && close && close > open) {
        snprintf(comm, sizeof comm, "%.*s", (int)(close - open - 1), open + 1);
        /* after ") ": state, then fields 4..13, utime (14), stime (15) */
        if (sscanf(close + 2, "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %lu %lu", &state, &ut, &st) < 1) state = '?';
      }
    }
    snprintf(path, sizeof path, "%s/%s/syscall", dir, e->d_name);
    if ((f = fopen(path, "r")) != NULL) {
      if (!fgets(sys, sizeof sys, f)) sys[0] = '\0';
      sys[strcspn(sys, " \n")] = '\0';
      fclose(f);
    }
    snprintf(path, sizeof path, "%s/%s/wchan", dir, e->d_name);
    if ((f = fopen(path, "r")) != NULL) {
      if (!fgets(wchan, sizeof wchan, f)) wchan[0] = '\0';
      fclose(f);
    }
    printf("\n      thread %s (%s): state %c, cpu %lu+%lu ticks, syscall %s, wchan %s", e->d_name, comm, state, ut, st,
           sys, wchan);
  }
  closedir(d);
}

/*
 * Waits for child pid, at most seconds (scaled as above; 0: the default),
 * and fills *status as waitpid does. 0; or -ETIMEDOUT once the deadline
 * passed and the child was killed and reaped (a line says so); or -errno
 * when it cannot be waited for. The wait is on a pidfd where the kernel has
 * them, else a waitpid poll that backs off to 10 ms.
 */
static inline int lp_test_wait(pid_t pid, unsigned seconds, int *status) {
  unsigned limit = lp_test_child_seconds(seconds);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int pfd = -1;
#if defined(SYS_pidfd_open) && (defined(_GNU_SOURCE) || defined(_DEFAULT_SOURCE)) /* syscall() is declared */
  pfd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
  long nap_ns = 100000;
  for (;;) {
    pid_t got = waitpid(pid, status, WNOHANG);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) {
      int e = errno;
      if (pfd >= 0) close(pfd);
      return -e;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    double left = (double)limit - ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9);
    if (left <= 0) {
      printf("\n    child %d still running after %u s: killed", (int)pid, limit);
      lp_test_show_stuck(pid);
      printf(" ");
      kill(pid, SIGKILL);
      while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
      if (pfd >= 0) close(pfd);
      return -ETIMEDOUT;
    }
    if (pfd >= 0) {
      struct pollfd p = {pfd, POLLIN, 0};
      (void)poll(&p, 1, left > 1000 ? 1000000 : (int)(left * 1000) + 1); /* readable once the child has exited */
    } else {
      struct timespec nap = {0, nap_ns};
      nanosleep(&nap, NULL);
      if (nap_ns < 10000000) nap_ns *= 2;
    }
  }
  if (pfd >= 0) close(pfd);
  return 0;
}

/*
 * lp_test_run() runs prog with argv in a child and waits for it: standard
 * input from o->in (/dev/null when NULL), standard output and error caught
 * in files of the test's temporary directory and returned as strings (free
 * them with lp_test_run_free). The environment is exactly vars
 * (NULL-terminated, at most 16) plus PATH=/usr/bin:/bin, so that the
 * caller's LABELPROF_* and sanitizer settings do not leak in, unless
 * o->inherit_env, when vars come on top of the test's own environment.
 * A child that cannot be started fails the test (CUnit's fatal assertion);
 * one still running after o->timeout seconds (0: LP_TEST_CHILD_SECONDS,
 * scaled as lp_test_wait says) is killed, and its status says SIGKILL.
 */
typedef struct lp_test_child {
  const char *in;   /* standard input from this file; NULL: /dev/null */
  const char *cwd;  /* NULL: the test's */
  rlim_t fsize;     /* RLIMIT_FSIZE in bytes; 0: unlimited */
  int inherit_env;  /* 1: the test's environment plus vars */
  rlim_t cpu;       /* RLIMIT_CPU in seconds (a guard against a hang, never a speed test); 0: unlimited */
  unsigned timeout; /* wall-clock seconds before the child is killed; 0: the default */
} lp_test_child_t;

typedef struct lp_test_run {
  pid_t pid;
  int status; /* as waitpid gives it */
  char *out, *err;
} lp_test_run_t;

extern char **environ;

static inline lp_test_run_t lp_test_run(const char *prog, char *const argv[], const char *const *vars,
                                        const lp_test_child_t *o) {
  static const lp_test_child_t none = {NULL, NULL, 0, 0, 0, 0};
  lp_test_run_t r = {-1, -1, NULL, NULL};
  char outp[256], errp[256];
  if (!o) o = &none;
  if (!lp_test_dir_path[0]) lp_test_tmpdir("child");
  snprintf(outp, sizeof outp, "%s/.child-stdout", lp_test_dir_path);
  snprintf(errp, sizeof errp, "%s/.child-stderr", lp_test_dir_path);
  char *own[18];
  int n = 0;
  for (; vars && vars[n] && n < 16; n++) own[n] = (char *)vars[n];
  own[n++] = (char *)"PATH=/usr/bin:/bin";
  own[n] = NULL;
  fflush(NULL);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int i = open(o->in ? o->in : "/dev/null", O_RDONLY);
    int out = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600), err = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (i < 0 || out < 0 || err < 0 || dup2(i, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
    if (o->cwd && chdir(o->cwd) != 0) _exit(126);
    struct rlimit rl = {o->fsize, o->fsize};
    if (o->fsize && setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(126);
    struct rlimit cpu = {o->cpu, o->cpu};
    if (o->cpu && setrlimit(RLIMIT_CPU, &cpu) != 0) _exit(126);
    if (o->inherit_env) {
      for (int k = 0; k < n - 1; k++) putenv(own[k]);
      execv(prog, argv);
    } else {
      execve(prog, argv, own);
    }
    _exit(127);
  }
  r.pid = pid;
  int w = lp_test_wait(pid, o->timeout, &r.status);
  if (w == -ETIMEDOUT) printf("(%s) ", prog);
  CU_ASSERT_FATAL(w == 0 || w == -ETIMEDOUT);
  r.out = lp_test_slurp(outp);
  r.err = lp_test_slurp(errp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r.out);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r.err);
  return r;
}

static inline void lp_test_run_free(lp_test_run_t *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

/* The exit status, or -1 when the child did not exit (a signal). */
static inline int lp_test_exit_code(const lp_test_run_t *r) {
  return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1;
}

/*
 * Runs body(arg) in a child process and waits for it (lp_test_wait's
 * deadline). Standard output and error are flushed first, so that nothing
 * buffered is printed twice. The child's own failed assertions are printed
 * ("child: FILE:LINE: CONDITION") and counted; the child exits with their
 * number (at most 100) when body returns. body may also end the child
 * itself: _exit(0) passes, _exit(N) counts as N failures. Returns the
 * failures (0: the child passed), or -1 when it died of a signal or ran
 * out of time (a line says which).
 */
static inline int lp_test_in_child(void (*body)(void *arg), void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    printf("\n    fork: %s ", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    unsigned before = CU_get_number_of_failures();
    body(arg);
    unsigned k = 0, failed = CU_get_number_of_failures() - before;
    for (CU_pFailureRecord f = CU_get_failure_list(); f; f = f->pNext)
      if (k++ >= before) printf("\n    child: %s:%u: %s", f->strFileName, f->uiLineNumber, f->strCondition);
    fflush(NULL);
    _exit(failed > 100 ? 100 : (int)failed);
  }
  int status = 0;
  if (lp_test_wait(pid, 0, &status) != 0) return -1;
  if (WIFSIGNALED(status)) {
    printf("\n    child killed by signal %d ", WTERMSIG(status));
    return -1;
  }
  if (WEXITSTATUS(status)) printf("\n    child: %d failed ", WEXITSTATUS(status));
  return WEXITSTATUS(status);
}

/*
 * ---- this program again ----
 * A test that needs a process of its own from the start (a clock not yet
 * chosen, a new time namespace, a child to kill) runs its own program again
 * in a mode: main() begins with lp_test_mode(), and the test forks and calls
 * lp_test_exec_self() in the child, or has lp_test_run_self() do both and
 * wait. Modes are words that start with "--".
 */

/* In main(): whether argv[1] is mode (then argv[2..] are its arguments). */
static inline int lp_test_mode(int argc, char **argv, const char *mode) {
  return argc >= 2 && strcmp(argv[1], mode) == 0;
}

/* The argv of this program in mode with args (NULL-terminated, at most 8). */
static inline void lp_test_self_argv(char *argv[11], const char *mode, const char *const *args) {
  int n = 0;
  argv[n++] = (char *)"lp-test";
  argv[n++] = (char *)mode;
  for (int i = 0; args && args[i] && i < 8; i++) argv[n++] = (char *)args[i];
  argv[n] = NULL;
}

/* In a child: becomes this program in mode, with args (NULL-terminated, at most 8); exits 127 if it cannot. */
static inline void lp_test_exec_self(const char *mode, const char *const *args) {
  char *argv[11];
  lp_test_self_argv(argv, mode, args);
  execv("/proc/self/exe", argv);
  _exit(127);
}

/* This program in mode, as lp_test_run runs a program (o may be NULL; vars as there). */
static inline lp_test_run_t lp_test_run_self(const char *mode, const char *const *args, const char *const *vars,
                                             const lp_test_child_t *o) {
  char *argv[11];
  lp_test_self_argv(argv, mode, args);
  return lp_test_run("/proc/self/exe", argv, vars, o);
}

/*
 * Takes the collector's warning that it kept under 90% of its rate out of a
 * child's stderr: whether it comes depends on how busy the machine is
 * (sanitizers, other jobs), not on what a test checks. Returns how many.
 */
static inline int lp_test_strip_rate_warning(char *err) {
  static const char w[] = "labelprof: the collector achieved only ";
  int n = 0;
  char *at;
  while (err && (at = strstr(err, w)) != NULL) {
    char *end = strchr(at, '\n');
    end = end ? end + 1 : at + strlen(at);
    memmove(at, end, strlen(end) + 1);
    n++;
  }
  return n;
}

#endif
