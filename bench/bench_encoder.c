/*
 * bench_encoder.c: the stream's encoder alone (lp__pfs_chunk), on chunks as
 * two threads leave them, for bench/encoder.sh to count its instructions
 * with callgrind (repeatable whatever the machine's load).
 *
 *   bench_encoder SHAPE EVENTS
 *
 * SHAPE is the work the threads did, as ticks of a 2.1 GHz counter:
 *   tight  scopes with next to nothing inside, 99 in each outer scope
 *          (a stream of 2 threads x 100,000 scopes, as the issue measured)
 *   peers  the peers' workload: scopes of 1.8 us, 100 inside each of
 *          about 200 us, 50 ns apart
 * Prints "events bytes": the events encoded and the bytes of their packets.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const lp_site_t outer = {"outer", __FILE__, "work", __LINE__, LP_LEVEL_RUNTIME, 0, 0, 0, 0};
static const lp_site_t inner = {"peer scope", __FILE__, "work", __LINE__, LP_LEVEL_RUNTIME, 0, 0, 0, 0};

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "tight") != 0 && strcmp(argv[1], "peers") != 0)) {
    fprintf(stderr, "usage: bench_encoder tight|peers EVENTS\n");
    return 2;
  }
  bool peers = strcmp(argv[1], "peers") == 0;
  long want = atol(argv[2]);
  if (want < 1000) want = 1000;
  /* Ticks of a 2.1 GHz counter: inside a scope, between two, and around the inner ones. */
  uint64_t in = peers ? 3780 : 40, gap = peers ? 105 : 30;
  lp__timemap_test_counter("counter"); /* the map of a counter's points, whatever this machine's clock */
  enum { THREADS = 2, PER_CHUNK = (int)LP__CHUNK_EVENTS };
  size_t nchunks = (size_t)want / THREADS / PER_CHUNK + 1;
  lp_impl_event_t *ev = calloc(nchunks * THREADS * PER_CHUNK, sizeof *ev);
  lp__sync_t *pts = calloc(nchunks * THREADS + 2, sizeof *pts);
  if (!ev || !pts) return 1;
  /* Each thread's events; a sync point (ticks, ns) at each chunk's start, on the counter's line. */
  size_t npts = 0;
  uint64_t t0 = 1000000;
  for (int th = 0; th < THREADS; th++) {
    uint64_t t = t0 + (uint64_t)th * 77;
    long k = 0;
    for (size_t c = 0; c < nchunks; c++) {
      lp_impl_event_t *e = ev + ((size_t)th * nchunks + c) * PER_CHUNK;
      pts[npts++] = (lp__sync_t){t, 5000000000u + t * 10 / 21};
      for (int i = 0; i < PER_CHUNK; i++, k++) {
        /* outer begin, 99 x (inner begin, inner end), outer end: 200 events */
        long pos = k % 200;
        const lp_site_t *s = pos == 0 || pos == 199 ? &outer : &inner;
        bool begin = pos == 0 || (pos != 199 && pos % 2 == 1);
        uint32_t depth = s == &outer ? 1 : 2;
        t += begin ? gap : in;
        e[i] = (lp_impl_event_t){t, (uintptr_t)s | (begin ? LP_IMPL_EV_BEGIN : LP_IMPL_EV_END) | LP_IMPL_DEPTH_TAG(depth)};
      }
    }
  }
  pts[npts++] = (lp__sync_t){t0 + (uint64_t)want * in, 5000000000u + (t0 + (uint64_t)want * in) * 10 / 21};
  lp__sync_t *sorted = malloc(npts * sizeof *sorted); /* lp__timemap_new reorders its points: the anchors stay */
  if (!sorted) return 1;
  memcpy(sorted, pts, npts * sizeof *sorted);
  lp__timemap_t *map = lp__timemap_new(sorted, npts);
  free(sorted);
  lp__pfs_t *f = lp__pfs_new();
  if (!map || !f) return 1;
  lp__pfs_restart(f, "bench");
  lp__pfs_lane_t *lanes[THREADS] = {NULL, NULL};
  uint64_t bytes = 0;
  for (size_t c = 0; c < nchunks; c++) /* the writer takes the threads' chunks in turn */
    for (int th = 0; th < THREADS; th++) {
      const lp_impl_event_t *e = ev + ((size_t)th * nchunks + c) * PER_CHUNK;
      lp__pfs_lane_info_t info = {(uint64_t)100 + (uint64_t)th, th ? "worker 2" : "worker 1", false, NULL, 0};
      if (lp__pfs_chunk(f, &lanes[th], &info, e, 0, PER_CHUNK, map, pts[(size_t)th * nchunks + c]) != 0) return 1;
      size_t n;
      lp__pfs_bytes(f, &n);
      bytes += n;
      lp__pfs_clear(f);
    }
  printf("%llu %llu\n", (unsigned long long)lp__pfs_events(f), (unsigned long long)bytes);
  for (int th = 0; th < THREADS; th++) lp__pfs_lane_free(lanes[th]);
  lp__pfs_free(f);
  lp__timemap_free(map);
  free(ev);
  free(pts);
  return 0;
}
