"""Add-ons: what a flow does that is not translation (the outbox, for now) attaches here, through
named hooks, in the manner of mitmproxy's addons. The flow calls the hooks; an add-on uses only
the flow's public API (`call`, `send`, `reply`, `record`, `deliver`, its state table) and answers
with the same commands a flow does. No flow imports an add-on and no add-on imports a flow's
private names; `bridge/assembly.py` puts them together from the route's rules.

Hooks, in the order a frame meets them:

- ``host_markers()``: extra pre-filter markers: host frames the add-on must see parsed.
- ``on_host(msg)``: a parsed host message. Return commands to answer it in the peer's place
  (the flow then does nothing else with it), or None. ``flow.watch(msg, self)`` asks for its
  response.
- ``on_response(request_method, response)``: the response to a watched request, on its way to the
  host (after the flow's own rewrite). Return a changed copy, or None.
- ``on_reminder(reminder, method, source, target)``: a reminder the server pushed, admitted by
  the policy, before it is delivered. Return ``(commands, kept)``: commands to perform as well,
  and whether the add-on keeps the reminder (the host then gets nothing else).
- ``wake(now)`` / ``next_wake()``: the add-on's own timers (a poll), through the flow's `Wakeup`.
- ``on_written(receipts)`` / ``on_unwritten(receipts)``: `Send`s that carried the add-on's receipts
  (`commands.Receipt`, its own ``name`` as owner) reached the host's connection, or were dropped
  unwritten (`Flow.written`, `Flow.unwritten`).  ``on_written`` returns commands.
- ``resumed()``: the transport goes on with a session whose handshake the flow never saw.
- ``close()``: the connection ended.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bridge.model import Reminder
from bridge.pipeline.commands import Command, Receipt


class AddOn:
    """Every hook is optional; the defaults do nothing."""

    flow: Any = None
    #: the owner named by the receipts this add-on asks for
    name = "addon"

    def attach(self, flow: Any) -> None:
        self.flow = flow

    def host_markers(self) -> tuple[bytes, ...]:
        return ()

    def on_host(self, msg: dict[str, Any]) -> list[Command] | None:
        return None

    def on_response(self, request_method: str | None, response: dict[str, Any]) -> dict[str, Any] | None:
        return None

    def on_reminder(self, reminder: Reminder, method: str | None, source: str,
                    target: str) -> tuple[list[Command], bool]:
        return [], False

    def wake(self, now: float) -> list[Command]:
        return []

    def next_wake(self) -> float | None:
        return None

    def on_written(self, receipts: Sequence[Receipt]) -> list[Command]:
        return []

    def on_unwritten(self, receipts: Sequence[Receipt]) -> None:
        pass

    def resumed(self) -> None:
        pass

    def close(self) -> None:
        pass
