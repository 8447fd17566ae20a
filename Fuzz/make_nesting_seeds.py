#!/usr/bin/env python3
"""Writes the nesting-heavy seeds of `make fuzz` into Fuzz/corpus/ (run from
anywhere; the files are committed, this says how they were made): nesting
at, just past and far past 128 levels for every reader of outside input,
binary property lists that share, loop and lie, and text tricks that hide
close tags from a scanner."""
import struct
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"


def xml_plist(body):
    return (b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" '
            b'"http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n<plist version="1.0">\n' + body + b"\n</plist>\n")


def binary_plist(objects, top=0):
    """objects: ("array", [refs]), ("dict", [(key, value)]), ("int", n), ("ascii", bytes)."""
    out = bytearray(b"bplist00")
    offsets = []
    for kind, value in objects:
        offsets.append(len(out))
        if kind == "int":
            out += bytes([0x10, value])
        elif kind == "ascii":
            out += bytes([0x50 | len(value)]) + value
        else:
            refs = value if kind == "array" else [k for k, _ in value] + [v for _, v in value]
            count = len(value)
            marker = 0xA0 if kind == "array" else 0xD0
            out += bytes([marker | count]) if count < 15 else bytes([marker | 0xF, 0x11]) + struct.pack(">H", count)
            out += b"".join(struct.pack(">H", r) for r in refs)
    table = len(out)
    out += b"".join(struct.pack(">I", o) for o in offsets)
    out += bytes([0, 0, 0, 0, 0, 0, 4, 2]) + struct.pack(">QQQ", len(objects), top, table)
    return bytes(out)


def nested(depth):
    return [("array", [i + 1]) for i in range(depth)] + [("int", 1)]


def write(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


plists = {
    "deep-128.plist": xml_plist(b"<array>" * 128 + b"<true/>" + b"</array>" * 128),
    "deep-129.plist": xml_plist(b"<array>" * 129 + b"</array>" * 129),
    "deep-4000.plist": xml_plist(b"<array>" * 4000 + b"</array>" * 4000),
    "deep-dict.plist": xml_plist(b"<dict><key>k</key>" * 200 + b"<true/>" + b"</dict>" * 200),
    "hidden-closes.plist": xml_plist(b"<array><!-- </array> -->" * 150 + b"<array><?pi </array> ?>" * 10),
    "cdata.plist": xml_plist(b"<array>" + b"<string><![CDATA[</array>]]></string>" * 20 + b"</array>"),
    "quoted-slash.plist": xml_plist(b'<array a="/>">' * 50 + b'<array a=">/">' * 50),
    "bdeep-128.plist": binary_plist(nested(128)),
    "bdeep-129.plist": binary_plist(nested(129)),
    "bdeep-2000.plist": binary_plist(nested(2000)),
    "bshared.plist": binary_plist([("array", [i + 1, i + 1]) for i in range(120)] + [("int", 1)]),
    "bcycle.plist": binary_plist([("array", [1]), ("dict", [(2, 0)]), ("ascii", b"k")]),
    "blying.plist": binary_plist([("array", [1] * 20), ("int", 1)]).replace(b"\xaf\x11\x00\x14", b"\xaf\x11\xff\xff", 1),
}
for name, data in plists.items():
    write("plist", name, data)
    write("plist-check", name, data)

for target in ("json", "inbox-json", "bus"):
    write(target, "deep-128.json", b"[" * 128 + b"]" * 128)
    write(target, "deep-129.json", b"[" * 129 + b"]" * 129)
    write(target, "deep-objects.json", b'{"a":' * 200 + b"1" + b"}" * 200)
    write(target, "deep-unclosed.json", b"[{" * 5000)
write("inbox-json", "deep-drinks.json", b'{"drinks": [' + b"[" * 300 + b"]" * 300 + b"]}")
write("bus", "deep-field.json", b'{"uuid": ' + b"[" * 300 + b"]" * 300 + b', "mgCaffeine": 1}')
write("jsonl", "deep-lines.jsonl", b'{"delete": ' + b"[" * 127 + b"]" * 127 + b"}\n" + b"[" * 129 + b"]" * 129 + b"\n"
      + b'{"a":' * 300 + b"1" + b"}" * 300 + b"\n")
