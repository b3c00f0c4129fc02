"""Shared state (spec §12) against a real redis-server: the memory and Redis backends decide alike,
a fleet-wide budget is exact across connection pools and processes, every key expires, queues,
and records behave, and Redis dying, restarting or stalling mid-run keeps each mode's promise.
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid

import pytest

from bridge.policy.budget import BudgetState, Exceeded, Limit, take
from tests.paths import ROOT
from tests.peers.processes import eventually
from bridge.state import (BucketCharge, FailoverState, MemoryState, RedisState, StateBackend, StateUnavailable,
                          open_state)
from tests.unit.state.test_memory import Clock



def prefix() -> str:
    return f"rb-test-{uuid.uuid4().hex[:12]}:"


@pytest.fixture(params=["memory", "redis"])
async def pinned(request):
    """(backend, clock): either backend, refilling by the same pinned clock, so decisions compare exactly."""
    clock = Clock()
    if request.param == "memory":
        state = MemoryState(clock=clock)
    else:
        state = RedisState(request.getfixturevalue("redis_url"), key_prefix=prefix(), clock=clock)
    yield state, clock
    await state.close()


@pytest.fixture(params=["memory", "redis"])
async def backend(request):
    """Either backend on its real clock."""
    if request.param == "memory":
        state = MemoryState()
    else:
        state = RedisState(request.getfixturevalue("redis_url"), key_prefix=prefix())
    yield state
    await state.close()


# -- budgets: the same decisions as bridge.policy.budget.take(), in both backends -----------------------

A = BucketCharge("fs:server:fs", 60, 3, scope="server:fs")  # one token a second
B = BucketCharge("global", 30, 5, scope="global")  # one every two seconds
C = BucketCharge("fs:tag:ci", 120, 1, scope="tag:ci")  # two a second

# (seconds to advance, buckets to charge, expected: None = charged, else (scope, remaining, retry_after_ms))
SCENARIO = [
    (0, [A, B], None), (0, [A, B], None), (0, [A, B], None),
    (0, [A, B], ("server:fs", 0, 1000)),  # A is empty; B keeps its 2 tokens (all or nothing)
    (0.25, [A, B], ("server:fs", 0, 750)),
    (0.75, [A, B], None),  # A refilled one token; B had 2 + 0.5
    (0, [B], None),  # B: 0.5 left
    (0, [B], ("global", 0, 1000)),
    (0, [A, B], ("server:fs", 0, 1000)),  # a tie (1000 ms each): the first bucket is named
    (0, [C, B], ("global", 0, 1000)),  # C has a token, B has not: neither is charged
    (0, [C], None),  # C still had its token: the refusal above charged nothing
    (0, [C, B], ("global", 0, 1000)),  # C: 500 ms, B: 1000 ms → the longest wait is named
    (10, [A, B, C], None),  # refilled to the bursts, never above
    (0, [A, A], None),  # a bucket named twice is charged once
]


def _with_take(scenario) -> list:
    """The decisions of the existing in-memory policy (bridge.policy.budget.take) for the scenario."""
    state, now, out = BudgetState(), 1_000.0, []
    for advance, charges, _ in scenario:
        now += advance
        refused = take(state, "r", [("server", c.key, Limit(c.scope, c.rate_per_min, c.burst))
                                    for c in {c.key: c for c in charges}.values()], 100, now)
        out.append(None if refused is None else (refused.scope, refused.remaining, refused.retry_after_ms))
    return out


async def test_both_backends_decide_like_the_policy_budget(pinned):
    state, clock = pinned
    got = []
    for advance, charges, _ in SCENARIO:
        clock.advance(advance)
        refused = await state.charge(charges)
        if refused is not None:
            assert isinstance(refused, Exceeded)  # the policy's own class: Verdict.error() works on it
            assert refused.limit == next(c.burst for c in charges if c.scope == refused.scope)
        got.append(None if refused is None else (refused.scope, refused.remaining, refused.retry_after_ms))
    assert got == [expected for _, _, expected in SCENARIO]
    assert got == _with_take(SCENARIO)
    assert await state.levels([A, B, C, BucketCharge("never", 60, 7)]) == pytest.approx([1.0, 4.0, 0.0, 7.0])


async def test_levels_refill_and_a_refusal_charges_nothing(pinned):
    state, clock = pinned
    for _ in range(3):
        assert await state.charge([A]) is None
    assert await state.levels([A, B]) == pytest.approx([0.0, 5.0])
    refused = await state.charge([B, A])
    assert refused.data() == {"retryAfterMs": 1000, "limit": 3, "remaining": 0, "scope": "server:fs"}
    assert await state.levels([A, B]) == pytest.approx([0.0, 5.0])
    clock.advance(1.5)
    assert await state.levels([A]) == pytest.approx([1.5])
    assert await state.charge([A]) is None
    refused = await state.charge([A])
    assert (refused.remaining, refused.retry_after_ms, refused.rate) == (0, 500, 60)


async def test_redis_refills_by_the_servers_clock(redis_url):
    state = RedisState(redis_url, key_prefix=prefix())
    fast = BucketCharge("fast", 600, 2)  # ten tokens a second
    try:
        assert await state.charge([fast]) is None
        assert await state.charge([fast]) is None
        refused = await state.charge([fast])
        assert refused is not None and 1 <= refused.retry_after_ms <= 100

        async def refilled() -> bool:  # Redis's own clock moves on; the client does nothing but ask
            return await state.charge([fast]) is None

        assert await eventually(refilled, timeout=5, every=refused.retry_after_ms / 1000)
    finally:
        await state.close()


# -- exactness across replicas ---------------------------------------------------------------------------

RATE, BURST, DURATION = 60, 10, 5.0


async def _hammer(state: RedisState, charge: BucketCharge, until: float) -> tuple[int, float, float]:
    """Charge every 5 ms until ``until``: (allowed, when the first answer came, when the last was sent).

    That window lies inside the server-side one (first to last evaluation), so one bucket allows
    ``burst + window * rate`` tokens give or take one, whoever charges it."""
    allowed, first, last = 0, None, 0.0
    while time.time() < until:
        last = time.time()
        if await state.charge([charge]) is None:
            allowed += 1
        first = time.time() if first is None else first
        await asyncio.sleep(0.005)  # the pace of the load, not synchronisation
    return allowed, first, last


def _check_share(results: list[tuple[int, float, float]]) -> None:
    allowed = sum(r[0] for r in results)
    window = max(r[2] for r in results) - min(r[1] for r in results)
    one_bucket = BURST + window * RATE / 60
    assert abs(allowed - one_bucket) <= 1, (allowed, one_bucket, results)
    assert all(r[0] > 0 for r in results), results  # both replicas really took part


async def test_two_connection_pools_share_one_exact_budget(redis_url):
    key_prefix = prefix()
    replicas = [RedisState(redis_url, key_prefix=key_prefix) for _ in range(2)]
    charge = BucketCharge("fleet", RATE, BURST)
    try:
        until = time.time() + DURATION
        results = await asyncio.gather(*(_hammer(r, charge, until) for r in replicas))
    finally:
        for r in replicas:
            await r.close()
    _check_share(list(results))


WORKER = r"""
import asyncio, json, sys
from bridge.state import BucketCharge, RedisState
from tests.integration.test_state import _hammer

