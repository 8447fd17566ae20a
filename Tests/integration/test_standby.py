"""A standby (docs/protocol.md §11): `follow` makes a service a read-only copy of
another. Against two real services: the standby ends equal to its primary
(`changes` from 0, tombstones and each change's anchor included) through
the primary's restart, kill -9 and a 40,000-drink inbox file; it refuses
writes with `read_only`, tells its lag, serves its own update feed, takes
the primary's whole state once the primary purged past it, and, promoted
by a restart without `follow`, takes writes and continues the anchors."""
import json
import shutil
import signal
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import Service, drink, next_message
from test_bus import publisher, subscriber
from test_inbox import drop, processed, wait_until

from coffee_tracker import Client


def primary_service(folder, extra=None):
    """A primary whose query and update endpoints stay where they are across restarts."""
    base = Path(folder) / "primary"
    config = {"query": {"bind": [f"ipc://{base}/query.sock"]}}
    config.update(extra or {})
    return Service(base, config)


def standby_service(folder, primary):
    base = Path(folder) / "standby"
    return Service(base, {"follow": {"query": f"ipc://{primary.folder}/query.sock",
                                     "updates": f"ipc://{primary.folder}/updates.sock"}})


def everything(service, since=0):
    """`changes` from `since`, every page: (drinks, tombstones, anchor), each change with its own anchor."""
    added, deleted, anchor, _ = service.all_changes(anchor=since, limit=997)
    return sorted(added, key=lambda d: d["anchor"]), sorted(deleted, key=lambda t: t["anchor"]), anchor


def in_step(primary, standby, since=0, timeout=60):
    """Waits until the standby holds what the primary holds; returns it."""
    deadline = time.time() + timeout
    while True:
        want, got = everything(primary, since), everything(standby, since)
        if got == want:
            return want
        assert time.time() < deadline, (
            f"standby not in step: primary anchor {want[2]}, standby {got[2]}; "
            f"{len(want[0])}/{len(got[0])} drinks, {len(want[1])}/{len(got[1])} tombstones")
        time.sleep(0.1)


