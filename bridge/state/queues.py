"""Reminders waiting for the next message that can carry them, per key (an A2A task).

Through the state interface, so the same code serves one process (`MemoryState`, performed at
once) and a fleet (Redis: a reminder queued through one replica rides on the message another
replica forwards).  A flow never calls it: it asks for the op (`push`, `take`, `count`) in a
`Perform` on `state`, and reads the result back (`taken`).  A newer reminder with the same `dedupeKey` replaces an older
one, fleet-wide; the oldest go beyond the per-key limit; a queue expires ``idle_s`` after its last push.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from bridge.lazy import lazily
from bridge.state.base import StateBackend
from bridge.state.memory import MemoryState
from bridge.state.ops import QueueCount, QueuePush, QueueTake
from bridge.state.scope import Scope

if TYPE_CHECKING:
    from bridge import model
    from bridge.model import Reminder
else:  # pydantic: loaded by the first reminder a route decodes (issue 23)
    model = lazily("bridge.model")

class ReminderQueues:
    """One queue per `Scope` (an A2A task), under ``scope.key(what)``."""

    def __init__(self, what: str = "queue", *, limit: int, idle_s: float, max_keys: int,
                 state: StateBackend | None = None):
        self.what = what
        self.limit = limit
        self.idle_s = idle_s
        #: shared (Redis) when given, else this process's own bounded tables
        self.state: StateBackend = state if state is not None else MemoryState(max_keys=max_keys)

    def push(self, scope: Scope, reminder: Reminder) -> QueuePush:
        """Queue ``reminder``; its result: (ids it replaced by dedupe key, ids pushed out by the limit)."""
        return QueuePush(scope.key(self.what), reminder.id, model.dump_json(reminder), reminder.dedupe_key, self.limit,
                         self.idle_s)

    def take(self, scope: Scope) -> QueueTake:
        """Every reminder queued for ``scope``, oldest first, and the queue emptied (in one step): `taken`."""
        return QueueTake(scope.key(self.what))

    @staticmethod
    def taken(items: list[str]) -> list[Reminder]:
        return [model.load_json(item) for item in items]

    def count(self, scope: Scope) -> QueueCount:
        return QueueCount(scope.key(self.what))

    def held(self) -> int:
        """Reminders this process holds (the pending gauge); a shared queue's are Redis's to count."""
        return self.state.queued() if isinstance(self.state, MemoryState) else 0
