"""docs/protocol.md §12's JSON API against the real service over real
sockets: every route with each role and each error, writes answered after
the durable commit and idempotent by uuid, `GET /api/v1/changes` paging as
the query op's, Health Auto Export's body (UUIDs computed here with
Python's uuid5, a resend adding nothing, a bad datum skipped with its
index), a standby's 409, and the JSON API without tokens."""
import http.client
import json
import signal
import time
import uuid as uuidlib

import pytest

from conftest import Service, drink, now_iso
from test_durability import sync_counter, wal_syncs  # noqa: F401 (a fixture)
from test_http import tokens_service
from test_inbox import wait_until

HEALTH_NAMESPACE = uuidlib.UUID("F04AACFF-1D25-4EB2-AA68-571E035447D9")


def call(service, method, path, body=None, token=None, raw=None, headers=None):
    """One request to the JSON API; returns (status, headers, reply JSON or text)."""
    host, port = service.endpoints["http"].rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=15)
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    if data is not None:
        h.setdefault("Content-Type", "application/json")
    try:
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read().decode()
        got = {k.lower(): v for k, v in r.getheaders()}
        try:
            return r.status, got, json.loads(text)
        except ValueError:
            return r.status, got, text
    finally:
        c.close()


def code(reply):
    assert reply["ok"] is False, reply
    return reply["error"]["code"]


def export_date(offset_s=-600, zone="+0100"):
    """A date as Health Auto Export writes one: `yyyy-MM-dd HH:mm:ss Z`."""
    sign = 1 if zone[0] == "+" else -1
    shift = sign * (int(zone[1:3]) * 3600 + int(zone[3:]) * 60)
    t = time.gmtime(time.time() + offset_s + shift)
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + " " + zone


@pytest.fixture
def door(folder):
    s = tokens_service(folder, tokens=[("reader", "read"), ("phone", "read,write"), ("writer", "write")])
    yield s
    s.stop()


def test_reads_answer_the_query_ops_replies_with_the_read_role(door):
    reader = door.tokens["reader"]
    assert call(door, "POST", "/api/v1/drinks", [drink(mg=90), drink(mg=60)], door.tokens["phone"])[0] == 200
    status, headers, reply = call(door, "GET", "/api/v1/ping", token=reader)
    assert status == 200 and headers["content-type"] == "application/json"
    assert reply == door.request({"op": "ping"})
    status, _, reply = call(door, "GET", "/api/v1/stats", token=reader)
    assert status == 200 and reply["anchor"] == 2 and "received" in reply
    status, _, model = call(door, "GET", "/api/v1/model", token=reader)
    assert status == 200 and model["anchor"] == 2 and model["mgCaffeine"] > 0
    at = now_iso(-3600).replace("Z", "+00:00")
    status, _, earlier = call(door, "GET", "/api/v1/model?at=" + at.replace("+", "%2B"), token=reader)  # + as %2B
    assert status == 200 and earlier == door.request({"op": "model", "at": at})
    # Each error of a read, with its status and code.
    status, _, reply = call(door, "GET", "/api/v1/model?at=yesterday", token=reader)
    assert status == 400 and code(reply) == "bad_request" and reply["error"]["field"] == "at"
    status, _, reply = call(door, "GET", "/api/v1/changes?anchor=abc", token=reader)
    assert status == 400 and code(reply) == "bad_request" and reply["error"]["field"] == "anchor"
    status, _, reply = call(door, "GET", "/api/v1/changes?limit=0", token=reader)
    assert status == 400 and reply["error"]["field"] == "limit"
    status, headers, reply = call(door, "GET", "/api/v1/ping")
    assert status == 401 and code(reply) == "unauthenticated" and headers["www-authenticate"].startswith("Bearer")
    assert call(door, "GET", "/api/v1/ping", token=door.tokens["writer"])[0] == 403  # write alone does not read
    status, _, reply = call(door, "GET", "/api/v1/nothing", token=reader)
    assert status == 404 and code(reply) == "not_found"
    status, headers, reply = call(door, "PUT", "/api/v1/ping", token=reader)
    assert status == 405 and code(reply) == "method_not_allowed" and headers["allow"] == "GET"


