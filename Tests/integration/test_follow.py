"""The Python client (clients/python, docs/protocol.md §10) against the real
service: its calls, and `follow()` kept in step through restarts, dropped
updates, a commit of many pages and purged tombstones. Each follower ends
with its drinks equal to `changes` from null and its model of the store's
anchor. `make test` runs this with the package installed in a virtual
environment of its own."""
import json
import signal
import threading
import time
import uuid

import pytest
import zmq
from conftest import Service, await_subscription, bus_publisher, drink
from test_bus import publisher
from test_inbox import drop, processed, wait_until

from coffee_tracker import Client, CoffeeTrackerError


class Following:
    """Runs `client.follow()` on a thread, keeping a copy of the last state;
    `pause()` parks it at a yield (its subscriber queue fills meanwhile)."""

    def __init__(self, client):
        self.client = client
        self.anchor = None
        self.drinks = set()
        self.model_anchor = None
        self.settings = {}
        self.states = 0
        self.error = None
        self.stop = threading.Event()
        self.running = threading.Event()
        self.running.set()
        self.parked = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for state in self.client.follow(timeout=60):
                self.anchor = state.anchor
                self.drinks = set(state.drinks)
                self.model_anchor = state.model["anchor"] if state.model else None
                self.settings = {scope: dict(names) for scope, names in state.settings.items()}
                self.states += 1
                if self.stop.is_set():
                    return
                if not self.running.is_set():
                    self.parked.set()
                    self.running.wait(60)
                    self.parked.clear()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error

    def pause(self, service):
        """Parks the follower at its next state, which a drink added here brings."""
        self.running.clear()
        service.request({"op": "add", "drinks": [drink()]})
        wait_until(self.parked.is_set, timeout=20, what="the follower to park")

    def resume(self):
        self.running.set()

    def finish(self, service):
        self.stop.set()
        self.running.set()
        service.request({"op": "add", "drinks": [drink()]})  # one more state, so that it sees the flag
        self.thread.join(20)
        assert not self.thread.is_alive(), "the follower did not stop"


def in_step(service, following, timeout=60):
    """Waits until the follower's drinks are those of `changes` from null and
    its model is that of the store's anchor."""
    def same():
        assert following.error is None, f"the follower failed: {following.error!r}"
        added, _, anchor, _ = service.all_changes(None, limit=10_000)
        return (following.anchor == anchor and following.drinks == {d["uuid"] for d in added}
                and following.model_anchor == anchor)
    wait_until(same, timeout=timeout, what="the follower to be in step with the store")


