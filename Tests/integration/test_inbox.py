"""docs/protocol.md §5: the watched inbox folder, with real files."""
import json
import os
import plistlib
import datetime
import time
import uuid

from conftest import Service, drink, wait_until  # noqa: F401  (wait_until: imported from here by others)


def inbox(service):
    return service.folder / "inbox"


def drop(service, name, content):
    """Writes elsewhere, then renames in, as docs/protocol.md §5 advises."""
    tmp = service.folder / ("." + name + ".writing")
    tmp.write_bytes(content if isinstance(content, bytes) else content.encode())
    os.rename(tmp, inbox(service) / name)


def processed(service, name):
    return (inbox(service) / "processed" / name).exists()


def failed_error(service, name):
    path = inbox(service) / "failed" / (name + ".error.json")
    wait_until(path.exists, what=f"{name} to fail")
    assert (inbox(service) / "failed" / name).exists() or (inbox(service) / "failed" / name).is_symlink()
    return json.loads(path.read_text())


def uuids(service):
    added, _, _, _ = service.all_changes()
    return {a["uuid"] for a in added}


def test_every_format_imports(service):
    a, b, c, d, e = (drink() for _ in range(5))
    drop(service, "array.json", json.dumps([a]))
    drop(service, "dict.json", json.dumps({"drinks": [b], "deleted": []}))
    drop(service, "lines.jsonl", json.dumps(c) + "\n\n" + json.dumps(d) + "\n" + json.dumps({"delete": a["uuid"]}) + "\n")
    watch_drinks = [{"mgCaffeine": 64.0, "date": datetime.datetime.utcnow() - datetime.timedelta(hours=1),
                     "uuid": str(uuid.uuid4()).upper()}]
    drop(service, "CoffeeTracker.plist", plistlib.dumps(watch_drinks, fmt=plistlib.FMT_BINARY))
    drop(service, "export.plist", plistlib.dumps({"drinks": [dict(e, date=datetime.datetime.utcnow())]}, fmt=plistlib.FMT_XML))
    drop(service, "more.ndjson", json.dumps(drink()) + "\n")
    for name in ("array.json", "dict.json", "lines.jsonl", "CoffeeTracker.plist", "export.plist", "more.ndjson"):
        wait_until(lambda: processed(service, name), what=name)
    stored = uuids(service)
    assert {b["uuid"], c["uuid"], d["uuid"], e["uuid"], watch_drinks[0]["uuid"]} <= stored
    assert a["uuid"] not in stored  # deleted by the JSON Lines file
    stats = service.request({"op": "stats"})
    assert stats["filesProcessed"] == 6 and stats["filesFailed"] == 0


def test_the_watch_apps_own_plist_imports_as_it_is(service):
    vectors = service.folder.parent / "unused"
    from conftest import VECTORS
    drop(service, "CoffeeTracker.plist", (VECTORS / "CoffeeTracker.plist").read_bytes())
    wait_until(lambda: processed(service, "CoffeeTracker.plist"))
    assert "6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C01" in uuids(service)


def test_refusals_each_get_an_error_file_and_nothing_is_stored(service):
    good = drink()
    drop(service, "bad-element.json", json.dumps([good, drink(mg=-2)]))
    err = failed_error(service, "bad-element.json")
    assert err["index"] == 1 and err["field"] == "mgCaffeine" and err["file"] == "bad-element.json"
    assert "must be > 0" in err["error"] and err["at"].endswith("Z")
    drop(service, "bad-line.jsonl", json.dumps(drink()) + "\n" + "{oops\n")
    err = failed_error(service, "bad-line.jsonl")
    assert err["line"] == 2
    drop(service, "not-utf8.json", b'[{"uuid": "\xff\xfe"}]')
    assert "UTF-8" in failed_error(service, "not-utf8.json")["error"]
    drop(service, "deep.json", "[" * 100000 + "]" * 100000)
    failed_error(service, "deep.json")
    drop(service, "notes.txt", "hello")
    assert "unknown file type" in failed_error(service, "notes.txt")["error"]
    target = service.folder / "real.json"
    target.write_text(json.dumps([drink()]))
    os.symlink(target, inbox(service) / "link.json")
    assert "symbolic link" in failed_error(service, "link.json")["error"]
    os.mkfifo(service.folder / "pipe.json")
    os.rename(service.folder / "pipe.json", inbox(service) / "pipe.json")
    assert "FIFO" in failed_error(service, "pipe.json")["error"]
    (service.folder / "dir.json").mkdir()
    os.rename(service.folder / "dir.json", inbox(service) / "dir.json")
    assert "directories" in failed_error(service, "dir.json")["error"]
    assert good["uuid"] not in uuids(service)
    assert service.request({"op": "ping"})["ok"]  # still running
    assert service.request({"op": "stats"})["filesFailed"] == 8


