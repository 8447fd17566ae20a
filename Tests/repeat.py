#!/usr/bin/env python3
"""Runs a pytest suite N times back to back and names every test that failed in any run.

    python3 Tests/repeat.py --runs 5 -- Tests/integration      (make test-repeat N=5)

A flaky test passes when it is run again; only running it again shows it.
Each run writes a JUnit XML report of its own; at the end this prints, for
every test that failed or errored in some run, how many runs it failed in and
the first line of its last failure, then the runs' times. It exits 1 when any
run failed, 0 otherwise. Arguments after `--` go to pytest as they are.
"""
import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import OrderedDict
from pathlib import Path


def outcomes(report):
    """{test id: None when passed or skipped, else the first line of its failure} from a JUnit XML file."""
    results = OrderedDict()
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None:
            results[name] = None
        else:
            text = (problem.get("message") or problem.text or "").strip()
            results[name] = text.splitlines()[0][:200] if text else problem.tag
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="how many runs (default 5)")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs pytest (default: this one)")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default Tests/integration)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    pytest_args = args.pytest_args or ["Tests/integration"]

    failures = OrderedDict()  # test id -> [run numbers, last message]
    runs = []  # (run, seconds, tests, failed, exit code)
    with tempfile.TemporaryDirectory(prefix="ct-repeat-") as folder:
        for run in range(1, args.runs + 1):
            report = Path(folder) / f"run-{run}.xml"
            print(f"run {run} of {args.runs}: pytest {' '.join(pytest_args)}", flush=True)
            started = time.monotonic()
            code = subprocess.call([args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=300",
                                    f"--junitxml={report}", *pytest_args], stdin=subprocess.DEVNULL)
            seconds = time.monotonic() - started
            if not report.exists():
                print(f"run {run}: pytest wrote no report (exit {code})", flush=True)
                runs.append((run, seconds, 0, 0, code))
                failures.setdefault(f"(run {run} as a whole)", [[], ""])[0].append(run)
                continue
            results = outcomes(report)
            failed = {name: message for name, message in results.items() if message is not None}
            for name, message in failed.items():
                entry = failures.setdefault(name, [[], ""])
                entry[0].append(run)
                entry[1] = message
            runs.append((run, seconds, len(results), len(failed), code))
            print(f"run {run}: {len(results)} tests, {len(failed)} failed, {seconds:.0f} s", flush=True)

    print()
    print(f"{'run':>4} {'tests':>6} {'failed':>7} {'seconds':>8} {'exit':>5}")
    for run, seconds, tests, failed, code in runs:
        print(f"{run:>4} {tests:>6} {failed:>7} {seconds:>8.0f} {code:>5}")
    print(f"total {sum(r[1] for r in runs):.0f} s")
    print()
    if not failures:
        print(f"no test failed in any of {args.runs} runs")
        return 0
    print(f"{len(failures)} test(s) failed in some run:")
    for name, (in_runs, message) in failures.items():
        print(f"  {name}: failed in {len(in_runs)} of {args.runs} runs (runs {', '.join(map(str, in_runs))})")
        if message:
            print(f"      {message}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
