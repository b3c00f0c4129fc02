"""Redis with a safety net: what a replica does when the shared state cannot be reached.

Why this shape: Redis being down, slow or restarting must never stall ordinary traffic, and must not
flood the logs.  The first operation that fails (connection refused or reset, a socket timeout, a
Redis that refuses writes) marks the backend *degraded*, logs one line and starts a background probe;
from then on no operation touches Redis (so none waits for a timeout) until the probe (a small write,
with exponential backoff from 50 ms to 1 s) succeeds, which logs one recovery line.

While degraded, ``on_unavailable`` says what reminders get:

- ``open``: the replica's own `MemoryState` (budgets per replica, queues and records local), counted
  in ``fallback_ops``;
- ``closed``: `StateUnavailable` at once, counted in ``refused_ops``; flows answer reminder requests
  with -32000 ``scope = "state"`` and hold or drop reminder notifications.

Records are also written through to memory while Redis is up, so an outage does not forget the
sessions this replica has seen; queue takes and record reads after an
outage also collect what was written to memory meanwhile, so nothing queued during it is stranded.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from bridge.state.base import BucketCharge, StateUnavailable
from bridge.state.memory import MemoryState
from bridge.state.redis_backend import RedisState
from bridge.urls import redact

if TYPE_CHECKING:
    from bridge.policy.budget import Exceeded

OnUnavailable = Literal["open", "closed"]
#: error replies that mean "Redis cannot serve writes right now", not "this command is wrong"
_UNAVAILABLE_REPLIES = ("LOADING", "BUSY", "MASTERDOWN", "READONLY", "OOM", "NOREPLICAS", "TRYAGAIN",
                        "CLUSTERDOWN", "MISCONF")


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the backend is unreachable or refusing service (vs a programming error)."""
    if isinstance(exc, (TimeoutError, OSError)):
        return True
    try:
        from redis.exceptions import ConnectionError, ResponseError, TimeoutError as RedisTimeout
    except ImportError:  # pragma: no cover - the redis extra is what builds a RedisState at all
        return False
    if isinstance(exc, (ConnectionError, RedisTimeout)):  # includes auth failures and LOADING
        return True
    return isinstance(exc, ResponseError) and str(exc).lstrip().upper().startswith(_UNAVAILABLE_REPLIES)


def _no_log(event: str, **fields: Any) -> None:
    pass


