#!/usr/bin/env python3
"""Follows the service as a complication or a widget would: every drink
added or deleted, and the model, kept in step with the store through
restarts and dropped messages by the client library's `follow()`
(clients/python, found in this clone, or installed with pip install
./clients/python).

    python3 examples/subscribe.py            # until Ctrl-C
    python3 examples/subscribe.py --count 3  # three updates after the first state, then exit
"""
import argparse

from common import endpoints  # first: it finds the client library in this clone

from coffee_tracker import Client


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="data", help="the service's data folder (default: data)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many updates (default: never)")
    parser.add_argument("--timeout", type=float, default=0,
                        help="give up after this many seconds without reaching the service (default: never)")
    args = parser.parse_args()
    found = endpoints(args.data)
    client = Client(query=found["query"], updates=found["updates"], timeout=5)
    held = None
    seen = 0
    for state in client.follow(timeout=args.timeout or None):
        if held is None:
            print(f"subscribed and in step at anchor {state.anchor}: {len(state.drinks)} drinks", flush=True)
        else:
            for uuid in state.drinks.keys() - held:
                d = state.drinks[uuid]
                print(f"+ {uuid} {d['mgCaffeine']} mg {d.get('type', '')} at {d['date']} (anchor {state.anchor})")
            for uuid in held - state.drinks.keys():
                print(f"- {uuid} (anchor {state.anchor})")
            if state.model:
                m = state.model
                print(f"model: {m['mgCaffeine']:.0f} mg now ({m['level']}), "
                      f"{m['cupsToday']:.1f} cups today (anchor {m['anchor']})")
            print(end="", flush=True)
            seen += 1
            if args.count and seen >= args.count:
                return
        held = set(state.drinks)


if __name__ == "__main__":
    main()
