"""docs/protocol.md §17, Web Push: a push service of the test's own (Python,
the `cryptography` and `http_ece` packages) takes each alert for every
subscription registered through the JSON API; the test decrypts each with
the subscription's private key (RFC 8291), checks the VAPID token (RFC 8292)
against `coffee-tracker push-key`, sees a 410 remove that subscription while
the others go on, and kill -9 with pushes waiting loses none and sends none
twice."""
import base64
import json
import os
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from conftest import ALERTS_ON, Service, drink, next_message, wait_until
from test_bus import subscriber
from test_http import free_port, make_token


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Phone:
    """A browser's subscription: its P-256 key and auth secret, its endpoint on the push service."""

    def __init__(self, push, name):
        self.name = name
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)
        self.endpoint = f"http://127.0.0.1:{push.port}/push/{name}"

    def subscription(self):
        point = self.key.public_key().public_bytes(serialization.Encoding.X962,
                                                   serialization.PublicFormat.UncompressedPoint)
        return {"endpoint": self.endpoint, "keys": {"p256dh": b64url(point), "auth": b64url(self.auth)},
                "expirationTime": None}

    def decrypt(self, body):
        return json.loads(http_ece.decrypt(body, private_key=self.key, auth_secret=self.auth, version="aes128gcm"))


