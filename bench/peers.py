#!/usr/bin/env python3
"""Side by side, in one run, with one compiled load generator: coffee-tracker,
what a user might write instead (../shared/bench/peer_worker.py: pyzmq and
sqlite3 in one Python thread) and the floor of the work (peer_c.c: one C
thread, no validation, no model). Each scenario alternates the three on
fresh files, TRIALS times; the table shows medians and ratios against the
peers, the figures go to bench/peers.json.

    python3 bench/peers.py [--trials 3] [--paced-trials 5] [--quick] [--only TEXT] [--binary .build/release/coffee-tracker]
                           [--baseline OLD-BINARY [--without-peers]]

With --baseline, an older build of coffee-tracker runs as a fourth worker,
alternated with the rest, and each scenario's ratios include this build's
against it: how a change moved the live path, measured in one invocation.

Beside each worker's CPU, the table gives the load generator's (`loadgen`,
CPU-s per 100k events) and `cores`: what the two kept busy at the measured
rate, of the machine's two cores. At full speed it says how near the
machine's ceiling a rate is, whoever's CPU fills it.

A paced scenario (1,000 or 10,000 events/s) takes more trials than a full-speed
one: its p99 and CPU sit close to the peers', and one stall of the disk moves
a median of three.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "bench"


def build(out):
    out.mkdir(parents=True, exist_ok=True)
    for name, libs in (("loadgen", ["-lzmq"]), ("peer_c", ["-lzmq", "-lsqlite3"])):
        target = out / name
        source = SHARED / f"{name}.c"
        if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
            subprocess.run(["cc", "-O2", "-o", str(target), str(source), *libs], check=True)
    return out / "loadgen", out / "peer_c"


def run_loadgen(loadgen, ingest, updates, n, batch=1, rate=0, timeout=900):
    """The shared load generator: `n` events on `ingest`, each timed to its
    `changes` on `updates`; its JSON summary."""
    p = subprocess.run([str(loadgen), ingest, updates, str(n), str(batch), str(rate)], capture_output=True, text=True,
                       timeout=timeout)
    return json.loads(p.stdout.strip().splitlines()[-1])


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(worker, folder, binaries, peer_c):
    ingest, updates = f"ipc://{folder}/in", f"ipc://{folder}/up"
    if worker in binaries:
        binary = binaries[worker]
        (folder / "config.json").write_text(json.dumps({
            "dataDirectory": "data", "inboxDirectory": "inbox", "ingest": {"bind": [ingest]},
            "updates": {"bind": [updates]}, "query": {"bind": [f"ipc://{folder}/q"]}, "http": {"bind": None},
            "model": {"timeZone": "UTC"}, "log": {"level": "warning"}}))
        argv = [binary, "serve", "--config", str(folder / "config.json")]
    elif worker == "python peer":
        argv = [sys.executable, str(SHARED / "peer_worker.py"), ingest, updates, str(folder / "peer.db")]
    else:
        argv = [str(peer_c), ingest, updates, str(folder / "peer.db")]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while not (Path(f"{folder}/in").exists() and Path(f"{folder}/up").exists()):
        if time.time() > deadline or process.poll() is not None:
            raise SystemExit(f"{worker} did not start")
        time.sleep(0.02)
    time.sleep(0.3)
    return process, ingest, updates


def stop(processes, timeout=60):
    """Terminates each process and waits for it; kills one that outlasts `timeout`."""
    for p in processes:
        p.terminate()
    for p in processes:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def against_baseline(medians, baseline):
    """A build's medians against an older build's, run alternated with it
    in the same invocation: rate, p99 and CPU (also bench/postgresql.py's)."""
    return {"throughput vs baseline": medians["events_per_s"] / baseline["events_per_s"],
            "p99 vs baseline": medians["lat_ms_p99"] / baseline["lat_ms_p99"],
            "CPU vs baseline": medians["cpu_per_100k"] / baseline["cpu_per_100k"]}


def trial(worker, scenario, loadgen, peer_c, binaries):
    with tempfile.TemporaryDirectory(prefix="ct-peers-") as d:
        subprocess.run(["sync"])
        folder = Path(d)
        process, ingest, updates = start(worker, folder, binaries, peer_c)
        try:
            before = cpu_seconds(process.pid)
            env = dict(os.environ)
            if scenario.get("age"):
                env["LOADGEN_AGE_S"] = str(scenario["age"])
            args = [str(loadgen), ingest, updates, str(scenario["n"]), str(scenario["batch"])]
            if scenario["rate"]:
                args.append(str(scenario["rate"]))
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            result = json.loads(p.stdout.strip().splitlines()[-1])
            cpu = cpu_seconds(process.pid) - before
            # The load generator is the one child reaped meanwhile (the worker still runs).
            loadgen_cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
            result["cpu_per_100k"] = cpu / scenario["n"] * 100_000
            result["loadgen_cpu_per_100k"] = loadgen_cpu / scenario["n"] * 100_000
            # Cores the worker and the load generator kept busy at the rate measured:
            # at full speed, how near the machine's two cores the pair ran.
            result["cores_busy"] = (cpu + loadgen_cpu) / scenario["n"] * result["events_per_s"]
            return result
        finally:
            stop([process])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3, help="trials of each full-speed scenario")
    parser.add_argument("--paced-trials", type=int, default=5, help="trials of each paced scenario (1,000 or 10,000 events/s)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--out", default=str(ROOT / "bench/peers.json"))
    parser.add_argument("--only", help="run the scenarios whose name contains this text (e.g. '1,000 events/s, drinks dated now')")
    parser.add_argument("--baseline", help="an older coffee-tracker binary, run alternated as the worker 'baseline'")
    parser.add_argument("--without-peers", action="store_true", help="with --baseline: leave the Python and C peers out")
    args = parser.parse_args()
    if args.without_peers and not args.baseline:
        raise SystemExit("--without-peers needs --baseline: there would be nothing to compare")
    if not SHARED.exists():
        raise SystemExit(f"{SHARED} is not here: the peers live in the shared folder beside the project")
    loadgen, peer_c = build(ROOT / ".build/peers")
    q = 0.25 if args.quick else 1
    scenarios = [
        {"name": "full speed, single-event messages", "n": int(200_000 * q), "batch": 1, "rate": 0},
        {"name": "full speed, 10-event messages", "n": int(200_000 * q), "batch": 10, "rate": 0},
        {"name": "1,000 events/s, drinks dated now", "n": int(10_000 * q), "batch": 1, "rate": 1000},
        {"name": "1,000 events/s, drinks dated ten days back", "n": int(10_000 * q), "batch": 1, "rate": 1000,
         "age": 864000},
        {"name": "10,000 events/s, drinks dated now", "n": int(50_000 * q), "batch": 1, "rate": 10000},
    ]
    if args.only:
        scenarios = [s for s in scenarios if args.only in s["name"]]
        if not scenarios:
            raise SystemExit(f"no scenario's name contains {args.only!r}")
    binaries = {"coffee-tracker": args.binary}
    workers = ["coffee-tracker"] + ([] if args.without_peers else ["python peer", "C peer"])
    if args.baseline:
        binaries["baseline"] = args.baseline
        workers.append("baseline")
    results = {}
    for scenario in scenarios:
        trials = args.paced_trials if scenario["rate"] else args.trials
        for t in range(trials):
            for worker in workers if t % 2 == 0 else reversed(workers):
                print(f"peers: {scenario['name']}, {worker}, trial {t + 1} of {trials}", file=sys.stderr, flush=True)
                results.setdefault(scenario["name"], {}).setdefault(worker, []).append(
                    trial(worker, scenario, loadgen, peer_c, binaries))
    table = []
    keys = ("events_per_s", "lat_ms_p99", "cpu_per_100k", "loadgen_cpu_per_100k", "cores_busy", "lost")
    print(f"{'scenario':44} {'worker':15} {'events/s':>10} {'p99 ms':>8} {'CPU-s/100k':>11} {'loadgen':>8} {'cores':>6} "
          f"{'lost':>5}")
    for scenario in scenarios:
        rows = results[scenario["name"]]
        medians = {w: {k: statistics.median(r[k] for r in rows[w]) for k in keys} for w in workers}
        for w in workers:
            m = medians[w]
            print(f"{scenario['name']:44} {w:15} {m['events_per_s']:10.0f} {m['lat_ms_p99']:8.2f} {m['cpu_per_100k']:11.2f} "
                  f"{m['loadgen_cpu_per_100k']:8.2f} {m['cores_busy']:6.2f} {m['lost']:5.0f}")
        ct = medians["coffee-tracker"]
        ratios = {}
        if not args.without_peers:
            py, c = medians["python peer"], medians["C peer"]
            ratios = {"throughput vs python": ct["events_per_s"] / py["events_per_s"],
                      "throughput vs C": ct["events_per_s"] / c["events_per_s"],
                      "p99 vs python": ct["lat_ms_p99"] / py["lat_ms_p99"],
                      "CPU vs C": ct["cpu_per_100k"] / c["cpu_per_100k"]}
        if args.baseline:
            ratios.update(against_baseline(ct, medians["baseline"]))
        print(f"{'':44} {'ratios':15} " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
        table.append({"scenario": scenario["name"], "trials": len(rows["coffee-tracker"]), "medians": medians, "ratios": ratios,
                      "runs": rows})
    Path(args.out).write_text(json.dumps(table, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
