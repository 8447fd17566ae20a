#!/usr/bin/env python3
"""The outbound door's cost and speed (docs/protocol.md §16), in one
invocation, with the shared load generator:

1. The live path at 1,000 drinks/s with a webhook (a local receiver that
   answers 204) and MQTT (Debian's mosquitto on a port of its own)
   configured, against the same run without them, alternated, TRIALS
   times: the service's CPU-s per 100k events and the p99 from an event's
   send to its `changes` message. The ratios are the medians' (asked: at
   most 1.1x).
2. A burst of 10,000 alerts put in the outbox of a stopped service's store,
   then drained by the started service to a local receiver: alerts per
   second from the start to the last delivery (asked: at least 1,000/s).

    python3 bench/alerts.py [--trials 5] [--events 20000] [--burst 10000] [--out bench/alerts.json]
"""
import argparse
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from peers import build, cpu_seconds, stop  # noqa: E402

BINARY = str(ROOT / ".build" / "release" / "coffee-tracker")
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """Answers 204 to every POST on a keep-alive connection; counts them."""

    def __init__(self):
        self.count, self.last, self.lock = 0, 0.0, threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with receiver.lock:
                    receiver.count += 1
                    receiver.last = time.monotonic()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def serve(folder, extra):
    ingest, updates = f"ipc://{folder}/in", f"ipc://{folder}/up"
    config = {
        "dataDirectory": "data", "inboxDirectory": "inbox", "ingest": {"bind": [ingest]},
        "updates": {"bind": [updates]}, "query": {"bind": [f"ipc://{folder}/q"]}, "http": {"bind": None},
        "model": {"timeZone": "UTC"}, "log": {"level": "warning"}}
    config.update(extra)
    (folder / "config.json").write_text(json.dumps(config))
    process = subprocess.Popen([BINARY, "serve", "--config", str(folder / "config.json")], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while not (folder / "data" / "endpoints.json").exists():
        if time.time() > deadline or process.poll() is not None:
            raise SystemExit("the service did not start")
        time.sleep(0.02)
    time.sleep(0.3)
    return process, ingest, updates


def outbound_config(folder, receiver, broker_port):
    (folder / "secret").write_text("bench\n")
    return {"alerts": {"webhook": {"url": f"http://127.0.0.1:{receiver.port}/hook", "secretFile": "secret"}},
            "mqtt": {"host": "127.0.0.1", "port": broker_port}}


def paced(loadgen, outbound, events, receiver, broker_port):
    with tempfile.TemporaryDirectory(prefix="ct-alerts-") as d:
        folder = Path(d)
        subprocess.run(["sync"])
        extra = outbound_config(folder, receiver, broker_port) if outbound else {}
        process, ingest, updates = serve(folder, extra)
        try:
            before = cpu_seconds(process.pid)
            p = subprocess.run([str(loadgen), ingest, updates, str(events), "1", "1000"], capture_output=True, text=True,
                               timeout=600)
            result = json.loads(p.stdout.strip().splitlines()[-1])
            result["cpu_per_100k"] = (cpu_seconds(process.pid) - before) / events * 100_000
            return result
        finally:
            stop([process])


def burst(n, receiver):
    with tempfile.TemporaryDirectory(prefix="ct-burst-") as d:
        folder = Path(d)
        # A store made by the service, then n alerts put in its outbox while it is stopped.
        process, _, _ = serve(folder, {})
        stop([process])
        db = sqlite3.connect(folder / "data" / "coffee-tracker.sqlite")
        now = int(time.time() * 1000)
        body = json.dumps({"id": "x", "rule": "levelOver", "event": "fired", "title": "t", "message": "m"})
        db.executemany("INSERT INTO outbox(id, receiver, body, created_ms, attempts, next_ms) VALUES (?, 'webhook', ?, ?, 0, ?)",
                       [(f"burst-{i:06d}", body, now, now) for i in range(n)])
        db.commit()
        db.close()
        before = receiver.count
        started = time.monotonic()
        process, _, _ = serve(folder, outbound_config(folder, receiver, free_port()))
        try:
            deadline = time.time() + 120
            while receiver.count - before < n:
                if time.time() > deadline:
                    raise SystemExit(f"the burst did not drain: {receiver.count - before} of {n}")
                time.sleep(0.01)
            seconds = receiver.last - started
            return {"alerts": n, "seconds": seconds, "alerts_per_s": n / seconds}
        finally:
            stop([process])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "alerts.json"))
    args = parser.parse_args()
    loadgen, _ = build(ROOT / ".build" / "bench")
    receiver = Receiver()
    with tempfile.TemporaryDirectory(prefix="ct-broker-") as d:
        broker_port = free_port()
        conf = Path(d) / "mosquitto.conf"
        conf.write_text(f"listener {broker_port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
        broker = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            runs = {"without": [], "with": []}
            for t in range(args.trials):
                for name in ("without", "with"):
                    r = paced(loadgen, name == "with", args.events, receiver, broker_port)
                    runs[name].append(r)
                    print(f"trial {t + 1} {name:7} p99 {r['lat_ms_p99']:.2f} ms, CPU-s/100k {r['cpu_per_100k']:.2f}",
                          flush=True)
        finally:
            broker.terminate()
            broker.wait(10)
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in ("lat_ms_p99", "cpu_per_100k", "events_per_s")}
               for name, rs in runs.items()}
    drained = burst(args.burst, receiver)
    receiver.close()
    out = {"paced_1000_per_s": {"medians": medians, "runs": runs,
                                "p99 with/without": medians["with"]["lat_ms_p99"] / medians["without"]["lat_ms_p99"],
                                "CPU with/without": medians["with"]["cpu_per_100k"] / medians["without"]["cpu_per_100k"]},
           "burst": drained}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"1,000/s: p99 {medians['with']['lat_ms_p99']:.2f} vs {medians['without']['lat_ms_p99']:.2f} ms "
          f"({out['paced_1000_per_s']['p99 with/without']:.2f}x), CPU-s/100k {medians['with']['cpu_per_100k']:.2f} vs "
          f"{medians['without']['cpu_per_100k']:.2f} ({out['paced_1000_per_s']['CPU with/without']:.2f}x)")
    print(f"burst: {drained['alerts']} alerts in {drained['seconds']:.2f} s: {drained['alerts_per_s']:.0f}/s")


if __name__ == "__main__":
    main()
