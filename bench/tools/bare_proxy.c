// The baseline of bench/relay.py: libzmq's zmq_proxy, XSUB connected to the
// service's update endpoint (subscribed to everything) and XPUB bound for the
// subscribers, the high-water marks of `coffee-tracker relay`, nothing else.
// Build: cc -O2 -o bare_proxy bare_proxy.c -lzmq
// Run:   bare_proxy FROM BIND
#include <zmq.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: bare_proxy FROM BIND\n"); return 2; }
  void *ctx = zmq_ctx_new(); int hwm = 10000;
  void *front = zmq_socket(ctx, ZMQ_XSUB), *back = zmq_socket(ctx, ZMQ_XPUB);
  zmq_setsockopt(front, ZMQ_RCVHWM, &hwm, sizeof hwm);
  zmq_setsockopt(back, ZMQ_SNDHWM, &hwm, sizeof hwm);
  if (zmq_connect(front, argv[1]) || zmq_bind(back, argv[2])) { perror("endpoint"); return 2; }
  char all = 1; zmq_send(front, &all, 1, 0);
  printf("bare_proxy: %s\n", argv[2]); fflush(stdout);
  zmq_proxy(front, back, NULL);
  return 0;
}
