/*
 * pipeline.c: a small inference server, traced and profiled at once.
 *
 *     ./examples/pipeline [trace.json]      (default: pipeline.json)
 *
 * Three workers take requests from a queue. Each request is a request-level
 * scope around runtime phases (decode, run, encode); "run" launches
 * operator-level kernels on a simulated accelerator whose clock counts
 * microseconds from its own epoch. The kernels' device timestamps are mapped
 * onto the timeline's clock (lp_now_ns) with one sync pair and drawn on a
 * "device 0 queue" track. The queue depth is a counter; each finished
 * request leaves an instant. Open the JSON in ui.perfetto.dev,
 * chrome://tracing or speedscope; the percentage tree goes to stdout.
 */
#define _POSIX_C_SOURCE 200809L

#include <labelprof.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define REQUESTS 600
#define WORKERS 3

/* ---- a pretend accelerator with a clock of its own ------------------------- */

static uint64_t device_epoch_ns;

/* Device time in microseconds, as a driver would report it. */
static uint64_t device_now_us(void) { return (lp_now_ns() - device_epoch_ns) / 1000; }

/* Maps device microseconds to lp_now_ns(): one pair read back to back. */
static uint64_t host_at, device_at;
static void sync_clocks(void) {
  uint64_t h0 = lp_now_ns(), d = device_now_us(), h1 = lp_now_ns();
  host_at = h0 + (h1 - h0) / 2;
  device_at = d;
}
static uint64_t device_to_host_ns(uint64_t d_us) { return host_at + (d_us - device_at) * 1000; }

static _Thread_local volatile uint64_t sink; /* per thread: busy work, not shared state */
static void busy_us(uint64_t us) {
  uint64_t end = lp_now_ns() + us * 1000;
  while (lp_now_ns() < end) sink++;
}

/* The device runs one kernel at a time; its queue is a lane of its own. */
static pthread_mutex_t device_mu = PTHREAD_MUTEX_INITIALIZER;
static lp_track_t device_queue;
static uint64_t device_free_us;

static void launch(const char *kernel, uint64_t dur_us) {
  LP_SCOPE_L(LP_LEVEL_OPERATOR, "launch");
  pthread_mutex_lock(&device_mu);
  uint64_t now = device_now_us();
  uint64_t start = device_free_us > now ? device_free_us : now;
  device_free_us = start + dur_us;
  pthread_mutex_unlock(&device_mu);
  /* A driver would report these when the kernel completes; here they are known up front. */
  lp_track_complete(device_queue, kernel, device_to_host_ns(start), dur_us * 1000);
  busy_us(2); /* the launch itself */
}

/* ---- the server ------------------------------------------------------------ */

static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;
static int next_request;

static int take_request(void) {
  pthread_mutex_lock(&queue_mu);
  int r = next_request < REQUESTS ? next_request++ : -1;
  LP_COUNTER("requests waiting", REQUESTS - next_request);
  pthread_mutex_unlock(&queue_mu);
  return r;
}

static void *worker(void *arg) {
  char name[32];
  snprintf(name, sizeof name, "worker %d", (int)(intptr_t)arg);
  lp_thread_set_name(name);
  for (int r; (r = take_request()) >= 0;) {
    LP_SCOPE_L(LP_LEVEL_REQUEST, "request");
    {
      LP_SCOPE("decode");
      busy_us(40 + (uint64_t)(r % 5) * 10);
    }
    {
      LP_SCOPE("run");
      launch("conv2d", 120);
      launch("gemm", 200 + (uint64_t)(r % 3) * 50);
      {
        LP_SCOPE_L(LP_LEVEL_OPERATOR, "wait for device");
        busy_us(150);
      }
    }
    {
      LP_SCOPE("encode");
      busy_us(30);
    }
    LP_INSTANT("request done");
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "pipeline.json";
  lp_trace_opts_t topts = {.levels = LP_LEVEL_ALL};
  int rc;
  device_epoch_ns = lp_now_ns() - 5000000000u; /* the device has been up 5 s longer */
  sync_clocks();
  if ((device_queue = lp_track_create("device 0 queue")) < 0 || (rc = lp_trace_start(&topts)) != 0 ||
      (rc = lp_profile_start(NULL)) != 0) {
    fprintf(stderr, "pipeline: cannot start: %s\n", lp_strerror(device_queue < 0 ? device_queue : rc));
    return 1;
  }
  pthread_t th[WORKERS];
  int started = 0;
  for (int i = 0; i < WORKERS; i++) started += pthread_create(&th[i], NULL, worker, (void *)(intptr_t)(i + 1)) == 0;
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);

  lp_profile_t *p = NULL;
  lp_trace_stats_t s;
  lp_trace_stop();
  lp_trace_get_stats(&s);
  if ((rc = lp_profile_stop(&p)) == 0) {
    lp_profile_print(p, stdout);
    lp_profile_free(p);
  }
  if ((rc = lp_trace_write_json(path, "pipeline")) != 0) {
    fprintf(stderr, "pipeline: cannot write %s: %s\n", path, lp_strerror(rc));
    return 1;
  }
  printf("\n%llu events (%llu dropped) written to %s\n", (unsigned long long)s.recorded,
         (unsigned long long)s.dropped, path);
  return started == WORKERS ? 0 : 1;
}
