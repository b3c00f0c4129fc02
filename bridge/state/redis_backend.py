"""The shared state backend: Redis (or Valkey), through `redis.asyncio`.

Why server-side scripts: a budget checked by one replica and charged by another is not a budget.
A charge reads, refills and decrements every bucket of a reminder in ONE Lua script, by the server's
clock (`TIME`), all or none, and computes ``retry_after_ms`` there, so two replicas charging the same
bucket at the same instant are serialised by Redis and the fleet-wide rate is exact.  Queue pushes
(dedupe + limit + TTL) are one script too; takes read and delete in one script.

Scripts run through redis-py's `register_script`: EVALSHA (the SHA is computed locally), and on a
NOSCRIPT reply (Redis restarted or `SCRIPT FLUSH`) SCRIPT LOAD and EVALSHA again; whatever that
raises goes to `FailoverState` and its one classifier like any error.  Every key written has a TTL:
a bucket's is the time an empty bucket takes to fill (at least 1 s), since by then it is full and
"absent" means "full"; a queue and a record expire ``ttl_s`` after their last write.

Standalone Redis only (or a primary with replicas behind Sentinel-style failover): a reminder's
buckets are arbitrary keys, which Redis Cluster could not update in one script.

Socket and connect timeouts are short (default 0.25 s) and a command is retried at most once, and
only after a connection error (a stale pooled socket after a restart), never after a timeout: a slow
or stopped Redis costs one timeout, then `FailoverState` stops asking it until a probe succeeds.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bridge.pending import PENDING_BYTES
from bridge.state.base import BucketCharge, Exceeded, exceeded, ttl_ms, unique
from bridge.state.failures import MalformedAnswer
from bridge.state.ops import Charge, Op, QueueCount, QueuePush, QueueTake


DEFAULT_PREFIX = "reminder-bridge:"
DEFAULT_TIMEOUT_S = 0.25

# ARGV[1]: now in seconds, or "" for the server's clock (tests pin it to compare with MemoryState).
_NOW = """
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
else
  now = tonumber(ARGV[1])
end
local function level_of(key, per_s, burst)
  local held = redis.call('HMGET', key, 't', 'at')
  if not held[1] then return burst, now end
  local level, at = tonumber(held[1]), tonumber(held[2])
  if now > at then level = level + (now - at) * per_s; at = now end
  if level > burst then level = burst end
  return level, at
end
"""

# KEYS: the buckets.  ARGV: now, then rate per minute and burst per bucket.  The arithmetic of
# `bridge.state.buckets.take_tokens`, line by line (the in-process backends charge with that).
# Returns 0 when every bucket paid a token, else {index of the worst bucket, its level, retry_after_ms}.
CHARGE = _NOW + """
local n = #KEYS
local levels, ats = {}, {}
local worst, worst_wait = 0, -1
for i = 1, n do
  local per_s = tonumber(ARGV[2 * i]) / 60
  local burst = tonumber(ARGV[2 * i + 1])
  local level, at = level_of(KEYS[i], per_s, burst)
  levels[i], ats[i] = level, at
  if level < 1 then
    local wait = math.ceil((1 - level) / per_s * 1000)
    if wait > worst_wait then worst, worst_wait = i, wait end
  end
end
if worst > 0 then
  return {worst, string.format('%.17g', levels[worst]), math.max(worst_wait, 1)}
end
for i = 1, n do
  local per_s = tonumber(ARGV[2 * i]) / 60
  local burst = tonumber(ARGV[2 * i + 1])
  redis.call('HSET', KEYS[i], 't', string.format('%.17g', levels[i] - 1), 'at', string.format('%.17g', ats[i]))
  redis.call('PEXPIRE', KEYS[i], math.max(1000, math.ceil(burst / per_s * 1000)))
end
return 0
"""

# Same KEYS/ARGV as CHARGE; returns each bucket's level (as text: Redis truncates Lua numbers).
LEVELS = _NOW + """
local out = {}
for i = 1, #KEYS do
  local level = level_of(KEYS[i], tonumber(ARGV[2 * i]) / 60, tonumber(ARGV[2 * i + 1]))
  out[i] = string.format('%.17g', level)
end
return out
"""

# KEYS: the queue's id list, its hash (i:<id> → item, d:<id> → dedupe key, k:<dedupe key> → id, b → bytes held).
# ARGV: id, item, dedupe key ('' = none), limit, ttl in ms, most bytes.  Returns {replaced ids, pushed-out ids}.
# The rules of every pending queue (`bridge.pending.PendingQueue`), fleet-wide.
QUEUE_PUSH = """
local list, meta = KEYS[1], KEYS[2]
local id, item, dedupe = ARGV[1], ARGV[2], ARGV[3]
local limit, ttl, most = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local function forget(old)
  local d = redis.call('HGET', meta, 'd:' .. old)
  redis.call('HINCRBY', meta, 'b', -redis.call('HSTRLEN', meta, 'i:' .. old))
  redis.call('HDEL', meta, 'i:' .. old, 'd:' .. old)
  if d and redis.call('HGET', meta, 'k:' .. d) == old then redis.call('HDEL', meta, 'k:' .. d) end
