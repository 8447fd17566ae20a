#!/usr/bin/env python3
"""Failover, round after round (docs/protocol.md §11, §13): a primary under
steady writes (bus messages, and `add`s whose replies count as acknowledged),
a standby following it, a Python follower on the standby. Each round:

1. kill -9 the primary;
2. promote the standby (stopped, and started without `follow`): its epoch
   goes up; the promotion's time is that restart's, until it answers;
3. the follower ends equal to the promoted store;
4. acknowledged `add`s the promoted store lacks are counted: an
   asynchronous standby loses at most what its lag showed at the kill
   (the primary's last acknowledged anchor minus the standby's anchor),
   and nothing at or below its own anchor;
5. (first round) the old primary restarts as a primary, its history
   diverged, and the promoted one, asked to follow it, refuses it: an older
   epoch of its own store;
6. the old primary restarts as the promoted one's standby: a later epoch of
   its store, so it drops its diverged history and copies it from 0.

The two then swap roles for the next round. Prints one line per round and
the totals, and exits non-zero on the first broken promise.

    python3 Tests/failover/failover.py --rounds 100 [--binary .build/debug/coffee-tracker] [--seconds 0.5]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python"))
from coffee_tracker import Client  # noqa: E402


def now_iso():
    return (datetime.now(timezone.utc) - timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_drink(mg):
    return {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": mg, "date": now_iso()}


class Node:
    """One service, its endpoints on fixed ipc paths so that a standby's `follow` stays valid."""

    def __init__(self, binary, folder):
        self.binary = binary
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = None
        self.log = None

    @property
    def query(self):
        return f"ipc://{self.folder}/query.sock"

    @property
    def updates(self):
        return f"ipc://{self.folder}/updates.sock"

    @property
    def ingest(self):
        return f"ipc://{self.folder}/ingest.sock"

    def configure(self, follow=None):
        config = {
            "dataDirectory": "data", "inboxDirectory": "inbox",
            "ingest": {"bind": [self.ingest]}, "updates": {"bind": [self.updates]}, "query": {"bind": [self.query]},
            "http": {"bind": None}, "model": {"timeZone": "UTC"},
            "publish": {"heartbeatIntervalS": 0.2}, "log": {"level": "notice"},
        }
        if follow is not None:
            config["follow"] = {"query": follow.query, "updates": follow.updates}
        (self.folder / "config.json").write_text(json.dumps(config))

    def start(self, follow=None, timeout=30):
        self.configure(follow)
        endpoints = self.folder / "data" / "endpoints.json"
        if endpoints.exists():
            endpoints.unlink()
        self.log = open(self.folder / "service.log", "ab")
        self.process = subprocess.Popen([self.binary, "serve", "--config", str(self.folder / "config.json")],
                                        stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"{self.folder} exited: " + (self.folder / "service.log").read_text()[-2000:])
            try:
                if json.loads(endpoints.read_text()).get("pid") == self.process.pid:
                    return self
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        raise SystemExit(f"{self.folder} did not start")

    def client(self, timeout=10):
        return Client(query=self.query, updates=self.updates, timeout=timeout)

    def ping(self):
        return self.client().ping()

    def identity(self):
        reply = self.client().call({"op": "ping"})
        return reply["store"], reply["epoch"]

    def live(self):
        c = self.client(timeout=30)
        uuids, anchor, reply = set(), None, c.changes(anchor=None, limit=10_000)
        while True:
            uuids |= {d["uuid"] for d in reply["added"]}
            if not reply.get("hasMore"):
                return uuids
            reply = c.changes(anchor=reply["anchor"], limit=10_000)

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self.log.close()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        if self.log:
            self.log.close()


class Writers:
    """Steady writes on a primary: bus messages, and `add`s whose replies are acknowledgements."""

    def __init__(self, node):
        self.node = node
        self.stop = threading.Event()
        self.acked = {}  # uuid -> anchor of its acknowledged commit
        self.threads = [threading.Thread(target=self._bus, daemon=True), threading.Thread(target=self._adds, daemon=True)]
        for t in self.threads:
            t.start()

    def _bus(self):
        pub = zmq.Context.instance().socket(zmq.PUB)
        pub.setsockopt(zmq.LINGER, 0)
        pub.connect(self.node.ingest)
        while not self.stop.is_set():
            pub.send_multipart([b"drink.add", json.dumps(new_drink(30)).encode()])
            time.sleep(0.004)
        pub.close(0)

    def _adds(self):
        client = self.node.client(timeout=2)
        while not self.stop.is_set():
            d = new_drink(40)
            try:
                reply = client.add([d])
            except Exception:  # the primary died: whatever was not answered was not acknowledged
                return
            self.acked[d["uuid"]] = reply["anchor"]

    def halt(self):
        self.stop.set()

    def join(self):
        for t in self.threads:
            t.join(timeout=10)


