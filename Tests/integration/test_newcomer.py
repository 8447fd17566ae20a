"""A newcomer's first hour (the ten points of the issue), each against the
real service: the examples, bare-UUID deletions, clients that explain
themselves, ipc paths beside the configuration, and the order of `changes`
and `model` on the feed."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import zmq

from conftest import BINARY, Service, drink, run_on_terminal
from test_bus import publisher, subscriber
from test_inbox import drop, processed, uuids, wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name, service, *args, timeout=60):
    return subprocess.run([sys.executable, str(EXAMPLES / name), "--data", str(service.data), *args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_1_the_example_publisher_loses_nothing_to_the_slow_joiner(service):
    p = example("publish.py", service, "--count", "5")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "all 5 drinks stored" in p.stdout
    confirmed = re.findall(r"confirmed ([0-9A-F-]{36})", p.stdout)
    assert len(confirmed) == 5 and set(confirmed) <= uuids(service)


def test_2_the_example_subscriber_sees_a_drink_added_by_the_example_and_by_the_cli(service):
    sub = subprocess.Popen([sys.executable, str(EXAMPLES / "subscribe.py"), "--data", str(service.data), "--count", "4",
                            "--timeout", "20"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = sub.stdout.readline()
    assert "subscribed" in first
    # Its three subscriptions (changes, model, heartbeat) have reached the service.
    wait_until(lambda: service.request({"op": "stats"})["subscribers"] >= 3, 10, what="subscribe.py's subscriptions")
    added = example("add_drink.py", service, "--type", "doubleEspresso")
    assert added.returncode == 0 and "stored" in added.stdout, added.stderr
    cli = service.run_cli("add", "--type", "blackTea")
    assert cli.returncode == 0, cli.stderr
    out, err = sub.communicate(timeout=30)
    assert sub.returncode == 0, err
    assert "doubleEspresso" in out and "blackTea" in out and "model:" in out


def test_3_a_bare_uuid_string_is_a_deletion_everywhere(service):
    drinks = [drink() for _ in range(4)]
    assert service.request({"op": "add", "drinks": drinks})["added"] == 4
    reply = service.request({"op": "delete", "deletions": [drinks[0]["uuid"]]})
    assert reply["ok"] and reply["deleted"] == 1, reply
    pub, _ = publisher(service)
    pub.send_multipart([b"drink.delete", json.dumps(drinks[1]["uuid"]).encode()])
    pub.send_multipart([b"drink.delete", json.dumps([drinks[2]["uuid"]]).encode()])
    drop(service, "deletions.json", json.dumps({"drinks": [], "deleted": [drinks[3]["uuid"]]}))
    wait_until(lambda: not ({d["uuid"] for d in drinks} & uuids(service)), what="all four deleted")
    wait_until(lambda: processed(service, "deletions.json"), what="deletions.json moved to processed/")
    pub.close()


def test_4_watch_waits_for_ever_with_timeout_0_and_reconnects_on_a_terminal(folder):
    s = Service(folder, {"query": {"bind": [f"ipc://{folder}/query.sock"]}})
    s.start()
    p = subprocess.Popen([BINARY, "watch", "--config", str(s.config_path), "--timeout", "0", "--count", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0 and out.split(" ")[0] == "state", err
    # On a terminal: the service restarts; watch says so and carries on.
    def restart():
        time.sleep(1.5)
        s.stop()
        time.sleep(2.5)
        s.start()
        for _ in range(3):  # states after the reconnection, whatever came before it
            time.sleep(0.3)
            s.request({"op": "add", "drinks": [drink()]})
    import threading
    t = threading.Thread(target=restart)
    t.start()
    # States: the first (and perhaps a model), "reconnecting" when the service goes silent, then those after it is back.
    code, shown = run_on_terminal(["watch", "--config", str(s.config_path), "--timeout", "1", "--count", "6"], timeout=60)
    t.join()
    s.stop()
    assert code == 0, shown[-500:]
    assert "reconnecting…" in shown
    assert shown.rfind("anchor") > shown.find("reconnecting…")  # it drew the view again after


def test_5_clients_fail_fast_when_the_service_is_gone_and_help_shows_defaults(folder):
    s = Service(folder).start()
    s.kill()  # endpoints.json stays, naming a pid that is gone
    started = time.time()
    p = s.run_cli("status", "--timeout", "30")
    assert p.returncode == 1 and "has exited" in p.stderr, p.stderr
    assert time.time() - started < 5
    p = s.run_cli("import", str(Path(folder) / "x.json"))
    assert p.returncode == 1 and "has exited" in p.stderr
    for command, default in (("import", "default 30 s"), ("status", "default 5"), ("watch", "default 5")):
        h = subprocess.run([BINARY, command, "--help"], capture_output=True, text=True, timeout=30)
        assert default in h.stdout, (command, h.stdout)


def test_6_relative_ipc_paths_live_beside_the_configuration_and_go_at_exit(folder):
    config = Path(folder) / "conf"
    config.mkdir()
    s = Service(config, {"ingest": {"bind": ["ipc://in.sock"]}, "updates": {"bind": ["ipc://up.sock"]},
                         "query": {"bind": ["ipc://q.sock"]}})
    elsewhere = Path(folder) / "elsewhere"
    elsewhere.mkdir()
    cwd = os.getcwd()
    os.chdir(elsewhere)  # the service inherits this working folder
    try:
        s.start()
    finally:
        os.chdir(cwd)
    assert s.endpoints["query"] == [f"ipc://{config}/q.sock"]
    assert (config / "q.sock").exists() and not (elsewhere / "q.sock").exists()
    p = subprocess.run([BINARY, "status", "--config", str(s.config_path)], capture_output=True, text=True, timeout=30,
                       cwd=Path(folder))
    assert p.returncode == 0, p.stderr
    s.stop()
    assert not any((config / name).exists() for name in ("in.sock", "up.sock", "q.sock"))


def test_7_add_echoes_what_it_stored_changes_shows_the_type_and_endpoints_need_a_scheme(service):
    p = service.run_cli("add", "--type", "doubleEspresso")
    assert p.returncode == 0, p.stderr
    assert re.match(r"added doubleEspresso 128 mg at \d{4}-\d\d-\d\dT[\d:.]+Z, uuid [0-9A-F-]{36}, anchor \d+", p.stdout), p.stdout
    p = service.run_cli("changes")
    assert p.returncode == 0 and " doubleEspresso" in p.stdout
    p = subprocess.run([BINARY, "status", "--query", "127.0.0.1:5557"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "tcp://127.0.0.1:5557" in p.stderr and "needs a scheme" in p.stderr


def test_8_dates_before_2000_deletes_and_re_adds_say_what_happened(service):
    p = service.run_cli("add", "--mg", "80", "--date", "1970-01-01T00:00:00Z")
    assert p.returncode == 1 and "limits.earliestDate" in p.stderr, p.stderr
    assert "invalid_drink" not in p.stderr and "element 0" not in p.stderr
    assert "refused the drink" in p.stderr
    u = str(uuid.uuid4()).upper()
    assert service.run_cli("add", "--mg", "80", "--uuid", u).returncode == 0
    assert service.run_cli("delete", u).returncode == 0
    p = service.run_cli("add", "--mg", "80", "--uuid", u)
    assert p.returncode == 0 and "was deleted" in p.stdout and "--version 2" in p.stdout, p.stdout
    p = service.run_cli("add", "--mg", "80", "--uuid", u, "--version", "2")
    assert p.stdout.startswith("added"), p.stdout
    p = service.run_cli("delete", str(uuid.uuid4()))
    assert p.returncode == 0 and "no live drink" in p.stdout and "tombstone" in p.stdout
    p = service.run_cli("delete", "not-a-uuid")
    assert p.returncode == 1 and "refused the deletion" in p.stderr and "invalid_drink" not in p.stderr


def test_9_the_model_explains_itself_and_watch_shows_its_scale(service):
    service.request({"op": "add", "drinks": [drink(mg=96, offset_s=-600)]})
    p = service.run_cli("model")
    assert p.returncode == 0
    assert "96 mg" in p.stdout and "1 drink since midnight" in p.stdout
    assert "green under 200 mg" in p.stdout and "one cup as 96 mg" in p.stdout
    assert not re.search(r"\d\.\d{4,}", p.stdout)  # rounded for people
    p = service.run_cli("model", "--json")
    model = json.loads(p.stdout)
    assert all(len(repr(point["mgCaffeine"]).split(".")[-1]) <= 6 for point in model["timeline"])
    code, shown = run_on_terminal(["watch", "--config", str(service.config_path), "--count", "1"])
    assert code == 0 and "top " in shown and " mg" in shown and "+24 h" in shown, shown[-400:]


def test_10_changes_up_to_an_anchor_come_before_any_model_carrying_it(service):
    sub = subscriber(service, topics=(b"changes", b"model", b"heartbeat"))
    pub, base = publisher(service)
    for _ in range(3000):
        pub.send_multipart([b"drink.add", json.dumps(drink()).encode()])
    final = base + 3000
    seen_changes, checked = base, 0
    deadline = time.time() + 30
    while time.time() < deadline:
        topic, body = sub.recv_multipart()
        message = json.loads(body)
        if topic == b"changes":
            seen_changes = max(seen_changes, message["anchor"])
            continue
        # A model or heartbeat at anchor N comes after every changes message up to N.
        assert message["anchor"] <= seen_changes, (topic, message["anchor"], seen_changes)
        checked += 1
        if topic == b"model" and message["anchor"] >= final:
            break
    assert checked > 0 and seen_changes >= final
    pub.close()
    sub.close()


def test_a_commit_of_more_than_5000_changes_is_sent_in_chained_messages(service):
    sub = subscriber(service, topics=(b"changes",))
    base = service.request({"op": "ping"})["anchor"]
    batch = [{"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 1, "date": time.time() - 3600 - i} for i in range(7000)]
    assert service.request({"op": "add", "drinks": batch})["added"] == 7000
    last, sizes = base, []
    while last < base + 7000:
        topic, body = sub.recv_multipart()
        message = json.loads(body)
        if topic != b"changes":
            continue
        assert message["previousAnchor"] == last
        sizes.append(len(message["added"]))
        last = message["anchor"]
    assert sizes == [5000, 2000]
    sub.close()
