/*
 * attach.c: the pseudo-stacks of another process, read from outside it
 * (see attach.h, and lib/attach_abi.h for what the library publishes).
 *
 * Finding the descriptor. /proc/PID/maps lists the objects the process
 * has mapped; the mapping of each one's first page holds its ELF header
 * and program headers, which say where its notes are loaded. Everything
 * is read from the process's memory, never from the files: a library
 * replaced on disk since, or a process in another mount namespace, reads
 * the same. A process may carry more than one copy of the library (a
 * static program that loads a plugin linked with the shared one): each
 * copy is a source with its own slots, and their threads are read alike.
 *
 * A pass (lp_remote_sample) reads, for every source: A the slots; B each
 * occupied slot's stack word, and the tid and name of a thread it has not
 * seen in that slot with that sequence word; C the frames of each stack
 * whose word is not the one of its last good read; D the slots, and the
 * words of the stacks whose frames C copied (a stack not copied is its
 * word: the frames of its last good read, or none). Each step is one
 * process_vm_readv call of many spans (or a few, past IOV_MAX; spans close
 * together are read as one range), and a fence separates the steps, so
 * every read of one step is ordered after every read of the one before,
 * as the protocol asks: a thread counts as read if its slot is even and
 * the same in A and D and, when its frames were copied, its word the same
 * in B and D. Otherwise it is read again, at most TRIES times in the pass.
 * A state freed and unmapped between the steps fails its own span
 * (EFAULT), not the pass; one freed and reused shows as a changed slot.
 *
 * Labels: a frame is a site's address; the site holds the address of its
 * label's text. Both are read once per site address and cached, the
 * texts interned so that equal texts share an id.
 */
#include "config.h"

#include "attach.h"

#include "attach_abi.h"
#include "index.h" /* the one small hash table */

#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define TRIES 8
#define MAX_SITES (1u << 20)
#define MAX_LABEL 1024      /* bytes of a label's text kept */
#define MAX_SLOTS (1u << 22) /* a descriptor that claims more is damaged */
#define MAX_SOURCES 16

/* ---- reading the process's memory ---- */

typedef struct span {
  uint64_t addr;
  void *buf;
  size_t len;
  bool ok; /* read whole */
} span_t;

/* Spans read as one range: the range's start, and its spans (first, count) in the order by address. */
typedef struct run {
  uint64_t lo;
  size_t first, count;
} run_t;

struct lp_remote {
  pid_t pid;
  const char *cmd; /* the subcommand reading it, for a refusal's advice */
  char comm[64];
  char lib_version[16];
  void (*between)(void *arg, unsigned attempt, int step);
  void *between_arg;
  lp_remote_stats_t stats;
  struct source *src;
  unsigned nsrc;
  /* the slots of every source, in order: the public list */
  struct slotc *slots;
  lp_rthread_t *pub;
  size_t nslots, capslots;
  uint64_t next_id;
  /* spans of a step, and the ranges they are read as, reused */
  span_t *spans;
  size_t nspans, capspans;
  run_t *runs;
  span_t *run_spans;
  size_t capruns;
  span_t **order; /* a step's spans by address */
  size_t caporder;
  char *scratch;
  size_t scratch_len;
  struct iovec *liov, *riov;
  /* sites and labels */
  uint64_t *site_keys; /* 0 = empty (no site lives at address 0) */
  uint32_t *site_ids;
  uint32_t site_mask, nsites;
  char **texts;
  uint32_t ntexts, captexts;
  lp__index_t text_index; /* texts by their hash */
  uint32_t truncated_id, unreadable_id, other_id;
};

typedef struct source {
  uint64_t desc;
  lp_attach_header_t h;
  uint32_t used; /* slots_used as the last step A read it */
  uint64_t *blocks; /* further blocks known, in order */
  uint32_t nblocks, capblocks;
  uint8_t *head_a, *head_d; /* the header and first slots, as steps A and D read them */
  uint8_t **block_a, **block_d;
  size_t head_len, block_len;
  uint32_t first; /* this source's first slot in the list */
  uint32_t nslots; /* slots of it in the list */
} source_t;

typedef struct slotc {
  unsigned src;   /* its source */
  uint32_t index; /* its slot in the source */
  /* the last good read */
  uint64_t seq, addr;
  bool known; /* tid and name read for (seq, addr) */
  uint64_t word;
  uint64_t *frames;
  /* the pass */
  bool pending, want_name, want_frames, b_ok, c_ok, d_ok;
  uint64_t seq_a, addr_a, word_b, word_d;
  uint64_t tid_b;
  char name_b[64];
  uint64_t *frames_c;
} slotc_t;

static void fence(void) {
  /*
   * The kernel's copies for one call are loads made by this thread; a full
   * fence between two calls orders every load of the first before every
   * load of the second (on a CPU change, the switch itself is a full fence).
   */
  atomic_thread_fence(memory_order_seq_cst);
}

static int io_error(lp_remote_t *r, int err, char *why, size_t len);

/*
 * Reads every span, one iovec each; each gets ok. Returns 0, or
 * LP_REMOTE_GONE or LP_REMOTE_DENIED (then why says so) when the process
 * is gone or may not be read. A span that cannot be read (unmapped) is not
 * an error.
 */
static int read_each(lp_remote_t *r, span_t *s, size_t n, char *why, size_t len) {
  size_t i = 0;
  while (i < n) {
    size_t k = 0;
    for (; i + k < n && k < IOV_MAX; k++) {
      r->liov[k].iov_base = s[i + k].buf;
      r->liov[k].iov_len = s[i + k].len;
      r->riov[k].iov_base = (void *)(uintptr_t)s[i + k].addr;
      r->riov[k].iov_len = s[i + k].len;
    }
    r->stats.syscalls++;
    ssize_t got = process_vm_readv(r->pid, r->liov, k, r->riov, k, 0);
    if (got < 0) {
      if (errno == EFAULT || errno == ENOMEM) {
        s[i].ok = false; /* the first span is unreadable: skip it, go on with the rest */
        i++;
        continue;
      }
      return io_error(r, errno, why, len);
    }
    size_t done = 0;
    for (size_t j = 0; j < k; j++) {
      s[i + j].ok = done + s[i + j].len <= (size_t)got;
      done += s[i + j].len;
      if (!s[i + j].ok) { /* the read stopped in this span: it failed; read on after it */
        k = j + 1;
        break;
      }
    }
    i += k;
  }
  return 0;
}

