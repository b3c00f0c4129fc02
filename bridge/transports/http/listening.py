"""A route's open 2026-07-28 `subscriptions/listen` streams, kept so that a flow's `Send.stream`
(a reminder for another exchange than the one at hand) can be written on one.

The flow decides which stream a message goes on (it names its own key for it); this table only
finds that stream, by the scope of the flow that sent the message and that key (so a message
reaches the listen streams of its own scope only, and the one it names, whatever ids clients
send), and bounds what waits to be written on each, in bytes: a host that stops reading its
stream loses what passes the bound (reported unwritten), never the proxy's memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bridge.state.scope import Scope

#: What may wait to be written on one listen stream (a host that reads slowly), in bytes.
LISTEN_BYTES = 1024 * 1024


@dataclass(eq=False)
class Listener:
    """One open listen stream: its response, and the bytes written to it not yet on the wire."""

    response: web.StreamResponse
    queued: int = 0

    def room(self, size: int) -> bool:
        return self.queued + size <= LISTEN_BYTES


class ListenStreams:
    """Open listen streams by their scope and the flow's own key for each (`Flow.subscription`)."""

    def __init__(self) -> None:
        self._open: dict[str, Listener] = {}

    @staticmethod
    def name(scope: Scope, key: Any) -> str:
        return scope.key(f"listen:{key!r}")

    def open(self, scope: Scope, key: Any, response: web.StreamResponse) -> str:
        name = self.name(scope, key)
        self._open[name] = Listener(response)
        return name

    def close(self, name: str, response: web.StreamResponse) -> None:
        listener = self._open.get(name)
        if listener is not None and listener.response is response:  # a newer stream under the id stays
            del self._open[name]

    def get(self, scope: Scope, key: Any) -> Listener | None:
        return self._open.get(self.name(scope, key))

    def __len__(self) -> int:
        return len(self._open)
