"""docs/protocol.md §11 (v4): a store in PostgreSQL. Several services on one
database, each announcing every change in anchor order with whole chains;
a service killed, the database stopped and started again, a synchronous
standby promoted; `migrate` from a SQLite store. Against real PostgreSQL
servers of the tests' own (postgres.py)."""
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import ALERTS_ON, BINARY, Service, drink
from postgres import PostgresServer, server_bin
from test_bus import publisher, subscriber
from test_inbox import drop, processed, wait_until
from test_operations import http

pytestmark = pytest.mark.skipif(server_bin() is None, reason="no PostgreSQL server (apt-get install postgresql)")


@pytest.fixture(scope="module")
def server():
    s = PostgresServer().start("max_connections=200")
    yield s
    s.cleanup()


def shared(folder, name, conninfo):
    return Service(os.path.join(folder, name), {"store": {"postgresql": {"conninfo": conninfo}}})


def feed(sub, until, timeout=30):
    """`changes` messages from `sub` until one reaches anchor `until`."""
    messages = []
    deadline = time.time() + timeout
    while not messages or messages[-1]["anchor"] < until:
        assert time.time() < deadline, f"the feed stopped at {messages[-1]['anchor'] if messages else None}"
        topic, body = sub.recv_multipart()
        if topic == b"changes":
            messages.append(json.loads(body))
    return messages


def chained(messages):
    """Every change of a whole chain of `changes` messages, (anchor, uuid), in order."""
    previous = messages[0]["previousAnchor"]
    changes = []
    for m in messages:
        assert m["previousAnchor"] == previous, f"the chain broke at {previous}: {m['previousAnchor']}"
        items = sorted([(x["anchor"], x["uuid"]) for x in m["added"] + m["deleted"]])
        assert all(previous < a <= m["anchor"] for a, _ in items), m
        changes += items
        previous = m["anchor"]
    return changes


def writer(service, acknowledged, stop, batch=1):
    """Adds drinks through the query endpoint until `stop`; keeps each
    acknowledged one's uuid with the anchor of its commit."""
    while not stop.is_set():
        drinks = [drink() for _ in range(batch)]
        try:
            reply = service.request({"op": "add", "drinks": drinks}, timeout_ms=5000)
        except Exception:  # the service went away mid-request: not acknowledged
            return
        if reply.get("ok"):
            for d in drinks:
                acknowledged[d["uuid"]] = reply["anchor"]


def test_two_services_on_one_database_give_gapless_anchors_and_identical_feeds(server, folder):
    _, conninfo = server.new_database()
    a = shared(folder, "a", conninfo).start()
    b = shared(folder, "b", conninfo).start()
    try:
        assert a.request({"op": "ping"})["store"] == b.request({"op": "ping"})["store"]
        subs = [subscriber(s, topics=(b"changes",)) for s in (a, b)]
        by, stop = {"a": {}, "b": {}}, threading.Event()
        writers = [threading.Thread(target=writer, args=(s, by[k], stop, n)) for k, s in (("a", a), ("b", b))
                   for n in (1, 3)]
        pubs = [publisher(s, hwm=0)[0] for s in (a, b)]
        for w in writers:
            w.start()
        bus = [drink() for _ in range(400)]
        for i, d in enumerate(bus):
            pubs[i % 2].send_multipart([b"drink.add", json.dumps(d).encode()])
            if i % 50 == 0:
                time.sleep(0.05)
        time.sleep(1)
        stop.set()
        for w in writers:
            w.join(timeout=30)
        acknowledged = {**by["a"], **by["b"]}
        wanted = set(acknowledged) | {d["uuid"] for d in bus}
        wait_until(lambda: wanted <= {x["uuid"] for x in a.all_changes(0)[0]}, timeout=30, what="everything stored")
        end = a.request({"op": "ping"})["anchor"]
        # Gapless: every anchor from 1 to the end holds one change (each drink was written once).
        added, _, anchor, _ = b.all_changes(0)
        assert anchor == end and sorted(x["anchor"] for x in added) == list(range(1, end + 1))
        # Both feeds: every change, in anchor order, in whole chains, the same.
        feeds = [chained(feed(sub, end)) for sub in subs]
        assert feeds[0] == feeds[1]
        start = feeds[0][0][0]
        assert [x for x, _ in feeds[0]] == list(range(start, end + 1))
        # Interleaved: both services committed, each between the other's commits, and each announced the other's.
        assert len(by["a"]) > 20 and len(by["b"]) > 20
        anchors_a, anchors_b = sorted(set(by["a"].values())), sorted(set(by["b"].values()))
        assert any(x < y < z for x, z in zip(anchors_a, anchors_a[1:]) for y in anchors_b)
        assert 'store="PostgreSQL (host=' in a.log_path.read_text()
    finally:
        a.stop()
        b.stop()


