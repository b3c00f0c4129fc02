"""ACP client ↔ agent (spec §4): injects toward the agent, lifecycle updates toward the client."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bridge.dialects.acp import (
    CODECS, DEDUPED, EMITTED, EXPIRED, AcpLegacy, AcpStandard, session_of, update_kind,
)
from bridge.dialects.paths import get_path
from bridge.envelope import render
from bridge.fields import ROLE_HINT_VALUES, ReminderError
from bridge.lifecycle import Deduped, Expired, SessionReminders
from bridge.jsonrpc import error_response
from bridge.pending import PendingQueue
from bridge.pipeline.capabilities import CapabilityRule
from bridge.pipeline.commands import HOST, PEER, Command, Send
from bridge.pipeline.flow import Flow, Handled, invalid_params
from bridge.pipeline.negotiation import enforce_error, keeps_legacy, observes, refuses_legacy
from bridge.pipeline.waiting import Step
from bridge.policy import TRUST_CODES
from bridge.state.scope import ACP_SESSION, Scope

if TYPE_CHECKING:
    from bridge.model import Reminder

INJECT_METHODS = {AcpStandard.inject_method: "standard", AcpLegacy.inject_method: "legacy"}
#: What the proxy can honour itself for an agent with no reminder support.
HELD_CAPABILITY = {"inject": True, "emit": True, "propagate": ["session", "none"], "roleHints": list(ROLE_HINT_VALUES)}
#: The most bytes of injects one connection holds while they wait for the agent's `initialize`
#: answer (they are also at most `trust.max_pending_per_session` in number).
WAITING_BYTES = 1024 * 1024
#: The client is told what the agent's own dialect declared (or what the proxy holds for it), added
#: beside the agent's own declarations.
CAPABILITIES = CapabilityRule(CODECS, borrow=False, exclusive=False, replaces=False)


@dataclass
class _Inject:
    source: str
    reminder: Reminder
    session_id: Any


@dataclass
class _Early:
    """An inject that arrived before the agent's dialect was known: handled once it is."""

    msg: dict[str, Any]
    source: str
    reminder: Reminder
    frame: bytes


