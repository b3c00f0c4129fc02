"""A2A caller ↔ remote agent (spec §5), v1.0 JSON-RPC with v0.3 method names recognised.

One flow serves one route (all HTTP requests to it), because reminders queued for a task on one
request are attached to the next message for that task on another.
"""
from __future__ import annotations

import copy
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from bridge.dialects.a2a import (
    CODECS, INJECT_METHOD, REASONS, SEND_METHODS, A2ALegacy, A2AStandard, terminal_state,
)
from bridge.envelope import render
from bridge.jsonrpc import copied, error_response, loads
from bridge.model import Reminder, ReminderError, size_at_most
from bridge.pending import PendingQueue
from bridge.policy.budget import Coalescer
from bridge.pipeline.capabilities import CapabilityRule
from bridge.pipeline.commands import HOST, PEER, Command
from bridge.pipeline.flow import Flow, Handled, invalid_params
from bridge.pipeline.negotiation import enforce_error, keeps_legacy, refuses_legacy
from bridge.pipeline.waiting import Step
from bridge.rules import RouteSettings
from bridge.state.base import StateUnavailable
from bridge.state.queues import ReminderQueues
from bridge.state.scope import Scope

TASK_NOT_FOUND = -32001
#: A2A's `UnsupportedOperationError`: what a message to a task in a terminal state gets (§3.1.1)
UNSUPPORTED_OPERATION = -32004
#: The caller is told the agent's capability in the caller's dialect only, unless it reads it already.
CAPABILITIES = CapabilityRule(CODECS, borrow=True, exclusive=True, replaces=False)


@dataclass
class _AfterSend:
    """Reminders carried by a message that had no task yet: injected once the response names it."""

    reminders: list[Reminder]


def _task_queues() -> ReminderQueues:
    return ReminderQueues(limit=64, idle_s=3600.0, max_keys=10_000)


@dataclass(eq=False)
class TaskBook:
    """What an A2A route keeps per task, whichever request or connection touches the task next:
    reminders waiting for the next message to the task (`queued`: an inject toward a legacy or
    `none` agent, or a reminder released by `coalesce`; in shared state when there is one, so any
    replica attaches them), the reminders held over budget, and the proxy's own calls in flight.
    HTTP gives each request its own flow; they share the route's book."""

    protocol = "a2a"  # for the pending gauge
    queued: ReminderQueues = field(default_factory=_task_queues)
    held: Coalescer = field(default_factory=Coalescer)
    calls: dict[str, Step] = field(default_factory=dict)

    def pending_counts(self) -> dict[str, int]:
        return {"task": self.queued.held(), "coalesce": len(self.held)}


