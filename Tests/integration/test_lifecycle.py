"""Restarts, crashes, signals, configuration errors and the command line."""
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from conftest import BINARY, Service, drink


def test_clean_restart_keeps_everything(folder):
    s = Service(folder).start()
    drinks = [drink(offset_s=-i) for i in range(50)]
    s.request({"op": "add", "drinks": drinks})
    s.request({"op": "delete", "deletions": [{"uuid": drinks[0]["uuid"]}]})
    before = s.all_changes(anchor=0)
    model_before = s.request({"op": "model"})
    assert s.stop() == 0
    assert "stopped" in s.log_path.read_text()
    s.start()
    try:
        assert s.all_changes(anchor=0) == before
        assert s.request({"op": "ping"})["anchor"] == 51
        assert abs(s.request({"op": "model"})["mgCaffeine"] - model_before["mgCaffeine"]) < 1
        # Anchors continue; they are never reused.
        assert s.request({"op": "add", "drinks": [drink()]})["anchor"] == 52
    finally:
        s.stop()


def test_sigkill_during_acknowledged_adds_loses_nothing_acknowledged(folder):
    s = Service(folder).start()
    acknowledged = []
    stop = threading.Event()

    def writer(n):
        while not stop.is_set():
            d = drink(offset_s=-n)
            try:
                reply = s.request({"op": "add", "drinks": [d]}, timeout_ms=2000)
            except Exception:
                return
            if reply.get("ok"):
                acknowledged.append((d["uuid"], reply["anchor"]))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    deadline = time.time() + 30
    while len(acknowledged) < 200 and time.time() < deadline:
        time.sleep(0.01)
    s.kill()  # SIGKILL while adds are in flight
    stop.set()
    for t in threads:
        t.join()
    assert len(acknowledged) >= 200
    s.start()
    try:
        added, _, anchor, _ = s.all_changes()
        stored = {a["uuid"] for a in added}
        missing = [u for u, _ in acknowledged if u not in stored]
        assert missing == []
        assert anchor >= max(a for _, a in acknowledged)
    finally:
        s.stop()


def test_sigint_drains_and_exits_zero(folder):
    s = Service(folder).start()
    s.request({"op": "add", "drinks": [drink()]})
    assert s.stop(signal.SIGINT) == 0
    log = s.log_path.read_text()
    assert "draining" in log and "signal=SIGINT" in log


def test_taken_port_fails_startup_naming_it(folder):
    import socket
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    s = Service(folder, {"query": {"bind": [f"tcp://127.0.0.1:{port}"]}})
    p = subprocess.run([BINARY, "serve", "--config", str(s.config_path)], capture_output=True, text=True, timeout=30)
    holder.close()
    assert p.returncode == 1
    assert f"tcp://127.0.0.1:{port}" in p.stderr and "Address already in use" in p.stderr