/*
 * As read_each, but spans within RUN_MAX bytes of each other are read as
 * one range and copied out: the kernel pins and copies per iovec, and the
 * words of threads whose states share a page cost one iovec instead of
 * one each. The states are where each thread's malloc arena put them, so
 * the spans are taken in the order of their addresses. A range that
 * cannot be read whole is read again span by span.
 */
#define RUN_MAX 4096
static int by_addr(const void *x, const void *y) {
  const span_t *a = *(span_t *const *)x, *b = *(span_t *const *)y;
  return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int read_spans(lp_remote_t *r, span_t *s, size_t n, char *why, size_t len) {
  if (n < 2) return read_each(r, s, n, why, len);
  if (n > r->caporder) {
    span_t **o = realloc(r->order, n * sizeof *o);
    if (!o) return io_error(r, ENOMEM, why, len);
    r->order = o;
    r->caporder = n;
  }
  for (size_t i = 0; i < n; i++) r->order[i] = &s[i];
  qsort(r->order, n, sizeof *r->order, by_addr);
  size_t nruns = 0, total = 0;
  for (size_t i = 0; i < n;) {
    uint64_t lo = r->order[i]->addr, hi = lo + r->order[i]->len;
    size_t j = i + 1;
    for (; j < n && r->order[j]->addr >= hi && r->order[j]->addr + r->order[j]->len - lo <= RUN_MAX; j++)
      hi = r->order[j]->addr + r->order[j]->len;
    if (nruns == r->capruns) {
      size_t cap = r->capruns ? r->capruns * 2 : 64;
      run_t *v = realloc(r->runs, cap * sizeof *v);
      if (v) r->runs = v;
      span_t *w = v ? realloc(r->run_spans, cap * sizeof *w) : NULL;
      if (w) r->run_spans = w;
      if (!v || !w) return io_error(r, ENOMEM, why, len);
      r->capruns = cap;
    }
    r->runs[nruns++] = (run_t){lo, i, j - i};
    total += hi - lo;
    i = j;
  }
  if (nruns == n) return read_each(r, s, n, why, len);
  if (total > r->scratch_len) {
    char *b = realloc(r->scratch, total);
    if (!b) return io_error(r, ENOMEM, why, len);
    r->scratch = b;
    r->scratch_len = total;
  }
  size_t off = 0;
  for (size_t k = 0; k < nruns; k++) {
    const run_t *u = &r->runs[k];
    const span_t *last = r->order[u->first + u->count - 1];
    r->run_spans[k] = (span_t){u->lo, r->scratch + off, last->addr + last->len - u->lo, false};
    off += r->run_spans[k].len;
  }
  int rc = read_each(r, r->run_spans, nruns, why, len);
  for (size_t k = 0; rc == 0 && k < nruns; k++) {
    const run_t *u = &r->runs[k];
    for (size_t j = u->first; rc == 0 && j < u->first + u->count; j++) {
      span_t *sp = r->order[j];
      if (!r->run_spans[k].ok) {
        rc = read_each(r, sp, 1, why, len);
        continue;
      }
      memcpy(sp->buf, (char *)r->run_spans[k].buf + (sp->addr - u->lo), sp->len);
      sp->ok = true;
    }
  }
  return rc;
}

static span_t *add_span(lp_remote_t *r, uint64_t addr, void *buf, size_t len) {
  if (r->nspans == r->capspans) {
    size_t cap = r->capspans ? r->capspans * 2 : 64;
    span_t *s = realloc(r->spans, cap * sizeof *s);
    if (!s) return NULL;
    r->spans = s;
    r->capspans = cap;
  }
  span_t *s = &r->spans[r->nspans++];
  s->addr = addr;
  s->buf = buf;
  s->len = len;
  s->ok = false;
  return s;
}

/* One span, alone. 0 and *ok, or as read_spans. */
static int read_one(lp_remote_t *r, uint64_t addr, void *buf, size_t len, bool *ok, char *why, size_t wlen) {
  span_t s = {addr, buf, len, false};
  int rc = read_each(r, &s, 1, why, wlen);
  *ok = s.ok;
  return rc;
}

/* ---- why a read was refused ---- */

static const char *user_name(long uid, char *buf, size_t len) {
  struct passwd *pw = uid >= 0 ? getpwuid((uid_t)uid) : NULL;
  if (pw && pw->pw_name)
    snprintf(buf, len, "%s", pw->pw_name);
  else
    snprintf(buf, len, "uid %ld", uid);
  return buf;
}

void lp_remote_why_denied(const lp_deny_facts_t *f, char *why, size_t len) {
  char tu[64], ou[64];
  const char *target = f->target_user ? f->target_user : (snprintf(tu, sizeof tu, "uid %ld", f->target_uid), tu);
  const char *ours = f->our_user ? f->our_user : (snprintf(ou, sizeof ou, "uid %ld", f->our_uid), ou);
  if (f->yama == 3) {
    snprintf(why, len,
             "cannot read process %d: kernel.yama.ptrace_scope is 3, which lets no process read another, not even "
             "root's; it can only be lowered by a reboot (with the sysctl set lower at boot)",
             (int)f->pid);
  } else if (f->cap_sys_ptrace) {
    snprintf(why, len,
             "cannot read process %d although this process has CAP_SYS_PTRACE: a security module (SELinux, "
             "AppArmor) or a seccomp filter refuses process_vm_readv",
             (int)f->pid);
  } else if (f->target_uid >= 0 && f->our_uid >= 0 && f->target_uid != f->our_uid) {
    bool record = f->cmd && strcmp(f->cmd, "record") == 0;
    snprintf(why, len, "cannot read process %d: it runs as %s and you are %s; run labelprof as root (sudo labelprof %s %d)%s%s",
             (int)f->pid, target, ours, record ? "record -p" : "top", (int)f->pid, f->target_uid ? " or as " : "",
             f->target_uid ? target : "");
  } else if (f->target_undumpable) {
    snprintf(why, len,
             "cannot read process %d: it is not dumpable (a set-user-ID program, or it called "
             "prctl(PR_SET_DUMPABLE, 0)), so only root may read it; run labelprof as root",
             (int)f->pid);
  } else if (f->yama == 2) {
    snprintf(why, len,
             "cannot read process %d: kernel.yama.ptrace_scope is 2, which lets only root (CAP_SYS_PTRACE) read "
             "another process; run labelprof as root",
             (int)f->pid);
  } else if (f->yama == 1) {
    snprintf(why, len,
             "cannot read process %d: kernel.yama.ptrace_scope is 1, which lets a process be read only by its "
             "ancestors; run labelprof as root, or `sysctl kernel.yama.ptrace_scope=0`, or start the program "
             "with LABELPROF_ALLOW_ATTACH=1",
             (int)f->pid);
  } else {
    snprintf(why, len, "cannot read process %d (as %s): permission denied; run labelprof as root", (int)f->pid,
             ours);
  }
}

/* A line "Key:\tfirst second ..." of a /proc status file: the first number after the key, -1 if none. */
static long status_field(const char *path, const char *key, unsigned nth) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[512];
  long v = -1;
  size_t n = strlen(key);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, n) != 0) continue;
    char *p = line + n;
    for (unsigned i = 0; i <= nth; i++) {
      char *end;
      errno = 0;
      long x = strtol(p, &end, 10);
      if (end == p || errno) break;
      if (i == nth) v = x;
      p = end;
    }
    break;
  }
  fclose(f);
  return v;
}

