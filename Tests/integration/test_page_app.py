"""docs/protocol.md §17: the live page as the phone's own app, in a real
browser (Debian's chromium, headless, through chromedriver): the manifest
and the icons it names, the service worker that keeps the shell, the page
opening with no network (DevTools' network emulation, and the service
stopped, so that nothing answers from wherever the worker asks), three taps
kept while it is off and sent with their own times when it is back, none
twice, Undo of a kept tap sending nothing, and the worker sending the kept
taps by Background Sync with no page open."""
import json
import os
import struct
import time
import urllib.request
import zlib
from datetime import datetime, timezone

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import drink
from test_http import free_port, tokens_service
from test_inbox import wait_until
from test_page_browser import browser, text  # noqa: F401  (browser: the fixture)
from test_page_writes import drink_button, logged_in, mg_shown

OFFLINE = "offline: taps are kept and sent when the network is back"


def png_pixels(data):
    """(width, height, rows of RGBA bytes) of a PNG, every chunk's CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, width, height = 8, b"", None, None
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert (depth, colour) == (8, 6)  # RGBA, 8 bits a channel
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    raw = zlib.decompress(idat)  # zlib's own reader: the stream and its checksum are right
    stride = 1 + 4 * width
    assert len(raw) == height * stride
    return width, height, [raw[y * stride + 1:(y + 1) * stride] for y in range(height)]


def test_the_manifest_and_its_icons_need_no_login_and_are_what_they_say(folder):
    s = tokens_service(folder, tokens=[("phone", "read")])
    try:
        base = f"http://{s.endpoints['http']}"
        manifest = json.loads(urllib.request.urlopen(f"{base}/manifest.webmanifest", timeout=10).read())
        assert manifest["display"] == "standalone" and manifest["start_url"] == "/" and manifest["scope"] == "/"
        assert manifest["name"] == "Coffee Tracker" and manifest["short_name"]
        sizes = set()
        for icon in manifest["icons"]:
            reply = urllib.request.urlopen(base + icon["src"], timeout=10)
            assert reply.headers["Content-Type"] == "image/png" and icon["type"] == "image/png"
            width, height, rows = png_pixels(reply.read())
            assert f"{width}x{height}" == icon["sizes"]
            sizes.add(width)
            # Maskable: the corners are the background, the middle holds the white cup.
            assert rows[0][:4] == bytes([0x2E, 0x7D, 0x32, 0xFF])
            assert bytes([0xFF, 0xFF, 0xFF, 0xFF]) in b"".join(rows[height // 2 - 2:height // 2 + 2])
        assert {192, 512} <= sizes
        # The rest of the page stays behind the login.
        try:
            urllib.request.urlopen(f"{base}/sw.js", timeout=10)
            raise AssertionError("the worker's script answered without a login")
        except urllib.error.HTTPError as refused:
            assert refused.code == 401
    finally:
        s.stop()


def waiting(browser):
    element = browser.find_element(By.ID, "waiting")
    return "" if element.get_attribute("hidden") is not None else element.text


def network(browser, on):
    """DevTools' network emulation for the page: none at all, or a fast one."""
    throughput = 10_000_000 if on else 0
    browser.set_network_conditions(offline=not on, latency=0, download_throughput=throughput,
                                   upload_throughput=throughput)


def controlled_then_offline(service, browser):
    """The worker registered and controlling the page (it does once the page
    is opened again); then no network: the service stopped and the browser
    offline, the page opened from the shell and saying so."""
    assert browser.execute_async_script(
        "const done = arguments[0]; navigator.serviceWorker.ready.then((r) => done(!!r.active));")
    browser.refresh()
    wait_until(lambda: browser.execute_script("return !!navigator.serviceWorker.controller"), timeout=20,
               what="the worker to control the page")
    wait_until(lambda: text(browser, "status") == "live", timeout=20, what="the page live again")
    assert service.stop() == 0
    network(browser, False)
    browser.refresh()
    wait_until(lambda: text(browser, "status") == OFFLINE, timeout=20, what="the page to open offline and say so")


def tap_offline(browser, kinds):
    """Taps each kind's button with no network; each waits in the queue. The times of the taps, by kind."""
    tapped = {}
    for count, kind in enumerate(kinds, start=1):
        tapped[kind] = datetime.now(timezone.utc)
        drink_button(browser, kind).click()
        wait_until(lambda: waiting(browser) == f"{count} waiting to send", timeout=10, what=f"{count} taps waiting")
    return tapped


def stored_as_tapped(stored, tapped):
    """The drinks stored are the taps, each dated when it was tapped, from the phone's token, once."""
    assert sorted(d["type"] for d in stored) == sorted(tapped), stored
    for d in stored:
        when = datetime.fromisoformat(d["date"].replace("Z", "+00:00"))
        assert abs((when - tapped[d["type"]]).total_seconds()) < 1, (d, tapped[d["type"]])
        assert d["source"] == "http:phone" and d["version"] == 1


