#!/usr/bin/env python3
"""The standby (PROTOCOL.md §11), beside its primary in the same invocation:

1. Lag at 1,000 events/s: the shared load generator publishes on the
   primary's bus at 1,000 events/s for 20 s and measures each event's way to
   the primary's own `changes` (the baseline), then, in a second run, to
   the standby's `changes`. During that run a reader of both feeds takes,
   for each anchor the primary published, the time until the standby
   published an anchor at or past it: the lag the standby adds.
2. Catch-up: a primary given 1,000,000 changes at full speed (its ingest
   rate is the baseline), then a new standby started from nothing: the
   time until it holds the primary's anchor, as changes per second. Five
   such runs (--catch-up-trials), each against its own primary's ingest;
   the medians are the row.

Release build, loopback, ipc:// endpoints in a scratch folder."""
import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "clients" / "python"))
from consumers import Service  # noqa: E402
from peers import build, run_loadgen  # noqa: E402


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] if values else None


def service(binary, folder, extra=None):
    folder.mkdir(parents=True, exist_ok=True)
    return Service(binary, folder, extra)


def standby_of(binary, folder, primary):
    return service(binary, folder, {"follow": {"query": f"ipc://{primary.folder}/q", "updates": f"ipc://{primary.folder}/up"}})


def loadgen_run(loadgen, primary, updates, n, rate):
    return run_loadgen(loadgen, f"ipc://{primary.folder}/in", updates, n, rate=rate)


def lag(binary, loadgen, folder, rate, seconds, during=None):
    """`during(primary, stop)`, when given, runs on a thread of its own
    through the standby's run (bench/whole_store.py: a settings change every second)."""
    primary = service(binary, folder / "primary-lag")
    standby = standby_of(binary, folder / "standby-lag", primary)
    try:
        n = int(rate * seconds)
        baseline = loadgen_run(loadgen, primary, f"ipc://{primary.folder}/up", n, rate)
        seen = {"primary": {}, "standby": []}
        stop = threading.Event()

        def read():
            context = zmq.Context.instance()
            socks = {}
            for name, service in (("primary", primary), ("standby", standby)):
                s = context.socket(zmq.SUB)
                s.setsockopt(zmq.SUBSCRIBE, b"changes")
                s.setsockopt(zmq.RCVHWM, 0)
                s.connect(f"ipc://{service.folder}/up")
                socks[s] = name
            poller = zmq.Poller()
            for s in socks:
                poller.register(s, zmq.POLLIN)
            while not stop.is_set():
                for s, _ in poller.poll(100):
                    _, body = s.recv_multipart()
                    at = time.monotonic()
                    anchor = json.loads(body)["anchor"]
                    if socks[s] == "primary":
                        seen["primary"][anchor] = at
                    else:
                        seen["standby"].append((anchor, at))
            for s in socks:
                s.close(0)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        side = threading.Thread(target=during, args=(primary, stop), daemon=True) if during else None
        if side:
            side.start()
        time.sleep(0.5)
        via_standby = loadgen_run(loadgen, primary, f"ipc://{standby.folder}/up", n, rate)
        time.sleep(1.0)
        stop.set()
        reader.join(10)
        if side:
            side.join(10)
        lags = []
        standby_seen = sorted(seen["standby"])
        j = 0
        for anchor, at in sorted(seen["primary"].items()):
            while j < len(standby_seen) and standby_seen[j][0] < anchor:
                j += 1
            if j < len(standby_seen):
                lags.append((standby_seen[j][1] - at) * 1000)
        stats = standby.client.stats()
        return {"rate": rate, "events": n, "primary_end_to_end": baseline, "via_standby_end_to_end": via_standby,
                "standby_lag_ms": {"samples": len(lags), "p50": percentile(lags, 0.5), "p99": percentile(lags, 0.99),
                                   "max": max(lags) if lags else None},
                "standby_commits": stats.get("commits"), "standby_in_step": stats["anchor"] == primary.client.ping()}
    finally:
        standby.stop()
        primary.stop()


def catch_up(binary, loadgen, folder, n):
    primary = service(binary, folder / "primary-catch-up")
    try:
        ingest = loadgen_run(loadgen, primary, f"ipc://{primary.folder}/up", n, 0)
        target = primary.client.ping()
        started = time.monotonic()
        standby = standby_of(binary, folder / "standby-catch-up", primary)
        try:
            while standby.client.ping() < target:
                assert time.monotonic() - started < 900, "the standby did not catch up in 15 minutes"
                time.sleep(0.05)
            seconds = time.monotonic() - started
            return {"changes": target, "primary_ingest_per_s": ingest["events_per_s"], "standby_catch_up_s": seconds,
                    "standby_per_s": target / seconds, "ratio": target / seconds / ingest["events_per_s"]}
        finally:
            standby.stop()
    finally:
        primary.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--catch-up-trials", type=int, default=5, help="catch-up runs; their medians are the row")
    parser.add_argument("--only-catch-up", action="store_true", help="leave the lag run out")
    parser.add_argument("--out", default=str(ROOT / "bench/standby.json"))
    args = parser.parse_args()
    loadgen, _ = build(ROOT / ".build/peers")
    results = {}
    with tempfile.TemporaryDirectory(prefix="ct-standby-") as d:
        if not args.only_catch_up:
            print(f"standby: lag at {args.rate:.0f} events/s", file=sys.stderr, flush=True)
            results["lag"] = lag(args.binary, loadgen, Path(d), args.rate, args.seconds)
            print(json.dumps(results["lag"]), flush=True)
        runs = []
        for t in range(args.catch_up_trials):
            print(f"standby: catch-up from {args.changes} changes behind, trial {t + 1} of {args.catch_up_trials}",
                  file=sys.stderr, flush=True)
            runs.append(catch_up(args.binary, loadgen, Path(d) / f"trial-{t}", args.changes))
            print(json.dumps(runs[-1]), flush=True)
        # Each trial's ratio is against its own primary's ingest: the median of the ratios is the row.
        results["catch_up"] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        results["catch_up_runs"] = runs
        print(json.dumps(results["catch_up"]), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
