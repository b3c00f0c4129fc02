"""The embedded state backend: one process, no network, every table bounded.

What runs when no `[state] url` is configured, and what `FailoverState` serves from (per replica)
while Redis is unreachable in `open` mode.  Each kind of state lives in a `cachetools` TTL cache
whose entries expire on their own (a bucket: after the time it takes to fill; a queue, a
record: ``ttl_s`` after it was written) and whose size is capped, so a flood of distinct keys
evicts the least recently used instead of growing without end.  A bucket evicted early is treated as
full when it comes back: the budget loosens for that key, memory does not grow.

Decisions are the same as `bridge.policy.budget.take()` and as the Redis script: tests run one
scenario against both.  The clock is injectable (seconds, monotonic).  `perform_now` is the one
entry the driver uses (an op of `bridge.state.ops`, at once: nothing here waits); the ``*_now``
methods are what it runs, and what `FailoverState` serves from while Redis is away.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from cachetools import TLRUCache

from bridge.pending import PendingQueue
from bridge.state.base import BucketCharge, Exceeded, exceeded, unique
from bridge.state.buckets import Bucket, BucketTable, take_tokens
from bridge.state.ops import Charge, Op, QueueCount, QueuePush, QueueTake


DEFAULT_MAX_KEYS = 100_000


class _Entry:
    __slots__ = ("value", "ttl")

    def __init__(self, value: Any, ttl: float):
        self.value = value
        self.ttl = ttl


def _ttu(_key: Any, value: Any, now: float) -> float:
    return now + value.ttl


class MemoryState:
    """Bounded in-process state. ``max_keys``: the most queues and records (each), and buckets
    per distinct fill time (rate and burst)."""

    name = "memory"
    #: in-process: the driver performs an op here at once (`perform_now`), in the same call
    sync = True

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, max_keys: int = DEFAULT_MAX_KEYS):
        self.clock = clock
        self.max_keys = max_keys
        # buckets: one table per fill time; there are as few as distinct (rate, burst) pairs in the rules
        self._buckets: dict[float, BucketTable] = {}
        self._queues: TLRUCache = TLRUCache(maxsize=max_keys, ttu=_ttu, timer=clock)
        self._records: TLRUCache = TLRUCache(maxsize=max_keys, ttu=_ttu, timer=clock)

    # -- budgets ---------------------------------------------------------------------------------------

    def _table(self, fill_s: float) -> BucketTable:
        table = self._buckets.get(fill_s)
        if table is None:
            table = self._buckets[fill_s] = BucketTable(self.max_keys, fill_s)
        return table

    def _bucket(self, charge: BucketCharge, now: float) -> Bucket | None:
        table = self._table(charge.fill_s)
        bucket = table.get(charge.key)
        if bucket is not None or len(self._buckets) == 1:
            return bucket
        for fill_s, other in self._buckets.items():  # its rate or burst changed (a reload): move it over, tokens and all
            if fill_s != charge.fill_s and (bucket := other.pop(charge.key)) is not None:
                table.put(charge.key, bucket, now)
                return bucket
        return None

    def charge_now(self, charges: Sequence[BucketCharge]) -> Exceeded | None:
        now = self.clock()
        charges = unique(charges)
        made: list[Bucket] = []
        refused = take_tokens([(self._bucket(c, now), c.per_second, c.burst) for c in charges], now, made)
        if refused is not None:
            index, level, wait = refused
            return exceeded(charges[index], level, wait)
        for charge, bucket in zip(charges, made):
            self._table(charge.fill_s).put(charge.key, bucket, now)  # the newest: forgotten last
        return None

    def levels_now(self, charges: Sequence[BucketCharge]) -> list[float]:
        now = self.clock()
        out = []
        for charge in charges:
            bucket = self._bucket(charge, now)
            out.append(float(charge.burst) if bucket is None else bucket.level(now, charge.per_second, charge.burst))
        return out

    # -- queues ----------------------------------------------------------------------------------------

    def queue_push_now(self, key: str, item_id: str, item: str, *, dedupe_key: str | None, limit: int,
                       ttl_s: float) -> tuple[list[str], list[str]]:
        """The rules of every pending queue (`bridge.pending`), as the Redis script keeps them."""
        entry = self._queues.get(key)
        queue: PendingQueue[tuple[str, str]] = entry.value if entry is not None else PendingQueue()
        queue.limit = limit
        size = len(item.encode("utf-8", "surrogatepass"))  # bytes, as Redis counts them
        put = queue.put(item_id, (item_id, item), dedupe=dedupe_key or None, size=size)
        replaced = [put.deduped[0]] if put.deduped is not None else []
        evicted = [gone_id for gone_id, _ in put.evicted]
        if queue:
            self._queues[key] = _Entry(queue, ttl_s)
        else:
            self._queues.pop(key, None)
        return replaced, evicted

    def queue_take_now(self, key: str) -> list[str]:
        entry = self._queues.pop(key, None)
        return [] if entry is None else [item for _, item in entry.value.take()]

    def queue_len_now(self, key: str) -> int:
        entry = self._queues.get(key)
        return 0 if entry is None else len(entry.value)

    def queued(self) -> int:
        """Items in every queue (the pending gauge)."""
        return sum(len(entry.value) for entry in list(self._queues.values()))

    # -- records ---------------------------------------------------------------------------------------

    def put_record_now(self, key: str, record: dict[str, Any], ttl_s: float) -> None:
        # stored as JSON, as in Redis: the same values come back, and never the caller's own object
        self._records[key] = _Entry(json.dumps(record, separators=(",", ":")), ttl_s)

    def get_record_now(self, key: str, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        entry = self._records.get(key)
        if entry is None:
            return None
        if ttl_s is not None:
            entry.ttl = ttl_s
            self._records[key] = entry
        return json.loads(entry.value)

    # -- the one entry: an op, performed at once --------------------------------------------------------

    def perform_now(self, op: Op) -> Any:
        """What ``op`` gives (see `bridge.state.ops`)."""
        kind = type(op)
        if kind is Charge:
            refused = self.charge_now(op.shared(op.real)) if op.real else None  # type: ignore[union-attr]
            if refused is not None or not op.shadow:  # type: ignore[union-attr]
                return refused, None
            return None, self.charge_now(op.shared(op.shadow))  # type: ignore[union-attr]
        if kind is QueuePush:
            return self.queue_push_now(op.key, op.item_id, op.item, dedupe_key=op.dedupe_key,  # type: ignore[union-attr]
                                       limit=op.limit, ttl_s=op.ttl_s)  # type: ignore[union-attr]
        if kind is QueueTake:
            return self.queue_take_now(op.key)
        if kind is QueueCount:
            return self.queue_len_now(op.key)
        raise TypeError(f"not a state op: {op!r}")

    # -- the async API (the protocol's, and what tests run against both backends alike) ----------------

    async def perform(self, op: Op) -> Any:
        return self.perform_now(op)

    async def charge(self, charges: Sequence[BucketCharge]) -> Exceeded | None:
        return self.charge_now(charges)

    async def levels(self, charges: Sequence[BucketCharge]) -> list[float]:
        return self.levels_now(charges)

    async def queue_push(self, key: str, item_id: str, item: str, *, dedupe_key: str | None, limit: int,
                         ttl_s: float) -> tuple[list[str], list[str]]:
        return self.queue_push_now(key, item_id, item, dedupe_key=dedupe_key, limit=limit, ttl_s=ttl_s)

    async def queue_take(self, key: str) -> list[str]:
        return self.queue_take_now(key)

    async def queue_len(self, key: str) -> int:
        return self.queue_len_now(key)

    async def put_record(self, key: str, record: dict[str, Any], ttl_s: float) -> None:
        self.put_record_now(key, record, ttl_s)

    async def get_record(self, key: str, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        return self.get_record_now(key, ttl_s=ttl_s)

    async def close(self) -> None:
        pass

    def sizes(self) -> dict[str, int]:
        """Entries held per kind (for tests and the admin port)."""
        now = self.clock()
        for table in self._buckets.values():
            table.expire(now)
        return {"buckets": sum(len(t) for t in self._buckets.values()), "queues": len(self._queues),
                "records": len(self._records)}