class AcpFlow(Flow):
    """One ACP connection (client = host side, agent = peer side).

    State table: the two `Side`s and the stage (the flow's own); ``sessions``: per ACP
    `sessionId`, the reminders the proxy holds for an agent with no support (rendered into
    prompts) or shadows for a legacy one (to tell a standard client about dedupe and expiry);
    ``early``: the connection's injects that arrived while the agent's `initialize` answer was
    awaited (its dialect unknown), bounded in number and bytes, handled in order once it comes.
    """

    protocol = "acp"
    assumed = ("none", "standard")  # a client that declared nothing gets no reminder updates

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.sessions: dict[Any, SessionReminders] = {}
        self.early: PendingQueue[_Early] = PendingQueue(max_bytes=WAITING_BYTES)  # by arrival number
        self._arrivals = 0
        self.initializing = False  # the client's `initialize` went to the agent, unanswered yet
        self.host_markers = (b"emind", b"initialize")
        self.peer_markers = (b"emind",)

    def session_scope(self, session_id: Any) -> Scope:
        """An ACP session's scope: its `sessionId` inside this connection, so the same id sent on two
        connections never reaches the same budget."""
        return self.scope.within(ACP_SESSION, session_id)

    # -- client → agent ------------------------------------------------------------------------
    def on_host(self, msg: dict[str, Any]) -> Handled:
        method = msg.get("method")
        params = msg.get("params")
        if method == "initialize":
            if isinstance(params, dict):
                caps = params.get("clientCapabilities")
                declared = "standard" if AcpStandard.client_declares(caps) else "legacy" \
                    if AcpLegacy.client_declares(caps) else None
                info = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else {}
                name = info.get("name")
                self.recorder.handshake("host", declared or "none", protocol=self.protocol,
                                        client=name if isinstance(name, str) else None,
                                        version=info.get("version"), capabilities=caps, scope=self.scope)
                if declared is not None:
                    self.host.learn(declared)
            self.expect_response(msg, "initialize")
            self.initializing = self.initializing or "id" in msg
            return None
        if method in INJECT_METHODS:
            return self._inject(msg, INJECT_METHODS[method])
        if method == "session/prompt" and isinstance(params, dict):
            return self._prompt(msg, params)
        return None

    def _inject(self, msg: dict[str, Any], source: str) -> Handled:
        method = msg["method"]
        msg_id = msg.get("id")
        is_request = "id" in msg
        if not self.host.known:
            self.host.learn(source)  # spec §4: else the inject method the client uses
        if refuses_legacy(self.stage) and source == "legacy":
            self.record("refused", method, source=source, why="legacy inject refused at stage enforce")
            if not is_request:
                return []
            return [self.reply(HOST, msg, enforce_error(msg_id, method, AcpStandard.inject_method))]
        params = msg.get("params")
        codec = CODECS[source]
        try:
            decoded = codec.decode_inject(params)
        except ReminderError as exc:
            self.record("invalid", method, source=source, why=exc.loggable)
            return [self.reply(HOST, msg, invalid_params(msg_id, exc))] if is_request else []
        if self.initializing and not self.peer.known and not observes(self.stage):
            return self._wait_for_agent(msg, source, decoded)  # spec §4: its dialect decides the translation
        return self._admit_inject(msg, source, decoded)

    def _admit_inject(self, msg: dict[str, Any], source: str, decoded: Reminder) -> Handled:
        """An inject whose target dialect is known: the policy, then toward the agent (or held)."""
        method = msg["method"]
        session_id = session_of(msg.get("params"))
        target = self.peer.dialect
        held = target == "none" and self.settings.fallback.acp_agent_none == "hold"
        return self.police(msg, decoded, method, origin=HOST, session=self.session_scope(session_id), source=source,
                           target=target, pending=self._pending(session_id, decoded) if held else None,
                           then=Step(self._inject_judged, (msg, source, decoded, session_id)),
                           deliver=Step(self._inject_released, (msg, source, decoded, session_id)))

    def _inject_judged(self, outcome: tuple[Reminder | None, list[Command]], msg: dict[str, Any], source: str,
                       decoded: Reminder, session_id: Any) -> Handled:
        reminder, refusal = outcome
        if reminder is None:
            return refusal
        return self._deliver_inject(msg, source, reminder, session_id, changed=reminder is not decoded)

    def _inject_released(self, reminder: Reminder, msg: dict[str, Any], source: str, decoded: Reminder,
                         session_id: Any) -> Handled:
        """An inject `coalesce` held, now that its bucket has a token again."""
        return self._deliver_inject(msg, source, reminder, session_id, changed=reminder is not decoded, released=True)

    def _deliver_inject(self, msg: dict[str, Any], source: str, reminder: Reminder, session_id: Any, *,
                        changed: bool, released: bool = False) -> Handled:
        """An admitted inject, toward the agent in its dialect (``released``: a coalesced one, later)."""
        method = msg["method"]
        msg_id = msg.get("id")
        is_request = "id" in msg
        target = self.peer.dialect
        if target == "none":
            return self._hold(msg, CODECS[source], reminder, session_id)
        if target == source and not changed:
            self.record("passed", method, reminder, source=source, target=target)
            self._shadow(session_id, reminder)
            return [self.send(PEER, msg)] if released else None
        codec = CODECS[target]
        out = {"jsonrpc": "2.0", "id": msg_id, "method": codec.inject_method,
               "params": codec.encode_inject(session_id, reminder)} if is_request else \
            {"jsonrpc": "2.0", "method": codec.inject_method, "params": codec.encode_inject(session_id, reminder)}
        if is_request:
            if target == source:
                self._shadow(session_id, reminder)
            else:
                self.expect_response(msg, _Inject(source, reminder, session_id))
        else:
            self._shadow(session_id, reminder)
        self.record("rewritten", method, reminder, source=source, target=target)
        return [self.send(PEER, self.stamp(out))]

    def _wait_for_agent(self, msg: dict[str, Any], source: str, reminder: Reminder) -> Handled:
        """Keep an inject until the agent's `initialize` answer tells its dialect; one that would pass
        the bound (in number or in bytes) is refused now, and the connection goes on."""
        frame = self.frame_bytes()
        limit = self.early.limit = self.settings.trust.max_pending_per_session
        self._arrivals += 1
        full = self.early.room(self._arrivals, len(frame))
        if full == "count":
            refusal = ("max_pending_per_session", limit, f"{len(self.early)} injects already wait for it "
                                                          f"(max_pending_per_session = {limit})")
        elif full == "bytes":
            size = self.early.bytes + len(frame)
            refusal = ("waiting_bytes", WAITING_BYTES,
                       f"the injects waiting for it would hold {size} bytes (at most {WAITING_BYTES})")
        else:
            self.early.put(self._arrivals, _Early(msg, source, reminder, frame), size=len(frame))
            self.record("queued", msg["method"], reminder, source=source, session=session_of(msg.get("params")),
                        why="waiting for the agent's initialize answer (its dialect decides the translation)")
            return []
        name, value, detail = refusal
        why = f"reminder refused: the agent has not answered initialize yet and {detail}"
        self.recorder.trust_refused(self.protocol, name)
        self.record("refused" if "id" in msg else "dropped", msg["method"], reminder, source=source, why=why,
                    session=session_of(msg.get("params")))
        if "id" not in msg:
            return []
        return [self.reply(HOST, msg, error_response(msg["id"], TRUST_CODES["max_pending_per_session"], why,
                                                     {"limit": name, "value": value,
                                                      "reason": "agent_not_initialized"}))]

    def _after_initialize(self, out: list[Command]) -> list[Command]:
        """The agent answered `initialize` (``out``: what its answer gives): the injects that waited
        for it, in arrival order, each handled as any other (one that needs no rewrite leaves as it came)."""
        early = self.early.take()
        return self._early_from(out, early, 0, self._inbound, self._direction)

    def _early_from(self, out: list[Command], early: list[_Early], i: int, answer: Any, direction: Any) -> list[Command]:
        try:
            while i < len(early):
                waited = early[i]
                i += 1
                self._inbound, self._span, self._attributes = waited.msg, None, None
                self._direction = "toward_peer"
                handled = self._admit_inject(waited.msg, waited.source, waited.reminder)
                if self._waits(self._early_handled, (early, i, answer, direction)):
                    return out + list(handled or [])
                out = out + ([Send(PEER, waited.frame)] if handled is None else handled)
        finally:
            self._inbound, self._direction = answer, direction
        return out

    def _early_handled(self, handled: Handled, early: list[_Early], i: int, answer: Any, direction: Any) -> list[Command]:
        return self._early_from([Send(PEER, early[i - 1].frame)] if handled is None else list(handled), early, i,
                                answer, direction)

    def _pending(self, session_id: Any, reminder: Reminder) -> int:
        """What the session holds that ``reminder`` would not replace (same dedupe key)."""
        session = self.sessions.get(_session_key(session_id))
        if session is None:
            return 0
        key = reminder.dedupe_key
        return sum(1 for kept in session.pending if key is None or kept.packed.dedupe_key != key)

    def pending_counts(self) -> dict[str, int]:
        held = sum(len(s) for s in self.sessions.values()) if self.peer.dialect == "none" else 0
        return {"coalesce": len(self.held), "hold": held, "initialize": len(self.early)}

    def close(self, why: str) -> None:
        """Injects still waiting for the agent's `initialize` answer are dropped and counted."""
        for waited in self.early:
            self._inbound, self._span, self._attributes = waited.msg, None, None
            try:
                self.record("dropped", waited.msg["method"], waited.reminder, source=waited.source, why=why)
            finally:
                self._inbound = None
        self.early.take()
        super().close(why)

    def _hold(self, msg: dict[str, Any], codec: Any, reminder: Reminder, session_id: Any) -> Handled:
        """Agent `none`: the proxy keeps the reminder and answers the inject itself."""
        method = msg["method"]
        if observes(self.stage):  # what `hold` would do, without holding: the inject goes on untouched
            self.record("queued", method, reminder, source=codec.dialect, target="none", session=session_id)
            return []
        if self.settings.fallback.acp_agent_none != "hold":
            self.record("dropped", method, reminder, target="none", why="agent has no reminder support",
                        session=session_id)
            if "id" not in msg:
                return []
            return [self.reply(HOST, msg, error_response(msg["id"], -32601, "Method not found: the agent does not "
                                                         "support reminders and this route does not hold them",
                                                         {"method": method}))]
        deduped, pushed_out = self._session(session_id).add(reminder)
        self.record("queued", method, reminder, source=codec.dialect, target="none", session=session_id)
        out = self._lifecycle_updates(session_id, deduped, pushed_out)  # before the answer: the client's view is whole
        if "id" in msg:
            result = codec.inject_result(reminder.id, len(deduped.dropped_ids) if deduped else 0)
            out.append(self.reply(HOST, msg, {"jsonrpc": "2.0", "id": msg["id"], "result": result}))
        return out

    def _prompt(self, msg: dict[str, Any], params: dict[str, Any]) -> Handled:
        session = self.sessions.get(_session_key(session_of(params)))
        if session is None or not len(session):
            return None
        self.expect_response(msg, ("turn", session_of(params)))
        if self.peer.dialect != "none":
            return None  # a legacy agent renders by itself; the proxy only counts the turn
        shown = session.to_render()
        if not shown or not isinstance(params.get("prompt"), list):
            return None
        out = copy.deepcopy(msg)
        out["params"]["prompt"].insert(0, {"type": "text", "text": render(shown, self.settings.envelope)})
        sends: list[Command] = []
        for reminder in shown:
            self.record("rendered", "session/prompt", reminder, target="none", session=session_of(params))
            emitted = reminder.model_copy(update={"fired_at_turn": session.turn})
            emitted.model_fields_set.add("fired_at_turn")
            sends += self._to_client(session_of(params), emitted, "proxy")
        return [self.send(PEER, out)] + sends

    # -- agent → client ------------------------------------------------------------------------
    def on_peer(self, msg: dict[str, Any]) -> Handled:
        waited = self.response_to(msg)
        if waited == "initialize" or (waited is None and isinstance(get_path(msg, "result", "agentCapabilities"), dict)):
            out = self._initialize_result(msg)
            if waited == "initialize":
                self.initializing = False
                if self.early:  # after the answer: the client learns the agent before its injects' answers
                    out = self._after_initialize(out if out is not None else [self.forward(HOST)])
            return out
        if isinstance(waited, _Inject):
            return self._inject_result(msg, waited)
        if isinstance(waited, tuple) and waited[0] == "turn":
            return self._turn_done(msg, waited[1])
        kind = update_kind(msg)
        if kind == EMITTED:
            return self._emitted(msg)
        if kind in (DEDUPED, EXPIRED) and self.host.dialect != "standard":
            self.record("dropped", "session/update", why=f"{kind} has no form for a {self.host.dialect} client")
            return []
        return None

    def _initialize_result(self, msg: dict[str, Any]) -> Handled:
        caps = get_path(msg, "result", "agentCapabilities")
        if not isinstance(caps, dict):
            return None
        declared = CAPABILITIES.read(caps)
        info = get_path(msg, "result", "agentInfo")
        self.recorder.handshake("peer", declared.spoken, protocol=self.protocol,
                                client=info.get("name") if isinstance(info, dict) else None)
        self.peer.learn(declared.spoken)
        client = self.host.dialect
        agent = self.peer.dialect
        held = agent == "none" and self.settings.fallback.acp_agent_none == "hold"
        cap = CAPABILITIES.told(declared, peer=agent, host=client, held=dict(HELD_CAPABILITY) if held else None)
        if cap is None:
            return None
        out = copy.deepcopy(msg)
        CAPABILITIES.write(out["result"]["agentCapabilities"], client, cap)
        self.record("rewritten", "initialize", source=agent, target=client)
        return [self.send(HOST, out, answers=True)]

    def _inject_result(self, msg: dict[str, Any], sent: _Inject) -> Handled:
        client = CODECS[sent.source]
        if "error" in msg:
            error = msg["error"]
            if isinstance(error, dict) and (error.get("data") is None or isinstance(error.get("data"), dict)):
                out = copy.deepcopy(msg)
                data = out["error"].get("data") or {}
                data.setdefault("reason", _reason(error))
                out["error"]["data"] = data
                return [self.send(HOST, out, answers=True)]
            return None
        result = msg.get("result")
        reminder_id = result.get("reminderId", sent.reminder.id) if isinstance(result, dict) else sent.reminder.id
        reminder = sent.reminder
        if reminder_id != reminder.id or type(reminder_id) is not str or not reminder.is_set("id"):
            reminder = reminder.model_copy(update={"id": reminder_id})  # (the same id, set: the same reminder)
        deduped, pushed_out = self._shadow(sent.session_id, reminder)
        count = len(deduped.dropped_ids) if deduped else None
        if isinstance(result, dict) and isinstance(result.get("dedupedCount"), int):
            count = result["dedupedCount"]
        out = dict(msg)  # only `result` is replaced: the rest is the answer's own, sent on as it is
        out["result"] = {**(result if isinstance(result, dict) else {}), **client.inject_result(reminder_id, count)}
        if sent.source == "legacy":
            out["result"].pop("dedupedCount", None)
        sends: list[Command] = []
        if self.host.dialect == "standard" and self.peer.dialect == "legacy":
            sends = self._lifecycle_updates(sent.session_id, deduped, pushed_out)
        return sends + [self.send(HOST, out, answers=True)]

    def _turn_done(self, msg: dict[str, Any], session_id: Any) -> Handled:
        session = self.sessions.get(_session_key(session_id))
        if session is None or "error" in msg:
            return None
        expired = session.end_turn()
        if not expired:
            return None
        return self._lifecycle_updates(session_id, None, expired) + [self.forward(HOST)]

    def _emitted(self, msg: dict[str, Any]) -> Handled:
        update = msg["params"]["update"]
        source = "legacy" if get_path(update, "_meta", "harn", "reminder") is not None else "standard"
        try:
            decoded = CODECS[source].decode_emitted(update)
        except ReminderError as exc:
            self.record("invalid", "session/update", source=source, why=exc.loggable)
            return []
        session_id = msg["params"].get("sessionId")
        return self.police(msg, decoded, "session/update", origin=PEER, session=self.session_scope(session_id),
                           source=source, target=self.host.dialect,
                           then=Step(self._emitted_judged, (msg, session_id, source, decoded)),
                           deliver=Step(self._emitted_released, (msg, session_id, source, decoded)))

    def _emitted_judged(self, outcome: tuple[Reminder | None, list[Command]], msg: dict[str, Any], session_id: Any,
                        source: str, decoded: Reminder) -> Handled:
        reminder, refusal = outcome
        if reminder is None:
            return refusal
        return self._to_client(session_id, reminder, source, msg, changed=reminder is not decoded)

    def _emitted_released(self, reminder: Reminder, msg: dict[str, Any], session_id: Any, source: str,
                          decoded: Reminder) -> Handled:
        """An update `coalesce` held, now that its bucket has a token again."""
        return self._to_client(session_id, reminder, source, msg, changed=reminder is not decoded, released=True)

    def _to_client(self, session_id: Any, reminder: Reminder, source: str,
                   original: dict[str, Any] | None = None, *, changed: bool = False,
                   released: bool = False) -> list[Command]:
        client = self.host.dialect
        if client not in CODECS:
            self.record("dropped", "session/update", reminder, source=source, target="none",
                        why="client has no reminder support", session=session_id)
            return []
        if client == source and original is not None and not changed:
            self.record("passed", "session/update", reminder, source=source, target=client, session=session_id)
            return [self.send(HOST, original) if released else self.forward(HOST)]
        out = CODECS[client].encode_emitted(session_id, reminder)
        if keeps_legacy(self.stage) and original is not None and client == "standard":
            harn = get_path(original, "params", "update", "_meta", "harn")
            if harn is not None:
                out["params"]["update"].setdefault("_meta", {})["harn"] = harn
        self.record("rewritten" if original is not None else "synthesized", "session/update", reminder,
                    source=source, target=client, session=session_id)
        return [self.send(HOST, self.stamp(out) if original is not None else out)]

    # -- helpers -------------------------------------------------------------------------------
    def on_reconfigure(self, old: Any) -> None:
        for session in self.sessions.values():
            session.limit = self.settings.trust.max_pending_per_session

    def _session(self, session_id: Any) -> SessionReminders:
        key = _session_key(session_id)
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = SessionReminders(limit=self.settings.trust.max_pending_per_session)
            self.host_markers = (b"emind", b"initialize", b"prompt")  # turns now matter
        return session

    def _shadow(self, session_id: Any, reminder: Reminder) -> tuple[Deduped | None, list[Expired]]:
        """Track what went into a legacy agent so its dedupe and expiry can be told to the client."""
        if self.peer.dialect != "legacy" or self.host.dialect != "standard":
            return None, []
        return self._session(session_id).add(reminder)

    def _lifecycle_updates(self, session_id: Any, deduped: Deduped | None, expired: list[Expired]) -> list[Command]:
        """Standard dedupe/expiry updates the proxy makes up (marked synthesized): the agent sends none."""
        if self.host.dialect != "standard":
            return []
        out: list[Command] = []
        if deduped is not None:
            out.append(self.send(HOST, AcpStandard.encode_deduped(session_id, deduped.reminder_id, deduped.dedupe_key,
                                                                  deduped.dropped_ids, synthesized=True)))
        for gone in expired:
            out.append(self.send(HOST, AcpStandard.encode_expired(session_id, gone.reminder_id, gone.phase,
                                                                  gone.at_turn, synthesized=True)))
        return out


def _session_key(session_id: Any) -> Any:
    return session_id if isinstance(session_id, (str, int)) else repr(session_id)


def _reason(error: dict[str, Any]) -> str:
    """A short machine-readable cause for an agent's inject error (spec §4: add `data.reason`)."""
    message = str(error.get("message", ""))
    for part in message.split(": "):
        if part.startswith("HARN-RMD-"):
            return part
    return {-32004: "unknown_session", -32602: "invalid_params", -32601: "method_not_found"}.get(
        error.get("code"), "agent_error")
