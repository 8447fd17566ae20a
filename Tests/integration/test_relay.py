"""docs/protocol.md §11 relays: `coffee-tracker relay` between the service's update
endpoint and subscribers, over real sockets, checked with pyzmq and with the
Python follower."""
import json
import signal
import subprocess
import threading
import time

import pytest
import zmq

from conftest import BINARY, await_subscription, bus_publisher, drink, next_message
from coffee_tracker import Client
from test_bus import next_changes
from test_follow import Following, in_step
from test_inbox import drop, processed, wait_until
from test_security import keygen, keys


class Relay:
    """A relay process; `endpoint` is where subscribers connect."""

    def __init__(self, folder, name, upstream, *extra):
        self.endpoint = f"ipc://{folder}/{name}"
        self.log = open(f"{folder}/{name}.log", "w+")
        self.process = subprocess.Popen(
            [BINARY, "relay", "--from", upstream, "--bind", self.endpoint, *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log, text=True)
        ready = []
        reader = threading.Thread(target=lambda: ready.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(20)
        assert ready and ready[0].startswith("relay: "), f"the relay did not start: {self.logged()}"

    def logged(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self, sig=signal.SIGTERM):
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(20)
        self.log.close()
        return code


@pytest.fixture
def relays(service):
    started = []

    def start(name, upstream, *extra):
        relay = Relay(service.folder, name, upstream, *extra)
        started.append(relay)
        return relay

    yield start
    for relay in started:
        relay.stop(signal.SIGKILL)


def model_only(context, endpoint):
    """A SUB of `model` alone, no probe: what it receives first is the relay's cached model."""
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVTIMEO, 5000)
    sub.setsockopt(zmq.SUBSCRIBE, b"model")
    sub.connect(endpoint)
    return sub


def sub_to(context, endpoint, topics=(b"",), curve=None):
    """A SUB on `endpoint`, returned once a heartbeat proves the link (None if none comes in 3 s)."""
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVTIMEO, 200)
    if curve:
        public, secret, server = curve
        sub.curve_publickey, sub.curve_secretkey, sub.curve_serverkey = public, secret, server.encode()
    for t in set(topics) | {b"heartbeat"}:
        sub.setsockopt(zmq.SUBSCRIBE, t)
    sub.connect(endpoint)
    deadline = time.time() + 3
    while time.time() < deadline:
        try:
            if sub.recv_multipart()[0] == b"heartbeat":
                if b"heartbeat" not in topics and b"" not in topics:
                    sub.setsockopt(zmq.UNSUBSCRIBE, b"heartbeat")
                sub.setsockopt(zmq.RCVTIMEO, 10000)
                return sub
        except zmq.Again:
            pass
    sub.close()
    return None


def test_two_relays_deliver_every_change_in_order_and_a_late_subscriber_gets_the_model_at_once(service, relays):
    updates = service.endpoints["updates"][0]
    first = relays("relay1", updates)
    second = relays("relay2", first.endpoint)
    context = zmq.Context.instance()
    sub = sub_to(context, second.endpoint, topics=(b"changes",))
    assert sub is not None, "no heartbeat through two relays"
    following = Following(Client(query=service.endpoints["query"][0], updates=second.endpoint, timeout=5))

    for _ in range(20):
        assert service.request({"op": "add", "drinks": [drink(), drink()]})["ok"]
    lines = [drink() for _ in range(1000)]
    drop(service, "many.jsonl", "\n".join(json.dumps(d) for d in lines))
    wait_until(lambda: processed(service, "many.jsonl"), what="the file imported")
    store_anchor = service.request({"op": "ping"})["anchor"]
    assert store_anchor == 1040

    previous, anchors = 0, []
    while previous < store_anchor:
        m = next_changes(sub)
        assert m["previousAnchor"] == previous, f"the chain broke through two relays at {previous}"
        anchors += [x["anchor"] for x in m["added"]]
        previous = m["anchor"]
    assert anchors == list(range(1, 1041)), "every change, each once, in order"
    in_step(service, following)  # a follower behind two relays matches the store
    following.finish(service)

    # A late subscriber of `model` alone: the cached model at once, not at
    # the next change (none comes) or the service's next refresh.
    time.sleep(0.5)
    started = time.monotonic()
    late = model_only(context, first.endpoint)
    topic, body = late.recv_multipart()
    assert topic == b"model" and json.loads(body)["anchor"] == service.request({"op": "ping"})["anchor"]
    assert time.monotonic() - started < 5
    late_behind_two = model_only(context, second.endpoint)
    topic, body = late_behind_two.recv_multipart()
    assert topic == b"model" and json.loads(body)["anchor"] >= store_anchor

    # SIGUSR1 logs the counts; SIGTERM drains and exits 0 with them.
    first.process.send_signal(signal.SIGUSR1)
    wait_until(lambda: "relay counts" in first.logged(), timeout=10, what="the counts on SIGUSR1")
    log = first.logged()
    assert "upstreamGaps=0" in log and "lastValueSends=" in log
    for s in (sub, late, late_behind_two):
        s.close()
    assert second.stop() == 0
    assert first.stop() == 0


