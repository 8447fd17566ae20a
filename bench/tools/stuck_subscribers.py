#!/usr/bin/env python3
"""Memory held for subscribers that never read (issue: faults): starts the
release service, connects N subscribers that subscribe to everything and
never call recv, imports a JSON Lines file of M drinks through the inbox,
and reports the service's peak RSS against the same import with no
subscriber, in one run. Usage: stuck_subscribers.py [--subscribers 10] [--drinks 1000000]"""
import argparse
import json
import os
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import zmq


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run(binary, drinks_file, drinks, subscribers, transport):
    with tempfile.TemporaryDirectory(prefix="ct-stuck-") as d:
        folder = Path(d)
        updates = f"ipc://{folder}/up" if transport == "ipc" else "tcp://127.0.0.1:*"
        (folder / "config.json").write_text(json.dumps({
            "dataDirectory": "data", "inboxDirectory": "inbox",
            "ingest": {"bind": [f"ipc://{folder}/in"]}, "updates": {"bind": [updates]},
            "query": {"bind": [f"ipc://{folder}/q"]}, "http": {"bind": "127.0.0.1:0"}, "model": {"timeZone": "UTC"},
            "log": {"level": "warning"}}))
        p = subprocess.Popen([binary, "serve", "--config", str(folder / "config.json")],
                             stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ctx = zmq.Context()
        try:
            deadline = time.time() + 30
            while not (folder / "data" / "endpoints.json").exists():
                assert time.time() < deadline
                time.sleep(0.05)
            endpoint = json.loads((folder / "data" / "endpoints.json").read_text())["updates"][0]
            subs = []
            for _ in range(subscribers):
                s = ctx.socket(zmq.SUB)
                s.setsockopt(zmq.RCVHWM, 1)  # the application never reads: its queue fills at once
                s.setsockopt(zmq.SUBSCRIBE, b"")
                s.setsockopt(zmq.LINGER, 0)
                s.connect(endpoint)
                subs.append(s)
            time.sleep(1)
            idle = rss_mb(p.pid)
            os.link(drinks_file, folder / "inbox" / "drinks.jsonl")
            peak, started = idle, time.time()
            while not (folder / "inbox" / "processed" / "drinks.jsonl").exists():
                peak = max(peak, rss_mb(p.pid))
                assert time.time() - started < 600
                time.sleep(0.02)
            for _ in range(150):  # the publisher pages the commit out after it
                peak = max(peak, rss_mb(p.pid))
                time.sleep(0.02)
            # A stuck subscriber is disconnected after updates' stuck timeout
            # (10 s), and what was queued for it is freed.
            time.sleep(15)
            return idle, peak, rss_mb(p.pid)
        finally:
            p.terminate()
            p.wait(timeout=60)
            for s in subs if 'subs' in dir() else []:
                s.close()
            ctx.term()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", default=".build/release/coffee-tracker")
    parser.add_argument("--subscribers", type=int, default=10)
    parser.add_argument("--drinks", type=int, default=1_000_000)
    parser.add_argument("--transport", default="tcp", choices=["tcp", "ipc"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ct-stuck-file-") as d:
        path = Path(d) / "drinks.jsonl"
        base = time.time() - 40 * 86400
        with open(path, "w") as f:
            for i in range(args.drinks):
                f.write(json.dumps({"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 64, "date": base - i}) + "\n")
        for n in (0, args.subscribers):
            idle, peak, after = run(os.path.abspath(args.binary), path, args.drinks, n, args.transport)
            print(f"{n:3d} stuck subscribers ({args.transport}), {args.drinks} drinks: idle {idle:.0f} MB, "
                  f"peak {peak:.0f} MB (+{peak - idle:.0f}), 15 s after the import {after:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