def test_kill_9_of_one_service_under_acknowledged_writes_loses_nothing(server, folder):
    _, conninfo = server.new_database()
    a = shared(folder, "a", conninfo).start()
    b = shared(folder, "b", conninfo).start()
    try:
        acknowledged, stop = {}, threading.Event()
        threads = [threading.Thread(target=writer, args=(s, acknowledged, stop, 2)) for s in (a, a, b)]
        for t in threads:
            t.start()
        wait_until(lambda: len(acknowledged) > 200, timeout=30, what="writes acknowledged")
        a.process.send_signal(signal.SIGKILL)
        a.process.wait(timeout=10)
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        stored = {x["uuid"]: x["anchor"] for x in b.all_changes(0)[0]}
        lost = set(acknowledged) - set(stored)
        assert not lost, f"{len(lost)} acknowledged changes lost"
        # The killed service, started again, goes on where the database is.
        a.log.close()
        a.start()
        assert a.request({"op": "ping"})["anchor"] == b.request({"op": "ping"})["anchor"]
    finally:
        a.stop()
        b.stop()


def test_the_database_stopped_and_started_again_is_survived(server, folder):
    # A server of this test's own: it is stopped with -m immediate.
    db = PostgresServer(name="own").start()
    try:
        _, conninfo = db.new_database()
        s = shared(folder, "s", conninfo).start()
        sub = subscriber(s, topics=(b"changes",))
        pub, _ = publisher(s, hwm=0)
        before = [drink() for _ in range(5)]
        assert s.request({"op": "add", "drinks": before})["ok"]
        assert http(s, "/readyz")[0] == 200

        db.stop("immediate")
        refused = drink()
        wait_until(lambda: s.request({"op": "add", "drinks": [refused]})["error"]["code"] == "unavailable",
                   timeout=20, what="writes answered unavailable")
        wait_until(lambda: http(s, "/readyz")[0] == 503, timeout=10, what="/readyz 503")
        assert "unreachable" in s.request({"op": "stats"})["fault"]
        held = [drink() for _ in range(50)]  # bus events while the database is away: held
        for d in held:
            pub.send_multipart([b"drink.add", json.dumps(d).encode()])
        filed = [drink() for _ in range(3)]  # an inbox file: left where it is
        drop(s, "away.json", json.dumps(filed))
        time.sleep(1)
        assert (s.folder / "inbox" / "away.json").exists() and not processed(s, "away.json")
        assert not (s.folder / "inbox" / "failed" / "away.json").exists()

        db.start()
        wait_until(lambda: http(s, "/readyz")[0] == 200, timeout=30, what="ready again")
        after = drink()
        assert s.request({"op": "add", "drinks": [after]})["ok"]
        wanted = {d["uuid"] for d in before + held + filed + [after]}
        wait_until(lambda: wanted <= {x["uuid"] for x in s.all_changes(0)[0]}, timeout=30, what="the held events")
        wait_until(lambda: processed(s, "away.json"), timeout=30, what="the inbox file imported")
        stored = {x["uuid"] for x in s.all_changes(0)[0]}
        assert refused["uuid"] not in stored
        end = s.request({"op": "ping"})["anchor"]
        # Announced once each, in order: the chain is whole from the first commit.
        changes = chained(feed(sub, end))
        assert [a for a, _ in changes] == list(range(1, end + 1))
        log = s.log_path.read_text()
        assert "the store writes again" in log
        s.stop()
    finally:
        db.cleanup()