def test_curve_at_the_relay_admits_its_clients_and_refuses_an_unknown_key(service, relays, tmp_path):
    if not zmq.has("curve"):
        pytest.skip("this pyzmq's libzmq has no CURVE")
    clients = tmp_path / "clients"
    clients.mkdir()
    server_public = keygen(tmp_path / "relay")
    keygen(clients / "screen", "--roles", "subscribe")
    keygen(tmp_path / "stranger", "--roles", "subscribe")  # not in the clients directory
    keygen(clients / "writer", "--roles", "write")  # admitted, but without the role
    relay = relays("secure", service.endpoints["updates"][0], "--secret-key-file", str(tmp_path / "relay.key_secret"),
                   "--clients-directory", str(clients))
    context = zmq.Context.instance()
    screen = sub_to(context, relay.endpoint, curve=(*keys(clients / "screen.key_secret"), server_public))
    assert screen is not None, "an admitted subscriber got nothing"
    for name in (tmp_path / "stranger.key_secret", clients / "writer.key_secret"):
        assert sub_to(context, relay.endpoint, curve=(*keys(name), server_public)) is None, f"{name} was let in"
    assert service.request({"op": "add", "drinks": [drink()]})["ok"]
    assert next_changes(screen)["anchor"] == 1
    screen.close()
    assert relay.stop() == 0


def test_plaintext_beyond_loopback_and_a_missing_bind_are_refused(service):
    updates = service.endpoints["updates"][0]
    for args, code, text in [
        (["--from", updates, "--bind", "tcp://0.0.0.0:0"], 2, "not on loopback"),
        (["--from", updates], 2, "--bind"),
        (["--from", "127.0.0.1:5556", "--bind", "ipc:///tmp/x"], 2, "scheme"),
    ]:
        p = subprocess.run([BINARY, "relay", *args], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
        assert p.returncode == code and text in p.stderr, (args, p.returncode, p.stderr)


def test_a_gap_upstream_is_passed_on_unchanged_and_counted(tmp_path):
    """A relay passes `changes` as they come, gaps too (the followers behind
    it see them by the chain and resync), and counts the gaps it saw."""
    context = zmq.Context.instance()
    upstream = bus_publisher(context, bind=f"ipc://{tmp_path}/upstream", linger=0)
    relay = Relay(tmp_path, "relay", f"ipc://{tmp_path}/upstream")
    try:
        await_subscription(upstream, b"changes", what="the relay's subscription upstream")
        sub = context.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.RCVTIMEO, 200)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(relay.endpoint)
        chain = [(1, 0), (2, 1), (5, 3), (6, 5)]  # anchors 3 and 4 were lost before the relay

        def message(anchor, previous):  # as the service writes it: compact
            return json.dumps({"anchor": anchor, "previousAnchor": previous, "added": [], "deleted": []},
                              separators=(",", ":")).encode()

        # Heartbeats until the relay's own feed reaches `sub` (the second slow joiner), then the chain once.
        deadline = time.time() + 10
        while True:
            assert time.time() < deadline, "nothing came through the relay"
            upstream.send_multipart([b"heartbeat", b'{"anchor":0}'])
            try:
                sub.recv_multipart()
                break
            except zmq.Again:
                pass
        sub.setsockopt(zmq.RCVTIMEO, 5000)
        for anchor, previous in chain:
            upstream.send_multipart([b"changes", message(anchor, previous)])
        received = []
        while len(received) < len(chain):
            _, m = next_message(sub, (b"changes",), what=f"the chain through the relay ({len(received)} of {len(chain)})")
            received.append((m["anchor"], m["previousAnchor"]))
        assert received == chain  # unchanged, the gap included
        def counted():  # the counts are the capture's, a moment behind the subscriber: ask again until they show it
            relay.process.send_signal(signal.SIGUSR1)
            time.sleep(0.2)
            return "upstreamGaps=1" in relay.logged()

        wait_until(counted, timeout=10, what="the relay to count the gap")
        sub.close()
    finally:
        relay.stop()
        upstream.close()