class Recorded(Client):
    """A client that records its `changes` calls: (anchor asked, error code or None)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def changes(self, anchor=None, limit=1000):
        try:
            reply = super().changes(anchor=anchor, limit=limit)
        except CoffeeTrackerError as error:
            self.calls.append((anchor, error.code))
            raise
        self.calls.append((anchor, None))
        return reply


def test_the_calls_of_section_4(service):
    client = Client(config=service.config_path, timeout=5)
    assert client.ping() == 0
    reply = client.add([{"mgCaffeine": 95, "date": "2026-11-30T08:00:00Z"}, drink(mg=64)])
    assert (reply["added"], reply["duplicates"], reply["anchor"]) == (2, 0, 2)
    page = client.changes(anchor=None)
    assert len(page["added"]) == 2 and page["hasMore"] is False
    uuids = [d["uuid"] for d in page["added"]]
    assert all(uuid.UUID(u) for u in uuids)  # a missing uuid was filled
    assert client.delete([uuids[0]])["deleted"] == 1
    assert client.model()["anchor"] == 3
    assert client.stats()["stored"] >= 2
    with pytest.raises(CoffeeTrackerError) as refused:
        client.add([{"mgCaffeine": -1, "date": "2026-11-30T08:00:00Z"}])
    assert (refused.value.code, refused.value.index, refused.value.field) == ("invalid_drink", 0, "mgCaffeine")
    with pytest.raises(ValueError, match="tcp://127.0.0.1:5557"):
        Client(query="127.0.0.1:5557", updates="tcp://127.0.0.1:5556")
    client.close()


def test_a_call_to_no_service_raises_timeout_error(folder):
    client = Client(query="tcp://127.0.0.1:9", updates="tcp://127.0.0.1:9", timeout=0.3)
    with pytest.raises(TimeoutError):
        client.ping()


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_follow_survives_a_restart_mid_stream(service, how):
    following = Following(Client(config=service.config_path, timeout=2))
    wait_until(lambda: following.anchor == 0, what="the first state")
    pub, _ = publisher(service)
    stop = threading.Event()

    def send():
        while not stop.is_set():
            pub.send_multipart([b"drink.add", json.dumps(drink()).encode()])
            time.sleep(0.005)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    wait_until(lambda: (following.anchor or 0) >= 20, what="changes to flow")
    if how == signal.SIGKILL:
        service.kill()
    else:
        service.stop(how)
    service.start()  # the query endpoint binds a new port: found again through endpoints.json
    wait_until(lambda: service.request({"op": "ping"})["anchor"] > 0)
    time.sleep(0.5)
    stop.set()
    sender.join(10)
    pub.close()
    in_step(service, following)
    following.finish(service)


def test_follow_resyncs_after_updates_dropped_past_the_high_water_mark(folder):
    service = Service(folder, {"updates": {"sendHighWaterMark": 10}}).start()
    try:
        client = Recorded(config=service.config_path, timeout=5)
        following = Following(client)
        wait_until(lambda: following.anchor == 0, what="the first state")
        following.pause(service)
        # One commit per request, each its own `changes` message: more than
        # the subscriber's queue (1000) and the service's (10) hold.
        for _ in range(1600):
            assert service.request({"op": "add", "drinks": [drink()]})["ok"]
        following.resume()
        in_step(service, following)
        # ZeroMQ drops past a high-water mark without counting: the resync
        # from an anchor (not null) shows that a gap was met, and mended.
        resyncs = [anchor for anchor, _ in client.calls if anchor is not None]
        assert resyncs and 0 < resyncs[0] < 1601, f"no gap met: the test proves nothing ({client.calls[:5]})"
        following.finish(service)
    finally:
        service.stop()


def test_follow_applies_a_40000_drink_file_from_its_chained_pages_without_a_resync(service):
    client = Recorded(config=service.config_path, timeout=5)
    following = Following(client)
    wait_until(lambda: following.anchor == 0, what="the first state")
    lines = "\n".join(json.dumps(drink(offset_s=-i)) for i in range(40_000))
    drop(service, "many.jsonl", lines + "\n")
    wait_until(lambda: processed(service, "many.jsonl"), timeout=120, what="the file to be imported")
    in_step(service, following, timeout=120)
    assert following.anchor == 40_000
    assert client.calls == [(None, None)], f"resynced instead of following the pages: {client.calls[:5]}"
    following.finish(service)


def test_follow_starts_again_from_null_when_its_anchor_has_expired(folder):
    retention_days = 1 / 86_400  # a second
    service = Service(folder, {"updates": {"sendHighWaterMark": 10},
                               "store": {"tombstoneRetentionDays": retention_days}}).start()
    try:
        client = Recorded(config=service.config_path, timeout=5)
        following = Following(client)
        kept = [drink() for _ in range(1600)]
        assert service.request({"op": "add", "drinks": kept})["ok"]
        wait_until(lambda: following.anchor == 1600, what="the follower to reach 1600")
        # Parked at 1601 (the drink that parks it): then 1,200 tombstones, one message each.
        following.pause(service)
        # Tombstones one per message, more than the queues hold, so the
        # follower will see a gap; then a restart purges them (older than a second).
        for d in kept[:1200]:
            assert service.request({"op": "delete", "deletions": [d["uuid"]]})["ok"]
        time.sleep(1.5)
        service.stop()
        service.start()
        assert service.request({"op": "stats"})["purgedAnchor"] > 1601
        following.resume()
        in_step(service, following)
        codes = [code for _, code in client.calls]
        assert "anchor_expired" in codes, f"never asked from a purged anchor: {client.calls}"
        assert client.calls[-1][0] is None or (None, None) in client.calls[codes.index("anchor_expired"):]
        assert len(following.drinks) == 401
        following.finish(service)
    finally:
        service.stop()


class ScriptedService:
    """A ROUTER and a PUB of the test's own that play a service whose feed
    skips anchor 2: `changes` from null gives drink a at anchor 1; from 1,
    drinks b and c up to 3; the model is refused (a follower goes on without
    one). So the only sign of the missing message is `previousAnchor`: no
    heartbeat or model runs ahead of a follower to cover for a missing gap check."""

    def __init__(self):
        context = zmq.Context.instance()
        self.router = context.socket(zmq.ROUTER)
        self.query = f"tcp://127.0.0.1:{self.router.bind_to_random_port('tcp://127.0.0.1')}"
        self.pub = bus_publisher(context, linger=0)
        self.updates = f"tcp://127.0.0.1:{self.pub.bind_to_random_port('tcp://127.0.0.1')}"
        # As v3 writes them in `changes`: each with the anchor of its own change.
        self.a, self.b, self.c = (dict(drink(mg=mg), anchor=anchor) for anchor, mg in ((1, 10), (2, 20), (3, 30)))
        self.asked = []

    def answer(self, timeout_ms=10_000):
        assert self.router.poll(timeout_ms), "the follower asked nothing"
        *envelope, body = self.router.recv_multipart()
        request = json.loads(body)
        self.asked.append((request["op"], request.get("anchor")))
        if request["op"] == "changes" and request.get("anchor") is None:
            reply = {"ok": True, "added": [self.a], "deleted": [], "anchor": 1, "hasMore": False}
        elif request["op"] == "changes":
            reply = {"ok": True, "added": [self.b, self.c], "deleted": [], "anchor": 3, "hasMore": False}
        else:
            reply = {"ok": False, "error": {"code": "unavailable", "message": "scripted"}}
        self.router.send_multipart([*envelope, json.dumps(reply).encode()])

    def play(self, anchor_of_follower):
        """The first sync, then anchor 3 announced as following 2, then the resync it must cause."""
        self.answer()  # changes from null
        self.answer()  # the model
        wait_until(lambda: anchor_of_follower() == 1, what="the first state")
        await_subscription(self.pub, b"changes", what="the follower's subscription to changes")
        self.pub.send_multipart([b"changes", json.dumps(
            {"anchor": 3, "previousAnchor": 2, "added": [self.c], "deleted": []}).encode()])
        for _ in range(10):  # heartbeats at the anchor the follower will reach: nothing ahead of it
            self.pub.send_multipart([b"heartbeat", json.dumps({"anchor": 3, "at": "2026-12-01T00:00:00Z"}).encode()])
            if self.router.poll(100):
                break
        self.answer()  # the resync from anchor 1
        self.answer()  # and its model
        wait_until(lambda: anchor_of_follower() == 3, what="the follower to reach 3")
        assert ("changes", 1) in self.asked

    def uuids(self):
        return {self.a["uuid"], self.b["uuid"], self.c["uuid"]}

    def close(self):
        self.router.close(0)
        self.pub.close(0)


def test_a_gap_in_the_chain_is_mended_from_the_query_endpoint_not_applied(folder):
    scripted = ScriptedService()
    following = Following(Client(query=scripted.query, updates=scripted.updates, timeout=5))
    try:
        scripted.play(lambda: following.anchor)
        assert following.drinks == scripted.uuids()
    finally:
        following.stop.set()
        following.running.set()
        scripted.pub.send_multipart([b"changes", json.dumps(
            {"anchor": 4, "previousAnchor": 3, "added": [], "deleted": []}).encode()])
        following.thread.join(10)
        scripted.close()
