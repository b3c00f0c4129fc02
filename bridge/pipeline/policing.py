"""`Policing`: the one policy step of every flow (spec §7), once per decoded reminder.

Trust limits, then the budget: the policy (`bridge.policy`) says what to charge, the flow asks for
it with a `Perform` and goes on when the result comes (`Flow.performed`), then turns a refusal into
a JSON-RPC error (requests) or a drop or a hold (`coalesce`, notifications).  A mixin of `Flow`,
kept apart so each file holds one job.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridge.jsonrpc import error_response, is_request
from bridge.lazy import lazily
from bridge.pipeline.commands import HOST, PEER, Command
from bridge.pipeline.negotiation import observes
from bridge.pipeline.waiting import Step
from bridge.policy import BUDGET_CODE, STATE_MESSAGE, STATE_RETRY_MS, Coalesced, Verdict
from bridge.state.base import StateUnavailable

if TYPE_CHECKING:
    from bridge import model
    from bridge.model import Reminder
else:  # pydantic: loaded by the first reminder a route decodes (issue 23)
    model = lazily("bridge.model")

Handled = list[Command] | None  # None: forward the frame untouched
#: One reminder on its way through `Flow.police`, what the steps after the charge need: (msg,
#: method, origin, then, deliver, session, source, target, request).  A plain tuple, not a
#: NamedTuple: one is made per reminder, and a NamedTuple's constructor costs seven times as much.
Case = tuple[dict[str, Any], str, str, Step, "Step | None", Any, "str | None", "str | None", bool]


class Policing:
    """What `Flow` does with the policy (the attributes it uses are the flow's own)."""

    policy: Any
    recorder: Any
    protocol: str
    stage: str
    route: str
    scope: Any
    settings: Any
    held: Any
    clock: Any
    _carrying: bool
    _attributes: dict[str, Any] | None
    _direction: str | None

    def police(self, msg: dict[str, Any], reminder: Reminder, method: str, *, origin: str, then: Step,
               deliver: Step | None = None, session: Any = None, pending: Any = None, source: str | None = None,
               target: str | None = None, request: bool | None = None) -> Handled:
        """The policy, once per decoded reminder, just before it is encoded for the other side;
        ``then.run((reminder, out), *then.args)`` gives what follows (maybe after shared state
        answered: the budget is charged by a `Perform`).

        ``(reminder, [])``: go on with it (possibly cleaned: control characters stripped, `roleHint`
        lowered); ``(None, out)``: refused, and ``out`` is what to send instead: a JSON-RPC error to
        ``origin`` for a request, nothing for a notification (dropped, or held by `coalesce` until
        ``deliver.run(reminder, *deliver.args)`` can send it).  ``session``: the `Scope` it belongs
        to (default: the flow's own); ``pending``: how many reminders that session holds when this
        one would be held too, or ``(op, state)`` counting them in shared state (asked only once the
        trust limits passed).  ``request=False`` treats a reminder riding on a request (A2A
        `metadata.harn.reminder` on `SendMessage`) like a notification: refusing it drops the
        reminder, not the message.
        """
        self._carrying = True
        session = self.scope if session is None else session
        request = is_request(msg) if request is None else request
        counted = pending if type(pending) is int else None
        verdict = self.policy.screen(reminder, origin == PEER, counted)
        case = (msg, method, origin, then, deliver, session, source, target, request)  # a tuple: made per reminder
        if pending is not None and counted is None and verdict.ok and self.policy.enabled:
            op, state = pending
            return self.perform(op, state, self._counted, case, verdict)
        return self._charge(case, verdict)

    def _counted(self, count: Any, case: Case, verdict: Verdict) -> Handled:
        if isinstance(count, StateUnavailable):
            verdict.unavailable = count
            return self._judged(case, verdict)
        self.policy.pending(verdict, count)
        return self._charge(case, verdict)

    def _charge(self, case: Case, verdict: Verdict) -> Handled:
        if verdict.ok:
            op = self.policy.charge_op(verdict.reminder, server=self.route, session=case[5], now=self.clock())
            if op is not None:
                return self.perform(op, self.policy.budget_state, self._charged, case, verdict)
        return self._judged(case, verdict)

    def _charged(self, result: Any, case: Case, verdict: Verdict) -> Handled:
        return self._judged(case, self.policy.judge(verdict, result, observes(self.stage)))

    def _judged(self, case: Case, verdict: Verdict) -> Handled:
        reminder = verdict.reminder
        attributes: dict[str, Any] = {f"reminder.trust.{k}": v for k, v in verdict.changes.items()} \
            if verdict.changes else {}
        if verdict.changes:
            self.recorder.info("reminder_cleaned", protocol=self.protocol, method=case[1], id=reminder.id,
                               **{k.lower(): v for k, v in verdict.changes.items()})
        if verdict.shadowed is not None:
            self.recorder.budget_rejected(self.protocol, verdict.shadowed.scope, shadow=True)
            attributes["reminder.budget.shadow_limited"] = True
            attributes["reminder.budget.scope"] = verdict.shadowed.scope
        then = case[3]
        if verdict.ok:
            self._attributes = attributes or None
            return then.run((verdict.reminder, []), *then.args)
        self._attributes = attributes
        return then.run((None, self._refused(case, verdict)), *then.args)

    def state_refused(self, msg: dict[str, Any], reminder: Reminder, method: str,
                      exc: StateUnavailable) -> list[Command]:
        """A reminder request whose queue lives in shared state that is away (`closed`): the
        structured error with ``scope = "state"`` (spec §12), and the decision counted."""
        self.record("refused", method, reminder, why=f"{STATE_MESSAGE} (on_unavailable = closed): {exc.cause}")
        return [self.reply(HOST, msg, error_response(msg.get("id"), BUDGET_CODE, STATE_MESSAGE, exc.data()),
                           STATE_RETRY_MS)]

    def _refused(self, case: Case, verdict: Verdict) -> list[Command]:
        msg, method, origin, _, deliver, session, source, target, request = case
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

    def _coalesce(self, msg: dict[str, Any], verdict: Verdict, method: str, deliver: Step, session: Any,
                  source: str | None, target: str | None) -> list[Command]:
        reminder = verdict.reminder
        key = held_key(reminder)
        limit = self.held.limit = self.settings.trust.max_pending_per_session
        size = model.size_at_most(reminder)
        full = self.held.room(key, size)
        if full is not None:
            self.recorder.trust_refused(self.protocol, "max_pending_per_session")
            self.record("dropped", method, reminder, source=source, target=target, session=session,
                        why=f"over budget and the coalesce queue is full (max_pending_per_session = {limit})"
                        if full == "count" else f"over budget and the coalesce queue holds {self.held.bytes} bytes "
                                                f"already (at most {self.held.max_bytes})")
            return []
        put = self.held.put(key, Coalesced(key, reminder, deliver, (msg, session, self._direction)), size=size)
        replaced = put.previous
        for gone in put.evicted:  # the limit fell (a reload) below what was held: the oldest go
            self.record("dropped", method, gone.reminder, source=source, target=target, session=gone.context[1],
                        why=f"pushed out of the coalesce queue (max_pending_per_session = {limit})")
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
