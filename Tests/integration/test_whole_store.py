"""The person's whole store past one machine (docs/protocol.md §15 "In the
feed", §16 "Past one machine"), against real services over real sockets:
settings and the catalogue reach a standby with the primary's anchors and
are there after a kill -9 and a promotion (the model's half-life, a drink of
the person's own type by its name alone); alerts waiting in the primary's
outbox are delivered once each by the promoted standby, with their ids, and
an alert the standby had not received is decided again with the same id; an
empty standby copying page by page has the settings; followers (pyzmq, the
Python and Swift clients) see a settings change at its anchor; and of two
services on one PostgreSQL database exactly one tells, the other taking over
within 15 s of a kill -9."""
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import zmq

from conftest import ALERTS_ON, Service, drink, next_message, wait_until
from postgres import PostgresServer, server_bin
from test_alerts import SECRET, Receiver
from test_api import call
from test_bus import subscriber
from test_follow import Following
from test_follow_swift import Watching
from test_http import free_port
from test_inbox import drop, processed
from test_standby import in_step, primary_service

from coffee_tracker import Client


def alerts_config(folder, port, **extra):
    """`alerts` with the webhook of the test's receiver on `port` (its secret written into `folder`)."""
    os.makedirs(folder, exist_ok=True)
    Path(folder, "secret.txt").write_text(SECRET + "\n")
    alerts = dict(ALERTS_ON, bedtime="off", retryInitialS=0.2, retryMaxS=0.5,
                  webhook={"url": f"http://127.0.0.1:{port}/hook", "secretFile": "secret.txt"})
    alerts.update(extra)
    return alerts


def standby_of(folder, primary, extra=None):
    config = {"follow": {"query": f"ipc://{primary.folder}/query.sock",
                         "updates": f"ipc://{primary.folder}/updates.sock"}}
    config.update(extra or {})
    return Service(Path(folder) / "standby", config)


class Cable:
    """A standby's way to its primary, through the test: the update feed (XSUB
    to XPUB) and the query endpoint (ROUTER to DEALER), forwarded by a thread
    until `cut()`, after which nothing passes either way (what reaches a
    stopped process's socket buffers would still be read once it runs again)."""

    def __init__(self, folder, primary):
        context = zmq.Context.instance()
        self.updates, self.query = f"ipc://{folder}/cable-updates.sock", f"ipc://{folder}/cable-query.sock"
        self.xpub, self.xsub = context.socket(zmq.XPUB), context.socket(zmq.XSUB)
        self.router, self.dealer = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
        for sock in (self.xpub, self.xsub, self.router, self.dealer):
            sock.setsockopt(zmq.LINGER, 0)
        self.xpub.bind(self.updates)
        self.xsub.connect(f"ipc://{primary.folder}/updates.sock")
        self.router.bind(self.query)
        self.dealer.connect(f"ipc://{primary.folder}/query.sock")
        self.open, self.stopped = True, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        across = {self.xpub: self.xsub, self.xsub: self.xpub, self.router: self.dealer, self.dealer: self.router}
        poller = zmq.Poller()
        for sock in across:
            poller.register(sock, zmq.POLLIN)
        while not self.stopped.is_set():
            for sock, _ in poller.poll(50):
                frames = sock.recv_multipart()
                if self.open:
                    across[sock].send_multipart(frames)
        for sock in across:
            sock.close(0)

    def cut(self):
        self.open = False

    def close(self):
        self.stopped.set()
        self.thread.join(10)


def promote(standby):
    """A restart without `follow` (docs/protocol.md §11)."""
    standby.stop()
    config = json.loads(standby.config_path.read_text())
    del config["follow"]
    standby.config_path.write_text(json.dumps(config))
    return standby.start()


def kill_9(service):
    service.process.send_signal(signal.SIGKILL)
    service.process.wait(10)
    service.log.close()


def anchor(service):
    return service.request({"op": "ping"})["anchor"]


def caught_up(primary, standby, what="the standby to reach the primary's anchor"):
    want = anchor(primary)
    wait_until(lambda: anchor(standby) == want, timeout=30, what=what)
    return want


