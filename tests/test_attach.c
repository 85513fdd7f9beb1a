/*
 * test_attach.c: the registry as a reader outside the process sees it
 * (lib/attach.c), read by the command's reader (tools/read/attach.c). The test
 * reads its own process through process_vm_readv, as `labelprof top` reads
 * another: the reader finds the note and the descriptor, sees every
 * labelled thread with its name and stack, never keeps a stack that did
 * not exist, and survives threads that change, are renamed or exit in the
 * middle of a pass (a hook runs between the pass's first read of the slots
 * and its reads of the stacks).
 */
#include "internal.h"

#include "attach.h"
#include "attach_abi.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "runner.h"

static lp_remote_t *open_self(void) {
  lp_remote_t *r = NULL;
  char why[512];
  int rc = lp_remote_open(getpid(), "top", &r, why, sizeof why);
  if (rc) fprintf(stderr, "lp_remote_open: %s\n", why);
  CU_ASSERT_EQUAL(rc, 0);
  return r;
}

static int sample(lp_remote_t *r) {
  char why[512];
  int rc = lp_remote_sample(r, why, sizeof why);
  if (rc) fprintf(stderr, "lp_remote_sample: %s\n", why);
  return rc;
}

/* The live thread with this tid after the last pass, NULL if none. */
static const lp_rthread_t *by_tid(lp_remote_t *r, uint64_t tid) {
  for (size_t i = 0; i < lp_remote_thread_count(r); i++) {
    const lp_rthread_t *p = lp_remote_thread(r, i);
    if (p->live && p->tid == tid) return p;
  }
  return NULL;
}

/* "a;b;c": a thread's stack as its label texts. */
static void stack_text(lp_remote_t *r, const lp_rthread_t *p, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  for (uint32_t f = 0; f < p->n; f++)
    at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%s", f ? ";" : "",
                           lp_remote_text(r, lp_remote_label(r, p->frames[f])));
}

static uint64_t gettid_(void) { return (uint64_t)syscall(SYS_gettid); }

/* ---- a helper thread that does what it is told, step by step ---- */

enum { DO_NOTHING, DO_PUSH, DO_PUSH_X, DO_POP, DO_RENAME, DO_EXIT };
typedef struct helper {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int order;      /* what to do next */
  int done;       /* orders carried out */
  uint64_t tid;
  const char *name;
} helper_t;

/* A label of its own for each depth: h0, h1, h2, h3, h0... */
static void push_nth(uint32_t d) {
  switch (d % 4) {
  case 0:
    LP_BEGIN("h0");
    break;
  case 1:
    LP_BEGIN("h1");
    break;
  case 2:
    LP_BEGIN("h2");
    break;
  default:
    LP_BEGIN("h3");
    break;
  }
}

