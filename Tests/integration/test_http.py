"""docs/protocol.md §12's door against the real service over real sockets:
tokens with roles (401, 403, revocation by SIGHUP, the login cookie), the
429 after 20 failures and its reset, HTTPS with a certificate made here
(and plain HTTP on that port refused, a key others can read refused, a
renewed certificate served after SIGHUP), the bind rules, the connection
limit, and RFC 9112's strict parsing on raw sockets: every refusal closes
its connection, and a request pipelined behind it is never answered."""
import hashlib
import http.client
import json
import os
import re
import signal
import socket
import ssl
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BINARY, Service, drink
from test_inbox import wait_until


def make_certificate(folder, name="server", cn="localhost"):
    """A self-signed certificate for localhost and 127.0.0.1, made with openssl; the key mode 0600."""
    key, cert = Path(folder) / f"{name}.key.pem", Path(folder) / f"{name}.cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={cn}",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=30)
    key.chmod(0o600)
    return cert, key


class Door:
    """HTTP(S) requests to the service's endpoint, one connection each."""

    def __init__(self, service, ca=None):
        self.address = service.endpoints["http"]
        self.ca = ca

    def connection(self, timeout=10):
        host, port = self.address.rsplit(":", 1)
        if self.ca:
            context = ssl.create_default_context(cafile=str(self.ca))
            return http.client.HTTPSConnection(host, int(port), timeout=timeout, context=context)
        return http.client.HTTPConnection(host, int(port), timeout=timeout)

    def get(self, path, token=None, cookie=None, method="GET", headers=None):
        c = self.connection()
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        if cookie is not None:
            h["Cookie"] = cookie
        try:
            c.request(method, path, headers=h)
            r = c.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read().decode()
        finally:
            c.close()


def make_token(service, name, roles="read"):
    result = service.run_cli("token", name, "--roles", roles)
    assert result.returncode == 0, result.stderr
    token = result.stdout.split()[0]
    assert re.fullmatch(r"ct_[A-Za-z0-9_-]{43}", token), token
    return token


def tokens_service(folder, extra=None, start=True, tokens=()):
    """A service with security.tokensDirectory (and a 2 s lockout); `tokens`
    ((name, roles), ...) are made before it starts: their texts are in `s.tokens`."""
    config = {"security": {"tokensDirectory": "tokens"}, "http": {"lockoutS": 2}}
    for key, value in (extra or {}).items():
        config.setdefault(key, {}).update(value) if isinstance(value, dict) else config.__setitem__(key, value)
    s = Service(folder, config)
    (s.folder / "tokens").mkdir(mode=0o700, exist_ok=True)
    s.tokens = {name: make_token(s, name, roles) for name, roles in tokens}
    return s.start() if start else s


def error_code(body):
    reply = json.loads(body)
    assert reply["ok"] is False
    return reply["error"]["code"]


