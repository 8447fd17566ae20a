"""docs/protocol.md §6 against the real service: CURVE on every endpoint, a ZAP
handler that admits the clients directory with their roles, private files,
and plaintext kept to one machine. pyzmq (which has CURVE) is the outside
client; certificates come both from pyzmq's zmq.auth and from `keygen`."""
import json
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
import zmq
import zmq.auth

from conftest import BINARY, Service, bus_publisher, drink
from test_bus import publisher, send_when_subscribed, subscriber
from test_http import free_port

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="this pyzmq's libzmq has no CURVE")


def keygen(path, *extra):
    p = subprocess.run([BINARY, "keygen", str(path), *extra], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def pyzmq_certificate(folder, name, roles=None):
    """A certificate pair made by pyzmq; returns (public, secret) paths. This
    pyzmq writes no metadata, so roles are added to the public file by hand,
    as an operator admitting the client would."""
    public, secret = zmq.auth.create_certificates(str(folder), name)
    if roles:
        text = Path(public).read_text().replace("\nmetadata\n", f'\nmetadata\n    roles = "{roles}"\n')
        assert f'roles = "{roles}"' in text
        Path(public).write_text(text)
    return public, secret


def keys(secret_path):
    public, secret = zmq.auth.load_certificate(str(secret_path))
    return public, secret


class Secured:
    """A service under security.curve with clients: admin (all roles, made by
    pyzmq), kitchen (publish only, made by keygen), reader (read only, pyzmq),
    and a stranger whose key is not admitted."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.keys = self.folder / "keys"
        self.clients = self.keys / "clients"
        self.mine = self.folder / "client-keys"
        for d in (self.keys, self.clients, self.mine):
            d.mkdir(parents=True, exist_ok=True)
        self.server_public = keygen(self.keys / "server")
        public, self.admin = pyzmq_certificate(self.mine, "admin")
        shutil.copy(public, self.clients)
        keygen(self.mine / "kitchen", "--roles", "publish")
        shutil.copy(self.mine / "kitchen.key", self.clients)
        self.kitchen = self.mine / "kitchen.key_secret"
        public, self.reader = pyzmq_certificate(self.mine, "reader", roles="read")
        shutil.copy(public, self.clients)
        (self.folder / "elsewhere").mkdir()
        _, self.stranger = pyzmq_certificate(self.folder / "elsewhere", "stranger")
        self.service = Service(self.folder / "svc", {
            "security": {"curve": {"secretKeyFile": str(self.keys / "server.key_secret"),
                                   "clientsDirectory": str(self.clients)}}})
        self.service.curve_client = keys(self.admin)

    def start(self):
        self.service.start()
        assert self.service.server_key == self.server_public
        return self.service


@pytest.fixture
def secured(folder):
    s = Secured(folder)
    s.start()
    yield s
    s.service.stop()


def silent_request(service, keys_or_none, op="ping", timeout_ms=1500):
    """A query request that must get no answer: returns True when none came."""
    sock = service.context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, timeout_ms)
    if keys_or_none:
        service.secure(sock, keys_or_none)
    sock.connect(service.query_endpoint)
    try:
        sock.send_multipart([b"", json.dumps({"op": op}).encode()])
        sock.recv_multipart()
        return False
    except zmq.Again:
        return True
    finally:
        sock.close()


def test_admitted_keys_work_on_each_endpoint_and_everyone_else_gets_nothing(secured):
    s = secured.service
    # query: admin has every role; the reader may read but not write.
    assert s.request({"op": "ping"})["ok"]
    assert s.request({"op": "changes", "anchor": None})["ok"]
    d = drink()
    reply = s.request({"op": "add", "drinks": [d]})
    assert reply["ok"], reply
    stored = [x for x in s.request({"op": "changes", "anchor": None})["added"] if x["uuid"] == d["uuid"]]
    assert stored[0]["source"] == "query:admin"
    s.curve_client = keys(secured.reader)
    assert s.request({"op": "ping"})["ok"]
    forbidden = s.request({"op": "add", "drinks": [drink()]})
    assert forbidden["ok"] is False and forbidden["error"]["code"] == "forbidden"
    assert "write" in forbidden["error"]["message"]
    s.curve_client = keys(secured.admin)
    # An unknown key, a plaintext client, and a key without a query role get no answer.
    assert silent_request(s, keys(secured.stranger))
    assert silent_request(s, None)
    assert silent_request(s, keys(secured.kitchen))

    # ingest: the kitchen publishes; its drinks carry its name as their source.
    pub, _ = publisher(s, keys=keys(secured.kitchen))
    d = drink()
    pub.send_multipart([b"drink.add", json.dumps(d).encode()])
    deadline = time.time() + 10
    while time.time() < deadline:
        added = [x for x in s.request({"op": "changes", "anchor": None})["added"] if x["uuid"] == d["uuid"]]
        if added:
            break
        time.sleep(0.02)
    assert added and added[0]["source"] == "bus:kitchen"
    pub.close()

    # updates: admin subscribes; the reader (no subscribe role) and a stranger hear nothing.
    sub = subscriber(s, keys=keys(secured.admin))
    sub.close()
    for who in (keys(secured.reader), keys(secured.stranger), None):
        quiet = s.context.socket(zmq.SUB)
        quiet.setsockopt(zmq.LINGER, 0)
        quiet.setsockopt(zmq.RCVTIMEO, 1500)
        quiet.setsockopt(zmq.SUBSCRIBE, b"")
        if who:
            s.secure(quiet, who)
        quiet.connect(s.endpoints["updates"][0])
        with pytest.raises(zmq.Again):
            quiet.recv_multipart()  # heartbeats flow every 0.2 s to those admitted
        quiet.close()

    stats = s.request({"op": "stats"})
    assert stats["authDenied"] >= 4, stats
    assert "connection denied" in s.log_path.read_text()


def test_a_reload_removes_a_key(secured):
    s = secured.service
    reader = s.context.socket(zmq.DEALER)
    reader.setsockopt(zmq.LINGER, 0)
    reader.setsockopt(zmq.RCVTIMEO, 5000)
    s.secure(reader, keys(secured.reader))
    reader.connect(s.query_endpoint)
    reader.send_multipart([b"", b'{"op": "ping"}'])
    assert json.loads(reader.recv_multipart()[-1])["ok"]
    pub, _ = publisher(s, keys=keys(secured.kitchen))

    (secured.clients / "reader.key").unlink()
    (secured.clients / "kitchen.key").unlink()
    s.process.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "reloaded the clients directory" not in s.log_path.read_text():
        assert time.time() < deadline, "no reload logged"
        time.sleep(0.02)

    # The connection it already had: requests are forbidden now.
    reader.send_multipart([b"", b'{"op": "ping"}'])
    reply = json.loads(reader.recv_multipart()[-1])
    assert reply["ok"] is False and reply["error"]["code"] == "forbidden"
    reader.close()
    # A new connection gets nothing.
    assert silent_request(s, keys(secured.reader))
    # The publisher's connection stays, but its messages are dead-lettered as unauthorized.
    pub.send_multipart([b"drink.add", json.dumps(drink()).encode()])
    dead = s.data / "rejected.jsonl"
    deadline = time.time() + 10
    while not (dead.exists() and "unauthorized" in dead.read_text()):
        assert time.time() < deadline, "no unauthorized dead letter"
        time.sleep(0.02)
    pub.close()
    assert s.request({"op": "ping"})["ok"]  # admin is still admitted


def test_a_malformed_certificate_on_reload_keeps_the_old_list(secured):
    s = secured.service
    (secured.clients / "broken.key").write_text("curve\n    public-key = \"short\"\n")
    s.process.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "keeping the old list" not in s.log_path.read_text():
        assert time.time() < deadline, "no refusal logged"
        time.sleep(0.02)
    assert "broken.key:2" in s.log_path.read_text()
    s.curve_client = keys(secured.reader)
    assert s.request({"op": "ping"})["ok"]


def test_cli_clients_take_a_key_and_find_the_server_key_through_the_config(secured):
    s = secured.service
    p = s.run_cli("status", "--json", "--key", str(secured.admin))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ok"]
    p = s.run_cli("status", "--timeout", "1")
    assert p.returncode == 1 and "--key" in p.stderr
    p = subprocess.run([BINARY, "status", "--query", s.query_endpoint, "--key", str(secured.admin),
                        "--server-key", s.server_key, "--json"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    p = s.run_cli("watch", "--count", "1", "--key", str(secured.admin))
    assert p.returncode == 0 and p.stdout.split(" ")[0] == "state", p.stderr
    # No subscribe role: the first state comes from the query endpoint, then the feed stays silent.
    p = s.run_cli("watch", "--count", "3", "--timeout", "1", "--key", str(secured.reader))
    assert p.returncode == 1 and "no word from" in p.stderr and "subscribe role" in p.stderr


def test_keygen_writes_certificates_pyzmq_reads_and_a_private_secret(folder):
    public = keygen(Path(folder) / "box", "--name", "kitchen-scale", "--roles", "publish,read")
    pub_key, secret_key = zmq.auth.load_certificate(str(Path(folder) / "box.key_secret"))
    assert pub_key.decode() == public and len(secret_key) == 40
    assert zmq.auth.load_certificate(str(Path(folder) / "box.key"))[0] == pub_key
    assert stat.S_IMODE(os.stat(Path(folder) / "box.key_secret").st_mode) == 0o600
    text = (Path(folder) / "box.key").read_text()
    assert 'name = "kitchen-scale"' in text and 'roles = "publish,read"' in text
    p = subprocess.run([BINARY, "keygen", str(Path(folder) / "box")], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "exists already" in p.stderr


def start_failure(folder, config):
    s = Service(folder, config)
    p = subprocess.run([BINARY, "serve", "--config", str(s.config_path)], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    return p


def test_a_plaintext_bind_beyond_loopback_is_refused_naming_the_key(folder):
    port = free_port()
    p = start_failure(folder, {"ingest": {"bind": [f"tcp://0.0.0.0:{port}"]}})
    assert p.returncode == 1
    assert "ingest.bind" in p.stderr and "security.allowPlaintextRemote" in p.stderr
    s = Service(Path(folder) / "allowed", {"ingest": {"bind": [f"tcp://0.0.0.0:{port}"]},
                                          "security": {"allowPlaintextRemote": True}})
    s.start()
    s.stop()
    assert "plaintext" in s.log_path.read_text() and " warning " in s.log_path.read_text()


def test_a_secret_key_others_can_read_stops_startup(folder):
    sec = Secured(folder)
    os.chmod(sec.keys / "server.key_secret", 0o644)
    p = subprocess.run([BINARY, "serve", "--config", str(sec.service.config_path)], capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode == 1
    assert "server.key_secret" in p.stderr and "chmod 600" in p.stderr


def test_files_the_service_creates_are_private(folder):
    s = Service(folder).start()
    try:
        s.request({"op": "add", "drinks": [drink()]})
        pub, _ = publisher(s)
        pub.send_multipart([b"drink.add", b"not json"])
        dead = s.data / "rejected.jsonl"
        deadline = time.time() + 10
        while not dead.exists():
            assert time.time() < deadline
            time.sleep(0.02)
        pub.close()
    finally:
        s.stop()
    assert stat.S_IMODE(os.stat(s.data).st_mode) == 0o700
    for name in ("coffee-tracker.sqlite", "endpoints.json", "rejected.jsonl", "CoffeeTracker.plist"):
        assert stat.S_IMODE(os.stat(s.data / name).st_mode) == 0o600, name


def test_the_service_is_the_curve_client_of_a_publisher_that_binds(folder):
    """ingest.connect {"endpoint", "serverKey"}: the publisher is a CURVE
    server with its own key, and the service connects with its own pair."""
    sec = Secured(folder)
    pub_public, pub_secret = zmq.curve_keypair()

    def curve_server(sock):
        sock.curve_secretkey = pub_secret
        sock.curve_server = True
    endpoint = f"ipc://{folder}/publisher.sock"
    pub = bus_publisher(zmq.Context.instance(), bind=endpoint, linger=1000, setup=curve_server)
    config = json.loads(sec.service.config_path.read_text())
    config["ingest"]["connect"] = [{"endpoint": endpoint, "serverKey": pub_public.decode()}]
    sec.service.config_path.write_text(json.dumps(config))
    s = sec.start()
    try:
        added = send_when_subscribed(s, pub, drink())
        assert added[0]["source"] == "bus"
    finally:
        s.stop()
        pub.close()
