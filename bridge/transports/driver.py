"""What every transport does with a flow's commands beyond writing bytes: timers and blocking work.

`FlowDriver` keeps one timer per flow (the earliest `Wakeup` it asked for; `Flow.wake` asks for
the next one), and runs `Defer` work on one background thread, in order, so SQLite never blocks
the event loop and writes stay serialized. Writes (`Forward`, `Send`, `Reply`) and the proxy's
own requests (`Call`) go to the transport's ``write`` and ``call``.  What a flow gives is a list
of commands, or, while it waits on shared state, an awaitable of one (`Flow.from_host`): both are
accepted everywhere, and the flow keeps their order.
"""
from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bridge.pipeline.commands import Call, Command, Defer, Wakeup
from bridge.pipeline.flow import Outcome

#: One thread for blocking work (the outbox's SQLite store): in order, never on the event loop.
BLOCKING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reminder-bridge-blocking")


def run_blocking(defer: Defer) -> Any:
    """``defer.work()``, or the exception it raised (handed to ``defer.done`` as the result)."""
    try:
        return defer.work()
    except Exception as exc:  # noqa: BLE001 - the add-on decides what a failure means
        return exc


class FlowDriver:
    """Performs one flow's commands on a running event loop."""

    def __init__(self, flow: Any, write: Callable[[Command], None], call: Callable[[Call], None]):
        self.flow = flow
        self.write = write
        self.call = call
        self._timer: asyncio.TimerHandle | None = None
        self._at: float | None = None
        self._closed = False
        #: outcomes waiting to be performed in order behind one still awaited (shared state)
        self._later: collections.deque[Outcome] | None = None

    def perform(self, commands: Outcome) -> None:
        """Perform ``commands`` now, or, when they must be awaited (or others still are), in order
        after what came before."""
        if self._later is None and type(commands) is list:
            self._perform_now(commands)
            return
        if self._later is None:
            self._later = collections.deque()
            asyncio.ensure_future(self._perform_in_order(self._later))
        self._later.append(commands)

    def _perform_now(self, commands: list[Command]) -> None:
        for command in commands:
            kind = type(command)
            if kind is Wakeup:
                self.schedule(command.at)  # type: ignore[union-attr]
            elif kind is Defer:
                self._defer(command)  # type: ignore[arg-type]
            elif kind is Call:
                self.call(command)  # type: ignore[arg-type]
            else:
                self.write(command)

    async def _perform_in_order(self, later: collections.deque[Outcome]) -> None:
        while later:
            commands = later[0]
            if type(commands) is not list:
                try:
                    commands = await commands  # type: ignore[misc]
                except asyncio.CancelledError:
                    commands = []
            later.popleft()
            if not self._closed:
                self._perform_now(commands)  # type: ignore[arg-type]
        self._later = None

    def schedule(self, at: float) -> None:
        """Wake the flow at ``at`` (its own monotonic clock), unless an earlier wakeup is pending."""
        if self._closed or (self._at is not None and self._at <= at):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._at = at
        self._timer = asyncio.get_running_loop().call_later(max(0.0, at - self.flow.clock()), self._fire)

    def _fire(self) -> None:
        self._timer = self._at = None
        if not self._closed:
            self.perform(self.flow.wake(self.flow.clock()))

    def _defer(self, defer: Defer) -> None:
        future = asyncio.get_running_loop().run_in_executor(BLOCKING, run_blocking, defer)
        future.add_done_callback(lambda done: None if self._closed else self.perform(defer.done(done.result())))

    async def settle(self, commands: Outcome) -> list[Command]:
        """``commands`` with every `Defer` run (off the loop) and replaced by what it gave, and every
        `Wakeup` scheduled: for transports that must know all of a request's answer before replying."""
        if type(commands) is not list:
            commands = await commands  # type: ignore[misc]
        out: list[Command] = []
        loop = asyncio.get_running_loop()
        for command in commands:
            kind = type(command)
            if kind is Defer:
                result = await loop.run_in_executor(BLOCKING, run_blocking, command)
                out += await self.settle(command.done(result))  # type: ignore[union-attr]
            elif kind is Wakeup:
                self.schedule(command.at)  # type: ignore[union-attr]
            else:
                out.append(command)
        return out

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
