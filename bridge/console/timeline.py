"""The console's charts: per route, what happened in each of the last `MINUTES` minutes
(docs/console.md#the-last-hour): reminders by action, refusals by limit, and budget tokens left.

`Feed` (the admin port's one Recorder listener) passes decisions and refusals on as they happen;
the admin port reads each route's budgets every `SAMPLE_S` seconds (`budgets`), and a minute keeps
the lowest reading, so a bucket that empties and refills within a minute still shows its dip.
The clock is injected, so tests drive minutes without waiting.

Bounded by construction, whatever routes, sessions or peers do: per route one ring of `MINUTES`
minute buckets (`collections.deque(maxlen=...)`); a bucket holds at most `MAX_KEYS` actions and
`MAX_KEYS` refusal causes (the rest are counted as `other`) and at most `MAX_BUDGETS` budget
lines; at most `MAX_ROUTES` routes are kept (the least recently active are forgotten first).
A per-key budget (`key = "session"` or `"tag"`) is one line, its emptiest key, so a route draws
its budget and the global ceiling however many sessions it has; its label never names a key (a
session, or a tag a peer chose).
"""
from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any

MINUTE_S = 60.0
#: Minutes kept and drawn: the last hour.
MINUTES = 60
#: Actions, and refusal causes, one minute keeps apart (beyond: `OTHER`).
MAX_KEYS = 16
OTHER = "other"
#: Budget lines per route: a route has one budget and maybe the global ceiling.
MAX_BUDGETS = 4
#: Budgets with one bucket per route, whose scope (`server:ci`, `global`) the rules named.
PER_ROUTE = ("server", "global")
#: How often the admin port reads the budgets for the charts (each minute keeps its lowest reading).
SAMPLE_S = 5.0
MAX_ROUTES = 256


def refusal_cause(record: dict[str, Any]) -> str:
    """How a refusal is labelled on the chart: the trust limit's name (`max_body_bytes`), or the
    budget that said no (`server budget`, `session budget (shadow)`)."""
    if record.get("by") == "budget":
        return f"{record.get('limit')} budget" + (" (shadow)" if record.get("shadow") else "")
    return str(record.get("limit"))


def _count(counter: Counter[str], key: str) -> None:
    counter[key if key in counter or len(counter) < MAX_KEYS else OTHER] += 1


class Minute:
    """One minute of one route."""

    __slots__ = ("start", "actions", "refusals", "tokens")

    def __init__(self, start: float) -> None:
        self.start = start
        self.actions: Counter[str] = Counter()
        self.refusals: Counter[str] = Counter()
        #: budget line -> the lowest tokens read in this minute
        self.tokens: dict[str, float] = {}


class RouteTimeline:
    __slots__ = ("minutes", "budgets")

    def __init__(self) -> None:
        self.minutes: deque[Minute] = deque(maxlen=MINUTES)
        #: budget line -> what its last reading said of it (label, limit, rate, shadow, keys)
        self.budgets: dict[str, dict[str, Any]] = {}

    def at(self, now: float) -> Minute:
        start = now - now % MINUTE_S
        minutes = self.minutes
        if minutes and minutes[-1].start >= start:  # this minute (or the clock stepped back: the latest)
            return minutes[-1]
        minutes.append(Minute(start))
        return minutes[-1]


def budget_lines(gauges: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`Policy.gauges` as chart lines, one per kind of bucket (`server`, `session`, `tag`,
    `global`): a per-key budget is its emptiest key, labelled with how many keys there are and
    never with the key (a session or a tag a peer chose)."""
    lines: dict[str, dict[str, Any]] = {}
    for gauge in gauges:
        kind = str(gauge.get("kind"))
        line = lines.get(kind)
        if line is not None and line["tokens"] <= gauge["tokens"]:
            continue
        if line is None and len(lines) >= MAX_BUDGETS:
            continue
        keys = int(gauge.get("keys") or 0)
        label = gauge.get("scope") if kind in PER_ROUTE else f"per {kind}, the emptiest of {keys}" if keys > 1 \
            else f"per {kind}"
        lines[kind] = {"kind": kind, "label": label, "tokens": float(gauge["tokens"]), "limit": gauge.get("limit"),
                       "rate": gauge.get("rate"), "shadow": bool(gauge.get("shadow")), "keys": keys}
    return lines


class Timeline:
    """Every route's minutes (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.routes: OrderedDict[str, RouteTimeline] = OrderedDict()

    def route(self, name: str) -> RouteTimeline:
        found = self.routes.get(name)
        if found is None:
            found = self.routes[name] = RouteTimeline()
            if len(self.routes) > MAX_ROUTES:
                self.routes.popitem(last=False)
        else:
            self.routes.move_to_end(name)
        return found

    # -- what happens (from the Recorder listener) ----------------------------------------------
    def decision(self, route: str, action: str) -> None:
        _count(self.route(route).at(self.clock()).actions, action)

    def refusal(self, route: str, cause: str) -> None:
        _count(self.route(route).at(self.clock()).refusals, cause)

    def budgets(self, route: str, gauges: Iterable[dict[str, Any]]) -> None:
        """One reading of a route's budgets (the admin port takes one every `SAMPLE_S`): each line
        keeps the lowest level read in its minute."""
        lines = budget_lines(gauges)
        if not lines:
            return
        timeline = self.route(route)
        minute = timeline.at(self.clock())
        for kind, line in lines.items():
            if kind not in timeline.budgets and len(timeline.budgets) >= MAX_BUDGETS:
                continue
            tokens = line.pop("tokens")
            timeline.budgets[kind] = line
            minute.tokens[kind] = min(tokens, minute.tokens.get(kind, tokens))

    # -- what the console draws -------------------------------------------------------------------
    def series(self, route: str, live: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
        """The route's last `MINUTES` minutes, oldest first, the current one last: counts per minute
        by action and by refusal cause (only those that happened), and each budget line's tokens
        per minute (None where it was not read), with ``live`` (the gauges read now) as `now`."""
        now = self.clock()
        current = now - now % MINUTE_S
        first = current - (MINUTES - 1) * MINUTE_S
        timeline = self.routes.get(route) or RouteTimeline()
        actions: dict[str, list[int]] = {}
        refusals: dict[str, list[int]] = {}
        tokens: dict[str, list[float | None]] = {kind: [None] * MINUTES for kind in timeline.budgets}
        for minute in timeline.minutes:
            slot = int((minute.start - first) // MINUTE_S)
            if not 0 <= slot < MINUTES:
                continue
            for into, counts in ((actions, minute.actions), (refusals, minute.refusals)):
                for key, n in counts.items():
                    into.setdefault(key, [0] * MINUTES)[slot] += n
            for kind, level in minute.tokens.items():
                if kind in tokens:
                    tokens[kind][slot] = round(level, 3)
        now_lines = budget_lines(live)
        budgets = []
        for kind in {**timeline.budgets, **now_lines}:  # those read before first, then any new one
            line = {**timeline.budgets.get(kind, {}), **now_lines.get(kind, {})}
            level = line.pop("tokens", None)
            budgets.append({**line, "tokens": tokens.get(kind, [None] * MINUTES), "now": level})
        return {"minute_s": MINUTE_S, "minutes": MINUTES, "start": first, "actions": actions, "refusals": refusals,
                "budgets": budgets}
