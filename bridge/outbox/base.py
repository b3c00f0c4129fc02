"""What both halves of the outbox (`pull.OutboxPull`, `serving.OutboxServe`) truly share: the
route's store and its lane, the wall clock rows are stamped with, housekeeping every
`PRUNE_EVERY_S`, and the back-off after store trouble. Each half keeps its own state and its own
back-off: one half's failing work never delays the other's.

The era of the connection is not here: it is the MCP flow's (`flow.modern`), asked when needed.
"""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from bridge.outbox.store import Store
from bridge.pipeline.addons import AddOn, McpFlowApi
from bridge.pipeline.commands import Command, Defer

PRUNE_EVERY_S = 600.0
#: After the store failed some work, when to try it again: doubling from the first, up to the last.
RETRY_FIRST_S, RETRY_LAST_S = 0.5, 30.0
#: The MCP handshakes: their responses say what the host is told the proxy offers.
HANDSHAKES = ("initialize", "server/discover")


class StoreAddOn(AddOn):
    """An outbox half: its store work is `Defer` on the store's lane; what failed is tried again
    after a back-off (`_retry`); housekeeping (`_prune`) runs at the first wake and then every
    `PRUNE_EVERY_S`. What it stores is keyed by its flow's scope, read when the key is needed (a
    2025-11-25 session's flow learns its scope from the server's answer to `initialize`)."""

    flow: McpFlowApi

    def __init__(self, store: Store, *, route: str, wall: Callable[[], float] = time.time):
        self.store = store
        self.route = route
        self.wall = wall
        self.now = 0.0  # the last wake's monotonic clock: the only clock the state machines see
        self.next_prune = 0.0
        self.retry_at: float | None = None
        self.retries = 0  # failures in a row: the next retry waits longer
        self.closed = False

    @property
    def owned(self) -> bool:
        """Whether the flow's state outlives its request: a request that is nobody's has no outbox."""
        return self.flow.scope.lasting

    def _defer(self, work: Callable[[], Any], done: Callable[[Any], Any], replies: bool = False) -> Defer:
        """Store work, on the store's own lane."""
        return Defer(work, done, self.store.lane, replies)

    def _wall_ms(self) -> int:
        return int(self.wall() * 1000)

    def _retry_later(self) -> None:
        if self.retry_at is None:
            self.retry_at = self.flow.clock() + min(RETRY_LAST_S, RETRY_FIRST_S * 2 ** self.retries)
            self.retries += 1

    def _timers(self) -> list[float]:
        return [self.next_prune] + ([self.retry_at] if self.retry_at is not None else [])

    def next_wake(self) -> float | None:
        return min(self._timers())

    def wake(self, now: float) -> list[Command]:
        """Housekeeping when due, then what the store failed, when its retry is due."""
        self.now = now
        out: list[Command] = []
        if now >= self.next_prune:
            self.next_prune = now + PRUNE_EVERY_S
            out.append(self._prune())
        if self.retry_at is not None and now >= self.retry_at:
            self.retry_at = None
            out += self._retry()
        return out

    def _prune(self) -> Defer:
        raise NotImplementedError

    def _retry(self) -> list[Command]:
        raise NotImplementedError


def run_quietly(call: Callable[..., Any], *args: Any) -> None:
    """``call(*args)`` where nothing waits for it: a store failure is the store's `health` to tell."""
    try:
        call(*args)
    except sqlite3.Error:
        pass
