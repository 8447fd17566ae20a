#!/usr/bin/env python3
"""Backups while running (PROTOCOL.md §11), beside `sqlite3 .backup` of the
same file in the same invocation:

1. A store of 1,000,000 drinks (the shared load generator at full speed).
   `coffee-tracker backup` of it, three times with the service idle, beside
   Debian's `sqlite3 FILE ".backup COPY"` of the same file, three times with
   the service stopped (the service holds its file exclusively): bytes per
   second, best of three each.
2. The live path during backups: the load generator at 1,000 events/s, its
   p99 from publish to `changes`, in pairs of runs (`--pairs`, `--seconds`
   each): one without backups, then one with one backup after another all
   along (query `backup` from one socket). The ratio is the median of the
   pairs' ratios: on this shared machine the p99 without backups moved from
   1.5 to 43 ms between runs minutes apart, so one run of each, minutes
   apart, gave ratios from 1.3 to 5.7 for the same code.

Release build, loopback, ipc:// endpoints in a scratch folder."""
import argparse
import json
import statistics
import subprocess
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


def loadgen_run(loadgen, service, n, rate):
    """One run of the shared load generator on `service`'s store. The load
    generator tags its drinks' UUIDs with `(pid ^ time) & 0xFFFF`, and both
    move by a few from one run to the next, so two runs on one store can
    share a tag: every drink of the second is then a duplicate, rightly
    stored and announced by nobody, and the run sees none of them. Seen
    here once in about ten runs on a store; such a run, named by the
    duplicates counter, is run again."""
    for _ in range(3):
        before = service.client.stats()["duplicates"]
        result = run_loadgen(loadgen, f"ipc://{service.folder}/in", f"ipc://{service.folder}/up", n, rate=rate)
        if result.get("received") == n:
            return result
        duplicates = service.client.stats()["duplicates"] - before
        if duplicates < n - result.get("received", 0):
            raise SystemExit(f"the load generator lost {result.get('lost')} of {n}, not as duplicates: {result}")
        print(f"backup: {duplicates} duplicates (the load generator's tag was used before): run again",
              file=sys.stderr, flush=True)
    raise SystemExit("the load generator's tag collided three times")


def backup(binary, service, name):
    started = time.monotonic()
    p = subprocess.run([binary, "backup", name, "--config", str(service.config)], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"backup failed: {p.stdout}{p.stderr}")
    return time.monotonic() - started


def with_backups(service, load, prefix):
    """Runs `load()` while one backup follows another, named `prefix-I.sqlite`;
    returns its result and each backup's seconds."""
    stop, taken, failed = threading.Event(), [], []
    started = threading.Event()

    def keep_backing_up():
        # The query op itself (what `coffee-tracker backup` sends), from one socket: a
        # command-line process per backup would put its own start-up on the two cores.
        sock = zmq.Context.instance().socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, 600_000)
        sock.connect(f"ipc://{service.folder}/q")
        i = 0
        while not stop.is_set():
            began = time.monotonic()
            sock.send(json.dumps({"op": "backup", "name": f"{prefix}-{i}.sqlite"}).encode())
            started.set()
            reply = json.loads(sock.recv())
            if not reply.get("ok"):
                failed.append(reply)
                break
            taken.append(time.monotonic() - began)
            i += 1
        sock.close()

    worker = threading.Thread(target=keep_backing_up, daemon=True)
    worker.start()
    started.wait(30)
    result = load()
    stop.set()
    worker.join(600)
    if failed or worker.is_alive():
        raise SystemExit(f"backup failed: {failed or 'no reply in 600 s'}")
    return result, taken


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--drinks", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=6, help="each run of a pair")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "bench/backup.json"))
    args = parser.parse_args()
    loadgen, _ = build(ROOT / ".build/peers")
    results = {}
    with tempfile.TemporaryDirectory(prefix="ct-backup-") as d:
        folder = Path(d)
        service = Service(args.binary, folder)
        try:
            print(f"backup: a store of {args.drinks} drinks", file=sys.stderr, flush=True)
            loadgen_run(loadgen, service, args.drinks, 0)
            store = folder / "data" / "coffee-tracker.sqlite"
            backups = folder / "data" / "backups"
            ours = [backup(args.binary, service, f"bench-{i}.sqlite") for i in range(3)]
            size = (backups / "bench-0.sqlite").stat().st_size
            print("backup: the live path at 1,000 events/s, without and with backups, in pairs",
                  file=sys.stderr, flush=True)
            n = int(args.rate * args.seconds)
            pairs, taken = [], []
            for pair in range(args.pairs):
                quiet = loadgen_run(loadgen, service, n, args.rate)
                during, times = with_backups(service, lambda: loadgen_run(loadgen, service, n, args.rate),
                                             f"during-{pair}")
                taken += times
                pairs.append({"without_backups": quiet, "with_backups": during, "backups_taken": len(times),
                              "p99_ratio": during["lat_ms_p99"] / quiet["lat_ms_p99"]})
                print(f"backup: pair {pair + 1}/{args.pairs}: p99 {quiet['lat_ms_p99']:.2f} ms without, "
                      f"{during['lat_ms_p99']:.2f} ms with ({len(times)} backups)", file=sys.stderr, flush=True)
            # Removed once the load is over: freeing a 100 MB file is file-system
            # work of its own that no backup does (on a file system mounted with
            # `discard`, a trim of every freed extent at the journal's next commit).
            for copy in backups.glob("*.sqlite"):
                copy.unlink()
        finally:
            service.stop()
        theirs = []
        for i in range(3):
            copy = folder / f"sqlite3-{i}.sqlite"
            started = time.monotonic()
            subprocess.run(["sqlite3", str(store), f".backup {copy}"], check=True, timeout=600)
            theirs.append(time.monotonic() - started)
            copy.unlink()
        results["store"] = {"drinks": args.drinks, "bytes": size}
        results["backup"] = {"ours_s": ours, "sqlite3_s": theirs, "ours_mb_per_s": size / min(ours) / 1e6,
                             "sqlite3_mb_per_s": size / min(theirs) / 1e6, "ratio": min(theirs) / min(ours)}
        ratios = sorted(pair["p99_ratio"] for pair in pairs)
        results["live_path"] = {"rate": args.rate, "seconds_per_run": args.seconds, "pairs": pairs,
                                "backup_s": taken, "p99_ratio": statistics.median(ratios),
                                "p50_ms_without": statistics.median(p["without_backups"]["lat_ms_p50"] for p in pairs),
                                "p50_ms_with": statistics.median(p["with_backups"]["lat_ms_p50"] for p in pairs)}
        print(json.dumps(results), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
