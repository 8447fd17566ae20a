#!/usr/bin/env python3
"""`make powercut CUTS=N`: power cuts under mixed load, N times.

The service runs with its data directory and inbox on a file system that
loses whatever was not synced (lazyfs.py, beside this file), under bus
events, query `add` and `delete` requests, inbox files and bus messages it
must reject. Every acknowledgement is recorded: replies (sent after the
commit), each change of every `changes` message seen (with its anchor),
the `rejected` count in `stats` (counted once the dead letter is synced),
and each inbox file dropped (synced, and the inbox after the rename). At a
random moment the file system is cut and the service killed; what was
synced is all that is left. Then, on what survived:

- `endpoints.json` is absent or whole, every line of the dead-letter file is
  whole and there are at least as many as were acknowledged, and the model
  cache is whole or, torn, rebuilt from the store at the next start;
- the service starts again on it, every acknowledged change is there with
  its anchor (or a later one, for a UUID changed again), every deletion
  acknowledged is a tombstone, the anchor never went back, and the model's
  anchor is the store's;
- every inbox file dropped is in exactly one of the inbox, processed/ and
  failed/, and one in processed/ has its drinks stored.

Progress goes to stderr; a failure stops the run with the cut and what
broke. Needs /dev/fuse and fusermount3 (Debian's fuse3) and mfusepy.
Loopback and ipc:// only; every round is bounded in time."""
import argparse
import json
import os
import plistlib
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import zmq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "soak"))
from soak import Soak, drink  # noqa: E402


