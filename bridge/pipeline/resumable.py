"""Run a flow's coroutine at once when it can finish at once.

The flows are written as coroutines because shared state (Redis) is asynchronous; but with the
default in-process state nothing they await ever suspends, and a frame should then cost no task,
no event-loop turn and no future.  `run_now` steps the coroutine once: finished, its result comes
back as is; suspended (it is waiting on Redis), a `Resumable` comes back, which the transport
awaits to get the result, exactly as if it had awaited the coroutine from the start.
"""
from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Resumable(Generic[T]):
    """A coroutine already started and now suspended on ``pending`` (what it yielded to the loop)."""

    __slots__ = ("coro", "pending")

    def __init__(self, coro: Coroutine[Any, Any, T], pending: Any):
        self.coro = coro
        self.pending = pending

    def __await__(self) -> Generator[Any, Any, T]:
        coro, pending = self.coro, self.pending
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation and the like reach the coroutine where it waits
                try:
                    pending = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
                continue
            try:
                pending = coro.send(sent)
            except StopIteration as stop:
                return stop.value


def run_now(coro: Coroutine[Any, Any, T]) -> T | Resumable[T]:
    """``coro``'s result if it finishes without suspending, else a `Resumable` to await."""
    try:
        pending = coro.send(None)
    except StopIteration as stop:
        return stop.value
    return Resumable(coro, pending)


def finish_now(coro: Coroutine[Any, Any, T]) -> T:
    """``coro``'s result; for callers that hold no event loop (`translate`, the demo, tests), whose
    flows use in-process state and so never suspend."""
    outcome = run_now(coro)
    if isinstance(outcome, Resumable):
        outcome.coro.close()
        raise RuntimeError("a flow on shared state suspended where no event loop can resume it")
    return outcome
