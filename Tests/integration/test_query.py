"""docs/protocol.md §4 over a real ROUTER socket, from pyzmq REQ and DEALER clients."""
import json
import time
import uuid

import zmq

from conftest import Service, drink, VECTORS


def test_ping_answers_with_the_anchor(service):
    reply = service.request({"op": "ping"})
    assert reply == {"ok": True, "anchor": 0, "store": reply["store"], "epoch": 1}


def test_add_is_acknowledged_with_its_anchor_and_readable(service):
    d = drink(type="smallCoffee", source="phone")
    reply = service.request({"op": "add", "drinks": [d]})
    assert reply == {"ok": True, "anchor": 1, "added": 1, "duplicates": 0}
    added, deleted, anchor, _ = service.all_changes()
    assert anchor == 1 and deleted == []
    assert added[0]["uuid"] == d["uuid"]
    assert added[0]["mgCaffeine"] == 96
    assert added[0]["type"] == "smallCoffee" and added[0]["source"] == "phone"
    assert added[0]["version"] == 1
    assert added[0]["date"].endswith("Z") and len(added[0]["date"]) == 24


def test_duplicates_and_versions(service):
    d = drink(mg=100)
    assert service.request({"op": "add", "drinks": [d]})["added"] == 1
    again = service.request({"op": "add", "drinks": [d]})
    assert again["added"] == 0 and again["duplicates"] == 1 and again["anchor"] == 1
    newer = dict(d, mgCaffeine=150, version=2)
    assert service.request({"op": "add", "drinks": [newer]})["added"] == 1
    older = dict(d, mgCaffeine=10, version=1)
    assert service.request({"op": "add", "drinks": [older]})["duplicates"] == 1
    added, _, anchor, _ = service.all_changes()
    assert [(a["mgCaffeine"], a["version"]) for a in added] == [(150, 2)]
    assert anchor == 2


def test_deletes_known_and_unknown(service):
    d = drink()
    service.request({"op": "add", "drinks": [d]})
    stranger = str(uuid.uuid4())
    reply = service.request({"op": "delete", "deletions": [{"uuid": d["uuid"]}, {"uuid": stranger, "version": 4}]})
    assert reply == {"ok": True, "anchor": 3, "deleted": 1, "unknown": 1}
    added, deleted, _, _ = service.all_changes(anchor=1)
    assert added == []
    assert {(t["uuid"], t["version"]) for t in deleted} == {(d["uuid"], 1), (stranger.upper(), 4)}
    # The tombstone keeps a late save of that version or lower deleted.
    late = {"uuid": stranger, "mgCaffeine": 5, "date": d["date"], "version": 4}
    assert service.request({"op": "add", "drinks": [late]})["duplicates"] == 1


def test_paging_with_has_more_skips_and_repeats_nothing(service):
    drinks = [drink(offset_s=-i) for i in range(2500)]
    for i in range(0, 2500, 500):
        assert service.request({"op": "add", "drinks": drinks[i:i + 500]})["added"] == 500
    added, _, anchor, pages = service.all_changes(anchor=0, limit=300)
    assert pages == 9
    assert [a["uuid"] for a in added] == [d["uuid"] for d in drinks]
    assert anchor == 2500
    first = service.request({"op": "changes", "anchor": 0, "limit": 300})
    assert first["hasMore"] is True and first["anchor"] == 300


def test_model_values_match_the_vectors(folder):
    vectors = json.loads((VECTORS / "model.json").read_text())
    for case in vectors["cases"]:
        s = Service(f"{folder}/{case['timeZone'].replace('/', '_')}{case['halfLifeHours']}", {
            "model": {"timeZone": case["timeZone"], "halfLifeHours": case["halfLifeHours"]}}).start()
        try:
            assert s.request({"op": "add", "drinks": vectors["drinks"]})["added"] == 7
            m = s.request({"op": "model", "at": case["at"]})
            exp = case["expected"]
            assert abs(m["mgCaffeine"] - exp["mgCaffeine"]) < 1e-6
            assert m["level"] == exp["level"]
            assert m["at"] == case["at"] and m["anchor"] == 7
            if "cupsToday" in exp:
                assert abs(m["cupsToday"] - exp["cupsToday"]) < 1e-6
                assert m["cupsLevel"] == exp["cupsLevel"] and m["drinksToday"] == exp["drinksToday"]
                assert len(m["timeline"]) == exp["timelineCount"]
                for k, p in exp["timeline"].items():
                    assert m["timeline"][int(k) - 1]["date"] == p["date"]
                    assert abs(m["timeline"][int(k) - 1]["mgCaffeine"] - p["mgCaffeine"]) < 1e-6
        finally:
            s.stop()


def test_model_now_counts_a_recent_drink(service):
    service.request({"op": "add", "drinks": [drink(mg=200, offset_s=-5 * 3600)]})
    m = service.request({"op": "model"})
    assert abs(m["mgCaffeine"] - 100) < 0.1
    assert m["halfLifeHours"] == 5 and len(m["timeline"]) == 287


