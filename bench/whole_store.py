#!/usr/bin/env python3
"""The person's whole store past one machine (docs/protocol.md §15 "In the
feed", §16 "Past one machine"), in one invocation:

1. A standby's lag at 1,000 events/s with a settings change on the primary
   every second (the half-life, so that both models rebuild each time),
   against the same run without settings changes: bench/standby.py's lag
   run, trials alternated (--trials each); the medians of the p99s are the
   row, and their ratio.
2. The teller's hand-over on PostgreSQL: two services on one database (a
   server of the bench's own, Tests/integration/postgres.py), a webhook
   receiver of the bench's own configured on both; the teller killed with
   SIGKILL --kills times (restarted after each): the time until the other
   holds the lease (`stats.alertsTeller`), and until an alert decided by a
   drink written right after the kill is delivered. Median and worst.

Release build, loopback."""
import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "clients" / "python"))
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from consumers import Service  # noqa: E402
from peers import build  # noqa: E402
from postgres import PostgresServer  # noqa: E402
from standby import lag  # noqa: E402


def settings_every_second(primary, stop):
    """Half-lives 5 and 4.9 in turn, one change a second."""
    i = 0
    while not stop.wait(1.0):
        reply = primary.client.call({"op": "putSettings", "settings": {"halfLifeHours": 5 if i % 2 else 4.9}})
        assert reply["ok"], reply
        i += 1


def standby_lag(binary, loadgen, folder, trials, rate, seconds):
    runs = {"without": [], "with": []}
    for t in range(trials):
        for name, during in (("without", None), ("with", settings_every_second)):
            print(f"whole store: standby lag {name} settings changes, trial {t + 1} of {trials}", file=sys.stderr,
                  flush=True)
            result = lag(binary, loadgen, folder / f"lag-{name}-{t}", rate, seconds, during=during)
            runs[name].append(result)
            print(json.dumps(result["standby_lag_ms"]), flush=True)
    medians = {name: statistics.median(r["standby_lag_ms"]["p99"] for r in rs) for name, rs in runs.items()}
    return {"rate": rate, "seconds": seconds, "trials": trials, "p99_ms_without": medians["without"],
            "p99_ms_with": medians["with"], "p99 with vs without": medians["with"] / medians["without"],
            "runs": runs}


class Receiver:
    """A webhook receiver answering 200, keeping when each Idempotency-Key first arrived."""

    def __init__(self):
        self.first = {}
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    receiver.first.setdefault(self.headers["Idempotency-Key"], time.monotonic())
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self):
        with self.lock:
            return len(self.first)


def wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)


def hand_over(binary, folder, kills):
    server = PostgresServer().start("max_connections=100")
    receiver = Receiver()
    services = {}
    try:
        _, conninfo = server.new_database()

        def start(name):
            d = folder / name
            d.mkdir(parents=True, exist_ok=True)
            (d / "secret.txt").write_text("bench\n")
            services[name] = Service(binary, d, {
                "store": {"postgresql": {"conninfo": conninfo}},
                "alerts": {"dailyLimit": False, "sleepThreshold": False, "bedtime": "off", "levelOverMg": 300,
                           "webhook": {"url": f"http://127.0.0.1:{receiver.port}/hook",
                                       "secretFile": str(d / "secret.txt")}}})

        def teller(name):
            return services[name].client.stats().get("alertsTeller")

        start("a")
        start("b")
        wait(lambda: teller("a") or teller("b"), 30, "a teller")
        lease, delivered = [], []
        current = None  # the drink over the level, while it is there
        for k in range(kills):
            name = "a" if teller("a") else "b"
            other = "b" if name == "a" else "a"
            before = receiver.count()
            services[name].process.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            services[name].process.wait(10)
            # A drink over the level, or its deletion: one alert (levelOver fired, then cleared), told by the new teller.
            if current is None:
                current = str(uuid.uuid4()).upper()
                services[other].client.add([{"uuid": current, "mgCaffeine": 350.0, "date": _now()}])
            else:
                services[other].client.delete([current])
                current = None
            wait(lambda: teller(other), 30, "the other service to take the lease")
            lease.append(time.monotonic() - killed)
            wait(lambda: receiver.count() > before, 30, "the alert delivered")
            delivered.append(min(t for t in receiver.first.values() if t >= killed) - killed)
            print(json.dumps({"kill": k + 1, "lease_s": lease[-1], "delivered_s": delivered[-1]}), flush=True)
            start(name)
        return {"kills": kills, "lease_s_median": statistics.median(lease), "lease_s_worst": max(lease),
                "delivered_s_median": statistics.median(delivered), "delivered_s_worst": max(delivered),
                "lease_s": lease, "delivered_s": delivered}
    finally:
        for s in services.values():
            if s.process.poll() is None:
                s.stop()
        receiver.server.shutdown()
        server.cleanup()


def _now():
    t = time.time() - 1
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--trials", type=int, default=3, help="lag runs of each kind, alternated")
    parser.add_argument("--kills", type=int, default=10, help="teller kills; 0 leaves the hand-over out")
    parser.add_argument("--out", default=str(ROOT / "bench/whole-store.json"))
    args = parser.parse_args()
    loadgen, _ = build(ROOT / ".build/peers")
    results = {}
    with tempfile.TemporaryDirectory(prefix="ct-whole-") as d:
        results["standby_lag"] = standby_lag(args.binary, loadgen, Path(d), args.trials, args.rate, args.seconds)
        print(json.dumps({k: v for k, v in results["standby_lag"].items() if k != "runs"}), flush=True)
        if args.kills:
            results["hand_over"] = hand_over(args.binary, Path(d) / "teller", args.kills)
            print(json.dumps({k: v for k, v in results["hand_over"].items() if not isinstance(v, list)}), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
