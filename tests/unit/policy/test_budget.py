"""Budgets (spec §7) as pure policy with an injected clock: exact token-bucket shares, the
structured refusal a request gets, the global ceiling, shadow, bounded state, reload survival."""
from __future__ import annotations

import tracemalloc

from bridge.model import Reminder
from bridge.policy import BUDGET_CODE, BudgetState, Policy
from bridge.rules import parse_rules_text


def settings(budget: str = "", trust: str = ""):
    text = ""
    if budget:
        text += "[defaults.budget]\n" + budget + "\n"
    if trust:
        text += "[defaults.trust]\n" + trust + "\n"
    return parse_rules_text(text).defaults


def rules(text: str):
    return parse_rules_text(text)


R = Reminder(id="r1", body="Rebase first.", tags=["git"], dedupe_key="k")


def admitted(policy: Policy, n: int, now: float, **kw) -> int:
    kw.setdefault("server", "fs")
    kw.setdefault("session", "s1")
    return sum(policy.admit(R, request=False, now=now, **kw).ok for _ in range(n))


def test_a_flood_gets_exactly_the_bucket_share():
    policy = Policy(settings("rate = 60\nburst = 10"), state=BudgetState())
    assert admitted(policy, 10_000, now=100.0) == 10  # the burst, then nothing
    assert admitted(policy, 10_000, now=105.0) == 5  # 60/min = one token a second
    assert admitted(policy, 10_000, now=105.5) == 0
    assert admitted(policy, 10_000, now=1000.0) == 10  # refilled to the burst, never above


def test_a_refused_request_says_when_to_retry_and_what_the_limit_is():
    policy = Policy(settings("rate = 30\nburst = 2"), state=BudgetState())
    assert admitted(policy, 2, now=0.0) == 2
    verdict = policy.admit(R, request=True, server="fs", session="s1", now=0.5)
    assert not verdict.ok
    code, message, data = verdict.error()
    assert (code, message) == (BUDGET_CODE, "reminder budget exceeded")
    # 30/min = one token every 2 s; 0.25 of a token came back in 0.5 s, so 1.5 s to go
    assert data == {"retryAfterMs": 1500, "limit": 2, "remaining": 0, "scope": "server:fs"}
    assert policy.admit(R, request=True, server="fs", session="s1", now=2.0).ok


def test_session_and_tag_keys_get_their_own_buckets():
    policy = Policy(settings('rate = 60\nburst = 1\nkey = "session"'), state=BudgetState())
    assert admitted(policy, 5, now=0.0, session="a") == 1
    assert admitted(policy, 5, now=0.0, session="b") == 1

    policy = Policy(settings('rate = 60\nburst = 1\nkey = "tag"'), state=BudgetState())
    two_tags = Reminder(body="x", tags=["deploy", "ci"])
    assert policy.admit(two_tags, request=False, server="fs", session="s", now=0.0).ok
    ci_only = Reminder(body="x", tags=["ci"])
    verdict = policy.admit(ci_only, request=False, server="fs", session="s", now=0.0)
    assert verdict.exceeded.scope == "tag:ci"  # a reminder pays into every tag it carries
    untagged = Reminder(body="x")
    assert policy.admit(untagged, request=False, server="fs", session="s", now=0.0).ok
    assert not policy.admit(untagged, request=False, server="fs", session="s", now=0.0).ok


def test_a_refusal_charges_nothing_and_reports_the_most_constrained_bucket():
    state = BudgetState()
    parsed = rules('[defaults.budget]\nrate = 60\nburst = 5\nkey = "tag"\n[global_budget]\nrate = 6\nburst = 2\n')
    policy = Policy(parsed.defaults, parsed.global_budget, state=state)
    a = Reminder(body="x", tags=["a"])
    assert policy.admit(a, request=False, server="fs", session="s", now=0.0).ok
    assert policy.admit(a, request=False, server="fs", session="s", now=0.0).ok
    verdict = policy.admit(a, request=True, server="fs", session="s", now=0.0)
    assert verdict.error()[2] == {"retryAfterMs": 10_000, "limit": 2, "remaining": 0, "scope": "global"}
    # the tag bucket was not charged for the refused one: 3 of its 5 tokens are left
    assert Policy(parsed.defaults, state=state).admit(a, request=False, server="fs", session="s", now=0.0).ok


