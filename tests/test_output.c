/*
 * test_output.c: writing report files (lib/output.c): atomic replace, modes
 * and owners, long names, links, named descriptors, FIFOs, pipes, signals and
 * file-size limits; and lp_strerror for the errors these pass through.
 *
 * Replacing tests run twice: with O_TMPFILE where the file system has it,
 * and with a named temporary, the fallback for file systems without it.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

static const char *dir;
static bool have_tmpfile; /* the test directory's file system has O_TMPFILE */

/* The two ways of replacing a file; each replacing test runs under both. */
static const char *const way_name[] = {"O_TMPFILE", "named temporary"};
static void use_way(int way) {
  lp__output_named_temp_only = way == 1;
}

/* Every entry of d except . and .. (temporaries start with a dot, so they are counted). */
static int dir_entries(const char *d) {
  int n = 0;
  DIR *dp = opendir(d);
  if (!dp) return -1;
  for (struct dirent *e; (e = readdir(dp));) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(dp);
  return n;
}

/* Removes every entry of d (files, links, empty subdirectories, one level deep). */
static void empty_dir(const char *d) {
  char p[PATH_MAX];
  DIR *dp = opendir(d);
  if (!dp) return;
  for (struct dirent *e; (e = readdir(dp));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(p, sizeof p, "%s/%s", d, e->d_name);
    if (unlink(p) != 0 && errno == EISDIR) {
      empty_dir(p);
      rmdir(p);
    }
  }
  closedir(dp);
}

static void path_in(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", dir, name);
}

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -errno;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void put_file(const char *path, const char *text, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL(write_all(fd, text, strlen(text)), 0);
  CU_ASSERT_EQUAL(fchmod(fd, mode), 0); /* exactly mode, whatever the umask */
  CU_ASSERT_EQUAL(close(fd), 0);
}

