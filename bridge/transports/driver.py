"""What every transport does with a flow's commands beyond writing bytes: timers and blocking work.

`FlowDriver` keeps one timer per flow (the earliest `Wakeup` it asked for; `Flow.wake` asks for
the next one), and runs `Defer` work off the event loop, in order: on the Defer's own ``lane`` (an
outbox store's thread), else on one background thread, so SQLite never blocks the event loop and
one store's trouble never holds up another's work. Writes (`Forward`, `Send`, `Reply`) and the proxy's
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

from bridge.pipeline.commands import Call, Command, Defer, Wakeup, Write
from bridge.pipeline.flow import Outcome

#: One thread for blocking work that names no lane of its own: in order, never on the event loop.
BLOCKING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reminder-bridge-blocking")
#: How long an answer waits for deferred work on its path (an outbox write) before it goes without
#: it: store trouble delays the outbox's own work, never the host's answer (what the work gives
#: later is performed on its own, as a timer's would be).
STORE_WAIT_S = 0.05


def run_blocking(defer: Defer) -> Any:
    """``defer.work()``, or the exception it raised (handed to ``defer.done`` as the result)."""
    try:
        return defer.work()
    except Exception as exc:  # noqa: BLE001 - the add-on decides what a failure means
        return exc


def _start(defer: Defer) -> asyncio.Future[Any]:
    """``defer``'s work, under way on its lane."""
    return asyncio.get_running_loop().run_in_executor(defer.lane or BLOCKING, run_blocking, defer)


class FlowDriver:
    """Performs one flow's commands on a running event loop."""

    def __init__(self, flow: Any, write: Callable[[Write], None], call: Callable[[Call], None]):
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
            if isinstance(command, Call):
                self.call(command)
            elif isinstance(command, Write):
                self.write(command)
            elif isinstance(command, Wakeup):
                self.schedule(command.at)
            elif isinstance(command, Defer):
                self._defer(command)

    async def _perform_in_order(self, later: collections.deque[Outcome]) -> None:
        while later:
            commands = later[0]
            if not isinstance(commands, list):
                try:
                    commands = await commands
                except asyncio.CancelledError:
                    commands = []
            later.popleft()
            if not self._closed:
                self._perform_now(commands)
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
        self._later_done(_start(defer), defer)

    def _later_done(self, future: asyncio.Future[Any], defer: Defer) -> None:
        future.add_done_callback(lambda done: None if self._closed else self.perform(defer.done(done.result())))

    async def settle(self, commands: Outcome) -> list[Command]:
        """``commands`` with every `Defer` run (off the loop) and replaced by what it gave, and every
        `Wakeup` scheduled: for transports that must know all of a request's answer before replying.

        A Defer that `replies` is waited for to its end; any other gets `STORE_WAIT_S` in all, after
        which the answer goes without it and what it gives is performed when it is done."""
        loop = asyncio.get_running_loop()
        return await self._settle(commands, loop.time() + STORE_WAIT_S)

    async def _settle(self, commands: Outcome, deadline: float) -> list[Command]:
        if not isinstance(commands, list):
            commands = await commands
        out: list[Command] = []
        loop = asyncio.get_running_loop()
        for command in commands:
            if isinstance(command, Defer):
                future = _start(command)
                if not command.replies:
                    done, _ = await asyncio.wait([future], timeout=max(0.0, deadline - loop.time()))
                    if not done:
                        self._later_done(future, command)
                        continue
                out += await self._settle(command.done(await future), deadline)
            elif isinstance(command, Wakeup):
                self.schedule(command.at)
            else:
                out.append(command)
        return out

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
