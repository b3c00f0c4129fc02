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