/* The file's contents as a string ("" if it cannot be read). */
static const char *contents(const char *path) {
  static char buf[4096];
  buf[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return buf;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = '\0';
  close(fd);
  return buf;
}

/* Writes text to path through lp__output; the result of close (or of open). */
static int output_text(const char *path, const char *text) {
  lp__output_t o;
  int rc = lp__output_open(&o, path);
  if (rc != 0) return rc;
  return lp__output_close(&o, write_all(o.fd, text, strlen(text)));
}

static mode_t mode_of(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

/* The calling thread's signal mask, and whether SIGPIPE / SIGXFSZ are pending. */
static sigset_t current_mask(void) {
  sigset_t m;
  pthread_sigmask(SIG_SETMASK, NULL, &m);
  return m;
}
static bool pending(int sig) {
  sigset_t p;
  return sigpending(&p) == 0 && sigismember(&p, sig);
}
static bool same_mask(const sigset_t *a, const sigset_t *b) {
  for (int s = 1; s < NSIG; s++)
    if (sigismember(a, s) != sigismember(b, s)) return false;
  return true;
}

/* ---- replacing regular files --------------------------------------------------- */

/* A new file gets 0666 less the umask; a replacement has the new contents; no temporary stays. */
static void test_output_new_file_then_replace(void) {
  char target[PATH_MAX];
  path_in(target, sizeof target, "report.txt");
  mode_t old_umask = umask(027);
  for (int way = 0; way < 2; way++) {
    use_way(way);
    CU_ASSERT_EQUAL(output_text(target, "first\n"), 0);
    CU_ASSERT_STRING_EQUAL(contents(target), "first\n");
    CU_ASSERT_EQUAL(mode_of(target), 0640);
    CU_ASSERT_EQUAL(output_text(target, "second\n"), 0);
    CU_ASSERT_STRING_EQUAL(contents(target), "second\n");
    CU_ASSERT_EQUAL(dir_entries(dir), 1);
    unlink(target);
  }
  umask(old_umask);
  use_way(0);
}

/* A failure while writing, and a commit that cannot happen, leave the old file and nothing else. */
static void test_output_failure_keeps_the_old_file(void) {
  char target[PATH_MAX], inside[PATH_MAX];
  path_in(target, sizeof target, "kept.txt");
  for (int way = 0; way < 2; way++) {
    use_way(way);
    put_file(target, "old contents\n", 0644);
    lp__output_t o;
    CU_ASSERT_EQUAL_FATAL(lp__output_open(&o, target), 0);
    CU_ASSERT_EQUAL(o.tmpfile, way == 0 && have_tmpfile);
    CU_ASSERT_EQUAL(write_all(o.fd, "half of a new ", 14), 0);
    FILE *f = lp__output_stream(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_PTR_EQUAL(lp__output_stream(&o), f);
    fputs("report", f);
    /* Until close, the target is the old file, and only a named temporary has a name. */
    CU_ASSERT_STRING_EQUAL(contents(target), "old contents\n");
    CU_ASSERT_EQUAL(dir_entries(dir), o.tmpfile ? 1 : 2);
    CU_ASSERT_EQUAL(lp__output_close(&o, -EIO), -EIO);
    CU_ASSERT_STRING_EQUAL(contents(target), "old contents\n");
    CU_ASSERT_EQUAL(dir_entries(dir), 1);

    /* The target turned into a non-empty directory meanwhile: the rename fails, the temporary goes. */
    CU_ASSERT_EQUAL_FATAL(lp__output_open(&o, target), 0);
    CU_ASSERT_EQUAL(write_all(o.fd, "new\n", 4), 0);
    CU_ASSERT_EQUAL(unlink(target), 0);
    CU_ASSERT_EQUAL(mkdir(target, 0700), 0);
    path_in(inside, sizeof inside, "kept.txt/inside");
    put_file(inside, "x", 0600);
    int rc = lp__output_close(&o, 0);
    CU_ASSERT(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
    CU_ASSERT_EQUAL(dir_entries(dir), 1);
    unlink(inside);
    rmdir(target);
  }
  use_way(0);
}

/* In a child: opens target and writes to it, then exits without closing it. */
static void write_and_die(void *target) {
  lp__output_t o;
  if (lp__output_open(&o, target) != 0) _exit(1);
  CU_ASSERT_EQUAL(write_all(o.fd, "never finished", 14), 0);
  CU_ASSERT_TRUE(o.tmpfile);
}

/* A process that dies while writing leaves no temporary behind (where O_TMPFILE works). */
static void test_output_death_mid_write_leaves_nothing(void) {
  char target[PATH_MAX];
  if (!have_tmpfile) {
    printf("\n    no O_TMPFILE in %s: a named temporary would stay ", dir);
    return;
  }
  path_in(target, sizeof target, "died.txt");
  put_file(target, "before the crash\n", 0644);
  use_way(0);
  CU_ASSERT_EQUAL(lp_test_in_child(write_and_die, target), 0);
  CU_ASSERT_STRING_EQUAL(contents(target), "before the crash\n");
  CU_ASSERT_EQUAL(dir_entries(dir), 1);
  unlink(target);
}

/*
 * Over RLIMIT_FSIZE a write fails with EFBIG and the process lives: SIGXFSZ
 * (default action: core dump) is blocked while the output is open and taken
 * back at close. In a child, so that the limit does not reach this process's
 * own log.
 */
static void fsize_child(void *arg) {
  const char *target = arg;
  struct rlimit old, small;
  static char block[64 * 1024];
  memset(block, 'x', sizeof block);
  signal(SIGXFSZ, SIG_DFL);
  if (getrlimit(RLIMIT_FSIZE, &old) != 0) _exit(1);
  small.rlim_cur = 4096;
  small.rlim_max = old.rlim_max;
  if (setrlimit(RLIMIT_FSIZE, &small) != 0) _exit(1);
  lp__output_t o;
  if (lp__output_open(&o, target) != 0) {
    CU_FAIL("lp__output_open");
  } else {
    CU_ASSERT_EQUAL(lp__output_close(&o, write_all(o.fd, block, sizeof block)), -EFBIG);
  }
  CU_ASSERT_FALSE(pending(SIGXFSZ));
  /* the same through the stream: the error comes from the flush at close */
  if (lp__output_open(&o, target) != 0) {
    CU_FAIL("lp__output_open");
  } else {
    FILE *f = lp__output_stream(&o);
    CU_ASSERT_PTR_NOT_NULL(f);
    if (f) fwrite(block, 1, sizeof block, f);
    CU_ASSERT_EQUAL(lp__output_close(&o, 0), -EFBIG);
  }
  CU_ASSERT_FALSE(pending(SIGXFSZ));
  setrlimit(RLIMIT_FSIZE, &old); /* so that a sanitizer's report at exit can be written */
}

static void test_output_fsize_limit_gives_efbig(void) {
  char target[PATH_MAX];
  path_in(target, sizeof target, "limited.json");
  for (int way = 0; way < 2; way++) {
    use_way(way);
    put_file(target, "old contents\n", 0644);
    int status = lp_test_in_child(fsize_child, target);
    if (status != 0) printf("(%s) ", way_name[way]);
    CU_ASSERT_EQUAL(status, 0);
    CU_ASSERT_STRING_EQUAL(contents(target), "old contents\n");
    CU_ASSERT_EQUAL(dir_entries(dir), 1);
    unlink(target);
  }
  use_way(0);
}

/* The temporary's name fits NAME_MAX however long the target's is. */
static void test_output_long_names_fit(void) {
  char name[NAME_MAX + 1], target[PATH_MAX];
  const size_t lengths[] = {250, NAME_MAX};
  for (int way = 0; way < 2; way++) {
    use_way(way);
    for (size_t i = 0; i < 2; i++) {
      memset(name, 'n', lengths[i]);
      memcpy(name + lengths[i] - 5, ".json", 5);
      name[lengths[i]] = '\0';
      path_in(target, sizeof target, name);
      CU_ASSERT_EQUAL(output_text(target, "long name\n"), 0);
      CU_ASSERT_EQUAL(output_text(target, "replaced\n"), 0);
      CU_ASSERT_STRING_EQUAL(contents(target), "replaced\n");
      CU_ASSERT_EQUAL(dir_entries(dir), 1);
      unlink(target);
    }
  }
  use_way(0);
}

/* The replaced file's permission bits stay, whatever the umask would give a new file. */
static void test_output_keeps_the_mode(void) {
  char target[PATH_MAX];
  const mode_t modes[] = {0600, 0640, 0604, 0664, 0400};
  path_in(target, sizeof target, "private.json");
  mode_t old_umask = umask(022);
  for (int way = 0; way < 2; way++) {
    use_way(way);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
      put_file(target, "old\n", modes[i]);
      CU_ASSERT_EQUAL(output_text(target, "new\n"), 0);
      CU_ASSERT_STRING_EQUAL(contents(target), "new\n");
      CU_ASSERT_EQUAL(mode_of(target), modes[i]);
      unlink(target);
    }
  }
  umask(old_umask);
  use_way(0);
}

/* Owner and group stay when the caller may set them (root here). */
static void test_output_keeps_owner_and_group(void) {
  char target[PATH_MAX];
  struct stat st;
  path_in(target, sizeof target, "owned.json");
  if (geteuid() != 0) {
    printf("\n    not root: only checking that a file of ours is replaced ");
    put_file(target, "old\n", 0640);
    CU_ASSERT_EQUAL(output_text(target, "new\n"), 0);
    CU_ASSERT_EQUAL(stat(target, &st), 0);
    CU_ASSERT_EQUAL(st.st_uid, geteuid());
    unlink(target);
    return;
  }
  for (int way = 0; way < 2; way++) {
    use_way(way);
    put_file(target, "old\n", 0640);
    CU_ASSERT_EQUAL_FATAL(chown(target, 4242, 4343), 0);
    CU_ASSERT_EQUAL(output_text(target, "new\n"), 0);
    CU_ASSERT_EQUAL(stat(target, &st), 0);
    CU_ASSERT_EQUAL(st.st_uid, 4242);
    CU_ASSERT_EQUAL(st.st_gid, 4343);
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0640);
    CU_ASSERT_STRING_EQUAL(contents(target), "new\n");
    unlink(target);
  }
  use_way(0);
}

/* In a child: user 4242 of group 4244 (no others), in the directory where, replaces theirs.json. */
static void write_as_another_user(void *where) {
  /* From inside the directory: $TMPDIR above it may be closed to other users. */
  if (chdir(where) != 0 || setgroups(0, NULL) != 0 || setgid(4244) != 0 || setuid(4242) != 0) _exit(1);
  CU_ASSERT_EQUAL(output_text("theirs.json", "new\n"), 0);
}

/*
 * A caller who may not keep the owner and group (EPERM) still replaces the
 * file, and still keeps its mode. As another user, in a child.
 */
static void test_output_owner_not_allowed_is_no_error(void) {
  char sub[PATH_MAX], target[PATH_MAX];
  struct stat st;
  if (geteuid() != 0) {
    printf("\n    not root: cannot act as another user ");
    return;
  }
  path_in(sub, sizeof sub, "users");
  path_in(target, sizeof target, "users/theirs.json");
  CU_ASSERT_EQUAL_FATAL(chmod(dir, 0711), 0); /* mkdtemp made it 0700: the other user must get through */
  CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
  CU_ASSERT_EQUAL_FATAL(chown(sub, 4242, 4244), 0);
  for (int way = 0; way < 2; way++) {
    use_way(way);
    put_file(target, "old\n", 0640);
    CU_ASSERT_EQUAL_FATAL(chown(target, 4243, 4343), 0); /* neither the child's user nor its group */
    CU_ASSERT_EQUAL(lp_test_in_child(write_as_another_user, sub), 0);
    CU_ASSERT_EQUAL(stat(target, &st), 0);
    CU_ASSERT_EQUAL(st.st_uid, 4242);
    CU_ASSERT_EQUAL(st.st_gid, 4244);
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0640);
    CU_ASSERT_STRING_EQUAL(contents(target), "new\n");
    CU_ASSERT_EQUAL(dir_entries(sub), 1);
    unlink(target);
  }
  rmdir(sub);
  chmod(dir, 0700);
  use_way(0);
}

/* Replacing a name that is one of several hard links gives that name a new file; the others keep the old one. */
static void test_output_replaced_hard_link_becomes_a_new_file(void) {
  char target[PATH_MAX], other[PATH_MAX];
  struct stat a, b;
  path_in(target, sizeof target, "linked.json");
  path_in(other, sizeof other, "other-name.json");
  put_file(target, "shared\n", 0644);
  CU_ASSERT_EQUAL_FATAL(link(target, other), 0);
  CU_ASSERT_EQUAL(output_text(target, "new\n"), 0);
  CU_ASSERT_STRING_EQUAL(contents(target), "new\n");
  CU_ASSERT_STRING_EQUAL(contents(other), "shared\n");
  CU_ASSERT_EQUAL(stat(target, &a), 0);
  CU_ASSERT_EQUAL(stat(other, &b), 0);
  CU_ASSERT_NOT_EQUAL(a.st_ino, b.st_ino);
  CU_ASSERT_EQUAL(a.st_nlink, 1);
  CU_ASSERT_EQUAL(b.st_nlink, 1);
  unlink(target);
  unlink(other);
}

/*
 * The commit renames in the directory the temporary was made in: a relative
 * path stays relative to the working directory at open, even if the program
 * changes directory before close.
 */
static void test_output_commit_lands_where_it_was_opened(void) {
  char target[PATH_MAX];
  int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  CU_ASSERT_FATAL(here >= 0);
  path_in(target, sizeof target, "relative.json");
  for (int way = 0; way < 2; way++) {
    use_way(way);
    lp__output_t o;
    CU_ASSERT_EQUAL_FATAL(chdir(dir), 0);
    CU_ASSERT_EQUAL_FATAL(lp__output_open(&o, "relative.json"), 0);
    CU_ASSERT(fcntl(o.fd, F_GETFD) & FD_CLOEXEC); /* a child the program starts meanwhile does not inherit it */
    CU_ASSERT_EQUAL(chdir("/"), 0);
    CU_ASSERT_EQUAL(lp__output_close(&o, write_all(o.fd, "here\n", 5)), 0);
    CU_ASSERT_EQUAL(fchdir(here), 0);
    CU_ASSERT_STRING_EQUAL(contents(target), "here\n");
    CU_ASSERT_EQUAL(access("/relative.json", F_OK), -1);
    CU_ASSERT_EQUAL(dir_entries(dir), 1);
    unlink(target);
  }
  close(here);
  use_way(0);
}

/* ---- where a path leads ----------------------------------------------------------- */

/* A chain of links, relative and absolute, across directories: the links stay, the file at the end is written. */
static void test_output_follows_a_chain_of_links(void) {
  char sub[PATH_MAX], l1[PATH_MAX], l2[PATH_MAX], l3[PATH_MAX], target[PATH_MAX];
  path_in(sub, sizeof sub, "sub");
  path_in(l1, sizeof l1, "l1");
  path_in(l2, sizeof l2, "sub/l2");
  path_in(l3, sizeof l3, "l3");
  path_in(target, sizeof target, "end.json");
  CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
  CU_ASSERT_EQUAL_FATAL(symlink("sub/l2", l1), 0); /* relative to l1's directory */
  CU_ASSERT_EQUAL_FATAL(symlink("../l3", l2), 0);  /* relative to sub, not to the starting point */
  CU_ASSERT_EQUAL_FATAL(symlink(target, l3), 0);   /* absolute */
  for (int way = 0; way < 2; way++) {
    use_way(way);
    CU_ASSERT_EQUAL(output_text(l1, "created at the end\n"), 0); /* the end did not exist */
    CU_ASSERT_STRING_EQUAL(contents(target), "created at the end\n");
    CU_ASSERT_EQUAL(chmod(target, 0600), 0);
    CU_ASSERT_EQUAL(output_text(l1, "replaced at the end\n"), 0);
    CU_ASSERT_STRING_EQUAL(contents(target), "replaced at the end\n");
    CU_ASSERT_EQUAL(mode_of(target), 0600);
    const char *links[] = {l1, l2, l3};
    for (int i = 0; i < 3; i++) {
      struct stat st;
      CU_ASSERT(lstat(links[i], &st) == 0 && S_ISLNK(st.st_mode));
    }
    CU_ASSERT_EQUAL(dir_entries(dir), 4); /* l1, l3, sub, end.json */
    CU_ASSERT_EQUAL(dir_entries(sub), 1); /* l2 */
    unlink(target);
  }
  use_way(0);
  unlink(l1);
  unlink(l2);
  unlink(l3);
  rmdir(sub);
}

/* 40 links are followed, as the kernel would; one more, or a cycle, is ELOOP, with nothing created. */
static void test_output_link_limit_and_cycles(void) {
  char name[PATH_MAX], next[64], target[PATH_MAX];
  path_in(target, sizeof target, "after-40.json");
  for (int i = 0; i <= 40; i++) {
    snprintf(next, sizeof next, i == 40 ? "after-40.json" : "hop%d", i + 1);
    snprintf(name, sizeof name, "%s/hop%d", dir, i);
    CU_ASSERT_EQUAL_FATAL(symlink(next, name), 0);
  }
  /* hop1 .. hop40 are 40 links to the file; hop0 is a 41st */
  snprintf(name, sizeof name, "%s/hop1", dir);
  CU_ASSERT_EQUAL(output_text(name, "forty\n"), 0);
  CU_ASSERT_STRING_EQUAL(contents(target), "forty\n");
  snprintf(name, sizeof name, "%s/hop0", dir);
  CU_ASSERT_EQUAL(output_text(name, "forty-one\n"), -ELOOP);
  CU_ASSERT_STRING_EQUAL(contents(target), "forty\n");
  char a[PATH_MAX], b[PATH_MAX];
  path_in(a, sizeof a, "cycle-a");
  path_in(b, sizeof b, "cycle-b");
  CU_ASSERT_EQUAL(symlink("cycle-b", a), 0);
  CU_ASSERT_EQUAL(symlink("cycle-a", b), 0);
  CU_ASSERT_EQUAL(output_text(a, "x"), -ELOOP);
  CU_ASSERT_EQUAL(dir_entries(dir), 41 + 1 + 2);
  empty_dir(dir);
}

typedef struct links {
  const char *link[2];
  int *fds; /* a pipe */
} links_t;

/* In a child whose standard output and error are the pipe: one text through each link, one to /dev/stderr. */
static void write_through_links(void *arg) {
  const links_t *l = arg;
  int out = dup(1), err = dup(2); /* this child's own, for its failures */
  close(l->fds[0]);
  if (out < 0 || err < 0 || dup2(l->fds[1], 1) != 1 || dup2(l->fds[1], 2) != 2) _exit(1);
  close(l->fds[1]);
  int one = output_text(l->link[0], "one "), two = output_text(l->link[1], "two "),
      three = output_text("/dev/stderr", "three");
  if (dup2(out, 1) != 1 || dup2(err, 2) != 2) _exit(1);
  CU_ASSERT_EQUAL(one, 0);
  CU_ASSERT_EQUAL(two, 0);
  CU_ASSERT_EQUAL(three, 0);
}

/*
 * A link to /dev/stdout, with stdout a pipe, writes into the pipe (it used
 * to be followed through /proc/self/fd/1 to "pipe:[N]" and fail). So do a
 * chain ending there and /dev/stderr. In a child with its own stdout.
 */
static void test_output_link_to_stdout_that_is_a_pipe(void) {
  char link1[PATH_MAX], link2[PATH_MAX], got[256] = "";
  int fds[2];
  path_in(link1, sizeof link1, "to-stdout");
  path_in(link2, sizeof link2, "to-the-link");
  CU_ASSERT_EQUAL_FATAL(symlink("/dev/stdout", link1), 0);
  CU_ASSERT_EQUAL_FATAL(symlink("to-stdout", link2), 0);
  CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
  links_t l = {{link1, link2}, fds};
  CU_ASSERT_EQUAL(lp_test_in_child(write_through_links, &l), 0);
  close(fds[1]);
  size_t len = 0;
  ssize_t n;
  while ((n = read(fds[0], got + len, sizeof got - 1 - len)) > 0) len += (size_t)n;
  got[len] = '\0';
  close(fds[0]);
  CU_ASSERT_STRING_EQUAL(got, "one two three");
  struct stat st;
  CU_ASSERT(lstat(link1, &st) == 0 && S_ISLNK(st.st_mode));
  CU_ASSERT_EQUAL(dir_entries(dir), 2);
  unlink(link1);
  unlink(link2);
}

/* /dev/fd/N and /proc/self/fd/N write to that descriptor at its offset and leave it open. */
static void test_output_named_descriptors(void) {
  char name[64], link[PATH_MAX];
  FILE *f = tmpfile();
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  int fd = fileno(f);
  CU_ASSERT_EQUAL(write_all(fd, "head:", 5), 0);
  const char *forms[] = {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"};
  const char *parts[] = {"A", "B", "C"};
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "%s%d", forms[i], fd);
    CU_ASSERT_EQUAL(output_text(name, parts[i]), 0);
  }
  /* and through a link */
  path_in(link, sizeof link, "to-fd");
  snprintf(name, sizeof name, "/dev/fd/%d", fd);
  CU_ASSERT_EQUAL_FATAL(symlink(name, link), 0);
  CU_ASSERT_EQUAL(output_text(link, "D"), 0);
  CU_ASSERT_EQUAL(lseek(fd, 0, SEEK_CUR), 9);
  CU_ASSERT(fcntl(fd, F_GETFD) >= 0); /* still open */
  char buf[32] = "";
  CU_ASSERT_EQUAL(pread(fd, buf, sizeof buf - 1, 0), 9);
  CU_ASSERT_STRING_EQUAL(buf, "head:ABCD");
  fclose(f);
  unlink(link);

  /* a descriptor that is not open */
  int closed = dup(0);
  CU_ASSERT_FATAL(closed >= 0);
  close(closed);
  snprintf(name, sizeof name, "/dev/fd/%d", closed);
  CU_ASSERT_EQUAL(output_text(name, "x"), -EBADF);

  /* /proc/PID/fd/N is not matched by name: the kernel opens what the link stands for, here a pipe */
  int fds[2];
  CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
  snprintf(name, sizeof name, "/proc/%ld/fd/%d", (long)getpid(), fds[1]);
  CU_ASSERT_EQUAL(output_text(name, "via proc"), 0);
  close(fds[1]); /* so that the read ends, whatever was written */
  memset(buf, 0, sizeof buf);
  CU_ASSERT_EQUAL(read(fds[0], buf, sizeof buf - 1), 8);
  CU_ASSERT_STRING_EQUAL(buf, "via proc");
  close(fds[0]);
  CU_ASSERT_EQUAL(dir_entries(dir), 0);
}

