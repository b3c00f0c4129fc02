"""What /readyz says beyond "ready" (`serve` and `stdio` alike)."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any


def degraded(shared: Any) -> Callable[[], Awaitable[str | None]]:
    """Why the proxy runs degraded, for /readyz (still ready: ordinary traffic flows): shared state
    failing the commands the proxy needs (checked again by its probe), an outbox store failing its
    calls; None when neither."""

    async def why() -> str | None:
        from bridge.outbox.store import degraded_reason  # sqlite3 only for a proxy that asks

        state = await shared.readiness() if shared is not None else None
        return "; ".join(r for r in (state, degraded_reason()) if r) or None

    return why