def test_tokens_roles_and_every_status_of_the_door(folder):
    s = tokens_service(folder)
    try:
        reader = make_token(s, "phone")
        metrics = make_token(s, "prometheus", "metrics")
        writer = make_token(s, "watch", "read,write")
        # Only the hash and the roles are kept, mode 0600.
        stored = s.folder / "tokens" / "phone.token"
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600
        kept = json.loads(stored.read_text())
        assert kept["sha256"] == hashlib.sha256(reader.encode()).hexdigest() and kept["roles"] == ["read"]
        assert reader not in stored.read_text()
        assert s.run_cli("token", "phone").returncode == 1  # never overwritten
        assert s.stop() == 0
        s.start()
        door = Door(s)
        # Health needs no token; every other route does.
        assert door.get("/healthz")[0] == 200 and door.get("/readyz")[0] == 200
        status, headers, body = door.get("/")
        assert status == 401 and headers["www-authenticate"].startswith("Bearer") and error_code(body) == "unauthenticated"
        assert door.get("/model.svg", token=reader)[0] == 200
        assert door.get("/", token=writer)[0] == 200
        status, _, body = door.get("/metrics", token=reader)
        assert status == 403 and error_code(body) == "forbidden" and "metrics" in json.loads(body)["error"]["message"]
        status, _, body = door.get("/model.svg", token=metrics)
        assert status == 403 and error_code(body) == "forbidden"
        status, _, body = door.get("/nothing", token=reader)
        assert status == 404 and error_code(body) == "not_found"
        status, headers, body = door.get("/model.svg", token=reader, method="DELETE")
        assert status == 405 and error_code(body) == "method_not_allowed" and "GET" in headers["allow"]
        # A token that matches none: 401, counted and logged; no token at all is not a failure.
        status, headers, body = door.get("/", token=reader + "x")
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        status, _, text = door.get("/metrics", token=metrics)
        assert status == 200
        assert 'coffee_tracker_auth_denied_total{endpoint="http"} 1' in text, text
        assert s.request({"op": "stats"})["authDenied"] == 1
        wait_until(lambda: "unknown token refused" in s.log_path.read_text(), timeout=5, what="the warning")
        line = [l for l in s.log_path.read_text().splitlines() if "unknown token refused" in l][0]
        assert "warning" in line and "address=127.0.0.1" in line and reader not in line
        # Revoked by removing its file and SIGHUP: at once.
        (s.folder / "tokens" / "phone.token").unlink()
        s.process.send_signal(signal.SIGHUP)
        wait_until(lambda: door.get("/", token=reader)[0] == 401, timeout=10, what="the revocation")
        assert door.get("/", token=writer)[0] == 200
    finally:
        s.stop()


def test_the_login_cookie_works_until_its_token_is_revoked(folder):
    s = tokens_service(folder, tokens=[("browser", "read")])
    try:
        token = s.tokens["browser"]
        door = Door(s)
        assert door.get("/", token=token)[0] == 200
        link = s.run_cli("token", "laptop", "--link", f"http://{s.endpoints['http']}/")
        assert link.returncode == 0 and link.stdout.splitlines()[1].startswith(f"http://{s.endpoints['http']}/login?token=ct_")
        status, headers, _ = door.get(f"/login?token={token}")
        assert status == 303 and headers["location"] == "/"
        cookie = headers["set-cookie"]
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
            assert attribute in cookie, cookie
        assert "Secure" not in cookie  # plain HTTP on loopback
        # X-Forwarded-* are believed from http.trustedProxies only (none here).
        _, spoofed, _ = door.get(f"/login?token={token}", headers={"X-Forwarded-Proto": "https"})
        assert "Secure" not in spoofed["set-cookie"]
        pair = cookie.split(";")[0]
        assert door.get("/", cookie=pair)[0] == 200
        assert door.get("/model.svg", cookie="other=1; " + pair)[0] == 200
        assert door.get("/login?token=ct_nothing")[0] == 401
        (s.folder / "tokens" / "browser.token").unlink()
        s.process.send_signal(signal.SIGHUP)
        wait_until(lambda: door.get("/", cookie=pair)[0] == 401, timeout=10, what="the cookie to end with its token")
    finally:
        s.stop()


def test_past_20_failures_an_address_gets_429_for_the_lockout_then_is_let_in(folder):
    s = tokens_service(folder, tokens=[("phone", "read")])
    try:
        token = s.tokens["phone"]
        door = Door(s)
        assert door.get("/", token=token)[0] == 200
        statuses = [door.get("/", token=f"ct_guess{i}")[0] for i in range(20)]
        assert statuses == [401] * 20  # 20 failures are allowed
        status, headers, body = door.get("/", token="ct_guess21")
        assert status == 429 and error_code(body) == "too_many_requests" and int(headers["retry-after"]) >= 1
        status, headers, _ = door.get("/", token=token)  # even a good token, for the lockout
        assert status == 429
        assert door.get("/healthz")[0] == 200 and door.get("/readyz")[0] == 200
        deadline = time.time() + 10
        while door.get("/", token=token)[0] != 200:
            assert time.time() < deadline, "still refused after the lockout"
            time.sleep(0.2)
        assert time.time() - (deadline - 10) >= 0.5  # it lasted
        logged = [l for l in s.log_path.read_text().splitlines() if "unknown token refused" in l]
        assert 1 <= len(logged) <= 3, logged  # rate-limited
    finally:
        s.stop()


