#!/usr/bin/env python3
"""Logs one drink through the query endpoint and prints the anchor of its
durable commit: nothing is lost, and the reply says so.

    python3 examples/add_drink.py --type doubleEspresso
    python3 examples/add_drink.py --mg 80
"""
import argparse
import datetime
import json
import uuid

import zmq

from common import endpoints


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="data", help="the service's data folder (default: data)")
    parser.add_argument("--type", help="a drink type, such as doubleEspresso")
    parser.add_argument("--mg", type=float, help="caffeine in mg")
    args = parser.parse_args()
    drink = {"uuid": str(uuid.uuid4()).upper(),
             "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")}
    if args.type:
        drink["type"] = args.type
    if args.mg is not None:
        drink["mgCaffeine"] = args.mg
    if "type" not in drink and "mgCaffeine" not in drink:
        drink["type"] = "smallCoffee"
    socket = zmq.Context.instance().socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.RCVTIMEO, 5000)
    socket.connect(endpoints(args.data)["query"])
    socket.send_json({"op": "add", "drinks": [drink]})
    try:
        reply = socket.recv_json()
    except zmq.Again:
        raise SystemExit("no answer from the service within 5 s")
    if not reply["ok"]:
        raise SystemExit(f"refused: {reply['error']['message']}")
    print(f"stored {drink['uuid']} at anchor {reply['anchor']}")


if __name__ == "__main__":
    main()