def test_a_service_started_before_its_database_waits_for_it(folder):
    db = PostgresServer(name="late").start()
    try:
        _, conninfo = db.new_database()
        db.stop()
        s = shared(folder, "s", conninfo)
        started = {}
        starting = threading.Thread(target=lambda: started.update(s=s.start(timeout=60)))
        starting.start()
        wait_until(lambda: s.log_path.exists() and "waiting for it before starting" in s.log_path.read_text(),
                   timeout=20, what="the wait logged")
        time.sleep(1.5)
        assert s.process.poll() is None, s.log_path.read_text()  # waiting, not exited
        db.start()
        starting.join(timeout=70)
        assert "s" in started, s.log_path.read_text()
        log = s.log_path.read_text()
        assert "Connection refused" in log or "No such file" in log, log  # the reason, named
        assert "the database answers; starting" in log
        d = drink()
        assert s.request({"op": "add", "drinks": [d]})["ok"]
        assert d["uuid"] in {x["uuid"] for x in s.all_changes(0)[0]}
        assert http(s, "/readyz")[0] == 200
        assert s.stop() == 0

        # Stopped while it waits: at once, status 0, nothing started.
        db.stop()
        w = shared(folder, "w", conninfo)
        with open(w.log_path, "ab") as log_file:
            process = subprocess.Popen([BINARY, "serve", "--config", str(w.config_path)], stdout=log_file,
                                       stderr=log_file, stdin=subprocess.DEVNULL)
            try:
                wait_until(lambda: "waiting for it before starting" in w.log_path.read_text(), timeout=20,
                           what="the wait logged")
                process.send_signal(signal.SIGTERM)
                assert process.wait(timeout=5) == 0
            finally:
                if process.poll() is None:
                    process.kill()
        assert "stopped while waiting for the database" in w.log_path.read_text()
        assert not (w.data / "endpoints.json").exists()
    finally:
        db.cleanup()


def test_a_promoted_synchronous_standby_has_every_acknowledged_change(folder):
    primary = PostgresServer(name="primary").start()
    standby = PostgresServer(root=primary.root, name="standby")
    try:
        name, conninfo = primary.new_database()
        primary.base_backup(standby, "standby1")
        standby.start()
        primary.sql("ALTER SYSTEM SET synchronous_standby_names = 'standby1'")
        primary.sql("SELECT pg_reload_conf()")
        wait_until(lambda: primary.sql("SELECT sync_state FROM pg_stat_replication") == "sync", timeout=30,
                   what="the standby synchronous")
        s = shared(folder, "s", conninfo).start()
        acknowledged, stop = {}, threading.Event()
        threads = [threading.Thread(target=writer, args=(s, acknowledged, stop, n)) for n in (1, 4)]
        for t in threads:
            t.start()
        wait_until(lambda: len(acknowledged) > 100, timeout=30, what="writes acknowledged")
        primary.stop("immediate")  # the primary's machine gone, mid-write
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        s.kill()  # with the primary's machine
        standby.promote()
        s.config_path.write_text(json.dumps(
            {**json.loads(s.config_path.read_text()),
             "store": {"postgresql": {"conninfo": f"{standby.conninfo} dbname={name}"}}}))
        s.start()
        stored = {x["uuid"] for x in s.all_changes(0)[0]}
        lost = set(acknowledged) - stored
        assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged changes lost"
        assert s.request({"op": "add", "drinks": [drink()]})["ok"]  # the promoted database takes writes
        s.stop()
    finally:
        standby.cleanup()
        primary.cleanup()