static bool have_cap_sys_ptrace(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return geteuid() == 0;
  char line[512];
  bool cap = false;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "CapEff:", 7) == 0) {
      unsigned long long bits = strtoull(line + 7, NULL, 16);
      cap = (bits >> 19) & 1; /* CAP_SYS_PTRACE */
      break;
    }
  fclose(f);
  return cap;
}

static int yama_scope(void) {
  FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  if (!f) return -1;
  int v = -1;
  if (fscanf(f, "%d", &v) != 1) v = -1;
  fclose(f);
  return v;
}

static int denied(lp_remote_t *r, char *why, size_t len) {
  char path[64], tu[64], ou[64];
  lp_deny_facts_t f = {0};
  f.pid = r->pid;
  f.cmd = r->cmd;
  snprintf(path, sizeof path, "/proc/%d/status", (int)r->pid);
  f.target_uid = status_field(path, "Uid:", 1); /* real, effective, saved, fs: the effective one */
  f.our_uid = (long)geteuid();
  f.target_user = f.target_uid >= 0 ? user_name(f.target_uid, tu, sizeof tu) : NULL;
  f.our_user = user_name(f.our_uid, ou, sizeof ou);
  f.cap_sys_ptrace = have_cap_sys_ptrace();
  f.yama = yama_scope();
  struct stat st;
  snprintf(path, sizeof path, "/proc/%d", (int)r->pid);
  f.target_undumpable = stat(path, &st) == 0 && st.st_uid == 0 && f.target_uid > 0;
  lp_remote_why_denied(&f, why, len);
  return LP_REMOTE_DENIED;
}

static int io_error(lp_remote_t *r, int err, char *why, size_t len) {
  if (err == ESRCH) {
    snprintf(why, len, "process %d exited", (int)r->pid);
    return LP_REMOTE_GONE;
  }
  if (err == EPERM || err == EACCES) return denied(r, why, len);
  if (err == ENOMEM) {
    snprintf(why, len, "out of memory");
    return LP_REMOTE_NOMEM;
  }
  snprintf(why, len, "cannot read process %d: %s", (int)r->pid, strerror(err));
  return LP_REMOTE_DENIED;
}

/* ---- finding the descriptors ---- */

typedef ElfW(Ehdr) ehdr_t;
typedef ElfW(Phdr) phdr_t;
#if UINTPTR_MAX > 0xffffffffu
#define OUR_CLASS ELFCLASS64
#else
#define OUR_CLASS ELFCLASS32
#endif

/* What the scan of the maps found, for the message when nothing is there. */
typedef struct scan {
  unsigned objects, other_class;
  uint64_t found[MAX_SOURCES];
  unsigned nfound;
} scan_t;

/* The notes of one loaded segment [at, at + size): labelprof's note gives a descriptor. */
static void scan_notes(const uint8_t *p, size_t size, uint64_t at, uint64_t align, scan_t *sc) {
  size_t off = 0;
  align = align == 8 ? 8 : 4;
  while (off + 12 <= size) {
    uint32_t namesz, descsz, type;
    memcpy(&namesz, p + off, 4);
    memcpy(&descsz, p + off + 4, 4);
    memcpy(&type, p + off + 8, 4);
    size_t name_at = off + 12;
    size_t desc_at = name_at + ((namesz + align - 1) & ~(align - 1));
    size_t next = desc_at + ((descsz + align - 1) & ~(align - 1));
    if (namesz > size || descsz > size || next > size || desc_at > size) return;
    if (namesz == sizeof LP_ATTACH_NOTE_NAME && type == LP_ATTACH_NOTE_TYPE &&
        memcmp(p + name_at, LP_ATTACH_NOTE_NAME, namesz) == 0 && (descsz == 8 || descsz == 4)) {
      int64_t dist;
      if (descsz == 8) {
        memcpy(&dist, p + desc_at, 8);
      } else {
        int32_t d32;
        memcpy(&d32, p + desc_at, 4);
        dist = d32;
      }
      uint64_t desc = at + desc_at + (uint64_t)dist;
      bool seen = false;
      for (unsigned i = 0; i < sc->nfound; i++) seen |= sc->found[i] == desc;
      if (!seen && sc->nfound < MAX_SOURCES) sc->found[sc->nfound++] = desc;
    }
    off = next;
  }
}