class PowerCut(Soak):
    def __init__(self, binary, folder):
        folder = Path(folder)
        self.disk, self.mount = folder / "disk", folder / "mnt"
        self.disk.mkdir()
        self.mount.mkdir()
        super().__init__(binary, folder, data=self.mount / "data", inbox=self.mount / "inbox", sync_drops=True)
        self.fs = None
        self.changed = {}  # uuid -> the highest anchor a `changes` message gave it
        self.deleted = {}  # uuid -> the anchor of the `delete` reply that made it a tombstone
        # Dead letters acknowledged: those kept before this round, and the
        # highest `rejected` that `stats` gave in it (the counter starts at 0 with each start).
        self.letters_before = 0
        self.rejected = 0
        self.torn_caches = 0
        self.stats.update({"deletes": 0, "bad": 0, "messages": 0})

    def mount_fs(self):
        log = open(self.folder / "lazyfs.log", "ab")
        self.fs = subprocess.Popen([sys.executable, str(HERE / "lazyfs.py"), str(self.disk), str(self.mount)],
                                   stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.time() + 20
        while not os.path.ismount(self.mount):
            if self.fs.poll() is not None or time.time() > deadline:
                raise SystemExit("lazyfs did not mount: " + (self.folder / "lazyfs.log").read_text()[-2000:])
            time.sleep(0.02)
        self.inbox.mkdir(parents=True, exist_ok=True)

    def unmount_fs(self):
        subprocess.run(["fusermount3", "-u", str(self.mount)], check=True, timeout=30)
        self.fs.wait(timeout=60)
        if self.fs.returncode != 0:
            raise SystemExit("lazyfs failed: " + (self.folder / "lazyfs.log").read_text()[-2000:])

    def stop_abruptly(self):
        """The power cut: from here the file system keeps only what was synced."""
        try:
            os.stat(self.mount / ".powercut")
        except FileNotFoundError:
            pass
        super().stop_abruptly()

    def load(self, seconds):
        # One round in three is bus events alone at a low rate, each committed
        # by the ingest thread while the store is idle (the leader path), so
        # that a cut can come after such a commit with none after it: a later
        # commit's fsync of the WAL would make an unsynced one durable too.
        self.rejected = 0
        self.bus_only = random.random() < 1 / 3
        self.bus_interval = 0.05 if self.bus_only else 0.0005
        super().load(seconds)

    def more_load(self, stop):
        def deletes():
            while not stop.is_set():
                if not self.acknowledged or self.bus_only:
                    time.sleep(0.01)
                    continue
                victim = random.choice(sorted(self.acknowledged - set(self.deleted))[:200] or [None])
                if victim is None:
                    continue
                try:
                    reply = self.request({"op": "delete", "deletions": [victim]}, timeout_ms=500)
                except (zmq.Again, zmq.ZMQError):
                    continue
                if reply.get("ok"):
                    self.deleted[victim] = reply["anchor"]
                    self.stats["deletes"] += 1
                time.sleep(0.02)

        def bad_messages():
            pub = self.context.socket(zmq.PUB)
            pub.setsockopt(zmq.LINGER, 0)
            pub.connect(f"ipc://{self.folder}/in")
            while not stop.is_set():
                pub.send_multipart([b"drink.add", json.dumps({"uuid": "not-a-uuid", "mgCaffeine": -1}).encode()])
                self.stats["bad"] += 1
                time.sleep(0.05)
            pub.close()

        def rejected_count():
            while not stop.is_set():
                try:
                    reply = self.request({"op": "stats"}, timeout_ms=500)
                    self.rejected = max(self.rejected, reply.get("rejected", 0))
                except (zmq.Again, zmq.ZMQError):
                    pass
                time.sleep(0.05)

        def subscriber():
            sub = self.context.socket(zmq.SUB)
            sub.setsockopt(zmq.LINGER, 0)
            sub.setsockopt(zmq.RCVTIMEO, 100)
            sub.setsockopt(zmq.SUBSCRIBE, b"changes")
            sub.connect(f"ipc://{self.folder}/up")
            while not stop.is_set():
                try:
                    _, body = sub.recv_multipart()
                except zmq.Again:
                    continue
                message = json.loads(body)
                self.stats["messages"] += 1
                for change in message["added"] + message["deleted"]:
                    self.changed[change["uuid"]] = max(self.changed.get(change["uuid"], 0), change["anchor"])
            sub.close()

        return (deletes, bad_messages, rejected_count, subscriber)

    def start_afresh(self):
        """A new store and inbox (a new epoch): what was acknowledged has been checked."""
        self.stop_cleanly()
        self.unmount_fs()
        shutil.rmtree(self.disk)
        self.disk.mkdir()
        self.acknowledged, self.files, self.changed, self.deleted = set(), {}, {}, {}
        self.max_anchor = self.letters_before = 0
        self.epochs = getattr(self, "epochs", 1) + 1
        self.mount_fs()
        self.start()

    def check_what_survived(self, cut):
        """On the disk as the cut left it, before anything starts on it."""
        data = self.disk / "data"
        endpoints = data / "endpoints.json"
        if endpoints.exists():
            try:
                json.loads(endpoints.read_bytes())
            except ValueError:
                raise SystemExit(f"cut {cut}: endpoints.json is torn: {endpoints.read_bytes()[:200]!r}")
        letters = data / "rejected.jsonl"
        lines = letters.read_bytes().split(b"\n") if letters.exists() else [b""]
        if lines[-1] != b"":
            raise SystemExit(f"cut {cut}: the dead-letter file ends inside a line: {lines[-1][:200]!r}")
        for line in lines[:-1]:
            try:
                json.loads(line)
            except ValueError:
                raise SystemExit(f"cut {cut}: a dead letter is torn: {line[:200]!r}")
        kept, acknowledged = len(lines) - 1, self.letters_before + self.rejected
        if kept < acknowledged:
            raise SystemExit(f"cut {cut}: {acknowledged} rejections acknowledged, {kept} dead letters kept")
        self.letters_before = kept
        self.stats["rejections"] = self.stats.get("rejections", 0) + self.rejected
        # Exactly one place for each file dropped, as the cut left them (the
        # running service's moves cannot race this look).
        for name in self.files:
            places = self.places(self.disk / "inbox", name)
            if len(places) != 1:
                raise SystemExit(f"cut {cut}: inbox file {name} is in {', '.join(places) or 'nowhere'},"
                                 " not in exactly one place")
        cache = data / "CoffeeTracker.plist"
        if cache.exists():
            try:
                plistlib.loads(cache.read_bytes())
            except Exception:  # noqa: BLE001 - any way it is torn
                self.torn_caches += 1  # the start must find it torn and rebuild (checked with the model's anchor)

    def check(self, cut):
        processed = self.processed_files()
        records = {}  # uuid -> (anchor, deleted)
        anchor = 0
        while True:
            reply = self.request({"op": "changes", "anchor": anchor, "limit": 10000}, timeout_ms=10000)
            assert reply["ok"], reply
            for d in reply["added"]:
                records[d["uuid"]] = (d["anchor"], False)
            for t in reply["deleted"]:
                records[t["uuid"]] = (t["anchor"], True)
            anchor = reply["anchor"]
            if not reply["hasMore"]:
                break
        lost = sorted(self.acknowledged - set(records))
        if lost:
            raise SystemExit(f"cut {cut}: {len(lost)} acknowledged drinks lost, e.g. {lost[:3]}")
        for u, seen in self.changed.items():
            if u not in records or records[u][0] < seen:
                raise SystemExit(f"cut {cut}: a change announced at anchor {seen} ({u}) is not stored: {records.get(u)}")
        for u, at in self.deleted.items():
            if not records[u][1]:
                raise SystemExit(f"cut {cut}: the deletion of {u}, acknowledged at anchor {at}, is lost")
        acknowledged_anchor = max([self.max_anchor, *self.deleted.values(), *self.changed.values()] or [0])
        if anchor < acknowledged_anchor:
            raise SystemExit(f"cut {cut}: the anchor went back from {acknowledged_anchor} to {anchor}")
        self.max_anchor = anchor
        # The model follows the store (inbox files may still be importing: the anchor moves on meanwhile).
        model = self.request({"op": "model"}, timeout_ms=10000).get("anchor")
        after = self.request({"op": "ping"})["anchor"]
        if model is None or not anchor <= model <= after:
            raise SystemExit(f"cut {cut}: the model's anchor {model} is not the store's ({anchor}..{after})")
        self.check_files(cut, processed, set(records))
        return anchor


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=".build/release/coffee-tracker")
    parser.add_argument("--cuts", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    random.seed(seed)
    with tempfile.TemporaryDirectory(prefix="ct-powercut-") as folder:
        run = PowerCut(os.path.abspath(args.binary), folder)
        try:
            cuts(run, args.cuts, seed)
        finally:
            if run.process and run.process.poll() is None:
                run.process.kill()
                run.process.wait(timeout=30)
            if run.fs and run.fs.poll() is None:
                subprocess.run(["fusermount3", "-u", "-z", str(run.mount)], timeout=30)
                run.fs.wait(timeout=60)


def cuts(run, count, seed, epoch=100):
    """`count` cuts; every `epoch` of them on a new store, so that a check,
    which reads the whole store, costs the same at cut 1,000 as at cut 1."""
    started = time.time()
    run.mount_fs()
    for n in range(1, count + 1):
        run.start()
        anchor = run.check(n - 1)
        if n > 1 and (n - 1) % epoch == 0:
            run.start_afresh()
            anchor = run.check(n - 1)
        run.load(random.uniform(0.1, 1.5))
        run.unmount_fs()
        run.check_what_survived(n)
        run.mount_fs()
        if n % 10 == 0 or n == count:
            print(f"powercut: cut {n}/{count}, anchor {anchor}, {len(run.acknowledged)} acknowledged drinks,"
                  f" {len(run.deleted)} deletions, {len(run.changed)} announced UUIDs, {run.letters_before} dead letters,"
                  f" {run.stats['files']} files", file=sys.stderr, flush=True)
    run.start()
    anchor = run.check(count)
    run.stop_cleanly()
    run.unmount_fs()
    print(f"powercut: {count} power cuts in {time.time() - started:.0f} s (seed {seed}), "
          f"{getattr(run, 'epochs', 1)} stores of up to {epoch} cuts each: "
          f"{run.stats['adds']} acknowledged adds ({run.stats['acked_drinks']} drinks), {run.stats['deletes']} "
          f"acknowledged deletions, {run.stats['messages']} changes messages ({len(run.changed)} UUIDs), "
          f"{run.stats['bus']} bus events, {run.stats.get('rejections', 0)} acknowledged rejections, "
          f"{run.stats['files']} inbox files, "
          f"{run.torn_caches} torn model caches rebuilt; nothing acknowledged lost; final anchor {anchor}")
    print(f"{count} passed, 0 failed")


if __name__ == "__main__":
    main()
