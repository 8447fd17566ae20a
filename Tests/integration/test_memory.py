"""Memory after hostile bursts: a service that idles near 30 MB comes back
near it after large hostile input, rather than keeping what glibc freed."""
import os
import socket
import time

import zmq

from conftest import bus_publisher, drink  # noqa: F401  (drink: the service fixture's module)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def hostile_burst(service):
    """Bus, query, HTTP and inbox input, frames up to 10 MB, all refused."""
    context = zmq.Context.instance()
    pub = bus_publisher(context, connect=service.endpoints["ingest"][0], hwm=100_000)
    for i in range(2000):
        size = 1_000_000 if i % 100 == 0 else (i % 10) * 100
        pub.send_multipart([b"drink.add", b'{"uuid": "bad"' + b" " * size])
    pub.send_multipart([b"drink.add", b"x" * (10 << 20)])  # over maxMessageBytes: the socket drops it
    pub.send_multipart([b"drink.add", b"[" + b"{}," * 300_000 + b"{}]"])
    pub.close()
    for size in (100_000, 1_000_000, 2_000_000, 10 << 20):
        req = context.socket(zmq.REQ)
        req.setsockopt(zmq.LINGER, 0)
        req.setsockopt(zmq.RCVTIMEO, 10_000)
        req.connect(service.query_endpoint)
        req.send(b'{"op": "add", "drinks": [' + b'{"uuid":"x"},' * (size // 13) + b"{}]}")
        try:
            req.recv()
        except zmq.Again:
            pass  # a request over twice maxMessageBytes is dropped by the socket, unanswered
        req.close()
    host, port = service.endpoints["http"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as c:
        try:
            c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX: " + b"a" * (5 << 20) + b"\r\n\r\n")
            c.recv(100)
        except OSError:
            pass  # refused mid-send: the head is far over its limit
    for k in range(3):
        tmp = service.folder / f".big{k}"
        tmp.write_bytes(b"[" + b'{"uuid":"x","mgCaffeine":1},' * 300_000 + b"{}]")
        os.rename(tmp, service.folder / "inbox" / f"big{k}.json")
    deadline = time.time() + 120
    failed = service.folder / "inbox" / "failed"
    while len([p for p in failed.iterdir() if p.name.startswith("big")]) < 6:
        assert time.time() < deadline, "the inbox files were not refused"
        time.sleep(0.05)


def test_rss_comes_back_within_twice_its_idle_size_after_bursts_of_large_input(service):
    pid = service.process.pid
    service.request({"op": "stats"})
    time.sleep(1)
    idle = rss_mb(pid)
    peak = idle
    for _ in range(2):
        hostile_burst(service)
        peak = max(peak, rss_mb(pid))
    assert service.request({"op": "ping"})["ok"]
    deadline = time.time() + 30
    while rss_mb(pid) > 2 * idle:
        assert time.time() < deadline, f"RSS {rss_mb(pid):.0f} MB 30 s after the bursts, idle {idle:.0f} MB, peak {peak:.0f} MB"
        time.sleep(0.5)
