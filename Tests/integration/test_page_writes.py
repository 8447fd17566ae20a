"""docs/protocol.md §15: the person logs, takes back and corrects drinks on
the live page, in a real browser (Debian's chromium, headless, through
chromedriver and Selenium), logged in with a write token's cookie; what the
page writes reaches a pyzmq subscriber's feed and the page's own level. A
page on another origin (another port of the same host, which SameSite
counts as the same site) cannot log a drink; programs without Origin can.
The `drinks` op over both doors."""
import http.server
import json
import os
import threading
import time
from datetime import datetime, timedelta, timezone

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import drink
from test_api import call
from test_bus import next_changes, subscriber
from test_http import tokens_service
from test_inbox import wait_until
from test_page_browser import browser, text  # noqa: F401  (browser: the fixture)


def logged_in(service, browser, token):
    base = f"http://{service.endpoints['http']}"
    browser.get(f"{base}/login?token={token}")
    wait_until(lambda: text(browser, "status") == "live", timeout=20, what="the page to go live after the login")
    return base


def drink_button(browser, kind):
    return browser.find_element(By.CSS_SELECTOR, f'#drink-buttons .drink[data-type="{kind}"]')


def mg_shown(browser):
    shown = text(browser, "mg")
    return int(shown) if shown.lstrip("-").isdigit() else None


def test_a_tap_logs_a_drink_that_reaches_the_feed_and_the_level_then_undo_and_edit(folder, browser):
    s = tokens_service(folder, tokens=[("phone", "read,write")])
    try:
        sub = subscriber(s, topics=(b"changes",))
        logged_in(s, browser, s.tokens["phone"])
        assert mg_shown(browser) == 0
        # Every drink type of §1 is a button, with its serving size.
        buttons = browser.find_elements(By.CSS_SELECTOR, "#drink-buttons .drink")
        assert len(buttons) == 11 and drink_button(browser, "doubleEspresso").get_attribute("data-mg") == "128"

        # A tap: one drink in the feed, from this token, and the page's level moves.
        drink_button(browser, "doubleEspresso").click()
        change = next_changes(sub)
        assert len(change["added"]) == 1 and not change["deleted"]
        tapped = change["added"][0]
        assert tapped["type"] == "doubleEspresso" and tapped["mgCaffeine"] == 128 and tapped["source"] == "http:phone"
        wait_until(lambda: (mg_shown(browser) or 0) >= 127, timeout=20, what="the page's level to show the tap")
        wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#recent li")) == 1, timeout=20,
                   what="the tapped drink in the page's list")
        assert "Double espresso" in browser.find_element(By.CSS_SELECTOR, "#recent li").text

        # Undo takes that drink back: a deletion in the feed, the level back to 0.
        undo = browser.find_element(By.ID, "undo")
        assert undo.is_enabled()
        undo.click()
        change = next_changes(sub)
        assert [d["uuid"] for d in change["deleted"]] == [tapped["uuid"]]
        wait_until(lambda: mg_shown(browser) == 0, timeout=20, what="the level back to 0 after the undo")
        wait_until(lambda: not undo.is_enabled(), timeout=10, what="undo disabled with nothing left to take back")
        assert "Took back" in text(browser, "message")

        # The keyboard alone logs one: focus a button, press Enter.
        drink_button(browser, "smallCoffee").send_keys(Keys.ENTER)
        small = next_changes(sub)["added"][0]
        assert small["type"] == "smallCoffee" and small["mgCaffeine"] == 96 and small["version"] == 1
        wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#recent li .edit")) == 1, timeout=20,
                   what="the small coffee in the list")

        # An edit of its time and mg: the next version, everywhere.
        browser.find_element(By.CSS_SELECTOR, "#recent li .edit").click()
        earlier = datetime.now() - timedelta(hours=2)
        browser.execute_script(
            "const f = document.querySelector('#recent form');"
            "f.querySelector('input[type=datetime-local]').value = arguments[0];"
            "f.querySelector('input[type=number]').value = '50';", earlier.strftime("%Y-%m-%dT%H:%M"))
        browser.find_element(By.CSS_SELECTOR, "#recent form button[type=submit]").click()
        edited = next_changes(sub)["added"][0]
        assert edited["uuid"] == small["uuid"] and edited["version"] == 2 and edited["mgCaffeine"] == 50
        assert edited["type"] == "smallCoffee" and edited["source"] == "http:phone"
        when = datetime.fromisoformat(edited["date"].replace("Z", "+00:00"))
        assert abs(when - earlier.astimezone(timezone.utc).replace(second=0, microsecond=0)) < timedelta(seconds=1)
        stored = s.request({"op": "drinks"})["drinks"]
        assert [(d["uuid"], d["version"], d["mgCaffeine"]) for d in stored] == [(small["uuid"], 2, 50)]
        wait_until(lambda: "50 mg" in browser.find_element(By.ID, "recent").text, timeout=20,
                   what="the list to show the edited mg")

        # Nothing from outside (the CSP holds), and a phone's width does not scroll sideways.
        violations = [entry["message"] for entry in browser.get_log("browser")
                      if "Content Security Policy" in entry["message"] or entry["level"] == "SEVERE"]
        assert not violations, violations
        browser.set_window_size(360, 800)
        wait_until(lambda: browser.execute_script(
            "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"), timeout=10,
            what="the page to fit 360 px")
        if os.environ.get("COFFEE_TRACKER_PAGE_SCREENSHOT"):  # the README's picture
            drink_button(browser, "doubleEspresso").click()
            next_changes(sub)
            wait_until(lambda: "Logged" in text(browser, "message") and len(
                browser.find_elements(By.CSS_SELECTOR, "#recent li")) == 2, timeout=20, what="the second drink listed")
            browser.set_window_size(390, 1500)
            time.sleep(0.5)  # the new curve's picture, drawn before the shot
            browser.save_screenshot(os.environ["COFFEE_TRACKER_PAGE_SCREENSHOT"])
        sub.close(0)
    finally:
        s.stop()


