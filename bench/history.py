#!/usr/bin/env python3
"""A person's history (docs/protocol.md §15), beside the same aggregate run by
Debian's `sqlite3` shell on a copy of the store file, in one invocation:

1. 40,000 drinks over ten years (about eleven a day, Europe/Berlin):
   `history` by day over the ten years (3,653 days: per day the mg and the
   drinks, summed in the store, and the peak and the hours over the sleep
   threshold) through the query endpoint, against `sqlite3 COPY` given the
   same 3,653 local days as a table and summing each one's drinks over the
   index by date (a correlated subquery per day: a LEFT JOIN of the days to
   the records makes SQLite build an automatic index on `deleted` instead,
   11 to 23 s here), its process start included.
   A copy of the store made by the service's `backup` (one consistent file).
2. The same after a Health export of 2,500,000 records is imported through
   the inbox (bench/health.py's generator: 1% caffeine, so 25,000 more
   drinks, five seconds apart).

Each trial runs the service's request, then the shell, alternated; the
figures are the medians of `--trials` trials, the ratio the median of the
trials' ratios. Release build, loopback, ipc:// endpoints in a
scratch folder.

    python3 bench/history.py [--trials 5] [--records 2500000] [--out bench/history.json]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "clients" / "python"))
from consumers import Service  # noqa: E402
from health import generated  # noqa: E402

BERLIN = ZoneInfo("Europe/Berlin")


def ten_years(first, last, per_day=11, seed=3):
    rng = random.Random(seed)
    drinks = []
    day = first
    while day <= last:
        for _ in range(rng.randint(per_day - 3, per_day + 3)):
            local = datetime(day.year, day.month, day.day, tzinfo=BERLIN) + timedelta(seconds=rng.randrange(86_400))
            drinks.append({"uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper(),
                           "mgCaffeine": rng.choice([96, 128, 64, 47, 28]),
                           "date": local.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})
        day += timedelta(days=1)
    return drinks


def midnight_ms(day):
    return int(datetime(day.year, day.month, day.day, tzinfo=BERLIN).timestamp() * 1000)


# A day's live drinks in a file of schema 9: those in the index by date, and
# those above `date_indexed` a small commit left out of it (the service's read,
# `SQLDialect.liveByDate`), copied first into a table of their own with an
# index, so that the shell does not scan them once a day; a file of schema 8
# or older has the index alone.
DAY_LIVE = "deleted = 0 AND date_ms >= lo AND date_ms < hi"
LEFT_OUT = ("CREATE TEMP TABLE left_out AS SELECT date_ms, mg FROM records\n"
            "  WHERE anchor > (SELECT value FROM meta WHERE key = 'date_indexed') AND indexed = 0 AND deleted = 0;\n"
            "CREATE INDEX temp.left_out_by_date ON left_out(date_ms, mg);\n")
DAY_PARTS = {
    True: [f"records WHERE {DAY_LIVE} AND indexed = 1", "left_out WHERE date_ms >= lo AND date_ms < hi"],
    False: [f"records WHERE {DAY_LIVE}"],
}


def defers_date_index(path):
    """Whether a store file has schema 9's `indexed` column."""
    out = subprocess.run(["sqlite3", path, "SELECT count(*) FROM pragma_table_info('records') WHERE name = 'indexed'"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip() == "1"


def shell_script(first, last, deferred=True):
    """The days as a table, each one's sums over the index by date (and
    the drinks not in it yet, in a file that defers it)."""
    rows = []
    day = first
    while day <= last:
        rows.append(f"({midnight_ms(day)},{midnight_ms(day + timedelta(days=1))})")
        day += timedelta(days=1)
    total = " + ".join(f"(SELECT total(mg) FROM {part})" for part in DAY_PARTS[deferred])
    count = " + ".join(f"(SELECT count(*) FROM {part})" for part in DAY_PARTS[deferred])
    return ((LEFT_OUT if deferred else "")
            + "CREATE TEMP TABLE days(lo INTEGER PRIMARY KEY, hi INTEGER);\n"
            f"INSERT INTO days VALUES {','.join(rows)};\n"
            f"SELECT lo, ({total}) || '|' || ({count}) FROM days ORDER BY lo;\n")


def alternated(first, second, trials):
    """Each trial runs `first` then `second`, so that the machine's drift
    (this shared machine's speed moves by half between minutes) falls on
    both; the times of each, and the last results."""
    times = ([], [])
    results = [None, None]
    for _ in range(trials):
        for k, fn in enumerate((first, second)):
            started = time.perf_counter()
            results[k] = fn()
            times[k].append(time.perf_counter() - started)
    return times, results


def row(name, times, service_days, shell_days):
    assert service_days == shell_days, (service_days, shell_days)
    ratios = [a / b for a, b in zip(*times)]
    return {"figure": name, "service_s": statistics.median(times[0]), "sqlite3_s": statistics.median(times[1]),
            "ratio": statistics.median(ratios), "ratios": ratios, "days": service_days}


def measure(service, first, last, trials, label):
    reply_holder = {}

    def history():
        reply = service.client.history(first.isoformat(), last.isoformat(), "day")
        reply_holder["buckets"] = reply["buckets"]
        return len(reply["buckets"])

    backup = service.client.backup(f"history-{int(time.time() * 1000)}.sqlite")
    script = shell_script(first, last, defers_date_index(backup["file"]))

    def shell():
        out = subprocess.run(["sqlite3", backup["file"]], input=script, capture_output=True, text=True, check=True)
        return out.stdout.strip().splitlines()

    times, (days, lines) = alternated(history, shell, trials)
    # The two agree, day by day.
    for bucket, line in zip(reply_holder["buckets"], lines):
        _, mg, count = line.split("|")
        assert abs(float(mg) - bucket["mg"]) < 1e-6 and int(count) == bucket["drinks"], (bucket, line)
    print(f"history: {label}: service (trials {[round(t * 1000, 1) for t in times[0]]} ms), "
          f"sqlite3 (trials {[round(t * 1000, 1) for t in times[1]]} ms)", file=sys.stderr, flush=True)
    return row(f"history by day, {label}", times, days, len(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--records", type=int, default=2_500_000, help="the Health export's records (1%% caffeine)")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    last = date(2026, 11, 30)
    first = last - timedelta(days=3652)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ct-history-") as d:
        folder = Path(d)
        service = Service(args.binary, folder, {"model": {"timeZone": "Europe/Berlin"}})
        try:
            drinks = ten_years(first, last)
            for k in range(0, len(drinks), 2000):
                service.client.add(drinks[k:k + 2000])
            print(f"history: {len(drinks):,} drinks over ten years stored", file=sys.stderr, flush=True)
            rows.append(measure(service, first, last, args.trials, f"{len(drinks):,} drinks over ten years"))
            export = generated(ROOT / ".build" / "bench-health", args.records)
            started = time.monotonic()
            link = folder / export.name
            os.link(export, link)  # same file system: no copy (as bench/health.py)
            os.rename(link, folder / "inbox" / export.name)
            done = folder / "inbox" / "processed" / (export.name + ".summary.json")
            while not done.exists():
                if (folder / "inbox" / "failed" / export.name).exists():
                    raise SystemExit("the export was refused")
                time.sleep(0.2)
            summary = json.loads(done.read_text())
            print(f"history: imported {summary['imported']:,} drinks of {args.records:,} records in "
                  f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            stats = service.client.stats()
            rows.append(measure(service, first, last, args.trials,
                                f"after a {args.records:,}-record Health export ({stats['stored']:,} changes)"))
        finally:
            service.stop()
    print(f"{'':58} {'service':>10} {'sqlite3':>10} {'ratio':>7}")
    for r in rows:
        print(f"{r['figure']:58} {r['service_s'] * 1000:>8.1f}ms {r['sqlite3_s'] * 1000:>8.1f}ms {r['ratio']:>7.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
