"""When to read one poll stream next: a small state machine with the clock injected.

Every method takes ``now`` (seconds, monotonic; the transport's tick clock), so a test can walk
an hour of cadence in microseconds.  The rules (landscape.md §2.4, §3.3):

- the first read happens at once;
- `hasMore` reads again at once (at most `max_chain` times in a row, then the cadence resumes,
  so a server that always says `hasMore` cannot spin the proxy);
- `nextPollMs` is honoured, clamped into [floor, ceiling];
- without it, a quiet stream backs off (floor, 2×floor, 4×floor … ceiling) and snaps back to
  the floor when events arrive;
- a failed read (an error, a malformed answer, no answer within `timeout_ms`) backs off the
  same way by consecutive failures; only one read is ever in flight.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cadence:
    floor_ms: int = 1000
    ceiling_ms: int = 60_000
    timeout_ms: int = 30_000
    max_chain: int = 10

    def clamp(self, ms: float) -> float:
        return min(max(ms, self.floor_ms), self.ceiling_ms)

    def backoff(self, streak: int) -> float:
        return self.clamp(self.floor_ms * 2 ** min(streak, 30))


class Poller:
    def __init__(self, cadence: Cadence, now: float):
        self.cadence = cadence
        self.due_at = now
        self.in_flight: float | None = None
        self.failures = 0
        self.quiet = 0
        self.chained = 0

    def due(self, now: float) -> bool:
        return self.in_flight is None and now >= self.due_at

    def expired(self, now: float) -> bool:
        """The read in flight has waited longer than `timeout_ms`: the caller abandons it and fails it."""
        return self.in_flight is not None and (now - self.in_flight) * 1000 >= self.cadence.timeout_ms

    def start(self, now: float) -> None:
        self.in_flight = now

    def succeeded(self, now: float, *, events: int, has_more: bool, next_poll_ms: float | None) -> None:
        self.in_flight = None
        self.failures = 0
        if has_more and self.chained < self.cadence.max_chain:
            self.chained += 1
            self.due_at = now
            return
        self.chained = 0
        self.quiet = 0 if events else self.quiet + 1
        wait = self.cadence.clamp(next_poll_ms) if next_poll_ms is not None else self.cadence.backoff(self.quiet)
        self.due_at = now + wait / 1000

    def failed(self, now: float) -> None:
        self.in_flight = None
        self.chained = 0
        self.failures += 1
        self.due_at = now + self.cadence.backoff(self.failures) / 1000

    def wait_ms(self, now: float) -> float:
        """How long until the next read (for logs and tests)."""
        return max(0.0, (self.due_at - now) * 1000)