/* The object whose first page is mapped at start. 0, or as read_spans. */
static int scan_object(lp_remote_t *r, uint64_t start, scan_t *sc, char *why, size_t len) {
  ehdr_t eh;
  bool ok;
  int rc = read_one(r, start, &eh, sizeof eh, &ok, why, len);
  if (rc || !ok || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return rc;
  sc->objects++;
  if (eh.e_ident[EI_CLASS] != OUR_CLASS) {
    sc->other_class++;
    return 0;
  }
  if (eh.e_phentsize != sizeof(phdr_t) || eh.e_phnum == 0 || eh.e_phnum > 256) return 0;
  phdr_t ph[256];
  rc = read_one(r, start + eh.e_phoff, ph, eh.e_phnum * sizeof(phdr_t), &ok, why, len);
  if (rc || !ok) return rc;
  /* The load bias: the segment that starts the file is mapped at start. */
  uint64_t bias = 0;
  bool have_bias = false;
  long page = sysconf(_SC_PAGESIZE);
  uint64_t mask = ~(uint64_t)((page > 0 ? page : 4096) - 1);
  for (unsigned i = 0; i < eh.e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && (ph[i].p_offset & mask) == 0) {
      bias = start - (ph[i].p_vaddr & mask);
      have_bias = true;
      break;
    }
  if (!have_bias) return 0;
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    if (ph[i].p_type != PT_NOTE || ph[i].p_memsz < 12 || ph[i].p_memsz > 65536) continue;
    uint8_t *buf = malloc(ph[i].p_memsz);
    if (!buf) return LP_REMOTE_NOMEM;
    uint64_t at = bias + ph[i].p_vaddr;
    rc = read_one(r, at, buf, ph[i].p_memsz, &ok, why, len);
    if (rc == 0 && ok) scan_notes(buf, ph[i].p_memsz, at, ph[i].p_align, sc);
    free(buf);
    if (rc) return rc;
  }
  return 0;
}

static int scan_maps(lp_remote_t *r, scan_t *sc, char *why, size_t len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)r->pid);
  FILE *f = fopen(path, "r");
  if (!f) {
    int e = errno;
    if (e == ENOENT || e == ESRCH) {
      snprintf(why, len, "no process with PID %d", (int)r->pid);
      return LP_REMOTE_GONE;
    }
    return io_error(r, e, why, len);
  }
  /* Objects already scanned: (device, inode) of each. */
  struct {
    char dev[16];
    unsigned long inode;
  } seen[512];
  unsigned nseen = 0;
  char line[4096 + 256];
  int rc = 0;
  while (rc == 0 && fgets(line, sizeof line, f)) {
    unsigned long long start, end, offset;
    char perms[8], dev[16];
    unsigned long inode;
    int name_at = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %15s %lu %n", &start, &end, perms, &offset, dev, &inode, &name_at) < 6)
      continue;
    if (offset != 0 || inode == 0 || perms[0] != 'r') continue;
    /* A device's mapping is never a program, and reading one may have effects: left alone. */
    const char *name = line + name_at;
    if (strncmp(name, "/dev/", 5) == 0 && strncmp(name, "/dev/shm/", 9) != 0) continue;
    bool dup = false;
    for (unsigned i = 0; i < nseen && !dup; i++) dup = seen[i].inode == inode && strcmp(seen[i].dev, dev) == 0;
    if (dup) continue;
    if (nseen < sizeof seen / sizeof seen[0]) {
      snprintf(seen[nseen].dev, sizeof seen[nseen].dev, "%s", dev);
      seen[nseen++].inode = inode;
    }
    rc = scan_object(r, start, sc, why, len);
  }
  if (ferror(f) && rc == 0) {
    /* A read of maps fails with ESRCH once the process has gone. */
    snprintf(why, len, "process %d exited", (int)r->pid);
    rc = LP_REMOTE_GONE;
  }
  fclose(f);
  return rc;
}

/* ---- sources ---- */

static bool header_sane(const lp_attach_header_t *h) {
  const uint32_t big = 1u << 20;
  return h->header_size >= sizeof *h && h->header_size < big && h->stack_capacity >= 1 &&
         h->stack_capacity <= 4096 && h->thread_word < big && h->thread_frames < big && h->thread_tid < big &&
         h->thread_name < big && h->name_size >= 1 && h->name_size <= 4096 && h->site_label < 4096 &&
         h->slot_size >= 2 * sizeof(uint64_t) && h->slot_size <= 4096 && h->slot_seq + 8 <= h->slot_size &&
         h->slot_thread + sizeof(uintptr_t) <= h->slot_size && h->first_slots >= h->header_size &&
         h->first_slots < big && h->first_count <= 65536 && h->block_slots >= 1 && h->block_slots <= 65536 &&
         h->block_slots_at >= 8 && h->block_slots_at < 4096 && h->depth_mask != 0 &&
         (h->depth_mask & (h->depth_mask + 1)) == 0;
}

static int add_source(lp_remote_t *r, uint64_t desc, char *why, size_t len) {
  lp_attach_header_t h;
  bool ok;
  int rc = read_one(r, desc, &h, sizeof h, &ok, why, len);
  if (rc) return rc;
  if (!ok || memcmp(h.magic, LP_ATTACH_MAGIC, sizeof h.magic) != 0) {
    snprintf(why, len, "process %d has labelprof's note, but it points at no descriptor (at %#llx)", (int)r->pid,
             (unsigned long long)desc);
    return LP_REMOTE_DAMAGED;
  }
  h.lib_version[sizeof h.lib_version - 1] = '\0';
  for (char *c = h.lib_version; *c; c++)
    if (!isprint((unsigned char)*c)) *c = '?';
  if (h.version != LP_ATTACH_VERSION) {
    snprintf(why, len,
             "process %d uses labelprof %s, whose attach descriptor is version %u; this labelprof (%s) reads "
             "version %u: run the labelprof command of the program's release",
             (int)r->pid, h.lib_version, h.version, PACKAGE_VERSION, LP_ATTACH_VERSION);
    return LP_REMOTE_VERSION;
  }
  if (h.ptr_size != sizeof(void *)) {
    snprintf(why, len, "process %d is a %u-bit program; this labelprof reads %u-bit ones", (int)r->pid,
             h.ptr_size * 8, (unsigned)sizeof(void *) * 8);
    return LP_REMOTE_VERSION;
  }
  if (!header_sane(&h)) {
    snprintf(why, len, "process %d: labelprof's descriptor at %#llx holds figures that make no sense", (int)r->pid,
             (unsigned long long)desc);
    return LP_REMOTE_DAMAGED;
  }
  source_t *s = realloc(r->src, (r->nsrc + 1) * sizeof *s);
  if (!s) return LP_REMOTE_NOMEM;
  r->src = s;
  s = &r->src[r->nsrc];
  memset(s, 0, sizeof *s);
  s->desc = desc;
  s->h = h;
  s->head_len = h.first_slots + (size_t)h.first_count * h.slot_size;
  s->block_len = h.block_slots_at + (size_t)h.block_slots * h.slot_size;
  s->head_a = malloc(s->head_len);
  s->head_d = malloc(s->head_len);
  r->nsrc++;
  if (!s->head_a || !s->head_d) return LP_REMOTE_NOMEM;
  if (!r->lib_version[0]) snprintf(r->lib_version, sizeof r->lib_version, "%s", h.lib_version);
  return 0;
}

