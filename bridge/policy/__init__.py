"""The one policy layer (spec §7): trust limits, then budgets, for every reminder of every transport.

Pure and transport-blind.  A `Policy` is built from a route's `RouteSettings` (and the rules
file's global ceiling); flows ask it once per decoded reminder, in three pure steps::

    verdict = policy.screen(reminder, from_peer=True, pending=None)   # the trust limits
    op = policy.charge_op(verdict.reminder, server="fs", session=scope, now=clock())  # what to charge
    policy.judge(verdict, result, shadow=False)                       # the result, once performed

and turn a refusal into a JSON-RPC error (requests) or a drop / coalesce (notifications).  The
policy never performs the charge: a flow hands the `Charge` op to its transport (`Perform`), which
performs it on `budget_state` and feeds the result back.  The budget buckets live in a
`BudgetState` that outlives the `Policy`, so a rules reload builds a new `Policy` over the same
state and surviving keys keep their tokens; with shared state (``shared``: a Redis-backed
`StateBackend`, spec §12) the same op is charged there instead, fleet-wide.  `admit` does the
three steps at once on the in-process buckets (tests, the console's previews).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bridge.defaults import ROUTE
from bridge.policy.budget import GLOBAL, BudgetState, Coalesced, Coalescer, Exceeded, Limit
from bridge.policy.trust import TrustRefusal, pending_refusal, screen
from bridge.state.base import BucketCharge, StateBackend, StateUnavailable
from bridge.state.ops import Charge, Pay
from bridge.state.scope import Scope

if TYPE_CHECKING:
    from bridge.model import Reminder
    from bridge.rules import GlobalBudget, RouteSettings

__all__ = ["BUDGET_CODE", "BUDGET_MESSAGE", "STATE_MESSAGE", "BudgetState", "Coalesced", "Coalescer", "Exceeded",
           "Policy", "SHARED_STATE", "TRUST_CODES", "TrustRefusal", "Verdict"]

#: A request over budget (spec §7).
BUDGET_CODE = -32000
BUDGET_MESSAGE = "reminder budget exceeded"
#: A reminder request while shared state is down and `on_unavailable = "closed"` (spec §12).
STATE_MESSAGE = "reminder state unavailable"
#: How soon a notification held while shared state is down is tried again.
STATE_RETRY_MS = 1000
#: A request refused by a trust limit: content limits are invalid params, a full session is a server limit.
TRUST_CODES = {"max_pending_per_session": -32000}
TRUST_CODE = -32602

#: The process's budget buckets, shared by every route and connection unless a caller brings its own.
SHARED_STATE = BudgetState()
UNTAGGED = "(untagged)"
#: With shared state, how many recently charged keys the console's gauges follow.
RECENT_KEYS = 16


@dataclass(slots=True)
class Verdict:
    """What the policy says about one reminder.

    ``ok``: deliver ``reminder`` (possibly cleaned: control characters stripped, `roleHint`
    lowered; see ``changes``).  Otherwise ``refusal`` (a trust limit) or ``exceeded`` (a budget)
    says why; ``over`` is the route's choice for notifications over budget.  ``shadowed`` is a
    budget refusal that was only counted (`shadow = true`, or the `observe` stage).
    """

    reminder: Reminder
    changes: dict[str, Any] = field(default_factory=dict)
    refusal: TrustRefusal | None = None
    exceeded: Exceeded | None = None
    shadowed: Exceeded | None = None
    over: str = "drop"
    #: shared state is down and `on_unavailable = "closed"`: nothing could be charged
    unavailable: StateUnavailable | None = None

    @property
    def ok(self) -> bool:
        return self.refusal is None and self.exceeded is None and self.unavailable is None

    @property
    def retry_after_ms(self) -> int | None:
        if self.unavailable is not None:
            return STATE_RETRY_MS
        return self.exceeded.retry_after_ms if self.exceeded is not None else None

    def error(self) -> tuple[int, str, dict[str, Any]]:
        """(code, message, data) of the JSON-RPC error a refused request gets."""
        if self.unavailable is not None:
            return BUDGET_CODE, STATE_MESSAGE, self.unavailable.data()
        if self.exceeded is not None:
            return BUDGET_CODE, BUDGET_MESSAGE, self.exceeded.data()
        assert self.refusal is not None
        return TRUST_CODES.get(self.refusal.limit, TRUST_CODE), self.refusal.message, self.refusal.data()

    @property
    def why(self) -> str | None:
        if self.refusal is not None:
            return self.refusal.message
        if self.unavailable is not None:
            return f"{STATE_MESSAGE} (on_unavailable = closed): {self.unavailable.cause or self.unavailable.message}"
        limited = self.exceeded or self.shadowed
        if limited is not None:
            shadow = " (shadow: only counted)" if self.shadowed is not None else ""
            return (f"{BUDGET_MESSAGE} for {limited.scope}: {limited.limit} burst at {limited.rate:g}/min, "
                    f"retry after {limited.retry_after_ms} ms{shadow}")
        return None


class Policy:
    """One route's trust limits and budget, over a (reload-surviving) `BudgetState`, or over
    ``shared`` state when the rules name one."""

    def __init__(self, settings: RouteSettings | None = None, global_budget: GlobalBudget | None = None, *,
                 route: str = "default", state: BudgetState | None = None, enabled: bool = True,
                 shared: StateBackend | None = None):
        #: False: admit everything untouched (the `translate` command converts; it does not police)
        self.enabled = enabled
        self.settings = settings or ROUTE
        self.trust = self.settings.trust
        self.budget = self.settings.budget
        self.global_budget = global_budget
        self.route = route
        self.state = state if state is not None else SHARED_STATE
        #: fleet-wide budgets (Redis); None: this process's `state`
        self.shared = shared
        #: the own-bucket keys charged lately, each with what it shows (the gauges), and, with shared
        #: state, what Redis last said each bucket held (`show_levels`)
        self._recent: OrderedDict[str, str] = OrderedDict()
        self._levels: dict[str, float] = {}
        self._limit = (Limit("", self.budget.rate, self.budget.burst) if self.budget is not None else None)
        self._global = (Limit(GLOBAL, global_budget.rate, global_budget.burst) if global_budget is not None else None)
        self._ceiling_pay = (Pay(GLOBAL, GLOBAL, GLOBAL, global_budget.rate, global_budget.burst),) \
            if global_budget is not None else ()
        self._last_pays: tuple[Any, tuple[Pay, ...]] | None = None

    @property
    def budgeted(self) -> bool:
        return self._limit is not None or self._global is not None

    @property
    def budget_state(self) -> Any:
        """Where a `Charge` of this policy is performed: the shared state, else this process's buckets."""
        return self.shared if self.shared is not None else self.state

    def admit(self, reminder: Reminder, *, request: bool, server: str, session: Any, now: float,
              from_peer: bool = True, pending: int | None = None, shadow: bool = False) -> Verdict:
        """Screen ``reminder`` against the trust limits, then charge the in-process budget, at once.

        ``pending``: how many reminders the session already holds, when this one would be held
        too (None when it is delivered at once).  ``shadow``: count a budget refusal but admit
        (the `observe` stage passes True).  ``request`` only matters to the caller's reaction.
        """
        verdict = self.screen(reminder, from_peer, pending)
        if verdict.ok and (op := self.charge_op(verdict.reminder, server=server, session=session, now=now)):
            self.judge(verdict, self.state.perform_now(op), shadow)
        return verdict

    def screen(self, reminder: Reminder, from_peer: bool, pending: int | None) -> Verdict:
        """The trust limits: a verdict that is refused, or cleaned and ready to be charged."""
        if not self.enabled:
            return Verdict(reminder)
        screened = screen(reminder, self.trust, from_peer=from_peer)
        if isinstance(screened, TrustRefusal):
            return Verdict(reminder, refusal=screened)
        verdict = Verdict(*screened, over=self.budget.over if self.budget else "drop")
        if pending is not None:
            self.pending(verdict, pending)
        return verdict

    def pending(self, verdict: Verdict, pending: int | None) -> None:
        """The session's pending limit, once what it holds is known (counted in shared state, maybe)."""
        if pending is not None and (refusal := pending_refusal(self.trust, pending)) is not None:
            verdict.refusal = refusal

    @staticmethod
    def judge(verdict: Verdict, result: Any, shadow: bool) -> Verdict:
        """A performed `Charge`'s result on ``verdict``: refused, shadow-counted, or admitted; shared
        state away (`StateUnavailable`, `closed`) refuses with ``unavailable``."""
        if isinstance(result, StateUnavailable):
            verdict.unavailable = result
            return verdict
        exceeded, shadowed = result
        if exceeded is not None and shadow:
            exceeded, shadowed = None, exceeded
        verdict.exceeded, verdict.shadowed = exceeded, shadowed
        return verdict

    @staticmethod
    def held_wait(result: Any) -> Exceeded | None:
        """A performed `Charge` for a coalesced reminder: None (released), or why it waits longer
        (shared state away counts as a wait of `STATE_RETRY_MS`)."""
        if isinstance(result, StateUnavailable):
            return Exceeded("state", 0, 0, STATE_RETRY_MS, 0.0)
        return result[0]

    def _keys(self, reminder: Reminder, server: str, session: Any) -> tuple[str, list[tuple[str, str]]]:
        """The kind of the route's own buckets and the (key, shown) of each bucket this reminder pays
        into.  A session's bucket is keyed by its `Scope` (two clients that send the same session id
        never share one) and shows what the client knows it by; a bare string is its own key."""
        assert self.budget is not None
        kind = self.budget.key
        if kind == "server":
            return kind, [(str(server), str(server))]
        if kind == "session":
            if isinstance(session, Scope):
                return kind, [(session.key("budget"), session.shown)]
            return kind, [(str(session), str(session))]
        return kind, [(tag, tag) for tag in reminder.tags] or [(UNTAGGED, UNTAGGED)]

    def charge_op(self, reminder: Reminder, *, server: str, session: Any, now: float) -> Charge | None:
        """What ``reminder`` pays: a token from each bucket, all or none (None: nothing to pay).

        Under `shadow = true` the route's own buckets never refuse for real but still drain, so the
        count of what would have been limited is right; the global ceiling is always real.
        """
        if (self._limit is None and self._global is None) or not self.enabled:  # not `budgeted`, spelled out: hot
            return None
        own = self._own_pays(reminder, server, session) if self._limit is not None else ()
        if self.budget is not None and self.budget.shadow:
            return Charge(self.route, self._ceiling_pay, own, now, self.budget.max_keys)
        return Charge(self.route, own + self._ceiling_pay if self._ceiling_pay else own, (), now,
                      self.budget.max_keys if self.budget is not None else 1)

    def _own_pays(self, reminder: Reminder, server: str, session: Any) -> tuple[Pay, ...]:
        """The route's own buckets ``reminder`` pays into (the last one asked is kept: most
        reminders of a route pay into the same bucket as the one before)."""
        assert self._limit is not None and self.budget is not None
        kind = self.budget.key  # what the keys are made of, compared before they are made
        basis = str(server) if kind == "server" else (session if isinstance(session, Scope) else str(session)) \
            if kind == "session" else tuple(reminder.tags)
        last = self._last_pays
        if last is not None and last[0] == basis:
            return last[1]
        kind, keys = self._keys(reminder, server, session)
        rate, burst = self._limit.rate, self._limit.burst
        own = tuple([Pay(kind, key, f"{kind}:{shown}", rate, burst) for key, shown in keys])
        self._last_pays = (basis, own)
        self._remember(keys)
        return own

    def charge(self, reminder: Reminder, *, server: str, session: Any,
               now: float) -> tuple[Exceeded | None, Exceeded | None]:
        """Budget only, on the in-process buckets at once: (refusal, shadow refusal)."""
        op = self.charge_op(reminder, server=server, session=session, now=now)
        return (None, None) if op is None else self.state.perform_now(op)

    def _remember(self, keys: list[tuple[str, str]]) -> None:
        for key, shown in keys:
            self._recent[key] = shown
            self._recent.move_to_end(key)
            if len(self._recent) > RECENT_KEYS:
                self._recent.popitem(last=False)

    def _bucket(self, kind: str, key: str) -> BucketCharge:
        assert self._limit is not None
        return BucketCharge(f"{self.route}:{kind}:{key}", self._limit.rate, self._limit.burst, f"{kind}:{key}")

    def _ceiling(self) -> BucketCharge:
        assert self._global is not None
        return BucketCharge(GLOBAL, self._global.rate, self._global.burst, GLOBAL)

    def shown_buckets(self) -> list[BucketCharge]:
        """With shared state: the buckets `gauges` shows (the console reads their levels there and
        hands them to `show_levels` before it draws); none on this process's own state."""
        if self.shared is None or not self.budgeted:
            return []
        charges = [self._bucket(self.budget.key, key) for key in self._recent] if self._limit and self.budget else []
        if self._global is not None:
            charges.append(self._ceiling())
        return charges

    def show_levels(self, charges: list[BucketCharge], levels: list[float]) -> None:
        """What shared state said the buckets of `shown_buckets` hold now, fleet-wide."""
        self._levels = {charge.key: level for charge, level in zip(charges, levels)}

    def gauges(self, now: float, most: int = 16) -> list[dict[str, Any]]:
        """Every budget bucket of this route as a gauge (the admin console): tokens left at ``now``
        (the clock `admit` is given: monotonic seconds) and the limit, read without charging or
        refilling anything.  Per-key buckets are listed emptiest first, at most ``most`` of them
        (``keys`` says how many there are); a configured budget no reminder has paid into yet is
        one full gauge (``key`` None).  The global ceiling, when there is one, comes last.  With
        shared state: the keys this replica charged lately, as `show_levels` last said."""
        out: list[dict[str, Any]] = []
        budget = self.budget
        if budget is not None and self._limit is not None:
            kind = budget.key
            if self.shared is None:
                found = self.state.levels(self.route, kind, now, budget.rate / 60.0, budget.burst)
            else:
                found = [(key, self._levels.get(self._bucket(kind, key).key, float(budget.burst)))
                         for key in self._recent]
            found.sort(key=lambda item: item[1])
            base = {"kind": kind, "limit": budget.burst, "rate": budget.rate, "shadow": budget.shadow,
                    "keys": len(found)}
            if not found:
                out.append({**base, "scope": f"{kind}:*", "key": None, "tokens": float(budget.burst)})
            for key, tokens in found[:most]:
                shown = self._recent.get(key, key)  # a session's bucket shows the session, not its scope's key
                out.append({**base, "scope": f"{kind}:{shown}", "key": shown, "tokens": round(tokens, 3)})
        if self.global_budget is not None:
            ceiling = self.global_budget
            if self.shared is None:
                held = self.state.levels(self.route, GLOBAL, now, ceiling.rate / 60.0, ceiling.burst)
                tokens = held[0][1] if held else float(ceiling.burst)
            else:
                tokens = self._levels.get(GLOBAL, float(ceiling.burst))
            out.append({"kind": GLOBAL, "scope": GLOBAL, "key": None, "tokens": round(tokens, 3),
                        "limit": ceiling.burst, "rate": ceiling.rate, "shadow": False, "keys": 1})
        return out
