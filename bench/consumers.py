#!/usr/bin/env python3
"""Consumers' benchmarks (PROTOCOL.md §10), each beside a baseline from the
same invocation, against the release service on loopback:

1. The Swift follower (`coffee-tracker watch`, CoffeeTrackerClient's
   FeedFollower) while the compiled load generator publishes at full speed:
   its applied rate over its own window against the service's ingest rate
   (the load generator's end-to-end events/s over its window), its lag when
   the load ends, and no resync.
2. The Python follower (clients/python) on large commits (an inbox file of
   200,000 drinks, one commit announced in pages of 5,000): its applied
   rate, beside a raw pyzmq SUB that only receives and decodes the same messages.
3. 100 clients of GET /events at 10 models/s: from a model's arrival at a
   ZeroMQ SUB (the baseline) to its arrival at each event stream, p99; and
   the service's RSS before and after.

    python3 bench/consumers.py [--binary .build/release/coffee-tracker] [--out bench/consumers.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python"))
sys.path.insert(0, str(ROOT / "bench"))
from coffee_tracker import Client  # noqa: E402
from peers import build, cpu_seconds  # noqa: E402


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Service:
    def __init__(self, binary, folder, extra=None):
        self.folder = folder
        config = {
            "dataDirectory": "data", "inboxDirectory": "inbox",
            "ingest": {"bind": [f"ipc://{folder}/in"]}, "updates": {"bind": [f"ipc://{folder}/up"]},
            "query": {"bind": [f"ipc://{folder}/q"]}, "http": {"bind": "127.0.0.1:0"},
            "model": {"timeZone": "UTC"}, "log": {"level": "warning"},
        }
        config.update(extra or {})
        self.config = folder / "config.json"
        self.config.write_text(json.dumps(config))
        self.process = subprocess.Popen([binary, "serve", "--config", str(self.config)], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        endpoints = folder / "data" / "endpoints.json"
        deadline = time.time() + 30
        while True:
            if endpoints.exists():
                try:
                    self.endpoints = json.loads(endpoints.read_text())
                    if self.endpoints.get("pid") == self.process.pid:
                        break
                except ValueError:
                    pass
            if time.time() > deadline or self.process.poll() is not None:
                raise SystemExit("the service did not start")
            time.sleep(0.02)
        self.client = Client(config=self.config, timeout=30)

    def stop(self):
        self.process.terminate()
        self.process.wait(60)


def drink(i, at):
    return {"uuid": str(uuid.UUID(int=(0xC0FFEE << 96) | i)).upper(), "mgCaffeine": 10, "date": at}


def swift_follower_at_full_speed(binary, loadgen, n):
    """The follower's applied rate over its own window (from its first state
    that holds the run's changes to its last), against the load generator's
    events/s over the load generator's window (from its first send to the
    last `changes` it saw). Both windows start when changes start: the load
    generator spends half a second joining before its first send (a probe,
    then 300 ms of quiet), which a window opened before it starts would
    charge to the follower. `lag_after_load_ms`, from the load generator's
    exit to the follower's last state, says whether it kept up to the end."""
    with tempfile.TemporaryDirectory(prefix="ct-cons-") as d:
        service = Service(binary, Path(d))
        try:
            watch = subprocess.Popen([binary, "watch", "--config", str(service.config), "--timeout", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            states = []

            def read():
                for line in watch.stdout:
                    if line.startswith("state "):
                        states.append((time.monotonic(), json.loads(line[6:])))

            threading.Thread(target=read, daemon=True).start()
            deadline = time.time() + 30
            while not states and time.time() < deadline:
                time.sleep(0.01)
            if not states:
                raise SystemExit("coffee-tracker watch wrote no state")
            before = states[-1][1]
            cpu_before = cpu_seconds(watch.pid)
            p = subprocess.run([str(loadgen), f"ipc://{d}/in", f"ipc://{d}/up", str(n), "1"], capture_output=True,
                               text=True, timeout=600)
            load_done = time.monotonic()
            ingest = json.loads(p.stdout.strip().splitlines()[-1])
            final = service.client.ping()
            deadline = time.time() + 60
            while states[-1][1].get("anchor") != final and time.time() < deadline:
                time.sleep(0.01)
            follower_cpu = cpu_seconds(watch.pid) - cpu_before
            last_at, last = states[-1]
            # Past the load generator's probes (one or a few drinks before its first send).
            started = next(((t, s) for t, s in states if s["anchor"] > before["anchor"] + 100), None)
            if started is None:
                raise SystemExit(f"the follower never took the run's changes: last state {last}")
            first_at, first = started
            applied_rate = (last["applied"] - first["applied"]) / (last_at - first_at)
            watch.terminate()
            watch.wait(10)
            return {"ingest_events_per_s": ingest["events_per_s"], "follower_applied_per_s": applied_rate,
                    "ratio": applied_rate / ingest["events_per_s"],
                    "lag_after_load_ms": (last_at - load_done) * 1000,
                    "resyncs_during_load": last["resyncs"] - before["resyncs"],
                    "follower_cpu_s": follower_cpu, "in_step": last["anchor"] == final, "lost": ingest.get("lost")}
        finally:
            service.stop()


def python_follower_on_large_commits(binary, n):
    with tempfile.TemporaryDirectory(prefix="ct-cons-") as d:
        service = Service(binary, Path(d))
        try:
            context = zmq.Context.instance()
            raw = context.socket(zmq.SUB)
            raw.setsockopt(zmq.RCVHWM, 0)
            raw.setsockopt(zmq.SUBSCRIBE, b"changes")
            raw.connect(f"ipc://{d}/up")
            seen = {"raw": [], "follower": []}

            def raw_reader():
                count = 0
                while count < n:
                    if not raw.poll(60_000):
                        return
                    _, body = raw.recv_multipart()
                    m = json.loads(body)
                    count += len(m["added"]) + len(m["deleted"])
                    seen["raw"].append((time.monotonic(), count))

            def follower():
                applied = 0
                for state in Client(config=service.config, timeout=30).follow():
                    if state.anchor and state.anchor != applied:
                        applied = state.anchor
                        seen["follower"].append((time.monotonic(), applied))
                    if applied >= n:
                        return

            threads = [threading.Thread(target=raw_reader, daemon=True), threading.Thread(target=follower, daemon=True)]
            for t in threads:
                t.start()
            time.sleep(1.0)  # both subscribed, the follower in step at anchor 0
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
            inbox = Path(d) / "inbox"
            tmp = Path(d) / "big.jsonl"
            tmp.write_text("".join(json.dumps(drink(i, at)) + "\n" for i in range(n)))
            os.rename(tmp, inbox / "big.jsonl")
            for t in threads:
                t.join(300)

            def rate(points):
                (t0, c0), (t1, c1) = points[0], points[-1]
                return (c1 - c0) / (t1 - t0) if t1 > t0 else float("nan")

            return {"changes": n, "pages": len(seen["raw"]), "raw_sub_per_s": rate(seen["raw"]),
                    "follower_per_s": rate(seen["follower"]),
                    "ratio": rate(seen["follower"]) / rate(seen["raw"]),
                    "follower_in_step": bool(seen["follower"]) and seen["follower"][-1][1] == n}
        finally:
            service.stop()


def build_sse_clients():
    """bench/tools/sse_clients.c, compiled into .build/peers."""
    sse_clients = ROOT / ".build/peers/sse_clients"
    sse_clients.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-O2", "-o", str(sse_clients), str(ROOT / "bench/tools/sse_clients.c"), "-lzmq"], check=True)
    return sse_clients


def event_streams(binary, sse_clients, clients=100, seconds=30):
    """The streams are read by a compiled epoll loop (bench/tools/sse_clients.c):
    one Python process reading 100 streams measured its own reading."""
    with tempfile.TemporaryDirectory(prefix="ct-cons-") as d:
        service = Service(binary, Path(d), {"publish": {"modelIntervalMs": 100, "heartbeatIntervalS": 1}})
        try:
            pub = zmq.Context.instance().socket(zmq.PUB)
            pub.connect(f"ipc://{d}/in")
            host, port = service.endpoints["http"].rsplit(":", 1)
            time.sleep(0.5)
            rss_before = rss_mb(service.process.pid)
            reader = subprocess.Popen([str(sse_clients), host, port, f"ipc://{d}/up", str(clients), str(seconds)],
                                      stdout=subprocess.PIPE, text=True)
            time.sleep(1.0)  # connected
            i = 0
            while reader.poll() is None:
                at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
                pub.send_multipart([b"drink.add", json.dumps(drink(10_000_000 + i, at)).encode()])
                i += 1
                time.sleep(0.1)
            result = json.loads(reader.stdout.read().strip().splitlines()[-1])
            result["rss_before_mb"] = rss_before
            result["rss_after_mb"] = rss_mb(service.process.pid)
            result["rss_growth_mb"] = result["rss_after_mb"] - rss_before
            result["drinks_published"] = i
            pub.close(0)
            return result
        finally:
            service.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--out", default=str(ROOT / "bench/consumers.json"))
    parser.add_argument("--events", type=int, default=300_000, help="events published at full speed for the Swift follower")
    parser.add_argument("--commit", type=int, default=200_000, help="drinks in the large commit for the Python follower")
    parser.add_argument("--seconds", type=int, default=30, help="how long the 100 event streams run")
    args = parser.parse_args()
    loadgen, _ = build(ROOT / ".build/peers")
    results = {}
    print("consumers: the Swift follower at full speed", flush=True)
    results["swift_follower_full_speed"] = swift_follower_at_full_speed(args.binary, loadgen, args.events)
    print(json.dumps(results["swift_follower_full_speed"]), flush=True)
    print("consumers: the Python follower on a large commit", flush=True)
    results["python_follower_large_commit"] = python_follower_on_large_commits(args.binary, args.commit)
    print(json.dumps(results["python_follower_large_commit"]), flush=True)
    print("consumers: 100 event streams at 10 models/s", flush=True)
    results["event_streams"] = event_streams(args.binary, build_sse_clients(), seconds=args.seconds)
    print(json.dumps(results["event_streams"]), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
