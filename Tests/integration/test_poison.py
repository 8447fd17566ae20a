"""Poison files: no file in the inbox can take the service down, or keep it
down (docs/protocol.md §5). Every file ends in processed/ or failed/ with its reason."""
import json
import os
import plistlib
import struct
import subprocess
import time

from conftest import BINARY, Service, drink
from test_inbox import drop, failed_error, inbox, processed, uuids, wait_until


def deep_xml_plist(depth):
    return (b'<?xml version="1.0" encoding="UTF-8"?>\n'
            b'<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
            b'<plist version="1.0">\n' + b"<array>" * depth + b"</array>" * depth + b"\n</plist>\n")


def binary_plist(objects):
    """A bplist00 of `objects`: ("array", [refs]) or ("int", n); object 0 is the top."""
    out = bytearray(b"bplist00")
    offsets = []
    for kind, value in objects:
        offsets.append(len(out))
        if kind == "int":
            out += bytes([0x10, value])
        elif len(value) < 15:
            out += bytes([0xA0 | len(value)]) + b"".join(struct.pack(">I", r) for r in value)
        else:
            out += bytes([0xAF, 0x12]) + struct.pack(">I", len(value)) + b"".join(struct.pack(">I", r) for r in value)
    table = len(out)
    out += b"".join(struct.pack(">I", o) for o in offsets)
    out += bytes([0, 0, 0, 0, 0, 0, 4, 4]) + struct.pack(">QQQ", len(objects), 0, table)
    return bytes(out)


def alive(service):
    assert service.process.poll() is None, "the service died: " + service.log_path.read_text()[-2000:]
    assert service.request({"op": "ping"})["ok"]


def test_deep_and_lying_property_lists_are_refused_while_the_service_answers(service):
    # 20,000 levels killed the service with SIGSEGV before the check.
    drop(service, "deep.plist", deep_xml_plist(20_000))
    assert "deeper than 128 levels" in failed_error(service, "deep.plist")["error"]
    alive(service)
    deep_binary = binary_plist([("array", [i + 1]) for i in range(100_000)] + [("int", 1)])
    drop(service, "deep-binary.plist", deep_binary)
    assert "deeper than 128 levels" in failed_error(service, "deep-binary.plist")["error"]
    alive(service)
    # An array that claims 2^31 references in a file of a few dozen bytes.
    lying = bytearray(binary_plist([("array", [1] * 15), ("int", 1)]))
    lying[10:14] = struct.pack(">I", 2 ** 31)
    drop(service, "lying.plist", bytes(lying))
    assert "more than the file holds" in failed_error(service, "lying.plist")["error"]
    # A cycle: an array that holds itself.
    drop(service, "cycle.plist", binary_plist([("array", [0])]))
    assert "contains itself" in failed_error(service, "cycle.plist")["error"]
    drop(service, "openstep.plist", b"({uuid = x;})")
    assert "expected XML" in failed_error(service, "openstep.plist")["error"]
    alive(service)
    # A real file still imports after all of them.
    good = drink()
    drop(service, "good.plist", plistlib.dumps([dict(good, date=__import__("datetime").datetime.utcnow())]))
    wait_until(lambda: processed(service, "good.plist"))
    assert good["uuid"] in uuids(service)


def test_import_command_refuses_a_deep_property_list_by_name(service, tmp_path):
    path = tmp_path / "deep.plist"
    path.write_bytes(deep_xml_plist(50_000))
    result = service.run_cli("import", str(path))
    assert result.returncode == 1, result
    assert "deeper than 128 levels" in result.stderr


def run_until_exit(s, timeout=30):
    """Starts the service's process, which the hook kills; returns its exit status."""
    log = open(s.log_path, "ab")
    p = subprocess.Popen([BINARY, "serve", "--config", str(s.config_path)], stdout=log, stderr=log,
                         stdin=subprocess.DEVNULL, env={**os.environ, **s.env})
    try:
        return p.wait(timeout=timeout)
    finally:
        log.close()


