"""`FailoverState`'s readiness (spec §12, /readyz): what a replica says about its shared state. It
names the cause and what reminders get meanwhile, never the Redis password, says it in one log line
per outage, checks a healthy Redis again with the probe (not a PING), and clears once Redis serves
every command again. Against a real redis-server, and a port nothing listens on."""
from __future__ import annotations

import redis

from bridge.state import FailoverState, MemoryState, RedisState
from tests.peers.processes import eventually, free_port


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def __call__(self, event: str, **fields) -> None:
        self.events.append((event, fields))

    def named(self, event: str) -> list[dict]:
        return [fields for name, fields in self.events if name == event]


def failover(url: str, mode: str = "open") -> tuple[FailoverState, Log]:
    log = Log()
    return FailoverState(RedisState(url, key_prefix="rb-unit-failover:", timeout_s=0.25), MemoryState(), mode, log), log


async def test_a_healthy_redis_is_ready(redis_url):
    state, log = failover(redis_url)
    try:
        assert await state.readiness() is None and state.degraded_reason() is None
        assert state.stats()["degraded"] is False and log.events == []
    finally:
        await state.close()


async def test_an_unreachable_redis_is_named_with_its_cause_and_without_its_password():
    url = f"redis://:pa55-s3cret@127.0.0.1:{free_port()}/0"
    for mode, serving in (("open", "serving per-replica memory"), ("closed", "refusing reminders")):
        state, log = failover(url, mode)
        try:
            reason = await state.readiness()
            assert reason.startswith("shared state unavailable (redis://***@127.0.0.1:") and reason.endswith(serving)
            assert ": connection: " in reason and "pa55-s3cret" not in reason
            for _ in range(20):  # asked again and again (every /readyz): still one log line for the outage
                assert await state.readiness() == reason
            [line] = log.named("state_unavailable")
            assert line["cause"] == "connection" and "pa55-s3cret" not in repr(log.events)
            assert state.stats()["degraded"] and state.stats()["failures"]["connection"] >= 1
        finally:
            await state.close()


async def test_readiness_clears_once_redis_serves_again(redis_server):
    port = redis_server.port
    redis_server.kill()
    state, log = failover(f"redis://127.0.0.1:{port}/0")
    try:
        assert await state.readiness() is not None
        redis_server.start()  # the same port

        async def ready() -> bool:
            return await state.readiness() is None

        await eventually(ready, timeout=10)
        [recovered] = log.named("state_recovered")
        assert recovered["down_ms"] >= 0 and not state.stats()["degraded"]
    finally:
        await state.close()


async def test_a_healthy_redis_is_checked_again_with_the_probe_while_nothing_uses_it(redis_server):
    """A Redis that answers PING but refuses writes (a replica) makes the replica not ready, even
    though no reminder has tried it since."""
    state, log = failover(redis_server.url)
    admin = redis.Redis.from_url(redis_server.url)
    try:
        assert await state.readiness() is None and state.stats()["degraded"] is False
        admin.execute_command("REPLICAOF", "127.0.0.1", str(free_port()))  # writes refused from now on
        assert admin.ping()

        async def refused() -> str | None:
            return await state.readiness()

        reason = await eventually(refused, timeout=10)
        assert ": readonly: " in reason and log.named("state_unavailable")[0]["cause"] == "readonly"
    finally:
        admin.execute_command("REPLICAOF", "NO", "ONE")
        admin.close()
        await state.close()