def test_too_large_file_is_refused(folder):
    s = Service(folder, {"limits": {"maxFileBytes": 1000}}).start()
    try:
        drop(s, "big.json", json.dumps([drink() for _ in range(50)]))
        assert "maxFileBytes" in failed_error(s, "big.json")["error"]
    finally:
        s.stop()


def test_temp_and_dot_files_wait_until_renamed(service):
    names = [".hidden.json", "x.json.tmp", "y.json.part", "z.json.partial", "w.json~"]
    for name in names:
        (inbox(service) / name).write_text(json.dumps([drink()]))
    marker = drink()
    drop(service, "marker.json", json.dumps([marker]))
    wait_until(lambda: processed(service, "marker.json"))
    for name in names:
        assert (inbox(service) / name).exists()
    os.rename(inbox(service) / "x.json.tmp", inbox(service) / "x.json")
    wait_until(lambda: processed(service, "x.json"))


def test_slow_writer_in_place_is_imported_once_closed_and_complete(service):
    drinks = [drink() for _ in range(20)]
    text = json.dumps(drinks)
    with open(inbox(service) / "slow.json", "w") as f:
        for i in range(0, len(text), 100):
            f.write(text[i:i + 100])
            f.flush()
            time.sleep(0.01)
    wait_until(lambda: processed(service, "slow.json"))
    assert {d["uuid"] for d in drinks} <= uuids(service)
    assert not (inbox(service) / "failed" / "slow.json").exists()


def test_same_content_twice_adds_nothing(service):
    content = json.dumps([drink(), drink()])
    drop(service, "a.json", content)
    wait_until(lambda: processed(service, "a.json"))
    anchor = service.request({"op": "ping"})["anchor"]
    drop(service, "a.json", content)
    wait_until(lambda: processed(service, "a.json.1"))
    assert service.request({"op": "ping"})["anchor"] == anchor
    assert service.request({"op": "stats"})["duplicates"] == 2


def test_files_present_at_start_and_a_burst_are_all_imported(folder):
    s = Service(folder)
    (s.folder / "inbox").mkdir()
    expected = set()
    old = time.time() - 10
    for i in range(200):
        d = drink(offset_s=-i)
        expected.add(d["uuid"])
        path = s.folder / "inbox" / f"start-{i:03}.json"
        path.write_text(json.dumps([d]))
        os.utime(path, (old, old))
    s.start()
    try:
        for i in range(1000):
            d = drink(offset_s=-i)
            expected.add(d["uuid"])
            drop(s, f"burst-{i:04}.jsonl", json.dumps(d) + "\n")
        wait_until(lambda: len(list((s.folder / "inbox" / "processed").iterdir())) == 1200, timeout=120,
                   what="1200 files processed")
        left = [p.name for p in (s.folder / "inbox").iterdir() if p.name not in ("processed", "failed")]
        assert left == []
        assert expected <= uuids(s)
    finally:
        s.stop()


def test_inbox_folder_deleted_is_recreated_and_watched(service):
    import shutil
    shutil.rmtree(inbox(service))
    wait_until(lambda: (inbox(service) / "processed").exists(), what="inbox recreated")
    d = drink()
    drop(service, "after.json", json.dumps([d]))
    wait_until(lambda: processed(service, "after.json"))
    assert "recreating" in service.log_path.read_text()


def test_import_command_through_the_service(service):
    import subprocess
    from conftest import BINARY
    drinks = [drink(offset_s=-i) for i in range(4500)]
    path = service.folder / "export.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in drinks) + json.dumps({"delete": drinks[0]["uuid"]}) + "\n")
    p = service.run_cli("import", str(path))
    assert p.returncode == 0, p.stderr
    assert "added 4500, duplicates 0, deleted 1" in p.stdout
    assert len(uuids(service)) == 4499
    again = service.run_cli("import", str(path))
    assert "added 0, duplicates 4500" in again.stdout
    bad = service.folder / "bad.json"
    bad.write_text(json.dumps([drink(), {"uuid": "x"}]))
    p = service.run_cli("import", str(bad))
    assert p.returncode == 1 and "element 1" in p.stderr and "uuid" in p.stderr
    # A progress bar on a terminal.
    from conftest import run_on_terminal
    code, shown = run_on_terminal(["import", str(path), "--config", str(service.config_path)], terminal="stderr")
    assert code == 0
    assert "100% 4501/4501" in shown and "[====" in shown