def follow_until_equal(follower, want, timeout=60):
    deadline = time.time() + timeout
    for state in follower:
        if set(state.drinks) == want:
            return state
        if time.time() > deadline:
            raise AssertionError(f"the follower holds {len(state.drinks)} drinks, the promoted store {len(want)}")
    raise AssertionError("the follower stopped")


def settle(node, timeout=10):
    """The node's anchor once it stops moving (a standby whose primary died)."""
    last, since = node.ping(), time.time()
    deadline = time.time() + timeout
    while time.time() < deadline:
        time.sleep(0.1)
        anchor = node.ping()
        if anchor != last:
            last, since = anchor, time.time()
        elif time.time() - since > 0.4:
            break
    return last


def in_step(a, b, timeout=60):
    """Waits until `b` holds what `a` holds: the same identity and anchor
    first (cheap), then the same live drinks."""
    deadline = time.time() + timeout
    while (a.identity(), a.ping()) != (b.identity(), b.ping()) or a.live() != b.live():
        if time.time() > deadline:
            raise AssertionError(f"{b.folder} not in step with {a.folder}: anchors {a.ping()} and {b.ping()}")
        time.sleep(0.1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--binary", default=str(ROOT / ".build/debug/coffee-tracker"))
    parser.add_argument("--seconds", type=float, default=0.5, help="steady writes before each kill")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ct-failover-"))
    primary, standby = Node(args.binary, folder / "a"), Node(args.binary, folder / "b")
    figures = []
    try:
        primary.start()
        standby.start(follow=primary)
        for round_ in range(1, args.rounds + 1):
            in_step(primary, standby)
            store, epoch = primary.identity()
            follower = standby.client(timeout=30).follow(timeout=60)
            next(follower)
            writers = Writers(primary)
            time.sleep(args.seconds)

            primary.kill()
            writers.halt()
            held = settle(standby)
            writers.join()  # an `add` left unanswered by the kill times out: not acknowledged
            acked_anchor = max(writers.acked.values(), default=0)
            lag = max(0, acked_anchor - held)

            began = time.monotonic()
            standby.stop()
            standby.start()  # promoted: no follow
            promoted = standby.identity()
            promotion_s = time.monotonic() - began
            assert promoted == (store, epoch + 1), f"promotion gave {promoted}, want {(store, epoch + 1)}"
            have = standby.live()
            lost = [u for u in writers.acked if u not in have]
            assert all(writers.acked[u] > held for u in lost), "lost an acknowledged change at or below the standby's anchor"
            assert len(lost) <= lag, f"lost {len(lost)} acknowledged changes, the lag at the kill was {lag}"
            follow_until_equal(follower, have)
            follower.close()

            if round_ == 1:
                primary.start()  # the old primary, by mistake, as a primary: epoch `epoch`, a diverged history
                assert primary.identity() == (store, epoch)
                standby.stop()
                standby.start(follow=primary)
                log = standby.folder / "service.log"
                deadline = time.time() + 30
                while "older than this standby's epoch" not in log.read_text():
                    assert time.time() < deadline, "the promoted store did not refuse the old primary"
                    time.sleep(0.1)
                assert standby.live() == have  # it serves what it holds
                standby.stop()
                standby.start()  # a primary again (one more epoch: it had started as a standby)
                promoted = standby.identity()
                primary.stop()

            primary.start(follow=standby)  # the old primary rejoins: a later epoch of its store
            in_step(standby, primary)
            figures.append({"round": round_, "acknowledged": len(writers.acked), "lag": lag, "lost": len(lost),
                            "promotion_s": round(promotion_s, 3)})
            print(f"failover round {round_}: {len(writers.acked)} acknowledged, lag at the kill {lag}, "
                  f"lost {len(lost)}, promoted in {promotion_s:.2f} s (epoch {promoted[1]})", flush=True)
            primary, standby = standby, primary
    finally:
        for node in (primary, standby):
            try:
                node.stop()
            except Exception:
                pass
    total = {"rounds": len(figures), "acknowledged": sum(f["acknowledged"] for f in figures),
             "lost": sum(f["lost"] for f in figures), "lag_max": max((f["lag"] for f in figures), default=0),
             "promotion_s_median": statistics.median(f["promotion_s"] for f in figures) if figures else None,
             "promotion_s_max": max((f["promotion_s"] for f in figures), default=None)}
    print(f"failover: {total['rounds']} rounds, {total['acknowledged']} acknowledged changes, {total['lost']} lost "
          f"in the window (the lag at a kill was at most {total['lag_max']}), promotion median "
          f"{total['promotion_s_median']} s, max {total['promotion_s_max']} s")
    if args.out:
        Path(args.out).write_text(json.dumps({"total": total, "rounds": figures}, indent=2))
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
