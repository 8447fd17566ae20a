"""docs/recipes.md, each tried against the running service by what it
sends and what it reads: its curl lines run as written, the Shortcut's
request, Health Auto Export's automation, the Scriptable widget
(examples/widget.js) run under Node with Scriptable's API recorded, and the
Home Assistant sensor (examples/home-assistant.yaml) read as Home Assistant
reads it (its YAML with !secret, its Jinja template)."""
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import jinja2
import pytest
import yaml

from test_api import call, export_date, health_auto_export_body
from test_http import tokens_service

ROOT = Path(__file__).resolve().parents[2]
RECIPES = (ROOT / "docs" / "recipes.md").read_text()


@pytest.fixture
def phone(folder):
    s = tokens_service(folder, tokens=[("phone", "read,write"), ("widget", "read")])
    s.base = f"http://{s.endpoints['http']}"
    yield s
    s.stop()


def section(title):
    return RECIPES.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_curl_lines_work_as_written(phone):
    block = re.search(r"```sh\n(.*?)```", section("curl"), re.S).group(1)
    commands = [c for c in block.replace("\\\n", " ").splitlines() if c.strip() and not c.startswith("#")]
    assert len(commands) == 3 and all(c.startswith("curl") for c in commands)
    env = {**os.environ, "BASE": phone.base, "TOKEN": phone.tokens["phone"]}
    replies = []
    for command in commands:
        done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        replies.append(json.loads(done.stdout))
    assert replies[0]["ok"] and replies[0]["added"] == 1
    assert replies[1]["ok"] and replies[1]["anchor"] == 1 and replies[1]["mgCaffeine"] > 100
    assert replies[2]["added"][0]["type"] == "doubleEspresso" and replies[2]["hasMore"] is False
    # The query string's %2B, as the recipe says.
    link = re.search(r"`\$BASE(/api/v1/model\?at=[^`]+)`", section("curl")).group(1)
    assert call(phone, "GET", link, token=phone.tokens["phone"])[0] == 200


def test_the_shortcut_logs_a_drink_from_the_watch(phone):
    text = section("Logging a drink from the watch: a Shortcut")
    assert "BASE/api/v1/drinks" in text and "POST" in text and "Bearer TOKEN" in text
    # What "Get Contents of URL" sends: a JSON body of the menu's type and the ISO 8601 date, with an offset.
    date = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - 30))
    headers = {"User-Agent": "Shortcuts/1.0", "Accept": "*/*", "Content-Type": "application/json"}
    status, _, reply = call(phone, "POST", "/api/v1/drinks", {"type": "doubleEspresso", "date": date},
                            phone.tokens["phone"], headers=headers)
    assert status == 200 and reply["added"] == 1 and reply["anchor"] == 1
    model = call(phone, "GET", "/api/v1/model", token=phone.tokens["phone"])[2]
    assert model["drinksToday"] >= 1 or model["mgCaffeine"] > 100
    # Its own uuid makes a retry add nothing, as the recipe says.
    mine = {"uuid": str(uuid.uuid4()), "type": "blackTea", "date": date}
    assert call(phone, "POST", "/api/v1/drinks", mine, phone.tokens["phone"])[2]["added"] == 1
    assert call(phone, "POST", "/api/v1/drinks", mine, phone.tokens["phone"])[2]["duplicates"] == 1


def test_the_health_auto_export_automation(phone):
    text = section("Health Auto Export")
    assert "BASE/api/v1/health-auto-export" in text and "Dietary Caffeine" in text
    body = health_auto_export_body()
    headers = {"Content-Type": "application/json", "User-Agent": "Health Auto Export"}
    status, _, reply = call(phone, "POST", "/api/v1/health-auto-export", body, phone.tokens["phone"], headers=headers)
    assert status == 200 and reply["added"] == 3
    # "Previous 7 Days" sends it again: nothing is added.
    status, _, again = call(phone, "POST", "/api/v1/health-auto-export", body, phone.tokens["phone"], headers=headers)
    assert again["added"] == 0 and again["duplicates"] == 3
    # A read token may not post.
    assert call(phone, "POST", "/api/v1/health-auto-export", body, phone.tokens["widget"])[0] == 403


@pytest.mark.skipif(not shutil.which("node"), reason="needs node (make deps installs nodejs)")
def test_the_scriptable_widget_reads_the_model_and_shows_it(phone):
    assert call(phone, "POST", "/api/v1/drinks", {"type": "doubleEspresso", "date": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1800))}, phone.tokens["phone"])[0] == 200
    widget = ROOT / "examples" / "widget.js"
    run = subprocess.run(["node", str(ROOT / "Tests/integration/scriptable/harness.mjs"), str(widget),
                          f"{phone.base} {phone.tokens['widget']}"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    shown = json.loads(run.stdout.strip().splitlines()[-1])
    assert shown["requests"] == [{"url": f"{phone.base}/api/v1/model", "method": "GET",
                                  "headers": {"Authorization": f"Bearer {phone.tokens['widget']}"}}]
    model = call(phone, "GET", "/api/v1/model", token=phone.tokens["widget"])[2]
    mg = [int(m.group(1)) for t in shown["texts"] if (m := re.fullmatch(r"(\d+) mg", t))]
    assert mg and abs(mg[0] - model["mgCaffeine"]) <= 2, shown
    assert any(t.startswith(f"{model['level']} · ") and "cups today" in t for t in shown["texts"]), shown
    assert shown["images"] == 1 and shown["bars"] >= 60 and any(t.endswith("mg in 6 h") for t in shown["texts"])
    assert shown["presented"] and shown["completed"]
    # A revoked or wrong token: the widget says why, it does not draw a wrong figure.
    run = subprocess.run(["node", str(ROOT / "Tests/integration/scriptable/harness.mjs"), str(widget),
                          f"{phone.base} ct_wrong"], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "unauthenticated" in run.stderr


def test_the_home_assistant_sensor_reads_the_model(phone):
    assert call(phone, "POST", "/api/v1/drinks", {"type": "mediumCoffee", "date": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 600))}, phone.tokens["phone"])[0] == 200
    secrets = {"coffee_tracker_authorization": f"Bearer {phone.tokens['widget']}"}

    class Loader(yaml.SafeLoader):
        pass
    Loader.add_constructor("!secret", lambda loader, node: secrets[loader.construct_scalar(node)])
    sensor = yaml.load((ROOT / "examples" / "home-assistant.yaml").read_text(), Loader=Loader)["sensor"][0]
    assert sensor["platform"] == "rest"
    path = sensor["resource"].split("coffee.example.org", 1)[1]
    status, _, reply = call(phone, "GET", path, headers=sensor["headers"])
    assert status == 200
    state = jinja2.Environment().from_string(sensor["value_template"]).render(value_json=reply)
    assert float(state) == round(reply["mgCaffeine"]) and float(state) > 0
    assert all(name in reply for name in sensor["json_attributes"])
    assert sensor["unit_of_measurement"] == "mg"
