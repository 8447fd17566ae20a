"""docs/protocol.md §15: `GET /api/v1/export.csv` streamed from the store.
200,000 drinks go out chunked with the service's RSS growing by at most
16 MB and come back equal through Python's csv module; a client reading a
byte a second holds neither the store nor a POST; a client gone mid-export
leaves the service serving."""
import csv
import http.client
import io
import json
import os
import socket
import statistics
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone

from conftest import Service, drink, wait_until
from test_api import call
from test_inbox import drop, processed
from test_memory import rss_mb

START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def stored_drinks(n, every_s=300):
    """n drinks, one every `every_s` seconds from START, a few with a source a spreadsheet would run."""
    out = []
    for i in range(n):
        d = {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 40 + i % 97 + (0.5 if i % 3 == 0 else 0),
             "date": (START + timedelta(seconds=i * every_s)).strftime("%Y-%m-%dT%H:%M:%SZ"), "version": 1 + i % 4,
             "source": "kitchen, the good machine"}
        if i % 5 == 0:
            d["type"] = "singleEspresso"
        if i % 1000 == 7:
            d["source"] = f'=HYPERLINK("http://x/{i}","y"), then "more"'
        out.append(d)
    return out


def fill(service, drinks):
    drop(service, "many.jsonl", "".join(json.dumps(d) + "\n" for d in drinks))
    wait_until(lambda: processed(service, "many.jsonl"), timeout=120, what="the drinks imported")


def connection(service):
    host, port = service.endpoints["http"].rsplit(":", 1)
    return host, int(port)


