"""docs/protocol.md §16's MQTT against a real broker: Debian's `mosquitto`,
started here on a port of the test's own. A paho-mqtt subscriber sees
Home Assistant's discovery configurations and the retained states as Home
Assistant reads them; the broker stopped and started again (its retained
messages lost with it) while drinks keep coming: the store never waits,
and the states come back, current, on the reconnection."""
import getpass
import json
import os
import shutil
import subprocess
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import Service, drink, wait_until
from test_http import free_port
from test_operations import http

paho = pytest.importorskip("paho.mqtt.client")
pytestmark = pytest.mark.skipif(shutil.which("mosquitto") is None and not os.path.exists("/usr/sbin/mosquitto"),
                                reason="no mosquitto (apt-get install mosquitto)")
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


class Broker:
    """mosquitto on 127.0.0.1:`port`, anonymous, without persistence: a restart forgets every retained message."""

    def __init__(self, folder, port):
        self.port = port
        self.config = os.path.join(folder, "mosquitto.conf")
        with open(self.config, "w") as f:
            f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
        self.log = open(os.path.join(folder, "mosquitto.log"), "ab")
        self.process = None

    def start(self):
        self.process = subprocess.Popen([MOSQUITTO, "-c", self.config], stdout=self.log, stderr=self.log)
        wait_until(self.answers, timeout=10, what="mosquitto listening")
        return self

    def answers(self):
        return listening(self.port)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def listening(port):
    import socket
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Watcher:
    """A paho-mqtt subscriber to everything: the last payload of each topic, and whether it came retained."""

    def __init__(self, port):
        self.messages, self.lock = {}, threading.Lock()
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2)
        self.client.on_message = self.on_message
        self.client.connect("127.0.0.1", port)
        self.client.subscribe("#")
        self.client.loop_start()

    def on_message(self, client, userdata, message):
        with self.lock:
            self.messages[message.topic] = (message.payload.decode(), message.retain)

    def get(self, topic):
        with self.lock:
            return self.messages.get(topic)

    def matching(self, prefix):
        with self.lock:
            return {t: v for t, v in self.messages.items() if t.startswith(prefix)}

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


def test_home_assistant_discovers_the_sensors_and_the_states_come_back_after_the_broker_restarts(folder):
    os.makedirs(folder, exist_ok=True)
    port = free_port()
    broker = Broker(folder, port).start()
    s = Service(folder, {"mqtt": {"host": "127.0.0.1", "port": port}}).start()
    watchers = []
    try:
        assert s.request({"op": "add", "drinks": [drink(mg=200.0, offset_s=-60)]})["ok"]
        store = s.request({"op": "ping"})["store"].replace("-", "").lower()
        node = f"coffee_tracker_{store}"
        # A subscriber that comes later still gets everything: it is retained.
        time.sleep(0.5)
        w = Watcher(port)
        watchers.append(w)
        wait_until(lambda: len(w.matching(f"homeassistant/sensor/{node}/")) == 5, what="five discovery configurations")
        configs = {t.split("/")[3]: (json.loads(p), r) for t, (p, r) in w.matching("homeassistant/sensor/").items()}
        assert all(retained for _, retained in configs.values())
        caffeine = configs["caffeine"][0]
        assert caffeine["unique_id"] == f"{node}_caffeine" and caffeine["unit_of_measurement"] == "mg"
        assert caffeine["state_topic"] == f"coffee-tracker/{node}/caffeine"
        assert caffeine["device"]["identifiers"] == [node] and caffeine["device"]["name"] == "Coffee Tracker"
        assert configs["under_threshold_at"][0]["device_class"] == "timestamp"
        assert configs["level"][0]["device_class"] == "enum" and configs["level"][0]["options"] == ["green", "yellow", "red"]
        assert w.get(f"coffee-tracker/{node}/availability") == ("online", True)
        wait_until(lambda: (w.get(f"coffee-tracker/{node}/today") or ("",))[0] == "200", what="today's 200 mg")
        mg, retained = w.get(f"coffee-tracker/{node}/caffeine")
        assert retained and 199 < float(mg) <= 200
        assert w.get(f"coffee-tracker/{node}/cups_today")[0] == "2.08"

        # The broker goes away; drinks keep coming and are answered as fast as ever.
        w.close()
        watchers.clear()
        broker.stop()
        started = time.time()
        for _ in range(20):
            assert s.request({"op": "add", "drinks": [drink(mg=10.0, offset_s=-30)]})["ok"]
        assert time.time() - started < 5
        wait_until(lambda: s.request({"op": "stats"})["mqtt"]["connected"] is False, what="the broker seen away")
        assert "mqtt: not connected" in __import__("test_operations").http(s, "/readyz")[1]
        broker = Broker(folder, port).start()  # a new broker: no retained message survives
        w = Watcher(port)
        watchers.append(w)
        wait_until(lambda: (w.get(f"coffee-tracker/{node}/today") or ("",))[0] == "400", timeout=60,
                   what="the states published again, current, after the reconnection")
        assert len(w.matching(f"homeassistant/sensor/{node}/")) == 5
        assert s.request({"op": "stats"})["mqtt"]["connections"] >= 2

        # A state is sent only when it changed, but to a new connection all
        # are: away again with no drink, the level (unchanged) comes back.
        wait_until(lambda: w.get(f"coffee-tracker/{node}/level") is not None, what="the level")
        level = w.get(f"coffee-tracker/{node}/level")[0]
        w.close()
        watchers.clear()
        broker.stop()
        wait_until(lambda: s.request({"op": "stats"})["mqtt"]["connected"] is False, what="the broker seen away again")
        broker = Broker(folder, port).start()
        w = Watcher(port)
        watchers.append(w)
        # (Retained or not: a subscriber that came first gets it live.)
        wait_until(lambda: (w.get(f"coffee-tracker/{node}/level") or ("",))[0] == level, timeout=60,
                   what="the unchanged level published again after the second reconnection")
        wait_until(lambda: (w.get(f"coffee-tracker/{node}/today") or ("",))[0] == "400", what="today's 400 mg again")
    finally:
        for w in watchers:
            w.close()
        s.stop()
        broker.stop()


