// Many subscribers in one thread, for bench/relay.py: one SUB on the service's
// update endpoint itself (the reference) and COUNT SUBs on each relay endpoint
// given, all subscribed to `changes` and `model`. After every subscriber has
// received something, for SECONDS: each `changes` message's anchor chain is
// checked per subscriber (a previousAnchor that is not the anchor before is a
// gap: a message dropped), and its arrival is timed against the reference's
// arrival of the same anchor (CLOCK_MONOTONIC, one thread, the reference read
// first on every wake-up). Prints one JSON line.
// Build: cc -O2 -o relay_subs relay_subs.c -lzmq
// Run:   relay_subs SECONDS DIRECT ENDPOINT COUNT [ENDPOINT COUNT]...
#define _GNU_SOURCE
#include <zmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

// anchor and previousAnchor from the head the service writes: {"anchor":N,"previousAnchor":M,...
static int anchors(const char *body, int len, long long *anchor, long long *previous) {
  char head[96]; int n = len < 95 ? len : 95; memcpy(head, body, n); head[n] = 0;
  return sscanf(head, "{\"anchor\":%lld,\"previousAnchor\":%lld", anchor, previous) == 2;
}

#define RING (1 << 20)
static long long ring_anchor[RING]; static double ring_time[RING];

int main(int argc, char **argv) {
  if (argc < 5 || (argc - 3) % 2) { fprintf(stderr, "usage: relay_subs SECONDS DIRECT ENDPOINT COUNT [ENDPOINT COUNT]...\n"); return 2; }
  double seconds = atof(argv[1]);
  int groups = (argc - 3) / 2, total = 1;
  for (int g = 0; g < groups; g++) total += atoi(argv[4 + 2 * g]);
  void *ctx = zmq_ctx_new();
  void **subs = calloc(total, sizeof(void *)); int *group = calloc(total, sizeof(int));
  long long *last = calloc(total, sizeof(long long)); long *gaps = calloc(total, sizeof(long)), *got = calloc(total, sizeof(long));
  long *models = calloc(total, sizeof(long)); char *seen = calloc(total, 1);
  zmq_pollitem_t *items = calloc(total, sizeof(zmq_pollitem_t));
  int hwm = 100000;
  for (int i = 0, k = 0; i < total; i++) {
    const char *endpoint = argv[2];
    group[i] = -1;
    if (i > 0) { int g = 0, left = i - 1; while (left >= atoi(argv[4 + 2 * g])) { left -= atoi(argv[4 + 2 * g]); g++; } group[i] = g; endpoint = argv[3 + 2 * g]; }
    subs[i] = zmq_socket(ctx, ZMQ_SUB);
    zmq_setsockopt(subs[i], ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(subs[i], ZMQ_SUBSCRIBE, "changes", 7);
    zmq_setsockopt(subs[i], ZMQ_SUBSCRIBE, "model", 5);
    if (zmq_connect(subs[i], endpoint)) { perror(endpoint); return 2; }
    items[i] = (zmq_pollitem_t){ subs[i], 0, ZMQ_POLLIN, 0 }; (void)k;
  }
  static char body[1 << 22]; char topic[32];
  double *delay = malloc(sizeof(double) * 50000000); long delays = 0, early = 0, direct = 0;
  int ready = 0; double start = 0, deadline = now() + 60;
  while (now() < deadline) {
    if (zmq_poll(items, total, 100) < 0) break;
    for (int i = 0; i < total; i++) {
      if (!(items[i].revents & ZMQ_POLLIN) && i > 0) continue;
      for (;;) {
        int t = zmq_recv(subs[i], topic, sizeof topic - 1, ZMQ_DONTWAIT);
        if (t < 0) break;
        int n = zmq_recv(subs[i], body, sizeof body, 0);
        double at = now();
        if (!seen[i]) { seen[i] = 1; ready++; }
        if (t >= 5 && !memcmp(topic, "model", 5)) { models[i]++; continue; }
        long long anchor, previous;
        if (!anchors(body, n, &anchor, &previous)) continue;
        if (start == 0) { last[i] = anchor; continue; }  // before the window: where the chain starts
        got[i]++;
        if (last[i] && previous != last[i]) gaps[i]++;
        last[i] = anchor;
        if (i == 0) { ring_anchor[anchor % RING] = anchor; ring_time[anchor % RING] = at; direct++; }
        else if (ring_anchor[anchor % RING] == anchor) delay[delays++] = (at - ring_time[anchor % RING]) * 1000;
        else early++;  // a relay's copy read before the reference's
      }
    }
    if (start == 0 && ready == total) { start = now(); deadline = start + seconds; }
  }
  long all_gaps = 0, silent = 0;
  printf("{\"subscribers\": %d, \"ready\": %d, \"window_s\": %.1f, \"direct_messages\": %ld", total, ready, start ? now() - start : 0, direct);
  for (int g = 0; g < groups; g++) {
    long messages = 0, gg = 0, quiet = 0, lowest = -1;
    for (int i = 1; i < total; i++) if (group[i] == g) { messages += got[i]; gg += gaps[i]; if (!got[i]) quiet++; if (lowest < 0 || got[i] < lowest) lowest = got[i]; }
    printf(", \"group%d\": {\"endpoint\": \"%s\", \"messages\": %ld, \"fewest_per_subscriber\": %ld, \"gaps\": %ld, \"silent\": %ld}", g, argv[3 + 2 * g], messages, lowest, gg, quiet);
    all_gaps += gg; silent += quiet;
  }
  qsort(delay, delays, sizeof(double), cmp);
  printf(", \"gaps\": %ld, \"silent\": %ld, \"delays\": %ld, \"read_before_reference\": %ld, \"hop_ms_p50\": %.3f, \"hop_ms_p99\": %.3f, \"hop_ms_max\": %.3f}\n",
         all_gaps, silent, delays, early, delays ? delay[delays / 2] : -1, delays ? delay[(long)(delays * 0.99)] : -1, delays ? delay[delays - 1] : -1);
  return 0;
}
