/*
 * attach.h: reading the pseudo-stacks of another process that uses
 * labelprof, from outside it (private to the command; `labelprof top`).
 *
 * lp_remote_open() finds labelprof's note in the process's mapped objects
 * (lib/attach_abi.h), checks the descriptor's version, and keeps where the
 * slots are. Each lp_remote_sample() is one pass over every registered
 * thread: the slots, the stack words (and names of threads new or renamed
 * since), the frames of stacks that changed since the last pass, the slots
 * and words again, with a fence between reads; a thread whose slot or word
 * changed meanwhile is read again, a bounded number of times. Nothing is
 * written to the process and nothing runs in it: the reads are
 * process_vm_readv(2), which needs the rights ptrace(2) would (see
 * lp_remote_why_denied()).
 */
#ifndef LP_TOOLS_ATTACH_H
#define LP_TOOLS_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* lp_remote_open()'s and lp_remote_sample()'s failures, beside 0. */
enum {
  LP_REMOTE_GONE = -1,      /* no such process, or it exited */
  LP_REMOTE_DENIED = -2,    /* no right to read it */
  LP_REMOTE_NONE = -3,      /* it does not use labelprof (or not any more: it ran another program) */
  LP_REMOTE_VERSION = -4,   /* a descriptor of another version, or of another pointer size */
  LP_REMOTE_DAMAGED = -5,   /* a descriptor whose figures make no sense */
  LP_REMOTE_NOMEM = -6,
};

/* A registered thread as the last pass saw it. */
typedef struct lp_rthread {
  uint64_t tid;
  char name[64];
  uint64_t id;        /* the same for the whole life of the thread, never reused in this lp_remote_t */
  uint64_t word;      /* the stack word of the last good read */
  uint32_t depth;     /* its full depth (may exceed the frames held) */
  uint32_t n;         /* frames held: depth, at most the capacity */
  const uint64_t *frames; /* n site addresses, outermost first, flags cleared */
  bool live;          /* in its slot at the last pass */
  bool read;          /* its stack was read whole at the last pass (when live) */
} lp_rthread_t;

typedef struct lp_remote lp_remote_t;

/* What a pass did: counts since the open. */
typedef struct lp_remote_stats {
  uint64_t passes;
  uint64_t reads;     /* thread stacks read whole */
  uint64_t retries;   /* reads done again because the slot or the stack changed during one */
  uint64_t given_up;  /* thread stacks not read in a pass: they changed during every try */
  uint64_t syscalls;  /* process_vm_readv calls */
} lp_remote_stats_t;

/*
 * Opens pid for reading. On failure returns one of the codes above and
 * writes one line (no newline) to why: what is wrong and what to do. cmd
 * is the subcommand that reads it ("top" or "record"; NULL: "top"), whose
 * command line a refusal gives as what to run as root. *out is set only on
 * success; free it with lp_remote_close().
 */
int lp_remote_open(pid_t pid, const char *cmd, lp_remote_t **out, char *why, size_t len);
void lp_remote_close(lp_remote_t *r);

/*
 * One pass. 0, LP_REMOTE_GONE when the process has exited, LP_REMOTE_NONE
 * when its descriptor no longer reads as one (it ran another program),
 * LP_REMOTE_DENIED when the right was lost, LP_REMOTE_NOMEM; why as for
 * lp_remote_open(). Threads keep their places in the list between passes;
 * a thread that left stays in it with live false until the next pass.
 */
int lp_remote_sample(lp_remote_t *r, char *why, size_t len);
size_t lp_remote_thread_count(const lp_remote_t *r);
const lp_rthread_t *lp_remote_thread(const lp_remote_t *r, size_t i);
void lp_remote_stats(const lp_remote_t *r, lp_remote_stats_t *out);

/*
 * A site's label, as an id: sites with the same text have the same id.
 * Read from the process once per site address, then cached. A label that
 * cannot be read gets the text "(unreadable label)"; past 1 << 20 distinct
 * sites, "(other labels)". LP_REMOTE_NOLABEL only out of memory.
 */
#define LP_REMOTE_NOLABEL UINT32_MAX
uint32_t lp_remote_label(lp_remote_t *r, uint64_t site);
/* The text of a label id, NUL-terminated; valid until lp_remote_close(). */
const char *lp_remote_text(const lp_remote_t *r, uint32_t id);
/* The id of the text "(deeper than N labels)" for the node under the deepest frame; N is the capacity. */
uint32_t lp_remote_truncated(lp_remote_t *r);

/* The process's name (its comm at the open) and the library's version it uses. */
const char *lp_remote_comm(const lp_remote_t *r);
const char *lp_remote_lib_version(const lp_remote_t *r);

/*
 * Test: a function called between the reads of each try of a pass, so
 * that a test can make a thread change its stack, be renamed or exit in
 * the middle of one: step 0 after the first read of the slots, 1 after the
 * words (before the frames), 2 after the frames (before the slots and the
 * words are read again). NULL: none.
 */
void lp_remote_test_between(lp_remote_t *r, void (*fn)(void *arg, unsigned attempt, int step), void *arg);

/*
 * Why reading a process was refused, as one line: the target's user and
 * ours, whether we have CAP_SYS_PTRACE, and the kernel's Yama policy
 * (yama: kernel.yama.ptrace_scope, -1 when the kernel has no Yama), and
 * what to do. Pure: the inputs are given, for the tests.
 */
typedef struct lp_deny_facts {
  pid_t pid;
  const char *cmd;          /* the subcommand refused, "top" or "record"; NULL: "top" */
  long target_uid, our_uid; /* effective uids; -1 unknown */
  const char *target_user, *our_user; /* names, or NULL */
  bool cap_sys_ptrace;
  int yama;
  bool target_undumpable;   /* its /proc files belong to root though it does not run as root */
} lp_deny_facts_t;
void lp_remote_why_denied(const lp_deny_facts_t *f, char *why, size_t len);

#endif
