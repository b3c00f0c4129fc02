"""Reminder budgets (spec §7): token buckets with an injected clock, in bounded state.

Pure: no I/O and no clock of its own; every call is given ``now`` (seconds, monotonic).
A bucket holds at most ``burst`` tokens and gains ``rate / 60`` per second; a reminder costs
one (`bridge.state.buckets`: the one algorithm, which the Redis script mirrors).  Buckets live in
`BudgetState`, one object per process that outlives rules reloads, so a key that survives a
reload keeps its tokens.  Per-key buckets are held in a `BucketTable` of at most ``max_keys``
entries, each forgotten once the time an empty bucket takes to fill has passed since its last
charge: it would be full again anyway, so forgetting loses nothing, and a flood of distinct keys
(sessions, tags) can never hold more than ``max_keys`` buckets.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.pending import PendingQueue
from bridge.state.base import Exceeded
from bridge.state.buckets import Bucket, BucketTable, take_tokens
from bridge.state.ops import GLOBAL, Charge, Op, Pay


@dataclass(frozen=True)
class Limit:
    """One bucket a reminder must pay into: which (``scope``), and its configured size and rate."""

    scope: str  # "server:fs", "session:abc", "tag:deploy", "global"
    rate: float  # tokens per minute
    burst: int


class BudgetState:
    """Every bucket in the process: per route and key, plus the global ceiling.

    Outlives rules reloads and is shared by every connection of a route (the stdio transport has
    one, HTTP many), so limits hold per route however many connections there are.
    """

    def __init__(self) -> None:
        self._keyed: dict[tuple[str, str], BucketTable] = {}
        self._global: Bucket | None = None

    def bucket(self, route: str, kind: str, key: str, limit: Limit, max_keys: int, now: float) -> Bucket:
        if kind == GLOBAL:
            if self._global is None:
                self._global = Bucket(float(limit.burst), now)
            return self._global
        fill_s = max(limit.burst * 60.0 / limit.rate, 1e-3)  # an idle bucket is full again after this long
        table = self._keyed.get((route, kind))
        if table is None or table.max_keys != max_keys or table.fill_s != fill_s:
            table = self._keyed[(route, kind)] = BucketTable(max_keys, fill_s, table)
        bucket = table.get(key)
        if bucket is None:  # never charged, or forgotten once full again
            bucket = Bucket(float(limit.burst), now)
        table.put(key, bucket, now)
        return bucket

    def levels(self, route: str, kind: str, now: float, per_second: float, burst: int) -> list[tuple[str, float]]:
        """(key, tokens at ``now``) of every bucket of (``route``, ``kind``), read without refilling;
        ``kind`` GLOBAL: the ceiling's, when it was ever charged."""
        def level(bucket: Bucket) -> float:
            return bucket.level(now, per_second, burst)

        if kind == GLOBAL:
            return [(GLOBAL, level(self._global))] if self._global is not None else []
        table = self._keyed.get((route, kind))
        if table is None:
            return []
        return [(str(key), level(bucket)) for key, bucket in table.items()
                if now - bucket.at < table.fill_s]  # one full again is as good as forgotten

    #: what the driver asks before it performs an op here: in-process, so at once (`perform_now`)
    sync = True

    def perform_now(self, op: Op) -> tuple[Exceeded | None, Exceeded | None]:
        """A `Charge` on this process's buckets: the real ones, then (when they paid) the shadow ones."""
        assert type(op) is Charge, op
        refused = pay(self, op.route, op.real, op.max_keys, op.now) if op.real else None
        if refused is not None or not op.shadow:
            return refused, None
        return None, pay(self, op.route, op.shadow, op.max_keys, op.now)

    def keys_held(self, route: str | None = None) -> int:
        """How many per-key buckets are held (for tests and the admin port)."""
        return sum(len(t) for (r, _), t in self._keyed.items() if route in (None, r))


def take(state: BudgetState, route: str, charges: Iterable[tuple[str, str, Limit]], max_keys: int,
         now: float) -> Exceeded | None:
    """Charge one token to every bucket in ``charges`` ((kind, key, limit) each), all or none.

    Returns None when every bucket had a token (all are charged), else the most constrained
    refusal (the longest wait) and charges nothing.
    """
    return pay(state, route, [Pay(kind, key, limit.scope, limit.rate, limit.burst) for kind, key, limit in charges],
               max_keys, now)


def pay(state: BudgetState, route: str, pays: Sequence[Pay], max_keys: int, now: float) -> Exceeded | None:
    """`take` for the buckets a `Charge` names (a `Pay` has what `BudgetState.bucket` reads of a `Limit`)."""
    found = []  # a loop, not a comprehension: one frame less, and most charges pay one bucket
    for p in pays:
        bucket = state.bucket(route, p.kind, p.key, p, max_keys, now)  # type: ignore[arg-type]
        found.append((bucket, p.rate / 60.0, p.burst))
    refused = take_tokens(found, now, [])
    if refused is None:
        return None
    index, level, wait = refused
    limit = pays[index]
    return Exceeded(limit.scope, limit.burst, int(level), max(wait, 1), limit.rate)


@dataclass
class Coalesced:
    """A notification held by `coalesce` until its bucket has a token again: data, and ``deliver``,
    the typed continuation that sends it then (a `Step`: ``deliver.run(reminder, *deliver.args)``,
    a bound method, never a closure)."""

    key: str
    reminder: Any
    deliver: Any
    context: Any = None


class Coalescer(PendingQueue[Coalesced]):
    """The newest over-budget notification per key (`held_key`: its dedupe key, else its own id),
    in the order the newest ones arrived, bounded as every pending queue; ``wake_at``: when the
    first held item's bucket has a token again (monotonic seconds), or None."""

    __slots__ = ("wake_at",)

    def __init__(self) -> None:
        super().__init__()
        self.wake_at: float | None = None

    def release(self, admit: Callable[[Coalesced], bool]) -> list[Coalesced]:
        """Take out, in order, every held item ``admit`` accepts (it charges the budget)."""
        out = [item for item in self if admit(item)]
        for item in out:
            self.pop(item.key)
        return out
