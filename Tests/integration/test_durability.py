"""Durability seen from outside the process (docs/protocol.md §1): an acknowledged
commit was synced to disk first, and a drain right after a burst stores and
publishes everything the bus took."""
import json
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import zmq

from conftest import Service, bus_publisher, drink, wait_until
from test_bus import publisher, subscriber

SHIM_SOURCE = Path(__file__).with_name("sync_counter.c")


@pytest.fixture(scope="session")
def sync_counter(tmp_path_factory):
    """The LD_PRELOAD shim that logs every fsync and fdatasync, built here."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed to build the fsync counter (apt-get install gcc)"
    out = tmp_path_factory.mktemp("shim") / "sync_counter.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(SHIM_SOURCE), "-ldl"],
                   check=True, capture_output=True, timeout=60)
    return out


def counted_service(folder, sync_counter):
    """The service started with the shim; returns it and the shim's log."""
    log = Path(folder) / "syncs.log"
    s = Service(folder)
    s.env = {"LD_PRELOAD": str(sync_counter), "SYNC_COUNTER_LOG": str(log)}
    return s.start(), log


def synced(log, suffix):
    """Successful fsync/fdatasync calls on files whose path ends in `suffix`."""
    if not log.exists():
        return 0
    count = 0
    for line in log.read_text().splitlines():
        _call, rest = line.split(" ", 1)
        path, result = rest.rsplit(" ", 1)
        if path.endswith(suffix) and result == "0":
            count += 1
    return count


def wal_syncs(log):
    """Successful fsync/fdatasync calls on the store's WAL so far."""
    return synced(log, "coffee-tracker.sqlite-wal")


def test_each_acknowledged_add_follows_a_sync_of_the_wal(folder, sync_counter):
    s, log = counted_service(folder, sync_counter)
    try:
        before = wal_syncs(log)
        for i in range(1, 21):
            reply = s.request({"op": "add", "drinks": [drink()]})
            assert reply["ok"], reply
            # The reply comes after the commit's sync, so the sync is logged by now.
            synced = wal_syncs(log) - before
            assert synced >= i, f"add {i} was acknowledged after only {synced} syncs of the WAL"
    finally:
        s.stop()


def test_sigterm_right_after_a_burst_stores_and_publishes_everything_taken(folder):
    s = Service(folder).start()
    sub = subscriber(s, topics=(b"changes", b"model"))
    sub.setsockopt(zmq.RCVTIMEO, 3000)
    pub, _base = publisher(s)
    t = time.time() - 3600

    def small(i):
        return {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 1, "date": t - i}

    singles = 40_000
    big = json.dumps([small(10 * singles + i) for i in range(10_500)], separators=(",", ":")).encode()
    assert len(big) < 1_048_576  # one message, one commit of more than 10,000 changes
    for i in range(singles):
        pub.send_multipart([b"drink.add", json.dumps(small(i)).encode()])
        if i == singles // 2:
            pub.send_multipart([b"drink.add", big])
    s.process.send_signal(signal.SIGTERM)
    assert s.process.wait(timeout=60) == 0
    s.log.close()
    log = s.log_path.read_text()
    stopped = re.search(r"stopped anchor=(\d+) duplicates=(\d+) received=(\d+) .*stored=(\d+)", log)
    assert stopped, log[-2000:]
    final, duplicates, received, stored = map(int, stopped.groups())
    assert received > 10_500, "the burst never reached the bus"
    # The publisher's probe may be received more than once (it is resent
    # until it is seen stored): those copies are duplicates, not losses.
    assert stored + duplicates == received, f"received {received} but stored {stored} (+{duplicates} duplicates)"
    assert duplicates < 100
    assert final == stored  # every change took an anchor; the service started empty

    last_changes, last_model, count = None, None, 0
    while True:
        try:
            topic, body = sub.recv_multipart()
        except zmq.Again:
            break  # the service is gone: nothing more will come
        message = json.loads(body)
        if topic == b"changes":
            if last_changes is not None:
                assert message["previousAnchor"] == last_changes, "the changes chain broke"
            assert len(message["added"]) + len(message["deleted"]) <= 10_000
            last_changes = message["anchor"]
            count += len(message["added"])
        elif topic == b"model":
            last_model = message["anchor"]
    sub.close()
    # What the publisher still holds was never taken: dropped here, or its
    # linger would deliver it to the restarted service on the same path.
    pub.setsockopt(zmq.LINGER, 0)
    pub.close()
    assert last_changes == final, f"changes ended at {last_changes}, the store at {final}"
    assert last_model == final, f"the last model carried {last_model}, the store {final}"

    # And the store holds it all after a restart.
    s.start()
    try:
        added, deleted, anchor, _ = s.all_changes()
        assert (len(added), len(deleted), anchor) == (final, 0, final)
    finally:
        s.stop()