static void free_source(source_t *s) {
  free(s->head_a);
  free(s->head_d);
  for (uint32_t i = 0; i < s->nblocks; i++) {
    free(s->block_a[i]);
    free(s->block_d[i]);
  }
  free(s->block_a);
  free(s->block_d);
  free(s->blocks);
}

void lp_remote_close(lp_remote_t *r) {
  if (!r) return;
  for (unsigned i = 0; i < r->nsrc; i++) free_source(&r->src[i]);
  free(r->src);
  for (size_t i = 0; i < r->nslots; i++) {
    free(r->slots[i].frames);
    free(r->slots[i].frames_c);
  }
  free(r->slots);
  free(r->pub);
  free(r->spans);
  free(r->runs);
  free(r->run_spans);
  free(r->order);
  free(r->scratch);
  free(r->liov);
  free(r->riov);
  free(r->site_keys);
  free(r->site_ids);
  for (uint32_t i = 0; i < r->ntexts; i++) free(r->texts[i]);
  free(r->texts);
  free(r->text_index.slot);
  free(r);
}

static void read_comm(lp_remote_t *r) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", (int)r->pid);
  FILE *f = fopen(path, "r");
  r->comm[0] = '\0';
  if (!f) return;
  if (fgets(r->comm, sizeof r->comm, f)) r->comm[strcspn(r->comm, "\n")] = '\0';
  fclose(f);
}

int lp_remote_open(pid_t pid, const char *cmd, lp_remote_t **out, char *why, size_t len) {
  *why = '\0';
  if (pid <= 0) {
    snprintf(why, len, "no process with PID %d", (int)pid);
    return LP_REMOTE_GONE;
  }
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    snprintf(why, len, "no process with PID %d", (int)pid);
    return LP_REMOTE_GONE;
  }
  lp_remote_t *r = calloc(1, sizeof *r);
  if (!r) return LP_REMOTE_NOMEM;
  r->pid = pid;
  r->cmd = cmd;
  r->liov = malloc(IOV_MAX * sizeof *r->liov);
  r->riov = malloc(IOV_MAX * sizeof *r->riov);
  int rc = r->liov && r->riov ? 0 : LP_REMOTE_NOMEM;
  read_comm(r);
  scan_t sc = {0};
  if (rc == 0) rc = scan_maps(r, &sc, why, len);
  if (rc == 0 && sc.nfound == 0) {
    if (sc.other_class && sc.other_class == sc.objects)
      snprintf(why, len, "process %d (%s) is a %s program; this labelprof reads %u-bit ones", (int)pid, r->comm,
               OUR_CLASS == ELFCLASS64 ? "32-bit" : "64-bit", (unsigned)sizeof(void *) * 8);
    else
      snprintf(why, len,
               "process %d (%s) does not use labelprof: none of its %u mapped objects has labelprof's note "
               "(a program or library built with labelprof 0.1.0 or later has it)",
               (int)pid, r->comm[0] ? r->comm : "?", sc.objects);
    rc = LP_REMOTE_NONE;
  }
  for (unsigned i = 0; rc == 0 && i < sc.nfound; i++) rc = add_source(r, sc.found[i], why, len);
  if (rc == 0) {
    r->truncated_id = LP_REMOTE_NOLABEL;
    r->unreadable_id = LP_REMOTE_NOLABEL;
    r->other_id = LP_REMOTE_NOLABEL;
  }
  if (rc == LP_REMOTE_NOMEM) snprintf(why, len, "out of memory");
  if (rc) {
    lp_remote_close(r);
    return rc;
  }
  *out = r;
  return 0;
}

/* ---- a pass ---- */

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

static uint64_t get_ptr(const uint8_t *p) {
  uintptr_t v;
  memcpy(&v, p, sizeof v);
  return (uint64_t)v;
}

/* Slot i of source s in a copy of its slots (head, blocks). */
static const uint8_t *slot_bytes(const source_t *s, const uint8_t *head, uint8_t *const *blocks, uint32_t i) {
  if (i < s->h.first_count) return head + s->h.first_slots + (size_t)i * s->h.slot_size;
  i -= s->h.first_count;
  return blocks[i / s->h.block_slots] + s->h.block_slots_at + (size_t)(i % s->h.block_slots) * s->h.slot_size;
}

static int grow_slots(lp_remote_t *r, size_t n) {
  if (n <= r->capslots) return 0;
  size_t cap = r->capslots ? r->capslots : 16;
  while (cap < n) cap *= 2;
  slotc_t *sl = realloc(r->slots, cap * sizeof *sl);
  if (!sl) return LP_REMOTE_NOMEM;
  r->slots = sl;
  lp_rthread_t *pub = realloc(r->pub, cap * sizeof *pub);
  if (!pub) return LP_REMOTE_NOMEM;
  r->pub = pub;
  memset(r->slots + r->capslots, 0, (cap - r->capslots) * sizeof *sl);
  memset(r->pub + r->capslots, 0, (cap - r->capslots) * sizeof *pub);
  r->capslots = cap;
  return 0;
}

/*
 * The blocks slots [0, used) need, known: new ones are found through the
 * link at the start of the last known block (or the header's). Their
 * copies are made in both step buffers.
 */
