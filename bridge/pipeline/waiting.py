"""How a flow waits on shared state without awaiting: typed continuations and its own queue.

A flow that needs shared state returns `Perform(op, ticket)` and keeps, as values, what it does
once the result comes (`Step`: a bound method and its arguments, never a closure); the driver hands
the result back (`Flow.performed`).  Meanwhile the flow's later input (frames, timers, deferred
results) waits in `Backlog`, in order, bounded in number and bytes, as mitmproxy's layers queue
events behind a pending hook: the one ordering mechanism.
"""
from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, NamedTuple

from bridge.pipeline.commands import Perform

#: A flow's backlog asks its transport to stop reading beyond this many items or bytes (and to
#: read again under half of both).
BACKLOG_HIGH = 1024
BACKLOG_BYTES = 16 * 1024 * 1024


class Step(NamedTuple):
    """What follows once shared state answered: ``run(value, *args)``, ``value`` being the op's
    result for the first step, then what the step before gave.  ``failed(error, *args)`` instead
    when a step before raised (None: the error goes on to the next step that takes it)."""

    run: Callable[..., Any]
    args: tuple[Any, ...] = ()
    failed: Callable[..., Any] | None = None


class Later(NamedTuple):
    """Input that came while the flow waited: ``run(*args)`` once it goes on."""

    run: Callable[..., Any]
    args: tuple[Any, ...]
    size: int = 0


def at_once(commands: list[Any]) -> list[Any]:
    """``commands`` with every `Perform` on in-process state performed at once and replaced by what
    the flow gave for its result (and what waited behind it): the driver's job, for callers with no
    event loop (the `translate` command, the demo, unit tests).  A Perform on shared state stays in
    the list: nothing here can wait for it.  The flow is told (`Flow.performs_sync`), so it need
    not build the next one on in-process state."""
    out: list[Any] = []
    while True:
        for i, command in enumerate(commands):
            if type(command) is Perform and command.state.sync:
                break
        else:
            return out + commands if out else commands
        out += commands[:i]
        flow = command.flow
        flow.performs_sync = True
        follows = flow.performed(command.ticket, command.state.perform_now(command.op))
        if flow.backlog.items or flow.backlog.full:
            follows += flow.drain()
        commands = follows + commands[i + 1:]


class Backlog:
    """A flow's input waiting behind a `Perform`, in order; ``full`` past the bound."""

    __slots__ = ("items", "size", "full")

    def __init__(self) -> None:
        self.items: collections.deque[Later] = collections.deque()
        self.size = 0
        self.full = False

    def add(self, item: Later) -> bool:
        """Queue ``item``; True when this makes the backlog full (the transport should stop reading)."""
        self.items.append(item)
        self.size += item.size
        if self.full or (len(self.items) <= BACKLOG_HIGH and self.size <= BACKLOG_BYTES):
            return False
        self.full = True
        return True

    def take(self) -> Later:
        item = self.items.popleft()
        self.size -= item.size
        return item

    def eased(self) -> bool:
        """True once when a full backlog fell under half its bound (the transport may read again)."""
        if self.full and len(self.items) < BACKLOG_HIGH // 2 and self.size < BACKLOG_BYTES // 2:
            self.full = False
            return True
        return False