def test_migrate_copies_a_sqlite_store_with_its_anchors_tombstones_and_identity(server, folder):
    lite = Service(os.path.join(folder, "lite"), {"alerts": dict(ALERTS_ON, bedtime="off")}).start()
    drinks = [drink() for _ in range(30)]
    assert lite.request({"op": "add", "drinks": drinks[:20]})["ok"]
    assert lite.request({"op": "add", "drinks": drinks[20:]})["ok"]
    assert lite.request({"op": "delete", "deletions": [drinks[3]["uuid"], drinks[25]["uuid"]]})["ok"]
    replaced = dict(drinks[7], version=2, mgCaffeine=12)
    assert lite.request({"op": "add", "drinks": [replaced]})["ok"]
    # A setting (§15: a change with an anchor of its own), and the alerts told (§16: their state kept).
    # The alerts' commits take anchors of their own among the drinks': the anchors are read, not counted.
    wait_until(lambda: lite.request({"op": "stats"})["alertsTold"] == 3, what="the three alerts told")
    assert lite.request({"op": "putSettings", "settings": {"halfLifeHours": 3}})["ok"]
    expected = lite.request({"op": "changes", "anchor": 0, "limit": 1000})
    final = expected["anchor"]
    assert final > 34 and "outbox" not in expected and len(expected["alertStates"]) == 3, expected
    live = lite.request({"op": "changes", "anchor": None, "limit": 1000})
    lite.stop()

    _, conninfo = server.new_database()
    pg = shared(folder, "pg", conninfo)
    out = pg.run_cli("migrate", "--from", str(lite.data / "coffee-tracker.sqlite"))
    assert out.returncode == 0, out.stderr
    assert f"28 drinks, 2 tombstones, anchor {final}" in out.stdout, out.stdout
    pg.start()
    got = pg.request({"op": "changes", "anchor": 0, "limit": 1000})
    for key in ("added", "deleted", "anchor", "store", "epoch", "settings", "alertStates"):
        assert got[key] == expected[key], key
    assert pg.request({"op": "changes", "anchor": None, "limit": 1000})["added"] == live["added"]
    # The rules go on over the copy: the tombstone keeps a late save out, a new drink takes the next anchor.
    late = pg.request({"op": "add", "drinks": [drinks[3]]})
    assert late["duplicates"] == 1 and late["anchor"] == final
    assert pg.request({"op": "add", "drinks": [drink()]})["anchor"] == final + 1
    # The setting came along, and what was told stays told.
    assert pg.request({"op": "settings"})["settings"]["halfLifeHours"] == 3
    assert pg.request({"op": "model"})["halfLifeHours"] == 3
    time.sleep(0.5)
    assert pg.request({"op": "stats"})["alertsTold"] == 0
    pg.stop()
    # Into a database that holds changes: refused, nothing written.
    again = pg.run_cli("migrate", "--from", str(lite.data / "coffee-tracker.sqlite"))
    assert again.returncode == 1 and "holds changes already" in again.stderr, again.stderr


def test_what_a_store_in_postgresql_leaves_to_postgresql_is_refused_clearly(server, folder):
    _, conninfo = server.new_database()
    s = shared(folder, "s", conninfo).start()
    try:
        reply = s.request({"op": "backup", "name": "x.sqlite"})
        assert reply["ok"] is False and "pg_dump" in reply["error"]["message"], reply
    finally:
        s.stop()
    restore = s.run_cli("restore", "anything.sqlite")
    assert restore.returncode == 1 and "pg_restore" in restore.stderr
    lite = s.run_cli("migrate", "--from", "nothing.sqlite")
    assert lite.returncode == 1 and "does not exist" in lite.stderr
    # A database that cannot be reached: the service says so and exits.
    gone = shared(folder, "gone", f"host={server.root}/nowhere user=postgres dbname=x")
    with pytest.raises(AssertionError, match="PostgreSQL"):
        gone.start(timeout=10)
