"""docs/protocol.md §5 and §15: CSV out and back in. A source a spreadsheet
would run is exported behind its `'` and comes back whole; an export dropped
into another service's inbox makes an equal store; another app's `date,mg`
CSV imported twice adds nothing; a bad row on line 7 fails the whole file,
naming line 7, with nothing stored."""
import csv
import io
import uuid
import time
from datetime import datetime, timedelta

from conftest import Service, wait_until
from test_api import call
from test_inbox import drop, failed_error, processed


def when(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def fields(d):
    return (d["uuid"], d["version"], d["date"], d["mgCaffeine"], d.get("type"), d.get("source"))


def test_an_export_dropped_into_another_services_inbox_makes_an_equal_store(folder):
    a = Service(folder + "/a", {"model": {"timeZone": "Europe/Berlin"}}).start()
    b = Service(folder + "/b").start()
    try:
        drinks = [
            {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 64.5, "date": "2025-07-01T12:00:00.250Z", "version": 3,
             "type": "singleEspresso", "source": '=HYPERLINK("http://x","y")'},
            {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 96, "date": "2025-10-26T01:30:00Z",
             "source": "say \"hi\", then\nleave"},
            {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 28, "date": "2025-12-01T08:00:00Z", "type": "greenTea",
             "source": "@home"},
            {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 47, "date": "2025-12-02T08:00:00Z", "type": "blackTea",
             "source": "'quoted"},
        ]
        assert a.request({"op": "add", "drinks": drinks})["added"] == 4
        status, _, body = call(a, "GET", "/api/v1/export.csv")
        assert status == 200
        rows = {r["uuid"]: r for r in csv.DictReader(io.StringIO(body, newline=""))}
        # A spreadsheet sees text, not a formula: the `'` before it.
        assert rows[drinks[0]["uuid"]]["source"] == "'" + drinks[0]["source"]
        assert rows[drinks[2]["uuid"]]["source"] == "'@home" and rows[drinks[3]["uuid"]]["source"] == "''quoted"
        drop(b, "export.csv", body)
        wait_until(lambda: processed(b, "export.csv"), what="the export imported")
        assert sorted(map(fields, b.all_changes()[0])) == sorted(map(fields, a.all_changes()[0]))
    finally:
        a.stop()
        b.stop()


def test_another_apps_csv_imported_twice_adds_nothing(service):
    text = "Date,Caffeine (mg),Drink\n2025-12-31 08:00,95,smallCoffee\n2025-12-31 13:15:30,40,Latte\n\n"
    drop(service, "other-app.csv", text)
    wait_until(lambda: processed(service, "other-app.csv"), what="the first drop imported")
    first = service.all_changes()[0]
    # No offset: the person's zone (UTC here).
    assert sorted((when(d["date"]), d["mgCaffeine"], d.get("type")) for d in first) == [
        (when("2025-12-31T08:00:00Z"), 95, "smallCoffee"), (when("2025-12-31T13:15:30Z"), 40, None)]
    drop(service, "again.csv", text)
    wait_until(lambda: processed(service, "again.csv"), what="the second drop imported")
    assert service.all_changes()[0] == first
    assert service.request({"op": "stats"})["duplicates"] == 2


def test_a_bad_row_on_line_7_fails_the_file_and_stores_nothing(service):
    rows = "".join(f"2025-12-3{i % 2}T0{i}:00:00Z,{10 * i}\n" for i in range(1, 6))
    drop(service, "bad.csv", "date,mg\n" + rows + "2025-12-31T07:00:00Z,a lot\n2025-12-31T08:00:00Z,5\n")
    error = failed_error(service, "bad.csv")
    assert error["line"] == 7 and error["field"] == "mgCaffeine" and "line 7" in error["error"], error
    assert service.all_changes()[0] == []


def test_a_large_csv_streams_with_bounded_memory_and_shows_its_progress_in_stats(service):
    from test_memory import rss_mb
    n = 400_000
    start = datetime(2020, 1, 1)
    text = "date,mg\n" + "".join(f"{(start + timedelta(minutes=i)).isoformat()}Z,{40 + i % 60}\n" for i in range(n))
    size = len(text)
    before = rss_mb(service.process.pid)
    seen, peak = [], before
    drop(service, "large.csv", text)
    deadline = time.time() + 240
    while not processed(service, "large.csv"):
        assert time.time() < deadline, "the large CSV was not imported"
        importing = service.request({"op": "stats"})["importing"]
        if importing:
            seen.append(importing)
        peak = max(peak, rss_mb(service.process.pid))
        time.sleep(0.01)
    # After it, the store announces the file's changes a page at a time before it answers stats's outbox read.
    assert service.request({"op": "stats"}, timeout_ms=120_000)["importing"] is None
    # Seen under way: its name and size, part of it read.
    assert any(p["file"] == "large.csv" and p["bytes"] == size and 0 < p["read"] < size and p["changesRead"] > 0
               for p in seen), seen[:3]
    # The store's page cache (32 MB) fills in one file's transaction; beside it, a few batches of 5,000 drinks.
    assert peak - before < 60, f"RSS grew {peak - before:.1f} MB importing a {size / 1e6:.0f} MB CSV"
    assert service.request({"op": "stats"})["stored"] == n
