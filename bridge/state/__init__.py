"""Reminder state shared across replicas and workers (spec §12, docs/deploy.md).

    state = open_state(settings.url, key_prefix=settings.key_prefix,
                       on_unavailable=settings.on_unavailable, timeout_ms=settings.timeout_ms, log=log)
    refused = await state.charge([BucketCharge("fs:server:fs", 60, 10, scope="server:fs")])
    ...
    await state.close()

`memory` (the default) keeps everything in this process; a Redis URL shares budgets, A2A task queues,
and MCP session records with every replica using the same Redis
and ``key_prefix``, and falls back per ``on_unavailable`` when Redis is away.  The redis client is
imported only when a Redis URL is opened (no module here imports it at load time), so the memory default needs no extra dependency.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridge.state.base import STATE_SCOPE, BucketCharge, StateBackend, StateUnavailable

__all__ = ["STATE_SCOPE", "BucketCharge", "FailoverState", "MemoryState", "RedisState", "StateBackend",
           "StateSettings", "StateUnavailable", "open_state"]


def __getattr__(name: str) -> Any:
    """The backends and `StateSettings` (pydantic's), each imported at its first use: a route whose
    state is this process's imports none of them before its first answer (issue 23: the cold start)."""
    if name == "FailoverState":
        from bridge.state.failover import FailoverState as found
    elif name == "MemoryState":
        from bridge.state.memory import MemoryState as found
    elif name == "RedisState":
        from bridge.state.redis_backend import RedisState as found
    elif name == "StateSettings":
        from bridge.state.settings import StateSettings as found
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return found


def open_state(url: str | None, *, key_prefix: str = "reminder-bridge:", on_unavailable: str = "open",
               log: Callable[..., Any] | None = None, timeout_ms: int = 250) -> StateBackend:
    """The backend ``url`` names: None or "memory" → `MemoryState`; redis://, rediss://, unix:// →
    `FailoverState` over a `RedisState` and a `MemoryState`.  Connects lazily (on first use).

    ``log(event, **fields)``: called once when Redis becomes unavailable and once when it is back.
    """
    from bridge.state.failover import FailoverState
    from bridge.state.memory import MemoryState
    from bridge.state.redis_backend import RedisState
    from bridge.state.settings import MEMORY, check_state_url

    url = check_state_url(url)
    if url in (None, MEMORY):
        return MemoryState()
    try:
        import redis.asyncio  # noqa: F401
    except ImportError:
        raise RuntimeError("a Redis state URL needs the redis client: pip install 'reminder-bridge[redis]'") from None
    primary = RedisState(url, key_prefix=key_prefix, timeout_s=timeout_ms / 1000.0)
    return FailoverState(primary, MemoryState(), on_unavailable, log)  # type: ignore[arg-type]