static void *helper_main(void *arg) {
  helper_t *h = arg;
  uint32_t depth = 0;
  lp_thread_set_name(h->name);
  pthread_mutex_lock(&h->mu);
  h->tid = gettid_();
  for (;;) {
    h->done++;
    pthread_cond_broadcast(&h->cv);
    while (h->order == DO_NOTHING) pthread_cond_wait(&h->cv, &h->mu);
    int o = h->order;
    h->order = DO_NOTHING;
    if (o == DO_EXIT) break;
    if (o == DO_PUSH) push_nth(depth++);
    if (o == DO_PUSH_X) {
      LP_BEGIN("x");
      depth++;
    }
    if (o == DO_POP) {
      LP_END();
      depth--;
    }
    if (o == DO_RENAME) lp_thread_set_name("renamed helper");
  }
  while (depth--) LP_END();
  h->done++;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

static void helper_start(helper_t *h, const char *name) {
  memset(h, 0, sizeof *h);
  h->name = name;
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  CU_ASSERT_EQUAL_FATAL(pthread_create(&h->th, NULL, helper_main, h), 0);
  pthread_mutex_lock(&h->mu);
  while (h->done < 1) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
}

/* Tells h to do o and waits until it has. */
static void helper_do(helper_t *h, int o) {
  pthread_mutex_lock(&h->mu);
  int want = h->done + 1;
  h->order = o;
  pthread_cond_broadcast(&h->cv);
  while (h->done < want) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
  if (o == DO_EXIT) {
    pthread_join(h->th, NULL);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
  }
}

/* ---- the tests ---- */

static void test_attach_finds_the_descriptor_through_the_note(void) {
  /* Some label first: the registry has this thread. */
  LP_SCOPE("main scope");
  lp_remote_t *r = open_self();
  if (!r) return;
  CU_ASSERT_STRING_EQUAL(lp_remote_lib_version(r), PACKAGE_VERSION);
  CU_ASSERT_EQUAL(sample(r), 0);
  const lp_rthread_t *me = by_tid(r, gettid_());
  CU_ASSERT_PTR_NOT_NULL_FATAL(me);
  CU_ASSERT_TRUE(me->read);
  char text[256];
  stack_text(r, me, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "main scope");
  lp_remote_close(r);
}

static void test_attach_reads_names_and_stacks_of_threads(void) {
  helper_t h;
  helper_start(&h, "attach helper");
  helper_do(&h, DO_PUSH);
  helper_do(&h, DO_PUSH);
  lp_remote_t *r = open_self();
  if (!r) goto out;
  CU_ASSERT_EQUAL(sample(r), 0);
  const lp_rthread_t *p = by_tid(r, h.tid);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  CU_ASSERT_STRING_EQUAL(p->name, "attach helper");
  char text[256];
  stack_text(r, p, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "h0;h1");
  uint64_t id = p->id;
  /* A pop, a rename: seen at the next pass, the same thread (id). */
  helper_do(&h, DO_POP);
  helper_do(&h, DO_RENAME);
  CU_ASSERT_EQUAL(sample(r), 0);
  p = by_tid(r, h.tid);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  CU_ASSERT_EQUAL(p->id, id);
  CU_ASSERT_STRING_EQUAL(p->name, "renamed helper");
  stack_text(r, p, text, sizeof text);
  CU_ASSERT_STRING_EQUAL(text, "h0");
  /* Gone: not live at the next pass. */
  helper_do(&h, DO_EXIT);
  CU_ASSERT_EQUAL(sample(r), 0);
  CU_ASSERT_PTR_NULL(by_tid(r, h.tid));
  lp_remote_close(r);
  return;
out:
  helper_do(&h, DO_EXIT);
}

/* ---- changes in the middle of a pass ---- */

typedef struct midpass {
  helper_t *h;
  int order, step; /* what the helper does, and where in the pass's first try */
  unsigned calls;
  int more[4];     /* orders after the first, DO_NOTHING ends them */
} midpass_t;

static void between(void *arg, unsigned attempt, int step) {
  midpass_t *m = arg;
  if (step == 0) m->calls++;
  if (attempt != 0 || step != m->step || m->order == DO_NOTHING) return;
  helper_do(m->h, m->order);
  for (int i = 0; i < 4 && m->more[i] != DO_NOTHING; i++) helper_do(m->h, m->more[i]);
}

/* A helper named name with pushes labels, and a reader of this process; NULL (the helper gone) if it cannot open. */
static lp_remote_t *start_with(helper_t *h, const char *name, int pushes) {
  helper_start(h, name);
  for (int i = 0; i < pushes; i++) helper_do(h, DO_PUSH);
  lp_remote_t *r = open_self();
  if (!r) helper_do(h, DO_EXIT);
  return r;
}

/* One pass; the reads it made again. */
static uint64_t pass_retries(lp_remote_t *r) {
  lp_remote_stats_t before, after;
  lp_remote_stats(r, &before);
  CU_ASSERT_EQUAL(sample(r), 0);
  lp_remote_stats(r, &after);
  return after.retries - before.retries;
}

/* The stack of thread tid at the last pass, as text; "(not live)" or "(not read)" when there is none. */
static const char *stack_of(lp_remote_t *r, uint64_t tid, char *buf, size_t len) {
  const lp_rthread_t *p = by_tid(r, tid);
  if (!p) return "(not live)";
  if (!p->read) return "(not read)";
  stack_text(r, p, buf, len);
  return buf;
}

/*
 * A push between the frames and the second read of the word, in a pass
 * that copies the frames (the thread is new to the reader): the first try
 * is thrown away, the second kept. Then, with the stack known, a push at
 * the same point: the pass copies no frames (the word it read is the one
 * it knows), so that word is the stack, the one at its read.
 */
static void test_attach_stack_changed_during_a_pass_is_read_again(void) {
  helper_t h;
  lp_remote_t *r = start_with(&h, "changer", 1);
  if (!r) return;
  midpass_t m = {&h, DO_PUSH, 2, 0, {DO_NOTHING}};
  lp_remote_test_between(r, between, &m);
  char text[256];
  CU_ASSERT_TRUE(pass_retries(r) > 0);
  CU_ASSERT_STRING_EQUAL(stack_of(r, h.tid, text, sizeof text), "h0;h1");
  CU_ASSERT_TRUE(m.calls >= 2);
  /* Known now: a push after the word was read leaves this pass's stack the one at the read. */
  CU_ASSERT_EQUAL(pass_retries(r), 0);
  CU_ASSERT_STRING_EQUAL(stack_of(r, h.tid, text, sizeof text), "h0;h1");
  m.order = DO_NOTHING;
  CU_ASSERT_EQUAL(sample(r), 0); /* and the next pass sees the push */
  CU_ASSERT_STRING_EQUAL(stack_of(r, h.tid, text, sizeof text), "h0;h1;h2");
  lp_remote_close(r);
  helper_do(&h, DO_EXIT);
}

/* A rename after the slots were read: the name read after it is kept only from a try whose slots agree. */
static void test_attach_rename_during_a_pass_is_read_again(void) {
  helper_t h;
  lp_remote_t *r = start_with(&h, "before the rename", 0);
  if (!r) return;
  midpass_t m = {&h, DO_RENAME, 0, 0, {DO_NOTHING}};
  lp_remote_test_between(r, between, &m);
  CU_ASSERT_TRUE(pass_retries(r) > 0);
  const lp_rthread_t *p = by_tid(r, h.tid);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  CU_ASSERT_STRING_EQUAL(p->name, "renamed helper");
  CU_ASSERT_TRUE(m.calls >= 2);
  lp_remote_close(r);
  helper_do(&h, DO_EXIT);
}

/* A thread gone at either point of a pass (its state freed, maybe reused) is not reported, and nothing is read from it. */
static void exits_during_a_pass(int step) {
  helper_t h;
  lp_remote_t *r = start_with(&h, "leaver", 1);
  if (!r) return;
  CU_ASSERT_EQUAL(sample(r), 0);
  CU_ASSERT_PTR_NOT_NULL(by_tid(r, h.tid));
  uint64_t tid = h.tid;
  midpass_t m = {&h, DO_EXIT, step, 0, {DO_NOTHING}};
  lp_remote_test_between(r, between, &m);
  CU_ASSERT_TRUE(pass_retries(r) > 0); /* the first try saw its slot change */
  CU_ASSERT_PTR_NULL(by_tid(r, tid));
  for (size_t i = 0; i < lp_remote_thread_count(r); i++) {
    const lp_rthread_t *p = lp_remote_thread(r, i);
    if (!p->live || !p->read) continue;
    for (uint32_t f = 0; f < p->n; f++) {
      const char *t = lp_remote_text(r, lp_remote_label(r, p->frames[f]));
      CU_ASSERT_TRUE(strcmp(t, "(unreadable label)") != 0);
    }
  }
  lp_remote_close(r);
}

static void test_attach_thread_that_exits_during_a_pass_is_dropped(void) {
  exits_during_a_pass(0);
  exits_during_a_pass(1);
  exits_during_a_pass(2);
}

/*
 * The torn read itself, made on purpose: the word says h0;h1;h2; before
 * the frames are copied the thread pops two and pushes x, so the frames
 * hold h0, x and a stale h2. "h0;x;h2" never existed: only the second read
 * of the word tells, and the try is thrown away.
 */
static void test_attach_frames_rewritten_after_the_word_are_not_kept(void) {
  helper_t h;
  lp_remote_t *r = start_with(&h, "tearer", 3);
  if (!r) return;
  midpass_t m = {&h, DO_POP, 1, 0, {DO_POP, DO_PUSH_X, DO_NOTHING}};
  lp_remote_test_between(r, between, &m);
  char text[256];
  CU_ASSERT_EQUAL(sample(r), 0);
  CU_ASSERT_STRING_EQUAL(stack_of(r, h.tid, text, sizeof text), "h0;x");
  lp_remote_close(r);
  helper_do(&h, DO_EXIT);
}

/* ---- never a stack that did not exist ---- */

static atomic_int churn_stop;

/* Pushes and pops as fast as it can; every stack it makes is a prefix of p;q;r, or p;s. */
static pthread_barrier_t pushers_named;

static void *pusher(void *arg) {
  (void)arg;
  lp_thread_set_name("pusher");
  pthread_barrier_wait(&pushers_named); /* registered: every pass from now on has both */
  unsigned i = 0;
  while (!atomic_load_explicit(&churn_stop, memory_order_relaxed)) {
    LP_BEGIN("p");
    if (i++ & 1) {
      LP_BEGIN("q");
      LP_BEGIN("r");
      LP_END();
      LP_END();
    } else {
      LP_BEGIN("s");
      LP_END();
    }
    LP_END();
  }
  return NULL;
}

static bool valid_stack(const char *s) {
  static const char *const ok[] = {"", "p", "p;q", "p;q;r", "p;s"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (strcmp(s, ok[i]) == 0) return true;
  return false;
}

static void test_attach_never_keeps_a_torn_stack(void) {
  pthread_t th[2];
  atomic_store(&churn_stop, 0);
  CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&pushers_named, NULL, 3), 0);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, pusher, NULL), 0);
  pthread_barrier_wait(&pushers_named);
  lp_remote_t *r = open_self();
  unsigned passes = LP_TEST_SANITIZED ? 300 : 3000, bad = 0, read = 0;
  for (unsigned k = 0; r && k < passes; k++) {
    if (sample(r) != 0) break;
    for (size_t i = 0; i < lp_remote_thread_count(r); i++) {
      const lp_rthread_t *p = lp_remote_thread(r, i);
      if (!p->live || !p->read || strcmp(p->name, "pusher") != 0) continue;
      char text[256];
      stack_text(r, p, text, sizeof text);
      read++;
      if (!valid_stack(text)) {
        if (bad++ < 5) fprintf(stderr, "a stack that never existed: '%s' (word %#llx)\n", text,
                               (unsigned long long)p->word);
      }
    }
  }
  atomic_store(&churn_stop, 1);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&pushers_named);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_TRUE(read > passes); /* both pushers were read, but in passes where one kept changing 8 times */
  lp_remote_stats_t st;
  if (r) lp_remote_stats(r, &st);
  if (r) printf("\n%u stacks read in %u passes, %llu read again, %llu given up ", read, passes,
                (unsigned long long)st.retries, (unsigned long long)st.given_up);
  lp_remote_close(r);
}

