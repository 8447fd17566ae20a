// N clients of GET /events (server-sent events) and one ZeroMQ SUB on the
// `model` topic, read by one epoll loop so that reading costs microseconds,
// not the measure: for each model (by its anchor), the delay from its
// arrival at the SUB to its arrival at each stream. Prints one JSON line.
// Build: cc -O2 -o sse_clients sse_clients.c -lzmq
// Run:   ./sse_clients HOST PORT UPDATES N SECONDS
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

#define MAXA 1000000
static double sub_at[MAXA];  // arrival at the SUB, by anchor

static long anchor_of(const char *p, const char *end) {
  const char *a = memmem(p, end - p, "\"anchor\":", 9);
  return a ? strtol(a + 9, NULL, 10) : -1;
}

int main(int argc, char **argv) {
  if (argc < 6) { fprintf(stderr, "usage: sse_clients HOST PORT UPDATES N SECONDS\n"); return 2; }
  int n = atoi(argv[4]); double seconds = atof(argv[5]);
  void *ctx = zmq_ctx_new(), *sub = zmq_socket(ctx, ZMQ_SUB);
  zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "model", 5);
  zmq_connect(sub, argv[3]);
  int subfd; size_t sz = sizeof subfd; zmq_getsockopt(sub, ZMQ_FD, &subfd, &sz);
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = subfd};
  epoll_ctl(ep, EPOLL_CTL_ADD, subfd, &ev);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  inet_pton(AF_INET, argv[1], &addr.sin_addr);
  char **buf = calloc(n + 1024, sizeof *buf); size_t *len = calloc(n + 1024, sizeof *len);
  int *seen = calloc(n + 1024, sizeof *seen);
  for (int i = 0; i < n; i++) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr *)&addr, sizeof addr)) { perror("connect"); return 1; }
    const char *req = "GET /events HTTP/1.1\r\nHost: bench\r\n\r\n";
    if (write(s, req, strlen(req)) < 0) return 1;
    buf[s] = malloc(1 << 22); len[s] = 0;
    ev.data.fd = s; epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
  }
  size_t cap = 4000000, count = 0; double *delay = malloc(cap * sizeof *delay);
  long *arrived_anchor = malloc(cap * sizeof *arrived_anchor); double *arrived_at = malloc(cap * sizeof *arrived_at);
  size_t arrived = 0;
  double end = now() + seconds; char msg[1 << 16];
  while (now() < end) {
    struct epoll_event events[256];
    int k = epoll_wait(ep, events, 256, 200);
    for (int e = 0; e < k; e++) {
      int fd = events[e].data.fd;
      if (fd == subfd) {
        int more; size_t ms = sizeof more;
        for (;;) {
          int got = zmq_recv(sub, msg, sizeof msg - 1, ZMQ_DONTWAIT);
          if (got < 0) break;
          zmq_getsockopt(sub, ZMQ_RCVMORE, &more, &ms);
          if (more) continue;  // the topic frame
          long a = anchor_of(msg, msg + (got < (int)sizeof msg ? got : (int)sizeof msg - 1));
          if (a >= 0 && a < MAXA && sub_at[a] == 0) sub_at[a] = now();
        }
        continue;
      }
      ssize_t got = read(fd, buf[fd] + len[fd], (1 << 22) - len[fd]);
      double t = now();
      if (got <= 0) continue;
      len[fd] += got;
      char *start = buf[fd], *stop = buf[fd] + len[fd], *eventEnd;
      while ((eventEnd = memmem(start, stop - start, "\n\n", 2))) {
        long a = anchor_of(start, eventEnd);
        // Each stream's first event is the model current when it connected, not a publication.
        if (a >= 0 && a < MAXA && arrived < cap && seen[fd]++) { arrived_anchor[arrived] = a; arrived_at[arrived++] = t; }
        start = eventEnd + 2;
      }
      memmove(buf[fd], start, stop - start); len[fd] = stop - start;
    }
  }
  // A stream may hear of a model before the SUB does: that delay counts as 0.
  for (size_t i = 0; i < arrived; i++) {
    long a = arrived_anchor[i];
    if (sub_at[a] > 0) { double d = arrived_at[i] - sub_at[a]; delay[count++] = d > 0 ? d : 0; }
  }
  qsort(delay, count, sizeof *delay, cmp);
  printf("{\"clients\": %d, \"samples\": %zu, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f}\n", n, count,
         count ? delay[count / 2] * 1000 : -1.0, count ? delay[(size_t)(count * 0.99)] * 1000 : -1.0,
         count ? delay[count - 1] * 1000 : -1.0);
  return 0;
}
