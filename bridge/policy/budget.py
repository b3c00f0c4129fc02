"""Reminder budgets (spec §7): token buckets with an injected clock, in bounded state.

Pure: no I/O and no clock of its own; every call is given ``now`` (seconds, monotonic).
A bucket holds at most ``burst`` tokens and gains ``rate / 60`` per second; a reminder costs
one.  Buckets live in `BudgetState`, one object per process that outlives rules reloads, so a
key that survives a reload keeps its tokens.  Per-key buckets are held in a `cachetools.TTLCache`
of at most ``max_keys`` entries whose time-to-live is the time an empty bucket takes to fill:
a bucket that expires would have been full again anyway, so expiry loses nothing, and a flood
of distinct keys (sessions, tags) can never hold more than ``max_keys`` buckets.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from bridge.state.base import Exceeded  # the refusal every state backend also gives

GLOBAL = "global"


class Bucket:
    __slots__ = ("tokens", "at")

    def __init__(self, tokens: float, at: float):
        self.tokens = tokens
        self.at = at

    def level(self, now: float, per_second: float, burst: int) -> float:
        """Tokens held at ``now`` (refilled since the last look; never above ``burst``)."""
        if now > self.at:
            self.tokens = min(float(burst), self.tokens + (now - self.at) * per_second)
            self.at = now
        return self.tokens


@dataclass(frozen=True)
class Limit:
    """One bucket a reminder must pay into: which (``scope``), and its configured size and rate."""

    scope: str  # "server:fs", "session:abc", "tag:deploy", "global"
    rate: float  # tokens per minute
    burst: int


class _Keyed:
    """The buckets of one (route, key kind): a TTL cache bounded by ``max_keys``."""

    def __init__(self, max_keys: int, ttl: float, now: float, old: "_Keyed | None" = None):
        self.now = now
        self.max_keys = max_keys
        self.ttl = ttl
        self.cache: TTLCache = TTLCache(maxsize=max_keys, ttl=ttl, timer=lambda: self.now)
        if old is not None:  # a reload changed the size or the rate: keep what fits
            for key, bucket in list(old.cache.items())[-max_keys:]:
                self.cache[key] = bucket


class BudgetState:
    """Every bucket in the process: per route and key, plus the global ceiling.

    Outlives rules reloads and is shared by every connection of a route (the stdio transport has
    one, HTTP many), so limits hold per route however many connections there are.
    """

    def __init__(self) -> None:
        self._keyed: dict[tuple[str, str], _Keyed] = {}
        self._global: Bucket | None = None

    def _table(self, route: str, kind: str, max_keys: int, rate: float, burst: int, now: float) -> _Keyed:
        ttl = max(burst * 60.0 / rate, 1e-3)
        table = self._keyed.get((route, kind))
        if table is None or table.max_keys != max_keys or table.ttl != ttl:
            table = self._keyed[(route, kind)] = _Keyed(max_keys, ttl, now, table)
        table.now = max(table.now, now)
        return table

    def bucket(self, route: str, kind: str, key: str, limit: Limit, max_keys: int, now: float) -> Bucket:
        if kind == GLOBAL:
            if self._global is None:
                self._global = Bucket(float(limit.burst), now)
            return self._global
        table = self._table(route, kind, max_keys, limit.rate, limit.burst, now)
        bucket = table.cache.get(key)
        if bucket is None:
            bucket = Bucket(float(limit.burst), now)
        table.cache[key] = bucket  # (re)insert: refreshes its time-to-live
        return bucket

    def levels(self, route: str, kind: str, now: float, per_second: float, burst: int) -> list[tuple[str, float]]:
        """(key, tokens at ``now``) of every bucket of (``route``, ``kind``), read without refilling;
        ``kind`` GLOBAL: the ceiling's, when it was ever charged."""
        def level(bucket: Bucket) -> float:
            return min(float(burst), bucket.tokens + max(0.0, now - bucket.at) * per_second)

        if kind == GLOBAL:
            return [(GLOBAL, level(self._global))] if self._global is not None else []
        table = self._keyed.get((route, kind))
        if table is None:
            return []
        found = []
        for key in list(table.cache):  # a snapshot: nothing expires or moves while reading
            bucket = table.cache.get(key)
            if bucket is not None:
                found.append((str(key), level(bucket)))
        return found

    def keys_held(self, route: str | None = None) -> int:
        """How many per-key buckets are held (for tests and the admin port)."""
        return sum(len(t.cache) for (r, _), t in self._keyed.items() if route in (None, r))


def take(state: BudgetState, route: str, charges: Iterable[tuple[str, str, Limit]], max_keys: int,
         now: float) -> Exceeded | None:
    """Charge one token to every bucket in ``charges`` ((kind, key, limit) each), all or none.

    Returns None when every bucket had a token (all are charged), else the most constrained
    refusal (the longest wait) and charges nothing.
    """
    looked: list[tuple[Bucket, Limit]] = []
    worst: Exceeded | None = None
    for kind, key, limit in charges:
        bucket = state.bucket(route, kind, key, limit, max_keys, now)
        per_second = limit.rate / 60.0
        level = bucket.level(now, per_second, limit.burst)
        looked.append((bucket, limit))
        if level < 1.0:
            wait = math.ceil((1.0 - level) / per_second * 1000.0)
            if worst is None or wait > worst.retry_after_ms:
                worst = Exceeded(limit.scope, limit.burst, int(level), max(wait, 1), limit.rate)
    if worst is not None:
        return worst
    for bucket, _ in looked:
        bucket.tokens -= 1.0
    return None


@dataclass
class Held:
    """A notification held by `coalesce` until its bucket has a token again."""

    key: str
    reminder: Any
    deliver: Callable[[Any], Any]
    context: Any = None


class Coalescer:
    """The newest over-budget notification per dedupe key, in the order the newest ones arrived.

    A reminder without a dedupe key is held under its own id, so nothing is merged that the
    sender did not mark as replaceable.
    """

    def __init__(self) -> None:
        self._held: OrderedDict[str, Held] = OrderedDict()
        #: when the first held item's bucket has a token again (monotonic seconds), or None
        self.wake_at: float | None = None

    def hold(self, item: Held) -> Held | None:
        """Hold ``item``; returns the older one it replaces (same key), if any."""
        replaced = self._held.pop(item.key, None)
        self._held[item.key] = item
        return replaced

    def holds(self, key: str) -> bool:
        return key in self._held

    def release(self, admit: Callable[[Held], bool]) -> list[Held]:
        """Take out, in order, every held item ``admit`` accepts (it charges the budget)."""
        out = [item for item in list(self._held.values()) if admit(item)]
        for item in out:
            self._held.pop(item.key, None)
        return out

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[Held]:
        return iter(list(self._held.values()))