/* ---- many threads: the slots past the first block, and their reuse ---- */

#define MANY 300
static pthread_barrier_t many_in, many_out;

static void *many_main(void *arg) {
  char name[32];
  snprintf(name, sizeof name, "many %d", (int)(intptr_t)arg);
  lp_thread_set_name(name);
  LP_SCOPE("many");
  pthread_barrier_wait(&many_in);
  pthread_barrier_wait(&many_out);
  return NULL;
}

static unsigned count_named(lp_remote_t *r, const char *prefix) {
  unsigned n = 0;
  for (size_t i = 0; i < lp_remote_thread_count(r); i++) {
    const lp_rthread_t *p = lp_remote_thread(r, i);
    n += p->live && p->read && strncmp(p->name, prefix, strlen(prefix)) == 0;
  }
  return n;
}

static void test_attach_sees_threads_past_the_first_slots(void) {
  lp_remote_t *r = open_self();
  if (!r) return;
  for (int round = 0; round < 2; round++) {
    pthread_t th[MANY];
    int made = 0;
    CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&many_in, NULL, MANY + 1), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&many_out, NULL, MANY + 1), 0);
    for (; made < MANY; made++)
      if (pthread_create(&th[made], NULL, many_main, (void *)(intptr_t)made) != 0) break;
    CU_ASSERT_EQUAL_FATAL(made, MANY);
    pthread_barrier_wait(&many_in);
    CU_ASSERT_EQUAL(sample(r), 0);
    CU_ASSERT_EQUAL(count_named(r, "many "), MANY);
    size_t slots = lp_remote_thread_count(r);
    pthread_barrier_wait(&many_out);
    for (int i = 0; i < made; i++) pthread_join(th[i], NULL);
    CU_ASSERT_EQUAL(sample(r), 0);
    CU_ASSERT_EQUAL(count_named(r, "many "), 0);
    /* The second round reuses the slots the first one left. */
    if (round == 1) CU_ASSERT_TRUE(slots <= (size_t)MANY + 16);
    pthread_barrier_destroy(&many_in);
    pthread_barrier_destroy(&many_out);
  }
  lp_remote_close(r);
}