def keys(receiver, ok=None):
    """The Idempotency-Keys the receiver was sent (only those answered 2xx with ok=True), in order."""
    with receiver.lock:
        return [h["Idempotency-Key"] for h, _, status in receiver.requests
                if ok is None or (200 <= status < 300) == ok]


def test_a_promoted_standby_has_the_persons_settings_catalogue_and_model(folder):
    primary = primary_service(folder).start()
    standby = None
    try:
        assert primary.request({"op": "add", "drinks": [drink(mg=200.0, offset_s=-3600)]})["ok"]
        standby = standby_of(folder, primary).start()
        put = primary.request({"op": "putSettings", "settings": {
            "timeZone": "Europe/Berlin", "halfLifeHours": 4, "bedtime": "22:15", "levelOverMg": 250}})
        assert put["ok"], put
        assert primary.request({"op": "putCatalogue", "name": "flatWhite", "entry": {"mgCaffeine": 130}})["ok"]
        assert primary.request({"op": "add", "drinks": [drink(mg=64.0)]})["ok"]
        settings, catalogue = primary.request({"op": "settings"}), primary.request({"op": "catalogue"})
        in_step(primary, standby)
        caught_up(primary, standby)
        # A standby's model goes by them already, and it refuses to change them.
        assert standby.request({"op": "model"})["halfLifeHours"] == 4
        assert standby.request({"op": "putSettings", "settings": {"halfLifeHours": 2}})["error"]["code"] == "read_only"

        kill_9(primary)
        promote(standby)
        status, _, got = call(standby, "GET", "/api/v1/settings")
        assert status == 200 and got == settings, (got, settings)
        assert got["settings"]["timeZone"] == "Europe/Berlin" and got["settings"]["bedtime"] == "22:15"
        assert standby.request({"op": "catalogue"}) == catalogue
        assert standby.request({"op": "model"})["halfLifeHours"] == 4
        assert standby.request({"op": "history"})["timeZone"] == "Europe/Berlin"
        # The person's own drink by its name alone takes its serving.
        mine = {k: v for k, v in drink().items() if k != "mgCaffeine"}
        reply = standby.request({"op": "add", "drinks": [dict(mine, type="flatWhite")]})
        assert reply["ok"], reply
        stored = [d for d in standby.all_changes(anchor=None)[0] if d["uuid"] == mine["uuid"]]
        assert stored and stored[0]["mgCaffeine"] == 130 and stored[0]["type"] == "flatWhite", stored
    finally:
        for s in (standby, primary):
            if s and s.process and s.process.poll() is None:
                s.stop()


def test_alerts_waiting_on_the_primary_are_delivered_once_by_the_promoted_standby(folder):
    port = free_port()
    receiver = Receiver(port, answers=(503,))
    primary = primary_service(folder, {"alerts": alerts_config(Path(folder) / "primary", port)}).start()
    standby = None
    try:
        standby = standby_of(folder, primary, {"alerts": alerts_config(Path(folder) / "standby", port)}).start()
        # Over the level (and no longer under the sleep threshold), then over the daily limit: three alerts.
        assert primary.request({"op": "add", "drinks": [drink(mg=350.0, offset_s=-10)]})["ok"]
        assert primary.request({"op": "add", "drinks": [drink(mg=100.0, offset_s=-5)]})["ok"]
        wait_until(lambda: len(set(keys(receiver))) == 3, what="three alerts tried at the receiver (503)")
        told = set(keys(receiver))
        caught_up(primary, standby)
        waiting = [row for row in standby.request({"op": "changes", "anchor": 0})["outbox"] if not row["settled"]]
        assert {row["id"] for row in waiting} == told, waiting
        assert primary.request({"op": "stats"})["alerts.webhook"]["delivered"] == 0

        kill_9(primary)
        receiver.answers = [200]
        promote(standby)
        wait_until(lambda: set(keys(receiver, ok=True)) == told, what="the three alerts delivered by the promoted standby")
        time.sleep(1.5)  # room for anything sent twice or decided again
        assert sorted(keys(receiver, ok=True)) == sorted(told), "each of the three once"
        assert set(keys(receiver)) == told, "no alert sent with another id"
        stats = standby.request({"op": "stats"})
        assert stats["alertsTold"] == 0, "nothing decided again for the same turns"
        assert stats["alerts.webhook"]["delivered"] == 3 and stats["alerts.webhook"]["pending"] == 0
        # Settled, in the store and in its feed.
        assert all(row["settled"] for row in standby.request({"op": "changes", "anchor": 0})["outbox"])
    finally:
        receiver.stop()
        for s in (standby, primary):
            if s and s.process and s.process.poll() is None:
                s.stop()


