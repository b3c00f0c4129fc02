"""Shared state: what the Redis backend adds per reminder charge, against the in-memory default.

A reminder is charged to two buckets here (its route's server bucket and the global ceiling), the
common case.  Memory: `MemoryState.charge_now` (what the hot path calls, no await) and its async
twin.  Redis: `FailoverState` over `RedisState` (what `--state redis://…` builds) against a
redis-server started by the bench on a loopback port, no persistence; one charge is one EVALSHA
round trip running the Lua script.  Measured one at a time (the latency a reminder waits) and with
32 in flight on one connection pool (the throughput of one replica's event loop); CPU time is this
process's, so what Redis itself spends is not in it.  Skipped when `redis-server` is not on PATH.
"""
from __future__ import annotations

import asyncio
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

GOAL_ADDED_US = 1_000  # a loopback round trip should stay well under a millisecond
IN_FLIGHT = 32


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Redis:
    def __init__(self, binary: str):
        self.dir = tempfile.TemporaryDirectory(prefix="rb-bench-redis-")
        self.port = _free_port()
        self.proc = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir.name,
                                      "--save", "", "--appendonly", "no", "--loglevel", "warning"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("redis-server did not answer PING within 10 s")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.dir.cleanup()


def _charges(i: int):
    from bridge.state import BucketCharge

    # never refuses: the cost measured is the charge, not the refusal path
    return [BucketCharge(f"bench:server:s{i % 50}", 1e12, 1_000_000_000, scope=f"server:s{i % 50}"),
            BucketCharge("global", 1e12, 1_000_000_000, scope="global")]


def _memory_sync(count: int) -> tuple[float, float]:
    from bridge.state import MemoryState

    state, charges = MemoryState(), [_charges(i) for i in range(count)]
    for c in charges[:200]:
        state.charge_now(c)
    wall, cpu = time.perf_counter(), time.process_time()
    for c in charges:
        state.charge_now(c)
    return (time.perf_counter() - wall) / count * 1e6, (time.process_time() - cpu) / count * 1e6


async def _sequential(state, count: int) -> tuple[float, float]:
    charges = [_charges(i) for i in range(count)]
    for c in charges[:200]:  # warm-up: connection, script cache
        assert await state.charge(c) is None
    wall, cpu = time.perf_counter(), time.process_time()
    for c in charges:
        await state.charge(c)
    return (time.perf_counter() - wall) / count * 1e6, (time.process_time() - cpu) / count * 1e6


async def _concurrent(state, count: int) -> float:
    charges = [_charges(i) for i in range(count)]
    queue = iter(charges)

    async def worker() -> None:
        for c in queue:
            await state.charge(c)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return count / (time.perf_counter() - started)


async def _round(url: str, count: int) -> dict[str, float]:
    from bridge.state import MemoryState, open_state

    out: dict[str, float] = {}
    out["memory_sync_us"], out["memory_sync_cpu_us"] = _memory_sync(count)
    memory = MemoryState()
    out["memory_async_us"], _ = await _sequential(memory, count)
    out["memory_rate"] = await _concurrent(memory, count)
    redis = open_state(url, key_prefix=f"bench-{time.monotonic_ns()}:", on_unavailable="closed")
    try:
        out["redis_us"], out["redis_cpu_us"] = await _sequential(redis, count)
        out["redis_rate"] = await _concurrent(redis, count * 2)
        assert not redis.degraded and redis.refused_ops == 0
    finally:
        await redis.close()
    return out


def run(quick: bool) -> list[dict]:
    binary = shutil.which("redis-server")
    if binary is None:
        return [{"scenario": "shared state: added cost per reminder charge (Redis vs memory)",
                 "skipped": "redis-server is not on PATH (Debian: apt-get install redis-server)"}]
    try:
        import redis  # noqa: F401
    except ImportError:
        return [{"scenario": "shared state: added cost per reminder charge (Redis vs memory)",
                 "skipped": "the redis client is not installed: pip install 'reminder-bridge[redis]'"}]
    count, rounds = (2_000, 3) if quick else (10_000, 5)
    server = _Redis(binary)
    try:
        samples = [asyncio.run(_round(server.url, count)) for _ in range(rounds)]
    finally:
        server.stop()
    m = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
    added = m["redis_us"] - m["memory_async_us"]
    detail = (f"{count} charges of 2 buckets each (server + global), one at a time, median of {rounds}; "
              f"Redis: FailoverState → RedisState → one EVALSHA of the Lua script over loopback to a local "
              f"redis-server; memory: MemoryState ({m['memory_sync_us']:.1f} µs sync charge_now, "
              f"{m['memory_async_us']:.1f} µs awaited); client CPU per Redis charge {m['redis_cpu_us']:.0f} µs")
    return [
        {"scenario": "shared state: added latency per reminder charge (Redis vs memory)", "unit": "µs/charge",
         "proxy": f"{m['redis_us']:.0f} µs", "direct": f"{m['memory_async_us']:.1f} µs (memory)",
         "ratio": f"+{added:.0f} µs", "goal": f"< {GOAL_ADDED_US:,} µs added", "met": added < GOAL_ADDED_US,
         "values": {**m, "added_us": added, "count": count, "rounds": rounds}, "detail": detail},
        {"scenario": f"shared state: charges/s, {IN_FLIGHT} in flight, one replica (Redis vs memory)",
         "unit": "charges/s", "proxy": f"{m['redis_rate']:,.0f}/s", "direct": f"{m['memory_rate']:,.0f}/s (memory)",
         "ratio": f"{m['redis_rate'] / m['memory_rate']:.3f}x", "goal": "informational", "met": None,
         "values": {"redis_per_s": m["redis_rate"], "memory_per_s": m["memory_rate"], "in_flight": IN_FLIGHT},
         "detail": f"{IN_FLIGHT} coroutines charging on one event loop and one connection pool; "
                   f"{count * 2} Redis charges per round, median of {rounds}"},
    ]


if __name__ == "__main__":
    import json

    for row in run(quick=True):
        print(json.dumps(row, ensure_ascii=False))
