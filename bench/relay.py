#!/usr/bin/env python3
"""Relays (PROTOCOL.md §11), each beside a baseline of the same invocation:
1 service -> 2 relays -> subscribers (half on each), the service fed by the
shared load generator (`loadgen`, single-event messages at RATE/s) and
publishing its model every 100 ms (10 models/s). Release build, nothing else
running.

For each setup, the subscribers (`bench/tools/relay_subs.c`, one thread, a
reference SUB on the service itself read first on each wake-up) report the
`changes` chain per subscriber (a gap is a dropped message) and each
message's delay through the hop against the reference's copy; the hop's
process CPU comes from /proc over the same window.

- `coffee-tracker relay` (libzmq's zmq_proxy_steerable, plus the last value
  cache and the counts on the capture);
- the baseline: a bare `zmq_proxy` in C (`bench/tools/bare_proxy.c`) with the
  same high-water marks.

    python3 bench/relay.py [--subscribers 1000] [--rate 1000] [--seconds 20] [--out bench/relay.json]
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / ".build" / "bench-tools"
sys.path.insert(0, str(ROOT / "bench"))
from peers import build as build_peers, cpu_seconds, stop  # noqa: E402


def build(name, source):
    TOOLS.mkdir(parents=True, exist_ok=True)
    out = TOOLS / name
    if not out.exists() or out.stat().st_mtime < source.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-o", str(out), str(source), "-lzmq"], check=True)
    return out


def started(argv, ready_prefix):
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    assert line.startswith(ready_prefix), f"{argv[0]} did not start: {line!r}"
    return process


def run(binary, kind, subscribers, rate, seconds):
    with tempfile.TemporaryDirectory(prefix="ct-relay-") as d:
        folder = Path(d)
        (folder / "config.json").write_text(json.dumps({
            "dataDirectory": "data", "inboxDirectory": "inbox", "ingest": {"bind": [f"ipc://{d}/in"]},
            "updates": {"bind": [f"ipc://{d}/up"]}, "query": {"bind": [f"ipc://{d}/q"]}, "http": {"bind": None},
            "publish": {"modelIntervalMs": 100}, "log": {"level": "warning"}}))
        service = subprocess.Popen([binary, "serve", "--config", str(folder / "config.json")], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hops = []
        try:
            while not (folder / "data" / "endpoints.json").exists():
                assert service.poll() is None, "the service did not start"
                time.sleep(0.05)
            upstream = f"ipc://{d}/up"
            for i in range(2):
                bind = f"ipc://{d}/hop{i}"
                if kind == "relay":
                    hops.append(started([binary, "relay", "--from", upstream, "--bind", bind, "--log-level", "warning"],
                                        "relay: "))
                else:
                    hops.append(started([str(build("bare_proxy", ROOT / "bench/tools/bare_proxy.c")), upstream, bind],
                                        "bare_proxy: "))
            events = int(rate * (seconds + 15))
            loadgen, _ = build_peers(ROOT / ".build/peers")
            load = subprocess.Popen([str(loadgen), f"ipc://{d}/in", upstream, str(events), "1", str(rate)],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            time.sleep(3)  # the load is on
            half = subscribers // 2
            before = [cpu_seconds(h.pid) for h in hops]
            t0 = time.monotonic()
            subs = subprocess.run([str(build("relay_subs", ROOT / "bench/tools/relay_subs.c")), str(seconds), upstream,
                                   f"ipc://{d}/hop0", str(half), f"ipc://{d}/hop1", str(subscribers - half)],
                                  capture_output=True, text=True, timeout=seconds + 120)
            elapsed = time.monotonic() - t0
            cpu = [cpu_seconds(h.pid) - b for h, b in zip(hops, before)]
            result = json.loads(subs.stdout.strip().splitlines()[-1])
            result["hop_cpu_per_s"] = sum(cpu) / len(cpu) / elapsed
            load.terminate()
            load.wait(30)
            return result
        finally:
            stop([*hops, service], timeout=30)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--out", default=str(ROOT / "bench/relay.json"))
    args = parser.parse_args()
    results = {"subscribers": args.subscribers, "rate": args.rate}
    for kind in ("bare_proxy", "relay"):
        print(f"relay: {kind}, {args.subscribers} subscribers at {args.rate:.0f} events/s", file=sys.stderr, flush=True)
        results[kind] = run(args.binary, kind, args.subscribers, args.rate, args.seconds)
        print(json.dumps(results[kind]), flush=True)
    results["cpu_ratio"] = results["relay"]["hop_cpu_per_s"] / results["bare_proxy"]["hop_cpu_per_s"]
    print(json.dumps({"cpu_ratio": results["cpu_ratio"]}))
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