def test_drinks_from_the_command_topics_follow_the_bus_rules(folder):
    os.makedirs(folder, exist_ok=True)
    port = free_port()
    broker = Broker(folder, port).start()
    s = Service(folder, {"mqtt": {"host": "127.0.0.1", "port": port, "acceptDrinks": True}}).start()
    off = Service(os.path.join(folder, "off"), {"mqtt": {"host": "127.0.0.1", "port": port}}).start()
    sender = paho.Client(paho.CallbackAPIVersion.VERSION2)
    sender.connect("127.0.0.1", port)
    sender.loop_start()
    try:
        node = "coffee_tracker_" + s.request({"op": "ping"})["store"].replace("-", "").lower()
        off_node = "coffee_tracker_" + off.request({"op": "ping"})["store"].replace("-", "").lower()
        wait_until(lambda: s.request({"op": "stats"})["mqtt"]["connected"], what="the service connected")
        good = drink(mg=64.0)
        sender.publish(f"coffee-tracker/{node}/drink.add", json.dumps(good), qos=1).wait_for_publish(5)
        wait_until(lambda: any(d["uuid"] == good["uuid"] for d in s.all_changes()[0]), what="the drink stored")
        stored = next(d for d in s.all_changes()[0] if d["uuid"] == good["uuid"])
        assert stored["source"] == "mqtt" and stored["mgCaffeine"] == 64
        # Refused as the bus refuses: to the dead-letter file, counted, and the service goes on.
        sender.publish(f"coffee-tracker/{node}/drink.add", json.dumps({"uuid": "nope", "mgCaffeine": 5}), qos=1)
        wait_until(lambda: s.request({"op": "stats"})["rejected"] == 1, what="the bad drink rejected")
        line = json.loads((s.data / "rejected.jsonl").read_text().splitlines()[-1])
        assert line["topic"] == "mqtt:drink.add" and "uuid" in line["reason"], line
        # Counted under its own channel, not the bus's.
        status, text = http(s, "/metrics")
        rejected = {sample.labels["channel"]: sample.value for family in text_string_to_metric_families(text)
                    for sample in family.samples if sample.name == "coffee_tracker_rejected_total"}
        assert status == 200 and rejected["mqtt"] == 1 and rejected["bus"] == 0, rejected
        sender.publish(f"coffee-tracker/{node}/drink.delete", json.dumps([good["uuid"]]), qos=1)
        wait_until(lambda: good["uuid"] in [d["uuid"] for d in s.all_changes(anchor=0)[1]], what="the deletion stored")
        # Without mqtt.acceptDrinks, the service takes nothing from its command topic.
        sender.publish(f"coffee-tracker/{off_node}/drink.add", json.dumps(drink()), qos=1).wait_for_publish(5)
        time.sleep(1)
        assert off.request({"op": "ping"})["anchor"] == 0
    finally:
        sender.loop_stop()
        sender.disconnect()
        s.stop()
        off.stop()
        broker.stop()


