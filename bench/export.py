#!/usr/bin/env python3
"""The CSV export (docs/protocol.md §15) against the sqlite3 shell, in one
invocation: a fresh service (release build) with N drinks (default
1,000,000, a drink every few minutes over the years, imported as JSON
Lines), a backup of its store made by `coffee-tracker backup`, then
alternated TRIALS times: `GET /api/v1/export.csv` read by curl into
/dev/null, and `sqlite3 -csv` on the backup writing the same columns
(the UUID as hex, the date as RFC 3339, mg, type, version, source) of the
live drinks in the same order into /dev/null, and again in the index's
order alone (date, ties as stored: no sort, the shell's best case). Seconds each, and peak RSS
side by side: the service's growth over its RSS before the export, sampled
from /proc every 2 ms, against the sqlite3 process's peak (its rusage).
The ratio is the medians' (asked: the service at most 1.5x the shell).

    python3 bench/export.py [--trials 3] [--drinks 1000000] [--out bench/export.json]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINARY = str(ROOT / ".build" / "release" / "coffee-tracker")
sys.path.insert(0, str(ROOT / "bench"))
from alerts import serve  # noqa: E402
from peers import stop  # noqa: E402

COLUMNS = ("SELECT hex(uuid), strftime('%Y-%m-%dT%H:%M:%fZ', date_ms / 1000.0, 'unixepoch'), mg, type, version, "
           "source FROM records WHERE ")
# The service's order (ties by UUID: SQLite sorts within a date), and the index's alone (no sort: the shell's best).
ORDERS = {"sqlite3": "date_ms, uuid", "sqlite3 (date only)": "date_ms"}


def live_condition(backup):
    """The live drinks of `backup` as the index by date holds them: in a
    file of schema 9, those marked `indexed` (the file is filled by one
    commit, which indexes them all: checked, so that the shell's read is
    the whole export and its plan the index's)."""
    def scalar(sql):
        return subprocess.run(["sqlite3", str(backup), sql], capture_output=True, text=True, check=True).stdout.strip()
    if scalar("SELECT count(*) FROM pragma_table_info('records') WHERE name = 'indexed'") != "1":
        return "deleted = 0"
    left_out = scalar("SELECT count(*) FROM records WHERE deleted = 0 AND indexed = 0")
    if left_out != "0":
        raise SystemExit(f"{left_out} drinks of the backup are not in its index by date")
    return "deleted = 0 AND indexed = 1"


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def fill(folder, n):
    start = datetime(2016, 1, 1, tzinfo=timezone.utc)
    staged = folder / ".drinks.jsonl"
    with open(staged, "w") as f:
        for i in range(n):
            date = start + timedelta(seconds=i * 277)
            f.write(json.dumps({"uuid": str(uuid.uuid4()).upper(), "date": date.isoformat(timespec="milliseconds"),
                                "mgCaffeine": (64, 96, 128, 47)[i % 4], "version": 1, "source": "bench",
                                **({"type": "singleEspresso"} if i % 3 == 0 else {})}) + "\n")
    os.rename(staged, folder / "inbox" / "drinks.jsonl")
    done = folder / "inbox" / "processed" / "drinks.jsonl"
    deadline = time.time() + 600
    while not done.exists():
        if time.time() > deadline or (folder / "inbox" / "failed" / "drinks.jsonl").exists():
            raise SystemExit("the drinks were not imported")
        time.sleep(0.05)


def export_over_http(process, address):
    before = rss_mb(process.pid)
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.wait(0.002):
            peak[0] = max(peak[0], rss_mb(process.pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.monotonic()
    subprocess.run(["curl", "-sSf", "-o", "/dev/null", f"http://{address}/api/v1/export.csv"], check=True)
    seconds = time.monotonic() - started
    done.set()
    sampler.join()
    return {"seconds": seconds, "rss_before_mb": before, "rss_peak_mb": peak[0], "rss_growth_mb": peak[0] - before}


def export_by_sqlite3(backup, sql):
    started = time.monotonic()
    with open(os.devnull, "w") as sink:
        p = subprocess.Popen(["sqlite3", "-csv", str(backup), sql], stdout=sink)
        _, status, usage = os.wait4(p.pid, 0)
    seconds = time.monotonic() - started
    if status != 0:
        raise SystemExit("sqlite3 failed")
    return {"seconds": seconds, "rss_peak_mb": usage.ru_maxrss / 1024}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--drinks", type=int, default=1_000_000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "export.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ct-export-") as d:
        folder = Path(d)
        process, _, _ = serve(folder, {"http": {"bind": "127.0.0.1:0"}, "limits": {"maxFileBytes": 1 << 31}})
        try:
            fill(folder, args.drinks)
            address = json.loads((folder / "data" / "endpoints.json").read_text())["http"]
            q = subprocess.run([BINARY, "backup", "bench.db", "--config", str(folder / "config.json")],
                               capture_output=True, text=True)
            if q.returncode != 0:
                raise SystemExit(f"the backup failed: {q.stderr}")
            backup = next((folder / "data").rglob("bench.db"))
            live = live_condition(backup)
            queries = {name: f"{COLUMNS}{live} ORDER BY {order}" for name, order in ORDERS.items()}
            runs = {"service": [], **{name: [] for name in queries}}
            for t in range(args.trials):
                s = export_over_http(process, address)
                runs["service"].append(s)
                line = f"trial {t + 1}: service {s['seconds']:.2f} s (RSS +{s['rss_growth_mb']:.1f} MB)"
                for name, sql in queries.items():
                    q = export_by_sqlite3(backup, sql)
                    runs[name].append(q)
                    line += f", {name} {q['seconds']:.2f} s (peak RSS {q['rss_peak_mb']:.1f} MB)"
                print(line, flush=True)
        finally:
            stop([process])
    medians = {k: statistics.median(r["seconds"] for r in rs) for k, rs in runs.items()}
    out = {"drinks": args.drinks, "median_seconds": medians,
           **{f"service/{name}": medians["service"] / medians[name] for name in queries},
           "service_rss_growth_mb_max": max(r["rss_growth_mb"] for r in runs["service"]),
           "sqlite3_peak_rss_mb_max": max(r["rss_peak_mb"] for name in queries for r in runs[name]), "runs": runs}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"export of {args.drinks} drinks: service {medians['service']:.2f} s; "
          + "; ".join(f"{name} -csv {medians[name]:.2f} s ({out['service/' + name]:.2f}x)" for name in queries)
          + f"; service RSS growth at most {out['service_rss_growth_mb_max']:.1f} MB, sqlite3 peak RSS at most "
          f"{out['sqlite3_peak_rss_mb_max']:.1f} MB")

if __name__ == "__main__":
    main()