async def main(url, key_prefix):
    state = RedisState(url, key_prefix=key_prefix)
    await state.redis.ping()  # connected: ready to charge the moment the go comes
    print("ready", flush=True)
    until = float(sys.stdin.readline())
    result = await _hammer(state, BucketCharge("fleet", 60, 10), until)
    await state.close()
    print(json.dumps(result))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_two_processes_share_one_exact_budget(redis_url):
    key_prefix = prefix()
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, redis_url, key_prefix], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for proc in procs:  # both interpreters up and connected, then both go at once, until the same moment
        assert proc.stdout.readline() == "ready\n", proc.communicate(timeout=30)[1]
    until = time.time() + DURATION
    for proc in procs:
        proc.stdin.write(f"{until!r}\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=DURATION + 30)
        assert proc.returncode == 0, err
        results.append(tuple(json.loads(out)))
    _check_share(results)


# -- every key expires -----------------------------------------------------------------------------------

async def test_every_key_the_redis_backend_writes_has_a_ttl(redis_url):
    key_prefix = prefix()
    state = RedisState(redis_url, key_prefix=key_prefix)
    slow = BucketCharge("slow", 6, 2)  # an empty bucket fills in 20 s
    quick = BucketCharge("quick", 60_000, 1)  # ... in 1 ms: the TTL is still at least 1 s
    try:
        started = time.monotonic()
        assert await state.charge([slow, quick]) is None
        await state.charge([slow])
        await state.queue_push("task-1", "r1", "{}", dedupe_key="d", limit=8, ttl_s=30)
        await state.queue_push("task-2", "r2", "{}", dedupe_key=None, limit=8, ttl_s=30)
        await state.put_record("session-1", {"host": "standard"}, 90)
        await state.get_record("session-1", ttl_s=120)
        await state.levels([slow, quick, BucketCharge("unseen", 60, 1)])
        await state.probe()
        keys = [k async for k in state.redis.scan_iter(match=key_prefix + "*")]
        assert len(keys) == 9  # 2 buckets, 2 × (list + hash), a record, the probe's bucket and record
        ttls = {k[len(key_prefix):]: await state.redis.pttl(k) for k in keys}
        passed_ms = (time.monotonic() - started) * 1000 + 1  # since the first write, at most (a loaded machine)

        def set_to(key: str, ms: int) -> bool:  # the TTL the write set, less no more than the time since
            return ms - passed_ms <= ttls[key] <= ms

        assert all(ttl > 0 for ttl in ttls.values()), ttls
        assert set_to("b:slow", 20_000) and set_to("b:quick", 1_000), (passed_ms, ttls)
        assert set_to("q:task-1", 30_000) and set_to("qm:task-1", 30_000), (passed_ms, ttls)
        assert set_to("r:session-1", 120_000), (passed_ms, ttls)  # get_record(ttl_s=...) slid it
    finally:
        await state.close()


# -- queues, records -------------------------------------------------------------------------------

async def test_queue_push_dedupes_limits_and_take_empties(backend):
    push = backend.queue_push
    assert await push("t", "a", "A", dedupe_key="x", limit=3, ttl_s=60) == ([], [])
    assert await push("t", "b", "B", dedupe_key=None, limit=3, ttl_s=60) == ([], [])
    assert await push("t", "c", "C", dedupe_key="x", limit=3, ttl_s=60) == (["a"], [])
    assert await push("t", "d", "D", dedupe_key="y", limit=3, ttl_s=60) == ([], [])
    assert await push("t", "e", "E", dedupe_key="", limit=3, ttl_s=60) == ([], ["b"])
    assert await push("t", "f", "F", dedupe_key="y", limit=3, ttl_s=60) == (["d"], [])
    assert await push("t", "e", "E2", dedupe_key=None, limit=3, ttl_s=60) == ([], [])  # a retry: replaced
    assert await backend.queue_len("t") == 3
    assert await push("t", "g", "G", dedupe_key=None, limit=1, ttl_s=60) == ([], ["c", "f", "e"])
    assert await push("t", "h", "H", dedupe_key="x", limit=5, ttl_s=60) == ([], [])  # "c" left with its key
    assert await backend.queue_take("t") == ["G", "H"]
    assert await backend.queue_len("t") == 0
    assert await backend.queue_take("t") == []
    assert await push("other", "a", "A", dedupe_key="x", limit=3, ttl_s=60) == ([], [])  # queues are apart
    assert await backend.queue_take("other") == ["A"]
    assert await push("t", "z", "Z", dedupe_key=None, limit=0, ttl_s=60) == ([], ["z"])
    assert await backend.queue_len("t") == 0


async def test_a_queue_is_bounded_in_bytes_on_both_backends(backend):
    """The pending queues' byte bound (`PENDING_BYTES`), fleet-wide as in one process: past it, the
    oldest go, counting what a replaced or pushed-out item held no more."""
    from bridge.pending import PENDING_BYTES
    third = "x" * (PENDING_BYTES // 3)
    push = backend.queue_push
    assert await push("big", "a", third, dedupe_key=None, limit=64, ttl_s=60) == ([], [])
    assert await push("big", "b", third, dedupe_key="k", limit=64, ttl_s=60) == ([], [])
    accented = third[:-2] + "é"  # as many bytes as the others, one character fewer
    assert await push("big", "c", accented, dedupe_key="k", limit=64, ttl_s=60) == (["b"], [])  # b's bytes freed
    assert await push("big", "d", third, dedupe_key=None, limit=64, ttl_s=60) == ([], [])
    assert await push("big", "e", "yy", dedupe_key=None, limit=64, ttl_s=60) == ([], ["a"])  # 2 bytes over
    assert await backend.queue_len("big") == 3
    assert await backend.queue_take("big") == [accented, third, "yy"]


async def test_queues_expire_after_their_last_push(redis_url):
    """Redis expires the keys on its own clock: a queue pushed to once, at the same moment with the
    same time-to-live, shows when the first push's time-to-live is over."""
    state = RedisState(redis_url, key_prefix=prefix())
    try:
        await state.queue_push("t", "a", "A", dedupe_key="x", limit=3, ttl_s=0.2)
        await state.queue_push("once", "c", "C", dedupe_key=None, limit=3, ttl_s=0.2)
        await state.queue_push("t", "b", "B", dedupe_key=None, limit=3, ttl_s=2.0)  # time to look, however loaded

        async def emptied(key: str) -> bool:
            return await state.queue_len(key) == 0

        await eventually(lambda: emptied("once"), timeout=5, every=0.02)  # "t"'s first time-to-live is over
        assert await state.queue_len("t") == 2  # the second push restarted it, for both items
        await eventually(lambda: emptied("t"), timeout=5, every=0.02)
        assert await state.queue_take("t") == []
    finally:
        await state.close()


async def test_a_queue_is_readable_by_another_replica(redis_url):
    key_prefix = prefix()
    one, two = RedisState(redis_url, key_prefix=key_prefix), RedisState(redis_url, key_prefix=key_prefix)
    try:
        await one.queue_push("task-7", "r1", '{"body":"rebase"}', dedupe_key="k", limit=64, ttl_s=60)
        await two.queue_push("task-7", "r2", '{"body":"rebase now"}', dedupe_key="k", limit=64, ttl_s=60)
        assert await two.queue_take("task-7") == ['{"body":"rebase now"}']
        assert await one.queue_take("task-7") == []
    finally:
        await one.close()
        await two.close()


async def test_records_round_trip_and_slide(backend):
    record = {"host": "standard", "peer": "legacy", "protocolVersion": "2025-11-25", "n": [1, 2.5, None]}
    assert await backend.get_record("s1") is None
    await backend.put_record("s1", record, 60)
    got = await backend.get_record("s1")
    assert got == record and got is not record
    got["host"] = "changed"
    assert (await backend.get_record("s1", ttl_s=120))["host"] == "standard"


async def test_a_record_written_by_one_replica_is_read_by_another(redis_url):
    key_prefix = prefix()
    one, two = RedisState(redis_url, key_prefix=key_prefix), RedisState(redis_url, key_prefix=key_prefix)
    other_fleet = RedisState(redis_url, key_prefix=prefix())
    try:
        await one.put_record("mcp:sess-1", {"host": "standard"}, 60)
        assert await two.get_record("mcp:sess-1") == {"host": "standard"}
        assert await other_fleet.get_record("mcp:sess-1") is None  # key_prefix separates fleets
    finally:
        for r in (one, two, other_fleet):
            await r.close()


async def test_both_backends_satisfy_the_protocol(redis_url):
    for state in (MemoryState(), RedisState(redis_url), open_state(redis_url)):
        assert isinstance(state, StateBackend)
        await state.close()


# -- scripts: NOSCRIPT, errors that are not outages ------------------------------------------------------

async def script_loads(redis) -> int:
    """The `SCRIPT LOAD`s a redis-server has run since it started (its command statistics)."""
    return (await redis.info("commandstats")).get("cmdstat_script|load", {}).get("calls", 0)


async def test_a_flushed_script_cache_is_refilled(redis_url):
    state = RedisState(redis_url, key_prefix=prefix())
    try:
        assert await state.charge([A]) is None
        await state.redis.script_flush()
        before = await script_loads(state.redis)
        assert await state.charge([A]) is None  # NOSCRIPT: loaded again, and run
        assert await script_loads(state.redis) == before + 1
        assert await state.charge([A]) is None  # cached again: no second load
        assert await script_loads(state.redis) == before + 1
        assert await state.levels([A]) == pytest.approx([0.0], abs=0.5)  # all three charges took a token
    finally:
        await state.close()


@pytest.mark.parametrize("mode", ["open", "closed"])
async def test_an_error_reply_or_an_unreadable_answer_is_unavailable_never_raised(redis_url, mode):
    """A key of the wrong type or a record that is not a JSON object (someone else writing under the
    prefix) leaves the operation as undecided as a refused connection: it takes `on_unavailable`,
    counted by cause, and the probe (on keys of its own) ends the outage."""
    log = Log()
    primary = RedisState(redis_url, key_prefix=prefix())
    state = FailoverState(primary, MemoryState(), mode, log)
    try:
        await primary.redis.set(primary.bucket_key("taken"), "not a hash")
        await primary.redis.set(primary.record_key("mcp:s1"), "[1, 2]")
        for attempt in (lambda: state.charge([BucketCharge("taken", 60, 1)]), lambda: state.get_record("mcp:s1")):
            if mode == "open":
                assert await attempt() is None  # served by this replica's memory: a full bucket, no record
            else:
                with pytest.raises(StateUnavailable):
                    await attempt()
            await _until(lambda: not state.degraded)
        assert state.stats()["failures"] == {"error": 1, "malformed": 1}
        assert log.events() == ["state_unavailable", "state_recovered"] * 2
        causes = [fields["cause"] for event, fields in log.lines if event == "state_unavailable"]
        assert causes == ["error", "malformed"]
    finally:
        await state.close()


# -- faults: Redis killed, restarted, stopped ------------------------------------------------------------

GENEROUS = BucketCharge("fs:server:fs", 60_000, 100_000, scope="server:fs")


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def __call__(self, event: str, **fields) -> None:
        json.dumps(fields)  # must be one JSON line's worth
        self.lines.append((event, fields))

    def events(self) -> list[str]:
        return [e for e, _ in self.lines]


def failover(url: str, mode: str, log: Log, timeout_s: float = 0.25) -> FailoverState:
    return FailoverState(RedisState(url, key_prefix=prefix(), timeout_s=timeout_s), MemoryState(), mode, log)


#: How long `_until` waits before calling it a hang: the probe's own cadence (at most 1 s between
#: tries) decides when recovery comes; this only has to be beyond any delay a loaded machine adds.
HANG_S = 30.0


async def _until(condition, within: float = HANG_S) -> None:
    """Wait (polling) for the event ``condition`` means, or fail as a hang."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < within, f"not within {within} s"
        await asyncio.sleep(0.02)


@pytest.mark.fault
async def test_open_mode_serves_from_memory_while_redis_is_down_and_recovers(redis_server):
    log = Log()
    state = failover(redis_server.url, "open", log)
    try:
        assert await state.charge([GENEROUS]) is None
        await state.queue_push("task", "r0", "R0", dedupe_key=None, limit=8, ttl_s=60)
        redis_server.kill()
        for _ in range(50):
            assert await state.charge([GENEROUS]) is None
        await state.queue_push("task", "r1", "R1", dedupe_key=None, limit=8, ttl_s=60)
        # served from memory, each counted: no clock (a killed Redis refuses at once anyway)
        assert state.degraded and state.outages == 1 and state.fallback_ops == 51
        assert log.events() == ["state_unavailable"]
        assert log.lines[0][1]["on_unavailable"] == "open"
        # per-replica memory budgets really apply while degraded
        tight = BucketCharge("tight", 60, 1)
        assert await state.charge([tight]) is None and await state.charge([tight]) is not None

        redis_server.start()  # same port, empty, no scripts cached
        await _until(lambda: not state.degraded)
        assert log.events() == ["state_unavailable", "state_recovered"]
        assert log.lines[1][1]["ops_while_down"] == 53
        assert await script_loads(state.primary.redis) == 4  # the probe ran all four scripts: NOSCRIPT, handled
        assert await state.charge([GENEROUS]) is None
        assert await script_loads(state.primary.redis) == 4
        assert state.fallback_ops == 53  # served by Redis again
        assert await state.queue_take("task") == ["R1"]  # queued locally while down: not stranded
        assert log.events() == ["state_unavailable", "state_recovered"]
    finally:
        await state.close()


@pytest.mark.fault
async def test_closed_mode_refuses_promptly_while_redis_is_down_and_recovers(redis_server):
    log = Log()
    state = failover(redis_server.url, "closed", log)
    try:
        assert await state.charge([GENEROUS]) is None
        redis_server.kill()
        for _ in range(20):  # refused, each counted (refused_ops below): no clock
            with pytest.raises(StateUnavailable) as caught:
                await state.charge([GENEROUS])
        assert caught.value.data() == {"scope": "state"}
        with pytest.raises(StateUnavailable):
            await state.queue_push("task", "r1", "R1", dedupe_key=None, limit=8, ttl_s=60)
        assert state.degraded and state.refused_ops == 21 and state.fallback_ops == 0
        assert log.events() == ["state_unavailable"]

        redis_server.start()
        await _until(lambda: not state.degraded)
        assert await state.charge([GENEROUS]) is None
        assert log.events() == ["state_unavailable", "state_recovered"]
    finally:
        await state.close()


@pytest.mark.fault
@pytest.mark.parametrize("mode", ["open", "closed"])
async def test_a_stopped_redis_times_out_within_the_configured_timeout(redis_server, mode):
    log = Log()
    state = failover(redis_server.url, mode, log, timeout_s=0.2)
    try:
        assert await state.charge([GENEROUS]) is None
        redis_server.pause()

        async def one() -> float:
            started = time.monotonic()
            try:
                assert await state.charge([GENEROUS]) is None
            except StateUnavailable:
                assert mode == "closed"
            return time.monotonic() - started

        waits = await asyncio.gather(*(one() for _ in range(20)))  # in flight together when it stalls
        # a paused Redis never answers: every call ending at all, on a timeout, is the configured
        # timeout at work; the bound only tells that from a hang, so load cannot break it.  Not
        # before the socket timeout of 0.2 s either (a timer never fires early).
        assert 0.2 <= max(waits) < HANG_S, waits
        assert log.lines[0][1]["cause"] == "timeout", log.lines[0]
        assert state.degraded and log.events() == ["state_unavailable"]
        asked = []
        state.primary.charge = lambda *args, **kwargs: asked.append(args)  # would record a call to Redis
        with pytest.raises(StateUnavailable) if mode == "closed" else _nothing():
            await state.charge([GENEROUS])
        assert asked == []  # while degraded, Redis is not asked at all
        del state.primary.charge

        redis_server.resume()
        await _until(lambda: not state.degraded)
        assert await state.charge([GENEROUS]) is None
        assert log.events() == ["state_unavailable", "state_recovered"]
    finally:
        await state.close()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.fault
async def test_redis_down_at_startup_is_one_outage(redis_server):
    log = Log()
    redis_server.kill()
    state = failover(redis_server.url, "open", log)
    try:
        assert not await state.check()
        assert await state.charge([GENEROUS]) is None
        assert state.stats()["degraded"] and log.events() == ["state_unavailable"]
        redis_server.start()
        await _until(lambda: not state.degraded)
    finally:
        await state.close()


@pytest.mark.fault
async def test_records_survive_an_outage_on_the_replica_that_wrote_them(redis_server):
    log = Log()
    state = failover(redis_server.url, "open", log)
    try:
        await state.put_record("mcp:s1", {"host": "standard"}, 60)
        redis_server.kill()
        assert await state.get_record("mcp:s1") == {"host": "standard"}
        redis_server.start()
        await _until(lambda: not state.degraded)
        assert await state.get_record("mcp:s1") == {"host": "standard"}  # Redis lost it; memory had it
    finally:
        await state.close()


# -- configuration -----------------------------------------------------------------------------------------

def test_open_state_picks_the_backend(redis_url):
    assert isinstance(open_state(None), MemoryState)
    assert isinstance(open_state("memory"), MemoryState)
    state = open_state(redis_url, key_prefix="fleet-a:", on_unavailable="closed", timeout_ms=100)
    assert isinstance(state, FailoverState)
    assert (state.primary.key_prefix, state.on_unavailable, state.primary.timeout_s) == ("fleet-a:", "closed", 0.1)
    assert isinstance(open_state("unix:///run/redis/redis.sock?db=2"), FailoverState)
    with pytest.raises(ValueError, match="redis://"):
        open_state("http://redis:6379")