def test_each_inbox_import_is_recorded_durably_before_it_begins(folder, sync_counter):
    """The crash-loop breaker's record (data/importing.json) is synced once per file."""
    from test_inbox import drop, processed, wait_until
    s, log = counted_service(folder, sync_counter)
    try:
        for i in range(5):
            drop(s, f"file{i}.json", json.dumps([drink()]))
            wait_until(lambda: processed(s, f"file{i}.json"))
        records = [line for line in log.read_text().splitlines()
                   if line.split(" ", 1)[1].rsplit(" ", 1)[0].endswith("/data/importing.json")]
        assert len(records) >= 5, f"{len(records)} syncs of the import record for 5 files"
    finally:
        s.stop()


def test_each_bus_event_at_a_low_rate_is_synced_before_its_changes_message(folder, sync_counter):
    """The leader path (a bus event committed on the ingest thread while the
    store is idle) syncs the WAL before `changes` announces it."""
    s, log = counted_service(folder, sync_counter)
    try:
        sub = subscriber(s, topics=(b"changes",))
        pub, _ = publisher(s)
        before = wal_syncs(log)
        for i in range(1, 21):
            d = drink()
            pub.send_multipart([b"drink.add", json.dumps(d).encode()])
            deadline = time.time() + 10
            while True:
                assert time.time() < deadline, f"no changes message for bus event {i}"
                _topic, body = sub.recv_multipart()
                if any(a["uuid"] == d["uuid"] for a in json.loads(body)["added"]):
                    break
            count = wal_syncs(log) - before
            assert count >= i, f"bus event {i} was announced after only {count} syncs of the WAL"
            time.sleep(0.02)  # a low rate: the store is idle when the next one comes
        sub.close()
        pub.close()
    finally:
        s.stop()


def test_each_dead_letter_is_synced_before_it_counts_as_rejected(folder, sync_counter):
    s, log = counted_service(folder, sync_counter)
    try:
        pub, _ = publisher(s)
        for i in range(1, 11):
            pub.send_multipart([b"drink.add", b'{"uuid": "not a uuid"}'])
            deadline = time.time() + 10
            while s.request({"op": "stats"})["rejected"] < i:
                assert time.time() < deadline, f"bad message {i} was never rejected"
                time.sleep(0.01)
            count = synced(log, "/data/rejected.jsonl")
            assert count >= i, f"{i} messages rejected after {count} syncs of the dead-letter file"
        pub.close()
    finally:
        s.stop()


def test_a_new_dead_letter_file_has_its_name_synced_before_the_rejection_counts(folder, sync_counter):
    """A file's name is durable only once its folder is synced: the first
    rejection, which creates data/rejected.jsonl, syncs data/ after the file
    and before `rejected` counts it (a power cut found this one)."""
    s, log = counted_service(folder, sync_counter)
    try:
        time.sleep(1.0)  # the start's own writes (endpoints.json, the model cache) are done
        mark = len(log.read_text().splitlines())
        pub = bus_publisher(s.context, connect=s.endpoints["ingest"][0], linger=0)
        pub.send_multipart([b"drink.add", b'{"uuid": "not a uuid"}'])
        wait_until(lambda: s.request({"op": "stats"})["rejected"] >= 1, 10, what="the bad message rejected")
        lines = [line.split(" ", 1)[1].rsplit(" ", 1) for line in log.read_text().splitlines()[mark:]]
        paths = [path for path, result in lines if result == "0"]
        data = str(s.data.resolve())
        first = next(i for i, p in enumerate(paths) if p.endswith("/data/rejected.jsonl"))
        assert data in paths[first + 1:], f"data/ was not synced after the dead-letter file was created: {paths}"
        pub.close()
    finally:
        s.stop()
