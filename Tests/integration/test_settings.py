"""docs/protocol.md §15's settings and catalogue against the real service
over real sockets: a setting changed under a following pyzmq subscriber
(the model it receives next uses the new half-life, computed here from the
formula), refused bodies that leave the old values, the admin role, the
settings kept in the store across a restart; the catalogue's entries added,
used by `POST /api/v1/drinks` and `coffee-tracker add --type`, renamed and
retired, on SQLite and on PostgreSQL, where a second service on the same
database sees them."""
import json
import os
import time

import pytest

from conftest import Service, drink, next_message, now_iso, wait_until
from postgres import PostgresServer, server_bin
from test_api import call, code
from test_bus import subscriber
from test_http import make_token, tokens_service


def models(sub, until, timeout=30):
    """The next `model` message on `sub` for which `until(model)` holds."""
    deadline = time.time() + timeout
    while True:
        left = deadline - time.time()
        assert left > 0, "no model message met the condition in time"
        _, model = next_message(sub, topics=(b"model",), timeout=left, what="a model message")
        if until(model):
            return model


def level(drinks, at, half_life_hours):
    """§3's formula, independently: each drink of the 24 hours up to `at`, halved every half-life."""
    total = 0.0
    for mg, taken in drinks:
        elapsed = at - taken
        if 0 <= elapsed <= 24 * 3600:
            total += mg * 0.5 ** (elapsed / (half_life_hours * 3600))
    return total


def parse_time(text):
    from datetime import datetime
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_settings_change_under_a_following_client_and_refusals_change_nothing(folder):
    s = tokens_service(folder, tokens=(("phone", "read,write"), ("owner", "read,admin")))
    try:
        phone, owner = s.tokens["phone"], s.tokens["owner"]
        sub = subscriber(s, topics=(b"model",))
        taken = time.time() - 3 * 3600
        status, _, reply = call(s, "POST", "/api/v1/drinks", drink(mg=200.0, offset_s=-3 * 3600), token=phone)
        assert status == 200, reply
        before = models(sub, lambda m: m["anchor"] >= reply["anchor"])
        assert before["halfLifeHours"] == 5
        assert abs(before["mgCaffeine"] - level([(200, taken)], parse_time(before["at"]), 5)) < 0.5

        status, _, got = call(s, "GET", "/api/v1/settings", token=phone)
        assert status == 200 and got["anchor"] == 0, got
        assert got["settings"] == {"halfLifeHours": 5, "sleepThresholdMg": 50, "dailyLimitMg": 400, "timeZone": "UTC",
                                   "levelOverMg": 0, "bedtime": "off"}  # the suite's alerts.* (conftest)
        assert got["defaults"] == got["settings"]

        # Roles: write is not admin; read is not admin.
        for token in (phone,):
            status, _, refused = call(s, "PUT", "/api/v1/settings", {"halfLifeHours": 2}, token=token)
            assert status == 403 and code(refused) == "forbidden", refused

        # Refused bodies name the field and change nothing, not even the other fields they carry.
        for body, field in [
            ({"halfLifeHours": -1}, "settings.halfLifeHours"),
            ({"halfLifeHours": 49}, "settings.halfLifeHours"),
            ({"dailyLimitMg": 300, "timeZone": "Mars/Olympus_Mons"}, "settings.timeZone"),
            ({"timeZone": "EST"}, "settings.timeZone"),
            ({"timeZone": 1}, "settings.timeZone"),
            ({"sleepThresholdMg": "50"}, "settings.sleepThresholdMg"),
            ({"halfLife": 2}, "settings.halfLife"),
            ({"bedtime": "25:00"}, "settings.bedtime"),
            ({"halfLifeHours": 3, "bedtime": "7:30"}, "settings.bedtime"),
            ({"bedtime": 2300}, "settings.bedtime"),
            ({"levelOverMg": -5}, "settings.levelOverMg"),
            ({"levelOverMg": "high"}, "settings.levelOverMg"),
            ({"levelOverMg": 100001}, "settings.levelOverMg"),
            ({}, "settings"),
            ([1], "settings"),
        ]:
            status, _, refused = call(s, "PUT", "/api/v1/settings", body, token=owner)
            assert status == 400 and code(refused) == "bad_request", (body, refused)
            assert refused["error"]["field"] == field, (body, refused)
        status, _, unchanged = call(s, "GET", "/api/v1/settings", token=phone)
        assert unchanged == got
        anchor_before = s.request({"op": "ping"})["anchor"]
        feed = subscriber(s, topics=(b"changes",))

        # The change: one commit with an anchor of its own, no drink in it.
        status, _, changed = call(
            s, "PUT", "/api/v1/settings", {"halfLifeHours": 2, "timeZone": "Europe/Berlin"}, token=owner)
        assert status == 200, changed
        assert changed["anchor"] == anchor_before + 1
        assert changed["settings"]["halfLifeHours"] == 2 and changed["settings"]["timeZone"] == "Europe/Berlin"
        assert changed["defaults"]["halfLifeHours"] == 5
        page = s.request({"op": "changes", "anchor": anchor_before})
        assert page["added"] == [] and page["deleted"] == [] and page["anchor"] == changed["anchor"], page
        # The feed carries the change at its anchor (§15, "In the feed"): the reply and the message alike.
        rows = [{"scope": "person", "name": "halfLifeHours", "value": 2, "anchor": changed["anchor"]},
                {"scope": "person", "name": "timeZone", "value": "Europe/Berlin", "anchor": changed["anchor"]}]
        assert sorted(page["settings"], key=lambda r: r["name"]) == rows, page
        _, message = next_message(feed, topics=(b"changes",), what="the settings' changes message")
        assert (message["previousAnchor"], message["anchor"]) == (anchor_before, changed["anchor"]), message
        assert message["added"] == [] and message["deleted"] == []
        assert sorted(message["settings"], key=lambda r: r["name"]) == rows, message
        assert "settings" not in s.request({"op": "changes", "anchor": changed["anchor"]})

        # The following client's next model uses the new half-life: 200 mg three hours ago is now 70.7, not 131.9.
        after = models(sub, lambda m: m["anchor"] >= changed["anchor"])
        assert after["halfLifeHours"] == 2
        assert abs(after["mgCaffeine"] - level([(200, taken)], parse_time(after["at"]), 2)) < 0.5, after
        assert abs(after["mgCaffeine"] - level([(200, taken)], parse_time(after["at"]), 5)) > 30
        # The query op, the history and the CLI read the same.
        assert s.request({"op": "model"})["halfLifeHours"] == 2
        assert s.request({"op": "history"})["timeZone"] == "Europe/Berlin"
        shown = s.run_cli("settings", "--config", str(s.config_path))
        assert shown.returncode == 0 and "half-life        2 (the configuration says 5)" in shown.stdout, shown.stdout

        # Kept in the store across a restart; null puts the configuration's back.
        s.stop()
        s.start()
        assert s.request({"op": "model"})["halfLifeHours"] == 2
        status, _, reset = call(s, "PUT", "/api/v1/settings", {"halfLifeHours": None}, token=owner)
        assert status == 200 and reset["settings"]["halfLifeHours"] == 5, reset
        assert reset["settings"]["timeZone"] == "Europe/Berlin"
        wait_until(lambda: s.request({"op": "model"})["halfLifeHours"] == 5, what="the model back on the default")
    finally:
        s.stop()


