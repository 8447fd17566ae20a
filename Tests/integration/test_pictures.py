"""The curve as a picture and a live page (docs/protocol.md §10), against the
real service: `GET /model.svg` and `coffee-tracker model --svg` checked
structurally, with the sleep threshold computed here; `GET /`, its assets
and their Content-Security-Policy; `GET /events` as server-sent events; and
an `http.bind` off loopback refused."""
import datetime
import json
import math
import socket
import subprocess
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import BINARY, Service, drink
from test_bus import publisher
from test_inbox import wait_until

SVG = "{http://www.w3.org/2000/svg}"


def get(service, path, timeout=5):
    with urllib.request.urlopen(f"http://{service.endpoints['http']}{path}", timeout=timeout) as r:
        return r.status, dict(r.headers), r.read().decode()


def parse_date(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def check_picture(svg, drinks, half_life=5.0, threshold=50.0):
    """Well-formed; one curve of at least 200 points; bands at 200 and 400;
    a mark per drink of the 12 hours shown; the sleep time as computed here."""
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    curves = [e for e in root.iter() if e.get("id") == "curve"]
    assert len(curves) == 1
    points = curves[0].get("d").lstrip("M").split(" L")
    assert len(points) >= 200
    bands = sorted(int(e.get("data-from")) for e in root.iter() if e.get("class") == "band")
    assert 200 in bands and 400 in bands
    now = parse_date(root.get("data-now"))
    shown = [d for d in drinks if now - datetime.timedelta(hours=12) <= parse_date(d["date"]) <= now]
    marks = sorted(float(e.get("data-mg")) for e in root.iter() if e.get("class") == "drink")
    assert marks == sorted(float(d["mgCaffeine"]) for d in shown)
    mg_now = sum(d["mgCaffeine"] * 0.5 ** ((now - parse_date(d["date"])).total_seconds() / 3600 / half_life)
                 for d in drinks if now - datetime.timedelta(hours=24) <= parse_date(d["date"]) <= now)
    assert abs(float(root.get("data-mg-now")) - mg_now) < 0.1
    sleep = next(e for e in root.iter() if e.get("id") == "sleep")
    if mg_now > threshold:
        expected = now + datetime.timedelta(hours=half_life * math.log2(mg_now / threshold))
        assert abs((parse_date(sleep.get("data-time")) - expected).total_seconds()) < 1
    else:
        assert sleep.get("data-time") is None
    return root


def some_drinks():
    return [drink(mg=200, offset_s=-3 * 3600), drink(mg=96, offset_s=-3600), drink(mg=64, offset_s=-600),
            drink(mg=300, offset_s=-20 * 3600)]  # the last counts in the past of the curve, without a mark


def test_model_svg_draws_the_curve_bands_drinks_and_the_sleep_time(service):
    drinks = some_drinks()
    assert service.request({"op": "add", "drinks": drinks})["ok"]
    status, headers, svg = get(service, "/model.svg")
    assert status == 200 and headers["Content-Type"] == "image/svg+xml"
    check_picture(svg, drinks)


def test_model_svg_without_drinks_says_caffeine_is_under_the_threshold(service):
    _, _, svg = get(service, "/model.svg")
    root = check_picture(svg, [])
    assert any("under 50 mg now" in (e.text or "") for e in root.iter())


def test_the_command_line_draws_the_same_picture(service, tmp_path):
    drinks = some_drinks()
    assert service.request({"op": "add", "drinks": drinks})["ok"]
    out = tmp_path / "curve.svg"
    p = service.run_cli("model", "--svg", str(out))
    assert p.returncode == 0, p.stderr
    check_picture(out.read_text(), drinks)
    p = service.run_cli("model", "--svg", "-")
    assert p.returncode == 0 and p.stdout.startswith("<?xml")
    check_picture(p.stdout, drinks)


def test_the_threshold_comes_from_the_configuration(folder):
    s = Service(folder, {"model": {"sleepThresholdMg": 20}}).start()
    try:
        drinks = [drink(mg=150, offset_s=-60)]
        assert s.request({"op": "add", "drinks": drinks})["ok"]
        check_picture(get(s, "/model.svg")[2], drinks, threshold=20)
    finally:
        s.stop()


def test_the_page_and_its_assets_load_nothing_from_outside(service):
    status, headers, html = get(service, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert headers["Content-Security-Policy"] == "default-src 'self'"
    assert "<script src=\"/app.js\"" in html and "/app.css" in html and "/model.svg" in html
    assert "http://" not in html and "https://" not in html and "<style" not in html
    for path, kind in (("/app.js", "text/javascript"), ("/app.css", "text/css")):
        status, headers, body = get(service, path)
        assert status == 200 and headers["Content-Type"].startswith(kind) and body
        assert "http://" not in body and "https://" not in body


def read_events(sock, until, timeout=10):
    """Reads server-sent events from a raw socket until `until(events)`."""
    sock.settimeout(timeout)
    buffer, events = b"", []
    deadline = time.time() + timeout
    while time.time() < deadline and not until(events):
        chunk = sock.recv(65536)
        assert chunk, "the event stream closed"
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            lines = block.decode().split("\n")
            name = next((l[7:] for l in lines if l.startswith("event: ")), None)
            data = "\n".join(l[6:] for l in lines if l.startswith("data: "))
            if name:
                events.append((name, json.loads(data)))
    return events


def test_events_stream_each_model_as_it_is_published(service):
    host, port = service.endpoints["http"].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    try:
        sock.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert b"200 OK" in head and b"text/event-stream" in head and b"Content-Length" not in head
        first = read_events(sock, lambda e: len(e) >= 1)
        assert first[0][0] == "model" and first[0][1]["anchor"] == 0  # the current model, at once
        pub, anchor = publisher(service)
        pub.send_multipart([b"drink.add", json.dumps(drink(mg=150)).encode()])
        later = read_events(sock, lambda e: any(m["anchor"] > anchor for _, m in e))
        model = next(m for _, m in later if m["anchor"] > anchor)
        assert model["mgCaffeine"] > 100 and len(model["timeline"]) == 287
        pub.close()
    finally:
        sock.close()


def test_an_http_bind_off_loopback_is_refused_unless_plaintext_is_allowed(folder):
    config = Path(folder) / "remote.json"
    config.write_text(json.dumps({"dataDirectory": "data", "http": {"bind": "0.0.0.0:0"},
                                  "ingest": {"bind": [f"ipc://{folder}/i.sock"]},
                                  "updates": {"bind": [f"ipc://{folder}/u.sock"]},
                                  "query": {"bind": [f"ipc://{folder}/q.sock"]}}))
    p = subprocess.run([BINARY, "serve", "--config", str(config)], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    assert "http.bind 0.0.0.0:0 is not a loopback address" in p.stderr and "allowPlaintextRemote" in p.stderr
    p = subprocess.run([BINARY, "check", "--config", str(config)], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "http.bind 0.0.0.0:0" in p.stdout + p.stderr