def config_error(folder, config):
    path = f"{folder}/bad.json"
    with open(path, "w") as f:
        f.write(config if isinstance(config, str) else json.dumps(config))
    p = subprocess.run([BINARY, "serve", "--config", path], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    return p.stderr


def test_bad_configuration_stops_startup_naming_the_key(folder):
    assert "unknown key \"publish.modelInterval\"" in config_error(folder, {"publish": {"modelInterval": 5}})
    assert "unknown key \"colour\"" in config_error(folder, {"colour": "red"})
    assert "model.halfLifeHours must be a number" in config_error(folder, {"model": {"halfLifeHours": "5"}})
    assert "model.halfLifeHours must be > 0" in config_error(folder, {"model": {"halfLifeHours": -1}})
    assert "model.timeZone" in config_error(folder, {"model": {"timeZone": "Mars/Olympus"}})
    assert "log.level" in config_error(folder, {"log": {"level": "loud"}})
    assert "ingest.bind[0]" in config_error(folder, {"ingest": {"bind": ["localhost:5"]}})
    assert "not valid JSON" in config_error(folder, "{")
    p = subprocess.run([BINARY, "serve", "--config", f"{folder}/missing.json"], capture_output=True, text=True)
    assert p.returncode == 2 and "missing.json" in p.stderr


def test_corrupt_database_stops_startup_and_is_kept(folder):
    s = Service(folder)
    s.data.mkdir()
    garbage = b"B" * 8192
    (s.data / "coffee-tracker.sqlite").write_bytes(garbage)
    p = subprocess.run([BINARY, "serve", "--config", str(s.config_path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "not a usable coffee-tracker database" in p.stderr
    assert (s.data / "coffee-tracker.sqlite").read_bytes() == garbage


def test_a_second_service_on_the_same_store_is_refused(service):
    other = Service(Path(service.folder) / "other", extra_config={"dataDirectory": str(service.data)})
    p = subprocess.run([BINARY, "serve", "--config", str(other.config_path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "another coffee-tracker holds the data directory" in p.stderr
    assert service.request({"op": "ping"})["ok"]


def test_help_and_usage_errors():
    p = subprocess.run([BINARY, "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "serve" in p.stdout and "watch" in p.stdout
    for command in ("serve", "add", "delete", "changes", "model", "watch", "status", "keygen", "import"):
        p = subprocess.run([BINARY, command, "--help"], capture_output=True, text=True)
        assert p.returncode == 0 and "Usage: coffee-tracker " + command in p.stdout, command
    p = subprocess.run([BINARY, "brew"], capture_output=True, text=True)
    assert p.returncode == 2 and "unknown command" in p.stderr
    p = subprocess.run([BINARY], capture_output=True, text=True)
    assert p.returncode == 2
    p = subprocess.run([BINARY, "add", "--bogus"], capture_output=True, text=True)
    assert p.returncode == 2 and "--bogus" in p.stderr


def test_cli_client_against_the_service(service):
    p = service.run_cli("add", "--type", "doubleEspresso")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("added doubleEspresso 128 mg") and p.stdout.strip().endswith("anchor 1")
    p = service.run_cli("model")
    assert p.returncode == 0 and ("128 mg" in p.stdout or "127 mg" in p.stdout), p.stdout
    p = service.run_cli("changes")
    assert p.returncode == 0 and p.stdout.startswith("+ ") and p.stdout.strip().endswith("anchor 1")
    uid = p.stdout.split()[1]
    p = service.run_cli("delete", uid)
    assert p.returncode == 0 and p.stdout.startswith(f"deleted {uid}")
    p = service.run_cli("add", "--mg", "-3")
    assert p.returncode == 1 and "refused the drink" in p.stderr and "mgCaffeine" in p.stderr
    p = service.run_cli("status", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["anchor"] == 2
    p = subprocess.run([BINARY, "keygen"], capture_output=True, text=True)
    assert p.returncode == 2 and "NAME" in p.stderr


def test_cli_reports_a_service_that_does_not_answer(folder):
    start = time.time()
    p = subprocess.run([BINARY, "ping" if False else "status", "--query", f"ipc://{folder}/nobody", "--timeout", "0.5"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "no answer" in p.stderr
    assert time.time() - start < 10


def test_the_model_cache_is_replaced_by_a_rename_never_written_in_place(folder):
    """A cache a crash interrupts must be the old one or the new one, never
    half of each: each write goes to a temporary file renamed over the old
    (a new inode each time), and never leaves the temporary file behind."""
    s = Service(folder)
    cache = s.data / "CoffeeTracker.plist"
    inodes = []
    for _ in range(3):
        s.start()
        assert s.request({"op": "add", "drinks": [drink()]})["ok"]
        s.stop()
        assert cache.exists()
        inodes.append(cache.stat().st_ino)
    # The new file exists beside the old one before the rename, so two in a row never share an inode.
    assert all(a != b for a, b in zip(inodes, inodes[1:])), f"the cache kept its inode: written in place ({inodes})"
    assert not [n for n in os.listdir(s.data) if n.endswith(".tmp")]
