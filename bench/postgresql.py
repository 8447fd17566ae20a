#!/usr/bin/env python3
"""A store in PostgreSQL (docs/protocol.md §11), side by side in one run,
with the shared load generator (../shared/bench/loadgen.c):

- coffee-tracker on its SQLite file (the default store);
- coffee-tracker on PostgreSQL;
- what a user writes instead: a Python worker with pyzmq and psycopg doing
  the same inserts on the same server (bench/tools/peer_psycopg.py);
- two coffee-tracker services on one database, each given half the events
  by a load generator of its own, at once (their rate: all events over the
  slower one's time).

Scenarios: full speed (single-event messages) and 1,000 events/s (p99 and
CPU). Each trial gets a fresh database on one PostgreSQL server of the
bench's own (Tests/postgres/server.sh: a socket folder, fsync on,
synchronous_commit on), alternated across workers; medians and ratios go
to bench/postgresql.json.

    python3 bench/postgresql.py [--trials 3] [--paced-trials 5] [--quick] [--on FOLDER] [--only TEXT]
                                [--events N] [--baseline OLD-BINARY [--without-peers]]

With --baseline, an older build runs on PostgreSQL as the worker
"baseline, PostgreSQL", alternated with the rest, and each scenario's ratios
include this build's against it (--without-peers: only the two builds on
PostgreSQL). --events sets the full-speed size (40,000 by default: a run of
under a second, where the start weighs; 200,000 shows the steady rate).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from peers import against_baseline, build, cpu_seconds, stop  # noqa: E402

SERVER = ROOT / "Tests" / "postgres" / "server.sh"


class Server:
    def __init__(self, parent):
        self.root = Path(tempfile.mkdtemp(prefix="ct-bench-pg-", dir=parent))
        os.chmod(self.root, 0o755)
        out = subprocess.run([str(SERVER), "start", str(self.root / "server"), "max_connections=100"],
                             capture_output=True, text=True, check=True)
        self.conninfo = out.stdout.strip()

    def database(self):
        name = "bench_" + uuid.uuid4().hex[:12]
        subprocess.run(["psql", "-X", "-q", "-c", f"CREATE DATABASE {name}", f"{self.conninfo} dbname=postgres"],
                       check=True)
        return f"{self.conninfo} dbname={name}"

    def stop(self):
        subprocess.run([str(SERVER), "stop", str(self.root / "server")], capture_output=True)
        subprocess.run(["rm", "-rf", str(self.root)])


def service_argv(binary, folder, conninfo):
    config = {"dataDirectory": "data", "inboxDirectory": "inbox", "ingest": {"bind": [f"ipc://{folder}/in"]},
              "updates": {"bind": [f"ipc://{folder}/up"]}, "query": {"bind": [f"ipc://{folder}/q"]},
              "http": {"bind": None}, "model": {"timeZone": "UTC"}, "log": {"level": "warning"}}
    if conninfo:
        config["store"] = {"postgresql": {"conninfo": conninfo}}
    (folder / "config.json").write_text(json.dumps(config))
    return [binary, "serve", "--config", str(folder / "config.json")]


def launch(argv, folder):
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=open(folder / "stderr.log", "w"))
    deadline = time.time() + 30
    while not ((folder / "in").exists() and (folder / "up").exists()):
        if time.time() > deadline or process.poll() is not None:
            raise SystemExit(f"{argv[0]} did not start: {(folder / 'stderr.log').read_text()[-2000:]}")
        time.sleep(0.02)
    time.sleep(0.3)
    return process


def trial(worker, scenario, loadgen, binary, server, baseline=None):
    with tempfile.TemporaryDirectory(prefix="ct-bench-pg-", dir=server.root.parent) as d:
        base = Path(d)
        conninfo = server.database() if worker != "coffee-tracker, SQLite" else None
        if worker == "baseline, PostgreSQL":
            binary = baseline
        count = 2 if worker == "two services, one database" else 1
        folders = [base / f"s{k}" for k in range(count)]
        processes = []
        for folder in folders:
            folder.mkdir()
            if worker == "psycopg worker":
                argv = [sys.executable, str(ROOT / "bench/tools/peer_psycopg.py"), f"ipc://{folder}/in",
                        f"ipc://{folder}/up", conninfo]
            else:
                argv = service_argv(binary, folder, conninfo)
            processes.append(launch(argv, folder))
        try:
            before = sum(cpu_seconds(p.pid) for p in processes)
            n = scenario["n"] // count
            rate = scenario["rate"] / count if scenario["rate"] else 0
            results = [None] * count

            def drive(k):
                args = [str(loadgen), f"ipc://{folders[k]}/in", f"ipc://{folders[k]}/up", str(n), "1"]
                if rate:
                    args.append(str(rate))
                out = subprocess.run(args, capture_output=True, text=True, timeout=900)
                results[k] = json.loads(out.stdout.strip().splitlines()[-1])

            started = time.time()
            threads = [threading.Thread(target=drive, args=(k,)) for k in range(count)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.time() - started
            cpu = sum(cpu_seconds(p.pid) for p in processes) - before
            return {"events_per_s": (n * count) / max(n / r["events_per_s"] for r in results) if count > 1
                    else results[0]["events_per_s"],
                    "lat_ms_p99": max(r["lat_ms_p99"] for r in results),
                    "lost": sum(r["lost"] for r in results), "cpu_per_100k": cpu / (n * count) * 100_000,
                    "elapsed_s": elapsed}
        finally:
            stop(processes)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--paced-trials", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--out", default=str(ROOT / "bench/postgresql.json"))
    parser.add_argument("--on", default="/var/tmp",
                        help="the folder of the server's data and the SQLite stores (/dev/shm: without the disk's fsyncs, "
                             "what the code costs)")
    parser.add_argument("--only", help="the scenarios whose name contains this text")
    parser.add_argument("--events", type=int, default=40_000, help="events of a full-speed trial")
    parser.add_argument("--baseline", help="an older coffee-tracker binary, run on PostgreSQL alternated with the rest")
    parser.add_argument("--without-peers", action="store_true",
                        help="with --baseline: only this build and the baseline, both on PostgreSQL")
    args = parser.parse_args()
    if args.without_peers and not args.baseline:
        raise SystemExit("--without-peers needs --baseline: there would be nothing to compare")
    loadgen, _ = build(ROOT / ".build/peers")
    q = 0.25 if args.quick else 1
    scenarios = [
        {"name": "full speed, single-event messages", "n": int(args.events * q), "rate": 0},
        {"name": "1,000 events/s", "n": int(10_000 * q), "rate": 1000},
    ]
    if args.only:
        scenarios = [s for s in scenarios if args.only in s["name"]]
    workers = ["coffee-tracker, SQLite", "coffee-tracker, PostgreSQL", "psycopg worker", "two services, one database"]
    if args.without_peers:
        workers = ["coffee-tracker, PostgreSQL"]
    if args.baseline:
        workers.append("baseline, PostgreSQL")
    server = Server(args.on)
    results = {}
    try:
        for scenario in scenarios:
            trials = args.paced_trials if scenario["rate"] else args.trials
            for t in range(trials):
                for worker in workers if t % 2 == 0 else reversed(workers):
                    if scenario["rate"] and worker == "two services, one database":
                        continue  # paced, two services share the rate: nothing to compare
                    print(f"postgresql: {scenario['name']}, {worker}, trial {t + 1} of {trials}", file=sys.stderr,
                          flush=True)
                    results.setdefault(scenario["name"], {}).setdefault(worker, []).append(
                        trial(worker, scenario, loadgen, args.binary, server, args.baseline))
    finally:
        server.stop()
    table = []
    print(f"{'scenario':36} {'worker':28} {'events/s':>10} {'p99 ms':>8} {'CPU-s/100k':>11} {'lost':>5}")
    for scenario in scenarios:
        rows = results[scenario["name"]]
        medians = {w: {k: statistics.median(r[k] for r in runs) for k in ("events_per_s", "lat_ms_p99", "cpu_per_100k",
                                                                          "lost")}
                   for w, runs in rows.items()}
        for w, m in medians.items():
            print(f"{scenario['name']:36} {w:28} {m['events_per_s']:10.0f} {m['lat_ms_p99']:8.2f} "
                  f"{m['cpu_per_100k']:11.2f} {m['lost']:5.0f}")
        pg = medians["coffee-tracker, PostgreSQL"]
        ratios = {}
        if not args.without_peers:
            lite, py = medians["coffee-tracker, SQLite"], medians["psycopg worker"]
            ratios = {"PostgreSQL vs psycopg, rate": pg["events_per_s"] / py["events_per_s"],
                      "PostgreSQL vs psycopg, p99": pg["lat_ms_p99"] / py["lat_ms_p99"],
                      "PostgreSQL vs SQLite, rate": pg["events_per_s"] / lite["events_per_s"],
                      "PostgreSQL vs SQLite, p99": pg["lat_ms_p99"] / lite["lat_ms_p99"]}
        if args.baseline:
            ratios.update(against_baseline(pg, medians["baseline, PostgreSQL"]))
        if "two services, one database" in medians:
            ratios["two services vs one, rate"] = (medians["two services, one database"]["events_per_s"]
                                                   / pg["events_per_s"])
        print(f"{'':36} {'ratios':28} " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
        table.append({"scenario": scenario["name"], "medians": medians, "ratios": ratios, "runs": rows})
    Path(args.out).write_text(json.dumps(table, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
