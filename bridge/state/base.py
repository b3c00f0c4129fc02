"""The state interface the flows use (spec §12): budgets, queued reminders and per-session
records, behind one protocol with a memory and a Redis backend.

Flows never call a backend: they ask for an op (`bridge.state.ops`) in a `Perform` command and the
driver performs it, through one entry: `perform_now(op)` on a backend whose ``sync`` is True (in
process: `MemoryState`, the policy's `BudgetState`), else `await perform(op)` (`FailoverState`,
over Redis), whose failures come back as a `StateUnavailable` result.  The per-kind methods below
are what those entries run (and what tests run against both backends alike).

Keys given to a backend are *logical* (``"route:server:fs"``); each backend adds its own namespace
per kind (buckets, queues, records), so a bucket and a record may share a logical key.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

#: `data.scope` of the JSON-RPC error a reminder request gets when the state backend is down (`closed`).
STATE_SCOPE = "state"


@dataclass(frozen=True, slots=True)
class BucketCharge:
    """One token bucket a reminder pays one token into.

    ``key``: the bucket's fleet-wide identity (route, kind and key, e.g. ``"fs:server:fs"``);
    ``scope``: what a refusal names (spec §7 ``data.scope``, e.g. ``"server:fs"``), the key if None.
    A bucket holds at most ``burst`` tokens and gains ``rate_per_min / 60`` per second.
    """

    key: str
    rate_per_min: float
    burst: int
    scope: str | None = None
    #: tokens gained per second (derived)
    per_second: float = field(init=False, repr=False, compare=False)
    #: seconds an empty bucket takes to fill, at least 1 (derived): its time-to-live, since a bucket
    #: left alone that long is full again, and a full bucket is the same as no bucket
    fill_s: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.rate_per_min > 0:
            raise ValueError(f"bucket {self.key!r}: rate_per_min must be > 0 (got {self.rate_per_min!r})")
        if self.burst < 1:
            raise ValueError(f"bucket {self.key!r}: burst must be >= 1 (got {self.burst!r})")
        per_second = self.rate_per_min / 60.0
        object.__setattr__(self, "per_second", per_second)
        object.__setattr__(self, "fill_s", max(self.burst / per_second, 1.0))


@dataclass(frozen=True)
class Exceeded:
    """The most constrained bucket that refused: when to retry, and what it holds (the same from
    every backend, and from `bridge.policy.budget.take`)."""

    scope: str
    limit: int
    remaining: int
    retry_after_ms: int
    rate: float

    def data(self) -> dict[str, Any]:
        """The JSON-RPC error `data` of a refused request (spec §7)."""
        return {"retryAfterMs": self.retry_after_ms, "limit": self.limit, "remaining": self.remaining,
                "scope": self.scope}


class StateUnavailable(Exception):
    """The shared state backend cannot be reached and `on_unavailable = "closed"`.

    Flows turn it into JSON-RPC -32000 with ``data = {"scope": "state"}`` for reminder requests, and
    hold or drop reminder notifications per the route's ``over``; ordinary traffic never sees it.
    """

    scope = STATE_SCOPE

    def __init__(self, message: str = "reminder state unavailable", *, cause: str = ""):
        super().__init__(message)
        self.message = message
        self.cause = cause

    def data(self) -> dict[str, Any]:
        return {"scope": STATE_SCOPE}


def unique(charges: Sequence[BucketCharge]) -> list[BucketCharge]:
    """The charges with each bucket once (first wins): a bucket named twice is charged once, in
    every backend alike (the Lua script could not charge it twice without reading its own writes)."""
    if len(charges) < 2:
        return list(charges)
    seen: set[str] = set()
    out = []
    for charge in charges:
        if charge.key not in seen:
            seen.add(charge.key)
            out.append(charge)
    return out


def exceeded(charge: BucketCharge, level: float, retry_after_ms: int) -> Exceeded:
    """The refusal `bridge.policy.budget.take` would give."""
    return Exceeded(charge.scope or charge.key, charge.burst, int(level), max(int(retry_after_ms), 1),
                    charge.rate_per_min)


def wait_ms(level: float, per_second: float) -> int:
    """Milliseconds until a bucket at ``level`` holds one token (the formula of budget.take())."""
    return math.ceil((1.0 - level) / per_second * 1000.0)


def ttl_ms(ttl_s: float) -> int:
    """A time-to-live in whole milliseconds, at least 1 (Redis refuses PX 0)."""
    return max(1, math.ceil(ttl_s * 1000.0))


@runtime_checkable
class StateBackend(Protocol):
    """What the driver, the console and the HTTP transport ask of shared state (every method a
    coroutine; in-process backends also answer ``perform_now`` at once)."""

    sync: bool

    async def perform(self, op: Any) -> Any:
        """What an op of `bridge.state.ops` gives, or `StateUnavailable` (never raised)."""

    async def charge(self, charges: Sequence[BucketCharge]) -> Exceeded | None:
        """One token from every bucket, or none: None when charged, else the most constrained refusal
        (longest wait; ``retry_after_ms = ceil((1 - level) / per_second * 1000)``, at least 1)."""

    async def levels(self, charges: Sequence[BucketCharge]) -> list[float]:
        """Tokens each bucket holds now (a bucket never charged is full), for gauges; charges nothing."""

    async def queue_push(self, key: str, item_id: str, item: str, *, dedupe_key: str | None, limit: int,
                         ttl_s: float) -> tuple[list[str], list[str]]:
        """Append ``item`` (an encoded reminder) to queue ``key``, atomically.

        An older item with the same non-empty ``dedupe_key`` is removed; an item with the same
        ``item_id`` is replaced silently (a retry); then the oldest items beyond ``limit`` are pushed
        out. Returns (ids replaced by the dedupe key, ids pushed out by the limit, oldest first).
        The queue expires ``ttl_s`` after its last push.
        """

    async def queue_take(self, key: str) -> list[str]:
        """Every item of queue ``key`` in arrival order, and the queue emptied, in one atomic step."""

    async def queue_len(self, key: str) -> int:
        ...

    async def put_record(self, key: str, record: dict[str, Any], ttl_s: float) -> None:
        """Store a JSON-serialisable record (e.g. an MCP session's negotiated dialects) for ``ttl_s``."""

    async def get_record(self, key: str, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        """The record, or None; ``ttl_s`` given: also restart its time-to-live (sliding idle expiry)."""

    async def close(self) -> None:
        ...
