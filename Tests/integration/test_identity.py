"""The store's identity (docs/protocol.md §13), against the real service:
`store` and `epoch` on every reply, message and file that carries an
anchor; a restore under following clients (Python's and the Swift
library's, through `watch`); a promotion; a standby's refusals; a model
cache of another epoch rebuilt."""
import json
import signal
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from coffee_tracker import Client
from conftest import BINARY, Service, drink, next_message, wait_until
from test_bus import subscriber
from test_standby import everything, in_step, primary_service, standby_service


def identity(obj):
    return obj["store"], obj["epoch"]


def live(service):
    """UUID -> drink of every live drink, read from null."""
    added, _, _, _ = service.all_changes()
    return {d["uuid"]: d for d in added}


def digest(uuids):
    """`watch`'s digest: the XOR of every UUID's first 8 bytes, in hex."""
    value = 0
    for u in uuids:
        value ^= int.from_bytes(uuid.UUID(u).bytes[:8], "big")
    return format(value, "x")


def restore(service, backup):
    """`coffee-tracker restore` of `backup` into the stopped `service`'s store."""
    done = subprocess.run([BINARY, "restore", str(backup), "--config", str(service.config_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_reply_message_and_file_that_carries_an_anchor_names_the_store_and_its_epoch(service):
    s = service
    ping = s.request({"op": "ping"})
    store, epoch = identity(ping)
    assert str(uuid.UUID(store)).upper() == store.upper() and epoch == 1
    sub = subscriber(s, topics=(b"changes", b"model", b"heartbeat"))
    s.request({"op": "add", "drinks": [drink()]})
    seen = {}
    while len(seen) < 3:
        topic, message = next_message(sub, what=f"changes, model and heartbeat (seen {sorted(seen)})")
        seen[topic] = message
    sub.close(0)
    for topic, message in seen.items():
        assert identity(message) == (store, epoch), topic
    for op in ({"op": "changes", "anchor": None}, {"op": "model"}, {"op": "stats"}):
        assert identity(s.request(op)) == (store, epoch), op
    assert identity(json.loads((s.data / "endpoints.json").read_text())) == (store, epoch)
    http = s.endpoints["http"]
    assert identity(json.loads(urllib.request.urlopen(f"http://{http}/api/v1/ping", timeout=10).read())) == (store, epoch)
    metrics = urllib.request.urlopen(f"http://{http}/metrics", timeout=10).read().decode()
    assert "coffee_tracker_store_epoch 1" in metrics
    # A restart keeps the identity.
    s.stop()
    s.start()
    assert identity(s.request({"op": "ping"})) == (store, epoch)


def test_a_restore_under_following_clients_raises_the_epoch_and_they_end_equal_to_the_restored_store(folder):
    """Python's follower and the Swift library's (`watch`) hold the store at
    anchor 5 of epoch 1. The store is then restored, twice, to a backup of
    another history that runs past anchor 5: only the epoch tells the
    followers that what they hold means nothing there."""
    s = primary_service(folder, {"publish": {"heartbeatIntervalS": 0.2}}).start()
    try:
        first = [drink(mg=10 + i) for i in range(3)]
        s.request({"op": "add", "drinks": first})
        early = s.request({"op": "backup", "name": "early.sqlite"})["file"]
        removed = [drink(mg=50), drink(mg=51)]  # anchors 4 and 5: gone after the restore
        assert s.request({"op": "add", "drinks": removed})["anchor"] == 5

        client = Client(config=str(s.config_path), timeout=30)
        follow = client.follow(timeout=60)
        state = next(follow)
        while state.anchor < 5:
            state = next(follow)
        assert (state.store, state.epoch) == identity(s.request({"op": "ping"}))
        watch = subprocess.Popen([BINARY, "watch", "--config", str(s.config_path), "--timeout", "60"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        states = []
        reader = threading.Thread(target=lambda: states.extend(line for line in watch.stdout), daemon=True)
        reader.start()
        wait_until(lambda: any(json.loads(l[6:])["anchor"] == 5 for l in list(states)), 30, "watch never reached anchor 5")
        watch.send_signal(signal.SIGSTOP)  # both followers now hold anchor 5 of epoch 1, and wait

        # Another history from the early backup: epoch 2, anchors 4 to 7, backed up, then restored again (epoch 3).
        s.stop()
        out = restore(s, early)
        assert "epoch 2" in out
        s.start()
        assert identity(s.request({"op": "ping"}))[1] == 2
        later = [drink(mg=70 + i) for i in range(4)]
        assert s.request({"op": "add", "drinks": later})["anchor"] == 7
        other = s.request({"op": "backup", "name": "other.sqlite"})["file"]
        s.stop()
        assert "epoch 3" in restore(s, other)  # above the backup's 2 and the replaced store's 2
        s.start()
        restored = live(s)
        assert set(restored) == {d["uuid"] for d in first + later}
        store, epoch = identity(s.request({"op": "ping"}))
        assert epoch == 3
        log = s.log_path.read_text()
        assert "the model cache is of another store or epoch; rebuilding it from the store" in log

        watch.send_signal(signal.SIGCONT)
        state = next(follow)
        deadline = time.time() + 60
        while set(state.drinks) != set(restored) or state.anchor != 7:
            assert time.time() < deadline, f"the Python follower holds {len(state.drinks)} drinks at {state.anchor}"
            state = next(follow)
        assert (state.store, state.epoch) == (store, epoch)
        assert not {d["uuid"] for d in removed} & set(state.drinks)

        want = digest(restored)
        wait_until(lambda: any(json.loads(l[6:])["digest"] == want and json.loads(l[6:])["epoch"] == 3
                               for l in list(states)), 60, "watch never ended equal to the restored store")
        watch.send_signal(signal.SIGTERM)
        _, err = watch.communicate(timeout=30)
        assert err.count("the service's store changed") == 1, err
    finally:
        if s.process and s.process.poll() is None:
            s.stop()


def test_a_standby_refuses_another_store_unless_told_to_adopt_it(folder):
    primary = primary_service(folder).start()
    other = Service(Path(folder) / "other", {"query": {"bind": [f"ipc://{Path(folder)}/other/query.sock"]}}).start()
    standby = None
    try:
        primary.request({"op": "add", "drinks": [drink() for _ in range(3)]})
        other.request({"op": "add", "drinks": [drink() for _ in range(5)]})
        standby = standby_service(folder, primary).start()
        held = in_step(primary, standby)
        assert identity(standby.request({"op": "ping"})) == identity(primary.request({"op": "ping"}))
        standby.stop()

        config = json.loads(standby.config_path.read_text())
        config["follow"] = {"query": f"ipc://{other.folder}/query.sock", "updates": f"ipc://{other.folder}/updates.sock"}
        standby.config_path.write_text(json.dumps(config))
        standby.start()
        wait_until(lambda: "is another store" in standby.log_path.read_text(), 30, "no refusal in the log")
        time.sleep(1)
        assert everything(standby) == held  # it serves what it holds
        assert identity(standby.request({"op": "ping"})) == identity(primary.request({"op": "ping"}))
        assert standby.log_path.read_text().count("is another store") == 1  # said once
        standby.stop()

        config["follow"]["adopt"] = True
        standby.config_path.write_text(json.dumps(config))
        standby.start()
        in_step(other, standby)
        assert identity(standby.request({"op": "ping"})) == identity(other.request({"op": "ping"}))
        assert "taking the primary's store" in standby.log_path.read_text()
        # endpoints.json is kept current: written again when the standby took the other store.
        wait_until(lambda: identity(json.loads((standby.data / "endpoints.json").read_text()))
                   == identity(other.request({"op": "ping"})), 10, "endpoints.json still names the old store")
    finally:
        for s in (standby, other, primary):
            if s and s.process and s.process.poll() is None:
                s.stop()


def test_a_promotion_raises_the_epoch_once_and_the_old_primary_is_refused_then_copied_again(folder):
    primary = primary_service(folder).start()
    standby = standby_service(folder, primary).start()
    try:
        primary.request({"op": "add", "drinks": [drink() for _ in range(4)]})
        in_step(primary, standby)
        store, _ = identity(primary.request({"op": "ping"}))
        primary.kill()
        standby.stop()
        config = json.loads(standby.config_path.read_text())
        follow = config.pop("follow")
        standby.config_path.write_text(json.dumps(config))
        standby.start()  # promoted
        assert identity(standby.request({"op": "ping"})) == (store, 2)
        assert "a standby's store promoted" in standby.log_path.read_text()
        standby.request({"op": "add", "drinks": [drink(mg=1)]})
        standby.stop()
        standby.start()
        assert identity(standby.request({"op": "ping"})) == (store, 2)  # once

        primary.start()  # the old primary, epoch 1, with a change of its own: a diverged history
        diverged = drink(mg=2)
        primary.request({"op": "add", "drinks": [diverged]})
        assert identity(primary.request({"op": "ping"})) == (store, 1)
        # The promoted store refuses to follow the old primary: a lower epoch of its own store.
        held = everything(standby)
        standby.stop()
        config["follow"] = follow
        standby.config_path.write_text(json.dumps(config))
        standby.start()
        wait_until(lambda: "older than this standby's epoch 2" in standby.log_path.read_text(), 30, "no refusal")
        assert identity(standby.request({"op": "ping"})) == (store, 2)  # restarted as a standby: no promotion
        assert everything(standby) == held

        # Promoted again (epoch 3), the old primary rejoins as its standby: it
        # drops its diverged history and copies the promoted store from 0.
        standby.stop()
        del config["follow"]
        standby.config_path.write_text(json.dumps(config))
        standby.start()
        assert identity(standby.request({"op": "ping"})) == (store, 3)
        primary.stop()
        old = json.loads(primary.config_path.read_text())
        old["follow"] = {"query": f"ipc://{standby.folder}/query.sock", "updates": f"ipc://{standby.folder}/updates.sock"}
        standby_config = json.loads(standby.config_path.read_text())
        standby_config["query"] = {"bind": [f"ipc://{standby.folder}/query.sock"]}
        standby.config_path.write_text(json.dumps(standby_config))
        standby.stop()
        standby.start()
        primary.config_path.write_text(json.dumps(old))
        primary.start()
        in_step(standby, primary)
        assert identity(primary.request({"op": "ping"})) == (store, 3)
        assert diverged["uuid"] not in live(primary)
        assert "a later epoch of this store" in primary.log_path.read_text()
    finally:
        for s in (standby, primary):
            if s and s.process and s.process.poll() is None:
                s.stop()