def test_the_page_opens_with_no_network_and_sends_the_taps_it_kept_dated_when_tapped(folder, browser):
    port = free_port()  # the same origin after a restart: its worker, cache and queue
    s = tokens_service(folder, extra={"http": {"bind": f"127.0.0.1:{port}"}}, tokens=[("phone", "read,write")])
    try:
        logged_in(s, browser, s.tokens["phone"])
        assert browser.find_element(By.CSS_SELECTOR, 'link[rel="manifest"]').get_attribute("href").endswith(
            "/manifest.webmanifest")
        controlled_then_offline(s, browser)
        assert len(browser.find_elements(By.CSS_SELECTOR, "#drink-buttons .drink")) == 11

        tapped = tap_offline(browser, ["doubleEspresso", "smallCoffee", "blackTea"])
        # A fourth tap taken back while it waits: out of the queue, never sent.
        drink_button(browser, "chocolate").click()
        wait_until(lambda: waiting(browser) == "4 waiting to send", timeout=10, what="4 taps waiting")
        browser.find_element(By.ID, "undo").click()
        wait_until(lambda: waiting(browser) == "3 waiting to send", timeout=10, what="the undone tap out of the queue")
        assert "Took back the chocolate" in text(browser, "message")
        if os.environ.get("COFFEE_TRACKER_APP_SCREENSHOT"):  # docs/page-offline.png
            browser.set_window_size(390, 1250)
            browser.execute_script("window.scrollTo(0, 0)")
            browser.save_screenshot(os.environ["COFFEE_TRACKER_APP_SCREENSHOT"])

        # The network back, a while later: the taps are sent with their own times.
        time.sleep(2.5)
        s.start()
        network(browser, True)
        wait_until(lambda: waiting(browser) == "", timeout=30, what="the waiting taps sent")
        stored_as_tapped(s.request({"op": "drinks"})["drinks"], tapped)
        # Opened again: nothing is sent twice.
        browser.refresh()
        wait_until(lambda: text(browser, "status") == "live", timeout=20, what="the page live after the reload")
        time.sleep(1)
        again = s.request({"op": "drinks"})["drinks"]
        assert len(again) == 3 and s.request({"op": "stats"})["stored"] == 3
        violations = [entry["message"] for entry in browser.get_log("browser")
                      if "Content Security Policy" in entry["message"]]
        assert not violations, violations
    finally:
        network(browser, True)
        s.stop()


def test_the_worker_sends_the_kept_taps_by_background_sync_with_no_page_open(folder, browser):
    """§17: Background Sync (tag `send-taps`) sends the queue from the worker,
    with the login cookie: here the page is gone (about:blank) before the
    network is back, so nothing but the worker can send the taps."""
    port = free_port()
    s = tokens_service(folder, extra={"http": {"bind": f"127.0.0.1:{port}"}}, tokens=[("phone", "read,write")])
    base = f"http://127.0.0.1:{port}"
    try:
        logged_in(s, browser, s.tokens["phone"])
        controlled_then_offline(s, browser)
        tapped = tap_offline(browser, ["doubleEspresso", "greenTea"])
        # The page closed while the taps wait; the network and the service back.
        browser.get("about:blank")
        network(browser, True)
        s.start()
        time.sleep(1)
        assert s.request({"op": "drinks"})["drinks"] == []  # nothing sent them yet
        # DevTools fires the sync as the browser would once it is online (a new
        # profile's first registration is "0"); fired again until the taps are in,
        # since a firing that found the service not yet listening leaves them queued.
        browser.execute_cdp_cmd("ServiceWorker.enable", {})

        def stored():
            browser.execute_cdp_cmd("ServiceWorker.dispatchSyncEvent",
                                    {"origin": base + "/", "registrationId": "0", "tag": "send-taps",
                                     "lastChance": False})
            time.sleep(0.5)
            return s.request({"op": "drinks"})["drinks"]
        wait_until(lambda: len(stored()) == 2, timeout=30, what="the worker to send the kept taps")
        stored_as_tapped(s.request({"op": "drinks"})["drinks"], tapped)
        # Sent once: the queue is empty, so the page opened again sends nothing more.
        browser.get(base + "/")
        wait_until(lambda: text(browser, "status") == "live", timeout=20, what="the page live again")
        assert waiting(browser) == ""
        time.sleep(1)
        assert s.request({"op": "stats"})["stored"] == 2
    finally:
        network(browser, True)
        s.stop()