def test_https_with_a_certificate_made_here_and_a_renewal_served_after_sighup(folder):
    cert, key = make_certificate(folder)
    s = tokens_service(folder, {"http": {"tls": {"certificateFile": str(cert), "keyFile": str(key)}}},
                       tokens=[("phone", "read")])
    try:
        token = s.tokens["phone"]
        door = Door(s, ca=cert)
        assert door.get("/", token=token)[0] == 200
        assert door.get("/healthz")[0] == 200
        status, headers, _ = door.get(f"/login?token={token}")
        assert status == 303 and "Secure" in headers["set-cookie"]
        # Live events over TLS (libmicrohttpd writes them: no plain socket to write to).
        c = door.connection()
        c.request("GET", "/events", headers={"Authorization": f"Bearer {token}"})
        r = c.getresponse()
        assert r.status == 200 and r.readline().startswith(b"retry:")
        anchor = s.request({"op": "ping"})["anchor"]
        assert s.request({"op": "add", "drinks": [drink()]})["ok"]
        seen, deadline = b"", time.time() + 10
        while f'"anchor":{anchor + 1}'.encode() not in seen:
            assert time.time() < deadline, seen[-200:]
            seen += r.readline()
        c.close()
        # A streamed body over TLS: the CSV export, chunked, whole, on a kept connection.
        many = [drink(offset_s=-60 - i) for i in range(5000)]
        assert s.request({"op": "add", "drinks": many})["added"] == 5000
        c = door.connection()
        c.request("GET", "/api/v1/export.csv", headers={"Authorization": f"Bearer {token}"})
        r = c.getresponse()
        assert r.status == 200 and r.getheader("Transfer-Encoding") == "chunked"
        exported = r.read().decode().split("\r\n")
        assert exported[0] == "uuid,date,mgCaffeine,type,version,source" and len(exported) == 5000 + 2 + 1, len(exported)
        assert {d["uuid"] for d in many} <= {line.split(",")[0] for line in exported}
        c.request("GET", "/healthz")
        assert c.getresponse().status == 200
        c.close()
        # Plain HTTP on the TLS port: no HTTP answer.
        host, port = s.endpoints["http"].rsplit(":", 1)
        plain = socket.create_connection((host, int(port)), timeout=5)
        plain.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        try:
            while chunk := plain.recv(4096):
                got += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        plain.close()
        assert b"HTTP/1." not in got and b"ok" not in got, got
        # A renewed certificate (a new key too) is served after SIGHUP, without a restart.
        before = served_certificate(s)
        new_cert, new_key = make_certificate(folder, "renewed")
        os.replace(new_cert, cert)
        os.replace(new_key, key)
        s.process.send_signal(signal.SIGHUP)
        wait_until(lambda: served_certificate(s) != before, timeout=10, what="the renewed certificate")
        assert served_certificate(s) == ssl.PEM_cert_to_DER_cert(cert.read_text())
        assert Door(s, ca=cert).get("/", token=token)[0] == 200
        # A broken renewal keeps the one served, saying why.
        renewed = served_certificate(s)
        cert.write_text("not a certificate\n")
        s.process.send_signal(signal.SIGHUP)
        wait_until(lambda: "could not reload the TLS certificate" in s.log_path.read_text(), timeout=10, what="the refusal")
        assert served_certificate(s) == renewed
    finally:
        s.stop()


def served_certificate(service):
    return served_certificate_at(int(service.endpoints["http"].rsplit(":", 1)[1]))