/* ---- labels by the thousand ---- */

/*
 * Sites past the tables' first sizes (1,024 site slots, 256 text slots):
 * 1,500 sites with 700 texts, each text at two or three sites. Every site
 * keeps its text, sites of one text share one id and texts have ids of
 * their own, asked again after the tables grew.
 */
#define WIDE_SITES 1500
#define WIDE_TEXTS 700

static void test_attach_labels_past_the_first_table_sizes(void) {
  lp_remote_t *r = open_self();
  if (!r) return;
  static lp_site_t sites[WIDE_SITES];
  static char texts[WIDE_TEXTS][24]; /* "wide " and any int */
  static uint32_t ids[WIDE_SITES];
  for (int t = 0; t < WIDE_TEXTS; t++) snprintf(texts[t], sizeof texts[t], "wide %d", t);
  for (int s = 0; s < WIDE_SITES; s++) sites[s].label = texts[s % WIDE_TEXTS];
  for (int round = 0; round < 2; round++) {
    int bad = 0;
    for (int s = 0; s < WIDE_SITES; s++) {
      uint32_t id = lp_remote_label(r, (uint64_t)(uintptr_t)&sites[s]);
      if (id == LP_REMOTE_NOLABEL || strcmp(lp_remote_text(r, id), texts[s % WIDE_TEXTS]) != 0) bad++;
      if (round == 0) ids[s] = id;
      else if (id != ids[s]) bad++;
      if (s >= WIDE_TEXTS && id != ids[s - WIDE_TEXTS]) bad++; /* the same text, the same id */
    }
    CU_ASSERT_EQUAL(bad, 0);
  }
  int shared = 0; /* ids of different texts */
  for (int a = 0; a < WIDE_TEXTS; a++)
    for (int b = a + 1; b < WIDE_TEXTS; b++) shared += ids[a] == ids[b];
  CU_ASSERT_EQUAL(shared, 0);
  lp_remote_close(r);
}

