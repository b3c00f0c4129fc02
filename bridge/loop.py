"""The event loop a command runs on: uvloop for `serve` when it is installed (`pip install
'reminder-bridge[fast]'`), else asyncio's own. `stdio` stays on asyncio's loop unless asked:
uvloop gives a child socketpairs instead of pipes for its stdin and stdout, and a child can tell
(it cannot reopen `/dev/stdin`, pipe ioctls fail). `REMINDER_BRIDGE_LOOP=asyncio` (or `uvloop`)
picks one explicitly for every command, so the two can be compared on one install."""
from __future__ import annotations

import importlib.util
import os
from collections.abc import Coroutine
from typing import Any

ENV = "REMINDER_BRIDGE_LOOP"


def loop_name(command: str = "serve") -> str:
    """`uvloop` or `asyncio`: what `run` uses for ``command`` (`serve`, `stdio`)."""
    wanted = os.environ.get(ENV, "auto")
    if wanted in ("asyncio", "uvloop"):
        return wanted
    return "uvloop" if command != "stdio" and importlib.util.find_spec("uvloop") is not None else "asyncio"


def run(main: Coroutine[Any, Any, int], command: str = "serve") -> int:
    """`asyncio.run(main)` on the loop `loop_name(command)` names."""
    if loop_name(command) == "uvloop":
        try:
            import uvloop
        except ImportError:
            main.close()
            raise RuntimeError(f"{ENV}=uvloop needs uvloop: pip install 'reminder-bridge[fast]'") from None
        return uvloop.run(main)
    import asyncio  # here: `--version` reads `loop_name`, and asyncio is a third of what it would import

    return asyncio.run(main)