/* Devices are written directly: /dev/null takes everything, /dev/full reports ENOSPC through fd or stream. */
static void test_output_devices_are_written_directly(void) {
  lp__output_t o;
  CU_ASSERT_EQUAL(output_text("/dev/null", "gone"), 0);
  CU_ASSERT_EQUAL(output_text("/dev/full", "no room"), -ENOSPC);
  CU_ASSERT_EQUAL_FATAL(lp__output_open(&o, "/dev/full"), 0);
  FILE *f = lp__output_stream(&o);
  CU_ASSERT_PTR_NOT_NULL(f);
  if (f) fputs("no room either", f);
  CU_ASSERT_EQUAL(lp__output_close(&o, 0), -ENOSPC);
}

/* What cannot be written fails at open, creates nothing, and leaves the signal mask as it was. */
static void test_output_bad_paths_create_nothing(void) {
  char p[PATH_MAX], file[PATH_MAX];
  lp__output_t o;
  sigset_t before = current_mask(), after;
  path_in(p, sizeof p, "missing/report.json");
  CU_ASSERT_EQUAL(lp__output_open(&o, p), -ENOENT);
  path_in(file, sizeof file, "a-file");
  put_file(file, "x", 0644);
  path_in(p, sizeof p, "a-file/report.json");
  CU_ASSERT_EQUAL(lp__output_open(&o, p), -ENOTDIR);
  CU_ASSERT_EQUAL(lp__output_open(&o, dir), -EISDIR);
  snprintf(p, sizeof p, "%s/", dir);
  CU_ASSERT_EQUAL(lp__output_open(&o, p), -EISDIR);
  path_in(p, sizeof p, "not-there/");
  CU_ASSERT(lp__output_open(&o, p) < 0);
  CU_ASSERT_EQUAL(lp__output_open(&o, ""), -ENOENT);
  CU_ASSERT_EQUAL(lp__output_open(&o, NULL), -EINVAL);
  CU_ASSERT_EQUAL(lp__output_open(NULL, p), -EINVAL);
  CU_ASSERT_EQUAL(dir_entries(dir), 1); /* a-file only: no "missing", no temporary */
  after = current_mask();
  CU_ASSERT(same_mask(&before, &after));
  unlink(file);
}

