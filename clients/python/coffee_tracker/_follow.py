"""The Clone pattern of PROTOCOL.md §3 in one loop: `Client.follow()`."""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional

import zmq

if TYPE_CHECKING:
    from ._client import Client

log = logging.getLogger("coffee_tracker")


@dataclass
class State:
    """What a follower holds: the anchor it has applied, every live drink by
    UUID at that anchor, and the model of that anchor when one has arrived
    (None until then)."""

    anchor: int = 0
    drinks: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    model: Optional[Dict[str, Any]] = None
    #: The store's identity `anchor` belongs to (PROTOCOL.md §13): its UUID
    #: and epoch, None until known (or from a service that does not say).
    store: Optional[str] = None
    epoch: Optional[int] = None
    #: What the person set (PROTOCOL.md §15, "In the feed"): by scope
    #: (``person``, ``catalogue``), each name's value as it was written
    #: (``None``: the default put back). A name not here has the service's
    #: default (``Client.settings()`` gives the values in force).
    settings: Dict[str, Dict[str, Any]] = field(default_factory=dict)


class Follower:
    """Subscribes first, then reads `changes` from null page by page; drops
    what is queued at or below its anchor and applies each `changes` whose
    `previousAnchor` is its anchor. It resyncs from its anchor on a gap, on a
    `model` or `heartbeat` ahead of it, and after three heartbeat intervals
    of silence (reconnecting); from null on `anchor_expired`, and when a
    reply or a message shows another `store` or `epoch` (a restore, a
    promotion, another service: PROTOCOL.md §13), which it logs once at
    warning."""

    TOPICS = [b"changes", b"model", b"heartbeat"]
    PAGE = 10_000

    def __init__(self, client: "Client", timeout: Optional[float]):
        self.client = client
        self.timeout = timeout
        self.state = State()
        self.synced = False  # the state reflects a `changes` read (anchor 0 is a real anchor too)
        self.heartbeat_interval = 1.0  # learnt from the heartbeats' spacing
        self.last_heartbeat: Optional[float] = None
        self.resyncs = 0

    def states(self) -> Iterator[State]:
        socket = self.client.subscriber(self.TOPICS)
        try:
            yield from self._run(socket)
        finally:
            socket.close(0)

    def _run(self, socket: zmq.Socket) -> Iterator[State]:
        reachable = time.monotonic()
        need_sync = True
        while True:
            if need_sync:
                try:
                    self._resync()
                except (TimeoutError, OSError):
                    self._give_up_after(reachable)
                    self.client.rediscover()
                    socket.close(0)
                    socket = self.client.subscriber(self.TOPICS)
                    continue
                reachable = time.monotonic()
                need_sync = False
                yield self.state
            silence = max(3 * self.heartbeat_interval, 1.0)
            if not socket.poll(int(silence * 1000)):
                # Silence: the service restarted (perhaps on another port) or
                # the network went away. Reconnect, and resync from here.
                self._give_up_after(reachable)
                self.client.rediscover()
                socket.close(0)
                socket = self.client.subscriber(self.TOPICS)
                need_sync = True
                continue
            reachable = time.monotonic()
            topic, body = socket.recv_multipart()
            message = json.loads(body)
            anchor = int(message.get("anchor", 0))
            if self._another_history(message):
                need_sync = True  # the resync reads everything again, from null
                continue
            if topic == b"changes":
                if anchor <= self.state.anchor:
                    continue  # already applied (queued before the resync's reply)
                if int(message["previousAnchor"]) != self.state.anchor:
                    need_sync = True  # a gap: something was missed
                    continue
                self._apply(message)
                self.state.anchor = anchor
                self.state.model = None
                yield self.state
            elif topic == b"model":
                if anchor > self.state.anchor:
                    need_sync = True  # changes up to it come first: they were lost
                elif anchor == self.state.anchor:
                    self.state.model = message
                    yield self.state
            elif topic == b"heartbeat":
                now = time.monotonic()
                if self.last_heartbeat is not None:
                    self.heartbeat_interval = min(max(now - self.last_heartbeat, 0.1), 60.0)
                self.last_heartbeat = now
                if anchor > self.state.anchor:
                    need_sync = True

    def _give_up_after(self, reachable: float) -> None:
        if self.timeout is not None and time.monotonic() - reachable > self.timeout:
            raise TimeoutError(
                f"no word from {self.client.updates_endpoint} or {self.client.query_endpoint} in {self.timeout:g} s")

    def _resync(self) -> None:
        """Reads `changes` from the anchor held (from null the first time, or
        after `anchor_expired`), page by page, then asks for the model."""
        from ._client import CoffeeTrackerError

        self.resyncs += 1
        start: Optional[int] = self.state.anchor if self.synced else None
        try:
            self._read_from(start)
        except CoffeeTrackerError as error:
            if error.code != "anchor_expired":
                raise
            self._read_from(None)
        try:
            model = self.client.model()
        except CoffeeTrackerError:
            model = None
        self.state.model = model if model is not None and int(model["anchor"]) == self.state.anchor else None

    def _another_history(self, message: Dict[str, Any]) -> bool:
        """Whether a reply or message names another store or epoch than the
        state's (both known): then what is held means nothing there."""
        if self.state.store is None or "store" not in message or "epoch" not in message:
            return False
        return (message["store"], int(message["epoch"])) != (self.state.store, self.state.epoch)

    def _read_from(self, start: Optional[int]) -> None:
        reply = self.client.changes(anchor=start, limit=self.PAGE)
        if start is not None and (int(reply["anchor"]) < start or self._another_history(reply)):
            # Another store or epoch (restored, promoted, another service), or
            # one behind what we hold: start again from null.
            return self._read_from(None)
        first = reply
        drinks = {} if start is None else dict(self.state.drinks)
        settings = {} if start is None else {scope: dict(names) for scope, names in self.state.settings.items()}
        while True:
            for drink in reply["added"]:
                drinks[drink["uuid"]] = drink
            for tombstone in reply["deleted"]:
                drinks.pop(tombstone["uuid"], None)
            _take_settings(settings, reply)
            anchor = int(reply["anchor"])
            if not reply.get("hasMore"):
                break
            reply = self.client.changes(anchor=anchor, limit=self.PAGE)
            if (reply.get("store"), reply.get("epoch")) != (first.get("store"), first.get("epoch")):
                return self._read_from(None)  # it changed while we paged
        store, epoch = reply.get("store"), reply.get("epoch")
        if self._another_history(reply):
            log.warning("the service's store changed (%s epoch %s, was %s epoch %s): read everything again from the start",
                        store, epoch, self.state.store, self.state.epoch)
        self.state = State(anchor=anchor, drinks=drinks, model=None, store=store,
                           epoch=int(epoch) if epoch is not None else None, settings=settings)
        self.synced = True

    def _apply(self, message: Dict[str, Any]) -> None:
        for drink in message["added"]:
            self.state.drinks[drink["uuid"]] = drink
        for tombstone in message["deleted"]:
            self.state.drinks.pop(tombstone["uuid"], None)
        _take_settings(self.state.settings, message)


def _take_settings(settings: Dict[str, Dict[str, Any]], message: Dict[str, Any]) -> None:
    """The `settings` rows of a `changes` reply or message, each at its
    anchor, over what is held (an older service sends none)."""
    for row in sorted(message.get("settings", ()), key=lambda row: int(row["anchor"])):
        settings.setdefault(row["scope"], {})[row["name"]] = row["value"]