def catalogue_scenario(s, other=None):
    """The catalogue through the JSON API and the CLI on `s`; `other`, a
    second service on the same database, sees each change."""
    status, _, listed = call(s, "GET", "/api/v1/catalogue")
    assert status == 200 and [d["name"] for d in listed["drinks"]][:3] == ["smallCoffee", "mediumCoffee", "largeCoffee"]
    assert all(d["builtIn"] and not d["retired"] for d in listed["drinks"])

    status, _, added = call(s, "PUT", "/api/v1/catalogue/flatWhite", {"mgCaffeine": 130})
    assert status == 200, added
    entry = next(d for d in added["drinks"] if d["name"] == "flatWhite")
    assert entry == {"name": "flatWhite", "mgCaffeine": 130, "retired": False, "builtIn": False}
    # A type by name alone takes the catalogue's serving, through the API and the CLI.
    tapped = {"uuid": drink()["uuid"], "type": "flatWhite", "date": now_iso(-60)}
    status, _, reply = call(s, "POST", "/api/v1/drinks", tapped)
    assert status == 200 and reply["added"] == 1, reply
    added_cli = s.run_cli("add", "--type", "flatWhite", "--config", str(s.config_path))
    assert added_cli.returncode == 0 and "flatWhite 130 mg" in added_cli.stdout, added_cli.stdout + added_cli.stderr
    mine = [d for d in s.request({"op": "drinks"})["drinks"] if d.get("type") == "flatWhite"]
    assert len(mine) == 2 and all(d["mgCaffeine"] == 130 for d in mine)
    # The page offers it.
    status, _, page = call(s, "GET", "/")
    assert 'data-type="flatWhite" data-mg="130"' in page

    if other is not None:
        wait_until(lambda: any(d["name"] == "flatWhite" for d in other.request({"op": "catalogue"})["drinks"]),
                   what="the other service's catalogue")
        assert other.request({"op": "add", "drinks": [{"uuid": drink()["uuid"], "type": "flatWhite",
                                                        "date": now_iso(-30)}]})["ok"]

    # Unknown and ill-formed names are refused, naming the field.
    status, _, refused = call(s, "POST", "/api/v1/drinks", {"uuid": drink()["uuid"], "type": "mocha", "date": now_iso()})
    assert status == 400 and refused["error"]["field"] == "type", refused
    for path, body, field in [
        ("/api/v1/catalogue/mocha", {}, "entry.mgCaffeine"),
        ("/api/v1/catalogue/mocha", {"mgCaffeine": 0}, "entry.mgCaffeine"),
        ("/api/v1/catalogue/mocha", {"mgCaffeine": 80, "size": 2}, "entry.size"),
        ("/api/v1/catalogue/9lives", {"mgCaffeine": 80}, "name"),
        ("/api/v1/catalogue/mocha", {"mgCaffeine": 80, "renamedFrom": "latte"}, "entry.renamedFrom"),
        ("/api/v1/catalogue/smallCoffee", {"renamedFrom": "flatWhite"}, "name"),
    ]:
        status, _, refused = call(s, "PUT", path, body)
        assert status == 400 and refused["error"]["field"] == field, (path, body, refused)
    assert call(s, "GET", "/api/v1/catalogue")[2]["anchor"] == added["anchor"]  # nothing written

    # Retired: not offered, not loggable by name alone; with its mg it is, and past drinks keep their type.
    status, _, retired = call(s, "PUT", "/api/v1/catalogue/flatWhite", {"retired": True})
    assert status == 200 and next(d for d in retired["drinks"] if d["name"] == "flatWhite")["retired"], retired
    status, _, refused = call(s, "POST", "/api/v1/drinks", {"uuid": drink()["uuid"], "type": "flatWhite",
                                                            "date": now_iso()})
    assert status == 400 and refused["error"]["field"] == "type" and "retired" in refused["error"]["message"]
    status, _, reply = call(s, "POST", "/api/v1/drinks", {"uuid": drink()["uuid"], "type": "flatWhite",
                                                          "mgCaffeine": 120, "date": now_iso(-20)})
    assert status == 200 and reply["added"] == 1, reply
    assert 'data-type="flatWhite"' not in call(s, "GET", "/")[2]
    past = [d for d in s.request({"op": "drinks"})["drinks"] if d.get("type") == "flatWhite"]
    assert len(past) >= 3

    # A rename: the new entry takes the old's serving, the old one is retired.
    status, _, renamed = call(s, "PUT", "/api/v1/catalogue/smallCup", {"renamedFrom": "smallCoffee"})
    assert status == 200, renamed
    byname = {d["name"]: d for d in renamed["drinks"]}
    assert byname["smallCup"]["mgCaffeine"] == 96 and not byname["smallCup"]["retired"]
    assert byname["smallCoffee"]["retired"]
    listed = s.run_cli("catalogue", "--config", str(s.config_path))
    assert listed.returncode == 0 and "smallCoffee          96 mg  retired" in listed.stdout, listed.stdout
    if other is not None:
        wait_until(lambda: {d["name"]: d for d in other.request({"op": "catalogue"})["drinks"]}
                   .get("smallCup") is not None, what="the rename on the other service")


