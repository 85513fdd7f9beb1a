/*
 * pprof_enc.h: a writer of pprof's profile.proto, gzipped, shared by the
 * library (lp_profile_write_pprof) and the command (labelprof pprof). Needs
 * libc only.
 *
 * The profile has the sample types samples/count and wall/nanoseconds, and
 * cpu/nanoseconds when CPU time was measured (a profile declares only what
 * was measured: a cpu type of zeros reads as a program that used no CPU);
 * its period is wall/nanoseconds. Each distinct (name,
 * file, line) is one Function with one Location of the same id. Strings are
 * referred to by pointer until the profile is written: they must outlive it.
 */
#ifndef LP_PPROF_ENC_H
#define LP_PPROF_ENC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct lp__pprof lp__pprof_t;

/* A new, empty profile, with the cpu/nanoseconds sample type or without it; NULL on ENOMEM. */
lp__pprof_t *lp__pprof_new(bool cpu);
void lp__pprof_free(lp__pprof_t *pp);

/* The location of a function (name, file, line), made on first use; 0 on ENOMEM. */
uint64_t lp__pprof_location(lp__pprof_t *pp, const char *name, const char *file, int64_t line);

/*
 * One sample: locations leaf first, its samples, wall and CPU nanoseconds
 * (cpu_ns is left out of a profile made without the cpu type), and the
 * labels thread (when thread is not NULL) and thread_id (when tid is not
 * 0). 0 or -ENOMEM.
 */
int lp__pprof_sample(lp__pprof_t *pp, const uint64_t *locs, size_t nlocs, int64_t samples, int64_t wall_ns,
                     int64_t cpu_ns, const char *thread, uint64_t tid);

/*
 * Writes the profile to out, gzipped, with its start (ns since the epoch),
 * duration and period (ns), the sample type a viewer shows first
 * ("samples", "wall", or "cpu" when the profile has it), and the file of its
 * one mapping (what `go tool pprof` prints as "File:"): the profiled
 * program's path, or NULL for none. 0, -ENOMEM, or -EIO.
 */
int lp__pprof_write(lp__pprof_t *pp, FILE *out, int64_t time_nanos, int64_t duration_nanos, int64_t period_ns,
                    const char *default_type, const char *mapping_file);

/* CRC-32 (the gzip one) of n bytes, continuing from crc (0 to start). */
uint32_t lp__crc32(uint32_t crc, const void *data, size_t n);

#endif
