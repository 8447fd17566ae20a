"""docs/protocol.md §2 and §3 with pyzmq as the outside publisher and subscriber."""
import base64
import json
import time
import uuid

import zmq

from conftest import Service, await_subscription, bus_publisher, drink, next_message, wait_until


def publisher(service, hwm=0, keys=None):
    """A publisher connected to the service's ingest endpoint, past the slow
    joiner (conftest.bus_publisher); returns it and the store's anchor then.

    A PUB drops at its own send high-water mark (pyzmq's default is 1000) when
    the application outruns its I/O thread; a burst publisher raises it, as
    docs/protocol.md §2 advises. hwm=0 is unlimited.
    """
    pub = bus_publisher(service.context, connect=service.endpoints["ingest"][0], hwm=hwm,
                        setup=lambda sock: service.secure(sock, keys))
    return pub, service.request({"op": "ping"})["anchor"]


def subscriber(service, topics=(b"",), hwm=None, keys=None):
    sub = service.context.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVTIMEO, 10000)
    if hwm is not None:
        sub.setsockopt(zmq.RCVHWM, hwm)
    for t in topics:
        sub.setsockopt(zmq.SUBSCRIBE, t)
    probe_only = b"" not in topics and b"heartbeat" not in topics
    if probe_only:
        sub.setsockopt(zmq.SUBSCRIBE, b"heartbeat")
    service.secure(sub, keys)
    sub.connect(service.endpoints["updates"][0])
    # Probe: heartbeats flow every 0.2 s, so the first one proves the link.
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            topic, _ = sub.recv_multipart()
        except zmq.Again:
            continue
        if topic == b"heartbeat":
            if probe_only:
                sub.setsockopt(zmq.UNSUBSCRIBE, b"heartbeat")
            return sub
    raise AssertionError("no update ever arrived")


def next_changes(sub, timeout=30):
    """The next `changes` message, past any heartbeat still queued from the probe."""
    return next_message(sub, (b"changes",), timeout)[1]