def test_catalogue_on_sqlite(folder):
    s = Service(folder).start()
    try:
        catalogue_scenario(s)
        # The README's commands, as written there.
        made = s.run_cli("catalogue", "flatWhite", "--mg", "130", "--restore", "--config", str(s.config_path))
        assert made.returncode == 0 and "flatWhite            130 mg\n" in made.stdout, made.stdout + made.stderr
        set_ = s.run_cli("settings", "--half-life", "4", "--time-zone", "Europe/Berlin", "--config", str(s.config_path))
        assert set_.returncode == 0, set_.stderr
        assert "half-life        4 (the configuration says 5)" in set_.stdout, set_.stdout
        assert "time-zone        Europe/Berlin (the configuration says UTC)" in set_.stdout, set_.stdout
        refused = s.run_cli("settings", "--time-zone", "Berlin", "--config", str(s.config_path))
        assert refused.returncode == 1 and "settings.timeZone" in refused.stderr + refused.stdout, refused
        s.stop()
        s.start()  # kept in the store
        assert {d["name"] for d in s.request({"op": "catalogue"})["drinks"]} >= {"flatWhite", "smallCup"}
    finally:
        s.stop()


@pytest.mark.skipif(server_bin() is None, reason="no PostgreSQL server (apt-get install postgresql)")
def test_catalogue_and_settings_shared_on_postgresql(folder):
    server = PostgresServer().start()
    try:
        _, conninfo = server.new_database()
        config = {"store": {"postgresql": {"conninfo": conninfo}}}
        a = Service(os.path.join(folder, "a"), config).start()
        b = Service(os.path.join(folder, "b"), config).start()
        try:
            catalogue_scenario(a, other=b)
            # A setting changed through one service reaches the other's model and its followers.
            sub = subscriber(b, topics=(b"model",))
            reply = a.request({"op": "putSettings", "settings": {"halfLifeHours": 3}})
            assert reply["ok"] and reply["settings"]["halfLifeHours"] == 3, reply
            model = models(sub, lambda m: m["halfLifeHours"] == 3)
            assert model["anchor"] >= reply["anchor"]
            assert b.request({"op": "settings"})["settings"]["halfLifeHours"] == 3
        finally:
            a.stop()
            b.stop()
    finally:
        server.cleanup()
