"""docs/protocol.md §16 against the real service over real sockets: alerts
to a webhook receiver of the test's own that is down, then answers 500,
then 200 (each delivered once, its HMAC signature checked), an `alert`
message on the update feed (pyzmq), the outbox kept across kill -9 (and
across a kill right after the alert's commit), a deletion that clears,
ntfy's headers, and the configuration's errors naming their keys."""
import hashlib
import hmac
import json
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import ALERTS_ON, Service, drink, next_message, wait_until
from test_bus import subscriber
from test_http import free_port
from test_operations import http

SECRET = "s3cret-for-the-test"


class Receiver:
    """A webhook or ntfy receiver on a port of the test's own: `answers` is
    what it answers, in order (the last one from then on); every request
    is kept with the status it got."""

    def __init__(self, port, answers=(200,), closing=False):
        self.port, self.answers, self.requests, self.closing = port, list(answers), [], closing
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    status = receiver.answers.pop(0) if len(receiver.answers) > 1 else receiver.answers[0]
                    receiver.requests.append((dict(self.headers), body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                if receiver.closing:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def delivered(self):
        """The bodies answered 2xx, as JSON."""
        with self.lock:
            return [json.loads(body) for _, body, status in self.requests if 200 <= status < 300]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def alert_service(folder, port, extra=None, receiver="webhook"):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "secret.txt"), "w") as f:
        f.write(SECRET + "\n")
    alerts = dict(ALERTS_ON, bedtime="off", retryInitialS=0.2, retryMaxS=0.5)
    if receiver == "webhook":
        alerts["webhook"] = {"url": f"http://127.0.0.1:{port}/hook", "secretFile": "secret.txt"}
    else:
        alerts["ntfy"] = {"url": f"http://127.0.0.1:{port}/coffee", "tokenFile": "secret.txt"}
    alerts.update(extra or {})
    return Service(folder, {"alerts": alerts})


def stats(s):
    return s.request({"op": "stats"})


def test_webhook_down_then_500_then_200_delivers_each_alert_once_signed(folder):
    os.makedirs(folder, exist_ok=True)
    port = free_port()
    s = alert_service(folder, port).start()
    receiver = None
    try:
        feed = subscriber(s, topics=(b"alert",))
        first = drink(mg=350.0, offset_s=-10)
        assert s.request({"op": "add", "drinks": [first]})["ok"]
        told = [next_message(feed, topics=(b"alert",), what="an alert message")[1] for _ in range(2)]
        assert sorted((a["rule"], a["event"]) for a in told) == [("levelOver", "fired"), ("sleepThreshold", "cleared")]
        assert all(a["anchor"] == 1 for a in told), told  # the model of the drink's commit (§3: every body has one)
        # The receiver is down: the alerts wait in the outbox, tried again; a state /readyz and stats show.
        wait_until(lambda: stats(s)["alerts.webhook"]["retried"] >= 2, what="retries while the receiver is down")
        assert stats(s)["alerts.webhook"]["pending"] == 2 and "connect" in stats(s)["alerts.webhook"]["failing"].lower()
        status, body = http(s, "/readyz")
        assert status == 200 and "alerts webhook: failing" in body, body
        # Over the daily limit, then deleted: fired, then cleared.
        second = drink(mg=100.0, offset_s=-5)
        assert s.request({"op": "add", "drinks": [second]})["ok"]
        assert next_message(feed, topics=(b"alert",))[1]["rule"] == "dailyLimit"
        assert s.request({"op": "delete", "deletions": [second["uuid"]]})["ok"]
        cleared = next_message(feed, topics=(b"alert",))[1]
        assert (cleared["rule"], cleared["event"]) == ("dailyLimit", "cleared"), cleared
        told += [None, cleared]

        # Up, answering 500 three times, then 200.
        receiver = Receiver(port, answers=(500, 500, 500, 200))
        wait_until(lambda: stats(s)["alerts.webhook"]["pending"] == 0, timeout=30, what="the outbox drained")
        delivered = receiver.delivered()
        ids = [a["id"] for a in delivered]
        assert len(ids) == 4 and len(set(ids)) == 4, ids
        assert {a["id"] for a in told if a} <= set(ids)
        for headers, body, status in receiver.requests:
            expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert headers["X-Coffee-Tracker-Signature"] == expected
            assert headers["Idempotency-Key"] == json.loads(body)["id"]
            assert headers["Content-Type"] == "application/json"
        assert sum(1 for *_, st in receiver.requests if st == 500) == 3
        counts = stats(s)["alerts.webhook"]
        assert counts["delivered"] == 4 and counts["failing"] is None, counts
        _, metrics = http(s, "/metrics")
        assert 'coffee_tracker_alerts_delivered_total{receiver="webhook"} 4' in metrics
        assert 'coffee_tracker_alerts_pending{receiver="webhook"} 0' in metrics
        # Nothing is sent again later.
        time.sleep(1)
        assert len(receiver.requests) == 7
    finally:
        s.stop()
        if receiver:
            receiver.stop()