def test_changes_page_as_the_query_op_does(door):
    phone = door.tokens["phone"]
    sent = [drink(mg=10 + i) for i in range(25)]
    assert call(door, "POST", "/api/v1/drinks", sent, phone)[0] == 200
    assert call(door, "DELETE", f"/api/v1/drinks/{sent[3]['uuid']}", token=phone)[2]["deleted"] == 1
    anchor, pages_http, pages_query = None, [], []
    while True:
        query = "" if anchor is None else f"anchor={anchor}&"
        status, _, page = call(door, "GET", f"/api/v1/changes?{query}limit=7", token=door.tokens["reader"])
        assert status == 200
        pages_http.append(page)
        pages_query.append(door.request({"op": "changes", "anchor": anchor, "limit": 7}))
        anchor = page["anchor"]
        if not page["hasMore"]:
            break
    assert pages_http == pages_query and len(pages_http) == 4
    # From 0, the deletion shows as a tombstone, as on the query endpoint.
    status, _, page = call(door, "GET", "/api/v1/changes?anchor=0&limit=1000", token=door.tokens["reader"])
    assert page == door.request({"op": "changes", "anchor": 0, "limit": 1000}) and len(page["deleted"]) == 1


def test_writes_need_the_write_role_are_idempotent_and_name_what_is_wrong(door):
    phone, reader = door.tokens["phone"], door.tokens["reader"]
    one = drink(mg=95)
    status, _, reply = call(door, "POST", "/api/v1/drinks", one, reader)
    assert status == 403 and code(reply) == "forbidden" and "write" in reply["error"]["message"]
    assert call(door, "DELETE", f"/api/v1/drinks/{one['uuid']}", token=reader)[0] == 403
    assert call(door, "POST", "/api/v1/deletions", [one["uuid"]], reader)[0] == 403
    assert call(door, "POST", "/api/v1/health-auto-export", {"data": {"metrics": []}}, reader)[0] == 403
    # One drink, then the same again (a phone retrying after a lost reply): stored once.
    status, _, reply = call(door, "POST", "/api/v1/drinks", one, phone)
    assert status == 200 and reply["added"] == 1 and reply["anchor"] == 1
    status, _, reply = call(door, "POST", "/api/v1/drinks", one, phone)
    assert status == 200 and reply["added"] == 0 and reply["duplicates"] == 1
    # A drink without uuid gets one; its source names the token.
    status, _, reply = call(door, "POST", "/api/v1/drinks", {"type": "mediumCoffee", "date": now_iso(-30)}, phone)
    assert status == 200 and reply["added"] == 1
    stored = door.request({"op": "changes", "anchor": reply["anchor"] - 1})["added"][0]
    assert uuidlib.UUID(stored["uuid"]) and stored["source"] == "http:phone" and stored["type"] == "mediumCoffee"
    # Errors of writes.
    status, _, reply = call(door, "POST", "/api/v1/drinks", [drink(), drink(mg=-5)], phone)
    assert status == 400 and code(reply) == "invalid_drink" and reply["error"]["index"] == 1
    assert reply["error"]["field"] == "mgCaffeine"
    status, _, reply = call(door, "POST", "/api/v1/drinks", raw=b"{not json", token=phone)
    assert status == 400 and code(reply) == "bad_request"
    status, _, reply = call(door, "POST", "/api/v1/drinks", 42, phone)
    assert status == 400 and code(reply) == "bad_request"
    # A body over limits.maxMessageBytes: 413 as soon as its length is read (the rest never sent).
    from test_http import raw_exchange
    got = raw_exchange(door, b"POST /api/v1/drinks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + phone.encode()
                       + b"\r\nContent-Length: %d\r\n\r\n[" % ((1 << 20) + 2))
    assert got.startswith(b"HTTP/1.1 413") and b'"code":"too_large"' in got, got[:300]
    # Deletions, by path and by body.
    status, _, reply = call(door, "DELETE", f"/api/v1/drinks/{one['uuid']}?version=1", token=phone)
    assert status == 200 and reply["deleted"] == 1
    status, _, reply = call(door, "DELETE", f"/api/v1/drinks/not-a-uuid", token=phone)
    assert status == 400 and code(reply) == "invalid_drink"
    unknown = str(uuidlib.uuid4()).upper()
    status, _, reply = call(door, "POST", "/api/v1/deletions", [unknown, {"uuid": stored["uuid"]}], phone)
    assert status == 200 and reply["deleted"] == 1 and reply["unknown"] == 1
    status, _, reply = call(door, "POST", "/api/v1/deletions", {"uuid": unknown}, phone)
    assert status == 400 and code(reply) == "bad_request"
    assert door.request({"op": "stats"})["received"] >= 6


