"""docs/protocol.md §11, Backups: query op `backup` while the service runs, and
`coffee-tracker restore` with it stopped."""
import json
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path


from conftest import Service, drink, next_message, now_iso
from test_durability import sync_counter  # noqa: F401 (a fixture)
from test_bus import publisher, subscriber, wait_for_anchor


def replay(messages, upto):
    """The store as `changes` from 0 would give it at anchor `upto`, rebuilt
    from the `changes` messages a subscriber saw: {uuid: (anchor, drink or None)}."""
    state = {}
    previous = None
    for m in messages:
        if previous is not None:
            assert m["previousAnchor"] == previous, "the subscriber missed a change"
        previous = m["anchor"]
        changes = [(x["anchor"], x["uuid"], x) for x in m["added"]]
        changes += [(x["anchor"], x["uuid"], None) for x in m["deleted"]]
        for anchor, u, d in sorted(changes, key=lambda c: c[0]):
            if anchor <= upto:
                state[u] = (anchor, d)
    return state


def stored_anchor(path):
    """The anchor of a store file read with Python's sqlite3: its records' highest."""
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT max(anchor) FROM records").fetchone()[0]
    finally:
        db.close()


def read_all(service):
    """{uuid: (anchor, drink or None)} from `changes` at anchor 0, tombstones included."""
    state, anchor = {}, 0
    while True:
        reply = service.request({"op": "changes", "anchor": anchor, "limit": 1000})
        assert reply["ok"], reply
        for x in reply["added"]:
            state[x["uuid"]] = (x["anchor"], x)
        for x in reply["deleted"]:
            state[x["uuid"]] = (x["anchor"], None)
        anchor = reply["anchor"]
        if not reply["hasMore"]:
            return state, anchor


