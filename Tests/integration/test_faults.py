"""Faults (docs/protocol.md §1, §2, §5): a full disk loses nothing and the
service recovers by itself; every regular file that appears in the inbox is
found; a dead letter keeps every frame; a key given twice is refused."""
import base64
import json
import os
import time
from pathlib import Path

import pytest
import zmq

from conftest import Service, drink
from test_bus import publisher
from test_inbox import drop, failed_error, inbox, processed, uuids, wait_until


def test_a_hard_link_into_the_inbox_is_imported_while_running(folder):
    s = Service(folder, {"inbox": {"sweepIntervalS": 0.5}}).start()
    try:
        d = drink()
        outside = Path(folder) / "export.json"
        outside.write_text(json.dumps([d]))
        time.sleep(1.1)  # older than the settle time, as an export made earlier is
        os.link(outside, inbox(s) / "hard.json")  # raises no close-write or moved-to event
        wait_until(lambda: processed(s, "hard.json"), timeout=10, what="the hard link to be imported")
        assert d["uuid"] in uuids(s)
    finally:
        s.stop()


def dead_letters(service, count, timeout=10):
    path = service.data / "rejected.jsonl"
    wait_until(lambda: path.exists() and len(path.read_text().splitlines()) >= count, timeout=timeout,
               what=f"{count} dead letters")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_dead_letter_keeps_every_frame_as_it_arrived(service):
    pub, _ = publisher(service)
    pub.send_multipart([b"drink.add", b"a", b"b"])
    [entry] = dead_letters(service, 1)
    assert [base64.b64decode(f) for f in entry["frames"]] == [b"drink.add", b"a", b"b"]
    assert "3 frames" in entry["reason"]
    pub.send_multipart([b"drink.add {\"uuid\": 1}"])
    entry = dead_letters(service, 2)[1]
    assert [base64.b64decode(f) for f in entry["frames"]] == [b"drink.add {\"uuid\": 1}"]
    pub.close()


def test_a_key_given_twice_is_refused_naming_it_everywhere(service):
    reply = service.request(None, raw=b'{"op":"ping","op":"stats"}')
    assert reply["ok"] is False and reply["error"]["code"] == "bad_request"
    assert 'key "op" is given twice' in reply["error"]["message"]

    pub, _ = publisher(service)
    d = drink()
    body = json.dumps(d)[:-1] + ', "mgCaffeine": 5}'
    pub.send_multipart([b"drink.add", body.encode()])
    [entry] = dead_letters(service, 1)
    assert 'key "mgCaffeine" is given twice' in entry["reason"]
    pub.close()

    drop(service, "twice.json", '{"drinks": [], "drinks": []}')
    err = failed_error(service, "twice.json")
    assert 'key "drinks" is given twice' in err["error"]
    assert d["uuid"] not in uuids(service)


class TmpfsService(Service):
    """A service whose data and inbox folders live on a small tmpfs of its
    own, mounted in a private mount namespace (unshare -m), so that its
    writes can fail with ENOSPC without touching the machine. The test
    reaches that tmpfs through /proc/PID/root."""

    def __init__(self, folder, size="16m"):
        volume = Path(folder) / "vol"
        volume.mkdir(parents=True, exist_ok=True)
        super().__init__(folder, {"dataDirectory": "vol/data", "inboxDirectory": "vol/inbox",
                                  "inbox": {"sweepIntervalS": 0.5}})
        self.volume = volume
        self.start_as = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                         f'mount -t tmpfs -o size={size} tmpfs "{volume}" && exec "$0" "$@"']

    def view(self, path):
        """`path` as the running service sees it."""
        if self.process and self.process.poll() is None:
            return Path(f"/proc/{self.process.pid}/root{path}")
        return path

    @property
    def data(self):
        return self.view(self.volume / "data")

    @property
    def inbox(self):
        return self.view(self.volume / "inbox")

    def fill(self):
        """Fills the tmpfs to the last byte; returns the filler's path."""
        filler = self.view(self.volume / "filler")
        with open(filler, "wb") as f:
            chunk = b"\0" * 65536
            try:
                while True:
                    f.write(chunk)
                    f.flush()
            except OSError:
                pass
        for size in (4096, 512, 1):  # the last crumbs
            try:
                with open(filler, "ab") as f:
                    while True:
                        f.write(b"\0" * size)
                        f.flush()
            except OSError:
                pass
        return filler


unshare_works = os.geteuid() == 0 and os.path.exists("/usr/bin/unshare")


@pytest.mark.skipif(not unshare_works, reason="needs root and unshare(1) for a private tmpfs")
def test_a_full_disk_loses_nothing_and_the_service_recovers_by_itself(folder):
    s = TmpfsService(folder).start()
    try:
        pub, _ = publisher(s)
        staged_drink = drink()
        staged = s.view(s.volume / "staged.json")
        staged.write_text(json.dumps([staged_drink]))
        filler = s.fill()

        # Query writes are answered `unavailable` and not stored.
        refused = drink()
        reply = s.request({"op": "add", "drinks": [refused]})
        assert reply["ok"] is False and reply["error"]["code"] == "unavailable", reply
        assert "full" in reply["error"]["message"]
        # So are the JSON API's (docs/protocol.md §12): 503 with Retry-After.
        from test_api import call
        status, headers, reply = call(s, "POST", "/api/v1/drinks", refused)
        assert status == 503 and reply["error"]["code"] == "unavailable" and headers["retry-after"] == "1", reply
        # Bus messages are held or wait in ZeroMQ's queues; a bad one's dead letter is held.
        bus = [drink() for _ in range(300)]
        for d in bus[:150]:
            pub.send_multipart([b"drink.add", json.dumps(d).encode()])
        pub.send_multipart([b"drink.add", b"not json"])
        for d in bus[150:]:
            pub.send_multipart([b"drink.add", json.dumps(d).encode()])
        # An inbox file stays where it is.
        os.rename(staged, s.inbox / "staged.json")
        time.sleep(2)
        stats = s.request({"op": "stats"})
        assert stats["fault"] and "full" in stats["fault"], stats
        assert (s.inbox / "staged.json").exists()
        assert not (s.inbox / "processed" / "staged.json").exists()
        assert not (s.inbox / "failed" / "staged.json").exists()
        again = s.request({"op": "add", "drinks": [refused]})
        assert again["error"]["code"] == "unavailable"

        # Space returns: everything lands without a restart, held batches first.
        filler.unlink()
        wanted = {d["uuid"] for d in bus} | {staged_drink["uuid"]}
        wait_until(lambda: wanted <= uuids(s), timeout=20, what="the held input to be stored")
        wait_until(lambda: (s.inbox / "processed" / "staged.json").exists(), timeout=20, what="the inbox file to move")
        dead = s.data / "rejected.jsonl"
        wait_until(lambda: dead.exists() and base64_in(dead.read_text(), b"not json"), timeout=20,
                   what="the held dead letter")
        stats = s.request({"op": "stats"})
        assert stats["fault"] is None
        assert stats["rejected"] == len(dead.read_text().splitlines()) == 1
        assert refused["uuid"] not in uuids(s)
        assert "the store writes again" in s.log_path.read_text()
        pub.close()
    finally:
        s.stop()


def base64_in(text, raw):
    return base64.b64encode(raw).decode() in text