/* ---- a forked child keeps only its own thread ---- */

static void test_attach_forked_child_shows_one_thread(void) {
  helper_t h;
  helper_start(&h, "parent's helper");
  helper_do(&h, DO_PUSH);
  LP_SCOPE("before fork");
  int to_child[2], to_parent[2];
  CU_ASSERT_EQUAL_FATAL(pipe(to_child), 0);
  CU_ASSERT_EQUAL_FATAL(pipe(to_parent), 0);
  pid_t pid = fork();
  CU_ASSERT_TRUE_FATAL(pid >= 0);
  if (pid == 0) {
    char c = 'r';
    /* The child waits, inside its label, until the parent has read it. */
    if (write(to_parent[1], &c, 1) != 1) _exit(1);
    if (read(to_child[0], &c, 1) != 1) _exit(1);
    _exit(0);
  }
  char c;
  CU_ASSERT_EQUAL(read(to_parent[0], &c, 1), 1);
  lp_remote_t *r = NULL;
  char why[512];
  CU_ASSERT_EQUAL(lp_remote_open(pid, "top", &r, why, sizeof why), 0);
  if (r) {
    CU_ASSERT_EQUAL(lp_remote_sample(r, why, sizeof why), 0);
    unsigned live = 0;
    for (size_t i = 0; i < lp_remote_thread_count(r); i++) {
      const lp_rthread_t *p = lp_remote_thread(r, i);
      if (!p->live) continue;
      live++;
      CU_ASSERT_EQUAL(p->tid, (uint64_t)pid); /* the child's one thread, under its own tid */
      char text[256];
      stack_text(r, p, text, sizeof text);
      CU_ASSERT_STRING_EQUAL(text, "before fork");
    }
    CU_ASSERT_EQUAL(live, 1);
    lp_remote_close(r);
  }
  CU_ASSERT_EQUAL(write(to_child[1], "x", 1), 1);
  int status;
  CU_ASSERT_EQUAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int i = 0; i < 2; i++) {
    close(to_child[i]);
    close(to_parent[i]);
  }
  helper_do(&h, DO_EXIT);
}

