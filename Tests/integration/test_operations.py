"""docs/protocol.md §9 against the real service: systemd's notification protocol
heard by a Python listener, /metrics read by prometheus_client's own parser,
/healthz and /readyz, an HTTP endpoint that slow or oversized requests
cannot disturb, SIGHUP, journal and JSON logs, check, --version, and the
installed unit rated by systemd-analyze."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import BINARY, Service, drink
from test_bus import publisher, subscriber
from test_inbox import drop, processed, wait_until

ROOT = Path(__file__).resolve().parents[2]


class NotifyListener:
    """A NOTIFY_SOCKET as systemd offers one: a datagram socket; every
    message received is kept with its time."""

    def __init__(self, folder):
        self.path = str(Path(folder) / "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.2)
        self.messages = []
        self.running = True
        self.thread = threading.Thread(target=self.listen, daemon=True)
        self.thread.start()

    def listen(self):
        while self.running:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            for line in data.decode().split("\n"):
                self.messages.append((time.time(), line))

    def times(self, line):
        return [t for t, m in self.messages if m == line]

    def first(self, prefix, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for t, m in list(self.messages):
                if m.startswith(prefix):
                    return t, m
            time.sleep(0.01)
        raise AssertionError(f"no {prefix} in {self.messages[-20:]}")

    def close(self):
        self.running = False
        self.thread.join(timeout=5)
        self.sock.close()


def http(service, path, timeout=5):
    address = service.endpoints["http"]
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_systemd_hears_ready_status_a_watchdog_that_stops_when_the_store_stalls_and_stopping(folder):
    listener = NotifyListener(folder)
    s = Service(folder)
    s.env = {"NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "400000", "COFFEE_TRACKER_TEST_HOOKS": "1"}
    s.start()
    try:
        ready_at, _ = listener.first("READY=1")
        # READY=1 came once the endpoints were bound: the file naming them was written before it.
        assert (s.data / "endpoints.json").stat().st_mtime <= ready_at + 0.01
        assert s.request({"op": "ping"})["ok"]
        _, status = listener.first("STATUS=")
        assert "anchor" in status
        # WATCHDOG=1 at half of WATCHDOG_USEC (0.2 s).
        time.sleep(2.5)
        pings = [t for t in listener.times("WATCHDOG=1") if t > ready_at]
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        assert 6 <= len(pings) <= 20, pings
        assert max(gaps) < 0.6, gaps
        # The store's thread stalls for 5 s (a test hook): the pings stop, then resume.
        stalled_at = time.time()
        s.process.send_signal(signal.SIGUSR1)
        time.sleep(3.5)
        during = [t for t in listener.times("WATCHDOG=1") if stalled_at + 1.3 < t < stalled_at + 3.5]
        assert during == [], f"watchdog fed while the store was stalled: {during}"
        assert http(s, "/healthz", timeout=10)[0] == 503
        wait_until(lambda: any(t > stalled_at + 5 for t in listener.times("WATCHDOG=1")), timeout=10,
                   what="the watchdog to resume")
        assert http(s, "/healthz")[0] == 200
    finally:
        stopped = time.time()
        s.stop()
        listener.first("STOPPING=1")
        assert any(t >= stopped for t in listener.times("STOPPING=1"))
        listener.close()


def test_ping_stats_readyz_and_metrics_answer_while_the_store_is_held(folder):
    """An inbox file's transaction holds the store's thread for the whole
    file (minutes for a large Health export), as a wedged fsync does: the
    service's own questions answer meanwhile, from what the store last
    committed (`ping` waited for the whole file before)."""
    s = Service(folder)
    s.env = {"COFFEE_TRACKER_TEST_HOOKS": "1"}
    s.start()
    try:
        assert s.request({"op": "add", "drinks": [drink() for _ in range(3)]})["ok"]
        anchor = s.request({"op": "ping"})["anchor"]
        assert anchor == 3
        assert "coffee_tracker_alerts_pending" in http(s, "/metrics")[1]  # read from the store once: its counts are known
        stalled_at = time.monotonic()
        s.process.send_signal(signal.SIGUSR1)  # the store's thread stalls for 5 s (a test hook)
        time.sleep(0.5)
        assert http(s, "/healthz", timeout=10)[0] == 503  # held: the store's thread does not answer

        def answered(ask):
            started = time.monotonic()
            reply = ask()
            return reply, time.monotonic() - started

        ping, took = answered(lambda: s.request({"op": "ping"}, timeout_ms=4000))
        assert ping["ok"] and ping["anchor"] == anchor and took < 2, (ping, took)
        stats, took = answered(lambda: s.request({"op": "stats"}, timeout_ms=4000))
        assert stats["ok"] and stats["anchor"] == anchor and took < 2, (stats, took)
        (status, body), took = answered(lambda: http(s, "/readyz", timeout=4))
        assert status == 200 and body.startswith("ready") and took < 2, (status, body, took)
        (status, text), took = answered(lambda: http(s, "/metrics", timeout=4))
        assert status == 200 and f"coffee_tracker_anchor {anchor}" in text and took < 2, (status, took)
        assert time.monotonic() - stalled_at < 4.5, "the answers came only after the stall"
        wait_until(lambda: http(s, "/healthz")[0] == 200, timeout=10, what="the store's thread to answer again")
        assert s.request({"op": "add", "drinks": [drink()]})["anchor"] == anchor + 1
    finally:
        s.stop()


def test_metrics_parse_and_agree_with_the_query_endpoint(service):
    sub = subscriber(service, topics=(b"changes",))  # `changes` is written (and its delay timed) for a subscriber
    pub, _ = publisher(service)
    for _ in range(25):
        pub.send_multipart([b"drink.add", json.dumps(drink()).encode()])
    pub.send_multipart([b"drink.add", b"not json"])
    assert service.request({"op": "add", "drinks": [drink() for _ in range(3)]})["ok"]
    # The bad message counts once its dead letter is synced, which may come after the drinks' commit.
    wait_until(lambda: (lambda stats: stats["stored"] >= 28 and stats["rejected"] >= 1)(service.request({"op": "stats"})),
               what="the 25 bus and 3 query drinks stored and the bad message rejected")
    status, text = http(service, "/metrics")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(text)}
    stats = service.request({"op": "stats"})
    ping = service.request({"op": "ping"})

    def value(name, **labels):
        family = families.get(name) or families[name.removesuffix("_total")]  # the parser drops a counter's _total
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
        raise AssertionError(f"{name} {labels} not in /metrics")

    assert value("coffee_tracker_anchor") == ping["anchor"]
    assert families["coffee_tracker_drinks_stored"].type == "counter"
    assert value("coffee_tracker_drinks_stored_total") == stats["stored"] == 28
    assert value("coffee_tracker_events_received_total", channel="query") == 3
    assert value("coffee_tracker_events_received_total", channel="bus") == 25  # publisher() sends no probe
    assert value("coffee_tracker_rejected_total", channel="bus") == stats["rejected"] == 1
    assert value("coffee_tracker_commits_total") == stats["commits"]
    commit = families["coffee_tracker_commit_duration_seconds"]
    assert commit.type == "histogram"
    count = [s.value for s in commit.samples if s.name.endswith("_count")][0]
    # The bus's 25 and the query's 3 may share one commit (the writer batches what waits): one at least, each timed once.
    assert 1 <= count <= stats["commits"]
    delay = families["coffee_tracker_publish_delay_seconds"]
    assert [s.value for s in delay.samples if s.name.endswith("_count")][0] >= 1
    for name in ("process_cpu_seconds", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds",
                 "coffee_tracker_caffeine_mg", "coffee_tracker_subscribers", "coffee_tracker_auth_denied",
                 "coffee_tracker_store_bytes", "coffee_tracker_updates_dropped", "coffee_tracker_files"):
        assert name in families, name
    # The model follows commits in rounds (publish.modelIntervalMs): its value catches up within one.
    wait_until(lambda: "coffee_tracker_caffeine_mg 0\n" not in http(service, "/metrics")[1], timeout=5,
               what="the model's caffeine in /metrics")
    assert http(service, "/nothing-here")[0] == 404
    assert http(service, "/readyz")[0] == 200
    pub.close()
    sub.close()


def test_readyz_is_503_while_draining(folder):
    s = Service(folder)
    s.env = {"COFFEE_TRACKER_TEST_HOOKS": "1"}
    s.start()
    pub, _ = publisher(s)
    assert http(s, "/readyz")[0] == 200
    # A stalled store keeps the drain waiting (the bus commits what it took first).
    pub.send_multipart([b"drink.add", json.dumps(drink()).encode()])
    s.process.send_signal(signal.SIGUSR1)
    time.sleep(0.2)
    s.process.send_signal(signal.SIGTERM)
    deadline, seen = time.time() + 4, []
    while time.time() < deadline:
        try:
            seen.append(http(s, "/readyz", timeout=2))
        except TimeoutError:
            # Asked before SIGTERM was taken: a ready service's /readyz reads
            # the outbox from the stalled store. Ask again, now draining.
            continue
        except OSError:
            break  # the service has gone
        if seen[-1][0] == 503:
            break
        time.sleep(0.05)
    assert (503, "draining\n") in seen, seen
    assert s.process.wait(timeout=30) == 0
    s.log.close()
    pub.close()


def test_slow_and_oversized_requests_are_closed_and_disturb_nothing(service):
    address = service.endpoints["http"]
    host, port = address.rsplit(":", 1)
    slow = socket.create_connection((host, int(port)))
    slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and nothing more
    big = socket.create_connection((host, int(port)))
    big.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X-Padding: " + b"a" * 9000 + b"\r\n\r\n")
    big.settimeout(5)
    refused = big.recv(4096)
    assert refused.startswith(b"HTTP/1.1 431"), refused  # refused, then closed
    assert big.recv(100) == b""
    # Meanwhile ingestion and other requests go on.
    pub, base = publisher(service)
    sent = [drink() for _ in range(200)]
    for d in sent:
        pub.send_multipart([b"drink.add", json.dumps(d).encode()])
    wait_until(lambda: service.request({"op": "ping"})["anchor"] >= base + 200, what="ingestion")
    assert http(service, "/healthz")[0] == 200
    slow.settimeout(8)
    started = time.time()
    assert slow.recv(100) == b""  # the slow one is closed after 5 s, unanswered
    assert time.time() - started < 7
    slow.close()
    big.close()
    pub.close()


def test_sighup_changes_the_log_level_and_names_keys_that_need_a_restart(folder):
    s = Service(folder, {"log": {"level": "warning"}}).start()
    try:
        drop(s, "before.json", json.dumps([drink()]))
        wait_until(lambda: processed(s, "before.json"), what="before.json")
        assert "imported" not in s.log_path.read_text()  # info lines are below warning
        config = json.loads(s.config_path.read_text())
        config["log"]["level"] = "info"
        config["publish"]["heartbeatIntervalS"] = 0.5
        s.config_path.write_text(json.dumps(config))
        s.process.send_signal(signal.SIGHUP)
        wait_until(lambda: "log level changed" in s.log_path.read_text(), what="the reload")
        # The reload logs its lines one after another: wait for this one too,
        # rather than read the log the moment the line before it appears.
        wait_until(lambda: re.search(r"restart keys=publish\.heartbeatIntervalS", s.log_path.read_text()),
                   timeout=10, what="the restart keys line: " + s.log_path.read_text()[-800:])
        drop(s, "after.json", json.dumps([drink()]))
        wait_until(lambda: "imported" in s.log_path.read_text(), what="an info line")
        assert s.request({"op": "ping"})["ok"]  # the same process throughout
    finally:
        s.stop()


def test_journal_lines_carry_priorities_and_json_logs_numbers(folder):
    s = Service(folder)
    s.log = None
    log_path = s.log_path
    log_path.touch()
    st = os.stat(log_path)
    s.env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
    s.start()
    s.stop()
    lines = [line for line in log_path.read_text().splitlines() if line]
    assert lines and all(re.match(r"<[2-7]>[a-z]+ ", line) for line in lines), lines[:3]
    assert any(line.startswith("<5>notice service: ready") for line in lines)

    j = Service(Path(folder) / "json", {"log": {"format": "json"}}).start()
    j.stop()
    records = [json.loads(line) for line in j.log_path.read_text().splitlines() if line.startswith("{")]
    ready = [r for r in records if r["message"] == "ready"][0]
    assert isinstance(ready["anchor"], int) and isinstance(ready["pid"], int)


def test_check_names_every_problem_and_version_answers(folder):
    p = subprocess.run([BINARY, "--version"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and re.match(r"coffee-tracker \d+\.\d+\.\d+ \(libzmq \d", p.stdout)
    good = Service(Path(folder) / "good")
    p = subprocess.run([BINARY, "check", "--config", str(good.config_path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.startswith("ok"), p.stdout + p.stderr
    keys = Path(folder) / "keys"
    keys.mkdir()
    subprocess.run([BINARY, "keygen", str(keys / "server")], check=True, capture_output=True, timeout=30)
    os.chmod(keys / "server.key_secret", 0o640)
    (keys / "clients").mkdir()
    (keys / "clients" / "bad.key").write_text("curve\n    public-key = \"short\"\n")
    bad = Service(Path(folder) / "bad", {
        "ingest": {"bind": ["tcp://0.0.0.0:6555"]},
        "security": {"curve": {"secretKeyFile": str(keys / "server.key_secret"), "clientsDirectory": str(keys / "clients")}},
        "query": {"bind": ["tcp://192.0.2.1:7000"]}})
    p = subprocess.run([BINARY, "check", "--config", str(bad.config_path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "chmod 600" in p.stdout and "bad.key:2" in p.stdout and "2 problems" in p.stdout, p.stdout
    # Nothing was started: no data folder was made.
    assert not (Path(folder) / "bad" / "data").exists()
    syntax = Service(Path(folder) / "syntax")
    syntax.config_path.write_text('{"log": {"level": "info",}}')
    p = subprocess.run([BINARY, "check", "--config", str(syntax.config_path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "config.json:1:" in p.stdout


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_installed_unit_is_sandboxed_and_verifies(folder):
    dest = Path(folder) / "dest"
    p = subprocess.run(["make", "-s", "install", f"DESTDIR={dest}", "PREFIX=/usr",
                        f"RELEASE_BINARY={BINARY}"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    unit = dest / "usr/lib/systemd/system/coffee-tracker.service"
    for path in (dest / "usr/bin/coffee-tracker", unit, dest / "etc/coffee-tracker/coffee-tracker.json",
                 dest / "usr/lib/sysusers.d/coffee-tracker.conf", dest / "usr/lib/tmpfiles.d/coffee-tracker.conf"):
        assert path.exists(), path
    config = json.loads((dest / "etc/coffee-tracker/coffee-tracker.json").read_text())
    assert config["dataDirectory"].startswith("/var/lib/coffee-tracker/")
    p = subprocess.run(["systemd-analyze", "security", "--offline=true", str(unit)], capture_output=True, text=True,
                       timeout=60)
    exposure = float(re.search(r"Overall exposure level for \S+: (\d+\.\d+)", p.stdout).group(1))
    assert exposure <= 2.0, p.stdout[-2000:]
    # verify looks for ExecStart's binary on this machine: point it at the staged one.
    staged = Path(folder) / "coffee-tracker.service"
    staged.write_text(unit.read_text().replace("/usr/bin/coffee-tracker", str(dest / "usr/bin/coffee-tracker")))
    p = subprocess.run(["systemd-analyze", "verify", str(staged)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "coffee-tracker.service" not in p.stderr, p.stderr
    assert "Type=notify" in unit.read_text() and "WatchdogSec=" in unit.read_text()
    # A PostgreSQL store not up yet is waited for inside the service (docs/postgresql.md), not by
    # systemd's restarts: the units keep its start limit, and let the wait extend the start timeout.
    assert unit_setting(unit.read_text(), "Unit", "StartLimitIntervalSec") is None
    assert unit_setting(unit.read_text(), "Service", "NotifyAccess") == "main"
    # The nightly backup (docs/operations.md): its service and timer verify too.
    units = dest / "usr/lib/systemd/system"
    for name in ("coffee-tracker-backup.service", "coffee-tracker-backup.timer"):
        (Path(folder) / name).write_text(
            (units / name).read_text().replace("/usr/bin/coffee-tracker", str(dest / "usr/bin/coffee-tracker")))
    p = subprocess.run(["systemd-analyze", "verify", str(Path(folder) / "coffee-tracker-backup.timer"),
                        str(Path(folder) / "coffee-tracker-backup.service")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "coffee-tracker-backup" not in p.stderr, p.stderr
    assert f"{dest}/usr/bin/coffee-tracker backup" in (Path(folder) / "coffee-tracker-backup.service").read_text()


def unit_setting(unit_text, section, key):
    """The last value of `key` in `[section]` of a unit, or None."""
    value, current = None, None
    for line in unit_text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
        elif current == section and line.startswith(key + "="):
            value = line[len(key) + 1:]
    return value


def sandbox(unit_text):
    """The sandboxing lines of a unit: from its `# Sandboxing` comment to `[Install]`, comments left out."""
    block = unit_text[unit_text.index("# Sandboxing"):unit_text.index("[Install]")]
    return [line for line in block.splitlines() if line and not line.startswith("#")]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_two_people_on_one_host_and_a_relay_as_template_units(folder):
    """docs/protocol.md §11: `make install INSTANCES="alice bob"` installs the
    template units and one configuration per person, each with its own
    ports and folders; each instance verifies and is sandboxed as the
    single unit is."""
    dest = Path(folder) / "dest"
    p = subprocess.run(["make", "-s", "install", f"DESTDIR={dest}", "PREFIX=/usr", f"RELEASE_BINARY={BINARY}",
                        "INSTANCES=alice bob"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    units = dest / "usr/lib/systemd/system"
    configs = {name: json.loads((dest / f"etc/coffee-tracker/{name}.json").read_text()) for name in ("alice", "bob")}
    ports = {}
    for name, config in configs.items():
        assert config["dataDirectory"] == f"/var/lib/coffee-tracker/{name}/data"
        assert config["inboxDirectory"] == f"/var/lib/coffee-tracker/{name}/inbox"
        endpoints = [*config["ingest"]["bind"], *config["updates"]["bind"], *config["query"]["bind"], config["http"]["bind"]]
        ports[name] = {e.rsplit(":", 1)[1] for e in endpoints}
        assert len(ports[name]) == 4
    assert not ports["alice"] & ports["bob"], "two people share a port"
    single = (units / "coffee-tracker.service").read_text()
    template = (units / "coffee-tracker@.service").read_text()
    relay = (units / "coffee-tracker-relay@.service").read_text()
    assert "--config /etc/coffee-tracker/%i.json" in template and "StateDirectory=coffee-tracker/%i" in template
    assert "TemporaryFileSystem=/var/lib/coffee-tracker:ro" in template and "BindPaths=/var/lib/coffee-tracker/%i" in template
    assert sandbox(template) == sandbox(single), "the template's sandbox drifted from the single unit's"
    assert sandbox(relay) == sandbox(single), "the relay's sandbox drifted from the service's"
    staged = Path(folder) / "staged"
    staged.mkdir()
    for unit in ("coffee-tracker@.service", "coffee-tracker-relay@.service"):
        (staged / unit).write_text((units / unit).read_text().replace("/usr/bin/coffee-tracker", str(dest / "usr/bin/coffee-tracker")))
    for instance in ("coffee-tracker@alice.service", "coffee-tracker@bob.service", "coffee-tracker-relay@screens.service"):
        p = subprocess.run(["systemd-analyze", "verify", str(staged / instance)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and instance not in p.stderr, p.stderr
        p = subprocess.run(["systemd-analyze", "security", "--offline=true", str(staged / instance)], capture_output=True,
                           text=True, timeout=60)
        exposure = float(re.search(r"Overall exposure level for \S+: (\d+\.\d+)", p.stdout).group(1))
        assert exposure <= 2.0, (instance, p.stdout[-2000:])
    # A second install keeps what an operator has edited.
    (dest / "etc/coffee-tracker/alice.json").write_text("{}")
    p = subprocess.run(["make", "-s", "install", f"DESTDIR={dest}", "PREFIX=/usr", f"RELEASE_BINARY={BINARY}",
                        "INSTANCES=alice"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0 and (dest / "etc/coffee-tracker/alice.json").read_text() == "{}"
