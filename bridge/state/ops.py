"""The shared-state work a flow asks for, as values (`Perform(op, ticket)` carries one).

Why values and not calls: a flow never awaits.  It names the operation; the driver performs it at
once on in-process state (`MemoryState.perform_now`, `BudgetState.perform_now`) or asynchronously
on Redis (`FailoverState.perform`), and hands the result back (`Flow.performed`).  A failure of
shared state comes back as a `StateUnavailable` result, never as an exception into the flow.
"""
from __future__ import annotations

from typing import NamedTuple

from bridge.state.base import BucketCharge

#: The kind (and key) of the global ceiling's one bucket.
GLOBAL = "global"


class Pay(NamedTuple):
    """One bucket a reminder pays one token into: its ``kind`` (server, session, tag, or the global
    ceiling) and ``key``, what a refusal names (``scope``), its rate (per minute) and burst."""

    kind: str
    key: str
    scope: str
    rate: float
    burst: int


class Charge(NamedTuple):
    """A token from every bucket of ``real``, all or none; when they paid, one from every bucket of
    ``shadow`` too (all or none), which only counts (`shadow = true`).  In-process, the buckets of
    ``route`` are kept at most ``max_keys`` per kind and refilled by ``now`` (the flow's clock);
    Redis charges by its own clock.  Result: (refusal, shadow refusal), each an `Exceeded` or None."""

    route: str
    real: tuple[Pay, ...]
    shadow: tuple[Pay, ...] = ()
    now: float = 0.0
    max_keys: int = 1

    def shared(self, pays: tuple[Pay, ...]) -> list[BucketCharge]:
        """The buckets in shared state: one key per route, kind and key (the ceiling: one, fleet-wide)."""
        return [BucketCharge(GLOBAL if p.kind == GLOBAL else f"{self.route}:{p.kind}:{p.key}", p.rate, p.burst,
                             p.scope) for p in pays]


class QueuePush(NamedTuple):
    """Queue an encoded reminder (`StateBackend.queue_push`). Result: (ids replaced, ids pushed out)."""

    key: str
    item_id: str
    item: str
    dedupe_key: str | None
    limit: int
    ttl_s: float


class QueueTake(NamedTuple):
    """Every item of a queue, oldest first, and the queue emptied. Result: a list of items."""

    key: str


class QueueCount(NamedTuple):
    """How many items a queue holds. Result: an int."""

    key: str


Op = Charge | QueuePush | QueueTake | QueueCount