def test_a_backup_under_load_restores_to_the_store_at_its_anchor(folder):
    service = Service(folder).start()
    sub = subscriber(service, topics=(b"changes",), hwm=0)
    pub, _ = publisher(service)
    stop = threading.Event()
    sent = []

    def load():  # about 1,000 events a second: drinks, and deletions of earlier ones
        while not stop.is_set():
            for _ in range(10):
                d = drink(offset_s=-3600)
                sent.append(d["uuid"])
                pub.send_multipart([b"drink.add", json.dumps(d).encode()])
            if len(sent) > 50:
                victim = sent[len(sent) // 2]
                pub.send_multipart([b"drink.delete", json.dumps({"uuid": victim}).encode()])
            time.sleep(0.01)

    loader = threading.Thread(target=load)
    loader.start()
    try:
        wait_for_anchor(service, 800)
        reply = service.request({"op": "backup", "name": "nightly.sqlite"}, timeout_ms=60000)
        time.sleep(0.5)  # changes after the backup, which the restore must not hold
    finally:
        stop.set()
        loader.join(timeout=10)
    assert reply["ok"] is True, reply
    backup = reply["file"]
    assert backup == str(service.data / "backups" / "nightly.sqlite")
    assert os.path.getsize(backup) == reply["bytes"] > 0
    assert not [n for n in os.listdir(service.data / "backups") if n.startswith(".")], "a partial file left behind"
    # One file on its own, no journal beside it needed.
    assert sqlite3.connect(backup).execute("PRAGMA journal_mode").fetchone()[0] == "delete"

    final = wait_for_anchor(service, service.request({"op": "ping"})["anchor"])
    messages = []
    while not messages or messages[-1]["anchor"] < final:
        messages.append(next_message(sub, what=f"the feed up to anchor {final}")[1])
    primary, _ = read_all(service)
    assert replay(messages, final) == primary, "the subscriber's replay is not the store"
    assert final > reply["anchor"] > 800, "the backup was not taken under load"
    expected = replay(messages, reply["anchor"])
    assert any(d is None for _, d in expected.values()), "no tombstone in the backup to check"
    assert service.stop() == 0

    # Restore it over the store, the service stopped.
    done = service.run_cli("restore", backup)
    assert done.returncode == 0, done.stderr
    assert f"anchor {reply['anchor']}" in done.stdout
    kept = [n for n in os.listdir(service.data) if n.startswith("coffee-tracker.sqlite.before-restore-")]
    assert len(kept) == 1, os.listdir(service.data)
    assert stored_anchor(service.data / kept[0]) == final, "the kept store is not the one replaced"

    service.start()
    try:
        restored, anchor = read_all(service)
        assert anchor == reply["anchor"]
        assert restored == expected
        assert service.request({"op": "model"})["anchor"] == reply["anchor"], "the model cache outlived the restore"
        # The store goes on from the backup's anchor.
        assert service.request({"op": "add", "drinks": [drink()]})["anchor"] == reply["anchor"] + 1
    finally:
        service.stop()


def test_backup_names_that_are_not_plain_file_names_are_refused(service):
    service.request({"op": "add", "drinks": [drink()]})
    for name in ["", "/", "a/b", "../escape", "..", ".", ".hidden", "x\u0000y", "n" * 201]:
        reply = service.request({"op": "backup", "name": name})
        assert reply["ok"] is False and reply["error"]["code"] == "bad_request", (name, reply)
        assert reply["error"]["field"] == "name"
    for request in [{"op": "backup"}, {"op": "backup", "name": 7}]:
        reply = service.request(request)
        assert reply["error"]["code"] == "bad_request" and reply["error"]["field"] == "name", reply
    assert not (service.folder / "escape").exists()
    assert not (service.data / "backups").exists() or os.listdir(service.data / "backups") == []

    first = service.run_cli("backup", "once.sqlite")
    assert first.returncode == 0, first.stderr
    assert "once.sqlite: anchor 1," in first.stdout
    before = (service.data / "backups" / "once.sqlite").read_bytes()
    service.request({"op": "add", "drinks": [drink()]})
    again = service.request({"op": "backup", "name": "once.sqlite"})
    assert again["error"]["code"] == "bad_request" and "exists" in again["error"]["message"], again
    assert (service.data / "backups" / "once.sqlite").read_bytes() == before, "an existing backup was replaced"
    second = service.run_cli("backup", "twice.sqlite")
    assert second.returncode == 0 and "anchor 2," in second.stdout, second


def test_backup_directory_from_the_configuration(folder):
    service = Service(folder, {"store": {"backupDirectory": "elsewhere/backups"}}).start()
    try:
        reply = service.request({"op": "backup", "name": "b1"})
        assert reply["file"] == str(service.folder / "elsewhere" / "backups" / "b1"), reply
        assert (service.folder / "elsewhere" / "backups" / "b1").exists()
    finally:
        service.stop()


def test_restore_is_refused_while_the_service_runs_and_for_what_is_not_a_store(folder):
    service = Service(folder).start()
    try:
        service.request({"op": "add", "drinks": [drink()]})
        backup = service.request({"op": "backup", "name": "b.sqlite"})["file"]
        running = service.run_cli("restore", backup)
        assert running.returncode == 1 and "stop it first" in running.stderr, running
        # A second service on the same data directory is refused too.
        second = service.run_cli("check")
        assert second.returncode == 0
        import subprocess
        from conftest import BINARY
        twin = subprocess.run([BINARY, "serve", "--config", str(service.config_path)],
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert twin.returncode != 0 and "another coffee-tracker holds the data directory" in twin.stderr, twin
        assert service.request({"op": "ping"})["ok"]
    finally:
        service.stop()

    store = service.data / "coffee-tracker.sqlite"
    before = store.read_bytes()
    not_sqlite = service.folder / "notes.txt"
    not_sqlite.write_text("not a database, only words " * 100)
    foreign = service.folder / "foreign.sqlite"
    other = sqlite3.connect(foreign)
    other.execute("CREATE TABLE t (x)")
    other.commit()
    other.close()
    torn = service.folder / "torn.sqlite"
    torn.write_bytes(open(backup, "rb").read()[:4096 + 100])
    for path, why in [(not_sqlite, "not an SQLite database"), (foreign, "not a coffee-tracker store"),
                      (service.folder / "missing.sqlite", "cannot be read"), (torn, "")]:
        refused = service.run_cli("restore", str(path))
        assert refused.returncode == 1, (path, refused)
        assert why in refused.stderr and "nothing was changed" in refused.stderr, refused.stderr
        assert store.read_bytes() == before, f"{path} changed the store"
    assert not [n for n in os.listdir(service.data) if "before-restore" in n or n.endswith(".restoring")]
    usage = service.run_cli("restore")
    assert usage.returncode == 2 and "FILE" in usage.stderr


def test_a_restored_store_from_elsewhere_replaces_the_model_cache(folder):
    """A cache whose anchor the restored store has passed would otherwise be
    taken as a prefix of it and replayed onto: the model must be the restored
    store's alone."""
    mine = Service(os.path.join(folder, "mine")).start()
    mine.request({"op": "add", "drinks": [drink(mg=300, offset_s=-600) for _ in range(3)]})
    assert mine.stop() == 0
    assert (mine.data / "CoffeeTracker.plist").exists(), "no model cache to test with"
    theirs = Service(os.path.join(folder, "theirs")).start()
    try:
        theirs.request({"op": "add", "drinks": [drink(mg=50, offset_s=-600) for _ in range(5)]})
        backup = theirs.request({"op": "backup", "name": "theirs.sqlite"})["file"]
        at = now_iso(60)
        expected = theirs.request({"op": "model", "at": at})
    finally:
        theirs.stop()
    done = mine.run_cli("restore", backup)
    assert done.returncode == 0, done.stderr
    mine.start()
    try:
        model = mine.request({"op": "model", "at": at})
        assert model["anchor"] == expected["anchor"] == 5
        assert abs(model["mgCaffeine"] - expected["mgCaffeine"]) < 1e-6 and model["drinksToday"] == expected["drinksToday"], (model, expected)
    finally:
        mine.stop()


def test_a_backup_is_fsynced_whole_and_its_name_synced_before_the_reply(folder, sync_counter):  # noqa: F811
    """The copy's own fsync (not only SQLite's fdatasync of its journal
    change), then the link into place and its folder's sync, before `backup`
    answers (docs/protocol.md §11)."""
    from test_durability import counted_service
    service, log = counted_service(folder, sync_counter)
    try:
        service.request({"op": "add", "drinks": [drink() for _ in range(50)]})
        mark = len(log.read_text().splitlines()) if log.exists() else 0
        reply = service.request({"op": "backup", "name": "synced.sqlite"})
        assert reply["ok"], reply
        lines = [line.rsplit(" ", 1)[0] for line in log.read_text().splitlines()[mark:]]
        backups = str(Path(reply["file"]).parent)
        copy = f"fsync {backups}/.synced.sqlite.partial"
        assert copy in lines, lines
        assert f"fsync {backups}" in lines[lines.index(copy):], lines
    finally:
        service.stop()


def test_a_damaged_backup_of_ours_is_refused_by_the_integrity_check(folder):
    """A backup of this service whose B-tree pages were damaged after it was
    made (a bad disk, a bad copy) opens, and its anchor reads, but SQLite's
    integrity check finds it broken: `restore` refuses it and changes nothing."""
    service = Service(folder).start()
    try:
        for _ in range(4):
            assert service.request({"op": "add", "drinks": [drink() for _ in range(500)]})["ok"]
        backup = Path(service.request({"op": "backup", "name": "whole.sqlite"})["file"])
    finally:
        service.stop()
    data = bytearray(backup.read_bytes())
    page = 4096
    assert len(data) >= 20 * page
    for p in range(len(data) // page - 8, len(data) // page - 2):  # leaves near the end, not the header or the schema
        for i in range(p * page + 16, (p + 1) * page, 7):
            data[i] = (data[i] * 31 + 17) & 0xFF
    damaged = service.folder / "damaged.sqlite"
    damaged.write_bytes(bytes(data))
    store = service.data / "coffee-tracker.sqlite"
    before = store.read_bytes()
    refused = service.run_cli("restore", str(damaged))
    assert refused.returncode == 1 and "nothing was changed" in refused.stderr, refused
    assert "integrity" in refused.stderr.lower() or "damaged" in refused.stderr.lower(), refused.stderr
    assert store.read_bytes() == before