def test_a_broker_over_tls_with_a_password(folder):
    """mqtt.tls.caFile, mqtt.username and mqtt.passwordFile against a
    mosquitto that listens only over TLS (a certificate made here with
    openssl) and takes only that user: the states arrive; a wrong password
    is a state (not connected, the broker's refusal named), never a stop."""
    from test_http import make_certificate
    os.makedirs(folder, exist_ok=True)
    cert, key = make_certificate(folder, "broker")
    passwords = os.path.join(folder, "broker.passwd")
    subprocess.run(["mosquitto_passwd", "-b", "-c", passwords, "coffee", "s3cret"], check=True, capture_output=True)
    port = free_port()
    config = os.path.join(folder, "mosquitto-tls.conf")
    with open(config, "w") as f:
        # As root, mosquitto drops to its own user unless told not to, and could not read the key (0600).
        f.write(f"listener {port} 127.0.0.1\ncertfile {cert}\nkeyfile {key}\nuser {getpass.getuser()}\n"
                f"allow_anonymous false\npassword_file {passwords}\npersistence false\n")
    log = open(os.path.join(folder, "mosquitto-tls.log"), "ab")
    broker = subprocess.Popen([MOSQUITTO, "-c", config], stdout=log, stderr=log)
    with open(os.path.join(folder, "mqtt.password"), "w") as f:
        f.write("s3cret\n")
    with open(os.path.join(folder, "wrong.password"), "w") as f:
        f.write("nope\n")
    mqtt = {"host": "localhost", "port": port, "tls": {"caFile": str(cert)}, "username": "coffee"}
    s = Service(os.path.join(folder, "good"), {"mqtt": {**mqtt, "passwordFile": os.path.join(folder, "mqtt.password")}})
    bad = Service(os.path.join(folder, "bad"), {"mqtt": {**mqtt, "passwordFile": os.path.join(folder, "wrong.password")}})
    watcher = paho.Client(paho.CallbackAPIVersion.VERSION2)
    started = []
    try:
        wait_until(lambda: broker.poll() is not None or listening(port), timeout=10, what="mosquitto over TLS")
        assert broker.poll() is None, open(os.path.join(folder, "mosquitto-tls.log")).read()
        started += [s.start(), bad.start()]
        assert s.request({"op": "add", "drinks": [drink(mg=120.0, offset_s=-60)]})["ok"]
        node = "coffee_tracker_" + s.request({"op": "ping"})["store"].replace("-", "").lower()
        seen = {}
        watcher.username_pw_set("coffee", "s3cret")
        watcher.tls_set(ca_certs=str(cert))
        watcher.on_message = lambda c, u, m: seen.__setitem__(m.topic, m.payload.decode())
        watcher.connect("localhost", port)
        watcher.subscribe(f"coffee-tracker/{node}/#")
        watcher.loop_start()
        wait_until(lambda: seen.get(f"coffee-tracker/{node}/today") == "120", what="the states over TLS")
        assert s.request({"op": "stats"})["mqtt"]["connected"] is True
        wait_until(lambda: bad.request({"op": "stats"})["mqtt"]["problem"] not in (None, "connecting"),
                   what="the wrong password refused")
        refused = bad.request({"op": "stats"})["mqtt"]
        assert refused["connected"] is False and "not authori" in refused["problem"].lower(), refused
        assert bad.request({"op": "add", "drinks": [drink()]})["ok"]  # the service goes on
    finally:
        watcher.loop_stop()
        for service in started:
            service.stop()
        broker.terminate()
        broker.wait(10)
