"""Starts the real `coffee-tracker serve` and talks to it over real sockets.

Every service gets its own temporary folder; its endpoints are ipc:// paths
inside it (and a tcp://127.0.0.1:* port for the query endpoint), so runs
never collide. Waits probe until the service answers; they never sleep and hope.
"""
import json
import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import zmq

BINARY = os.environ.get("COFFEE_TRACKER") or str(
    Path(__file__).resolve().parents[2] / ".build" / "debug" / "coffee-tracker")
VECTORS = Path(__file__).resolve().parents[1] / "CoffeeDomainTests" / "Vectors"


#: The rules of docs/protocol.md §16, off (the suite's default) and as the service's defaults have them.
ALERTS_OFF = {"dailyLimit": False, "levelOverMg": 0, "sleepThreshold": False, "bedtime": "off"}
ALERTS_ON = {"dailyLimit": True, "levelOverMg": 300, "sleepThreshold": True, "bedtime": "23:00"}


def now_iso(offset_s=0.0):
    t = time.time() + offset_s
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def drink(mg=96.0, offset_s=-60.0, **extra):
    d = {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": mg, "date": now_iso(offset_s)}
    d.update(extra)
    return d


def wait_until(predicate, timeout=30, what="condition", interval=0.02):
    """Asks `predicate` until it holds; after `timeout` seconds fails naming `what`.

    The suite's one way to wait for something that is not a message: every
    wait has a bound and says what it waited for when it runs out."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def next_message(sub, topics=None, timeout=30, what=None):
    """The next (topic, decoded body) on `sub` whose topic is in `topics` (any
    when None), within `timeout` seconds in all; fails naming `what`.

    A socket's own receive timeout bounds one receive, not a loop that skips
    heartbeats: they arrive every 0.2 s, so such a loop would wait for ever
    for a message that never comes."""
    what = what or (f"a message on {b', '.join(topics).decode()}" if topics else "a message")
    deadline = time.time() + timeout
    while True:
        left_ms = int((deadline - time.time()) * 1000)
        if left_ms <= 0 or not sub.poll(left_ms, zmq.POLLIN):
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        topic, body = sub.recv_multipart()
        if topics is None or topic in topics:
            return topic, json.loads(body)


def await_subscription(pub, topic=b"drink.", timeout=10.0, what=None):
    """Returns once a subscription that covers `topic` has reached `pub`, an XPUB.

    A PUB drops whatever it sends before its peer's subscription has arrived
    (ZeroMQ's slow joiner), silently. An XPUB is a PUB that is told: each
    subscription comes up as a message, b"\\x01" and the prefix. Once one
    covering `topic` is in, what is sent on `topic` reaches that peer."""
    what = what or f"a subscription to {topic!r}"
    deadline = time.time() + timeout
    while True:
        left_ms = int((deadline - time.time()) * 1000)
        if left_ms <= 0 or not pub.poll(left_ms, zmq.POLLIN):
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        message = pub.recv()
        if message[:1] == b"\x01" and topic.startswith(message[1:]):
            return


def bus_publisher(context, *, connect=None, bind=None, hwm=0, linger=5000, topic=b"drink.", timeout=10.0,
                  setup=None):
    """A publisher: an XPUB, which a PUB's peers cannot tell apart. Every test
    that publishes makes its socket here, so none sends into the slow joiner.
    One that connects returns once it has the subscription to `topic` of what
    it connected to; one that binds is waited on with await_subscription once
    its peer is started. `setup(sock)` runs before connect or bind (CURVE keys)."""
    pub = context.socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, linger)
    pub.setsockopt(zmq.SNDHWM, hwm)
    if setup:
        setup(pub)
    if bind:
        pub.bind(bind)
    if connect:
        pub.connect(connect)
        await_subscription(pub, topic, timeout, what=f"the subscription to {topic!r} of {connect}")
    return pub


def query(endpoint, obj, timeout_ms=10000, raw=None, secure=None):
    """One request on the query endpoint (docs/protocol.md §4), its reply decoded."""
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, timeout_ms)
    if secure:
        secure(sock)
    sock.connect(endpoint)
    try:
        sock.send(raw if raw is not None else json.dumps(obj).encode())
        return json.loads(sock.recv())
    finally:
        sock.close()


class Service:
    def __init__(self, folder, extra_config=None):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.config_path = self.folder / "config.json"
        config = {
            "dataDirectory": "data",
            "inboxDirectory": "inbox",
            "ingest": {"bind": [f"ipc://{self.folder}/ingest.sock"]},
            "updates": {"bind": [f"ipc://{self.folder}/updates.sock"]},
            "query": {"bind": ["tcp://127.0.0.1:*"]},
            "http": {"bind": "127.0.0.1:0"},
            "model": {"timeZone": "UTC", "halfLifeHours": 5},
            "publish": {"heartbeatIntervalS": 0.2, "modelIntervalMs": 50},
            # The alerts' rules off unless a test is about them: an alert is a commit with an
            # anchor of its own (§16), and the bedtime rule's turn depends on the hour of the run.
            "alerts": dict(ALERTS_OFF),
            "log": {"level": "info"},
        }
        for key, value in (extra_config or {}).items():
            if isinstance(value, dict) and isinstance(config.get(key), dict):
                config[key].update(value)
            else:
                config[key] = value
        self.config_path.write_text(json.dumps(config))
        self.process = None
        self.start_as = []  # a prefix such as setpriv(1) to run the service as another user
        self.context = zmq.Context.instance()
        self.log_path = self.folder / "service.log"
        self.env = None  # extra environment variables for the service
        self.curve_client = None  # (public, secret) Z85 keys for request() under security.curve
        self.server_key = None

    @property
    def data(self):
        return self.folder / "data"

    def start(self, timeout=20.0):
        if (self.data / "endpoints.json").exists():
            (self.data / "endpoints.json").unlink()
        self.log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [*self.start_as, BINARY, "serve", "--config", str(self.config_path)],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env} if self.env else None)
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.process.poll() is None, "service exited: " + self.log_path.read_text()
            endpoints = self.data / "endpoints.json"  # where the running service sees its data folder
            if endpoints.exists():
                try:
                    self.endpoints = json.loads(endpoints.read_text())
                    if self.endpoints.get("pid") == self.process.pid:
                        break
                except ValueError:
                    pass
            time.sleep(0.02)
        else:
            self.kill()
            raise AssertionError("service did not start: " + self.log_path.read_text())
        self.query_endpoint = self.endpoints["query"][0]
        self.server_key = self.endpoints.get("serverKey")
        try:
            assert self.request({"op": "ping"})["ok"] is True
        except BaseException:
            self.kill()  # never leave a service running behind a failed start
            raise
        return self

    def stop(self, sig=signal.SIGTERM, timeout=20.0):
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            code = self.process.wait(timeout=timeout)
        else:
            code = self.process.returncode if self.process else None
        self.log.close()
        return code

    def kill(self):
        self.process.kill()
        self.process.wait(timeout=10)
        self.log.close()

    def request(self, obj, timeout_ms=10000, raw=None):
        return query(self.query_endpoint, obj, timeout_ms, raw, secure=self.secure)

    def secure(self, sock, keys=None):
        """Makes `sock` a CURVE client of the service with `keys` (default:
        `curve_client`), when the service runs with security.curve."""
        keys = keys or self.curve_client
        if keys and self.server_key:
            sock.curve_publickey, sock.curve_secretkey = keys
            sock.curve_serverkey = self.server_key.encode()

    def run_cli(self, *args, timeout=30):
        return subprocess.run(
            [BINARY, *args, "--config", str(self.config_path)],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def all_changes(self, anchor=None, limit=1000):
        added, deleted, pages = [], [], 0
        while True:
            reply = self.request({"op": "changes", "anchor": anchor, "limit": limit})
            assert reply["ok"], reply
            added += reply["added"]
            deleted += reply["deleted"]
            anchor = reply["anchor"]
            pages += 1
            if not reply["hasMore"]:
                return added, deleted, anchor, pages


def run_on_terminal(args, terminal="stdout", timeout=60):
    """Runs the binary with stdout or stderr on a pseudo-terminal; returns
    (exit code, what the terminal showed)."""
    import pty
    master, slave = pty.openpty()
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    streams[terminal] = slave
    p = subprocess.Popen([BINARY, *args], stdin=subprocess.DEVNULL, **streams)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return p.wait(timeout=timeout), shown.decode("utf-8", "replace")


@pytest.fixture
def folder():
    with tempfile.TemporaryDirectory(prefix="ct-it-") as d:
        yield d


@pytest.fixture
def service(folder):
    s = Service(folder).start()
    yield s
    s.stop()
