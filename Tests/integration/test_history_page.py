"""docs/protocol.md §15: the history page. /history.svg, drawn by the
service, read as XML: the last 30 days as bars with their mg (equal to
the history op's), coloured against the daily limit, the limit's line, and
the last 26 weeks as a heat map, each day in its weekday's row. The page in
headless Chromium: the picture loads, no CSP violation; with
COFFEE_TRACKER_HISTORY_SCREENSHOT=FILE it is saved there (docs/history-page.png)."""
import os
import random
import time
import xml.etree.ElementTree as ElementTree
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from conftest import Service
from test_api import call
from test_inbox import wait_until
from test_page_browser import browser, text  # noqa: F401  (browser: the fixture)

BERLIN = ZoneInfo("Europe/Berlin")
SVG = "{http://www.w3.org/2000/svg}"


def drinks_of_the_last_weeks(weeks=27, seed=5):
    rng = random.Random(seed)
    now = datetime.now(timezone.utc)
    drinks = []
    for day in range(weeks * 7):
        if rng.random() < 0.15:
            continue  # a day without coffee
        for _ in range(rng.randint(1, 4)):
            at = now - timedelta(days=day, seconds=rng.randrange(86_400)) - timedelta(minutes=5)
            drinks.append({"uuid": f"{rng.getrandbits(128):032X}", "mgCaffeine": rng.choice([64, 96, 128, 144, 192]),
                           "date": at.strftime("%Y-%m-%dT%H:%M:%SZ")})
    for d in drinks:
        u = d["uuid"]
        d["uuid"] = f"{u[:8]}-{u[8:12]}-4{u[13:16]}-8{u[17:20]}-{u[20:32]}"
    return drinks


def test_the_history_picture_draws_what_history_answers(folder, browser):
    s = Service(folder, {"model": {"timeZone": "Europe/Berlin", "dailyLimitMg": 400}}).start()
    try:
        drinks = drinks_of_the_last_weeks()
        for k in range(0, len(drinks), 500):
            assert s.request({"op": "add", "drinks": drinks[k:k + 500]})["ok"]
        status, headers, body = call(s, "GET", "/history.svg")
        assert status == 200 and headers["content-type"] == "image/svg+xml"
        root = ElementTree.fromstring(body)
        today = datetime.now(BERLIN).date()
        days = {b["start"][:10]: b for b in s.request(
            {"op": "history", "from": (today - timedelta(days=200)).isoformat(), "to": today.isoformat()})["buckets"]}

        bars = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "day"]
        assert [b.get("data-day") for b in bars] == [(today - timedelta(days=k)).isoformat() for k in range(29, -1, -1)]
        for bar in bars:
            day = days[bar.get("data-day")]
            assert float(bar.get("data-mg")) == day["mg"] and int(bar.get("data-drinks")) == day["drinks"]
            assert (bar.get("fill") == "#c62828") == (day["mg"] > 400), bar.attrib
        assert any(float(b.get("data-mg")) > 400 for b in bars), "no day over the limit to draw"
        limit = [line for line in root.iter(f"{SVG}line") if line.get("id") == "limit"]
        assert len(limit) == 1 and float(limit[0].get("data-mg")) == 400
        # Bars stand on one baseline, their heights in proportion to their mg; the limit line at 400's height.
        base = float(bars[0].get("y")) + float(bars[0].get("height"))
        tall = max(bars, key=lambda b: float(b.get("data-mg")))
        per_mg = float(tall.get("height")) / float(tall.get("data-mg"))
        assert abs(float(limit[0].get("y1")) - (base - 400 * per_mg)) < 0.01

        cells = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "cell"]
        monday = today - timedelta(days=today.weekday())
        first = monday - timedelta(weeks=25)
        assert [c.get("data-day") for c in cells] == [(first + timedelta(days=k)).isoformat()
                                                      for k in range((today - first).days + 1)]
        rows = {}
        for cell in cells:
            day = datetime.fromisoformat(cell.get("data-day")).date()
            rows.setdefault(day.weekday(), set()).add(float(cell.get("y")))
            assert float(cell.get("data-mg")) == days[cell.get("data-day")]["mg"]
        assert all(len(ys) == 1 for ys in rows.values()) and len({y for ys in rows.values() for y in ys}) == len(rows)
        assert sorted(rows, key=lambda weekday: next(iter(rows[weekday]))) == sorted(rows)  # Monday on top

        # The page, in a browser: the picture loads under the CSP.
        browser.get(f"http://{s.endpoints['http']}/history")
        image = browser.find_element("id", "history")
        wait_until(lambda: browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", image) > 0,
                   timeout=20, what="the history picture to load")
        violations = [entry["message"] for entry in browser.get_log("browser")
                      if "Content Security Policy" in entry["message"] or entry["level"] == "SEVERE"]
        assert not violations, violations
        assert "Every drink as CSV" in browser.find_element("tag name", "nav").text
        if os.environ.get("COFFEE_TRACKER_HISTORY_SCREENSHOT"):
            browser.set_window_size(1000, 900)
            time.sleep(0.3)
            browser.save_screenshot(os.environ["COFFEE_TRACKER_HISTORY_SCREENSHOT"])
        browser.get(f"http://{s.endpoints['http']}/")
        wait_until(lambda: text(browser, "status") == "live", timeout=20, what="the live page")
        assert browser.find_element("link text", "History").get_attribute("href").endswith("/history")
    finally:
        s.stop()