def test_the_settings_view_changes_the_half_life_and_the_catalogue_from_the_page(folder, browser):
    s = tokens_service(folder, tokens=[("me", "read,write,admin"), ("phone", "read,write")])
    try:
        assert s.request({"op": "add", "drinks": [drink(mg=200.0, offset_s=-3 * 3600)]})["ok"]
        base = logged_in(s, browser, s.tokens["me"])
        # 200 mg three hours ago, a five-hour half-life: 200 / 2^(3/5) = 131.9.
        wait_until(lambda: mg_shown(browser) == 132, timeout=20, what="the level at a five-hour half-life")
        browser.find_element(By.LINK_TEXT, "Settings").click()
        form = lambda name: browser.find_element(By.CSS_SELECTOR, f'#settings [name="{name}"]')  # noqa: E731
        wait_until(lambda: form("halfLifeHours").get_attribute("value") == "5", timeout=20, what="the settings read")
        assert form("timeZone").get_attribute("value") == "UTC"

        form("halfLifeHours").clear()
        form("halfLifeHours").send_keys("2")
        form("halfLifeHours").send_keys(Keys.ENTER)  # the keyboard alone saves
        wait_until(lambda: text(browser, "settings-message") == "Saved.", timeout=20, what="the half-life saved")
        assert s.request({"op": "settings"})["settings"]["halfLifeHours"] == 2

        # A zone that is no IANA name (put in the list by hand): the field's message, the field marked.
        browser.execute_script("const z = document.querySelector('[name=timeZone]');"
                               "z.add(new Option('Berlin')); z.value = 'Berlin';")
        browser.find_element(By.CSS_SELECTOR, "#settings button[type=submit]").click()
        wait_until(lambda: "settings.timeZone" in text(browser, "settings-message"), timeout=20,
                   what="the zone's refusal shown")
        assert form("timeZone").get_attribute("aria-invalid") == "true"
        assert s.request({"op": "settings"})["settings"]["timeZone"] == "UTC"

        # A drink of their own: added on the page, then a button of the live page.
        new = lambda name: browser.find_element(By.CSS_SELECTOR, f'#new-drink [name="{name}"]')  # noqa: E731
        new("name").send_keys("flatWhite")
        new("mgCaffeine").send_keys("130")
        new("mgCaffeine").send_keys(Keys.ENTER)
        wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, '#catalogue li[data-name="flatWhite"]'), timeout=20,
                   what="the new drink listed")
        # Nothing scrolls sideways at a phone's width.
        browser.set_window_size(360, 800)
        wait_until(lambda: browser.execute_script(
            "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"), timeout=10,
            what="the settings page to fit 360 px")
        if os.environ.get("COFFEE_TRACKER_SETTINGS_SCREENSHOT"):  # docs/page-settings.png
            browser.set_window_size(390, 1100)
            browser.execute_script("window.scrollTo(0, 0)")
            browser.save_screenshot(os.environ["COFFEE_TRACKER_SETTINGS_SCREENSHOT"])
        browser.set_window_size(1100, 900)

        browser.get(base + "/")
        wait_until(lambda: text(browser, "status") == "live", timeout=20, what="the live page again")
        assert drink_button(browser, "flatWhite").get_attribute("data-mg") == "130"
        # The level follows the half-life: 200 / 2^(3/2) = 70.7.
        wait_until(lambda: mg_shown(browser) == 71, timeout=20, what="the level at a two-hour half-life")
        violations = [entry["message"] for entry in browser.get_log("browser")
                      if "Content Security Policy" in entry["message"]]
        assert not violations, violations
    finally:
        s.stop()


def test_the_worker_shows_a_pushed_alert_as_a_notification(service, browser):
    base = f"http://{service.endpoints['http']}"
    browser.get(base + "/")
    assert browser.execute_async_script(
        "const done = arguments[0]; navigator.serviceWorker.ready.then((r) => done(!!r.active));")
    browser.execute_cdp_cmd("Browser.grantPermissions", {"origin": base, "permissions": ["notifications"]})
    browser.execute_cdp_cmd("ServiceWorker.enable", {})
    alert = {"id": "A1", "rule": "levelOver", "event": "fired", "title": "Over 300 mg", "message": "350 mg now."}
    # DevTools hands the worker a push as a push service would (decrypted); a new profile's
    # first registration is "0". Handed again until shown (the permission may land after the
    # first); the rule is the notification's tag, so one is shown however many arrive.
    def shown():
        browser.execute_cdp_cmd("ServiceWorker.deliverPushMessage",
                                {"origin": base + "/", "registrationId": "0", "data": json.dumps(alert)})
        time.sleep(0.2)
        return browser.execute_async_script(
            "const done = arguments[0]; navigator.serviceWorker.ready.then((r) => r.getNotifications())"
            ".then((all) => done(all.map((n) => [n.title, n.body, n.tag])));")
    wait_until(lambda: shown() == [["Over 300 mg", "350 mg now.", "levelOver"]], timeout=15,
               what="the alert shown as a notification")