def test_an_alert_the_standby_had_not_received_is_decided_again_with_the_same_id(folder):
    """The primary decides `levelOver cleared` at the curve's crossing, with
    no commit before it, while the standby is cut off from it (a `Cable`):
    the standby has the drink and the `fired` alert, not the `cleared` one. Promoted, it decides
    that turn again from its model: same id, so the receiver can tell."""
    port = free_port()
    receiver = Receiver(port, answers=(503,))
    quiet = {"dailyLimit": False, "sleepThreshold": False}
    primary = primary_service(folder, {"alerts": alerts_config(Path(folder) / "primary", port, **quiet)}).start()
    cable = Cable(folder, primary)
    standby = None
    try:
        standby = standby_of(folder, primary, {"alerts": alerts_config(Path(folder) / "standby", port, **quiet)})
        config = json.loads(standby.config_path.read_text())
        config["follow"] = {"query": cable.query, "updates": cable.updates}
        standby.config_path.write_text(json.dumps(config))
        standby.start()
        # A half-life of 7.2 s: 400 mg is over 300 at once, under 270 (the band) 4 s later.
        assert primary.request({"op": "putSettings", "settings": {"halfLifeHours": 0.002}})["ok"]
        assert primary.request({"op": "add", "drinks": [drink(mg=400.0, offset_s=-0.05)]})["ok"]
        wait_until(lambda: len(keys(receiver)) >= 1, timeout=3, what="the fired alert tried")
        fired = keys(receiver)[0]
        caught_up(primary, standby, what="the standby to hold the fired alert")
        cable.cut()  # from here the standby hears nothing of its primary

        def cleared():
            with receiver.lock:
                return [h["Idempotency-Key"] for h, body, _ in receiver.requests if json.loads(body)["event"] == "cleared"]
        wait_until(cleared, timeout=10, what="the cleared alert tried by the primary")
        kill_9(primary)
        decided = cleared()[0]
        receiver.answers = [200]
        promote(standby)
        wait_until(lambda: decided in keys(receiver, ok=True), what="the cleared alert delivered with its id")
        assert fired in keys(receiver, ok=True)
        assert set(keys(receiver)) == {fired, decided}, "no alert with a second id"
        assert standby.request({"op": "stats"})["alertsTold"] == 1  # the cleared one, decided again
    finally:
        cable.close()
        receiver.stop()
        for s in (standby, primary):
            if s and s.process and s.process.poll() is None:
                s.stop()


def test_an_empty_standby_copying_page_by_page_has_the_settings_and_catalogue(folder):
    primary = primary_service(folder).start()
    standby = None
    try:
        assert primary.request({"op": "putSettings", "settings": {"timeZone": "Asia/Tokyo", "dailyLimitMg": 300}})["ok"]
        assert primary.request({"op": "putCatalogue", "name": "cold-brew", "entry": {"mgCaffeine": 200}})["ok"]
        lines = "\n".join(json.dumps(drink(offset_s=-i)) for i in range(25_000))
        drop(primary, "many.jsonl", lines + "\n")
        wait_until(lambda: processed(primary, "many.jsonl"), timeout=120, what="the file to be imported")
        standby = standby_of(folder, primary).start()  # empty: copies three pages of 10,000
        in_step(primary, standby, timeout=120)
        assert standby.request({"op": "settings"}) == primary.request({"op": "settings"})
        assert standby.request({"op": "catalogue"}) == primary.request({"op": "catalogue"})
        assert standby.request({"op": "history"})["timeZone"] == "Asia/Tokyo"
    finally:
        for s in (standby, primary):
            if s and s.process and s.process.poll() is None:
                s.stop()