def some_changes(primary, n=30):
    """Drinks, a drink written again with a higher version, and deletions (tombstones)."""
    drinks = [drink(mg=10 + i) for i in range(n)]
    assert primary.request({"op": "add", "drinks": drinks})["ok"]
    again = dict(drinks[0], version=2, mgCaffeine=77)
    assert primary.request({"op": "add", "drinks": [again, drink()]})["ok"]
    assert primary.request({"op": "delete", "deletions": [d["uuid"] for d in drinks[1:n // 3]]})["ok"]
    return drinks


@pytest.fixture
def pair(folder):
    primary = primary_service(folder).start()
    standby = None
    try:
        some_changes(primary)  # before the standby exists: it starts from 0
        standby = standby_service(folder, primary).start()
        yield primary, standby
    finally:
        for s in (standby, primary):
            if s and s.process and s.process.poll() is None:
                s.stop()


def test_a_standby_matches_its_primary_through_restarts_kill_9_and_a_large_file(pair):
    primary, standby = pair
    drinks, tombstones, anchor = in_step(primary, standby)
    assert tombstones and drinks[-1]["anchor"] <= anchor and anchor > 30
    # Bus events too, one commit each at a low rate.
    pub, _ = publisher(primary)
    sent = [drink(mg=5 + i) for i in range(20)]
    for d in sent:
        pub.send_multipart([b"drink.add", json.dumps(d).encode()])
        time.sleep(0.01)
    # Sent once: publisher() returned past the slow joiner, so none may be missing.
    wanted = {d["uuid"] for d in sent}
    wait_until(lambda: wanted <= {d["uuid"] for d in everything(primary)[0]}, 20, what="the 20 bus events stored")
    in_step(primary, standby)

    primary.stop()  # SIGTERM: the standby waits, then finds it again
    some_changes(primary.start())
    in_step(primary, standby)

    primary.process.send_signal(signal.SIGKILL)
    primary.process.wait(10)
    primary.log.close()
    some_changes(primary.start())
    in_step(primary, standby)

    lines = "\n".join(json.dumps(drink(offset_s=-i)) for i in range(40_000))
    drop(primary, "many.jsonl", lines + "\n")
    wait_until(lambda: processed(primary, "many.jsonl"), timeout=120, what="the file to be imported")
    drinks, _, anchor = in_step(primary, standby, timeout=120)
    assert len(drinks) > 40_000
    assert standby.request({"op": "ping"})["anchor"] == primary.request({"op": "ping"})["anchor"] == anchor
    pub.close(0)


def test_a_standby_refuses_writes_tells_its_lag_and_serves_its_own_feed(pair):
    primary, standby = pair
    in_step(primary, standby)
    for op in ({"op": "add", "drinks": [drink()]}, {"op": "delete", "deletions": [drink()["uuid"]]}):
        reply = standby.request(op)
        assert reply["ok"] is False and reply["error"]["code"] == "read_only", reply
        assert "standby" in reply["error"]["message"]
    # Nothing came from the bus or the inbox: a standby has neither.
    assert standby.endpoints["ingest"] == []
    stats = standby.request({"op": "stats"})
    assert stats["followAnchor"] == primary.request({"op": "ping"})["anchor"] and stats["followLagS"] == 0
    metrics = urllib.request.urlopen(f"http://{standby.endpoints['http']}/metrics", timeout=10).read().decode()
    assert "coffee_tracker_follow_lag_seconds 0" in metrics
    assert "coffee_tracker_follow_lag_seconds" not in urllib.request.urlopen(
        f"http://{primary.endpoints['http']}/metrics", timeout=10).read().decode()

    # Its own update feed carries the primary's anchors: a raw SUB sees them,
    # and a follower (the Python client's) ends equal to the primary.
    sub = subscriber(standby, topics=(b"changes",))
    reply = primary.request({"op": "add", "drinks": [drink(mg=42)]})
    while True:
        _, message = next_message(sub, (b"changes",), what=f"the standby's changes at anchor {reply['anchor']}")
        if message["anchor"] == reply["anchor"]:
            break
    assert message["added"][0]["anchor"] == reply["anchor"] and message["added"][0]["mgCaffeine"] == 42
    sub.close(0)
    client = Client(config=str(standby.config_path), timeout=10)
    for state in client.follow(timeout=30):
        if state.anchor == reply["anchor"]:
            break
    live, _, _, _ = primary.all_changes()
    assert set(state.drinks) == {d["uuid"] for d in live}

    # Every part's logger comes from the composition root's: the standby's
    # role is on the lines of its model, its follower and its service, and
    # on none of the primary's.
    lines = standby.log_path.read_text().splitlines()
    for label in ("model", "standby", "service"):
        mine = [line for line in lines if f" {label}: " in line]
        assert mine and all("role=standby" in line for line in mine), (label, mine)
    assert "role=" not in primary.log_path.read_text()


def test_a_standby_behind_the_primarys_purge_takes_its_whole_state(folder):
    primary = primary_service(folder, {"store": {"tombstoneRetentionDays": 1 / 86_400}}).start()
    standby = standby_service(folder, primary).start()
    try:
        drinks = some_changes(primary, n=60)
        in_step(primary, standby)
        standby.stop()
        # While the standby is away: deletions, then a restart that purges them (older than a second).
        assert primary.request({"op": "delete", "deletions": [d["uuid"] for d in drinks[20:50]]})["ok"]
        assert primary.request({"op": "add", "drinks": [drink()]})["ok"]
        time.sleep(1.5)
        primary.stop()
        primary.start()
        purged = primary.request({"op": "stats"})["purgedAnchor"]
        assert purged > standby_anchor(standby), "the purge did not pass the standby's anchor"
        assert primary.request({"op": "add", "drinks": [drink()]})["ok"]
        standby.start()
        in_step(primary, standby, since=purged)
        assert everything(standby, since=None) == everything(primary, since=None)
        assert standby.request({"op": "stats"})["purgedAnchor"] == purged
        assert "took the primary's whole state" in standby.log_path.read_text()
        reply = standby.request({"op": "changes", "anchor": 0})
        assert reply["ok"] is False and reply["error"]["code"] == "anchor_expired"
    finally:
        standby.stop()
        primary.stop()


def standby_anchor(standby):
    """The anchor a stopped standby's store holds, read from the store file's own log line."""
    for line in reversed(standby.log_path.read_text().splitlines()):
        if "stopped" in line and "anchor=" in line:
            return int(line.split("anchor=")[1].split()[0].strip(","))
    raise AssertionError("no 'stopped' line in the standby's log")


def test_a_promoted_standby_takes_writes_and_continues_the_anchors(pair):
    primary, standby = pair
    drinks, tombstones, anchor = in_step(primary, standby)
    primary.stop()
    standby.stop()
    config = json.loads(standby.config_path.read_text())
    del config["follow"]  # promotion: a restart without follow
    standby.config_path.write_text(json.dumps(config))
    standby.start()
    reply = standby.request({"op": "add", "drinks": [drink(mg=12)]})
    assert reply["ok"] and reply["anchor"] == anchor + 1
    after, after_tombstones, _ = everything(standby)
    assert after[:-1] == drinks and after_tombstones == tombstones and after[-1]["anchor"] == anchor + 1
    assert standby.endpoints["ingest"], "a promoted standby takes bus events again"


def metrics(service):
    return urllib.request.urlopen(f"http://{service.endpoints['http']}/metrics", timeout=10).read().decode()


def test_a_standby_says_whether_its_push_key_is_its_primarys(pair):
    """§17: each service makes its Web Push key at its first start, so a
    standby's is not its primary's until the primary's `vapid.pem` is copied
    over it; promoted with another key it could tell no phone subscribed on
    the primary. It compares the two at each connection and says so:
    `stats.followPushKey`, `/metrics` and one warning naming the file."""
    primary, standby = pair
    in_step(primary, standby)
    theirs = primary.request({"op": "pushKey"})["publicKey"]
    assert standby.request({"op": "pushKey"})["publicKey"] != theirs
    wait_until(lambda: standby.request({"op": "stats"})["followPushKey"] == "different", timeout=20,
               what="the standby to find its push key is not the primary's")
    log = standby.log_path.read_text()
    assert log.count("Web Push key is not its primary's") == 1, log
    assert str(standby.data / "vapid.pem") in log
    assert "followPushKey" not in primary.request({"op": "stats"})  # a primary follows no one
    assert "coffee_tracker_follow_push_key_different 1" in metrics(standby)

    # The primary's key copied over the standby's, and the standby restarted: the same key, and said so.
    standby.stop()
    shutil.copyfile(primary.data / "vapid.pem", standby.data / "vapid.pem")
    standby.start()
    assert standby.request({"op": "pushKey"})["publicKey"] == theirs
    wait_until(lambda: standby.request({"op": "stats"})["followPushKey"] == "same", timeout=20,
               what="the standby to find its push key is the primary's")
    assert "Web Push key is its primary's" in standby.log_path.read_text()
    assert "coffee_tracker_follow_push_key_different 0" in metrics(standby)


def test_a_standby_follows_a_primary_under_curve_with_a_key_of_its_own(folder):
    """Under the primary's security.curve the standby is its client
    (follow.serverKey, follow.keyFile): with the subscribe and read roles it
    follows; with read alone the update feed refuses it, and it says so."""
    from test_security import Secured, keygen
    sec = Secured(folder)
    primary = sec.start()
    some_changes(primary)
    keygen(sec.mine / "standby", "--roles", "subscribe,read")
    keygen(sec.mine / "lookout", "--roles", "read")
    for name in ("standby", "lookout"):
        shutil.copy(sec.mine / f"{name}.key", sec.clients)
    primary.process.send_signal(signal.SIGHUP)  # the clients directory read again
    time.sleep(1.0)

    def standby_with(name):
        return Service(Path(folder) / name, {"follow": {
            "query": primary.query_endpoint, "updates": primary.endpoints["updates"][0],
            "serverKey": primary.server_key, "keyFile": str(sec.mine / f"{name}.key_secret")}}).start()

    standby = standby_with("standby")
    lookout = standby_with("lookout")
    try:
        in_step(primary, standby)
        assert "no word from the primary" not in standby.log_path.read_text()
        # Refused on the update feed without a word, it says so, and keeps up by its reads alone.
        wait_until(lambda: "needs the subscribe role" in lookout.log_path.read_text(), timeout=30,
                   what="the standby without the subscribe role to say what it lacks")
        in_step(primary, lookout)
    finally:
        lookout.stop()
        standby.stop()
        primary.stop()


def test_a_standby_in_step_drops_the_tombstones_its_primary_purged(folder):
    """A standby that holds tombstones its primary has since purged (it was
    in step when they were made) removes them once it learns the primary's
    purgedAnchor: its store then holds what the primary's does, tombstones
    included, and not only the same live drinks."""
    import sqlite3
    primary = primary_service(folder, {"store": {"tombstoneRetentionDays": 1 / 86_400}}).start()
    standby = standby_service(folder, primary).start()
    try:
        drinks = some_changes(primary, n=30)
        in_step(primary, standby)
        time.sleep(1.5)  # the deletions' tombstones pass their retention of a second
        primary.stop()
        primary.start()  # its start purges them
        purged = primary.request({"op": "stats"})["purgedAnchor"]
        assert purged > 0
        assert primary.request({"op": "add", "drinks": [drink()]})["ok"]
        wait_until(lambda: standby.request({"op": "stats"})["purgedAnchor"] == purged, timeout=30,
                   what="the standby to learn the primary's purge")
        in_step(primary, standby, since=purged)
    finally:
        standby.stop()
        primary.stop()

    def tombstones(service):
        db = sqlite3.connect(service.data / "coffee-tracker.sqlite")
        try:
            return db.execute("SELECT uuid, anchor FROM records WHERE deleted = 1 ORDER BY anchor").fetchall()
        finally:
            db.close()
    assert tombstones(standby) == tombstones(primary) == []
    assert len(drinks) == 30
