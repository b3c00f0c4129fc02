"""Per-connection, sans-I/O pipelines: a frame in → frames out to the host and the peer.

Transports feed raw frames (one JSON-RPC message, no newline) to `Flow.from_host` /
`Flow.from_peer` and write what comes back.  A frame that needs no rewrite comes back as the
very same bytes object; only frames the pre-filter lets through are decoded.
"""
from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from bridge.model import Reminder, ReminderError
from bridge.policy import Held, Policy, Verdict
from bridge.policy.budget import Coalescer
from bridge.prefilter import REMINDER_MARKERS, could_concern
from bridge.rules import RouteSettings
from bridge.telemetry import TRACE_KEYS, Recorder

HOST, PEER = "host", "peer"
DIALECTS = ("auto", "standard", "legacy", "none")
#: Prefix of every JSON-RPC id the proxy invents; no host or peer uses it (SPEC §8.6).
OWN_ID_PREFIX = "reminder-bridge:"
#: How often transports call `Flow.tick`, in seconds.
TICK = 0.25

Outgoing = list[tuple[str, Any]]
_CONNECTIONS = itertools.count(1)


class Send(NamedTuple):
    to: str
    data: bytes


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def error_response(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


def invalid_params(msg_id: Any, exc: ReminderError) -> dict[str, Any]:
    """-32602 naming the field and the rule; the message alone carries it (no `data`, as the vectors pin)."""
    return error_response(msg_id, -32602, str(exc))


class Flow:
    """Base of the per-protocol pipelines: framing, pre-filtering, batches, ids, stages.

    Subclasses implement `on_host` / `on_peer`, returning None for "forward unchanged" or a list
    of (destination, message) pairs, where a message of None stands for the incoming frame's own
    bytes (so a message forwarded after proxy-made ones stays byte-identical).
    """

    protocol = "?"

    def __init__(self, settings: RouteSettings | None = None, recorder: Recorder | None = None, *,
                 host_dialect: str | None = None, peer_dialect: str | None = None, policy: Policy | None = None,
                 clock: Callable[[], float] | None = None, connection: str | None = None):
        self.settings = settings or RouteSettings()
        self.recorder = recorder or Recorder()
        self.route = self.recorder.route
        #: trust limits and budgets (SPEC §7); give one over a shared `BudgetState` to share budgets
        self.policy = policy if policy is not None else Policy(self.settings, route=self.route)
        #: monotonic seconds, for budgets; transports' `tick(now)` uses the same clock
        self.clock = clock or time.monotonic
        #: the session key of a connection that names none (MCP over stdio: one connection, one session)
        self.connection = connection or f"{self.route}#{next(_CONNECTIONS)}"
        #: over-budget notifications held by `coalesce` until tokens return
        self.held = Coalescer()
        self.stage = self.settings.stage
        self.host_dialect = host_dialect or self.settings.host_dialect
        self.peer_dialect = peer_dialect or self.settings.peer_dialect
        #: a configured dialect is never second-guessed by what the handshake says
        self.host_fixed = self.host_dialect != "auto"
        self.peer_fixed = self.peer_dialect != "auto"
        self.host_markers: tuple[bytes, ...] = REMINDER_MARKERS
        self.peer_markers: tuple[bytes, ...] = REMINDER_MARKERS
        #: ids of requests (by origin side) whose responses this flow must see
        self.awaiting: dict[str, dict[Any, Any]] = {HOST: {}, PEER: {}}
        self._next_id = 0
        # the message being handled, for trace context; only set on the decoded path
        self._inbound: dict[str, Any] | None = None
        self._headers: Mapping[str, str] | None = None
        self._span: Any = None
        self._start_ns: int | None = None
        self._attributes: dict[str, Any] | None = None
        self._direction: str | None = None  # toward_host | toward_peer, while a frame is handled
        self.recorder.track(self)

    # -- framing -------------------------------------------------------------------------------
    def from_host(self, frame: bytes, headers: Mapping[str, str] | None = None) -> list[Send]:
        """``headers``: the HTTP request's headers (lower-case names), whose `traceparent` is the
        parent of the proxy's spans unless the message's `_meta` names one."""
        return self._handle(frame, HOST, PEER, headers)

    def from_peer(self, frame: bytes, headers: Mapping[str, str] | None = None) -> list[Send]:
        return self._handle(frame, PEER, HOST, headers)

    def reconfigure(self, settings: RouteSettings, policy: Policy | None = None) -> None:
        """New rules for the messages to come (a reload); the connection and what it learned stay.

        Stage, fallbacks, envelope, trust and budget apply from the next message.  A dialect the
        new rules name explicitly replaces the one in use; `auto` keeps what was learned.
        """
        old = self.settings
        self.settings = settings
        self.stage = settings.stage
        self.policy = policy if policy is not None else Policy(settings, route=self.route, state=self.policy.state)
        for side in ("host", "peer"):
            new = getattr(settings, f"{side}_dialect")
            if new != getattr(old, f"{side}_dialect") and new != "auto":
                setattr(self, f"{side}_dialect", new)
                setattr(self, f"{side}_fixed", True)
        self.on_reconfigure(old)

    def on_reconfigure(self, old: RouteSettings) -> None:
        """Subclasses recompute what depends on settings (e.g. which frames to parse)."""

    def passes(self, data: bytes, origin: str) -> bool:
        """True when ``data`` (one frame, or a block of whole lines) can go on untouched, unparsed."""
        dest = PEER if origin == HOST else HOST
        # responses to requests the other side sent and we track must be looked at
        return not self.awaiting[dest] and not could_concern(data, self.host_markers if origin == HOST
                                                             else self.peer_markers)

    def _handle(self, frame: bytes, origin: str, dest: str, headers: Mapping[str, str] | None = None) -> list[Send]:
        if self.passes(frame, origin):
            return [Send(dest, frame)]
        self._direction = "toward_host" if dest == HOST else "toward_peer"
        started = time.perf_counter()
        self._start_ns = time.time_ns()
        self._headers = headers
        try:
            msg = json.loads(frame)
        except (ValueError, RecursionError):
            return [Send(dest, frame)]  # not JSON (or absurdly deep): not ours to judge
        try:
            if isinstance(msg, list):
                return self._batch(msg, frame, origin, dest)
            out = self._dispatch(msg, origin)
        finally:
            self._headers = None
        if out is None:
            return [Send(dest, frame)]
        self.recorder.rewrite_latency(self.protocol, time.perf_counter() - started)
        return [Send(to, frame if data is None else data if isinstance(data, bytes) else dumps(data))
                for to, data in out]

    def _dispatch(self, msg: Any, origin: str) -> Outgoing | None:
        if not isinstance(msg, dict):
            return None
        self._inbound, self._span, self._attributes = msg, None, None
        try:
            out = self.on_host(msg) if origin == HOST else self.on_peer(msg)
        finally:
            self._inbound = None
        if out is not None and self.stage == "observe":
            return None  # observe: decisions are counted and logged, the wire is untouched
        return out

    def _batch(self, batch: list[Any], frame: bytes, origin: str, dest: str) -> list[Send]:
        """JSON-RPC batches (MCP 2025-03-26): rewrite members, keep the rest of the array as it was."""
        results = [self._dispatch(item, origin) for item in batch]
        if all(r is None for r in results):
            return [Send(dest, frame)]
        forward: list[Any] = []
        back: list[Any] = []
        for item, result in zip(batch, results):
            if result is None:
                forward.append(item)
                continue
            for to, data in result:
                data = item if data is None else json.loads(data) if isinstance(data, bytes) else data
                (forward if to == dest else back).append(data)
        sends = [Send(dest, dumps(forward))] if forward else []
        if back:
            sends.append(Send(origin, dumps(back)))
        return sends

    def tick(self, now: float) -> list[Send]:
        """Called by the transport about every `TICK` seconds: frames the flow wants to send on its
        own (budget tokens returned for coalesced reminders, outbox polls).  ``now`` is monotonic."""
        out = (self._release(now) if len(self.held) else []) + (self.on_tick(now) or [])
        return [Send(to, data if isinstance(data, bytes) else dumps(data)) for to, data in out]

    def _release(self, now: float) -> Outgoing:
        """Coalesced reminders whose buckets have a token again, newest per key, in order."""
        def admit(item: Held) -> bool:
            exceeded, _ = self.policy.charge(item.reminder, server=self.route, session=item.context[1], now=now)
            return exceeded is None

        out: Outgoing = []
        for item in self.held.release(admit):
            self._inbound, self._span, self._attributes = item.context[0], None, {"reminder.coalesced": True}
            self._start_ns = time.time_ns()
            try:
                out += item.deliver(item.reminder) or []
            finally:
                self._inbound = None
        return out

    def pending_counts(self) -> dict[str, int]:
        """Reminders this connection holds, by queue (the admin port's gauges)."""
        return {"coalesce": len(self.held)}

    def wants_tick(self) -> bool:
        """Whether `tick` may have anything to do: transports skip flows that hold nothing."""
        return len(self.held) > 0

    def assume_host(self, dialect: str) -> None:
        """A host whose handshake the proxy never saw (a session it does not hold): use ``dialect``
        until a handshake says otherwise, unless the rules name one."""
        if not self.host_fixed:
            self.host_dialect = dialect
            self.on_reconfigure(self.settings)

    def abandon(self, why: str) -> None:
        """The connection ends while the flow still holds reminders: each is dropped and counted."""
        for item in self.held:
            self._inbound, self._span, self._attributes = item.context[0], None, None
            try:
                self.record("dropped", item.context[0].get("method"), item.reminder, why=why)
            finally:
                self._inbound = None
        self.held = Coalescer()

    # -- helpers for subclasses ----------------------------------------------------------------
    def on_tick(self, now: float) -> Outgoing | None:
        return None

    def on_host(self, msg: dict[str, Any]) -> Outgoing | None:
        return None

    def on_peer(self, msg: dict[str, Any]) -> Outgoing | None:
        return None

    def own_id(self) -> str:
        self._next_id += 1
        return f"{OWN_ID_PREFIX}{self._next_id}"

    def expect_response(self, origin: str, msg: dict[str, Any], what: Any) -> None:
        """Remember that the response to ``msg`` (sent by ``origin``) must be seen by this flow."""
        key = _key(msg.get("id"))
        if key is not None:
            self.awaiting[origin][key] = what

    def response_to(self, origin: str, msg: dict[str, Any]) -> Any:
        """What was remembered for the request this response answers (and forget it)."""
        if "method" in msg or "id" not in msg:
            return None
        key = _key(msg["id"])
        return None if key is None else self.awaiting[origin].pop(key, None)

    def record(self, action: str, method: str | None, reminder: Reminder | None = None, *,
               source: str | None = None, target: str | None = None, why: str | None = None) -> None:
        """Count, trace and log one decision about a reminder of the message being handled."""
        attributes, self._attributes = self._attributes, None
        span = self.recorder.reminder(action, protocol=self.protocol, method=method, reminder=reminder,
                                      source=source, target=target, why=why, stage=self.stage,
                                      carrier=self._carrier() if self.recorder.tracing.spans else None,
                                      attributes=attributes, start_ns=self._start_ns, session=self.connection,
                                      direction=self._direction)
        if span is not None:
            self._span = span

    def stamp(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Write trace context into ``msg``'s `params._meta` (a message the proxy made or rewrote):
        the span of the last decision as parent, else the incoming message's own context."""
        keys = self.recorder.carrier(self._span, self._carrier())
        params = msg.get("params")
        if keys and isinstance(params, dict):
            meta = params.get("_meta")
            params["_meta"] = {**(meta if isinstance(meta, dict) else {}), **keys}
        return msg

    def _carrier(self) -> dict[str, str] | None:
        """W3C trace context of the message being handled: HTTP headers, overridden by `params._meta`."""
        carrier: dict[str, str] = {}
        if self._headers:
            carrier.update({k: v for k in TRACE_KEYS if isinstance(v := self._headers.get(k), str)})
        params = self._inbound.get("params") if self._inbound is not None else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict):
            carrier.update({k: v for k in TRACE_KEYS if isinstance(v := meta.get(k), str)})
        return carrier or None

    def police(self, msg: dict[str, Any], reminder: Reminder, method: str, *, origin: str,
               deliver: Callable[[Reminder], Outgoing | None] | None = None, session: Any = None,
               pending: int | None = None, source: str | None = None, target: str | None = None,
               request: bool | None = None) -> tuple[Reminder | None, Outgoing]:
        """The policy, once per decoded reminder, just before it is encoded for the other side.

        Returns ``(reminder, [])`` to go on with (possibly cleaned: control characters stripped,
        `roleHint` lowered), or ``(None, out)``: the reminder is refused and ``out`` is what to
        send instead: a JSON-RPC error to ``origin`` for a request, nothing for a notification
        (dropped, or held by `coalesce` until ``deliver(reminder)`` can send it).
        ``session``: the session it belongs to (default: this connection); ``pending``: how many
        reminders that session holds when this one would be held too.  ``request=False`` treats a
        reminder riding on a request (A2A `metadata.harn.reminder` on `SendMessage`) like a
        notification: refusing it drops the reminder, not the message.
        """
        session = self.connection if session is None else session
        request = _is_request(msg) if request is None else request
        verdict = self.policy.admit(reminder, request=request, server=self.route, session=session,
                                    now=self.clock(), from_peer=origin == PEER, pending=pending,
                                    shadow=self.stage == "observe")
        attributes: dict[str, Any] = {f"reminder.trust.{k}": v for k, v in verdict.changes.items()}
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

    def trace_context(self) -> dict[str, str]:
        """Trace-context headers (`traceparent`, ...) for the request the proxy forwards after the
        message just handled: for transports whose bodies have no `_meta` slot (A2A over HTTP)."""
        return self.recorder.carrier(self._span, self._carrier())

    def _refused(self, msg: dict[str, Any], verdict: Verdict, method: str, origin: str,
                 deliver: Callable[[Reminder], Outgoing | None] | None, session: Any, source: str | None,
                 target: str | None, request: bool) -> Outgoing:
        reminder = verdict.reminder
        if verdict.refusal is not None:
            self.recorder.trust_refused(self.protocol, verdict.refusal.limit)
            self._attributes = {**(self._attributes or {}), "reminder.trust.limit": verdict.refusal.limit}
            self.record("refused", method, reminder, source=source, target=target, why=verdict.why)
        else:
            assert verdict.exceeded is not None
            self.recorder.budget_rejected(self.protocol, verdict.exceeded.scope, shadow=False)
            self._attributes = {**(self._attributes or {}), "reminder.budget.scope": verdict.exceeded.scope,
                                "reminder.budget.retry_after_ms": verdict.exceeded.retry_after_ms}
            if not request and verdict.over == "coalesce" and deliver is not None:
                return self._coalesce(msg, verdict, method, deliver, session, source, target)
            self.record("rate_limited", method, reminder, source=source, target=target, why=verdict.why)
        if request:
            code, message, data = verdict.error()
            return [(origin, error_response(msg["id"], code, message, data))]
        return []

    def _coalesce(self, msg: dict[str, Any], verdict: Verdict, method: str,
                  deliver: Callable[[Reminder], Outgoing | None], session: Any, source: str | None,
                  target: str | None) -> Outgoing:
        reminder = verdict.reminder
        key = f"k:{reminder.dedupe_key}" if reminder.dedupe_key is not None else f"i:{reminder.id}"
        limit = self.settings.trust.max_pending_per_session
        if not self.held.holds(key) and len(self.held) >= limit:
            self.recorder.trust_refused(self.protocol, "max_pending_per_session")
            self.record("dropped", method, reminder, source=source, target=target,
                        why=f"over budget and the coalesce queue is full (max_pending_per_session = {limit})")
            return []
        replaced = self.held.hold(Held(key, reminder, deliver, (msg, session)))
        self.record("coalesced", method, reminder, source=source, target=target,
                    why=f"{verdict.why}; held until tokens return" + (
                        f", replacing {replaced.reminder.id}" if replaced is not None else ""))
        return []


def _is_request(msg: dict[str, Any]) -> bool:
    return "id" in msg and msg["id"] is not None


def _key(msg_id: Any) -> Any:
    """A dict key for a JSON-RPC id, or None for one no request of ours can have (null, arrays,
    objects: invalid ids pass untouched). 1 and "1" are different ids; so are 1 and 1.0 on the
    wire, though Python hashes them alike."""
    if msg_id is None or isinstance(msg_id, (list, dict)):
        return None
    return (type(msg_id).__name__, msg_id)
