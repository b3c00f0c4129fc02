"""What every transport does with a flow's commands beyond writing bytes: timers, blocking work and
shared state.

`FlowDriver` keeps one timer per flow (the earliest `Wakeup` it asked for; `Flow.wake` asks for
the next one), runs `Defer` work off the event loop, in order: on the Defer's own ``lane`` (an
outbox store's thread), else on one background thread, so SQLite never blocks the event loop and
one store's trouble never holds up another's work; and performs `Perform`: at once on in-process
state (in the same call: no task, no loop turn), as a task on shared state (Redis), feeding the
result back to the flow (`Flow.performed`, then `Flow.drain` for what waited meanwhile).  Writes
(`Forward`, `Send`, `Reply`) and the proxy's own requests (`Call`) go to the transport's ``write``
and ``call``; `Pause` to its ``pause`` (stop or restart reading while the flow's backlog is long).
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bridge.pipeline.commands import Call, Command, Defer, Pause, Perform, Wakeup, Write
from bridge.pipeline.waiting import at_once as resolved

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


class Timer:
    """One timer for a sans-I/O core that asks for it with `Wakeup` (its earliest) on its own
    ``clock``, and is woken with ``fire(now)``: a flow (`FlowDriver`), or the era bridge below
    one (`era_commands`)."""

    __slots__ = ("clock", "fire", "_handle", "_at", "_closed")

    def __init__(self, clock: Callable[[], float], fire: Callable[[float], None]):
        self.clock = clock
        self.fire = fire
        self._handle: asyncio.TimerHandle | None = None
        self._at: float | None = None
        self._closed = False

    def schedule(self, at: float) -> None:
        """Fire at ``at``, unless an earlier one is pending."""
        if self._closed or (self._at is not None and self._at <= at):
            return
        if self._handle is not None:
            self._handle.cancel()
        self._at = at
        self._handle = asyncio.get_running_loop().call_later(max(0.0, at - self.clock()), self._fired)

    def _fired(self) -> None:
        self._handle = self._at = None
        if not self._closed:
            self.fire(self.clock())

    def close(self) -> None:
        self._closed = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def era_commands(layer: Any, writes: list[Any], timer: Timer) -> list[Write]:
    """The era bridge's ``writes`` (`bridge.pipeline.eras`), its timers handed to ``timer`` (which
    calls ``layer.wake``): what the transport writes."""
    out = []
    for command in writes:
        if type(command) is Wakeup:
            timer.schedule(command.at)
        else:
            out.append(command)
    return out


class FlowDriver:
    """Performs one flow's commands on a running event loop."""

    def __init__(self, flow: Any, write: Callable[[Write], None], call: Callable[[Call], None],
                 pause: Callable[[bool], None] | None = None):
        self.flow = flow
        self.write = write
        self.call = call
        self.pause = pause
        self._timer: Timer | None = None  # made at the first Wakeup: most flows (a request's) never ask
        self._closed = False
        #: set (and replaced) each time a `Perform` on shared state is done: what waits for a flow
        #: to be free again looks then
        self._done = asyncio.Event()

    def resolve(self, commands: list[Command]) -> list[Command]:
        """``commands`` with every in-process `Perform` done at once (`waiting.at_once`), and one on shared
        state started: what the flow gives for it is performed when it is done."""
        out = resolved(commands)
        if any(type(c) is Perform for c in out):
            kept = []
            for command in out:
                if type(command) is Perform:
                    self._start_perform(command)
                else:
                    kept.append(command)
            return kept
        return out

    def _start_perform(self, perform: Perform) -> None:
        asyncio.ensure_future(self._performing(perform))

    async def _performing(self, perform: Perform) -> None:
        commands = await self._perform_async(perform)
        if not self._closed:
            self.perform(commands)
            self._drain(perform.flow)

    def _drain(self, flow: Any) -> None:
        """What waited behind a Perform, handled and performed (a request's answer being settled is
        its own: what waited is not part of it)."""
        if not flow.busy:
            self.perform(flow.drain())

    async def _perform_async(self, perform: Perform) -> list[Command]:
        """``perform`` on shared state, and what the flow gives for its result."""
        try:
            result = await perform.state.perform(perform.op)
        finally:
            self._done.set()
            self._done = asyncio.Event()
        if self._closed:
            return []
        return perform.flow.performed(perform.ticket, result)

    def perform(self, commands: list[Command]) -> None:
        """Perform ``commands`` now (shared state: what follows a `Perform` when it is done)."""
        for command in self.resolve(commands):
            if isinstance(command, Call):
                self.call(command)
            elif isinstance(command, Write):
                self.write(command)
            elif isinstance(command, Wakeup):
                self.schedule(command.at)
            elif isinstance(command, Defer):
                self._defer(command)
            elif isinstance(command, Pause):
                if self.pause is not None:
                    self.pause(command.on)

    def schedule(self, at: float) -> None:
        """Wake the flow at ``at`` (its own monotonic clock), unless an earlier wakeup is pending."""
        if self._closed:
            return
        if self._timer is None:
            self._timer = Timer(self.flow.clock, self._woken)
        self._timer.schedule(at)

    def _woken(self, now: float) -> None:
        self.perform(self.flow.wake(now))

    def _defer(self, defer: Defer) -> None:
        self._later_done(_start(defer), defer)

    def _later_done(self, future: asyncio.Future[Any], defer: Defer) -> None:
        future.add_done_callback(lambda done: None if self._closed else self.perform(defer.done(done.result())))

    async def fed(self, flow: Any, feed: Callable[[], list[Command]]) -> list[Command]:
        """What ``feed()`` (one frame into the flow) gives, with every `Perform` done and replaced by
        what followed it: for transports that answer a request with what its frame gave.  Waits
        first for a `Perform` under way (the frame then meets the flow in order, and what it gives
        is its own)."""
        while flow.busy:
            await self._done.wait()
        return await self.performed(feed())

    async def performed(self, commands: list[Command]) -> list[Command]:
        """``commands`` (what a frame gave an idle flow) with every `Perform` done and replaced by what followed it."""
        out: list[Command] = []
        for command in resolved(commands):
            if type(command) is Perform:
                follows = await self._perform_async(command)
                self._drain(command.flow)  # at once: what waited meets the flow before anything newer
                out += await self.performed(follows)
            else:
                out.append(command)
        return out

    async def settle(self, commands: list[Command]) -> list[Command]:
        """``commands`` with every `Defer` run (off the loop) and replaced by what it gave, every
        `Perform` done and replaced by what followed it, and every `Wakeup` scheduled.

        A Defer that `replies` is waited for to its end; any other gets `STORE_WAIT_S` in all, after
        which the answer goes without it and what it gives is performed when it is done."""
        loop = asyncio.get_running_loop()
        return await self._settle(commands, loop.time() + STORE_WAIT_S)

    async def _settle(self, commands: list[Command], deadline: float) -> list[Command]:
        out: list[Command] = []
        loop = asyncio.get_running_loop()
        for command in resolved(commands):
            if isinstance(command, Defer):
                future = _start(command)
                if not command.replies:
                    done, _ = await asyncio.wait([future], timeout=max(0.0, deadline - loop.time()))
                    if not done:
                        self._later_done(future, command)
                        continue
                out += await self._settle(command.done(await future), deadline)
            elif isinstance(command, Perform):
                follows = await self._perform_async(command)
                self._drain(command.flow)
                out += await self._settle(follows, deadline)
            elif isinstance(command, Wakeup):
                self.schedule(command.at)
            elif isinstance(command, Pause):
                if self.pause is not None:
                    self.pause(command.on)
            else:
                out.append(command)
        return out

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.close()