def served_certificate_at(port):
    """The DER bytes of the certificate served on 127.0.0.1:`port`."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.getpeercert(binary_form=True)


def start_refused(folder, config, tokens=True):
    s = Service(folder, config)
    if tokens:
        (s.folder / "tokens").mkdir(mode=0o700, exist_ok=True)
    result = subprocess.run([BINARY, "serve", "--config", str(s.config_path)], capture_output=True, text=True,
                            timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode != 0
    check = s.run_cli("check")
    assert check.returncode == 1
    return result.stderr + result.stdout, check.stdout


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_key_others_can_read_and_tls_without_tokens_stop_start_up(folder):
    cert, key = make_certificate(folder)
    key.chmod(0o644)
    said, checked = start_refused(folder, {"security": {"tokensDirectory": "tokens"},
                                           "http": {"bind": "127.0.0.1:0", "tls": {"certificateFile": str(cert), "keyFile": str(key)}}})
    assert "readable by group or others" in said and "chmod 600" in said, said
    assert "readable by group or others" in checked
    key.chmod(0o600)
    said, checked = start_refused(folder, {"http": {"bind": "127.0.0.1:0", "tls": {"certificateFile": str(cert), "keyFile": str(key)}}},
                                  tokens=False)
    assert "http.tls is set without security.tokensDirectory" in said, said
    other_cert, _ = make_certificate(folder, "other")
    said, _ = start_refused(folder, {"security": {"tokensDirectory": "tokens"},
                                     "http": {"bind": "127.0.0.1:0", "tls": {"certificateFile": str(other_cert), "keyFile": str(key)}}})
    assert "http.tls" in said and "key" in said.lower(), said  # a key that is not the certificate's


def test_the_bind_rules_for_other_hosts(folder):
    cert, key = make_certificate(folder)
    port = free_port()
    anywhere = f"0.0.0.0:{port}"
    # Without tokens: plaintext off loopback is refused, as in v3.
    said, _ = start_refused(Path(folder) / "a", {"http": {"bind": anywhere}}, tokens=False)
    assert "http.bind" in said and "not a loopback address" in said, said
    # With tokens but neither TLS nor allowPlaintextRemote: refused.
    said, _ = start_refused(Path(folder) / "b", {"security": {"tokensDirectory": "tokens"}, "http": {"bind": anywhere}})
    assert "http.tls" in said and "allowPlaintextRemote" in said, said
    # With tokens and TLS: serves.
    s = tokens_service(Path(folder) / "c", {"http": {"bind": anywhere, "tls": {"certificateFile": str(cert), "keyFile": str(key)}}})
    try:
        assert s.endpoints["http"] == anywhere
        door = Door(s, ca=cert)
        door.address = f"127.0.0.1:{port}"
        assert door.get("/healthz")[0] == 200 and door.get("/")[0] == 401
    finally:
        s.stop()
    # With tokens and allowPlaintextRemote (a TLS proxy on another host): serves, with a warning.
    s = tokens_service(Path(folder) / "d", {"http": {"bind": anywhere}, "security": {"allowPlaintextRemote": True}})
    try:
        assert "speaks plaintext" in s.log_path.read_text()
        assert Door(s).get("/")[0] == 401
    finally:
        s.stop()


def raw_exchange(service, data, timeout=8):
    """Sends `data` on one connection; returns all that comes back until the server closes it
    (or None when it stays open past `timeout`)."""
    host, port = service.endpoints["http"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except ConnectionResetError:
            return got
        except socket.timeout:
            return None
        return got


BEHIND = b"GET /model.svg HTTP/1.1\r\nHost: x\r\n\r\n"  # pipelined after the refused request: never answered


@pytest.mark.parametrize("name,request_bytes,statuses", [
    ("both Content-Length and Transfer-Encoding",
     b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", (400,)),
    ("two different Content-Lengths",
     b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", (400,)),
    ("a Transfer-Encoding other than chunked",
     b"POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", (400, 501)),
    ("a head over 8 KiB", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 9000 + b"\r\n\r\n", (400, 431)),
    ("a head far over 8 KiB", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 40000 + b"\r\n\r\n", (400, 431)),
    ("more than 100 header lines",
     b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(100)) + b"\r\n", (400, 431)),
    ("a body over the limit", b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n" + b"a" * 70000, (413,)),
    ("a chunked body over the limit", b"POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     + (b"4000\r\n" + b"a" * 0x4000 + b"\r\n") * 5 + b"0\r\n\r\n", (413,)),
    ("HTTP/1.1 without Host", b"GET /healthz HTTP/1.1\r\n\r\n", (400,)),
])
def test_each_strict_refusal_closes_the_connection_and_serves_nothing_behind_it(folder, name, request_bytes, statuses):
    s = Service(folder, {"limits": {"maxMessageBytes": 65536}}).start()
    try:
        got = raw_exchange(s, request_bytes + BEHIND)
        assert got is not None, f"{name}: the connection stayed open"
        status = int(got.split(b" ", 2)[1])
        assert status in statuses, f"{name}: {got[:200]}"
        assert got.count(b"\r\nDate: ") == 1 and b"<svg" not in got, f"{name}: more than one answer: {got[:400]}"
        # The service goes on.
        assert raw_exchange(s, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").startswith(b"HTTP/1.1 200")
    finally:
        s.stop()


def test_keep_alive_pipelining_obsolete_folding_and_a_slow_head(folder):
    s = tokens_service(folder, tokens=[("phone", "read")])
    try:
        token = s.tokens["phone"]
        assert Door(s).get("/", token=token)[0] == 200
        # Two requests on one connection, both answered, in order.
        got = raw_exchange(s, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                              b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert got.count(b"HTTP/1.1 200") == 2 and got.index(b"ok\n") < got.index(b"ready\n"), got
        # Obsolete line folding (RFC 9112 §5.2) in a field the service or the framing reads: refused.
        for folded in (b"Authorization: Bearer\r\n " + token.encode(), b"Authorization:\r\n Bearer " + token.encode(),
                       b"Content-Length:\r\n 5", b"X-Note: one,\r\n two: three"):
            got = raw_exchange(s, b"GET / HTTP/1.1\r\nHost: x\r\n" + folded + b"\r\n\r\nhello" + BEHIND)
            assert got.startswith(b"HTTP/1.1 400") and got.count(b"\r\nDate:") == 1, (folded, got[:200])
        # A head slower than 5 s: closed unanswered, while others are served.
        host, port = s.endpoints["http"].rsplit(":", 1)
        slow = socket.create_connection((host, int(port)), timeout=10)
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        started = time.time()
        closed = None
        for _ in range(12):
            time.sleep(0.5)
            try:
                slow.sendall(b"X-Slow: y\r\n")  # a byte at a time keeps an idle timer alive, not this deadline
            except (BrokenPipeError, ConnectionResetError):
                closed = time.time() - started
                break
        else:
            try:
                closed = time.time() - started if slow.recv(100) == b"" else None
            except ConnectionResetError:
                closed = time.time() - started
        slow.close()
        assert closed is not None and closed < 7.5, closed
        assert Door(s).get("/healthz")[0] == 200
    finally:
        s.stop()


def test_connections_past_the_limit_are_closed_at_once(folder):
    s = Service(folder, {"http": {"maxConnections": 3}}).start()
    try:
        host, port = s.endpoints["http"].rsplit(":", 1)
        held = [socket.create_connection((host, int(port)), timeout=5) for _ in range(3)]
        for h in held:  # each kept alive after an answer
            h.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert h.recv(4096).startswith(b"HTTP/1.1 200")
        extra = socket.create_connection((host, int(port)), timeout=5)
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            assert extra.recv(4096) == b""
        except ConnectionResetError:
            pass
        extra.close()
        held.pop().close()
        wait_until(lambda: raw_exchange(s, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                   .startswith(b"HTTP/1.1 200"), timeout=10, what="room again")
        for h in held:
            h.close()
    finally:
        s.stop()