/* ---- FIFOs, pipes and signals ---------------------------------------------------- */

static char fifo_path[PATH_MAX];
static atomic_int writer_tid, writer_opened;
static int writer_ready[2]; /* the writer says it is about to open */
static int writer_rc = -1;

static void *fifo_writer(void *arg) {
  (void)arg;
  lp__output_t o;
  atomic_store(&writer_tid, (int)syscall(SYS_gettid));
  if (write(writer_ready[1], "r", 1) != 1) return NULL;
  int rc = lp__output_open(&o, fifo_path); /* waits here for a reader */
  atomic_store(&writer_opened, 1);
  if (rc == 0) rc = lp__output_close(&o, write_all(o.fd, "through the fifo\n", 17));
  writer_rc = rc;
  return NULL;
}

/* True once thread tid sleeps, in openat where /proc says which call it is in. */
static bool blocked_in_open(int tid) {
  char p[256], buf[512];
  snprintf(p, sizeof p, "/proc/self/task/%d/syscall", tid);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    /*
     * Under qemu-user the number is the host's (x86-64's openat is 257, not
     * aarch64's 56): there the sleeping state below has to do, and the
     * writer still cannot have opened a FIFO without a reader.
     */
    bool emulated = lp_test_slow() > 1;
    if (n > 0 && (strncmp(buf, "running", 7) == 0 || (!emulated && strtol(buf, NULL, 10) != SYS_openat)))
      return false;
  }
  snprintf(p, sizeof p, "/proc/self/task/%d/stat", tid);
  fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')'); /* the state follows the command name */
  return paren && paren[1] == ' ' && paren[2] == 'S';
}

