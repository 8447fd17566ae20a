#!/usr/bin/env python3
"""Web Push's speed and cost (docs/protocol.md §17), in one invocation:

1. One alert to N subscriptions (default 1,000) registered with the
   service, each on a local push receiver (Python, answering 201 on kept-alive
   connections): the alert's N pushes, each encrypted for its subscription
   and signed (RFC 8291, RFC 8292), from the first received to the last.
2. The same alert's JSON delivered N times to a webhook (the same receiver
   answering 204), put in a stopped service's outbox and due once it has
   started: webhook deliveries from the first received to the last.

Both as pushes (or deliveries) per second and the service's CPU per push
over that window (from /proc), alternated, TRIALS times; the ratios are
the medians'.

    python3 bench/push.py [--trials 3] [--subscriptions 1000] [--out bench/push.json]
"""
import argparse
import base64
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import zmq
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from alerts import serve  # noqa: E402
from peers import cpu_seconds, stop  # noqa: E402

OFF = {"dailyLimit": False, "sleepThreshold": False, "bedtime": "off", "levelOverMg": 300}


class Receiver:
    """Answers every POST (201 for a push, 204 for a webhook); the time and the service's CPU at the first and last."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset(None)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(201 if self.path.startswith("/push/") else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()
                receiver.took()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self, pid):
        with self.lock:
            self.pid, self.count, self.first, self.last = pid, 0, None, None

    def took(self):
        now, cpu = time.monotonic(), cpu_seconds(self.pid) if self.pid else 0.0
        with self.lock:
            self.count += 1
            if self.first is None:
                self.first = (now, cpu)
            self.last = (now, cpu)

    def wait(self, n, what):
        deadline = time.time() + 120
        while self.count < n:
            if time.time() > deadline:
                raise SystemExit(f"{what}: {self.count} of {n} after 120 s")
            time.sleep(0.005)
        with self.lock:
            (t0, c0), (t1, c1) = self.first, self.last
        return {"deliveries": n, "seconds": t1 - t0, "per_s": (n - 1) / (t1 - t0), "cpu_ms_per": (c1 - c0) / (n - 1) * 1000}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def pushes(receiver, n):
    with tempfile.TemporaryDirectory(prefix="ct-push-") as d:
        folder = Path(d)
        process, _, _ = serve(folder, {"alerts": dict(OFF)})
        try:
            query = zmq.Context.instance().socket(zmq.REQ)
            query.connect(f"ipc://{folder}/q")
            query.setsockopt(zmq.RCVTIMEO, 10000)
            point = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
                serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            for i in range(n):
                query.send_json({"op": "pushSubscribe", "subscription": {
                    "endpoint": f"http://127.0.0.1:{receiver.port}/push/{i}",
                    "keys": {"p256dh": b64url(point), "auth": b64url(i.to_bytes(16, "big"))}}})
                assert query.recv_json()["ok"]
            receiver.reset(process.pid)
            query.send_json({"op": "add", "drinks": [{"uuid": "6F1C6E46-0000-4000-8000-000000000001", "mgCaffeine": 350,
                                                      "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]})
            assert query.recv_json()["ok"]
            result = receiver.wait(n, "the pushes")
            query.close(0)
            return result
        finally:
            stop([process])


def webhooks(receiver, n):
    with tempfile.TemporaryDirectory(prefix="ct-hook-") as d:
        folder = Path(d)
        process, _, _ = serve(folder, {})
        stop([process])
        db = sqlite3.connect(folder / "data" / "coffee-tracker.sqlite")
        now = int(time.time() * 1000)
        body = json.dumps({"id": "x", "rule": "levelOver", "event": "fired", "at": "2026-12-07T10:00:00.000Z",
                           "title": "Over 300 mg", "message": "Caffeine is over 300 mg (350 mg now).",
                           "mgCaffeine": 350, "mgToday": 350, "limitMg": 300, "key": "", "anchor": 1})
        # Due three seconds on: the service is up and watched (its pid known) before the first is sent.
        due = now + 3000
        db.executemany("INSERT INTO outbox(id, receiver, body, created_ms, attempts, next_ms) VALUES (?, 'webhook', ?, ?, 0, ?)",
                       [(f"hook-{i:06d}", body, now, due) for i in range(n)])
        db.commit()
        db.close()
        (folder / "secret").write_text("bench\n")
        receiver.reset(None)
        process, _, _ = serve(folder, {"alerts": dict(OFF, webhook={
            "url": f"http://127.0.0.1:{receiver.port}/hook", "secretFile": "secret"})})
        receiver.pid = process.pid
        try:
            return receiver.wait(n, "the webhook deliveries")
        finally:
            stop([process])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--subscriptions", type=int, default=1000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "push.json"))
    args = parser.parse_args()
    receiver = Receiver()
    runs = {"push": [], "webhook": []}
    for t in range(args.trials):
        for name, run in (("push", pushes), ("webhook", webhooks)):
            r = run(receiver, args.subscriptions)
            runs[name].append(r)
            print(f"trial {t + 1} {name:7} {r['per_s']:.0f}/s, CPU {r['cpu_ms_per']:.3f} ms each", flush=True)
    receiver.server.shutdown()
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in ("per_s", "cpu_ms_per")} for name, rs in runs.items()}
    out = {"subscriptions": args.subscriptions, "medians": medians, "runs": runs,
           "rate push/webhook": medians["push"]["per_s"] / medians["webhook"]["per_s"],
           "CPU push/webhook": medians["push"]["cpu_ms_per"] / medians["webhook"]["cpu_ms_per"]}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"one alert to {args.subscriptions} subscriptions: {medians['push']['per_s']:.0f} pushes/s, "
          f"CPU {medians['push']['cpu_ms_per']:.3f} ms a push; the webhook {medians['webhook']['per_s']:.0f}/s, "
          f"{medians['webhook']['cpu_ms_per']:.3f} ms a delivery ({out['rate push/webhook']:.2f}x the rate, "
          f"{out['CPU push/webhook']:.2f}x the CPU)")


if __name__ == "__main__":
    main()
