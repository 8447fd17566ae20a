"""docs/protocol.md §1 (v3): each drink and tombstone in `changes`, messages and
replies alike, carries the anchor of its own change; a page that ends inside
a commit therefore means the same to every reader."""
import json
import uuid

from conftest import drink
from test_bus import next_changes, subscriber
from test_inbox import drop, processed, wait_until


def items(message):
    """(anchor, uuid, kind) of every change in a `changes` message or reply, in anchor order."""
    found = [(x["anchor"], x["uuid"], "added") for x in message["added"]]
    found += [(x["anchor"], x["uuid"], "deleted") for x in message["deleted"]]
    return sorted(found)


def test_each_change_carries_its_own_anchor_in_messages_and_replies(service):
    sub = subscriber(service, topics=(b"changes",))
    a, b = drink(), drink()
    twice = drink()
    again = dict(twice, version=2, mgCaffeine=150)
    # One commit: a, b, twice (v1), then twice again (v2): four changes, four
    # anchors, and the message carries twice once, at its second anchor.
    assert service.request({"op": "add", "drinks": [a, b, twice, again]})["anchor"] == 4
    assert service.request({"op": "delete", "deletions": [a["uuid"], str(uuid.uuid4())]})["anchor"] == 6
    # A file of a thousand drinks: a commit of its own, paged on the bus.
    lines = [drink() for _ in range(1000)]
    drop(service, "many.jsonl", "\n".join(json.dumps(d) for d in lines))
    wait_until(lambda: processed(service, "many.jsonl"), what="the file imported")

    messages = []
    while not messages or messages[-1]["anchor"] < 1006:
        messages.append(next_changes(sub))
    previous = 0
    seen = {}
    for m in messages:
        assert m["previousAnchor"] == previous, "the chain broke"
        anchors = [anchor for anchor, _, _ in items(m)]
        assert len(set(anchors)) == len(anchors), f"an anchor given twice in {m}"
        assert all(m["previousAnchor"] < x <= m["anchor"] for x in anchors), m
        assert anchors[-1] == m["anchor"], "a commit's last change has the commit's anchor"
        for anchor, u, kind in items(m):
            seen[u] = (anchor, kind)
        previous = m["anchor"]
    first = messages[0]
    assert {x["uuid"]: x["anchor"] for x in first["added"]} == {a["uuid"]: 1, b["uuid"]: 2, twice["uuid"]: 4}
    assert [x["mgCaffeine"] for x in first["added"] if x["uuid"] == twice["uuid"]] == [150]

    # Replies: each change at the anchor its last message gave it, whether
    # read whole or in pages of 7 that end inside commits.
    for limit in (5000, 7):
        anchor, replied = 0, {}
        while True:
            reply = service.request({"op": "changes", "anchor": anchor, "limit": limit})
            assert reply["ok"], reply
            page = items(reply)
            if reply["hasMore"]:
                assert page[-1][0] == reply["anchor"], "a page ends at its last change's anchor"
            for x, u, kind in page:
                assert x > anchor
                replied[u] = (x, kind)
            anchor = reply["anchor"]
            if not reply["hasMore"]:
                break
        assert replied == seen
        assert anchor == 1006
    sub.close()
