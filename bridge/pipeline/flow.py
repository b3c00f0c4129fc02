"""`Flow`: the sans-I/O core of one connection (or session) of one route.

A transport feeds it raw frames (one JSON-RPC message, no newline) with `from_host` /
`from_peer`, and timers with `wake`; the flow answers with typed commands (`commands.py`) and
the transport performs them. A frame that needs no rewrite comes back as `Forward(dest, frame)`
with the very same bytes object; only frames the pre-filter lets through are decoded, once.

What every protocol shares lives here: framing and batches, the pre-filter, the proxy's own
requests (`call`: ids no peer can collide with, answers routed back to the handler that asked),
wakeups, the stage, the policy (trust limits and budgets, with `coalesce`), and how a decision is
counted, traced and logged. Add-ons (`addons.py`) hook in at named points; the flow imports none.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, NamedTuple

from bridge.dialects.paths import params_meta
from bridge.jsonrpc import dumps, error_response, id_key, is_request, loads
from bridge.model import Reminder, ReminderError
from bridge.pipeline.addons import AddOns
from bridge.pipeline.commands import HOST, PEER, Call, Command, Defer, Forward, Learned, Receipt, Reply, Send, Wakeup
from bridge.pipeline.inflight import Unanswered, oversize_reply
from bridge.pipeline.negotiation import Side, observes
from bridge.pipeline.at_once import run_now
from bridge.policy import BUDGET_CODE, STATE_MESSAGE, STATE_RETRY_MS, Held, Policy, Verdict
from bridge.policy.budget import Coalescer
from bridge.prefilter import REMINDER_MARKERS, could_concern
from bridge.rules import RouteSettings
from bridge.state.base import StateUnavailable
from bridge.state.scope import IDENTITY, REQUEST, Scope
from bridge.telemetry import Recorder, trace_keys

#: Prefix of every JSON-RPC id the proxy invents (spec §8.6): random per process and made of
#: letters and digits only (no writer escapes those), so no host or peer collides with it and the
#: pre-filter finds the answers by it whatever else a frame holds.
OWN_ID_PREFIX = f"rb{secrets.token_hex(4)}n"

_own_ids = itertools.count(1)

Handled = list[Command] | None  # None: forward the frame untouched
#: What a message gets when handling its reminder failed inside the proxy (a bug): never the frame untouched
INTERNAL_CODE = -32603
INTERNAL_MESSAGE = "reminder could not be handled: internal error"
#: What feeding a flow gives: the commands, or (only while it waits on shared state) an awaitable of them
Outcome = list[Command] | Awaitable[list[Command]]


def invalid_params(msg_id: Any, exc: ReminderError) -> dict[str, Any]:
    """-32602 naming the field and the rule; the message alone carries it (no `data`, as the vectors pin)."""
    return error_response(msg_id, -32602, str(exc))


class Flow:
    """Base of the per-protocol pipelines. Subclasses implement `on_host` / `on_peer` (a parsed
    message in; commands out, or None for "forward it untouched")."""

    protocol = "?"
    #: what a side is assumed to speak while `auto` and its handshake unseen (host, peer)
    assumed = ("standard", "standard")

    def __init__(self, settings: RouteSettings | None = None, recorder: Recorder | None = None, *,
                 host_dialect: str | None = None, peer_dialect: str | None = None, policy: Policy | None = None,
                 clock: Callable[[], float] | None = None, wall: Callable[[], float] | None = None,
                 scope: Scope | None = None, addons: tuple[Any, ...] = ()):
        self.settings = settings or RouteSettings()
        self.recorder = recorder or Recorder()
        self.route = self.recorder.route
        #: trust limits and budgets (spec §7); give one over a shared `BudgetState` to share budgets
        self.policy = policy if policy is not None else Policy(self.settings, route=self.route)
        #: monotonic seconds (budgets, wakeups) and wall-clock seconds (timestamps on the wire)
        self.clock = clock or time.monotonic
        self.wall = wall or time.time
        #: what this flow's state belongs to (spec §10): given by the transport that made the flow;
        #: every key of the flow's state is derived from it (`bridge/state/scope.py`)
        self.scope = scope if scope is not None else Scope.connection(self.route)
        # -- the state table every protocol shares (protocol flows add their own rows) --
        self.stage = self.settings.stage
        self.host = Side(host_dialect or self.settings.host_dialect, assumed=self.assumed[0])
        self.peer = Side(peer_dialect or self.settings.peer_dialect, assumed=self.assumed[1])
        self.host_markers: tuple[bytes, ...] = REMINDER_MARKERS
        self.peer_markers: tuple[bytes, ...] = REMINDER_MARKERS
        #: over-budget notifications held by `coalesce` until tokens return
        self.held = Coalescer()
        #: host requests whose responses this flow must see, by id key
        self.awaiting: dict[Any, Any] = {}
        #: the proxy's own requests in flight: own id → the handler of the answer
        self.calls: dict[str, Callable[[dict[str, Any]], Handled]] = {}
        self._call_marker = OWN_ID_PREFIX.encode()
        #: the host's requests the peer has not answered yet (`upstream_gone` answers them)
        self.unanswered = Unanswered(self._call_marker)
        self._asked: float | None = None  # the earliest wakeup the transport holds for us
        self.addons = AddOns(addons)
        self.addons.attach(self)
        # the message being handled, for trace context; only set on the decoded path
        self._inbound: dict[str, Any] | None = None
        self._headers: Mapping[str, str] | None = None
        self._frame: bytes | None = None  # the frame being handled, when it is one message (not a batch)
        self._span: Any = None  # the trace context of the last decision's recorded span
        self._start_ns: int | None = None
        self._attributes: dict[str, Any] | None = None
        self._direction: str | None = None  # toward_host | toward_peer, while a frame is handled
        self._carrying = False  # a reminder of the message being handled reached the policy
        #: while a frame waits on shared state: done when the last work queued behind it is done
        self._tail: asyncio.Future[None] | None = None
        self.recorder.track(self)

    # -- framing -------------------------------------------------------------------------------
    def from_host(self, frame: bytes, headers: Mapping[str, str] | None = None) -> Outcome:
        """The commands for one frame from the host.  ``headers``: the HTTP request's headers
        (lower-case names), whose `traceparent` is the parent of the proxy's spans unless the
        message's `_meta` names one.

        A list; on shared state (Redis), an awaitable of the list for a frame the flow decodes, or
        for any frame while one waits.  Frames are handled one at a time, in the order given."""
        return self._handle(frame, HOST, PEER, headers)

    def from_peer(self, frame: bytes, headers: Mapping[str, str] | None = None) -> Outcome:
        return self._handle(frame, PEER, HOST, headers)

    @property
    def busy(self) -> bool:
        """A frame is waiting on shared state: what comes next queues behind it (order is kept)."""
        return self._tail is not None

    def passes(self, data: bytes, origin: str) -> bool:
        """True when ``data`` (one frame, or a block of whole lines) can go on untouched, unparsed."""
        if origin == PEER:
            if self.awaiting:  # answers to host requests this flow must see
                return False
            if self.calls and self._call_marker in data:  # answers to the proxy's own requests
                return False
            return not could_concern(data, self.peer_markers)
        return not could_concern(data, self.host_markers)

    def passes_on(self, block: bytes, origin: str) -> bool:
        """`passes`, for a transport that relays a block of whole lines untouched when it passes:
        what such a block asks or answers is noted, as if its frames had been fed one by one."""
        if self.passes(block, origin):
            self._note(block, origin)
            return True
        return False

    def _note(self, data: bytes, origin: str) -> Any:
        """Track the host's requests in ``data`` (from ``origin``) until answered; the id key of
        the request a peer frame answers, if it is one response to a tracked request."""
        if origin == HOST:
            self.unanswered.asked(data)
            return None
        return self.unanswered.answered(data)

    def _handle(self, frame: bytes, origin: str, dest: str, headers: Mapping[str, str] | None = None) -> Outcome:
        answers = self._note(frame, origin)
        waits = self._tail is not None
        if not waits and self.passes(frame, origin):
            return [Forward(dest, frame, answers)]
        return self._run(self._handle_async(frame, origin, dest, headers, waits))

    async def _handle_async(self, frame: bytes, origin: str, dest: str,
                            headers: Mapping[str, str] | None, waited: bool = False) -> list[Command]:
        if waited and self.passes(frame, origin):  # a frame that waited in line meets a newer state
            return [Forward(dest, frame)]
        try:
            return await self._decode(frame, origin, dest, headers)
        except Exception as exc:  # a pipeline bug costs neither the frame, nor the stream, nor the connection
            # (a message whose reminder reached the policy never gets here: `_dispatch` answers it)
            self._inbound = None
            self.recorder.log("pipeline_error", level="error", side=origin, error=type(exc).__name__,
                              why="the frame carries no reminder the proxy decoded: it goes on untouched")
            return [Forward(dest, frame)]

    def _run(self, work: Coroutine[Any, Any, list[Command]]) -> Outcome:
        """``work``'s commands now on in-process state (nothing there suspends); on shared state, a
        task (the Redis client's timeouts need one) in line behind the frames before it."""
        if self.policy.shared is None:
            return run_now(work)
        return self._in_line(work, self._tail)

    def _in_line(self, work: Coroutine[Any, Any, list[Command]],
                 previous: asyncio.Future[None] | None) -> Awaitable[list[Command]]:
        """``work`` as a task that starts once ``previous`` is done; the flow's message context
        (`_inbound`, the span) belongs to one frame at a time, so frames never interleave."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._tail = done

        async def in_turn() -> list[Command]:
            try:
                if previous is not None:
                    await previous
                return await work
            finally:
                done.set_result(None)
                if self._tail is done:
                    self._tail = None

        return loop.create_task(in_turn())

    async def _decode(self, frame: bytes, origin: str, dest: str, headers: Mapping[str, str] | None) -> list[Command]:
        started = time.perf_counter()
        self._start_ns = time.time_ns()
        self._headers = headers
        self._direction = "toward_host" if dest == HOST else "toward_peer"
        try:
            msg = loads(frame)
        except (ValueError, RecursionError):
            return [Forward(dest, frame)]  # not JSON (or absurdly deep): not ours to judge
        try:
            if isinstance(msg, list):
                out = await self._batch(msg, frame, origin, dest)
            else:
                self._frame = frame
                handled = await self._dispatch(msg, origin)
                out = [Forward(dest, frame)] if handled is None else \
                    [Forward(c.to, frame) if type(c) is _Untouched else c for c in handled]
        finally:
            self._headers = self._frame = None
        if out and not (len(out) == 1 and type(out[0]) is Forward):
            self.recorder.rewrite_latency(self.protocol, time.perf_counter() - started)
        return self._with_wakeup(out)

    async def _dispatch(self, msg: Any, origin: str) -> Handled:
        if not isinstance(msg, dict):
            return None
        self._inbound, self._span, self._attributes = msg, None, None
        self._carrying = False
        calls = len(self.calls)
        try:
            if origin == PEER and "method" not in msg and (answer := await self._own_answer(msg)) is not None:
                return answer
            out = await (self.on_host(msg) if origin == HOST else self.on_peer(msg))
        except Exception as exc:
            if not self._carrying or observes(self.stage):
                raise  # no reminder decoded (or `observe`, which changes nothing): `_handle_async` forwards it
            return self._internal_error(msg, origin, exc)
        finally:
            self._inbound = None
        if out is not None and observes(self.stage):
            if len(self.calls) > calls:  # observe sends nothing of its own
                for own in list(self.calls)[calls:]:
                    del self.calls[own]
            return None  # the decisions were counted and logged; the wire is untouched
        return out

    def _internal_error(self, msg: dict[str, Any], origin: str, exc: Exception) -> list[Command]:
        """A bug while handling a message whose reminder the policy saw: the reminder is never passed
        on untranslated.  A request gets -32603 naming the cause, a response (that would have carried
        the reminder) becomes that error toward its destination, a notification is dropped; all
        counted and logged."""
        method = msg.get("method")
        why = f"internal error ({type(exc).__name__}): the reminder is never passed on untranslated"
        self.recorder.log("pipeline_error", level="error", side=origin, method=method, error=type(exc).__name__,
                          why=why)
        request = is_request(msg)
        if not request and "method" in msg:
            self.record("dropped", method, why=why)
            return []
        self.record("refused", method, why=why)
        to = origin if request else (HOST if origin == PEER else PEER)
        error = error_response(msg.get("id"), INTERNAL_CODE, INTERNAL_MESSAGE, {"reason": type(exc).__name__})
        return [self.reply(to, msg, error) if request else Send(to, dumps(error))]

    async def _own_answer(self, msg: dict[str, Any]) -> Handled:
        """The answer to one of the proxy's own requests goes to the handler that asked, never on
        (a handler is a function or a coroutine function)."""
        msg_id = msg.get("id")
        handler = self.calls.pop(msg_id, None) if isinstance(msg_id, str) else None
        if handler is None:
            return None
        answer = handler(msg)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return answer or []

    async def _batch(self, batch: list[Any], frame: bytes, origin: str, dest: str) -> list[Command]:
        """JSON-RPC batches (MCP 2025-03-26): rewrite members, keep the rest of the array as it was."""
        results = [await self._dispatch(item, origin) for item in batch]
        if all(r is None for r in results):
            return [Forward(dest, frame)]
        forward: list[Any] = []
        back: list[Any] = []
        others: list[Command] = []
        for item, result in zip(batch, results):
            if result is None:
                forward.append(item)
                continue
            for command in result:
                if type(command) is _Untouched:
                    (forward if command.to == dest else back).append(item)
                elif isinstance(command, (Send, Reply)):
                    (forward if command.to == dest else back).append(json.loads(command.data))
                else:
                    others.append(command)
        out: list[Command] = others
        if forward:
            out.append(Send(dest, dumps(forward)))
        if back:
            out.append(Reply(origin, dumps(back)))
        return out

    # -- timers --------------------------------------------------------------------------------
    def wake(self, now: float) -> Outcome:
        """The transport's timer fired (it asked with `Wakeup`): coalesced reminders whose buckets
        have a token again go out, add-ons poll. Returns the next `Wakeup` when more remain."""
        return self._run(self._wake(now))

    async def _wake(self, now: float) -> list[Command]:
        self._asked = None
        out: list[Command] = []
        if len(self.held) and (self.held.wake_at is None or now >= self.held.wake_at):
            out += await self._release(now)
        out += self.addons.wake(now)
        return self._with_wakeup(out)

    def next_wakeup(self) -> float | None:
        times = [t for t in [self.held.wake_at if len(self.held) else None,
                             self.addons.next_wake()] if t is not None]
        return min(times) if times else None

    def _with_wakeup(self, out: list[Command]) -> list[Command]:
        """Ask the transport for a timer when the flow now needs one earlier than it has (and do the
        same after deferred work, whose outcome may change when the flow wants to wake)."""
        for i, command in enumerate(out):
            if type(command) is Defer:
                out[i] = command._replace(done=self._then(command.done))  # type: ignore[union-attr]
        at = self.next_wakeup() if (len(self.held) or self.addons) else None
        if at is not None and (self._asked is None or at < self._asked):
            self._asked = at
            out.append(Wakeup(at))
        return out

    def _then(self, done: Callable[[Any], Any]) -> Callable[[Any], Outcome]:
        """What follows deferred work, in line with the frames (``done`` may be a coroutine function)."""
        return lambda result: self._run(self._after_deferred(done, result))

    async def _after_deferred(self, done: Callable[[Any], Any], result: Any) -> list[Command]:
        out = done(result)
        if asyncio.iscoroutine(out):
            out = await out
        return self._with_wakeup(list(out or []))

    async def _release(self, now: float) -> list[Command]:
        """Coalesced reminders whose buckets have a token again, newest per key, in order."""
        waits: list[int] = []
        admitted: set[int] = set()
        for item in list(self.held):
            exceeded = await self.policy.charge_held(item.reminder, server=self.route, session=item.context[1],
                                                     now=now)
            if exceeded is None:
                admitted.add(id(item))
            else:
                waits.append(exceeded.retry_after_ms)

        out: list[Command] = []
        for item in self.held.release(lambda item: id(item) in admitted):
            self._inbound, self._span, self._attributes = item.context[0], None, {"reminder.coalesced": True}
            self._start_ns = time.time_ns()
            self._direction = item.context[2]
            try:
                delivered = item.deliver(item.reminder)
                if asyncio.iscoroutine(delivered):  # e.g. into a queue in shared state
                    delivered = await delivered
                out += delivered or []
            finally:
                self._inbound = None
        self.held.wake_at = now + min(waits) / 1000.0 if waits else None
        return out

    def close(self, why: str) -> None:
        """The connection ends while the flow still holds reminders: each is dropped and counted."""
        for item in self.held:
            self._inbound, self._span, self._attributes = item.context[0], None, None
            try:
                self.record("dropped", item.context[0].get("method"), item.reminder, why=why)
            finally:
                self._inbound = None
        self.held = Coalescer()
        self.calls.clear()
        self.addons.close()

    # -- what the transport tells the flow ------------------------------------------------------
    def upstream_gone(self, error: dict[str, Any], frame: bytes | None = None) -> list[Reply]:
        """The peer went away (a child exited, an upstream failed or broke off its answer): ``error``
        (a JSON-RPC error object) for each host request still unanswered, ``frame``: of those it
        carried, in the order they were sent, each id as the host wrote it."""
        return [Reply(HOST, data, json.loads(token)) for token, data in self.unanswered.errors(error, frame)]

    def exchange_ended(self, frame: bytes) -> None:
        """The transport's exchange for the host's ``frame`` is over (HTTP: its response ended):
        its requests wait no longer, answered or not, so a flow whose answers go elsewhere (a raw
        relay, a 202) keeps nothing of them."""
        self.unanswered.drop(frame)

    def oversize(self, head: bytes, origin: str, limit: int) -> list[Reply]:
        """A frame from ``origin`` over the transport's ``limit``, of which only ``head`` (its first
        bytes) was kept: a host request gets an error, a peer response becomes one (the host stops
        waiting); anything else is gone unanswered."""
        found = oversize_reply(head, limit, origin == HOST)
        if found is None:
            return []
        msg_id, data = found
        self.unanswered.forget(msg_id)
        return [Reply(HOST, data, msg_id)]

    def learned(self) -> Learned | None:
        """What this flow learned of the peer (its handshake, the A2A card), for flows of its route
        that will not see it; None before it learned anything."""
        dialect = self.peer.learned
        return None if dialect is None else Learned(dialect, self.peer_declared())

    def peer_declared(self) -> bool | None:
        """Whether the peer's handshake declared the reminder capability (protocols that have one)."""
        return None

    def written(self, receipts: tuple[Receipt, ...] | list[Receipt]) -> list[Command]:
        """The `Send`s that carried ``receipts`` are on the host's connection: their owners go on
        (the outbox marks its rows delivered)."""
        return self._with_wakeup(self._receipts_done(receipts)) if receipts else []

    def _receipts_done(self, receipts: tuple[Receipt, ...] | list[Receipt]) -> list[Command]:
        """What the owners of ``receipts`` do once they are done with: written, or decided by the flow
        without a write (a reminder refused or dropped)."""
        return self.addons.on_written(receipts)

    def unwritten(self, receipts: tuple[Receipt, ...] | list[Receipt]) -> None:
        """The `Send`s that carried ``receipts`` were dropped before they were written (their
        session ended, its queue overflowed): their owners keep what they deliver for later."""
        self.addons.on_unwritten(receipts)

    def bind(self, scope: Scope) -> None:
        """What this flow's state belongs to, learned after the flow was made: a 2025-11-25 session's
        id comes in the server's answer to `initialize`, the request that made the flow.  Only a
        request's or an identity's flow is bound, and only before any session of its own."""
        if self.scope.kind not in (REQUEST, IDENTITY):
            raise ValueError(f"a flow of {self.scope.kind} scope is not bound again")
        self.scope = scope

    def resume(self, record: dict[str, Any] | None) -> list[Command]:
        """Go on with a session this flow's handshake never saw (a proxy restart, another replica):
        from what shared state recorded of it, else with the host's dialect unknown (`none`, unless
        the rules name one: spec §10).  Returns the timer its add-ons now need (an outbox poll)."""
        if record is None:
            self.assume_host("none")
        else:
            self.restore(record)
        self.addons.resumed()
        return self._with_wakeup([])

    # -- reload --------------------------------------------------------------------------------
    def reconfigure(self, settings: RouteSettings, policy: Policy | None = None) -> None:
        """New rules for the messages to come (a reload); the connection and what it learned stay.

        Stage, fallbacks, envelope, trust and budget apply from the next message. A dialect the
        new rules name replaces the one in use; `auto` keeps what was learned.
        """
        old = self.settings
        self.settings = settings
        self.stage = settings.stage
        self.policy = policy if policy is not None else Policy(settings, route=self.route, state=self.policy.state)
        self.host.configure(settings.host_dialect)
        self.peer.configure(settings.peer_dialect)
        self.on_reconfigure(old)

    def on_reconfigure(self, old: RouteSettings) -> None:
        """Subclasses recompute what depends on settings (e.g. which frames to parse)."""

    def assume_host(self, dialect: str) -> None:
        """A host whose handshake the proxy never saw (a session it does not hold): assume ``dialect``
        until a handshake says otherwise, unless the rules name one."""
        self.host.assumed = dialect
        self.on_reconfigure(self.settings)

    def pending_counts(self) -> dict[str, int]:
        """Reminders this connection holds, by queue (the admin port's gauges)."""
        return {"coalesce": len(self.held)}

    def negotiated(self) -> dict[str, Any] | None:
        """What another replica needs to go on with this session (its handshake's outcome), as a
        JSON record; None when there is nothing to share (spec §12)."""
        return None

    def restore(self, record: dict[str, Any]) -> None:
        """Go on with a session from its `negotiated` record."""

    # -- for subclasses ------------------------------------------------------------------------
    async def on_host(self, msg: dict[str, Any]) -> Handled:
        return None

    async def on_peer(self, msg: dict[str, Any]) -> Handled:
        return None

    def forward(self, to: str) -> Any:
        """The frame being handled, untouched (`_handle` makes it a `Forward` with its bytes)."""
        return _UNTOUCHED[to]

    def frame_bytes(self) -> bytes:
        """The bytes of the message being handled, for a flow that sends it on later untouched (a
        member of a batch has no bytes of its own: it is encoded afresh)."""
        return self._frame if self._frame is not None else dumps(self._inbound)

    def send(self, to: str, msg: dict[str, Any], *, answers: bool = False, receipts: tuple[Receipt, ...] = ()) -> Send:
        method = msg.get("method")
        params = msg.get("params")
        name = params.get("name", params.get("uri")) if isinstance(params, dict) and method else None
        return Send(to, dumps(msg), id_key(msg.get("id")) if answers else None, method,
                    name if isinstance(name, str) else None, receipts)

    def reply(self, to: str, request: dict[str, Any], msg: dict[str, Any], retry_after_ms: int | None = None) -> Reply:
        if to == HOST:  # the proxy answered the host's request itself: nothing waits for the peer's
            self.unanswered.forget(request.get("id"))
        return Reply(to, dumps(msg), request.get("id"), retry_after_ms)

    def call(self, to: str, method: str, params: Any, on_answer: Callable[[dict[str, Any]], Handled]) -> Call:
        """The proxy's own request; ``on_answer(response)`` gets its answer and returns commands."""
        own = f"{OWN_ID_PREFIX}{next(_own_ids)}"
        self.calls[own] = on_answer
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": own, "method": method}
        if params is not None:
            request["params"] = params
        return Call(to, dumps(request), own)

    def expect_response(self, msg: dict[str, Any], what: Any) -> None:
        """Remember that the response to the host's request ``msg`` must be seen by this flow."""
        key = id_key(msg.get("id"))
        if key is not None:
            self.awaiting[key] = what

    def response_to(self, msg: dict[str, Any]) -> Any:
        """What was remembered for the host request this response answers (and forget it)."""
        if "method" in msg or "id" not in msg:
            return None
        key = id_key(msg["id"])
        return None if key is None else self.awaiting.pop(key, None)

    # -- decisions -----------------------------------------------------------------------------
    def record(self, action: str, method: str | None, reminder: Reminder | None = None, *,
               source: str | None = None, target: str | None = None, why: str | None = None,
               session: Any = None) -> None:
        """Count, trace and log one decision about a reminder of the message being handled."""
        attributes, self._attributes = self._attributes, None
        context = self.recorder.reminder(action, protocol=self.protocol, method=method, reminder=reminder,
                                         source=source, target=target, why=why, stage=self.stage,
                                         carrier=self._carrier() if self.recorder.tracing.spans else None,
                                         attributes=attributes, start_ns=self._start_ns,
                                         session=self.scope if session is None else session,
                                         direction=self._direction)
        if context is not None:
            self._span = context

    def stamp(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Write trace context into ``msg``'s `params._meta` (a message the proxy made or rewrote):
        the span of the last decision as parent, else the incoming message's own context."""
        inbound = self._carrier()
        if self._span is None and inbound is None:  # nothing to carry: the common case without tracing
            return msg
        keys = self.recorder.carrier(self._span, inbound)
        params = msg.get("params")
        if keys and isinstance(params, dict):
            meta = params.get("_meta")
            params["_meta"] = {**(meta if isinstance(meta, dict) else {}), **keys}
        return msg

    def trace_context(self) -> dict[str, str]:
        """Trace-context headers (`traceparent`, ...) for the request the proxy forwards after the
        message just handled: for transports whose bodies have no `_meta` slot (A2A over HTTP)."""
        return self.recorder.carrier(self._span, self._carrier())

    def _carrier(self) -> dict[str, str] | None:
        """Trace context of the message being handled (the propagators' keys): HTTP headers,
        overridden by `params._meta`."""
        carrier: dict[str, str] | None = None
        meta = params_meta(self._inbound)
        for source in (self._headers, meta):  # `_meta` last: it overrides the headers
            if source and isinstance(source, Mapping):
                for key in trace_keys():
                    if isinstance(value := source.get(key), str):
                        if carrier is None:
                            carrier = {}
                        carrier[key] = value
        return carrier

    # -- the policy ----------------------------------------------------------------------------
    async def police(self, msg: dict[str, Any], reminder: Reminder, method: str, *, origin: str,
               deliver: Callable[[Reminder], Handled] | None = None, session: Any = None,
               pending: int | Callable[[], Awaitable[int]] | None = None, source: str | None = None,
               target: str | None = None, request: bool | None = None) -> tuple[Reminder | None, list[Command]]:
        """The policy, once per decoded reminder, just before it is encoded for the other side.

        Returns ``(reminder, [])`` to go on with (possibly cleaned: control characters stripped,
        `roleHint` lowered), or ``(None, out)``: the reminder is refused and ``out`` is what to
        send instead: a JSON-RPC error to ``origin`` for a request, nothing for a notification
        (dropped, or held by `coalesce` until ``deliver(reminder)`` can send it).
        ``session``: the `Scope` it belongs to (default: the flow's own); ``pending``: how many
        reminders that session holds when this one would be held too (or a coroutine function that
        counts them in shared state: asked only once the trust limits passed).  ``request=False`` treats a
        reminder riding on a request (A2A `metadata.harn.reminder` on `SendMessage`) like a
        notification: refusing it drops the reminder, not the message.
        """
        self._carrying = True
        session = self.scope if session is None else session
        request = is_request(msg) if request is None else request
        if self.policy.shared is None and callable(pending):  # this process's own tables: nothing to protect
            pending = await pending()
        admit = self.policy.admit if self.policy.shared is None else self.policy.admit_shared
        verdict = admit(reminder, request=request, server=self.route, session=session, now=self.clock(),
                        from_peer=origin == PEER, pending=pending, shadow=observes(self.stage))
        if self.policy.shared is not None:  # fleet-wide budgets: charged on the Redis server
            verdict = await verdict
        attributes: dict[str, Any] = {f"reminder.trust.{k}": v for k, v in verdict.changes.items()} \
            if verdict.changes else {}
        if verdict.changes:
            self.recorder.info("reminder_cleaned", protocol=self.protocol, method=method, id=reminder.id,
                               **{k.lower(): v for k, v in verdict.changes.items()})
        if verdict.shadowed is not None:
            self.recorder.budget_rejected(self.protocol, verdict.shadowed.scope, shadow=True)
            attributes["reminder.budget.shadow_limited"] = True
            attributes["reminder.budget.scope"] = verdict.shadowed.scope
        if verdict.ok:
            self._attributes = attributes or None
            return verdict.reminder, []
        self._attributes = attributes
        return None, self._refused(msg, verdict, method, origin, deliver, session, source, target, request)

    def state_refused(self, msg: dict[str, Any], reminder: Reminder, method: str,
                      exc: StateUnavailable) -> list[Command]:
        """A reminder request whose queue lives in shared state that is away (`closed`): the
        structured error with ``scope = "state"`` (spec §12), and the decision counted."""
        self.record("refused", method, reminder, why=f"{STATE_MESSAGE} (on_unavailable = closed): {exc.cause}")
        return [self.reply(HOST, msg, error_response(msg.get("id"), BUDGET_CODE, STATE_MESSAGE, exc.data()),
                           STATE_RETRY_MS)]

    def _refused(self, msg: dict[str, Any], verdict: Verdict, method: str, origin: str,
                 deliver: Callable[[Reminder], Handled] | None, session: Any, source: str | None,
                 target: str | None, request: bool) -> list[Command]:
        reminder = verdict.reminder
        if verdict.refusal is not None:
            self.recorder.trust_refused(self.protocol, verdict.refusal.limit)
            self._attributes = {**(self._attributes or {}), "reminder.trust.limit": verdict.refusal.limit}
            self.record("refused", method, reminder, source=source, target=target, why=verdict.why, session=session)
        elif verdict.unavailable is not None:  # shared state down, `closed`: requests refused, the rest per `over`
            if not request and verdict.over == "coalesce" and deliver is not None:
                return self._coalesce(msg, verdict, method, deliver, session, source, target)
            self.record("refused" if request else "dropped", method, reminder, source=source, target=target,
                        why=verdict.why, session=session)
        else:
            assert verdict.exceeded is not None
            self.recorder.budget_rejected(self.protocol, verdict.exceeded.scope, shadow=False)
            self._attributes = {**(self._attributes or {}), "reminder.budget.scope": verdict.exceeded.scope,
                                "reminder.budget.retry_after_ms": verdict.exceeded.retry_after_ms}
            if not request and verdict.over == "coalesce" and deliver is not None:
                return self._coalesce(msg, verdict, method, deliver, session, source, target)
            self.record("rate_limited", method, reminder, source=source, target=target, why=verdict.why,
                        session=session)
        if request:
            code, message, data = verdict.error()
            return [self.reply(origin, msg, error_response(msg["id"], code, message, data), verdict.retry_after_ms)]
        return []

    def _coalesce(self, msg: dict[str, Any], verdict: Verdict, method: str,
                  deliver: Callable[[Reminder], Handled], session: Any, source: str | None,
                  target: str | None) -> list[Command]:
        reminder = verdict.reminder
        key = held_key(reminder)
        limit = self.settings.trust.max_pending_per_session
        if not self.held.holds(key) and len(self.held) >= limit:
            self.recorder.trust_refused(self.protocol, "max_pending_per_session")
            self.record("dropped", method, reminder, source=source, target=target, session=session,
                        why=f"over budget and the coalesce queue is full (max_pending_per_session = {limit})")
            return []
        replaced = self.held.hold(Held(key, reminder, deliver, (msg, session, self._direction)))
        assert verdict.retry_after_ms is not None
        wake = self.clock() + verdict.retry_after_ms / 1000.0
        if self.held.wake_at is None or wake < self.held.wake_at:
            self.held.wake_at = wake
        self.record("coalesced", method, reminder, source=source, target=target, session=session,
                    why=f"{verdict.why}; held until tokens return" + (
                        f", replacing {replaced.reminder.id}" if replaced is not None else ""))
        return []


def held_key(reminder: Reminder) -> str:
    """What `coalesce` holds a reminder under: its dedupe key (the newest replaces older ones),
    else its own id (nothing is merged that the sender did not mark as replaceable)."""
    return f"k:{reminder.dedupe_key}" if reminder.dedupe_key is not None else f"i:{reminder.id}"


class _Untouched(NamedTuple):
    """`Flow.forward(to)`: the frame being handled, before `_handle` puts its bytes in a `Forward`."""

    to: str


_UNTOUCHED = {HOST: _Untouched(HOST), PEER: _Untouched(PEER)}