class FailoverState:
    """`RedisState` when it answers, ``fallback`` (open) or `StateUnavailable` (closed) when not."""

    def __init__(self, primary: RedisState, fallback: MemoryState, on_unavailable: OnUnavailable = "open",
                 log: Callable[..., Any] | None = None, *, probe_min_s: float = 0.05, probe_max_s: float = 1.0):
        if on_unavailable not in ("open", "closed"):
            raise ValueError(f'on_unavailable must be "open" or "closed" (got {on_unavailable!r})')
        self.primary = primary
        self.fallback = fallback
        self.on_unavailable = on_unavailable
        self.log = log or _no_log
        self.probe_min_s = probe_min_s
        self.probe_max_s = probe_max_s
        #: every call to the primary ends by then, whatever the client does (socket timeouts come first)
        self.deadline_s = primary.timeout_s * 2 + 0.05
        self.degraded = False
        self.outages = 0
        self.fallback_ops = 0
        self.refused_ops = 0
        self._since = 0.0
        self._ops_at_outage = 0
        self._probe: asyncio.Task | None = None
        self._closed = False

    name = "redis"

    def stats(self) -> dict[str, Any]:
        """For /readyz and /metrics."""
        return {"backend": "redis", "degraded": self.degraded, "on_unavailable": self.on_unavailable,
                "outages": self.outages, "fallback_ops": self.fallback_ops, "refused_ops": self.refused_ops,
                "script_reloads": self.primary.script_reloads}

    def families(self) -> list[tuple[str, str, str, list[tuple[str, dict[str, str], float]]]]:
        """Metrics for the admin port (`bridge.telemetry.register_collector`)."""
        labels = {"backend": "redis", "on_unavailable": self.on_unavailable}
        return [
            ("reminder_bridge_state_degraded", "gauge",
             "1 while the shared state (Redis) is unavailable and this replica serves per on_unavailable.",
             [("", labels, 1.0 if self.degraded else 0.0)]),
            ("reminder_bridge_state_outages_total", "counter", "Times the shared state became unavailable.",
             [("", labels, float(self.outages))]),
            ("reminder_bridge_state_unavailable_ops_total", "counter",
             "State operations Redis could not serve, by what this replica did instead (memory: open; refused: "
             "closed).",
             [("", {**labels, "served_by": "memory"}, float(self.fallback_ops)),
              ("", {**labels, "served_by": "refused"}, float(self.refused_ops))]),
        ]

    def degraded_reason(self) -> str | None:
        """For /readyz: why this replica is degraded (still ready: ordinary traffic flows), or None."""
        if not self.degraded:
            return None
        serving = "per-replica memory" if self.on_unavailable == "open" else "refusing reminder requests"
        return f"shared state unavailable ({redact(self.primary.url)}), serving {serving}"

    # -- outage bookkeeping ----------------------------------------------------------------------------

    def _outage(self, exc: BaseException) -> None:
        if self.degraded or self._closed:
            return
        self.degraded = True
        self.outages += 1
        self._since = time.monotonic()
        self._ops_at_outage = self.fallback_ops + self.refused_ops
        self.log("state_unavailable", backend="redis", url=redact(self.primary.url),
                 on_unavailable=self.on_unavailable, error=f"{type(exc).__name__}: {exc}"[:300],
                 serving="per-replica memory" if self.on_unavailable == "open" else "refusals (scope=state)")
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._recover())

    async def _recover(self) -> None:
        delay = self.probe_min_s
        while not self._closed:
            await asyncio.sleep(delay)
            try:
                async with asyncio.timeout(self.deadline_s):
                    await self.primary.probe()
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = min(delay * 2, self.probe_max_s)
                continue
            self.degraded = False
            self.log("state_recovered", backend="redis", url=redact(self.primary.url),
                     down_ms=round((time.monotonic() - self._since) * 1000),
                     ops_while_down=self.fallback_ops + self.refused_ops - self._ops_at_outage)
            return

    async def _primary(self, op: str, *args: Any, **kwargs: Any) -> tuple[bool, Any]:
        """(True, result) from Redis, or (False, None) when it is (now) unavailable."""
        if self.degraded:
            return False, None
        try:
            async with asyncio.timeout(self.deadline_s):
                return True, await getattr(self.primary, op)(*args, **kwargs)
        except Exception as exc:
            if not unavailable(exc):
                raise
            self._outage(exc)
            return False, None

    def _down(self) -> None:
        """Account for one operation Redis could not serve; raises in `closed` mode."""
        if self.on_unavailable == "closed":
            self.refused_ops += 1
            raise StateUnavailable(cause="redis unavailable")
        self.fallback_ops += 1

    # -- the API ---------------------------------------------------------------------------------------

    async def start(self) -> bool:
        """Optional at startup: find out now whether Redis answers (False: degraded, logged once)."""
        ok, _ = await self._primary("probe")
        return ok

    async def charge(self, charges: Sequence[BucketCharge]) -> "Exceeded | None":
        ok, result = await self._primary("charge", charges)
        if ok:
            return result
        self._down()
        return self.fallback.charge_now(charges)

    async def levels(self, charges: Sequence[BucketCharge]) -> list[float]:
        ok, result = await self._primary("levels", charges)
        if ok:
            return result
        self._down()
        return self.fallback.levels_now(charges)

    async def queue_push(self, key: str, item_id: str, item: str, *, dedupe_key: str | None, limit: int,
                         ttl_s: float) -> tuple[list[str], list[str]]:
        ok, result = await self._primary("queue_push", key, item_id, item, dedupe_key=dedupe_key, limit=limit,
                                         ttl_s=ttl_s)
        if ok:
            return result
        self._down()
        return self.fallback.queue_push_now(key, item_id, item, dedupe_key=dedupe_key, limit=limit, ttl_s=ttl_s)

    async def queue_take(self, key: str) -> list[str]:
        ok, result = await self._primary("queue_take", key)
        if ok:  # plus whatever this replica queued locally during an outage (older, so first)
            return self.fallback.queue_take_now(key) + result
        self._down()
        return self.fallback.queue_take_now(key)

    async def queue_len(self, key: str) -> int:
        ok, result = await self._primary("queue_len", key)
        if ok:
            return result + self.fallback.queue_len_now(key)
        self._down()
        return self.fallback.queue_len_now(key)

    async def put_record(self, key: str, record: dict[str, Any], ttl_s: float) -> None:
        self.fallback.put_record_now(key, record, ttl_s)  # written through: readable during an outage
        ok, _ = await self._primary("put_record", key, record, ttl_s)
        if not ok:
            self._down()

    async def get_record(self, key: str, *, ttl_s: float | None = None) -> dict[str, Any] | None:
        ok, result = await self._primary("get_record", key, ttl_s=ttl_s)
        if ok and result is not None:
            return result
        if not ok:
            self._down()
        return self.fallback.get_record_now(key, ttl_s=ttl_s)

    async def close(self) -> None:
        self._closed = True
        if self._probe is not None:
            self._probe.cancel()
            try:
                await self._probe
            except (asyncio.CancelledError, Exception):
                pass
        await self.primary.close()
        await self.fallback.close()
