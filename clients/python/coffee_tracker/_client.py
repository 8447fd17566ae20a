"""The query calls of PROTOCOL.md §4, over a DEALER socket."""
from __future__ import annotations

import json
import os
import uuid as uuidlib
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Union

import zmq
import zmq.auth

Drink = Dict[str, Any]


class CoffeeTrackerError(Exception):
    """A request the service refused: `code` (`invalid_drink`, `anchor_expired`,
    `unavailable`, ...), `message`, and for a drink `index` and `field`."""

    def __init__(self, code: str, message: str, index: Optional[int] = None, field: Optional[str] = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.index = index
        self.field = field


class Client:
    """The service's query endpoint and its feed.

    Give either `config` (the service's configuration file: the endpoints
    and the server key are read from `endpoints.json` in its data folder,
    as the command line does) or `query` and `updates` endpoints. Under
    CURVE (§6) `key` is this client's secret certificate file and
    `server_key` the service's public key (Z85); with `config` the key is
    read from `endpoints.json`.

    `timeout`: seconds to wait for a reply before `TimeoutError`.
    """

    def __init__(
        self,
        config: Optional[Union[str, os.PathLike]] = None,
        query: Optional[str] = None,
        updates: Optional[str] = None,
        key: Optional[Union[str, os.PathLike]] = None,
        server_key: Optional[str] = None,
        timeout: float = 10,
    ):
        found: Dict[str, Any] = {}
        self._config = Path(config) if config is not None else None
        if self._config is not None:
            found = _discover(self._config)
        if query is None:
            query = found.get("query")
        if updates is None:
            updates = found.get("updates")
        if server_key is None:
            server_key = found.get("serverKey")
        if query is None or updates is None:
            raise ValueError("give config=, or both query= and updates= endpoints")
        for endpoint in (query, updates):
            if "://" not in endpoint:
                raise ValueError(f"{endpoint!r} is not a ZeroMQ endpoint: write it with its transport, as tcp://{endpoint}")
        self.query_endpoint: str = query
        self.updates_endpoint: str = updates
        self.timeout = float(timeout)
        self._curve: Optional[Dict[str, bytes]] = None
        if key is not None:
            if not server_key:
                raise ValueError("key= needs the service's public key: server_key=, or config= to read it from endpoints.json")
            public, secret = zmq.auth.load_certificate(os.fspath(key))
            if secret is None:
                raise ValueError(f"{key} holds no secret key: give the .key_secret file")
            self._curve = {"public": public, "secret": secret, "server": server_key.encode()}
        elif server_key:
            raise ValueError("the service runs with CURVE (it has a server key): give key=, this client's .key_secret file")
        self._context = zmq.Context.instance()
        self._socket: Optional[zmq.Socket] = None

    # The calls of §4.

    def ping(self) -> int:
        """The store's anchor."""
        return int(self.call({"op": "ping"})["anchor"])

    def add(self, drinks: Iterable[Drink]) -> Dict[str, Any]:
        """Stores drinks (a missing `uuid` is filled with a new one); returns
        `anchor`, `added`, `duplicates` once the commit is durable."""
        filled = [dict(d) if "uuid" in d else {**d, "uuid": str(uuidlib.uuid4()).upper()} for d in drinks]
        return self.call({"op": "add", "drinks": filled})

    def delete(self, deletions: Iterable[Union[str, Dict[str, Any]]]) -> Dict[str, Any]:
        """Deletes by UUID (or `{"uuid", "version"}`); returns `anchor`, `deleted`, `unknown`."""
        return self.call({"op": "delete", "deletions": list(deletions)})

    def changes(self, anchor: Optional[int] = None, limit: int = 1000) -> Dict[str, Any]:
        """One page of changes after `anchor` (None: every live drink):
        `added`, `deleted`, `anchor`, `hasMore`."""
        return self.call({"op": "changes", "anchor": anchor, "limit": limit})

    def model(self, at: Optional[str] = None) -> Dict[str, Any]:
        """The model (§3) now, or at an RFC 3339 date."""
        return self.call({"op": "model", **({"at": at} if at else {})})

    def stats(self) -> Dict[str, Any]:
        """The service's counters."""
        return self.call({"op": "stats"})

    def backup(self, name: str) -> Dict[str, Any]:
        """A consistent copy of the store into its backup folder, as `name`
        (role write): `anchor`, `bytes`, `file`, once it is fsynced."""
        return self.call({"op": "backup", "name": name})

    def drinks(self, from_: Optional[str] = None, to: Optional[str] = None) -> Dict[str, Any]:
        """The live drinks dated from `from_` to `to` (RFC 3339; default the
        24 hours up to now, at most 366 days), oldest first (§15)."""
        request: Dict[str, Any] = {"op": "drinks"}
        if from_:
            request["from"] = from_
        if to:
            request["to"] = to
        return self.call(request)

    def history(self, from_: Optional[str] = None, to: Optional[str] = None, by: str = "day") -> Dict[str, Any]:
        """The person's days, weeks or months (§15) from the day `from_` to
        the day `to` (dates such as 2025-03-31, or RFC 3339 times): per
        bucket mg, cups, drinks, peakMg, hoursOverSleepThreshold, daysOverLimit."""
        request: Dict[str, Any] = {"op": "history", "by": by}
        if from_:
            request["from"] = from_
        if to:
            request["to"] = to
        return self.call(request)

    def settings(self) -> Dict[str, Any]:
        """The person's settings (§15): `settings` in force (halfLifeHours,
        sleepThresholdMg, dailyLimitMg, timeZone), the configuration's
        `defaults`, and the `anchor` of their last change."""
        return self.call({"op": "settings"})

    def putSettings(self, **values: Any) -> Dict[str, Any]:
        """Sets some of the four settings (§15; the admin role): a value of
        None puts the configuration's back. Returns `settings()` after it."""
        return self.call({"op": "putSettings", "settings": values})

    def catalogue(self) -> Dict[str, Any]:
        """The person's drinks (§15): `drinks`, each name, mgCaffeine,
        retired and builtIn, and the `anchor` of the last change."""
        return self.call({"op": "catalogue"})

    def putCatalogue(self, name: str, **entry: Any) -> Dict[str, Any]:
        """Adds or changes the catalogue's entry `name` (§15): mgCaffeine=,
        retired=, renamedFrom=. Returns `catalogue()` after it."""
        return self.call({"op": "putCatalogue", "name": name, "entry": entry})

    def pushKey(self) -> str:
        """The service's Web Push public key, base64url (§17): a page's applicationServerKey."""
        return self.call({"op": "pushKey"})["publicKey"]

    def pushSubscribe(self, subscription: Dict[str, Any]) -> Dict[str, Any]:
        """Registers a browser's subscription (`PushSubscription.toJSON()`: endpoint,
        keys.p256dh, keys.auth; §17). Returns `id` and `anchor`."""
        return self.call({"op": "pushSubscribe", "subscription": subscription})

    def pushUnsubscribe(self, id: str) -> Dict[str, Any]:
        """Removes the subscription `id` (§17): `removed` is 1, or 0 when it was not there."""
        return self.call({"op": "pushUnsubscribe", "id": id})

    def pushSubscriptions(self) -> Dict[str, Any]:
        """Every subscription kept (the admin role; §17): `subscriptions`, each id, endpoint, created."""
        return self.call({"op": "pushSubscriptions"})

    def follow(self, timeout: Optional[float] = None) -> Iterator["State"]:
        """The feed kept in step (§10): yields a `State` after each change
        applied and each model of its anchor. `timeout`: seconds without a
        reachable service before `TimeoutError` (None: for ever)."""
        from ._follow import Follower

        return Follower(self, timeout).states()

    def call(self, request: Dict[str, Any]) -> Dict[str, Any]:
        """Sends one request and returns its reply; raises `CoffeeTrackerError`
        for a refusal and `TimeoutError` when no reply comes in time."""
        socket = self._request_socket()
        socket.send_multipart([b"", json.dumps(request).encode()])
        if not socket.poll(int(self.timeout * 1000)):
            # A late reply must never answer the next request: start afresh.
            self._drop_socket()
            raise TimeoutError(f"no reply from {self.query_endpoint} in {self.timeout:g} s; is the service running?")
        reply = json.loads(socket.recv_multipart()[-1])
        if not reply.get("ok"):
            error = reply.get("error") or {}
            raise CoffeeTrackerError(
                error.get("code", "internal"), error.get("message", "no message"), error.get("index"), error.get("field"))
        return reply

    def rediscover(self) -> bool:
        """With `config`, reads `endpoints.json` again (a restarted service
        may have bound new ports); true when the endpoints changed."""
        if self._config is None:
            return False
        try:
            found = _discover(self._config)
        except (OSError, ValueError):
            return False
        query, updates = found.get("query", self.query_endpoint), found.get("updates", self.updates_endpoint)
        if (query, updates) == (self.query_endpoint, self.updates_endpoint):
            return False
        self.query_endpoint, self.updates_endpoint = query, updates
        self._drop_socket()
        return True

    def close(self) -> None:
        self._drop_socket()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Sockets.

    def subscriber(self, topics: List[bytes]) -> zmq.Socket:
        """A SUB socket on the update endpoint, subscribed to `topics`."""
        socket = self._context.socket(zmq.SUB)
        socket.setsockopt(zmq.LINGER, 0)
        self._secure(socket)
        for topic in topics:
            socket.setsockopt(zmq.SUBSCRIBE, topic)
        socket.connect(self.updates_endpoint)
        return socket

    def _request_socket(self) -> zmq.Socket:
        if self._socket is None:
            socket = self._context.socket(zmq.DEALER)
            socket.setsockopt(zmq.LINGER, 0)
            self._secure(socket)
            socket.connect(self.query_endpoint)
            self._socket = socket
        return self._socket

    def _drop_socket(self) -> None:
        if self._socket is not None:
            self._socket.close(0)
            self._socket = None

    def _secure(self, socket: zmq.Socket) -> None:
        if self._curve:
            socket.curve_secretkey = self._curve["secret"]
            socket.curve_publickey = self._curve["public"]
            socket.curve_serverkey = self._curve["server"]


def _discover(config: Path) -> Dict[str, Any]:
    """The endpoints (and server key) the service wrote to `endpoints.json`
    in its data folder, else the binds of its configuration file."""
    try:
        settings = json.loads(config.read_text())
    except OSError as error:
        raise ValueError(f"cannot read {config}: {error.strerror}") from None
    except ValueError as error:
        raise ValueError(f"{config} is not JSON: {error}") from None
    data = config.parent / settings.get("dataDirectory", "data")
    found: Dict[str, Any] = {
        "query": (settings.get("query", {}).get("bind") or ["tcp://127.0.0.1:5557"])[0],
        "updates": (settings.get("updates", {}).get("bind") or ["tcp://127.0.0.1:5556"])[0],
    }
    path = data / "endpoints.json"
    if path.exists():
        published = json.loads(path.read_text())
        for name in ("query", "updates"):
            if published.get(name):
                found[name] = published[name][0]
        if published.get("serverKey"):
            found["serverKey"] = published["serverKey"]
    return {k: _connectable(v) if k != "serverKey" else v for k, v in found.items()}


def _connectable(endpoint: str) -> str:
    """A bind address as a client connects to it: `*` and 0.0.0.0 become loopback."""
    return endpoint.replace("tcp://*:", "tcp://127.0.0.1:").replace("tcp://0.0.0.0:", "tcp://127.0.0.1:")