/* ---- wrong targets ---- */

static void test_attach_refuses_wrong_targets(void) {
  lp_remote_t *r = NULL;
  char why[512];
  /* A process that has exited (reaped: the PID is free until reused). */
  pid_t pid = fork();
  CU_ASSERT_TRUE_FATAL(pid >= 0);
  if (pid == 0) _exit(0);
  int status;
  CU_ASSERT_EQUAL(lp_test_wait(pid, 0, &status), 0);
  CU_ASSERT_EQUAL(lp_remote_open(pid, "top", &r, why, sizeof why), LP_REMOTE_GONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "no process"));
  CU_ASSERT_PTR_NULL(r);
  /* A process without labelprof: /bin/sleep. */
  pid = fork();
  CU_ASSERT_TRUE_FATAL(pid >= 0);
  if (pid == 0) {
    execl("/bin/sleep", "sleep", "60", (char *)NULL);
    _exit(127);
  }
  /* Until it has become sleep, it is this program, which has the note: wait for the exec. */
  char exe[64], path[256];
  snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
  for (int i = 0; i < 5000; i++) {
    ssize_t n = readlink(exe, path, sizeof path - 1);
    if (n > 0 && (path[n] = '\0', strstr(path, "sleep"))) break;
    usleep(1000);
  }
  CU_ASSERT_EQUAL(lp_remote_open(pid, "top", &r, why, sizeof why), LP_REMOTE_NONE);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "does not use labelprof"));
  kill(pid, SIGKILL);
  (void)lp_test_wait(pid, 0, &status);
}

static void test_attach_says_why_it_is_refused(void) {
  char why[512];
  lp_deny_facts_t f = {.pid = 42, .target_uid = 0, .our_uid = 65534, .target_user = "root", .our_user = "nobody",
                       .cap_sys_ptrace = false, .yama = -1, .target_undumpable = false};
  lp_remote_why_denied(&f, why, sizeof why);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "runs as root and you are nobody"));
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "sudo labelprof top 42"));
  CU_ASSERT_PTR_NULL(strstr(why, "or as root")); /* root is said once */
  f.target_uid = 1000;
  f.target_user = "alice";
  lp_remote_why_denied(&f, why, sizeof why);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "runs as alice and you are nobody; run labelprof as root (sudo labelprof top 42) or as alice"));
  /* The advice is the command that was refused: record's is record's. */
  f.cmd = "record";
  lp_remote_why_denied(&f, why, sizeof why);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "run labelprof as root (sudo labelprof record -p 42) or as alice"));
  CU_ASSERT_PTR_NULL(strstr(why, "labelprof top"));
  f.cmd = NULL;
  f.target_uid = 65534;
  f.target_user = "nobody";
  f.yama = 1;
  lp_remote_why_denied(&f, why, sizeof why);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "ptrace_scope is 1"));
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "sysctl kernel.yama.ptrace_scope=0"));
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "LABELPROF_ALLOW_ATTACH=1"));
  f.yama = 2;
  lp_remote_why_denied(&f, why, sizeof why);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "ptrace_scope is 2"));
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "run labelprof as root"));
  CU_ASSERT_PTR_NULL(strstr(why, "LABELPROF_ALLOW_ATTACH")); /* no help at 2 */
  f.yama = 3;
  lp_remote_why_denied(&f, why, sizeof why);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "not even root"));
  f.yama = 0;
  f.target_undumpable = true;
  lp_remote_why_denied(&f, why, sizeof why);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "not dumpable"));
  f.cap_sys_ptrace = true;
  lp_remote_why_denied(&f, why, sizeof why);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "CAP_SYS_PTRACE"));
}