def test_the_outbox_survives_kill_9_and_nothing_is_told_twice(folder):
    os.makedirs(folder, exist_ok=True)
    port = free_port()
    s = alert_service(folder, port).start()
    receiver = None
    try:
        assert s.request({"op": "add", "drinks": [drink(mg=450.0, offset_s=-10)]})["ok"]
        wait_until(lambda: stats(s)["alerts.webhook"]["pending"] == 3, what="three alerts in the outbox")
        s.kill()
        receiver = Receiver(port)
        s.start()
        wait_until(lambda: len(receiver.delivered()) == 3, timeout=30, what="the alerts delivered after the restart")
        time.sleep(1.5)  # time for anything told twice to arrive
        rules = sorted((a["rule"], a["event"]) for a in receiver.delivered())
        assert rules == [("dailyLimit", "fired"), ("levelOver", "fired"), ("sleepThreshold", "cleared")], rules
        assert stats(s)["alertsTold"] == 0  # the restarted service decided nothing new
    finally:
        s.stop()
        if receiver:
            receiver.stop()


def test_a_crash_right_after_the_alerts_commit_loses_nothing(folder):
    """The service kills itself right after the commit that decided the
    alerts (a test hook of debug builds): whatever that commit decided
    reaches the receiver once the service is back."""
    os.makedirs(folder, exist_ok=True)
    port = free_port()
    receiver = Receiver(port)
    s = alert_service(folder, port)
    s.env = dict(os.environ, COFFEE_TRACKER_TEST_KILL_AFTER_ALERT="1")
    s.start()
    try:
        try:
            s.request({"op": "add", "drinks": [drink(mg=350.0, offset_s=-10)]}, timeout_ms=3000)
        except Exception:
            pass  # the reply may never come: the service is gone
        wait_until(lambda: s.process.poll() is not None, what="the service killed by the hook")
        assert s.process.returncode == -signal.SIGKILL
        assert receiver.delivered() == []
        s.env = None
        s.start()
        wait_until(lambda: len(receiver.delivered()) == 2, timeout=30, what="the alerts decided before the crash")
        time.sleep(1)
        assert sorted(a["rule"] for a in receiver.delivered()) == ["levelOver", "sleepThreshold"]
        assert stats(s)["alertsTold"] == 0
    finally:
        s.stop()
        receiver.stop()


def test_ntfy_gets_title_priority_tags_and_the_token(folder):
    os.makedirs(folder, exist_ok=True)
    port = free_port()
    receiver = Receiver(port)
    s = alert_service(folder, port, receiver="ntfy").start()
    try:
        assert s.request({"op": "add", "drinks": [drink(mg=350.0, offset_s=-10)]})["ok"]
        wait_until(lambda: len(receiver.requests) == 2, what="two ntfy posts")
        by_title = {headers["Title"]: (headers, body.decode()) for headers, body, _ in receiver.requests}
        headers, body = by_title["Caffeine over 300 mg"]
        assert headers["Priority"] == "4" and headers["Tags"] == "warning,coffee"
        assert headers["Authorization"] == "Bearer " + SECRET
        assert body.startswith("350 mg of caffeine in the body now, over 300 mg")
        assert "Over 50 mg again" in by_title
    finally:
        s.stop()
        receiver.stop()


@pytest.mark.parametrize("alerts,mqtt,key", [
    ({"webhook": {"url": "example.org/hook", "secretFile": "x"}}, None, "alerts.webhook.url"),
    ({"ntfy": {"url": "ftp://example.org/t"}}, None, "alerts.ntfy.url"),
    ({"bedtime": "11pm"}, None, "alerts.bedtime"),
    ({}, {"host": "127.0.0.1", "topicPrefix": "home/+/coffee"}, "mqtt.topicPrefix"),
    ({}, {"host": "mqtt://broker"}, "mqtt.host"),
    ({}, {"port": 1883}, "mqtt.host"),
])
def test_configuration_errors_name_the_key(folder, alerts, mqtt, key):
    config = {"alerts": alerts}
    if mqtt is not None:
        config["mqtt"] = mqtt
    s = Service(folder, config)
    result = s.run_cli("check")
    assert result.returncode != 0 and key in result.stdout + result.stderr, result.stdout + result.stderr


def test_alerts_too_old_or_refused_go_to_the_dead_letter_file(folder):
    """A receiver that answers 400 has the alert dropped at once; one that is
    down past alerts.maxAgeS has it dropped then: each with its reason in
    alerts-dropped.jsonl, counted, and gone from the outbox."""
    os.makedirs(folder, exist_ok=True)
    port = free_port()
    refusing = Receiver(port, answers=(400,), closing=True)  # no kept connection outlives it
    s = alert_service(folder, port, extra={"maxAgeS": 1.5}).start()
    try:
        assert s.request({"op": "add", "drinks": [drink(mg=350.0, offset_s=-10)]})["ok"]
        wait_until(lambda: stats(s)["alerts.webhook"]["dropped"] == 2, what="two alerts refused and dropped")
        refusing.stop()
        # Down now: the next alert waits, is retried, and is dropped once older than 1.5 s.
        assert s.request({"op": "add", "drinks": [drink(mg=100.0, offset_s=-5)]})["ok"]
        wait_until(lambda: stats(s)["alerts.webhook"]["dropped"] == 3, what="the old alert dropped")
        counts = stats(s)["alerts.webhook"]
        assert counts["pending"] == 0 and counts["delivered"] == 0 and counts["retried"] >= 1, counts
        lines = [json.loads(line) for line in (s.data / "alerts-dropped.jsonl").read_text().splitlines()]
        assert len(lines) == 3 and all(line["topic"] == "alert.webhook" for line in lines)
        assert sum("HTTP 400" in line["reason"] for line in lines) == 2
        assert "undelivered after" in lines[2]["reason"] and "alerts.maxAgeS" in lines[2]["reason"]
        import base64
        assert json.loads(base64.b64decode(lines[2]["body"]))["rule"] == "dailyLimit"
    finally:
        s.stop()