/*
 * A FIFO without a reader: open waits for one (that is what a FIFO is), holds
 * nothing that stops another thread's output meanwhile, and completes once a
 * reader comes.
 */
static void test_output_fifo_waits_for_its_reader(void) {
  char other[PATH_MAX], got[64] = "";
  pthread_t th;
  char r;
  path_in(fifo_path, sizeof fifo_path, "fifo");
  path_in(other, sizeof other, "meanwhile.txt");
  CU_ASSERT_EQUAL_FATAL(mkfifo(fifo_path, 0600), 0);
  CU_ASSERT_EQUAL_FATAL(pipe(writer_ready), 0);
  atomic_store(&writer_opened, 0);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, fifo_writer, NULL), 0);
  CU_ASSERT_EQUAL(read(writer_ready[0], &r, 1), 1);
  /* Only the kernel knows when the writer has reached the FIFO's wait: ask it, every millisecond, up to 10 s. */
  bool blocked = false;
  for (int i = 0; i < 10000 && !(blocked = blocked_in_open(atomic_load(&writer_tid))); i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  CU_ASSERT(blocked);
  CU_ASSERT_EQUAL(atomic_load(&writer_opened), 0);
  /* another output, on this thread, while that one waits */
  CU_ASSERT_EQUAL(output_text(other, "not held up\n"), 0);
  CU_ASSERT_STRING_EQUAL(contents(other), "not held up\n");
  CU_ASSERT_EQUAL(atomic_load(&writer_opened), 0);
  alarm(60); /* a writer that never opens would hold the reader's open forever: end in SIGALRM instead */
  if (!atomic_load(&writer_opened)) { /* else it failed without waiting, and nobody would come */
    int rd = open(fifo_path, O_RDONLY | O_CLOEXEC);
    CU_ASSERT_FATAL(rd >= 0);
    size_t len = 0;
    ssize_t n;
    while ((n = read(rd, got + len, sizeof got - 1 - len)) > 0) len += (size_t)n;
    got[len] = '\0';
    close(rd);
  }
  CU_ASSERT_EQUAL(pthread_join(th, NULL), 0);
  alarm(0);
  CU_ASSERT_EQUAL(writer_rc, 0);
  CU_ASSERT_STRING_EQUAL(got, "through the fifo\n");
  close(writer_ready[0]);
  close(writer_ready[1]);
  unlink(other);
  unlink(fifo_path);
}

