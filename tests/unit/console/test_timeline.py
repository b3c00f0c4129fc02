"""The console's per-minute series (bridge/console/timeline.py), driven by an injected clock:
minutes roll over without waiting, and every table stays bounded however many routes, actions,
causes or budgets arrive."""
from __future__ import annotations

from bridge.console import timeline as tl
from bridge.console.feed import Feed
from bridge.policy import BudgetState, Policy
from bridge.rules import parse_rules_text
from bridge.telemetry import Recorder

T0 = 1_800_000_000.0  # a minute's start (a multiple of 60)


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_decisions_and_refusals_fall_into_their_minute_and_roll_over():
    clock = Clock(T0 + 5)
    timeline = tl.Timeline(clock)
    timeline.decision("ci", "rewritten")
    clock.now = T0 + 59.9
    timeline.decision("ci", "rewritten")
    timeline.refusal("ci", "max_body_bytes")
    clock.now = T0 + 60  # the next minute
    timeline.decision("ci", "rate_limited")
    timeline.refusal("ci", "server budget")
    series = timeline.series("ci")
    assert series["minutes"] == 60 and series["start"] == T0 + 60 - 59 * 60
    assert series["actions"]["rewritten"][-2:] == [2, 0] and series["actions"]["rate_limited"][-2:] == [0, 1]
    assert sum(series["actions"]["rewritten"]) == 2 and len(series["actions"]["rewritten"]) == 60
    assert series["refusals"] == {"max_body_bytes": [0] * 58 + [1, 0], "server budget": [0] * 59 + [1]}

    clock.now = T0 + 59 * 60  # the first minute is now the oldest one drawn
    assert timeline.series("ci")["actions"]["rewritten"][0] == 2
    clock.now = T0 + 60 * 60  # ... and then it is out of the hour
    assert "rewritten" not in timeline.series("ci")["actions"]
    assert timeline.series("ci")["actions"]["rate_limited"][0] == 1
    quiet = timeline.series("other")  # a route nothing happened on
    assert (quiet["actions"], quiet["refusals"], quiet["budgets"]) == ({}, {}, [])


def test_a_clock_that_steps_back_counts_into_the_latest_minute():
    clock = Clock(T0 + 120)
    timeline = tl.Timeline(clock)
    timeline.decision("ci", "passed")
    clock.now = T0 + 30  # NTP stepped the wall clock back
    timeline.decision("ci", "passed")
    clock.now = T0 + 120
    assert timeline.series("ci")["actions"]["passed"][-1] == 2
    assert len(timeline.routes["ci"].minutes) == 1


def test_every_table_is_bounded_by_construction():
    clock = Clock()
    timeline = tl.Timeline(clock)
    for minute in range(3 * tl.MINUTES):  # three hours of traffic: one ring of an hour
        clock.now = T0 + minute * 60
        for n in range(40):  # more actions and causes than a minute keeps apart
            timeline.decision("ci", f"action-{n}")
            timeline.refusal("ci", f"limit-{n}")
    ring = timeline.routes["ci"].minutes
    assert len(ring) == tl.MINUTES and ring.maxlen == tl.MINUTES
    last = ring[-1]
    assert len(last.actions) == tl.MAX_KEYS + 1 and last.actions[tl.OTHER] == 40 - tl.MAX_KEYS
    assert len(last.refusals) == tl.MAX_KEYS + 1 and sum(last.refusals.values()) == 40
    for n in range(tl.MAX_ROUTES + 50):  # routes: the least recently active are forgotten
        timeline.decision(f"route-{n}", "passed")
    assert len(timeline.routes) == tl.MAX_ROUTES and "ci" not in timeline.routes
    for n in range(20):  # budget lines: a route has at most MAX_BUDGETS
        timeline.budgets("b", [{"kind": f"kind-{n}", "scope": f"kind-{n}:x", "tokens": 1.0, "limit": 5, "keys": 1}])
    assert len(timeline.routes["b"].budgets) == tl.MAX_BUDGETS
    assert {len(m.tokens) for m in timeline.routes["b"].minutes} == {tl.MAX_BUDGETS}


def test_budget_tokens_per_minute_keep_the_lowest_reading_and_fold_keyed_budgets():
    rules = parse_rules_text('[defaults.budget]\nrate = 60\nburst = 4\nkey = "session"\n'
                             '[global_budget]\nrate = 600\nburst = 50\n')
    policy = Policy(rules.defaults, rules.global_budget, route="g", state=BudgetState())
    clock = Clock(T0)
    timeline = tl.Timeline(clock)
    timeline.budgets("g", policy.gauges(0.0))  # nothing charged yet: full
    from bridge.model import Reminder

    clock.now = T0 + 60
    for session, n in (("a", 3), ("b", 1), ("c", 2)):  # 300 sessions would still be one line
        for _ in range(n):
            policy.charge(Reminder(body="x"), server="s", session=session, now=10.0)
    timeline.budgets("g", policy.gauges(10.0))
    timeline.budgets("g", policy.gauges(11.0))  # a second reading in the minute: the lowest stays
    series = timeline.series("g", live=policy.gauges(12.0))
    session, ceiling = series["budgets"]
    assert (session["kind"], session["label"], session["limit"], session["keys"]) == \
        ("session", "per session, the emptiest of 3", 4, 3)  # never a session's (or a peer's tag's) own name
    assert session["tokens"][-3:] == [None, 4.0, 1.0] and session["now"] == 3.0
    assert (ceiling["kind"], ceiling["label"]) == ("global", "global")
    assert ceiling["tokens"][-2:] == [50.0, 44.0] and ceiling["now"] == 50.0
    assert series["budgets"] == timeline.series("g", live=policy.gauges(12.0))["budgets"]  # reading is not charging


def test_refusals_reach_the_timeline_as_the_counters_count_them():
    recorder = Recorder(route="ci")
    feed = Feed(clock=Clock(T0))
    feed.attach([recorder])
    recorder.trust_refused("mcp", "max_body_bytes")
    recorder.budget_rejected("mcp", "session:abc", shadow=False)
    recorder.budget_rejected("mcp", "server:ci", shadow=True)
    recorder.reminder("rate_limited", protocol="mcp", method="m")
    series = feed.timeline.series("ci")
    assert {cause: counts[-1] for cause, counts in series["refusals"].items()} == \
        {"max_body_bytes": 1, "session budget": 1, "server budget (shadow)": 1}
    assert series["actions"] == {"rate_limited": [0] * 59 + [1]}
    assert recorder.trust_refusals[("mcp", "ci", "max_body_bytes")] == 1  # /metrics counts as before