static int find_blocks(lp_remote_t *r, source_t *s, const uint8_t *head, char *why, size_t len) {
  uint32_t need = s->used <= s->h.first_count ? 0 : (s->used - s->h.first_count + s->h.block_slots - 1) / s->h.block_slots;
  while (s->nblocks < need) {
    uint64_t next;
    if (s->nblocks == 0) {
      memcpy(&next, head + offsetof(lp_attach_header_t, next_block), sizeof next);
    } else {
      bool ok;
      int rc = read_one(r, s->blocks[s->nblocks - 1], &next, sizeof next, &ok, why, len);
      if (rc) return rc;
      if (!ok) next = 0;
    }
    if (!next) { /* linked before slots_used grew: not yet visible here; use what is known */
      s->used = s->h.first_count + s->nblocks * s->h.block_slots;
      return 0;
    }
    if (s->nblocks == s->capblocks) {
      uint32_t cap = s->capblocks ? s->capblocks * 2 : 4;
      uint64_t *b = realloc(s->blocks, cap * sizeof *b);
      if (!b) return LP_REMOTE_NOMEM;
      s->blocks = b;
      uint8_t **ba = realloc(s->block_a, cap * sizeof *ba);
      if (!ba) return LP_REMOTE_NOMEM;
      s->block_a = ba;
      uint8_t **bd = realloc(s->block_d, cap * sizeof *bd);
      if (!bd) return LP_REMOTE_NOMEM;
      s->block_d = bd;
      s->capblocks = cap;
    }
    s->block_a[s->nblocks] = malloc(s->block_len);
    s->block_d[s->nblocks] = malloc(s->block_len);
    if (!s->block_a[s->nblocks] || !s->block_d[s->nblocks]) {
      free(s->block_a[s->nblocks]);
      free(s->block_d[s->nblocks]);
      return LP_REMOTE_NOMEM;
    }
    s->blocks[s->nblocks++] = next;
    bool ok;
    int rc = read_one(r, next, s->block_a[s->nblocks - 1], s->block_len, &ok, why, len);
    if (rc) return rc;
    if (!ok) return LP_REMOTE_DAMAGED;
  }
  return 0;
}

/* Step A or D: every source's header, first slots and blocks into its a or d copies. */
static int read_slots(lp_remote_t *r, bool d, char *why, size_t len) {
  r->nspans = 0;
  for (unsigned k = 0; k < r->nsrc; k++) {
    source_t *s = &r->src[k];
    if (!add_span(r, s->desc, d ? s->head_d : s->head_a, s->head_len)) return LP_REMOTE_NOMEM;
    for (uint32_t b = 0; b < s->nblocks; b++)
      if (!add_span(r, s->blocks[b], d ? s->block_d[b] : s->block_a[b], s->block_len)) return LP_REMOTE_NOMEM;
  }
  int rc = read_spans(r, r->spans, r->nspans, why, len);
  if (rc) return rc;
  size_t at = 0;
  for (unsigned k = 0; k < r->nsrc; k++) {
    source_t *s = &r->src[k];
    const uint8_t *head = d ? s->head_d : s->head_a;
    bool ok = r->spans[at].ok;
    at += 1 + s->nblocks;
    if (!ok || memcmp(head, LP_ATTACH_MAGIC, 8) != 0 || ((const lp_attach_header_t *)(const void *)head)->version !=
                                                             LP_ATTACH_VERSION) {
      snprintf(why, len, "process %d no longer uses labelprof (it ran another program)", (int)r->pid);
      return LP_REMOTE_NONE;
    }
    if (d) continue;
    uint32_t used;
    memcpy(&used, head + offsetof(lp_attach_header_t, slots_used), sizeof used);
    if (used > MAX_SLOTS) {
      snprintf(why, len, "process %d: labelprof's descriptor claims %u threads", (int)r->pid, used);
      return LP_REMOTE_DAMAGED;
    }
    if (used > s->used) {
      s->used = used;
      rc = find_blocks(r, s, head, why, len);
      if (rc) return rc;
    }
  }
  return 0;
}

/* The list grows to hold every source's used slots; new ones start empty. */
static int place_slots(lp_remote_t *r) {
  size_t n = 0;
  for (unsigned k = 0; k < r->nsrc; k++) n += r->src[k].used;
  if (grow_slots(r, n)) return LP_REMOTE_NOMEM;
  /* Sources keep their order; a source's new slots go after its old ones, so later sources move. */
  size_t at = n;
  for (unsigned k = r->nsrc; k-- > 0;) {
    source_t *s = &r->src[k];
    at -= s->used;
    if (at != s->first || s->used != s->nslots) {
      memmove(r->slots + at, r->slots + s->first, s->nslots * sizeof *r->slots);
      memmove(r->pub + at, r->pub + s->first, s->nslots * sizeof *r->pub);
      memset(r->slots + at + s->nslots, 0, (s->used - s->nslots) * sizeof *r->slots);
      memset(r->pub + at + s->nslots, 0, (s->used - s->nslots) * sizeof *r->pub);
      for (uint32_t j = s->nslots; j < s->used; j++) r->slots[at + j].pending = true; /* new: read this pass */
    }
    s->first = (uint32_t)at;
    s->nslots = s->used;
    for (uint32_t j = 0; j < s->used; j++) {
      slotc_t *c = &r->slots[at + j];
      c->src = k;
      c->index = j;
      if (!c->frames) {
        c->frames = calloc(s->h.stack_capacity, sizeof *c->frames);
        c->frames_c = calloc(s->h.stack_capacity, sizeof *c->frames_c);
        if (!c->frames || !c->frames_c) return LP_REMOTE_NOMEM;
      }
    }
  }
  r->nslots = n;
  return 0;
}

/* The frames a stack word's depth puts in the state: its depth, at most the capacity. */
static uint32_t held(const source_t *s, uint64_t word) {
  uint64_t depth = word & s->h.depth_mask;
  return depth < s->h.stack_capacity ? (uint32_t)depth : s->h.stack_capacity;
}

