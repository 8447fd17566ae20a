"""The Swift follower (`CoffeeTrackerClient`'s `FeedFollower`, through
`coffee-tracker watch`) against the real service under the same faults as
the Python one: restarts (SIGTERM, SIGKILL), a follower stopped (SIGSTOP)
while more is published than the queues hold, a 40,000-drink file in chained
pages, and tombstones purged past its anchor; and a scripted gap that only
`previousAnchor` shows. It must end with its drinks (count and an order-free
digest of their UUIDs) those of `changes` from null, and its model that of
the store's anchor."""
import json
import os
import signal
import subprocess
import threading
import time
import uuid

from conftest import BINARY, Service, drink
from test_bus import publisher
from test_follow import ScriptedService
from test_inbox import drop, processed, wait_until


def digest(uuids):
    value = 0
    for u in uuids:
        value ^= int.from_bytes(uuid.UUID(u).bytes[:8], "big")
    return format(value, "x")


class Watching:
    """`coffee-tracker watch` (not on a terminal: one JSON line per state) on a
    thread that keeps the last state it printed."""

    def __init__(self, *args):
        self.process = subprocess.Popen([BINARY, "watch", "--timeout", "0", *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        self.state = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.process.stdout:
            word, _, body = line.partition(" ")
            if word == "state":
                self.state = json.loads(body)

    def pause(self):
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self):
        self.resume()
        self.process.terminate()
        self.process.wait(10)
        self.thread.join(10)


def in_step(service, watching, timeout=60):
    def same():
        assert watching.process.poll() is None, "watch exited: " + watching.process.stderr.read()
        s = watching.state
        if s is None:
            return False
        added, _, anchor, _ = service.all_changes(None, limit=10_000)
        return (s["anchor"] == anchor and s["drinks"] == len(added)
                and s["digest"] == digest(d["uuid"] for d in added) and s["model"] == anchor)
    wait_until(same, timeout=timeout, what="the Swift follower to be in step with the store")


def test_the_swift_follower_survives_restarts_mid_stream(service):
    watching = Watching("--config", str(service.config_path))
    try:
        wait_until(lambda: watching.state is not None, what="the first state")
        pub, _ = publisher(service)
        stop = threading.Event()

        def send():
            while not stop.is_set():
                pub.send_multipart([b"drink.add", json.dumps(drink()).encode()])
                time.sleep(0.005)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        for how in (signal.SIGTERM, signal.SIGKILL):
            wait_until(lambda: (watching.state or {}).get("anchor", 0) >= 20, what="changes to flow")
            if how == signal.SIGKILL:
                service.kill()
            else:
                service.stop(how)
            service.start()
            time.sleep(0.5)
        stop.set()
        sender.join(10)
        pub.close()
        in_step(service, watching)
    finally:
        watching.stop()


def test_the_swift_follower_resyncs_after_it_was_stopped_past_the_queues(folder):
    service = Service(folder, {"updates": {"sendHighWaterMark": 10}}).start()
    watching = Watching("--config", str(service.config_path))
    try:
        wait_until(lambda: watching.state is not None, what="the first state")
        watching.pause()
        for _ in range(1600):
            assert service.request({"op": "add", "drinks": [drink()]})["ok"]
        watching.resume()
        in_step(service, watching)
        assert watching.state["resyncs"] >= 2, "no gap met: the test proves nothing"
    finally:
        watching.stop()
        service.stop()


def test_the_swift_follower_applies_a_40000_drink_file_from_its_pages(service):
    watching = Watching("--config", str(service.config_path))
    try:
        wait_until(lambda: watching.state is not None, what="the first state")
        lines = "\n".join(json.dumps(drink(offset_s=-i)) for i in range(40_000))
        drop(service, "many.jsonl", lines + "\n")
        wait_until(lambda: processed(service, "many.jsonl"), timeout=120, what="the file to be imported")
        in_step(service, watching, timeout=120)
        assert watching.state["resyncs"] == 1 and watching.state["applied"] == 40_000
    finally:
        watching.stop()


def test_the_swift_follower_starts_again_from_null_when_its_anchor_expired(folder):
    service = Service(folder, {"updates": {"sendHighWaterMark": 10},
                               "store": {"tombstoneRetentionDays": 1 / 86_400}}).start()
    watching = Watching("--config", str(service.config_path))
    try:
        kept = [drink() for _ in range(1600)]
        assert service.request({"op": "add", "drinks": kept})["ok"]
        wait_until(lambda: (watching.state or {}).get("anchor") == 1600, what="the follower to reach 1600")
        watching.pause()
        for d in kept[:1200]:
            assert service.request({"op": "delete", "deletions": [d["uuid"]]})["ok"]
        time.sleep(1.5)
        service.stop()
        service.start()
        assert service.request({"op": "stats"})["purgedAnchor"] > 1600
        watching.resume()
        in_step(service, watching)
        assert watching.state["drinks"] == 400
    finally:
        watching.stop()
        service.stop()


def test_a_gap_is_mended_by_the_swift_follower_not_applied(folder):
    scripted = ScriptedService()
    empty = os.path.join(folder, "empty.json")  # no service of its own to find
    with open(empty, "w") as f:
        f.write("{}")
    watching = Watching("--query", scripted.query, "--updates", scripted.updates, "--config", empty)
    try:
        scripted.play(lambda: (watching.state or {}).get("anchor"))
        assert watching.state["drinks"] == 3 and watching.state["digest"] == digest(scripted.uuids())
    finally:
        watching.stop()
        scripted.close()
