"""The live page in a real browser (Debian's chromium, headless, through
chromedriver and Selenium): it draws the model at once, and a drink added
over the bus changes it without a reload. No CSP violation is logged, and
on a phone-sized window nothing scrolls sideways. With
COFFEE_TRACKER_SCREENSHOT=FILE the page is saved there (the README's picture)."""
import json
import os
import shutil
import time

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service as Driver

from conftest import drink
from test_bus import publisher
from test_inbox import wait_until

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture
def browser():
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1100,900", "--hide-scrollbars"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Driver(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()


def text(driver, element_id):
    return driver.find_element("id", element_id).text


def test_the_page_redraws_when_a_drink_arrives_over_the_bus(service, browser):
    assert service.request({"op": "add", "drinks": [drink(mg=128, offset_s=-2 * 3600),
                                                    drink(mg=96, offset_s=-5 * 3600)]})["ok"]
    browser.get(f"http://{service.endpoints['http']}/")
    wait_until(lambda: text(browser, "status") == "live" and text(browser, "anchor") == "2", timeout=20,
               what="the page to show the current model")
    before_mg, before_src = text(browser, "mg"), browser.find_element("id", "curve").get_attribute("src")
    pub, anchor = publisher(service)
    pub.send_multipart([b"drink.add", json.dumps(drink(mg=200, offset_s=-60)).encode()])
    wait_until(lambda: int(text(browser, "anchor")) > anchor, timeout=20, what="the page to follow the new drink")
    assert int(text(browser, "mg")) > int(before_mg)
    curve = browser.find_element("id", "curve")
    assert curve.get_attribute("src") != before_src
    wait_until(lambda: browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", curve) > 0,
               timeout=10, what="the new picture to load")
    violations = [entry["message"] for entry in browser.get_log("browser")
                  if "Content Security Policy" in entry["message"] or entry["level"] == "SEVERE"]
    assert not violations, violations
    if os.environ.get("COFFEE_TRACKER_SCREENSHOT"):
        time.sleep(0.5)
        browser.save_screenshot(os.environ["COFFEE_TRACKER_SCREENSHOT"])
    pub.close()


def test_the_page_fits_a_phone(service, browser):
    browser.set_window_size(390, 844)
    browser.get(f"http://{service.endpoints['http']}/")
    wait_until(lambda: text(browser, "status") == "live", timeout=20, what="the page to go live")
    overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px on a phone"


def test_a_browser_logs_in_with_a_token_and_the_page_and_its_events_follow(folder, browser):
    from test_http import tokens_service
    s = tokens_service(folder, tokens=[("laptop", "read")])
    try:
        base = f"http://{s.endpoints['http']}"
        browser.get(base + "/")
        assert "unauthenticated" in browser.page_source  # no token, no page
        browser.get(f"{base}/login?token={s.tokens['laptop']}")
        wait_until(lambda: browser.current_url == base + "/", timeout=10, what="the redirect to / without the token")
        assert "token" not in browser.current_url
        wait_until(lambda: text(browser, "status") == "live", timeout=20, what="the page to go live with the cookie")
        anchor = int(text(browser, "anchor"))
        assert s.request({"op": "add", "drinks": [drink(mg=150, offset_s=-60)]})["ok"]
        wait_until(lambda: int(text(browser, "anchor")) > anchor, timeout=20, what="the event stream to follow the drink")
        curve = browser.find_element("id", "curve")
        wait_until(lambda: browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", curve) > 0,
                   timeout=10, what="the picture to load with the cookie")
        # Revoking the token ends the browser's cookie.
        (s.folder / "tokens" / "laptop.token").unlink()
        s.process.send_signal(__import__("signal").SIGHUP)
        def refused():
            browser.get(base + "/")
            return "unauthenticated" in browser.page_source
        wait_until(refused, timeout=10, what="the revoked cookie to be refused")
    finally:
        s.stop()