def test_the_global_ceiling_is_shared_by_every_route():
    state = BudgetState()
    parsed = rules('[global_budget]\nrate = 60\nburst = 3\n')
    one = Policy(parsed.defaults, parsed.global_budget, route="one", state=state)
    two = Policy(parsed.defaults, parsed.global_budget, route="two", state=state)
    assert admitted(one, 2, now=0.0) == 2
    assert admitted(two, 5, now=0.0) == 1


def test_shadow_admits_everything_and_reports_what_it_would_have_limited():
    policy = Policy(settings("rate = 60\nburst = 2\nshadow = true"), state=BudgetState())
    verdicts = [policy.admit(R, request=True, server="fs", session="s", now=0.0) for _ in range(5)]
    assert all(v.ok for v in verdicts)
    assert [v.shadowed is not None for v in verdicts] == [False, False, True, True, True]
    assert verdicts[-1].shadowed.scope == "server:fs"


def test_observe_stage_counts_as_shadow():
    policy = Policy(settings("rate = 60\nburst = 1"), state=BudgetState())
    verdicts = [policy.admit(R, request=False, server="fs", session="s", now=0.0, shadow=True) for _ in range(3)]
    assert all(v.ok for v in verdicts) and sum(v.shadowed is not None for v in verdicts) == 2


def test_a_flood_of_distinct_keys_stays_within_max_keys():
    """Budget state is bounded by `max_keys` however many sessions or tags show up."""
    state = BudgetState()
    policy = Policy(settings('rate = 60\nburst = 1\nkey = "session"\nmax_keys = 1000'), state=state)
    for i in range(100_000):
        policy.charge(R, server="fs", session=i, now=i * 1e-6)
    assert state.keys_held() == 1000
    tracemalloc.start()  # every live bucket is replaced under tracing, then 10,000 more keys must cost nothing
    try:
        for i in range(100_000, 110_000):
            policy.charge(R, server="fs", session=i, now=i * 1e-6)
        base, _ = tracemalloc.get_traced_memory()
        for i in range(110_000, 120_000):
            policy.charge(R, server="fs", session=i, now=i * 1e-6)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert state.keys_held() == 1000
    assert after - base < 16 * 1024, f"budget state grew by {after - base} bytes over 10,000 new keys"


def test_idle_buckets_expire_only_once_they_would_be_full_again():
    state = BudgetState()
    policy = Policy(settings('rate = 60\nburst = 2\nkey = "session"'), state=state)
    assert admitted(policy, 2, now=0.0, session="a") == 2
    assert state.keys_held() == 1
    assert admitted(policy, 5, now=1.0, session="b") == 2  # "a" is one token short of full: kept
    assert state.keys_held() == 2
    assert admitted(policy, 1, now=2.5, session="c") == 1  # 2 s after its last charge "a" is full: gone
    assert state.keys_held() == 2


def test_a_reload_keeps_the_tokens_of_keys_that_survive():
    state = BudgetState()
    old = Policy(settings("rate = 60\nburst = 10"), route="fs", state=state)
    assert admitted(old, 100, now=0.0) == 10
    new = Policy(settings("rate = 120\nburst = 20"), route="fs", state=state)  # same key: server "fs"
    assert admitted(new, 100, now=0.0) == 0  # still empty: a reload is no way around the budget
    assert admitted(new, 100, now=1.0) == 2  # refilling at the new rate
    by_session = Policy(settings('rate = 60\nburst = 10\nkey = "session"'), route="fs", state=state)
    assert admitted(by_session, 100, now=1.0) == 10  # a new key kind: new buckets
