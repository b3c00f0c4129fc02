"""Add-ons: what a flow does that is not translation (the outbox's two halves, for now) attaches
here, through named hooks, in the manner of mitmproxy's addons. The flow holds its add-ons as one
`AddOns` and calls each hook point on it once: the dispatcher is the one place that knows in
which order add-ons are asked and how their answers combine. An add-on sees the flow only as a
`FlowApi` (an MCP add-on as an `McpFlowApi`): no flow imports an add-on and no add-on imports a
flow; `bridge/assembly.py` puts them together from the route's rules.

Hooks, in the order a frame meets them (every argument typed, every answer data or commands):

- ``host_markers()``: extra pre-filter markers: host frames the add-on must see parsed.
- ``on_host(msg)``: a parsed host message. Return commands to answer it in the peer's place
  (the flow then does nothing else with it, and no later add-on sees it), or None.
  ``flow.watch(msg, self)`` asks for its response.
- ``on_response(request_method, response)``: the response to a watched request, on its way to the
  host (after the flow's own rewrite, and after the add-ons that watched it first). Return a
  changed copy, or None.
- ``on_reminder(reminder, method, source, target)``: a reminder the server pushed, admitted by
  the policy, before it is delivered. Return ``(commands, kept)``: commands to perform as well,
  and whether the add-on keeps the reminder (the host then gets nothing else).
- ``wake(now)`` / ``next_wake()``: the add-on's own timers (a poll), through the flow's `Wakeup`.
- ``on_written(receipts)`` / ``on_unwritten(receipts)``: `Send`s that carried the add-on's receipts
  (`commands.Receipt`, its own ``name`` as owner) reached the host's connection, or were dropped
  unwritten (`Flow.written`, `Flow.unwritten`).  ``on_written`` returns commands.
- ``resumed()``: the transport goes on with a session whose handshake the flow never saw.
- ``close()``: the connection ended.

An add-on keeps data, never closures: the answer to its own request (`flow.call`) goes to a bound
method of its own, which finds what the request was about in a table it keeps by own id.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from bridge.pipeline.commands import Call, Command, Receipt, Reply

if TYPE_CHECKING:
    from bridge.model import Reminder
    from bridge.pipeline.negotiation import Side
    from bridge.state.scope import Scope
    from bridge.telemetry import Recorder

#: A parsed JSON-RPC message.
Message = dict[str, Any]
#: What the answer to an add-on's own request gives: commands, or None for none.
Answered = Callable[[Message], "list[Command] | None"]


class FlowApi(Protocol):
    """What an add-on may use of any flow: its scope (every key of the add-on's state derives from
    it), its recorder and monotonic clock, its own requests, replies in the peer's place, and the
    decisions it counts."""

    scope: Scope
    recorder: Recorder
    clock: Callable[[], float]

    def call(self, to: str, method: str, params: Any, on_answer: Answered) -> Call: ...

    def reply(self, to: str, request: Message, msg: Message, retry_after_ms: int | None = None) -> Reply: ...

    def record(self, action: str, method: str | None, reminder: Reminder | None = None, *,
               source: str | None = None, target: str | None = None, why: str | None = None,
               session: Any = None) -> None: ...


class McpFlowApi(FlowApi, Protocol):
    """What an add-on of an MCP flow may use besides: the era the flow settled (`modern`: 2026-07-28;
    decided there, never again by an add-on), the host's side and the dialect reminders take toward
    it, responses to watch, pre-filter markers to refresh, and reminders to hand to the host."""

    host: Side

    @property
    def modern(self) -> bool: ...

    def target(self) -> str: ...

    def watch(self, msg: Message, addon: AddOn) -> None: ...

    def refresh_markers(self) -> None: ...

    def deliver(self, reminder: Reminder, method: str, source: str,
                receipt: Receipt | None = None) -> list[Command]: ...


class AddOn:
    """Every hook is optional; the defaults do nothing."""

    flow: FlowApi
    #: the owner named by the receipts this add-on asks for
    name = "addon"

    def attach(self, flow: FlowApi) -> None:
        self.flow = flow

    def host_markers(self) -> tuple[bytes, ...]:
        return ()

    def on_host(self, msg: Message) -> list[Command] | None:
        return None

    def on_response(self, request_method: str | None, response: Message) -> Message | None:
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


class AddOns(tuple[AddOn, ...]):
    """A flow's add-ons, in the order they are asked: the one dispatcher of every hook point.
    (A tuple, so a flow without add-ons holds an empty one.)"""

    def attach(self, flow: FlowApi) -> None:
        for addon in self:
            addon.attach(flow)

    def host_markers(self) -> tuple[bytes, ...]:
        return tuple(marker for addon in self for marker in addon.host_markers())

    def on_host(self, msg: Message) -> list[Command] | None:
        """The first add-on that answers ``msg`` in the peer's place; later ones never see it."""
        for addon in self:
            answered = addon.on_host(msg)
            if answered is not None:
                return answered
        return None

    def on_reminder(self, reminder: Reminder, method: str | None, source: str,
                    target: str) -> tuple[list[Command], bool]:
        """Every add-on's commands, up to the first that keeps the reminder."""
        out: list[Command] = []
        for addon in self:
            commands, kept = addon.on_reminder(reminder, method, source, target)
            out += commands
            if kept:
                return out, True
        return out, False

    def wake(self, now: float) -> list[Command]:
        return [command for addon in self for command in addon.wake(now)]

    def next_wake(self) -> float | None:
        times = [t for t in (addon.next_wake() for addon in self) if t is not None]
        return min(times) if times else None

    def on_written(self, receipts: Sequence[Receipt]) -> list[Command]:
        return [command for addon in self for command in addon.on_written(receipts)] if receipts else []

    def on_unwritten(self, receipts: Sequence[Receipt]) -> None:
        if receipts:
            for addon in self:
                addon.on_unwritten(receipts)

    def resumed(self) -> None:
        for addon in self:
            addon.resumed()

    def close(self) -> None:
        for addon in self:
            addon.close()
