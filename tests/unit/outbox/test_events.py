"""Outbox events → reminders (docs/outbox.md): an event becomes a standard reminder, with defaults
and caps, and malformed events and answers are refused naming the field."""
from __future__ import annotations

import json

import pytest

from bridge.outbox.events import Malformed, answer_from_read, parse_answer, parse_event, plain, to_reminder
from tests.unit.outbox.link import NOTE, event


def test_event_becomes_a_standard_reminder():
    raw = event("evt_1", subject="acme.test", level="attention", title="acme.test\x1b[1m is\nactive",
                body="DNS\tpropagated.\x07", link={"resource": "acme://campaigns/1"})
    raw["data"] = {"nested": {"n": [1, 2.5, None]}, "ok": True}
    reminder = to_reminder("r|acme://n", parse_event(raw))
    assert reminder.body == "acme.test [1m is active\nDNS propagated."
    assert reminder.tags == ["domain.active", "level:attention"]
    assert reminder.dedupe_key == "domain.active:acme.test"
    assert reminder.meta["reminder-bridge/event"] == {"source": "r|acme://n", "event": raw}  # data verbatim
    assert reminder.role_hint == "user_block" and reminder.source == "bridge"
    assert reminder.id == to_reminder("r|acme://n", parse_event(raw)).id  # one event, one id
    assert reminder.id != to_reminder("other", parse_event(raw)).id


def test_event_defaults_and_caps():
    bare = to_reminder("s", parse_event(event("e1", name="job.done")))
    assert bare.body == "job.done" and bare.tags == ["job.done", "level:info"] and bare.dedupe_key is None
    long = to_reminder("s", parse_event(event("e2", title="t" * 300, body="b" * 3000)))
    title, body = long.body.split("\n")
    assert len(title) == 200 and title.endswith("…") and len(body) == 2000 and body.endswith("…")
    assert plain("a\x00b\x85c\u200bd", 10) == "a b c\u200bd"  # C0 and C1 go, other text stays


@pytest.mark.parametrize("mutate, says", [
    (lambda e: e.pop("eventId"), "`eventId`"),
    (lambda e: e.update(eventId="x\x00"), "`eventId`"),
    (lambda e: e.update(name="two words"), "`name`"),
    (lambda e: e.update(timestamp="yesterday"), "`timestamp`"),
    (lambda e: e.update(data=[1]), "`data`"),
    (lambda e: e.update(cursor=7), "`cursor`"),
    (lambda e: e.update(_meta=[]), "`_meta`"),
    (lambda e: e.update(_meta={NOTE: {"level": "critical"}}), "`level`"),
    (lambda e: e.update(_meta={NOTE: {"title": 3}}), "`title`"),
    (lambda e: e.update(_meta={NOTE: {"link": {"resource": "javascript:alert(1)"}}}), "`link.resource`"),
    (lambda e: e.update(data={"blob": "x" * 70_000}), "over the cap"),
])
def test_malformed_events_are_refused_with_the_field(mutate, says):
    raw = event("e1")
    mutate(raw)
    with pytest.raises(Malformed, match=says.replace("[", r"\[")):
        parse_event(raw)


@pytest.mark.parametrize("body, says", [
    ([], "not an object"), ({"events": {}}, "`events` is not an array"),
    ({"events": [], "cursor": ""}, "`cursor`"), ({"events": [], "hasMore": "yes"}, "`hasMore`"),
    ({"events": [], "nextPollMs": -1}, "`nextPollMs`"), ({"events": [0] * 5001}, "over the cap"),
    ({"events": [], "resultType": "input_required"}, "resultType"),
])
def test_malformed_answers_fail_the_poll(body, says):
    with pytest.raises(Malformed, match=says):
        parse_answer(body)


def test_answer_from_a_resource_read():
    answer = answer_from_read({"contents": [{"uri": "acme://n", "text": json.dumps({"events": [], "cursor": "9"})}]})
    assert (answer.cursor, answer.truncated, answer.has_more, answer.next_poll_ms) == ("9", False, False, None)
    with pytest.raises(Malformed, match="not JSON"):
        answer_from_read({"contents": [{"uri": "acme://n", "text": "<html>"}]})
