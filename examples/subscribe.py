#!/usr/bin/env python3
"""Prints every change and the model as the service publishes them: what a
complication or a widget draws from.

    python3 examples/subscribe.py            # until Ctrl-C
    python3 examples/subscribe.py --count 3  # three messages, then exit
"""
import argparse
import json

import zmq

from common import endpoints


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="data", help="the service's data folder (default: data)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many changes and models (default: never)")
    parser.add_argument("--timeout", type=float, default=0, help="give up after this many seconds of silence (default: never)")
    args = parser.parse_args()
    socket = zmq.Context.instance().socket(zmq.SUB)
    for topic in (b"changes", b"model"):
        socket.setsockopt(zmq.SUBSCRIBE, topic)
    if args.timeout:
        socket.setsockopt(zmq.RCVTIMEO, int(args.timeout * 1000))
    socket.connect(endpoints(args.data)["updates"])
    print("subscribed; waiting for changes and the model", flush=True)
    seen = 0
    while not args.count or seen < args.count:
        try:
            topic, body = socket.recv_multipart()
        except zmq.Again:
            raise SystemExit(f"nothing for {args.timeout} s")
        message = json.loads(body)
        if topic == b"changes":
            for d in message["added"]:
                print(f"+ {d['uuid']} {d['mgCaffeine']} mg {d.get('type', '')} at {d['date']} (anchor {message['anchor']})")
            for t in message["deleted"]:
                print(f"- {t['uuid']} (anchor {message['anchor']})")
        else:
            print(f"model: {message['mgCaffeine']:.0f} mg now ({message['level']}), "
                  f"{message['cupsToday']:.1f} cups today (anchor {message['anchor']})")
        print(end="", flush=True)
        seen += 1


if __name__ == "__main__":
    main()
