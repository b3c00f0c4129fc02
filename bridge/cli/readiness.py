"""What /readyz says beyond "ready" (`serve` and `stdio` alike)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


def degraded(shared: Any) -> Callable[[], str | None]:
    """Why the proxy runs degraded, for /readyz (still ready: ordinary traffic flows): shared state
    away, an outbox store failing its calls; None when neither."""

    def why() -> str | None:
        from bridge.outbox.store import degraded_reason  # sqlite3 only for a proxy that asks

        reasons = [r for r in (shared.degraded_reason() if shared is not None else None, degraded_reason()) if r]
        return "; ".join(reasons) or None

    return why