class A2AFlow(Flow):
    """One A2A exchange (caller = host side, remote agent = peer side): a connection, or one
    HTTP request.

    State table: the two `Side`s and the stage (the flow's own); ``queued``: per task, the
    reminders waiting for the next message to a legacy or `none` agent (the route's, when the
    transport gives each request its own flow); ``streams``: per stream, reminders waiting for the
    next event to a legacy caller (by arrival number).
    """

    protocol = "a2a"

    def __init__(self, *args: Any, public_url: str | None = None, tasks: TaskBook | None = None, **kwargs: Any):
        """``tasks``: the route's book, when tasks outlive this flow (see `TaskBook`)."""
        super().__init__(*args, **kwargs)
        self.public_url = public_url
        self.shared_tasks = tasks is not None
        self.book = tasks if tasks is not None else TaskBook()
        self.queued = self.book.queued
        self.queued.limit = self.settings.trust.max_pending_per_session
        self.held = self.book.held
        self.calls = self.book.calls
        self.streams: dict[Any, PendingQueue[Reminder]] = {}
        self.host_markers = (b"emind", b"Message", b"message")
        self.peer_markers = (b"emind",)

    def passes(self, data: bytes, origin: str) -> bool:
        """While a stream holds reminders for a legacy caller, its next event must be looked at."""
        if origin == PEER and self.streams:
            return False
        return super().passes(data, origin)

    def task_scope(self, task_id: Any) -> Scope:
        """A task's scope: the route's, since every request of the route reaches the task by its id."""
        return Scope.task(self.route, task_id)

    # -- caller → agent ------------------------------------------------------------------------
    def on_host(self, msg: dict[str, Any]) -> Handled:
        method = msg.get("method")
        params = msg.get("params")
        if method == INJECT_METHOD:
            return self._inject(msg, params)
        if method in SEND_METHODS and isinstance(params, dict):
            return self._send(msg, params)
        return None

    def _inject(self, msg: dict[str, Any], params: Any) -> Handled:
        peer = self.peer.dialect
        try:
            task_id, reminder = A2AStandard.decode_inject(params)
        except ReminderError as exc:
            self.record("invalid", INJECT_METHOD, source="standard", why=exc.loggable)
            return [self.reply(HOST, msg, invalid_params(msg.get("id"), exc))]
        counted = None if peer == "standard" else (self.queued.count(self.task_scope(task_id)), self.queued.state)
        return self.police(msg, reminder, INJECT_METHOD, origin=HOST, session=self.task_scope(task_id),
                           source="standard", target=peer, pending=counted,  # counted once the content passed
                           then=Step(self._inject_judged, (msg, task_id, reminder, peer)))

    def _inject_judged(self, outcome: tuple[Reminder | None, list[Command]], msg: dict[str, Any], task_id: str,
                       reminder: Reminder, peer: str) -> Handled:
        kept, refusal = outcome
        if kept is None:
            return refusal
        if peer == "standard":
            self.record("passed", INJECT_METHOD, kept, source="standard", target=peer)
            if kept is reminder:
                return None
            out = copy.deepcopy(msg)  # cleaned by the trust limits: send what was admitted
            out["params"].update(A2AStandard.encode_inject(task_id, kept))
            return [self.send(PEER, out)]
        return [self.call(PEER, "GetTask", {"id": task_id}, Step(self._task_checked, (msg, task_id, kept)))]

    def _send(self, msg: dict[str, Any], params: dict[str, Any]) -> Handled:
        method = msg["method"]
        peer = self.peer.dialect
        out = copy.deepcopy(msg)
        try:
            carried = A2ALegacy.take_from_params(out["params"])
        except ReminderError as exc:
            self.record("invalid", method, source="legacy", why=exc.loggable)
            return [self.reply(HOST, msg, invalid_params(msg.get("id"), exc))]
        if carried and refuses_legacy(self.stage):
            self.record("refused", method, source="legacy", why="legacy reminder metadata refused at stage enforce")
            return [self.reply(HOST, msg, enforce_error(msg.get("id"), "reminder metadata (metadata.harn)",
                                                        INJECT_METHOD))]
        message = out["params"].get("message")
        task_id = message.get("taskId") if isinstance(message, dict) else None
        sending = _Sending(msg, out, carried, task_id, method, peer)
        if task_id:
            return self.perform(self.queued.take(self.task_scope(task_id)), self.queued.state, self._send_taken, sending)
        return self._send_taken([], sending)

    def _send_taken(self, taken: Any, sending: _Sending) -> Handled:
        # closed, and Redis away (`StateUnavailable`): the message goes on; its queue waits there
        queued = [] if isinstance(taken, StateUnavailable) else self.queued.taken(taken)
        if not sending.carried and not queued:
            return None
        deliver = Step(self._queue_for_task, (sending.task_id, sending.method)) if sending.task_id else None
        return self._admit(sending.msg, sending.carried, sending.method, HOST, sending.task_id, "legacy",
                           sending.peer, deliver, Step(self._send_admitted, (sending, queued)))

    def _send_admitted(self, admitted: list[Reminder], sending: _Sending, queued: list[Reminder]) -> Handled:
        msg, out, carried, task_id, method, peer = sending
        unchanged = len(admitted) == len(carried) and all(map(operator.is_, admitted, carried))
        carried = admitted
        if peer == "legacy" and not queued:
            for r in carried:
                self.record("passed", method, r, source="legacy", target=peer)
            if unchanged:
                return None
            if carried:
                A2ALegacy.put_on_params(out["params"], carried)
            return [self.send(PEER, out)]
        sends: list[Command] = []
        if peer == "standard":
            if task_id:  # reminders released for the task since its last message go first
                sends += [self._inject_call(task_id, r) for r in queued + carried]
            elif carried:
                self.expect_response(msg, _AfterSend(carried))
            if carried and keeps_legacy(self.stage):
                A2ALegacy.put_on_params(out["params"], carried)  # dual: the message keeps its decoration too
        else:
            self._attach(out["params"], queued + carried, peer, method)
        for r in carried:
            self.record("rewritten", method, r, source="legacy", target=peer)
        return sends + [self.send(PEER, out)]

    def _admit(self, msg: dict[str, Any], reminders: list[Reminder], method: str, origin: str, session: Any,
               source: str, target: str, deliver: Step | None, then: Step) -> Handled:
        """Police reminders riding on another message, in turn: a refusal drops the reminder, never the
        message (``deliver``: where one held by `coalesce` goes once its bucket has a token again);
        ``then.run(admitted, *then.args)`` follows."""
        return self._admit_at(_Admitting(msg, reminders, method, origin, session, source, target, deliver, then), 0, [])

    def _admit_at(self, admitting: _Admitting, i: int, admitted: list[Reminder]) -> Handled:
        if i == len(admitting.reminders):
            return admitting.then.run(admitted, *admitting.then.args)
        session = admitting.session
        return self.police(admitting.msg, admitting.reminders[i], admitting.method, origin=admitting.origin,
                           source=admitting.source, session=self.task_scope(session) if session else None,
                           target=admitting.target, request=False, deliver=admitting.deliver,
                           then=Step(self._admit_judged, (admitting, i, admitted)))

    def _admit_judged(self, outcome: tuple[Reminder | None, list[Command]], admitting: _Admitting, i: int,
                      admitted: list[Reminder]) -> Handled:
        kept = outcome[0]
        return self._admit_at(admitting, i + 1, admitted if kept is None else [*admitted, kept])

    def _queue_for_task(self, reminder: Reminder, task_id: str, method: str) -> list[Command]:
        """A reminder for the agent released by `coalesce`: it rides on the next message to its task
        (an inject first for a standard agent, metadata or a text part for the others)."""
        return self.perform(self.queued.push(self.task_scope(task_id), reminder), self.queued.state,
                            self._queued_for_task, reminder, task_id, method)

    def _queued_for_task(self, result: Any, reminder: Reminder, task_id: str, method: str) -> list[Command]:
        if isinstance(result, StateUnavailable):
            self.record("dropped", method, reminder, source="legacy", target=self.peer.dialect, session=task_id,
                        why=f"{result.message}: the released reminder could not be queued for its task")
            return []
        self.record("queued", method, reminder, source="legacy", target=self.peer.dialect, session=task_id)
        return []

    def _attach(self, params: dict[str, Any], reminders: list[Reminder], peer: str, method: str) -> None:
        """Queued reminders ride on the next message for their task: as metadata for a legacy peer
        (every mode: the peer decides), as a prepended text part for a `none` one (never audit_only)."""
        if not reminders:
            return
        if peer == "legacy":
            A2ALegacy.put_on_params(params, reminders)
            for r in reminders:
                self.record("attached", method, r, source="standard", target=peer)
            return
        message = params.get("message")
        shown = [r for r in reminders if r.mode != "audit_only"]
        for r in reminders:
            if r.mode == "audit_only":
                self.record("dropped", method, r, target="none", why="audit_only reminders are never rendered")
        if not shown:
            return
        if self.settings.fallback.a2a_peer_none == "prepend" and isinstance(message, dict):
            message.setdefault("parts", []).insert(0, {"text": render(shown, self.settings.envelope)})
            for r in shown:
                self.record("rendered", method, r, target="none")
        else:
            for r in shown:
                self.record("dropped", method, r, target="none", why="peer has no reminder support")

    def _inject_call(self, task_id: str, reminder: Reminder) -> Command:
        """The proxy's own `InjectTaskReminder`; its answer is the proxy's (the caller never asked)."""
        return self.call(PEER, INJECT_METHOD, A2AStandard.encode_inject(task_id, reminder), Step(_no_answer_needed))

    # -- agent → caller ------------------------------------------------------------------------
    def on_peer(self, msg: dict[str, Any]) -> Handled:
        after = self.response_to(msg)
        sends: list[Command] = []
        if isinstance(after, _AfterSend):
            task_id = _task_id_of(msg.get("result"))
            if task_id:
                sends = [self._inject_call(task_id, r) for r in after.reminders]
        frames = self._event(msg)
        if self._waits(self._after_event, (sends,)):
            return frames
        return self._after_event(frames, sends)

    def _after_event(self, frames: Handled, sends: list[Command]) -> Handled:
        if frames is None:
            return sends + [self.forward(HOST)] if sends else None
        return sends + frames

    def _task_checked(self, answer: dict[str, Any], request: dict[str, Any], task_id: str,
                            reminder: Reminder) -> list[Command]:
        """`GetTask` answered: an unknown task, or one in a terminal state (it takes no more messages,
        so the reminder could never ride on one), refuses the inject; an open one queues it."""
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            code = error.get("code")
            text = f"Task not found: {task_id}" if code == TASK_NOT_FOUND else "task check failed"
            return [self.reply(HOST, request, error_response(request.get("id"), code if isinstance(code, int)
                                                             else TASK_NOT_FOUND, text, error.get("data")))]
        state = terminal_state(answer.get("result"))
        if state is not None:
            self.record("refused", INJECT_METHOD, reminder, source="standard", target=self.peer.dialect,
                        session=task_id, why=f"the task is in terminal state {state}")
            return [self.reply(HOST, request, _terminal_task_error(request.get("id"), task_id, state))]
        return self.perform(self.queued.push(self.task_scope(task_id), reminder), self.queued.state,
                            self._task_queued, request, task_id, reminder)

    def _task_queued(self, result: Any, request: dict[str, Any], task_id: str, reminder: Reminder) -> list[Command]:
        if isinstance(result, StateUnavailable):
            return self.state_refused(request, reminder, INJECT_METHOD, result)
        replaced, _ = result
        self.record("queued", INJECT_METHOD, reminder, source="standard", target=self.peer.dialect, session=task_id)
        result = A2AStandard.inject_result(reminder.id, len(replaced), self.wall())
        return [self.reply(HOST, request, {"jsonrpc": "2.0", "id": request.get("id"), "result": result})]

    def _event(self, msg: dict[str, Any]) -> Handled:
        """Stream frames and results: legacy decorations ↔ `reminderUpdate` frames."""
        result = msg.get("result")
        if not isinstance(result, dict):
            return None
        caller = self.host.dialect
        if "reminderUpdate" in result:
            return self._update_frame(msg, caller)
        # the copy to rewrite: decoded afresh from the frame when it is this message's own (a third
        # of what copying the decoded tree costs), else copied
        out = loads(self._frame) if self._frame is not None and msg is self._inbound else copied(msg)
        try:
            task_id, context_id, found = A2ALegacy.take_from_event(out["result"])
        except ReminderError as exc:  # the event goes on as it came; its reminders are reported
            self.record("invalid", "stream", source="legacy", why=exc.loggable)
            return None
        stream = self.streams.pop(msg.get("id"), None) if caller == "legacy" else None
        held = stream.take() if stream is not None else []
        if not found and not held:
            return None
        return self._admit(msg, found, "stream", PEER, task_id, "legacy", caller, None,
                           Step(self._event_admitted, (msg, out, found, held, caller, task_id, context_id)))

    def _event_admitted(self, admitted: list[Reminder], msg: dict[str, Any], out: dict[str, Any],
                        found: list[Reminder], held: list[Reminder], caller: str, task_id: Any,
                        context_id: Any) -> Handled:
        unchanged = len(admitted) == len(found) and all(map(operator.is_, admitted, found))  # C: no generator
        found = admitted
        if caller == "legacy":
            if not held and unchanged:
                return None
            if held or found:
                A2ALegacy.put_on_event(out["result"], held + found)
            return [self.send(HOST, out, answers=True)]
        frames: list[Command] = []
        for r in found:
            if caller == "standard":
                frames.append(self.send(HOST, {"jsonrpc": "2.0", "id": msg.get("id"),
                                               "result": A2AStandard.encode_update(task_id, context_id, r)}))
                self.record("rewritten", "stream", r, source="legacy", target=caller, session=task_id)
            else:
                self.record("dropped", "stream", r, source="legacy", target="none", session=task_id,
                            why="caller has no reminder support")
        if caller == "standard" and keeps_legacy(self.stage) and unchanged:
            return frames + [self.forward(HOST)]  # dual: the event keeps its decoration too
        return frames + [self.send(HOST, out, answers=True)]

    def _update_frame(self, msg: dict[str, Any], caller: str) -> Handled:
        try:
            update, decoded = A2AStandard.decode_update(msg["result"])
        except ReminderError as exc:
            self.record("invalid", "stream", source="standard", why=exc.loggable)
            return []
        task_id = update.get("taskId")
        return self.police(msg, decoded, "stream", origin=PEER, session=self.task_scope(task_id) if task_id else None,
                           source="standard", target=caller, request=False,
                           then=Step(self._update_judged, (msg, update, decoded, caller)))

    def _update_judged(self, outcome: tuple[Reminder | None, list[Command]], msg: dict[str, Any],
                       update: dict[str, Any], decoded: Reminder, caller: str) -> Handled:
        reminder = outcome[0]
        if reminder is None:
            return []
        if caller == "standard":
            self.record("passed", "stream", reminder, source="standard", target=caller)
            if reminder is decoded:
                return None
            out = copy.deepcopy(msg)
            out["result"] = A2AStandard.encode_update(update.get("taskId"), update.get("contextId"), reminder,
                                                      _reason_of(update))
            return [self.send(HOST, out, answers=True)]
        if caller == "legacy":
            self._hold_for_event(msg.get("id"), reminder)
        else:
            self.record("dropped", "stream", reminder, source="standard", target="none",
                        why="caller has no reminder support")
        return []

    def _hold_for_event(self, stream_id: Any, reminder: Reminder) -> None:
        """Queued for the stream's next event; past the session's count (or the queue's bytes) the
        oldest are dropped."""
        queue = self.streams.get(stream_id)
        if queue is None:
            queue = self.streams[stream_id] = PendingQueue()
        limit = queue.limit = self.settings.trust.max_pending_per_session
        put = queue.append(reminder, size=size_at_most(reminder))
        self.record("queued", "stream", reminder, source="standard", target="legacy")
        for gone in put.evicted:
            self.record("dropped", "stream", gone, source="standard", target="legacy",
                        why=f"pushed out of the queue for the stream's next event (max_pending_per_session = "
                            f"{limit}, at most {queue.max_bytes} bytes)")

    def pending_counts(self) -> dict[str, int]:
        counts = {"stream": sum(len(s) for s in self.streams.values())}
        if not self.shared_tasks:  # a shared book is counted once, by its owner
            counts.update(self.book.pending_counts())
        return counts

    def close(self, why: str) -> None:
        """Reminders waiting for a stream that ended are dropped; a shared book stays (its tasks go on)."""
        for stream in self.streams.values():
            for reminder in stream:
                self.record("dropped", "stream", reminder, target=self.host.dialect, why=why)
        self.streams.clear()
        if not self.shared_tasks:
            super().close(why)

    def on_reconfigure(self, old: RouteSettings) -> None:
        self.queued.limit = self.settings.trust.max_pending_per_session

    # -- agent card ----------------------------------------------------------------------------
    def rewrite_card(self, card: dict[str, Any], url_for: Callable[[str], str] | None = None) -> dict[str, Any] | None:
        """The card the caller should see: reminder capability in its dialect, and every interface
        URL at the proxy (``url_for`` maps an upstream URL to the proxy's), or callers bypass it."""
        if not isinstance(card, dict):
            return None
        out = copy.deepcopy(card)
        changed = False
        caps = out.get("capabilities")
        if isinstance(caps, dict):
            declared = CAPABILITIES.read(caps)
            self.recorder.handshake("peer", declared.spoken, protocol=self.protocol,
                                    client=out.get("name") if isinstance(out.get("name"), str) else None)
            self.peer.learn(declared.spoken)
            caller = self.host.dialect
            cap = CAPABILITIES.told(declared, peer=self.peer.dialect, host=caller)
            if cap is not None:
                CAPABILITIES.write(caps, caller, cap)
                changed = True
        if url_for is None and self.public_url:
            url_for = lambda _url: self.public_url  # noqa: E731 - one fixed address
        if url_for is not None:
            for iface in out.get("supportedInterfaces") or []:
                if isinstance(iface, dict) and isinstance(iface.get("url"), str):
                    url = url_for(iface["url"])
                    if url != iface["url"]:
                        iface["url"] = url
                        changed = True
        return out if changed else None


