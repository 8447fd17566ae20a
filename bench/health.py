#!/usr/bin/env python3
"""Apple Health exports (PROTOCOL.md §5), each beside a baseline of the same
invocation, on one generated export (Tests/integration/health_export.py:
never a person's data), release build, nothing else running:

1. The service imports export.xml through the inbox, beside
   `xmllint --stream --noout` reading the same file (parsing alone: the
   ceiling); the service's peak RSS while it imports.
2. The same export zipped (deflate, Zip64), beside
   `unzip -p export.zip apple_health_export/export.xml | xmllint --stream --noout -`.
3. What a person would use instead, `healthkit-to-sqlite` (PyPI), on a
   200,000-record zip, beside `coffee-tracker import` of the same zip.
4. The two streaming readers on the same XML in one process
   (`coffee-bench health-readers`): libxml2's xmlTextReader and
   FoundationXML's XMLParser on an InputStream. XMLParser crashes (SIGSEGV
   in FoundationXML's attribute-declaration callback, on the NULL default of
   an `#IMPLIED` attribute) on the DTD that Apple writes at the top of every
   export, so both read a copy of the small export without its internal DTD.

    python3 bench/health.py [--records 10000000] [--binary .build/release/coffee-tracker] [--out bench/health.json]

The generated files are kept in .build/bench-health/ for the next run.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from health_export import write_export, zip_export  # noqa: E402


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def timed(argv, **kwargs):
    started = time.monotonic()
    subprocess.run(argv, check=True, **kwargs)
    return time.monotonic() - started


def generated(cache, records, zipped=False):
    """The export of `records` elements, 1% caffeine, all dated in the past."""
    cache.mkdir(parents=True, exist_ok=True)
    xml = cache / f"export-{records}-5s.xml"
    if not xml.exists():
        print(f"health: generating {records:,} records", file=sys.stderr, flush=True)
        write_export(xml.with_suffix(".part"), records=records, caffeine_every=100, invalid=False, seconds_apart=5)
        os.rename(xml.with_suffix(".part"), xml)
    if not zipped:
        return xml
    z = xml.with_suffix(".zip")
    if not z.exists():
        print(f"health: zipping {xml.name}", file=sys.stderr, flush=True)
        zip_export(xml, z.with_suffix(".part"), force_zip64=True)
        os.rename(z.with_suffix(".part"), z)
    return z


def without_dtd(xml):
    """A copy of `xml` without its internal DTD subset (`<!DOCTYPE … [ … ]>`)."""
    out = xml.with_name(xml.stem + ".nodtd.xml")
    if out.exists():
        return out
    with open(xml, "rb") as source, open(out.with_suffix(".part"), "wb") as sink:
        in_dtd = False
        for line in source:
            if line.startswith(b"<!DOCTYPE"):
                in_dtd = not line.rstrip().endswith(b">")
                continue
            if in_dtd:
                in_dtd = not line.startswith(b"]>")
                continue
            sink.write(line)
    os.rename(out.with_suffix(".part"), out)
    return out


def service_import(binary, path):
    """Drops `path` into a fresh service's inbox; seconds until it is in
    processed/ (its one commit durable), and the peak RSS meanwhile."""
    with tempfile.TemporaryDirectory(prefix="ct-health-") as d:
        folder = Path(d)
        (folder / "config.json").write_text(json.dumps({
            "dataDirectory": "data", "inboxDirectory": "inbox", "ingest": {"bind": [f"ipc://{d}/in"]},
            "updates": {"bind": [f"ipc://{d}/up"]}, "query": {"bind": [f"ipc://{d}/q"]}, "http": {"bind": None},
            "model": {"timeZone": "UTC"}, "log": {"level": "warning"}}))
        process = subprocess.Popen([binary, "serve", "--config", str(folder / "config.json")],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not (folder / "data" / "endpoints.json").exists():
                assert process.poll() is None, "the service did not start"
                time.sleep(0.05)
            time.sleep(0.5)
            idle = rss_mb(process.pid)
            link = folder / path.name
            os.link(path, link)  # same file system: no copy
            started = time.monotonic()
            os.rename(link, folder / "inbox" / path.name)
            done = folder / "inbox" / "processed" / (path.name + ".summary.json")
            peak = idle
            while not done.exists():
                assert process.poll() is None, "the service stopped"
                assert not (folder / "inbox" / "failed" / path.name).exists(), "the export was refused"
                peak = max(peak, rss_mb(process.pid))
                time.sleep(0.05)
            seconds = time.monotonic() - started
            summary = json.loads(done.read_text())
            return {"seconds": seconds, "imported": summary["imported"], "records": summary["records"],
                    "idle_rss_mb": idle, "peak_rss_mb": peak}
        finally:
            process.terminate()
            process.wait(60)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--small", type=int, default=200_000, help="records of the export healthkit-to-sqlite reads")
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--out", default=str(ROOT / "bench/health.json"))
    args = parser.parse_args()
    cache = ROOT / ".build" / "bench-health"
    results = {}

    xml = generated(cache, args.records)
    size = xml.stat().st_size
    print(f"health: {xml.name}, {size / 1e9:.2f} GB", file=sys.stderr, flush=True)
    ceiling = timed(["xmllint", "--stream", "--noout", str(xml)])
    ours = service_import(args.binary, xml)
    results["xml"] = {"bytes": size, "xmllint_s": ceiling, "xmllint_mb_per_s": size / 1e6 / ceiling,
                      "service_mb_per_s": size / 1e6 / ours["seconds"], "ratio": ceiling / ours["seconds"], **ours}
    print(json.dumps(results["xml"]), flush=True)

    z = generated(cache, args.records, zipped=True)
    pipe = f"unzip -p '{z}' apple_health_export/export.xml | xmllint --stream --noout -"
    ceiling = timed(["sh", "-c", pipe])
    ours = service_import(args.binary, z)
    results["zip"] = {"bytes": z.stat().st_size, "unzip_xmllint_s": ceiling, "ratio": ceiling / ours["seconds"], **ours}
    print(json.dumps(results["zip"]), flush=True)

    small = generated(cache, args.small, zipped=True)
    with tempfile.TemporaryDirectory(prefix="ct-hk2s-") as d:
        theirs = timed(["healthkit-to-sqlite", str(small), str(Path(d) / "healthkit.db")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ours = service_import(args.binary, small)
    results["healthkit_to_sqlite"] = {"elements": args.small, "healthkit_to_sqlite_s": theirs,
                                      "ratio": theirs / ours["seconds"], **ours}
    print(json.dumps(results["healthkit_to_sqlite"]), flush=True)

    readers = subprocess.run([str(ROOT / ".build/release/coffee-bench"), "health-readers",
                              str(without_dtd(generated(cache, args.small)))],
                             capture_output=True, text=True, check=True)
    results["readers"] = json.loads(readers.stdout.strip().splitlines()[-1])
    print(json.dumps(results["readers"]), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
