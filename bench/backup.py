#!/usr/bin/env python3
"""Backups while running (PROTOCOL.md §11), beside `sqlite3 .backup` of the
same file in the same invocation:

1. A store of 1,000,000 drinks (the shared load generator at full speed).
   `coffee-tracker backup` of it, three times with the service idle, beside
   Debian's `sqlite3 FILE ".backup COPY"` of the same file, three times with
   the service stopped (the service holds its file exclusively): bytes per
   second, best of three each.
2. The live path during backups: the load generator at 1,000 events/s for
   20 s, its p99 from publish to `changes`, without backups and then with
   one backup after another all along (query `backup` from one socket).

Release build, loopback, ipc:// endpoints in a scratch folder."""
import argparse
import json
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
    return run_loadgen(loadgen, f"ipc://{service.folder}/in", f"ipc://{service.folder}/up", n, rate=rate)


def backup(binary, service, name):
    started = time.monotonic()
    p = subprocess.run([binary, "backup", name, "--config", str(service.config)], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"backup failed: {p.stdout}{p.stderr}")
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--drinks", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
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
            for i in range(3):
                (backups / f"bench-{i}.sqlite").unlink()
            print("backup: the live path at 1,000 events/s, without and with backups", file=sys.stderr, flush=True)
            n = int(args.rate * args.seconds)
            quiet = loadgen_run(loadgen, service, n, args.rate)
            stop, taken = threading.Event(), []

            def keep_backing_up():
                # The query op itself (what `coffee-tracker backup` sends), from one socket: a
                # command-line process per backup would put its own start-up on the two cores.
                sock = zmq.Context.instance().socket(zmq.REQ)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(f"ipc://{service.folder}/q")
                i = 0
                while not stop.is_set():
                    started = time.monotonic()
                    sock.send(json.dumps({"op": "backup", "name": f"during-{i}.sqlite"}).encode())
                    reply = json.loads(sock.recv())
                    if not reply.get("ok"):
                        raise SystemExit(f"backup failed: {reply}")
                    taken.append(time.monotonic() - started)
                    i += 1
                sock.close()

            worker = threading.Thread(target=keep_backing_up, daemon=True)
            worker.start()
            during = loadgen_run(loadgen, service, n, args.rate)
            stop.set()
            worker.join(600)
            # Removed once the load is over: freeing a 100 MB file is file-system
            # work of its own that no backup does.
            for i in range(len(taken)):
                (backups / f"during-{i}.sqlite").unlink()
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
        results["live_path"] = {"without_backups": quiet, "with_backups": during, "backups_taken": len(taken),
                                "backup_s": taken,
                                "p99_ratio": during["lat_ms_p99"] / quiet["lat_ms_p99"]}
        print(json.dumps(results), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
