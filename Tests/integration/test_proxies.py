"""docs/protocol.md §12's proxies, tried: the Caddy site and the nginx site
of deploy/, each run from Debian's packages in front of the real service on
loopback, with a certificate made here. Through each: health without a
token, 401 without one, the page with one, a Secure login cookie (the
proxy's X-Forwarded-Proto believed from http.trustedProxies), live events
passed on as they come, and a lockout that counts the real client whatever
X-Forwarded-For it sends."""
import http.client
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from conftest import drink
from test_http import free_port, make_certificate, tokens_service
from test_inbox import wait_until

ROOT = Path(__file__).resolve().parents[2]


def caddy_site(folder, port, upstream, cert, key):
    site = (ROOT / "deploy" / "caddy" / "Caddyfile").read_text()
    site = site.replace("coffee.example.org {", f"https://localhost:{port} {{")
    site = site.replace("# tls /etc/ssl/certs/coffee.pem /etc/ssl/private/coffee.key", f"tls {cert} {key}")
    site = site.replace("127.0.0.1:5558", upstream)
    assert f"tls {cert}" in site and upstream in site
    config = Path(folder) / "Caddyfile"
    config.write_text("{\n\tadmin off\n\tauto_https disable_redirects\n\tskip_install_trust\n}\n" + site)
    env = {**os.environ, "HOME": str(folder), "XDG_DATA_HOME": str(folder), "XDG_CONFIG_HOME": str(folder)}
    return ["caddy", "run", "--config", str(config), "--adapter", "caddyfile"], env


def nginx_site(folder, port, upstream, cert, key):
    site = (ROOT / "deploy" / "nginx" / "coffee-tracker.conf").read_text()
    site = site.replace("listen 443 ssl http2;", f"listen 127.0.0.1:{port} ssl http2;")
    site = site.replace("/etc/ssl/certs/coffee.pem", str(cert)).replace("/etc/ssl/private/coffee.key", str(key))
    site = site.replace("server 127.0.0.1:5558;", f"server {upstream};")
    assert str(cert) in site and upstream in site
    (Path(folder) / "site.conf").write_text(site)
    temp = Path(folder) / "nginx-temp"
    temp.mkdir(exist_ok=True)
    main = Path(folder) / "nginx.conf"
    main.write_text(f"""daemon off;
user root;
pid {folder}/nginx.pid;
error_log {folder}/nginx-error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    include {folder}/site.conf;
}}
""")
    return ["nginx", "-c", str(main), "-p", str(folder)], None


@pytest.mark.parametrize("proxy", ["caddy", "nginx"])
def test_a_proxy_from_deploy_in_front_of_the_service(folder, proxy):
    if not shutil.which(proxy) and not Path(f"/usr/sbin/{proxy}").exists():
        pytest.skip(f"{proxy} is not installed (make deps installs it)")
    cert, key = make_certificate(folder)
    s = tokens_service(Path(folder) / "service", {"http": {"trustedProxies": ["127.0.0.1"]}},
                       tokens=[("phone", "read"), ("watch", "read,write")])
    port = free_port()
    command, env = (caddy_site if proxy == "caddy" else nginx_site)(folder, port, s.endpoints["http"], cert, key)
    log = open(Path(folder) / f"{proxy}.log", "wb")
    front = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env)
    context = ssl.create_default_context(cafile=str(cert))

    def get(path, headers=None, read=True):
        c = http.client.HTTPSConnection("localhost", port, timeout=10, context=context)
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, (r.read().decode() if read else (c, r))

    try:
        def up():
            assert front.poll() is None, (Path(folder) / f"{proxy}.log").read_text()
            try:
                return get("/healthz")[0] == 200
            except (OSError, ssl.SSLError, http.client.HTTPException):
                return False
        wait_until(up, timeout=30, what=f"{proxy} to serve")
        token = s.tokens["phone"]
        bearer = {"Authorization": f"Bearer {token}"}
        assert get("/")[0] == 401
        status, _, page = get("/", bearer)
        assert status == 200 and "<html" in page.lower()
        status, headers, _ = get(f"/login?token={token}")
        assert status == 303 and headers["location"] == "/" and "Secure" in headers["set-cookie"], headers
        # Live events pass through as they come.
        _, headers, (c, r) = get("/events", bearer, read=False)
        assert headers["content-type"].startswith("text/event-stream")
        first = r.readline()
        assert first.startswith(b"retry:"), first
        anchor = s.request({"op": "ping"})["anchor"]
        assert s.request({"op": "add", "drinks": [drink()]})["ok"]
        deadline = time.time() + 10
        seen = b""
        while f'"anchor":{anchor + 1}'.encode() not in seen:
            assert time.time() < deadline, f"no model event through {proxy}: {seen[-300:]}"
            seen += r.readline()
        c.close()
        # The lockout counts the client the proxy saw, whatever it claims to be.
        for i in range(20):
            assert get("/", {"Authorization": f"Bearer ct_guess{i}", "X-Forwarded-For": f"203.0.113.{i}"})[0] == 401
        status, headers, _ = get("/", {**bearer, "X-Forwarded-For": "203.0.113.99"})
        assert status == 429 and "retry-after" in headers
        assert "address=127.0.0.1" in s.log_path.read_text()
    finally:
        front.send_signal(signal.SIGTERM)
        try:
            front.wait(timeout=10)
        except subprocess.TimeoutExpired:
            front.kill()
            front.wait(timeout=5)
        log.close()
        s.stop()