static volatile sig_atomic_t sigpipes_delivered;
static void count_sigpipe(int sig) {
  (void)sig;
  sigpipes_delivered++;
}

/*
 * A pipe whose reader has gone gives -EPIPE, through the descriptor and the
 * stream; SIGPIPE is neither delivered nor left pending, and the mask is
 * restored (blocked or not, as the caller had it).
 */
static void test_output_closed_pipe_gives_epipe(void) {
  struct sigaction sa = {.sa_handler = count_sigpipe}, old_sa;
  sigemptyset(&sa.sa_mask);
  CU_ASSERT_EQUAL_FATAL(sigaction(SIGPIPE, &sa, &old_sa), 0);
  sigpipes_delivered = 0;
  for (int caller_blocks = 0; caller_blocks < 2; caller_blocks++) {
    sigset_t pipe_only, saved, before, after;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(caller_blocks ? SIG_BLOCK : SIG_UNBLOCK, &pipe_only, &saved);
    before = current_mask();
    for (int stream = 0; stream < 2; stream++) {
      int fds[2];
      char name[64];
      lp__output_t o;
      CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
      close(fds[0]);
      snprintf(name, sizeof name, "/dev/fd/%d", fds[1]);
      CU_ASSERT_EQUAL_FATAL(lp__output_open(&o, name), 0);
      int rc = 0;
      if (stream) {
        FILE *f = lp__output_stream(&o);
        CU_ASSERT_PTR_NOT_NULL(f);
        if (f) fputs("nobody reads this", f);
      } else {
        rc = write_all(o.fd, "nobody reads this", 17);
        CU_ASSERT_EQUAL(rc, -EPIPE);
      }
      CU_ASSERT_EQUAL(lp__output_close(&o, rc), -EPIPE);
      CU_ASSERT_FALSE(pending(SIGPIPE));
      after = current_mask();
      CU_ASSERT(same_mask(&before, &after));
      close(fds[1]);
    }
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
  }
  CU_ASSERT_EQUAL(sigpipes_delivered, 0);
  sigaction(SIGPIPE, &old_sa, NULL);
}

