#!/usr/bin/env python3
"""Publishes drinks on the bus without losing any silently.

A PUB socket drops what it sends until its connection is up (ZeroMQ's slow
joiner), and the bus has no replies. So this program subscribes to the
update feed first, then sends each drink again (harmless: the same UUID is
stored once) until the feed shows it stored, and exits 1 naming any drink
it could not confirm.

    python3 examples/publish.py --count 5
"""
import argparse
import datetime
import json
import time
import uuid

import zmq

from common import endpoints


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="data", help="the service's data folder (default: data)")
    parser.add_argument("--count", type=int, default=5, help="how many drinks (default 5)")
    parser.add_argument("--timeout", type=float, default=10, help="seconds to confirm them all (default 10)")
    args = parser.parse_args()
    found = endpoints(args.data)
    context = zmq.Context.instance()
    feed = context.socket(zmq.SUB)
    feed.setsockopt(zmq.SUBSCRIBE, b"changes")
    feed.setsockopt(zmq.LINGER, 0)
    feed.connect(found["updates"])
    bus = context.socket(zmq.PUB)
    bus.setsockopt(zmq.SNDHWM, 0)
    bus.setsockopt(zmq.LINGER, 2000)
    bus.connect(found["ingest"])

    now = datetime.datetime.now(datetime.timezone.utc)
    pending = {}
    for i in range(args.count):
        d = {"uuid": str(uuid.uuid4()).upper(), "type": "singleEspresso",
             "date": (now - datetime.timedelta(minutes=i)).isoformat(timespec="milliseconds")}
        pending[d["uuid"]] = d
    deadline = time.time() + args.timeout
    next_send = 0.0
    while pending and time.time() < deadline:
        if time.time() >= next_send:  # (re)send whatever is not confirmed yet
            for d in pending.values():
                bus.send_multipart([b"drink.add", json.dumps(d).encode()])
            next_send = time.time() + 0.25
        if feed.poll(50):
            _, body = feed.recv_multipart()
            for added in json.loads(body)["added"]:
                if pending.pop(added["uuid"], None):
                    print(f"confirmed {added['uuid']} ({added['mgCaffeine']} mg)")
    bus.close()
    feed.close()
    if pending:
        raise SystemExit(f"not confirmed within {args.timeout} s: {', '.join(pending)}")
    print(f"all {args.count} drinks stored")


if __name__ == "__main__":
    main()