class _Sending(NamedTuple):
    """A `SendMessage` on its way: what the steps after its task's queue was taken need."""

    msg: dict[str, Any]
    out: dict[str, Any]
    carried: list[Reminder]
    task_id: Any
    method: str
    peer: str


class _Admitting(NamedTuple):
    """Reminders riding on one message, policed in turn (`A2AFlow._admit`)."""

    msg: dict[str, Any]
    reminders: list[Reminder]
    method: str
    origin: str
    session: Any
    source: str
    target: str
    deliver: Step | None
    then: Step


def _no_answer_needed(answer: dict[str, Any]) -> list[Command]:
    """The answer to the proxy's own inject: the proxy's (the caller never asked)."""
    return []


def _terminal_task_error(msg_id: Any, task_id: str, state: str) -> dict[str, Any]:
    """A2A's answer to a message for a finished task (`UnsupportedOperationError`, worded and detailed
    as the a2a-sdk words it), saying why the reminder was not taken."""
    return error_response(msg_id, UNSUPPORTED_OPERATION,
                          f"Task {task_id} is in terminal state: {state}; it takes no more messages, "
                          "so a reminder for it could never be delivered",
                          [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "UNSUPPORTED_OPERATION",
                            "domain": "a2a-protocol.org", "metadata": {"taskId": task_id, "state": state}}])


def _task_id_of(result: Any) -> str | None:
    if not isinstance(result, dict):
        return None
    task = result.get("task")
    if isinstance(task, dict):
        return task.get("id")
    message = result.get("message")
    return message.get("taskId") if isinstance(message, dict) else None


def _reason_of(update: dict[str, Any]) -> str | None:
    reason = update.get("reason")
    return next((k for k, v in REASONS.items() if v == reason), None)