class OtherOrigin:
    """A page on another port of 127.0.0.1 that posts a drink to the service as
    a form (text/plain: a JSON body without a CORS preflight), as an attacker's
    page would."""

    def __init__(self, target):
        body = json.dumps(drink(mg=300))[:-1] + ', "pad": "'
        page = f"""<!doctype html><html><body>
<form id="f" method="POST" action="{target}/api/v1/drinks" enctype="text/plain">
<input type="hidden" name='{body}' value='"}}'>
</form><script>document.getElementById("f").submit();</script></body></html>""".encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_page_on_another_origin_cannot_log_a_drink(folder, browser):
    s = tokens_service(folder, tokens=[("phone", "read,write")])
    other = None
    try:
        base = logged_in(s, browser, s.tokens["phone"])
        before = s.request({"op": "ping"})["anchor"]
        other = OtherOrigin(base)
        browser.get(other.url)  # it posts at once, with the login cookie (same site, other port)
        wait_until(lambda: browser.current_url.startswith(base + "/api/v1/drinks"), timeout=20,
                   what="the other page's form to be posted to the service")
        wait_until(lambda: "another origin" in browser.find_element(By.TAG_NAME, "body").text, timeout=10,
                   what="the service's refusal in the browser")
        assert s.request({"op": "ping"})["anchor"] == before, "a drink from another origin was stored"

        # Without a browser: the cookie alone must name its origin; a bearer token needs none.
        cookie = {"Cookie": f"ct_token={s.tokens['phone']}"}
        status, _, reply = call(s, "POST", "/api/v1/drinks", drink(), headers=cookie)
        assert status == 403 and "must carry Origin" in reply["error"]["message"]
        status, _, reply = call(s, "POST", "/api/v1/drinks", drink(), headers={**cookie, "Origin": base})
        assert status == 200 and reply["added"] == 1
        status, _, reply = call(s, "POST", "/api/v1/drinks", drink(), token=s.tokens["phone"])
        assert status == 200 and reply["added"] == 1
        status, _, reply = call(s, "DELETE", f"/api/v1/drinks/{drink()['uuid']}", token=s.tokens["phone"],
                                headers={"Origin": other.url.rstrip("/")})
        assert status == 403 and reply["error"]["code"] == "forbidden"
    finally:
        if other:
            other.close()
        s.stop()


def test_without_tokens_a_write_from_another_origin_is_refused_too(service):
    """Without tokens the API takes any loopback peer: any site the person
    visits could post a form to it, but for the origin check."""
    base = f"http://{service.endpoints['http']}"
    status, _, reply = call(service, "POST", "/api/v1/drinks", drink(), headers={"Origin": "http://127.0.0.1:1"})
    assert status == 403 and "another origin" in reply["error"]["message"]
    status, _, _ = call(service, "POST", "/api/v1/drinks", drink(), headers={"Origin": base})
    assert status == 200
    assert service.request({"op": "ping"})["anchor"] == 1


def test_the_drinks_op_lists_a_range_over_both_doors(service):
    now = time.time()
    old, recent, newer = drink(offset_s=-30 * 3600), drink(offset_s=-3600), drink(offset_s=-60)
    gone = drink(offset_s=-120)
    service.request({"op": "add", "drinks": [old, recent, newer, gone]})
    service.request({"op": "delete", "deletions": [gone["uuid"]]})
    reply = service.request({"op": "drinks"})  # the last 24 hours, oldest first, live ones only
    assert reply["ok"] and [d["uuid"] for d in reply["drinks"]] == [recent["uuid"], newer["uuid"]]
    assert set(reply["drinks"][0]) >= {"uuid", "mgCaffeine", "date", "version", "source"}
    to = datetime.fromisoformat(reply["to"].replace("Z", "+00:00"))
    assert abs(to.timestamp() - now) < 60 and to - datetime.fromisoformat(reply["from"].replace("Z", "+00:00")) == timedelta(hours=24)
    wide = service.request({"op": "drinks", "from": old["date"], "to": newer["date"]})
    assert [d["uuid"] for d in wide["drinks"]] == [old["uuid"], recent["uuid"], newer["uuid"]]
    status, _, over_http = call(service, "GET", f"/api/v1/drinks?from={old['date']}&to={newer['date']}")
    assert status == 200 and over_http["drinks"] == wide["drinks"]
    for request, field in (({"from": newer["date"], "to": old["date"]}, "from"),
                           ({"from": "2001-01-01T00:00:00Z", "to": "2003-01-01T00:00:00Z"}, "from"),
                           ({"to": "yesterday"}, "to")):
        refused = service.request({"op": "drinks", **request})
        assert refused["ok"] is False and refused["error"]["code"] == "bad_request", refused
        assert refused["error"]["field"] == field, refused
    status, _, refused = call(service, "GET", "/api/v1/drinks?from=nonsense")
    assert status == 400 and refused["error"]["field"] == "from"
    # The command line and the Python client ask the same.
    p = service.run_cli("drinks", "--from", old["date"], "--to", newer["date"])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines[-1].startswith("3 drinks from ") and [line.split()[4] for line in lines[:-1]] == \
        [old["uuid"], recent["uuid"], newer["uuid"]]
    p = service.run_cli("drinks", "--from", "not-a-date")
    assert p.returncode == 1 and "from" in p.stderr
    from coffee_tracker import Client
    assert Client(config=str(service.config_path)).drinks(from_=old["date"], to=newer["date"])["drinks"] == wide["drinks"]
