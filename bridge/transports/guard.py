"""What `serve` enforces before and around every request, whatever a client does: a cap on open
connections, header and idle timeouts, one byte budget for what all requests hold in memory, and
logs that stay quiet (and free of client secrets) when clients or the machine misbehave.

aiohttp parses HTTP; this module wraps each of its connection handlers in `GuardedConnection`, a
thin asyncio protocol that counts the connection, arms its timers and refuses it when the proxy is
full, so no aiohttp internals are patched.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import resource
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from prometheus_client import Counter as Counted
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from bridge.rules import Limits
from bridge.telemetry import Recorder

#: Descriptors kept for everything that is not a client connection (listeners, logs, the admin port).
RESERVED_FDS = 64
#: Errors that mean "out of descriptors or memory": accept keeps failing while they last.
EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: The same complaint is logged at most once per this many seconds, with a count of the rest.
QUIET_INTERVAL = 10.0


def raise_fd_limit() -> int:
    """Raise the soft descriptor limit to the hard one (as servers do); returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


class QuietLog:
    """Logs one line per kind of complaint per interval, with how many were held back."""

    def __init__(self, recorder: Recorder, clock: Callable[[], float] = time.monotonic):
        self.recorder = recorder
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: Counter[str] = Counter()

    def __call__(self, event: str, **fields: Any) -> None:
        now = self.clock()
        last = self._last.get(event)
        if last is not None and now - last < QUIET_INTERVAL:
            self._held[event] += 1
            return
        self._last[event] = now
        held = self._held.pop(event, 0)
        self.recorder.log(event, level="error", **fields, **({"repeated": held} if held else {}))


