"""Apple Health exports in the inbox (docs/protocol.md §5), against the real
service, with exports made by health_export.py: the drinks and their
version-5 UUIDs (computed here by Python's uuid.uuid5), the summary, a second
import and a later export adding only what is new, the zip, files that are
refused, and memory that does not grow with the file."""
import datetime
import json
import os
import shutil
import time
import zipfile
from pathlib import Path

from conftest import Service
from health_export import write_export, zip_export
from test_inbox import failed_error, inbox, processed, wait_until
from test_memory import rss_mb


def drop_file(service, source, name):
    tmp = service.folder / ("." + name + ".writing")
    shutil.copyfile(source, tmp)
    os.rename(tmp, inbox(service) / name)


def stored(service):
    added, _, _, _ = service.all_changes(None, limit=10_000)
    return {d["uuid"]: d for d in added}


def summary(service, name):
    path = inbox(service) / "processed" / (name + ".summary.json")
    wait_until(path.exists, what=f"{name}'s summary")
    return json.loads(path.read_text())


def same_drinks(service, expected):
    held = stored(service)
    assert set(held) == {d["uuid"] for d in expected}
    for d in expected:
        got = held[d["uuid"]]
        assert abs(got["mgCaffeine"] - d["mgCaffeine"]) < 1e-9, (got, d)
        when = datetime.datetime.fromisoformat(got["date"].replace("Z", "+00:00"))
        assert when == d["date"] and got["source"] == d["source"]


def test_an_export_becomes_its_caffeine_drinks_with_a_summary(service, tmp_path):
    xml = tmp_path / "export.xml"
    expected, counts = write_export(xml, records=600)
    drop_file(service, xml, "export.xml")
    wait_until(lambda: processed(service, "export.xml"), what="the export to be imported")
    same_drinks(service, expected)
    s = summary(service, "export.xml")
    assert (s["records"], s["caffeineRecords"], s["imported"], s["duplicates"], s["skippedTotal"]) == (
        counts["records"], counts["caffeineRecords"], len(expected), 0, counts["skipped"])
    assert len(s["skipped"]) == 2 and all(k["line"] > 50 for k in s["skipped"])
    assert "mgCaffeine" in s["skipped"][0]["reason"] and "unit" in s["skipped"][1]["reason"], s["skipped"]
    # Again, zipped: nothing new.
    zipped = tmp_path / "export.zip"
    zip_export(xml, zipped)
    drop_file(service, zipped, "export.zip")
    wait_until(lambda: processed(service, "export.zip"), what="the zip to be imported")
    s = summary(service, "export.zip")
    assert s["imported"] == 0 and s["duplicates"] == len(expected)
    assert len(stored(service)) == len(expected)


def test_a_later_export_holding_the_earlier_one_adds_only_the_new_records(service, tmp_path):
    first, _ = write_export(tmp_path / "a.xml", records=300, invalid=False)
    later, _ = write_export(tmp_path / "b.xml", records=600, invalid=False)  # records 0..599: 0..299 are the first's
    assert {d["uuid"] for d in first} <= {d["uuid"] for d in later}
    drop_file(service, tmp_path / "a.xml", "a.xml")
    wait_until(lambda: processed(service, "a.xml"))
    zip_export(tmp_path / "b.xml", tmp_path / "b.zip", force_zip64=True)
    drop_file(service, tmp_path / "b.zip", "b.zip")
    wait_until(lambda: processed(service, "b.zip"))
    s = summary(service, "b.zip")
    assert s["imported"] == len(later) - len(first) and s["duplicates"] == len(first)
    same_drinks(service, later)


def test_broken_and_foreign_files_are_refused_with_their_reason(service, tmp_path):
    xml = tmp_path / "export.xml"
    write_export(xml, records=200)
    zip_export(xml, tmp_path / "whole.zip")
    data = (tmp_path / "whole.zip").read_bytes()
    (tmp_path / "truncated.zip").write_bytes(data[: len(data) // 2])
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("notes/export.txt", "hello")
    text = xml.read_text()
    (tmp_path / "malformed.xml").write_text(text.replace("</HealthData>", "</HealthDat>"))
    (tmp_path / "foreign.xml").write_text('<?xml version="1.0"?>\n<plist version="1.0"><array/></plist>\n')
    cases = {"truncated.zip": "zip", "other.zip": "no apple_health_export/export.xml",
             "malformed.xml": "not well-formed XML", "foreign.xml": "not an Apple Health export"}
    for name in cases:
        drop_file(service, tmp_path / name, name)
    for name, reason in cases.items():
        error = failed_error(service, name)
        assert reason in error["error"], (name, error)
    assert "line" in failed_error(service, "malformed.xml")
    assert not stored(service), "a refused export stored something"


def test_memory_stays_flat_while_a_200_mb_export_is_imported(service, tmp_path):
    xml = tmp_path / "big.xml"
    expected, _ = write_export(xml, records=1_000_000, caffeine_every=100, invalid=False)
    size = xml.stat().st_size
    assert size > 150_000_000, size
    idle = rss_mb(service.process.pid)
    drop_file(service, xml, "big.xml")
    peak = idle
    deadline = time.time() + 300
    while not processed(service, "big.xml"):
        assert time.time() < deadline, "the export was not imported in 5 minutes"
        peak = max(peak, rss_mb(service.process.pid))
        time.sleep(0.05)
    assert summary(service, "big.xml")["imported"] == len(expected)
    assert peak - idle < 50, f"RSS grew from {idle:.0f} MB to {peak:.0f} MB while importing {size / 1e6:.0f} MB"


def test_the_import_command_streams_an_export_and_ends_with_its_summary(service, tmp_path):
    from conftest import run_on_terminal
    xml = tmp_path / "export.xml"
    expected, counts = write_export(xml, records=3000)
    zip_export(xml, tmp_path / "export.zip")
    p = service.run_cli("import", str(tmp_path / "export.zip"))
    assert p.returncode == 0, p.stderr
    assert (f"{counts['records']} records, {counts['caffeineRecords']} of caffeine: added {len(expected)}, "
            f"duplicates 0, skipped {counts['skipped']}") in p.stdout, p.stdout
    assert "skipped line" in p.stdout and "mgCaffeine" in p.stdout
    same_drinks(service, expected)
    code, shown = run_on_terminal(["import", str(xml), "--config", str(service.config_path)], terminal="stderr")
    assert code == 0 and "bytes" in shown and "100%" in shown, shown[-300:]  # the bar, on stderr