def test_import_refuses_without_a_service(folder):
    import subprocess
    from conftest import BINARY
    path = os.path.join(folder, "a.json")
    with open(path, "w") as f:
        f.write(json.dumps([drink()]))
    p = subprocess.run([BINARY, "import", path, "--query", f"ipc://{folder}/nobody", "--timeout", "0.5"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "not running" in p.stderr


def test_large_json_lines_file_is_one_commit_announced_in_chained_pages(folder):
    from test_bus import subscriber
    # The alerts' rules off: a day of 25,000 drinks would tell the person, in a commit of the outbox's own (§16).
    service = Service(folder, {"alerts": {"dailyLimit": False, "levelOverMg": 0, "sleepThreshold": False,
                                          "bedtime": "off"}}).start()
    sub = subscriber(service, topics=(b"changes",))
    n = 25_000
    base = service.request({"op": "ping"})["anchor"]
    drinks = [drink(offset_s=-i) for i in range(n)]
    drop(service, "large.jsonl", "".join(json.dumps(d) + "\n" for d in drinks))
    wait_until(lambda: processed(service, "large.jsonl"), timeout=120)
    assert service.request({"op": "stats"})["commits"] == 1
    seen, last, pages = set(), base, 0
    while last < base + n:
        topic, body = sub.recv_multipart()
        if topic != b"changes":
            continue
        msg = json.loads(body)
        assert msg["previousAnchor"] == last
        assert len(msg["added"]) <= 5000
        seen.update(a["uuid"] for a in msg["added"])
        last = msg["anchor"]
        pages += 1
    assert pages >= 5 and seen == {d["uuid"] for d in drinks}
    # The model followed by paging, too.
    assert service.request({"op": "model"})["drinksToday"] >= 1
    sub.close()
    service.stop()


def test_shutdown_right_after_a_large_import_still_publishes_every_page(service):
    """SIGTERM as soon as a large file is committed: the drain pages the
    commit out of the store before closing it, so the chain is unbroken."""
    from test_bus import subscriber
    sub = subscriber(service, topics=(b"changes",))
    n = 40_000
    base = service.request({"op": "ping"})["anchor"]
    drop(service, "last.jsonl", "".join(json.dumps(drink(offset_s=-40 * 86400 - i)) + "\n" for i in range(n)))
    wait_until(lambda: processed(service, "last.jsonl"), timeout=120)
    service.stop()
    last, count = base, 0
    while last < base + n:
        try:
            topic, body = sub.recv_multipart()
        except Exception:
            break  # nothing more will come
        msg = json.loads(body)
        assert msg["previousAnchor"] == last
        count += len(msg["added"])
        last = msg["anchor"]
    assert (last, count) == (base + n, n)
    sub.close()
    # The model caught up with the import before the store closed, and the
    # drain logged no error.
    log = service.log_path.read_text()
    assert f"stopped anchor={base + n}" in log
    assert " error " not in log


def test_bad_line_late_in_a_large_file_stores_nothing(service):
    drinks = [drink(offset_s=-i) for i in range(12_000)]
    lines = [json.dumps(d) for d in drinks]
    lines[11_500] = '{"uuid": "bad"}'
    drop(service, "late-error.jsonl", "\n".join(lines) + "\n")
    err = failed_error(service, "late-error.jsonl")
    assert err["line"] == 11_501 and err["field"] == "uuid"
    assert service.request({"op": "ping"})["anchor"] == 0


def test_unreadable_file_is_refused_with_its_error_file(folder):
    """Root reads everything, so the service runs as `nobody` here and the
    file belongs to root with mode 000."""
    import shutil
    import subprocess
    from conftest import BINARY
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        raise AssertionError("this test needs root and setpriv (util-linux) to drop privileges")
    s = Service(folder)
    os.chown(folder, 65534, 65534)
    for p in s.folder.iterdir():
        os.chown(p, 65534, 65534)
    s.start_as = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    s.start()
    try:
        assert s.process.pid and open(f"/proc/{s.process.pid}/status").read().count("65534") >= 1
        secret = s.folder / "secret.json"
        secret.write_text(json.dumps([drink()]))
        os.chmod(secret, 0)
        os.rename(secret, inbox(s) / "secret.json")
        err = failed_error(s, "secret.json")
        assert "cannot be read" in err["error"] and "Permission denied" in err["error"]
        assert s.request({"op": "ping"})["ok"]
    finally:
        s.stop()