/* B: each pending occupied slot's word, and the tid and name of a thread new to the slot. */
static int step_words(lp_remote_t *r, char *why, size_t len) {
  r->nspans = 0;
  for (size_t i = 0; i < r->nslots; i++) {
    slotc_t *c = &r->slots[i];
    const source_t *s = &r->src[c->src];
    if (!c->pending) continue;
    const uint8_t *b = slot_bytes(s, s->head_a, s->block_a, c->index);
    c->seq_a = get_u64(b + s->h.slot_seq);
    c->addr_a = get_ptr(b + s->h.slot_thread);
    c->b_ok = c->c_ok = c->want_frames = false;
    if ((c->seq_a & 1) || !c->addr_a) continue;
    c->want_name = !(c->known && c->seq == c->seq_a && c->addr == c->addr_a);
    size_t n = s->h.name_size < sizeof c->name_b ? s->h.name_size : sizeof c->name_b;
    if (!add_span(r, c->addr_a + s->h.thread_word, &c->word_b, sizeof c->word_b) ||
        (c->want_name && (!add_span(r, c->addr_a + s->h.thread_tid, &c->tid_b, sizeof c->tid_b) ||
                          !add_span(r, c->addr_a + s->h.thread_name, c->name_b, n))))
      return io_error(r, ENOMEM, why, len);
  }
  int rc = read_spans(r, r->spans, r->nspans, why, len);
  size_t at = 0;
  for (size_t i = 0; rc == 0 && i < r->nslots; i++) {
    slotc_t *c = &r->slots[i];
    if (!c->pending || (c->seq_a & 1) || !c->addr_a) continue;
    c->b_ok = r->spans[at++].ok;
    if (c->want_name) {
      c->b_ok &= r->spans[at].ok && r->spans[at + 1].ok;
      at += 2;
    }
  }
  return rc;
}

/* C: the frames of each stack whose word is not the one of its last good read. */
static int step_frames(lp_remote_t *r, char *why, size_t len) {
  r->nspans = 0;
  for (size_t i = 0; i < r->nslots; i++) {
    slotc_t *c = &r->slots[i];
    const source_t *s = &r->src[c->src];
    if (!c->pending || !c->b_ok) continue;
    uint32_t n = held(s, c->word_b);
    c->want_frames = (c->want_name || c->word != c->word_b) && n > 0;
    c->c_ok = true;
    if (c->want_frames && !add_span(r, c->addr_a + s->h.thread_frames, c->frames_c, n * sizeof(uintptr_t)))
      return io_error(r, ENOMEM, why, len);
  }
  int rc = read_spans(r, r->spans, r->nspans, why, len);
  size_t at = 0;
  for (size_t i = 0; rc == 0 && i < r->nslots; i++) {
    slotc_t *c = &r->slots[i];
    if (c->pending && c->b_ok && c->want_frames) c->c_ok = r->spans[at++].ok;
  }
  return rc;
}

/* D: the slots again, and the words of the stacks whose frames C copied (another stack is its word). */
static int step_again(lp_remote_t *r, char *why, size_t len) {
  int rc = read_slots(r, true, why, len);
  if (rc) return rc;
  r->nspans = 0;
  for (size_t i = 0; i < r->nslots; i++) {
    slotc_t *c = &r->slots[i];
    c->word_d = c->word_b;
    c->d_ok = c->pending && c->b_ok && c->c_ok;
    if (c->d_ok && c->want_frames &&
        !add_span(r, c->addr_a + r->src[c->src].h.thread_word, &c->word_d, sizeof c->word_d))
      return io_error(r, ENOMEM, why, len);
  }
  rc = read_spans(r, r->spans, r->nspans, why, len);
  size_t at = 0;
  for (size_t i = 0; rc == 0 && i < r->nslots; i++) {
    slotc_t *c = &r->slots[i];
    if (c->d_ok && c->want_frames) c->d_ok = r->spans[at++].ok;
  }
  return rc;
}

/* What held of each pending slot is kept; true if some must be read again. */
static bool keep(lp_remote_t *r) {
  bool again = false;
  for (size_t i = 0; i < r->nslots; i++) {
    slotc_t *c = &r->slots[i];
    const source_t *s = &r->src[c->src];
    lp_rthread_t *p = &r->pub[i];
    if (!c->pending) continue;
    const uint8_t *b = slot_bytes(s, s->head_d, s->block_d, c->index);
    bool still = !(c->seq_a & 1) && get_u64(b + s->h.slot_seq) == c->seq_a && get_ptr(b + s->h.slot_thread) == c->addr_a;
    if (still && !c->addr_a) { /* an empty slot */
      c->pending = false;
      p->live = p->read = false;
      continue;
    }
    if (!still || !c->d_ok || c->word_d != c->word_b) {
      again = true;
      r->stats.retries++;
      continue;
    }
    if (c->want_name) {
      uint64_t tid = c->tid_b;
      c->name_b[sizeof c->name_b - 1] = '\0';
      if (!(c->known && c->addr == c->addr_a && p->tid == tid)) p->id = ++r->next_id;
      p->tid = tid;
      memcpy(p->name, c->name_b, sizeof p->name);
      c->known = true;
      c->seq = c->seq_a;
      c->addr = c->addr_a;
    }
    c->word = c->word_b;
    p->n = held(s, c->word);
    if (c->want_frames)
      for (uint32_t f = 0; f < p->n; f++) c->frames[f] = c->frames_c[f] & ~s->h.frame_flags;
    p->word = c->word;
    p->depth = (uint32_t)(c->word & s->h.depth_mask);
    p->frames = c->frames;
    p->live = p->read = true;
    c->pending = false;
    r->stats.reads++;
  }
  return again;
}

int lp_remote_sample(lp_remote_t *r, char *why, size_t len) {
  *why = '\0';
  for (size_t i = 0; i < r->nslots; i++) r->slots[i].pending = true;
  bool again = true;
  for (unsigned attempt = 0; attempt < TRIES && again; attempt++) {
    int rc = read_slots(r, false, why, len); /* A */
    if (rc == 0 && place_slots(r) != 0) rc = io_error(r, ENOMEM, why, len);
    if (rc) return rc;
    if (r->between) r->between(r->between_arg, attempt, 0);
    fence();
    if ((rc = step_words(r, why, len)) != 0) return rc;
    if (r->between) r->between(r->between_arg, attempt, 1);
    fence();
    if ((rc = step_frames(r, why, len)) != 0) return rc;
    if (r->between) r->between(r->between_arg, attempt, 2);
    fence();
    if ((rc = step_again(r, why, len)) != 0) return rc;
    again = keep(r);
  }
  for (size_t i = 0; i < r->nslots; i++) {
    slotc_t *c = &r->slots[i];
    if (!c->pending) continue;
    c->pending = false;
    r->stats.given_up++;
    r->pub[i].read = false;
    r->pub[i].live = c->addr_a != 0 && c->known && c->addr == c->addr_a;
  }
  r->stats.passes++;
  return 0;
}