def test_an_expired_anchor_is_410(folder):
    s = tokens_service(folder, {"store": {"tombstoneRetentionDays": 1 / 86_400}}, tokens=[("phone", "read,write")])
    try:
        token = s.tokens["phone"]
        sent = [drink() for _ in range(3)]
        assert call(s, "POST", "/api/v1/drinks", sent, token)[0] == 200
        assert call(s, "POST", "/api/v1/deletions", [d["uuid"] for d in sent], token)[0] == 200
        time.sleep(1.5)
        s.stop()
        s.start()  # the start purges tombstones past their retention
        status, _, reply = call(s, "GET", "/api/v1/changes?anchor=0", token=token)
        assert status == 410 and code(reply) == "anchor_expired"
    finally:
        s.stop()


def test_a_post_is_answered_after_the_commit_is_synced(folder, sync_counter):  # noqa: F811
    from pathlib import Path
    log = Path(folder) / "syncs.log"
    s = Service(folder)
    s.env = {"LD_PRELOAD": str(sync_counter), "SYNC_COUNTER_LOG": str(log)}
    s.start()
    try:
        before = wal_syncs(log)
        for i in range(1, 16):
            status, _, reply = call(s, "POST", "/api/v1/drinks", drink())
            assert status == 200 and reply["added"] == 1
            assert wal_syncs(log) - before >= i, f"POST {i} was answered before its commit's sync"
        before = wal_syncs(log)
        status, _, reply = call(s, "POST", "/api/v1/health-auto-export",
                                {"data": {"metrics": [{"name": "dietary_caffeine", "units": "mg",
                                                       "data": [{"qty": 80, "date": export_date()}]}]}})
        assert status == 200 and reply["added"] == 1 and wal_syncs(log) > before
    finally:
        s.stop()


def health_auto_export_body():
    """Shaped as the app's documentation shows: several metrics, workouts, dates with offsets."""
    return {
        "data": {
            "metrics": [
                {"name": "step_count", "units": "count",
                 "data": [{"qty": 4211, "date": export_date(-7200), "source": "iPhone"}]},
                {"name": "dietary_caffeine", "units": "mg", "data": [
                    {"qty": 95, "date": export_date(-5400, "+0100"), "source": "Coffee Tracker"},
                    {"qty": 12.50, "date": export_date(-3600, "-0500")},
                    {"qty": -3, "date": export_date(-1800, "+0000")},
                    {"qty": 64, "date": "yesterday morning"},
                    {"qty": 150, "date": export_date(-600, "+0530"), "source": "Apple Watch"},
                ]},
                {"name": "heart_rate", "units": "count/min",
                 "data": [{"Min": 52, "Avg": 61, "Max": 80, "date": export_date(-600)}]},
                {"name": "dietary_caffeine", "units": "g", "data": [{"qty": 0.2, "date": export_date(-300)}]},
            ],
            "workouts": [{"name": "Outdoor Walk", "start": export_date(-9000), "end": export_date(-7000)},
                         {"name": "Yoga", "start": export_date(-4000), "end": export_date(-3000)}],
        }
    }


