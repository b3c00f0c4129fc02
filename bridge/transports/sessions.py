"""Per-session state of `serve` (spec §10): one pipeline per session, never shared.

A `Session` is what the proxy keeps for one MCP 2025-11-25 session, or for one request that is
its own session (MCP 2026-07-28, A2A, a WebSocket): its pipeline, the server-sent-event streams
open to its host, and the messages its pipeline produced on its own (a coalesced reminder released
when tokens came back, an outbox event) while no stream was open.  `SessionTable` holds a route's MCP sessions by
`Mcp-Session-Id`: bounded, each expiring after an idle time that slides with every use,
evictions and expiries counted.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from cachetools import TTLCache

from bridge.pipeline.commands import Write, receipts_of
from bridge.pipeline.flow import Flow


class Session:
    """One session at the proxy: its pipeline and where frames for its host can go."""

    def __init__(self, flow: Flow, limit: int = 64):
        self.flow = flow
        self.protocol = flow.protocol
        #: runs the flow's timers and deferred work (set by the transport); ``shared_driver``: it is
        #: another session's (an A2A request's timers are its route's keeper's), not closed with this one
        self.driver: Any = None
        self.shared_driver = False
        #: the headers the upstream got with the session's last JSON-RPC POST: the proxy's own requests
        #: for the session carry them too (its Mcp-Session-Id, credentials); a host's request always
        #: goes upstream with its own
        self.headers: dict[str, str] | None = None
        #: open SSE answers to this session's host, oldest first: a GET stream, or POSTs still streaming
        self.streams: list[Any] = []
        #: host-bound messages (write commands) made with no stream open, sent ahead of the session's
        #: next answer; what they deliver counts as delivered only once written (their receipts)
        self.waiting: list[Write] = []
        self.limit = limit
        self.dropped = 0
        #: the Mcp-Session-Id it is held under, and the record last written for it to shared state
        self.id: str | None = None
        #: taken up without its handshake (the proxy restarted): held until the upstream refuses the id
        self.provisional = False
        self.recorded: dict[str, Any] | None = None
        self.recorded_at = 0.0
        #: a 2026-07-28 request of an identity: the session that outlives its scope's requests and
        #: polls their outbox (`HttpRoute.keeper`); told when this one ends
        self.keeper: Session | None = None

    def hold(self, messages: list[Write]) -> None:
        """Keep messages for the next answer; the oldest go beyond the session's pending limit (what
        they delivered was never written: its owner keeps it)."""
        self.waiting.extend(messages)
        over = len(self.waiting) - self.limit
        if over > 0:
            self.dropped += over
            self.flow.unwritten(receipts_of(self.waiting[:over]))
            del self.waiting[:over]

    def take_waiting(self) -> list[Write]:
        waiting, self.waiting = self.waiting, []
        return waiting

    def pending_counts(self) -> dict[str, int]:
        return {"host": len(self.waiting)}

    def close(self, why: str) -> None:
        """The session is over: its timers stop; what it still holds is dropped and counted."""
        if self.driver is not None and not self.shared_driver:
            self.driver.close()
        self.flow.unwritten(receipts_of(self.waiting))
        self.flow.close(why)
        for _ in self.waiting:
            self.flow.recorder.reminder("dropped", protocol=self.protocol, method=None, why=why)
        self.waiting.clear()
        if self.keeper is not None:
            self.keeper.kept(self)

    def kept(self, request: Session) -> None:
        """A request of this keeper's scope is over: the keeper goes on with what its flow settled
        of the host (the era, its dialect) and its headers (the proxy's own requests carry them),
        and wakes for what the request left it (a poll to start, rows to mark)."""
        record = request.flow.negotiated()
        if record is not None:
            self.flow.restore(record)
        if request.headers:
            self.headers = request.headers
        if self.driver is not None:
            self.driver.perform(self.flow.rearm())


class _Table(TTLCache):
    """A TTL cache that reports what leaves it: evicted (the table was full) or expired (idle)."""

    def __init__(self, maxsize: int, ttl: float, timer: Callable[[], float], on_end: Callable[[str, Any], None]):
        super().__init__(maxsize=maxsize, ttl=ttl, timer=timer)
        self._on_end = on_end

    def popitem(self) -> tuple[Any, Any]:
        key, value = super().popitem()
        self._on_end("evicted", value)
        return key, value

    def expire(self, time: Any = None) -> list[tuple[Any, Any]]:
        gone = super().expire(time)
        for _, value in gone or ():
            self._on_end("expired", value)
        return gone


class SessionTable:
    """A route's MCP sessions by id: at most ``max_sessions``, each kept ``idle`` seconds after its last use."""

    def __init__(self, max_sessions: int, idle: float, ended: Callable[[str], None] = lambda reason: None,
                 clock: Callable[[], float] = time.monotonic):
        #: told of each session gone, by reason: evicted (the table was full) | expired (idle) | closed
        #: (DELETE); the route's `Recorder.session_ended`
        self.ended = ended
        self._table = _Table(max_sessions, idle, clock, self._ended)

    def _ended(self, reason: str, session: Session) -> None:
        self.ended(reason)
        session.flow.recorder.info("session_ended", reason=reason)
        session.close(f"the session was {reason}")

    def get(self, session_id: str) -> Session | None:
        """The session, its idle time starting again (a use)."""
        session = self._table.get(session_id)
        if session is not None:
            self._table[session_id] = session  # re-insertion slides the expiry
        return session

    def put(self, session_id: str, session: Session) -> None:
        self._table[session_id] = session

    def forget(self, session_id: str, session: Session) -> None:
        """Let go of ``session`` without ending it (its request still runs; it ends with it)."""
        if self._table.get(session_id) is session:
            del self._table[session_id]

    def close(self, session_id: str) -> None:
        session = self._table.pop(session_id, None)
        if session is not None:
            self._ended("closed", session)

    def expire(self) -> None:
        self._table.expire()

    def __iter__(self) -> Iterator[Session]:
        return iter({id(s): s for s in list(self._table.values())}.values())

    def __len__(self) -> int:
        return len(self._table)
