"""The one token-bucket algorithm (spec §7), in process: `BudgetState` (a route's own buckets) and
`MemoryState` (the fallback while Redis is away) both charge with `take_tokens`, and the Redis
script (`redis_backend.CHARGE`) does the same arithmetic line by line, so every backend decides alike.

A bucket holds at most ``burst`` tokens and gains ``per_second`` tokens a second; a reminder costs
one.  Reading a level writes nothing: only a successful charge does (as in the script).
"""
from __future__ import annotations

from collections.abc import Sequence

from bridge.state.base import wait_ms


class Bucket:
    __slots__ = ("tokens", "at")

    def __init__(self, tokens: float, at: float):
        self.tokens = tokens
        self.at = at

    def level(self, now: float, per_second: float, burst: int) -> float:
        """Tokens at ``now``, never above ``burst``."""
        tokens = self.tokens + (now - self.at) * per_second if now > self.at else self.tokens
        return float(burst) if tokens > burst else tokens


def take_tokens(found: Sequence[tuple[Bucket | None, float, int]], now: float,
                made: list[Bucket]) -> tuple[int, float, int] | None:
    """One token from every (bucket, per_second, burst) of ``found``, all or none (a bucket None is
    full: never charged, or forgotten).  None when every one paid: the buckets are charged, and
    ``made`` gets, in order, the bucket each now is (new ones included) to keep; else (index of the
    most constrained, its level, milliseconds until it holds a token) and nothing is charged."""
    levels = []
    worst: tuple[int, float, int] | None = None
    for i, (bucket, per_second, burst) in enumerate(found):
        level = float(burst) if bucket is None else bucket.level(now, per_second, burst)
        levels.append(level)
        if level < 1.0:
            wait = wait_ms(level, per_second)
            if worst is None or wait > worst[2]:
                worst = (i, level, wait)
    if worst is not None:
        return worst
    for (bucket, _, _), level in zip(found, levels):
        if bucket is None:
            bucket = Bucket(level, now)
        bucket.tokens = level - 1.0
        if now > bucket.at:
            bucket.at = now
        made.append(bucket)
    return None


class BucketTable:
    """The buckets of one kind, by key: at most ``max_keys``, and each forgotten once ``fill_s``
    passed since its last charge (it reads full again by then, so forgetting it loses nothing).

    A plain dict in the order keys were last used, trimmed from its oldest end as keys are used:
    the hot path (one lookup and one move per charge) costs two dict operations, where a
    `cachetools.TTLCache` runs its timer and linked list on every read and write.  A bucket is
    never read through its expiry: a bucket past its fill time is full whatever it says, so reads
    need no clock.
    """

    __slots__ = ("max_keys", "fill_s", "_by_key")

    def __init__(self, max_keys: int, fill_s: float, old: BucketTable | None = None):
        self.max_keys = max_keys
        self.fill_s = fill_s
        self._by_key: dict[object, Bucket] = {}
        if old is not None:  # a reload changed the size or the rate: keep the newest that fit
            for key, bucket in list(old._by_key.items())[-max_keys:]:
                self._by_key[key] = bucket

    def get(self, key: object) -> Bucket | None:
        return self._by_key.get(key)

    def pop(self, key: object) -> Bucket | None:
        return self._by_key.pop(key, None)

    def put(self, key: object, bucket: Bucket, now: float) -> None:
        """``bucket`` is ``key``'s, used at ``now``: the newest; what is full again or over the bound goes."""
        by_key = self._by_key
        if by_key.pop(key, None) is None and len(by_key) >= self.max_keys:
            del by_key[next(iter(by_key))]
        by_key[key] = bucket
        oldest = next(iter(by_key))  # the least recently used: trimmed one per use, so the cost stays flat
        if oldest != key and now - by_key[oldest].at >= self.fill_s:
            del by_key[oldest]

    def expire(self, now: float) -> None:
        """Forget every bucket full again at ``now`` (what a count of the live ones wants first)."""
        for key in [key for key, bucket in self._by_key.items() if now - bucket.at >= self.fill_s]:
            del self._by_key[key]

    def items(self) -> list[tuple[object, Bucket]]:
        return list(self._by_key.items())

    def __len__(self) -> int:
        return len(self._by_key)
