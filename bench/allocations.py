#!/usr/bin/env python3
"""Heap allocations per event on the live path, counted, not sampled.

At 1,000 single-event messages a second (each its own commit), every call
into glibc's allocator (malloc, calloc, realloc, posix_memalign,
aligned_alloc) made by coffee-tracker's threads, and by the C peer's
(../shared/bench/peer_c.c) for scale, is counted by the kernel through
uprobes (`perf probe` on libc, `perf stat --per-thread`), and divided by
the events sent. A count does not move with the machine's speed, so one
run of each worker says it; a change to the live path shows here exactly.

    python3 bench/allocations.py [--events 5000] [--binary .build/release/coffee-tracker]
                                 [--baseline OLD-BINARY] [--out bench/allocations.json]

Needs perf and uprobes (root): the probes are added if missing and removed
again if this run added them. SQLite and libzmq allocate too (the C peer's
whole count is theirs); the table gives each thread's share.
"""

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import ROOT, build, start, stop  # noqa: E402

FUNCTIONS = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc"]
EVENTS = [f"probe_libc:{f}" for f in FUNCTIONS]


def libc_path():
    """The libc the workers load (the one `perf probe -x` must name)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1]
        if "/libc.so" in path or path.endswith("/libc-2.so"):
            return path
    raise SystemExit("allocations: cannot find libc in /proc/self/maps")


def add_probes():
    """Adds the allocator's probes that are missing; returns those added."""
    listed = subprocess.run(["perf", "probe", "-l"], capture_output=True, text=True).stdout
    added = []
    for function, event in zip(FUNCTIONS, EVENTS):
        if event in listed:
            continue
        p = subprocess.run(["perf", "probe", "-q", "-x", libc_path(), "--add", function], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"allocations: perf probe could not add {function} ({p.stderr.strip()}): needs root and uprobes")
        added.append(event)
    return added


def count(worker, binaries, peer_c, loadgen, events, rate):
    """One run: the allocations of each of the worker's threads, per event sent."""
    with tempfile.TemporaryDirectory(prefix="ct-alloc-") as d:
        folder = Path(d)
        process, ingest, updates = start(worker, folder, binaries, peer_c)
        out = folder / "perf.csv"
        try:
            perf = subprocess.Popen(["perf", "stat", "--per-thread", "-x", ",", "-o", str(out), "-e", ",".join(EVENTS),
                                     "-p", str(process.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # perf attached to every thread before the first event
            p = subprocess.run([str(loadgen), ingest, updates, str(events), "1", str(rate)], capture_output=True,
                               text=True, timeout=600)
            result = json.loads(p.stdout.strip().splitlines()[-1])
            perf.send_signal(2)
            perf.wait(timeout=30)
        finally:
            stop([process])
        threads = collections.Counter()
        for line in out.read_text().splitlines():
            fields = line.split(",")
            # thread-tid,count,unit,event,...; "<not counted>" for threads that never ran
            if len(fields) > 3 and fields[1].isdigit() and fields[3] in EVENTS:
                threads[fields[0].rsplit("-", 1)[0]] += int(fields[1])
        return {"lost": result["lost"], "per_event": sum(threads.values()) / events,
                "threads": {name: n / events for name, n in threads.most_common() if n / events >= 0.01}}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=5000, help="events sent at --rate (default 5000)")
    parser.add_argument("--rate", type=int, default=1000, help="events a second (default 1000)")
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--baseline", help="an older build of coffee-tracker, counted beside this one")
    parser.add_argument("--out", default=str(ROOT / "bench/allocations.json"))
    args = parser.parse_args()
    loadgen, peer_c = build(ROOT / ".build/peers")
    binaries = {"coffee-tracker": args.binary}
    if args.baseline:
        binaries["baseline"] = args.baseline
    added = add_probes()
    try:
        rows = {}
        for worker in [*binaries, "C peer"]:
            print(f"allocations: {worker}, {args.events} events at {args.rate}/s", file=sys.stderr)
            rows[worker] = count(worker, binaries, peer_c, loadgen, args.events, args.rate)
    finally:
        if added:
            subprocess.run(["perf", "probe", "-q", *(arg for event in added for arg in ("-d", event))], capture_output=True)
    print(f"{'worker':16} {'per event':>10}  by thread")
    for worker, row in rows.items():
        threads = ", ".join(f"{name} {n:.2f}" for name, n in row["threads"].items())
        print(f"{worker:16} {row['per_event']:10.2f}  {threads}  (lost {row['lost']})")
    Path(args.out).write_text(json.dumps({"events": args.events, "rate": args.rate, "workers": rows}, indent=1) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