class PushService:
    """Answers each POST to /push/NAME with `status[NAME]` (201 unless set); keeps every request."""

    def __init__(self, port):
        self.port, self.status, self.requests = port, {}, []
        self.lock = threading.Lock()
        push = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                name = self.path.rsplit("/", 1)[-1]
                with push.lock:
                    status = push.status.get(name, 201)
                    push.requests.append((name, dict(self.headers), body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def taken(self, name=None):
        """(name, headers, body) of the requests answered 2xx."""
        with self.lock:
            return [(n, h, b) for n, h, b, st in self.requests if 200 <= st < 300 and name in (None, n)]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def push_service(folder, extra=None):
    alerts = dict(ALERTS_ON, bedtime="off", retryInitialS=0.2, retryMaxS=0.5, pushSubject="mailto:ops@example.org")
    alerts.update(extra or {})
    s = Service(folder, {"alerts": alerts, "security": {"tokensDirectory": "tokens"}})
    (s.folder / "tokens").mkdir(mode=0o700, exist_ok=True)
    return s


def api(s, method, path, token, body=None):
    request = urllib.request.Request(
        f"http://{s.endpoints['http']}/api/v1/{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def verify_vapid(headers, public_key_text, audience):
    """The Authorization header's JWT: signed by the service's key, for `audience`, expiring within 24 h."""
    scheme, _, rest = headers["Authorization"].partition(" ")
    assert scheme == "vapid", headers["Authorization"]
    fields = dict(part.strip().split("=", 1) for part in rest.split(","))
    assert fields["k"] == public_key_text
    header, claims, signature = fields["t"].split(".")
    raw = unb64url(signature)
    assert len(raw) == 64
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(public_key_text))
    key.verify(encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")),
               f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))  # raises when it does not verify
    assert json.loads(unb64url(header)) == {"typ": "JWT", "alg": "ES256"}
    payload = json.loads(unb64url(claims))
    assert payload["aud"] == audience and payload["sub"] == "mailto:ops@example.org"
    assert time.time() < payload["exp"] <= time.time() + 24 * 3600, payload


def test_each_subscription_gets_each_alert_encrypted_for_it_and_a_410_removes_one(folder):
    push = PushService(free_port())
    s = push_service(folder)
    phone_token, admin = make_token(s, "phone"), make_token(s, "ops", "read,admin")  # read at the start
    s.start()
    try:
        key = s.run_cli("push-key", "--config", str(s.config_path))
        assert key.returncode == 0, key.stderr
        public_key = key.stdout.strip()
        assert len(unb64url(public_key)) == 65 and unb64url(public_key)[0] == 4
        assert api(s, "GET", "push/key", phone_token) == (200, {"ok": True, "publicKey": public_key})
        # The key is the service's, kept in its data folder, private.
        assert oct(os.stat(s.data / "vapid.pem").st_mode & 0o777) == "0o600"

        phones = [Phone(push, name) for name in ("a", "b", "c")]
        ids = {}
        for phone in phones:
            status, reply = api(s, "POST", "push/subscriptions", phone_token, phone.subscription())
            assert status == 200 and reply["ok"], reply
            ids[phone.name] = reply["id"]
        # A read token may subscribe, not list; a bad key is refused naming its field.
        assert api(s, "GET", "push/subscriptions", phone_token)[0] == 403
        bad = dict(phones[0].subscription(), keys={"p256dh": b64url(b"\x04" + b"\x01" * 64), "auth": b64url(b"x" * 16)})
        status, reply = api(s, "POST", "push/subscriptions", phone_token, bad)
        assert status == 400 and reply["error"]["field"] == "subscription.keys.p256dh", reply
        status, listed = api(s, "GET", "push/subscriptions", admin)
        assert status == 200 and sorted(x["id"] for x in listed["subscriptions"]) == sorted(ids.values())

        push.status["b"] = 410  # b's browser has gone
        feed = subscriber(s, topics=(b"alert",))
        first = drink(mg=350.0, offset_s=-10)
        assert s.request({"op": "add", "drinks": [first]})["ok"]
        told = {}
        for _ in range(2):
            alert = next_message(feed, topics=(b"alert",), what="an alert")[1]
            told[alert["id"]] = alert
        wait_until(lambda: len(push.taken()) == 4, timeout=30, what="two alerts to a and c")
        wait_until(lambda: ids["b"] not in [x["id"] for x in api(s, "GET", "push/subscriptions", admin)[1]["subscriptions"]],
                   timeout=10, what="the 410's subscription removed")
        salts = set()
        for phone in (phones[0], phones[2]):
            got = push.taken(phone.name)
            assert len(got) == 2
            for _, headers, body in got:
                assert headers["Content-Encoding"] == "aes128gcm"
                assert headers["Content-Type"] == "application/octet-stream"
                assert int(headers["TTL"]) > 0 and headers["Urgency"] in ("high", "normal")
                verify_vapid(headers, public_key, f"http://127.0.0.1:{push.port}")
                salts.add(body[:16])
                alert = phone.decrypt(body)
                assert told[alert["id"]]["title"] == alert["title"] and told[alert["id"]]["message"] == alert["message"]
                assert headers["Urgency"] == ("high" if alert["rule"] == "levelOver" else "normal")
        assert len(salts) == 4  # a salt of its own for every message

        # The next alert goes to those left, and never to b again.
        second = drink(mg=100.0, offset_s=-5)
        assert s.request({"op": "add", "drinks": [second]})["ok"]
        daily = next_message(feed, topics=(b"alert",), what="the daily limit's alert")[1]
        assert daily["rule"] == "dailyLimit"
        wait_until(lambda: len(push.taken()) == 6, timeout=30, what="the daily limit's pushes")
        assert [phones[0].decrypt(b)["id"] for _, _, b in push.taken("a")][-1] == daily["id"]
        time.sleep(0.5)
        assert sum(1 for n, *_ in push.requests if n == "b") == 1
        assert s.request({"op": "stats"})["alerts.push"]["removed"] == 1
        feed.close(0)
    finally:
        s.stop()
        push.stop()


def test_pushes_waiting_survive_kill_9_and_none_is_sent_twice(folder):
    push = PushService(free_port())
    s = push_service(folder)
    token = make_token(s, "phone")
    s.start()
    try:
        phones = [Phone(push, name) for name in ("a", "b")]
        for phone in phones:
            assert api(s, "POST", "push/subscriptions", token, phone.subscription())[0] == 200
        push.status.update(a=503, b=503)  # the push service is busy: every push waits
        assert s.request({"op": "add", "drinks": [drink(mg=450.0, offset_s=-10)]})["ok"]
        wait_until(lambda: s.request({"op": "stats"})["alerts.push"]["pending"] == 6, what="three alerts for two phones")
        s.kill()
        push.status.clear()
        s.start()
        wait_until(lambda: len(push.taken()) == 6, timeout=30, what="the pushes delivered after the restart")
        time.sleep(1.5)  # time for anything sent twice to arrive
        for phone in phones:
            got = sorted(phone.decrypt(b)["rule"] for _, _, b in push.taken(phone.name))
            assert got == ["dailyLimit", "levelOver", "sleepThreshold"], got
        assert len(push.taken()) == 6
    finally:
        s.stop()
        push.stop()