/* The descriptor's layout is the library's, taken with offsetof: a reader needs nothing else. */
static void test_attach_descriptor_describes_the_library(void) {
  lp__thread_t *t = lp__thread_attach();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  lp_attach_header_t h;
  extern char lp__attach_desc[]; /* its type is attach.c's; the header is its start */
  memcpy(&h, lp__attach_desc, sizeof h);
  CU_ASSERT_EQUAL(memcmp(h.magic, LP_ATTACH_MAGIC, 8), 0);
  CU_ASSERT_EQUAL(h.version, LP_ATTACH_VERSION);
  CU_ASSERT_EQUAL(h.thread_word, offsetof(lp__thread_t, hot.word));
  CU_ASSERT_EQUAL(h.thread_frames, offsetof(lp__thread_t, hot.frames));
  CU_ASSERT_EQUAL(h.stack_capacity, LP_STACK_CAPACITY);
  CU_ASSERT_EQUAL(h.frame_flags, (uint64_t)(LP_IMPL_TRACED | LP_IMPL_NOTIFIED));
  CU_ASSERT_TRUE(h.slots_used >= 1); /* this thread */
  /* The slot of this thread holds its state. */
  CU_ASSERT_PTR_NOT_NULL(t->attach_slot);
}

/*
 * Whether process_vm_readv reads this process's own memory here: not under
 * an emulator that does not carry it out (qemu-user, for CI's aarch64
 * suite), nor under a seccomp filter that refuses it.
 */
static bool can_read_self(void) {
  uint64_t want = 0x6c6162656c70726full, got = 0;
  struct iovec local = {&got, sizeof got}, remote = {&want, sizeof want};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof got && got == want;
}

int main(void) {
  if (!can_read_self()) {
    printf("SKIP: process_vm_readv cannot read this process here (%s): an emulator or a seccomp filter\n",
           strerror(errno));
    return 77;
  }
  CU_TestInfo tests[] = {
      LP_TEST(test_attach_finds_the_descriptor_through_the_note),
      LP_TEST(test_attach_descriptor_describes_the_library),
      LP_TEST(test_attach_reads_names_and_stacks_of_threads),
      LP_TEST(test_attach_stack_changed_during_a_pass_is_read_again),
      LP_TEST(test_attach_rename_during_a_pass_is_read_again),
      LP_TEST(test_attach_thread_that_exits_during_a_pass_is_dropped),
      LP_TEST(test_attach_frames_rewritten_after_the_word_are_not_kept),
      LP_TEST(test_attach_never_keeps_a_torn_stack),
      LP_TEST(test_attach_sees_threads_past_the_first_slots),
      LP_TEST(test_attach_labels_past_the_first_table_sizes),
      LP_TEST(test_attach_forked_child_shows_one_thread),
      LP_TEST(test_attach_refuses_wrong_targets),
      LP_TEST(test_attach_says_why_it_is_refused),
      CU_TEST_INFO_NULL,
  };
  return lp_test_main("attach", tests);
}