size_t lp_remote_thread_count(const lp_remote_t *r) { return r->nslots; }
const lp_rthread_t *lp_remote_thread(const lp_remote_t *r, size_t i) { return &r->pub[i]; }
void lp_remote_stats(const lp_remote_t *r, lp_remote_stats_t *out) { *out = r->stats; }
const char *lp_remote_comm(const lp_remote_t *r) { return r->comm; }
const char *lp_remote_lib_version(const lp_remote_t *r) { return r->lib_version; }

void lp_remote_test_between(lp_remote_t *r, void (*fn)(void *arg, unsigned attempt, int step), void *arg) {
  r->between = fn;
  r->between_arg = arg;
}

/* ---- labels ---- */

/* FNV-1a over the text, spread by lp__hash64. */
static uint32_t hash_text(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return lp__hash64(h);
}

/* The id of text (interned). LP_REMOTE_NOLABEL out of memory. */
static uint32_t intern(lp_remote_t *r, const char *text) {
  uint32_t h = hash_text(text);
  for (uint32_t at, e = lp__index_first(&r->text_index, h, &at); e; e = lp__index_next(&r->text_index, &at))
    if (strcmp(r->texts[e - 1], text) == 0) return e - 1;
  uint64_t want = lp__index_wants(&r->text_index, r->ntexts, 256);
  if (want) {
    uint32_t *fresh = want == UINT64_MAX ? NULL : calloc((size_t)want, sizeof *fresh);
    if (!fresh) return LP_REMOTE_NOLABEL;
    free(lp__index_move(&r->text_index, fresh, want));
    for (uint32_t id = 0; id < r->ntexts; id++) lp__index_put(&r->text_index, hash_text(r->texts[id]), id);
  }
  if (r->ntexts == r->captexts) {
    uint32_t cap = r->captexts ? r->captexts * 2 : 64;
    char **t = realloc(r->texts, cap * sizeof *t);
    if (!t) return LP_REMOTE_NOLABEL;
    r->texts = t;
    r->captexts = cap;
  }
  char *copy = strdup(text);
  if (!copy) return LP_REMOTE_NOLABEL;
  r->texts[r->ntexts] = copy;
  lp__index_put(&r->text_index, h, r->ntexts);
  return r->ntexts++;
}

/* A NUL-terminated text at addr, at most MAX_LABEL - 1 bytes, read a page at a time. false if unreadable. */
static bool read_text(lp_remote_t *r, uint64_t addr, char *buf) {
  size_t have = 0;
  char why[256];
  while (have < MAX_LABEL - 1) {
    uint64_t at = addr + have;
    size_t room = 4096 - (size_t)(at & 4095);
    if (room > MAX_LABEL - 1 - have) room = MAX_LABEL - 1 - have;
    bool ok;
    if (read_one(r, at, buf + have, room, &ok, why, sizeof why) != 0 || !ok) {
      if (have == 0) return false;
      break;
    }
    char *nul = memchr(buf + have, '\0', room);
    if (nul) return true;
    have += room;
  }
  buf[have] = '\0';
  return true;
}

uint32_t lp_remote_label(lp_remote_t *r, uint64_t site) {
  if (!r->site_keys || r->nsites * 2 >= r->site_mask + 1) {
    uint32_t size = r->site_keys ? (r->site_mask + 1) * 2 : 1024;
    uint64_t *keys = calloc(size, sizeof *keys);
    uint32_t *ids = malloc(size * sizeof *ids);
    if (!keys || !ids) {
      free(keys);
      free(ids);
      return LP_REMOTE_NOLABEL;
    }
    for (uint32_t j = 0; r->site_keys && j <= r->site_mask; j++) {
      if (!r->site_keys[j]) continue;
      uint32_t i = lp__hash64(r->site_keys[j]) & (size - 1);
      while (keys[i]) i = (i + 1) & (size - 1);
      keys[i] = r->site_keys[j];
      ids[i] = r->site_ids[j];
    }
    free(r->site_keys);
    free(r->site_ids);
    r->site_keys = keys;
    r->site_ids = ids;
    r->site_mask = size - 1;
  }
  uint32_t i = lp__hash64(site) & r->site_mask;
  for (; r->site_keys[i]; i = (i + 1) & r->site_mask)
    if (r->site_keys[i] == site) return r->site_ids[i];
  uint32_t id;
  if (site == 0) {
    id = intern(r, "(null site)");
  } else if (r->nsites >= MAX_SITES) {
    return r->other_id != LP_REMOTE_NOLABEL ? r->other_id : (r->other_id = intern(r, "(other labels)"));
  } else {
    char text[MAX_LABEL];
    uintptr_t label = 0;
    bool ok = false;
    char why[256];
    const source_t *s = &r->src[0];
    if (read_one(r, site + s->h.site_label, &label, sizeof label, &ok, why, sizeof why) == 0 && ok) {
      if (!label)
        snprintf(text, sizeof text, "(null)");
      else if (!read_text(r, label, text))
        snprintf(text, sizeof text, "(unreadable label)");
    } else {
      snprintf(text, sizeof text, "(unreadable label)");
    }
    id = intern(r, text);
  }
  if (id == LP_REMOTE_NOLABEL) return id;
  r->site_keys[i] = site;
  r->site_ids[i] = id;
  r->nsites++;
  return id;
}

const char *lp_remote_text(const lp_remote_t *r, uint32_t id) { return id < r->ntexts ? r->texts[id] : "?"; }

uint32_t lp_remote_truncated(lp_remote_t *r) {
  if (r->truncated_id == LP_REMOTE_NOLABEL) {
    char text[64];
    snprintf(text, sizeof text, "(deeper than %u labels)", r->nsrc ? r->src[0].h.stack_capacity : 0);
    r->truncated_id = intern(r, text);
  }
  return r->truncated_id;
}