def test_followers_see_a_settings_change_at_its_anchor(service):
    """pyzmq (the `changes` message and a reply), the Python client's
    `follow()` and the Swift client's (`coffee-tracker watch`)."""
    following = Following(Client(config=service.config_path, timeout=5))
    watching = Watching("--config", str(service.config_path))
    try:
        wait_until(lambda: following.anchor == 0 and watching.state is not None, what="the followers' first states")
        feed = subscriber(service, topics=(b"changes",))
        put = service.request({"op": "putSettings", "settings": {"timeZone": "America/Chicago", "halfLifeHours": 6}})
        assert put["ok"], put
        at = put["anchor"]
        _, message = next_message(feed, topics=(b"changes",), what="the settings' changes message")
        assert message["anchor"] == at
        assert {(r["name"], json.dumps(r["value"]), r["anchor"]) for r in message["settings"]} == {
            ("timeZone", '"America/Chicago"', at), ("halfLifeHours", "6", at)}
        want = {"person": {"timeZone": "America/Chicago", "halfLifeHours": 6}}
        wait_until(lambda: following.anchor == at and following.settings == want, what="the Python follower's settings")
        wait_until(lambda: (watching.state or {}).get("anchor") == at and watching.state["settings"] == want,
                   what="the Swift follower's settings")
        # A catalogue entry too, and a follower started after them has them from its first page.
        assert service.request({"op": "putCatalogue", "name": "flatWhite", "entry": {"mgCaffeine": 130}})["ok"]
        wait_until(lambda: "catalogue" in following.settings, what="the catalogue entry at the Python follower")
        assert following.settings["catalogue"]["flatWhite"] == {"mgCaffeine": 130, "retired": False}
        late = next(Client(config=service.config_path, timeout=5).follow(timeout=5))
        assert late.settings == following.settings
    finally:
        watching.stop()
        following.finish(service)


@pytest.mark.skipif(server_bin() is None, reason="no PostgreSQL server (apt-get install postgresql)")
def test_of_two_services_on_one_database_exactly_one_tells_and_the_other_takes_over(folder):
    server = PostgresServer().start("max_connections=100")
    port = free_port()
    receiver = Receiver(port)
    services = []
    try:
        _, conninfo = server.new_database()
        quiet = {"dailyLimit": False}
        for name in ("a", "b"):
            config = {"store": {"postgresql": {"conninfo": conninfo}},
                      "alerts": alerts_config(Path(folder) / name, port, **quiet)}
            services.append(Service(Path(folder) / name, config).start())
        a, b = services
        tellers = lambda: [s for s in services if s.request({"op": "stats"})["alertsTeller"]]  # noqa: E731
        wait_until(lambda: len(tellers()) == 1, what="one teller")
        # Five times a drink and its deletion, through either service: 4 alerts each time.
        for i in range(5):
            d = drink(mg=350.0, offset_s=-10)
            assert services[i % 2].request({"op": "add", "drinks": [d]})["ok"]
            wait_until(lambda: len(set(keys(receiver))) == 4 * i + 2, what=f"round {i}: the drink's alerts")
            assert services[(i + 1) % 2].request({"op": "delete", "deletions": [d["uuid"]]})["ok"]
            wait_until(lambda: len(set(keys(receiver))) == 4 * i + 4, what=f"round {i}: the deletion's alerts")
        time.sleep(1)
        assert len(keys(receiver)) == 20 == len(set(keys(receiver))), "20 alerts, each delivered exactly once"
        assert sum(s.request({"op": "stats"})["alertsTold"] for s in services) == 20
        assert len(tellers()) == 1

        teller = tellers()[0]
        other = b if teller is a else a
        kill_9(teller)
        killed = time.time()
        assert other.request({"op": "add", "drinks": [drink(mg=350.0, offset_s=-10)]})["ok"]
        wait_until(lambda: len(set(keys(receiver))) >= 21, timeout=15, what="the next alert told by the other service")
        print(f"hand-over: the next alert delivered {time.time() - killed:.2f} s after the kill")
        assert other.request({"op": "stats"})["alertsTeller"]
    finally:
        receiver.stop()
        for s in services:
            if s.process and s.process.poll() is None:
                s.stop()
        server.cleanup()
