"""docs/protocol.md §15: history by day, week and month in the person's time
zone, from one read of the store, on both stores, against an independent
computation here: Python's zoneinfo for the buckets (a year of Europe/Berlin
with both changes of daylight saving time: a day of 23 hours, one of 25),
§3's formula for the peaks and the hours over the sleep threshold; the CSV
export read back by Python's csv module."""
import csv
import io
import math
import os
import random
import uuid
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from conftest import Service
from postgres import PostgresServer, server_bin
from test_api import call

BERLIN = ZoneInfo("Europe/Berlin")
HALF_LIFE_H, THRESHOLD, LIMIT = 5.0, 50.0, 400.0
WINDOW = timedelta(hours=24)
CONFIG = {"model": {"timeZone": "Europe/Berlin", "halfLifeHours": HALF_LIFE_H, "sleepThresholdMg": THRESHOLD,
                    "dailyLimitMg": LIMIT}}


def year_of_drinks(seed=7):
    """A year of drinks in Berlin, 2025: 0 to 6 a day at whole seconds, more on
    the days the clocks change, some in the hour 02:00-03:00 of 26 October,
    which happens twice."""
    rng = random.Random(seed)
    drinks = []
    day = date(2025, 1, 1)
    while day.year == 2025:
        count = rng.randint(0, 6) if day not in (date(2025, 3, 30), date(2025, 10, 26)) else 10
        for _ in range(count):
            local = datetime(day.year, day.month, day.day, tzinfo=BERLIN) + timedelta(seconds=rng.randrange(86_400))
            at = local.astimezone(timezone.utc)
            mg = rng.choice([96, 144, 192, 64, 128, 256, 47, 28, 22, 29, 18])
            drinks.append({"uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper(), "mgCaffeine": mg,
                           "date": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "at": at})
        day += timedelta(days=1)
    # 02:30 CEST and 02:30 CET on 26 October: the same local time, an hour apart.
    for fold in (0, 1):
        at = datetime(2025, 10, 26, 2, 30, fold=fold, tzinfo=BERLIN).astimezone(timezone.utc)
        drinks.append({"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 200, "date": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "at": at})
    return sorted(drinks, key=lambda d: d["at"])


def level(drinks, t):
    """§3: the drinks of the 24 hours up to t, each halved every half-life."""
    return sum(d["mgCaffeine"] * 0.5 ** ((t - d["at"]).total_seconds() / 3600 / HALF_LIFE_H)
               for d in drinks if t - WINDOW <= d["at"] <= t)


def hours_over(drinks, start, end):
    """Hours in [start, end) with the level above the threshold: between two
    moments where a drink comes or leaves the window the level only decays,
    so each stretch is solved for its crossing."""
    moments = {start} | {d["at"] for d in drinks if start < d["at"] < end} | \
              {d["at"] + WINDOW for d in drinks if start < d["at"] + WINDOW < end}
    moments = sorted(moments) + [end]
    total = 0.0
    for a, b in zip(moments, moments[1:]):
        now = sum(d["mgCaffeine"] * 0.5 ** ((a - d["at"]).total_seconds() / 3600 / HALF_LIFE_H)
                  for d in drinks if a - WINDOW < d["at"] <= a)
        if now > THRESHOLD:
            total += min((b - a).total_seconds() / 3600, HALF_LIFE_H * math.log2(now / THRESHOLD))
    return total


def local_days(first, last):
    day = first
    while day <= last:
        yield day
        day += timedelta(days=1)


def midnight(day):
    """The local midnight that starts `day` in Berlin, as a UTC time: Python
    subtracts two times of one tzinfo by the wall clock, so arithmetic is
    done in UTC."""
    return datetime(day.year, day.month, day.day, tzinfo=BERLIN).astimezone(timezone.utc)


def expected_days(drinks, first, last):
    days = []
    for day in local_days(first, last):
        start, end = midnight(day), midnight(day + timedelta(days=1))
        inside = [d for d in drinks if start <= d["at"] < end]
        near = [d for d in drinks if start - WINDOW <= d["at"] < end]
        peak = max([level(near, start)] + [level(near, d["at"]) for d in inside])
        days.append({"start": start, "end": end, "mg": sum(d["mgCaffeine"] for d in inside), "drinks": len(inside),
                     "peakMg": peak, "hoursOverSleepThreshold": hours_over(near, start, end)})
    return days


def group(days, key):
    """Days summed into weeks (from Monday) or months."""
    out = {}
    for d in days:
        k = key(d["start"].astimezone(BERLIN).date())
        g = out.setdefault(k, {"start": d["start"], "end": d["end"], "mg": 0, "drinks": 0, "peakMg": 0.0,
                               "hoursOverSleepThreshold": 0.0, "daysOverLimit": 0})
        g["end"] = d["end"]
        g["mg"] += d["mg"]
        g["drinks"] += d["drinks"]
        g["peakMg"] = max(g["peakMg"], d["peakMg"])
        g["hoursOverSleepThreshold"] += d["hoursOverSleepThreshold"]
        g["daysOverLimit"] += d["mg"] > LIMIT
    return list(out.values())


def stamp(t):
    return datetime.fromisoformat(t)


def check(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        at = f"bucket from {w['start']}"
        assert stamp(g["start"]) == w["start"] and stamp(g["end"]) == w["end"], at
        assert stamp(g["start"]).utcoffset() == w["start"].astimezone(BERLIN).utcoffset(), at  # the zone's offset
        assert g["hours"] == (w["end"] - w["start"]).total_seconds() / 3600, at
        assert g["drinks"] == w["drinks"] and math.isclose(g["mg"], w["mg"], abs_tol=1e-9), at
        assert math.isclose(g["cups"], w["mg"] / 96, abs_tol=1e-9), at
        assert math.isclose(g["peakMg"], w["peakMg"], rel_tol=1e-9, abs_tol=1e-9), (at, g["peakMg"], w["peakMg"])
        assert math.isclose(g["hoursOverSleepThreshold"], w["hoursOverSleepThreshold"], abs_tol=1e-6), (
            at, g["hoursOverSleepThreshold"], w["hoursOverSleepThreshold"])
        if "daysOverLimit" in w:
            assert g["daysOverLimit"] == w["daysOverLimit"], at


def load(service, drinks):
    for k in range(0, len(drinks), 500):
        batch = [{key: d[key] for key in ("uuid", "mgCaffeine", "date")} for d in drinks[k:k + 500]]
        assert service.request({"op": "add", "drinks": batch})["ok"]


def history_matches_an_independent_computation(service):
    drinks = year_of_drinks()
    load(service, drinks)
    # Deleted drinks count for nothing: one a month goes.
    gone = drinks[::80]
    assert service.request({"op": "delete", "deletions": [d["uuid"] for d in gone]})["deleted"] == len(gone)
    drinks = [d for d in drinks if d not in gone]

    days = expected_days(drinks, date(2025, 1, 1), date(2025, 12, 31))
    reply = service.request({"op": "history", "from": "2025-01-01", "to": "2025-12-31", "by": "day"})
    assert reply["ok"], reply
    assert reply["timeZone"] == "Europe/Berlin" and reply["by"] == "day" and reply["dailyLimitMg"] == LIMIT
    got = reply["buckets"]
    for d in days:
        d["daysOverLimit"] = int(d["mg"] > LIMIT)
    check(got, days)
    hours = {stamp(b["start"]).date(): b["hours"] for b in got}
    assert hours[date(2025, 3, 30)] == 23 and hours[date(2025, 10, 26)] == 25
    assert sum(b["daysOverLimit"] for b in got) > 0, "no day over the limit to test"
    assert any(b["hoursOverSleepThreshold"] > 0 for b in got) and any(b["peakMg"] > 300 for b in got)

    # Weeks from Monday: the first bucket is the week that holds 1 January (from Monday 30 December).
    first_monday = date(2024, 12, 30)
    week_days = expected_days(drinks, first_monday, date(2026, 1, 4))
    weeks = service.request({"op": "history", "from": "2025-01-01", "to": "2025-12-31", "by": "week"})["buckets"]
    check(weeks, group(week_days, lambda day: (day - first_monday).days // 7))
    months = service.request({"op": "history", "from": "2025-01-15", "to": "2025-12-31", "by": "month"})["buckets"]
    check(months, group(days, lambda day: day.month))
    assert [stamp(m["start"]).utcoffset() for m in months[2:4]] == [timedelta(hours=1), timedelta(hours=2)]

    # The command line's table and the Python client ask the same.
    cli = service.run_cli("history", "--from", "2025-03-29", "--to", "2025-04-01")
    assert cli.returncode == 0, cli.stderr
    lines = cli.stdout.strip().splitlines()
    assert lines[0].split()[:3] == ["day", "mg", "cups"] and lines[-1].startswith("4 days in Europe/Berlin")
    assert lines[2].startswith("2025-03-30 (23 h)") and lines[1].startswith("2025-03-29 ")
    for line, bucket in zip(lines[1:5], got[87:91]):
        assert line.split()[0] == bucket["start"][:10] and f" {bucket['drinks']} " in line
        assert float(line[18:].split()[0]) == round(bucket["mg"]), (line, bucket)
    from coffee_tracker import Client
    client = Client(config=str(service.config_path), timeout=30)
    assert client.history("2025-01-01", "2025-12-31", "month")["buckets"] == \
        service.request({"op": "history", "from": "2025-01-01", "to": "2025-12-31", "by": "month"})["buckets"]

    # The same over HTTP, and the refusals name their field.
    status, _, over_http = call(service, "GET", "/api/v1/history?from=2025-03-01&to=2025-03-31&by=day")
    assert status == 200 and over_http["buckets"] == got[59:90]
    for request, field in (({"by": "year"}, "by"), ({"from": "2025-02-30"}, "from"),
                           ({"from": "2025-12-31", "to": "2025-01-01"}, "from"),
                           ({"from": "1900-01-01", "to": "2025-01-01"}, "from")):
        refused = service.request({"op": "history", **request})
        assert refused["ok"] is False and refused["error"]["field"] == field, (request, refused)
    return drinks


@contextmanager
def service_on(store, folder, config):
    """A running service on `store`: "sqlite" (its own file) or "postgresql"
    (a new database on a server of its own)."""
    if store == "sqlite":
        s = Service(folder, config).start()
        try:
            yield s
        finally:
            s.stop()
        return
    server = PostgresServer().start()
    try:
        _, conninfo = server.new_database()
        s = Service(folder, {**config, "store": {"postgresql": {"conninfo": conninfo}}}).start()
        try:
            yield s
        finally:
            s.stop()
    finally:
        server.cleanup()


STORES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(
    server_bin() is None, reason="no PostgreSQL server (apt-get install postgresql)"))]


@pytest.mark.parametrize("store", STORES)
def test_history_equals_an_independent_computation(store, folder):
    with service_on(store, folder, CONFIG) as s:
        history_matches_an_independent_computation(s)


def sums_by_local_day(drinks, zone, first, last):
    """Per local day of `zone` from `first` to `last`: its start, its end,
    the mg and the number of drinks dated in it."""
    days = []
    for day in local_days(first, last):
        start = datetime(day.year, day.month, day.day, tzinfo=zone).astimezone(timezone.utc)
        following = day + timedelta(days=1)
        end = datetime(following.year, following.month, following.day, tzinfo=zone).astimezone(timezone.utc)
        inside = [d for d in drinks if start <= d["at"] < end]
        days.append((start, end, sum(d["mgCaffeine"] for d in inside), len(inside)))
    return days


@pytest.mark.parametrize("store", STORES)
def test_a_new_time_zone_answers_history_in_it_at_once(store, folder):
    """The person moves: history's next answer has the new zone's days, with
    nothing rewritten. Kathmandu's offset (+05:45) is a quarter-hour's
    multiple that is not an hour's; drinks every 20 minutes over three days
    fall on either side of each zone's midnights."""
    start = datetime(2025, 6, 1, tzinfo=timezone.utc)
    drinks = [{"uuid": str(uuid.UUID(int=k + 1, version=4)).upper(), "mgCaffeine": 10 + k % 7,
               "date": (start + timedelta(minutes=20 * k)).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "at": start + timedelta(minutes=20 * k)} for k in range(3 * 72)]
    with service_on(store, folder, CONFIG) as s:
        load(s, drinks)
        for zone in ("Europe/Berlin", "Asia/Kathmandu", "America/New_York", "Europe/Berlin"):
            if zone != s.request({"op": "settings"})["settings"]["timeZone"]:
                put = s.request({"op": "putSettings", "settings": {"timeZone": zone}})
                assert put["ok"], put
            reply = s.request({"op": "history", "from": "2025-05-31", "to": "2025-06-04", "by": "day"})
            assert reply["ok"] and reply["timeZone"] == zone, reply
            want = sums_by_local_day(drinks, ZoneInfo(zone), date(2025, 5, 31), date(2025, 6, 4))
            got = [(stamp(b["start"]), stamp(b["end"]), b["mg"], b["drinks"]) for b in reply["buckets"]]
            assert got == want, zone
            offset = stamp(reply["buckets"][0]["start"]).utcoffset()
            assert offset == want[0][0].astimezone(ZoneInfo(zone)).utcoffset(), zone
            assert sum(b["drinks"] for b in reply["buckets"]) == len(drinks)


def test_the_csv_export_reads_back_as_the_store_holds_it(folder):
    s = Service(folder, CONFIG).start()
    try:
        drinks = [
            {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 96, "date": "2025-01-15T07:30:00.125Z",
             "type": "smallCoffee", "source": "kitchen, the good machine"},
            {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 64.5, "date": "2025-07-01T12:00:00Z",
             "source": 'say "espresso"\nthen leave', "version": 2},
            {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 28, "date": "2025-10-26T01:30:00Z", "type": "greenTea",
             "source": "Café Schön"},
        ]
        gone = {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 50, "date": "2025-02-01T08:00:00Z"}
        assert s.request({"op": "add", "drinks": drinks + [gone]})["added"] == 4
        assert s.request({"op": "delete", "deletions": [gone["uuid"]]})["deleted"] == 1
        status, headers, body = call(s, "GET", "/api/v1/export.csv")
        assert status == 200 and headers["content-type"].startswith("text/csv"), (status, headers)
        assert body.startswith("uuid,date,mgCaffeine,type,version,source\r\n")
        rows = list(csv.DictReader(io.StringIO(body, newline="")))
        stored = {d["uuid"]: d for d in s.all_changes()[0]}
        assert [r["uuid"] for r in rows] == [d["uuid"] for d in drinks]  # live ones only, oldest first
        for row in rows:
            d = stored[row["uuid"]]
            when = datetime.fromisoformat(row["date"])
            assert when == datetime.fromisoformat(d["date"].replace("Z", "+00:00")), row
            assert when.utcoffset() == when.astimezone(BERLIN).utcoffset()  # in the person's zone
            assert float(row["mgCaffeine"]) == d["mgCaffeine"] and int(row["version"]) == d["version"]
            assert row["type"] == d.get("type", "") and row["source"] == d["source"], row
        assert rows[0]["date"] == "2025-01-15T08:30:00.125+01:00" and rows[1]["mgCaffeine"] == "64.5"
        # The command line writes the same bytes.
        out = os.path.join(folder, "drinks.csv")
        p = s.run_cli("export", "--csv", "--out", out)
        assert p.returncode == 0 and "wrote 3 drinks" in p.stderr, p.stderr
        with open(out, newline="") as f:
            assert f.read() == body
        assert s.run_cli("export").returncode == 2  # the format is named
    finally:
        s.stop()