def test_200000_drinks_stream_out_in_bounded_memory_and_read_back_equal(folder):
    s = Service(folder + "/a", {"model": {"timeZone": "Europe/Berlin"}}).start()
    try:
        drinks = stored_drinks(200_000)
        fill(s, drinks)
        pid = s.process.pid
        host, port = connection(s)
        c = http.client.HTTPConnection(host, port, timeout=60)
        c.request("GET", "/api/v1/export.csv")  # a small one first: what any request costs is not the export's
        c.getresponse().read(100)
        c.close()
        before = rss_mb(pid)
        peak = [before]
        done = threading.Event()

        def sample():
            while not done.wait(0.005):
                peak[0] = max(peak[0], rss_mb(pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            c = http.client.HTTPConnection(host, port, timeout=60)
            c.request("GET", "/api/v1/export.csv")
            r = c.getresponse()
            assert r.status == 200 and r.getheader("Transfer-Encoding") == "chunked", r.getheaders()
            body = r.read().decode()
            # The connection is kept after a chunked body: a second request on it.
            c.request("GET", "/api/v1/drinks")
            assert c.getresponse().status == 200
            c.close()
        finally:
            done.set()
            sampler.join()
        growth = peak[0] - before
        print(f"RSS {before:.1f} MB before, {peak[0]:.1f} MB at most during the export of {len(drinks)} drinks")
        assert growth <= 16, f"RSS grew {growth:.1f} MB during the export ({before:.1f} -> {peak[0]:.1f})"
        # The command line pages through the query endpoint and writes the same bytes.
        out = os.path.join(folder, "drinks.csv")
        p = s.run_cli("export", "--csv", "--out", out, timeout=120)
        assert p.returncode == 0 and f"wrote {len(drinks)} drinks" in p.stderr, p.stderr
        with open(out, newline="") as f:
            assert f.read() == body
        rows = list(csv.DictReader(io.StringIO(body, newline="")))
        assert len(rows) == len(drinks)
        assert [r["uuid"] for r in rows] == [d["uuid"] for d in drinks]  # oldest first
        for row, d in zip(rows, drinks):
            assert datetime.fromisoformat(row["date"]) == datetime.fromisoformat(d["date"].replace("Z", "+00:00"))
            assert float(row["mgCaffeine"]) == d["mgCaffeine"] and int(row["version"]) == d["version"]
            assert row["type"] == d.get("type", "")
            assert row["source"] == ("'" + d["source"] if d["source"].startswith("=") else d["source"]), row
    finally:
        s.stop()


def dechunked(response):
    """The body of an HTTP/1.1 response in chunked transfer encoding (its head minus its first byte)."""
    rest = response[response.index(b"\r\n\r\n") + 4:]
    body = bytearray()
    while True:
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            return bytes(body)
        body += rest[:size]
        assert rest[size:size + 2] == b"\r\n"
        rest = rest[size + 2:]


def post_ms(service):
    host, port = connection(service)
    c = http.client.HTTPConnection(host, port, timeout=10)
    body = json.dumps([drink(mg=64)])
    began = time.perf_counter()
    c.request("POST", "/api/v1/drinks", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    took = (time.perf_counter() - began) * 1000
    c.close()
    assert r.status == 200, r.status
    return took


def test_a_client_reading_a_byte_a_second_delays_no_post(folder):
    s = Service(folder + "/a").start()
    try:
        fill(s, stored_drinks(100_000, every_s=60))  # about 9 MB of CSV: far more than the sockets' buffers
        alone = statistics.median(post_ms(s) for _ in range(5))
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.settimeout(10)
        slow.connect(connection(s))
        slow.sendall(b"GET /api/v1/export.csv HTTP/1.1\r\nHost: x\r\n\r\n")
        head = slow.recv(1)
        assert head == b"H"
        beside = []
        for _ in range(5):  # a byte a second, a POST between each
            time.sleep(1)
            assert len(slow.recv(1)) == 1
            beside.append(post_ms(s))
        assert statistics.median(beside) <= alone + 100, (alone, beside)
        # The export goes on, whole, once the client reads again.
        slow.settimeout(30)
        got = bytearray()
        while not got.endswith(b"\r\n0\r\n\r\n"):
            piece = slow.recv(1 << 16)
            assert piece, "the export was cut short"
            got += piece
        rows = list(csv.DictReader(io.StringIO(dechunked(bytes(got)).decode(), newline="")))
        assert len(rows) >= 100_000 and rows[0]["date"].startswith("2024-01-01T")
        slow.close()
    finally:
        s.stop()


def test_a_client_gone_mid_export_leaves_the_service_serving(folder):
    s = Service(folder + "/a").start()
    try:
        fill(s, stored_drinks(30_000, every_s=60))
        for _ in range(3):
            gone = socket.socket()
            gone.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            gone.connect(connection(s))
            gone.sendall(b"GET /api/v1/export.csv HTTP/1.1\r\nHost: x\r\n\r\n")
            assert gone.recv(100).startswith(b"HTTP/1.1 200")
            gone.close()  # while the service waits for it to read on
        host, port = connection(s)
        c = http.client.HTTPConnection(host, port, timeout=30)
        c.request("GET", "/api/v1/export.csv")
        rows = list(csv.DictReader(io.StringIO(c.getresponse().read().decode(), newline="")))
        assert len(rows) == 30_000
        assert post_ms(s) < 10_000
    finally:
        assert s.stop() == 0


def test_the_drinks_op_pages_by_date_and_uuid_over_any_range(folder):
    s = Service(folder + "/a").start()
    try:
        tied = [{"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 10 + i, "date": "2020-05-05T05:05:05.505Z"}
                for i in range(12)]
        spread = [{"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 50, "date": f"20{10 + i}-01-01T00:00:00Z"}
                  for i in range(9)]
        assert s.request({"op": "add", "drinks": tied + spread})["added"] == 21
        expected = [d["uuid"] for d in sorted(tied + spread, key=lambda d: (datetime.fromisoformat(
            d["date"].replace("Z", "+00:00")), d["uuid"]))]
        got, request, pages = [], {"op": "drinks", "from": "2000-01-01T00:00:00Z", "to": "2030-01-01T00:00:00Z",
                                   "limit": 5}, 0
        while True:
            reply = s.request(request)
            assert reply["ok"] and len(reply["drinks"]) <= 5, reply
            got += [d["uuid"] for d in reply["drinks"]]
            pages += 1
            if not reply["more"]:
                break
            assert pages < 10
            last = reply["drinks"][-1]
            request = dict(request, **{"from": last["date"], "after": last["uuid"]})
        assert got == expected and pages == 5  # 21 drinks, twelve on one date across pages of five
        # The same page over HTTP.
        first = s.request(dict(request, **{"from": "2000-01-01T00:00:00Z", "after": None}))
        status, _, reply = call(s, "GET", "/api/v1/drinks?from=2000-01-01T00:00:00Z&to=2030-01-01T00:00:00Z&limit=5")
        assert status == 200 and reply["more"] and reply["drinks"] == first["drinks"], reply
        last = reply["drinks"][-1]
        status, _, reply = call(s, "GET", f"/api/v1/drinks?from={last['date']}&to=2030-01-01T00:00:00Z&limit=5"
                                          f"&after={last['uuid']}")
        assert [d["uuid"] for d in reply["drinks"]] == expected[5:10], reply
        # Without a limit the range is still at most 366 days; `after` needs a limit.
        reply = s.request({"op": "drinks", "from": "2000-01-01T00:00:00Z", "to": "2030-01-01T00:00:00Z"})
        assert reply["error"]["code"] == "bad_request" and reply["error"]["field"] == "from", reply
        reply = s.request({"op": "drinks", "after": tied[0]["uuid"]})
        assert reply["error"]["field"] == "after", reply
        reply = s.request({"op": "drinks", "after": "nope", "limit": 5})
        assert reply["error"]["field"] == "after", reply
    finally:
        s.stop()