/* A SIGPIPE that was pending before open belongs to the caller: it is still pending after close. */
static void test_output_pending_sigpipe_is_left_alone(void) {
  sigset_t pipe_only, saved;
  int fds[2];
  char name[64];
  lp__output_t o;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  CU_ASSERT_EQUAL_FATAL(pthread_sigmask(SIG_BLOCK, &pipe_only, &saved), 0);
  CU_ASSERT_EQUAL_FATAL(pthread_kill(pthread_self(), SIGPIPE), 0);
  CU_ASSERT(pending(SIGPIPE));
  CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
  close(fds[0]);
  snprintf(name, sizeof name, "/dev/fd/%d", fds[1]);
  CU_ASSERT_EQUAL_FATAL(lp__output_open(&o, name), 0);
  CU_ASSERT_EQUAL(lp__output_close(&o, write_all(o.fd, "x", 1)), -EPIPE);
  CU_ASSERT(pending(SIGPIPE));
  /* a successful output to a file leaves it pending too */
  char target[PATH_MAX];
  path_in(target, sizeof target, "while-pending.txt");
  CU_ASSERT_EQUAL(output_text(target, "ok"), 0);
  CU_ASSERT(pending(SIGPIPE));
  struct timespec zero = {0, 0};
  CU_ASSERT_EQUAL(sigtimedwait(&pipe_only, NULL, &zero), SIGPIPE);
  CU_ASSERT_FALSE(pending(SIGPIPE));
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  close(fds[1]);
  unlink(target);
}

