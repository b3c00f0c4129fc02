"""`Flow`: the sans-I/O core of one connection (or session) of one route.

A transport feeds it raw frames (one JSON-RPC message, no newline) with `from_host` /
`from_peer`, and timers with `wake`; the flow answers with typed commands (`commands.py`) and
the transport performs them. A frame that needs no rewrite comes back as `Forward(dest, frame)`
with the very same bytes object; only frames the pre-filter lets through are decoded, once.

What every protocol shares lives here: framing and batches, the pre-filter, the proxy's own
requests (`call`: ids no peer can collide with, answers routed back to the handler that asked),
wakeups, the stage, the policy (trust limits and budgets, with `coalesce`), and how a decision is
counted, traced and logged. Add-ons (`addons.py`) hook in at named points; the flow imports none.

Plain state machines: every entry returns a list of commands, never an awaitable.  Shared-state
work (a budget charge, an A2A task queue) is a `Perform` command; the flow goes on with a typed
continuation (`waiting.Step`) when the driver hands the result to `performed`, and queues its own
later input meanwhile (`waiting.Backlog`).
"""
from __future__ import annotations

import itertools
import json
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from bridge.defaults import ROUTE
from bridge.fields import ReminderError
from bridge.jsonrpc import dumps, error_response, id_key, is_request, loads
from bridge.pipeline.addons import AddOns
from bridge.pipeline.commands import (
    HOST, PEER, Call, Command, Defer, Forward, Learned, Pause, Perform, Receipt, Reply, Send, Wakeup,
)
from bridge.pipeline.expectations import Awaiting
from bridge.pipeline.inflight import Answering, Unanswered
from bridge.pipeline.negotiation import Side, observes
from bridge.pipeline.policing import Handled, Policing
from bridge.pipeline.recording import Recording
from bridge.pipeline.waiting import Backlog, Later, Step
from bridge.policy import Coalesced, Policy
from bridge.policy.budget import Coalescer
from bridge.prefilter import REMINDER_MARKERS, could_concern
from bridge.state.scope import IDENTITY, REQUEST, Scope
from bridge.telemetry import Recorder

if TYPE_CHECKING:
    from bridge.rules import RouteSettings

#: Prefix of every JSON-RPC id the proxy invents (spec §8.6): random per process and made of
#: letters and digits only (no writer escapes those), so no host or peer collides with it and the
#: pre-filter finds the answers by it whatever else a frame holds.
OWN_ID_PREFIX = f"rb{secrets.token_hex(4)}n"

_own_ids = itertools.count(1)
_tickets = itertools.count(1)

#: What a message gets when handling its reminder failed inside the proxy (a bug): never the frame untouched
INTERNAL_CODE = -32603
INTERNAL_MESSAGE = "reminder could not be handled: internal error"


def invalid_params(msg_id: Any, exc: ReminderError) -> dict[str, Any]:
    """-32602 naming the field and the rule; the message alone carries it (no `data`, as the vectors pin)."""
    return error_response(msg_id, -32602, str(exc))