def test_a_model_reply_sees_every_earlier_commit_between_rounds(folder):
    """The model applies commits in rounds, at most one per modelIntervalMs
    (a minute here): the first add is applied at once, the next ones wait
    for the next round, yet a `model` reply catches up first."""
    # "Today" in a time zone where it is about noon now: drinks a minute old
    # fall on the day before just after midnight (this failed at 00:00 UTC).
    offset = (12 - time.gmtime().tm_hour + 12) % 24 - 12
    zone = "Etc/GMT" + (f"-{offset}" if offset > 0 else f"+{-offset}" if offset < 0 else "")
    s = Service(folder, {"publish": {"modelIntervalMs": 60000}, "model": {"timeZone": zone}}).start()
    try:
        s.request({"op": "add", "drinks": [drink(mg=100, offset_s=-60)]})
        time.sleep(0.2)  # the first round has run; the follower now pauses a minute
        for i in range(3):
            s.request({"op": "add", "drinks": [drink(mg=100, offset_s=-50 + i)]})
            assert s.request({"op": "model"})["drinksToday"] == 2 + i
    finally:
        s.stop()


def expect_error(service, request, code, raw=None, **fields):
    reply = service.request(request, raw=raw)
    assert reply["ok"] is False, reply
    assert reply["error"]["code"] == code, reply
    assert reply["error"]["message"]
    for k, v in fields.items():
        assert reply["error"].get(k) == v, reply
    return reply


def test_malformed_requests_get_bad_request_never_silence(service):
    expect_error(service, None, "bad_request", raw=b"not json")
    expect_error(service, None, "bad_request", raw=b"[1,2]")
    expect_error(service, None, "bad_request", raw=b"")
    expect_error(service, None, "bad_request", raw=b"\xff\xfe{")
    expect_error(service, {"nop": 1}, "bad_request", field="op")
    expect_error(service, {"op": 7}, "bad_request", field="op")
    expect_error(service, {"op": "brew"}, "bad_request", field="op")
    expect_error(service, {"op": "changes", "anchor": -1}, "bad_request", field="anchor")
    expect_error(service, {"op": "changes", "anchor": "x"}, "bad_request", field="anchor")
    expect_error(service, {"op": "changes", "limit": 10001}, "bad_request", field="limit")
    expect_error(service, {"op": "add"}, "bad_request", field="drinks")
    expect_error(service, {"op": "model", "at": "yesterday"}, "bad_request", field="at")
    # Strict JSON, as on the bus: a trailing comma is refused, and the reply says where.
    reply = expect_error(service, None, "bad_request", raw=b'{"op":"ping",}')
    assert "not valid JSON" in reply["error"]["message"] and "at byte 13" in reply["error"]["message"]
    expect_error(service, {"op": "add", "drinks": {"uuid": "x"}}, "bad_request", field="drinks")
    expect_error(service, {"op": "add", "drinks": [drink(), 7]}, "invalid_drink", index=1)
    # The service is still fine.
    assert service.request({"op": "ping"})["ok"] is True


def test_invalid_drink_names_index_and_field_and_stores_nothing(service):
    good = drink()
    bad = drink(mg=-5)
    reply = expect_error(service, {"op": "add", "drinks": [good, bad]}, "invalid_drink", index=1, field="mgCaffeine")
    assert "must be > 0" in reply["error"]["message"]
    assert service.request({"op": "ping"})["anchor"] == 0
    expect_error(service, {"op": "add", "drinks": [drink(offset_s=3600)]}, "invalid_drink", index=0, field="date")
    expect_error(service, {"op": "delete", "deletions": [{"uuid": "x"}]}, "invalid_drink", index=0, field="uuid")


def test_too_large_request(folder):
    s = Service(folder, {"limits": {"maxMessageBytes": 4096}}).start()
    try:
        expect_error(s, {"op": "add", "drinks": [drink() for _ in range(50)]}, "too_large")
    finally:
        s.stop()


def test_many_dealer_clients_at_once(service):
    ctx = zmq.Context.instance()
    socks = []
    for i in range(20):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RCVTIMEO, 10000)
        s.connect(service.query_endpoint)
        socks.append(s)
    drinks = [drink(offset_s=-i) for i in range(20)]
    for s, d in zip(socks, drinks):
        s.send_multipart([b"", json.dumps({"op": "add", "drinks": [d]}).encode()])
    replies = [json.loads(s.recv_multipart()[-1]) for s in socks]
    for s in socks:
        s.close()
    assert all(r["ok"] and r["added"] == 1 for r in replies)
    assert sorted(r["anchor"] for r in replies)[-1] == 20
    assert service.request({"op": "ping"})["anchor"] == 20


def test_stats_counts(service):
    service.request({"op": "add", "drinks": [drink(), drink()]})
    d = drink()
    service.request({"op": "add", "drinks": [d]})
    service.request({"op": "add", "drinks": [d]})
    stats = service.request({"op": "stats"})
    assert stats["ok"] and stats["anchor"] == 3
    assert stats["received"] == 4 and stats["stored"] == 3 and stats["duplicates"] == 1
    assert stats["storeBytes"] > 0 and stats["uptimeS"] >= 0
    for key in ("rejected", "filesProcessed", "filesFailed", "subscribers"):
        assert key in stats