end
local replaced, evicted = {}, {}
if dedupe ~= '' then
  local old = redis.call('HGET', meta, 'k:' .. dedupe)
  if old and old ~= id then
    redis.call('LREM', list, 1, old); forget(old); replaced[#replaced + 1] = old
  end
end
if redis.call('HEXISTS', meta, 'i:' .. id) == 1 then redis.call('LREM', list, 1, id); forget(id) end
redis.call('RPUSH', list, id)
redis.call('HSET', meta, 'i:' .. id, item)
local held = redis.call('HINCRBY', meta, 'b', string.len(item))
if dedupe ~= '' then redis.call('HSET', meta, 'd:' .. id, dedupe, 'k:' .. dedupe, id) end
local count = redis.call('LLEN', list)
while count > 0 and (count > limit or held > most) do
  local oldest = redis.call('LPOP', list)
  forget(oldest); evicted[#evicted + 1] = oldest
  count, held = count - 1, tonumber(redis.call('HGET', meta, 'b'))
end
redis.call('PEXPIRE', list, ttl)
redis.call('PEXPIRE', meta, ttl)
return {replaced, evicted}
"""

# KEYS: the id list and the hash.  Returns the items in arrival order and deletes both keys.
QUEUE_TAKE = """
local ids = redis.call('LRANGE', KEYS[1], 0, -1)
local out = {}
for first = 1, #ids, 500 do
  local fields = {}
  for i = first, math.min(first + 499, #ids) do fields[#fields + 1] = 'i:' .. ids[i] end
  local items = redis.call('HMGET', KEYS[2], unpack(fields))
  for _, item in ipairs(items) do if item then out[#out + 1] = item end end
end
redis.call('DEL', KEYS[1], KEYS[2])
return out
"""


#: the logical key of every probe key (bucket, queue, record): flows always name theirs "<route>:…"
PROBE_KEY = "(probe)"
PROBE_TTL_S = 10.0
#: the most round trips `RedisState.probe` makes: 7 commands, 4 of them scripts Redis may have to be
#: sent again (EVALSHA, SCRIPT LOAD, EVALSHA)
PROBE_ROUND_TRIPS = 15


@contextmanager
def _shaped(what: str, answer: Any) -> Iterator[None]:
    """Reading ``answer`` failed: Redis answered, but not as ``what`` does (`MalformedAnswer`)."""
    try:
        yield
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise MalformedAnswer(f"{what} answered {type(answer).__name__}: {exc}") from None


def _strings(items: Any) -> list[str]:
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise TypeError("not a list of strings")
    return items


class RedisState:
    """Shared state in one Redis database, every key under ``key_prefix``.

    ``client``: an existing `redis.asyncio.Redis` (decode_responses=True) instead of one built from
    ``url``.  ``clock``: tests only; seconds handed to the scripts instead of the server's `TIME`.
    """

    name = "redis"
    #: performed asynchronously (`perform`); `FailoverState` is its only caller in the proxy
    sync = False

    def __init__(self, url: str, *, key_prefix: str = DEFAULT_PREFIX, timeout_s: float = DEFAULT_TIMEOUT_S,
                 client: Any = None, clock: Callable[[], float] | None = None):
        self.url = url
        self.key_prefix = key_prefix
        self.timeout_s = timeout_s
        self.clock = clock
        if client is None:
            from redis.asyncio import Redis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
            from redis.exceptions import ConnectionError as RedisConnectionError

            client = Redis.from_url(url, decode_responses=True, socket_timeout=timeout_s,
                                    socket_connect_timeout=timeout_s, health_check_interval=0,
                                    retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)))
        self.redis = client
        self._charge, self._levels, self._push, self._take = (
            client.register_script(source) for source in (CHARGE, LEVELS, QUEUE_PUSH, QUEUE_TAKE))

    # -- keys: one namespace per kind, so logical keys of different kinds never collide -----------------

    def bucket_key(self, key: str) -> str:
        return f"{self.key_prefix}b:{key}"

    def queue_keys(self, key: str) -> tuple[str, str]:
        return f"{self.key_prefix}q:{key}", f"{self.key_prefix}qm:{key}"

    def record_key(self, key: str) -> str:
        return f"{self.key_prefix}r:{key}"

    def _bucket_args(self, charges: Sequence[BucketCharge]) -> tuple[list[str], list[Any]]:
        keys = [self.bucket_key(c.key) for c in charges]
        args: list[Any] = ["" if self.clock is None else repr(float(self.clock()))]
        for c in charges:
            args += [repr(float(c.rate_per_min)), c.burst]
        return keys, args

    # -- the API: every answer is checked for the shape the script or command gives ------------------

    async def perform(self, op: Op) -> Any:
        """What ``op`` gives (see `bridge.state.ops`); raises what Redis raised (`FailoverState` judges)."""
        kind = type(op)
        if kind is Charge:
            refused = await self.charge(op.shared(op.real)) if op.real else None  # type: ignore[union-attr]
            if refused is not None or not op.shadow:  # type: ignore[union-attr]
                return refused, None
            return None, await self.charge(op.shared(op.shadow))  # type: ignore[union-attr]
        if kind is QueuePush:
            return await self.queue_push(op.key, op.item_id, op.item, dedupe_key=op.dedupe_key,  # type: ignore[union-attr]
                                         limit=op.limit, ttl_s=op.ttl_s)  # type: ignore[union-attr]
        if kind is QueueTake:
            return await self.queue_take(op.key)
        if kind is QueueCount:
            return await self.queue_len(op.key)
        raise TypeError(f"not a state op: {op!r}")

    async def charge(self, charges: Sequence[BucketCharge]) -> Exceeded | None:
        charges = unique(charges)
        if not charges:
            return None
        keys, args = self._bucket_args(charges)
        answer = await self._charge(keys, args)
        if answer == 0:
            return None
        with _shaped("CHARGE", answer):
            index, level, wait = answer
            if not 1 <= int(index) <= len(charges):
                raise IndexError(f"bucket {index} of {len(charges)}")
            return exceeded(charges[int(index) - 1], float(level), int(wait))

    async def levels(self, charges: Sequence[BucketCharge]) -> list[float]:
        if not charges:
            return []
        keys, args = self._bucket_args(charges)
        answer = await self._levels(keys, args)
        with _shaped("LEVELS", answer):
            levels = [float(v) for v in answer]
            if len(levels) != len(charges):
                raise ValueError(f"{len(levels)} levels for {len(charges)} buckets")
            return levels

    async def queue_push(self, key: str, item_id: str, item: str, *, dedupe_key: str | None, limit: int,
                         ttl_s: float) -> tuple[list[str], list[str]]:
        answer = await self._push(self.queue_keys(key), [item_id, item, dedupe_key or "", int(limit), ttl_ms(ttl_s),
                                                         PENDING_BYTES])
        with _shaped("QUEUE_PUSH", answer):
            replaced, evicted = answer
            return _strings(replaced), _strings(evicted)

    async def queue_take(self, key: str) -> list[str]:
        answer = await self._take(self.queue_keys(key), [])
        with _shaped("QUEUE_TAKE", answer):
            return _strings(answer)

    async def queue_len(self, key: str) -> int:
        answer = await self.redis.llen(self.queue_keys(key)[0])
        with _shaped("LLEN", answer):
            return int(answer)

    async def put_record(self, key: str, record: dict[str, Any], ttl_s: float) -> None:
        await self.redis.set(self.record_key(key), json.dumps(record, separators=(",", ":")), px=ttl_ms(ttl_s))

    async def get_record(self, key: str, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        name = self.record_key(key)
        text = await (self.redis.get(name) if ttl_s is None else self.redis.getex(name, px=ttl_ms(ttl_s)))
        if text is None:
            return None
        with _shaped("GET", text):
            record = json.loads(text)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
            return record

    async def probe(self) -> None:
        """Each kind of command the proxy relies on, on keys of its own that expire: both budget
        scripts (by the server's `TIME`), both queue scripts, `LLEN`, a record write and a sliding
        read.  Succeeds only when every one does, so an outage ends, and /readyz says ready, only
        when reminders can be served again: not when a PING answers while Redis is loading, full,
        read-only, or refusing a command by ACL.  Raises what the first refusal raised."""
        bucket = BucketCharge(PROBE_KEY, 60_000_000, 1_000_000)  # refills within a microsecond: never empty
        await self.charge([bucket])
        await self.levels([bucket])
        await self.queue_push(PROBE_KEY, "probe", "{}", dedupe_key="probe", limit=1, ttl_s=PROBE_TTL_S)
        await self.queue_len(PROBE_KEY)
        await self.queue_take(PROBE_KEY)
        await self.put_record(PROBE_KEY, {}, PROBE_TTL_S)
        await self.get_record(PROBE_KEY, ttl_s=PROBE_TTL_S)

    async def close(self) -> None:
        await self.redis.aclose()
