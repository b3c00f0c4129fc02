"""Hosts that share one upstream 2025-11-25 session through the era bridge (issue 21, point 2),
sans-I/O: over HTTP each 2026-07-28 request is an exchange of its own, and alike hosts (the same
capabilities, client info and credentials) share the session the proxy opened, choosing their
request ids alike.

So each request an exchange sends gets an id unique in the session (``rb-h<n>``), and whatever the
bridge gives back says which exchange it belongs to: a response by its id (the one it answers
ends the exchange's wait), a listen stream's notification by its subscription id, each with the
host's own id again. A `notifications/cancelled` is given the session's id of the request it names
only when that request is its own exchange's (a flow's own follow-up): hosts alike cannot be told
apart by what they POST, so a cancel in a POST of its own names, for all the proxy knows, another
host's request, and goes nowhere (a 2026-07-28 host ends a request by closing its answer stream,
which the transport sees as that exchange's end). Pure: the transport keeps the exchanges, this
keeps their ids.
"""
from __future__ import annotations

import itertools
from typing import Any, NamedTuple

from bridge.dialects.mcp import SUBSCRIPTION_KEY
from bridge.dialects.paths import get_path, params_meta
from bridge.jsonrpc import dumps, loads
from bridge.pipeline.flow import OWN_ID_PREFIX

PREFIX = "rb-h"


class Back(NamedTuple):
    """A message on its way to a host: the exchange it belongs to (None: no exchange's own), the
    frame with the host's ids, and whether it is the answer to that exchange's request (not to one
    its flow made on its own: an outbox poll)."""

    exchange: Any
    data: bytes
    answer: bool


class Posted(NamedTuple):
    """A message on its way to the server: the exchange whose request it is, and the request's id
    (None: not a request)."""

    exchange: Any
    request_id: Any


class Exchanges:
    """The session's ids in flight: own id → (exchange, the id as the host wrote it), and each
    exchange's own ids in the order sent (so what one exchange asks costs what it has in flight,
    not what the whole session has)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.owners: dict[str, tuple[Any, Any]] = {}
        self._by_exchange: dict[int, dict[str, None]] = {}

    def toward(self, exchange: Any, frame: bytes) -> bytes | None:
        """``frame`` (the exchange's flow wrote it toward the server) with the session's ids; None for
        a cancel that names no request of ``exchange`` (it must reach no other's)."""
        msg = _parsed(frame)
        if msg is None:
            return frame
        if "id" in msg and isinstance(msg.get("method"), str):
            own = f"{PREFIX}{next(self._ids)}"
            self.owners[own] = (exchange, msg["id"])
            self._by_exchange.setdefault(id(exchange), {})[own] = None
            return dumps({**msg, "id": own})
        cancelled = get_path(msg, "params", "requestId")
        if msg.get("method") == "notifications/cancelled" and cancelled is not None:
            own = self.own_id(cancelled, exchange)
            return None if own is None else dumps({**msg, "params": {**msg["params"], "requestId": own}})
        return frame

    def own_id(self, host_id: Any, exchange: Any) -> str | None:
        """The session's id for ``exchange``'s request ``host_id`` (the newest), None: none of its own."""
        for own in reversed(self._by_exchange.get(id(exchange), {})):
            hid = self.owners[own][1]
            if type(hid) is type(host_id) and hid == host_id:
                return own
        return None

    def posted(self, frame: bytes) -> Posted:
        """What ``frame``, on its way to the server, is: a request's id, and the exchange it is of."""
        msg = _parsed(frame)
        if msg is None or "method" not in msg or "id" not in msg:
            return Posted(None, None)
        return Posted(self.of(msg["id"]), msg["id"])

    def of(self, own: Any) -> Any:
        """The exchange whose request has the session's id ``own`` (None: no exchange's)."""
        owner = self.owners.get(own) if isinstance(own, str) else None
        return owner[0] if owner is not None else None

    def owed(self, exchange: Any) -> list[str]:
        """The ids of ``exchange``'s host requests not answered yet (a listen's, until it ends); not
        those its flow made on its own (an outbox poll), whose answers it awaits past its end."""
        return [own for own in self._by_exchange.get(id(exchange), ()) if not _flows_own(self.owners[own][1])]

    def back(self, frame: bytes) -> Back:
        """``frame`` (the bridge gave it the host's way): whose it is, with the host's ids."""
        msg = _parsed(frame)
        if msg is None:
            return Back(None, frame, False)
        msg_id = msg.get("id")
        if "method" not in msg and isinstance(msg_id, str) and msg_id in self.owners:
            exchange, host_id = self._forget(msg_id)
            return Back(exchange, dumps({**msg, "id": host_id}), not _flows_own(host_id))
        meta = params_meta(msg)
        sub = meta.get(SUBSCRIPTION_KEY) if isinstance(meta, dict) else None
        if isinstance(sub, str) and sub in self.owners:
            exchange, host_id = self.owners[sub]
            params = msg["params"]
            return Back(exchange, dumps({**msg, "params": {**params, "_meta": {**meta, SUBSCRIPTION_KEY: host_id}}}),
                        False)
        return Back(None, frame, False)

    def end(self, exchange: Any) -> list[str]:
        """``exchange`` is over: its host requests' ids are forgotten; those it still had (a
        listen's), returned. Its flow's own stay until answered: the answer goes to the flow."""
        gone = self.owed(exchange)
        for own in gone:
            self._forget(own)
        return gone

    def _forget(self, own: str) -> tuple[Any, Any]:
        exchange, host_id = self.owners.pop(own)
        mine = self._by_exchange[id(exchange)]
        del mine[own]
        if not mine:  # (an exchange's id may be reused once it is gone: nothing stays under it)
            del self._by_exchange[id(exchange)]
        return exchange, host_id


def _flows_own(host_id: Any) -> bool:
    """Whether a request is one the exchange's flow made itself (its id is the flow's own)."""
    return isinstance(host_id, str) and host_id.startswith(OWN_ID_PREFIX)


def _parsed(frame: bytes) -> dict[str, Any] | None:
    try:
        msg = loads(frame)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None