class ByteBudget:
    """Bytes of request bodies and upstream answers held in memory at once, all clients together."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        if self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used -= n


class Holding:
    """What one request holds of the `ByteBudget`; given back whole when the request ends."""

    __slots__ = ("budget", "held")

    def __init__(self, budget: ByteBudget):
        self.budget = budget
        self.held = 0

    def take(self, n: int) -> bool:
        if not self.budget.take(n):
            return False
        self.held += n
        return True

    def release(self) -> None:
        self.budget.give(self.held)
        self.held = 0


class Guard:
    """Connection accounting for one listening port; its metrics are a prometheus_client collector
    (`bridge.telemetry.register_collector`)."""

    def __init__(self, limits: Limits, recorder: Recorder, fd_limit: int | None = None):
        self.limits = limits
        self.recorder = recorder
        self.quiet = QuietLog(recorder)
        fd_limit = raise_fd_limit() if fd_limit is None else fd_limit
        #: each client connection may need an upstream one too: two descriptors
        derived = max(16, (fd_limit - RESERVED_FDS) // 2)
        self.max_connections = limits.max_connections or derived
        if limits.max_connections > derived:
            recorder.warning("connection_cap_above_fd_limit", max_connections=limits.max_connections,
                             fd_limit=fd_limit, why="clients beyond about half the descriptor limit will find "
                                                    "the proxy unable to accept or reach upstreams")
        self.budget = ByteBudget(limits.max_inflight_bytes)
        self.open: dict[Any, GuardedConnection] = {}  # by transport
        self.refused = Counted("reminder_bridge_connections_refused",
                               "Client connections refused at once, by the limit that refused them.", ("reason",),
                               registry=None)  # max_connections
        self.timeouts = Counted("reminder_bridge_client_timeouts",
                                "Client connections closed for slowness: header (request head too slow), idle "
                                "(keep-alive unused), body (request body too slow).", ("kind",), registry=None)

    def collect(self) -> list[Metric]:
        """The connection metrics: levels read now, counts as counted."""
        return [GaugeMetricFamily("reminder_bridge_connections_open", "Client connections open now.",
                                  value=len(self.open)),
                *self.refused.collect(), *self.timeouts.collect(),
                GaugeMetricFamily("reminder_bridge_inflight_bytes",
                                  "Request bodies and upstream answers held in memory now.", value=self.budget.used)]

    def factory(self, make_handler: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: GuardedConnection(self, make_handler)

    def connection(self, transport: Any) -> GuardedConnection | None:
        return self.open.get(transport)

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Route the event loop's and aiohttp's complaints through `quiet`: an exhausted machine
        logs one line per interval, and no client header or body text reaches the log."""
        fallback = loop.get_exception_handler()

        def on_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            exc = context.get("exception")
            if isinstance(exc, OSError) and exc.errno in EXHAUSTED:
                self.quiet("accept_failed", why=f"{context.get('message', 'accept failed')}: "
                                                f"{exc.strerror or exc} (errno {exc.errno}); accepting again "
                                                f"once descriptors are free", open_connections=len(self.open))
                return
            if fallback is not None:
                fallback(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(on_error)
        aiohttp_log = logging.getLogger("aiohttp")
        aiohttp_log.handlers[:] = [_AiohttpToQuiet(self.quiet)]
        aiohttp_log.propagate = False


class _AiohttpToQuiet(logging.Handler):
    """aiohttp's own error records, reduced to their kind: their text can quote a client's headers."""

    def __init__(self, quiet: QuietLog):
        super().__init__(logging.WARNING)
        self.quiet = quiet

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        kind = type(exc).__name__ if exc is not None else record.levelname.lower()
        self.quiet("http_error", logger=record.name, kind=kind,
                   why="aiohttp could not handle a request (details withheld: they may quote client headers)")


_REFUSAL = ("reminder-bridge: too many connections (max_connections = {n}); try again shortly\n")
_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class GuardedConnection(asyncio.Protocol):
    """One client connection: aiohttp's handler inside, the guard's accounting and timers around it.

    Timers: from the connection's start, and from the first byte of each later request, the client
    has ``header_timeout_s`` until its request reaches the proxy; between requests, a keep-alive
    connection may idle ``idle_timeout_s``. While a request is handled (streams and WebSockets
    included) no timer runs.
    """

    def __init__(self, guard: Guard, make_handler: Callable[[], asyncio.Protocol]):
        self.guard = guard
        self.make_handler = make_handler
        self.handler: Any = None
        self.transport: Any = None
        self.timer: asyncio.TimerHandle | None = None
        self.deadline = 0.0
        self.waiting = "header"  # header | idle | "" (a request is being handled)

    # -- asyncio protocol --------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        guard = self.guard
        if len(guard.open) >= guard.max_connections:
            guard.refused.labels("max_connections").inc()
            text = _REFUSAL.format(n=guard.max_connections).encode()
            transport.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
                            b"Retry-After: 1\r\nConnection: close\r\nContent-Length: "
                            + str(len(text)).encode() + b"\r\n\r\n" + text)
            transport.close()
            return
        guard.open[transport] = self
        self.handler = self.make_handler()
        self.handler.connection_made(transport)
        self._arm("header")

    def data_received(self, data: bytes) -> None:
        if self.handler is None:
            return
        if self.waiting == "idle":
            self._arm("header")  # the next request has begun: its headers get the header timeout
        self.handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self.handler.eof_received() if self.handler is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        if self.handler is None:
            return
        self.guard.open.pop(self.transport, None)
        self.handler.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.handler is not None:
            self.handler.pause_writing()

    def resume_writing(self) -> None:
        if self.handler is not None:
            self.handler.resume_writing()

    # -- what the proxy tells it -------------------------------------------------------------
    def request_started(self) -> None:
        self._disarm()
        self.waiting = ""

    def request_finished(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._arm("idle")

    # -- timers ------------------------------------------------------------------------------
    # One handle per connection, re-armed lazily (as aiohttp's keep-alive does): a request moves the
    # deadline, and only a handle that fires early schedules another. No timer churn per request.
    def _arm(self, kind: str) -> None:
        self.waiting = kind
        limits = self.guard.limits
        loop = asyncio.get_running_loop()
        self.deadline = loop.time() + (limits.header_timeout_s if kind == "header" else limits.idle_timeout_s)
        if self.timer is None or self.timer.when() > self.deadline:
            if self.timer is not None:
                self.timer.cancel()
            self.timer = loop.call_at(self.deadline, self._expired)

    def _disarm(self) -> None:
        self.waiting = ""  # the handle stays: it finds nothing to do when it fires

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expired(self) -> None:
        self.timer = None
        kind = self.waiting
        if not kind or self.transport is None or self.transport.is_closing():
            return
        loop = asyncio.get_running_loop()
        if loop.time() < self.deadline:  # the deadline moved since this handle was set
            self.timer = loop.call_at(self.deadline, self._expired)
            return
        self.guard.timeouts.labels(kind).inc()
        if kind == "header":
            self.transport.write(_TIMEOUT)
        self.transport.close()


def guarded_site(runner: Any, host: str, port: int, guard: Guard, *, backlog: int = 1024,
                 reuse_port: bool = False) -> Any:
    """An aiohttp site whose connections go through ``guard`` (a `TCPSite` with another protocol factory)."""
    from aiohttp import web

    class GuardedSite(web.BaseSite):
        @property
        def name(self) -> str:
            return f"http://{host}:{port}"

        async def start(self) -> None:
            await super().start()
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(guard.factory(runner.server), host, port, backlog=backlog,
                                                    reuse_address=True, reuse_port=reuse_port or None)

    return GuardedSite(runner, backlog=backlog)
