"""Reloading the rules while a proxy runs (spec §7): on SIGHUP and when the file changes, for
`stdio` and `serve` alike (the decision is `bridge.policy.reload.apply_reload`)."""
from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bridge.cli import hangup

if TYPE_CHECKING:
    from bridge.policy.reload import RulesFile


def watch_rules(rules_file: RulesFile | None, routes: list[Any]) -> Callable[[], None]:
    """Install the SIGHUP handler and the file poll on the running loop; returns how to stop them.
    A SIGHUP that came while the proxy was starting (noted by `hangup`) is handled now, once.
    Without a rules file, SIGHUP is logged and ignored (its default would end the proxy)."""
    loop = asyncio.get_running_loop()
    log = routes[0].recorder
    timer: list[asyncio.TimerHandle] = []
    if rules_file is None:
        def on_sighup() -> None:
            log.log("reload_skipped", level="warning", trigger="SIGHUP", why="no rules file was given")
    else:  # (the rules schema is imported only with a rules file)
        from bridge.policy.reload import POLL, apply_reload

        file = str(rules_file.path)

        def on_sighup() -> None:
            apply_reload(rules_file.reload(), routes, "SIGHUP", file)

        def poll() -> None:
            result = rules_file.poll()
            if result is not None:
                apply_reload(result, routes, "file changed", file)
            timer[:] = [loop.call_later(POLL, poll)]

        timer.append(loop.call_later(POLL, poll))
    loop.add_signal_handler(signal.SIGHUP, on_sighup)
    if hangup.missed():
        loop.call_soon(on_sighup)

    def stop() -> None:
        loop.remove_signal_handler(signal.SIGHUP)
        hangup.hold()  # a SIGHUP while the proxy shuts down must not end it before its cleanup
        for handle in timer:
            handle.cancel()

    return stop