/* ---- lp_strerror ------------------------------------------------------------------ */

static bool says(const char *text, const char *word) {
  return text && strcasestr(text, word) != NULL;
}

static void test_output_strerror_describes_every_errno(void) {
  CU_ASSERT(says(lp_strerror(-EBADF), "file descriptor"));
  CU_ASSERT(says(lp_strerror(-ELOOP), "symbolic links"));
  CU_ASSERT(says(lp_strerror(-EFBIG), "file too large"));
  CU_ASSERT(says(lp_strerror(-ENAMETOOLONG), "name too long"));
  CU_ASSERT(says(lp_strerror(-ENXIO), "device or address"));
  /* the library's own meanings */
  CU_ASSERT_STRING_EQUAL(lp_strerror(-EBUSY), "already running");
  CU_ASSERT_STRING_EQUAL(lp_strerror(-EINVAL), "invalid argument, or not running");
  CU_ASSERT_STRING_EQUAL(lp_strerror(0), "success");
  /* either sign */
  CU_ASSERT_STRING_EQUAL(lp_strerror(EBADF), lp_strerror(-EBADF));
  CU_ASSERT_STRING_EQUAL(lp_strerror(EBUSY), lp_strerror(-EBUSY));
  /* values no system defines: a string all the same */
  const int unknown[] = {-99999, 99999, 4096, INT_MIN, INT_MAX};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
    CU_ASSERT(says(lp_strerror(unknown[i]), "unknown error"));
#ifdef HAVE_STRERRORDESC_NP
  /* every value Linux defines (1 to EHWPOISON) gets a description of its own */
  for (int e = 1; e <= 133; e++) {
    if (e == 41 || e == 58) continue; /* holes in the numbering */
    if (says(lp_strerror(-e), "unknown error")) printf("\n    %d: unknown ", e);
    CU_ASSERT_FALSE(says(lp_strerror(-e), "unknown error"));
  }
#endif
}

int main(void) {
  dir = lp_test_tmpdir("output");
  int probe = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  have_tmpfile = probe >= 0;
  if (probe >= 0) close(probe);
  CU_TestInfo tests[] = {
      LP_TEST(test_output_new_file_then_replace),
      LP_TEST(test_output_failure_keeps_the_old_file),
      LP_TEST(test_output_death_mid_write_leaves_nothing),
      LP_TEST(test_output_fsize_limit_gives_efbig),
      LP_TEST(test_output_long_names_fit),
      LP_TEST(test_output_keeps_the_mode),
      LP_TEST(test_output_keeps_owner_and_group),
      LP_TEST(test_output_owner_not_allowed_is_no_error),
      LP_TEST(test_output_replaced_hard_link_becomes_a_new_file),
      LP_TEST(test_output_commit_lands_where_it_was_opened),
      LP_TEST(test_output_follows_a_chain_of_links),
      LP_TEST(test_output_link_limit_and_cycles),
      LP_TEST(test_output_link_to_stdout_that_is_a_pipe),
      LP_TEST(test_output_named_descriptors),
      LP_TEST(test_output_devices_are_written_directly),
      LP_TEST(test_output_bad_paths_create_nothing),
      LP_TEST(test_output_fifo_waits_for_its_reader),
      LP_TEST(test_output_closed_pipe_gives_epipe),
      LP_TEST(test_output_pending_sigpipe_is_left_alone),
      LP_TEST(test_output_strerror_describes_every_errno),
      CU_TEST_INFO_NULL,
  };
  int rc = lp_test_main("output", tests);
  empty_dir(dir);
  rmdir(dir);
  return rc;
}
