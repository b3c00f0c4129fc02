"""Run a flow's coroutine to its end at once, without an event loop turn.

The flows are coroutines because shared state (Redis) is asynchronous.  With the default
in-process state nothing they await ever suspends, so a frame should cost no task, no loop turn
and no future: `run_now` steps the coroutine once and takes its result.  Flows on shared state
run as tasks instead (`Flow._run`).
"""
from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """``coro``'s result; it must not suspend (in-process state never does)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("a flow on in-process state waited for something: nothing can resume it here")