def test_health_auto_export_makes_drinks_with_name_based_uuids_and_a_resend_adds_nothing(door):
    body = health_auto_export_body()
    # 12.50 must reach the service as it is written: json.dumps would write 12.5.
    raw = json.dumps(body).replace('"qty": 12.5,', '"qty": 12.50,').encode()
    assert b'"qty": 12.50,' in raw
    phone = door.tokens["phone"]
    status, _, reply = call(door, "POST", "/api/v1/health-auto-export", raw=raw, token=phone)
    assert status == 200, reply
    assert reply["added"] == 3 and reply["duplicates"] == 0
    assert reply["ignoredMetrics"] == 2 and reply["ignoredWorkouts"] == 2
    skipped = {(s["index"], s["field"]) for s in reply["skipped"]}
    assert skipped == {(2, "qty"), (3, "date"), (0, "units")}, reply["skipped"]
    data = body["data"]["metrics"][1]["data"]
    expected = {
        str(uuidlib.uuid5(HEALTH_NAMESPACE, f"Coffee Tracker|{data[0]['date']}|95|mg")).upper(): (95, "Coffee Tracker"),
        str(uuidlib.uuid5(HEALTH_NAMESPACE, f"health-auto-export|{data[1]['date']}|12.50|mg")).upper():
            (12.5, "health-auto-export"),
        str(uuidlib.uuid5(HEALTH_NAMESPACE, f"Apple Watch|{data[4]['date']}|150|mg")).upper(): (150, "Apple Watch"),
    }
    stored = {d["uuid"]: (d["mgCaffeine"], d["source"]) for d in door.request({"op": "changes", "anchor": None})["added"]}
    assert stored == expected
    # The app's "previous 7 days" resends what it sent: nothing is added.
    status, _, again = call(door, "POST", "/api/v1/health-auto-export", raw=raw, token=phone)
    assert status == 200 and again["added"] == 0 and again["duplicates"] == 3 and again["anchor"] == reply["anchor"]
    # Not the app's shape, or not JSON: 400.
    for bad in (b"[1, 2]", b'{"data": {"metrics": 3}}', b'{"nothing": true}', b"{oops"):
        status, _, refused = call(door, "POST", "/api/v1/health-auto-export", raw=bad, token=phone)
        assert status == 400 and code(refused) == "bad_request", (bad, refused)


def test_a_standby_answers_writes_409_and_reads_as_its_primary(folder):
    from test_standby import primary_service, standby_service, in_step
    primary = primary_service(folder).start()
    standby = standby_service(folder, primary).start()
    try:
        assert call(primary, "POST", "/api/v1/drinks", [drink(), drink()])[0] == 200
        in_step(primary, standby)
        status, _, reply = call(standby, "POST", "/api/v1/drinks", drink())
        assert status == 409 and code(reply) == "read_only"
        assert call(standby, "POST", "/api/v1/deletions", [str(uuidlib.uuid4())])[0] == 409
        status, _, reply = call(standby, "POST", "/api/v1/health-auto-export", health_auto_export_body())
        assert status == 409 and code(reply) == "read_only"
        assert call(standby, "GET", "/api/v1/changes")[2]["added"] == call(primary, "GET", "/api/v1/changes")[2]["added"]
    finally:
        standby.stop()
        primary.stop()


def test_without_tokens_the_json_api_answers_this_machine(service):
    status, _, reply = call(service, "POST", "/api/v1/drinks", drink())
    assert status == 200 and reply["added"] == 1
    stored = service.request({"op": "changes", "anchor": None})["added"][0]
    assert stored["source"] == "http"
    ping = call(service, "GET", "/api/v1/ping")[2]
    assert ping["ok"] is True and ping["anchor"] == 1 and ping["epoch"] == 1 and len(ping["store"]) == 36
    # The unknown op's error names every operation: one list, which the clients follow.
    reply = service.request({"op": "nothing"})
    listed = reply["error"]["message"].split("expected ", 1)[1].replace(" or ", ", ").split(", ")
    assert listed == ["ping", "changes", "model", "add", "delete", "stats", "backup", "drinks", "history", "settings",
                      "putSettings", "catalogue", "putCatalogue", "pushKey", "pushSubscribe", "pushUnsubscribe",
                      "pushSubscriptions"]
    # The Python client has a call for each, and the command line a command
    # (stats is status; settings and catalogue with options put).
    from coffee_tracker import Client
    assert all(callable(getattr(Client, op, None)) for op in listed)
    client = Client(config=service.config_path)
    assert client.backup("api.sqlite")["bytes"] > 0
    assert client.putSettings(dailyLimitMg=300)["settings"]["dailyLimitMg"] == 300
    assert client.settings()["defaults"]["dailyLimitMg"] == 400
    assert any(d["name"] == "cortado" for d in client.putCatalogue("cortado", mgCaffeine=90)["drinks"])
    assert client.catalogue()["anchor"] >= 2
    assert len(client.pushKey()) == 87 and client.pushSubscriptions()["subscriptions"] == []
    commands = {"stats": "status", "putSettings": "settings", "putCatalogue": "catalogue", "pushKey": "push-key",
                "pushSubscribe": "push", "pushUnsubscribe": "push", "pushSubscriptions": "push"}
    for op in listed:
        command = commands.get(op, op)
        assert service.run_cli(command, "--help").returncode == 0, command
    ping = service.run_cli("ping")
    assert ping.returncode == 0 and ping.stdout.strip() == "anchor 3"  # the drink, the settings, the catalogue
