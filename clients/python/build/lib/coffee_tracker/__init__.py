"""A client of the coffee-tracker service (PROTOCOL.md §10).

    from coffee_tracker import Client
    client = Client(config="config/coffee-tracker.json")
    client.add([{"mgCaffeine": 95, "date": "2026-12-01T08:00:00Z"}])
    for state in client.follow():
        print(state.anchor, len(state.drinks), state.model and state.model["mgCaffeine"])
"""
from ._client import Client, CoffeeTrackerError
from ._follow import State

__all__ = ["Client", "CoffeeTrackerError", "State"]
__version__ = "3.0.0"
