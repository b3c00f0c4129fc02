"""Redis with a safety net: what a replica does when the shared state cannot serve it.

Why this shape: Redis being down, slow, full or refusing must never stall ordinary traffic, must
never let a reminder through undecided, and must not flood the logs.  Every exception an operation
raises is classified by `bridge.state.failures.cause` (by type: connection, timeout, auth, ACL,
OOM, READONLY, loading, any other error reply, an unreadable answer).  The first failure marks the
backend *degraded*, logs one line saying why and starts a background probe; from then on no
operation touches Redis (so none waits for a timeout) until the probe succeeds, which logs one
recovery line.  The probe (`RedisState.probe`) runs every kind of command the proxy needs, budget
script and `TIME` included, with exponential backoff from 50 ms to 1 s: a Redis that answers PING
but refuses the budget script stays an outage.  The start-up check and /readyz run the same probe.

While degraded, ``on_unavailable`` says what reminders get:

- ``open``: the replica's own `MemoryState` (budgets per replica, queues and records local), counted
  in ``fallback_ops``;
- ``closed``: `StateUnavailable` at once, counted in ``refused_ops``; flows answer reminder requests
  with -32000 ``scope = "state"`` and hold or drop reminder notifications.

Each failed call to Redis (probes included) is counted by cause, in a prometheus_client Counter;
the outage bookkeeping (outages, operations served by memory or refused) is the replica's own
record, which its log lines and `stats()` report, and `/metrics` reads it at each scrape
(`collect`).

Records are also written through to memory while Redis is up, so an outage does not forget the
sessions this replica has seen; queue takes and record reads after an
outage also collect what was written to memory meanwhile, so nothing queued during it is stranded.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from bridge.state.base import BucketCharge, Exceeded, StateUnavailable
from bridge.state.ops import Op, QueueCount, QueueTake
from bridge.state.failures import CAUSES, cause, describe
from bridge.state.memory import MemoryState
from bridge.state.redis_backend import PROBE_ROUND_TRIPS, RedisState
from bridge.urls import redact


OnUnavailable = Literal["open", "closed"]
#: /readyz checks a healthy Redis again (the probe) at most this often; while degraded the
#: recovery probe is what checks
READY_CHECK_S = 1.0


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
        #: the probe is several calls in a row: each has the socket timeout, the whole this deadline
        self.probe_deadline_s = self.deadline_s * PROBE_ROUND_TRIPS
        self.degraded = False
        self.outages = 0
        self.fallback_ops = 0
        self.refused_ops = 0
        from prometheus_client import Counter  # here: `bridge.state` is imported by every proxy, shared or not

        #: failed calls to Redis (operations and probes), by `failures.cause` label
        self.failures = Counter("reminder_bridge_state_failures",
                                "Calls to the shared state (operations and probes) that failed, by cause (connection, "
                                "timeout, auth, noperm, oom, readonly, loading, noscript, error, malformed).",
                                ("backend", "on_unavailable", "cause"), registry=None)
        #: why the replica is degraded now: the cause label and the error, as the last failure said
        self.cause: str | None = None
        self.error: str | None = None
        self._since = 0.0
        self._checked = -READY_CHECK_S
        self._ops_at_outage = 0
        self._probe: asyncio.Task | None = None
        self._closed = False

    name = "redis"
    #: the driver performs an op here asynchronously (`perform`), never in the flow's own call
    sync = False

    def stats(self) -> dict[str, Any]:
        """For tests and embedders: the outage bookkeeping, and the failures by cause."""
        failures = {sample.labels["cause"]: int(sample.value) for family in self.failures.collect()
                    for sample in family.samples if sample.name.endswith("_total")}
        return {"backend": "redis", "degraded": self.degraded, "on_unavailable": self.on_unavailable,
                "outages": self.outages, "fallback_ops": self.fallback_ops, "refused_ops": self.refused_ops,
                "failures": failures, "cause": self.cause}

    def collect(self) -> Iterable[Any]:
        """Metrics for the admin port (a prometheus_client collector: `bridge.telemetry.register_collector`)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        names, values = ("backend", "on_unavailable"), ["redis", self.on_unavailable]
        degraded = GaugeMetricFamily(
            "reminder_bridge_state_degraded",
            "1 while the shared state (Redis) is unavailable and this replica serves per on_unavailable.", labels=names)
        degraded.add_metric(values, 1.0 if self.degraded else 0.0)
        outages = CounterMetricFamily("reminder_bridge_state_outages", "Times the shared state became unavailable.",
                                      labels=names)
        outages.add_metric(values, self.outages)
        ops = CounterMetricFamily("reminder_bridge_state_unavailable_ops",
                                  "State operations Redis could not serve, by what this replica did instead (memory: "
                                  "open; refused: closed).", labels=(*names, "served_by"))
        ops.add_metric([*values, "memory"], self.fallback_ops)
        ops.add_metric([*values, "refused"], self.refused_ops)
        return [degraded, outages, ops, *self.failures.collect()]

    def degraded_reason(self) -> str | None:
        """For /readyz: why this replica is degraded (still ready: ordinary traffic flows), or None."""
        if not self.degraded:
            return None
        serving = "serving per-replica memory" if self.on_unavailable == "open" else "refusing reminders"
        return f"shared state unavailable ({redact(self.primary.url)}: {self.cause}: {self.error}), {serving}"

    async def readiness(self) -> str | None:
        """`degraded_reason`, after checking a healthy Redis again with the probe (at most once per
        `READY_CHECK_S`): /readyz says whether the commands the proxy needs succeed, not whether a
        PING answers, even while no reminder has tried them lately."""
        if not self.degraded and time.monotonic() - self._checked >= READY_CHECK_S:
            self._checked = time.monotonic()  # one check at a time, however many probes ask
            await self.check()
        return self.degraded_reason()

    # -- outage bookkeeping ----------------------------------------------------------------------------

    def _failed(self, exc: BaseException, label: str) -> None:
        """One failed call: counted, and the replica degraded (logged once per outage)."""
        self.failures.labels("redis", self.on_unavailable, label).inc()
        self.cause, self.error = label, describe(exc)
        if self.degraded or self._closed:
            return
        self.degraded = True
        self.outages += 1
        self._since = time.monotonic()
        self._ops_at_outage = self.fallback_ops + self.refused_ops
        self.log("state_unavailable", backend="redis", url=redact(self.primary.url),
                 on_unavailable=self.on_unavailable, cause=label, why=CAUSES[label], error=self.error,
                 serving="per-replica memory" if self.on_unavailable == "open" else "refusals (scope=state)")
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._recover())

    async def _probed(self) -> bool:
        """One run of the probe, within the deadline; a failure is counted by cause, not raised
        (an exception the classifier does not know keeps the outage too, as "error")."""
        try:
            async with asyncio.timeout(self.probe_deadline_s):
                await self.primary.probe()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failed(exc, cause(exc) or "error")
            return False
        self._checked = time.monotonic()
        return True

    async def _recover(self) -> None:
        delay = self.probe_min_s
        while not self._closed:
            await asyncio.sleep(delay)
            if not await self._probed():
                delay = min(delay * 2, self.probe_max_s)
                continue
            self.degraded = False
            self.cause = self.error = None
            self.log("state_recovered", backend="redis", url=redact(self.primary.url),
                     down_ms=round((time.monotonic() - self._since) * 1000),
                     ops_while_down=self.fallback_ops + self.refused_ops - self._ops_at_outage)
            return

    async def _primary(self, op: str, *args: Any, **kwargs: Any) -> tuple[bool, Any]:
        """(True, result) from Redis, or (False, None) when it is (now) unavailable.  Raises only what
        is not a state failure at all (a bug)."""
        if self.degraded:
            return False, None
        try:
            async with asyncio.timeout(self.deadline_s):
                return True, await getattr(self.primary, op)(*args, **kwargs)
        except Exception as exc:
            label = cause(exc)
            if label is None:
                raise
            self._failed(exc, label)
            return False, None

    def _down(self) -> None:
        """Account for one operation Redis could not serve; raises in `closed` mode."""
        if self.on_unavailable == "closed":
            self.refused_ops += 1
            raise StateUnavailable(cause=f"redis unavailable: {self.cause}")
        self.fallback_ops += 1

    # -- the API ---------------------------------------------------------------------------------------

    async def check(self) -> bool:
        """Whether every command the proxy needs succeeds now (the probe); False: degraded, logged
        once, served per ``on_unavailable`` and retried in the background.  Never raises, so at
        start-up a Redis that is away, full, read-only or refusing by ACL is one clear log line and
        a degraded start, never a crash."""
        if self.degraded:
            return False
        return await self._probed()

    async def perform(self, op: Op) -> Any:
        """What ``op`` gives (see `bridge.state.ops`), or the `StateUnavailable` that says why not
        (`closed`, and Redis away): a result, never an exception, for the flow that asked."""
        kind = type(op)
        try:
            if kind is QueueTake:
                return await self.queue_take(op.key)  # type: ignore[union-attr]
            if kind is QueueCount:
                return await self.queue_len(op.key)  # type: ignore[union-attr]
            ok, result = await self._primary("perform", op)
            if ok:
                return result
            self._down()
        except StateUnavailable as exc:
            return exc
        return self.fallback.perform_now(op)

    async def charge(self, charges: Sequence[BucketCharge]) -> Exceeded | None:
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
