#!/usr/bin/env python3
"""CSV into the inbox (docs/protocol.md §5) against JSON Lines, in one
invocation: the same N drinks (default 200,000, dated over the past year)
written as the service's own CSV export and as JSON Lines, each dropped
into the inbox of a fresh service (release build), alternated, TRIALS
times; drinks per second from the rename into the inbox to the file in
`processed/` (one commit each). The ratio is the medians' (asked: CSV at
least 0.8x JSON Lines).

    python3 bench/csv_import.py [--trials 3] [--drinks 200000] [--out bench/csv-import.json]
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from alerts import serve  # noqa: E402
from peers import stop  # noqa: E402


def drinks(n):
    now = datetime.now(timezone.utc)
    rng = random.Random(7)
    for _ in range(n):
        date = now - timedelta(seconds=rng.uniform(60, 365 * 86400))
        yield (str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper(), date.isoformat(timespec="milliseconds"),
               rng.choice([64, 96, 128, 47]), rng.choice(["singleEspresso", "smallCoffee", "blackTea", ""]))


def write_files(folder, n):
    csv_path, jsonl_path = folder / "drinks.csv", folder / "drinks.jsonl"
    with open(csv_path, "w", newline="") as c, open(jsonl_path, "w") as j:
        c.write("uuid,date,mgCaffeine,type,version,source\r\n")
        for u, date, mg, kind in drinks(n):
            c.write(f"{u},{date},{mg},{kind},1,bench\r\n")
            d = {"uuid": u, "date": date, "mgCaffeine": mg, "version": 1, "source": "bench"}
            if kind:
                d["type"] = kind
            j.write(json.dumps(d) + "\n")
    return {"csv": csv_path, "jsonl": jsonl_path}


def run(source, n):
    with tempfile.TemporaryDirectory(prefix="ct-csv-") as d:
        folder = Path(d)
        process, _, _ = serve(folder, {"limits": {"maxFileBytes": 1 << 31}})
        try:
            inbox = folder / "inbox"
            name = "drinks" + source.suffix
            staged = folder / ("." + name)
            os.link(source, staged)
            started = time.monotonic()
            os.rename(staged, inbox / name)
            done, failed = inbox / "processed" / name, inbox / "failed" / name
            deadline = time.time() + 600
            while not done.exists():
                if failed.exists() or time.time() > deadline:
                    raise SystemExit(f"{name} was not imported")
                time.sleep(0.01)
            seconds = time.monotonic() - started
            return {"drinks": n, "seconds": seconds, "drinks_per_s": n / seconds}
        finally:
            stop([process])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--drinks", type=int, default=200_000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "csv-import.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ct-csv-files-") as d:
        files = write_files(Path(d), args.drinks)
        runs = {"csv": [], "jsonl": []}
        for t in range(args.trials):
            for kind in ("jsonl", "csv"):
                r = run(files[kind], args.drinks)
                runs[kind].append(r)
                print(f"trial {t + 1} {kind:5} {r['drinks_per_s']:.0f} drinks/s ({r['seconds']:.2f} s)", flush=True)
    medians = {kind: statistics.median(r["drinks_per_s"] for r in rs) for kind, rs in runs.items()}
    out = {"drinks": args.drinks, "medians_drinks_per_s": medians, "runs": runs,
           "csv/jsonl": medians["csv"] / medians["jsonl"]}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"CSV {medians['csv']:.0f} drinks/s against JSON Lines {medians['jsonl']:.0f} ({out['csv/jsonl']:.2f}x)")


if __name__ == "__main__":
    main()
