"""Reloading the rules while a proxy runs (spec §7): on SIGHUP and when the file changes, for
`stdio` and `serve` alike (the decision is `bridge.policy.reload.apply_reload`)."""
from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any

from bridge.policy.reload import POLL, RulesFile, apply_reload


def watch_rules(rules_file: RulesFile | None, routes: list[Any]) -> Callable[[], None]:
    """Install the SIGHUP handler and the file poll on the running loop; returns how to stop them.
    Without a rules file, SIGHUP is logged and ignored (its default would end the proxy)."""
    loop = asyncio.get_running_loop()
    log = routes[0].recorder
    if rules_file is None:
        loop.add_signal_handler(signal.SIGHUP, lambda: log.log(
            "reload_skipped", level="warning", trigger="SIGHUP",
            why="no rules file was given"))
        return lambda: loop.remove_signal_handler(signal.SIGHUP)
    file = str(rules_file.path)
    loop.add_signal_handler(signal.SIGHUP, lambda: apply_reload(rules_file.reload(), routes, "SIGHUP", file))
    timer: list[asyncio.TimerHandle] = []

    def poll() -> None:
        result = rules_file.poll()
        if result is not None:
            apply_reload(result, routes, "file changed", file)
        timer[:] = [loop.call_later(POLL, poll)]

    timer.append(loop.call_later(POLL, poll))

    def stop() -> None:
        loop.remove_signal_handler(signal.SIGHUP)
        for handle in timer:
            handle.cancel()

    return stop