def hooked(folder):
    s = Service(folder)
    s.env = {"COFFEE_TRACKER_TEST_HOOKS": "1", "COFFEE_TRACKER_TEST_DIE_IMPORTING": "poison.json"}
    (s.folder / "inbox").mkdir(parents=True, exist_ok=True)
    return s


def test_a_file_that_stops_the_service_twice_is_moved_aside_and_the_service_stays_up(folder):
    s = hooked(folder)
    victim = drink()
    (s.folder / "inbox" / "poison.json").write_text(json.dumps([victim]))
    assert run_until_exit(s) == -9  # dies importing it
    assert run_until_exit(s) == -9  # the restart tries once more, and dies again
    assert (s.folder / "inbox" / "poison.json").exists()
    s.start()  # the hook is still armed: only the breaker keeps this start alive
    try:
        err = failed_error(s, "poison.json")
        assert "stopped twice while importing this file" in err["error"]
        assert not (s.folder / "inbox" / "poison.json").exists()
        assert victim["uuid"] not in uuids(s)
        alive(s)
        log = s.log_path.read_text()
        assert "error inbox: the service stopped twice while importing an inbox file" in log
        # Other files still import.
        other = drink()
        drop(s, "other.json", json.dumps([other]))
        wait_until(lambda: processed(s, "other.json"))
        assert other["uuid"] in uuids(s)
    finally:
        s.stop()


def test_one_death_only_retries_the_file(folder):
    s = hooked(folder)
    victim = drink()
    (s.folder / "inbox" / "poison.json").write_text(json.dumps([victim]))
    assert run_until_exit(s) == -9
    s.env = None  # as after a kill -9 or a power cut: nothing wrong with the file
    s.start()
    try:
        wait_until(lambda: processed(s, "poison.json"))
        assert victim["uuid"] in uuids(s)
        assert not (s.folder / "inbox" / "failed" / "poison.json").exists()
        assert "trying it once more" in s.log_path.read_text()
    finally:
        s.stop()


def test_a_name_that_is_not_utf8_is_refused_with_an_error_file(service):
    name = b"caf\xe9 100%.json"
    tmp = bytes(service.folder) + b"/.writing"
    with open(tmp, "wb") as f:
        f.write(json.dumps([drink()]).encode())
    os.rename(tmp, bytes(inbox(service)) + b"/" + name)
    err = failed_error(service, "caf%E9 100%25.json")
    assert "not valid UTF-8" in err["error"] and err["file"] == "caf%E9 100%25.json"
    assert not os.path.exists(bytes(inbox(service)) + b"/" + name)
    alive(service)


def drop_long(service, name, content):
    """`drop` for a name with no room for drop's temporary prefix."""
    tmp = service.folder / ".writing"
    tmp.write_bytes(content.encode())
    os.rename(tmp, inbox(service) / name)


def test_names_too_long_for_an_error_file_still_get_one(service):
    bad = "b" * 250 + ".json"  # 255 bytes: the most a name may have
    drop_long(service, bad, "not json")
    failed = inbox(service) / "failed"
    wait_until(lambda: any(p.name.endswith(".error.json") for p in failed.iterdir()), what="the error file")
    [error_file] = [p for p in failed.iterdir() if p.name.endswith(".error.json")]
    err = json.loads(error_file.read_text())
    assert err["file"] == bad and "movedAs" in err
    assert (failed / err["movedAs"]).exists() and error_file.name == err["movedAs"] + ".error.json"
    assert len(error_file.name.encode()) <= 255 and err["movedAs"].endswith(".json")
    # A long name in several-byte characters is cut on a character boundary.
    good = drink()
    long_good = "é" * 125 + ".json"  # 255 bytes
    drop_long(service, long_good, json.dumps([good]))
    processed_folder = inbox(service) / "processed"
    wait_until(lambda: any(p.name.startswith("é" * 10) for p in processed_folder.iterdir()), what="the move")
    assert good["uuid"] in uuids(service)
    assert not (inbox(service) / long_good).exists()
    alive(service)
