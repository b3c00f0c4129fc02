"""What a 2026-07-28 MCP host keeps beyond one request (spec §3): its open `subscriptions/listen`
streams that opted in to reminders, and the reminders held for its fallback.

A 2026-07-28 request over HTTP has no session: each gets a flow of its own, so what must outlive
it lives here, in a book the route's flows share (as A2A's flows share their task book), keyed by
the flow's scope (`Scope.key`): an identity's ambient reminder reaches that identity's listen
streams and tool results only, never another client's.  A request that is nobody's beyond its
own answer (`Scope.request`) shares nothing.  Pure: no I/O, no clock.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from bridge.pending import PendingQueue
from bridge.state.scope import Scope

#: How many scopes' held reminders a book keeps; past it the oldest scope's are handed back (dropped).
MAX_SCOPES = 1024


class Subscriptions:
    """Per scope: the listen streams whose filter opted in to reminders and that the proxy
    acknowledged so (by the flow's own key for each stream, newest last: hosts of one scope may
    choose the same listen ids), and the reminders held for the scope's next `tools/call` result."""

    def __init__(self, max_scopes: int = MAX_SCOPES):
        self.max_scopes = max_scopes
        self._open: dict[str, dict[Any, Any]] = {}
        self._held: OrderedDict[str, PendingQueue[Any]] = OrderedDict()

    def opened(self, scope: Scope, key: Any, subscription_id: Any) -> None:
        """The listen stream ``key`` (the flow's own key; its request's id as the host wrote it:
        ``subscription_id``) streams reminders."""
        self._open.setdefault(scope.key("listen"), {})[key] = subscription_id

    def closed(self, scope: Scope, key: Any) -> None:
        streams = self._open.get(scope.key("listen"))
        if streams is not None:
            streams.pop(key, None)
            if not streams:
                del self._open[scope.key("listen")]

    def stream(self, scope: Scope) -> tuple[Any, Any] | None:
        """(stream key, subscription id) of the newest open listen stream of ``scope`` that takes reminders."""
        streams = self._open.get(scope.key("listen"))
        if not streams:
            return None
        key = next(reversed(streams))
        return key, streams[key]

    def held(self, scope: Scope) -> tuple[PendingQueue[Any], list[Any]]:
        """The queue of ``scope``'s held reminders (the same queue for every flow of the scope), and
        what a full book let go of another scope's to make room (for the caller to count)."""
        name = scope.key("held")
        found = self._held.get(name)
        if found is not None:
            self._held.move_to_end(name)
            return found, []
        evicted: list[Any] = []
        while len(self._held) >= max(self.max_scopes, 1):
            evicted += self._held.popitem(last=False)[1].take()
        found = self._held[name] = PendingQueue()
        return found, evicted
