#!/usr/bin/env python3
"""`make soak ROUNDS=N`: SIGKILL the real service during mixed bus, query and
inbox load, round after round, and check after every restart that

- every drink a query `add` acknowledged is in the store (nothing lost),
- the anchor never goes back (never reused),
- every inbox file is accounted for: in the inbox, processed/ or failed/,
  and every file in processed/ has its drinks in the store,
- and, at the end, `changes` from null lists each UUID once.

Bus messages have no acknowledgement, so they are only checked for the last
two rules. Progress goes to stderr; a failure stops the run with the round
and what broke. Loopback and ipc:// only; every round is bounded in time."""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import zmq


def now_iso(offset_s=0.0):
    t = time.time() + offset_s
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def drink():
    return {"uuid": str(uuid.uuid4()).upper(), "mgCaffeine": 64, "date": now_iso(-random.uniform(0, 86400 * 3))}


class Soak:
    """The service under mixed load, stopped at random, and the checks after
    each restart. `data` and `inbox` may lie elsewhere (on the power-cut
    file system of Tests/powercut); the sockets and the configuration stay
    in `folder`."""

    def __init__(self, binary, folder, data=None, inbox=None, sync_drops=False):
        self.binary = binary
        self.folder = Path(folder)
        self.data = Path(data) if data else self.folder / "data"
        self.inbox = Path(inbox) if inbox else self.folder / "inbox"
        # Files are dropped durably (fsynced, and the inbox after the rename), as a power cut needs.
        self.sync_drops = sync_drops
        # The load's shape: seconds between bus events, and whether the bus is all there is.
        self.bus_interval = 0.0005
        self.bus_only = False
        self.config = self.folder / "config.json"
        self.config.write_text(json.dumps({
            "dataDirectory": str(self.data), "inboxDirectory": str(self.inbox),
            "ingest": {"bind": [f"ipc://{self.folder}/in"]}, "updates": {"bind": [f"ipc://{self.folder}/up"]},
            "query": {"bind": [f"ipc://{self.folder}/q"]}, "http": {"bind": "127.0.0.1:0"}, "model": {"timeZone": "UTC"},
            "inbox": {"sweepIntervalS": 1}, "log": {"level": "warning"}}))
        self.context = zmq.Context.instance()
        self.acknowledged = set()
        self.files = {}  # name -> [uuids]
        self.max_anchor = 0
        self.process = None
        self.stats = {"adds": 0, "acked_drinks": 0, "bus": 0, "files": 0, "restart_s": []}

    def request(self, obj, timeout_ms=2000):
        sock = self.context.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, timeout_ms)
        sock.setsockopt(zmq.SNDTIMEO, timeout_ms)
        sock.connect(f"ipc://{self.folder}/q")
        try:
            sock.send(json.dumps(obj).encode())
            return json.loads(sock.recv())
        finally:
            sock.close()

    def start(self):
        log = open(self.folder / "service.log", "ab")
        started = time.time()
        self.process = subprocess.Popen([self.binary, "serve", "--config", str(self.config)],
                                        stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        while True:
            if self.process.poll() is not None:
                raise SystemExit("the service exited: " + (self.folder / "service.log").read_text()[-2000:])
            try:
                self.request({"op": "ping"}, timeout_ms=200)
                break
            except (zmq.Again, zmq.ZMQError):
                if time.time() - started > 30:
                    raise SystemExit("the service did not answer within 30 s")
        self.stats["restart_s"].append(time.time() - started)

    def load(self, seconds):
        stop = threading.Event()

        def adds():
            while not stop.is_set():
                if self.bus_only:
                    time.sleep(0.01)
                    continue
                batch = [drink() for _ in range(random.randint(1, 8))]
                try:
                    reply = self.request({"op": "add", "drinks": batch}, timeout_ms=500)
                except (zmq.Again, zmq.ZMQError):
                    continue  # killed mid-request: not acknowledged
                if reply.get("ok"):
                    self.acknowledged.update(d["uuid"] for d in batch)
                    self.stats["adds"] += 1
                    self.stats["acked_drinks"] += len(batch)

        def bus():
            pub = self.context.socket(zmq.PUB)
            pub.setsockopt(zmq.LINGER, 0)
            pub.setsockopt(zmq.SNDHWM, 0)
            pub.connect(f"ipc://{self.folder}/in")
            while not stop.is_set():
                pub.send_multipart([b"drink.add", json.dumps(drink()).encode()])
                self.stats["bus"] += 1
                time.sleep(self.bus_interval)
            pub.close()

        def files():
            inbox = self.inbox
            while not stop.is_set():
                try:
                    ready = inbox.exists()
                except OSError:
                    ready = False  # the file system was cut
                if ready and not self.bus_only:
                    name = f"soak-{uuid.uuid4().hex[:12]}.json"
                    drinks = [drink() for _ in range(random.randint(1, 50))]
                    try:
                        self.drop(name, json.dumps(drinks).encode())
                    except OSError:
                        continue  # the file system was cut under it: not dropped
                    self.files[name] = [d["uuid"] for d in drinks]
                    self.stats["files"] += 1
                time.sleep(0.05)

        threads = [threading.Thread(target=f, daemon=True) for f in (adds, bus, files) + self.more_load(stop)]
        for t in threads:
            t.start()
        time.sleep(seconds)
        self.stop_abruptly()
        stop.set()
        for t in threads:
            t.join(timeout=10)

    def more_load(self, stop):
        """Load threads a subclass adds (deletions, rejected messages, a subscriber)."""
        return ()

    def stop_abruptly(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop_cleanly(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)

    def drop(self, name, content):
        """Writes beside the inbox, then renames in (docs/protocol.md §5); durably with `sync_drops`."""
        tmp = self.inbox.parent / ("." + name)
        with open(tmp, "wb") as f:
            f.write(content)
            if self.sync_drops:
                f.flush()
                os.fsync(f.fileno())
        os.rename(tmp, self.inbox / name)
        if self.sync_drops:
            fd = os.open(self.inbox, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def changes(self):
        added, deleted, anchor = [], [], None
        while True:
            reply = self.request({"op": "changes", "anchor": anchor, "limit": 10000}, timeout_ms=10000)
            assert reply["ok"], reply
            added += reply["added"]
            deleted += reply["deleted"]
            anchor = reply["anchor"]
            if not reply["hasMore"]:
                return added, anchor

    def check(self, round_number):
        # Which files were in processed/ before the store is read: the service
        # goes on importing meanwhile, and a file moves only after its commit.
        processed = self.processed_files()
        added, anchor = self.changes()
        stored = {d["uuid"] for d in added}
        lost = self.acknowledged - stored
        if lost:
            raise SystemExit(f"round {round_number}: {len(lost)} acknowledged drinks lost, e.g. {sorted(lost)[:3]}")
        if anchor < self.max_anchor:
            raise SystemExit(f"round {round_number}: the anchor went back from {self.max_anchor} to {anchor}")
        self.max_anchor = anchor
        if len(added) != len(stored):
            raise SystemExit(f"round {round_number}: changes from null lists {len(added) - len(stored)} UUIDs twice")
        self.check_files(round_number, processed, stored)
        return anchor

    @staticmethod
    def places(inbox, name):
        """Where a file dropped as `name` is: some of inbox, processed, failed."""
        folders = {"inbox": inbox, "processed": inbox / "processed", "failed": inbox / "failed"}
        return [where for where, folder in folders.items() if (folder / name).exists()]

    def processed_files(self):
        return {name for name in self.files if (self.inbox / "processed" / name).exists()}

    def check_files(self, round_number, processed, stored):
        """Every file dropped is in exactly one of the inbox, processed/ and
        failed/; one in processed/ had its drinks stored (`stored`: UUIDs)."""
        for name, drinks in self.files.items():
            places = self.places(self.inbox, name)
            if len(places) != 1:
                time.sleep(0.5)  # the running service may have been moving it between two looks
                places = self.places(self.inbox, name)
            if len(places) != 1:
                raise SystemExit(f"round {round_number}: inbox file {name} is in {', '.join(places) or 'nowhere'},"
                                 " not in exactly one place")
            if name in processed and not set(drinks) <= stored:
                raise SystemExit(f"round {round_number}: {name} is in processed/ but its drinks are not all stored")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=".build/release/coffee-tracker")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="ct-soak-") as folder:
        soak = Soak(os.path.abspath(args.binary), folder)
        try:
            run(soak, args)
        finally:
            if soak.process and soak.process.poll() is None:
                soak.process.kill()  # a failed check must not leave the service running
                soak.process.wait(timeout=30)


def run(soak, args):
    started = time.time()
    for n in range(1, args.rounds + 1):
        soak.start()
        anchor = soak.check(n)
        soak.load(random.uniform(0.2, 1.0))
        if n % 10 == 0 or n == args.rounds:
            print(f"soak: round {n}/{args.rounds}, anchor {anchor}, {len(soak.acknowledged)} acknowledged drinks,"
                  f" {soak.stats['bus']} bus messages, {soak.stats['files']} files", file=sys.stderr, flush=True)
    soak.start()
    anchor = soak.check(args.rounds + 1)
    soak.stop_cleanly()
    restarts = sorted(soak.stats["restart_s"])
    print(f"soak: {args.rounds} rounds of SIGKILL in {time.time() - started:.0f} s: "
          f"{soak.stats['adds']} acknowledged adds ({soak.stats['acked_drinks']} drinks), {soak.stats['bus']} bus messages, "
          f"{soak.stats['files']} inbox files; 0 acknowledged drinks lost, 0 anchor regressions, 0 files lost, "
          f"each UUID once; final anchor {anchor}; restart to first answer median {restarts[len(restarts) // 2]:.2f} s, "
          f"max {restarts[-1]:.2f} s")
    print(f"{args.rounds} passed, 0 failed")


if __name__ == "__main__":
    main()