def wait_for_anchor(service, anchor, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        current = service.request({"op": "ping"})["anchor"]
        if current >= anchor:
            return current
        time.sleep(0.02)
    raise AssertionError(f"anchor {anchor} not reached; at {current}")


def test_both_message_forms_arrays_and_deletes(service):
    pub, base = publisher(service)
    a, b, c = drink(), drink(), drink()
    pub.send_multipart([b"drink.add", json.dumps(a).encode()])
    pub.send(b"drink.add " + json.dumps([b, c]).encode())
    wait_for_anchor(service, base + 3)
    pub.send(b"drink.delete " + json.dumps({"uuid": a["uuid"]}).encode())
    pub.send_multipart([b"drink.delete", json.dumps([{"uuid": b["uuid"], "version": 3}]).encode()])
    wait_for_anchor(service, base + 5)
    added, deleted, _, _ = service.all_changes(anchor=base)
    assert [x["uuid"] for x in added] == [c["uuid"]]
    assert all(x["source"] == "bus" for x in added)
    assert {(t["uuid"], t["version"]) for t in deleted} == {(a["uuid"], 1), (b["uuid"], 3)}
    pub.close()


def test_bad_messages_go_to_the_dead_letter_file_and_good_ones_around_them_are_stored(service):
    pub, base = publisher(service)
    good1, good2 = drink(), drink()
    bad = [
        ([b"drink.add", b"{not json"], "not valid JSON"),
        ([b"drink.add", json.dumps([drink(), drink(mg=-1)]).encode()], "element 1: mgCaffeine must be > 0"),
        ([b"drink.add", json.dumps({"uuid": "nope", "mgCaffeine": 5, "date": "2026-01-01T00:00:00Z"}).encode()], "uuid"),
        ([b"drink.remove", b"{}"], "unknown topic"),
        ([b"drink.add", b"a", b"b"], "got 3 frames"),
        ([b"drink.add" + json.dumps(drink()).encode()], "unknown topic"),
        ([b"drink.add"], "got 1 frames"),
        ([b"drink.delete", b"[{\"version\": 2}]"], "uuid is required"),
    ]
    pub.send_multipart([b"drink.add", json.dumps(good1).encode()])
    for frames, _ in bad:
        pub.send_multipart(frames)
    pub.send_multipart([b"drink.add", json.dumps(good2).encode()])
    wait_for_anchor(service, base + 2)
    deadline = time.time() + 10
    path = service.data / "rejected.jsonl"
    while time.time() < deadline and (not path.exists() or len(path.read_text().splitlines()) < len(bad)):
        time.sleep(0.02)
    lines = [json.loads(l) for l in path.read_text().splitlines()]
    assert len(lines) == len(bad)
    for entry, (frames, reason) in zip(lines, bad):
        assert reason in entry["reason"], entry
        assert entry["at"].endswith("Z")
        raw = base64.b64decode(entry["body"])
        assert raw == frames[-1] or raw in frames[0]
    added, _, _, _ = service.all_changes(anchor=base)
    # The array with one bad element stored none of it.
    assert [x["uuid"] for x in added] == [good1["uuid"], good2["uuid"]]
    stats = service.request({"op": "stats"})
    assert stats["rejected"] == len(bad)
    assert service.request({"op": "ping"})["ok"]
    pub.close()


def test_changes_chain_is_unbroken_over_thousands_of_events(service):
    sub = subscriber(service, topics=(b"changes",))
    pub, base = publisher(service)
    n = 5000
    drinks = [drink(offset_s=-i) for i in range(n)]
    for d in drinks:
        pub.send_multipart([b"drink.add", json.dumps(d).encode()])
    seen = set()
    last = None
    while len(seen) < n:
        msg = next_changes(sub)
        if last is not None:
            assert msg["previousAnchor"] == last, (msg["previousAnchor"], last)
        assert msg["anchor"] - msg["previousAnchor"] == len(msg["added"]) + len(msg["deleted"])
        last = msg["anchor"]
        seen.update(a["uuid"] for a in msg["added"])
    assert seen >= {d["uuid"] for d in drinks}
    assert last == base + n
    # Group commit: far fewer commits than messages.
    assert service.request({"op": "stats"})["commits"] < n / 5
    sub.close()
    pub.close()


def test_a_heartbeat_never_runs_ahead_of_the_changes_sent_before_it(service):
    """A subscriber that sees heartbeat anchor N has already been sent every
    `changes` message up to N, so it can take a higher heartbeat as a sign of
    loss. Checked over a burst, where changes queue behind each other."""
    sub = subscriber(service, topics=(b"changes", b"heartbeat"))
    pub, base = publisher(service)
    n = 20_000
    for _ in range(n):
        pub.send_multipart([b"drink.add", json.dumps(drink(offset_s=-30 * 86400)).encode()])
    seen, beats = base, 0
    deadline = time.time() + 60
    while (seen < base + n or beats == 0) and time.time() < deadline:
        topic, body = sub.recv_multipart()
        msg = json.loads(body)
        if topic == b"changes":
            seen = max(seen, msg["anchor"])
        elif topic == b"heartbeat":
            beats += 1
            assert msg["anchor"] <= seen, (msg, seen)
    assert seen == base + n and beats > 0
    pub.close()
    sub.close()


def test_model_and_heartbeat_arrive_with_the_right_fields(service):
    sub = subscriber(service)
    service.request({"op": "add", "drinks": [drink(mg=200, offset_s=-5 * 3600)]})
    got = {}
    deadline = time.time() + 10
    while time.time() < deadline and not ("model" in got and got["model"]["anchor"] == 1 and "heartbeat" in got
                                           and got["heartbeat"]["anchor"] == 1):
        topic, body = sub.recv_multipart()
        got[topic.decode()] = json.loads(body)
    model, beat = got["model"], got["heartbeat"]
    assert set(model) == {"store", "epoch", "anchor", "at", "mgCaffeine", "level", "cupsToday", "cupsLevel",
                          "drinksToday", "halfLifeHours", "timeline"}
    assert abs(model["mgCaffeine"] - 100) < 0.1 and model["level"] == "green"
    assert len(model["timeline"]) == 287
    assert set(beat) == {"store", "epoch", "anchor", "at"} and beat["at"].endswith("Z")
    assert (beat["store"], beat["epoch"]) == (model["store"], model["epoch"])
    second = subscriber(service)  # the same topic again: still counted
    assert service.request({"op": "stats"})["subscribers"] == 2
    second.close()
    sub.close()


def test_stuck_subscriber_does_not_stop_ingestion(service):
    stuck = service.context.socket(zmq.SUB)
    stuck.setsockopt(zmq.RCVHWM, 1)
    stuck.setsockopt(zmq.LINGER, 0)
    stuck.setsockopt(zmq.SUBSCRIBE, b"")
    stuck.connect(service.endpoints["updates"][0])  # and never reads
    live = subscriber(service, topics=(b"changes",))
    pub, base = publisher(service)
    n = 20000
    for i in range(n):
        pub.send_multipart([b"drink.add", json.dumps(drink(offset_s=-i)).encode()])
    wait_for_anchor(service, base + n)
    last = base
    while last < base + n:
        msg = next_changes(live)
        if msg["anchor"] <= base:
            continue  # the publisher's probe, committed before `base` was read
        assert msg["previousAnchor"] == last
        last = msg["anchor"]
    stuck.close()
    live.close()
    pub.close()


def test_100k_single_event_messages_at_full_speed_all_stored(service):
    pub, base = publisher(service, hwm=0)
    n = 100_000
    date = drink()["date"]
    bodies = [json.dumps({"uuid": str(uuid.uuid4()), "mgCaffeine": 50, "date": date}).encode() for _ in range(n)]
    for body in bodies:
        pub.send_multipart([b"drink.add", body])
    wait_for_anchor(service, base + n, timeout=240)
    stats = service.request({"op": "stats"})
    assert stats["anchor"] == base + n
    assert stats["commits"] < n / 10
    pub.close()


def send_when_subscribed(service, pub, d, timeout=10):
    """Sends `d` once from a bound publisher (conftest.bus_publisher) as soon as
    the service, which connects to it, has subscribed; returns what the store
    holds once it is stored."""
    await_subscription(pub, timeout=timeout, what="the service's subscription to the bound publisher")
    pub.send_multipart([b"drink.add", json.dumps(d).encode()])
    wait_until(lambda: service.request({"op": "ping"})["anchor"] > 0, timeout, what=f"drink {d['uuid']} stored")
    added, _, _, _ = service.all_changes()
    assert [a["uuid"] for a in added] == [d["uuid"]]
    return added


def test_service_connects_to_a_bound_publisher(folder):
    endpoint = f"ipc://{folder}/publisher.sock"
    pub = bus_publisher(zmq.Context.instance(), bind=endpoint, linger=1000)
    s = Service(folder, {"ingest": {"bind": [], "connect": [endpoint]}}).start()
    try:
        added = send_when_subscribed(s, pub, drink())
        assert len(added) == 1
    finally:
        s.stop()
        pub.close()


def test_model_is_refreshed_without_commits_and_coalesced_under_load(folder):
    s = Service(folder, {"publish": {"refreshIntervalS": 0.3, "modelIntervalMs": 200}}).start()
    try:
        sub = subscriber(s, topics=(b"model", b"changes"))
        # No commits: refreshes still come (caffeine decays).
        models = 0
        while models < 3:
            topic, _ = sub.recv_multipart()
            models += topic == b"model"
        # A burst of commits: many `changes`, few `model`.
        pub, base = publisher(s)
        for i in range(3000):
            pub.send_multipart([b"drink.add", json.dumps(drink(offset_s=-i)).encode()])
        counts = {b"model": 0, b"changes": 0}
        last = base
        while last < base + 3000:
            topic, body = sub.recv_multipart()
            if topic in counts:
                counts[topic] += 1
            if topic == b"changes":
                last = json.loads(body)["anchor"]
        assert counts[b"changes"] > counts[b"model"]
        pub.close()
        sub.close()
    finally:
        s.stop()


def test_watch_prints_plain_lines_when_not_a_terminal(service):
    service.request({"op": "add", "drinks": [drink()]})
    p = service.run_cli("watch", "--count", "1")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1
    word, body = lines[0].split(" ", 1)
    state = json.loads(body)
    assert word == "state" and state["anchor"] == 1 and state["drinks"] == 1 and state["resyncs"] == 1


def test_watch_redraws_a_live_view_on_a_terminal(service):
    from conftest import run_on_terminal
    service.request({"op": "add", "drinks": [drink(mg=300, offset_s=-60)]})
    code, text = run_on_terminal(["watch", "--count", "1", "--config", str(service.config_path)])
    assert code == 0
    assert "\x1b[2J" in text            # redraws
    assert "\x1b[33m" in text           # yellow: 300 mg is between 200 and 400
    assert "mg (yellow)" in text and "cups" in text and "anchor" in text
    assert any(c in text for c in "▁▂▃▄▅▆▇█")  # the sparkline


def test_watch_fails_cleanly_when_nothing_answers(folder):
    import subprocess
    from conftest import BINARY
    p = subprocess.run([BINARY, "watch", "--updates", f"ipc://{folder}/nobody", "--query", f"ipc://{folder}/nobody-q",
                        "--timeout", "0.5"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "no word from" in p.stderr and "is the service running?" in p.stderr


def test_delete_then_re_add_in_one_burst_keeps_bus_order(service):
    """A batch applies saves before deletions; a drink that follows a
    deletion on the bus must not be reordered in front of it. In order, the
    deletion leaves a tombstone of version 1 and the save of version 2 wins;
    reordered, the deletion would tombstone version 2."""
    pub, base = publisher(service)
    uuids = [drink()["uuid"] for _ in range(50)]
    for uid in uuids:
        pub.send_multipart([b"drink.delete", json.dumps({"uuid": uid}).encode()])
        pub.send_multipart([b"drink.add", json.dumps(dict(drink(), uuid=uid, version=2)).encode()])
    wait_for_anchor(service, base + 100)
    added, _, _, _ = service.all_changes()
    live = {a["uuid"]: a["version"] for a in added}
    assert all(live.get(uid) == 2 for uid in uuids), [u for u in uuids if live.get(u) != 2][:3]
    pub.close()
