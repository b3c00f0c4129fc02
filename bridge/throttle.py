"""Throttling of wrong admin tokens, per client address (spec §13, docs/console.md).

Every credential the admin port judges (a bearer token, the sign-in form, the `?token=` link)
goes through `Throttle.admit` and then `Throttle.failed` or `Throttle.succeeded`, with no await in
between, so concurrent guesses from one address are judged one after another and all pay.  After
`free` wrong tokens an address is locked out, and each wrong token after a lock locks it for twice
as long as the last (1 s, 2 s, 4 s, … up to `max_lock_s`).  While locked, a request that
brings a token gets 429 with `Retry-After` and its token is not even compared, so a locked guesser
learns nothing, not even from the right token.  Nobody sleeps: other addresses, and browsers
already signed in, are never slowed.  IPv6 clients are counted per /64, the block one host
usually holds.  The table of addresses is bounded (least recently used forgotten first), and an
address that stays quiet for `forget_s` starts afresh.
"""
from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable, Iterable

from cachetools import TTLCache
from prometheus_client import Counter
from prometheus_client.metrics_core import Metric


class Throttle:
    """Wrong tokens per client address, and the lock-outs they earned (see the module docstring)."""

    def __init__(self, *, free: int = 5, first_lock_s: float = 1.0, max_lock_s: float = 300.0,
                 forget_s: float = 900.0, addresses: int = 4096, clock: Callable[[], float] = time.monotonic):
        self.free, self.first_lock_s, self.max_lock_s = free, first_lock_s, max_lock_s
        self.clock = clock
        #: address -> [wrong tokens so far, locked until]
        self._seen: TTLCache[str, list[float]] = TTLCache(maxsize=addresses, ttl=forget_s, timer=clock)
        self.failures = Counter(
            "reminder_bridge_admin_auth_failures",
            "Admin requests whose token was wrong (wrong), or that brought a token from an address locked out "
            "for guessing (throttled: not judged).", ("outcome",), registry=None)
        self._wrong, self._throttled = self.failures.labels("wrong"), self.failures.labels("throttled")

    @staticmethod
    def key(address: str | None) -> str:
        """Who is counted: the address, or its /64 for IPv6."""
        try:
            ip = ipaddress.ip_address(address or "")
        except ValueError:
            return address or "unknown"
        if isinstance(ip, ipaddress.IPv6Address):
            if ip.ipv4_mapped is not None:
                return str(ip.ipv4_mapped)
            return str(ipaddress.ip_network(f"{ip}/64", strict=False))
        return str(ip)

    def admit(self, address: str | None) -> int:
        """0 when ``address`` may have a token judged now, else the seconds it must wait (counted)."""
        entry = self._seen.get(self.key(address))
        wait = entry[1] - self.clock() if entry is not None else 0.0
        if wait <= 0:
            return 0
        self._throttled.inc()
        return max(1, math.ceil(wait))

    def failed(self, address: str | None) -> float:
        """A wrong token from ``address``; returns how long it is now locked out (0: not yet)."""
        key = self.key(address)
        entry = self._seen.get(key) or [0, 0.0]
        entry[0] += 1
        self._wrong.inc()
        lock = 0.0
        if entry[0] >= self.free:
            lock = min(self.max_lock_s, self.first_lock_s * 2 ** min(entry[0] - self.free, 32))
            entry[1] = self.clock() + lock
        self._seen[key] = entry  # (re)set: the address is forgotten `forget_s` after its last wrong token
        return lock

    def succeeded(self, address: str | None) -> None:
        self._seen.pop(self.key(address), None)

    def collect(self) -> Iterable[Metric]:
        """Metric families for `/metrics` (a prometheus_client collector: see `bridge.admin`)."""
        return self.failures.collect()