class Flow(Policing, Recording, Answering):
    """Base of the per-protocol pipelines. Subclasses implement `on_host` / `on_peer` (a parsed
    message in; commands out, or None for "forward it untouched")."""

    protocol = "?"
    #: what a side is assumed to speak while `auto` and its handshake unseen (host, peer)
    assumed = ("standard", "standard")

    def __init__(self, settings: RouteSettings | None = None, recorder: Recorder | None = None, *,
                 host_dialect: str | None = None, peer_dialect: str | None = None, policy: Policy | None = None,
                 clock: Callable[[], float] | None = None, wall: Callable[[], float] | None = None,
                 scope: Scope | None = None, addons: tuple[Any, ...] = ()):
        self.settings = settings or ROUTE
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
        self.awaiting = Awaiting()
        #: the proxy's own requests in flight: own id → what handles the answer
        self.calls: dict[str, Step] = {}
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
        #: the `Perform` this flow waits on (its ticket), what follows it, and the message context
        #: it was asked in; what comes meanwhile waits in the backlog
        self._ticket: int | None = None
        self._chain: list[Step] = []
        self._saved: tuple[Any, ...] = ()
        self.backlog = Backlog()
        #: the driver performs a `Perform` on in-process state at once, in the call that gave it
        #: (`waiting.at_once` says so): the flow may then do it itself (`perform`)
        self.performs_sync = False
        self.recorder.track(self)

    # -- framing -------------------------------------------------------------------------------
    def from_host(self, frame: bytes, headers: Mapping[str, str] | None = None) -> list[Command]:
        """The commands for one frame from the host.  ``headers``: the HTTP request's headers
        (lower-case names), whose `traceparent` is the parent of the proxy's spans unless the
        message's `_meta` names one.

        While the flow waits on shared state (a `Perform`), the frame waits in its backlog and
        comes back in order from `performed` / `drain` (the list is empty, or `Pause`)."""
        return self._handle(frame, HOST, PEER, headers)

    def from_peer(self, frame: bytes, headers: Mapping[str, str] | None = None) -> list[Command]:
        return self._handle(frame, PEER, HOST, headers)

    @property
    def busy(self) -> bool:
        """The flow waits on shared state: what comes next queues behind it (order is kept)."""
        return self._ticket is not None

    def passes(self, data: bytes, origin: str) -> bool:
        """True when ``data`` (one frame, or a block of whole lines) can go on untouched, unparsed."""
        if self._ticket is not None:  # it waits in line
            return False
        if origin == PEER:
            if self.awaiting and self.awaiting.answered_in(data):  # answers to host requests this flow must see
                return False
            if self._call_marker in data:  # answers to the proxy's own requests, late ones too
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

    def _handle(self, frame: bytes, origin: str, dest: str, headers: Mapping[str, str] | None = None) -> list[Command]:
        # the host's requests are noted as frames arrive, waiting in line or not (`_note`, spelled out)
        answers = self.unanswered.answered(frame) if origin == PEER else self.unanswered.asked(frame)
        if self._ticket is not None:
            return self._later(Later(self._waited, (frame, origin, dest, headers), len(frame)))
        if self.passes(frame, origin):
            return [Forward(dest, frame, answers)]
        return self._decode(frame, origin, dest, headers)

    def _waited(self, frame: bytes, origin: str, dest: str, headers: Mapping[str, str] | None) -> list[Command]:
        """A frame that waited in line meets a newer state."""
        if self.passes(frame, origin):
            return [Forward(dest, frame)]
        return self._decode(frame, origin, dest, headers)

    # -- waiting on shared state ---------------------------------------------------------------
    def perform(self, op: Any, state: Any, run: Callable[..., list[Command] | Handled], *args: Any) -> list[Command]:
        """Ask for shared-state work (``op`` on ``state``); ``run(result, *args)`` goes on once the
        transport hands the result to `performed`.  Asked while another waits: asked once that one
        is done, after what follows it.

        In-process state (``state.sync``), once the driver said it performs that at once
        (`performs_sync`), is performed here, in the same call: the same steps in the same order,
        without the round trip (no `Perform`, no saved context, no `Step` made for what follows)."""
        if self._ticket is None and self.performs_sync and state.sync:
            return run(state.perform_now(op), *args)  # type: ignore[return-value]
        return self._ask(op, state, Step(run, args))

    def _ask(self, op: Any, state: Any, then: Step) -> list[Command]:
        if self._ticket is not None:
            self._chain.append(Step(self._perform_next, (op, state, then)))
            return []
        self._ticket = ticket = next(_tickets)
        self._chain = [then]
        self._saved = (self._inbound, self._headers, self._frame, self._span, self._start_ns, self._attributes,
                       self._direction, self._carrying)
        return [Perform(op, ticket, state, self)]

    def _perform_next(self, value: Any, op: Any, state: Any, then: Step) -> list[Command]:
        return list(value or []) + self._ask(op, state, then)

    def _waits(self, run: Callable[..., Any], args: tuple[Any, ...] = (),
               failed: Callable[..., Any] | None = None) -> bool:
        """Whether the work just done asked for shared state: if so, ``Step(run, args, failed)``
        follows it (made only then: this is asked once per frame)."""
        if self._ticket is None:
            return False
        self._chain.append(Step(run, args, failed))
        return True

    def performed(self, ticket: int, result: Any) -> list[Command]:
        """The result of the `Perform` with ``ticket`` (a `StateUnavailable` when shared state could
        not serve it): the flow goes on where it stopped.  What waited behind it comes from `drain`."""
        if ticket != self._ticket:
            raise ValueError(f"no Perform {ticket} is awaited (awaiting {self._ticket})")
        chain, self._chain, self._ticket = self._chain, [], None
        (self._inbound, self._headers, self._frame, self._span, self._start_ns, self._attributes,
         self._direction, self._carrying) = self._saved
        self._saved = ()
        value: Any = result
        error: Exception | None = None
        try:
            for i, step in enumerate(chain):
                try:
                    if error is None:
                        value = step.run(value, *step.args)
                    elif step.failed is not None:
                        value, error = step.failed(error, *step.args), None
                    else:
                        continue
                except Exception as exc:  # the next step that takes errors decides
                    error = exc
                    continue
                if self._ticket is not None:  # waits again: the rest follows that
                    self._chain += chain[i + 1:]
                    return _placed(value, self._saved[2])
        finally:
            if self._ticket is None:
                self._inbound = self._headers = self._frame = None
        if error is not None:
            raise error
        return value if type(value) is list else list(value or [])

    def drain(self) -> list[Command]:
        """What waited while the flow waited on shared state, handled in order, until it waits again
        (`Pause(False)` first once the backlog fell under half its bound)."""
        backlog = self.backlog
        if not backlog.items and not backlog.full:
            return []
        out: list[Command] = []
        while backlog.items and self._ticket is None:
            item = backlog.take()
            out += item.run(*item.args)
        if backlog.eased():
            out.insert(0, Pause(False))
        return out

    def _later(self, item: Later) -> list[Command]:
        return [Pause(True)] if self.backlog.add(item) else []

    # -- decoding ------------------------------------------------------------------------------
    def _decode(self, frame: bytes, origin: str, dest: str, headers: Mapping[str, str] | None) -> list[Command]:
        started = time.perf_counter()
        self._start_ns = time.time_ns()
        self._headers = headers
        self._direction = "toward_host" if dest == HOST else "toward_peer"
        try:
            msg = loads(frame)
        except (ValueError, RecursionError):
            self._headers = None
            return [Forward(dest, frame)]  # not JSON (or absurdly deep): not ours to judge
        single = not isinstance(msg, list)
        try:
            if single:
                self._frame = frame
                out = self._dispatch(msg, origin)
            else:
                out = self._batch(msg, frame, origin, dest)
        except Exception as exc:  # a pipeline bug costs neither the frame, nor the stream, nor the connection
            return self._frame_failed(exc, frame, origin, dest, started, single)
        finally:
            self._headers = self._frame = None
        if self._ticket is not None and self._waits(self._decoded, (frame, origin, dest, started, single),
                                                    self._frame_failed):
            return _placed(out, frame)  # type: ignore[arg-type]
        return self._decoded(out, frame, origin, dest, started, single)

    def _decoded(self, handled: Handled, frame: bytes, origin: str, dest: str, started: float,
                 single: bool) -> list[Command]:
        if not single:
            out = handled or []
        elif handled is None:
            out = [Forward(dest, frame)]
        elif len(handled) == 1 and type(handled[0]) is not _Untouched:  # the usual: one rewrite
            out = handled
        else:
            out = [Forward(c.to, frame, lasting=c.lasting) if type(c) is _Untouched else c for c in handled]
        if out and not (len(out) == 1 and type(out[0]) is Forward) and self.recorder.metrics is not None:
            self.recorder.rewrite_latency(self.protocol, time.perf_counter() - started)
        return self._with_wakeup(out)

    def _frame_failed(self, exc: Exception, frame: bytes, origin: str, dest: str, started: float,
                      single: bool) -> list[Command]:
        # (a message whose reminder reached the policy never gets here: `_dispatch` answers it)
        self._inbound = None
        self.recorder.log("pipeline_error", level="error", side=origin, error=type(exc).__name__,
                          why="the frame carries no reminder the proxy decoded: it goes on untouched")
        return [Forward(dest, frame)]

    def _dispatch(self, msg: Any, origin: str) -> Handled:
        if not isinstance(msg, dict):
            return None
        self._inbound, self._span, self._attributes = msg, None, None
        self._carrying = False
        calls = len(self.calls)
        try:
            if origin == PEER and "method" not in msg and (answer := self._own_answer(msg)) is not None:
                out = answer
            else:
                out = self.on_host(msg) if origin == HOST else self.on_peer(msg)
        except Exception as exc:
            return self._dispatch_failed(exc, msg, origin, calls)
        finally:
            self._inbound = None
        if self._ticket is not None and self._waits(self._dispatched, (msg, origin, calls), self._dispatch_failed):
            return out
        return out if out is None or not observes(self.stage) else self._dispatched(out, msg, origin, calls)

    def _dispatched(self, out: Handled, msg: dict[str, Any], origin: str, calls: int) -> Handled:
        self._inbound = None
        if out is not None and observes(self.stage):
            if len(self.calls) > calls:  # observe sends nothing of its own
                for own in list(self.calls)[calls:]:
                    del self.calls[own]
            return None  # the decisions were counted and logged; the wire is untouched
        return out

    def _dispatch_failed(self, exc: Exception, msg: dict[str, Any], origin: str, calls: int) -> Handled:
        if not self._carrying or observes(self.stage):
            raise exc  # no reminder decoded (or `observe`, which changes nothing): the frame goes on
        self._inbound = msg
        try:
            return self._internal_error(msg, origin, exc)
        finally:
            self._inbound = None

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

    def _own_answer(self, msg: dict[str, Any]) -> Handled:
        """The answer to one of the proxy's own requests goes to what asked, never on: one that
        comes after the flow stopped waiting for it (its request's exchange is over, its call timed
        out) is dropped and logged. No host has an id of the proxy's own, so on the host's side it
        could only be taken for the answer to something else."""
        msg_id = msg.get("id")
        if not isinstance(msg_id, str):
            return None
        handler = self.calls.pop(msg_id, None)
        if handler is None:
            if not msg_id.startswith(OWN_ID_PREFIX):
                return None
            self.recorder.info("late_answer", id=msg_id, why="the answer to a request of the proxy's own came "
                               "after it stopped waiting for it: dropped")
            return []
        answer = handler.run(msg, *handler.args)
        return answer or []

    def _batch(self, batch: list[Any], frame: bytes, origin: str, dest: str) -> list[Command]:
        """JSON-RPC batches (MCP 2025-03-26): rewrite members, keep the rest of the array as it was."""
        return self._batch_from([], batch, frame, origin, dest)

    def _batch_from(self, results: list[Handled], batch: list[Any], frame: bytes, origin: str,
                    dest: str) -> list[Command]:
        while len(results) < len(batch):
            result = self._dispatch(batch[len(results)], origin)
            if self._waits(self._batch_member, (results, batch, frame, origin, dest)):
                return result  # type: ignore[return-value]
            results.append(result)
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

    def _batch_member(self, value: Handled, results: list[Handled], batch: list[Any], frame: bytes, origin: str,
                      dest: str) -> list[Command]:
        return self._batch_from(results + [value], batch, frame, origin, dest)

    # -- timers --------------------------------------------------------------------------------
    def wake(self, now: float) -> list[Command]:
        """The transport's timer fired (it asked with `Wakeup`): coalesced reminders whose buckets
        have a token again go out, add-ons poll. Returns the next `Wakeup` when more remain."""
        if self._ticket is not None:
            return self._later(Later(self.wake, (now,)))
        self._asked = None
        out: list[Command] = []
        if len(self.held) and (self.held.wake_at is None or now >= self.held.wake_at):
            out = self._release_from(now, list(self.held), 0, set(), [])
            if self._waits(self._woken, (now,)):
                return out
        return self._woken(out, now)

    def _woken(self, value: Handled, now: float) -> list[Command]:
        out = list(value or [])
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

    def _then(self, done: Callable[[Any], Any]) -> Callable[[Any], list[Command]]:
        """What follows deferred work, in line with the frames."""
        return lambda result: self._after_deferred(done, result)

    def _after_deferred(self, done: Callable[[Any], Any], result: Any) -> list[Command]:
        if self._ticket is not None:
            return self._later(Later(self._after_deferred, (done, result)))
        out = done(result)
        if self._waits(self._deferred_done):
            return list(out)
        return self._deferred_done(out)

    def _deferred_done(self, value: Handled) -> list[Command]:
        return self._with_wakeup(list(value or []))

    def _release_from(self, now: float, items: list[Coalesced], i: int, admitted: set[int],
                      waits: list[int]) -> list[Command]:
        """Coalesced reminders whose buckets have a token again, newest per key, in order: each
        charged in turn (``items[i:]`` still to charge), then released."""
        while i < len(items):
            item = items[i]
            op = self.policy.charge_op(item.reminder, server=self.route, session=item.context[1], now=now)
            if op is not None:
                return self.perform(op, self.policy.budget_state, self._release_paid, now, items, i, admitted, waits)
            admitted.add(id(item))
            i += 1
        released = self.held.release(lambda item: id(item) in admitted)
        self.held.wake_at = now + min(waits) / 1000.0 if waits else None
        return self._release_next([], released, 0)

    def _release_paid(self, result: Any, now: float, items: list[Coalesced], i: int, admitted: set[int],
                      waits: list[int]) -> list[Command]:
        exceeded = self.policy.held_wait(result)
        if exceeded is None:
            admitted.add(id(items[i]))
        else:
            waits.append(exceeded.retry_after_ms)
        return self._release_from(now, items, i + 1, admitted, waits)

    def _release_next(self, value: Handled, released: list[Coalesced], j: int) -> list[Command]:
        out = list(value or [])
        while j < len(released):
            item = released[j]
            j += 1
            self._inbound, self._span, self._attributes = item.context[0], None, {"reminder.coalesced": True}
            self._start_ns = time.time_ns()
            self._direction = item.context[2]
            try:
                delivered = item.deliver.run(item.reminder, *item.deliver.args)
            finally:
                self._inbound = None
            if self._waits(self._release_next, (released, j)):
                return out + list(delivered)
            out += delivered or []
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
    def learned(self) -> Learned | None:
        """What this flow learned of the peer (its handshake, the A2A card), for flows of its route
        that will not see it; None before it learned anything."""
        dialect = self.peer.learned
        return None if dialect is None else Learned(dialect, self.peer_declared())

    def peer_declared(self) -> bool | None:
        """Whether the peer's handshake declared the reminder capability (protocols that have one)."""
        return None

    def http_headers(self, frame: bytes) -> dict[str, str]:
        """The headers a host ``frame`` carries when the transport POSTs it to an HTTP peer that the
        host does not speak HTTP to (`stdio --upstream`): what the protocol mirrors of a message."""
        return {}

    def subscription(self) -> Any:
        """The proxy's own key for the stream of the host's listen request (MCP 2026-07-28), kept for
        `Send.stream` (never the host's id: hosts that share a scope choose ids alike)."""
        return None

    def listen_cancel(self) -> bytes | None:
        """What tells the server the host's listen ended when its stream closed (MCP 2026-07-28:
        `notifications/cancelled` for the listen request); None without one."""
        return None

    def written(self, receipts: tuple[Receipt, ...] | list[Receipt]) -> list[Command]:
        """The `Send`s that carried ``receipts`` are on the host's connection: their owners go on
        (the outbox marks its rows delivered)."""
        if not receipts:
            return []
        if self._ticket is not None:
            return self._later(Later(self.written, (receipts,)))
        return self._with_wakeup(self._receipts_done(receipts))

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

    def rearm(self) -> list[Command]:
        """The timer its add-ons need now that another flow of its scope fed them (an outbox keeper's)."""
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
    def on_host(self, msg: dict[str, Any]) -> Handled:
        return None

    def on_peer(self, msg: dict[str, Any]) -> Handled:
        return None

    def forward(self, to: str, lasting: bool = False) -> Any:
        """The frame being handled, untouched (`_handle` makes it a `Forward` with its bytes);
        ``lasting``: a request whose answer is a long-lived stream (`Forward.lasting`)."""
        return _UNTOUCHED[to, lasting]

    def frame_bytes(self) -> bytes:
        """The bytes of the message being handled, for a flow that sends it on later untouched (a
        member of a batch has no bytes of its own: it is encoded afresh)."""
        return self._frame if self._frame is not None else dumps(self._inbound)

    def send(self, to: str, msg: dict[str, Any], *, answers: bool = False, receipts: tuple[Receipt, ...] = (),
             stream: Any = None) -> Send:
        method = msg.get("method")
        return Send(to, dumps(msg), id_key(msg.get("id")) if answers else None, method,
                    _name_of(method, msg.get("params")), receipts, stream)

    def reply(self, to: str, request: dict[str, Any], msg: dict[str, Any], retry_after_ms: int | None = None) -> Reply:
        if to == HOST:  # the proxy answered the host's request itself: nothing waits for the peer's
            self.unanswered.forget(request.get("id"))
        return Reply(to, dumps(msg), request.get("id"), retry_after_ms)

    def call(self, to: str, method: str, params: Any, on_answer: Step | Callable[[dict[str, Any]], Handled]) -> Call:
        """The proxy's own request; ``on_answer`` (a `Step`, or a bound method) gets its answer
        (``run(response, *args)``) and returns commands."""
        own = self.own_id()
        self.calls[own] = on_answer if type(on_answer) is Step else Step(on_answer)
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": own, "method": method}
        if params is not None:
            request["params"] = params
        return Call(to, dumps(request), own, method, _name_of(method, params))

    @staticmethod
    def own_id() -> str:
        """An id of the proxy's own, unique in the process (its requests, its keys for host streams)."""
        return f"{OWN_ID_PREFIX}{next(_own_ids)}"

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


def _placed(out: list[Any], frame: bytes | None) -> list[Command]:
    """What a flow gives before it waits: the frame being handled, where a handler said to pass it
    on untouched, is its bytes (a batch member has none: the batch's own step places it)."""
    if frame is None or (len(out) == 1 and type(out[0]) is Perform):  # the usual: the Perform alone
        return out
    return [Forward(c.to, frame, lasting=c.lasting) if type(c) is _Untouched else c for c in out]


class _Untouched(NamedTuple):
    """`Flow.forward(to)`: the frame being handled, before `_handle` puts its bytes in a `Forward`."""

    to: str
    lasting: bool = False


_UNTOUCHED = {(HOST, False): _Untouched(HOST), (PEER, False): _Untouched(PEER), (PEER, True): _Untouched(PEER, True)}


def _name_of(method: Any, params: Any) -> str | None:
    """The tool, prompt or resource a request names (what MCP 2026-07-28 mirrors in `Mcp-Name`)."""
    name = params.get("name", params.get("uri")) if isinstance(params, dict) and method else None
    return name if isinstance(name, str) else None
